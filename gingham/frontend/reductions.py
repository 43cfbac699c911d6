"""Reductions along dims, and the statistics built on them.

A reduction is one Tile aggregation over the reduced indices (``O[i] = +(X[i, j])``, ``>`` for
a max, ``*`` for a product), its gradient Tile's; a running one (``cumsum``, ``cummax``) adds
an index ``k`` and reads ``X[i - k]``, dropping the taps before the start. Arg-extremes,
variances, covariances, correlations and the trapezoidal rule compose these, with PyTorch's
conventions for ties, NaNs, ``correction`` and empty dims. The Tensor methods (``x.sum(1)``,
``x.max(dim=0)``, ``x.var()``) call these.

    _reduce(x, "+", (0, 2), keepdims=True)     # x.sum((0, 2), keepdim=True)
    gingham.cov(samples.T)
"""

from __future__ import annotations

import math

import numpy as np

from ..tile import builder
from ..tile import dtypes as dt
from .contractions import einsum, matmul
from .dims import ShapeError, _axes, _dim, _dim_arguments, _none_if_empty
from .elementwise import _autocast_float32, _floating, maximum, minimum, where
from .layout import reshape
from .promotion import PromotionError
from .tensor import Tensor, ValuesIndices, arange, zeros


def _reduce(x: Tensor, agg: str, axis, keepdims: bool, op: str = "reduce") -> Tensor:
    axes = _axes(op, x.shape, axis)
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim))) if x.ndim else ()
    out_index, out_shape = [], []
    for a in range(x.ndim):
        if a in axes:
            if keepdims:
                out_index.append(0)
                out_shape.append(1)
        else:
            out_index.append(idx[a])
            out_shape.append(x.shape[a])
    dtype = x.dtype
    if agg == "+" and dt.is_bool(dtype):
        dtype = dt.INT32
    make = {"+": builder.sum, "*": builder.prod, ">": builder.max, "<": builder.min}[agg]

    def build(nodes):
        (node,) = nodes
        return make(node[tuple(idx)] if idx else node[()], out=out_index, shape=out_shape)

    return x._derive(tuple(out_shape), dtype, [x], build, op)


def _accumulating(x: Tensor, dtype=None) -> Tensor:
    """``x`` in the dtype a sum or a product of it accumulates in: ``dtype`` when given, else
    int64 for bools and integers (PyTorch's: ``int32_tensor.sum()`` is int64, which does not
    wrap around where int32 would), else its own.

        _accumulating(counts).sum()      # int64 for an int32 ``counts``
    """
    if dtype is not None:
        return x.astype(dtype)
    return x if dt.is_float(x.dtype) or x.dtype == dt.INT64 else x.astype(dt.INT64)


def _cumulative(x: Tensor, agg: str, dim: int, dtype, op: str) -> Tensor:
    """``O[..., i, ...] = agg(X[..., i - k, ...]), k < N`` along ``dim`` (see cumsum)."""
    dim = _dim(op, x.shape, dim)
    x = _autocast_float32(_accumulating(x, dtype))
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim)))
    (k,) = builder.indices("k")
    read = list(idx)
    read[dim] = idx[dim] - k
    make = {"+": builder.sum, "*": builder.prod, ">": builder.max, "<": builder.min}[agg]
    return x._derive(x.shape, x.dtype, [x], lambda nodes: make(
        nodes[0][tuple(read)], out=list(idx), shape=list(x.shape), where=[k < x.shape[dim]]))


