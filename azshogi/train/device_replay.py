"""The replay window on the training device: batches sampled, expanded and mirrored there.

A copy of a ReplayBuffer's window (train/replay.py, which stays the run's record: checkpoints,
the replay store) kept on the device in the buffer's own ring layout:

    packed       (capacity, 636) uint8   the position's feature planes, decoded from its hcp once
                                         when it arrives and packed (features.PACKED_BYTES)
    results      (capacity,) int8, root_values (capacity,) float16
    entry_start  (capacity,) int64, entry_count (capacity,) int32
    labels       (entry capacity,) int16, probs (entry capacity,) float16  the sparse policies

(651 bytes a position plus 4 a policy entry; the buffer's 313 bytes of capacity become 907.)
`refresh()` brings the copy up to the buffer's window: only the positions and policy entries
added since the last refresh cross (all of them after `restore`). `sample()` draws a batch with
the same random numbers, and so the same positions and mirror images, as ReplayBuffer.sample;
the host sends the slots (one small copy from pinned memory) and knows the batch's number of
policy entries from its own arrays, so nothing is read back from the device. The planes expand
on the device (nn/leaf_network.expand_planes, as the inference server's do), the mirror images
are made there (planes flipped along the files, labels mapped by features.MIRROR_LABELS), and
the dense policy targets are scattered there; the opponent's replies too (the host's
ReplayBuffer.next_positions says which slots hold them, the labels are mapped there).

`train.replay_window`: `device` keeps this copy; `host` assembles each batch on the CPU
(ReplayBuffer.sample); `auto` is `device` on CUDA when the window takes at most a quarter of the
GPU's memory, `host` otherwise. On the CPU the two train alike: with +experiment=cpu on the
2-core machine of docs/benchmarks.md (one thread, 2026-11-27) a step took 221 ms of CPU time
from the host and 206 ms from the device window (medians of three runs each, noise about
+-30 ms; the assembly alone 7.0 and 4.7 ms), and the host keeps the window in a third of the
memory with nothing to decode at resume.
"""
from __future__ import annotations

import cshogi
import numpy as np
import torch

from azshogi.config import ReplayWindow, TrainConfig
from azshogi.nn.host_sync import to_device
from azshogi.nn.leaf_network import bit_table, expand_planes
from azshogi.shogi import features
from azshogi.train.replay import Batch, ReplayBuffer

DECODE_CHUNK = 1024  # positions decoded to dense planes at a time (40 MB of float32)
BYTES_PER_POSITION = features.PACKED_BYTES + 1 + 2 + 8 + 4
BYTES_PER_ENTRY = 2 + 2


def device_bytes(buffer: ReplayBuffer) -> int:
    """The device memory a DeviceReplay of `buffer` takes."""
    return buffer.capacity * BYTES_PER_POSITION + buffer.entry_capacity * BYTES_PER_ENTRY


def on_device(cfg: TrainConfig, buffer: ReplayBuffer, device: torch.device) -> bool:
    """Whether train.replay_window puts `buffer`'s window on `device`."""
    if cfg.replay_window == ReplayWindow.auto:
        return device.type == "cuda" and \
            4 * device_bytes(buffer) <= torch.cuda.get_device_properties(device).total_memory
    return cfg.replay_window == ReplayWindow.device


