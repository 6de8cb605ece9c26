"""Self-play in worker processes: the inference server answers every request as a direct forward
pass would, workers pause and continue with the trained weights, a dead worker stops the run
cleanly, and nothing (shared memory, processes) is left behind."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import TINY, games_in_progress, replay_window

from azshogi.formats import checkpoint as ckpt
from azshogi.nn.evaluator import LocalEvaluator
from azshogi.nn.leaf_network import DeviceRunner, StandInNetwork
from azshogi.selfplay import in_progress
from azshogi.selfplay.server import SHM_PREFIX, ClientEvaluator, InferenceServer, ServerGone
from azshogi.selfplay.workers import WorkerError, shares
from azshogi.train.bench import fill, sample_positions
from azshogi.train.loop import build_components, train


def our_segments(pid=None) -> list:
    """Shared-memory blocks a process (default: this one) has created and not removed."""
    return sorted(p.name for p in Path("/dev/shm").glob(f"{SHM_PREFIX}{pid or os.getpid()}_*"))


def gone(pid: int) -> bool:
    """No such process, not even a zombie (a zombie keeps its /proc entry)."""
    return not Path(f"/proc/{pid}").exists()


def all_gone(pids, seconds=10.0) -> bool:
    """Every process has gone within `seconds` (Python's resource tracker, a helper of the main
    process, exits just after it and is reaped by init)."""
    deadline = time.monotonic() + seconds
    while not all(gone(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def random_request(rng, boards, rows):
    k = int(rng.integers(1, rows + 1))
    return [boards[int(i)] for i in rng.integers(len(boards), size=k)]


def client_main(handle, seed, requests):
    """A stand-in for a worker: random requests of random sizes, then everything it received."""
    client = ClientEvaluator(handle)
    rng, boards = np.random.default_rng(seed), sample_positions(40, seed=1, plies=(0, 120))
    batch = client.allocate(handle.rows)
    received = []
    for _ in range(requests):
        fill(batch, random_request(rng, boards, handle.rows))  # written in place, as the search does
        received.append(client.evaluate(batch))
    client.send(("received", received))
    client.receive()  # until the test lets go
    client.close()


def serve_clients(server, processes, until, seconds=60):
    """Serves until until(messages so far) holds; returns {client: message}."""
    received = {}
    deadline = time.monotonic() + seconds
    while not until(received):
        for i, message in server.serve(set(range(len(processes))) - set(received), 0.1,
                                       {i: p.sentinel for i, p in enumerate(processes)}):
            received[i] = message
        assert time.monotonic() < deadline
    return received


def start_clients(server, target, args):
    import multiprocessing as mp

    processes = []
    for i, a in enumerate(args):
        p = mp.get_context("spawn").Process(target=target, args=(server.handle(i), *a), daemon=True)
        p.start()
        server.client_started(i)
        processes.append(p)
    return processes


def stop_clients(processes):
    for p in processes:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join()


def test_server_answers_each_request_like_a_direct_forward_pass(tiny_net):
    # max_batch 10: the queue often holds more than a batch, and one client's request (up to 12) more.
    rows, requests = [8, 5, 12], 10
    evaluator = LocalEvaluator(tiny_net, torch.device("cpu"), torch.float32)
    server = InferenceServer(evaluator, rows, max_batch=10, wait_s=0.05)
    processes = []
    try:
        processes = start_clients(server, client_main, [(100 + i, requests) for i in range(len(rows))])
        received = serve_clients(server, processes, lambda r: len(r) == len(rows))
        assert server.stats.calls < len(rows) * requests  # requests did share forward passes
        # compact both ways: 636-byte planes and 2-byte labels in, the legal moves' logits out
        assert server.bytes_in / server.stats.positions < 2000 and server.bytes_out / server.stats.positions < 3000
        for i in range(len(rows)):
            server.send(i, ("bye",))
        stop_clients(processes)
        assert all(p.exitcode == 0 for p in processes)
    finally:
        stop_clients(processes)
        server.close()
    assert our_segments() == []
    direct = LocalEvaluator(tiny_net, torch.device("cpu"), torch.float32)
    boards = sample_positions(40, seed=1, plies=(0, 120))
    for i, (kind, answers) in received.items():
        rng = np.random.default_rng(100 + i)
        assert kind == "received" and len(answers) == requests
        for logits, probability in answers:
            batch = fill(direct.allocate(rows[i]), random_request(rng, boards, rows[i]))
            expected_logits, expected_probability = direct.evaluate(batch)
            # Batch composition may change the last bits of a convolution, nothing more.
            np.testing.assert_allclose(logits, expected_logits, rtol=0, atol=1e-5)
            np.testing.assert_allclose(probability, expected_probability, rtol=0, atol=1e-6)


def slow_client(handle):
    client = ClientEvaluator(handle)
    batch = fill(client.allocate(handle.rows), sample_positions(handle.rows, seed=2))
    try:
        while True:
            client.evaluate(batch)
    except ServerGone:
        pass
    client.close()


class SlowNetwork:
    """The instant network, made to take a while (a batch in flight when Ctrl-C comes)."""

    def __init__(self):
        self.inner = StandInNetwork(torch.device("cpu"))
        self.wire = self.inner.wire

    def __call__(self, *args):
        time.sleep(0.2)
        return self.inner(*args)


def test_ctrl_c_during_a_batch_stops_cleanly(tiny_net):
    evaluator = LocalEvaluator(tiny_net, torch.device("cpu"), torch.float32)
    evaluator.runner = DeviceRunner(SlowNetwork(), torch.device("cpu"))
    server = InferenceServer(evaluator, [4, 4], max_batch=8, wait_s=0.0)
    processes = start_clients(server, slow_client, [(), ()])
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    # Python's own SIGINT handler, installed again: in the whole suite (not alone) the signal stopped
    # raising KeyboardInterrupt here after an earlier test, with signal.getsignal unchanged
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        serve_clients(server, processes, lambda _: server.stats.calls >= 2)  # the clients are asking
        started = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            server.serve({0, 1}, timeout=30.0)
        assert server.in_flight  # a batch was on the device
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        server.close()  # waits for the batch in flight, then removes everything
        stop_clients(processes)
    assert time.monotonic() - started < 20
    assert our_segments() == [] and all(p.exitcode == 0 for p in processes)


def test_a_search_through_the_server_plays_as_in_process(tiny_config):
    """A worker's groups evaluate through the server what the in-process search evaluates
    directly, so with the same seed every game plays the same moves with the same root values,
    whether a worker keeps one group of games or two (each game has its own random stream, and
    game ids interleave over the groups, so the same ids start). What differs: workers play on
    while the main process decides to pause, so a game through the server may be a move or two
    further on, and the two groups of a worker take turns, so one may be a move or two behind the
    other when the phase's moves are in: those games play on until each has 12 moves; the first
    moves are the in-process game's."""
    games = []
    for workers, groups in ((0, 1), (1, 1), (1, 2)):
        parts = build_components(tiny_config(f"selfplay.num_workers={workers}", f"selfplay.worker_groups={groups}",
                                             "rules.max_plies=200", "device=cpu"))
        try:
            selfplay = parts.selfplay
            assert getattr(selfplay, "clients", 1) == workers * groups or workers == 0
            target = 6 * 12
            while True:
                list(selfplay.play(until=lambda selfplay=selfplay, target=target: selfplay.totals().moves >= target))
                played = {g["game_id"]: g for g in games_in_progress(parts.selfplay.state_dict())}
                if workers == 0 or min(len(g["moves"]) for g in played.values()) >= 12:
                    break
                target = selfplay.totals().moves + 6
            games.append(played)
        finally:
            parts.selfplay.close()
    in_process = games[0]
    assert sorted(in_process) == list(range(6)) and all(len(g["moves"]) == 12 for g in in_process.values())
    for served in games[1:]:
        assert served.keys() == in_process.keys()
        for game_id, game in in_process.items():
            further = served[game_id]
            assert len(further["moves"]) >= 12
            assert further["moves"][:12] == game["moves"]
            np.testing.assert_allclose(further["root_values"][:12], game["root_values"], atol=1e-5)


