"""``keras.ops.math`` on gingham tensors: rsqrt, erf, logsumexp, segment_sum (the rest
raises NotImplementedError)."""

from __future__ import annotations

import numpy as np

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


__getattr__ = unsupported_module_getattr(__name__, "math")
