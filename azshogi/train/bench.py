"""`azshogi-bench`: is self-play as fast as the network allows?

In one run, with the trainer's overrides (model, search, actors, workers, device), it alternates
windows of (a) forward passes alone at the self-play batch size and dtype and (b) self-play with
the configured search, after a common warm-up, and reports medians. The last line printed is one
JSON object; efficiency = selfplay_nn_evals_per_s / nn_positions_per_s.

With selfplay.num_workers = W >= 1 the self-play window runs the workers and the inference
server (the workers are paused during the forward-only windows); `mean_batch` is then the
server's mean forward-pass size, and the self-play time shares are those of an average worker
(`inference` = waiting for the server's answers).
"""
from __future__ import annotations

import json
import signal
import statistics
import sys
import threading
import time

import torch

from azshogi.config import Config


def forward_window(evaluator, features1, features2, seconds: float) -> float:
    """Positions per second of back-to-back evaluate() calls on a fixed batch."""
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        evaluator.evaluate(features1, features2)
        count += len(features1)
    return count / (time.perf_counter() - start)


def selfplay_window(driver, seconds: float) -> dict:
    """Self-play for `seconds` (then pauses); positions and network evaluations per second,
    the time split of a searching process, forward passes and positions evaluated."""
    before, start = driver.counters(), time.perf_counter()
    for _ in driver.play(until=lambda: time.perf_counter() - start >= seconds):
        pass
    wall = time.perf_counter() - start
    done = driver.counters() - before
    n = driver.processes  # simulator times are summed over the searching processes
    inference, leaves, in_search = done.wait_seconds / n, done.leaf_seconds / n, done.simulator_seconds / n
    return {
        "positions_per_s": done.moves / wall,
        "nn_evals_per_s": done.nn_positions / wall,
        "wall": wall,
        "inference": inference,
        "features": leaves,
        "search": in_search - inference - leaves,
        "other": wall - in_search,
        "nn_calls": done.nn_calls,
        "nn_positions": done.nn_positions,
    }


def run(cfg: Config, out=sys.stdout) -> dict:
    from azshogi.train.loop import build_components

    if threading.current_thread() is threading.main_thread():
        # SIGTERM unwinds like Ctrl-C, so that any self-play workers are stopped and joined.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parts = build_components(cfg)
    try:
        return _measure(cfg, parts, out)
    finally:
        parts.selfplay.close()


def _measure(cfg: Config, parts, out) -> dict:
    from azshogi.train.loop import selfplay_batch

    selfplay, evaluator = parts.selfplay, parts.evaluator
    batch = selfplay_batch(cfg)  # the forward passes alone run at self-play's batch size
    features1, features2 = evaluator.allocate(batch)
    import cshogi

    from azshogi.shogi import features as feats

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
    mean_batch = sum(r["nn_positions"] for r in sp_runs) / max(1, sum(r["nn_calls"] for r in sp_runs))
    result = {
        "model": f"{cfg.model.blocks}x{cfg.model.channels}",
        "device": str(parts.device),
        "dtype": str(evaluator.dtype).replace("torch.", ""),
        "batch": batch,
        "actors": cfg.selfplay.num_actors,
        "workers": cfg.selfplay.num_workers,
        "search": cfg.search.kind.value,
        "simulations": cfg.search.num_simulations,
        "threads": torch.get_num_threads(),
        "nn_positions_per_s": round(nn, 1),
        "selfplay_positions_per_s": round(sp["positions_per_s"], 2),
        "selfplay_nn_evals_per_s": round(sp["nn_evals_per_s"], 1),
        "efficiency": round(sp["nn_evals_per_s"] / nn, 3),
        "mean_batch": round(mean_batch, 1),
        "time_share": {k: round(v, 3) for k, v in shares.items()},
        "repeats": b.repeats,
        "seconds": b.seconds,
    }
    print(f"\n{'model':<26}{result['model']} on {result['device']} ({result['dtype']}, "
          f"{result['threads']} threads)", file=out)
    print(f"{'batch, actors':<26}{batch}, {cfg.selfplay.num_actors}", file=out)
    print(f"{'self-play processes':<26}" + (f"{cfg.selfplay.num_workers} workers + inference server"
                                              if cfg.selfplay.num_workers else "1 (in process)"), file=out)
    print(f"{'search':<26}{result['search']}, {result['simulations']} simulations", file=out)
    print(f"{'network alone':<26}{nn:,.0f} positions/s (median of {b.repeats})", file=out)
    print(f"{'self-play':<26}{sp['positions_per_s']:,.1f} positions/s, {sp['nn_evals_per_s']:,.0f} "
          f"network evaluations/s", file=out)
    print(f"{'efficiency':<26}{result['efficiency']:.3f}", file=out)
    print(f"{'mean forward batch':<26}{mean_batch:.1f}", file=out)
    if shares:
        print("self-play time: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()), file=out)
    print(json.dumps(result), file=out)
    return result

