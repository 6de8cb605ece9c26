"""Where bf16 pays on a CPU: only where oneDNN runs it on AMX tiles (Intel Xeons from the 4th
generation, Sapphire Rapids, on). Elsewhere it is slower than fp32, and on most CPUs far slower.

Measured on one AMX Xeon with oneDNN capped below AMX by ONEDNN_MAX_CPU_ISA (the 3x32 network,
one thread, 2026-12-05; docs/benchmarks.md, "bf16 on CPUs without AMX"):

    oneDNN's ISA         forward, batch 128 (bf16 / fp32)   training step (bf16 / fp32)
    AMX (uncapped)       0.38x                              0.63x
    AVX512_CORE_BF16     1.36x                              1.17x
    AVX512_CORE          3.8x unfused, 55x fused            2.4x
    AVX2                 7.8x unfused, the fused op refuses 9.7x

So `inference.dtype=auto` and `train.cpu_bf16` take bf16 on a CPU only where `bf16_is_fast()`,
and the fused convolutions (nn/inference.FoldedNet) run bf16 only there.
"""
from __future__ import annotations

import os

import torch

# oneDNN's caps on the instructions it uses (the newer name first, as oneDNN reads them)
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def isa_cap_allows_amx() -> bool:
    """Whether the environment leaves oneDNN free to use AMX: no cap, ALL, or a cap naming AMX."""
    for name in ISA_VARIABLES:
        cap = os.environ.get(name, "").strip().upper()
        if cap:
            return cap == "ALL" or "AMX" in cap
    return True


def bf16_is_fast() -> bool:
    """Whether bf16 runs faster than fp32 on this CPU: oneDNN's bf16 kernels, AMX present and
    enabled for this process (torch.cpu._init_amx asks Linux for its tile registers), and no
    ISA cap below AMX."""
    if not isa_cap_allows_amx():
        return False
    try:
        native = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
        return bool(native and torch.cpu._init_amx())
    except (AttributeError, RuntimeError):
        return False
