"""Checkpoint files: their layout and format version, written atomically, read with
torch.load(weights_only=True). The one module that knows a checkpoint's keys.

`ckpt-00012.pt` holds the state after checkpoint 12 (the 12th training phase). A run stopped in
the middle of a phase (Ctrl-C, SIGTERM) writes `ckpt-00012-partial.pt`: the state of phase 13 in
progress. The newest file, by (number, partial after full), is where a run resumes. The names
come from formats/paths.py.

Format 2 (this version), a dict of plain values and tensors, in three parts:

    format      2
    the run state (train/run_state.py: `RUN_STATE`, what the loop and pretraining share):
    model       the network's state_dict
    model_average   the state_dict of the network that plays (train.average_decay: an average of
                `model` over checkpoints, train/averaging.py), or None: `model` plays
    trainer     optimizer, loss scaler, step counts (train/trainer.py)
    counters    the run's counters (train/run_state.RunCounters)
    rng         {"python", "numpy_train", "torch", "cuda"}: the random streams training draws from
    config      the run's settings, plain (config.to_plain): the network is rebuilt from them
    the replay window:
    replay      {"begin", "end", "segments"}: positions [begin, end) of the run's stream, kept in
                the replay store beside the file (replay_store.py); an empty window for a
                pretraining checkpoint; with "surprise" (float16, one per position, NaN: not
                scored) where train.surprise_weight scored them (train/surprise.py)
    the games in progress:
    selfplay    flat arrays (selfplay/in_progress.py); no games for a pretraining checkpoint

`assemble` builds this dict from its parts, `split` (after `upgrade`) gives them back.
Format 1 held the replay window and one tensor per position of every game in progress inline;
`upgrade` reads it into format 2's layout (its window comes as `replay["positions"]`).
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from azshogi.formats.files import atomic_writer
from azshogi.formats.paths import checkpoint_number, not_an_output
from azshogi.shogi.game_record import TrainingPositions

FORMAT = 2
RUN_STATE = ("model", "model_average", "trainer", "counters", "rng", "config")  # the run state's keys


class CheckpointError(RuntimeError):
    pass


@dataclass
class Checkpoint:
    """A loop checkpoint's three parts."""

    run: dict  # the run state: RUN_STATE's keys (train/run_state.RunState.state_dict)
    replay: dict  # the replay window: its reference into the store (format 1: inline, "positions")
    selfplay: dict  # the games in progress (selfplay/in_progress.py)


def assemble(run: dict, replay: dict, selfplay: dict) -> dict:
    """A loop checkpoint's state, in this format's layout, from its parts."""
    if set(run) != set(RUN_STATE):
        raise ValueError(f"a run state has the parts {sorted(RUN_STATE)}, not {sorted(run)}")
    return {"format": FORMAT, **run, "replay": replay, "selfplay": selfplay}


def split(state: dict, path: Path) -> Checkpoint:
    """A loop checkpoint's state (any format `upgrade` reads), in its parts."""
    state = upgrade(state, path)
    return Checkpoint({key: state[key] for key in RUN_STATE}, state["replay"], state["selfplay"])


def empty_replay() -> dict:
    """The reference of an empty replay window (a checkpoint written without self-play)."""
    return {"begin": 0, "end": 0, "segments": []}


def network(state: dict, path: Path, trained: bool = False) -> tuple[dict, dict]:
    """(the state_dict of the network that plays, the plain config it was built from) of a
    checkpoint's state, of any format, or of any file with those two parts (the network alone,
    for play): the average of the trained network where the run kept one, else (and with
    `trained`) the network training left."""
    if "model" not in state or "config" not in state:
        raise CheckpointError(f"{path}: not an azshogi checkpoint (no model or config)")
    average = None if trained else state.get("model_average")
    return (average if isinstance(average, dict) else state["model"]), state["config"]


def save_network(state: dict, source: Path, out: Path) -> Path:
    """Writes the part of a checkpoint's state (read from `source`) that plays — the network's
    weights and the settings it is rebuilt from, no optimizer, replay window or games in
    progress — atomically to `out` (any name: it is no run's checkpoint). `network` reads it back."""
    weights, config = network(state, source)
    return write_network(weights, config, out)


