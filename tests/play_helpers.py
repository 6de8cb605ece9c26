"""Helpers for the play tests (USI engine, arena, evaluation): a tiny checkpoint on disk and a
USI session driven through a pipe. Imported by name (pytest puts tests/ on sys.path)."""
from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from azshogi.config import (
    Config,
    Dtype,
    InferenceConfig,
    ModelConfig,
    SearchConfig,
    to_plain,
)
from azshogi.nn.network import build

TINY_SHAPE = (1, 16, 32)


def tiny_config(**overrides) -> Config:
    """A tiny network with a 4-simulation search, fp32 inference (bf16 is slow on small CPU batches)."""
    settings = dict(model=ModelConfig(*TINY_SHAPE),
                    search=SearchConfig(num_simulations=4, max_num_considered_actions=4),
                    inference=InferenceConfig(dtype=Dtype.fp32))
    settings.update(overrides)
    return Config(**settings)


def make_tiny_checkpoint(path: Path, seed: int = 0, channels: int = TINY_SHAPE[1]) -> Path:
    """A minimal state with `model` and `config`, as checkpoint.load_model reads it."""
    torch.manual_seed(seed)
    shape = (TINY_SHAPE[0], channels, TINY_SHAPE[2])
    model = build(*shape)
    torch.save({"model": model.state_dict(), "config": to_plain(tiny_config(model=ModelConfig(*shape)))}, path)
    return path


class UsiSession:
    """`python -m azshogi.commands.usi` in a child process; lines are read by a thread with timeouts."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "azshogi.commands.usi", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines: queue.Queue = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, *lines: str) -> None:
        for line in lines:
            self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def until(self, prefix: str, timeout: float = 30.0) -> list[str]:
        """Lines up to and including the first that starts with `prefix`."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} within {timeout} s; got {out}") from None
            if line is None:
                raise AssertionError(f"engine exited before {prefix!r}; got {out}; stderr "
                                     f"{self.proc.stderr.read()}")
            out.append(line)
            self.log.append(line)
            if line.startswith(prefix):
                return out

    def silent_for(self, seconds: float) -> list[str]:
        """Lines that arrive within `seconds` (for checking that nothing is sent)."""
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line)
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@contextlib.contextmanager
def torch_threads(n: int):
    """PyTorch's intra-op threads set to `n` for a while. One thread is faster for these tiny
    batches and does not stall when other processes share the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# A USI engine in a few lines: it declares two options, is ready, and resigns every position
FAKE_ENGINE = """import sys
for line in sys.stdin:
    word = line.split()[:1]
    if word == ["usi"]:
        print("id name fake-engine")
        print("option name UCI_Variant type string default shogi")
        print("option name Threads type spin default 1 min 1 max 8")
        print("usiok", flush=True)
    elif word == ["isready"]:
        print("readyok", flush=True)
    elif word == ["go"]:
        print("bestmove resign", flush=True)
    elif word == ["quit"]:
        break
"""
