"""The replay buffer: a window of the most recent self-play positions, stored compactly.

Per position: the 32-byte hcp, the game result and the search's root value from the side to
move's view, the game id and ply, and a sparse policy target (label, probability) of variable
length. Positions live in one ring and policy entries in another; adding past either ring's
capacity evicts the oldest positions. Features are decoded from the hcp when a batch is sampled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import cshogi
import numpy as np
import torch

from azshogi.formats.dlshogi import DataFormatError, load_records
from azshogi.shogi import features
from azshogi.shogi.game_record import GameRecord

# Room for policy entries per position: improved-policy targets keep about 10-60 moves above
# the probability floor; positions are evicted early if they need more on average.
ENTRIES_PER_POSITION = 64


@dataclass
class Batch:
    """features1 (B, 62, 9, 9), features2 (B, 57, 9, 9), policy (B, 2187) target distribution,
    result (B,) in {-1, 0, 1}, root_value (B,) in [-1, 1]; all numpy float32."""

    features1: np.ndarray
    features2: np.ndarray
    policy: np.ndarray
    result: np.ndarray
    root_value: np.ndarray


class ReplayBuffer:
    def __init__(self, capacity: int, entries_per_position: int = ENTRIES_PER_POSITION):
        self.capacity = capacity
        self.entry_capacity = capacity * entries_per_position
        self.hcps = np.zeros((capacity, 32), np.uint8)
        self.results = np.zeros(capacity, np.int8)
        self.root_values = np.zeros(capacity, np.float16)
        self.game_ids = np.zeros(capacity, np.int64)
        self.plies = np.zeros(capacity, np.int16)
        self.entry_start = np.zeros(capacity, np.int64)  # absolute entry index
        self.entry_count = np.zeros(capacity, np.int32)
        self.labels = np.zeros(self.entry_capacity, np.int16)
        self.probs = np.zeros(self.entry_capacity, np.float16)
        # Absolute counters: live positions are [begin, end), live entries [entry_begin, entry_end).
        self.begin = self.end = 0
        self.entry_begin = self.entry_end = 0
        self.total_added = 0
        self._board = cshogi.Board()

    def __len__(self) -> int:
        return self.end - self.begin

    def _evict_one(self) -> None:
        self.begin += 1
        if self.begin < self.end:
            self.entry_begin = int(self.entry_start[self.begin % self.capacity])
        else:
            self.entry_begin = self.entry_end

    def add_game(self, game: GameRecord) -> None:
        for i in range(len(game)):
            lo, hi = int(game.policy_offsets[i]), int(game.policy_offsets[i + 1])
            count = hi - lo
            if count > self.entry_capacity:
                raise ValueError(f"a policy target with {count} entries exceeds the buffer's entry capacity")
            while len(self) >= self.capacity or self.entry_end + count - self.entry_begin > self.entry_capacity:
                self._evict_one()
            slot = self.end % self.capacity
            self.hcps[slot] = game.hcps[i]
            self.results[slot] = game.results[i]
            self.root_values[slot] = game.root_values[i]
            self.game_ids[slot] = game.game_id
            self.plies[slot] = game.plies[i]
            self.entry_start[slot] = self.entry_end
            self.entry_count[slot] = count
            where = (self.entry_end + np.arange(count)) % self.entry_capacity
            self.labels[where] = game.labels[lo:hi]
            self.probs[where] = game.probs[lo:hi]
            self.entry_end += count
            self.end += 1
            self.total_added += 1

    def sample_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform over the live window; ring slots (B,)."""
        if len(self) == 0:
            raise ValueError("the replay buffer is empty")
        return (self.begin + rng.integers(0, len(self), size=batch_size)) % self.capacity

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        return self.gather(self.sample_indices(batch_size, rng))

    def gather(self, slots: np.ndarray) -> Batch:
        n = len(slots)
        f1, f2 = features.allocate(n)
        features.write_from_hcps(self.hcps[slots], f1, f2, self._board)
        policy = np.zeros((n, features.NUM_LABELS), np.float32)
        counts = self.entry_count[slots].astype(np.int64)
        rows = np.repeat(np.arange(n), counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        where = (np.repeat(self.entry_start[slots], counts) + within) % self.entry_capacity
        np.add.at(policy, (rows, self.labels[where].astype(np.int64)), self.probs[where].astype(np.float32))
        policy /= np.maximum(policy.sum(axis=1, keepdims=True), 1e-12)
        return Batch(f1, f2, policy, self.results[slots].astype(np.float32),
                     self.root_values[slots].astype(np.float32))

    # --- persistence: plain tensors, loadable with torch.load(weights_only=True) ---

    def state_dict(self) -> dict:
        """The live window in order (oldest first)."""
        slots = (self.begin + np.arange(len(self))) % self.capacity
        counts = self.entry_count[slots].astype(np.int64)
        starts = self.entry_start[slots]
        where = (np.repeat(starts, counts) + np.arange(counts.sum())
                 - np.repeat(np.cumsum(counts) - counts, counts)) % self.entry_capacity
        t = torch.from_numpy
        return {
            "hcps": t(self.hcps[slots].copy()), "results": t(self.results[slots].copy()),
            "root_values": t(self.root_values[slots].copy()), "game_ids": t(self.game_ids[slots].copy()),
            "plies": t(self.plies[slots].copy()), "entry_count": t(self.entry_count[slots].copy()),
            "labels": t(self.labels[where].copy()), "probs": t(self.probs[where].copy()),
            "total_added": self.total_added,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restores a saved window; if this buffer is smaller, the newest positions are kept."""
        self.__init__(self.capacity, self.entry_capacity // self.capacity)
        counts = state["entry_count"].numpy().astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        n = len(counts)
        per_game = {  # positions with their own policy slices, oldest first
            "hcps": state["hcps"].numpy(), "results": state["results"].numpy(),
            "root_values": state["root_values"].numpy().astype(np.float32), "plies": state["plies"].numpy(),
        }
        game_ids = state["game_ids"].numpy()
        labels, probs = state["labels"].numpy(), state["probs"].numpy()
        start = 0
        while start < n:  # add runs of equal game id as games
            stop = start + 1
            while stop < n and game_ids[stop] == game_ids[start]:
                stop += 1
            self.add_game(GameRecord(
                int(game_ids[start]), per_game["hcps"][start:stop], per_game["results"][start:stop],
                per_game["root_values"][start:stop], per_game["plies"][start:stop],
                offsets[start:stop + 1] - offsets[start], labels[offsets[start]:offsets[stop]],
                probs[offsets[start]:offsets[stop]]))
            start = stop
        self.total_added = int(state["total_added"])


# --- filling a buffer from dlshogi's files ---

def load_buffer(paths: Sequence[Path]) -> ReplayBuffer:
    """A replay buffer holding exactly the training positions of the files."""
    records = load_records(paths)
    positions = sum(len(r) for r in records)
    if positions == 0:
        raise DataFormatError(f"no training positions in {', '.join(str(p) for p in paths)}")
    entries = sum(len(r.labels) for r in records)
    buffer = ReplayBuffer(positions, max(1, math.ceil(entries / positions)))
    for record in records:
        buffer.add_game(record)
    return buffer


def seed_buffer(buffer: ReplayBuffer, paths: Sequence[Path]) -> int:
    """Adds the files' positions to a replay buffer (the newest `capacity` stay); returns how
    many positions were read."""
    records = load_records(paths)
    for record in records:
        buffer.add_game(record)
    return sum(len(r) for r in records)
