"""`azshogi-pretrain`: supervised training from dlshogi's .hcpe / .hcpe3 files.

    azshogi-pretrain run=pre model=small pretrain.train_files=[a.hcpe3,b.hcpe] \
        pretrain.test_files=[test.hcpe] pretrain.steps=20000

The same Hydra config as `azshogi` (model, train, ...) plus `pretrain.*`. The network, optimizer,
counters and random streams are the loop's own run state (run_state.py, `Trainer`, `losses`),
without any self-play (no search, no evaluator, no workers): batches are drawn uniformly from
the files' positions (targets: hcpe one-hot best moves, hcpe3 visit distributions; values: the
game results, mixed with the recorded evals by train.value_target_root_weight). Every
`eval_every` steps the held-out positions give test/ figures in TensorBoard (logs/<run>/).

The result is `checkpoints/<run>/ckpt-00000.pt`, a loop checkpoint with an empty replay window
and no games in progress: `azshogi run=<run>` continues from it with self-play (the learning
rate schedule continues at the pretraining step), as does `resume=PATH` in another run.
"""
from __future__ import annotations

import math
import re
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from azshogi.config import Config, ConfigError
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import RunPaths
from azshogi.nn.evaluator import resolve_device
from azshogi.selfplay import in_progress
from azshogi.train import stopping
from azshogi.train.replay import ReplayBuffer, load_buffer
from azshogi.train.run_state import RunState
from azshogi.train.trainer import losses, value_target


@dataclass
class TestMetrics:
    """Means over the held-out positions; value accuracy counts decisive games only (NaN when
    there are none)."""

    policy_loss: float
    value_loss: float
    policy_accuracy: float
    value_accuracy: float
    positions: int


@torch.no_grad()
def evaluate(model: torch.nn.Module, buffer: ReplayBuffer, slots: np.ndarray, cfg: Config,
             device: torch.device, batch_size: int = 256) -> TestMetrics:
    """Losses and accuracies of `model` on the buffer's `slots` (eval mode, no grad). Policy
    accuracy: the network's top label is the target's top label; value accuracy: the sign of
    the value logit matches the game's winner."""
    was_training = model.training
    model.eval()
    sums = np.zeros(4)
    decisive = 0
    for start in range(0, len(slots), batch_size):
        batch = buffer.gather(slots[start:start + batch_size])
        n = len(batch.result)
        logits, value = model(torch.from_numpy(batch.features1).to(device),
                              torch.from_numpy(batch.features2).to(device))
        target = torch.from_numpy(batch.policy).to(device)
        v_target = torch.from_numpy(value_target(batch, cfg.train.value_target_root_weight)).to(device)
        p_loss, v_loss, _ = losses(logits, value, target, v_target, cfg.train.value_loss)
        hits = (logits.argmax(1) == target.argmax(1)).sum().item()
        result = torch.from_numpy(batch.result).to(device)
        won = result != 0
        value_hits = ((value.squeeze(1)[won] > 0) == (result[won] > 0)).sum().item()
        sums += (p_loss.item() * n, v_loss.item() * n, hits, value_hits)
        decisive += int(won.sum())
    model.train(was_training)
    n = max(1, len(slots))
    return TestMetrics(sums[0] / n, sums[1] / n, sums[2] / n, sums[3] / decisive if decisive else math.nan,
                       len(slots))


def continue_command(cfg: Config) -> str:
    """The `azshogi` command that continues a pretraining run with self-play: the run name and
    what a resume must share with the checkpoint (the network's shape, the optimizer, where runs
    are written), each given only where it differs from azshogi's defaults."""
    from importlib.resources import files

    from omegaconf import OmegaConf

    args = [f"run={cfg.run}"]
    default = Config()
    if cfg.model != default.model:
        presets = sorted(files("azshogi.conf").joinpath("model").iterdir(), key=lambda f: f.name)
        # a preset names the shape; model.opponent_policy, in no preset, is added where it is on
        shape = {k: v for k, v in vars(cfg.model).items() if k != "opponent_policy"}
        named = [f.name[:-len(".yaml")] for f in presets
                 if f.name.endswith(".yaml") and OmegaConf.to_container(OmegaConf.create(f.read_text())) == shape]
        args += [f"model={named[0]}"] if named else [f"model.{k}={v}" for k, v in shape.items()]
        if cfg.model.opponent_policy:
            args.append("model.opponent_policy=true")
    if cfg.train.optimizer != default.train.optimizer:
        args.append(f"train.optimizer={cfg.train.optimizer.name}")
    for key in ("checkpoint_root", "log_root"):
        if getattr(cfg, key) != getattr(default, key):
            value = str(getattr(cfg, key))  # quoted for Hydra and then the shell where it is no plain token
            args.append(f"{key}={value}" if re.fullmatch(r"[\w./-]+", value, re.ASCII) else
                        shlex.quote(f'{key}="{value}"'))
    return "azshogi " + " ".join(args)


