"""The engine's one-game search: PUCT over the shared tree, subtree reuse, root mate search,
and the time budget of a move."""
import cshogi
import numpy as np
import pytest
import torch
from conftest import FunctionEvaluator
from play_helpers import torch_threads

from azshogi.nn.evaluator import LocalEvaluator
from azshogi.nn.network import build
from azshogi.play.timeman import GoLimits, TimePlan, parse_go, plan
from azshogi.search.anytime import GameSearch, reroot
from azshogi.shogi.rules import Rules
from azshogi.shogi.scores import win_rate_to_cp


@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1):
        yield


@pytest.fixture
def search():
    torch.manual_seed(0)
    evaluator = LocalEvaluator(build(1, 16, 32).eval(), torch.device("cpu"))
    return GameSearch(evaluator, Rules(), max_tree_nodes=5000)


def subtree(tree, node):
    """{path of moves: (visits, value sum)} of every edge under `node` (a tree's shape)."""
    out, stack = {}, [(node, ())]
    while stack:
        n, path = stack.pop()
        for e in range(tree.num_edges[0, n]):
            key = path + (int(tree.edge_move[0, n, e]),)
            if tree.edge_visits[0, n, e]:
                out[key] = (float(tree.edge_visits[0, n, e]), round(float(tree.edge_value_sum[0, n, e]), 4))
            child = tree.edge_child[0, n, e]
            if child >= 0:
                stack.append((int(child), key))
    return out


def count_nodes(tree, node):
    children = tree.edge_child[0, node, :tree.num_edges[0, node]]
    return 1 + sum(count_nodes(tree, int(c)) for c in children if c >= 0)


def searched_tree(search):
    """The tree after 200 simulations from the start position, and its root's most visited child."""
    board = cshogi.Board()
    search.prepare(board, "", [])
    search.run(board, 0, lambda p: 1 << 30, max_nodes=200)
    tree = search.tree
    edge = int(np.argmax(tree.edge_visits[0, 0, :tree.num_edges[0, 0]]))
    return tree, int(tree.edge_child[0, 0, edge])


def test_reroot_keeps_exactly_the_subtree(search):
    tree, child = searched_tree(search)
    before = subtree(tree, child)
    value = float(tree.node_value[0, child])
    kept, nodes_before = count_nodes(tree, child), int(tree.num_nodes[0])
    reroot(tree, 0, child)
    assert subtree(tree, 0) == before
    assert float(tree.node_value[0, 0]) == value
    assert tree.num_nodes[0] == kept < nodes_before
    # Every kept child index points inside the kept rows.
    children = tree.edge_child[0, :tree.num_nodes[0]]
    assert children.max() < tree.num_nodes[0]


def test_reroot_ignores_what_a_reused_row_left_past_its_edges(search):
    # A node that ended the game (or awaits its evaluation) has no edges, but its row keeps the
    # columns of the node that used it before (rows are reused from move to move).
    tree, child = searched_tree(search)
    grandchild = int(tree.edge_child[0, child, int(np.argmax(tree.edge_visits[0, child]))])
    tree.set_terminal(0, grandchild, -1.0)
    others = [int(c) for c in tree.edge_child[0, 0, :tree.num_edges[0, 0]] if c >= 0 and c != child]
    tree.edge_child[0, grandchild, :2] = [others[0], int(tree.num_nodes[0]) + 7]  # stale children
    expected = count_nodes(tree, child)
    reroot(tree, 0, child)
    assert tree.num_nodes[0] == expected
    assert count_nodes(tree, 0) == expected


def test_reuse_follows_the_moves_played(search):
    board = cshogi.Board()
    search.prepare(board, "", [])
    report = search.run(board, 0, lambda p: 1 << 30, max_nodes=100)
    first = cshogi.move_to_usi(report.pv[0])
    second = cshogi.move_to_usi(report.pv[1])
    board.push_usi(first)
    board.push_usi(second)
    reused = search.prepare(board, "", [first, second])
    assert reused > 1
    report = search.run(board, 2, lambda p: 1 << 30, max_nodes=10)
    assert report.tree_nodes == reused + 10
    assert report.move in set(board.legal_moves)
    # A position that does not continue the previous one starts a fresh tree.
    fresh = cshogi.Board()
    fresh.push_usi("2g2f")
    assert search.prepare(fresh, "", ["2g2f"]) == 0


def test_stops_when_asked_and_when_the_tree_is_full(search):
    board = cshogi.Board()
    search.prepare(board, "", [])
    calls = []
    report = search.run(board, 0, lambda p: calls.append(p) or (0 if p.nodes >= 7 else 1))
    assert report.nodes == 7 and calls[-1].nodes == 7 and calls[0].nodes == 0
    assert report.move in set(board.legal_moves)
    search.max_tree_nodes = 50
    report = search.run(board, 0, lambda p: 1 << 30)
    assert search.tree.num_nodes[0] == 50


