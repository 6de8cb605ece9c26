"""PUCT search as in AlphaZero (Silver et al. 2018), on the shared array trees.

Selection maximises Q(s, a) + U(s, a), U = c(s) P(s, a) sqrt(N(s)) / (1 + N(s, a)) with
c(s) = log((1 + N(s) + c_base) / c_base) + c_init; unvisited actions have Q = 0. The root's
prior gets Dirichlet noise once per search. With `leaves_per_step` > 1 every tree sends several
leaves to each forward pass, kept apart by virtual loss. The policy target is the root's visit
distribution; the move is the most visited, or sampled by visit count in the opening plies.
"""
from __future__ import annotations

from typing import Optional, Sequence

import cshogi
import numpy as np

from azshogi.search.formulas import puct_scores
from azshogi.search.result import BatchSearchResult, make_result, per_actor_simulations
from azshogi.search.simulator import Simulator
from azshogi.search.tree import Tree, masked_softmax, padded_width
from azshogi.shogi.network_io import Evaluator
from azshogi.shogi.rules import Rules


class PuctSearch:
    def __init__(self, evaluator: Evaluator, rules: Rules, num_actors: int, num_simulations: int = 32,
                 c_base: float = 19652.0, c_init: float = 1.25, dirichlet_alpha: float = 0.15,
                 dirichlet_weight: float = 0.25, sampling_plies: int = 30, leaves_per_step: int = 1,
                 virtual_loss: float = 1.0, leaf_mate_search: bool = True):
        self.num_simulations = num_simulations
        self.c_base, self.c_init = c_base, c_init
        self.dirichlet_alpha, self.dirichlet_weight = dirichlet_alpha, dirichlet_weight
        self.sampling_plies = sampling_plies
        self.leaves_per_step, self.virtual_loss = leaves_per_step, virtual_loss
        self.simulator = Simulator(evaluator, rules, num_actors, num_simulations + 1, leaf_mate_search,
                                   leaves_per_step)

    @property
    def tree(self) -> Tree:
        return self.simulator.tree

    def root_prior(self, num: int, width: int, rngs, noise) -> np.ndarray:
        """(A, width) the roots' priors, with Dirichlet noise mixed in (once per search) where
        `noise` (a bool, or (A,) bools) says so."""
        tree = self.tree
        actors, roots = np.arange(num), np.zeros(num, np.int64)
        prior = masked_softmax(tree.edge_logit[actors, roots, :width]).astype(np.float32)
        if self.dirichlet_weight > 0:
            w = self.dirichlet_weight
            for a in np.flatnonzero(np.broadcast_to(noise, (num,))).tolist():
                n = int(tree.num_edges[a, 0])
                prior[a, :n] = (1 - w) * prior[a, :n] + w * rngs[a].dirichlet(np.full(n, self.dirichlet_alpha))
        return prior

    def select_below_root(self, actors: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """argmax Q + U on each node's selection candidates (tree.py): unvisited edges all have
        Q = 0 and differ only by their prior, so the best of them is the best-ranked unchosen."""
        tree = self.tree
        columns, ok = tree.candidates(actors, nodes)
        prior = np.where(ok, np.exp(tree.gather("edge_logit", actors, nodes, columns)
                                    - tree.node_logsumexp[actors, nodes][:, None]), 0.0)
        visits = np.where(ok, tree.gather("edge_visits", actors, nodes, columns), 0.0)
        value_sum = np.where(ok, tree.gather("edge_value_sum", actors, nodes, columns), 0.0)
        scores = puct_scores(prior, visits, value_sum, ok, self.c_base, self.c_init, 0.0)
        return columns[np.arange(len(actors)), scores.argmax(axis=1)]

    def run(self, boards: Sequence[cshogi.Board], plies: np.ndarray, rngs: Sequence[np.random.Generator],
            sample: Optional[np.ndarray] = None, noise: bool = True,
            simulations: Optional[np.ndarray] = None) -> BatchSearchResult:
        """Searches every board; rngs: one generator per actor (noise and sampling).
        sample: (A,) bool, actors that pick their move in proportion to visit counts (default:
        plies < sampling_plies). noise: Dirichlet noise at the roots (self-play). simulations:
        (A,) each actor's simulations, at most num_simulations (default: num_simulations each);
        an actor given fewer (self-play's cheap searches) gets no root noise, as in KataGo. All
        actors still share each forward pass, each tree searched as it would be alone."""
        if sample is None:
            sample = np.asarray(plies) < self.sampling_plies
        num = len(boards)
        remaining = per_actor_simulations(simulations, num, self.num_simulations)
        noise = noise & (remaining == self.num_simulations)
        sim, tree = self.simulator, self.tree
        sim.expand_roots(boards)
        width = padded_width(int(tree.num_edges[np.arange(num), 0].max()), tree.width)  # the roots' own width
        prior_at_root = self.root_prior(num, width, rngs, noise)
        # The root's candidates, as below it but ranked by the noisy prior.
        root_order = np.argsort(-prior_at_root, axis=1, kind="stable")
        root_edges = tree.num_edges[np.arange(num), 0]

        def select_root(act: np.ndarray) -> np.ndarray:
            k = padded_width(int(tree.node_children[act, 0].max()) + 1, width)
            columns = root_order[act, :k]
            ok = np.arange(k)[None, :] <= np.minimum(tree.node_children[act, 0], root_edges[act] - 1)[:, None]
            root = np.zeros(len(act), np.int64)
            prior = np.take_along_axis(prior_at_root[act], columns, axis=1)
            visits = np.where(ok, tree.gather("edge_visits", act, root, columns), 0.0)
            value_sum = np.where(ok, tree.gather("edge_value_sum", act, root, columns), 0.0)
            scores = puct_scores(prior, visits, value_sum, ok, self.c_base, self.c_init, 0.0)
            return columns[np.arange(len(act)), scores.argmax(axis=1)]

        def select(act: np.ndarray, nodes: np.ndarray, depth: int) -> np.ndarray:
            return select_root(act) if depth == 0 else self.select_below_root(act, nodes)

        while remaining.any():
            leaves = np.minimum(remaining, self.leaves_per_step)
            if (leaves == leaves[0]).all():  # every actor alike (no cheap searches)
                sim.simulate(boards, plies, select, leaves=int(leaves[0]), virtual_loss=self.virtual_loss)
            else:
                going = np.flatnonzero(leaves)
                sim.simulate(boards, plies, select, leaves=leaves[going], virtual_loss=self.virtual_loss,
                             actors=going)
            remaining -= leaves

        actors, roots = np.arange(num), np.zeros(num, np.int64)
        visits = tree.edge_visits[actors, roots, :width]
        total = visits.sum(axis=1, keepdims=True)
        policy = np.where(total > 0, visits / np.maximum(total, 1e-9), prior_at_root)
        # Most visited; ties go to the higher prior.
        chosen = np.lexsort((prior_at_root, visits), axis=1)[:, -1] if num else np.zeros(0, np.int64)
        for a in np.flatnonzero(sample).tolist():
            n = int(tree.num_edges[a, 0])
            chosen[a] = rngs[a].choice(n, p=policy[a, :n] / policy[a, :n].sum())
        return make_result(tree, roots, width, chosen, policy, np.array([b.turn for b in boards], np.int64))
