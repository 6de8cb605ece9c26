"""The strength ladder: fixed opponents of known order and rating, and one rating scale.

Rungs, weakest first: uniform random (rating 0, the scale's anchor), the one-ply material-greedy
player, then Debian's Fairy-Stockfish (a real USI engine no one here wrote) at rising Skill
Levels up to 20 (full strength), then at full strength with more nodes, each with a fixed number
of nodes per move (so a rung is as strong on a busy machine as on a quiet one; a rung's name says
its settings, `fairy_settings`). Each rung's rating was measured once by matches between the rungs (`fit_ratings`
over docs/tools/ladder_calibration.py's results; the table below says when and how many games).

A player's rating on the ladder's scale is the maximum-likelihood rating given its results
against rungs of known rating (`rate`), under the Elo model: the expected score against a rung
rated r is 1 / (1 + 10^((r - R) / 400)). A perfect or zero score against a rung is clipped to
half a game from the boundary, as play/elo.py does for one match, so the rating stays finite
(and `clipped` says so). Ratings are Elo points above uniform random.

`azshogi-arena PLAYER ladder` plays a player against the rungs; `eval.ladder` plays the rungs
nearest to the current rating inside the training loop (play/gauntlet.py).
"""
from __future__ import annotations

import functools
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Callable, Optional, Sequence

import numpy as np

from azshogi.play.arena import Openings, play_match
from azshogi.play.players import GreedyPlayer, RandomPlayer, UsiPlayer
from azshogi.play.usi_client import UsiError

_Z975 = NormalDist().inv_cdf(0.975)
_K = math.log(10.0) / 400.0  # d/dR of the logistic argument
FAIRY_STOCKFISH = "fairy-stockfish"
DEBIAN_GAMES = Path("/usr/games")  # where Debian installs it, off the default PATH


@dataclass(frozen=True)
class Rung:
    """One opponent of the ladder: `kind` random, greedy or fairy (Fairy-Stockfish at Skill
    Level `skill` with `nodes` nodes per move); `rating` in Elo above uniform random."""

    name: str
    kind: str
    rating: float
    skill: int = 0
    nodes: int = 0

    @property
    def needs_engine(self) -> bool:
        return self.kind == "fairy"


# Measured with docs/tools/ladder_calibration.py on 2026-11-25 (16 pairings of 30 games),
# 2026-11-27 (from sf0 up, 224 games more in rounds of 4) and 2026-12-04 (from sf2 up, 864 games
# more, and 16 of 2026-11-27's that were counted twice taken out), all fitted together to
# convergence (the games and the fit in docs/ladder-calibration.json; docs/strength.md, "The
# ladder"; the experiments 2026-11-25-ladder, 2026-11-27-ladder-to-skill-20 and
# 2026-12-04-ladder-margins). Fairy-Stockfish 11.1 (Debian's) with 1 thread and 20,000 nodes a
# move (sf20n40k, sf20n80k: 40,000 and 80,000): about 100 ms a move on the project's 2-core CPU.
# 95% margins of the fit: sf-10 133, greedy 80, sf-5 82, sf-4 88, sf-3 95, sf-2 86, sf0 95, sf2
# 78, sf4 39, sf5 35, sf6 47, sf7 46, sf20 74, sf20n40k 58, sf20n80k 68 (the top rung from games
# below it only); from sf2 up each rung's margin clears the next one's.
SF_NODES = 20_000
RUNGS: tuple[Rung, ...] = (
    Rung("random", "random", 0.0),
    Rung("sf-10", "fairy", 607.0, skill=-10, nodes=SF_NODES),
    Rung("greedy", "greedy", 962.0),
    Rung("sf-5", "fairy", 998.0, skill=-5, nodes=SF_NODES),
    Rung("sf-4", "fairy", 1201.0, skill=-4, nodes=SF_NODES),
    Rung("sf-3", "fairy", 1454.0, skill=-3, nodes=SF_NODES),
    Rung("sf-2", "fairy", 1565.0, skill=-2, nodes=SF_NODES),
    Rung("sf0", "fairy", 1677.0, skill=0, nodes=SF_NODES),
    Rung("sf2", "fairy", 2067.0, skill=2, nodes=SF_NODES),
    Rung("sf4", "fairy", 2318.0, skill=4, nodes=SF_NODES),
    Rung("sf5", "fairy", 2395.0, skill=5, nodes=SF_NODES),
    Rung("sf6", "fairy", 2610.0, skill=6, nodes=SF_NODES),
    Rung("sf7", "fairy", 2735.0, skill=7, nodes=SF_NODES),
    Rung("sf20", "fairy", 3030.0, skill=20, nodes=SF_NODES),
    Rung("sf20n40k", "fairy", 3306.0, skill=20, nodes=40_000),
    Rung("sf20n80k", "fairy", 3466.0, skill=20, nodes=80_000),
)
_BY_NAME = {r.name: r for r in RUNGS}


def rung(name: str) -> Rung:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown ladder rung {name!r}; the rungs: {', '.join(r.name for r in RUNGS)}") from None


