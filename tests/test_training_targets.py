"""What training learns from, pinned by its meaning.

From a finished game to a minibatch: which side each way of ending a game favours, every
position's result from its own side to move (self-play's record, the replay buffer's batches,
hcpe3 written and read back, dlshogi's hcpe read, games resumed from a checkpoint), the value
target the trainer fits (the result and root-value mix as a win probability, sign and scale),
the root value's side, the policy target (normalised, on the recorded moves' own labels in the
recorded proportions) and the replay window's sampling (uniform over the window, nothing
outside it).

Each test asserts the meaning itself (a side, a sign, a scale, a support), computed here from
the positions with cshogi, so that a wrong sign fails it whatever the scenario around it does.
Games are driven through self-play (`SelfPlay.step` -> `_finish`) by a search that plays a
script, or by a real search (Gumbel and PUCT) where the search's own output is pinned.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import cshogi
import numpy as np
import pytest
import torch
from conftest import FunctionEvaluator
from cshogi import dlshogi

from azshogi.config import Optimizer, TrainConfig, ValueLoss
from azshogi.formats.dlshogi import HCPE_DTYPE, Hcpe3Writer, read_hcpe3
from azshogi.search import GumbelSearch, PuctSearch
from azshogi.search.result import BatchSearchResult
from azshogi.selfplay.actors import PlayoutCap, SelfPlay
from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions
from azshogi.shogi.rules import Rules, Termination
from azshogi.train.replay import Batch, ReplayBuffer, load_buffer
from azshogi.train.trainer import Trainer

BLACK, WHITE = cshogi.BLACK, cshogi.WHITE


# --- the meaning, computed from positions ---

def turn_of(hcp: np.ndarray) -> int:
    board = cshogi.Board()
    board.set_hcp(np.ascontiguousarray(hcp))
    return board.turn


def results_for(hcps: np.ndarray, winner: Optional[int]) -> list[int]:
    """+1 for the positions whose side to move won, -1 for the loser's, 0 after a draw."""
    return [0 if winner is None else (1 if turn_of(h) == winner else -1) for h in hcps]


def legal_labels(board: cshogi.Board) -> set[int]:
    """The labels of the side to move's legal moves (dlshogi's make_move_label)."""
    return {dlshogi.make_move_label(m, board.turn) for m in board.legal_moves}


# --- a search that plays a script ---

def scripted_root_value(ply: int) -> float:
    """The root value the scripted search reports before move `ply` (exact in float16)."""
    return (ply + 1) / 16


def scripted_policy(board: cshogi.Board, move: int) -> tuple[list[int], np.ndarray]:
    """Every legal move, the scripted one first, with probabilities halving from one to the
    next: the tail falls below replay.min_policy_prob's default (1e-4)."""
    moves = [move] + [m for m in board.legal_moves if m != move]
    weights = 0.5 ** np.arange(len(moves))
    return moves, (weights / weights.sum()).astype(np.float32)


class ScriptedSearch:
    """Stands in for the search: plays `script[ply]` in each game (USI), reports
    scripted_policy's target and scripted_root_value."""

    num_simulations = 8  # read by self-play's playout caps

    def __init__(self, script: list[str]):
        self.script = script

    def run(self, boards, plies, rngs, simulations=None) -> BatchSearchResult:
        a, k = len(boards), features.MAX_LEGAL_MOVES
        edge_moves, labels = np.zeros((a, k), np.int64), np.zeros((a, k), np.int32)
        policy, chosen = np.zeros((a, k), np.float32), np.zeros(a, np.int64)
        num_edges = np.zeros(a, np.int64)
        for i, (board, ply) in enumerate(zip(boards, plies)):
            move = board.move_from_usi(self.script[int(ply)])
            assert board.is_legal(move), (self.script[int(ply)], board.sfen())
            moves, probs = scripted_policy(board, move)
            n = num_edges[i] = len(moves)
            edge_moves[i, :n], policy[i, :n], chosen[i] = moves, probs, move
            labels[i, :n] = [dlshogi.make_move_label(m, board.turn) for m in moves]
        root_value = np.array([scripted_root_value(int(p)) for p in plies], np.float32)
        return BatchSearchResult(chosen, edge_moves, labels, num_edges, policy, np.zeros((a, k), np.float32),
                                 root_value)


