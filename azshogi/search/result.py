"""What a search returns, the root statistics both search families report, and the per-actor
simulation counts both accept."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from azshogi.search.formulas import root_value
from azshogi.search.tree import Tree
from azshogi.shogi import features


@dataclass(frozen=True)
class SearchResult:
    """Per actor a (A actors, root width K): the move to play and the root's statistics.

    moves: (A,) cshogi moves chosen. edge_moves, labels: (A, K) the root's legal moves and
    their policy labels, valid in columns < num_edges (A,). policy: (A, K) the policy target
    (0 on padding). visits: (A, K) root visit counts. root_value: (A,) the search's value of the
    root for its side to move, in [-1, 1].
    """

    moves: np.ndarray
    edge_moves: np.ndarray
    labels: np.ndarray
    num_edges: np.ndarray
    policy: np.ndarray
    visits: np.ndarray
    root_value: np.ndarray


def make_result(tree: Tree, roots: np.ndarray, width: int, chosen: np.ndarray, policy: np.ndarray,
                turns: np.ndarray) -> SearchResult:
    """Packs the roots' statistics; `chosen` (A,) are edge indices, `policy` (A, width), `turns`
    (A,) the roots' sides to move (for the moves' labels)."""
    actors = np.arange(len(roots))
    visits = tree.edge_visits[actors, roots, :width].copy()
    value = root_value(tree.node_value[actors, roots], tree.edge_value_sum[actors, roots, :width], visits)
    edge_moves = tree.edge_move[actors, roots, :width].copy()
    labels = np.where(tree.valid(actors, roots, width),
                      features.labels_of(edge_moves.astype(np.int64), np.asarray(turns, np.int64)[:, None]), 0)
    return SearchResult(
        moves=edge_moves[actors, chosen].astype(np.int64),
        edge_moves=edge_moves,
        labels=labels.astype(np.int32),
        num_edges=tree.num_edges[actors, roots].copy(),
        policy=policy.astype(np.float32),
        visits=visits,
        root_value=value.astype(np.float32),
    )


def per_actor_simulations(simulations: Optional[np.ndarray], num: int, most: int) -> np.ndarray:
    """(num,) int64 simulations per actor: `most` each by default, else `simulations`, checked
    to lie in [0, most] (self-play's cheap searches ask fewer for some actors)."""
    if simulations is None:
        return np.full(num, most, np.int64)
    sims = np.asarray(simulations, np.int64)
    if sims.shape != (num,) or (sims < 0).any() or (sims > most).any():
        raise ValueError(f"simulations: {num} counts in [0, {most}] expected, got {sims.tolist()}")
    return sims.copy()
