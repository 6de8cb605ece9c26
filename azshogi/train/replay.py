"""The replay buffer: a window of the most recent self-play positions, stored compactly.

Per position: the 32-byte hcp, the game result and the search's root value from the side to
move's view, the game id and ply, and a sparse policy target (label, probability) of variable
length. Positions live in one ring and policy entries in another; adding past either ring's
capacity evicts the oldest positions. Features are decoded from the hcp when a batch is sampled.

Each position also has a surprise (train/surprise.py), NaN until it is scored: with a surprise
weight w, a batch's rows are each drawn in proportion to it with probability w, else uniformly.

In memory a position takes 57 bytes plus room for ENTRIES_PER_POSITION policy entries of 4 bytes
(313 bytes per position of capacity). On disk, a run's replay store holds the positions
(47 bytes each plus 4 per policy entry; formats/replay_store.py), and checkpoints only name the
segments their window spans (`StoredReplay`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import cshogi
import numpy as np

from azshogi.formats import checkpoint as ckpt
from azshogi.formats.dlshogi import load_positions
from azshogi.formats.files import DataFormatError
from azshogi.formats.paths import replay_store_of
from azshogi.formats.replay_store import ReplayStore, ReplayStoreError
from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions

# Room for policy entries per position: improved-policy targets keep about 10-60 moves above
# the probability floor; positions are evicted early if they need more on average.
ENTRIES_PER_POSITION = 64


@dataclass
class Batch:
    """features1 (B, 62, 9, 9), features2 (B, 57, 9, 9), policy (B, 2187) target distribution,
    result (B,) in {-1, 0, 1}, root_value (B,) in [-1, 1]; all float32, numpy arrays (from this
    buffer) or tensors on the training device (from train/device_replay.py).

    Asked for (`opponent=True`, model.opponent_policy): opponent_policy (B, 2187), the policy
    target of the position after each one in its game (the opponent's reply), turned into the
    side to move's board (features.OPPONENT_LABELS), and opponent_weight (B,), 1 where that
    position is in the window and 0 where it is not (its row of opponent_policy is then 0)."""

    features1: Any
    features2: Any
    policy: Any
    result: Any
    root_value: Any
    opponent_policy: Any = None
    opponent_weight: Any = None


class ReplayBuffer:
    """Ring arrays of positions and of policy entries. Positions are numbered from the run's start
    (absolute indices): the live window is [begin, end), kept in slots index % capacity; its
    policy entries are [entry_begin, entry_end) of the entry stream, in slots % entry_capacity."""

    def __init__(self, capacity: int, entries_per_position: int = ENTRIES_PER_POSITION):
        self.allocations = 0  # windows allocated (restore() makes a new one): a device copy's cue
        self._allocate(capacity, entries_per_position)
        self._board = cshogi.Board()

    def _allocate(self, capacity: int, entries_per_position: int) -> None:
        """An empty window of `capacity` positions."""
        self.capacity = capacity
        self.entry_capacity = capacity * entries_per_position
        self.hcps = np.zeros((capacity, 32), np.uint8)
        self.results = np.zeros(capacity, np.int8)
        self.root_values = np.zeros(capacity, np.float16)
        self.game_ids = np.zeros(capacity, np.int64)
        self.plies = np.zeros(capacity, np.int16)
        self.entry_start = np.zeros(capacity, np.int64)  # absolute entry index
        self.entry_count = np.zeros(capacity, np.int32)
        self.surprise = np.full(capacity, np.nan, np.float16)  # train/surprise.py; NaN: not scored
        self._surprise_cdf: Optional[np.ndarray] = None  # the window's cumulative surprise, until it changes
        self.labels = np.zeros(self.entry_capacity, np.int16)
        self.probs = np.zeros(self.entry_capacity, np.float16)
        self.begin = self.end = 0
        self.entry_begin = self.entry_end = 0
        self.allocations += 1

    def __len__(self) -> int:
        return self.end - self.begin

    @property
    def total_added(self) -> int:
        """Positions added since the run began (the absolute index of the next one)."""
        return self.end

    def extend(self, block: TrainingPositions) -> None:
        """Adds positions at the end of the window. The oldest positions leave when either ring
        is full: the window becomes the longest suffix of (window + block) that fits both rings,
        which is what adding the positions one at a time would leave."""
        n = len(block)
        if n == 0:
            return
        counts = block.entry_counts.astype(np.int64)
        if int(counts.max()) > self.entry_capacity:
            raise ValueError(f"a policy target with {int(counts.max())} entries exceeds the buffer's entry capacity")
        starts = self.entry_end + np.cumsum(counts) - counts  # absolute entry index of each new position
        new_end, new_entry_end = self.end + n, self.entry_end + int(counts.sum())

        def entry_start(k: int) -> int:  # of the position with absolute index k, live or new
            return int(starts[k - self.end]) if k >= self.end else int(self.entry_start[k % self.capacity])

        # The first position kept: the smallest k >= max(begin, new_end - capacity) whose entries
        # and those after it fit in the entry ring (entry starts grow with k: a binary search).
        lo, hi = max(self.begin, new_end - self.capacity), new_end - 1
        need = new_entry_end - self.entry_capacity
        while lo < hi:
            mid = (lo + hi) // 2
            if entry_start(mid) >= need:
                hi = mid
            else:
                lo = mid + 1
        keep = max(lo, self.end) - self.end  # the first new position written
        slots = np.arange(self.end + keep, new_end) % self.capacity
        self.hcps[slots] = block.hcps[keep:]
        self.results[slots] = block.results[keep:]
        self.root_values[slots] = block.root_values[keep:]
        self.plies[slots] = block.plies[keep:]
        self.game_ids[slots] = block.game_ids[keep:]
        self.entry_start[slots] = starts[keep:]
        self.entry_count[slots] = counts[keep:]
        self.surprise[slots] = np.nan
        self._surprise_cdf = None
        skipped = int(starts[keep]) - self.entry_end  # entries of new positions that did not fit
        where = np.arange(int(starts[keep]), new_entry_end) % self.entry_capacity
        self.labels[where] = block.labels[skipped:]
        self.probs[where] = block.probs[skipped:]
        self.entry_begin = entry_start(lo)
        self.begin, self.end, self.entry_end = lo, new_end, new_entry_end

    def positions(self, start: int, stop: int) -> TrainingPositions:
        """Positions [start, stop) (absolute indices inside the live window), oldest first."""
        if not self.begin <= start <= stop <= self.end:
            raise ValueError(f"positions [{start}, {stop}) are not all in the window [{self.begin}, {self.end})")
        if start == stop:
            return TrainingPositions.empty()
        slots = np.arange(start, stop) % self.capacity
        last = slots[-1]
        where = np.arange(int(self.entry_start[slots[0]]),
                          int(self.entry_start[last]) + int(self.entry_count[last])) % self.entry_capacity
        return TrainingPositions(self.hcps[slots], self.results[slots], self.root_values[slots], self.plies[slots],
                         self.game_ids[slots], self.entry_count[slots].astype(np.int64), self.labels[where],
                         self.probs[where])

    def restore(self, first: int, block: TrainingPositions) -> None:
        """Replaces the window with `block`, numbered from `first`; if this buffer is smaller than
        the block, the newest positions are kept."""
        self._allocate(self.capacity, self.entry_capacity // self.capacity)
        self.begin = self.end = first
        self.extend(block)

    def resize(self, capacity: int) -> None:
        """A window of `capacity` positions (a stage's replay.capacity), holding the newest of the
        live positions that fit, numbered as before, with their surprise."""
        if capacity != self.capacity:
            block, first = self.positions(self.begin, self.end), self.begin
            surprise = self.window_surprise()
            self._allocate(capacity, self.entry_capacity // self.capacity)
            self.begin = self.end = first
            self.extend(block)
            self.set_surprise(np.arange(self.end - len(surprise), self.end), surprise)

    # --- surprise (train/surprise.py) ---

    def window_surprise(self) -> np.ndarray:
        """(N,) float16 (as a checkpoint keeps it): the live positions' surprise, oldest first (NaN: not
        scored)."""
        return self.surprise[np.arange(self.begin, self.end) % self.capacity]

    def set_surprise(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Sets the surprise of the positions with absolute `indices`; those before the window
        are left out."""
        indices, values = np.asarray(indices, np.int64), np.asarray(values, np.float16)
        if len(indices) and indices.max() >= self.end:
            raise ValueError(f"surprise for position {indices.max()}, past the window's end {self.end}")
        live = indices >= self.begin
        self.surprise[indices[live] % self.capacity] = values[live]
        self._surprise_cdf = None

    def unscored(self) -> np.ndarray:
        """The absolute indices of the live positions without a surprise yet, oldest first."""
        return self.begin + np.flatnonzero(np.isnan(self.window_surprise()))

    def sample_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform over the live window; ring slots (B,)."""
        if len(self) == 0:
            raise ValueError("the replay buffer is empty")
        return (self.begin + rng.integers(0, len(self), size=batch_size)) % self.capacity

    def next_positions(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The opponent's reply to each position in ring `slots` (B,): the ring slots of the
        positions after them, and (B,) bool whether that is the next position of the same game.
        A game's positions are stored one after another, so it is the next slot when that is in
        the window and holds the same game at the next ply; not at a game's end, the window's
        end, or a gap (a ply not recorded: a cheap search, a random opening ply)."""
        slots = np.asarray(slots, np.int64)
        after = (slots + 1) % self.capacity
        index = self.begin + (slots - self.begin) % self.capacity  # the positions' absolute indices
        same = (self.game_ids[after] == self.game_ids[slots]) & (self.plies[after] == self.plies[slots] + 1)
        return after, (index + 1 < self.end) & same

    def surprise_indices(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Ring slots (B,) drawn in proportion to the live positions' surprise (unscored ones
        count as 0); uniform if none has any."""
        if self._surprise_cdf is None:  # extend, restore and set_surprise drop it
            weights = np.nan_to_num(self.window_surprise().astype(np.float64), nan=0.0)
            self._surprise_cdf = np.cumsum(np.maximum(weights, 0.0))
        cdf = self._surprise_cdf
        if not len(cdf) or cdf[-1] <= 0:
            return self.sample_indices(batch_size, rng)
        picks = np.searchsorted(cdf, rng.random(batch_size) * cdf[-1], side="right")
        return (self.begin + np.minimum(picks, len(cdf) - 1)) % self.capacity

    def draw(self, batch_size: int, rng: np.random.Generator, mirror: bool = False,
             surprise_weight: float = 0.0) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """A minibatch's ring slots and with `mirror` the rows to give as mirror images (each with
        probability 1/2, drawn from `rng` after the positions). Each row is drawn uniformly from
        the window, or with probability `surprise_weight` in proportion to the positions'
        surprise (`surprise_indices`); 0 draws exactly what uniform sampling draws."""
        slots = self.sample_indices(batch_size, rng)
        if surprise_weight > 0:
            by_surprise = rng.random(batch_size) < surprise_weight
            slots = np.where(by_surprise, self.surprise_indices(batch_size, rng), slots)
        return slots, rng.random(batch_size) < 0.5 if mirror else None

    def sample(self, batch_size: int, rng: np.random.Generator, mirror: bool = False,
               opponent: bool = False, surprise_weight: float = 0.0) -> Batch:
        """A minibatch drawn from the window (`draw`), as a training batch."""
        return self.gather(*self.draw(batch_size, rng, mirror, surprise_weight), opponent=opponent)

    def gather(self, slots: np.ndarray, mirrored: Optional[np.ndarray] = None, opponent: bool = False) -> Batch:
        """The positions in `slots` as a training batch; `mirrored` (B,) bool: the rows to give
        as their mirror images (features.MIRROR_LABELS: planes and policy targets reflected);
        `opponent`: with the opponent's replies (Batch.opponent_policy)."""
        n = len(slots)
        f1, f2 = features.allocate(n)
        features.write_from_hcps(self.hcps[slots], f1, f2, self._board)
        flip = mirrored if mirrored is not None and mirrored.any() else None
        policy = self._policies(slots, None, flip)
        if flip is not None:
            f1[flip] = features.mirror_planes(f1[flip])
        batch = Batch(f1, f2, policy, self.results[slots].astype(np.float32),
                      self.root_values[slots].astype(np.float32))
        if opponent:
            after, has = self.next_positions(slots)
            batch.opponent_policy = self._policies(after, has, flip, features.OPPONENT_LABELS)
            batch.opponent_weight = has.astype(np.float32)
        return batch

    def _policies(self, slots: np.ndarray, keep: Optional[np.ndarray], flip: Optional[np.ndarray],
                  relabel: Optional[np.ndarray] = None) -> np.ndarray:
        """(B, 2187) float32: the policy targets of `slots`, normalised, rows not `keep` zero
        (None: every row kept), their labels mapped by `relabel` and rows `flip` mirrored (the two
        maps commute)."""
        n = len(slots)
        policy = np.zeros((n, features.NUM_LABELS), np.float32)
        counts = self.entry_count[slots].astype(np.int64)
        if keep is not None:
            counts = np.where(keep, counts, 0)
        rows = np.repeat(np.arange(n), counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        where = (np.repeat(self.entry_start[slots], counts) + within) % self.entry_capacity
        labels = self.labels[where].astype(np.int64)
        np.add.at(policy, (rows, labels if relabel is None else relabel[labels]), self.probs[where].astype(np.float32))
        policy /= np.maximum(policy.sum(axis=1, keepdims=True), 1e-12)
        if flip is not None:
            policy[flip] = policy[flip][:, features.MIRROR_LABELS]  # an involution: its own inverse
        return policy


class StoredReplay:
    """A run's replay buffer kept in its replay store across checkpoints (formats/replay_store.py):
    `checkpoint()` appends the positions added since the previous one as one segment and returns
    the checkpoint's small reference; `restore()` reads a checkpoint's window back; `prune()`
    deletes the segments no kept checkpoint refers to."""

    def __init__(self, buffer: ReplayBuffer, store: ReplayStore):
        self.buffer, self.store = buffer, store
        self.segments: list[dict] = []  # this run's segments that hold live positions, oldest first
        self.stored_end = 0  # the live positions before it are in `segments`
        self._references: dict = {}  # checkpoint file -> (its stat, the segment files it names)

    def checkpoint(self) -> dict:
        b = self.buffer
        start = max(self.stored_end, b.begin)
        if start < b.end:
            self.segments.append(self.store.write(b.positions(start, b.end), start))
        self.stored_end = b.end
        self.segments = [s for s in self.segments if s["first"] + s["count"] > b.begin]
        reference = {"begin": b.begin, "end": b.end, "segments": [dict(s) for s in self.segments]}
        surprise = b.window_surprise()
        if len(surprise) and not np.isnan(surprise).all():  # scored (train.surprise_weight > 0)
            reference["surprise"] = surprise
        return reference

    def restore(self, state: dict, checkpoint_file: Path, skip_damaged: bool = False) -> Optional[str]:
        """Reads the window a checkpoint file names (from the store beside it, which may be
        another run's: then the next checkpoint stores the whole window in this run's store).
        skip_damaged: a damaged or missing segment drops it and the window's older positions
        (else ReplayStoreError); what was dropped, or None."""
        begin, end = int(state["begin"]), int(state["end"])
        own, dropped = False, None
        if "positions" in state:  # an upgraded format-1 checkpoint holds its window inline
            block = state["positions"]
        else:
            store = ReplayStore(replay_store_of(checkpoint_file))
            while True:
                try:
                    block = store.read(state["segments"], begin, end)
                    break
                except ReplayStoreError as e:
                    damaged = [s for s in state["segments"] if str(s["file"]) == e.file]
                    after = int(damaged[0]["first"]) + int(damaged[0]["count"]) if damaged else end
                    if not skip_damaged or after >= end:  # the newest segment: no window would be left
                        raise
                    begin = max(begin, after)
                    dropped = (f"replay.skip_damaged: the window starts after {e.file} (damaged or missing): "
                               f"{begin - int(state['begin']):,} of its {end - int(state['begin']):,} positions "
                               f"left out")
            own = store.directory.resolve() == self.store.directory.resolve()
        self.buffer.restore(begin, block)
        if "surprise" in state and len(self.buffer):  # the window's surprise, oldest first (begin..end)
            surprise = np.asarray(state["surprise"], np.float16)[-len(self.buffer):]
            self.buffer.set_surprise(np.arange(self.buffer.end - len(surprise), self.buffer.end), surprise)
        self.segments = [dict(s) for s in state["segments"] if int(s["first"]) + int(s["count"]) > begin] if own else []
        self.stored_end = end if own else self.buffer.begin
        return dropped

    def written(self, checkpoint_file: Path, reference: dict) -> None:
        """Notes the reference a checkpoint file was written with (`prune` need not read it)."""
        stat = Path(checkpoint_file).stat()
        self._references[Path(checkpoint_file)] = ((stat.st_mtime_ns, stat.st_size),
                                                   {str(s["file"]) for s in reference["segments"]})

    def prune(self, checkpoint_files: Sequence[Path]) -> None:
        """Deletes the segments none of `checkpoint_files` (the run's kept ones) refers to; keeps
        everything when one of them cannot be read."""
        kept = {Path(p) for p in checkpoint_files}
        self._references = {p: r for p, r in self._references.items() if p in kept}  # not every one ever written
        referenced: set = set()
        for path in kept:
            files = self._referenced_by(path)
            if files is None:
                return
            referenced |= files
        self.store.prune(referenced)

    def _referenced_by(self, path: Path):
        try:
            stat = path.stat()
            key = (stat.st_mtime_ns, stat.st_size)
            if path not in self._references or self._references[path][0] != key:
                replay = ckpt.load(path, mmap=True).get("replay", {})
                self._references[path] = (key, {str(s["file"]) for s in replay.get("segments", [])})
        except (OSError, ckpt.CheckpointError):
            return None
        return self._references[path][1]


# --- filling a buffer from dlshogi's files ---

def load_buffer(paths: Sequence[str | Path]) -> ReplayBuffer:
    """A replay buffer holding exactly the training positions of the files."""
    games = load_positions(paths)
    positions = sum(len(g) for g in games)
    if positions == 0:
        raise DataFormatError(f"no training positions in {', '.join(str(p) for p in paths)}")
    entries = sum(len(g.labels) for g in games)
    buffer = ReplayBuffer(positions, max(1, math.ceil(entries / positions)))
    for game in games:
        buffer.extend(game)
    return buffer


def seed_buffer(buffer: ReplayBuffer, paths: Sequence[str | Path]) -> int:
    """Adds the files' positions to a replay buffer (the newest `capacity` stay); returns how
    many positions were read."""
    games = load_positions(paths)
    for game in games:
        buffer.extend(game)
    return sum(len(g) for g in games)
