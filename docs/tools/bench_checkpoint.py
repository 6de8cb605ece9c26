"""What a checkpoint and a pause/resume cycle cost, with a full replay window and long games in
progress (docs/benchmarks.md, "Checkpoints and pauses").

    python docs/tools/bench_checkpoint.py                      # the defaults: 500,000 positions, 128 games of 300 plies
    PYTHONPATH=/path/to/an/older/azshogi python docs/tools/bench_checkpoint.py    # the same, before

It builds the default run (`model=small`, `replay.capacity=500000`, 128 actors, on the CPU), fills
the replay buffer with positions of random games (policy targets over every legal move, as an
untrained network's Gumbel search gives them), plays `--plies` random moves in every game in
flight, then times:

- checkpoint: `Loop.save` after each of `--repeats` phases of `--phase-positions` new
  positions (the default phase), and the bytes it writes (checkpoint file and new replay
  segments);
- pause/resume: gathering the games in progress from `--workers` worker processes and giving
  them back (`state_dict()` then `load_state_dict()`), the round trip of a checkpoint's pause.

It uses only interfaces older versions share (Loop, SelfPlay, a finished game's positions, the
worker driver), so the same file measures a version from before the replay store. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


class RandomMoves:
    """A stand-in search: a random legal move, a random policy over every legal move."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def run(self, boards, plies, rngs, **kwargs):
        from azshogi.shogi import features

        width = max(len(list(b.legal_moves)) for b in boards)
        n = len(boards)
        labels = np.zeros((n, width), np.int64)
        policy = np.zeros((n, width), np.float32)
        moves, edges = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for i, board in enumerate(boards):
            legal, labs = features.legal_moves_and_labels(board)
            edges[i] = len(legal)
            labels[i, :len(legal)] = labs
            p = self.rng.random(len(legal)).astype(np.float32) + 0.5
            policy[i, :len(legal)] = p / p.sum()
            moves[i] = legal[self.rng.integers(len(legal))]
        return _Result(moves, labels, edges, policy, self.rng.uniform(-1, 1, n).astype(np.float32))


class _Result:
    def __init__(self, moves, labels, num_edges, policy, root_value):
        self.moves, self.labels, self.num_edges, self.policy, self.root_value = (moves, labels, num_edges, policy,
                                                                                 root_value)


def random_game_pool(games: int, plies: int, seed: int) -> list:
    """The training positions of random games, to be repeated into a full window."""
    from azshogi.selfplay.actors import SelfPlay
    from azshogi.shogi.rules import Rules

    selfplay = SelfPlay(RandomMoves(seed), Rules(max_plies=plies), games, seed)
    finished = []
    while len(finished) < games:
        finished += selfplay.step()
    # This tree's games carry TrainingPositions; older trees' a GameRecord of positions.
    return [g.positions if hasattr(g, "positions") else g.record for g in finished[:games]]


def fill_replay(loop, pool: list, positions: int, first_game_id: int) -> int:
    """Adds games from `pool` (fresh game ids) until `positions` more positions are in."""
    import dataclasses

    from azshogi.shogi import game_record

    added, game_id = 0, first_game_id
    while added < positions:
        r = pool[game_id % len(pool)]
        if hasattr(r, "game_ids"):  # this tree's TrainingPositions
            loop.replay.extend(dataclasses.replace(r, game_ids=np.full(len(r), game_id, np.int64)))
        else:  # an older tree's GameRecord of positions
            loop.replay.add_game(game_record.GameRecord(game_id, r.hcps, r.results, r.root_values, r.plies,
                                                        r.policy_offsets, r.labels, r.probs))
        added += len(r)
        game_id += 1
    return game_id


def long_games(selfplay, plies: int, seed: int) -> None:
    """Plays `plies` random moves in every game in flight of an in-process SelfPlay."""
    search = selfplay.search
    selfplay.search = RandomMoves(seed)
    selfplay.rules = type(selfplay.rules)(max_plies=10 * plies)
    for _ in range(plies):
        selfplay.step()
    selfplay.search = search


