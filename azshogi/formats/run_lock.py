"""One process at a time per run: a lock on a file in the run's checkpoint folder.

Two `azshogi run=NAME` (or a training and a pretraining of one name) would write the same
checkpoints, replay segments and logs, and each would delete the other's files as old. The lock
is the operating system's (flock): it goes with the process, so a run that crashed or was killed
leaves nothing to clean up, and the file that carries it stays (`.lock`, holding the holder's pid
and start time for the message) unless the run wrote nothing in a folder it made. Where flock is
missing (Windows), runs are not locked.
"""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


class RunInUse(RuntimeError):
    """Another process holds the run: the message names the folder and that process."""


@contextlib.contextmanager
def holding(path: Path, what: str) -> Iterator[None]:
    """Holds the lock file `path` (its folder made if needed) for the block; RunInUse at once
    when another process holds it. `what` names the run in the message."""
    if fcntl is None:
        yield
        return
    path = Path(path)
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    fd = _locked(path, what)
    held = False
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        held = True
        yield
    finally:
        if held and made and [p.name for p in path.parent.iterdir()] == [path.name]:
            path.unlink()  # a run that wrote nothing (a mistake found at its start) leaves no folder
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        os.close(fd)  # the lock goes with it


def _locked(path: Path, what: str) -> int:
    """The lock file `path`, open and locked. A file another start removed (one that wrote
    nothing) between our open and lock is opened again, so that two starts never hold two files."""
    for _ in range(100):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # its folder removed in the moment between
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunInUse(f"{what} is in use by {holder} (its lock: {path}): two processes on one run would "
                           f"overwrite each other's checkpoints; stop that one, or name this run otherwise "
                           f"(run=NAME)") from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # locked a file no longer there: again
    raise RunInUse(f"{what}: its lock {path} kept disappearing")

