"""Exact resume with something to resume: games in progress at different plies, decisive games,
a replay buffer that has wrapped around, and value targets that use the stored root values.

A run stopped and started again, at a checkpoint or in the middle of a phase, continues exactly
as the run that never stopped: model, optimizer, every random stream, replay contents, games
in progress and every counter but the wall time are equal at every later checkpoint (in process:
exactly reproducible). Each checkpoint also reads back into a fresh Loop as the run left it. All
state is read through resume_helpers.py."""
import functools
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, compose_config
from resume_helpers import (
    RecordingLoop,
    assert_continues,
    assert_same,
    checkpoint_state,
    games_of_driver,
    load_loop,
    run_config,
)

from azshogi.config import to_config

# 90-ply games, adjudicated when a side has a mate in 7: games end at different plies, so the
# games in progress at a checkpoint are mid-way; phases of at least 130 positions against a
# 600-position buffer: it wraps around by the second checkpoint. Root values weigh in the value
# targets, so that they count in training too.
RESUME = ["device=cpu", "rules.max_plies=90", "rules.mate_adjudication_plies=7",
          "loop.positions_per_checkpoint=130", "replay.capacity=600", "train.value_target_root_weight=0.5",
          "loop.keep_checkpoints=10", "eval.every=0", "loop.max_checkpoints=3"]
CHECKPOINTS = [f"ckpt-{k:05d}.pt" for k in range(1, 4)]


@functools.lru_cache(maxsize=None)
def base_config():
    return to_config(compose_config(TINY + RESUME))


