"""The alternating loop: self-play, pause, train the same model, checkpoint, resume.

    1. Self-play: all actors advance together until `positions_per_checkpoint` new training
       positions have come from finished games (checked each time a game ends; with playout
       caps, only the fully searched moves are training positions); in this process, or in
       `selfplay.num_workers` worker processes served by this process's one model (workers.py).
    2. Pause: games in progress are kept, boards and pending targets included (in the workers).
    3. Train: `steps_per_checkpoint` optimizer steps on the same nn.Module.
    4. Checkpoint: where a stage of the run's schedule begins (train/stages.py), its settings
       first (`enter_stage`: the network grown, the replay window resized, self-play rebuilt);
       then everything needed to continue exactly, written atomically (the replay window as a
       reference into the run's replay store, to which only the phase's new positions are
       appended); TensorBoard points; every `eval.every` checkpoints, the evaluation matches.
    5. Resume self-play with the updated weights, until `max_checkpoints` or Ctrl-C / SIGTERM
       (which ends with a checkpoint of the phase in progress; an evaluation it interrupts runs
       again when the run resumes).

The wall time between two checkpoint lines is split into phases (phases.py) on the line and in
TensorBoard's perf/. A start that fails (a bad `resume=`, a seed file) leaves no file behind.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from omegaconf import OmegaConf

from azshogi.config import (
    ClusterBackend,
    Config,
    ConfigError,
    SearchKind,
    from_plain,
    resolve_selfplay,
    stage_settings,
    stages_in_order,
)
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.dlshogi import Hcpe3Writer
from azshogi.formats.files import write_atomically
from azshogi.formats.paths import RunPaths
from azshogi.formats.records import write_kif
from azshogi.formats.replay_store import ReplayStore, ReplayStoreError
from azshogi.nn.cpu_bf16 import bf16_is_fast
from azshogi.nn.evaluator import LocalEvaluator, make_evaluator, resolve_device
from azshogi.nn.network import from_config
from azshogi.selfplay import in_progress, resignation
from azshogi.selfplay.drivers import SelfPlayDriver, machine_cores, server_batch
from azshogi.selfplay.local import local_driver
from azshogi.shogi.game_record import SelfPlayGame
from azshogi.train import stopping, surprise
from azshogi.train.device_replay import DeviceReplay, on_device
from azshogi.train.monitor import Monitor, Timer, log, setup_logging
from azshogi.train.phases import PhaseClock, SelfPlayPhaseStats, TrainPhaseStats
from azshogi.train.replay import ReplayBuffer, StoredReplay, seed_buffer
from azshogi.train.run_state import RunCounters, RunState, changed_since
from azshogi.train.stages import config_at, entered, flat_stage_due, in_force, never_flat, play_config, stage_at
from azshogi.train.trainer import Trainer


class EvaluationInterrupted(Exception):
    """Ctrl-C or SIGTERM during an evaluation: it stops at once and runs again on resume."""


@dataclass
class Components:
    """The objects of a run, wired together: one model (the run state's), seen by the evaluator
    and the trainer. Self-play evaluates through `evaluator`, in this process or as the workers'
    inference server."""

    device: torch.device
    run_state: RunState  # model, trainer, counters, random streams
    evaluator: LocalEvaluator
    selfplay: SelfPlayDriver
    cfg: Config  # with self-play's auto settings made concrete for this machine
    note: str  # what those are
    given: Config  # as given (a cluster's nodes resolve the auto settings for their own machines)

    @property
    def model(self) -> torch.nn.Module:
        return self.run_state.model


def build_components(cfg: Config, stand_in: Optional[float] = None) -> Components:
    """Seeds every random stream from cfg.seed and builds the run state (model, trainer), the
    evaluator and self-play (in process, or in `selfplay.num_workers` worker processes, or on
    the nodes of a Ray cluster with cluster.backend=ray; processes start on first use).
    stand_in: the evaluator answers without the network, after this many seconds (azshogi-bench's
    instant and delay modes)."""
    device = resolve_device(cfg.device)
    given = cfg
    cfg, note = resolve_selfplay(cfg, device.type, machine_cores())
    run_state = RunState(cfg, device)
    evaluator = make_evaluator(run_state.model, device, cfg.inference, server_batch(cfg), stand_in)
    selfplay, driver_note = selfplay_driver(given, cfg, run_state, evaluator, stand_in)
    return Components(device, run_state, evaluator, selfplay, cfg, driver_note or note, given)


def selfplay_driver(given: Config, cfg: Config, run_state: RunState, evaluator: LocalEvaluator,
                    stand_in: Optional[float]) -> tuple[SelfPlayDriver, str]:
    """Self-play for these settings (`given` as the user gave them, `cfg` resolved for this
    machine): on the nodes of a Ray cluster, else in process or worker processes; with what it
    says of itself."""
    if cfg.cluster.backend == ClusterBackend.ray:
        from azshogi.selfplay.cluster import ClusterSelfPlay

        cluster = ClusterSelfPlay(given, run_state.model, lambda: run_state.counters.train_steps, stand_in)
        return cluster, cluster.note
    return local_driver(cfg, evaluator), ""


def _the_one_before(path: Path, given: bool, without: Optional[str] = None) -> str:
    """What to do when checkpoint `path` cannot be read: start from the one before it, if any:
    with resume= where `path` was given so (a run with no checkpoint of its own), else by
    moving `path` away from the run's folder. `without`: a damaged replay segment, which the
    older checkpoint's window must not need (else the next older one, and so on)."""
    older = ckpt.before(path) if path.exists() else None
    while older is not None and without is not None and _needs(older, without):
        older = ckpt.before(older)
    if older is None:
        return (f"; no older checkpoint of the run has a replay window without {without}: to resume with the "
                f"window's positions after it, start the same command again with replay.skip_damaged=true"
                if without else "")
    if without is not None and ckpt.before(path) != older:  # the checkpoints between need it too
        run = ckpt.list_checkpoints(path.parent)  # oldest first
        skipped = [p.name for p in run[run.index(older) + 1:run.index(path)]]
        if given:
            return f"; the newest checkpoint whose window does not need it: give resume={older}"
        return (f"; the newest checkpoint whose window does not need it is {older.name}: move {path.name} and "
                f"{', '.join(skipped)} out of {path.parent} and start the same command again")
    if given:
        return f"; to start from the checkpoint before it, give resume={older}"
    return (f"; to resume from the checkpoint before it ({older.name}), move {path.name} out of {path.parent} and "
            f"start the same command again")


def changed_note(saved: dict, now: dict, path: Path, games: int) -> str:
    """The line that says which settings differ from those `path` was written with (its run's
    own checkpoint, resumed with other overrides), and what each costs where it drops data."""
    changes = changed_since(saved, now)
    if not changes:
        return ""
    words = []
    for key, old, new in changes:
        what = f"{key} {old} -> {new}"
        if key == "replay.capacity" and isinstance(old, int) and isinstance(new, int) and new < old:
            what += f" (the window keeps its newest {new:,} positions, for good)"
        elif key == "selfplay.num_actors" and isinstance(new, int) and 0 < new < games:
            what += f" (of the {games} games in progress, those past {new} actors are dropped)"
        elif key == "seed":
            what += " (new games' random streams; training's go on from the checkpoint's)"
        elif key == "loop.keep_checkpoints" and isinstance(old, int) and isinstance(new, int) and new < old:
            what += f" (the run's older checkpoints past the newest {new} are deleted at the next one)"
        elif key.startswith("stages.") and key.count(".") == 1:  # a whole stage
            what = f"{key} " + ("added" if old is None else "left out (give its override again to keep it)")
        words.append(what)
    return f"settings changed since {path.name}: " + "; ".join(words)


def _needs(path: Path, segment: str) -> bool:
    """Whether checkpoint `path`'s replay window names the segment file `segment` (or `path`
    cannot be read: no place to resume from either)."""
    try:
        return segment in {str(ref["file"]) for ref in ckpt.split(ckpt.load(path), path).replay["segments"]}
    except Exception:
        return True


class Loop:
    def __init__(self, cfg: Config, show_progress: bool = True):
        from azshogi.play.gauntlet import check_settings

        check_settings(cfg)
        parts = build_components(cfg)
        self.cfg = cfg = parts.cfg  # the settings in force: the run's, or a stage's (train/stages.py)
        self.base = parts.cfg  # the run's own, with its stages
        self.selfplay_note = parts.note
        self.paths = RunPaths.of(cfg)
        self.run_state = parts.run_state  # model, trainer, counters, random streams
        self.device, self.evaluator, self.selfplay = parts.device, parts.evaluator, parts.selfplay
        self.given = parts.given
        self.replay = ReplayBuffer(cfg.replay.capacity)
        self.stored_replay = StoredReplay(self.replay, ReplayStore(self.paths.replay_store))
        self.hcpe3 = Hcpe3Writer() if cfg.selfplay.write_hcpe3 else None
        self.plain_config = self.run_state.plain_config  # as saved in checkpoints
        self.clock = PhaseClock()
        self.show_progress = show_progress
        self.stop_requested = False
        self.matches_running = False  # the rating matches run: a stop request interrupts them at once
        self.resumed_from: Optional[Path] = None
        self.resume_note = ""  # why resume= was left out (restore)
        self.changed_note = ""  # settings changed since the checkpoint resumed from (restore_from)
        self.damage_note = ""  # the replay window's positions left out (replay.skip_damaged)
        self.restored_games = 0  # games in progress the checkpoint resumed from held

    # --- state: the run state (run_state.py), the replay window and the games in progress ---

    @property
    def model(self) -> torch.nn.Module:
        return self.run_state.model

    @property
    def trainer(self) -> Trainer:
        return self.run_state.trainer

    @property
    def counters(self) -> RunCounters:
        return self.run_state.counters

    @property
    def train_rng(self) -> np.random.Generator:
        return self.run_state.train_rng

    def state_dict(self, replay: dict, selfplay: dict) -> dict:
        """The checkpoint's state (formats/checkpoint.py), given the replay window's reference
        into the store and the games in progress."""
        return ckpt.assemble(self.run_state.state_dict(), replay, selfplay)

    def load_state_dict(self, state: dict, path: Path) -> None:
        parts = ckpt.split(state, path)
        # The stage in force at that checkpoint, with a network of its shape for the saved weights;
        # the driver's processes have not started yet.
        counters = parts.run["counters"]
        checkpoints, flat = int(counters["checkpoints"]), counters.get("flat_starts", {})
        rebuilt = self.enter_stage(checkpoints, parts.selfplay, resumed=True, flat=flat)
        late = self._stage_added_late(from_plain(parts.run["config"]).model, checkpoints, flat)
        if late is not None:
            name, stage = late
            raise ConfigError(
                f"stages.{name} changes the network from checkpoint {stage.from_checkpoint} on, and run "
                f"'{self.cfg.run}' is at checkpoint {checkpoints} already ({path.name} holds its network from "
                f"before that stage): a stage that changes the network must begin after the newest checkpoint "
                f"(from_checkpoint >= {checkpoints + 1}), or give a new run name")
        self.run_state.load_state_dict(parts.run, path)  # it checks the network and optimizer
        self.damage_note = self.stored_replay.restore(parts.replay, path, self.cfg.replay.skip_damaged) or ""
        self.restored_games = in_progress.num_games(parts.selfplay)
        if not rebuilt:
            self.selfplay.load_state_dict(parts.selfplay)
        automatic = self.automatic_resign_threshold()
        if automatic is not None:  # where the run had set one
            self.selfplay.set_resign_threshold(automatic)

    def _stage_added_late(self, saved, checkpoints: int, flat: dict) -> Optional[tuple]:
        """(name, stage) of the stage that changes the network, in force at `checkpoints`, without
        which (and the later ones) the network is the checkpoint's `saved` one: a stage added to
        the command after that checkpoint, which would have changed the network back then. None
        where the networks agree, or differ for another reason."""
        if saved == self.cfg.model:
            return None
        shaping = [(name, stage) for name, stage in in_force(self.base, checkpoints, flat)
                   if any(key.startswith("model.") for key in stage_settings(stage))]
        for k in reversed(range(len(shaping))):  # the newest first, then with the ones before it
            late = {name for name, _ in shaping[k:]}
            without = replace(self.base, stages={n: v for n, v in self.base.stages.items() if n not in late})
            if config_at(without, checkpoints, flat).model == saved:
                return shaping[k]
        return None

    def restore(self) -> None:
        """Resumes from the run's newest checkpoint, if any. `resume=PATH` starts the run from
        PATH while the run has no checkpoint newer than it (none of its own, or PATH is its
        newest); else the run goes on from its newest and says so. So the same command again
        continues what the first one started, and a run never goes back behind checkpoints that
        its next start would resume from instead (their work, or the new one's, would be lost):
        to start again from an older checkpoint, a new run name does (or moving the newer away)."""
        own = ckpt.latest(self.paths.checkpoints)
        path = own
        if self.cfg.resume:
            given = Path(self.cfg.resume)
            if own is None or given.resolve() == own.resolve():
                path = given
            elif given.resolve().parent == own.resolve().parent:
                self.resume_note = (f"resume={given} left out: run '{self.cfg.run}' has a newer checkpoint, "
                                    f"{own.name}, and goes on from it (to start again from {given.name}: a new "
                                    f"run name, or move the checkpoints after it out of {own.parent})")
            else:
                self.resume_note = (f"resume={given} left out: run '{self.cfg.run}' has checkpoints of its own, "
                                    f"and goes on from its newest (a new run name starts from {given.name})")
        if path is not None:
            self.restore_from(path, given=own is None)

    def restore_from(self, path: Path, given: bool = True) -> None:
        """Resumes from the checkpoint file `path`, whichever it is (restore chooses it for a run:
        `given` by resume= to a run with no checkpoint of its own, or the run's own newest)."""
        try:
            state = ckpt.load(path)
        except ckpt.CheckpointError as e:
            raise ckpt.CheckpointError(f"{e}{_the_one_before(path, given)}") from None
        try:
            self.load_state_dict(state, path)
        except ReplayStoreError as e:  # a damaged segment of its window: an older window may not need it
            raise ReplayStoreError(f"{e}{_the_one_before(path, given, without=e.file)}") from None
        self.resumed_from = path
        if not given:  # the run's own: a setting changed on the command line since is said, with what it does
            self.changed_note = changed_note(ckpt.split(state, path).run["config"], self.run_state.plain_config,
                                             path, self.restored_games)

    def save(self, partial: bool, games: Optional[dict] = None) -> Path:
        """Writes a checkpoint: the games in progress (`games`, or the driver's), the phase's new
        positions into the replay store, the checkpoint file; then removes what no kept
        checkpoint needs."""
        self.run_state.check_finite()
        if games is None:
            with self.clock.phase("pause"):
                games = self.selfplay.state_dict()
        path = self.paths.checkpoint(self.counters.checkpoints, partial)
        records_error: Optional[OSError] = None
        with stopping.writing():
            if self.hcpe3 is not None:  # first: a crash between the two leaves records of games no
                # checkpoint counts rather than a checkpoint counting games no record holds (records
                # that cannot be written are said after the checkpoint is)
                with self.clock.phase("records"):
                    # The games whose positions entered the buffer since the previous checkpoint file;
                    # a second stop in the same phase (resumed from its -partial file) adds to that
                    # file's records; any other start writes them anew.
                    records, keep = self.paths.hcpe3(path), self.counters.records_bytes
                    append, length = partial and self._resumed_from_file(path), 0
                    try:
                        length = Hcpe3Writer.kept(records, append, keep)
                        pending = self.hcpe3.pending_bytes
                        self.hcpe3.flush(records, append=append, keep=keep)
                        length += pending
                    except OSError as e:  # the log disk (full, say): the checkpoint is written all the same
                        records_error = e
                    self.counters.records_bytes = length if partial else None  # the records' valid length
            with self.clock.phase("checkpoint"):
                replay = self.stored_replay.checkpoint()
                path = ckpt.save(self.state_dict(replay, games), path, self.cfg.loop.keep_checkpoints)
                self.stored_replay.written(path, replay)
                self.stored_replay.prune(ckpt.list_checkpoints(self.paths.checkpoints))
        if records_error is not None:  # said as the file's error, with what was kept and what was not
            error = records_error
            raise type(error)(error.errno, f"{error.strerror or error} ({path.name} was written; its phase's game "
                                           f"records were not)", error.filename) from None
        return path

    def _resumed_from_file(self, path: Path) -> bool:
        return self.resumed_from is not None and self.resumed_from.resolve() == Path(path).resolve()

    def seed_replay(self) -> Optional[str]:
        """Fills a buffer that has never held a position from `replay.seed_files`; what it did."""
        files = self.cfg.replay.seed_files
        if files and self.replay.total_added == 0:
            read = seed_buffer(self.replay, files)
            return f"replay buffer seeded with {len(self.replay)} of {read} positions from {len(files)} file(s)"
        return None

    # --- the loop ---

    def done(self) -> bool:
        limit = self.cfg.loop.max_checkpoints
        return self.stop_requested or (limit > 0 and self.counters.checkpoints >= limit)

    def run(self) -> RunCounters:
        previous = self._install_signal_handlers()
        handler = None
        self.clock = PhaseClock()  # the first checkpoint line's wall time starts here
        try:
            # Only reading until the start has succeeded: a failed start leaves nothing behind.
            with self.clock.phase("pause"):
                self.restore()
            seeded = self.seed_replay()
            handler = setup_logging(self.paths.log_file)
            purge_step = self.counters.train_steps + 1 if self.resumed_from else None
            self.monitor = Monitor(self.paths.logs, purge_step=purge_step, show_progress=self.show_progress)
            write_atomically(self.paths.config_file, OmegaConf.to_yaml(self.plain_config).encode())
            self.monitor.hyperparameters(self.plain_config, self.counters.train_steps)
            self.say_start(seeded)
            c = self.counters
            if self.evaluation_due():  # the checkpoint resumed from was written before its evaluation
                self.resume_evaluation()
            selfplay_stats = SelfPlayPhaseStats.resumed(c.phase_games)  # a stopped phase's games go on
            while not self.done():
                if not c.in_training:
                    self.selfplay_phase(selfplay_stats)  # 1
                    if self.stop_requested:
                        break
                    c.in_training = True  # 2: pause; the games in progress stay in self.selfplay
                train_stats = self.train_phase()  # 3
                self.evaluator.refresh()  # self-play's weights: folded and cast once per version
                if self.stop_requested:
                    break
                self.finish_checkpoint(selfplay_stats, train_stats)  # 4 (a stage entered), then 5: loop again
                selfplay_stats = SelfPlayPhaseStats()  # a stop from here on is in the next phase, with no games yet
                if self.evaluation_due():
                    self.rate()
            if self.stop_requested:
                c.wall_seconds += self.clock.elapsed()  # the stopped phase's time (the resumed session adds its own)
                c.phase_games = selfplay_stats.snapshot()
                path = self.save(partial=True)
                self.monitor.say(f"stopped; saved {path} (start the same command again to resume)")
            return self.counters
        except Exception as e:  # what ended the session, in its log too (the console has it from the command)
            if handler is not None:
                log.error(f"the run stopped: {e}")
            raise
        finally:
            with stopping.writing("self-play's processes are being stopped"):  # none left behind
                self.selfplay.close()  # stops any worker processes, or the cluster's nodes
            if hasattr(self, "monitor"):
                self.monitor.close()
            stopping.restore(previous)
            if handler is not None:
                log.removeHandler(handler)
                handler.close()

    def say_start(self, seeded: Optional[str]) -> None:
        c, cfg = self.counters, self.cfg
        for note in (self.resume_note, self.changed_note, self.damage_note):
            if note:
                self.monitor.say(note)
        where = f"resumed from {self.resumed_from} at checkpoint {c.checkpoints}" if self.resumed_from else "new run"
        if self.resumed_from:  # the bar counts this session's moves: say what the phase had before
            target, made_now = cfg.loop.positions_per_checkpoint, c.positions_since_checkpoint
            made = "" if not made_now or c.in_training else (
                f", {made_now:,} of the {target:,} positions for checkpoint {c.checkpoints + 1} made"
                if made_now < target else
                f", the {target:,} positions for checkpoint {c.checkpoints + 1} made ({made_now:,})")
            games = self.restored_games
            if cfg.cluster.backend == ClusterBackend.none and games > cfg.selfplay.num_actors:  # a cluster's say so
                games_words = (f"{cfg.selfplay.num_actors:,} of the {games:,} games in progress restored: "
                               f"selfplay.num_actors plays no more here")
            else:
                games_words = f"{games:,} games in progress restored"
            where += f" ({games_words}{made})" if games else ""
        stage = stage_at(cfg, c.checkpoints, c.flat_starts)
        now = ", ".join(name for name, _ in in_force(cfg, c.checkpoints, c.flat_starts)) or "none in force"
        self.monitor.say(f"azshogi run '{cfg.run}': {where}; device {self.device}, {self.selfplay_note}, "
                         f"{self.search_words()}, network {cfg.model.blocks}x{cfg.model.channels}"
                         + (f", stage {stage} of {len(cfg.stages)} ({now})" if stage else "")
                         + (f", plays the average of its networks (train.average_decay={cfg.train.average_decay})"
                            if cfg.train.average_decay > 0 else ""))
        limit = cfg.loop.max_checkpoints
        if limit > 0 and c.checkpoints >= limit:  # nothing to play or train: say why, and what to do
            self.monitor.say(f"run '{cfg.run}' already reached loop.max_checkpoints={limit} "
                             f"(checkpoint {c.checkpoints}): no more self-play or training. To go on, raise the limit "
                             f"(e.g. add loop.max_checkpoints={c.checkpoints + limit} to the command), "
                             f"or give a new run a new name (run=NAME)")
            return
        for hint in (cpu_hint(cfg, self.device), cpu_bf16_hint(cfg, self.device), never_flat(self.base),
                     window_hint(cfg)):
            if hint:
                self.monitor.say(hint)
        if seeded:
            self.monitor.say(seeded)

    def selfplay_phase(self, stats: SelfPlayPhaseStats) -> None:
        cfg, c = self.cfg, self.counters
        target = cfg.loop.positions_per_checkpoint
        with self.clock.phase("pause"):  # worker processes or a cluster's nodes: their start is no self-play
            self.selfplay.start()
        start = self.selfplay.totals()
        timer = Timer()
        progress = self.monitor.start_selfplay(
            f"self-play → checkpoint {c.checkpoints + 1}", target, cfg.selfplay.num_actors,
            (c.train_steps + 1, c.train_steps + cfg.loop.steps_per_checkpoint), eta_now=c.games > 0,
            moves_per_position=1 / (1 - cfg.selfplay.cheap_search_prob), driver_status=self.selfplay.status)
        stats.positions = stats.positions_before = c.positions_since_checkpoint
        stats.resign_threshold = self.resign_threshold()
        auto_resign = cfg.selfplay.resign_target > 0
        barren = max(1000, 4 * cfg.selfplay.num_actors)  # games with no position, then no position will come
        games_before = stats.games  # a resumed phase's games before its stop (they had their positions)
        reached = False

        def between_moves() -> bool:  # asked between moves, after the games that just ended are counted
            nonlocal reached
            stats.moves = self.selfplay.totals().moves - start.moves
            progress.update(stats)
            stop = c.positions_since_checkpoint >= target or self.stop_requested
            if stop and not reached:
                reached = True
                self.clock.switch("pause")  # what is left: the moves in flight
            return stop

        try:
            with self.clock.phase("selfplay"):
                for game in self.selfplay.play(until=between_moves):  # ends with the games in progress paused
                    self.replay.extend(game.positions)
                    positions = len(game.positions)  # every move's, or the fully searched moves'
                    c.games += 1
                    c.positions += positions
                    c.positions_since_checkpoint += positions
                    stats.add_game(game)
                    barren_games = stats.games - games_before
                    if barren_games >= barren and c.positions_since_checkpoint == stats.positions_before:
                        raise ConfigError(
                            f"self-play: {barren_games} games in a row ended without a position to train on (each "
                            f"resigned or ended before its first recorded move): the run would never reach "
                            f"loop.positions_per_checkpoint; see selfplay.resign_threshold "
                            f"({cfg.selfplay.resign_threshold:g}), selfplay.resign_moves, "
                            f"selfplay.resign_playout_share")
                    if auto_resign and game.resign_levels is not None:  # a played-out game, for the threshold
                        resignation.tally(c.resign_counts, c.checkpoints + 1, game.resign_levels, game.record.winner)
                    with self.clock.phase("records"):
                        self.write_records(game, stats.games)
            progress.update(stats, force=True)
        finally:
            progress.close()
        stats.seconds = timer.elapsed()
        stats.play = self.selfplay.totals() - start  # times summed over workers
        stats.driver = self.selfplay.status()
        stats.moves = stats.play.moves  # workers' moves in flight at the end included

    def resign_threshold(self) -> Optional[float]:
        """The resignation threshold self-play plays with: the run's automatic one where it has
        set one, else selfplay.resign_threshold; None with resignation off."""
        sp, automatic = self.cfg.selfplay, self.automatic_resign_threshold()
        if automatic is not None:
            return automatic
        return sp.resign_threshold if sp.resign_threshold > 0 or sp.resign_target > 0 else None

    def automatic_resign_threshold(self) -> Optional[float]:
        """The threshold the run has set with selfplay.resign_target (None: none set, or the
        setting off, e.g. in a resumed run)."""
        return self.counters.resign_threshold if self.cfg.selfplay.resign_target > 0 else None

    def update_resign_threshold(self) -> str:
        """At a checkpoint, with selfplay.resign_target: the automatic threshold from the last
        resign_window checkpoints' played-out games (selfplay/resignation.py), in the counters;
        what the log says of a change ('' when none)."""
        sp, c = self.cfg.selfplay, self.counters
        if sp.resign_target <= 0:
            return ""
        resignation.prune(c.resign_counts, c.checkpoints, sp.resign_window)
        current = self.resign_threshold()
        assert current is not None
        new, words = resignation.next_threshold(current, c.resign_counts, c.checkpoints, sp.resign_window,
                                                sp.resign_target)
        c.resign_threshold = new
        return words

    def search_words(self) -> str:
        s = self.cfg.search
        considered = f", {s.max_num_considered_actions} considered" if s.kind == SearchKind.gumbel else ""
        return f"{s.kind.value} {s.num_simulations} simulations{considered}"

    def enter_stage(self, checkpoints: int, games: Optional[dict] = None, resumed: bool = False,
                    flat: Optional[dict] = None) -> bool:
        """Moves to the settings in force once `checkpoints` checkpoints are written
        (train/stages.py), at a checkpoint: the trainer's (the learning rate, a new optimizer for a
        new network), the replay window's size, the network (grown function-preserving, or with
        `resumed` one of the stage's shape for a checkpoint's weights) with its evaluator, and
        self-play's driver, rebuilt to take over the games in progress (`games`, or the paused
        driver's; the new driver's pending ones after). `flat`: the when_flat stages begun (the
        counters'). Returns whether the driver was rebuilt."""
        flat = self.counters.flat_starts if flat is None else flat
        new, old = config_at(self.base, checkpoints, flat), self.cfg
        if new == old:
            return False
        model = None
        if new.model != old.model:
            if resumed:
                model = from_config(new.model).to(self.device)
            else:
                from azshogi.nn.growth import grow

                generator = torch.Generator().manual_seed(self.base.seed * 1_000_003 + checkpoints)
                model = grow(self.run_state.model, new.model.blocks, new.model.channels, generator=generator)
        self.run_state.use(play_config(self.base, checkpoints, flat), model)
        if model is not None:
            self.evaluator = make_evaluator(self.model, self.device, new.inference, server_batch(new))
        if new.replay.capacity != old.replay.capacity:
            self.replay.resize(new.replay.capacity)
            self.__dict__.pop("batches", None)  # a window on the device: made anew at the next batch
        self.cfg = new
        if model is None and (new.search, new.selfplay) == (old.search, old.selfplay):
            return False
        if games is None:
            games = self.selfplay.state_dict()
        self.selfplay.close()
        given = config_at(self.given, checkpoints, flat)
        self.selfplay, _ = selfplay_driver(given, new, self.run_state, self.evaluator, stand_in=None)
        self.selfplay.load_state_dict(games)
        return True

    def write_records(self, game: SelfPlayGame, games_in_phase: int) -> None:
        """hcpe3 (at the next checkpoint) and, for the first games of a phase, KIF."""
        if self.hcpe3 is not None:
            self.hcpe3.add(game)
        if games_in_phase <= self.cfg.loop.selfplay_games_saved:
            write_kif(self.paths.kif(self.counters.checkpoints + 1, game.game_id), game.record, ("azshogi", "azshogi"))

    @functools.cached_property
    def batches(self) -> ReplayBuffer | DeviceReplay:
        """What training batches are sampled from (train.replay_window): the replay buffer, on
        the host, or its copy on the training device."""
        device = self.run_state.device
        return DeviceReplay(self.replay, device) if on_device(self.cfg.train, self.replay, device) else self.replay

    def train_phase(self) -> TrainPhaseStats:
        """Optimizer steps on batches of the replay window, with the losses read back every
        train.log_every steps (and at the end), where TensorBoard gets them."""
        cfg, c, stats = self.cfg, self.counters, TrainPhaseStats()
        batches = self.batches  # a window on the device takes the new positions at its first batch
        steps = cfg.loop.steps_per_checkpoint
        timer = Timer()
        self.monitor.start_bar(f"training → checkpoint {c.checkpoints + 1}", steps, "step", initial=c.phase_steps)
        loss: dict[str, str] = {}
        surprise_weight = cfg.train.surprise_weight
        with self.clock.phase("train"):
            if surprise_weight > 0:  # the new positions' surprise under the network that played them
                _, stats.mean_surprise = surprise.score(self.trainer.model, self.replay, self.run_state.device)
            while c.phase_steps < steps and not self.stop_requested:
                batch = batches.sample(cfg.train.batch_size, self.train_rng, cfg.train.mirror, self.trainer.opponent,
                                       surprise_weight)
                self.trainer.step(batch)
                c.phase_steps += 1
                c.train_steps += 1
                c.samples_trained += cfg.train.batch_size
                if c.train_steps % cfg.train.log_every == 0:
                    metrics = self.trainer.read_back()
                    for m in metrics:
                        stats.add(m)
                    self.monitor.train_step(c.train_steps, metrics[-1], self.trainer.skipped)
                    loss = {"loss": f"{metrics[-1].policy_loss:.3f}/{metrics[-1].value_loss:.3f}"}
                self.monitor.advance(1, **loss)
            for m in self.trainer.read_back():
                stats.add(m)
        stats.seconds = timer.elapsed()
        self.monitor.close_bar()
        return stats

    def finish_checkpoint(self, sp: SelfPlayPhaseStats, tr: TrainPhaseStats) -> None:
        cfg, c = self.cfg, self.counters
        phase_positions = max(1, c.positions_since_checkpoint)
        phase_reuse = c.phase_steps * cfg.train.batch_size / phase_positions
        c.checkpoints += 1
        c.in_training = False
        c.phase_steps = 0
        c.positions_since_checkpoint = 0
        c.phase_games = {}
        self.run_state.average_checkpoint()  # train.average_decay: the network that plays
        resign = self.update_resign_threshold()
        stage = entered(self.base, c.checkpoints, c.flat_starts)
        shape = self.cfg.model
        games = None
        if stage:  # the paused driver's games, before a stage's driver takes them over
            with self.clock.phase("pause"):
                games = self.selfplay.state_dict()
            self.enter_stage(c.checkpoints, games)
        automatic = self.automatic_resign_threshold()
        if automatic is not None and (resign or stage):  # a new threshold, or a new driver
            with self.clock.phase("pause"):
                self.selfplay.set_resign_threshold(automatic)
        so_far = self.clock.elapsed()  # the checkpoint keeps the run's wall time through its own phase
        c.wall_seconds += so_far
        path = self.save(partial=False, games=games)
        times = self.clock.lap()  # the wall time since the previous checkpoint line
        c.wall_seconds += times.wall - so_far  # saving it: counted in the run's time from here on
        self.monitor.checkpoint(c.train_steps, sp, tr, len(self.replay), c.positions, c.sample_reuse, phase_reuse,
                                times, stage_at(self.base, c.checkpoints, c.flat_starts))
        rate = sp.moves / sp.seconds if sp.seconds else float("nan")
        g = max(1, sp.games)
        cheap = f" ({sp.play.cheap_moves / sp.moves:.0%} cheap)" if sp.play.cheap_moves else ""
        opponent = tr.mean_opponent_policy_loss
        # A phase resumed in its training has no self-play of this session's to describe.
        played = (f"+{sp.games}, mean length {sp.mean_length:.0f}, B/W/D {sp.black_wins / g:.0%}/"
                  f"{sp.white_wins / g:.0%}/{sp.draws / g:.0%}{sp.resign_words()}" if sp.games else "+0")
        moves = f"{rate:.0f} moves/s{cheap}" if sp.moves else "no self-play since the resume"
        # A phase resumed after its last step (a stop during it) has no step of this session's.
        losses = (f"loss policy {tr.mean_policy_loss:.3f} value {tr.mean_value_loss:.3f}"
                  + (f" opponent policy {opponent:.3f}" if opponent is not None else "")
                  if tr.steps else "no training step since the resume")
        self.monitor.say(
            f"checkpoint {c.checkpoints}: step {c.train_steps} | games {c.games} ({played}) | {losses} | "
            f"{moves} | reuse {phase_reuse:.2f} | {path.name} | {times.summary()}"
            + (f" | {sp.driver.line}" if sp.driver.line else ""))
        if resign:
            self.monitor.say(f"checkpoint {c.checkpoints}: {resign}")
        if stage:
            grown = (f" (the network grown from {shape.blocks}x{shape.channels}, function-preserving; a new optimizer)"
                     if shape != self.cfg.model else "")
            self.monitor.say(f"checkpoint {c.checkpoints}: {stage}{grown}")

    # --- evaluation (play/gauntlet.py): matches against anchors, TensorBoard eval/ ---

    def evaluation_due(self) -> bool:
        """The checkpoint just written (or resumed from, with its weights unchanged) is due for
        an evaluation that has not finished."""
        c, every = self.counters, self.cfg.eval.every
        return (every > 0 and c.checkpoints > 0 and c.checkpoints % every == 0 and c.evaluated < c.checkpoints
                and c.phase_steps == 0 and not self.stop_requested)

    def resume_evaluation(self) -> None:
        """The evaluation of the checkpoint resumed from: played again if it was interrupted;
        if it finished (in the rating history) after the file was written, only its
        consequence is redone (a when_flat stage's start, from the same history)."""
        from azshogi.play.gauntlet import rating_history

        c = self.counters
        if any(h["checkpoint"] == c.checkpoints for h in rating_history(self.paths)):
            c.evaluated = c.checkpoints
            self.begin_flat_stage()
        else:
            self.rate()

    def rate(self) -> None:
        from azshogi.play.gauntlet import When, rate_checkpoint

        c = self.counters
        self.matches_running = True
        try:
            with self.clock.phase("eval"):
                playing = self.run_state.playing  # the checkpoint's network for play (train.average_decay)
                rate_checkpoint(playing, self.run_state.cfg, self.device, self.paths,
                                When(c.checkpoints, c.train_steps, c.games, c.wall_seconds),
                                self.monitor.writer, self.monitor.say, progress=self.monitor.show_progress,
                                evaluator=self.evaluator if playing is self.model else None)
            c.evaluated = c.checkpoints
            self.begin_flat_stage()
        except EvaluationInterrupted:
            self.monitor.say(f"evaluation of checkpoint {c.checkpoints} interrupted: it runs again when the run "
                             f"resumes")
        finally:
            self.matches_running = False

    def begin_flat_stage(self) -> None:
        """After an evaluation: a when_flat stage whose rating test now holds begins at the next
        checkpoint (recorded in the counters, so a resume keeps it)."""
        from azshogi.play.gauntlet import rating_history

        c = self.counters
        due = flat_stage_due(self.base, c.checkpoints, c.flat_starts, rating_history(self.paths))
        if due:
            name, why = due
            c.flat_starts[name] = c.checkpoints + 1
            self.monitor.say(f"checkpoint {c.checkpoints}: {why}: stage {name} begins at checkpoint "
                             f"{c.checkpoints + 1}")

    # --- Ctrl-C and SIGTERM: finish the current step, then checkpoint ---

    def _install_signal_handlers(self):
        def request():
            self.stop_requested = True
            if self.matches_running:
                self.matches_running = False
                raise EvaluationInterrupted

        return stopping.install(lambda: self.stop_requested, request, "a checkpoint follows")


def cpu_hint(cfg: Config, device: torch.device) -> Optional[str]:
    """What a CPU user who kept the GPU-sized defaults should know, or None. `cfg` as the run
    uses it: its automatic self-play settings resolved for this machine."""
    default, _ = resolve_selfplay(Config(), device.type, machine_cores())
    if device.type != "cpu" or (cfg.model, cfg.search.num_simulations, cfg.selfplay.num_actors,
                                cfg.loop.positions_per_checkpoint) != (
            default.model, default.search.num_simulations, default.selfplay.num_actors,
            default.loop.positions_per_checkpoint):
        return None
    return (f"running on the CPU with the default settings, which are sized for a GPU: each checkpoint needs "
            f"{cfg.loop.positions_per_checkpoint:,} positions, which takes from many minutes to hours on a CPU "
            f"(docs/benchmarks.md; the bar shows the time left once games finish). For a run sized for a CPU: "
            f"azshogi +experiment=cpu")


def cpu_bf16_hint(cfg: Config, device: torch.device) -> Optional[str]:
    """What the start-up line says where train.cpu_bf16 (the run's or a stage's) asks for bf16
    steps that this CPU would run slower than fp32 ones, so that they stay fp32; else None."""
    asked = cfg.train.cpu_bf16 or any(stage_settings(stage).get("train.cpu_bf16") for _, stage in stages_in_order(cfg))
    if not asked or device.type != "cpu" or bf16_is_fast():
        return None
    return ("train.cpu_bf16: this CPU has no native bf16 instructions (AVX512_BF16 or AMX; or ONEDNN_MAX_CPU_ISA "
            "keeps oneDNN from them), where a bf16 training step took 2.4-10 times an fp32 one (docs/benchmarks.md), "
            "so the steps stay fp32")


def window_hint(cfg: Config) -> Optional[str]:
    """What the start-up line says where the replay window (cfg as in force now) is smaller than
    one phase's new positions, which training then never sees; else None."""
    capacity, phase = cfg.replay.capacity, cfg.loop.positions_per_checkpoint
    if capacity >= phase:
        return None
    return (f"replay.capacity={capacity:,} is smaller than loop.positions_per_checkpoint={phase:,}: of each phase's "
            f"new positions only the newest {capacity:,} are trained on (the rest are played for nothing)")


def train(cfg: Config, show_progress: bool = True) -> RunCounters:
    """Runs (or resumes) the loop described by `cfg`; returns the final counters."""
    return Loop(cfg, show_progress).run()
