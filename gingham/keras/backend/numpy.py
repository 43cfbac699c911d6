"""``keras.ops.numpy`` on gingham tensors: each op is gingham's own (lazy, differentiable,
compiled with the rest of the step), with Keras' dtype rules (``keras.backend.result_type``:
Python numbers are weak, so ``float16_tensor * 0.5`` stays float16).

    x = keras.ops.convert_to_tensor(np.arange(6.0).reshape(2, 3))
    keras.ops.sum(keras.ops.square(x), axis=1)          # a gingham Tensor
"""

from __future__ import annotations

import builtins
import math as pymath

import numpy as np

from keras.src.backend.common import dtypes
from keras.src.backend.common import standardize_dtype
from keras.src.backend.config import floatx

from ... import linalg as _linalg
from ...frontend import tensor as gt
from ...frontend.tensor import Tensor
from ...nn import functional as F
from ._unsupported import unsupported_module_getattr
from ...frontend.jit import current_trace
from .core import (
    convert_to_numpy,
    convert_to_tensor,
    current_device,
    keras_dtype,
    to_numpy_dtype,
)

_SCALARS = (bool, int, float)
# this module defines NumPy's max, min and abs
builtins_max, builtins_min, builtins_abs = builtins.max, builtins.min, builtins.abs


# -- dtype rules ---------------------------------------------------------------------------------


def _scalar(x):
    """A NumPy scalar as the Python number it holds (weak in Keras' rules, as a literal)."""
    return x.item() if isinstance(x, np.generic) and x.ndim == 0 else x


def _dtype_of(x):
    # a subclass (a tensor's size, an IntEnum) is the number it holds; bool before int
    for kind in _SCALARS:
        if isinstance(x, kind):
            return kind
    return getattr(x, "dtype", None) or type(x)


def _promote(*operands):
    """The operands in Keras' result dtype: tensors cast, Python numbers left as they are
    (a weak number then takes the tensors' dtype in gingham's arithmetic as well)."""
    # a (nested) list is an array of Keras' inferred dtype, as convert_to_tensor makes it
    operands = [convert_to_tensor(x) if isinstance(x, (list, tuple)) else _scalar(x)
                for x in operands]
    dtype = dtypes.result_type(*[_dtype_of(x) for x in operands])
    return dtype, [x if isinstance(x, _SCALARS) else convert_to_tensor(x, dtype)
                   for x in operands]


def _binary(x1, x2, op, commutative: bool = False):
    dtype, (a, b) = _promote(x1, x2)
    if not isinstance(a, Tensor):
        if not isinstance(b, Tensor):
            a = convert_to_tensor(a, dtype)
        elif commutative:
            a, b = b, a
        # else: a number on the left of an arithmetic operator: Tensor's reflected operator
    return _cast(op(a, b), dtype)


def _cast(x: Tensor, dtype) -> Tensor:
    return x if keras_dtype(x) == standardize_dtype(dtype) else x.astype(to_numpy_dtype(dtype))


def _float(x) -> Tensor:
    """``x`` as a tensor in a float dtype (integers and bools become Keras' float)."""
    x = convert_to_tensor(x)
    dtype = keras_dtype(x)
    if "float" in dtype:
        return x
    return _cast(x, dtypes.result_type(dtype, float))


def _axis(axis):
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return tuple(int(a) for a in axis) if len(axis) else None
    return int(axis)


# -- elementwise arithmetic -------------------------------------------------------------------------


def add(x1, x2): return _binary(x1, x2, lambda a, b: a + b)
def subtract(x1, x2): return _binary(x1, x2, lambda a, b: a - b)
def multiply(x1, x2): return _binary(x1, x2, lambda a, b: a * b)
def maximum(x1, x2): return _binary(x1, x2, gt.maximum, commutative=True)
def minimum(x1, x2): return _binary(x1, x2, gt.minimum, commutative=True)