def new_selfplay(script: list[str], rules: Rules, sfen: Optional[str] = None,
                 playout_cap: PlayoutCap = PlayoutCap(), seed: int = 0) -> SelfPlay:
    """Self-play of one scripted game. Self-play starts from the initial position (black to
    move, `turns = plies % 2`); a start `sfen` near an ending must have black to move too."""
    selfplay = SelfPlay(ScriptedSearch(script), rules, num_actors=1, seed=seed, playout_cap=playout_cap)
    if sfen is not None:
        assert sfen.split()[1] == "b"
        selfplay.actors[0].board = cshogi.Board(sfen)
    return selfplay


def play_to_the_end(selfplay: SelfPlay):
    for _ in range(len(selfplay.search.script)):
        finished = selfplay.step()
        if finished:
            [game] = finished
            assert game.record.moves == selfplay.search.script  # it ended exactly where the script does
            return game
    raise AssertionError("the script ran out before the game ended")


# --- every way a game ends ---

@dataclass(frozen=True)
class Ending:
    name: str
    sfen: Optional[str]  # None: the initial position
    moves: tuple
    termination: Termination
    winner: Optional[int]  # by the rules of shogi, written here by hand
    rules: Rules = Rules()


ENDINGS = [
    # Black drops the gold on 5b, protected by the pawn: white is mated.
    Ending("checkmate by black", "4k4/9/4P4/9/9/9/9/9/4K4 b Gp 1", ("5i5h", "P*1d", "G*5b"),
           Termination.CHECKMATE, BLACK),
    Ending("checkmate by white", "4k4/9/9/9/9/9/4p4/9/4K4 b 2Pg 1", ("P*1f", "5a5b", "P*2f", "G*5h"),
           Termination.CHECKMATE, WHITE),
    # Perpetual check: the checking side loses, whichever side is to move when the position recurs.
    Ending("perpetual check by black, black to move", "7k1/9/9/9/9/9/9/9/K7R b - 1",
           ("1i2i", "2a1a", "2i1i", "1a2a"), Termination.PERPETUAL_CHECK, WHITE),
    Ending("perpetual check by black, white to move", "7k1/9/9/9/9/9/9/6R2/K8 b - 1",
           ("3h2h", "2a1a", "2h1h", "1a2a", "1h2h"), Termination.PERPETUAL_CHECK, WHITE),
    Ending("perpetual check by white, black to move", "r7k/9/9/9/9/9/9/9/K8 b - 1",
           ("9i8i", "9a8a", "8i9i", "8a9a"), Termination.PERPETUAL_CHECK, BLACK),
    Ending("perpetual check by white, white to move", "1r6k/9/9/9/9/9/9/K8/9 b - 1",
           ("9h9i", "8a9a", "9i8i", "9a8a", "8i9i"), Termination.PERPETUAL_CHECK, BLACK),
    Ending("repetition, black to move", None, ("5i5h", "5a5b", "5h5i", "5b5a"), Termination.REPETITION, None),
    Ending("repetition, white to move", None, ("7g7f", "5a5b", "5i5h", "5b5a", "5h5i"),
           Termination.REPETITION, None),
    # Impasse: the king enters the enemy camp with 28 points (black) or 28 >= 27 (white); the
    # side to move declares and wins.
    Ending("impasse declared by black", "LNSG1GSNL/1R5B1/PPPP1PPPP/9/4K4/9/9/9/4k4 b 2P 1",
           ("5e5d", "5i5h", "5d5c", "5h5i"), Termination.IMPASSE, BLACK),
    Ending("impasse declared by white", "4K4/9/9/9/4k4/9/pppp1pppp/1b5r1/lnsg1gsnl b 2p 1",
           ("5a5b", "5e5f", "5b5a", "5f5g", "5a5b"), Termination.IMPASSE, WHITE),
    # Mate adjudication: the side to move has a mate in one (the gold drop) and is given the win.
    Ending("mate adjudicated to black", "4k4/9/4P4/9/9/9/9/9/4K4 b Gp 1", ("5i5h", "P*1d"),
           Termination.MATE_ADJUDICATION, BLACK, Rules(mate_adjudication_plies=1)),
    Ending("mate adjudicated to white", "4k4/9/9/9/9/4p4/9/9/4K4 b 2Pg 1", ("P*1f", "5f5g", "P*2f"),
           Termination.MATE_ADJUDICATION, WHITE, Rules(mate_adjudication_plies=1)),
    Ending("ply limit", None, ("7g7f", "3c3d", "2g2f", "8c8d", "6i7h"), Termination.MAX_PLIES, None,
           Rules(max_plies=5)),
]

