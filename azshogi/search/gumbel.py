"""Gumbel AlphaZero search (Danihelka et al., "Policy improvement by planning with Gumbel", 2022).

At the root: sample m actions without replacement by Gumbel-top-k on the logits, spend the n
simulations on them by sequential halving, and play argmax g + logits + sigma(completed Q) among
the most visited. Below the root: the deterministic choice that makes visit counts follow the
improved policy. The policy target is softmax(logits + sigma(completed Q)) over all legal moves.
All actors search together: one forward pass per simulation carries one leaf of every tree.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Optional, Sequence

import cshogi
import numpy as np

from azshogi.search.formulas import completed_q, root_sigma, sigma, subset_improved_policy, subset_sigma
from azshogi.search.result import BatchSearchResult, make_result, per_actor_simulations
from azshogi.search.simulator import Simulator
from azshogi.search.tree import Tree, edge_sum, masked_softmax, padded_width
from azshogi.shogi.network_io import Evaluator
from azshogi.shogi.rules import Rules


@lru_cache(maxsize=None)
def considered_visit_sequence(num_considered: int, num_simulations: int) -> tuple[int, ...]:
    """Sequential halving as a table: for simulation i, the visit count that a root action must
    have to be chosen. The considered actions are visited in rounds; after each phase the half
    with the lower scores stops receiving visits. There are ceil(log2(m)) phases, each given
    about n / ceil(log2(m)) simulations (at least one visit per remaining action)."""
    if num_considered <= 1:
        return tuple(range(num_simulations))
    phases = math.ceil(math.log2(num_considered))
    sequence: list[int] = []
    remaining, level = num_considered, 0
    while len(sequence) < num_simulations:
        visits_each = max(1, num_simulations // (phases * remaining))
        for _ in range(visits_each):
            sequence.extend([level] * remaining)
            level += 1
        remaining = max(2, remaining // 2)
    return tuple(sequence[:num_simulations])


class GumbelSearch:
    def __init__(self, evaluator: Evaluator, rules: Rules, num_actors: int, num_simulations: int = 32,
                 max_num_considered_actions: int = 16, c_visit: float = 50.0, c_scale: float = 0.1,
                 rescale_values: bool = True, leaf_mate_search: bool = True, sampling_plies: int = 0):
        self.num_simulations = num_simulations
        self.sampling_plies = sampling_plies
        self.max_num_considered_actions = max_num_considered_actions
        self.c_visit, self.c_scale, self.rescale_values = c_visit, c_scale, rescale_values
        self.simulator = Simulator(evaluator, rules, num_actors, num_simulations + 1, leaf_mate_search)

    @property
    def tree(self) -> Tree:
        return self.simulator.tree

    def _root_scores(self, actors, width):
        """(logits, sigma(completed Q), visits, valid) of the roots' first `width` columns: the
        improved policy's logits are logits + sigma."""
        tree, roots = self.tree, np.zeros(len(actors), np.int64)
        logits = tree.edge_logit[actors, roots, :width]
        visits = tree.edge_visits[actors, roots, :width]
        valid = tree.valid(actors, roots, width)
        cq = completed_q(logits, visits, tree.edge_value_sum[actors, roots, :width], tree.node_value[actors, roots])
        return logits, sigma(cq, visits, valid, self.c_visit, self.c_scale, self.rescale_values), visits, valid

    def select_below_root(self, actors: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """The deterministic non-root choice, argmax of improved policy - N(a) / (1 + N), read on
        each node's selection candidates only (tree.py): the unvisited actions all score alike
        but for their prior, so the best of them is the best-ranked one not yet chosen."""
        tree = self.tree
        columns, ok = tree.candidates(actors, nodes)
        logits = tree.gather("edge_logit", actors, nodes, columns)
        visits = np.where(ok, tree.gather("edge_visits", actors, nodes, columns), 0.0)
        value_sum = np.where(ok, tree.gather("edge_value_sum", actors, nodes, columns), 0.0)
        prior = np.where(ok, np.exp(logits - tree.node_logsumexp[actors, nodes][:, None]), 0.0)
        has_rest = tree.num_edges[actors, nodes] > ok.sum(axis=1)
        sig, rest_sig = subset_sigma(prior, visits, value_sum, tree.node_value[actors, nodes], ok, has_rest,
                                     self.c_visit, self.c_scale, self.rescale_values)
        policy = subset_improved_policy(prior, sig, ok, rest_sig)
        score = policy - visits / (1.0 + visits.sum(axis=1, keepdims=True))
        return columns[np.arange(len(actors)), np.where(ok, score, -np.inf).argmax(axis=1)]

    def run(self, boards: Sequence[cshogi.Board], plies: np.ndarray, rngs: Sequence[np.random.Generator],
            sample: Optional[np.ndarray] = None, simulations: Optional[np.ndarray] = None) -> BatchSearchResult:
        """Searches every board (none may be a finished position) and returns the moves to play.

        plies: (A,) plies played so far in each game. rngs: one generator per actor (its Gumbel
        noise and move sampling), so an actor's search does not depend on the others in the
        batch. sample: (A,) bool, actors that sample their move from the improved policy instead
        of taking the Gumbel choice (default: those with plies < sampling_plies). simulations:
        (A,) each actor's simulations, at most num_simulations (default: num_simulations each);
        an actor given fewer considers at most that many root actions (self-play's cheap
        searches). All actors still share one forward pass per simulation.
        """
        if sample is None:
            sample = np.asarray(plies) < self.sampling_plies
        num = len(boards)
        sims = per_actor_simulations(simulations, num, self.num_simulations)
        sim = self.simulator
        sim.expand_roots(boards)
        tree = self.tree
        actors = np.arange(num)
        roots = np.zeros(num, np.int64)
        num_legal = tree.num_edges[actors, roots]
        width = padded_width(int(num_legal.max()), tree.width)  # the roots' own width (not the arrays')
        root_logits = tree.edge_logit[actors, roots, :width]
        gumbel = np.zeros((num, width), np.float32)
        for a in range(num):
            gumbel[a, :num_legal[a]] = rngs[a].gumbel(size=int(num_legal[a]))
        most_considered = np.where(sims < self.num_simulations, np.minimum(sims, self.max_num_considered_actions),
                                   self.max_num_considered_actions)
        num_considered = np.minimum(num_legal, np.maximum(most_considered, 1))
        # Gumbel-top-k: the m actions with the largest g + logits, ranked per row.
        order = np.argsort(-(gumbel + root_logits), axis=1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(width)[None, :].repeat(num, 0), axis=1)
        considered = rank < num_considered[:, None]
        table = np.zeros((num, self.num_simulations), np.int64)  # read only while an actor searches
        for a, (m, n) in enumerate(zip(num_considered.tolist(), sims.tolist())):
            table[a, :n] = considered_visit_sequence(m, n)
        base = gumbel + root_logits  # fixed during the search (root logits do not change)
        # Only the considered actions are ever visited at the root, so root selection works on
        # those m columns (by rank) instead of the whole width.
        m = padded_width(int(num_considered.max()), width)
        columns = order[:, :m]
        in_play = np.arange(m)[None, :] < num_considered[:, None]
        base_c = np.where(in_play, np.take_along_axis(base, columns, axis=1), -np.inf)
        log_z = np.log(edge_sum(np.exp(root_logits - root_logits.max(axis=1, keepdims=True)))) \
            + root_logits.max(axis=1)
        prior_c = np.where(in_play, np.exp(np.take_along_axis(root_logits, columns, axis=1) - log_z[:, None]), 0.0)
        has_unconsidered = num_legal > num_considered
        root_value = tree.node_value[actors, roots]

        def select_root(act: np.ndarray) -> np.ndarray:
            cols = columns[act]
            root = np.zeros(len(act), np.int64)
            visits = tree.gather("edge_visits", act, root, cols)
            value_sum = tree.gather("edge_value_sum", act, root, cols)
            sig = root_sigma(prior_c[act], visits, value_sum, root_value[act], in_play[act], has_unconsidered[act],
                             self.c_visit, self.c_scale, self.rescale_values)
            target = table[act, step][:, None]
            choice = np.where(in_play[act] & (visits == target), base_c[act] + sig, -np.inf)
            # Sequential halving always leaves an action at the target count; this guards
            # against float drift only.
            stuck = ~np.isfinite(choice.max(axis=1))
            choice[stuck] = np.where(in_play[act], -visits, -np.inf)[stuck]
            return cols[np.arange(len(act)), choice.argmax(axis=1)]

        def select(act: np.ndarray, nodes: np.ndarray, depth: int) -> np.ndarray:
            return select_root(act) if depth == 0 else self.select_below_root(act, nodes)

        for step in range(int(sims.max(initial=0))):
            searching = sims > step
            sim.simulate(boards, plies, select, actors=None if searching.all() else np.flatnonzero(searching))

        logits, sig, visits, _ = self._root_scores(actors, width)
        policy = masked_softmax(logits + sig)
        most = np.where(considered, visits, -1.0).max(axis=1, keepdims=True)
        final = np.where(considered & (visits == most), base + sig, -np.inf)
        chosen = final.argmax(axis=1)
        if sample.any():
            for a in np.flatnonzero(sample).tolist():
                n = int(num_legal[a])
                chosen[a] = rngs[a].choice(n, p=policy[a, :n] / policy[a, :n].sum())
        return make_result(tree, roots, width, chosen, policy, np.array([b.turn for b in boards], np.int64))
