"""gingham's result dtypes and values against PyTorch's, op by op.

Every case builds the same operands in torch and in gingham (dimensioned tensors, 0-d tensors
and Python numbers, on either side) and checks that gingham's result has torch's dtype, or
that gingham refuses what torch refuses (with an error of torch's class). The dtypes and
errors are decided before anything runs, the same on every device. The values are checked
too: all of them on the reference interpreter; on the compiled devices, where each result is
a kernel to compile (about 50 ms on the CPU), a sample: every dtype, the pairs whose
promotion is not NumPy's, the operators whose code differs by dtype (``//``, ``%``, casts).
The results of one test are realized together, in one program.
"""

from __future__ import annotations

import math
import operator
from typing import Callable

import ml_dtypes
import numpy as np
import pytest
import torch

import gingham
from gingham.errors import GinghamError
from gingham.frontend.graph import realize

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64")
NUMBERS = {"bool": True, "int": 2, "float": 1.5}
# operands with dims (tensor), without (0-d), and the Python numbers
KINDS = ("tensor", "0d", "bool", "int", "float")
# What the compiled devices check the values of (the reference checks every case): these
# dtype pairs (each dtype on each side, the pairs whose promotion is not NumPy's), these
# dtypes beside a number, with a dimensioned tensor on the left, of these operators.
VALUE_PAIRS = {("int32", "int32"), ("uint8", "int8"), ("bool", "int16"), ("int64", "float16"),
               ("bfloat16", "float16"), ("float32", "float64"), ("int8", "bool"),
               ("float16", "uint8"), ("int16", "bfloat16"), ("float64", "int32"),
               ("bool", "bool"), ("float32", "int64")}
VALUE_DTYPES = {"bool", "uint8", "int32", "bfloat16"}
VALUE_OPS = {"add", "truediv", "floordiv", "mod", "lt", "and", "where", "maximum",
             "remainder", "atan2", "iadd", "ifloordiv", "iand"}
# Values chosen so that no integer divisor is 0 (torch raises there), the signs of // and %
# are exercised, and no integer power or product overflows int8.
LEFT = [3.0, -2.0, 0.0, 5.0, 1.0, 7.0]
RIGHT = [2.0, -3.0, 1.0, 4.0, -5.0, 2.0]
EXPONENTS = [2.0, 1.0, 1.0, 0.0, 3.0, 2.0]

TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 2e-6, "float64": 1e-12}


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def torch_operand(kind: str, dtype: str | None, values: list[float]):
    """A torch operand of ``kind``: a tensor of ``dtype`` (0-d: the first value) or a number."""
    if kind in NUMBERS:
        return NUMBERS[kind]
    array = np.array(values if kind == "tensor" else values[0], np.float64)
    if dtype == "bool":
        array = array != 0
    elif dtype == "uint8":
        array = np.abs(array)  # a negative float to uint8 is undefined in C (and in torch)
    return torch.tensor(array).to(getattr(torch, dtype))


def gingham_operand(operand, device: str):
    """The gingham twin of a torch operand (numbers are the same numbers)."""
    if not isinstance(operand, torch.Tensor):
        return operand
    dtype = _name(operand.dtype)
    if dtype == "bfloat16":
        array = operand.float().numpy().astype(ml_dtypes.bfloat16)
    else:
        array = operand.numpy()
    return gingham.tensor(array, device=device)


def _as_float64(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64).numpy()
    return np.asarray(value).astype(np.float64)


