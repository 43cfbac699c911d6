"""Grouping a bound program's statements into kernels.

Every contraction and special operation starts a kernel. An elementwise statement joins the
kernel that produces one of its operands when it iterates over the same cells (same shape) and
all its other operands exist before that kernel runs; there it becomes an epilogue computed in
registers, per output cell; it may also join the latest kernel when that iterates over the
same cells and its operands exist before it. Otherwise it starts an elementwise kernel, which later elementwise
statements can join in turn, so a chain ``relu(x * a + b) * c`` is one kernel and
``C = A @ B; D = relu(C + bias)`` is one kernel. A tensor is written to memory only if it is an
output of the program or another kernel reads it.

    plan(bound) -> [KernelPlan(kind="contraction", outputs=["C", "D"], stores={"D"}, ...)]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..tile.bounds import bind_contraction
from ..tile.ir import Binary, Const, Contraction, Elementwise, Expr, Poly, Ref, Select, Special
from ..tile.shapes import BoundProgram
from .normalize import NormalContraction, normalize


@dataclass
class KernelPlan:
    """One kernel to generate: what it iterates over and what it computes, in order."""

    kind: str  # "contraction", "elementwise" or "special"
    shape: tuple[int, ...]  # the cells it iterates over
    contraction: NormalContraction | None = None
    special: Special | None = None
    elementwise: list[Elementwise] = field(default_factory=list)
    stores: set[str] = field(default_factory=set)

    @property
    def produced(self) -> list[str]:
        names = []
        if self.contraction is not None:
            names.append(self.contraction.out)
        if self.special is not None:
            names.append(self.special.out)
        names.extend(e.out for e in self.elementwise)
        return names

    def reads(self) -> set[str]:
        """Tensors read from memory (produced elsewhere)."""
        produced = set(self.produced)
        names: set[str] = set()
        if self.contraction is not None:
            names |= {a.tensor for a in self.contraction.operands}
            if self.contraction.default is not None:
                names.add(self.contraction.default)
        if self.special is not None and self.special.op not in ("index", "shape"):
            # index and shape need only the tensor's shape, never its values: a tensor that
            # only they name (cross-entropy's log-probabilities in its gradient) is not computed.
            names |= set(self.special.tensors)
        for statement in self.elementwise:
            names |= set(statement.inputs()) - produced
        return names


@dataclass
class Plan:
    kernels: list[KernelPlan]
    aliases: dict[str, str]  # reshape outputs share their source's buffer


def plan(bound: BoundProgram) -> Plan:
    kernels: list[KernelPlan] = []
    producer: dict[str, int] = {}  # tensor -> index of the kernel that computes it
    aliases: dict[str, str] = {}
    program = bound.program

    def root(name: str) -> str:
        while name in aliases:
            name = aliases[name]
        return name

    for statement in program.statements:
        if isinstance(statement, Special) and statement.op == "reshape":
            aliases[statement.out] = statement.tensors[0]
            continue
        if _is_copy(statement, bound):
            # ``D_T = D_O`` (autodiff passes cotangents on so): the same buffer, no kernel.
            aliases[statement.out] = statement.expr.name
            continue
        if isinstance(statement, Contraction):
            nc = normalize(bind_contraction(statement, bound))
            expr = _as_elementwise(nc, bound)
            if expr is not None:
                # A copy or product with broadcasting (autodiff's gradients of a sum and of a
                # max): elementwise, so it streams in vector loops and fuses with neighbours.
                statement = Elementwise(statement.out, expr, statement.loc)
        if isinstance(statement, Contraction):
            kernels.append(KernelPlan("contraction", bound.shapes[statement.out], contraction=nc))
        elif isinstance(statement, Special):
            kernels.append(KernelPlan("special", bound.shapes[statement.out], special=statement))
        else:
            target = _fusion_target(statement, bound, kernels, producer, root)
            if target is None:
                kernels.append(KernelPlan("elementwise", bound.shapes[statement.out]))
                target = len(kernels) - 1
            kernels[target].elementwise.append(statement)
            producer[statement.out] = target
            continue
        producer[statement.out] = len(kernels) - 1

    # A tensor is stored if the program returns it or another kernel reads it.
    needed_in_memory = {root(name) for name in program.outputs}
    for index, kernel in enumerate(kernels):
        for name in kernel.reads():
            name = root(name)
            if producer.get(name) != index:
                needed_in_memory.add(name)
    for kernel in kernels:
        kernel.stores = {n for n in kernel.produced if n in needed_in_memory}
    return Plan([k for k in kernels if k.stores], aliases)


def _is_copy(statement, bound: BoundProgram) -> bool:
    """An elementwise statement that only names another tensor of its shape and dtype."""
    if not isinstance(statement, Elementwise) or not isinstance(statement.expr, Ref):
        return False
    source = statement.expr.name
    return (bound.shapes[source] == bound.shapes[statement.out]
            and bound.dtypes[source] == bound.dtypes[statement.out])


def _as_elementwise(nc: NormalContraction, bound: BoundProgram) -> Expr | None:
    """The elementwise expression a contraction computes at each cell, or None.

    ``D[i, j : R, K] = +(S[i, 0])`` or ``+(X[i, j] == M[i, 0] ? G[i, 0])``: one assignment per
    cell (no reduction variables, no guards), each operand read at the cell's own coordinates
    on every axis it does not broadcast (right-aligned, as elementwise statements broadcast),
    all in the output's dtype: the same values as ``D = S`` or ``D = X == M ? G : 0``.
    """
    if nc.red_vars or nc.guards or nc.default is not None or not nc.always_reached:
        return None
    if nc.combo == "none":
        if nc.agg not in ("+", "*", ">", "<", "="):
            return None
    elif nc.combo not in ("*", "+", "-", "?") or nc.agg not in ("+", "="):
        return None
    refs = []
    for access in nc.operands:
        if not _broadcast_access(nc, access, bound):
            return None
        refs.append(Ref(access.tensor))
    out_dtype = bound.dtypes[nc.out]
    if nc.combo == "?":
        # The comparison promotes its two operands as the contraction does; only the value
        # taken must already be in the output's dtype.
        if bound.dtypes[nc.operands[2].tensor] != out_dtype:
            return None
        return Select(Binary("==", refs[0], refs[1]), refs[2], Const(0))
    if any(bound.dtypes[a.tensor] != out_dtype for a in nc.operands):
        return None
    if nc.combo == "none":
        return refs[0]
    return Binary(nc.combo, refs[0], refs[1])


def _broadcast_access(nc: NormalContraction, access, bound: BoundProgram) -> bool:
    lead = len(nc.out_vars) - len(access.index)
    if lead < 0 or tuple(bound.shapes[access.tensor]) != access.sizes:
        return False
    for axis, (poly, size) in enumerate(zip(access.index, access.sizes)):
        out_axis = lead + axis
        if size == 1 and poly == Poly.constant(0):
            continue
        if poly != Poly.var(nc.out_vars[out_axis]) or size != nc.out_shape[out_axis]:
            return False
    return True


def _fusion_target(statement: Elementwise, bound: BoundProgram, kernels: list[KernelPlan],
                   producer: dict[str, int], root) -> int | None:
    shape = bound.shapes[statement.out]
    candidates = sorted(
        {producer[n] for n in statement.inputs() if n in producer and root(n) == n},
        reverse=True,
    )
    # The latest kernel too, though it produces none of the operands (siblings: softmax's
    # gradient computes D_O / S and D_O * E / (S * S) over the same cells): one pass over
    # the cells instead of two kernels.
    if kernels and len(kernels) - 1 not in candidates:
        candidates.insert(0, len(kernels) - 1)
    for index in candidates:
        kernel = kernels[index]
        if kernel.kind == "special" or kernel.shape != shape:
            continue
        produced_here = set(kernel.produced)
        ready = all(
            name in produced_here or producer.get(root(name), -1) < index
            for name in statement.inputs()
        )
        # Tensors produced here are read in registers at the same cell: they must not broadcast.
        same_cells = all(bound.shapes[n] == shape for n in statement.inputs() if n in produced_here)
        if ready and same_cells:
            return index
    return None
