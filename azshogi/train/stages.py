"""A run's schedule: the settings in force at each checkpoint.

A run's `stages` (config.py `StageConfig`, docs/settings.md) each replace some settings once a
number of checkpoints are written, e.g. the CPU preset's (conf/experiment/cpu.yaml):

    stages:
      cool: {from_checkpoint: 31, until_checkpoint: 41, set: {train: {lr: 0.0001}}}
      deeper: {from_checkpoint: 41, set: {search: {num_simulations: 64, max_num_considered_actions: 16}}}
      lr_drop: {from_checkpoint: 100, set: {train: {lr: 0.0001}}}

`config_at(cfg, n)` is the config the phases after checkpoint n use: the stages begun by then
and not ended applied in the order they began (a later stage's value wins). A stage with
`until_checkpoint: m` ends once m checkpoints are written: from then on what it set is what the
run and the other stages in force say, as if it had never begun. A stage begins at its
from_checkpoint; one with `when_flat: K` waits from there until the in-loop rating has stopped
rising (`rating_flat`: the last K ratings none above the best one before them by more than its
own 95% margin) and begins at the checkpoint after the evaluation that says so, which the run's
counters record (`RunCounters.flat_starts`, passed here as `flat`). The loop (train/loop.py)
enters a stage at the checkpoint that starts (or ends) it, before writing that checkpoint, so the file
holds the stage's network and settings; a resume at checkpoint n recomputes config_at(cfg, n)
and needs nothing else saved. `play_config` is what a checkpoint saves and the in-loop evaluation
and the engine play with: the stage's network, the run's own search.* (a stage's search is
self-play's).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Optional

from azshogi.config import STAGE_KEYS, Config, StageConfig, stages_in_order, with_stage

NONE: Mapping[str, int] = {}


def start_of(name: str, stage: StageConfig, flat: Mapping[str, int]) -> float:
    """The checkpoint a stage begins at: its from_checkpoint, or for a when_flat stage the one
    `flat` records (infinity until the rating has stopped rising)."""
    return flat.get(name, math.inf) if stage.when_flat else stage.from_checkpoint


def begun(cfg: Config, checkpoints: int, flat: Mapping[str, int] = NONE) -> list[tuple[str, StageConfig]]:
    """The stages begun once `checkpoints` checkpoints are written, in the order they began."""
    ordered = sorted(stages_in_order(cfg), key=lambda item: start_of(item[0], item[1], flat))
    return [(name, stage) for name, stage in ordered if start_of(name, stage, flat) <= checkpoints]


def stage_at(cfg: Config, checkpoints: int, flat: Mapping[str, int] = NONE) -> int:
    """How many of the run's stages have begun once `checkpoints` checkpoints are written (0: the
    run's own settings)."""
    return len(begun(cfg, checkpoints, flat))


def in_force(cfg: Config, checkpoints: int, flat: Mapping[str, int] = NONE) -> list[tuple[str, StageConfig]]:
    """The stages begun and not ended once `checkpoints` checkpoints are written, in the order they
    began."""
    return [(name, stage) for name, stage in begun(cfg, checkpoints, flat) if not stage.ended(checkpoints)]


def config_at(cfg: Config, checkpoints: int, flat: Mapping[str, int] = NONE) -> Config:
    """The settings in force once `checkpoints` checkpoints are written (`cfg` validated: each
    stage's settings are)."""
    for name, stage in in_force(cfg, checkpoints, flat):
        cfg = with_stage(cfg, name, stage)
    return cfg


def play_config(cfg: Config, checkpoints: int, flat: Mapping[str, int] = NONE) -> Config:
    """What a checkpoint saves and the evaluation plays with: config_at's, but the run's own
    search.* (the engine's defaults), a stage's search being self-play's."""
    return replace(config_at(cfg, checkpoints, flat), search=cfg.search)


