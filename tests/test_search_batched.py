"""Both search families: batching across actors changes nothing, virtual loss leaves no trace,
noise is drawn once per root, and the core search properties hold for PUCT too."""
import cshogi
import numpy as np
import pytest
import torch
from conftest import FunctionEvaluator, uniform_evaluator
from test_features import random_positions
from test_gumbel import MATE_IN_ONE

from azshogi.search import GumbelSearch, PuctSearch
from azshogi.shogi import features
from azshogi.shogi.rules import Rules


def rowwise_network(net):
    """The tiny network evaluated one position at a time, so that a position's outputs cannot
    depend on the batch it shares (kernels may round differently at other batch sizes)."""

    def fn(f1, f2):
        logits, values = [], []
        with torch.inference_mode():
            for a, b in zip(f1, f2):
                p, v = net(torch.from_numpy(a[None]), torch.from_numpy(b[None]))
                logits.append(p[0].numpy())
                values.append(torch.sigmoid(v)[0, 0].item())
        return np.stack(logits).astype(np.float32), np.array(values, np.float32)

    return FunctionEvaluator(fn)


def make(kind, evaluator, actors, **kw):
    if kind == "gumbel":
        return GumbelSearch(evaluator, Rules(), actors, num_simulations=kw.get("n", 16),
                            max_num_considered_actions=8, sampling_plies=kw.get("sampling", 0))
    return PuctSearch(evaluator, Rules(), actors, num_simulations=kw.get("n", 16),
                      leaves_per_step=kw.get("leaves", 4), sampling_plies=kw.get("sampling", 0))


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
@pytest.mark.parametrize("sampling", [0, 1000])
def test_batched_search_equals_one_actor_searches(kind, sampling, tiny_net):
    evaluator = rowwise_network(tiny_net)
    boards = random_positions(5, seed=11, max_plies=40)[::1]
    plies = np.arange(5, dtype=np.int64) * 7
    batched = make(kind, evaluator, len(boards), sampling=sampling).run(
        boards, plies, [np.random.default_rng(100 + i) for i in range(len(boards))])
    for i, board in enumerate(boards):
        alone = make(kind, evaluator, 1, sampling=sampling).run([board], plies[i:i + 1],
                                                                [np.random.default_rng(100 + i)])
        assert alone.moves[0] == batched.moves[i]
        n = alone.num_edges[0]
        assert np.array_equal(alone.visits[0, :n], batched.visits[i, :n])
        assert np.allclose(alone.policy[0, :n], batched.policy[i, :n])


def check_tree_totals(search, actor, simulations):
    """Every visit and value on an edge is accounted for by real simulations: what a serial
    search (no virtual loss) would hold."""
    tree = search.tree
    collisions = search.simulator.collisions
    assert tree.edge_visits[actor, 0].sum() == simulations - collisions
    for node in range(1, int(tree.num_nodes[actor])):
        parent, edge = np.argwhere(tree.edge_child[actor] == node)[0]
        n_in, w_in = tree.edge_visits[actor, parent, edge], tree.edge_value_sum[actor, parent, edge]
        if tree.node_terminal[actor, node]:
            assert w_in == pytest.approx(-n_in * tree.node_value[actor, node], abs=1e-4)
            continue
        out = slice(0, int(tree.num_edges[actor, node]))
        assert n_in == 1 + tree.edge_visits[actor, node, out].sum()
        assert w_in == pytest.approx(-(tree.node_value[actor, node] + tree.edge_value_sum[actor, node, out].sum()),
                                     abs=1e-4)
    assert (tree.edge_visits[actor, :int(tree.num_nodes[actor])] >= 0).all()


@pytest.mark.parametrize("leaves", [1, 4, 8])
def test_virtual_loss_is_removed_after_backup(leaves, tiny_net):
    boards = random_positions(3, seed=4, max_plies=30)
    search = PuctSearch(rowwise_network(tiny_net), Rules(), 3, num_simulations=40, leaves_per_step=leaves,
                        virtual_loss=3.0)
    search.run(boards, np.zeros(3, np.int64), [np.random.default_rng(i) for i in range(3)])
    for a in range(3):
        check_tree_totals(search, a, 40)


def test_collisions_are_dropped_not_counted():
    # One legal reply everywhere makes descents collide: totals must still add up.
    board = cshogi.Board("8k/7R1/9/9/9/9/9/9/K8 w - 1")  # the white king is in check
    search = PuctSearch(uniform_evaluator(), Rules(), 1, num_simulations=16, leaves_per_step=8)
    search.run([board], np.zeros(1, np.int64), [np.random.default_rng(0)])
    assert search.simulator.collisions > 0
    check_tree_totals(search, 0, 16)


class CountingRng:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.dirichlet_calls = 0

    def dirichlet(self, alpha):
        self.dirichlet_calls += 1
        return self.rng.dirichlet(alpha)

    def __getattr__(self, name):
        return getattr(self.rng, name)


