"""Sums split by linearity into sums that sibling reductions compute.

A plain sum (:func:`gingham.compiler.fusion.reduction_domain`) whose summand is a sum of
products, each of a factor constant along the reduction and a term that varies, is

    R[c] = +(a[c] * u + b[c] * v)   ==   a[c] * +(u) + b[c] * +(v)

It fires where the sum could not share that pass as it is: a factor depends on the
earlier pass's results (batch norm's ``D_T3`` is its ``sum(dy * xhat)``). When ``+(u)`` is
already computed over the same domain, and ``+(v)`` can be too (a new sum placed right after
the last earlier sum over that domain, whose inputs exist before it), fusion puts them in that
earlier sum's kernel as siblings and ``R`` becomes an elementwise statement over its cells, an
epilogue of that kernel: one pass over the domain fewer. Batch norm's gradient

    D_T1_sum[c] = +(-(D_O * g[c] * r[c] + 2 * D_T3[c] * (x - mean[c])) / N)
    ->  D_T6_sum[c] = +(D_O)  (there already),  S[c] = +(x - mean[c])  (new sibling)
        D_T1_sum[c] = -(g[c] * r[c]) / N * D_T6_sum[c] + -(2 * D_T3[c]) / N * S[c]

Rounding: only the order of the additions and multiplications changes (each product by a factor
happens once on a sum instead of per term), as a reassociation does; in float32 the result
differs from the per-term sum by a few units in the last place of the larger partial sums, which
can be large next to the result where the terms cancel (batch norm's sum of dx' is about 0
either way; its error is of the order of the terms' sum's error before too). It fires only for
float32 / float64 sums whose inlined statements all have the sum's dtype, so no rounding to a
narrower type moves.

    split_sums(bound) -> BoundProgram with the rewritten sums and the sums they need
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..tile import ir as tir
from ..tile.ir import Binary, Const, Contraction, Elementwise, Expr, Ref, Unary
from ..tile.shapes import BoundProgram, expr_type
from .fusion import _as_kernel_statements, _cheap, reduction_domain
from .hoist import _signature

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@dataclasses.dataclass
class _Domain:
    """What a plain sum reduces: its domain's shape, the domain axes its output keeps, and
    for the rewrite, the definitions of the domain's elementwise tensors."""

    shape: tuple[int, ...]
    kept: tuple[int, ...]
    dtype: np.dtype
    definitions: dict[str, Expr]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict

    def constant(self, expr: Expr) -> bool:
        """Whether ``expr`` (read at the domain's cells) is the same along every reduced
        axis: every tensor it reads, through the domain's elementwise definitions, is of a
        smaller shape that is 1 on the reduced axes, in the sum's dtype."""
        refs = tir.expr_refs(expr)
        for name in refs:
            if name in self.definitions:
                if not self.constant(self.definitions[name]):
                    return False
            elif not self._small(name):
                return False
        return True

    def _small(self, name: str) -> bool:
        shape = self.shapes[name]
        if shape == self.shape or len(shape) > len(self.shape) or self.dtypes[name] != self.dtype:
            return False
        lead = len(self.shape) - len(shape)
        return all(size == 1 or lead + axis in self.kept for axis, size in enumerate(shape))

    def inline(self, expr: Expr) -> Expr:
        """``expr`` with the domain's elementwise tensors replaced by their definitions."""
        if isinstance(expr, Ref):
            return self.inline(self.definitions[expr.name]) if expr.name in self.definitions \
                else expr
        from .hoist import _map_children

        return _map_children(expr, self.inline)


