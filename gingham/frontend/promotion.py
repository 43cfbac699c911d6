"""PyTorch's type promotion: the dtype an operation of tensors and Python numbers computes in.

Tile's own rule (:func:`gingham.tile.shapes.combine`) is NumPy's, with weak literals; the
frontend follows PyTorch, whose users rely on it without thinking about it. Two parts:

* :func:`promote_types`, the table for two dtypes: a dtype of a higher category
  (bool < integer < floating) wins whatever its width (``int64`` with ``float16`` is
  ``float16``, where NumPy says ``float64``); within a category NumPy's table
  (``uint8`` with ``int8`` is ``int16``; ``bfloat16`` with ``float16`` is ``float32``).
* :func:`result_type`, for the operands of one operation, in three tiers by priority:
  tensors with dimensions, 0-d tensors, Python numbers (``bool`` as bool, ``int`` as int64,
  ``float`` as the default float dtype, float32 unless changed). Each tier promotes within
  itself; a lower tier counts only where its category is higher than the tiers above it.

The few elementwise ops whose operands differ by design (a bool mask beside values) do not
promote: their operands enter as they are (:func:`widened`, for a non-float32 default float)
and Tile's rule types the result (:func:`unpromoted_result_type`).

    result_type(float16_tensor, float32_scalar_tensor)   # float16: same category
    result_type(int32_tensor, float64_scalar_tensor)     # float64: a higher category
    result_type(int32_tensor, 2.5)                       # float32, the default dtype
    result_type(bool_tensor, 1)                          # int64
"""

from __future__ import annotations

import numpy as np

from ..tile import dtypes as dt
from ..tile.shapes import ExprType, combine
from .defaults import default_float
from .dims import DTypeError

#: What a Python bool or int is beside a tensor of a lower category (PyTorch's default
#: dtypes); a float is the default float dtype (:func:`~gingham.frontend.defaults.
#: default_float`: float32 unless ``set_default_dtype`` changed it).
_NUMBER_DTYPES = ((bool, dt.BOOL), (int, dt.INT64))


class PromotionError(DTypeError, RuntimeError):
    """A result dtype PyTorch refuses (a float result written into an integer tensor in
    place, arithmetic not defined for bool): a ``RuntimeError``, as PyTorch raises, and a
    :class:`DTypeError` like gingham's other dtype errors."""


def category(dtype) -> int:
    """0 for bool, 1 for the integers, 2 for the floating types: a higher category wins a
    promotion whatever the widths."""
    if dt.is_bool(dtype):
        return 0
    return 2 if dt.is_float(dtype) else 1


def promote_types(type1, type2) -> np.dtype:
    """PyTorch's promotion of two dtypes (see the module docstring).

        promote_types("int64", "float16")   # float16
        promote_types("uint8", "int8")      # int16
    """
    first, second = dt.as_tile_dtype(type1), dt.as_tile_dtype(type2)
    if first == second:
        return first
    if category(first) != category(second):
        return first if category(first) > category(second) else second
    promoted = dt.promote(first, second)
    if category(promoted) != category(first):  # uint64 with a signed type: NumPy's float64
        raise DTypeError(f"no integer type holds both {dt.dtype_name(first)} and "
                         f"{dt.dtype_name(second)} (PyTorch does not promote them either)")
    return promoted


def number_dtype(value) -> np.dtype:
    """The dtype a Python number has in :func:`result_type` (``True`` bool, ``3`` int64,
    ``2.5`` float32)."""
    for kind, dtype in _NUMBER_DTYPES:
        if isinstance(value, kind):
            return dtype
    if isinstance(value, float):
        return default_float()
    raise TypeError(f"unsupported operand type {type(value).__name__}")


def _is_number(operand) -> bool:
    """Whether an operand is a Python number (a literal of the op) rather than a tensor."""
    return isinstance(operand, (bool, int, float))


