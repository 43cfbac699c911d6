"""Row-fused kernels: a softmax, a log-softmax, a layer norm or a cross-entropy as one kernel
whose work-group (on a CPU: whose OpenMP iteration) makes every pass over a row.

:func:`gingham.compiler.fusion.plan` makes each pass over a tensor its own kernel. A softmax
over ``[N, C]`` is three: the row max; the sum of exponentials, storing them from its loop;
the division. Each reads or writes all N rows in device memory again. Here one work-group
takes a row through all of them (each reduction as :func:`reduction.row_pass` makes it, then
a barrier, the elementwise work on the row's cells side by side). What two passes read is
loaded once into registers (:func:`_row_cache`); the row's values (its max, its sum) pass
from one pass to the next in registers; what only the group's later passes read (a
softmax's exponentials) is computed again there, not stored (:func:`passes_of`)::

    softmax, [8192, 1024]: max; sum(exp(x - m)), storing exp; exp / sum
      -> "rows fused: 8192 rows of 1024 cells, a work-group of 256 a row, 4 of each row's
          elements a work-item held in registers (X), 3 passes a row: row reduction ...;
          then ..."  (max; sum(exp(x - m)); exp(x - m) / sum: X read once, nothing stored
          but the result)

A *row group* is a run of consecutive planned kernels over one domain D, whose rows are D's
leading axes and whose reductions run over its trailing ones:

* the first is a plain reduction of D (:func:`fusion.reduction_domain`) that keeps D's
  leading axes in order, ``M[n, 0 : N, 1] = >(X[n, c])``;
* each later one is a plain reduction of D keeping the same axes, or an elementwise kernel
  over D;
* each reads what an earlier one of the group wrote only at its own cells (a tensor of D's
  shape) or as row values (a cell per row, broadcast along the row), so a row's passes need
  nothing from another row.

A group that does not lower this way on a GPU (another schedule for a pass, local arrays of
one name and two types) keeps its kernels apart.

On the ``cpu`` device (C) a group is one OpenMP loop over rows, each pass an ``omp simd`` loop
along the row (:func:`lower_row_group_cpu`): the later passes find the row in the core's
cache, and what only the passes share stays in an array of the row. Stop 44 measured such a
loop no faster than the three kernels; it had taken :func:`passes_of`'s passes, whose third
computes a softmax's exponentials again, and an ``exp`` costs a CPU more than reading.
"""

from __future__ import annotations

import dataclasses
import math

from ..devices.base import DeviceInfo
from ..tile import dtypes as dt
from ..tile.shapes import BoundProgram
from . import kernel_ir as k
from .cell import CellStatement, pinned_declarations
from .fusion import KernelPlan, Plan, reduction_domain
from .lower import (LoweringContext, _epilogue, _kernel, _map_bottom_up, _one_element_loads,
                    _scalar_cell, cell_coordinates, compute_type, contraction_cell, index_type)
from .normalize import NormalContraction, narrow, pin
from .reduction import GROUP, ROW_MIN_EXTENT, RowCache, row_pass

#: Fewest rows a group needs: with fewer, a work-group a row leaves most of a GPU idle where
#: the split reductions spread each row over many.
MIN_ROWS = 256
#: Narrowest element of the rows a group fuses where a pass reads them from device memory.
#: On an H100 (8192 x 1024, `bench ops`) fusing took a float32 softmax from 64.5 to 41.7 us
#: and its backward from 99 to 59, but a bfloat16 one from 40 to 65 and 72 to 111 us: with
#: half the bytes a row, the passes in sequence leave too little in flight to hide the
#: latency of each. Rows held in registers (CACHE_REGISTERS) are read once, and fuse.
MIN_ITEMSIZE = 4
#: Most registers a work-item gives to the row elements it holds (:class:`RowCache`: slots
#: times tensors). A softmax over rows of 1024 holds 4 of its input; its gradient 4 of the
#: output and 4 of the output's gradient. On an H100 a hand-written softmax [8192, 1024]
#: took 26 us holding its row, 32 us reading it in each pass (float32; bfloat16 21 and 30).
CACHE_REGISTERS = 32
#: Most bytes of a row that a CPU row group keeps in arrays of its own (on the OpenMP
#: thread's stack, so in its core's L1 or L2 cache) in place of tensors only its passes read.
ROW_ARRAY_BYTES = 64 * 1024
#: Kernels a row group looks past for a further pass (:func:`row_groups`).
MAX_SKIPPED = 2


