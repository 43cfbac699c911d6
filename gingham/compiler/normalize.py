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

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

from ..errors import TileConflictError
from ..tile.bounds import (BoundContraction, Inequality, infer_ranges, integer_form,
                           poly_interval)
from ..tile.ir import Poly


@dataclass(frozen=True)
class NormalAccess:
    tensor: str
    index: tuple[Poly, ...]  # over output and reduction variables
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Pinned:
    """A reduction variable that the guards fix for each output cell:
    ``name = low + ((poly - low) mod modulus)``, ``poly`` over output variables only.

        Pinned("k_n", Poly.var("o1"), 2, 0)    # k_n = o1 mod 2 (a 2x2, stride-2 window)
    """

    name: str
    poly: Poly
    modulus: int
    low: int


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
    # Reduction variables computed per cell instead of looped over (:func:`pin`), in order.
    pinned: tuple[Pinned, ...] = ()

    @property
    def reduction_size(self) -> int:
        return math.prod(hi - lo + 1 for lo, hi in self.red_ranges.values())


#: What a contraction's index variables are renamed with (:func:`normalize`): no identifier
#: that lowering or a dialect generates starts with it.
INDEX_PREFIX = "ix_"


def normalize(bc: BoundContraction) -> NormalContraction:
    c = bc.statement
    out_shape = bc.output.sizes
    out_vars = tuple(f"o{d}" for d in range(len(out_shape)))
    # The statement's variables keep their names behind a prefix no name the compiler makes
    # starts with (``k0`` -> ``ix_k0``, readable in schedules): kept as written, a variable
    # named like a kernel's loop or register (`l`, `g`, `acc`) was shadowed by it
    # (`+(X[i, j, k, l])` summed X[..., 0] in a row reduction's lane loop).
    renamed = {v: f"{INDEX_PREFIX}{v}" for v in bc.variables}
    ranges_of = {renamed[v]: r for v, r in bc.ranges.items() if v in renamed}
    substitution: dict[str, Poly] = {v: Poly.var(q) for v, q in renamed.items()}
    eliminated: set[str] = set()
    equality_guards: list[Inequality] = []
    solved_guards: list[tuple[str, int, int]] = []

    def apply(poly: Poly) -> Poly:
        return substitute_polys(poly, substitution)

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
        lo, hi = ranges_of[name]
        solved_guards.append((name, lo, hi))

    red_vars = tuple(renamed[v] for v in bc.variables if renamed[v] not in eliminated)
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
    _check_assign_conflict(nc, c, {q: v for v, q in renamed.items()})
    return nc


def narrow(nc: NormalContraction, unit_coefficients: bool = False) -> NormalContraction:
    """The same contraction with each reduction variable that a guard pins to fewer values
    than its range replaced by the guarded expression itself.

    Normal form solves each output axis for a unit-coefficient variable where it can, which can
    leave a long reduction that a guard makes sparse. The max-pool gradient
    ``D_X[2*y + k] = +(X[2*y + k] == O[y] ? D_O[y])`` solves ``k = o - 2*y`` and keeps ``y``
    over all 16 output rows under the guard ``0 <= o - 2*y < 2``: one valid row in 16 (per
    image axis, so 1 of 256 assignments in 2-D). With ``u = o - 2*y`` the reduction runs over
    ``u`` in ``[0, 2)`` and ``y = (o - u) / 2`` becomes a guard (its old range, and that it is
    an integer): the same assignments, a reduction 2 long per axis. A coefficient ``a`` of
    magnitude above 1 leaves ``|a| - 1`` of every ``|a|`` values of ``u`` failing the
    integrality guard, still far fewer than the range. Only guards whose other variables are
    output variables qualify (the new range must not depend on another reduction).

        D_I[o] = +(D_O[y] * F[o - y + 1]), y < H, guard 0 <= o - y + 1 < 3
        ->  D_I[o] = +(D_O[o + 1 - u] * F[u]), u < 3, guard 0 <= o + 1 - u < H

    ``unit_coefficients``: narrow only variables with coefficient +-1 in the guard (no
    integrality guard appears; the tiled GPU schedule wants that).
    """
    while True:
        best: tuple[str, Inequality] | None = None
        for var in nc.red_vars:
            lo, hi = nc.red_ranges[var]
            for guard in nc.guards:
                coeff = guard.poly.coeffs.get(var)
                others = guard.poly.names() - {var}
                if coeff is None or others & set(nc.red_vars) or not _integral(guard.poly):
                    continue
                if unit_coefficients and abs(coeff) != 1:
                    continue
                if guard.upper >= hi - lo + 1:
                    continue
                if best is None or guard.upper < best[1].upper:
                    best = (var, guard)
        if best is None:
            return nc
        nc = _narrow_one(nc, *best)


