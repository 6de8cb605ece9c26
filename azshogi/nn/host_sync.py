"""Host synchronisations, counted as PyTorch incurs them, on any device (the CPU included).

A host synchronisation is a point where the Python thread waits for the device: a tensor's
value read into Python, or a copy the host must wait for. On a GPU each one drains the queue of
launched kernels, so a training step that makes several runs at the host's pace, not the GPU's.
On the CPU nothing waits, but the same operations are made, so counting them there says what a
step will cost on an accelerator. `HostSyncCounter` counts, among the torch operations run
inside it:

    _local_scalar_dense   .item(), float(t), int(t), bool(t) (`if t:`) of a tensor
    data-dependent shape  nonzero, masked_select, unique, boolean-mask indexing, repeat_interleave
                          without output_size: the host needs the result's size
    device -> host copy   .cpu(), .to("cpu"), .tolist() of a device tensor, copy_ into a CPU tensor
    host -> device copy   from pageable memory, or blocking (from pinned memory with
                          non_blocking=True the host does not wait)

and `read_back` (the one way this project reads several values back at once) counts one for a
CPU tensor, whose `.tolist()` torch does not dispatch: on a device it is a device -> host copy.
Operations inside torch's kernels (below the dispatcher's Python key) are not seen, nor are
torch.cuda.synchronize() and events; on CUDA, torch.cuda.set_sync_debug_mode is the second
opinion.
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

_SCALAR = {aten._local_scalar_dense.default}
_DATA_DEPENDENT = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default,
                   aten.unique_consecutive.default, aten.unique_dim.default}
_active: list["HostSyncCounter"] = []


def _device_of(value: Any) -> torch.device | None:
    return value.device if isinstance(value, torch.Tensor) else None


def _transfer_waits(src: torch.Tensor, dst: torch.device, non_blocking: bool) -> bool:
    """Whether the host waits for a copy of `src` to `dst`."""
    if src.device.type != "cpu" and dst.type == "cpu":
        return True
    if src.device.type == "cpu" and dst.type != "cpu":
        return not (non_blocking and src.is_pinned())
    return False


def _syncs(func, args: tuple, kwargs: dict) -> bool:
    if func in _SCALAR or func in _DATA_DEPENDENT:
        return True
    if func is aten.repeat_interleave.Tensor or func is aten.repeat_interleave.self_Tensor:
        return kwargs.get("output_size") is None
    if func is aten.index.Tensor:
        return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1])
    if func is aten._to_copy.default:
        dst = kwargs.get("device") or args[0].device
        return _transfer_waits(args[0], torch.device(dst), bool(kwargs.get("non_blocking", False)))
    if func is aten.copy_.default:
        non_blocking = bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking", False))
        src, dst = args[1], _device_of(args[0])
        return isinstance(src, torch.Tensor) and dst is not None and _transfer_waits(src, dst, non_blocking)
    return False


class HostSyncCounter(TorchDispatchMode):
    """`with HostSyncCounter() as syncs: ...` then `syncs.count` (and `syncs.by_op`, per
    operation). Slows what runs inside it: count, do not time, under it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.by_op: collections.Counter[str] = collections.Counter()

    def add(self, name: str) -> None:
        self.count += 1
        self.by_op[name] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _syncs(func, args, kwargs):
            self.add(str(func.overloadpacket.__name__))
        return func(*args, **kwargs)

    def __enter__(self):
        _active.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _active.remove(self)
        return super().__exit__(*exc)


def to_device(array, device: torch.device) -> torch.Tensor:
    """A numpy array (or a tensor) on `device` without the host waiting: from pinned memory
    with non_blocking on CUDA."""
    if isinstance(array, torch.Tensor):
        return array.to(device, non_blocking=True)
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if device.type == "cuda":  # from pinned memory the host does not wait for the copy
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def read_back(tensor: torch.Tensor) -> list:
    """The tensor's values as (nested) Python floats/ints: one host synchronisation, counted as
    such by an active HostSyncCounter on every device."""
    if tensor.device.type == "cpu":
        for counter in _active:
            counter.add("read_back")
        return tensor.detach().tolist()
    return tensor.detach().to("cpu").tolist()
