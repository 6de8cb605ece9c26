"""Self-play on a Ray cluster (cluster.backend=ray, `+cluster=ray`; docs/cluster.md).

Each node is a Ray actor (`SelfPlayNode`) that runs this machine's self-play unchanged: the
selfplay settings hold per node (its games; in its process, or its worker processes around its
own inference server), with its own copy of the network on its own device. Only finished games
and weights cross the network. The main process keeps the replay buffer, training, checkpoints
and TensorBoard, and drives the nodes as WorkerSelfPlay drives its workers: one call plays one
move of each of a node's games, so a node that has answered every call is paused between two
moves (CALLS_IN_FLIGHT calls are queued on each node, so that it never waits for a round trip;
pausing stops calling and takes in the calls still queued, whose games count). The alternation
holds across nodes: when the loop's threshold is reached no node is called again, training
runs, and the next phase first sends the new weights, once per version through Ray's object
store (`ray.put` once, every node reads that object); each node answers every call with the
version it played with (checked) and its games carry it (`SelfPlayGame.weights_version`).

Game ids: each node started (at the run's start, on a resume, or to replace a lost one) numbers
its games from a range of its own, GAME_ID_RANGE wide, above every id given before; a checkpoint's
next_game_id is the first id above every range, so ids never repeat across nodes or restarts, on
a cluster or on one machine.

Checkpoints hold every node's games in progress in in_progress.py's format, the one machine's
format: a cluster's checkpoint resumes on another number of nodes or without Ray, and a one-machine
checkpoint on a cluster (the games are shared out in order, as to worker processes).

Failures: a node whose process dies, whose machine is lost, or that is silent in a call for
cluster.call_timeout_s is dropped; its games in progress are lost (counted: the progress line,
TensorBoard's selfplay/driver/games_lost, the log) and the phase goes on with the others. At the
next phase a replacement is started if the cluster has room for it. When no node is left the
run stops with ClusterError, keeping the last checkpoint. A node that raises (a bug, not a lost
machine) stops the run with its traceback.

Security: token authentication is always on (RAY_AUTH_MODE=token; a run with it set otherwise is
refused) and usage statistics off (RAY_USAGE_STATS_ENABLED=0). cluster.address=local starts a
Ray instance on this machine with every address on 127.0.0.1, its session folder (logs, sockets)
in a temporary folder removed when the run ends; another address is the cluster the user
started, on the addresses the user named (`ray start --node-ip-address=...`).
"""
from __future__ import annotations

import atexit
import collections
import glob
import logging
import math
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch

from azshogi.config import Config, ConfigError, from_plain, resolve_selfplay, to_plain
from azshogi.nn.evaluator import make_evaluator, resolve_device
from azshogi.nn.network import from_config
from azshogi.selfplay import in_progress
from azshogi.selfplay.drivers import DriverStatus, SelfPlayTotals, machine_cores, server_batch
from azshogi.selfplay.local import local_driver
from azshogi.shogi.game_record import SelfPlayGame

log = logging.getLogger("azshogi")

GAME_ID_RANGE = 10**9  # ids each node started may give its games
_POLL_S = 0.05  # how often `until` and the call timeouts are checked
# Calls queued on each node: the next move's call waits on the node while this process takes in
# the last answer, so a node never idles for a round trip; pausing drains them (their games count).
CALLS_IN_FLIGHT = 2
CLOSE_TIMEOUT_S = 10.0  # a node's own shutdown (its worker processes), before it is killed


class ClusterError(RuntimeError):
    """The cluster cannot go on (no node left, no connection, a node's bug): one line, or a
    node's traceback."""


