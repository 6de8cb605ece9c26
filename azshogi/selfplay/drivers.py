"""How the loop runs self-play: the `SelfPlayDriver` interface, its counters, and the in-process
driver. `InProcessSelfPlay` steps one SelfPlay in the main process; `WorkerSelfPlay`
(workers.py) runs SelfPlays in worker processes around one inference server."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Iterator, Protocol

from azshogi.selfplay.actors import FinishedGame, SelfPlay


@dataclass
class PlayCounters:
    """Running totals of a driver; the difference of two snapshots describes a window.

    Simulator times are summed over the processes that search (1, or one per worker)."""

    moves: int = 0  # positions searched (moves played), games still in progress included
    cheap_moves: int = 0  # of which: searched cheaply, no training position (playout caps)
    nn_calls: int = 0  # forward passes (in the main process)
    nn_positions: int = 0
    nn_seconds: float = 0.0
    simulator_seconds: float = 0.0  # inside the searches, waiting for evaluations included
    leaf_seconds: float = 0.0  # of which: rules, legal moves and features at the leaves
    wait_seconds: float = 0.0  # of which: waiting for evaluations (in process: the forward passes)

    def __sub__(self, other: "PlayCounters") -> "PlayCounters":
        return PlayCounters(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


class SelfPlayDriver(Protocol):
    processes: int  # processes that search

    def play(self, until: Callable[[], bool]) -> Iterator[FinishedGame]:
        """Plays until `until()` is true (asked between moves), yielding each game as it ends;
        when the iterator is exhausted, every game in progress is paused between two moves."""
        ...

    def counters(self) -> PlayCounters: ...

    def state_dict(self) -> dict:
        """The games in progress (SelfPlay.state_dict's format), while paused."""
        ...

    def load_state_dict(self, state: dict) -> None: ...

    def close(self) -> None: ...


class InProcessSelfPlay:
    """selfplay.num_workers=0: one SelfPlay, stepped in the main process (exactly reproducible)."""

    processes = 1

    def __init__(self, selfplay: SelfPlay):
        self.selfplay = selfplay
        self.simulator = selfplay.search.simulator
        self.moves = 0

    def play(self, until: Callable[[], bool]) -> Iterator[FinishedGame]:
        while not until():
            finished = self.selfplay.step()
            self.moves += len(self.selfplay.actors)
            yield from finished

    def counters(self) -> PlayCounters:
        ev, sim = self.simulator.evaluator.stats, self.simulator
        return PlayCounters(self.moves, self.selfplay.cheap_moves, ev.calls, ev.positions, ev.seconds, sim.seconds,
                            sim.leaf_seconds, ev.seconds)

    def state_dict(self) -> dict:
        return self.selfplay.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.selfplay.load_state_dict(state)

    def close(self) -> None:
        pass