class Checks:
    """Cases run in torch and gingham: dtypes and errors compared at once, values when
    :meth:`verify` realizes every gingham result in one program."""

    def __init__(self, device: str, all_values: bool | None = None) -> None:
        self.device = device
        self.all_values = device == "reference" if all_values is None else all_values
        self.failures: list[str] = []
        self.pending: list[tuple[str, torch.Tensor, gingham.Tensor]] = []
        self.count = 0

    def case(self, label: str, torch_fn: Callable, gingham_fn: Callable,
             values: bool = True) -> None:
        """Compare ``torch_fn()`` and ``gingham_fn()``: the dtype (or the error) now, the
        values later where ``values`` (to the result dtype's rounding)."""
        self.count += 1
        try:
            expected = torch_fn()
        except (RuntimeError, TypeError, ValueError) as error:
            self._expect_error(label, error, gingham_fn)
            return
        try:
            got = gingham_fn()
        except Exception as error:  # noqa: BLE001 (any error is this case's failure)
            self.failures.append(f"{label}: torch gives {_name(expected.dtype)}, gingham "
                                 f"raises {type(error).__name__}: {error}")
            return
        if str(got.dtype) != _name(expected.dtype):
            self.failures.append(f"{label}: torch gives {_name(expected.dtype)}, gingham "
                                 f"{got.dtype}")
        elif values:
            self.pending.append((label, expected, got))

    def _expect_error(self, label: str, error: Exception, gingham_fn: Callable) -> None:
        # torch's "not implemented for 'Bool'" is a NotImplementedError, a RuntimeError:
        # gingham's refusal of the same case is a RuntimeError too.
        wanted = RuntimeError if isinstance(error, NotImplementedError) else type(error)
        try:
            got = gingham_fn()
        except wanted:
            return
        except Exception as other:  # noqa: BLE001
            self.failures.append(f"{label}: torch raises {type(error).__name__}, gingham "
                                 f"{type(other).__name__} (not a {wanted.__name__}): {other}")
            return
        self.failures.append(f"{label}: torch raises {type(error).__name__} "
                             f"({str(error).splitlines()[0]}), gingham gives {got.dtype}")

    def verify(self) -> None:
        """Realize the pending results (a few hundred per program) and compare the values,
        then fail with every mismatch found."""
        for start in range(0, len(self.pending), 300):  # the CPU launch takes 1024 args
            realize([got for _, _, got in self.pending[start:start + 300]])
        for label, expected, got in self.pending:
            want, have = _as_float64(expected), _as_float64(got.numpy())
            rtol = TOLERANCE.get(_name(expected.dtype), 0.0)
            if want.shape != have.shape or not np.allclose(have, want, rtol=rtol, atol=rtol,
                                                           equal_nan=True):
                self.failures.append(f"{label}: values {have.tolist()}, torch's "
                                     f"{want.tolist()}")
        assert not self.failures, (f"{len(self.failures)} of {self.count} cases differ:\n"
                                   + "\n".join(self.failures[:60]))

    def values_for(self, op: str, left: str, left_dtype: str | None, right: str,
                   right_dtype: str | None) -> bool:
        """Whether this device checks the values of ``op`` of these operands (kinds and
        dtypes; see :data:`VALUE_PAIRS`)."""
        if self.all_values:
            return True
        if op not in VALUE_OPS or left != "tensor":
            return False
        if right in NUMBERS:
            return left_dtype in VALUE_DTYPES
        return (left_dtype, right_dtype) in VALUE_PAIRS


# -- binary operations over every pair of dtypes and kinds ----------------------------------------

OPERATORS: dict[str, Callable] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "lt": operator.lt, "eq": operator.eq, "ge": operator.ge,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor,
}
# Functions of two tensors (torch's signatures take no number for these), with the module
# that spells them (torch or gingham).
FUNCTIONS: dict[str, Callable] = {
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b), "fmod": lambda m, a, b: m.fmod(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b),
    "where": lambda m, a, b: m.where(_mask(m, a, b), a, b),
}


def _mask(module, a, b):
    """A condition that broadcasts with ``a`` and ``b`` (of six elements, or 0-d)."""
    shaped = [x for x in (a, b) if hasattr(x, "shape") and len(x.shape)]
    pattern = [True, False, True, False, False, True] if shaped else True
    if module is torch:
        return torch.tensor(pattern)
    device = next(x.device for x in (a, b) if isinstance(x, gingham.Tensor))
    return gingham.tensor(np.array(pattern), device=device)


