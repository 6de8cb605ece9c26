"""What a finished game leaves, one type per concept, so that self-play's games reach the replay
buffer, hcpe3, KIF and CSA without being re-shaped by hand:

    GameRecord         the game as played: moves, start position, how it ended, who won; what
                       KIF and CSA hold (formats/records.py writes one)
    TrainingPositions  training positions with their sparse policy targets, in stream order:
                       one game's (self-play, dlshogi's files) or a replay window's (the replay
                       buffer, the replay store's segments, checkpoints)
    SelfPlayGame       a finished self-play game: its record and its training positions; what
                       self-play yields, the loop's records take, and an hcpe3 file holds

Kept apart, because they are other things: a match's game (play/arena.MatchGame: a GameRecord
and the match's view of it, which player had which colour and why the game ended in words) and
an hcpe3 file's game as stored (formats/dlshogi.Hcpe3Game: its raw fields, checked by
replaying; its `record` is a GameRecord).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Optional, Sequence

import numpy as np

from azshogi.shogi.rules import Termination


@dataclass
class GameRecord:
    """A game as played (a kifu).

    moves: the moves in USI, from `start_sfen` (None: the initial position). termination: how
    it ended. winner: cshogi.BLACK, cshogi.WHITE, or None for a draw. started: when it began,
    if known (KIF's 開始日時, CSA's $START_TIME)."""

    moves: list
    termination: Termination
    winner: Optional[int] = None
    start_sfen: Optional[str] = None
    started: Optional[datetime] = None

    def __len__(self) -> int:
        return len(self.moves)


@dataclass
class TrainingPositions:
    """P training positions in stream order with E policy entries in all.

    hcps: (P, 32) uint8, cshogi's HuffmanCodedPos of each position.
    results: (P,) int8, the game's result from the side to move: +1, 0, -1.
    root_values: (P,) the search's root value from the side to move, in [-1, 1]: float32 as
        the search gave it (a game's), float16 as the replay buffer and store keep it.
    plies: (P,) int16, plies from the game's start to the position.
    game_ids: (P,) int64, the game each position comes from.
    entry_counts: (P,) int64, the policy entries of each position, which follow each other in
    labels: (E,) int16, dlshogi's move labels, and
    probs: (E,) their target probabilities (float32 or float16, as root_values).
    """

    hcps: np.ndarray
    results: np.ndarray
    root_values: np.ndarray
    plies: np.ndarray
    game_ids: np.ndarray
    entry_counts: np.ndarray
    labels: np.ndarray
    probs: np.ndarray

    def __len__(self) -> int:
        return len(self.entry_counts)

    @classmethod
    def of_game(cls, game_id: int, hcps: np.ndarray, results: np.ndarray, root_values: np.ndarray,
                plies: np.ndarray, entry_counts: np.ndarray, labels: np.ndarray,
                probs: np.ndarray) -> "TrainingPositions":
        """One game's positions, all with id `game_id`."""
        n = len(entry_counts)
        return cls(np.asarray(hcps, np.uint8).reshape(n, 32), np.asarray(results, np.int8), np.asarray(root_values),
                   np.asarray(plies, np.int16), np.full(n, game_id, np.int64), np.asarray(entry_counts, np.int64),
                   np.asarray(labels, np.int16), np.asarray(probs))

    @classmethod
    def empty(cls) -> "TrainingPositions":
        return cls(np.zeros((0, 32), np.uint8), np.zeros(0, np.int8), np.zeros(0, np.float16),
                   np.zeros(0, np.int16), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int16),
                   np.zeros(0, np.float16))

    @classmethod
    def concatenate(cls, blocks: Sequence["TrainingPositions"]) -> "TrainingPositions":
        if not blocks:
            return cls.empty()
        return cls(*(np.concatenate([getattr(b, f.name) for b in blocks]) for f in fields(cls)))

    def offsets(self) -> np.ndarray:
        """(P + 1,) int64: where each position's entries start in labels and probs."""
        return np.concatenate([[0], np.cumsum(self.entry_counts)]).astype(np.int64)

    def slice(self, start: int, stop: int) -> "TrainingPositions":
        """Positions [start, stop) with their policy entries."""
        offsets = self.offsets()
        lo, hi = int(offsets[start]), int(offsets[stop])
        return TrainingPositions(self.hcps[start:stop], self.results[start:stop], self.root_values[start:stop],
                                 self.plies[start:stop], self.game_ids[start:stop], self.entry_counts[start:stop],
                                 self.labels[lo:hi], self.probs[lo:hi])


@dataclass
class SelfPlayGame:
    """A finished self-play game: its id, its record (from the initial position) and its training
    positions (every move's, or with playout caps only the fully searched moves', float32)."""

    game_id: int
    record: GameRecord
    positions: TrainingPositions
    # On a cluster, the learner's weights version (its training steps) the game's last move was
    # played with: every move of a phase is played with that phase's version. None on one machine.
    weights_version: Optional[int] = None
    # The game as dlshogi's hcpe3 bytes, when the process that played it encoded it already (a
    # self-play worker: formats/dlshogi.encode_game), so that the main process need not.
    hcpe3: Optional[bytes] = None
    # A game played out past resignation (selfplay.resign_playout_share): where each side would
    # have resigned, (K, 2) float64 rows (threshold level, side) in game order
    # (selfplay/actors.resign_levels); None for the other games.
    resign_levels: Optional[np.ndarray] = None

    @property
    def length(self) -> int:
        """Moves played."""
        return len(self.record)
