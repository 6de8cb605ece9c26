"""`azshogi-bench`: is self-play as fast as the network allows, and what does the rest cost?

With the trainer's overrides (model, search, actors, workers, device) it alternates windows of
(a) the network alone at the self-play batch size and dtype (through the same evaluator, so the
planes' expansion and the legal moves' gather count as the network's) and (b) self-play with the
configured search, after a common warm-up, and reports medians. The last line printed is one
JSON object; efficiency = selfplay_nn_evals_per_s / nn_positions_per_s.

With selfplay.num_workers = W >= 1 the self-play window runs the workers and the inference
server (the workers are paused during the forward-only windows); `mean_batch` is then the
server's mean forward-pass size, and the self-play time shares are those of an average worker
(`inference` = waiting for the server's answers).

Other modes:
- `bench.network=instant`: every evaluation is answered by leaf_network.StandInNetwork — the
  same inputs and outputs with no device work (no planes' expansion, no forward pass, no gather;
  on CUDA the host<->device copies remain). What is left is the search (in process) or the
  workers and the server around the network.
- `bench.network=delay bench.delay_ms=D`: the same stand-in answers each forward pass after D ms
  without holding the GIL, as a GPU's fixed cost per call would: a CPU-only machine sees whether
  self-play keeps such a device busy. The network alone then runs at batch / D positions per
  second, and `efficiency` is self-play's share of that bound (lockstep: about D / (search + D);
  searching while the device works: close to 1).
- `bench.fake_clients=N`: the inference server alone. N client processes send precomputed
  requests (leaves of random-game positions, `selfplay.num_actors` in all) as fast as they are
  answered; reported: positions/s, and the server process's own CPU time per position (both of
  its threads), i.e. the positions/s it can carry on one core.
- `bench.plies=[30,300]`: per-move cost against the game's length: the in-process search run on
  `selfplay.num_actors` positions reached after each number of plies (capture-biased random
  play, so that late positions have many pieces in hand and many drops), windows alternating.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import signal
import statistics
import sys
import threading
import time

import cshogi
import numpy as np
import torch

from azshogi.config import BenchNetwork, Config
from azshogi.shogi import features
from azshogi.shogi.network_io import WIRE_BYTES, LeafBatch
from azshogi.shogi.rules import random_move


def sample_positions(count: int, seed: int, plies: tuple[int, int] = (0, 300)) -> list[cshogi.Board]:
    """`count` boards reached by random play (a capture when there is one, half the time),
    each after a number of plies drawn uniformly from [plies[0], plies[1]]; finished positions
    are replaced."""
    rng = np.random.default_rng(seed)
    boards: list[cshogi.Board] = []
    while len(boards) < count:
        board, target = cshogi.Board(), int(rng.integers(plies[0], plies[1] + 1))
        for _ in range(target):
            moves = list(board.legal_moves)
            if not moves or board.is_draw(16):
                break
            board.push(random_move(board, moves, rng))
        if board.move_number - 1 == target and any(True for _ in board.legal_moves) and not board.is_draw(16):
            boards.append(board)
    return boards


def fill(batch: LeafBatch, boards) -> LeafBatch:
    batch.clear()
    for board in boards:
        batch.add(board, list(board.legal_moves))
    batch.seal()
    return batch


def transfer_bytes(positions: int, labels: int, wire: str) -> tuple[float, float]:
    """Bytes per position to and from the network: packed planes, a count and 2-byte labels in;
    a float32 win probability and the legal moves' logits out."""
    n = max(positions, 1)
    return ((positions * (features.PACKED_BYTES + 4) + 2 * labels) / n,
            (positions * 4 + WIRE_BYTES[wire] * labels) / n)


def forward_window(evaluator, batch: LeafBatch, seconds: float) -> float:
    """Positions per second of back-to-back evaluate() calls on a fixed batch."""
    count, start = 0, time.perf_counter()
    while not count or time.perf_counter() - start < seconds:  # once at least
        evaluator.evaluate(batch)
        count += batch.size
    return count / (time.perf_counter() - start)


