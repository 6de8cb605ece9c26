"""Self-play in worker processes around one inference server (`selfplay.num_workers` >= 1).

Python's GIL keeps one process's tree search on one core. Here W spawned workers each run
G groups of games (`selfplay.worker_groups`), each group a SelfPlay over its share of the
actors, searched by its own thread and evaluating through its own ClientEvaluator (server.py):
while one group's leaves are on the device its thread waits on its pipe without the GIL, and
another group searches. So a worker never waits for the device unless every group does, and
the server has the next group's batch queued behind the one running. The main process, which
holds the only model, serves all groups (clients c = w * G + g). It commands each group on the
group's pipe and serves evaluations while it waits for their messages:

    main -> group    ("play",)         play move after move until told to pause
                     ("pause",)        stop after the move in progress
                     ("state",)        send your games in progress (in_progress.py's flat arrays)
                     ("load", state)   replace your games in progress
                     ("resign", t)     resign below win rate t from now on (the automatic threshold)
                     ("stop",)         exit
    group -> main    ("ready",)        started
                     ("moved", finished games, SelfPlayTotals of the move)   after every move
                     ("paused",)       between two moves, until the next "play"
                     ("state", state) / ("loaded",) / ("resign set",)
                     ("error", traceback)   then its worker exits

A group reads commands between moves (one that arrives during a forward pass waits in its
client's inbox), so a paused group is at a safe point. Nothing paces the moves: the main process
only reads what comes, and the loop's threshold (checked after each move's games) pauses all.
Finished games travel inside "moved" (numpy arrays, a few KB each); the main process alone
owns the replay buffer.

Game ids interleave: group c of C = W x G numbers its games b + c, b + c + C, b + c + 2C, ...
from a common base b (`first_game_id`, then a resumed state's next_game_id), so ids stay unique,
and the first C-th of a run's games have the ids they would have with any grouping; a
checkpoint holds all games in progress, in group order, which a resumed run (with any number of
workers and groups, or none) shares out again.

Lifecycle: workers ignore SIGINT and SIGTERM (the main process stops them in order, after a
checkpoint) and exit by themselves when the main process is gone (their pipes close, and they
check the parent pid on every wait). A worker that dies, fails or falls silent raises
WorkerError naming it. `close()` stops, then kills, then joins every worker and unlinks every
shared-memory block, whatever state they are in.

Not bit-exact: with W >= 1, which leaves share a forward pass depends on timing, and batch
composition can change the last bits of a network output, so a resumed run is not identical to
an uninterrupted one (as it is with W = 0).
"""
from __future__ import annotations

import multiprocessing as mp
import signal
import sys
import threading
import time
import traceback
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from azshogi.selfplay import in_progress
from azshogi.selfplay.actors import PlayoutCap
from azshogi.selfplay.drivers import DriverStatus, SelfPlayTotals, groups_per_worker, totals_of
from azshogi.selfplay.resignation import Resignation
from azshogi.selfplay.server import ClientHandle, ClientLost, IdleClock, InferenceServer, ServerGone
from azshogi.shogi.game_record import SelfPlayGame
from azshogi.shogi.rules import Rules

if TYPE_CHECKING:  # the main process's; a worker never imports torch (start-up, and ~0.5 GB each)
    from azshogi.nn.evaluator import LocalEvaluator

STARTUP_TIMEOUT_S = 300.0  # spawn, import torch and build the search, on a busy machine
ANSWER_TIMEOUT_S = 300.0  # a worker's answer to "state" or "load"
WORKER_TIMEOUT_S = 300.0  # a playing group silent this long (not waiting on us) is hung
STOP_GRACE_S = 5.0  # after "stop", before a worker is killed
_POLL_S = 0.05  # how often `until` and the watchdog are checked while serving

__all__ = ["WorkerSelfPlay", "WorkerError", "worker_main", "shares"]


class WorkerError(RuntimeError):
    """A self-play worker died, failed or stopped answering; the message names it."""


