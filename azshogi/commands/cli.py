"""What every console script shares, without importing anything heavy (the USI engine must
answer `usi` at once): a user's mistake ends in one line `PROGRAM: error: ...` on stderr and
exit code 2, never a traceback; Ctrl-C, where a command handles it, in `PROGRAM: interrupted ...`
and exit code 130."""
from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Callable, Iterator, NoReturn


def fail(program: str, message: str) -> NoReturn:
    print(f"{program}: error: {message}", file=sys.stderr)
    sys.exit(2)


def interrupted(program: str, message: str) -> NoReturn:
    """Ctrl-C: one line `PROGRAM: interrupted (Ctrl-C): ...` on stderr saying what was kept, and
    exit code 130 (the shell's for SIGINT), never a traceback."""
    print(f"{program}: interrupted (Ctrl-C): {message}", file=sys.stderr)
    sys.exit(130)


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