def test_actors_are_shared_out_evenly():
    assert shares(128, 3) == [43, 43, 42] and shares(6, 6) == [1] * 6 and sum(shares(7, 2)) == 7


def set_value_head(model, logit: float) -> None:
    """Every position gets the same win probability, sigmoid(logit): a recognisable network."""
    with torch.no_grad():
        model.value_fc2.weight.zero_()
        model.value_fc2.bias.fill_(logit)


def test_workers_pause_and_continue_their_games_with_the_new_weights(tiny_config):
    # 4 simulations on 4 considered actions visit each root child once, so a root's search value
    # is (v + 4 * -v) / 5: 0 for v = 0 (win probability 1/2), -0.6 for v = 1.
    cfg = tiny_config("selfplay.num_workers=2", "search.leaf_mate_search=false", "rules.max_plies=200")
    parts = build_components(cfg)
    driver, model = parts.selfplay, parts.model
    try:
        set_value_head(model, 0.0)
        finished = list(driver.play(until=lambda: driver.totals().moves >= 30))
        before = {g["game_id"]: g for g in games_in_progress(driver.state_dict())}
        assert not finished and len(before) == 6
        set_value_head(model, 20.0)  # training's stand-in: the same nn.Module, changed in place
        finished = list(driver.play(until=lambda: driver.totals().moves >= 60))
        after = {g["game_id"]: g for g in games_in_progress(driver.state_dict())}
        pids = driver.pids
    finally:
        driver.close()
    assert not finished and after.keys() == before.keys()  # the same games, continued
    old, new = [], []
    for game_id, game in after.items():
        n = len(before[game_id]["moves"])
        assert n >= 3 and len(game["moves"]) >= n + 3  # workers move at their own pace
        assert game["moves"][:n] == before[game_id]["moves"]
        assert game["root_values"][:n] == before[game_id]["root_values"]
        old += game["root_values"][:n]
        new += game["root_values"][n:]
    # A few positions may hold a repetition or a mate inside the tree, hence "most".
    assert np.mean(np.isclose(old, 0.0, atol=1e-6)) > 0.75
    assert np.mean(np.isclose(new, -0.6, atol=1e-6)) > 0.75
    assert our_segments() == [] and all(gone(p) for p in pids)


