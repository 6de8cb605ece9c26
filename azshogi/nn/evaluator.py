"""Network evaluations in this process: `LocalEvaluator` (search/base.py's Evaluator on the
shared model), and the device and dtype a run's settings resolve to."""
from __future__ import annotations

import threading
import time

import numpy as np
import torch

from azshogi.nn.inference import InferenceNet
from azshogi.search.base import EvalStats
from azshogi.shogi import features


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={name!r}: CUDA is not available on this machine (use device=cpu or auto)")
    return device


def cpu_supports_bf16() -> bool:
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """The autocast dtype for inference: 'auto' is bf16 where the hardware has it, else fp32."""
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if cpu_supports_bf16() else torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


class LocalEvaluator:
    """Evaluates batches on the model object shared with the trainer, through its inference
    form (see inference.py): the weights are always the model's current ones."""

    def __init__(self, model: torch.nn.Module, device: torch.device, dtype: torch.dtype = torch.float32,
                 **inference_options):
        self.model, self.device, self.dtype = model, device, dtype
        self.net = InferenceNet(model, device, dtype, **inference_options)
        self.stats = EvalStats()
        self.lock = threading.Lock()  # search threads take turns on the network

    def allocate(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        if self.device.type != "cuda":
            return features.allocate(batch)
        # Page-locked host memory: the copies to the GPU can be asynchronous.
        return tuple(torch.zeros((batch, planes, 9, 9), dtype=torch.float32, pin_memory=True).numpy()
                     for planes in (features.FEATURES1_PLANES, features.FEATURES2_PLANES))

    def evaluate(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            return self._evaluate(features1, features2)

    def _evaluate(self, features1: np.ndarray, features2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = time.perf_counter()
        x1 = torch.from_numpy(features1).to(self.device, non_blocking=True)
        x2 = torch.from_numpy(features2).to(self.device, non_blocking=True)
        logits, value = self.net(x1, x2)
        with torch.inference_mode():
            probability = torch.sigmoid(value.float()).squeeze(1)
            logits_np = logits.float().cpu().numpy()
            probability_np = probability.cpu().numpy()
        self.stats.calls += 1
        self.stats.positions += len(features1)
        self.stats.seconds += time.perf_counter() - start
        return logits_np, probability_np


def make_evaluator(model: torch.nn.Module, device: torch.device, cfg, max_batch: int) -> LocalEvaluator:
    """The in-process evaluator for an InferenceConfig `cfg`."""
    return LocalEvaluator(model, device, resolve_dtype(cfg.dtype.value, device), channels_last=cfg.channels_last,
                          fold_batchnorm=cfg.fold_batchnorm, compile=cfg.compile, max_batch=max_batch,
                          compile_cache=cfg.compile_cache)
