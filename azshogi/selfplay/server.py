"""The inference server: one model in the main process, evaluating for searches in other processes.

One block of shared memory holds a region of rows for each client (a self-play worker), one
after the other. A client's search writes its leaf features straight into its region
(`ClientEvaluator.allocate` returns numpy views onto it), then sends a few bytes down its pipe:
("eval", rows). The server gathers such requests from all clients into one batch, runs one
forward pass on the shared model (through a LocalEvaluator, so the weights are always the
trained ones), writes policy logits and win probabilities back into each client's region and
answers ("done",) on its pipe. No array is ever pickled; only the row count and the answer
travel through the pipes. When the requests of a batch lie back to back in the block (clients
i, i+1, ... each sending a full region, the usual case), the forward pass reads the block
itself; otherwise the rows are first copied together.

A batch is run as soon as it holds `max_batch` rows, or every client that may still ask is
waiting for an answer (nobody else can add to it), or its first request has waited `wait_s`.

The block is created and unlinked by the server (the main process); clients only attach. Its
name starts with SHM_PREFIX, so a leak would be visible in /dev/shm.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import secrets
import time
from dataclasses import dataclass
from multiprocessing import connection
from multiprocessing.shared_memory import SharedMemory
from typing import Iterable, Optional

import numpy as np

from azshogi.nn.evaluator import LocalEvaluator
from azshogi.search.base import EvalStats
from azshogi.shogi import features

SHM_PREFIX = "azshogi_"
NUM_LABELS = features.NUM_LABELS
_ALIGN = 64


def send_message(conn: connection.Connection, message: tuple) -> None:
    """Plain pickle: multiprocessing's own pickler would move torch tensors (a state_dict's)
    into torch's shared memory instead of copying them."""
    conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def receive_message(conn: connection.Connection) -> tuple:
    return pickle.loads(conn.recv_bytes())


class WorkerError(RuntimeError):
    """A self-play worker died, failed or stopped answering; the message names it."""


class ClientLost(Exception):
    """Client `index` has gone (its pipe closed or its process ended)."""

    def __init__(self, index: int, detail: str):
        super().__init__(f"client {index}: {detail}")
        self.index, self.detail = index, detail