def test_a_killed_worker_is_reported_by_name_and_cleaned_up(tiny_config):
    parts = build_components(tiny_config("selfplay.num_workers=2"))
    driver = parts.selfplay
    victim = []

    def until():
        if not victim and driver.totals().moves >= 6:
            victim.append(driver.pids[1])
            os.kill(victim[0], signal.SIGKILL)
        return False

    try:
        with pytest.raises(WorkerError, match=r"self-play worker 1 \(pid \d+\) was killed by SIGKILL"):
            for _ in driver.play(until):
                pass
    finally:
        pids = driver.pids
        driver.close()
    assert victim and our_segments() == [] and all(gone(p) for p in pids)
    with pytest.raises(RuntimeError, match="closed"):
        next(driver.play(lambda: False))


def test_a_failing_worker_sends_its_error(tiny_config):
    driver = build_components(tiny_config("selfplay.num_workers=2")).selfplay
    game = SimpleNamespace(game_id=0, rng=np.random.default_rng(0), moves=["5a5b"], plies=[], hcps=[], labels=[],
                           probs=[], root_values=[])
    driver.load_state_dict(in_progress.pack(1, [game]))  # black cannot move the white king
    try:
        with pytest.raises(WorkerError, match=r"(?s)self-play worker 0 \(pid \d+\) failed:.*illegal move '5a5b'"):
            driver.state_dict()  # starts the workers, which load their shares first
    finally:
        pids = driver.pids
        driver.close()
    assert our_segments() == [] and all(gone(p) for p in pids)


