"""Contractions in output-stationary normal form.

A kernel computes each output cell from the assignments that write it. That is direct when
each output index is a distinct variable (``C[i, j]``), and needs a change of variables when it
is an affine expression, as in gradients (``D_I[2*i + j]``, ``D_I[y + ky - 1]``) or reductions
to a constant cell (``D_S[x0, 0]``). For each output axis ``d`` a new variable ``o_d`` is
introduced and one variable of the axis's expression is solved for:

    D_I[y + ky - 1 : H] = +(D_O[y] * F[ky])
    ->  y = o0 - ky + 1:    D_I[o0] = +(D_O[o0 - ky + 1] * F[ky])

Solving for a variable with coefficient ``a`` divides by ``a``; the accesses then have rational
coefficients and are valid only where they are integral, which the kernel guards (PlaidML's
"defractionalization" by guarding). An axis with no variable left becomes an equality guard.
What remains are the reduction variables, their ranges, and the inequalities the loop box does
not imply (the guards).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..errors import TileConflictError
from ..tile.bounds import BoundContraction, Inequality, infer_ranges, poly_interval
from ..tile.ir import Poly


@dataclass(frozen=True)
class NormalAccess:
    tensor: str
    index: tuple[Poly, ...]  # over output and reduction variables
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class NormalContraction:
    """``out[o_0, ..., o_n] = agg over reduction box of combo(operands)`` with guards."""

    out: str
    out_shape: tuple[int, ...]
    out_vars: tuple[str, ...]
    red_vars: tuple[str, ...]
    red_ranges: dict[str, tuple[int, int]]
    operands: tuple[NormalAccess, ...]
    guards: tuple[Inequality, ...]
    agg: str
    combo: str
    default: str | None
    always_reached: bool  # every output cell has at least one valid assignment

    @property
    def reduction_size(self) -> int:
        return math.prod(hi - lo + 1 for lo, hi in self.red_ranges.values())


def normalize(bc: BoundContraction) -> NormalContraction:
    c = bc.statement
    out_shape = bc.output.sizes
    out_vars = tuple(f"o{d}" for d in range(len(out_shape)))
    substitution: dict[str, Poly] = {}
    eliminated: set[str] = set()
    equality_guards: list[Inequality] = []
    solved_guards: list[tuple[str, int, int]] = []

    def apply(poly: Poly) -> Poly:
        result = Poly.constant(poly.const)
        for name, coeff in poly.terms:
            result = result + (substitution[name].scale(coeff) if name in substitution
                               else Poly.var(name).scale(coeff))
        return result

    for axis, poly in enumerate(bc.output.index):
        current = apply(poly)
        candidates = [(n, c) for n, c in current.terms if n not in out_vars]
        if not candidates:
            # Only one value of o_axis is written: guard 0 <= o_axis - current < 1.
            equality_guards.append(Inequality(Poly.var(out_vars[axis]) - current, 1, "output"))
            continue
        # Prefer a unit coefficient (no division), then the variable seen first.
        name, coeff = min(candidates, key=lambda nc: (abs(nc[1]) != 1, abs(nc[1])))
        rest = Poly.of({n: k for n, k in current.terms if n != name}, current.const)
        solved = (Poly.var(out_vars[axis]) - rest).scale(Fraction(1) / coeff)
        for key in list(substitution):
            substitution[key] = _substitute(substitution[key], name, solved)
        substitution[name] = solved
        eliminated.add(name)
        # The solved variable must still be an integer inside its range, even where no access
        # mentions it any more (O[2*i + 1] = ... leaves even cells unwritten).
        lo, hi = bc.ranges[name]
        solved_guards.append((name, lo, hi))

    red_vars = tuple(v for v in bc.variables if v not in eliminated)
    inequalities = [
        Inequality(apply(q.poly), q.upper, q.origin)
        for q in bc.inequalities if q.origin != "output"
    ] + equality_guards + [
        Inequality(substitution[name] - lo, hi - lo + 1, "solved") for name, lo, hi in solved_guards
    ]
    operands = tuple(
        NormalAccess(a.tensor, tuple(apply(p) for p in a.index), a.sizes) for a in bc.operands
    )
    box_vars = out_vars + red_vars
    ranges = infer_ranges(box_vars, [
        Inequality(Poly.var(o), size, "output") for o, size in zip(out_vars, out_shape)
    ] + inequalities)
    red_ranges = {v: (int(ranges[v][0]), int(ranges[v][1])) for v in red_vars}
    full_ranges = {o: (0, s - 1) for o, s in zip(out_vars, out_shape)}
    full_ranges.update(red_ranges)
    guards = tuple(q for q in inequalities if not _implied(q, full_ranges))
    empty = any(lo > hi for lo, hi in red_ranges.values())
    always = not guards and not empty
    nc = NormalContraction(
        c.out, out_shape, out_vars, red_vars, red_ranges, operands, guards, c.agg, c.combo,
        c.default, always,
    )
    _check_assign_conflict(nc, c)
    return nc


def _check_assign_conflict(nc: NormalContraction, c) -> None:
    """An ``=`` whose every cell is written by a whole box of (guard-free) assignments writes
    each cell more than once: provably an error, reported before anything runs."""
    if nc.agg != "=" or nc.combo == "?" or not nc.always_reached:
        return
    if math.prod(nc.out_shape) and nc.reduction_size > 1:
        raise TileConflictError(
            f"'=' aggregation of '{nc.out}' writes each cell from {nc.reduction_size} different "
            f"index assignments (over {', '.join(nc.red_vars)}); '=' may write each cell once",
            c.loc, nc.out,
        )


def _substitute(poly: Poly, name: str, value: Poly) -> Poly:
    coeff = poly.coeffs.get(name)
    if coeff is None:
        return poly
    rest = Poly.of({n: k for n, k in poly.terms if n != name}, poly.const)
    return rest + value.scale(coeff)


def _implied(q: Inequality, ranges: dict[str, tuple[int, int]]) -> bool:
    if any(c.denominator != 1 for _, c in q.poly.terms) or q.poly.const.denominator != 1:
        return False
    if any(lo > hi for lo, hi in (ranges[n] for n, _ in q.poly.terms)):
        return False
    low, high = poly_interval(q.poly, ranges)
    return low >= 0 and high <= q.upper - 1
