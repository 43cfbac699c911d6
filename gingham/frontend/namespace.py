"""Functions of the torch namespace (``gingham.<name>``) not defined beside their operations.

Two kinds. The function spellings of Tensor methods (``gingham.atan2(y, x)``,
``gingham.sum(x, 1)``), made from the methods by :func:`_function_of`: those whose names do
not shadow a builtin are globals here (``atan2``, ``logsumexp``), the others are entries of
:data:`METHOD_FUNCTIONS` (``sum``, ``max``, ``abs``), which ``gingham/__init__.py`` exports
whole. A new method gets its function spelling by adding its name to one of the two lists
below. And PyTorch's creation, promotion and combinatorics helpers (``zeros_like``, ``eye``,
``promote_types``, ``combinations``, ``linspace``, ...), which have no method.

    gingham.sum(x, dim=1)               # METHOD_FUNCTIONS["sum"], x.sum(dim=1)
    gingham.zeros_like(x, dtype="int32")
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Callable

import numpy as np

from ..tile import dtypes as dt
from . import promotion
from .defaults import default_float
from .dims import ShapeError, _broadcast_shapes, _memory_format, _sizes, contiguous_format
from .layout import _broadcast_to, meshgrid, stack
from .strides import made_like
from .tensor import Tensor, _creation, full, tensor, zeros


def _function_of(name: str) -> Callable:
    """PyTorch's function spelling ``torch.<name>(input, ...)`` of the Tensor method ``name``."""
    method = getattr(Tensor, name)

    @functools.wraps(method)
    def function(input: Tensor, *args, **kwargs):  # noqa: A002 (PyTorch's name)
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a gingham.Tensor, not "
                            f"{type(input).__name__}")
        return method(input, *args, **kwargs)

    return function


# gingham.atan2(y, x), gingham.logsumexp(x, dim), ...: the methods' function spellings.
tan, sinh, cosh, asin, acos, atan, arcsin, arccos, arctan = map(
    _function_of, "tan sinh cosh asin acos atan arcsin arccos arctan".split())
asinh, acosh, atanh, arcsinh, arccosh, arctanh = map(
    _function_of, "asinh acosh atanh arcsinh arccosh arctanh".split())
log1p, expm1, exp2, log2, log10 = map(_function_of, "log1p expm1 exp2 log2 log10".split())
atan2, arctan2, hypot, logaddexp, logaddexp2, fmod, remainder, copysign = map(
    _function_of, "atan2 arctan2 hypot logaddexp logaddexp2 fmod remainder copysign".split())
gcd, lcm, nextafter = map(_function_of, "gcd lcm nextafter".split())
trunc, fix, frac, isnan, isinf, isfinite, nan_to_num = map(
    _function_of, "trunc fix frac isnan isinf isfinite nan_to_num".split())
lerp, addcmul, addcdiv = map(_function_of, "lerp addcmul addcdiv".split())
logsumexp, count_nonzero, nansum, nanmean, aminmax = map(
    _function_of, "logsumexp count_nonzero nansum nanmean aminmax".split())

# The rest of torch.Tensor's methods as functions (torch.exp(x), torch.sum(x, 1),
# torch.max(x, dim=1), ...): gingham/__init__.py exports them. A table, not globals of this
# module, where sum, max, all, abs, round and pow would hide the builtins that it calls.
_METHOD_FUNCTION_NAMES = """
    abs exp log sqrt rsqrt sin cos tanh sigmoid erf erfc erfinv relu sign sgn signbit floor
    ceil round neg negative positive reciprocal square pow float_power
    add sub subtract mul multiply div divide true_divide floor_divide
    eq ne lt le gt ge not_equal less less_equal greater greater_equal
    logical_not logical_and logical_or logical_xor bitwise_not bitwise_and bitwise_or
    bitwise_xor bitwise_left_shift bitwise_right_shift
    sum mean prod cumsum cumprod max min amax amin argmax argmin var std all any
    logcumsumexp cummax cummin msort kthvalue median mode quantile norm dist
    mm bmm mv dot vdot ger addmm addmv addr baddbmm addbmm fmax fmin clamp clip clamp_min
    clamp_max deg2rad rad2deg heaviside xlogy sinc logit isclose allclose equal isposinf
    isneginf isreal is_floating_point is_complex is_nonzero is_same_size is_signed numel
    flatten unflatten squeeze unsqueeze transpose swapaxes swapdims permute t narrow select
    split chunk unbind tensor_split hsplit vsplit dsplit split_with_sizes ravel broadcast_to
    adjoint diagflat clone detach masked_fill softmax log_softmax
    take masked_select masked_scatter nonzero argwhere index_fill index_copy index_put
    scatter_reduce slice_scatter select_scatter diagonal_scatter unique unique_consecutive
    hardshrink prelu ldexp get_device is_inference
""".split()
METHOD_FUNCTIONS: dict[str, Callable] = {
    name: _function_of(name) for name in _METHOD_FUNCTION_NAMES}


