"""How spread out a checkpoint's policy is at several policy temperatures (the engine's
PolicyTemperature, the arena's `softmax`), over positions of games the checkpoint plays against
itself by sampling its own policy (from the start position; positions from ply 10 on).

    python docs/tools/policy_spread.py checkpoints/l1/ckpt-00141.pt --temperatures 1 1.5 2 3 4

Per temperature: the mean prior of the policy's first move, the mean entropy over the legal
moves, and the median number of moves that hold 90% of the prior mass; then the temperature the
engine's PolicyTemperature auto picks (play/temperature.py: from its own 16 games of 80 plies,
whatever --games and --plies say, in fp32).
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from azshogi.commands.cli import run_tool
from azshogi.play.models import model_evaluator
from azshogi.play.temperature import auto_temperature, entropies, sample_logits
from azshogi.search.tree import masked_softmax


def spread(path: str, temperatures: list[float], games: int, plies: int, seed: int = 0) -> dict:
    """{temperature: (top-1 prior, entropy in nats, moves holding 90%) per position}, the legal
    moves' counts under the key "legal", and PolicyTemperature auto's choice (fp32) under "auto"."""
    evaluator, _ = model_evaluator(path, "cpu", "fp32", max_batch=games)
    rows = sample_logits(evaluator, games, plies, seed=seed, max_batch=games)
    out: dict = {"legal": [len(row) for row in rows], "auto": auto_temperature(evaluator, max_batch=games)}
    for t in temperatures:
        priors = [masked_softmax(row / t) for row in rows]  # the engine's priors at PolicyTemperature t
        held = [int(np.searchsorted(np.cumsum(np.sort(p)[::-1]), 0.9)) + 1 for p in priors]
        out[t] = list(zip([p.max() for p in priors], entropies(rows, t), held)) if rows else []
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 1.5, 2.0, 3.0, 4.0])
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--plies", type=int, default=80)
    args = parser.parse_args(argv)
    if args.games < 1 or args.plies < 1 or min(args.temperatures) <= 0:
        parser.error("--games and --plies must be >= 1, --temperatures > 0")
    torch.set_num_threads(1)
    for path in args.checkpoints:
        result = spread(path, args.temperatures, args.games, args.plies)
        legal = result["legal"]
        if not legal:
            print(f"{path}: no position past ply 10 (raise --plies)")
            continue
        print(f"{path}: {len(legal)} positions, {np.mean(legal):.0f} legal moves on average")
        for t in args.temperatures:
            a = np.array(result[t])
            print(f"  PolicyTemperature {t:g}: top-1 prior {a[:, 0].mean():.3f}, entropy {a[:, 1].mean():.2f} nats, "
                  f"{np.median(a[:, 2]):.0f} moves hold 90% (median)")
        print(f"  PolicyTemperature auto (its own 16 games, in fp32): {result['auto']:g}")


if __name__ == "__main__":
    run_tool(main, "policy_spread.py")