def named_twice(names) -> list[str]:
    """The rung names given more than once (a rung is one match, kept by its name), sorted."""
    names = list(names)
    return sorted({n for n in names if names.count(n) > 1})


def find_engine(command: str = FAIRY_STOCKFISH) -> Optional[str]:
    """The path of the Fairy-Stockfish binary: `command` on PATH, or in Debian's /usr/games."""
    found = shutil.which(command)
    if found is None and "/" not in command:
        found = shutil.which(command, path=str(DEBIAN_GAMES))
    return found


class EngineMissing(ValueError):
    """A rung needs Fairy-Stockfish and it is not installed."""


_FAIRY_NAME = re.compile(r"sf(-?\d+)(?:n(\d+)k)?")


def fairy_settings(name: str, nodes: int = SF_NODES) -> Optional[tuple[int, int]]:
    """The Skill Level and nodes a move a Fairy-Stockfish rung's name stands for: `sfS` is Skill
    Level S at `nodes` nodes a move, `sfSnKk` Skill Level S at K thousand (sf20n80k); None for
    a name of neither form."""
    found = _FAIRY_NAME.fullmatch(name)
    if found is None:
        return None
    skill, thousands = found.groups()
    return int(skill), int(thousands) * 1000 if thousands else nodes


def fairy_player(skill: int, nodes: int, label: str, engine: str = FAIRY_STOCKFISH) -> UsiPlayer:
    """Fairy-Stockfish at Skill Level `skill`, one thread, `nodes` nodes a move. Raises
    EngineMissing without Fairy-Stockfish."""
    path = find_engine(engine)
    if path is None:
        raise EngineMissing(f"ladder rung {label} needs Fairy-Stockfish, which is not installed "
                            f"(apt-get install fairy-stockfish)")
    return UsiPlayer(path, {"UCI_Variant": "shogi", "Threads": "1", "Skill Level": str(skill)},
                     f"nodes {nodes}", label)


def rung_player(name: str, seed: int = 0, options: Optional[dict] = None, label: Optional[str] = None,
                engine: str = FAIRY_STOCKFISH):
    """A player for the rung `name` (player spec `ladder:NAME`); a rung is fixed, so it takes
    no options. Raises EngineMissing without Fairy-Stockfish."""
    if options:
        raise ValueError(f"player 'ladder:{name}': a rung takes no options (got {', '.join(options)})")
    r = rung(name)
    label = label or r.name
    if r.kind == "random":
        return RandomPlayer(seed, label)
    if r.kind == "greedy":
        return GreedyPlayer(seed, label)
    return fairy_player(r.skill, r.nodes, label, engine)


# --- ratings ---

@dataclass(frozen=True)
class Score:
    """A player's games against one opponent of known rating."""

    rating: float
    wins: int
    losses: int
    draws: int

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    @property
    def points(self) -> float:
        return self.wins + 0.5 * self.draws


@dataclass(frozen=True)
class Rating:
    rating: float  # Elo above uniform random
    margin: float  # half-width of its 95% interval
    clipped: bool = False  # a perfect or zero score against some rung was clipped
    games: int = 0

    def __str__(self) -> str:
        return f"{self.rating:.0f} +/- {self.margin:.0f}" + (" (a perfect score clipped)" if self.clipped else "")


def expected_score(rating: float, opponent: float) -> float:
    return 1.0 / (1.0 + 10.0 ** ((opponent - rating) / 400.0))


def _clipped_points(score: Score) -> tuple[float, bool]:
    n = score.games
    if score.points <= 0.0:
        return 0.5, True
    if score.points >= n:
        return n - 0.5, True
    return score.points, False


def rate(scores: Sequence[Score]) -> Rating:
    """The maximum-likelihood rating of a player with these scores against opponents of known
    rating, and its 95% margin (from the Fisher information)."""
    scores = [s for s in scores if s.games > 0]
    if not scores:
        raise ValueError("no games to rate")
    points, clipped = zip(*(_clipped_points(s) for s in scores))

    def excess(r: float) -> float:  # observed minus expected points: decreasing in r
        return sum(p - s.games * expected_score(r, s.rating) for p, s in zip(points, scores))

    low, high = min(s.rating for s in scores) - 4000.0, max(s.rating for s in scores) + 4000.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if excess(mid) > 0 else (low, mid)
    r = 0.5 * (low + high)
    information = sum(s.games * expected_score(r, s.rating) * (1 - expected_score(r, s.rating))
                      for s in scores) * _K ** 2
    margin = _Z975 / math.sqrt(information) if information > 0 else math.inf
    return Rating(r, margin, any(clipped), sum(s.games for s in scores))


@dataclass(frozen=True)
class Pairing:
    """Games between two named players: `first`'s wins, losses and draws."""

    first: str
    second: str
    wins: int
    losses: int
    draws: int