def config(root: Path, run: str, resume: str = ""):
    return run_config(base_config(), root, run, resume)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The run that never stops: its root folder and the state it had at each checkpoint."""
    root = tmp_path_factory.mktemp("resume")
    loop = RecordingLoop(config(root, "straight"))
    loop.run()
    assert sorted(loop.written) == CHECKPOINTS
    return root, loop.written


def games_mid_way(state) -> list[int]:
    return sorted(len(g["moves"]) for g in state["selfplay"]["games"] if g["moves"])


def test_the_run_has_something_to_resume(straight):
    _, written = straight
    mid_way = [games_mid_way(written[name]) for name in CHECKPOINTS]
    # Games in progress at several checkpoints, of different lengths.
    assert sum(len(set(plies)) >= 2 for plies in mid_way) >= 2, mid_way
    replays = [written[name]["replay"] for name in CHECKPOINTS]
    # The ring has wrapped around by the second checkpoint; the last still holds positions from
    # before it (a resume from there restores them, and later checkpoints compare them).
    assert replays[1]["total_added"] > len(replays[1]["results"]) > 0
    assert replays[2]["total_added"] - len(replays[2]["results"]) < replays[1]["total_added"]
    assert any((r["results"] != 0).any() for r in replays)  # decisive games, and draws
    assert any((r["results"] == 0).any() for r in replays)
    assert all((r["root_values"] != 0).mean() > 0.9 for r in replays)


def test_each_checkpoint_reads_back_as_the_run_left_it(straight):
    root, written = straight
    for name in CHECKPOINTS:
        assert_same(checkpoint_state(config(root, "straight"), root / "checkpoints" / "straight" / name),
                    written[name], name)


def test_resuming_from_a_checkpoint_continues_exactly(straight):
    root, written = straight
    # Resume from the checkpoint with the most games mid-way.
    start = max(CHECKPOINTS[:-1], key=lambda name: (len(set(games_mid_way(written[name]))), name))
    assert len(set(games_mid_way(written[start]))) >= 2
    resumed = RecordingLoop(config(root, "resumed", resume=str(root / "checkpoints" / "straight" / start)))
    resumed.run()
    later = CHECKPOINTS[CHECKPOINTS.index(start) + 1:]
    assert sorted(resumed.written) == later
    for name in later:
        assert_continues(resumed.written[name], written[name], name)


def test_the_same_command_again_goes_on_from_the_runs_own_newest_not_from_resume(straight):
    """`run=forked resume=<another run's checkpoint>` started again (after a stop, or with a later
    loop.max_checkpoints) continues the forked run, not a second start from the same file."""
    root, written = straight
    cfg = config(root, "forked", resume=str(root / "checkpoints" / "straight" / CHECKPOINTS[0]))
    first = RecordingLoop(replace(cfg, loop=replace(cfg.loop, max_checkpoints=2)))
    first.run()
    assert sorted(first.written) == CHECKPOINTS[1:2]
    again = RecordingLoop(cfg)
    again.run()
    assert sorted(again.written) == CHECKPOINTS[2:]  # checkpoint 2 not made a second time
    assert_continues(again.written[CHECKPOINTS[2]], written[CHECKPOINTS[2]], CHECKPOINTS[2])


def test_resuming_from_stops_mid_selfplay_and_mid_training_continues_exactly(straight):
    root, written = straight
    cfg = config(root, "stopped")
    games = [0] + [written[name]["counters"]["games"] for name in CHECKPOINTS]
    # A self-play phase (after the first) in which several games ended: stop after its first.
    phase = next((k for k in range(2, len(games)) if games[k] - games[k - 1] >= 2), None)
    assert phase, games
    run_dir = root / "checkpoints" / "stopped"
    run_dir.mkdir(parents=True)
    shutil.copy(root / "checkpoints" / "straight" / CHECKPOINTS[phase - 2], run_dir)  # where that phase began
    shutil.copytree(root / "checkpoints" / "straight" / "replay", run_dir / "replay")  # its replay window
    partial = run_dir / f"ckpt-{phase - 1:05d}-partial.pt"
    first = RecordingLoop(cfg, stop_after_games=1)
    first.run()
    assert list(first.written) == [partial.name]
    state = first.written[partial.name]
    assert not state["counters"]["in_training"] and 0 < state["counters"]["positions_since_checkpoint"] < 130
    assert len(games_mid_way(state)) >= 2
    assert_same(checkpoint_state(cfg, partial), state, "mid-selfplay partial")
    # Started again: finishes that self-play phase, stopped after 2 of its 4 training steps.
    second = RecordingLoop(cfg, stop_after_steps=2)
    second.run()
    assert list(second.written) == [partial.name]
    state = second.written[partial.name]
    assert state["counters"]["in_training"] and state["counters"]["phase_steps"] == 2
    assert_same(checkpoint_state(cfg, partial), state, "mid-training partial")
    # Started again: runs to the end, through the same checkpoints as the run that never stopped.
    third = RecordingLoop(cfg)
    third.run()
    assert sorted(third.written) == CHECKPOINTS[phase - 1:]
    log = (root / "logs" / "stopped" / "azshogi.log").read_text()  # that phase's self-play was all before the stop
    straight_log = (root / "logs" / "straight" / "azshogi.log").read_text()
    # its games are counted all the same (kept in the -partial file), as the run that never stopped counted them
    games = re.compile(rf"checkpoint {phase}: step \d+ \| (games \d+ \(\+\d+, mean length \d+, B/W/D [^)]*\))")
    assert games.search(log) and games.search(log)[1] == games.search(straight_log)[1], (log, straight_log)
    assert "| no self-play since the resume |" in log, log
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def games_curve(run: str) -> dict:
        acc = EventAccumulator(str(root / "logs" / run), size_guidance={"scalars": 0})
        acc.Reload()
        return {e.step: e.value for e in acc.Scalars("selfplay/games")}

    step = written[CHECKPOINTS[phase - 1]]["counters"]["train_steps"]
    assert games_curve("stopped")[step] == games_curve("straight")[step] > 0  # no dip to 0 at a stop
    assert not re.search(r"\bnan\b", log), log
    for name in CHECKPOINTS[phase - 1:]:
        assert_continues(third.written[name], written[name], name)


def test_playout_caps_resume_exactly_from_a_stop_mid_selfplay(tmp_path):
    """With cheap searches (their draws from each game's own stream, their moves played but not
    recorded), a run stopped mid-selfplay and started again continues exactly as the run that
    never stopped."""
    pcr = replace(base_config(), selfplay=replace(base_config().selfplay, cheap_search_prob=0.5, cheap_simulations=1),
                  loop=replace(base_config().loop, max_checkpoints=2))

    def cfg(run):
        return replace(pcr, run=run, checkpoint_root=str(tmp_path / "checkpoints"), log_root=str(tmp_path / "logs"))

    straight = RecordingLoop(cfg("straight"))
    straight.run()
    assert sorted(straight.written) == CHECKPOINTS[:2]
    plies = straight.written[CHECKPOINTS[1]]["replay"]["plies"]
    assert (np.diff(plies.astype(np.int64)) > 1).any()  # moves left out of the record
    # Stopped when the second phase's first game ends (its other games are mid-way).
    first = RecordingLoop(cfg("stopped"), stop_after_games=straight.written[CHECKPOINTS[0]]["counters"]["games"] + 1)
    first.run()
    partial = "ckpt-00001-partial.pt"
    assert list(first.written) == [CHECKPOINTS[0], partial]
    state = first.written[partial]
    mid_way = [g for g in state["selfplay"]["games"] if g["moves"]]
    assert len(mid_way) >= 2 and any(len(g["plies"]) < len(g["moves"]) for g in mid_way), mid_way
    assert_same(checkpoint_state(cfg("stopped"), tmp_path / "checkpoints" / "stopped" / partial), state, partial)
    second = RecordingLoop(cfg("stopped"))
    second.run()
    assert list(second.written) == [CHECKPOINTS[1]]
    assert_continues(second.written[CHECKPOINTS[1]], straight.written[CHECKPOINTS[1]], CHECKPOINTS[1])


# --- with worker processes ---

def constant_network(model) -> None:
    """Outputs that do not depend on the position (zero weights into the last layers), hence
    the same to the last bit in any batch: a game then depends only on its own random stream,
    whichever process searches it and whatever it shares a forward pass with."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        model.policy_conv.weight.zero_()
        model.policy_conv.bias.copy_(torch.randn(model.policy_conv.bias.shape, generator=generator))
        model.value_fc2.weight.zero_()
        model.value_fc2.bias.fill_(0.3)