def test_root_mate_search(search):
    board = cshogi.Board("4k4/9/4G4/9/9/9/9/9/4K4 b G 1")
    assert [cshogi.move_to_usi(m) for m in search.mate(board)] == ["G*5b"]
    # Mate in 3 (no mate in 1): df-pn returns the whole line.
    board = cshogi.Board("9/9/9/9/9/l8/6R2/6K2/7k1 b 2G 1")
    assert not board.mate_move_in_1ply()
    line = search.mate(board)
    assert len(line) == 3
    for move in line:
        board.push(move)
    assert board.is_game_over()
    assert search.mate(cshogi.Board()) == []


def test_win_rate_to_cp():
    assert win_rate_to_cp(0.5) == 0
    assert win_rate_to_cp(0.75) == -win_rate_to_cp(0.25) > 0
    assert win_rate_to_cp(1.0) > 5000
    assert win_rate_to_cp(float("nan")) == 0  # a network gone wrong: an even score, not a crash


def test_time_plan():
    assert plan(GoLimits(nodes=100), True, 0, 300) is None
    assert plan(GoLimits(infinite=True), True, 0, 300) is None
    byoyomi_only = plan(parse_go("btime 0 wtime 0 byoyomi 1000".split()), True, 10, 300)
    assert byoyomi_only.target == byoyomi_only.limit == pytest.approx(0.7)
    with_main = plan(parse_go("btime 60000 wtime 1000 byoyomi 1000".split()), True, 10, 300)
    assert 0.7 < with_main.target < with_main.limit <= 60.7
    assert plan(parse_go("btime 60000 wtime 1000 byoyomi 1000".split()), False, 11, 300).limit == pytest.approx(1.7)
    sudden_death = plan(parse_go("btime 10000 wtime 10000".split()), True, 0, 300)
    assert sudden_death.limit <= 2.5 and sudden_death.target < sudden_death.limit
    increment = plan(parse_go("btime 0 wtime 0 binc 2000 winc 2000".split()), True, 0, 300)
    assert increment.limit == pytest.approx(1.7)
    assert plan(parse_go("byoyomi 100".split()), True, 0, 300).target == pytest.approx(0.01)  # min think
    assert plan(parse_go("movetime 300".split()), True, 0, 300) == TimePlan(0.3, 0.3, exact=True)  # no margin


def test_batched_leaves_with_virtual_loss_leave_clean_statistics():
    torch.manual_seed(0)
    evaluator = LocalEvaluator(build(1, 16, 32).eval(), torch.device("cpu"))
    search = GameSearch(evaluator, Rules(), batch_size=8)
    board = cshogi.Board()
    search.prepare(board, "", [])
    report = search.run(board, 0, lambda p: 1 << 30, max_nodes=100)
    assert report.nodes == 100 and evaluator.stats.calls < 40  # 8 leaves per forward pass
    tree = search.tree
    n = int(tree.num_nodes[0])
    visits, values = tree.edge_visits[0, :n], tree.edge_value_sum[0, :n]
    assert visits[0].sum() == 100  # every virtual loss was taken back
    assert (np.abs(values) <= visits + 1e-4).all()
    # A child's visits are its parent edge's visits, minus the one that expanded it.
    for node in range(n):
        for e in range(tree.num_edges[0, node]):
            child = tree.edge_child[0, node, e]
            if child >= 0 and not tree.node_terminal[0, child]:
                assert visits[child].sum() == visits[node, e] - 1


def root_visits(**knobs):
    """The root's visit counts after 300 simulations from the start position, with a network whose
    policy falls steeply along the label columns and whose value is even."""
    def fn(f1, f2):
        n = len(f1)
        return np.tile(-0.01 * np.arange(2187, dtype=np.float32), (n, 1)), np.full(n, 0.5, np.float32)

    search = GameSearch(FunctionEvaluator(fn), Rules(), max_tree_nodes=5000, **knobs)
    board = cshogi.Board()
    search.prepare(board, "", [])
    search.run(board, 0, lambda p: 1 << 30, max_nodes=300)
    tree = search.tree
    return tree.edge_visits[0, 0, :tree.num_edges[0, 0]].astype(np.float64)


def spread(visits):
    """The entropy of the visit distribution (nats): higher is a wider search."""
    p = visits[visits > 0] / visits.sum()
    return float(-(p * np.log(p)).sum())


@pytest.mark.parametrize("narrow, wide", [
    ({"policy_temperature": 1.0}, {"policy_temperature": 3.0}),  # a flatter policy: priors closer together
    ({"fpu_reduction": 1.0}, {"fpu_reduction": 0.0}),  # unvisited moves valued as the node, not below it
    ({"c_init": 0.5}, {"c_init": 4.0}),  # more exploration against the first-play penalty
])
def test_the_play_time_knobs_widen_the_search_in_their_direction(narrow, wide):
    n, w = root_visits(**narrow), root_visits(**wide)
    assert n.sum() == w.sum() == 300
    assert spread(w) > spread(n) + 0.1
    assert np.count_nonzero(w) > np.count_nonzero(n)
    # the policy's order survives: its first move stays among the most visited
    assert w.argmax() == n.argmax() or w[n.argmax()] == w.max()


def test_a_policy_temperature_must_be_positive():
    with pytest.raises(ValueError, match="policy_temperature"):
        GameSearch(FunctionEvaluator(lambda f1, f2: None), Rules(), policy_temperature=0.0)
