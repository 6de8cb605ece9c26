"""Matches between two players: N games, colours alternating, several games in flight.

`play_match` is the engine of `azshogi-arena` and of the evaluation inside the training loop.
Each round, every game in flight where player A is to move goes to A in one `choose` call (one
batched search for a network player), then the same for B. The rules are those of a real match:
fourfold repetition is a draw (perpetual check loses), the side without a legal move loses, an
impasse is won by declaring it (`win`) when the 27-point rule (or 24) allows (under the 24-point
rule a declaration with 24-30 points draws), a false declaration or an illegal move loses, a
player that gives no move (an engine that hung or exited) loses on time, and `max_plies` plies
make a draw.
"""
from __future__ import annotations

import collections
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional, Sequence

import cshogi
import numpy as np
from tqdm import tqdm

from azshogi.formats.records import write_csa, write_kif
from azshogi.play.elo import EloEstimate, estimate
from azshogi.play.players import Choice, Player, Turn
from azshogi.shogi.game_record import GameRecord
from azshogi.shogi.positions import board_after, read_openings
from azshogi.shogi.rules import Rules, Termination, declaration_draws, declaration_wins, outcome, random_plies, winner


class Openings:
    """Start positions, one per pair of games (both colours play each opening):
    `startpos`, `random:N` (N uniformly random plies from the start position) or `file:PATH`
    (see positions.read_openings), taken in order and cycled."""

    def __init__(self, spec: str = "startpos", seed: int = 0):
        self.spec = spec
        self.rng = np.random.default_rng(seed)
        self.plies = 0
        self.positions: list = []
        kind, _, arg = spec.partition(":")
        if kind == "startpos":
            self.positions = [(None, [])]
        elif kind == "random":
            self.plies = int(arg) if arg.isdigit() else 8 if not arg else -1
            if self.plies < 0:
                raise ValueError(f"openings {spec!r}: random:N takes a number of plies >= 0")
        elif kind == "file":
            try:
                self.positions = read_openings(arg)
            except OSError as e:
                raise ValueError(f"openings {spec!r}: cannot read {arg}: {e.strerror or e}") from None
        else:
            raise ValueError(f"openings {spec!r}: use startpos, random:N or file:PATH")
        self._random: dict[int, tuple] = {}

    def get(self, pair: int) -> tuple[Optional[str], list]:
        if self.positions:
            return self.positions[pair % len(self.positions)]
        if pair not in self._random:
            self._random[pair] = (None, self._random_moves())
        return self._random[pair]

    def _random_moves(self) -> list:
        walk = Rules(max_plies=self.plies + 1)  # the walk's own length is no end (the match's limit is checked)
        for _ in range(100):  # a walk that would end the game stops short: another try
            moves = random_plies(cshogi.Board(), self.plies, self.rng, walk)
            if len(moves) == self.plies:
                return moves
        raise ValueError(f"openings {self.spec!r}: 100 walks of {self.plies} random plies each ended the game first: "
                         f"give fewer plies")


@dataclass
class MatchGame:
    """One game of a match: its record (the moves from the start position, the opening's
    included; `started` when its opening was set up) and the match's view of it: which game it
    was, whether player A had black, and what ended it in words (`reason`, the CSA comment)."""

    index: int
    a_is_black: bool
    reason: str
    record: GameRecord

    @property
    def a_score(self) -> float:
        """Player A's points: 1, 0.5 for a draw, or 0."""
        if self.record.winner is None:
            return 0.5
        a_colour = cshogi.BLACK if self.a_is_black else cshogi.WHITE
        return 1.0 if self.record.winner == a_colour else 0.0


def write_game(path: Path, game: MatchGame, name_a: str, name_b: str) -> None:
    """A match game's record, CSA (the reason as its comment) or KIF by `path`'s suffix, the
    players named by colour; atomically, the folder made if needed."""
    names = (name_a, name_b) if game.a_is_black else (name_b, name_a)
    if Path(path).suffix == ".csa":
        write_csa(path, game.record, names, comment=game.reason)
    else:
        write_kif(path, game.record, names)


def older_records(folder: Path, pattern: str = "game-*.*") -> Optional[Path]:
    """The first game record `pattern` finds in `folder` (another match's, that a new one's
    names would replace), or None."""
    return min(folder.glob(pattern), default=None) if folder.is_dir() else None


def _wins_losses_draws(games) -> tuple[int, int, int]:
    """Player A's wins, losses and draws in `games`."""
    wins = sum(g.a_score == 1.0 for g in games)
    losses = sum(g.a_score == 0.0 for g in games)
    return wins, losses, len(games) - wins - losses


