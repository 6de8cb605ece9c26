"""Golden tests of both search families: every output of a batched search (the move, the root's
visit counts, the policy target, the root value) equals what the reference searches of
search_reference.py, written from the papers' definitions, compute for the same network and
the same random streams. A network fixed per position (its outputs a hash of the input planes)
makes every node's prior and value differ, so each part of the algorithm leaves its mark."""
import zlib

import cshogi
import numpy as np
import pytest
from conftest import FunctionEvaluator
from search_reference import GumbelReference, PuctReference

from azshogi.config import SearchConfig, SearchKind
from azshogi.search import make_search
from azshogi.shogi.rules import Rules

POSITIONS = [
    "4k4/9/4p4/9/9/9/4P4/9/4K4 b - 1",  # kings and pawns: 6 legal moves
    "3gk4/9/9/9/9/9/9/9/4K4 w - 1",  # white king and gold against a lone king
    "4k4/9/9/9/9/9/9/3PPP3/3GKG3 b - 1",  # a small fortress
    cshogi.STARTING_SFEN,  # 30 moves: more than any m below
]
RULES = Rules()


def keyed_network(f1: np.ndarray, f2: np.ndarray):
    """Logits N(0, 1) and a win probability in [0.05, 0.95], fixed per position."""
    logits = np.empty((len(f1), 2187), np.float32)
    probability = np.empty(len(f1), np.float32)
    for i in range(len(f1)):
        rng = np.random.default_rng(zlib.crc32(f1[i].tobytes() + f2[i].tobytes()))
        logits[i] = rng.normal(size=2187)
        probability[i] = rng.uniform(0.05, 0.95)
    return logits, probability


def boards_and_plies():
    boards = [cshogi.Board(sfen) for sfen in POSITIONS]
    return boards, np.array([0, 7, 30, 0], np.int64)


def check_against(result, i, reference, board):
    n = int(result.num_edges[i])
    moves = result.edge_moves[i, :n].tolist()
    assert sorted(moves) == sorted(reference.root.moves)
    column = {m: c for c, m in enumerate(moves)}
    order = [column[m] for m in reference.root.moves]
    assert cshogi.move_to_usi(int(result.moves[i])) == cshogi.move_to_usi(reference.root.moves[reference.move])
    np.testing.assert_array_equal(result.visits[i, order], reference.root.visits)
    np.testing.assert_allclose(result.policy[i, order], reference.policy, rtol=0, atol=2e-5)
    assert result.root_value[i] == pytest.approx(reference.root_value(), abs=2e-5)
    assert board.sfen() == reference.board.sfen()  # both walked back to the root


def search_for(num_actors, **settings):
    """The search a run with these `search.` settings plays (through make_search)."""
    return make_search(SearchConfig(leaf_mate_search=False, **settings), FunctionEvaluator(keyed_network), RULES,
                       num_actors)


@pytest.mark.parametrize("n, m, rescale, c_visit, c_scale", [
    (16, 4, True, 50.0, 0.1),
    (5, 4, True, 50.0, 0.1),  # one move ends with 2 visits, three with 1
    (32, 2, True, 50.0, 0.1),
    (24, 16, False, 50.0, 0.1),  # every move of the small positions considered
    (12, 8, False, 10.0, 1.0),
])
def test_gumbel_search_equals_the_reference(n, m, rescale, c_visit, c_scale):
    boards, plies = boards_and_plies()
    search = search_for(len(boards), num_simulations=n, max_num_considered_actions=m, c_visit=c_visit,
                        c_scale=c_scale, rescale_values=rescale)
    seeds = [10 * n + i for i in range(len(boards))]
    result = search.run(boards, plies, [np.random.default_rng(s) for s in seeds])
    for i, board in enumerate(boards):
        reference = GumbelReference(keyed_network, RULES, board, int(plies[i]), np.random.default_rng(seeds[i]),
                                    n, m, c_visit=c_visit, c_scale=c_scale, rescale=rescale)
        check_against(result, i, reference, board)


def test_gumbel_plays_a_most_visited_move():
    # 5 simulations on 4 considered moves: sequential halving gives one of them a second visit;
    # the move played is that one, whatever g + logits + sigma of the others.
    boards, plies = boards_and_plies()
    search = search_for(len(boards), num_simulations=5, max_num_considered_actions=4)
    for seed in range(8):
        result = search.run(boards, plies, [np.random.default_rng([seed, i]) for i in range(len(boards))])
        for i in range(len(boards)):
            chosen = result.edge_moves[i].tolist().index(int(result.moves[i]))
            assert result.visits[i, chosen] == 2 == result.visits[i].max(), (seed, i)


def test_gumbel_sampling_draws_from_the_improved_policy():
    boards, plies = boards_and_plies()
    search = search_for(len(boards), num_simulations=16, max_num_considered_actions=4)
    for seed in range(3):
        result = search.run(boards, plies, [np.random.default_rng([seed, i]) for i in range(len(boards))],
                            sample=np.ones(len(boards), bool))
        for i, board in enumerate(boards):
            reference = GumbelReference(keyed_network, RULES, board, int(plies[i]), np.random.default_rng([seed, i]),
                                        16, 4, sample=True)
            check_against(result, i, reference, board)


@pytest.mark.parametrize("noise, sample", [(True, False), (False, False), (True, True)])
def test_puct_search_equals_the_reference(noise, sample):
    boards, plies = boards_and_plies()
    search = search_for(len(boards), kind=SearchKind.puct, num_simulations=24, leaves_per_step=1,
                        dirichlet_alpha=0.3, c_init=2.0, c_base=50.0)
    seeds = [100 + i for i in range(len(boards))]
    result = search.run(boards, plies, [np.random.default_rng(s) for s in seeds],
                        sample=np.full(len(boards), sample), noise=noise)
    for i, board in enumerate(boards):
        reference = PuctReference(keyed_network, RULES, board, int(plies[i]), np.random.default_rng(seeds[i]), 24,
                                  c_base=50.0, c_init=2.0, dirichlet_alpha=0.3, noise=noise, sample=sample)
        check_against(result, i, reference, board)
