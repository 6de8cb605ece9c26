"""The engine's descents: many per tree and forward pass, walked together level by level
(Simulator.simulate_together with GameSearch's shares, formulas.puct_shares).

What changed from today's sequential virtual-loss descents (Simulator.simulate) is stated by
`reference_step` below and checked against it:
- a descent that collides (ends on a leaf another descent of the step has just added) keeps its
  virtual loss until the step ends, so later descents go elsewhere (simulate's collisions add
  none, so every later descent of the step repeated the same collision);
- each node's N(s) in PUCT's exploration term and its first-play urgency are read once, before
  the step: the virtual losses of the step change only the chosen edges' own Q and U.
With one descent per step nothing of that applies, and the search is today's, visit for visit.
"""
import collections

import cshogi
import numpy as np
import pytest
from conftest import FunctionEvaluator

from azshogi.search.anytime import GameSearch
from azshogi.search.formulas import first_play_urgency, puct_scores, puct_shares
from azshogi.search.simulator import TREE_REPETITION_PLIES
from azshogi.search.tree import masked_softmax
from azshogi.shogi.rules import Rules, outcome

MID11 = "7g7f 3c3d 2g2f 8c8d 2f2e 8d8e 6i7h 4a3b 2e2d 2c2d 2h2d".split()


_RNG = np.random.default_rng(0)
_SQUARES, _DIRECTIONS = _RNG.normal(0, 0.3, (62, 81)), _RNG.normal(0, 0.3, (57, 27))


def row_evaluator():
    """An evaluator whose answer for a row depends on that row's features only (fixed random
    weights), so that batching cannot change it."""

    def fn(f1, f2):
        n = len(f1)
        squares = (f1.reshape(n, 62, 81) * _SQUARES).sum(axis=1)
        directions = f2.reshape(n, 57, 81).sum(axis=2) @ _DIRECTIONS
        logits = (directions[:, :, None] + squares[:, None, :]).reshape(n, 2187).astype(np.float32)
        value = 1 / (1 + np.exp(-squares.sum(axis=1) / 20))
        return logits, value.astype(np.float32)

    return FunctionEvaluator(fn)


def start(moves=(), **options):
    search = GameSearch(row_evaluator(), Rules(max_plies=60), max_tree_nodes=100_000, **options)
    board = cshogi.Board()
    for m in moves:
        board.push_usi(m)
    search.prepare(board, "", list(moves))
    return search, board


def edge_stats(tree, game=0):
    """{path of moves: (visits, value sum)} of every visited edge of a tree."""
    out, stack = {}, [(0, ())]
    while stack:
        node, path = stack.pop()
        for e in range(tree.num_edges[game, node]):
            key = path + (int(tree.edge_move[game, node, e]),)
            if tree.edge_visits[game, node, e]:
                out[key] = (float(tree.edge_visits[game, node, e]), round(float(tree.edge_value_sum[game, node, e]), 3))
            if tree.edge_child[game, node, e] >= 0:
                stack.append((int(tree.edge_child[game, node, e]), key))
    return out


def todays_select(search):
    """Today's GameSearch._select: PUCT with first-play urgency on the current statistics."""
    tree = search.tree

    def select(actors, nodes, depth):
        prior = masked_softmax(tree.edge_logit[actors, nodes])
        visits = tree.edge_visits[actors, nodes]
        fpu = first_play_urgency(tree.node_value[actors, nodes], prior, visits, search.fpu_reduction)
        return puct_scores(prior, visits, tree.edge_value_sum[actors, nodes], tree.valid(actors, nodes),
                           search.c_base, search.c_init, fpu).argmax(axis=1)

    return select


def reference_step(search, board, ply, leaves):
    """`leaves` descents one after another. Each adds a virtual loss to every edge it takes, the
    collided ones included; each node's N(s) and first-play urgency are those before the step; a
    new leaf is prepared at once (a game end is known to the next descents); the other new
    leaves are evaluated together at the end; then every descent but the collided ones backs up
    one visit and its leaf's value, and the virtual losses go."""
    tree, vl = search.tree, search.virtual_loss
    arrivals, before, paths, pending = collections.Counter(), {}, [], []
    batch = search.simulator.evaluator.allocate(leaves)
    for _ in range(leaves):
        node, path = 0, []
        while True:
            if node not in before:  # whole rows: sums over padding are exact (tree.edge_sum)
                prior = masked_softmax(tree.edge_logit[0:1, node])
                visits = tree.edge_visits[0:1, node]
                fpu = first_play_urgency(tree.node_value[0:1, node], prior, visits, search.fpu_reduction)
                before[node] = (prior, visits.sum(axis=1, keepdims=True), fpu)
            prior, parent, fpu = before[node]
            k = np.array([[arrivals[node, e] for e in range(tree.width)]], np.float32) * np.float32(vl)
            scores = puct_scores(prior, tree.edge_visits[0:1, node] + k, tree.edge_value_sum[0:1, node] - k,
                                 tree.valid(np.zeros(1, np.int64), np.array([node])), search.c_base, search.c_init,
                                 fpu, parent_visits=parent)
            edge = int(scores.argmax())
            arrivals[node, edge] += 1
            path.append((node, edge))
            child = int(tree.edge_child[0, node, edge])
            if child < 0:  # a new leaf
                child = tree.add_node(0)
                tree.edge_child[0, node, edge] = child
                line = [int(tree.edge_move[0, a, b]) for a, b in path]
                for m in line:
                    board.push(m)
                legal = list(board.legal_moves)
                end = outcome(board, ply + len(path), search.rules, repetition_plies=TREE_REPETITION_PLIES,
                              mate_plies=1, has_legal_move=bool(legal))
                if end is None:
                    batch.add(board, legal)
                    pending.append(child)
                    paths.append((path, "new", len(pending) - 1))
                else:
                    tree.set_terminal(0, child, end.value)
                    paths.append((path, "known", float(end.value)))
                for _ in line:
                    board.pop()
                break
            if tree.node_terminal[0, child]:
                paths.append((path, "known", float(tree.node_value[0, child])))
                break
            if tree.num_edges[0, child] == 0:
                paths.append((path, "collision", None))
                break
            node = child
    values = []
    if pending:
        batch.seal()
        logits, probability = search.simulator.evaluator.evaluate(batch)
        values = (2.0 * probability - 1.0).astype(np.float32)
        tree.expand(np.zeros(len(pending), np.int64), np.array(pending), batch.row_counts, batch.moves, logits,
                    values)
    for path, kind, value in paths:
        if kind == "collision":
            continue
        value = values[value] if kind == "new" else value
        for depth, (node, edge) in enumerate(path):
            sign = -1.0 if (len(path) - depth) % 2 == 1 else 1.0
            tree.edge_visits[0, node, edge] += 1
            tree.edge_value_sum[0, node, edge] += np.float32(sign * value)


