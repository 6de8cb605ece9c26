"""The whole loop through Hydra's compose API: checkpoints, TensorBoard, resume, errors (exact
resume: test_resume.py)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY, compose_config, games_in_progress, replay_window, run_main
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from azshogi.commands import train as train_command
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
    assert_phase_figures_agree(tmp_path / "logs" / "t", counters, cfg.selfplay.num_actors)
    assert list((tmp_path / "logs" / "t" / "games").glob("*.kif"))
    state = ckpt.load(tmp_path / "checkpoints" / "t" / "ckpt-00002.pt")
    assert state["config"]["model"]["channels"] == 16
    assert len(games_in_progress(state)) == 6  # the games in progress are in the checkpoint


def assert_phase_figures_agree(log_dir: Path, counters, actors: int) -> None:
    """Each checkpoint's self-play figures (train/phases.py) agree with each other and, summed,
    with the run's counters: every move a training position here (no playout caps), so a
    phase's mean game length is its positions per game; forward passes of 1 to `actors`
    positions; a cheap-move share of 0."""
    acc = EventAccumulator(str(log_dir))
    acc.Reload()

    def values(tag):
        return [e.value for e in sorted(acc.Scalars(tag), key=lambda e: e.step)]

    games, positions = values("selfplay/games"), values("selfplay/positions")
    assert sum(games) == counters.games and sum(positions) == counters.positions
    for length, g, p in zip(values("selfplay/mean_game_length"), games, positions):
        assert length == pytest.approx(p / g)
    assert all(1 <= b <= actors for b in values("perf/mean_batch_size"))
    assert all(v > 0 for v in values("perf/nn_evals_per_s") + values("perf/seconds_inference"))
    assert values("selfplay/cheap_move_share") == [0.0] * counters.checkpoints


def test_resumed_tensorboard_has_no_duplicate_points(tiny_config, tmp_path, tiny_run):
    train(tiny_config("loop.max_checkpoints=2"), show_progress=False)  # tiny_run stopped at checkpoint 1
    acc = EventAccumulator(str(tmp_path / "logs" / "t"))
    acc.Reload()
    # Sorted: both runs' event files are named by the same second here, so their order on
    # reading is that of the writers' process ids.
    steps = sorted(e.step for e in acc.Scalars("selfplay/games"))
    assert steps == [4, 8]
    loss_steps = sorted(e.step for e in acc.Scalars("train/policy_loss"))
    assert loss_steps == list(range(1, 9))


def test_a_different_network_shape_is_refused_on_resume(tiny_config, tiny_run):
    with pytest.raises(ConfigError, match="model.blocks=1, model.channels=16"):
        train(tiny_config("loop.max_checkpoints=2", "model.channels=24"), show_progress=False)


def test_resume_from_a_path(tiny_config, tiny_run):
    counters = train(tiny_config("loop.max_checkpoints=2", f"resume={tiny_run}", run="other"), show_progress=False)
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
def test_bad_overrides_fail_at_start_up_with_one_message(override, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, monkeypatch, "azshogi", train_command.main, [override])
    assert code != 0
    for w in words:
        assert w in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "outputs").exists()


def test_range_error_from_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, monkeypatch, "azshogi", train_command.main, ["search.num_simulations=0"])
    assert code == 2
    assert err.strip() == "azshogi: error: search.num_simulations=0: must be >= 1"


@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_ends_with_a_checkpoint_and_resumes(tiny_config, tmp_path, signals):
    """The command in a process of its own, stopped by SIGTERM; the run it leaves resumed in this
    process (what the command would run)."""
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
    counters = train(tiny_config(f"loop.max_checkpoints={finished + 1}", run="sig"), show_progress=False)
    assert counters.checkpoints == finished + 1
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


def scalars(log_dir: Path) -> dict:
    """{tag: [(step, value), ...]}"""
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_phase_times_add_up_to_the_wall_time(tiny_config, tmp_path, monkeypatch):
    monkeypatch.setattr("azshogi.train.monitor.LIVE_SCALARS_SECONDS", 0.0)  # a live point at every move
    cfg = tiny_config("loop.max_checkpoints=2", "eval.every=1", "eval.games=2", "eval.anchors=[random]",
                      "eval.previous=false", "eval.records_saved=0")
    train(cfg, show_progress=False)
    points = scalars(tmp_path / "logs" / "t")
    phases = ["selfplay", "pause", "training", "checkpoint", "eval", "records", "other"]
    for i, step in enumerate([4, 8]):
        seconds = {p: dict(points[f"perf/seconds_{p}"])[step] for p in phases}
        wall = dict(points["perf/seconds_wall"])[step]
        assert sum(seconds.values()) == pytest.approx(wall, rel=1e-4)
        assert seconds["other"] <= 0.05 * wall + 0.1, seconds  # the named phases hold nearly all of it
        for p in ("selfplay", "training", "checkpoint", "records"):
            assert seconds[p] > 0, p
        assert (seconds["eval"] > 0) == (i == 1)  # checkpoint 1's evaluation runs before checkpoint 2's line
        assert dict(points["perf/selfplay_share"])[step] == pytest.approx(seconds["selfplay"] / wall, rel=1e-4)
    log = (tmp_path / "logs" / "t" / "azshogi.log").read_text()
    assert "checkpoint 2: step 8 |" in log and "s (" in log and "pause/resume" in log
    # The termination mix as rates, and self-play points during each phase at steps inside it.
    rates = [dict(points[f"selfplay/termination_rate/{t}"]) for t in ("max_plies", "checkmate", "repetition")]
    assert sum(r[4] for r in rates) == pytest.approx(1.0, abs=1e-6)
    live = [step for step, _ in points["selfplay/live/moves_per_s"]]
    assert live and all(1 <= s <= 4 for s in live if s <= 4) and any(5 <= s <= 8 for s in live)
    assert {"selfplay/live/games_finished", "selfplay/live/positions", "selfplay/live/mean_game_length"} <= set(points)


def test_a_resume_from_a_stopped_phase_keeps_its_wall_time(tiny_config, monkeypatch):
    """counters.wall_seconds: the -partial checkpoint of a stopped phase keeps the session's time
    in it, so the next checkpoint, written by the session that resumed it, counts that time too."""
    from resume_helpers import RecordingLoop

    import azshogi.train.loop as loop_module
    from azshogi.train.phases import PhaseClock

    jump = [0.0]  # the seconds the first session spends in phase 2 before its stop (made, not slept)
    monkeypatch.setattr(loop_module, "PhaseClock", lambda: PhaseClock(lambda: time.perf_counter() + jump[0]))
    cfg = tiny_config("eval.every=0", "loop.max_checkpoints=2")
    first = RecordingLoop(cfg, stop_after_steps=6)  # stops in phase 2's training, its second step
    step = first.run_state.trainer.step

    def slow(batch):
        if first.counters.checkpoints == 1:
            jump[0] = 1000.0
        return step(batch)

    first.run_state.trainer.step = slow
    first.run()
    assert sorted(first.written) == ["ckpt-00001-partial.pt", "ckpt-00001.pt"]
    assert first.written["ckpt-00001-partial.pt"]["counters"]["wall_seconds"] >= 1000
    second = RecordingLoop(cfg)
    second.run()
    assert first.written["ckpt-00001.pt"]["counters"]["wall_seconds"] < 1000
    assert second.written["ckpt-00002.pt"]["counters"]["wall_seconds"] >= 1000


def test_an_interrupted_evaluation_runs_again_on_resume(tiny_config, tmp_path, monkeypatch):
    import azshogi.play.gauntlet as gauntlet

    calls = []

    def interrupted(model, cfg, device, paths, when, *args, **kwargs):
        calls.append(when.checkpoint)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the matches
        time.sleep(30)
        raise AssertionError("the evaluation was not interrupted")

    monkeypatch.setattr(gauntlet, "rate_checkpoint", interrupted)
    counters = train(tiny_config("eval.every=1", "loop.max_checkpoints=3"), show_progress=False)
    assert calls == [1] and counters.checkpoints == 1 and counters.evaluated == 0
    run = tmp_path / "checkpoints" / "t"
    assert [p.name for p in ckpt.list_checkpoints(run)] == ["ckpt-00001.pt", "ckpt-00001-partial.pt"]
    assert "evaluation of checkpoint 1 interrupted" in (tmp_path / "logs" / "t" / "azshogi.log").read_text()
    # the -partial file is of phase 2, which has no game yet: checkpoint 1's games are not its own
    assert ckpt.load(run / "ckpt-00001-partial.pt")["counters"]["phase_games"] == {
        "games": 0, "game_moves": 0, "black_wins": 0, "white_wins": 0, "draws": 0, "terminations": {}}
    done = []
    monkeypatch.setattr(gauntlet, "rate_checkpoint", lambda *args, **kwargs: done.append(args[4].checkpoint))
    counters = train(tiny_config("eval.every=1", "loop.max_checkpoints=2"), show_progress=False)
    assert done == [1, 2] and counters.evaluated == 2


@pytest.mark.parametrize("override, error", [
    ("resume={tmp}/missing.pt", "checkpoint not found"),
    ("replay.seed_files=[{tmp}/missing.hcpe]", "missing.hcpe"),
])
def test_a_failed_start_leaves_nothing_behind(tiny_config, tmp_path, override, error):
    with pytest.raises(Exception, match=error):
        train(tiny_config(override.format(tmp=tmp_path)), show_progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_hydra_run_dir_places_the_run(tmp_path):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from azshogi.commands.app import place_run

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="azshogi.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra.run.dir={tmp_path / 'x'}", "log_root=/abs/logs"],
                      return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        place_run(cfg)
    finally:
        HydraConfig.instance().cfg = None
    assert cfg.checkpoint_root == str(tmp_path / "x" / "checkpoints") and cfg.log_root == "/abs/logs"


def test_a_format_1_checkpoint_resumes(tiny_config, tmp_path):
    """A checkpoint written before the replay store (tests/data/format1/make_format1.py): its
    replay window and games in progress come back exactly; the next checkpoint stores them."""
    from azshogi.train.loop import Loop

    old_file = Path(__file__).parent / "data" / "format1" / "ckpt-00001-partial.pt"
    old = ckpt.load(old_file)
    assert old["format"] == 1
    overrides = ["model.value_hidden=8", "selfplay.num_actors=3", "rules.max_plies=16", "replay.capacity=30",
                 "loop.positions_per_checkpoint=40", "selfplay.write_hcpe3=false", f"resume={old_file}"]
    loop = Loop(tiny_config(*overrides, "loop.max_checkpoints=1"), show_progress=False)
    loop.restore()
    window = loop.replay.positions(loop.replay.begin, loop.replay.end)
    assert loop.replay.end == old["replay"]["total_added"] == 48
    assert np.array_equal(window.hcps, old["replay"]["hcps"].numpy())
    assert np.array_equal(window.labels, old["replay"]["labels"].numpy())
    assert [a.moves for a in loop.selfplay.selfplay.actors] == [g["moves"] for g in old["selfplay"]["games"]]
    assert loop.counters.evaluated == 1
    counters = train(tiny_config(*overrides, "loop.max_checkpoints=2"), show_progress=False)
    assert counters.checkpoints == 2
    new = ckpt.load(tmp_path / "checkpoints" / "t" / "ckpt-00002.pt")
    assert new["format"] == 2 and new["replay"]["end"] == counters.positions
    assert len(replay_window(tmp_path / "checkpoints" / "t" / "ckpt-00002.pt")) == 30


def test_a_failed_start_from_the_command_line_leaves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(capsys, monkeypatch, "azshogi", train_command.main, ["resume=missing.pt"])
    assert code == 2
    assert err.strip() == "azshogi: error: checkpoint not found: missing.pt"
    assert list(tmp_path.iterdir()) == []


def evals_per_move(log_dir: Path) -> list[float]:
    return [value for _, value in sorted(scalars(log_dir)["perf/nn_evals_per_move"])]


@pytest.mark.parametrize("workers", [0, 2])
def test_selfplay_searches_deeper_from_the_checkpoint_asked(tiny_config, tmp_path, workers):
    """A stage from checkpoint 2 (12 simulations): from the third phase on, self-play evaluates about 12
    positions a move where the first two evaluated about 5 (the TINY search's 4 simulations and
    the root); the game numbering goes on through the change; a resumed run searches deeper from
    its start. (With worker processes a phase's moves and evaluations are counted at slightly
    different moments, so a phase of a single step can read low: there, the largest must be deep,
    and the shallow phases are bounded from above only.)"""
    deeper = ("+stages.deeper={from_checkpoint:2,set:{search:{num_simulations:12,max_num_considered_actions:4}}}",
              f"selfplay.num_workers={workers}", "eval.every=0")  # no matches at checkpoint 5
    train(tiny_config(*deeper, "loop.max_checkpoints=4"), show_progress=False)
    logs, checkpoints = tmp_path / "logs" / "t", tmp_path / "checkpoints" / "t"
    per_move = evals_per_move(logs)
    assert max(per_move[:2]) <= 6 and (workers or min(per_move[:2]) >= 4), per_move
    assert (min(per_move[2:]) if workers == 0 else max(per_move[2:])) >= 9, per_move
    said = (logs / "azshogi.log").read_text()
    assert "checkpoint 2: stage 1 of 1, deeper (from_checkpoint 2): search.num_simulations 4 -> 12" in said
    first = {g["game_id"] for g in games_in_progress(ckpt.load(checkpoints / "ckpt-00001.pt"))}
    last = {g["game_id"] for g in games_in_progress(ckpt.load(checkpoints / "ckpt-00004.pt"))}
    # numbered on, not from 0 again (worker processes' groups interleave their numbers, each at its own
    # pace, so there a game begun after checkpoint 1 may carry a lower number than one playing then)
    assert len(last) == 6 and (min(last) > max(first) if workers == 0 else max(last) > max(first) and last - first)
    train(tiny_config(*deeper, "loop.max_checkpoints=6"), show_progress=False)
    resumed = evals_per_move(logs)[4:]
    assert (min(resumed) if workers == 0 else max(resumed)) >= 9, resumed
    assert "gumbel 12 simulations, 4 considered" in (logs / "azshogi.log").read_text().split("resumed from")[1]


def test_a_window_smaller_than_a_phase_is_said_at_start_up(tiny_config):
    """replay.capacity below one phase's positions ran without a word: most of each phase's
    positions were pushed out of the window before any training step saw them."""
    from azshogi.train.loop import window_hint

    assert window_hint(tiny_config()) is None  # 2,000 positions kept, 60 a phase
    assert window_hint(tiny_config("replay.capacity=50")) == (
        "replay.capacity=50 is smaller than loop.positions_per_checkpoint=60: of each phase's new positions only "
        "the newest 50 are trained on (the rest are played for nothing)")


def test_records_that_cannot_be_written_do_not_keep_the_checkpoint_from_being_written(tiny_config, tmp_path,
                                                                                      monkeypatch):
    """The log disk full at a checkpoint: the error ends the run, after the checkpoint is written."""
    import errno

    from azshogi.formats.dlshogi import Hcpe3Writer

    def full(self, path, append=False, keep=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(Hcpe3Writer, "flush", full)
    with pytest.raises(OSError, match=r"No space left on device \(ckpt-00001.pt was written; its phase's game "
                                      r"records were not\)") as error:
        train(tiny_config("loop.max_checkpoints=1", "selfplay.write_hcpe3=true"), show_progress=False)
    assert error.value.filename.endswith("ckpt-00001.hcpe3") and error.value.errno == errno.ENOSPC
    log = (tmp_path / "logs" / "t" / "azshogi.log").read_text()  # the log says why the session ended
    assert "ERROR the run stopped: " in log and "No space left on device (ckpt-00001.pt was written" in log
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "checkpoints" / "t")] == ["ckpt-00001.pt"]
