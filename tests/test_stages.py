"""Stages (train/stages.py): the settings in force at each checkpoint, a stage entered inside a
run (what it says and nothing else), resume on either side of it, bad stages refused at start-up,
and the CPU preset's schedule as it was before stages (selfplay.deeper_* and the step decay)."""
import contextlib
import functools
import io
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import TINY, compose_config, docs_tool
from resume_helpers import RecordingLoop, assert_continues, run_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from azshogi.config import ConfigError, LrSchedule, from_plain, to_config, to_plain
from azshogi.formats import checkpoint as ckpt
from azshogi.play.models import load_model
from azshogi.train.loop import Loop
from azshogi.train.stages import changes, config_at, entered, play_config, stage_at
from azshogi.train.trainer import learning_rate


def test_the_presets_network_is_3x32_unless_the_command_line_picks_another():
    """The presets' network is a model group (model=cpu), so that `model=NAME` after the preset
    picks a whole network rather than mixing its value head into the preset's 3x32."""
    for preset in ("cpu", "gpu"):
        model = to_config(compose_config([f"+experiment={preset}"])).model
        assert (model.blocks, model.channels, model.value_hidden) == (3, 32, 256)
        model = to_config(compose_config([f"+experiment={preset}", "model=tiny"])).model
        assert (model.blocks, model.channels, model.value_hidden) == (1, 16, 32)


def test_the_cpu_preset_schedule_is_the_one_before_stages_with_a_cool_stage():
    """Until stages, +experiment=cpu searched 64 simulations among 16 candidates from checkpoint 41
    on (selfplay.deeper_from_checkpoint=41) and decayed the learning rate by steps
    (lr_schedule=step, decay_steps=9950, min_lr_ratio=0.1: a tenth from step 10,000). The stages
    give the same search after every checkpoint and the same rate at every step of 300
    checkpoints (100 steps each), but that the training of checkpoints 32-41 (steps 3,100-4,099:
    the cool stage) is at a tenth of it, and the rate is the run's again from checkpoint 42's.
    Gumbel's c_scale is the preset's 0.2 for the whole run (no stage sets it), so that the earlier
    runs' `search.c_scale=0.1` is 0.1 at every checkpoint. From checkpoint 41 on the bf16 stage
    asks for bf16 training steps (train.cpu_bf16); `'~stages.bf16'`, the runs before it, never."""
    cfg = to_config(compose_config(["+experiment=cpu"]))
    assert cfg.train.lr_schedule == LrSchedule.constant and cfg.loop.steps_per_checkpoint == 100
    old_train = replace(cfg.train, lr_schedule=LrSchedule.step, decay_steps=9950, min_lr_ratio=0.1)
    assert [stage_at(cfg, n) for n in (30, 31, 40, 41, 99, 100)] == [0, 1, 1, 3, 3, 4]  # deeper and bf16 at 41
    for n in range(300):
        now = config_at(cfg, n)
        deeper = n >= 41
        assert (now.search.num_simulations, now.search.max_num_considered_actions) == ((64, 16) if deeper
                                                                                       else (32, 32)), n
        assert now.loop == cfg.loop and now.model == cfg.model and now.replay == cfg.replay
        assert now.search.c_scale == 0.2, n
        assert now.train.cpu_bf16 == deeper, n
        cool = 0.1 if 31 <= n < 41 else 1.0
        for step in range(n * 100, (n + 1) * 100):
            assert math.isclose(learning_rate(step, now.train), cool * learning_rate(step, old_train),
                                rel_tol=1e-9), step
    assert learning_rate(3099, config_at(cfg, 30).train) == pytest.approx(1e-3)
    assert learning_rate(3100, config_at(cfg, 31).train) == pytest.approx(1e-4)
    assert learning_rate(4100, config_at(cfg, 41).train) == pytest.approx(1e-3)
    assert learning_rate(9999, config_at(cfg, 99).train) == pytest.approx(1e-3)
    assert learning_rate(10000, config_at(cfg, 100).train) == pytest.approx(1e-4)
    former = to_config(compose_config(["+experiment=cpu", "search.c_scale=0.1"]))
    assert {config_at(former, n).search.c_scale for n in range(300)} == {0.1}
    fp32 = to_config(compose_config(["+experiment=cpu", "~stages.bf16"]))
    assert not any(config_at(fp32, n).train.cpu_bf16 for n in range(300))