@dataclass
class MatchResult:
    name_a: str
    name_b: str
    games: list = field(default_factory=list)  # MatchGame, in index order

    @property
    def wins(self) -> int:
        return sum(g.a_score == 1.0 for g in self.games)

    @property
    def losses(self) -> int:
        return sum(g.a_score == 0.0 for g in self.games)

    @property
    def draws(self) -> int:
        return sum(g.a_score == 0.5 for g in self.games)

    @property
    def elo(self) -> EloEstimate:
        return estimate(self.wins, self.losses, self.draws)

    @property
    def distinct(self) -> int:
        """How many games differ (their start, moves and colours): fewer than the games where both
        players choose alike each time from the same openings (two networks' searches, from the
        start position alone: two games, repeated)."""
        return len({(g.a_is_black, g.record.start_sfen, tuple(g.record.moves)) for g in self.games})

    def summary_lines(self) -> list[str]:
        def wld(games):
            return "-".join(map(str, _wins_losses_draws(games)))

        black = [g for g in self.games if g.a_is_black]
        white = [g for g in self.games if not g.a_is_black]
        endings = collections.Counter(g.reason for g in self.games)
        lines = [
            f"{self.name_a} vs {self.name_b}: W-L-D {self.wins}-{self.losses}-{self.draws} "
            f"({self.elo.score:.1%}) in {len(self.games)} games",
            f"{self.name_a} as black {wld(black)}, as white {wld(white)}",
            f"Elo difference {self.name_a} - {self.name_b}: {self.elo}",
            "endings: " + ", ".join(f"{k} {v}" for k, v in endings.most_common()),
        ]
        distinct = self.distinct
        if distinct * 2 <= len(self.games):
            lines.append(f"only {distinct} distinct games of {len(self.games)}: the players chose alike in the "
                         "repeats, so the score weighs those few games (--openings random:8 varies the starts)")
        return lines

    def as_dict(self) -> dict:
        """The match in JSON terms, from player A's side: `score` is always a fraction of the
        games' points, (wins + draws / 2) / games, overall and under `a_black` / `a_white`."""
        e = self.elo

        def side(games) -> dict:
            wins, losses, draws = _wins_losses_draws(games)
            score = sum(g.a_score for g in games) / len(games) if games else None
            return {"games": len(games), "wins": wins, "losses": losses, "draws": draws,
                    "score": None if score is None else round(score, 4)}

        return {
            "games": len(self.games), "distinct_games": self.distinct, "wins": self.wins, "losses": self.losses,
            "draws": self.draws,
            "score": round(e.score, 4), "elo": round(e.elo, 1),
            "elo_margin": round(e.margin, 1) if np.isfinite(e.margin) else None,
            "los": round(e.los, 4), "elo_clipped": e.clipped,
            "player_a": self.name_a, "player_b": self.name_b,
            "a_black": side([g for g in self.games if g.a_is_black]),
            "a_white": side([g for g in self.games if not g.a_is_black]),
            "mean_plies": round(float(np.mean([len(g.record) for g in self.games])), 1) if self.games else 0.0,
        }


@dataclass
class _Game:
    index: int
    a_is_black: bool
    start_sfen: Optional[str]
    moves: list
    board: cshogi.Board
    first_ply: int  # plies before the start position (from its SFEN move number)
    seen: collections.Counter = field(default_factory=collections.Counter)
    started: datetime = field(default_factory=datetime.now)

    @property
    def ply(self) -> int:
        return self.first_ply + len(self.moves)


def _positions(start: Optional[str], moves: Sequence[str]) -> collections.Counter:
    """How often each position (by its hash) occurs from `start` through `moves`."""
    board = cshogi.Board(start) if start else cshogi.Board()
    seen = collections.Counter([board.zobrist_hash()])
    for usi in moves:
        board.push_usi(usi)
        seen[board.zobrist_hash()] += 1
    return seen


def _end(game: _Game, winner: Optional[int], termination: Termination, reason: str) -> MatchGame:
    return MatchGame(game.index, game.a_is_black, reason,
                     GameRecord(list(game.moves), termination, winner, game.start_sfen, game.started))


_REASONS = {Termination.CHECKMATE: "{winner} won by checkmate", Termination.REPETITION: "repetition",
            Termination.PERPETUAL_CHECK: "{loser} gave perpetual check", Termination.MAX_PLIES: "ply limit"}


def _apply(game: _Game, choice: Choice, rules: Rules) -> Optional[MatchGame]:
    """Plays a player's choice; returns the result when the game ends (rules.outcome, as a
    referee: fourfold repetition, an impasse only when declared)."""
    board = game.board
    mover = board.turn
    other = 1 - mover
    colour = "black" if mover == cshogi.BLACK else "white"
    if choice.failed is not None:
        return _end(game, other, Termination.TIME_UP, f"{colour} lost on time: {choice.failed}")
    if choice.move == "resign":
        return _end(game, other, Termination.RESIGN, f"{colour} resigned")
    if choice.move == "win":
        if declaration_wins(board, rules):
            return _end(game, mover, Termination.IMPASSE, f"{colour} declared an impasse win")
        if declaration_draws(board, rules):
            return _end(game, None, Termination.IMPASSE_DRAW, f"{colour} declared an impasse with 24-30 points: "
                                                               f"a draw under the 24-point rule")
        return _end(game, other, Termination.ILLEGAL_MOVE, f"{colour} declared a false impasse win")
    move = board.move_from_usi(choice.move) if len(choice.move) in (4, 5) else 0
    if not move or move not in set(board.legal_moves):
        return _end(game, other, Termination.ILLEGAL_MOVE, f"{colour} played an illegal move {choice.move!r}")
    board.push(move)
    game.moves.append(choice.move)
    key = board.zobrist_hash()
    game.seen[key] += 1
    end = outcome(board, game.ply, rules, occurrences=game.seen[key], impasse=False)
    if end is None:
        return None
    win = winner(board.turn, end.value)
    names = {c: "black" if c == cshogi.BLACK else "white" for c in (cshogi.BLACK, cshogi.WHITE)}
    reason = _REASONS[end.termination].format(winner=names.get(win), loser=names.get(1 - win if win is not None
                                                                                     else None))
    return _end(game, win, end.termination, reason)


