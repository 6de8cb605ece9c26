"""Resignation in self-play (selfplay.resign_threshold): who resigns and when, the result going to
the other side (value targets, KIF, hcpe3), the played-out share and its false resignations,
reproducibility and resume, the counts reaching the loop's totals and TensorBoard, and the
settings' checks (opening_random_plies' too)."""
from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

import cshogi
import numpy as np
import pytest
from conftest import FunctionEvaluator, compose_config, docs_tool, play_games
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_training_targets import HELPMATE

from azshogi.config import ConfigError, to_config, validate
from azshogi.formats.dlshogi import Hcpe3Writer, read_hcpe3
from azshogi.formats.records import kif_text
from azshogi.search import GumbelSearch
from azshogi.search.result import BatchSearchResult
from azshogi.selfplay.actors import SelfPlay
from azshogi.selfplay.drivers import SelfPlayTotals
from azshogi.selfplay.resignation import (
    MIN_SUPPORT,
    Resignation,
    false_resignations,
    next_threshold,
    prune,
    resign_levels,
    suggested_threshold,
    tally,
)
from azshogi.shogi import features
from azshogi.shogi.rules import Rules, Termination
from azshogi.train.monitor import Monitor
from azshogi.train.phases import PhaseTimes, SelfPlayPhaseStats, TrainPhaseStats

BLACK, WHITE = cshogi.BLACK, cshogi.WHITE


class ValueSearch:
    """Stands in for the search: plays `script[ply]` (USI) or, past the script, a uniformly random
    legal move from the game's stream; reports a uniform policy and the root value `value(side
    to move, ply)`."""

    num_simulations = 8

    def __init__(self, value: Callable[[int, int], float], script: Optional[list[str]] = None):
        self.value, self.script = value, script or []

    def run(self, boards, plies, rngs, simulations=None) -> BatchSearchResult:
        a, k = len(boards), features.MAX_LEGAL_MOVES
        edge_moves, labels = np.zeros((a, k), np.int64), np.zeros((a, k), np.int32)
        policy, chosen, num_edges = np.zeros((a, k), np.float32), np.zeros(a, np.int64), np.zeros(a, np.int64)
        values = np.zeros(a, np.float32)
        for i, (board, ply) in enumerate(zip(boards, plies.tolist())):
            moves, move_labels = features.legal_moves_and_labels(board)
            n = num_edges[i] = len(moves)
            edge_moves[i, :n], labels[i, :n], policy[i, :n] = moves, move_labels, 1 / n
            chosen[i] = (board.move_from_usi(self.script[ply]) if ply < len(self.script)
                         else moves[int(rngs[i].integers(n))])
            values[i] = self.value(board.turn, ply)
        return BatchSearchResult(chosen, edge_moves, labels, num_edges, policy, np.zeros((a, k), np.float32), values)


def losing(side: int) -> Callable[[int, int], float]:
    """`side` sees a win rate of 0.1 at every move, the other side 0.9."""
    return lambda turn, ply: -0.8 if turn == side else 0.8


def play(selfplay: SelfPlay, games: int, steps: int = 400) -> list:
    finished: list = []
    for _ in range(steps):
        finished += selfplay.step()
        if len(finished) >= games:
            return finished
    raise AssertionError(f"{len(finished)} games finished, {games} expected")


@pytest.mark.parametrize("resigner", [BLACK, WHITE])
def test_a_resigned_game_goes_to_the_other_side(resigner, tmp_path):
    # Resigning at its second full search: black before ply 2, white before ply 3.
    sp = SelfPlay(ValueSearch(losing(resigner)), Rules(), 1, resignation=Resignation(0.2, 2, 0.0))
    [game] = play(sp, 1)
    record, positions = game.record, game.positions
    assert record.termination == Termination.RESIGN and record.winner == 1 - resigner
    assert len(record) == 2 + resigner  # the resigner's turn: it made no move
    assert positions.plies.tolist() == list(range(len(record)))  # the resigned position is none
    turns = positions.plies % 2
    assert (positions.results == np.where(turns == resigner, -1, 1)).all()  # the resigner's side loses
    assert (sp.resigned, sp.resign_playouts, sp.false_resigns) == (1, 0, 0)
    winner = "先手" if resigner == WHITE else "後手"
    assert kif_text(record.moves, record.termination).splitlines()[-1] == f"まで{len(record)}手で{winner}の勝ち"
    writer = Hcpe3Writer()
    writer.add(game)
    [stored] = read_hcpe3(writer.flush(tmp_path / "g.hcpe3"))
    assert (stored.termination, stored.winner) == (Termination.RESIGN, 1 - resigner)