def pretrain(cfg: Config, show_progress: bool = True) -> Path:
    """Trains cfg.model on cfg.pretrain.train_files; returns the checkpoint written."""
    from azshogi.train.monitor import Monitor, log, setup_logging

    p = cfg.pretrain
    if not p.train_files:
        raise ConfigError("pretrain.train_files=[]: give at least one .hcpe or .hcpe3 file")
    if cfg.resume:
        raise ConfigError(f"resume={cfg.resume}: pretraining starts a network from scratch and does not resume; "
                          f"to go on from a checkpoint, train with azshogi (self-play), or pretrain a new run")
    same = [(a, b) for a in p.test_files for b in p.train_files
            if Path(a).exists() and Path(b).exists() and Path(a).samefile(b)]
    if same:
        raise ConfigError(f"pretrain.test_files: {same[0][0]} is also in pretrain.train_files ({same[0][1]}): "
                          f"its test figures would measure positions trained on")
    paths = RunPaths.of(cfg)
    if ckpt.latest(paths.checkpoints) is not None:
        raise ConfigError(f"run={cfg.run!r}: {paths.checkpoints} already holds checkpoints; "
                          f"pretrain into a new run name")
    run = RunState(cfg, resolve_device(cfg.device))  # every stream seeded, then the network built
    train = load_buffer(p.train_files)  # read before anything is written: a failed start leaves nothing
    test: Optional[ReplayBuffer] = None
    test_slots = np.zeros(0, np.int64)
    if p.test_files:
        test = load_buffer(p.test_files)
        test_slots = np.sort(np.random.default_rng(cfg.seed).permutation(len(test))[:p.test_positions])
    handler = setup_logging(paths.log_file)
    monitor = Monitor(paths.logs, purge_step=None, show_progress=show_progress)
    try:
        monitor.hyperparameters(run.plain_config, 0)
        monitor.say(f"pretraining run '{cfg.run}': {len(train)} positions from {len(p.train_files)} file(s), "
                    f"network {cfg.model.blocks}x{cfg.model.channels}, {p.steps} steps of {cfg.train.batch_size}")
        if test is not None:
            monitor.say(f"test: {len(test_slots)} of {len(test)} positions from {len(p.test_files)} file(s)")
        c, trainer = run.counters, run.trainer
        _ = trainer.optimizer  # built before the first step (lazily, it imports much): stops come between steps
        monitor.start_bar("pretraining", p.steps, "step")
        loss: dict[str, str] = {}
        stop = threading.Event()
        previous = stopping.install(stop.is_set, stop.set, "the checkpoint follows")
        try:
            for step in range(1, p.steps + 1):
                if stop.is_set():
                    break
                trainer.step(train.sample(cfg.train.batch_size, run.train_rng, cfg.train.mirror, trainer.opponent))
                c.train_steps += 1
                c.samples_trained += cfg.train.batch_size
                if c.train_steps % cfg.train.log_every == 0:
                    metrics = trainer.read_back()[-1]
                    monitor.train_step(c.train_steps, metrics, trainer.skipped)
                    loss = {"loss": f"{metrics.policy_loss:.3f}/{metrics.value_loss:.3f}"}
                monitor.advance(1, **loss)
                if test is not None and (step % p.eval_every == 0 or step == p.steps):
                    m = evaluate(run.model, test, test_slots, cfg, run.device)
                    for name in ("policy_loss", "value_loss", "policy_accuracy", "value_accuracy"):
                        if not math.isnan(getattr(m, name)):  # no value accuracy without decisive games
                            monitor.writer.add_scalar(f"test/{name}", getattr(m, name), c.train_steps)
                    monitor.writer.flush()
                    value_accuracy = "n/a (all draws)" if math.isnan(m.value_accuracy) else f"{m.value_accuracy:.1%}"
                    monitor.say(f"step {c.train_steps}: test policy loss {m.policy_loss:.3f} accuracy "
                                f"{m.policy_accuracy:.1%} | value loss {m.value_loss:.3f} accuracy {value_accuracy}")
            monitor.close_bar()
            if stop.is_set():
                monitor.say(f"stopped at step {c.train_steps} of {p.steps}: the checkpoint holds the network as it "
                            f"is (a pretraining does not resume: self-play continues it, or pretrain again into a "
                            f"new run name)")
            with stopping.writing():  # a second Ctrl-C waits for it
                path = save(run, paths)
        finally:
            stopping.restore(previous)
        monitor.say(f"wrote {path}: continue with self-play: {continue_command(cfg)}")
        return path
    finally:
        monitor.close()
        log.removeHandler(handler)
        handler.close()


def save(run: RunState, paths: RunPaths) -> Path:
    """The run state as checkpoint 0 of the run: a loop checkpoint with an empty replay window and
    no games in progress (the loop starts its games afresh when it continues)."""
    run.check_finite()
    state = ckpt.assemble(run.state_dict(), ckpt.empty_replay(), in_progress.pack(0, []))
    return ckpt.save(state, paths.checkpoint(run.counters.checkpoints, partial=False), run.cfg.loop.keep_checkpoints)

