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

import math
from dataclasses import dataclass, field

import numpy as np

from ..tile import dtypes as dt
from ..tile import ir as tir
from ..tile.bounds import integer_form
from ..tile.ir import Poly
from ..tile.shapes import BoundProgram, combine, expr_type
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
    recomputed values with stored ones, lost taps."""
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
    params: dict[str, k.Param] = field(default_factory=dict)
    uses: set[str] = field(default_factory=set)

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

    def load(self, tensor: str, index: k.Expr) -> k.Expr:
        return k.Load(self.param(tensor), index, compute_type(self.dtype(tensor)))


def row_major_strides(shape: tuple[int, ...]) -> list[int]:
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return strides


def cell_coordinates(flat: k.Expr, shape: tuple[int, ...], names: list[str], itype: str
                     ) -> list[k.Stmt]:
    """Declare the coordinates of a flat cell index (row-major)."""
    strides = row_major_strides(shape)
    stmts: list[k.Stmt] = []
    for axis, (name, size, stride) in enumerate(zip(names, shape, strides)):
        value: k.Expr = flat
        if stride != 1:
            value = k.BinOp("/", value, k.Const(stride, itype), itype)
        if axis != 0:
            value = k.BinOp("%", value, k.Const(size, itype), itype)
        stmts.append(k.Declare(name, itype, value))
    return stmts


def broadcast_index(cell: list[k.Expr], out_shape: tuple[int, ...], shape: tuple[int, ...],
                    flat: k.Expr, itype: str) -> k.Expr:
    """Flat index into a tensor of ``shape`` broadcast to ``out_shape`` at ``cell``. A tensor of
    as many cells is read at ``flat``: it is ``out_shape`` with other axes of length 1 (a
    statement over ``[C]`` fused into a kernel over ``[C, 1, 1]``, fusion._same_cells)."""
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

    def lower(self, expr: tir.Expr) -> k.Expr:
        t = expr_type(expr, self.ctx.bound.dtypes)
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
            inner = self.lower(expr.operand)
            if expr.dtype == "bool":
                return k.BinOp("!=", inner, k.Const(0, _type_of(inner)), "bool")
            if expr.dtype in ("float16", "bfloat16"):
                self.ctx.uses.add(f"round_{expr.dtype}")
                return k.Call(f"round_{expr.dtype}", (k.Cast("float32", inner),), "float32")
            return k.Cast(ct, inner)
        if isinstance(expr, tir.Unary):
            inner = self.lower(expr.operand)
            if expr.op == "!" or (expr.op == "~" and ct == "bool"):
                return k.BinOp("==", inner, k.Const(0, _type_of(inner)), "bool")
            return k.UnOp(expr.op, _cast(inner, ct), ct)
        if isinstance(expr, tir.Binary):
            return self.binary(expr, ct)
        if isinstance(expr, tir.Select):
            cond = self.lower(expr.cond)
            if _type_of(cond) != "bool":
                cond = k.BinOp("!=", cond, k.Const(0, _type_of(cond)), "bool")
            return k.Select(cond, _cast(self.lower(expr.if_true), ct),
                            _cast(self.lower(expr.if_false), ct), ct)
        if isinstance(expr, tir.Call):
            if expr.fn == "pow" and ct.startswith("float") and len(expr.args) == 2:
                # x^1 and x^2 exactly (x * x is the correctly rounded square, as NumPy's
                # float power gives it), without a libm call per element: batch norm's
                # variance and its gradient (pow(T, 2.0 - 1.0)).
                exponent = constant_value(expr.args[1])
                if exponent in (1.0, 2.0):
                    base = _cast(self.lower(expr.args[0]), ct)
                    return base if exponent == 1.0 else k.BinOp("*", base, base, ct)
            arg_type = "int32" if ct == "bool" and expr.fn not in ("min", "max") else ct
            args = tuple(_cast(self.lower(a), arg_type) for a in expr.args)
            fn = {"min": "min", "max": "max"}.get(expr.fn, expr.fn)
            return _cast(k.Call(fn, args, arg_type), ct)
        raise AssertionError(expr)

    def binary(self, expr: tir.Binary, ct: str) -> k.Expr:
        op = expr.op
        left, right = self.lower(expr.left), self.lower(expr.right)
        if op in ("&&", "||"):
            return k.BinOp(op, _truth(left), _truth(right), "bool")
        dtypes = self.ctx.bound.dtypes
        operand = combine(expr_type(expr.left, dtypes), expr_type(expr.right, dtypes))
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
              scalars: dict[str, k.Expr] | None = None) -> list[k.Stmt]:
    """Evaluate the plan's elementwise statements at this cell and store what is needed.
    ``scalars`` gives values already loaded for one-element tensors (hoisted loads)."""

    def value_of(name: str) -> k.Expr:
        if scalars and name in scalars:
            return scalars[name]
        index = broadcast_index(cell, plan.shape, ctx.shape(name), flat, itype)
        return ctx.load(name, index)

    stmts = _evaluate(plan, ctx, value_of, registers, flat)
    in_loop = {e.out for e in plan.prologue}  # stored by the reduction loop
    for produced in plan.produced:
        if produced in plan.stores and produced not in in_loop:
            stmts.append(k.Store(ctx.param(produced, output=True), flat, registers[produced]))
    return stmts


def _evaluate(plan: KernelPlan, ctx: LoweringContext, value_of, registers: dict[str, k.Expr],
              flat: k.Expr) -> list[k.Stmt]:
    """Declare a register per elementwise statement of the plan (added to ``registers``);
    ``value_of`` gives the other tensors' values at the cell, ``flat`` is its index."""
    return evaluate_statements(plan.elementwise, ctx, value_of, registers, flat)


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

