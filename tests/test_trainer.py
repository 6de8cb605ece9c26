"""Training steps: losses fall, the learning rate is a pure function, bad steps are skipped."""
import math

import numpy as np
import pytest
import torch

from azshogi.config import LrSchedule, TrainConfig
from azshogi.nn.host_sync import HostSyncCounter
from azshogi.train.replay import Batch
from azshogi.train.trainer import Trainer, TrainingDiverged, learning_rate


def fixed_batch(n=16, seed=0):
    rng = np.random.default_rng(seed)
    policy = np.zeros((n, 2187), np.float32)
    policy[np.arange(n), rng.integers(0, 2187, n)] = 1.0
    return Batch(rng.integers(0, 2, (n, 62, 9, 9)).astype(np.float32),
                 rng.integers(0, 2, (n, 57, 9, 9)).astype(np.float32), policy,
                 rng.choice([-1.0, 1.0], n).astype(np.float32), np.zeros(n, np.float32))


def step(trainer, batch):
    """One step and its metrics (read back at once)."""
    trainer.step(batch)
    (metrics,) = trainer.read_back()
    return metrics


def test_losses_fall_on_a_fixed_batch(tiny_net):
    trainer = Trainer(tiny_net, TrainConfig(lr=0.05, warmup_steps=0), torch.device("cpu"))
    batch = fixed_batch()
    first = step(trainer, batch)
    for _ in range(30):
        last = step(trainer, batch)
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


def test_non_finite_steps_are_skipped_then_stop_the_run(tiny_net):
    trainer = Trainer(tiny_net, TrainConfig(max_consecutive_skips=3, warmup_steps=0), torch.device("cpu"))
    before = {k: v.clone() for k, v in tiny_net.state_dict().items()}
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    assert step(trainer, bad).skipped and step(trainer, bad).skipped
    for k, v in tiny_net.state_dict().items():
        assert torch.equal(v, before[k]), k  # a skipped step changes no weight or statistic
    assert not step(trainer, fixed_batch()).skipped  # a good step resets the run of skips
    step(trainer, bad)
    step(trainer, bad)
    with pytest.raises(TrainingDiverged, match="3 training steps in a row"):
        step(trainer, bad)
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
        metrics = step(trainer, bad)
        assert metrics.skipped and not math.isfinite(metrics.policy_loss)
        assert_unchanged(tiny_net, before)
        assert trainer.scaler.get_scale() == expected_scale
    scale = trainer.scaler.get_scale()
    before = weights(tiny_net)
    good = step(trainer, fixed_batch())  # the run goes on: a finite step trains at the lower scale
    assert not good.skipped and math.isfinite(good.grad_norm)
    assert any(not torch.equal(v, before[k]) for k, v in tiny_net.state_dict().items())
    assert trainer.scaler.get_scale() == scale and trainer.skipped == 2 and trainer.consecutive_skips == 0
    step(trainer, bad)  # after steps that updated the scaler normally
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
    metrics = step(trainer, fixed_batch())
    assert metrics.skipped and math.isfinite(metrics.policy_loss) and math.isfinite(metrics.value_loss)
    assert_unchanged(model, before)
    assert trainer.scaler.get_scale() == 2.0 ** 127 * trainer.scaler.get_backoff_factor()


@pytest.mark.parametrize("clip", [1e-3, 0.0])
def test_gradients_are_clipped_to_the_norm_asked(tiny_net, clip):
    cfg = TrainConfig(optimizer="sgd", lr=1.0, momentum=0.0, weight_decay=0.0, warmup_steps=0, grad_clip=clip)
    before = {k: v.detach().clone() for k, v in tiny_net.named_parameters()}
    metrics = step(Trainer(tiny_net, cfg, torch.device("cpu")), fixed_batch())
    moved = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.detach() - before[k])
                                                  for k, p in tiny_net.named_parameters()]))
    assert metrics.grad_norm > 0.01  # the norm before clipping
    # plain SGD at lr 1 moves the weights by the (clipped) gradient
    assert float(moved) == pytest.approx(clip if clip else metrics.grad_norm, rel=1e-3)


# --- at the device's pace: no host synchronisation in a step, one per read-back ---

