"""Self-play: `num_actors` games in flight, advanced together one move per search.

Every actor owns one cshogi Board and the training positions its game has produced so far (ply,
hcp, sparse policy target, root value); when the game ends they become a SelfPlayGame
(shogi/game_record.py): its record and its training positions. Games in progress survive a
training phase and a checkpoint (`state_dict`: in_progress.py's flat arrays).

Playout-cap randomization (KataGo, Wu 2019; `PlayoutCap`): before each move an actor draws from
its game's own random stream whether the move gets the full search or a cheap one of fewer
simulations. Both are played; only the full searches' positions are training positions, so
more moves are played per network evaluation while every recorded target keeps the full
search's quality. Off (probability 0) draws nothing and records every move.

Resignation (AlphaZero; resignation.py): a side whose full searches' root win rate stays below
`threshold` for `moves` consecutive own full searches resigns: the game ends there and the
resigner loses (RESIGN); the position it resigned in is no training position (it has no move,
and hcpe3 stores one per position). A share `playout_share` of games, drawn at each game's start
from its own stream, is played out instead: the first side that would have resigned is noted,
and when the game ends the count of played-out games grows, and that of false resignations when
that side did not lose. The rule reads only the recorded root values (cheap searches neither
count nor break a run), so a resumed game rebuilds its state from them, and so does every game
in progress when the run's automatic threshold changes (`set_resign_threshold`).

Opening diversity (`opening_plies`): each game starts with k uniformly random legal plies, k
drawn uniformly from 0..opening_plies from its own stream (a ply that would end the game is taken
back and the opening stops). They are in the game's record, not training positions.

Both off (the defaults) draw nothing, so a game's stream is what it was without them.

The loop drives self-play through a `SelfPlayDriver` (drivers.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import cshogi
import numpy as np

from azshogi.selfplay import in_progress
from azshogi.selfplay.resignation import Resignation, resign_levels
from azshogi.shogi import features
from azshogi.shogi.game_record import GameRecord, SelfPlayGame, TrainingPositions
from azshogi.shogi.rules import Outcome, Rules, Termination, outcome, random_plies, winner


def game_rng(seed: int, game_id: int) -> np.random.Generator:
    """Each game's own random stream (its search noise and move sampling), so that what an
    actor plays does not depend on which other games share its batch."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(game_id,)))


@dataclass(frozen=True)
class PlayoutCap:
    """Playout-cap randomization (see the module docstring): each move is searched cheaply, with
    `cheap_simulations`, with probability `cheap_search_prob`, and is then no training position.
    The defaults search and record every move."""

    cheap_search_prob: float = 0.0
    cheap_simulations: int = 4

    @classmethod
    def from_config(cls, selfplay_config) -> "PlayoutCap":
        return cls(selfplay_config.cheap_search_prob, selfplay_config.cheap_simulations)


@dataclass
class Actor:
    game_id: int
    rng: np.random.Generator
    board: cshogi.Board = field(default_factory=cshogi.Board)
    moves: list = field(default_factory=list)  # USI strings, for records and resuming
    # The training positions so far (fully searched moves): ply, hcp, policy target, root value.
    plies: list = field(default_factory=list)
    hcps: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    probs: list = field(default_factory=list)
    root_values: list = field(default_factory=list)
    # Resignation: each colour's run of full searches below the threshold, whether this game is
    # played out, and the colour that would have resigned in it (None: nobody yet).
    low: list = field(default_factory=lambda: [0, 0])
    play_out: bool = False
    would_resign: Optional[int] = None

    @property
    def ply(self) -> int:
        return len(self.moves)


