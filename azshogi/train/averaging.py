"""The network that plays: an average of the trained network over checkpoints (train.average_decay).

Training at a constant learning rate leaves the weights jittering around what a lower rate would
reach; their mean over the last checkpoints is nearer to it (stochastic weight averaging; KataGo
plays an exponential average of its training weights). With decay d > 0 the loop keeps, beside
the trained network, an average updated at every checkpoint, after its training phase:

    average <- d x average + (1 - d) x network        (the first: the network itself)

so checkpoint k's network weighs (1 - d) d^j, j checkpoints back: its mean age is d / (1 - d)
checkpoints (0.8: 4, as the uniform mean of the last 10). Every floating-point tensor of the
state_dict is averaged, batch-norm running statistics included; counters are the network's.

The average is what plays: a checkpoint holds it beside the network (formats/checkpoint.py,
"model_average"), and `checkpoint.network` gives it to the engine, the arena, the exports and the
in-loop rating. Self-play and training go on with the trained network. A network that changes
shape (a stage grows it) starts a new average at the next checkpoint; d = 0 keeps none.
"""
from __future__ import annotations

from typing import Optional

import torch

from azshogi.config import ModelConfig
from azshogi.nn.network import from_config


def updated(average: Optional[torch.nn.Module], model: torch.nn.Module, decay: float,
            shape: ModelConfig) -> Optional[torch.nn.Module]:
    """The average after one more checkpoint of `model` (built from `shape`): None for decay 0,
    a copy of `model` for the first one, else `average` moved (1 - decay) of the way to `model`,
    in place, on the model's device, without waiting for it."""
    if decay <= 0:
        return None
    weights = model.state_dict()
    if average is None:
        return restored(weights, decay, shape, next(model.parameters()).device)
    with torch.no_grad():
        for key, value in average.state_dict().items():
            if value.is_floating_point():
                value.lerp_(weights[key], 1.0 - decay)
            else:
                value.copy_(weights[key])
    return average


def restored(weights: Optional[dict], decay: float, shape: ModelConfig,
             device: torch.device) -> Optional[torch.nn.Module]:
    """The average a checkpoint saved (`weights`, or None), for a run with `decay`: None where
    the run keeps none, or the checkpoint had none (it starts at the next checkpoint)."""
    if decay <= 0 or weights is None:
        return None
    average = from_config(shape).to(device)
    average.load_state_dict(weights)
    return average.eval().requires_grad_(False)
