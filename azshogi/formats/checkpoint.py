"""Checkpoint files: written atomically, read with torch.load(weights_only=True).

`ckpt-00012.pt` holds the state after checkpoint 12 (the 12th training phase). A run stopped in
the middle of a phase (Ctrl-C, SIGTERM) writes `ckpt-00012-partial.pt`: the state of phase 13 in
progress. The newest file, by (number, partial after full), is where a run resumes.

Format 2 (this version), a dict of plain values and tensors:

    format      2
    model       the network's state_dict;  trainer: optimizer, loss scaler, step counts
    replay      {"begin", "end", "segments"}: the replay window, positions [begin, end) of the
                run's stream, kept in the replay store beside the file (replay_store.py)
    selfplay    the games in progress as flat arrays (selfplay/in_progress.py)
    counters, rng, config

Format 1 held the replay window and one tensor per position of every game in progress inline;
`upgrade` reads it into format 2's layout (its window comes as `replay["positions"]`).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from azshogi.formats.files import atomic_writer
from azshogi.formats.replay_store import Positions

FORMAT = 2
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
    """Writes `state` atomically (temporary file, flush, fsync, rename; numpy arrays become
    tensors) and keeps the newest `keep` full checkpoints, and a partial one only while it is
    the newest file. A crash at any point leaves the previous checkpoint intact."""
    path = directory / file_name(checkpoints, partial)
    with atomic_writer(path, mode=0o600) as f:  # checkpoints hold the whole run: private
        torch.save(_tensors(state), f)
    files = list_checkpoints(directory)
    full = [p for p in files if not _order(p)[1]]
    newest = files[-1]
    for old in files:
        superseded = _order(old)[1] and old != newest  # a partial phase that a later file continues
        if old != path and (superseded or old in full[:-keep]):
            old.unlink(missing_ok=True)
    return path


def load(path: Path, map_location="cpu", mmap: bool = False) -> dict:
    """The state in a checkpoint file; `mmap` maps tensors instead of reading them (cheap, to
    look at the small parts)."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception as e:  # truncated, corrupt or foreign files
        raise CheckpointError(f"cannot read checkpoint {path}: {type(e).__name__}: {e}") from None


def upgrade(state: dict, path: Path) -> dict:
    """A loop checkpoint's state in this format's layout (see the module docstring)."""
    version = state.get("format")
    if version == 1:
        return _from_format_1(state)
    if version != FORMAT:
        raise CheckpointError(f"{path}: not an azshogi checkpoint (format {version!r})")
    return state


def _from_format_1(state: dict) -> dict:
    r = state["replay"]
    counts = r["entry_count"].numpy().astype(np.int64)
    window = Positions(r["hcps"].numpy(), r["results"].numpy(), r["root_values"].numpy().astype(np.float16),
                       r["plies"].numpy().astype(np.int16), r["game_ids"].numpy().astype(np.int64), counts,
                       r["labels"].numpy().astype(np.int16), r["probs"].numpy().astype(np.float16))
    end = int(r["total_added"])
    games = state["selfplay"]["games"]
    labels = [x.numpy() for g in games for x in g["labels"]]
    probs = [x.numpy() for g in games for x in g["probs"]]
    selfplay = {
        "next_game_id": int(state["selfplay"]["next_game_id"]),
        "games": {"game_id": np.array([g["game_id"] for g in games], np.int64),
                  "num_positions": np.array([len(g["hcps"]) for g in games], np.int64),
                  "moves": [" ".join(g["moves"]) for g in games], "rng": [g["rng"] for g in games]},
        "positions": {"hcp": np.concatenate([g["hcps"].numpy().reshape(-1, 32) for g in games] or
                                            [np.zeros((0, 32), np.uint8)]).astype(np.uint8),
                      "root_value": np.array([v for g in games for v in g["root_values"]], np.float64),
                      "num_entries": np.array([len(x) for x in labels], np.int64)},
        "entries": {"label": np.concatenate(labels or [np.zeros(0, np.int16)]).astype(np.int16),
                    "prob": np.concatenate(probs or [np.zeros(0, np.float32)]).astype(np.float32)},
    }
    counters = dict(state["counters"])
    counters.setdefault("evaluated", counters["checkpoints"])  # format 1 did not say: assume done
    return {**state, "format": FORMAT, "counters": counters, "selfplay": selfplay,
            "replay": {"begin": end - len(window), "end": end, "segments": [], "positions": window}}


def _tensors(obj):
    """`obj` with every numpy array replaced by a tensor (what weights_only loading reads)."""
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj))
    if isinstance(obj, dict):
        return {k: _tensors(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_tensors(v) for v in obj]
    return obj
