"""The search for play: anytime PUCT over the shared array trees, one tree per game.

`GameSearch` is what the USI engine thinks with and what matches play (play/players.py), so a
match measures the engine users run. Per game it keeps a tree (the subtree of the position
that was actually reached is kept between moves), checks the root for a forced mate first
(cshogi's df-pn) and reports the best move, the principal variation, the root value, the visit
counts and MultiPV lines. Selection is PUCT (Silver et al. 2018: c(s) = log((1 + N + c_base) /
c_base) + c_init) with first-play urgency = the node's value minus `fpu_reduction` times the
square root of the policy mass already visited (as Leela Zero), both from search/formulas.py.

Each step sends up to `batch_size` descents of every searched game's tree through one forward
pass (simulator.simulate_together). The descents that reach a node in the same step are shared
out among its edges as sequential descents with a virtual loss would choose them, with the
node's visit count and first-play urgency held at their values before the step
(formulas.puct_shares); with batch_size = 1 it is plain sequential PUCT.

The engine runs one game until its caller's `plan_step` says stop (the clock, a node limit,
`stop`) — PUCT can stop after any step, which a clock or `go infinite` requires, unlike
self-play's Gumbel search whose sequential halving needs its simulation count in advance.
Matches run all their games at once with a fixed budget of simulations per move
(`run_games`), which makes them reproducible.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import cshogi
import numpy as np

from azshogi.search.formulas import first_play_urgency, puct_shares, root_value
from azshogi.search.simulator import Simulator
from azshogi.search.tree import EDGE_ARRAYS, NODE_ARRAYS, Tree, masked_softmax
from azshogi.shogi.network_io import Evaluator
from azshogi.shogi.rules import Rules, mate_line, mate_nodes


def reroot(tree: Tree, actor: int, node: int) -> None:
    """Keeps only the subtree under `node` of actor `actor`'s tree and makes it the root (node 0).

    The kept nodes are copied, in breadth-first order, into the first rows; children indices
    are renumbered. Rows past the new node count are garbage (they are rewritten when added).
    """
    if node == 0:
        return
    # Only a node's real edges count: the columns of a row that was never expanded (a terminal
    # node, a leaf waiting for its evaluation) still hold what the row's previous node left.
    order = [np.array([node], np.int64)]
    frontier = order[0]
    while frontier.size:
        kids = _children(tree, actor, frontier).ravel()
        frontier = kids[kids >= 0]
        if frontier.size:
            order.append(frontier)
    keep = np.concatenate(order)
    renumber = np.full(int(tree.num_nodes[actor]), -1, np.int64)
    renumber[keep] = np.arange(keep.size)
    count = keep.size
    child = _children(tree, actor, keep)
    for name in NODE_ARRAYS + EDGE_ARRAYS:
        if name != "edge_child":
            array = getattr(tree, name)
            array[actor, :count] = array[actor, keep]
    tree.edge_child[actor, :count] = np.where(child >= 0, renumber[np.maximum(child, 0)], -1)
    tree.num_nodes[actor] = count


def _children(tree: Tree, actor: int, nodes: np.ndarray) -> np.ndarray:
    """(len(nodes), width) the child of each real edge of `nodes`, -1 elsewhere."""
    child = tree.edge_child[actor, nodes].astype(np.int64)
    return np.where(tree.valid(np.full(len(nodes), actor), nodes), child, -1)


@dataclass
class Line:
    """One root move and what the search thinks of it: its principal variation (the move
    first), its visits and its value for the root's side to move, in [-1, 1] (the mean of its
    simulations; for an unvisited move, the first-play urgency the search assumes)."""

    pv: list
    visits: float
    value: float

    @property
    def win_rate(self) -> float:
        return (self.value + 1.0) * 0.5


@dataclass
class AnytimeSearchResult:
    """What one game's anytime search found (the USI engine's `info` and `bestmove`, a match
    player's move), from the root's side to move. Self-play's batched searches return a
    search/result.BatchSearchResult instead. K is the root's number of legal moves.

    Attributes:
        move: the chosen cshogi move (0 when the root has no legal move).
        pv: the principal variation, cshogi moves, `move` first (`pv_usi()`: as USI text).
        value: the root's value in [-1, 1]; `win_rate` = (value + 1) / 2.
        nodes: simulations run by this search (those that reached the root's statistics).
        tree_nodes: nodes in the tree after it, reused ones included.
        reused_nodes: nodes kept from the previous search of this game (tree reuse; `run`).
        seconds: wall time of the search (`run_games`: of all its games together); `nps` =
            nodes / seconds.
        moves: (K,) int64 the root's legal moves (cshogi moves).
        visits: (K,) float32 their visit counts.
        lines: the best root moves, most visited first (`Line`s), as many as asked for (MultiPV).
    """

    move: int = 0
    pv: list = field(default_factory=list)
    value: float = 0.0
    nodes: int = 0
    tree_nodes: int = 0
    reused_nodes: int = 0
    seconds: float = 0.0
    moves: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    visits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    lines: list = field(default_factory=list)

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
    """Handed to `plan_step` before every step of a search."""

    nodes: int  # simulations of this search so far
    seconds: float  # since the search started
    best_visits: float  # visits of the most and the second most visited root moves
    second_visits: float
    tree_full: bool  # no room for another step
    step_leaves: int = 0  # the last step: descents sent (0 = none yet) and its duration
    step_seconds: float = 0.0


class GameSearch:
    """Anytime PUCT with first-play urgency for `games` games, one tree each (see the module
    doc). `batch_size` descents per tree per forward pass; `virtual_loss` keeps them apart."""

    def __init__(self, evaluator: Evaluator, rules: Rules, c_base: float = 19652.0, c_init: float = 1.25,
                 fpu_reduction: float = 0.2, max_tree_nodes: int = 200_000, mate_search_nodes: int = 100_000,
                 leaf_mate_search: bool = True, batch_size: int = 1, virtual_loss: float = 1.0, games: int = 1,
                 policy_temperature: float = 1.0):
        if not policy_temperature > 0:
            raise ValueError(f"policy_temperature must be > 0, got {policy_temperature}")
        self.rules = rules
        self.c_base, self.c_init, self.fpu_reduction = c_base, c_init, fpu_reduction
        self.policy_temperature = policy_temperature
        self.max_tree_nodes = max_tree_nodes
        self.mate_search_nodes = mate_search_nodes
        self.batch_size, self.virtual_loss = batch_size, virtual_loss
        self.games = games
        self.simulator = Simulator(evaluator, rules, games, 1024, leaf_mate_search, leaves_per_step=batch_size)
        self._root_keys: list[Optional[tuple]] = [None] * games  # (start sfen, moves) of each root
        self._dfpn = cshogi.DfPn()

    @property
    def tree(self) -> Tree:
        return self.simulator.tree

    def clear(self, game: Optional[int] = None) -> None:
        """Forgets the tree of `game` (default: of every game)."""
        for g in range(self.games) if game is None else [game]:
            self._root_keys[g] = None

    # --- the root ---

    def prepare(self, board: cshogi.Board, start_sfen: str, moves: Sequence[str], game: int = 0) -> int:
        """Makes `board` (start_sfen + moves, history included) the root of `game`'s tree,
        keeping what the tree already knows about it. Returns the number of nodes reused (0 = a
        fresh tree, whose root is evaluated now)."""
        reused = self._reuse(start_sfen, list(moves), game)
        self._root_keys[game] = (start_sfen, tuple(moves))
        if not reused:
            self.simulator.expand_roots(self._boards({game: board}), np.array([game]))
        return reused

    def _reuse(self, start_sfen: str, moves: list, game: int) -> int:
        key = self._root_keys[game]
        if key is None or self.tree.num_nodes[game] == 0:
            return 0
        old_start, old_moves = key
        if old_start != start_sfen or tuple(moves[:len(old_moves)]) != old_moves:
            return 0
        tree, node = self.tree, 0
        for usi in moves[len(old_moves):]:
            n = int(tree.num_edges[game, node])
            edge_usi = [cshogi.move_to_usi(int(m)) for m in tree.edge_move[game, node, :n]]
            if usi not in edge_usi:
                return 0
            child = int(tree.edge_child[game, node, edge_usi.index(usi)])
            if child < 0:
                return 0
            node = child
        if tree.node_terminal[game, node] or tree.num_edges[game, node] == 0:
            return 0
        reroot(tree, game, node)
        return int(tree.num_nodes[game])

    def mate(self, board: cshogi.Board, seconds: Optional[float] = None) -> list[int]:
        """A forced mate for the side to move (df-pn, at most `mate_search_nodes` nodes) as a move
        list, or [] (see rules.mate_line; skipped in check).

        seconds: a time budget (rules.mate_nodes)."""
        if self.mate_search_nodes <= 0:
            return []
        nodes = mate_nodes(self.mate_search_nodes, seconds)
        return mate_line(board, nodes if nodes >= 100 else 0, self._dfpn)

    # --- the search ---

    def _share(self, actors: np.ndarray, nodes: np.ndarray, counts: np.ndarray, depth: int) -> np.ndarray:
        """How many of counts[g] descents arriving at node g take each edge (simulator.ShareFn)."""
        tree = self.tree
        # A multiple of 8 columns: sums over padding zeros are then the same to the last bit
        # (tree.edge_sum), whatever the rows' width.
        width = min(-(-max(int(tree.num_edges[actors, nodes].max()), 1) // 8) * 8, tree.width)
        logits = tree.edge_logit[actors, nodes, :width]
        visits = tree.edge_visits[actors, nodes, :width]
        prior = self._prior(logits)
        fpu = first_play_urgency(tree.node_value[actors, nodes], prior, visits, self.fpu_reduction)
        return puct_shares(prior, visits, tree.edge_value_sum[actors, nodes, :width], np.isfinite(logits), counts,
                           self.c_base, self.c_init, fpu, self.virtual_loss)

    def _prior(self, logits: np.ndarray) -> np.ndarray:
        """The edges' priors: the softmax of the network's logits over `policy_temperature`
        (above 1 flattens the policy, spreading the search over more moves)."""
        return masked_softmax(logits if self.policy_temperature == 1.0 else logits / self.policy_temperature)

    def _boards(self, by_game: dict) -> list:
        """The simulator's per-actor board list: game g's board at index g."""
        boards: list = [None] * self.games
        for g, board in by_game.items():
            boards[g] = board
        return boards

    def _root_visits(self, games: np.ndarray) -> np.ndarray:
        return self.tree.edge_visits[games, 0].sum(axis=1)

    def run(self, board: cshogi.Board, ply: int, plan_step: Callable[[Progress], int],
            max_nodes: Optional[int] = None, game: int = 0, lines: int = 1) -> AnytimeSearchResult:
        """Simulates `game` from its prepared root, step after step, until `plan_step(progress)`
        answers 0, `max_nodes` simulations are done or the tree is full (a root with one legal
        move gets one step at most). `plan_step` is asked before every step, the first included,
        and answers how many descents the step may send (at most `batch_size` are sent).
        `board` is walked with push/pop and comes back unchanged.

        A descent that meets a leaf already waiting for its evaluation is dropped (a
        collision), so `nodes` counts the simulations that reached the root's statistics."""
        start = time.perf_counter()
        tree = self.tree
        games = np.array([game])
        reused = int(tree.num_nodes[game])
        boards = self._boards({game: board})
        plies = np.zeros(self.games, np.int64)
        plies[game] = ply
        before = self._root_visits(games)[0]
        nodes, step = 0, (0, 0.0)
        while True:
            room = self.max_tree_nodes - int(tree.num_nodes[game])
            if (max_nodes is not None and nodes >= max_nodes) or (nodes and tree.num_edges[game, 0] <= 1):
                break
            progress = self._progress(game, nodes, time.perf_counter() - start, room < 1, step)
            leaves = min(self.batch_size, room, plan_step(progress))
            if max_nodes is not None:
                leaves = min(leaves, max_nodes - nodes)
            if leaves <= 0:
                break
            began = time.perf_counter()
            self.simulator.simulate_together(boards, plies, self._share, leaves, actors=games)
            step = (leaves, time.perf_counter() - began)
            nodes = int(round(float(self._root_visits(games)[0] - before)))
        report = self.report(game, nodes, time.perf_counter() - start, lines)
        report.reused_nodes = reused
        return report

    def run_games(self, boards: dict, plies: dict, nodes: int, lines: int = 1, batch: Optional[int] = None) -> dict:
        """`nodes` simulations for each game of `boards` ({game: board}, each prepared; plies
        {game: ply}), up to `batch` (at most batch_size) descents a tree, the leaves of all games
        in one forward pass per step. Returns {game: AnytimeSearchResult}. A fixed budget makes
        matches reproducible."""
        start = time.perf_counter()
        tree = self.tree
        games = np.array(sorted(boards), np.int64)
        board_list = self._boards(boards)
        ply_array = np.zeros(self.games, np.int64)
        for g, p in plies.items():
            ply_array[g] = p
        before = self._root_visits(games)
        done = np.zeros(len(games), np.int64)
        per_step = self.batch_size if batch is None else max(1, min(batch, self.batch_size))
        while True:
            room = self.max_tree_nodes - tree.num_nodes[games]
            leaves = np.minimum(np.minimum(nodes - done, per_step), room)
            leaves[(done > 0) & (tree.num_edges[games, 0] <= 1)] = 0
            go = leaves > 0
            if not go.any():
                break
            self.simulator.simulate_together(board_list, ply_array, self._share, leaves[go], actors=games[go])
            done = np.round(self._root_visits(games) - before).astype(np.int64)
        seconds = time.perf_counter() - start
        return {int(g): self.report(int(g), int(d), seconds, lines) for g, d in zip(games, done)}

    def _progress(self, game: int, nodes: int, seconds: float, full: bool, step: tuple) -> Progress:
        visits = self.tree.edge_visits[game, 0, :self.tree.num_edges[game, 0]]
        top = np.sort(visits)[-2:] if visits.size >= 2 else np.array([0.0, visits.max(initial=0.0)])
        return Progress(nodes, seconds, float(top[-1]), float(top[0]), full, step[0], step[1])

    # --- what it found ---

    def report(self, game: int = 0, nodes: int = 0, seconds: float = 0.0, lines: int = 1) -> AnytimeSearchResult:
        """The root's statistics now: most visited move (ties: the higher prior), PV, value, and
        the `lines` best root moves."""
        tree = self.tree
        n = int(tree.num_edges[game, 0])
        visits = tree.edge_visits[game, 0, :n].copy()
        moves = tree.edge_move[game, 0, :n].astype(np.int64)
        if n == 0:
            return AnytimeSearchResult(nodes=nodes, seconds=seconds, tree_nodes=int(tree.num_nodes[game]))
        value = root_value(tree.node_value[game:game + 1, 0], tree.edge_value_sum[game:game + 1, 0, :n],
                           visits[None])[0]
        best = self._ranked_root_edges(game)[:max(1, lines)]
        root_lines = [self._line(game, int(e)) for e in best]
        return AnytimeSearchResult(move=root_lines[0].pv[0], pv=root_lines[0].pv, value=float(value), nodes=nodes,
                            tree_nodes=int(tree.num_nodes[game]), seconds=seconds, moves=moves, visits=visits,
                            lines=root_lines)

    def _ranked_root_edges(self, game: int) -> np.ndarray:
        """The root's edges, most visited first (ties: the higher prior, then the lower column)."""
        tree = self.tree
        n = int(tree.num_edges[game, 0])
        return np.lexsort((np.arange(n), -tree.edge_logit[game, 0, :n], -tree.edge_visits[game, 0, :n]))

    def _line(self, game: int, edge: int) -> Line:
        tree = self.tree
        n = int(tree.num_edges[game, 0])
        visits = tree.edge_visits[game, 0, :n]
        if visits[edge] > 0:
            value = float(tree.edge_value_sum[game, 0, edge] / visits[edge])
        else:
            prior = self._prior(tree.edge_logit[game, 0:1])
            value = float(first_play_urgency(tree.node_value[game, 0:1], prior, tree.edge_visits[game, 0:1],
                                             self.fpu_reduction)[0, 0])
        pv = [int(tree.edge_move[game, 0, edge])]
        child = int(tree.edge_child[game, 0, edge])
        if child >= 0:
            pv += self.principal_variation(game, child, limit=63)
        return Line(pv, float(visits[edge]), value)

    def principal_variation(self, game: int = 0, node: int = 0, limit: int = 64) -> list[int]:
        """The most visited path from `node` (ties: the higher prior); from the root, the first
        move is chosen even before any simulation."""
        tree = self.tree
        pv: list[int] = []
        while len(pv) < limit:
            n = int(tree.num_edges[game, node])
            if n == 0:
                break
            visits = tree.edge_visits[game, node, :n]
            if (pv or node) and visits.max() == 0:
                break
            edge = int(np.lexsort((tree.edge_logit[game, node, :n], visits))[-1])
            pv.append(int(tree.edge_move[game, node, edge]))
            node = int(tree.edge_child[game, node, edge])
            if node < 0:
                break
        return pv

    def sample_move(self, temperature: float, rng: np.random.Generator, game: int = 0) -> int:
        """A root move drawn with probability proportional to visits^(1/temperature)."""
        tree = self.tree
        n = int(tree.num_edges[game, 0])
        visits = tree.edge_visits[game, 0, :n].astype(np.float64)
        if visits.sum() == 0:
            weights = masked_softmax(tree.edge_logit[game, 0, :n].astype(np.float64) / max(temperature, 1e-3))
        else:
            weights = np.power(visits / visits.max(), 1.0 / max(temperature, 1e-3))
        return int(tree.edge_move[game, 0, rng.choice(n, p=weights / weights.sum())])
