"""The reference interpreter: runs any bound program with NumPy, exactly as the spec says.

It is the oracle every compiled backend is tested against, so it is written to be obviously
right rather than fast: a contraction enumerates the box of index values that bounds inference
gives, keeps the assignments where every access is in bounds (and integral) and every
constraint holds, and aggregates them cell by cell. Floats accumulate in float64.

    run(bound, [a, b])  ->  {"A": a, "B": b, "C": a @ b}
"""

from __future__ import annotations

import math
from math import prod
from typing import Sequence

import numpy as np

from ..errors import TileConflictError
from . import dtypes as dt
from .bounds import BoundContraction, bind_contraction, integer_form
from .ir import (
    Binary,
    Call,
    Cast,
    Const,
    Contraction,
    DimValue,
    Elementwise,
    Expr,
    Ref,
    Select,
    Special,
    Unary,
)
from .philox import philox_uniform
from .shapes import BoundProgram, ExprType, combine, expr_type, met, operand_context

# Largest number of index assignments enumerated at once (memory stays in the tens of MB).
_CHUNK = 1 << 21


def run(bound: BoundProgram, arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Execute every statement; return all tensors by name (inputs included)."""
    env: dict[str, np.ndarray] = {}
    for inp, array in zip(bound.program.inputs, arrays):
        env[inp.name] = np.asarray(array, dtype=bound.dtypes[inp.name])
    for statement in bound.program.statements:
        if isinstance(statement, Contraction):
            value = run_contraction(bind_contraction(statement, bound), bound, env)
        elif isinstance(statement, Elementwise):
            value = _Evaluator(env, bound).result(statement.expr, bound.dtypes[statement.out])
            value = np.broadcast_to(value, bound.shapes[statement.out])
        else:
            value = run_special(statement, bound, env)
        # np.require keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d).
        env[statement.out] = np.require(np.asarray(value, dtype=bound.dtypes[statement.out]),
                                        requirements="C")
    return env


# -- contractions --------------------------------------------------------------------------------


def _accumulator_dtype(dtype: np.dtype) -> np.dtype:
    if dt.is_float(dtype):
        return np.dtype(np.float64)
    if dt.is_bool(dtype):
        return np.dtype(np.int8)
    return np.dtype(np.uint64) if dtype == np.uint64 else np.dtype(np.int64)


def run_contraction(
    bc: BoundContraction, bound: BoundProgram, env: dict[str, np.ndarray]
) -> np.ndarray:
    c = bc.statement
    out_shape = bound.shapes[c.out]
    out_dtype = bound.dtypes[c.out]
    acc_dtype = _accumulator_dtype(out_dtype)
    size = prod(out_shape)
    identity = {
        "+": 0, "=": 0, "*": 1,
        ">": dt.lowest(acc_dtype) if dt.is_float(acc_dtype) else np.iinfo(acc_dtype).min,
        "<": dt.highest(acc_dtype) if dt.is_float(acc_dtype) else np.iinfo(acc_dtype).max,
    }[c.agg]
    acc = np.full(size, identity, dtype=acc_dtype)
    hits = np.zeros(size, dtype=np.int64)

    if not bc.empty and size > 0:
        for flat, values in _valid_contributions(bc, env, acc_dtype, out_dtype):
            _aggregate(c.agg, acc, flat, values)
            hits += np.bincount(flat, minlength=size)
    if c.agg == "=" and (hits > 1).any():
        cell = np.unravel_index(int(np.argmax(hits > 1)), out_shape)
        raise TileConflictError(
            f"'=' aggregation of '{c.out}' writes cell {tuple(int(i) for i in cell)} from "
            f"{int(hits.max())} different index assignments; '=' may write each cell once",
            c.loc, c.out,
        )

    reached = hits > 0
    if c.default is not None:
        default = np.broadcast_to(env[c.default], out_shape).reshape(-1).astype(acc_dtype)
        combined = {
            "+": lambda: default + acc,
            "*": lambda: default * acc,
            ">": lambda: np.maximum(default, acc),
            "<": lambda: np.minimum(default, acc),
            "=": lambda: acc,
        }[c.agg]()
        result = np.where(reached, combined, default)
    else:
        result = np.where(reached, acc, np.zeros((), acc_dtype))
    return _cast(result, out_dtype).reshape(out_shape)


def _valid_contributions(bc: BoundContraction, env: dict[str, np.ndarray], acc_dtype,
                         out_dtype):
    """Yield (flat output index, value) arrays for the valid assignments, chunk by chunk."""
    variables = bc.variables
    ranges = [bc.ranges[v] for v in variables]
    extents = [hi - lo + 1 for lo, hi in ranges]
    # Split along the first variable so each chunk enumerates at most _CHUNK assignments.
    inner = prod(extents[1:]) if variables else 1
    step = max(1, _CHUNK // max(inner, 1))
    first_lo, first_hi = ranges[0] if variables else (0, 0)
    for start in range(first_lo, first_hi + 1, step) if variables else [0]:
        chunk_ranges = list(ranges)
        if variables:
            chunk_ranges[0] = (start, min(first_hi, start + step - 1))
        grids = np.meshgrid(
            *[np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in chunk_ranges],
            indexing="ij", sparse=True,
        ) if variables else []
        values_of = dict(zip(variables, grids))
        shape = tuple(hi - lo + 1 for lo, hi in chunk_ranges)
        valid = np.ones(shape, dtype=bool)
        for inequality in bc.inequalities:
            value, integral = _evaluate_poly(inequality.poly, values_of, shape)
            valid &= integral & (value >= 0) & (value < inequality.upper)
        if not valid.any():
            continue
        gathered = []
        for access in bc.operands:
            picked = tuple(_evaluate_poly(p, values_of, shape)[0][valid] for p in access.index)
            gathered.append(env[access.tensor][picked] if picked else
                            np.broadcast_to(env[access.tensor], (int(valid.sum()),)))
        values, keep = _combine(bc.statement.combo, gathered, acc_dtype, out_dtype)
        out_coords = tuple(_evaluate_poly(p, values_of, shape)[0][valid] for p in bc.output.index)
        flat = (
            np.ravel_multi_index(out_coords, bc.output.sizes)
            if out_coords else np.zeros(int(valid.sum()), dtype=np.int64)
        )
        if keep is not None:
            flat, values = flat[keep], values[keep]
        yield flat.astype(np.int64), values


def _evaluate_poly(poly, values_of, shape):
    """The poly's integer value at each assignment and whether it is an integer there."""
    coeffs, const, denominator = integer_form(poly)
    numerator = np.full(shape, const, dtype=np.int64)
    for name, coeff in coeffs.items():
        numerator = numerator + coeff * values_of[name]
    if denominator == 1:
        return np.broadcast_to(numerator, shape), np.ones(shape, dtype=bool)
    integral = numerator % denominator == 0
    return np.broadcast_to(numerator // denominator, shape), integral


def _combine(combo: str, operands: list[np.ndarray], acc_dtype, out_dtype):
    """The value of each valid assignment; for ``?`` also which assignments contribute.
    An integer sum or product of two operands wraps in the contraction's type (two's
    complement, docs/tile-decisions.md) before it is aggregated: a max of uint8 sums compares
    the wrapped sums (200 + 100 is 44)."""
    if combo == "none":
        return operands[0].astype(acc_dtype), None
    if combo == "?":
        equal = _compare_equal(operands[0], operands[1])
        return operands[2].astype(acc_dtype), equal
    if combo == "==":
        return _compare_equal(operands[0], operands[1]).astype(acc_dtype), None
    a, b = (x.astype(acc_dtype) for x in operands)
    value = a * b if combo == "*" else a + b
    if np.issubdtype(acc_dtype, np.integer) and np.dtype(out_dtype) != acc_dtype:
        with np.errstate(over="ignore"):
            value = value.astype(out_dtype).astype(acc_dtype)
    return value, None


def _compare_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    common = dt.promote(a.dtype, b.dtype)
    return a.astype(common) == b.astype(common)


def _aggregate(agg: str, acc: np.ndarray, flat: np.ndarray, values: np.ndarray) -> None:
    if agg == "+":
        np.add.at(acc, flat, values)
    elif agg == "*":
        np.multiply.at(acc, flat, values)
    elif agg == ">":
        np.maximum.at(acc, flat, values)
    elif agg == "<":
        np.minimum.at(acc, flat, values)
    else:
        acc[flat] = values


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast an accumulator to the result type; integers wrap as in C."""
    if dt.is_integer(dtype) and values.dtype != dtype:
        return values.astype(np.uint64 if dtype == np.uint64 else np.int64).astype(dtype)
    return values.astype(dtype)


# -- elementwise -----------------------------------------------------------------------------------


class _Evaluator:
    """Evaluates an expression tree with Tile's typing: each node is computed in its own type
    (half types compute in float32 and round once per node)."""

    def __init__(self, env: dict[str, np.ndarray], bound: BoundProgram) -> None:
        self.env = env
        self.bound = bound

    def result(self, expr: Expr, dtype: np.dtype) -> np.ndarray:
        value, _ = self.eval(expr)
        return np.asarray(value).astype(dtype)

    def type_of(self, expr: Expr) -> ExprType:
        return expr_type(expr, self.bound.dtypes)

    def eval(self, expr: Expr, context: np.dtype | None = None):
        """``(value, type)`` of ``expr`` read by an operation of type ``context`` (where a
        weakly typed float expression meeting float64 computes, see :func:`met`)."""
        t = met(self.type_of(expr), context)
        if isinstance(expr, Ref):
            return self.env[expr.name], t
        if isinstance(expr, DimValue):
            return np.asarray(self.bound.dims[expr.name], dtype=t.dtype), t
        if isinstance(expr, Const):
            # A literal keeps its full value until it meets a tensor, whose type it takes.
            exact = np.float64 if isinstance(expr.value, float) else np.int64
            return np.asarray(expr.value, dtype=exact if t.weak else t.dtype), t
        if isinstance(expr, Cast):
            value, _ = self.eval(expr.operand, t.dtype)
            if expr.dtype == "bool":
                return np.asarray(value) != 0, t
            target = dt.DTYPES[expr.dtype]
            value = np.asarray(value)
            if dt.is_integer(target) and dt.is_float(value.dtype):
                value = np.trunc(value.astype(np.float64))
                with np.errstate(invalid="ignore"):
                    value = value.astype(np.int64 if dt.is_signed(target) else np.uint64)
            return value.astype(target), t
        if isinstance(expr, Unary):
            value, _ = self.eval(expr.operand, t.dtype)
            if expr.op == "!":
                return np.asarray(value) == 0, t
            value = self.cast_to(value, t)
            if expr.op == "~":
                return np.invert(value), t
            return np.negative(value), t
        if isinstance(expr, Binary):
            return self.binary(expr, t), t
        if isinstance(expr, Select):
            cond, _ = self.eval(expr.cond)
            a, _ = self.eval(expr.if_true, t.dtype)
            b, _ = self.eval(expr.if_false, t.dtype)
            return np.where(np.asarray(cond) != 0, self.cast_to(a, t), self.cast_to(b, t)), t
        if isinstance(expr, Call):
            return self.call(expr, t), t
        raise AssertionError(expr)

    def cast_to(self, value, t: ExprType) -> np.ndarray:
        return np.asarray(value).astype(t.dtype)

    def binary(self, expr: Binary, t: ExprType) -> np.ndarray:
        operands = operand_context(expr, t, self.bound.dtypes).dtype
        left, lt = self.eval(expr.left, operands)
        right, rt = self.eval(expr.right, operands)
        op = expr.op
        if op in ("&&", "||"):
            a, b = np.asarray(left) != 0, np.asarray(right) != 0
            return (a & b) if op == "&&" else (a | b)
        operand_type = combine(lt, rt)
        compute = dt.compute_dtype(operand_type.dtype)
        if dt.is_bool(compute) and op in "+-*/%":
            compute = dt.INT32
        a = np.asarray(left).astype(compute)
        b = np.asarray(right).astype(compute)
        comparisons = {"<": np.less, "<=": np.less_equal, ">": np.greater,
                       ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}
        if op in comparisons:
            return comparisons[op](a, b)
        with np.errstate(all="ignore"):
            if op == "+":
                value = a + b
            elif op == "-":
                value = a - b
            elif op == "*":
                value = a * b
            elif op == "/":
                value = _c_divide(a, b) if not dt.is_float(compute) else a / b
            elif op == "%":
                value = _c_remainder(a, b)
            elif op == "&":
                value = a & b
            elif op == "|":
                value = a | b
            elif op == "^":
                value = a ^ b
            elif op == "<<":
                value = np.left_shift(a, b)
            elif op == ">>":
                value = np.right_shift(a, b)
            else:
                raise AssertionError(op)
        return np.asarray(value).astype(t.dtype)

    def call(self, expr: Call, t: ExprType) -> np.ndarray:
        values = [self.eval(a, t.dtype) for a in expr.args]
        compute = dt.compute_dtype(t.dtype)
        if dt.is_bool(compute) and expr.fn not in ("min", "max"):
            compute = dt.INT32
        args = [np.asarray(v).astype(compute) for v, _ in values]
        x = args[0]
        fn = expr.fn
        with np.errstate(all="ignore"):
            if fn == "exp":
                value = np.exp(x)
            elif fn == "log":
                value = np.log(x)
            elif fn == "sqrt":
                value = np.sqrt(x)
            elif fn == "rsqrt":
                value = 1 / np.sqrt(x)
            elif fn == "pow":
                value = np.power(x, args[1])
            elif fn == "abs":
                value = np.abs(x)
            elif fn == "sign":
                value = np.sign(x)
            elif fn == "floor":
                value = np.floor(x) if dt.is_float(compute) else x
            elif fn == "ceil":
                value = np.ceil(x) if dt.is_float(compute) else x
            elif fn == "round":
                value = np.rint(x) if dt.is_float(compute) else x
            elif fn == "relu":
                value = np.where(x > 0, x, np.zeros((), x.dtype))
                value = np.where(np.isnan(x), x, value) if dt.is_float(compute) else value
            elif fn == "sigmoid":
                value = _sigmoid(x)
            elif fn == "stop_gradient":
                value = x
            elif fn == "erf":
                value = _erf(x)
            elif fn == "erfc":
                value = _erfc(x)
            elif fn == "min":
                value = np.minimum(x, args[1])
            elif fn == "max":
                value = np.maximum(x, args[1])
            else:
                value = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}
                                .get(fn, fn))(x)
        return np.asarray(value).astype(t.dtype)


def _c_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C integer division: truncate toward zero; division by zero gives 0."""
    safe = np.where(b == 0, np.ones((), b.dtype), b)
    quotient = a // safe
    if np.issubdtype(a.dtype, np.signedinteger):
        inexact = (a % safe != 0) & ((a < 0) != (safe < 0))
        quotient = quotient + inexact.astype(a.dtype)
    return np.where(b == 0, np.zeros((), a.dtype), quotient)


def _c_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's % (sign of the dividend), fmod on floats; integer remainder by zero gives 0."""
    if dt.is_float(a.dtype):
        return np.fmod(a, b)
    safe = np.where(b == 0, np.ones((), b.dtype), b)
    return np.where(b == 0, np.zeros((), a.dtype), np.fmod(a, safe))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    positive = 1 / (1 + np.exp(-np.abs(x)))
    return np.where(x >= 0, positive, 1 - positive).astype(x.dtype)


_erf_vector = np.vectorize(math.erf, otypes=[np.float64])
_erfc_vector = np.vectorize(math.erfc, otypes=[np.float64])


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_vector(x.astype(np.float64)).astype(x.dtype) if x.size else x


def _erfc(x: np.ndarray) -> np.ndarray:
    """``1 - erf(x)`` to a relative accuracy of a few units in the last place (libm's erfc,
    in float64): ``_erfc(np.float32([10.0])) == [2.09e-45]`` where ``1 - erf(10)`` is 0."""
    return _erfc_vector(x.astype(np.float64)).astype(x.dtype) if x.size else x


# -- special operations ----------------------------------------------------------------------------


def run_special(s: Special, bound: BoundProgram, env: dict[str, np.ndarray]) -> np.ndarray:
    shape = bound.shapes[s.out]
    x = env[s.tensors[0]]
    if s.op == "reshape":
        return x.reshape(shape)
    if s.op == "shape":
        return np.asarray(x.shape, dtype=np.int64)
    if s.op == "index":
        coordinate = np.arange(x.shape[s.axis], dtype=np.int32)
        view = [1] * x.ndim
        view[s.axis] = x.shape[s.axis]
        return np.broadcast_to(coordinate.reshape(view), x.shape)
    if s.op == "gather":
        indices = env[s.tensors[1]].astype(np.int64)
        valid = (indices >= 0) & (indices < x.shape[0])
        picked = x[np.where(valid, indices, 0)] if x.shape[0] else np.zeros(shape, x.dtype)
        mask = valid.reshape(valid.shape + (1,) * (x.ndim - 1))
        return np.where(mask, picked, np.zeros((), x.dtype))
    if s.op == "scatter":
        indices = env[s.tensors[1]].astype(np.int64).reshape(-1)
        updates = env[s.tensors[2]]
        acc = np.zeros(shape, dtype=_accumulator_dtype(updates.dtype))
        rows = updates.reshape((indices.size,) + tuple(shape[1:])).astype(acc.dtype)
        valid = (indices >= 0) & (indices < shape[0])
        np.add.at(acc, indices[valid], rows[valid])
        return _cast(acc, bound.dtypes[s.out])
    if s.op == "prng":
        state = x.reshape(-1).astype(np.uint64) & 0xFFFFFFFF
        key = int(state[0])
        counter_high = int(state[1]) if state.size > 1 else 0
        return philox_uniform(key, counter_high, prod(shape)).reshape(shape)
    raise AssertionError(s.op)
