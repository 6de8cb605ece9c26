"""One search step for many actors at once: descend, evaluate all new leaves together, back up.

The simulator knows boards, rules and the evaluator, and nothing about how edges are chosen:
a search family passes a `select(actors, nodes, depth) -> edges` function. Each actor's single
cshogi Board walks down its tree with push and back with pop (no Board.copy()).

With `leaves > 1` every tree contributes several leaves to one forward pass: after each descent
the path carries a virtual loss (visits +vl, value -vl for the chooser) so that the next descent
goes elsewhere; after the backup the virtual loss is removed again. A descent that ends on a leaf
already waiting for its evaluation (a collision) is dropped.
"""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import cshogi
import numpy as np

from azshogi.search.base import Evaluator
from azshogi.search.tree import Tree
from azshogi.shogi.rules import Rules, outcome

# The look-back for repetitions inside the tree (dlshogi uses 16 plies too): enough for
# perpetual checks and shuffles, cheap to test at every leaf.
TREE_REPETITION_PLIES = 16

SelectFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]

# What a descent ended on.
_NEW, _KNOWN, _COLLISION = 0, 1, 2


class Simulator:
    def __init__(self, evaluator: Evaluator, rules: Rules, num_actors: int, max_nodes: int,
                 leaf_mate_search: bool = True, leaves_per_step: int = 1):
        self.evaluator, self.rules = evaluator, rules
        self.leaf_mate_plies = 1 if leaf_mate_search else 0
        self.tree = Tree(num_actors, max_nodes)
        self.batch = evaluator.allocate(num_actors * leaves_per_step)
        self.seconds = 0.0  # wall time inside this simulator, inference included
        self.leaf_seconds = 0.0  # of which: rules, legal moves and features at the leaves
        self.collisions = 0

    def _ensure_rows(self, rows: int) -> None:
        if rows > self.batch.capacity:
            self.batch = self.evaluator.allocate(rows)
        self.batch.clear()

    def _evaluate_and_expand(self, actors: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Evaluates the batch's leaves (rows in order of `actors`, `nodes`), expands them;
        returns their values (node's side to move)."""
        batch = self.batch
        start = time.perf_counter()
        batch.seal()
        self.leaf_seconds += time.perf_counter() - start
        logits, probability = self.evaluator.evaluate(batch)
        values = (2.0 * probability - 1.0).astype(np.float32)
        self.tree.expand(actors, nodes, batch.row_counts, batch.moves, logits, values)
        return values

    def expand_roots(self, boards: Sequence[cshogi.Board], actors: Optional[np.ndarray] = None) -> None:
        """Empties the trees of `actors` (default: all) and evaluates their roots in one pass."""
        start = time.perf_counter()
        actors = np.arange(len(boards)) if actors is None else np.asarray(actors, np.int64)
        tree = self.tree
        tree.num_nodes[actors] = 0
        nodes = np.array([tree.add_node(a) for a in actors.tolist()], np.int64)
        self._ensure_rows(len(actors))
        for a in actors.tolist():
            moves = list(boards[a].legal_moves)
            if not moves:
                raise ValueError(f"actor {a}: the root position has no legal move: {boards[a].sfen()}")
            self.batch.add(boards[a], moves)
        self.leaf_seconds += time.perf_counter() - start
        self._evaluate_and_expand(actors, nodes)
        self.seconds += time.perf_counter() - start

    def simulate(self, boards: Sequence[cshogi.Board], plies: np.ndarray, select: SelectFn,
                 leaves: int = 1, virtual_loss: float = 1.0, roots: Optional[np.ndarray] = None,
                 actors: Optional[np.ndarray] = None) -> None:
        """`leaves` simulations for each of `actors` (default all), with one forward pass.

        plies: (A,) plies played before each root (for the ply limit inside the tree).
        roots: (A,) the node each tree's search starts from (default 0).
        """
        start = time.perf_counter()
        plies = np.asarray(plies, np.int64)
        actors = np.arange(len(boards)) if actors is None else np.asarray(actors, np.int64)
        roots = np.zeros(len(boards), np.int64) if roots is None else np.asarray(roots, np.int64)
        self._ensure_rows(len(actors) * leaves)
        paths = []  # per descent: actors, nodes (n, D), edges (n, D), length, kind, value, row
        pending_actors, pending_nodes = [], []
        use_virtual_loss = leaves > 1 and virtual_loss > 0
        for _ in range(leaves):
            path = self._descend(boards, plies, select, actors, roots[actors], pending_actors, pending_nodes)
            paths.append(path)
            if use_virtual_loss:
                self._add(path, visits=virtual_loss, value=-virtual_loss, alternate=False)
        values = np.zeros(0, np.float32)
        if pending_actors:
            values = self._evaluate_and_expand(np.array(pending_actors, np.int64), np.array(pending_nodes, np.int64))
        for path in paths:
            if use_virtual_loss:
                self._add(path, visits=-virtual_loss, value=virtual_loss, alternate=False)
            value = path["value"]
            new = path["kind"] == _NEW
            value[new] = values[path["row"][new]]
            self._add(path, visits=1.0, value=value, alternate=True)
        self.seconds += time.perf_counter() - start

    def _descend(self, boards, plies, select, actors, starts, pending_actors, pending_nodes) -> dict:
        """Walks every actor from its start node to a leaf, prepares the leaf, walks back."""
        tree, num = self.tree, len(actors)
        depth_cap = 8
        path_nodes = np.zeros((num, depth_cap), np.int64)
        path_edges = np.zeros((num, depth_cap), np.int64)
        length = np.zeros(num, np.int64)
        kind = np.full(num, _KNOWN, np.int64)
        value = np.zeros(num, np.float32)
        row = np.full(num, -1, np.int64)
        node = starts.copy()
        active = np.arange(num)  # indices into `actors`
        depth = 0
        while active.size:
            if depth == depth_cap:
                depth_cap *= 2
                path_nodes = np.pad(path_nodes, ((0, 0), (0, depth_cap - path_nodes.shape[1])))
                path_edges = np.pad(path_edges, ((0, 0), (0, depth_cap - path_edges.shape[1])))
            who = actors[active]
            current = node[active]
            edges = select(who, current, depth)
            path_nodes[active, depth] = current
            path_edges[active, depth] = edges
            for a, m in zip(who.tolist(), tree.edge_move[who, current, edges].tolist()):
                boards[a].push(m)
            child = tree.edge_child[who, current, edges]
            depth += 1
            length[active] = depth
            is_new = child < 0
            if is_new.any():
                fresh = tree.add_nodes(who[is_new])
                tree.edge_child[who[is_new], current[is_new], edges[is_new]] = fresh
                tree.node_children[who[is_new], current[is_new]] += 1  # one descent per actor: no repeats
                kind[active[is_new]] = _NEW
                node[active[is_new]] = fresh
            known = np.flatnonzero(~is_new)
            k_who, k_child = who[known], child[known]
            terminal = tree.node_terminal[k_who, k_child]
            waiting = ~terminal & (tree.num_edges[k_who, k_child] == 0)
            stop = terminal | waiting
            value[active[known[terminal]]] = tree.node_value[k_who[terminal], k_child[terminal]]
            kind[active[known[waiting]]] = _COLLISION
            going_on = known[~stop]
            node[active[going_on]] = child[going_on]
            active = active[going_on]

        self._prepare_leaves(boards, plies, actors, node, length, kind, value, row, pending_actors, pending_nodes)
        for a, n in zip(actors.tolist(), length.tolist()):
            board = boards[a]
            for _ in range(n):
                board.pop()
        self.collisions += int((kind == _COLLISION).sum())
        return {"actors": actors, "nodes": path_nodes, "edges": path_edges, "length": length, "kind": kind,
                "value": value, "row": row}

    def _prepare_leaves(self, boards, plies, actors, node, length, kind, value, row, pending_actors,
                        pending_nodes) -> None:
        """At each new leaf (boards still pushed down): a game end gives the value at once;
        otherwise the leaf joins the batch (its features and legal moves)."""
        start = time.perf_counter()
        tree, rules, batch = self.tree, self.rules, self.batch
        mate_plies = self.leaf_mate_plies
        new = np.flatnonzero(kind == _NEW)
        who = actors[new]
        for i, a, n, ply in zip(new.tolist(), who.tolist(), node[new].tolist(), (plies[who] + length[new]).tolist()):
            board = boards[a]
            legal = list(board.legal_moves)
            end = outcome(board, ply, rules, repetition_plies=TREE_REPETITION_PLIES, mate_plies=mate_plies,
                          has_legal_move=bool(legal))
            if end is not None:
                tree.set_terminal(a, n, end.value)
                kind[i] = _KNOWN
                value[i] = end.value
                continue
            row[i] = batch.add(board, legal)
            pending_actors.append(a)
            pending_nodes.append(n)
        self.leaf_seconds += time.perf_counter() - start

    def _add(self, path: dict, visits, value, alternate: bool) -> None:
        """Adds `visits` and `value` to every edge on the paths (collisions skipped).

        alternate=True: `value` (per descent) is from the leaf's side to move and its sign flips
        at each ply (a backup). alternate=False: `value` is added as is for every edge's chooser
        (a virtual loss)."""
        counted = path["kind"] != _COLLISION
        length = np.where(counted, path["length"], 0)
        depth = np.arange(path["nodes"].shape[1])
        i_idx, d_idx = np.nonzero(depth[None, :] < length[:, None])
        if not i_idx.size:
            return
        a_idx = path["actors"][i_idx]
        index = (a_idx, path["nodes"][i_idx, d_idx], path["edges"][i_idx, d_idx])
        # The edge entering the leaf belongs to the leaf's opponent: sign -1, then alternating.
        if alternate:
            sign = np.where((length[i_idx] - d_idx) % 2 == 1, -1.0, 1.0).astype(np.float32)
        else:
            sign = np.ones(len(i_idx), np.float32)
        value = np.broadcast_to(np.asarray(value, np.float32), counted.shape)
        np.add.at(self.tree.edge_visits, index, np.float32(visits))
        np.add.at(self.tree.edge_value_sum, index, sign * value[i_idx])