def row_groups(kernel_plan: Plan, bound: BoundProgram) -> list[list[int]]:
    """The row groups among ``kernel_plan``'s kernels, as lists of their positions (two or
    more each, in program order). A group also takes a pass that comes after kernels it
    does not need (at most MAX_SKIPPED of them): its kernel runs at its first pass's place,
    before those. A layer norm's gradient computes dweight and dbias (columns: no pass of a
    row) between its row statistics and dX::

        mean, rstd; dweight and dbias; dX  ->  [mean, rstd, dX]; dweight and dbias
    """
    kernels = kernel_plan.kernels
    groups: list[list[int]] = []
    taken: set[int] = set()
    for position in range(len(kernels)):
        if position in taken:
            continue
        rows = _rows_of(kernels[position], bound)
        if rows is None:
            continue
        group = [position]
        written: set[str] = set(kernels[position].stores)
        skipped_stores: set[str] = set()  # what the kernels left to run after the group write
        skipped = 0
        scan = position + 1
        while scan < len(kernels) and skipped <= MAX_SKIPPED:
            plan = kernels[scan]
            needs_skipped = {_root(name, kernel_plan) for name in plan.reads()} & skipped_stores
            if scan in taken:
                pass  # an earlier group's pass: it runs before this group
            elif not needs_skipped and _joins(plan, rows, written, kernel_plan, bound):
                written |= plan.stores
                group.append(scan)
            else:
                skipped_stores |= {_root(name, kernel_plan) for name in plan.stores}
                skipped += 1
            scan += 1
        if len(group) > 1:
            groups.append(group)
            taken.update(group)
    return groups


def _rows_of(plan: KernelPlan, bound: BoundProgram) -> tuple[tuple[int, ...], int] | None:
    """(D, how many leading axes make its rows) for a plain reduction of D over its trailing
    axes, over enough rows of ROW_MIN_EXTENT or more cells; else None."""
    if plan.kind != "contraction":
        return None
    found = reduction_domain(plan.contraction, bound) or _pick_domain(plan.contraction, bound)
    if found is None:
        return None
    domain, kept = found
    if not kept or list(kept) != sorted(kept):
        return None
    leading = max(kept) + 1
    if tuple(kept) != tuple(axis for axis in range(leading) if domain[axis] > 1):
        return None
    rows, length = math.prod(domain[:leading]), math.prod(domain[leading:])
    if rows < MIN_ROWS or length < ROW_MIN_EXTENT:
        return None
    return tuple(domain), leading


