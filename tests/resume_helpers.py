"""A run's whole state as plain, comparable values, for the exact-resume tests.

This is the ONE place the resume tests read a run's state: `loop_state` reads a Loop's objects
(model, trainer, replay buffer, games in progress, every random stream), `checkpoint_state`
first loads a checkpoint into a fresh in-process Loop. When the checkpoint format or these
objects change, update this module; the tests compare its plain values only.

Also here: a Loop that records its state as it writes each checkpoint and can stop itself
after a given number of games or training steps (a deterministic stand-in for Ctrl-C).
"""
from __future__ import annotations

import random
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from azshogi.config import Config
from azshogi.selfplay import in_progress
from azshogi.selfplay.actors import SelfPlay
from azshogi.shogi.rules import rules_of
from azshogi.train.loop import Loop


def plain(value):
    """Tensors and arrays as numpy arrays, containers as dicts and lists, all the way down."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy().copy()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def assert_same(a, b, where: str = "state") -> None:
    """Exact equality of two plain values, naming the first difference's path."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{where}: an array and a {type(b).__name__}"
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{where}: arrays differ"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def assert_continues(resumed, straight, where: str = "state") -> None:
    """A resumed run's state (loop_state) equals the state of the run that never stopped, but for
    the wall time the runs took (counters.wall_seconds: each session adds its own)."""
    assert_same(_without_wall_time(resumed), _without_wall_time(straight), where)


def _without_wall_time(state: dict) -> dict:
    counters = {k: v for k, v in state["counters"].items() if k != "wall_seconds"}
    return {**state, "counters": counters}


# --- the parts of a run's state ---

def games_of(selfplay: SelfPlay) -> dict:
    """The games in progress: positions and their plies, pending policy targets and root values,
    moves and each game's random stream."""
    games = []
    for actor in selfplay.actors:
        games.append({
            "game_id": int(actor.game_id),
            "rng": actor.rng.bit_generator.state,
            "moves": list(actor.moves),
            "plies": [int(v) for v in actor.plies],  # which moves are training positions (playout caps)
            "sfen": actor.board.sfen(),
            "hcps": np.stack(actor.hcps) if actor.hcps else np.zeros((0, 32), np.uint8),
            "labels": [np.asarray(x).copy() for x in actor.labels],
            "probs": [np.asarray(x).copy() for x in actor.probs],
            "root_values": [float(v) for v in actor.root_values],
        })
    return {"next_game_id": int(selfplay.next_game_id), "games": games}


def games_of_driver(driver, cfg: Config) -> dict:
    """games_of for any self-play driver: the in-process one's objects, or (worker processes)
    the state the workers send, read back through a SelfPlay."""
    inner = getattr(driver, "selfplay", None)
    if isinstance(inner, SelfPlay):
        return games_of(inner)
    state = driver.state_dict()
    reader = SelfPlay(None, rules_of(cfg.rules, self_play=True), in_progress.num_games(state), cfg.seed,
                      cfg.replay.min_policy_prob)
    reader.load_state_dict(state)
    return games_of(reader)


def replay_contents(replay) -> dict:
    """The replay window, oldest first, as training sees it (dense policy targets)."""
    slots = (replay.begin + np.arange(len(replay))) % replay.capacity
    batch = replay.gather(slots)
    return {
        "total_added": int(replay.total_added),
        "game_ids": replay.game_ids[slots].copy(),
        "plies": replay.plies[slots].copy(),
        "hcps": replay.hcps[slots].copy(),
        "policy": batch.policy,
        "results": batch.result,
        "root_values": batch.root_value,
        "surprise": replay.window_surprise(),  # NaN unless train.surprise_weight scored them
    }


def loop_state(loop: Loop) -> dict:
    """Everything a resumed run depends on. The process-wide random streams (Python's, torch's)
    are read as they are now: call this right after a checkpoint was written or loaded."""
    return {
        "counters": asdict(loop.counters),
        "model": plain(loop.model.state_dict()),
        # train.average_decay: the network that plays (None without one)
        "model_average": None if loop.run_state.average is None else plain(loop.run_state.average.state_dict()),
        "trainer": plain(loop.trainer.state_dict()),  # optimizer, AMP scaler, step counts
        "rng": {"python": plain(random.getstate()), "torch": plain(torch.get_rng_state()),
                "train": plain(loop.train_rng.bit_generator.state)},
        "replay": replay_contents(loop.replay),
        "selfplay": games_of_driver(loop.selfplay, loop.cfg),
    }


def load_loop(cfg: Config, path: Path, num_workers: int = 0) -> Loop:
    """A fresh Loop for `cfg` restored from the checkpoint at `path` (its workers, if any, start
    on first use)."""
    loop = Loop(replace(cfg, selfplay=replace(cfg.selfplay, num_workers=num_workers)), show_progress=False)
    loop.restore_from(path)
    return loop


def checkpoint_state(cfg: Config, path: Path) -> dict:
    loop = load_loop(cfg, path)
    try:
        return loop_state(loop)
    finally:
        loop.selfplay.close()


# --- a loop that records its checkpoints and stops itself ---

class _StopAfterGames:
    """A self-play driver that asks the loop to stop once `games` games have ended."""

    def __init__(self, driver, loop: Loop, games: int):
        self.driver, self.loop, self.games = driver, loop, games

    def play(self, until):
        for game in self.driver.play(until):
            yield game  # the loop has taken this game into its buffer when we resume here
            self.games -= 1
            if self.games == 0:
                self.loop.stop_requested = True

    def __getattr__(self, name):
        return getattr(self.driver, name)


class _StopAfterSteps:
    """A trainer that asks the loop to stop after `steps` optimizer steps."""

    def __init__(self, trainer, loop: Loop, steps: int):
        self.trainer, self.loop, self.steps = trainer, loop, steps

    def step(self, batch):
        metrics = self.trainer.step(batch)
        self.steps -= 1
        if self.steps == 0:
            self.loop.stop_requested = True
        return metrics

    def __getattr__(self, name):
        return getattr(self.trainer, name)


class RecordingLoop(Loop):
    """A Loop that keeps `loop_state` of every checkpoint it writes, by file name, and stops
    itself after `stop_after_games` finished games or `stop_after_steps` training steps of this
    run (then writes its -partial checkpoint, as after Ctrl-C)."""

    def __init__(self, cfg: Config, stop_after_games: Optional[int] = None, stop_after_steps: Optional[int] = None):
        super().__init__(cfg, show_progress=False)
        self.written: dict[str, dict] = {}
        if stop_after_games:
            self.selfplay = _StopAfterGames(self.selfplay, self, stop_after_games)
        if stop_after_steps:
            self.run_state.trainer = _StopAfterSteps(self.run_state.trainer, self, stop_after_steps)

    def save(self, partial: bool, games: Optional[dict] = None) -> Path:
        path = super().save(partial, games)
        self.written[path.name] = loop_state(self)
        return path


def run_config(base: Config, root: Path, run: str, resume: str = "") -> Config:
    """`base` for run `run` with its checkpoints and logs under `root` (and `resume=` if given)."""
    return replace(base, run=run, checkpoint_root=str(root / "checkpoints"), log_root=str(root / "logs"),
                   resume=resume)