# A cooperative mate from the initial position: black's pawn promotes on 2c, mating the white
# king on 3b boxed in by its own rook (found by a search over all 7-ply lines).
HELPMATE = ["2g2f", "5a4b", "2f2e", "4b3b", "2e2d", "8b4b", "2d2c+"]


# dlshogi's result byte: the winner in bits 0-1, flags for how the game ended (formats/dlshogi.py).
WINNER_BITS = {None: 0, BLACK: 1, WHITE: 2}
FLAGS = {Termination.REPETITION: 0x4, Termination.IMPASSE: 0x8, Termination.MAX_PLIES: 0x10}


def check_the_scenario(ending: Ending) -> None:
    """The final position is the ending it claims, and the hand-written winner is the one the
    rules name (checked with cshogi, not with azshogi's rules), so the table cannot drift."""
    board = cshogi.Board(ending.sfen) if ending.sfen else cshogi.Board()
    checks = {BLACK: [], WHITE: []}
    for usi in ending.moves:
        mover = board.turn
        board.push_usi(usi)
        checks[mover].append(board.is_check())
    t, to_move = ending.termination, board.turn
    if t == Termination.CHECKMATE:
        assert board.is_check() and board.is_game_over() and ending.winner == 1 - to_move
    elif t == Termination.PERPETUAL_CHECK:
        [checker] = [side for side in (BLACK, WHITE) if all(checks[side])]
        assert not any(checks[1 - checker]) and ending.winner == 1 - checker
    elif t == Termination.REPETITION:
        assert board.is_draw() == cshogi.REPETITION_DRAW and ending.winner is None
    elif t == Termination.IMPASSE:
        assert board.is_nyugyoku() and ending.winner == to_move
    elif t == Termination.MATE_ADJUDICATION:
        assert not board.is_game_over() and board.mate_move_in_1ply() and ending.winner == to_move
    else:
        assert len(ending.moves) == ending.rules.max_plies and ending.winner is None


def assert_results_by_side_to_move(hcps, results, winner) -> None:
    turns = {turn_of(h) for h in hcps}
    assert turns == {BLACK, WHITE}  # positions of both sides to move are checked
    assert np.asarray(results).tolist() == results_for(hcps, winner)