METHOD_FUNCTIONS["absolute"] = METHOD_FUNCTIONS["abs"]

# torch's top-level in-place functions that are Tensor methods too (torch.relu_(x),
# torch.zero_(x), torch.clamp_(x, min=0), ...): gingham/__init__.py exports the function
# spellings of those Tensor has, from :func:`in_place_functions`.
IN_PLACE_FUNCTION_NAMES = """
    abs_ acos_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_
    atan_ atanh_ ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ detach_ erf_
    erfc_ exp2_ exp_ expm1_ fill_ fix_ floor_ frac_ gcd_ i0_ index_put_ lcm_ ldexp_ log10_
    log1p_ log2_ log_ logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ relu_ round_
    rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_ zero_
""".split()


def in_place_functions() -> dict[str, Callable]:
    """``{name: torch.<name>}`` for the names of :data:`IN_PLACE_FUNCTION_NAMES` that are
    Tensor methods. A function, not a table made here: the in-place methods are installed
    (by :mod:`gingham.frontend.inplace`) after this module is imported.

        in_place_functions()["relu_"](x)      # x.relu_()
    """
    return {name: _function_of(name) for name in IN_PLACE_FUNCTION_NAMES
            if hasattr(Tensor, name)}


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """All tuples of one element from each 1-d tensor, ``[prod(len), len(tensors)]`` (a
    single tensor is returned as it is), as ``torch.cartesian_prod``."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """The ``r``-element combinations of the 1-d ``input``'s elements, ``[count, r]``, in
    ``itertools.combinations`` order, as ``torch.combinations``."""
    if input.ndim != 1:
        raise ShapeError(f"combinations: input must be 1-d, not shape {input.shape}")
    choose = (itertools.combinations_with_replacement if with_replacement
              else itertools.combinations)
    picks = np.array(list(choose(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    if picks.shape[0] == 0:
        return zeros((0, r), input.dtype, input.device)
    return input[tensor(picks, device=input.device)]


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between the rows of ``x1`` ``[..., n, d]`` and of ``x2``
    ``[..., m, d]``: ``[..., n, m]``, batch dims broadcast, as ``torch.cdist``."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: inputs must be [..., n, d] and [..., m, d], not {x1.shape} "
                         f"and {x2.shape}")
    if p < 0:
        raise ValueError(f"cdist: p must be non-negative, not {p}")
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, -1)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of the 1-d ``x``: columns ``x ** (N-1) .. x ** 0`` (or
    increasing), as ``torch.vander``."""
    count = x.shape[0] if N is None else N
    powers = np.arange(count)[::1 if increasing else -1]
    columns = [x ** int(k) if k else ones_like(x) for k in powers]
    return stack(columns, 1) if columns else zeros((x.shape[0], 0), x.dtype, x.device)