def _arg_extreme(x: Tensor, agg: str, op: str, dim, keepdim: bool) -> Tensor:
    """The int64 position along ``dim`` of the first element equal to the max (``agg`` ``>``)
    or the min (``<``), or of the first NaN (PyTorch's argmax takes NaN for the largest and
    the smallest): the least position where ``x`` is the extreme or NaN, others counting as
    the dim's size."""
    if dim is None:
        flat = _arg_extreme(reshape(x, (x.numel(),), op), agg, op, 0, False)
        return reshape(flat, (1,) * x.ndim, op) if keepdim else flat
    axis = _dim(op, x.shape, dim)
    if x.ndim == 0:  # PyTorch's answer for a 0-d tensor: 0, 0-d whatever keepdim says
        return reshape(_arg_extreme(reshape(x, (1,), op), agg, op, 0, False), (), op)
    size = x.shape[axis]
    if size == 0:
        raise ShapeError(f"{op}: dim {dim} of shape {x.shape} is empty (no {op} exists)")
    extreme = _reduce(x, agg, axis, True, op)  # NaN where the row holds one

    def candidate(values, extremes):
        hit = builder.logical_or(values.eq(extremes), values.ne(values))
        return builder.select(hit, builder.index(values, axis), size)

    positions = x._elementwise(candidate, [extreme], op, dt.INT32)
    first = _reduce(positions, "<", axis, keepdim, op)
    return first.astype(dt.INT64)


def _max_or_min(x: Tensor, agg: str, op: str, dim, keepdim: bool, axis, keepdims):
    """``Tensor.max``/``Tensor.min``: see :meth:`Tensor.max`."""
    if isinstance(dim, Tensor):  # x.max(other): PyTorch's maximum
        return maximum(x, dim) if agg == ">" else minimum(x, dim)
    numpy_spelling = axis is not None or keepdims is not None
    dims, keep = _dim_arguments(op, dim, keepdim, axis, keepdims)
    if numpy_spelling or dims is None:
        return _reduce(x, agg, dims, keep, op)
    if not isinstance(dims, (int, np.integer)):
        raise TypeError(f"{op}: dim must be one int (for values and indices), not {dims!r}; "
                        f"amax/amin take several")
    values = _reduce(x, agg, dims, keep, op)
    return ValuesIndices(values, _arg_extreme(x, agg, op, dims, keep))


def _variance(x: Tensor, op: str, dim, unbiased: bool | None, keepdim: bool,
              correction: float | None) -> Tensor:
    """Tensor.var's value (std's square): see :meth:`Tensor.var`."""
    if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}: give unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if not dt.is_float(x.dtype):
        raise PromotionError(f"{op}: needs a floating-point tensor, not "
                             f"{dt.dtype_name(x.dtype)} (as PyTorch's)")
    axes = _axes(op, x.shape, _none_if_empty(dim))
    count = math.prod(x.shape[a] for a in axes)
    data = x.astype(dt.FLOAT32) if dt.is_half(x.dtype) else x  # half types sum in float32
    centred = data - data.mean(axes, keepdim=True)
    squares = centred.square().sum(axes, keepdim)
    divisor = max(count - correction, 0)
    # PyTorch divides by max(N - correction, 0): 0 / 0 is NaN and a positive sum / 0 is inf.
    variance = squares * (1.0 / divisor if divisor else math.inf)
    return variance._in_dtype(x.dtype)


