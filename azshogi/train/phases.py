"""A phase's figures: what a self-play phase did (`SelfPlayPhaseStats`), what a training phase
did (`TrainPhaseStats`), and where the wall time between two checkpoint lines went (`PhaseClock`,
`PhaseTimes`), phase by phase:

    selfplay    games searched and played, finished games into the replay buffer
    pause       pausing and resuming self-play: the moves in flight when a phase's target is
                reached (workers finish theirs), the games in progress gathered for a checkpoint
                or restored from one, a checkpoint read at start-up
    train       optimizer steps
    checkpoint  writing the checkpoint file and the replay store's new segment
    eval        the in-loop evaluation matches
    records     KIF and hcpe3 files of finished games
    other       the rest of the wall time (console, TensorBoard)

A phase entered inside another pauses the outer one, so the phases never overlap and, with
`other`, add up to the wall time.
"""
from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

import cshogi

from azshogi.selfplay.drivers import DriverStatus, SelfPlayTotals
from azshogi.selfplay.resignation import suggested_threshold
from azshogi.shogi.game_record import SelfPlayGame
from azshogi.shogi.rules import Termination

PHASES = ("selfplay", "pause", "train", "checkpoint", "eval", "records")
LABELS = {"selfplay": "self-play", "pause": "pause/resume", "train": "train", "checkpoint": "checkpoint",
          "eval": "eval", "records": "records", "other": "other"}


@dataclass
class SelfPlayPhaseStats:
    """What a self-play phase has done so far: the progress bar shows it as it grows, the
    checkpoint line and TensorBoard at the phase's end. A phase resumed from a checkpoint counts
    its positions (`positions_before` of them made before the resume) and its finished games
    (`snapshot`, kept in the -partial checkpoint) from the phase's start; its moves, times and
    resignations from the resume."""

    moves: int = 0  # moves played by every game in flight (positions searched)
    positions: int = 0  # training positions of the finished games, toward the phase's target
    positions_before: int = 0  # of which: made before this session resumed the phase
    games: int = 0  # games finished
    game_moves: int = 0  # their moves in all
    terminations: collections.Counter = field(default_factory=collections.Counter)  # games by how they ended
    black_wins: int = 0
    white_wins: int = 0
    draws: int = 0
    seconds: float = 0.0  # the phase's wall time
    # The driver's totals over the phase, at its end (cheap moves, forward passes, search seconds;
    # its `moves` are `moves`).
    play: SelfPlayTotals = field(default_factory=SelfPlayTotals)
    driver: DriverStatus = field(default_factory=DriverStatus)  # a cluster's nodes, at the phase's end
    # Games played out past resignation: (where each side would have resigned, the winner)
    resign_samples: list = field(default_factory=list)
    resign_threshold: Optional[float] = None  # the threshold the phase played with (None: resignation off)

    def add_game(self, game: SelfPlayGame) -> None:
        """A finished game."""
        self.games += 1
        self.game_moves += game.length
        self.positions += len(game.positions)
        self.terminations[game.record.termination] += 1
        if game.resign_levels is not None:
            self.resign_samples.append((game.resign_levels, game.record.winner))
        if game.record.winner is None:
            self.draws += 1
        elif game.record.winner == cshogi.BLACK:
            self.black_wins += 1
        else:
            self.white_wins += 1

    def suggested_resign_threshold(self) -> Optional[float]:
        """The threshold the phase's played-out games support (selfplay/resignation.suggested_threshold)."""
        return suggested_threshold(self.resign_samples)

    def resign_words(self) -> str:
        """The resignations for the checkpoint line: ", resigned R at T, false F/P, 5%: S" ("" when
        off)."""
        p = self.play
        if not (p.resigned or p.resign_playouts or self.resign_samples):
            return ""
        suggested = self.suggested_resign_threshold()
        at = "" if self.resign_threshold is None else f" at {self.resign_threshold:.2f}"
        return (f", resigned {p.resigned}{at}, false {p.false_resigns}/{p.resign_playouts}"
                + ("" if suggested is None else f", 5%: {suggested:.2f}"))

    _SNAPSHOT = ("games", "game_moves", "black_wins", "white_wins", "draws")

    def snapshot(self) -> dict:
        """The finished games' figures, as a -partial checkpoint keeps them (RunCounters.phase_games)."""
        return {**{k: getattr(self, k) for k in self._SNAPSHOT},
                "terminations": {int(t): n for t, n in self.terminations.items()}}

    @classmethod
    def resumed(cls, snapshot: dict) -> "SelfPlayPhaseStats":
        """A phase's figures that go on from a snapshot (empty: a new phase)."""
        stats = cls()
        for key in cls._SNAPSHOT:
            setattr(stats, key, int(snapshot.get(key, 0)))
        stats.terminations.update({Termination(int(t)): int(n) for t, n in snapshot.get("terminations", {}).items()})
        return stats

    @property
    def new_positions(self) -> int:
        """The training positions of this session's part of the phase."""
        return self.positions - self.positions_before

    @property
    def mean_length(self) -> float:
        """Moves per finished game (nan before the first)."""
        return self.game_moves / self.games if self.games else float("nan")


