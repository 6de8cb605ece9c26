"""The one engine (play/engine.py) and its one settings table (play/settings.py): each setting
means the same through the USI options, the arena's `search:` options and the loop's eval.*
settings, and reaches the search the engine builds and the moves it plays."""
import io
from dataclasses import replace

import cshogi
import numpy as np
import pytest
from play_helpers import make_tiny_checkpoint, tiny_config, torch_threads

from azshogi.config import EvalConfig, RulesConfig
from azshogi.play.engine import NO_LIMIT, Engine
from azshogi.play.gauntlet import engine_settings as gauntlet_settings
from azshogi.play.models import model_evaluator
from azshogi.play.players import Turn
from azshogi.play.settings import SETTINGS, EngineSettings, from_arena
from azshogi.play.specs import make_player
from azshogi.play.usi import OPTIONS, UsiEngine
from azshogi.shogi.rules import Rules

# A value other than the default for each setting, as text and as the setting's value.
CHANGED = {"nodes": ("7", 7), "batch_size": ("3", 3), "mate_search_nodes": ("0", 0),
           "max_tree_nodes": ("5000", 5000), "resign": ("0.25", 0.25), "max_plies": ("30", 30),
           "c_init": ("3.5", 3.5), "fpu_reduction": ("0.7", 0.7), "policy_temperature": ("1.3", 1.3),
           "temperature": ("0.5", 0.5), "temperature_plies": ("12", 12)}
# What each setting that shapes the search does to the GameSearch an Engine builds.
IN_SEARCH = {"batch_size": lambda s: s.batch_size, "mate_search_nodes": lambda s: s.mate_search_nodes,
             "max_tree_nodes": lambda s: s.max_tree_nodes, "max_plies": lambda s: s.rules.max_plies,
             "c_init": lambda s: s.c_init, "fpu_reduction": lambda s: s.fpu_reduction,
             "policy_temperature": lambda s: s.policy_temperature}


@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("engine") / "tiny.pt")


def test_the_table_covers_every_setting_and_the_usi_options_are_generated_from_it():
    assert set(CHANGED) == {s.field for s in SETTINGS}
    declared = {o.name for o in OPTIONS}
    assert {s.usi for s in SETTINGS} <= declared
    out = io.StringIO()
    UsiEngine(out).handle("usi")
    for s in SETTINGS:  # one declaration per setting, offering EngineSettings' default
        (line,) = [x for x in out.getvalue().splitlines() if x.startswith(f"option name {s.usi} ")]
        assert line == s.usi_declaration(s.default)


@pytest.mark.parametrize("row", SETTINGS, ids=lambda s: s.field)
def test_a_setting_means_the_same_through_every_interface(row):
    text, value = CHANGED[row.field]
    usi_text = str(round(value * 1000)) if row.per_mille else text
    assert getattr(UsiEngine(io.StringIO(), {row.usi: usi_text}).settings(), row.field) == value
    if row.arena:
        assert getattr(from_arena({row.arena: text}), row.field) == value
    if row.eval:
        cfg = tiny_config(eval=EvalConfig(**{row.eval: value}))
        assert getattr(gauntlet_settings(cfg), row.field) == value
    with pytest.raises(ValueError, match="takes"):  # the same refusal everywhere
        UsiEngine(io.StringIO(), {row.usi: "-1"})
    if row.arena:
        with pytest.raises(ValueError, match=f"{row.arena}='-1': takes"):
            from_arena({row.arena: "-1"})


def test_the_loops_eval_settings_fall_back_to_the_runs():
    cfg = tiny_config(rules=RulesConfig(max_plies=40))
    assert (gauntlet_settings(cfg).nodes, gauntlet_settings(cfg).max_plies) == (4, 40)
    assert replace(gauntlet_settings(cfg), nodes=0, max_plies=0) == EngineSettings()  # the rest: defaults


@pytest.mark.parametrize("field", sorted(IN_SEARCH))
def test_each_usi_option_reaches_the_search_the_engine_builds(field, checkpoint):
    """Through the protocol: set the option, isready, and the engine's search has it."""
    row = next(s for s in SETTINGS if s.field == field)
    text, value = CHANGED[field]
    out = io.StringIO()
    engine = UsiEngine(out, {"Checkpoint": str(checkpoint), "Dtype": "fp32", "PolicyTemperature": "1"})
    engine.handle(f"setoption name {row.usi} value {text}")
    engine.handle("isready")
    assert "error" not in out.getvalue()
    assert IN_SEARCH[field](engine.engine.search) == value
    engine.handle(f"setoption name {row.usi} value {row.usi_text(row.default) or '<empty>'}")
    engine.handle("isready")
    default = {"c_init": tiny_config().search.c_init, "max_plies": NO_LIMIT, "policy_temperature": 1.0,
               "batch_size": EngineSettings().max_batch}  # BatchSize auto builds for its most
    assert IN_SEARCH[field](engine.engine.search) == default.get(field, row.default)


@pytest.mark.parametrize("field", sorted(f for f in IN_SEARCH if next(s for s in SETTINGS if s.field == f).arena))
def test_each_arena_option_reaches_the_search_the_engine_builds(field, checkpoint):
    row = next(s for s in SETTINGS if s.field == field)
    text, value = CHANGED[field]
    player = make_player(f"search:{checkpoint}", {"softmax": "1", row.arena: text}, rules=Rules(max_plies=50),
                         dtype="fp32")
    assert isinstance(player, Engine)
    assert IN_SEARCH[field](player.search) == value
    assert player.search.rules.max_plies == 50  # the match's ply limit