def fit_ratings(pairings: Sequence[Pairing], anchor: str = "random", tolerance: float = 1e-3) -> dict[str, Rating]:
    """Every player's rating from games among them (Bradley-Terry by maximum likelihood, each
    player's perfect or zero scores clipped as `rate` clips them), with `anchor` at 0: Newton's
    method on all ratings at once until no rating moves by `tolerance` Elo; each player's margin
    is `rate`'s against the others' fitted ratings. Raises ValueError when some player is not
    joined to the anchor by games."""
    players = sorted({p.first for p in pairings} | {p.second for p in pairings})
    if anchor not in players:
        raise ValueError(f"the anchor {anchor!r} played no games")
    index = {name: i for i, name in enumerate(players)}
    sides = []  # (player, opponent, games, the player's clipped points), each pairing from both sides
    for p in pairings:
        n = p.wins + p.losses + p.draws
        if n:
            first, second = Score(0.0, p.wins, p.losses, p.draws), Score(0.0, p.losses, p.wins, p.draws)
            sides.append((index[p.first], index[p.second], n, _clipped_points(first)[0]))
            sides.append((index[p.second], index[p.first], n, _clipped_points(second)[0]))
    free = [i for i in range(len(players)) if i != index[anchor]]
    ratings = np.zeros(len(players))
    for _ in range(200):
        excess, slope = np.zeros(len(players)), np.zeros((len(players), len(players)))
        for i, j, n, points in sides:
            e = expected_score(ratings[i], ratings[j])
            excess[i] += points - n * e
            slope[i, i] -= n * e * (1 - e) * _K
            slope[i, j] += n * e * (1 - e) * _K
        try:
            step = np.linalg.solve(slope[np.ix_(free, free)], -excess[free])
        except np.linalg.LinAlgError:
            raise ValueError(f"some players are not joined to the anchor {anchor!r} by games") from None
        ratings[free] += np.clip(step, -400.0, 400.0)
        if np.max(np.abs(step)) < tolerance:
            break
    by_name = {name: float(ratings[index[name]]) for name in players}
    fitted = {anchor: Rating(0.0, 0.0)}
    for player in players:
        if player != anchor:
            fitted[player] = rate(_scores_of(player, pairings, by_name))
    return fitted


def _scores_of(player: str, pairings: Sequence[Pairing], ratings: dict) -> list[Score]:
    out = []
    for p in pairings:
        if p.first == player:
            out.append(Score(ratings[p.second], p.wins, p.losses, p.draws))
        elif p.second == player:
            out.append(Score(ratings[p.first], p.losses, p.wins, p.draws))
    return out


def nearest_rungs(rating: Optional[float], count: int, rungs: Optional[Sequence[Rung]] = None) -> list[Rung]:
    """The `count` consecutive rungs (of the ladder, or `rungs`) around `rating` (the lowest ones
    when there is no rating yet): those whose ratings are nearest to it, in ladder order."""
    rungs = sorted(RUNGS if rungs is None else rungs, key=lambda r: r.rating)
    count = min(count, len(rungs))
    if rating is None:
        return rungs[:count]
    best = min(range(len(rungs) - count + 1),
               key=lambda i: max(abs(r.rating - rating) for r in rungs[i:i + count]))
    return rungs[best:best + count]


@dataclass
class LadderResult:
    """A player's matches against rungs, and its rating from them."""

    player: str
    matches: dict = field(default_factory=dict)  # rung name -> play.arena.MatchResult
    skipped: dict = field(default_factory=dict)  # rung name -> why it was not played

    @property
    def rating(self) -> Optional[Rating]:
        scores = [Score(rung(name).rating, m.wins, m.losses, m.draws) for name, m in self.matches.items()]
        return rate(scores) if scores else None


def play_ladder(player, rungs: Sequence[Rung], games: int, *, rules, openings: str = "startpos", seed: int = 0,
                in_flight: int = 16, progress: bool = False, say: Callable[[str], None] = print,
                on_game: Optional[Callable[[str, Any, Any], None]] = None,
                result: Optional[LadderResult] = None) -> LadderResult:
    """Plays `player` against each rung (`games` games, colours alternating). A rung that
    cannot be played (Fairy-Stockfish missing, or crashing) is left out with a one-line note
    through `say`; the others are played. on_game(rung name, opponent, arena.MatchGame) per game.
    `result`, when given, is filled rung by rung (and returned): a caller that is interrupted
    (Ctrl-C) has the rungs played until then."""
    result = LadderResult(player.name) if result is None else result
    for r in rungs:
        try:
            opponent = rung_player(r.name, seed)
            opponent.rules = rules
        except (EngineMissing, UsiError) as e:
            result.skipped[r.name] = str(e)
            say(f"ladder: {r.name} left out: {e}")
            continue
        try:
            result.matches[r.name] = play_match(
                player, opponent, games, openings=Openings(openings, seed), rules=rules, in_flight=in_flight,
                progress=progress, on_game=None if on_game is None else functools.partial(on_game, r.name, opponent))
        except UsiError as e:
            result.skipped[r.name] = f"failed: {e}"
            say(f"ladder: {r.name} left out: it failed during its match ({e})")
        finally:
            opponent.close()
    return result
