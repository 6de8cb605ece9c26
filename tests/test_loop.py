"""The whole loop through Hydra's compose API: checkpoints, TensorBoard, resume, errors (exact
resume: test_resume.py)."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import compose_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from azshogi.config import ConfigError, to_config
from azshogi.formats import checkpoint as ckpt
from azshogi.train.loop import train


def scalar_tags(log_dir: Path) -> set:
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return set(acc.Tags()["scalars"])


@pytest.mark.parametrize("workers", [0, 2])
def test_end_to_end_two_checkpoints(tiny_config, tmp_path, workers):
    cfg = tiny_config(f"selfplay.num_workers={workers}", "loop.max_checkpoints=2")
    counters = train(cfg, show_progress=False)
    assert counters.checkpoints == 2 and counters.train_steps == 8
    assert counters.positions >= 2 * 60 and counters.games >= 2
    names = [p.name for p in ckpt.list_checkpoints(tmp_path / "checkpoints" / "t")]
    assert names == ["ckpt-00001.pt", "ckpt-00002.pt"]
    tags = scalar_tags(tmp_path / "logs" / "t")
    for prefix in ("train/", "selfplay/", "perf/"):
        assert any(t.startswith(prefix) for t in tags), prefix
    assert {"train/policy_loss", "selfplay/sample_reuse", "perf/selfplay_positions_per_s"} <= tags
    assert list((tmp_path / "logs" / "t" / "games").glob("*.kif"))
    state = ckpt.load(tmp_path / "checkpoints" / "t" / "ckpt-00002.pt")
    assert state["config"]["model"]["channels"] == 16
    assert len(state["selfplay"]["games"]) == 6  # the games in progress are in the checkpoint


def test_resumed_tensorboard_has_no_duplicate_points(tiny_config, tmp_path):
    train(tiny_config("loop.max_checkpoints=1"), show_progress=False)
    train(tiny_config("loop.max_checkpoints=2"), show_progress=False)
    acc = EventAccumulator(str(tmp_path / "logs" / "t"))
    acc.Reload()
    steps = [e.step for e in acc.Scalars("selfplay/games")]
    assert steps == sorted(set(steps)) == [4, 8]
    loss_steps = [e.step for e in acc.Scalars("train/policy_loss")]
    assert loss_steps == list(range(1, 9))


def test_a_different_network_shape_is_refused_on_resume(tiny_config):
    train(tiny_config("loop.max_checkpoints=1"), show_progress=False)
    with pytest.raises(ConfigError, match="model.blocks=1, model.channels=16"):
        train(tiny_config("loop.max_checkpoints=2", "model.channels=24"), show_progress=False)


def test_resume_from_a_path(tiny_config, tmp_path):
    train(tiny_config("loop.max_checkpoints=1"), show_progress=False)
    source = tmp_path / "checkpoints" / "t" / "ckpt-00001.pt"
    counters = train(tiny_config("loop.max_checkpoints=2", f"resume={source}", run="other"), show_progress=False)
    assert counters.checkpoints == 2


@pytest.mark.parametrize("override, key", [
    ("search.num_simulations=0", "search.num_simulations"),
    ("selfplay.num_actors=-1", "selfplay.num_actors"),
    ("selfplay.num_workers=-2", "selfplay.num_workers"),
    ("+experiment=cpu selfplay.num_workers=129", "selfplay.num_workers"),
    ("selfplay.server_wait_ms=-1", "selfplay.server_wait_ms"),
    ("search.max_num_considered_actions=1", "search.max_num_considered_actions"),
    ("device=gpu", "device"),
    ("rules.impasse_rule=25", "rules.impasse_rule"),
    ("train.lr=-1", "train.lr"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        to_config(compose_config(override.split()))


@pytest.mark.parametrize("override, words", [
    ("search.kind=alphabeta", ["search.kind", "gumbel", "puct"]),
    ("search.num_simulations=many", ["search.num_simulations"]),
    ("train.optimizer=adam", ["train.optimizer", "sgd", "adamw"]),
])
def test_bad_overrides_fail_at_start_up_with_one_message(override, words, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "azshogi", override], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    for w in words:
        assert w in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "outputs").exists()


def test_range_error_from_the_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "azshogi", "search.num_simulations=0"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "azshogi: error: search.num_simulations=0: must be >= 1"


@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_ends_with_a_checkpoint_and_resumes(tmp_path, signals):
    from conftest import TINY

    args = [sys.executable, "-m", "azshogi", *TINY, "run=sig", "loop.max_checkpoints=0"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = tmp_path / "checkpoints" / "sig"
    deadline = time.time() + 120
    while not (run_dir / "ckpt-00001.pt").exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.time() < deadline
        time.sleep(0.2)
    for _ in range(signals):  # GNU timeout, for one, sends SIGTERM twice
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    latest = ckpt.latest(run_dir)
    assert latest.name.endswith("-partial.pt"), [p.name for p in ckpt.list_checkpoints(run_dir)]
    assert "stopped; saved" in err
    state = ckpt.load(latest)
    finished = state["counters"]["checkpoints"]
    proc = subprocess.run(args[:-1] + [f"loop.max_checkpoints={finished + 1}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ckpt.latest(run_dir).name == f"ckpt-{finished + 1:05d}.pt"


def test_loop_runs_with_puct(tiny_config):
    counters = train(tiny_config("search=puct", "search.num_simulations=8", "search.leaves_per_step=4",
                                 "loop.max_checkpoints=1"), show_progress=False)
    assert counters.checkpoints == 1 and counters.positions >= 60


def test_loop_runs_with_two_search_threads(tiny_config):
    counters = train(tiny_config("selfplay.search_threads=2", "loop.max_checkpoints=1"), show_progress=False)
    assert counters.checkpoints == 1 and counters.positions >= 60


def test_progress_lines_without_a_terminal(tiny_config, tmp_path, monkeypatch):
    # Under pytest stderr is not a terminal: progress goes to the log as lines, here at every step.
    monkeypatch.setattr("azshogi.train.monitor.PROGRESS_LINE_SECONDS", 0.0)
    train(tiny_config("loop.max_checkpoints=1"), show_progress=True)
    log = (tmp_path / "logs" / "t" / "azshogi.log").read_text()
    assert "self-play → checkpoint 1:" in log and "training → checkpoint 1:" in log


def test_self_play_settings_fit_the_machine_when_left_on_auto():
    from azshogi.config import resolve_selfplay

    auto = to_config(compose_config([]))
    cfg, note = resolve_selfplay(auto, "cpu", 2)
    assert (cfg.selfplay.num_actors, cfg.selfplay.num_workers) == (128, 0) and "in process" in note
    cfg, note = resolve_selfplay(auto, "cuda", 16)
    assert (cfg.selfplay.num_actors, cfg.selfplay.num_workers) == (1920, 15) and "auto for cuda" in note
    assert resolve_selfplay(auto, "cuda", 2)[0].selfplay.num_actors == 512
    given = to_config(compose_config(["selfplay.num_actors=64", "selfplay.num_workers=2"]))
    cfg, note = resolve_selfplay(given, "cuda", 16)
    assert (cfg.selfplay.num_actors, cfg.selfplay.num_workers) == (64, 2) and "auto" not in note
    threads = to_config(compose_config(["selfplay.search_threads=2"]))
    assert resolve_selfplay(threads, "cuda", 16)[0].selfplay.num_workers == 0
