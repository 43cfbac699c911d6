"""Contractions that compute one value per output cell: elementwise statements with index
arithmetic.

When :func:`gingham.compiler.normalize.pin` leaves a contraction no reduction variable (every
one is determined by the output indices), each output cell is one assignment: a guarded
expression of operands read at affine (possibly ``mod``-derived) cells. Fusion then treats it
as an elementwise statement (:class:`CellStatement`): it streams in the elementwise schedules,
and a cheap one is recomputed in its readers' loops instead of stored. The max-pool gradient
of a non-overlapping window is the example::

    D_X[o0, o1] = +(X[o0, o1] == O[(o0 - k0) / 2, (o1 - k1) / 2] ? D_O[...]), k = o mod 2
    ->  v = (guards) ? (X[cell] == O[...] ? D_O[...] : 0) : 0      per cell of D_X

Operands read at the statement's own cell come from ``value_of`` (registers, vector lanes,
hoisted scalars); the others are loads from memory under the guards (so no read leaves its
tensor's bounds).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..tile.bounds import Inequality, poly_interval
from ..tile.ir import Poly
from . import kernel_ir as k
from .normalize import NormalContraction, substitute_polys

#: Most operand reads and guards in a cell statement that readers may recompute (each reader
#: repeats them per cell).
MAX_RECOMPUTED_TERMS = 8


@dataclass(frozen=True)
class CellStatement:
    """``out`` = contraction ``nc`` (no reduction variables left) at each cell of its shape."""

    out: str
    nc: NormalContraction

    def inputs(self) -> list[str]:
        names: list[str] = []
        for access in self.nc.operands:
            if access.tensor not in names:
                names.append(access.tensor)
        if self.nc.default is not None and self.nc.default not in names:
            names.append(self.nc.default)
        return names

    def own_cell_reads(self) -> set[str]:
        """Tensors read only at the statement's own cell (the same flat index, same shape)."""
        own = {a.tensor for a in self.nc.operands if _at_own_cell(self.nc, a)}
        return own - {a.tensor for a in self.nc.operands if not _at_own_cell(self.nc, a)}

    def gathered(self) -> set[str]:
        """Tensors read at other cells: they must be in memory when it runs."""
        return set(self.inputs()) - self.own_cell_reads() - {self.nc.default}

    def cost(self) -> int:
        return len(self.nc.operands) + len(self.nc.guards) + len(self.nc.pinned)


def _at_own_cell(nc: NormalContraction, access) -> bool:
    return access.sizes == nc.out_shape and access.index == tuple(
        Poly.var(o) for o in nc.out_vars)


def as_cell_statement(out: str, nc: NormalContraction) -> CellStatement | None:
    """``nc`` as a per-cell statement if no reduction is left, else None."""
    if nc.red_vars or nc.combo not in ("none", "?", "*", "+", "-", "=="):
        return None
    return CellStatement(out, nc)