def pin(nc: NormalContraction) -> NormalContraction:
    """The same contraction with each reduction variable that its guards determine from the
    output indices computed per cell (:class:`Pinned`) instead of looped over.

    After :func:`narrow`, the max-pool gradient of a 2x2, stride-2 window reduces over the
    window position ``k`` in ``[0, 2)`` per axis under the guard that ``(o - k) / 2`` is an
    integer: exactly one ``k`` (``o mod 2``) satisfies it, so the "reduction" is one
    assignment, an elementwise expression with index arithmetic. In general a guard whose
    integral form is ``(c*v + rest) / m`` with ``rest`` over output variables and ``c`` prime
    to ``m`` demands ``v = -rest / c (mod m)``: one value in every ``m`` consecutive ones, so
    ``v`` is determined when its range is at most ``m`` long. A shorter range keeps the guard
    ``low <= v <= high`` (a cell whose solution is out of range has no valid assignment: the
    aggregation's identity, or the default, as the valid-index rule says). An overlapping
    window (3 long, stride 2) has two solutions for some cells and keeps its reduction.

        D_X[o] = +(X[o] == O[(o - k) / 2] ? D_O[(o - k) / 2]), k < 2, guard (o - k) / 2 integer
        ->  k = o mod 2:    D_X[o] = X[o] == O[(o - k) / 2] ? D_O[(o - k) / 2] : 0
    """
    box = {o: (0, s - 1) for o, s in zip(nc.out_vars, nc.out_shape)}
    while True:
        for var in nc.red_vars:
            lo, hi = nc.red_ranges[var]
            solved = _pin_one(nc, var, lo, hi, box)
            if solved is not None:
                nc = solved
                break
            window = _window_guard(nc, var)
            if window is not None:
                # 0 <= a*v + rest < U with U <= |a| holds for at most one v: as the window
                # position u = a*v + rest in [0, U), v = (u - rest) / a is integral for one u
                # in |a| consecutive ones, which the next round pins (so this terminates).
                nc = _narrow_one(nc, var, window)
                break
        else:
            return nc


def _window_guard(nc: NormalContraction, var: str) -> Inequality | None:
    """An integral guard ``0 <= a*var + rest < U`` over output variables with ``U <= |a|``,
    ``|a| > 1`` (a stride-``a`` window of ``U`` positions: ``0 <= o - 3*y < 3``)."""
    for guard in nc.guards:
        coeff = guard.poly.coeffs.get(var)
        if (coeff is None or not _integral(guard.poly) or abs(coeff) < 2
                or guard.upper > abs(coeff) or guard.poly.names() - {var} - set(nc.out_vars)):
            continue
        return guard
    return None


def _pin_one(nc: NormalContraction, var: str, lo: int, hi: int,
             box: dict[str, tuple[int, int]]) -> NormalContraction | None:
    for guard in nc.guards:
        coeffs, const, modulus = integer_form(guard.poly)
        c = coeffs.get(var)
        if c is None or modulus == 1 or math.gcd(c, modulus) != 1 or hi - lo + 1 > modulus:
            continue
        rest = {n: k for n, k in coeffs.items() if n != var}
        if set(rest) - set(nc.out_vars):
            continue  # the solution must be a function of the output indices only
        # c*v + rest = 0 (mod m)  <=>  v = -c^-1 * rest (mod m)
        inverse = pow(c, -1, modulus)
        poly = Poly.of({n: -inverse * k for n, k in rest.items()}, -inverse * const)
        pinned = Pinned(var, poly, modulus, lo)
        # The guard's numerator is now a multiple of m: keep only its range, in integers.
        numerator = Poly.of(coeffs, const)
        guards = [q for q in nc.guards if q is not guard]
        guards.append(Inequality(numerator, guard.upper * modulus, guard.origin))
        if hi - lo + 1 < modulus:
            guards.append(Inequality(Poly.var(var) - lo, hi - lo + 1, "solved"))
        ranges = dict(box)
        ranges.update(nc.red_ranges)
        ranges[var] = (lo, lo + modulus - 1)
        for p in nc.pinned:
            ranges[p.name] = (p.low, p.low + p.modulus - 1)
        all_pinned = nc.pinned + (pinned,)
        kept = tuple(q for q in guards if not _implied(q, ranges)
                     and not _holds_everywhere(q, all_pinned, box))
        red_ranges = {v: r for v, r in nc.red_ranges.items() if v != var}
        return dataclasses.replace(
            nc, red_vars=tuple(v for v in nc.red_vars if v != var), red_ranges=red_ranges,
            guards=kept, pinned=all_pinned)
    return None


#: Most output-index points a guard over pinned variables is checked at (:func:`pin`).
MAX_GUARD_POINTS = 4096