@pytest.mark.parametrize("ending", ENDINGS, ids=lambda e: e.name)
def test_every_ending_gives_each_position_the_result_of_its_side_to_move(ending, tmp_path):
    check_the_scenario(ending)
    game = play_to_the_end(new_selfplay(list(ending.moves), ending.rules, ending.sfen))
    assert (game.record.termination, game.record.winner) == (ending.termination, ending.winner)
    record = game.positions
    assert len(record) == len(ending.moves)
    assert_results_by_side_to_move(record.hcps, record.results, ending.winner)
    assert record.root_values.tolist() == [scripted_root_value(p) for p in range(len(ending.moves))]

    # The replay buffer's minibatches (mirrored rows too: a mirror image keeps its result).
    buffer = ReplayBuffer(capacity=64)
    buffer.extend(record)
    rng = np.random.default_rng(0)
    slots = buffer.sample_indices(64, rng)
    for mirrored in (None, rng.random(64) < 0.5):
        batch = buffer.gather(slots, mirrored)
        assert batch.result.tolist() == results_for(buffer.hcps[slots], ending.winner)
        assert batch.root_value.tolist() == [scripted_root_value(int(p)) for p in buffer.plies[slots]]

    # hcpe3, as the loop writes self-play games and as pretraining and seeding read them.
    writer = Hcpe3Writer()
    writer.add(game)
    path = writer.flush(tmp_path / "selfplay.hcpe3")
    [written] = read_hcpe3(path)
    assert written.result == WINNER_BITS[ending.winner] | FLAGS.get(ending.termination, 0)
    assert written.winner == ending.winner
    read = load_buffer([path])
    batch = read.gather(np.arange(len(read)))
    assert np.array_equal(read.hcps[:len(read)], record.hcps)
    assert_results_by_side_to_move(read.hcps[:len(read)], batch.result, ending.winner)


@pytest.mark.parametrize("game_result, winner", [(1, BLACK), (2, WHITE), (0, None), (0x10, None)])
def test_hcpe_positions_take_the_result_of_their_side_to_move(game_result, winner, tmp_path):
    # dlshogi's hcpe positions (pretraining, replay.seed_files): one result byte per position,
    # an eval from its side to move.
    board, records = cshogi.Board(), np.zeros(len(HELPMATE), HCPE_DTYPE)
    for i, usi in enumerate(HELPMATE):
        records["hcp"][i] = features.hcp_of(board)
        records["bestMove16"][i] = board.move_from_usi(usi) & 0xFFFF
        board.push_usi(usi)
    records["eval"] = 600
    records["gameResult"] = game_result
    path = tmp_path / "positions.hcpe"
    records.tofile(path)
    buffer = load_buffer([path])
    batch = buffer.gather(np.arange(len(buffer)))
    assert_results_by_side_to_move(buffer.hcps[:len(buffer)], batch.result, winner)
    # +600 is good for the side to move, whichever it is: a win rate of 0.69, value +0.38.
    assert batch.root_value == pytest.approx(np.full(len(HELPMATE), 0.377), abs=1e-3)


def test_a_game_resumed_from_its_saved_state_keeps_each_positions_side():
    """Games in progress are saved by ply (selfplay/in_progress.py); with playout caps the
    recorded plies skip the cheap moves, so a position's side to move is its ply's parity, not
    its index's. A resumed game must give every position the same result as the game played
    through."""
    rules, cap = Rules(), PlayoutCap(cheap_search_prob=0.5)
    through = play_to_the_end(new_selfplay(HELPMATE, rules, playout_cap=cap, seed=3))
    plies = through.positions.plies.tolist()
    assert any(p % 2 != i % 2 for i, p in enumerate(plies))  # the index's parity would be wrong
    assert (through.record.termination, through.record.winner) == (Termination.CHECKMATE, BLACK)
    assert_results_by_side_to_move(through.positions.hcps, through.positions.results, BLACK)

    first = new_selfplay(HELPMATE, rules, playout_cap=cap, seed=3)
    for _ in range(4):
        assert not first.step()
    resumed = new_selfplay(HELPMATE, rules, playout_cap=cap, seed=3)
    resumed.load_state_dict(first.state_dict())
    game = play_to_the_end(resumed)
    assert game.positions.plies.tolist() == plies
    assert_results_by_side_to_move(game.positions.hcps, game.positions.results, BLACK)
    assert game.positions.results.tolist() == through.positions.results.tolist()


# --- the value target ---

