"""Self-play in worker processes around one inference server (`selfplay.num_workers` >= 1).

Python's GIL keeps one process's tree search on one core. Here W spawned workers each run a
SelfPlay over their share of the actors; their searches evaluate through a ClientEvaluator
(server.py), and the main process, which holds the only model, serves all of them. The main
process drives the workers with commands on each worker's pipe and serves evaluations while it
waits for their answers:

    main -> worker   ("step",)         play one move in each of your games
                     ("state",)        send your games in progress (in_progress.py's flat arrays)
                     ("load", state)   replace your games in progress
                     ("stop",)         exit
    worker -> main   ("ready",)        started
                     ("stepped", finished games, SelfPlayTotals of the move)
                     ("state", state) / ("loaded",)
                     ("error", traceback)   then it exits

A worker reads commands only between moves, so a worker that has answered "stepped" and has
not been told "step" again is paused at a safe point: pausing is simply not sending "step".
Finished games travel inside "stepped" (numpy arrays, a few KB each); the main process alone
owns the replay buffer.

Game ids interleave: worker w of W numbers its games b + w, b + w + W, b + w + 2W, ... from a
common base b (`first_game_id`, then a resumed state's next_game_id), so ids stay unique; a
checkpoint holds all games in progress, in worker order, which a resumed run (with any number
of workers, or none) shares out again.

Lifecycle: workers ignore SIGINT and SIGTERM (the main process stops them in order, after a
checkpoint) and exit by themselves when the main process is gone (their pipe closes, and they
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
import time
import traceback
import weakref
from dataclasses import replace
from typing import Callable, Iterator, Optional

from azshogi.nn.evaluator import LocalEvaluator
from azshogi.selfplay import in_progress
from azshogi.selfplay.actors import PlayoutCap
from azshogi.selfplay.drivers import DriverStatus, SelfPlayTotals, totals_of
from azshogi.selfplay.server import (
    ClientHandle,
    ClientLost,
    InferenceServer,
    ServerGone,
    WorkerError,
)
from azshogi.shogi.game_record import SelfPlayGame
from azshogi.shogi.rules import Rules

STARTUP_TIMEOUT_S = 300.0  # spawn, import torch and build the search, on a busy machine
ANSWER_TIMEOUT_S = 300.0  # a worker's answer to "state" or "load"
WORKER_TIMEOUT_S = 300.0  # a stepping worker silent this long (not waiting on us) is hung
STOP_GRACE_S = 5.0  # after "stop", before a worker is killed
_POLL_S = 0.05  # how often `until` and the watchdog are checked while serving

__all__ = ["WorkerSelfPlay", "WorkerError", "worker_main", "shares"]


def shares(num_actors: int, num_workers: int) -> list[int]:
    """Actors per worker, as even as possible."""
    return [num_actors // num_workers + (1 if w < num_actors % num_workers else 0) for w in range(num_workers)]


def worker_main(handle: ClientHandle, search_config, rules: Rules, num_actors: int, seed: int,
                min_policy_prob: float, first_game_id: int, game_id_step: int, playout_cap: PlayoutCap) -> None:
    """A worker process: builds its search and SelfPlay, then obeys commands until "stop"."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group;
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the main process stops us after its checkpoint
    import torch

    torch.set_num_threads(1)
    from azshogi.search import make_search
    from azshogi.selfplay.actors import SelfPlay
    from azshogi.selfplay.server import ClientEvaluator

    client = ClientEvaluator(handle)
    code = 0
    try:
        search = make_search(search_config, client, rules, num_actors)
        selfplay = SelfPlay(search, rules, num_actors, seed, min_policy_prob, first_game_id, game_id_step,
                            playout_cap)
        client.send(("ready",))
        while True:
            command = client.receive()
            if command[0] == "step":
                before = totals_of(selfplay)
                finished = selfplay.step()
                client.send(("stepped", finished, totals_of(selfplay) - before))
            elif command[0] == "state":
                client.send(("state", selfplay.state_dict()))
            elif command[0] == "load":
                selfplay.load_state_dict(command[1])
                client.send(("loaded",))
            elif command[0] == "stop":
                break
            else:
                raise ValueError(f"unknown command {command[0]!r}")
    except ServerGone:  # the main process has gone or told us to stop mid-move
        pass
    except BaseException:
        code = 1
        try:
            client.send(("error", traceback.format_exc()))
        except ServerGone:
            pass
    finally:
        client.close()
    sys.exit(code)