def rating_flat(history: list[dict], since: int, k: int) -> Optional[str]:
    """Whether the in-loop rating has stopped rising: of the ratings of the checkpoints after
    `since` (ratings.json's records, oldest first: checkpoint, rating, rating_margin), the last
    `k` are each no more than their own 95% margin above the best rating before them. Returns
    the words saying so, or None: fewer than k + 1 ratings, or one of the last k without a finite
    margin (a score of all wins or all losses says nothing about a plateau)."""
    rated = [h for h in history if h["checkpoint"] > since and h.get("rating") is not None]
    if k < 1 or len(rated) < k + 1:
        return None
    best = max(rated[:-k], key=lambda h: h["rating"])
    last = rated[-k:]
    if any(h.get("rating_margin") is None or h["rating"] > best["rating"] + h["rating_margin"] for h in last):
        return None
    checkpoints = ", ".join(str(h["checkpoint"]) for h in last)
    ratings = ", ".join("{:.0f} ± {:.0f}".format(h["rating"], h["rating_margin"]) for h in last)
    return (f"the rating has stopped rising (checkpoints {checkpoints}: {ratings}, none above checkpoint "
            f"{best['checkpoint']}'s {best['rating']:.0f} by more than its margin)")


def flat_stage_due(cfg: Config, checkpoints: int, flat: Mapping[str, int],
                   history: list[dict]) -> Optional[tuple[str, str]]:
    """After the evaluation of checkpoint `checkpoints`: the first when_flat stage waiting (its
    from_checkpoint reached) whose rating test holds over the ratings since the last stage began
    or ended, and the words why; None if none. It begins at the next checkpoint."""
    last_change = max((s.until_checkpoint if s.ended(checkpoints) else start_of(n, s, flat)
                       for n, s in begun(cfg, checkpoints, flat)), default=0)
    for name, stage in stages_in_order(cfg):
        if stage.when_flat and name not in flat and stage.from_checkpoint <= checkpoints:
            why = rating_flat([h for h in history if h["checkpoint"] <= checkpoints], int(last_change), stage.when_flat)
            if why:
                return name, why
    return None


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


def entered(cfg: Config, checkpoints: int, flat: Mapping[str, int] = NONE) -> Optional[str]:
    """What the log says when stages begin or end at this checkpoint: which, of how many, why, and
    what they change ('stage 2 of 3, deeper (from_checkpoint 41); stage cool ended (until_checkpoint
    41): search.num_simulations 32 -> 64, train.lr 0.0001 -> 0.001'); None when none does."""
    now = begun(cfg, checkpoints, flat)
    starting = [(i, name, stage) for i, (name, stage) in enumerate(now, 1)
                if start_of(name, stage, flat) == checkpoints]
    ending = [(name, stage) for name, stage in now if stage.until_checkpoint == checkpoints]
    if not starting and not ending:
        return None
    said = []
    if starting:
        said.append(f"stage {starting[-1][0]} of {len(cfg.stages)}, " + ", ".join(
            f"{name} (" + (f"when_flat {stage.when_flat}" if stage.when_flat else
                           f"from_checkpoint {stage.from_checkpoint}") + ")" for _, name, stage in starting))
    said += [f"stage {name} ended (until_checkpoint {stage.until_checkpoint})" for name, stage in ending]
    what = changes(config_at(cfg, checkpoints - 1, flat), config_at(cfg, checkpoints, flat))
    return "; ".join(said) + ": " + (", ".join(what) or "no setting changes")


def never_flat(cfg: Config) -> Optional[str]:
    """What the start-up line says when when_flat stages cannot begin because the in-loop rating
    is off (eval.every=0, e.g. `+experiment=gpu eval.every=0`): they wait for it, never begin and
    stop nothing else; None when there are none or the rating is on."""
    waiting = [name for name, stage in stages_in_order(cfg) if stage.when_flat]
    if not waiting or cfg.eval.every > 0:
        return None
    return (f"stage{'s' if len(waiting) > 1 else ''} {', '.join(waiting)} wait{'' if len(waiting) > 1 else 's'} "
            f"for the in-loop rating to stop rising (when_flat), which eval.every=0 turns off: "
            f"{'they' if len(waiting) > 1 else 'it'} will not begin in this run")
