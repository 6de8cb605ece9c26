"""The network that plays as an average over checkpoints (train.average_decay): at each checkpoint
the average moves (1 - d) of the way to the trained network, batch-norm statistics included; a
checkpoint keeps both, play reads the average, training and self-play the network; a resumed run
averages as the straight one; a network that grows starts a new average; 0 keeps none."""
from dataclasses import replace

import pytest
import torch
from resume_helpers import RecordingLoop, assert_continues, run_config

from azshogi.config import ConfigError
from azshogi.formats import checkpoint as ckpt
from azshogi.nn.growth import grow
from azshogi.play.models import load_model
from azshogi.train import averaging
from azshogi.train.run_state import RunState

CPU = torch.device("cpu")


def test_the_average_starts_at_the_network_and_moves_1_minus_d_of_the_way_to_each_next_one(tiny_config):
    shape = tiny_config().model
    state = RunState(tiny_config(), CPU)
    first = {k: v.clone() for k, v in state.model.state_dict().items()}
    average = averaging.updated(None, state.model, 0.75, shape)
    assert average is not state.model
    for key, value in average.state_dict().items():
        assert torch.equal(value, first[key]), key
    with torch.no_grad():  # another network: new weights and batch-norm statistics
        for value in state.model.state_dict().values():
            value.add_(1.0) if value.is_floating_point() else value.add_(5)
    second = state.model.state_dict()
    assert averaging.updated(average, state.model, 0.75, shape) is average  # in place
    for key, value in average.state_dict().items():
        if value.is_floating_point():  # weights and running means/variances alike
            assert torch.allclose(value, 0.75 * first[key] + 0.25 * second[key], atol=1e-6), key
        else:  # counters are the network's
            assert torch.equal(value, second[key]), key
    assert not any(p.requires_grad for p in average.parameters())
    assert averaging.updated(average, state.model, 0.0, shape) is None


def test_bad_decays_name_the_key(tiny_config):
    for value in (-0.1, 1.0):
        with pytest.raises(ConfigError, match="train.average_decay"):
            tiny_config(f"train.average_decay={value}")


def test_a_new_network_or_a_stage_without_averaging_drops_the_average(tiny_config):
    cfg = tiny_config("train.average_decay=0.5")
    state = RunState(cfg, CPU)
    state.average_checkpoint()
    assert state.average is not None and state.playing is state.average
    state.use(cfg)  # the same settings: kept
    assert state.average is not None
    bigger = replace(cfg, model=replace(cfg.model, blocks=cfg.model.blocks + 1))
    state.use(bigger, grow(state.model, bigger.model.blocks, bigger.model.channels))
    assert state.average is None and state.playing is state.model  # the grown one plays, until the next checkpoint
    state.average_checkpoint()
    assert state.average is not None
    shapes = [[v.shape for v in net.state_dict().values()] for net in (state.average, state.model)]
    assert shapes[0] == shapes[1]
    state.use(replace(bigger, train=replace(bigger.train, average_decay=0.0)))
    assert state.average is None


def test_checkpoints_hold_the_average_play_reads_it_and_a_resume_mid_phase_averages_as_it_would_have(
        tiny_config, tmp_path):
    decay = 0.5
    cfg = tiny_config(f"train.average_decay={decay}", "loop.max_checkpoints=3", "eval.every=0",
                      "loop.keep_checkpoints=10")
    straight = RecordingLoop(run_config(cfg, tmp_path, "straight"))
    straight.run()
    folder = tmp_path / "checkpoints" / "straight"
    names = [f"ckpt-{k:05d}.pt" for k in (1, 2, 3)]
    expected = None
    for name in names:  # the formula, from the trained networks the files hold
        state = ckpt.load(folder / name)
        model = state["model"]
        expected = ({k: v.clone() for k, v in model.items()} if expected is None else
                    {k: (decay * expected[k] + (1 - decay) * v) if v.is_floating_point() else v
                     for k, v in model.items()})
        for key, value in state["model_average"].items():
            assert torch.allclose(value, expected[key], atol=1e-6), (name, key)
    played, _ = load_model(folder / names[-1])  # the engine, arena and exports play the average
    for key, value in played.state_dict().items():
        assert torch.equal(value, state["model_average"][key]), key
    assert not torch.equal(state["model"]["stem1.weight"], state["model_average"]["stem1.weight"])
    # stopped two steps into the second training phase (-partial), then resumed from there
    stopped = RecordingLoop(run_config(cfg, tmp_path, "stopped", resume=str(folder / names[0])), stop_after_steps=2)
    stopped.run()
    partial = tmp_path / "checkpoints" / "stopped" / "ckpt-00001-partial.pt"
    again = RecordingLoop(run_config(cfg, tmp_path, "again", resume=str(partial)))
    again.run()
    for name in names[1:]:
        assert_continues(again.written[name], straight.written[name], name)


def test_a_checkpoint_without_an_average_plays_its_network(tiny_config, tmp_path):
    state = RunState(tiny_config(), CPU).state_dict()
    assert state["model_average"] is None
    path = tmp_path / "old.pt"
    del state["model_average"]  # written before train.average_decay
    torch.save({"format": ckpt.FORMAT, **state, "replay": ckpt.empty_replay(), "selfplay": {}}, path)
    parts = ckpt.split(ckpt.load(path), path)
    assert parts.run["model_average"] is None
    weights, _ = ckpt.network(ckpt.load(path), path)
    assert torch.equal(weights["stem1.weight"], state["model"]["stem1.weight"])
