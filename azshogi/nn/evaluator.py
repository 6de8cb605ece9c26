"""Network evaluations in this process: `LocalEvaluator` (shogi/network_io.py's Evaluator on the
shared model), and the device and dtype a run's settings resolve to."""
from __future__ import annotations

import threading
import time
from typing import Optional

import numpy as np
import torch

from azshogi.config import ConfigError
from azshogi.nn.cpu_bf16 import bf16_is_fast
from azshogi.nn.inference import InferenceNet
from azshogi.nn.leaf_network import DeviceRunner, HostBuffers, LeafNetwork, StandInNetwork
from azshogi.shogi.network_io import EvaluatorTotals, LeafBatch


def resolve_device(name: str, key: str = "device") -> torch.device:
    """The torch device for a `device` setting (named `key` in errors); a device this machine
    lacks is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{key}={name!r}: allowed: auto, cpu, cuda, cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key}={name!r}: CUDA is not available on this machine (use {key}=cpu or auto)")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError(f"{key}={name!r}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                          f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return device


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """The autocast dtype for inference: 'auto' is bf16 on a GPU that has it and on a CPU where it
    is faster than fp32 (nn/cpu_bf16.py: native bf16, AVX512_BF16 or AMX), else fp16 on a GPU
    and fp32 on a CPU."""
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.bfloat16 if bf16_is_fast() else torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


class LocalEvaluator:
    """Evaluates leaf batches on the model object shared with the trainer, through its inference
    form (see inference.py): the weights are always the model's current ones. The planes are
    expanded and the legal moves' logits gathered on the device (leaf_network.py)."""

    def __init__(self, model: torch.nn.Module, device: torch.device, dtype: torch.dtype = torch.float32,
                 max_batch: Optional[int] = None, stand_in: Optional[float] = None, **inference_options):
        """stand_in: answer with leaf_network.StandInNetwork after this many seconds instead of
        the model (0: at once; to measure everything but the network)."""
        self.model, self.device, self.dtype = model, device, dtype
        self.net = InferenceNet(model, device, dtype, max_batch=max_batch, **inference_options)
        network = LeafNetwork(self.net, max_batch) if stand_in is None else StandInNetwork(device, dtype, stand_in)
        self.runner = DeviceRunner(network, device)
        self.stats = EvaluatorTotals()
        self.lock = threading.Lock()  # search threads take turns on the network
        self._spare: Optional[HostBuffers] = None  # for batches allocated elsewhere

    def refresh(self) -> None:
        """Takes the model's new weights now (after a training phase), not at the next call."""
        self.net.refresh()

    @property
    def wire(self) -> torch.dtype:
        """The dtype the logits come off the device in."""
        return self.runner.wire

    def allocate(self, rows: int) -> LeafBatch:
        buffers = self.runner.buffers(rows)
        batch = LeafBatch(rows, buffers.packed, buffers.counts, buffers.labels)
        batch.transport = buffers
        return batch

    def evaluate(self, batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            start = time.perf_counter()
            k, n = batch.size, batch.num_labels
            buffers = batch.transport if isinstance(batch.transport, HostBuffers) else self._copy_in(batch)
            self.runner.wait(self.runner.launch(buffers, k, n))
            logits = buffers.logits[:n].to(torch.float32, copy=True).numpy()
            probability = buffers.values[:k].numpy().copy()
            self.stats.add(k, time.perf_counter() - start)
            return logits, probability

    def _copy_in(self, batch: LeafBatch) -> HostBuffers:
        if self._spare is None or len(self._spare.counts) < batch.size:
            self._spare = self.runner.buffers(batch.size)
        k, n, spare = batch.size, batch.num_labels, self._spare
        spare.packed[:k], spare.counts[:k], spare.labels[:n] = batch.packed[:k], batch.counts[:k], batch.labels[:n]
        return spare


def make_evaluator(model: torch.nn.Module, device: torch.device, cfg, max_batch: int,
                   stand_in: Optional[float] = None) -> LocalEvaluator:
    """The in-process evaluator for an InferenceConfig `cfg` (stand_in: see LocalEvaluator)."""
    return LocalEvaluator(model, device, resolve_dtype(cfg.dtype.value, device), channels_last=cfg.channels_last,
                          fold_batchnorm=cfg.fold_batchnorm, compile=cfg.compile, max_batch=max_batch,
                          compile_cache=cfg.compile_cache, cuda_graphs=cfg.cuda_graphs, fuse=cfg.fuse,
                          stand_in=stand_in)
