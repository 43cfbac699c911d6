"""Grouping a bound program's statements into kernels.

Every contraction and special operation starts a kernel. An elementwise statement joins the
kernel that produces one of its operands when it iterates over the same cells (same shape) and
all its other operands exist before that kernel runs; there it becomes an epilogue computed in
registers, per output cell; it may also join the latest kernel when that iterates over the
same cells and its operands exist before it. Otherwise it starts an elementwise kernel, which
later elementwise statements can join in turn, so a chain ``relu(x * a + b) * c`` is one kernel and
``C = A @ B; D = relu(C + bias)`` is one kernel. A tensor is written to memory only if it is an
output of the program or another kernel reads it.

A statement whose cells are the kernel's up to axes of length 1 (``[C]`` and ``[C, 1, 1]``)
joins the kernel computing one of its operands too if nothing it reads broadcasts: an
optimizer's update of a batch-norm weight is computed with the sum that is its gradient.

Reduction chains (batch norm, softmax, cross-entropy and their gradients) are dominated by
passes over one large tensor, so three more rules cut them:

* **Recomputation.** A cheap elementwise tensor (arithmetic only, no transcendental call) that
  reads at most two tensors of its own shape from memory, is no output, and that every reader
  reads at its own cells, is never stored: each kernel that reads it computes it again in
  registers (:func:`recomputable`). Batch norm's centred input ``T2 = X - mean`` costs one
  subtraction per reader instead of a write and a read per reader.
* **Reductions of one domain share a kernel.** A plain reduction (one operand read at the
  domain's own cells, no guards) computes its operand's chain of recomputed statements per
  assignment (``KernelPlan.prologue``) instead of reading a stored tensor, and joins an earlier
  plain reduction over the same domain whose inputs are ready as a ``Sibling``: one pass and
  one kernel give batch norm backward's ``sum(dy)``, ``sum(dy * xhat)`` and ``sum(dy * x)``.
* **A reduction takes over its producer.** When the kernel just before a plain reduction is an
  elementwise kernel over its domain computing its operand (softmax's ``exp(x - max)``, too
  dear to recompute), its statements become the reduction's prologue and are stored from the
  reduction's loop, which visits every cell of the domain once.

An ``index(X, axis)`` that the program does not return is no kernel and no buffer: its value
at a cell is that cell's coordinate along ``axis``, which every reader computes from the flat
index it reads at (``Plan.coordinates``, ``lower.LoweringContext.load``). Cross-entropy's
``index(logits, 1)`` would otherwise be an ``[N, C]`` int32 tensor written and read again.

    plan(bound) -> [KernelPlan(kind="contraction", outputs=["C", "D"], stores={"D"}, ...)]
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from ..lru import LRU
from ..tile.bounds import bind_contraction
from ..tile import ir as tir
from ..tile.ir import Binary, Const, Contraction, Elementwise, Expr, Poly, Ref, Select, Special
from ..tile.shapes import BoundProgram
from .cell import MAX_RECOMPUTED_TERMS, CellStatement, as_cell_statement
from .normalize import NormalContraction, narrow, normalize, pin


@dataclass(frozen=True)
class Sibling:
    """A further reduction in a contraction kernel: ``out`` aggregates (``agg``) ``operand``
    over the same domain as the kernel's contraction, whose operand it reads at the same
    cells (both are plain reductions of tensors of one shape to the same output cells).

        Sibling("D_T5_sum", "+", "D_T5")   # beside D_T6_sum = +(D_T6[x0, x1, x2, x3])
    """

    out: str
    agg: str
    operand: str


@dataclass
class KernelPlan:
    """One kernel to generate: what it iterates over and what it computes, in order.

    A contraction kernel may also compute, per assignment of its reduction, the elementwise
    statements its operands need (``prologue``, at the operand's cells: recomputed ones, or
    those of an elementwise kernel it took over, stored from there if needed), and further
    reductions over the same domain (``siblings``)."""

    kind: str  # "contraction", "elementwise" or "special"
    shape: tuple[int, ...]  # the cells it iterates over
    contraction: NormalContraction | None = None
    special: Special | None = None
    elementwise: list[Elementwise] = field(default_factory=list)
    #: The names it reads whose values are coordinates (``Plan.coordinates``), not memory.
    coordinate_reads: set[str] = field(default_factory=set)
    stores: set[str] = field(default_factory=set)
    prologue: list[Elementwise] = field(default_factory=list)
    siblings: list[Sibling] = field(default_factory=list)

    @property
    def produced(self) -> list[str]:
        names = []
        if self.contraction is not None:
            names.append(self.contraction.out)
            names.extend(s.out for s in self.siblings)
            names.extend(e.out for e in self.prologue)
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
            names |= {s.operand for s in self.siblings}
            if self.contraction.default is not None:
                names.add(self.contraction.default)
            for statement in self.prologue:
                names |= set(statement.inputs())
            names -= produced
        if self.special is not None and self.special.op not in ("index", "shape"):
            # index and shape need only the tensor's shape, never its values: a tensor that
            # only they name (cross-entropy's log-probabilities in its gradient) is not computed.
            names |= set(self.special.tensors)
        for statement in self.elementwise:
            names |= set(statement.inputs()) - produced
        return names - self.coordinate_reads


@dataclass
class Plan:
    kernels: list[KernelPlan]
    aliases: dict[str, str]  # reshape outputs share their source's buffer
    #: ``index`` specials computed by their readers (never stored), by output name.
    coordinates: dict[str, Special] = field(default_factory=dict)


def plan(bound: BoundProgram) -> Plan:
    kernels: list[KernelPlan] = []
    producer: dict[str, int] = {}  # tensor -> index of the kernel that computes it
    aliases: dict[str, str] = {}
    program = bound.program
    statements = _as_kernel_statements(bound)
    coordinates = _coordinates(bound, statements)
    virtual = recomputable(bound, statements, set(coordinates))
    definition = {s.out: s for s, _ in statements
                  if isinstance(s, (Elementwise, CellStatement))}

    def root(name: str) -> str:
        while name in aliases:
            name = aliases[name]
        return name

    def closure(names) -> tuple[list[Elementwise], list[str]]:
        """The recomputed statements behind ``names`` (in program order) and the tensors
        they, with ``names``, read from memory."""
        chain: dict[str, Elementwise] = {}
        leaves: list[str] = []

        def visit(name: str) -> None:
            if root(name) in coordinates:
                return  # computed from the reader's own coordinates: nothing to read
            if name in virtual:
                if name not in chain:
                    for inner in definition[name].inputs():
                        visit(inner)
                    chain[name] = definition[name]
            elif name not in leaves:
                leaves.append(name)

        for name in names:
            visit(name)
        return list(chain.values()), leaves

    for statement, nc in statements:
        if isinstance(statement, Special) and statement.op == "reshape":
            aliases[statement.out] = statement.tensors[0]
            continue
        if statement.out in virtual or statement.out in coordinates:
            continue  # computed again by every kernel that reads it
        if _is_copy(statement, bound) and root(statement.expr.name) not in virtual:
            # ``D_T = D_O`` (autodiff passes cotangents on so): the same buffer, no kernel.
            aliases[statement.out] = statement.expr.name
            continue
        if isinstance(statement, Contraction):
            operands = [a.tensor for a in nc.operands]
            prologue, reads = closure(operands)
            target = _sibling_target(nc, reads, bound, kernels, producer, root)
            if target is None and _absorbs_producer(nc, bound, kernels, producer, root):
                # The elementwise kernel just before computes the operand (softmax's
                # exp(x - max)): the reduction computes it per assignment and stores it.
                target = len(kernels) - 1
                kernels[target] = KernelPlan("contraction", bound.shapes[statement.out],
                                             contraction=nc,
                                             prologue=kernels[target].elementwise)
            elif target is None:
                kernels.append(KernelPlan("contraction", bound.shapes[statement.out],
                                          contraction=nc, prologue=prologue))
                target = len(kernels) - 1
            else:
                kernel = kernels[target]
                kernel.siblings.append(Sibling(nc.out, nc.agg, operands[0]))
                known = {e.out for e in kernel.prologue}
                kernel.prologue += [e for e in prologue if e.out not in known]
            producer[statement.out] = target
        elif isinstance(statement, Special):
            kernels.append(KernelPlan("special", bound.shapes[statement.out], special=statement))
            producer[statement.out] = len(kernels) - 1
        else:
            recomputed, reads = closure(statement.inputs())
            gathered = set().union(*(e.gathered() for e in recomputed + [statement]
                                     if isinstance(e, CellStatement)))
            target = _fusion_target(bound.shapes[statement.out], reads, bound, kernels,
                                    producer, root, gathered)
            if target is None:
                kernels.append(KernelPlan("elementwise", bound.shapes[statement.out]))
                target = len(kernels) - 1
            kernel = kernels[target]
            known = {e.out for e in kernel.elementwise}
            kernel.elementwise += [e for e in recomputed if e.out not in known] + [statement]
            producer[statement.out] = target

    for kernel in kernels:
        kernel.coordinate_reads = {name for name in kernel.reads() if root(name) in coordinates}
    # A tensor is stored if the program returns it or another kernel reads it.
    needed_in_memory = {root(name) for name in program.outputs}
    for index, kernel in enumerate(kernels):
        for name in kernel.reads():
            name = root(name)
            if producer.get(name) != index:
                needed_in_memory.add(name)
    assert not needed_in_memory & virtual, "a recomputed tensor is read from memory"
    for kernel in kernels:
        kernel.stores = {n for n in kernel.produced if n in needed_in_memory}
    return Plan([k for k in kernels if k.stores], aliases, coordinates)


def _coordinates(bound: BoundProgram, statements) -> dict[str, Special]:
    """The ``index`` specials whose readers compute them: all but those the program returns
    (directly or through reshapes, which share the buffer)."""
    sources = {s.out: s.tensors[0] for s, _ in statements
               if isinstance(s, Special) and s.op == "reshape"}
    returned = set()
    for name in bound.program.outputs:
        returned.add(name)
        while name in sources:
            name = sources[name]
            returned.add(name)
    return {s.out: s for s, _ in statements
            if isinstance(s, Special) and s.op == "index" and s.out not in returned}


def _as_kernel_statements(bound: BoundProgram) -> list[tuple[object, NormalContraction | None]]:
    """The program's statements, each contraction with its normal form; contractions that
    compute one elementwise value per cell become :class:`Elementwise` statements, and those
    whose reduction the guards pin to one assignment per cell :class:`CellStatement`s."""
    return [_as_kernel_statement(statement, bound) if isinstance(statement, Contraction)
            else (statement, None) for statement in bound.program.statements]


#: Contraction -> (what its kernel statement depends on, the kernel statement): compiling a
#: program asks twice (:func:`gingham.compiler.linearity.split_sums`, then :func:`plan`, on a
#: rewrite that keeps most statements), and normalising is most of both.
_KERNEL_STATEMENTS: LRU[int, tuple] = LRU(4096)
_KERNEL_STATEMENTS_LOCK = threading.Lock()  # the background tuner compiles on its own thread


def _as_kernel_statement(statement: Contraction, bound: BoundProgram
                         ) -> tuple[object, NormalContraction | None]:
    """One contraction as :func:`_as_kernel_statements` gives it, remembered per statement
    object, the dimensions and the shapes and types of the tensors it names."""
    names = [statement.out, *(a.tensor for a in statement.operands)]
    if statement.default is not None:
        names.append(statement.default)
    depends = (statement, bound.dims, [(bound.shapes[n], bound.dtypes[n]) for n in names])
    with _KERNEL_STATEMENTS_LOCK:
        known = _KERNEL_STATEMENTS.get(id(statement))
    # The entry holds its statement, so the id is not reused while it lives; the rest is
    # compared by value (``dims`` by identity first: a rewrite of a program keeps it).
    if known is not None and known[0][0] is statement and (
            known[0][1] is bound.dims or known[0][1] == bound.dims) and known[0][2] == depends[2]:
        return known[1]
    nc = normalize(bind_contraction(statement, bound))
    result: tuple[object, NormalContraction | None] = (statement, nc)
    expr = _as_elementwise(nc, bound)
    if expr is not None:
        # A copy or product with broadcasting (autodiff's gradients of a sum and of a
        # max): elementwise, so it streams in vector loops and fuses with neighbours.
        result = (Elementwise(statement.out, expr, statement.loc), None)
    else:
        # The max-pool gradient of a non-overlapping window: one assignment per cell,
        # so it streams too and cheap readers recompute it instead of reading it.
        pinned = pin(narrow(nc))
        cell = as_cell_statement(statement.out, pinned) if pinned.pinned else None
        if cell is not None:
            result = (cell, None)
    with _KERNEL_STATEMENTS_LOCK:
        _KERNEL_STATEMENTS[id(statement)] = (depends, result)
    return result


#: Most tensors of its own shape a recomputed statement may read from memory: each reader then
#: reads at most two tensors where it would have read one, and the write is saved.
MAX_RECOMPUTED_READS = 2
#: Most operations in a recomputed statement's chain (the work each reader repeats).
MAX_RECOMPUTED_OPS = 48


def recomputable(bound: BoundProgram, statements, coordinates: set[str] = frozenset()
                 ) -> set[str]:
    """Elementwise tensors that are never stored but computed again by every reader.

    A tensor qualifies if it is no output, its chain of recomputed statements is cheap
    (arithmetic, comparisons, selects, casts, min/max and squares: no ``exp`` or ``log``, which
    cost more than the memory they would save on a CPU), reads at most
    ``MAX_RECOMPUTED_READS`` tensors of its shape from memory, and every reader reads it at its
    own cells: an elementwise statement of its shape (a copy included) or a plain reduction
    (:func:`reduction_domain`). Batch norm's training gradient::

        T2 = X - T2_h0;  T3 = pow(T2, 2.0);  T4[c] = +(T3[n, c, y, x])  ->  T2, T3 recomputed

    ``coordinates`` (:func:`_coordinates`) cost a reader no memory read.
    """
    shapes = bound.shapes
    outputs = set(bound.program.outputs)
    readers_ok: dict[str, bool] = {}
    for statement, nc in statements:
        if isinstance(statement, CellStatement):
            own = statement.own_cell_reads()
            for name in statement.inputs():
                readers_ok[name] = readers_ok.get(name, True) and name in own
        elif isinstance(statement, Elementwise):
            shape = shapes[statement.out]
            for name in statement.inputs():
                ok = shapes[name] == shape
                readers_ok[name] = readers_ok.get(name, True) and ok
        elif isinstance(statement, Contraction):
            plain = reduction_domain(nc, bound) is not None
            for access in nc.operands:
                readers_ok[access.tensor] = readers_ok.get(access.tensor, True) and plain
            if nc.default is not None:
                readers_ok[nc.default] = False
        elif statement.op not in ("index", "shape"):  # those two read no values
            for name in statement.tensors:
                readers_ok[name] = False
    virtual: set[str] = set()
    reads: dict[str, set[str]] = {}  # recomputed tensor -> tensors of its shape it reads
    ops: dict[str, int] = {}
    for statement, _ in statements:
        if (not isinstance(statement, (Elementwise, CellStatement))
                or statement.out in outputs):
            continue
        name, shape = statement.out, shapes[statement.out]
        if isinstance(statement, CellStatement):
            if not readers_ok.get(name, True) or statement.cost() > MAX_RECOMPUTED_TERMS:
                continue
            count = statement.cost()
        else:
            if not readers_ok.get(name, True) or not _cheap(statement.expr):
                continue
            count = _count_ops(statement.expr)
        inputs = statement.inputs()
        if _is_copy(statement, bound) and inputs[0] not in virtual:
            continue  # a copy of a stored tensor is an alias, cheaper still
        memory = set()
        for source in inputs:
            if source in virtual:
                memory |= reads[source]
                count += ops[source]
            elif shapes[source] == shape and source not in coordinates:
                memory.add(source)
        if len(memory) <= MAX_RECOMPUTED_READS and count <= MAX_RECOMPUTED_OPS:
            virtual.add(name)
            reads[name], ops[name] = memory, count
    return virtual


def reduction_domain(nc: NormalContraction | None, bound: BoundProgram
                     ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """For a plain reduction (one operand read at each cell of its own shape, no guards, no
    default, every output cell reached): the operand's shape and, in output order, the
    operand axes that the output keeps (its axes longer than 1). Two reductions with the
    same domain read the same cells and write their results in the same flat order; else None.

        T4[0, c, 0, 0 : 1, C, 1, 1] = +(T3[n, c, y, x])   ->  ((N, C, H, W), (1,))
    """
    if (nc is None or nc.combo != "none" or len(nc.operands) != 1 or nc.guards
            or nc.default is not None or nc.agg == "=" or not nc.always_reached):
        return None
    access = nc.operands[0]
    if tuple(bound.shapes[access.tensor]) != access.sizes:
        return None
    names = []
    for poly in access.index:
        terms = poly.coeffs
        if poly.const != 0 or len(terms) != 1 or next(iter(terms.values())) != 1:
            return None
        names.append(next(iter(terms)))
    if len(set(names)) != len(names):
        return None
    kept = []
    for var, size in zip(nc.out_vars, nc.out_shape):
        if var in names and access.sizes[names.index(var)] != size:
            # An output axis that indexes a longer operand axis reads a slice of it, not
            # all of it: `T8[i, j : 3, 1] = +(T7[i, j])` of a (3, 2) T7 reads column 0 only.
            return None
        if size == 1:
            continue  # a kept axis of length 1 (keepdim), or a reduced one
        if var not in names:
            return None
        kept.append(names.index(var))
    for axis, name in enumerate(names):
        if name in nc.red_vars and nc.red_ranges[name] != (0, access.sizes[axis] - 1):
            return None
    return access.sizes, tuple(kept)


def _sibling_target(nc: NormalContraction, reads: list[str], bound: BoundProgram,
                    kernels: list[KernelPlan], producer: dict[str, int], root) -> int | None:
    """An earlier contraction kernel over the same domain (:func:`reduction_domain`) that can
    compute ``nc`` too: everything ``nc`` reads exists before it runs."""
    domain = reduction_domain(nc, bound)
    if domain is None:
        return None
    ready_after = max((producer.get(root(n), -1) for n in reads), default=-1)
    for index in range(len(kernels) - 1, ready_after, -1):
        kernel = kernels[index]
        if (kernel.kind == "contraction"
                and reduction_domain(kernel.contraction, bound) == domain):
            return index
    return None


def _absorbs_producer(nc: NormalContraction, bound: BoundProgram, kernels: list[KernelPlan],
                      producer: dict[str, int], root) -> bool:
    """Whether plain reduction ``nc`` can take over the latest kernel, an elementwise kernel
    over its domain that computes its operand: each assignment of the reduction visits one
    cell of the domain once, so the kernel's statements become the reduction's prologue, their
    stored tensors written from there (one pass over the domain instead of two)."""
    if not kernels or reduction_domain(nc, bound) is None:
        return False
    operand = nc.operands[0].tensor
    latest = kernels[-1]
    return (latest.kind == "elementwise" and root(operand) == operand
            and producer.get(operand) == len(kernels) - 1
            and latest.shape == tuple(bound.shapes[operand]))


# One instruction each (floor: a softmax's shift, nn.functional._softmax_shift).
_CHEAP_CALLS = ("min", "max", "abs", "floor", "ceil", "round", "sign", "stop_gradient")


def _cheap(expr: Expr) -> bool:
    """Arithmetic a reader can repeat for less than a memory pass costs: no transcendental
    function (a ``pow`` only with the exponent 1 or 2, which lowering makes a product)."""
    if isinstance(expr, tir.Call):
        if expr.fn == "pow":
            from .lower import constant_value  # lower imports this module

            if constant_value(expr.args[1]) not in (1.0, 2.0):
                return False
            return _cheap(expr.args[0])
        if expr.fn not in _CHEAP_CALLS:
            return False
        return all(_cheap(a) for a in expr.args)
    if isinstance(expr, (tir.Unary, tir.Cast)):
        return _cheap(expr.operand)
    if isinstance(expr, tir.Binary):
        return _cheap(expr.left) and _cheap(expr.right)
    if isinstance(expr, tir.Select):
        return _cheap(expr.cond) and _cheap(expr.if_true) and _cheap(expr.if_false)
    return True  # Ref, Const, DimValue


def _count_ops(expr: Expr) -> int:
    if isinstance(expr, tir.Call):
        return 1 + sum(_count_ops(a) for a in expr.args)
    if isinstance(expr, (tir.Unary, tir.Cast)):
        return 1 + _count_ops(expr.operand)
    if isinstance(expr, tir.Binary):
        return 1 + _count_ops(expr.left) + _count_ops(expr.right)
    if isinstance(expr, tir.Select):
        return 1 + sum(_count_ops(e) for e in (expr.cond, expr.if_true, expr.if_false))
    return 0


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


def _fusion_target(shape: tuple[int, ...], inputs: list[str], bound: BoundProgram,
                   kernels: list[KernelPlan], producer: dict[str, int], root,
                   gathered: set[str] = frozenset()) -> int | None:
    """The kernel an elementwise statement of ``shape`` reading ``inputs`` from memory (or
    registers) joins, or None. It may join a kernel over as many cells in another shape (the
    same cells in the same row-major order: an optimizer's update of a ``[C]`` weight after the
    ``[C, 1, 1]`` sum that is its gradient; the sum of a strided gradient's phases,
    ``[N, 16, 2, 16, 2, C]``, read through its reshape as ``[N, 32, 32, C]``) when it reads
    nothing that broadcasts, every tensor at the kernel's flat index. Tensors in ``gathered``
    are read at other cells (a :class:`CellStatement`'s window): they must be in memory
    before the kernel runs."""
    cells = math.prod(shape)
    producers = {producer[root(n)] for n in inputs if root(n) in producer}
    candidates = sorted(producers, reverse=True)
    # The latest kernel too, though it produces none of the operands (siblings: softmax's
    # gradient computes D_O / S and D_O * E / (S * S) over the same cells): one pass over
    # the cells instead of two kernels.
    if kernels and len(kernels) - 1 not in candidates:
        candidates.insert(0, len(kernels) - 1)
    for index in candidates:
        kernel = kernels[index]
        if kernel.kind == "special" or math.prod(kernel.shape) != cells:
            continue
        if kernel.shape != shape and (index not in producers or any(
                math.prod(bound.shapes[n]) not in (cells, 1) for n in inputs)):
            # Only into the kernel computing an operand (a statement that joins the latest
            # kernel can delay a later reduction that would share it), and a broadcast
            # operand would be indexed by the kernel's coordinates.
            continue
        # The prologue's values exist per assignment of the reduction, not per output cell.
        in_registers = set(kernel.produced) - {e.out for e in kernel.prologue}
        ready = all((root(n) in in_registers and n not in gathered)
                    or producer.get(root(n), -1) < index for n in inputs)
        # Tensors produced here are read in registers at the same cell (through a reshape,
        # the same flat cell): they must not broadcast.
        unbroadcast = all(math.prod(bound.shapes[n]) == cells for n in inputs
                          if root(n) in in_registers)
        if ready and unbroadcast:
            return index
    return None
