"""How sharp a run's search targets are: the mean entropy (nats) of the policy targets in its
self-play records (logs/<run>/hcpe3, one file a checkpoint), over a range of checkpoints.

    python docs/tools/target_entropy.py logs/q72/hcpe3 --from 36 --to 41

prints one line, e.g.

    logs/q72/hcpe3 checkpoints 36-41: 36,697 positions in 292 games, target entropy 2.307 nats, 52.1 candidates

Each position's target is what training reads from the file (formats/dlshogi.load_positions: its
candidates' visits as written, for Gumbel's search the improved policy in whole counts,
normalised). The run's logged policy loss is this entropy plus how far the network is from the
targets, so two runs' losses differ by their targets' entropy where the networks fit alike
(docs/experiments/2026-11-28-sharper-targets.md).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from azshogi.commands.cli import run_tool
from azshogi.formats.dlshogi import load_positions

_CHECKPOINT = re.compile(r"ckpt-(\d+)\.hcpe3$")


def entropies(visits: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The entropy (nats) of each position's normalised visits: position i's candidates are
    visits[offsets[i]:offsets[i + 1]]; a position with no visits is left out."""
    out = []
    for start, end in zip(offsets[:-1], offsets[1:]):
        counts = visits[start:end].astype(np.float64)
        total = counts.sum()
        if total > 0:
            p = counts[counts > 0] / total
            out.append(float(-(p * np.log(p)).sum()))
    return np.asarray(out)


def summary(folder: Path, first: int, last: int) -> str:
    files = sorted(p for p in folder.glob("ckpt-*.hcpe3")
                   if (m := _CHECKPOINT.search(p.name)) and first <= int(m.group(1)) <= last)
    if not files:
        raise SystemExit(f"{folder}: no ckpt-NNNNN.hcpe3 files for checkpoints {first}-{last}")
    games = load_positions(files)  # one TrainingPositions a game
    h = np.concatenate([entropies(g.probs, np.cumsum([0, *g.entry_counts])) for g in games])
    candidates = np.concatenate([g.entry_counts for g in games])
    return (f"{folder} checkpoints {first}-{last}: {len(h):,} positions in {len(games):,} games, "
            f"target entropy {h.mean():.3f} nats, {candidates.mean():.1f} candidates")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hcpe3", type=Path, help="a run's records folder (logs/<run>/hcpe3)")
    parser.add_argument("--from", dest="first", type=int, default=1, help="first checkpoint (default 1)")
    parser.add_argument("--to", dest="last", type=int, default=10**9, help="last checkpoint (default: the last)")
    args = parser.parse_args(argv)
    print(summary(args.hcpe3, args.first, args.last))


if __name__ == "__main__":
    run_tool(main, "target_entropy.py")
