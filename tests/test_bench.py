"""azshogi-bench runs and ends with its JSON line (speed itself is measured, not tested)."""
import json
import subprocess
import sys

from conftest import TINY


def test_bench_prints_a_json_last_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "azshogi.commands.bench", *TINY, "search=puct",
                           "search.leaves_per_step=2", "bench.seconds=0.3", "bench.warmup_seconds=0.3",
                           "bench.repeats=2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("model", "device", "dtype", "batch", "simulations", "nn_positions_per_s",
                "selfplay_positions_per_s", "selfplay_nn_evals_per_s", "efficiency"):
        assert key in result
    assert result["batch"] == 12  # 6 actors x 2 leaves: the batch self-play forms
    assert abs(result["efficiency"] - result["selfplay_nn_evals_per_s"] / result["nn_positions_per_s"]) < 0.002


def test_two_groups_a_worker_queue_a_batch_behind_the_running_one(tiny_config):
    """With the delay network (a device that takes 20 ms a batch, far longer than the tiny
    search), one group's batch waits behind the other's on the device; in lockstep (one group)
    a worker's next batch only comes after its answer. Efficiency = evaluations / the bound."""
    import io

    from azshogi.train.bench import run

    results = {}
    for groups in (2, 1):
        cfg = tiny_config("selfplay.num_workers=1", f"selfplay.worker_groups={groups}", "device=cpu",
                          "bench.network=delay", "bench.delay_ms=20", "bench.seconds=0.6",
                          "bench.warmup_seconds=0.3", "bench.repeats=1")
        results[groups] = run(cfg, out=io.StringIO())
    two, one = results[2], results[1]
    assert two["batch"] == 3 and one["batch"] == 6  # a forward pass: a group's games
    assert two["timeline_ms"]["queued_behind"] > 0.8 and one["timeline_ms"]["queued_behind"] == 0
    assert two["timeline_ms"]["device"] >= 19.5  # the stand-in slept
    for result in (two, one):
        assert abs(result["efficiency"] - result["selfplay_nn_evals_per_s"] / result["nn_positions_per_s"]) < 0.002
        assert 0 <= result["workers_idle"] <= 1


def run_bench(tmp_path, *overrides):
    proc = subprocess.run([sys.executable, "-m", "azshogi.commands.bench", *TINY, "bench.seconds=0.3",
                           "bench.warmup_seconds=0.3", "bench.repeats=1", *overrides],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_bench_measures_the_server_alone_with_an_instant_network(tmp_path):
    result = run_bench(tmp_path, "bench.network=instant", "bench.fake_clients=2")
    assert result["mode"] == "server" and result["network"] == "instant"
    assert result["server_positions_per_s"] > 0 and result["server_cpu_us_per_position"] > 0
    # 636 bytes of planes, a count and 2 bytes per legal move in; 4 + 4 per legal move (fp32) out
    assert 640 < result["bytes_in_per_position"] < 640 + 2 * 593
    assert 4 < result["bytes_out_per_position"] < 4 + 4 * 593


def test_bench_compares_short_and_long_games(tmp_path):
    result = run_bench(tmp_path, "bench.network=instant", "bench.plies=[4,60]", "bench.warmup_seconds=0")
    assert result["mode"] == "plies" and set(result["positions_per_s"]) == {"4", "60"}
    assert result["relative"]["4"] == 1.0


def test_usi_bench_measures_engines_side_by_side(tmp_path):
    from play_helpers import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint(tmp_path / "tiny.pt")
    engine = f"{sys.executable} -m azshogi.commands.usi"
    proc = subprocess.run([sys.executable, "-m", "azshogi.commands.bench", "usi", str(checkpoint), "--go", "nodes 16",
                           "--repeats", "1", "--positions", "mid50", "--option", "Threads=1",
                           "--option", "Dtype=fp32", "--engine", "a", engine, "--engine", "b", engine],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result["engines"]) == {"a", "b"}
    for figures in result["engines"].values():
        assert set(figures) == {"mid50"}
        assert all(f["nodes"] == 16 and f["nps"] > 0 for f in figures.values())
    bad = subprocess.run([sys.executable, "-m", "azshogi.commands.bench", "usi", "--positions", "nowhere", "--model",
                          "1x16"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nowhere" in bad.stderr