def ray_environment(address: str) -> None:
    """Sets what Ray reads from the environment when it is imported and started (this process's
    environment reaches the Ray processes it starts): token authentication, no usage statistics,
    and for address=local every address on 127.0.0.1 (Ray otherwise advertises the machine's
    network interface even for a one-machine instance)."""
    mode = os.environ.get("RAY_AUTH_MODE", "token")
    if mode != "token":
        raise ClusterError(f"RAY_AUTH_MODE={mode}: azshogi's cluster runs with token authentication only "
                           f"(unset RAY_AUTH_MODE or set it to token; docs/cluster.md)")
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    if address == "local":
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def import_ray():
    try:
        import ray
    except ImportError:
        raise ClusterError('cluster.backend=ray needs Ray: pip install -e ".[cluster]"') from None
    return ray


def _no_colour_reset_at_exit() -> None:
    """Ray's start runs colorama.init(), whose exit handler writes an escape code (ESC[0m) to the
    terminal after the run's last line; azshogi writes no colours, so nothing needs resetting."""
    colorama = sys.modules.get("colorama.initialise")
    if colorama is not None and hasattr(colorama, "reset_all"):
        atexit.unregister(colorama.reset_all)


@dataclass
class Connection:
    """What `connect` did: whether this process started Ray (and must shut it down), and the
    temporary folder of a local instance's session (removed after)."""

    started: bool
    temp_dir: Optional[str] = None

    def close(self) -> None:
        if self.started:
            import_ray().shutdown()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def connect(cluster) -> Connection:
    """Connects this process to the cluster of a ClusterConfig (starting a local one for
    address=local, its session folder in a temporary folder: RAY_TMPDIR, else /tmp as Ray's own,
    whose socket paths must stay short)."""
    ray_environment(cluster.address)
    ray = import_ray()
    if ray.is_initialized():
        return Connection(False)
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                               "logging_level": logging.WARNING}
    if cluster.address == "local":
        cpus = cluster.local_cpus or max(1, math.ceil(cluster.nodes * cluster.node_cpus))
        parent = os.environ.get("RAY_TMPDIR") or ("/tmp" if os.path.isdir("/tmp") else None)
        remove_stale_sessions(parent or tempfile.gettempdir())
        temp_dir = tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=parent)
        with open(os.path.join(temp_dir, SESSION_OWNER), "w") as f:
            f.write(str(os.getpid()))
        try:
            ray.init(address="local", num_cpus=cpus, _node_ip_address="127.0.0.1", _temp_dir=temp_dir,
                     **options)  # a new one, always
        except BaseException:
            Connection(ray.is_initialized(), temp_dir).close()
            raise
        finally:
            _no_colour_reset_at_exit()
        return Connection(True, temp_dir)
    _reachable(cluster.address)
    try:
        ray.init(address=cluster.address, **options)
    except Exception as e:  # ConnectionError, AuthenticationError, ...: say which address, in one line
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClusterError(f"cluster.address={cluster.address}: cannot connect to the Ray cluster ({detail}); "
                           f"is its head running, and is this machine's token the cluster's? "
                           f"(docs/cluster.md)") from None
    finally:
        _no_colour_reset_at_exit()
    return Connection(True)


SESSION_PREFIX = "azshogi-ray-"  # a local instance's session folder: its name begins so
SESSION_OWNER = "azshogi-owner"  # in it: the pid of the process that started the instance


def remove_stale_sessions(parent: str) -> list[str]:
    """Removes the session folders of local instances whose owner is gone (killed with kill -9:
    its own cleanup never ran), and says which; a folder with no owner file, or a live owner,
    stays."""
    removed = []
    for folder in sorted(glob.glob(os.path.join(parent, SESSION_PREFIX + "*"))):
        try:
            with open(os.path.join(folder, SESSION_OWNER)) as f:
                pid = int(f.read().strip())
            os.kill(pid, 0)
        except ProcessLookupError:  # the owner is gone
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except (OSError, ValueError):  # no owner file (another program's), or not ours to judge
            continue
    return removed


