"""What a run shows while it runs, on a fake clock: the phase accounting, the self-play bar and
its TensorBoard points, the start-up hint for CPU users."""
import sys
import time

import pytest
import torch

from azshogi.config import Config
from azshogi.train import monitor
from azshogi.train.loop import cpu_hint
from azshogi.train.monitor import SelfPlayProgress
from azshogi.train.phases import PhaseClock, SelfPlayPhaseStats


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class FakeWriter:
    def __init__(self):
        self.points = []

    def add_scalar(self, tag, value, step):
        self.points.append((tag, value, step))

    def flush(self):
        pass


def test_phases_never_overlap_and_add_up_to_the_wall_time():
    clock = FakeClock()
    phases = PhaseClock(clock)
    clock.advance(1)  # outside any phase: other
    with phases.phase("selfplay"):
        clock.advance(10)
        with phases.phase("records"):  # pauses self-play
            clock.advance(2)
        clock.advance(3)
        phases.switch("pause")  # the target is reached: the moves in flight
        clock.advance(4)
    with phases.phase("train"):
        clock.advance(5)
    times = phases.lap()
    assert times.seconds == {"selfplay": 13, "pause": 4, "train": 5, "checkpoint": 0, "eval": 0, "records": 2}
    assert times.wall == 25 and times.other == 1
    assert times.share("selfplay") == pytest.approx(13 / 25)
    assert times.summary() == ("time 25 s: self-play 13.0 s (52%), pause/resume 4.0, train 5.0, checkpoint 0.0, "
                               "eval 0.0, records 2.0, other 1.0")
    with phases.phase("eval"):
        clock.advance(7)
    second = phases.lap()  # a lap starts where the previous one ended
    assert second.wall == 7 and second.seconds["eval"] == 7 and second.seconds["train"] == 0
    with pytest.raises(ValueError, match="unknown phase"):
        phases.enter("lunch")


def progress(clock, writer, eta_now=False, lines=None, show=False):
    return SelfPlayProgress("self-play → checkpoint 1", 1000, 8, (1, 100), eta_now, writer,
                            (lines if lines is not None else []).append, show=show, quiet_lines=lines is not None,
                            clock=clock)


def test_the_bar_moves_with_every_move_and_shows_one_rate():
    clock, writer = FakeClock(), FakeWriter()
    bar = progress(clock, writer)
    assert bar.share() == 0 and bar.text().startswith("0 moves, 0 moves/s")
    clock.advance(2)
    bar.update(SelfPlayPhaseStats(moves=16))  # two moves of 8 games, no game finished yet
    assert 0 < bar.share() < 0.02
    assert bar.text() == ("16 moves, 8 moves/s | 0/1,000 positions | 0 games done, 8 playing | 00:02, time left: "
                          "estimating")
    assert bar.bar.n == int(1000 * bar.share())
    clock.advance(2)
    bar.update(SelfPlayPhaseStats(moves=40, positions=24, games=1, game_moves=24))
    # Once a game has finished, the time left (no ply limit known: (1000 - 24) positions at 10 moves/s).
    assert bar.text().endswith("1 game done, 8 playing | 00:04, ~01:37 left")
    assert "pos_s" not in bar.text() and bar.text().count("/s") == 1
    bar.update(SelfPlayPhaseStats(moves=1200, positions=1000, games=40, game_moves=1000))
    assert bar.share() == 1.0


# The first phase of `azshogi +experiment=cpu` (128 games, 6,000 positions, ply limit 256) on a
# busy 2-core CPU, from its log (run k1, 2026-11-24): seconds, moves, positions, games done. It
# ended at about 710 s after 18,300 moves; the bar then estimated about 2 minutes left throughout.
FIRST_PHASE = [(60, 4480, 25, 2), (183, 6656, 167, 5), (304, 9728, 349, 8), (437, 12288, 1262, 19),
               (565, 14592, 2499, 31), (696, 17920, 5768, 57)]


def test_the_first_phase_estimates_the_moves_its_games_still_play():
    """All games start together and give positions only as they end: about three times the
    target's moves are played. The estimate of the moves still needed stays within a tenth of the
    phase's moves of what the run went on to play (the time left also depends on the rate, which
    fell in this run)."""
    clock = FakeClock()
    bar = SelfPlayProgress("self-play → checkpoint 1", 6000, 128, (1, 100), False, FakeWriter(), [].append,
                           show=False, quiet_lines=False, clock=clock, max_plies=256)
    start = clock.now
    for seconds, moves, positions, games in FIRST_PHASE:
        clock.now = start + seconds
        bar.update(SelfPlayPhaseStats(moves=moves, positions=positions, games=games))
        assert bar.moves_needed() == pytest.approx(18300 - moves, abs=1830), seconds
        assert bar.share() == pytest.approx(moves / 18300, abs=0.06), seconds
    clock.now = start + 60
    bar.update(SelfPlayPhaseStats(moves=4480, positions=25, games=2))
    assert bar.text().endswith("2 games done, 128 playing | 01:00, ~03:15 left")  # the log said ~01:20