@dataclass
class TrainPhaseStats:
    """What a training phase did in this session: optimizer steps (`skipped` of them not applied,
    their loss not finite), the losses of the applied ones summed, and the wall time."""

    steps: int = 0
    skipped: int = 0
    policy_loss_sum: float = 0.0
    value_loss_sum: float = 0.0
    opponent_policy_loss_sum: Optional[float] = None  # with model.opponent_policy
    seconds: float = 0.0
    # with train.surprise_weight: the mean surprise (nats) of the positions scored before the
    # phase's first step (train/surprise.py)
    mean_surprise: Optional[float] = None

    def add(self, metrics) -> None:
        """One step's trainer.StepMetrics."""
        self.steps += 1
        if metrics.skipped:
            self.skipped += 1
            return
        self.policy_loss_sum += metrics.policy_loss
        self.value_loss_sum += metrics.value_loss
        if metrics.opponent_policy_loss is not None:
            self.opponent_policy_loss_sum = (self.opponent_policy_loss_sum or 0.0) + metrics.opponent_policy_loss

    @property
    def mean_policy_loss(self) -> float:
        return self._mean(self.policy_loss_sum)

    @property
    def mean_value_loss(self) -> float:
        return self._mean(self.value_loss_sum)

    @property
    def mean_opponent_policy_loss(self) -> Optional[float]:
        """None when no step trained the opponent-policy head."""
        return None if self.opponent_policy_loss_sum is None else self._mean(self.opponent_policy_loss_sum)

    def _mean(self, total: float) -> float:
        done = self.steps - self.skipped
        return total / done if done else float("nan")


@dataclass
class PhaseTimes:
    """Seconds per phase over one lap, and the lap's wall time."""

    seconds: dict
    wall: float

    @property
    def other(self) -> float:
        return max(0.0, self.wall - sum(self.seconds.values()))

    def share(self, phase: str) -> float:
        return self.seconds.get(phase, 0.0) / self.wall if self.wall > 0 else 0.0

    def items(self) -> Iterator[tuple[str, float]]:
        yield from self.seconds.items()
        yield "other", self.other

    def summary(self) -> str:
        """E.g. `time 131 s: self-play 120 s (92%), pause/resume 0.2, train 10.1, ...`."""
        rest = ", ".join(f"{LABELS[name]} {s:.1f}" for name, s in self.items() if name != "selfplay")
        return (f"time {self.wall:.0f} s: self-play {self.seconds['selfplay']:.1f} s "
                f"({self.share('selfplay'):.0%}), {rest}")


class PhaseClock:
    """Charges wall time to the phase on top of a stack; `lap()` reads and restarts the totals."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.stack: list[str] = []
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.lap_start = self.last = clock()

    def _charge(self) -> None:
        now = self.clock()
        if self.stack:
            self.totals[self.stack[-1]] += now - self.last
        self.last = now

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.enter(name)
        try:
            yield
        finally:
            self.exit()

    def enter(self, name: str) -> None:
        if name not in self.totals:
            raise ValueError(f"unknown phase {name!r}")
        self._charge()
        self.stack.append(name)

    def exit(self) -> None:
        self._charge()
        self.stack.pop()

    def switch(self, name: str) -> None:
        """The current phase goes on as `name` (e.g. self-play turning into the pause)."""
        self._charge()
        self.stack[-1] = name

    def elapsed(self) -> float:
        """The wall time since the lap began, without ending it."""
        return self.clock() - self.lap_start

    def lap(self) -> PhaseTimes:
        self._charge()
        times = PhaseTimes(dict(self.totals), self.last - self.lap_start)
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.lap_start = self.last
        return times
