"""The ladder (play/ladder.py): its rating arithmetic on known results, the rungs chosen around
a rating, and a rung that is missing or crashes leaving the others to be played."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import docs_tool

from azshogi.play import ladder
from azshogi.play.elo import elo_of_score, estimate
from azshogi.play.ladder import Pairing, Rung, Score, fit_ratings, nearest_rungs, play_ladder, rate
from azshogi.play.players import RandomPlayer
from azshogi.play.specs import make_player
from azshogi.shogi.rules import Rules


def test_one_rung_gives_its_rating_plus_the_matchs_elo_difference():
    for wins, losses, draws in ((60, 30, 10), (10, 80, 10), (50, 50, 0)):
        r = rate([Score(300.0, wins, losses, draws)])
        assert r.rating == pytest.approx(300.0 + estimate(wins, losses, draws).elo, abs=0.01)
        assert not r.clipped and r.games == wins + losses + draws


def test_a_perfect_score_is_clipped_to_a_finite_rating_and_says_so():
    r = rate([Score(100.0, 20, 0, 0)])
    assert r.clipped and math.isfinite(r.rating)
    assert r.rating == pytest.approx(100.0 + elo_of_score(19.5 / 20), abs=0.01)  # as play/elo clips one match
    zero = rate([Score(100.0, 0, 20, 0)])
    assert zero.clipped and zero.rating == pytest.approx(100.0 - elo_of_score(19.5 / 20), abs=0.01)


def test_even_results_against_two_rungs_rate_between_them():
    r = rate([Score(0.0, 10, 10, 0), Score(400.0, 10, 10, 0)])
    assert r.rating == pytest.approx(200.0, abs=0.01)
    # Winning everything against the weak rung and nothing against the strong one: in between.
    r = rate([Score(0.0, 20, 0, 0), Score(800.0, 0, 20, 0)])
    assert 0.0 < r.rating < 800.0 and r.rating == pytest.approx(400.0, abs=0.01)


def test_the_rating_is_the_maximum_likelihood_rating():
    scores = [Score(0.0, 18, 1, 1), Score(640.0, 9, 9, 2), Score(900.0, 3, 15, 2)]
    r = rate(scores)

    def log_likelihood(x):
        return sum(s.points * math.log(ladder.expected_score(x, s.rating))
                   + (s.games - s.points) * math.log(1 - ladder.expected_score(x, s.rating)) for s in scores)

    assert log_likelihood(r.rating) > log_likelihood(r.rating + 5) and log_likelihood(r.rating) > log_likelihood(
        r.rating - 5)
    # More games, a smaller margin
    assert rate([Score(s.rating, 4 * s.wins, 4 * s.losses, 4 * s.draws) for s in scores]).margin == pytest.approx(
        r.margin / 2, rel=0.02)
    with pytest.raises(ValueError):
        rate([])


def test_fitted_ratings_reproduce_a_known_scale():
    # Games drawn from known ratings (expected scores, in whole games): the fit finds them again.
    truth = {"random": 0.0, "a": 300.0, "b": 500.0, "c": 900.0}
    pairings = []
    names = list(truth)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            p = ladder.expected_score(truth[first], truth[second])
            wins = round(1000 * p)
            pairings.append(Pairing(first, second, wins, 1000 - wins, 0))
    fitted = fit_ratings(pairings)
    assert fitted["random"].rating == 0.0
    for name in ("a", "b", "c"):
        assert fitted[name].rating == pytest.approx(truth[name], abs=3.0)


def test_a_long_ladder_is_fitted_to_its_end():
    # A chain of 16 players 250 Elo apart, each playing only its neighbours (as the ladder's
    # calibration does): the fit reaches the top (a fit stopped early leaves it hundreds short).
    names = ["random"] + [f"p{i}" for i in range(1, 16)]
    pairings = []
    for low, high in zip(names, names[1:]):
        wins = round(100 * ladder.expected_score(0.0, 250.0))
        pairings.append(Pairing(low, high, wins, 100 - wins, 0))
    fitted = fit_ratings(pairings)
    step = 400.0 * math.log10((100 - wins) / wins)  # 252 Elo: the whole games' score
    for i, name in enumerate(names):
        assert fitted[name].rating == pytest.approx(step * i, abs=0.5)
    assert fitted["p15"].margin > fitted["p1"].margin  # farther from the anchor, less sure
    with pytest.raises(ValueError, match="not joined"):
        fit_ratings(pairings + [Pairing("x", "y", 3, 1, 0)])


def test_nearest_rungs_are_consecutive_and_around_the_rating():
    rungs = [Rung(f"r{i}", "random", 200.0 * i) for i in range(6)]
    assert [r.name for r in nearest_rungs(None, 3, rungs)] == ["r0", "r1", "r2"]
    assert [r.name for r in nearest_rungs(610.0, 3, rungs)] == ["r2", "r3", "r4"]
    assert [r.name for r in nearest_rungs(5000.0, 2, rungs)] == ["r4", "r5"]
    assert [r.name for r in nearest_rungs(-50.0, 9, rungs)] == [f"r{i}" for i in range(6)]


def test_every_rung_is_a_player_spec_and_ratings_rise_along_the_ladder():
    ratings = [r.rating for r in ladder.RUNGS]
    assert ratings == sorted(ratings) and ladder.RUNGS[0].name == "random" and ratings[0] == 0.0
    with pytest.raises(ValueError, match="unknown ladder rung"):
        ladder.rung("stockfish")


FAKE_ENGINE = """#!/bin/sh
while read line; do
  case "$line" in
    usi) echo "id name fake"; echo "option name UCI_Variant type string default shogi";
         echo "option name Threads type spin default 1 min 1 max 1";
         echo "option name Skill Level type spin default 20 min -20 max 20"; echo usiok;;
    isready) echo readyok;;
    go*) exit 1;;
    quit) exit 0;;
  esac
