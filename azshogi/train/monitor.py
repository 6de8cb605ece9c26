"""What a run shows: TensorBoard scalars, a plain log file, and the console's progress bars.

TensorBoard tags are grouped by prefix: eval/ (play/gauntlet.py), train/, selfplay/, perf/; the
run writes a layout for TensorBoard's Custom Scalars tab that puts strength first, then the
losses and how self-play goes (`LAYOUT`). Every point's step is the training step count, and a
resumed run purges points past its checkpoint's step (TensorBoard's purge_step: readers drop
every earlier point at or past it), so no point is ever duplicated.
During a self-play phase, selfplay/live/ points come every LIVE_SCALARS_SECONDS (moves/s, games
finished, their mean length, positions), at steps spread between the previous checkpoint's step
and the next one's in proportion to the phase's progress, so that curves appear within a minute
of any run. Those of a phase stopped in mid self-play lie past its checkpoint's step: the resumed
run writes them again after its purge, and its own live points of that phase continue after them.
"""
from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from tqdm import tqdm
from tqdm.utils import disp_len

from azshogi.selfplay.drivers import DriverStatus
from azshogi.shogi.rules import MATCH_ONLY, Termination
from azshogi.train.phases import PhaseTimes, SelfPlayPhaseStats, TrainPhaseStats

PHASE_TAGS = {"train": "training"}  # perf/seconds_<tag>; the training tag predates the others
LIVE = "selfplay/live/"

log = logging.getLogger("azshogi")
PROGRESS_LINE_SECONDS = 60.0  # without bars: a progress line (console and log) this often
LIVE_SCALARS_SECONDS = 30.0  # selfplay/live/ points in TensorBoard this often during self-play
BAR_REFRESH_SECONDS = 0.5  # the self-play bar is redrawn at most this often as moves are played
BAR_TICK_SECONDS = 1.0  # and at least this often (its clock), however long a move takes
# TensorBoard's Custom Scalars tab: what a user watches first, in this order ({category: {chart:
# ["Multiline", [tag patterns]]}}; the eval/ charts fill in once the in-loop evaluation has run).
LAYOUT = {
    "strength (eval/)": {
        "rating on the ladder (random = 0), by training step": ["Multiline", [r"^eval/rating$"]],
        "rating by training time (s)": ["Multiline", [r"^eval/rating_vs_seconds$"]],
        "win rate against each opponent": ["Multiline", [r"^eval/win_rate/"]],
    },
    "losses (train/)": {
        "policy loss": ["Multiline", [r"^train/policy_loss$"]],
        "value loss": ["Multiline", [r"^train/value_loss$"]],
        "opponent-policy loss (model.opponent_policy)": ["Multiline", [r"^train/opponent_policy_loss$"]],
    },
    "self-play (selfplay/, perf/)": {
        "how games end (share of a phase's games)": ["Multiline", [r"^selfplay/termination_rate/"]],
        "mean game length (moves)": ["Multiline", [r"^selfplay/mean_game_length$"]],
        "stage of the run's schedule (0 = its own settings)": ["Multiline", [r"^run/stage$"]],
        "moves per second (live)": ["Multiline", [r"^selfplay/live/moves_per_s$"]],
    },
}
BAR_MIN_WIDTH = 8  # the self-play bar's own width, at least: its words take what is left


def terminal_columns(stream=None) -> Optional[int]:
    """The width of the terminal `stream` (stderr by default) is, or None (not a terminal, or one
    that reports 0 columns)."""
    stream = sys.stderr if stream is None else stream
    try:
        return (stream.isatty() and os.get_terminal_size(stream.fileno()).columns) or None
    except (AttributeError, OSError, ValueError):
        return None


def draws_bars(stream) -> bool:
    """Whether progress bars can be drawn on `stream`: a terminal that reports its width. Without
    one (a file, a pipe, or a terminal that reports 0x0) progress goes out as plain lines."""
    return terminal_columns(stream) is not None


