"""Split reductions: contractions with few output cells and long reductions, on GPUs.

A batch-norm statistic (``Mean[c] = +(X[n, c, y, x])`` over half a million values per channel),
a loss or a broadcast gradient has far fewer output cells than a GPU has threads, so one
work-item per cell leaves the device idle. Here each cell's reduction box is flattened and cut
into S slices; a work-group reduces one (slice, cell) pair — its work-items stride through the
slice, then combine their partial results in local memory by a fixed tree — and writes one
partial; a second kernel combines each cell's S partials in slice order and applies the usual
finalisation and fused epilogue. Every aggregation but ``=`` works this way (sum, product, max,
min, with the reached flags of the valid-index rule), and the result is deterministic. A plan's
sibling reductions (:class:`gingham.compiler.fusion.Sibling`) ride along: each has its own
partials, tree and combination in the same two kernels.

    M[c : C] = +(X[n, c, h, w])   with 128 cells, 524288 values each, on 132 compute units
    -> k_partial: 1056 work-groups of 256 (8 slices per cell), k: 128 work-items

Where neighbouring cells are neighbouring addresses (a channels-last statistic), a work-item
reduces 4 of them and a work-group up to 128 (:func:`cell_vector`, :func:`cell_lanes`): the
operands read at the assignment's cell move as one 8- or 16-byte vector each, and the reduction
coordinates are decoded once and then stepped (:func:`step_reduction_coordinates`), not
divided out of the flat index every element. A combine of many partials per cell gives each
cell up to 32 work-items and a tree (:func:`_combine_tree`), so that 64 cells with 1056
partials each are combined on 8 multiprocessors, not in one work-group.

    M[c : C] = +(X[n, h, w, c])   bfloat16, 128 channels, 524288 values each, 132 units
    -> k_partial: 1055 work-groups of 32 x 4 channels x 8 rows, each row 63 assignments, one
       8-byte load each; k: 16 work-groups of 8 channels x 32 rows, 33 partials a row

Many cells, each reducing a row read along the row (a softmax's max over [8192, 1024]), use
the same loop and tree with one slice: a work-group a cell, whose first work-item finishes the
cell in the same kernel (:func:`row_reduction`; :func:`row_pass` gives the statements alone,
for the passes of a row-fused kernel, :mod:`gingham.compiler.rows`).

The C backend has its own form (:func:`split_reduction_cpu`, below): slices over OpenMP
threads, each with the neighbouring cells of a channels-last statistic in ``omp simd`` lanes,
and the same combine kernel.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..devices.base import DeviceInfo
from . import kernel_ir as k
from .fusion import KernelPlan
from .cell import CellStatement
from .lower import (LoweringContext, _epilogue, _from_lane, _kernel, _vector_dtype,
                    accumulate_plan, accumulator_rows, affine_expr, aggregate, cell_coordinates,
                    compute_type, finalize, hoisted_guards, identity_value, index_type,
                    _fused_note, needs_reached_flag, row_major_strides, sibling_results,
                    update_run)
from .normalize import NormalContraction
from .tiling_gpu import flat_address

GROUP = 256  # work-items per work-group; the local-memory tree halves it eight times
#: Work-groups of partials per compute unit the slices aim at (fewer where the reduction is
#: short: ROW_ASSIGNMENTS).
GROUPS_PER_UNIT = 8
#: Fewest assignments a work-item reduces (each slice also pays a tree and writes partials).
#: On an H200 (bf16 ResNet-9 step, GINGHAM_DEBUG=2, each launch timed synchronised) the 76
#: split-reduction kernels went from 3.75 ms to 2.49 with 4 cells a work-item and the tree
#: combine (k101_O25_partial 0.274 -> 0.138 ms, its combine 0.098 -> 0.034, k106_O19's
#: combine 0.121 -> 0.039); 16 here, or 4 groups a unit, measured no better (in a noisier run).
ROW_ASSIGNMENTS = 4


def split_reduction(plan: KernelPlan, ctx: LoweringContext, name: str,
                    info: DeviceInfo) -> list[k.Kernel] | None:
    """Two kernels (partials, then combine) for a few-cell, long-reduction contraction, or None
    when one work-item per cell already fills the device."""
    nc = plan.contraction
    if plan.kind != "contraction" or nc is None or nc.agg == "=" or not nc.red_vars:
        return None
    cells = math.prod(nc.out_shape)
    extent = nc.reduction_size
    units = max(info.compute_units, 1)
    if cells == 0 or cells >= units * 64 or extent < 8 * GROUP:
        return None
    width = cell_vector(nc)
    lanes = cell_lanes(nc, width)
    blocks = math.ceil(cells / (lanes * width))
    rows = GROUP // lanes  # work-items per cell in a work-group
    slices = max(1, min(math.ceil(units * GROUPS_PER_UNIT / blocks),
                        math.ceil(extent / (ROW_ASSIGNMENTS * rows))))
    chunk = math.ceil(extent / slices)
    slices = math.ceil(extent / chunk)  # no slice empty
    ctype = compute_type(ctx.dtype(nc.out))
    values, reached, siblings = _partial_buffers(plan, ctx, name, ctype, slices * cells)
    partial_ctx = ctx.fork()
    first = _partials(plan, nc, partial_ctx, f"{name}_partial", cells, slices, chunk, ctype,
                      values, reached, siblings, lanes, width)
    if slices >= COMBINE_TREE_MIN_SLICES:
        second = _combine_tree(plan, ctx, name, cells, slices, ctype, values, reached, siblings)
    else:
        second = _combine(plan, ctx, name, cells, slices, ctype, values, reached, siblings)
    return [first, second]


def _partial_buffers(plan: KernelPlan, ctx: LoweringContext, name: str, ctype: str, size: int
                     ) -> tuple[k.Scratch, k.Scratch | None, list]:
    """The scratch buffers of a split reduction's ``size`` partials: the values, the reached
    flags (None when the aggregation needs none) and one more values buffer per sibling, as
    (accumulator, aggregation, compute type, buffer)."""
    values = k.Scratch(f"{name}_partials", ctype, size)
    reached = (k.Scratch(f"{name}_reached", "int32", size)
               if needs_reached_flag(plan.contraction) else None)
    siblings = []
    for index, sibling in enumerate(plan.siblings):
        sibling_type = compute_type(ctx.dtype(sibling.out))
        siblings.append((f"acc_{sibling.out}", sibling.agg, sibling_type,
                         k.Scratch(f"{name}_partials{index + 1}", sibling_type, size)))
    return values, reached, siblings


#: Work-items side by side in a work-group when neighbouring cells are neighbouring addresses
#: (see :func:`cell_lanes`): a warp.
CELL_LANES = 32
#: Neighbouring cells one work-item reduces when they are neighbouring addresses (see
#: :func:`cell_vector`): its same-cell operands are read as one vector each.
CELL_VECTOR = 4


def _unit_stride_reads(nc: NormalContraction) -> bool:
    """Whether every operand is read at stride 0 or 1 along the innermost output variable,
    one at stride 1: neighbouring cells are then neighbouring addresses."""
    if not nc.out_vars:
        return False
    innermost = nc.out_vars[-1]
    reads = False
    for access in nc.operands:
        address = flat_address(access)
        if address is None:
            return False
        coefficient = address.coeffs.get(innermost, 0)
        if coefficient not in (0, 1):
            return False  # strided along the cells: one cell per work-group reads it as well
        reads = reads or coefficient == 1
    return reads


def cell_vector(nc: NormalContraction) -> int:
    """How many neighbouring output cells one work-item reduces: CELL_VECTOR when the operands
    are read at unit stride along the innermost output variable and its length is a multiple
    of CELL_VECTOR (a work-item's cells then differ only in that variable), else 1.

    A channels-last bfloat16 statistic with one cell a work-item has a warp load 32 x 2
    bytes; with 4 cells a work-item each of its loads is one 8-byte vector, and a warp moves
    256 bytes: whole 128-byte lines, a quarter of the load instructions and of the index
    arithmetic (and of a fused pooling gradient's tap) per element.
    """
    if not nc.out_shape or nc.out_shape[-1] % CELL_VECTOR:
        return 1
    return CELL_VECTOR if _unit_stride_reads(nc) else 1


def cell_lanes(nc: NormalContraction, width: int = 1) -> int:
    """How many work-items of a work-group reduce neighbouring cells side by side (``width``
    cells each, :func:`cell_vector`): up to CELL_LANES when the operands are read at unit
    stride along the innermost output variable, else 1.

    A channels-last batch-norm statistic ``M[c] = +(X[n, h, w, c])`` reads X with stride C
    along its reduction: one cell per work-group makes a warp's 32 loads touch 32 cache lines.
    With 32 cells side by side (``lane = lid % 32``, ``row = lid / 32``) the same loads are
    one line, and the rows of the work-group stride through the reduction together. With 4
    cells a work-item, 64 cells take 16 lanes (a warp: two rows of 256 bytes each), and 8
    channels take 2 (a warp's 16 rows read 16 neighbouring assignments: 256 bytes again).
    """
    cells = math.prod(nc.out_shape)
    if width == 1 and (cells < CELL_LANES or not nc.out_vars
                       or nc.out_shape[-1] < CELL_LANES):
        return 1
    if not _unit_stride_reads(nc):
        return 1
    lanes = CELL_LANES
    while lanes > 1 and lanes * width > cells:
        lanes //= 2
    return lanes


def reduction_coordinates(nc: NormalContraction, flat: k.Expr, itype: str) -> list[k.Stmt]:
    """Declare the reduction variables at a flat index into the reduction box (row-major).

        x0 in [0, 32), x1 in [0, 32), x2 in [1, 33): int x0 = r / 1024; ... int x2 = r % 32 + 1;
    """
    extent = nc.reduction_size
    decode: list[k.Stmt] = []
    stride = extent
    for var in nc.red_vars:
        lo, hi = nc.red_ranges[var]
        size = hi - lo + 1
        stride //= size
        value: k.Expr = flat
        if stride != 1:
            value = k.BinOp("/", value, k.Const(stride, itype), itype)
        if size != extent // stride:
            value = k.BinOp("%", value, k.Const(size, itype), itype)
        if lo:
            value = k.BinOp("+", value, k.Const(lo, itype), itype)
        decode.append(k.Declare(var, itype, value))
    return decode


def step_reduction_coordinates(nc: NormalContraction, step: int, itype: str) -> list[k.Stmt]:
    """Advance the reduction variables (declared by :func:`reduction_coordinates`) by ``step``
    along the flat reduction index: ``step``'s digits in the box's mixed radix are added
    variable by variable, innermost first, each carrying at most 1 into the next. A loop
    that strides through the box then decodes its start once, not every element with a
    division and a remainder per variable.

        x2 in [0, 32), x1 in [0, 32), step 8:
        x2 = x2 + 8; bool rs_carry2 = x2 > 31; x2 = rs_carry2 ? x2 - 32 : x2;
        x1 = rs_carry2 ? x1 + 1 : x1; bool rs_carry1 = x1 > 31; ...; x0 = rs_carry1 ? ...
    """
    stmts: list[k.Stmt] = []
    rest = step
    carry: k.Expr | None = None
    variables = list(nc.red_vars)
    for position in range(len(variables) - 1, -1, -1):
        var = variables[position]
        lo, hi = nc.red_ranges[var]
        size = hi - lo + 1
        outermost = position == 0
        digit = rest if outermost else rest % size
        rest //= size
        x = k.Var(var, itype)
        if digit == 0 and carry is None:
            continue  # this variable keeps its value; the next may still have a digit
        value: k.Expr = k.BinOp("+", x, k.Const(digit, itype), itype) if digit else x
        if carry is not None:
            value = k.Select(carry, k.BinOp("+", x, k.Const(digit + 1, itype), itype), value,
                             itype)
        stmts.append(k.Assign(var, value))
        if outermost:
            break
        flag = f"rs_carry{position}"
        stmts.append(k.Declare(flag, "bool", k.BinOp(">", x, k.Const(hi, itype), "bool")))
        carry = k.Var(flag, "bool")
        stmts.append(k.Assign(var, k.Select(carry, k.BinOp("-", x, k.Const(size, itype), itype),
                                            x, itype)))
    return stmts


def _combine_pair(agg: str, a: k.Expr, a_hit: k.Expr | None, b: k.Expr, b_hit: k.Expr | None,
                  ctype: str) -> k.Expr:
    """``a`` aggregated with ``b``; with flags, a side that reached nothing is skipped."""
    both = aggregate(agg, a, b, ctype)
    if a_hit is None:
        return both
    return k.Select(a_hit, k.Select(b_hit, both, a, ctype), b, ctype)


def _local_tree(arrays: list[tuple[str, str, str]], hits: str | None, copies: int, lanes: int,
                rows: int, itype: str) -> list[k.Stmt]:
    """The fixed tree that combines a work-group's rows in local memory: deterministic, and
    log2(rows) barriers. ``arrays`` are (local array, aggregation, type), each holding
    ``copies`` blocks of GROUP values (copy ``j`` of work-item ``lid`` at ``j * GROUP + lid``,
    ``lid = row * lanes + lane``); ``hits`` holds the first array's reached flags (int32), or
    is None. Afterwards row 0 holds each lane's result.

        for (w = rows / 2; w; w /= 2) { if (rs_row < w) V[lid] = V[lid] + V[lid + w * lanes];
                                        barrier; }
    """
    v = lambda n: k.Var(n, itype)  # noqa: E731 - a local shorthand
    c = lambda x: k.Const(x, itype)  # noqa: E731
    stmts: list[k.Stmt] = [k.Barrier()]
    width = rows // 2
    while width:
        step: list[k.Stmt] = []
        for copy in range(copies):
            mine_index: k.Expr = v("rs_lid") if copy == 0 else \
                k.BinOp("+", v("rs_lid"), c(copy * GROUP), itype)
            other_index = k.BinOp("+", mine_index, c(width * lanes), itype)
            for position, (array, agg, ctype) in enumerate(arrays):
                mine = k.LoadLocal(array, (mine_index,), ctype)
                other = k.LoadLocal(array, (other_index,), ctype)
                if position or hits is None:
                    step.append(k.StoreLocal(array, (mine_index,),
                                             _combine_pair(agg, mine, None, other, None, ctype)))
                    continue
                my_hit = k.BinOp("!=", k.LoadLocal(hits, (mine_index,), "int32"),
                                 k.Const(0, "int32"), "bool")
                other_hit = k.BinOp("!=", k.LoadLocal(hits, (other_index,), "int32"),
                                    k.Const(0, "int32"), "bool")
                step.append(k.StoreLocal(array, (mine_index,),
                                         _combine_pair(agg, mine, my_hit, other, other_hit,
                                                       ctype)))
                step.append(k.StoreLocal(hits, (mine_index,),
                                         k.Cast("int32", k.BinOp("||", my_hit, other_hit,
                                                                 "bool"))))
        stmts.append(k.If(k.BinOp("<", v("rs_row"), c(width), "bool"), k.block(*step)))
        stmts.append(k.Barrier())
        width //= 2
    return stmts


def _warp_tree(arrays: list[tuple[str, str, str, str]], warp: int, rows: int, itype: str
               ) -> list[k.Stmt]:
    """:func:`_local_tree` for a work-group of ``rows`` work-items a cell on CUDA: each warp
    combines its lanes' partials by shuffles, lane 0 of each leaves the warp's in local
    memory, and warp 0 combines those the same way: two barriers instead of log2(rows).
    ``arrays`` are (register array, local array, aggregation, type); afterwards element 0 of
    each local array holds the cell's result, as the tree leaves it. On an H100, a softmax
    over [8192, 1024] written by hand took 26.4 us this way, 28.1 us by the tree.

        float rs_w = rs_acc[0];  rs_w = rs_w + __shfl_xor_sync(~0u, rs_w, 16); ... 1
        if (rs_lid % 32 == 0) rs_values[rs_lid / 32] = rs_w;  barrier;
        if (rs_lid < 32) { rs_w = rs_lid < 8 ? rs_values[rs_lid] : 0; ... xor 4, 2, 1;
                           if (rs_lid == 0) rs_values[0] = rs_w; }  barrier;
    """
    lid = k.Var("rs_lid", itype)
    c = lambda x: k.Const(x, itype)  # noqa: E731 - a local shorthand
    warps = rows // warp

    def combine(distance: int) -> list[k.Stmt]:
        steps: list[k.Stmt] = []
        while distance:
            for index, (_, _, agg, ctype) in enumerate(arrays):
                mine = k.Var(f"rs_w{index}", ctype)
                other = k.Call("warp_shuffle_xor", (mine, k.Const(distance, "int32")), ctype)
                steps.append(k.Assign(mine.name, aggregate(agg, mine, other, ctype)))
            distance //= 2
        return steps

    stmts: list[k.Stmt] = [k.Declare(f"rs_w{index}", ctype,
                                     k.LoadLocal(register, (c(0),), ctype))
                           for index, (register, _, _, ctype) in enumerate(arrays)]
    stmts += combine(warp // 2)
    stmts.append(k.If(k.BinOp("==", k.BinOp("%", lid, c(warp), itype), c(0), "bool"), k.block(
        *[k.StoreLocal(array, (k.BinOp("/", lid, c(warp), itype),),
                       k.Var(f"rs_w{index}", ctype))
          for index, (_, array, _, ctype) in enumerate(arrays)])))
    stmts.append(k.Barrier())
    last = [k.Assign(f"rs_w{index}", k.Select(
        k.BinOp("<", lid, c(warps), "bool"), k.LoadLocal(array, (lid,), ctype),
        k.Const(identity_value(agg, ctype), ctype), ctype))
        for index, (_, array, agg, ctype) in enumerate(arrays)]
    last += combine(warps // 2)
    last.append(k.If(k.BinOp("==", lid, c(0), "bool"), k.block(
        *[k.StoreLocal(array, (c(0),), k.Var(f"rs_w{index}", ctype))
          for index, (_, array, _, ctype) in enumerate(arrays)])))
    stmts.append(k.If(k.BinOp("<", lid, c(warp), "bool"), k.block(*last)))
    stmts.append(k.Barrier())
    return stmts


def _vector_reads(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext, width: int
                  ) -> tuple[list[str], dict[str, int] | None, int]:
    """The tensors a work-item of ``width`` neighbouring cells reads as one vector each at an
    assignment (:func:`cell_vector`), and the flat address of its first cell's element as
    (coefficients, constant); ``[], None, 0`` when none is.

    They are the tensors read at the assignment's operand cell (the first operand's access,
    which the prologue computes at): same-cell reads of the prologue and the siblings, and the
    contraction's operands whose every access is that one, of a type that moves as vectors.
    The address must step by 1 along the innermost output variable and be a multiple of
    ``width`` at the first cell (every other coefficient and the constant are), so the vector
    is aligned.
    """
    if width == 1 or not nc.operands:
        return [], None, 0
    access = nc.operands[0]
    address = flat_address(access)
    innermost = nc.out_vars[-1]
    if address is None or address.coeffs.get(innermost) != 1:
        return [], None, 0
    if any(c % width for var, c in address.coeffs.items() if var != innermost) \
            or address.const % width:
        return [], None, 0
    size = math.prod(access.sizes)
    produced = {statement.out for statement in plan.prologue}
    candidates: list[str] = []
    for statement in plan.prologue:
        names = statement.own_cell_reads() if isinstance(statement, CellStatement) else \
            statement.inputs()
        candidates += sorted(names)
    candidates += [sibling.operand for sibling in plan.siblings]
    # A tensor that an operand reads elsewhere too (``X[n, c] * X[n + 1, c]``) is loaded per
    # cell: ``given`` replaces every operand of that tensor.
    other = {a.tensor for a in nc.operands
             if a.index != access.index or a.sizes != access.sizes}
    candidates += [a.tensor for a in nc.operands]
    chosen: list[str] = []
    for tensor in candidates:
        if tensor in chosen or tensor in produced or tensor in other:
            continue
        if math.prod(ctx.shape(tensor)) != size or _vector_dtype(ctx, tensor) is None:
            continue
        chosen.append(tensor)
    return chosen, dict(address.coeffs), address.const


def _partials(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext, name: str,
              cells: int, slices: int, chunk: int, ctype: str, values: k.Scratch | None,
              reached: k.Scratch | None, siblings: list, lanes: int = 1,
              width: int = 1, cached: "RowCache | None" = None,
              row_values: dict[str, k.Expr] | None = None,
              warp: int = 0) -> "k.Kernel | RowPass":
    """Work-group (slice, block of ``lanes * width`` neighbouring cells), work-item (row,
    lane): the lane's ``width`` cells, the rows striding through the slice together; then a
    tree over the rows in local memory, and row 0 writes each cell's partial. Without
    ``values`` (one slice, a work-group a cell: :func:`row_pass`) no kernel: the statements,
    with row 0 finishing the cell instead (finalisation, siblings and the fused epilogue);
    there ``cached`` names operands a row-fused kernel holds in registers (:class:`RowCache`),
    and the loop is unrolled over their slots; ``row_values`` (:func:`row_pass`); ``warp``:
    the width of a CUDA warp, whose lanes then combine by shuffles (:func:`_warp_tree`).

        float rs_acc[4]; ...; int x0 = (start + row) / 1024; ...     // decoded once
        for (rs_r = start + row; rs_r < end; rs_r += 8) {
            *((ushort4*)&x_X[0]) = *((const ushort4*)&X[o0 + 131072 * x0 + ...]);
            for (l = 0; l < 4; l++) { int o0 = rs_first + l; float acc = rs_acc[l];
                                      acc = acc + from_bits(x_X[l]); rs_acc[l] = acc; }
            x2 = x2 + 8; ...                                           // stepped
        }
    """
    extent = nc.reduction_size
    rows = GROUP // lanes
    span = lanes * width  # cells a work-group
    blocks = math.ceil(cells / span)
    biggest = max([slices * cells, extent + GROUP * 2] +
                  [math.prod(a.sizes) for a in nc.operands])
    itype = index_type(biggest * 2 + 16)
    v = lambda n: k.Var(n, itype)  # noqa: E731 - a local shorthand
    c = lambda x: k.Const(x, itype)  # noqa: E731
    body: list[k.Stmt] = [
        k.Declare("rs_block", itype, k.BinOp("%", v("rs_group"), c(blocks), itype)),
        k.Declare("rs_slice", itype, k.BinOp("/", v("rs_group"), c(blocks), itype)),
        k.Declare("rs_lane", itype, k.BinOp("%", v("rs_lid"), c(lanes), itype)),
        k.Declare("rs_row", itype, k.BinOp("/", v("rs_lid"), c(lanes), itype)),
        # The first of the work-item's cells.
        k.Declare("rs_cell", itype, k.BinOp("*", k.BinOp(
            "+", k.BinOp("*", v("rs_block"), c(lanes), itype), v("rs_lane"), itype),
            c(width), itype)),
    ]
    innermost = nc.out_vars[-1] if nc.out_vars else ""
    # With several cells a work-item they differ only in the innermost output variable
    # (cell_vector): the others are the first cell's; the innermost is ``rs_first + l``.
    names = list(nc.out_vars) if width == 1 else list(nc.out_vars[:-1]) + ["rs_first"]
    body += cell_coordinates(v("rs_cell"), nc.out_shape, names, itype)
    body.append(k.Declare("rs_start", itype, k.BinOp("*", v("rs_slice"), c(chunk), itype)))
    end = k.BinOp("+", v("rs_start"), c(chunk), itype)
    body.append(k.Declare("rs_end", itype, k.Select(k.BinOp("<", end, c(extent), "bool"), end,
                                                    c(extent), itype)))
    # One register array per accumulator (``acc``, the siblings', the reached flag), a slot
    # per cell of the work-item.
    flagged = needs_reached_flag(nc)  # the split form keeps the flags in ``reached``
    flag = "hit" if flagged else None
    arrays = ["rs_acc"] + [f"rs_acc{i}" for i in range(1, len(siblings) + 1)]
    arrays.append("rs_hit" if flagged else "")
    accumulators = accumulator_rows(plan, nc, ctx, arrays, local=True, flag=flag)
    lane = v("l")
    init: list[k.Stmt] = []
    for row in accumulators:
        body.append(k.LocalArray(row.array, row.dtype, (width,), "register"))
        init.append(row.store(lane, k.Const(row.identity, row.register_type())))
    body.append(k.For("l", 0, width, k.block(*init), kind="unroll"))
    # The same-cell operands of the work-item's cells as one vector each, per assignment.
    vectors, coeffs, const = _vector_reads(plan, nc, ctx, width)
    given: dict[str, k.Expr] = {}
    loads: list[k.Stmt] = []
    if vectors:
        assert coeffs is not None
        first = {("rs_first" if var == innermost else var): coefficient
                 for var, coefficient in coeffs.items()}
        body.append(k.Declare("rs_vector", itype, c(0)))
        loads.append(k.Assign("rs_vector", affine_expr(first, const, itype)))
        for tensor in vectors:
            vtype = _vector_dtype(ctx, tensor)
            body.append(k.LocalArray(f"x_{tensor}", vtype, (width,), "register",
                                     align=width * (2 if vtype == "uint16" else 4)))
            loads.append(k.CopyLocal(f"x_{tensor}", (k.Const(0, itype),), ctx.param(tensor),
                                     (v("rs_vector"),), width, vtype))
            given[tensor] = _from_lane(ctx, tensor, lane)
    if cached is not None:
        given.update(cached.values(ctx, v(cached.slot)))
    given.update(row_values or {})
    # The reduction variables at the row's first assignment, then stepped.
    body += reduction_coordinates(nc, k.BinOp("+", v("rs_start"), v("rs_row"), itype), itype)
    per_cell: list[k.Stmt] = []
    if width > 1:
        per_cell.append(k.Declare(innermost, itype, k.BinOp("+", v("rs_first"), lane, itype)))
    per_cell += [k.Declare(row.register, row.register_type(), row.load(lane))
                 for row in accumulators]
    per_cell.append(accumulate_plan(plan, nc, ctx, ctype, itype, flag, given=given))
    per_cell += [row.store(lane, k.Var(row.register, row.register_type()))
                 for row in accumulators]
    start = k.BinOp("+", v("rs_start"), v("rs_row"), itype)
    if cached is not None:
        # Assignment rs_row + j * rows is slot j of the row's cached registers: the loop is
        # unrolled so that every slot is a register.
        assert not loads, "a row pass reads no vectors (a cell a work-group)"
        work: k.Stmt = k.For("l", 0, width, k.block(*per_cell), kind="unroll")
        if extent % rows:
            assignment = k.BinOp("+", start, k.BinOp("*", v(cached.slot), c(rows), itype), itype)
            work = k.If(k.BinOp("<", assignment, v("rs_end"), "bool"), work)
        loop: k.Stmt = k.For(cached.slot, 0, cached.slots, k.block(
            work, *step_reduction_coordinates(nc, rows, itype)), kind="unroll")
    else:
        step = k.block(*loads, k.For("l", 0, width, k.block(*per_cell), kind="unroll"),
                       *step_reduction_coordinates(nc, rows, itype))
        loop = k.For("rs_r", start, v("rs_end"), step, step=rows)
    in_range = k.BinOp("<", v("rs_cell"), c(cells), "bool")
    if cells % span:  # the last block's spare lanes reduce nothing (but meet every barrier)
        loop = k.If(in_range, loop)
    body.append(loop)
    # The rows' partials to local memory (slot j * GROUP + lid), and the tree over the rows.
    # OpenCL wants local arrays at the kernel's outermost scope: declared before the loops.
    shared: list[k.Stmt] = []
    tree: list[tuple[str, str, str]] = []
    hits: str | None = None
    aggregations = [nc.agg] + [agg for _, agg, _, _ in siblings]
    copy: list[k.Stmt] = []
    for index, row in enumerate(accumulators):
        array = f"rs_values{index or ''}" if not row.flag else "rs_hits"
        shared.append(k.LocalArray(array, row.dtype, (width * GROUP,), "shared"))
        slot = k.BinOp("+", k.BinOp("*", lane, c(GROUP), itype), v("rs_lid"), itype)
        copy.append(k.StoreLocal(array, (slot,), k.LoadLocal(row.array, (lane,), row.dtype)))
        if row.flag:
            hits = array
        else:
            tree.append((array, aggregations[index], row.dtype))
    if warp and width == 1 and lanes == 1 and hits is None and values is None:
        registers = [row.array for row in accumulators if not row.flag]
        body += _warp_tree([(register, *entry) for register, entry in zip(registers, tree)],
                           warp, rows, itype)
    else:
        body.append(k.For("l", 0, width, k.block(*copy), kind="unroll"))
        body += _local_tree(tree, hits, width, lanes, rows, itype)
    if values is None:
        return _row_pass(plan, ctx, body, shared, tree, hits, ctype, siblings, itype,
                         row_values)
    # Row 0 holds each cell's partial of the slice: slot slice * cells + cell.
    outputs = [values.name] + [buffer.name for _, _, _, buffer in siblings]
    write: list[k.Stmt] = []
    target = k.BinOp("+", k.BinOp("+", k.BinOp("*", v("rs_slice"), c(cells), itype),
                                  v("rs_cell"), itype), lane, itype)
    source = k.BinOp("+", k.BinOp("*", lane, c(GROUP), itype), v("rs_lane"), itype)
    for (array, _, dtype), buffer in zip(tree, outputs):
        write.append(k.Store(buffer, target, k.LoadLocal(array, (source,), dtype)))
        ctx.params[buffer] = k.Param(buffer, dtype, output=True)
    if reached is not None:
        write.append(k.Store(reached.name, target, k.LoadLocal("rs_hits", (source,), "int32")))
        ctx.params[reached.name] = k.Param(reached.name, "int32", output=True)
    writer = k.BinOp("==", v("rs_row"), c(0), "bool")
    if cells % span:
        writer = k.BinOp("&&", writer, in_range, "bool")
    body.append(k.If(writer, k.For("l", 0, width, k.block(*write), kind="unroll")))
    groups = slices * blocks
    nest = k.block(*shared, k.For("rs_group", 0, groups,
                                  k.For("rs_lid", 0, GROUP, k.block(*body), kind="local"),
                                  kind="group"))
    params = tuple(sorted(ctx.params.values(), key=lambda p: (p.output, p.name)))
    scratch = _scratch(values, reached, siblings)
    side = f" ({span} neighbouring cells a work-group)" if span > 1 else ""
    each = f"{width} cells" if width > 1 else "a cell"
    vectored = f"; vector loads of {width}: {', '.join(vectors)}" if vectors else ""
    schedule = (f"split reduction: {slices} slices x {cells} cells{side}, {rows} work-items "
                f"on {each} each reducing up to {math.ceil(chunk / rows)} of {extent} "
                f"assignments (coordinates stepped){vectored}, tree in local memory"
                f"{_fused_note(plan)}")
    return k.Kernel(name, params, nest, k.Launch((groups * GROUP,), (GROUP,)), schedule,
                    flops=2 * cells * extent, uses=frozenset(ctx.uses), scratch=scratch)


#: Fewest assignments a cell needs for :func:`row_reduction` (a work-group of GROUP a cell).
ROW_MIN_EXTENT = 128
#: The lanes of a CUDA warp, which combine a row's partials by shuffles (:func:`_warp_tree`).
WARP = 32


def row_reduction(plan: KernelPlan, ctx: LoweringContext, name: str,
                  info: DeviceInfo) -> list[k.Kernel] | None:
    """One kernel, a work-group a cell, for a reduction along rows: a softmax's max and sum,
    a loss's log-sum-exp, a layer norm's statistics, a matrix-vector product.

    With a work-item a cell, neighbouring work-items walk rows a row apart: every load of a
    warp touches as many cache lines as it has lanes (a softmax over 8192 x 1024 ran at 0.06x
    PyTorch on an H100). Here the GROUP work-items of a cell stride through its row together,
    neighbouring work-items reading neighbouring addresses, then combine in local memory by
    the split reductions' tree, and the first finishes the cell. None where one work-item a
    cell already reads neighbouring addresses side by side (the cells run along the fastest
    axis), where no operand runs along the innermost reduction variable, or where rows are
    shorter than ROW_MIN_EXTENT.

        M[n : 8192] = >(X[n, c]), c < 1024  ->  8192 work-groups of 256, 4 assignments each
    """
    found = row_pass(plan, ctx, info)
    if found is None:
        return None
    nc = plan.contraction
    cells, extent = math.prod(nc.out_shape), nc.reduction_size
    nest = k.block(*found.shared, k.For(
        "rs_group", 0, cells, k.For("rs_lid", 0, GROUP, k.block(*found.body), kind="local"),
        kind="group"))
    kernel = _kernel(name, ctx, nest, cells * GROUP, found.schedule, local=GROUP)
    return [dataclasses.replace(kernel, flops=2 * cells * extent)]


@dataclass
class RowPass:
    """A cell's reduction by the work-group ``rs_group`` (work-item ``rs_lid``): the local
    arrays to declare at the kernel's outermost scope, and each work-item's statements: the
    partial loop along the row, the tree, and row 0 finishing the cell (finalisation,
    siblings, fused epilogue, stores)."""

    shared: list[k.Stmt]
    body: list[k.Stmt]
    schedule: str
    #: In a row group (``row_values`` given): the registers holding the values the pass
    #: computes for the cell (its result, siblings, epilogue), which every work-item has, in
    #: the scoped block that ends ``body``.
    values: dict[str, k.Expr] = dataclasses.field(default_factory=dict)


@dataclass
class RowCache:
    """Tensors that a row-fused kernel (:mod:`gingham.compiler.rows`) reads once into
    registers: element ``rs_lid + j * GROUP`` of the work-group's row in slot ``j`` of the
    tensor's register array, which every pass then reads instead of device memory.

        float rr_X[4];  rr_X[j] = X[rs_group * 1024 + rs_lid + j * 256];   // j < 4, unrolled
    """

    arrays: dict[str, str]  # tensor -> its register array (reshapes of one buffer share it)
    slots: int  # elements of the row a work-item holds
    held: list[str]  # the buffers held, an array each in order
    slot: str = "rs_j"  # the unrolled loop variable that indexes the arrays

    def values(self, ctx: LoweringContext, slot: k.Expr) -> dict[str, k.Expr]:
        """Each cached tensor's value at ``slot``, in its compute type."""
        return {tensor: k.LoadLocal(array, (slot,), compute_type(ctx.dtype(tensor)))
                for tensor, array in self.arrays.items()}


def row_pass(plan: KernelPlan, ctx: LoweringContext, info: DeviceInfo,
             cached: RowCache | None = None, row_values: dict[str, k.Expr] | None = None
             ) -> RowPass | None:
    """:func:`row_reduction`'s work for ``plan`` (None where it does not apply), to make a
    kernel of or a pass of a row-fused kernel (:mod:`gingham.compiler.rows`).

    In a row group, ``cached`` holds tensors of the row in registers and ``row_values`` the
    values that earlier passes computed for the row (tensor -> register); every work-item
    then finishes the cell, so that later passes have its values too (``RowPass.values``),
    and row 0 stores them."""
    nc = plan.contraction
    if plan.kind != "contraction" or nc is None or nc.agg == "=" or not nc.red_vars:
        return None
    cells = math.prod(nc.out_shape)
    if cells == 0 or nc.reduction_size < ROW_MIN_EXTENT or not _reads_along_rows(nc):
        return None
    ctype = compute_type(ctx.dtype(nc.out))
    accumulators = [(f"acc_{s.out}", s.agg, compute_type(ctx.dtype(s.out)), None)
                    for s in plan.siblings]
    found = _partials(plan, nc, ctx, "", cells, 1, nc.reduction_size, ctype, None, None,
                      accumulators, cached=cached, row_values=row_values,
                      warp=WARP if info.dialect == "cuda" else 0)
    assert isinstance(found, RowPass)
    return found


def _reads_along_rows(nc: NormalContraction) -> bool:
    """Whether an operand runs along the innermost reduction variable (stride 1) and none
    that varies along the row also runs along the innermost output axis longer than 1 (where
    work-items a cell apart would read neighbouring addresses already). An operand the same
    for the whole row (cross-entropy's label of a sample) does not count."""
    innermost_red = nc.red_vars[-1]
    wide = [var for var, size in zip(nc.out_vars, nc.out_shape) if size > 1]
    innermost_out = wide[-1] if wide else None
    along = False
    for access in nc.operands:
        address = flat_address(access)
        if address is None:
            return False
        if not any(address.coeffs.get(var, 0) for var in nc.red_vars):
            continue  # one value for the whole row
        if innermost_out is not None and address.coeffs.get(innermost_out, 0) in (1, -1):
            return False
        along = along or address.coeffs.get(innermost_red, 0) == 1
    return along


def _row_pass(plan: KernelPlan, ctx: LoweringContext, body: list[k.Stmt],
              shared: list[k.Stmt], tree: list[tuple[str, str, str]], hits: str | None,
              ctype: str, siblings: list, itype: str,
              row_values: dict[str, k.Expr] | None) -> RowPass:
    """The partials' loop and tree of one slice (``body``), then row 0 finishing its cell
    from the tree's results; in a row group (``row_values`` not None) every work-item
    finishes it and row 0 stores."""
    nc = plan.contraction
    v = lambda n: k.Var(n, itype)  # noqa: E731 - a local shorthand
    finish: list[k.Stmt] = [k.Declare("acc", ctype, k.LoadLocal(tree[0][0], (v("rs_lane"),),
                                                                 ctype))]
    for (array, _, dtype), (accumulator, _, _, _) in zip(tree[1:], siblings):
        finish.append(k.Declare(accumulator, dtype, k.LoadLocal(array, (v("rs_lane"),), dtype)))
    hit: k.Expr | None = None
    if hits is not None:
        hit = k.BinOp("!=", k.LoadLocal(hits, (v("rs_lane"),), "int32"), k.Const(0, "int32"),
                      "bool")
    registers: dict[str, k.Expr] = {}
    finish += _finish(plan, ctx, v("rs_cell"), itype, ctype, hit, siblings, row_values,
                      registers)
    writer = k.BinOp("==", v("rs_row"), k.Const(0, itype), "bool")
    cells, extent = math.prod(nc.out_shape), nc.reduction_size
    schedule = (f"row reduction: a work-group of {GROUP} on each of {cells} cells, each "
                f"work-item reducing up to {math.ceil(extent / GROUP)} of {extent} assignments "
                f"(coordinates stepped), tree in local memory{_fused_note(plan)}")
    if row_values is None:
        return RowPass(shared, body + [k.If(writer, k.block(*finish))], schedule)
    # The tree left the cell's partials where every work-item can read them. Later passes
    # read the values from registers: read back from device memory after the barrier, a
    # value that row 0 had stored came through stale on NVIDIA's CUDA and OpenCL compilers
    # (the load of a restrict buffer moved before the barrier; softmax rows of 1024).
    finished = k.Block(tuple(_stored_by(writer, statement) for statement in finish),
                       scoped=True)  # it declares the cell's coordinates again
    return RowPass(shared, body + [finished], schedule, registers)


def _stored_by(writer: k.Expr, statement: k.Stmt) -> k.Stmt:
    """``statement`` with each store to device memory done only where ``writer`` holds."""
    return k.map_leaves(statement, lambda s: k.If(writer, s) if isinstance(s, k.Store) else s)


def _scratch(values: k.Scratch, reached: k.Scratch | None, siblings: list
             ) -> tuple[k.Scratch, ...]:
    return ((values,) + ((reached,) if reached is not None else ())
            + tuple(buffer for _, _, _, buffer in siblings))


def _finish(plan: KernelPlan, ctx: LoweringContext, flat: k.Expr, itype: str, ctype: str,
            hit: k.Expr | None, siblings: list, scalars: dict[str, k.Expr] | None = None,
            registers: dict[str, k.Expr] | None = None) -> list[k.Stmt]:
    """A combine's end for cell ``flat``, its aggregated partials in ``acc`` (and ``hit``) and
    each sibling's accumulator: finalisation, the siblings' values and the fused epilogue.
    ``scalars``: values the epilogue reads from registers; ``registers`` receives the
    registers of what it computes."""
    nc = plan.contraction
    body: list[k.Stmt] = cell_coordinates(flat, nc.out_shape, list(nc.out_vars), itype)
    cell = [k.Var(var, itype) for var in nc.out_vars]
    acc = k.Var("acc", ctype)
    body.append(k.Declare(f"v_{nc.out}", ctype, finalize(nc, ctx, acc, hit, cell, flat, ctype,
                                                         itype)))
    registers = {} if registers is None else registers
    registers[nc.out] = k.Var(f"v_{nc.out}", ctype)
    body += sibling_results(plan, ctx, {s.out: k.Var(acc_name, t) for s, (acc_name, _, t, _)
                                        in zip(plan.siblings, siblings)}, registers)
    body += _epilogue(plan, ctx, cell, flat, itype, registers, scalars)
    return body


def _combine(plan: KernelPlan, ctx: LoweringContext, name: str, cells: int, slices: int,
             ctype: str, values: k.Scratch, reached: k.Scratch | None, siblings: list
             ) -> k.Kernel:
    """Per cell: the partials (in COMBINE_CHAINS interleaved chains where there are many and
    no reached flags, else in slice order), then finalisation and the fused epilogue."""
    nc = plan.contraction
    itype = index_type(slices * cells + 16)
    flat = k.Var("g", itype)
    body: list[k.Stmt] = []
    ctx.params[values.name] = k.Param(values.name, ctype)
    for _, _, sibling_type, buffer in siblings:
        ctx.params[buffer.name] = k.Param(buffer.name, sibling_type)
    acc = k.Var("acc", ctype)
    hit: k.Expr | None = None
    chains = min(COMBINE_CHAINS, slices // 2) if reached is None else 1
    if chains > 1:
        accumulators = [("acc", nc.agg, ctype, values)] + [
            (acc_name, agg, sibling_type, buffer)
            for acc_name, agg, sibling_type, buffer in siblings]
        body += _combine_chains(accumulators, cells, slices, chains, flat, itype)
    else:  # in slice order, with the reached flags where the aggregation needs them
        body.append(k.Declare("acc", ctype, k.Load(values.name, flat, ctype)))
        later_slot = k.BinOp("+", k.BinOp("*", k.Var("gs", itype), k.Const(cells, itype),
                                          itype), flat, itype)
        later = k.Load(values.name, later_slot, ctype)
        if reached is not None:
            ctx.params[reached.name] = k.Param(reached.name, "int32")
            body.append(k.Declare("hit", "bool", k.BinOp(
                "!=", k.Load(reached.name, flat, "int32"), k.Const(0, "int32"), "bool")))
            later_hit = k.BinOp("!=", k.Load(reached.name, later_slot, "int32"),
                                k.Const(0, "int32"), "bool")
            hit = k.Var("hit", "bool")
            step = k.block(
                k.Assign("acc", _combine_pair(nc.agg, acc, hit, later, later_hit, ctype)),
                k.Assign("hit", k.BinOp("||", hit, later_hit, "bool")))
        else:
            step = k.Assign("acc", _combine_pair(nc.agg, acc, None, later, None, ctype))
        steps = [step]
        for acc_name, agg, sibling_type, buffer in siblings:
            body.append(k.Declare(acc_name, sibling_type,
                                  k.Load(buffer.name, flat, sibling_type)))
            mine = k.Var(acc_name, sibling_type)
            steps.append(k.Assign(acc_name, _combine_pair(
                agg, mine, None, k.Load(buffer.name, later_slot, sibling_type), None,
                sibling_type)))
        body.append(k.For("gs", 1, slices, k.block(*steps)))
    body += _finish(plan, ctx, flat, itype, ctype, hit, siblings)
    loop = k.For("g", 0, cells, k.block(*body), kind="thread")
    in_chains = f" in {chains} chains" if chains > 1 else ""
    kernel = _kernel(name, ctx, loop, cells, f"split reduction, combine: {slices} partials per "
                                             f"cell ({cells} cells){in_chains}")
    return dataclasses.replace(kernel, scratch=_scratch(values, reached, siblings))


#: Fewest partials per cell for which the GPU combine gives each cell several work-items
#: (:func:`_combine_tree`); fewer are summed by one work-item per cell (:func:`_combine`).
COMBINE_TREE_MIN_SLICES = 16
#: Most work-items per cell in the tree combine, and the fewest partials each of them sums.
COMBINE_TREE_ROWS = 32
COMBINE_TREE_PER_ROW = 8


def _combine_tree(plan: KernelPlan, ctx: LoweringContext, name: str, cells: int, slices: int,
                  ctype: str, values: k.Scratch, reached: k.Scratch | None, siblings: list
                  ) -> k.Kernel:
    """GPU: work-group of ``lanes`` neighbouring cells x ``rows`` work-items a cell: row r
    aggregates partials r, r + rows, ... of its cell in slice order (a warp's loads are
    ``lanes`` neighbouring floats), a tree over the rows in local memory (:func:`_local_tree`)
    combines them, and row 0 finalises the cell and runs the fused epilogue. Deterministic,
    and a combine of 64 cells x 528 partials runs on 8 multiprocessors, not one work-group.

        64 cells, 528 partials: 8 work-groups of 8 cells x 32 rows, each row 16-17 partials
    """
    nc = plan.contraction
    rows = COMBINE_TREE_ROWS
    while rows > 2 and slices < rows * COMBINE_TREE_PER_ROW:
        rows //= 2
    lanes = GROUP // rows
    blocks = math.ceil(cells / lanes)
    itype = index_type(slices * cells + GROUP * 2 + 16)
    v = lambda n: k.Var(n, itype)  # noqa: E731 - a local shorthand
    c = lambda x: k.Const(x, itype)  # noqa: E731
    ctx.params[values.name] = k.Param(values.name, ctype)
    for _, _, sibling_type, buffer in siblings:
        ctx.params[buffer.name] = k.Param(buffer.name, sibling_type)
    if reached is not None:
        ctx.params[reached.name] = k.Param(reached.name, "int32")
    body: list[k.Stmt] = [
        k.Declare("rs_lane", itype, k.BinOp("%", v("rs_lid"), c(lanes), itype)),
        k.Declare("rs_row", itype, k.BinOp("/", v("rs_lid"), c(lanes), itype)),
        k.Declare("g", itype, k.BinOp("+", k.BinOp("*", v("rs_group"), c(lanes), itype),
                                      v("rs_lane"), itype)),
    ]
    flat = v("g")
    accumulators = [("acc", nc.agg, ctype, values.name)] + [
        (acc_name, agg, sibling_type, buffer.name)
        for acc_name, agg, sibling_type, buffer in siblings]
    for acc_name, agg, dtype, _ in accumulators:
        body.append(k.Declare(acc_name, dtype, k.Const(identity_value(agg, dtype), dtype)))
    hit: k.Expr | None = None
    slot = k.BinOp("+", k.BinOp("*", v("gs"), c(cells), itype), flat, itype)
    steps: list[k.Stmt] = []
    if reached is not None:
        body.append(k.Declare("hit", "bool", k.Const(False, "bool")))
        hit = k.Var("hit", "bool")
        later_hit = k.BinOp("!=", k.Load(reached.name, slot, "int32"), k.Const(0, "int32"),
                            "bool")
        later = k.Load(values.name, slot, ctype)
        steps += [k.Assign("acc", _combine_pair(nc.agg, k.Var("acc", ctype), hit, later,
                                                later_hit, ctype)),
                  k.Assign("hit", k.BinOp("||", hit, later_hit, "bool"))]
        rest = accumulators[1:]
    else:
        rest = accumulators
    for acc_name, agg, dtype, buffer in rest:
        steps.append(k.Assign(acc_name, aggregate(agg, k.Var(acc_name, dtype),
                                                  k.Load(buffer, slot, dtype), dtype)))
    in_range = k.BinOp("<", flat, c(cells), "bool")
    loop: k.Stmt = k.For("gs", v("rs_row"), slices, k.block(*steps), step=rows)
    if cells % lanes:
        loop = k.If(in_range, loop)
    body.append(loop)
    shared: list[k.Stmt] = []
    tree: list[tuple[str, str, str]] = []
    for index, (acc_name, agg, dtype, _) in enumerate(accumulators):
        array = f"rs_values{index or ''}"
        shared.append(k.LocalArray(array, dtype, (GROUP,), "shared"))
        body.append(k.StoreLocal(array, (v("rs_lid"),), k.Var(acc_name, dtype)))
        tree.append((array, agg, dtype))
    hits: str | None = None
    if reached is not None:
        hits = "rs_hits"
        shared.append(k.LocalArray(hits, "int32", (GROUP,), "shared"))
        body.append(k.StoreLocal(hits, (v("rs_lid"),), k.Cast("int32", hit)))
    body += _local_tree(tree, hits, 1, lanes, rows, itype)
    # Row 0: the cell's aggregate, then as the one-work-item combine ends.
    final: list[k.Stmt] = [k.Assign(acc_name, k.LoadLocal(array, (v("rs_lane"),), dtype))
                           for (acc_name, _, dtype, _), (array, _, _) in zip(accumulators, tree)]
    if hits is not None:
        final.append(k.Assign("hit", k.BinOp("!=", k.LoadLocal(hits, (v("rs_lane"),), "int32"),
                                             k.Const(0, "int32"), "bool")))
    final += _finish(plan, ctx, flat, itype, ctype, hit, siblings)
    writer = k.BinOp("==", v("rs_row"), c(0), "bool")
    if cells % lanes:
        writer = k.BinOp("&&", writer, in_range, "bool")
    body.append(k.If(writer, k.block(*final)))
    nest = k.block(*shared, k.For("rs_group", 0, blocks,
                                  k.For("rs_lid", 0, GROUP, k.block(*body), kind="local"),
                                  kind="group"))
    params = tuple(sorted(ctx.params.values(), key=lambda p: (p.output, p.name)))
    schedule = (f"split reduction, combine: {slices} partials per cell ({cells} cells), "
                f"{rows} work-items a cell in a tree, {lanes} cells a work-group")
    return k.Kernel(name, params, nest, k.Launch((blocks * GROUP,), (GROUP,)), schedule,
                    uses=frozenset(ctx.uses), scratch=_scratch(values, reached, siblings))


#: Independent chains in which the combine kernel aggregates a cell's partials: each reads its
#: own partials, so a work-item has that many loads in flight, not one after each add. On an
#: H200 (bf16 ResNet-9 step, each launch timed synchronised) the combines of 264 partials per
#: cell went from 0.072-0.089 ms to 0.049-0.074; the 528-partial, five-sum k95_O19 stayed at
#: 0.12 ms (its time is elsewhere: not yet understood).
COMBINE_CHAINS = 16


def _combine_chains(accumulators: list, cells: int, slices: int, chains: int, flat: k.Expr,
                    itype: str) -> list[k.Stmt]:
    """Declare each accumulator (name, aggregation, type, partials buffer) as the aggregate of
    a cell's ``slices`` partials, in ``chains`` interleaved chains (chain j takes slices j,
    j + chains, ...) combined by a fixed tree: deterministic, and ``chains`` loads in flight.

        float acc_c0 = P[g], ..., acc_c15 = P[15 * 64 + g];
        for (gs = 16; gs < 528; gs += 16) { acc_c0 = acc_c0 + P[gs * 64 + g]; ... }
        float acc = ((acc_c0 + acc_c1) + (acc_c2 + acc_c3)) + ...;
    """
    def slot(first: k.Expr | None, offset: int) -> k.Expr:
        """Where partial ``first + offset`` of this cell is (``first`` None: 0)."""
        if first is None:
            return k.BinOp("+", k.Const(offset * cells, itype), flat, itype)
        return k.BinOp("+", k.BinOp("*", k.BinOp("+", first, k.Const(offset, itype), itype),
                                    k.Const(cells, itype), itype), flat, itype)

    full = slices - slices % chains
    declarations: list[k.Stmt] = []
    loop: list[k.Stmt] = []
    rest: list[k.Stmt] = []
    trees: list[k.Stmt] = []
    gs = k.Var("gs", itype)
    for name, agg, ctype, buffer in accumulators:
        names = [f"{name}_c{j}" for j in range(chains)]
        for j, chain in enumerate(names):
            first = k.Load(buffer.name, slot(None, j), ctype)
            declarations.append(k.Declare(chain, ctype, first))
            later = k.Load(buffer.name, slot(gs, j), ctype)
            loop.append(k.Assign(chain, aggregate(agg, k.Var(chain, ctype), later, ctype)))
        # The slices after the last whole round of chains go to chain 0.
        later = k.Load(buffer.name, slot(gs, 0), ctype)
        rest.append(k.Assign(names[0], aggregate(agg, k.Var(names[0], ctype), later, ctype)))
        level: list[k.Expr] = [k.Var(chain, ctype) for chain in names]
        while len(level) > 1:
            level = [aggregate(agg, level[i], level[i + 1], ctype) if i + 1 < len(level)
                     else level[i] for i in range(0, len(level), 2)]
        trees.append(k.Declare(name, ctype, level[0]))
    stmts = declarations + [k.For("gs", chains, full, k.block(*loop), step=chains)]
    if full < slices:
        stmts.append(k.For("gs", full, slices, k.block(*rest)))
    return stmts + trees


# -- the CPU form ------------------------------------------------------------------------------------
#
# A channels-last statistic ``M[c] = +(X[n, h, w, c])`` with one OpenMP iteration per cell reads
# X with a stride of C floats: every cell walks the whole tensor, one float per cache line, and
# the few cells leave cores idle. Here the reduction is cut into slices, one OpenMP iteration
# each; a slice runs over its assignments in order and, for each, over the cells in an
# ``omp simd`` loop: the neighbouring cells are neighbouring addresses, so the inner loop is a
# vector load and add per 8 cells, and the slice streams through its part of X once. Each
# slice accumulates into its own row of the partials (L1-resident: cells x accumulators
# floats); the combine kernel (:func:`_combine`, as on GPUs) sums each cell's rows in slice
# order, so the result does not depend on which thread ran which slice.
#
#     #pragma omp parallel for schedule(dynamic)
#     for (int rs_s = 0; rs_s < 8; rs_s++) {
#         for (c ...) P[rs_s * 128 + c] = 0;
#         for (int rs_r = start; rs_r < end; rs_r++) { int x0 = rs_r / 1024; ...
#             #pragma omp simd
#             for (int o0 = 0; o0 < 128; o0++) { float acc = P[rs_s * 128 + o0]; acc += X[..];
#                                                P[rs_s * 128 + o0] = acc; } } }

#: Fewest assignments per cell (a shorter reduction is cheap however it is read).
CPU_MIN_EXTENT = 256
#: Fewest assignments per slice: each slice also initialises and the combine reads its row.
CPU_MIN_CHUNK = 64
#: Slices per worker: dynamic scheduling lets a core that another process slows down take
#: fewer of them (a 2-core machine shared with other work: 2 slices would wait on the slower).
CPU_SLICES_PER_WORKER = 4


def split_reduction_cpu(plan: KernelPlan, ctx: LoweringContext, name: str,
                        info: DeviceInfo) -> list[k.Kernel] | None:
    """C and a CPU's OpenCL driver: two kernels (partials by slices of the reduction with the
    cells innermost, then the combine) for a reduction whose neighbouring cells are read at
    neighbouring addresses, or None. Every aggregation but ``=``, the reached flags, siblings
    and the prologue work as in :func:`split_reduction`."""
    from ..tune.device_model import model_for_info

    nc = plan.contraction
    if plan.kind != "contraction" or nc is None or nc.agg == "=" or not nc.red_vars:
        return None
    cells = math.prod(nc.out_shape)
    extent = nc.reduction_size
    if cells == 0 or extent < CPU_MIN_EXTENT:
        return None
    model = model_for_info(info)
    # At least a vector of neighbouring cells: with fewer the inner loop is mostly its own
    # overhead, and one work-item per cell (its reduction in lanes if contiguous) is as good.
    if not _unit_stride_cells(nc, max(2, model.simd_width)):
        return None
    ctype = compute_type(ctx.dtype(nc.out))
    accumulators = 1 + len(plan.siblings) + (1 if needs_reached_flag(nc) else 0)
    # A slice's row of every accumulator stays in L1 while the slice streams its operands
    # (counted at 8 bytes a cell, float64's size: float32 rows only split more often).
    if cells * accumulators * 8 > model.l1_bytes:
        return None
    slices = max(1, min(model.workers * CPU_SLICES_PER_WORKER, extent // CPU_MIN_CHUNK))
    chunk = math.ceil(extent / slices)
    slices = math.ceil(extent / chunk)  # no slice empty
    values, reached, siblings = _partial_buffers(plan, ctx, name, ctype, slices * cells)
    partial_ctx = ctx.fork()
    first = _partials_cpu(plan, nc, partial_ctx, f"{name}_partial", cells, slices, chunk, ctype,
                          values, reached, siblings)
    second = _combine(plan, ctx, name, cells, slices, ctype, values, reached, siblings)
    return [first, second]


def _unit_stride_cells(nc: NormalContraction, minimum: int) -> bool:
    """Whether neighbouring cells are neighbouring addresses (:func:`_unit_stride_reads`) and
    the innermost output variable has at least ``minimum`` values (the CPU's vector)."""
    return bool(nc.out_vars) and nc.out_shape[-1] >= minimum and _unit_stride_reads(nc)


def _partials_cpu(plan: KernelPlan, nc: NormalContraction, ctx: LoweringContext, name: str,
                  cells: int, slices: int, chunk: int, ctype: str, values: k.Scratch,
                  reached: k.Scratch | None, siblings: list) -> k.Kernel:
    extent = nc.reduction_size
    biggest = max([slices * cells, extent + chunk] + [math.prod(a.sizes) for a in nc.operands])
    itype = index_type(biggest * 2 + 16)
    v = lambda n: k.Var(n, itype)  # noqa: E731 - a local shorthand
    c = lambda x: k.Const(x, itype)  # noqa: E731
    # The slice's row of each accumulator: its partials, at slot slice * cells + cell.
    buffers = [values.name] + [buffer.name for _, _, _, buffer in siblings]
    buffers.append(reached.name if reached is not None else "")
    rows = accumulator_rows(plan, nc, ctx, buffers, local=False,
                            flag="hit" if reached is not None else None)
    for row in rows:
        ctx.params[row.array] = k.Param(row.array, row.dtype, output=True)
    base = k.BinOp("*", v("rs_s"), c(cells), itype)
    init_slot = k.BinOp("+", base, v("rs_c"), itype)
    body: list[k.Stmt] = [k.For("rs_c", 0, cells, k.block(*[
        row.store(init_slot, k.Const(row.identity, row.register_type())) for row in rows]),
        kind="simd")]
    strides = row_major_strides(nc.out_shape)
    slot: k.Expr = base
    for var, stride in zip(nc.out_vars, strides):
        term: k.Expr = v(var) if stride == 1 else k.BinOp("*", v(var), c(stride), itype)
        slot = k.BinOp("+", slot, term, itype)
    lane = nc.out_vars[-1]
    update: k.Stmt = update_run(plan, nc, ctx, itype, rows, slot, lane, 0, nc.out_shape[-1])
    guard = hoisted_guards(nc, lane, itype)
    if guard is not None:
        update = k.If(guard, update)
    for var, size in zip(reversed(nc.out_vars[:-1]), reversed(nc.out_shape[:-1])):
        update = k.For(var, 0, size, update)
    decode = reduction_coordinates(nc, v("rs_r"), itype)
    body.append(k.Declare("rs_start", itype, k.BinOp("*", v("rs_s"), c(chunk), itype)))
    end = k.BinOp("+", v("rs_start"), c(chunk), itype)
    body.append(k.Declare("rs_end", itype, k.Select(k.BinOp("<", end, c(extent), "bool"), end,
                                                    c(extent), itype)))
    body.append(k.For("rs_r", v("rs_start"), v("rs_end"), k.block(*decode, update)))
    loop = k.For("rs_s", 0, slices, k.block(*body), kind="parallel")
    params = tuple(sorted(ctx.params.values(), key=lambda p: (p.output, p.name)))
    schedule = (f"split reduction (cpu): {slices} slices of up to {chunk} of {extent} "
                f"assignments over the cores, {cells} cells innermost (omp simd over "
                f"{nc.out_shape[-1]}){_fused_note(plan)}")
    return k.Kernel(name, params, loop, k.Launch((slices,), (1,)), schedule,
                    flops=2 * cells * extent, uses=frozenset(ctx.uses),
                    scratch=_scratch(values, reached, siblings))


__all__ = ["split_reduction", "split_reduction_cpu"]
