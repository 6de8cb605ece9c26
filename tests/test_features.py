"""Features and labels are dlshogi's, through cshogi."""
import cshogi
import numpy as np
from cshogi import dlshogi

from azshogi.shogi import features


def random_positions(count, seed=0, max_plies=120):
    rng = np.random.default_rng(seed)
    board = cshogi.Board()
    out = []
    while len(out) < count:
        board.reset()
        for _ in range(max_plies):
            moves = list(board.legal_moves)
            if not moves:
                break
            out.append(board.copy())
            board.push(int(moves[rng.integers(len(moves))]))
    return out[:count]


def test_features_are_cshogis():
    boards = random_positions(40)
    f1, f2 = features.allocate(len(boards))
    for i, board in enumerate(boards):
        features.write(board, f1, f2, i)
    for i, board in enumerate(boards):
        e1 = np.zeros((62, 9, 9), np.float32)
        e2 = np.zeros((57, 9, 9), np.float32)
        dlshogi.make_input_features(board, e1, e2)
        assert np.array_equal(f1[i], e1) and np.array_equal(f2[i], e2)


def test_features_from_hcp_match_the_board():
    boards = random_positions(20, seed=1)
    hcps = np.stack([features.hcp_of(b) for b in boards])
    f1, f2 = features.allocate(len(boards))
    features.write_from_hcps(hcps, f1, f2)
    g1, g2 = features.allocate(len(boards))
    for i, board in enumerate(boards):
        features.write(board, g1, g2, i)
    assert np.array_equal(f1, g1) and np.array_equal(f2, g2)


def test_labels_round_trip_over_random_games():
    for board in random_positions(300, seed=2):
        moves, labels = features.legal_moves_and_labels(board)
        moves, labels = moves.tolist(), labels.tolist()
        assert all(0 <= lab < features.NUM_LABELS for lab in labels)
        assert labels == [dlshogi.make_move_label(m, board.turn) for m in moves]
        # A label names exactly one legal move: label -> move -> label is the identity.
        back = dict(zip(labels, moves))
        assert len(back) == len(moves)
        for m, lab in zip(moves, labels):
            assert back[lab] == m


def test_label_table_is_cshogis_for_both_colours():
    for board in random_positions(200, seed=6):
        moves = np.array(list(board.legal_moves), np.int64)
        for turn in (0, 1):  # labels of the same move shapes as the other side would see them
            expected = [dlshogi.make_move_label(int(m), turn) for m in moves]
            assert features.labels_of(moves, turn).tolist() == expected
