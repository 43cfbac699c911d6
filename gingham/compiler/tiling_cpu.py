"""A fast CPU schedule for sums of products: packed, cache-blocked, register-blocked GEMM.

A contraction ``O = +(A * B)`` is viewed as a batch of matrix products. The output variables
that only ``B`` reads, flattened, are ``N`` (the register block's vector lanes run along it);
those that only ``A`` reads, flattened, are ``M``; those both read (or neither) are batch
variables; the reduction variables, flattened, are ``K``. Either operand can be ``B``: the
cost model takes the cheaper view (:func:`gemm_view`):

    O[n, y, x, co] = +(I[n, y + ky - 1, x + kx - 1, ci] * F[ky, kx, ci, co])
    ->  M = (n, y, x), N = co, K = (ky, kx, ci), A = I (with padding guards), B = F
    D_F[o, i, kh, kw] = +(D_O[n, o, y, x] * I[n, i, y + kh - 1, x + kw - 1])   (NCHW)
    ->  M = o, N = (i, kh, kw), K = (n, y, x), A = D_O, B = I (with padding guards)

The kernel (one C function, see :func:`tiled_contraction_cpu`) runs, per output tile of
``mt x nt`` cells spread over cores by OpenMP (or, on a CPU's OpenCL driver, a work-item per
tile: :func:`runs_on`):

    zero the tile's accumulators C[mt][nt]
    for each reduction block of ~kc (whole rows of the innermost reduction variable):
        pack B[k][n] into nr-wide panels, pack A[m][k] into rows, or into mr-wide panels
        when A runs along M rather than K (guards: invalid taps pack 0; per-tile row and
        column tables hold each M row's and N column's part of the addresses and guards,
        decoded once from the flat index); each read along its operand's unit stride
        for each nr x mr register block: acc[mr][nr] += a * b over the block (packed FMAs)
    finalise each cell and run the fused epilogue exactly as the one-cell-per-item schedule

With split-K (fewer tiles than threads: a first layer's weight gradient) each tile of each K
slice is a unit of work that stores its sums to a scratch buffer, and a second kernel adds
the slices and runs the finalisation and epilogue.

Packing applies the guards: an invalid tap packs as 0 and so adds 0 * other = 0. That equals
the valid-index rule (the tap is skipped) except when the other operand holds inf or NaN there,
where the product is NaN instead of nothing.

Reductions made sparse by a guard (the data gradient of a convolution, where a cell sees 3 of
``H`` rows) are first re-parametrised over the guard's expression (the filter tap), so the box
holds the useful taps only.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass

from ..devices.base import DeviceInfo
from ..lru import LRU
from ..tile import dtypes as dt
from ..tile.bounds import Inequality, infer_ranges, poly_interval
from ..tile.ir import Poly
from ..tune.cost import CpuDims, cpu_operand_bytes
from ..tune.device_model import DeviceModel
from . import kernel_ir as k
from .fusion import KernelPlan
from .lower import (LoweringContext, _cast, _epilogue, affine_expr, compute_type, finalize,
                    index_type, row_major_strides)
from .normalize import NormalAccess, NormalContraction
from .tiling_gpu import Affine, affine_form, flat_address


@dataclass(frozen=True)
class CpuTiling:
    """Tile sizes of the CPU GEMM schedule (all in elements).

    ``mr x nr`` accumulators live in vector registers; a ``kc``-deep slice of a B panel
    (``kc * nr``) stays in L1 while the ``mt x kc`` packed A block streams from L2; an output
    tile is ``mt x nt`` cells, one unit of OpenMP work. ``split`` > 1 cuts K into that many
    slices, each tile of each slice a unit of work writing partial sums that a second kernel
    adds up (for long K and few tiles: the weight gradients).
    """

    mr: int
    nr: int
    kc: int
    mt: int
    nt: int
    simd: int
    split: int = 1
    # "fma": the register block in vector registers; "amx": in four AMX tiles (2 x 2 tiles of
    # 16 x 16 float32, mr = nr = 32), bfloat16 operands packed as their bits.
    engine: str = "fma"

    def describe(self) -> str:
        block = (f"AMX tiles {self.mr}x{self.nr}" if self.engine == "amx"
                 else f"register block {self.mr}x{self.nr} (simd {self.simd})")
        return (f"{block}, kc {self.kc}, tile {self.mt}x{self.nt}"
                + (f", split-K {self.split}" if self.split > 1 else ""))


def choose_tiling(info: DeviceInfo, dims: CpuDims) -> CpuTiling:
    """The cost model's choice for the GEMM ``dims`` over the whole legal space
    (:func:`gingham.tune.space.rank_cpu`: register block, kc, mt, nt)."""
    from ..tune.device_model import model_for_info
    from ..tune.space import rank_cpu

    ranked = rank_cpu(dims, model_for_info(info))
    assert ranked, f"no CPU tiling for {dims}"  # mr = 1, one vector, always fits
    return ranked[0][1]


#: The AMX register block: 32 x 32 float32 cells in four 16 x 16 tiles (CpuTiling.engine "amx").
AMX_BLOCK = 32
#: bfloat16 elements of K in one row of an A tile (64 bytes), so one product's depth.
AMX_DEPTH = 32
#: The most bytes an operand packed once for every tile may take (``_Builder._packs_once``):
#: beyond it (an im2col A of a large batch: 9 times the activations) each tile packs its own
#: blocks, in its cache, as before.
PACKED_ONCE_MAX_BYTES = 64 << 20
#: The fewest tiles that must read a packed block for its operand to be packed once: the
#: packed copy goes to memory and comes back once per tile, where a tile's own packing reads
#: the operand and keeps the copy in its cache. Read by 2 tiles (bf16 M 4096 x N 512 x K
#: 4608, A) packing once was 1.2x slower; by 4 and 8 (GEMM 2048's B and A) faster.
PACKED_ONCE_MIN_READERS = 4


def _clamp(value: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, value))


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil(a, b) * b


# -- the contraction as a batched GEMM ------------------------------------------------------------


@dataclass(frozen=True)
class _Guard:
    form: Affine
    upper: int


@dataclass(frozen=True)
class _Gemm:
    out_vars: tuple[str, ...]
    out_shape: tuple[int, ...]
    batch: tuple[str, ...]  # output variables both operands read (or neither)
    m_vars: tuple[str, ...]  # output variables only A reads, flattened row-major into M
    n_vars: tuple[str, ...]  # output variables only B reads, flattened row-major into N
    k_outer: tuple[str, ...]
    k_inner: str | None
    ranges: dict[str, tuple[int, int]]  # reduction variables, inclusive
    a: tuple[str, Affine]  # tensor, flat index
    b: tuple[str, Affine]
    a_guards: tuple[_Guard, ...]
    b_guards: tuple[_Guard, ...]
    a_elements: int = 0  # elements of A's and B's tensors (0: not known)
    b_elements: int = 0

    def size(self, var: str) -> int:
        if var in self.ranges:
            lo, hi = self.ranges[var]
            return hi - lo + 1
        return self.out_shape[self.out_vars.index(var)]

    def extent(self, names) -> int:
        return math.prod(self.size(v) for v in names)

    @property
    def a_panels(self) -> bool:
        """Whether A is packed as ``mr``-wide panels, ``tc_A[ip][kk][i]``, rather than as rows,
        ``tc_A[r][kk]``: when A is not contiguous along K (a weight gradient's input,
        ``I[n, y + ky - 1, x + kx - 1, ci]`` with M = (ky, kx, ci) and K = (n, y, x), is
        contiguous along M). Packing rows would then read one element per cache line, 128
        apart; panels read along M. Measured on 2 Zen 3 cores, the weight gradient of a
        128 -> 128 channel layer at 16x16 spent 45% of its time packing A as rows."""
        return self.k_inner is None or self.a[1].coeffs.get(self.k_inner) != 1

    @property
    def a_copies_runs(self) -> bool:
        """Whether a panel block of A inside one run of M's innermost variable copies whole
        (``_Builder.pack_a_panels``): A reads that variable and no guard does (no M
        variable at all: a product of one row, or rows that are batch entries)."""
        if not self.m_vars:
            return False
        last = self.m_vars[-1]
        return bool(self.a[1].coeffs.get(last, 0)) and not any(
            last in guard.form.coeffs for guard in self.a_guards)

    @property
    def a_run(self) -> int:
        """Rows of M in which a panel block copies whole: the extent of M's innermost variable
        (:attr:`a_copies_runs`); 1 where every block packs element by element; 0 for A packed
        as rows."""
        if not self.a_panels:
            return 0
        return self.size(self.m_vars[-1]) if self.a_copies_runs else 1

    def n_guards(self) -> list[tuple[int, _Guard]]:
        """The B guards that read an N variable (tested per packed element)."""
        return [(i, q) for i, q in enumerate(self.b_guards)
                if set(q.form.coeffs) & set(self.n_vars)]

    @property
    def unit_stride_output(self) -> str:
        """The output variable whose neighbours are adjacent in memory (the last one of
        extent above 1): a view whose N ends with it stores a tile's rows a vector at a
        time."""
        wide = [v for v, size in zip(self.out_vars, self.out_shape) if size > 1]
        return wide[-1] if wide else self.out_vars[-1]

    @property
    def dims(self) -> CpuDims:
        """The sizes the cost model and the tiling space see."""
        k_in = self.size(self.k_inner) if self.k_inner else 1
        m, n = self.extent(self.m_vars), self.extent(self.n_vars)
        k, batch = k_in * self.extent(self.k_outer), self.extent(self.batch)

        def distinct(elements: int, viewed: int) -> float:
            return min(1.0, elements / viewed) if elements and viewed else 1.0

        return CpuDims(m, n, k, k_in, batch,
                       b_gather=self.b[1].coeffs.get(self.n_vars[-1]) != 1,
                       a_run=self.a_run, b_careful=bool(self.n_guards()),
                       c_scatter=self.n_vars[-1] != self.unit_stride_output,
                       a_distinct=distinct(self.a_elements, m * k * batch),
                       b_distinct=distinct(self.b_elements, k * n * batch))


def _narrow(nc: NormalContraction):
    """Re-parametrise reductions that a guard makes sparse; (red vars, ranges, operand index
    polys, guards). ``D_I[o] = +(D_O[y] * F[o - y + 1])`` with ``y`` in ``[0, H)`` but only 3
    valid per cell becomes ``+(D_O[o + 1 - t] * F[t])`` with ``t`` in ``[0, 3)``. Any guard
    narrower than its variable's range counts: at H = 4 the taps are 3 of 4 rows per cell
    (K of the 512-channel ResNet-9 layer: 9 x 512 instead of 16 x 512)."""
    red_vars = list(nc.red_vars)
    ranges = dict(nc.red_ranges)
    indices = [a.index for a in nc.operands]
    sizes = [a.sizes for a in nc.operands]
    # All validity conditions: the accesses, the guards, and the box (which they imply).
    inequalities = [Inequality(p, s, "operand") for index, shape in zip(indices, sizes)
                    for p, s in zip(index, shape)]
    inequalities += list(nc.guards)
    inequalities += [Inequality(Poly.var(v) - lo, hi - lo + 1, "box")
                     for v, (lo, hi) in ranges.items()]
    guards = list(nc.guards)
    out_box = [Inequality(Poly.var(o), s, "output") for o, s in zip(nc.out_vars, nc.out_shape)]
    for step in range(len(red_vars)):
        choice = None
        for q in guards:
            form = affine_form(q.poly)
            if form is None or not set(form.coeffs) & set(nc.out_vars):
                continue
            for var, coeff in form.coeffs.items():
                if var in ranges and abs(coeff) == 1:
                    lo, hi = ranges[var]
                    if q.upper < hi - lo + 1:
                        choice = (q, var, coeff)
                        break
            if choice:
                break
        if choice is None:
            break
        q, var, coeff = choice
        new = f"tc_tap{step}"
        rest = q.poly - Poly.var(var).scale(coeff)
        solved = (Poly.var(new) - rest).scale(coeff)  # coeff is +-1: its own inverse

        def sub(poly: Poly) -> Poly:
            c = poly.coeffs.get(var)
            if c is None:
                return poly
            return Poly.of({n: x for n, x in poly.terms if n != var}, poly.const) + solved.scale(c)

        indices = [tuple(sub(p) for p in index) for index in indices]
        inequalities = [Inequality(sub(i.poly), i.upper, i.origin) for i in inequalities]
        red_vars = [new if v == var else v for v in red_vars]
        found = infer_ranges(tuple(nc.out_vars) + tuple(red_vars), out_box + inequalities)
        if any(math.isinf(found[v][0]) or math.isinf(found[v][1]) for v in red_vars):
            return None
        ranges = {v: (int(found[v][0]), int(found[v][1])) for v in red_vars}
        box = {o: (0, s - 1) for o, s in zip(nc.out_vars, nc.out_shape)}
        box.update(ranges)
        guards = [i for i in inequalities if not _implied(i, box)]
    return red_vars, ranges, indices, guards


def _implied(q: Inequality, box: dict[str, tuple[int, int]]) -> bool:
    if affine_form(q.poly) is None:
        return False
    if any(box[n][0] > box[n][1] for n, _ in q.poly.terms):
        return False
    low, high = poly_interval(q.poly, box)
    return low >= 0 and high <= q.upper - 1


#: id(contraction) -> (contraction, model, its view): lowering a CPU contraction asks for its
#: view twice (the tuner's family, then the kernel), and ranking both views by the cost model
#: is most of the CPU device's lowering time.
_VIEWS: LRU[tuple[int, bool], tuple] = LRU(1024)
_VIEWS_LOCK = threading.Lock()  # the background tuner lowers on its own thread


def gemm_view(nc: NormalContraction, model: DeviceModel | None = None,
              amx: bool = False) -> _Gemm | None:
    """The contraction as a batched GEMM, or None when it is not one.

    Either operand can be B; each choice gives its own M, N and batch (see
    :func:`_oriented`). With a device model the cheaper of the two by the cost model
    (:func:`_view_cost`; with its AMX tilings too where ``amx``) is taken, else the one whose
    B reads the last wide output variable (the output's unit stride, as the GPU view does).
    Remembered per contraction object, model and ``amx``.
    """
    with _VIEWS_LOCK:
        known = _VIEWS.get((id(nc), amx))
    # The entry holds its contraction, so the id is not reused while it lives.
    if known is not None and known[0] is nc and (known[1] is model or known[1] == model):
        return known[2]
    view = _gemm_view(nc, model, amx)
    with _VIEWS_LOCK:
        _VIEWS[(id(nc), amx)] = (nc, model, view)
    return view


def gemm_views(nc: NormalContraction) -> list[_Gemm]:
    """The contraction's GEMM views, one for each operand that can be B (none when it is not
    a sum of products of two affine reads)."""
    if nc.agg != "+" or nc.combo != "*" or len(nc.operands) != 2 or not nc.out_vars:
        return []
    if any(lo > hi for lo, hi in nc.red_ranges.values()):
        return []
    narrowed = _narrow(nc)
    if narrowed is None:
        return []
    red_vars, ranges, indices, guards = narrowed
    forms = [flat_address(NormalAccess(a.tensor, index, a.sizes))
             for index, a in zip(indices, nc.operands)]
    if any(f is None for f in forms):
        return []
    guard_forms = [(affine_form(q.poly), q.upper) for q in guards]
    if any(form is None for form, _ in guard_forms):
        return []
    views = [_oriented(nc, red_vars, ranges, forms, guard_forms, b_pos) for b_pos in (0, 1)]
    return [v for v in views if v is not None]


def _gemm_view(nc: NormalContraction, model: DeviceModel | None,
               amx: bool = False) -> _Gemm | None:
    views = gemm_views(nc)
    if not views:
        return None
    if model is None:
        return next((v for v in views if v.unit_stride_output in v.n_vars), views[0])
    return min(views, key=lambda v: _view_cost(v, model, amx))


def _oriented(nc: NormalContraction, red_vars, ranges, forms, guards, b_pos: int
              ) -> _Gemm | None:
    """The GEMM with operand ``b_pos`` as B: M = the output variables only A reads, N = those
    only B reads, batch = the rest; None when N is empty or a guard couples M and N (the
    packing of one operand could not test it). The NCHW weight gradient
    ``D_F[o, i, kh, kw] = +(D_O[n, o, y, x] * I[n, i, y + kh - 1, x + kw - 1])`` with B = I is
    M = o, N = (i, kh, kw), K = (n, y, x)."""
    a_pos = 1 - b_pos
    a_form, b_form = forms[a_pos], forms[b_pos]
    a_reads, b_reads = set(a_form.coeffs), set(b_form.coeffs)
    m_vars = tuple(o for o in nc.out_vars if o in a_reads - b_reads)
    n_vars = tuple(o for o in nc.out_vars if o in b_reads - a_reads)
    batch = tuple(o for o in nc.out_vars if o not in m_vars and o not in n_vars)
    if not n_vars:
        return None  # nothing for the register block's vector lanes to run along
    a_guards, b_guards = [], []
    for form, upper in guards:
        names = set(form.coeffs)
        has_m, has_n = bool(names & set(m_vars)), bool(names & set(n_vars))
        if has_m and has_n:
            return None
        if not has_n:
            a_guards.append(_Guard(form, upper))
        if not has_m:
            b_guards.append(_Guard(form, upper))
    # The innermost reduction variable: the one A reads contiguously, else the last.
    k_inner = None
    if red_vars:
        unit = [v for v in red_vars if a_form.coeffs.get(v) == 1]
        k_inner = unit[-1] if unit else red_vars[-1]
    k_outer = tuple(v for v in red_vars if v != k_inner)
    return _Gemm(tuple(nc.out_vars), tuple(nc.out_shape), batch, m_vars, n_vars, k_outer,
                 k_inner, ranges, (nc.operands[a_pos].tensor, a_form),
                 (nc.operands[b_pos].tensor, b_form), tuple(a_guards), tuple(b_guards),
                 math.prod(nc.operands[a_pos].sizes), math.prod(nc.operands[b_pos].sizes))


def _view_cost(g: _Gemm, model: DeviceModel, amx: bool = False) -> float:
    """The cost model's estimate for the best tiling of ``g`` (AMX tilings too where
    ``amx``)."""
    from ..tune.space import rank_cpu

    ranked = rank_cpu(dataclasses.replace(g.dims, amx=amx), model)
    return ranked[0][0] if ranked else math.inf


# -- kernel construction ---------------------------------------------------------------------

# Below this many multiply-adds the one-cell-per-item schedule is as good (no packing to pay for).
MIN_WORK = 4096
#: Thin products: a side of at most THIN_SIDE cells and at most THIN_MAX_K terms. Packing
#: pays for itself by reusing each packed element across the other side's block and a long
#: reduction; here there is neither, so the packing (a guarded gather) costs as much as the
#: products. They run as the loop nest instead (:func:`gingham.compiler.lower.lower_cell_nest`,
#: which reads the operands in place with the cells in vector lanes). Winograd's transforms
#: (``gingham.nn.winograd``; fp32 ResNet-9, batch 64, channels-last, 2-core AVX-512 host):
#: the input transform (M 1048576 x N 16 x K 16) 37 -> 12 ms, its gradient's phases (M 1048576
#: x N 4 x K 144) 40 -> 10 ms, the whole training step 872 -> 708 ms.
THIN_SIDE = 16
THIN_MAX_K = 160


def thin_product(dims: CpuDims) -> bool:
    """Whether a product of these sizes runs better as a loop nest than tiled (see
    :data:`THIN_SIDE`)::

        thin_product(CpuDims(1048576, 16, 16, 16, 1))   # True: Winograd's input transform
        thin_product(CpuDims(4096, 128, 1152, 128, 1))  # False: a convolution
    """
    return min(dims.m, dims.n) <= THIN_SIDE and dims.k <= THIN_MAX_K


def product_dims(plan: KernelPlan, ctx: LoweringContext, info: DeviceInfo
                 ) -> tuple[_Gemm, CpuDims] | None:
    """The plan as a batched GEMM on this device and its sizes, or None when it is not a
    float32 sum of products viewable as one or has too little work to tile."""
    from ..tune.device_model import model_for_info

    nc = plan.contraction
    if plan.kind != "contraction" or nc is None:
        return None
    if any(ctx.is_coordinate(a.tensor) for a in nc.operands):
        return None  # an index computed by its readers has no buffer to stage
    if compute_type(ctx.dtype(nc.out)) != "float32":
        return None
    amx = runs_on_amx(nc, ctx, info)
    g = gemm_view(nc, model_for_info(info), amx)
    if g is None:
        return None
    d = dataclasses.replace(g.dims, amx=amx)
    if d.m * d.n * d.k * d.batch < MIN_WORK:
        return None
    return g, d


def runs_on_amx(nc: NormalContraction, ctx: LoweringContext, info: DeviceInfo) -> bool:
    """Whether the product may run on the CPU's AMX tiles (``CpuTiling.engine`` "amx"): the
    C backend on a CPU whose ``features`` hold ``amx-bf16``, ``config.amx`` on, both operands
    bfloat16 (either may be A: a weight gradient's A runs along M, not K as a tile row of A
    does, so it is packed reading along M and turned into rows in registers:
    ``_Builder.a_transposed``)."""
    from ..config import get_config

    return (info.dialect == "c" and "amx-bf16" in info.features and get_config().amx
            and all(dt.dtype_name(ctx.dtype(a.tensor)) == "bfloat16" for a in nc.operands))


def runs_on(info: DeviceInfo) -> bool:
    """Whether a device runs this schedule: the C backend (the tile loop under OpenMP), and a
    CPU's OpenCL driver (PoCL: a work-item per tile), where a register block in a loop nest
    beats the work-groups staged through local memory that GPUs get. PoCL 3.1 on 2 AMD EPYC
    cores, fp32, against that GPU schedule: GEMM 1024 23 against 60 ms, a 128-channel 3x3
    convolution at 16x16 (batch 64) 27 against 192 ms forward, 35 against 283 ms for its
    weight gradient; the C backend's own: 16-17, 25 and 27 ms."""
    return info.dialect == "c" or (info.dialect == "opencl" and info.kind == "cpu")


