"""Distributions over vectors: Dirichlet, MultivariateNormal, and Independent (which turns
batch dims of any distribution into event dims)."""

from __future__ import annotations

import math

from .. import linalg
from ..frontend import special
from ..frontend.tensor import Tensor, broadcast_shapes
from ..nn import functional as F
from . import distribution as D
from .continuous import standard_gamma
from .distribution import Distribution, as_tensors, sample_state


class Dirichlet(Distribution):
    """``torch.distributions.Dirichlet(concentration)``: points of the simplex (the last dim
    of ``concentration``); draws are normalised Gamma draws (reparameterized).

        Dirichlet(gingham.tensor([0.5, 1.0, 2.0])).rsample((4,))   # [4, 3]
    """

    arg_constraints = {"concentration": D.Constraint(
        "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)",
        lambda v: (v > 0.0).all(-1), 1)}
    support = D.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args: bool | None = None) -> None:
        (self.concentration,) = as_tensors(concentration)
        if self.concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        shape = self.concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def variance(self) -> Tensor:
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (
            total.square() * (total + 1.0))

    def rsample(self, sample_shape=()) -> Tensor:
        draws = standard_gamma(self.concentration, sample_shape)
        return draws / draws.sum(-1, keepdim=True)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        a = self.concentration
        return ((a - 1.0).xlogy(value).sum(-1) + special.lgamma(a.sum(-1))
                - special.lgamma(a).sum(-1))

    def entropy(self) -> Tensor:
        a = self.concentration
        k = a.shape[-1]
        total = a.sum(-1)
        return (special.lgamma(a).sum(-1) - special.lgamma(total)
                - (k - total) * special.digamma(total)
                - ((a - 1.0) * special.digamma(a)).sum(-1))


class MultivariateNormal(Distribution):
    """``torch.distributions.MultivariateNormal(loc, covariance_matrix=None,
    precision_matrix=None, scale_tril=None)``: exactly one of the three; the others are derived
    through :func:`gingham.linalg.cholesky` (``scale_tril`` ``L`` with ``L L^T`` the
    covariance). ``log_prob`` solves with ``L`` (:func:`gingham.linalg.solve_triangular`).

        d = MultivariateNormal(gingham.zeros((2,)), covariance_matrix=cov)
        d.log_prob(d.rsample((100,)))
    """

    arg_constraints = {"loc": D.real_vector, "covariance_matrix": D.positive_definite,
                       "precision_matrix": D.positive_definite,
                       "scale_tril": D.lower_cholesky}
    support = D.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        matrix = given[0]
        if not isinstance(matrix, Tensor) or matrix.ndim < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at "
                             "least two-dimensional, with optional leading batch dimensions")
        (loc,) = as_tensors(loc, like=matrix)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        batch_shape = broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        n = loc.shape[-1]
        self.loc = loc.expand(*batch_shape, n)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch_shape, n, n)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch_shape, n, n)
        else:
            self.precision_matrix = precision_matrix.expand(*batch_shape, n, n)
        super().__init__(batch_shape, (n,), validate_args)
        if "scale_tril" not in self.__dict__:
            covariance = (self.covariance_matrix if covariance_matrix is not None
                          else linalg.inv(self.precision_matrix))
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance)
        else:
            self._unbroadcasted_scale_tril = self.scale_tril

    def __getattr__(self, name: str):
        # the parameterisations not given, derived when first read
        tril = self.__dict__.get("_unbroadcasted_scale_tril")
        if tril is None:
            raise AttributeError(name)
        if name == "scale_tril":
            return tril
        if name == "covariance_matrix":
            return tril @ tril.mT
        if name == "precision_matrix":
            return linalg.cholesky_inverse(tril)
        raise AttributeError(name)

    @property
    def mean(self) -> Tensor: return self.loc

    @property
    def mode(self) -> Tensor: return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.square().sum(-1)

    def rsample(self, sample_shape=()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        noise = F.random_normal(shape, sample_state(self.loc.device), self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ noise.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(0, -2, -1).log().sum(-1)

    def log_prob(self, value) -> Tensor:
        value = self._value(value)
        difference = value - self.loc
        tril = self._unbroadcasted_scale_tril
        batch = broadcast_shapes(difference.shape[:-1], tril.shape[:-2])
        n = self.event_shape[0]
        solved = linalg.solve_triangular(tril.expand(*batch, n, n),
                                         difference.expand(*batch, n).unsqueeze(-1),
                                         upper=False).squeeze(-1)
        mahalanobis = solved.square().sum(-1)
        return -0.5 * (n * math.log(2.0 * math.pi) + mahalanobis) - self._half_log_det()

    def entropy(self) -> Tensor:
        n = self.event_shape[0]
        value = 0.5 * n * (1.0 + math.log(2.0 * math.pi)) + self._half_log_det()
        return value.expand(*self.batch_shape) if self.batch_shape else value


class Independent(Distribution):
    """``torch.distributions.Independent(base_distribution, reinterpreted_batch_ndims)``: the
    last ``reinterpreted_batch_ndims`` batch dims of the base become event dims, so
    ``log_prob`` and ``entropy`` sum over them.

        Independent(Normal(loc, scale), 1)     # a diagonal Gaussian over loc's last dim
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int,
                 validate_args: bool | None = None) -> None:
        batch = base_distribution.batch_shape
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {reinterpreted_batch_ndims} vs "
                             f"{len(batch)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        split = len(batch) - reinterpreted_batch_ndims
        super().__init__(batch[:split], batch[split:] + base_distribution.event_shape,
                         validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def support(self):  # type: ignore[override]
        return self.base_dist.support

    @property
    def mean(self) -> Tensor: return self.base_dist.mean

    @property
    def variance(self) -> Tensor: return self.base_dist.variance

    def sample(self, sample_shape=()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def _summed(self, value: Tensor) -> Tensor:
        for _ in range(self.reinterpreted_batch_ndims):
            value = value.sum(-1)
        return value

    def log_prob(self, value) -> Tensor:
        return self._summed(self.base_dist.log_prob(value))

    def entropy(self) -> Tensor:
        return self._summed(self.base_dist.entropy())