def test_config_at_applies_the_stages_in_order_and_changes_only_what_they_set():
    cfg = to_config(compose_config(TINY + [
        "+stages.b={from_checkpoint:5,set:{search.num_simulations:12,train:{lr:0.005}}}",
        "+stages.a={from_checkpoint:2,set:{search:{num_simulations:8,max_num_considered_actions:4}}}"]))
    assert [stage_at(cfg, n) for n in range(7)] == [0, 0, 1, 1, 1, 2, 2]
    assert config_at(cfg, 1) == cfg
    assert changes(cfg, config_at(cfg, 2)) == ["search.num_simulations 4 -> 8"]  # considered was 4 already
    assert changes(config_at(cfg, 4), config_at(cfg, 5)) == ["search.num_simulations 8 -> 12", "train.lr 0.02 -> 0.005"]
    assert replace(config_at(cfg, 9), search=cfg.search, train=cfg.train) == cfg  # nothing else
    assert play_config(cfg, 9).search == cfg.search and play_config(cfg, 9).train.lr == 0.005
    assert entered(cfg, 5) == ("stage 2 of 2, b (from_checkpoint 5): search.num_simulations 8 -> 12, "
                               "train.lr 0.02 -> 0.005")
    assert entered(cfg, 4) is None


def test_a_stage_that_ends_gives_back_what_the_run_and_the_stages_in_force_say():
    cfg = to_config(compose_config(TINY + [
        "+stages.slow={from_checkpoint:2,until_checkpoint:6,set:{train:{lr:0.001},search:{num_simulations:8}}}",
        "+stages.later={from_checkpoint:4,set:{search:{num_simulations:12}}}"]))
    sims = [config_at(cfg, n).search.num_simulations for n in range(8)]
    lrs = [config_at(cfg, n).train.lr for n in range(8)]
    assert sims == [4, 4, 8, 8, 12, 12, 12, 12]  # the later stage's value wins, and outlasts the end
    assert lrs == [0.02, 0.02, 0.001, 0.001, 0.001, 0.001, 0.02, 0.02]  # the run's own again from 6
    without = replace(cfg, stages={"later": cfg.stages["later"]})
    assert replace(config_at(cfg, 6), stages={}) == replace(config_at(without, 6), stages={})
    assert [stage_at(cfg, n) for n in (1, 2, 5, 6, 9)] == [0, 1, 2, 2, 2]  # stages begun: ends count no stage
    assert entered(cfg, 6) == "stage slow ended (until_checkpoint 6): train.lr 0.001 -> 0.02"
    assert entered(cfg, 7) is None
    both = to_config(compose_config(TINY + [
        "+stages.slow={from_checkpoint:2,until_checkpoint:4,set:{train:{lr:0.001}}}",
        "+stages.deep={from_checkpoint:4,set:{search:{num_simulations:12}}}"]))
    assert entered(both, 4) == ("stage 2 of 2, deep (from_checkpoint 4); stage slow ended (until_checkpoint 4): "
                                "search.num_simulations 4 -> 12, train.lr 0.001 -> 0.02")


def test_a_when_flat_stage_judges_the_rating_from_the_last_stage_s_end_on():
    """A stage's end changes the settings as a start does: the plateau test starts afresh there."""
    from azshogi.train.stages import flat_stage_due

    cfg = to_config(compose_config(TINY + [
        "+stages.slow={from_checkpoint:2,until_checkpoint:6,set:{train:{lr:0.001}}}",
        "+stages.big={from_checkpoint:2,when_flat:2,set:{model:{blocks:2}}}"]))
    flat = [{"checkpoint": n, "rating": 1000.0, "rating_margin": 50.0} for n in range(1, 10)]
    assert flat_stage_due(cfg, 5, {}, flat) is not None  # ratings 3-5 since checkpoint 2: flat
    assert flat_stage_due(cfg, 6, {}, flat) is None and flat_stage_due(cfg, 8, {}, flat) is None  # 7, 8: too few
    assert flat_stage_due(cfg, 9, {}, flat)[0] == "big"  # 7-9 since the end at 6