def _pairs(left_kinds, right_kinds):
    """(left kind, left dtype, right kind, right dtype): every dtype of a tensor kind, no
    dtype for a number, never two numbers."""
    for left in left_kinds:
        for right in right_kinds:
            if left in NUMBERS and right in NUMBERS:
                continue
            for left_dtype in DTYPES if left not in NUMBERS else (None,):
                for right_dtype in DTYPES if right not in NUMBERS else (None,):
                    yield left, left_dtype, right, right_dtype


def _binary_cases(checks: Checks, name: str, torch_fn, gingham_fn, left_kinds, right_kinds):
    right_values = EXPONENTS if name == "pow" else RIGHT
    for left, left_dtype, right, right_dtype in _pairs(left_kinds, right_kinds):
        a = torch_operand(left, left_dtype, LEFT)
        b = torch_operand(right, right_dtype, right_values)
        ga, gb = gingham_operand(a, checks.device), gingham_operand(b, checks.device)
        label = f"{name}({left} {left_dtype or ''}, {right} {right_dtype or ''})"
        checks.case(label, lambda: torch_fn(a, b), lambda: gingham_fn(ga, gb),
                    checks.values_for(name, left, left_dtype, right, right_dtype))


@pytest.mark.parametrize("name", list(OPERATORS))
def test_binary_operators(device, name):
    """``a op b`` for every pair of dtypes, with tensors, 0-d tensors and Python numbers on
    either side: PyTorch's promotion (a 0-d tensor does not promote a tensor of its own
    category; a number gives its category's default dtype), PyTorch's errors (``-`` of bools,
    ``//`` of bools, a float operand of ``&``) and PyTorch's values (``//`` and ``%`` round
    toward minus infinity, as Python's)."""
    checks = Checks(device)
    op = OPERATORS[name]
    _binary_cases(checks, name, op, op, KINDS, KINDS)
    checks.verify()


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_binary_functions(device, name):
    """``maximum``, ``minimum``, ``atan2``, ``fmod``, ``remainder`` and ``where`` of two
    tensors (dimensioned or 0-d) of every pair of dtypes; ``where`` and the remainders also
    with a Python number."""
    checks = Checks(device)
    fn = FUNCTIONS[name]
    tensors = ("tensor", "0d")
    right = KINDS if name in ("where", "fmod", "remainder") else tensors
    left = KINDS if name == "where" else tensors
    _binary_cases(checks, name, lambda a, b: fn(torch, a, b), lambda a, b: fn(gingham, a, b),
                  left, right)
    checks.verify()


def test_atan2_of_float64_is_precise(device):
    """float64 angles to float64's precision in every quadrant (their +-pi and +-pi/2 were
    float32's once, a select of two literals, 1e-7 off)."""
    checks = Checks(device, all_values=True)
    y, x = (torch.tensor(v, dtype=torch.float64)
            for v in ([1.0, -2.0, 3.0, -3.0, 5.0, -0.0], [-2.0, -3.0, 0.5, 0.25, -1.0, -1.0]))
    gy, gx = gingham_operand(y, device), gingham_operand(x, device)
    checks.case("atan2 float64", lambda: torch.atan2(y, x), lambda: gingham.atan2(gy, gx))
    checks.case("atan2 float64 number", lambda: torch.atan2(y, torch.tensor(-2.0,
                dtype=torch.float64)), lambda: gingham.atan2(gy, -2.0))
    checks.verify()


@pytest.mark.parametrize("name", ["add", "sub", "mul", "truediv", "floordiv", "and"])
def test_in_place_operators(device, name):
    """``a op= b`` keeps ``a``'s dtype where PyTorch can cast the result into it, and is
    refused with a RuntimeError where it cannot (a float result into an integer tensor, an
    integer one into a bool tensor), as PyTorch's."""
    checks = Checks(device)
    op = getattr(operator, f"i{name}")  # operator.iadd: a += b
    for _, left_dtype, right, right_dtype in _pairs(["tensor"], KINDS):
        label = f"{name}=(tensor {left_dtype}, {right} {right_dtype or ''})"

        def torch_fn(left_dtype=left_dtype, right=right, right_dtype=right_dtype):
            a = torch_operand("tensor", left_dtype, LEFT)
            return op(a, torch_operand(right, right_dtype, RIGHT))

        def gingham_fn(left_dtype=left_dtype, right=right, right_dtype=right_dtype):
            # a computed tensor, whose update is lazy (a leaf's is written at once)
            a = gingham_operand(torch_operand("tensor", left_dtype, LEFT), device).clone()
            b = gingham_operand(torch_operand(right, right_dtype, RIGHT), device)
            return op(a, b)

        values = checks.values_for(f"i{name}", "tensor", left_dtype, right, right_dtype)
        checks.case(label, torch_fn, gingham_fn, values)
    checks.verify()


