"""Optimizer steps on the shared model: losses, learning rate, mixed precision, safety.

The learning rate is a pure function of the step (no scheduler state to lose). A step whose
loss or gradient is not finite is skipped and counted; `max_consecutive_skips` in a row stop the
run with TrainingDiverged.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch.nn import functional as F

from azshogi.config import LrSchedule, Optimizer, TrainConfig, ValueLoss
from azshogi.train.replay import Batch


class TrainingDiverged(RuntimeError):
    pass


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up over `warmup_steps`, then constant, cosine or step decay."""
    warm = min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
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


def value_target(batch: Batch, root_weight: float) -> np.ndarray:
    """The value head's target, a win probability in [0, 1] from the side to move: (1 - w) x the
    game's result + w x the search's root value (w = train.value_target_root_weight), mapped
    from [-1, 1]. w = 0: the result alone (a win 1, a draw 1/2, a loss 0)."""
    return (((1.0 - root_weight) * batch.result + root_weight * batch.root_value + 1.0) * 0.5).astype(np.float32)


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


class Trainer:
    def __init__(self, model: torch.nn.Module, cfg: TrainConfig, device: torch.device):
        self.model, self.cfg, self.device = model, cfg, device
        self.use_amp = cfg.amp and device.type == "cuda"
        self.autocast_dtype: Optional[torch.dtype]
        if self.use_amp:
            self.autocast_dtype = torch.float16
        elif cfg.cpu_bf16 and device.type == "cpu":
            self.autocast_dtype = torch.bfloat16
        else:
            self.autocast_dtype = None
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.use_amp)
        self.step_count = 0  # optimizer steps attempted (the learning-rate clock)
        self.skipped = 0
        self.consecutive_skips = 0

    @functools.cached_property
    def optimizer(self) -> torch.optim.Optimizer:
        """Made on first use: torch's optimizers import torch._dynamo (seconds), which a run need
        not wait for before its first self-play moves."""
        cfg, model = self.cfg, self.model
        params_decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        params_plain = [p for n, p in model.named_parameters() if p.ndim <= 1]
        groups = [{"params": params_decay, "weight_decay": cfg.weight_decay},
                  {"params": params_plain, "weight_decay": 0.0}]
        if cfg.optimizer == Optimizer.sgd:
            return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)
        return torch.optim.AdamW(groups, lr=cfg.lr)

    def step(self, batch: Batch) -> StepMetrics:
        cfg, model, device = self.cfg, self.model, self.device
        lr = learning_rate(self.step_count, cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.step_count += 1
        if not model.training:
            model.train()
        x1 = torch.from_numpy(batch.features1).to(device, non_blocking=True)
        x2 = torch.from_numpy(batch.features2).to(device, non_blocking=True)
        policy_target = torch.from_numpy(batch.policy).to(device, non_blocking=True)
        target = torch.from_numpy(value_target(batch, cfg.value_target_root_weight)).to(device, non_blocking=True)
        # Batch-norm statistics change in the forward pass: keep them to undo a skipped step.
        saved_buffers = [b.detach().clone() for b in model.buffers()]
        with torch.autocast(device.type, dtype=self.autocast_dtype or torch.float32,
                            enabled=self.autocast_dtype is not None):
            policy_logits, value_logit = model(x1, x2)
        p_loss, v_loss, entropy = losses(policy_logits, value_logit, policy_target, target, cfg.value_loss)
        loss = p_loss + cfg.value_loss_weight * v_loss
        self.optimizer.zero_grad(set_to_none=True)
        grad_norm = float("nan")
        # The loss itself when the scaler is off; on its first use the scaler makes its scale here,
        # which a skipped step lowers (_back_off) even when no backward pass runs.
        scaled = self.scaler.scale(loss)
        loss_finite = bool(torch.isfinite(loss.detach()))
        if loss_finite:
            scaled.backward()
            self.scaler.unscale_(self.optimizer)
            params = [p for p in model.parameters() if p.grad is not None]
            if cfg.grad_clip > 0:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip))
            else:
                norms = [p.grad.norm() for p in params if p.grad is not None]
                grad_norm = float(torch.linalg.vector_norm(torch.stack(norms)))
        skipped = not math.isfinite(grad_norm)
        if skipped:
            self.optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                for buffer, saved in zip(model.buffers(), saved_buffers):
                    buffer.copy_(saved)
            if self.scaler.is_enabled():
                self._back_off(loss_finite)
            self.skipped += 1
            self.consecutive_skips += 1
            if self.consecutive_skips >= cfg.max_consecutive_skips:
                raise TrainingDiverged(
                    f"{self.consecutive_skips} training steps in a row had a non-finite loss or gradient "
                    f"(step {self.step_count}, lr {lr:.3g}); lower train.lr or turn off mixed precision")
        else:
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.consecutive_skips = 0
        return StepMetrics(p_loss.item(), v_loss.item(), entropy.item(), grad_norm, lr, skipped)

    def _back_off(self, loss_finite: bool) -> None:
        """Lowers the loss scale after a skipped step. With a finite loss, unscale_ has recorded
        the gradients' overflow and update() backs off by itself; with a non-finite loss no
        backward ran, nothing was recorded (update() would raise), so the scale is set by hand."""
        if loss_finite:
            self.scaler.update()
        else:
            self.scaler.update(new_scale=self.scaler.get_scale() * self.scaler.get_backoff_factor())

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict(),
                "step_count": self.step_count, "skipped": self.skipped,
                "consecutive_skips": self.consecutive_skips}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.step_count = int(state["step_count"])
        self.skipped = int(state["skipped"])
        self.consecutive_skips = int(state["consecutive_skips"])


def weights_finite(model: torch.nn.Module) -> bool:
    """Whether every floating-point weight and buffer is finite. On the CPU the check runs in
    numpy: torch's per-tensor ops each cost a thread-pool round trip, slow on a busy machine."""
    tensors = [t.detach() for t in model.state_dict().values() if t.is_floating_point()]
    if tensors and tensors[0].device.type == "cpu":
        return all(np.isfinite(t.float().numpy()).all() for t in tensors)
    return not tensors or bool(torch.isfinite(torch.cat([t.reshape(-1).float() for t in tensors])).all())