def test_a_stage_is_checked_with_the_settings_that_may_be_in_force_then():
    """The cheap search must stay the smaller one: valid while the stage that deepens the search is
    in force, not once it has ended and the run's 4 simulations are back, nor before it begins."""
    with pytest.raises(ConfigError, match=r"stages\.deep \(ending at checkpoint 5\): selfplay\.cheap_simulations="):
        to_config(compose_config(TINY + [
            "+stages.deep={from_checkpoint:2,until_checkpoint:5,set:{search:{num_simulations:12}}}",
            "+stages.cheap={from_checkpoint:3,set:{selfplay:{cheap_search_prob:0.5,cheap_simulations:6}}}"]))
    # the same while a stage that deepens the search waits for the rating, which may never stop rising
    with pytest.raises(ConfigError, match=r"stages\.cheap\.set\.selfplay\.cheap_simulations="):
        to_config(compose_config(TINY + [
            "+stages.deep={from_checkpoint:2,when_flat:2,set:{search:{num_simulations:12}}}",
            "+stages.cheap={from_checkpoint:3,set:{selfplay:{cheap_search_prob:0.5,cheap_simulations:6}}}"]))
    # a value out of range in a later stage is that stage's, not the end of the one before it
    with pytest.raises(ConfigError, match=r"^stages\.b\.set\.search\.max_num_considered_actions=600"):
        to_config(compose_config(TINY + [
            "+stages.a={from_checkpoint:2,until_checkpoint:3,set:{search:{num_simulations:2}}}",
            "+stages.b={from_checkpoint:3,set:{search:{max_num_considered_actions:600}}}"]))


@pytest.mark.parametrize("override, key", [
    ("+stages.s={from_checkpoint:2,set:{model:{blocks:0}}}", "stages.s.set.model.blocks"),  # shrinks
    ("+stages.s={from_checkpoint:2,set:{model:{value_hidden:64}}}", "stages.s.set.model.value_hidden"),
    ("+stages.s={from_checkpoint:2,set:{train:{optimizer:adamw}}}", "stages.s.set.train.optimizer"),
    ("+stages.s={from_checkpoint:2,set:{search:{kind:puct}}}", "stages.s.set.search.kind"),
    ("+stages.s={from_checkpoint:2,set:{search:{num_simulations:0}}}", "stages.s.set.search.num_simulations"),
    ("+stages.s={from_checkpoint:2,set:{search:{num_simulations:many}}}", "stages.s.set.search.num_simulations"),
    ("+stages.s={from_checkpoint:2,set:{train:{lr:-1}}}", "stages.s.set.train.lr"),
    ("+stages.s={from_checkpoint:0,set:{train:{lr:0.1}}}", "stages.s.from_checkpoint"),
    ("+stages.s={from_checkpoint:2}", "stages.s.set"),
    ("+stages.s={from_checkpoint:2,set:{train:{lr:0.1}},when:3}", "stages.s.when"),
    ("+stages.s={from_checkpoint:2,until_checkpoint:2,set:{train:{lr:0.1}}}", "stages.s.until_checkpoint"),
    ("+stages.s={from_checkpoint:2,until_checkpoint:4,when_flat:2,set:{train:{lr:0.1}}}",
     "stages.s.until_checkpoint"),
    ("+stages.s={from_checkpoint:2,until_checkpoint:4,set:{model:{blocks:2}}}", "stages.s.until_checkpoint"),
    # valid alone, not with what is in force then: the cheap search must stay the smaller one
    ("+stages.s={from_checkpoint:2,set:{selfplay:{cheap_search_prob:0.5,cheap_simulations:6}}}",
     "stages.s.set.selfplay.cheap_simulations"),
])
def test_a_bad_stage_fails_at_start_up_naming_its_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.") + "="):
        to_config(compose_config(TINY + [override]))


