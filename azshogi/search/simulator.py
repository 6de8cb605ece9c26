"""One search step for many actors at once: descend, evaluate all new leaves together, back up.

The simulator knows boards, rules and the evaluator, and nothing about how edges are chosen:
a search family passes a `select(actors, nodes, depth) -> edges` function. Each actor's single
cshogi Board walks down its tree with push and back with pop (no Board.copy()).
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import cshogi
import numpy as np

from .. import features
from ..evaluator import Evaluator
from ..rules import Rules, outcome
from .tree import Tree

# The look-back for repetitions inside the tree (dlshogi uses 16 plies too): enough for
# perpetual checks and shuffles, cheap to test at every leaf.
TREE_REPETITION_PLIES = 16

SelectFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


class Simulator:
    def __init__(self, evaluator: Evaluator, rules: Rules, num_actors: int, max_nodes: int,
                 leaf_mate_search: bool = True):
        self.evaluator, self.rules = evaluator, rules
        self.leaf_mate_plies = 1 if leaf_mate_search else 0
        self.tree = Tree(num_actors, max_nodes)
        self.features1, self.features2 = evaluator.allocate(num_actors)
        self._path_nodes = np.zeros((num_actors, max_nodes + 1), np.int64)
        self._path_edges = np.zeros((num_actors, max_nodes + 1), np.int64)
        self.seconds = 0.0  # wall time inside this simulator, inference included
        self.leaf_seconds = 0.0  # of which: rules, legal moves and features at the leaves

    def expand_roots(self, boards: Sequence[cshogi.Board]) -> None:
        """Clears the trees and evaluates every actor's root in one forward pass."""
        start = time.perf_counter()
        self.tree.clear()
        actors = np.arange(len(boards))
        nodes = np.array([self.tree.add_node(a) for a in actors], np.int64)
        moves, labels = [], []
        for a, board in enumerate(boards):
            m, lab = features.legal_moves_and_labels(board)
            if not m:
                raise ValueError(f"actor {a}: the root position has no legal move: {board.sfen()}")
            features.write(board, self.features1, self.features2, a)
            moves.append(m)
            labels.append(lab)
        self.leaf_seconds += time.perf_counter() - start
        logits, probability = self.evaluator.evaluate(self.features1[:len(boards)], self.features2[:len(boards)])
        self.tree.expand(actors, nodes, moves, labels, logits, 2.0 * probability - 1.0)
        self.seconds += time.perf_counter() - start

    def simulate(self, boards: Sequence[cshogi.Board], plies: np.ndarray, select: SelectFn) -> None:
        """One simulation for every actor: one new leaf (or a terminal revisit) per tree.

        plies: (A,) plies played before each root, for the ply limit inside the tree.
        """
        start = time.perf_counter()
        tree, num = self.tree, len(boards)
        if self._path_nodes.shape[1] < tree.max_nodes + 1:
            self._path_nodes = np.zeros((self._path_nodes.shape[0], tree.max_nodes + 1), np.int64)
            self._path_edges = np.zeros_like(self._path_nodes)
        path_nodes, path_edges = self._path_nodes, self._path_edges
        path_len = np.zeros(num, np.int64)
        leaf_value = np.zeros(num, np.float32)
        new_actors: list[int] = []
        new_nodes: list[int] = []

        node = np.zeros(num, np.int64)
        active = np.arange(num)
        depth = 0
        while active.size:
            current = node[active]
            edges = select(active, current, depth)
            path_nodes[active, depth] = current
            path_edges[active, depth] = edges
            for a, m in zip(active.tolist(), tree.edge_move[active, current, edges].tolist()):
                boards[a].push(m)
            child = tree.edge_child[active, current, edges]
            depth += 1
            path_len[active] = depth
            is_new = child < 0
            for a, parent, e in zip(active[is_new].tolist(), current[is_new].tolist(), edges[is_new].tolist()):
                index = tree.add_node(a)
                tree.edge_child[a, parent, e] = index
                new_actors.append(a)
                new_nodes.append(index)
            known = np.flatnonzero(~is_new)
            terminal = tree.node_terminal[active[known], child[known]]
            done = known[terminal]
            leaf_value[active[done]] = tree.node_value[active[done], child[done]]
            going_on = known[~terminal]
            node[active[going_on]] = child[going_on]
            active = active[going_on]

        if new_actors:
            actors = np.array(new_actors, np.int64)
            leaf_value[actors] = self._evaluate_leaves(boards, plies, actors, np.array(new_nodes, np.int64),
                                                       path_len[actors])
        self._backup(path_nodes, path_edges, path_len, leaf_value)
        for a in range(num):
            board = boards[a]
            for _ in range(int(path_len[a])):
                board.pop()
        self.seconds += time.perf_counter() - start

    def _evaluate_leaves(self, boards, plies, actors, nodes, depths) -> np.ndarray:
        """Terminal leaves get their game value; the rest one batched network evaluation.
        Returns (R,) values from each leaf's side to move."""
        start = time.perf_counter()
        tree, rules = self.tree, self.rules
        values = np.zeros(len(actors), np.float32)
        rows: list[int] = []
        moves, labels = [], []
        for i, (a, node, depth) in enumerate(zip(actors.tolist(), nodes.tolist(), depths.tolist())):
            board = boards[a]
            end = outcome(board, int(plies[a]) + depth, rules, repetition_plies=TREE_REPETITION_PLIES,
                          mate_plies=self.leaf_mate_plies)
            if end is not None:
                tree.set_terminal(a, node, end.value)
                values[i] = end.value
                continue
            m, lab = features.legal_moves_and_labels(board)
            features.write(board, self.features1, self.features2, len(rows))
            rows.append(i)
            moves.append(m)
            labels.append(lab)
        self.leaf_seconds += time.perf_counter() - start
        if rows:
            k = len(rows)
            logits, probability = self.evaluator.evaluate(self.features1[:k], self.features2[:k])
            value = 2.0 * probability - 1.0
            rows_arr = np.array(rows, np.int64)
            tree.expand(actors[rows_arr], nodes[rows_arr], moves, labels, logits, value)
            values[rows_arr] = value
        return values

    def _backup(self, path_nodes, path_edges, path_len, leaf_value) -> None:
        """Adds one visit and the leaf value (sign-flipped per ply) to every edge on each path."""
        depth = np.arange(path_nodes.shape[1])
        a_idx, d_idx = np.nonzero(depth[None, :] < path_len[:, None])
        n_idx = path_nodes[a_idx, d_idx]
        e_idx = path_edges[a_idx, d_idx]
        # The edge entering the leaf belongs to the leaf's opponent: sign -1, then alternating.
        sign = np.where((path_len[a_idx] - d_idx) % 2 == 1, -1.0, 1.0).astype(np.float32)
        index = (a_idx, n_idx, e_idx)
        np.add.at(self.tree.edge_visits, index, 1.0)
        np.add.at(self.tree.edge_value_sum, index, sign * leaf_value[a_idx])
