"""Players for matches: a checkpoint with the USI engine's search or by its raw policy,
self-play's batched Gumbel search, uniform random, a one-ply material-greedy baseline, and any
external USI engine.

A player answers a *list* of turns at once (`choose`), one per game in flight where it is to
move, so a network player evaluates all of them in one batched forward pass per search step.
Player specs on the command line:

    random | greedy | policy:CHECKPOINT | search:CHECKPOINT | gumbel:CHECKPOINT | usi:"COMMAND [ARGS]"

`search:` is the engine users run in a GUI (search/anytime.GameSearch) with a fixed number of
simulations per move, so a match measures that engine and is reproducible. Options `KEY=VALUE`:
search `nodes` (simulations per move; default the run's search.num_simulations), `batch`
(descents per tree per forward pass, the engine's BatchSize; default 8), `mate` (df-pn nodes of
the root mate search, 0 = off; default 100000), `resign` (a win rate), `cpuct` (PUCT's c_init;
default the run's), `fpu` (first-play urgency reduction; default 0.2), `softmax` (the policy's
temperature for the priors, or `auto`, the default: chosen from the network, play/temperature.py); gumbel `simulations`,
`considered` (Gumbel's m), `mate` (plies of the root mate search, default 3, 0 = off), `resign`;
policy `temperature`; usi `go` (the go arguments, default `byoyomi 1000`) and anything else as
`setoption` (e.g. `UCI_Variant=shogi`); every kind `name`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional, Sequence

import cshogi
import numpy as np

from azshogi.play.engine import EngineSettings, engine_search
from azshogi.play.temperature import AUTO, parse_temperature
from azshogi.play.usi_client import UsiClient, win_rate_of_info
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
    move: str  # a USI move, "resign" or "win" (an impasse declaration)
    win_rate: Optional[float] = None  # the player's estimate for itself, if it has one


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


class SearchPlayer(Player):
    """The engine (play/engine.py: the USI engine's search and defaults) with a fixed number of
    simulations per move: one tree per game in flight, kept between that game's moves as the
    engine keeps it, and the leaves of every game to move in one forward pass per step. A mate
    found by the root's df-pn search is played at once; resigns when its root win rate falls
    below `settings.resign` (0 = never). No noise and no sampling: a match's variety comes from
    its openings. `cfg`: the run settings of the checkpoint the evaluator holds."""

    def __init__(self, evaluator, cfg, settings: EngineSettings, max_games: int, name: str = "search"):
        self.search = engine_search(evaluator, cfg, settings, max_games)
        self.nodes = settings.nodes or cfg.search.num_simulations
        self.rules, self.resign, self.name = self.search.rules, settings.resign, name
        self.chosen = "auto, from its policy" if settings.policy_temperature is None else "set"
        self.trees: dict[int, int] = {}  # game -> its tree in the search

    def note(self) -> str:
        return f"{self.name}: PolicyTemperature {self.search.policy_temperature:g} ({self.chosen})"

    def new_game(self, game: int) -> None:
        self.end_game(game)
        free = sorted(set(range(self.search.games)) - set(self.trees.values()))
        if not free:
            raise ValueError(f"{self.name}: more than {self.search.games} games in flight")
        self.trees[game] = free[0]
        self.search.clear(free[0])

    def end_game(self, game: int) -> None:
        self.trees.pop(game, None)

    def choose(self, turns):
        out: list[Optional[Choice]] = [self._declaration(t) or self._mate(t) for t in turns]
        boards, plies = {}, {}
        for turn, choice in zip(turns, out):
            if choice is None:
                if turn.game not in self.trees:
                    self.new_game(turn.game)
                tree = self.trees[turn.game]
                self.search.prepare(turn.board, turn.start_sfen or "", turn.moves, tree)
                boards[tree], plies[tree] = turn.board, turn.ply
        reports = self.search.run_games(boards, plies, self.nodes) if boards else {}
        for i, turn in enumerate(turns):
            if out[i] is None:
                report = reports[self.trees[turn.game]]
                move = "resign" if report.win_rate < self.resign else cshogi.move_to_usi(report.move)
                out[i] = Choice(move, report.win_rate)
        return out

    def _mate(self, turn) -> Optional[Choice]:
        line = self.search.mate(turn.board)
        return Choice(cshogi.move_to_usi(line[0]), 1.0) if line else None


class GumbelPlayer(Player):
    """Self-play's batched Gumbel AlphaZero search (search/gumbel.py via `make_search`), all
    turns searched together; no sampling by the improved policy (Gumbel's root sampling stays,
    being part of the search). A mate within `mate_plies` found by cshogi's mate search at the
    root is played at once (0 = off); resigns below `resign`."""

    def __init__(self, evaluator, search_config, rules: Rules, max_games: int, seed: int = 0,
                 resign: float = 0.0, name: str = "gumbel", mate_plies: int = 3):
        from azshogi.config import SearchKind
        from azshogi.search import make_search

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

PLAYER_KINDS = "random, greedy, policy:CKPT, search:CKPT, gumbel:CKPT, usi:COMMAND or ladder:RUNG"
_OPTIONS = {"random": (), "greedy": (), "policy": ("temperature",),
            "search": ("nodes", "batch", "mate", "resign", "cpuct", "fpu", "softmax"),
            "gumbel": ("simulations", "considered", "mate", "resign")}


def _number(spec: str, options: dict, key: str, default, kind=int, low=0, high=None):
    """options[key] (popped) as a finite number in [low, high], or `default` when not given;
    anything else raises ValueError naming the option and what it takes."""
    if key not in options:
        return default
    text = options.pop(key)
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        takes = "an integer" if kind is int else "a number"
        raise ValueError(f"player {spec!r}: {key}={text!r}: takes {takes} {bound}")
    return value


def _temperature(spec: str, options: dict) -> Optional[float]:
    """options["softmax"] (popped): None for "auto" or when not given, else a number > 0."""
    text = options.pop("softmax", AUTO)
    try:
        return parse_temperature(text)
    except ValueError as e:
        raise ValueError(f"player {spec!r}: softmax={text!r}: {e}") from None


def make_player(spec: str, options: Optional[dict] = None, *, rules: Rules, max_games: int = 1,
                seed: int = 0, device: str = "auto", dtype: Optional[str] = None) -> Player:
    """A player from a spec (see the module docstring) and its KEY=VALUE options, for games
    under `rules` with at most `max_games` in flight; a bad spec, option or checkpoint raises
    ValueError naming it."""
    options = dict(options or {})
    kind, _, arg = spec.partition(":")
    name = options.pop("name", None)
    if kind in _OPTIONS:
        unknown = sorted(set(options) - set(_OPTIONS[kind]))
        if unknown:
            allowed = ", ".join(_OPTIONS[kind] + ("name",))
            hint = "; gumbel:CKPT (self-play's search) takes simulations and considered" \
                if kind == "search" and {"simulations", "considered"} & set(unknown) else ""
            raise ValueError(f"player {spec!r}: unknown option {', '.join(unknown)} (it takes {allowed}{hint})")
    if kind in ("random", "greedy"):
        player: Player = RandomPlayer(seed, name or "random") if kind == "random" else GreedyPlayer(seed,
                                                                                                    name or "greedy")
        player.rules = rules
        return player
    if kind == "ladder":
        from azshogi.play.ladder import rung_player

        player = rung_player(arg, seed, options, name)
        player.rules = rules
        return player
    if kind == "search":
        default = EngineSettings()
        settings = EngineSettings(nodes=_number(spec, options, "nodes", 0, low=1),
                                  batch_size=_number(spec, options, "batch", default.batch_size, low=1, high=256),
                                  mate_search_nodes=_number(spec, options, "mate", default.mate_search_nodes),
                                  resign=_number(spec, options, "resign", 0.0, float, 0.0, 1.0),
                                  max_plies=rules.max_plies,
                                  c_init=_number(spec, options, "cpuct", None, float, 1e-6),
                                  fpu_reduction=_number(spec, options, "fpu", default.fpu_reduction, float),
                                  policy_temperature=_temperature(spec, options))
        evaluator, cfg = _checkpoint(spec, arg, max_games * settings.batch_size, device, dtype)
        return SearchPlayer(evaluator, cfg, settings, max_games, name or f"search:{Path(arg).stem}")
    if kind == "gumbel":
        simulations = _number(spec, options, "simulations", None, low=1)
        considered = _number(spec, options, "considered", None, low=1)
        mate, resign = _number(spec, options, "mate", 3), _number(spec, options, "resign", 0.0, float, 0.0, 1.0)
        evaluator, cfg = _checkpoint(spec, arg, max_games, device, dtype)
        search = replace(cfg.search, num_simulations=simulations or cfg.search.num_simulations,
                         max_num_considered_actions=considered or cfg.search.max_num_considered_actions)
        return GumbelPlayer(evaluator, search, rules, max_games, seed, resign, name or f"gumbel:{Path(arg).stem}",
                            mate)
    if kind == "policy":
        temperature = _number(spec, options, "temperature", 0.0, float)
        evaluator, _ = _checkpoint(spec, arg, max_games, device, dtype)
        player = PolicyPlayer(evaluator, temperature, seed, name or f"policy:{Path(arg).stem}")
        player.rules = rules
        return player
    if kind == "usi":
        if not arg:
            raise ValueError("player usi: give the engine command, e.g. usi:/usr/games/fairy-stockfish")
        go = options.pop("go", "byoyomi 1000")
        return UsiPlayer(arg, options, go, name)
    raise ValueError(f"unknown player {spec!r}: {PLAYER_KINDS}")


def _checkpoint(spec: str, path: str, max_batch: int, device: str, dtype: Optional[str]):
    """(evaluator, the run's config) of a network player's checkpoint, sized for `max_batch`
    positions per forward pass."""
    kind = spec.partition(":")[0]
    if not path:
        raise ValueError(f"player {spec!r}: give a checkpoint, e.g. {kind}:checkpoints/run/ckpt-00010.pt")
    if not Path(path).is_file():
        raise ValueError(f"player {spec!r}: checkpoint not found: {path}")
    from azshogi.formats.checkpoint import CheckpointError
    from azshogi.play.models import model_evaluator

    try:
        return model_evaluator(path, device, dtype, max_batch=max_batch)
    except CheckpointError as e:
        raise ValueError(f"player {spec!r}: {e}") from None
    except RuntimeError as e:  # e.g. CUDA asked for on a machine without it
        raise ValueError(f"player {spec!r}: {e}") from None
