"""The USI engine's search cost per leaf, without the network: an instant evaluator (precomputed
logits and values) stands in for it, so what is measured is the Python and numpy work of the
search itself — descents, leaf preparation (rules, legal moves, features), expansion, backup.

    python docs/tools/engine_profile.py [--nodes 4000] [--batch 8 32 256] [--repeats 5]

Prints, per batch size and position, the CPU time per leaf (process time, so that other
programs on a shared machine count less; min and median of the repeats) and, where the search
has them, the shares of its parts: descend_together (the descents, level by level),
prepare_paths (the leaves: rules, legal moves, features), evaluate_and_expand (sealing the leaf
batch — packed planes and labels — the stand-in's answer and the expansion), back_up. Works on
older azshogi versions too (their GameSearch.run took a should_stop callback, their evaluators
dense planes): run it with PYTHONPATH pointing at another checkout to compare.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time

import cshogi
import numpy as np

from azshogi.search.anytime import GameSearch
from azshogi.search.simulator import Simulator
from azshogi.shogi import features
from azshogi.shogi.rules import Rules

POSITIONS = {"startpos": [], "mid11": "7g7f 3c3d 2g2f 8c8d 2f2e 8d8e 6i7h 4a3b 2e2d 2c2d 2h2d".split()}
PARTS = ("_descend_together", "_prepare_paths", "_evaluate_and_expand", "_back_up")


class InstantEvaluator:
    """Precomputed pseudo-random logits and win probabilities: costs nothing per call. Speaks the
    evaluator interface of the azshogi it runs with: leaf batches (shogi/network_io.py: the logits of
    the leaves' legal moves, flat) or, before them, dense planes in and full policy rows out."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.logits = rng.normal(0, 2, (4096, 2187)).astype(np.float32)
        self.flat = self.logits[:, :600].reshape(-1)  # legal moves' logits, taken in turn
        self.values = rng.uniform(0.3, 0.7, 4096).astype(np.float32)
        from older_trees import Calls, leaf_batch_class  # this folder's

        self.stats, self.i, self.j = Calls(), 0, 0
        self.leaf_batch = leaf_batch_class()

    def allocate(self, batch):
        return self.leaf_batch(batch) if self.leaf_batch else features.allocate(batch)

    def evaluate(self, *planes_or_batch):
        if self.leaf_batch:
            (batch,) = planes_or_batch
            n, labels = batch.size, batch.num_labels
            j, self.j = self.j, (self.j + labels) % (len(self.flat) // 2)
            logits = self.flat[j:j + labels]
        else:
            n = len(planes_or_batch[0])
            logits = self.logits[self.i:self.i + n]
        self.stats.calls += 1
        self.stats.positions += n
        i, self.i = self.i, (self.i + n) % 2048
        return logits, self.values[i:i + n]


def timed_parts() -> dict:
    """Wraps the simulator's parts (where it has them) to add up their process time."""
    spent = {}
    for name in PARTS:
        method = getattr(Simulator, name, None)
        if method is None:
            continue

        @functools.wraps(method)
        def wrapper(*args, _method=method, _name=name, **kwargs):
            start = time.process_time()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.process_time() - start

        setattr(Simulator, name, wrapper)
    return spent


def one_search(batch: int, moves: list, nodes: int, spent: dict) -> tuple[float, int, float, dict]:
    """(process seconds, simulations, mean forward batch, seconds per part) of one search from a
    fresh tree; the root's expansion (in prepare) is not counted."""
    evaluator = InstantEvaluator()
    search = GameSearch(evaluator, Rules(), batch_size=batch, max_tree_nodes=10 * nodes + 1000)
    board = cshogi.Board()
    for m in moves:
        board.push_usi(m)
    search.prepare(board, "", moves)
    anytime = hasattr(search, "run_games")  # this version: plan_step answers a step size
    before, calls, positions = dict(spent), evaluator.stats.calls, evaluator.stats.positions
    start = time.process_time()
    report = search.run(board, len(moves), (lambda p: batch) if anytime else (lambda p: False), max_nodes=nodes)
    seconds = time.process_time() - start
    mean_batch = (evaluator.stats.positions - positions) / max(1, evaluator.stats.calls - calls)
    return seconds, report.nodes, mean_batch, {k: v - before.get(k, 0.0) for k, v in spent.items()}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4000, help="simulations per search (default 4000)")
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 32, 256], help="BatchSize values")
    parser.add_argument("--repeats", type=int, default=5)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    spent = timed_parts()
    print(f"{'batch':>5} {'position':9} {'us/leaf min':>11} {'median':>7} {'mean batch':>10}  "
          "parts (share of the time)")
    for batch in args.batch:
        for name, moves in POSITIONS.items():
            runs = [one_search(batch, moves, args.nodes, spent) for _ in range(args.repeats)]
            per_leaf = [1e6 * seconds / leaves for seconds, leaves, _, _ in runs]
            total = sum(seconds for seconds, _, _, _ in runs)
            share = {k: sum(parts.get(k, 0.0) for *_, parts in runs) / total for k in PARTS if k in spent}
            parts = ", ".join(f"{k.strip('_')} {v:.0%}" for k, v in share.items())
            print(f"{batch:5d} {name:9} {min(per_leaf):11.1f} {statistics.median(per_leaf):7.1f} "
                  f"{runs[0][2]:10.1f}  {parts}", flush=True)


if __name__ == "__main__":
    main()