def pinned_declarations(nc: NormalContraction, itype: str, prefix: str = "",
                        coordinates: dict[str, Poly] | None = None) -> list[k.Stmt]:
    """Declare each pinned variable (``prefix + name``) from the output variables
    (``prefix + o_d``): ``low + ((poly - low) mod m)``, with the numerator made non-negative
    over the output box first (C's ``%`` truncates towards zero).

    ``coordinates`` gives output variables (by their prefixed names) known as affine
    expressions of integer loop variables. Where a pinned variable's value then depends on
    none of those loop variables (their coefficients are multiples of ``m``), it is declared
    as the constant it is: with ``o1 = 2*q + 1`` in a loop over ``q``, ``k_n = o1 mod 2`` is
    1, and ``(o1 - k_n) / 2`` folds to ``q`` (a contiguous read where it was a gather)."""
    from .lower import affine_expr  # lower imports this module: import when called

    box = {o: (0, s - 1) for o, s in zip(nc.out_vars, nc.out_shape)}
    stmts: list[k.Stmt] = []
    for p in nc.pinned:
        shifted = p.poly - p.low
        known = _residue(shifted, p.modulus, prefix, coordinates or {})
        if known is not None:
            stmts.append(k.Declare(prefix + p.name, itype, k.Const(p.low + known, itype)))
            continue
        low, _ = poly_interval(shifted, box)
        lift = -(math.floor(low) // p.modulus) * p.modulus if low < 0 else 0
        coeffs = {prefix + n: int(c) for n, c in shifted.terms}
        numerator = affine_expr(coeffs, int(shifted.const) + lift, itype)
        value = k.BinOp("%", numerator, k.Const(p.modulus, itype), itype)
        if p.low:
            value = k.BinOp("+", value, k.Const(p.low, itype), itype)
        stmts.append(k.Declare(prefix + p.name, itype, value))
    return stmts


def _residue(poly: Poly, modulus: int, prefix: str, coordinates: dict[str, Poly]) -> int | None:
    """``poly mod modulus`` if ``coordinates`` (affine forms of prefixed output variables over
    integer loop variables) make it a constant, else None."""
    if not coordinates or any(prefix + n not in coordinates for n, _ in poly.terms):
        return None
    value = substitute_polys(Poly.of({prefix + n: c for n, c in poly.terms}, poly.const),
                             coordinates)
    if value.const.denominator != 1 or any(
            c.denominator != 1 or c % modulus for _, c in value.terms):
        return None
    return int(value.const) % modulus


def expr_poly(expr: k.Expr) -> Poly | None:
    """``expr`` as an affine polynomial of the integer variables it names, or None::

        expr_poly((2 * gq) + 1)  ->  2*gq + 1
    """
    if isinstance(expr, k.Var):
        return Poly.var(expr.name) if expr.dtype in ("int32", "int64") else None
    if isinstance(expr, k.Const) and isinstance(expr.value, int) \
            and not isinstance(expr.value, bool):
        return Poly.of({}, expr.value)
    if isinstance(expr, k.Cast) and expr.dtype in ("int32", "int64"):
        return expr_poly(expr.a)
    if isinstance(expr, k.UnOp) and expr.op == "-":
        inner = expr_poly(expr.a)
        return None if inner is None else inner.scale(-1)
    if isinstance(expr, k.BinOp) and expr.op in ("+", "-", "*"):
        a, b = expr_poly(expr.a), expr_poly(expr.b)
        if a is None or b is None:
            return None
        if expr.op == "+":
            return a + b
        if expr.op == "-":
            return a - b
        if not a.terms:
            return b.scale(a.const)
        if not b.terms:
            return a.scale(b.const)
    return None


def lower_cell_statement(statement: CellStatement, ctx, value_of, flat: k.Expr, ctype: str,
                         cell: tuple[list[k.Expr], tuple[int, ...]] | None = None
                         ) -> tuple[list[k.Stmt], k.Expr]:
    """Declarations and the value of ``statement`` at flat cell ``flat`` of its shape (whose
    coordinates ``cell`` gives, if it is of that shape: a reduction's loop variables)."""
    from .lower import (aggregate, cell_coordinates, conjunction, contraction_value,
                        guard_condition, index_type)

    nc = statement.nc
    biggest = max([math.prod(nc.out_shape)] + [math.prod(a.sizes) for a in nc.operands])
    itype = index_type(biggest * 2 + 16)
    prefix = f"{statement.out}_"
    names = [prefix + o for o in nc.out_vars]
    if cell is not None and tuple(cell[1]) == tuple(nc.out_shape):
        stmts: list[k.Stmt] = [k.Declare(n, itype, k.Cast(itype, c))
                               for n, c in zip(names, cell[0])]
        forms = {n: expr_poly(c) for n, c in zip(names, cell[0])}
        coordinates = {n: form for n, form in forms.items() if form is not None}
    else:
        stmts = cell_coordinates(k.Cast(itype, flat), nc.out_shape, names, itype)
        coordinates = {}
    stmts += pinned_declarations(nc, itype, prefix, coordinates)
    renamed = _renamed(nc, prefix)
    own = statement.own_cell_reads()
    computed = {name: value_of(name) for name in own}
    value, condition = contraction_value(renamed, ctx, ctype, itype, computed)
    unreached: k.Expr = k.Const(0, ctype)
    if nc.default is not None:
        unreached = k.Cast(ctype, value_of(nc.default))
        if nc.agg != "=":
            value = aggregate(nc.agg, unreached, value, ctype)
    if condition is not None:
        if not renamed.guards:
            # Every read is in bounds: load the value whether or not it is taken, so the
            # select needs no branch (a vector loop blends).
            stmts.append(k.Declare(f"{prefix}taken", ctype, value))
            value = k.Var(f"{prefix}taken", ctype)
        value = k.Select(condition, value, unreached, ctype)
    guard = conjunction([guard_condition(q.poly, q.upper, itype) for q in renamed.guards])
    if guard is not None:
        # Only a cell that passes the guards reads the gathered operands (in bounds).
        value = k.Select(guard, value, unreached, ctype)
    return stmts, value


def _renamed(nc: NormalContraction, prefix: str) -> NormalContraction:
    """``nc`` with its variables prefixed: a kernel may compute several cell statements."""

    def rename(poly: Poly) -> Poly:
        return Poly.of({prefix + n: c for n, c in poly.terms}, poly.const)

    operands = tuple(dataclasses.replace(a, index=tuple(rename(p) for p in a.index))
                     for a in nc.operands)
    guards = tuple(Inequality(rename(q.poly), q.upper, q.origin) for q in nc.guards)
    return dataclasses.replace(nc, operands=operands, guards=guards)