def split_sums(bound: BoundProgram) -> BoundProgram:
    """``bound`` with each plain sum that is a combination of sums over its domain rewritten
    as that combination (see the module's docstring); unchanged where none is."""
    statements = _as_kernel_statements(bound)
    program = list(bound.program.statements)
    shapes, dtypes = dict(bound.shapes), dict(bound.dtypes)
    changed = False
    # position in ``program`` -> statements inserted after it
    inserted: dict[int, list] = {}
    replaced: dict[int, object] = {}
    depends = _dependencies(statements)
    # Each candidate compares its domain with every sum's before and after it.
    domains = [reduction_domain(nc, bound) for _, nc in statements]
    for position, (statement, nc) in enumerate(statements):
        if not isinstance(statement, Contraction) or nc.agg != "+":
            continue
        rewrite = _split_one(position, statements, domains, bound, shapes, dtypes, depends)
        if rewrite is None:
            continue
        anchor, new_statements, replacement = rewrite
        inserted.setdefault(anchor, []).extend(new_statements)
        replaced[position] = replacement
        changed = True
    if not changed:
        return bound
    result = []
    for position, statement in enumerate(program):
        result.append(replaced.get(position, statement))
        result.extend(inserted.get(position, []))
    new_program = dataclasses.replace(bound.program, statements=tuple(result))
    return BoundProgram(new_program, bound.dims, shapes, dtypes)


