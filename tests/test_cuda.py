"""The GPU's hot paths on CUDA: pinned host buffers, non-blocking copies and events
(nn/leaf_network.py), the inference server's launch-ahead with worker processes, bf16 and fp16
inference, AMP training steps (overflows included), the CUDA random stream through a resume,
and the auto settings. Every answer is held to the plain network's fp32 forward pass on the CPU
(inference_helpers.Reference). Marked `cuda` and skipped without CUDA; on a GPU machine:
python -m pytest -m cuda. test_inference_paths.py runs the CPU's versions of these checks.

To make a buffer reused too early show, the device is kept busy before each launch
(torch.cuda._sleep spins on the stream): a launch's copies then run well after `launch` has
returned, while the host writes the next batch."""
import copy
import functools
import math
import time
from dataclasses import replace

import numpy as np
import pytest
import torch
from inference_helpers import (
    Counting,
    Reference,
    boards,
    launch_in_turn,
    representable,
    rounded,
    varied_net,
)
from test_workers import client_main, our_segments, random_request, serve_clients, start_clients, stop_clients

from azshogi.formats import checkpoint as ckpt
from azshogi.nn.evaluator import LocalEvaluator, resolve_dtype
from azshogi.nn.leaf_network import DeviceRunner
from azshogi.nn.network import from_config, weights_finite
from azshogi.selfplay.server import InferenceServer
from azshogi.selfplay.workers import WorkerSelfPlay
from azshogi.shogi import features
from azshogi.train.bench import fill
from azshogi.train.loop import Loop, build_components, machine_cores, train
from azshogi.train.replay import Batch
from azshogi.train.trainer import Trainer

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs CUDA (on a machine with a GPU: python -m pytest -m cuda)")]

CUDA = torch.device("cuda")
FP32 = 0.01  # of each output's spread: cuDNN's fp32 convolutions use TF32 (10 mantissa bits) by default
SIXTEEN_BIT = 0.1  # bf16 keeps 8 significant bits, fp16 11 (as test_inference.py)


@functools.lru_cache(maxsize=None)
def cycles_per_ms() -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    end.synchronize()
    return 1_000_000 / start.elapsed_time(end)


def spin(ms: float) -> None:
    """Queues `ms` milliseconds of work on the current stream and returns at once."""
    torch.cuda._sleep(int(ms * cycles_per_ms()))


class BusyRunner(DeviceRunner):
    """The real runner on a device kept busy `ms` before each launch (a slow network): its copies
    in run that much later, while the server gathers the next batch."""

    def __init__(self, runner: DeviceRunner, ms: float):
        super().__init__(runner.network, runner.device)
        self.ms = ms

    def launch(self, buffers, rows: int, num_labels: int):
        spin(self.ms)
        return super().launch(buffers, rows, num_labels)


@pytest.fixture(scope="module")
def net():
    return varied_net()


@pytest.fixture(scope="module")
def reference(net):
    return Reference(net, boards())


@pytest.fixture
def cuda_net(net):
    return copy.deepcopy(net).to(CUDA)


def evaluate_all(evaluator, positions):
    return evaluator.evaluate(fill(evaluator.allocate(len(positions)), positions))


# --- the compact leaf path: pinned buffers, non-blocking copies, events ---

def test_the_leaf_path_on_cuda_agrees_with_the_cpu_reference(cuda_net, reference):
    evaluator = LocalEvaluator(cuda_net, CUDA, torch.float32)
    buffers = evaluator.runner.buffers(4)
    assert evaluator.runner.pinned and all(t.is_pinned() for t in (*buffers.inputs, buffers.logits, buffers.values))
    logits, probability = evaluate_all(evaluator, boards())
    reference.assert_agrees(np.arange(len(boards())), logits, probability, FP32)


def test_pinned_buffers_reused_once_their_launch_is_waited_for_never_mix_batches(cuda_net, reference):
    """Back-to-back launches of different batches through two pinned buffers, each written while
    the other's launch is still on the busy device; every answer is its own batch's."""
    runner = LocalEvaluator(cuda_net, CUDA, torch.float32).runner
    overlapped = launch_in_turn(runner, reference, boards(), FP32, launches=24, depth=2,
                                before_launch=lambda: spin(50))
    assert overlapped >= 12  # batches were written while another was in flight (all but the first, normally)
    # The check can fail here: a buffer written again while its launch's copy is still queued
    # (one buffer for two launches in flight) gives another batch's answers.
    with pytest.raises(AssertionError, match="batch 0 logits"):
        launch_in_turn(runner, reference, boards(), FP32, launches=4, depth=2, buffers=1, shuffled=True,
                       before_launch=lambda: spin(50))
    torch.cuda.synchronize()


