"""The policy-value network: a residual tower on dlshogi's inputs and outputs.

forward(features1, features2) takes (N, 62, 9, 9) and (N, 57, 9, 9) float tensors, as dlshogi's
network does, and returns (policy_logits (N, 2187), value_logit (N, 1)). The value logit's
sigmoid is the side to move's probability of winning (dlshogi's export applies that sigmoid;
`predict` and the ONNX export do too).

With `opponent_policy` the network has a second policy head (KataGo's opponent-policy target,
model.opponent_policy): logits over the opponent's reply, its destination square from the side
to move's board (features.OPPONENT_LABELS), its direction as the opponent moves. Only training
asks for it (`heads`); forward, and so search, the engine and the exports, never computes it.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from azshogi.config import ModelConfig
from azshogi.shogi.features import FEATURES1_PLANES, FEATURES2_PLANES, NUM_LABELS

POLICY_PLANES = NUM_LABELS // 81  # 27 move directions (including drops) per destination square
VALUE_PLANES = 4


class ResidualBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


class PolicyValueNet(nn.Module):
    def __init__(self, blocks: int = 5, channels: int = 64, value_hidden: int = 256,
                 opponent_policy: bool = False):
        super().__init__()
        self.blocks, self.channels, self.value_hidden = blocks, channels, value_hidden
        # Board planes get a 3x3 view; the hand/check planes (constant per plane) a 1x1 one.
        self.stem1 = nn.Conv2d(FEATURES1_PLANES, channels, 3, padding=1, bias=False)
        self.stem2 = nn.Conv2d(FEATURES2_PLANES, channels, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(channels)
        self.tower = nn.Sequential(*[ResidualBlock(channels) for _ in range(blocks)])
        self.policy_conv = nn.Conv2d(channels, POLICY_PLANES, 1)
        self.value_conv = nn.Conv2d(channels, VALUE_PLANES, 1, bias=False)
        self.value_bn = nn.BatchNorm2d(VALUE_PLANES)
        self.value_fc1 = nn.Linear(VALUE_PLANES * 81, value_hidden)
        self.value_fc2 = nn.Linear(value_hidden, 1)
        self.opponent_conv: nn.Conv2d | None = nn.Conv2d(channels, POLICY_PLANES, 1) if opponent_policy else None

    @property
    def opponent_policy(self) -> bool:
        return self.opponent_conv is not None

    def forward(self, features1: torch.Tensor, features2: torch.Tensor):
        return self._heads(self._trunk(features1, features2))

    def heads(self, features1: torch.Tensor, features2: torch.Tensor):
        """(policy logits (N, 2187), value logit (N, 1), opponent-policy logits (N, 2187) or
        None without that head): forward's outputs and the training-only head's, from one trunk."""
        x = self._trunk(features1, features2)
        policy, value = self._heads(x)
        return policy, value, self.opponent_conv(x).flatten(1) if self.opponent_conv is not None else None

    def _trunk(self, features1: torch.Tensor, features2: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem_bn(self.stem1(features1) + self.stem2(features2)))
        return self.tower(x)

    def _heads(self, x: torch.Tensor):
        # Plane-major flattening gives label = direction * 81 + square, dlshogi's label order.
        policy = self.policy_conv(x).flatten(1)
        v = F.relu(self.value_bn(self.value_conv(x))).flatten(1)
        value = self.value_fc2(F.relu(self.value_fc1(v)))
        return policy, value

    @torch.no_grad()
    def predict(self, features1: torch.Tensor, features2: torch.Tensor):
        """(policy logits (N, 2187), side to move's win probability (N,))."""
        policy, value = self(features1, features2)
        return policy, torch.sigmoid(value).squeeze(1)

    def shape(self) -> dict:
        return {"blocks": self.blocks, "channels": self.channels, "value_hidden": self.value_hidden,
                "opponent_policy": self.opponent_policy}


def build(blocks: int, channels: int, value_hidden: int, opponent_policy: bool = False) -> PolicyValueNet:
    return PolicyValueNet(blocks, channels, value_hidden, opponent_policy)


def from_config(model: ModelConfig) -> PolicyValueNet:
    """The network a run's `model` settings describe (the one way to build a run's network)."""
    return PolicyValueNet(model.blocks, model.channels, model.value_hidden, model.opponent_policy)


def weights_finite(model: torch.nn.Module) -> bool:
    """Whether every floating-point weight and buffer is finite. On the CPU the check runs in
    numpy: torch's per-tensor ops each cost a thread-pool round trip, slow on a busy machine."""
    tensors = [t.detach() for t in model.state_dict().values() if t.is_floating_point()]
    if tensors and tensors[0].device.type == "cpu":
        return all(np.isfinite(t.float().numpy()).all() for t in tensors)
    return not tensors or bool(torch.isfinite(torch.cat([t.reshape(-1).float() for t in tensors])).all())
