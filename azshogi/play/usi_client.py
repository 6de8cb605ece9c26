"""A USI engine in a child process, driven from Python (external opponents in matches)."""
from __future__ import annotations

import queue
import shlex
import subprocess
import threading
import time
from typing import Optional, Sequence

from azshogi.shogi.scores import cp_to_win_rate

START_S = 120.0  # how long an engine may take to answer usi and isready (a large network or hash to set up)


class UsiError(RuntimeError):
    pass


class UsiClient:
    """A USI engine in a child process. Its output is read by a thread, so every wait has a
    timeout and a dead or silent engine raises UsiError instead of hanging the match. Its owner
    stops it (`close`); should the owner die first, the end of its input does (USI engines quit
    there, Fairy-Stockfish and azshogi's own even in the middle of a search)."""

    def __init__(self, command: str, options: Optional[dict] = None, timeout: float = START_S):
        self.command = command
        self.name = command
        argv = shlex.split(command)
        try:
            # A session of its own: Ctrl-C at the terminal reaches the match, which stops the
            # engine in order, and not the engine, whose death would lose its game on time
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, encoding="utf-8",
                                         errors="replace", bufsize=1, start_new_session=True)
        except OSError as e:
            raise UsiError(f"cannot start {command!r}: {e}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both piped
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self.lines: queue.Queue = queue.Queue()
        self.exited = False  # its output has ended: every later wait fails at once
        threading.Thread(target=self._read, daemon=True).start()
        self.options: dict[str, str] = {}  # the engine's option names, lower case -> as declared
        try:
            self._handshake(options or {}, timeout)
        except BaseException:  # silent, dead or refusing, or Ctrl-C while it started: not left running
            self.close()
            raise

    def _handshake(self, options: dict, timeout: float) -> None:
        self.send("usi")
        for line in self._until("usiok", timeout):
            if line.startswith("id name "):
                self.name = line[len("id name "):].strip()
            elif line.startswith("option name "):
                declared = line[len("option name "):].split(" type ")[0].strip()
                self.options[declared.lower()] = declared
        for key, value in options.items():
            self.send(f"setoption name {self._option_name(key)} value {value}")
        self.send("isready")
        # An engine that names an error before readyok (azshogi's engine: a checkpoint it cannot
        # load, an option value it refused) would play on without it, or resign every move.
        errors = [line for line in self._until("readyok", timeout) if line.startswith("info string error: ")]
        if errors:
            raise UsiError(f"{self.name}: {errors[0][len('info string error: '):]}")

    def _option_name(self, key: str) -> str:
        """The engine's spelling of an option given by the user; an option it does not declare
        is an error (a typo would otherwise be silently ignored). GUIs' USI_* options pass."""
        declared = self.options.get(key.strip().lower())
        if declared is None and not key.upper().startswith("USI_"):
            known = ", ".join(sorted(self.options.values())) or "none"
            raise UsiError(f"{self.name}: the engine has no option {key!r} (its options: {known})")
        return declared or key

    def _read(self) -> None:
        for line in self._stdout:
            self.lines.put(line.rstrip("\r\n"))
        self.exited = True
        self.lines.put(None)

    def send(self, line: str) -> None:
        if self.exited:
            raise UsiError(f"{self.name}: the engine has exited (while sending {line!r})")
        try:
            self._stdin.write(line + "\n")
            self._stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise UsiError(f"{self.name}: the engine has exited (while sending {line!r})") from None

    def _until(self, prefix: str, timeout: float):
        """Yields lines until one starting with `prefix` (yielded last)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise UsiError(f"{self.name}: no '{prefix}' within {timeout:.0f} s") from None
            if line is None:
                self.lines.put(None)  # the end stays: a later wait fails at once too
                raise UsiError(f"{self.name}: the engine exited while we waited for '{prefix}'")
            yield line
            if line.split(" ", 1)[0] == prefix:
                return

    def go(self, start_sfen: Optional[str], moves: Sequence[str], go_args: str,
           timeout: float = 600.0) -> tuple[str, Optional[str]]:
        """(bestmove, the last info line with a score) for a position."""
        self._drop_unread()
        position = "position " + (f"sfen {start_sfen}" if start_sfen else "startpos")
        self.send(position + (" moves " + " ".join(moves) if moves else ""))
        self.send("go " + go_args)
        info = None
        for line in self._until("bestmove", timeout):
            if line.startswith("info") and " score " in line:
                info = line
            if line.startswith("bestmove"):
                parts = line.split()
                return (parts[1] if len(parts) > 1 else "resign"), info
        raise UsiError(f"{self.name}: no bestmove")

    def _drop_unread(self) -> None:
        """Lines that arrived before this go (a second bestmove to the last one, late infos) are
        not taken for its answer (one that arrives later still may be: a sync by isready would
        cost azshogi's own engine a reload each move). The end of the output is kept."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is None:
                self.lines.put(None)
                return

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
            except UsiError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def win_rate_of_info(info: Optional[str]) -> Optional[float]:
    """The win rate an engine's `score cp|mate` implies (dlshogi's 756 cp per logit unit)."""
    if not info:
        return None
    words = info.split()
    try:
        i = words.index("score")
        kind, value = words[i + 1], words[i + 2]
    except (ValueError, IndexError):
        return None
    if kind == "mate":
        return 0.0 if value.startswith("-") else 1.0
    try:
        return cp_to_win_rate(int(value))
    except ValueError:
        return None
