"""Self-play on a Ray cluster (selfplay/cluster.py), on a cluster of this machine: a head and two
nodes from ray.cluster_utils.Cluster, every address on 127.0.0.1 (checked), token authentication
on. Positions are conserved and ids unique across nodes and restarts, the nodes play with the
learner's weights, a lost node costs its games in progress and nothing else, and a checkpoint
moves between clusters of any size and one machine. Skipped where Ray is not installed."""
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, games_in_progress, replay_window

# What Ray reads when it is imported: set before, for every Ray process this test starts.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_AUTH_MODE"] = "token"
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(16))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # advertise 127.0.0.1, not the network interface

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from azshogi.formats import checkpoint as ckpt  # noqa: E402
from azshogi.nn.network import from_config  # noqa: E402
from azshogi.selfplay.cluster import GAME_ID_RANGE, ClusterError, ClusterSelfPlay  # noqa: E402
from azshogi.selfplay.local import local_driver  # noqa: E402
from azshogi.train.loop import build_components, train  # noqa: E402

LOOPBACK = "127.0.0.1"


def listening() -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket on this machine (IPv4 and IPv6)."""
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(name).exists():
            continue
        for line in Path(name).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state != "0A":  # LISTEN
                continue
            address, port = local.split(":")
            if len(address) == 8:
                ip = ".".join(str(b) for b in reversed(bytes.fromhex(address)))
            else:
                words = [address[i:i + 8] for i in range(0, 32, 8)]
                raw = b"".join(bytes.fromhex(w)[::-1] for w in words)
                if raw[:12] == bytes(10) + b"\xff\xff":  # an IPv4 address in IPv6 (::ffff:a.b.c.d)
                    ip = ".".join(str(b) for b in raw[12:])
                else:
                    ip = "::1" if raw == bytes(15) + b"\x01" else ("::" if raw == bytes(16) else raw.hex())
            found.add((ip, int(port, 16)))
    return found


@pytest.fixture(scope="module")
def cluster():
    """A head (no CPUs: it schedules no node) and two nodes of 1 CPU, all on 127.0.0.1; this
    process connected to it. Yields (cluster, the listening sockets before it started)."""
    before = listening()
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "node_ip_address": LOOPBACK, "include_dashboard": False})
    for _ in range(2):
        c.add_node(num_cpus=1, node_ip_address=LOOPBACK)
    ray.init(address=c.address, log_to_driver=False)
    yield c, before
    ray.shutdown()
    c.shutdown()


def cluster_cfg(tiny_config, address, *overrides, run="c"):
    return tiny_config("+cluster=ray", f"cluster.address={address}", "cluster.nodes=2", "device=cpu",
                       "selfplay.num_workers=0", *overrides, run=run)


def test_every_ray_address_is_loopback(cluster):
    c, before = cluster
    assert c.address.split(":")[0] == LOOPBACK
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 3
    assert {n["NodeManagerAddress"] for n in nodes} == {LOOPBACK}
    new = listening() - before
    assert new, "the cluster listens on no port?"
    assert {ip for ip, _ in new} == {LOOPBACK}, f"Ray listens beyond loopback: {sorted(new)}"


def test_a_client_without_the_token_is_refused(cluster):
    c, _ = cluster
    probe = ("import ray\n"
             "from ray._raylet import GcsClient\n"
             f"client = GcsClient(address='{c.address}')\n"
             "print('NODES', len(client.get_all_node_info(timeout=5)))\n")
    env = dict(os.environ, RAY_AUTH_TOKEN=secrets.token_hex(16))
    wrong = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert wrong.returncode != 0 and "NODES" not in wrong.stdout
    assert "InvalidAuthToken" in wrong.stderr or "Authentication" in wrong.stderr, wrong.stderr[-2000:]
    right = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ), capture_output=True, text=True,
                           timeout=120)
    assert "NODES 3" in right.stdout, right.stderr[-2000:]


def play(driver, count: int) -> list:
    """Finished games of one phase of `driver`, which ends once `count` have ended."""
    games: list = []
    for game in driver.play(until=lambda: len(games) >= count):
        games.append(game)
    return games


def test_nodes_play_with_the_learners_weights_and_unique_ids(cluster, tiny_config):
    c, _ = cluster
    cfg = cluster_cfg(tiny_config, c.address)
    model = from_config(cfg.model)
    version = [0]
    driver = ClusterSelfPlay(cfg, model, lambda: version[0])
    playing = 2 * cfg.selfplay.num_actors  # the progress line's games in progress: every node's
    try:
        starting = driver.status()  # what the progress line says before the nodes have started
        assert (starting.line, starting.playing) == ("2 node(s) starting", playing)
        ids = []
        for _ in range(3):
            games = play(driver, 8)
            assert all(g.weights_version == version[0] for g in games)
            assert {n.version for n in driver.alive} == {version[0]}
            status = driver.status()
            assert status.scalars["nodes_alive"] == 2 and status.playing == playing
            assert status.line.startswith("nodes 2/2 (moves/s ") and status.line.endswith(
                f"), weights v{version[0]}, 0 games lost"), status.line
            ids += [g.game_id for g in games]
            with torch.no_grad():  # "training": new weights, a new version
                for p in model.parameters():
                    p.add_(0.01)
            version[0] += 10
        in_flight = [g["game_id"] for g in games_in_progress(driver.state_dict())]
        assert len(set(ids)) == len(ids)
        assert not set(ids) & set(in_flight)
        assert len(in_flight) == 2 * cfg.selfplay.num_actors
        # each node draws from its own range
        assert len({i // GAME_ID_RANGE for i in ids}) == 2
        assert driver.weights_bytes == sum(p.numel() * p.element_size() for p in model.state_dict().values())
    finally:
        driver.close()


def test_one_node_plays_the_games_of_the_in_process_driver(cluster, tiny_config):
    """Same seed, same weights, same actors: one node in its process is the in-process driver."""
    c, _ = cluster
    cfg = cluster_cfg(tiny_config, c.address, "cluster.nodes=1")
    parts = build_components(cfg)  # the learner's model, and an evaluator of it in this process
    here = local_driver(parts.cfg, parts.evaluator)
    expected = []
    for game in here.play(until=lambda: len(expected) >= 6):
        expected.append(game)
    driver = ClusterSelfPlay(cfg, parts.model, lambda: 0)
    try:
        got = []
        for game in driver.play(until=lambda: len(got) >= 6):
            got.append(game)
    finally:
        driver.close()
    assert [(g.game_id, g.record.moves) for g in got] == [(g.game_id, g.record.moves) for g in expected]


def test_a_dead_node_and_a_silent_node_are_dropped_and_cost_only_their_games_in_progress(cluster, tiny_config):
    """Killed: dropped as soon as Ray says so; stopped (alive, silent): after cluster.call_timeout_s.
    Each phase completes with the others; the next starts a replacement where there is room."""
    c, _ = cluster
    cfg = cluster_cfg(tiny_config, c.address, "cluster.call_timeout_s=3")
    driver = ClusterSelfPlay(cfg, from_config(cfg.model), lambda: 0)
    try:
        games = play(driver, 4)
        victim = driver.alive[0]
        killed_at = [0.0]

        def until() -> bool:
            if not killed_at[0] and len(games) >= 6:
                os.kill(victim.info["pid"], signal.SIGKILL)
                killed_at[0] = time.monotonic()
            return len(games) >= 40

        dropped_after = None
        for game in driver.play(until=until):
            games.append(game)
            if dropped_after is None and not victim.alive:
                dropped_after = time.monotonic() - killed_at[0]
        assert not victim.alive
        if dropped_after is None:
            dropped_after = time.monotonic() - killed_at[0]
        assert dropped_after < 10, f"a dead node was dropped after {dropped_after:.1f} s"
        assert driver.games_lost == cfg.selfplay.num_actors and driver.nodes_lost == 1
        assert len(games) >= 40  # the phase completed with the other node
        # the next phase starts a replacement (its CPU is free again), in a new range of ids
        before = {n.first_game_id for n in driver.nodes}
        games += play(driver, 4)
        assert len(driver.alive) == 2
        assert {n.first_game_id for n in driver.alive} - before
        status = driver.status()
        assert status.scalars["games_lost"] == cfg.selfplay.num_actors and "games lost" in status.line
        # a node that stops answering: alive, silent
        silent = driver.alive[1]
        os.kill(silent.info["pid"], signal.SIGSTOP)
        start = time.monotonic()
        games += play(driver, 12)
        assert not silent.alive and driver.games_lost == 2 * cfg.selfplay.num_actors
        assert time.monotonic() - start < 40
        ids = [g.game_id for g in games]
        assert len(set(ids)) == len(ids)
    finally:
        driver.close()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA: a node asked for cuda fails")
def test_a_node_that_cannot_start_stops_the_run_with_its_error_and_frees_the_others(cluster, tiny_config):
    """Not a lost machine but a setting the node's machine cannot honour: the node's own error,
    and no node left holding the cluster's CPUs."""
    c, _ = cluster
    cfg = cluster_cfg(tiny_config, c.address, "cluster.node_device=cuda")
    driver = ClusterSelfPlay(cfg, from_config(cfg.model), lambda: 0)
    try:
        with pytest.raises(ClusterError, match="failed to start") as error:
            play(driver, 1)
        assert "cluster.node_device='cuda': CUDA is not available" in str(error.value)
        assert "\n" not in str(error.value)  # the setting's error alone, not Ray's traceback
    finally:
        driver.close()
    deadline = time.monotonic() + 20
    while ray.available_resources().get("CPU", 0) < 2:  # every node started is killed
        assert time.monotonic() < deadline, ray.available_resources()
        time.sleep(0.2)


