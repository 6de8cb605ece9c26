"""The one interface between search and the network: `Evaluator`.

Search code fills a `LeafBatch` (search/batch.py: packed planes and the labels of each leaf's
legal moves) and calls `evaluate(batch) -> (legal-move logits, win probability)`; it never knows
whether the model sits in this process (nn.evaluator.LocalEvaluator) or behind an inference
server (selfplay.server.ClientEvaluator). Every evaluator counts its calls, positions and seconds
for `perf/` figures. This module imports no torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from azshogi.search.batch import LeafBatch


@dataclass
class EvalStats:
    calls: int = 0
    positions: int = 0
    seconds: float = 0.0

    def reset(self) -> None:
        self.calls, self.positions, self.seconds = 0, 0, 0.0

    def add(self, positions: int, seconds: float) -> None:
        self.calls += 1
        self.positions += positions
        self.seconds += seconds


class Evaluator(Protocol):
    stats: EvalStats

    def evaluate(self, batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        """A sealed batch of B leaves with L legal moves in all -> the policy logits of those
        moves, (L,) float32 in the batch's label order, and each leaf's side-to-move win
        probability, (B,) float32."""
        ...

    def allocate(self, rows: int) -> LeafBatch:
        """A batch the search fills in place, its arrays where this evaluator reads them."""
        ...