def play_match(player_a: Player, player_b: Player, games: int, *, openings: Optional[Openings] = None,
               rules: Rules = Rules(), in_flight: int = 16, records_dir: Optional[Path] = None,
               record_format: str = "csa", progress: bool = True,
               on_game: Optional[Callable[[MatchGame], None]] = None) -> MatchResult:
    """Plays `games` games, A black in even-numbered games; game 2k and 2k+1 share opening k.
    Records go to `records_dir/game-NNNN.csa|kif` when given, each as its game ends, and then
    on_game(the game): a match that raises (an engine that keeps failing, KeyboardInterrupt)
    leaves the records of the games on_game heard of."""
    if games < 1 or in_flight < 1:
        raise ValueError("games and in_flight must be >= 1")
    if record_format not in ("csa", "kif"):
        raise ValueError(f"record format {record_format!r}: csa or kif")
    openings = openings or Openings()
    result = MatchResult(player_a.name, player_b.name)
    if records_dir is not None:
        older = older_records(records_dir)
        if older:  # game-0000 of this match would replace that of another, and the rest would stay
            raise ValueError(f"--records {records_dir}: holds the records of another match ({older.name}, ...): "
                             f"give a new folder")
        records_dir.mkdir(parents=True, exist_ok=True)
    pending = collections.deque(range(games))
    active: list[_Game] = []
    finished: list[MatchGame] = []
    bar = tqdm(total=games, desc=f"{player_a.name} vs {player_b.name}", unit="game", leave=False,
               disable=not progress, dynamic_ncols=True, file=sys.stderr)
    score = [0, 0, 0]

    def finish(game: _Game, outcome: MatchGame) -> None:
        # The record first, then the game counts: a match cut short (Ctrl-C, a failing engine)
        # reports just the games whose records are kept
        if records_dir is not None:
            write_game(records_dir / f"game-{outcome.index:04d}.{record_format}", outcome, player_a.name,
                       player_b.name)
        finished.append(outcome)
        if on_game:
            on_game(outcome)
        for player in (player_a, player_b):
            player.end_game(game.index)
        score[{1.0: 0, 0.0: 1, 0.5: 2}[outcome.a_score]] += 1
        bar.update(1)
        bar.set_postfix_str(f"W-L-D {score[0]}-{score[1]}-{score[2]}")

    try:
        while pending or active:
            while pending and len(active) < in_flight:
                index = pending.popleft()
                start, opening = openings.get(index // 2)
                board = board_after(start, opening)
                game = _Game(index, index % 2 == 0, start, list(opening), board,
                             (cshogi.Board(start).move_number - 1) if start else 0)
                if game.ply >= rules.max_plies:
                    raise ValueError(f"opening {index // 2 + 1} ({openings.spec}) starts at ply {game.ply}, not before "
                                     f"the ply limit {rules.max_plies} (--max-plies): its games would be draws before "
                                     f"a move")
                game.seen.update(_positions(start, opening))  # a repetition counts the opening's positions too
                active.append(game)  # before the players hear of it: a failed start is forgotten below
                for player in (player_a, player_b):
                    player.new_game(index)
                if not any(True for _ in board.legal_moves):  # an opening that is already mate
                    active.remove(game)
                    finish(game, _end(game, 1 - board.turn, Termination.CHECKMATE, "mated at the start"))
            for player in (player_a, player_b):
                mine = [g for g in active if (g.board.turn == cshogi.BLACK) == (g.a_is_black == (player is player_a))]
                if not mine:
                    continue
                turns = [Turn(g.index, g.board, g.ply, g.start_sfen, list(g.moves)) for g in mine]
                choices = player.choose(turns)
                for game, choice in zip(mine, choices):
                    outcome = _apply(game, choice, rules)
                    if outcome is not None:
                        active.remove(game)
                        finish(game, outcome)
    finally:
        bar.close()
        for game in active:  # a match that failed: the players forget its games in flight
            for player in (player_a, player_b):
                player.end_game(game.index)
    result.games = sorted(finished, key=lambda g: g.index)
    return result
