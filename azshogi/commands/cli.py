"""What every console script shares, without importing anything heavy (the USI engine must
answer `usi` at once): a user's mistake ends in one line `PROGRAM: error: ...` on stderr and
exit code 2, never a traceback; Ctrl-C, where a command handles it, in `PROGRAM: interrupted ...`
and exit code 130."""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from typing import Callable, Iterator, NoReturn


def fail(program: str, message: str) -> NoReturn:
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(2)


_STOPPED_BY = ["Ctrl-C"]  # what interrupted the command: a KeyboardInterrupt from SIGINT, or from SIGTERM


def interrupted(program: str, message: str) -> NoReturn:
    """Ctrl-C (or SIGTERM, where terminating_interrupts is on): one line `PROGRAM: interrupted
    (Ctrl-C): ...` on stderr saying what was kept, and the shell's exit code for the signal (130
    for SIGINT, 143 for SIGTERM), never a traceback."""
    print(f"{program}: interrupted ({_STOPPED_BY[0]}): {message}", file=sys.stderr)
    sys.exit(143 if _STOPPED_BY[0] == "SIGTERM" else 130)


def terminating_interrupts() -> None:
    """SIGTERM (`timeout`, `kill`, a service manager) interrupts as Ctrl-C does: the command's
    KeyboardInterrupt handling says what was done and keeps it (it ended with nothing said)."""
    def handle(signum, frame):
        _STOPPED_BY[0] = "SIGTERM"
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handle)


def _line_by_line_output() -> None:
    """stdout written line by line, with the letters its encoding lacks escaped (\\u65e5): piped to a
    file it held every line until the end (a command killed before then left it empty), and a
    Japanese path or name printed to an ASCII or cp1252 stdout crashed a command after its work."""
    try:
        sys.stdout.reconfigure(errors="backslashreplace", line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError):  # not a text stream of its own (a test's capture)
        pass


_line_by_line_output()


@contextlib.contextmanager
def user_errors(program: str, *errors: type[Exception]) -> Iterator[None]:
    """Runs the block; one of `errors` (a user's mistake: a bad file, a bad setting), or an
    OSError about a file (one that cannot be read, a folder that cannot be written, a full disk),
    ends the program with `fail`: `PROGRAM: error: PATH: reason`. An OSError that names no file
    is a bug, shown with its traceback."""
    try:
        yield
    except errors as e:
        fail(program, str(e))
    except OSError as e:
        if e.filename is None:
            raise
        fail(program, f"{e.filename}: {e.strerror or e}")


def run_tool(main: Callable[[], object], program: str) -> None:
    """Runs a docs/tools script's `main`: a damaged checkpoint, replay segment or data file, or
    a file that cannot be read or written, ends in one line naming it (exit code 2)."""
    from azshogi.formats.checkpoint import CheckpointError
    from azshogi.formats.files import DataFormatError
    from azshogi.formats.replay_store import ReplayStoreError

    with user_errors(program, CheckpointError, DataFormatError, ReplayStoreError):
        code = main()
    sys.exit(code if isinstance(code, int) else 0)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with its errors in one line (`PROGRAM: error: ... (see --help)`), exit code 2."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see {self.prog} --help)")


def key_values(pairs, program: str) -> dict:
    """{KEY: VALUE} from command-line items 'KEY=VALUE'; a malformed item stops the program."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(program, f"an option is KEY=VALUE, got {pair!r}")
        out[key] = value
    return out