def trajectory(moves, hcps, labels, probs, root_values, results=None) -> dict:
    return {"moves": list(moves), "hcps": np.asarray(hcps), "labels": [np.asarray(x) for x in labels],
            "probs": [np.asarray(x) for x in probs], "root_values": np.asarray(root_values, np.float32),
            "results": None if results is None else np.asarray(results)}


def play(driver, moves: int, cfg) -> dict:
    """Plays until the driver has searched `moves` positions; every game it has seen, finished
    or in progress, by game id."""
    games = {}
    for game in driver.play(until=lambda: driver.totals().moves >= moves):
        r = game.positions
        offsets = r.offsets()
        games[game.game_id] = trajectory(game.record.moves, r.hcps,
                                         [r.labels[offsets[i]:offsets[i + 1]] for i in range(len(r))],
                                         [r.probs[offsets[i]:offsets[i + 1]] for i in range(len(r))], r.root_values,
                                         r.results)
    for g in games_of_driver(driver, cfg)["games"]:
        games[g["game_id"]] = trajectory(g["moves"], g["hcps"], g["labels"], g["probs"], g["root_values"])
    return games


def assert_consistent(games: dict, truth: dict, start: dict, label: str) -> None:
    """Every game both have played agrees with `truth` as far as both go (a game is a function
    of its id: its random stream); every game of `start` (games_of_driver) went on."""
    for game_id, game in games.items():
        if game_id not in truth:
            continue
        other = truth[game_id]
        n = min(len(game["moves"]), len(other["moves"]))
        where = f"{label}: game {game_id}"
        assert_same(game["moves"][:n], other["moves"][:n], f"{where} moves")
        assert_same(game["hcps"][:n], other["hcps"][:n], f"{where} positions")
        assert_same(game["labels"][:n], other["labels"][:n], f"{where} target labels")
        assert_same(game["probs"][:n], other["probs"][:n], f"{where} target probabilities")
        assert_same(game["root_values"][:n], other["root_values"][:n], f"{where} root values")
        if game["results"] is not None and other["results"] is not None:
            assert_same(game["results"], other["results"], f"{where} results")
    for g in start["games"]:
        assert len(games[g["game_id"]]["moves"]) > len(g["moves"]), f"{label}: game {g['game_id']} did not go on"