@pytest.mark.parametrize("name", ["bf16", "fp16"])
def test_sixteen_bit_inference_on_cuda_agrees_with_fp32(cuda_net, reference, name):
    dtype = resolve_dtype(name, CUDA)
    evaluator = LocalEvaluator(cuda_net, CUDA, dtype)
    assert evaluator.wire == dtype and evaluator.runner.buffers(1).logits.dtype == dtype
    everyone = np.arange(len(boards()))
    logits, probability = evaluate_all(evaluator, boards())
    reference.assert_agrees(everyone, logits, probability, SIXTEEN_BIT)
    assert representable(logits, dtype)
    fp32_logits, fp32_probability = evaluate_all(LocalEvaluator(cuda_net, CUDA, torch.float32), boards())
    reference.assert_agrees(everyone, fp32_logits, fp32_probability, FP32)
    assert not np.array_equal(logits, rounded(fp32_logits, dtype))  # the network ran in dtype


def test_captured_cuda_graphs_agree_and_take_new_weights(cuda_net, reference):
    """inference.cuda_graphs: each batch bucket's forward pass a captured graph (torch.compile's
    reduce-overhead mode); batches of several buckets agree with the reference, the graphs see
    the weights a training step writes in place, and launches in turn never mix batches."""
    evaluator = LocalEvaluator(cuda_net, CUDA, torch.bfloat16, compile=True, cuda_graphs=True, max_batch=32)
    assert evaluator.net.graphs and evaluator.net.buckets == [8, 16, 32]
    positions = boards()
    for count in (3, len(positions), 3):  # the same bucket again after another: a replay
        logits, probability = evaluate_all(evaluator, positions[:count])
        reference.assert_agrees(np.arange(count), logits, probability, SIXTEEN_BIT)
    launch_in_turn(evaluator.runner, reference, positions, SIXTEEN_BIT, launches=8, depth=2)
    before, _ = evaluate_all(evaluator, positions)
    with torch.no_grad():
        cuda_net.policy_conv.bias.add_(1.0)  # every logit up by one, as an optimizer step writes
    evaluator.refresh()
    after, _ = evaluate_all(evaluator, positions)
    np.testing.assert_allclose(after, before + 1.0, atol=0.1)


# --- the inference server: worker processes, launch-ahead ---

def first_requests_in(server, processes, seconds: float = 120.0) -> None:
    """Waits, serving nothing, until every client's first request has arrived."""
    deadline = time.monotonic() + seconds
    while not all(c.poll() for c in server.conns):
        assert time.monotonic() < deadline and all(p.is_alive() for p in processes), "a client did not ask"
        time.sleep(0.01)


