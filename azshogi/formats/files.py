"""Writing files so that a reader never sees half of one: temporary name, fsync, rename. A file
gets the mode a plain open() would give it (0666, or the mode asked for, less the umask), and an
error names the file being written, never its temporary name. And the error of a data file that
is malformed (DataFormatError)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator, Optional

TEMPORARY = ".tmp-"  # how the temporary files of atomic_writer begin


def remove_leftovers(*folders: Path) -> int:
    """Removes, under `folders`, the temporary files that writes killed before their rename left
    (kill -9, a power loss: each the size of what it was writing); how many. Only for folders
    that no other process writes (a run's, under its lock)."""
    removed = 0
    for folder in folders:
        for path in Path(folder).rglob(TEMPORARY + "*") if Path(folder).is_dir() else ():
            if path.is_file():
                path.unlink(missing_ok=True)
                removed += 1
    return removed


class DataFormatError(ValueError):
    """A data file is malformed; the message names the file and the record."""


@contextlib.contextmanager
def atomic_writer(path: Path, mode: int = 0o666) -> Iterator[BinaryIO]:
    """Yields a binary file that replaces `path` when the block ends without an error.

    The data goes to a temporary file in the same folder, is flushed and fsynced, and is then
    renamed over `path` (and the folder fsynced). On any failure the temporary file is removed
    and `path` keeps its previous content (or stays absent). `mode` is masked by the umask. An
    OSError of the writing itself (a folder that cannot be written, a full disk, the block's own
    writes included) names `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMPORARY, suffix=path.suffix, dir=path.parent)
    except OSError as e:
        raise _naming(e, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            _as_writer(os.fchmod, path, fd, mode & ~_umask())  # mkstemp makes 0600
            yield f
            _as_writer(f.flush, path)
            _as_writer(os.fsync, path, f.fileno())
        _as_writer(os.replace, path, tmp, path)
    except OSError as e:  # a full disk in the block's writes, or in the close's flush after them
        Path(tmp).unlink(missing_ok=True)
        if e.filename is not None:  # named already (or about another file the block read)
            raise
        raise _naming(e, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_atomically(path: Path, data: bytes) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def _naming(error: OSError, path: Path) -> OSError:
    """`error` (of the temporary file, or of no file) as one of writing `path`."""
    return type(error)(error.errno, error.strerror or str(error), str(path))


def _as_writer(step, path: Path, *args) -> None:
    """One step of writing `path`; its OSError names `path`."""
    try:
        step(*args)
    except OSError as e:
        raise _naming(e, path) from None


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


def write_problem(folder: Path) -> Optional[str]:
    """Why files cannot be written in `folder` (a read-only file system, a full disk, no
    permission, a file in the way), or None: makes the folder if missing, writes, fsyncs and
    removes a probe file, and removes the folders it made, so that nothing is left behind."""
    folder = Path(folder)
    missing = []
    parent = folder
    while not parent.exists() and parent != parent.parent:
        if parent.is_symlink():  # a link to what is not there: mkdir would say only "File exists"
            return f"{parent} is a symbolic link to {os.readlink(parent)}, which does not exist (a disk not mounted?)"
        missing.append(parent)
        parent = parent.parent
    made: list[Path] = []
    try:
        for path in reversed(missing):
            path.mkdir()
            made.append(path)
        fd, probe = tempfile.mkstemp(prefix=".azshogi-write-probe-", dir=folder)
        try:
            os.write(fd, b"\0" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        return e.strerror or str(e)
    finally:
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError:
                pass
    return None