@pytest.mark.parametrize("moves", [(), MID11])
def test_one_descent_per_step_is_todays_search(moves):
    ours, board = start(moves)
    ours.run(board, len(moves), lambda p: 1, max_nodes=300)
    today, board = start(moves)
    select = todays_select(today)
    for _ in range(300):
        today.simulator.simulate([board], np.array([len(moves)]), select, leaves=1)
    assert edge_stats(ours.tree) == edge_stats(today.tree)


@pytest.mark.parametrize("batch", [4, 64])
def test_many_descents_per_step_are_the_reference(batch):
    ours, board = start(MID11, batch_size=batch)
    steps = 0
    while ours.tree.edge_visits[0, 0].sum() < 400:
        ours.run(board, 11, lambda p: 0 if p.step_leaves else batch)
        steps += 1
    reference, board = start(MID11, batch_size=batch)
    for _ in range(steps):
        reference_step(reference, board, 11, batch)
    assert edge_stats(ours.tree) == edge_stats(reference.tree)
    assert board.sfen() == start(MID11)[1].sfen()  # the board came back
    if batch > 32:
        assert ours.simulator.collisions > 0  # the case where the collision rules differ occurred


def test_shares_follow_virtual_losses():
    # Three edges; each selection adds a virtual loss to its edge before the next one chooses.
    prior = np.array([[0.6, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3]], np.float32)
    visits = np.array([[10.0, 10.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    value_sum = np.array([[2.0, 4.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    valid = np.ones((2, 3), bool)
    counts = np.array([7, 5])
    fpu = np.array([[0.1], [0.0]], np.float32)
    shares = puct_shares(prior, visits, value_sum, valid, counts, 19652.0, 1.25, fpu, 1.0)
    # ... as many as the greedy sequence of argmaxes gives each edge (N(s) and FPU held).
    for r in range(2):
        k, greedy = np.zeros(3, np.float32), np.zeros(3, np.int64)
        for _ in range(counts[r]):
            scores = puct_scores(prior[r:r + 1], visits[r:r + 1] + k, value_sum[r:r + 1] - k, valid[r:r + 1],
                                 19652.0, 1.25, fpu[r:r + 1], parent_visits=visits[r].sum())
            edge = int(scores.argmax())
            greedy[edge] += 1
            k[edge] += 1
        assert shares[r].tolist() == greedy.tolist()
    assert shares[0].sum() == 7 and shares[0].min() > 0
    assert shares[1].tolist() == [2, 2, 1]  # equal edges: the ties go to the lower columns first
    # One selection: the argmax of puct_scores.
    one = puct_shares(prior, visits, value_sum, valid, np.array([1, 1]), 19652.0, 1.25, fpu, 1.0)
    assert one.argmax(axis=1).tolist() == puct_scores(prior, visits, value_sum, valid, 19652.0, 1.25, fpu).argmax(
        axis=1).tolist() and one.sum() == 2


def test_games_searched_together_are_searched_as_alone():
    openings = [(), ("7g7f",), tuple(MID11)]
    together = GameSearch(row_evaluator(), Rules(max_plies=60), batch_size=8, games=3)
    boards, plies = {}, {}
    for g, moves in enumerate(openings):
        board = cshogi.Board()
        for m in moves:
            board.push_usi(m)
        together.prepare(board, "", list(moves), g)
        boards[g], plies[g] = board, len(moves)
    reports = together.run_games(boards, plies, nodes=60)
    for g, moves in enumerate(openings):
        alone, board = start(moves, batch_size=8)
        report = alone.run(board, len(moves), lambda p: 8, max_nodes=60)
        assert reports[g].nodes == report.nodes == 60
        assert edge_stats(together.tree, g) == edge_stats(alone.tree)
        assert reports[g].pv == report.pv


def test_multipv_lines_are_ordered_and_complete():
    search, board = start(MID11, batch_size=8)
    legal = {m for m in board.legal_moves}
    report = search.run(board, 11, lambda p: 8, max_nodes=200, lines=len(legal) + 5)
    assert len(report.lines) == len(legal)  # every root move once, no more
    assert {line.pv[0] for line in report.lines} == legal
    visits = [line.visits for line in report.lines]
    assert visits == sorted(visits, reverse=True) and sum(visits) == 200
    assert report.lines[0].pv == report.pv
    for line in report.lines:
        assert -1.0 <= line.value <= 1.0
        for move in line.pv:  # every line is a legal sequence
            assert board.is_legal(move)
            board.push(move)
        for _ in line.pv:
            board.pop()
    assert len(search.report(0, lines=3).lines) == 3
