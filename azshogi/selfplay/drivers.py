"""How the loop runs self-play: the `SelfPlayDriver` interface, what it counts (`SelfPlayTotals`),
and the in-process driver. `InProcessSelfPlay` steps one SelfPlay in the main process;
`WorkerSelfPlay` (workers.py) runs SelfPlays in worker processes around one inference server."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable, Iterator, Protocol

from azshogi.selfplay.actors import SelfPlay
from azshogi.shogi.game_record import SelfPlayGame
from azshogi.shogi.network_io import EvaluatorTotals


@dataclass
class SelfPlayTotals:
    """What self-play has done since its driver started, as running totals; the difference of two
    snapshots describes a window (the loop's self-play phase). Moves and seconds are summed over
    the processes that search (the main process, or every worker); `network` counts the forward
    passes of the run's one model (in process: the evaluator's; with workers: the inference
    server's)."""

    moves: int = 0  # moves played (positions searched) by every game, those in progress included
    cheap_moves: int = 0  # of which: searched cheaply, no training position (playout caps)
    network: EvaluatorTotals = field(default_factory=EvaluatorTotals)  # forward passes: calls, positions, s
    simulator_seconds: float = 0.0  # inside the searches, waiting for evaluations included
    leaf_seconds: float = 0.0  # of which: rules, legal moves and features at the leaves
    wait_seconds: float = 0.0  # of which: waiting for evaluations (in process: the forward passes)

    def __sub__(self, other: "SelfPlayTotals") -> "SelfPlayTotals":
        return SelfPlayTotals(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def __add__(self, other: "SelfPlayTotals") -> "SelfPlayTotals":
        return SelfPlayTotals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def search_seconds(self) -> float:
        """Seconds in the searches' own work: the simulator's, less its waits for evaluations."""
        return self.simulator_seconds - self.wait_seconds


def totals_of(selfplay: SelfPlay) -> SelfPlayTotals:
    """One SelfPlay's totals now (in a worker: `network` is its client's view, the waits)."""
    simulator = selfplay.search.simulator
    network = replace(simulator.evaluator.stats)
    return SelfPlayTotals(selfplay.moves, selfplay.cheap_moves, network, simulator.seconds, simulator.leaf_seconds,
                          network.seconds)


class SelfPlayDriver(Protocol):
    processes: int  # processes that search

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        """Plays until `until()` is true (asked between moves), yielding each game as it ends;
        when the iterator is exhausted, every game in progress is paused between two moves."""
        ...

    def counters(self) -> SelfPlayTotals: ...

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

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        while not until():
            yield from self.selfplay.step()

    def counters(self) -> SelfPlayTotals:
        return totals_of(self.selfplay)

    def state_dict(self) -> dict:
        return self.selfplay.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.selfplay.load_state_dict(state)

    def close(self) -> None:
        pass
