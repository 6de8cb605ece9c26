"""Draws runs' strength on the ladder against wall time, from their in-loop evaluations (one PNG).

    pip install -e ".[docs]"     # matplotlib
    python docs/tools/plot_ladder.py docs/strength-ladder.png logs/m1 logs/m2 --per-checkpoint 0.73
    python docs/tools/plot_ladder.py docs/strength-deeper.png --matches docs/strength-matches.json

Each run's logs/<run>/eval/ratings.json keeps every evaluation's W-L-D against each rung it
played; the rating is fitted again from them with the ladder's ratings as they are now
(play/ladder.py), so evaluations logged before the ladder's calibration land on today's scale.
Points: rating ± its margin at the run's wall time (hours, as the run recorded it: on a shared or
paused machine, longer than on a quiet one), or with `--per-checkpoint MIN` at checkpoints x MIN
minutes (the time a quiet machine takes per checkpoint; 41 checkpoints in 30 minutes: 0.73);
dashed lines: the rungs. Matches against the previous checkpoint are not used (they have no
fixed rating).

`--matches FILE` adds matches played after the runs (`azshogi-arena ... ladder`), kept in a JSON
file: {"runs": {RUN: {"minutes": "how the minutes were counted", "points": [{"checkpoint": N,
"minutes": M, "matches": {RUNG: [WINS, LOSSES, DRAWS], ...}}, ...]}}}; each point is rated from
its matches the same way, at M minutes.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("runs", nargs="*", help="runs' log folders (logs/<run>)")
    parser.add_argument("--matches", metavar="FILE", help="a JSON file of matches against rungs (the docstring)")
    parser.add_argument("--per-checkpoint", type=float, default=0.0, metavar="MIN",
                        help="x = checkpoints x MIN minutes (a quiet machine's time) instead of the wall time")
    return parser.parse_args(argv)


def fail(message: str) -> None:
    print(f"plot_ladder.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def _rated(matches: dict[str, Sequence[int]]) -> tuple[float, float]:
    """Rating and margin from {rung: (wins, losses, draws)}; a name that is no rung raises ValueError."""
    from azshogi.play.ladder import Score, rate, rung

    fit = rate([Score(rung(name).rating, *(int(n) for n in wld)) for name, wld in matches.items()])
    return fit.rating, fit.margin


def curve(log_dir: Path) -> list[tuple[float, float, float, int]]:
    """(hours, rating, margin, checkpoint) of each evaluation of a run, refitted on today's ladder."""
    from azshogi.play.ladder import RUNGS

    path = log_dir / "eval" / "ratings.json"
    try:
        history = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    names = {r.name for r in RUNGS}
    points = []
    for entry in history:
        matches = {name: (m["wins"], m["losses"], m["draws"]) for name, m in entry["matches"].items() if name in names}
        if matches:
            points.append((entry["seconds"] / 3600, *_rated(matches), entry["checkpoint"]))
    return points


def match_curves(path: Path) -> dict[str, list[tuple[float, float, float, int]]]:
    """{run: [(hours, rating, margin, checkpoint), ...]} from a file of matches (the docstring)."""
    try:
        runs = json.loads(path.read_text())["runs"]
        curves = {}
        for run, entry in runs.items():
            curves[run] = [(p["minutes"] / 60, *_rated(p["matches"]), p["checkpoint"]) for p in entry["points"]]
            if not curves[run]:
                raise ValueError(f"run {run!r} has no points")
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: {type(e).__name__}: {e}")
    return curves


def main() -> None:
    args = parse_args()
    if not args.runs and not args.matches:
        fail("nothing to draw: give runs' log folders, --matches FILE, or both")
    matched = match_curves(Path(args.matches)) if args.matches else {}
    try:
        import matplotlib
    except ModuleNotFoundError:
        fail('needs matplotlib: pip install -e ".[docs]" (or pip install matplotlib)')
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from azshogi.play.ladder import RUNGS

    fig, ax = plt.subplots(figsize=(8, 4.5))
    if len(args.runs) + len(matched) > 10:  # past the default cycle's 10 colours, a run would share one
        ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
    for run in args.runs:
        points = curve(Path(run))
        if not points:
            fail(f"{run}: no evaluation against a rung of the ladder")
        hours, ratings, margins, checkpoints = zip(*points)
        if args.per_checkpoint:
            hours = tuple(c * args.per_checkpoint / 60 for c in checkpoints)
        ax.errorbar(hours, ratings, yerr=margins, marker="o", markersize=3, capsize=2, label=Path(run).name)
    for run, points in matched.items():
        hours, ratings, margins, _ = zip(*points)
        ax.errorbar(hours, ratings, yerr=margins, marker="s", markersize=4, capsize=3, label=f"{run} (matches)")
    top = ax.get_ylim()[1]
    for r in RUNGS:
        if r.rating <= top + 200:
            ax.axhline(r.rating, color="grey", linestyle="--", linewidth=0.7)
            ax.text(ax.get_xlim()[1], r.rating, f" {r.name}", va="center", fontsize=8, color="grey")
    if not args.runs:
        ax.set_xlabel("hours on a quiet machine (the minutes in the matches file)")
    elif args.per_checkpoint:
        ax.set_xlabel(f"hours on a quiet machine (checkpoints x {args.per_checkpoint:g} min)")
    else:
        ax.set_xlabel("wall time of the run (hours, as recorded)")
    ax.set_ylabel("rating (Elo above uniform random)")
    many = len(args.runs) + len(matched) > 8  # in two small columns, so that the legend leaves the curves visible
    ax.legend(loc="lower right", ncol=2 if many else 1, fontsize=8 if many else None)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    drawn = [Path(r).name for r in args.runs] + ([args.matches] if args.matches else [])
    print(f"wrote {args.out}: " + ", ".join(drawn))


if __name__ == "__main__":
    main()