def _reachable(address: str, timeout_s: float = 10.0) -> None:
    """A head's HOST:PORT (or ray://HOST:PORT) that takes no connection within `timeout_s` is a
    ClusterError: Ray's own connect retries it for ever. `auto` is Ray's to find."""
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ClusterError(f"cluster.address={address}: nothing answers there ({e.strerror or e}); is the "
                           f"cluster's head running at that address and port? (docs/cluster.md)") from None


def _config_error(e: BaseException) -> Optional[str]:
    """The message of a ConfigError that a node raised (a setting it cannot use, such as
    cluster.node_device), out of Ray's wrapping of its traceback; None for any other error."""
    found = re.findall(r"ConfigError: (.+)", re.sub(r"\x1b\[[0-9;]*m", "", str(e)))
    return found[-1].strip() if found else None


def _once() -> Callable[[], bool]:
    """An `until` that lets a driver play one move of each of its games."""
    asked = [0]

    def until() -> bool:
        asked[0] += 1
        return asked[0] > 1

    return until


class SelfPlayNode:
    """One node's self-play: local_driver's, around the node's own copy of the network (a Ray
    actor; its methods are called one at a time, in order)."""

    def __init__(self, plain_config: dict, first_game_id: int, stand_in: Optional[float] = None):
        try:  # Ctrl-C at the main process's terminal is the main process's to handle
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass
        cfg = from_plain(plain_config)
        self.device = resolve_device(cfg.cluster.node_device, key="cluster.node_device")
        cfg, self.note = resolve_selfplay(cfg, self.device.type, machine_cores())
        torch.manual_seed(cfg.seed)
        self.model = from_config(cfg.model).to(self.device)
        self.evaluator = make_evaluator(self.model, self.device, cfg.inference, server_batch(cfg), stand_in)
        self.driver = local_driver(cfg, self.evaluator, first_game_id)
        self.games = cfg.selfplay.num_actors
        self.version = -1
        self.resign_threshold: Optional[float] = None  # the run's automatic one, once sent

    def describe(self) -> dict:
        import ray

        return {"host": socket.gethostname(), "address": ray.util.get_node_ip_address(), "pid": os.getpid(),
                "device": str(self.device), "games": self.games, "processes": self.driver.processes,
                "note": self.note}

    def set_weights(self, version: int, weights: dict, resign_threshold: Optional[float] = None) -> int:
        """The learner's weights and, when the run sets it (selfplay.resign_target), the
        resignation threshold in force."""
        self.model.load_state_dict(weights)
        self.set_resign_threshold(resign_threshold)
        self.version = version
        return version

    def set_resign_threshold(self, threshold: Optional[float]) -> None:
        """The run's automatic resignation threshold (None: none set), passed on when it changes."""
        if threshold is not None and threshold != self.resign_threshold:
            self.driver.set_resign_threshold(threshold)
            self.resign_threshold = threshold

    def step(self) -> tuple[list[SelfPlayGame], SelfPlayTotals, int]:
        """One move of each game: the games that ended, the running totals, the weights version."""
        finished = list(self.driver.play(until=_once()))
        for game in finished:
            game.weights_version = self.version
        return finished, self.driver.totals(), self.version

    def state(self) -> dict:
        return self.driver.state_dict()

    def load(self, state: dict) -> int:
        self.driver.load_state_dict(state)
        return in_progress.num_games(state)

    def close(self) -> None:
        self.driver.close()


@dataclass
class Node:
    """The main process's view of one node it started."""

    slot: int  # its place among cluster.nodes (a replacement takes the lost node's)
    handle: Any  # the Ray actor
    first_game_id: int
    info: dict = field(default_factory=dict)  # describe()'s answer
    version: int = -1  # the weights version of its last answer
    totals: SelfPlayTotals = field(default_factory=SelfPlayTotals)  # its last running totals
    calls: collections.deque = field(default_factory=collections.deque)  # ObjectRefs of the calls in flight
    heard_at: float = 0.0  # when it last answered (or was first called, when idle before)
    phase_start: tuple[float, int] = (0.0, 0)  # time and moves when the phase started
    alive: bool = True
    weights_call: Any = None  # the ObjectRef of its last set_weights call

    @property
    def name(self) -> str:
        where = self.info.get("address", "?")
        return f"node {self.slot} ({where}, pid {self.info.get('pid', '?')})"


