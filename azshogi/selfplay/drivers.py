"""How the loop runs self-play: the `SelfPlayDriver` interface, what it counts (`SelfPlayTotals`),
and the in-process driver. `InProcessSelfPlay` steps one SelfPlay in the main process;
`WorkerSelfPlay` (workers.py) runs SelfPlays in worker processes around one inference server;
`ClusterSelfPlay` (cluster.py) runs either on each node of a Ray cluster. `local_driver`
(local.py) builds one of the first two from the settings, for the main process or for a cluster's
node."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Protocol

from azshogi.config import SearchKind
from azshogi.selfplay.actors import SelfPlay
from azshogi.shogi.game_record import SelfPlayGame
from azshogi.shogi.network_io import EvaluatorTotals

if TYPE_CHECKING:
    from azshogi.config import Config


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
    idle_seconds: float = 0.0  # a worker's wall time with all its groups waiting for evaluations (workers only)
    # Resignation (resignation.Resignation), counted as games finish: games resigned; games played out
    # past a would-be resignation; of which, false resignations (the would-be resigner did not lose).
    resigned: int = 0
    resign_playouts: int = 0
    false_resigns: int = 0

    def __sub__(self, other: "SelfPlayTotals") -> "SelfPlayTotals":
        return SelfPlayTotals(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def __add__(self, other: "SelfPlayTotals") -> "SelfPlayTotals":
        return SelfPlayTotals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def false_resign_rate(self) -> float:
        """False resignations among the games played out past a would-be resignation (nan: none)."""
        return self.false_resigns / self.resign_playouts if self.resign_playouts else float("nan")

    @property
    def search_seconds(self) -> float:
        """Seconds in the searches' own work: the simulator's, less its waits for evaluations."""
        return self.simulator_seconds - self.wait_seconds


def totals_of(selfplay: SelfPlay) -> SelfPlayTotals:
    """One SelfPlay's totals now (in a worker: `network` is its client's view, the waits)."""
    simulator = selfplay.search.simulator
    network = replace(simulator.evaluator.stats)
    return SelfPlayTotals(selfplay.moves, selfplay.cheap_moves, network, simulator.seconds, simulator.leaf_seconds,
                          network.seconds, resigned=selfplay.resigned, resign_playouts=selfplay.resign_playouts,
                          false_resigns=selfplay.false_resigns)


@dataclass
class DriverStatus:
    """What a driver says about its processes beyond the totals: a few words for the progress
    line ("" for the drivers on one machine; `short` for a narrow terminal), figures for
    TensorBoard (selfplay/driver/), and the games in progress where they are not the settings'
    selfplay.num_actors (a cluster's nodes together; None: those)."""

    line: str = ""
    scalars: dict[str, float] = field(default_factory=dict)
    short: str = ""
    playing: Optional[int] = None


class SelfPlayDriver(Protocol):
    processes: int  # processes that search

    def start(self) -> None:
        """Starts what `play` needs (processes, a cluster's nodes), once, so that a phase's time
        counts no start-up; `play` starts them as well where this was not called."""
        ...

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        """Plays until `until()` is true (asked between moves), yielding each game as it ends;
        when the iterator is exhausted, every game in progress is paused between two moves."""
        ...

    def totals(self) -> SelfPlayTotals: ...

    def state_dict(self) -> dict:
        """The games in progress (SelfPlay.state_dict's format), while paused."""
        ...

    def load_state_dict(self, state: dict) -> None: ...

    def status(self) -> DriverStatus: ...

    def set_resign_threshold(self, threshold: float) -> None:
        """Resigns below `threshold` from the next move on (the run's automatic threshold), in
        every process, those started later included; while paused."""
        ...

    def close(self) -> None: ...


class InProcessSelfPlay:
    """selfplay.num_workers=0: one SelfPlay, stepped in the main process (exactly reproducible)."""

    processes = 1

    def __init__(self, selfplay: SelfPlay):
        self.selfplay = selfplay

    def start(self) -> None:
        pass

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        while not until():
            yield from self.selfplay.step()

    def totals(self) -> SelfPlayTotals:
        return totals_of(self.selfplay)

    def state_dict(self) -> dict:
        return self.selfplay.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.selfplay.load_state_dict(state)

    def status(self) -> DriverStatus:
        return DriverStatus()

    def set_resign_threshold(self, threshold: float) -> None:
        self.selfplay.set_resign_threshold(threshold)

    def close(self) -> None:
        pass


def machine_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def leaves_per_actor(cfg: "Config") -> int:
    """Leaves an actor's search asks the network for at once: one, or several with PUCT's
    virtual loss."""
    return cfg.search.leaves_per_step if cfg.search.kind == SearchKind.puct else 1


def groups_per_worker(num_actors: int, num_workers: int, worker_groups: int) -> int:
    """The groups of games each worker keeps: selfplay.worker_groups, at most the games of the
    smallest worker."""
    return max(1, min(worker_groups, num_actors // num_workers))


def selfplay_batch(cfg: "Config") -> int:
    """Positions in a self-play forward pass: the leaves of the games searched together between
    two forward passes — all of them, or a G-th with G groups taking turns (in process: the
    search threads; with workers: each worker's groups, whose requests the server gathers)."""
    sp = cfg.selfplay
    if sp.num_workers > 0:
        groups = groups_per_worker(sp.num_actors, sp.num_workers, sp.worker_groups)
    else:
        groups = sp.search_threads
    return -(-sp.num_actors // groups) * leaves_per_actor(cfg)


def server_batch(cfg: "Config") -> int:
    """The largest forward pass of self-play's evaluator (with workers: the inference server's)."""
    sp, batch = cfg.selfplay, selfplay_batch(cfg)
    return min(batch, sp.server_max_batch) if sp.num_workers and sp.server_max_batch else batch

