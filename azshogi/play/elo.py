"""Elo difference, its 95% margin and the likelihood of superiority from W/L/D counts.

The formulas are those of cshogi's `elo` module (and cutechess): the score mu = (W + D/2) / N,
Elo = -400 log10(1/mu - 1), the margin from the per-game score's standard error with normal
quantiles, and LOS = P(the first player is stronger) from wins and losses alone. They differ
from cshogi's in two honest ways: exact normal quantiles (cshogi approximates erf^-1), and a
defined answer for a perfect or a zero score, where the Elo difference is infinite: the score is
clipped to half a game from the boundary (1 - 1/(2N) or 1/(2N)) and `clipped` says so; where
every game scored alike (all wins, all losses or all draws) the games show no spread at all,
which would claim a margin of 0: the spread of a win/loss score with the same mean is used
instead (an all-draw match of N games gets the margin of a 50% score in N decisive games); and
where one end of the interval reaches a score of 0 or 1 (an infinite Elo; cshogi raises a math
error there), the margin is the other end's distance.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

_Z975 = NormalDist().inv_cdf(0.975)  # 1.95996...


def elo_of_score(score: float) -> float:
    """Elo difference of an expected score in (0, 1)."""
    return -400.0 * math.log10(1.0 / score - 1.0)


@dataclass(frozen=True)
class EloEstimate:
    wins: int
    losses: int
    draws: int
    score: float  # (W + D/2) / N, the unclipped point ratio
    elo: float  # Elo difference of the first player (0 for no games)
    margin: float  # half-width of the 95% confidence interval of `elo`
    los: float  # likelihood of superiority in [0, 1]; 0.5 without decisive games
    clipped: bool  # the score was 0 or 1 and was clipped to give a finite figure

    @property
    def games(self) -> int:
        return self.wins + self.losses + self.draws

    @property
    def draw_ratio(self) -> float:
        return self.draws / self.games if self.games else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "games": self.games, "draw_ratio": self.draw_ratio}

    def __str__(self) -> str:
        sign = ">=" if self.clipped and self.score == 1 else "<=" if self.clipped else ""
        return (f"W/L/D {self.wins}/{self.losses}/{self.draws} ({self.score:.1%}), Elo {sign}{self.elo:+.1f} "
                f"+/- {self.margin:.1f} (95%), LOS {self.los:.1%}")


def estimate(wins: int, losses: int, draws: int) -> EloEstimate:
    """The Elo figures of a first player that scored W/L/D against a second."""
    if min(wins, losses, draws) < 0:
        raise ValueError(f"negative counts: {wins}/{losses}/{draws}")
    n = wins + losses + draws
    if n == 0:
        return EloEstimate(0, 0, 0, 0.5, 0.0, math.inf, 0.5, False)
    score = (wins + draws / 2.0) / n
    clipped = score <= 0.0 or score >= 1.0
    mu = min(max(score, 0.5 / n), 1.0 - 0.5 / n) if clipped else score
    w, lo, d = wins / n, losses / n, draws / n
    if max(wins, losses, draws) == n:  # all games scored alike: a binomial score's spread at mean mu
        deviation = math.sqrt(mu * (1.0 - mu))
    else:
        deviation = math.sqrt(w * (1.0 - mu) ** 2 + lo * mu ** 2 + d * (0.5 - mu) ** 2)
    stdev = deviation / math.sqrt(n)
    low, high = mu - _Z975 * stdev, mu + _Z975 * stdev
    elo = elo_of_score(mu) + 0.0  # no "-0"
    # An interval end at a score of 0 or 1 is an infinite Elo: use the finite side's width.
    widths = ([elo - elo_of_score(low)] if low > 0 else []) + ([elo_of_score(high) - elo] if high < 1 else [])
    margin = sum(widths) / len(widths) if widths else math.inf
    decisive = wins + losses
    los = 0.5 + 0.5 * math.erf((wins - losses) / math.sqrt(2.0 * decisive)) if decisive else 0.5
    return EloEstimate(wins, losses, draws, score, elo, margin, los, clipped)
