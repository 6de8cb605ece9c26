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

from azshogi.search.tree import Tree
from azshogi.shogi.network_io import Evaluator
from azshogi.shogi.rules import Rules, outcome

# The look-back for repetitions inside the tree (dlshogi uses 16 plies too): enough for
# perpetual checks and shuffles, cheap to test at every leaf.
TREE_REPETITION_PLIES = 16

SelectFn = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
# share(actors (G,), nodes (G,), counts (G,), depth) -> (G, K) how many of the counts[g] descents
# arriving together at node g take each of its edges (see simulate_together).
ShareFn = Callable[[np.ndarray, np.ndarray, np.ndarray, int], np.ndarray]

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
        nodes = tree.add_nodes(actors)
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

        leaves: an int, or (len(actors),) one count per actor (each tree searched as it would be
        alone with its count: virtual loss only in trees with more than one leaf).
        plies: (A,) plies played before each root (for the ply limit inside the tree).
        roots: (A,) the node each tree's search starts from (default 0).
        """
        start = time.perf_counter()
        plies = np.asarray(plies, np.int64)
        actors = np.arange(len(boards)) if actors is None else np.asarray(actors, np.int64)
        roots = np.zeros(len(boards), np.int64) if roots is None else np.asarray(roots, np.int64)
        counts = np.broadcast_to(np.asarray(leaves, np.int64), actors.shape)
        self._ensure_rows(int(counts.sum()))
        paths = []  # per descent: actors, nodes (n, D), edges (n, D), length, kind, value, row
        pending_actors: list[int] = []
        pending_nodes: list[int] = []
        lossy = counts > 1 if virtual_loss > 0 else np.zeros(len(actors), np.bool_)  # trees with virtual loss
        for j in range(int(counts.max(initial=0))):
            going = counts > j
            path = self._descend(boards, plies, select, actors[going], roots[actors[going]], pending_actors,
                                 pending_nodes)
            path["lossy"] = lossy[going]
            paths.append(path)
            if path["lossy"].any():
                self._add(path, visits=virtual_loss, value=-virtual_loss, alternate=False, only=path["lossy"])
        values = np.zeros(0, np.float32)
        if pending_actors:
            values = self._evaluate_and_expand(np.array(pending_actors, np.int64), np.array(pending_nodes, np.int64))
        for path in paths:
            if path["lossy"].any():
                self._add(path, visits=-virtual_loss, value=virtual_loss, alternate=False, only=path["lossy"])
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
        new = np.flatnonzero(kind == _NEW)
        who = actors[new]
        for i, a, n, ply in zip(new.tolist(), who.tolist(), node[new].tolist(), (plies[who] + length[new]).tolist()):
            r = self._prepare_leaf(boards[a], a, n, ply, pending_actors, pending_nodes)
            if r is None:
                kind[i], value[i] = _KNOWN, self.tree.node_value[a, n]
            else:
                row[i] = r
        self.leaf_seconds += time.perf_counter() - start

    def _prepare_leaf(self, board, actor: int, node: int, ply: int, pending_actors, pending_nodes) -> Optional[int]:
        """One new leaf, `board` at its position (`ply` plies from the game's start): a game end
        makes it terminal (None, its value in the tree); otherwise the leaf joins the batch and
        its row is returned."""
        legal = list(board.legal_moves)
        end = outcome(board, ply, self.rules, repetition_plies=TREE_REPETITION_PLIES,
                      mate_plies=self.leaf_mate_plies, has_legal_move=bool(legal))
        if end is not None:
            self.tree.set_terminal(actor, node, end.value)
            return None
        pending_actors.append(actor)
        pending_nodes.append(node)
        return self.batch.add(board, legal)

    def _add(self, path: dict, visits, value, alternate: bool, only: Optional[np.ndarray] = None) -> None:
        """Adds `visits` and `value` to every edge on the paths (collisions skipped; with
        `only`, (n,) bool, the descents it marks alone).

        alternate=True: `value` (per descent) is from the leaf's side to move and its sign flips
        at each ply (a backup). alternate=False: `value` is added as is for every edge's chooser
        (a virtual loss)."""
        counted = path["kind"] != _COLLISION
        if only is not None:
            counted &= only
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

    # --- many descents of each tree per forward pass, walked level by level ---

    def simulate_together(self, boards: Sequence[cshogi.Board], plies: np.ndarray, share: ShareFn, leaves,
                          roots: Optional[np.ndarray] = None, actors: Optional[np.ndarray] = None) -> None:
        """`leaves` descents of each of `actors`' trees (an int, or one per actor), all their new
        leaves evaluated in one forward pass.

        The descents walk down together one tree level at a time, without boards: at each level
        the descents that stand on the same node are handed to `share` as one group, which says
        which edges they take (all of a level's groups in a few calls, so the Python work per
        level is shared by every descent). How a group is shared out is the search family's
        rule (the engine: virtual-loss PUCT, search/anytime.py), which accounts for the step's
        own descents itself: no virtual loss is written into the tree, and the statistics change
        only at the backup (new leaves become nodes at once). The boards are walked afterwards,
        once per new leaf (consecutive leaves share the moves of their common prefix), to
        prepare the leaves as `simulate` does.

        A descent that takes an edge another descent of this step has just taken into a new
        node ends there (a collision): it is dropped from the backup, unless that node turns out
        to end the game, whose value it backs up like any descent that reaches a known end.
        """
        start = time.perf_counter()
        tree = self.tree
        actors = np.arange(len(boards)) if actors is None else np.asarray(actors, np.int64)
        roots = np.zeros(len(boards), np.int64) if roots is None else np.asarray(roots, np.int64)
        who = np.repeat(actors, np.broadcast_to(np.asarray(leaves, np.int64), actors.shape))
        node = np.repeat(roots[actors], np.broadcast_to(np.asarray(leaves, np.int64), actors.shape))
        self._ensure_rows(len(who))
        path_nodes, path_edges, length, kind, value = self._descend_together(share, who, node)
        row = np.full(len(who), -1, np.int64)
        pending_actors: list[int] = []
        pending_nodes: list[int] = []
        self._prepare_paths(boards, plies, who, node, path_nodes, path_edges, length, kind, value, row,
                            pending_actors, pending_nodes)
        collided = np.flatnonzero(kind == _COLLISION)
        over = collided[tree.node_terminal[who[collided], node[collided]]]
        kind[over], value[over] = _KNOWN, tree.node_value[who[over], node[over]]
        self.collisions += len(collided) - len(over)
        if pending_actors:
            values = self._evaluate_and_expand(np.array(pending_actors, np.int64), np.array(pending_nodes, np.int64))
            new = kind == _NEW
            value[new] = values[row[new]]
        self._back_up(who, path_nodes, path_edges, length, kind, value)
        self.seconds += time.perf_counter() - start

    def _descend_together(self, share: ShareFn, who: np.ndarray, node: np.ndarray):
        """Walks all descents down level by level (the tree only). Returns their path nodes and
        edges (D, depth), lengths, what each ended on and the values of known ends; `node`
        becomes each descent's last node."""
        tree, num = self.tree, len(who)
        kind = np.full(num, _KNOWN, np.int64)
        value = np.zeros(num, np.float32)
        # per depth: (descents still going down, their nodes, the edges they take)
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        active = np.arange(num)
        while active.size:
            a, current = who[active], node[active]
            edges = self._share_by_node(share, a, current, len(levels))
            levels.append((active, current, edges))
            child = tree.edge_child[a, current, edges].astype(np.int64)
            fresh = np.flatnonzero(child < 0)
            if fresh.size:
                # The first descent through a new edge adds its node; the later ones of this step
                # find that node waiting for its evaluation.
                edge_key = (a[fresh] * tree.max_nodes + current[fresh]) * tree.width + edges[fresh]
                _, first, which = np.unique(edge_key, return_index=True, return_inverse=True)
                makers = fresh[first]
                made = tree.add_nodes(a[makers])
                tree.edge_child[a[makers], current[makers], edges[makers]] = made
                np.add.at(tree.node_children, (a[makers], current[makers]), 1)
                child[fresh] = made[which.ravel()]
                kind[active[fresh]] = _COLLISION
                kind[active[makers]] = _NEW
            node[active] = child
            seen = np.flatnonzero(kind[active] == _KNOWN)  # reached a node that existed before
            k_who, k_child = a[seen], child[seen]
            terminal = tree.node_terminal[k_who, k_child]
            waiting = ~terminal & (tree.num_edges[k_who, k_child] == 0)
            value[active[seen[terminal]]] = tree.node_value[k_who[terminal], k_child[terminal]]
            kind[active[seen[waiting]]] = _COLLISION
            active = active[seen[~(terminal | waiting)]]
        path_nodes = np.zeros((num, len(levels)), np.int64)
        path_edges = np.zeros((num, len(levels)), np.int64)
        length = np.zeros(num, np.int64)
        for depth, (going, current, edges) in enumerate(levels):
            path_nodes[going, depth], path_edges[going, depth] = current, edges
            length[going] = depth + 1
        return path_nodes, path_edges, length, kind, value

    def _share_by_node(self, share: ShareFn, actors: np.ndarray, nodes: np.ndarray, depth: int) -> np.ndarray:
        """One edge per descent: the descents on one node form a group, `share` says how many of
        them take each edge, and they take them in descent order and edge order. Groups of
        similar size (within a factor of four) go to `share` together, so that its
        (groups x edges x size) arrays stay dense."""
        if len(actors) == 1:
            return share(actors, nodes, np.ones(1, np.int64), depth).argmax(axis=1)
        key = actors * self.tree.max_nodes + nodes
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        first = np.ones(len(key), np.bool_)
        first[1:] = ordered[1:] != ordered[:-1]
        starts = np.flatnonzero(first)
        heads = order[starts]
        if len(starts) == len(key):  # every descent on its own node
            edges = np.empty(len(key), np.int64)
            edges[heads] = share(actors[heads], nodes[heads], np.ones(len(key), np.int64), depth).argmax(axis=1)
            return edges
        sizes = np.diff(np.append(starts, len(key)))
        group_of = np.repeat(np.arange(len(starts)), sizes)
        rank = np.arange(len(key)) - starts[group_of]
        taken = np.zeros((len(starts), int(sizes.max())), np.int64)
        size_class = np.log2(sizes).astype(np.int64) // 2
        for c in np.unique(size_class).tolist():
            groups = np.flatnonzero(size_class == c)
            shares = share(actors[heads[groups]], nodes[heads[groups]], sizes[groups], depth)
            row, column = np.nonzero(shares)  # by group, then by edge
            repeats = shares[row, column]
            row = np.repeat(row, repeats)
            taken[groups[row], np.arange(len(row)) - np.repeat(np.cumsum(sizes[groups]) - sizes[groups],
                                                                 sizes[groups])] = np.repeat(column, repeats)
        edges = np.empty(len(key), np.int64)
        edges[order] = taken[group_of, rank]
        return edges

    def _prepare_paths(self, boards, plies, who, node, path_nodes, path_edges, length, kind, value, row,
                       pending_actors, pending_nodes) -> None:
        """Walks each actor's board to its new leaves in descent order (consecutive leaves share
        the moves of their common prefix) and prepares each leaf (`_prepare_leaf`)."""
        new = np.flatnonzero(kind == _NEW)
        if not new.size:
            return
        start = time.perf_counter()
        lines = self.tree.edge_move[who[new, None], path_nodes[new], path_edges[new]].tolist()
        walked: dict[int, list] = {}  # actor -> the moves pushed on its board
        for i, a, n, depth, line in zip(new.tolist(), who[new].tolist(), node[new].tolist(), length[new].tolist(),
                                        lines):
            board, line = boards[a], line[:depth]
            done = walked.get(a, [])
            common = 0
            while common < len(done) and common < depth and done[common] == line[common]:
                common += 1
            for _ in range(len(done) - common):
                board.pop()
            for m in line[common:]:
                board.push(m)
            walked[a] = line
            r = self._prepare_leaf(board, a, n, int(plies[a]) + depth, pending_actors, pending_nodes)
            if r is None:
                kind[i], value[i] = _KNOWN, self.tree.node_value[a, n]
            else:
                row[i] = r
        for a, done in walked.items():
            for _ in done:
                boards[a].pop()
        self.leaf_seconds += time.perf_counter() - start

    def _back_up(self, who, path_nodes, path_edges, length, kind, value) -> None:
        """Adds a visit and the leaf's value along the path of every descent but collisions."""
        counted = np.flatnonzero(kind != _COLLISION)
        depth = np.arange(path_nodes.shape[1])
        i_idx, d_idx = np.nonzero(depth[None, :] < length[counted, None])
        if not i_idx.size:
            return
        i_idx = counted[i_idx]
        index = (who[i_idx], path_nodes[i_idx, d_idx], path_edges[i_idx, d_idx])
        # The edge entering the leaf belongs to the leaf's opponent: sign -1, then alternating.
        sign = np.where((length[i_idx] - d_idx) % 2 == 1, -1.0, 1.0)
        np.add.at(self.tree.edge_visits, index, np.float32(1.0))
        np.add.at(self.tree.edge_value_sum, index, (sign * value[i_idx]).astype(np.float32))
