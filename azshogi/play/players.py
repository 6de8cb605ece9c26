"""Players for matches: what a player is (`Player`: `choose` answers a list of turns), and the
players that are not the engine: a checkpoint's raw policy, self-play's batched Gumbel search,
uniform random, a one-ply material-greedy baseline, and any external USI engine. The engine
itself (`search:CKPT`, the one users run in a GUI) is play/engine.Engine; play/specs.py makes
players from the command line's specs.

A player answers a *list* of turns at once (`choose`), one per game in flight where it is to
move, so a network player evaluates all of them in one batched forward pass per search step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Sequence

import cshogi
import numpy as np

from azshogi.config import SearchKind
from azshogi.play.usi_client import UsiClient, UsiError, win_rate_of_info
from azshogi.search import make_search
from azshogi.shogi.rules import Rules, declaration_wins, mate_move


@dataclass
class Turn:
    """A game in progress waiting for the player's move. `board` holds the game's history; a
    player may push and pop on it but must return it unchanged."""

    game: int
    board: cshogi.Board
    ply: int  # plies played from the game's start position
    start_sfen: Optional[str]  # None = the standard start position
    moves: list  # USI moves from the start position


@dataclass
class Choice:
    move: str  # a USI move, "resign" or "win" (an impasse declaration); "" when `failed`
    win_rate: Optional[float] = None  # the player's estimate for itself, if it has one
    failed: Optional[str] = None  # no move came (an engine that hung or exited): why; the game is lost on time


class Player:
    name = "player"
    rules = Rules()  # the rules of the games it plays (its impasse declarations follow them)

    def choose(self, turns: Sequence[Turn]) -> list[Choice]:
        raise NotImplementedError

    def note(self) -> Optional[str]:
        """One line a match prints about how the player plays (e.g. a setting it chose), or None."""
        return None

    def new_game(self, game: int) -> None:
        """A game is about to start (USI engines get `usinewgame`)."""

    def end_game(self, game: int) -> None:
        """A game is over: what the player kept for it may go."""

    def close(self) -> None:
        """Releases processes and memory."""

    def _declaration(self, turn: Turn) -> Optional[Choice]:
        """Built-in players declare an impasse win whenever the rules allow it."""
        if declaration_wins(turn.board, self.rules):
            return Choice("win", 1.0)
        return None


class OnePlyPlayer(Player):
    """A built-in baseline that looks at one turn at a time: it declares an impasse win when the
    rules allow it, else plays `move(turn)`, drawing from its own seeded stream."""

    def __init__(self, seed: int = 0, name: str = ""):
        self.rng = np.random.default_rng(seed)
        self.name = name or self.name

    def choose(self, turns):
        return [self._declaration(turn) or self.move(turn) for turn in turns]

    def move(self, turn: Turn) -> Choice:
        raise NotImplementedError


class RandomPlayer(OnePlyPlayer):
    """Uniformly random legal moves: the weakest anchor."""

    name = "random"

    def move(self, turn: Turn) -> Choice:
        moves = list(turn.board.legal_moves)
        return Choice(cshogi.move_to_usi(moves[self.rng.integers(len(moves))]))


# Piece values in pawns (cshogi piece types 1..14: p l n s b r g k +p +l +n +s +b +r), a common
# hand-made scale; the king's is irrelevant (it is never captured in a legal game).
PIECE_VALUES = np.array([0, 1, 3, 4, 5, 8, 10, 6, 0, 6, 6, 6, 6, 10, 12], np.float64)
# Value in hand of each captured piece type (a captured piece loses its promotion).
HAND_VALUES = np.array([0, 1, 3, 4, 5, 8, 10, 6, 0, 1, 3, 4, 5, 8, 10], np.float64)


def material_gain(move: int) -> float:
    """The mover's material gain from one move: what it captures (off the opponent's board and
    into the mover's hand) plus what a promotion adds."""
    gain = 0.0
    captured = cshogi.move_cap(move)
    if captured:
        gain += PIECE_VALUES[captured] + HAND_VALUES[captured]
    if cshogi.move_is_promotion(move):
        piece = cshogi.move_from_piece_type(move)
        gain += PIECE_VALUES[piece + 8] - PIECE_VALUES[piece]
    return gain


class GreedyPlayer(OnePlyPlayer):
    """One ply deep: mates in one when it can, else the move that wins the most material
    (captures and promotions), ties broken at random. Blind to what the opponent answers."""

    name = "greedy"

    def move(self, turn: Turn) -> Choice:
        board = turn.board
        mate = board.mate_move_in_1ply() if not board.is_check() else 0
        if mate:
            return Choice(cshogi.move_to_usi(mate))
        moves = list(board.legal_moves)
        gains = np.array([material_gain(m) for m in moves])
        best = np.flatnonzero(gains == gains.max())
        return Choice(cshogi.move_to_usi(moves[self.rng.choice(best)]))


