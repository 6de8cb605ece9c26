"""Evaluation inside the loop: matches, TensorBoard eval/ figures, the rating curve, the hook."""
import json
import math
import sys

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from play_helpers import tiny_config, torch_threads
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from azshogi.config import (
    ConfigError,
    EvalConfig,
    LoopConfig,
    ReplayConfig,
    RulesConfig,
    SelfPlayConfig,
    TrainConfig,
    register_configs,
    to_config,
)
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import RunPaths
from azshogi.nn.network import build
from azshogi.play.gauntlet import When, rate_checkpoint
from azshogi.play.ladder import Score, rate, rung
from azshogi.train.loop import Loop


@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1):
        yield


def scalars(log_dir):
    events = EventAccumulator(str(log_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_two_evaluations_give_win_rates_elo_and_a_rating_curve(tmp_path, monkeypatch):
    from torch.utils.tensorboard import SummaryWriter

    from azshogi.play import engine

    monkeypatch.setattr(engine, "auto_temperature", lambda evaluator, max_batch: 1.7)  # the engine's default

    cfg = tiny_config(rules=RulesConfig(max_plies=16), eval=EvalConfig(games=2, num_simulations=2, records_saved=1))
    torch.manual_seed(0)
    model = build(1, 16, 32).eval()
    writer = SummaryWriter(str(tmp_path))
    paths = RunPaths(tmp_path / "checkpoints", tmp_path)
    first = rate_checkpoint(model, cfg, torch.device("cpu"), paths, When(1, 10, 5, 60.4), writer,
                                say=lambda s: None)
    assert set(first.matches) == {"random", "greedy"}  # no previous model yet

    def rating_of(evaluation):  # the ladder's rating from the rung matches alone
        return rate([Score(rung(n).rating, m.wins, m.losses, m.draws) for n, m in evaluation.matches.items()
                     if n in ("random", "greedy")]).rating

    assert first.rating.rating == pytest.approx(rating_of(first))
    second = rate_checkpoint(model, cfg, torch.device("cpu"), paths, When(2, 20, 9, 125.0), writer,
                                 say=lambda s: None)
    writer.close()
    assert set(second.matches) == {"random", "greedy", "previous"}
    assert second.rating.rating == pytest.approx(rating_of(second))  # the previous model is no rung
    for match in second.matches.values():
        assert match.wins + match.losses + match.draws == 2
    figures = scalars(tmp_path)
    for tag in ("eval/win_rate/random", "eval/elo/greedy", "eval/rating"):
        assert [step for step, _ in figures[tag]] == [10, 20], tag
    assert [step for step, _ in figures["eval/rating_vs_games"]] == [5, 9]
    assert [step for step, _ in figures["eval/rating_vs_seconds"]] == [60, 125]
    assert [v for _, v in figures["eval/rating_vs_games"]] == pytest.approx([first.rating.rating,
                                                                            second.rating.rating])
    # A margin is written where it is finite (two games alike leave the Elo unbounded).
    finite = [step for step, e in ((10, first), (20, second)) if math.isfinite(e.matches["random"].elo.margin)]
    assert [step for step, _ in figures.get("eval/elo_margin/random", [])] == finite
    assert [step for step, _ in figures["eval/win_rate/previous"]] == [20]
    history = json.loads((tmp_path / "eval" / "ratings.json").read_text())
    assert [h["checkpoint"] for h in history] == [1, 2] and [h["games"] for h in history] == [5, 9]
    assert history[1]["matches"]["previous"]["games"] == 2
    # the engine's PolicyTemperature auto, as a GUI would get it, is what the network played with
    assert [h["policy_temperature"] for h in history] == [1.7, 1.7]
    assert [v for _, v in figures["eval/policy_temperature"]] == pytest.approx([1.7, 1.7])
    assert history[1]["rating"] == pytest.approx(second.rating.rating, abs=0.06)
    assert (tmp_path / "eval" / "ckpt00002" / "previous" / "game-0000.csa").exists()
    assert not (tmp_path / "eval" / "ckpt00002" / "previous" / "game-0001.csa").exists()
    assert not list((tmp_path / "eval").rglob(".tmp-*"))


def test_the_ladder_option_plays_the_rungs_nearest_to_the_last_rating(tmp_path, monkeypatch):
    import azshogi.play.gauntlet as gauntlet
    from azshogi.play import ladder

    rungs = (ladder.Rung("random", "random", 0.0), ladder.Rung("greedy", "greedy", 640.0),
             ladder.Rung("g2", "greedy", 900.0), ladder.Rung("g3", "greedy", 1200.0))
    monkeypatch.setattr(ladder, "RUNGS", rungs)
    monkeypatch.setattr(ladder, "_BY_NAME", {r.name: r for r in rungs})
    monkeypatch.setattr(gauntlet, "RUNGS", rungs)
    cfg = tiny_config(rules=RulesConfig(max_plies=8), eval=EvalConfig(games=2, num_simulations=1, records_saved=0,
                                                                      anchors=[], ladder=2, previous=False))
    paths = RunPaths(tmp_path / "checkpoints", tmp_path)
    model = build(1, 16, 32).eval()
    first = rate_checkpoint(model, cfg, torch.device("cpu"), paths, When(1, 1), say=lambda s: None)
    assert set(first.matches) == {"random", "greedy"}  # no rating yet: the lowest rungs
    history = json.loads(paths.eval_ratings.read_text())
    history[0]["rating"] = 1000.0  # as if it had climbed
    paths.eval_ratings.write_text(json.dumps(history))
    second = rate_checkpoint(model, cfg, torch.device("cpu"), paths, When(2, 2), say=lambda s: None)
    assert set(second.matches) == {"g2", "g3"}


def test_a_bad_anchor_or_ladder_size_is_refused_at_start_up_naming_the_key(tmp_path, monkeypatch):
    from play_helpers import FAKE_ENGINE

    from azshogi.play import gauntlet
    from azshogi.play.gauntlet import check_settings

    with pytest.raises(ConfigError, match="eval.anchors.*stockfish"):
        check_settings(tiny_config(eval=EvalConfig(anchors=["random", "stockfish"])))
    with pytest.raises(ConfigError, match="eval.ladder"):
        check_settings(tiny_config(eval=EvalConfig(ladder=99)))
    check_settings(tiny_config(eval=EvalConfig(anchors=["greedy"], ladder=1)))
    with pytest.raises(ConfigError, match="eval.anchors=.*greedy named more than once"):
        check_settings(tiny_config(eval=EvalConfig(anchors=["greedy", "random", "greedy"])))
    with pytest.raises(ConfigError, match="eval.usi_engine=.*no program '/nonexistent/engine'"):
        check_settings(tiny_config(eval=EvalConfig(every=1, usi_engine="/nonexistent/engine --flag")))
    # an engine is started at start-up: one that is no USI engine, or lacks an option, was found an evaluation later
    engine = tmp_path / "engine.py"
    engine.write_text(FAKE_ENGINE)
    check_settings(tiny_config(eval=EvalConfig(every=1, usi_engine=f"{sys.executable} {engine}",
                                               usi_options={"UCI_Variant": "shogi"})))
    with pytest.raises(ConfigError, match=r"eval.usi_engine=.*: .*has no option 'NoSuch'"):
        check_settings(tiny_config(eval=EvalConfig(every=1, usi_engine=f"{sys.executable} {engine}",
                                                   usi_options={"NoSuch": "1"})))
    monkeypatch.setattr(gauntlet, "HANDSHAKE_S", 1.0)
    with pytest.raises(ConfigError, match=r"eval.usi_engine='cat': .*no 'usiok' within 1 s"):
        check_settings(tiny_config(eval=EvalConfig(every=1, usi_engine="cat")))
    # an evaluation that could measure nothing: no opponent, or games that end in their random opening
    with pytest.raises(ConfigError, match="eval.every=1: the evaluation plays no match"):
        check_settings(tiny_config(eval=EvalConfig(every=1, anchors=[], previous=False)))
    check_settings(tiny_config(eval=EvalConfig(every=0, anchors=[], previous=False)))
    for plies in (24, 23):
        with pytest.raises(ConfigError, match=rf"eval.opening_plies={plies}: .*ply limit \(24"):
            check_settings(tiny_config(eval=EvalConfig(every=1, opening_plies=plies, max_plies=24)))
    check_settings(tiny_config(eval=EvalConfig(every=1, opening_plies=22, max_plies=24)))


def test_the_loop_evaluates_every_n_checkpoints(tmp_path, monkeypatch):
    cfg = to_config(tiny_config(
        run="evaluated", checkpoint_root=str(tmp_path / "checkpoints"), log_root=str(tmp_path / "logs"),
        selfplay=SelfPlayConfig(num_actors=2, write_hcpe3=False), rules=RulesConfig(max_plies=6),
        replay=ReplayConfig(capacity=1000), train=TrainConfig(batch_size=4, warmup_steps=1, average_decay=0.5),
        loop=LoopConfig(positions_per_checkpoint=6, steps_per_checkpoint=1, max_checkpoints=2,
                        selfplay_games_saved=0, keep_checkpoints=2),
        eval=EvalConfig(every=2, games=2, num_simulations=2, anchors=["greedy"], previous=False)))
    loop = Loop(cfg, show_progress=False)
    loop.run()
    history = json.loads((tmp_path / "logs" / "evaluated" / "eval" / "ratings.json").read_text())
    assert [h["checkpoint"] for h in history] == [2]  # every=2: not after checkpoint 1
    assert "eval/win_rate/greedy" in scalars(tmp_path / "logs" / "evaluated")
    # the network rated is the one that plays: with train.average_decay, the average, not the trained one
    saved = ckpt.load(tmp_path / "checkpoints" / "evaluated" / "ckpt-00002.pt")
    rated = ckpt.load(loop.paths.eval_previous)["model"]
    assert all(torch.equal(rated[k], v) for k, v in saved["model_average"].items())
    assert not torch.equal(rated["stem1.weight"], saved["model"]["stem1.weight"])
    # The checkpoint file was written before its evaluation; a resume does not play it again.
    from azshogi.play import gauntlet

    def played_again(*args, **kwargs):
        raise AssertionError("the finished evaluation was played again")

    monkeypatch.setattr(gauntlet, "rate_checkpoint", played_again)
    Loop(cfg, show_progress=False).run()
    assert json.loads((tmp_path / "logs" / "evaluated" / "eval" / "ratings.json").read_text()) == history


@pytest.mark.parametrize("damaged", [b"cut short", "keys"])
def test_a_damaged_previous_network_is_left_out_once_and_written_anew(tmp_path, damaged):
    cfg = to_config(tiny_config(
        run="evaluated", checkpoint_root=str(tmp_path / "checkpoints"), log_root=str(tmp_path / "logs"),
        selfplay=SelfPlayConfig(num_actors=2, write_hcpe3=False), rules=RulesConfig(max_plies=6),
        replay=ReplayConfig(capacity=1000), train=TrainConfig(batch_size=4, warmup_steps=1),
        loop=LoopConfig(positions_per_checkpoint=6, steps_per_checkpoint=1, max_checkpoints=1, selfplay_games_saved=0),
        eval=EvalConfig(every=1, games=2, num_simulations=2, anchors=["greedy"], previous=True)))
    loop = Loop(cfg, show_progress=False)
    loop.paths.eval_previous.parent.mkdir(parents=True, exist_ok=True)
    if damaged == "keys":  # readable, but not what the evaluation wrote
        torch.save({"model": {}}, loop.paths.eval_previous)
    else:
        loop.paths.eval_previous.write_bytes(damaged)
    loop.run()
    log = (tmp_path / "logs" / "evaluated" / "azshogi.log").read_text()
    assert f"{loop.paths.eval_previous}" in log and "the match against the previous network is left out" in log
    assert ckpt.load(loop.paths.eval_previous)["checkpoint"] == 1  # this evaluation's network, for the next


@pytest.mark.parametrize("text", ["{not json", '{"a": 1}', '[{"rating": 1000}]'])
def test_a_rating_history_that_is_not_one_names_its_file(tmp_path, text):
    from azshogi.play.gauntlet import rating_history

    paths = RunPaths(tmp_path / "checkpoints", tmp_path / "logs")
    paths.eval_ratings.parent.mkdir(parents=True)
    paths.eval_ratings.write_text(text)
    with pytest.raises(ckpt.CheckpointError, match="ratings.json"):
        rating_history(paths)


def test_eval_config_group_composes_and_is_checked():
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="azshogi.conf", version_base="1.3"):
        cfg = to_config(compose(config_name="config",
                                overrides=["eval.games=8", "+eval.usi_options.UCI_Variant=shogi"]))
        assert cfg.eval.games == 8 and cfg.eval.anchors == ["random", "greedy"]
        assert cfg.eval.usi_options == {"UCI_Variant": "shogi"}
        for bad, key in (["eval.games=0"], "eval.games"), (["eval.every=-1"], "eval.every"), \
                         (["eval.ladder=-1"], "eval.ladder"):
            with pytest.raises(ConfigError, match=key):
                to_config(compose(config_name="config", overrides=bad))
    GlobalHydra.instance().clear()