def test_a_later_phase_shows_the_time_left_from_the_start():
    clock = FakeClock()
    bar = progress(clock, FakeWriter(), eta_now=True)
    clock.advance(1)
    bar.update(SelfPlayPhaseStats(moves=10))
    assert bar.text().endswith("00:01, ~01:40 left")


def test_with_playout_caps_the_moves_still_needed_count_the_cheap_ones():
    # Half the moves are cheap searches, no positions: 1000 positions are about 2000 moves.
    clock = FakeClock()
    bar = SelfPlayProgress("self-play → checkpoint 1", 1000, 8, (1, 100), True, FakeWriter(), [].append,
                           show=False, quiet_lines=False, clock=clock, moves_per_position=2.0)
    clock.advance(1)
    bar.update(SelfPlayPhaseStats(moves=10))
    assert bar.text().endswith("00:01, ~03:20 left") and bar.share() == pytest.approx(10 / 2010)


def test_live_scalars_come_every_interval_at_steps_within_the_phase():
    clock, writer = FakeClock(), FakeWriter()
    bar = progress(clock, writer)
    for second in range(1, 95):
        clock.advance(1)
        bar.update(SelfPlayPhaseStats(moves=8 * second, positions=4 * second, games=second // 10,
                                 game_moves=40 * (second // 10)))
    steps = sorted({step for _, _, step in writer.points})
    assert len(steps) == 3 and all(1 <= s <= 100 for s in steps)  # at 30, 60 and 90 s
    points = {(tag, step): value for tag, value, step in writer.points}
    assert points[("selfplay/live/moves_per_s", steps[0])] == pytest.approx(8)
    assert points[("selfplay/live/games_finished", steps[-1])] == 9
    assert points[("selfplay/live/mean_game_length", steps[-1])] == 40
    assert points[("selfplay/live/positions", steps[1])] == 240


def test_without_a_terminal_progress_goes_to_the_log(monkeypatch):
    monkeypatch.setattr(monitor, "PROGRESS_LINE_SECONDS", 10.0)
    clock, lines = FakeClock(), []
    bar = progress(clock, FakeWriter(), lines=lines)
    for _ in range(25):
        clock.advance(1)
        bar.update(SelfPlayPhaseStats(moves=80))
    assert len(lines) == 2 and lines[0].startswith("self-play → checkpoint 1: 7% | 80 moves, 8 moves/s")


def test_a_cpu_run_with_the_gpu_defaults_is_told_about_the_cpu_preset():
    from azshogi.config import resolve_selfplay
    from azshogi.train.loop import machine_cores

    def as_run(cfg, device):  # the config as the loop has it: auto settings resolved
        return cpu_hint(resolve_selfplay(cfg, device, machine_cores())[0], torch.device(device))

    hint = as_run(Config(), "cpu")
    assert "+experiment=cpu" in hint and "20,000 positions" in hint
    assert as_run(Config(), "cuda") is None
    smaller = Config()
    smaller.loop.positions_per_checkpoint = 6000
    assert as_run(smaller, "cpu") is None


def test_the_clock_goes_on_while_a_move_is_searched(monkeypatch, capsys):
    monkeypatch.setattr(monitor, "BAR_TICK_SECONDS", 0.01)
    clock = FakeClock()
    bar = progress(clock, FakeWriter(), show=True)
    clock.advance(5)  # no update: the main thread is busy with a move of every game
    shown = ""
    for _ in range(500):
        shown += capsys.readouterr().err
        if "| 00:05" in shown:
            break
        time.sleep(0.01)
    bar.close()
    assert "0 moves, 0 moves/s" in shown and "| 00:05" in shown


def test_the_first_ctrl_c_is_acknowledged_on_the_screen_at_once(tiny_config, tmp_path, monkeypatch, capsys):
    """Not only in the log: what the screen shows right after the signal, before the phase ends
    and the checkpoint is written."""
    import os
    import signal

    from azshogi.train.loop import Loop, train

    seen = []
    write_records = Loop.write_records

    def interrupted(self, game, games_in_phase):
        write_records(self, game, games_in_phase)
        if not seen:
            capsys.readouterr()  # the start-up line
            os.kill(os.getpid(), signal.SIGINT)
            shown = ""
            for _ in range(200):  # within a second
                shown += capsys.readouterr().err
                if "Ctrl-C" in shown:
                    break
                time.sleep(0.005)
            seen.append(shown)

    monkeypatch.setattr(Loop, "write_records", interrupted)
    counters = train(tiny_config("loop.max_checkpoints=2"), show_progress=False)
    assert counters.checkpoints == 0
    assert seen == ["Ctrl-C: stopping after the current step; a checkpoint follows (press Ctrl-C again to quit at "
                    "once, without it)\n"]
    assert "stopped; saved" in capsys.readouterr().err


def test_a_terminal_of_size_0x0_gets_progress_lines_instead_of_bars(tmp_path, monkeypatch):
    """tqdm draws nothing on a terminal that reports 0 columns: such a terminal gets the plain
    progress lines of a run without a terminal."""
    import fcntl
    import os
    import struct
    import termios

    from azshogi.train.monitor import Monitor, draws_bars

    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
            assert draws_bars(terminal)
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
            assert terminal.isatty() and not draws_bars(terminal)
            monkeypatch.setattr(sys, "stderr", terminal)
            shown = Monitor(tmp_path, purge_step=None, show_progress=True)
            assert not shown.show_progress and shown.quiet_progress
            shown.close()
    finally:
        os.close(leader)
        os.close(follower)


def test_a_finished_run_started_again_says_so_and_how_to_go_on(tiny_config, tmp_path, capsys):
    from azshogi.formats import checkpoint as ckpt
    from azshogi.train.loop import train

    small = ("loop.positions_per_checkpoint=10", "loop.steps_per_checkpoint=1", "loop.max_checkpoints=1")
    train(tiny_config(*small), show_progress=False)
    capsys.readouterr()
    counters = train(tiny_config(*small), show_progress=False)
    err = capsys.readouterr().err
    assert counters.checkpoints == 1 and counters.train_steps == 1
    assert "resumed from" in err and ("run 't' already reached loop.max_checkpoints=1 (checkpoint 1): no more "
                                      "self-play or training. To go on, raise the limit (e.g. add "
                                      "loop.max_checkpoints=2 to the command), or give a new run a new name "
                                      "(run=NAME)\n") in err
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "checkpoints" / "t")] == ["ckpt-00001.pt"]


def test_a_resumed_run_keeps_the_live_points_of_the_phase_it_was_stopped_in(tiny_config, tmp_path, monkeypatch,
                                                                             capsys):
    """A stop in mid self-play, then a resume: TensorBoard's purge at the checkpoint's step would
    drop the stopped phase's selfplay/live/ points (docs/tools/plot_scalars.py warned and lost
    them); they are kept, the resumed phase's points follow them, and no training point is
    written twice. The start line says what the bar, counting from 0 moves, does not: the games
    in progress restored and the phase's positions made before."""
    import os
    import re
    import signal

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from azshogi.train.loop import train

    def points(tag):
        acc = EventAccumulator(str(tmp_path / "logs" / "t"))
        acc.Reload()
        return [(e.step, e.value) for e in acc.Scalars(tag)]

    monkeypatch.setattr(monitor, "LIVE_SCALARS_SECONDS", 0.0)  # a live point at every move
    update, stops = monitor.SelfPlayProgress.update, []

    def ctrl_c_in_phase_two(self, count, force=False):
        update(self, count, force)
        if "checkpoint 2" in self.description and count.moves >= 6 * 8 and not stops:  # 8 moves of 24
            stops.append(count.moves)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(monitor.SelfPlayProgress, "update", ctrl_c_in_phase_two)
    train(tiny_config("loop.max_checkpoints=2"), show_progress=False)
    stopped = [p for p in points("selfplay/live/moves_per_s") if p[0] > 4]  # phase two: steps 5 to 8
    assert stops and stopped
    capsys.readouterr()
    train(tiny_config("loop.max_checkpoints=2"), show_progress=False)
    start = capsys.readouterr().err.splitlines()[0]
    assert re.search(r"resumed from \S+ckpt-00001-partial.pt at checkpoint 1 \(6 games in progress restored"
                     r"(, \d+ of the 60 positions for checkpoint 2 made)?\); device cpu", start), start
    resumed = points("selfplay/live/moves_per_s")
    before = len([p for p in resumed if p[0] <= 4])  # phase one's
    assert resumed[before:before + len(stopped)] == stopped  # kept, in their place
    assert len(resumed) > before + len(stopped) + 1  # then the resumed phase's own
    for tag in ("selfplay/live/moves_per_s", "selfplay/live/positions"):
        steps = [step for step, _ in points(tag)]
        assert steps == sorted(steps) and steps[-1] <= 8, (tag, steps)
    assert [step for step, _ in points("train/policy_loss")] == list(range(1, 9))


def test_the_bar_never_moves_back():
    """In the first phase a game that ends can raise the estimate of the moves still needed (the
    games still playing are fewer): the bar, and the live points' steps, stay where they were."""
    clock = FakeClock()
    bar = SelfPlayProgress("self-play → checkpoint 1", 6000, 128, (1, 100), False, FakeWriter(), [].append,
                           show=False, quiet_lines=False, clock=clock, max_plies=256)
    bar.update(SelfPlayPhaseStats(moves=128 * 30))
    needed, before = bar.moves_needed(), bar.share()
    bar.update(SelfPlayPhaseStats(moves=128 * 30, positions=30, games=1, game_moves=30))  # a short game ended
    assert bar.moves_needed() > needed and bar.share() == before


def drawn(capsys) -> str:
    """The bar's line as the terminal shows it last (tqdm draws each over the previous)."""
    return capsys.readouterr().err.split("\r")[-1].rstrip("\n")


@pytest.mark.parametrize("columns", [60, 80, 100, 120, 150])
def test_the_bar_fits_the_terminal_and_keeps_the_time_left(columns, monkeypatch, capsys):
    """An hour into a phase of 20,000 positions on a CPU: at 80 columns the positions (shortened)
    and the time left; more words as the width allows, the least needed left out first."""
    monkeypatch.setattr(monitor, "BAR_TICK_SECONDS", 3600.0)
    clock = FakeClock()
    bar = SelfPlayProgress("self-play → checkpoint 12", 20000, 128, (1, 100), True, FakeWriter(), [].append,
                           show=True, quiet_lines=False, clock=clock, columns=lambda: columns)
    clock.advance(3725)
    bar.update(SelfPlayPhaseStats(moves=7000, positions=6000, games=350, game_moves=6000), force=True)
    line = drawn(capsys)
    bar.close()
    assert len(line) == columns and line.startswith("self-play → checkpoint 12:  33%|"), line
    every = "7,000 moves, 2 moves/s | 6,000/20,000 positions | 350 games done, 128 playing | 1:02:05, ~2:04:10 left"
    assert line.split("| ", 1)[1] == {
        60: "~2:04:10 left",
        80: "6,000/20,000 pos. | ~2:04:10 left",
        100: "2 moves/s | 6,000/20,000 positions | ~2:04:10 left",
        120: "7,000 moves, 2 moves/s | 6,000/20,000 positions | 1:02:05, ~2:04:10 left",
        150: every}[columns]
    assert bar.text() == every  # the log's lines keep every word


def test_positions_past_the_target_are_said_plainly():
    """The moves in flight when the target is reached add their games' positions (a cluster's
    nodes, many): no `2,564/1,000`."""
    clock = FakeClock()
    bar = progress(clock, FakeWriter(), eta_now=True)
    clock.advance(10)
    bar.update(SelfPlayPhaseStats(moves=3000, positions=2564, games=100, game_moves=2564))
    assert "| 2,564 positions (target 1,000 reached) |" in bar.text()
    assert bar.text().endswith("00:10, ~00:00 left")


def test_tensorboard_gets_a_layout_that_puts_strength_and_losses_first(tmp_path):
    """TensorBoard's Scalars tab opens on perf/ (alphabetical, and eval/ comes only with the
    first evaluation): the run's Custom Scalars layout opens on strength, then the losses."""
    import re

    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.custom_scalar import layout_pb2

    from azshogi.train.monitor import Monitor

    Monitor(tmp_path, purge_step=None, show_progress=False).close()
    (events,) = tmp_path.glob("events.out.tfevents.*")
    layouts = [layout_pb2.Layout.FromString(value.tensor.string_val[0])
               for event in EventFileLoader(str(events)).Load() if event.HasField("summary")
               for value in event.summary.value if value.tag == "custom_scalars__config__"]
    assert len(layouts) == 1
    categories = layouts[0].category
    patterns = [[tag for chart in c.chart for tag in chart.multiline.tag] for c in categories]
    assert [c.title.split(" ")[0] for c in categories][:2] == ["strength", "losses"]
    for tag in ("eval/rating", "eval/win_rate/greedy"):  # what play/gauntlet.py writes
        assert any(re.search(p, tag) for p in patterns[0]), tag
    assert [t for t in ("train/policy_loss", "train/value_loss") if any(re.search(p, t) for p in patterns[1])] == [
        "train/policy_loss", "train/value_loss"]
