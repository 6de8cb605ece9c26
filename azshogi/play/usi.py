"""The USI engine (`azshogi-usi`, commands/usi.py): plays a checkpoint on stdin/stdout.

The main thread reads commands; `go` starts a search thread, so `stop`, `ponderhit` and `quit`
are answered while it thinks. Bad input never ends the engine: an unknown command is ignored; a
malformed or illegal `position`, a bad `setoption` value or an unknown option name is answered
with an `info string` and the engine goes on; every `go` ends in a `bestmove` (a malformed
argument is named in an `info string` and left out; without a model or a position the engine
resigns). Options given on the command line become the defaults that `usi` reports (so a
launcher script can fix the checkpoint while a GUI may still change it).

`usi` is answered at once: this module imports neither cshogi nor numpy at the top (they are
loaded in the background after `usiok`) and PyTorch only when `isready` loads the model. isready
also times a few search steps, from which the time manager (play/timeman.py) predicts how long a
step takes, so that no step ends past the deadline.
"""
from __future__ import annotations

import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO, Union

from azshogi import __version__
from azshogi.play.settings import BY_USI, SETTINGS, EngineSettings, Setting
from azshogi.play.timeman import GoLimits, StepTimer, next_step, parse_go, plan

if TYPE_CHECKING:  # numpy and the search are imported when a model loads: the engine starts at once
    from azshogi.play.engine import Engine

ENGINE_NAME = f"azshogi {__version__}"
DEFAULT_NODES = 800  # simulations per move when `go` sets no clock and no node limit
NO_KING = 81  # cshogi's king_square of a side without its king (a mate problem's attacker)
INFO_INTERVAL = 1.0  # seconds between progress `info` lines
WAITING_MATE_SECONDS = 0.2  # the root mate search's time where a `stop` is awaited (df-pn cannot hear it)


# check: bool, spin: int, the other kinds: str; an engine setting's option: the setting's value
OptionValue = Union[bool, int, float, str, None]


@dataclass(frozen=True)
class Option:
    name: str
    kind: str  # check, spin, combo, string, filename
    default: OptionValue
    low: int = 0
    high: int = 0
    choices: tuple = ()
    help: str = ""
    setting: Optional[Setting] = None  # the engine setting it is (play/settings.py), its value the setting's
    pattern: str = ""  # a string option's text must match this (re.fullmatch), e.g. Device's

    def default_text(self, default: OptionValue) -> str:
        """`default` as `usi` declares it (and --list-options prints it): <empty>, auto, true, 0."""
        if self.setting is not None:
            return self.setting.usi_text(default) or "<empty>"
        if self.kind == "check":
            return "true" if default else "false"
        return "<empty>" if default == "" else str(default)

    def declaration(self, default: OptionValue) -> str:
        if self.setting is not None:
            return self.setting.usi_declaration(default)
        text = self.default_text(default)
        if self.kind == "spin":
            return f"option name {self.name} type spin default {text} min {self.low} max {self.high}"
        if self.kind == "combo":
            return f"option name {self.name} type combo default {text} " + " ".join(f"var {c}" for c in self.choices)
        return f"option name {self.name} type {self.kind} default {text}"

    def parse(self, text: str) -> OptionValue:
        if self.setting is not None:
            return self.setting.parse_usi(text)
        text = text.strip()
        if self.pattern and not re.fullmatch(self.pattern, text):
            raise ValueError(f"{self.name} takes {self.help}, got {text!r}")
        if self.kind == "check":
            if text.lower() not in ("true", "false"):
                raise ValueError(f"{self.name} takes true or false, got {text!r}")
            return text.lower() == "true"
        if self.kind == "spin":
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"{self.name} takes an integer, got {text!r}") from None
            if not self.low <= value <= self.high:
                raise ValueError(f"{self.name} must be in [{self.low}, {self.high}], got {value}")
            return value
        if self.kind == "combo":
            if text not in self.choices:
                raise ValueError(f"{self.name} takes one of {', '.join(self.choices)}, got {text!r}")
            return text
        return "" if text == "<empty>" else text