class DeviceReplay:
    """A ReplayBuffer's window on `device`; `sample` and `gather` as the buffer's, returning a
    Batch of float32 tensors on the device."""

    def __init__(self, buffer: ReplayBuffer, device: torch.device):
        self.buffer, self.device = buffer, device
        self.table = bit_table(device)
        self.mirror_labels = torch.from_numpy(features.MIRROR_LABELS).to(device)
        self.opponent_labels = torch.from_numpy(features.OPPONENT_LABELS).to(device)
        self._board = cshogi.Board()  # decodes the positions as they arrive
        self._allocated = -1  # the buffer's allocation this copy follows
        self._end = self._entry_end = 0  # positions and policy entries copied, absolute indices

    def _allocate(self) -> None:
        b, d = self.buffer, self.device
        self.packed = torch.zeros((b.capacity, features.PACKED_BYTES), dtype=torch.uint8, device=d)
        self.results = torch.zeros(b.capacity, dtype=torch.int8, device=d)
        self.root_values = torch.zeros(b.capacity, dtype=torch.float16, device=d)
        self.entry_start = torch.zeros(b.capacity, dtype=torch.int64, device=d)
        self.entry_count = torch.zeros(b.capacity, dtype=torch.int32, device=d)
        self.labels = torch.zeros(b.entry_capacity, dtype=torch.int16, device=d)
        self.probs = torch.zeros(b.entry_capacity, dtype=torch.float16, device=d)
        self._allocated, self._end, self._entry_end = b.allocations, 0, 0

    def refresh(self) -> None:
        """Copies what the buffer gained since the last refresh (its whole window after a new
        allocation): the new positions' planes decoded and packed on the host."""
        b = self.buffer
        if self._allocated != b.allocations:
            self._allocate()
        if self._end == b.end and self._entry_end == b.entry_end:
            return
        start = max(self._end, b.begin)
        # One set of buffers for every chunk (make_input_features writes every plane): fresh
        # ones would cost four times the decoding in page faults.
        chunk = min(DECODE_CHUNK, b.end - start)
        f1, f2 = features.allocate(chunk)
        packed = np.empty((chunk, features.PACKED_BYTES), np.uint8)
        for first in range(start, b.end, DECODE_CHUNK):
            slots = np.arange(first, min(first + DECODE_CHUNK, b.end)) % b.capacity
            n = len(slots)
            features.write_from_hcps(b.hcps[slots], f1, f2, self._board)
            features.pack(f1[:n], f2[:n], packed[:n])
            index = self._to_device(slots)
            self.packed[index] = self._to_device(packed[:n])
            self.results[index] = self._to_device(b.results[slots])
            self.root_values[index] = self._to_device(b.root_values[slots])
            self.entry_start[index] = self._to_device(b.entry_start[slots])
            self.entry_count[index] = self._to_device(b.entry_count[slots])
        where = np.arange(max(self._entry_end, b.entry_begin), b.entry_end) % b.entry_capacity
        if len(where):
            index = self._to_device(where)
            self.labels[index] = self._to_device(b.labels[where])
            self.probs[index] = self._to_device(b.probs[where])
        self._end, self._entry_end = b.end, b.entry_end

    def _to_device(self, array: np.ndarray) -> torch.Tensor:
        return to_device(array, self.device)

    def sample(self, batch_size: int, rng: np.random.Generator, mirror: bool = False,
               opponent: bool = False, surprise_weight: float = 0.0) -> Batch:
        """ReplayBuffer.sample's positions and mirror images (the same draws from `rng`)."""
        return self.gather(*self.buffer.draw(batch_size, rng, mirror, surprise_weight), opponent=opponent)

    def gather(self, slots: np.ndarray, mirrored: np.ndarray | None = None, opponent: bool = False) -> Batch:
        """ReplayBuffer.gather on the device: the positions in ring `slots` (B,), `mirrored`
        (B,) bool the rows given as their mirror images, with `opponent` the opponent's replies.
        Refreshes the copy first if the buffer changed; then no host synchronisation."""
        self.refresh()
        n = len(slots)
        slots = np.asarray(slots, np.int64)
        flip_h = np.zeros(n, bool) if mirrored is None else np.asarray(mirrored, bool)
        # One transfer: slot * 2 + mirrored, and with `opponent` the slots of the next positions
        # after them (-1 where there is none: its row's weight 0).
        code = slots * 2 + flip_h
        if opponent:
            after, has = self.buffer.next_positions(slots)
            code = np.concatenate([code, np.where(has, after, -1)])
        code_d = self._to_device(code)
        s = code_d[:n] >> 1
        flip = None if mirrored is None else (code_d[:n] & 1).bool()
        x1, x2 = expand_planes(self.packed[s], self.table)
        if flip is not None:
            x1 = torch.where(flip[:, None, None, None], x1.flip(-2), x1)
        policy = self._policies(s, flip, None, int(self.buffer.entry_count[slots].sum()))
        batch = Batch(x1, x2, policy, self.results[s].float(), self.root_values[s].float())
        if opponent:
            has_d = code_d[n:] >= 0
            s_after = code_d[n:].clamp_min(0)
            entries = int(self.buffer.entry_count[after[has]].sum())  # known on the host: no read-back
            batch.opponent_policy = self._policies(s_after, flip, has_d, entries, self.opponent_labels)
            batch.opponent_weight = has_d.float()
        return batch

    def _policies(self, s: torch.Tensor, flip: torch.Tensor | None, keep: torch.Tensor | None,
                  entries: int, relabel: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 2187) float32 on the device: the normalised policy targets of ring slots `s`, rows
        `flip` mirrored, rows not `keep` zero, labels mapped by `relabel` (ReplayBuffer's);
        `entries`: their number of policy entries."""
        n = len(s)
        counts = self.entry_count[s].long()
        if keep is not None:
            counts = torch.where(keep, counts, 0)
        rows = torch.repeat_interleave(torch.arange(n, device=self.device), counts, output_size=entries)
        first = torch.cumsum(counts, 0) - counts  # each row's first entry in the batch
        # entry i of row r: the row's start in the ring, plus i - first[r]
        where = (torch.arange(entries, device=self.device) + (self.entry_start[s] - first)[rows]) \
            % self.buffer.entry_capacity
        labels = self.labels[where].long()
        if relabel is not None:
            labels = relabel[labels]
        if flip is not None:
            labels = torch.where(flip[rows], self.mirror_labels[labels], labels)
        policy = torch.zeros((n, features.NUM_LABELS), dtype=torch.float32, device=self.device)
        policy.view(-1).index_add_(0, rows * features.NUM_LABELS + labels, self.probs[where].float())
        return policy / policy.sum(dim=1, keepdim=True).clamp_min(1e-12)
