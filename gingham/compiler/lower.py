"""Kernel plans to the loop-nest kernel IR.

Each plan becomes one kernel whose work-items are the output cells. A contraction's work-item
decodes its cell, loops over the reduction variables inside the box that bounds inference gave,
tests the guards that the box does not imply, accumulates, finalises (unreached cells become 0
or the default), then evaluates the fused elementwise epilogue in registers and stores what
other kernels need. A plain reduction may also compute its operand per assignment (the plan's
prologue, :func:`accumulate_plan`) and further reductions of the same domain beside its own
(siblings, each with an accumulator ``acc_<out>``).

The fast schedules for contractions (:mod:`gingham.compiler.tiling`) replace the per-cell
reduction with tiled loops but keep this structure. Elementwise and special plans have
bandwidth-bound schedules here too (:func:`lower_streaming`: several cells per GPU
work-item with 16-byte vector accesses, chunks in ``omp simd`` loops on the CPU).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..tile import dtypes as dt
from ..tile import ir as tir
from ..tile.bounds import integer_form
from ..tile.ir import Poly, Special
from ..tile.shapes import (BoundProgram, ExprType, combine, expr_type, met,
                           operand_context)
from . import kernel_ir as k
from .cell import CellStatement, lower_cell_statement, pinned_declarations
from .fusion import KernelPlan
from .normalize import NormalContraction, narrow, pin


def compute_type(dtype: np.dtype) -> str:
    """Arithmetic type in kernels: half types compute in float32, bool as bool."""
    return dt.dtype_name(dt.compute_dtype(np.dtype(dtype)))


def as_stored(value: k.Expr, dtype: np.dtype, ctx: "LoweringContext") -> k.Expr:
    """``value`` (in its compute type) as a tensor of ``dtype`` holds it. Half types compute in
    float32 and are rounded here, so that a consumer fused into the same kernel reads what the
    interpreter and a consumer in another kernel read: without it a bfloat16 convolution fused
    with its cast to float32 skipped the rounding, and a max pool's gradient, which compares
    recomputed values with stored ones, lost taps. Each half-typed operation inside one
    expression is rounded so too (:class:`ExprLowering`): ``float32(bfloat16(x) * 3)``
    returned the unrounded product before."""
    name = dt.dtype_name(np.dtype(dtype))
    if name not in ("float16", "bfloat16"):
        return value
    if isinstance(value, k.Call) and value.fn == f"round_{name}":
        return value
    ctx.uses.add(f"round_{name}")
    return k.Call(f"round_{name}", (value,), "float32")


def index_type(max_value: int) -> str:
    """32-bit indices where they suffice (GPUs do 64-bit integer arithmetic slowly)."""
    return "int32" if max_value < 2**31 - 1 else "int64"


@dataclass
class LoweringContext:
    """What a kernel needs from the program: shapes, dtypes, dimension values, aliases."""

    bound: BoundProgram
    aliases: dict[str, str]
    #: ``index`` specials computed where they are read (``fusion.Plan.coordinates``).
    coordinates: dict[str, Special] = field(default_factory=dict)
    params: dict[str, k.Param] = field(default_factory=dict)
    uses: set[str] = field(default_factory=set)

    def fork(self) -> "LoweringContext":
        """The same program with no parameters or helpers yet: for a further kernel (a
        split reduction's partials, a packing kernel) lowered beside this one."""
        return LoweringContext(self.bound, self.aliases, self.coordinates)

    def buffer(self, tensor: str) -> str:
        while tensor in self.aliases:
            tensor = self.aliases[tensor]
        return tensor

    def param(self, tensor: str, output: bool = False) -> str:
        name = self.buffer(tensor)
        existing = self.params.get(name)
        dtype = dt.dtype_name(self.bound.dtypes[name])
        self.params[name] = k.Param(name, dtype, output or (existing.output if existing else False))
        return name

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.bound.shapes[tensor]

    def dtype(self, tensor: str) -> np.dtype:
        return self.bound.dtypes[tensor]

    def is_coordinate(self, tensor: str) -> bool:
        """Whether ``tensor`` is an ``index`` special its readers compute (no buffer)."""
        return self.buffer(tensor) in self.coordinates

    def load(self, tensor: str, index: k.Expr) -> k.Expr:
        """``tensor``'s element at flat ``index``, in its compute type. An ``index(X, axis)``
        that is not stored is the coordinate of that cell along ``axis``::

            T3 = index(T1, 1)   # [512, 1000]  ->  T3 at i is (int)(i % 1000)
        """
        ctype = compute_type(self.dtype(tensor))
        special = self.coordinates.get(self.buffer(tensor))
        if special is None:
            return k.Load(self.param(tensor), index, ctype)
        return k.Cast(ctype, coordinate(index, self.shape(special.out), special.axis))


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def coordinate(flat: k.Expr, shape: tuple[int, ...], axis: int, itype: str | None = None
               ) -> k.Expr:
    """The coordinate along ``axis`` of the cell at row-major index ``flat`` of ``shape``, in
    ``itype`` (``flat``'s integer type if None): ``(flat / stride) % size``, each step left out
    where it is 1."""
    itype = itype or flat.dtype
    value = flat
    stride = row_major_strides(shape)[axis]
    if stride != 1:
        value = k.BinOp("/", value, k.Const(stride, itype), itype)
    if axis != 0:
        value = k.BinOp("%", value, k.Const(shape[axis], itype), itype)
    return value


def cell_coordinates(flat: k.Expr, shape: tuple[int, ...], names: list[str], itype: str
                     ) -> list[k.Stmt]:
    """Declare the coordinates of a flat cell index (row-major)."""
    return [k.Declare(name, itype, coordinate(flat, shape, axis, itype))
            for axis, name in enumerate(names[:len(shape)])]


def broadcast_index(cell: list[k.Expr], out_shape: tuple[int, ...], shape: tuple[int, ...],
                    flat: k.Expr, itype: str) -> k.Expr:
    """Flat index into a tensor of ``shape`` broadcast to ``out_shape`` at ``cell``. A tensor of
    as many cells is read at ``flat``: it is ``out_shape`` with other axes of length 1 (a
    statement over ``[C]`` fused into a kernel over ``[C, 1, 1]``, or one over a reshape of the
    kernel's cells: fusion._fusion_target)."""
    if shape == out_shape or math.prod(shape) == math.prod(out_shape):
        return flat
    if math.prod(shape) == 1:
        return k.Const(0, itype)
    strides = row_major_strides(shape)
    lead = len(out_shape) - len(shape)
    index: k.Expr | None = None
    for axis, size in enumerate(shape):
        if size == 1:
            continue
        term: k.Expr = cell[lead + axis]
        if strides[axis] != 1:
            term = k.BinOp("*", term, k.Const(strides[axis], itype), itype)
        index = term if index is None else k.BinOp("+", index, term, itype)
    return index if index is not None else k.Const(0, itype)


# -- affine index expressions ------------------------------------------------------------------------


def affine_expr(coeffs: dict[str, int], const: int, itype: str) -> k.Expr:
    expr: k.Expr | None = None
    for name, coeff in sorted(coeffs.items()):
        if coeff == 0:
            continue
        term: k.Expr = k.Var(name, itype)
        if coeff == -1:
            expr = k.UnOp("-", term, itype) if expr is None else k.BinOp("-", expr, term, itype)
            continue
        if abs(coeff) != 1:
            term = k.BinOp("*", k.Const(abs(coeff), itype), term, itype)
        if expr is None:
            expr = term if coeff > 0 else k.UnOp("-", term, itype)
        else:
            expr = k.BinOp("+" if coeff > 0 else "-", expr, term, itype)
    if expr is None:
        return k.Const(const, itype)
    if const:
        expr = k.BinOp("+" if const > 0 else "-", expr, k.Const(abs(const), itype), itype)
    return expr


def access_index(index: tuple[Poly, ...], sizes: tuple[int, ...], itype: str) -> k.Expr:
    """The flat element index of an access. Integral polys fold into one affine expression;
    rational ones are divided per axis (guards have checked they divide exactly)."""
    strides = row_major_strides(sizes)
    forms = [integer_form(p) for p in index]
    if all(denominator == 1 for _, _, denominator in forms):
        coeffs: dict[str, int] = {}
        const = 0
        for (poly_coeffs, poly_const, _), stride in zip(forms, strides):
            for name, c in poly_coeffs.items():
                coeffs[name] = coeffs.get(name, 0) + c * stride
            const += poly_const * stride
        return affine_expr(coeffs, const, itype)
    flat: k.Expr | None = None
    for (poly_coeffs, poly_const, denominator), stride in zip(forms, strides):
        term = affine_expr(poly_coeffs, poly_const, itype)
        if denominator != 1:
            term = k.BinOp("/", term, k.Const(denominator, itype), itype)
        if stride != 1:
            term = k.BinOp("*", term, k.Const(stride, itype), itype)
        flat = term if flat is None else k.BinOp("+", flat, term, itype)
    return flat if flat is not None else k.Const(0, itype)


def guard_condition(poly: Poly, upper: int, itype: str) -> k.Expr:
    """``0 <= poly < upper`` and, for a rational poly, that it is an integer."""
    coeffs, const, denominator = integer_form(poly)
    numerator = affine_expr(coeffs, const, itype)
    cond: k.Expr = k.BinOp("&&",
                           k.BinOp(">=", numerator, k.Const(0, itype), "bool"),
                           k.BinOp("<", numerator, k.Const(upper * denominator, itype), "bool"),
                           "bool")
    if denominator != 1:
        divisible = k.BinOp("==", k.BinOp("%", numerator, k.Const(denominator, itype), itype),
                            k.Const(0, itype), "bool")
        cond = k.BinOp("&&", cond, divisible, "bool")
    return cond


def conjunction(conditions: list[k.Expr]) -> k.Expr | None:
    result: k.Expr | None = None
    for cond in conditions:
        result = cond if result is None else k.BinOp("&&", result, cond, "bool")
    return result


# -- elementwise expressions ---------------------------------------------------------------------------


class ExprLowering:
    """Tile elementwise expressions to kernel IR, with the interpreter's typing rules."""

    def __init__(self, ctx: LoweringContext, value_of) -> None:
        self.ctx = ctx
        self.value_of = value_of  # tensor name -> kernel IR expression at this cell

    def lower(self, expr: tir.Expr, context: np.dtype | None = None) -> k.Expr:
        """``expr`` in kernel IR, read by an operation of type ``context`` (where a weakly
        typed float expression meeting float64 computes, see :func:`met`)."""
        t = met(expr_type(expr, self.ctx.bound.dtypes), context)
        ct = compute_type(t.dtype)
        if isinstance(expr, tir.Ref):
            return self.value_of(expr.name)
        if isinstance(expr, tir.Const):
            value = expr.value
            if dt.is_float(np.dtype(t.dtype)):
                value = float(value)
            elif isinstance(value, float):
                value = int(value)
            return k.Const(value, ct)
        if isinstance(expr, tir.DimValue):
            return k.Const(self.ctx.bound.dims[expr.name], ct)
        if isinstance(expr, tir.Cast):
            inner = self.lower(expr.operand, t.dtype)
            if expr.dtype == "bool":
                return k.BinOp("!=", inner, k.Const(0, _type_of(inner)), "bool")
            if expr.dtype in ("float16", "bfloat16"):
                return as_stored(k.Cast("float32", inner), np.dtype(dt.as_tile_dtype(expr.dtype)),
                                 self.ctx)
            return k.Cast(ct, inner)
        if isinstance(expr, tir.Unary):
            inner = self.lower(expr.operand, t.dtype)
            if expr.op == "!" or (expr.op == "~" and ct == "bool"):
                return k.BinOp("==", inner, k.Const(0, _type_of(inner)), "bool")
            if expr.op == "-" and ct in _WRAPPING:
                return _wrapping(k.UnOp("-", _cast(inner, _WRAPPING[ct]), _WRAPPING[ct]), ct)
            return k.UnOp(expr.op, _cast(inner, ct), ct)
        if isinstance(expr, tir.Binary):
            return as_stored(self.binary(expr, t, ct), t.dtype, self.ctx)
        if isinstance(expr, tir.Select):
            cond = self.lower(expr.cond)
            if _type_of(cond) != "bool":
                cond = k.BinOp("!=", cond, k.Const(0, _type_of(cond)), "bool")
            return k.Select(cond, _cast(self.lower(expr.if_true, t.dtype), ct),
                            _cast(self.lower(expr.if_false, t.dtype), ct), ct)
        if isinstance(expr, tir.Call):
            if expr.fn == "stop_gradient":  # only autodiff sees it: in a kernel, the identity
                return _cast(self.lower(expr.args[0], t.dtype), ct)
            if expr.fn == "pow" and ct.startswith("float") and len(expr.args) == 2:
                # x^1 and x^2 exactly (x * x is the correctly rounded square, as NumPy's
                # float power gives it), without a libm call per element: batch norm's
                # variance and its gradient (pow(T, 2.0 - 1.0)).
                exponent = constant_value(expr.args[1])
                if exponent in (1.0, 2.0):
                    base = _cast(self.lower(expr.args[0], t.dtype), ct)
                    return base if exponent == 1.0 else k.BinOp("*", base, base, ct)
            arg_type = "int32" if ct == "bool" and expr.fn not in ("min", "max") else ct
            args = tuple(_cast(self.lower(a, t.dtype), arg_type) for a in expr.args)
            fn = {"min": "min", "max": "max"}.get(expr.fn, expr.fn)
            value = _cast(k.Call(fn, args, arg_type), ct)
            # min and max of half values are half values: no rounding
            return value if fn in ("min", "max") else as_stored(value, t.dtype, self.ctx)
        raise AssertionError(expr)

    def binary(self, expr: tir.Binary, t: ExprType, ct: str) -> k.Expr:
        op = expr.op
        dtypes = self.ctx.bound.dtypes
        context = operand_context(expr, t, dtypes).dtype
        left, right = self.lower(expr.left, context), self.lower(expr.right, context)
        if op in ("&&", "||"):
            return k.BinOp(op, _truth(left), _truth(right), "bool")
        operand = met(combine(expr_type(expr.left, dtypes), expr_type(expr.right, dtypes)),
                      context)
        ot = compute_type(operand.dtype)
        if ot == "bool" and op in "+-*/%":
            ot = "int32"
        a, b = _cast(left, ot), _cast(right, ot)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            return k.BinOp(op, a, b, "bool")
        is_float = ot.startswith("float")
        if op == "/" and not is_float:
            return _cast(k.BinOp("idiv", a, b, ot), ct)
        if op == "%":
            return _cast(k.BinOp("fmod" if is_float else "imod", a, b, ot), ct)
        if op in ("+", "-", "*") and ot in _WRAPPING:
            u = _WRAPPING[ot]
            return _cast(_wrapping(k.BinOp(op, _cast(a, u), _cast(b, u), u), ot), ct)
        if op in ("<<", ">>"):
            return _cast(_shift(op, a, b, ot), ct)
        return _cast(k.BinOp(op, a, b, ot), ct)


def constant_value(expr: tir.Expr) -> float | None:
    """The value of a literal expression built from ``+ - * /`` (``2.0 - 1.0``), else None."""
    if isinstance(expr, tir.Const) and not isinstance(expr.value, bool):
        return float(expr.value)
    if isinstance(expr, tir.Unary) and expr.op == "-":
        inner = constant_value(expr.operand)
        return None if inner is None else -inner
    if isinstance(expr, tir.Binary) and expr.op in "+-*/":
        left, right = constant_value(expr.left), constant_value(expr.right)
        if left is None or right is None or (expr.op == "/" and right == 0):
            return None
        return {"+": left + right, "-": left - right, "*": left * right,
                "/": left / right if right else 0.0}[expr.op]
    return None


#: Signed types whose +, -, * and negation are computed in the unsigned type of their width:
#: PyTorch's integers wrap around, C, OpenCL C and CUDA leave signed overflow undefined (and
#: optimise on it: (X + 2147483647) > X became true), unsigned arithmetic wraps by definition.
_WRAPPING = {"int32": "uint32", "int64": "uint64"}


def _shift(op: str, a: k.Expr, b: k.Expr, dtype: str) -> k.Expr:
    """``a << b`` or ``a >> b`` of integers of ``dtype`` as NumPy and PyTorch define them for
    every count: a count that is negative or at least the type's width shifts every bit out
    (0, or -1 for a right shift of a negative value), where C leaves it undefined (x86 and
    GPUs take the count modulo the width: ``1 << 70`` gave 64)."""
    width = np.dtype(dtype).itemsize * 8
    if isinstance(b, k.Const) and 0 <= b.value < width:
        return _plain_shift(op, a, b, dtype)  # a constant count in range: as it is
    zero = k.Const(0, dtype)
    in_range = k.BinOp("&&", k.BinOp(">=", b, zero, "bool"),
                       k.BinOp("<", b, k.Const(width, dtype), "bool"), "bool")
    # the count shifted by is always in range, even in the branch not taken
    shifted = _plain_shift(op, a, k.Select(in_range, b, zero, dtype), dtype)
    fill: k.Expr = zero
    if op == ">>" and np.dtype(dtype).kind == "i":
        fill = k.Select(k.BinOp("<", a, zero, "bool"), k.Const(-1, dtype), zero, dtype)
    return k.Select(in_range, shifted, fill, dtype)


def _plain_shift(op: str, a: k.Expr, count: k.Expr, dtype: str) -> k.Expr:
    """C's shift for a count within the width; a left shift of a signed type computed
    unsigned (wrapping as two's complement: a signed overflow is undefined in C)."""
    unsigned = _WRAPPING.get(dtype)
    if op == "<<" and unsigned is not None:
        return _wrapping(k.BinOp("<<", _cast(a, unsigned), _cast(count, unsigned), unsigned),
                         dtype)
    return k.BinOp(op, a, count, dtype)


def _wrapping(expr: k.Expr, dtype: str) -> k.Expr:
    """``expr`` (unsigned) back as the signed ``dtype``: two's complement, on every device."""
    return k.Cast(dtype, expr)


def _type_of(expr: k.Expr) -> str:
    return expr.dtype


def _cast(expr: k.Expr, dtype: str) -> k.Expr:
    if _type_of(expr) == dtype:
        return expr
    if isinstance(expr, k.Const) and dtype != "bool":
        # A literal takes the type it meets exactly (0.2 meeting float64 is the double 0.2).
        value = float(expr.value) if dtype.startswith("float") else int(expr.value)
        return k.Const(value, dtype)
    return k.Cast(dtype, expr)


def _truth(expr: k.Expr) -> k.Expr:
    if _type_of(expr) == "bool":
        return expr
    return k.BinOp("!=", expr, k.Const(0, _type_of(expr)), "bool")


# -- kernels ---------------------------------------------------------------------------------------------


def lower_plan(plan: KernelPlan, ctx: LoweringContext, name: str) -> k.Kernel:
    if plan.kind == "contraction":
        return lower_contraction(plan, ctx, name)
    if plan.kind == "special":
        return lower_special(plan, ctx, name)
    return lower_elementwise(plan, ctx, name)


def _epilogue(plan: KernelPlan, ctx: LoweringContext, cell: list[k.Expr], flat: k.Expr,
              itype: str, registers: dict[str, k.Expr],
              scalars: dict[str, k.Expr] | None = None,
              exact_cell: bool = False) -> list[k.Stmt]:
    """Evaluate the plan's elementwise statements at this cell and store what is needed.
    ``scalars`` gives values already loaded for one-element tensors (hoisted loads).
    ``exact_cell``: every coordinate of ``cell`` is the cell's own (not only those that
    broadcast operands read), so a cell statement (a pooling gradient's gather) takes them
    instead of decoding ``flat`` by a division and a remainder per axis."""

    def value_of(name: str) -> k.Expr:
        if scalars and name in scalars:
            return scalars[name]
        index = broadcast_index(cell, plan.shape, ctx.shape(name), flat, itype)
        return ctx.load(name, index)

    stmts = evaluate_statements(plan.elementwise, ctx, value_of, registers, flat,
                                (cell, plan.shape) if exact_cell else None)
    in_loop = {e.out for e in plan.prologue}  # stored by the reduction loop
    for produced in plan.produced:
        if produced in plan.stores and produced not in in_loop:
            stmts.append(k.Store(ctx.param(produced, output=True), flat, registers[produced]))
    return stmts


def evaluate_statements(statements: list[tir.Elementwise | CellStatement], ctx: LoweringContext,
                        value_of, registers: dict[str, k.Expr], flat: k.Expr,
                        cell: tuple[list[k.Expr], tuple[int, ...]] | None = None
                        ) -> list[k.Stmt]:
    """Declare a register ``v_<out>`` per statement, in order (added to ``registers``);
    ``value_of`` gives the other tensors' values at the cell, ``flat`` is its index (a
    :class:`CellStatement` computes its coordinates from it, or takes ``cell``'s coordinates
    where they are of its shape)."""
    stmts: list[k.Stmt] = []

    def value(name: str) -> k.Expr:
        if name in registers:
            return registers[name]
        if ctx.buffer(name) in registers:
            # A reshape of a value computed here: fusion lets it be read only at the same
            # flat cell (fusion._fusion_target), so it is the same register.
            return registers[ctx.buffer(name)]
        return value_of(name)

    lowering = ExprLowering(ctx, value)
    for statement in statements:
        ctype = compute_type(ctx.dtype(statement.out))
        register = f"v_{statement.out}"
        if isinstance(statement, CellStatement):
            declarations, value = lower_cell_statement(statement, ctx, lowering.value_of, flat,
                                                       ctype, cell)
            stmts += declarations
        else:
            value = lowering.lower(statement.expr)
        value = _cast(value, ctype)
        stmts.append(k.Declare(register, ctype, as_stored(value, ctx.dtype(statement.out), ctx)))
        registers[statement.out] = k.Var(register, ctype)
    return stmts


def lower_elementwise(plan: KernelPlan, ctx: LoweringContext, name: str) -> k.Kernel:
    cells = math.prod(plan.shape)
    itype = index_type(cells)
    flat = k.Var("g", itype)
    needs_coordinates = any(
        ctx.shape(n) != plan.shape and math.prod(ctx.shape(n)) != 1
        for statement in plan.elementwise for n in statement.inputs()
    )
    names = [f"c{axis}" for axis in range(len(plan.shape))]
    body: list[k.Stmt] = []
    if needs_coordinates:
        body += cell_coordinates(flat, plan.shape, names, itype)
    cell = [k.Var(n, itype) for n in names]
    body += _epilogue(plan, ctx, cell, flat, itype, {})
    loop = k.For("g", 0, cells, k.block(*body), kind="thread")
    return _kernel(name, ctx, loop, cells, schedule=f"elementwise over {cells} cells")


# -- bandwidth-bound kernels ------------------------------------------------------------------------
#
# An elementwise chain or a special operation moves a few bytes per cell and computes little:
# its speed is the memory bandwidth it reaches. On a GPU each work-item then takes VECTOR_WIDTH
# consecutive cells, reading and writing each same-shaped 4-byte tensor with one 16-byte vector
# access. On an H200, relu(X * A + B) * C over 2^24 floats took 54.6 us with one work-item per
# cell (0.64 of a device copy) and takes 35.0 us so, against the copy's 34.9 (`gingham bench ops
# --device cuda:0`). On a CPU each OpenMP iteration takes a chunk of cells in an ``omp simd``
# loop. Both load one-element tensors once, outside the per-cell work.
#
# Half-type tensors (a bfloat16 step's activations) move as 8-byte vectors of their bits, and
# operands broadcast along the leading axes only (a channels-last batch norm's per-channel
# mean, scale ...) as one vector at the first cell's index: read per cell, a warp's load of
# 2-byte elements 8 bytes apart, or of 4 per-channel floats per work-item 16 bytes apart, keeps
# the memory pipeline busy with requests 4x more often than the bytes need. On an H200, the
# bfloat16 ResNet-9 step's batch-norm applies went from 1.2-1.4 TB/s to about 2.5 (k11_T19,
# 268 MB: 0.218 ms -> 0.106, each launch timed synchronised; `tools/kernel_bandwidth.py`), and
# 8 cells per work-item (16-byte bf16 vectors) gained nothing more.

#: Cells per GPU work-item: one 16-byte vector of a 4-byte type.
VECTOR_WIDTH = 4
#: Storage types read and written as vectors of VECTOR_WIDTH, and the element type of the
#: vector: the 4-byte types are their own compute type; the half types move as their bits.
VECTOR_DTYPES = {"float32": "float32", "int32": "int32", "float16": "uint16",
                 "bfloat16": "uint16"}
#: Cells per iteration of the CPU's parallel loop (its inner loop is ``omp simd``).
CPU_CHUNK = 4096


def lower_streaming(plan: KernelPlan, ctx: LoweringContext, name: str, dialect: str
                    ) -> k.Kernel | None:
    """An elementwise or special kernel for a bandwidth-bound plan in ``dialect``, or None
    (then :func:`lower_plan`'s one work-item per cell is the schedule). Computes exactly the
    cells and values of :func:`lower_elementwise` / :func:`lower_special`."""
    cells = math.prod(plan.shape)
    if plan.kind not in ("elementwise", "special") or cells < 2 * VECTOR_WIDTH:
        return None
    if plan.kind == "special" and plan.special.op == "shape":
        return None
    if dialect in ("opencl", "cuda"):
        return _lower_vectorised(plan, ctx, name)
    if dialect == "c" and plan.kind == "elementwise":
        return _lower_chunked(plan, ctx, name)
    return None


def _one_element_loads(plan: KernelPlan, ctx: LoweringContext, itype: str
                       ) -> tuple[list[k.Stmt], dict[str, k.Expr]]:
    """Loads of the one-element tensors an elementwise plan reads, hoisted: (declarations,
    tensor -> its value)."""
    stmts: list[k.Stmt] = []
    values: dict[str, k.Expr] = {}
    if plan.kind != "elementwise":
        return stmts, values
    for tensor in sorted(plan.reads()):
        if math.prod(ctx.shape(tensor)) != 1:
            continue
        register = f"s_{tensor}"
        ctype = compute_type(ctx.dtype(tensor))
        stmts.append(k.Declare(register, ctype, ctx.load(tensor, k.Const(0, itype))))
        values[tensor] = k.Var(register, ctype)
    return stmts, values


def _needs_coordinates(plan: KernelPlan, ctx: LoweringContext) -> bool:
    return any(ctx.shape(n) != plan.shape and math.prod(ctx.shape(n)) != 1
               for statement in plan.elementwise for n in statement.inputs())


def _vector_dtype(ctx: LoweringContext, tensor: str) -> str | None:
    """The element type of ``tensor``'s vectors in a register array (its bits for a half
    type), or None when it is read and written per element (a coordinate is computed)."""
    if ctx.is_coordinate(tensor):
        return None
    return VECTOR_DTYPES.get(dt.dtype_name(ctx.dtype(ctx.buffer(tensor))))


def _from_lane(ctx: LoweringContext, tensor: str, lane: k.Expr) -> k.Expr:
    """``tensor``'s value in its compute type from element ``lane`` of its register vector."""
    storage = dt.dtype_name(ctx.dtype(ctx.buffer(tensor)))
    vtype = VECTOR_DTYPES[storage]
    value = k.LoadLocal(f"x_{tensor}", (lane,), vtype)
    if vtype != storage:  # a half type's bits
        return k.Call(f"from_bits_{storage}", (value,), "float32")
    return value


def _to_lane(ctx: LoweringContext, tensor: str, value: k.Expr) -> k.Expr:
    """``value`` (compute type) as element of ``tensor``'s register vector holds it."""
    storage = dt.dtype_name(ctx.dtype(ctx.buffer(tensor)))
    vtype = VECTOR_DTYPES[storage]
    return value if vtype == storage else k.Call(f"bits_{storage}", (value,), vtype)


def _speculated_arms(stmts: list[k.Stmt]) -> list[k.Stmt]:
    """``stmts`` (a lane's body) with each select arm that rounds or widens a half value from
    registers alone computed first, into its own variable, so that the select picks between
    two values instead of guarding a computation::

        v = X > 0 ? round_float16(f) : 0.0f;   ->   float sel0 = round_float16(f);
                                                    v = X > 0 ? sel0 : 0.0f;

    An OpenCL compiler may keep a guarded computation behind a branch, and a branch kept PoCL
    from vectorising the loop over work-items (a story-net fp16 gradient kernel: 16.0 ms
    before, 3.6 after). Only arms without a global load or an integer division move: those
    are safe to compute whatever the condition (float arithmetic does not trap on these
    devices)."""
    out: list[k.Stmt] = []
    moved = 0

    def movable(arm: k.Expr) -> bool:
        nodes = list(_expression_nodes(arm))
        return (any(isinstance(n, k.Call) and n.fn.startswith(("round_", "from_bits_"))
                    for n in nodes)
                and not any(isinstance(n, k.Load) or (isinstance(n, k.BinOp) and n.op in (
                    "/", "%", "idiv", "imod") and not dt.is_float(n.dtype)) for n in nodes))

    def computed_first(arm: k.Expr) -> k.Expr:
        nonlocal moved
        if not movable(arm):
            return arm
        name, moved = f"sel{moved}", moved + 1
        out.append(k.Declare(name, arm.dtype, arm))
        return k.Var(name, arm.dtype)

    def hoist(expr: k.Expr) -> k.Expr:  # the arms of every select, inner selects first
        return _map_bottom_up(expr, lambda e: k.Select(
            e.cond, computed_first(e.if_true), computed_first(e.if_false), e.dtype)
            if isinstance(e, k.Select) else e)

    for stmt in stmts:
        if isinstance(stmt, k.Declare) and stmt.init is not None:
            stmt = dataclasses.replace(stmt, init=hoist(stmt.init))
        elif isinstance(stmt, (k.Assign, k.Store, k.StoreLocal)):
            stmt = dataclasses.replace(stmt, value=hoist(stmt.value))
        out.append(stmt)
    return out


def _expression_nodes(expr: k.Expr) -> Iterator[k.Expr]:
    """Every node of ``expr`` but the indices of its loads, ``expr`` first."""
    yield expr
    for child in (getattr(expr, f, None) for f in ("a", "b", "cond", "if_true", "if_false")):
        if child is not None:
            yield from _expression_nodes(child)
    for child in getattr(expr, "args", ()):
        yield from _expression_nodes(child)


def _row_broadcast(plan: KernelPlan, ctx: LoweringContext, tensor: str, width: int) -> bool:
    """Whether the ``width`` cells of a work-item read ``tensor`` (broadcast along leading axes
    only: ``[C]`` over ``[N, H, W, C]``) at ``width`` consecutive elements, aligned: the plan's
    last axis is a multiple of ``width`` long and ``tensor`` is not broadcast along it."""
    shape = ctx.shape(tensor)
    if not shape or len(shape) > len(plan.shape) or plan.shape[-1] % width:
        return False
    # Broadcast (each axis the plan's or 1; a tensor read otherwise, by a pooling window's
    # gather, say, is no broadcast operand), and not along the last axis.
    lead = len(plan.shape) - len(shape)
    return (all(size in (1, plan.shape[lead + axis]) for axis, size in enumerate(shape))
            and shape[-1] == plan.shape[-1] and 1 < math.prod(shape) < math.prod(plan.shape))


def _stream_index_type(plan: KernelPlan, ctx: LoweringContext) -> str:
    if plan.kind == "special":
        return _special_index_type(plan, ctx)
    return index_type(math.prod(plan.shape) + VECTOR_WIDTH + 1)


def _cell(plan: KernelPlan, ctx: LoweringContext, flat: k.Expr, itype: str
          ) -> tuple[list[k.Stmt], list[k.Expr]]:
    """Coordinates of cell ``flat`` where broadcasting operands need them."""
    names = [f"c{axis}" for axis in range(len(plan.shape))]
    stmts = cell_coordinates(flat, plan.shape, names, itype) if _needs_coordinates(plan, ctx) \
        else []
    return stmts, [k.Var(n, itype) for n in names]


def _scalar_cell(plan: KernelPlan, ctx: LoweringContext, flat: k.Var, itype: str,
                 scalars: dict[str, k.Expr]) -> list[k.Stmt]:
    """Everything the plan computes and stores at one cell, with scalar loads and stores."""
    if plan.kind == "special":
        stmts, value = special_element(plan, ctx, flat, itype)
        return stmts + [k.Store(ctx.param(plan.special.out, output=True), flat, value)]
    stmts, cell = _cell(plan, ctx, flat, itype)
    return stmts + _epilogue(plan, ctx, cell, flat, itype, {}, scalars)


def _lower_vectorised(plan: KernelPlan, ctx: LoweringContext, name: str) -> k.Kernel:
    """Work-item g computes cells [4g, 4g + 4): same-shaped tensors of a 4-byte or half type
    move as one vector each (16 or 8 bytes), operands broadcast along the leading axes as one
    vector read at cell 4g (:func:`_row_broadcast`), the rest per cell; work-item 0 also
    computes the cells after the last whole vector (fewer than 4).

        float x_X[4]; *((float4*)&x_X[0]) = *((const float4*)&X[g * 4]);   // X[N, H, W, C]
        float x_S[4]; *((float4*)&x_S[0]) = *((const float4*)&S[c3]);      // S[C]
        for (l ...) { y_Y[l] = x_X[l] * x_S[l]; }  *((float4*)&Y[g * 4]) = ...;
    """
    width = VECTOR_WIDTH
    cells = math.prod(plan.shape)
    itype = _stream_index_type(plan, ctx)
    def e(value: int) -> k.Const:
        return k.Const(value, itype)

    vectors = cells // width
    g = k.Var("g", itype)
    base = k.BinOp("*", g, e(width), itype)
    body, scalars = _one_element_loads(plan, ctx, itype)
    loads: list[k.Stmt] = []
    lanes: dict[str, str] = {}  # tensor -> buffer, for the tensors read from register vectors
    # When a row of the plan holds whole vectors, a work-item's cells differ only in their
    # last coordinate: the others are computed once, at cell 4g (per cell they were divisions
    # and remainders for every broadcast read and gathered operand).
    rows = plan.kind == "elementwise" and len(plan.shape) > 1 and plan.shape[-1] % width == 0
    first: list[k.Expr] | None = None  # the coordinates of cell 4g, when needed
    if rows:
        names = [f"b{axis}" for axis in range(len(plan.shape))]
        loads += cell_coordinates(base, plan.shape, names, itype)
        first = [k.Var(n, itype) for n in names]
    if plan.kind == "elementwise":
        for tensor in sorted(plan.reads()):
            vtype = _vector_dtype(ctx, tensor)
            if vtype is None or tensor in scalars:
                continue
            if math.prod(ctx.shape(tensor)) == cells:
                index: k.Expr = base
            elif first is not None and _row_broadcast(plan, ctx, tensor, width):
                index = broadcast_index(first, plan.shape, ctx.shape(tensor), base, itype)
            else:
                continue
            lanes[tensor] = ctx.buffer(tensor)
            loads += [k.LocalArray(f"x_{tensor}", vtype, (width,), "register", align=16),
                      k.CopyLocal(f"x_{tensor}", (e(0),), ctx.param(tensor), (index,), width,
                                  vtype)]
    lane = k.Var("l", itype)
    flat = k.Var("ge", itype)
    per_lane: list[k.Stmt] = [k.Declare("ge", itype, k.BinOp("+", base, lane, itype))]
    outputs = [plan.special.out] if plan.kind == "special" else \
        [p for p in plan.produced if p in plan.stores]
    if plan.kind == "special":
        stmts, value = special_element(plan, ctx, flat, itype)
        per_lane += stmts
        values = {plan.special.out: value}
    else:
        if first is not None:
            cell = first[:-1] + [k.BinOp("+", first[-1], lane, itype)]
            declared = True
        else:
            stmts, cell = _cell(plan, ctx, flat, itype)
            per_lane += stmts
            declared = bool(stmts)  # only where broadcast operands need them

        # A half tensor's lane is widened once, first, rather than where the expression
        # reads it: read inside one arm of a select (a ReLU gradient's `x > 0 ? dy : 0`),
        # the conversion stayed behind a branch and PoCL left the work-item loop scalar (a
        # story-net fp16 gradient kernel: 11.6 -> 2.9 ms). Unused, a compiler drops it.
        lane_values: dict[str, k.Expr] = {}
        for tensor in sorted(lanes):
            value = _from_lane(ctx, tensor, lane)
            if isinstance(value, k.Call):  # a half type's conversion
                per_lane.append(k.Declare(f"w_{tensor}", "float32", value))
                value = k.Var(f"w_{tensor}", "float32")
            lane_values[tensor] = value

        def value_of(tensor: str) -> k.Expr:
            if tensor in scalars:
                return scalars[tensor]
            if tensor in lane_values:
                return lane_values[tensor]
            index = broadcast_index(cell, plan.shape, ctx.shape(tensor), flat, itype)
            return ctx.load(tensor, index)

        values = {}
        # A pinned cell statement takes the coordinates where they are declared, else
        # computes its own from the flat index.
        per_lane += _speculated_arms(evaluate_statements(
            plan.elementwise, ctx, value_of, values, flat, (cell, plan.shape) if declared
            else None))
    stores: list[k.Stmt] = []
    for out in outputs:
        buffer = ctx.param(out, output=True)
        vtype = _vector_dtype(ctx, out)
        if vtype is None:
            per_lane.append(k.Store(buffer, flat, values[out]))
            continue
        array = f"y_{buffer}"
        loads.append(k.LocalArray(array, vtype, (width,), "register", align=16))
        per_lane.append(k.StoreLocal(array, (lane,), _to_lane(ctx, out, values[out])))
        stores.append(k.CopyLocal(buffer, (base,), array, (e(0),), width, vtype))
    if vectors:
        body += loads + [k.For("l", 0, width, k.block(*per_lane), kind="unroll")] + stores
    if cells % width:
        tail = k.For("ge", vectors * width, cells, k.block(*_scalar_cell(plan, ctx, flat, itype,
                                                                         scalars)))
        body.append(k.If(k.BinOp("==", g, e(0), "bool"), tail))
    items = max(vectors, 1)
    loop = k.For("g", 0, items, k.block(*body), kind="thread")
    what = plan.special.op if plan.kind == "special" else "elementwise"
    vectorised = ", ".join(sorted(set(lanes.values()) | {ctx.buffer(o) for o in outputs
                                                         if _vector_dtype(ctx, o)})) or "none"
    schedule = (f"{what} over {cells} cells, {width} per work-item ({items} work-items); "
                f"vector loads/stores: {vectorised}; hoisted scalars: "
                f"{', '.join(sorted(scalars)) or 'none'}")
    return _kernel(name, ctx, loop, items, schedule)


def _lower_chunked(plan: KernelPlan, ctx: LoweringContext, name: str) -> k.Kernel | None:
    """C: each OpenMP iteration computes a chunk of cells (CPU_CHUNK, or a divisor of the run
    over which broadcast operands stay constant) in an ``omp simd`` loop, with the one-element
    tensors, and the broadcast values constant over the chunk, loaded once per chunk."""
    cells = math.prod(plan.shape)
    itype = _stream_index_type(plan, ctx)
    if itype != "int32":
        return None  # the renderer gives a loop with a computed bound an int counter
    size, runs = _chunk_for_runs(plan, ctx)
    if not runs:
        span = _trailing_span(plan, ctx)
        if span is not None:
            return _lower_rows(plan, ctx, name, itype, span)
    chunks = math.ceil(cells / size)
    body, scalars = _one_element_loads(plan, ctx, itype)
    chunk = k.Var("gc", itype)
    start = k.BinOp("*", chunk, k.Const(size, itype), itype)
    if runs:
        # Per-channel operands (batch norm's mean, scale ...): the chunk lies in one run of
        # each, so one load per chunk at its first cell replaces a gather per cell.
        names = [f"gs{axis}" for axis in range(len(plan.shape))]
        body += cell_coordinates(start, plan.shape, names, itype)
        first = [k.Var(n, itype) for n in names]
        for tensor in runs:
            register = f"s_{tensor}"
            ctype = compute_type(ctx.dtype(tensor))
            index = broadcast_index(first, plan.shape, ctx.shape(tensor), start, itype)
            body.append(k.Declare(register, ctype, ctx.load(tensor, index)))
            scalars[tensor] = k.Var(register, ctype)
    stop = k.BinOp("+", start, k.Const(size, itype), itype)
    last = k.BinOp("<", stop, k.Const(cells, itype), "bool")
    body.append(k.Declare("gc_stop", itype, k.Select(last, stop, k.Const(cells, itype), itype)))
    flat = k.Var("ge", itype)
    inner = k.For("ge", start, k.Var("gc_stop", itype),
                  k.block(*_scalar_cell(plan, ctx, flat, itype, scalars)), kind="simd")
    body.append(inner)
    loop = k.For("gc", 0, chunks, k.block(*body), kind="thread")
    schedule = (f"elementwise over {cells} cells, {chunks} chunks of {size} (omp simd); "
                f"hoisted scalars: {', '.join(sorted(scalars)) or 'none'}")
    return _kernel(name, ctx, loop, chunks, schedule)


def _broadcast_reads(plan: KernelPlan, ctx: LoweringContext
                     ) -> list[tuple[str, tuple[int, ...], int]]:
    """The tensors an elementwise plan reads broadcast (neither of its cells nor one element),
    each with its shape and how many leading axes of the plan it lacks."""
    cells = math.prod(plan.shape)
    found = []
    for tensor in sorted(plan.reads()):
        shape = ctx.shape(tensor)
        if shape == plan.shape or math.prod(shape) in (1, cells):
            continue
        found.append((tensor, shape, len(plan.shape) - len(shape)))
    return found


#: Fewest cells in a row of :func:`_lower_rows`: a vector of float32 on most CPUs.
MIN_ROW = 8


def _trailing_span(plan: KernelPlan, ctx: LoweringContext) -> int | None:
    """The first axis of the rows :func:`_lower_rows` computes an elementwise plan in, or None
    for the flat loop (no operand of another shape: the flat index is every address).

    Per-channel operands of channels-last data (``[C]`` over ``[N, H, W, C]``) give the axes
    they vary along (3). Operands read otherwise (a pooling gradient's gather from the pooled
    cells, an operand broadcast along the first axis) give rows of the last axis: their reads
    are contiguous along it, and the leading coordinates are decoded once per row instead of
    by a division and a remainder per cell. Widened to the left until a row holds MIN_ROW
    cells; None when a row would hold more than CPU_CHUNK."""
    shape = plan.shape
    reads = _broadcast_reads(plan, ctx)
    if not reads or len(shape) < 2:
        return None
    start = len(shape)
    for tensor, tshape, lead in reads:  # each has an axis longer than 1: it is no scalar
        if lead < 0:  # more axes than the plan (a cell statement's gather): read otherwise
            first = len(shape) - 1
        else:
            first = next(axis for axis in range(lead, len(shape)) if tshape[axis - lead] != 1)
        start = min(start, first)
    if start == 0:
        start = len(shape) - 1
    while start > 0 and math.prod(shape[start:]) < MIN_ROW:
        start -= 1
    if start == 0 or math.prod(shape[start:]) > CPU_CHUNK:
        return None
    return start


def _lower_rows(plan: KernelPlan, ctx: LoweringContext, name: str, itype: str,
                span: int) -> k.Kernel:
    """C: an elementwise plan as rows of its trailing axes from ``span``
    (:func:`_trailing_span`): each OpenMP iteration takes about CPU_CHUNK cells in whole
    rows; the row's leading coordinates are decoded once, and an ``omp simd`` loop over the
    row reads per-channel operands at the row's own index, contiguously (with a flat index
    they were gathers at ``g % C``), and gathered operands at addresses that advance with it.

        for (gc ...) for (gr = gc * 32; gr < ...; gr++) {
            r0 = gr / 1024; r1 = (gr / 32) % 32; r2 = gr % 32;
            #pragma omp simd
            for (c = 0; c < 128; c++) { ge = gr * 128 + c; Y[ge] = X[ge] * S[c] + B[c]; } }
    """
    shape = plan.shape
    cells = math.prod(shape)
    row = math.prod(shape[span:])
    rows = cells // row
    per_chunk = max(1, CPU_CHUNK // row)
    chunks = math.ceil(rows / per_chunk)

    def c(value: int) -> k.Const:
        return k.Const(value, itype)

    def var(name: str) -> k.Var:
        return k.Var(name, itype)

    body, scalars = _one_element_loads(plan, ctx, itype)
    start = k.BinOp("*", var("gc"), c(per_chunk), itype)
    stop = k.BinOp("+", start, c(per_chunk), itype)
    body.append(k.Declare("gc_stop", itype, k.Select(k.BinOp("<", stop, c(rows), "bool"), stop,
                                                     c(rows), itype)))
    leading = [f"r{axis}" for axis in range(span)]
    names = [f"c{axis}" for axis in range(span, len(shape))]
    cell: list[k.Expr] = [var(n) for n in leading + names]
    flat = var("ge")

    def one_cell(lane: k.Expr, cell: list[k.Expr]) -> list[k.Stmt]:
        per_cell: list[k.Stmt] = [k.Declare("ge", itype, k.BinOp(
            "+", k.BinOp("*", var("gr"), c(row), itype), lane, itype))]
        per_cell += cell_coordinates(lane, tuple(shape[span:]), names, itype)
        return per_cell + _epilogue(plan, ctx, cell, flat, itype, {}, scalars, exact_cell=True)

    residues = _lane_residues(plan, span)
    if residues == 1:
        lanes = k.For("gl", 0, row, k.block(*one_cell(var("gl"), cell)), kind="simd")
        note = ""
    else:
        # Cell residues * gq + r of the row, for each r a copy in a scope of its own: the
        # pinned window positions are constants there (cell.pinned_declarations).
        copies = []
        for r in range(residues):
            lane = k.BinOp("+", k.BinOp("*", c(residues), var("gq"), itype), c(r), itype)
            copies.append(k.Block(tuple(one_cell(lane, cell[:-1] + [lane])), scoped=True))
        lanes = k.For("gq", 0, row // residues, k.block(*copies), kind="simd")
        note = f", {residues} cells a lane (the window positions constant)"
    per_row = cell_coordinates(var("gr"), tuple(shape[:span]), leading, itype)
    body.append(k.For("gr", start, var("gc_stop"), k.block(*per_row, lanes)))
    loop = k.For("gc", 0, chunks, k.block(*body), kind="thread")
    schedule = (f"elementwise over {cells} cells, {rows} rows of {row} in {chunks} chunks "
                f"(omp simd over a row; its leading coordinates decoded once{note}); hoisted "
                f"scalars: {', '.join(sorted(scalars)) or 'none'}")
    return _kernel(name, ctx, loop, chunks, schedule)


#: Most cells one lane of :func:`_lower_rows` computes to make pinned window positions
#: constant (a stride of at most this along the row).
MAX_LANE_RESIDUES = 4


def _lane_residues(plan: KernelPlan, span: int) -> int:
    """How many neighbouring cells of a row one lane of :func:`_lower_rows` computes: the
    stride ``m`` of a pooling gradient's windows along the row's axis where a cell statement
    pins a window position to ``o mod m`` (normalize.pin), else 1.

    Along the lanes ``o mod m`` takes turns, and the reads at ``(o - k) / m`` are gathers that
    gcc does not vectorise for 8-bit tensors (a max pool's winning taps): NCHW max-pool
    gradient, 2x2 windows of 32x32 images, 14 ms a batch of 128 on 2 cores. With lane ``q``
    computing cells ``m*q + r`` for each ``r`` in turn, ``k`` is ``r`` and the reads are at
    ``q``: 2.6 ms.

        D_X[o] = X[o] == O[(o - k) / 2] ? D_O[(o - k) / 2] : 0, k = o mod 2
        ->  for q: { D_X[2q] = X[2q] == O[q] ? D_O[q] : 0;  D_X[2q+1] = ... }
    """
    shape = plan.shape
    if span != len(shape) - 1:
        return 1
    moduli = [1]
    for statement in plan.elementwise:
        if not isinstance(statement, CellStatement) or statement.nc.out_shape != shape:
            continue
        last = statement.nc.out_vars[-1]
        moduli += [p.modulus for p in statement.nc.pinned
                   if p.poly.coeffs.get(last, 0) % p.modulus]
    residues = math.lcm(*moduli)
    return residues if residues <= MAX_LANE_RESIDUES and shape[-1] % residues == 0 else 1


#: Fewest cells per chunk for which loading the broadcast operands once per chunk pays.
MIN_RUN_CHUNK = 256


def _chunk_for_runs(plan: KernelPlan, ctx: LoweringContext) -> tuple[int, list[str]]:
    """The chunk size and the broadcast tensors constant over every chunk.

    A tensor broadcast along the plan's trailing axes (``[1, C, 1, 1]`` over ``[N, C, H, W]``)
    keeps one value over runs of ``H * W`` consecutive cells; every such run length is a
    product of trailing sizes, so each is a multiple of the shortest. A chunk dividing the
    shortest (at least MIN_RUN_CHUNK cells) lies inside one run of each.

        [32, 64, 32, 32] with [1, 64, 1, 1] operands -> (1024, [those operands])
    """
    runs: dict[str, int] = {}
    for tensor, shape, lead in _broadcast_reads(plan, ctx):
        run = 1
        for axis in range(len(plan.shape) - 1, -1, -1):
            if axis >= lead and shape[axis - lead] != 1:
                break
            run *= plan.shape[axis]
        if run >= MIN_RUN_CHUNK:
            runs[tensor] = run
    if not runs:
        return CPU_CHUNK, []
    shortest = min(runs.values())
    size = max(d for d in range(1, min(shortest, CPU_CHUNK) + 1) if shortest % d == 0)
    if size < MIN_RUN_CHUNK:
        return CPU_CHUNK, []
    return size, sorted(runs)


def _kernel(name: str, ctx: LoweringContext, body: k.Stmt, cells: int, schedule: str,
            local: int = 256) -> k.Kernel:
    local = max(1, min(local, cells))
    global_size = ((cells + local - 1) // local) * local
    params = tuple(sorted(ctx.params.values(), key=lambda p: (p.output, p.name)))
    return k.Kernel(name, params, body, k.Launch((global_size,), (local,)), schedule,
                    uses=frozenset(ctx.uses))


_IDENTITY = {"+": 0, "=": 0, "*": 1}


def identity_value(agg: str, ctype: str):
    if agg in _IDENTITY:
        return _IDENTITY[agg]
    dtype = np.dtype(dt.DTYPES[ctype])
    if dt.is_float(dtype):
        return -math.inf if agg == ">" else math.inf
    if dt.is_bool(dtype):
        return agg == "<"
    info = np.iinfo(dtype)
    return int(info.min) if agg == ">" else int(info.max)


def aggregate(agg: str, acc: k.Expr, value: k.Expr, ctype: str) -> k.Expr:
    if agg == "+":
        return k.BinOp("+", acc, value, ctype)
    if agg == "*":
        return k.BinOp("*", acc, value, ctype)
    if agg == ">":
        return k.Call("max", (acc, value), ctype)
    if agg == "<":
        return k.Call("min", (acc, value), ctype)
    return value


def contraction_value(nc: NormalContraction, ctx: LoweringContext, ctype: str, itype: str,
                      computed: dict[str, k.Expr] | None = None
                      ) -> tuple[k.Expr, k.Expr | None]:
    """The combined value of one assignment, and for ``?`` the condition it contributes under.
    ``computed`` holds operands already computed in registers (a plan's prologue)."""
    computed = computed or {}
    loads = [computed[a.tensor] if a.tensor in computed else
             ctx.load(a.tensor, access_index(a.index, a.sizes, itype)) for a in nc.operands]
    if nc.combo == "none":
        return _cast(loads[0], ctype), None
    if nc.combo == "?":
        common = compute_type(dt.promote(ctx.dtype(nc.operands[0].tensor),
                                         ctx.dtype(nc.operands[1].tensor)))
        cond = k.BinOp("==", _cast(loads[0], common), _cast(loads[1], common), "bool")
        return _cast(loads[2], ctype), cond
    if nc.combo == "==":
        common = compute_type(dt.promote(ctx.dtype(nc.operands[0].tensor),
                                         ctx.dtype(nc.operands[1].tensor)))
        equal = k.BinOp("==", _cast(loads[0], common), _cast(loads[1], common), "bool")
        return _cast(equal, ctype), None
    return k.BinOp(nc.combo, _cast(loads[0], ctype), _cast(loads[1], ctype), ctype), None


def needs_reached_flag(nc: NormalContraction) -> bool:
    """Sums start from 0, which is also the unreached value; other aggregations must know
    whether any assignment reached the cell unless the box guarantees one."""
    if nc.agg == "+":
        return False
    return not nc.always_reached or nc.combo == "?"


def finalize(nc: NormalContraction, ctx: LoweringContext, acc: k.Expr, reached: k.Expr | None,
             cell: list[k.Expr], flat: k.Expr, ctype: str, itype: str) -> k.Expr:
    """The cell's value: unreached cells hold 0 or the default; reached ones combine."""
    default: k.Expr | None = None
    if nc.default is not None:
        index = broadcast_index(cell, nc.out_shape, ctx.shape(nc.default), flat, itype)
        default = _cast(ctx.load(nc.default, index), ctype)
    value = acc
    if default is not None and nc.agg != "=":
        value = aggregate(nc.agg, default, acc, ctype)
    if reached is not None:
        unreached = default if default is not None else k.Const(0, ctype)
        value = k.Select(reached, value, unreached, ctype)
    return as_stored(value, ctx.dtype(nc.out), ctx)


def accumulate(nc: NormalContraction, ctx: LoweringContext, ctype: str, itype: str,
               flag: str | None, computed: dict[str, k.Expr] | None = None) -> k.Stmt:
    """One assignment's contribution to ``acc`` (and ``flag`` set), under the guards the loop
    box does not imply and, for ``A == B ? C``, the condition."""
    value, condition = contraction_value(nc, ctx, ctype, itype, computed)
    update: list[k.Stmt] = [k.Assign("acc", aggregate(nc.agg, k.Var("acc", ctype), value, ctype))]
    if flag is not None:
        update.append(k.Assign(flag, k.Const(True, "bool")))
    inner: k.Stmt = k.block(*update)
    if condition is not None:
        inner = k.If(condition, inner)
    guard = conjunction([guard_condition(q.poly, q.upper, itype) for q in nc.guards])
    if guard is not None:
        inner = k.If(guard, inner)
    return inner


def hoisted_guards(nc: NormalContraction, lane_var: str, itype: str) -> k.Expr | None:
    """The conjunction of the guards that do not mention ``lane_var`` (the innermost output
    variable when the cells are vector lanes): the same for every lane, so tested once
    outside the loop over lanes. :func:`accumulate` with ``lane_var`` tests the others."""
    return conjunction([guard_condition(q.poly, q.upper, itype) for q in nc.guards
                        if lane_var not in q.poly.names()])


def _map_loads(expr: k.Expr, fn) -> k.Expr:
    """``expr`` with every ``Load`` replaced by ``fn(load)`` (inner ones first)."""
    return _map_bottom_up(expr, lambda e: fn(e) if isinstance(e, k.Load) else e)


def _map_bottom_up(expr: k.Expr, fn: Callable[[k.Expr], k.Expr]) -> k.Expr:
    """``expr`` rebuilt with ``fn`` applied to every node, a node's operands (and a load's
    index) before the node itself."""
    if isinstance(expr, k.Load):
        expr = k.Load(expr.buffer, _map_bottom_up(expr.index, fn), expr.dtype)
    elif isinstance(expr, k.BinOp):
        expr = k.BinOp(expr.op, _map_bottom_up(expr.a, fn), _map_bottom_up(expr.b, fn),
                       expr.dtype)
    elif isinstance(expr, k.UnOp):
        expr = k.UnOp(expr.op, _map_bottom_up(expr.a, fn), expr.dtype)
    elif isinstance(expr, k.Call):
        expr = k.Call(expr.fn, tuple(_map_bottom_up(a, fn) for a in expr.args), expr.dtype)
    elif isinstance(expr, k.Select):
        expr = k.Select(_map_bottom_up(expr.cond, fn), _map_bottom_up(expr.if_true, fn),
                        _map_bottom_up(expr.if_false, fn), expr.dtype)
    elif isinstance(expr, k.Cast):
        expr = k.Cast(expr.dtype, _map_bottom_up(expr.a, fn))
    return fn(expr)


def _accumulate_in_lanes(nc: NormalContraction, ctx: LoweringContext, ctype: str, itype: str,
                         flag: str | None, computed: dict[str, k.Expr], lane_var: str
                         ) -> k.Stmt:
    """:func:`accumulate` without branches, for a loop whose vector lanes are neighbouring
    cells (``omp simd`` over ``lane_var``). The guards that do not mention ``lane_var`` are
    the caller's (:func:`hoisted_guards`). The others and a ``?`` condition decide whether
    the lane takes its value: every load reads index 0 where the guards fail (so no lane
    reads outside a tensor), and the update is a select of the value or the aggregation's
    identity. Neither an ``if`` around loads nor a conditional float operation lets gcc
    vectorise (a float operation may trap: gcc does not run it speculatively).

        acc = acc + ((guard && X[safe] == Y[safe]) ? D[safe] : 0.0f);

    The result is that of :func:`accumulate`: ``acc + 0.0f`` is ``acc`` (a sum from +0 is
    never -0), ``gh_max(acc, -inf)`` is ``acc`` (NaN included), ``acc * 1`` is ``acc``.
    """
    value, condition = contraction_value(nc, ctx, ctype, itype, computed)
    guard = conjunction([guard_condition(q.poly, q.upper, itype) for q in nc.guards
                         if lane_var in q.poly.names()])
    if guard is not None:
        zero = k.Const(0, itype)
        safe = lambda load: k.Load(load.buffer, k.Select(guard, load.index, zero, itype),  # noqa: E731
                                   load.dtype)
        value = _map_loads(value, safe)
        condition = _map_loads(condition, safe) if condition is not None else None
    take = conjunction([c for c in (guard, condition) if c is not None])
    stmts: list[k.Stmt] = []
    if take is not None and flag is not None:
        # Decided once for both updates: ``reached || take`` would compare again, and read
        # ``take``'s operands only where the flag is still false (a conditional load). A
        # max-pool's winning tap (128x16x16x128 cells of 2x2 windows, 2-core AVX-512):
        # 3.6-4.0 ms with the value below read unconditionally, 2.6-3.1 ms with this too.
        stmts.append(k.Declare("lane_take", "bool", take))
        take = k.Var("lane_take", "bool")
    if take is not None and not isinstance(value, (k.Const, k.Var)):
        # Read unconditionally (every index is safe, above): a load in a select's arm is a
        # conditional load, which gcc neither vectorises nor hoists out of the loop, even
        # when every lane reads the same element (the winning tap above ran scalar, 27 ms).
        stmts.append(k.Declare("lane_value", ctype, value))
        value = k.Var("lane_value", ctype)
    acc = k.Var("acc", ctype)
    if take is None:
        update: k.Expr = aggregate(nc.agg, acc, value, ctype)
    elif nc.agg == "=":
        update = k.Select(take, value, acc, ctype)
    else:
        update = aggregate(nc.agg, acc, k.Select(take, value, k.Const(
            identity_value(nc.agg, ctype), ctype), ctype), ctype)
    stmts.append(k.Assign("acc", update))
    if flag is not None:
        flag_value = k.Const(True, "bool") if take is None else \
            k.BinOp("||", k.Var(flag, "bool"), take, "bool")
        stmts.append(k.Assign(flag, flag_value))
    return k.block(*stmts)


def accumulate_plan(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext,
                    ctype: str, itype: str, flag: str | None,
                    lane_var: str | None = None,
                    given: dict[str, k.Expr] | None = None) -> k.Stmt:
    """:func:`accumulate` for the plan's contraction ``nc`` and each of its siblings (into
    ``acc_<out>``), after computing the plan's prologue at the assignment's operand cell.

        for (i0 ...) { p_flat = ...; v_T2 = X[p_flat] - M[i1]; acc += v_T2 * v_T2; }

    ``lane_var``: the loop's vector lanes are neighbouring cells along this output variable
    (:func:`_accumulate_in_lanes`; the guards without it are the caller's).
    ``given``: tensors whose values at the assignment's operand cell the caller has already
    read (a GPU split reduction's vector loads, ``{"X": from_bits(x_X[l])}``); the caller
    gives only tensors that every operand reading them reads at that cell.
    """
    given = given or {}

    def own(computed: dict[str, k.Expr] | None) -> k.Stmt:
        computed = {**given, **(computed or {})}
        if lane_var is None:
            return accumulate(nc, ctx, ctype, itype, flag, computed)
        return _accumulate_in_lanes(nc, ctx, ctype, itype, flag, computed or {}, lane_var)

    if not plan.prologue and not plan.siblings:
        return own(None)
    # A plain reduction (fusion.reduction_domain): the operand is read at its own cells, each
    # axis one loop variable, so the prologue's cell is those variables.
    access = nc.operands[0]
    cell = [k.Var(poly.terms[0][0], itype) for poly in access.index]
    flat = k.Var("p_flat", itype)
    stmts: list[k.Stmt] = [k.Declare("p_flat", itype, access_index(access.index, access.sizes,
                                                                  itype))]

    def value_of(tensor: str) -> k.Expr:
        if tensor in given:
            return given[tensor]
        index = broadcast_index(cell, access.sizes, ctx.shape(tensor), flat, itype)
        return ctx.load(tensor, index)

    registers: dict[str, k.Expr] = {}
    stmts += evaluate_statements(plan.prologue, ctx, value_of, registers, flat,
                                 (cell, access.sizes))
    # Each assignment is one cell of the domain, visited once: store what others read.
    stmts += [k.Store(ctx.param(e.out, output=True), flat, registers[e.out])
              for e in plan.prologue if e.out in plan.stores]
    stmts.append(own(registers))
    for sibling in plan.siblings:
        sibling_type = compute_type(ctx.dtype(sibling.out))
        value = registers[sibling.operand] if sibling.operand in registers else \
            value_of(sibling.operand)
        acc = k.Var(f"acc_{sibling.out}", sibling_type)
        stmts.append(k.Assign(acc.name, aggregate(sibling.agg, acc, _cast(value, sibling_type),
                                                  sibling_type)))
    return k.block(*stmts)


def _fused_note(plan: KernelPlan) -> str:
    """What the schedule line adds for a prologue and siblings (GINGHAM_DEBUG=3)."""
    note = ""
    if plan.siblings:
        note += f", {1 + len(plan.siblings)} reductions"
    if plan.prologue:
        note += f", operands computed in the loop: {', '.join(e.out for e in plan.prologue)}"
        stored = [e.out for e in plan.prologue if e.out in plan.stores]
        if stored:
            note += f" (stored: {', '.join(stored)})"
    return note


def sibling_accumulators(plan: KernelPlan, ctx: LoweringContext) -> list[k.Stmt]:
    """Declarations of the siblings' accumulators, each at its aggregation's identity."""
    stmts: list[k.Stmt] = []
    for sibling in plan.siblings:
        ctype = compute_type(ctx.dtype(sibling.out))
        stmts.append(k.Declare(f"acc_{sibling.out}", ctype,
                               k.Const(identity_value(sibling.agg, ctype), ctype)))
    return stmts


def sibling_results(plan: KernelPlan, ctx: LoweringContext, accumulators: dict[str, k.Expr],
                    registers: dict[str, k.Expr]) -> list[k.Stmt]:
    """Each sibling's value ``v_<out>`` (added to ``registers``) from its accumulated value in
    ``accumulators``: the domain reaches every cell, so it is the value as stored."""
    stmts: list[k.Stmt] = []
    for sibling in plan.siblings:
        ctype = compute_type(ctx.dtype(sibling.out))
        stmts.append(k.Declare(f"v_{sibling.out}", ctype,
                               as_stored(accumulators[sibling.out], ctx.dtype(sibling.out), ctx)))
        registers[sibling.out] = k.Var(f"v_{sibling.out}", ctype)
    return stmts


def lower_contraction(plan: KernelPlan, ctx: LoweringContext, name: str) -> k.Kernel:
    assert plan.contraction is not None
    # Loop only over the assignments a guard lets through (gradients of strided windows), and
    # not at all over variables the guards determine (non-overlapping windows).
    nc = pin(narrow(plan.contraction))
    cells = math.prod(nc.out_shape)
    itype = _contraction_index_type(nc)
    flat = k.Var("g", itype)
    body: list[k.Stmt] = cell_coordinates(flat, nc.out_shape, list(nc.out_vars), itype)
    body += pinned_declarations(nc, itype)
    cell_body, lanes = contraction_cell(plan, nc, ctx, flat, itype, may_use_lanes=True)
    loop = k.For("g", 0, cells, k.block(*body, *cell_body), kind="thread")
    order = "vector-lane" if lanes else "serial"  # lanes: over the innermost loop(s)
    across = f" (the lanes across {lanes} loops)" if lanes > 1 else ""
    schedule = (f"one work-item per output cell ({cells}), {order} reduction over "
                f"{nc.reduction_size} assignments{across}, {len(nc.guards)} guards"
                f"{_fused_note(plan)}")
    kernel = _kernel(name, ctx, loop, cells, schedule)
    flops = 2 * cells * nc.reduction_size
    return k.Kernel(kernel.name, kernel.params, kernel.body, kernel.launch, kernel.schedule,
                    flops=flops, uses=kernel.uses)


def _contraction_index_type(nc: NormalContraction) -> str:
    cells = math.prod(nc.out_shape)
    biggest = max([cells] + [math.prod(a.sizes) for a in nc.operands])
    return index_type(biggest * 2 + 16)


def contraction_cell(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext,
                     flat: k.Expr, itype: str, may_use_lanes: bool
                     ) -> tuple[list[k.Stmt], int]:
    """Everything one output cell does once its coordinates (``nc.out_vars``) and flat index
    ``flat`` are declared: accumulate over the reduction box, finalise, evaluate the epilogue
    and store. Returns the statements and how many of the innermost reduction loops run in
    vector lanes together (:func:`_lane_loops`): 0 for none, always where ``may_use_lanes``
    is false (the cells are the vector lanes).

        float acc = 0.0f; for (k0 ...) { acc = acc + X[...]; } float v_M = acc; M[g] = v_M;
    """
    out_dtype = ctx.dtype(nc.out)
    ctype = compute_type(out_dtype)
    flag = needs_reached_flag(nc)
    body: list[k.Stmt] = [k.Declare("acc", ctype,
                                    k.Const(identity_value(nc.agg, ctype), ctype))]
    if flag:
        body.append(k.Declare("reached", "bool", k.Const(False, "bool")))
    body += sibling_accumulators(plan, ctx)
    inner = accumulate_plan(plan, nc, ctx, ctype, itype, "reached" if flag else None)
    lanes = _lane_loops(nc) if may_use_lanes and _reduction_in_lanes(plan, nc, ctx) else 0
    for depth, var in enumerate(reversed(nc.red_vars)):
        lo, hi = nc.red_ranges[var]
        if lanes and depth == lanes - 1:  # the outermost loop of those run in lanes
            inner = k.For(var, lo, hi + 1, inner, kind="simd",
                          reduction=_lane_clauses(plan, nc, ctx, flag), collapse=lanes)
        else:
            inner = k.For(var, lo, hi + 1, inner)
    body.append(inner)
    reached = k.Var("reached", "bool") if flag else None
    return body + finish_cell(plan, nc, ctx, flat, itype, reached), lanes


def finish_cell(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext, flat: k.Expr,
                itype: str, reached: k.Expr | None) -> list[k.Stmt]:
    """A cell's value from its accumulators ``acc`` and ``acc_<sibling>`` (and ``reached``):
    finalisation, the siblings' values, the fused epilogue and the stores."""
    ctype = compute_type(ctx.dtype(nc.out))
    cell = [k.Var(v, itype) for v in nc.out_vars]
    result = finalize(nc, ctx, k.Var("acc", ctype), reached, cell, flat, ctype, itype)
    body: list[k.Stmt] = [k.Declare(f"v_{nc.out}", ctype, result)]
    registers = {nc.out: k.Var(f"v_{nc.out}", ctype)}
    body += sibling_results(plan, ctx, {s.out: k.Var(f"acc_{s.out}", compute_type(
        ctx.dtype(s.out))) for s in plan.siblings}, registers)
    body += _epilogue(plan, ctx, cell, flat, itype, registers)
    return body


def _reduction_in_lanes(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext) -> bool:
    """Whether a cell's innermost reduction loop keeps partial results in vector lanes: a long
    enough loop (:data:`LANE_SUM_MIN`) whose every accumulator (the cell's, its siblings')
    aggregates by an operator lanes may combine (:func:`_lane_operator`). Prologue values
    the loop stores are stored by their own lane: each assignment is one cell of the domain.
    A softmax's row max and its sum of exponentials (2-core AVX-512, 512 rows of 1024):
    0.33 and 0.70 ms serial, 0.04 and 0.10 ms in lanes with vector exponentials."""
    if not nc.red_vars:
        return False
    lo, hi = nc.red_ranges[nc.red_vars[-1]]
    return hi - lo + 1 >= LANE_SUM_MIN and all(
        operator is not None for _, operator in _lane_accumulators(plan, nc, ctx))


def _lane_accumulators(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext
                       ) -> list[tuple[str, str | None]]:
    """Each accumulator of a cell's loop (``acc``, then each sibling's ``acc_<out>``) and the
    operator that combines its lanes (:func:`_lane_operator`; None: lanes may not take it)."""
    accumulators = [("acc", nc.agg, ctx.dtype(nc.out))]
    accumulators += [(f"acc_{s.out}", s.agg, ctx.dtype(s.out)) for s in plan.siblings]
    return [(name, _lane_operator(agg, compute_type(dtype)))
            for name, agg, dtype in accumulators]


def _lane_loops(nc: NormalContraction) -> int:
    """How many of the innermost reduction loops run in vector lanes together (C: ``omp simd
    collapse``): the innermost, and the next ones out while the lanes' iteration space is
    shorter than :data:`LANE_LOOP_MIN`. Each run of the lane loop ends with a horizontal sum
    of its lanes; over a batch-norm statistic's rows of 32 (NCHW, 32 x 32 images) that cost as
    much as the additions: 505 us for 32 x 64 x 32 x 32 float32, 161 us with the rows and
    columns collapsed into one loop of 1024 (2 AVX-512 cores)::

        for (i0 ...) {
            #pragma omp simd reduction(+:acc) collapse(2)
            for (i2 = 0; i2 < 32; i2++) for (i3 = 0; i3 < 32; i3++) acc = acc + X[...];
        }
    """
    loops, extent = 0, 1
    for var in reversed(nc.red_vars):
        if loops and extent >= LANE_LOOP_MIN:
            break
        lo, hi = nc.red_ranges[var]
        loops, extent = loops + 1, extent * (hi - lo + 1)
    return loops


def _plain_sum(plan: KernelPlan) -> bool:
    """Whether every accumulator of the plan's loop is a sum and it stores no prologue
    value (what lanes took before max, min and stores could)."""
    return (plan.contraction is not None and plan.contraction.agg == "+"
            and all(sibling.agg == "+" for sibling in plan.siblings)
            and not any(e.out in plan.stores for e in plan.prologue))


def _lane_operator(agg: str, ctype: str) -> str | None:
    """The OpenMP reduction operator that combines lanes of aggregation ``agg`` in
    ``ctype``, or None where lanes may not take it.

    A sum by ``+``: the order of a float sum is not fixed by Tile, and lanes round differently
    from the serial order by a few units in the last place (tests/compiler/test_lane_sums.py).
    A max or min by the prelude's ``gh_max_<type>`` / ``gh_min_<type>``
    (``omp declare reduction``): the same value in any order, a NaN included::

        M[c : C] = +(X[n, c, h, w]);    # for n, h: #pragma omp simd reduction(+:acc) over w
        R[i : I] = >(X[i, j]);          # #pragma omp simd reduction(gh_max_float32:acc)
    """
    if ctype == "bool":
        return None
    if agg == "+":
        return "+"
    if agg in (">", "<"):
        return f"gh_{'max' if agg == '>' else 'min'}_{ctype}"
    return None


def _lane_clauses(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext,
                  flag: bool) -> str:
    """The loop's reduction clauses (``kernel_ir.For.reduction``): each accumulator under its
    operator, the reached flag under ``||``."""
    by_operator: dict[str, list[str]] = {}
    for name, operator in _lane_accumulators(plan, nc, ctx):
        assert operator is not None, name  # _reduction_in_lanes said lanes take them all
        by_operator.setdefault(operator, []).append(name)
    if flag:
        by_operator["||"] = ["reached"]
    return " ".join(f"{op}:{','.join(names)}" for op, names in by_operator.items())


#: The longest reduction the C loop nest (:func:`lower_cell_nest`) takes: longer ones keep
#: one work-item per cell (the nest keeps a row of accumulators per run of cells, which
#: a long reduction reads and writes once per assignment).
NEST_MAX_REDUCTION = 64
#: Fewest iterations of the nest's parallel loop: the renderer cuts it into 64 dynamic chunks.
NEST_MIN_PARALLEL = 64
#: Longest run of cells (the innermost output variable, or a chunk of a 1-D output) whose
#: accumulators the nest keeps on the stack: 1024 float32 rows are 4 KiB each, in L1.
NEST_MAX_RUN = 1024


@dataclass(frozen=True)
class AccumulatorRow:
    """Where one accumulator of a run of cells lives between assignments: a register array
    (``local``) or a global buffer (a split reduction's partials), read and written at the
    cell's slot. ``register`` is the accumulator's name in the loop body (``acc``,
    ``acc_<sibling>``, or the ``reached`` / ``hit`` flag, a bool stored as ``dtype``)."""

    array: str
    register: str
    dtype: str
    identity: object
    local: bool
    flag: bool = False

    def load(self, slot: k.Expr) -> k.Expr:
        if self.local:
            value: k.Expr = k.LoadLocal(self.array, (slot,), self.dtype)
        else:
            value = k.Load(self.array, slot, self.dtype)
        return k.BinOp("!=", value, k.Const(0, self.dtype), "bool") if self.flag else value

    def store(self, slot: k.Expr, value: k.Expr) -> k.Stmt:
        if self.flag:
            value = k.Cast(self.dtype, value)
        if self.local:
            return k.StoreLocal(self.array, (slot,), value)
        return k.Store(self.array, slot, value)

    def register_type(self) -> str:
        return "bool" if self.flag else self.dtype


#: Integer types a run of cells accumulates in int32 (:func:`accumulator_rows`).
NARROW_INTEGERS = ("int8", "uint8", "int16", "uint16")


def accumulator_rows(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext,
                     names: list[str], local: bool, flag: str | None,
                     widen: bool = False) -> list[AccumulatorRow]:
    """One row per accumulator of ``nc`` (``acc``, then each sibling's, then ``flag``'s),
    stored in the arrays ``names`` (one more than the siblings, plus one for the flag).

    ``widen``: ``acc`` of a narrow integer type accumulates in int32, starting from the
    narrow type's identity; its value as stored is the same (a min or a max of operands never
    leaves the narrow range, and a sum or a product wraps alike when it is stored). A loop
    over lanes that mixes 8-bit and 32-bit values gets short vectors from gcc: a max pool's
    winning tap (an 8-bit min over a 2x2 window, NCHW 32x32 images, batch 128) took 10.5 ms
    on 2 cores in uint8, 4.4 ms in int32."""
    ctype = compute_type(ctx.dtype(nc.out))
    # A min or a max of wrapped sums or products would compare other values in int32.
    exact = nc.agg not in ("<", ">") or nc.combo in ("none", "?", "==")
    row_type = "int32" if widen and exact and ctype in NARROW_INTEGERS else ctype
    rows = [AccumulatorRow(names[0], "acc", row_type, identity_value(nc.agg, ctype), local)]
    for index, sibling in enumerate(plan.siblings, 1):
        sibling_type = compute_type(ctx.dtype(sibling.out))
        rows.append(AccumulatorRow(names[index], f"acc_{sibling.out}", sibling_type,
                                   identity_value(sibling.agg, sibling_type), local))
    if flag is not None:
        rows.append(AccumulatorRow(names[len(plan.siblings) + 1], flag, "int32", 0, local,
                                   flag=True))
    return rows


def update_run(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext, itype: str,
               rows: list[AccumulatorRow], slot: k.Expr, lane_var: str, start: k.Expr | int,
               stop: k.Expr | int) -> k.For:
    """The ``omp simd`` loop adding the current assignment to a run of neighbouring cells:
    each lane loads its accumulators from ``rows`` at ``slot``, accumulates (without
    branches, :func:`_accumulate_in_lanes`) and stores them back. The caller has declared the
    reduction variables and tests the guards without ``lane_var`` (:func:`hoisted_guards`).

        #pragma omp simd
        for (int c = 0; c < 128; c++) { float acc = rows[c]; acc = acc + X[...]; rows[c] = acc; }
    """
    ctype = rows[0].dtype  # acc's: the output's compute type, or int32 (accumulator_rows)
    flag = next((row.register for row in rows if row.flag), None)
    body: list[k.Stmt] = [k.Declare("rs_slot", itype, slot)]
    at = k.Var("rs_slot", itype)
    body += [k.Declare(row.register, row.register_type(), row.load(at)) for row in rows]
    body.append(accumulate_plan(plan, nc, ctx, ctype, itype, flag, lane_var=lane_var))
    body += [row.store(at, k.Var(row.register, row.register_type())) for row in rows]
    return k.For(lane_var, start, stop, k.block(*body), kind="simd")


def _lane_axis(nc: NormalContraction, lanes: int) -> int:
    """The output axis whose neighbouring cells the nest computes in vector lanes: the
    innermost (unit stride in the output), unless it is shorter than ``lanes`` and a longer
    axis is read at unit stride. A filter relayout ``R[o, i, y, x] = T[o, y, x, i]`` (3x3)
    then has lanes along ``i``: 8 loads at once and strided stores, where runs of the 3
    values of ``x`` would load with a stride of ``I`` and leave most lanes idle."""
    from .tiling_gpu import flat_address  # it imports this module

    last = len(nc.out_shape) - 1
    if nc.out_shape[last] >= lanes:
        return last
    read_in_lanes = []
    for axis, (var, size) in enumerate(zip(nc.out_vars, nc.out_shape)):
        if axis == last or size < lanes:
            continue
        addresses = [flat_address(a) for a in nc.operands]
        if any(address is not None and address.coeffs.get(var) == 1 for address in addresses):
            read_in_lanes.append(axis)
    return max(read_in_lanes, key=lambda a: nc.out_shape[a], default=last)


def lower_cell_nest(plan: KernelPlan, ctx: LoweringContext, name: str, lanes: int = 8,
                    max_reduction: int = NEST_MAX_REDUCTION,
                    max_group: int | None = None) -> k.Kernel | None:
    """The CPU schedule (C, and a CPU's OpenCL driver) of a contraction with a short
    reduction (a pooling window, its gradient's taps, a relayout copy; at most
    ``max_reduction`` assignments): a loop nest over its output variables, or None (then
    :func:`lower_contraction` is the schedule). OpenCL C has no ``omp`` pragmas: the parallel
    loop is the work-items, and the run's loop is left to the driver's vectoriser; its
    work-groups hold at most ``max_group`` work-items (the device's limit).

    One work-item per cell decodes its coordinates with a division and a modulo per output
    variable and computes alone. Here the leading output variables are the parallel loop
    (decoded once per run of cells), the middle ones ordinary loops, and the innermost, unit
    stride in the output (or one read at unit stride if that is shorter than ``lanes``, the
    device's vector width; :func:`_lane_axis`), a run of cells computed in vector lanes:
    for each assignment of
    the reduction (the guards that do not mention the run's variable tested once for the
    run), an ``omp simd`` loop over the run updates a row of accumulators on the stack; a
    last one finalises, evaluates the epilogue and stores. Each cell sees its assignments in
    the order :func:`lower_contraction`'s work-item does and computes the same value::

        #pragma omp parallel for            // o0, o1: 1024 runs
        for (int gp = 0; gp < 1024; gp++) { int o0 = gp / 32; int o1 = gp % 32;
            for (int o2 = 0; o2 < 32; o2++) {
                float rc_acc[128];  (identities)
                for (k0 ...) for (k1 ...) if (guards of o1, o2, k0, k1) {
                    #pragma omp simd
                    for (int o3 = 0; o3 < 128; o3++) { acc = rc_acc[o3]; ...; rc_acc[o3] = acc; }
                }
                #pragma omp simd
                for (int o3 = 0; o3 < 128; o3++) { acc = rc_acc[o3]; ...; O[g] = v_O; } } }
    """
    if plan.kind != "contraction" or plan.contraction is None:
        return None
    nc = narrow(plan.contraction)
    cells = math.prod(nc.out_shape)
    if not nc.out_vars or cells < 2 or nc.reduction_size > max_reduction:
        return None
    if _reduction_in_lanes(plan, nc, ctx) and _plain_sum(plan):
        # A cell's own sum is in vector lanes already. A max, a min or a loop storing
        # prologue values still takes the nest, vectorised over the cells, as before lanes
        # could take them: which is faster for these short reductions was not measured (a
        # global max pool's taps are a channel apart, a gather for the lanes).
        return None
    if any(math.prod(a.sizes) == 0 for a in nc.operands):
        return None  # guarded loads read element 0 where the guards fail: it must exist
    itype = _contraction_index_type(nc)
    if itype != "int32":
        return None  # the renderer gives a loop with a computed bound an int counter
    shape, names = list(nc.out_shape), list(nc.out_vars)
    one_variable = len(shape) == 1
    axis = 0 if one_variable else _lane_axis(nc, lanes)
    run = min(shape[0], CPU_CHUNK, NEST_MAX_RUN) if one_variable else shape[axis]
    if run > NEST_MAX_RUN:
        return None
    strides = row_major_strides(tuple(shape))
    # The other variables in order, then the lanes' one; the parallel prefix is the fewest
    # leading ones with NEST_MIN_PARALLEL runs (all of them at most).
    order = [a for a in range(len(shape)) if a != axis] + [axis]
    prefix = 0 if one_variable else 1
    while prefix and prefix < len(shape) - 1 and \
            math.prod(shape[a] for a in order[:prefix]) < NEST_MIN_PARALLEL:
        prefix += 1

    def c(value: int) -> k.Const:
        return k.Const(value, itype)

    def var(name: str) -> k.Var:
        return k.Var(name, itype)

    lane = names[axis]
    if one_variable:  # the parallel loop takes chunks of the only variable
        lane_start: k.Expr = k.BinOp("*", var("gp"), c(run), itype)
        stop = k.BinOp("+", lane_start, c(run), itype)
        lane_stop: k.Expr = var("gp_stop")
        head: list[k.Stmt] = [k.Declare("gp_stop", itype, k.Select(
            k.BinOp("<", stop, c(shape[0]), "bool"), stop, c(shape[0]), itype))]
        slot: k.Expr = k.BinOp("-", var(lane), lane_start, itype)
        flat_expr: k.Expr = var(lane)
    else:
        lane_start, lane_stop, head, slot = c(0), c(shape[axis]), [], var(lane)
        terms = [var(names[a]) if strides[a] == 1 else
                 k.BinOp("*", var(names[a]), c(strides[a]), itype) for a in range(len(shape))]
        flat_expr = terms[0]
        for term in terms[1:]:
            flat_expr = k.BinOp("+", flat_expr, term, itype)
    flag = "reached" if needs_reached_flag(nc) else None
    arrays = [f"rc_acc{index or ''}" for index in range(len(plan.siblings) + 1)] + ["rc_hit"]
    rows = accumulator_rows(plan, nc, ctx, arrays, local=True, flag=flag, widen=True)
    per_run: list[k.Stmt] = [k.LocalArray(row.array, row.dtype, (run,), "register", align=64,
                                          restrict=True) for row in rows]
    per_run.append(k.For("rc_i", 0, run, k.block(*[
        row.store(var("rc_i"), k.Const(row.identity, row.register_type())) for row in rows]),
        kind="simd"))
    update: k.Stmt = update_run(plan, nc, ctx, itype, rows, slot, lane, lane_start, lane_stop)
    guard = hoisted_guards(nc, lane, itype)
    if guard is not None:
        update = k.If(guard, update)
    for red in reversed(nc.red_vars):
        lo, hi = nc.red_ranges[red]
        update = k.For(red, lo, hi + 1, update)
    per_run.append(update)
    # Finish each cell: its accumulators, then what one work-item per cell does after its loop.
    finish: list[k.Stmt] = [k.Declare("g", itype, flat_expr), k.Declare("rs_slot", itype, slot)]
    ctype = compute_type(ctx.dtype(nc.out))
    finish += [k.Declare(row.register, row.register_type(), row.load(var("rs_slot")))
               if row.register != "acc" else
               k.Declare("acc", ctype, _cast(row.load(var("rs_slot")), ctype)) for row in rows]
    reached = k.Var(flag, "bool") if flag else None
    finish += finish_cell(plan, nc, ctx, var("g"), itype, reached)
    per_run.append(k.For(lane, lane_start, lane_stop, k.block(*finish), kind="simd"))
    inner: k.Stmt = k.block(*head, *per_run)
    for a in reversed(order[prefix:-1]):
        inner = k.For(names[a], 0, shape[a], inner)
    if one_variable:
        runs = math.ceil(shape[0] / run)
        loop = k.For("gp", 0, runs, inner, kind="thread")
    else:
        leading = order[:prefix]
        decode = cell_coordinates(var("gp"), tuple(shape[a] for a in leading),
                                  [names[a] for a in leading], itype)
        runs = math.prod(shape[a] for a in leading)
        loop = k.For("gp", 0, runs, k.block(*decode, inner), kind="thread")
    hoisted = sum(lane not in q.poly.names() for q in nc.guards)
    schedule = (f"loop nest over {cells} output cells ({' x '.join(map(str, shape))}): "
                f"{runs} parallel runs, omp simd over runs of {run} cells ({lane}); reduction over "
                f"{nc.reduction_size} assignments outside the runs, {len(nc.guards)} guards "
                f"({hoisted} tested per run){_fused_note(plan)}")
    # About NEST_MIN_PARALLEL work-groups, like C's dynamic chunks (C ignores the size). A
    # CPU's OpenCL driver deals each core whole work-groups: 128 runs (a batch) in one group
    # kept one of two cores busy (PoCL: 24 ms against 12), and a group per run was slower on
    # 2048 runs (13.8 ms against 11.7). No larger than the device's work-groups
    # (``max_group``): PoCL refuses more than 4096 work-items a group, which 500,000 runs
    # (a float64 Gamma draw of 20,000 x 2 x 25 cells) asked for.
    group = max(1, runs // NEST_MIN_PARALLEL)
    if max_group:
        group = min(group, max_group)
    kernel = _kernel(name, ctx, loop, max(runs, 1), schedule, local=group)
    return dataclasses.replace(kernel, flops=2 * cells * nc.reduction_size)


# Reductions at least this long run their innermost loop in vector lanes (C: ``omp simd
# reduction``; :func:`_reduction_in_lanes`).
LANE_SUM_MIN = 16
# Lanes take the next reduction loop out too while their iteration space is shorter than
# this (:func:`_lane_loops`).
LANE_LOOP_MIN = 256


def lower_special(plan: KernelPlan, ctx: LoweringContext, name: str) -> k.Kernel:
    s = plan.special
    assert s is not None
    cells = math.prod(plan.shape)
    itype = _special_index_type(plan, ctx)
    flat = k.Var("g", itype)
    body, value = special_element(plan, ctx, flat, itype)
    body.append(k.Store(ctx.param(s.out, output=True), flat, value))
    loop = k.For("g", 0, cells, k.block(*body), kind="thread")
    return _kernel(name, ctx, loop, cells, schedule=f"{s.op} over {cells} cells")


def _special_index_type(plan: KernelPlan, ctx: LoweringContext) -> str:
    s = plan.special
    assert s is not None
    return index_type(max([math.prod(plan.shape)] + [math.prod(ctx.shape(t)) for t in s.tensors])
                      + VECTOR_WIDTH + 1)


def special_element(plan: KernelPlan, ctx: LoweringContext, flat: k.Expr, itype: str
                    ) -> tuple[list[k.Stmt], k.Expr]:
    """The statements computing a special operation's value at cell ``flat``, and the value
    (in the output's compute type)."""
    s = plan.special
    assert s is not None
    shape = plan.shape
    x = s.tensors[0]
    out_ctype = compute_type(ctx.dtype(s.out))
    body: list[k.Stmt] = []
    if s.op == "shape":
        value: k.Expr = k.Const(0, "int64")
        for axis, size in enumerate(ctx.shape(x)):
            value = k.Select(k.BinOp("==", flat, k.Const(axis, itype), "bool"),
                             k.Const(size, "int64"), value, "int64")
    elif s.op == "index":
        value = k.Cast("int32", coordinate(flat, shape, s.axis))
    elif s.op == "gather":
        indices = s.tensors[1]
        x_shape = ctx.shape(x)
        inner = math.prod(x_shape[1:])
        position = k.BinOp("/", flat, k.Const(inner, itype), itype) if inner != 1 else flat
        rest = k.BinOp("%", flat, k.Const(inner, itype), itype) if inner != 1 else k.Const(0, itype)
        body.append(k.Declare("row", "int64", k.Cast("int64", ctx.load(indices, position))))
        row = k.Var("row", "int64")
        valid = k.BinOp("&&", k.BinOp(">=", row, k.Const(0, "int64"), "bool"),
                        k.BinOp("<", row, k.Const(x_shape[0], "int64"), "bool"), "bool")
        source = k.BinOp("+", k.BinOp("*", k.Cast(itype, row), k.Const(inner, itype), itype),
                         rest, itype)
        safe = k.Select(valid, source, k.Const(0, itype), itype)
        value = k.Select(valid, ctx.load(x, safe), k.Const(0, out_ctype), out_ctype)
    elif s.op == "scatter":
        # Output-stationary: each cell sums the updates whose index names its row. Slower than
        # atomics for large index sets, but deterministic and portable to every dialect.
        indices, updates = s.tensors[1], s.tensors[2]
        inner = math.prod(shape[1:])
        count = math.prod(ctx.shape(indices))
        row = k.BinOp("/", flat, k.Const(inner, itype), itype) if inner != 1 else flat
        rest = k.BinOp("%", flat, k.Const(inner, itype), itype) if inner != 1 else k.Const(0, itype)
        body.append(k.Declare("acc", out_ctype, k.Const(0, out_ctype)))
        j = k.Var("j", itype)
        hit = k.BinOp("==", k.Cast("int64", ctx.load(indices, j)), k.Cast("int64", row), "bool")
        source = k.BinOp("+", k.BinOp("*", j, k.Const(inner, itype), itype), rest, itype)
        add = k.Assign("acc", k.BinOp("+", k.Var("acc", out_ctype),
                                      _cast(ctx.load(updates, source), out_ctype), out_ctype))
        body.append(k.For("j", 0, count, k.If(hit, add)))
        value = k.Var("acc", out_ctype)
    elif s.op == "prng":
        state_size = math.prod(ctx.shape(x))
        key = k.Cast("uint32", ctx.load(x, k.Const(0, itype)))
        high = (k.Cast("uint32", ctx.load(x, k.Const(1, itype))) if state_size > 1
                else k.Const(0, "uint32"))
        ctx.uses.add("philox")
        value = k.Call("philox_uniform", (key, high, k.Cast("uint32", flat)), "float32")
    else:
        raise AssertionError(s.op)
    return body, _cast(value, out_ctype)
