"""The loop-nest kernel IR: what the compiler lowers Tile to and the renderer prints.

A kernel is a tree of statements over scalar expressions, with every parallel axis, tile and
vector width explicit. It knows nothing of Tile (no index variables, no aggregations) and
nothing of a dialect (no ``__global__``, no ``get_global_id``): the renderer adds those.

    Kernel("scale", params=(Param("X", "float32"), Param("Y", "float32", output=True)),
           body=For("g", 0, 1024, kind="thread",
                    body=Store("Y", Var("g"), BinOp("*", Load("X", Var("g"), "float32"),
                                                    Const(2.0, "float32")))),
           launch=Launch(global_size=(1024,), local_size=(256,)))

Loop kinds:
* ``serial``   an ordinary loop;
* ``unroll``   a loop with constant bounds the renderer asks the compiler to unroll;
* ``parallel`` iterations spread over CPU threads (OpenMP);
* ``simd``     iterations the C compiler should vectorise;
* ``thread``   one iteration per GPU work-item / CPU OpenMP iteration along a launch axis
               (``axis`` 0..2); the renderer maps it to the dialect's global id and guards
               against the rounded-up launch size;
* ``group`` / ``local``  the work-group (block) index and the index within the work-group
               along ``axis``, for kernels that stage data in local memory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Union

# -- expressions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    """A loop variable or a declared scalar."""

    name: str
    dtype: str = "int64"


@dataclass(frozen=True)
class Const:
    value: Union[int, float, bool]
    dtype: str


@dataclass(frozen=True)
class Load:
    """Element ``index`` (flat, in elements) of a global buffer parameter. A float16 or
    bfloat16 buffer read as ``uint16`` gives the element's bits (no conversion)."""

    buffer: str
    index: "Expr"
    dtype: str


@dataclass(frozen=True)
class LoadLocal:
    """Element of a local (work-group shared) or register array."""

    array: str
    index: tuple["Expr", ...]
    dtype: str


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * / % min max < <= > >= == != && || & | ^ << >> idiv imod
    a: "Expr"
    b: "Expr"
    dtype: str


@dataclass(frozen=True)
class UnOp:
    op: str  # - ! ~
    a: "Expr"
    dtype: str


@dataclass(frozen=True)
class Call:
    """A math function on scalars of ``dtype`` (exp, log, sqrt, ... and the Tile helpers)."""

    fn: str
    args: tuple["Expr", ...]
    dtype: str


@dataclass(frozen=True)
class Select:
    cond: "Expr"
    if_true: "Expr"
    if_false: "Expr"
    dtype: str


@dataclass(frozen=True)
class Cast:
    dtype: str
    a: "Expr"


Expr = Union[Var, Const, Load, LoadLocal, BinOp, UnOp, Call, Select, Cast]

# -- statements ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Declare:
    """``dtype name = init;`` (init may be None)."""

    name: str
    dtype: str
    init: Expr | None = None


@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr


@dataclass(frozen=True)
class Store:
    buffer: str
    index: Expr
    value: Expr


@dataclass(frozen=True)
class StoreLocal:
    array: str
    index: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True)
