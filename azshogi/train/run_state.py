"""The run state: what training changes and a checkpoint must hold to continue exactly.

    model       the network (built from cfg.model on the run's device)
    average     the network that plays, an average of `model` over checkpoints, or None
                (train.average_decay; averaging.py)
    trainer     its optimizer, loss scaler and step counts (trainer.py)
    counters    the run's counters (`RunCounters`)
    random      Python's and torch's streams (CUDA's included), and the training stream that
                draws minibatches (numpy), all seeded from cfg.seed when a run starts
    config      the run's settings, saved with it: a resume checks the network's shape and the
                optimizer against them

The loop composes it with self-play, the replay window and the games in progress; pretraining
composes it alone. Its layout inside a checkpoint file is formats/checkpoint.py's (`RUN_STATE`).
"""
from __future__ import annotations

import functools
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from azshogi.config import Config, ConfigError, dotted, from_plain, to_plain
from azshogi.formats.checkpoint import CheckpointError
from azshogi.nn.network import PolicyValueNet, from_config, weights_finite
from azshogi.train import averaging
from azshogi.train.trainer import Trainer


@dataclass
class RunCounters:
    """Where the run stands, all sessions together (saved in checkpoints, field by field): totals of
    what it has done since it began, and the marks that say where in its loop it stopped."""

    checkpoints: int = 0  # training phases completed
    train_steps: int = 0  # optimizer steps attempted, all phases
    games: int = 0
    positions: int = 0  # training positions of finished games (their fully searched moves), all phases
    positions_since_checkpoint: int = 0
    samples_trained: int = 0  # training samples drawn, all phases
    in_training: bool = False  # the phase in progress is training (after a pause)
    phase_steps: int = 0  # steps done in the training phase in progress
    evaluated: int = 0  # the last checkpoint whose evaluation finished
    wall_seconds: float = 0.0  # the run's wall time up to the last checkpoint, all sessions; a -partial file's up
    # to its stop (before 2026-11-28 a checkpoint's file kept the time up to the line before it, a -partial one's
    # up to the last line)
    # the when_flat stages begun (train/stages.py): name -> the checkpoint it began at
    flat_starts: dict[str, int] = field(default_factory=dict)
    # The automatic resignation threshold (selfplay.resign_target; selfplay/resignation.py): the one
    # in force (None: selfplay.resign_threshold), and per checkpoint its phase's played-out games'
    # counts on the threshold grid (the last selfplay.resign_window checkpoints')
    resign_threshold: Optional[float] = None
    resign_counts: dict[int, list] = field(default_factory=dict)
    # a stopped phase's finished games so far (phases.SelfPlayPhaseStats.snapshot), so that its
    # checkpoint's figures count them all; empty at a whole checkpoint
    phase_games: dict = field(default_factory=dict)
    # a -partial file's hcpe3 records' length in bytes when it was written (None: a whole
    # checkpoint, or written before 2026-12-05): a second stop of the phase appends after that much
    records_bytes: Optional[int] = None

    @property
    def sample_reuse(self) -> float:
        return self.samples_trained / max(1, self.positions)


