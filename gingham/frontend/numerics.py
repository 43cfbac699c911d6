"""Two numerical helpers of PyTorch's namespace, composed of tensor ops (so they compile into a
step and Tile's autodiff gives their gradients): ``frexp``, the float decomposition that
``ldexp`` inverts, and ``gradient``, finite differences beside ``diff`` and ``trapezoid``.

    mantissa, exponent = gingham.frexp(x)          # x == mantissa * 2 ** exponent
    (dy_dx,) = gingham.gradient(y, spacing=0.1)
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from ..tile import dtypes as dt
from .tensor import (_BFLOAT16_FINFO, DTypeError, ShapeError, Tensor, _dim, cat, where)


class FrexpResult(NamedTuple):
    """What :func:`frexp` returns, as ``torch.return_types.frexp``."""

    mantissa: Tensor
    exponent: Tensor


def _times_power_of_two(x: Tensor, exponent: Tensor) -> Tensor:
    """``x * 2 ** exponent`` (an int32 ``exponent``) in two halves, so that neither factor
    overflows where the product does not (``2 ** 148`` is no float32, ``2 ** 74`` is): a
    subnormal's mantissa needs it. Integer powers of two are exact in ``2.0 ** e``."""
    half = exponent // 2
    first = 2.0 ** half.astype(x.dtype)
    second = 2.0 ** (exponent - half).astype(x.dtype)
    return x * first * second


def frexp(input: Tensor) -> FrexpResult:  # noqa: A002 (PyTorch's name)
    """``(mantissa, exponent)`` with ``input == mantissa * 2 ** exponent``, ``|mantissa|`` in
    ``[0.5, 1)`` and an int32 ``exponent``, as ``torch.frexp``; 0, infinities and NaN give
    themselves and exponent 0. The mantissa's gradient is ``2 ** -exponent``, as PyTorch's.

        gingham.frexp(gingham.tensor([8.0, -0.75]))  # mantissa [0.5, -0.75], exponent [4, 0]

    No bit casts: the exponent is ``floor(log2 |x|) + 1``, then moved by one where ``log2``
    rounded across a power of two (the mantissa landed on 1 or below 0.5); subnormals are
    scaled into the normal range first, since a device's ``log2`` may not resolve them.
    """
    op = "frexp"
    if not isinstance(input, Tensor) or not dt.is_float(input.dtype):
        kind = dt.dtype_name(input.dtype) if isinstance(input, Tensor) else type(input).__name__
        raise DTypeError(f"{op}: only floating-point tensors are supported, not {kind}")
    info = _BFLOAT16_FINFO if dt.is_bfloat16(input.dtype) else np.finfo(input.dtype)
    magnitude = input.detach().abs()
    regular = (magnitude > 0) & (magnitude <= float(info.max))  # not 0, inf or NaN
    magnitude = where(regular, magnitude, 1.0)
    boost = int(info.nmant) + 1  # 2 ** boost takes the smallest subnormal to a normal number
    subnormal = magnitude < float(info.smallest_normal)
    scaled = magnitude * where(subnormal, 2.0 ** boost, 1.0)  # (no overflow in the other branch)
    # (two numbers make an int64 where, as PyTorch's: cast, or the exponent would be int64)
    shift = where(subnormal, boost, 0).astype(dt.INT32)
    exponent = (scaled.log2().floor() + 1).astype(dt.INT32) - shift
    estimate = _times_power_of_two(magnitude, -exponent)
    exponent = exponent + (estimate >= 1).astype(dt.INT32) - (estimate < 0.5).astype(dt.INT32)
    exponent = where(regular, exponent, 0)
    mantissa = where(regular, _times_power_of_two(input, -exponent), input)
    return FrexpResult(mantissa, exponent)


# -- torch.gradient ---------------------------------------------------------------------------------


def _along(axis: int, ndim: int, values: Tensor) -> Tensor:
    """A 1-d ``values`` shaped to broadcast along ``axis`` of an ``ndim``-d tensor."""
    return values.reshape((1,) * axis + (-1,) + (1,) * (ndim - axis - 1))


def _ends(x: Tensor, axis: int) -> list[Tensor]:
    """The first three and the last three slices of ``x`` along ``axis`` (wrapped: of 2
    slices, the third from either end is the other end, which first order does not read)."""
    n = x.shape[axis]
    return [x.narrow(axis, k % n, 1) for k in (0, 1, 2, -3, -2, -1)]


def _joined(first: Tensor, center: Tensor | None, last: Tensor, axis: int) -> Tensor:
    return cat([first, last] if center is None else [first, center, last], axis)


def _uniform_gradient(x: Tensor, axis: int, step: float, edge_order: int) -> Tensor:
    """Central differences ``(x[i+1] - x[i-1]) / 2h`` inside; one-sided ones of first or
    second order at the two ends (PyTorch's ``gradient`` with a number as spacing)."""
    n = x.shape[axis]
    center = (x.narrow(axis, 2, n - 2) - x.narrow(axis, 0, n - 2)) / step / 2 if n > 2 else None
    x0, x1, x2, xm3, xm2, xm1 = _ends(x, axis)
    if edge_order == 1:
        first, last = (x1 - x0) / step, (xm1 - xm2) / step
    else:
        first = (x0 * -1.5 + x1 * 2 - x2 * 0.5) / step
        last = (xm3 * 0.5 + xm2 * -2 + xm1 * 1.5) / step
    return _joined(first, center, last, axis)


