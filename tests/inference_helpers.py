"""Helpers for the tests of the inference paths on either device (test_inference_paths.py on the
CPU, test_cuda.py on a GPU). Imported by name (pytest puts tests/ on sys.path).

- `Reference`: what a path is held to, the same network's plain dense forward pass on the CPU in
  fp32 (no folding, no packed planes, no gather on the device), per board.
- `LateDevice`: an asynchronous device for the CPU. DeviceRunner's interface over a CPU runner,
  doing each batch's work as late as the runner's contract allows, so that a caller who breaks
  the contract gets corrupted answers.
- `Counting`: any runner, counting the launches not yet waited for (launch-ahead shows as 2).
- `launch_in_turn`: back-to-back launches through reused host buffers, each answer checked.
- `serve_threads`: clients of an InferenceServer in threads of this process.

The runner's contract (nn/leaf_network.py): `launch(buffers, rows, labels)` returns at once with
a handle; until `wait(handle)` has returned, the caller must neither write that launch's inputs
nor read its outputs. Other buffers may be written and launched meanwhile; launches complete in
order (one stream).
"""
from __future__ import annotations

import collections
import copy
import functools
import threading
import time

import numpy as np
import torch
from cshogi import dlshogi

from azshogi.nn.leaf_network import wire_name
from azshogi.nn.network import build
from azshogi.selfplay.server import ClientEvaluator
from azshogi.shogi import features
from azshogi.shogi.network_io import WIRE_BYTES, LeafBatch, to_float32
from azshogi.train.bench import fill, sample_positions


@functools.lru_cache(maxsize=None)
def boards(count: int = 48, seed: int = 1) -> tuple:
    """Random-game positions (both sides to move, pieces in hand); do not modify them."""
    return tuple(sample_positions(count, seed=seed, plies=(0, 120)))


def varied_net(seed: int = 0) -> torch.nn.Module:
    """A tiny network (1 block x 16 channels) whose batch-norm statistics are not the identity
    (folding them away then matters), in eval mode on the CPU."""
    torch.manual_seed(seed)
    net = build(1, 16, 32).train()
    f1, f2 = features.allocate(32)
    for i, board in enumerate(boards(32, seed=seed + 7)):
        features.write(board, f1, f2, i)
    with torch.no_grad():
        for _ in range(3):
            net(torch.from_numpy(f1), torch.from_numpy(f2))
    return net.eval()