def _shutdown(processes: list, server: InferenceServer) -> None:
    """Stops every worker (asking, then killing), joins them, removes the shared memory."""
    try:
        for i, p in enumerate(processes):
            if p.is_alive():
                try:
                    server.send(i, ("stop",))
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
    rows_per_actor: leaves per actor in one forward pass (PUCT's leaves_per_step)."""

    def __init__(self, evaluator: LocalEvaluator, search_config, rules: Rules, num_actors: int, num_workers: int,
                 seed: int = 0, min_policy_prob: float = 1e-4, rows_per_actor: int = 1, max_batch: int = 0,
                 wait_s: float = 0.002, worker_timeout_s: float = WORKER_TIMEOUT_S,
                 playout_cap: PlayoutCap = PlayoutCap(), first_game_id: int = 0):
        if not 1 <= num_workers <= num_actors:
            raise ValueError(f"num_workers={num_workers}: must be in [1, num_actors={num_actors}]")
        self.evaluator, self.search_config, self.rules = evaluator, search_config, rules
        self.seed, self.min_policy_prob, self.playout_cap = seed, min_policy_prob, playout_cap
        self.first_game_id = first_game_id
        self.shares = shares(num_actors, num_workers)
        self.processes = num_workers
        self.rows = [n * rows_per_actor for n in self.shares]
        self.max_batch = max_batch or sum(self.rows)
        self.wait_s, self.worker_timeout_s = wait_s, worker_timeout_s
        self.server: Optional[InferenceServer] = None
        self.workers: list = []
        self.idle: set[int] = set()  # paused between moves
        self.active: set[int] = set()  # told to step, not yet answered
        self._pending_state: Optional[dict] = None
        self._finalizer: Optional[weakref.finalize] = None
        self._closed = False
        self._totals = SelfPlayTotals()  # the workers' moves and times (their `network`: their clients' waits)

    # --- the driver interface ---

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        self._ensure_started()
        stopping = until()
        if not stopping:
            for w in sorted(self.idle):
                self._command(w, ("step",))
        while self.active:
            for w, message in self._pump(_POLL_S):
                if message[0] != "stepped":
                    raise WorkerError(f"self-play worker {w} sent {message[0]!r} during a move")
                _, finished, move = message
                self.active.discard(w)
                self.idle.add(w)
                self._totals += move
                yield from finished
                stopping = stopping or until()
                if not stopping:
                    self._command(w, ("step",))
            stopping = stopping or until()

    def counters(self) -> SelfPlayTotals:
        """The workers' totals; `network`: the forward passes of this process's one model."""
        return replace(self._totals, network=replace(self.evaluator.stats))

    def state_dict(self) -> dict:
        """All workers' games in progress, in worker order (workers must be paused)."""
        self._ensure_started()
        if self.active:
            raise RuntimeError("state_dict() while workers are playing; exhaust play() first")
        for w in range(self.processes):
            self._command(w, ("state",), activity=False)
        return in_progress.concatenate(self._await_each("state", ANSWER_TIMEOUT_S))

    def load_state_dict(self, state: dict) -> None:
        """Shares out the saved games (contiguous runs, in order) when the workers start."""
        if self.server is None:
            self._pending_state = state
            return
        if self.active:
            raise RuntimeError("load_state_dict() while workers are playing")
        base, total, start = int(state["next_game_id"]), in_progress.num_games(state), 0
        for w, n in enumerate(self.shares):
            share = in_progress.take(state, min(start, total), min(start + n, total), next_game_id=base + w)
            self._command(w, ("load", share), activity=False)
            start += n
        self._await_each("loaded", ANSWER_TIMEOUT_S)

    def status(self) -> DriverStatus:
        return DriverStatus()

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

    def _ensure_started(self) -> None:
        if self._closed:
            raise RuntimeError("the self-play workers have been closed")
        if self.server is not None:
            return
        ctx = mp.get_context("spawn")
        self.server = InferenceServer(self.evaluator, self.rows, self.max_batch, self.wait_s)
        self._finalizer = weakref.finalize(self, _shutdown, self.workers, self.server)
        step = self.processes
        for w, n in enumerate(self.shares):
            p = ctx.Process(target=worker_main, name=f"azshogi-selfplay-{w}", daemon=True,
                            args=(self.server.handle(w), self.search_config, self.rules, n, self.seed,
                                  self.min_policy_prob, self.first_game_id + w, step, self.playout_cap))
            p.start()
            self.workers.append(p)
            self.server.client_started(w)
        self._await_each("ready", STARTUP_TIMEOUT_S)
        self.idle = set(range(self.processes))
        if self._pending_state is not None:
            state, self._pending_state = self._pending_state, None
            self.load_state_dict(state)

    def _server(self) -> InferenceServer:
        """The inference server, started by _ensure_started."""
        assert self.server is not None, "the self-play workers have not started"
        return self.server

    def _command(self, w: int, message: tuple, activity: bool = True) -> None:
        server = self._server()
        try:
            server.send(w, message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._lost(w, "its pipe has closed") from None
        server.last_heard[w] = time.monotonic()
        if activity:
            self.idle.discard(w)
            self.active.add(w)

    def _pump(self, timeout: float) -> list[tuple[int, tuple]]:
        """Serves evaluations for up to `timeout` s; the other messages that arrived."""
        sentinels = {w: p.sentinel for w, p in enumerate(self.workers)}
        server = self._server()
        try:
            messages = server.serve(self.active, timeout, sentinels)
        except ClientLost as e:
            raise self._lost(e.index, e.detail) from None
        for w, message in messages:
            if message[0] == "error":
                raise WorkerError(f"self-play worker {w} (pid {self.workers[w].pid}) failed:\n{message[1]}")
        now = time.monotonic()
        for w in self.active - server.waiting:
            silent = now - server.last_heard[w]
            if silent > self.worker_timeout_s:
                raise WorkerError(f"self-play worker {w} (pid {self.workers[w].pid}) has not answered for "
                                  f"{silent:.0f} s")
        return messages

    def _await_each(self, kind: str, timeout: float) -> list:
        """Every worker's answer of `kind` (its payload), in worker order."""
        answers: dict[int, object] = {}
        deadline = time.monotonic() + timeout
        while len(answers) < self.processes:
            for w, message in self._pump(_POLL_S):
                if message[0] != kind:
                    raise WorkerError(f"self-play worker {w} sent {message[0]!r}, {kind!r} was expected")
                answers[w] = message[1] if len(message) > 1 else None
            if time.monotonic() > deadline:
                missing = sorted(set(range(self.processes)) - set(answers))
                raise WorkerError(f"self-play worker(s) {missing} did not answer {kind!r} within {timeout:.0f} s")
        return [answers[w] for w in range(self.processes)]

    def _lost(self, w: int, detail: str) -> WorkerError:
        p = self.workers[w]
        p.join(1.0)
        return WorkerError(f"self-play worker {w} (pid {p.pid}) {_describe_exit(p)} ({detail}); "
                           f"the run stops (the last checkpoint holds the state to resume from)")