def setup_logging(log_file: Path) -> logging.Handler:
    """Appends INFO and above to `log_file` (logs/<run>/azshogi.log); returns the handler (to
    remove later)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def say(line: str) -> None:
    """A line for the console (above any progress bar, which is drawn again below it) and the
    plain log."""
    log.info(line)
    tqdm.write(line, file=sys.stderr)


def say_soon(line: str) -> None:
    """`say` from a signal handler, at once: a short-lived thread writes the line, since the
    handler may have interrupted its own thread in the middle of writing to the console."""
    threading.Thread(target=say, args=(line,), name="azshogi-say", daemon=True).start()


def stopped_phase_points(log_dir: Path, purge_step: int) -> list[tuple[str, float, int, float]]:
    """The selfplay/live/ points (tag, value, step, wall time) at or past `purge_step` in the
    newest event file of `log_dir`, when that session wrote nothing else there: the phase it was
    stopped in with its checkpoint (or lost in a crash in mid self-play), whose live points the
    resumed run's purge would otherwise drop. After a crash in training, or when an older
    checkpoint is resumed, the newest file holds other points past it: nothing is kept."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    files = sorted(Path(log_dir).glob("events.out.tfevents.*"), key=lambda p: (p.stat().st_mtime, p.name))
    if not files:
        return []
    points = []
    for event in EventFileLoader(str(files[-1])).Load():
        if event.step < purge_step or not event.HasField("summary"):
            continue
        for value in event.summary.value:
            # The loader gives scalars as one-float tensors (or, older, as simple values).
            number = value.tensor.float_val if value.HasField("tensor") else [value.simple_value]
            if not (value.tag.startswith(LIVE) and len(number) == 1):
                return []
            points.append((value.tag, float(number[0]), event.step, event.wall_time))
    return points