class ClusterSelfPlay:
    """The SelfPlayDriver for cluster.backend=ray (see the module docstring). Nothing of Ray is
    imported or started until the first play() or state_dict(). `version()` is the learner's
    weights version (its training steps); `model` the learner's network, sent to the nodes
    whenever the version changes."""

    def __init__(self, cfg: Config, model: torch.nn.Module, version: Callable[[], int],
                 stand_in: Optional[float] = None):
        self.cfg, self.cluster, self.model, self.version, self.stand_in = cfg, cfg.cluster, model, version, stand_in
        self.processes = self.cluster.nodes  # until the nodes say how many processes each searches with
        self.nodes: list[Node] = []  # every node started, the lost ones included (their totals count)
        self.next_game_id = 0  # the first id of the next node's range
        self.games_lost = 0
        self.nodes_lost = 0
        self.weights_bytes = 0  # of the last version sent
        self._plain = to_plain(cfg)
        self._pending_state: Optional[dict] = None
        self._sent_version: Optional[int] = None
        self._weights_ref: Any = None
        self.resign_threshold: Optional[float] = None  # the run's automatic one, sent with the weights
        self._started = self._closed = False
        self._connection = Connection(False)
        self._full_warned = False
        self.note = (f"self-play on a Ray cluster: {self.cluster.nodes} node(s) at {self.cluster.address}, "
                     f"{self.cluster.node_cpus:g} CPU and {self.cluster.node_gpus:g} GPU each")

    # --- the driver interface ---

    def start(self) -> None:
        self._ensure_started()

    def play(self, until: Callable[[], bool]) -> Iterator[SelfPlayGame]:
        self._ensure_started()
        self._replace_lost()
        if not self.alive:
            raise self._none_left()
        self._send_weights()
        now = time.monotonic()
        for node in self.alive:
            node.phase_start = (now, node.totals.moves)
        stopping = until()
        if not stopping:
            for node in self.alive:
                node.heard_at = now
                for _ in range(CALLS_IN_FLIGHT):
                    self._call_step(node)
        ray = import_ray()
        while self.calling:
            calls = {ref: node for node in self.calling for ref in node.calls}
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=_POLL_S)
            if ready:  # every answer in by now (ray.wait returns the first in the order asked)
                ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0)
            answered = {calls[ref].slot: calls[ref] for ref in ready}  # (the slots of live nodes differ)
            now = time.monotonic()
            for node in answered.values():  # heard now, however long taking in the others' games takes
                node.heard_at = now
            for _, node in sorted(answered.items()):
                # a node answers its calls in order: take its answers while they are in
                while node.alive and node.calls and ray.wait([node.calls[0]], timeout=0)[0]:
                    answer = self._get(node, node.calls.popleft())  # in: no wait
                    if answer is None:  # the node is lost
                        break
                    games, node.totals, node.version = answer
                    if node.version != self._sent_version:
                        self._check_weights_loaded(node)
                        raise ClusterError(f"{node.name} played with weights version {node.version}, the "
                                           f"learner's is {self._sent_version}")
                    yield from games
                    stopping = stopping or until()
                    if not stopping:
                        self._call_step(node)
            self._drop_silent()
            if not self.alive:
                raise self._none_left()
            stopping = stopping or until()

    def totals(self) -> SelfPlayTotals:
        """Every node's running totals (those of lost nodes up to their last answer)."""
        total = SelfPlayTotals()
        for node in self.nodes:
            total += node.totals
        return total

    def state_dict(self) -> dict:
        """Every node's games in progress, in slot order (the nodes must be paused); next_game_id
        above every node's range."""
        self._ensure_started()
        if self.calling:
            raise RuntimeError("state_dict() while nodes are playing; exhaust play() first")
        nodes = sorted(self.alive, key=lambda n: n.slot)
        refs = [node.handle.state.remote() for node in nodes]
        states = []
        deadline = time.monotonic() + self.cluster.call_timeout_s  # one for all: silent nodes do not add up
        for node, ref in zip(nodes, refs):
            state = self._get(node, ref, deadline)
            if state is not None:
                states.append(state)
        if not self.alive:
            raise self._none_left()
        state = in_progress.concatenate(states)
        state["next_game_id"] = max(int(state["next_game_id"]), self.next_game_id)
        return state

    def load_state_dict(self, state: dict) -> None:
        """Shares the saved games out to the nodes when they start (contiguous runs, in order);
        ranges of new ids start above the state's next_game_id."""
        if self._started:
            raise RuntimeError("load_state_dict() after the nodes have started")
        self._pending_state = state

    def set_resign_threshold(self, threshold: float) -> None:
        """To every node now (run before its next move); a node started later gets it with its
        first weights."""
        self.resign_threshold = threshold
        for node in self.alive:
            node.handle.set_resign_threshold.remote(threshold)

    def status(self) -> DriverStatus:
        if not self.nodes:  # the nodes start with the first phase
            actors = self.cfg.selfplay.num_actors  # per node, unless auto (each node's machine decides)
            return DriverStatus(f"{self.cluster.nodes} node(s) starting", short="nodes starting",
                                playing=self.cluster.nodes * actors or None)
        alive = sorted(self.alive, key=lambda n: n.slot)
        now = time.monotonic()
        scalars: dict[str, float] = {"nodes_alive": len(alive), "nodes_lost": self.nodes_lost,
                                     "games_lost": self.games_lost}
        rates = []
        for node in alive:
            then, moves = node.phase_start
            rate = (node.totals.moves - moves) / (now - then) if now > then else 0.0
            rates.append(f"{rate:,.0f}")
            scalars[f"node{node.slot}/moves_per_s"] = rate
            scalars[f"node{node.slot}/weights_version"] = node.version
        versions = sorted({node.version for node in alive if node.version >= 0})  # -1: none sent yet
        weights = "weights v" + "/".join(map(str, versions)) if versions else "weights not sent yet"
        nodes = f"nodes {len(alive)}/{self.cluster.nodes}"
        line = f"{nodes} (moves/s {' '.join(rates) or '-'}), {weights}, {self.games_lost:,} games lost"
        return DriverStatus(line, scalars, short=nodes, playing=sum(int(node.info.get("games", 0)) for node in alive))

    def close(self) -> None:
        """Stops every node (its worker processes first), and Ray if this process started it;
        safe to call again."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        ray = import_ray()
        alive = self.alive
        try:
            refs = [node.handle.close.remote() for node in alive]
            ray.wait(refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
        except Exception:  # a node lost meanwhile: killed below all the same
            pass
        finally:
            try:
                for node in alive:
                    self._kill(node)
            finally:
                self._connection.close()

    # --- internals ---

    @property
    def alive(self) -> list[Node]:
        return [node for node in self.nodes if node.alive]

    @property
    def calling(self) -> list[Node]:
        return [node for node in self.nodes if node.alive and node.calls]

    def _ensure_started(self) -> None:
        if self._closed:
            raise RuntimeError("the cluster's self-play has been closed")
        if self._started:
            return
        if self.cluster.address == "local":  # the nodes are this machine's: what they need is known now
            resolve_device(self.cluster.node_device, key="cluster.node_device")
            if self.cluster.node_gpus > torch.cuda.device_count():
                raise ConfigError(f"cluster.node_gpus={self.cluster.node_gpus:g}: this machine has "
                                  f"{torch.cuda.device_count()} CUDA GPU(s) for the local cluster's nodes")
        self._connection = connect(self.cluster)
        self._started = True
        state, self._pending_state = self._pending_state, None
        if state is not None:
            self.next_game_id = max(self.next_game_id, int(state["next_game_id"]))
        for node in self._start_nodes(list(range(self.cluster.nodes))):
            self.nodes.append(node)
        if not self.alive:
            raise ClusterError(f"no self-play node started within cluster.start_timeout_s="
                               f"{self.cluster.start_timeout_s:g} s: does the cluster have {self.cluster.node_cpus:g} "
                               f"CPU and {self.cluster.node_gpus:g} GPU free per node? (ray status)")
        self.processes = sum(node.info.get("processes", 1) for node in self.alive)
        log.info("self-play nodes: " + "; ".join(f"{n.name}: {n.info.get('device')}, {n.info.get('note')}"
                                                  for n in self.alive))
        if state is not None:
            self._share_out(state)

    def _start_nodes(self, slots: list[int]) -> list[Node]:
        """Starts a node in each slot, each with its own range of game ids; those ready within
        start_timeout_s (the others are killed and not returned)."""
        ray = import_ray()
        remote = ray.remote(SelfPlayNode).options(num_cpus=self.cluster.node_cpus, num_gpus=self.cluster.node_gpus,
                                                  max_restarts=0, max_task_retries=0)
        started = []
        for slot in slots:
            first, self.next_game_id = self.next_game_id, self.next_game_id + GAME_ID_RANGE
            handle = remote.remote(self._plain, first, self.stand_in)
            started.append(Node(slot, handle, first))
        refs = [node.handle.describe.remote() for node in started]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self.cluster.start_timeout_s)
        nodes = []
        for node, ref in zip(started, refs):
            if ref not in ready:
                log.warning(f"self-play node {node.slot} did not start within {self.cluster.start_timeout_s:g} s")
                self._kill(node)
                continue
            try:
                node.info = ray.get(ref)
            except Exception as e:
                setting = _config_error(e)
                if _is_lost(e) and setting is None:
                    log.warning(f"self-play node {node.slot} failed to start: {_first_line(e)}")
                    continue
                for other in started:  # none is left holding its CPUs and GPUs
                    self._kill(other)
                raise ClusterError(f"self-play node {node.slot} failed to start:\n{e}" if setting is None else
                                   f"self-play node {node.slot} failed to start: {setting}") from None
            nodes.append(node)
        return nodes

    def _share_out(self, state: dict) -> None:
        """The saved games, in order, to the nodes (each keeps drawing new ids from its range)."""
        total, start, refs = in_progress.num_games(state), 0, []
        nodes = sorted(self.alive, key=lambda n: n.slot)
        for node in nodes:
            n = int(node.info.get("games", 0))
            share = in_progress.take(state, min(start, total), min(start + n, total), next_game_id=node.first_game_id)
            refs.append(node.handle.load.remote(share))
            start += n
        deadline = time.monotonic() + self.cluster.call_timeout_s
        for node, ref in zip(nodes, refs):
            self._get(node, ref, deadline)
        if not self.alive:
            raise self._none_left()
        if start < total:
            log.warning(f"the checkpoint holds {total} games in progress, the nodes play {start}: "
                        f"{total - start} are dropped")

    def _replace_lost(self) -> None:
        """Starts a node in each lost node's slot, if the cluster has room for it now."""
        missing = sorted(set(range(self.cluster.nodes)) - {node.slot for node in self.alive})
        if not missing:
            return
        ray = import_ray()
        free = ray.available_resources()
        room = len(missing)
        if self.cluster.node_cpus > 0:
            room = min(room, int(free.get("CPU", 0) // self.cluster.node_cpus))
        if self.cluster.node_gpus > 0:
            room = min(room, int(free.get("GPU", 0) // self.cluster.node_gpus))
        if room <= 0:
            if not self._full_warned:
                log.warning(f"no room on the cluster to replace {len(missing)} lost self-play node(s); "
                            f"going on with {len(self.alive)}")
                self._full_warned = True
            return
        self._full_warned = False
        new = self._start_nodes(missing[:room])
        self.nodes.extend(new)
        for node in new:
            log.warning(f"self-play {node.name} started to replace a lost one")
        self.processes = sum(node.info.get("processes", 1) for node in self.alive)

    def _send_weights(self) -> None:
        """The learner's weights, once per version: one object in the store, read by every node
        that has not played with it (new nodes included)."""
        ray = import_ray()
        version = int(self.version())
        if version != self._sent_version:
            weights = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            self.weights_bytes = sum(v.numel() * v.element_size() for v in weights.values())
            self._weights_ref = ray.put(weights)
            self._sent_version = version
        for node in self.alive:
            if node.version != version:
                # runs before its next call; kept to say why, should the node answer with another version
                node.weights_call = node.handle.set_weights.remote(version, self._weights_ref, self.resign_threshold)
                node.version = version

    def _check_weights_loaded(self, node: Node) -> None:
        """Raises the node's own error when loading the weights failed on it."""
        ray = import_ray()
        try:
            ray.get(node.weights_call, timeout=0)
        except ray.exceptions.GetTimeoutError:
            pass
        except Exception as e:
            raise ClusterError(f"{node.name} failed to load weights version {self._sent_version}:\n{e}") from None

    def _call_step(self, node: Node) -> None:
        node.calls.append(node.handle.step.remote())

    def _get(self, node: Node, ref, deadline: Optional[float] = None):
        """A call's answer (by `deadline`, time.monotonic(), if given), or None when the node is
        lost or silent (dropped)."""
        ray = import_ray()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self._drop(node, f"silent for cluster.call_timeout_s={self.cluster.call_timeout_s:g} s")
            return None
        except Exception as e:
            if _is_lost(e):
                self._drop(node, _first_line(e))
                return None
            raise ClusterError(f"{node.name} failed:\n{e}") from None

    def _drop_silent(self) -> None:
        now = time.monotonic()
        for node in self.calling:
            if now - node.heard_at > self.cluster.call_timeout_s:
                self._drop(node, f"silent for {now - node.heard_at:.0f} s in one move "
                                 f"(cluster.call_timeout_s={self.cluster.call_timeout_s:g})")

    def _drop(self, node: Node, reason: str) -> None:
        node.alive = False
        node.calls.clear()
        lost = int(node.info.get("games", 0))
        self.games_lost += lost
        self.nodes_lost += 1
        self._kill(node)
        log.warning(f"self-play {node.name} lost ({reason}): its {lost} games in progress are lost; "
                    f"{len(self.alive)} node(s) go on")

    def _kill(self, node: Node) -> None:
        ray = import_ray()
        try:
            ray.kill(node.handle, no_restart=True)
        except Exception:  # already gone
            pass

    def _none_left(self) -> ClusterError:
        return ClusterError(f"every self-play node is lost ({self.nodes_lost} lost, {self.games_lost:,} games in "
                            f"progress with them); the run stops: its last checkpoint holds the state to resume "
                            f"from (on a cluster, or on one machine without +cluster=ray)")


def _is_lost(error: BaseException) -> bool:
    """Whether a Ray error means the node is gone (its process, its machine), not that it failed."""
    ray = import_ray()
    errors = ray.exceptions
    lost = (errors.RayActorError, errors.ObjectLostError, errors.NodeDiedError, errors.OutOfMemoryError,
            errors.WorkerCrashedError, errors.LocalRayletDiedError)
    if getattr(error, "actor_init_failed", False):  # its constructor raised: a bug or a bad setting, to be shown
        return False
    return isinstance(error, lost) and not isinstance(error, errors.RayTaskError)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__

