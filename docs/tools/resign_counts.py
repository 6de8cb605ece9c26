"""How far a run is from resigning: at each checkpoint of a run with selfplay.resign_target, the
played-out games of its window (the last selfplay.resign_window checkpoints') that would have
resigned at a few thresholds and how many of those falsely, the threshold AlphaZero's rule gives
on them, and the threshold in force (a stopped phase's -partial file is left out).

    python docs/tools/resign_counts.py checkpoints/r61

prints a line a checkpoint, e.g.

    checkpoint  36: 1,925 games, threshold 0.00 | false/would at 0.05 2/4, 0.10 3/9, 0.15 6/21,
    0.20 14/31 | the rule (5% false): 0.01 on 0 games

(the counts the run keeps in its checkpoints: azshogi/selfplay/resignation.py). The run raises its
threshold only where at least MIN_SUPPORT (20) played-out games would have resigned. --target reads
the counts with another share of false resignations than the run's selfplay.resign_target.
docs/experiments/2026-11-28-automatic-resignation.md reads a 30-minute run this way.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from azshogi.commands.cli import run_tool
from azshogi.config import from_plain
from azshogi.formats import checkpoint as ckpt
from azshogi.selfplay.resignation import THRESHOLD_GRID, supported, window_counts

SHOWN = (0.05, 0.10, 0.15, 0.20)  # the thresholds a line shows


def line(counters: dict, target: float, window: int) -> str:
    """One checkpoint's line from its counters (RunCounters, as saved) and the run's window."""
    would, false, _ = window_counts(counters.get("resign_counts") or {}, counters["checkpoints"], window)
    cells = ", ".join(f"{t:.2f} {false[i]}/{would[i]}" for t in SHOWN
                      for i in [int(np.flatnonzero(np.isclose(THRESHOLD_GRID, t))[0])])
    best, support = supported(would, false, target)
    threshold = counters.get("resign_threshold")
    return (f"checkpoint {counters['checkpoints']:3d}: {counters['games']:,} games, threshold "
            + ("(the setting's)" if threshold is None else f"{threshold:.2f}")
            + f" | false/would at {cells} | the rule ({target:.0%} false): {best:.2f} on {support} games")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run's checkpoint folder (checkpoints/<run>)")
    parser.add_argument("--target", type=float, default=None,
                        help="the rule's share of false resignations (default: the run's selfplay.resign_target)")
    args = parser.parse_args(argv)
    if args.target is not None and not 0 < args.target < 1:
        parser.error(f"--target {args.target}: a share of false resignations, in (0, 1)")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    files = ckpt.whole_phases(args.run)
    if not files:
        raise SystemExit(f"{args.run}: no checkpoints")
    for path in files:
        state = ckpt.load(path)
        parts = ckpt.split(state, path)
        selfplay = from_plain(parts.run["config"]).selfplay
        target = selfplay.resign_target
        if target <= 0:
            raise SystemExit(f"{path}: trained without selfplay.resign_target, so it keeps no counts of "
                             f"played-out games")
        print(line(parts.run["counters"], target if args.target is None else args.target, selfplay.resign_window))


if __name__ == "__main__":
    run_tool(main, "resign_counts.py")