class ValueProbe(torch.nn.Module):
    """A 'network' whose value logit for row i of the batch is the parameter b[i] and whose
    policy is uniform. From b = 0, one plain SGD step of learning rate B (the batch size) moves
    b[i] by value_loss_weight * (t[i] - 1/2) under BCE, and by half that under MSE:
    it reads the win-probability target t the trainer fits, row by row."""

    def __init__(self, rows: int):
        super().__init__()
        self.b = torch.nn.Parameter(torch.zeros(rows))

    def forward(self, x1, x2):
        return torch.zeros(len(x1), features.NUM_LABELS), self.b[:, None]


def fitted_targets(batch: Batch, root_weight: float, value_loss: ValueLoss = ValueLoss.bce) -> np.ndarray:
    rows = len(batch.result)
    probe = ValueProbe(rows)
    cfg = TrainConfig(optimizer=Optimizer.sgd, lr=float(rows), momentum=0.0, weight_decay=0.0, warmup_steps=0,
                      grad_clip=0.0, value_loss=value_loss, value_loss_weight=1.0,
                      value_target_root_weight=root_weight)
    trainer = Trainer(probe, cfg, torch.device("cpu"))
    trainer.step(batch)
    assert not trainer.read_back()[0].skipped
    gain = 1.0 if value_loss == ValueLoss.bce else 0.5
    return 0.5 + probe.b.detach().numpy() / gain


def batch_of(results, root_values) -> Batch:
    n = len(results)
    f1, f2 = features.allocate(n)
    policy = np.full((n, features.NUM_LABELS), 1.0 / features.NUM_LABELS, np.float32)
    return Batch(f1, f2, policy, np.asarray(results, np.float32), np.asarray(root_values, np.float32))


@pytest.mark.parametrize("value_loss", [ValueLoss.bce, ValueLoss.mse])
@pytest.mark.parametrize("w", [0.0, 0.3, 1.0])
def test_the_value_target_is_the_side_to_moves_win_probability(w, value_loss):
    # Rows: won, lost, drawn, each with a root value against the result and one agreeing.
    results = [1, -1, 0, 1, -1, 0]
    roots = [-0.5, 0.5, -0.5, 0.8, -0.8, 0.4]
    targets = fitted_targets(batch_of(results, roots), w, value_loss)
    # A win is probability 1, a loss 0, a draw 1/2; the root value (in [-1, 1], the side to
    # move's view) enters with weight w on the same scale.
    expected = [(1 + (1 - w) * r + w * v) / 2 for r, v in zip(results, roots)]
    assert targets == pytest.approx(expected, abs=1e-5)
    if w == 0:
        assert targets[:3] == pytest.approx([1.0, 0.0, 0.5], abs=1e-5)


def material_evaluator():
    """The side to move's win probability from material: pieces on the board and in hand, its
    own minus its opponent's (the features are from the side to move's view)."""

    def fn(f1, f2):
        own = f1[:, :14].sum(axis=(1, 2, 3)) + f2[:, :28, 0, 0].sum(axis=1)
        theirs = f1[:, 31:45].sum(axis=(1, 2, 3)) + f2[:, 28:56, 0, 0].sum(axis=1)
        return np.zeros((len(f1), features.NUM_LABELS), np.float32), 1 / (1 + np.exp(-(own - theirs)))

    return FunctionEvaluator(fn)


class RecordingSearch:
    """A search that keeps every root it was asked about (SFEN) with its result."""

    def __init__(self, search):
        self.search, self.num_simulations, self.calls = search, search.num_simulations, []

    def run(self, boards, plies, rngs, **kwargs):
        result = self.search.run(boards, plies, rngs, **kwargs)
        self.calls.append(([b.sfen() for b in boards], result))
        return result


# White has only its king and pawns: black, and only black, is far ahead whichever side is to move.
BLACK_AHEAD = "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"


