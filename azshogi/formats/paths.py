"""Every path of a run, named once (as minigo's rl_loop/fsdb.py).

    <checkpoint_root>/<run>/
        ckpt-00012.pt, ckpt-00012-partial.pt   checkpoints (formats/checkpoint.py)
        replay/                                 the replay store's segment files (formats/replay_store.py)
        .lock                                   held by the process running the run (formats/run_lock.py)
    <log_root>/<run>/
        events.out.tfevents.*                   TensorBoard
        azshogi.log, config.yaml                the plain log, the resolved config
        games/ckpt00012-game345.kif             a few self-play games per checkpoint
        hcpe3/ckpt-00012.hcpe3                  every finished game, dlshogi's format
        eval/ratings.json, eval/previous.pt     the in-loop evaluation (play/gauntlet.py)
        eval/ckpt00012/greedy/game-0000.csa     its first games against each opponent
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPLAY_STORE = "replay"
LOCK = ".lock"
_CHECKPOINT = re.compile(r"^ckpt-(\d{5,})(-partial)?\.pt$")


def checkpoint_name(number: int, partial: bool) -> str:
    """`ckpt-00012.pt`: the state after the 12th training phase; `ckpt-00012-partial.pt`: the
    13th phase in progress (a run stopped in its middle)."""
    return f"ckpt-{number:05d}{'-partial' if partial else ''}.pt"


def checkpoint_number(path: Path) -> Optional[tuple[int, bool]]:
    """(number, partial) of a checkpoint file's name, or None for any other file."""
    m = _CHECKPOINT.match(Path(path).name)
    return (int(m.group(1)), bool(m.group(2))) if m else None


def holds_a_run(folder: Path) -> bool:
    """Whether `folder` is a run's checkpoint folder: a checkpoint, its replay store or its lock
    is there."""
    folder = Path(folder)
    return (folder / REPLAY_STORE).is_dir() or (folder / LOCK).exists() or \
        (folder.is_dir() and any(checkpoint_number(p) is not None for p in folder.iterdir()))


def not_an_output(out: Path) -> Optional[str]:
    """Why a file made for the user (an exported or averaged network) must not be written at
    `out`, or None: something other than a file is there (a folder, a device), or the name is a
    checkpoint's where a run would take it for one of its own (in a run's folder, or over a
    checkpoint file)."""
    out = Path(out)
    if out.exists() and not out.is_file():
        return "it exists and is not a file"
    if checkpoint_number(out) is not None and (out.exists() or holds_a_run(out.parent)):
        return ("a checkpoint's name (ckpt-NNNNN.pt), over a file of that name or in a folder of a run's "
                "checkpoints: a run would take it for one of its own")
    return None


@dataclass(frozen=True)
class RunPaths:
    checkpoints: Path  # <checkpoint_root>/<run>/
    logs: Path  # <log_root>/<run>/

    @classmethod
    def of(cls, cfg) -> "RunPaths":
        """The paths of the run a Config describes."""
        return cls(Path(cfg.checkpoint_root) / cfg.run, Path(cfg.log_root) / cfg.run)

    def checkpoint(self, number: int, partial: bool) -> Path:
        """A checkpoint file of the run (checkpoint_name)."""
        return self.checkpoints / checkpoint_name(number, partial)

    @property
    def lock(self) -> Path:
        return self.checkpoints / LOCK

    @property
    def replay_store(self) -> Path:
        return self.checkpoints / REPLAY_STORE

    @property
    def log_file(self) -> Path:
        return self.logs / "azshogi.log"

    @property
    def config_file(self) -> Path:
        return self.logs / "config.yaml"

    @property
    def eval(self) -> Path:
        return self.logs / "eval"

    @property
    def eval_ratings(self) -> Path:
        """The in-loop evaluations so far: one JSON object per evaluated checkpoint."""
        return self.eval / "ratings.json"

    @property
    def eval_previous(self) -> Path:
        """The last evaluated weights: the next evaluation's `previous` opponent."""
        return self.eval / "previous.pt"

    def eval_record(self, checkpoint: int, opponent: str, index: int) -> Path:
        """A game of the evaluation of `checkpoint` against `opponent`, as CSA."""
        return self.eval / f"ckpt{checkpoint:05d}" / opponent / f"game-{index:04d}.csa"

    def kif(self, checkpoint: int, game_id: int) -> Path:
        """A self-play game finished on the way to `checkpoint`."""
        return self.logs / "games" / f"ckpt{checkpoint:05d}-game{game_id}.kif"

    def hcpe3(self, checkpoint_file: Path) -> Path:
        """The games whose positions entered the buffer since the previous checkpoint file."""
        return self.logs / "hcpe3" / Path(checkpoint_file).with_suffix(".hcpe3").name


def replay_store_of(checkpoint_file: Path) -> Path:
    """The store a checkpoint file's replay window lives in: beside it, whichever run it is."""
    return Path(checkpoint_file).parent / REPLAY_STORE