def _combine_categories(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """A higher-priority tier's dtype, unless the lower tier's category is higher."""
    if higher is None or lower is None:
        return lower if higher is None else higher
    return promote_types(higher, lower) if category(lower) > category(higher) else higher


def result_type(*operands) -> np.dtype:
    """PyTorch's result dtype of an operation of ``operands``: tensors (anything with
    ``dtype`` and ``shape``) and Python numbers (see the module docstring).

        result_type(gingham.ones(3, dtype="int32"), 2.5)    # float32
    """
    tiers: list[np.dtype | None] = [None, None, None]  # dimensioned, 0-d, numbers
    for operand in operands:
        if _is_number(operand):
            tier, dtype = 2, number_dtype(operand)
        else:
            tier, dtype = (0 if len(operand.shape) else 1), operand.dtype
        known = tiers[tier]
        tiers[tier] = dtype if known is None else promote_types(known, dtype)
    result = _combine_categories(tiers[1], tiers[2])
    result = _combine_categories(tiers[0], result)
    if result is None:
        raise TypeError("result_type: no operands")
    return result


def in_dtype(value, dtype: np.dtype):
    """A Python number as the operand of an operation computing in ``dtype``: an int in an
    integer ``dtype`` wrapped around into its range, as PyTorch converts it
    (``uint8_tensor < -1`` compares with 255, ``uint8_tensor == 257`` with 1); anything
    else unchanged (a literal takes the dtype it meets).

        in_dtype(-1, np.dtype("uint8"))     # 255
    """
    if type(value) is int and dt.is_integer(dtype):  # not a bool
        return np.asarray(value, np.int64).astype(dtype).item()
    return value


def widened(operands: list) -> list:
    """``operands`` (tensors, anything with ``dtype`` and ``astype``, and Python numbers) of
    an op that does not promote, with its integer tensors cast to the default float dtype
    where a Python float meets no float tensor and that default is not float32
    (``arange(3) * 0.5`` is float64 after ``set_default_dtype(float64)``, as in PyTorch;
    Tile types the literal float32, the promotion it gives under the float32 default). A bool
    tensor, a mask, is left as it is.

        widened([int32_tensor, 0.5])    # [int32_tensor.astype(float64), 0.5] under float64
    """
    floating = default_float()
    tensors = [o for o in operands if not _is_number(o)]
    if floating == dt.FLOAT32 or not any(isinstance(o, float) for o in operands) or any(
            dt.is_float(t.dtype) for t in tensors):
        return operands
    return [o if _is_number(o) or dt.is_bool(o.dtype) else o.astype(floating)
            for o in operands]


def unpromoted_result_type(*operands) -> np.dtype:
    """The dtype Tile's own rule (NumPy's, with weak literals:
    :func:`gingham.tile.shapes.combine`) gives an op of ``operands`` that enter unpromoted
    (after :func:`widened`): a tensor's dtype is strong, a Python float a weak float32, an int
    or bool a weak int32.

        unpromoted_result_type(bool_mask, float16_tensor, 0.0)     # float16
    """
    types = [ExprType(dt.FLOAT32 if isinstance(o, float) else dt.INT32, weak=True)
             if _is_number(o) else ExprType(o.dtype) for o in operands]
    joined = types[0]
    for t in types[1:]:
        joined = combine(joined, t)
    return joined.dtype


def float_result_type(*operands) -> np.dtype:
    """:func:`result_type`, with bool and integer results in the default float dtype
    (float32 unless changed): the dtype of a
    floating-point function of the operands (``/``, ``atan2``), as PyTorch's."""
    result = result_type(*operands)
    return result if dt.is_float(result) else default_float()


def can_cast(source, target) -> bool:
    """PyTorch's rule for results written into a tensor (in place, ``out=``): no cast to a
    lower category (float to integer, integer to bool)."""
    return category(dt.as_tile_dtype(target)) >= category(dt.as_tile_dtype(source))


def check_writable(op: str, result, target) -> None:
    """Raise :class:`PromotionError` where an in-place ``op`` would write a result of dtype
    ``result`` into a tensor of dtype ``target`` (``int_tensor += 1.5``)."""
    if not can_cast(result, target):
        raise PromotionError(f"{op}: result type {dt.dtype_name(result)} can't be cast to the "
                             f"desired output type {dt.dtype_name(target)} (an in-place "
                             "operation keeps its tensor's dtype)")