def test_checkpoints_resume_on_other_node_counts_and_without_ray(cluster, tiny_config, tmp_path):
    c, _ = cluster
    alone = ("device=cpu", "selfplay.num_workers=0")
    assert train(tiny_config(*alone, "loop.max_checkpoints=1", run="c"), show_progress=False).checkpoints == 1
    two = train(cluster_cfg(tiny_config, c.address, "loop.max_checkpoints=2"), show_progress=False)
    assert two.checkpoints == 2  # a one-machine checkpoint on two nodes
    one = train(cluster_cfg(tiny_config, c.address, "cluster.nodes=1", "loop.max_checkpoints=3"),
                show_progress=False)
    assert one.checkpoints == 3  # two nodes' checkpoint on one node
    alone = train(tiny_config(*alone, "loop.max_checkpoints=4", run="c"), show_progress=False)
    assert alone.checkpoints == 4  # and on one machine without Ray
    last = tmp_path / "checkpoints" / "c" / "ckpt-00004.pt"
    window = replay_window(last)
    assert len(window) == alone.positions  # every finished game's positions, all four sessions
    finished = set(np.unique(window.game_ids).tolist())
    assert len(finished) == alone.games  # no id given twice, on any node or in any session
    in_flight = [g["game_id"] for g in games_in_progress(ckpt.load(last))]
    assert len(set(in_flight)) == len(in_flight) and not finished & set(in_flight)
    assert ckpt.load(last)["selfplay"]["next_game_id"] > max(finished | set(in_flight))