def _running_extreme(x: Tensor, agg: str, dim: int, op: str) -> ValuesIndices:
    """cummax/cummin: the running extreme's last position ``j <= i`` along ``dim`` (one
    ``n x n`` comparison per fiber), and the values gathered from there, so gradients go
    where PyTorch's go."""
    from . import indexing

    axis = _dim(op, x.shape, dim)
    if x.ndim == 0:
        return ValuesIndices(x.clone(), zeros((), dt.INT64, x.device))
    running = _cumulative(x.detach() if x.requires_grad else x, agg, axis, x.dtype, op)
    n = x.shape[axis]
    j = reshape(arange(n, device=x.device), (1,) * axis + (1, n) + (1,) * (x.ndim - axis - 1))
    i = j.transpose(axis, axis + 1)
    hit = (x.unsqueeze(axis) == running.unsqueeze(axis + 1)) & (j <= i)
    indices = where(hit, j, -1).amax(axis + 1).astype(dt.INT64)
    return ValuesIndices(indexing.gather(x, axis, indices), indices)


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,  # noqa: A002
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows (observations in its
    columns; a 1-d tensor is one variable, giving a 0-d result), with frequency and
    observation weights, as ``torch.cov`` (and ``numpy.cov``).

        gingham.cov(samples.T)       # samples [N, D] -> [D, D]
    """
    if input.ndim > 2:
        raise ShapeError(f"cov: input must have at most 2 dims, not shape {input.shape}")
    x = _floating(input if input.ndim == 2 else reshape(input, (1, -1), "cov"))
    weights = None
    for given in (fweights, aweights):
        if given is not None:
            weights = given.astype(x.dtype) if weights is None else weights * given
    if weights is None:
        total = float(x.shape[1])
        average = x.mean(1, keepdim=True)
        norm = total - correction
        centered = x - average
        result = (centered @ centered.T) / float(norm)
    else:
        total = weights.sum()
        average = (x * weights).sum(1, keepdim=True) / total
        if aweights is None or correction == 0:
            norm = total - correction
        else:
            norm = total - correction * (weights * aweights).sum() / total
        centered = x - average
        result = ((centered * weights) @ centered.T) / norm.clamp(min=0.0)
    return result.squeeze() if input.ndim < 2 else result


def corrcoef(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """Pearson's correlation coefficients of the rows of ``input`` (each row a variable,
    each column an observation; a 1-d input is one variable), as ``torch.corrcoef``: the
    covariance over the outer product of the standard deviations, clipped to [-1, 1].
    Differentiable.

        gingham.corrcoef(gingham.tensor([[1.0, 2.0, 3.0], [3.0, 1.0, 2.0]]))  # [[1, -.5], ...]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"corrcoef: input must be a gingham.Tensor, not {type(input).__name__}")
    if input.ndim > 2:
        raise ValueError(f"corrcoef: input must be 1-d or 2-d, not of shape {input.shape}")
    x = _floating(input, autocast=True)
    x = x.reshape(1, -1) if x.ndim < 2 else x
    centred = x - x.mean(1, keepdim=True)
    covariance = matmul(centred, centred.transpose(0, 1))
    deviation = einsum("ii->i", covariance).sqrt()
    ratio = covariance / deviation.unsqueeze(1) / deviation.unsqueeze(0)
    ratio = ratio.clamp(-1.0, 1.0)
    return ratio.reshape(()) if input.ndim < 2 else ratio


def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` along ``dim``, as ``torch.var_mean``."""
    return (input.var(dim, unbiased, keepdim, correction=correction),
            input.mean(_none_if_empty(dim), keepdim))


def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple[Tensor, Tensor]:
    return (input.std(dim, unbiased, keepdim, correction=correction),
            input.mean(_none_if_empty(dim), keepdim))


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
              dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: spacing ``dx`` (1) or the sample points ``x``, as
    ``torch.trapezoid``."""
    axis = _dim("trapezoid", y.shape, dim)
    return _trapezoid_areas(y, x, dx, axis).sum(axis)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one element fewer)."""
    axis = _dim("cumulative_trapezoid", y.shape, dim)
    return _trapezoid_areas(y, x, dx, axis).cumsum(axis)


def _trapezoid_areas(y: Tensor, x: Tensor | None, dx: float | None, axis: int) -> Tensor:
    n = y.shape[axis]
    pairs = y.narrow(axis, 0, n - 1) + y.narrow(axis, 1, n - 1)
    if x is None:
        return pairs * ((1.0 if dx is None else dx) * 0.5)
    steps = x.diff(dim=-1 if x.ndim == 1 else axis)
    if x.ndim == 1:
        steps = reshape(steps, (n - 1,) + (1,) * (y.ndim - axis - 1), "trapezoid")
    return pairs * steps * 0.5


trapz = trapezoid