def test_a_run_below_the_threshold_must_be_unbroken():
    # Black's win rate: low, high, low, low: it resigns at its fourth move (ply 6), not earlier.
    black = {0: -0.8, 2: 0.0, 4: -0.8, 6: -0.8}
    sp = SelfPlay(ValueSearch(lambda turn, ply: black.get(ply, 0.5)), Rules(), 1,
                  resignation=Resignation(0.2, 2, 0.0))
    [game] = play(sp, 1)
    assert game.record.termination == Termination.RESIGN and len(game.record) == 6


@pytest.mark.parametrize("loser, false_resigns", [(BLACK, 1), (WHITE, 0)])
def test_a_played_out_game_counts_a_false_resignation_when_the_would_be_resigner_did_not_lose(loser,
                                                                                               false_resigns):
    # HELPMATE: black mates white at ply 7, whoever thought they were losing.
    sp = SelfPlay(ValueSearch(losing(loser), HELPMATE), Rules(), 1, resignation=Resignation(0.2, 2, 1.0))
    [game] = play(sp, 1)
    assert game.record.termination == Termination.CHECKMATE and game.record.winner == BLACK
    assert (sp.resigned, sp.resign_playouts, sp.false_resigns) == (0, 1, false_resigns)


def test_with_share_one_no_game_resigns_and_every_would_be_resignation_is_counted():
    # Black always sees itself losing, and games end by the ply limit: each one a false resignation.
    sp = SelfPlay(ValueSearch(losing(BLACK)), Rules(max_plies=8), 4, resignation=Resignation(0.2, 2, 1.0))
    games = play(sp, 8)
    assert all(g.record.termination != Termination.RESIGN for g in games)
    assert (sp.resigned, sp.resign_playouts, sp.false_resigns) == (0, len(games), len(games))


def test_with_share_zero_nothing_is_played_out_and_a_share_plays_out_about_its_share():
    sp = SelfPlay(ValueSearch(losing(BLACK)), Rules(max_plies=8), 4, resignation=Resignation(0.2, 2, 0.0))
    games = play(sp, 8)
    assert all(g.record.termination == Termination.RESIGN for g in games)
    assert (sp.resigned, sp.resign_playouts, sp.false_resigns) == (len(games), 0, 0)
    half = SelfPlay(ValueSearch(losing(BLACK)), Rules(max_plies=8), 8, resignation=Resignation(0.2, 2, 0.5))
    games = play(half, 200)
    assert half.resigned + half.resign_playouts == len(games) and 0.35 < half.resign_playouts / len(games) < 0.65


def test_off_draws_nothing_and_resigns_nothing():
    a = SelfPlay(ValueSearch(losing(BLACK)), Rules(max_plies=8), 2, seed=4, resignation=Resignation(0.0, 1, 0.5))
    b = SelfPlay(ValueSearch(losing(BLACK)), Rules(max_plies=8), 2, seed=4)
    assert [x.record for x in play(a, 4)] == [y.record for y in play(b, 4)]
    assert (a.resigned, a.resign_playouts) == (0, 0)


def hashed_value(f1, f2):
    """A win rate in [0, 0.9] that depends on the position: some games resign, some do not."""
    n = len(f1)
    return np.zeros((n, 2187), np.float32), (f1.reshape(n, -1).sum(axis=1) % 10 / 10).astype(np.float32)


def gumbel_selfplay(seed: int, actors: int = 4) -> SelfPlay:
    rules = Rules(max_plies=24)
    search = GumbelSearch(FunctionEvaluator(hashed_value), rules, actors, num_simulations=4,
                          max_num_considered_actions=4)
    return SelfPlay(search, rules, actors, seed=seed, resignation=Resignation(0.5, 2, 0.5))


