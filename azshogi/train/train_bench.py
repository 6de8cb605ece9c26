"""`azshogi-bench bench.train=true`: the training step, timed in its parts, and its host syncs.

With the trainer's overrides (model, train.*, replay.capacity, device) it builds the run's
network and trainer as a new run would (train/run_state.py) and a replay window holding
`bench.train_positions` positions of random games (capture-biased random play from the start
position; each position with a policy target over up to 32 of its legal moves, a result and a
root value drawn at random: what a batch costs does not depend on what it teaches). Where
train.replay_window puts the window on the device, the positions are copied there first
(`upload_us_per_position`: decoding and copying, once per position in a run, with the window's
allocation on the device spread over them). With train.surprise_weight > 0 the window's positions
are scored first (`score_us_per_position`, also once per position in a run; train/surprise.py)
and batches are drawn by it. Then it
alternates windows of `bench.seconds` (medians over `bench.repeats`, after `bench.warmup_seconds`
of the loop's steps) of:

    assemble   a batch drawn from the window: ReplayBuffer.sample, decoded on the CPU (host), or
               DeviceReplay.sample, expanded and mirrored on the device (device)
    step       Trainer.step on a batch already assembled
    both       the two, as the loop's training phase runs them: ms_per_step (and cpu_ms_per_step,
               this process's CPU time, steadier than the wall time on a busy machine)

with the losses read back every train.log_every steps, as the loop does (on CUDA a window also
ends with one synchronisation). Last, `2 x train.log_every` steps as the loop takes them run
under nn/host_sync.HostSyncCounter: `host_syncs_per_step` is their mean, `host_syncs_max_step`
the most any one step made (the read-back's). The last line printed is one JSON object.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Callable

import cshogi
import numpy as np
import torch

from azshogi.config import Config, TrainConfig
from azshogi.nn.evaluator import resolve_device
from azshogi.nn.host_sync import HostSyncCounter
from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions
from azshogi.shogi.rules import random_move
from azshogi.train import surprise
from azshogi.train.device_replay import DeviceReplay, on_device
from azshogi.train.replay import Batch, ReplayBuffer
from azshogi.train.run_state import RunState
from azshogi.train.trainer import Trainer

MAX_PLIES = 256  # a random game's length at most
POLICY_MOVES = 32  # legal moves in a position's policy target at most


def random_game_positions(count: int, seed: int) -> list[TrainingPositions]:
    """`count` positions of random games (a capture when there is one, half the time), as
    self-play would add them to the replay buffer, one block per game."""
    rng = np.random.default_rng(seed)
    games: list[TrainingPositions] = []
    total = 0
    while total < count:
        board = cshogi.Board()
        hcps, counts, labels, probs = [], [], [], []
        for _ in range(min(MAX_PLIES, count - total)):
            moves = np.fromiter(board.legal_moves, np.int64)
            if len(moves) == 0:
                break
            hcps.append(features.hcp_of(board))
            k = min(len(moves), POLICY_MOVES)
            labels.append(features.labels_of(moves[rng.choice(len(moves), k, replace=False)], board.turn))
            probs.append(rng.dirichlet(np.ones(k)).astype(np.float32))
            counts.append(k)
            board.push(random_move(board, moves, rng))
        n = len(hcps)
        if n:
            games.append(TrainingPositions.of_game(
                len(games), np.stack(hcps), rng.integers(-1, 2, n), rng.uniform(-1, 1, n).astype(np.float32),
                np.arange(n), np.array(counts), np.concatenate(labels), np.concatenate(probs)))
            total += n
    return games


def training_parts(trainer: Trainer, source: ReplayBuffer | DeviceReplay, rng: np.random.Generator,
                   cfg: TrainConfig) -> dict[str, Callable[[], object]]:
    """What the loop's training phase does per step, and its two parts, as calls: `assemble` (a
    batch drawn from `source`), `step` (Trainer.step on one batch assembled beforehand) and
    `both`; the steps read their losses back every cfg.log_every steps, as the loop does."""

    def sample() -> Batch:
        return source.sample(cfg.batch_size, rng, cfg.mirror, trainer.opponent, cfg.surprise_weight)

    def step(batch: Batch) -> None:
        trainer.step(batch)
        if trainer.step_count % cfg.log_every == 0:
            trainer.read_back()

    ready = sample()
    return {"assemble": sample, "step": lambda: step(ready), "both": lambda: step(sample())}


def _ms_per_call(run: Callable[[], object], seconds: float, device: torch.device) -> tuple[float, float]:
    """Wall and this process's CPU milliseconds per call of `run`, over `seconds`."""
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    while not calls or time.perf_counter() - start < seconds:  # once at least (a warm-up of 0 s)
        run()
        calls += 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1000 / calls, (time.process_time() - cpu) * 1000 / calls


