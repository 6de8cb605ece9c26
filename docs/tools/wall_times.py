"""Runs compared at the same wall time: each checkpoint's minutes into its run (the run's wall
time up to that checkpoint line, over all its sessions: RunCounters.wall_seconds), its network's
shape and its games, and with --at the last checkpoint each run had written by then.

    python docs/tools/wall_times.py checkpoints/p61 checkpoints/p61g --at 150

prints a line a checkpoint of each run, e.g.

    p61g  checkpoint  81:  66.2 min, 4x48, 4,120 games

and with --at, one line a run naming its checkpoint file at that many minutes:

    at 150 minutes: p61 checkpoint 175 (149.6 min, 3x32) checkpoints/p61/ckpt-00175.pt

Twin runs forked from one checkpoint (docs/experiments/2026-11-28-growing-at-81.md: a run and its
twin whose network grows) share their minutes up to it. The minutes are the machine's as the runs
found it: compare runs that ran side by side, or each alone on a quiet machine. Checkpoints
written before 2026-11-28 keep the time up to the checkpoint before theirs: one phase early.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from azshogi.commands.cli import run_tool
from azshogi.formats import checkpoint as ckpt


def read(run: Path) -> list[tuple[int, float, str, int, Path]]:
    """(checkpoint, minutes, shape, games, file) for each whole phase's checkpoint of `run`."""
    rows = []
    for path in ckpt.whole_phases(run):
        run_part = ckpt.split(ckpt.load(path, mmap=True), path).run
        counters, model = run_part["counters"], run_part["config"]["model"]
        if "wall_seconds" not in counters:  # written before runs kept their wall time
            raise SystemExit(f"{path}: keeps no wall time (written before counters.wall_seconds)")
        rows.append((int(counters["checkpoints"]), float(counters["wall_seconds"]) / 60,
                     f"{model['blocks']}x{model['channels']}", int(counters["games"]), path))
    return rows


def at(rows: list[tuple[int, float, str, int, Path]], minutes: float):
    """The last row written by `minutes`, or None."""
    within = [r for r in rows if r[1] <= minutes]
    return within[-1] if within else None


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="runs' checkpoint folders (checkpoints/<run>)")
    parser.add_argument("--at", type=float, default=None, help="minutes: each run's last checkpoint by then")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    table = {}
    for run in args.runs:
        rows = read(run)
        if not rows:
            raise SystemExit(f"{run}: no checkpoints")
        table[run] = rows
        if args.at is None:
            for n, minutes, shape, games, _ in rows:
                print(f"{run.name}  checkpoint {n:3d}: {minutes:6.1f} min, {shape}, {games:,} games")
    if args.at is not None:
        for run, rows in table.items():
            row = at(rows, args.at)
            print(f"at {args.at:g} minutes: {run.name} " + ("none yet" if row is None else
                  f"checkpoint {row[0]} ({row[1]:.1f} min, {row[2]}) {row[4]}"))


if __name__ == "__main__":
    run_tool(main, "wall_times.py")
