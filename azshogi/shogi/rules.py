"""How a shogi game ends, on top of cshogi.

One function, `outcome`, decides whether the side to move's position ends the game; the search
(with a short repetition look-back) and self-play (with the whole history) both use it, so the
tree and the game agree on the rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Optional

import cshogi

if TYPE_CHECKING:  # config imports Hydra: not needed at run time here
    from azshogi.config import RulesConfig


class Termination(IntEnum):
    """Why a game ended. Values are stable: they are stored in checkpoints and records."""

    CHECKMATE = 0  # the side to move has no legal move and loses
    REPETITION = 1  # the same position again (sennichite): a draw
    PERPETUAL_CHECK = 2  # repetition by continuous checks: the checking side loses
    IMPASSE = 3  # the side to move declares an impasse win (nyugyoku)
    MAX_PLIES = 4  # the ply limit: a draw
    MATE_ADJUDICATION = 5  # the side to move has a forced mate; adjudicated as its win
    RESIGN = 6  # a player resigned (engines and matches only)
    TIME_UP = 7  # the side to move gave no move in time: an engine that hung or exited (matches only)
    IMPASSE_DRAW = 8  # an impasse declared with 24-30 points under the 24-point rule: a draw (matches only)
    ILLEGAL_MOVE = 9  # the side to move played an illegal move or declared a false impasse win: it loses
    # (matches only)


# endings self-play never has
MATCH_ONLY = (Termination.TIME_UP, Termination.IMPASSE_DRAW, Termination.ILLEGAL_MOVE)


@dataclass(frozen=True)
class Outcome:
    """A finished position, from the side to move's view: value +1 win, 0 draw, -1 loss."""

    termination: Termination
    value: int


@dataclass(frozen=True)
class Rules:
    max_plies: int = 320
    impasse_rule: int = 27  # 24 or 27 points
    mate_adjudication_plies: int = 0  # 0 = off, else an odd number of plies

    @property
    def impasse_law(self) -> int:
        return cshogi.LAW_24 if self.impasse_rule == 24 else cshogi.LAW_27


def rules_of(settings: "RulesConfig", *, max_plies: Optional[int] = None, self_play: bool = False) -> Rules:
    """The `Rules` of a run's `rules.*` settings, the one place they are read. Self-play
    adjudicates short mates (`mate_adjudication_plies`); games played by the engine (matches,
    the USI engine) end by the rules alone. max_plies: another ply limit than the run's."""
    return Rules(max_plies=settings.max_plies if max_plies is None else max_plies,
                 impasse_rule=settings.impasse_rule,
                 mate_adjudication_plies=settings.mate_adjudication_plies if self_play else 0)


FOURFOLD = 4  # sennichite: the same position for the fourth time ends a game


def declaration_wins(board: cshogi.Board, rules: Rules) -> bool:
    """Whether the side to move wins by declaring an impasse (nyugyoku) under the point rule."""
    return bool(board.is_nyugyoku(rules.impasse_law))


def declaration_draws(board: cshogi.Board, rules: Rules) -> bool:
    """Whether the side to move's impasse declaration is a draw: under the 24-point rule, with
    24-30 points (and the rule's other conditions met); never under the 27-point rule."""
    return bool(board.nyugyoku_result(rules.impasse_law) == cshogi.NYUGYOKU_DRAW)


