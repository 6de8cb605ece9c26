"""Policy surprise: how much a position's search taught the network that played it.

KataGo (Wu 2019, "policy surprise weighting") samples positions for training partly in
proportion to the KL divergence from the network's policy to the search's policy target: a
position where the search found what the network did not expect teaches more than one where it
agreed. Here a position's surprise is

    KL(target || network) = sum over moves of target * (log target - log network policy)

in nats, >= 0, computed by `score` once, at the start of the first training phase that sees the
position. The weights then are those of the phase's self-play, the network that played it (for a
position restored without a surprise, or one from a seed file, the network of that phase). The
replay buffer keeps the surprise beside each position and a checkpoint saves the window's
(train/replay.py), so a resumed run samples as it would have. With train.surprise_weight w, each
row of a batch is drawn in proportion to the surprise with probability w, uniformly otherwise;
w = 0 (the default) computes nothing and samples as before.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch.nn import functional as F

from azshogi.nn.host_sync import read_back, to_device
from azshogi.train.replay import ReplayBuffer

SCORE_BATCH = 1024  # positions per forward pass


def policy_kl(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B,) KL(target || softmax(logits)) in nats; a target row is a distribution (B, labels)."""
    log_p = F.log_softmax(logits.float(), dim=1)
    log_t = torch.log(target.clamp_min(1e-30))
    return (target * (log_t - log_p)).sum(dim=1).clamp_min(0.0)


@torch.no_grad()
def score(model: torch.nn.Module, buffer: ReplayBuffer, device: torch.device,
          batch_size: int = SCORE_BATCH) -> tuple[int, Optional[float]]:
    """Gives every live position of `buffer` without a surprise its surprise under `model` (in
    eval mode; its mode is put back). Returns how many were scored and their mean (None: none)."""
    todo = buffer.unscored()
    if not len(todo):
        return 0, None
    was_training = model.training
    model.eval()
    try:
        out = []
        for start in range(0, len(todo), batch_size):
            slots = todo[start:start + batch_size] % buffer.capacity
            batch = buffer.gather(slots)
            logits, _ = model(to_device(batch.features1, device), to_device(batch.features2, device))
            out.append(policy_kl(logits, to_device(batch.policy, device)))
        values = np.asarray(read_back(torch.cat(out)), np.float32)  # one transfer for the phase
    finally:
        model.train(was_training)
    buffer.set_surprise(todo, values)
    return len(todo), float(values.mean())
