"""Growing the network without starting over: a function-preserving expansion (Net2Net, Chen et
al. 2016) of a `PolicyValueNet` to more residual blocks and/or more channels.

- Deeper: new residual blocks are appended to the tower as the identity. A block computes
  relu(x + bn2(conv2(relu(bn1(conv1 x))))) on a post-relu x, so bn2's weight and bias at 0 make
  it return x exactly, in eval and in train mode. Its convolutions keep random weights, so they
  start learning as soon as bn2's weight moves.
- Wider (Net2WiderNet): new channel j of a layer copies old channel g(j) (its output weights and
  its batch norm's weight, bias and running statistics). The residual stream (the stem, every
  block's output, the heads' inputs) has one mapping g; each block's inner layer its own. A
  consumer's input weights for the copies of one old channel are split among them with random
  positive shares that sum to 1 (per weight), so the function is preserved while the copies,
  weighted differently downstream, get different gradients and part ways.

`value_hidden` is unchanged, and so is whether the network has the opponent-policy head (grown
as policy_conv is). The grown network is a plain `PolicyValueNet` on the input's device,
dtype and memory format, in the input's train/eval mode; its optimizer state starts afresh (the
parameters are new tensors).
"""
from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from azshogi.nn.network import PolicyValueNet, ResidualBlock

_SHARE_SPREAD = 0.5  # each copy's raw share is uniform in [1 - spread, 1 + spread] before normalising


def grow(model: PolicyValueNet, blocks: int, channels: int,
         generator: torch.Generator | None = None) -> PolicyValueNet:
    """`model` grown to `blocks` residual blocks of `channels` channels, computing the same policy
    logits and value (up to float rounding). `generator` (a CPU generator) draws the channel
    copies, the shares and the new blocks' weights; None draws from torch's default generator."""
    if not isinstance(model, PolicyValueNet):
        raise TypeError(f"grow takes a PolicyValueNet (not its inference form), got {type(model).__name__}")
    if blocks < model.blocks or channels < model.channels:
        raise ValueError(f"grow cannot shrink the network: {model.blocks}x{model.channels} -> "
                         f"{blocks}x{channels} (blocks and channels must be >= the current ones)")
    first = model.stem1.weight
    old = {k: v.detach().to("cpu", torch.float64) for k, v in model.state_dict().items()}
    with torch.random.fork_rng(devices=[]):  # building the new net leaves torch's global stream alone
        grown = PolicyValueNet(blocks, channels, model.value_hidden, model.opponent_policy).to(torch.float64)
    new = grown.state_dict()
    stream = _mapping(model.channels, channels, generator)
    _copy_stem(old, new, stream)
    for b in range(model.blocks):
        inner = _mapping(model.channels, channels, generator)
        _copy_block(old, new, f"tower.{b}.", stream, inner, generator)
    for b in range(model.blocks, blocks):
        _identity_block(cast(ResidualBlock, grown.tower[b]), generator)
    heads = ("policy_conv", "value_conv") + (("opponent_conv",) if model.opponent_policy else ())
    for head in heads:
        new[f"{head}.weight"].copy_(_split_inputs(old[f"{head}.weight"], stream, generator))
    for name in new:
        if name.startswith(("policy_conv.bias", "opponent_conv.bias", "value_bn.", "value_fc1.", "value_fc2.")):
            new[name].copy_(old[name])
    grown = grown.to(first.device, first.dtype)
    if first.is_contiguous(memory_format=torch.channels_last) and not first.is_contiguous():
        grown = grown.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return grown.train(model.training)


def _mapping(old: int, new: int, generator: torch.Generator | None) -> torch.Tensor:
    """g: new channel -> old channel; the first `old` channels keep their place, the others copy old
    channels drawn without repeats until every old channel has been copied once (then again)."""
    extra = new - old
    rounds = [torch.randperm(old, generator=generator) for _ in range(math.ceil(extra / old))]
    copies = torch.cat(rounds)[:extra] if rounds else torch.zeros(0, dtype=torch.long)
    return torch.cat([torch.arange(old), copies])


def _split_inputs(weight: torch.Tensor, mapping: torch.Tensor,
                  generator: torch.Generator | None) -> torch.Tensor:
    """A consumer's weight (out, in, ...) widened on its input dimension: the copies of old input
    channel i share weight[:, i] with random positive shares summing to 1 (per out and tap)."""
    shape = (weight.shape[0], len(mapping), *weight.shape[2:])
    raw = 1 + _SHARE_SPREAD * (2 * torch.rand(shape, generator=generator, dtype=torch.float64) - 1)
    totals = torch.zeros_like(weight).index_add_(1, mapping, raw)
    return weight[:, mapping] * raw / totals[:, mapping]


def _copy_norm(old: dict, new: dict, prefix: str, mapping: torch.Tensor) -> None:
    for stat in ("weight", "bias", "running_mean", "running_var"):
        new[prefix + stat].copy_(old[prefix + stat][mapping])
    new[prefix + "num_batches_tracked"].copy_(old[prefix + "num_batches_tracked"])


def _copy_stem(old: dict, new: dict, stream: torch.Tensor) -> None:
    for conv in ("stem1", "stem2"):
        new[f"{conv}.weight"].copy_(old[f"{conv}.weight"][stream])
    _copy_norm(old, new, "stem_bn.", stream)


def _copy_block(old: dict, new: dict, p: str, stream: torch.Tensor, inner: torch.Tensor,
                generator: torch.Generator | None) -> None:
    """An old block at the new width: conv1 reads the stream and writes the inner channels (g =
    `inner`), conv2 reads them and writes the stream (g = `stream`). Rows are copied before the
    inputs are split, so even the copies of one output channel get their own shares."""
    new[p + "conv1.weight"].copy_(_split_inputs(old[p + "conv1.weight"][inner], stream, generator))
    _copy_norm(old, new, p + "bn1.", inner)
    new[p + "conv2.weight"].copy_(_split_inputs(old[p + "conv2.weight"][stream], inner, generator))
    _copy_norm(old, new, p + "bn2.", stream)


def _identity_block(block: ResidualBlock, generator: torch.Generator | None) -> None:
    """A new block that returns its (post-relu) input: bn2's weight and bias at 0; random convs
    (PyTorch's default initialisation, drawn from `generator`)."""
    with torch.no_grad():
        for conv in (block.conv1, block.conv2):
            nn.init.kaiming_uniform_(conv.weight, a=math.sqrt(5), generator=generator)
        nn.init.zeros_(block.bn2.weight)
        nn.init.zeros_(block.bn2.bias)