def mod(x1, x2): return _binary(x1, x2, lambda a, b: a % b)
def floor_divide(x1, x2): return _binary(x1, x2, lambda a, b: a // b)


def divide(x1, x2):
    dtype = dtypes.result_type(_dtype_of(x1), _dtype_of(x2), float)
    a = x1 if isinstance(x1, _SCALARS) else convert_to_tensor(x1, dtype)
    b = x2 if isinstance(x2, _SCALARS) else convert_to_tensor(x2, dtype)
    if not isinstance(a, Tensor):
        a = convert_to_tensor(a, dtype)
    return _cast(a / b, dtype)


true_divide = divide


def divide_no_nan(x1, x2):
    dtype = dtypes.result_type(_dtype_of(x1), _dtype_of(x2), float)
    a, b = convert_to_tensor(x1, dtype), convert_to_tensor(x2, dtype)
    safe = gt.where(b == 0, 1.0, b)
    return _cast(gt.where(b == 0, 0.0, a / safe), dtype)


def power(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    if not isinstance(a, Tensor):
        a = convert_to_tensor(a, dtype)
    if "int" in dtype:  # Tile's pow computes in floating point
        return _cast(_cast(a, "float32") ** (b if isinstance(b, _SCALARS)
                                              else _cast(b, "float32")), dtype)
    return _cast(a ** b, dtype)


def negative(x): return -convert_to_tensor(x)
def abs(x): return convert_to_tensor(x).abs()  # noqa: A001 (Keras' name)


absolute = abs


def square(x):
    x = convert_to_tensor(x)
    if keras_dtype(x) == "bool":
        x = _cast(x, "int32")
    return x.square()


def _unary_float(name):
    def op(x):
        return getattr(_float(x), name)()
    op.__name__ = name
    return op


sqrt = _unary_float("sqrt")
exp = _unary_float("exp")
log = _unary_float("log")
tanh = _unary_float("tanh")
sin = _unary_float("sin")
cos = _unary_float("cos")
reciprocal = _unary_float("reciprocal")


def log1p(x): return _float(x).log1p()
def expm1(x): return _float(x).expm1()
def log2(x): return _float(x).log2()
def log10(x): return _float(x).log10()
def tan(x): return _float(x).tan()
def sign(x): return convert_to_tensor(x).sign()
def floor(x): return _float(x).floor()
def ceil(x): return _float(x).ceil()


def round(x, decimals=0):  # noqa: A001
    return convert_to_tensor(x).round(decimals)


def clip(x, x_min, x_max):
    x = convert_to_tensor(x)
    if keras_dtype(x) == "bool":
        x = _cast(x, "int32")
    return x.clamp(x_min, x_max)


def matmul(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return _cast(gt.matmul(convert_to_tensor(a, dtype), convert_to_tensor(b, dtype)), dtype)


def dot(x1, x2):
    """NumPy's ``dot``: beyond matrices, the sum over ``x1``'s last axis and ``x2``'s
    second-to-last, ``[*a, k] . [*b, k, n] -> [*a, *b, n]`` (one :func:`gingham.einsum`)."""
    a, b = convert_to_tensor(x1), convert_to_tensor(x2)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    if b.ndim <= 2:  # a matrix product (or matrix-vector) over a's leading axes
        return matmul(a, b)
    letters = "abcdefghijklmnopqrstuvwxy"
    left = letters[:a.ndim - 1] + "z"
    right = letters[a.ndim - 1:a.ndim + b.ndim - 3] + "z" + letters[a.ndim + b.ndim - 3]
    output = left[:-1] + right.replace("z", "")
    return einsum(f"{left},{right}->{output}", a, b)


def einsum(subscripts, *operands, **kwargs):
    """:func:`gingham.einsum` in Keras' result dtype (int8 operands give int32, as JAX)."""
    if kwargs:
        raise NotImplementedError(f"numpy.einsum with {sorted(kwargs)} is not implemented by "
                                  "gingham's Keras backend yet")
    tensors = [convert_to_tensor(x) for x in operands]
    kinds = {keras_dtype(t) for t in tensors}
    dtype = "int32" if kinds == {"int8"} else dtypes.result_type(*kinds)
    return gt.einsum(subscripts, *[_cast(t, dtype) for t in tensors])


def diagonal(x, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal of the ``axis1`` x ``axis2`` planes, as the last axis: a
    square block of them read by :func:`gingham.einsum`'s repeated label."""
    x = moveaxis(convert_to_tensor(x), (axis1, axis2), (-2, -1))
    rows, cols = x.shape[-2:]
    start_row, start_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = builtins_max(0, builtins_min(rows - start_row, cols - start_col))
    block = x[..., start_row:start_row + length, start_col:start_col + length]
    return gt.einsum("...ii->...i", block)


def diag(x, k=0):
    """NumPy's ``diag``: the ``k``-th diagonal of a matrix, or a matrix with ``x`` on it."""
    x = convert_to_tensor(x)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError(f"numpy.diag: input must be 1-d or 2-d, got shape {x.shape}")
    size = x.shape[0]
    square = x.unsqueeze(1) * convert_to_tensor(np.eye(size), keras_dtype(x))
    shift = builtins_abs(k)
    # rows below (k > 0) or columns after (k < 0) the square: F.pad's last-axis-first order
    return F.pad(square, (shift, 0, 0, shift) if k > 0 else (0, shift, shift, 0))


def tril(x, k=0):
    """``x`` with the entries above the ``k``-th diagonal (of the last two axes) zeroed."""
    x = convert_to_tensor(x)
    keep = np.tri(x.shape[-2], x.shape[-1], k, dtype=bool)
    return gt.where(convert_to_tensor(keep), x, gt.zeros((), x.dtype, x.device))


def triu(x, k=0):
    """``x`` with the entries below the ``k``-th diagonal (of the last two axes) zeroed."""
    x = convert_to_tensor(x)
    keep = ~np.tri(x.shape[-2], x.shape[-1], k - 1, dtype=bool)
    return gt.where(convert_to_tensor(keep), x, gt.zeros((), x.dtype, x.device))


# -- comparisons and logic -------------------------------------------------------------------------


def _compare(x1, x2, op):
    _, (a, b) = _promote(x1, x2)
    if not isinstance(a, Tensor):
        a, b = b, a
        op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(op, op)
    a = convert_to_tensor(a)
    return {"eq": a.__eq__, "ne": a.__ne__, "lt": a.__lt__, "le": a.__le__,
            "gt": a.__gt__, "ge": a.__ge__}[op](b)


def equal(x1, x2): return _compare(x1, x2, "eq")
def not_equal(x1, x2): return _compare(x1, x2, "ne")
def less(x1, x2): return _compare(x1, x2, "lt")
def less_equal(x1, x2): return _compare(x1, x2, "le")
def greater(x1, x2): return _compare(x1, x2, "gt")
def greater_equal(x1, x2): return _compare(x1, x2, "ge")


def _bool(x) -> Tensor:
    return _cast(convert_to_tensor(x), "bool")


def logical_and(x1, x2): return _bool(x1) & _bool(x2)
def logical_or(x1, x2): return _bool(x1) | _bool(x2)
def logical_xor(x1, x2): return _bool(x1) ^ _bool(x2)
def logical_not(x): return ~_bool(x)


def isnan(x):
    x = convert_to_tensor(x)
    return x != x


def isinf(x):
    x = convert_to_tensor(x)
    if "float" not in keras_dtype(x):
        return x != x
    return x.abs() == float("inf")


def isfinite(x):
    return logical_not(logical_or(isnan(x), isinf(x)))


def nonzero(x):
    """The positions of the nonzero elements, one int32 tensor per axis. Their number
    depends on the values, which a compiled program's fixed shapes cannot: computed on
    the host outside a step, NotImplementedError inside one."""
    if current_trace() is not None:
        raise NotImplementedError("numpy.nonzero (and where with one argument) inside a "
                                  "compiled step is not implemented by gingham's Keras backend: "
                                  "its result's shape depends on the values")
    positions = np.nonzero(convert_to_numpy(x))
    return tuple(convert_to_tensor(p, "int32") for p in positions)


def where(condition, x1=None, x2=None):
    if x1 is None and x2 is None:
        return nonzero(condition)
    if x1 is None or x2 is None:
        raise ValueError("numpy.where takes the condition alone, or with both `x1` and `x2`")
    dtype, (a, b) = _promote(x1, x2)
    condition = _bool(condition)
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return _cast(gt.where(condition, a, b), dtype)
    return _cast(gt.where(condition, convert_to_tensor(a, dtype), b), dtype)


# -- reductions ------------------------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    x = convert_to_tensor(x)
    dtype = keras_dtype(x)
    if dtype in ("bool", "int8", "int16"):
        dtype = "int32"
    elif dtype in ("uint8", "uint16"):
        dtype = "uint32"
    return _cast(_cast(x, dtype).sum(dim=_axis(axis), keepdim=keepdims), dtype)


def mean(x, axis=None, keepdims=False):
    x = convert_to_tensor(x)
    dtype = keras_dtype(x)
    if "float" not in dtype:
        dtype = dtypes.result_type(dtype, "float32")
    return _cast(_cast(x, dtype).mean(dim=_axis(axis), keepdim=keepdims), dtype)


def _extreme(x, axis, keepdims, initial, method):
    x = convert_to_tensor(x)
    if x.size == 0 and initial is None:
        raise ValueError(f"numpy.{method}: cannot reduce an empty tensor without `initial`")
    result = getattr(x, "a" + method)(_axis(axis) if axis is not None else None, keepdims)
    if initial is not None:
        result = (gt.maximum if method == "max" else gt.minimum)(result, initial)
    return result


def max(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    return _extreme(x, axis, keepdims, initial, "max")


def min(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    return _extreme(x, axis, keepdims, initial, "min")


amax = max
amin = min


def prod(x, axis=None, keepdims=False, dtype=None):
    x = convert_to_tensor(x, dtype)
    # Keras keeps an integer's type (PyTorch's product of integers is int64), bools as int32
    kept = "int32" if keras_dtype(x) == "bool" else x.dtype
    if isinstance(axis, (list, tuple)):
        for a in sorted((a % x.ndim for a in axis), reverse=True):
            x = x.prod(dim=a, keepdim=keepdims, dtype=kept)
        return x
    return x.prod(dim=_axis(axis), keepdim=keepdims, dtype=kept)


def _cumulative(x, axis, dtype, method):
    x = convert_to_tensor(x)
    dtype = dtypes.result_type(dtype or keras_dtype(x))
    if dtype == "bool":
        dtype = "int32"
    if axis is None:
        x, axis = x.reshape(-1), 0
    return getattr(_cast(x, dtype), method)(int(axis), dtype=to_numpy_dtype(dtype))


def cumsum(x, axis=None, dtype=None):
    """Running sums (:meth:`gingham.Tensor.cumsum`; the flattened input without ``axis``)."""
    return _cumulative(x, axis, dtype, "cumsum")


def cumprod(x, axis=None, dtype=None):
    return _cumulative(x, axis, dtype, "cumprod")


def _arg(x, axis, keepdims, method):
    x = convert_to_tensor(x)
    if axis is None:
        result = getattr(x.reshape(-1), method)(0)
        if keepdims:
            result = result.reshape((1,) * x.ndim)
    else:
        result = getattr(x, method)(int(axis), keepdims)
    return _cast(result, "int32")


def argmax(x, axis=None, keepdims=False): return _arg(x, axis, keepdims, "argmax")
def argmin(x, axis=None, keepdims=False): return _arg(x, axis, keepdims, "argmin")


def var(x, axis=None, keepdims=False):
    x = _float(x)
    return x.var(_axis(axis), keepdim=keepdims, correction=0)


def std(x, axis=None, keepdims=False):
    return var(x, axis, keepdims).sqrt()


def any(x, axis=None, keepdims=False):  # noqa: A001
    return _cast(_cast(x, "int32").amax(_axis(axis), keepdims), "bool")


def all(x, axis=None, keepdims=False):  # noqa: A001
    return _cast(_cast(x, "int32").amin(_axis(axis), keepdims), "bool")


# -- shapes ---------------------------------------------------------------------------------------


def reshape(x, newshape):
    if isinstance(newshape, int):
        newshape = (newshape,)
    return gt.reshape(convert_to_tensor(x), tuple(int(s) for s in newshape))


def transpose(x, axes=None):
    x = convert_to_tensor(x)
    order = tuple(reversed(range(x.ndim))) if axes is None else tuple(a % x.ndim for a in axes)
    return gt.permute_dims(x, order)


def swapaxes(x, axis1, axis2):
    return convert_to_tensor(x).transpose(axis1, axis2)


def moveaxis(x, source, destination):
    x = convert_to_tensor(x)
    sources = [s % x.ndim for s in np.atleast_1d(source)]
    destinations = [d % x.ndim for d in np.atleast_1d(destination)]
    order = [a for a in range(x.ndim) if a not in sources]
    for d, s in sorted(zip(destinations, sources)):
        order.insert(d, s)
    return gt.permute_dims(x, tuple(order))


def expand_dims(x, axis):
    x = convert_to_tensor(x)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    rank = x.ndim + len(axes)
    positions = sorted(a % rank for a in axes)
    shape = list(x.shape)
    for p in positions:
        shape.insert(p, 1)
    return gt.reshape(x, tuple(shape))


def squeeze(x, axis=None):
    x = convert_to_tensor(x)
    if axis is not None:
        axes = axis if isinstance(axis, (list, tuple)) else (axis,)
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"numpy.squeeze: axis {a} of shape {x.shape} is not 1")
    return x.squeeze(_axis(axis))


def concatenate(xs, axis=0):
    dtype = dtypes.result_type(*[_dtype_of(x) for x in xs])
    tensors = [convert_to_tensor(x, dtype) for x in xs]
    if axis is None:
        return gt.concat([t.reshape(-1) for t in tensors], 0)
    return gt.concat(tensors, axis)


def stack(x, axis=0):
    dtype = dtypes.result_type(*[_dtype_of(item) for item in x])
    return gt.stack([convert_to_tensor(item, dtype) for item in x], axis)


def broadcast_to(x, shape):
    return convert_to_tensor(x).broadcast_to(tuple(shape))


def tile(x, repeats):
    x = convert_to_tensor(x)
    repeats = (repeats,) if isinstance(repeats, int) else tuple(repeats)
    if len(repeats) < x.ndim:
        repeats = (1,) * (x.ndim - len(repeats)) + repeats
    return x.repeat(*repeats)


def repeat(x, repeats, axis=None):
    """Each element repeated ``repeats`` times along ``axis`` (the flattened input without
    one): a gather of the repeated positions (:func:`take`). ``repeats`` is a number or a
    count per element known when the step is traced, not a tensor computed in it."""
    x = convert_to_tensor(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if isinstance(repeats, Tensor) and current_trace() is not None:
        raise NotImplementedError("numpy.repeat with tensor repeats inside a compiled step is "
                                  "not implemented by gingham's Keras backend (its shape "
                                  "depends on the values)")
    counts = np.asarray(convert_to_numpy(repeats)).astype(np.int64)
    positions = np.repeat(np.arange(x.shape[axis]), counts)
    return take(x, convert_to_tensor(positions, "int32"), axis)


def split(x, indices_or_sections, axis=0):
    x = convert_to_tensor(x)
    size = x.shape[axis]
    if isinstance(indices_or_sections, int):
        if size % indices_or_sections:
            raise ValueError(f"numpy.split: axis of size {size} does not split into "
                             f"{indices_or_sections} equal parts")
        return list(x.split(size // indices_or_sections, axis))
    bounds = [0] + [int(i) for i in indices_or_sections] + [size]
    return list(x.split([b - a for a, b in zip(bounds[:-1], bounds[1:])], axis))


def take(x, indices, axis=None):
    """``x``'s elements at ``indices`` along ``axis`` (negative indices count from the end):
    gingham's gather of rows (:func:`gingham.index_select`), of any dtype (Keras' CutMix and
    RandomErasing take from boolean masks, Equalization from integer histograms),
    differentiable in ``x``."""
    from ...frontend import indexing

    x = convert_to_tensor(x)
    indices = convert_to_tensor(indices)
    if "int" not in keras_dtype(indices):
        indices = _cast(indices, "int32")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = int(axis) % x.ndim
    size = x.shape[axis]
    indexing._check_range("take", indices, size, f"axis {axis} with size {size} (shape "
                          f"{x.shape})", negative=True)
    indices = gt.where(indices < 0, indices + size, indices)
    moved = moveaxis(x, axis, 0)
    rest = moved.shape[1:]
    table = moved.reshape(size, pymath.prod(rest))
    rows = indexing.index_select(table, 0, indices.reshape(-1))
    picked = rows.reshape(indices.shape + rest)
    # [*indices, *before, *after] -> [*before, *indices, *after]
    n_index = indices.ndim
    order = (list(range(n_index, n_index + axis)) + list(range(n_index))
             + list(range(n_index + axis, picked.ndim)))
    return gt.permute_dims(picked, tuple(order))


def pad(x, pad_width, mode="constant", constant_values=None):
    x = convert_to_tensor(x)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    flat = [int(v) for pair in reversed(widths.tolist()) for v in pair]
    if mode == "constant":
        return F.pad(x, flat, "constant", constant_values or 0.0)
    if mode in ("reflect", "edge"):
        return F.pad(x, flat, "reflect" if mode == "reflect" else "replicate")
    raise NotImplementedError(f"numpy.pad with mode={mode!r} is not implemented by gingham's "
                              "Keras backend yet")


def ndim(x): return convert_to_tensor(x).ndim
def size(x): return int(convert_to_tensor(x).size)  # a Python int, as NumPy's np.size


def copy(x):
    return convert_to_tensor(x).clone()


# -- creation --------------------------------------------------------------------------------------


def _creation_dtype(dtype, default=None):
    return to_numpy_dtype(dtype or default or floatx())


def zeros(shape, dtype=None):
    return gt.zeros(tuple(shape) if not isinstance(shape, int) else (shape,),
                    _creation_dtype(dtype), current_device())


def ones(shape, dtype=None):
    return gt.ones(tuple(shape) if not isinstance(shape, int) else (shape,),
                   _creation_dtype(dtype), current_device())


empty = zeros


def full(shape, fill_value, dtype=None):
    fill = fill_value.numpy() if isinstance(fill_value, Tensor) else np.asarray(fill_value)
    dtype = dtype or dtypes.result_type(_dtype_of(fill_value))
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return convert_to_tensor(np.broadcast_to(fill, shape), dtype)


def full_like(x, fill_value, dtype=None):
    x = convert_to_tensor(x)
    return full(x.shape, fill_value, dtype or keras_dtype(x))


def zeros_like(x, dtype=None):
    return full_like(x, 0, dtype)


def ones_like(x, dtype=None):
    return full_like(x, 1, dtype)


def arange(start, stop=None, step=None, dtype=None):
    step = 1 if step is None else step
    if dtype is None:
        kinds = [_dtype_of(v) for v in (start, stop, step) if v is not None]
        dtype = dtypes.result_type(*kinds)
    return gt.arange(start, stop, step, dtype=to_numpy_dtype(dtype), device=current_device())


def eye(N, M=None, k=0, dtype=None):  # noqa: N803 (Keras' names)
    return convert_to_tensor(np.eye(N, M, k), dtype or floatx())


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


# --- indexing ops ---
# On gingham.frontend.indexing: a sort ranks each element by pairwise compares along the axis
# (n^2 per row, for class counts and sequence lengths) and is stable, NaN last.


def take_along_axis(x, indices, axis=None):
    """NumPy's ``take_along_axis`` (a negative index counts from the end; an index outside
    the axis gives 0): :func:`gingham.take_along_dim`, differentiable in ``x``."""
    from ...frontend import indexing

    x = convert_to_tensor(x)
    indices = convert_to_tensor(indices)
    if "int" not in keras_dtype(indices):
        indices = _cast(indices, "int32")
    return indexing.take_along_dim(x, indices, None if axis is None else int(axis))


def _along(x, axis):
    """``x`` and the axis to sort along (``None``: the flattened ``x``)."""
    x = convert_to_tensor(x)
    return (x.reshape(-1), 0) if axis is None else (x, int(axis))


def sort(x, axis=-1):
    from ...frontend import indexing

    x, axis = _along(x, axis)
    return indexing.sort(x, axis).values


def argsort(x, axis=-1):
    """The int32 positions that sort ``x`` along ``axis`` (stable, as Keras' other
    backends)."""
    from ...frontend import indexing

    x, axis = _along(x, axis)
    return indexing.argsort(x, axis).astype(np.int32)


def argpartition(x, kth, axis=-1):
    """Positions that partition ``x`` around its ``kth`` smallest element: those of a full
    stable sort, which is one valid partition (NumPy leaves the order inside each part
    free)."""
    x, axis = _along(x, axis)
    if not -x.shape[axis] <= int(kth) < x.shape[axis]:
        raise ValueError(f"argpartition: kth={kth} is out of bounds for an axis of size "
                         f"{x.shape[axis]}")
    return argsort(x, axis)


def _sorted_last(x, axis):
    """``x`` sorted along ``axis`` (an int, a tuple of them, or None: every axis), those axes
    moved to the end and flattened into one; the remaining axes' sizes."""
    from ...frontend import indexing

    x = _float(x)
    axes = tuple(range(x.ndim)) if axis is None else tuple(
        int(a) % x.ndim for a in np.atleast_1d(axis))
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = gt.permute_dims(x, kept + list(axes))
    flat = moved.reshape(tuple(x.shape[a] for a in kept) + (-1,))
    return indexing.sort(flat, -1).values, axes


def _quantiles(x, q, axis, method, keepdims, op):
    """NumPy's ``quantile`` (``q`` in [0, 1], a number or a 1-d array known when the step is
    traced): the sorted values at ``q * (n - 1)``, interpolated by ``method``."""
    if isinstance(q, Tensor) and current_trace() is not None:
        raise NotImplementedError(f"numpy.{op} with a tensor q inside a compiled step is not "
                                  "implemented by gingham's Keras backend (numbers only)")
    qs = np.asarray(convert_to_numpy(q), np.float64)
    if np.any((qs < 0) | (qs > 1)):
        raise ValueError(f"{op}: q must be in [0, 1] ([0, 100] for percentile), not {q}")
    if method not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"{op}: method must be linear, lower, higher, midpoint or nearest, "
                         f"not {method!r}")
    ordered, axes = _sorted_last(x, axis)
    n = ordered.shape[-1]
    results = []
    for fraction in qs.reshape(-1):
        position = fraction * (n - 1)
        low, high = int(np.floor(position)), int(np.ceil(position))
        weight = {"linear": position - low, "lower": 0.0, "higher": 1.0, "midpoint": 0.5,
                  "nearest": float(np.round(position) > low)}[method]
        value = ordered[..., low]
        if high != low and weight:
            value = value + (ordered[..., high] - value) * weight
        if keepdims:
            value = value.reshape(tuple(1 if a in axes else s
                                        for a, s in enumerate(convert_to_tensor(x).shape)))
        results.append(value)
    if qs.ndim == 0:
        return results[0]
    return gt.stack(results, 0)


def median(x, axis=None, keepdims=False):
    """The middle of the sorted values (the mean of the two middle ones for an even count),
    as NumPy's ``median``."""
    return _quantiles(x, 0.5, axis, "linear", keepdims, "median")


def quantile(x, q, axis=None, method="linear", keepdims=False):
    return _quantiles(x, q, axis, method, keepdims, "quantile")


def percentile(x, q, axis=None, method="linear", keepdims=False):
    scaled = q / 100.0 if isinstance(q, Tensor) else np.asarray(q, np.float64) / 100.0
    return _quantiles(x, scaled, axis, method, keepdims, "percentile")


# --- elementwise math and reductions ops ---
# Real dtypes only: gingham has no complex tensors, so real/conj are the identity, imag is 0,
# isreal is True and angle is 0 or pi.
arccos = _unary_float("acos")
arcsin = _unary_float("asin")
arctan = _unary_float("atan")
arccosh = _unary_float("acosh")
arcsinh = _unary_float("asinh")
arctanh = _unary_float("atanh")
cosh = _unary_float("cosh")
sinh = _unary_float("sinh")
exp2 = _unary_float("exp2")
fabs = _unary_float("abs")


def _float_binary(x1, x2, method: str):
    """``x1.method(x2)`` in Keras' float result dtype (a Python number stays weak)."""
    dtype = dtypes.result_type(_dtype_of(_scalar(x1)), _dtype_of(_scalar(x2)), float)
    b = _scalar(x2) if isinstance(_scalar(x2), _SCALARS) else convert_to_tensor(x2, dtype)
    return _cast(getattr(convert_to_tensor(x1, dtype), method)(b), dtype)


def arctan2(x1, x2): return _float_binary(x1, x2, "atan2")
def hypot(x1, x2): return _float_binary(x1, x2, "hypot")
def logaddexp(x1, x2): return _float_binary(x1, x2, "logaddexp")
def logaddexp2(x1, x2): return _float_binary(x1, x2, "logaddexp2")
def fmod(x1, x2):
    """C's remainder (the sign of ``x1``), where :func:`mod` takes ``x2``'s."""
    dtype, (a, b) = _promote(x1, x2)
    return _cast(convert_to_tensor(a, dtype).fmod(b), dtype)


def cbrt(x):
    """The real cube root, odd: ``sign(x) |x|^(1/3)``."""
    x = _float(x)
    return x.sign() * x.abs() ** (1.0 / 3.0)


def trunc(x):
    x = convert_to_tensor(x)
    return x.trunc()


def _nan_aware_extreme(x1, x2, pick):
    """NumPy's fmax/fmin: the other operand where one is NaN."""
    def op(a, b):
        b = b if isinstance(b, Tensor) else gt.full((), b, a.dtype, a.device)
        return gt.where(a.isnan(), b, gt.where(b.isnan(), a, pick(a, b)))
    return _binary(x1, x2, op)


def fmax(x1, x2): return _nan_aware_extreme(x1, x2, gt.maximum)
def fmin(x1, x2): return _nan_aware_extreme(x1, x2, gt.minimum)


def heaviside(x1, x2):
    """0 where ``x1 < 0``, ``x2`` where it is 0, 1 where positive, NaN where NaN (integers
    give floatx)."""
    dtype = dtypes.result_type(_dtype_of(_scalar(x1)), _dtype_of(_scalar(x2)))
    if dtype in ("int8", "int16", "int32", "uint8", "uint16", "uint32", "bool"):
        dtype = floatx()
    elif dtype == "int64":
        dtype = "float64"
    a, b = convert_to_tensor(x1, dtype), convert_to_tensor(x2, dtype)
    step = gt.where(a < 0, 0.0, gt.where(a > 0, 1.0, gt.where(a == 0, b, a)))  # NaN stays
    return _cast(step, dtype)


def signbit(x):
    """Whether the sign bit is set: negative numbers and ``-0.0``."""
    x = convert_to_tensor(x)
    if "float" not in keras_dtype(x):
        return x < 0
    return x._elementwise(gt._sign_bit, [], "signbit", np.dtype(bool))


def isneginf(x):
    x = convert_to_tensor(x)
    return x.isinf() & (x < 0)


def isposinf(x):
    x = convert_to_tensor(x)
    return x.isinf() & (x > 0)


def isclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """NumPy's ``|x1 - x2| <= atol + rtol |x2|``; equal infinities are close."""
    dtype, (a, b) = _promote(x1, x2)
    a, b = convert_to_tensor(a, dtype), convert_to_tensor(b, dtype)
    close = (a == b) | ((a - b).abs() <= atol + rtol * b.abs())
    return close | (a.isnan() & b.isnan()) if equal_nan else close


def allclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    return all(isclose(x1, x2, rtol, atol, equal_nan))


def isreal(x): return ones_like(x, "bool")
def real(x): return convert_to_tensor(x)
def imag(x): return zeros_like(x)
def conjugate(x): return convert_to_tensor(x)


conj = conjugate


def angle(x):
    """The argument of a real number: pi where it is negative (or ``-0.0``), 0 elsewhere."""
    x = _float(x)
    return gt.where(x.isnan(), x, 0.0).atan2(x)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    return convert_to_tensor(x).nan_to_num(nan, posinf, neginf)


def _nan_filled(x, value):
    x = convert_to_tensor(x)
    if "float" not in keras_dtype(x):
        return x, None
    return gt.where(x.isnan(), value, x), x.isnan()


def nansum(x, axis=None, keepdims=False):
    return sum(_nan_filled(x, 0.0)[0], axis, keepdims)


def nanprod(x, axis=None, keepdims=False):
    filled = _nan_filled(x, 1.0)[0]
    axes = _axis(axis)
    if not isinstance(axes, tuple):
        return prod(filled, axes, keepdims)
    for a in sorted((a % filled.ndim for a in axes), reverse=True):
        filled = prod(filled, a, keepdims)
    return filled


def nanmean(x, axis=None, keepdims=False):
    x = _float(x)
    filled, nans = _nan_filled(x, 0.0)
    count = sum(logical_not(nans), axis, keepdims)
    return _cast(sum(filled, axis, keepdims) / count, keras_dtype(x))


def nanvar(x, axis=None, keepdims=False):
    """The variance of the non-NaN elements. The deviations are masked before squaring: the
    square's derivative at a NaN, times the mask's zero, would be NaN."""
    x = _float(x)
    filled, nans = _nan_filled(x, 0.0)
    deviations = gt.where(nans, 0.0, filled - nanmean(x, axis, keepdims=True))
    count = sum(logical_not(nans), axis, keepdims)
    return _cast(sum(deviations * deviations, axis, keepdims) / count, keras_dtype(x))


def nanstd(x, axis=None, keepdims=False): return nanvar(x, axis, keepdims).sqrt()


def _nan_extreme(x, axis, keepdims, method, fill):
    """NaNs skipped by filling them with ``fill``; NaN where every element is NaN."""
    filled, nans = _nan_filled(x, fill)
    result = method(filled, axis, keepdims)
    if nans is None:
        return result
    return gt.where(all(nans, axis, keepdims), pymath.nan, result)


def nanmax(x, axis=None, keepdims=False):
    return _nan_extreme(x, axis, keepdims, max, -pymath.inf)


def nanmin(x, axis=None, keepdims=False):
    return _nan_extreme(x, axis, keepdims, min, pymath.inf)


def _nan_arg(x, axis, keepdims, method, fill):
    """The position of the extreme among the non-NaN elements; -1 where all are NaN."""
    filled, nans = _nan_filled(x, fill)
    result = method(filled, axis, keepdims)
    if nans is None:
        return result
    return _cast(gt.where(all(nans, axis, keepdims), -1, result), "int32")


def nanargmax(x, axis=None, keepdims=False):
    return _nan_arg(x, axis, keepdims, argmax, -pymath.inf)


def nanargmin(x, axis=None, keepdims=False):
    return _nan_arg(x, axis, keepdims, argmin, pymath.inf)


def nancumsum(x, axis=None, dtype=None): return cumsum(_nan_filled(x, 0.0)[0], axis, dtype)
def nancumprod(x, axis=None, dtype=None): return cumprod(_nan_filled(x, 1.0)[0], axis, dtype)


def ptp(x, axis=None, keepdims=False):
    return max(x, axis, keepdims) - min(x, axis, keepdims)


def average(x, axis=None, weights=None):
    """The weighted mean along ``axis``; 1-d ``weights`` run along ``axis``, as NumPy's."""
    x = _float(x)
    if weights is None:
        return mean(x, axis)
    w = _cast(convert_to_tensor(weights), keras_dtype(x))
    if axis is not None and w.ndim == 1 and x.ndim > 1:
        shape = [1] * x.ndim
        shape[int(axis) % x.ndim] = w.shape[0]
        w = w.reshape(tuple(shape))
    return sum(x * w, axis) / sum(w * ones_like(x), axis)


def count_nonzero(x, axis=None):
    x = convert_to_tensor(x)
    if isinstance(axis, (tuple, list)) and not axis:
        return _cast(x != 0, "int32")
    return _cast(x.count_nonzero(_axis(axis)), "int32")


def deg2rad(x): return _float(x) * (pymath.pi / 180.0)
def rad2deg(x): return _float(x) * (180.0 / pymath.pi)


def sinc(x):
    """``sin(pi x) / (pi x)``, 1 at 0 (whose derivative, 0, is finite: the division reads 1
    there)."""
    x = _float(x)
    scaled = gt.where(x == 0, 1.0, x) * pymath.pi
    return gt.where(x == 0, 1.0, scaled.sin() / scaled)


def ldexp(x1, x2):
    """``x1 * 2**x2`` for an integer ``x2``."""
    exponent = convert_to_tensor(x2)
    if "int" not in keras_dtype(exponent):
        raise TypeError(f"ldexp exponent must be an integer type. Received: x2 dtype="
                        f"{keras_dtype(exponent)}")
    dtype = dtypes.result_type(_dtype_of(_scalar(x1)), keras_dtype(exponent), float)
    return _cast(convert_to_tensor(x1, dtype) * _cast(exponent, dtype).exp2(), dtype)


def _integer_binary(x, y, op: str, name: str):
    dtype, (a, b) = _promote(x, y)
    if "int" not in dtype and dtype != "bool":
        raise TypeError(f"{name}: needs integer or bool operands, not {dtype}")
    a = a if isinstance(a, Tensor) else convert_to_tensor(a, dtype)
    return _cast(a._elementwise(op, [b], name), dtype)


def bitwise_and(x, y): return _integer_binary(x, y, lambda a, b: a & b, "bitwise_and")
def bitwise_or(x, y): return _integer_binary(x, y, lambda a, b: a | b, "bitwise_or")
def bitwise_xor(x, y): return _integer_binary(x, y, lambda a, b: a ^ b, "bitwise_xor")
def left_shift(x, y): return _integer_binary(x, y, lambda a, b: a << b, "left_shift")
def right_shift(x, y): return _integer_binary(x, y, lambda a, b: a >> b, "right_shift")


def bitwise_invert(x): return ~convert_to_tensor(x)


bitwise_not = bitwise_invert
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


# --- shapes, layout and normalisation ops ---
# Each is gingham's own op of the same name (gingham.flip, gingham.roll, ...) in Keras' dtype
# rules; the creation ops (linspace, tri, ...) are constants made on the host, as eye is.


def _joined_dtype(xs):
    return dtypes.result_type(*[_dtype_of(x) for x in xs])


def append(x1, x2, axis=None):
    return concatenate([x1, x2], axis)


def array_split(x, indices_or_sections, axis=0):
    """NumPy's ``array_split``: like :func:`split`, but ``n`` sections need not divide the
    axis (the first ``size % n`` pieces are one longer)."""
    x = convert_to_tensor(x)
    if isinstance(indices_or_sections, int):
        size, n = x.shape[axis], indices_or_sections
        if n <= 0:
            raise ValueError(f"numpy.array_split: number of sections must be positive, not {n}")
        lengths = [size // n + (1 if i < size % n else 0) for i in range(n)]
        return list(x.split(lengths, axis))
    return split(x, indices_or_sections, axis)


def _split_along(name, x, indices_or_sections, axis, rank):
    x = convert_to_tensor(x)
    if x.ndim < rank:
        raise ValueError(f"numpy.{name}: input must be at least {rank}-d, got shape {x.shape}")
    return split(x, indices_or_sections, axis)


def hsplit(x, indices_or_sections):
    x = convert_to_tensor(x)
    return _split_along("hsplit", x, indices_or_sections, 0 if x.ndim == 1 else 1, 1)


def vsplit(x, indices_or_sections):
    return _split_along("vsplit", x, indices_or_sections, 0, 2)


def dsplit(x, indices_or_sections):
    return _split_along("dsplit", x, indices_or_sections, 2, 3)


def hstack(xs):
    dtype = _joined_dtype(xs)
    return gt.hstack([convert_to_tensor(x, dtype) for x in xs])


def vstack(xs):
    dtype = _joined_dtype(xs)
    return gt.vstack([convert_to_tensor(x, dtype) for x in xs])


def dstack(xs):
    dtype = _joined_dtype(xs)
    return gt.dstack([convert_to_tensor(x, dtype) for x in xs])


def flip(x, axis=None):
    x = convert_to_tensor(x)
    return gt.flip(x, tuple(range(x.ndim)) if axis is None else axis)


def fliplr(x): return gt.fliplr(convert_to_tensor(x))
def flipud(x): return gt.flipud(convert_to_tensor(x))
def roll(x, shift, axis=None): return gt.roll(convert_to_tensor(x), shift, axis)
def ravel(x): return convert_to_tensor(x).reshape(-1)


def rot90(array, k=1, axes=(0, 1)):
    x = convert_to_tensor(array)
    if x.ndim < 2:
        raise ValueError(f"numpy.rot90: input must have at least 2 dimensions, got {x.ndim}")
    if len(axes) != 2 or axes[0] % x.ndim == axes[1] % x.ndim:
        raise ValueError(f"numpy.rot90: axes {axes} must name two different dimensions")
    return gt.rot90(x, k, axes)


def tri(N, M=None, k=0, dtype=None):  # noqa: N803 (Keras' names)
    return convert_to_tensor(np.tri(N, M, k), dtype or floatx())


def trace(x, offset=0, axis1=0, axis2=1):
    """The sum of the ``offset`` diagonal of the ``axis1`` x ``axis2`` planes (small
    integers sum in int32, as NumPy's backend)."""
    x = convert_to_tensor(x)
    dtype = keras_dtype(x)
    dtype = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32",
             "uint16": "uint32"}.get(dtype, dtype)
    return _cast(gt.diagonal(_cast(x, dtype), offset, axis1, axis2).sum(-1), dtype)


def slogdet(x):
    """``(sign, logabsdet)`` of square matrices ``[..., n, n]`` (gingham.linalg.slogdet: an
    LU factorisation on the device, differentiable)."""
    return tuple(_linalg.slogdet(_float(x)))


def diagflat(x, k=0):
    return diag(convert_to_tensor(x).reshape(-1), k)


def diff(a, n=1, axis=-1):
    return gt.diff(convert_to_tensor(a), n, axis)


def outer(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return gt.outer(convert_to_tensor(a, dtype).reshape(-1), convert_to_tensor(b, dtype).reshape(-1))


def inner(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return gt.inner(convert_to_tensor(a, dtype), convert_to_tensor(b, dtype))


def kron(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return gt.kron(convert_to_tensor(a, dtype), convert_to_tensor(b, dtype))


def tensordot(x1, x2, axes=2):
    dtype, (a, b) = _promote(x1, x2)
    axes = axes if isinstance(axes, int) else tuple(
        (pair,) if isinstance(pair, int) else tuple(pair) for pair in axes)
    return gt.tensordot(convert_to_tensor(a, dtype), convert_to_tensor(b, dtype), axes)


def vdot(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return (convert_to_tensor(a, dtype).reshape(-1) * convert_to_tensor(b, dtype).reshape(-1)).sum()


def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """NumPy's ``cross`` of 3-vectors (2-vectors are not supported)."""
    dtype, (a, b) = _promote(x1, x2)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(convert_to_tensor(a, dtype), axisa, -1)
    b = moveaxis(convert_to_tensor(b, dtype), axisb, -1)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise NotImplementedError("numpy.cross of 2-vectors is not implemented by gingham's "
                                  "Keras backend yet (3-vectors are)")
    return moveaxis(gt.cross(a, b, -1), -1, axisc)


def _space_dtype(start, stop, dtype):
    return dtype or dtypes.result_type(getattr(start, "dtype", type(start)),
                                       getattr(stop, "dtype", type(stop)), float)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    dtype = _space_dtype(start, stop, dtype)
    values, step = np.linspace(convert_to_numpy(start), convert_to_numpy(stop), num,
                               endpoint=endpoint, retstep=True, axis=axis)
    result = convert_to_tensor(values, dtype)
    return (result, step) if retstep else result


def logspace(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    return convert_to_tensor(np.logspace(convert_to_numpy(start), convert_to_numpy(stop), num,
                                         endpoint=endpoint, base=base, axis=axis),
                             _space_dtype(start, stop, dtype))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    return convert_to_tensor(np.geomspace(convert_to_numpy(start), convert_to_numpy(stop), num,
                                          endpoint=endpoint, axis=axis), dtype or floatx())


def meshgrid(*x, indexing="xy"):
    return list(gt.meshgrid(*[convert_to_tensor(v) for v in x], indexing=indexing))


def vander(x, N=None, increasing=False):  # noqa: N803 (Keras' names)
    """The powers ``x ** j`` as columns (decreasing unless ``increasing``): a product of
    ``x`` with itself per column, so it differentiates in ``x``."""
    x = convert_to_tensor(x)
    if x.ndim != 1:
        raise ValueError(f"numpy.vander: x must be 1-d, got shape {x.shape}")
    result_dtype = keras_dtype(x)
    columns = x.shape[0] if N is None else int(N)
    column = _cast(x, dtypes.result_type(result_dtype, floatx())).unsqueeze(1)
    powers = [gt.ones((x.shape[0], 1), column.dtype, column.device)]
    for _ in range(1, columns):
        powers.append(powers[-1] * column)
    if not increasing:
        powers.reverse()
    return _cast(gt.concat(powers[:columns] or [column[:, :0]], 1), result_dtype)


def empty_like(x, dtype=None):
    return zeros_like(x, dtype)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoid rule along ``axis``: ``sum((y[i + 1] + y[i]) / 2 * dx[i])``, ``dx`` the
    differences of ``x`` when given."""
    y = _float(y)
    size = y.shape[axis]
    pairs = y.narrow(axis, 1, size - 1) + y.narrow(axis, 0, size - 1)
    if x is not None:
        x = _cast(convert_to_tensor(x), keras_dtype(y))
        steps = gt.diff(x, 1, -1 if x.ndim == 1 else axis)
        if x.ndim == 1:
            steps = steps.reshape((size - 1,) + (1,) * (y.ndim - 1 - axis % y.ndim))
        return (pairs * steps).sum(axis) * 0.5
    return pairs.sum(axis) * (0.5 * float(convert_to_numpy(dx)))


# --- searching, counting and statistics ---
# The general ops are gingham's own (gingham.searchsorted, bincount, isin, gcd, histc, ...,
# PyTorch's names), here in Keras' dtype rules.


def array(x, dtype=None):
    return convert_to_tensor(x, dtype)


def view(x, dtype=None):
    """``x``'s bytes read as ``dtype`` (NumPy's ``view``). gingham's kernels have no bit
    casts, so the bytes are reinterpreted on the host: outside a compiled step only."""
    x = convert_to_tensor(x)
    if dtype is None or standardize_dtype(dtype) == keras_dtype(x):
        return x
    if current_trace() is not None:
        raise NotImplementedError("numpy.view to another dtype inside a compiled step is not "
                                  "implemented by gingham's Keras backend (it reinterprets the "
                                  "bytes on the host)")
    return convert_to_tensor(convert_to_numpy(x).view(to_numpy_dtype(dtype)), dtype)


def _integers(x):
    x = convert_to_tensor(x)
    return x if "int" in keras_dtype(x) else _cast(x, "int32")


def bincount(x, weights=None, minlength=0, sparse=False):
    """How often each value occurs in each row of ``x`` (1-d, or 2-d: one count per row),
    summing ``weights`` if given. Outside a compiled step the length is ``max(x) + 1`` (at
    least ``minlength``), as NumPy's; inside one the values cannot be read while tracing,
    so the length is ``minlength`` (which must then be given; values from it on are not
    counted), as Keras' CategoryEncoding calls it."""
    from ...frontend import indexing

    if sparse:
        raise ValueError("Unsupported value `sparse=True` with gingham's Keras backend")
    x = _integers(x)
    if x.ndim not in (1, 2):
        raise ValueError(f"numpy.bincount: x must be 1-d or 2-d, not of shape {x.shape}")
    dtype = "int32"
    if weights is not None:
        weights = convert_to_tensor(weights)
        dtype = dtypes.result_type(keras_dtype(x), keras_dtype(weights))
    if current_trace() is not None:
        if not minlength:
            raise NotImplementedError("numpy.bincount inside a compiled step needs "
                                      "`minlength` (its length would depend on the values)")
        length = int(minlength)
    else:
        values = convert_to_numpy(x)
        if values.size and values.min() < 0:
            raise ValueError(f"numpy.bincount: x must be non-negative, found {values.min()}")
        length = builtins_max(int(values.max()) + 1 if values.size else 0, int(minlength))
    return indexing._one_hot_sum(x, length, weights, to_numpy_dtype(dtype))


def searchsorted(sorted_sequence, values, side="left"):
    """Where ``values`` go in the 1-d ``sorted_sequence`` (:func:`gingham.searchsorted`),
    int32."""
    from ...frontend import indexing

    sorted_sequence = convert_to_tensor(sorted_sequence)
    if sorted_sequence.ndim != 1:
        raise ValueError("`searchsorted` only supports 1-D sorted sequences. You can use "
                         "`keras.ops.vectorized_map` to extend it to N-D sequences. Received: "
                         f"sorted_sequence.shape={sorted_sequence.shape}")
    dtype, (a, b) = _promote(sorted_sequence, values)
    b = convert_to_tensor(b, dtype)
    return indexing.searchsorted(convert_to_tensor(a, dtype), b, side=side, out_int32=True)


def digitize(x, bins):
    """The bin of each element of ``x`` among the increasing ``bins`` (``bins[i - 1] <= x <
    bins[i]``), int32, as NumPy's ``digitize``: :func:`gingham.bucketize` with ``right``."""
    from ...frontend import indexing

    dtype, (a, b) = _promote(x, bins)
    return indexing.bucketize(convert_to_tensor(a, dtype), convert_to_tensor(b, dtype),
                              right=True, out_int32=True)


def isin(x1, x2, assume_unique=False, invert=False):
    from ...frontend import indexing

    dtype, (a, b) = _promote(x1, x2)
    return indexing.isin(convert_to_tensor(a, dtype), convert_to_tensor(b, dtype),
                         invert=invert)


def gcd(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return _cast(gt.gcd(convert_to_tensor(a, dtype), b), dtype)


def lcm(x1, x2):
    dtype, (a, b) = _promote(x1, x2)
    return _cast(gt.lcm(convert_to_tensor(a, dtype), b), dtype)


def nextafter(x1, x2):
    dtype = dtypes.result_type(_dtype_of(_scalar(x1)), _dtype_of(_scalar(x2)), float)
    return gt.nextafter(convert_to_tensor(x1, dtype), convert_to_tensor(x2, dtype))


def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, else ``default``, elementwise (NumPy's
    ``select``): a chain of :func:`where` from the last condition to the first."""
    if len(condlist) != len(choicelist):
        raise ValueError("select: condlist and choicelist must have the same length, got "
                         f"{len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    dtype = _joined_dtype(list(choicelist) + [default])
    result = convert_to_tensor(default, dtype)
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = where(condition, convert_to_tensor(choice, dtype), result)
    return result


def corrcoef(x):
    x = convert_to_tensor(x)
    dtype = keras_dtype(x)
    dtype = {"int64": "float64", "float64": "float64", "float16": "float16",
             "bfloat16": "bfloat16"}.get(dtype, floatx())
    return _cast(gt.corrcoef(_cast(x, dtype)), dtype)


def correlate(x1, x2, mode="valid"):
    """NumPy's ``correlate`` of two 1-d sequences, ``c[k] = sum_n x1[n + k] x2[n]`` ("valid":
    where they overlap fully, "same": the length of the longer, "full": any overlap): one
    :func:`gingham.nn.functional.conv1d` (a correlation) of the zero-padded ``x1``."""
    if mode not in ("valid", "same", "full"):
        raise ValueError(f"numpy.correlate: mode must be 'valid', 'same' or 'full', not "
                         f"{mode!r}")
    dtype = dtypes.result_type(_dtype_of(x1), _dtype_of(x2))
    dtype = "float64" if dtype == "int64" else (
        dtype if dtype in ("bfloat16", "float16", "float64") else "float32")
    a, v = convert_to_tensor(x1, dtype), convert_to_tensor(x2, dtype)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"numpy.correlate: x1 and x2 must be 1-d, got shapes {a.shape} and "
                         f"{v.shape}")
    swapped = v.shape[0] > a.shape[0]
    if swapped:  # NumPy correlates the longer with the shorter and reverses the result
        a, v = v, a
    n, m = a.shape[0], v.shape[0]
    left, right = {"valid": (0, 0), "full": (m - 1, m - 1),
                   "same": (m // 2, m - 1 - m // 2)}[mode]
    padded = F.pad(a.reshape(1, 1, n), (left, right))
    result = F.conv1d(padded, v.reshape(1, 1, m)).reshape(-1)
    return gt.flip(result, 0) if swapped else result


def histogram(x, bins=10, range=None):  # noqa: A002 (Keras' name)
    """``(counts, edges)`` of ``bins`` equal bins over ``range`` (the data's least and
    greatest values without it), as NumPy's ``histogram`` of 1-d ``x``: the last bin holds
    its right edge; :func:`gingham.histc` on the device, so the step need not read it."""
    from ...frontend import indexing

    x = _float(x)
    if x.ndim != 1:
        raise ValueError(f"numpy.histogram: x must be 1-d, not of shape {x.shape}")
    if not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"numpy.histogram: bins must be a positive int, not {bins!r}")
    if range is None:
        low, high = x.amin(), x.amax()
    else:
        if len(range) != 2 or range[0] > range[1]:
            raise ValueError(f"numpy.histogram: range must be (min, max), not {range!r}")
        low, high = (gt.full((), float(v), x.dtype, x.device) for v in range)
    same = low == high  # NumPy widens an empty range by 0.5 on each side
    low, high = gt.where(same, low - 0.5, low), gt.where(same, high + 0.5, high)
    steps = convert_to_tensor(np.linspace(0.0, 1.0, bins + 1), keras_dtype(x))
    edges = low + (high - low) * steps
    position = ((x - low) * bins / (high - low)).floor()
    position = gt.where(x == high, bins - 1, position)
    inside = (x >= low) & (x <= high)
    index = gt.where(inside, position, -1.0).astype(np.int64)
    counts = indexing._one_hot_sum(index, bins, None, np.dtype(np.int32))
    return counts, edges


def unravel_index(indices, shape):
    from ...frontend import indexing

    indices = _integers(indices)
    dtype = keras_dtype(indices)
    return tuple(_cast(c, dtype) for c in indexing.unravel_index(indices, shape))


def _nan_quantiles(x, q, axis, method, keepdims, op):
    """NumPy's ``nanquantile``: :func:`gingham.nanquantile` over ``axis`` (an int, a tuple
    of them moved last and flattened, or None)."""
    from ...frontend import indexing

    x = _float(x)
    if isinstance(q, Tensor) and current_trace() is None:
        q = convert_to_numpy(q)
    if not isinstance(q, Tensor) and np.any((np.asarray(q) < 0) | (np.asarray(q) > 1)):
        raise ValueError(f"{op}: q must be in [0, 1] ([0, 100] for percentile), not {q}")
    axes = tuple(range(x.ndim)) if axis is None else tuple(
        int(a) % x.ndim for a in np.atleast_1d(axis))
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = gt.permute_dims(x, kept + list(axes))
    flat = moved.reshape(tuple(x.shape[a] for a in kept) + (-1,))
    result = indexing.nanquantile(flat, q, -1, interpolation=method)
    if keepdims:
        lead = result.shape[:result.ndim - len(kept)]
        result = result.reshape(lead + tuple(1 if a in axes else s
                                             for a, s in enumerate(x.shape)))
    return result


def nanquantile(x, q, axis=None, method="linear", keepdims=False):
    return _nan_quantiles(x, q, axis, method, keepdims, "nanquantile")


def nanpercentile(x, q, axis=None, method="linear", keepdims=False):
    scaled = q / 100.0 if isinstance(q, Tensor) else np.asarray(q, np.float64) / 100.0
    return _nan_quantiles(x, scaled, axis, method, keepdims, "nanpercentile")


def nanmedian(x, axis=None, keepdims=False):
    """The median of the non-NaN values (the mean of the two middle ones for an even
    count), as NumPy's: :func:`nanquantile` at 0.5."""
    return _nan_quantiles(x, 0.5, axis, "linear", keepdims, "nanmedian")


def vectorize(pyfunc, *, excluded=None, signature=None):
    """NumPy's ``vectorize`` through Keras' shared implementation, whose ``vmap`` here calls
    the function once per entry of the mapped leading axes and stacks the results (unrolled
    into a traced step, as :func:`~gingham.keras.backend.core.vectorized_map`)."""
    from keras.src import tree
    from keras.src.backend.common.backend_utils import vectorize_impl

    def vmap(function, in_axes):
        def mapped(*args):
            size = next(a.shape[0] for a, axis in zip(args, in_axes) if axis == 0)
            results = [function(*[a[i] if axis == 0 else a for a, axis in zip(args, in_axes)])
                       for i in range(size)]
            return tree.map_structure(lambda *parts: gt.stack(list(parts)), *results)
        return mapped

    return vectorize_impl(pyfunc, vmap, excluded=excluded, signature=signature)


def unique(x, sorted=True, return_index=False, return_inverse=False,  # noqa: A002
           return_counts=False, axis=None, size=None, fill_value=None):
    """NumPy's ``unique`` (with Keras' ``size`` and ``fill_value``), computed on the host:
    its result's shape depends on the values, so outside a compiled step only."""
    if current_trace() is not None:
        raise NotImplementedError("numpy.unique inside a compiled step is not implemented by "
                                  "gingham's Keras backend: its result's shape depends on the "
                                  "values")
    values = convert_to_numpy(x)
    found = np.unique(values, return_index=return_index, return_inverse=return_inverse,
                      return_counts=return_counts, axis=axis, equal_nan=False)
    outputs = list(found) if isinstance(found, tuple) else [found]
    inverse = 1 + return_index if return_inverse else None
    if size is not None:  # the unique values (and their indices, counts) cut or padded
        dim = 0 if axis is None else int(axis) % values.ndim
        count = outputs[0].shape[dim]
        for i, output in enumerate(outputs):
            if i == inverse:
                continue  # one entry per input element, whatever the size
            along = dim if i == 0 else 0
            if count > size:
                outputs[i] = np.take(output, np.arange(size), along)
            elif count < size:
                widths = [(0, 0)] * output.ndim
                widths[along] = (0, size - count)
                fill = fill_value if i == 0 and fill_value is not None else 0
                outputs[i] = np.pad(output, widths, constant_values=fill)
    tensors = [convert_to_tensor(outputs[0], keras_dtype(convert_to_tensor(x)))] + [
        convert_to_tensor(o) for o in outputs[1:]]
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


# -- windows ------------------------------------------------------------------------------------


def _window_length(x) -> int:
    return int(convert_to_numpy(x)) if isinstance(x, Tensor) else int(x)


def _symmetric_window(name: str, x, **kwargs) -> Tensor:
    """NumPy's window of ``x`` points (symmetric: torch's ``periodic=False``) in floatx."""
    from ... import signal

    make = getattr(signal, f"{name}_window")
    return make(_window_length(x), False, **kwargs, dtype=to_numpy_dtype(floatx()),
                device=current_device())


def bartlett(x): return _symmetric_window("bartlett", x)
def blackman(x): return _symmetric_window("blackman", x)
def hamming(x): return _symmetric_window("hamming", x)
def hanning(x): return _symmetric_window("hann", x)
def kaiser(x, beta): return _symmetric_window("kaiser", x, beta=float(beta))


def i0(x):
    """The modified Bessel function of order 0 (:func:`gingham.signal.i0`), in Keras' dtype:
    float64 for int64 and float64, float16 and bfloat16 kept, else floatx."""
    from ... import signal

    x = convert_to_tensor(x)
    dtype = keras_dtype(x)
    if dtype in ("int64", "float64"):
        dtype = "float64"
    elif dtype not in ("bfloat16", "float16"):
        dtype = floatx()
    return signal.i0(_cast(x, dtype))


__getattr__ = unsupported_module_getattr(__name__, "numpy")
