"""The inference form of the shared network: batch-norm folded into the convolutions, the
weights cast once to the inference dtype, channels_last memory, and optionally torch.compile on
fixed (padded) batch shapes.

`FoldedNet` holds no weights of its own making: `refresh()` recomputes its folded tensors from
the trained model and casts them *in place* into its own (16-bit under bf16/fp16 inference),
so a forward pass casts no weight and runs without autocast. `InferenceNet.refresh()` does it
after each training phase (the loop calls it), and a call refreshes by itself whenever the
model's parameters or statistics have changed since (PyTorch bumps a tensor's version on every
in-place update, as an optimizer step or load_state_dict does; the model's tensors are listed
once, so the check costs a sum, not a walk of the model). So self-play always sees the weights
training produced, and a compiled graph stays valid across refreshes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, cast

import torch
from torch import nn
from torch.nn import functional as F

from azshogi.nn.cpu_bf16 import bf16_is_fast
from azshogi.nn.network import PolicyValueNet, ResidualBlock


def _fold(conv_weight: torch.Tensor, bn: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, bias) of conv followed by eval-mode batch norm."""
    assert bn.running_var is not None and bn.running_mean is not None  # tracked: azshogi's networks
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    return conv_weight * scale.reshape(-1, 1, 1, 1), bn.bias - bn.running_mean * scale


# The fused path's smallest batch: below it oneDNN's fused calls cost more than they save
# (3x32 on a 2-core Xeon: 0.84-0.93 times as fast at batch 1-16, 1.04 at 32, 1.23-1.66 at 128-256
# in bf16; docs/benchmarks.md, "Fused convolutions").
FUSED_MIN_BATCH = 32


