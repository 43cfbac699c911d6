"""Tiled schedules for sums of products on GPUs (the OpenCL and CUDA dialects).

A contraction ``O = +(A * B)`` is a batched matrix product once its index variables are
grouped: output variables that only ``A`` reads form the row index M, those that only ``B``
reads the column index N, those both read (or neither) a batch index, and the reduction
variables, flattened, the inner index K. A convolution ``O[n, y, x, co] = +(I[n, y + ky - 1,
x + kx - 1, ci] * F[ky, kx, ci, co])`` becomes M = (n, y, x), N = co, K = (ky, kx, ci)
(im2col without materialising it: the flat indices are decoded while staging).

Each work-group computes a TM x TN block of one batch entry; each work-item a RM x RN register
tile. Per step of TK along K, the work-group copies a TM x TK slice of A and a TK x TN slice of
B into local memory (coalesced: work-items run along the operand's unit-stride index), then
every work-item accumulates its register tile from it. The next slices are read into registers
while the current ones are used, and local memory is double-buffered: one barrier per step.

Split-K: when the output has fewer tiles than the device has compute units and K is long (the
filter gradient of a convolution: M x N = 576 x 64, K = 131072), K is cut into S slices of
whole TK steps. Work-group (slice s, tile t) accumulates its tile over slice s only and stores
the raw sums in a scratch buffer of S x cells (``Kernel.scratch``, planned by the executable
like an intermediate tensor); a second kernel, one work-item per cell, adds the S partials in
slice order (deterministic) and then finalises and runs the fused epilogue exactly as the
one-kernel schedule does.

Guards (bounds the loop box does not imply, e.g. zero padding) are tested while staging: an
element whose assignment is not valid is staged as 0. For a sum of products that adds 0 * b,
which equals the valid-index rule's "no term" unless b is inf or NaN (then the rule gives a
finite sum and this schedule NaN). Each operand tests every guard it can evaluate, so no load
leaves its tensor.

    config = choose_config(view, info)           # from the device description and the shapes
    kernels = tiled_contraction(plan, ctx, "k0_C", info)  # [kernel] or [partials, sum]; None:
                                                          # use the default schedule
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from ..devices.base import DeviceInfo
from ..tile.bounds import integer_form
from ..tile.ir import Poly
from . import kernel_ir as k
from .fusion import KernelPlan
from .lower import (LoweringContext, _epilogue, _kernel, cell_coordinates, compute_type,
                    finalize, index_type, row_major_strides)
from .normalize import NormalAccess, NormalContraction, narrow

#: Below this many multiply-adds the default schedule is as good (launch-bound either way).
MIN_WORK = 4096

_FLOAT_TYPES = ("float32", "float64")

#: Split K only into slices of at least this many TK steps (the partial sums cost a write and a
#: read of the output per slice; 16 steps of 8 are 128 multiply-adds per cell and slice).
MIN_SLICE_K_TILES = 16
#: Split K until there are about this many work-groups per compute unit: several per unit hide
#: memory latency. Measured on an H200 (132 SMs, CUDA), the CIFAR layer's filter gradient in
#: 128x64 tiles, both kernels: 4 per unit (S = 106) 0.495 ms, 8 per unit (S = 212) 0.425 ms.
SPLIT_GROUPS_PER_UNIT = 8


@dataclass(frozen=True)
class TileConfig:
    """One tiled schedule: the work-group tile (tile_m x tile_n, stepping tile_k along K) and
    the register tile of each work-item (reg_m x reg_n). ``pad`` elements end each row of the
    local-memory tiles (against bank conflicts; a multiple of 4 keeps rows 16-byte aligned).
    ``group_m`` rows of work-group tiles are visited together, so that they share B in cache.
    ``split`` > 1 cuts K into that many slices (split-K; see the module's docstring).
    ``bounded``: on CUDA, the registers are capped so that the work-groups the cost model
    counts on fit a multiprocessor (:func:`resident_blocks`). ``unroll_k`` > 0: the tile's
    ``tile_k`` steps are unrolled that many at a time instead of whole (a choice for the
    measured search, which the cost model cannot rank; see :data:`UNROLL_K_NEIGHBOUR`)."""

    tile_m: int
    tile_n: int
    tile_k: int
    reg_m: int
    reg_n: int
    pad: int = 4
    group_m: int = 8
    split: int = 1
    bounded: bool = True
    unroll_k: int = 0

    @functools.cached_property
    def threads(self) -> int:
        return (self.tile_m // self.reg_m) * (self.tile_n // self.reg_n)

    def local_bytes(self, itemsize: int) -> int:
        """Local memory of the two double-buffered tiles."""
        return 2 * self.tile_k * (self.tile_m + self.tile_n + 2 * self.pad) * itemsize

    def __str__(self) -> str:
        split = f", split-K {self.split}" if self.split > 1 else ""
        unroll = f", K steps unrolled {self.unroll_k} at a time" if self.unroll_k else ""
        return (f"{self.tile_m}x{self.tile_n}x{self.tile_k} tile, {self.reg_m}x{self.reg_n} "
                f"per work-item, {self.threads} work-items{split}{unroll}")


#: A sample of the space (:func:`gingham.tune.space.gpu_space` enumerates all of it), largest
#: first, then the narrow tiles and short K step offered to thin products; the tests build
#: each of them.
CANDIDATES: tuple[TileConfig, ...] = (
    TileConfig(128, 128, 8, 8, 8),
    TileConfig(128, 64, 8, 8, 8),
    TileConfig(64, 128, 8, 8, 8),
    TileConfig(64, 64, 8, 4, 4),
    TileConfig(32, 32, 8, 4, 4),
    TileConfig(16, 16, 8, 2, 2),
    TileConfig(4, 128, 8, 4, 4),
    TileConfig(8, 64, 8, 2, 4),
    TileConfig(16, 128, 4, 8, 8),
    TileConfig(64, 64, 8, 4, 4, unroll_k=2),
)

#: The partial unroll of a tile's K steps that the measured search tries beside a whole one
#: on GPUs. A whole unroll of 8 steps of an 8x8 register tile is 512 multiply-adds that NVRTC
#: schedules at once; two at a time take 30% off such a kernel's NVRTC time (176 -> 123 ms,
#: no register spilled) and change its speed either way. Measured on an H100 (CUDA, fp32,
#: 128x128x8 tiles of 8x8): the CIFAR conv layer's two gradients 693 -> 637 us, its forward
#: 295 -> 306 us, GEMM 4096 3.00 -> 3.44 ms (one at a time: 678 us, 320 us, 3.63 ms), so it
#: is never the untuned choice. Nor only where an operand's loads are guarded (convolutions),
#: though there a whole unroll spills 16-56 bytes under the register cap in each of ResNet-9's
#: 8x8 products: on the H100 the story net's step (4x4 blocks, no spills) took 2.0 ms
#: instead of 1.7, ResNet-9's 30.7 instead of 30.4, and a fresh first epoch's compile
#: (three runs each, alternating) did not shorten (1.40-1.52 s against 1.38-1.53).
UNROLL_K_NEIGHBOUR = 2
#: Global loads and stores that a tiled product's epilogue may hold once unrolled over a
#: work-item's cells: beyond this, its outer loop over the cells stays a loop. NVRTC's time
#: grows faster than the unrolled epilogue (a batch-norm gradient fused into a convolution's
#: data gradient stores 6 tensors a cell and loads 48 values). 2-core EPYC, one program each:
#: ResNet-18's fp32 8x8 products took 0.15-0.25 s with up to 64 accesses unrolled, 0.39 s
#: with 512, 0.89 s with 1856, 1.39 s with 3456; its bf16 wgmma products 0.09-0.45 s with up
#: to 256, 0.68 s with 1696, 1.56 s with 3456, 4.9 s with 6912 (4.0 s of it NVVM's
#: optimiser), 0.37 s for that one with the loop kept. On a fresh run that kernel alone held
#: up the first step.
EPILOGUE_UNROLLED_ACCESSES = 512


# -- the matrix-product view of a contraction ---------------------------------------------------


@dataclass(frozen=True)
class Affine:
    """``sum(coeffs[v] * v) + const`` over integers."""

    coeffs: dict
    const: int

    def part(self, names, const: bool = False) -> "Affine":
        """The terms over ``names`` (and the constant, if asked)."""
        return Affine({v: c for v, c in self.coeffs.items() if v in names},
                      self.const if const else 0)

    def names(self) -> set:
        return {v for v, c in self.coeffs.items() if c}


@dataclass(frozen=True)
class Side:
    """One staged operand: the output variables along its tile (``group``), its flat address,
    the guards it tests, and whether its unit-stride index is K (else the tile index)."""

    label: str  # "a" or "b"
    access: NormalAccess
    group: tuple[str, ...]
    extents: tuple[int, ...]
    address: Affine
    guards: tuple[tuple[Affine, int], ...]  # (poly, upper): 0 <= poly < upper
    k_fastest: bool

    @functools.cached_property
    def total(self) -> int:
        return math.prod(self.extents)


@dataclass(frozen=True)
class GemmView:
    nc: NormalContraction
    a: Side
    b: Side
    batch: tuple[str, ...]
    batch_extents: tuple[int, ...]
    red_vars: tuple[str, ...]  # flattening order of K, outermost first
    red_ranges: dict

    # Cached: the cost model asks for them tens of thousands of times while a step's
    # schedules are ranked (the fields never change: the dataclass is frozen).
    @functools.cached_property
    def m(self) -> int:
        return self.a.total

    @functools.cached_property
    def n(self) -> int:
        return self.b.total

    @functools.cached_property
    def k(self) -> int:
        return math.prod(hi - lo + 1 for lo, hi in self.red_ranges.values())

    @functools.cached_property
    def batches(self) -> int:
        return math.prod(self.batch_extents)


def affine_form(poly: Poly) -> Affine | None:
    """``poly`` as an integer affine form, or None (a rational coefficient)."""
    coeffs, const, denominator = integer_form(poly)
    if denominator != 1:
        return None
    return Affine(coeffs, const)


def flat_address(access: NormalAccess) -> Affine | None:
    """The access's row-major element offset as an affine form, or None (rational indices)."""
    coeffs: dict[str, int] = {}
    const = 0
    for poly, stride in zip(access.index, row_major_strides(access.sizes)):
        form = affine_form(poly)
        if form is None:
            return None
        for name, c in form.coeffs.items():
            coeffs[name] = coeffs.get(name, 0) + c * stride
        const += form.const * stride
    return Affine({n: c for n, c in coeffs.items() if c}, const)


def narrow_reductions(nc: NormalContraction) -> NormalContraction:
    """Change reduction variables whose guard is narrower than their range.

    Normal form may keep a reduction variable with the full range of an image while a guard
    lets through only a kernel's width of it (the data gradient of a convolution:
    ``D_I[n, o1, ...] = +(D_O[n, y, ...] * F[o1 - y + 1, ...])``, y over all rows, guard
    ``0 <= o1 - y + 1 < 3``). With ``u = o1 - y + 1`` the reduction runs over u in [0, 3) and
    the old range of y becomes the guard ``0 <= o1 + 1 - u < H``: the same assignments, a
    reduction 3 long instead of H. Only unit coefficients are changed (no division):
    :func:`gingham.compiler.normalize.narrow` restricted to them.
    """
    return narrow(nc, unit_coefficients=True)


def gemm_view(nc: NormalContraction) -> GemmView | None:
    """The contraction as a batched matrix product, or None when it is not one."""
    if nc.agg != "+" or nc.combo != "*" or len(nc.operands) != 2 or not nc.out_vars:
        return None  # not a sum of products, or a scalar result (nothing to tile)
    if any(lo > hi for lo, hi in nc.red_ranges.values()):
        return None
    nc = narrow_reductions(nc)
    addresses = [flat_address(a) for a in nc.operands]
    guards = [(affine_form(q.poly), q.upper) for q in nc.guards]
    if any(a is None for a in addresses) or any(g is None for g, _ in guards):
        return None  # rational indices: the default schedule tests divisibility
    out_vars = set(nc.out_vars)
    deps = [a.names() & out_vars for a in addresses]
    wide = [v for v, s in zip(nc.out_vars, nc.out_shape) if s > 1]
    last = wide[-1] if wide else nc.out_vars[-1]
    b_index = 0 if (last in deps[0] and last not in deps[1]) else 1
    a_index = 1 - b_index
    extent = dict(zip(nc.out_vars, nc.out_shape))
    m_vars = tuple(v for v in nc.out_vars if v in deps[a_index] - deps[b_index])
    n_vars = tuple(v for v in nc.out_vars if v in deps[b_index] - deps[a_index])
    batch = tuple(v for v in nc.out_vars if v not in m_vars and v not in n_vars)
    if not m_vars or not n_vars:
        return None
    # K runs fastest along A's smallest stride, so that A's rows are read contiguously.
    a_address = addresses[a_index]
    red_vars = tuple(sorted(nc.red_vars, key=lambda v: -abs(a_address.coeffs.get(v, 0))))
    red_set = set(red_vars)
    sides = []
    for index, group in ((a_index, m_vars), (b_index, n_vars)):
        allowed = set(group) | set(batch) | red_set
        own = tuple((g, upper) for g, upper in guards if g.names() <= allowed)
        address = addresses[index]
        k_fastest = (abs(address.coeffs.get(red_vars[-1], 0)) == 1 if red_vars else False)
        if not k_fastest and abs(address.coeffs.get(group[-1], 0)) != 1:
            k_fastest = bool(red_vars) and red_vars[-1] in address.coeffs
        sides.append(Side("a" if index == a_index else "b", nc.operands[index], group,
                          tuple(extent[v] for v in group), address, own, k_fastest))
    m_set, n_set = set(m_vars), set(n_vars)
    for g, _ in guards:
        if g.names() & m_set and g.names() & n_set:
            return None  # a guard that couples rows and columns cannot be staged
    return GemmView(nc, sides[0], sides[1], batch, tuple(extent[v] for v in batch), red_vars,
                    {v: nc.red_ranges[v] for v in red_vars})


# -- choosing a configuration ---------------------------------------------------------------------


def _fits(config: TileConfig, info: DeviceInfo, itemsize: int) -> bool:
    local_limit = info.local_memory_bytes or 32768
    if info.dialect == "cuda":
        local_limit = min(local_limit, 48 * 1024)  # static __shared__ arrays stop at 48 KiB
    return (config.threads <= max(info.max_work_group_size, 1)
            and config.local_bytes(itemsize) <= local_limit)


def output_tiles(config: TileConfig, view: GemmView) -> int:
    """Work-group tiles of the output (batch entries included), before any split of K."""
    return math.ceil(view.m / config.tile_m) * math.ceil(view.n / config.tile_n) * view.batches


def choose_split(config: TileConfig, view: GemmView, info: DeviceInfo) -> int:
    """How many slices of K: 1 unless the output has fewer tiles than the device has compute
    units and K is long; then enough for about SPLIT_GROUPS_PER_UNIT work-groups per unit,
    each slice at least MIN_SLICE_K_TILES steps long, no slice empty."""
    tiles = output_tiles(config, view)
    units = max(info.compute_units, 1)
    k_tiles = math.ceil(view.k / config.tile_k)
    if tiles >= units or k_tiles < 2 * MIN_SLICE_K_TILES:
        return 1
    split = min(math.ceil(SPLIT_GROUPS_PER_UNIT * units / tiles), k_tiles // MIN_SLICE_K_TILES)
    return math.ceil(k_tiles / math.ceil(k_tiles / max(split, 1)))


def config_cost(config: TileConfig, view: GemmView, info: DeviceInfo, itemsize: int = 4
                ) -> float:
    """Estimated seconds of ``config`` on this device (:func:`gingham.tune.cost.gpu_time`)."""
    from ..tune.cost import gpu_time
    from ..tune.device_model import model_for_info

    return gpu_time(config, view, model_for_info(info), itemsize)


def resident_blocks(config: TileConfig, info: DeviceInfo, itemsize: int = 4) -> int:
    """Work-groups per compute unit that the cost model counts on for ``config`` where its
    registers are what limits them: the CUDA compiler is held to it (``__launch_bounds__``),
    0 (no bound) where threads or local memory limit them first, for an unbounded
    ``config``, or off CUDA (OpenCL C has no such bound).

    Why: NVRTC gives a 128x128 tile of 8x8 per work-item (256 work-items) 130 registers, so
    one work-group fits a multiprocessor where the model counted two; NVIDIA's OpenCL compiler
    gives the same source 127-128 and no spills. Capped at 128 (36 bytes spilled), fp32
    ResNet-9's step on the H200 took 34.6 ms of kernels against 40.8 (its three 1.5 ms
    convolutions 0.95 ms, like OpenCL's); GEMM 4096 went from 2.94 to 3.02 ms, and the
    measured search tries ``bounded=False`` for such a kernel."""
    from ..tune.cost import gpu_residency_limits
    from ..tune.device_model import model_for_info

    if info.dialect != "cuda" or not config.bounded:
        return 0
    by_threads, by_local, by_regs = gpu_residency_limits(config, model_for_info(info),
                                                         itemsize)
    return by_regs if 0 < by_regs < min(by_threads, by_local) else 0


def choose_config(view: GemmView, info: DeviceInfo, itemsize: int = 4) -> TileConfig | None:
    """The cost model's choice over the whole legal space (:func:`gingham.tune.space.rank_gpu`:
    tile and register sizes, K step, split-K), or None when nothing fits the device."""
    from ..tune.device_model import model_for_info
    from ..tune.space import rank_gpu

    ranked = rank_gpu(view, info, itemsize, model_for_info(info))
    return ranked[0][1] if ranked else None


# -- kernel construction -------------------------------------------------------------------------


class IndexBuilder:
    """Small constructors for index arithmetic in one integer type, folding constants."""

    def __init__(self, itype: str) -> None:
        self.t = itype
        self._consts: dict[tuple[type, int], k.Const] = {}

    def c(self, value: int) -> k.Const:
        # One node per value: a tensor-core kernel indexes its accumulators by the same few
        # constants tens of thousands of times (43,000 for a bf16 ResNet-9 step's kernels).
        key = (type(value), value)
        const = self._consts.get(key)
        if const is None:
            const = self._consts[key] = k.Const(value, self.t)
        return const

    def v(self, name: str) -> k.Var:
        return k.Var(name, self.t)

    def add(self, a: k.Expr, b: k.Expr | int) -> k.Expr:
        b = self.c(b) if isinstance(b, int) else b
        if isinstance(b, k.Const) and b.value == 0:
            return a
        if isinstance(a, k.Const) and a.value == 0:
            return b
        return k.BinOp("+", a, b, self.t)

    def mul(self, a: k.Expr, factor: int) -> k.Expr:
        if factor == 0:
            return self.c(0)
        if factor == 1:
            return a
        return k.BinOp("*", a, self.c(factor), self.t)

    def div(self, a: k.Expr, d: int) -> k.Expr:
        return a if d == 1 else k.BinOp("/", a, self.c(d), self.t)

    def mod(self, a: k.Expr, d: int) -> k.Expr:
        return self.c(0) if d == 1 else k.BinOp("%", a, self.c(d), self.t)

    def lt(self, a: k.Expr, bound: int) -> k.Expr:
        return k.BinOp("<", a, self.c(bound), "bool")

    def affine(self, form: Affine, env: dict, const: bool = True) -> k.Expr:
        expr: k.Expr = self.c(form.const if const else 0)
        for name in sorted(form.coeffs):
            expr = self.add(expr, self.mul(env[name], form.coeffs[name]))
        return expr

    def decode(self, flat: k.Expr, names, extents, lows=None) -> dict:
        """Row-major coordinates of ``flat`` (plus ``lows``); the outermost is not wrapped."""
        strides = row_major_strides(tuple(extents))
        values = {}
        for axis, (name, size, stride) in enumerate(zip(names, extents, strides)):
            value = self.div(flat, stride)
            if axis:
                value = self.mod(value, size)
            values[name] = self.add(value, lows[name] if lows else 0)
        return values


def _conjunction(conditions: list) -> k.Expr | None:
    result = None
    for cond in conditions:
        result = cond if result is None else k.BinOp("&&", result, cond, "bool")
    return result


@dataclass
class Staging:
    """How the work-items of a group copy one operand's TS x TK slice to local memory.

    A slot is what one work-item copies at a time: one element, or with ``vector`` > 1 that
    many consecutive elements along the operand's unit-stride index (K when ``k_fastest``,
    else the tile index; one 16-byte copy in the tensor-core schedule). Lanes, repeats and
    slots count in those units."""

    side: Side
    tile: int  # TS
    tile_k: int
    slots: int  # copies per work-item
    lanes_k: int  # work-items side by side along K
    lanes_s: int  # work-items side by side along the tile index
    vector: int = 1  # elements per copy along the unit-stride index

    @property
    def array(self) -> str:
        return f"gt_{self.side.label}s"

    @property
    def units(self) -> tuple[int, int]:
        """(along K, along the tile index) in copies."""
        if self.side.k_fastest:
            return self.tile_k // self.vector, self.tile
        return self.tile_k, self.tile // self.vector

    def slot(self, p: int) -> tuple[int, int]:
        """(k-repeat, s-repeat) of slot p: its kk and s are the lane's plus repeat * lanes."""
        units_k, units_s = self.units
        if self.side.k_fastest:
            per_k = units_k // self.lanes_k
            return p % per_k, p // per_k
        per_s = units_s // self.lanes_s
        return p // per_s, p % per_s


def staging(side: Side, tile: int, config, vector: int = 1) -> Staging | None:
    """Lanes and slots of a work-group (``config``: a TileConfig or tensor-core TcConfig)
    copying its TS x TK slice in units of ``vector`` elements along the operand's unit-stride
    index; None when the work-items cannot share the copies evenly."""
    threads = config.threads
    probe = Staging(side, tile, config.tile_k, 0, 1, 1, vector)
    units_k, units_s = probe.units
    if side.k_fastest:
        lanes_k = min(units_k, threads)
        lanes_s = threads // lanes_k
    else:
        lanes_s = min(units_s, threads)
        lanes_k = threads // lanes_s
    if threads % (lanes_k * lanes_s) or units_k % lanes_k or units_s % lanes_s:
        return None
    slots = units_k * units_s // threads
    if slots * threads != units_k * units_s:
        return None
    return Staging(side, tile, config.tile_k, slots, lanes_k, lanes_s, vector)


def tiled_view(plan: KernelPlan, ctx: LoweringContext) -> tuple[GemmView, str] | None:
    """The plan's matrix-product view and compute type, or None when this schedule does not
    apply (not a float sum of products that groups into a matrix product, or too little work)."""
    if plan.kind != "contraction":
        return None
    nc = plan.contraction
    assert nc is not None
    ctype = compute_type(ctx.dtype(nc.out))
    if ctype not in _FLOAT_TYPES:
        return None
    if any(ctx.is_coordinate(a.tensor) for a in nc.operands):
        return None  # an index computed by its readers has no buffer to stage
    view = gemm_view(nc)
    if view is None or view.m * view.n * view.k * view.batches < MIN_WORK:
        return None
    return view, ctype


def tiled_contraction(plan: KernelPlan, ctx: LoweringContext, name: str, info: DeviceInfo,
                      config: TileConfig | None = None) -> list[k.Kernel] | None:
    """Tiled kernels for a sum-of-products contraction on a GPU dialect, or None.

    None when the plan is not a contraction ``+(A * B)`` over floats that groups into a
    matrix product (see :func:`gemm_view`), has fewer than :data:`MIN_WORK` multiply-adds,
    or no candidate fits the device. Otherwise one kernel, or with split-K two (partial sums
    into a scratch buffer, then their sum), in launch order; they compute the same cells as
    :func:`gingham.compiler.lower.lower_contraction` (finalisation and fused epilogue included).
    """
    if info.dialect not in ("opencl", "cuda"):
        return None
    found = tiled_view(plan, ctx)
    if found is None:
        return None
    view, ctype = found
    itemsize = 8 if ctype == "float64" else 4
    config = config or choose_config(view, info, itemsize)
    if config is None or not _fits(config, info, itemsize):
        return None
    stage_a = staging(view.a, config.tile_m, config)
    stage_b = staging(view.b, config.tile_n, config)
    if stage_a is None or stage_b is None:
        return None
    k_tiles = math.ceil(view.k / config.tile_k)
    split = min(max(config.split, 1), k_tiles)
    split = math.ceil(k_tiles / math.ceil(k_tiles / split))  # no slice empty
    config = dataclasses.replace(config, split=split)
    blocks = resident_blocks(config, info, itemsize)
    if split == 1:
        return [TiledKernel(plan, ctx, name, view, config, stage_a, stage_b, ctype,
                            min_blocks=blocks).build()]
    scratch = k.Scratch(f"{name}_partials", ctype, split * math.prod(view.nc.out_shape))
    partial_ctx = ctx.fork()  # its own parameters
    partials = TiledKernel(plan, partial_ctx, f"{name}_partial", view, config, stage_a,
                           stage_b, ctype, scratch, min_blocks=blocks).build()
    return [partials, split_sum(plan, ctx, name, view.nc, scratch, split, ctype)]


def split_sum(plan: KernelPlan, ctx: LoweringContext, name: str, nc: NormalContraction,
              scratch: k.Scratch, split: int, ctype: str) -> k.Kernel:
    """One work-item per cell of ``nc``: the sum of the cell's partials in slice order, then
    the finalisation and fused epilogue of the one-kernel schedule."""
    cells = math.prod(nc.out_shape)
    itype = index_type(split * cells + 16)
    e = IndexBuilder(itype)
    ctx.params[scratch.name] = k.Param(scratch.name, scratch.dtype)
    flat = e.v("g")
    body: list[k.Stmt] = cell_coordinates(flat, nc.out_shape, list(nc.out_vars), itype)
    acc = k.Var("acc", ctype)
    body.append(k.Declare("acc", ctype, k.Load(scratch.name, flat, ctype)))
    later = k.Load(scratch.name, e.add(e.mul(e.v("gs"), cells), flat), ctype)
    body.append(k.For("gs", 1, split, k.Assign("acc", k.BinOp("+", acc, later, ctype))))
    cell = [e.v(v) for v in nc.out_vars]
    body.append(k.Declare(f"v_{nc.out}", ctype, finalize(nc, ctx, acc, None, cell, flat,
                                                         ctype, itype)))
    registers = {nc.out: k.Var(f"v_{nc.out}", ctype)}
    body += _epilogue(plan, ctx, cell, flat, itype, registers)
    loop = k.For("g", 0, cells, k.block(*body), kind="thread")
    schedule = (f"gpu tiled contraction, split-K sum: {split} partial tiles per cell "
                f"({cells} cells), then finalisation and epilogue")
    kernel = _kernel(name, ctx, loop, cells, schedule)
    return dataclasses.replace(kernel, scratch=(scratch,))


class TiledKernel:
    """The kernel of one tiled schedule (subclassed by the tensor-core schedule, which keeps
    the coordinates, hoisting, K decoding and per-cell epilogue and replaces the rest)."""

    #: Whether the epilogue kept its outer loop over cells (a heavy fused epilogue; see
    #: :data:`EPILOGUE_UNROLLED_ACCESSES`), for the schedule line.
    epilogue_rolled = False

    def __init__(self, plan: KernelPlan, ctx: LoweringContext, name: str, view: GemmView,
                 config: TileConfig, stage_a: Staging, stage_b: Staging, ctype: str,
                 scratch: k.Scratch | None = None, min_blocks: int = 0) -> None:
        self.plan, self.ctx, self.name, self.view, self.cfg = plan, ctx, name, view, config
        self.min_blocks = min_blocks
        self.stages = (stage_a, stage_b)
        self.ctype = ctype
        nc = view.nc
        biggest = max([math.prod(nc.out_shape) * config.split, view.m * view.n,
                       view.k + config.tile_k]
                      + [math.prod(a.sizes) for a in nc.operands])
        self.itype = index_type(biggest * 2 + 4 * (config.tile_m + config.tile_n) + 16)
        self.e = IndexBuilder(self.itype)
        self.m_tiles = math.ceil(view.m / config.tile_m)
        self.n_tiles = math.ceil(view.n / config.tile_n)
        self.k_tiles = math.ceil(view.k / config.tile_k)
        self.tiles = self.m_tiles * self.n_tiles * view.batches
        self.split = config.split
        self.slice_steps = math.ceil(self.k_tiles / self.split)  # TK steps per slice
        self.groups = self.tiles * self.split
        self.scratch = scratch  # where the partial sums go (split-K), else None
        assert (self.split > 1) == (scratch is not None)

    # -- the parts of the kernel -------------------------------------------------------------
    def build(self) -> k.Kernel:
        cfg, view, e = self.cfg, self.view, self.e
        shared = [k.LocalArray(s.array, self.ctype, (2, cfg.tile_k, s.tile + cfg.pad), "shared",
                               align=16) for s in self.stages]
        body: list[k.Stmt] = [
            k.Declare("gt_tx", self.itype, e.mod(e.v("gt_tid"), cfg.tile_n // cfg.reg_n)),
            k.Declare("gt_ty", self.itype, e.div(e.v("gt_tid"), cfg.tile_n // cfg.reg_n)),
        ]
        body += self.group_coordinates()
        for stage in self.stages:
            body += self.hoisted(stage)
        body += [
            k.LocalArray("gt_acc", self.ctype, (cfg.reg_m, cfg.reg_n), "register"),
            k.LocalArray("gt_af", self.ctype, (cfg.reg_m,), "register", align=16),
            k.LocalArray("gt_bf", self.ctype, (cfg.reg_n,), "register", align=16),
            k.For("gt_i", 0, cfg.reg_m, k.For("gt_j", 0, cfg.reg_n, k.StoreLocal(
                "gt_acc", (e.v("gt_i"), e.v("gt_j")), k.Const(0.0, self.ctype)),
                kind="unroll"), kind="unroll"),
        ]
        for stage in self.stages:
            body += [k.Declare(f"gt_{stage.side.label}r{p}", self.ctype)
                     for p in range(stage.slots)]
        # gt_kt counts this work-group's TK steps; the slice starts at step first.
        first, steps = self.k_slice(body)
        kt = e.v("gt_kt")
        next_kt = e.add(kt, 1)
        more = (e.lt(next_kt, steps) if isinstance(steps, int)
                else k.BinOp("<", next_kt, steps, "bool"))
        body += self.load(first) + self.store(e.c(0)) + [k.Barrier()]
        step = k.block(
            k.If(more, k.block(*self.load(e.add(first, next_kt)))),
            self.compute(e.mod(kt, 2)),
            k.If(more, k.block(*self.store(e.mod(next_kt, 2)))),
            k.Barrier(),
        )
        body.append(k.For("gt_kt", 0, steps, step))
        body.append(self.epilogue())
        local = k.For("gt_tid", 0, cfg.threads, k.block(*body), kind="local")
        kernel_body = k.block(*shared, k.For("gt_group", 0, self.groups, local, kind="group"))
        params = tuple(sorted(self.ctx.params.values(), key=lambda p: (p.output, p.name)))
        return k.Kernel(self.name, params, kernel_body,
                        k.Launch((self.groups * cfg.threads,), (cfg.threads,),
                                 min_blocks=self.min_blocks),
                        self.schedule(), flops=2 * view.m * view.n * view.k * view.batches,
                        uses=frozenset(self.ctx.uses),
                        scratch=(self.scratch,) if self.scratch else ())

    def schedule(self) -> str:
        v = self.view

        def side(s: Side) -> str:
            order = "K" if s.k_fastest else "tile"
            return (f"{s.label.upper()}={s.access.tensor}[{','.join(s.group)}] ({order}-major "
                    f"loads, {len(s.guards)} guards)")

        batch, split = self.batch_and_split_text()
        bound = (f", registers for {self.min_blocks} work-groups a unit" if self.min_blocks
                 else "")
        rolled = f"; epilogue a loop over {self.cfg.reg_m} rows" if self.epilogue_rolled else ""
        return (f"gpu tiled contraction: M={v.m} N={v.n} K={v.k} ({','.join(v.red_vars)})"
                f"{batch}; {self.cfg}{bound}; {self.groups} work-groups{split}; {side(v.a)}, "
                f"{side(v.b)}{rolled}")

    def batch_and_split_text(self) -> tuple[str, str]:
        """The schedule line's batch and split-K notes (empty when there is none)."""
        v = self.view
        batch = f", batch {v.batches} ({','.join(v.batch)})" if v.batch else ""
        split = (f" ({self.split} slices of {self.slice_steps * self.cfg.tile_k} along K, "
                 f"partial sums to {self.scratch.name})" if self.scratch else "")
        return batch, split

    def k_slice(self, body: list[k.Stmt]) -> tuple[k.Expr, k.Expr | int]:
        """(first TK step, number of TK steps) of this work-group's slice of K: all of K
        (0, k_tiles), or with split-K slice ``gt_slice``'s steps, declared onto ``body``."""
        e = self.e
        if self.split == 1:
            return e.c(0), self.k_tiles
        body.append(k.Declare("gt_kt0", self.itype, e.mul(e.v("gt_slice"), self.slice_steps)))
        left = k.BinOp("-", e.c(self.k_tiles), e.v("gt_kt0"), self.itype)
        body.append(k.Declare("gt_kn", self.itype, k.Select(
            e.lt(left, self.slice_steps), left, e.c(self.slice_steps), self.itype)))
        return e.v("gt_kt0"), e.v("gt_kn")

    def group_coordinates(self) -> list[k.Stmt]:
        """Batch entry and tile of this work-group; tiles in bands of group_m rows so that
        work-groups running together share both operands' slices in cache."""
        e, cfg = self.e, self.cfg
        group = e.v("gt_group")
        per_batch = self.m_tiles * self.n_tiles
        stmts: list[k.Stmt] = []
        if self.split > 1:
            # Slice-major: the work-groups running together share their slice of K.
            stmts += [k.Declare("gt_slice", self.itype, e.div(group, self.tiles)),
                      k.Declare("gt_tile", self.itype, e.mod(group, self.tiles))]
            group = e.v("gt_tile")
        if self.view.batch:
            stmts.append(k.Declare("gt_batch", self.itype, e.div(group, per_batch)))
            for var, value in e.decode(e.v("gt_batch"), self.view.batch,
                                       self.view.batch_extents).items():
                stmts.append(k.Declare(f"gt_v_{var}", self.itype, value))
        band = min(cfg.group_m, self.m_tiles)
        width = band * self.n_tiles
        rest = e.mod(group, per_batch) if self.view.batch else group
        stmts += [
            k.Declare("gt_r", self.itype, rest),
            k.Declare("gt_first", self.itype, e.mul(e.div(e.v("gt_r"), width), band)),
        ]
        remaining = k.BinOp("-", e.c(self.m_tiles), e.v("gt_first"), self.itype)
        rows = k.Select(e.lt(remaining, band), remaining, e.c(band), self.itype)
        stmts += [
            k.Declare("gt_band", self.itype, rows),
            k.Declare("gt_in", self.itype, e.mod(e.v("gt_r"), width)),
            k.Declare("gt_m0", self.itype, e.mul(e.add(e.v("gt_first"), k.BinOp(
                "%", e.v("gt_in"), e.v("gt_band"), self.itype)), cfg.tile_m)),
            k.Declare("gt_n0", self.itype, e.mul(k.BinOp(
                "/", e.v("gt_in"), e.v("gt_band"), self.itype), cfg.tile_n)),
        ]
        return stmts

    def batch_env(self) -> dict:
        return {var: self.e.v(f"gt_v_{var}") for var in self.view.batch}

    def lane(self, stage: Staging) -> tuple[k.Expr, k.Expr]:
        """(kk, s) of this work-item's first slot."""
        e, tid = self.e, self.e.v("gt_tid")
        if stage.side.k_fastest:
            return e.mod(tid, stage.lanes_k), e.div(tid, stage.lanes_k)
        return e.div(tid, stage.lanes_s), e.mod(tid, stage.lanes_s)

    def slot_position(self, stage: Staging, p: int) -> tuple[k.Expr, k.Expr]:
        """(kk, s) of slot p's first element within the TS x TK slice."""
        e = self.e
        kk, s = self.lane(stage)
        k_rep, s_rep = stage.slot(p)
        kk, s = e.add(kk, k_rep * stage.lanes_k), e.add(s, s_rep * stage.lanes_s)
        if stage.side.k_fastest:
            return e.mul(kk, stage.vector), s
        return kk, e.mul(s, stage.vector)

    def hoisted(self, stage: Staging) -> list[k.Stmt]:
        """Per slot, what does not change along K: validity of its row (column) and the row's
        share of the address and of each guard."""
        e, side = self.e, stage.side
        label = side.label
        origin = e.v("gt_m0" if label == "a" else "gt_n0")
        stmts: list[k.Stmt] = []
        env_base = self.batch_env()
        names = set(side.group) | set(self.view.batch)
        for p in range(stage.slots):
            _, s = self.slot_position(stage, p)
            flat = f"gt_{label}{p}_s"
            stmts.append(k.Declare(flat, self.itype, e.add(origin, s)))
            env = dict(env_base)
            for var, value in e.decode(e.v(flat), side.group, side.extents).items():
                stmts.append(k.Declare(f"gt_{label}{p}_{var}", self.itype, value))
                env[var] = e.v(f"gt_{label}{p}_{var}")
            if side.total % stage.tile:
                stmts.append(k.Declare(f"gt_{label}{p}_ok", "bool", e.lt(e.v(flat), side.total)))
            stmts.append(k.Declare(f"gt_{label}{p}_base", self.itype,
                                   e.affine(side.address.part(names), env) if names
                                   else e.c(0)))
            for g, (poly, _) in enumerate(side.guards):
                stmts.append(k.Declare(f"gt_{label}{p}_g{g}", self.itype,
                                       e.affine(poly.part(names, const=True), env)))
        return stmts

    def load(self, kt: k.Expr) -> list[k.Stmt]:
        """Read the slices at K tile ``kt`` into the work-item's staging registers."""
        stmts: list[k.Stmt] = []
        for stage in self.stages:
            stmts += self.load_side(stage, kt)
        return stmts

    def load_side(self, stage: Staging, kt: k.Expr) -> list[k.Stmt]:
        stmts, accesses = self.slot_accesses(stage, kt)
        for p, (index, cond) in enumerate(accesses):
            value = self.ctx.load(stage.side.access.tensor, index)
            if value.dtype != self.ctype:
                value = k.Cast(self.ctype, value)
            if cond is not None:
                value = k.Select(cond, value, k.Const(0.0, self.ctype), self.ctype)
            stmts.append(k.Assign(f"gt_{stage.side.label}r{p}", value))
        return stmts

    def slot_accesses(self, stage: Staging, kt: k.Expr
                      ) -> tuple[list[k.Stmt], list[tuple[k.Expr, k.Expr | None]]]:
        """For K tile ``kt``: the statements that decode each slot's position along K, and per
        slot its first element's flat index in the operand and the condition (None: always)
        under which it is loaded; otherwise it is staged as 0."""
        e, side, view, cfg = self.e, stage.side, self.view, self.cfg
        label = side.label
        red = set(view.red_vars)
        lows = {v: e.c(lo) for v, (lo, _) in view.red_ranges.items()}
        extents = [hi - lo + 1 for lo, hi in view.red_ranges.values()]
        stmts: list[k.Stmt] = []
        accesses: list[tuple[k.Expr, k.Expr | None]] = []
        k_parts: dict[int, tuple] = {}
        for p in range(stage.slots):
            k_rep, _ = stage.slot(p)
            if k_rep not in k_parts:
                kk, _ = self.slot_position(stage, p)
                kflat = f"gt_{label}k{k_rep}"
                stmts.append(k.Declare(kflat, self.itype, e.add(e.mul(kt, cfg.tile_k), kk)))
                env = {}
                for var, value in e.decode(e.v(kflat), view.red_vars, extents, lows).items():
                    stmts.append(k.Declare(f"{kflat}_{var}", self.itype, value))
                    env[var] = e.v(f"{kflat}_{var}")
                address = e.affine(side.address.part(red), env, const=False)
                stmts.append(k.Declare(f"{kflat}_addr", self.itype, address))
                conditions = []
                if view.k % cfg.tile_k:
                    conditions.append(e.lt(e.v(kflat), view.k))
                k_parts[k_rep] = (kflat, env, conditions)
            kflat, env, conditions = k_parts[k_rep]
            conditions = list(conditions)
            if side.total % stage.tile:
                conditions.append(k.Var(f"gt_{label}{p}_ok", "bool"))
            for g, (poly, upper) in enumerate(side.guards):
                value = e.add(e.v(f"gt_{label}{p}_g{g}"),
                              e.affine(poly.part(red), env, const=False))
                conditions.append(k.BinOp(">=", value, e.c(0), "bool"))
                conditions.append(e.lt(value, upper))
            index = e.add(e.add(e.v(f"gt_{label}{p}_base"), e.v(f"{kflat}_addr")),
                          side.address.const)
            accesses.append((index, _conjunction(conditions)))
        return stmts, accesses

    def store(self, buf: k.Expr) -> list[k.Stmt]:
        stmts: list[k.Stmt] = []
        for stage in self.stages:
            for p in range(stage.slots):
                kk, s = self.slot_position(stage, p)
                stmts.append(k.StoreLocal(stage.array, (buf, kk, s),
                                          k.Var(f"gt_{stage.side.label}r{p}", self.ctype)))
        return stmts

    def row(self, index: k.Expr, tile: int, reg: int, lane: str) -> k.Expr:
        """Row ``index`` of this work-item's register tile within the work-group tile: chunks
        of up to 4 consecutive rows (vector loads from local memory), lanes interleaved."""
        e = self.e
        width = min(4, reg)
        lanes = tile // reg
        chunk = e.mul(e.div(index, width), lanes * width)
        return e.add(e.add(chunk, e.mul(e.v(lane), width)), e.mod(index, width))

    def compute(self, buf: k.Expr) -> k.Stmt:
        e, cfg, t = self.e, self.cfg, self.ctype
        i, j = e.v("gt_i"), e.v("gt_j")
        a_row = self.row(i, cfg.tile_m, cfg.reg_m, "gt_ty")
        b_col = self.row(j, cfg.tile_n, cfg.reg_n, "gt_tx")
        fetch = k.block(self.fetch("gt_af", self.stages[0].array, buf, cfg.tile_m, cfg.reg_m,
                                   "gt_ty", a_row),
                        self.fetch("gt_bf", self.stages[1].array, buf, cfg.tile_n, cfg.reg_n,
                                   "gt_tx", b_col))
        product = k.BinOp("*", k.LoadLocal("gt_af", (i,), t), k.LoadLocal("gt_bf", (j,), t), t)
        update = k.StoreLocal("gt_acc", (i, j),
                              k.BinOp("+", k.LoadLocal("gt_acc", (i, j), t), product, t))
        accumulate = k.For("gt_i", 0, cfg.reg_m, k.For("gt_j", 0, cfg.reg_n, update,
                                                        kind="unroll"), kind="unroll")
        return k.For("gt_kk", 0, cfg.tile_k, k.block(fetch, accumulate), kind="unroll",
                     unroll=cfg.unroll_k)

    def vector_width(self, reg: int) -> int:
        """Elements per local-memory read of a fragment: the chunks of :meth:`row`, as one
        16- or 8-byte access for float32 (NVRTC does not merge the scalar reads itself)."""
        width = min(4, reg)
        return width if self.ctype == "float32" and width in (2, 4) else 1

    def fetch(self, fragment: str, array: str, buf: k.Expr, tile: int, reg: int, lane: str,
              scalar_row: k.Expr) -> k.Stmt:
        """This work-item's fragment of row ``gt_kk`` of a staged tile, into registers."""
        e, t = self.e, self.ctype
        width = self.vector_width(reg)
        if width == 1:
            index = e.v("gt_i" if fragment == "gt_af" else "gt_j")
            return k.For(index.name, 0, reg, k.StoreLocal(fragment, (index,), k.LoadLocal(
                array, (buf, e.v("gt_kk"), scalar_row), t)), kind="unroll")
        chunk = e.v("gt_c")
        first = e.add(e.mul(chunk, (tile // reg) * width), e.mul(e.v(lane), width))
        copy = k.CopyLocal(fragment, (e.mul(chunk, width),), array, (buf, e.v("gt_kk"), first),
                           width, t)
        return k.For("gt_c", 0, reg // width, copy, kind="unroll")

    def epilogue(self) -> k.Stmt:
        """Finalise and store each cell of the register tile, as lower_contraction does."""
        e, cfg = self.e, self.cfg
        i, j = e.v("gt_i"), e.v("gt_j")
        m = e.add(e.v("gt_m0"), self.row(i, cfg.tile_m, cfg.reg_m, "gt_ty"))
        n = e.add(e.v("gt_n0"), self.row(j, cfg.tile_n, cfg.reg_n, "gt_tx"))
        per_cell = self.cell_epilogue(m, n, k.LoadLocal("gt_acc", (i, j), self.ctype))
        if not self.keeps_epilogue_loop(cfg.reg_m * cfg.reg_n, per_cell):
            return k.For("gt_i", 0, cfg.reg_m, k.For("gt_j", 0, cfg.reg_n, per_cell,
                                                     kind="unroll"), kind="unroll")
        # A heavy fused epilogue: a loop over the tile's rows, each row's cells unrolled in it.
        # It reads a copy of the accumulators (indexed by the loop, the copy goes to local
        # memory; the accumulators themselves stay in registers for the K loop).
        per_cell = self.cell_epilogue(m, n, k.LoadLocal("gt_cell", (i, j), self.ctype))
        copy = k.StoreLocal("gt_cell", (i, j), k.LoadLocal("gt_acc", (i, j), self.ctype))
        return k.block(
            k.LocalArray("gt_cell", self.ctype, (cfg.reg_m, cfg.reg_n), "register"),
            k.For("gt_i", 0, cfg.reg_m, k.For("gt_j", 0, cfg.reg_n, copy, kind="unroll"),
                  kind="unroll"),
            k.For("gt_i", 0, cfg.reg_m, k.For("gt_j", 0, cfg.reg_n, per_cell, kind="unroll")))

    def keeps_epilogue_loop(self, cells: int, per_cell: k.Stmt) -> bool:
        """Whether the epilogue keeps its outer loop over a work-item's ``cells`` a loop:
        when ``per_cell``'s global loads and stores, unrolled over them, would be more than
        :data:`EPILOGUE_UNROLLED_ACCESSES` (the schedule line then says so)."""
        self.epilogue_rolled = cells * k.global_accesses(per_cell) > EPILOGUE_UNROLLED_ACCESSES
        return self.epilogue_rolled

    def cell_epilogue(self, m: k.Expr, n: k.Expr, acc: k.Expr) -> k.Stmt:
        """Finalise the sum ``acc`` of cell (row m, column n) of this batch entry and store it
        (or, split-K, store the raw partial sum) when the cell is inside the output. It
        declares ``gt_m``, ``gt_n`` and the cell's variables: give it a scope of its own (the
        body of a loop over cells)."""
        e, view, nc = self.e, self.view, self.view.nc
        values = dict(self.batch_env())
        values.update(e.decode(e.v("gt_m"), view.a.group, view.a.extents))
        values.update(e.decode(e.v("gt_n"), view.b.group, view.b.extents))
        # The cell's coordinates and flat index before the bounds test: plain arithmetic
        # (harmless outside), and the compiler then shares it between the cells of a row.
        position: list[k.Stmt] = [k.Declare(v, self.itype, values[v]) for v in nc.out_vars]
        cell = [e.v(v) for v in nc.out_vars]
        flat = e.c(0)
        order = (view.batch + view.a.group + view.b.group,
                 view.batch_extents + view.a.extents + view.b.extents)
        if (tuple(nc.out_vars), tuple(nc.out_shape)) == order:
            # Row-major in (batch, row, column): the cell's flat index is its row and column,
            # not the coordinates decoded from them and recomposed (the compiler does not see
            # that as the identity: a bf16 filter gradient's tensor-core kernel, 128 cells a
            # thread, was 5927 PTX instructions with it, 2676 without).
            flat = e.add(e.mul(e.v("gt_m"), view.n), e.v("gt_n"))
            if view.batch:
                flat = e.add(e.mul(e.v("gt_batch"), view.m * view.n), flat)
        else:
            for var, stride in zip(nc.out_vars, row_major_strides(nc.out_shape)):
                flat = e.add(flat, e.mul(e.v(var), stride))
        position.append(k.Declare("gt_flat", self.itype, flat))
        cell_stmts: list[k.Stmt] = []
        if self.scratch is not None:
            # Split-K: the raw sum over this slice; the sum kernel finalises.
            scratch = self.scratch.name
            self.ctx.params[scratch] = k.Param(scratch, self.scratch.dtype, output=True)
            cells = math.prod(nc.out_shape)
            index = e.add(e.mul(e.v("gt_slice"), cells), e.v("gt_flat"))
            cell_stmts.append(k.Store(scratch, index, acc))
        else:
            result = finalize(nc, self.ctx, acc, None, cell, e.v("gt_flat"), self.ctype,
                              self.itype)
            cell_stmts.append(k.Declare(f"v_{nc.out}", self.ctype, result))
            registers = {nc.out: k.Var(f"v_{nc.out}", self.ctype)}
            cell_stmts += _epilogue(self.plan, self.ctx, cell, e.v("gt_flat"), self.itype,
                                    registers)
        inside = k.BinOp("&&", e.lt(e.v("gt_m"), view.m), e.lt(e.v("gt_n"), view.n), "bool")
        return k.block(k.Declare("gt_m", self.itype, m), k.Declare("gt_n", self.itype, n),
                       *position, k.If(inside, k.block(*cell_stmts)))