def _triangle_indices(row: int, col: int, offset: int, lower: bool, dtype, device) -> Tensor:
    mask = (np.tri(row, col, offset, bool) if lower
            else ~np.tri(row, col, offset - 1, bool))
    return tensor(np.stack(np.nonzero(mask)), dtype=dtype or dt.INT64, device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The ``[2, count]`` coordinates of the lower triangle, as ``torch.tril_indices``."""
    return _triangle_indices(row, col, offset, True, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    return _triangle_indices(row, col, offset, False, dtype, device)


def _like(op: str, input: Tensor, value, dtype, device, requires_grad,  # noqa: A002
          memory_format) -> Tensor:
    """``value`` in ``input``'s shape, dtype and device (unless given), laid out as
    ``input`` (PyTorch's default ``preserve_format``) or in ``memory_format``."""
    fmt = _memory_format(op, memory_format, input.ndim)
    made = full(input.shape, value, input.dtype if dtype is None else dtype,
                device or input.device, requires_grad=requires_grad)
    made._layout = made._layout.with_strides(made_like(input.shape, input._layout.strides, fmt))
    return made


def zeros_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,  # noqa: A002
               memory_format=None) -> Tensor:
    """Zeros of ``input``'s shape, dtype and device (unless given), as ``torch.zeros_like``."""
    return _like("zeros_like", input, 0, dtype, device, requires_grad, memory_format)


def ones_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,  # noqa: A002
              memory_format=None) -> Tensor:
    return _like("ones_like", input, 1, dtype, device, requires_grad, memory_format)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None,  # noqa: A002
              requires_grad: bool = False, memory_format=None) -> Tensor:
    return _like("full_like", input, fill_value, dtype, device, requires_grad, memory_format)


empty_like = zeros_like  # gingham hands out no uninitialised memory: zeros


def empty(*size, dtype=None, device=None, requires_grad: bool = False,
          memory_format=contiguous_format) -> Tensor:
    """Zeros of ``size`` (gingham hands out no uninitialised memory), as ``torch.empty``,
    laid out in ``memory_format`` (:mod:`gingham.frontend.strides`).

        buffer = gingham.empty(8, 3, 32, 32, memory_format=gingham.channels_last)
    """
    shape, dtype, device = _creation("empty", size, dtype, device)
    made = zeros(shape, dtype=dtype, device=device, requires_grad=requires_grad)
    fmt = _memory_format("empty", memory_format, made.ndim)
    made._layout = made._layout.with_strides(made_like(made.shape, None, fmt))
    return made


