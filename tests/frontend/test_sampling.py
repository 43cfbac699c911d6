"""gingham.rand, randn, randint, randperm, normal, bernoulli, poisson and binomial
(gingham/frontend/sampling.py): distributions checked by Kolmogorov-Smirnov statistics,
chi-square tests and frequencies with fixed seeds, reproducibility, fresh draws in a compiled
step, and PyTorch's argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import gingham
from gingham.frontend.tensor import realize
from gingham.nn import functional as F


def test_distributions(device):
    gingham.manual_seed(3)
    uniform = gingham.rand(4000, device=device).numpy()
    normal = gingham.randn((4000,), device=device).numpy()
    shifted = gingham.normal(gingham.full((4000,), 2.0, device=device), 0.5).numpy()
    assert uniform.dtype == np.float32 and 0 <= uniform.min() and uniform.max() < 1
    # (the distributions as callables: SciPy's string forms changed their arguments)
    assert stats.kstest(uniform, stats.uniform().cdf).pvalue > 1e-3
    assert stats.kstest(normal, stats.norm().cdf).pvalue > 1e-3
    assert stats.kstest(shifted, stats.norm(2.0, 0.5).cdf).pvalue > 1e-3
    integers = gingham.randint(-2, 3, (5000,), device=device).numpy()
    assert integers.dtype == np.int64
    counts = np.bincount(integers + 2, minlength=5)
    assert counts.size == 5 and stats.chisquare(counts).pvalue > 1e-3
    order = gingham.randperm(50, device=device).numpy()
    assert sorted(order.tolist()) == list(range(50)) and order.tolist() != list(range(50))
    coins = gingham.bernoulli(gingham.full((5000,), 0.3, device=device)).numpy()
    assert set(np.unique(coins)) <= {0.0, 1.0} and abs(coins.mean() - 0.3) < 0.03


def test_seeds_generators_and_compiled_steps(device):
    gingham.manual_seed(11)
    first = gingham.randn(8, device=device).numpy()
    gingham.manual_seed(11)
    np.testing.assert_array_equal(gingham.randn(8, device=device).numpy(), first)
    generator = F.Generator(5, device)
    a = gingham.rand(6, generator=generator).numpy()
    b = gingham.rand(6, generator=generator).numpy()
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(gingham.rand(6, generator=F.Generator(5, device)).numpy(), a)
    like = gingham.randn_like(gingham.zeros((2, 3), device=device))
    assert like.shape == (2, 3) and like.device == device
    step = gingham.jit(lambda x: x + gingham.rand(x.shape, device=device))
    zero = gingham.zeros((4,), device=device)
    assert not np.array_equal(step(zero).numpy(), step(zero).numpy())  # fresh each replay
    leaf = gingham.randn(3, device=device, requires_grad=True)
    assert leaf.is_leaf and leaf.requires_grad



def _chi_square_pvalue(draws: np.ndarray, law) -> float:
    """Pearson's test of integer ``draws`` against the discrete SciPy ``law``: the support in
    bins of at least 20 expected draws, the outer bins taking the tails."""
    edges = [law.ppf(1e-12) - 1]  # bin i holds edges[i] < k <= edges[i + 1]
    top = law.isf(1e-12)
    for k in np.arange(edges[0] + 1, top):
        if (law.cdf(k) - law.cdf(edges[-1])) * draws.size >= 20:
            edges.append(k)
    edges[-1] = np.inf
    assert len(edges) > 2, "a law of one bin: nothing to test"
    expected = np.diff(law.cdf(np.array(edges))) * draws.size
    observed = np.histogram(draws, np.array(edges) + 0.5)[0]
    return stats.chisquare(observed, expected * draws.size / expected.sum()).pvalue


RATES = [0.5, 4.0, 10.0, 137.0, 1e4]
TRIALS = [(12.0, 0.25), (3.0, 0.9), (20.0, 0.5), (1000.0, 0.995), (1e6, 0.3)]
EDGE_TRIALS = [(0.0, 0.3), (5.0, 0.0), (5.0, 1.0)]  # always 0, 0 and 5
DISCRETE_DRAWS = 5000


def test_poisson_and_binomial_laws(device):
    """Chi-square tests of each column against SciPy: with 10 columns each failing with
    probability 1e-5 under the true law, a false failure has probability about 1e-4."""
    rates = np.tile(np.array(RATES + [0.0, 1e-6], np.float64), (DISCRETE_DRAWS, 1))
    trials = np.tile(np.array(TRIALS + EDGE_TRIALS, np.float32), (DISCRETE_DRAWS, 1, 1))
    rates_tensor = gingham.tensor(rates, device=device)
    count = gingham.tensor(trials[..., 0], device=device)
    prob = gingham.tensor(trials[..., 1], device=device)

    def draw(generator=None) -> list[np.ndarray]:  # every call the same program (compiled once)
        drawn = [gingham.poisson(rates_tensor, generator), gingham.binomial(count, prob)]
        realize(drawn)
        return [d.numpy() for d in drawn]

    gingham.manual_seed(5)
    counts, heads = draw()
    assert counts.dtype == np.float64 and counts.shape == rates.shape
    assert heads.dtype == np.float32 and heads.shape == trials.shape[:2]
    assert (counts == np.round(counts)).all() and (heads == np.round(heads)).all()
    assert (counts[:, -2] == 0).all()  # rate 0
    assert (counts[:, -1] != 0).sum() <= 2  # rate 1e-6: 3 or more with probability 2e-8
    np.testing.assert_array_equal(heads[:, len(TRIALS):], np.array([[0.0, 0.0, 5.0]]).repeat(
        DISCRETE_DRAWS, 0))
    for column, rate in enumerate(RATES):
        assert _chi_square_pvalue(counts[:, column], stats.poisson(rate)) > 1e-5, rate
    for column, (n, p) in enumerate(TRIALS):
        column_heads = heads[:, column]
        assert 0 <= column_heads.min() and column_heads.max() <= n
        law = stats.binom(n, float(np.float32(p)))
        assert _chi_square_pvalue(column_heads, law) > 1e-5, (n, p)
    # the same seed, or a generator of it, draws the same numbers; the next call new ones
    gingham.manual_seed(5)
    again = draw()
    assert np.array_equal(again[0], counts) and np.array_equal(again[1], heads)
    assert not np.array_equal(draw()[0], counts)
    np.testing.assert_array_equal(draw(F.Generator(5, device))[0], counts)

def test_errors():
    with pytest.raises(ValueError, match="low < high"):
        gingham.randint(5, 5, (2,), device="reference")
    with pytest.raises(TypeError, match="randint"):
        gingham.randint(5, device="reference")
    with pytest.raises(ValueError, match="generator lives on"):
        gingham.rand(2, generator=F.Generator(0, "reference"), device="cpu")
    with pytest.raises(gingham.frontend.tensor.DTypeError, match="floating-point"):
        gingham.randint(3, (2,), device="reference", requires_grad=True)
    with pytest.raises(ValueError, match="non-negative"):
        gingham.poisson(gingham.tensor([1.0, -1.0], device="reference"))
    with pytest.raises(ValueError, match="non-negative"):
        gingham.poisson(gingham.tensor([float("nan")], device="reference"))
    with pytest.raises(gingham.frontend.tensor.DTypeError, match="floating-point"):
        gingham.poisson(gingham.tensor([1, 2], device="reference"))
    two = gingham.tensor([2.0, 3.0], device="reference")
    for prob in ([0.5, 1.5], [-0.1, 0.5], [float("nan"), 0.5]):
        with pytest.raises(ValueError, match=r"prob must lie in \[0, 1\]"):
            gingham.binomial(two, gingham.tensor(prob, device="reference"))
    with pytest.raises(ValueError, match="count must be non-negative"):
        gingham.binomial(gingham.tensor([-1.0, 3.0], device="reference"), two * 0.1)
    with pytest.raises(gingham.frontend.tensor.DTypeError, match="one dtype"):
        gingham.binomial(two, gingham.tensor([0.5, 0.5], np.float64, device="reference"))
    with pytest.raises(gingham.frontend.tensor.ShapeError, match="one shape"):
        gingham.binomial(two, gingham.tensor([0.5], device="reference"))
