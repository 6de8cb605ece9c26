"""The search's formulas, one each, on (R, K) rows of edges (R nodes, K edge columns; padding
columns are invalid). Values are in [-1, 1]: an edge's `value_sum / visits` is its Q from the
side choosing it; `node_value` is the network's value of the node for its side to move.

PUCT (Silver et al. 2018) with the rule for unvisited edges as an argument (self-play: Q = 0;
the engine: first-play urgency), Gumbel AlphaZero's completed Q and sigma (Danihelka et al.
2022), and the search value of a root.
"""
from __future__ import annotations

import numpy as np

from azshogi.search.tree import edge_sum, masked_softmax


def puct_scores(prior: np.ndarray, visits: np.ndarray, value_sum: np.ndarray, valid: np.ndarray,
                c_base: float, c_init: float, unvisited_q, parent_visits=None) -> np.ndarray:
    """(R, K) Q + U for each edge; -inf on padding.

    U = c(s) P(s, a) sqrt(max(N(s), 1)) / (1 + N(s, a)), c(s) = log((1 + N(s) + c_base) / c_base)
    + c_init, N(s) = the row's visits (or `parent_visits`, broadcastable to (R, 1)). unvisited_q:
    the Q of edges without visits, a scalar (AlphaZero: 0) or (R, 1) per row (e.g.
    `first_play_urgency`). sqrt(max(N, 1)): on a node's first visit the prior alone decides
    (N = 0 would tie all). Extra trailing axes broadcast (see `puct_shares`)."""
    parent = visits.sum(axis=1, keepdims=True) if parent_visits is None else parent_visits
    c = np.log((1.0 + parent + c_base) / c_base) + c_init
    q = np.where(visits > 0, value_sum / np.maximum(visits, 1e-9), unvisited_q)
    u = c * prior * np.sqrt(np.maximum(parent, 1.0)) / (1.0 + visits)
    return np.where(valid, q + u, -np.inf)


def puct_shares(prior: np.ndarray, visits: np.ndarray, value_sum: np.ndarray, valid: np.ndarray,
                counts: np.ndarray, c_base: float, c_init: float, unvisited_q, virtual_loss: float) -> np.ndarray:
    """(R, K) how many of counts[r] selections at node r take each edge, when each selection adds
    a virtual loss (visits +vl, value -vl) to its edge before the next one chooses.

    It is the greedy sequence of `puct_scores` argmaxes with N(s) and `unvisited_q` held at their
    values before the first selection, computed at once: the score an edge offers to its k-th
    arrival falls with k, so the greedy picks are the counts[r] best (edge, k) entries (scores
    made non-increasing in k, as the greedy would take a rising pair together; ties go to the
    lower column, as argmax). With counts = 1 it is the argmax of `puct_scores`. prior, visits,
    value_sum, valid: (R, K); unvisited_q: a scalar or (R, 1)."""
    rows = np.arange(len(prior))
    shares = np.zeros(prior.shape, np.int64)
    n = int(counts.max())
    if n == 1:
        shares[rows, puct_scores(prior, visits, value_sum, valid, c_base, c_init, unvisited_q).argmax(axis=1)] = 1
        return shares
    k = (np.arange(n, dtype=np.float32) * np.float32(virtual_loss))[:, None]
    parent = visits.sum(axis=1)[:, None, None]
    # (R, n, K): row r's scores for each edge's k-th arrival.
    scores = puct_scores(prior[:, None, :], visits[:, None, :] + k, value_sum[:, None, :] - k,
                         valid[:, None, :] & (np.arange(n)[:, None] < counts[:, None, None]), c_base, c_init,
                         np.asarray(unvisited_q)[..., None], parent_visits=parent)
    # Only an unvisited edge's first two entries can rise (when its first-play urgency is below
    # -1, the Q a virtual loss gives); every later entry, and every visited edge's, falls with k.
    if (scores[:, 0] < scores[:, 1]).any():
        scores = np.minimum.accumulate(scores, axis=1)
    flat = scores.reshape(len(prior), -1)
    threshold = -np.partition(-flat, np.unique(counts) - 1, axis=1)[rows, counts - 1]
    taken = scores > threshold[:, None, None]
    tied = scores == threshold[:, None, None]
    room = counts - taken.sum(axis=(1, 2))
    if (tied.sum(axis=(1, 2)) > room).any():  # more ties than places: the lower columns first
        by_column = tied.transpose(0, 2, 1).reshape(len(prior), -1)
        tied &= (np.cumsum(by_column, axis=1) <= room[:, None]).reshape(len(prior), -1, n).transpose(0, 2, 1)
    return (taken | tied).sum(axis=1)


def first_play_urgency(node_value: np.ndarray, prior: np.ndarray, visits: np.ndarray,
                       reduction: float) -> np.ndarray:
    """(R, 1) the Q of unvisited edges as Leela Zero sets it: the node's value minus `reduction`
    times the square root of the prior mass already visited."""
    visited_prior = edge_sum(np.where(visits > 0, prior, 0.0), keepdims=True)
    return node_value[:, None] - reduction * np.sqrt(visited_prior)


def root_value(node_value: np.ndarray, value_sum: np.ndarray, visits: np.ndarray) -> np.ndarray:
    """(R,) a node's search value for its side to move: the network value averaged with every
    simulation's value through it. value_sum, visits: (R, K) its edges (chooser's view = the
    node's side to move)."""
    return (node_value + edge_sum(value_sum)) / (1.0 + visits.sum(axis=1))


