"""Training steps: losses fall, the learning rate is a pure function, bad steps are skipped."""
import math

import numpy as np
import pytest
import torch
from conftest import compose_config

from azshogi.config import LrSchedule, TrainConfig, to_config
from azshogi.train.replay import Batch
from azshogi.train.trainer import Trainer, TrainingDiverged, learning_rate


def fixed_batch(n=16, seed=0):
    rng = np.random.default_rng(seed)
    policy = np.zeros((n, 2187), np.float32)
    policy[np.arange(n), rng.integers(0, 2187, n)] = 1.0
    return Batch(rng.integers(0, 2, (n, 62, 9, 9)).astype(np.float32),
                 rng.integers(0, 2, (n, 57, 9, 9)).astype(np.float32), policy,
                 rng.choice([-1.0, 1.0], n).astype(np.float32), np.zeros(n, np.float32))


def test_losses_fall_on_a_fixed_batch(tiny_net):
    trainer = Trainer(tiny_net, TrainConfig(lr=0.05, warmup_steps=0), torch.device("cpu"))
    batch = fixed_batch()
    first = trainer.step(batch)
    for _ in range(30):
        last = trainer.step(batch)
    assert last.policy_loss < first.policy_loss - 1.0
    assert last.value_loss < first.value_loss


def test_learning_rate_is_a_function_of_the_step():
    cfg = TrainConfig(lr=0.1, warmup_steps=10, lr_schedule=LrSchedule.cosine, decay_steps=100, min_lr_ratio=0.0)
    assert learning_rate(0, cfg) == pytest.approx(0.01)
    assert learning_rate(9, cfg) == pytest.approx(0.1)
    assert learning_rate(60, cfg) == pytest.approx(0.05)
    assert learning_rate(110, cfg) == pytest.approx(0.0, abs=1e-12)
    step = TrainConfig(lr=0.1, warmup_steps=0, lr_schedule=LrSchedule.step, decay_steps=50, min_lr_ratio=0.001)
    assert [learning_rate(s, step) for s in (0, 49, 50, 120)] == pytest.approx([0.1, 0.1, 0.01, 0.001])


def test_the_cpu_preset_drops_its_learning_rate_to_a_tenth_from_checkpoint_101():
    cfg = to_config(compose_config(["+experiment=cpu"]))
    steps = cfg.loop.steps_per_checkpoint
    first_of_101 = 100 * steps
    assert learning_rate(first_of_101 - 1, cfg.train) == pytest.approx(cfg.train.lr)
    assert learning_rate(first_of_101, cfg.train) == pytest.approx(cfg.train.lr / 10)
    assert learning_rate(1_000_000, cfg.train) == pytest.approx(cfg.train.lr / 10)  # and stays there


def test_non_finite_steps_are_skipped_then_stop_the_run(tiny_net):
    trainer = Trainer(tiny_net, TrainConfig(max_consecutive_skips=3, warmup_steps=0), torch.device("cpu"))
    before = {k: v.clone() for k, v in tiny_net.state_dict().items()}
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    assert trainer.step(bad).skipped and trainer.step(bad).skipped
    for k, v in tiny_net.state_dict().items():
        assert torch.equal(v, before[k]), k  # a skipped step changes no weight or statistic
    assert not trainer.step(fixed_batch()).skipped  # a good step resets the run of skips
    trainer.step(bad)
    trainer.step(bad)
    with pytest.raises(TrainingDiverged, match="3 training steps in a row"):
        trainer.step(bad)
    assert trainer.skipped == 5


def cpu_scaled_trainer(net, init_scale=2.0 ** 10):
    """A trainer whose loss scaler is on although it trains on the CPU: torch's GradScaler works
    there too, so AMP's skip path runs without a GPU. (Production turns the scaler on with AMP
    on CUDA only.)"""
    trainer = Trainer(net, TrainConfig(lr=0.05, warmup_steps=0, max_consecutive_skips=10), torch.device("cpu"))
    assert not trainer.scaler.is_enabled()
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    return trainer


def weights(net):
    return {k: v.clone() for k, v in net.state_dict().items()}


def assert_unchanged(net, before):
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k]), k  # weights and batch-norm statistics


def test_a_non_finite_loss_under_loss_scaling_is_a_skipped_step_that_lowers_the_scale(tiny_net):
    # An fp16 overflow in the forward pass gives a non-finite loss: no backward pass runs, so the
    # scaler has recorded no inf check and cannot back off by itself.
    trainer = cpu_scaled_trainer(tiny_net)
    backoff = trainer.scaler.get_backoff_factor()
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    for expected_scale in (2.0 ** 10 * backoff, 2.0 ** 10 * backoff ** 2):  # the very first step too
        before = weights(tiny_net)
        metrics = trainer.step(bad)
        assert metrics.skipped and not math.isfinite(metrics.policy_loss)
        assert_unchanged(tiny_net, before)
        assert trainer.scaler.get_scale() == expected_scale
    scale = trainer.scaler.get_scale()
    before = weights(tiny_net)
    good = trainer.step(fixed_batch())  # the run goes on: a finite step trains at the lower scale
    assert not good.skipped and math.isfinite(good.grad_norm)
    assert any(not torch.equal(v, before[k]) for k, v in tiny_net.state_dict().items())
    assert trainer.scaler.get_scale() == scale and trainer.skipped == 2 and trainer.consecutive_skips == 0
    trainer.step(bad)  # after steps that updated the scaler normally
    assert trainer.scaler.get_scale() == scale * backoff and trainer.skipped == 3


class SteepPolicy(torch.nn.Module):
    """The network with its policy logits multiplied by 100: finite losses, steep gradients."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x1, x2):
        policy, value = self.net(x1, x2)
        return policy * 100.0, value


def test_a_finite_loss_with_overflowing_gradients_is_skipped_and_lowers_the_scale(tiny_net):
    # A scale near float32's largest value makes the scaled gradients overflow (as fp16's do).
    model = SteepPolicy(tiny_net)
    trainer = cpu_scaled_trainer(model, init_scale=2.0 ** 127)
    before = weights(model)
    metrics = trainer.step(fixed_batch())
    assert metrics.skipped and math.isfinite(metrics.policy_loss) and math.isfinite(metrics.value_loss)
    assert_unchanged(model, before)
    assert trainer.scaler.get_scale() == 2.0 ** 127 * trainer.scaler.get_backoff_factor()
