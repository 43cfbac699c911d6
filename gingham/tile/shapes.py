"""Binding a program to argument shapes and dtypes: shape and type inference.

``bind(program, shapes, dtypes)`` checks the header against the arguments (ranks, dimension
equalities), then walks the statements in order and gives every tensor a concrete shape and dtype.
Everything downstream — the interpreter, the autodiff, the compiler — works on the result::

    bound = bind(parse("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"),
                 [(2, 3), (3, 4)], [np.float32, np.float32])
    bound.shapes["C"] == (2, 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Sequence

import numpy as np

from ..errors import TileShapeError, TileTypeError
from . import dtypes as dt
from .ir import (
    Binary,
    Call,
    Cast,
    Const,
    Contraction,
    DimValue,
    Elementwise,
    Expr,
    Program,
    Ref,
    Select,
    Special,
    Unary,
)


@dataclass
class BoundProgram:
    """A program together with the concrete shape and dtype of every tensor it names."""

    program: Program
    dims: dict[str, int]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, np.dtype]

    def signature(self) -> tuple:
        """Hashable description of the argument shapes and dtypes this binding is for."""
        return tuple(
            (self.shapes[name], dt.dtype_name(self.dtypes[name]))
            for name in self.program.input_names
        )


def bind(
    program: Program, shapes: Sequence[Sequence[int]], dtypes: Sequence[np.dtype]
) -> BoundProgram:
    """Infer every tensor's shape and dtype for these arguments, or raise a Tile error."""
    inputs = program.inputs
    if len(shapes) != len(inputs):
        names = ", ".join(program.input_names)
        raise TileShapeError(
            f"the program takes {len(inputs)} input{'s' if len(inputs) != 1 else ''} ({names}) "
            f"but was given {len(shapes)}"
        )
    dims = _bind_header(program, shapes)
    bound = BoundProgram(program, dims, {}, {})
    for inp, shape, dtype in zip(inputs, shapes, dtypes):
        bound.shapes[inp.name] = tuple(int(s) for s in shape)
        bound.dtypes[inp.name] = dt.as_tile_dtype(dtype)
    for statement in program.statements:
        if isinstance(statement, Contraction):
            shape, dtype = _contraction_type(statement, bound)
        elif isinstance(statement, Elementwise):
            shape = _broadcast_expr_shape(statement, bound)
            dtype = expr_dtype(statement.expr, bound.dtypes, statement.out)
        else:
            shape, dtype = _special_type(statement, bound)
        bound.shapes[statement.out] = shape
        bound.dtypes[statement.out] = dtype
    return bound