def test_ternary_functions(device):
    """``lerp`` (floats of one dtype: PyTorch does not promote it) and ``addcmul`` (which
    promotes as ``+`` and ``*`` do)."""
    checks = Checks(device)
    weights = (0.25, 0.75)
    for dtype in DTYPES:
        for other in ("float32", "float16", dtype):
            a, b = (torch_operand("tensor", d, v) for d, v in ((dtype, LEFT), (other, RIGHT)))
            ga, gb = gingham_operand(a, device), gingham_operand(b, device)
            for weight in weights:
                checks.case(f"lerp({dtype}, {other}, {weight})", lambda: torch.lerp(a, b, weight),
                            lambda: gingham.lerp(ga, gb, weight))
            for value in (1, 2.5):
                checks.case(f"addcmul({dtype}, {other}, {other}, value={value})",
                            lambda: torch.addcmul(a, b, b, value=value),
                            lambda: gingham.addcmul(ga, gb, gb, value=value),
                            checks.values_for("addcmul", "tensor", dtype, "tensor", other))
    checks.verify()


# -- integer arithmetic: signs, wrap-around --------------------------------------------------------


def test_integer_arithmetic_is_torchs(device):
    """Integer ``//`` and ``%`` round toward minus infinity (the divisor's sign), ``fmod``
    and ``div(rounding_mode='trunc')`` toward zero; int8, uint8 and int32 arithmetic wraps
    around as PyTorch's (two's complement), and so does a Python int out of the tensor's
    range (``uint8 < -1`` compares with 255); integer powers stay integers."""
    checks = Checks(device, all_values=True)
    dividends = [7, -7, 7, -7, 0, 1, -1, 5]
    divisors = [2, 2, -2, -2, 3, -3, 3, -5]
    for dtype in ("int8", "int16", "int32", "int64"):
        a, b = (torch.tensor(v, dtype=getattr(torch, dtype)) for v in (dividends, divisors))
        ga, gb = gingham_operand(a, device), gingham_operand(b, device)
        for name, torch_fn, gingham_fn in (
                ("//", lambda: a // b, lambda: ga // gb),
                ("%", lambda: a % b, lambda: ga % gb),
                ("// -3", lambda: a // -3, lambda: ga // -3),
                ("% -3", lambda: a % -3, lambda: ga % -3),
                ("-9 // b", lambda: -9 // b, lambda: -9 // gb),
                ("fmod", lambda: torch.fmod(a, b), lambda: gingham.fmod(ga, gb)),
                ("trunc", lambda: torch.div(a, b, rounding_mode="trunc"),
                 lambda: gingham.div(ga, gb, rounding_mode="trunc")),
                ("floor", lambda: torch.div(a, b, rounding_mode="floor"),
                 lambda: gingham.div(ga, gb, rounding_mode="floor")),
                ("pow", lambda: a ** b.abs(), lambda: ga ** gb.abs()),
                ("pow 3", lambda: a ** 3, lambda: ga ** 3)):
            checks.case(f"{dtype} {name}", torch_fn, gingham_fn)
    for dtype, values, other in (("int32", [2**31 - 1, -2**31, 65536, -5], [1, -1, 65536, 3]),
                                 ("uint8", [250, 0, 16, 200], [10, 1, 16, 100]),
                                 ("int8", [127, -128, 16, 100], [1, 1, 8, 2])):
        a, b = (torch.tensor(v, dtype=getattr(torch, dtype)) for v in (values, other))
        ga, gb = gingham_operand(a, device), gingham_operand(b, device)
        for name in ("add", "sub", "mul"):
            op = getattr(operator, name)
            checks.case(f"{dtype} {name} wraps", lambda: op(a, b), lambda: op(ga, gb))
        checks.case(f"{dtype} - 1 wraps", lambda: a - 1, lambda: ga - 1)
        checks.case(f"{dtype} neg wraps", lambda: -a, lambda: -ga)
        for number in (-1, 300, 257, -2**33 + 5):
            for name in ("lt", "eq", "add", "floordiv", "mod"):
                op = getattr(operator, name)
                checks.case(f"{dtype} {name} {number}", lambda: op(a, number),
                            lambda: op(ga, number))
    checks.verify()


# -- unary math and reductions ---------------------------------------------------------------------

UNARY = ("sqrt", "exp", "sin", "sigmoid", "log", "tanh", "reciprocal", "abs", "neg", "square",
         "sign", "floor", "ceil")
# torch has no kernel for these of bool (gingham gives the bool, which is no wrong answer)
BOOL_UNDEFINED = {"abs", "floor", "ceil"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_math(device, dtype):
    """A floating-point function of integers or bools is float32 (the default dtype);
    ``abs``, ``neg``, ``square`` keep integers (``square`` of bool is int64); ``neg`` of a
    bool is refused, as PyTorch's."""
    checks = Checks(device)
    a = torch_operand("tensor", dtype, [4.0, 1.0, 0.5, 2.0, 9.0, 3.0])
    ga = gingham_operand(a, device)
    for name in UNARY:
        if dtype == "bool" and name in BOOL_UNDEFINED:
            continue
        checks.case(f"{name}({dtype})", lambda: getattr(a, name)(), lambda: getattr(ga, name)())
    checks.verify()


@pytest.mark.xfail(strict=True, reason="gingham's abs/floor/ceil of a bool tensor is the bool "
                   "(PyTorch has no kernel for them); a value, not a wrong answer")
def test_unary_math_of_bool_undefined_in_torch(device):
    checks = Checks(device)
    a = torch_operand("tensor", "bool", LEFT)
    ga = gingham_operand(a, device)
    for name in sorted(BOOL_UNDEFINED):
        checks.case(f"{name}(bool)", lambda: getattr(a, name)(), lambda: getattr(ga, name)())
    checks.verify()


REDUCTIONS: dict[str, Callable] = {
    "sum": lambda x: x.sum(), "sum(0)": lambda x: x.sum(0),
    "sum(dtype=int32)": lambda x: x.sum(dtype=_dtype_of(x, "int32")),
    "prod": lambda x: x.prod(), "cumsum": lambda x: x.cumsum(0),
    "cumprod": lambda x: x.cumprod(0), "nansum": lambda x: x.nansum(),
    "mean": lambda x: x.mean(), "var": lambda x: x.var(), "std": lambda x: x.std(),
    "mean(dtype=float32)": lambda x: x.mean(dtype=_dtype_of(x, "float32")),
    "max": lambda x: x.max(), "min": lambda x: x.min(), "amax": lambda x: x.amax(0),
    "max(0).values": lambda x: x.max(0).values, "argmax": lambda x: x.argmax(),
    "argmin(0)": lambda x: x.argmin(0), "any": lambda x: x.any(), "all": lambda x: x.all(),
    "norm": lambda x: x.norm(), "count_nonzero": lambda x: x.count_nonzero(),
}


def _dtype_of(x, name: str):
    return getattr(torch, name) if isinstance(x, torch.Tensor) else name


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions(device, dtype):
    """Integer and bool sums, products and running sums are int64 (unless ``dtype=``);
    ``mean``, ``var``, ``std`` and ``norm`` of integers are refused; ``argmax`` is int64;
    ``any``/``all`` are bool (uint8 of uint8), as PyTorch's."""
    # the compiled devices: the values of the integer accumulations and of the half types
    checks = Checks(device, all_values=device == "reference" or dtype in VALUE_DTYPES)
    a = torch_operand("tensor", dtype, [3.0, 1.0, 2.0, 5.0, 1.0, 4.0])
    ga = gingham_operand(a, device)
    for name, fn in REDUCTIONS.items():
        if dtype == "bool" and name in ("argmax", "argmin(0)"):
            continue  # torch has no argmax kernel for bool; gingham's is the first True
        checks.case(f"{name}({dtype})", lambda: fn(a), lambda: fn(ga), checks.all_values)
    checks.verify()


def test_integer_sums_do_not_wrap(device):
    """The int64 accumulator of an int32 sum: a total beyond int32 is exact, as PyTorch's."""
    checks = Checks(device, all_values=True)
    a = torch.full((4,), 2**30, dtype=torch.int32)
    ga = gingham_operand(a, device)
    checks.case("sum", lambda: a.sum(), lambda: ga.sum())
    checks.case("cumsum", lambda: a.cumsum(0), lambda: ga.cumsum(0))
    b = torch.full((3,), 40000, dtype=torch.int32)
    gb = gingham_operand(b, device)
    checks.case("prod", lambda: b.prod(), lambda: gb.prod())
    checks.verify()


# -- factories, joins, conversions -----------------------------------------------------------------

DATA = ([True, False], [1, 2], [1.0, 2], [True, 2], [True, 2.5], [[1, 2], [3, 4]], 3, 2.5,
        True, [[1.5], [2]])


def test_factories(device):
    """``tensor`` of Python lists, ``arange``, ``full``, ``linspace`` and the ``*_like``
    functions take PyTorch's dtypes: bool, int64 for integers, float32 for floats."""
    checks = Checks(device, all_values=True)
    for data in DATA:
        checks.case(f"tensor({data})", lambda: torch.tensor(data),
                    lambda: gingham.tensor(data, device=device))
    for args in ((5,), (0, 5), (0.0, 5), (0, 5, 0.5), (1, 5, 2), (2.5,), (-1, 1, 0.3)):
        checks.case(f"arange{args}", lambda: torch.arange(*args),
                    lambda: gingham.arange(*args, device=device))
    checks.case("arange(5, dtype=float16)", lambda: torch.arange(5, dtype=torch.float16),
                lambda: gingham.arange(5, dtype="float16", device=device))
    for fill in (3, 2.5, True, -7):
        checks.case(f"full({fill})", lambda: torch.full((2, 3), fill),
                    lambda: gingham.full((2, 3), fill, device=device))
    checks.case("full(2.7, int32)", lambda: torch.full((2,), 2, dtype=torch.int32),
                lambda: gingham.full((2,), 2, "int32", device=device))
    checks.case("linspace", lambda: torch.linspace(0, 1, 5),
                lambda: gingham.linspace(0, 1, 5, device=device))
    checks.case("linspace(int32)", lambda: torch.linspace(0, 10, 5, dtype=torch.int32),
                lambda: gingham.linspace(0, 10, 5, dtype="int32", device=device))
    for dtype in ("int32", "bool", "float16"):
        a = torch_operand("tensor", dtype, LEFT)
        ga = gingham_operand(a, device)
        for name in ("zeros_like", "ones_like"):
            checks.case(f"{name}({dtype})", lambda: getattr(torch, name)(a),
                        lambda: getattr(gingham, name)(ga))
        checks.case(f"full_like({dtype}, 1)", lambda: torch.full_like(a, 1),
                    lambda: gingham.full_like(ga, 1))
        checks.case(f"empty_like({dtype})", lambda: torch.empty_like(a),
                    lambda: gingham.empty_like(ga), values=False)
    checks.verify()


def test_cat_and_stack_promote(device):
    """``cat`` and ``stack`` of mixed dtypes promote by PyTorch's table (int32 with float16
    is float16, uint8 with int8 int16)."""
    checks = Checks(device)
    for first, second in (("int32", "float16"), ("bool", "int32"), ("uint8", "int8"),
                          ("int64", "bfloat16"), ("float16", "bfloat16"), ("bool", "bool"),
                          ("float32", "float64"), ("int16", "uint8")):
        a, b = (torch_operand("tensor", d, LEFT) for d in (first, second))
        ga, gb = gingham_operand(a, device), gingham_operand(b, device)
        checks.case(f"cat({first}, {second})", lambda: torch.cat([a, b]),
                    lambda: gingham.cat([ga, gb]))
        checks.case(f"stack({first}, {second})", lambda: torch.stack([a, b], 1),
                    lambda: gingham.stack([ga, gb], 1))
    checks.verify()


def test_conversions(device):
    """Floats to integers truncate toward zero; to bool, nonzero (NaN and inf too) is True;
    ``to``, ``type`` and the named conversions give PyTorch's dtypes. (NaN, inf and values
    out of range to an integer are undefined in PyTorch, and not checked.)"""
    checks = Checks(device, all_values=True)
    x = torch.tensor([-2.7, 2.7, -0.5, 0.5, 100.9, -100.9, 0.0, 3.0])
    gx = gingham_operand(x, device)
    for dtype in ("int8", "int16", "int32", "int64", "float16", "bfloat16", "float64"):
        checks.case(f"to({dtype})", lambda: x.to(getattr(torch, dtype)),
                    lambda: gx.to(dtype))
        checks.case(f"type({dtype})", lambda: x.type(getattr(torch, dtype)),
                    lambda: gx.type(dtype))
    checks.case("abs to uint8", lambda: x.abs().to(torch.uint8), lambda: gx.abs().to("uint8"))
    special = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-30])
    gs = gingham_operand(special, device)
    checks.case("to(bool)", lambda: special.to(torch.bool), lambda: gs.to("bool"))
    checks.case("to(float16) overflows", lambda: (x * 1000).half(), lambda: (gx * 1000).half())
    for name in ("int", "long", "short", "char", "byte", "bool", "half", "float", "double",
                 "bfloat16"):
        checks.case(f".{name}()", lambda: getattr(x.abs(), name)(),
                    lambda: getattr(gx.abs(), name)())
    i = torch.tensor([-3, 0, 5], dtype=torch.int64)
    gi = gingham_operand(i, device)
    for dtype in ("int8", "uint8", "bool", "float16", "float32"):
        checks.case(f"int64 to({dtype})", lambda: i.to(getattr(torch, dtype)),
                    lambda: gi.to(dtype))
    checks.verify()


def test_promotion_functions():
    """``gingham.promote_types``, ``result_type`` and ``can_cast`` answer as torch's for every
    pair of dtypes and of operands."""
    failures = []
    for first in DTYPES:
        for second in DTYPES:
            want = _name(torch.promote_types(getattr(torch, first), getattr(torch, second)))
            got = str(gingham.promote_types(first, second))
            if got != want:
                failures.append(f"promote_types({first}, {second}): {got}, torch's {want}")
            want_cast = torch.can_cast(getattr(torch, first), getattr(torch, second))
            if gingham.can_cast(first, second) != want_cast:
                failures.append(f"can_cast({first}, {second}): torch's {want_cast}")
    for left, left_dtype, right, right_dtype in _pairs(("tensor", "0d"), KINDS):
        a, b = torch_operand(left, left_dtype, LEFT), torch_operand(right, right_dtype, RIGHT)
        want = _name(torch.result_type(a, b))
        got = str(gingham.result_type(gingham_operand(a, "reference"),
                                      gingham_operand(b, "reference")))
        if got != want:
            failures.append(f"result_type({left} {left_dtype}, {right} {right_dtype}): {got}, "
                            f"torch's {want}")
    assert not failures, "\n".join(failures[:40])


def test_refusals_name_the_problem():
    """The refusals say what is wrong (a RuntimeError, as PyTorch's, and a gingham error)."""
    ints = gingham.tensor(np.arange(3, dtype=np.int32))
    mask = gingham.tensor(np.array([True, False, True]))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int32"):
        ints += 1.5
    with pytest.raises(GinghamError, match="mean.*could not infer output dtype"):
        ints.mean()
    with pytest.raises(RuntimeError, match="Negation.*bool tensor.*logical_not"):
        -mask
    with pytest.raises(RuntimeError, match="Subtraction.*bool tensor"):
        mask - mask
