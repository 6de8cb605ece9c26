"""A run's schedule: the settings in force at each checkpoint.

A run's `stages` (config.py `StageConfig`, docs/settings.md) each replace some settings once a
number of checkpoints are written, e.g. the CPU preset's (conf/experiment/cpu.yaml):

    stages:
      deeper: {from_checkpoint: 41, set: {search: {num_simulations: 64, max_num_considered_actions: 16}}}
      lr_drop: {from_checkpoint: 100, set: {train: {lr: 0.0001}}}

`config_at(cfg, n)` is the config the phases after checkpoint n use: the stages with
from_checkpoint <= n applied in order (a later stage's value wins). The loop (train/loop.py)
enters a stage at the checkpoint that starts it, before writing that checkpoint, so the file
holds the stage's network and settings; a resume at checkpoint n recomputes config_at(cfg, n)
and needs nothing else saved. `play_config` is what a checkpoint saves and the in-loop evaluation
and the engine play with: the stage's network, the run's own search.* (a stage's search is
self-play's).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from azshogi.config import STAGE_KEYS, Config, stages_in_order, with_stage


def stage_at(cfg: Config, checkpoints: int) -> int:
    """How many of the run's stages have begun once `checkpoints` checkpoints are written (0: the
    run's own settings)."""
    return sum(stage.from_checkpoint <= checkpoints for _, stage in stages_in_order(cfg))


def config_at(cfg: Config, checkpoints: int) -> Config:
    """The settings in force once `checkpoints` checkpoints are written (`cfg` validated: each
    stage's settings are)."""
    for name, stage in stages_in_order(cfg):
        if stage.from_checkpoint <= checkpoints:
            cfg = with_stage(cfg, name, stage)
    return cfg


def play_config(cfg: Config, checkpoints: int) -> Config:
    """What a checkpoint saves and the evaluation plays with: config_at's, but the run's own
    search.* (the engine's defaults), a stage's search being self-play's."""
    return replace(config_at(cfg, checkpoints), search=cfg.search)


def changes(before: Config, after: Config) -> list[str]:
    """The settings a stage may set that differ, as 'KEY OLD -> NEW'."""
    out = []
    for key in STAGE_KEYS:
        section, name = key.split(".")
        old, new = (getattr(getattr(c, section), name) for c in (before, after))
        if old != new:
            out.append(f"{key} {_word(old)} -> {_word(new)}")
    return out


def _word(value) -> str:
    return str(getattr(value, "value", value))


def entered(cfg: Config, checkpoints: int) -> Optional[str]:
    """What the log says when stages begin at this checkpoint: which, of how many, why, and what
    they change ('stage 1 of 2, deeper (from_checkpoint 41): search.num_simulations 32 -> 64');
    None when none begins here."""
    ordered = stages_in_order(cfg)
    starting = [(i, name, stage) for i, (name, stage) in enumerate(ordered, 1) if stage.from_checkpoint == checkpoints]
    if not starting:
        return None
    named = ", ".join(f"{name} (from_checkpoint {stage.from_checkpoint})" for _, name, stage in starting)
    what = changes(config_at(cfg, checkpoints - 1), config_at(cfg, checkpoints))
    return (f"stage {starting[-1][0]} of {len(ordered)}, {named}: " + (", ".join(what) or "no setting changes"))