def round_timeline(rounds, start: float, wall: float) -> dict:
    """The inference server's rounds that began in a window: medians in milliseconds of each
    stage — gather (first request in to last), launch (last request in to handed to the device
    thread), queued (to the device's start), device, answer (device done to every answer out),
    round (first request in to answers out) — the share of the window the device was busy, and
    the share of rounds queued behind the one running."""
    inside = [r for r in rounds if start <= r.launch <= start + wall]
    if not inside:
        return {}
    med = statistics.median
    stages = {"gather": lambda r: r.last_in - r.first_in, "launch": lambda r: r.launch - r.last_in,
              "queued": lambda r: r.start - r.launch, "device": lambda r: r.done - r.start,
              "answer": lambda r: r.answered - r.done, "round": lambda r: r.answered - r.first_in}
    timeline = {k: round(1000 * med(f(r) for r in inside), 3) for k, f in stages.items()}
    timeline["device_busy"] = round(sum(r.busy for r in inside) / wall, 3)
    # Rounds whose requests were all in before the previous round left the device: a batch
    # queued behind the running one (never, in lockstep).
    pairs = list(zip(inside, inside[1:]))
    timeline["queued_behind"] = round(sum(b.last_in < a.done for a, b in pairs) / max(1, len(pairs)), 3)
    return timeline


def selfplay_window(driver, seconds: float) -> dict:
    """Self-play for `seconds` (then pauses); positions and network evaluations per second,
    the time split of a searching process, forward passes and positions evaluated; with
    workers, the share of their time with every group waiting (`idle`) and the server's rounds
    (round_timeline)."""
    before, start = driver.totals(), time.perf_counter()
    for _ in driver.play(until=lambda: time.perf_counter() - start >= seconds):
        pass
    wall = time.perf_counter() - start
    done = driver.totals() - before
    n = driver.processes  # simulator times are summed over the searching processes
    inference, leaves, in_search = done.wait_seconds / n, done.leaf_seconds / n, done.simulator_seconds / n
    server = getattr(driver, "server", None)
    return {
        "idle": done.idle_seconds / n / wall,
        "timeline": round_timeline(server.rounds, start, wall) if server is not None else {},
        "positions_per_s": done.moves / wall,
        "nn_evals_per_s": done.network.positions / wall,
        "wall": wall,
        "inference": inference,
        "features": leaves,
        "search": in_search - inference - leaves,
        "other": wall - in_search,
        "nn_calls": done.network.calls,
        "nn_positions": done.network.positions,
    }


def stand_in_seconds(b) -> "float | None":
    """The stand-in network's delay for a BenchConfig: None for the real network."""
    return {BenchNetwork.real: None, BenchNetwork.instant: 0.0, BenchNetwork.delay: b.delay_ms / 1000}[b.network]


def run(cfg: Config, out=sys.stdout) -> dict:
    from azshogi.train.loop import build_components

    if threading.current_thread() is threading.main_thread():
        # SIGTERM unwinds like Ctrl-C, so that any self-play workers are stopped and joined.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    b = cfg.bench
    if b.train:  # the training step (train/train_bench.py)
        from azshogi.train import train_bench
        return train_bench.run(cfg, out)
    if b.plies:
        cfg = _in_process(cfg)
    from azshogi.selfplay import server as server_module

    server_module.KEEP_ROUNDS = 100_000  # the inference server's timeline (round_timeline)
    parts = build_components(cfg, stand_in=stand_in_seconds(b))
    print(parts.note, file=sys.stderr)
    try:
        if b.fake_clients:
            return _measure_server(parts, out)
        if b.plies:
            return _measure_plies(parts, out)
        return _measure(parts, out)
    finally:
        parts.selfplay.close()


def _in_process(cfg: Config) -> Config:
    from dataclasses import replace

    return replace(cfg, selfplay=replace(cfg.selfplay, num_workers=0, search_threads=1))


