"""Reference searches for the golden tests, written from the papers' definitions alone: one
game, one Python object per node, float64, loops instead of arrays. Nothing here comes from
azshogi.search (only the game's rules and the network's inputs are shared).

Gumbel AlphaZero (Danihelka et al. 2022, with mctx's choices where the paper leaves one open):
- root: Gumbel noise g(a) for every legal move (drawn from the actor's generator in cshogi's
  legal-move order), the m = min(max_num_considered_actions, legal) moves with the largest
  g + logits considered, sequential halving over the n simulations (mctx's table of visit
  counts), each simulation visiting argmax g + logits + sigma(completed Q) among the considered
  moves whose visit count the table names;
- completed Q: q(a) for visited moves, v_mix for the others, v_mix = (v + N / sum_{b visited}
  pi(b) * sum_{b visited} pi(b) q(b)) / (1 + N), N = the node's visits, pi = softmax(logits);
- sigma(q) = (c_visit + max_b N(b)) * c_scale * q_hat, q_hat the completed Q min-max rescaled
  over the legal moves (rescale) or (q + 1) / 2;
- below the root: argmax pi'(a) - N(a) / (1 + N), pi' = softmax(logits + sigma(completed Q));
- the move played: argmax g + logits + sigma among the most visited considered moves (or, when
  sampling, a draw from the improved policy); the policy target: softmax(logits + sigma).

PUCT (Silver et al. 2018): argmax Q + c(s) P sqrt(max(N(s), 1)) / (1 + N(s, a)), c(s) =
log((1 + N(s) + c_base) / c_base) + c_init, Q = 0 when unvisited; the root prior mixed with
Dirichlet noise once per search; the target is the visit distribution, the move the most visited.

Values are in [-1, 1] from the side to move; the network's value is 2 p - 1 for its win
probability p; the search value of the root is (v + the sum of all simulation values) / (1 + N).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import cshogi
import numpy as np
from cshogi import dlshogi

from azshogi.shogi import features
from azshogi.shogi.rules import Rules, outcome

# Inside a search tree, repetitions are looked for this many plies back (as dlshogi does).
TREE_REPETITION_PLIES = 16


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@dataclass
class Node:
    moves: list
    logits: np.ndarray  # (k,) float64
    value: float  # the network's, or the game's result at a terminal node
    terminal: bool = False
    visits: np.ndarray = None
    value_sum: np.ndarray = None  # from this node's side to move
    children: list = field(default_factory=list)

    def __post_init__(self):
        k = len(self.moves)
        self.visits = np.zeros(k)
        self.value_sum = np.zeros(k)
        self.children = [None] * k


def evaluate(network, board: cshogi.Board) -> Node:
    """network(features1, features2) -> (logits (1, 2187), win probability (1,)), as the evaluator
    under test is called."""
    f1 = np.zeros((1, features.FEATURES1_PLANES, 9, 9), np.float32)
    f2 = np.zeros((1, features.FEATURES2_PLANES, 9, 9), np.float32)
    dlshogi.make_input_features(board, f1[0], f2[0])
    logits, probability = network(f1, f2)
    moves = list(board.legal_moves)
    labels = [dlshogi.make_move_label(m, board.turn) for m in moves]
    return Node(moves, np.asarray(logits[0], np.float64)[labels], 2.0 * float(probability[0]) - 1.0)


def halving_table(m: int, n: int) -> list[int]:
    """mctx's get_sequence_of_considered_visits: the visit count a root move must have to be
    chosen, simulation by simulation."""
    if m <= 1:
        return list(range(n))
    log2max = math.ceil(math.log2(m))
    sequence, visits, considered = [], [0] * m, m
    while len(sequence) < n:
        extra = max(1, n // (log2max * considered))
        for _ in range(extra):
            sequence.extend(visits[:considered])
            for i in range(considered):
                visits[i] += 1
        considered = max(2, considered // 2)
    return sequence[:n]


class Reference:
    """One search of one board; `select(node, depth)` is the family's choice of edge."""

    def __init__(self, network, rules: Rules, board: cshogi.Board, ply: int):
        self.network, self.rules, self.ply = network, rules, ply
        self.board = board.copy()
        self.root = evaluate(network, self.board)

    def simulate(self, root_move: int) -> None:
        self._visit(self.root, root_move, 0)

    def _visit(self, node: Node, edge: int, depth: int) -> float:
        """Plays `edge` from `node`, walks on to a leaf; returns the value for node's side."""
        board = self.board
        board.push(node.moves[edge])
        child = node.children[edge]
        if child is None:
            legal = list(board.legal_moves)
            end = outcome(board, self.ply + depth + 1, self.rules, repetition_plies=TREE_REPETITION_PLIES,
                          has_legal_move=bool(legal))
            child = Node([], np.zeros(0), float(end.value), terminal=True) if end else evaluate(self.network, board)
            node.children[edge] = child
            child_value = child.value
        elif child.terminal:
            child_value = child.value
        else:
            child_value = self._visit(child, self.select(child, depth + 1), depth + 1)
        board.pop()
        node.visits[edge] += 1
        node.value_sum[edge] -= child_value  # the child's value is its side's: negate for ours
        return -child_value

    def root_value(self) -> float:
        return (self.root.value + self.root.value_sum.sum()) / (1.0 + self.root.visits.sum())


