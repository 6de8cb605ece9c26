"""Ctrl-C and SIGTERM during training and pretraining: a request to stop after the current step,
said on the screen at once, so that the checkpoint that follows holds whole steps. A second Ctrl-C
stops at once (KeyboardInterrupt), without it, except while a checkpoint and its records are
being written, or self-play's processes shut down after the stop (`writing`): that ends first, then
the run stops. SIGTERM may well come twice (GNU
timeout signals the child and then its process group): one request."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator, Optional

from azshogi.train.monitor import say_soon


def install(requested: Callable[[], bool], request: Callable[[], None], follows: str) -> Optional[dict]:
    """Handlers of SIGINT and SIGTERM that call `request` (once `requested()` is false, after
    saying what `follows`); the handlers they replace, for `restore`. None off the main thread
    (where Python delivers signals only to the main one)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handle(signum, frame):
        if requested() and signum == signal.SIGINT:
            if _writing:  # half a checkpoint's files would be worse than a second's wait
                say_soon(f"Ctrl-C: {_writing[-1]}; the run stops once it is done")
                return
            raise KeyboardInterrupt
        if not requested():
            say_soon(("Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name)
                     + f": stopping after the current step; {follows}"
                     + (" (press Ctrl-C again to quit at once, without it)" if signum == signal.SIGINT else ""))
        request()

    return {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}


_writing: list[str] = []  # what the blocks under way do, innermost last


@contextlib.contextmanager
def writing(what: str = "the checkpoint is being written") -> Iterator[None]:
    """A block that a second Ctrl-C does not break: a checkpoint and its records being written,
    or a shutdown that leaves nothing behind (the words say which, on the screen)."""
    _writing.append(what)
    try:
        yield
    finally:
        _writing.pop()


def restore(previous: Optional[dict]) -> None:
    for s, h in (previous or {}).items():
        signal.signal(s, h)
