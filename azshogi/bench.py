"""`azshogi-bench`: is self-play as fast as the network allows?

In one run, with the trainer's overrides (model, search, actors, device), it alternates windows
of (a) forward passes alone at the self-play batch size and dtype and (b) self-play with the
configured search, after a common warm-up, and reports medians. The last line printed is one
JSON object; efficiency = selfplay_nn_evals_per_s / nn_positions_per_s.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from .app import hydra_command
from .config import Config


def forward_window(evaluator, features1, features2, seconds: float) -> float:
    """Positions per second of back-to-back evaluate() calls on a fixed batch."""
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        evaluator.evaluate(features1, features2)
        count += len(features1)
    return count / (time.perf_counter() - start)


def selfplay_window(selfplay, seconds: float) -> dict:
    """Self-play for `seconds`; positions and network evaluations per second, time split."""
    ev, sim = selfplay.search.simulator.evaluator.stats, selfplay.search.simulator
    ev0, sim0, leaf0 = (ev.positions, ev.seconds), sim.seconds, sim.leaf_seconds
    positions, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        selfplay.step()
        positions += len(selfplay.actors)
    wall = time.perf_counter() - start
    inference = ev.seconds - ev0[1]
    leaves = sim.leaf_seconds - leaf0
    in_search = sim.seconds - sim0
    return {
        "positions_per_s": positions / wall,
        "nn_evals_per_s": (ev.positions - ev0[0]) / wall,
        "wall": wall,
        "inference": inference,
        "features": leaves,
        "search": in_search - inference - leaves,
        "other": wall - in_search,
    }


def run(cfg: Config, out=sys.stdout) -> dict:
    from .loop import build_components, selfplay_batch

    parts = build_components(cfg)
    selfplay, evaluator = parts.selfplay, parts.evaluator
    batch = selfplay_batch(cfg)  # the forward passes alone run at self-play's batch size
    features1, features2 = evaluator.allocate(batch)
    from . import features as feats
    import cshogi

    board = cshogi.Board()
    for i in range(batch):
        feats.write(board, features1, features2, i)
    b = cfg.bench
    print(f"warm-up {b.warmup_seconds:.0f} s ...", file=sys.stderr)
    selfplay_window(selfplay, b.warmup_seconds)
    forward_window(evaluator, features1, features2, min(2.0, b.warmup_seconds))
    nn_rates, sp_runs = [], []
    for r in range(b.repeats):
        nn_rates.append(forward_window(evaluator, features1, features2, b.seconds))
        sp_runs.append(selfplay_window(selfplay, b.seconds))
        print(f"round {r + 1}/{b.repeats}: network {nn_rates[-1]:,.0f} pos/s, self-play "
              f"{sp_runs[-1]['positions_per_s']:,.1f} pos/s ({sp_runs[-1]['nn_evals_per_s']:,.0f} evals/s)",
              file=sys.stderr)
    median = statistics.median
    nn = median(nn_rates)
    sp = {k: median(r[k] for r in sp_runs) for k in sp_runs[0]}
    # With several search threads their times overlap and a split of the wall time is meaningless.
    shares = {k: median(r[k] / r["wall"] for r in sp_runs) for k in ("search", "features", "inference", "other")} \
        if cfg.selfplay.search_threads == 1 else {}
    result = {
        "model": f"{cfg.model.blocks}x{cfg.model.channels}",
        "device": str(parts.device),
        "dtype": str(evaluator.dtype).replace("torch.", ""),
        "batch": batch,
        "actors": cfg.selfplay.num_actors,
        "search": cfg.search.kind.value,
        "simulations": cfg.search.num_simulations,
        "threads": torch.get_num_threads(),
        "nn_positions_per_s": round(nn, 1),
        "selfplay_positions_per_s": round(sp["positions_per_s"], 2),
        "selfplay_nn_evals_per_s": round(sp["nn_evals_per_s"], 1),
        "efficiency": round(sp["nn_evals_per_s"] / nn, 3),
        "time_share": {k: round(v, 3) for k, v in shares.items()},
        "repeats": b.repeats,
        "seconds": b.seconds,
    }
    print(f"\n{'model':<26}{result['model']} on {result['device']} ({result['dtype']}, "
          f"{result['threads']} threads)", file=out)
    print(f"{'batch, actors':<26}{batch}, {cfg.selfplay.num_actors}", file=out)
    print(f"{'search':<26}{result['search']}, {result['simulations']} simulations", file=out)
    print(f"{'network alone':<26}{nn:,.0f} positions/s (median of {b.repeats})", file=out)
    print(f"{'self-play':<26}{sp['positions_per_s']:,.1f} positions/s, {sp['nn_evals_per_s']:,.0f} "
          f"network evaluations/s", file=out)
    print(f"{'efficiency':<26}{result['efficiency']:.3f}", file=out)
    if shares:
        print("self-play time: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()), file=out)
    print(json.dumps(result), file=out)
    return result


main = hydra_command("azshogi-bench", run)

if __name__ == "__main__":
    main()