class GumbelReference(Reference):
    def __init__(self, network, rules, board, ply, rng, num_simulations, max_considered, c_visit=50.0,
                 c_scale=0.1, rescale=True, sample=False):
        super().__init__(network, rules, board, ply)
        self.c_visit, self.c_scale, self.rescale = c_visit, c_scale, rescale
        root = self.root
        k = len(root.moves)
        self.gumbel = rng.gumbel(size=k)
        m = min(k, max_considered)
        self.considered = [int(a) for a in np.argsort(-(self.gumbel + root.logits), kind="stable")[:m]]
        for target in halving_table(m, num_simulations):
            score = self.gumbel + root.logits + self.sigma(root)
            candidates = [a for a in self.considered if root.visits[a] == target]
            self.simulate(max(candidates, key=lambda a: score[a]))
        self.policy = softmax(root.logits + self.sigma(root))
        most = max(root.visits[a] for a in self.considered)
        score = self.gumbel + root.logits + self.sigma(root)
        self.move = max((a for a in self.considered if root.visits[a] == most), key=lambda a: score[a])
        if sample:
            self.move = int(rng.choice(k, p=self.policy / self.policy.sum()))

    @staticmethod
    def completed_q(node: Node) -> np.ndarray:
        visited = node.visits > 0
        q = np.where(visited, node.value_sum / np.maximum(node.visits, 1), 0.0)
        total = node.visits.sum()
        if total == 0:
            return np.full(len(node.moves), node.value)
        prior = softmax(node.logits)
        weighted = (prior[visited] * q[visited]).sum() / prior[visited].sum()
        v_mix = (node.value + total * weighted) / (1.0 + total)
        return np.where(visited, q, v_mix)

    def sigma(self, node: Node) -> np.ndarray:
        q = self.completed_q(node)
        if self.rescale:
            q_hat = (q - q.min()) / max(q.max() - q.min(), 1e-8)
        else:
            q_hat = (q + 1.0) / 2.0
        return (self.c_visit + node.visits.max()) * self.c_scale * q_hat

    def select(self, node: Node, depth: int) -> int:
        improved = softmax(node.logits + self.sigma(node))
        return int(np.argmax(improved - node.visits / (1.0 + node.visits.sum())))


class PuctReference(Reference):
    def __init__(self, network, rules, board, ply, rng, num_simulations, c_base=19652.0, c_init=1.25,
                 dirichlet_alpha=0.15, dirichlet_weight=0.25, noise=True, sample=False):
        super().__init__(network, rules, board, ply)
        self.c_base, self.c_init = c_base, c_init
        k = len(self.root.moves)
        self.root_prior = softmax(self.root.logits)
        if noise:
            noise_draw = rng.dirichlet(np.full(k, dirichlet_alpha))
            self.root_prior = (1 - dirichlet_weight) * self.root_prior + dirichlet_weight * noise_draw
        for _ in range(num_simulations):
            self.simulate(self.select(self.root, 0))
        visits = self.root.visits
        self.policy = visits / visits.sum()
        most = visits.max()
        self.move = max((a for a in range(k) if visits[a] == most), key=lambda a: self.root_prior[a])
        if sample:
            self.move = int(rng.choice(k, p=self.policy))

    def select(self, node: Node, depth: int) -> int:
        prior = self.root_prior if depth == 0 else softmax(node.logits)
        parent = node.visits.sum()
        c = math.log((1.0 + parent + self.c_base) / self.c_base) + self.c_init
        q = np.where(node.visits > 0, node.value_sum / np.maximum(node.visits, 1), 0.0)
        u = c * prior * math.sqrt(max(parent, 1.0)) / (1.0 + node.visits)
        return int(np.argmax(q + u))