def real_search_game(kind: str, min_policy_prob: float = 1e-4, plies: int = 4):
    """A self-play game from BLACK_AHEAD with a real search of either family, stopped at the
    ply limit (a draw); the search looks past the limit, or its leaves beyond it would be
    draws and pull the last roots' values to 0."""
    if kind == "gumbel":
        searcher = GumbelSearch(material_evaluator(), Rules(), 1, num_simulations=16, max_num_considered_actions=8)
    else:
        searcher = PuctSearch(material_evaluator(), Rules(), 1, num_simulations=16, leaves_per_step=2)
    search = RecordingSearch(searcher)
    selfplay = SelfPlay(search, Rules(max_plies=plies), num_actors=1, min_policy_prob=min_policy_prob)
    selfplay.actors[0].board = cshogi.Board(BLACK_AHEAD)
    for _ in range(plies):
        finished = selfplay.step()
    [game] = finished
    return game, search.calls


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_root_values_are_from_the_side_to_move_and_so_is_the_value_target(kind, tmp_path):
    game, _ = real_search_game(kind)
    record = game.positions
    black_to_move = np.array([turn_of(h) == BLACK for h in record.hcps])
    assert black_to_move.any() and (~black_to_move).any()
    # Black is ahead: its positions' root values are positive, white's negative, within [-1, 1].
    assert (record.root_values[black_to_move] > 0.3).all() and (record.root_values[~black_to_move] < -0.3).all()
    assert (np.abs(record.root_values) <= 1).all()

    buffer = ReplayBuffer(capacity=16)
    buffer.extend(record)
    slots = np.arange(len(buffer))
    batch = buffer.gather(slots)
    assert batch.root_value == pytest.approx(record.root_values, abs=1e-3)  # float16
    targets = fitted_targets(batch, root_weight=1.0)  # the root value alone
    assert (targets[black_to_move] > 0.6).all() and (targets[~black_to_move] < 0.4).all()

    # hcpe3 keeps the root value as the side to move's eval.
    writer = Hcpe3Writer()
    writer.add(game)
    read = load_buffer([writer.flush(tmp_path / "g.hcpe3")])
    assert read.gather(np.arange(len(read))).root_value == pytest.approx(record.root_values, abs=2e-3)


# --- the policy target ---

@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_the_policy_target_is_the_searchs_on_each_moves_own_label(kind, tmp_path):
    min_prob = 0.02
    game, calls = real_search_game(kind, min_policy_prob=min_prob)
    assert {cshogi.Board(sfen).turn for (sfen,), _ in calls} == {BLACK, WHITE}
    expected, legal, dropped = [], [], 0
    for (sfen,), result in calls:
        board = cshogi.Board(sfen)
        n = int(result.num_edges[0])
        moves, probs = result.edge_moves[0, :n], result.policy[0, :n].astype(np.float64)
        kept = (probs >= min_prob) | (probs == probs.max())
        dropped += int((~kept).sum())
        target = np.zeros(features.NUM_LABELS)
        for move, p in zip(moves[kept], probs[kept]):
            target[dlshogi.make_move_label(int(move), board.turn)] += p  # the side to move's label
        expected.append(target / target.sum())
        legal.append(legal_labels(board))
    assert dropped > 0  # entries below min_policy_prob were there to drop

    buffer = ReplayBuffer(capacity=16)
    buffer.extend(game.positions)
    assert [turn_of(h) for h in buffer.hcps[:len(calls)]] == [cshogi.Board(s).turn for (s,), _ in calls]
    assert_policy_rows(buffer.gather(np.arange(len(buffer))).policy, expected, legal, 2e-3)  # float16
    writer = Hcpe3Writer()
    writer.add(game)
    read = load_buffer([writer.flush(tmp_path / "g.hcpe3")])
    assert_policy_rows(read.gather(np.arange(len(read))).policy, expected, legal, 3e-3)  # visits, float16


def assert_policy_rows(policy: np.ndarray, expected: list, legal: list, tolerance: float) -> None:
    """Each row sums to 1, lies on its position's legal moves and is the expected target."""
    assert len(policy) == len(expected)
    for row, target, labels in zip(policy, expected, legal):
        assert row.sum() == pytest.approx(1.0, abs=1e-5)
        assert set(np.flatnonzero(row)) <= labels
        assert set(np.flatnonzero(row)) == set(np.flatnonzero(target))
        assert row == pytest.approx(target, abs=tolerance)


