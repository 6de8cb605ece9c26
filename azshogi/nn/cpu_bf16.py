"""Where bf16 pays on a CPU: only with native bf16 instructions, AVX512_BF16 (AMD Zen 4 and 5,
Intel Cooper Lake) or AMX (Intel Xeons from Sapphire Rapids on). Without them oneDNN converts
to fp32 and back around every operation, and bf16 is several times slower than fp32.

Measured (docs/benchmarks.md, "bf16 on CPUs without native bf16"; the 3x32 network, one thread):

    CPU (oneDNN's instructions)            forward, batch 128 (bf16 / fp32)   training step (bf16 / fp32)
    Xeon with AMX                          0.38x                              0.63x
    Zen 5 EPYC (AVX512_CORE_BF16)          2-3x faster (a 5x64 network)       0.56x
    that Xeon capped at AVX512_CORE_BF16   1.36x                              1.17x
    that Xeon capped at AVX512_CORE        3.8x unfused, 55x fused            2.4x
    that Xeon capped at AVX2               7.8x unfused, the fused op refuses 9.7x

(the Zen 5 rows from 2026-11-21 and 2026-11-26, the Xeon's from 2026-12-05; the cap at
AVX512_CORE_BF16 only models such a CPU, and the real one disagreed, so the rule follows it.)
So `inference.dtype=auto` and `train.cpu_bf16` take bf16 on a CPU only where `bf16_is_fast()`,
and the fused convolutions (nn/inference.FoldedNet) run bf16 only there.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

# oneDNN's caps on the instructions it uses (the newer name first, as oneDNN reads them)
ISA_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# words in the names of oneDNN's instruction sets that have native bf16 (AVX512_CORE_BF16,
# AVX512_CORE_FP16, AVX10_1_512, AVX512_CORE_AMX and the AMX sets above them)
_NATIVE_BF16_ISAS = ("BF16", "FP16", "AVX10", "AMX")
_NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo's names


def isa_cap_allows_bf16() -> bool:
    """Whether the environment leaves oneDNN its native bf16 instructions: no cap, ALL, or a cap
    at an instruction set that has them."""
    for name in ISA_VARIABLES:
        cap = os.environ.get(name, "").strip().upper()
        if cap:
            return cap == "ALL" or any(word in cap for word in _NATIVE_BF16_ISAS)
    return True


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The first CPU's feature flags as Linux lists them; empty where there is no /proc/cpuinfo."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def bf16_is_fast() -> bool:
    """Whether bf16 runs faster than fp32 on this CPU: oneDNN's bf16 kernels, native bf16
    instructions (AVX512_BF16 or AMX in /proc/cpuinfo; AMX alone, through torch.cpu._init_amx, which
    also enables it for this process, where there is no /proc/cpuinfo), and no ISA cap below them."""
    if not isa_cap_allows_bf16():
        return False
    try:
        if not (torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
            return False
        amx = bool(torch.cpu._init_amx())
    except (AttributeError, RuntimeError):
        return False
    return amx or any(flag in cpu_flags() for flag in _NATIVE_BF16_FLAGS)