def test_the_removed_deeper_keys_are_refused_and_ignored_in_saved_configs():
    with pytest.raises(Exception, match="deeper_from_checkpoint"):
        to_config(compose_config(TINY + ["selfplay.deeper_from_checkpoint=41"]))
    plain = to_plain(to_config(compose_config(TINY)))
    plain["selfplay"].update(deeper_from_checkpoint=41, deeper_simulations=64, deeper_considered=16)
    assert from_plain(plain) == to_config(compose_config(TINY))  # an older checkpoint's config loads


def test_a_saved_config_that_an_older_azshogi_took_still_reads_back():
    """Values refused on the command line since (a data file named twice, a mate adjudication
    past 11 plies, a batch past the window, a learning rate past 10, cluster settings without the
    cluster) do not make a checkpoint unreadable: they are read in the forms taken now."""
    plain = to_plain(to_config(compose_config(TINY)))
    plain["rules"]["mate_adjudication_plies"] = 13
    plain["pretrain"]["train_files"] = ["a.hcpe", "a.hcpe", "b.hcpe3"]
    plain["replay"]["capacity"], plain["train"]["batch_size"], plain["train"]["lr"] = 30, 64, 20.0
    plain["cluster"]["nodes"] = 4  # ignored without the cluster
    cfg = from_plain(plain)
    assert cfg.rules.mate_adjudication_plies == 11 and cfg.pretrain.train_files == ["a.hcpe", "b.hcpe3"]
    assert (cfg.train.batch_size, cfg.train.lr, cfg.cluster.nodes) == (30, 10.0, 1)
    with pytest.raises(ConfigError, match="rules.mate_adjudication_plies=-1"):
        to_config(compose_config(TINY + ["rules.mate_adjudication_plies=-1"]))


# A stage at checkpoint 2 that changes every kind of thing the loop rebuilds: the network
# (1x16 -> 2x24, grown), self-play's search, the learning rate, the replay window, the phase sizes;
# and one for checkpoints 2 and 3's training only, which ends at checkpoint 3.
STAGE = ("+stages.big={from_checkpoint:2,set:{model:{blocks:2,channels:24},search:{num_simulations:12},"
         "train:{lr:0.005},replay:{capacity:100},loop:{positions_per_checkpoint:40}}}")
ENDING = "+stages.light={from_checkpoint:1,until_checkpoint:3,set:{train:{value_loss_weight:0.5}}}"
RUN = ["device=cpu", "eval.every=0", "loop.keep_checkpoints=10", "loop.max_checkpoints=3",
       "replay.capacity=200", STAGE, ENDING]
NAMES = [f"ckpt-{k:05d}.pt" for k in range(1, 4)]


@functools.lru_cache(maxsize=None)
def staged_config():
    return to_config(compose_config(TINY + RUN))


def config(root: Path, run: str, resume: str = ""):
    return run_config(staged_config(), root, run, resume)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    root = tmp_path_factory.mktemp("stages")
    loop = RecordingLoop(config(root, "straight"))
    loop.run()
    assert sorted(loop.written) == NAMES
    return root, loop.written


