"""What a run shows: TensorBoard scalars, a plain log file, and the console's progress bars.

TensorBoard tags are grouped by prefix: train/, selfplay/, perf/. Every point's step is the
training step count, and a resumed run purges points past its checkpoint's step, so no point is
ever duplicated.
"""
from __future__ import annotations

import collections
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tqdm import tqdm

from azshogi.shogi.rules import Termination

log = logging.getLogger("azshogi")
PROGRESS_LINE_SECONDS = 60.0


def setup_logging(log_dir: Path) -> logging.Handler:
    """Appends INFO and above to logs/<run>/azshogi.log; returns the handler (to remove later)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_dir / "azshogi.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


@dataclass
class SelfPlayStats:
    """Figures of one self-play phase."""

    games: int = 0
    positions: int = 0
    lengths: list = field(default_factory=list)
    terminations: collections.Counter = field(default_factory=collections.Counter)
    black_wins: int = 0
    white_wins: int = 0
    draws: int = 0
    seconds: float = 0.0
    moves_played: int = 0  # positions searched, including games still in progress
    nn_calls: int = 0
    nn_positions: int = 0
    nn_seconds: float = 0.0
    search_seconds: float = 0.0

    def add_game(self, length: int, termination: Termination, winner: Optional[int]) -> None:
        self.games += 1
        self.positions += length
        self.lengths.append(length)
        self.terminations[termination] += 1
        if winner is None:
            self.draws += 1
        elif winner == 0:
            self.black_wins += 1
        else:
            self.white_wins += 1


@dataclass
class TrainStats:
    steps: int = 0
    skipped: int = 0
    policy_loss: float = 0.0
    value_loss: float = 0.0
    seconds: float = 0.0

    def add(self, metrics) -> None:
        self.steps += 1
        if metrics.skipped:
            self.skipped += 1
            return
        self.policy_loss += metrics.policy_loss
        self.value_loss += metrics.value_loss

    def mean(self, total: float) -> float:
        done = self.steps - self.skipped
        return total / done if done else float("nan")


class Monitor:
    def __init__(self, log_dir: Path, purge_step: Optional[int], show_progress: bool = True):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(log_dir), purge_step=purge_step)
        self.show_progress = show_progress and sys.stderr.isatty()
        self.bar: Optional[tqdm] = None
        # Without a terminal (nohup, a service) progress goes to the log once a minute instead.
        self.quiet_progress = show_progress and not self.show_progress
        self._last_line = time.monotonic()

    # --- console ---
    def start_bar(self, description: str, total: int, unit: str, initial: int = 0) -> None:
        self.close_bar()
        self.bar = tqdm(total=total, initial=initial, desc=description, unit=unit, leave=False,
                        disable=not self.show_progress, dynamic_ncols=True)
        # A disabled bar keeps no description or count: the quiet progress lines keep their own.
        self.phase = {"description": description, "done": initial, "total": total, "unit": unit}

    def advance(self, n: int, **postfix) -> None:
        if self.bar is not None:
            self.bar.update(n)
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)
            p = self.phase
            p["done"] += n
            if self.quiet_progress and time.monotonic() - self._last_line >= PROGRESS_LINE_SECONDS:
                self._last_line = time.monotonic()
                extra = ", ".join(f"{k} {v}" for k, v in postfix.items())
                self.say(f"{p['description']}: {p['done']:,}/{p['total']:,} {p['unit']}"
                         + (f" ({extra})" if extra else ""))

    def close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def say(self, line: str) -> None:
        """A line for the console and the plain log."""
        log.info(line)
        tqdm.write(line, file=sys.stderr)

    # --- TensorBoard ---
    def hyperparameters(self, config: dict, step: int) -> None:
        rows = ["| key | value |", "|---|---|"]

        def walk(prefix, node):
            for k, v in node.items():
                if isinstance(v, dict):
                    walk(f"{prefix}{k}.", v)
                else:
                    rows.append(f"| {prefix}{k} | {json.dumps(v)} |")

        walk("", config)
        self.writer.add_text("hyperparameters", "\n".join(rows), step)

    def train_step(self, step: int, metrics, skipped_total: int) -> None:
        w = self.writer
        if not metrics.skipped:
            w.add_scalar("train/policy_loss", metrics.policy_loss, step)
            w.add_scalar("train/value_loss", metrics.value_loss, step)
            w.add_scalar("train/policy_entropy", metrics.policy_entropy, step)
            w.add_scalar("train/grad_norm", metrics.grad_norm, step)
        w.add_scalar("train/learning_rate", metrics.lr, step)
        w.add_scalar("train/skipped_steps", skipped_total, step)

    def checkpoint(self, step: int, sp: SelfPlayStats, tr: TrainStats, replay_size: int,
                   total_positions: int, sample_reuse: float, phase_reuse: float) -> None:
        w = self.writer
        w.add_scalar("selfplay/games", sp.games, step)
        if sp.lengths:
            w.add_scalar("selfplay/mean_game_length", sum(sp.lengths) / len(sp.lengths), step)
        for t in Termination:
            w.add_scalar(f"selfplay/termination/{t.name.lower()}", sp.terminations.get(t, 0), step)
        if sp.games:
            w.add_scalar("selfplay/black_win_rate", sp.black_wins / sp.games, step)
            w.add_scalar("selfplay/white_win_rate", sp.white_wins / sp.games, step)
            w.add_scalar("selfplay/draw_rate", sp.draws / sp.games, step)
        w.add_scalar("selfplay/positions", sp.positions, step)
        w.add_scalar("selfplay/positions_total", total_positions, step)
        w.add_scalar("selfplay/replay_size", replay_size, step)
        w.add_scalar("selfplay/sample_reuse", sample_reuse, step)
        w.add_scalar("selfplay/sample_reuse_phase", phase_reuse, step)
        if sp.seconds > 0:
            w.add_scalar("perf/selfplay_positions_per_s", sp.moves_played / sp.seconds, step)
            w.add_scalar("perf/nn_evals_per_s", sp.nn_positions / sp.seconds, step)
        if sp.nn_calls:
            w.add_scalar("perf/mean_batch_size", sp.nn_positions / sp.nn_calls, step)
        w.add_scalar("perf/seconds_selfplay", sp.seconds, step)
        w.add_scalar("perf/seconds_search", sp.search_seconds, step)
        w.add_scalar("perf/seconds_inference", sp.nn_seconds, step)
        w.add_scalar("perf/seconds_training", tr.seconds, step)
        if tr.seconds > 0:
            w.add_scalar("perf/train_steps_per_s", tr.steps / tr.seconds, step)
        w.flush()

    def close(self) -> None:
        self.close_bar()
        self.writer.close()


class Timer:
    def __init__(self):
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
