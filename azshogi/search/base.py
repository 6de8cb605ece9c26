"""The one interface between search and the network: `Evaluator`.

Search code calls `evaluate(features1, features2) -> (policy_logits, win_probability)` on numpy
batches and never knows whether the model sits in this process (nn.evaluator.LocalEvaluator) or
behind an inference server (selfplay.server.ClientEvaluator). Every evaluator counts its calls,
positions and seconds for `perf/` figures. This module imports no torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class EvalStats:
    calls: int = 0
    positions: int = 0
    seconds: float = 0.0

    def reset(self) -> None:
        self.calls, self.positions, self.seconds = 0, 0, 0.0


class Evaluator(Protocol):
    stats: EvalStats

    def evaluate(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """features1 (B, 62, 9, 9), features2 (B, 57, 9, 9) float32 ->
        policy logits (B, 2187) float32, side to move's win probability (B,) float32."""
        ...

    def allocate(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Feature buffers the search fills in place (shared memory for a server)."""
        ...
