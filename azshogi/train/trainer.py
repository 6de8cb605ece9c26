"""Optimizer steps on the shared model: losses, learning rate, mixed precision, safety.

The learning rate is a pure function of the step (no scheduler state to lose). A step runs at
the device's pace: it makes no host synchronisation (nn/host_sync.py). Whether its loss and
gradient were finite is decided on the device, and a step where either is not is skipped there
(the fused optimizer's `found_inf`, the batch-norm statistics put back, the loss scale lowered)
and counted. Each step's losses, gradient norm and verdict stay on the device until
`read_back()` brings every step since the last one back in one transfer (the loop calls it every
`train.log_every` steps and at the end of a phase); that is also where the skips are counted on
the host and where `max_consecutive_skips` skipped steps in a row stop the run with
TrainingDiverged: a diverged run trains on at most log_every - 1 steps more, all of them skipped.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional, Union, cast

import numpy as np
import torch
from torch.nn import functional as F

from azshogi.config import LrSchedule, Optimizer, TrainConfig, ValueLoss
from azshogi.nn.cpu_bf16 import bf16_is_fast
from azshogi.nn.host_sync import read_back, to_device
from azshogi.nn.network import PolicyValueNet
from azshogi.train.replay import Batch

Array = Union[np.ndarray, torch.Tensor]


class TrainingDiverged(RuntimeError):
    pass


def learning_rate(step: int, cfg: TrainConfig, warm_start: int = 0) -> float:
    """Linear warm-up over `warmup_steps` from step `warm_start` (where the optimizer began: 0, or
    the step a grown network's new optimizer took over), then constant, cosine or step decay (its
    clock the run's steps from 0)."""
    warm = min(1.0, (step - warm_start + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
    if cfg.lr_schedule == LrSchedule.cosine:
        t = min(1.0, max(0, step - cfg.warmup_steps) / cfg.decay_steps)
        decay = cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t))
    elif cfg.lr_schedule == LrSchedule.step:
        decay = max(cfg.min_lr_ratio, 0.1 ** (max(0, step - cfg.warmup_steps) // cfg.decay_steps))
    else:
        decay = 1.0
    return cfg.lr * warm * decay


@dataclass
class StepMetrics:
    policy_loss: float
    value_loss: float
    policy_entropy: float
    grad_norm: float
    lr: float
    skipped: bool
    opponent_policy_loss: Optional[float] = None  # with model.opponent_policy; None without


def value_target(batch: Batch, root_weight: float) -> Array:
    """The value head's target, a win probability in [0, 1] from the side to move: (1 - w) x the
    game's result + w x the search's root value (w = train.value_target_root_weight), mapped
    from [-1, 1]. w = 0: the result alone (a win 1, a draw 1/2, a loss 0). Float32, numpy or a
    tensor as the batch holds."""
    target = ((1.0 - root_weight) * batch.result + root_weight * batch.root_value + 1.0) * 0.5
    return target.astype(np.float32) if isinstance(target, np.ndarray) else target.float()


def losses(policy_logits: torch.Tensor, value_logit: torch.Tensor, policy_target: torch.Tensor,
           value_target: torch.Tensor, value_loss: ValueLoss):
    """Cross-entropy to the policy target; BCE (on the logit) or MSE (on the probability) to the
    value target, a win probability in [0, 1]. Returns (policy_loss, value_loss, entropy)."""
    log_p = F.log_softmax(policy_logits.float(), dim=1)
    policy_loss = -(policy_target * log_p).sum(dim=1).mean()
    entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
    value_logit = value_logit.float().squeeze(1)
    if value_loss == ValueLoss.bce:
        v_loss = F.binary_cross_entropy_with_logits(value_logit, value_target)
    else:
        v_loss = F.mse_loss(torch.sigmoid(value_logit), value_target)
    return policy_loss, v_loss, entropy


def opponent_policy_loss(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The opponent-policy head's loss: cross-entropy to the opponent's reply (Batch.
    opponent_policy), averaged over the rows of weight 1 (those with a reply in the window; 0 if
    there is none), without asking the device how many there are."""
    per_row = -(target * F.log_softmax(logits.float(), dim=1)).sum(dim=1)
    return (weight * per_row).sum() / weight.sum().clamp_min(1.0)


class Trainer:
    """`step(batch)` trains on one batch without waiting for the device; `read_back()` returns
    the StepMetrics of the steps since the last read-back (one host synchronisation)."""

    def __init__(self, model: torch.nn.Module, cfg: TrainConfig, device: torch.device):
        self.model, self.cfg, self.device = model, cfg, device
        # the network has the opponent-policy head (model.opponent_policy): batches carry its target
        self.opponent = bool(getattr(model, "opponent_policy", False))
        self.use_amp = cfg.amp and device.type == "cuda"
        self.autocast_dtype = self._autocast_dtype(cfg)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp)
        self.step_count = 0  # optimizer steps attempted (the learning-rate clock)
        self.warm_start = 0  # the step this trainer's optimizer began at (its warm-up's start)
        self.skipped = 0  # as of the last read-back
        self.consecutive_skips = 0  # as of the last read-back
        self._pending: list[tuple[torch.Tensor, float]] = []  # (the step's record on the device, its lr)
        self._read: list[StepMetrics] = []  # read back, not yet returned

    @functools.cached_property
    def optimizer(self) -> torch.optim.Optimizer:
        """Made on first use: torch's optimizers import torch._dynamo (seconds), which a run need
        not wait for before its first self-play moves. Fused (one kernel for all parameters, on
        the CPU and CUDA alike), which also skips a step on the device (`found_inf`)."""
        cfg, model = self.cfg, self.model
        params_decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        params_plain = [p for n, p in model.named_parameters() if p.ndim <= 1]
        groups = [{"params": params_decay, "weight_decay": cfg.weight_decay},
                  {"params": params_plain, "weight_decay": 0.0}]
        optimizer: torch.optim.Optimizer
        if cfg.optimizer == Optimizer.sgd:
            optimizer = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0,
                                        fused=True)
        else:
            optimizer = torch.optim.AdamW(groups, lr=cfg.lr, fused=True)
        _momentum_from_zero(optimizer)
        return optimizer

    def _autocast_dtype(self, cfg: TrainConfig) -> Optional[torch.dtype]:
        """The steps' autocast dtype: fp16 with a loss scale on CUDA (train.amp), bf16 on the CPU
        where train.cpu_bf16 asks for it (a stage may switch it) and the CPU has native bf16
        (nn/cpu_bf16.py; elsewhere a bf16 step took 2.4-10 times an fp32 one), else none (fp32)."""
        if self.use_amp:
            return torch.float16
        if cfg.cpu_bf16 and self.device.type == "cpu" and bf16_is_fast():
            return torch.bfloat16
        return None

    def configure(self, cfg: TrainConfig) -> None:
        """Trains on with a stage's settings (train/stages.py): the learning rate and the autocast
        dtype (train.cpu_bf16) follow them from the next step, their weight decay and momentum are
        set in the optimizer's groups."""
        self.cfg = cfg
        self.autocast_dtype = self._autocast_dtype(cfg)
        if "optimizer" in self.__dict__:  # made already
            decay = self.optimizer.param_groups[0]
            decay["weight_decay"] = cfg.weight_decay
            if isinstance(self.optimizer, torch.optim.SGD):
                for group in self.optimizer.param_groups:
                    group["momentum"], group["nesterov"] = cfg.momentum, cfg.momentum > 0

    def carry_on(self, old: "Trainer") -> None:
        """Takes over from `old`, the trainer of the network this one's grew from: its step count
        (the learning rate's clock), skip counts and loss scale. The optimizer starts afresh (the
        grown network's parameters are new tensors), with a warm-up of its own: a new Adam's first
        steps move every weight by the full learning rate."""
        old.read_back()
        self.step_count, self.skipped, self.consecutive_skips = old.step_count, old.skipped, old.consecutive_skips
        self.warm_start = old.step_count
        self.scaler.load_state_dict(old.scaler.state_dict())

    def step(self, batch: Batch) -> None:
        """One optimizer step on `batch` (numpy arrays, or tensors on this device), skipped on
        the device if its loss or gradient is not finite. No host synchronisation."""
        cfg, model, device = self.cfg, self.model, self.device
        lr = learning_rate(self.step_count, cfg, self.warm_start)
        optimizer = self.optimizer
        for group in optimizer.param_groups:
            group["lr"] = lr
        self.step_count += 1
        if not model.training:
            model.train()
        x1, x2, policy_target = (self._on_device(a) for a in (batch.features1, batch.features2, batch.policy))
        target = self._on_device(value_target(batch, cfg.value_target_root_weight))
        # Batch-norm statistics change in the forward pass: keep them to undo a skipped step.
        buffers = list(model.buffers())
        saved_buffers = [b.detach().clone() for b in buffers]
        with torch.autocast(device.type, dtype=self.autocast_dtype or torch.float32,
                            enabled=self.autocast_dtype is not None):
            if self.opponent:
                policy_logits, value_logit, opponent_logits = cast(PolicyValueNet, model).heads(x1, x2)
            else:
                policy_logits, value_logit = model(x1, x2)
        p_loss, v_loss, entropy = losses(policy_logits, value_logit, policy_target, target, cfg.value_loss)
        loss = p_loss + cfg.value_loss_weight * v_loss
        o_loss = torch.zeros((), device=device)
        if self.opponent:
            if batch.opponent_policy is None:
                raise ValueError("the network has the opponent-policy head: sample its batches with opponent=True")
            o_loss = opponent_policy_loss(opponent_logits, self._on_device(batch.opponent_policy),
                                          self._on_device(batch.opponent_weight))
            loss = loss + cfg.opponent_policy_weight * o_loss
        optimizer.zero_grad(set_to_none=True)
        loss_finite = torch.isfinite(loss.detach())
        # A non-finite loss makes every gradient NaN (x 1 otherwise, exactly), so that the loss
        # scaler's own overflow check sees it and lowers the scale; the loss scaler makes its
        # scale on its first use.
        poison = torch.where(loss_finite, 1.0, math.nan)
        (self.scaler.scale(loss) * poison).backward()
        self.scaler.unscale_(optimizer)
        params = [p for p in model.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])  # (for the types)
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grads_with_norm_(params, cfg.grad_clip, grad_norm)  # the parameters' .grad
        ok = loss_finite & torch.isfinite(grad_norm)
        optimizer.found_inf = (~ok).float()  # type: ignore[attr-defined]  # the fused kernels skip on 1
        optimizer.step()
        self.scaler.update()  # backs off on the overflow unscale_ found, grows otherwise
        with torch.no_grad():
            for buffer, saved in zip(buffers, saved_buffers):
                buffer.copy_(torch.where(ok, buffer, saved))
        record = torch.stack([p_loss.detach(), v_loss.detach(), entropy.detach(), grad_norm.float(), ok.float(),
                              o_loss.detach()])
        self._pending.append((record, lr))

    def _on_device(self, array: Array) -> torch.Tensor:
        return to_device(array, self.device)

    def read_back(self) -> list[StepMetrics]:
        """The metrics of every step since the last read-back, oldest first, in one transfer.
        Counts the skipped steps; raises TrainingDiverged when `max_consecutive_skips` steps in
        a row were skipped."""
        self._collect()
        read, self._read = self._read, []
        return read

    def _collect(self) -> None:
        if not self._pending:
            return
        rows = read_back(torch.stack([record for record, _ in self._pending]))
        first = self.step_count - len(self._pending)
        lrs = [lr for _, lr in self._pending]
        self._pending = []
        longest, at = 0, 0
        for i, (row, lr) in enumerate(zip(rows, lrs)):
            skipped = row[4] == 0.0
            self._read.append(StepMetrics(row[0], row[1], row[2], row[3], lr, skipped,
                                          row[5] if self.opponent else None))
            self.skipped += skipped
            self.consecutive_skips = self.consecutive_skips + 1 if skipped else 0
            if self.consecutive_skips > longest:
                longest, at = self.consecutive_skips, first + i + 1
        if longest >= self.cfg.max_consecutive_skips:
            raise TrainingDiverged(
                f"{longest} training steps in a row had a non-finite loss or gradient (up to step {at}, "
                f"lr {lrs[at - first - 1]:.3g}); lower train.lr or turn off mixed precision")

    def state_dict(self) -> dict:
        self._collect()  # the skip counters as of the last step
        return {"optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict(),
                "step_count": self.step_count, "warm_start": self.warm_start, "skipped": self.skipped,
                "consecutive_skips": self.consecutive_skips}

    def load_state_dict(self, state: dict) -> None:
        optimizer_state = dict(state["optimizer"])
        # Checkpoints written before the optimizer was fused: loading them as fused puts each
        # step count on the parameter's device, as the fused kernels want it.
        optimizer_state["param_groups"] = [{**g, "fused": True, "foreach": None}
                                           for g in optimizer_state["param_groups"]]
        self.optimizer.load_state_dict(optimizer_state)
        _momentum_from_zero(self.optimizer)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.step_count = int(state["step_count"])
        self.warm_start = int(state.get("warm_start", 0))  # 0 in checkpoints of 2026-11-28 and before
        self.skipped = int(state["skipped"])
        self.consecutive_skips = int(state["consecutive_skips"])
        self._pending, self._read = [], []


def _momentum_from_zero(optimizer: torch.optim.Optimizer) -> None:
    """Gives SGD with momentum a zero momentum buffer where it has none. The same first step as
    torch's (buffer = gradient, with no dampening), and a first step skipped on the device (which
    leaves a fused SGD's new buffers unwritten) no longer leaves garbage for the next."""
    if not isinstance(optimizer, torch.optim.SGD):
        return
    for group in optimizer.param_groups:
        if group["momentum"] == 0:
            continue
        for p in group["params"]:
            state = optimizer.state[p]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
