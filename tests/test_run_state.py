"""The run state (train/run_state.py): model, trainer, counters and random streams go through a
checkpoint file and come back so that training continues exactly; a checkpoint of another
network shape or optimizer is refused with the settings to change."""
import random
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from interop_helpers import write_hcpe
from resume_helpers import assert_same, plain

from azshogi.config import ConfigError
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.paths import RunPaths
from azshogi.selfplay import in_progress
from azshogi.train.device_replay import DeviceReplay
from azshogi.train.replay import load_buffer
from azshogi.train.run_state import RunState

CPU = torch.device("cpu")


def train_a_little(run: RunState, buffer, steps: int) -> dict:
    """`steps` optimizer steps on minibatches from the run's training stream, counted as the
    loop counts them, then a draw from each process-wide stream; what a continuation shows."""
    for _ in range(steps):
        run.trainer.step(buffer.sample(run.cfg.train.batch_size, run.train_rng, run.cfg.train.mirror))
        run.counters.train_steps += 1
        run.counters.samples_trained += run.cfg.train.batch_size
    return {"model": plain(run.model.state_dict()), "trainer": plain(run.trainer.state_dict()),
            "counters": asdict(run.counters), "python": random.random(), "torch": plain(torch.rand(3)),
            "train": plain(run.train_rng.random(3))}


def write(run: RunState, number: int) -> Path:
    state = ckpt.assemble(run.state_dict(), ckpt.empty_replay(), in_progress.pack(0, []))
    return ckpt.save(state, RunPaths.of(run.cfg).checkpoint(number, partial=False), keep=5)


@pytest.mark.parametrize("window", ["host", "device"])
def test_the_run_state_goes_through_a_checkpoint_and_training_continues_exactly(tiny_config, tmp_path, window):
    """With batches from the replay buffer, or from its copy on the device (train/device_replay.py)."""
    write_hcpe(tmp_path / "a.hcpe", 40, seed=5)
    buffer = load_buffer([tmp_path / "a.hcpe"])
    if window == "device":
        buffer = DeviceReplay(buffer, CPU)
    cfg = tiny_config("train.mirror=true", "train.warmup_steps=0")
    straight = RunState(cfg, CPU)
    train_a_little(straight, buffer, 3)  # momentum, counters and every stream moved on
    path = write(straight, 1)
    continued = train_a_little(straight, buffer, 3)

    # Another seed: every stream and weight differs until the checkpoint is loaded.
    resumed = RunState(tiny_config("seed=7", "train.mirror=true", "train.warmup_steps=0"), CPU)
    parts = ckpt.split(ckpt.load(path), path)
    assert parts.replay == ckpt.empty_replay() and in_progress.num_games(parts.selfplay) == 0
    resumed.load_state_dict(parts.run, path)
    assert_same(train_a_little(resumed, buffer, 3), continued, "resumed")


def test_a_checkpoint_holds_the_run_state_and_nothing_else_is_taken_for_it(tiny_config):
    run = RunState(tiny_config(), CPU)
    state = ckpt.assemble(run.state_dict(), ckpt.empty_replay(), in_progress.pack(0, []))
    assert state["format"] == ckpt.FORMAT and set(state) == {"format", "replay", "selfplay", *ckpt.RUN_STATE}
    parts = run.state_dict()
    del parts["rng"]
    with pytest.raises(ValueError, match="rng"):
        ckpt.assemble(parts, ckpt.empty_replay(), in_progress.pack(0, []))


@pytest.mark.parametrize("override, message", [
    ("model.channels=24", r"model.blocks=1, model.channels=16, model.value_hidden=32, model.opponent_policy=False, "
                          r"but the config asks for 1, 24"),
    ("model.opponent_policy=true", r"model.opponent_policy=False, but the config asks for 1, 16, 32, True"),
    ("train.optimizer=adamw", r"train.optimizer=sgd, but the config asks for adamw: use the same optimizer"),
])
def test_another_network_or_optimizer_is_refused_before_anything_is_loaded(tiny_config, override, message):
    saved = RunState(tiny_config(), CPU)
    path = write(saved, 1)
    other = RunState(tiny_config(override, "seed=7"), CPU)  # other weights than the saved ones
    before = plain(other.model.state_dict())
    with pytest.raises(ConfigError, match=message):
        other.load_state_dict(ckpt.split(ckpt.load(path), path).run, path)
    assert_same(plain(other.model.state_dict()), before, "untouched")
    assert other.counters.train_steps == 0


def test_a_resume_with_other_settings_says_which_and_what_each_drops(tiny_config):
    """Resuming a run's own checkpoint with other overrides: the start says each changed setting
    (not the run's name, paths or checkpoint limit), and what a smaller window or fewer actors drop."""
    from dataclasses import replace

    from azshogi.config import to_plain
    from azshogi.train.loop import changed_note

    before = tiny_config()
    after = replace(before, seed=7, run="elsewhere", loop=replace(before.loop, max_checkpoints=9),
                    replay=replace(before.replay, capacity=50),
                    selfplay=replace(before.selfplay, num_actors=3))
    note = changed_note(to_plain(before), to_plain(after), Path("ckpt-00003.pt"), games=6)
    assert note.startswith("settings changed since ckpt-00003.pt: ")
    assert f"replay.capacity {before.replay.capacity} -> 50 (the window keeps its newest 50 positions" in note
    assert f"selfplay.num_actors {before.selfplay.num_actors} -> 3 (of the 6 games in progress" in note
    assert "seed 0 -> 7" in note and "run" not in note.split(":", 1)[1] and "max_checkpoints" not in note
    assert changed_note(to_plain(before), to_plain(before), Path("ckpt-00003.pt"), games=6) == ""


def test_a_resume_without_a_stage_of_the_checkpoint_says_so(tiny_config):
    """A stage given by an override and not given again on a resume was dropped from the schedule
    without a word; a stage changed says its setting; a pretraining's "auto" settings are no change."""
    from azshogi.config import to_plain
    from azshogi.train.loop import changed_note

    deep = "+stages.deep={from_checkpoint:1,set:{search:{num_simulations:16}}}"
    staged, plain_ = to_plain(tiny_config(deep)), to_plain(tiny_config())
    note = changed_note(staged, plain_, Path("ckpt-00003.pt"), games=0)
    assert note == ("settings changed since ckpt-00003.pt: stages.deep left out (give its override again to keep "
                    "it)")
    assert "stages.deep added" in changed_note(plain_, staged, Path("ckpt-00003.pt"), games=0)
    deeper = to_plain(tiny_config(deep, "stages.deep.set.search.num_simulations=32"))
    assert "stages.deep.set.search.num_simulations 16 -> 32" in changed_note(staged, deeper, Path("c.pt"), games=0)
    auto = to_plain(tiny_config("selfplay.num_workers=-1"))
    resolved = to_plain(tiny_config("selfplay.num_workers=0"))
    assert changed_note(auto, resolved, Path("c.pt"), games=0) == ""
