"""Reverse-mode automatic differentiation of Tile programs, producing Tile programs.

The gradient of a program bound to argument shapes is another program: the forward statements
it needs, then one backward statement (or a few) per forward statement, in reverse order. Each
rule is the spec's section 5. For

    C[i, j : M, N] = +(A[i, k] * B[k, j]);

the gradient program holds

    D_A[i, k : M, K] = +(D_C[i, j] * B[k, j]);
    D_B[k, j : K, N] = +(D_C[i, j] * A[i, k]);

and for a max pool ``O[i : N/2] = >(I[2*i + j]), j < 2;`` it finds each window's first tap equal
to its max, then routes the cotangent there with an affine output index (``P`` numbers the
taps 1, 2; see :meth:`_GradientBuilder.extreme_gradient`):

    O_first[i : N/2] = <(I[2*i + j] == O[i] ? P[j]), j < 2;
    D_I[2*i + j : N] = +(P[j] == O_first[i] ? D_O[i]), j < 2;
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import TileError
from . import dtypes as dt
from .bounds import bind_contraction
from .ir import (
    Access,
    Binary,
    Call,
    Cast,
    Const,
    Constraint,
    Contraction,
    DimValue,
    Elementwise,
    Expr,
    Input,
    Poly,
    Program,
    Ref,
    Select,
    Size,
    Special,
    Statement,
    Unary,
    expr_refs,
)
from .rename import rename_statement
from .shapes import BoundProgram, expr_type
from .validate import validate


@dataclass
class GradientProgram:
    """The gradient of a bound program.

    ``program`` takes the forward inputs (all of them, in order) then one cotangent per forward
    output, and returns one gradient per differentiable input that receives any;
    ``gradient_names`` maps a forward input to its gradient output.
    """

    program: Program
    gradient_names: dict[str, str]
    forward_inputs: list[int]
    cotangent_outputs: list[int]
    function: object = field(repr=False, default=None)


def gradient_program(bound: BoundProgram, wrt: frozenset[str] | None = None) -> GradientProgram:
    """Differentiate ``bound`` (a program specialised to shapes) into a Tile program.

    ``wrt`` limits the gradients to those inputs (default: every floating-point input); the
    statements only the others need are dropped.
    """
    builder = _GradientBuilder(bound, wrt)
    program, gradient_names = builder.build()
    from .function import Function  # the gradient is itself a runnable Tile function

    n_inputs = len(bound.program.inputs)
    result = GradientProgram(
        program, gradient_names, list(range(n_inputs)), list(range(len(bound.program.outputs)))
    )
    result.function = Function(program)
    return result


class _GradientBuilder:
    def __init__(self, bound: BoundProgram, wrt: frozenset[str] | None = None) -> None:
        self.bound = bound
        self.wrt = wrt
        self.program = bound.program
        self.used = set(bound.shapes) | set(self.program.dim_names())
        self.shapes = dict(bound.shapes)
        self.dtypes = dict(bound.dtypes)
        self.symbolic = _symbolic_shapes(bound)
        for statement in self.program.statements:
            if isinstance(statement, Elementwise) and statement.inputs():
                self.symbolic[statement.out] = self._broadcast_symbolic(
                    statement.inputs(), bound.shapes[statement.out]
                )
        self._root: tuple[Expr, str] | None = None
        self.backward: list[Statement] = []
        self.contributions: dict[str, list[str]] = {}
        self.cotangents: dict[str, str] = {}
        self.tap_numbers: dict[int, str] = {}  # window size -> its taps numbered 1, 2, ...

    # -- naming and emitting -------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name = base
        counter = 2
        while name in self.used:
            name = f"{base}_{counter}"
            counter += 1
        self.used.add(name)
        return name

    def emit(self, statement: Statement, shape: tuple[int, ...], dtype: np.dtype) -> str:
        self.backward.append(statement)
        self.shapes[statement.out] = shape
        self.dtypes[statement.out] = dtype
        return statement.out

    def emit_elementwise(self, base: str, expr: Expr) -> str:
        name = self.fresh(base)
        refs = expr_refs(expr)
        shape = _broadcast_shapes([self.shapes[r] for r in refs])
        dtype = expr_type(expr, self.dtypes).dtype
        if refs:
            self.symbolic[name] = self._broadcast_symbolic(refs, shape)
        return self.emit(Elementwise(name, expr), shape, dtype)

    def size_of(self, tensor: str) -> tuple[Size, ...]:
        return self.symbolic.get(tensor) or tuple(Size.const(s) for s in self.shapes[tensor])

    def _broadcast_symbolic(self, refs: list[str], shape: tuple[int, ...]):
        sizes = []
        for axis, size in enumerate(shape):
            chosen = Size.const(size)
            for ref in refs:
                ref_shape = self.shapes[ref]
                offset = axis - (len(shape) - len(ref_shape))
                symbolic = self.symbolic.get(ref)
                if offset >= 0 and ref_shape[offset] == size and symbolic:
                    chosen = symbolic[offset]
                    break
            sizes.append(chosen)
        return tuple(sizes)

    def contribute(self, tensor: str, gradient: str) -> None:
        """Record a gradient contribution of exactly ``tensor``'s shape."""
        assert self.shapes[gradient] == self.shapes[tensor], (tensor, gradient)
        self.contributions.setdefault(tensor, []).append(gradient)

    def contribute_broadcast(self, tensor: str, gradient: str) -> None:
        """Contribute a gradient computed in a broadcast shape: sum the broadcast axes away."""
        target = self.shapes[tensor]
        source = self.shapes[gradient]
        if source == target:
            self.contribute(tensor, gradient)
            return
        variables = [f"x{axis}" for axis in range(len(source))]
        out_index = []
        lead = len(source) - len(target)
        for axis, size in enumerate(target):
            if size == source[lead + axis]:
                out_index.append(Poly.var(variables[lead + axis]))
            else:
                out_index.append(Poly.constant(0))  # a size-1 axis that was broadcast
        name = self.fresh(f"D_{tensor}_sum")
        statement = Contraction(
            name, tuple(out_index), self.size_of(tensor), "+", "none",
            (Access(gradient, tuple(Poly.var(v) for v in variables)),),
        )
        self.emit(statement, target, self.dtypes[gradient])
        self.symbolic[name] = self.size_of(tensor)
        self.contribute(tensor, name)

    def total(self, tensor: str) -> str | None:
        """The summed gradient of ``tensor`` (one tensor), or None if nothing flows to it."""
        parts = self.contributions.get(tensor)
        if not parts:
            return None
        if len(parts) == 1 and self.dtypes[parts[0]] == self.dtypes[tensor]:
            return parts[0]
        expr: Expr = Ref(parts[0])
        for part in parts[1:]:
            expr = Binary("+", expr, Ref(part))
        # A tensor's gradient has the tensor's type, as in PyTorch: a bfloat16 tensor used in
        # a float32 expression gets a bfloat16 gradient. The contributions are summed in
        # their own (wider) type first and rounded once.
        if expr_type(expr, self.dtypes).dtype != self.dtypes[tensor]:
            expr = Cast(dt.dtype_name(self.dtypes[tensor]), expr)
        name = self.emit_elementwise(f"D_{tensor}_total", expr)
        self.contributions[tensor] = [name]
        return name

    def differentiable(self, tensor: str) -> bool:
        return dt.is_float(self.dtypes[tensor])

    # -- the whole program -----------------------------------------------------------------------
    def build(self) -> tuple[Program, dict[str, str]]:
        program = self.program
        for output in program.outputs:
            name = self.fresh(f"D_{output}")
            self.cotangents[output] = name
            self.shapes[name] = self.bound.shapes[output]
            self.dtypes[name] = self.bound.dtypes[output]
            self.symbolic[name] = self.symbolic.get(output)
            if self.differentiable(output):
                self.contributions.setdefault(output, []).append(name)
        for statement in reversed(program.statements):
            gradient = self.total(statement.out)
            if gradient is None or not self.differentiable(statement.out):
                continue
            if isinstance(statement, Contraction):
                self.contraction(statement, gradient)
            elif isinstance(statement, Elementwise):
                self.elementwise(statement, gradient)
            else:
                self.special(statement, gradient)
        gradient_names: dict[str, str] = {}
        for inp in program.inputs:
            if not self.differentiable(inp.name):
                continue
            if self.wrt is not None and inp.name not in self.wrt:
                continue
            gradient = self.total(inp.name)
            if gradient is None:
                continue
            if gradient in self.cotangents.values() or gradient in program.input_names:
                gradient = self.emit_elementwise(f"D_{inp.name}", Ref(gradient))
            gradient_names[inp.name] = gradient
        return self._assemble(gradient_names)

    def _assemble(self, gradient_names: dict[str, str]) -> tuple[Program, dict[str, str]]:
        backward = self.backward
        # Give each input's final gradient the readable name D_<input>, swapping names with
        # whichever contribution took it first.
        swaps: dict[str, str] = {}
        for inp, gradient in gradient_names.items():
            wanted = f"D_{inp}"
            if gradient != wanted and wanted not in swaps and gradient not in swaps:
                swaps[gradient], swaps[wanted] = wanted, gradient
        if swaps:
            backward = [rename_statement(s, swaps) for s in backward]
            gradient_names = {k: swaps.get(v, v) for k, v in gradient_names.items()}
        outputs = tuple(dict.fromkeys(gradient_names.values()))
        statements = _live_statements(list(self.program.statements) + backward, outputs)
        cotangent_inputs = []
        for output in self.program.outputs:
            name = self.cotangents[output]
            symbolic = self.symbolic.get(output)
            dims: tuple = tuple(
                s.name if s.op == "dim" else s.value if s.op == "const" else n
                for s, n in zip(symbolic, self.shapes[name])
            ) if symbolic else tuple(self.shapes[name])
            cotangent_inputs.append(Input(name, dims))
        inputs = tuple(self.program.inputs) + tuple(cotangent_inputs)
        program = Program(inputs, outputs, tuple(statements))
        validate(program)
        return program, gradient_names

    # -- contractions ------------------------------------------------------------------------------
    def contraction(self, c: Contraction, gradient: str) -> None:
        if c.default is not None and self.differentiable(c.default):
            self.default_gradient(c, gradient)
        if c.agg in "+=":
            self.sum_gradient(c, gradient)
        elif c.agg in "<>":
            if c.combo == "none":
                self.extreme_gradient(c, gradient)
            elif c.combo in ("*", "+"):
                self.materialized_gradient(c, gradient)
            elif c.combo == "?" and self.differentiable(c.operands[2].tensor):
                raise TileError(
                    f"gingham cannot differentiate the max/min of a conditional ('{c.out}'); "
                    "compute the conditional values into a tensor first",
                    c.loc, c.out,
                )
        elif c.agg == "*":
            if c.combo == "none":
                self.product_gradient(c, gradient)
            elif c.combo in ("*", "+"):
                self.materialized_gradient(c, gradient)

    def _operand_bounds(self, access: Access) -> list[Constraint]:
        """The bounds of an access, written as constraints (so dropping the access keeps them)."""
        return [Constraint(p, s) for p, s in zip(access.index, self.size_of(access.tensor))]

    def _output_only_bounds(self, target: Access, reads: list[Access], c: Contraction):
        """Constraints that keep every variable of ``target`` on the right-hand side."""
        right = {n for a in reads for p in a.index for n in p.names()}
        right |= {n for k in c.constraints for n in k.poly.names()}
        extra = []
        for poly, size in zip(target.index, self.size_of(target.tensor)):
            if any(n[0].islower() and n not in right for n in poly.names()):
                extra.append(Constraint(poly, size))
        return extra

    def _gradient_contraction(self, target: Access, combo: str, reads: list[Access],
                              c: Contraction, extra: list[Constraint]) -> None:
        name = self.fresh(f"D_{target.tensor}")
        constraints = list(c.constraints) + extra
        constraints += self._output_only_bounds(target, reads, c)
        statement = Contraction(
            name, target.index, self.size_of(target.tensor), "+", combo, tuple(reads),
            tuple(_unique(constraints)),
        )
        operand_dtypes = [self.dtypes[r.tensor] for r in reads]
        dtype = operand_dtypes[-1] if combo == "?" else _promote_all(operand_dtypes)
        self.emit(statement, self.shapes[target.tensor], dtype)
        self.symbolic[name] = self.size_of(target.tensor)
        self.contribute(target.tensor, name)

    def sum_gradient(self, c: Contraction, gradient: str) -> None:
        d_out = Access(gradient, c.index)
        operands = c.operands
        if c.combo == "none":
            if self.differentiable(operands[0].tensor):
                self._gradient_contraction(operands[0], "none", [d_out], c, [])
        elif c.combo == "*":
            for position, operand in enumerate(operands):
                if not self.differentiable(operand.tensor):
                    continue
                other = operands[1 - position]
                self._gradient_contraction(operand, "*", [d_out, other], c, [])
        elif c.combo == "+":
            for position, operand in enumerate(operands):
                if not self.differentiable(operand.tensor):
                    continue
                other = operands[1 - position]
                self._gradient_contraction(
                    operand, "none", [d_out], c, self._operand_bounds(other)
                )
        elif c.combo == "?":
            value = operands[2]
            if self.differentiable(value.tensor):
                self._gradient_contraction(value, "?", [operands[0], operands[1], d_out], c, [])

    def extreme_gradient(self, c: Contraction, gradient: str) -> None:
        """Max/min: route each cell's cotangent to the first position equal to the result, in
        the row-major order of the variables that range over a cell's window (as PyTorch's max
        pooling and ``max(dim)`` do). For a 2x2 max pool ``O[i, j] = >(I[2*i + a, 2*j + b]),
        a < 2, b < 2``:

            T[q : 4] = =(O[0, 0]), q < 4;          P = as_uint(index(T, 0) + 1, 8);
            W[i, j] = <(I[2*i + a, 2*j + b] == O[i, j] ? P[2*a + b]), a < 2, b < 2;
            D_I[2*i + a, 2*j + b] = +(P[2*a + b] == W[i, j] ? D_O[i, j]), a < 2, b < 2;

        ``P`` numbers the window's taps from 1, ``W`` is each cell's first tap equal to its
        result (0 where none is: a NaN window, or a ``default`` that won). Routing to every
        equal position instead would hand a tie the cotangent once per tied position, which is
        no subgradient; and half-precision data ties often (a bfloat16 ResNet block has a tie
        in about 0.2% of its 2x2 windows, enough to move batch norm's gradients by 3%).
        A contraction without window variables (each cell has one assignment) cannot tie and
        keeps the one-statement form ``+(I[...] == O[...] ? D_O[...])``."""
        operand = c.operands[0]
        if not self.differentiable(operand.tensor):
            return
        taps = self._window_taps(c)
        if taps is None:
            reads = [operand, Access(c.out, c.index), Access(gradient, c.index)]
            self._gradient_contraction(operand, "?", reads, c, [])
            return
        positions, tap = taps
        numbered = Access(positions, (tap,))
        first = self.fresh(f"{c.out}_first")
        self.emit(Contraction(first, c.index, self.size_of(c.out), "<", "?",
                              (operand, Access(c.out, c.index), numbered), c.constraints),
                  self.shapes[c.out], self.dtypes[positions])
        self.symbolic[first] = self.size_of(c.out)
        reads = [numbered, Access(first, c.index), Access(gradient, c.index)]
        self._gradient_contraction(operand, "?", reads, c, [])

    def _window_taps(self, c: Contraction) -> tuple[str, Poly] | None:
        """For a contraction whose cells aggregate a window (variables absent from the output
        index): a 1-D tensor numbering the window's taps ``1, 2, ...`` (the smallest unsigned
        type that holds them) and the tap's position in it, a polynomial in those variables
        (row-major in their order of appearance). None without window variables."""
        out_vars = {n for poly in c.index for n in poly.names()}
        bound = BoundProgram(self.bound.program, self.bound.dims, self.shapes, self.dtypes)
        bc = bind_contraction(c, bound)
        window = [v for v in bc.variables if v not in out_vars]
        if not window or bc.empty:
            return None
        tap, count = Poly.constant(0), 1
        for var in reversed(window):
            lo, hi = bc.ranges[var]
            tap = tap + (Poly.var(var) - lo).scale(count)
            count *= hi - lo + 1
        if count in self.tap_numbers:  # the pools of a network share their windows' size
            return self.tap_numbers[count], tap
        dtype = next(t for t in ("uint8", "uint16", "uint32", "uint64")
                     if count < np.iinfo(t).max)
        # A 1-D tensor of ``count`` cells to number (its values, one of c's, are never used).
        cells = self.fresh(f"{c.out}_taps")
        self.emit(Contraction(cells, (Poly.var("q"),), (Size.const(count),), "=", "none",
                              (Access(c.out, tuple(Poly.constant(0) for _ in c.index)),),
                              (Constraint(Poly.var("q"), Size.const(count)),)),
                  (count,), self.dtypes[c.out])
        coordinate = self.fresh(f"{c.out}_tap_index")
        self.emit(Special(coordinate, "index", (cells,), axis=0), (count,), dt.INT32)
        positions = self.emit_elementwise(
            f"{c.out}_tap_numbers", Cast(dtype, Binary("+", Ref(coordinate), Const(1))))
        self.tap_numbers[count] = positions
        return positions, tap

    def product_gradient(self, c: Contraction, gradient: str) -> None:
        """d prod / dA, also where elements of A are 0 (as PyTorch's ``prod``'s gradient).

        With ``P`` the product of a cell's nonzero terms and ``Z`` the count of its zero ones:
        a cell without zeros gives ``dO * P / A`` (the product rule written with the result);
        a cell with one zero gives its zero term ``dO * P`` and the others 0 (each of their
        products holds the zero); a cell with two or more gives 0 everywhere. Written as two
        contractions of the usual ``+(G[out] * F[in])`` form::

            A_is_zero = A == 0 ? 1 : 0;           A_or_one = A == 0 ? 1 : A;
            P[out] = *(A_or_one[in]);             Z[out] = +(A_is_zero[in]);
            dA[in] = +((Z == 0 ? dO * P : 0)[out] * (1 / A_or_one)[in])
                   + +((Z == 1 ? dO * P : 0)[out] * A_is_zero[in]);
        """
        operand = c.operands[0]
        if not self.differentiable(operand.tensor):
            return
        a = Ref(operand.tensor)
        is_zero_test = Binary("==", a, Const(0))
        dtype = self.dtypes[operand.tensor]
        is_zero = self.emit_elementwise(
            f"{operand.tensor}_is_zero",
            Cast(dt.dtype_name(dtype), Select(is_zero_test, Const(1), Const(0))))
        or_one = self.emit_elementwise(f"{operand.tensor}_or_one", Select(is_zero_test, Const(1), a))

        def reduce_terms(base: str, agg: str, terms: str, term_dtype) -> str:
            statement = Contraction(self.fresh(base), c.index, c.shape, agg, "none",
                                    (Access(terms, operand.index),), c.constraints)
            self.symbolic[statement.out] = self.size_of(c.out)
            return self.emit(statement, self.shapes[c.out], term_dtype)

        nonzero_product = reduce_terms(f"{c.out}_of_nonzeros", "*", or_one, self.dtypes[c.out])
        zeros = reduce_terms(f"{c.out}_zero_count", "+", is_zero, dtype)
        scaled = Binary("*", Ref(gradient), Ref(nonzero_product))
        for count, factor in ((0, self.emit_elementwise(f"Inv_{operand.tensor}",
                                                        Binary("/", Const(1.0), Ref(or_one)))),
                              (1, is_zero)):
            routed = self.emit_elementwise(
                f"D_{c.out}_with_{count}_zeros",
                Select(Binary("==", Ref(zeros), Const(count)), scaled, Const(0)))
            self._gradient_contraction(
                operand, "*", [Access(routed, c.index), Access(factor, operand.index)], c, [])

    def materialized_gradient(self, c: Contraction, gradient: str) -> None:
        """Max/min/product over a combination: write the combined values over the whole index
        box into a tensor T (an ``=`` contraction), then differentiate ``agg(T)``."""
        bc = bind_contraction(c, self.bound)
        if bc.empty:
            return  # no valid assignment: nothing flows back
        variables = bc.variables
        shifted = tuple(Poly.var(v) - bc.ranges[v][0] for v in variables)
        box = tuple(bc.ranges[v][1] - bc.ranges[v][0] + 1 for v in variables)
        values = self.fresh(f"{c.out}_terms")
        terms = Contraction(values, shifted, tuple(Size.const(s) for s in box), "=", c.combo,
                            c.operands, c.constraints)
        operand_dtypes = [self.dtypes[o.tensor] for o in c.operands]
        self.emit(terms, box, _promote_all(operand_dtypes))
        bounds = [k for operand in c.operands for k in self._operand_bounds(operand)]
        bounds += [Constraint(p, s) for p, s in zip(c.index, self.size_of(c.out))]
        rewritten = Contraction(c.out, c.index, c.shape, c.agg, "none",
                                (Access(values, shifted),), tuple(c.constraints) + tuple(bounds))
        before = len(self.contributions.get(values, []))
        self.contraction(rewritten, gradient)
        if len(self.contributions.get(values, [])) > before:
            self.sum_gradient(terms, self.total(values))

    def default_gradient(self, c: Contraction, gradient: str) -> None:
        default = c.default
        if c.agg == "+":
            # The default is added to every cell: its gradient is the output's, summed over
            # the axes it was broadcast along (no copy: a copy kept the planner from computing
            # the output's gradient inside the sum, as it does for an added bias).
            self.contribute_broadcast(default, gradient)
            return
        if c.agg in "<>":
            expr: Expr = Select(Binary("==", Ref(default), Ref(c.out)), Ref(gradient), Const(0))
        elif c.agg == "*":
            expr = Binary("/", Binary("*", Ref(gradient), Ref(c.out)), Ref(default))
        else:  # "=": the default survives only in cells no assignment wrote
            count = self.reach_count(c)
            expr = Select(Binary(">", Ref(count), Const(0)), Const(0), Ref(gradient))
        self.contribute_broadcast(default, self.emit_elementwise(f"D_{default}", expr))

    def reach_count(self, c: Contraction) -> str:
        """How many valid assignments write each cell of ``c`` (for ``=`` with a default)."""
        name = self.fresh(f"{c.out}_writes")
        if c.combo == "?":
            reads = (c.operands[0], c.operands[1])
        else:
            first = c.operands[0]
            if not first.index:
                raise TileError(f"cannot differentiate the default of '{c.out}'", c.loc, c.out)
            coordinate = self.fresh(f"{first.tensor}_coordinate")
            self.emit(Special(coordinate, "index", (first.tensor,), axis=0),
                      self.shapes[first.tensor], dt.INT32)
            reads = (Access(coordinate, first.index), Access(coordinate, first.index))
        extra = [k for operand in c.operands for k in self._operand_bounds(operand)]
        statement = Contraction(name, c.index, self.size_of(c.out), "+", "==", reads,
                                tuple(c.constraints) + tuple(extra))
        return self.emit(statement, self.shapes[c.out], dt.INT32)

    # -- elementwise ---------------------------------------------------------------------------------
    def elementwise(self, statement: Elementwise, gradient: str) -> None:
        adjoints: dict[str, Expr] = {}
        self._root = (statement.expr, statement.out)
        self._propagate(statement.expr, Ref(gradient), adjoints)
        self._root = None
        for tensor, adjoint in adjoints.items():
            if not self.differentiable(tensor):
                continue
            name = self.emit_elementwise(f"D_{tensor}", adjoint)
            self.contribute_broadcast(tensor, name)

    def _is_float(self, expr: Expr) -> bool:
        return dt.is_float(expr_type(expr, self.dtypes).dtype)

    def _propagate(self, expr: Expr, adjoint: Expr, adjoints: dict[str, Expr]) -> None:
        if not self._is_float(expr):
            return
        if isinstance(expr, Ref):
            previous = adjoints.get(expr.name)
            adjoints[expr.name] = adjoint if previous is None else Binary("+", previous, adjoint)
            return
        if isinstance(expr, (Const, DimValue)):
            return
        if isinstance(expr, Unary):
            if expr.op == "-":
                self._propagate(expr.operand, Unary("-", adjoint), adjoints)
            return
        if isinstance(expr, Cast):
            operand_type = expr_type(expr.operand, self.dtypes).dtype
            if dt.is_float(operand_type):
                self._propagate(expr.operand, Cast(dt.dtype_name(operand_type), adjoint), adjoints)
            return
        if isinstance(expr, Select):
            zero = Const(0)
            self._propagate(expr.if_true, Select(expr.cond, adjoint, zero), adjoints)
            self._propagate(expr.if_false, Select(expr.cond, zero, adjoint), adjoints)
            return
        if isinstance(expr, Binary):
            self._binary(expr, adjoint, adjoints)
            return
        if isinstance(expr, Call):
            self._call(expr, adjoint, adjoints)
            return
        raise AssertionError(expr)

    def _binary(self, expr: Binary, g: Expr, adjoints: dict[str, Expr]) -> None:
        a, b = expr.left, expr.right
        op = expr.op
        if op == "+":
            self._propagate(a, g, adjoints)
            self._propagate(b, g, adjoints)
        elif op == "-":
            self._propagate(a, g, adjoints)
            self._propagate(b, Unary("-", g), adjoints)
        elif op == "*":
            self._propagate(a, Binary("*", g, b), adjoints)
            self._propagate(b, Binary("*", g, a), adjoints)
        elif op == "/":
            self._propagate(a, Binary("/", g, b), adjoints)
            self._propagate(b, Unary("-", Binary("/", Binary("*", g, a), Binary("*", b, b))),
                            adjoints)
        elif op == "%":
            quotient = Binary("/", a, b)
            truncated = Select(Binary(">=", quotient, Const(0)), Call("floor", (quotient,)),
                               Call("ceil", (quotient,)))
            self._propagate(a, g, adjoints)
            self._propagate(b, Unary("-", Binary("*", g, truncated)), adjoints)
        # comparisons, logic and bit operations have no derivative

    def _call(self, expr: Call, g: Expr, adjoints: dict[str, Expr]) -> None:
        fn = expr.fn
        x = expr.args[0]
        one = Const(1.0)
        # The statement's own result is the value of its root call: reuse it, don't recompute.
        itself: Expr = Ref(self._root[1]) if self._root and self._root[0] is expr else expr

        def mul(*factors: Expr) -> Expr:
            result = factors[0]
            for factor in factors[1:]:
                result = Binary("*", result, factor)
            return result

        derivative: Expr | None
        if fn == "exp":
            derivative = itself
        elif fn == "log":
            derivative = Binary("/", one, x)
        elif fn == "sqrt":
            derivative = Binary("/", Const(0.5), itself)
        elif fn == "rsqrt":
            derivative = Binary("/", mul(Const(-0.5), Call("rsqrt", (x,))), x)
        elif fn == "abs":
            derivative = Call("sign", (x,))
        elif fn == "sin":
            derivative = Call("cos", (x,))
        elif fn == "cos":
            derivative = Unary("-", Call("sin", (x,)))
        elif fn == "tan":
            derivative = Binary("/", one, mul(Call("cos", (x,)), Call("cos", (x,))))
        elif fn == "tanh":
            derivative = Binary("-", one, mul(itself, itself))
        elif fn == "sinh":
            derivative = Call("cosh", (x,))
        elif fn == "cosh":
            derivative = Call("sinh", (x,))
        elif fn == "asin":
            derivative = Call("rsqrt", (Binary("-", one, mul(x, x)),))
        elif fn == "acos":
            derivative = Unary("-", Call("rsqrt", (Binary("-", one, mul(x, x)),)))
        elif fn == "atan":
            derivative = Binary("/", one, Binary("+", one, mul(x, x)))
        elif fn in ("erf", "erfc"):  # erfc = 1 - erf
            sign = 1.0 if fn == "erf" else -1.0
            gaussian = Call("exp", (Unary("-", mul(x, x)),))
            derivative = mul(Const(sign * 2.0 / math.sqrt(math.pi)), gaussian)
        elif fn == "sigmoid":
            derivative = mul(itself, Binary("-", one, itself))
        elif fn == "relu":
            self._propagate(x, Select(Binary(">", x, Const(0)), g, Const(0)), adjoints)
            return
        elif fn in ("min", "max"):
            y = expr.args[1]
            pick_first = Binary("<=" if fn == "min" else ">=", x, y)
            self._propagate(x, Select(pick_first, g, Const(0)), adjoints)
            self._propagate(y, Select(pick_first, Const(0), g), adjoints)
            return
        elif fn == "stop_gradient":  # the identity whose derivative is taken to be zero
            return
        elif fn == "pow":
            y = expr.args[1]
            self._propagate(x, mul(g, y, Call("pow", (x, Binary("-", y, one)))), adjoints)
            self._propagate(y, mul(g, Call("log", (x,)), Call("pow", (x, y))), adjoints)
            return
        else:  # sign floor ceil round: zero almost everywhere
            derivative = None
        if derivative is not None:
            self._propagate(x, mul(g, derivative), adjoints)

    # -- special operations ------------------------------------------------------------------------
    def special(self, s: Special, gradient: str) -> None:
        if s.op == "reshape":
            source = s.tensors[0]
            if self.differentiable(source):
                name = self.fresh(f"D_{source}")
                self.emit(Special(name, "reshape", (gradient,), self.size_of(source)),
                          self.shapes[source], self.dtypes[gradient])
                self.symbolic[name] = self.size_of(source)
                self.contribute(source, name)
        elif s.op == "gather":
            source, indices = s.tensors
            if self.differentiable(source):
                name = self.fresh(f"D_{source}")
                self.emit(Special(name, "scatter", (source, indices, gradient)),
                          self.shapes[source], self.dtypes[gradient])
                self.contribute(source, name)
        elif s.op == "scatter":
            _, indices, updates = s.tensors
            if self.differentiable(updates):
                name = self.fresh(f"D_{updates}")
                self.emit(Special(name, "gather", (gradient, indices)),
                          self.shapes[updates], self.dtypes[gradient])
                self.contribute(updates, name)
        # shape, index and prng have no gradient


