"""Training at the GPU's pace, on CUDA: the replay window on the device gives the host's batches,
and a training step makes no host synchronisation (counted by nn/host_sync.py and held to
torch.cuda.set_sync_debug_mode("error")) until the losses are read back, once. Marked `cuda` and
skipped without CUDA (python -m pytest -m cuda); test_device_replay.py and test_trainer.py run
the same checks on the CPU device."""
import numpy as np
import pytest
import torch
from test_device_replay import assert_same_batch
from test_train_bench import SHORT

from azshogi.config import TrainConfig
from azshogi.nn.host_sync import HostSyncCounter
from azshogi.train import train_bench
from azshogi.train.device_replay import DeviceReplay, on_device
from azshogi.train.replay import ReplayBuffer
from azshogi.train.run_state import RunState

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs CUDA (on a machine with a GPU: python -m pytest -m cuda)")]

CUDA = torch.device("cuda")


def window(capacity: int, positions: int, entries_per_position: int = 64) -> ReplayBuffer:
    buffer = ReplayBuffer(capacity, entries_per_position)
    for game in train_bench.random_game_positions(positions, seed=3):
        buffer.extend(game)
    return buffer


def on_host(batch):
    return type(batch)(*(t.cpu() for t in (batch.features1, batch.features2, batch.policy, batch.result,
                                           batch.root_value)))


def test_the_window_on_cuda_samples_what_the_host_samples():
    buffer = window(300, 700, entries_per_position=20)  # both rings have wrapped
    replay = DeviceReplay(buffer, CUDA)
    assert on_device(TrainConfig(), buffer, CUDA)  # auto: a small window goes to the GPU
    for seed in range(3):
        device_batch = replay.sample(128, np.random.default_rng(seed), mirror=True)
        assert device_batch.features1.device.type == "cuda"
        assert_same_batch(on_host(device_batch), buffer.sample(128, np.random.default_rng(seed), mirror=True))


@pytest.mark.parametrize("opponent", [False, True], ids=["plain", "opponent-policy"])
def test_training_steps_on_cuda_make_no_host_sync_until_the_read_back(tiny_config, opponent):
    cfg = tiny_config("device=cuda", "train.mirror=true", "train.value_target_root_weight=0.3",
                      f"model.opponent_policy={str(opponent).lower()}")
    run = RunState(cfg, CUDA)
    replay = DeviceReplay(window(1000, 600), CUDA)
    replay.refresh()
    trainer, t = run.trainer, cfg.train
    assert trainer.use_amp and all(g["fused"] for g in trainer.optimizer.param_groups)
    for _ in range(3):  # the optimizer's state, the scaler's scale, pinned blocks: made here
        trainer.step(replay.sample(t.batch_size, run.train_rng, t.mirror, opponent))
    trainer.read_back()
    torch.cuda.synchronize()
    with HostSyncCounter() as syncs:
        torch.cuda.set_sync_debug_mode("error")  # any synchronising CUDA call raises
        try:
            for _ in range(5):
                trainer.step(replay.sample(t.batch_size, run.train_rng, t.mirror, opponent))
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert syncs.count == 0, syncs.by_op
    with HostSyncCounter() as syncs:
        metrics = trainer.read_back()
    assert syncs.count == 1 and len(metrics) == 5
    assert trainer.step_count == 8 and trainer.skipped < 8  # a fresh fp16 scaler may skip its first steps


def test_the_training_bench_on_cuda_keeps_the_window_there_and_reads_back_once_per_log_every(tiny_config):
    result = train_bench.run(tiny_config(*SHORT, "device=cuda"))
    assert result["device"].startswith("cuda") and result["replay_window"] == "device"
    assert result["host_syncs_per_step"] == 0.25 and result["host_syncs_max_step"] == 1
    assert result["host_sync_ops"] == {"_to_copy": 2}  # the read-backs' device -> host copies