def test_a_stage_inside_a_run_changes_what_it_says_and_nothing_else(straight):
    root, written = straight
    run = root / "checkpoints" / "straight"
    before, after = ckpt.load(run / NAMES[0]), ckpt.load(run / NAMES[1])
    # The network: grown at checkpoint 2, saved with its shape, which the engine reads back.
    model, saved = load_model(run / NAMES[1])
    assert (model.blocks, model.channels) == (2, 24) and saved.model.value_hidden == 32
    assert before["config"]["model"]["blocks"] == 1 and after["config"]["model"]["blocks"] == 2
    # The settings: exactly the stage's (self-play's search stays out of the saved config: the
    # engine's and the evaluation's search is the run's).
    assert changes(to_config_of(before), to_config_of(after)) == [
        "model.blocks 1 -> 2", "model.channels 16 -> 24", "loop.positions_per_checkpoint 60 -> 40",
        "replay.capacity 200 -> 100", "train.lr 0.02 -> 0.005"]
    # The stage that ends: its setting from checkpoint 1 (for checkpoints 2 and 3's training), the
    # run's own again at checkpoint 3, where nothing else changes.
    third_config = to_config_of(ckpt.load(run / NAMES[2]))
    assert [to_config_of(c).train.value_loss_weight for c in (before, after)] + [
        third_config.train.value_loss_weight] == [0.5, 0.5, 1.0]
    assert changes(to_config_of(after), third_config) == ["train.value_loss_weight 0.5 -> 1.0"]
    assert replace(to_config_of(after), model=to_config_of(before).model, loop=to_config_of(before).loop,
                   replay=to_config_of(before).replay, train=to_config_of(before).train) == to_config_of(before)
    # Training: the new rate from the stage's first step; the step count goes on; a new optimizer.
    assert written[NAMES[1]]["counters"]["train_steps"] == 8 and after["trainer"]["step_count"] == 8
    third = ckpt.load(run / NAMES[2])
    assert [g["lr"] for g in third["trainer"]["optimizer"]["param_groups"]] == [0.005, 0.005]
    # The grown network's new optimizer warms up again (train.warmup_steps=2): half the stage's
    # rate at its first step (step 9), the whole of it from its second; the resumed run's clock too.
    lrs = {e.step: e.value for e in scalars(root, "train/learning_rate")}
    assert lrs[8] == pytest.approx(0.02) and lrs[9] == pytest.approx(0.0025) and lrs[10] == pytest.approx(0.005)
    assert after["trainer"]["warm_start"] == 8 and before["trainer"]["warm_start"] == 0
    # The replay window: at most 100 positions from checkpoint 2 on.
    assert len(written[NAMES[1]]["replay"]["hcps"]) == 100 < written[NAMES[1]]["replay"]["total_added"]
    # Self-play: 12 simulations from the third phase on (about 13 evaluations a move, against 5).
    per_move = [e.value for e in sorted(scalars(root, "perf/nn_evals_per_move"), key=lambda e: e.step)]
    assert max(per_move[:2]) <= 6 and per_move[2] >= 9, per_move
    assert [e.value for e in sorted(scalars(root, "run/stage"), key=lambda e: e.step)] == [1, 2, 2]
    said = (root / "logs" / "straight" / "azshogi.log").read_text()
    assert "checkpoint 1: stage 1 of 2, light (from_checkpoint 1): train.value_loss_weight 1.0 -> 0.5\n" in said
    assert ("checkpoint 2: stage 2 of 2, big (from_checkpoint 2): model.blocks 1 -> 2, model.channels 16 -> 24, "
            "search.num_simulations 4 -> 12, loop.positions_per_checkpoint 60 -> 40, replay.capacity 200 -> 100, "
            "train.lr 0.02 -> 0.005 (the network grown from 1x16, function-preserving; a new optimizer)") in said
    assert "checkpoint 3: stage light ended (until_checkpoint 3): train.value_loss_weight 0.5 -> 1.0\n" in said


def to_config_of(state: dict):
    from azshogi.config import from_plain

    return from_plain(state["config"])


def scalars(root: Path, tag: str):
    acc = EventAccumulator(str(root / "logs" / "straight"))
    acc.Reload()
    return acc.Scalars(tag)


