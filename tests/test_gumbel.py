"""Gumbel AlphaZero: sequential halving, legality, and finding a mate (the formulas:
test_search_formulas.py; the whole algorithm against a reference: test_search_golden.py)."""
import cshogi
import numpy as np
import pytest
from conftest import FunctionEvaluator, uniform_evaluator

from azshogi.search import GumbelSearch, considered_visit_sequence
from azshogi.search.formulas import completed_q, sigma
from azshogi.shogi import features
from azshogi.shogi.rules import Rules


@pytest.mark.parametrize("m, n, expected", [
    (2, 4, [0, 0, 1, 1]),
    (4, 8, [0, 0, 0, 0, 1, 1, 2, 2]),
    (16, 32, [0] * 16 + [1] * 8 + [2, 2, 2, 2, 3, 3, 3, 3]),
    (1, 3, [0, 1, 2]),
    (3, 5, [0, 0, 0, 1, 1]),
])
def test_sequential_halving_table(m, n, expected):
    assert list(considered_visit_sequence(m, n)) == expected


@pytest.mark.parametrize("m, n", [(2, 2), (4, 16), (8, 50), (16, 32), (16, 64), (7, 100), (16, 8)])
def test_sequential_halving_budget(m, n):
    table = considered_visit_sequence(m, n)
    assert len(table) == n
    # Replaying the table: each simulation finds an action with the required count, and the
    # set of actions still visited halves phase by phase.
    visits = np.zeros(m, int)
    for target in table:
        candidates = np.flatnonzero(visits == target)
        assert candidates.size, "the table asked for a visit count no action has"
        visits[candidates[0]] += 1
    assert visits.sum() == n
    assert (visits > 0).sum() == min(m, n)


def test_illegal_labels_are_never_chosen():
    boards = [cshogi.Board(), cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 b G 1"),
              cshogi.Board("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1")]
    legal_labels = [set(features.legal_moves_and_labels(b)[1]) for b in boards]

    def adversarial(f1, f2):
        # Huge logits on every label that is illegal at the roots.
        logits = np.zeros((len(f1), 2187), np.float32)
        logits[:, :] = 50.0
        for labels in legal_labels:
            logits[:, list(labels)] = 0.0
        return logits, np.full(len(f1), 0.5, np.float32)

    search = GumbelSearch(FunctionEvaluator(adversarial), Rules(), len(boards), num_simulations=16,
                          max_num_considered_actions=8)
    result = search.run(boards, np.zeros(3, np.int64), [np.random.default_rng(i) for i in range(3)])
    for i, board in enumerate(boards):
        assert board.is_legal(int(result.moves[i]))
        n = result.num_edges[i]
        assert n == len(legal_labels[i])
        assert set(result.labels[i, :n].tolist()) == legal_labels[i]
        assert result.policy[i, :n].sum() == pytest.approx(1.0, abs=1e-5)
        assert result.policy[i, n:].sum() == 0


MATE_IN_ONE = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"  # G*5b mates


def mate_oracle(root_sfen):
    """A value network that knows, for every position one ply from the root, whether the side
    to move is mated (a loss) — keyed by its input features."""
    known = {}
    board = cshogi.Board(root_sfen)
    f1, f2 = features.allocate(1)
    for move in list(board.legal_moves):
        board.push(move)
        features.write(board, f1, f2, 0)
        known[f1[0].tobytes() + f2[0].tobytes()] = 0.0 if board.is_game_over() else 0.5
        board.pop()

    def fn(x1, x2):
        values = np.array([known.get(a.tobytes() + b.tobytes(), 0.5) for a, b in zip(x1, x2)], np.float32)
        return np.zeros((len(x1), 2187), np.float32), values

    return FunctionEvaluator(fn)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_search_finds_mate_in_one_with_a_value_oracle(seed):
    board = cshogi.Board(MATE_IN_ONE)
    mate = board.move_from_usi("G*5b")
    num_legal = len(list(board.legal_moves))
    # With all actions considered, the Gumbel choice samples the improved policy; 8 visits per
    # legal move make sigma(q) of the mate large enough that the sample is the mate.
    search = GumbelSearch(mate_oracle(MATE_IN_ONE), Rules(), 1, num_simulations=8 * num_legal,
                          max_num_considered_actions=num_legal, leaf_mate_search=False)
    result = search.run([board], np.zeros(1, np.int64), [np.random.default_rng(seed)])
    assert result.moves[0] == mate
    assert board.sfen() == MATE_IN_ONE  # the board is back where it started