@pytest.mark.parametrize("name, tolerance", [("fp32", FP32), ("bf16", SIXTEEN_BIT), ("fp16", SIXTEEN_BIT)])
def test_the_server_on_cuda_launches_ahead_and_answers_each_worker_as_the_cpu_does(cuda_net, net, name, tolerance):
    """Four client processes (test_workers.client_main: random requests written in place into
    shared memory); batches of at most 8 leaves, so requests queue up while a batch is on the
    busy device; the next batch is gathered into the other pinned staging buffer and launched
    before the first is waited for."""
    rows, requests, seeds = [8, 8, 8, 8], 12, [100, 101, 102, 103]
    positions = boards(40, seed=1)  # client_main's positions
    first = [len(random_request(np.random.default_rng(s), positions, 8)) for s in seeds]
    assert sum(first) > 8  # the first requests fill more than one batch
    dtype = resolve_dtype(name, CUDA)
    evaluator = LocalEvaluator(cuda_net, CUDA, dtype)
    evaluator.runner = counting = Counting(BusyRunner(evaluator.runner, 5))
    server = InferenceServer(evaluator, rows, max_batch=8, wait_s=0.02)
    processes = []
    try:
        processes = start_clients(server, client_main, [(s, requests) for s in seeds])
        first_requests_in(server, processes)
        received = serve_clients(server, processes, lambda r: len(r) == len(rows))
        for i in range(len(rows)):
            server.send(i, ("bye",))
        stop_clients(processes)
        assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]
    finally:
        stop_clients(processes)
        server.close()
    assert our_segments() == []
    assert counting.most == 2 and server.wire == {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[name]
    cpu = Reference(net, positions)
    for i, (kind, answers) in received.items():
        rng = np.random.default_rng(seeds[i])
        assert kind == "received" and len(answers) == requests
        for logits, probability in answers:
            indices = random_request(rng, list(range(len(positions))), rows[i])
            cpu.assert_agrees(indices, logits, probability, tolerance, f"client {i}")
            if dtype != torch.float32:
                assert representable(logits, dtype)


# --- training: AMP and the loss scaler ---

def training_batch(n: int = 16) -> Batch:
    """n positions, a uniform policy target over each one's legal moves, results +1 and -1."""
    positions = boards(n, seed=3)
    f1, f2 = features.allocate(n)
    policy = np.zeros((n, features.NUM_LABELS), np.float32)
    for i, board in enumerate(positions):
        features.write(board, f1, f2, i)
        labels = features.legal_moves_and_labels(board)[1]
        policy[i, labels] = 1.0 / len(labels)
    result = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)
    return Batch(f1, f2, policy, result, np.zeros(n, np.float32))


def amp_trainer(tiny_config):
    cfg = tiny_config("device=cuda")
    torch.manual_seed(0)
    model = from_config(cfg.model).to(CUDA)
    trainer = Trainer(model, cfg.train, CUDA)
    assert trainer.use_amp and trainer.autocast_dtype == torch.float16 and trainer.scaler.is_enabled()
    return model, trainer


def step(trainer, batch):
    """One step and its metrics (read back at once)."""
    trainer.step(batch)
    (metrics,) = trainer.read_back()
    return metrics


