"""``kl_divergence(p, q)``: closed forms registered per pair of types, as
``torch.distributions.kl`` (the pairs PyTorch registers among gingham's distributions).

    kl_divergence(Normal(0.0, 1.0), Normal(1.0, 2.0))
"""

from __future__ import annotations

import math
from typing import Callable

from .. import linalg
from ..frontend import special
from ..frontend.tensor import Tensor, broadcast_shapes, where
from ..nn import functional as F
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .multivariate import Dirichlet, Independent, MultivariateNormal

_KL: dict[tuple[type, type], Callable] = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """A decorator registering ``fn(p, q)`` as ``kl_divergence`` of the pair of types."""

    def register(fn: Callable) -> Callable:
        _KL[type_p, type_q] = fn
        return fn

    return register


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p || q)``, batched over the distributions' broadcast batch shape; the most
    specific registered pair of (super)types, as PyTorch's dispatch."""
    for type_p in type(p).__mro__:
        for type_q in type(q).__mro__:
            if (type_p, type_q) in _KL:
                return _KL[type_p, type_q](p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p = {type(p).__name__}, "
                              f"q = {type(q).__name__}")


def _infinite_where(condition: Tensor, value: Tensor) -> Tensor:
    return where(condition, math.inf, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    ratio = (p.scale / q.scale).square()
    gap = ((p.loc - q.loc) / q.scale).square()
    return 0.5 * (ratio + gap - 1.0 - ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    first = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    first = where(p.probs == 0.0, 0.0, where(q.probs == 0.0, math.inf, first))
    second = (1.0 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    second = where(p.probs == 1.0, 0.0, where(q.probs == 1.0, math.inf, second))
    return first + second


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    terms = p.probs * (p.logits - q.logits)
    terms = where(q.probs == 0.0, math.inf, terms)
    return where(p.probs == 0.0, 0.0, terms).sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    value = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where((q.low > p.low) | (q.high < p.high), value)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1.0


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    ratio = p.scale / q.scale
    gap = (p.loc - q.loc).abs()
    return -ratio.log() + gap / q.scale + ratio * (-gap / p.scale).exp() - 1.0


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    a, b = p.concentration, p.rate
    c, d = q.concentration, q.rate
    return (c * (b / d).log() + special.lgamma(c) - special.lgamma(a)
            + (a - c) * special.digamma(a) + (d - b) * (a / b))


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    a1, b1 = p.concentration1, p.concentration0
    a2, b2 = q.concentration1, q.concentration0
    total = a1 + b1
    t1 = special.lgamma(a2) + special.lgamma(b2) + special.lgamma(total)
    t2 = special.lgamma(a1) + special.lgamma(b1) + special.lgamma(a2 + b2)
    t3 = (a1 - a2) * special.digamma(a1)
    t4 = (b1 - b2) * special.digamma(b1)
    t5 = (a2 + b2 - total) * special.digamma(total)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    a, b = p.concentration, q.concentration
    total = a.sum(-1)
    t1 = special.lgamma(total) - special.lgamma(b.sum(-1))
    t2 = (special.lgamma(b) - special.lgamma(a)).sum(-1)
    t3 = ((a - b) * (special.digamma(a) - special.digamma(total).unsqueeze(-1))).sum(-1)
    return t1 + t2 + t3


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any().item()):
        raise NotImplementedError("KL between Binomials where q.total_count > "
                                  "p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits)
                          + (-p.probs).log1p() - (-q.probs).log1p())
    return _infinite_where(p.total_count > q.total_count, kl)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    n = p.event_shape[0]
    p_tril, q_tril = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_log_det = q._half_log_det() - p._half_log_det()
    batch = broadcast_shapes(p_tril.shape[:-2], q_tril.shape[:-2], p.loc.shape[:-1],
                             q.loc.shape[:-1])
    q_full = q_tril.expand(*batch, n, n)
    trace = linalg.solve_triangular(q_full, p_tril.expand(*batch, n, n),
                                    upper=False).square().sum((-2, -1))
    gap = linalg.solve_triangular(q_full, (q.loc - p.loc).expand(*batch, n).unsqueeze(-1),
                                  upper=False).square().sum((-2, -1))
    return half_log_det + 0.5 * (trace + gap - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different "
                                  "reinterpreted_batch_ndims is not implemented")
    return p._summed(kl_divergence(p.base_dist, q.base_dist))


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Tensor:
    width = p.high - p.low
    t1 = (math.sqrt(math.pi * 2.0) * q.scale / width).log()
    t2 = width.square() / 12.0
    t3 = ((p.high + p.low - 2.0 * q.loc) / 2.0).square()
    return t1 + 0.5 * (t2 + t3) / q.scale.square()


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> Tensor:
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return (t1 + ratio + special.lgamma(q.concentration)
            + q.concentration * _EULER - (1.0 + _EULER))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.mean


_EULER = 0.5772156649015329
