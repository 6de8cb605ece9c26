"""The work of a move (edge cells written and read, counted by Tree.work) is the actor's own: it
does not grow once some position has widened the tree's arrays, nor with a wide neighbour in the
batch."""
import cshogi
import numpy as np
import pytest
from conftest import FunctionEvaluator

from azshogi.search.gumbel import GumbelSearch
from azshogi.search.puct import PuctSearch
from azshogi.shogi.rules import Rules

WIDE = "4k4/9/9/9/9/9/9/9/4K4 b 2R2B4G4S4N4L17P 1"  # 525 legal moves (drops)


def peaked(f1, f2):
    """A deterministic network: logits and value a fixed function of the planes."""
    n = len(f1)
    seed = (f1.reshape(n, -1)[:, ::5].sum(axis=1) * 7 + f2[:, :, 0, 0].sum(axis=1)).astype(np.int64)
    logits = np.stack([np.random.default_rng(int(s)).normal(0, 2, 2187) for s in seed]).astype(np.float32)
    return logits, ((seed % 97) / 97.0).astype(np.float32)


def openings(count=4, plies=12):
    boards, rng = [], np.random.default_rng(3)
    for _ in range(count):
        board = cshogi.Board()
        for _ in range(plies):
            moves = list(board.legal_moves)
            board.push(moves[int(rng.integers(len(moves)))])
        boards.append(board)
    return boards


def searches():
    return {"gumbel": lambda n: GumbelSearch(FunctionEvaluator(peaked), Rules(), n, num_simulations=16,
                                             max_num_considered_actions=8),
            "puct": lambda n: PuctSearch(FunctionEvaluator(peaked), Rules(), n, num_simulations=16,
                                         leaves_per_step=2)}


def move_work(search, boards, noise=None) -> int:
    """Tree.work of one search of `boards` (the same random streams every time)."""
    kwargs = {} if noise is None else {"noise": noise}
    before = search.simulator.tree.work
    search.run(boards, np.full(len(boards), 12), [np.random.default_rng(i) for i in range(len(boards))], **kwargs)
    return search.simulator.tree.work - before


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_a_wide_position_once_does_not_make_later_moves_cost_more(kind):
    search = searches()[kind](4)
    short = openings()
    move_work(search, short)
    fresh = move_work(search, short)
    move_work(search, [cshogi.Board(WIDE)] * 4)  # widens the arrays for good
    assert search.tree.width >= 525
    move_work(search, short)  # clears what the wide nodes left in the reused rows, once
    assert move_work(search, short) == fresh


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_a_wide_neighbour_adds_only_its_own_work(kind):
    make = searches()[kind]
    short, wide = openings(), [cshogi.Board(WIDE)]
    alone = move_work(make(4), short) + move_work(make(1), wide)
    together = move_work(make(5), short + wide)
    # Only the number of candidate columns (at most simulations + 1) is shared within a step.
    assert together <= 1.1 * alone