def _holds_everywhere(q: Inequality, pinned: tuple[Pinned, ...],
                      box: dict[str, tuple[int, int]]) -> bool:
    """Whether guard ``q``, over output and pinned variables only, holds at every output
    cell: checked at every point of the output variables it depends on (through the pinned
    ones too), where that is at most MAX_GUARD_POINTS. The interval of a pinned variable
    (``[low, low + m)``) is blind to its tie with the output index: ``o - (o mod 2)`` is in
    ``[0, 31)`` for ``o < 32``, which the intervals cannot show."""
    by_name = {p.name: p for p in pinned}
    names = q.poly.names()
    outputs = {n for n in names if n in box}
    for n in names - outputs:
        if n not in by_name:
            return False
        outputs |= by_name[n].poly.names()
    if math.prod(box[n][1] - box[n][0] + 1 for n in outputs) > MAX_GUARD_POINTS:
        return False
    order = sorted(outputs)
    points = [()]
    for n in order:
        points = [p + (value,) for p in points for value in range(box[n][0], box[n][1] + 1)]
    for point in points:
        values = dict(zip(order, point))
        for n in names - set(order):
            p = by_name[n]
            values[n] = p.low + (int(_evaluate(p.poly, values)) - p.low) % p.modulus
        value = _evaluate(q.poly, values)
        if value.denominator != 1 or not 0 <= value < q.upper:
            return False
    return True


def _evaluate(poly: Poly, values: dict[str, int]) -> Fraction:
    return poly.const + sum((c * values[n] for n, c in poly.terms), Fraction(0))


def _integral(poly: Poly) -> bool:
    return all(c.denominator == 1 for _, c in poly.terms) and poly.const.denominator == 1


def _narrow_one(nc: NormalContraction, var: str, guard: Inequality) -> NormalContraction:
    """Replace reduction variable ``var`` by ``u = guard.poly`` (``u`` in ``[0, upper)``)."""
    coeff = guard.poly.coeffs[var]
    new = f"{var}_n"
    while new in nc.red_vars or new in nc.out_vars:
        new += "_"
    rest = Poly.of({n: c for n, c in guard.poly.terms if n != var}, guard.poly.const)
    value = (Poly.var(new) - rest).scale(Fraction(1) / coeff)  # var = (u - rest) / coeff
    lo, hi = nc.red_ranges[var]
    red_vars = tuple(new if v == var else v for v in nc.red_vars)
    red_ranges = {(new if v == var else v): r for v, r in nc.red_ranges.items()}
    red_ranges[new] = (0, guard.upper - 1)
    operands = tuple(dataclasses.replace(a, index=tuple(_substitute(p, var, value)
                                                        for p in a.index))
                     for a in nc.operands)
    # The old range of var, which for |coeff| > 1 also demands that var is an integer.
    guards = [Inequality(_substitute(q.poly, var, value), q.upper, q.origin)
              for q in nc.guards if q is not guard]
    guards.append(Inequality(value - lo, hi - lo + 1, "solved"))
    box = {o: (0, s - 1) for o, s in zip(nc.out_vars, nc.out_shape)}
    box.update(red_ranges)
    box.update({p.name: (p.low, p.low + p.modulus - 1) for p in nc.pinned})
    kept = tuple(q for q in guards if not _implied(q, box))
    return dataclasses.replace(nc, red_vars=red_vars, red_ranges=red_ranges,
                               operands=operands, guards=kept)


def _check_assign_conflict(nc: NormalContraction, c, written: dict[str, str]) -> None:
    """An ``=`` whose every cell is written by a whole box of (guard-free) assignments writes
    each cell more than once: provably an error, reported before anything runs."""
    if nc.agg != "=" or nc.combo == "?" or not nc.always_reached:
        return
    if math.prod(nc.out_shape) and nc.reduction_size > 1:
        raise TileConflictError(
            f"'=' aggregation of '{nc.out}' writes each cell from {nc.reduction_size} different "
            f"index assignments (over {', '.join(written.get(v, v) for v in nc.red_vars)}); '=' may write each cell once",
            c.loc, nc.out,
        )


def substitute_polys(poly: Poly, values: dict[str, Poly]) -> Poly:
    """``poly`` with each variable named in ``values`` replaced by its polynomial::

        substitute_polys(2*y + k, {"y": z - j})  ->  2*z - 2*j + k
    """
    if not any(name in values for name, _ in poly.terms):
        return poly
    # One pass into a dict: a Poly per term (scale, then +) made this most of normalising a
    # contraction, which a training step's first compile does ~10^3 times.
    merged: dict[str, Fraction] = {}
    const = poly.const
    for name, coeff in poly.terms:
        value = values.get(name)
        if value is None:
            merged[name] = merged.get(name, 0) + coeff
            continue
        const += value.const * coeff
        for inner, c in value.terms:
            merged[inner] = merged.get(inner, 0) + c * coeff
    return Poly.of(merged, const)


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
