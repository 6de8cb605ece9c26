"""Checkpoint files: written atomically, read with torch.load(weights_only=True).

`ckpt-00012.pt` holds the state after checkpoint 12 (the 12th training phase). A run stopped in
the middle of a phase (Ctrl-C, SIGTERM) writes `ckpt-00012-partial.pt`: the state of phase 13 in
progress. The newest file, by (number, partial after full), is where a run resumes.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import torch

from azshogi.formats.files import atomic_writer

_NAME = re.compile(r"^ckpt-(\d{5,})(-partial)?\.pt$")


class CheckpointError(RuntimeError):
    pass


def file_name(checkpoints: int, partial: bool) -> str:
    return f"ckpt-{checkpoints:05d}{'-partial' if partial else ''}.pt"


def _order(path: Path) -> tuple[int, int]:
    m = _NAME.match(path.name)
    return int(m.group(1)), 1 if m.group(2) else 0


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint files of a run, oldest first (temporary files are ignored)."""
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.iterdir() if _NAME.match(p.name)), key=_order)


def latest(directory: Path) -> Optional[Path]:
    files = list_checkpoints(directory)
    return files[-1] if files else None


def save(state: dict, directory: Path, checkpoints: int, partial: bool, keep: int) -> Path:
    """Writes `state` atomically (temporary file, flush, fsync, rename) and keeps the newest
    `keep` files. A crash at any point leaves the previous checkpoint intact."""
    path = directory / file_name(checkpoints, partial)
    with atomic_writer(path, mode=0o600) as f:  # checkpoints hold the whole run: private
        torch.save(state, f)
    # A full checkpoint supersedes the partial one of the same phase.
    for old in list_checkpoints(directory):
        if old != path and _order(old) < _order(path) and _order(old)[0] == checkpoints - 1 and _order(old)[1]:
            old.unlink(missing_ok=True)
    files = list_checkpoints(directory)
    for old in files[:-keep]:
        old.unlink(missing_ok=True)
    return path


def load(path: Path, map_location="cpu") -> dict:
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception as e:  # truncated, corrupt or foreign files
        raise CheckpointError(f"cannot read checkpoint {path}: {type(e).__name__}: {e}") from None