def snapshot(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def unchanged(model, before: dict) -> bool:
    return all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def train_until_a_step_counts(model, trainer, batch, steps: int = 12):
    """Steps until one is not skipped; each skipped one (an fp16 overflow in the gradients, as
    the scaler calibrates) must leave the weights alone and halve the scale."""
    for _ in range(steps):
        before, scale = snapshot(model), trainer.scaler.get_scale()
        metrics = step(trainer, batch)
        if not metrics.skipped:
            assert not unchanged(model, before) and trainer.scaler.get_scale() == scale
            return metrics
        assert unchanged(model, before) and trainer.scaler.get_scale() == scale * trainer.scaler.get_backoff_factor()
    raise AssertionError(f"{steps} AMP steps in a row were skipped")


def test_amp_steps_on_cuda_train(tiny_config):
    model, trainer = amp_trainer(tiny_config)
    metrics = train_until_a_step_counts(model, trainer, training_batch())
    assert math.isfinite(metrics.grad_norm) and math.isfinite(metrics.policy_loss)
    assert trainer.consecutive_skips == 0 and weights_finite(model)


def test_an_fp16_overflow_in_the_forward_pass_is_a_skipped_step(tiny_config):
    """A non-finite loss: the step skipped and counted, the weights (batch-norm statistics
    included) as they were, the loss scale lowered; training then goes on."""
    model, trainer = amp_trainer(tiny_config)
    batch = training_batch()
    bias = float(model.policy_conv.bias[0])
    with torch.no_grad():
        model.policy_conv.bias[0] = 1e5  # finite in fp32, inf in fp16: the loss overflows under autocast
    before, scale = snapshot(model), trainer.scaler.get_scale()
    metrics = step(trainer, batch)  # the first step: the scaler makes its scale here
    assert metrics.skipped and not math.isfinite(metrics.policy_loss)
    assert trainer.skipped == 1 and trainer.consecutive_skips == 1
    assert trainer.scaler.get_scale() == scale * trainer.scaler.get_backoff_factor()
    assert unchanged(model, before)
    with torch.no_grad():
        model.policy_conv.bias[0] = bias
    train_until_a_step_counts(model, trainer, batch)
    assert trainer.consecutive_skips == 0 and trainer.skipped >= 1


def test_a_gradient_overflow_is_skipped_and_halves_the_scale(tiny_config):
    model, trainer = amp_trainer(tiny_config)
    trainer.scaler.load_state_dict({**trainer.scaler.state_dict(), "scale": 2.0 ** 100})  # as a checkpoint may hold
    before = snapshot(model)
    metrics = step(trainer, training_batch())
    assert metrics.skipped and math.isfinite(metrics.policy_loss)  # the loss was finite, its gradients not
    assert trainer.scaler.get_scale() == 2.0 ** 99 and unchanged(model, before) and trainer.skipped == 1


# --- a run on CUDA: checkpoints, resume, auto settings ---

class CudaStreamLoop(Loop):
    """Moves the CUDA random stream away from the run's seed just before each checkpoint, and
    keeps what it draws just after (which a run resumed from that checkpoint must draw)."""

    def save(self, partial: bool):
        torch.cuda.manual_seed_all(1234)
        torch.rand(7, device=CUDA)
        path = super().save(partial)
        self.after = torch.rand(1000, device=CUDA).cpu()
        return path


def test_a_run_resumed_on_cuda_continues_the_cuda_random_stream(tiny_config):
    cfg = tiny_config("device=cuda", "selfplay.num_workers=0", "loop.max_checkpoints=1", "eval.every=0")
    straight = CudaStreamLoop(cfg, show_progress=False)
    straight.run()
    path = ckpt.latest(straight.paths.checkpoints)
    assert len(ckpt.load(path)["rng"]["cuda"]) == torch.cuda.device_count()
    resumed = Loop(replace(cfg, resume=str(path)), show_progress=False)  # seeds every stream from cfg.seed
    try:
        resumed.restore()
        assert resumed.resumed_from == path
        assert torch.equal(torch.rand(1000, device=CUDA).cpu(), straight.after)
    finally:
        resumed.selfplay.close()


def test_a_run_on_cuda_with_workers_trains_with_amp_and_checkpoints(tiny_config, tmp_path):
    counters = train(tiny_config("device=cuda", "selfplay.num_workers=2", "loop.max_checkpoints=1", "eval.every=0"),
                     show_progress=False)
    assert counters.checkpoints == 1 and counters.train_steps == 4 and counters.positions >= 60
    state = ckpt.load(tmp_path / "checkpoints" / "t" / "ckpt-00001.pt")
    assert state["trainer"]["scaler"]["scale"] > 0  # the loss scaler was on (an empty state when off)
    assert our_segments() == []


def test_auto_settings_on_cuda(tiny_config):
    """device=auto is CUDA; cores - 1 workers with 128 actors each (512 to 4096); bf16 inference
    where the GPU has it (else fp16)."""
    cfg = tiny_config("device=auto", "inference.dtype=auto", "selfplay.num_actors=0", "selfplay.num_workers=-1")
    parts = build_components(cfg)
    try:
        workers = max(1, machine_cores() - 1)
        actors = min(4096, max(512, 128 * workers))
        assert parts.device.type == "cuda" and next(parts.model.parameters()).is_cuda
        assert (parts.cfg.selfplay.num_workers, parts.cfg.selfplay.num_actors) == (min(workers, actors), actors)
        assert isinstance(parts.selfplay, WorkerSelfPlay) and parts.selfplay.processes == min(workers, actors)
        assert "auto for cuda" in parts.note
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        assert parts.evaluator.dtype == dtype and parts.evaluator.wire == dtype
    finally:
        parts.selfplay.close()


def test_on_cuda_a_workers_second_group_is_queued_behind_the_running_batch(tiny_config):
    """The pinned, launch-ahead server with a worker of two groups on a slow device (the delay
    network: 20 ms a batch): each group's batch waits behind the other's, none in lockstep."""
    import io

    from azshogi.train.bench import run

    result = run(tiny_config("device=cuda", "selfplay.num_workers=1", "selfplay.worker_groups=2",
                             "bench.network=delay", "bench.delay_ms=20", "bench.seconds=0.6",
                             "bench.warmup_seconds=0.3", "bench.repeats=1"), out=io.StringIO())
    assert result["device"].startswith("cuda") and result["batch"] == 3
    assert result["timeline_ms"]["queued_behind"] > 0.8 and result["timeline_ms"]["device_busy"] > 0.5