def file_bytes(directory: Path) -> dict:
    return {p: p.stat().st_size for p in directory.rglob("*") if p.is_file()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--positions", type=int, default=500_000, help="replay window (replay.capacity)")
    ap.add_argument("--phase-positions", type=int, default=20_000, help="new positions per phase")
    ap.add_argument("--actors", type=int, default=128, help="games in flight")
    ap.add_argument("--plies", type=int, default=300, help="plies of every game in flight")
    ap.add_argument("--workers", type=int, default=2,
                    help="worker processes for the pause/resume cycle (0: in process)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import torch

    import azshogi
    from azshogi.config import Config, to_config
    from azshogi.train.loop import Loop, build_components

    torch.set_num_threads(2)
    root = Path(tempfile.mkdtemp(prefix="azshogi-bench-ckpt-"))
    cfg = Config()
    cfg.device, cfg.run, cfg.checkpoint_root, cfg.log_root = "cpu", "bench", str(root / "ckpt"), str(root / "logs")
    cfg.replay.capacity = args.positions
    cfg.selfplay.num_actors = args.actors
    cfg.selfplay.write_hcpe3 = False
    cfg.loop.keep_checkpoints = 5
    cfg = to_config(cfg)

    pool = random_game_pool(min(64, max(4, args.positions // 2000)), 256, seed=1)
    loop = Loop(cfg, show_progress=False)
    next_id = fill_replay(loop, pool, args.positions, 10**6)
    long_games(loop.selfplay.selfplay, args.plies, seed=2)
    in_flight = sum(a.ply for a in loop.selfplay.selfplay.actors)
    entries = int(sum(len(r.labels) for r in pool)) / sum(len(r) for r in pool)

    seconds, written = [], []
    run_dir = Path(cfg.checkpoint_root) / cfg.run
    for phase in range(args.repeats + 1):
        if phase:
            next_id = fill_replay(loop, pool, args.phase_positions, next_id)
        loop.counters.checkpoints = phase + 1
        before = file_bytes(run_dir) if run_dir.exists() else {}
        start = time.perf_counter()
        loop.save(partial=False)
        elapsed = time.perf_counter() - start
        after = file_bytes(run_dir)
        new = sum(size for p, size in after.items() if before.get(p) != size)
        if phase:  # the first one stores the whole window for the first time (or is like the others)
            seconds.append(elapsed)
            written.append(new)
    ckpt_files = sorted(run_dir.glob("ckpt-*.pt"))
    state = loop.selfplay.state_dict()

    # pause/resume: the games in progress out of the workers (or the in-process driver) and back
    wcfg = Config()
    wcfg.device, wcfg.selfplay.num_actors, wcfg.selfplay.num_workers = "cpu", args.actors, args.workers
    driver = build_components(to_config(wcfg)).selfplay if args.workers else loop.selfplay
    cycles = []
    try:
        driver.load_state_dict(state)
        driver.state_dict()  # starts the workers and loads the games
        for _ in range(args.repeats):
            start = time.perf_counter()
            driver.load_state_dict(driver.state_dict())
            cycles.append(time.perf_counter() - start)
    finally:
        driver.close()
    import pickle

    report = {
        "azshogi": os.path.dirname(azshogi.__file__),
        "window_positions": len(loop.replay),
        "policy_entries_per_position": round(entries, 1),
        "plies_in_flight": in_flight,
        "checkpoint_s_median": round(statistics.median(seconds), 3),
        "checkpoint_bytes_written_median": int(statistics.median(written)),
        "checkpoint_file_bytes": ckpt_files[-1].stat().st_size,
        "run_folder_bytes": sum(file_bytes(run_dir).values()),
        "replay_memory_bytes_per_position": round(sum(a.nbytes for a in vars(loop.replay).values()
                                                      if isinstance(a, np.ndarray)) / args.positions, 1),
        "games_in_progress_pickled_bytes": len(pickle.dumps(state, pickle.HIGHEST_PROTOCOL)),
        "pause_resume_s_median": round(statistics.median(cycles), 6),  # in process: well under a ms
        "workers": args.workers,
    }
    print(json.dumps(report))
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