class LocalArray:
    """An array private to a work-item (``register``) or shared by a work-group (``shared``;
    ``dynamic``: CUDA's dynamic shared memory, one array per kernel at the kernel's top, its
    size the launch's ``shared_bytes``: blocks may then use more than the static 48 KiB).

    ``scalars``: private to a work-item and rendered as one scalar variable per element
    (``gt_acc[0][3][1]`` is ``gt_acc_0_3_1``), so every index must be a constant. For the
    registers that inline PTX reads and writes: NVVM's scalar replacement of an array those
    statements name element by element grows with the square of the statements (16 asm
    statements on 128 elements of an array: 1.0 s of NVVM, on 128 scalars: 0.1 s).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    scope: str  # "register", "scalars", "shared" or "dynamic"
    align: int = 0  # byte alignment to request (0: the compiler's choice)
    # C and OpenCL C, 1-D only: access through a ``restrict`` pointer to the array. gcc 12 then
    # keeps a register block read from such a scratch array in registers (through the array
    # itself it spills the block to the stack every iteration).
    restrict: bool = False
    # C only, 1-D: no array of its own but a window onto a global buffer (a parameter, often a
    # Scratch) from an element offset, ``T* restrict name = buffer + offset``: operands packed
    # once by one kernel and read in place by the next (``tiling_cpu``'s packed operands).
    view: tuple[str, Expr] | None = None


#: The widths an unaligned :class:`CopyLocal` may have: OpenCL's ``vloadN`` / ``vstoreN``.
UNALIGNED_COPY_WIDTHS = (2, 3, 4, 8, 16)


@dataclass(frozen=True)
class CopyLocal:
    """Copy ``width`` consecutive elements between local or register arrays as one vector
    access (``float4``: one 16-byte shared-memory load on a GPU instead of four). Both first
    elements must be aligned to the vector's size (see ``LocalArray.align``).

    ``src`` or ``dst`` may also name a global buffer parameter (one flat index, a multiple of
    ``width``; buffers start aligned), of storage type ``dtype``: a 16-byte global load or store.

    ``aligned=False``: either side may start at any element (C's ``memcpy``, OpenCL's
    ``vstore8(vload8(0, src), 0, dst)`` for a width in :data:`UNALIGNED_COPY_WIDTHS`; CUDA
    refuses)::

        CopyLocal("tc_A", (dst,), "A", (src,), 8, "float32", aligned=False)
    """

    dst: str
    dst_index: tuple[Expr, ...]
    src: str
    src_index: tuple[Expr, ...]
    width: int
    dtype: str
    aligned: bool = True


@dataclass(frozen=True)
class WarpOp:
    """A warp-level tensor-core or asynchronous-copy instruction: CUDA only (inline PTX,
    sm_80 and later); the other dialects refuse to render it. All 32 threads of a warp run
    it together (``ldmatrix``, ``mma``) or each thread its own copy (``cp_async``).

    ``op`` is one of:

    * ``ldmatrix``: load ``len(regs)`` (1, 2 or 4) 8x8 matrices of 16-bit elements from shared
      memory into the 32-bit registers ``regs``; ``shared`` = (array, element index) is this
      thread's row address (threads 0-7 give the rows of the first matrix, 8-15 of the
      second, ...); ``variant`` "trans" transposes each matrix.
    * ``mma``: ``regs`` (4 float32 accumulators) += A (``args[0:4]``, four registers of
      16-bit pairs) times B (``args[4:6]``): one m16n8k16 product, row-major A, column-major
      B, fp32 accumulation; ``variant`` is the operand type, "bfloat16" or "float16".
    * ``cp_async``: copy 16 bytes from global ``src`` = (buffer, element index) to ``shared``
      without passing through registers; ``args[0]`` false: write zeros, read nothing.
      ``variant`` "ca" also keeps the data in L1 (for reads that overlap, as im2col's do);
      otherwise it goes through L2 only.
    * ``cp_async_commit``: close this thread's group of copies issued so far.
    * ``cp_async_wait``: wait until at most ``int(variant)`` of its groups are in flight.

    Hopper's warpgroup products (sm_90a; a warpgroup is four consecutive warps, 128 threads):

    * ``wgmma``: ``regs`` (N / 2 float32 accumulators of each thread, in the order of N / 8
      m16n8 products' c0-c3, as ``mma`` lays them out per warp: warp w of the group holds rows
      16 (w % 4) .. + 15) += A (64 x 16) times B (16 x N), both read from shared memory by the
      tensor cores: ``args`` = (element index of A's first element, of B's) in the array
      ``shared[0]``; ``layout`` = (N, A transposed, B transposed, A's leading and stride byte
      offsets, B's): 0 = K-major, 1 = MN-major; both operands in the 128-byte swizzle
      (:mod:`gingham.compiler.tiling_wgmma` says which layout that is). Asynchronous: the
      accumulators may be read only after ``wgmma_wait``.
    * ``wgmma_fence``: order this thread's register and shared-memory accesses before the
      warpgroup products that follow.
    * ``wgmma_commit``: close the group of products issued so far.
    * ``wgmma_hold``: no instruction: ``regs`` (accumulators) are defined here as far as the
      C++ compiler knows, so that it moves no definition of them (their zeroing) into the
      pipeline of products, where ptxas would serialise every ``wgmma`` of the kernel
      (its warning C7515). CUTLASS's ``warpgroup_fence_operand``.
    * ``wgmma_wait``: wait until at most ``int(variant)`` groups are in flight; ``regs`` are
      the accumulators it hands back (the C++ compiler must not read them earlier).
    * ``fence_async_shared``: make this thread's earlier shared-memory writes (stores and
      ``cp_async``) visible to the tensor cores' reads (the async proxy).

        WarpOp("mma", regs=(acc0, acc1, acc2, acc3), args=(a0, a1, a2, a3, b0, b1),
               variant="bfloat16")
    """

    op: str
    regs: tuple["LoadLocal", ...] = ()
    args: tuple["Expr", ...] = ()
    shared: tuple[str, "Expr"] | None = None
    src: tuple[str, "Expr"] | None = None
    variant: str = ""
    layout: tuple[int, ...] = ()


@dataclass(frozen=True)
class MatrixOp:
    """An instruction of a CPU's matrix unit: Intel AMX (the C dialect on a CPU whose
    ``DeviceInfo.features`` hold ``amx-bf16``); the other dialects refuse to render it. Eight
    tile registers, each 16 rows of 64 bytes here (16 x 16 float32, or 16 x 32 bfloat16).

    ``op`` is one of:

    * ``begin``: make the tile registers usable on this thread (Linux grants them to a process
      on request; the configuration of all eight is per thread). Before the first tile
      instruction of each unit of parallel work.
    * ``end``: release them (the thread's saved state shrinks back).
    * ``load`` / ``store``: tile ``tiles[0]`` from / to the register array ``array``, its 16
      rows ``stride`` bytes apart from element ``index``.
    * ``dot_bf16``: ``tiles`` = (C, A, B): C (16 x 16 float32) += A (16 x 32 bfloat16, a row
      per row of C) times B (16 x 32 bfloat16: row p holds K rows 2p and 2p + 1 of 16 columns,
      interleaved). Products are exact in float32; denormal inputs count as zero and the sums
      round to nearest even (the instruction's own rules, not MXCSR's).
    * ``rows_from_panel``: no tile; 32 rows of an A tile from a panel, in vector registers:
      ``array[index + i * stride + d] = source[source_index + d * 32 + i]`` for ``i``, ``d``
      in 0..31 (16-bit elements). A weight gradient's operands run along M and N, not K;
      this turns 32 depths of 32 rows, packed reading along M, into the rows a tile loads.
    * ``pairs_from_rows``: no tile; 16 rows of a B tile from 32 depths of 32 columns:
      ``array[index + p * stride + 2 * j + e] = source[source_index + (2 * p + e) * 32 + j]``
      for ``p`` in 0..15, ``j`` in 0..31, ``e`` in 0..1 (depth rows interleaved two by two).
    * ``pairs_from_columns``: no tile; 16 rows of a B tile from 16 columns of 32 depths each:
      ``array[index + p * stride + 2 * i + e] = source[source_index + i * source_stride +
      2 * p + e]`` for ``p``, ``i`` in 0..15, ``e`` in 0..1. For a B contiguous along K.

        MatrixOp("load", (4,), "tc_A", Var("tc_a0"), 1024)
        MatrixOp("dot_bf16", (0, 4, 6))
        MatrixOp("rows_from_panel", (), "tc_A", Var("tc_a0"), 512, "tc_P", Var("tc_p0"))
    """

    op: str
    tiles: tuple[int, ...] = ()
    array: str = ""
    index: "Expr | None" = None
    stride: int = 0  # bytes between tile rows (load, store); elements (rows_from_panel)
    source: str = ""  # rows_from_panel, pairs_from_columns: the array read, its first element
    source_index: "Expr | None" = None
    source_stride: int = 0  # pairs_from_columns: elements between the columns read


@dataclass(frozen=True)
class For:
    """A loop. ``kind``: ``serial``; ``thread`` (a work-item per iteration on GPUs, an OpenMP
    loop in C); ``parallel`` (coarse iterations, a tile each: an OpenMP loop of dynamic
    schedule in C, a work-item per iteration in OpenCL); ``group`` / ``local`` (work-group and
    work-item indices); ``simd`` (``omp simd`` in C); ``unroll``."""

    var: str
    start: Expr | int
    stop: Expr | int
    body: "Stmt"
    step: int = 1
    kind: str = "serial"
    axis: int = 0
    # A ``simd`` loop that accumulates into registers: OpenMP reduction clauses, separated by
    # spaces, let the C compiler keep partial results in vector lanes (other dialects ignore
    # them): "+:acc,acc_T3" for sums, "gh_max_float32:acc" for a max (the C prelude declares
    # that reduction), "||:reached" for a reached flag.
    reduction: str | None = None
    # An ``unroll`` loop unrolled this many iterations at a time (0: whole).
    unroll: int = 0
    # A ``simd`` loop whose body is this many loops perfectly nested, all run in its vector
    # lanes as one iteration space (C: OpenMP ``collapse``; 0 or 1: this loop alone).
    collapse: int = 0


@dataclass(frozen=True)
class If:
    cond: Expr
    then: "Stmt"
    otherwise: "Stmt | None" = None


@dataclass(frozen=True)
class Barrier:
    """All work-items of a work-group reach this point before any continues; their writes to
    local memory before it (and with ``global_memory`` to global memory too) are then seen by
    every work-item of the group."""

    global_memory: bool = False


@dataclass(frozen=True)
class Block:
    """Statements in order; ``scoped``: in a scope of their own (``{ ... }``), so that what
    they declare may be declared again after them (passes of one kernel, ``rows.py``)."""

    stmts: tuple["Stmt", ...]
    scoped: bool = False


@dataclass(frozen=True)
class Comment:
    text: str


Stmt = Union[Declare, Assign, Store, StoreLocal, LocalArray, CopyLocal, WarpOp, MatrixOp, For, If,
             Barrier, Block, Comment]

# -- kernels ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A global buffer argument: element type, and whether the kernel writes it."""

    name: str
    dtype: str
    output: bool = False


@dataclass(frozen=True)
class Scratch:
    """A global buffer among a kernel's parameters that no tensor names (the partial sums of a
    split-K contraction, say): the executable allocates ``size`` elements of ``dtype`` like an
    intermediate tensor, live from the first launch that names it to the last."""

    name: str
    dtype: str
    size: int


@dataclass(frozen=True)
class Launch:
    """The launch shape on GPUs: total work-items and work-group shape per axis."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None = None
    shared_bytes: int = 0  # CUDA dynamic shared memory per block (a ``dynamic`` LocalArray)
    min_blocks: int = 0  # CUDA: blocks per multiprocessor to fit in registers (launch bounds)


@dataclass(frozen=True)
class Kernel:
    """One kernel: parameters, body, launch shape, and a note on the schedule for debug output."""

    name: str
    params: tuple[Param, ...]
    body: Stmt
    launch: Launch
    schedule: str = ""
    flops: int = 0
    bytes_moved: int = 0
    uses: frozenset = field(default_factory=frozenset)  # helper functions the body calls
    scratch: tuple[Scratch, ...] = ()  # parameters that are scratch buffers, not tensors


def block(*stmts: "Stmt | None") -> Block:
    """A block of the given statements, flattening nested blocks (not scoped ones) and
    dropping Nones."""
    flat: list[Stmt] = []
    for stmt in stmts:
        if stmt is None:
            continue
        if isinstance(stmt, Block) and not stmt.scoped:
            flat.extend(stmt.stmts)
        else:
            flat.append(stmt)
    return Block(tuple(flat))


def map_leaves(stmt: Stmt, leaf: Callable[[Stmt], Stmt],
               cond: Callable[[Expr], Expr] = lambda e: e) -> Stmt:
    """``stmt`` rebuilt with ``leaf`` applied to every statement that is not a block, a loop
    or an ``if`` (those are rebuilt around their rebuilt bodies), and ``cond`` to every
    ``if``'s condition. Row 0 alone storing a row pass's results::

        map_leaves(body, lambda s: If(writer, s) if isinstance(s, Store) else s)
    """
    if isinstance(stmt, Block):
        return dataclasses.replace(stmt, stmts=tuple(map_leaves(s, leaf, cond)
                                                     for s in stmt.stmts))
    if isinstance(stmt, For):
        return dataclasses.replace(stmt, body=map_leaves(stmt.body, leaf, cond))
    if isinstance(stmt, If):
        otherwise = stmt.otherwise
        return dataclasses.replace(stmt, cond=cond(stmt.cond),
                                   then=map_leaves(stmt.then, leaf, cond),
                                   otherwise=None if otherwise is None
                                   else map_leaves(otherwise, leaf, cond))
    return leaf(stmt)


def statements(stmt: Stmt, unrolled: bool = False) -> int:
    """How many statements ``stmt`` holds, or with ``unrolled`` how many once the compiler has
    unrolled its ``unroll`` loops of constant bounds: a native compiler's time follows the
    unrolled code (NVRTC spends it optimising and allocating registers, not parsing), so the
    ratio of the two says how much more a kernel costs to build than its source's length.

        >>> loop = For("i", 0, 4, Block((Barrier(), Barrier())), kind="unroll")
        >>> statements(loop), statements(loop, unrolled=True)
        (3, 9)
        >>> statements(For("i", 0, 4, Block((Barrier(), Barrier())), kind="unroll", unroll=2),
        ...            unrolled=True)
        5
    """
    if isinstance(stmt, Block):
        return sum(statements(s, unrolled) for s in stmt.stmts)
    if isinstance(stmt, If):
        rest = statements(stmt.otherwise, unrolled) if stmt.otherwise is not None else 0
        return 1 + statements(stmt.then, unrolled) + rest
    if isinstance(stmt, For):
        body = statements(stmt.body, unrolled)
        if unrolled and stmt.kind == "unroll":
            bounds = [b.value if isinstance(b, Const) else b for b in (stmt.start, stmt.stop)]
            if all(isinstance(b, int) for b in bounds):
                trips = max(0, -(-(bounds[1] - bounds[0]) // stmt.step))
                return 1 + (min(trips, stmt.unroll) if stmt.unroll else trips) * body
        return 1 + body
    return 1


def global_accesses(node: Any) -> int:
    """How many loads from and stores to global buffers ``node`` (a statement or an
    expression) writes, each counted once however often a loop around it runs. A fused
    epilogue's count times the cells an unrolled loop repeats it for is what a native
    compiler's alias analysis works through (see
    :data:`gingham.compiler.tiling_gpu.EPILOGUE_UNROLLED_ACCESSES`).

        >>> global_accesses(Store("C", Var("i"), BinOp("+", Load("A", Var("i"), "float32"),
        ...                                                Load("B", Var("i"), "float32"),
        ...                                                "float32")))
        3
    """
    if isinstance(node, (str, int, float, bool)) or node is None:
        return 0
    if isinstance(node, tuple):
        return sum(global_accesses(item) for item in node)
    if not dataclasses.is_dataclass(node):
        return 0
    # A load at a constant index (a scalar: an optimiser's learning rate, momentum, ...) is
    # the same for every cell; the buffers are restrict-qualified, so the native compiler
    # loads it once however many cells an unrolled loop repeats it for.
    uniform = isinstance(node, Load) and not _has_var(node.index)
    own = 1 if isinstance(node, (Load, Store)) and not uniform else 0
    return own + sum(global_accesses(getattr(node, f.name)) for f in dataclasses.fields(node))


def _has_var(node: Any) -> bool:
    """Whether the expression ``node`` reads a variable (else it is a constant)."""
    if isinstance(node, Var):
        return True
    if isinstance(node, tuple):
        return any(_has_var(item) for item in node)
    if not dataclasses.is_dataclass(node):
        return False
    return any(_has_var(getattr(node, f.name)) for f in dataclasses.fields(node))
