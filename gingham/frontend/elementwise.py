"""Elementwise math of :class:`~gingham.frontend.tensor.Tensor`: the formulas and dtype rules.

Two layers. The formulas (``_log1p``, ``_atan2``, ``_euclid``, ...) take and return Tile builder
nodes: each is one composition of Tile's own intrinsics, written so that Tile's autodiff gives
PyTorch's gradient (where a formula has branches, the branch not taken reads a harmless value,
a "double where"). The Tensor-level helpers (``_true_divide``, ``_remainder``, ``_bitwise``,
``where``, ...) choose dtypes as PyTorch does (integers to float32 for a floating-point
function, weak Python scalars) and build one elementwise node through ``Tensor._elementwise``.
The Tensor methods (``x.log1p()``, ``x % y``) call these.

    where(mask, x, 0.0)                 # builder.select over broadcast operands
    _true_divide(counts, 2)             # int32 counts / 2 -> float32
"""

from __future__ import annotations

import math

import numpy as np

from ..tile import builder
from ..tile import dtypes as dt
from . import promotion
from .defaults import default_float
from .tensor import Tensor, tensor


def _eq(a, b):
    if isinstance(a, builder.Tensor):
        return a.eq(b)
    return b.eq(a)


def _ne(a, b):
    if isinstance(a, builder.Tensor):
        return a.ne(b)
    return b.ne(a)


def _autocast_float32(x: Tensor) -> Tensor:
    """Under ``gingham.autocast``, a half tensor cast up to float32: the ops PyTorch's autocast
    runs in float32 (exp, log, pow, sum, mean) call this first."""
    from .amp import cast_inputs_float32

    return cast_inputs_float32(x)[0]


def _unary_float(x: Tensor, fn, name: str) -> Tensor:
    if not dt.is_float(x.dtype) and default_float() != dt.FLOAT32:
        x = x.astype(default_float())  # Tile's math on an integer computes in float32
    dtype = x.dtype if dt.is_float(x.dtype) else default_float()
    return x._elementwise(fn, [], name, dtype)


def _floating(x: Tensor, autocast: bool = False) -> Tensor:
    """``x`` in a floating-point dtype (an integer or bool tensor in the default float dtype,
    float32 unless changed: PyTorch's result for them); ``autocast``: half types as float32
    under ``gingham.autocast``."""
    x = _autocast_float32(x) if autocast else x
    return x if dt.is_float(x.dtype) else x.astype(default_float())


def _any_float(a: Tensor, b) -> bool:
    """Whether ``a`` and ``b`` compute in a floating dtype (PyTorch's promotion)."""
    return dt.is_float(promotion.result_type(a, a._scalar_or_tensor(b)))


def _promoted(a: Tensor, b, floating: bool = False) -> tuple[Tensor, "Tensor | float"]:
    """Both operands in PyTorch's common dtype (:func:`promotion.result_type`; ``floating``:
    a bool or integer one as float32, for a floating-point function). A number stays a
    number, a weak literal that takes that dtype; one in a float computation as a float."""
    b = a._scalar_or_tensor(b)
    dtype = (promotion.float_result_type if floating else promotion.result_type)(a, b)
    if isinstance(b, Tensor):
        b = b if b.dtype == dtype else b.astype(dtype)
    elif dt.is_float(dtype):
        b = float(b)
    else:
        b = promotion.in_dtype(b, dtype)
    return (a if a.dtype == dtype else a.astype(dtype)), b


def _float_operands(a: Tensor, b) -> tuple[Tensor, "Tensor | float"]:
    """Both operands of a floating-point binary function in their common floating dtype
    (integer and bool ones as float32), as PyTorch promotes them."""
    return _promoted(a, b, floating=True)


def _no_bool(op: str, what: str, *operands) -> None:
    """PyTorch refuses ``-`` with a bool operand (a mask's negation is ``~``)."""
    if any(isinstance(o, bool) or isinstance(o, Tensor) and dt.is_bool(o.dtype)
           for o in operands):
        raise promotion.PromotionError(
            f"{op}: {what} with a bool tensor is not supported, as in PyTorch; to invert a "
            "mask use `~` or logical_not(), to compare two use logical_xor()")


