"""Time management for the USI engine: how long to think from `go`'s clock values.

USI gives the remaining main time of both sides (btime, wtime), a byoyomi (a period that is
reset every move: a move inside it costs no main time) or Fischer increments (binc, winc).
Losing on time in byoyomi is never acceptable, so every budget ends `margin` milliseconds before
the last moment the move may arrive (pipes, GUI and the last forward pass take time).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass
class GoLimits:
    """The arguments of one `go` command (times in milliseconds; None = not given)."""

    btime: Optional[int] = None
    wtime: Optional[int] = None
    byoyomi: Optional[int] = None
    binc: Optional[int] = None
    winc: Optional[int] = None
    movetime: Optional[int] = None
    nodes: Optional[int] = None
    infinite: bool = False
    ponder: bool = False
    mate: Optional[int] = None  # `go mate <ms>`: a mate search only; -1 = infinite

    @property
    def has_clock(self) -> bool:
        return any(v is not None for v in (self.btime, self.wtime, self.byoyomi, self.binc, self.winc,
                                           self.movetime))


_INT_KEYS = ("btime", "wtime", "byoyomi", "binc", "winc", "movetime", "nodes")


def parse_go(tokens: Sequence[str]) -> GoLimits:
    """Parses `go` arguments; unknown words are skipped, malformed numbers raise ValueError."""
    limits = GoLimits()
    tokens = list(tokens)
    i = 0
    while i < len(tokens):
        word = tokens[i]
        if word in _INT_KEYS and i + 1 < len(tokens):
            value = int(tokens[i + 1])
            if value < 0:
                raise ValueError(f"go {word} must be >= 0, got {value}")
            setattr(limits, word, value)
            i += 2
        elif word == "infinite":
            limits.infinite = True
            i += 1
        elif word == "ponder":
            limits.ponder = True
            i += 1
        elif word == "mate":
            following = tokens[i + 1] if i + 1 < len(tokens) else "infinite"
            limits.mate = -1 if following == "infinite" else int(following)
            i += 2
        else:
            i += 1
    return limits


@dataclass(frozen=True)
class TimePlan:
    """How long one move may take, in seconds from the moment `go` (or `ponderhit`) arrived."""

    target: float  # stop here (or earlier when the best move cannot change)
    limit: float  # never later than this


def plan(limits: GoLimits, black_to_move: bool, ply: int, margin_ms: int,
         min_think_ms: int = 10) -> Optional[TimePlan]:
    """The time budget of a move, or None when the clock gives no limit (nodes or infinite).

    Main time is spread over the moves still to play (an estimate that shrinks as the game goes
    on, never below 20); the byoyomi and the increment come on top of that share. The hard limit
    is everything the clock allows minus the margin (in sudden death, a quarter of what is left).
    The margin only guards the limit: thinking past the target merely spends main time.
    """
    if limits.movetime is not None:
        limit = max(limits.movetime - margin_ms, min_think_ms) / 1000.0
        return TimePlan(limit, limit)
    if not limits.has_clock:
        return None
    remaining = (limits.btime if black_to_move else limits.wtime) or 0
    increment = (limits.binc if black_to_move else limits.winc) or 0
    byoyomi = limits.byoyomi or 0
    moves_to_go = max(20, 60 - ply // 4)
    share = remaining / moves_to_go + byoyomi + increment
    available = remaining + byoyomi + increment  # what the clock allows for this move
    limit = max(available - margin_ms, min_think_ms)
    if byoyomi == 0 and increment == 0:
        # Sudden death: never spend more than a fraction of what is left.
        limit = max(min(limit, remaining * 0.25), min_think_ms)
    target = max(min(share, limit), min_think_ms)
    return TimePlan(target / 1000.0, limit / 1000.0)