def test_wall_times_lists_each_checkpoint_s_shape_and_picks_the_last_by_a_time(straight):
    """docs/tools/wall_times.py, which compares twin runs (one of them grown) at equal wall time."""
    root, written = straight
    run = root / "checkpoints" / "straight"
    tool = docs_tool("docs/tools/wall_times.py")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        tool.main([str(run)])
    lines = out.getvalue().splitlines()
    minutes = [written[name]["counters"]["wall_seconds"] / 60 for name in NAMES]
    assert 0 < minutes[0] <= minutes[1] <= minutes[2]
    assert lines == [f"straight  checkpoint {k + 1:3d}: {minutes[k]:6.1f} min, {shape}, "
                     f"{written[NAMES[k]]['counters']['games']:,} games"
                     for k, shape in enumerate(["1x16", "2x24", "2x24"])]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        tool.main([str(run), "--at", str(minutes[1] + 1e-9)])
        tool.main([str(run), "--at", "-1"])
    assert out.getvalue().splitlines()[0].startswith(f"at {minutes[1] + 1e-9:g} minutes: straight checkpoint 2 (")
    assert out.getvalue().splitlines()[0].endswith(str(run / NAMES[1]))
    assert out.getvalue().splitlines()[1] == "at -1 minutes: straight none yet"


@pytest.mark.parametrize("start", [1, 2])
def test_resume_just_before_and_just_after_a_stage_continues_exactly(straight, start, tmp_path):
    """From checkpoint 1 (the stage entered after the next phase) and from checkpoint 2 (the stage
    in force, its network of the grown shape read back); the other stage ends at checkpoint 3."""
    root, written = straight
    resumed = RecordingLoop(config(root, f"resumed{start}", resume=str(root / "checkpoints" / "straight"
                                                                        / NAMES[start - 1])))
    resumed.run()
    assert sorted(resumed.written) == NAMES[start:]
    for name in NAMES[start:]:
        assert_continues(resumed.written[name], written[name], name)
    assert isinstance(resumed.model, torch.nn.Module) and resumed.model.blocks == 2
    said = (root / "logs" / f"resumed{start}" / "azshogi.log").read_text()  # the start-up line: the stages in force
    shape, now = ("1x16", "light") if start == 1 else ("2x24", "light, big")
    assert f"network {shape}, stage {start} of 2 ({now})" in said
    shutil.rmtree(root / "checkpoints" / f"resumed{start}", ignore_errors=True)



def _resume_error(root: Path, overrides: list, run: str, checkpoint: str) -> str:
    """The ConfigError of resuming the straight run's `checkpoint` with the run's settings and
    `overrides`."""
    cfg = to_config(compose_config(TINY + overrides))
    loop = Loop(run_config(cfg, root, run, resume=str(root / "checkpoints" / "straight" / checkpoint)),
                show_progress=False)
    try:
        with pytest.raises(ConfigError) as error:
            loop.restore()
        return str(error.value)
    finally:
        loop.selfplay.close()


def test_a_growth_stage_added_at_a_checkpoint_already_passed_is_named(straight):
    """Checkpoint 1 holds the 1x16 network; a stage growing it from checkpoint 1 on (added to the
    command after the fact) cannot apply there: the error names the stage and the first
    checkpoint it may begin at, not a mismatch of model settings."""
    root, _ = straight
    said = _resume_error(root, [r.replace("from_checkpoint:2", "from_checkpoint:1") for r in RUN], "late", NAMES[0])
    assert re.search(r"stages\.big changes the network from checkpoint 1 on, .* at checkpoint 1 already .*from "
                     r"before that stage.*from_checkpoint >= 2", said), said
    # a second growth added after one that grew the network in its time
    said = _resume_error(root, RUN + ["+stages.bigger={from_checkpoint:3,set:{model:{channels:32}}}"], "later",
                         NAMES[2])
    assert re.search(r"stages\.bigger changes the network from checkpoint 3 on.*from_checkpoint >= 4", said), said
    # a network setting changed by hand, with the stage in force when the checkpoint was written: not the stage's
    said = _resume_error(root, RUN + ["model.value_hidden=64"], "other-head", NAMES[1])
    assert re.search(r"holds a network with model\.blocks=2.* asks for .*64", said), said


