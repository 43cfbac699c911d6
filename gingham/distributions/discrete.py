"""Discrete distributions: Bernoulli, Categorical, OneHotCategorical, Binomial, Multinomial,
Poisson. Each takes ``probs`` or ``logits`` (not both), as PyTorch's; the other is derived
when first read."""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ..frontend import special
from ..frontend.tensor import Tensor, arange, where
from ..nn import functional as F
from ..tile import dtypes as dt
from . import distribution as D
from .distribution import Distribution, as_tensors, sample_shape_of, sample_state


def _one_of(op: str, probs, logits) -> None:
    if (probs is None) == (logits is None):
        raise ValueError(f"{op}: either `probs` or `logits` must be specified, but not both.")


def _clamped(probs: Tensor) -> Tensor:
    """``probs`` kept off 0 and 1 by the dtype's eps, as PyTorch's ``clamp_probs``."""
    eps = float(np.finfo(probs.dtype).eps)
    return probs.clamp(eps, 1.0 - eps)


class Bernoulli(Distribution):
    """``torch.distributions.Bernoulli(probs=None, logits=None)``: 1 with probability
    ``probs`` (``sigmoid(logits)``).

        Bernoulli(logits=gingham.zeros((4,))).sample((10,))   # [10, 4] of 0.0 and 1.0
    """

    arg_constraints = {"probs": D.unit_interval, "logits": D.real}
    support = D.boolean

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        _one_of("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = as_tensors(probs)
            shape = self.probs.shape
        else:
            (self.logits,) = as_tensors(logits)
            shape = self.logits.shape
        super().__init__(shape, (), validate_args)

    @cached_property
    def probs(self) -> Tensor:
        return self.logits.sigmoid()

    @cached_property
    def logits(self) -> Tensor:
        p = _clamped(self.probs)
        return p.log() - (-p).log1p()

    @property
    def mean(self) -> Tensor: return self.probs

    @property
    def variance(self) -> Tensor: return self.probs * (1.0 - self.probs)

    @property
    def param_shape(self) -> tuple[int, ...]: return self.batch_shape

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = F.random_uniform(shape, sample_state(self.probs.device))
        return where(u < self.probs, 1.0, 0.0).astype(self.probs.dtype)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        logits, value = as_tensors(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """``torch.distributions.Categorical(probs=None, logits=None)``: an index in
    ``[0, K)`` of the last dim (``batch_shape`` is the rest); ``probs`` are normalised to sum
    to 1, ``logits`` to ``logsumexp`` 0.

        c = Categorical(logits=scores)      # scores [N, K]
        c.sample((5,))                       # [5, N], int64
    """

    arg_constraints = {"probs": D.simplex, "logits": D.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        _one_of(type(self).__name__, probs, logits)
        given = probs if probs is not None else logits
        if not isinstance(given, Tensor) or given.ndim < 1:
            raise ValueError(f"{type(self).__name__}: `probs` or `logits` must be a tensor of "
                             "at least one dimension")
        if probs is not None:
            (probs,) = as_tensors(probs)
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            (logits,) = as_tensors(logits)
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._num_events = given.shape[-1]
        super().__init__(given.shape[:-1], (), validate_args)

    @cached_property
    def probs(self) -> Tensor:
        return self.logits.softmax(-1)

    @cached_property
    def logits(self) -> Tensor:
        return _clamped(self.probs).log()

    @property
    def support(self) -> D.Constraint:
        return D.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> tuple[int, ...]: return self.probs.shape

    @property
    def mean(self) -> Tensor:
        return self.probs.new_full(self.batch_shape, math.nan)

    @property
    def variance(self) -> Tensor:
        return self.probs.new_full(self.batch_shape, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    def sample(self, sample_shape=()) -> Tensor:
        """int64 draws: the Gumbel-max trick, ``argmax(logits + Gumbel noise)`` (one draw of
        ``K`` uniforms per sample, no cumulative sum)."""
        shape = self._extended_shape(sample_shape) + (self._num_events,)
        u = F.random_uniform(shape, sample_state(self.logits.device))
        tiny = float(np.finfo(np.float32).tiny)
        gumbel = -(-(u.clamp(min=tiny)).log()).log()
        return (self.logits + gumbel.astype(self.logits.dtype)).argmax(-1)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        classes = arange(self._num_events, device=value.device).astype(value.dtype)
        chosen = value.unsqueeze(-1) == classes
        return where(chosen, self.logits, 0.0).sum(-1)

    def entropy(self) -> Tensor:
        return -where(self.probs > 0.0, self.probs * self.logits, 0.0).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events, device=self.logits.device).astype(dt.INT64)
        values = values.reshape((-1,) + (1,) * len(self.batch_shape))
        return values.expand(self._num_events, *self.batch_shape) if expand else values


class OneHotCategorical(Distribution):
    """``torch.distributions.OneHotCategorical``: :class:`Categorical` whose draws are one-hot
    float vectors (``event_shape`` ``(K,)``)."""

    arg_constraints = {"probs": D.simplex, "logits": D.real_vector}
    support = D.Constraint("OneHot()", lambda v: ((v == 0) | (v == 1)).all(-1)
                           & (v.sum(-1) == 1), 1)

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits, validate_args)
        super().__init__(self._categorical.batch_shape,
                         (self._categorical._num_events,), validate_args=False)
        self._validate_args = self._categorical._validate_args

    @property
    def probs(self) -> Tensor: return self._categorical.probs

    @property
    def logits(self) -> Tensor: return self._categorical.logits

    @property
    def mean(self) -> Tensor: return self.probs

    @property
    def variance(self) -> Tensor: return self.probs * (1.0 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, self.event_shape[0]).astype(self.probs.dtype)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()


class Binomial(Distribution):
    """``torch.distributions.Binomial(total_count=1, probs=None, logits=None)``; draws are exact
    in law, on the device (:func:`gingham.nn.functional.random_binomial`)."""

    arg_constraints = {"total_count": D.nonnegative_integer, "probs": D.unit_interval,
                       "logits": D.real}

    def __init__(self, total_count=1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        _one_of("Binomial", probs, logits)
        if probs is not None:
            self.total_count, self.probs = as_tensors(total_count, probs)
        else:
            self.total_count, self.logits = as_tensors(total_count, logits)
        super().__init__(self.total_count.shape, (), validate_args)

    probs = Bernoulli.probs
    logits = Bernoulli.logits

    @property
    def support(self) -> D.Constraint:
        return D.Constraint("IntegerInterval(0, total_count)", lambda v: (
            (v >= 0) & (v <= self.total_count) & (v == v.floor())))

    @property
    def mean(self) -> Tensor: return self.total_count * self.probs

    @property
    def variance(self) -> Tensor: return self.total_count * self.probs * (1.0 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        drawn = F.random_binomial(self.total_count.expand(*shape), self.probs.expand(*shape),
                                  sample_state(self.probs.device))
        return drawn.astype(self.probs.dtype)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = special.lgamma(n + 1.0)
        log_factorial_k = special.lgamma(value + 1.0)
        log_factorial_nmk = special.lgamma(n - value + 1.0)
        normalizer = n * F.softplus(logits)  # n log(1 + e^logits), smooth at logits = 0
        return (value * logits - normalizer + log_factorial_n - log_factorial_k
                - log_factorial_nmk)

    def entropy(self) -> Tensor:
        """The sum over the support ``0 .. total_count`` (one ``total_count``, as PyTorch's)."""
        most = int(self.total_count.max().item())
        if not bool((self.total_count == most).all().item()):
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`enumerate_support`.")
        values = arange(most + 1, device=self.probs.device).astype(self.probs.dtype)
        values = values.reshape((-1,) + (1,) * len(self.batch_shape))
        log_prob = self.log_prob(values)
        return -(log_prob.exp() * log_prob).sum(0)


class Multinomial(Distribution):
    """``torch.distributions.Multinomial(total_count=1, probs=None, logits=None)``: counts of
    ``total_count`` categorical draws (``event_shape`` ``(K,)``)."""

    arg_constraints = {"probs": D.simplex, "logits": D.real_vector}

    def __init__(self, total_count: int = 1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, (int, np.integer)):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = int(total_count)
        self._categorical = Categorical(probs, logits, validate_args)
        super().__init__(self._categorical.batch_shape, (self._categorical._num_events,),
                         validate_args=False)
        self._validate_args = self._categorical._validate_args

    @property
    def probs(self) -> Tensor: return self._categorical.probs

    @property
    def logits(self) -> Tensor: return self._categorical.logits

    @property
    def support(self) -> D.Constraint:
        return D.multinomial_support(self.total_count)

    @property
    def mean(self) -> Tensor: return self.probs * float(self.total_count)

    @property
    def variance(self) -> Tensor:
        return float(self.total_count) * self.probs * (1.0 - self.probs)

    def sample(self, sample_shape=()) -> Tensor:
        indices = self._categorical.sample((self.total_count,) + sample_shape_of(sample_shape))
        counts = F.one_hot(indices, self.event_shape[0]).astype(self.probs.dtype)
        return counts.sum(0)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        logits = self.logits
        terms = where((value == 0.0) & (logits == -math.inf), 0.0, value * logits)
        return (special.lgamma(value.sum(-1) + 1.0) - special.lgamma(value + 1.0).sum(-1)
                + terms.sum(-1))


class Poisson(Distribution):
    """``torch.distributions.Poisson(rate)``; draws are exact in law, on the device
    (:func:`gingham.nn.functional.random_poisson`)."""

    arg_constraints = {"rate": D.nonnegative}
    support = D.nonnegative_integer

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = as_tensors(rate)
        super().__init__(self.rate.shape, (), validate_args)

    @property
    def mean(self) -> Tensor: return self.rate

    @property
    def variance(self) -> Tensor: return self.rate

    @property
    def mode(self) -> Tensor: return self.rate.floor()

    def sample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        drawn = F.random_poisson(self.rate.expand(*shape), sample_state(self.rate.device))
        return drawn.astype(self.rate.dtype)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        rate, value = as_tensors(self.rate, value)
        return value.xlogy(rate) - rate - special.lgamma(value + 1.0)
