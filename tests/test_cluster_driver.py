"""The cluster driver's own logic (selfplay/cluster.ClusterSelfPlay) without Ray: the nodes are the
real SelfPlayNode, run in this process behind a stand-in for the few Ray calls the driver makes,
on a clock of the test's own (each move a node plays takes STEP_S of it). Runs everywhere, Ray
installed or not (tests/test_cluster.py runs the real thing where it is). What it holds: game
ids stay unique across nodes after a resume, and a node that answers steadily is never taken
for a silent one however long the phase, while one that stops answering is dropped."""
import signal
import sys
import types

import pytest
from conftest import games_in_progress

from azshogi.nn.network import from_config
from azshogi.selfplay import cluster as cluster_module
from azshogi.selfplay.cluster import ClusterSelfPlay

STEP_S = 1.0  # seconds of the test's clock a node's move takes


class Clock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class Ref:
    """An ObjectRef: its call runs when the driver waits (a round of the cluster's work), or never
    (a silent node's)."""

    def __init__(self, run=None, value=None):
        self.run, self.value = run, value  # run: the call still to make (None: done)

    @property
    def ready(self) -> bool:
        return self.run is None


class Handle:
    """A Ray actor handle: each method's .remote(...) queues a call of the node's method; calls
    run in order, when the driver next waits for answers, unless the node is silent."""

    def __init__(self, node, fake):
        self.node, self.fake, self.silent = node, fake, False

    def __getattr__(self, name):
        method = getattr(self.node, name)

        def remote(*args):
            args = [a.value if isinstance(a, Ref) else a for a in args]  # Ray passes an object ref's value

            def run():
                if name == "step":
                    self.fake.clock.now += STEP_S
                return method(*args)

            ref = Ref(run)
            self.fake.pending.append((self, ref))
            return ref

        return types.SimpleNamespace(remote=remote)


class FakeRay(types.ModuleType):
    """The calls ClusterSelfPlay makes of Ray, on the test's clock."""

    def __init__(self, clock):
        super().__init__("ray")
        self.clock, self.handles, self.pending = clock, [], []

        class GetTimeoutError(Exception):
            pass

        class ActorError(Exception):
            pass

        self.exceptions = types.SimpleNamespace(
            GetTimeoutError=GetTimeoutError, RayActorError=ActorError, ObjectLostError=ActorError,
            NodeDiedError=ActorError, OutOfMemoryError=ActorError, WorkerCrashedError=ActorError,
            LocalRayletDiedError=ActorError, RayTaskError=type("RayTaskError", (Exception,), {}))
        self.util = types.SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1")

    def is_initialized(self):
        return True

    def remote(self, cls):
        fake = self

        class Options:
            def options(self, **kwargs):
                return self

            def remote(self, *args):
                handle = Handle(cls(*args), fake)
                fake.handles.append(handle)
                return handle

        return Options()

    def work(self, until=None) -> None:
        """The queued calls of the nodes that answer, in the order made: all, or up to `until`."""
        pending, self.pending = self.pending, []
        for i, (handle, ref) in enumerate(pending):
            if handle.silent:
                self.pending.append((handle, ref))
                continue
            run, ref.run = ref.run, None
            ref.value = run()
            if ref is until:
                self.pending += pending[i + 1:]
                return

    def wait(self, refs, num_returns=1, timeout=None):
        if timeout != 0:  # the driver waits: the nodes work meanwhile
            self.work()
            if not any(r.ready for r in refs):
                self.clock.now += timeout or 0.0
        ready = [r for r in refs if r.ready]
        return ready, [r for r in refs if not r.ready]

    def get(self, ref, timeout=None):
        if not ref.ready:  # waits for this call alone
            self.work(until=ref)
        if not ref.ready:
            self.clock.now += timeout or 0.0
            raise self.exceptions.GetTimeoutError()
        return ref.value

    def put(self, value):
        return Ref(value=value)

    def kill(self, handle, no_restart=True):
        handle.silent = True

    def available_resources(self):
        return {"CPU": 64.0}