def summary(games: list, sp: SelfPlay) -> tuple:
    return [(g.game_id, g.record) for g in games], (sp.resigned, sp.resign_playouts, sp.false_resigns)


def test_reproducible_with_a_seed_and_across_a_resume():
    a, b = gumbel_selfplay(1), gumbel_selfplay(1)
    first = play(a, 3)
    assert summary(first, a) == summary(play(b, 3), b)
    # Resumed from a's games in progress, the played-out games and their would-be resigners go on.
    resumed = gumbel_selfplay(1)
    resumed.load_state_dict(a.state_dict())
    assert [(x.play_out, x.would_resign, x.low) for x in resumed.actors] == \
        [(x.play_out, x.would_resign, x.low) for x in a.actors]
    counts = (a.resigned, a.resign_playouts, a.false_resigns)
    later = play(a, 8)
    later_resumed = play(resumed, 8)
    assert [(g.game_id, g.record) for g in later] == [(g.game_id, g.record) for g in later_resumed]
    assert (a.resigned - counts[0], a.resign_playouts - counts[1], a.false_resigns - counts[2]) == \
        (resumed.resigned, resumed.resign_playouts, resumed.false_resigns)
    assert a.resigned > 0 and a.resign_playouts > 0  # the scenario has both
    # The played-out games measure what self-play counted: at its own threshold, the rule's
    # counts are its would-be resignations and false ones.
    games = first + later
    samples = [(g.resign_levels, g.record.winner) for g in games if g.resign_levels is not None]
    assert len(samples) == sum(g.record.termination != Termination.RESIGN for g in games)
    would, falsely = false_resignations(samples, np.array([a.resignation.threshold]))
    assert (int(would[0]), int(falsely[0])) == (a.resign_playouts, a.false_resigns)
    other = gumbel_selfplay(2)
    assert summary(play(other, 3), other)[0] != summary(first, a)[0]


def test_the_counts_reach_tensorboard(tmp_path):
    monitor = Monitor(tmp_path, None, show_progress=False)
    stats = SelfPlayPhaseStats(play=SelfPlayTotals(resigned=7, resign_playouts=4, false_resigns=1),
                               resign_samples=[(np.array([[0.3, WHITE]]), BLACK)])
    monitor.checkpoint(10, stats, TrainPhaseStats(), 0, 0, 0.0, 0.0, PhaseTimes({}, 1.0))
    monitor.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("selfplay/resigned")] == [(10, 7)]
    assert [(s.step, s.value) for s in acc.Scalars("selfplay/false_resign_rate")] == [(10, 0.25)]
    assert [(s.step, s.value) for s in acc.Scalars("selfplay/resign_threshold_suggested")] == [(10, 0.5)]
    assert stats.resign_words() == ", resigned 7, false 1/4, 5%: 0.50" and SelfPlayPhaseStats().resign_words() == ""


def test_the_counts_come_back_from_the_worker_processes(tiny_config):
    # A random network's win rates stay near 0.5: after the random opening's k plies, the side to
    # move resigns at its second move (ply k + 2) unless the game is played out.
    cfg = tiny_config("selfplay.num_workers=1", "selfplay.resign_threshold=0.9", "selfplay.resign_moves=2",
                      "selfplay.resign_playout_share=0.5", "rules.max_plies=12", "selfplay.opening_random_plies=3")
    finished, totals = play_games(cfg, 10)
    resigned = [g for g in finished if g.record.termination == Termination.RESIGN]
    assert resigned
    for game in resigned:
        k = int(game.positions.plies[0])
        assert game.positions.plies.tolist() == [k, k + 1] and len(game.record) == k + 2
        assert game.record.winner == 1 - k % 2
    assert len({int(g.positions.plies[0]) for g in finished}) > 1  # the openings reach the workers too
    assert totals.resigned >= len(resigned) and totals.resign_playouts > 0
    assert totals.resigned + totals.resign_playouts >= len(finished)