def run(cfg: Config, out=sys.stdout) -> dict:
    b, t = cfg.bench, cfg.train
    device = resolve_device(cfg.device)
    state = RunState(cfg, device)
    trainer, rng = state.trainer, state.train_rng
    buffer = ReplayBuffer(cfg.replay.capacity)
    for game in random_game_positions(min(b.train_positions, cfg.replay.capacity), cfg.seed):
        buffer.extend(game)
    source: ReplayBuffer | DeviceReplay = buffer
    upload_us = 0.0
    if on_device(t, buffer, device):
        source = DeviceReplay(buffer, device)
        start = time.perf_counter()
        source.refresh()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        upload_us = (time.perf_counter() - start) * 1e6 / len(buffer)

    score_us = 0.0
    if t.surprise_weight > 0:  # the window scored as a run scores its new positions (train/surprise.py)
        start = time.perf_counter()
        surprise.score(trainer.model, buffer, device)
        score_us = (time.perf_counter() - start) * 1e6 / len(buffer)
    parts = training_parts(trainer, source, rng, t)
    print(f"warm-up {b.warmup_seconds:.0f} s ...", file=sys.stderr)
    _ms_per_call(parts["both"], b.warmup_seconds, device)
    times: dict[str, list[float]] = {name: [] for name in parts}
    cpu_times: dict[str, list[float]] = {name: [] for name in parts}
    for r in range(b.repeats):
        for name, part in parts.items():
            wall, cpu = _ms_per_call(part, b.seconds, device)
            times[name].append(wall)
            cpu_times[name].append(cpu)
        print(f"round {r + 1}/{b.repeats}: " + ", ".join(f"{k} {v[-1]:.2f} ms" for k, v in times.items()),
              file=sys.stderr)
    trainer.read_back()

    steps, per_step = 2 * t.log_every, []
    with HostSyncCounter() as syncs:
        for _ in range(steps):
            before = syncs.count
            parts["both"]()
            per_step.append(syncs.count - before)
    trainer.read_back()
    median = {name: statistics.median(v) for name, v in times.items()}
    cpu_median = {name: statistics.median(v) for name, v in cpu_times.items()}
    window = "device" if isinstance(source, DeviceReplay) else "host"
    result = {
        "mode": "train",
        "model": f"{cfg.model.blocks}x{cfg.model.channels}",
        "device": str(device),
        "threads": torch.get_num_threads(),
        "batch": t.batch_size,
        "optimizer": t.optimizer.value,
        "mirror": t.mirror,
        "replay_window": window,
        "positions": len(buffer),
        "repeats": b.repeats,
        "seconds": b.seconds,
        "ms_per_step": round(median["both"], 3),
        "assemble_ms": round(median["assemble"], 3),
        "step_ms": round(median["step"], 3),
        # this process's CPU time: on a busy machine a steadier measure than the wall time
        "cpu_ms_per_step": round(cpu_median["both"], 3),
        "assemble_cpu_ms": round(cpu_median["assemble"], 3),
        "host_syncs_per_step": round(sum(per_step) / steps, 3),
        "host_syncs_max_step": max(per_step),
        "host_sync_ops": dict(syncs.by_op),
        "upload_us_per_position": round(upload_us, 2),
        "surprise_weight": t.surprise_weight,
        "score_us_per_position": round(score_us, 2),  # train.surprise_weight > 0: once per position in a run
        "skipped_steps": trainer.skipped,
    }
    print(f"\n{'model':<26}{result['model']} on {device} ({result['threads']} threads), {t.optimizer.value}, "
          f"batch {t.batch_size}" + (", mirrored" if t.mirror else ""), file=out)
    print(f"{'replay window':<26}{len(buffer):,} positions of random games, batches assembled on the {window}"
          + (f" ({upload_us:.1f} us a position to upload)" if upload_us else ""), file=out)
    if score_us:
        print(f"{'surprise':<26}{score_us:.1f} us a position to score (once in a run), a share of "
              f"{t.surprise_weight} of each batch drawn by it", file=out)
    for name, label in (("both", "training step"), ("assemble", "  batch assembly"), ("step", "  step alone")):
        print(f"{label:<26}{median[name]:8.2f} ms (rounds: {', '.join(f'{v:.2f}' for v in times[name])}; "
              f"CPU {cpu_median[name]:.2f} ms)", file=out)
    print(f"{'host syncs':<26}{result['host_syncs_per_step']} a step ({sum(per_step)} in {steps} steps, at most "
          f"{max(per_step)} in one: " + (", ".join(f"{k} {v}" for k, v in syncs.by_op.items()) or "none") + ")",
          file=out)
    if trainer.skipped:
        print(f"{trainer.skipped} of {trainer.step_count} steps were skipped (the loss scaler settling)", file=out)
    print(json.dumps(result), file=out)
    return result