class FoldedNet(nn.Module):
    """PolicyValueNet's eval-mode function with every batch norm folded away, its weights held
    in `dtype` (inputs are cast to it; the outputs come out in it)."""

    def __init__(self, source: PolicyValueNet, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.source = [source]  # a list: not registered as a submodule (no second state_dict)
        self.blocks, self.dtype = source.blocks, dtype
        self.fused = False  # the tower through _tower_fused (InferenceNet sets it where fusion_available)
        self.weights = nn.ParameterDict()
        with torch.no_grad():
            for name, tensor in self._folded().items():
                self.weights[name] = nn.Parameter(tensor.detach().to(dtype, copy=True), requires_grad=False)

    def _folded(self) -> dict:
        s = self.source[0]
        out: dict[str, torch.Tensor] = {}
        w1, b = _fold(s.stem1.weight, s.stem_bn)
        w2, _ = _fold(s.stem2.weight, s.stem_bn)
        out.update(stem1_w=w1, stem2_w=w2, stem_b=b)
        for i, module in enumerate(s.tower):
            block = cast(ResidualBlock, module)
            out[f"b{i}_w1"], out[f"b{i}_b1"] = _fold(block.conv1.weight, block.bn1)
            out[f"b{i}_w2"], out[f"b{i}_b2"] = _fold(block.conv2.weight, block.bn2)
        assert s.policy_conv.bias is not None
        out["policy_w"], out["policy_b"] = s.policy_conv.weight, s.policy_conv.bias
        out["value_w"], out["value_b"] = _fold(s.value_conv.weight, s.value_bn)
        out["fc1_w"], out["fc1_b"] = s.value_fc1.weight, s.value_fc1.bias
        out["fc2_w"], out["fc2_b"] = s.value_fc2.weight, s.value_fc2.bias
        return out

    @torch.no_grad()
    def refresh(self) -> None:
        for name, tensor in self._folded().items():
            self.weights[name].copy_(tensor)  # in place (cast): keeps dtype, memory format, compiled graphs

    def forward(self, features1: torch.Tensor, features2: torch.Tensor):
        """features2 may be (N, 57, 1, 1): its planes are constant over the board, and the 1x1
        convolution's output is broadcast."""
        w = self.weights
        features1, features2 = features1.to(self.dtype), features2.to(self.dtype)
        if self.fused and len(features1) >= FUSED_MIN_BATCH:
            x = self._tower_fused(features1, features2)
        else:
            x = F.relu(F.conv2d(features1, w["stem1_w"], w["stem_b"], padding=1) + F.conv2d(features2, w["stem2_w"]))
            for i in range(self.blocks):
                y = F.relu(F.conv2d(x, w[f"b{i}_w1"], w[f"b{i}_b1"], padding=1))
                x = F.relu(x + F.conv2d(y, w[f"b{i}_w2"], w[f"b{i}_b2"], padding=1))
        policy = F.conv2d(x, w["policy_w"], w["policy_b"]).flatten(1)
        v = F.relu(F.conv2d(x, w["value_w"], w["value_b"])).flatten(1)
        value = F.linear(F.relu(F.linear(v, w["fc1_w"], w["fc1_b"])), w["fc2_w"], w["fc2_b"])
        return policy, value

    def _tower_fused(self, features1: torch.Tensor, features2: torch.Tensor) -> torch.Tensor:
        """The stem and the residual tower of `forward`, each convolution with its bias, the
        residual (or the stem's broadcast hand planes) and the ReLU after it as one oneDNN call:
        no separate passes over the activations for the adds and ReLUs (most of a small
        network's time on a CPU)."""
        w, conv = self.weights, torch.ops.mkldnn._convolution_pointwise
        pad, unit = [1, 1], [1, 1]  # padding 1; stride and dilation 1
        hands = F.conv2d(features2, w["stem2_w"])  # (N, C, 1, 1) or (N, C, 9, 9): broadcast in the add
        x = conv.binary(features1, hands, w["stem1_w"], w["stem_b"], pad, unit, unit, 1, "add", 1.0, "relu", [], "")
        for i in range(self.blocks):
            y = conv(x, w[f"b{i}_w1"], w[f"b{i}_b1"], pad, unit, unit, 1, "relu", [], "")
            x = conv.binary(y, x, w[f"b{i}_w2"], w[f"b{i}_b2"], pad, unit, unit, 1, "add", 1.0, "relu", [], "")
        return x


def fusion_available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether FoldedNet can run fused on `device` in `dtype`: a CPU, a PyTorch built with oneDNN
    (mkldnn) and its pointwise-fused convolution (the op torch.compile's CPU code uses), and in
    bf16 only where bf16 is native (nn/cpu_bf16.py): without it the fused op refuses bf16 or runs
    it many times slower than unfused."""
    return (device.type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
            and (dtype == torch.float32 or (dtype == torch.bfloat16 and bf16_is_fast())))


def _version(tensors: list) -> int:
    return sum(t._version for t in tensors)


def batch_buckets(max_batch: int) -> list[int]:
    """Compiled shapes: powers of two from 8, and the largest batch itself."""
    sizes, b = [], 8
    while b < max_batch:
        sizes.append(b)
        b *= 2
    return sizes + [max_batch]


def _allow_recompiles(graphs: int) -> None:
    """Room for one compiled graph per bucket, and as many again (another guard, e.g. a dtype).
    Dynamo's limit (8 by default) would otherwise run every batch beyond the 8th bucket, the
    full batches from max_batch > 1024 on, uncompiled (with a warning)."""
    import torch._dynamo

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # its older name
    setattr(config, name, max(getattr(config, name), 2 * graphs))


class InferenceNet:
    """Callable (x1, x2) -> (policy logits, value logit) on the shared model's current weights."""

    def __init__(self, model: nn.Module, device: torch.device, dtype: torch.dtype = torch.float32,
                 channels_last: bool = True, fold_batchnorm: bool = True, compile: bool = False,
                 max_batch: Optional[int] = None, compile_cache: Optional[str] = None, cuda_graphs: bool = False,
                 fuse: bool = True):
        """fuse: on a CPU, run the folded network's convolutions fused with their adds and ReLUs
        (FoldedNet._tower_fused) where PyTorch has the op: channels_last only (oneDNN's bf16
        add-and-ReLU has no other layout), not with compile (which fuses by itself)."""
        self.model, self.device, self.dtype = model, device, dtype
        self.channels_last = channels_last
        self.fold = False
        self.net: nn.Module = model
        if fold_batchnorm and isinstance(model, PolicyValueNet):
            folded = FoldedNet(model, dtype).to(device)
            folded.fused = fuse and channels_last and not compile and fusion_available(device, dtype)
            self.fold, self.net = True, folded
        if channels_last:
            # Module.to takes memory_format (torch's stubs list only its tensor overloads' keywords)
            self.net = self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self._tensors = list(model.state_dict().values())  # the model's own tensors, listed once
        self._seen_version = _version(self._tensors)
        self.buckets: Optional[list[int]] = None
        self.graphs = False
        if compile:
            if compile_cache:
                Path(compile_cache).expanduser().mkdir(parents=True, exist_ok=True)
                os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(compile_cache).expanduser()))
            self.buckets = batch_buckets(max_batch or 512)
            _allow_recompiles(len(self.buckets))
            # reduce-overhead: CUDA graphs per compiled shape (on the CPU the same as the default)
            self.graphs = cuda_graphs and device.type == "cuda"
            mode = "reduce-overhead" if self.graphs else None
            self.net = cast(nn.Module, torch.compile(self.net, dynamic=False, mode=mode))  # an OptimizedModule

    def refresh(self) -> None:
        """Takes the model's current weights (folds and casts them once); the loop calls it after
        each training phase. A call also refreshes by itself if the weights changed since."""
        if self.fold:
            folded = self.net._orig_mod if hasattr(self.net, "_orig_mod") else self.net
            cast(FoldedNet, folded).refresh()
        self._seen_version = _version(self._tensors)

    def __call__(self, x1: torch.Tensor, x2: torch.Tensor):
        if _version(self._tensors) != self._seen_version:
            self.refresh()
        if self.model.training:
            self.model.eval()
        n = x1.shape[0]
        if self.buckets is not None:  # pad to a compiled shape
            size = next((b for b in self.buckets if b >= n), n)
            if size != n:
                x1 = F.pad(x1, (0, 0, 0, 0, 0, 0, 0, size - n))
                x2 = F.pad(x2, (0, 0, 0, 0, 0, 0, 0, size - n))
        if self.channels_last:
            x1 = x1.contiguous(memory_format=torch.channels_last)
            x2 = x2.contiguous(memory_format=torch.channels_last)
        # The folded weights are already in the inference dtype; the plain model needs autocast.
        with torch.inference_mode(), torch.autocast(self.device.type, dtype=self.dtype,
                                                    enabled=self.dtype != torch.float32 and not self.fold):
            if self.graphs:  # a new replay: the previous call's outputs have been consumed
                torch.compiler.cudagraph_mark_step_begin()
            policy, value = self.net(x1, x2)
        return policy[:n], value[:n]
