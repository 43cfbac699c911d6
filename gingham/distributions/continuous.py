"""Univariate continuous distributions: Normal, Uniform, Exponential, Laplace, Gamma, Beta."""

from __future__ import annotations

import math

import numpy as np

from ..frontend import special
from ..frontend.jit import current_trace
from ..frontend.tensor import Tensor, where
from ..nn import functional as F
from . import distribution as D
from .distribution import Distribution, as_tensors, sample_shape_of, sample_state


class Normal(Distribution):
    """``torch.distributions.Normal(loc, scale)``.

        d = Normal(gingham.zeros((3,)), gingham.ones((3,)))
        d.rsample((10,)).shape      # (10, 3)
    """

    arg_constraints = {"loc": D.real, "scale": D.positive}
    support = D.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = as_tensors(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    @property
    def mean(self) -> Tensor: return self.loc

    @property
    def mode(self) -> Tensor: return self.loc

    @property
    def stddev(self) -> Tensor: return self.scale

    @property
    def variance(self) -> Tensor: return self.scale.square()

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        noise = F.random_normal(shape, sample_state(self.loc.device), self.loc.dtype)
        return self.loc + noise * self.scale

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        return (-(value - self.loc).square() / (2.0 * self.variance) - self.scale.log()
                - D.LOG_SQRT_2PI)

    def cdf(self, value) -> Tensor:
        value = self._value(value)
        return 0.5 * (1.0 + ((value - self.loc) / (self.scale * math.sqrt(2.0))).erf())

    def icdf(self, value) -> Tensor:
        return self.loc + self.scale * (2.0 * value - 1.0).erfinv() * math.sqrt(2.0)

    def entropy(self) -> Tensor:
        return 0.5 + D.LOG_SQRT_2PI + self.scale.log()


class Uniform(Distribution):
    """``torch.distributions.Uniform(low, high)``: draws in ``[low, high)``."""

    arg_constraints = {"low": D.real, "high": D.real}
    has_rsample = True

    def __init__(self, low, high, validate_args: bool | None = None) -> None:
        self.low, self.high = as_tensors(low, high)
        validate = Distribution._validate_default if validate_args is None else validate_args
        if validate and not bool((self.low < self.high).all().item()):
            raise ValueError("Expected parameter low of distribution Uniform to be less than "
                             "high, but found invalid values")
        super().__init__(self.low.shape, (), validate_args)

    @property
    def support(self) -> D.Constraint:
        return D.half_open_interval(self.low, self.high)

    @property
    def mean(self) -> Tensor: return (self.high + self.low) / 2.0

    @property
    def variance(self) -> Tensor: return (self.high - self.low).square() / 12.0

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = F.random_uniform(shape, sample_state(self.low.device), self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        inside = (self.low <= value) & (self.high > value)
        return where(inside, 0.0, -math.inf) - (self.high - self.low).log()

    def cdf(self, value) -> Tensor:
        value = self._value(value)
        return ((value - self.low) / (self.high - self.low)).clamp(0.0, 1.0)

    def icdf(self, value) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()


class Exponential(Distribution):
    """``torch.distributions.Exponential(rate)``."""

    arg_constraints = {"rate": D.positive}
    support = D.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = as_tensors(rate)
        super().__init__(self.rate.shape, (), validate_args)

    @property
    def mean(self) -> Tensor: return 1.0 / self.rate

    @property
    def mode(self) -> Tensor: return self.rate * 0.0

    @property
    def variance(self) -> Tensor: return 1.0 / self.rate.square()

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = F.random_uniform(shape, sample_state(self.rate.device), self.rate.dtype)
        return -(-u).log1p() / self.rate  # u in [0, 1): log1p(-u) is finite

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value) -> Tensor:
        value = self._value(value)
        return 1.0 - (-self.rate * value).exp()

    def icdf(self, value) -> Tensor:
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()


class Laplace(Distribution):
    """``torch.distributions.Laplace(loc, scale)``."""

    arg_constraints = {"loc": D.real, "scale": D.positive}
    support = D.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = as_tensors(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    @property
    def mean(self) -> Tensor: return self.loc

    @property
    def mode(self) -> Tensor: return self.loc

    @property
    def variance(self) -> Tensor: return 2.0 * self.scale.square()

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = F.random_uniform(shape, sample_state(self.loc.device), self.loc.dtype)
        centred = u * 2.0 - 1.0  # in [-1, 1): -1 would give log1p(-1) = -inf
        centred = where(centred == -1.0, -1.0 + 2.0 ** -24, centred)
        return self.loc - self.scale * centred.sign() * (-centred.abs()).log1p()

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        return -(2.0 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value) -> Tensor:
        value = self._value(value)
        z = value - self.loc
        return 0.5 - 0.5 * z.sign() * (-z.abs() / self.scale).expm1()

    def icdf(self, value) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2.0 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1.0 + (2.0 * self.scale).log()


def standard_gamma(concentration: Tensor, sample_shape=()) -> Tensor:
    """Gamma(``concentration``, 1) draws of ``sample_shape + concentration.shape``, on the
    device (Marsaglia-Tsang, :func:`gingham.nn.functional.random_gamma`), reparameterized by
    the implicit derivative ``dz/da = -(dP(a, z)/da) / p(z)`` (Figurnov et al. 2018, as
    PyTorch's ``_standard_gamma``), P the regularized incomplete gamma function."""
    alpha = concentration
    shape = sample_shape_of(sample_shape) + alpha.shape
    fixed = special._stopped(alpha)
    draws = F.random_gamma(fixed.expand(*shape), sample_state(alpha.device)).astype(alpha.dtype)
    # A tiny alpha can round a draw to 0 (log(0) in the density below): it is raised to a
    # floor, float64's smallest normal number in float64 (half of the float64 draws of
    # Gamma(1e-3) are below 1e-308: 1e-30 would stand out), 1e-30 otherwise.
    floor = float(np.finfo(np.float64).tiny) if alpha.dtype == np.float64 else 1e-30
    draws = where(draws > 0.0, draws, floor)
    if current_trace() is None:
        # A buffer of its own: igamma's continued fraction reads the draw at each of its
        # levels, and the compiler's inliner would copy the sampler's whole expression into
        # every read (with the earlier 64-step series, the rsample test took minutes to
        # compile on cpu and opencl without this).
        draws.realize()
    by_a = special.igamma_derivative_in_a(fixed, draws)
    density = ((fixed - 1.0) * draws.log() - draws - special.lgamma(fixed)).exp()
    # (a - stop(a)) is 0 in value; its derivative in a is the implicit dz/da
    return draws - (alpha - fixed) * special._stopped(by_a / density)


class Gamma(Distribution):
    """``torch.distributions.Gamma(concentration, rate)``; ``rsample`` differentiable in both
    (see :func:`standard_gamma`)."""

    arg_constraints = {"concentration": D.positive, "rate": D.positive}
    support = D.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = as_tensors(concentration, rate)
        super().__init__(self.rate.shape, (), validate_args)

    @property
    def mean(self) -> Tensor: return self.concentration / self.rate

    @property
    def mode(self) -> Tensor: return ((self.concentration - 1.0) / self.rate).clamp(min=0.0)

    @property
    def variance(self) -> Tensor: return self.concentration / self.rate.square()

    def rsample(self, sample_shape=()) -> Tensor:
        return standard_gamma(self.concentration, sample_shape) / self.rate

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        return (self.concentration.xlogy(self.rate)
                + (self.concentration - 1.0).xlogy(value)
                - self.rate * value - special.lgamma(self.concentration))

    def cdf(self, value) -> Tensor:
        value = self._value(value)
        return special.igamma(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + special.lgamma(a) + (1.0 - a) * special.digamma(a)


class Beta(Distribution):
    """``torch.distributions.Beta(concentration1, concentration0)``: ``x^(c1-1) (1-x)^(c0-1)``
    on ``[0, 1]``; draws are ``g1 / (g1 + g0)`` of two Gamma draws (reparameterized)."""

    arg_constraints = {"concentration1": D.positive, "concentration0": D.positive}
    support = D.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = as_tensors(concentration1, concentration0)
        super().__init__(self.concentration1.shape, (), validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.square() * (total + 1.0))

    def rsample(self, sample_shape=()) -> Tensor:
        first = standard_gamma(self.concentration1, sample_shape)
        second = standard_gamma(self.concentration0, sample_shape)
        return first / (first + second)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        a, b = self.concentration1, self.concentration0
        return ((a - 1.0).xlogy(value) + special.xlog1py(b - 1.0, -value)
                - _log_beta(a, b))

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        return (_log_beta(a, b) - (a - 1.0) * special.digamma(a)
                - (b - 1.0) * special.digamma(b) + (a + b - 2.0) * special.digamma(a + b))


def _log_beta(a: Tensor, b: Tensor) -> Tensor:
    return special.lgamma(a) + special.lgamma(b) - special.lgamma(a + b)