class Monitor:
    def __init__(self, log_dir: Path, purge_step: Optional[int], show_progress: bool = True):
        from torch.utils.tensorboard import SummaryWriter

        kept = stopped_phase_points(log_dir, purge_step) if purge_step is not None else []
        self.writer = SummaryWriter(str(log_dir), purge_step=purge_step)
        self.writer.add_custom_scalars(LAYOUT)
        for tag, value, step, wall_time in kept:  # after the purge, which now keeps them
            self.writer.add_scalar(tag, value, step, walltime=wall_time)
        self.live_after = max((step for _, _, step, _ in kept), default=None)  # the resumed phase goes on after
        self.max_plies: Optional[int] = None  # rules.max_plies, from `hyperparameters`
        self.show_progress = show_progress and draws_bars(sys.stderr)
        self.bar: Optional[tqdm] = None
        # Without a terminal (nohup, a service, one of size 0x0) progress goes out as a line once a
        # minute instead.
        self.quiet_progress = show_progress and not self.show_progress
        self._last_line = time.monotonic()

    # --- console ---
    def start_bar(self, description: str, total: int, unit: str, initial: int = 0) -> None:
        self.close_bar()
        self.bar = tqdm(total=total, initial=initial, desc=description, unit=unit, leave=False,
                        disable=not self.show_progress, dynamic_ncols=True)
        # A disabled bar keeps no description or count: the quiet progress lines keep their own.
        self.phase: dict[str, Any] = {"description": description, "done": initial, "total": total, "unit": unit}

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
        say(line)

    def start_selfplay(self, description: str, target: int, in_flight: int, steps: tuple[int, int],
                       eta_now: bool, moves_per_position: float = 1.0,
                       driver_status: Optional[Callable[[], DriverStatus]] = None) -> "SelfPlayProgress":
        """The bar of a self-play phase; eta_now: games of every age are in flight (not the run's
        first phase, whose games all start together)."""
        self.close_bar()
        first, last = steps
        if self.live_after is not None and self.live_after >= first:  # a stopped phase's live points so far
            steps = (min(self.live_after + 1, last), last)
        return SelfPlayProgress(description, target, in_flight, steps, eta_now, self.writer, self.say,
                                self.show_progress, self.quiet_progress, moves_per_position=moves_per_position,
                                max_plies=self.max_plies, driver_status=driver_status)

    # --- TensorBoard ---
    def hyperparameters(self, config: dict, step: int) -> None:
        """The run's settings as a table under Text; the ply limit is kept for the bar's estimate."""
        self.max_plies = config.get("rules", {}).get("max_plies")
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
            if metrics.opponent_policy_loss is not None:
                w.add_scalar("train/opponent_policy_loss", metrics.opponent_policy_loss, step)
            w.add_scalar("train/policy_entropy", metrics.policy_entropy, step)
            w.add_scalar("train/grad_norm", metrics.grad_norm, step)
        w.add_scalar("train/learning_rate", metrics.lr, step)
        w.add_scalar("train/skipped_steps", skipped_total, step)

    def checkpoint(self, step: int, sp: SelfPlayPhaseStats, tr: TrainPhaseStats, replay_size: int,
                   total_positions: int, sample_reuse: float, phase_reuse: float, times: PhaseTimes,
                   stage: int = 0) -> None:
        """A checkpoint's figures; `stage`: the stages of the run's schedule begun (train/stages.py;
        0 = the run's own settings), in force from this checkpoint on."""
        w = self.writer
        w.add_scalar("run/stage", stage, step)
        w.add_scalar("selfplay/games", sp.games, step)
        if sp.games:
            w.add_scalar("selfplay/mean_game_length", sp.mean_length, step)
        for t in Termination:
            if t in MATCH_ONLY:
                continue
            w.add_scalar(f"selfplay/termination/{t.name.lower()}", sp.terminations.get(t, 0), step)
            if sp.games:  # the mix as shares of the phase's games: a draw collapse shows at once
                w.add_scalar(f"selfplay/termination_rate/{t.name.lower()}", sp.terminations.get(t, 0) / sp.games,
                             step)
        if sp.games:
            w.add_scalar("selfplay/black_win_rate", sp.black_wins / sp.games, step)
            w.add_scalar("selfplay/white_win_rate", sp.white_wins / sp.games, step)
            w.add_scalar("selfplay/draw_rate", sp.draws / sp.games, step)
        w.add_scalar("selfplay/positions", sp.new_positions, step)
        if sp.moves:  # playout caps: the share of moves searched cheaply (0 when off)
            w.add_scalar("selfplay/cheap_move_share", sp.play.cheap_moves / sp.moves, step)
        # Resignation (selfplay.resign_threshold; 0 when off): games resigned, games played out
        # past a would-be resignation, and the share of those the would-be resigner did not lose.
        w.add_scalar("selfplay/resigned", sp.play.resigned, step)
        w.add_scalar("selfplay/resign_playouts", sp.play.resign_playouts, step)
        if sp.play.resign_playouts:
            w.add_scalar("selfplay/false_resign_rate", sp.play.false_resign_rate, step)
        suggested = sp.suggested_resign_threshold()  # what the played-out games support (5% false)
        if suggested is not None:
            w.add_scalar("selfplay/resign_threshold_suggested", suggested, step)
        if sp.resign_threshold is not None:  # the threshold the phase played with (resignation on)
            w.add_scalar("selfplay/resign_threshold", sp.resign_threshold, step)
        w.add_scalar("selfplay/positions_total", total_positions, step)
        w.add_scalar("selfplay/replay_size", replay_size, step)
        w.add_scalar("selfplay/sample_reuse", sample_reuse, step)
        w.add_scalar("selfplay/sample_reuse_phase", phase_reuse, step)
        if sp.seconds > 0:
            w.add_scalar("perf/selfplay_positions_per_s", sp.moves / sp.seconds, step)
            w.add_scalar("perf/nn_evals_per_s", sp.play.network.positions / sp.seconds, step)
        if sp.play.network.calls:
            w.add_scalar("perf/mean_batch_size", sp.play.network.positions / sp.play.network.calls, step)
        if sp.moves:  # how deep self-play searches: about its simulations (+1), fewer where leaves end games
            w.add_scalar("perf/nn_evals_per_move", sp.play.network.positions / sp.moves, step)
        for phase, seconds in times.items():  # where the wall time since the previous checkpoint went
            w.add_scalar(f"perf/seconds_{PHASE_TAGS.get(phase, phase)}", seconds, step)
        w.add_scalar("perf/seconds_wall", times.wall, step)
        w.add_scalar("perf/selfplay_share", times.share("selfplay"), step)
        w.add_scalar("perf/seconds_search", sp.play.search_seconds, step)
        w.add_scalar("perf/seconds_inference", sp.play.network.seconds, step)
        if tr.seconds > 0:
            w.add_scalar("perf/train_steps_per_s", tr.steps / tr.seconds, step)
        if tr.mean_surprise is not None:  # train.surprise_weight: the newly scored positions' mean
            w.add_scalar("train/surprise", tr.mean_surprise, step)
        for name, value in sp.driver.scalars.items():  # a cluster's nodes (selfplay/cluster.py)
            w.add_scalar(f"selfplay/driver/{name}", value, step)
        w.flush()

    def close(self) -> None:
        self.close_bar()
        self.writer.close()