def _setting(name: str) -> Option:
    """The USI option of an engine setting (play/settings.py), generated from its row."""
    setting = BY_USI[name.lower()]
    kind = "spin" if setting.kind == "int" or setting.per_mille else "string"
    return Option(setting.usi, kind, setting.default, help=setting.help, setting=setting)


OPTIONS = (
    Option("Checkpoint", "filename", "", help="the checkpoint file (.pt) to play, or a run's folder: its newest"),
    Option("Device", "string", "auto", help="auto, cpu, cuda or cuda:N", pattern=r"auto|cpu|cuda(:\d+)?"),
    Option("Dtype", "combo", "auto", choices=("auto", "fp32", "bf16", "fp16"), help="inference precision"),
    Option("Threads", "spin", 0, 0, 256, help="CPU threads for the network (0 = PyTorch's default)"),
    *(_setting(s.usi) for s in SETTINGS),
    Option("MateSearch", "check", True, help="df-pn mate search at the root before the tree search "
                                             "(false: as MateSearchNodes 0)"),
    Option("TimeMargin", "spin", 300, 0, 60_000,
           help="milliseconds of the clock kept in reserve for the GUI and the network (not for movetime)"),
    Option("MultiPV", "spin", 1, 1, 600, help="report this many best moves, each with its score and PV"),
    Option("Seed", "spin", 0, 0, 2 ** 31 - 1, help="random seed (temperature sampling)"),
    Option("USI_Ponder", "check", False, help="think on the opponent's time"),
)
_BY_NAME = {o.name.lower(): o for o in OPTIONS}


@dataclass
class Job:
    """One `go`: its limits and the signals the main thread sends to the search thread."""

    limits: GoLimits
    clock_start: float
    stop: threading.Event = field(default_factory=threading.Event)
    ponderhit: threading.Event = field(default_factory=threading.Event)
    silent: bool = False  # cancelled by usinewgame/quit: no bestmove
    answered: bool = False  # its bestmove or checkmate is sent (the thread may still be ending)
    thread: Optional[threading.Thread] = None
    hit_limits: Optional[GoLimits] = None  # the clock a `ponderhit` brought (ShogiHome's early ponder)

    @property
    def waiting(self) -> bool:
        """The answer must wait for `stop`: `go infinite`, `go mate infinite`, or pondering
        before `ponderhit`."""
        return self.limits.infinite or self.limits.mate == -1 or self.pondering

    @property
    def pondering(self) -> bool:
        return self.limits.ponder and not self.ponderhit.is_set()


def _reason(error: Exception) -> str:
    """An error as the GUI's user reads it: its message, without Python's exception class."""
    return str(error) or f"an internal error ({type(error).__name__})"


_SETOPTION = re.compile(r"setoption\s+name\s+(?P<name>.+?)(?:\s+value(?:\s+(?P<value>.*))?)?")
_LIGHT_COMMANDS = {"usi", "setoption", "quit"}  # commands that import nothing heavy


def _preload() -> None:
    """Imports what `position` and `go` need while the GUI is still busy with `usiok`."""
    import azshogi.shogi.positions  # noqa: F401  (cshogi, numpy)