def sparse_policy(labels: np.ndarray, probs: np.ndarray, min_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Drops entries below `min_prob` (keeping the largest) and renormalises."""
    keep = probs >= min_prob
    keep[np.argmax(probs)] = True
    kept = probs[keep].astype(np.float32)
    return labels[keep].astype(np.int16), kept / kept.sum()


class SelfPlay:
    """game ids: first_game_id, then every game_id_step-th (worker processes interleave their ids)."""

    def __init__(self, search, rules: Rules, num_actors: int, seed: int = 0, min_policy_prob: float = 1e-4,
                 first_game_id: int = 0, game_id_step: int = 1, playout_cap: PlayoutCap = PlayoutCap(),
                 resignation: Resignation = Resignation(), opening_plies: int = 0):
        self.search, self.rules, self.seed = search, rules, seed
        self.min_policy_prob, self.playout_cap = min_policy_prob, playout_cap
        self.resignation, self.opening_plies = resignation, opening_plies
        self.next_game_id, self.game_id_step = first_game_id, game_id_step
        self.moves = 0  # moves played by this object's games (one per actor per step), a running total
        self.cheap_moves = 0  # of which: searched cheaply (not recorded)
        self.resigned = 0  # games finished by a resignation
        self.resign_playouts = 0  # games finished that were played out past a would-be resignation
        self.false_resigns = 0  # of which: the would-be resigner did not lose
        self.actors = [self._new_actor() for _ in range(num_actors)]

    def _new_actor(self) -> Actor:
        """A new game: its stream draws first whether it is played out (resignation on), then
        its random opening (opening_plies > 0)."""
        actor = Actor(self.next_game_id, game_rng(self.seed, self.next_game_id))
        self.next_game_id += self.game_id_step
        if self.resignation.on:
            actor.play_out = self.resignation.played_out(actor.rng)
        if self.opening_plies:
            plies = int(actor.rng.integers(0, self.opening_plies + 1))
            actor.moves = random_plies(actor.board, plies, actor.rng, self.rules)
        return actor

    def _resigns(self, actor: Actor, side: int, value: float) -> bool:
        """Counts a full search's root value (side to move's, in [-1, 1]) toward `side`'s
        resignation; True when `side` resigns now (not in a game played out)."""
        r = self.resignation
        actor.low[side] = actor.low[side] + 1 if (value + 1) / 2 < r.threshold else 0
        if actor.low[side] < r.moves or actor.would_resign is not None:
            return False
        if actor.play_out:
            actor.would_resign = side
            return False
        return True

    def _recount(self, actor: Actor) -> None:
        """An actor's resignation state at the threshold in force, from its recorded root values
        (a resumed game, or a new threshold): a side already below it for `moves` searches resigns
        at its next full search still below."""
        actor.low, actor.would_resign = [0, 0], None
        for ply, value in zip(actor.plies, actor.root_values):
            self._resigns(actor, ply % 2, value)

    def set_resign_threshold(self, threshold: float) -> None:
        """Resigns from now on below `threshold` (the run's automatic threshold; resignation on),
        each game in progress counted again at it."""
        self.resignation = replace(self.resignation, threshold=threshold)
        for actor in self.actors:
            self._recount(actor)

    def _full_searches(self) -> np.ndarray:
        """(A,) bool: the actors whose move gets the full search, each drawn from its game's own
        stream (nothing is drawn with playout caps off)."""
        p = self.playout_cap.cheap_search_prob
        if p <= 0:
            return np.ones(len(self.actors), np.bool_)
        return np.array([a.rng.random() >= p for a in self.actors], np.bool_)

    def step(self) -> list[SelfPlayGame]:
        """Searches every game once, plays the chosen moves; returns the games that ended."""
        actors = self.actors
        boards = [a.board for a in actors]
        plies = np.array([a.ply for a in actors], np.int64)
        full = self._full_searches()
        kwargs = {}
        if not full.all():
            most = self.search.num_simulations
            kwargs["simulations"] = np.where(full, most, min(self.playout_cap.cheap_simulations, most))
            self.cheap_moves += int((~full).sum())
        result = self.search.run(boards, plies, [a.rng for a in actors], **kwargs)
        self.moves += len(actors)
        finished = []
        for i, actor in enumerate(actors):
            if full[i]:
                if self.resignation.on and self._resigns(actor, actor.board.turn, float(result.root_value[i])):
                    self.resigned += 1
                    finished.append(self._finish(actor, Outcome(Termination.RESIGN, -1)))
                    actors[i] = self._new_actor()
                    continue
                self._record(actor, result, i)
            move = int(result.moves[i])
            actor.moves.append(cshogi.move_to_usi(move))
            actor.board.push(move)
            end = outcome(actor.board, actor.ply, self.rules, mate_plies=self.rules.mate_adjudication_plies)
            if end is not None:
                finished.append(self._finish(actor, end))
                actors[i] = self._new_actor()
        return finished

    def _record(self, actor: Actor, result, i: int) -> None:
        """The position before actor i's move becomes a training position."""
        n = int(result.num_edges[i])
        labels, probs = sparse_policy(result.labels[i, :n], result.policy[i, :n], self.min_policy_prob)
        actor.plies.append(actor.ply)
        actor.hcps.append(features.hcp_of(actor.board))
        actor.labels.append(labels)
        actor.probs.append(probs)
        actor.root_values.append(float(result.root_value[i]))

    def _finish(self, actor: Actor, end: Outcome) -> SelfPlayGame:
        win = winner(actor.board.turn, end.value)
        if actor.would_resign is not None:
            self.resign_playouts += 1
            self.false_resigns += int(win != 1 - actor.would_resign)
        plies = np.array(actor.plies, np.int64)
        turns = plies % 2  # games start from the initial position, black to move
        results = np.zeros(len(plies), np.int8) if win is None else np.where(turns == win, 1, -1).astype(np.int8)
        labels = np.concatenate([np.zeros(0, np.int16)] + actor.labels)
        probs = np.concatenate([np.zeros(0, np.float32)] + actor.probs)
        positions = TrainingPositions.of_game(actor.game_id, np.array(actor.hcps, np.uint8), results,
                                              np.array(actor.root_values, np.float32), plies,
                                              np.array([len(lab) for lab in actor.labels], np.int64), labels, probs)
        levels = resign_levels(plies, positions.root_values, self.resignation.moves) if actor.play_out else None
        return SelfPlayGame(actor.game_id, GameRecord(list(actor.moves), end.termination, win), positions,
                            resign_levels=levels)

    # --- games in progress, for checkpoints and pipes: flat arrays (in_progress.py) ---

    def state_dict(self) -> dict:
        return in_progress.pack(self.next_game_id, self.actors)

    def load_state_dict(self, state: dict) -> None:
        """Restores the games in progress; with fewer actors now, the extra games are dropped,
        with more, new games start."""
        self.next_game_id = int(state["next_game_id"])
        actors = []
        for g in in_progress.unpack(in_progress.take(state, 0, min(len(self.actors), in_progress.num_games(state)))):
            actor = Actor(g["game_id"], game_rng(self.seed, g["game_id"]))
            actor.rng.bit_generator.state = g["rng"]
            for usi in g["moves"]:
                move = actor.board.move_from_usi(usi)
                if not move or not actor.board.is_legal(move):
                    raise ValueError(f"saved game {actor.game_id}: illegal move {usi!r}")
                actor.board.push(move)
            actor.moves, actor.plies = g["moves"], g["plies"]
            actor.hcps, actor.root_values = g["hcps"], g["root_values"]
            actor.labels, actor.probs = g["labels"], g["probs"]
            if self.resignation.on:  # its resignation state, from its recorded root values
                actor.play_out = self.resignation.played_out(game_rng(self.seed, actor.game_id))
                self._recount(actor)
            actors.append(actor)
        while len(actors) < len(self.actors):
            actors.append(self._new_actor())
        self.actors = actors