def test_scripted_policies_keep_their_proportions_after_the_floor():
    # Every legal move of the initial position, halving weights: those below 1e-4 are dropped,
    # the rest renormalised; the scripted move, first, keeps the largest share.
    ending = ENDINGS[-1]  # the ply limit: five positions from the initial one
    game = play_to_the_end(new_selfplay(list(ending.moves), ending.rules))
    buffer = ReplayBuffer(capacity=16)
    buffer.extend(game.positions)
    batch = buffer.gather(np.arange(len(buffer)))
    board = cshogi.Board()
    for row, usi in enumerate(ending.moves):
        move = board.move_from_usi(usi)
        moves, probs = scripted_policy(board, move)
        kept = probs >= 1e-4
        assert 1 < kept.sum() < len(moves)
        expected = np.zeros(features.NUM_LABELS)
        for m, p in zip(np.array(moves)[kept], probs[kept]):
            expected[dlshogi.make_move_label(int(m), board.turn)] = p
        expected /= expected.sum()
        assert batch.policy[row] == pytest.approx(expected, abs=1e-3)
        assert np.argmax(batch.policy[row]) == dlshogi.make_move_label(move, board.turn)
        board.push(move)


# --- the replay window's sampling ---

def tagged_game(game_id: int, first: int, length: int, entries: int) -> TrainingPositions:
    """`length` positions whose root values tag their absolute index (first, first + 1, ...)
    as index / 1024 (exact in float16), each with `entries` policy entries."""
    hcp = features.hcp_of(cshogi.Board())
    return TrainingPositions.of_game(game_id, np.repeat(hcp[None], length, axis=0), np.zeros(length),
                                     (np.arange(first, first + length) / 1024).astype(np.float32), np.arange(length),
                                     np.full(length, entries), np.zeros(length * entries),
                                     np.full(length * entries, 1.0 / entries, np.float32))


def sampled_indices(buffer: ReplayBuffer, n: int, rng) -> np.ndarray:
    """The absolute indices of the positions in a minibatch drawn by `sample`."""
    return np.rint(buffer.sample(n, rng).root_value * 1024).astype(np.int64)


@pytest.mark.parametrize("entries_per_position", [64, 2])  # the position ring or the entry ring evicts
def test_minibatches_are_uniform_over_exactly_the_newest_positions(entries_per_position):
    buffer = ReplayBuffer(capacity=40, entries_per_position=entries_per_position)
    rng = np.random.default_rng(0)
    added = 0
    for game_id, (length, entries) in enumerate([(7, 1), (13, 3), (9, 1), (11, 4), (15, 2), (6, 5), (12, 1)]):
        buffer.extend(tagged_game(game_id, added, length, entries))
        added += length
        window = np.arange(buffer.begin, buffer.end)
        assert buffer.end == added and len(window) > 0  # the window is the newest positions, in order
        assert np.rint(buffer.gather(window % buffer.capacity).root_value * 1024).tolist() == window.tolist()
        assert set(sampled_indices(buffer, 300, rng)) == set(window.tolist())
    assert buffer.begin > 0 and buffer.end - buffer.begin < added  # the ring wrapped and evicted
    if entries_per_position == 2:
        assert len(buffer) < buffer.capacity  # the entry ring evicted positions the position ring had room for

    # Uniform: a chi-square test over the window's positions (fixed seed).
    window = np.arange(buffer.begin, buffer.end)
    draws = 100 * len(window)
    counts = np.bincount(sampled_indices(buffer, draws, np.random.default_rng(1)) - buffer.begin,
                         minlength=len(window))
    assert len(counts) == len(window)
    chi2 = float(((counts - 100) ** 2 / 100).sum())
    dof = len(window) - 1
    assert chi2 < dof + 6 * np.sqrt(2 * dof)  # about 1e-6 of uniform samples go past it
