"""The inference paths a GPU runs, run on the CPU: bf16 and fp16 inference in the evaluator and
through the inference server, torch.compile's padded batch shapes, and the runner's contract and
the server's launch-ahead with an asynchronous device faked (inference_helpers.LateDevice: each
batch's inputs are read only when it is waited for). Every answer is held to the plain network's
fp32 forward pass on the CPU. test_cuda.py runs the same checks on a GPU."""
import numpy as np
import pytest
import torch
from inference_helpers import (
    Counting,
    LateDevice,
    Reference,
    boards,
    launch_in_turn,
    representable,
    rounded,
    serve_threads,
    varied_net,
)

from azshogi.nn.evaluator import LocalEvaluator, resolve_dtype
from azshogi.nn.leaf_network import wire_name
from azshogi.selfplay.server import InferenceServer
from azshogi.train.bench import fill

CPU = torch.device("cpu")
FP32 = 1e-4  # of each output's spread: folding and channels_last reorder the float arithmetic
SIXTEEN_BIT = 0.05  # bf16 keeps 8 significant bits (measured: 0.7% of the spread), fp16 11


@pytest.fixture(scope="module")
def net():
    return varied_net()


@pytest.fixture(scope="module")
def reference(net):
    return Reference(net, boards())


def evaluate_all(evaluator, positions):
    return evaluator.evaluate(fill(evaluator.allocate(len(positions)), positions))


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_sixteen_bit_inference_in_the_evaluator_agrees_with_fp32(net, reference, name):
    dtype = resolve_dtype(name, CPU)
    evaluator = LocalEvaluator(net, CPU, dtype)
    assert evaluator.wire == dtype
    positions, everyone = boards(), np.arange(len(boards()))
    logits, probability = evaluate_all(evaluator, positions)
    reference.assert_agrees(everyone, logits, probability, SIXTEEN_BIT)
    assert representable(logits, dtype)  # computed in that dtype and passed on as they are
    fp32_logits, fp32_probability = evaluate_all(LocalEvaluator(net, CPU, torch.float32), positions)
    reference.assert_agrees(everyone, fp32_logits, fp32_probability, FP32)
    assert not representable(fp32_logits, dtype)  # which fp32 logits are not
    assert not np.array_equal(logits, rounded(fp32_logits, dtype))  # the network ran in dtype, not only its output


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_sixteen_bit_logits_cross_the_inference_server_as_they_are(net, reference, name):
    dtype = resolve_dtype(name, CPU)
    server = InferenceServer(LocalEvaluator(net, CPU, dtype), [6, 4, 8], max_batch=10, wait_s=0.01)
    try:
        assert server.wire == wire_name(dtype) and server.handle(1).wire == server.wire
        answers = serve_threads(server, boards(), requests=6)
    finally:
        server.close()
    positions = labels = 0
    for i, got in answers.items():
        for indices, logits, probability in got:
            reference.assert_agrees(indices, logits, probability, SIXTEEN_BIT, f"client {i}")
            assert representable(logits, dtype)
            positions, labels = positions + len(probability), labels + len(logits)
    assert server.bytes_out == 4 * positions + 2 * labels  # two bytes a logit in shared memory


def test_host_buffers_reused_once_their_launch_is_waited_for_never_mix_batches(net, reference):
    late = LateDevice(LocalEvaluator(net, CPU, torch.float32).runner)
    assert launch_in_turn(late, reference, boards(), FP32, launches=16, depth=2) == 15  # each written in flight
    # The check can fail: a caller that writes a buffer again while its launch is in flight
    # (one buffer for two launches in flight) gets another batch's answers.
    with pytest.raises(AssertionError, match="batch 0 logits"):
        launch_in_turn(late, reference, boards(), FP32, launches=4, depth=2, buffers=1, shuffled=True)


def test_the_server_launches_ahead_and_every_answer_is_its_own(net, reference):
    """With a device that is always behind, the server gathers the next batch into its other
    staging buffer and launches it while one is in flight; a staging buffer reused too early
    would give some client another batch's answers."""
    evaluator = LocalEvaluator(net, CPU, torch.float32)
    late = LateDevice(evaluator.runner, busy_s=0.01, launch_s=0.005)
    evaluator.runner = counting = Counting(late)
    server = InferenceServer(evaluator, [4, 4, 4, 4], max_batch=6, wait_s=0.05)
    try:
        answers = serve_threads(server, boards(), requests=8)
    finally:
        server.close()
    for i, got in answers.items():
        for indices, logits, probability in got:
            reference.assert_agrees(indices, logits, probability, FP32, f"client {i}")
    assert counting.most == 2  # launched ahead, never more than its two staging buffers
    assert late.completed == late.launched and counting.launches < 4 * 8  # in order; requests shared batches


def test_compiled_inference_pads_to_its_buckets_and_agrees(net, reference, monkeypatch):
    """inference.compile: batches padded to compiled shapes (8, 16 for max_batch 16) answer as
    the uncompiled network does, and the padding rows never reach an answer; every bucket is
    compiled even where dynamo's recompile limit is lower than their number."""
    import torch._dynamo

    torch._dynamo.reset()
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)  # below the 2 buckets
    monkeypatch.setattr(torch._dynamo.config, "fail_on_recompile_limit_hit", True)  # instead of running eagerly
    compiled = LocalEvaluator(net, CPU, torch.float32, compile=True, max_batch=16)
    assert compiled.net.buckets == [8, 16]
    positions = boards()
    for start, size in ((0, 3), (3, 11), (14, 16), (30, 13)):  # 13: 8 + 5, as two forward passes
        indices = np.arange(start, start + size)
        batch = fill(compiled.allocate(size), [positions[i] for i in indices])
        logits, probability = compiled.evaluate(batch)
        reference.assert_agrees(indices, logits, probability, FP32, f"{size} positions")
    # The compiled graphs read the weights the model has now (folded again in place).
    other = varied_net(seed=5)
    net_state = {k: v.clone() for k, v in net.state_dict().items()}
    try:
        net.load_state_dict(other.state_dict())
        indices = np.arange(5)
        logits, probability = compiled.evaluate(fill(compiled.allocate(5), [positions[i] for i in indices]))
        Reference(other, boards()).assert_agrees(indices, logits, probability, FP32, "new weights")
    finally:
        net.load_state_dict(net_state)
    torch._dynamo.reset()