def _promote_all(dtypes: list[np.dtype]) -> np.dtype:
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = dt.promote(result, dtype)
    return dt.INT32 if dt.is_bool(result) else result


def _unique(constraints: list[Constraint]) -> list[Constraint]:
    seen = []
    for constraint in constraints:
        if constraint not in seen:
            seen.append(constraint)
    return seen


def _broadcast_shapes(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*shapes)) if shapes else ()


def _live_statements(statements: list[Statement], outputs: tuple[str, ...]) -> list[Statement]:
    """Drop statements no output depends on (dead forward code in the gradient)."""
    needed = set(outputs)
    live: list[Statement] = []
    for statement in reversed(statements):
        if statement.out in needed:
            live.append(statement)
            needed |= set(statement.inputs())
    return list(reversed(live))


def _symbolic_shapes(bound: BoundProgram) -> dict[str, tuple[Size, ...] | None]:
    """Shapes as size expressions over header dimensions, where the program states them."""
    symbolic: dict[str, tuple[Size, ...] | None] = {}
    for inp in bound.program.inputs:
        if inp.dims is not None:
            symbolic[inp.name] = tuple(
                Size.dim(d) if isinstance(d, str) else Size.const(d) for d in inp.dims
            )
    for statement in bound.program.statements:
        if isinstance(statement, Contraction):
            symbolic[statement.out] = statement.shape
        elif isinstance(statement, Special) and statement.op == "reshape":
            symbolic[statement.out] = statement.sizes
    return symbolic


__all__ = ["GradientProgram", "gradient_program", "Fraction"]
