"""gingham's device-side draws (F.random_uniform, F.random_normal, F.random_gamma,
gingham.multinomial) on every device: the uniform draw against the independent NumPy Philox,
the others by their laws (Kolmogorov-Smirnov statistics and frequencies, fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import gingham
import gingham.nn.functional as F
from gingham.frontend.tensor import realize, tensor
from gingham.tile.philox import philox_uniform

DRAWS = 4000
KS_LIMIT = 0.031  # exceeded by 4000 true draws with probability 0.001


def test_draws_follow_their_laws(device):
    state = tensor(np.array([11, 3], np.uint32), device=device)
    weights = tensor(np.array([[1.0, 2.0, 0.0, 7.0], [3.0, 3.0, 3.0, 1.0]], np.float32),
                     device=device)
    drawn = {
        "uniform": F.random_uniform((5, 7), state),
        "normal": F.random_normal((DRAWS,), state),
        "gamma": F.random_gamma(tensor(np.full(DRAWS, 1.0, np.float32), device=device), state),
        "with_replacement": gingham.multinomial(weights, DRAWS, True, seed=2),
        "without": gingham.multinomial(weights.broadcast_to((DRAWS // 2, 2, 4)).reshape(
            DRAWS, 4), 3, seed=3),
    }
    realize(list(drawn.values()))
    got = {name: value.numpy() for name, value in drawn.items()}
    np.testing.assert_array_equal(got["uniform"], philox_uniform(11, 3, 35).reshape(5, 7))
    assert stats.kstest(got["normal"], stats.norm.cdf).statistic < KS_LIMIT
    assert stats.kstest(got["gamma"], stats.expon.cdf).statistic < KS_LIMIT  # Gamma(1)
    probabilities = np.array([[0.1, 0.2, 0.0, 0.7], [0.3, 0.3, 0.3, 0.1]])
    for row in range(2):
        frequencies = np.bincount(got["with_replacement"][row], minlength=4) / DRAWS
        np.testing.assert_allclose(frequencies, probabilities[row], atol=0.025)
    without = got["without"]
    assert without.dtype == np.int64 and without.shape == (DRAWS, 3)
    assert (np.sort(without, 1)[:, 1:] != np.sort(without, 1)[:, :-1]).all()  # no repeats
    first = without[0::2]  # rows of weights [1, 2, 0, 7]: class 2 (weight 0) never drawn
    assert (first != 2).all()
    # the first pick of a draw without replacement follows the weights
    np.testing.assert_allclose(np.bincount(first[:, 0], minlength=4) / len(first),
                               probabilities[0], atol=0.035)


def test_multinomial_errors():
    weights = tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="n_sample > prob_dist.size"):
        gingham.multinomial(weights, 4)
    with pytest.raises(ValueError, match="n_sample <= 0"):
        gingham.multinomial(weights, 0)
    with pytest.raises(F.ShapeError, match="prob_dist must be 1 or 2 dim"):
        gingham.multinomial(tensor(np.ones((2, 2, 2), np.float32)), 1)