def outcome(board: cshogi.Board, ply: int, rules: Rules, *, repetition_plies: Optional[int] = None,
            occurrences: Optional[int] = None, mate_plies: int = 0, has_legal_move: Optional[bool] = None,
            impasse: bool = True) -> Optional[Outcome]:
    """Returns how the game ends at `board` (side to move's view), or None if it goes on. Every
    game azshogi plays or searches ends here: self-play, the search's trees, the referee of
    matches (play/arena.py) and the USI engine.

    ply: plies played from the game's start position to `board`.
    repetition_plies: how far back to look for a repetition (None = the whole history).
    occurrences: how many times this position has occurred in the game, when a referee counts
        them: a repetition then ends the game at the fourth occurrence (sennichite; a draw, or a
        loss for the side that gave perpetual check). Without it a repetition ends the game at
        its first recurrence (dlshogi's self-play rule, and the search's).
    mate_plies: 0, or an odd N: a mate in N for the side to move counts as a win (adjudication).
    has_legal_move: pass it when the legal moves are already known (saves generating them).
    impasse: the side to move's impasse position ends the game as its win; False for a referee,
        where a player must declare it (`declaration_wins`).
    """
    if occurrences is None or occurrences >= FOURFOLD:
        rep = board.is_draw() if repetition_plies is None else board.is_draw(repetition_plies)
        if rep == cshogi.REPETITION_DRAW:
            return Outcome(Termination.REPETITION, 0)
        if rep == cshogi.REPETITION_WIN:  # the opponent gave perpetual check
            return Outcome(Termination.PERPETUAL_CHECK, 1)
        if rep == cshogi.REPETITION_LOSE:  # the side to move gave perpetual check
            return Outcome(Termination.PERPETUAL_CHECK, -1)
    no_move = board.is_game_over() if has_legal_move is None else not has_legal_move
    if no_move:
        return Outcome(Termination.CHECKMATE, -1)
    if impasse and declaration_wins(board, rules):
        return Outcome(Termination.IMPASSE, 1)
    if mate_plies and has_mate(board, mate_plies):
        return Outcome(Termination.MATE_ADJUDICATION, 1)
    if ply >= rules.max_plies:
        return Outcome(Termination.MAX_PLIES, 0)
    return None


def mate_move(board: cshogi.Board, plies: int) -> int:
    """The first move of a mate within `plies` (odd) for the side to move, or 0. Always 0 while
    in check: cshogi's mate searches assume the attacker is not in check (as dlshogi uses them)."""
    if plies <= 0 or board.is_check():
        return 0
    if plies <= 1:
        return board.mate_move_in_1ply()
    return board.mate_move(plies)


# A slow rate of cshogi's df-pn (measured: 100k nodes took up to 0.5 s in random middle games).
DFPN_NODES_PER_SECOND = 200_000


def mate_nodes(max_nodes: int, seconds: Optional[float]) -> int:
    """A df-pn node limit for a time budget: df-pn has only a node limit (and holds the GIL),
    so `max_nodes` is scaled down to what DFPN_NODES_PER_SECOND allows in `seconds` (None: no budget)."""
    return max_nodes if seconds is None else min(max_nodes, int(seconds * DFPN_NODES_PER_SECOND))


def mate_line(board: cshogi.Board, max_nodes: int, solver: Optional[cshogi.DfPn] = None) -> list[int]:
    """A forced mate for the side to move as a move list (the mating line when df-pn gives
    one), or [] when none is found within `max_nodes` df-pn nodes (a mate in one is always
    found). Always [] in check (see mate_move)."""
    if board.is_check():
        return []
    move = board.mate_move_in_1ply()
    if move:
        return [move]
    if max_nodes < 1:
        return []
    solver = solver or cshogi.DfPn()
    solver.set_max_search_node(max_nodes)
    if not solver.search(board):
        return []
    return list(solver.get_pv(board)) or [solver.get_move(board)]


def has_mate(board: cshogi.Board, plies: int) -> bool:
    return bool(mate_move(board, plies))


def random_plies(board: cshogi.Board, plies: int, rng, rules: Rules) -> list[str]:
    """Plays up to `plies` uniformly random legal moves on `board` (a game's start position),
    each drawn from `rng` (a numpy Generator): one move that would end the game (by `outcome`,
    with the rules' mate adjudication) is taken back and ends the walk early. Returns the moves
    played, in USI: random openings (self-play's selfplay.opening_random_plies, matches' random:N)."""
    played: list[str] = []
    for _ in range(plies):
        moves = list(board.legal_moves)
        if not moves:
            break
        move = moves[int(rng.integers(len(moves)))]
        board.push(move)
        if outcome(board, len(played) + 1, rules, mate_plies=rules.mate_adjudication_plies) is not None:
            board.pop()
            break
        played.append(cshogi.move_to_usi(move))
    return played


def random_move(board: cshogi.Board, moves, rng) -> int:
    """One of `moves`: a capture half the time when there is one, else any (random play that
    reaches positions with pieces in hand: the benchmarks' positions), drawn from `rng` (a numpy
    Generator)."""
    captures = [m for m in moves if board.piece(cshogi.move_to(int(m)))]
    pool = captures if captures and rng.random() < 0.5 else moves
    return int(pool[int(rng.integers(len(pool)))])


def winner(turn: int, value: int) -> Optional[int]:
    """The winning colour (cshogi.BLACK/WHITE) for an outcome value seen from `turn`; None = draw."""
    if value == 0:
        return None
    return turn if value > 0 else 1 - turn