@pytest.mark.parametrize("noise", [True, False])
def test_dirichlet_noise_is_drawn_once_per_root(noise):
    boards = [cshogi.Board() for _ in range(3)]
    rngs = [CountingRng(i) for i in range(3)]
    search = PuctSearch(uniform_evaluator(), Rules(), 3, num_simulations=24, leaves_per_step=4)
    search.run(boards, np.zeros(3, np.int64), rngs, noise=noise)
    assert [r.dirichlet_calls for r in rngs] == [1 if noise else 0] * 3


def test_noise_changes_the_root_prior_only():
    search = PuctSearch(uniform_evaluator(), Rules(), 1, num_simulations=4)
    search.simulator.expand_roots([cshogi.Board()])
    n = int(search.tree.num_edges[0, 0])
    plain = search.root_prior(1, search.tree.width, [np.random.default_rng(0)], noise=False)[0, :n]
    noisy = search.root_prior(1, search.tree.width, [np.random.default_rng(0)], noise=True)[0, :n]
    assert plain == pytest.approx(np.full(n, 1.0 / n))
    assert noisy.sum() == pytest.approx(1.0) and not np.allclose(noisy, plain)


@pytest.mark.parametrize("leaves", [1, 4])
def test_puct_finds_mate_in_one(leaves):
    board = cshogi.Board(MATE_IN_ONE)
    n = len(list(board.legal_moves))
    search = PuctSearch(uniform_evaluator(), Rules(), 1, num_simulations=4 * n, leaves_per_step=leaves,
                        leaf_mate_search=False, dirichlet_weight=0.0)
    result = search.run([board], np.zeros(1, np.int64), [np.random.default_rng(0)], noise=False)
    assert cshogi.move_to_usi(int(result.moves[0])) == "G*5b"
    assert board.sfen() == MATE_IN_ONE


def test_puct_never_chooses_illegal_labels():
    boards = random_positions(6, seed=9)
    legal = [set(features.legal_moves_and_labels(b)[1]) for b in boards]

    def adversarial(f1, f2):
        logits = np.full((len(f1), 2187), 40.0, np.float32)
        for labels in legal:
            logits[:, list(labels)] = 0.0
        return logits, np.full(len(f1), 0.5, np.float32)

    search = PuctSearch(FunctionEvaluator(adversarial), Rules(), 6, num_simulations=12, leaves_per_step=3,
                        sampling_plies=1000)
    result = search.run(boards, np.zeros(6, np.int64), [np.random.default_rng(i) for i in range(6)])
    for i, board in enumerate(boards):
        assert board.is_legal(int(result.moves[i]))
        n = result.num_edges[i]
        assert result.policy[i, :n].sum() == pytest.approx(1.0) and result.policy[i, n:].sum() == 0


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_threaded_groups_choose_what_one_group_chooses(kind, tiny_net):
    from azshogi.search import ThreadedSearch

    evaluator = rowwise_network(tiny_net)
    boards = random_positions(7, seed=12, max_plies=50)
    plies = np.arange(7, dtype=np.int64)
    one = make(kind, evaluator, 7).run(boards, plies, [np.random.default_rng(i) for i in range(7)])
    threaded = ThreadedSearch(lambda n: make(kind, evaluator, n), 7, threads=3)
    split = threaded.run(boards, plies, [np.random.default_rng(i) for i in range(7)])
    assert np.array_equal(one.moves, split.moves)
    for i in range(7):
        n = one.num_edges[i]
        assert np.array_equal(one.visits[i, :n], split.visits[i, :n])
    assert [b.sfen() for b in boards] == [b.sfen() for b in random_positions(7, seed=12, max_plies=50)]


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_results_do_not_depend_on_the_width_of_the_trees(kind):
    # A tree's arrays are as wide as the widest node it ever held, so a search that once met a
    # position with 525 legal moves keeps 544 columns where a fresh one has 128 or 160. Exact
    # resume needs the same results to the last bit from both (a resumed run's trees are fresh).
    from test_search_golden import keyed_network

    boards = [b for b in random_positions(400, seed=3, max_plies=200) if len(list(b.legal_moves)) > 80][:5]
    boards.append(cshogi.Board("4k4/9/9/9/9/9/9/9/4K4 b GP 1"))  # 155 legal moves
    wide = cshogi.Board("4k4/9/9/9/9/9/9/9/4K4 b RBGSNLP 1")  # 525
    plies = np.zeros(len(boards), np.int64)
    results = []
    for warm_up in (False, True):
        search = make(kind, FunctionEvaluator(keyed_network), len(boards), n=24)
        if warm_up:
            search.run([wide] * len(boards), plies, [np.random.default_rng(0) for _ in boards])
        results.append(search.run(boards, plies, [np.random.default_rng(7 + i) for i in range(len(boards))]))
    fresh, widened = results
    for name in ("moves", "num_edges", "visits", "policy", "root_value"):
        a, b = getattr(fresh, name), getattr(widened, name)
        if a.ndim == 2:
            a, b = a[:, :160], b[:, :160]
        assert np.array_equal(a, b), name
