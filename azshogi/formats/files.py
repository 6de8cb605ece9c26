"""Writing files so that a reader never sees half of one: temporary name, fsync, rename."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator


@contextlib.contextmanager
def atomic_writer(path: Path, mode: int = 0o666) -> Iterator[BinaryIO]:
    """Yields a binary file that replaces `path` when the block ends without an error.

    The data goes to a temporary file in the same folder, is flushed and fsynced, and is then
    renamed over `path` (and the folder fsynced). On any failure the temporary file is removed
    and `path` keeps its previous content (or stays absent). `mode` is masked by the umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        os.fchmod(fd, mode & ~_umask())  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_atomically(path: Path, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
