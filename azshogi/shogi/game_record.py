"""A finished game's training positions: what self-play produces, the replay buffer stores and
dlshogi's hcpe3 files hold."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class GameRecord:
    """A finished game's positions, ready for the buffer (P positions, E policy entries).

    hcps: (P, 32) uint8; results: (P,) int8 (+1/0/-1 from the side to move); root_values: (P,)
    float32; plies: (P,) int16; policy_offsets: (P + 1,) int64 into labels/probs (E,).
    """

    game_id: int
    hcps: np.ndarray
    results: np.ndarray
    root_values: np.ndarray
    plies: np.ndarray
    policy_offsets: np.ndarray
    labels: np.ndarray
    probs: np.ndarray

    def __len__(self) -> int:
        return len(self.hcps)