def _pick_domain(nc: NormalContraction | None, bound: BoundProgram
                 ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """:func:`fusion.reduction_domain` for a conditional sum along rows, cross-entropy's pick
    of each sample's class: every operand that the reduction variables index is read at each
    cell of one domain as a plain reduction reads it, the others only by the variables the
    output keeps (a value of the row, the sample's label)::

        P[n] = +(I[n, c] == T[n] ? X[n, c])   ->  ((N, C), (0,))
    """
    if (nc is None or nc.combo != "?" or nc.agg != "+" or nc.guards or nc.default is not None
            or not nc.always_reached):
        return None
    found = None
    for access in nc.operands:
        variables = {var for poly in access.index for var in poly.coeffs}
        if variables & set(nc.red_vars):
            alone = reduction_domain(dataclasses.replace(nc, combo="none", operands=(access,)),
                                     bound)
            if alone is None or found not in (None, alone):
                return None
            found = alone
        elif not variables <= set(nc.out_vars):
            return None
    return found


def _joins(plan: KernelPlan, rows: tuple[tuple[int, ...], int], written: set[str],
           kernel_plan: Plan, bound: BoundProgram) -> bool:
    """Whether ``plan`` may be the next pass of a row group over ``rows`` whose kernels so
    far store ``written``."""
    domain, leading = rows
    if plan.kind == "contraction":
        if _rows_of(plan, bound) != rows:
            return False
    elif plan.kind != "elementwise" or tuple(plan.shape) != domain:
        return False
    row_shape = domain[:leading] + (1,) * (len(domain) - leading)
    # A reduction's epilogue reads at the row's own cell whatever holds a cell a row (the
    # row's value under another shape: cross-entropy's picked logit, [N], beside [N, 1]).
    at_row = _epilogue_reads(plan) if plan.kind == "contraction" else set()
    for name in plan.reads():
        if _root(name, kernel_plan) not in written:
            continue  # written before the group: any cell of it is ready
        shape = tuple(bound.shapes[name])
        if name in at_row and math.prod(shape) == math.prod(row_shape):
            continue
        if (1,) * (len(domain) - len(shape)) + shape not in (domain, row_shape):
            return False
    return True


def _epilogue_reads(plan: KernelPlan) -> set[str]:
    """What a reduction pass reads only in its epilogue (at its output cell), not in the loop
    along the row."""
    nc = plan.contraction
    assert nc is not None
    in_loop = {access.tensor for access in nc.operands} | {s.operand for s in plan.siblings}
    for statement in plan.prologue:
        in_loop |= set(statement.inputs())
    return {name for statement in plan.elementwise for name in statement.inputs()} - in_loop


def passes_of(kernel_plan: Plan, group: list[int], bound: BoundProgram) -> list[KernelPlan]:
    """The group's plans as its passes: a tensor that a reduction's prologue computes and
    stores, that only later passes of the group read (not the program, not another kernel),
    is not stored; each pass that reads it computes it again from the prologue's statements
    (copies of the plans; ``kernel_plan`` is not changed). A softmax's exponentials are then
    not written, which on a GPU cost more than the second ``exp``::

        max; sum(T2 = exp(x - m)), storing T2; T2 / s  ->  ...; exp(x - m) / s

    Nor is a reduction's value for the row that only later passes read (the max and the sum
    above): :func:`lower_row_group` gives it them in registers.
    """
    kept = _needed_outside(kernel_plan, group, bound)
    plans = [dataclasses.replace(kernel_plan.kernels[i], stores=set(kernel_plan.kernels[i].stores),
                                 prologue=list(kernel_plan.kernels[i].prologue),
                                 elementwise=list(kernel_plan.kernels[i].elementwise))
             for i in group]
    for position, producer in enumerate(plans):
        for statement in list(producer.prologue):
            name = statement.out
            if name not in producer.stores or name in kept:
                continue
            chain = _chain(producer.prologue, name)
            for later in plans[position + 1:]:
                if name not in later.reads():
                    continue
                target = later.prologue if later.kind == "contraction" else later.elementwise
                known = {e.out for e in target}
                target[:0] = [e for e in chain if e.out not in known]
            producer.stores.discard(name)
        if producer.kind == "contraction":
            # A row's value (a max, a sum, an epilogue of them) that only later passes read
            # reaches them in registers (lower_row_group): not stored either.
            in_loop = {statement.out for statement in producer.prologue}
            producer.stores -= {name for name in producer.stores
                                if name not in in_loop and _root(name, kernel_plan) not in kept}
    return plans


def _needed_outside(kernel_plan: Plan, group: list[int], bound: BoundProgram) -> set[str]:
    """The buffers that a kernel outside ``group`` reads or the program returns: what the
    group's passes must leave in memory."""
    inside = set(group)
    needed = {_root(name, kernel_plan) for index, plan in enumerate(kernel_plan.kernels)
              if index not in inside for name in plan.reads()}
    return needed | {_root(name, kernel_plan) for name in bound.program.outputs}


def _root(name: str, kernel_plan: Plan) -> str:
    """The tensor whose buffer ``name`` shares (through reshapes)."""
    while name in kernel_plan.aliases:
        name = kernel_plan.aliases[name]
    return name


def _chain(statements: list, name: str) -> list:
    """The statements among ``statements`` (in order) that computing ``name`` needs."""
    needed = {name}
    chain = []
    for statement in reversed(statements):
        if statement.out in needed:
            chain.append(statement)
            needed |= set(statement.inputs())
    return chain[::-1]


def lower_row_group(plans: list[KernelPlan], contexts: list[LoweringContext],
                    names: list[str], bound: BoundProgram, info: DeviceInfo
                    ) -> k.Kernel | None:
    """One kernel for a row group on a GPU dialect: work-group ``rs_group`` makes each pass
    over row ``rs_group`` in a scope of its own, a barrier after each. None on another
    dialect (the C backend's is :func:`lower_row_group_cpu`), where a pass would read a row of
    a type narrower than MIN_ITEMSIZE that is not held in registers, or where a reduction is
    not a :func:`reduction.row_pass` or two passes declare one local array with two types."""
    if info.dialect not in ("opencl", "cuda"):
        return None
    rows = _rows_of(plans[0], bound)
    assert rows is not None
    domain, leading = rows
    count, length = math.prod(domain[:leading]), math.prod(domain[leading:])
    itype = index_type(math.prod(domain) + GROUP * 2)
    cache, loads = _row_cache(plans, contexts, domain, length, bound, itype)
    held = set(cache.arrays) if cache is not None else set()
    if any(bound.dtypes[name].itemsize < MIN_ITEMSIZE for plan in plans
           for name in plan.reads() - held if tuple(bound.shapes[name]) == domain):
        return None
    shared: dict[str, k.LocalArray] = {}
    passes: list[k.Stmt] = list(loads)
    schedules: list[str] = []
    # The values a reduction pass computes for its row that later passes read, by buffer: a
    # register of the group's scope each, assigned by every work-item at the pass's end.
    row_registers: dict[str, k.Var] = {}
    declared: list[k.Stmt] = []
    for position, (plan, ctx) in enumerate(zip(plans, contexts)):
        known_values = {name: row_registers[ctx.buffer(name)] for name in plan.reads()
                        if ctx.buffer(name) in row_registers}
        if plan.kind == "contraction":
            found = row_pass(plan, ctx, info, cache, known_values)
            if found is None:
                return None
            for array in found.shared:
                assert isinstance(array, k.LocalArray)
                known = shared.setdefault(array.name, array)
                if known != array:
                    return None
            body, schedule = list(found.body), found.schedule
            later = {later_ctx.buffer(name) for later_plan, later_ctx
                     in zip(plans[position + 1:], contexts[position + 1:])
                     for name in later_plan.reads()}
            exported: list[k.Stmt] = []
            for name, value in found.values.items():
                buffer = ctx.buffer(name)
                if buffer in later and buffer not in row_registers:
                    register = k.Var(f"rs_value{len(row_registers)}", value.dtype)
                    row_registers[buffer] = register
                    declared.append(k.Declare(register.name, register.dtype,
                                              k.Const(0, register.dtype)))
                    exported.append(k.Assign(register.name, value))
            finish = body[-1]  # the block where the values are registers
            assert isinstance(finish, k.Block) and finish.scoped
            body[-1] = dataclasses.replace(finish, stmts=finish.stmts + tuple(exported))
        else:
            flat = k.Var("rs_flat", itype)
            values = cache.values(ctx, k.Var(cache.slot, itype)) if cache is not None else {}
            values.update(known_values)
            each: list[k.Stmt] = [k.Declare("rs_flat", itype, _row_element(length, itype)),
                                  *_scalar_cell(plan, ctx, flat, itype, values)]
            if cache is None:
                body = [k.For("rs_c", k.Var("rs_lid", itype), length, k.block(*each),
                              step=GROUP)]
            else:
                body = [_slots(cache, length, itype, each)]
            schedule = f"the row's {length} cells side by side"
        passes += [k.Block(tuple(body), scoped=True), k.Barrier(global_memory=True)]
        schedules.append(schedule)
    merged = _merged_context(contexts)
    nest = k.block(*shared.values(), k.For(
        "rs_group", 0, count, k.For("rs_lid", 0, GROUP, k.block(*declared, *passes[:-1]),
                                    kind="local"),
        kind="group"))
    held_note = "" if cache is None else \
        f", {cache.slots} of each row's elements a work-item held in registers " \
        f"({', '.join(cache.held)})"
    schedule = (f"rows fused: {count} rows of {length} cells, a work-group of {GROUP} a row"
                f"{held_note}, {len(plans)} passes a row: " + "; then ".join(schedules))
    return _kernel(names[0], merged, nest, count * GROUP, schedule, local=GROUP)


def _merged_context(contexts: list[LoweringContext], dropped: frozenset[str] = frozenset()
                    ) -> LoweringContext:
    """One context for a group's kernel: every pass's tensors (but the ``dropped`` ones, which
    the kernel keeps in arrays of its own), each an output if any pass writes it, and every
    pass's helpers."""
    merged = contexts[0].fork()
    for ctx in contexts:
        for param in ctx.params.values():
            known = merged.params.get(param.name)
            if param.name not in dropped and (known is None or param.output):
                merged.params[param.name] = param
        merged.uses |= ctx.uses
    return merged


def _row_element(length: int, itype: str) -> k.Expr:
    """The flat index of cell ``rs_c`` of the work-group's row: ``rs_group * length + rs_c``."""
    start = k.BinOp("*", k.Var("rs_group", itype), k.Const(length, itype), itype)
    return k.BinOp("+", start, k.Var("rs_c", itype), itype)


def _row_cache(plans: list[KernelPlan], contexts: list[LoweringContext],
               domain: tuple[int, ...], length: int, bound: BoundProgram, itype: str
               ) -> tuple[RowCache | None, list[k.Stmt]]:
    """The tensors of the row group's domain that its passes read at their own cells and
    none writes, to hold in registers: those that two or more passes read, and those
    narrower than MIN_ITEMSIZE (within CACHE_REGISTERS, those read most first). Also the
    statements that load them, each work-item its slots of the row; None and no statements
    where none is.

        float rs_held0[4];
        for (rs_j = 0; rs_j < 4; rs_j++) { int rs_c = rs_lid + rs_j * 256;   // unrolled
                                           rs_held0[rs_j] = X[rs_group * 1024 + rs_c]; }
    """
    slots = math.ceil(length / GROUP)
    written = {ctx.buffer(name) for plan, ctx in zip(plans, contexts) for name in plan.stores}
    # By buffer (a reshape reads the same elements): the names that read it, and each pass's
    # context that reads it.
    names: dict[str, set[str]] = {}
    readers: dict[str, list[int]] = {}
    elsewhere: set[str] = set()  # read somewhere other than a pass's own cell
    for position, (plan, ctx) in enumerate(zip(plans, contexts)):
        own, other = _reads_by_cell(plan)
        elsewhere |= {ctx.buffer(name) for name in other}
        for name in own:
            buffer = ctx.buffer(name)
            if (tuple(ctx.shape(name)) == domain and buffer not in written
                    and buffer not in ctx.coordinates):
                names.setdefault(buffer, set()).add(name)
                if position not in readers.setdefault(buffer, []):
                    readers[buffer].append(position)
    chosen = sorted((buffer for buffer, seen in readers.items() if buffer not in elsewhere and (
        len(seen) > 1 or bound.dtypes[buffer].itemsize < MIN_ITEMSIZE)),
                    key=lambda buffer: (-len(readers[buffer]), buffer))
    chosen = chosen[:CACHE_REGISTERS // slots]
    if not chosen:
        return None, []
    cache = RowCache({name: f"rs_held{index}" for index, buffer in enumerate(chosen)
                      for name in sorted(names[buffer])}, slots, held=chosen)
    flat = _row_element(length, itype)
    loads: list[k.Stmt] = []
    stores: list[k.Stmt] = []
    for index, buffer in enumerate(chosen):
        array = f"rs_held{index}"
        ctx = contexts[readers[buffer][0]]  # a reader's: its params name the buffer
        name = min(names[buffer])
        loads.append(k.LocalArray(array, compute_type(ctx.dtype(name)), (slots,), "register"))
        stores.append(k.StoreLocal(array, (k.Var(cache.slot, itype),), ctx.load(name, flat)))
    loads.append(_slots(cache, length, itype, stores))
    return cache, loads


def _reads_by_cell(plan: KernelPlan) -> tuple[set[str], set[str]]:
    """The tensors a pass reads at its own cells (a reduction's operand and what its loop
    computes from, an elementwise pass's inputs), and those it reads elsewhere too (a gather's
    inputs, a reduction's epilogue at the row's cell, its default)."""
    own: set[str] = set()
    other: set[str] = set()
    reads = plan.reads()
    if plan.kind == "contraction":
        nc = plan.contraction
        assert nc is not None
        own |= {access.tensor for access in nc.operands}
        own |= {sibling.operand for sibling in plan.siblings}
        if nc.default is not None:
            other.add(nc.default)
        for statement in plan.prologue:
            (other if isinstance(statement, CellStatement) else own).update(statement.inputs())
        for statement in plan.elementwise:
            other.update(statement.inputs())
    else:
        for statement in plan.elementwise:
            (other if isinstance(statement, CellStatement) else own).update(statement.inputs())
    return own & reads, other & reads


def _slots(cache: RowCache, length: int, itype: str, each: list[k.Stmt]) -> k.Stmt:
    """``each`` for the work-item's slots of the row, unrolled (so that the held values stay
    registers), with ``rs_c`` the slot's cell of the row; guarded where the row is not a
    whole number of work-groups."""
    cell = k.BinOp("+", k.Var("rs_lid", itype),
                   k.BinOp("*", k.Var(cache.slot, itype), k.Const(GROUP, itype), itype), itype)
    work: k.Stmt = k.block(*each)
    if length % GROUP:
        work = k.If(k.BinOp("<", k.Var("rs_c", itype), k.Const(length, itype), "bool"), work)
    return k.For(cache.slot, 0, cache.slots, k.block(k.Declare("rs_c", itype, cell), work),
                 kind="unroll")


def lower_row_group_cpu(kernel_plan: Plan, group: list[int],
                        contexts: list[LoweringContext], names: list[str],
                        bound: BoundProgram) -> k.Kernel:
    """One kernel for a row group on the ``cpu`` device (C): each OpenMP iteration takes a
    row through every pass, each pass an ``omp simd`` loop along the row in a block of its
    own, so that the passes after the first find the row in the core's L1 or L2 cache.

    The passes are the group's kernels as planned (not :func:`passes_of`'s): a softmax's
    exponentials are kept, not computed twice, since on a CPU an ``exp`` costs more than
    keeping it. A tensor of the row that only the group's passes read, each at its own
    cells, lives in an array of the row on the thread's stack (:func:`_row_arrays`), not in
    memory; the rest the passes store and read back from memory that the same core has just
    written. A row's values (its max, its sum) are loaded once before an elementwise pass's
    loop. Softmax over 2048 x 1024 on 2 AVX-512 cores (C by hand): 0.90 ms as three kernels,
    0.68 ms a row at a time with the exponentials in memory, 0.63 ms with them in a row
    array, 0.90 ms computing them again::

        for (g = 0; g < 2048; g++) {                     // omp parallel for
            float rs_row0[1024];                         // the exponentials E
            { acc = -INF; for (i1 ...) acc = max(acc, X[g * 1024 + i1]);  M[g] = acc; }
            { acc = 0; for (i1 ...) { rs_row0[i1] = exp(X[..] - M[g]); acc += ...; } S[g] = acc; }
            { s_S = S[g]; for (c1 ...) Y[g * 1024 + c1] = rs_row0[c1] / s_S; } }
    """
    plans = [kernel_plan.kernels[i] for i in group]
    rows = _rows_of(plans[0], bound)
    assert rows is not None
    domain, leading = rows
    count, length = math.prod(domain[:leading]), math.prod(domain[leading:])
    itype = index_type(math.prod(domain) + 16)
    row = k.Var("g", itype)
    arrays = _row_arrays(kernel_plan, group, contexts, domain, length, bound)
    passes: list[k.Stmt] = [k.LocalArray(array, compute_type(bound.dtypes[buffer]), (length,),
                                         "register", align=64)
                            for buffer, array in arrays.items()]
    row_start = k.BinOp("*", row, k.Const(length, itype), itype)
    schedules: list[str] = []
    for plan, ctx in zip(plans, contexts):
        if plan.kind == "contraction":
            assert plan.contraction is not None
            nc = pin(narrow(plan.contraction))
            body: list[k.Stmt] = cell_coordinates(row, nc.out_shape, list(nc.out_vars), itype)
            body += pinned_declarations(nc, itype)
            cell_body, lanes = contraction_cell(plan, nc, ctx, row, itype, may_use_lanes=True)
            body += cell_body
            order = "in vector lanes" if lanes else "serial"
            schedules.append(f"a reduction over the row ({order})")
        else:
            body = _elementwise_along_row(plan, ctx, domain, leading, row, itype)
            schedules.append("the row's cells (omp simd)")
        body = [_in_row_arrays(statement, arrays, row_start) for statement in body]
        passes.append(k.Block(tuple(body), scoped=True))
    merged = _merged_context(contexts, dropped=frozenset(arrays))
    loop = k.For("g", 0, count, k.block(*passes), kind="thread")
    kept = f", {', '.join(arrays)} in row arrays" if arrays else ""
    schedule = (f"rows fused: {count} rows of {length} cells, an OpenMP iteration a row"
                f"{kept}, {len(plans)} passes a row: " + "; then ".join(schedules))
    return _kernel(names[0], merged, loop, count, schedule)


def _row_arrays(kernel_plan: Plan, group: list[int], contexts: list[LoweringContext],
                domain: tuple[int, ...], length: int, bound: BoundProgram) -> dict[str, str]:
    """The buffers of ``domain``'s shape that a CPU row group keeps in row arrays of
    ``length``, each with its array's name: those a pass writes that only the group's passes
    read, each at its own cells (not the program's outputs, not another kernel), of a type
    that is its own compute type (a half type's rounding stays where the program has it),
    within ROW_ARRAY_BYTES."""
    outside = _needed_outside(kernel_plan, group, bound)
    written: list[str] = []
    elsewhere: set[str] = set()
    for position, ctx in zip(group, contexts):
        plan = kernel_plan.kernels[position]
        elsewhere |= {ctx.buffer(name) for name in _reads_by_cell(plan)[1]}
        written += sorted({ctx.buffer(name) for name in plan.stores} - set(written))
    chosen: dict[str, str] = {}
    spent = 0
    for buffer in written:
        dtype = bound.dtypes[buffer]
        if (buffer in outside or buffer in elsewhere or tuple(bound.shapes[buffer]) != domain
                or compute_type(dtype) != dt.dtype_name(dtype)):
            continue
        if spent + length * dtype.itemsize > ROW_ARRAY_BYTES:
            break
        spent += length * dtype.itemsize
        chosen[buffer] = f"rs_row{len(chosen)}"
    return chosen


def _in_row_arrays(statement: k.Stmt, arrays: dict[str, str], row_start: k.Expr) -> k.Stmt:
    """``statement`` with every load and store of a buffer in ``arrays`` an access to its
    row array, at the flat index less ``row_start`` (the row's first element)."""
    if not arrays:
        return statement

    def local(index: k.Expr) -> tuple[k.Expr, ...]:
        return (k.BinOp("-", index, row_start, row_start.dtype),)

    def expr(e: k.Expr) -> k.Expr:
        return _map_bottom_up(e, lambda node: k.LoadLocal(arrays[node.buffer], local(
            node.index), node.dtype) if isinstance(node, k.Load) and node.buffer in arrays
            else node)

    def leaf(s: k.Stmt) -> k.Stmt:
        if isinstance(s, k.Store):
            if s.buffer in arrays:
                return k.StoreLocal(arrays[s.buffer], local(expr(s.index)), expr(s.value))
            return k.Store(s.buffer, expr(s.index), expr(s.value))
        if isinstance(s, k.Declare) and s.init is not None:
            return dataclasses.replace(s, init=expr(s.init))
        if isinstance(s, k.Assign):
            return dataclasses.replace(s, value=expr(s.value))
        if isinstance(s, k.StoreLocal):
            return dataclasses.replace(s, index=tuple(expr(i) for i in s.index),
                                       value=expr(s.value))
        return s

    return k.map_leaves(statement, leaf, expr)


def _elementwise_along_row(plan: KernelPlan, ctx: LoweringContext, domain: tuple[int, ...],
                           leading: int, row: k.Var, itype: str) -> list[k.Stmt]:
    """An elementwise pass over row ``row`` of ``domain``: the row's leading coordinates
    decoded once, its one-element tensors and its row values (a tensor of a cell a row)
    loaded once, then an ``omp simd`` loop over the row's cells."""
    length = math.prod(domain[leading:])
    body, scalars = _one_element_loads(plan, ctx, itype)
    per_row = math.prod(domain[:leading])
    for tensor in sorted(plan.reads()):
        if tensor in scalars or math.prod(ctx.shape(tensor)) != per_row:
            continue
        register = f"s_{tensor}"
        ctype = compute_type(ctx.dtype(tensor))
        body.append(k.Declare(register, ctype, ctx.load(tensor, row)))
        scalars[tensor] = k.Var(register, ctype)
    lead_names = [f"r{axis}" for axis in range(leading)]
    names = [f"c{axis}" for axis in range(leading, len(domain))]
    body += cell_coordinates(row, tuple(domain[:leading]), lead_names, itype)
    cell: list[k.Expr] = [k.Var(n, itype) for n in lead_names + names]
    flat = k.Var("ge", itype)
    per_cell: list[k.Stmt] = [k.Declare("ge", itype, k.BinOp(
        "+", k.BinOp("*", row, k.Const(length, itype), itype), k.Var("gl", itype), itype))]
    per_cell += cell_coordinates(k.Var("gl", itype), tuple(domain[leading:]), names, itype)
    per_cell += _epilogue(plan, ctx, cell, flat, itype, {}, scalars, exact_cell=True)
    body.append(k.For("gl", 0, length, k.block(*per_cell), kind="simd"))
    return body