def train_stream(seed: int) -> np.random.Generator:
    """The stream training draws its minibatches from, apart from the games' streams."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2**31,)))


class RunState:
    """A run's model, trainer, counters and random streams, for `cfg` on `device`.

    A new one seeds Python's and torch's streams from cfg.seed before it builds the network (so
    the same seed gives the same initial weights), and starts the training stream and the
    counters; `load_state_dict` replaces all of them with a checkpoint's."""

    def __init__(self, cfg: Config, device: torch.device):
        self.cfg, self.device = cfg, device
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.model = from_config(cfg.model).to(device)
        self.average: Optional[torch.nn.Module] = None  # train.average_decay: updated at each checkpoint
        self.trainer = Trainer(self.model, cfg.train, device)
        self.train_rng = train_stream(cfg.seed)
        self.counters = RunCounters()

    @functools.cached_property
    def plain_config(self) -> dict:
        """The run's settings as saved (converted once: it takes a while)."""
        return to_plain(self.cfg)

    def state_dict(self) -> dict:
        """The run state's parts (formats/checkpoint.RUN_STATE); the process-wide random streams
        as they are now."""
        return {
            "model": self.model.state_dict(),
            "model_average": None if self.average is None else self.average.state_dict(),
            "trainer": self.trainer.state_dict(),
            "counters": asdict(self.counters),
            "rng": {
                "python": random.getstate(),
                "numpy_train": self.train_rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            },
            "config": self.plain_config,
        }

    @property
    def playing(self) -> torch.nn.Module:
        """The network that plays this checkpoint: the average where one is kept, else the model."""
        return self.model if self.average is None else self.average

    def average_checkpoint(self) -> None:
        """Folds the model, as a checkpoint leaves it, into the average (averaging.py)."""
        self.average = averaging.updated(self.average, self.model, self.cfg.train.average_decay, self.cfg.model)

    def use(self, cfg: Config, model: Optional[PolicyValueNet] = None) -> None:
        """Goes on with `cfg` (a stage's settings, train/stages.py) and, when given, another network
        (a grown one, or one of the stage's shape for a checkpoint's weights), trained by a new
        optimizer from the old trainer's step (Trainer.carry_on). A new network, or a stage
        without averaging, drops the average (a new one starts at the next checkpoint)."""
        self.cfg = cfg
        self.__dict__.pop("plain_config", None)
        if model is not None or cfg.train.average_decay <= 0:
            self.average = None
        if model is not None:
            old, self.model = self.trainer, model
            self.trainer = Trainer(model, cfg.train, self.device)
            self.trainer.carry_on(old)
        self.trainer.configure(cfg.train)

    def check_finite(self) -> None:
        """Raises CheckpointError when the network's weights are not finite: nothing to save."""
        if not weights_finite(self.model):
            raise CheckpointError("the network's weights are not finite; the checkpoint was not written")

    def load_state_dict(self, state: dict, path: Path) -> None:
        """Continues the run state saved in `path` (its parts, as state_dict gives them), after
        checking that it fits this run's settings."""
        self.check_compatible(from_plain(state["config"]), path)
        self.model.load_state_dict(state["model"])
        self.average = averaging.restored(state.get("model_average"), self.cfg.train.average_decay, self.cfg.model,
                                          self.device)
        self.trainer.load_state_dict(state["trainer"])
        self.counters = RunCounters(**state["counters"])
        rng = state["rng"]
        random.setstate(rng["python"])
        self.train_rng.bit_generator.state = rng["numpy_train"]
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])

    def check_compatible(self, saved: Config, path: Path) -> None:
        """Raises ConfigError, saying what to change, when the run saved in `path` (with the
        settings `saved`) has another network shape or optimizer than this one."""
        now = self.cfg
        if saved.model != now.model:
            raise ConfigError(
                f"{path} holds a network with model.blocks={saved.model.blocks}, model.channels="
                f"{saved.model.channels}, model.value_hidden={saved.model.value_hidden}, model.opponent_policy="
                f"{saved.model.opponent_policy}, but the config asks for {now.model.blocks}, {now.model.channels}, "
                f"{now.model.value_hidden}, {now.model.opponent_policy} (its stages included): "
                f"use the run's model settings and stages, or start a new run name")
        if saved.train.optimizer != now.train.optimizer:  # e.g. an azshogi-pretrain checkpoint
            raise ConfigError(
                f"{path} holds the state of train.optimizer={saved.train.optimizer.value}, but the config asks "
                f"for {now.train.optimizer.value}: use the same optimizer")


# Settings a resume may change without it meaning anything for the run's data: where it is, how
# far it goes.
_UNREMARKABLE = ("run", "resume", "checkpoint_root", "log_root", "loop.max_checkpoints", "replay.skip_damaged")
# Settings saved as "auto" (by a pretraining, which resolves none): the value a run resolves is no change
_AUTO = {"selfplay.num_workers": -1, "selfplay.num_actors": 0}


def changed_since(saved: dict, now: dict) -> list[tuple[str, object, object]]:
    """(key, saved value, value now) of every setting that differs between a checkpoint's saved
    config (read as this azshogi reads it: settings added since take their defaults) and the
    config in force now at the same stage, but those a resume may change at no cost. A stage
    of the schedule added or left out is one entry, (stages.NAME, None or "a stage", "a stage"
    or None); a stage changed, one per setting of it."""
    before, after = dotted(to_plain(from_plain(saved))), dotted(now)
    stages = {"before": set(saved.get("stages") or {}), "after": set(now.get("stages") or {})}
    changes: list[tuple[str, object, object]] = []
    for name in sorted(stages["before"] ^ stages["after"]):  # whole stages: one line each
        changes.append((f"stages.{name}", "a stage" if name in stages["before"] else None,
                        "a stage" if name in stages["after"] else None))
    whole = tuple(f"stages.{name}." for name in stages["before"] ^ stages["after"])
    for key in list(after) + [k for k in before if k not in after]:
        old, new = before.get(key), after.get(key)
        if old == new or key == "stages" or key.startswith(whole) or _AUTO.get(key, object()) == old:
            continue
        if not any(key == k or key.startswith(k + ".") for k in _UNREMARKABLE):
            changes.append((key, old, new))
    return changes

