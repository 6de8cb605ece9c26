"""The inference server: one model in the main process, evaluating for searches in other processes.

One block of shared memory holds a region for each client (a self-play worker). A client's
search fills a LeafBatch (shogi/network_io.py) straight in its region — each leaf's planes packed to
636 bytes, its number of legal moves and their labels (2 bytes each) — then sends 9 bytes down
its pipe: b"E", leaves, labels. The server gathers such requests from all clients into one batch
(in staging buffers, pinned on CUDA), where the device expands the planes, runs one forward pass
on the shared model (through a LocalEvaluator's network, so the weights are always the trained
ones) and gathers the legal moves' logits; only those (in the network's 16-bit dtype under bf16
or fp16 autocast) and the win probabilities come back into each client's region, and the client
is answered b"D". No array is ever pickled; only control messages (workers.py) are pickled
tuples. Per position that is about 640 + 2 x legal moves bytes in and 4 + 2 x legal moves out,
against 38,556 and 8,752 bytes for dense float32 planes and a full row of logits.

The block is created and unlinked by the server (the main process); clients only attach. Its
name starts with SHM_PREFIX, so a leak would be visible in /dev/shm.
"""
from __future__ import annotations

import collections
import multiprocessing as mp
import os
import pickle
import queue
import secrets
import selectors
import struct
import threading
import time
from dataclasses import dataclass
from multiprocessing import connection
from multiprocessing.shared_memory import SharedMemory
from typing import Iterable, Optional

import numpy as np

from azshogi.shogi import features
from azshogi.shogi.network_io import WIRE_BYTES, EvaluatorTotals, LeafBatch, to_float32

SHM_PREFIX = "azshogi_"
_ALIGN = 64
_EVAL, _DONE = b"E", b"D"  # raw messages; every other message is a pickled tuple
_REQUEST = struct.Struct("<cii")  # b"E", leaves, labels


def send_message(conn: connection.Connection, message: tuple) -> None:
    """Plain pickle: multiprocessing's own pickler would move torch tensors (a state_dict's)
    into torch's shared memory instead of copying them."""
    conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def receive_message(conn: connection.Connection) -> tuple:
    data = conn.recv_bytes()
    if data[:1] == _EVAL:
        _, rows, labels = _REQUEST.unpack(data)
        return ("eval", rows, labels)
    return ("done",) if data == _DONE else pickle.loads(data)


class ClientLost(Exception):
    """Client `index` has gone (its pipe closed or its process ended)."""

    def __init__(self, index: int, detail: str):
        super().__init__(f"client {index}: {detail}")
        self.index, self.detail = index, detail


def _layout(rows: int) -> tuple[dict, int]:
    """Byte offsets, shapes and dtypes of the block's arrays for `rows` rows in all, and its size.
    A client's region is a range of rows, and the same range x MAX_LEGAL_MOVES of labels."""
    labels = rows * features.MAX_LEGAL_MOVES
    arrays = {
        "packed": ((rows, features.PACKED_BYTES), np.uint8),
        "counts": ((rows,), np.int32),
        "labels": ((labels,), np.int16),
        "logits": ((labels * max(WIRE_BYTES.values()),), np.uint8),  # raw values in the wire dtype
        "win_probability": ((rows,), np.float32),
    }
    layout, offset = {}, 0
    for name, (shape, dtype) in arrays.items():
        layout[name] = (offset, shape, dtype)
        offset += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // _ALIGN) * _ALIGN
    return layout, max(offset, _ALIGN)