class Reference:
    """The plain network's fp32 forward pass on the CPU for each of `positions`: the logits of
    its legal moves (in cshogi's order, as a LeafBatch holds them) and its win probability."""

    def __init__(self, net: torch.nn.Module, positions):
        cpu = copy.deepcopy(net).float().cpu().eval()
        f1, f2 = features.allocate(len(positions))
        for i, board in enumerate(positions):
            dlshogi.make_input_features(board, f1[i], f2[i])
        with torch.no_grad():
            policy, value = cpu(torch.from_numpy(f1), torch.from_numpy(f2))
        self.logits = [policy[i, features.legal_moves_and_labels(b)[1]].numpy() for i, b in enumerate(positions)]
        self.probability = torch.sigmoid(value).squeeze(1).numpy()
        everything = np.concatenate(self.logits)
        self.logit_spread = float(everything.max() - everything.min())
        self.probability_spread = float(self.probability.max() - self.probability.min())
        assert self.logit_spread > 0 and self.probability_spread > 0

    def of(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """The answer for a batch of these positions (flat legal logits, win probabilities)."""
        return np.concatenate([self.logits[i] for i in indices]), self.probability[list(indices)]

    def assert_agrees(self, indices, logits, probability, tolerance: float, what: str = "") -> None:
        """Errors measured against the outputs' spread over all positions (an answer for other
        positions, or for none, is off by about the spread; `tolerance` is a fraction of it)."""
        want_logits, want_probability = self.of(indices)
        assert logits.shape == want_logits.shape and probability.shape == want_probability.shape, what
        for name, got, want, spread in (("logits", logits, want_logits, self.logit_spread),
                                        ("win probability", probability, want_probability, self.probability_spread)):
            error = float(np.abs(got - want).max())
            assert error <= tolerance * spread, f"{what} {name}: error {error:.3g}, spread {spread:.3g}"


def rounded(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """float32 `values` rounded to the nearest values of `dtype`."""
    return torch.from_numpy(np.ascontiguousarray(values, np.float32)).to(dtype).float().numpy()


def representable(values: np.ndarray, dtype: torch.dtype) -> bool:
    """Whether float32 `values` are all exact values of `dtype` (came through it unchanged)."""
    return np.array_equal(rounded(values, dtype), values)


class LateHandle:
    def __init__(self, buffers, rows: int, labels: int, due: float):
        self.buffers, self.rows, self.labels, self.due = buffers, rows, labels, due
        self.done = False

    def query(self) -> bool:
        return self.done


class LateDevice:
    """An asynchronous device on the CPU, always as late as the contract allows. `launch` only
    queues a batch (its handle's query() is False); the queued batches run in launch order when
    one of them is waited for, each `busy_s` after its launch at the earliest: only then are
    its inputs read from the host buffers and its outputs written there. pinned=True: the
    inference server launches ahead as on CUDA. `launch_s`: host time each launch takes (the
    kernel launches of a real network)."""

    pinned = True

    def __init__(self, runner, busy_s: float = 0.0, launch_s: float = 0.0):
        self.runner, self.busy_s, self.launch_s = runner, busy_s, launch_s
        self.queue: collections.deque = collections.deque()
        self.launched: list = []
        self.completed: list = []

    @property
    def wire(self) -> torch.dtype:
        return self.runner.wire

    def buffers(self, rows: int):
        return self.runner.buffers(rows)

    def launch(self, buffers, rows: int, labels: int) -> LateHandle:
        time.sleep(self.launch_s)
        handle = LateHandle(buffers, rows, labels, time.monotonic() + self.busy_s)
        self.queue.append(handle)
        self.launched.append(handle)
        return handle

    def wait(self, handle: LateHandle) -> None:
        while not handle.done:
            oldest = self.queue.popleft()
            time.sleep(max(0.0, oldest.due - time.monotonic()))
            self.runner.wait(self.runner.launch(oldest.buffers, oldest.rows, oldest.labels))  # reads the inputs now
            oldest.done = True
            self.completed.append(oldest)


class Counting:
    """A runner that counts the launches not yet waited for: `most` >= 2 means a batch was
    launched while another was still in flight (the server's launch-ahead)."""

    def __init__(self, runner):
        self.runner = runner
        self.unwaited = self.most = self.launches = 0

    @property
    def pinned(self) -> bool:
        return self.runner.pinned

    @property
    def wire(self) -> torch.dtype:
        return self.runner.wire

    def buffers(self, rows: int):
        return self.runner.buffers(rows)

    def launch(self, buffers, rows: int, labels: int):
        handle = self.runner.launch(buffers, rows, labels)
        self.launches += 1
        self.unwaited += 1
        self.most = max(self.most, self.unwaited)
        return handle

    def wait(self, handle) -> None:
        self.runner.wait(handle)
        self.unwaited -= 1


def read_answer(runner, buffers, rows: int, labels: int) -> tuple[np.ndarray, np.ndarray]:
    """A waited launch's answer as the search gets it: float32 logits from the wire dtype."""
    wire = wire_name(runner.wire)
    logits = to_float32(buffers.logits_raw()[:labels * WIRE_BYTES[wire]], wire)
    return logits, buffers.values[:rows].numpy().copy()


def launch_in_turn(runner, reference: Reference, positions, tolerance: float, launches: int = 24,
                   depth: int = 2, rows: int = 12, seed: int = 0, before_launch=lambda: None,
                   buffers: int = 0, shuffled: bool = False) -> int:
    """Launches `launches` different batches back to back through `depth` host buffers, keeping
    to the contract as the inference server does: a buffer is written again only once its last
    launch has been waited for, and while `depth` - 1 batches are in flight the next one is
    written into another buffer and launched. Checks every answer against the reference for its
    own batch; returns how many batches were written while another was still in flight (not
    done by its handle's query()). `before_launch` runs just before each launch (to make a
    device busy). `buffers` < depth breaks the contract (a buffer is written while in flight);
    `shuffled`: every batch the same `rows` positions in another order (the same counts' sum,
    so that a batch mixed up with another still gathers as many logits as it was launched with)."""
    rng = np.random.default_rng(seed)
    pool = [runner.buffers(rows) for _ in range(buffers or depth)]
    in_flight: collections.deque = collections.deque()
    overlapped = 0

    def collect():
        j, indices, host, handle, k, n = in_flight.popleft()
        runner.wait(handle)
        logits, probability = read_answer(runner, host, k, n)
        reference.assert_agrees(indices, logits, probability, tolerance, f"batch {j}")

    for j in range(launches):
        if len(in_flight) == depth:
            collect()
        host = pool[j % len(pool)]
        indices = rng.permutation(rows) if shuffled else \
            rng.choice(len(positions), size=int(rng.integers(rows // 2, rows + 1)), replace=False)
        batch = fill(LeafBatch(rows, host.packed, host.counts, host.labels), [positions[i] for i in indices])
        overlapped += any(not handle.query() for _, _, _, handle, _, _ in in_flight)
        before_launch()
        in_flight.append((j, indices, host, runner.launch(host, batch.size, batch.num_labels), batch.size,
                          batch.num_labels))
    while in_flight:
        collect()
    return overlapped


def _client_thread(client: ClientEvaluator, positions, requests: int, seed: int, answers: dict) -> None:
    """An inference server's client, as a worker's search is: random batches of `positions`
    written in place into its shared region, each answer kept with the batch's indices."""
    rng = np.random.default_rng(seed)
    batch = client.allocate(client.rows)
    got = answers.setdefault(client.handle.index, [])
    for _ in range(requests):
        indices = rng.integers(len(positions), size=int(rng.integers(1, client.rows + 1)))
        fill(batch, [positions[i] for i in indices])
        got.append((indices, *client.evaluate(batch)))
    client.send(("finished",))


def serve_threads(server, positions, requests: int, seed: int = 0, seconds: float = 60.0) -> dict:
    """Runs one client thread per region of `server` (`requests` each) and serves them until all
    have finished; every client's first request is pending before the first serve(), so that
    the first batches are formed together. Returns {client: [(indices, logits, probability)]}."""
    clients = range(len(server.rows))
    # In threads, their parent is not the server: no parent check within the test's time.
    evaluators = [ClientEvaluator(server.handle(i), poll_seconds=seconds) for i in clients]
    answers: dict = {}
    threads = [threading.Thread(target=_client_thread, args=(c, positions, requests, seed + i, answers), daemon=True)
               for i, c in enumerate(evaluators)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + seconds
        while not all(c.poll() for c in server.conns):  # every first request has arrived
            assert time.monotonic() < deadline and all(t.is_alive() for t in threads), "a client did not ask"
            time.sleep(0.005)
        finished: set = set()
        while len(finished) < len(server.rows):
            for i, message in server.serve(set(clients) - finished, 0.05):
                assert message == ("finished",), message
                finished.add(i)
            failed = [i for i, t in enumerate(threads) if not t.is_alive() and len(answers.get(i, ())) < requests]
            assert not failed and time.monotonic() < deadline, f"clients {failed} failed or did not finish"
    finally:
        for t in threads:
            t.join(2.0)
        for c in evaluators:  # closed only now: a closed pipe is a lost client to the server
            c.close()
    return answers
