"""Players for matches: a checkpoint with search or by its raw policy, uniform random, a one-ply
material-greedy baseline, and any external USI engine.

A player answers a *list* of turns at once (`choose`), one per game in flight where it is to
move, so a network player evaluates all of them in one batched forward pass per search step.
Player specs on the command line:

    random | greedy | policy:CHECKPOINT | search:CHECKPOINT | usi:"COMMAND [ARGS]"

with options `KEY=VALUE`: search `simulations`, `kind` (gumbel or puct; default: the
checkpoint's), `considered` (Gumbel's m), `leaves` (PUCT's leaves per forward pass), `mate` (plies
of the root mate search, default 3, 0 = off), `resign` (a
win rate); policy `temperature`; usi `go` (the go arguments, default `byoyomi 1000`), `name` and anything else as
`setoption` (e.g. `UCI_Variant=shogi`); every kind `name`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

import cshogi
import numpy as np

from azshogi.play.usi_client import UsiClient, win_rate_of_info
from azshogi.shogi.rules import Rules, mate_move


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
    move: str  # a USI move, "resign" or "win" (an impasse declaration)
    win_rate: Optional[float] = None  # the player's estimate for itself, if it has one


class Player:
    name = "player"
    impasse_law = cshogi.LAW_27

    def choose(self, turns: Sequence[Turn]) -> list[Choice]:
        raise NotImplementedError

    def new_game(self, game: int) -> None:
        """A game is about to start (USI engines get `usinewgame`)."""

    def close(self) -> None:
        """Releases processes and memory."""

    def _declaration(self, turn: Turn) -> Optional[Choice]:
        """Built-in players declare an impasse win whenever the rules allow it."""
        if turn.board.is_nyugyoku(self.impasse_law):
            return Choice("win", 1.0)
        return None


class RandomPlayer(Player):
    """Uniformly random legal moves: the weakest anchor."""

    def __init__(self, seed: int = 0, name: str = "random"):
        self.rng = np.random.default_rng(seed)
        self.name = name

    def choose(self, turns):
        out = []
        for turn in turns:
            moves = list(turn.board.legal_moves)
            out.append(self._declaration(turn) or Choice(cshogi.move_to_usi(moves[self.rng.integers(len(moves))])))
        return out


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


class GreedyPlayer(Player):
    """One ply deep: mates in one when it can, else the move that wins the most material
    (captures and promotions), ties broken at random. Blind to what the opponent answers."""

    def __init__(self, seed: int = 0, name: str = "greedy"):
        self.rng = np.random.default_rng(seed)
        self.name = name

    def choose(self, turns):
        out = []
        for turn in turns:
            declared = self._declaration(turn)
            if declared:
                out.append(declared)
                continue
            board = turn.board
            mate = board.mate_move_in_1ply() if not board.is_check() else 0
            if mate:
                out.append(Choice(cshogi.move_to_usi(mate)))
                continue
            moves = list(board.legal_moves)
            gains = np.array([material_gain(m) for m in moves])
            best = np.flatnonzero(gains == gains.max())
            out.append(Choice(cshogi.move_to_usi(moves[self.rng.choice(best)])))
        return out


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


class SearchPlayer(Player):
    """A network with the configured tree search (the loop's `make_search`), all turns searched
    together. It plays to win: no Dirichlet noise and no sampling by visit counts (the variety of
    a match comes from its openings; Gumbel's root sampling stays, being part of the search).
    Resigns when its root win rate falls below `resign` (0 = never). A mate within `mate_plies`
    found by cshogi's mate search at the root is played at once (0 = off)."""

    def __init__(self, evaluator, search_config, rules: Rules, max_games: int, seed: int = 0,
                 resign: float = 0.0, name: str = "search", mate_plies: int = 3):
        from azshogi.search import PuctSearch, make_search

        self.search = make_search(search_config, evaluator, rules, max_games)
        self.noise_option = {"noise": False} if isinstance(self.search, PuctSearch) else {}
        self.rules, self.resign, self.name, self.mate_plies = rules, resign, name, mate_plies
        self.impasse_law = rules.impasse_law
        self.seed = seed
        self.rngs: dict[int, np.random.Generator] = {}  # one stream per game: results do not
        # depend on which games happen to share a batch

    def new_game(self, game: int) -> None:
        self.rngs[game] = np.random.default_rng([self.seed, game])

    def choose(self, turns):
        out: list[Optional[Choice]] = [self._declaration(t) or self._mate(t) for t in turns]
        rows = [i for i, c in enumerate(out) if c is None]
        if rows:
            rngs = [self.rngs.setdefault(turns[i].game, np.random.default_rng([self.seed, turns[i].game]))
                    for i in rows]
            result = self.search.run([turns[i].board for i in rows],
                                     np.array([turns[i].ply for i in rows], np.int64), rngs,
                                     sample=np.zeros(len(rows), bool), **self.noise_option)
            for r, i in enumerate(rows):
                win_rate = float(result.root_value[r] + 1.0) / 2.0
                move = "resign" if win_rate < self.resign else cshogi.move_to_usi(int(result.moves[r]))
                out[i] = Choice(move, win_rate)
        return out


    def _mate(self, turn) -> Optional[Choice]:
        move = mate_move(turn.board, self.mate_plies)
        return Choice(cshogi.move_to_usi(move), 1.0) if move else None


class UsiPlayer(Player):
    """An external USI engine; the turns of several games are asked one after another."""

    def __init__(self, command: str, options: Optional[dict] = None, go: str = "byoyomi 1000",
                 name: Optional[str] = None):
        self.client = UsiClient(command, options)
        self.go_args = go
        self.name = name or self.client.name

    def new_game(self, game: int) -> None:
        self.client.send("usinewgame")

    def choose(self, turns):
        out = []
        for turn in turns:
            move, info = self.client.go(turn.start_sfen, turn.moves, self.go_args)
            out.append(Choice(move, win_rate_of_info(info)))
        return out

    def close(self) -> None:
        self.client.close()


# --- players from specs ---

def make_player(spec: str, options: Optional[dict] = None, *, rules: Rules, max_games: int = 1,
                seed: int = 0, device: str = "auto", dtype: Optional[str] = None) -> Player:
    """A player from a spec (see the module docstring) and its KEY=VALUE options."""
    options = dict(options or {})
    kind, _, arg = spec.partition(":")
    name = options.pop("name", None)
    if kind in ("random", "greedy"):
        if options:
            raise ValueError(f"player {spec!r}: takes no options but name, got {sorted(options)}")
        return RandomPlayer(seed, name or "random") if kind == "random" else GreedyPlayer(seed, name or "greedy")
    if kind in ("policy", "search"):
        if not arg:
            raise ValueError(f"player {spec!r}: give a checkpoint, e.g. {kind}:checkpoints/run/ckpt-00010.pt")
        leaves = int(options.get("leaves", 1))
        from azshogi.play.models import model_evaluator

        evaluator, cfg = model_evaluator(arg, device, dtype, max_batch=max_games * max(leaves, 8))
        label = name or f"{kind}:{Path(arg).stem}"
        if kind == "policy":
            temperature = float(options.pop("temperature", 0.0))
            if options:
                raise ValueError(f"player {spec!r}: unknown options {sorted(options)}")
            return PolicyPlayer(evaluator, temperature, seed, label)
        search_config = replace(cfg.search)
        if "simulations" in options:
            search_config.num_simulations = int(options.pop("simulations"))
        if "considered" in options:
            search_config.max_num_considered_actions = int(options.pop("considered"))
        if "kind" in options:
            from azshogi.config import SearchKind

            search_config.kind = SearchKind(options.pop("kind"))
        if "leaves" in options:
            search_config.leaves_per_step = int(options.pop("leaves"))
        resign = float(options.pop("resign", 0.0))
        mate_plies = int(options.pop("mate", 3))
        if options:
            raise ValueError(f"player {spec!r}: unknown options {sorted(options)}")
        return SearchPlayer(evaluator, search_config, rules, max_games, seed, resign, label, mate_plies)
    if kind == "usi":
        if not arg:
            raise ValueError("player usi: give the engine command, e.g. usi:/usr/games/fairy-stockfish")
        go = options.pop("go", "byoyomi 1000")
        return UsiPlayer(arg, options, go, name)
    raise ValueError(f"unknown player {spec!r}: random, greedy, policy:CKPT, search:CKPT or usi:COMMAND")
