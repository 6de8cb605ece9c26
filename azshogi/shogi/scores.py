"""Value, win rate, centipawns and dlshogi's eval: one set of conversions.

| name     | range            | meaning                                                    |
|----------|------------------|------------------------------------------------------------|
| value    | [-1, 1]          | the search's and the trees' unit, side to move's view      |
| win rate | [0, 1]           | (value + 1) / 2; the network's sigmoid output               |
| cp, eval | about ±30000     | dlshogi's scale: EVAL_SCALE * logit(win rate); USI `score cp` and hcpe evals use it |
"""
from __future__ import annotations

import math

import numpy as np

EVAL_SCALE = 756.0864962951762  # dlshogi: eval = EVAL_SCALE * logit(win probability)
EVAL_LIMIT = 30000  # dlshogi's eval of a proven win


def win_rate_to_cp(win_rate: float) -> int:
    """One win rate as USI `score cp` (finite: clipped 1e-6 from 0 and 1; NaN, from a network
    gone wrong, reads as even)."""
    if math.isnan(win_rate):
        return 0
    p = min(max(win_rate, 1e-6), 1.0 - 1e-6)
    return int(round(-EVAL_SCALE * math.log(1.0 / p - 1.0)))


def cp_to_win_rate(cp: float) -> float:
    return float(1.0 / (1.0 + math.exp(-cp / EVAL_SCALE)))


def eval_from_value(value: np.ndarray) -> np.ndarray:
    """Search values in [-1, 1] (side to move) -> dlshogi evals, int16 in [-30000, 30000]."""
    p = (np.clip(np.asarray(value, np.float64), -1.0, 1.0) + 1.0) * 0.5  # float16/32 drift past +-1
    with np.errstate(divide="ignore"):
        score = EVAL_SCALE * (np.log(p) - np.log1p(-p))  # +-inf at p = 1 / 0
    return np.clip(np.nan_to_num(score, nan=0.0), -EVAL_LIMIT, EVAL_LIMIT).round().astype(np.int16)


def value_from_eval(score: np.ndarray) -> np.ndarray:
    """dlshogi evals -> values in [-1, 1]: 2 * sigmoid(eval / EVAL_SCALE) - 1."""
    return np.tanh(np.asarray(score, np.float64) / (2.0 * EVAL_SCALE)).astype(np.float32)