class UsiEngine:
    def __init__(self, out: TextIO = sys.stdout, defaults: Optional[dict] = None):
        self.out = out
        self._lock = threading.Lock()
        self.defaults: dict[str, OptionValue] = {o.name: o.default for o in OPTIONS}
        for name, text in (defaults or {}).items():
            option = _BY_NAME.get(name.lower())
            if option is None:
                raise ValueError(f"unknown option {name!r}; known: {', '.join(o.name for o in OPTIONS)}")
            self.defaults[option.name] = option.parse(str(text))
        self.options: dict[str, OptionValue] = dict(self.defaults)  # as Option.parse returns them
        self.start_sfen: Optional[str] = None
        self.moves: list[str] = []
        self.position_ok = True
        self.job: Optional[Job] = None
        self.engine: Optional[Engine] = None  # once a model is loaded
        self._loaded: Optional[tuple] = None  # (checkpoint, device, dtype, batch) of the loaded model
        self._auto_temperature: Optional[float] = None  # PolicyTemperature auto's value for the loaded model
        self._load_error = ""  # why the last isready loaded no model
        self.timer = StepTimer()  # calibrated by isready
        self._preloading: Optional[threading.Thread] = None
        self._torch_threads: Optional[int] = None  # PyTorch's own thread count, for Threads 0
        self.started_with = ""  # the checkpoint given on the command line: what an empty Checkpoint plays

    def _int(self, name: str) -> int:
        """A spin option's value."""
        value = self.options[name]
        assert isinstance(value, int), (name, value)
        return value

    def _str(self, name: str) -> str:
        """A combo, string or filename option's value."""
        value = self.options[name]
        assert isinstance(value, str), (name, value)
        return value

    def _flag(self, name: str) -> bool:
        """A check option's value."""
        value = self.options[name]
        assert isinstance(value, bool), (name, value)
        return value

    # --- output ---

    def send(self, line: str) -> None:
        with self._lock:
            self._write(line)

    def _write(self, line: str) -> None:
        # ASCII only: a path the GUI sent (Japanese folder names, or bytes of another code page
        # kept by surrogateescape) is echoed escaped, which no GUI's decoder (cshogi's reads
        # Shift-JIS) and no strict stdout fails on.
        self.out.write(line.encode("ascii", "backslashreplace").decode("ascii") + "\n")
        self.out.flush()

    def error(self, message: str) -> None:
        self.send("info string error: " + " ".join(message.split()))

    # --- the command loop ---

    def run(self, read_line: Callable[[], str]) -> None:
        """Reads commands until `quit` or the end of the input."""
        while True:
            line = read_line()
            if not line:  # end of input: the GUI is gone
                self.handle("quit")
                return
            if not self.handle(line):
                return

    def handle(self, line: str) -> bool:
        """Executes one command line; returns False after `quit`."""
        line = line.strip().lstrip("\ufeff")  # some hosts send a byte-order mark first
        tokens = line.split()
        if not tokens:
            return True
        command, args = tokens[0], tokens[1:]
        handler = getattr(self, "cmd_" + command, None) if command.isidentifier() else None
        if handler is None:
            return True  # unknown commands are ignored (USI)
        if self._preloading is not None and command not in _LIGHT_COMMANDS:
            # Two threads importing numpy's and cshogi's extensions at once can break both
            # imports: a command that imports anything waits for the preload to finish.
            self._preloading.join()
        try:
            return handler(args, line) is not False
        except Exception as e:  # never let one bad line end the engine
            self.error(f"{command}: {_reason(e)}")
            return True

    def cmd_usi(self, args, line):
        self.send(f"id name {ENGINE_NAME}")
        self.send("id author the azshogi authors")
        for option in OPTIONS:
            self.send(option.declaration(self.defaults[option.name]))
        self.send("usiok")
        if self._preloading is None:
            self._preloading = threading.Thread(target=_preload, daemon=True)
            self._preloading.start()

    def cmd_setoption(self, args, line):
        # `value` with nothing after it is an empty value (cshogi.usi.Engine sends
        # `setoption name Checkpoint value ` to clear a string)
        match = _SETOPTION.fullmatch(line.strip())
        if match is None:
            raise ValueError("setoption needs 'name NAME [value VALUE]'")
        name, value = match["name"], match["value"] or ""
        option = _BY_NAME.get(name.strip().lower())
        if option is None:
            if not name.strip().upper().startswith("USI_"):  # GUIs send USI_Hash etc. to every engine
                self.send(f"info string setoption: azshogi has no option {name.strip()!r} (ignored); "
                          f"its options: {', '.join(o.name for o in OPTIONS)}")
            return
        if option.kind == "check" and not value:
            value = "true"
        self.options[option.name] = option.parse(value)

    def cmd_isready(self, args, line):
        # During a search: answered at once, and the search goes on to its bestmove (UCI's rule;
        # USI leaves it open); the options set since take effect at the next isready.
        if self._searching():
            self.send("readyok")
            return
        self._cancel()
        try:
            self._load()
            self._load_error = ""
        except Exception as e:
            self.engine, self._load_error = None, _reason(e)
            self.error(f"cannot load the model: {self._load_error}")
        finally:
            self.send("readyok")

    def cmd_usinewgame(self, args, line):
        self._cancel()
        if self.engine is not None:
            self.engine.search.clear()

    def cmd_position(self, args, line):
        from azshogi.shogi.positions import board_after, parse_position

        self._finish_running()
        try:
            start, moves = parse_position(args, tsume=True)  # a mate problem may lack the attacker's king
            board_after(start, moves)
        except Exception as e:  # a PositionError, or whatever else fails: never the previous position
            self.position_ok = False
            self.error(f"position: {_reason(e)}; the engine resigns until a valid position arrives")
            return
        self.start_sfen, self.moves, self.position_ok = start, moves, True

    def cmd_go(self, args, line):
        self._finish_running()
        job = Job(parse_go(args), time.perf_counter())
        self.job = job
        target = self._go_mate if job.limits.mate is not None else self._think
        job.thread = threading.Thread(target=self._guarded, args=(target, job), daemon=True)
        job.thread.start()

    def cmd_stop(self, args, line):
        if self.job is not None:
            self.job.stop.set()
            self._join()

    def cmd_ponderhit(self, args, line):
        # `ponderhit btime B wtime W byoyomi Y`: the clock as it stands now (YaneuraOu's extension,
        # ShogiHome's early ponder, whose `go ponder` has no clock)
        job = self.job
        if job is not None and job.limits.ponder:
            job.clock_start = time.perf_counter()
            if args:
                job.hit_limits = parse_go(args)
                for message in job.hit_limits.errors:
                    self.error(message.replace("go ", "ponderhit ", 1))
            job.ponderhit.set()

    def cmd_gameover(self, args, line):
        # As `stop`: a go still running is answered (YaneuraOu's way; cshogi's match runner,
        # pondering, waits for that bestmove, and GUIs that stop first ignore it).
        self.cmd_stop(args, line)

    def cmd_quit(self, args, line):
        self._cancel()
        return False

    # --- searches ---

    def _searching(self) -> bool:
        """A `go` not answered yet. Its thread outlives the answer by a moment; a GUI's next
        command (isready, position) may come in that moment and must not wait for it."""
        job = self.job
        return job is not None and not job.answered and job.thread is not None and job.thread.is_alive()

    def _answer(self, job: Job, line: str) -> None:
        """Sends a `go`'s answer (bestmove, checkmate), unless gameover or quit cancelled it."""
        with self._lock:  # answered as it is sent: a next go's lines cannot come before it
            if not job.silent:
                job.answered = True
                self._write(line)

    def _finish_running(self) -> None:
        """A new position or go while a search runs (a GUI waits for bestmove first, a script
        may not): a search with limits is let finish; `go infinite` or an unanswered ponder is
        stopped as `stop` would."""
        job = self.job
        if job is not None and self._searching():
            if job.waiting:
                job.stop.set()
            self._join()

    def _cancel(self) -> None:
        if self.job is not None:
            self.job.silent = True
            self.job.stop.set()
            self._join()

    def _join(self) -> None:
        job = self.job
        if job is not None and job.thread is not None:
            job.thread.join()
        self.job = None

    def _guarded(self, target, job: Job) -> None:
        """Runs a `go`; whatever goes wrong, the GUI still gets its answer."""
        try:
            for message in job.limits.errors:
                self.error(message)
            target(job)
        except Exception as e:
            self.error(f"search: {_reason(e)}")
            if job.limits.mate is not None:
                self._answer(job, "checkmate notimplemented")
            else:
                self._bestmove(job, "resign")

    def _bestmove(self, job: Job, move: str, ponder: Optional[str] = None) -> None:
        """Sends bestmove, after `stop` (or `ponderhit`) when the protocol asks to wait."""
        while job.waiting and not job.stop.is_set():
            job.stop.wait(0.05)
        self._answer(job, f"bestmove {move}" + (f" ponder {ponder}" if ponder else ""))

    def _load(self) -> None:
        import torch

        from azshogi.play.engine import Engine
        from azshogi.play.models import model_evaluator, network_file

        if self._torch_threads is None:
            self._torch_threads = torch.get_num_threads()
        torch.set_num_threads(self._int("Threads") or self._torch_threads)
        given = self._str("Checkpoint") or self.started_with
        if not given:
            raise ValueError("no checkpoint: set the Checkpoint option (or start azshogi-usi with a path)")
        path = network_file(given)  # a run's folder: its newest checkpoint
        settings = self.settings()
        device, dtype, batch = self._str("Device"), self._str("Dtype"), settings.max_batch
        key = (os.path.abspath(path), device, dtype, batch)
        if self._loaded != key:
            self.engine, self._loaded = None, None
            self._evaluator, self._cfg = model_evaluator(str(path), device, dtype, max_batch=batch)
            if path != Path(given):
                self.send(f"info string Checkpoint {given}: playing its newest, {path.name}")
            self._loaded, self._auto_temperature = key, None
        self.engine = Engine(self._evaluator, self._cfg, settings, seed=self._int("Seed"),
                             known_temperature=self._auto_temperature)
        if self.engine.auto and self._auto_temperature is None:  # auto: chosen once per loaded network
            self._auto_temperature = self.engine.policy_temperature
            self.send(f"info string PolicyTemperature auto: {self._auto_temperature:g} (from the network's policy)")
        self._calibrate()

    def settings(self) -> EngineSettings:
        """The engine settings the options describe (play/settings.py); MateSearch false turns
        the root mate search off."""
        values: dict[str, Any] = {s.field: self.options[s.usi] for s in SETTINGS}
        settings = EngineSettings(**values)
        return settings if self._flag("MateSearch") else replace(settings, mate_search_nodes=0)

    def _calibrate(self) -> None:
        """Warm-up steps from the start position (the first calls of PyTorch are slow), timed
        at one leaf and at BatchSize leaves for the time manager."""
        import cshogi

        assert self.engine is not None  # _load made it
        board, search, samples = cshogi.Board(), self.engine.search, []
        search.prepare(board, "", [])
        batch = search.batch_size
        for leaves in (1, batch, 1, batch):  # the first of each size pays for warm-up
            def step(progress, leaves: int = leaves) -> int:  # one step of `leaves` leaves
                return 0 if progress.step_leaves else leaves

            report = search.run(board, 0, step)
            samples.append((leaves, report.seconds))
        self.timer.calibrate(samples)
        search.clear()

    def _think(self, job: Job) -> None:
        """The engine decides (play/engine.Engine.decide); this side keeps the clock and the protocol."""
        import cshogi

        from azshogi.shogi.positions import board_after

        engine = self.engine
        if engine is None:
            self.error("no model loaded: " + (self._load_error or "set the Checkpoint option, then send isready"))
            return self._bestmove(job, "resign")
        if not self.position_ok:
            self.error("no valid position")
            return self._bestmove(job, "resign")
        engine.retune(self.settings())  # NodesPerMove, ResignThreshold, Temperature(Plies) set since isready
        board = board_after(self.start_sfen, self.moves)
        if NO_KING in (board.king_square(cshogi.BLACK), board.king_square(cshogi.WHITE)):
            return self._mate_problem(job, board)
        ply = board.move_number - 1
        limits = job.limits
        time_plan = plan(limits, board.turn == cshogi.BLACK, ply, self._int("TimeMargin"))
        if time_plan is not None and time_plan.note and not board.is_game_over():
            self.send("info string " + time_plan.note)
        max_nodes = limits.nodes if limits.nodes is not None else (engine.settings.nodes or None)
        # With no clock and no node limit, a plain `go` searches DEFAULT_NODES, and so does a
        # `go ponder` from its `ponderhit` on (before it, it searches until stop or ponderhit).
        after_hit = None
        if max_nodes is None and time_plan is None and not limits.infinite:
            if limits.ponder:
                after_hit = DEFAULT_NODES
            else:
                max_nodes = DEFAULT_NODES
        last_info = [time.perf_counter()]
        # BatchSize auto: 8 by the clock, fewer when a node limit alone bounds the search
        batch = engine.settings.batch_for(max_nodes if time_plan is None else None)
        search, lines = engine.search, self._int("MultiPV")

        hit_plan: list = []  # the budget of a clock that came with the ponderhit, once planned

        def plan_step(progress) -> int:
            if progress.step_leaves:
                self.timer.observe(progress.step_leaves, progress.step_seconds)
            if job.stop.is_set():
                return 0
            clock = time_plan
            if job.hit_limits is not None and job.ponderhit.is_set():
                if not hit_plan:
                    hit_plan.append(plan(job.hit_limits, board.turn == cshogi.BLACK, ply, self._int("TimeMargin")))
                clock = hit_plan[0] or time_plan
            if clock is None and after_hit is not None and job.ponderhit.is_set() and progress.nodes >= after_hit:
                return 0
            now = time.perf_counter()
            if now - last_info[0] >= INFO_INTERVAL:
                last_info[0] = now
                self._info(search.report(0, progress.nodes, progress.seconds, lines))
            if limits.infinite:
                return batch
            return next_step(clock, now - job.clock_start, progress, self.timer, batch, job.pondering)

        def prepared(reused: int) -> None:
            if reused:
                self.send(f"info string reused {reused} nodes of the previous search")

        # At most a tenth of the move's time for the mate search (also when pondering: a
        # ponderhit may start the clock while df-pn, which cannot be interrupted, still runs);
        # without a clock, MateSearchNodes, except where a `stop` is awaited (`go infinite`, a
        # ponder), which df-pn would keep waiting: WAITING_MATE_SECONDS.
        mate_seconds = None if time_plan is None else 0.1 * time_plan.target
        if time_plan is None and job.waiting:
            mate_seconds = WAITING_MATE_SECONDS
        decision = engine.decide(board, self.start_sfen, self.moves, ply, plan_step, max_nodes=max_nodes, lines=lines,
                                 mate_seconds=mate_seconds, on_prepared=prepared)
        if decision.why:
            self.send("info string " + decision.why)
        if decision.mate:
            mate_usi = [cshogi.move_to_usi(m) for m in decision.mate]
            self.send(f"info depth {len(mate_usi)} nodes 0 score mate {len(mate_usi)} pv {' '.join(mate_usi)}")
        elif decision.report is not None:
            self._info(decision.report, decision.pv)
        usi = [cshogi.move_to_usi(m) for m in decision.pv[1:2]]
        ponder = usi[0] if usi and decision.move not in ("resign", "win") else None
        self._bestmove(job, decision.move, ponder)

    def _mate_problem(self, job: Job, board) -> None:
        """A plain `go` in a mate problem (a side without its king): the network and the search
        know only whole games (cshogi's one-ply mate check would even mate the missing king), so
        the answer is df-pn's mate, or resign."""
        import cshogi

        from azshogi.shogi.rules import mate_line, mate_nodes

        # as long as the move's time allows (df-pn cannot hear a stop: WAITING_MATE_SECONDS where
        # one is awaited); the defender to move has no king to mate (cshogi's one-ply check would)
        time_plan = plan(job.limits, board.turn == cshogi.BLACK, board.move_number - 1, self._int("TimeMargin"))
        seconds = time_plan.target if time_plan is not None else WAITING_MATE_SECONDS if job.waiting else None
        nodes = mate_nodes(self._int("MateSearchNodes") * 10 if self._flag("MateSearch") else 0, seconds)
        has_target = board.king_square(1 - board.turn) != NO_KING
        line = mate_line(board, nodes) if has_target else []
        if not line:
            self.send("info string a position without both kings is a mate problem: no mate found (go mate "
                      "searches one)")
            return self._bestmove(job, "resign")
        usi = [cshogi.move_to_usi(m) for m in line]
        self.send(f"info depth {len(usi)} nodes 0 score mate {len(usi)} pv {' '.join(usi)}")
        self._bestmove(job, usi[0], usi[1] if len(usi) > 1 else None)

    def _info(self, report, pv=None) -> None:
        """The search's figures: one `info ... pv` line, or with MultiPV k > 1 the k best root
        moves as `info multipv i ... score cp ... pv` lines, best first (each scored by its
        own value; the single line uses the root's)."""
        import cshogi

        from azshogi.shogi.scores import win_rate_to_cp

        pv = report.pv if pv is None else pv
        assert self.engine is not None  # a search runs on a loaded engine
        hashfull = min(1000, report.tree_nodes * 1000 // max(1, self.engine.settings.max_tree_nodes))
        common = f"nodes {report.nodes} nps {report.nps} time {int(report.seconds * 1000)} hashfull {hashfull}"
        self.send(f"info string win rate {report.win_rate:.1%}, {report.nodes} simulations, "
                  f"{report.tree_nodes} nodes in the tree")
        if self._int("MultiPV") <= 1:
            self.send(f"info depth {max(1, len(pv))} {common} score cp {win_rate_to_cp(report.win_rate)} "
                      f"pv {' '.join(cshogi.move_to_usi(m) for m in pv)}")
            return
        for i, line in enumerate(report.lines, 1):
            self.send(f"info multipv {i} depth {len(line.pv)} {common} score cp {win_rate_to_cp(line.win_rate)} "
                      f"pv {' '.join(cshogi.move_to_usi(m) for m in line.pv)}")

    def _go_mate(self, job: Job) -> None:
        """`go mate`: df-pn only, at most ten times MateSearchNodes nodes and what the time
        given allows (rules.mate_nodes); answers `checkmate <moves>`, `checkmate nomate`,
        `checkmate timeout` (the limit reached first) or `checkmate notimplemented` (in check:
        cshogi's solver needs the attacker out of check)."""
        import cshogi

        from azshogi.shogi.positions import board_after
        from azshogi.shogi.rules import mate_line, mate_nodes

        board = board_after(self.start_sfen, self.moves) if self.position_ok else None
        if board is None or board.is_check():
            self._answer(job, "checkmate notimplemented")
            return
        budget = job.limits.mate
        nodes = mate_nodes(max(self._int("MateSearchNodes"), 1) * 10,
                           None if budget is None or budget < 0 else max(budget, 1) / 1000)
        solver = cshogi.DfPn()
        line = mate_line(board, nodes, solver)
        while budget == -1 and not job.stop.is_set():  # infinite: answer after stop
            job.stop.wait(0.05)
        if line:
            self._answer(job, "checkmate " + " ".join(cshogi.move_to_usi(m) for m in line))
        else:
            self._answer(job, "checkmate " + ("timeout" if solver.searched_node >= nodes else "nomate"))