def test_saved_games_go_on_in_worker_processes_and_back_as_they_would_have(straight):
    """A checkpoint with games mid-way, loaded with two workers, gives back every game as it was
    saved (positions, pending targets, root values, random streams); the workers play them on
    as the same checkpoint plays on in process (the truth), however their moves interleave;
    their own checkpoint, loaded in process, plays on as the truth too. The network is made
    constant, so that batch composition cannot change the last bit of an evaluation."""
    root, written = straight
    cfg = config(root, "workers")
    name = max(CHECKPOINTS, key=lambda n: (len(set(games_mid_way(written[n]))), n))
    saved = written[name]["selfplay"]
    assert len(set(games_mid_way(written[name]))) >= 2
    path = root / "checkpoints" / "straight" / name

    truth_loop = load_loop(cfg, path)
    constant_network(truth_loop.model)
    truth = play(truth_loop.selfplay, 6 * 25, cfg)

    workers = load_loop(cfg, path, num_workers=2)
    constant_network(workers.model)  # the workers' server evaluates this model
    try:
        loaded = games_of_driver(workers.selfplay, cfg)  # shared out to the workers and sent back
        assert_same(loaded["games"], saved["games"], "games through the workers")
        assert loaded["next_game_id"] >= saved["next_game_id"]
        played = play(workers.selfplay, 6 * 10, cfg)
        at_save = games_of_driver(workers.selfplay, cfg)
        back_path = workers.save(partial=True)
    finally:
        workers.selfplay.close()
    assert_consistent(played, truth, saved, "workers")

    back = load_loop(cfg, back_path)
    assert_same(games_of_driver(back.selfplay, cfg)["games"], at_save["games"], "games from the workers")
    constant_network(back.model)
    assert_consistent(play(back.selfplay, 6 * 5, cfg), truth, at_save, "in process after the workers")


def test_resume_never_takes_a_run_back_behind_its_own_newer_checkpoints(straight):
    """`run=straight resume=<its own first checkpoint>` goes on from its newest and says so:
    taken back, its next start would resume from the newer files of the line it left, and the
    work of this one would be lost."""
    from azshogi.train.loop import Loop

    root, _ = straight
    own = root / "checkpoints" / "straight"
    loop = Loop(config(root, "straight", resume=str(own / CHECKPOINTS[0])), show_progress=False)
    try:
        loop.restore()
        assert loop.resumed_from == own / CHECKPOINTS[-1]
        assert f"has a newer checkpoint, {CHECKPOINTS[-1]}, and goes on from it" in loop.resume_note
    finally:
        loop.selfplay.close()


def test_a_stop_after_a_start_from_a_whole_checkpoint_writes_the_phase_records_anew(straight):
    """A -partial file's game records left from another start (a -partial checkpoint moved away,
    say) are not added to: the stopped phase's records are its own games, once each."""
    root, _ = straight
    run_dir = root / "checkpoints" / "records"
    run_dir.mkdir(parents=True)
    shutil.copy(root / "checkpoints" / "straight" / CHECKPOINTS[0], run_dir)
    shutil.copytree(root / "checkpoints" / "straight" / "replay", run_dir / "replay")
    records = root / "logs" / "records" / "hcpe3" / "ckpt-00001-partial.hcpe3"
    records.parent.mkdir(parents=True)
    records.write_bytes(b"left from another start")
    stopped = RecordingLoop(config(root, "records"), stop_after_games=1)
    stopped.run()
    assert list(stopped.written) == ["ckpt-00001-partial.pt"]
    written = records.read_bytes()
    assert written and not written.startswith(b"left from another start")
    # Resumed from that -partial file and stopped again in the same phase: its records go on
    again = RecordingLoop(config(root, "records"), stop_after_games=1)
    again.run()
    assert list(again.written) == ["ckpt-00001-partial.pt"]
    more = records.read_bytes()
    assert len(more) > len(written) and more.startswith(written)


