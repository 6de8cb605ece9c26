"""Search trees of many actors in preallocated arrays (no Python object per node).

Actor `a`'s tree uses node rows `[a, 0:num_nodes[a]]`; node 0 is its root. A node's outgoing
edges are its legal moves, stored in columns `0:num_edges[a, n]` of the edge arrays; the other
columns are padding (logit -inf, child -1, no visits). Values are in [-1, 1]: `node_value` from
the node's side to move, `edge_value_sum` from the side choosing the edge (the parent's side to
move).

Work per move does not depend on the arrays' width (the widest node any actor ever had):
expansion writes only the columns of real edges (and clears those a row's previous occupant
left), and a selection reads only a node's *candidates* (`candidates`). `edge_order` ranks a
node's edges by prior (logit, then column); when every selection at a node picks among its
candidates — the edges already chosen plus the best-ranked one not yet chosen — the chosen edges
are always a prefix of that ranking, of length `node_children`. That is the case for PUCT and
for Gumbel's non-root rule: every unvisited edge scores alike but for its prior. `work` counts
the edge cells expansions and candidate reads touched (a deterministic measure of cost).
"""
from __future__ import annotations

import numpy as np

_EDGE_FILL = {"edge_move": 0, "edge_logit": -np.inf, "edge_child": -1, "edge_visits": 0.0,
              "edge_value_sum": 0.0, "edge_order": 0}
_EDGE_DTYPES = {"edge_move": np.int32, "edge_logit": np.float32, "edge_child": np.int32,
                "edge_visits": np.float32, "edge_value_sum": np.float32, "edge_order": np.int16}
_NODE_DTYPES = {"node_value": np.float32, "node_terminal": np.bool_, "num_edges": np.int32,
                "node_logsumexp": np.float32, "node_children": np.int32, "written": np.int32}
EDGE_ARRAYS = tuple(_EDGE_FILL)
NODE_ARRAYS = tuple(_NODE_DTYPES)  # `written`: columns a row may hold besides padding


