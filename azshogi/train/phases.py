"""Where a run's wall time goes: the seconds of each phase between two checkpoint lines.

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

import contextlib
import time
from dataclasses import dataclass
from typing import Callable, Iterator

PHASES = ("selfplay", "pause", "train", "checkpoint", "eval", "records")
LABELS = {"selfplay": "self-play", "pause": "pause/resume", "train": "train", "checkpoint": "checkpoint",
          "eval": "eval", "records": "records", "other": "other"}


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

    def lap(self) -> PhaseTimes:
        self._charge()
        times = PhaseTimes(dict(self.totals), self.last - self.lap_start)
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.lap_start = self.last
        return times