def write_network(weights: dict, config: dict, out: Path, **extra) -> Path:
    """The one writer of a network file: its weights (a state_dict, copied to the CPU), the plain
    config it is rebuilt from, and `extra` keys (e.g. which checkpoint it was), atomically to
    `out`. `network` reads it back; so do `azshogi-usi` and `search:` players. CheckpointError
    where `out` would replace a run's checkpoint or something not a file (paths.not_an_output)."""
    problem = not_an_output(Path(out))
    if problem:
        raise CheckpointError(f"{out}: not written: {problem}; give it another name")
    weights = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in weights.items()}
    with atomic_writer(Path(out)) as f:
        _torch_save(_tensors({"model": weights, "config": config, **extra}), f)
    return Path(out)


def _torch_save(obj, f) -> None:
    """torch.save into an open file; a failed write (a full disk) is raised as the OSError it
    was, for atomic_writer to name the file, not as torch's RuntimeError about positions."""
    try:
        torch.save(obj, f)
    except RuntimeError as e:
        if isinstance(e.__context__, OSError):
            raise e.__context__ from None
        raise


def _order(path: Path) -> tuple[int, int]:
    number, partial = checkpoint_number(path) or (-1, False)  # only checkpoint files are ordered
    return number, int(partial)


def list_checkpoints(directory: Path) -> list[Path]:
    """Checkpoint files of a run, oldest first (temporary files are ignored)."""
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.iterdir() if checkpoint_number(p)), key=_order)


def whole_phases(directory: Path) -> list[Path]:
    """A run's checkpoints written at the end of a phase, oldest first (no stopped phase's -partial file)."""
    return [p for p in list_checkpoints(directory) if not _order(p)[1]]


def latest(directory: Path) -> Optional[Path]:
    files = list_checkpoints(directory)
    return files[-1] if files else None


def before(path: Path) -> Optional[Path]:
    """The checkpoint file of `path`'s run just older than `path` (where a run whose newest
    file is damaged can resume), or None."""
    older = [p for p in list_checkpoints(Path(path).parent) if _order(p) < _order(Path(path))]
    return older[-1] if older else None


def save(state: dict, path: Path, keep: int) -> Path:
    """Writes `state` atomically to `path`, a checkpoint file of a run (RunPaths.checkpoint:
    temporary file, flush, fsync, rename; numpy arrays become tensors) and keeps, in its folder,
    the newest `keep` full checkpoints, and a partial one only while it is the newest file. A
    crash at any point leaves the previous checkpoint intact."""
    path = Path(path)
    if checkpoint_number(path) is None:
        raise ValueError(f"{path.name} is not a checkpoint file's name (formats/paths.checkpoint_name)")
    with atomic_writer(path) as f:  # as readable as any file the user writes (the umask decides)
        _torch_save(_tensors(state), f)
    files = list_checkpoints(path.parent)
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
        state = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception:  # truncated, corrupt or foreign files (torch's own words say nothing to a user)
        state = None
    if not isinstance(state, dict):  # that, or a foreign .pt file holding a tensor, a list...
        raise CheckpointError(f"cannot read {path}: not an azshogi checkpoint (a .pt file that azshogi "
                              f"wrote), or a damaged one")
    if not mmap:
        _check_sums(path)
    return state


def _check_sums(path: Path) -> None:
    """torch.load does not check the CRC-32 its zip file keeps of each part: bytes changed on
    the disk would load as other weights (or other settings) without a word. One read of the
    file, a CheckpointError naming the part that fails."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise CheckpointError(f"cannot read {path}: a damaged checkpoint ({e})") from None
    if bad is not None:
        raise CheckpointError(f"cannot read {path}: a damaged checkpoint (its part {bad} fails its checksum)")


def upgrade(state: dict, path: Path) -> dict:
    """A loop checkpoint's state in this format's layout (see the module docstring)."""
    version = state.get("format")
    if version == 1:
        return _from_format_1(state)
    if version is None and "model" in state and "config" in state:
        raise CheckpointError(f"{path}: a network alone (azshogi-export network), no run's state to resume: "
                              f"play it (azshogi-arena, azshogi-usi), or resume from the run's checkpoint")
    if version != FORMAT:
        raise CheckpointError(f"{path}: not an azshogi checkpoint (format {version!r})")
    return {"model_average": None, **state}  # written before train.average_decay: none


def _from_format_1(state: dict) -> dict:
    r = state["replay"]
    counts = r["entry_count"].numpy().astype(np.int64)
    window = TrainingPositions(r["hcps"].numpy(), r["results"].numpy(), r["root_values"].numpy().astype(np.float16),
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
    return {**state, "format": FORMAT, "model_average": None, "counters": counters, "selfplay": selfplay,
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