def gemm_dims(plan: KernelPlan, ctx: LoweringContext, info: DeviceInfo
              ) -> tuple[_Gemm, CpuDims] | None:
    """:func:`product_dims` where this schedule applies: None also for a thin product
    (:func:`thin_product`), which the loop nest runs."""
    found = product_dims(plan, ctx, info)
    if found is None or thin_product(found[1]):
        return None
    return found


def streams_thin_product(plan: KernelPlan, ctx: LoweringContext, info: DeviceInfo) -> bool:
    """Whether ``plan`` is a thin product that this schedule leaves to the loop nest."""
    found = product_dims(plan, ctx, info)
    return found is not None and thin_product(found[1])


def tiled_contraction_cpu(plan: KernelPlan, ctx: LoweringContext, name: str, info: DeviceInfo,
                          tiling: CpuTiling | None = None) -> list[k.Kernel] | None:
    """The packed, tiled GEMM kernels for a sum of products in launch order (one, or with
    split-K the partial sums and their sum), or None (use the default schedule).

    ``tiling`` None: the cost model's choice (:func:`choose_tiling`); a tuned one otherwise.
    """
    found = gemm_dims(plan, ctx, info)
    if found is None:
        return None
    g, d = found
    tiling = tiling or choose_tiling(info, d)
    options = dict(vector_copies=info.dialect == "opencl",
                   vector_registers=info.dialect in ("opencl", "c"),
                   a_rows_at_offsets=info.dialect == "c")
    builder = _Builder(plan, ctx.fork() if tiling.split > 1 else ctx,
                       name, g, tiling, **options)
    # Operands packed once, each by a kernel of its own that runs before the product.
    packers = [_Builder(plan, ctx.fork(), name, g, tiling,
                        **options).packing_kernel(operand)
               for operand in ("a", "b") if builder.prepacked(operand)]
    if builder.split == 1:
        return [*packers, builder.kernel()]
    from .tiling_gpu import split_sum  # the same sum of partials, one cell per iteration

    partials = builder.kernel()
    total = split_sum(plan, ctx, name, plan.contraction, builder.scratch, builder.split,
                      "float32")
    schedule = (f"cpu split-K sum: {builder.split} partial tiles per cell "
                f"({builder.cells} cells), then finalisation and epilogue")
    return [*packers, partials, dataclasses.replace(total, schedule=schedule)]