def eye(n: int, m: int | None = None, *, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    """The ``n x m`` identity matrix (``m = n`` by default), as ``torch.eye``."""
    n, m = _sizes("eye", (n, n if m is None else m))
    return tensor(np.eye(n, m), dtype=default_float() if dtype is None else dtype,
                  device=device, requires_grad=requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return tensor(s, dtype=default_float() if dtype is None else dtype, device=device,
                  requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` itself when it is a tensor of that dtype and device, else a new tensor."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor holding a copy of ``ndarray`` on the default device (PyTorch's shares the
    memory; a device tensor cannot)."""
    return tensor(ndarray)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def get_default_dtype() -> np.dtype:
    """The dtype Python floats and float factories give: float32 unless
    :func:`gingham.set_default_dtype` changed it, as ``torch.get_default_dtype``."""
    return default_float()


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    return _broadcast_shapes("broadcast_shapes", [tuple(s) if not isinstance(s, int) else (s,)
                                                  for s in shapes])


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape."""
    shape = _broadcast_shapes("broadcast_tensors", [t.shape for t in tensors])
    return tuple(_broadcast_to(t, shape, "broadcast_tensors") for t in tensors)


def result_type(tensor1, tensor2) -> np.dtype:
    """The dtype of an arithmetic result of the two operands (tensors or Python numbers), by
    PyTorch's rules (:func:`gingham.frontend.promotion.result_type`).

        gingham.result_type(gingham.ones(2, dtype="float16"), gingham.tensor(1.0))  # float16
    """
    return promotion.result_type(tensor1, tensor2)


def promote_types(type1, type2) -> np.dtype:
    """PyTorch's table: a float type beside an integer or bool one wins whatever its width.

        gingham.promote_types("int64", "float16")   # float16
    """
    return promotion.promote_types(type1, type2)


def can_cast(from_, to) -> bool:
    """PyTorch's rule: no cast to a lower kind (float to integer, integer to bool)."""
    return promotion.can_cast(from_, to)


@dataclasses.dataclass(frozen=True)
class FloatInfo:
    """What :func:`finfo` returns: the fields of ``torch.finfo``, as Python numbers (so they
    combine with tensors in either order; a NumPy scalar on the left would turn a tensor
    into an array), ``dtype`` the dtype's name."""

    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    resolution: float
    dtype: str


@dataclasses.dataclass(frozen=True)
class IntInfo:
    """What :func:`iinfo` returns: the fields of ``torch.iinfo``, as Python ints."""

    bits: int
    max: int
    min: int
    dtype: str


def finfo(type=None) -> FloatInfo:  # noqa: A002 (torch's argument name)
    """``torch.finfo``: the numerical properties of a float dtype (the default dtype without
    one); ``TypeError`` for another kind of dtype, as PyTorch's.

        scores = scores + (1.0 - mask) * gingham.finfo(scores.dtype).min
    """
    dtype = dt.as_tile_dtype(type if type is not None else get_default_dtype())
    if not dt.is_float(dtype):
        raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo "
                        "to handle 'torch.finfo'")
    if dt.is_bfloat16(dtype):
        import ml_dtypes  # as gingham.bfloat16, imported on first use

        info = ml_dtypes.finfo(dtype)
    else:
        info = np.finfo(dtype)
    # PyTorch's resolution is 10 ** -digits10 exactly (NumPy's is that value in the dtype)
    return FloatInfo(int(info.bits), float(info.eps), float(info.max), float(info.min),
                     float(info.tiny), float(info.smallest_normal), 10.0 ** -int(info.precision),
                     dt.dtype_name(dtype))


def iinfo(type) -> IntInfo:  # noqa: A002
    """``torch.iinfo``: the range of an integer dtype; ``TypeError`` for bool or a float.

        gingham.iinfo(gingham.int32).max    # 2147483647
    """
    dtype = dt.as_tile_dtype(type)
    if dt.is_bool(dtype):
        raise TypeError("torch.bool is not supported by torch.iinfo")
    if not dt.is_integer(dtype):
        raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                        "handle 'torch.iinfo'")
    info = np.iinfo(dtype)
    return IntInfo(int(info.bits), int(info.max), int(info.min), dt.dtype_name(dtype))


def _inclusive_range(start, end, step=1, *, dtype=None, device=None) -> Tensor:
    """``start`` to ``end`` inclusive (deprecated in PyTorch, float32 by default)."""
    values = np.arange(start, end + step / 2, step)
    return tensor(values, dtype=default_float() if dtype is None else dtype, device=device)


METHOD_FUNCTIONS["range"] = _inclusive_range  # torch.range; a global would hide the builtin


def rsub(input: Tensor, other, *, alpha=1) -> Tensor:  # noqa: A002
    """``other - alpha * input``, as ``torch.rsub``."""
    return (input if alpha == 1 else input * alpha).__rsub__(other)


def fill(input: Tensor, value) -> Tensor:  # noqa: A002
    """A tensor like ``input`` holding ``value`` everywhere (``torch.fill``, out of place)."""
    return full_like(input, value.item() if isinstance(value, Tensor) else value)


def linspace(start: float, end: float, steps: int, *, dtype=None,
             device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, as
    ``torch.linspace`` (computed on the host: the values are constants of the program)."""
    dtype = dt.as_tile_dtype(dtype) if dtype is not None else default_float()
    return tensor(_linspace_values("linspace", start, end, steps).astype(dtype),
                  device=device, requires_grad=requires_grad)


def _linspace_values(op: str, start: float, end: float, steps: int) -> np.ndarray:
    if steps < 0:
        raise ValueError(f"{op}: steps must be non-negative, not {steps}")
    # torch counts the second half back from ``end``, so both ends come out exact
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    positions = np.arange(steps)
    return np.where(positions < max(steps // 2, 1), start + step * positions,
                    end - step * (steps - 1 - positions))


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype=None,
             device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``base ** linspace(start, end, steps)``, as ``torch.logspace``."""
    exponents = _linspace_values("logspace", start, end, steps)
    dtype = dt.as_tile_dtype(dtype) if dtype is not None else default_float()
    return tensor((float(base) ** exponents).astype(dtype), device=device,
                  requires_grad=requires_grad)