def test_end_to_end_with_two_workers_and_resume(tiny_config, tmp_path):
    """Two checkpoints with W = 2, the second after a restart: the saved games are shared out
    again and continue; every position is counted exactly once."""
    train(tiny_config("selfplay.num_workers=2", "loop.max_checkpoints=1"), show_progress=False)
    counters = train(tiny_config("selfplay.num_workers=2", "loop.max_checkpoints=2"), show_progress=False)
    assert counters.checkpoints == 2 and counters.train_steps == 8 and counters.positions >= 2 * 60
    run = tmp_path / "checkpoints" / "t"
    first, second = ckpt.load(run / "ckpt-00001.pt"), ckpt.load(run / "ckpt-00002.pt")
    assert second["replay"]["end"] == second["counters"]["positions"] == counters.positions
    assert len(games_in_progress(second)) == 6
    ids = [g["game_id"] for g in games_in_progress(second)]
    assert len(set(ids)) == 6
    saved = {g["game_id"]: g["moves"] for g in games_in_progress(first)}
    playing = {g["game_id"]: g["moves"] for g in games_in_progress(second)}
    finished_ids = replay_window(run / "ckpt-00002.pt").game_ids.tolist()
    for game_id, moves in saved.items():
        # Every game saved at checkpoint 1 went on after the restart: it is still in progress
        # with its moves extended, or it finished and all its positions reached the buffer.
        if game_id in playing:
            assert playing[game_id][:len(moves)] == moves
        else:
            assert finished_ids.count(game_id) > len(moves), game_id
    # The workers encoded their games as hcpe3: the phase's file holds each of them, valid.
    from azshogi.formats.dlshogi import read_hcpe3

    records = read_hcpe3(tmp_path / "logs" / "t" / "hcpe3" / "ckpt-00002.hcpe3")
    assert len(records) == second["counters"]["games"] - first["counters"]["games"] > 0
    assert our_segments() == []


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def start_cli(tmp_path, *overrides):
    """The `azshogi` console script as a user starts it (`python -m azshogi` where it is not installed)."""
    import shutil

    script = shutil.which("azshogi", path=str(Path(sys.executable).parent))
    command = [sys.executable, script] if script else [sys.executable, "-m", "azshogi"]
    args = [*command, *TINY, "run=w", "selfplay.num_workers=2", *overrides]
    return subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, proc, seconds=120):
    deadline = time.time() + seconds
    while not condition():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.time() < deadline
        time.sleep(0.1)


def workers_of(pid: int) -> list[int]:
    return [c for c in children(pid) if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def test_sigterm_with_workers_ends_with_a_checkpoint_and_leaves_nothing(tmp_path):
    proc = start_cli(tmp_path, "loop.max_checkpoints=0")
    run_dir = tmp_path / "checkpoints" / "w"
    wait_for(lambda: (run_dir / "ckpt-00001.pt").exists(), proc)
    helpers = children(proc.pid)
    assert len(workers_of(proc.pid)) == 2
    # A worker searches without torch (its start-up and about 0.2-0.5 GB each): spawn imports
    # the console script again, which imports nothing heavy before its main() runs.
    assert not any(b"libtorch" in Path(f"/proc/{w}/maps").read_bytes() for w in workers_of(proc.pid))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped; saved" in err
    latest = ckpt.latest(run_dir)
    assert latest.name.endswith("-partial.pt")
    assert len(games_in_progress(ckpt.load(latest))) == 6
    assert our_segments(proc.pid) == [] and all_gone(helpers)


def test_a_killed_worker_stops_the_run_with_a_clear_error(tmp_path):
    proc = start_cli(tmp_path, "loop.max_checkpoints=0")
    wait_for(lambda: len(workers_of(proc.pid)) == 2 and (tmp_path / "logs" / "w" / "config.yaml").exists(), proc)
    helpers = children(proc.pid)
    victim = workers_of(proc.pid)[0]
    time.sleep(1.0)  # let self-play get going
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "azshogi: error: self-play worker" in err and f"(pid {victim}) was killed by SIGKILL" in err, err
    assert our_segments(proc.pid) == [] and all_gone(helpers)


def test_a_worker_is_idle_only_while_every_group_waits():
    from azshogi.selfplay.server import IdleClock

    clock = IdleClock(2)
    clock.enter()  # one group waits, the other searches: not idle
    time.sleep(0.05)
    assert clock.take() == 0.0
    clock.enter()  # both wait
    time.sleep(0.05)
    clock.leave()
    time.sleep(0.05)  # one searches again
    clock.leave()
    assert 0.04 <= clock.take() < 0.095
    assert clock.take() == 0.0  # taken once
