"""Time management for the USI engine: how long to think, and whether another search step fits.

- `parse_go` reads `go`'s arguments. A malformed one is reported and left out, so every `go`
  still ends in a `bestmove`.
- `plan` turns the clock into a budget: a target (stop there, or earlier when the best move can
  no longer change) and a hard limit. USI gives the remaining main time of both sides (btime,
  wtime), a byoyomi (a period reset every move: a move inside it costs no main time) or Fischer
  increments (binc, winc). `margin` (the TimeMargin option) is the user's reserve for the GUI,
  the pipes and the network: a budget on a clock ends that many milliseconds before the moment
  the move must arrive, even when that leaves no time to search (the plan's `note` says so, for
  the GUI). `go movetime` is not a clock but a thinking time: the engine thinks that long, and
  the margin does not apply.
- `StepTimer` predicts how long a search step of b leaves (descents, then one forward pass)
  takes: a line fixed + per_leaf * b measured when the engine starts, rescaled by the steps of
  the search in progress.
- `next_step` decides before every step how many leaves it may send, or 0 to stop: a step that
  would end past the limit is made smaller (BatchSize shrinks) or not started, so the engine's
  own lateness never eats into the user's margin.

No numpy, no cshogi: the USI engine answers `usi` before importing them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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
    errors: list = field(default_factory=list)  # what was malformed, one message each (left out)

    @property
    def has_clock(self) -> bool:
        return any(v is not None for v in (self.btime, self.wtime, self.byoyomi, self.binc, self.winc,
                                           self.movetime))


_INT_KEYS = ("btime", "wtime", "byoyomi", "binc", "winc", "movetime", "nodes")


def _count(text: Optional[str]) -> Optional[int]:
    """A non-negative integer argument, or None when it is not one."""
    if text is None or not (text.isascii() and text.isdigit()):  # not '²', which int() refuses
        return None
    return int(text)


def parse_go(tokens: Sequence[str]) -> GoLimits:
    """Parses `go` arguments. Unknown words are skipped; a value that is not an integer >= 0 is
    left out and named in `errors`."""
    limits = GoLimits()
    tokens = list(tokens)
    i = 0
    while i < len(tokens):
        word = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if word in _INT_KEYS:
            value = _count(following)
            unit = "a number of nodes" if word == "nodes" else "milliseconds"
            if value is None:
                limits.errors.append(f"go {word} {following or ''}".rstrip()
                                     + f": takes {unit}, an integer >= 0; ignored")
                i += 1 if following is None or following in _INT_KEYS else 2
                continue
            setattr(limits, word, value)
            i += 2
        elif word == "infinite":
            limits.infinite = True
            i += 1
        elif word == "ponder":
            limits.ponder = True
            i += 1
        elif word == "mate":
            if following in (None, "infinite"):
                limits.mate = -1
            else:
                value = _count(following)
                if value is None:
                    limits.errors.append(f"go mate {following}: takes milliseconds (an integer >= 0) or infinite; "
                                         "searching once")
                limits.mate = 0 if value is None else value
            i += 2
        else:
            i += 1
    return limits


@dataclass(frozen=True)
class TimePlan:
    """How long one move may take, in seconds from the moment `go` (or `ponderhit`) arrived."""

    target: float  # stop here (or earlier when the best move cannot change)
    limit: float  # the last step ends by then
    exact: bool = False  # movetime: think until the limit, no early stop
    note: str = ""  # what the engine should tell the GUI about this budget (an `info string`)


def plan(limits: GoLimits, black_to_move: bool, ply: int, margin_ms: int,
         min_think_ms: int = 10) -> Optional[TimePlan]:
    """The time budget of a move, or None when the clock gives no limit (nodes or infinite).

    Main time is spread over the moves still to play (an estimate that shrinks as the game goes
    on, never below 20); the byoyomi and the increment come on top of that share. The hard limit
    is everything the clock allows minus the margin (in sudden death, a quarter of what is left).
    Thinking past the target (when the two best moves are close) merely spends main time.
    """
    if limits.movetime is not None:
        think = max(limits.movetime, min_think_ms) / 1000.0
        return TimePlan(think, think, exact=True)
    if not limits.has_clock:
        return None
    remaining = (limits.btime if black_to_move else limits.wtime) or 0
    increment = (limits.binc if black_to_move else limits.winc) or 0
    byoyomi = limits.byoyomi or 0
    moves_to_go = max(20, 60 - ply // 4)
    share = remaining / moves_to_go + byoyomi + increment
    available = remaining + byoyomi + increment  # what the clock allows for this move
    limit: float = max(available - margin_ms, min_think_ms)
    if byoyomi == 0 and increment == 0:
        # Sudden death: never spend more than a fraction of what is left.
        limit = max(min(limit, remaining * 0.25), min_think_ms)
    target = max(min(share, limit), min_think_ms)
    # The margin is the user's estimate of what the GUI and the pipes need: it is kept even when
    # it leaves no time to search (a move without search is weak, a move too late loses the game),
    # and the GUI is told.
    note = (f"the clock allows {available} ms for this move and TimeMargin keeps {margin_ms} ms of it: no time "
            f"to search, playing the network's own move (a smaller TimeMargin leaves time to search)"
            if available - margin_ms < min_think_ms else "")
    return TimePlan(target / 1000.0, limit / 1000.0, note=note)


class StepTimer:
    """Predicts the seconds a search step of `leaves` leaves takes: scale * (fixed + per_leaf *
    leaves). fixed and per_leaf come from steps timed when the engine starts (`calibrate`);
    `scale` follows the steps of the searches since (`observe`): it rises at once to a slower
    step's ratio and falls back slowly, so one fast step does not make the next one late."""

    def __init__(self, fixed: float = 0.0, per_leaf: float = 0.0):
        self.fixed, self.per_leaf, self.scale = fixed, per_leaf, 1.0

    def calibrate(self, samples: Sequence[tuple[int, float]]) -> None:
        """Fits the line to (leaves, seconds) samples: the fastest time of each size (the others
        paid for warm-up), through the smallest and the largest size."""
        best: dict[int, float] = {}
        for leaves, seconds in samples:
            best[leaves] = min(seconds, best.get(leaves, float("inf")))
        low, high = min(best), max(best)
        self.per_leaf = (best[high] - best[low]) / (high - low) if high > low else 0.0
        self.per_leaf = max(self.per_leaf, 0.0)
        self.fixed = max(best[low] - self.per_leaf * low, 0.0)
        if high == low:  # one size only: assume the time grows with the leaves
            self.fixed, self.per_leaf = 0.0, best[low] / low
        self.scale = 1.0

    def predict(self, leaves: int) -> float:
        return self.scale * (self.fixed + self.per_leaf * leaves)

    def observe(self, leaves: int, seconds: float) -> None:
        expected = self.fixed + self.per_leaf * leaves
        if leaves <= 0 or expected <= 0:
            return
        ratio = seconds / expected
        self.scale = ratio if ratio > self.scale else 0.8 * self.scale + 0.2 * ratio

    def most_leaves(self, seconds: float, cap: int, safety: float = 1.25, reserve: float = 0.01) -> int:
        """The largest step size in [1, cap] whose predicted time, times `safety`, plus `reserve`
        (for the bestmove line) fits in `seconds`; 0 when not even one leaf fits."""
        room = (seconds - reserve) / safety
        base = self.scale * self.fixed
        if room < base + self.scale * self.per_leaf:
            return 0
        if self.per_leaf <= 0:
            return cap
        return int(min(cap, (room - base) // (self.scale * self.per_leaf)))


def next_step(time_plan: Optional[TimePlan], elapsed: float, progress, timer: StepTimer, batch: int,
              pondering: bool = False) -> int:
    """How many leaves the next step may send (0 = stop), `elapsed` seconds after the clock
    started; `progress` has the search's nodes, best_visits and second_visits
    (search/anytime.Progress). Without a plan (nodes, infinite): a full batch. While pondering: a step that a
    `ponderhit` at any moment would still leave time to finish. Otherwise the step must end by
    the limit; besides, with some nodes done, the search stops at the target (thinking on up to
    twice the target while the two best moves are close), or earlier when the best move cannot
    be overtaken before the target at the present speed."""
    if time_plan is None:
        return batch
    if pondering:
        return timer.most_leaves(time_plan.limit, batch)
    if progress.nodes and not time_plan.exact and _enough(time_plan, elapsed, progress):
        return 0
    return timer.most_leaves(time_plan.limit - elapsed, batch)


def _enough(time_plan: TimePlan, elapsed: float, progress) -> bool:
    if elapsed >= time_plan.target:
        unsure = progress.best_visits < 1.2 * progress.second_visits
        return not (unsure and elapsed < 2.0 * time_plan.target)
    rate = progress.nodes / max(elapsed, 1e-3)
    return progress.best_visits - progress.second_visits > rate * (time_plan.target - elapsed)
