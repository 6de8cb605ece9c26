"""Search trees of many actors in preallocated arrays (no Python object per node).

Actor `a`'s tree uses node rows `[a, 0:num_nodes[a]]`; node 0 is its root. A node's outgoing
edges are its legal moves, stored in columns `0:num_edges[a, n]` of the edge arrays; the other
columns are padding (logit -inf). Values are in [-1, 1]: `node_value` from the node's side to
move, `edge_value_sum` from the side choosing the edge (the parent's side to move).
"""
from __future__ import annotations

import itertools

import numpy as np

from azshogi.shogi import features

_EDGE_ARRAYS = ("edge_move", "edge_label", "edge_logit", "edge_child", "edge_visits", "edge_value_sum")


class Tree:
    def __init__(self, num_actors: int, max_nodes: int, width: int = 128):
        self.num_actors, self.max_nodes, self.width = num_actors, max_nodes, width
        self.num_nodes = np.zeros(num_actors, np.int64)
        self.node_value = np.zeros((num_actors, max_nodes), np.float32)
        self.node_terminal = np.zeros((num_actors, max_nodes), np.bool_)
        self.num_edges = np.zeros((num_actors, max_nodes), np.int32)
        shape = (num_actors, max_nodes, width)
        self.edge_move = np.zeros(shape, np.int32)
        self.edge_label = np.zeros(shape, np.int32)
        self.edge_logit = np.full(shape, -np.inf, np.float32)
        self.edge_child = np.full(shape, -1, np.int32)
        self.edge_visits = np.zeros(shape, np.float32)
        self.edge_value_sum = np.zeros(shape, np.float32)

    def clear(self) -> None:
        """Empties every tree. Rows are rewritten whole when a node is expanded, so no array
        needs zeroing here."""
        self.num_nodes[:] = 0

    def reserve(self, max_nodes: int, width: int) -> None:
        """Grows the node capacity and edge width (keeping contents) when either is too small."""
        if max_nodes <= self.max_nodes and width <= self.width:
            return
        new_nodes, new_width = max(max_nodes, self.max_nodes), max(width, self.width)
        fills = {"edge_logit": -np.inf, "edge_child": -1}
        for name in _EDGE_ARRAYS:
            old = getattr(self, name)
            new = np.full((self.num_actors, new_nodes, new_width), fills.get(name, 0), old.dtype)
            new[:, :self.max_nodes, :self.width] = old
            setattr(self, name, new)
        for name in ("node_value", "node_terminal", "num_edges"):
            old = getattr(self, name)
            new = np.zeros((self.num_actors, new_nodes), old.dtype)
            new[:, :self.max_nodes] = old
            setattr(self, name, new)
        self.max_nodes, self.width = new_nodes, new_width

    def add_node(self, actor: int) -> int:
        index = int(self.num_nodes[actor])
        if index >= self.max_nodes:
            self.reserve(2 * self.max_nodes, self.width)
        self.num_nodes[actor] = index + 1
        # A fresh node is neither terminal nor expanded (0 edges = waiting for its evaluation).
        self.node_terminal[actor, index] = False
        self.num_edges[actor, index] = 0
        return index

    def add_nodes(self, actors: np.ndarray) -> np.ndarray:
        """`add_node` for each of `actors` (repeats allowed), at once: the new nodes' indices,
        an actor's in the order given."""
        actors = np.asarray(actors, np.int64)
        order = np.argsort(actors, kind="stable")
        ordered = actors[order]
        first = np.ones(len(actors), np.bool_)
        first[1:] = ordered[1:] != ordered[:-1]
        starts = np.flatnonzero(first)
        rank = np.arange(len(actors)) - np.repeat(starts, np.diff(np.append(starts, len(actors))))
        index = np.empty(len(actors), np.int64)
        index[order] = self.num_nodes[ordered] + rank
        if len(actors) and index.max() >= self.max_nodes:
            self.reserve(max(2 * self.max_nodes, int(index.max()) + 1), self.width)
        np.add.at(self.num_nodes, actors, 1)
        self.node_terminal[actors, index] = False
        self.num_edges[actors, index] = 0
        return index

    def set_terminal(self, actor: int, node: int, value: float) -> None:
        self.node_terminal[actor, node] = True
        self.node_value[actor, node] = value
        self.num_edges[actor, node] = 0

    def expand(self, actors: np.ndarray, nodes: np.ndarray, moves: list, turns: np.ndarray,
               logits: np.ndarray, values: np.ndarray) -> None:
        """Writes the edges of freshly evaluated nodes, all rows at once.

        actors, nodes: (R,) rows to expand; moves: R lists of legal cshogi moves; turns: (R,)
        side to move; logits: (R, 2187) policy logits; values: (R,) in [-1, 1] (node's side).
        """
        counts = np.fromiter((len(m) for m in moves), np.int64, len(moves))
        needed = int(counts.max(initial=0))
        if needed > self.width:
            self.reserve(self.max_nodes, -(-needed // 32) * 32)
        width, rows = self.width, len(moves)
        flat_moves = np.fromiter(itertools.chain.from_iterable(moves), np.int64, int(counts.sum()))
        row = np.repeat(np.arange(rows), counts)
        column = np.arange(len(flat_moves)) - np.repeat(np.cumsum(counts) - counts, counts)
        label_rows = np.zeros((rows, width), np.int64)
        label_rows[row, column] = features.labels_of(flat_moves, np.repeat(turns, counts))
        move_rows = np.zeros((rows, width), np.int32)
        move_rows[row, column] = flat_moves
        valid = np.arange(width)[None, :] < counts[:, None]
        gathered = np.take_along_axis(logits, label_rows, axis=1)
        self.edge_move[actors, nodes] = move_rows
        self.edge_label[actors, nodes] = label_rows
        self.edge_logit[actors, nodes] = np.where(valid, gathered, -np.inf)
        self.edge_child[actors, nodes] = -1
        self.edge_visits[actors, nodes] = 0.0
        self.edge_value_sum[actors, nodes] = 0.0
        self.num_edges[actors, nodes] = counts
        self.node_value[actors, nodes] = values
        self.node_terminal[actors, nodes] = False

    def valid(self, actors: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """(R, width) mask of real edges."""
        return np.arange(self.width)[None, :] < self.num_edges[actors, nodes][:, None]


# numpy sums a row pairwise, grouping its terms by the row's length, so the padding zeros of a
# wider tree would change the last bit of a sum and with it a search's results (and a run resumed
# with fresh, narrower trees would drift from the run that never stopped). Rows are summed in
# blocks of this many columns instead (numpy's own block: within one, trailing zeros change
# nothing), the block sums added in order.
_SUM_BLOCK = 128


def edge_sum(x: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """The sum along the last axis (a node's edge columns, padding zeros included), the same to
    the last bit for any padding width (a multiple of 8, as tree widths are)."""
    total = x[..., :_SUM_BLOCK].sum(axis=-1, keepdims=keepdims)
    for start in range(_SUM_BLOCK, x.shape[-1], _SUM_BLOCK):
        total = total + x[..., start:start + _SUM_BLOCK].sum(axis=-1, keepdims=keepdims)
    return total


def masked_softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax along the last axis; -inf entries get probability 0."""
    top = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
    return e / edge_sum(e, keepdims=True)
