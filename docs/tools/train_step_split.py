"""How a training step's time divides between the batch's assembly and the step itself.

    python docs/tools/train_step_split.py CHECKPOINT [--device cuda] [--steps 100] [--rounds 3]

Reads the checkpoint's network, its run's settings and its replay window (from the store beside
it), then times, in alternating rounds of --steps each, what the loop's training phase does per
step (train/loop.py `train_phase`):

    assemble   the batch drawn from the replay window: on the host (ReplayBuffer.sample: decoded
               on the CPU, the mirror images when train.mirror is on, dense policy targets) or,
               where train.replay_window puts the window on the device, there (DeviceReplay.sample)
    step       Trainer.step on a batch already assembled: the copies to the device, the forward
               and backward passes, the optimizer; the losses read back every train.log_every steps
    both       the two one after the other, as the loop runs them

(train/train_bench.training_parts, which `azshogi-bench bench.train=true` times too, on random
positions and a new network).

and prints each part's median in ms a step over the rounds, and the share of `both` that the
assembly is. On a GPU, a large share says the GPU waits for the CPU between steps. The network
trains from the checkpoint's weights with a fresh optimizer (and, on CUDA, a fresh loss scaler,
whose first steps may be skipped: it says how many); nothing is written.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from azshogi.commands.cli import run_tool
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import replay_store_of
from azshogi.formats.replay_store import ReplayStore
from azshogi.play.models import model_of
from azshogi.train.device_replay import DeviceReplay, on_device
from azshogi.train.replay import ReplayBuffer, StoredReplay
from azshogi.train.train_bench import training_parts
from azshogi.train.trainer import Trainer


def _ms_per_step(run, steps: int, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1000 / steps


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--steps", type=int, default=100, help="steps a round (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each part (default 3)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds must be at least 1")
    device = torch.device(args.device)

    state = ckpt.load(args.checkpoint)
    if "format" not in state:
        raise SystemExit(f"{args.checkpoint}: a network alone (azshogi-export network), with no replay window: "
                         "give a checkpoint of the run")
    model, cfg = model_of(state, args.checkpoint, device)
    window = ckpt.split(state, args.checkpoint).replay
    if int(window["end"]) <= int(window["begin"]):
        raise SystemExit(f"{args.checkpoint}: its replay window is empty")
    buffer = ReplayBuffer(cfg.replay.capacity)
    StoredReplay(buffer, ReplayStore(replay_store_of(args.checkpoint))).restore(window, args.checkpoint)
    trainer = Trainer(model, cfg.train, device)
    source: ReplayBuffer | DeviceReplay = buffer
    if on_device(cfg.train, buffer, device):
        source = DeviceReplay(buffer, device)
        source.refresh()
    batch_size, mirror = cfg.train.batch_size, cfg.train.mirror
    parts = training_parts(trainer, source, np.random.default_rng(0), cfg.train)
    for run in parts.values():  # warm-up: the optimizer's creation, the first kernels
        for _ in range(3):
            run()
    times: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(args.rounds):
        for name, run in parts.items():
            times[name].append(_ms_per_step(run, args.steps, device))

    median = {name: statistics.median(values) for name, values in times.items()}
    trainer.read_back()
    where = "device" if isinstance(source, DeviceReplay) else "host"
    print(f"{args.checkpoint}: {cfg.model.blocks}x{cfg.model.channels}, batch {batch_size}, mirror {mirror}, "
          f"{len(buffer):,} positions in the window (batches assembled on the {where}), device {device}, "
          f"{args.rounds} rounds of {args.steps} steps")
    for name, value in median.items():
        print(f"{name:>9} {value:8.2f} ms a step   (rounds: {', '.join(f'{v:.2f}' for v in times[name])})")
    print(f"the assembly is {median['assemble'] / median['both']:.0%} of a step as the loop takes it")
    if trainer.skipped:  # a fresh fp16 scaler skips its first steps on CUDA (cheaper ones)
        print(f"{trainer.skipped} of {trainer.step_count} steps were skipped (the loss scaler settling)")


if __name__ == "__main__":
    run_tool(main, "train_step_split.py")