@pytest.mark.parametrize("optimizer,grad_clip", [("sgd", 10.0), ("adamw", 0.0)])
def test_a_step_makes_no_host_sync_and_a_read_back_one(tiny_net, optimizer, grad_clip):
    trainer = Trainer(tiny_net, TrainConfig(optimizer=optimizer, grad_clip=grad_clip, warmup_steps=0),
                      torch.device("cpu"))
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    trainer.step(fixed_batch())  # the first step makes the optimizer and its state
    with HostSyncCounter() as syncs:
        for batch in (fixed_batch(1), bad, fixed_batch(2)):  # a skipped step among them
            trainer.step(batch)
    assert syncs.count == 0, syncs.by_op
    with HostSyncCounter() as syncs:
        metrics = trainer.read_back()
    assert syncs.count == 1
    assert [m.skipped for m in metrics] == [False, False, True, False]
    assert trainer.skipped == 1 and trainer.consecutive_skips == 0


def test_skips_between_read_backs_are_counted_and_a_long_run_of_them_stops_the_run(tiny_net):
    trainer = Trainer(tiny_net, TrainConfig(max_consecutive_skips=3, warmup_steps=0), torch.device("cpu"))
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    for batch in (bad, bad, fixed_batch(), bad):
        trainer.step(batch)
    assert trainer.skipped == 0  # nothing is known on the host before the read-back
    assert [m.skipped for m in trainer.read_back()] == [True, True, False, True]
    assert (trainer.skipped, trainer.consecutive_skips) == (3, 1)
    # Three in a row (the first of them before this read-back) followed by a good step: the run
    # still stops at the read-back, naming the longest run.
    for batch in (bad, bad, fixed_batch()):
        trainer.step(batch)
    with pytest.raises(TrainingDiverged, match="3 training steps in a row"):
        trainer.read_back()


def test_state_dict_counts_the_steps_not_yet_read_back(tiny_net):
    trainer = Trainer(tiny_net, TrainConfig(warmup_steps=0), torch.device("cpu"))
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    trainer.step(fixed_batch())
    trainer.step(bad)
    state = trainer.state_dict()
    assert (state["step_count"], state["skipped"], state["consecutive_skips"]) == (2, 1, 1)
    assert [m.skipped for m in trainer.read_back()] == [False, True]  # still returned once


def test_a_skipped_first_step_leaves_sgd_momentum_as_if_it_had_not_run(tiny_net):
    """The fused SGD leaves a first step's new momentum buffers unwritten when it skips it; the
    trainer starts them at zero, so a skipped first step changes nothing."""
    import copy

    cfg = TrainConfig(optimizer="sgd", momentum=0.9, lr=0.05, warmup_steps=0)
    twin = copy.deepcopy(tiny_net)
    skipping, plain = Trainer(tiny_net, cfg, torch.device("cpu")), Trainer(twin, cfg, torch.device("cpu"))
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    skipping.step(bad)
    skipping.step_count = 0  # the same learning rates from here on
    for trainer in (skipping, plain):
        for seed in range(3):
            trainer.step(fixed_batch(seed=seed))
    assert [m.skipped for m in skipping.read_back()] == [True, False, False, False]
    for (name, a), b in zip(tiny_net.state_dict().items(), twin.state_dict().values()):
        if name.endswith("num_batches_tracked"):
            continue
        assert torch.equal(a, b), name


def test_an_optimizer_state_from_before_the_fused_optimizer_loads_fused_and_still_skips(tiny_net):
    """Checkpoints written until now hold an unfused optimizer's state (`fused: None`): loaded,
    the optimizer is fused, so that a bad step is still skipped on the device."""
    import copy

    cfg = TrainConfig(optimizer="adamw", lr=0.01, warmup_steps=0)
    trainer = Trainer(copy.deepcopy(tiny_net), cfg, torch.device("cpu"))
    trainer.step(fixed_batch())
    state = trainer.state_dict()
    old = {**state["optimizer"], "param_groups": [{**g, "fused": None} for g in state["optimizer"]["param_groups"]]}
    resumed = Trainer(tiny_net, cfg, torch.device("cpu"))
    resumed.load_state_dict({**state, "optimizer": old})
    assert all(g["fused"] for g in resumed.optimizer.param_groups)
    before = weights(tiny_net)
    bad = fixed_batch()
    bad.features1[0, 0, 0, 0] = math.nan
    resumed.step(bad)
    assert resumed.read_back()[0].skipped
    assert_unchanged(tiny_net, before)
