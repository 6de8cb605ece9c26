"""The network as the search uses it, on the device: packed leaves in, legal-move logits out.

`LeafNetwork` expands a LeafBatch's packed planes on the device (a 256 x 8 bit table), runs the
inference network, and gathers on the device the logits of each leaf's legal moves by label, so
that only those (in the network's own dtype: bf16 or fp16 under autocast, else float32) and the
win probabilities go back. `StandInNetwork` has the same inputs and outputs and does no work: it
answers at once (azshogi-bench's instant mode: everything around the network) or after a fixed
delay without holding the GIL (the delay mode: a GPU's forward pass as a CPU-only machine can
imitate it, to see whether self-play keeps such a device busy).

`DeviceRunner` moves batches between host and device: host buffers in page-locked memory on
CUDA, copies with non_blocking=True, and an event per launch, so that a caller can prepare the
next batch while the device works on this one. On the CPU the same calls run synchronously.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from azshogi.shogi import features

_WIRE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def wire_name(dtype: torch.dtype) -> str:
    """The name shogi/network_io.py's `to_float32` knows for a logits dtype."""
    return _WIRE_NAMES[dtype]


def bit_table(device: torch.device) -> torch.Tensor:
    """(256, 8) float32: the bits of each byte, most significant first (np.packbits' order)."""
    byte = torch.arange(256, dtype=torch.int32)
    return ((byte[:, None] >> torch.arange(7, -1, -1, dtype=torch.int32)) & 1).to(torch.float32).to(device)


def expand_planes(packed: torch.Tensor, table: torch.Tensor,
                  board_planes2: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed rows (B, 636) uint8 -> features1 (B, 62, 9, 9), features2 (B, 57, 9, 9) in the
    table's dtype, equal to make_input_features' planes. board_planes2=False: features2 as
    (B, 57, 1, 1), one value per plane (each is constant over the board)."""
    n = packed.shape[0]
    bits = torch.nn.functional.embedding(packed.long(), table).reshape(n, -1)
    planes1 = bits[:, :features.FEATURES1_PLANES * 81].reshape(n, features.FEATURES1_PLANES, 9, 9)
    start = features.PACKED1_BYTES * 8
    planes2 = bits[:, start:start + features.FEATURES2_PLANES].reshape(n, features.FEATURES2_PLANES, 1, 1)
    return planes1, (planes2.expand(n, features.FEATURES2_PLANES, 9, 9) if board_planes2 else planes2)


def gather_legal(policy: torch.Tensor, counts: torch.Tensor, labels: torch.Tensor, num_labels: int) -> torch.Tensor:
    """(L,) policy[row, label] for each label, rows repeated by their counts (no host sync)."""
    rows = torch.repeat_interleave(torch.arange(len(counts), device=policy.device), counts.long(),
                                   output_size=num_labels)
    return policy.reshape(-1)[rows * policy.shape[1] + labels.long()]


class LeafNetwork:
    """(packed, counts, labels, L) on the device -> (legal logits (L,) in `wire`, win
    probability (B,) float32), through an InferenceNet (the shared model's current weights).
    Batches above `max_batch` run as several forward passes."""

    def __init__(self, net, max_batch: Optional[int] = None):
        self.net, self.max_batch = net, max_batch
        # Planes made in the dtype the folded weights are held in (the plain model autocasts).
        self.table = bit_table(net.device).to(net.dtype if net.fold else torch.float32)
        self.wire = net.dtype if net.dtype != torch.float32 else torch.float32

    def __call__(self, packed, counts, labels, num_labels: int):
        # features2 stays (B, 57, 1, 1): the network's 1x1 convolution of it is broadcast.
        x1, x2 = expand_planes(packed, self.table, board_planes2=False)
        step = self.max_batch or len(x1)
        parts = [self.net(x1[i:i + step], x2[i:i + step]) for i in range(0, len(x1), step)]
        policy = parts[0][0] if len(parts) == 1 else torch.cat([p for p, _ in parts])
        value = parts[0][1] if len(parts) == 1 else torch.cat([v for _, v in parts])
        with torch.inference_mode():
            legal = gather_legal(policy, counts, labels, num_labels).to(self.wire)
            return legal, torch.sigmoid(value.float()).squeeze(1)


class StandInNetwork:
    """LeafNetwork's inputs and outputs without its work: logits 0 and win probability 0.5 from
    preallocated device buffers, after `delay_s` seconds of sleep (which releases the GIL, as a
    device's forward pass does), whatever the batch. Excludes the planes' expansion, the forward
    pass and the gather. delay_s = 0: the instant network."""

    def __init__(self, device: torch.device, wire: torch.dtype = torch.float32, delay_s: float = 0.0):
        self.device, self.wire, self.delay_s = device, wire, delay_s
        self._logits = torch.zeros(0, dtype=wire, device=device)
        self._values = torch.zeros(0, dtype=torch.float32, device=device)

    def __call__(self, packed, counts, labels, num_labels: int):
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        if len(self._logits) < num_labels or len(self._values) < len(packed):
            self._logits = torch.zeros(max(num_labels, 2 * len(self._logits)), dtype=self.wire, device=self.device)
            self._values = torch.full((max(len(packed), 2 * len(self._values)),), 0.5, device=self.device)
        return self._logits[:num_labels], self._values[:len(packed)]


@dataclass
class HostBuffers:
    """A batch's host side: inputs the search writes (numpy views) and outputs the device
    writes (torch tensors, logits in the wire dtype), page-locked on CUDA."""

    packed: np.ndarray  # (R, 636) uint8
    counts: np.ndarray  # (R,) int32
    labels: np.ndarray  # (R * MAX_LEGAL_MOVES,) int16
    inputs: tuple  # the same three as torch tensors
    logits: torch.Tensor  # (R * MAX_LEGAL_MOVES,) wire dtype
    values: torch.Tensor  # (R,) float32

    def logits_raw(self) -> np.ndarray:
        """The logits buffer as bytes (for copying the wire values as they are)."""
        return self.logits.view(torch.uint8).numpy()


class DeviceRunner:
    """Launches LeafNetwork-like calls on host buffers; `launch` returns at once on CUDA (the
    work is queued), `wait` blocks until a launch's outputs are in its host buffers."""

    def __init__(self, network, device: torch.device):
        self.network, self.device = network, device
        self.pinned = device.type == "cuda"

    @property
    def wire(self) -> torch.dtype:
        return self.network.wire

    def buffers(self, rows: int) -> HostBuffers:
        labels = rows * features.MAX_LEGAL_MOVES

        def host(shape, dtype):
            return torch.zeros(shape, dtype=dtype, pin_memory=self.pinned)

        inputs = (host((rows, features.PACKED_BYTES), torch.uint8), host(rows, torch.int32), host(labels, torch.int16))
        packed, counts, label_rows = (t.numpy() for t in inputs)
        return HostBuffers(packed, counts, label_rows, inputs, host(labels, self.wire), host(rows, torch.float32))

    def launch(self, buffers: HostBuffers, rows: int, num_labels: int):
        packed, counts, labels = (t[:n].to(self.device, non_blocking=True)
                                  for t, n in zip(buffers.inputs, (rows, rows, num_labels)))
        logits, values = self.network(packed, counts, labels, num_labels)
        buffers.logits[:num_labels].copy_(logits, non_blocking=True)
        buffers.values[:rows].copy_(values, non_blocking=True)
        if not self.pinned:
            return None
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))  # this thread's stream on our device
        return event

    @staticmethod
    def wait(handle) -> None:
        if handle is not None:
            handle.synchronize()