class SelfPlayProgress:
    """A self-play phase as it runs; the loop calls `update` between moves.

    The bar's share is moves / (moves + moves still needed): it grows with every move played and
    every game finished, and is 100% exactly when the phase's target is reached. Its one rate is
    moves played per second, and the time left is moves still needed / moves per second.
    In a later phase (`eta_now`) games of every age are in flight, and the moves still needed are
    the positions still needed x `moves_per_position` (1, or 1 / (1 - cheap_search_prob) with
    playout caps, whose cheap moves are no positions). In the run's first phase all games start
    together and positions come only as the first of them end: nearly three times the target's
    moves may be played before it is reached (`first_phase_moves_needed`). There the time left is
    shown once a game has finished ("estimating" before).
    The bar fits the terminal's width (`columns`): on a narrow one its least needed words are
    shortened or left out, the time left last (`text`).
    Without a terminal a line goes to the log every PROGRESS_LINE_SECONDS instead; TensorBoard
    gets selfplay/live/ points every LIVE_SCALARS_SECONDS at steps in `steps` (first, last).
    `in_flight`: the games in progress, unless the driver's status says how many (a cluster's
    nodes together, once they have started)."""

    def __init__(self, description: str, target: int, in_flight: int, steps: tuple[int, int], eta_now: bool,
                 writer, say: Callable[[str], None], show: bool, quiet_lines: bool,
                 clock: Callable[[], float] = time.monotonic, moves_per_position: float = 1.0,
                 max_plies: Optional[int] = None, driver_status: Optional[Callable[[], DriverStatus]] = None,
                 columns: Callable[[], Optional[int]] = terminal_columns):
        self.description, self.target, self.in_flight, self.steps = description, target, in_flight, steps
        self.driver_status = driver_status  # a cluster's nodes, weights versions and games lost
        self.show, self.columns = show, columns
        self.moves_per_position, self.max_plies = moves_per_position, max_plies
        self.top_share = 0.0
        self.eta_now, self.writer, self.say, self.quiet_lines, self.clock = eta_now, writer, say, quiet_lines, clock
        self.start = self.last_refresh = self.last_line = clock()
        self.last_live = (self.start, 0)  # time and moves at the last live point
        self.count = SelfPlayPhaseStats()
        self.bar = tqdm(total=1000, desc=description, leave=False, disable=not show,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}|")
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._refresh()
        if show:  # a move of all games can take seconds on a CPU: the clock goes on meanwhile
            threading.Thread(target=self._tick, name="azshogi-selfplay-bar", daemon=True).start()

    def _refresh(self) -> None:
        """Draws the bar: its share, then `text()` in the room the terminal's width leaves (in
        the format: tqdm's postfix adds a comma)."""
        with self._lock:
            if self._closed.is_set():
                return
            width = self.columns() if self.show else None
            room = None if width is None else width - disp_len(f"{self.description}: 100%||  ") - BAR_MIN_WIDTH
            text = self.text(room)
            self.bar.n = int(1000 * self.share())
            self.bar.ncols = width
            self.bar.bar_format = "{desc}: {percentage:3.0f}%|{bar}| " + text.replace("{", "{{").replace("}", "}}")
            self.bar.refresh()

    def _tick(self) -> None:
        while not self._closed.wait(BAR_TICK_SECONDS):
            self._refresh()

    def moves_needed(self) -> float:
        """Moves still to play until the phase's target is reached (an estimate)."""
        needed = max(0, self.target - self.count.positions) * self.moves_per_position
        first_phase = not self.eta_now and self.max_plies and self.count.moves < self.in_flight * self.max_plies
        return self.first_phase_moves_needed(needed) if needed and first_phase else needed

    def first_phase_moves_needed(self, needed: float) -> float:
        """The run's first phase: the N games in flight started together and are `age` = moves / N
        moves old; only finished games give positions. The games still playing are taken to end
        at ages spread evenly between `age` and the ply limit L (their lengths are unknown but
        above `age`), so the moves of games finished by age x grow by playing x (x² - age²) /
        (2 (L - age)); the phase ends at the x where they reach `needed` (positions x
        moves_per_position), after (x - age) x N more moves. Past L, positions come at about N per
        step."""
        assert self.max_plies is not None  # moves_needed calls this only with a ply limit
        n, limit = self.in_flight, float(self.max_plies)
        age = self.count.moves / n
        playing = max(1, n - self.count.games)
        span = max(limit - age, 1.0)
        by_the_limit = playing * (limit + age) / 2  # the moves of every game still playing
        if needed <= by_the_limit:
            end = math.sqrt(age * age + 2 * span * needed / playing)
        else:
            end = limit + (needed - by_the_limit) / n
        return max(end - age, 0.0) * n

    def share(self) -> float:
        """The phase's progress in [0, 1]; never smaller than before (an estimate that grows as a
        game ends does not move the bar, or the live points' steps, back)."""
        needed = self.moves_needed()
        share = 1.0 if needed == 0 else self.count.moves / (self.count.moves + needed)
        self.top_share = max(self.top_share, share)
        return self.top_share

    def text(self, room: Optional[int] = None) -> str:
        """The bar's words: `16 moves, 8 moves/s | 0/1,000 positions | 0 games done, 8 playing
        | 00:02, ~01:37 left` (and a cluster's nodes before the time). Within `room` characters
        when given: the words least needed go first (playing, games done, moves, a cluster's
        nodes, the time so far, the rate), the positions are shortened, and the time left stays."""
        c, elapsed = self.count, self.clock() - self.start
        driver = self.driver_status() if self.driver_status is not None else DriverStatus()
        if driver.playing:
            self.in_flight = driver.playing
        rate = c.moves / elapsed if elapsed > 0 else 0.0
        if c.positions < self.target:
            positions = [f"{c.positions:,}/{self.target:,} positions", f"{c.positions:,}/{self.target:,} pos."]
        else:  # the moves in flight when the target is reached (a cluster's, many) add theirs
            positions = [f"{c.positions:,} positions (target {self.target:,} reached)", f"{c.positions:,} pos."]
        left = ["time left: estimating" if rate > 0 else ""]  # the run's first phase: how long games are is not known
        if (self.eta_now or c.games) and rate > 0:
            left = [f"~{tqdm.format_interval(self.moves_needed() / rate)} left"]
        # (group, forms from the longest, rank: the lowest goes first on a narrow terminal)
        fields = [(0, [f"{c.moves:,} moves"], 2), (0, [f"{rate:,.0f} moves/s"], 5), (1, positions, 6),
                  (2, [f"{c.games:,} game{'' if c.games == 1 else 's'} done"], 1),
                  (2, [f"{self.in_flight:,} playing"], 0), (3, [driver.line, driver.short], 3),
                  (4, [tqdm.format_interval(elapsed)], 4), (4, left, 7)]
        form = [0] * len(fields)

        def words() -> str:
            groups: dict[int, list[str]] = {}
            for (group, forms, _), i in zip(fields, form):
                if i < len(forms) and forms[i]:
                    groups.setdefault(group, []).append(forms[i])
            return " | ".join(", ".join(g) for g in groups.values())

        for k in sorted(range(len(fields) - 1), key=lambda k: fields[k][2]):  # the time left is never left out
            while room is not None and disp_len(words()) > room and form[k] < len(fields[k][1]):
                form[k] += 1
        return words()

    def update(self, count: SelfPlayPhaseStats, force: bool = False) -> None:
        self.count = count
        now = self.clock()
        if force or now - self.last_refresh >= BAR_REFRESH_SECONDS:
            self.last_refresh = now
            self._refresh()
        if self.quiet_lines and now - self.last_line >= PROGRESS_LINE_SECONDS:
            self.last_line = now
            self.say(f"{self.description}: {self.share():.0%} | {self.text()}")
        if now - self.last_live[0] >= LIVE_SCALARS_SECONDS:
            self.live_scalars(now)

    def live_scalars(self, now: float) -> None:
        c, (then, moves_then) = self.count, self.last_live
        first, last = self.steps
        step = first + int(self.share() * (last - first))
        w = self.writer
        w.add_scalar("selfplay/live/moves_per_s", (c.moves - moves_then) / max(now - then, 1e-9), step)
        w.add_scalar("selfplay/live/games_finished", c.games, step)
        w.add_scalar("selfplay/live/positions", c.positions, step)
        if c.games:
            w.add_scalar("selfplay/live/mean_game_length", c.game_moves / c.games, step)
        w.flush()
        self.last_live = (now, c.moves)

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            self.bar.close()


class Timer:
    def __init__(self):
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
