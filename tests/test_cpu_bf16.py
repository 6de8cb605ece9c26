"""bf16 on a CPU only where it is native (nn/cpu_bf16.py): with oneDNN kept from it, the automatic
inference dtype, the fused convolutions and train.cpu_bf16 all stay fp32, and the start-up line
says why; bf16 asked for explicitly still runs (unfused) instead of failing."""
import os
import subprocess
import sys

import pytest
import torch

from azshogi.config import Config, TrainConfig
from azshogi.nn import cpu_bf16
from azshogi.nn.evaluator import resolve_dtype
from azshogi.nn.inference import fusion_available
from azshogi.train.loop import cpu_bf16_hint
from azshogi.train.trainer import Trainer

CPU = torch.device("cpu")


@pytest.mark.parametrize("cap, allows", [(None, True), ("ALL", True), ("avx512_core_amx", True), ("AVX10_1_512", True),
                                         ("AVX512_CORE_BF16", True), ("AVX512_CORE_VNNI", False),
                                         ("AVX512_CORE", False), ("AVX2", False)])
def test_an_isa_cap_below_native_bf16_rules_bf16_out(monkeypatch, cap, allows):
    for name in cpu_bf16.ISA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if cap is not None:
        monkeypatch.setenv("DNNL_MAX_CPU_ISA", cap)  # oneDNN's older name counts too
    assert cpu_bf16.isa_cap_allows_bf16() == allows
    if not allows:
        assert not cpu_bf16.bf16_is_fast()


def test_without_fast_bf16_a_cpu_run_keeps_fp32_and_says_so(monkeypatch, tiny_net):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert resolve_dtype("auto", CPU) == torch.float32
    assert resolve_dtype("bf16", CPU) == torch.bfloat16  # asked for by name: as asked
    assert not fusion_available(CPU, torch.bfloat16)
    assert Trainer(tiny_net.train(), TrainConfig(cpu_bf16=True), CPU).autocast_dtype is None
    cfg = Config()
    assert cpu_bf16_hint(cfg, CPU) is None  # not asked for: nothing to say
    cfg.stages = {"late": {"from_checkpoint": 3, "set": {"train": {"cpu_bf16": True}}}}
    hint = cpu_bf16_hint(cfg, CPU)
    assert hint is not None and "train.cpu_bf16" in hint and "fp32" in hint


def test_where_bf16_is_fast_a_cpu_run_takes_it(monkeypatch, tiny_net):
    monkeypatch.setattr("azshogi.nn.evaluator.bf16_is_fast", lambda: True)
    monkeypatch.setattr("azshogi.train.trainer.bf16_is_fast", lambda: True)
    monkeypatch.setattr("azshogi.train.loop.bf16_is_fast", lambda: True)
    assert resolve_dtype("auto", CPU) == torch.bfloat16
    assert Trainer(tiny_net.train(), TrainConfig(cpu_bf16=True), CPU).autocast_dtype == torch.bfloat16
    cfg = Config()
    cfg.train.cpu_bf16 = True
    assert cpu_bf16_hint(cfg, CPU) is None


def test_native_bf16_is_read_from_the_cpus_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512bw\n\n"
                       "processor\t: 1\nflags\t\t: fpu\n")
    assert {"avx2", "avx512_bf16"} <= cpu_bf16.cpu_flags(cpuinfo)
    assert "fpu" in cpu_bf16.cpu_flags(cpuinfo) and "avx512_bf16" not in cpu_bf16.cpu_flags(tmp_path / "none")


SCRIPT = """
import torch
from azshogi.nn.evaluator import LocalEvaluator
from azshogi.nn.network import build
from azshogi.shogi import features
import cshogi
evaluator = LocalEvaluator(build(1, 16, 32).eval(), torch.device("cpu"), torch.bfloat16,
                           channels_last=True, fuse=True)
f1, f2 = features.allocate(64)
for i in range(64):
    features.write(cshogi.Board(), f1, f2, i)
print(evaluator.net.net.fused, evaluator.net(torch.from_numpy(f1), torch.from_numpy(f2))[0].dtype)
"""


def test_explicit_bf16_inference_runs_where_oneDNN_lacks_bf16_instructions():
    # the fused convolution refuses bf16 on AVX2 ("needs avx512bw..."): batches of 64 take it where it may
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "torch.bfloat16"]