def _output_aligned(nc, domain: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    """Whether the sum's output, right-aligned against the domain as elementwise statements
    broadcast, has each kept axis where the domain has it (``[1, C, 1, 1]`` or ``[C, 1, 1]``
    over ``[N, C, H, W]``), so domain-constant tensors broadcast into it correctly."""
    shape, kept = domain
    access = nc.operands[0]
    names = [poly.terms[0][0] for poly in access.index]
    lead = len(shape) - len(nc.out_shape)
    if lead < 0:
        return False
    for axis, (var, size) in enumerate(zip(nc.out_vars, nc.out_shape)):
        if size != 1 and names.index(var) != lead + axis:
            return False
    return True


def _split_one(position: int, statements, domains: list, bound: BoundProgram, shapes: dict,
               dtypes: dict, depends: dict[str, set[str]]):
    """(anchor position, statements to insert after it, replacement of the sum) or None
    (``domains``: each statement's :func:`reduction_domain`)."""
    statement, nc = statements[position]
    domain = domains[position]
    dtype = np.dtype(bound.dtypes[statement.out])
    if domain is None or dtype not in _FLOATS or not _output_aligned(nc, domain):
        return None
    definitions = {s.out: s.expr for s, _ in statements[:position]
                   if isinstance(s, Elementwise) and bound.shapes[s.out] == domain[0]
                   and np.dtype(bound.dtypes[s.out]) == dtype}
    info = _Domain(domain[0], domain[1], dtype, definitions, bound.shapes, bound.dtypes)
    operand = nc.operands[0].tensor
    parts = _linear(Ref(operand), info)
    if parts is None or (len(parts) == 1 and parts[0][0] is None):
        return None  # one term with no factor: nothing to split
    # The sums over this domain computed before, by what they sum (inlined).
    earlier: dict[tuple, str] = {}
    anchor = None
    for index in range(position):
        other, other_nc = statements[index]
        if (isinstance(other, Contraction) and other_nc.agg == "+"
                and domains[index] == domain
                and _output_aligned(other_nc, domain)
                and bound.dtypes[other.out] == dtype):
            key = _signature(info.inline(Ref(other_nc.operands[0].tensor)))
            earlier.setdefault(key, other.out)
            anchor = index
    if anchor is None:
        return None  # no pass over the domain to join
    defined = {s.out for s, _ in statements[:anchor]} | set(bound.program.input_names)
    anchor_out = statements[anchor][0].out

    def blocked(name: str) -> bool:
        """Whether sum ``name`` needs a result of the anchor's pass: a sum over the domain
        that is the anchor or that the anchor does not wait for (so shares its pass)."""
        return any(s in depends[name] and (s == anchor_out or s not in depends[anchor_out])
                   for s in earlier.values())

    if not blocked(statement.out):
        return None  # it joins that pass as it is (a sibling): nothing to gain
    for later_position in range(position + 1, len(statements)):
        later = statements[later_position][0]
        if (isinstance(later, Contraction) and domains[later_position] == domain
                and statement.out not in depends[later.out] and blocked(later.out)):
            return None  # a later sum needs a pass after the anchor's anyway: it is shared
    new_statements = []
    combination: Expr | None = None
    count = math.prod(domain[0]) // math.prod(nc.out_shape)
    for number, (factor, term) in enumerate(parts):
        if term is None:
            summed: Expr = Const(float(count))
        else:
            key = _signature(info.inline(term))
            if key in earlier:
                summed = Ref(earlier[key])
            else:
                if (not set(tir.expr_refs(term)) <= defined or not _cheap(term)
                        or expr_type(term, dtypes).dtype != dtype):
                    return None  # it could not join the earlier pass, or rounds otherwise
                name = _fresh(f"{statement.out}_s", shapes)
                if isinstance(term, Ref):
                    source = term.name
                else:
                    source = _fresh(f"{statement.out}_t", shapes)
                    shapes[source], dtypes[source] = domain[0], dtype
                    new_statements.append(Elementwise(source, term, statement.loc))
                access = dataclasses.replace(statement.operands[0], tensor=source)
                new_statements.append(dataclasses.replace(statement, out=name,
                                                          operands=(access,)))
                shapes[name], dtypes[name] = shapes[statement.out], dtype
                earlier[key] = name
                summed = Ref(name)
        product = summed if factor is None else Binary("*", info.inline(factor), summed)
        combination = product if combination is None else Binary("+", combination, product)
    for name in tir.expr_refs(combination):
        # Every tensor it reads must broadcast into the sum's own cells.
        shape = shapes[name]
        if len(shape) > len(nc.out_shape) or np.broadcast_shapes(
                shape, nc.out_shape) != tuple(nc.out_shape):
            return None
    replacement = Elementwise(statement.out, combination, statement.loc)
    return anchor, new_statements, replacement


def _dependencies(statements) -> dict[str, set[str]]:
    """Every tensor each statement's value depends on, transitively."""
    depends: dict[str, set[str]] = {}
    for statement, _ in statements:
        if isinstance(statement, Contraction):
            inputs = [a.tensor for a in statement.operands] + (
                [statement.default] if statement.default else [])
        elif isinstance(statement, tir.Special):
            inputs = list(statement.tensors)
        else:
            inputs = statement.inputs()
        found: set[str] = set()
        for name in inputs:
            found.add(name)
            found |= depends.get(name, set())
        depends[statement.out] = found
    return depends


def _linear(expr: Expr, info: _Domain) -> list[tuple[Expr | None, Expr | None]] | None:
    """``expr`` as ``sum(factor * term)``: factors constant along the reduction (None: 1),
    terms varying (None: the constant 1)."""
    if info.constant(expr):
        return [(expr, None)]
    if isinstance(expr, Ref) and expr.name in info.definitions:
        parts = _linear(info.definitions[expr.name], info)
        if parts is not None and len(parts) == 1 and parts[0][0] is None:
            return [(None, expr)]  # the tensor itself is the term
        return parts
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        left, right = _linear(expr.left, info), _linear(expr.right, info)
        if left is None or right is None:
            return None
        if expr.op == "-":
            right = [(_negate(f), t) for f, t in right]
        return left + right
    if isinstance(expr, Unary) and expr.op == "-":
        inner = _linear(expr.operand, info)
        return None if inner is None else [(_negate(f), t) for f, t in inner]
    if isinstance(expr, Binary) and expr.op == "*":
        if info.constant(expr.left):
            inner = _linear(expr.right, info)
            return None if inner is None else [
                (expr.left if f is None else Binary("*", expr.left, f), t) for f, t in inner]
        if info.constant(expr.right):
            inner = _linear(expr.left, info)
            return None if inner is None else [
                (expr.right if f is None else Binary("*", f, expr.right), t) for f, t in inner]
    if isinstance(expr, Binary) and expr.op == "/" and info.constant(expr.right):
        inner = _linear(expr.left, info)
        return None if inner is None else [
            (Binary("/", Const(1.0) if f is None else f, expr.right), t) for f, t in inner]
    return [(None, expr)]


def _negate(factor: Expr | None) -> Expr:
    return Const(-1.0) if factor is None else Unary("-", factor)


def _fresh(prefix: str, shapes: dict) -> str:
    index = 0
    while f"{prefix}{index}" in shapes:
        index += 1
    return f"{prefix}{index}"