@pytest.fixture
def fake_ray(monkeypatch):
    clock = Clock()
    ray = FakeRay(clock)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(cluster_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    for name in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    handler = signal.getsignal(signal.SIGINT)  # a node ignores SIGINT in its process: this one is ours
    yield ray
    signal.signal(signal.SIGINT, handler)


def two_nodes(tiny_config, *overrides):
    return tiny_config("+cluster=ray", "cluster.address=local", "cluster.nodes=2", "device=cpu",
                       "selfplay.num_workers=0", *overrides, run="c")


def play(driver, count: int) -> list:
    games: list = []
    for game in driver.play(until=lambda: len(games) >= count):
        games.append(game)
    return games


def test_after_a_resume_each_node_numbers_new_games_in_its_own_range(fake_ray, tiny_config):
    """A checkpoint's games in progress are shared out to two nodes; each node then starts new
    games with ids of its own, above the checkpoint's next_game_id: no id is given twice, on any
    node, in either session."""
    cfg = two_nodes(tiny_config)
    model = from_config(cfg.model)
    first = ClusterSelfPlay(cfg, model, lambda: 0)
    try:
        before = play(first, 12)
        state = first.state_dict()
    finally:
        first.close()
    restored = {g["game_id"] for g in games_in_progress(state)}
    assert len(restored) == 2 * cfg.selfplay.num_actors
    second = ClusterSelfPlay(cfg, model, lambda: 0)
    second.load_state_dict(state)
    try:
        after = play(second, 24)
    finally:
        second.close()
    ids = [g.game_id for g in before + after]
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)
    new = {g.game_id for g in after} - restored - {g.game_id for g in before}
    assert new and min(new) >= int(state["next_game_id"])
    by_node = {g.game_id // cluster_module.GAME_ID_RANGE for g in after if g.game_id in new}
    assert len(by_node) == 2  # both nodes started new games, each in its range


def test_a_node_that_answers_steadily_is_kept_through_a_phase_many_timeouts_long(fake_ray, tiny_config):
    cfg = two_nodes(tiny_config, "cluster.call_timeout_s=3")
    driver = ClusterSelfPlay(cfg, from_config(cfg.model), lambda: 0)
    try:
        start = fake_ray.clock.now
        games = play(driver, 16)
        assert fake_ray.clock.now - start > 10 * cfg.cluster.call_timeout_s  # the phase lasted ten timeouts
        assert len(driver.alive) == 2 and driver.nodes_lost == 0 and driver.games_lost == 0
        assert len(games) >= 16
    finally:
        driver.close()


def test_a_node_that_stops_answering_is_dropped_after_the_timeout(fake_ray, tiny_config):
    """The other side of the same rule: silence, not the phase's length, drops a node."""
    cfg = two_nodes(tiny_config, "cluster.call_timeout_s=3")
    driver = ClusterSelfPlay(cfg, from_config(cfg.model), lambda: 0)
    try:
        play(driver, 4)
        victim = driver.alive[1]
        fake_ray.handles[1].silent = True
        games = play(driver, 12)
        assert not victim.alive and driver.nodes_lost == 1
        assert driver.games_lost == cfg.selfplay.num_actors and len(games) >= 12
    finally:
        driver.close()



def test_the_runs_resignation_threshold_reaches_every_node(fake_ray, tiny_config):
    """The automatic threshold goes to the nodes with the weights: at 0 nobody resigns; told 0.9
    while paused, both nodes' games resign (an untrained network's win rates stay near 0.5)."""
    from azshogi.shogi.rules import Termination

    cfg = two_nodes(tiny_config, "selfplay.resign_target=0.05", "selfplay.resign_moves=2",
                    "selfplay.resign_playout_share=0.01", "rules.max_plies=12")
    driver = ClusterSelfPlay(cfg, from_config(cfg.model), lambda: 0)
    try:
        assert all(g.record.termination != Termination.RESIGN for g in play(driver, 8))
        driver.set_resign_threshold(0.9)
        after = play(driver, 12)
        resigned = [g for g in after if g.record.termination == Termination.RESIGN]
        assert len({g.game_id // cluster_module.GAME_ID_RANGE for g in resigned}) == 2  # on both nodes
    finally:
        driver.close()


def test_the_session_folders_of_local_instances_whose_run_was_killed_are_removed(tmp_path):
    """A run killed with kill -9 never removes its local instance's session folder: the next
    local start removes those whose owner is gone, and no other."""
    import os
    import subprocess

    from azshogi.selfplay.cluster import SESSION_OWNER, remove_stale_sessions

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for name, owner in (("azshogi-ray-killed", gone.pid), ("azshogi-ray-running", os.getpid()),
                        ("azshogi-ray-unknown", None), ("other-killed", gone.pid)):
        (tmp_path / name).mkdir()
        if owner is not None:
            (tmp_path / name / SESSION_OWNER).write_text(str(owner))
    assert remove_stale_sessions(str(tmp_path)) == [str(tmp_path / "azshogi-ray-killed")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["azshogi-ray-running", "azshogi-ray-unknown", "other-killed"]