done
"""


def test_a_missing_or_crashing_rung_is_left_out_with_a_note_and_the_others_are_played(monkeypatch, tmp_path):
    missing = Rung("missing", "fairy", 700.0, skill=0, nodes=10)
    crashing = Rung("crashing", "fairy", 800.0, skill=0, nodes=10)
    monkeypatch.setattr(ladder, "_BY_NAME", {**ladder._BY_NAME, "missing": missing, "crashing": crashing})
    monkeypatch.setattr(ladder, "find_engine", lambda command=ladder.FAIRY_STOCKFISH: None)
    notes = []
    result = play_ladder(RandomPlayer(1, "me"), [ladder.rung("random"), missing], 2, rules=Rules(max_plies=8),
                         say=notes.append)
    assert set(result.matches) == {"random"} and set(result.skipped) == {"missing"}
    assert len(notes) == 1 and "missing" in notes[0] and "apt-get install fairy-stockfish" in notes[0]
    assert result.rating is not None

    # An engine that starts, then dies at every `go`: each such game is lost on time and the engine
    # started again, until its fourth failure leaves the match out; the ladder goes on.
    fake = tmp_path / "fake-engine"
    fake.write_text(FAKE_ENGINE)
    fake.chmod(0o755)
    monkeypatch.setattr(ladder, "find_engine", lambda command=ladder.FAIRY_STOCKFISH: str(fake))
    notes.clear()
    result = play_ladder(RandomPlayer(1, "me"), [crashing, ladder.rung("random")], 4, rules=Rules(max_plies=8),
                         say=notes.append)
    assert set(result.matches) == {"random"} and "failed" in result.skipped["crashing"]
    assert "the match ends" in result.skipped["crashing"]
    assert len(notes) == 1 and "crashing" in notes[0] and "during its match" in notes[0]


def test_each_fairy_rung_is_named_by_its_settings_and_plays_them(monkeypatch):
    started = []

    class Recorder:  # stands in for the engine: what the rung would start and ask
        def __init__(self, command, options, go, name):
            started.append((options["Skill Level"], go, name))

    monkeypatch.setattr(ladder, "UsiPlayer", Recorder)
    monkeypatch.setattr(ladder, "find_engine", lambda command=ladder.FAIRY_STOCKFISH: "/usr/games/fairy-stockfish")
    fairy = [r for r in ladder.RUNGS if r.needs_engine]
    for r in fairy:
        assert ladder.fairy_settings(r.name) == (r.skill, r.nodes)
        make_player(f"ladder:{r.name}", rules=Rules())
    assert started == [(str(r.skill), f"nodes {r.nodes}", r.name) for r in fairy]
    assert ladder.fairy_settings("sf-3n5k") == (-3, 5000) and ladder.fairy_settings("sf3", 200) == (3, 200)
    assert ladder.fairy_settings("greedy") is None and ladder.fairy_settings("sf20n80") is None


def test_stronger_settings_rate_higher_up_to_full_strength():
    fairy = [r for r in ladder.RUNGS if r.needs_engine]
    for a in fairy:
        for b in fairy:
            if a != b and a.skill <= b.skill and a.nodes <= b.nodes:
                assert a.rating < b.rating, (a, b)
    top = ladder.RUNGS[-1]
    assert top.skill == 20 and top.nodes > ladder.SF_NODES  # Skill Level 20 is full strength, then more nodes
    assert ladder.rung("sf20").nodes == ladder.SF_NODES


def test_ratings_at_the_top_of_the_ladder():
    *_, below, top = ladder.RUNGS
    # Even against both: halfway between them; a perfect score against the top: a bound above it, said so.
    even = rate([Score(below.rating, 10, 10, 0), Score(top.rating, 10, 10, 0)])
    assert even.rating == pytest.approx((below.rating + top.rating) / 2, abs=0.01) and not even.clipped
    beyond = rate([Score(top.rating, 20, 0, 0)])
    assert beyond.clipped and beyond.rating == pytest.approx(top.rating + elo_of_score(19.5 / 20), abs=0.01)
    # A rating past the top (or just under it) meets the top rungs; one in the middle, the rungs around it.
    assert nearest_rungs(beyond.rating, 3) == list(ladder.RUNGS[-3:])
    middle = ladder.rung("sf7")
    assert middle in nearest_rungs(middle.rating + 20, 3)
    chosen = nearest_rungs(middle.rating + 20, 3)
    assert chosen[0].rating < middle.rating + 20 < chosen[-1].rating


def test_the_calibration_adds_a_pairings_games_to_it_either_way_round():
    merged = docs_tool("docs/tools/ladder_calibration.py").merged
    kept = [Pairing("a", "b", 3, 1, 0), Pairing("b", "c", 0, 4, 0)]
    out = merged(kept, [Pairing("b", "a", 2, 1, 1), Pairing("c", "d", 1, 1, 0), Pairing("b", "c", 1, 0, 0)])
    assert out == [Pairing("a", "b", 4, 3, 1), Pairing("b", "c", 1, 4, 0), Pairing("c", "d", 1, 1, 0)]


def test_the_calibrations_new_rounds_open_after_the_rounds_it_has_recorded():
    """Fairy-Stockfish at Skill Level 20 with a node limit replays a game from the same opening, so
    a calibration that adds games to recorded ones must draw its openings from rounds not yet played."""
    next_round = docs_tool("docs/tools/ladder_calibration.py").next_round
    kept = [Pairing("sf20", "sf20n40k", 4, 28, 0), Pairing("sf7", "sf20", 5, 30, 1)]
    assert next_round(kept, "sf20", "sf20n40k", 4) == 8  # 32 games recorded: rounds 0-7 played
    assert next_round(kept, "sf20n40k", "sf20", 4) == 8  # either way round
    assert next_round(kept, "sf20", "sf7", 4) == 9  # 36 games: a part-round counts as played
    assert next_round(kept, "sf20n40k", "sf20n80k", 4) == 0  # none yet: the first round


def test_the_calibration_takes_a_files_games_out_once_and_never_below_none():
    tool = docs_tool("docs/tools/ladder_calibration.py")
    both_runs = [Pairing("a", "b", 6, 2, 0), Pairing("b", "c", 1, 7, 2)]  # two runs, each from one file
    started_from = [Pairing("b", "a", 1, 3, 0), Pairing("b", "c", 1, 3, 1)]
    assert tool.less(both_runs, started_from) == [Pairing("a", "b", 3, 1, 0), Pairing("b", "c", 0, 4, 1)]
    assert tool.less([Pairing("a", "b", 1, 0, 0)], [Pairing("a", "b", 1, 0, 0)]) == []  # none left: dropped
    with pytest.raises(ValueError, match="a:b"):
        tool.less([Pairing("a", "b", 1, 0, 0)], [Pairing("a", "b", 0, 1, 0)])
    with pytest.raises(ValueError, match="c:d"):
        tool.less([Pairing("a", "b", 1, 0, 0)], [Pairing("c", "d", 1, 0, 0)])


def test_the_calibrated_rungs_from_skill_level_2_up_stand_apart_beyond_their_margins():
    """The ladder's games (docs/ladder-calibration.json) place each rung from Skill Level 2 to the
    top above the one below it by more than their two 95% margins together (that play/ladder.py
    holds the ratings they give, test_docs checks with the documented refit)."""
    tool = docs_tool("docs/tools/ladder_calibration.py")
    games = Path(__file__).resolve().parents[1] / "docs" / "ladder-calibration.json"
    fitted = fit_ratings(tool.read_pairings(str(games)))
    top = ladder.RUNGS[[r.name for r in ladder.RUNGS].index("sf2"):]
    assert top[-1].skill == 20
    for below, above in zip(top, top[1:]):
        low, high = fitted[below.name], fitted[above.name]
        assert low.rating + low.margin < high.rating - high.margin, (below.name, low, above.name, high)