def test_a_new_threshold_reaches_the_worker_processes(tiny_config):
    # Automatic, at 0: nobody resigns; told 0.9 while paused, the workers' games resign (an
    # untrained network's win rates stay near 0.5).
    from azshogi.train.loop import build_components

    cfg = tiny_config("selfplay.num_workers=1", "selfplay.resign_target=0.05", "selfplay.resign_moves=2",
                      "selfplay.resign_playout_share=0.01", "rules.max_plies=12")
    driver = build_components(cfg).selfplay
    try:
        before = [g for g in driver.play(until=lambda: driver.totals().moves >= 30)]
        assert driver.totals().resigned == 0 and all(g.record.termination != Termination.RESIGN for g in before)
        driver.set_resign_threshold(0.9)
        after: list = []
        for game in driver.play(until=lambda: len(after) >= 6):
            after.append(game)
        assert driver.totals().resigned > 0 and any(g.record.termination == Termination.RESIGN for g in after)
    finally:
        driver.close()


def test_bad_settings_name_the_key():
    cfg = to_config(compose_config([]))
    for key, value, message in [
        ("resign_threshold", 1.0, r"selfplay\.resign_threshold=1\.0: must be a win rate in \[0, 1\)"),
        ("resign_threshold", -0.1, r"selfplay\.resign_threshold=-0\.1: must be a win rate"),
        ("resign_moves", 0, r"selfplay\.resign_moves=0: must be >= 1"),
        ("resign_playout_share", 1.5, r"selfplay\.resign_playout_share=1\.5: must be in \[0, 1\]"),
        ("resign_target", 1.0, r"selfplay\.resign_target=1\.0: must be a share of false resignations in \[0, 1\)"),
        ("resign_window", 0, r"selfplay\.resign_window=0: must be >= 1"),
        ("opening_random_plies", -1, r"selfplay\.opening_random_plies=-1: must be >= 0"),
    ]:
        with pytest.raises(ConfigError, match=message):
            validate(replace(cfg, selfplay=replace(cfg.selfplay, **{key: value})))
    with pytest.raises(ConfigError, match=r"resign_playout_share=0\.0: must be > 0 with selfplay\.resign_target"):
        validate(replace(cfg, selfplay=replace(cfg.selfplay, resign_target=0.05, resign_playout_share=0.0)))
    with pytest.raises(ConfigError, match=r"resign_threshold=0\.6: must be <= 0\.5 with selfplay\.resign_target"):
        validate(replace(cfg, selfplay=replace(cfg.selfplay, resign_target=0.05, resign_threshold=0.6)))


def test_where_each_side_would_have_resigned():
    # Win rates by ply: black 0.1, 0.3, 0.05 (plies 0, 2, 4); white 0.9, 0.2, 0.1 (plies 1, 3, 5).
    win_rates = np.array([0.1, 0.9, 0.3, 0.2, 0.05, 0.1])
    levels = resign_levels(np.arange(6), 2 * win_rates - 1, moves=2)
    # A run of two own moves ends at plies 2, 3, 4, 5; each resigns above the run's highest win rate.
    assert np.allclose(levels, [[0.3, BLACK], [0.9, WHITE], [0.3, BLACK], [0.2, WHITE]])
    assert resign_levels(np.arange(3), np.zeros(3), moves=2).tolist() == [[0.5, BLACK]]


def test_the_suggested_threshold_keeps_false_resignations_under_five_percent():
    true = [(np.array([[0.3, WHITE]]), BLACK)] * 20  # white resigns above 0.3 and loses
    false = (np.array([[0.1, BLACK]]), BLACK)  # black would resign above 0.1, and wins
    assert suggested_threshold(true) == 0.5
    # One false of 1 would-be resignation above 0.1 (over 5%); 1 of 21 above 0.3 (under 5%) is not
    # reached: every lower threshold must keep the rate too.
    assert suggested_threshold(true + [false]) == 0.1
    draw = (np.array([[0.4, WHITE]]), None)  # a draw: a false resignation
    would, falsely = false_resignations(true + [draw], np.array([0.3, 0.31, 0.41]))
    assert would.tolist() == [0, 20, 21] and falsely.tolist() == [0, 0, 1]
    assert suggested_threshold([]) is None


# --- the automatic threshold (selfplay.resign_target) ---