def root_visits(spec_options: dict, checkpoint, board=None) -> np.ndarray:
    """The root's visit counts after `search:` with these options chose a move at `board`."""
    board = board or cshogi.Board()
    player = make_player(f"search:{checkpoint}", {"mate": "0", "softmax": "1", **spec_options}, rules=Rules(),
                         dtype="fp32")
    player.new_game(0)
    player.choose([Turn(0, board, 0, None, [])])
    return player.search.report(player.trees[0]).visits


def test_batchsize_auto_is_eight_by_the_clock_and_one_per_16_nodes_at_a_fixed_count():
    auto = EngineSettings()
    assert auto.batch_size == 0 and auto.max_batch == 8 and auto.batch_for(None) == 8
    assert [auto.batch_for(n) for n in (1, 16, 32, 64, 100, 128, 192, 800)] == [1, 1, 2, 4, 6, 8, 8, 8]
    assert EngineSettings(batch_size=3).batch_for(64) == EngineSettings(batch_size=3).batch_for(None) == 3


def test_batchsize_auto_sends_fewer_descents_a_pass_at_a_fixed_node_count(checkpoint):
    """BatchSize is descents a tree per forward pass: at 64 nodes the default engine's search
    takes as many passes as BatchSize 4's, twice 8's (the evaluator's own count of batches)."""
    evaluator, cfg = model_evaluator(str(checkpoint), "cpu", "fp32", max_batch=8)

    def passes(batch_size: int) -> int:
        engine = Engine(evaluator, cfg, EngineSettings(nodes=64, batch_size=batch_size, mate_search_nodes=0,
                                                       policy_temperature=1.0))
        before = evaluator.stats.calls
        engine.choose([Turn(0, cshogi.Board(), 0, None, [])])
        return evaluator.stats.calls - before

    auto, four, eight = passes(0), passes(4), passes(8)
    assert auto == four and 16 <= auto <= 17
    assert 8 <= eight <= 9


def test_the_usi_engine_at_go_nodes_sends_one_descent_a_pass_per_16_nodes_at_most_8(checkpoint):
    """`go nodes 64`: 4 descents a forward pass (16 passes); `go nodes 256`: 8, the most (32)."""
    out = io.StringIO()
    engine = UsiEngine(out, {"Checkpoint": str(checkpoint), "Dtype": "fp32", "PolicyTemperature": "1",
                             "MateSearch": "false"})
    engine.handle("isready")
    for go, most in (("go nodes 64", 17), ("go nodes 256", 33)):
        before = engine._evaluator.stats.calls
        engine.handle("position startpos")
        engine.handle(go)
        engine._join()
        assert most - 1 <= engine._evaluator.stats.calls - before <= most, go


def test_cpuct_changes_how_the_search_spends_its_visits(checkpoint):
    """A small c_init follows the values, a large one the priors: the same network and position,
    visits spread differently (a search built with the run's c_init whatever the option says
    would spend them alike)."""
    greedy = root_visits({"cpuct": "0.05", "nodes": "96"}, checkpoint)
    broad = root_visits({"cpuct": "50", "nodes": "96"}, checkpoint)
    assert greedy.sum() == broad.sum() == pytest.approx(96, abs=1)
    assert np.count_nonzero(broad) > np.count_nonzero(greedy)
    assert greedy.max() > broad.max()


def test_nodes_is_the_number_of_simulations_a_match_move_gets(checkpoint):
    assert root_visits({"nodes": "20"}, checkpoint).sum() == pytest.approx(20, abs=1)
    assert root_visits({}, checkpoint).sum() == pytest.approx(tiny_config().search.num_simulations, abs=1)


def test_resign_temperature_and_temperature_plies_decide_the_move_played(checkpoint):
    evaluator, cfg = model_evaluator(str(checkpoint), "cpu", "fp32", max_batch=8)

    def moves(settings: EngineSettings, ply: int, seeds=range(8)) -> set:
        played = set()
        for seed in seeds:
            engine = Engine(evaluator, cfg, replace(settings, nodes=16, policy_temperature=1.0), seed=seed)
            (choice,) = engine.choose([Turn(0, cshogi.Board(), ply, None, [])])
            played.add(choice.move)
        return played

    assert len(moves(EngineSettings(), 0)) == 1  # no temperature: the most visited, whatever the seed
    assert len(moves(EngineSettings(temperature=50.0), 0)) > 1  # sampled by visits
    assert len(moves(EngineSettings(temperature=50.0, temperature_plies=4), 6)) == 1  # past the sampling plies
    assert moves(EngineSettings(resign=1.0), 0, [0]) == {"resign"}  # every win rate is below 1
    assert "resign" not in moves(EngineSettings(resign=0.0), 0, [0])


def test_the_engine_declares_resigns_and_mates_before_it_searches():
    from conftest import uniform_evaluator

    engine = Engine(uniform_evaluator(), tiny_config(), EngineSettings(nodes=1, policy_temperature=1.0))
    mate_in_one = cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 b G 1")
    impasse = cshogi.Board("LNSG1GSNL/1R2K2B1/PPPPPPPPP/9/9/9/9/9/4k4 b P 1")  # 28 points in the zone
    mated = cshogi.Board("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    decisions = [engine.decide(b, b.sfen(), [], 0, lambda progress: 0) for b in (mate_in_one, impasse, mated)]
    assert [d.move for d in decisions] == ["G*5b", "win", "resign"]
    assert decisions[0].mate and decisions[1].why and decisions[2].report is None
