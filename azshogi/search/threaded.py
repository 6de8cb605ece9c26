"""Several actor groups searched in parallel threads, so that one group's tree search (Python)
runs while another group's forward pass runs (PyTorch releases the GIL while it computes).

This is the two-groups-taking-turns scheme of dlshogi's self-play. Each group has its own
search (trees, feature buffers); they share the evaluator, whose forward passes are serialised
by its lock. Every actor keeps its own random stream, so the moves do not depend on grouping.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import cshogi
import numpy as np

from azshogi.search.result import BatchSearchResult


def _split(count: int, groups: int) -> list[slice]:
    bounds = np.linspace(0, count, groups + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def concatenate(results: Sequence[BatchSearchResult]) -> BatchSearchResult:
    """One result for all groups, root columns padded to the widest group."""
    width = max(r.edge_moves.shape[1] for r in results)

    def pad(name):
        return np.concatenate([np.pad(getattr(r, name), ((0, 0), (0, width - getattr(r, name).shape[1])))
                               for r in results])

    return BatchSearchResult(
        moves=np.concatenate([r.moves for r in results]),
        edge_moves=pad("edge_moves"), labels=pad("labels"),
        num_edges=np.concatenate([r.num_edges for r in results]),
        policy=pad("policy"), visits=pad("visits"),
        root_value=np.concatenate([r.root_value for r in results]),
    )


class SimulatorTotals:
    """The groups' simulators seen as one, for timing figures (their seconds overlap)."""

    def __init__(self, simulators):
        self.simulators = simulators
        self.evaluator = simulators[0].evaluator

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.simulators)

    @property
    def leaf_seconds(self) -> float:
        return sum(s.leaf_seconds for s in self.simulators)


class ThreadedSearch:
    def __init__(self, make_group_search, num_actors: int, threads: int):
        """make_group_search(n) -> a search for n actors (GumbelSearch or PuctSearch)."""
        self.slices = _split(num_actors, threads)
        self.searches = [make_group_search(s.stop - s.start) for s in self.slices]
        self.simulator = SimulatorTotals([s.simulator for s in self.searches])
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="azshogi-search")

    @property
    def num_simulations(self) -> int:
        return self.searches[0].num_simulations

    def run(self, boards: Sequence[cshogi.Board], plies: np.ndarray, rngs: Sequence[np.random.Generator],
            **kwargs) -> BatchSearchResult:
        """The groups' searches of their slices of the actors; keyword arguments given per actor
        (sample, simulations: arrays of length A) are sliced too, the others passed as they are."""
        num = self.slices[-1].stop
        if len(boards) != num:
            raise ValueError(f"{len(boards)} boards for a search of {num} actors")
        plies = np.asarray(plies)

        def part(value, s: slice):
            return value[s] if isinstance(value, np.ndarray) and value.shape[:1] == (num,) else value

        futures = [self.pool.submit(search.run, boards[s], plies[s], rngs[s],
                                    **{k: part(v, s) for k, v in kwargs.items()})
                   for search, s in zip(self.searches, self.slices)]
        return concatenate([f.result() for f in futures])