def _series_argument(x, small):
    """``x`` where ``small`` holds, 0 elsewhere: what a series branch of a select reads, so that
    the branch not taken has a finite derivative (see the composed functions of Tensor)."""
    return builder.select(small, x, 0.0)


def _series_terms(dtype: str, float32_terms: int, float64_terms: int) -> int:
    """How many terms a series formula takes: enough for ``dtype``'s rounding (float64's
    needs about twice float32's; half types compute in float32)."""
    return float64_terms if dtype == "float64" else float32_terms


def _log1p(u, dtype: str = "float32"):
    """``log(1 + u)`` of a builder node: where ``|u| < 0.25`` the series of ``2 atanh(s)``,
    ``s = u / (2 + u)`` (``s^2 < 0.021``), to ``s^7 / 7`` in float32 (next term
    ``s^8 / 9 < 2e-8``) or ``s^19 / 19`` in float64 (next ``s^20 / 21 < 1e-18``);
    ``log(1 + u)`` elsewhere, whose rounding of ``1 + u`` costs at most 5 ulps there.

        _log1p(builder.ref("X"), "float64")
    """
    small = builder.abs(u) < 0.25
    v = _series_argument(u, small)
    s = v / (v + 2.0)
    s2 = s * s
    odd = 2 * _series_terms(dtype, 4, 10) - 1  # the last odd denominator
    nested = 1.0 / odd
    for k in range(odd - 2, 0, -2):  # 1 + s2 (1/3 + s2 (1/5 + ...))
        nested = 1.0 / k + s2 * nested
    series = s * 2.0 * nested
    direct = builder.log(builder.select(small, 1.0, u + 1.0))
    return builder.select(small, series, direct)


def _expm1(x, dtype: str = "float32"):
    """``exp(x) - 1`` of a builder node: Taylor's series where ``|x| < 0.25``, to ``x^7 / 7!``
    in float32 (the next term is below 2e-9 relative) or ``x^13 / 13!`` in float64 (below
    1e-18), ``exp(x) - 1`` elsewhere.

        _expm1(builder.ref("X"), "float64")
    """
    small = builder.abs(x) < 0.25
    v = _series_argument(x, small)
    last = _series_terms(dtype, 7, 13)
    nested = 1.0 + v * (1.0 / last)
    for k in range(last - 1, 1, -1):  # x (1 + x/2 (1 + x/3 (... (1 + x/last))))
        nested = 1.0 + v * (1.0 / k) * nested
    return builder.select(small, v * nested,
                          builder.exp(builder.select(small, 0.0, x)) - 1.0)


#: Beyond this ``|x|``, ``1 + x^2`` is ``x^2`` in float32 (``2^24``) and asinh/acosh are
#: ``log(2|x|)`` to within ``1 / (4 x^2)``; below it ``x^2`` cannot overflow.
_HUGE_ARGUMENT = 4096.0


def _asinh(x, dtype: str = "float32"):
    """``asinh(x) = sign(x) log1p(t + t^2 / (1 + sqrt(1 + t^2)))``, ``t = |x|`` (no cancellation
    for small ``t``), ``log(t) + log(2)`` for huge ``t``. ``t`` is a select, not ``abs``, so the
    gradient at 0 is 1 (abs' would be 0)."""
    negative = x < 0
    t = builder.select(negative, -x, x)
    huge = t > _HUGE_ARGUMENT
    m = builder.select(huge, 0.0, t)
    moderate = _log1p(m + m * m / (1.0 + builder.sqrt(1.0 + m * m)), dtype)
    large = builder.log(builder.select(huge, t, 1.0)) + math.log(2.0)
    magnitude = builder.select(huge, large, moderate)
    return builder.select(negative, -magnitude, magnitude)


def _acosh(x, dtype: str = "float32"):
    """``acosh(x) = log1p(u + sqrt(u) sqrt(u + 2))``, ``u = x - 1`` (accurate near 1), and
    ``log(x) + log(2)`` for huge ``x``; NaN below 1 from the square root. Two roots, not
    ``sqrt(u (u + 2))``: at ``x = 1`` the product rule would give ``inf * 0``, NaN, where the
    gradient is inf (PyTorch's)."""
    huge = x > _HUGE_ARGUMENT
    u = builder.select(huge, 0.0, x - 1.0)
    moderate = _log1p(u + builder.sqrt(u) * builder.sqrt(u + 2.0), dtype)
    large = builder.log(builder.select(huge, x, 1.0)) + math.log(2.0)
    return builder.select(huge, large, moderate)