def _bind_header(program: Program, shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    dims: dict[str, int] = {}
    origin: dict[str, str] = {}
    for position, (inp, shape) in enumerate(zip(program.inputs, shapes)):
        if inp.dims is None:
            continue
        if len(shape) != len(inp.dims):
            declared = f"{inp.name}[{', '.join(str(d) for d in inp.dims)}]"
            raise TileShapeError(
                f"argument {position + 1} ('{inp.name}') has {len(shape)} dimension"
                f"{'s' if len(shape) != 1 else ''} (shape {tuple(shape)}) but the header "
                f"declares {declared} with {len(inp.dims)}",
                inp.loc, inp.name,
            )
        for axis, (dim, size) in enumerate(zip(inp.dims, shape)):
            where = f"axis {axis} of '{inp.name}'"
            if isinstance(dim, int):
                if size != dim:
                    raise TileShapeError(
                        f"{where} must have size {dim} (the header says so) but has {size}",
                        inp.loc, inp.name,
                    )
            elif dim in dims and dims[dim] != size:
                raise TileShapeError(
                    f"dimension {dim} is {dims[dim]} from {origin[dim]} but {size} from {where}",
                    inp.loc, inp.name,
                )
            else:
                dims[dim] = int(size)
                origin[dim] = where
    return dims


# -- contractions --------------------------------------------------------------------------------


def _contraction_type(c: Contraction, bound: BoundProgram) -> tuple[tuple[int, ...], np.dtype]:
    for access in c.operands:
        rank = len(bound.shapes[access.tensor])
        if len(access.index) != rank:
            raise TileShapeError(
                f"'{access.tensor}' has {rank} dimension{'s' if rank != 1 else ''} "
                f"(shape {bound.shapes[access.tensor]}) but is accessed with {len(access.index)} "
                f"indices in the statement defining '{c.out}'",
                access.loc or c.loc, c.out,
            )
    shape = tuple(_size(s, bound, c) for s in c.shape)
    operand_dtypes = [bound.dtypes[a.tensor] for a in c.operands]
    if c.combo == "none":
        dtype = operand_dtypes[0]
    elif c.combo == "==":
        dtype = dt.BOOL
    elif c.combo == "?":
        dtype = operand_dtypes[2]
    else:
        dtype = dt.promote(operand_dtypes[0], operand_dtypes[1])
    if c.agg in "+*" and dt.is_bool(dtype):
        dtype = dt.INT32  # a sum of comparisons counts them
    if c.default is not None:
        default_shape = bound.shapes[c.default]
        if _broadcast([default_shape, shape]) != shape:
            raise TileShapeError(
                f"the default '{c.default}' of '{c.out}' has shape {default_shape}, which does "
                f"not broadcast to the output shape {shape}",
                c.loc, c.out,
            )
    return shape, dtype


def _size(size, bound: BoundProgram, c) -> int:
    missing = size.dims() - bound.dims.keys()
    if missing:
        raise TileShapeError(
            f"size '{size}' of '{c.out}' uses {', '.join(sorted(missing))}, which the header "
            "does not bind",
            c.loc, c.out,
        )
    try:
        value = size.evaluate(bound.dims)
    except ZeroDivisionError:
        raise TileShapeError(f"size '{size}' of '{c.out}' divides by zero", c.loc, c.out) from None
    if value < 0:
        raise TileShapeError(
            f"size '{size}' of '{c.out}' is {value} for these arguments; sizes cannot be "
            "negative",
            c.loc, c.out,
        )
    return value


# -- elementwise ---------------------------------------------------------------------------------


def _broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def _broadcast_expr_shape(statement: Elementwise, bound: BoundProgram) -> tuple[int, ...]:
    names = statement.inputs()
    shapes = [bound.shapes[n] for n in names]
    shape = _broadcast(shapes)
    if shape is None:
        described = ", ".join(f"{n} {bound.shapes[n]}" for n in names)
        raise TileShapeError(
            f"the operands of '{statement.out}' do not broadcast together: {described}",
            statement.loc, statement.out,
        )
    return shape


@dataclass(frozen=True)
class ExprType:
    """A dtype, and whether it is weak (literals and dimensions) or strong (tensors)."""

    dtype: np.dtype
    weak: bool = False


_FLOAT_FUNCTIONS = set(
    "exp log sqrt rsqrt sin cos tan tanh sinh cosh asin acos atan erf erfc sigmoid".split()
)
_ARITHMETIC = set("+ - * / %".split())
_COMPARISONS = set("< <= > >= == !=".split())
_LOGICAL = {"&&", "||"}
_BITWISE = {"&", "|", "^"}
_SHIFTS = {"<<", ">>"}


def expr_dtype(expr: Expr, dtypes: dict[str, np.dtype], out: str = "") -> np.dtype:
    """The dtype of an elementwise expression (weak results become int32 / float32)."""
    return expr_type(expr, dtypes, out).dtype


def expr_type(expr: Expr, dtypes: dict[str, np.dtype], out: str = "") -> ExprType:
    """Type of each expression node, following docs/tile-decisions.md."""
    where = f"in the statement defining '{out}'" if out else ""
    if isinstance(expr, Ref):
        return ExprType(dtypes[expr.name])
    if isinstance(expr, DimValue):
        return ExprType(dt.INT32, weak=True)
    if isinstance(expr, Const):
        return ExprType(dt.FLOAT32 if isinstance(expr.value, float) else dt.INT32, weak=True)
    if isinstance(expr, Cast):
        expr_type(expr.operand, dtypes, out)
        return ExprType(dt.DTYPES[expr.dtype])
    if isinstance(expr, Unary):
        inner = expr_type(expr.operand, dtypes, out)
        if expr.op == "!":
            return ExprType(dt.BOOL)
        if expr.op == "~":
            _require_integer_or_bool(inner.dtype, "~", expr, where)
            return inner
        return ExprType(dt.INT32, inner.weak) if dt.is_bool(inner.dtype) else inner
    if isinstance(expr, Binary):
        left = expr_type(expr.left, dtypes, out)
        right = expr_type(expr.right, dtypes, out)
        if expr.op in _COMPARISONS or expr.op in _LOGICAL:
            return ExprType(dt.BOOL)
        joined = combine(left, right)
        if expr.op in _BITWISE:
            for side in (left, right):
                _require_integer_or_bool(side.dtype, expr.op, expr, where)
            return joined
        if expr.op in _SHIFTS:
            for side in (left, right):
                if not dt.is_integer(side.dtype):
                    raise TileTypeError(
                        f"'{expr.op}' needs integer operands but got {dt.dtype_name(side.dtype)} "
                        f"{where}",
                        expr.loc, out or None,
                    )
            return joined
        if dt.is_bool(joined.dtype):
            return ExprType(dt.INT32, joined.weak)
        return joined
    if isinstance(expr, Select):
        expr_type(expr.cond, dtypes, out)
        return combine(expr_type(expr.if_true, dtypes, out), expr_type(expr.if_false, dtypes, out))
    if isinstance(expr, Call):
        args = [expr_type(a, dtypes, out) for a in expr.args]
        if expr.fn in _FLOAT_FUNCTIONS:
            return _floating(args[0])
        if expr.fn in ("min", "max"):
            return combine(args[0], args[1])
        if expr.fn == "pow":
            return _floating(combine(args[0], args[1]))
        return args[0]  # abs sign floor ceil round relu keep their type
    raise AssertionError(f"unknown expression {expr!r}")


def combine(a: ExprType, b: ExprType) -> ExprType:
    """Promotion of two operands with weak literals taking the strong operand's type."""
    if a.weak and b.weak:
        return a if dt.is_float(a.dtype) or not dt.is_float(b.dtype) else b
    if a.weak or b.weak:
        strong, weak = (b, a) if a.weak else (a, b)
        if dt.is_float(weak.dtype) and not dt.is_float(strong.dtype):
            return ExprType(dt.FLOAT32)
        if dt.is_bool(strong.dtype) and not dt.is_bool(weak.dtype):
            return ExprType(dt.INT32)
        return strong
    return ExprType(dt.promote(a.dtype, b.dtype))


def met(t: ExprType, context: np.dtype | None) -> ExprType:
    """The type a node of type ``t`` computes in where its value meets ``context`` (the type
    of the operation that reads it): a weakly typed float expression (``c ? 0.1 : 0.2``,
    ``1.0 / 3.0``, ``-(0.1)``) computes in float64 where it meets float64, as a lone
    literal takes the type it meets, so a float64 formula never reads a float32 rounding of
    its constants. Elsewhere ``t`` itself: weak floats stay float32 (half types compute in
    float32), so float32 and half kernels are unchanged.

        met(ExprType(dt.FLOAT32, weak=True), dt.FLOAT64)   # ExprType(float64, weak=True)
    """
    if (t.weak and context is not None and dt.is_float(t.dtype)
            and np.dtype(context) == dt.FLOAT64):
        return ExprType(dt.FLOAT64, weak=True)
    return t


def operand_context(expr: Expr, t: ExprType, dtypes: dict[str, np.dtype]) -> ExprType:
    """The type in which the operands of ``expr`` (a node whose own type, already
    :func:`met`, is ``t``) are read: ``t`` itself, except that a comparison or a logical
    operator reads its operands in their common type (its own is bool).

        operand_context(parse_expr("X < 0.1"), ExprType(dt.BOOL), {"X": dt.FLOAT64})  # f64
    """
    if isinstance(expr, Binary) and (expr.op in _COMPARISONS or expr.op in _LOGICAL):
        return combine(expr_type(expr.left, dtypes), expr_type(expr.right, dtypes))
    return t


def _floating(t: ExprType) -> ExprType:
    if dt.is_float(t.dtype):
        return t
    return ExprType(dt.FLOAT32, t.weak)


def _require_integer_or_bool(dtype: np.dtype, op: str, expr, where: str) -> None:
    if not (dt.is_integer(dtype) or dt.is_bool(dtype)):
        raise TileTypeError(
            f"'{op}' needs integer or bool operands but got {dt.dtype_name(dtype)} {where}",
            getattr(expr, "loc", None),
        )


# -- special operations ----------------------------------------------------------------------------


def _special_type(s: Special, bound: BoundProgram) -> tuple[tuple[int, ...], np.dtype]:
    where = f"in the statement defining '{s.out}'"
    first = s.tensors[0]
    shape = bound.shapes[first]
    dtype = bound.dtypes[first]
    if s.op == "reshape":
        sizes = tuple(_size(size, bound, s) for size in s.sizes)
        if prod(sizes) != prod(shape):
            raise TileShapeError(
                f"cannot reshape '{first}' of shape {shape} ({prod(shape)} elements) to "
                f"{sizes} ({prod(sizes)} elements) {where}",
                s.loc, s.out,
            )
        return sizes, dtype
    if s.op == "shape":
        return (len(shape),), dt.INT64
    if s.op == "index":
        if not 0 <= s.axis < len(shape):
            raise TileShapeError(
                f"index({first}, {s.axis}): '{first}' has {len(shape)} dimensions {where}",
                s.loc, s.out,
            )
        return shape, dt.INT32
    if s.op == "gather":
        indices = s.tensors[1]
        _require_index_tensor(indices, bound, s)
        if not shape:
            raise TileShapeError(f"gather() needs '{first}' with at least one dimension {where}",
                                 s.loc, s.out)
        return bound.shapes[indices] + shape[1:], dtype
    if s.op == "scatter":
        indices, updates = s.tensors[1], s.tensors[2]
        _require_index_tensor(indices, bound, s)
        expected = bound.shapes[indices] + shape[1:]
        if bound.shapes[updates] != expected:
            raise TileShapeError(
                f"scatter({first}, {indices}, {updates}): the updates must have shape {expected} "
                f"(the indices' shape then {first}'s trailing sizes) but have "
                f"{bound.shapes[updates]} {where}",
                s.loc, s.out,
            )
        return shape, bound.dtypes[updates]
    if s.op == "prng":
        if not dt.is_integer(dtype) or prod(shape) < 1:
            raise TileTypeError(
                f"prng() needs an integer state tensor with at least one element; '{first}' is "
                f"{dt.dtype_name(dtype)} of shape {shape} {where}",
                s.loc, s.out,
            )
        return tuple(_size(size, bound, s) for size in s.sizes), dt.FLOAT32
    raise AssertionError(s.op)


def _require_index_tensor(name: str, bound: BoundProgram, s: Special) -> None:
    if not dt.is_integer(bound.dtypes[name]):
        raise TileTypeError(
            f"the indices '{name}' of {s.op}() must be integers, not "
            f"{dt.dtype_name(bound.dtypes[name])} (statement defining '{s.out}')",
            s.loc, s.out,
        )
