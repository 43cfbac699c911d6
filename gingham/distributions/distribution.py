"""The base of gingham's distributions (``torch.distributions.Distribution``) and the
constraints their parameters and values are checked against.

A distribution holds its parameters as tensors broadcast to its ``batch_shape``; every
method builds Tile ops on them (nothing is read back, except by ``validate_args`` checks).
Draws come from the device's default :class:`gingham.Generator` (``gingham.manual_seed``
seeds it), so a compiled step samples anew at every replay.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..frontend.tensor import Tensor, broadcast_tensors, tensor
from ..tile import dtypes as dt


class Constraint:
    """A set of valid values: ``check(value)`` is a bool tensor, elementwise over the batch
    (and reduced over ``event_dim`` trailing dims)."""

    event_dim = 0

    def __init__(self, name: str, check, event_dim: int = 0) -> None:
        self._name, self._check, self.event_dim = name, check, event_dim

    def check(self, value: Tensor) -> Tensor:
        return self._check(value)

    def __repr__(self) -> str:
        return self._name


def _is_integral(v: Tensor) -> Tensor:
    return v == v.floor()


real = Constraint("Real()", lambda v: v == v)
positive = Constraint("GreaterThan(lower_bound=0.0)", lambda v: v > 0.0)
nonnegative = Constraint("GreaterThanEq(lower_bound=0.0)", lambda v: v >= 0.0)
unit_interval = Constraint("Interval(lower_bound=0.0, upper_bound=1.0)",
                           lambda v: (v >= 0.0) & (v <= 1.0))
boolean = Constraint("Boolean()", lambda v: (v == 0) | (v == 1))
nonnegative_integer = Constraint("IntegerGreaterThan(lower_bound=0)",
                                 lambda v: (v >= 0) & _is_integral(v))
real_vector = Constraint("IndependentConstraint(Real(), 1)", lambda v: (v == v).all(-1), 1)
simplex = Constraint("Simplex()", lambda v: (v >= 0.0).all(-1) & (
    (v.sum(-1) - 1.0).abs() < 1e-6), 1)
lower_cholesky = Constraint("LowerCholesky()", lambda v: (
    (v.triu(1) == 0.0).all(-1).all(-1) & (v.diagonal(0, -2, -1) > 0.0).all(-1)), 2)
positive_definite = Constraint("PositiveDefinite()", lambda v: (
    (v - v.mT).abs().amax((-2, -1)) < 1e-6 * v.abs().amax((-2, -1)) + 1e-12), 2)


def integer_interval(low: int, high) -> Constraint:
    return Constraint(f"IntegerInterval(lower_bound={low}, upper_bound={high})",
                      lambda v: (v >= low) & (v <= high) & _is_integral(v))


def interval(low, high) -> Constraint:
    return Constraint("Interval()", lambda v: (v >= low) & (v <= high))


def half_open_interval(low, high) -> Constraint:
    return Constraint("Interval()", lambda v: (v >= low) & (v < high))


def greater_than(low) -> Constraint:
    return Constraint("GreaterThan()", lambda v: v > low)


def multinomial_support(total_count: int) -> Constraint:
    return Constraint(f"Multinomial(upper_bound={total_count})", lambda v: (
        (v >= 0).all(-1) & _is_integral(v).all(-1) & (v.sum(-1) <= total_count)), 1)


def as_tensors(*values, like: Tensor | None = None) -> tuple[Tensor, ...]:
    """Tensors and numbers as float tensors broadcast to one shape; numbers take the first
    tensor's dtype and device (float32 on the default device without one), as PyTorch's."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    base = tensors[0] if tensors else like
    dtype = base.dtype if base is not None and dt.is_float(base.dtype) else dt.FLOAT32
    device = base.device if base is not None else None
    converted = [v if isinstance(v, Tensor) and dt.is_float(v.dtype) else
                 v.astype(dtype) if isinstance(v, Tensor) else
                 tensor(np.asarray(v, dtype=dtype), device=device) for v in values]
    return broadcast_tensors(*converted)


def sample_shape_of(sample_shape) -> tuple[int, ...]:
    """A ``sample_shape`` argument (an int, a tuple, a ``torch.Size``-like) as a tuple."""
    if isinstance(sample_shape, (int, np.integer)):
        return (int(sample_shape),)
    return tuple(int(s) for s in sample_shape)


def sample_state(device: str) -> Tensor:
    """The next Philox state of ``device``'s default generator."""
    from ..frontend.sampling import _state

    return _state(None, device, "distributions")


class Distribution:
    """``torch.distributions.Distribution``: ``batch_shape`` (independent distributions,
    broadcast like the parameters) and ``event_shape`` (one draw's shape);
    ``sample``/``rsample(sample_shape)`` give ``sample_shape + batch_shape + event_shape``.

        d = gingham.distributions.Normal(gingham.zeros((3,)), 1.0)
        x = d.rsample((100,))          # [100, 3]
        d.log_prob(x).mean()
    """

    has_rsample = False
    arg_constraints: dict[str, Constraint] = {}
    support: Constraint | None = None
    _validate_default = True

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        self._validate_args = (Distribution._validate_default if validate_args is None
                               else validate_args)
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if name not in self.__dict__:
                    continue  # a derived parameterisation (probs from logits): not checked
                value = self.__dict__[name]
                if not _holds(constraint, value):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values")

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Whether distributions check their arguments unless told (True, as PyTorch's; each
        check reads one bool back from the device, so compiled steps may turn it off)."""
        Distribution._validate_default = bool(value)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> tuple[int, ...]:
        return sample_shape_of(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Draws of ``sample_shape + batch_shape + event_shape``, without gradients."""
        if self.has_rsample:
            from ..frontend.special import _stopped

            return _stopped(self.rsample(sample_shape))
        raise NotImplementedError(f"{type(self).__name__} has no sampler")

    def rsample(self, sample_shape: Sequence[int] = ()) -> Tensor:
        """Reparameterized draws: gradients flow to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler "
                                  "(rsample); use sample")

    def sample_n(self, n: int) -> Tensor:
        return self.sample((n,))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.cdf")

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.icdf")

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def _value(self, value) -> Tensor:
        """``value`` as a tensor, checked as PyTorch's ``_validate_sample``: its trailing dims
        are the event shape, the rest broadcasts with the batch shape, and (with
        ``validate_args``) it lies in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        if not self._validate_args:
            return value
        event_dims = len(self._event_shape)
        if tuple(value.shape[len(value.shape) - event_dims:]) != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{tuple(value.shape)} vs {self._event_shape}.")
        actual = value.shape[:len(value.shape) - event_dims]
        for i, j in zip(reversed(actual), reversed(self._batch_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{tuple(value.shape)} vs "
                                 f"{self._batch_shape + self._event_shape}.")
        support = self.support
        if support is not None and not _holds(support, value):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{tuple(value.shape)}) to be within the support "
                             f"({support!r}) of the distribution {self!r}, but found "
                             f"invalid values")
        return value

    def __repr__(self) -> str:
        names = [n for n in self.arg_constraints if n in self.__dict__]
        shown = ", ".join(f"{n}: {tuple(self.__dict__[n].shape)}" for n in names)
        return f"{type(self).__name__}({shown})"


def _holds(constraint: Constraint, value: Tensor) -> bool:
    """Whether every element satisfies the constraint (one bool read from the device)."""
    return bool(constraint.check(value).all().item())


LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