def _sign_bit(x):
    """Whether ``x`` is negative, ``-0.0`` included (``1 / -0.0`` is ``-inf``)."""
    return builder.logical_or(x < 0, builder.logical_and(x.eq(0.0), 1.0 / x < 0))


def _atan2(y, x):
    """``atan2`` from ``atan`` of the ratio of the smaller magnitude to the larger (so it
    never divides by zero, and the derivative is finite on the axes): ``atan(y / x)`` plus
    ``+-pi`` where ``x`` is negative, or ``+-pi/2 - atan(x / y)`` where ``|y| > |x|``. Each
    branch divides by 1 where it is not taken (and at the origin, whose angle is then 0 or
    ``+-pi`` by the signs of the zeros, as C's). The turns are selects of literals, which
    take the operands' type where they meet them (float64's pi in float64)."""
    steep = builder.abs(y) > builder.abs(x)
    flat_divisor = builder.select(builder.logical_or(steep, x.eq(0.0)), 1.0, x)
    half_turn = builder.select(_sign_bit(y), -math.pi, math.pi)
    flat = builder.atan(y / flat_divisor) + builder.select(_sign_bit(x), half_turn, 0.0)
    quarter_turn = builder.select(y < 0, -math.pi / 2, math.pi / 2)
    steep_angle = quarter_turn - builder.atan(x / builder.select(steep, y, 1.0))
    return builder.select(steep, steep_angle, flat)


def _logaddexp(a, b, power, log_base: float, dtype: str = "float32"):
    """``log_base(power(a) + power(b))`` as ``max + log1p(power(-|a - b|)) / log(base)``; equal
    arguments (+-inf too, where ``a - b`` is NaN) as ``(a + b) / 2 + log_base(2)``, which also
    splits the gradient evenly, as PyTorch's."""
    tie = a.eq(b)
    high = builder.maximum(a, b)
    gap = builder.select(tie, 0.0, -builder.abs(a - b))
    apart = high + _log1p(power(gap), dtype) * (1.0 / log_base)
    return builder.select(tie, (a + b) * 0.5 + math.log(2.0) / log_base, apart)


def _trunc(a):
    return builder.select(a < 0, builder.ceil(a), builder.floor(a))


def _finfo_max(dtype) -> float:
    if dt.is_bfloat16(dtype):
        return 3.3895313892515355e38  # (2 - 2^-7) * 2^127
    return float(np.finfo(dtype).max)


def _without_nan(x: Tensor) -> Tensor:
    """``x`` with NaN as 0 (a float tensor; others unchanged)."""
    if not dt.is_float(x.dtype):
        return x
    return x._elementwise(lambda a: builder.select(a.ne(a), 0.0, a), [], "nan_as_zero")


def _true_divide(a: Tensor, b) -> Tensor:
    """``/`` in the operands' common floating dtype, as PyTorch's: integers give the
    default float dtype (Tile's ``/`` on integers truncates, so they are converted first)."""
    a, b = _promoted(a, b, floating=True)
    return a._elementwise(lambda x, y: x / y, [b], "divide")


def _pow_of(dtype: np.dtype):
    """``pow`` of builder nodes of the common ``dtype``: Tile's (floating point) for floats;
    for integers the float64 power rounded back to ``dtype``, as PyTorch keeps integer powers
    integers (exact while the result fits 53 bits)."""
    if dt.is_float(dtype):
        return builder.pow
    _not_for_bool("pow", dtype)
    name = dt.dtype_name(dtype)

    def integer_pow(a, b):
        real = builder.pow(builder.cast(a, "float64"), builder.cast(b, "float64"))
        return builder.cast(builder.round(real), name)

    return integer_pow