def _header(parts, batch: int, out) -> dict:
    cfg, evaluator = parts.cfg, parts.evaluator
    result = {
        "model": f"{cfg.model.blocks}x{cfg.model.channels}",
        "device": str(parts.device),
        "dtype": str(evaluator.dtype).replace("torch.", ""),
        "network": cfg.bench.network.value,
        "batch": batch,
        "actors": cfg.selfplay.num_actors,
        "workers": cfg.selfplay.num_workers,
        "search": cfg.search.kind.value,
        "simulations": cfg.search.num_simulations,
        "threads": torch.get_num_threads(),
        "repeats": cfg.bench.repeats,
        "seconds": cfg.bench.seconds,
    }
    print(f"\n{'model':<26}{result['model']} on {result['device']} ({result['dtype']}, "
          f"{result['threads']} threads)" + {"instant": ", INSTANT network",
                                             "delay": f", DELAY network ({cfg.bench.delay_ms:g} ms a call)"}.get(
              result["network"], ""), file=out)
    print(f"{'batch, actors':<26}{batch}, {cfg.selfplay.num_actors}", file=out)
    return result


def _measure(parts, out) -> dict:
    from azshogi.selfplay.drivers import selfplay_batch

    cfg, selfplay, evaluator = parts.cfg, parts.selfplay, parts.evaluator
    batch = selfplay_batch(cfg)  # the forward passes alone run at self-play's batch size
    leaves = fill(evaluator.allocate(batch), sample_positions(batch, cfg.seed))
    b = cfg.bench
    print(f"warm-up {b.warmup_seconds:.0f} s ...", file=sys.stderr)
    selfplay_window(selfplay, b.warmup_seconds)
    forward_window(evaluator, leaves, min(2.0, b.warmup_seconds))
    nn_rates, sp_runs = [], []
    for r in range(b.repeats):
        nn_rates.append(forward_window(evaluator, leaves, b.seconds))
        sp_runs.append(selfplay_window(selfplay, b.seconds))
        print(f"round {r + 1}/{b.repeats}: network {nn_rates[-1]:,.0f} pos/s, self-play "
              f"{sp_runs[-1]['positions_per_s']:,.1f} pos/s ({sp_runs[-1]['nn_evals_per_s']:,.0f} evals/s)",
              file=sys.stderr)
    median = statistics.median
    nn = median(nn_rates)
    sp = {k: median(r[k] for r in sp_runs) for k in sp_runs[0] if k != "timeline"}
    # With several search threads or groups their times overlap and a split of the wall time is meaningless.
    groups = getattr(selfplay, "groups", cfg.selfplay.search_threads)
    shares = {k: median(r[k] / r["wall"] for r in sp_runs) for k in ("search", "features", "inference", "other")} \
        if groups == 1 else {}
    timelines = [r["timeline"] for r in sp_runs if r["timeline"]]
    timeline = {k: median(t[k] for t in timelines) for k in timelines[0]} if timelines else {}
    mean_batch = sum(r["nn_positions"] for r in sp_runs) / max(1, sum(r["nn_calls"] for r in sp_runs))
    workers = cfg.selfplay.num_workers
    # A searching process's wall time per evaluation it asked for (its own share of them).
    per_eval = [1e6 * workers / r["nn_evals_per_s"] if workers else 1e6 / r["nn_evals_per_s"]
                for r in sp_runs if r["nn_evals_per_s"]]
    search_us = median(per_eval) if per_eval else float("nan")  # windows too short for one evaluation
    server = getattr(selfplay, "server", None)
    wire = str(evaluator.wire).replace("torch.", "")
    bytes_in, bytes_out = transfer_bytes(leaves.size, leaves.num_labels, wire)
    if server is not None and server.served:
        bytes_in, bytes_out = server.bytes_in / server.served, server.bytes_out / server.served
    result = _header(parts, batch, out)
    result.update({
        "nn_positions_per_s": round(nn, 1),
        "selfplay_positions_per_s": round(sp["positions_per_s"], 2),
        "selfplay_nn_evals_per_s": round(sp["nn_evals_per_s"], 1),
        "efficiency": round(sp["nn_evals_per_s"] / nn, 3),
        "mean_batch": round(mean_batch, 1),
        "search_us_per_eval": round(search_us, 2) if per_eval else None,
        "bytes_in_per_position": round(bytes_in, 1),
        "bytes_out_per_position": round(bytes_out, 1),
        "time_share": {k: round(v, 3) for k, v in shares.items()},
        "groups_per_process": groups,
        "workers_idle": round(sp["idle"], 3) if workers else None,
        "timeline_ms": timeline,
    })
    print(f"{'self-play processes':<26}" + (f"{workers} workers + inference server" if workers else "1 (in process)"),
          file=out)
    print(f"{'search':<26}{result['search']}, {result['simulations']} simulations", file=out)
    print(f"{'network alone':<26}{nn:,.0f} positions/s (median of {b.repeats})", file=out)
    print(f"{'self-play':<26}{sp['positions_per_s']:,.1f} positions/s, {sp['nn_evals_per_s']:,.0f} "
          f"network evaluations/s", file=out)
    print(f"{'efficiency':<26}{result['efficiency']:.3f}", file=out)
    print(f"{'mean forward batch':<26}{mean_batch:.1f}", file=out)
    print(f"{'searching process':<26}{search_us:.1f} us of wall time per evaluation", file=out)
    print(f"{'bytes per position':<26}{bytes_in:,.0f} to the network, {bytes_out:,.0f} back "
          f"(dense planes and full rows: 38,556 and 8,752)", file=out)
    if shares:
        print("self-play time: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()), file=out)
    if workers:
        print(f"{'workers':<26}{groups} group(s) of games each; all groups waiting {sp['idle']:.0%} of the time",
              file=out)
    if timeline:
        print(f"{'server round (median)':<26}" + ", ".join(f"{k} {timeline[k]:.2f}" for k in
              ("gather", "launch", "queued", "device", "answer", "round")) + " ms; device busy "
              f"{timeline['device_busy']:.0%}; {timeline['queued_behind']:.0%} of batches queued behind the running "
              f"one", file=out)
    print(json.dumps(result), file=out)
    return result


def fake_client_main(handle, packed: np.ndarray, counts: np.ndarray, labels: np.ndarray) -> None:
    """A client that sends the same precomputed request, as fast as it is answered, until the
    server goes (bench.fake_clients)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from azshogi.selfplay.server import ClientEvaluator, ServerGone

    client = ClientEvaluator(handle)
    batch = client.allocate(len(packed))
    batch.packed[:], batch.counts[:], batch.labels[:len(labels)] = packed, counts, labels
    batch.size, batch.num_labels = len(packed), len(labels)
    try:
        while True:
            client.evaluate(batch)
    except ServerGone:
        pass
    finally:
        client.close()


def _measure_server(parts, out) -> dict:
    from azshogi.selfplay.server import InferenceServer
    from azshogi.selfplay.workers import STARTUP_TIMEOUT_S, shares

    cfg, evaluator = parts.cfg, parts.evaluator
    b = cfg_bench = cfg.bench
    rows = shares(cfg.selfplay.num_actors, b.fake_clients)
    max_batch = cfg.selfplay.server_max_batch or sum(rows)
    server = InferenceServer(evaluator, rows, max_batch, cfg.selfplay.server_wait_ms / 1000)
    processes = []
    try:
        boards = sample_positions(sum(rows), cfg.seed)
        ctx = mp.get_context("spawn")
        for i, n in enumerate(rows):
            batch = fill(LeafBatch(n), boards[server.offsets[i]:server.offsets[i] + n])
            p = ctx.Process(target=fake_client_main, daemon=True, name=f"azshogi-fake-client-{i}",
                            args=(server.handle(i), batch.packed.copy(), batch.counts.copy(),
                                  batch.labels[:batch.num_labels].copy()))
            p.start()
            server.client_started(i)
            processes.append(p)
        everyone = set(range(len(rows)))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while server.stats.positions < 2 * sum(rows):  # every client is up and asking
            if time.monotonic() > deadline or not all(p.is_alive() for p in processes):
                raise RuntimeError("the fake clients did not start")
            server.serve(everyone, 0.5)
        server.serve(everyone, cfg_bench.warmup_seconds)
        runs = []
        for r in range(cfg_bench.repeats):
            stats, bytes_before = (server.stats.calls, server.served), (server.bytes_in, server.bytes_out)
            wall, cpu = time.perf_counter(), time.process_time()
            server.serve(everyone, cfg_bench.seconds)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            calls, positions = server.stats.calls - stats[0], server.served - stats[1]
            runs.append({"positions_per_s": positions / wall, "cpu_us_per_position": 1e6 * cpu / max(positions, 1),
                         "mean_batch": positions / max(calls, 1),
                         "bytes_in": (server.bytes_in - bytes_before[0]) / max(positions, 1),
                         "bytes_out": (server.bytes_out - bytes_before[1]) / max(positions, 1)})
            print(f"round {r + 1}/{cfg_bench.repeats}: {runs[-1]['positions_per_s']:,.0f} pos/s, server "
                  f"{runs[-1]['cpu_us_per_position']:.2f} us CPU per position", file=sys.stderr)
    finally:
        server.close()
        for p in processes:
            p.join(5.0)
            if p.is_alive():
                p.kill()
                p.join()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    result = _header(parts, max_batch, out)
    result.update({
        "mode": "server", "fake_clients": b.fake_clients,
        "server_positions_per_s": round(med["positions_per_s"], 1),
        "server_cpu_us_per_position": round(med["cpu_us_per_position"], 3),
        "server_positions_per_cpu_s": round(1e6 / med["cpu_us_per_position"], 1),
        "mean_batch": round(med["mean_batch"], 1),
        "bytes_in_per_position": round(med["bytes_in"], 1),
        "bytes_out_per_position": round(med["bytes_out"], 1),
    })
    print(f"{'inference server':<26}{b.fake_clients} fake clients with precomputed requests, no search", file=out)
    print(f"{'served':<26}{med['positions_per_s']:,.0f} positions/s (mean batch {med['mean_batch']:.1f})", file=out)
    print(f"{'server CPU':<26}{med['cpu_us_per_position']:.2f} us per position = "
          f"{1e6 / med['cpu_us_per_position']:,.0f} positions/s on one core", file=out)
    print(f"{'bytes per position':<26}{med['bytes_in']:,.0f} to the network, {med['bytes_out']:,.0f} back", file=out)
    print(json.dumps(result), file=out)
    return result


def _measure_plies(parts, out) -> dict:
    cfg, b = parts.cfg, parts.cfg.bench
    search = parts.selfplay.selfplay.search
    actors = cfg.selfplay.num_actors
    sets = {p: sample_positions(actors, cfg.seed + p, (p, p)) for p in b.plies}
    rngs = [np.random.default_rng(i) for i in range(actors)]
    tree = search.simulator.tree

    def window(ply: int, seconds: float) -> tuple[float, float]:
        boards, plies = sets[ply], np.full(actors, ply, np.int64)
        count, work, start = 0, tree.work, time.perf_counter()
        while not count or time.perf_counter() - start < seconds:  # once at least (a warm-up of 0 s)
            search.run(boards, plies, rngs)
            count += actors
        return count / (time.perf_counter() - start), (tree.work - work) / count

    for ply in b.plies:
        window(ply, b.warmup_seconds / len(b.plies))
    runs: dict = {p: [] for p in b.plies}
    for r in range(b.repeats):
        for ply in b.plies:
            runs[ply].append(window(ply, b.seconds))
        print(f"round {r + 1}/{b.repeats}: " + ", ".join(f"ply {p}: {runs[p][-1][0]:,.1f} pos/s" for p in b.plies),
              file=sys.stderr)
    rates = {p: statistics.median(x[0] for x in runs[p]) for p in b.plies}
    legal = {p: float(np.mean([len(list(board.legal_moves)) for board in sets[p]])) for p in b.plies}
    first = b.plies[0]
    result = _header(parts, actors, out)
    result.update({"mode": "plies", "positions_per_s": {str(p): round(v, 2) for p, v in rates.items()},
                   "relative": {str(p): round(v / rates[first], 3) for p, v in rates.items()},
                   "mean_legal_moves": {str(p): round(v, 1) for p, v in legal.items()},
                   "tree_cells_per_position": {str(p): round(runs[p][-1][1], 1) for p in b.plies},
                   "tree_width": tree.width})
    for p in b.plies:
        print(f"{'after ' + str(p) + ' plies':<26}{rates[p]:,.1f} positions/s ({rates[p] / rates[first]:.2f} of ply "
              f"{first}), {legal[p]:.0f} legal moves on average", file=out)
    print(json.dumps(result), file=out)
    return result
