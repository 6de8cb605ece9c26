"""The network's side of a search: positions as the network's input (`LeafBatch`), and what an
evaluator answers (`Evaluator`, with the `EvaluatorTotals` it keeps). Search code (search/) fills
a batch and asks an evaluator; nn/ and selfplay/ implement evaluators. numpy and
shogi/features.py only, no torch.

A search adds its leaves (board and legal moves) row by row; `seal()` then writes what the
evaluator reads, compactly:

    packed  (B, 636) uint8   each leaf's dlshogi planes as bits (shogi/features.py: `pack`)
    counts  (B,) int32       legal moves per leaf
    labels  (L,) int16       the policy labels of every leaf's legal moves, leaf after leaf

and `Evaluator.evaluate(batch) -> (legal-move logits, win probability)` answers with only what
the search reads: the logits of those L labels (flat, in the same order) and each leaf's win
probability. The search never knows whether the model sits in this process
(nn.evaluator.LocalEvaluator) or behind an inference server (selfplay.server.ClientEvaluator).
The three arrays above may live in memory the evaluator chose (`Evaluator.allocate`: shared
memory for an inference server, pinned memory for a GPU); the dense float planes are written in
this process only, into `features1`/`features2`.

Logits may travel in the network's own 16-bit dtype (bf16 or fp16 autocast computes them in it,
so nothing is lost); `to_float32` turns such raw values into what the search uses. Every
evaluator counts its calls, positions and seconds (`EvaluatorTotals`) for `perf/` figures.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Protocol

import cshogi
import numpy as np

from azshogi.shogi import features

# The dtypes logits may travel in, and the bytes each takes.
WIRE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def to_float32(raw: np.ndarray, wire: str) -> np.ndarray:
    """float32 values of logits stored raw (bytes or 16-bit words) in dtype `wire`."""
    if wire == "float32":
        return raw.view(np.float32).copy()
    if wire == "float16":
        return raw.view(np.float16).astype(np.float32)
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)  # bfloat16: the top half


class LeafBatch:
    """Up to `rows` leaves. packed, counts, labels: where the evaluator reads them (default: new
    arrays here); labels must hold rows x MAX_LEGAL_MOVES entries."""

    def __init__(self, rows: int, packed: np.ndarray | None = None, counts: np.ndarray | None = None,
                 labels: np.ndarray | None = None):
        self.capacity = rows
        self.packed = np.zeros((rows, features.PACKED_BYTES), np.uint8) if packed is None else packed
        self.counts = np.zeros(rows, np.int32) if counts is None else counts
        self.labels = np.zeros(rows * features.MAX_LEGAL_MOVES, np.int16) if labels is None else labels
        self.features1, self.features2 = features.allocate(rows)
        self.transport: object = None  # the evaluator's own state for this batch (its output buffers)
        self.clear()

    def clear(self) -> None:
        self.size = 0
        self.num_labels = 0
        self._moves: list = []
        self._turns: list = []
        self.moves = np.zeros(0, np.int64)  # after seal: every leaf's legal moves, flat

    def add(self, board: cshogi.Board, moves: list) -> int:
        """Appends a leaf (its features are written now); returns its row."""
        row = self.size
        if row >= self.capacity:
            raise ValueError(f"a leaf batch of {self.capacity} rows is full")
        features.write(board, self.features1, self.features2, row)
        self._moves.append(moves)
        self._turns.append(board.turn)
        self.size = row + 1
        return row

    def seal(self) -> None:
        """Packs the planes and writes the counts and labels: ready for `evaluate`."""
        k = self.size
        counts = np.fromiter(map(len, self._moves), np.int64, k)
        total = int(counts.sum())
        self.moves = np.fromiter(itertools.chain.from_iterable(self._moves), np.int64, total)
        self.labels[:total] = features.labels_of(self.moves, np.repeat(np.array(self._turns, np.int64), counts))
        self.counts[:k] = counts
        self.num_labels = total
        features.pack(self.features1[:k], self.features2[:k], self.packed[:k])

    @property
    def row_counts(self) -> np.ndarray:
        return self.counts[:self.size]

    def offsets(self) -> np.ndarray:
        """(B + 1,) where each leaf's moves start in the flat arrays."""
        out = np.zeros(self.size + 1, np.int64)
        np.cumsum(self.counts[:self.size], out=out[1:])
        return out


@dataclass
class EvaluatorTotals:
    """An evaluator's running totals since it was made; the difference of two snapshots
    describes a window.

    calls: batches evaluated. positions: the leaves in them. seconds: from each call's start to
    its answer (a forward pass; for a client of the inference server, the wait for it)."""

    calls: int = 0
    positions: int = 0
    seconds: float = 0.0

    def add(self, positions: int, seconds: float) -> None:
        """One batch of `positions` leaves, answered in `seconds`."""
        self.calls += 1
        self.positions += positions
        self.seconds += seconds

    def __sub__(self, other: "EvaluatorTotals") -> "EvaluatorTotals":
        return EvaluatorTotals(self.calls - other.calls, self.positions - other.positions,
                               self.seconds - other.seconds)

    def __add__(self, other: "EvaluatorTotals") -> "EvaluatorTotals":
        return EvaluatorTotals(self.calls + other.calls, self.positions + other.positions,
                               self.seconds + other.seconds)


class Evaluator(Protocol):
    stats: EvaluatorTotals

    def evaluate(self, batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        """A sealed batch of B leaves with L legal moves in all -> the policy logits of those
        moves, (L,) float32 in the batch's label order, and each leaf's side-to-move win
        probability, (B,) float32."""
        ...

    def allocate(self, rows: int) -> LeafBatch:
        """A batch the search fills in place, its arrays where this evaluator reads them."""
        ...