def _weak_scalar(value, like: Tensor) -> Tensor:
    """A number on the left of a reflected operator as a 0-d tensor of the dtype it takes
    beside ``like`` (a weak scalar, as in PyTorch: ``7 // int32_tensor`` is int32)."""
    if isinstance(value, Tensor):
        return value
    dtype = promotion.result_type(like, like._scalar_or_tensor(value))
    return tensor(np.asarray(value, dtype), device=like.device)


def _sign_differs(remainder, divisor):
    """Where a C remainder (the dividend's sign) is not Python's (the divisor's sign): it is
    nonzero and of the other sign than the divisor."""
    if not isinstance(divisor, builder.Tensor):  # a number: its sign is known now
        return remainder < 0 if divisor > 0 else remainder > 0
    return builder.logical_or(builder.logical_and(remainder < 0, divisor > 0),
                              builder.logical_and(remainder > 0, divisor < 0))


def _remainder(a: Tensor, b) -> Tensor:
    """``a % b`` with the divisor's sign, as PyTorch's (and Python's) ``%``: Tile's C
    remainder (``fmod`` on floats), plus the divisor where the signs differ, as PyTorch
    computes it. (Not ``a - floor(a / b) * b``, which is NaN for an infinite divisor, where
    PyTorch gives ``a`` or ``b``: ``-3 % inf == inf``.) The gradient for ``b`` is
    ``-floor(a / b)``, PyTorch's."""
    a, b = _promoted(a, b)
    _not_for_bool("remainder", a)

    def remainder(x, y):
        r = x % y
        return builder.select(_sign_differs(r, y), r + y, r)

    return a._elementwise(remainder, [b], "remainder")


def _floor_divide(a: Tensor, b) -> Tensor:
    """``a // b`` rounded toward minus infinity, as PyTorch's ``//``; integers from Tile's
    truncating ``/``, one less where the remainder's sign differs from the divisor's."""
    a, b = _promoted(a, b)
    _not_for_bool("floor_divide", a)
    if dt.is_float(a.dtype):
        return _true_divide(a, b).floor()

    def floor_divide(x, y):
        return builder.select(_sign_differs(x % y, y), x / y - 1, x / y)

    return a._elementwise(floor_divide, [b], "floor_divide")


def _gcd_steps(*operands) -> int:
    """Euclid's worst case for the operands' integer width: consecutive Fibonacci numbers
    below ``2^bits``, about ``1.44 bits`` remainders."""
    bits = max(np.dtype(o.dtype).itemsize * 8 if isinstance(o, Tensor) else 32
               for o in operands)
    return int(bits * 1.45) + 1


def _euclid(a, b, steps: int):
    """``gcd(|a|, |b|)`` by ``steps`` remainders; once the divisor is 0 nothing changes."""
    a, b = builder.abs(a), builder.abs(b)
    for _ in range(steps):
        done = b.eq(0)
        a, b = builder.select(done, a, b), builder.select(done, b, a % builder.select(done, 1, b))
    return a


# bfloat16's constants (NumPy's finfo does not know ml_dtypes' type): 7 mantissa bits, the
# exponent range of float32.
_BFLOAT16_FINFO = type("Finfo", (), dict(nmant=7, smallest_normal=2.0 ** -126,
                                         smallest_subnormal=2.0 ** -133,
                                         max=3.3895313892515355e38))


def _not_for_bool(op: str, promoted) -> None:
    """PyTorch defines no ``//``, ``%``, ``fmod`` or ``**`` of bools (a tensor or a dtype:
    the operands' common one)."""
    if dt.is_bool(getattr(promoted, "dtype", promoted)):
        raise promotion.PromotionError(f"{op}: not defined for bool operands, as in PyTorch; "
                                       "convert them with .int() first")


def _integral(op: str, *operands) -> None:
    for operand in operands:
        if isinstance(operand, Tensor) and not (dt.is_bool(operand.dtype)
                                                or dt.is_integer(operand.dtype)):
            raise promotion.PromotionError(f"{op}: needs bool or integer tensors, not "
                                           f"{dt.dtype_name(operand.dtype)}")
        if isinstance(operand, float):
            raise promotion.PromotionError(f"{op}: needs bool or integer operands, not the "
                                           f"float {operand}")