class Tree:
    # per node (actors x max_nodes) and per edge (actors x max_nodes x width): set in __init__
    # and grow() from _NODE_DTYPES and _EDGE_FILL; declared here for the type checker
    node_value: np.ndarray
    node_terminal: np.ndarray
    num_edges: np.ndarray
    node_logsumexp: np.ndarray
    node_children: np.ndarray
    written: np.ndarray
    edge_move: np.ndarray
    edge_logit: np.ndarray
    edge_child: np.ndarray
    edge_visits: np.ndarray
    edge_value_sum: np.ndarray
    edge_order: np.ndarray

    def __init__(self, num_actors: int, max_nodes: int, width: int = 128):
        self.num_actors, self.max_nodes, self.width = num_actors, max_nodes, width
        self.num_nodes = np.zeros(num_actors, np.int64)
        for name, dtype in _NODE_DTYPES.items():
            setattr(self, name, np.zeros((num_actors, max_nodes), dtype))
        for name, fill in _EDGE_FILL.items():
            setattr(self, name, np.full((num_actors, max_nodes, width), fill, _EDGE_DTYPES[name]))
        self.work = 0

    def clear(self) -> None:
        """Empties every tree. A row is rewritten when its node is expanded, so no array needs
        zeroing here."""
        self.num_nodes[:] = 0

    def reserve(self, max_nodes: int, width: int) -> None:
        """Grows the node capacity and edge width (keeping contents) when either is too small."""
        if max_nodes <= self.max_nodes and width <= self.width:
            return
        new_nodes, new_width = max(max_nodes, self.max_nodes), max(width, self.width)
        for name, fill in _EDGE_FILL.items():
            new = np.full((self.num_actors, new_nodes, new_width), fill, _EDGE_DTYPES[name])
            new[:, :self.max_nodes, :self.width] = getattr(self, name)
            setattr(self, name, new)
        for name, dtype in _NODE_DTYPES.items():
            new = np.zeros((self.num_actors, new_nodes), dtype)
            new[:, :self.max_nodes] = getattr(self, name)
            setattr(self, name, new)
        self.max_nodes, self.width = new_nodes, new_width

    def add_node(self, actor: int) -> int:
        return int(self.add_nodes(np.array([actor], np.int64))[0])

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
        # A fresh node is neither terminal nor expanded (0 edges = waiting for its evaluation).
        self.node_terminal[actors, index] = False
        self.num_edges[actors, index] = 0
        self.node_children[actors, index] = 0
        return index

    def set_terminal(self, actor: int, node: int, value: float) -> None:
        self.node_terminal[actor, node] = True
        self.node_value[actor, node] = value
        self.num_edges[actor, node] = 0

    def expand(self, actors: np.ndarray, nodes: np.ndarray, counts: np.ndarray, moves: np.ndarray,
               logits: np.ndarray, values: np.ndarray) -> None:
        """Writes the edges of freshly evaluated nodes, all rows at once.

        actors, nodes, counts: (R,) rows to expand and their numbers of legal moves; moves,
        logits: (L,) flat, row after row (L = counts.sum()); values: (R,) in [-1, 1] (the
        node's side)."""
        counts = np.asarray(counts, np.int64)
        rows = len(counts)
        if not rows:
            return
        needed = int(counts.max())
        if needed > self.width:
            self.reserve(self.max_nodes, -(-needed // 32) * 32)
        self._clear_columns(actors, nodes, counts)
        starts = np.cumsum(counts) - counts
        row = np.repeat(np.arange(rows), counts)
        base = self._row_base(actors, nodes)  # a row's columns are contiguous: flat = base + column
        column = np.arange(len(row)) - starts[row]
        flat = base[row] + column
        for name, content in (("edge_move", moves), ("edge_logit", logits),
                              ("edge_child", -1), ("edge_visits", 0.0), ("edge_value_sum", 0.0)):
            getattr(self, name).reshape(-1)[flat] = content
        # Rank by logit, then column: one sort of (row, -logit, column) keys.
        bits = logits.astype(np.float32).view(np.uint32).astype(np.int64)
        ordered = np.where(bits >= 1 << 31, bits ^ 0xFFFFFFFF, bits | 1 << 31)  # increasing with the logit
        keys = np.sort((row << 42) | ((0xFFFFFFFF - ordered) << 10) | column)
        self.edge_order.reshape(-1)[flat] = keys & 1023
        top = np.maximum.reduceat(logits, starts)
        self.node_logsumexp[actors, nodes] = top + np.log(np.add.reduceat(np.exp(logits - top[row]), starts))
        self.num_edges[actors, nodes] = counts
        self.node_value[actors, nodes] = values
        self.node_terminal[actors, nodes] = False
        self.node_children[actors, nodes] = 0
        self.work += len(row)

    def _row_base(self, actors: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Where rows (actor, node) start in the flattened edge arrays."""
        return (np.asarray(actors, np.int64) * self.max_nodes + nodes) * self.width

    def _clear_columns(self, actors, nodes, counts) -> None:
        """Resets to padding the columns past `counts` that an earlier node in the same rows
        wrote (rows are reused from move to move)."""
        stale = np.maximum(self.written[actors, nodes] - counts, 0)
        self.written[actors, nodes] = counts
        total = int(stale.sum())
        if not total:
            return
        row = np.repeat(np.arange(len(stale)), stale)
        flat = (self._row_base(actors, nodes) + counts)[row] + np.arange(total) - (np.cumsum(stale) - stale)[row]
        for name, fill in _EDGE_FILL.items():
            getattr(self, name).reshape(-1)[flat] = fill
        self.work += total

    def candidates(self, actors: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(R, K) the columns a selection at these nodes may choose — each node's chosen edges
        and its best-ranked unchosen one, in rank order — and (R, K) which are real edges."""
        num = self.num_edges[actors, nodes]
        children = self.node_children[actors, nodes]
        k = padded_width(min(int(children.max(initial=0)) + 1, int(num.max(initial=0))), self.width)
        valid = np.arange(k)[None, :] <= np.minimum(children, num - 1)[:, None]
        self.work += len(actors) * k
        return self.edge_order[actors, nodes, :k].astype(np.int64), valid

    def gather(self, name: str, actors: np.ndarray, nodes: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """(R, K) values of edge array `name` at `columns` (R, K) of the rows."""
        return getattr(self, name)[actors[:, None], nodes[:, None], columns]

    def valid(self, actors: np.ndarray, nodes: np.ndarray, width: int | None = None) -> np.ndarray:
        """(R, width) mask of real edges (default: the arrays' whole width)."""
        return np.arange(self.width if width is None else width)[None, :] < self.num_edges[actors, nodes][:, None]


# numpy sums a row pairwise, grouping its terms by the row's length, so the padding zeros of a
# wider tree would change the last bit of a sum and with it a search's results (and a run resumed
# with fresh, narrower trees would drift from the run that never stopped). Rows are summed in
# blocks of this many columns instead (numpy's own block: within one, trailing zeros change
# nothing), the block sums added in order.
_SUM_BLOCK = 128


def padded_width(columns: int, limit: int) -> int:
    """`columns` rounded up to a multiple of 8 (at most `limit`): rows this wide, summed with
    `edge_sum`, give every row the same result whatever the other rows' widths."""
    return min(max(8, -(-columns // 8) * 8), limit)


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
