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
land on them. The assignments are the same (``(y, k) <-> (z, r, j)`` is a bijection onto the
output's cells), and so are the sums' terms and their order along ``co``; the reshape is an
alias, no copy (:func:`gingham.compiler.fusion.plan`). Where the output's size is no multiple
of ``s`` the phases run one row past it (``ceil(H / s)`` rows of ``s``), whose cells take the
taps that the output drops, and a copy keeps the rows inside: a transposed convolution without
``output_padding`` (``(P - 1) * s - 2 * p + k`` rows) pays one pass over its output for that.

It applies to sums of products (``+``, combination ``*`` or none), with a default (a bias)
constant along the split axes or none, whose output axis is ``s*y + e*k + c`` with
``s >= 2``, ``e = +-1`` and ``y`` and ``k`` in no other output axis, unless the guards
already pin every tap (one assignment per cell: a cell statement that fusion puts in its
readers); other statements are kept as they are.

    split_output_phases(bound) -> BoundProgram with the split sums and their reshapes
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from ..errors import TileError
from ..tile.bounds import bind_contraction
from ..tile.ir import Access, Constraint, Contraction, Poly, Size, Special, Statement
from ..tile.shapes import BoundProgram
from .normalize import narrow, normalize, pin, substitute_polys


@dataclasses.dataclass(frozen=True)
class _Split:
    """One output axis ``s*y + e*k + c`` written as ``(z, r)``, with ``y = z - j`` and
    ``k = e*(s*j + r - c)``."""

    axis: int
    stride: int
    z: str
    r: str
    j: str
    substitution: tuple[tuple[str, Poly], ...]  # ((y, z - j), (k, e*(s*j + r - c)))


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
        for new, shape in split:
            shapes.setdefault(new.out, shape)
            # A reshape has its source's type (the default's may differ from the sum's).
            source = new.tensors[0] if isinstance(new, Special) else statement.out
            dtypes.setdefault(new.out, dtypes[source])
            statements.append(new)
        changed = True
    if not changed:
        return bound
    program = dataclasses.replace(bound.program, statements=tuple(statements))
    return BoundProgram(program, bound.dims, shapes, dtypes)


def _split(c: Contraction, bound: BoundProgram, shapes: dict
           ) -> list[tuple[Statement, tuple[int, ...]]] | None:
    """The statements that compute ``c``'s output per phase, each with its output's shape
    (the phase-split sum, its reshape, and where an axis is no multiple of its stride the
    crop of the rows past it), or None where the split does not apply."""
    if c.agg != "+" or c.combo not in ("*", "none"):
        return None
    dims = bound.dims
    index = [p.substitute(dims) for p in c.index]
    out_shape = bound.shapes[c.out]
    taken = set(c.index_vars())
    splits: list[_Split] = []
    for axis, poly in enumerate(index):
        split = _axis_split(axis, poly, index, taken)
        if split is not None:
            splits.append(split)
            taken |= {split.z, split.r, split.j}
    if not splits:
        return None
    if not pin(narrow(normalize(bind_contraction(c, bound)))).red_vars:
        # One assignment per cell once the guards pin the taps (a window no wider than its
        # stride: the average-pool gradient): fusion computes it as a cell statement, in its
        # readers, which beats a kernel of its own over the phases.
        return None
    substitution = dict(pair for split in splits for pair in split.substitution)

    def apply(poly: Poly) -> Poly:
        return substitute_polys(poly.substitute(dims), substitution)

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
            new_shape += [-(-out_shape[axis] // split.stride), split.stride]
    operands = tuple(Access(a.tensor, tuple(apply(p) for p in a.index), a.loc)
                     for a in c.operands)
    constraints = tuple(Constraint(apply(q.poly), q.bound, q.loc)
                        for q in c.constraints)
    name = _fresh(f"{c.out}_phases", shapes)
    probe = dict(shapes)
    probe[name] = tuple(new_shape)
    before: list[tuple[Statement, tuple[int, ...]]] = []
    default = None
    if c.default is not None:
        default_shape = _default_phases_shape(bound.shapes[c.default], out_shape, by_axis)
        if default_shape is None:
            return None
        default = _fresh(f"{c.default}_phases", probe)
        probe[default] = default_shape
        before.append((Special(default, "reshape", (c.default,), _sizes(default_shape),
                               loc=c.loc), default_shape))
    phases = Contraction(name, tuple(new_index), _sizes(new_shape),
                         c.agg, c.combo, operands, constraints, default, c.loc)
    try:
        # Every new variable must be bounded by what the old ones were (it is, by the
        # accesses that bounded y and k; an unusual program keeps its own form).
        bind_contraction(phases, dataclasses.replace(bound, shapes=probe))
    except TileError:
        return None
    padded = tuple(size if axis not in by_axis else -(-size // by_axis[axis].stride)
                   * by_axis[axis].stride for axis, size in enumerate(out_shape))
    if padded == tuple(out_shape):
        reshape = Special(c.out, "reshape", (name,), _sizes(out_shape), loc=c.loc)
        return before + [(phases, tuple(new_shape)), (reshape, tuple(out_shape))]
    # The last phase row runs past the output: those cells take the taps the output drops,
    # and a copy keeps the rows inside it.
    whole = _fresh(f"{c.out}_padded", probe)
    reshape = Special(whole, "reshape", (name,), _sizes(padded), loc=c.loc)
    cell = tuple(Poly.var(f"i{axis}") for axis in range(len(out_shape)))
    crop = Contraction(c.out, cell, _sizes(out_shape), "=", "none", (Access(whole, cell),),
                       loc=c.loc)
    return before + [(phases, tuple(new_shape)), (reshape, padded), (crop, tuple(out_shape))]


def _default_phases_shape(shape: tuple[int, ...], out_shape: tuple[int, ...],
                          by_axis: dict[int, _Split]) -> tuple[int, ...] | None:
    """The shape a default (the sum's starting value, broadcast to the output: a transposed
    convolution's bias ``[C, 1, 1]``) takes beside the phases, or None: it must be constant
    along every split axis, which then becomes ``(1, 1)``."""
    lead = len(out_shape) - len(shape)
    result: list[int] = []
    for axis, size in enumerate(shape):
        if lead + axis in by_axis:
            if size != 1:
                return None
            result += [1, 1]
        else:
            result.append(size)
    return tuple(result)


def _sizes(shape) -> tuple[Size, ...]:
    return tuple(Size.const(n) for n in shape)


def _axis_split(axis: int, poly: Poly, index: list[Poly], taken: set[str]) -> _Split | None:
    """The split of output axis ``axis`` (index ``poly``), or None: ``poly`` must be
    ``s*y + e*k + c`` with ``s >= 2``, ``e = +-1``, and neither variable in another output
    axis."""
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
    if any({y, k} & other.names() for n, other in enumerate(index) if n != axis):
        return None
    z, r, j = (_fresh(f"{y}_{suffix}", taken) for suffix in ("z", "r", "j"))
    # s*z + r = s*y + e*k + c  with  y = z - j  gives  e*k = s*j + r - c.
    k_value = (Poly.var(j).scale(stride) + Poly.var(r) - Poly.constant(poly.const)).scale(
        Fraction(1) / e)
    substitution = ((y, Poly.var(z) - Poly.var(j)), (k, k_value))
    return _Split(axis, stride, z, r, j, substitution)


def _fresh(prefix: str, taken) -> str:
    """``prefix``, or ``prefix`` and a number, not in ``taken`` (tensor or variable names)."""
    name, index = prefix, 0
    while name in taken:
        index += 1
        name = f"{prefix}{index}"
    return name


__all__ = ["split_output_phases"]