def _bitwise(a: Tensor, b, op: str, logical) -> Tensor:
    """``a op b``: logical on two bool operands, bitwise on integers (a Python bool among
    integers is 0 or 1), as PyTorch's."""
    _integral(op, a, b)
    if dt.is_bool(a.dtype) and (isinstance(b, bool) or
                                isinstance(b, Tensor) and dt.is_bool(b.dtype)):
        return a._elementwise(logical, [b], op, dt.BOOL)
    bitwise = {"&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y}[op]
    return a._elementwise(bitwise, [b], op)


def maximum(a: Tensor, b) -> Tensor:
    return a._elementwise(builder.maximum, [b], "maximum")


def minimum(a: Tensor, b) -> Tensor:
    return a._elementwise(builder.minimum, [b], "minimum")


def where(cond: Tensor, a=None, b=None):
    """``a`` where the bool ``cond`` is True, ``b`` elsewhere (broadcast together; numbers or
    tensors), as ``torch.where``. With ``cond`` alone, ``nonzero(cond, as_tuple=True)``: a
    tuple of int64 coordinates whose length depends on the values (read from the device, so
    an error inside ``gingham.jit``).

        gingham.where(x > 0, x, 0.0)
        rows, cols = gingham.where(adjacency)
    """
    if a is None and b is None:
        from .indexing import _nonzero

        return _nonzero("where(condition)", cond, as_tuple=True)
    if a is None or b is None:
        raise TypeError("where: give both values (where(condition, input, other)) or neither "
                        "(where(condition), the coordinates of the True elements)")
    if not isinstance(cond, Tensor):
        if not isinstance(cond, np.ndarray):
            raise TypeError(f"where: condition must be a tensor, not {type(cond).__name__}")
        home = next((v.device for v in (a, b) if isinstance(v, Tensor)), None)
        cond = tensor(cond, device=home)
    # NumPy arrays become tensors and NumPy scalars numbers first, as for ``+``: their dtype
    # then counts in the result's (an array is not a weakly typed Python number).
    a, b = cond._scalar_or_tensor(a), cond._scalar_or_tensor(b)
    dtype = _where_dtype(a, b)
    a, b = (v.astype(dtype) if isinstance(v, Tensor) and v.dtype != dtype else v for v in (a, b))
    if dt.is_bool(dtype) or not (isinstance(a, Tensor) or isinstance(b, Tensor)):
        # Tile types literals by its rule (a Python bool or int as int32, a float float32):
        # the result cast to PyTorch's dtype
        def select(c, x, y):
            return builder.cast(builder.select(c, x, y), dt.dtype_name(dtype))
    else:
        def select(c, x, y):
            return builder.select(c, x, y)
    return cond._elementwise(select, [a, b], "where", dtype)


def _where_dtype(a, b) -> np.dtype:
    """PyTorch's result dtype of two operands (tensors or Python numbers)."""
    return promotion.result_type(a, b)


_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    value = coefficients[0]
    for c in coefficients[1:]:
        value = value * w + c
    return value


def _erfinv(y: Tensor) -> Tensor:
    """The inverse of erf on (-1, 1), +-inf at +-1, NaN beyond: Giles' approximation refined by
    two Newton steps on Tile's erf (so the value is erf's inverse to float32's precision and
    the gradient, through the last step, is ``sqrt(pi) / 2 * exp(erfinv(x)^2)``)."""
    edge = y.abs() == 1.0
    inner = where(edge, 0.0, y)  # the steps divide by erf' (0 at +-inf): not at the edges
    w = -((1.0 - inner) * (1.0 + inner)).log()
    central = _horner(_ERFINV_CENTRAL, w - 2.5)
    tail = _horner(_ERFINV_TAIL, where(w < 5.0, 5.0, w).sqrt() - 3.0)
    guess = where(w < 5.0, central, tail) * inner
    for _ in range(2):
        slope = (-guess.square()).exp() * (2.0 / math.sqrt(math.pi))
        guess = guess - (guess.erf() - inner) / slope
    # +-inf as constants: y * inf would send 0 * inf = NaN into y's gradient
    return where(edge, where(y > 0, math.inf, -math.inf), guess)
