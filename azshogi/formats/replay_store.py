"""The replay store: a run's replay positions on disk, in append-only segment files.

A checkpoint does not hold the replay window itself (500,000 positions are about 90 MB to
serialize): each checkpoint first appends the positions that entered the buffer since the
previous one to the store as one segment file, then records which segments its window spans
(`{"begin", "end", "segments": [{"file", "first", "count"}, ...]}`). Positions are numbered in one
stream per run (`first` is the absolute index of a segment's first position), so a window is
read back from the tails and heads of the segments it overlaps. Segments no kept checkpoint
refers to are deleted (`ReplayStore.prune`).

The store lies beside the checkpoint files, in `<checkpoint_root>/<run>/replay/` (paths.py).

A segment file, `<first:012d>-<16 hex digits of its digest>.seg`, little-endian:

    offset  size      field
    0       8         magic b"AZREPLY1"
    8       8         first     u64, absolute index of its first position
    16      8         count     u64, positions P
    24      8         entries   u64, policy entries E
    32      32 P      hcps          u8 (P, 32), cshogi's HuffmanCodedPos
            1 P       results       i8, the game's result from the side to move: +1, 0, -1
            2 P       root_values   f16, the search's root value from the side to move
            2 P       plies         i16
            8 P       game_ids      i64
            2 P       entry_counts  u16, policy entries of each position, in order
            2 E       labels        i16, dlshogi's move labels
            2 E       probs         f16, their target probabilities
    end-16  16        BLAKE2b-128 of everything before it

That is 47 bytes per position and 4 per policy entry. The digest in the name makes a segment's
name stand for its content: two timelines of a run (a resume from an older checkpoint) never
share a name unless they share the bytes, and a checkpoint reads exactly the bytes it saved.
"""
from __future__ import annotations

import hashlib
import re
import struct
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np
from numpy.typing import DTypeLike

from azshogi.formats.files import atomic_writer
from azshogi.shogi.game_record import TrainingPositions

MAGIC = b"AZREPLY1"
_HEADER = struct.Struct("<8sQQQ")
_DIGEST_BYTES = 16
_NAME = re.compile(r"^(\d{12,})-([0-9a-f]{16})\.seg$")
MAX_ENTRIES_PER_POSITION = 65535  # u16 entry counts (a shogi position has at most 593 legal moves)


class ReplayStoreError(RuntimeError):
    """A segment file is missing, truncated or corrupt; the message names it (`file`: its name,
    where one segment is at fault)."""

    file: Optional[str] = None


# --- one segment file ---

def _payload(block: TrainingPositions) -> list[bytes]:
    if len(block) and int(block.entry_counts.max()) > MAX_ENTRIES_PER_POSITION:
        raise ValueError(f"a position with {int(block.entry_counts.max())} policy entries cannot be stored")
    arrays: list[tuple[np.ndarray, DTypeLike]] = [
        (block.hcps, np.uint8), (block.results, np.int8), (block.root_values, "<f2"), (block.plies, "<i2"),
        (block.game_ids, "<i8"), (block.entry_counts, "<u2"), (block.labels, "<i2"), (block.probs, "<f2")]
    return [np.ascontiguousarray(a, dtype).tobytes() for a, dtype in arrays]


def encode(block: TrainingPositions, first: int) -> bytes:
    """The bytes of a segment file holding `block` as positions first, first + 1, ..."""
    body = _HEADER.pack(MAGIC, first, len(block), len(block.labels)) + b"".join(_payload(block))
    return body + hashlib.blake2b(body, digest_size=_DIGEST_BYTES).digest()


def segment_name(data: bytes, first: int) -> str:
    return f"{first:012d}-{data[-_DIGEST_BYTES:][:8].hex()}.seg"