def test_the_evaluation_after_a_stage_grew_the_network_plays_the_smaller_previous_one(tmp_path):
    """The in-loop evaluation's `previous` match: the network evaluated before the stage (1x16) is
    rebuilt from its own file's settings, not the run's grown ones."""
    from play_helpers import tiny_config

    from azshogi.config import EvalConfig, ModelConfig, RulesConfig
    from azshogi.formats.paths import RunPaths
    from azshogi.nn.growth import grow
    from azshogi.nn.network import build
    from azshogi.play.gauntlet import When, rate_checkpoint

    cfg = tiny_config(rules=RulesConfig(max_plies=8),
                      eval=EvalConfig(games=2, num_simulations=1, records_saved=0, anchors=["random"]))
    torch.manual_seed(0)
    small = build(cfg.model.blocks, cfg.model.channels, cfg.model.value_hidden).eval()
    paths = RunPaths(tmp_path / "checkpoints", tmp_path)
    rate_checkpoint(small, cfg, torch.device("cpu"), paths, When(1, 4, 5, 1.0), say=lambda s: None)
    grown = grow(small, 2, 24).eval()
    bigger = replace(cfg, model=ModelConfig(2, 24, cfg.model.value_hidden))
    result = rate_checkpoint(grown, bigger, torch.device("cpu"), paths, When(2, 8, 9, 2.0), say=lambda s: None)
    assert len(result.matches["previous"].games) == 2


def rated(*points):
    """ratings.json's records: (checkpoint, rating, margin) each."""
    return [{"checkpoint": c, "rating": r, "rating_margin": m} for c, r, m in points]


def test_the_rating_has_stopped_rising_when_the_last_k_are_within_their_margins_of_the_best_before():
    from azshogi.train.stages import rating_flat

    rising = rated((5, 800, 60), (10, 900, 60), (15, 1000, 60))
    assert rating_flat(rising, 0, 1) is None  # 1,000 is 100 above 900, more than its margin
    assert rating_flat(rising, 0, 2) is None
    flat = rated((5, 800, 60), (10, 1000, 60), (15, 1050, 60), (20, 990, 60))
    assert rating_flat(flat, 0, 2) == ("the rating has stopped rising (checkpoints 15, 20: 1050 ± 60, 990 ± 60, "
                                       "none above checkpoint 10's 1000 by more than its margin)")
    assert rating_flat(flat, 0, 3) is None  # 1,000 is more than 60 above 800
    assert rating_flat(flat, 5, 3) is None  # after checkpoint 5: three ratings, too few for k = 3
    assert rating_flat(flat, 10, 1) == rating_flat(flat, 0, 1)  # 990 is below 1,050
    unbounded = rated((5, 800, 60), (10, 810, None))  # all wins or all losses: no margin, no verdict
    assert rating_flat(unbounded, 0, 1) is None


def test_a_when_flat_stage_begins_after_the_evaluation_that_finds_the_rating_flat(tiny_config, tmp_path, monkeypatch,
                                                                                  tiny_run):
    """tiny_run (at checkpoint 1) resumed with an evaluation at each checkpoint, whose ratings are
    500, 480, 490 (± 50), and a stage with when_flat: 1 from checkpoint 1 on: the rating of
    checkpoint 2 is not above 500 by more than its margin, so the stage begins at checkpoint 3
    (the counters say so), and a run resumed there has it in force."""
    import json

    import azshogi.play.gauntlet as gauntlet
    from azshogi.train.loop import Loop, train

    def fake_rating(model, cfg, device, paths, when, *args, **kwargs):
        history = gauntlet.rating_history(paths)
        history.append({"checkpoint": when.checkpoint, "rating": {1: 500, 2: 480, 3: 490}[when.checkpoint],
                        "rating_margin": 50})
        paths.eval_ratings.parent.mkdir(parents=True, exist_ok=True)
        paths.eval_ratings.write_text(json.dumps(history))

    monkeypatch.setattr(gauntlet, "rate_checkpoint", fake_rating)
    overrides = ("eval.every=1", "loop.max_checkpoints=3",
                 "+stages.wide={from_checkpoint:1,when_flat:1,set:{search:{num_simulations:6}}}")
    counters = train(tiny_config(*overrides), show_progress=False)
    assert counters.flat_starts == {"wide": 3}
    said = (tmp_path / "logs" / "t" / "azshogi.log").read_text()
    assert ("checkpoint 2: the rating has stopped rising (checkpoints 2: 480 ± 50, none above checkpoint 1's 500 "
            "by more than its margin): stage wide begins at checkpoint 3") in said
    assert "checkpoint 3: stage 1 of 1, wide (when_flat 1): search.num_simulations 4 -> 6" in said
    state = ckpt.load(tmp_path / "checkpoints" / "t" / "ckpt-00003.pt")
    assert state["counters"]["flat_starts"] == {"wide": 3}
    loop = Loop(tiny_config(*overrides), show_progress=False)
    loop.restore()
    assert loop.cfg.search.num_simulations == 6 and loop.run_state.cfg.search.num_simulations == 4
    loop.selfplay.close()