def counts_of(samples: list, checkpoint: int = 1) -> dict:
    counts: dict = {}
    for levels, win in samples:
        tally(counts, checkpoint, levels, win)
    return counts


def test_the_automatic_threshold_rises_on_enough_support_and_falls_on_any_evidence():
    true = (np.array([[0.3, WHITE]]), BLACK)  # white would resign above 0.3, and loses
    false = (np.array([[0.1, BLACK]]), BLACK)  # black would resign above 0.1, and wins
    # 19 true would-be resignations up to 0.5 are too few to rise on; 20 are enough.
    assert next_threshold(0.0, counts_of([true] * (MIN_SUPPORT - 1)), 1, 10, 0.05) == (0.0, "")
    risen, words = next_threshold(0.0, counts_of([true] * MIN_SUPPORT), 1, 10, 0.05)
    assert risen == 0.5 and words.startswith("resignation threshold 0.00 -> 0.50")
    # One false resignation above 0.1 brings it down at once, whatever the support.
    fallen, words = next_threshold(0.5, counts_of([true] * MIN_SUPPORT + [false]), 1, 10, 0.05)
    assert fallen == 0.1 and "0.50 -> 0.10" in words and "at 0.11, 1 of 1 false" in words
    # Games of the last `window` checkpoints count: the false one of checkpoint 1 is out of a
    # 2-checkpoint window at checkpoint 3, and the 20 true ones of checkpoint 3 are in.
    counts = {**counts_of([false], 1), **counts_of([true] * MIN_SUPPORT, 3)}
    assert next_threshold(0.0, counts, 3, 3, 0.05)[0] == 0.0
    assert next_threshold(0.0, counts, 3, 2, 0.05)[0] == 0.5
    prune(counts, 3, 2)
    assert sorted(counts) == [3]


def test_a_new_threshold_counts_the_games_in_progress_again():
    # Black sees a win rate of 0.1 at every move. Automatic, at 0: nobody resigns, and the games
    # are drawn to be played out as with any threshold (the same streams).
    auto = SelfPlay(ValueSearch(losing(BLACK)), Rules(max_plies=40), 2, seed=3,
                    resignation=Resignation(0.0, 2, 0.0, auto=True))
    for _ in range(6):
        assert auto.step() == []
    auto.set_resign_threshold(0.2)  # black has been below it for 3 moves: it resigns at its next
    games = auto.step()
    assert [g.record.termination for g in games] == [Termination.RESIGN] * 2 and auto.resigned == 2
    assert all(len(g.record) == 6 and g.record.winner == WHITE for g in games)