def decode(data: bytes, where: str) -> tuple[int, TrainingPositions]:
    """(first, positions) of a segment file's bytes; ReplayStoreError naming `where` if they are not one."""
    if len(data) < _HEADER.size + _DIGEST_BYTES or not data.startswith(MAGIC):
        raise ReplayStoreError(f"{where}: not a replay segment file")
    body, digest = data[:-_DIGEST_BYTES], data[-_DIGEST_BYTES:]
    if hashlib.blake2b(body, digest_size=_DIGEST_BYTES).digest() != digest:
        raise ReplayStoreError(f"{where}: corrupt replay segment (its checksum does not match)")
    _, first, count, entries = _HEADER.unpack_from(body)
    if len(body) != _HEADER.size + 47 * count + 4 * entries:
        raise ReplayStoreError(f"{where}: corrupt replay segment (its size does not match its header)")
    at = _HEADER.size

    def take(dtype, n, shape=None):
        nonlocal at
        a = np.frombuffer(body, dtype, n, at)
        at += a.nbytes
        return a.reshape(shape) if shape else a

    hcps = take(np.uint8, 32 * count, (count, 32))
    results, root_values, plies = take(np.int8, count), take("<f2", count), take("<i2", count)
    game_ids, counts = take("<i8", count), take("<u2", count).astype(np.int64)
    labels, probs = take("<i2", entries), take("<f2", entries)
    if int(counts.sum()) != entries:
        raise ReplayStoreError(f"{where}: corrupt replay segment (entry counts do not add up)")
    block = TrainingPositions(hcps, results, root_values.astype(np.float16), plies.astype(np.int16),
                      game_ids.astype(np.int64), counts, labels.astype(np.int16), probs.astype(np.float16))
    return int(first), block


# --- the store: a folder of segments ---

class ReplayStore:
    """The segment files in one folder (see the module docstring)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def write(self, block: TrainingPositions, first: int) -> dict:
        """Stores positions first, first + 1, ... (atomically, fsynced); returns the reference a
        checkpoint keeps: {"file", "first", "count"}."""
        data = encode(block, first)
        name = segment_name(data, first)
        with atomic_writer(self.directory / name) as f:
            f.write(data)
        return {"file": name, "first": first, "count": len(block)}

    def read(self, segments: Sequence[dict], begin: int, end: int) -> TrainingPositions:
        """Positions [begin, end) from the referenced segments, which must cover them."""
        blocks, at = [], begin
        for ref in sorted(segments, key=lambda r: int(r["first"])):
            first, count = int(ref["first"]), int(ref["count"])
            if first + count <= at or first >= end:
                continue
            path = self.directory / str(ref["file"])
            if first > at:
                raise ReplayStoreError(f"{self.directory}: no segment holds replay positions {at} to {first - 1}")
            try:
                stored_first, block, data = self._segment(path)
                if (stored_first, len(block)) != (first, count) or segment_name(data, first) != path.name:
                    raise ReplayStoreError(f"{path}: holds positions {stored_first} to "
                                           f"{stored_first + len(block) - 1}, not the {first} to {first + count - 1} "
                                           f"the checkpoint names")
            except ReplayStoreError as e:
                e.file = path.name
                raise
            blocks.append(block.slice(at - first, min(end, first + count) - first))
            at = min(end, first + count)
        if at < end:
            raise ReplayStoreError(f"{self.directory}: no segment holds replay positions {at} to {end - 1}")
        return TrainingPositions.concatenate(blocks)

    @staticmethod
    def _segment(path: Path) -> tuple[int, TrainingPositions, bytes]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ReplayStoreError(f"replay segment file missing: {path} (a checkpoint's replay window lives in "
                                   f"the replay/ folder beside it: copy a run's whole folder)") from None
        except OSError as e:
            raise ReplayStoreError(f"cannot read replay segment {path}: {e}") from None
        stored_first, block = decode(data, str(path))
        return stored_first, block, data

    def files(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if _NAME.match(p.name))

    def prune(self, referenced: Iterable[str]) -> list[Path]:
        """Deletes the segment files not named in `referenced`; returns them."""
        keep = set(referenced)
        gone = [p for p in self.files() if p.name not in keep]
        for p in gone:
            p.unlink(missing_ok=True)
        return gone