def test_a_stop_killed_between_its_records_and_its_checkpoint_leaves_no_game_twice(straight, monkeypatch):
    """Ctrl-C; resumed and stopped again, killed after the records were appended and before the
    checkpoint (kill -9, power loss); resumed from the first stop and stopped at once, before any
    game ended; resumed and stopped: the killed save's games were appended a second time. A
    -partial file keeps its records' length."""
    from azshogi.formats.dlshogi import read_hcpe3
    from azshogi.train import loop as loop_module

    root, _ = straight
    records = root / "logs" / "killed" / "hcpe3" / "ckpt-00000-partial.hcpe3"
    RecordingLoop(config(root, "killed"), stop_after_games=1).run()
    written = loop_module.ckpt.save

    def killed(*args, **kwargs):
        raise SystemExit("killed")

    with monkeypatch.context() as patch:
        patch.setattr(loop_module.ckpt, "save", killed)
        with pytest.raises(SystemExit):
            RecordingLoop(config(root, "killed"), stop_after_games=1).run()
    assert loop_module.ckpt.save is written
    at_once = RecordingLoop(config(root, "killed"))  # stopped again before any game finished
    at_once.stop_requested = True
    at_once.run()
    assert list(at_once.written) == ["ckpt-00000-partial.pt"]
    last = RecordingLoop(config(root, "killed"), stop_after_games=1)
    last.run()
    assert list(last.written) == ["ckpt-00000-partial.pt"]
    assert len(read_hcpe3(records)) == last.counters.games  # each finished game once


def test_a_resume_with_fewer_actors_says_how_many_of_its_games_go_on(straight, capsys):
    """A checkpoint of more games in progress than the resumed run plays (fewer actors, or a
    cluster's checkpoint on one machine): the start line said all were restored."""
    root, _ = straight
    RecordingLoop(config(root, "fewer"), stop_after_games=1).run()
    cfg = config(root, "fewer")
    fewer = replace(cfg, selfplay=replace(cfg.selfplay, num_actors=2))
    capsys.readouterr()
    RecordingLoop(fewer, stop_after_games=1).run()
    assert "(2 of the 6 games in progress restored: selfplay.num_actors plays no more here" in \
        capsys.readouterr().err


def test_a_second_ctrl_c_while_the_checkpoint_is_written_waits_for_it(straight, monkeypatch):
    """The stop's checkpoint and its game records are written whole: a second Ctrl-C that comes
    while they are (which otherwise quits at once) is told to wait, and the run stops after."""
    import os
    import signal

    from azshogi.train import loop as loop_module

    root, _ = straight
    written = loop_module.ckpt.save

    def interrupted_save(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, in the middle of the writing
        return written(*args, **kwargs)

    monkeypatch.setattr(loop_module.ckpt, "save", interrupted_save)
    stopped = RecordingLoop(config(root, "second-ctrl-c"), stop_after_games=1)
    stopped.run()  # no KeyboardInterrupt
    assert list(stopped.written) == ["ckpt-00000-partial.pt"]
    assert (root / "logs" / "second-ctrl-c" / "hcpe3" / "ckpt-00000-partial.hcpe3").stat().st_size > 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_phase_stopped_after_its_last_step_says_it_had_no_training_since_the_resume(straight):
    root, written = straight
    cfg = config(root, "last-step")
    run_dir = root / "checkpoints" / "last-step"
    run_dir.mkdir(parents=True)
    shutil.copy(root / "checkpoints" / "straight" / CHECKPOINTS[0], run_dir)
    shutil.copytree(root / "checkpoints" / "straight" / "replay", run_dir / "replay")
    steps = cfg.loop.steps_per_checkpoint
    first = RecordingLoop(cfg, stop_after_steps=steps)  # the stop comes with the phase's last step
    first.run()
    (state,) = first.written.values()
    assert state["counters"]["in_training"] and state["counters"]["phase_steps"] == steps
    RecordingLoop(replace(cfg, loop=replace(cfg.loop, max_checkpoints=2))).run()
    log = (root / "logs" / "last-step" / "azshogi.log").read_text()
    assert "| no training step since the resume |" in log and not re.search(r"\bnan\b", log), log