def test_a_run_sets_its_threshold_from_its_played_out_games_and_resumes_exactly(tiny_config, tmp_path):
    """A run that starts at 0.5 with an untrained network: its win rates stay near 0.5, so many
    sides resign within a few moves, and the played-out games say that about half of those
    resignations are false: at the first checkpoint the threshold falls. The log and TensorBoard
    say so, the next phase resigns less, and a run resumed at that checkpoint, or stopped in the
    next phase and started again, continues exactly."""
    from resume_helpers import RecordingLoop, assert_continues, load_loop, run_config

    cfg = tiny_config("device=cpu", "eval.every=0", "loop.max_checkpoints=2", "selfplay.resign_threshold=0.5",
                      "selfplay.resign_moves=2", "selfplay.resign_target=0.05", "selfplay.resign_playout_share=0.5",
                      "loop.keep_checkpoints=5", "rules.max_plies=40")
    straight = RecordingLoop(run_config(cfg, tmp_path, "straight"))
    straight.run()
    first, second = (straight.written[f"ckpt-0000{k}.pt"]["counters"] for k in (1, 2))
    assert first["resign_threshold"] < 0.5 and sorted(first["resign_counts"]) == [1]
    log = (tmp_path / "logs" / "straight" / "azshogi.log").read_text()
    assert f"checkpoint 1: resignation threshold 0.50 -> {first['resign_threshold']:.2f}" in log
    assert ", resigned " in log and " at 0.50, false " in log
    acc = EventAccumulator(str(tmp_path / "logs" / "straight"))
    acc.Reload()
    thresholds = [s.value for s in acc.Scalars("selfplay/resign_threshold")]
    assert thresholds[0] == pytest.approx(0.5) and thresholds[1] == pytest.approx(first["resign_threshold"])
    resigned = [s.value for s in acc.Scalars("selfplay/resigned")]
    games = [first["games"], second["games"] - first["games"]]  # each phase's
    assert resigned[1] / games[1] < resigned[0] / games[0]  # a lower threshold resigns fewer games
    tool = docs_tool("docs/tools/resign_counts.py")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        tool.main([str(tmp_path / "checkpoints" / "straight")])
    lines = out.getvalue().splitlines()  # docs/tools/resign_counts.py reads the counts a checkpoint keeps
    assert len(lines) == 2 and lines[0].startswith(f"checkpoint   1: {first['games']} games, threshold "
                                                   f"{first['resign_threshold']:.2f} | false/would at 0.05 ")
    assert lines[0].endswith(f"the rule (5% false): {first['resign_threshold']:.2f} on 0 games")
    one = str(tmp_path / "checkpoints" / "straight" / "ckpt-00001.pt")
    resumed = RecordingLoop(run_config(cfg, tmp_path, "resumed", resume=one))
    resumed.run()
    assert_continues(resumed.written["ckpt-00002.pt"], straight.written["ckpt-00002.pt"], "ckpt-00002.pt")
    # Stopped when the second phase's first game ends, and started again.
    stopped = run_config(cfg, tmp_path, "stopped")
    RecordingLoop(stopped, stop_after_games=first["games"] + 1).run()
    again = RecordingLoop(stopped)
    again.run()
    assert_continues(again.written["ckpt-00002.pt"], straight.written["ckpt-00002.pt"], "ckpt-00002.pt")
    # Resumed with the automatic threshold turned off, it plays at the setting's threshold again.
    fixed = load_loop(replace(cfg, selfplay=replace(cfg.selfplay, resign_target=0.0)), Path(one))
    assert fixed.selfplay.selfplay.resignation.threshold == 0.5 and fixed.resign_threshold() == 0.5
    fixed.selfplay.close()


def test_a_phase_whose_games_all_resign_at_once_stops_the_run_naming_the_settings(tiny_config, tmp_path):
    """Every game resigning at its first move gives no training position: the run would wait for
    loop.positions_per_checkpoint for ever; it stops instead, naming the resignation settings."""
    from azshogi.config import ConfigError
    from azshogi.train.loop import Loop

    cfg = tiny_config("selfplay.resign_threshold=0.99", "selfplay.resign_moves=1", "selfplay.resign_playout_share=0",
                      "selfplay.num_actors=8", f"checkpoint_root={tmp_path}/ck", f"log_root={tmp_path}/logs")
    with pytest.raises(ConfigError, match=r"1000 games in a row ended without a position to train on.*"
                                          r"selfplay\.resign_threshold \(0\.99\)"):
        Loop(cfg, show_progress=False).run()


def test_the_guard_counts_only_this_session_s_games_of_a_resumed_phase(tiny_config, tmp_path):
    """A phase stopped after many games, resumed: its games before the stop had positions, so
    the guard waits for 1,000 games of its own without one, not the first."""
    import torch
    from resume_helpers import RecordingLoop

    from azshogi.config import ConfigError
    from azshogi.formats import checkpoint as ckpt
    from azshogi.train.loop import Loop

    paths = (f"checkpoint_root={tmp_path}/ck", f"log_root={tmp_path}/logs", "selfplay.num_actors=8")
    RecordingLoop(tiny_config(*paths), stop_after_games=1).run()
    (partial,) = ckpt.list_checkpoints(tmp_path / "ck" / "t")
    state = torch.load(partial, weights_only=False)
    state["counters"]["phase_games"]["games"] = 100_000  # a long phase's games before its stop
    torch.save(state, partial)
    resigning = tiny_config(*paths, "selfplay.resign_threshold=0.99", "selfplay.resign_moves=1",
                            "selfplay.resign_playout_share=0")
    with pytest.raises(ConfigError, match=r"self-play: 1000 games in a row ended without a position"):
        Loop(resigning, show_progress=False).run()
