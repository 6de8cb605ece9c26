"""The search's own cost with a stand-in network, for any azshogi tree (old and new side by side).

    git archive 9d6d736 | tar -x -C /tmp/old && ln -s ../conf /tmp/old/azshogi/conf
    python docs/tools/search_cost.py /tmp/old selfplay table     # main before issue #9
    python docs/tools/search_cost.py .        selfplay table     # this tree

`selfplay`: SelfPlay.step with 128 actors, Gumbel 32/16, one thread, three windows of 8 s after
a 5 s warm-up; prints µs per evaluation.
`plies`: the search on 128 positions after 30 and after 300 plies (capture-biased random play),
three rounds of 4 s windows alternating in one process; prints positions/s of each and their ratio.
`--actors N` and `--window S` (seconds per window, the warm-up as long) size it down, e.g. for a test.
Network stand-ins: `uniform` (logits 0, win probability 0.5: flat priors, shallow trees) or
`table` (a fixed random table row chosen by a hash of the planes: peaked priors, deeper trees).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("source", help="an azshogi tree (the folder holding azshogi/)")
parser.add_argument("mode", choices=("selfplay", "plies"))
parser.add_argument("network", choices=("uniform", "table"))
parser.add_argument("--actors", type=int, default=128, help="games (selfplay) or positions per set (plies)")
parser.add_argument("--window", type=float, help="seconds per measuring window (default 8 selfplay, 4 plies)")
args = parser.parse_args()
source, mode, network = Path(args.source).resolve(), args.mode, args.network
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f)]  # import azshogi from `source`
sys.path.insert(0, str(source))
import cshogi  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from older_trees import Calls, leaf_batch_class  # noqa: E402  (this folder's)

import azshogi  # noqa: E402
from azshogi.commands.cli import run_tool  # noqa: E402
from azshogi.search.gumbel import GumbelSearch  # noqa: E402
from azshogi.selfplay.actors import SelfPlay  # noqa: E402
from azshogi.shogi.rules import Rules  # noqa: E402

assert Path(azshogi.__file__).resolve().is_relative_to(source), azshogi.__file__
TABLE = np.random.default_rng(0).normal(0, 2.5, (4096, 2187)).astype(np.float32)


def stand_in(f1, f2):
    n = len(f1)
    if network == "uniform":
        return np.zeros((n, 2187), np.float32), np.full(n, 0.5, np.float32)
    h = (f1.reshape(n, -1)[:, ::7].sum(1) * 31 + f2[:, :, 0, 0].sum(1) * 7).astype(np.int64) % 4096
    return TABLE[h], (h % 100 / 100.0).astype(np.float32)


class DenseEvaluator:  # the interface before issue #9: dense planes in, full rows out
    def __init__(self):
        self.stats = Calls()

    def allocate(self, n):
        return (np.zeros((n, 62, 9, 9), np.float32), np.zeros((n, 57, 9, 9), np.float32))

    def evaluate(self, f1, f2):
        self.stats.calls, self.stats.positions = self.stats.calls + 1, self.stats.positions + len(f1)
        return stand_in(f1, f2)


class LeafEvaluator:  # the LeafBatch interface: the same stand-in on the batch's dense planes
    def __init__(self, leaf_batch):
        self.stats, self.leaf_batch = Calls(), leaf_batch

    def allocate(self, n):
        return self.leaf_batch(n)

    def evaluate(self, b):
        k = b.size
        self.stats.calls, self.stats.positions = self.stats.calls + 1, self.stats.positions + k
        logits, p = stand_in(b.features1[:k], b.features2[:k])
        return logits[np.repeat(np.arange(k), b.counts[:k]), b.labels[:b.num_labels]], p


def positions(count, seed, ply):
    # azshogi.train.bench.sample_positions(count, seed, (ply, ply)), written out here because
    # this script imports azshogi from older trees that do not have it.
    rng, out = np.random.default_rng(seed), []
    while len(out) < count:
        board = cshogi.Board()
        for _ in range(ply):
            moves = list(board.legal_moves)
            if not moves or board.is_draw(16):
                break
            captures = [m for m in moves if board.piece(cshogi.move_to(m))]
            pool = captures if captures and rng.random() < 0.5 else moves
            board.push(pool[int(rng.integers(len(pool)))])
        if board.move_number - 1 == ply and any(True for _ in board.legal_moves) and not board.is_draw(16):
            out.append(board)
    return out


def main():
    torch.set_num_threads(1)
    leaf_batch = leaf_batch_class()
    evaluator = LeafEvaluator(leaf_batch) if leaf_batch else DenseEvaluator()
    actors, rules = args.actors, Rules()
    search = GumbelSearch(evaluator, rules, actors, 32, 16)
    if mode == "plies":
        sets = {p: positions(actors, 7 + p, p) for p in (30, 300)}
        rngs = [np.random.default_rng(i) for i in range(actors)]
        rates = {30: [], 300: []}
        for p in sets:
            search.run(sets[p], np.full(actors, p), rngs)
        for _ in range(3):
            for p in sets:
                start, n = time.perf_counter(), 0
                while time.perf_counter() - start < (args.window or 4):
                    search.run(sets[p], np.full(actors, p), rngs)
                    n += actors
                rates[p].append(n / (time.perf_counter() - start))
        m = {p: statistics.median(v) for p, v in rates.items()}
        legal = {p: np.mean([len(list(b.legal_moves)) for b in sets[p]]) for p in sets}
        print(f"{source.name}: ply 30 {m[30]:.1f} pos/s ({legal[30]:.0f} legal moves), ply 300 {m[300]:.1f} pos/s "
              f"({legal[300]:.0f}), ratio {m[300] / m[30]:.3f}, tree width {search.tree.width}")
        return
    selfplay = SelfPlay(search, rules, actors, seed=0)
    start = time.perf_counter()
    while time.perf_counter() - start < (args.window or 5):
        selfplay.step()
    runs = []
    for _ in range(3):
        before, start = evaluator.stats.positions, time.perf_counter()
        while time.perf_counter() - start < (args.window or 8):
            selfplay.step()
        runs.append((time.perf_counter() - start) / (evaluator.stats.positions - before) * 1e6)
    print(f"{source.name}: {statistics.median(runs):.2f} us per evaluation (windows: "
          f"{', '.join(f'{x:.2f}' for x in runs)}), tree width {search.tree.width}")


if __name__ == "__main__":
    run_tool(main, "search_cost.py")