class PolicyPlayer(Player):
    """A network's raw policy: the legal move with the largest logit (or sampled with a
    temperature), all turns in one forward pass."""

    def __init__(self, evaluator, temperature: float = 0.0, seed: int = 0, name: str = "policy"):
        self.evaluator, self.temperature = evaluator, temperature
        self.rng = np.random.default_rng(seed)
        self.name = name

    def choose(self, turns):
        out: list[Optional[Choice]] = [self._declaration(t) for t in turns]
        rows = [i for i, c in enumerate(out) if c is None]
        if rows:
            batch = self.evaluator.allocate(len(rows))
            for i in rows:
                batch.add(turns[i].board, list(turns[i].board.legal_moves))
            batch.seal()
            logits, win = self.evaluator.evaluate(batch)
            offsets = batch.offsets()
            for r, i in enumerate(rows):
                moves = batch.moves[offsets[r]:offsets[r + 1]]
                scores = logits[offsets[r]:offsets[r + 1]].astype(np.float64)
                if self.temperature > 0:
                    p = np.exp((scores - scores.max()) / self.temperature)
                    k = int(self.rng.choice(len(moves), p=p / p.sum()))
                else:
                    k = int(np.argmax(scores))
                out[i] = Choice(cshogi.move_to_usi(moves[k]), float(win[r]))
        return out


class GumbelPlayer(Player):
    """Self-play's batched Gumbel AlphaZero search (search/gumbel.py via `make_search`), all
    turns searched together; no sampling by the improved policy (Gumbel's root sampling stays,
    being part of the search). A mate within `mate_plies` found by cshogi's mate search at the
    root is played at once (0 = off); resigns below `resign`."""

    def __init__(self, evaluator, search_config, rules: Rules, max_games: int, seed: int = 0,
                 resign: float = 0.0, name: str = "gumbel", mate_plies: int = 3):
        self.search = make_search(replace(search_config, kind=SearchKind.gumbel), evaluator, rules, max_games)
        self.rules, self.resign, self.name, self.mate_plies = rules, resign, name, mate_plies
        self.seed = seed
        self.rngs: dict[int, np.random.Generator] = {}  # one stream per game: results do not
        # depend on which games happen to share a batch

    def new_game(self, game: int) -> None:
        self.rngs[game] = np.random.default_rng([self.seed, game])

    def end_game(self, game: int) -> None:
        self.rngs.pop(game, None)

    def choose(self, turns):
        out: list[Optional[Choice]] = [self._declaration(t) or self._mate(t) for t in turns]
        rows = [i for i, c in enumerate(out) if c is None]
        if rows:
            rngs = [self.rngs.setdefault(turns[i].game, np.random.default_rng([self.seed, turns[i].game]))
                    for i in rows]
            result = self.search.run([turns[i].board for i in rows],
                                     np.array([turns[i].ply for i in rows], np.int64), rngs,
                                     sample=np.zeros(len(rows), bool))
            for r, i in enumerate(rows):
                win_rate = float(result.root_value[r] + 1.0) / 2.0
                move = "resign" if win_rate < self.resign else cshogi.move_to_usi(int(result.moves[r]))
                out[i] = Choice(move, win_rate)
        return out

    def _mate(self, turn) -> Optional[Choice]:
        move = mate_move(turn.board, self.mate_plies)
        return Choice(cshogi.move_to_usi(move), 1.0) if move else None


def go_timeout(go: str, grace: float = 60.0, unbounded: float = 600.0) -> float:
    """How long a `go` may take before the engine counts as hung: its clock (byoyomi, movetime,
    the remaining times and increments, in ms) plus `grace`; `unbounded` for a go with none
    (nodes, depth)."""
    words = go.split()
    clock = 0.0
    for key in ("btime", "wtime", "byoyomi", "binc", "winc", "movetime"):
        if key in words[:-1]:
            try:
                clock += max(0.0, float(words[words.index(key) + 1])) / 1000.0
            except ValueError:
                pass
    return clock + grace if clock else unbounded


class UsiPlayer(Player):
    """An external USI engine; the turns of several games are asked one after another.

    An engine that exits or hangs (no `bestmove` within `go_timeout`) loses the game it was
    asked about on time, as a tournament would score it, and is started again for the games
    after it (the other games in flight go on: each `go` sends the whole position). Its
    `restarts`-th + 1 failure in one match raises UsiError: an engine that keeps failing ends the
    match, the games played so far kept."""

    def __init__(self, command: str, options: Optional[dict] = None, go: str = "byoyomi 1000",
                 name: Optional[str] = None, restarts: int = 3):
        self.command, self.options = command, dict(options or {})
        self.client = UsiClient(command, self.options)
        self.go_args = go
        self.timeout = go_timeout(go)
        self.name = name or self.client.name
        self.restarts = restarts
        self.failures = 0  # in this player's match

    def new_game(self, game: int) -> None:
        try:
            self.client.send("usinewgame")
        except UsiError as e:  # it exited after its last move: no game is lost, it starts again
            self._restart(e)

    def choose(self, turns):
        out = []
        for turn in turns:
            try:
                move, info = self.client.go(turn.start_sfen, turn.moves, self.go_args, self.timeout)
            except UsiError as e:
                self._restart(e)
                out.append(Choice("", failed=str(e)))
                continue
            out.append(Choice(move, win_rate_of_info(info)))
        return out

    def _restart(self, error: UsiError) -> None:
        """The engine, stopped (killed if it does not quit) and started again with its options;
        UsiError when this failure is one too many or the new engine does not start."""
        self.failures += 1
        self.client.close()
        if self.failures > self.restarts:
            raise UsiError(f"{error} (its failure {self.failures} in this match, {self.restarts} restarted: "
                           f"the match ends)") from None
        self.client = UsiClient(self.command, self.options)
        self.client.send("usinewgame")

    def close(self) -> None:
        self.client.close()