def processes() -> dict[int, tuple[int, str]]:
    """Every process of this machine: pid -> (parent pid, command line)."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            found[int(proc.name)] = (ppid, (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            pass
    return found


def of_session(driver_pid: int) -> list[int]:
    """The Ray processes a driver started (Ray names its session after the driver's pid)."""
    mark = re.compile(rf"session_\S*_{driver_pid}(\s|/|$)")
    return [pid for pid, (_, command) in processes().items() if mark.search(command)]


def test_every_node_lost_stops_with_one_line_a_good_checkpoint_and_no_ray_process(tmp_path, request):
    """address=local, as a user runs it: the run's own Ray instance; its node killed in the
    second phase. Nothing of Ray is left: no process, no session folder, no escape code on the
    terminal after the last line (colorama's reset at exit, which Ray's start registers)."""
    import pty
    import shutil
    import tempfile

    args = [sys.executable, "-m", "azshogi", *TINY, "+cluster=ray", "cluster.address=local", "cluster.nodes=1",
            "selfplay.num_workers=0", "device=cpu", "run=lost", "loop.max_checkpoints=50",
            f"checkpoint_root={tmp_path / 'checkpoints'}", f"log_root={tmp_path / 'logs'}"]
    env = dict(os.environ)
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")  # the product sets it itself for address=local
    env.pop("RAY_AUTH_TOKEN")  # a local instance makes its own
    env.pop("RAY_ADDRESS", None)  # not this test's cluster
    env["RAY_TMPDIR"] = ray_tmp = tempfile.mkdtemp(prefix="t", dir="/tmp")  # short: Ray's socket paths
    request.addfinalizer(lambda: shutil.rmtree(ray_tmp, ignore_errors=True))
    terminal, follower = pty.openpty()
    run = subprocess.Popen(args, stdout=follower, stderr=subprocess.PIPE, text=True, env=env)
    os.close(follower)
    first = tmp_path / "checkpoints" / "lost" / "ckpt-00001.pt"
    deadline = time.monotonic() + 180
    while not first.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.exists(), run.communicate()[1][-3000:]
    session = of_session(run.pid)
    assert session, "no Ray process of the run's own instance"
    everything = processes()
    nodes = [pid for pid, (ppid, command) in everything.items() if ppid in session and "SelfPlayNode" in command]
    assert nodes, "the run's node is not a child of its raylet"
    for pid in nodes:
        os.kill(pid, signal.SIGKILL)
    _, err = run.communicate(timeout=120)
    shown = b""
    while True:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the run's end of the terminal is closed: all read
            break
        if not chunk:
            break
        shown += chunk
    os.close(terminal)
    assert run.returncode == 2, err[-3000:]  # a user error: azshogi: error: ...
    assert shown.split(b"\n")[-1] == b"", shown[-300:]  # nothing after the last line (Ray's own may have colours)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "every self-play node is lost" in lines[-1] and "Traceback" not in err
    saved = ckpt.load(sorted(first.parent.glob("ckpt-*.pt"))[-1])
    assert saved["counters"]["checkpoints"] >= 1
    assert not list(first.parent.glob("*.tmp*"))
    deadline = time.monotonic() + 10
    while of_session(run.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not of_session(run.pid), "the run left Ray processes behind"
    assert os.listdir(ray_tmp) == [], "the run left Ray's session folder behind"


def test_a_default_run_imports_no_ray():
    code = ("import sys\n"
            "from azshogi.train.loop import build_components\n"
            "from conftest import compose_config\n"
            "from azshogi.config import to_config\n"
            f"cfg = to_config(compose_config({TINY!r} + ['device=cpu']))\n"
            "build_components(cfg).selfplay.close()\n"
            "assert 'ray' not in sys.modules, 'ray imported'\n"
            "print('OK')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parent)
    assert "OK" in out.stdout, out.stderr[-2000:]


def test_bad_cluster_settings_name_the_key(tiny_config):
    from azshogi.config import ConfigError

    with pytest.raises(ConfigError, match="cluster.nodes"):
        tiny_config("+cluster=ray", "cluster.nodes=0")
    with pytest.raises(ConfigError, match="cluster.node_device"):
        tiny_config("+cluster=ray", "cluster.node_device=tpu")
    # a cluster setting without the cluster was ignored: self-play ran on this machine alone
    with pytest.raises(ConfigError, match=r"cluster.nodes=2: a cluster setting.*add \+cluster=ray"):
        tiny_config("cluster.nodes=2")
    # a local instance too small for its nodes: the ones that did not fit were waited for, 300 s
    with pytest.raises(ConfigError, match="cluster.local_cpus"):
        tiny_config("+cluster=ray", "cluster.nodes=2", "cluster.local_cpus=1")


def test_a_head_that_does_not_answer_is_one_line_at_once():
    """Ray's own connect retried an address with nothing listening for ever (in a process of its
    own: this one is connected to the test's cluster)."""
    import socket

    with socket.socket() as s:  # a port just freed: nothing listens there
        s.bind((LOOPBACK, 0))
        port = s.getsockname()[1]
    code = ("import types\n"
            "from azshogi.selfplay.cluster import ClusterError, connect\n"
            "try:\n"
            f"    connect(types.SimpleNamespace(address='{LOOPBACK}:{port}'))\n"
            "except ClusterError as e:\n"
            "    print(e)\n")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert f"cluster.address={LOOPBACK}:{port}: nothing answers there" in out.stdout, out.stderr[-2000:]
    assert time.monotonic() - start < 30


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_local_cluster_checks_its_nodes_device_before_starting_ray(tiny_config):
    from azshogi.config import ConfigError

    for setting in ("cluster.node_device=cuda", "cluster.node_gpus=1"):
        key = setting.split("=")[0]
        driver = ClusterSelfPlay(tiny_config("+cluster=ray", setting, "device=cpu"), from_config(
            tiny_config().model), lambda: 0)
        with pytest.raises(ConfigError, match=key):
            driver.start()
        driver.close()


def test_authentication_cannot_be_turned_off(tiny_config, monkeypatch):
    from azshogi.selfplay.cluster import ray_environment

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    with pytest.raises(ClusterError, match="token authentication only"):
        ray_environment("auto")