#: Cells per GPU work-item: one 16-byte vector of a 4-byte type.
VECTOR_WIDTH = 4
#: Storage types read and written as vectors of VECTOR_WIDTH (each is its own compute type).
VECTOR_DTYPES = ("float32", "int32")
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
    name = dt.dtype_name(ctx.dtype(ctx.buffer(tensor)))
    return name if name in VECTOR_DTYPES else None


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
    """Work-item g computes cells [4g, 4g + 4): same-shaped float32 / int32 tensors move as one
    16-byte vector each, the rest per cell; work-item 0 also computes the cells after the last
    whole vector (fewer than 4)."""
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
    lanes: dict[str, str] = {}  # buffer -> register array of its vector
    if plan.kind == "elementwise":
        for tensor in sorted(plan.reads()):
            vtype = _vector_dtype(ctx, tensor)
            buffer = ctx.buffer(tensor)
            if ctx.shape(tensor) != plan.shape or vtype is None or buffer in lanes:
                continue
            lanes[buffer] = f"x_{buffer}"
            loads += [k.LocalArray(lanes[buffer], vtype, (width,), "register", align=16),
                      k.CopyLocal(lanes[buffer], (e(0),), ctx.param(tensor), (base,), width,
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
        stmts, cell = _cell(plan, ctx, flat, itype)
        per_lane += stmts

        def value_of(tensor: str) -> k.Expr:
            if tensor in scalars:
                return scalars[tensor]
            buffer = ctx.buffer(tensor)
            if buffer in lanes and ctx.shape(tensor) == plan.shape:
                return k.LoadLocal(lanes[buffer], (lane,), compute_type(ctx.dtype(tensor)))
            index = broadcast_index(cell, plan.shape, ctx.shape(tensor), flat, itype)
            return ctx.load(tensor, index)

        values = {}
        per_lane += _evaluate(plan, ctx, value_of, values, flat)
    stores: list[k.Stmt] = []
    for out in outputs:
        buffer = ctx.param(out, output=True)
        vtype = _vector_dtype(ctx, out)
        if vtype is None:
            per_lane.append(k.Store(buffer, flat, values[out]))
            continue
        array = f"y_{buffer}"
        loads.append(k.LocalArray(array, vtype, (width,), "register", align=16))
        per_lane.append(k.StoreLocal(array, (lane,), values[out]))
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
    vectorised = ", ".join(sorted(set(lanes) | {ctx.buffer(o) for o in outputs
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
    for tensor in sorted(plan.reads()):
        shape = ctx.shape(tensor)
        if shape == plan.shape or math.prod(shape) in (1, math.prod(plan.shape)):
            continue
        lead = len(plan.shape) - len(shape)
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


def accumulate_plan(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext,
                    ctype: str, itype: str, flag: str | None) -> k.Stmt:
    """:func:`accumulate` for the plan's contraction ``nc`` and each of its siblings (into
    ``acc_<out>``), after computing the plan's prologue at the assignment's operand cell.

        for (i0 ...) { p_flat = ...; v_T2 = X[p_flat] - M[i1]; acc += v_T2 * v_T2; }
    """
    if not plan.prologue and not plan.siblings:
        return accumulate(nc, ctx, ctype, itype, flag, None)
    # A plain reduction (fusion.reduction_domain): the operand is read at its own cells, each
    # axis one loop variable, so the prologue's cell is those variables.
    access = nc.operands[0]
    cell = [k.Var(poly.terms[0][0], itype) for poly in access.index]
    flat = k.Var("p_flat", itype)
    stmts: list[k.Stmt] = [k.Declare("p_flat", itype, access_index(access.index, access.sizes,
                                                                  itype))]

    def value_of(tensor: str) -> k.Expr:
        index = broadcast_index(cell, access.sizes, ctx.shape(tensor), flat, itype)
        return ctx.load(tensor, index)

    registers: dict[str, k.Expr] = {}
    stmts += evaluate_statements(plan.prologue, ctx, value_of, registers, flat,
                                 (cell, access.sizes))
    # Each assignment is one cell of the domain, visited once: store what others read.
    stmts += [k.Store(ctx.param(e.out, output=True), flat, registers[e.out])
              for e in plan.prologue if e.out in plan.stores]
    stmts.append(accumulate(nc, ctx, ctype, itype, flag, registers))
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
    biggest = max([cells] + [math.prod(a.sizes) for a in nc.operands])
    itype = index_type(biggest * 2 + 16)
    out_dtype = ctx.dtype(nc.out)
    ctype = compute_type(out_dtype)
    flat = k.Var("g", itype)
    body: list[k.Stmt] = cell_coordinates(flat, nc.out_shape, list(nc.out_vars), itype)
    body += pinned_declarations(nc, itype)
    cell = [k.Var(v, itype) for v in nc.out_vars]
    flag = needs_reached_flag(nc)
    body.append(k.Declare("acc", ctype, k.Const(identity_value(nc.agg, ctype), ctype)))
    if flag:
        body.append(k.Declare("reached", "bool", k.Const(False, "bool")))
    body += sibling_accumulators(plan, ctx)
    inner = accumulate_plan(plan, nc, ctx, ctype, itype, "reached" if flag else None)
    # Lanes keep partial sums of every accumulator in the loop (the siblings' too, when they
    # are sums), never with prologue values stored from the loop.
    may_use_lanes = (all(sibling.agg == "+" for sibling in plan.siblings)
                     and not any(e.out in plan.stores for e in plan.prologue))
    accumulators = ",".join(["acc"] + [f"acc_{sibling.out}" for sibling in plan.siblings])
    lanes = False
    for var in reversed(nc.red_vars):
        lo, hi = nc.red_ranges[var]
        if var == nc.red_vars[-1] and may_use_lanes and _lane_sum(nc, ctype, hi - lo + 1):
            lanes = True
            inner = k.For(var, lo, hi + 1, inner, kind="simd", reduction=f"+:{accumulators}")
        else:
            inner = k.For(var, lo, hi + 1, inner)
    body.append(inner)
    reached = k.Var("reached", "bool") if flag else None
    result = finalize(nc, ctx, k.Var("acc", ctype), reached, cell, flat, ctype, itype)
    body.append(k.Declare(f"v_{nc.out}", ctype, result))
    registers = {nc.out: k.Var(f"v_{nc.out}", ctype)}
    body += sibling_results(plan, ctx, {s.out: k.Var(f"acc_{s.out}", compute_type(
        ctx.dtype(s.out))) for s in plan.siblings}, registers)
    body += _epilogue(plan, ctx, cell, flat, itype, registers)
    loop = k.For("g", 0, cells, k.block(*body), kind="thread")
    order = "vector-lane" if lanes else "serial"  # lanes: over the innermost loop
    schedule = (f"one work-item per output cell ({cells}), {order} reduction over "
                f"{nc.reduction_size} assignments, {len(nc.guards)} guards{_fused_note(plan)}")
    kernel = _kernel(name, ctx, loop, cells, schedule)
    flops = 2 * cells * nc.reduction_size
    return k.Kernel(kernel.name, kernel.params, kernel.body, kernel.launch, kernel.schedule,
                    flops=flops, uses=kernel.uses)


# Sums at least this long run their innermost loop in vector lanes (C: ``omp simd reduction``).
LANE_SUM_MIN = 16


def _lane_sum(nc: NormalContraction, ctype: str, length: int) -> bool:
    """Whether the innermost reduction loop may keep partial sums in lanes.

    A plain sum only: the serial chain of adds is latency-bound (4 cycles an element) where
    lanes take a fraction of a cycle (a batch-norm statistic over 32768 values, a softmax row
    sum). It is valid because the loop body of a sum does nothing but ``acc = acc + value``,
    possibly under guards (no ``reached`` flag, no early exit, no store), and the order of a
    float sum is not fixed by Tile. The rounding differs from the serial order by a few units
    in the last place (tests/compiler/test_lane_sums.py)::

        M[c : C] = +(X[n, c, h, w]);    # for n, h: #pragma omp simd reduction(+:acc) over w
    """
    return nc.agg == "+" and ctype != "bool" and length >= LANE_SUM_MIN


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
        strides = row_major_strides(shape)
        value = flat
        if strides[s.axis] != 1:
            value = k.BinOp("/", value, k.Const(strides[s.axis], itype), itype)
        if s.axis != 0:
            value = k.BinOp("%", value, k.Const(shape[s.axis], itype), itype)
        value = k.Cast("int32", value)
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