def shares(num_actors: int, num_workers: int) -> list[int]:
    """Actors per worker (or per group), as even as possible."""
    return [num_actors // num_workers + (1 if w < num_actors % num_workers else 0) for w in range(num_workers)]


def worker_main(handles: list[ClientHandle], search_config, rules: Rules, group_actors: list[int], seed: int,
                min_policy_prob: float, first_game_ids: list[int], game_id_step: int,
                playout_cap: PlayoutCap, resignation: Resignation = Resignation(), opening_plies: int = 0) -> None:
    """A worker process: one thread per group of games (see the module docstring), each obeying
    its own pipe until "stop"; exits with 1 if a group failed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group;
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the main process stops us after its checkpoint
    idle = IdleClock(len(handles))
    # One group searches at a time, the others' leaves on the device: a group whose answer
    # comes while another searches waits for that search's batch to go out (the GIL alone would
    # interleave both searches, and delay both batches).
    turn = threading.Lock()
    codes = [0] * len(handles)

    def group(g: int) -> None:
        codes[g] = _group_main(handles[g], search_config, rules, group_actors[g], seed, min_policy_prob,
                               first_game_ids[g], game_id_step, playout_cap, idle, turn, resignation, opening_plies)

    threads = [threading.Thread(target=group, args=(g,), name=f"azshogi-group-{g}") for g in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(max(codes))


def _group_main(handle: ClientHandle, search_config, rules: Rules, num_actors: int, seed: int,
                min_policy_prob: float, first_game_id: int, game_id_step: int, playout_cap: PlayoutCap,
                idle: IdleClock, turn: threading.Lock, resignation: Resignation = Resignation(),
                opening_plies: int = 0) -> int:
    """One group of a worker: builds its search and SelfPlay, then plays and obeys its pipe."""
    from azshogi.formats.dlshogi import encode_game
    from azshogi.search import make_search
    from azshogi.selfplay.actors import SelfPlay
    from azshogi.selfplay.server import ClientEvaluator

    client = ClientEvaluator(handle, idle=idle, turn=turn)
    try:
        search = make_search(search_config, client, rules, num_actors)
        selfplay = SelfPlay(search, rules, num_actors, seed, min_policy_prob, first_game_id, game_id_step,
                            playout_cap, resignation, opening_plies)
        client.send(("ready",))
        playing = False
        while True:
            command = client.next_command() if playing else client.receive()
            if command is None:  # playing, and nothing to obey: the next move
                before = totals_of(selfplay)
                with turn:  # let go while the move's batches are on the device (ClientEvaluator)
                    finished = selfplay.step()
                for game in finished:  # the main process only appends these bytes to its hcpe3 file
                    game.hcpe3 = encode_game(game)
                client.send(("moved", finished, replace(totals_of(selfplay) - before, idle_seconds=idle.take())))
            elif command[0] == "play":
                playing = True
            elif command[0] == "pause":
                playing = False
                client.send(("paused",))
            elif command[0] == "state":
                client.send(("state", selfplay.state_dict()))
            elif command[0] == "load":
                selfplay.load_state_dict(command[1])
                client.send(("loaded",))
            elif command[0] == "resign":
                selfplay.set_resign_threshold(command[1])
                client.send(("resign set",))
            elif command[0] == "stop":
                return 0
            else:
                raise ValueError(f"unknown command {command[0]!r}")
    except ServerGone:  # the main process has gone or told us to stop mid-move
        return 0
    except BaseException:
        try:
            client.send(("error", traceback.format_exc()))
        except ServerGone:
            pass
        return 1
    finally:
        client.close()


def _shutdown(processes: list, server: InferenceServer, groups: int) -> None:
    """Stops every worker (asking each group, then killing), joins them, removes the shared memory."""
    try:
        for w, p in enumerate(processes):
            if p.is_alive():
                for c in range(w * groups, (w + 1) * groups):
                    try:
                        server.send(c, ("stop",))
                    except (OSError, ValueError, IndexError):
                        pass
        deadline = time.monotonic() + STOP_GRACE_S
        for p in processes:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in processes:
            if p.is_alive():
                p.kill()  # they ignore SIGTERM
                p.join(STOP_GRACE_S)
    finally:
        server.close()


def _describe_exit(p) -> str:
    code = p.exitcode
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class WorkerSelfPlay:
    """The SelfPlayDriver for selfplay.num_workers >= 1 (see the module docstring).

    Workers start on first use (play, state_dict), so building a Loop starts no process.
    rows_per_actor: leaves per actor in one forward pass (PUCT's leaves_per_step). groups: games
    groups per worker (at most the smallest worker's games)."""

    def __init__(self, evaluator: "LocalEvaluator", search_config, rules: Rules, num_actors: int, num_workers: int,
                 seed: int = 0, min_policy_prob: float = 1e-4, rows_per_actor: int = 1, max_batch: int = 0,
                 wait_s: float = 0.002, worker_timeout_s: float = WORKER_TIMEOUT_S,
                 playout_cap: PlayoutCap = PlayoutCap(), first_game_id: int = 0, groups: int = 1,
                 resignation: Resignation = Resignation(), opening_plies: int = 0):
        if not 1 <= num_workers <= num_actors:
            raise ValueError(f"num_workers={num_workers}: must be in [1, num_actors={num_actors}]")
        self.evaluator, self.search_config, self.rules = evaluator, search_config, rules
        self.seed, self.min_policy_prob, self.playout_cap = seed, min_policy_prob, playout_cap
        self.resignation, self.opening_plies = resignation, opening_plies
        self.first_game_id = first_game_id
        self.processes = num_workers
        self.groups = groups_per_worker(num_actors, num_workers, groups)
        self.clients = num_workers * self.groups
        # Each worker's games split among its groups, in client order (c = w * groups + g).
        self.shares = [n for w in shares(num_actors, num_workers) for n in shares(w, self.groups)]
        self.rows = [n * rows_per_actor for n in self.shares]
        self.max_batch = max_batch or sum(self.rows)
        self.wait_s, self.worker_timeout_s = wait_s, worker_timeout_s
        self.server: Optional[InferenceServer] = None
        self.workers: list = []
        self.sentinels: dict[int, int] = {}  # each group's process sentinel, for the server's select
        self.idle: set[int] = set()  # groups paused between moves
        self.active: set[int] = set()  # groups told to play, not yet paused
        self._pending_state: Optional[dict] = None
        self._finalizer: Optional[weakref.finalize] = None
        self._closed = False
        self._totals = SelfPlayTotals()  # the groups' moves and times (their `network`: their clients' waits)

    # --- the driver interface ---

    def start(self) -> None:
        self._ensure_started()

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        self._ensure_started()
        if until():
            return
        for c in sorted(self.idle):
            self._command(c, ("play",))
        pausing = False
        while self.active:
            for c, message in self._pump(_POLL_S):
                if message[0] == "moved":
                    _, finished, move = message
                    self._totals += move
                    yield from finished
                elif message[0] == "paused":
                    self.active.discard(c)
                    self.idle.add(c)
                else:
                    raise WorkerError(f"self-play worker {self._worker(c)} sent {message[0]!r} during a move")
                if not pausing and until():
                    pausing = self._pause_all()
            if not pausing and until():
                pausing = self._pause_all()

    def totals(self) -> SelfPlayTotals:
        """The groups' totals; `network`: the forward passes of this process's one model."""
        return replace(self._totals, network=replace(self.evaluator.stats))

    def state_dict(self) -> dict:
        """All groups' games in progress, in group order (workers must be paused)."""
        self._ensure_started()
        if self.active:
            raise RuntimeError("state_dict() while workers are playing; exhaust play() first")
        for c in range(self.clients):
            self._command(c, ("state",), activity=False)
        return in_progress.concatenate(self._await_each("state", ANSWER_TIMEOUT_S))

    def load_state_dict(self, state: dict) -> None:
        """Shares out the saved games (contiguous runs, in order) when the workers start."""
        if self.server is None:
            self._pending_state = state
            return
        if self.active:
            raise RuntimeError("load_state_dict() while workers are playing")
        base, total, start = int(state["next_game_id"]), in_progress.num_games(state), 0
        for c, n in enumerate(self.shares):
            share = in_progress.take(state, min(start, total), min(start + n, total), next_game_id=base + c)
            self._command(c, ("load", share), activity=False)
            start += n
        self._await_each("loaded", ANSWER_TIMEOUT_S)

    def status(self) -> DriverStatus:
        return DriverStatus()

    def set_resign_threshold(self, threshold: float) -> None:
        """Workers started later take it at their start; running ones are told (while paused)."""
        self.resignation = replace(self.resignation, threshold=threshold)
        if self.server is None:
            return
        if self.active:
            raise RuntimeError("set_resign_threshold() while workers are playing")
        for c in range(self.clients):
            self._command(c, ("resign", threshold), activity=False)
        self._await_each("resign set", ANSWER_TIMEOUT_S)

    def close(self) -> None:
        """Stops and joins every worker, removes the shared memory; safe to call again."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()
        self.idle.clear()
        self.active.clear()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.workers]

    # --- internals ---

    def _worker(self, c: int) -> int:
        return c // self.groups

    def _pause_all(self) -> bool:
        for c in self.active:
            self._command(c, ("pause",), activity=False)
        return True

    def _ensure_started(self) -> None:
        if self._closed:
            raise RuntimeError("the self-play workers have been closed")
        if self.server is not None:
            return
        ctx = mp.get_context("spawn")
        self.server = InferenceServer(self.evaluator, self.rows, self.max_batch, self.wait_s)
        self._finalizer = weakref.finalize(self, _shutdown, self.workers, self.server, self.groups)
        for w in range(self.processes):
            clients = range(w * self.groups, (w + 1) * self.groups)
            p = ctx.Process(target=worker_main, name=f"azshogi-selfplay-{w}", daemon=True,
                            args=([self.server.handle(c) for c in clients], self.search_config, self.rules,
                                  [self.shares[c] for c in clients], self.seed, self.min_policy_prob,
                                  [self.first_game_id + c for c in clients], self.clients, self.playout_cap,
                                  self.resignation, self.opening_plies))
            p.start()
            self.workers.append(p)
            self.sentinels.update({c: p.sentinel for c in clients})
            for c in clients:
                self.server.client_started(c)
        self._await_each("ready", STARTUP_TIMEOUT_S)
        self.idle = set(range(self.clients))
        if self._pending_state is not None:
            state, self._pending_state = self._pending_state, None
            self.load_state_dict(state)

    def _server(self) -> InferenceServer:
        """The inference server, started by _ensure_started."""
        assert self.server is not None, "the self-play workers have not started"
        return self.server

    def _command(self, c: int, message: tuple, activity: bool = True) -> None:
        server = self._server()
        try:
            server.send(c, message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._lost(c, "its pipe has closed") from None
        server.last_heard[c] = time.monotonic()
        if activity:
            self.idle.discard(c)
            self.active.add(c)

    def _pump(self, timeout: float) -> list[tuple[int, tuple]]:
        """Serves evaluations for up to `timeout` s; the other messages that arrived."""
        server = self._server()
        try:
            messages = server.serve(self.active, timeout, self.sentinels)
        except ClientLost as e:
            raise self._lost(e.index, e.detail) from None
        for c, message in messages:
            if message[0] == "error":
                w = self._worker(c)
                raise WorkerError(f"self-play worker {w} (pid {self.workers[w].pid}) failed:\n{message[1]}")
        now = time.monotonic()
        for c in self.active - server.waiting:
            silent = now - server.last_heard[c]
            if silent > self.worker_timeout_s:
                w = self._worker(c)
                raise WorkerError(f"self-play worker {w} (pid {self.workers[w].pid}) has not answered for "
                                  f"{silent:.0f} s")
        return messages

    def _await_each(self, kind: str, timeout: float) -> list:
        """Every group's answer of `kind` (its payload), in group order."""
        answers: dict[int, object] = {}
        deadline = time.monotonic() + timeout
        while len(answers) < self.clients:
            for c, message in self._pump(_POLL_S):
                if message[0] != kind:
                    raise WorkerError(f"self-play worker {self._worker(c)} sent {message[0]!r}, {kind!r} was expected")
                answers[c] = message[1] if len(message) > 1 else None
            if time.monotonic() > deadline:
                missing = sorted({self._worker(c) for c in set(range(self.clients)) - set(answers)})
                raise WorkerError(f"self-play worker(s) {missing} did not answer {kind!r} within {timeout:.0f} s")
        return [answers[c] for c in range(self.clients)]

    def _lost(self, c: int, detail: str) -> WorkerError:
        w = self._worker(c)
        p = self.workers[w]
        p.join(1.0)
        return WorkerError(f"self-play worker {w} (pid {p.pid}) {_describe_exit(p)} ({detail}); "
                           f"the run stops (the last checkpoint holds the state to resume from)")
