"""What self-play's batched searches return (`BatchSearchResult`: GumbelSearch, PuctSearch and
ThreadedSearch, A games searched together with a fixed budget), and the per-actor simulation
counts they accept. The engine's anytime search (anytime.py) reports one game's search as an
`AnytimeSearchResult` instead."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from azshogi.search.formulas import root_value
from azshogi.search.tree import Tree
from azshogi.shogi import features


@dataclass(frozen=True)
class BatchSearchResult:
    """One batched search of A actors' positions: each actor's move and its root's statistics
    (the training targets). K is the widest root's number of legal moves; the columns past an
    actor's num_edges are padding.

    Attributes:
        moves: (A,) int64 cshogi moves chosen, one per actor.
        edge_moves: (A, K) int32 cshogi moves of the root's edges (legal moves), 0 on padding.
        labels: (A, K) int32 their policy labels (shogi/features.py), 0 on padding.
        num_edges: (A,) int32 the root's legal moves.
        policy: (A, K) float32 the policy target over the root's edges (Gumbel: the improved
            policy; PUCT: visits normalised), 0 on padding.
        visits: (A, K) float32 root visit counts.
        root_value: (A,) float32 the search's value of the root for its side to move, in [-1, 1].
    """

    moves: np.ndarray
    edge_moves: np.ndarray
    labels: np.ndarray
    num_edges: np.ndarray
    policy: np.ndarray
    visits: np.ndarray
    root_value: np.ndarray


def make_result(tree: Tree, roots: np.ndarray, width: int, chosen: np.ndarray, policy: np.ndarray,
                turns: np.ndarray) -> BatchSearchResult:
    """Packs the roots' statistics; `chosen` (A,) are edge indices, `policy` (A, width), `turns`
    (A,) the roots' sides to move (for the moves' labels)."""
    actors = np.arange(len(roots))
    visits = tree.edge_visits[actors, roots, :width].copy()
    value = root_value(tree.node_value[actors, roots], tree.edge_value_sum[actors, roots, :width], visits)
    edge_moves = tree.edge_move[actors, roots, :width].copy()
    labels = np.where(tree.valid(actors, roots, width),
                      features.labels_of(edge_moves.astype(np.int64), np.asarray(turns, np.int64)[:, None]), 0)
    return BatchSearchResult(
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