class _Builder:
    def __init__(self, plan: KernelPlan, ctx: LoweringContext, name: str, g: _Gemm,
                 t: CpuTiling, vector_copies: bool = False,
                 vector_registers: bool = False, a_rows_at_offsets: bool = False) -> None:
        self.plan, self.ctx, self.name, self.g, self.t = plan, ctx, name, g, t
        # OpenCL C: A's runs packed as unaligned vector copies (see _copy_run).
        self.vector_copies = vector_copies
        # C and OpenCL C: the register block as vectors (see micro_kernels).
        self.vector_registers = vector_registers
        # C: the micro-kernel reads A's rows at constant offsets from one index (see a_index).
        self.a_rows_at_offsets = a_rows_at_offsets
        nc = plan.contraction
        self.nc = nc
        self.cells = math.prod(nc.out_shape)
        biggest = max([self.cells] + [math.prod(a.sizes) for a in nc.operands])
        self.it = index_type(biggest * 2 + 16)
        self.m = g.extent(g.m_vars)
        self.n = g.extent(g.n_vars)
        self.k_in = g.size(g.k_inner) if g.k_inner else 1
        self.k_out = g.extent(g.k_outer)
        # Reduction blocks: several whole inner rows, or one row cut in chunks.
        if self.k_in <= t.kc:
            self.rows_per_block = max(1, t.kc // self.k_in)
            self.chunk = self.k_in
        else:
            self.rows_per_block = 1
            self.chunk = _ceil(self.k_in, _ceil(self.k_in, t.kc))
        self.chunks = _ceil(self.k_in, self.chunk)
        self.blocks = _ceil(self.k_out, self.rows_per_block) * self.chunks
        self.kc = self.rows_per_block * self.chunk  # the packed depth
        # AMX: both operands packed as bfloat16 bits, A's rows and B's rows of pairs whole
        # tile rows (32 elements of K): the packed depth padded to them, the tail zeros.
        self.amx = t.engine == "amx"
        if self.amx:
            assert t.mr == t.nr == AMX_BLOCK and t.mt % t.mr == 0 and t.nt % t.nr == 0, t
            self.kc = _round_up(self.kc, AMX_DEPTH)
        self.packed = "uint16" if self.amx else "float32"  # element type of tc_A and tc_B
        self.n_mt = _ceil(self.m, t.mt)
        self.n_nt = _ceil(self.n, t.nt)
        # Split-K: slices of whole K blocks, none empty.
        self.slice_blocks = _ceil(self.blocks, min(max(t.split, 1), self.blocks))
        self.split = _ceil(self.blocks, self.slice_blocks)
        self.tiles = g.extent(g.batch) * self.n_mt * self.n_nt * self.split
        self.scratch = (k.Scratch(f"{name}_partials", "float32", self.split * self.cells)
                        if self.split > 1 else None)
        # Packed once (AMX): per operand, its packed blocks one after another, a block per
        # (batch, tile of its own rows or columns, K block), as the tiles read them.
        batch = g.extent(g.batch)
        self.pack_units = {"a": batch * self.n_mt * self.blocks,
                           "b": batch * self.n_nt * self.blocks}
        self.pack_block = {"a": t.mt * self.kc, "b": t.nt * self.kc}
        self.packed_once = {
            operand: k.Scratch(f"{name}_packed_{operand}", self.packed,
                               self.pack_units[operand] * self.pack_block[operand])
            for operand in ("a", "b") if self._packs_once(operand)}
        largest = max([biggest, self.split * self.cells] +
                      [s.size for s in self.packed_once.values()])
        self.it = index_type(largest * 2 + 16)

    # small helpers
    def v(self, name: str) -> k.Var:
        return k.Var(name, self.it)

    def c(self, value: int) -> k.Const:
        return k.Const(value, self.it)

    def add(self, a: k.Expr, b: k.Expr) -> k.Expr:
        return k.BinOp("+", a, b, self.it)

    def mul(self, a: k.Expr, b: k.Expr | int) -> k.Expr:
        if isinstance(b, int):
            if b == 1:
                return a
            b = self.c(b)
        return k.BinOp("*", a, b, self.it)

    def ceil_div(self, value: k.Expr, size: int) -> k.Expr:
        """``ceil(value / size)``: the register blocks (or panels, or tile rows of K) that
        ``value`` elements fill."""
        return k.BinOp("/", self.add(value, self.c(size - 1)), self.c(size), self.it)

    def affine(self, form: Affine, names, const: bool = False) -> k.Expr:
        coeffs = {v: c for v, c in form.coeffs.items() if v in names}
        return affine_expr(coeffs, form.const if const else 0, self.it)

    def decode(self, flat: k.Expr, names: tuple[str, ...], offsets: bool) -> list[k.Stmt]:
        """Declare ``names`` from a row-major flat index over their sizes (plus range starts)."""
        sizes = tuple(self.g.size(v) for v in names)
        stmts = []
        for var, size, stride in zip(names, sizes, row_major_strides(sizes)):
            value = flat
            if stride != 1:
                value = k.BinOp("/", value, self.c(stride), self.it)
            if var != names[0]:
                value = k.BinOp("%", value, self.c(size), self.it)
            if offsets and self.g.ranges[var][0]:
                value = self.add(value, self.c(self.g.ranges[var][0]))
            stmts.append(k.Declare(var, self.it, value))
        return stmts

    def in_range(self, value: k.Expr, upper: int) -> k.Expr:
        return k.BinOp("&&", k.BinOp(">=", value, self.c(0), "bool"),
                       k.BinOp("<", value, self.c(upper), "bool"), "bool")

    @staticmethod
    def all_of(conds: list[k.Expr]) -> k.Expr | None:
        result = None
        for cond in conds:
            result = cond if result is None else k.BinOp("&&", result, cond, "bool")
        return result

    def load(self, tensor: str, index: k.Expr) -> k.Expr:
        """An operand's element as it is packed: as float32, or (AMX) its bfloat16 bits."""
        if self.amx:
            return k.Load(self.ctx.param(tensor), index, "uint16")
        return _cast(self.ctx.load(tensor, index), "float32")

    @property
    def zero(self) -> k.Const:
        """The packed zero (float32 0.0 or the bits of bfloat16 +0)."""
        return k.Const(0, "uint16") if self.amx else k.Const(0.0, "float32")

    # -- operands packed once -------------------------------------------------------------------
    def _packs_once(self, operand: str) -> bool:
        """Whether ``operand`` ("a" or "b") is packed once, by a kernel of its own before the
        product (:meth:`packing_kernel`), rather than by every tile that reads it: on AMX,
        where the tiles multiply so fast that packing dominates (bf16 GEMM 2048 on 2 cores:
        12 ms, 6 of them packing), when more than one tile reads each packed block (A's
        blocks are read by every tile of their rows, B's by every tile of their columns) and
        the packed operand fits :data:`PACKED_ONCE_MAX_BYTES`."""
        if not self.amx:
            return False
        readers = self.n_nt if operand == "a" else self.n_mt
        size = self.pack_units[operand] * self.pack_block[operand] * 2
        return readers >= PACKED_ONCE_MIN_READERS and size <= PACKED_ONCE_MAX_BYTES

    def prepacked(self, operand: str) -> bool:
        """Whether ``operand`` ("a" or "b") comes packed from :meth:`packing_kernel`."""
        return operand in self.packed_once

    def _pack_unit(self, operand: str) -> k.Expr:
        """The packed block of ``operand`` that this tile reads in K block ``tc_kb``: blocks
        run batch, then the tile's rows (A) or columns (B), then K block fastest."""
        tiles = self.n_mt if operand == "a" else self.n_nt
        tile = self.v("tc_mt" if operand == "a" else "tc_nt")
        if self.g.batch:
            tile = self.add(self.mul(self.v("tc_bt"), tiles), tile)
        return self.add(self.mul(tile, self.blocks), self.v("tc_kb"))

    def _packed_view(self, operand: str) -> k.LocalArray:
        """``tc_A`` or ``tc_B`` as a window onto the operand's packed block for this tile and
        K block (packed by :meth:`packing_kernel`)."""
        scratch = self.packed_once[operand]
        block = self.pack_block[operand]
        offset = self.mul(self._pack_unit(operand), block)
        return k.LocalArray(f"tc_{operand.upper()}", self.packed, (block,), "register",
                            restrict=True, view=(scratch.name, offset))

    def _tile_bounds(self, side: str) -> tuple[k.Declare, k.Declare]:
        """The declarations of this tile's first row and row count (``side`` "m": ``tc_m0``,
        ``tc_mlen`` from ``tc_mt``), or first column and column count (``side`` "n")."""
        extent, size = (self.m, self.t.mt) if side == "m" else (self.n, self.t.nt)
        start = f"tc_{side}0"
        return (k.Declare(start, self.it, self.mul(self.v(f"tc_{side}t"), size)),
                k.Declare(f"tc_{side}len", self.it, self._min(self.c(extent), self.v(start), size)))

    def _staging(self, a: bool, b: bool) -> list[k.Stmt]:
        """The blocks that packing A (where ``a``) and B (where ``b``) stage an operand in
        before it is turned into the AMX tiles' layouts: ``tc_P``, A's panels
        (:attr:`a_transposed`), and ``tc_S``, B's panels or columns (:meth:`pairs_of_b`)."""
        t = self.t
        staged = []
        if a and self.a_transposed:
            staged.append(k.LocalArray("tc_P", self.packed, (t.mt * self.kc,), "register",
                                       align=64, restrict=True))
        if b and self.amx:
            staged.append(k.LocalArray("tc_S", self.packed, (t.nt * self.kc,), "register",
                                       align=64, restrict=True))
        return staged

    def _index_tables(self, a: bool, b: bool) -> list[k.Stmt]:
        """The per-tile and per-K-row index and guard tables that packing A (``a``) and B
        (``b``) read (:meth:`row_tables`, :meth:`column_tables`, :meth:`k_tables`); none
        where neither is packed here."""
        if not (a or b):
            return []
        t, g, it = self.t, self.g, self.it
        rows = self.rows_per_block
        tables = [k.LocalArray("tc_am", it, (t.mt,), "register")] if a else []
        tables += [k.LocalArray("tc_ak", it, (rows,), "register"),
                   k.LocalArray("tc_bk", it, (rows,), "register")]
        for i, _ in enumerate(g.a_guards):
            if a:
                tables.append(k.LocalArray(f"tc_gam{i}", it, (t.mt,), "register"))
            tables.append(k.LocalArray(f"tc_gak{i}", it, (rows,), "register"))
        for i, _ in enumerate(g.b_guards):
            tables.append(k.LocalArray(f"tc_gbk{i}", it, (rows,), "register"))
        if b:
            tables.append(k.LocalArray("tc_bn", it, (t.nt,), "register"))
            for i, _ in self.n_guards():
                tables.append(k.LocalArray(f"tc_gbn{i}", it, (t.nt,), "register"))
        return tables

    def packing_kernel(self, operand: str) -> k.Kernel:
        """The kernel that packs ``operand`` ("a" or "b") once (:meth:`_packs_once`), each
        (batch, tile row or column, K block) a unit of OpenMP work, exactly as a tile of the
        product would pack it, into the scratch buffer that the product's tiles then read in
        place (:meth:`_packed_view`)::

            for each unit (batch, mt or nt, kb):
                tc_A = packed_a + unit * mt * kc:  pack A's rows of the tile, as rows
                tc_B = packed_b + unit * nt * kc:  pack B's columns, turned into pairs
        """
        g, t, it = self.g, self.t, self.it
        assert self.amx and operand in self.packed_once, operand
        scratch = self.packed_once[operand]
        self.ctx.params[scratch.name] = k.Param(scratch.name, self.packed, output=True)
        a = operand == "a"
        tiles = self.n_mt if a else self.n_nt
        unit = self.v("tc_u")
        body: list[k.Stmt] = self._index_tables(a, not a)
        body += self._staging(a, not a)
        body.append(k.Declare("tc_kb", it, k.BinOp("%", unit, self.c(self.blocks), it)))
        tile = k.BinOp("/", unit, self.c(self.blocks), it)
        if g.batch:
            body.append(k.Declare("tc_bt", it, k.BinOp("/", tile, self.c(tiles), it)))
            body += self.decode(self.v("tc_bt"), g.batch, offsets=False)
            tile = k.BinOp("%", tile, self.c(tiles), it)
        side = "m" if a else "n"
        body += [k.Declare(f"tc_{side}t", it, tile), *self._tile_bounds(side),
                 self.row_tables() if a else self.column_tables()]
        body += [self._packed_view(operand), *self.block_bounds(), *self.k_tables()]
        if a:
            body += [self.pack_a(), self.zero_tails(a=True, b=False), self.rows_from_panels()]
        else:
            body += [self.pack_b(), self.zero_tails(a=False, b=True), self.pairs_of_b()]
        units = self.pack_units[operand]
        loop = k.For("tc_u", 0, units, k.block(*body), kind="parallel")
        params = tuple(sorted(self.ctx.params.values(), key=lambda p: (p.output, p.name)))
        what = (f"A packed as {self.a_packing}" if a else
                f"B packed as pairs{' read along K' if self.b_along_k else ''}")
        schedule = (f"cpu packing for AMX, once for every tile: {what}, {units} blocks of "
                    f"{'rows' if a else 'columns'} {t.mt if a else t.nt} x K {self.kc}")
        return k.Kernel(f"{self.name}_pack_{operand}", params, loop, k.Launch((units,), (1,)),
                        schedule, flops=0, uses=frozenset(self.ctx.uses), scratch=(scratch,))

    # -- the kernel --------------------------------------------------------------------------------
    def kernel(self) -> k.Kernel:
        g, t = self.g, self.t
        f32 = "float32"
        it = self.it
        pack_a, pack_b = not self.prepacked("a"), not self.prepacked("b")
        for scratch in self.packed_once.values():
            self.ctx.params[scratch.name] = k.Param(scratch.name, self.packed, output=False)
        body: list[k.Stmt] = [
            k.LocalArray("tc_C", f32, (t.mt * t.nt,), "register", align=64,
                         restrict=True),
            *([k.LocalArray("tc_A", self.packed, (t.mt * self.kc,), "register", align=64,
                            restrict=True)] if pack_a else []),
            *([k.LocalArray("tc_B", self.packed, (t.nt * self.kc,), "register", align=64,
                            restrict=True)] if pack_b else []),
            *self._staging(pack_a, pack_b),
            *self._index_tables(pack_a, pack_b),
        ]
        # Which tile: K slice, batch, then M, then N fastest.
        tile = self.v("tc_t")
        body.append(k.Declare("tc_nt", it, k.BinOp("%", tile, self.c(self.n_nt), it)))
        body.append(k.Declare("tc_mt", it, k.BinOp(
            "%", k.BinOp("/", tile, self.c(self.n_nt), it), self.c(self.n_mt), it)))
        per_slice = self.tiles // self.split
        if g.batch:
            batch = k.BinOp("/", tile, self.c(self.n_nt * self.n_mt), it)
            if self.split > 1:
                batch = k.BinOp("%", batch, self.c(g.extent(g.batch)), it)
            body.append(k.Declare("tc_bt", it, batch))
            body += self.decode(self.v("tc_bt"), g.batch, offsets=False)
        if self.split > 1:
            body.append(k.Declare("tc_s", it, k.BinOp("/", tile, self.c(per_slice), it)))
        (m0, mlen), (n0, nlen) = self._tile_bounds("m"), self._tile_bounds("n")
        body += [m0, n0, mlen, nlen]
        body.append(k.For("tc_z", 0, t.mt * t.nt,
                          k.StoreLocal("tc_C", (self.v("tc_z"),), k.Const(0.0, f32)), kind="simd"))
        if pack_a:
            body.append(self.row_tables())
        if pack_b:
            body.append(self.column_tables())
        first, last = self.c(0), self.c(self.blocks)
        if self.split > 1:  # this slice's K blocks
            first = self.mul(self.v("tc_s"), self.slice_blocks)
            last = self.add(first, self._min(self.c(self.blocks), first, self.slice_blocks))
        views = [self._packed_view(operand) for operand in self.packed_once]
        blocks = k.For("tc_kb", first, last, k.block(
            *self.block_bounds(), *views,
            *(self.k_tables() if pack_a or pack_b else []),
            self.pack_b() if pack_b else None, self.pack_a() if pack_a else None,
            self.zero_tails(a=pack_a, b=pack_b),
            self.rows_from_panels() if pack_a else None,
            self.pairs_of_b() if pack_b else None,
            self.micro_kernels()))
        if self.amx:  # this thread's tiles, configured for this unit of work
            blocks = k.block(k.MatrixOp("begin"), blocks, k.MatrixOp("end"))
        body.append(blocks)
        body.append(self.epilogue() if self.split == 1 else self.store_partials())
        loop = k.For("tc_t", 0, self.tiles, k.block(*body), kind="parallel")
        params = tuple(sorted(self.ctx.params.values(), key=lambda p: (p.output, p.name)))
        k_size = self.k_in * self.k_out
        schedule = (f"cpu-tiled GEMM: M {self.m} x N {self.n} x K {k_size}"
                    f"{f' x batch {g.extent(g.batch)}' if g.batch else ''}, "
                    f"{dataclasses.replace(t, split=self.split).describe()}, "
                    f"{self.tiles} tiles over the cores, K in {self.blocks} blocks of <= {self.kc}"
                    f", {len(self.nc.guards)} guards packed as zeros"
                    f", A packed as {self.a_packing}"
                    f"{', B read along K' if self.b_along_k else ''}"
                    f"{' and turned into pairs' if self.b_columns else ''}"
                    f"{self._packed_once_note()}")
        return k.Kernel(self.name if self.split == 1 else f"{self.name}_partial", params, loop,
                        k.Launch((self.tiles,), (1,)), schedule, flops=2 * self.cells * k_size,
                        uses=frozenset(self.ctx.uses),
                        scratch=(self.scratch,) if self.scratch else ())

    def _packed_once_note(self) -> str:
        """The schedule's note on the operands packed by kernels before it, if any."""
        if not self.packed_once:
            return ""
        names = " and ".join(operand.upper() for operand in self.packed_once)
        return f", {names} packed once before the tiles"

    def _min(self, total: k.Expr, start: k.Expr, size: int) -> k.Expr:
        rest = k.BinOp("-", total, start, self.it)
        return k.Select(k.BinOp("<", rest, self.c(size), "bool"), rest, self.c(size), self.it)

    def row_tables(self) -> k.Stmt:
        """Per tile row: A's flat index and each A guard's value, from M and batch variables."""
        g = self.g
        r = self.v("tc_r")
        stmts = self.decode(self.add(self.v("tc_m0"), r), g.m_vars, offsets=False)
        known = set(g.m_vars) | set(g.batch)
        stmts.append(k.StoreLocal("tc_am", (r,), self.affine(g.a[1], known, const=True)))
        for i, guard in enumerate(g.a_guards):
            stmts.append(k.StoreLocal(f"tc_gam{i}", (r,), self.affine(guard.form, known, True)))
        return k.For("tc_r", 0, self.v("tc_mlen"), k.block(*stmts))

    def block_bounds(self) -> list[k.Stmt]:
        """This reduction block: outer rows [tc_ko0, tc_ko1), inner range [tc_ki0, tc_ki1)."""
        it = self.it
        kb = self.v("tc_kb")
        row_block = k.BinOp("/", kb, self.c(self.chunks), it) if self.chunks > 1 else kb
        chunk = k.BinOp("%", kb, self.c(self.chunks), it) if self.chunks > 1 else self.c(0)
        return [
            k.Declare("tc_ko0", it, self.mul(row_block, self.rows_per_block)),
            k.Declare("tc_kon", it, self._min(self.c(self.k_out), self.v("tc_ko0"),
                                              self.rows_per_block)),
            k.Declare("tc_ki0", it, self.mul(chunk, self.chunk)),
            k.Declare("tc_kin", it, self._min(self.c(self.k_in), self.v("tc_ki0"), self.chunk)),
            k.Declare("tc_klen", it, self.mul(self.v("tc_kon"), self.v("tc_kin"))),
        ]

    def k_tables(self) -> list[k.Stmt]:
        """Per outer reduction row of the block: A's and B's index and guard parts."""
        g = self.g
        q = self.v("tc_q")
        stmts = self.decode(self.add(self.v("tc_ko0"), q), g.k_outer, offsets=True)
        outer = set(g.k_outer)
        stmts.append(k.StoreLocal("tc_ak", (q,), self.affine(g.a[1], outer)))
        b_fixed = outer | set(g.batch)
        stmts.append(k.StoreLocal("tc_bk", (q,), self.affine(g.b[1], b_fixed, const=True)))
        for i, guard in enumerate(g.a_guards):
            stmts.append(k.StoreLocal(f"tc_gak{i}", (q,), self.affine(guard.form, outer)))
        for i, guard in enumerate(g.b_guards):
            stmts.append(k.StoreLocal(f"tc_gbk{i}", (q,), self.affine(guard.form, b_fixed, True)))
        return [k.For("tc_q", 0, self.v("tc_kon"), k.block(*stmts))]

    def _inner_value(self, form: Affine) -> k.Expr:
        """The innermost reduction variable's contribution (``ki`` counts from its range start)."""
        g = self.g
        if g.k_inner is None:
            return self.c(0)
        coeff = form.coeffs.get(g.k_inner, 0)
        if not coeff:
            return self.c(0)
        value = self.add(self.v("tc_ki"), self.c(g.ranges[g.k_inner][0]))
        return self.mul(value, coeff)

    @property
    def a_panels(self) -> bool:
        """Whether the micro-kernels read A as panels (:attr:`_Gemm.a_panels`; never AMX
        tiles, which load rows: :attr:`a_transposed`)."""
        return self.g.a_panels and not self.amx

    @property
    def a_transposed(self) -> bool:
        """AMX with A contiguous along M (:attr:`_Gemm.a_panels`, a weight gradient): A is
        packed as panels into ``tc_P``, reading along M, and each 32 x 32 piece turned into
        the tiles' rows in ``tc_A`` in vector registers (:meth:`rows_from_panels`)."""
        return self.g.a_panels and self.amx

    @property
    def a_packing(self) -> str:
        """How A is packed, as the schedule's description says it."""
        if self.a_transposed:
            return "panels turned into rows"
        return "panels" if self.a_panels else "rows"

    def in_panels(self, panel: k.Expr, kk: k.Expr, within: k.Expr, width: int) -> k.Expr:
        """Element ``within`` of panel ``panel`` at depth ``kk``, in panels of ``width``
        elements per depth (``[panel][kk][within]``): A's panels of ``mr`` rows, B's of ``nr``
        columns."""
        return self.add(self.mul(self.add(self.mul(panel, self.kc), kk), width), within)

    def panel_index(self, row_block: k.Expr, i: k.Expr, kk: k.Expr) -> k.Expr:
        """Row ``row_block * mr + i``, depth ``kk`` in panels of ``mr`` rows per depth."""
        return self.in_panels(row_block, kk, i, self.t.mr)

    def a_index(self, row_block: k.Expr, i: k.Expr, kk: k.Expr) -> k.Expr:
        """Where row ``row_block * mr + i``, depth ``kk`` of the block lies in ``tc_A``."""
        mr = self.t.mr
        if self.a_panels:
            return self.panel_index(row_block, i, kk)
        if self.a_rows_at_offsets:
            # The block's row at depth kk, then i rows on: unrolled over i, the reads are one
            # index and constant offsets. Written as below, gcc gave a 13-row vector register
            # block an induction variable per row, two of them spilled (ResNet-9's M 524288 x
            # N 128 x K 576 GEMM 4.5% slower); PoCL's compiler, given this form, made the
            # story net's GEMMs 10% slower.
            return self.add(self.add(self.mul(self.mul(row_block, mr), self.kc), kk),
                            self.mul(i, self.kc))
        return self.add(self.mul(self.add(self.mul(row_block, mr), i), self.kc), kk)

    def pack_a(self) -> k.Stmt:
        """tc_A = A[m, k] for the tile's rows (0 where a guard fails or past the edge), as
        rows or as panels (:attr:`a_panels`); on AMX, panels in ``tc_P`` that
        :meth:`rows_from_panels` then turns into rows (:attr:`a_transposed`)."""
        if self.a_transposed:
            return self.pack_a_panels("tc_P")
        return self.pack_a_panels("tc_A") if self.a_panels else self.pack_a_rows()

    def pack_a_panels(self, target: str) -> k.Stmt:
        """target[ip][kk][i] = A[ip * mr + i, kk]: per depth, a register block's ``mr`` rows.

        A block inside one run of M's innermost variable, where no guard reads that variable,
        tests its guards once and copies ``mr`` elements a stride apart (1 for the weight
        gradient: ``mr`` neighbouring channels); other blocks test each element."""
        g, t = self.g, self.t
        it = self.it
        q, ki, ip, i = self.v("tc_q"), self.v("tc_ki"), self.v("tc_ip"), self.v("tc_i")
        kk = self.add(self.mul(q, self.v("tc_kin")), k.BinOp("-", ki, self.v("tc_ki0"), it))
        dst = self.panel_index(ip, i, kk)

        def element(r: k.Expr) -> tuple[k.Expr, k.Expr]:  # (valid, A's flat index) of row r
            src = self.add(self.add(k.LoadLocal("tc_am", (r,), it), self.v("tc_ak_q")),
                           self._inner_value(g.a[1]))
            conds = [self.in_range(self.add(self.add(k.LoadLocal(f"tc_gam{n}", (r,), it),
                                                     k.LoadLocal(f"tc_gak{n}", (q,), it)),
                                            self._inner_value(guard.form)), guard.upper)
                     for n, guard in enumerate(g.a_guards)]
            return self.all_of([k.BinOp("<", r, self.v("tc_mlen"), "bool")] + conds), src

        r = self.add(self.mul(ip, t.mr), i)
        cond, src = element(r)
        careful = k.For("tc_i", 0, t.mr, k.StoreLocal(target, (dst,), k.Select(
            cond, self.load(g.a[0], k.Select(cond, src, self.c(0), it)), self.zero,
            self.packed)), kind="unroll")
        block: k.Stmt = careful
        if g.a_copies_runs:
            last = g.m_vars[-1]
            stride = g.a[1].coeffs.get(last, 0)
            r0 = self.mul(ip, t.mr)
            cond0, src0 = element(r0)
            offset = k.BinOp("%", self.add(self.v("tc_m0"), r0), self.c(g.size(last)), it)
            run = self.all_of([
                k.BinOp("<=", self.add(r0, self.c(t.mr)), self.v("tc_mlen"), "bool"),
                k.BinOp("<=", self.add(offset, self.c(t.mr)), self.c(g.size(last)), "bool")])
            if self.vector_copies and stride == 1 and \
                    dt.dtype_name(self.ctx.dtype(g.a[0])) == "float32":
                copy = self._copy_run(g.a[0], target, self.panel_index(ip, self.c(0), kk), src0)
            else:
                copy = k.For("tc_i", 0, t.mr, k.StoreLocal(target, (dst,), self.load(
                    g.a[0], self.add(src0, self.mul(i, stride)))), kind="unroll")
            zero = k.For("tc_i", 0, t.mr, k.StoreLocal(target, (dst,), self.zero),
                         kind="unroll")
            block = k.If(run, k.If(cond0, copy, zero), careful)
        # Depth by depth, each depth's panels in turn: the reads run along M (A's unit stride
        # here). Panel by panel instead reads one element per cache line: measured 1.3x slower
        # (the weight gradient of a 128 -> 128 layer at 16x16, one thread). Except where a
        # panel is a whole number of 4 KiB pages: a depth's stores then fall a page apart, on
        # the same few cache sets, and evict each other. Attention's dV = P^T dO (M 256 x N 64
        # x K 256, mr 8, kc 128: 32 panels of 4096 bytes) took 8.4-8.9 ms on one EPYC core
        # packed depth by depth, 3.8 ms panel by panel (its reads: 8 neighbours a row).
        blocks = self.ceil_div(self.v("tc_mlen"), t.mr)
        depths = (self.v("tc_ki0"), self.add(self.v("tc_ki0"), self.v("tc_kin")))
        if self.panels_alias():
            loops = k.For("tc_ip", 0, blocks, k.For("tc_ki", *depths, block))
        else:
            loops = k.For("tc_ki", *depths, k.For("tc_ip", 0, blocks, block))
        return k.For("tc_q", 0, self.v("tc_kon"), k.block(
            k.Declare("tc_ak_q", it, k.LoadLocal("tc_ak", (q,), it)), loops))

    def panels_alias(self) -> bool:
        """Whether A's packed panels are a multiple of 4 KiB apart (``kc * mr`` elements), so
        that one depth's elements in consecutive panels map to the same L1 sets."""
        return (self.kc * self.t.mr * cpu_operand_bytes(self.t)) % 4096 == 0

    def _copy_run(self, tensor: str, target: str, dst: k.Expr, src: k.Expr) -> k.Stmt:
        """``mr`` neighbouring float32 elements of ``tensor`` from ``src`` to ``target`` from
        ``dst``, as OpenCL vectors that may start anywhere (the widest of
        ``k.UNALIGNED_COPY_WIDTHS`` first, then one element: 14 rows are 8 + 4 + 2). PoCL
        does not vectorise the unrolled element copies that gcc does: the story net's weight
        gradient (M 288 x N 32 x K 40000, mr 8) took 5.9 ms with them and 4.0 ms with one
        ``vload8`` (a bare pyopencl loop, 2-core EPYC).

            vstore8(vload8(0, &A[src]), 0, &tc_A[dst]);
        """
        buffer = self.ctx.param(tensor)
        pieces: list[k.Stmt] = []
        offset = 0
        for width in sorted(k.UNALIGNED_COPY_WIDTHS + (1,), reverse=True):
            while self.t.mr - offset >= width:
                at, to = self.add(src, self.c(offset)), self.add(dst, self.c(offset))
                pieces.append(k.StoreLocal(target, (to,), self.load(tensor, at)) if width == 1
                              else k.CopyLocal(target, (to,), buffer, (at,), width, "float32",
                                               aligned=False))
                offset += width
        return k.block(*pieces)

    def pack_a_rows(self) -> k.Stmt:
        """tc_A[r][kk] = A[m, k] for the tile's rows (0 where a guard fails or past the edge)."""
        g, t = self.g, self.t
        r, q, ki = self.v("tc_r"), self.v("tc_q"), self.v("tc_ki")
        inner_guards, outer_conds = [], []
        for i, guard in enumerate(g.a_guards):
            value = self.add(k.LoadLocal(f"tc_gam{i}", (r,), self.it),
                             k.LoadLocal(f"tc_gak{i}", (q,), self.it))
            if g.k_inner and guard.form.coeffs.get(g.k_inner):
                inner_guards.append((f"tc_ga{i}", value, guard))
            else:
                outer_conds.append(self.in_range(value, guard.upper))
        dst = self.add(self.add(self.mul(r, self.kc), self.mul(q, self.v("tc_kin"))),
                       k.BinOp("-", ki, self.v("tc_ki0"), self.it))
        src = self.add(self.v("tc_src"), self._inner_value(g.a[1]))
        conds = [self.in_range(self.add(self.v(name), self._inner_value(guard.form)),
                               guard.upper) for name, _, guard in inner_guards]
        cond = self.all_of(conds)
        if cond is None:
            value: k.Expr = self.load(g.a[0], src)
        else:
            value = k.Select(cond, self.load(g.a[0], k.Select(cond, src, self.c(0), self.it)),
                             self.zero, self.packed)
        copy = k.For("tc_ki", self.v("tc_ki0"), self.add(self.v("tc_ki0"), self.v("tc_kin")),
                     k.StoreLocal("tc_A", (dst,), value), kind="simd")
        zero = k.For("tc_ki", self.v("tc_ki0"), self.add(self.v("tc_ki0"), self.v("tc_kin")),
                     k.StoreLocal("tc_A", (dst,), self.zero), kind="simd")
        valid = self.all_of([k.BinOp("<", r, self.v("tc_mlen"), "bool")] + outer_conds)
        row = k.block(
            k.Declare("tc_src", self.it, self.add(k.LoadLocal("tc_am", (r,), self.it),
                                                   k.LoadLocal("tc_ak", (q,), self.it))),
            *[k.Declare(name, self.it, value) for name, value, _ in inner_guards],
            k.If(valid, copy, zero))
        # Rows past the edge (to a whole register block) are zero; tc_am is not read there.
        safe_row = k.If(k.BinOp("<", r, self.v("tc_mlen"), "bool"), row,
                        k.For("tc_ki", self.v("tc_ki0"), self.add(self.v("tc_ki0"),
                                                                  self.v("tc_kin")),
                              k.StoreLocal("tc_A", (dst,), self.zero), kind="simd"))
        rows = self.mul(self.ceil_div(self.v("tc_mlen"), t.mr), t.mr)
        return k.For("tc_r", 0, rows, k.For("tc_q", 0, self.v("tc_kon"), safe_row))

    def column_tables(self) -> k.Stmt:
        """Per tile column: B's flat index and each N-reading B guard's value, from the N
        variables (``tc_n0 + c`` decoded as :meth:`row_tables` decodes M). Filled for all
        ``nt`` columns, past the edge too, so that a whole panel can read them."""
        g = self.g
        c = self.v("tc_c")
        stmts = self.decode(self.add(self.v("tc_n0"), c), g.n_vars, offsets=False)
        n_vars = set(g.n_vars)
        stmts.append(k.StoreLocal("tc_bn", (c,), self.affine(g.b[1], n_vars)))
        for i, guard in self.n_guards():
            stmts.append(k.StoreLocal(f"tc_gbn{i}", (c,), self.affine(guard.form, n_vars)))
        return k.For("tc_c", 0, self.t.nt, k.block(*stmts))

    def n_guards(self) -> list[tuple[int, _Guard]]:
        """The B guards that read an N variable (:meth:`_Gemm.n_guards`)."""
        return self.g.n_guards()

    def b_row_stride(self) -> int | None:
        """``s`` when B's N part is ``s * (flat N index)`` (N's variables are one strided
        block of B, as a single variable is), else None."""
        coeffs = self.g.b[1].coeffs
        sizes = tuple(self.g.size(v) for v in self.g.n_vars)
        s = coeffs.get(self.g.n_vars[-1], 0)
        linear = all(coeffs.get(v, 0) == s * stride
                     for v, stride in zip(self.g.n_vars, row_major_strides(sizes)))
        return s if linear else None

    @property
    def b_along_k(self) -> bool:
        """Whether B is packed reading along K: when B is contiguous along K and not along N
        (the data gradient's filter ``F[ky, kx, ci, co]`` with N = ci, K = (ky, kx, co)).
        Reading along N there loads one element per cache line, each a row of B apart: at
        512 channels every such line falls in the same two L1 sets."""
        g = self.g
        return (g.k_inner is not None and g.b[1].coeffs.get(g.k_inner) == 1
                and self.b_row_stride() != 1)

    @property
    def b_columns(self) -> bool:
        """AMX with B read along K (:attr:`b_along_k`): B is staged column by column
        (``tc_S[jp][j][kk]``, each column's depths contiguous, as B has them). Other AMX
        products stage B as the FMAs' panels (``tc_S[jp][kk][j]``). Either way
        :meth:`pairs_of_b` turns it into the tiles' rows of pairs in registers."""
        return self.amx and self.b_along_k

    def column_index(self, jp: k.Expr, kk: k.Expr, j: k.Expr) -> k.Expr:
        """Where column ``jp * nr + j``, depth ``kk`` lies in ``tc_S`` (:attr:`b_columns`)."""
        return self.add(self.mul(self.add(self.mul(jp, self.t.nr), j), self.kc), kk)

    def panel_b_index(self, jp: k.Expr, kk: k.Expr, j: k.Expr) -> k.Expr:
        """Column ``jp * nr + j``, depth ``kk`` in panels of ``nr`` columns per depth."""
        return self.in_panels(jp, kk, j, self.t.nr)

    def staged_b(self, jp: k.Expr, kk: k.Expr, j: k.Expr) -> tuple[str, k.Expr]:
        """(array, index) where pack_b puts column ``jp * nr + j``, depth ``kk``: ``tc_B``
        itself for the FMAs; ``tc_S`` for AMX, as columns or panels (:attr:`b_columns`)."""
        if not self.amx:
            return "tc_B", self.b_index(jp, kk, j)
        if self.b_columns:
            return "tc_S", self.column_index(jp, kk, j)
        return "tc_S", self.panel_b_index(jp, kk, j)

    def b_index(self, jp: k.Expr, kk: k.Expr, j: k.Expr) -> k.Expr:
        """Where column ``jp * nr + j``, depth ``kk`` of the block lies in ``tc_B``: panels of
        ``nr`` columns, ``tc_B[jp][kk][j]``; for AMX, rows of K pairs with each column's two
        interleaved, ``tc_B[jp][kk / 2][j][kk % 2]`` (a B tile's rows: 16 columns of 2)."""
        t = self.t
        if not self.amx:
            return self.panel_b_index(jp, kk, j)
        odd = k.BinOp("%", kk, self.c(2), self.it)
        pair_row = self.add(self.mul(jp, self.kc), k.BinOp("-", kk, odd, self.it))
        return self.add(self.add(self.mul(pair_row, t.nr), self.mul(j, 2)), odd)

    def pack_b(self) -> k.Stmt:
        """tc_B[jp][kk][j] = B[k, n0 + jp * nr + j] (0 where a guard fails or past the edge).

        A panel inside one run of N's innermost variable, with no guard on N, is copied by a
        plain (vectorisable) loop; other panels test each element and take its address from
        the column table."""
        g, t = self.g, self.t
        it = self.it
        q, ki, jp, j = self.v("tc_q"), self.v("tc_ki"), self.v("tc_jp"), self.v("tc_j")
        n_guards = self.n_guards()
        k_conds = []
        for i, guard in enumerate(g.b_guards):
            if all(i != n for n, _ in n_guards):
                value = self.add(k.LoadLocal(f"tc_gbk{i}", (q,), it),
                                 self._inner_value(guard.form))
                k_conds.append(self.in_range(value, guard.upper))
        kk = self.add(self.mul(q, self.v("tc_kin")), k.BinOp("-", ki, self.v("tc_ki0"), it))
        n_start = self.add(self.v("tc_n0"), self.mul(jp, t.nr))
        column = self.add(self.mul(jp, t.nr), j)  # within the tile
        col = self.add(self.v("tc_nb"), j)  # within N
        target, dst = self.staged_b(jp, kk, j)
        table_src = self.add(self.v("tc_src"), k.LoadLocal("tc_bn", (column,), it))
        if self.b_along_k:  # tc_src is the row's part only; the inner variable's is added here
            table_src = self.add(table_src, self._inner_value(g.b[1]))
        per_element = [k.BinOp("<", col, self.c(self.n), "bool")] + [
            self.in_range(self.add(self.add(k.LoadLocal(f"tc_gbk{i}", (q,), it),
                                            self._inner_value(guard.form)),
                                   k.LoadLocal(f"tc_gbn{i}", (column,), it)), guard.upper)
            for i, guard in n_guards]
        cond = self.all_of(per_element)
        careful = k.For("tc_j", 0, t.nr, k.StoreLocal(target, (dst,), k.Select(
            cond, self.load(g.b[0], k.Select(cond, table_src, self.c(0), it)),
            self.zero, self.packed)))
        zero = k.For("tc_j", 0, t.nr, k.StoreLocal(target, (dst,), self.zero),
                     kind="simd")
        stride = self.b_row_stride()
        if stride is not None:  # the whole of N is one strided run
            fast_src = self.add(self.v("tc_src"), self.mul(col, stride))
            run = k.BinOp("<=", self.add(self.v("tc_nb"), self.c(t.nr)), self.c(self.n), "bool")
        else:  # runs of the innermost variable
            last = g.n_vars[-1]
            fast_src = self.add(self.add(self.v("tc_src"), k.LoadLocal(
                "tc_bn", (self.mul(jp, t.nr),), it)), self.mul(j, g.b[1].coeffs.get(last, 0)))
            offset = k.BinOp("%", self.v("tc_nb"), self.c(g.size(last)), it)
            run = k.BinOp("<=", self.add(offset, self.c(t.nr)), self.c(g.size(last)), "bool")
        fast = k.For("tc_j", 0, t.nr, k.StoreLocal(target, (dst,), self.load(g.b[0], fast_src)),
                     kind="simd")
        panel: k.Stmt = k.If(run, fast, careful) if not n_guards else careful
        k_valid = self.all_of(k_conds)
        if k_valid is not None:
            panel = k.If(k_valid, panel, zero)
        panels = self.ceil_div(self.v("tc_nlen"), t.nr)
        if self.b_along_k:
            # Column by column, reading along K: B's unit stride (see b_along_k). For AMX
            # into tc_S, where the depths of a column are contiguous too (b_columns).
            guarded = self.all_of(per_element + k_conds)
            element = k.StoreLocal(target, (dst,), k.Select(
                guarded, self.load(g.b[0], k.Select(guarded, table_src, self.c(0), it)),
                self.zero, self.packed))
            return k.For("tc_q", 0, self.v("tc_kon"), k.For("tc_jp", 0, panels, k.block(
                k.Declare("tc_nb", it, n_start), k.For("tc_j", 0, t.nr, k.block(
                    k.Declare("tc_src", it, k.LoadLocal("tc_bk", (q,), it)),
                    k.For("tc_ki", self.v("tc_ki0"), self.add(self.v("tc_ki0"),
                                                             self.v("tc_kin")), element,
                          kind="simd" if self.b_columns else "serial"))))))
        per_k = k.block(
            k.Declare("tc_src", it, self.add(k.LoadLocal("tc_bk", (q,), it),
                                             self._inner_value(g.b[1]))),
            k.For("tc_jp", 0, panels, k.block(k.Declare("tc_nb", it, n_start), panel)))
        return k.For("tc_q", 0, self.v("tc_kon"), k.For(
            "tc_ki", self.v("tc_ki0"), self.add(self.v("tc_ki0"), self.v("tc_kin")), per_k))

    def zero_tails(self, a: bool = True, b: bool = True) -> k.Stmt | None:
        """AMX: ``tc_kpad``, the block's depth rounded up to whole tile rows of A (32
        elements), and zeros in the packed operands (A where ``a``, B where ``b``: those
        packed here) from ``tc_klen`` to it, which the tiles read: products of zeros add
        nothing (in A's panels where they become its rows: :attr:`a_transposed`). None
        otherwise."""
        if not self.amx:
            return None
        t, it = self.t, self.it
        r, jp, j, kk = self.v("tc_r"), self.v("tc_jp"), self.v("tc_j"), self.v("tc_kk")
        depth = self.ceil_div(self.v("tc_klen"), AMX_DEPTH)
        tail = (self.v("tc_klen"), self.v("tc_kpad"))
        rows = self.mul(self.ceil_div(self.v("tc_mlen"), t.mr), t.mr)
        panels = self.ceil_div(self.v("tc_nlen"), t.nr)
        if self.a_transposed:
            ip, i = self.v("tc_ip"), self.v("tc_i")
            a_zeros = k.For("tc_ip", 0, self.ceil_div(self.v("tc_mlen"), t.mr), k.For(
                "tc_kk", *tail, k.For("tc_i", 0, t.mr, k.StoreLocal(
                    "tc_P", (self.panel_index(ip, i, kk),), self.zero), kind="simd")))
        else:
            a_zeros = k.For("tc_r", 0, rows, k.For("tc_kk", *tail, k.StoreLocal(
                "tc_A", (self.add(self.mul(r, self.kc), kk),), self.zero)))
        if self.b_columns:
            b_zeros = k.For("tc_jp", 0, panels, k.For("tc_j", 0, t.nr, k.For(
                "tc_kk", *tail, k.StoreLocal("tc_S", (self.column_index(jp, kk, j),),
                                             self.zero), kind="simd")))
        else:
            b_zeros = k.For("tc_jp", 0, panels, k.For("tc_kk", *tail, k.For(
                "tc_j", 0, t.nr, k.StoreLocal("tc_S", (self.panel_b_index(jp, kk, j),),
                                              self.zero), kind="simd")))
        return k.block(k.Declare("tc_kpad", it, self.mul(depth, AMX_DEPTH)),
                       a_zeros if a else None, b_zeros if b else None)

    def rows_from_panels(self) -> k.Stmt | None:
        """AMX with A packed as panels (:attr:`a_transposed`): each register block's 32 rows
        of ``tc_P``, 32 depths at a time, turned into the rows of ``tc_A`` that its tiles
        load (``MatrixOp`` rows_from_panel: in vector registers). None otherwise."""
        if not self.a_transposed:
            return None
        t = self.t
        ip, ks = self.v("tc_ip"), self.v("tc_ks")
        depth = self.mul(ks, AMX_DEPTH)
        rows = self.add(self.mul(self.mul(ip, t.mr), self.kc), depth)
        panel = self.panel_index(ip, self.c(0), depth)
        steps = k.BinOp("/", self.v("tc_kpad"), self.c(AMX_DEPTH), self.it)
        return k.For("tc_ip", 0, self.ceil_div(self.v("tc_mlen"), t.mr), k.For(
            "tc_ks", 0, steps, k.MatrixOp("rows_from_panel", (), "tc_A", rows, self.kc,
                                          "tc_P", panel)))

    def pairs_of_b(self) -> k.Stmt | None:
        """AMX: B staged in ``tc_S`` (:attr:`b_columns`) turned, 32 depths of a panel at a
        time, into the rows of K pairs of ``tc_B`` that its tiles load, in vector registers:
        ``MatrixOp`` pairs_from_rows (depth rows interleaved two by two) from panels,
        pairs_from_columns (16 columns at a time, transposed) from columns. None for the
        FMAs."""
        if not self.amx:
            return None
        t = self.t
        jp, ks, h = self.v("tc_jp"), self.v("tc_ks"), self.v("tc_h")
        depth = self.mul(ks, AMX_DEPTH)
        steps = k.BinOp("/", self.v("tc_kpad"), self.c(AMX_DEPTH), self.it)
        panels = self.ceil_div(self.v("tc_nlen"), t.nr)
        if not self.b_columns:
            return k.For("tc_jp", 0, panels, k.For("tc_ks", 0, steps, k.MatrixOp(
                "pairs_from_rows", (), "tc_B", self.b_index(jp, depth, self.c(0)), t.nr * 2,
                "tc_S", self.panel_b_index(jp, depth, self.c(0)))))
        half = AMX_BLOCK // 2
        rows = self.add(self.b_index(jp, depth, self.c(0)), self.mul(h, half * 2))
        columns = self.column_index(jp, depth, self.mul(h, half))
        return k.For("tc_jp", 0, panels, k.For("tc_ks", 0, steps, k.For(
            "tc_h", 0, 2, k.MatrixOp("pairs_from_columns", (), "tc_B", rows, t.nr * 2,
                                     "tc_S", columns, source_stride=self.kc), kind="unroll")))

    def _amx_micro_kernels(self) -> k.Stmt:
        """acc[32][32] += A[r][kk] * B[kk][j] per register block on AMX tiles: C in tiles 0-3
        (2 x 2 of 16 x 16 float32, loaded from and stored back to ``tc_C``), per 32-deep step
        A's two row halves in tiles 4-5 and B's two column halves in 6-7, four products::

            for ks in 0 .. tc_kpad / 32:
                tile 4, 5 = tc_A rows ip * 32 + (0 | 16) .., columns ks * 32 ..
                tile 6, 7 = tc_B pair rows jp, ks * 16 .., columns (0 | 16) ..
                tile 0 += 4 * 6; tile 1 += 4 * 7; tile 2 += 5 * 6; tile 3 += 5 * 7
        """
        t = self.t
        half = AMX_BLOCK // 2
        ip, jp, ks = self.v("tc_ip"), self.v("tc_jp"), self.v("tc_ks")

        def c_tiles(op: str) -> list[k.Stmt]:
            return [k.MatrixOp(op, (2 * hr + hc,), "tc_C", self.add(
                self.mul(self.add(self.mul(ip, t.mr), self.c(hr * half)), t.nt),
                self.add(self.mul(jp, t.nr), self.c(hc * half))), t.nt * 4)
                    for hr in (0, 1) for hc in (0, 1)]

        depth = self.mul(ks, AMX_DEPTH)
        a_tiles = [k.MatrixOp("load", (4 + h,), "tc_A", self.add(
            self.mul(self.add(self.mul(ip, t.mr), self.c(h * half)), self.kc), depth),
            self.kc * 2) for h in (0, 1)]
        # Pair row ks * 16 of panel jp; a tile row is 16 columns of 2 (64 bytes) of nr * 2.
        b_tiles = [k.MatrixOp("load", (6 + h,), "tc_B", self.add(
            self.mul(self.add(self.mul(jp, self.kc), depth), t.nr), self.c(h * half * 2)),
            t.nr * 2 * 2) for h in (0, 1)]
        products = [k.MatrixOp("dot_bf16", (2 * hr + hc, 4 + hr, 6 + hc))
                    for hr in (0, 1) for hc in (0, 1)]
        steps = k.BinOp("/", self.v("tc_kpad"), self.c(AMX_DEPTH), self.it)
        reduction = k.For("tc_ks", 0, steps, k.block(*a_tiles, *b_tiles, *products))
        return self._over_register_blocks(k.block(*c_tiles("load"), reduction,
                                                  *c_tiles("store")))

    def micro_kernels(self) -> k.Stmt:
        """acc[mr][nr] += A[r][kk] * B[kk][j] per register block: as vectors
        (:meth:`_vector_micro_kernels`) when ``nr`` is whole vectors of 4 or more floats,
        otherwise as scalar lanes, which gcc keeps in registers when every loop over them is
        unrolled (an ``omp simd`` over acc spills it to memory); on AMX tiles
        (:meth:`_amx_micro_kernels`)."""
        if self.amx:
            return self._amx_micro_kernels()
        t = self.t
        f32 = "float32"
        ip, jp = self.v("tc_ip"), self.v("tc_jp")
        i, j, kk = self.v("tc_i"), self.v("tc_jj"), self.v("tc_kk")
        # Whole groups of nr, no wider than the CPU's vectors: a 16-float vector type on an
        # AVX2 CPU is two ymm registers to GCC, which kept such accumulators on the stack
        # (GEMM 1024 at 15 GFLOP/s on a 2-core Zen 3 against NumPy's 168).
        lanes = next(w for w in (16, 8, 4, 2, 1) if w <= t.simd and t.nr % w == 0)
        if self.vector_registers and lanes >= 4:
            return self._vector_micro_kernels(lanes)
        jv, lane = self.v("tc_jv"), self.v("tc_l")
        j_split = self.add(self.mul(jv, lanes), lane)
        c_index = self.add(self.mul(self.add(self.mul(ip, t.mr), i), t.nt),
                           self.add(self.mul(jp, t.nr), j_split))

        def over_acc(stmt_of) -> k.Stmt:
            inner = k.For("tc_l", 0, lanes, stmt_of(j_split), kind="unroll")
            return k.For("tc_i", 0, t.mr, k.For("tc_jv", 0, t.nr // lanes, inner, kind="unroll"),
                         kind="unroll")

        load_acc = over_acc(lambda jx: k.StoreLocal(
            "tc_acc", (i, jx), k.LoadLocal("tc_C", (c_index,), f32)))
        store_acc = over_acc(lambda jx: k.StoreLocal(
            "tc_C", (c_index,), k.LoadLocal("tc_acc", (i, jx), f32)))
        a = k.LoadLocal("tc_A", (self.a_index(ip, i, kk),), f32)
        b = k.LoadLocal("tc_B", (self.add(self.mul(self.add(self.mul(jp, self.kc), kk), t.nr),
                                          j),), f32)
        fma = k.StoreLocal("tc_acc", (i, j), k.BinOp(
            "+", k.LoadLocal("tc_acc", (i, j), f32),
            k.BinOp("*", k.Var("tc_a", f32), b, f32), f32))
        step = k.For("tc_i", 0, t.mr, k.block(
            k.Declare("tc_a", f32, a), k.For("tc_jj", 0, t.nr, fma, kind="simd")), kind="unroll")
        reduction = k.For("tc_kk", 0, self.v("tc_klen"), step, kind="unroll")
        block = k.block(k.LocalArray("tc_acc", f32, (t.mr, t.nr), "register", align=64),
                        load_acc, reduction, store_acc)
        return self._over_register_blocks(block)

    def _over_register_blocks(self, block: k.Stmt) -> k.Stmt:
        """``block`` for each ``mr x nr`` register block of the tile (``tc_ip``, ``tc_jp``)."""
        t = self.t
        m_blocks = self.ceil_div(self.v("tc_mlen"), t.mr)
        n_blocks = self.ceil_div(self.v("tc_nlen"), t.nr)
        return k.For("tc_jp", 0, n_blocks, k.For("tc_ip", 0, m_blocks, block))

    def _vector_micro_kernels(self, lanes: int) -> k.Stmt:
        """:meth:`micro_kernels` with the register block as ``mr x nr / lanes`` vectors
        (OpenCL's ``float16``, GCC's vector extension in C): a row of B loaded as vectors once
        per ``kk``, each A value broadcast. Scalar lanes that only a full unroll keeps in
        registers made PoCL's launch-time compile take up to 16 s a kernel (GEMM 1024 on
        PoCL: 23 ms unrolled, 35 ms as a loop; as vectors 12-19 ms, compiled in about a
        second; the C backend's 16 ms), and gcc spend most of a GEMM's compile proving the
        lanes' loads and stores apart: as vectors ResNet-9's 22 GEMMs compile in 5-6 s instead
        of 22 (2-core EPYC, one at a time), GEMM 1024 and 2048 run as fast, and the 14 x 32
        blocks' inner loop no longer spills (docs/measurements.md, stop 31)."""
        t = self.t
        f32 = "float32"
        vec = f"float32x{lanes}"
        ip, jp = self.v("tc_ip"), self.v("tc_jp")
        i, jv, kk = self.v("tc_i"), self.v("tc_jv"), self.v("tc_kk")
        groups = t.nr // lanes
        # Element indices of vector starts: multiples of the width in 64-byte aligned arrays.
        c_index = self.add(self.mul(self.add(self.mul(ip, t.mr), i), t.nt),
                           self.add(self.mul(jp, t.nr), self.mul(jv, lanes)))
        b_index = self.add(self.mul(self.add(self.mul(jp, self.kc), kk), t.nr),
                           self.mul(jv, lanes))

        def over_acc(stmt: k.Stmt) -> k.Stmt:
            return k.For("tc_i", 0, t.mr, k.For("tc_jv", 0, groups, stmt, kind="unroll"),
                         kind="unroll")

        load_acc = over_acc(k.CopyLocal("tc_acc", (i, jv), "tc_C", (c_index,), lanes, f32))
        store_acc = over_acc(k.CopyLocal("tc_C", (c_index,), "tc_acc", (i, jv), lanes, f32))
        load_b = k.For("tc_jv", 0, groups, k.CopyLocal("tc_b", (jv,), "tc_B", (b_index,), lanes,
                                                       f32), kind="unroll")
        a = k.LoadLocal("tc_A", (self.a_index(ip, i, kk),), f32)
        fma = k.StoreLocal("tc_acc", (i, jv), k.BinOp(
            "+", k.LoadLocal("tc_acc", (i, jv), vec),
            k.BinOp("*", k.Cast(vec, k.Var("tc_a", f32)), k.LoadLocal("tc_b", (jv,), vec), vec),
            vec))
        step = k.block(
            k.LocalArray("tc_b", vec, (groups,), "register"), load_b,
            k.For("tc_i", 0, t.mr, k.block(k.Declare("tc_a", f32, a),
                                           k.For("tc_jv", 0, groups, fma, kind="unroll")),
                  kind="unroll"))
        reduction = k.For("tc_kk", 0, self.v("tc_klen"), step, kind="unroll")
        block = k.block(k.LocalArray("tc_acc", vec, (t.mr, groups), "register"),
                        load_acc, reduction, store_acc)
        return self._over_register_blocks(block)

    def store_partials(self) -> k.Stmt:
        """Split-K: the tile's sums over this K slice to the scratch buffer, slice-major
        (``partials[s][cell]``, as :func:`gingham.compiler.tiling_gpu.split_sum` reads them)."""
        g, nc, it = self.g, self.nc, self.it
        scratch = self.scratch.name
        self.ctx.params[scratch] = k.Param(scratch, "float32", output=True)
        r, j = self.v("tc_r"), self.v("tc_j")
        stride = dict(zip(nc.out_vars, row_major_strides(nc.out_shape)))
        rows = set(g.m_vars) | set(g.batch)
        row = self.decode(self.add(self.v("tc_m0"), r), g.m_vars, offsets=False)
        row.append(k.Declare("tc_base", it, self.add(
            self.mul(self.v("tc_s"), self.cells),
            affine_expr({o: s for o, s in stride.items() if o in rows}, 0, it))))
        cell = self.decode(self.add(self.v("tc_n0"), j), g.n_vars, offsets=False)
        index = self.add(self.v("tc_base"), affine_expr({o: stride[o] for o in g.n_vars}, 0, it))
        cell.append(k.Store(scratch, index, k.LoadLocal(
            "tc_C", (self.add(self.mul(r, self.t.nt), j),), "float32")))
        return k.For("tc_r", 0, self.v("tc_mlen"), k.block(
            *row, k.For("tc_j", 0, self.v("tc_nlen"), k.block(*cell))))

    def epilogue(self) -> k.Stmt:
        """Finalise each cell of the tile and run the fused elementwise statements."""
        g, nc, ctx = self.g, self.nc, self.ctx
        it = self.it
        f32 = "float32"
        r, j = self.v("tc_r"), self.v("tc_j")
        row = self.decode(self.add(self.v("tc_m0"), r), g.m_vars, offsets=False)
        stride = dict(zip(nc.out_vars, row_major_strides(nc.out_shape)))
        rows = set(g.m_vars) | set(g.batch)
        row.append(k.Declare("tc_base", it, affine_expr(
            {o: s for o, s in stride.items() if o in rows}, 0, it)))
        cell = [k.Var(o, it) for o in nc.out_vars]
        flat = self.v("tc_flat")
        acc = k.LoadLocal("tc_C", (self.add(self.mul(r, self.t.nt), j),), f32)
        stmts: list[k.Stmt] = self.decode(self.add(self.v("tc_n0"), j), g.n_vars, offsets=False)
        stmts.append(k.Declare("tc_flat", it, self.add(self.v("tc_base"), affine_expr(
            {o: stride[o] for o in g.n_vars}, 0, it))))
        ctype = compute_type(ctx.dtype(nc.out))
        result = finalize(nc, ctx, acc, None, cell, flat, ctype, it)
        stmts.append(k.Declare(f"v_{nc.out}", ctype, result))
        registers = {nc.out: k.Var(f"v_{nc.out}", ctype)}
        stmts += _epilogue(self.plan, ctx, cell, flat, it, registers)
        return k.For("tc_r", 0, self.v("tc_mlen"), k.block(
            *row, k.For("tc_j", 0, self.v("tc_nlen"), k.block(*stmts))))