class SharedBlock:
    """The shared arrays of R rows: packed (R, 636), counts (R,), labels (R x 593,) written by
    the clients; logits (raw wire values) and win_probability (R,) written by the server."""

    packed: np.ndarray  # views into the shared memory, set in __init__ from _layout
    counts: np.ndarray
    labels: np.ndarray
    logits: np.ndarray
    win_probability: np.ndarray

    def __init__(self, shm: SharedMemory, rows: int, owner: bool):
        self.shm, self.rows, self.owner = shm, rows, owner
        layout, _ = _layout(rows)
        for name, (offset, shape, dtype) in layout.items():
            setattr(self, name, np.ndarray(shape, dtype, buffer=shm.buf, offset=offset))

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
        for name in _layout(0)[0]:
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
    rows [offset, offset + rows) of the block of `block_rows` rows named `shm_name`; logits come
    back in dtype `wire` (shogi/network_io.py's WIRE_BYTES)."""

    index: int
    shm_name: str
    block_rows: int
    offset: int
    rows: int
    conn: connection.Connection
    parent_pid: int
    wire: str = "float32"


class ServerGone(Exception):
    """The main process died or closed the pipe: the client should exit."""


class IdleClock:
    """The seconds during which all `groups` clients of one process were waiting for answers at
    once: the process had nothing to search (with one group: all its waits)."""

    def __init__(self, groups: int):
        self.groups, self.waiting, self.since, self.total = groups, 0, 0.0, 0.0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.waiting += 1
            if self.waiting == self.groups:
                self.since = time.perf_counter()

    def leave(self) -> None:
        with self.lock:
            if self.waiting == self.groups:
                self.total += time.perf_counter() - self.since
            self.waiting -= 1

    def take(self) -> float:
        """The idle seconds since the last take."""
        with self.lock:
            total, self.total = self.total, 0.0
            if self.waiting == self.groups:  # idle now: count up to here, go on from here
                now = time.perf_counter()
                total, self.since = total + now - self.since, now
            return total


class ClientEvaluator:
    """The Evaluator a worker's search uses: leaves go into shared memory, the server answers.

    The same pipe carries the worker's control messages (see workers.py); `send`, `receive` and
    `next_command` are for those. A control message that arrives while the search waits for an
    evaluation is kept for `receive` / `next_command`, in order. Every wait polls with a timeout
    and gives up when the parent process is gone. idle: the clock of all the process's clients.
    turn: a lock the process's searching threads take turns with (see workers.py): held while
    this client's search runs, let go while it waits for an answer."""

    def __init__(self, handle: ClientHandle, poll_seconds: float = 1.0, idle: Optional[IdleClock] = None,
                 turn: Optional[threading.Lock] = None):
        self.handle, self.conn, self.rows = handle, handle.conn, handle.rows
        self.inbox: collections.deque = collections.deque()
        self.idle, self.turn = idle or IdleClock(1), turn
        self.block = SharedBlock.attach(handle.shm_name, handle.block_rows)
        rows = slice(handle.offset, handle.offset + handle.rows)
        width = features.MAX_LEGAL_MOVES
        labels = slice(handle.offset * width, (handle.offset + handle.rows) * width)
        self.packed, self.counts = self.block.packed[rows], self.block.counts[rows]
        self.labels, self.win_probability = self.block.labels[labels], self.block.win_probability[rows]
        self.logits = self.block.logits[labels.start * 4:labels.stop * 4]  # room for float32 wire values
        self.poll_seconds = poll_seconds
        self.stats = EvaluatorTotals()  # seconds: waiting for answers, forward passes included

    def allocate(self, rows: int) -> LeafBatch:
        if rows > self.rows:
            raise ValueError(f"worker {self.handle.index}: {rows} rows asked, its shared memory holds {self.rows}")
        return LeafBatch(rows, self.packed[:rows], self.counts[:rows], self.labels[:rows * features.MAX_LEGAL_MOVES])

    def evaluate(self, batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        start = time.perf_counter()
        k, n = batch.size, batch.num_labels
        if k > self.rows:
            raise ValueError(f"worker {self.handle.index}: a batch of {k} exceeds its {self.rows} rows")
        if not np.shares_memory(batch.packed, self.packed):  # a batch allocated elsewhere
            self.packed[:k], self.counts[:k], self.labels[:n] = batch.packed[:k], batch.counts[:k], batch.labels[:n]
        try:
            self.conn.send_bytes(_REQUEST.pack(_EVAL, k, n))
        except (BrokenPipeError, ConnectionResetError, EOFError) as e:
            raise ServerGone(str(e)) from e
        self.idle.enter()
        if self.turn is not None:
            self.turn.release()  # another group's search runs while this one's leaves are evaluated
        try:
            while (answer := self._wait()) != ("done",):
                self.inbox.append(answer)  # a command for between moves
        finally:
            self.idle.leave()
            if self.turn is not None:
                self.turn.acquire()
        wire = self.handle.wire
        logits = to_float32(self.logits[:n * WIRE_BYTES[wire]], wire)
        probability = self.win_probability[:k].copy()
        self.stats.add(k, time.perf_counter() - start)
        return logits, probability

    def send(self, message: tuple) -> None:
        try:
            send_message(self.conn, message)
        except (BrokenPipeError, ConnectionResetError, EOFError) as e:
            raise ServerGone(str(e)) from e

    def receive(self) -> tuple:
        """The next control message from the server; ServerGone if the parent has died."""
        return self.inbox.popleft() if self.inbox else self._wait()

    def next_command(self) -> Optional[tuple]:
        """The next control message if one has come, else None at once."""
        if self.inbox:
            return self.inbox.popleft()
        try:
            return receive_message(self.conn) if self.conn.poll() else None
        except (EOFError, ConnectionResetError, BrokenPipeError, OSError) as e:
            raise ServerGone(str(e)) from e

    def _wait(self) -> tuple:
        """The next message on the pipe, whatever it is."""
        while True:
            try:
                if self.conn.poll(self.poll_seconds):
                    return receive_message(self.conn)
            except (EOFError, ConnectionResetError, BrokenPipeError, OSError) as e:
                raise ServerGone(str(e)) from e
            if os.getppid() != self.handle.parent_pid:
                raise ServerGone("the main process has exited")

    def close(self) -> None:
        del self.packed, self.counts, self.labels, self.logits, self.win_probability
        self.block.close()
        self.conn.close()


@dataclass
class _Job:
    """One forward pass: requests [(client, leaves, labels, arrived)] copied into staging `buffers`;
    times from time.perf_counter()."""

    requests: list
    buffers: object
    rows: int
    labels: int
    started: float  # handed to the device thread
    error: Optional[BaseException] = None
    device_start: float = 0.0  # the device thread launched it
    device_done: float = 0.0  # its outputs were in the host buffers
    device_busy: float = 0.0  # seconds of the device's time it alone accounts for (launches overlap)


# Rounds an InferenceServer keeps for its timeline (azshogi-bench's `timeline`: bench.run sets it);
# 0 in a run, which never reads them (100,000 of them held some 32 MB)
KEEP_ROUNDS = 0


@dataclass(frozen=True)
class Round:
    """One forward pass of the server as a timeline (time.perf_counter() seconds): its first and
    last request in, handed to the device thread (launch), the device's start and end, the
    answers out; its positions, and the device seconds it alone accounts for."""

    first_in: float
    last_in: float
    launch: float
    start: float
    done: float
    answered: float
    positions: int
    busy: float


class InferenceServer:
    """Serves evaluation requests of `len(rows)` clients through one LocalEvaluator's network.

    rows[i]: the most leaves client i sends at once (its region). max_batch: the largest forward
    pass (a larger single request is still run, in max_batch pieces). wait_s: how long a partial
    batch waits for more requests while the device is idle. depth: batches in flight at once.

    A request is copied from its client's region into one of `depth` staging buffers (pinned on
    CUDA) and handed to the device thread, which launches it and, on CUDA, launches the next
    queued batch before waiting for the first, so the device never waits for this thread. When
    a batch is done its logits (raw, in the network's dtype) and win probabilities are copied
    into each client's region and the client is answered. The batch-forming rule: a batch goes
    when it is full, or when every client that may still ask is waiting (nobody can add to it),
    or, with the device idle, once its first request has waited wait_s; while one batch runs,
    the next one grows."""

    def __init__(self, evaluator, rows: Iterable[int], max_batch: int, wait_s: float, depth: int = 2):
        from azshogi.nn.leaf_network import wire_name  # here: the clients' processes need no torch

        self.evaluator, self.runner = evaluator, evaluator.runner
        self.wire = wire_name(self.runner.wire)
        self.rows = list(rows)
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)]).astype(int).tolist()
        self.max_batch, self.wait_s = max_batch, wait_s
        self.block: Optional[SharedBlock] = None
        self.conns: list[connection.Connection] = []
        self._client_ends: list[Optional[connection.Connection]] = []
        self._thread: Optional[threading.Thread] = None
        try:
            self.block = SharedBlock.create(self.offsets[-1])
            for _ in self.rows:
                ours, theirs = mp.Pipe(duplex=True)
                self.conns.append(ours)
                self._client_ends.append(theirs)
            self._wake_r, self._wake_w = mp.Pipe(duplex=False)
        except BaseException:
            self.close()
            raise
        capacity = max(max_batch, max(self.rows))
        self.free = [self.runner.buffers(capacity) for _ in range(depth)]
        self.pending: list[tuple[int, int, int, float]] = []  # (client, leaves, labels, arrived), in order
        self.first_pending_at = 0.0
        self.waiting: set[int] = set()  # clients with a request pending or in flight
        self.in_flight: list[_Job] = []
        self.last_heard = [time.monotonic()] * len(self.conns)
        self.bytes_in = self.bytes_out = 0  # what crossed the process boundary, evaluations only
        self.served = 0  # positions evaluated for clients
        # the latest Rounds, oldest first, where a benchmark asks for them (KEEP_ROUNDS)
        self.rounds: collections.deque = collections.deque(maxlen=KEEP_ROUNDS)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._done: collections.deque = collections.deque()
        self._selector: Optional[selectors.BaseSelector] = None
        self._sentinels: dict = {}
        self._thread = threading.Thread(target=self._device_loop, name="azshogi-inference", daemon=True)
        self._thread.start()

    def _shared(self) -> SharedBlock:
        """The shared block (None only once the server is closed)."""
        assert self.block is not None, "the inference server is closed"
        return self.block

    def handle(self, i: int) -> ClientHandle:
        block, end = self._shared(), self._client_ends[i]
        assert end is not None, f"client {i}'s pipe end was handed over already"
        return ClientHandle(i, block.name, block.rows, self.offsets[i], self.rows[i], end, os.getpid(), self.wire)

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

        active: the clients that may still send a request. sentinels: {client: its process's
        sentinel} (several clients may share one). A client whose pipe closes or whose process
        ends (after its last messages are read) raises ClientLost."""
        deadline = time.monotonic() + timeout
        others: list[tuple[int, tuple]] = []
        self._watch(sentinels or {})
        while True:
            self._finish_done()
            now = time.monotonic()
            if self.pending and self._batch_due(active, now):
                self._launch()
                continue
            if others or now >= deadline:
                return others
            wait = deadline - now
            if self.pending and not self.in_flight:
                wait = min(wait, max(0.0, self.first_pending_at + self.wait_s - now))
            ended = []
            assert self._selector is not None  # made by _watch
            for key, _ in self._selector.select(wait):
                kind, i = key.data
                if kind == "client":
                    self._receive(i, others)
                elif kind == "wake":
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
                else:
                    ended.append(i)
            for clients in ended:  # a process's clients: its last words (an error report) come first
                for i in clients:
                    while self.conns[i].poll():
                        self._receive(i, others)
                if not any(j in clients for j, _ in others):
                    raise ClientLost(clients[0], "its process has ended")

    def _watch(self, sentinels: dict) -> None:
        """One selector for the pipes, the device thread's wake-up and the clients' process
        sentinels (registered again only when those change)."""
        if self._selector is None:
            self._selector = selectors.DefaultSelector()
            for i, c in enumerate(self.conns):
                self._selector.register(c, selectors.EVENT_READ, ("client", i))
            self._selector.register(self._wake_r, selectors.EVENT_READ, ("wake", -1))
        if sentinels != self._sentinels:
            for s in set(self._sentinels.values()):
                self._selector.unregister(s)
            processes: dict = {}  # sentinel -> its clients (a worker process serves several)
            for i, s in sentinels.items():
                processes.setdefault(s, []).append(i)
            for s, clients in processes.items():
                self._selector.register(s, selectors.EVENT_READ, ("ended", clients))
            self._sentinels = dict(sentinels)

    def _receive(self, i: int, others: list) -> None:
        try:
            message = receive_message(self.conns[i])
        except (EOFError, ConnectionResetError, OSError):
            raise ClientLost(i, "its pipe has closed") from None
        self.last_heard[i] = time.monotonic()
        if message[0] == "eval":
            if not self.pending:
                self.first_pending_at = self.last_heard[i]
            self.pending.append((i, int(message[1]), int(message[2]), time.perf_counter()))
            self.waiting.add(i)
        else:
            others.append((i, message))

    def _batch_due(self, active: set, now: float) -> bool:
        if not self.free:
            return False
        if sum(p[1] for p in self.pending) >= self.max_batch or active <= self.waiting:
            return True
        return not self.in_flight and now - self.first_pending_at >= self.wait_s

    def _launch(self) -> None:
        """Copies the oldest pending requests (up to max_batch leaves) into a staging buffer and
        hands them to the device thread."""
        take, rows, labels = 0, 0, 0
        while take < len(self.pending) and (take == 0 or rows + self.pending[take][1] <= self.max_batch):
            rows += self.pending[take][1]
            labels += self.pending[take][2]
            take += 1
        requests, self.pending = self.pending[:take], self.pending[take:]
        self.first_pending_at = time.monotonic()
        buffers, b, at, label_at = self.free.pop(), self._shared(), 0, 0
        for i, k, n, _ in requests:
            row, label = self.offsets[i], self.offsets[i] * features.MAX_LEGAL_MOVES
            buffers.packed[at:at + k] = b.packed[row:row + k]
            buffers.counts[at:at + k] = b.counts[row:row + k]
            buffers.labels[label_at:label_at + n] = b.labels[label:label + n]
            at, label_at = at + k, label_at + n
        job = _Job(requests, buffers, rows, labels, time.perf_counter())
        self.in_flight.append(job)
        self._jobs.put(job)

    def _device_loop(self) -> None:
        """The device thread: launches jobs in order; with an asynchronous device it launches
        every job already queued before it waits for the oldest."""
        launched: collections.deque = collections.deque()
        last_done = 0.0
        while True:
            job = None
            if not launched or self.runner.pinned:
                try:
                    job = self._jobs.get(block=not launched)
                except queue.Empty:
                    pass
            if job is _STOP:
                return
            if job is not None:
                job.device_start = time.perf_counter()
                try:
                    launched.append((job, self.runner.launch(job.buffers, job.rows, job.labels)))
                except BaseException as e:  # reported by the serving thread
                    job.error = e
                    launched.append((job, None))
                continue
            job, handle = launched.popleft()
            try:
                self.runner.wait(handle)
            except BaseException as e:
                job.error = e
            job.device_done = time.perf_counter()
            job.device_busy = job.device_done - max(job.device_start, last_done)
            last_done = job.device_done
            self._done.append(job)
            try:
                self._wake_w.send_bytes(b"")
            except OSError:  # closing
                return

    def _finish_done(self) -> None:
        """Copies finished batches' answers into the clients' regions and answers them."""
        while self._done:
            job = self._done.popleft()
            self.in_flight.remove(job)
            self.free.append(job.buffers)
            if job.error is not None:
                raise RuntimeError(f"the inference server's forward pass failed: {job.error!r}") from job.error
            b, raw, values = self._shared(), job.buffers.logits_raw(), job.buffers.values.numpy()
            size = WIRE_BYTES[self.wire]
            at, label_at, now = 0, 0, time.monotonic()
            for i, k, n, _ in job.requests:
                row, label = self.offsets[i], self.offsets[i] * features.MAX_LEGAL_MOVES * 4
                b.logits[label:label + n * size] = raw[label_at * size:(label_at + n) * size]
                b.win_probability[row:row + k] = values[at:at + k]
                at, label_at = at + k, label_at + n
                self.waiting.discard(i)
                self.last_heard[i] = now
                try:
                    self.conns[i].send_bytes(_DONE)
                except OSError:  # BrokenPipeError, ConnectionResetError: it has gone
                    raise ClientLost(i, "its pipe has closed") from None
            self.served += job.rows
            self.bytes_in += job.rows * (features.PACKED_BYTES + 4) + job.labels * 2
            self.bytes_out += job.rows * 4 + job.labels * size
            answered = time.perf_counter()
            self.evaluator.stats.add(job.rows, answered - job.started)
            if self.rounds.maxlen:
                arrivals = [t for _, _, _, t in job.requests]
                self.rounds.append(Round(min(arrivals), max(arrivals), job.started, job.device_start,
                                         job.device_done, answered, job.rows, job.device_busy))

    @property
    def stats(self) -> EvaluatorTotals:
        return self.evaluator.stats

    def close(self) -> None:
        """Stops the device thread, closes the pipes and removes every shared-memory block (safe
        to call twice)."""
        if self._thread is not None:
            self._jobs.put(_STOP)
            self._thread.join()
            self._thread = None
        for c in self.conns + [e for e in self._client_ends if e is not None] + \
                [getattr(self, name, None) for name in ("_wake_r", "_wake_w")]:
            try:
                if c is not None:
                    c.close()
            except OSError:
                pass
        self.conns, self._client_ends = [], []
        selector = getattr(self, "_selector", None)
        if selector is not None:
            selector.close()
            self._selector = None
        if self.block is not None:
            self.block.close()
            self.block = None


_STOP = object()
