"""Elo figures: agree with cshogi's `elo` where it is defined, stay finite where it is not."""
import math

import pytest
from cshogi.elo import Elo

from azshogi.play.elo import estimate


@pytest.mark.parametrize("wins,losses,draws", [(10, 10, 0), (55, 40, 5), (30, 60, 10), (3, 1, 100), (70, 25, 5),
                                               (12, 7, 1)])
def test_agrees_with_cshogi(wins, losses, draws):
    ours, theirs = estimate(wins, losses, draws), Elo(wins, losses, draws)
    assert ours.elo == pytest.approx(theirs.diff(), abs=1e-9)
    # cshogi approximates erf^-1 (a relative error of about 1e-3); we use exact quantiles.
    assert ours.margin == pytest.approx(theirs.error_margin(), rel=5e-3)
    assert 100 * ours.los == pytest.approx(theirs.los(), abs=1e-9)
    assert ours.score == pytest.approx(theirs.point_ratio())
    assert not ours.clipped


def test_hand_checked_figures():
    even = estimate(50, 50, 0)
    assert even.elo == 0 and even.los == 0.5
    # 75% is +190.8 Elo: -400 log10(1/0.75 - 1).
    assert estimate(75, 25, 0).elo == pytest.approx(190.85, abs=0.01)
    assert estimate(25, 75, 0).elo == pytest.approx(-190.85, abs=0.01)


def test_perfect_and_zero_scores_are_clipped_and_finite():
    perfect = estimate(20, 0, 0)
    assert perfect.clipped and perfect.score == 1.0
    assert perfect.elo == pytest.approx(-400 * math.log10(1 / (1 - 1 / 40) - 1))
    assert math.isfinite(perfect.margin) and perfect.margin > 0
    zero = estimate(0, 5, 0)
    assert zero.clipped and zero.elo < 0 and zero.los < 0.05
    # 19-1: the interval's upper end passes a score of 1 (cshogi raises a math error here).
    nearly = estimate(19, 1, 0)
    assert not nearly.clipped and math.isfinite(nearly.margin)
    assert estimate(0, 0, 0).games == 0
    with pytest.raises(ValueError):
        estimate(-1, 0, 0)


def test_an_all_draw_match_is_not_certain():
    draws = estimate(0, 0, 20)
    assert draws.elo == 0 and not draws.clipped
    # As uncertain as a 50% score in 20 decisive games, never "+/- 0".
    assert draws.margin == pytest.approx(estimate(10, 10, 0).margin) and draws.margin > 100
    assert "+/- 0.0" not in str(draws)
