"""The search formulas (search/formulas.py) on rows small enough to work out by hand; each
expected number is derived in the comment above it."""
import numpy as np
import pytest

from azshogi.search.formulas import completed_q, first_play_urgency, puct_scores, root_sigma, root_value, sigma


def rows(*values, dtype=np.float32):
    return np.array(values, dtype)


def test_completed_q_mixes_unvisited_actions():
    logits = np.log(np.array([[0.5, 0.25, 0.25]], np.float32))
    visits = np.array([[2.0, 1.0, 0.0]], np.float32)
    value_sum = np.array([[1.0, -0.5, 0.0]], np.float32)  # q = 0.5 and -0.5
    node_value = np.array([0.2], np.float32)
    cq = completed_q(logits, visits, value_sum, node_value)
    # v_mix = (0.2 + 3 * (0.5*0.5 + 0.25*-0.5) / 0.75) / 4 = (0.2 + 0.5) / 4
    assert cq[0, 0] == pytest.approx(0.5) and cq[0, 1] == pytest.approx(-0.5)
    assert cq[0, 2] == pytest.approx(0.175)
    # No visits at all: every action gets the network value.
    assert completed_q(logits, np.zeros_like(visits), np.zeros_like(visits), node_value)[0] == pytest.approx([0.2] * 3)


def test_sigma_rescales_the_completed_q_over_the_legal_moves_only():
    # Legal moves q = 0.2, 0.6, -0.2 (3, 5, 0 visits); the padding column's -1 must not count.
    cq = rows([0.2, 0.6, -0.2, -1.0])
    visits = rows([3.0, 5.0, 0.0, 0.0])
    valid = np.array([[True, True, True, False]])
    # (c_visit + max N) * c_scale = (50 + 5) * 0.1 = 5.5.
    # Rescaled over [-0.2, 0.6]: q_hat = 0.5, 1, 0.
    assert sigma(cq, visits, valid, 50.0, 0.1, rescale=True)[0, :3] == pytest.approx([2.75, 5.5, 0.0])
    # As win rates (q + 1) / 2 = 0.6, 0.8, 0.4.
    assert sigma(cq, visits, valid, 50.0, 0.1, rescale=False)[0, :3] == pytest.approx([3.3, 4.4, 2.2])
    # All equal (a fresh node): no range to rescale, sigma 0 everywhere.
    assert sigma(rows([0.3, 0.3]), rows([0.0, 0.0]), np.ones((1, 2), bool), 50.0, 0.1, True)[0] == pytest.approx([0, 0])


@pytest.mark.parametrize("has_unconsidered, rescale, expected", [
    # q = 0.5 and 0.3 (2 and 1 visits); priors 0.5 and 0.25 of the considered moves, the third
    # legal move (prior 0.25) not considered; network value -0.6. v_mix = (-0.6 + 3 * (0.5 * 0.5 +
    # 0.25 * 0.3) / 0.75) / 4 = 0.175. (c_visit + max N) * c_scale = 52 * 0.1 = 5.2.
    # With an unconsidered (unvisited) move, v_mix joins the range [0.175, 0.5]: q_hat 1 and
    # 0.125 / 0.325.
    (True, True, [5.2, 2.0]),
    # Every legal move considered and visited: the range is [0.3, 0.5].
    (False, True, [5.2, 0.0]),
    # Win rates 0.75 and 0.65.
    (True, False, [3.9, 3.38]),
])
def test_root_sigma_by_hand(has_unconsidered, rescale, expected):
    prior = rows([0.5, 0.25])
    visits = rows([2.0, 1.0])
    value_sum = rows([1.0, 0.3])
    result = root_sigma(prior, visits, value_sum, rows(-0.6), np.array([[True, True]]),
                        np.array([has_unconsidered]), 50.0, 0.1, rescale)
    assert result[0] == pytest.approx(expected, abs=1e-5)


def test_puct_scores_by_hand():
    prior = rows([0.5, 0.3, 0.2, 0.0])
    visits = rows([2.0, 1.0, 0.0, 0.0])
    value_sum = rows([1.0, -0.5, 0.0, 0.0])
    valid = np.array([[True, True, True, False]])
    # N = 3, c = log((1 + 3 + 1) / 1) + 0.5 = 2.1094379, sqrt(N) = 1.7320508:
    # U = c P sqrt(N) / (1 + N(a)) = 0.608942, 0.548048, 0.730731; Q = 0.5, -0.5, unvisited.
    scores = puct_scores(prior, visits, value_sum, valid, c_base=1.0, c_init=0.5, unvisited_q=0.0)
    assert scores[0, :3] == pytest.approx([1.108942, 0.048048, 0.730731], abs=1e-5)
    assert scores[0, 3] == -np.inf
    # First-play urgency: the unvisited edge takes the row's Q for unvisited edges.
    scores = puct_scores(prior, visits, value_sum, valid, 1.0, 0.5, unvisited_q=rows([-0.3]))
    assert scores[0, 2] == pytest.approx(0.430731, abs=1e-5)
    # A node's first visit (N = 0): sqrt(max(N, 1)) = 1 (not 0: the prior decides), c = log(2) +
    # 0.5 = 1.1931472, U = c P.
    fresh = puct_scores(prior, 0 * visits, 0 * value_sum, valid, 1.0, 0.5, 0.0)
    assert fresh[0, :3] == pytest.approx([0.596574, 0.357944, 0.238629], abs=1e-5)


def test_first_play_urgency_by_hand():
    # Visited prior mass 0.5 + 0.2 = 0.7: 0.4 - 0.2 * sqrt(0.7) = 0.232668.
    fpu = first_play_urgency(rows(0.4), rows([0.5, 0.3, 0.2]), rows([2.0, 0.0, 1.0]), reduction=0.2)
    assert fpu.shape == (1, 1) and fpu[0, 0] == pytest.approx(0.232668, abs=1e-6)


def test_root_value_by_hand():
    # (v + sum W) / (1 + sum N) = (0.2 + 1.0 - 0.5) / (1 + 3) = 0.175; unvisited: v.
    value = root_value(rows(0.2, -0.4), rows([1.0, -0.5, 0.0], [0.0, 0.0, 0.0]), rows([2.0, 1.0, 0.0], [0, 0, 0]))
    assert value == pytest.approx([0.175, -0.4])