def test_a_when_flat_stage_without_the_in_loop_rating_is_said_never_to_begin():
    """`+experiment=gpu eval.every=0` (its `grow` stage waits for the rating): the run starts, and
    its start-up line says the stage will not begin; with the rating on, nothing is said."""
    from azshogi.train.stages import never_flat

    stage = "+stages.g={from_checkpoint:1,when_flat:2,set:{train.lr:0.1}}"
    off = to_config(compose_config(TINY + ["eval.every=0", stage]))
    assert "stage g waits for the in-loop rating" in never_flat(off) and "will not begin" in never_flat(off)
    assert never_flat(to_config(compose_config(TINY + ["eval.every=1", stage]))) is None
    assert never_flat(to_config(compose_config(TINY + ["eval.every=0"]))) is None
    assert "grow" in never_flat(to_config(compose_config(["+experiment=gpu", "eval.every=0"])))


def test_a_stage_sets_weight_decay_and_momentum_in_the_optimizer_it_keeps(tiny_net):
    from azshogi.config import TrainConfig
    from azshogi.train.trainer import Trainer

    trainer = Trainer(tiny_net, TrainConfig(momentum=0.9, weight_decay=1e-4), torch.device("cpu"))
    optimizer = trainer.optimizer
    trainer.configure(TrainConfig(momentum=0.0, weight_decay=1e-3, lr=0.5))
    assert trainer.optimizer is optimizer
    assert [(g["weight_decay"], g["momentum"], g["nesterov"]) for g in optimizer.param_groups] == [
        (1e-3, 0.0, False), (0.0, 0.0, False)]  # the second group, biases and norms, never decays
    assert learning_rate(10_000, trainer.cfg) == 0.5


def test_a_stage_that_sets_cpu_bf16_trains_its_next_steps_as_a_bf16_run_would(tiny_net, monkeypatch):
    import copy

    from test_trainer import fixed_batch, step

    from azshogi.config import TrainConfig
    from azshogi.train import trainer as trainer_module
    from azshogi.train.trainer import Trainer

    # as on a CPU with AMX, where train.cpu_bf16 takes effect (test_cpu_bf16: and elsewhere not)
    monkeypatch.setattr(trainer_module, "bf16_is_fast", lambda: True)

    # At a learning rate of 0 the weights stay as they are: each step's loss says only how it was computed.
    fp32, bf16 = TrainConfig(lr=0.0, warmup_steps=0), TrainConfig(lr=0.0, warmup_steps=0, cpu_bf16=True)
    switched, plain, native = (Trainer(copy.deepcopy(tiny_net).train(), cfg, torch.device("cpu"))
                               for cfg in (fp32, fp32, bf16))
    batch = fixed_batch()
    losses = [step(t, batch).policy_loss for t in (switched, plain, native)]
    assert losses[0] == losses[1] != losses[2]
    assert losses[2] == pytest.approx(losses[1], rel=0.02)  # bf16's rounding, not another loss
    switched.configure(bf16)  # the stage begins: from the next step on, bf16 as a run trained so
    assert step(switched, batch).policy_loss == step(native, batch).policy_loss
    switched.configure(fp32)  # and back where a stage ends
    assert step(switched, batch).policy_loss == step(plain, batch).policy_loss