def completed_q(logits: np.ndarray, visits: np.ndarray, value_sum: np.ndarray,
                node_value: np.ndarray) -> np.ndarray:
    """Q of visited actions; the mixed value estimate v_mix for unvisited ones.

    logits, visits, value_sum: (R, K) (logits -inf on padding); node_value: (R,) network value.
    v_mix = (v + N / sum_{b visited} pi(b) * sum_{b visited} pi(b) q(b)) / (1 + N), N = sum visits.
    """
    return mixed_q(masked_softmax(logits), visits, value_sum, node_value)[0]


def mixed_q(prior: np.ndarray, visits: np.ndarray, value_sum: np.ndarray,
            node_value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(completed Q (R, K), v_mix (R,)) from prior probabilities instead of logits."""
    visited = visits > 0
    q = np.where(visited, value_sum / np.maximum(visits, 1.0), 0.0)
    total = visits.sum(axis=1)
    prior_visited = edge_sum(np.where(visited, prior, 0.0))
    weighted_q = edge_sum(np.where(visited, prior * q, 0.0)) / np.maximum(prior_visited, 1e-12)
    v_mix = np.where(total > 0, (node_value + total * weighted_q) / (1.0 + total), node_value)
    return np.where(visited, q, v_mix[:, None]).astype(np.float32), v_mix


def sigma(cq: np.ndarray, visits: np.ndarray, valid: np.ndarray, c_visit: float, c_scale: float,
          rescale: bool) -> np.ndarray:
    """sigma(q) = (c_visit + max_b N(b)) * c_scale * q, with q in [0, 1]: min-max rescaled over
    the legal actions (rescale=True, as mctx) or mapped from [-1, 1] as a win rate."""
    if rescale:
        low = np.where(valid, cq, np.inf).min(axis=1, keepdims=True)
        high = np.where(valid, cq, -np.inf).max(axis=1, keepdims=True)
        scaled = (cq - low) / np.maximum(high - low, 1e-8)
    else:
        scaled = (cq + 1.0) * 0.5
    return (c_visit + visits.max(axis=1, keepdims=True)) * c_scale * scaled


def subset_sigma(prior: np.ndarray, visits: np.ndarray, value_sum: np.ndarray, node_value: np.ndarray,
                 in_play: np.ndarray, has_rest: np.ndarray, c_visit: float, c_scale: float,
                 rescale: bool) -> tuple[np.ndarray, np.ndarray]:
    """sigma(completed Q) on a subset of a node's columns (R, m) that holds every visited one
    (the root's considered actions, or a node's selection candidates), equal to `sigma` of the
    full row there; and (R,) the sigma of the actions outside the subset (all unvisited: they
    take v_mix). in_play: (R, m) real columns of the subset; has_rest: (R,) some legal action
    lies outside it (else the second result is -inf). Unvisited actions join the min-max range
    through v_mix."""
    visits = np.where(in_play, visits, 0.0)
    visited = visits > 0
    cq, v_mix = mixed_q(prior, visits, value_sum, node_value)
    if rescale:
        any_unvisited = has_rest | (in_play & ~visited).any(axis=1)
        low = np.where(in_play, cq, np.inf).min(axis=1)
        high = np.where(in_play, cq, -np.inf).max(axis=1)
        low = np.where(any_unvisited, np.minimum(low, v_mix), low)
        high = np.where(any_unvisited, np.maximum(high, v_mix), high)
        span = np.maximum(high - low, 1e-8)
        scaled, rest = (cq - low[:, None]) / span[:, None], (v_mix - low) / span
    else:
        scaled, rest = (cq + 1.0) * 0.5, (v_mix + 1.0) * 0.5
    factor = (c_visit + visits.max(axis=1)) * c_scale
    return factor[:, None] * scaled, np.where(has_rest, factor * rest, -np.inf)


def root_sigma(prior: np.ndarray, visits: np.ndarray, value_sum: np.ndarray, node_value: np.ndarray,
               in_play: np.ndarray, has_unconsidered: np.ndarray, c_visit: float, c_scale: float,
               rescale: bool) -> np.ndarray:
    """sigma(completed Q) on the root's considered columns only (R, m): `subset_sigma`."""
    return subset_sigma(prior, visits, value_sum, node_value, in_play, has_unconsidered, c_visit, c_scale,
                        rescale)[0]


def subset_improved_policy(prior: np.ndarray, sig: np.ndarray, in_play: np.ndarray,
                           rest_sigma: np.ndarray) -> np.ndarray:
    """softmax(logits + sigma) over all legal actions, on a subset of columns (R, m): prior (the
    softmax of the logits) and sigma there; the actions outside the subset hold the remaining
    prior mass and share sigma `rest_sigma` (R,)."""
    shift = np.maximum(np.where(in_play, sig, -np.inf).max(axis=1), rest_sigma)[:, None]
    weight = prior * np.exp(np.where(in_play, sig - shift, -np.inf))
    rest = np.maximum(1.0 - edge_sum(np.where(in_play, prior, 0.0)), 0.0) * np.exp(rest_sigma - shift[:, 0])
    return weight / (edge_sum(weight) + rest)[:, None]