def _coordinate_gradient(x: Tensor, axis: int, coordinates: Tensor, edge_order: int) -> Tensor:
    """The same at the positions ``coordinates`` (1-d, one per element along ``axis``), with
    PyTorch's weights for unequal steps ``h1`` (left) and ``h2`` (right)."""
    n = x.shape[axis]
    if coordinates.ndim != 1 or coordinates.shape[0] != n:
        raise ShapeError(f"gradient: coordinates along dim {axis} must be 1-d with {n} entries "
                         f"(the dim's size), not of shape {coordinates.shape}")
    h = coordinates[1:] - coordinates[:-1]
    center = None
    if n > 2:
        h1, h2 = h[:-1], h[1:]
        a = _along(axis, x.ndim, -h2 / (h1 * (h1 + h2)))
        b = _along(axis, x.ndim, (h2 - h1) / (h1 * h2))
        c = _along(axis, x.ndim, h1 / (h2 * (h1 + h2)))
        center = (a * x.narrow(axis, 0, n - 2) + b * x.narrow(axis, 1, n - 2)
                  + c * x.narrow(axis, 2, n - 2))
    x0, x1, x2, xm3, xm2, xm1 = _ends(x, axis)
    if edge_order == 1:
        first, last = (x1 - x0) / h[0], (xm1 - xm2) / h[-1]
    else:
        h_0, h_1, h_m1, h_m2 = h[0], h[1], h[-1], h[-2]
        first = (-(2.0 * h_0 + h_1) / (h_0 * (h_0 + h_1)) * x0
                 + (h_0 + h_1) / (h_0 * h_1) * x1 - h_0 / (h_1 * (h_0 + h_1)) * x2)
        last = (h_m1 / (h_m2 * (h_m1 + h_m2)) * xm3 - (h_m1 + h_m2) / (h_m1 * h_m2) * xm2
                + (2.0 * h_m1 + h_m2) / (h_m1 * (h_m1 + h_m2)) * xm1)
    return _joined(first, center, last, axis)


def gradient(input: Tensor, *, spacing=1, dim=None,  # noqa: A002 (PyTorch's names)
             edge_order: int = 1) -> tuple[Tensor, ...]:
    """The derivative of the samples ``input`` along each of ``dim`` (an int, a list, or all
    dims when None), one tensor per dim, as ``torch.gradient``: central differences inside,
    one-sided differences of order ``edge_order`` (1 or 2) at the ends. ``spacing`` is the
    distance between samples: a number for every dim, a list of numbers (one per dim), or a
    list of 1-d tensors of the samples' coordinates (one per dim; unequal steps allowed).
    Integer input gives float32. Differentiable in ``input`` and the coordinates.

        dy_dt, dy_dx = gingham.gradient(y, spacing=(0.5, 0.1))
        (dy_dx,) = gingham.gradient(y, spacing=[x], dim=1)
    """
    op = "gradient"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a gingham Tensor, not {type(input).__name__}")
    if edge_order not in (1, 2):
        raise ValueError(f"{op}: only edge_order=1 and edge_order=2 are supported, not "
                         f"{edge_order}")
    named = range(input.ndim) if dim is None else [dim] if isinstance(
        dim, (int, np.integer)) else list(dim)
    axes = [_dim(op, input.shape, d) for d in named]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: dim {list(named)} names a dim more than once")
    steps = _spacings(op, spacing, len(axes), dim is None)
    x = input if dt.is_float(input.dtype) else input.astype(dt.FLOAT32)
    results = []
    for axis, step in zip(axes, steps):
        if x.shape[axis] < edge_order + 1:
            raise ShapeError(f"{op}: dim {axis} of size {x.shape[axis]} needs at least "
                             f"edge_order + 1 = {edge_order + 1} samples")
        results.append(_coordinate_gradient(x, axis, step, edge_order) if isinstance(
            step, Tensor) else _uniform_gradient(x, axis, float(step), edge_order))
    return tuple(results)


def _spacings(op: str, spacing, count: int, all_dims: bool) -> Sequence:
    """One spacing per dim: a number repeated, or the list given (numbers or tensors, not a
    mix), whose length must be the number of dims."""
    if isinstance(spacing, Tensor):
        raise TypeError(f"{op}: spacing must be a number or a list (of numbers or of 1-d "
                        "coordinate tensors), not a tensor")
    if not isinstance(spacing, (list, tuple)):
        return [spacing] * count
    if len(spacing) != count:
        dims = "the input's dims" if all_dims else "dim"
        raise ValueError(f"{op}: spacing must be a number or a list of one entry per dim of "
                         f"{dims} ({count}), not a list of {len(spacing)}")
    if len({isinstance(s, Tensor) for s in spacing}) > 1:
        raise TypeError(f"{op}: spacing must hold numbers or tensors, not a mix of them")
    return list(spacing)


__all__ = ["FrexpResult", "frexp", "gradient"]