def _layout(rows: int) -> tuple[dict, int]:
    """Byte offsets and shapes of the four arrays of a block of `rows` rows, and its size."""
    shapes = {
        "features1": (rows, features.FEATURES1_PLANES, 9, 9),
        "features2": (rows, features.FEATURES2_PLANES, 9, 9),
        "logits": (rows, NUM_LABELS),
        "win_probability": (rows,),
    }
    layout, offset = {}, 0
    for name, shape in shapes.items():
        layout[name] = (offset, shape)
        offset += -(-int(np.prod(shape)) * 4 // _ALIGN) * _ALIGN
    return layout, max(offset, _ALIGN)


class SharedBlock:
    """R rows of float32 arrays in shared memory: features1 (R, 62, 9, 9) and features2
    (R, 57, 9, 9) written by the clients, logits (R, 2187) and win_probability (R,) written by
    the server."""

    def __init__(self, shm: SharedMemory, rows: int, owner: bool):
        self.shm, self.rows, self.owner = shm, rows, owner
        layout, _ = _layout(rows)
        for name, (offset, shape) in layout.items():
            setattr(self, name, np.ndarray(shape, np.float32, buffer=shm.buf, offset=offset))

    @classmethod
    def create(cls, rows: int) -> "SharedBlock":
        name = f"{SHM_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
        return cls(SharedMemory(name=name, create=True, size=_layout(rows)[1]), rows, owner=True)

    @classmethod
    def attach(cls, name: str, rows: int) -> "SharedBlock":
        # Attaching registers the block with the resource tracker again (Python < 3.13), but a
        # spawned child shares its parent's tracker, which keeps a set of names: no effect. The
        # tracker unlinks the block should the main process die without closing the server.
        return cls(SharedMemory(name=name), rows, owner=False)

    @property
    def name(self) -> str:
        return self.shm.name

    def close(self) -> None:
        """Releases the mapping (and, for the owner, removes the block)."""
        for name in ("features1", "features2", "logits", "win_probability"):
            self.__dict__.pop(name, None)  # views must go before the buffer can be released
        try:
            self.shm.close()
        except BufferError:  # a view is still held somewhere; the mapping goes with the process
            pass
        if self.owner:
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass


@dataclass(frozen=True)
class ClientHandle:
    """What a client process needs to reach the server (picklable for spawn): its region is
    rows [offset, offset + rows) of the block of `block_rows` rows named `shm_name`."""

    index: int
    shm_name: str
    block_rows: int
    offset: int
    rows: int
    conn: connection.Connection
    parent_pid: int


class ServerGone(Exception):
    """The main process died or closed the pipe: the client should exit."""


class ClientEvaluator:
    """The Evaluator a worker's search uses: features go into shared memory, the server answers.

    The same pipe carries the worker's control messages (see workers.py); `send` and `receive`
    are for those. Every wait polls with a timeout and gives up when the parent process is gone."""

    def __init__(self, handle: ClientHandle, poll_seconds: float = 1.0):
        self.handle, self.conn, self.rows = handle, handle.conn, handle.rows
        self.block = SharedBlock.attach(handle.shm_name, handle.block_rows)
        region = slice(handle.offset, handle.offset + handle.rows)
        self.features1, self.features2 = self.block.features1[region], self.block.features2[region]
        self.logits, self.win_probability = self.block.logits[region], self.block.win_probability[region]
        self.poll_seconds = poll_seconds
        self.stats = EvalStats()  # seconds: waiting for answers, forward passes included

    def allocate(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        if batch > self.rows:
            raise ValueError(f"worker {self.handle.index}: {batch} rows asked, its shared memory holds {self.rows}")
        return self.features1[:batch], self.features2[:batch]

    def evaluate(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = time.perf_counter()
        k = len(features1)
        if k > self.rows:
            raise ValueError(f"worker {self.handle.index}: a batch of {k} exceeds its {self.rows} rows")
        if not _is_front_of(features1, self.features1):
            self.features1[:k] = features1
        if not _is_front_of(features2, self.features2):
            self.features2[:k] = features2
        self.send(("eval", k))
        answer = self.receive()
        if answer[0] != "done":
            raise ServerGone(f"expected an evaluation, got {answer[0]!r}")
        logits, probability = self.logits[:k].copy(), self.win_probability[:k].copy()
        self.stats.calls += 1
        self.stats.positions += k
        self.stats.seconds += time.perf_counter() - start
        return logits, probability

    def send(self, message: tuple) -> None:
        try:
            send_message(self.conn, message)
        except (BrokenPipeError, ConnectionResetError, EOFError) as e:
            raise ServerGone(str(e)) from e

    def receive(self) -> tuple:
        """The next message from the server; ServerGone if the parent has died."""
        while True:
            try:
                if self.conn.poll(self.poll_seconds):
                    return receive_message(self.conn)
            except (EOFError, ConnectionResetError, BrokenPipeError, OSError) as e:
                raise ServerGone(str(e)) from e
            if os.getppid() != self.handle.parent_pid:
                raise ServerGone("the main process has exited")

    def close(self) -> None:
        del self.features1, self.features2, self.logits, self.win_probability
        self.block.close()
        self.conn.close()


def _is_front_of(view: np.ndarray, base: np.ndarray) -> bool:
    return (view.__array_interface__["data"][0] == base.__array_interface__["data"][0]
            and view.flags.c_contiguous)


class InferenceServer:
    """Serves evaluation requests of `len(rows)` clients from one LocalEvaluator.

    rows[i]: the most positions client i sends at once (its region). max_batch: the largest
    forward pass (a single larger request is split). wait_s: how long a partial batch waits
    for more requests while some client is still searching."""

    def __init__(self, evaluator: LocalEvaluator, rows: Iterable[int], max_batch: int, wait_s: float):
        self.evaluator = evaluator
        self.rows = list(rows)
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)]).astype(int).tolist()
        self.max_batch, self.wait_s = max_batch, wait_s
        self.block: Optional[SharedBlock] = None
        self.conns: list[connection.Connection] = []
        self._client_ends: list[Optional[connection.Connection]] = []
        try:
            self.block = SharedBlock.create(self.offsets[-1])
            for _ in self.rows:
                ours, theirs = mp.Pipe(duplex=True)
                self.conns.append(ours)
                self._client_ends.append(theirs)
        except BaseException:
            self.close()
            raise
        self._index = {c.fileno(): i for i, c in enumerate(self.conns)}
        self.staging = None  # for batches whose rows are not back to back (allocated when needed)
        self.pending: list[tuple[int, int]] = []  # (client, rows), in arrival order
        self.first_pending_at = 0.0
        self.waiting: set[int] = set()  # clients with a request pending
        self.last_heard = [time.monotonic()] * len(self.conns)
        self.gathered = 0  # forward passes whose rows had to be copied together

    def handle(self, i: int) -> ClientHandle:
        return ClientHandle(i, self.block.name, self.block.rows, self.offsets[i], self.rows[i], self._client_ends[i],
                            os.getpid())

    def client_started(self, i: int) -> None:
        """Closes the main process's copy of client i's pipe end: EOF then means it has gone."""
        end, self._client_ends[i] = self._client_ends[i], None
        if end is not None:
            end.close()

    def send(self, i: int, message: tuple) -> None:
        send_message(self.conns[i], message)

    def serve(self, active: set, timeout: float, sentinels: Optional[dict] = None) -> list[tuple[int, tuple]]:
        """Answers evaluation requests for up to `timeout` seconds; returns as soon as any client
        sends another message, as [(client, message), ...].

        active: the clients that may still send a request (a batch goes as soon as all of them
        are waiting). sentinels: {client: process sentinel}. A client whose pipe closes or whose
        process ends (after its last messages are read) raises ClientLost."""
        deadline = time.monotonic() + timeout
        others: list[tuple[int, tuple]] = []
        watch = {s: i for i, s in (sentinels or {}).items()}
        while True:
            now = time.monotonic()
            if self.pending and self._batch_due(active, now):
                self._flush()
                continue
            if others or now >= deadline:
                return others
            wait = deadline - now
            if self.pending:
                wait = min(wait, max(0.0, self.first_pending_at + self.wait_s - now))
            ready = connection.wait(self.conns + list(watch), wait)
            for obj in ready:
                if not isinstance(obj, int):
                    self._receive(self._index[obj.fileno()], others)
            for i in (watch[obj] for obj in ready if isinstance(obj, int)):
                while self.conns[i].poll():  # its last words (an error report) come first
                    self._receive(i, others)
                if not any(j == i for j, _ in others):
                    raise ClientLost(i, "its process has ended")

    def _receive(self, i: int, others: list) -> None:
        try:
            message = receive_message(self.conns[i])
        except (EOFError, ConnectionResetError, OSError):
            raise ClientLost(i, "its pipe has closed") from None
        self.last_heard[i] = time.monotonic()
        if message[0] == "eval":
            if not self.pending:
                self.first_pending_at = self.last_heard[i]
            self.pending.append((i, int(message[1])))
            self.waiting.add(i)
        else:
            others.append((i, message))

    def _batch_due(self, active: set, now: float) -> bool:
        rows = sum(k for _, k in self.pending)
        return (rows >= self.max_batch or active <= self.waiting
                or now - self.first_pending_at >= self.wait_s)

    def _flush(self) -> None:
        """One forward pass over the oldest pending requests (up to max_batch rows)."""
        take, rows = 0, 0
        while take < len(self.pending) and (take == 0 or rows + self.pending[take][1] <= self.max_batch):
            rows += self.pending[take][1]
            take += 1
        batch, self.pending = sorted(self.pending[:take]), self.pending[take:]
        self.first_pending_at = time.monotonic()
        b, offsets = self.block, self.offsets
        start = offsets[batch[0][0]]
        if all(j == i + 1 and k == self.rows[i] for (i, k), (j, _) in zip(batch, batch[1:])):
            span = slice(start, start + rows)  # back to back: evaluate the block in place
            b.logits[span], b.win_probability[span] = self._forward(b.features1[span], b.features2[span])
        else:
            if self.staging is None:
                self.staging = self.evaluator.allocate(max(self.max_batch, max(self.rows)))
            f1, f2 = self.staging
            at = 0
            for i, k in batch:
                f1[at:at + k] = b.features1[offsets[i]:offsets[i] + k]
                f2[at:at + k] = b.features2[offsets[i]:offsets[i] + k]
                at += k
            logits, probability = self._forward(f1[:rows], f2[:rows])
            at = 0
            for i, k in batch:
                b.logits[offsets[i]:offsets[i] + k] = logits[at:at + k]
                b.win_probability[offsets[i]:offsets[i] + k] = probability[at:at + k]
                at += k
            self.gathered += 1
        now = time.monotonic()
        for i, _ in batch:
            self.waiting.discard(i)
            self.last_heard[i] = now
            send_message(self.conns[i], ("done",))

    def _forward(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The evaluator's answer, in forward passes of at most max_batch rows."""
        n = len(features1)
        if n <= self.max_batch:
            return self.evaluator.evaluate(features1, features2)
        parts = [self.evaluator.evaluate(features1[lo:lo + self.max_batch], features2[lo:lo + self.max_batch])
                 for lo in range(0, n, self.max_batch)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    @property
    def stats(self) -> EvalStats:
        return self.evaluator.stats

    def close(self) -> None:
        """Closes the pipes and removes every shared-memory block (safe to call twice)."""
        self.staging = None
        for c in self.conns + [e for e in self._client_ends if e is not None]:
            try:
                c.close()
            except OSError:
                pass
        self.conns, self._client_ends = [], []
        if self.block is not None:
            self.block.close()
            self.block = None
