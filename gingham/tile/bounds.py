"""Bounds inference for the valid-index rule.

A contraction ranges over every integer assignment of its index variables for which every
access is in bounds and every constraint holds. Each of those conditions is an inequality
``0 <= poly < upper`` (:class:`Inequality`). Interval propagation over them gives each variable a
finite range that contains every valid assignment; the exact set is the range box filtered by
the inequalities (and by integrality where an index has a rational coefficient). The reference
interpreter enumerates that box; the compiler uses the same ranges for its loops and keeps a
guard only for inequalities the box does not already imply.

    O[x : N] = +(I[x + k - 1] * W[k])     with N = 8, W of size 3
    -> x in [0, 7], k in [0, 2]; the guard 0 <= x + k - 1 < 8 stays (zero padding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ..errors import TileIndexError
from .ir import Contraction, Poly
from .shapes import BoundProgram


@dataclass(frozen=True)
class Inequality:
    """``0 <= poly < upper`` with ``poly`` over index variables only (dimensions substituted).

    ``origin`` says where it came from: ``"output"``, ``"operand 0"``, ..., ``"constraint 0"``.
    """

    poly: Poly
    upper: int
    origin: str


@dataclass(frozen=True)
class BoundAccess:
    """An access with dimensions substituted: the index polys and the tensor's sizes."""

    tensor: str
    index: tuple[Poly, ...]
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class BoundContraction:
    """A contraction specialised to shapes, ready to enumerate or to lower."""

    statement: Contraction
    output: BoundAccess
    operands: tuple[BoundAccess, ...]
    inequalities: tuple[Inequality, ...]
    variables: tuple[str, ...]
    ranges: dict[str, tuple[int, int]]  # inclusive; lo > hi means no valid assignment

    @property
    def empty(self) -> bool:
        return any(lo > hi for lo, hi in self.ranges.values())

    def implied(self, inequality: Inequality) -> bool:
        """True when every point of the range box satisfies the inequality (no guard needed)."""
        low, high = poly_interval(inequality.poly, self.ranges)
        integral = all(c.denominator == 1 for _, c in inequality.poly.terms)
        integral = integral and inequality.poly.const.denominator == 1
        return integral and low >= 0 and high <= inequality.upper - 1


def bind_contraction(c: Contraction, bound: BoundProgram) -> BoundContraction:
    """Substitute dimensions, collect the inequalities and infer the index ranges."""
    dims = bound.dims
    output = BoundAccess(
        c.out, tuple(p.substitute(dims) for p in c.index), bound.shapes[c.out]
    )
    operands = tuple(
        BoundAccess(a.tensor, tuple(p.substitute(dims) for p in a.index), bound.shapes[a.tensor])
        for a in c.operands
    )
    inequalities: list[Inequality] = []
    for origin, access in [("output", output)] + [
        (f"operand {n}", a) for n, a in enumerate(operands)
    ]:
        for poly, size in zip(access.index, access.sizes):
            inequalities.append(Inequality(poly, size, origin))
    for n, constraint in enumerate(c.constraints):
        inequalities.append(
            Inequality(constraint.poly.substitute(dims), constraint.bound.evaluate(dims),
                       f"constraint {n}")
        )
    variables = tuple(c.index_vars())
    ranges = infer_ranges(variables, inequalities)
    for var in variables:
        lo, hi = ranges[var]
        if math.isinf(lo) or math.isinf(hi):
            raise TileIndexError(
                f"index variable '{var}' of '{c.out}' is unbounded: no access or constraint "
                "limits it",
                c.loc, c.out,
            )
    int_ranges = {v: (int(lo), int(hi)) for v, (lo, hi) in ranges.items()}
    return BoundContraction(c, output, operands, tuple(inequalities), variables, int_ranges)


def poly_interval(poly: Poly, ranges: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """The smallest and largest value of ``poly`` over the box ``ranges``."""
    return _interval(poly.terms, poly.const, ranges)


def _interval(terms, const, ranges: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """:func:`poly_interval` of ``sum(c * name) + const`` given as its parts (ints or
    Fractions)."""
    low = high = const
    for name, c in terms:
        lo, hi = ranges[name]
        if c > 0:
            low, high = low + c * lo, high + c * hi
        else:
            low, high = low + c * hi, high + c * lo
    return low, high


def infer_ranges(
    variables: tuple[str, ...], inequalities: list[Inequality]
) -> dict[str, tuple[float, float]]:
    """Interval propagation to a fixed point: each inequality bounds each of its variables
    by the ranges of the others."""
    inf = math.inf
    ranges: dict[str, tuple[float, float]] = {v: (-inf, inf) for v in variables}
    # Each inequality bounds each of its variables by the rest of its polynomial: built once,
    # not on every round (this runs for every contraction of every program compiled), with
    # integral coefficients as ints (nearly all are): exact like Fractions, and several times
    # faster (it was most of a training step's contraction normalisation).
    bounds = [(var, _exact(coeff),
               tuple((n, _exact(c)) for n, c in q.poly.terms if n != var),
               _exact(q.poly.const), q.upper - 1)
              for q in inequalities for var, coeff in q.poly.terms]
    for _ in range(4 * len(variables) + 4):
        changed = False
        for var, coeff, rest, const, top in bounds:
            rest_low, rest_high = _interval(rest, const, ranges)
            if coeff > 0:
                lo, hi = _ceil_div(0 - rest_high, coeff), _floor_div(top - rest_low, coeff)
            else:
                lo, hi = _ceil_div(top - rest_low, coeff), _floor_div(0 - rest_high, coeff)
            old_lo, old_hi = ranges[var]
            new = (max(old_lo, lo), min(old_hi, hi))
            if new != (old_lo, old_hi):
                ranges[var] = new
                changed = True
        if not changed:
            break
    return ranges


def _exact(value: Fraction) -> Fraction | int:
    """``value`` as an int when it is one."""
    return value.numerator if value.denominator == 1 else value


def _ceil_div(numerator, divisor) -> float | int:
    """ceil(numerator / divisor), or -inf (no bound) when the numerator is infinite."""
    if isinstance(numerator, float):
        return -math.inf
    if type(numerator) is int and type(divisor) is int:
        return -(-numerator // divisor)
    return math.ceil(Fraction(numerator) / divisor)


def _floor_div(numerator, divisor) -> float | int:
    """floor(numerator / divisor), or inf (no bound) when the numerator is infinite."""
    if isinstance(numerator, float):
        return math.inf
    if type(numerator) is int and type(divisor) is int:
        return numerator // divisor
    return math.floor(Fraction(numerator) / divisor)


def integer_form(poly: Poly) -> tuple[dict[str, int], int, int]:
    """``poly`` as ``(sum(coeffs[v] * v) + const) / denominator`` with integers throughout.

    An index is valid only where the numerator is divisible by the denominator.
    """
    denominator = math.lcm(*(c.denominator for _, c in poly.terms), poly.const.denominator)
    coeffs = {n: int(c * denominator) for n, c in poly.terms}
    return coeffs, int(poly.const * denominator), denominator


__all__ = [
    "BoundAccess",
    "BoundContraction",
    "Inequality",
    "bind_contraction",
    "infer_ranges",
    "integer_form",
    "poly_interval",
    "Fraction",
]
