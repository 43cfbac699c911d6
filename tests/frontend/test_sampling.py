"""gingham.rand, randn, randint, randperm, normal and bernoulli (gingham/frontend/sampling.py):
distributions checked by Kolmogorov-Smirnov statistics and frequencies with fixed seeds,
reproducibility, fresh draws in a compiled step, and PyTorch's argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import gingham
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


def test_errors():
    with pytest.raises(ValueError, match="low < high"):
        gingham.randint(5, 5, (2,), device="reference")
    with pytest.raises(TypeError, match="randint"):
        gingham.randint(5, device="reference")
    with pytest.raises(ValueError, match="generator lives on"):
        gingham.rand(2, generator=F.Generator(0, "reference"), device="cpu")
    with pytest.raises(gingham.frontend.tensor.DTypeError, match="floating-point"):
        gingham.randint(3, (2,), device="reference", requires_grad=True)
