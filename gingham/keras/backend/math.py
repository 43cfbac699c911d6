"""``keras.ops.math`` on gingham tensors: rsqrt, erf, logsumexp, logdet, segment_sum (the rest
raises NotImplementedError)."""

from __future__ import annotations

import math as pymath

import numpy as np

from ... import linalg
from ...frontend import tensor as gt
from ...frontend.jit import current_trace
from ...frontend.tensor import tensor, where
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor, scatter, stop_gradient
from .numpy import _float


def rsqrt(x): return _float(x).rsqrt()
def erf(x): return _float(x).erf()
def erfc(x): return 1.0 - _float(x).erf()


def logsumexp(x, axis=None, keepdims=False):
    x = _float(convert_to_tensor(x))
    shift = stop_gradient(x.amax(axis, keepdim=True))
    total = (x - shift).exp().sum(dim=axis, keepdim=True).log() + shift
    return total if keepdims else total.squeeze(axis)


def logdet(x):
    """``log(det(x))`` of square matrices (NaN where the determinant is negative), from
    gingham.linalg's LU factorisation."""
    return linalg.logdet(_float(x))


def segment_sum(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    """``data``'s rows summed per segment id (ids outside ``[0, num_segments)``, such as
    -1, are dropped): Tile's scatter, differentiable in ``data``. Without ``num_segments``
    the count is read from the ids, so only outside a compiled step."""
    data = convert_to_tensor(data)
    segment_ids = convert_to_tensor(segment_ids)
    if num_segments is None:
        if current_trace() is not None:
            raise NotImplementedError("math.segment_sum without num_segments inside a compiled "
                                      "step is not implemented by gingham's Keras backend (its "
                                      "shape would depend on the ids)")
        num_segments = int(np.max(convert_to_numpy(segment_ids))) + 1
    positions = segment_ids.reshape(segment_ids.shape + (1,))
    return scatter(positions, data, (int(num_segments),) + data.shape[segment_ids.ndim:])


# --- indexing ops ---


def top_k(x, k, sorted=True):  # noqa: A002 (Keras' name)
    """``(values, indices)`` of the ``k`` largest along the last axis, int32 indices, in
    order whatever ``sorted`` says (of equal values the first comes first):
    :func:`gingham.topk`, ``n^2`` compares per row."""
    from ...frontend import indexing

    values, indices = indexing.topk(convert_to_tensor(x), int(k), -1)
    return values, indices.astype(np.int32)


def in_top_k(targets, predictions, k):
    """Whether each row's target class scores at least its ``k``-th largest prediction
    (ties with the ``k``-th count as in, as Keras' other backends)."""
    from ...frontend import indexing

    predictions = convert_to_tensor(predictions)
    targets = convert_to_tensor(targets).astype(np.int64).reshape(-1, 1)
    kth = indexing.topk(predictions, int(k), -1).values[:, -1:]
    chosen = indexing.take_along_dim(predictions, targets, -1)
    return (chosen >= kth).reshape(-1)


def _segment_reduce(data, segment_ids, num_segments, agg: str, op: str):
    """Each segment's rows reduced by ``agg``: the rows of ``data`` where the segment's id is
    not found read as the identity (``[segments, rows, ...]`` values), then one reduction over
    the rows. A segment with no row holds the identity: -inf for max, inf for min (the
    integer limits for integers), 1 for prod, as JAX's."""
    data = convert_to_tensor(data)
    segment_ids = convert_to_tensor(segment_ids)
    if segment_ids.ndim != 1:
        raise ValueError(f"math.{op}: segment_ids must be 1-d, not of shape {segment_ids.shape}")
    if num_segments is None:
        if current_trace() is not None:
            raise NotImplementedError(f"math.{op} without num_segments inside a compiled step "
                                      "is not implemented by gingham's Keras backend (its shape "
                                      "would depend on the ids)")
        num_segments = int(np.max(convert_to_numpy(segment_ids))) + 1
    count, rows = int(num_segments), data.shape[0]
    segments = tensor(np.arange(count, dtype=np.int64), device=data.device)
    member = segment_ids.astype(np.int64).reshape(1, rows) == segments.reshape(count, 1)
    member = member.reshape((count, rows) + (1,) * (data.ndim - 1))
    if agg == "*":
        identity = 1
    else:
        limits = np.finfo if np.issubdtype(data.dtype, np.floating) else np.iinfo
        lowest = -np.inf if limits is np.finfo else limits(data.dtype).min
        highest = np.inf if limits is np.finfo else limits(data.dtype).max
        identity = lowest if agg == ">" else highest
    spread = where(member, data.reshape((1,) + data.shape), identity)
    if agg == ">":
        return spread.amax(1)
    if agg == "<":
        return spread.amin(1)
    return spread.prod(1)


def segment_max(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_reduce(data, segment_ids, num_segments, ">", "segment_max")


def segment_min(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_reduce(data, segment_ids, num_segments, "<", "segment_min")


def segment_prod(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_reduce(data, segment_ids, num_segments, "*", "segment_prod")


# --- elementwise math and reductions ops ---
# Giles' single-precision approximation of erfinv ("Approximating the erfinv function", GPU
# Computing Gems, 2011): a polynomial in w = -log(1 - y^2), one for w < 5 and one in sqrt(w).
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    value = coefficients[0]
    for c in coefficients[1:]:
        value = value * w + c
    return value


def erfinv(x):
    """The inverse of erf on (-1, 1), +-inf at +-1, NaN beyond: Giles' approximation refined by
    two Newton steps on Tile's erf (so the value is erf's inverse to float32's precision and
    the gradient, through the last step, is ``sqrt(pi) / 2 * exp(erfinv(x)^2)``)."""
    y = _float(convert_to_tensor(x))
    edge = y.abs() == 1.0
    inner = gt.where(edge, 0.0, y)  # the steps divide by erf' (0 at +-inf): not at the edges
    w = -((1.0 - inner) * (1.0 + inner)).log()
    central = _horner(_ERFINV_CENTRAL, w - 2.5)
    tail = _horner(_ERFINV_TAIL, gt.where(w < 5.0, 5.0, w).sqrt() - 3.0)
    guess = gt.where(w < 5.0, central, tail) * inner
    for _ in range(2):
        slope = (-guess.square()).exp() * (2.0 / pymath.sqrt(pymath.pi))
        guess = guess - (guess.erf() - inner) / slope
    # +-inf as constants: y * inf would send 0 * inf = NaN into y's gradient
    return gt.where(edge, gt.where(y > 0, pymath.inf, -pymath.inf), guess)


def cdist(x1, x2):
    """The Euclidean distances between the rows of ``x1`` and of ``x2`` (``[..., n, d]`` and
    ``[..., m, d]`` give ``[..., n, m]``, batch dims broadcast)."""
    a, b = convert_to_tensor(x1), convert_to_tensor(x2)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("`cdist` inputs must have rank >= 2")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError("Last dimension of inputs to `cdist` must match")
    difference = a.unsqueeze(-2) - b.unsqueeze(-3)
    return difference.square().sum(-1).sqrt()


__getattr__ = unsupported_module_getattr(__name__, "math")