def test_search_finds_mate_through_terminal_leaves():
    # No oracle: the rules see that the position after G*5b has no legal move.
    board = cshogi.Board(MATE_IN_ONE)
    num_legal = len(list(board.legal_moves))
    search = GumbelSearch(uniform_evaluator(), Rules(), 1, num_simulations=8 * num_legal,
                          max_num_considered_actions=num_legal, leaf_mate_search=False)
    result = search.run([board], np.zeros(1, np.int64), [np.random.default_rng(3)])
    assert cshogi.move_to_usi(int(result.moves[0])) == "G*5b"


def test_batched_actors_search_independently():
    # Several actors in one batch: each returns a legal move for its own board.
    boards = [cshogi.Board() for _ in range(5)]
    boards[1].push_usi("7g7f")
    boards[2].set_sfen(MATE_IN_ONE)
    search = GumbelSearch(uniform_evaluator(), Rules(), 5, num_simulations=8, max_num_considered_actions=4)
    result = search.run(boards, np.zeros(5, np.int64), [np.random.default_rng(i) for i in range(5)])
    for board, move in zip(boards, result.moves):
        assert board.is_legal(int(move))
    assert result.visits.sum(axis=1).tolist() == [8] * 5


@pytest.mark.parametrize("rescale", [True, False])
def test_root_sigma_equals_sigma_on_the_considered_columns(rescale):
    from azshogi.search.formulas import root_sigma
    from azshogi.search.tree import masked_softmax

    rng = np.random.default_rng(0)
    rows, width, m = 6, 40, 8
    logits = rng.standard_normal((rows, width)).astype(np.float32)
    legal = np.array([40, 30, 8, 5, 12, 40])
    logits[np.arange(width)[None, :] >= legal[:, None]] = -np.inf
    considered = np.zeros((rows, width), bool)
    columns = np.zeros((rows, m), np.int64)
    for r in range(rows):
        columns[r] = np.concatenate([rng.permutation(legal[r])[:min(m, legal[r])], np.zeros(max(0, m - legal[r]), int)])
        considered[r, columns[r, :min(m, legal[r])]] = True
    visits = np.where(considered, rng.integers(0, 4, (rows, width)), 0).astype(np.float32)
    visits[2] = np.where(considered[2], 3, 0)  # every legal action visited: v_mix not in the range
    value_sum = visits * rng.uniform(-1, 1, (rows, width)).astype(np.float32)
    node_value = rng.uniform(-1, 1, rows).astype(np.float32)
    valid = np.isfinite(logits)
    full = sigma(completed_q(logits, visits, value_sum, node_value), visits, valid, 50.0, 0.1, rescale)
    in_play = np.arange(m)[None, :] < np.minimum(legal, m)[:, None]
    prior = np.take_along_axis(masked_softmax(logits), columns, axis=1)
    part = root_sigma(prior, np.take_along_axis(visits, columns, axis=1),
                      np.take_along_axis(value_sum, columns, axis=1), node_value, in_play, legal > m, 50.0, 0.1,
                      rescale)
    expected = np.take_along_axis(full, columns, axis=1)
    diff = np.abs(np.where(in_play, part - expected, 0))
    assert diff.max() < 1e-4, (diff.max(axis=1), legal)
