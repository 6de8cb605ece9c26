"""Mirror symmetry (features.MIRROR_LABELS, mirror_planes, ReplayBuffer.sample(mirror=True)):
a position and its mirror image (files reflected, built independently from its SFEN) give
mirrored feature planes, mirrored legal moves and mirrored policy labels."""
from __future__ import annotations

import cshogi
import numpy as np

from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions
from azshogi.train.replay import ReplayBuffer


def _cells(rank: str) -> list[str]:
    """The nine cells of an SFEN rank, file 9 first ('1' = empty)."""
    cells, i = [], 0
    while i < len(rank):
        if rank[i] == "+":
            cells.append(rank[i:i + 2])
            i += 2
        elif rank[i].isdigit():
            cells += ["1"] * int(rank[i])
            i += 1
        else:
            cells.append(rank[i])
            i += 1
    return cells


def _rank(cells: list[str]) -> str:
    out, empty = "", 0
    for cell in cells:
        if cell == "1":
            empty += 1
            continue
        out += (str(empty) if empty else "") + cell
        empty = 0
    return out + (str(empty) if empty else "")


def mirror_sfen(sfen: str) -> str:
    board, turn, hand, number = sfen.split()
    return " ".join(["/".join(_rank(_cells(r)[::-1]) for r in board.split("/")), turn, hand, number])


def mirror_usi(move: str) -> str:
    def file(c: str) -> str:
        return str(10 - int(c))

    if move[1] == "*":  # a drop: P*5e
        return move[:2] + file(move[2]) + move[3:]
    return file(move[0]) + move[1] + file(move[2]) + move[3:]


def random_positions(count: int, seed: int = 0) -> list[cshogi.Board]:
    """Positions from random games: both sides to move, captures in hand, promotions."""
    rng = np.random.default_rng(seed)
    boards = []
    while len(boards) < count:
        board = cshogi.Board()
        for _ in range(int(rng.integers(20, 120))):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(moves[rng.integers(len(moves))])
        if any(True for _ in board.legal_moves):
            boards.append(cshogi.Board(board.sfen()))
    return boards


def test_the_label_mirror_is_an_involution_on_all_labels():
    m = features.MIRROR_LABELS
    assert sorted(m.tolist()) == list(range(features.NUM_LABELS))
    assert np.array_equal(m[m], np.arange(features.NUM_LABELS))
    assert not np.array_equal(m, np.arange(features.NUM_LABELS))


def test_a_position_and_its_mirror_image_give_mirrored_planes_moves_and_labels():
    boards = random_positions(12)
    assert {b.turn for b in boards} == {cshogi.BLACK, cshogi.WHITE}
    for board in boards:
        mirror = cshogi.Board(mirror_sfen(board.sfen()))
        f1, f2 = features.allocate(2)
        features.write(board, f1, f2, 0)
        features.write(mirror, f1, f2, 1)
        assert np.array_equal(features.mirror_planes(f1[0]), f1[1])
        assert np.array_equal(f2[0], f2[1])  # pieces in hand and check: unchanged
        moves = {cshogi.move_to_usi(m): m for m in board.legal_moves}
        mirrored = {cshogi.move_to_usi(m): m for m in mirror.legal_moves}
        assert {mirror_usi(u) for u in moves} == set(mirrored)
        for usi, move in moves.items():
            label = features.move_label(move, board.turn)
            assert features.MIRROR_LABELS[label] == features.move_label(mirrored[mirror_usi(usi)], mirror.turn)


def _record(board: cshogi.Board, game_id: int) -> TrainingPositions:
    """One training position whose policy target favours its legal moves unevenly."""
    moves, labels = features.legal_moves_and_labels(board)
    probs = np.arange(1, len(labels) + 1, dtype=np.float32)
    return TrainingPositions.of_game(game_id, features.hcp_of(board)[None], [1], np.array([0.25], np.float32), [40],
                                     [len(labels)], labels, probs / probs.sum())


def test_a_mirrored_training_position_is_the_mirror_image_with_its_target_mirrored():
    boards = random_positions(4, seed=3)
    buffer = ReplayBuffer(10)
    for i, board in enumerate(boards):
        buffer.extend(_record(board, i))
    slots = np.arange(len(boards))
    plain = buffer.gather(slots)
    flipped = buffer.gather(slots, np.array([True, False, True, True]))
    for i, board in enumerate(boards):
        if i == 1:
            assert np.array_equal(flipped.features1[i], plain.features1[i])
            assert np.array_equal(flipped.policy[i], plain.policy[i])
            continue
        mirror = cshogi.Board(mirror_sfen(board.sfen()))
        f1, f2 = features.allocate(1)
        features.write(mirror, f1, f2, 0)
        assert np.array_equal(flipped.features1[i], f1[0]) and np.array_equal(flipped.features2[i], f2[0])
        # the mirrored move gets the original move's probability
        for move in board.legal_moves:
            target = flipped.policy[i, features.move_label(mirror.move_from_usi(mirror_usi(cshogi.move_to_usi(move))),
                                                           mirror.turn)]
            assert target == plain.policy[i, features.move_label(move, board.turn)]
        assert np.isclose(flipped.policy[i].sum(), 1.0)
    assert np.array_equal(flipped.result, plain.result) and np.array_equal(flipped.root_value, plain.root_value)


def test_sampling_with_mirror_mirrors_about_half_the_positions():
    board = random_positions(1, seed=5)[0]
    buffer = ReplayBuffer(10)
    buffer.extend(_record(board, 0))
    f1, f2 = features.allocate(1)
    features.write(board, f1, f2, 0)
    batch = buffer.sample(400, np.random.default_rng(0), mirror=True)
    plain = np.array([np.array_equal(x, f1[0]) for x in batch.features1])
    assert 150 < plain.sum() < 250
    assert all(np.array_equal(x, features.mirror_planes(f1[0])) for x in batch.features1[~plain])
    unmirrored = buffer.sample(50, np.random.default_rng(0))
    assert all(np.array_equal(x, f1[0]) for x in unmirrored.features1)
