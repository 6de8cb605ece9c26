"""The replay window on the training device (train/device_replay.py), run here on the CPU device:
the batches ReplayBuffer assembles on the host, for the same draws, and no host sync."""
import numpy as np
import pytest
import torch
from test_replay import make_games

from azshogi.config import ReplayWindow, TrainConfig
from azshogi.nn.host_sync import HostSyncCounter
from azshogi.shogi.game_record import TrainingPositions
from azshogi.train import device_replay
from azshogi.train.device_replay import DeviceReplay, on_device
from azshogi.train.loop import Loop
from azshogi.train.replay import ReplayBuffer
from azshogi.train.trainer import Trainer

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def games():
    games = make_games(6, 10)
    for g in games:  # each position's root value names it: position k has k / 1024
        g.root_values[:] = (np.arange(len(g)) + 10 * g.game_ids[0]) / 1024
    return games


def assert_same_batch(device_batch, host_batch):
    assert torch.equal(device_batch.features1, torch.from_numpy(host_batch.features1))
    assert torch.equal(device_batch.features2, torch.from_numpy(np.ascontiguousarray(host_batch.features2)))
    assert torch.allclose(device_batch.policy, torch.from_numpy(host_batch.policy), rtol=0, atol=1e-6)
    assert torch.equal(device_batch.result, torch.from_numpy(host_batch.result))
    assert torch.equal(device_batch.root_value, torch.from_numpy(host_batch.root_value))


def test_the_device_window_samples_what_the_host_samples(games, monkeypatch):
    monkeypatch.setattr(device_replay, "DECODE_CHUNK", 7)  # positions decoded in several chunks
    # 25 positions and 3 policy entries each of room: both rings wrap and evict as games arrive.
    buffer = ReplayBuffer(capacity=25, entries_per_position=3)
    replay = DeviceReplay(buffer, CPU)
    for i, game in enumerate(games):
        buffer.extend(game)
        if i % 2:  # the copy follows in steps of one or two games
            replay.refresh()
        for seed in range(3):
            host = buffer.sample(64, np.random.default_rng(seed), mirror=True)
            assert_same_batch(replay.sample(64, np.random.default_rng(seed), mirror=True), host)
        assert_same_batch(replay.sample(16, np.random.default_rng(7)), buffer.sample(16, np.random.default_rng(7)))
    slots = np.arange(buffer.begin, buffer.end) % buffer.capacity
    mirrored = np.arange(len(slots)) % 3 == 0
    assert_same_batch(replay.gather(slots, mirrored), buffer.gather(slots, mirrored))


def test_nothing_outside_the_window_is_drawn(games):
    buffer = ReplayBuffer(capacity=25)
    replay = DeviceReplay(buffer, CPU)
    for game in games:
        buffer.extend(game)
    assert (buffer.begin, buffer.end) == (35, 60)
    drawn = replay.sample(2000, np.random.default_rng(0), mirror=True).root_value * 1024
    assert set(torch.round(drawn).long().tolist()) == set(range(35, 60))


def test_a_restored_window_replaces_the_device_copy(games):
    buffer = ReplayBuffer(capacity=40)
    replay = DeviceReplay(buffer, CPU)
    for game in games[:4]:
        buffer.extend(game)
    replay.refresh()
    kept = buffer.positions(buffer.begin, buffer.end)
    buffer.restore(100, TrainingPositions.concatenate([games[4], games[5]]))  # other positions, other numbers
    assert_same_batch(replay.sample(64, np.random.default_rng(1), True),
                      buffer.sample(64, np.random.default_rng(1), True))
    buffer.restore(0, kept)
    assert_same_batch(replay.sample(64, np.random.default_rng(2), True),
                      buffer.sample(64, np.random.default_rng(2), True))


def test_sampling_and_training_on_the_device_make_no_host_sync(games, tiny_net):
    buffer = ReplayBuffer(capacity=60)
    for game in games:
        buffer.extend(game)
    replay = DeviceReplay(buffer, CPU)
    replay.refresh()
    trainer = Trainer(tiny_net, TrainConfig(warmup_steps=0, value_target_root_weight=0.3), CPU)
    rng = np.random.default_rng(0)
    trainer.step(replay.sample(32, rng, mirror=True))
    with HostSyncCounter() as syncs:
        for _ in range(3):
            trainer.step(replay.sample(32, rng, mirror=True))
    assert syncs.count == 0, syncs.by_op
    assert not any(m.skipped for m in trainer.read_back())


def test_auto_keeps_the_window_on_the_host_on_the_cpu():
    buffer = ReplayBuffer(capacity=10)
    assert not on_device(TrainConfig(), buffer, CPU)
    assert on_device(TrainConfig(replay_window=ReplayWindow.device), buffer, CPU)
    assert not on_device(TrainConfig(replay_window=ReplayWindow.host), buffer, CPU)


def test_a_run_trains_from_the_window_on_the_device(tiny_config):
    loop = Loop(tiny_config("train.replay_window=device", "loop.max_checkpoints=2", "train.log_every=3"),
                show_progress=False)
    counters = loop.run()
    assert isinstance(loop.batches, DeviceReplay)
    assert counters.checkpoints == 2 and counters.train_steps == 8
    assert loop.trainer.step_count == 8 and loop.trainer.read_back() == []  # every step read back
