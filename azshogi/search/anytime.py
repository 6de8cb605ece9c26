"""The engine's search: one game, an anytime PUCT search over the shared array tree.

`GameSearch` wraps the shared `Simulator` (azshogi/search/) for a single game, the way a USI
engine needs it: `batch_size` leaves per forward pass kept apart by the simulator's virtual loss, it runs until a caller-supplied `should_stop` says enough (clock, node limit,
`stop`), keeps the subtree of the position that was actually reached between moves, checks the
root for a forced mate first (cshogi's df-pn), and reports the best move, the principal
variation, the root value and the visit counts.

Unlike self-play's Gumbel search, whose sequential halving needs the number of simulations in
advance, PUCT can be stopped at any simulation, which a clock or `go infinite` requires.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import cshogi
import numpy as np

from azshogi.search.base import Evaluator
from azshogi.search.formulas import first_play_urgency, puct_scores, root_value
from azshogi.search.simulator import Simulator
from azshogi.search.tree import EDGE_ARRAYS, NODE_ARRAYS, Tree, masked_softmax
from azshogi.shogi.rules import Rules

# A slow rate of cshogi's df-pn (measured: 100k nodes took up to 0.5 s in random middle games).
DFPN_NODES_PER_SECOND = 200_000


def reroot(tree: Tree, actor: int, node: int) -> None:
    """Keeps only the subtree under `node` of actor `actor`'s tree and makes it the root (node 0).

    The kept nodes are copied, in breadth-first order, into the first rows; children indices
    are renumbered. Rows past the new node count are garbage (they are rewritten when added).
    """
    if node == 0:
        return
    order = [np.array([node], np.int64)]
    frontier = order[0]
    while frontier.size:
        kids = tree.edge_child[actor, frontier].ravel()
        frontier = kids[kids >= 0].astype(np.int64)
        if frontier.size:
            order.append(frontier)
    keep = np.concatenate(order)
    renumber = np.full(int(tree.num_nodes[actor]), -1, np.int64)
    renumber[keep] = np.arange(keep.size)
    count = keep.size
    for name in NODE_ARRAYS + EDGE_ARRAYS:
        if name != "edge_child":
            array = getattr(tree, name)
            array[actor, :count] = array[actor, keep]
    child = tree.edge_child[actor, keep]
    tree.edge_child[actor, :count] = np.where(child >= 0, renumber[np.maximum(child, 0)], -1)
    tree.num_nodes[actor] = count


@dataclass
class SearchReport:
    """What one search found, from the root's side to move.

    move: the chosen cshogi move (0 when none). pv: the principal variation (cshogi moves).
    value: the root's value in [-1, 1]; win_rate = (value + 1) / 2. nodes: simulations run by
    this search; tree_nodes: nodes now in the tree (reused ones included). mate: plies to a mate
    found by the mate search (0 = none). moves, visits: the root's legal moves and visit counts.
    """

    move: int = 0
    pv: list = field(default_factory=list)
    value: float = 0.0
    nodes: int = 0
    tree_nodes: int = 0
    reused_nodes: int = 0
    seconds: float = 0.0
    mate: int = 0
    moves: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    visits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @property
    def win_rate(self) -> float:
        return (self.value + 1.0) * 0.5

    @property
    def depth(self) -> int:
        return len(self.pv)

    @property
    def nps(self) -> int:
        return int(self.nodes / self.seconds) if self.seconds > 0 else 0

    def pv_usi(self) -> list[str]:
        return [cshogi.move_to_usi(m) for m in self.pv]


@dataclass
class Progress:
    """Handed to `should_stop` after every simulation."""

    nodes: int  # simulations of this search
    seconds: float
    best_visits: float  # visits of the most and the second most visited root moves
    second_visits: float
    tree_full: bool


class GameSearch:
    """Anytime PUCT (Silver et al. 2018: c(s) = log((1 + N + c_base) / c_base) + c_init) for one
    game, with first-play urgency = the parent's value minus `fpu_reduction` times the square
    root of the policy mass already visited (as Leela Zero)."""

    def __init__(self, evaluator: Evaluator, rules: Rules, c_base: float = 19652.0, c_init: float = 1.25,
                 fpu_reduction: float = 0.2, max_tree_nodes: int = 200_000, mate_search_nodes: int = 100_000,
                 leaf_mate_search: bool = True, batch_size: int = 1, virtual_loss: float = 1.0):
        self.rules = rules
        self.c_base, self.c_init, self.fpu_reduction = c_base, c_init, fpu_reduction
        self.max_tree_nodes = max_tree_nodes
        self.mate_search_nodes = mate_search_nodes
        self.batch_size, self.virtual_loss = batch_size, virtual_loss
        self.simulator = Simulator(evaluator, rules, 1, 1024, leaf_mate_search, leaves_per_step=batch_size)
        self._root_key: Optional[tuple] = None  # (start sfen, moves) of the tree's root
        self._dfpn = cshogi.DfPn()

    @property
    def tree(self) -> Tree:
        return self.simulator.tree

    def clear(self) -> None:
        self._root_key = None

    # --- the root ---

    def prepare(self, board: cshogi.Board, start_sfen: str, moves: Sequence[str]) -> int:
        """Makes `board` (start_sfen + moves, history included) the root, keeping what the tree
        already knows about it. Returns the number of nodes reused (0 = a fresh tree)."""
        reused = self._reuse(start_sfen, list(moves))
        self._root_key = (start_sfen, tuple(moves))
        if reused:
            return reused
        self.simulator.expand_roots([board])
        return 0

    def _reuse(self, start_sfen: str, moves: list) -> int:
        if self._root_key is None or self.tree.num_nodes[0] == 0:
            return 0
        old_start, old_moves = self._root_key
        if old_start != start_sfen or tuple(moves[:len(old_moves)]) != old_moves:
            return 0
        tree, node = self.tree, 0
        for usi in moves[len(old_moves):]:
            n = int(tree.num_edges[0, node])
            edge_usi = [cshogi.move_to_usi(int(m)) for m in tree.edge_move[0, node, :n]]
            if usi not in edge_usi:
                return 0
            child = int(tree.edge_child[0, node, edge_usi.index(usi)])
            if child < 0:
                return 0
            node = child
        if tree.node_terminal[0, node] or tree.num_edges[0, node] == 0:
            return 0
        reroot(tree, 0, node)
        return int(tree.num_nodes[0])

    def mate(self, board: cshogi.Board, seconds: Optional[float] = None) -> list[int]:
        """A forced mate for the side to move (df-pn, at most `mate_search_nodes` nodes) as a move
        list, or []. Skipped in check: cshogi's mate searches assume the attacker is not in check.

        seconds: a time budget. df-pn has only a node limit (and holds the GIL), so the limit is
        scaled down to what DFPN_NODES_PER_SECOND allows in that time."""
        if self.mate_search_nodes <= 0 or board.is_check():
            return []
        move = board.mate_move_in_1ply()
        if move:
            return [move]
        nodes = self.mate_search_nodes
        if seconds is not None:
            nodes = min(nodes, int(seconds * DFPN_NODES_PER_SECOND))
        if nodes < 100:
            return []
        self._dfpn.set_max_search_node(nodes)
        if not self._dfpn.search(board):
            return []
        pv = list(self._dfpn.get_pv(board))
        return pv or [self._dfpn.get_move(board)]

    # --- the search ---

    def _select(self, actors: np.ndarray, nodes: np.ndarray, depth: int) -> np.ndarray:
        tree = self.tree
        prior = masked_softmax(tree.edge_logit[actors, nodes])
        visits = tree.edge_visits[actors, nodes]
        fpu = first_play_urgency(tree.node_value[actors, nodes], prior, visits, self.fpu_reduction)
        return puct_scores(prior, visits, tree.edge_value_sum[actors, nodes], tree.valid(actors, nodes),
                           self.c_base, self.c_init, fpu).argmax(axis=1)

    def run(self, board: cshogi.Board, ply: int, should_stop: Callable[[Progress], bool],
            max_nodes: Optional[int] = None) -> SearchReport:
        """Simulates from the prepared root until `should_stop(progress)` is true, `max_nodes`
        simulations are done or the tree is full (always at least one step when the root has more
        than one move). `board` is walked with push/pop and comes back unchanged.

        Each step sends up to `batch_size` leaves through one forward pass; a descent that meets a
        leaf already waiting for its evaluation is dropped (a collision), so `nodes` counts the
        simulations that reached the root's statistics."""
        start = time.perf_counter()
        tree = self.tree
        reused = int(tree.num_nodes[0])
        plies = np.array([ply], np.int64)
        boards = [board]
        root_visits = float(tree.edge_visits[0, 0].sum())
        nodes = 0
        while True:
            full = tree.num_nodes[0] + self.batch_size > self.max_tree_nodes
            if full or (max_nodes is not None and nodes >= max_nodes):
                break
            if nodes and should_stop(self._progress(nodes, time.perf_counter() - start, full)):
                break
            if tree.num_edges[0, 0] <= 1 and nodes:
                break
            leaves = self.batch_size if max_nodes is None else min(self.batch_size, max_nodes - nodes)
            self.simulator.simulate(boards, plies, self._select, leaves=leaves, virtual_loss=self.virtual_loss)
            nodes = int(round(float(tree.edge_visits[0, 0].sum()) - root_visits))
        report = self.report(nodes, time.perf_counter() - start)
        report.reused_nodes = reused
        return report

    def _progress(self, nodes: int, seconds: float, full: bool) -> Progress:
        visits = self.tree.edge_visits[0, 0, :self.tree.num_edges[0, 0]]
        top = np.sort(visits)[-2:] if visits.size >= 2 else np.array([0.0, visits.max(initial=0.0)])
        return Progress(nodes, seconds, float(top[-1]), float(top[0]), full)

    def report(self, nodes: int = 0, seconds: float = 0.0) -> SearchReport:
        """The root's statistics now: most visited move (ties: the higher prior), PV, value."""
        tree = self.tree
        n = int(tree.num_edges[0, 0])
        visits = tree.edge_visits[0, 0, :n].copy()
        moves = tree.edge_move[0, 0, :n].astype(np.int64)
        if n == 0:
            return SearchReport(nodes=nodes, seconds=seconds, tree_nodes=int(tree.num_nodes[0]))
        value = root_value(tree.node_value[0:1, 0], tree.edge_value_sum[0:1, 0, :n], visits[None])[0]
        pv = self.principal_variation()
        return SearchReport(move=pv[0], pv=pv, value=float(value), nodes=nodes,
                            tree_nodes=int(tree.num_nodes[0]), seconds=seconds, moves=moves, visits=visits)

    def principal_variation(self, limit: int = 64) -> list[int]:
        tree, node, pv = self.tree, 0, []
        while len(pv) < limit:
            n = int(tree.num_edges[0, node])
            if n == 0:
                break
            visits = tree.edge_visits[0, node, :n]
            if pv and visits.max() == 0:
                break
            # Most visits; the prior breaks ties (and picks the root move before any simulation).
            edge = int(np.lexsort((tree.edge_logit[0, node, :n], visits))[-1])
            pv.append(int(tree.edge_move[0, node, edge]))
            node = int(tree.edge_child[0, node, edge])
            if node < 0:
                break
        return pv

    def sample_move(self, temperature: float, rng: np.random.Generator) -> int:
        """A root move drawn with probability proportional to visits^(1/temperature)."""
        tree = self.tree
        n = int(tree.num_edges[0, 0])
        visits = tree.edge_visits[0, 0, :n].astype(np.float64)
        if visits.sum() == 0:
            weights = masked_softmax(tree.edge_logit[0, 0, :n].astype(np.float64) / max(temperature, 1e-3))
        else:
            weights = np.power(visits / visits.max(), 1.0 / max(temperature, 1e-3))
        return int(tree.edge_move[0, 0, rng.choice(n, p=weights / weights.sum())])
