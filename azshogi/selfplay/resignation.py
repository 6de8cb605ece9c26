"""Resignation in self-play (AlphaZero): the rule a game follows (`Resignation`), where the sides of
a played-out game would have resigned (`resign_levels`), and the threshold played-out games
support, once (`suggested_threshold`, the checkpoint line's "5%: T") or as the run's automatic
threshold (`tally` and `next_threshold`, selfplay.resign_target).

A side whose full searches' root win rate stays below the threshold for `moves` consecutive own
full searches resigns (selfplay/actors.py applies it). A share of games is played out instead, and
each records, per run of `moves` own full searches, the highest win rate of the run: at any
threshold above that level the side would have resigned there. Against the game's result that
says, for every threshold at once, whether the game would have been resigned and whether falsely
(the would-be resigner did not lose). AlphaZero kept false resignations under 5% this way.

The automatic threshold: the loop keeps, per checkpoint, the played-out games' counts on
THRESHOLD_GRID (`tally`: would have resigned, of which falsely; saved in the run's counters, so a
resume continues exactly), and after each checkpoint sets the threshold from the last
`resign_window` checkpoints' counts (`next_threshold`): the highest grid threshold at which, and at
every lower one, no more than `target` of the would-be resignations were false. It rises there
only when at least MIN_SUPPORT played-out games would have resigned at it; it falls on any
evidence (a lower threshold is the safe side: a game played on loses only time).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

FALSE_RESIGN_TARGET = 0.05  # AlphaZero kept false resignations under 5%
THRESHOLD_GRID = np.round(np.arange(0.01, 0.51, 0.01), 2)  # the thresholds the rule tries
MIN_SUPPORT = 20  # played-out games that would have resigned at a threshold before the run raises it there


@dataclass(frozen=True)
class Resignation:
    """Resignation in self-play. threshold: a root win rate in [0, 1), 0 = none; moves:
    consecutive own full searches below it; playout_share: the share of games played out to count
    false resignations; auto: the threshold is the run's automatic one (selfplay.resign_target),
    so games are drawn to be played out even while it is 0."""

    threshold: float = 0.0
    moves: int = 3
    playout_share: float = 0.1
    auto: bool = False

    @property
    def on(self) -> bool:
        return self.threshold > 0 or self.auto

    @classmethod
    def from_config(cls, selfplay_config) -> "Resignation":
        sp = selfplay_config
        return cls(sp.resign_threshold, sp.resign_moves, sp.resign_playout_share, sp.resign_target > 0)

    def played_out(self, fresh_rng: np.random.Generator) -> bool:
        """Whether a game is played out: the first draw of its stream (`fresh_rng` is a new
        game's, so that a resumed game draws the same again from game_rng)."""
        return bool(fresh_rng.random() < self.playout_share)


def resign_levels(plies: np.ndarray, root_values: np.ndarray, moves: int) -> np.ndarray:
    """Where a game's sides would have resigned: one row (level, side) per full search that ends
    a run of `moves` own full searches, in game order; its side would have resigned there at any
    threshold above `level`, the highest root win rate of that run. (K, 2) float64 (as the rule
    compares them in self-play)."""
    win_rates, sides = (np.asarray(root_values, np.float64) + 1) / 2, np.asarray(plies) % 2
    index, levels, who = [np.zeros(0, np.int64)], [np.zeros(0)], [np.zeros(0)]
    for side in (0, 1):
        own = np.flatnonzero(sides == side)
        if len(own) >= moves:
            index.append(own[moves - 1:])
            levels.append(np.lib.stride_tricks.sliding_window_view(win_rates[own], moves).max(axis=1))
            who.append(np.full(len(own) - moves + 1, side))
    order = np.argsort(np.concatenate(index), kind="stable")
    return np.stack([np.concatenate(levels)[order], np.concatenate(who)[order]], axis=1)


def false_resignations(samples: list, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per threshold t: the played-out games that would have been resigned, and of those the
    false resignations. At t a game is resigned by the first side whose level is below t,
    falsely when that side did not lose. samples: (levels, winner) of played-out games
    (resign_levels; winner None for a draw)."""
    thresholds = np.asarray(thresholds, np.float64)
    would, false = np.zeros(len(thresholds), np.int64), np.zeros(len(thresholds), np.int64)
    for levels, win in samples:
        if not len(levels):
            continue
        below = levels[None, :, 0] < thresholds[:, None]
        hit = below.any(axis=1)
        resigner = levels[below.argmax(axis=1), 1]
        lost = np.zeros(len(thresholds), np.bool_) if win is None else resigner != win
        would += hit
        false += hit & ~lost
    return would, false


def supported(would: np.ndarray, false: np.ndarray, target: float) -> tuple[float, int]:
    """AlphaZero's rule on THRESHOLD_GRID's counts: the highest threshold at which, and at every
    lower one, false resignations are within `target` of the games that would have resigned, and
    how many would have resigned there; (0.0, 0) when even the lowest fails."""
    ok = np.cumprod(np.asarray(false) <= target * np.asarray(would)).astype(np.bool_)
    if not ok.any():
        return 0.0, 0
    last = int(np.flatnonzero(ok)[-1])
    return float(THRESHOLD_GRID[last]), int(would[last])


def suggested_threshold(samples: list, target: float = FALSE_RESIGN_TARGET) -> Optional[float]:
    """The resignation threshold that played-out games support (`supported`); None without
    samples."""
    if not samples:
        return None
    return supported(*false_resignations(samples, THRESHOLD_GRID), target)[0]


def tally(counts: dict, checkpoint: int, levels: np.ndarray, winner: Optional[int]) -> None:
    """Adds a played-out game, finished in the phase that writes `checkpoint`, to `counts`
    (checkpoint -> [would, false], lists over THRESHOLD_GRID, as the run's counters save them)."""
    would, false = false_resignations([(levels, winner)], THRESHOLD_GRID)
    row = counts.setdefault(checkpoint, [[0] * len(THRESHOLD_GRID), [0] * len(THRESHOLD_GRID)])
    row[0] = (np.asarray(row[0]) + would).tolist()
    row[1] = (np.asarray(row[1]) + false).tolist()


def window_counts(counts: Mapping[int, list], checkpoints: int, window: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The counts (`tally`) of the last `window` checkpoints up to `checkpoints`, summed: would
    have resigned and falsely, over THRESHOLD_GRID, and how many checkpoints had any."""
    rows = [row for c, row in counts.items() if checkpoints - window < c <= checkpoints]
    if not rows:
        return np.zeros(len(THRESHOLD_GRID), np.int64), np.zeros(len(THRESHOLD_GRID), np.int64), 0
    return np.sum([row[0] for row in rows], axis=0), np.sum([row[1] for row in rows], axis=0), len(rows)


def next_threshold(current: float, counts: Mapping[int, list], checkpoints: int, window: int,
                   target: float) -> tuple[float, str]:
    """After checkpoint `checkpoints`: the automatic threshold from the last `window` checkpoints'
    counts (see the module docstring), and the words for the log ('' when it stays)."""
    would, false, checkpoints_counted = window_counts(counts, checkpoints, window)
    if not checkpoints_counted:
        return current, ""
    best, support = supported(would, false, target)
    if best == current or (best > current and support < MIN_SUPPORT):
        return current, ""
    i = int(np.searchsorted(THRESHOLD_GRID, best, side="right"))  # the first threshold above it, if any
    falsely = false[i - 1] if i else 0  # at `best` (0.0 is below the grid)
    above = f"; at {THRESHOLD_GRID[i]:.2f}, {false[i]} of {would[i]} false" if i < len(THRESHOLD_GRID) else ""
    return best, (f"resignation threshold {current:.2f} -> {best:.2f}: of the last {checkpoints_counted} "
                  f"checkpoints' played-out games, {support} would have resigned at {best:.2f}, {falsely} "
                  f"falsely{above} (selfplay.resign_target={target})")


def prune(counts: dict, checkpoints: int, window: int) -> None:
    """Drops the counts of checkpoints outside the window that ends at `checkpoints`."""
    for c in [c for c in counts if c <= checkpoints - window]:
        del counts[c]
