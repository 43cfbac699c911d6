"""Strided outputs split into their phases (the sub-pixel form of a transposed convolution).

The gradient of a stride-``s`` convolution with respect to its input, and any transposed
convolution, writes its output at an affine index with a coefficient ``s > 1``:

    D_I[n, k + 2*y - 1, ci : N, 32, 64] = +(D_O[n, y, co] * F[co, k, ci])     # k < 3, y < 16

Normal form (:mod:`.normalize`) solves each output axis for a unit-coefficient variable, here
``k = o - 2*y + 1``, which leaves ``y`` looping over all 16 rows under a guard that lets one or
two through: a GEMM view then reduces over ``K = 16 x 64`` per axis for what is 1.5 x 64 on
average, and in 2-D over 256 times the taps (ResNet-18's stride-2 gradients took 65% of its
step on a CPU). Writing each output index as ``o = s*z + r`` (``r < s``, the phase) and
changing variables by ``y = z - j``, ``k = s*j + r + 1`` makes every access dense:

    D_I_phases[n, z, r, ci : N, 16, 2, 64] = +(D_O[n, z - j, co] * F[co, 2*j + r + 1, ci])
    D_I = reshape(D_I_phases, N, 32, 64)

``j`` runs over ``ceil(3 / 2) = 2`` values: the phases' convolutions with the filter taps that
land on them. The assignments are the same (``(y, k) <-> (z, r, j)`` is a bijection once the
output's size is a multiple of ``s``), and so are the sums' terms and their order along
``co``; the reshape is an alias, no copy (:func:`gingham.compiler.fusion.plan`).

It applies to sums of products (``+``, combination ``*`` or none) without a default whose
output axis is ``s*y + e*k + c`` with ``s >= 2``, ``e = +-1``, ``y`` and ``k`` in no other
output axis and the axis's size a multiple of ``s``; other statements are kept as they are.

    split_output_phases(bound) -> BoundProgram with the split sums and their reshapes
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from ..errors import TileError
from ..tile.bounds import bind_contraction
from ..tile.ir import Access, Constraint, Contraction, Poly, Size, Special
from ..tile.shapes import BoundProgram


@dataclasses.dataclass(frozen=True)
class _Split:
    """One output axis ``s*y + e*k + c`` written as ``(z, r)``, with ``y = z - j`` and
    ``k = e*(s*j + r - c)``."""

    axis: int
    stride: int
    y: str
    k: str
    z: str
    r: str
    j: str
    substitution: tuple[tuple[str, Poly], ...]


def split_output_phases(bound: BoundProgram) -> BoundProgram:
    """``bound`` with each strided-output sum computed per phase into a tensor of its own
    (the output axis ``H`` as ``(H / s, s)``) that the original name reshapes."""
    shapes = dict(bound.shapes)
    dtypes = dict(bound.dtypes)
    statements: list = []
    changed = False
    for statement in bound.program.statements:
        split = _split(statement, bound, shapes) if isinstance(statement, Contraction) else None
        if split is None:
            statements.append(statement)
            continue
        phases, shape = split
        shapes[phases.out] = shape
        dtypes[phases.out] = bound.dtypes[statement.out]
        statements.append(phases)
        sizes = tuple(Size.const(n) for n in bound.shapes[statement.out])
        statements.append(Special(statement.out, "reshape", (phases.out,), sizes,
                                  loc=statement.loc))
        changed = True
    if not changed:
        return bound
    program = dataclasses.replace(bound.program, statements=tuple(statements))
    return BoundProgram(program, bound.dims, shapes, dtypes)


def _split(c: Contraction, bound: BoundProgram, shapes: dict
           ) -> tuple[Contraction, tuple[int, ...]] | None:
    """The phase-split form of ``c`` and its output shape, or None where it does not apply."""
    if c.agg != "+" or c.combo not in ("*", "none") or c.default is not None:
        return None
    dims = bound.dims
    index = [p.substitute(dims) for p in c.index]
    out_shape = bound.shapes[c.out]
    taken = set(c.index_vars())
    splits: list[_Split] = []
    for axis, poly in enumerate(index):
        split = _axis_split(axis, poly, index, out_shape[axis], taken)
        if split is not None:
            splits.append(split)
            taken |= {split.z, split.r, split.j}
    if not splits:
        return None
    substitution = dict(pair for split in splits for pair in split.substitution)

    def apply(poly: Poly) -> Poly:
        result = Poly.constant(poly.const)
        for name, coeff in poly.terms:
            result = result + (substitution[name].scale(coeff) if name in substitution
                               else Poly.var(name).scale(coeff))
        return result

    by_axis = {split.axis: split for split in splits}
    new_index: list[Poly] = []
    new_shape: list[int] = []
    for axis, poly in enumerate(index):
        split = by_axis.get(axis)
        if split is None:
            new_index.append(poly)
            new_shape.append(out_shape[axis])
        else:
            new_index += [Poly.var(split.z), Poly.var(split.r)]
            new_shape += [out_shape[axis] // split.stride, split.stride]
    operands = tuple(Access(a.tensor, tuple(apply(p.substitute(dims)) for p in a.index), a.loc)
                     for a in c.operands)
    constraints = tuple(Constraint(apply(q.poly.substitute(dims)), q.bound, q.loc)
                        for q in c.constraints)
    name = _fresh(f"{c.out}_phases", shapes)
    phases = Contraction(name, tuple(new_index), tuple(Size.const(n) for n in new_shape),
                         c.agg, c.combo, operands, constraints, None, c.loc)
    probe = dict(shapes)
    probe[name] = tuple(new_shape)
    try:
        # Every new variable must be bounded by what the old ones were (it is, by the
        # accesses that bounded y and k; an unusual program keeps its own form).
        bind_contraction(phases, dataclasses.replace(bound, shapes=probe))
    except TileError:
        return None
    return phases, tuple(new_shape)


def _axis_split(axis: int, poly: Poly, index: list[Poly], size: int, taken: set[str]
                ) -> _Split | None:
    """The split of output axis ``axis`` (index ``poly``, ``size`` long), or None: ``poly``
    must be ``s*y + e*k + c`` with ``s >= 2`` dividing ``size``, ``e = +-1``, and neither
    variable in another output axis."""
    if len(poly.terms) != 2 or poly.const.denominator != 1:
        return None
    (a, ca), (b, cb) = poly.terms
    if abs(ca) == 1 and cb.denominator == 1 and cb >= 2:
        (k, e), (y, s) = (a, ca), (b, cb)
    elif abs(cb) == 1 and ca.denominator == 1 and ca >= 2:
        (k, e), (y, s) = (b, cb), (a, ca)
    else:
        return None
    stride = int(s)
    if size % stride:
        return None
    if any({y, k} & other.names() for n, other in enumerate(index) if n != axis):
        return None
    z, r, j = (_fresh_var(f"{y}_{suffix}", taken) for suffix in ("z", "r", "j"))
    taken = taken | {z, r, j}
    # s*z + r = s*y + e*k + c  with  y = z - j  gives  e*k = s*j + r - c.
    k_value = (Poly.var(j).scale(stride) + Poly.var(r) - Poly.constant(poly.const)).scale(
        Fraction(1) / e)
    substitution = ((y, Poly.var(z) - Poly.var(j)), (k, k_value))
    return _Split(axis, stride, y, k, z, r, j, substitution)


def _fresh_var(prefix: str, taken: set[str]) -> str:
    name, index = prefix, 0
    while name in taken:
        index += 1
        name = f"{prefix}{index}"
    return name


def _fresh(prefix: str, shapes: dict) -> str:
    name, index = prefix, 0
    while name in shapes:
        index += 1
        name = f"{prefix}{index}"
    return name


__all__ = ["split_output_phases"]
