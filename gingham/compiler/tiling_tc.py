"""Tensor-core schedule for 16-bit float contractions on CUDA (sm_80 and later).

A sum of products whose operands are both float16 or both bfloat16 and that accumulates in
float32 (the compute type of every 16-bit float output) is the batched matrix product of
:func:`gingham.compiler.tiling_gpu.gemm_view`: matmuls, convolutions as implicit GEMM (im2col
decoded while staging) and the data and filter gradients that Tile's autodiff derives from
them. On CUDA devices of compute capability 8.0 or later it runs on the tensor cores:

* a block of ``warps_m x warps_n`` warps computes a TM x TN tile of one batch entry, each warp
  a (TM / warps_m) x (TN / warps_n) tile as m16n8k16 ``mma.sync`` products with float32
  accumulators in registers;
* per step of TK (32 or 64) along K the block stages a TM x TK slice of A and a TK x TN slice of B
  in shared memory, each in the operand's own order (K-fastest, or tile-index-fastest: the
  gradients read their operands transposed); ``ldmatrix`` (``.trans`` for the second order)
  loads the warps' fragments from it. 16-byte chunks are XOR-swizzled inside each row, so
  that neither the copies nor the eight rows of an ``ldmatrix`` meet in one bank;
* staging is ``cp.async`` (16 bytes, zero-filled where invalid) into a ring of STAGES
  buffers (each A's slice then B's), so that the copies of the next STAGES - 1 steps fly
  while one step computes, one barrier per step. An operand whose unit-stride run is not a
  multiple of 8 elements, or misaligned, or split by a guard (a convolution of 3 input
  channels) is staged element by element instead (ordinary loads and shared-memory stores,
  same ring, same barriers);
* the k16 steps of a TK step are unrolled, and each loads its successor's fragments into a
  second register set while its own products run; the last loads the next TK step's first
  fragments, after the barrier (FRAGMENT_SETS = 1: after the products, one set). Every
  ldmatrix address is the ring buffer's offset plus a per-thread swizzled offset computed
  once before the K loop plus a constant;
* whatever repeats (the copies of the slots, their hoisted values, the fragment loads, the
  products, the k16 steps, the epilogue's cells) is an ``unroll`` loop over register arrays
  (``#pragma unroll``: NVRTC unrolls it, every index a constant), not text written out per
  repeat: ~19 KB of CUDA per kernel, not 40-145 KB. NVRTC's time barely moved (its front end
  was ~5% of it; the optimiser and ptxas work on the unrolled code: ~1 s a kernel on this
  team's 2-core machine, 1.3-1.4 s for the slowest on the H200's host); the epilogue's 128
  guarded cells are ~40% of the PTX of a 64x64 warp tile;
* guards (zero padding) are tested per copy, as in :mod:`tiling_gpu`: an invalid tap is
  staged as 0; ragged edges of M, N and K are guarded the same way;
* the epilogue finalises each cell and runs the fused elementwise epilogue exactly as the
  float32 tiled kernel does (shared code); with split-K (long K, few output tiles: the filter
  gradient) the partial sums go to a scratch buffer and :func:`tiling_gpu.split_sum` adds
  them, then finalises.

The tensor-core instructions are :class:`gingham.compiler.kernel_ir.WarpOp` nodes, which only
the CUDA dialect renders (inline PTX); the ring lives in dynamic shared memory (a ``dynamic``
``LocalArray``, ``Launch.shared_bytes``), so configurations may pass 48 KiB. Im2col operands,
whose reads overlap from one K step to the next, are copied through L1 (``cp.async.ca``).
Anything else falls back to the float32 tiled schedule.

Big GEMMs take 128x256 tiles of 8 warps stepping 64 along K (a 144 KiB ring: one block a
multiprocessor): bf16 GEMM 8192 2.40-2.43 ms on the H200 against 2.60 for the earlier
128x128x32 choice, the fastest of a first sweep of 16 configurations and within the spread of
the best of a second (see CANDIDATES). The tuner searches the wider space of
:mod:`gingham.tune.space` (``gingham tune ops --dtype bf16``).

``gingham bench ops --device cuda:0 --only gemm --dtype bf16 --gemm-sizes 4096,8192
--torch-compile off`` on the H200, against PyTorch 2.11 (cuBLAS) in the same run: GEMM 8192
2.76 ms = 0.60x (2.94 ms = 0.55x with 128x128x32 tiles, the run before), GEMM 4096 0.365 ms =
0.57x (0.393 ms = 0.52x).

Measured on an H200 (tools/bench_tensor_cores.py, against PyTorch 2.11 in the same run, two
runs), before this round: bf16 GEMM 8192 2.62-2.63 ms = 0.54x cuBLAS (420 TFLOP/s; 2.68 ms
with one fragment set; 2.76 ms = 0.51x before the fragments were pipelined; 2.52 ms = 0.57x
with TK = 64), fp16 GEMM 4096 0.49x (0.46x before); the CIFAR conv layer
forward 0.064 ms = 0.47-0.49x cuDNN channels-last (unchanged), forward + backward 0.197-0.201
ms, 0.64-1.25x (cuDNN's own time moved between the runs, 0.125 and 0.251 ms).

Before this round Nsight Compute found both latency-bound: the GEMM at 224 registers a
thread (8 warps a multiprocessor) kept the tensor pipe 56% busy, stalled on fixed-latency
dependencies (address arithmetic before each ldmatrix: now precomputed); the conv forward
spent its issue slots on index arithmetic, about a third of it in the epilogue (each cell
decoded its coordinates inside its bounds test, so no cell shared them: 2225 PTX
instructions a thread, now 409). Cutting it left the time unchanged; what limits it now is,
presumably (not profiled since), latency: K = 576 is 18 steps, 1024 blocks run in 2-3 waves,
and each block's pipeline fill is exposed (its registers went 128 -> 168, 4 -> 3 blocks a
multiprocessor; capping them at 128 spills and measured slower, 0.073 ms). On compute
capability 9.0 the warpgroup products of :mod:`gingham.compiler.tiling_wgmma` replace this
schedule where they apply (bf16 GEMM 8192 2.02 ms against 2.67, the same run); next: a
persistent conv kernel that overlaps one tile's epilogue with the next tile's fill.

    kernels = tensor_core_contraction(plan, ctx, "k0_C", info)  # None: not for tensor cores
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..config import get_config
from ..devices.base import DeviceInfo
from ..tile import dtypes as dt
from . import kernel_ir as k
from .fusion import KernelPlan
from .lower import LoweringContext, compute_type
from .tiling_gpu import (MIN_WORK, GemmView, Side, Staging, TiledKernel, _conjunction,
                         gemm_view, output_tiles, split_sum, staging)

#: mma.sync m16n8k16 with bfloat16 operands, ldmatrix and cp.async need sm_80.
MIN_COMPUTE_CAPABILITY = 80
#: 16-bit elements per 16-byte copy (and per ldmatrix row).
VECTOR = 8
#: Shared memory a block may use where the device does not say (CUDA's limit without opting
#: in; with the device's opt-in limit known, the launch raises the kernel's limit as needed).
SHARED_LIMIT = 48 * 1024
#: Keep im2col operands (reads that overlap between K steps) in L1 as well as L2.
L1_FOR_OVERLAPPING_READS = True
#: Fragment register sets: 2 loads the next k16 step's fragments while this step's products
#: run (more registers); 1 loads them after the products.
FRAGMENT_SETS = 2
#: Issue each operand's copies of a TK step after a different k16 step's products (A after
#: the first, B after the second), so that the tensor cores have products queued while the
#: copies' addresses are computed; False: both at the start of the step, before any product.
#: Measured slower on the H200 (bf16 GEMM 8192, same run: 128x256x64 2.49 ms against 2.43;
#: 128x128x64 2.56 against 2.48 in the run before), so off.
SPREAD_COPIES = False
#: Split K into slices of at least this many TK steps.
MIN_SLICE_K_TILES = 8
#: Split K until there are about this many blocks per multiprocessor.
SPLIT_BLOCKS_PER_UNIT = 2
#: Relative cost, in multiply-adds of one block tile cell, of writing and reading back a
#: partial sum (a tensor core does ~30 multiply-adds in the time memory moves a float).
PARTIAL_COST = 256
_OPERAND_TYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class TcConfig:
    """A tensor-core tiling: the block tile (tile_m x tile_n, stepping tile_k along K), its
    warps (warps_m x warps_n, each a (tile_m / warps_m) x (tile_n / warps_n) tile), the depth
    of the shared-memory ring, the band of ``group_m`` tile rows visited together, and the
    number of slices of K (split-K); ``min_blocks`` > 0 caps the registers so that that many
    blocks fit a multiprocessor (``__launch_bounds__``; the compiler spills what does not)."""

    tile_m: int
    tile_n: int
    warps_m: int
    warps_n: int
    tile_k: int = 32
    stages: int = 3
    group_m: int = 8
    split: int = 1
    min_blocks: int = 0
    #: "mma" (``mma.sync`` per warp, sm_80+) or "wgmma" (warpgroups, sm_90a:
    #: :mod:`gingham.compiler.tiling_wgmma`; warps_n 1, 16 rows a warp, K step 64).
    instruction: str = "mma"

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def warp_m(self) -> int:
        return self.tile_m // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.tile_n // self.warps_n

    @property
    def shared_bytes(self) -> int:
        return self.stages * (self.tile_m + self.tile_n) * self.tile_k * 2

    def valid(self) -> bool:
        """Warp tiles of whole 16 x 16 products; rows of whole power-of-two chunk counts; an
        even number of k16 steps per TK step (the two fragment sets alternate)."""
        def chunks_ok(width: int) -> bool:
            chunks = width // VECTOR
            return width % VECTOR == 0 and chunks & (chunks - 1) == 0
        if self.instruction == "wgmma":  # each warpgroup one or two m64 products along M
            return (self.warps_n == 1 and self.warps_m % 4 == 0
                    and self.tile_m in (16 * self.warps_m, 32 * self.warps_m)
                    and self.tile_k == 64 and self.tile_n % 64 == 0 and self.tile_n <= 256
                    and self.stages >= 3)
        if self.instruction != "mma":
            return False
        return (self.tile_m % self.warps_m == 0 and self.tile_n % self.warps_n == 0
                and self.warp_m % 16 == 0 and self.warp_n % 16 == 0 and self.tile_k % 32 == 0
                and all(chunks_ok(w) for w in (self.tile_m, self.tile_n, self.tile_k))
                and self.stages >= 2)

    def efficiency(self) -> float:
        """Relative throughput: shared-memory fragment loads per product fall with the warp
        tile, global loads per product with the block tile (constants to refine)."""
        globals_ = 1 / self.tile_m + 1 / self.tile_n
        if self.instruction == "wgmma":  # no fragments: the tensor cores read shared memory
            return 1.0 / (1.0 + 32 * globals_)
        fragments = 1 / self.warp_m + 1 / self.warp_n
        return 1.0 / (1.0 + 16 * fragments + 32 * globals_)

    def __str__(self) -> str:
        split = f", split-K {self.split}" if self.split > 1 else ""
        bound = f", {self.min_blocks} blocks/SM" if self.min_blocks else ""
        band = f", bands of {self.group_m}" if self.group_m != 8 else ""
        if self.instruction == "wgmma":
            rows = 4 * self.warp_m
            return (f"{self.tile_m}x{self.tile_n}x{self.tile_k} tile, {self.warps_m // 4} "
                    f"warpgroup(s) of {rows}x{self.tile_n}, {self.stages} stages"
                    f"{split}{bound}{band}")
        return (f"{self.tile_m}x{self.tile_n}x{self.tile_k} tile, {self.warps_m}x{self.warps_n} "
                f"warps of {self.warp_m}x{self.warp_n}, {self.stages} stages{split}{bound}{band}")


#: 32-bit registers of a multiprocessor (sm_80 / sm_90), and resident threads at most.
REGISTERS_PER_UNIT = 65536
THREADS_PER_UNIT = 2048
#: Registers a thread needs beside its accumulators and fragments (addresses, loop state):
#: what makes :func:`registers` match NVRTC's counts on the H200 (warp tiles of 64x64 took
#: 242-255 registers, of 64x32 152-172).
OTHER_REGISTERS = 60
#: Registers a thread can have. A warpgroup of 128x256 (256 accumulators a thread) spilled and
#: ran 10-13x slower than 128x256 of two warpgroups on the H200 (ResNet-9's bf16 convolutions,
#: e.g. 2.67 against 0.18 ms; ``tools/cost_model_fit.py collect --precision bf16``): such
#: tilings are not built.
MAX_THREAD_REGISTERS = 255
#: Cost of one TK step beyond its products (barrier, ring bookkeeping, pipeline bubble), in
#: multiply-adds of each block tile cell: K step 64 beat 32 by ~5% on the H200 (2.48 against
#: 2.60 ms with 128x128 tiles, 2.40 against 2.59 with 128x256), half the steps.
STEP_COST = 8
#: Warps a multiprocessor needs resident to hide the latency of the fragment loads, and how
#: strongly fewer slow it down: 128x128x64 tiles with 4 stages (128 KiB: one block of 4 warps
#: a multiprocessor) took 2.79 ms against 2.48 with 3 stages (two blocks): (8 / 4) ** 0.2.
WARPS_TO_HIDE = 8
#: K steps' worth of a warpgroup block's fixed work (the ring's fill, the epilogue), exposed
#: unless a second block shares the multiprocessor: short-K convolutions (9-18 steps) then
#: prefer two blocks of 3-stage rings.
BLOCK_OVERHEAD_STEPS = 3
LATENCY_EXPONENT = 0.2


#: The candidates of the untuned choice, largest first (shared memory 144, 48, 36, 36 and 32
#: KiB); the tuner (:mod:`gingham.tune.space`) searches a wider space. Measured on an H200
#: (tools/bench_tensor_cores.py --sweep, 10 repeats, PyTorch's torch.mm 1.40-1.47 ms in the
#: same run), bf16 GEMM 8192: 128x256x64 tiles of 2x4 warps, 3 stages 2.40 ms (0.59x; 255
#: registers, one block a multiprocessor); 256x128x64 2.47; 128x128x64 2.48 (bands of 4 or 16
#: rows instead of 8: 2.50, 2.49; 4 stages 2.79); 128x256x32 2.59 (4 stages 2.58); 256x128x32
#: 2.63 (4 stages 2.59); 128x128x32 2.60 (4 stages 2.62); 128x128 of 2x4 warps (64x32, 152-172
#: registers, two blocks a multiprocessor) 3.67 (K step 32), 2.79 (64), 2.83 (64, registers
#: capped at 128 for two blocks: spills); 4x4 warps of 512 threads did not launch (registers).
#: A second sweep (same tool): 128x256x64 2.43 ms (4 stages 2.43, 2 stages 2.75); two-stage
#: rings of K step 128: 256x128 2.40, 128x256 2.41 (16 bytes spilled), 128x128 2.75: within
#: the run-to-run spread of the default (2.40 and 2.43), so the default stays.
#: Earlier rounds: the CIFAR conv forward 0.061-0.066 ms with every 128x64 or 64x64 variant
#: (128x64 of 4x2 warps 0.069; registers capped for 4 (6) blocks 0.073 (0.093)).
CANDIDATES: tuple[TcConfig, ...] = (
    TcConfig(128, 256, 2, 4, tile_k=64),
    TcConfig(128, 128, 2, 2),
    TcConfig(128, 64, 2, 2),
    TcConfig(64, 128, 2, 2),
    TcConfig(64, 64, 2, 2, stages=4),
)


#: The warpgroup candidates (sm_90a, :mod:`gingham.compiler.tiling_wgmma`), largest first:
#: 1 or 2 warpgroups along M, the whole tile N in each product, K step 64, copies 2 steps
#: ahead in a ring of 4 (shared memory 192, 128, 96, 64 and 32 KiB), or 1 step ahead in a
#: ring of 3 (96 KiB: two blocks a multiprocessor).
WGMMA_CANDIDATES: tuple[TcConfig, ...] = (
    TcConfig(128, 256, 8, 1, tile_k=64, stages=4, instruction="wgmma"),
    TcConfig(256, 128, 8, 1, tile_k=64, stages=4, instruction="wgmma"),
    TcConfig(128, 128, 8, 1, tile_k=64, stages=4, instruction="wgmma"),
    TcConfig(128, 128, 8, 1, tile_k=64, stages=3, instruction="wgmma"),
    TcConfig(128, 64, 8, 1, tile_k=64, stages=4, instruction="wgmma"),
    TcConfig(64, 128, 4, 1, tile_k=64, stages=4, instruction="wgmma"),
    TcConfig(64, 64, 4, 1, tile_k=64, stages=4, instruction="wgmma"),
)


def wgmma_available(info: DeviceInfo) -> bool:
    """Whether the device runs Hopper's warpgroup products: CUDA compute capability 9.0
    exactly (sm_90a; later architectures dropped them) and ``config.wgmma`` on."""
    return (info.dialect == "cuda" and info.compute_capability == 90
            and get_config().wgmma)


def registers(config: TcConfig) -> int:
    """32-bit registers a thread needs, about: its accumulators (a warp tile of floats over 32
    lanes), its fragment sets (4 per m16, 2 per n8) and OTHER_REGISTERS. More than
    MAX_THREAD_REGISTERS: the kernel would spill (:func:`fits` refuses it).

        >>> registers(TcConfig(128, 128, 2, 2))   # warp tile 64x64: 128 + 2 * 32 + 60
        252
        >>> registers(TcConfig(128, 256, 4, 1, tile_k=64, instruction="wgmma"))  # 256 + 60
        316
    """
    if config.instruction == "wgmma":  # accumulators only: the operands stay in shared memory
        return config.warp_m // 16 * config.tile_n // 2 + OTHER_REGISTERS
    fragments = FRAGMENT_SETS * (config.warp_m // 16 * 4 + config.warp_n // 8 * 2)
    return config.warp_m * config.warp_n // 32 + fragments + OTHER_REGISTERS


def residency(config: TcConfig, info: DeviceInfo) -> int:
    """Blocks of ``config`` resident on one multiprocessor at once (0: none fits): limited by
    its registers (capped by ``min_blocks``), shared memory and threads."""
    regs = min(registers(config), MAX_THREAD_REGISTERS)
    if config.min_blocks:
        regs = min(regs, REGISTERS_PER_UNIT // (config.threads * config.min_blocks))
    shared = info.local_memory_bytes or SHARED_LIMIT
    return min(REGISTERS_PER_UNIT // (config.threads * regs), shared // config.shared_bytes,
               THREADS_PER_UNIT // config.threads)


def fits(config: TcConfig, info: DeviceInfo, wgmma: bool | None = None) -> bool:
    """Whether ``config`` is whole (:meth:`TcConfig.valid`) and a block of it fits the device:
    threads, shared memory and registers (512 threads of 32x64 warp tiles do not launch).
    ``wgmma``: :func:`wgmma_available`'s answer, where the caller has it already."""
    limit = info.local_memory_bytes or SHARED_LIMIT
    if wgmma is None:
        wgmma = wgmma_available(info)
    if config.instruction == "wgmma" and not wgmma:
        return False
    return (config.valid() and config.threads <= max(info.max_work_group_size, 1)
            and config.shared_bytes <= limit and registers(config) <= MAX_THREAD_REGISTERS
            and residency(config, info) >= 1)


def choose_split(config: TcConfig, view: GemmView, info: DeviceInfo) -> int:
    """1 unless the output has fewer block tiles than the device has multiprocessors and K is
    long; then about SPLIT_BLOCKS_PER_UNIT blocks per unit, slices of whole TK steps."""
    tiles = output_tiles(config, view)  # type: ignore[arg-type]
    units = max(info.compute_units, 1)
    k_tiles = math.ceil(view.k / config.tile_k)
    if tiles >= units or k_tiles < 2 * MIN_SLICE_K_TILES:
        return 1
    split = min(math.ceil(SPLIT_BLOCKS_PER_UNIT * units / tiles), k_tiles // MIN_SLICE_K_TILES)
    return math.ceil(k_tiles / math.ceil(k_tiles / max(split, 1)))


def config_cost(config: TcConfig, view: GemmView, info: DeviceInfo) -> float:
    """Relative time: block tiles per multiprocessor, one after another, each its area times
    its K steps over the configuration's efficiency plus STEP_COST per step, slower where too
    few warps are resident to hide latency, plus the partial sums of a split K.

        >>> config_cost(TcConfig(128, 256, 2, 4, tile_k=64), gemm_8192, h200) < \
        ...     config_cost(TcConfig(128, 128, 2, 2), gemm_8192, h200)
        True
    """
    units = max(info.compute_units, 1)
    blocks = output_tiles(config, view) * config.split  # type: ignore[arg-type]
    steps = math.ceil(math.ceil(view.k / config.tile_k) / config.split)
    per_step = config.tile_k / config.efficiency() + STEP_COST
    # Warps resident on a unit: as many blocks as fit, or as there are blocks to go round
    # (261 split-K blocks of one warp over 132 units hide nothing: 6x slower than four warps).
    warps = max(min(residency(config, info), math.ceil(blocks / units)), 1) \
        * config.threads // 32
    hide = min(1.0, warps / WARPS_TO_HIDE) ** LATENCY_EXPONENT
    if config.instruction == "wgmma":
        # A block's pipeline fill and epilogue, hidden only by another block's products.
        steps += BLOCK_OVERHEAD_STEPS / min(residency(config, info), 2)
    cost = math.ceil(blocks / units) * config.tile_m * config.tile_n * steps * per_step / hide
    if config.split > 1:
        cost += PARTIAL_COST * config.split * view.m * view.n * view.batches / units
    return cost


def choose_config(view: GemmView, info: DeviceInfo) -> TcConfig | None:
    """The cheapest candidate that can be built (:func:`buildable`) by :func:`config_cost`,
    with K whole or split: a warpgroup one (:data:`WGMMA_CANDIDATES`) where the device has
    them and one can be built, else an ``mma.sync`` one."""
    # Read once: the configuration behind it costs ~40 us a read, and a bf16 ResNet-9 step
    # checked some 400 candidates, each asking.
    wgmma = wgmma_available(info)
    return (_cheapest(WGMMA_CANDIDATES, view, info, wgmma) if wgmma else None) \
        or _cheapest(CANDIDATES, view, info, wgmma)


def _cheapest(candidates: tuple[TcConfig, ...], view: GemmView, info: DeviceInfo,
              wgmma: bool) -> TcConfig | None:
    options = []
    for config in candidates:
        if buildable(config, view, info, wgmma):
            options.append(config)
            split = choose_split(config, view, info)
            if split > 1:
                options.append(dataclasses.replace(config, split=split))
    if not options:
        return None
    return min(options, key=lambda c: config_cost(c, view, info))


def stagings(config: TcConfig, view: GemmView) -> tuple[Staging, Staging] | None:
    """How a block of ``config`` stages A and B (16-byte copies where :func:`vector_copies`
    allows), or None when its threads cannot share the copies evenly."""
    stage_a = staging(view.a, config.tile_m, config,
                      VECTOR if vector_copies(view.a, view) else 1)
    stage_b = staging(view.b, config.tile_n, config,
                      VECTOR if vector_copies(view.b, view) else 1)
    return None if stage_a is None or stage_b is None else (stage_a, stage_b)


def buildable(config: TcConfig, view: GemmView, info: DeviceInfo,
              wgmma: bool | None = None) -> bool:
    """Whether the kernel of ``config`` can be built for ``view`` on this device: it fits
    (:func:`fits`, which ``wgmma`` is passed to) and both operands stage evenly over its
    threads."""
    staged = stagings(config, view) if fits(config, info, wgmma) else None
    if staged is None:
        return False
    # Warpgroup products of element-staged operands (a 3-channel convolution) measured slower
    # than mma.sync on the H200 (ResNet-9's first conv: 0.225 against 0.146-0.160 ms).
    return config.instruction != "wgmma" or all(stage.vector > 1 for stage in staged)


# -- which contractions ----------------------------------------------------------------------------


def operand_type(plan: KernelPlan, ctx: LoweringContext) -> str | None:
    """"float16" or "bfloat16" when both operands (and their buffers) have that type."""
    nc = plan.contraction
    if nc is None or len(nc.operands) != 2:
        return None
    names = set()
    for access in nc.operands:
        names.add(dt.dtype_name(ctx.dtype(access.tensor)))
        names.add(dt.dtype_name(ctx.dtype(ctx.buffer(access.tensor))))
    if len(names) != 1 or not names <= set(_OPERAND_TYPES):
        return None
    return names.pop()


def vector_copies(side: Side, view: GemmView) -> bool:
    """Whether 16-byte copies can stage this operand: its unit-stride index (the last K
    variable, or the last tile variable) has stride 1, a multiple of 8 values and no guard,
    and every other stride and the offset are multiples of 8 elements (16-byte alignment)."""
    address = side.address
    if side.k_fastest:
        if not view.red_vars:
            return False
        var = view.red_vars[-1]
        lo, hi = view.red_ranges[var]
        extent = hi - lo + 1
    else:
        var, lo, extent = side.group[-1], 0, side.extents[-1]
    if address.coeffs.get(var) != 1 or extent % VECTOR or (address.const + lo) % VECTOR:
        return False
    if any(c % VECTOR for name, c in address.coeffs.items() if name != var):
        return False
    return not any(poly.coeffs.get(var) for poly, _ in side.guards)


def overlapping_reads(side: Side, view: GemmView) -> bool:
    """Whether a K variable and a tile variable move the address by the same stride (im2col:
    ``I[n, y + ky - 1, ...]``), so that one block reads the same elements at several K steps."""
    red = set(view.red_vars)
    strides = {abs(c) for v, c in side.address.coeffs.items() if v in red and c}
    return any(abs(c) in strides for v, c in side.address.coeffs.items()
               if v in side.group and c)


def tensor_core_view(plan: KernelPlan, ctx: LoweringContext, info: DeviceInfo
                     ) -> tuple[GemmView, str] | None:
    """(matrix-product view, operand type) of a plan for the tensor cores, or None: the device
    is CUDA of compute capability >= 8.0, both operands are float16 or both bfloat16, the
    result computes in float32 and the contraction is a matrix product (:func:`gemm_view`) of
    at least MIN_WORK multiply-adds.

        >>> view, operands = tensor_core_view(plan, ctx, h200)   # bf16 GEMM: (..., "bfloat16")
    """
    if (info.dialect != "cuda" or plan.kind != "contraction"
            or info.compute_capability < MIN_COMPUTE_CAPABILITY):
        return None
    nc = plan.contraction
    assert nc is not None
    operands = operand_type(plan, ctx)
    if operands is None or compute_type(ctx.dtype(nc.out)) != "float32":
        return None
    view = gemm_view(nc)
    # Small products stay on the tensor cores: the SIMT tiled kernel was slower for every one
    # measured on the H200 (tools/bench_tc_small.py: ResNet-9's classifier, 512 x 512 -> 10,
    # 6.5 us against 24.7; its gradients 5.2 / 23.9 and 5.3 / 7.3 us; 128^3 8.4 / 8.6), and
    # its NVRTC time (~0.15 s more) is hidden by the parallel compile of the other kernels.
    if view is None or view.m * view.n * view.k * view.batches < MIN_WORK:
        return None
    return view, operands


def tensor_core_contraction(plan: KernelPlan, ctx: LoweringContext, name: str,
                            info: DeviceInfo, config: TcConfig | None = None
                            ) -> list[k.Kernel] | None:
    """Tensor-core kernels for a float16/bfloat16 sum of products on CUDA, or None.

    None unless the device is CUDA of compute capability >= 8.0, both operands are float16 or
    both bfloat16, the result computes in float32, the contraction is a matrix product
    (:func:`gemm_view`) of at least MIN_WORK multiply-adds (:func:`tensor_core_view`) and
    ``config`` (default: :func:`choose_config`'s) can be built. Otherwise one kernel, or with
    split-K two, that compute what lower_contraction computes (finalisation and fused
    epilogue included), in launch order.
    """
    found = tensor_core_view(plan, ctx, info)
    if found is None:
        return None
    view, operands = found
    config = config or choose_config(view, info)
    if config is None or not fits(config, info):
        return None
    staged = stagings(config, view)
    if staged is None:
        return None
    stage_a, stage_b = staged
    k_tiles = math.ceil(view.k / config.tile_k)
    split = min(max(config.split, 1), k_tiles)
    split = math.ceil(k_tiles / math.ceil(k_tiles / split))  # no slice empty
    config = dataclasses.replace(config, split=split)
    # Imported here: tiling_wgmma builds on this module's TensorCoreKernel.
    from .tiling_wgmma import WgmmaKernel
    kind = WgmmaKernel if config.instruction == "wgmma" else TensorCoreKernel
    if split == 1:
        return [kind(plan, ctx, name, view, config, stage_a, stage_b, operands).build()]
    assert plan.contraction is not None
    scratch = k.Scratch(f"{name}_partials", "float32",
                        split * math.prod(plan.contraction.out_shape))
    partial_ctx = ctx.fork()  # its own parameters
    partials = kind(plan, partial_ctx, f"{name}_partial", view, config, stage_a, stage_b,
                    operands, scratch).build()
    return [partials, split_sum(plan, ctx, name, view.nc, scratch, split, "float32")]


class TensorCoreKernel(TiledKernel):
    """The kernel of one tensor-core schedule. From :class:`TiledKernel` it keeps the block's
    tile and batch coordinates, the per-slot hoisting, the decoding of K with guards, and the
    per-cell finalisation and epilogue; it replaces staging, the inner product and the order
    of the epilogue's cells."""

    def __init__(self, plan: KernelPlan, ctx: LoweringContext, name: str, view: GemmView,
                 config: TcConfig, stage_a: Staging, stage_b: Staging, operands: str,
                 scratch: k.Scratch | None = None) -> None:
        super().__init__(plan, ctx, name, view, config, stage_a, stage_b,  # type: ignore
                         "float32", scratch)
        self.operands = operands
        self.mi = config.warp_m // 16  # m16 products per warp along M
        self.ni = config.warp_n // 8  # n8 products per warp along N

    # -- shared memory -----------------------------------------------------------------------
    #: One dynamic shared-memory array: a ring of STAGES buffers, each A's slice then B's.
    SHARED = "gt_smem"

    def region(self, stage: Staging) -> int:
        """Offset, in elements, of this operand's slice within a ring buffer."""
        return 0 if stage is self.stages[0] else math.prod(self.layout(self.stages[0]))

    @property
    def buffer_elements(self) -> int:
        """Elements of one ring buffer (both operands' slices)."""
        return sum(math.prod(self.layout(stage)) for stage in self.stages)

    def layout(self, stage: Staging) -> tuple[int, int]:
        """(rows, row length) of one operand's slice: tile rows of K, or K rows of the tile."""
        if stage.side.k_fastest:
            return stage.tile, stage.tile_k
        return stage.tile_k, stage.tile

    def shared_index(self, stage: Staging, base: k.Expr, kk: k.Expr, s: k.Expr) -> k.Expr:
        """Element (kk, s) of the ring buffer at element ``base``: the 8-element chunk of its
        row is XORed with a few bits of the row number, so that 8 consecutive rows at one
        column land in 8 different 16-byte bank groups (no conflicts for ldmatrix nor for the
        copies). The swizzle depends on the row modulo 8 only, and changes the chunk's low
        ``swizzle_chunks`` bits only (see :meth:`fragment_address`)."""
        e, t = self.e, self.itype
        rows, width = self.layout(stage)
        row, col = (s, kk) if stage.side.k_fastest else (kk, s)
        chunks = width // VECTOR
        swizzle = e.mod(e.div(row, max(1, VECTOR // chunks)), self.swizzle_chunks(stage))
        chunk = k.BinOp("^", e.div(col, VECTOR), swizzle, t)
        index = e.add(e.add(base, self.region(stage)), e.mul(row, width))
        index = e.add(index, e.mul(chunk, VECTOR))
        return e.add(index, e.mod(col, VECTOR))

    def swizzle_chunks(self, stage: Staging) -> int:
        return min(self.layout(stage)[1] // VECTOR, VECTOR)

    # -- staging -----------------------------------------------------------------------------
    # The copies, the per-slot values hoisted out of the K loop and the fragment loads are
    # ``unroll`` loops over register arrays, not statements repeated per slot: NVRTC unrolls
    # them (every array index is a constant after unrolling, so the arrays stay in registers)
    # from a source a fraction of the size; rendered slot by slot, a kernel was 40-145 KB of
    # CUDA and NVRTC spent seconds parsing it.
    def repeats(self, stage: Staging) -> tuple[int, int]:
        """(K repeats, tile repeats) of a work-item's slots: slot p of :meth:`Staging.slot`
        is one of each, so the slots are the grid of the two."""
        units_k, units_s = stage.units
        if stage.side.k_fastest:
            k_reps = units_k // stage.lanes_k
            return k_reps, stage.slots // k_reps
        s_reps = units_s // stage.lanes_s
        return stage.slots // s_reps, s_reps

    def slot_at(self, stage: Staging, k_rep: k.Expr, s_rep: k.Expr) -> tuple[k.Expr, k.Expr]:
        """(kk, s) of the first element of this work-item's slot (``k_rep``, ``s_rep``) within
        the TS x TK slice (:meth:`TiledKernel.slot_position` with the repeats as
        expressions: loop variables)."""
        e = self.e
        kk, s = self.lane(stage)
        kk = e.add(kk, e.mul(k_rep, stage.lanes_k))
        s = e.add(s, e.mul(s_rep, stage.lanes_s))
        if stage.side.k_fastest:
            return e.mul(kk, stage.vector), s
        return kk, e.mul(s, stage.vector)

    def hoisted(self, stage: Staging) -> list[k.Stmt]:
        """Per tile repeat of the slots, what does not change along K, into register arrays
        (``gt_ah_base[r]``, ``gt_ah_ok[r]``, ``gt_ah_g0[r]``, ...): validity of its row
        (column) and the row's share of the address and of each guard."""
        e, side = self.e, stage.side
        label = side.label
        _, s_reps = self.repeats(stage)
        rep = e.v(f"gt_{label}sr")
        _, s = self.slot_at(stage, e.c(0), rep)
        flat = f"gt_{label}d_s"
        arrays = [f"gt_{label}h_base"] + [f"gt_{label}h_g{g}" for g in range(len(side.guards))]
        stmts: list[k.Stmt] = [k.LocalArray(a, self.itype, (s_reps,), "register")
                               for a in arrays]
        ragged = side.total % stage.tile != 0
        if ragged:
            stmts.append(k.LocalArray(f"gt_{label}h_ok", "bool", (s_reps,), "register"))
        origin = e.v("gt_m0" if label == "a" else "gt_n0")
        body: list[k.Stmt] = [k.Declare(flat, self.itype, e.add(origin, s))]
        env = dict(self.batch_env())
        for var, value in e.decode(e.v(flat), side.group, side.extents).items():
            body.append(k.Declare(f"gt_{label}d_{var}", self.itype, value))
            env[var] = e.v(f"gt_{label}d_{var}")
        if ragged:
            body.append(k.StoreLocal(f"gt_{label}h_ok", (rep,), e.lt(e.v(flat), side.total)))
        names = set(side.group) | set(self.view.batch)
        body.append(k.StoreLocal(arrays[0], (rep,), e.affine(side.address.part(names), env)
                                 if names else e.c(0)))
        for g, (poly, _) in enumerate(side.guards):
            body.append(k.StoreLocal(arrays[1 + g], (rep,),
                                     e.affine(poly.part(names, const=True), env)))
        stmts.append(k.For(rep.name, 0, s_reps, k.block(*body), kind="unroll"))
        return stmts

    def issue(self, k_tile: k.Expr, base: k.Expr, stages: tuple[Staging, ...] | None = None
              ) -> list[k.Stmt]:
        """Start copying K tile ``k_tile`` of both operands (or of ``stages``) into the ring
        buffer at ``base``: per operand a loop over the slots' K repeats (decoding K once
        each) around a loop over their tile repeats (one copy each)."""
        return [self.slot_copies(stage, k_tile, base)
                for stage in (self.stages if stages is None else stages)]

    def slot_copies(self, stage: Staging, k_tile: k.Expr, base: k.Expr) -> k.Stmt:
        """The copies of this work-item's slots of ``stage`` at K tile ``k_tile``: 16-byte
        ``cp.async`` (zero-filled where invalid) or element loads stored to shared memory."""
        e, side, view, cfg = self.e, stage.side, self.view, self.cfg
        label = side.label
        k_reps, s_reps = self.repeats(stage)
        k_rep, s_rep = e.v(f"gt_{label}kr"), e.v(f"gt_{label}sr")
        kk, s = self.slot_at(stage, k_rep, s_rep)
        red = set(view.red_vars)
        lows = {v: e.c(lo) for v, (lo, _) in view.red_ranges.items()}
        extents = [hi - lo + 1 for lo, hi in view.red_ranges.values()]
        # K's share of the slot (depends on the K repeat only).
        kflat = f"gt_{label}k"
        kk_first, _ = self.slot_at(stage, k_rep, e.c(0))
        decode: list[k.Stmt] = [k.Declare(kflat, self.itype,
                                          e.add(e.mul(k_tile, cfg.tile_k), kk_first))]
        env = {}
        for var, value in e.decode(e.v(kflat), view.red_vars, extents, lows).items():
            decode.append(k.Declare(f"{kflat}_{var}", self.itype, value))
            env[var] = e.v(f"{kflat}_{var}")
        decode.append(k.Declare(f"{kflat}_addr", self.itype,
                                e.affine(side.address.part(red), env, const=False)))
        conditions: list[k.Expr] = []
        if view.k % cfg.tile_k:
            conditions.append(e.lt(e.v(kflat), view.k))
        # The tile's share (hoisted per tile repeat) and the guards, per copy.
        if side.total % stage.tile:
            conditions.append(k.LoadLocal(f"gt_{label}h_ok", (s_rep,), "bool"))
        for g, (poly, upper) in enumerate(side.guards):
            value = e.add(k.LoadLocal(f"gt_{label}h_g{g}", (s_rep,), self.itype),
                          e.affine(poly.part(red), env, const=False))
            conditions.append(k.BinOp(">=", value, e.c(0), "bool"))
            conditions.append(e.lt(value, upper))
        cond = _conjunction(conditions)
        index = e.add(e.add(k.LoadLocal(f"gt_{label}h_base", (s_rep,), self.itype),
                            e.v(f"{kflat}_addr")), side.address.const)
        target = self.shared_index(stage, base, kk, s)
        buffer = self.ctx.param(side.access.tensor)
        copy: k.Stmt
        if stage.vector > 1:
            cache = "ca" if (L1_FOR_OVERLAPPING_READS
                             and overlapping_reads(side, view)) else ""
            valid = cond if cond is not None else k.Const(True, "bool")
            if cond is not None:  # an invalid copy reads nothing, but keep it inside
                index = k.Select(cond, index, e.c(0), self.itype)
            copy = k.WarpOp("cp_async", shared=(self.SHARED, target), src=(buffer, index),
                            args=(valid,), variant=cache)
        else:
            value: k.Expr = k.Load(buffer, index, "uint16")
            if cond is not None:
                value = k.Select(cond, value, k.Const(0, "uint16"), "uint16")
            copy = k.StoreLocal(self.SHARED, (target,), value)
        inner = k.For(s_rep.name, 0, s_reps, copy, kind="unroll")
        return k.For(k_rep.name, 0, k_reps, k.block(*decode, inner), kind="unroll")

    # -- the inner product ---------------------------------------------------------------------
    def lane_position(self, stage: Staging) -> tuple[k.Expr, k.Expr]:
        """(kk, s) of the row this lane gives ldmatrix for the warp's first fragment (k16 step
        0, first m16 of A / first n16 of B): A's x4 holds (m0-7, k0-7), (m8-15, k0-7),
        (m0-7, k8-15), (m8-15, k8-15); B's x4 (n0-7, k0-7), (n0-7, k8-15), (n8-15, k0-7),
        (n8-15, k8-15) (transposed when the operand is stored K rows of the tile)."""
        e, cfg = self.e, self.cfg
        lane = e.v("gt_lane")
        lo8 = e.mod(lane, 8)  # row within an 8x8 matrix
        mat1 = e.mod(e.div(lane, 8), 2)  # bit 0 of the matrix number
        mat2 = e.div(lane, 16)  # bit 1
        if stage is self.stages[0]:
            s0 = e.mul(e.v("gt_wm"), cfg.warp_m)
            if stage.side.k_fastest:
                return e.mul(mat2, 8), e.add(s0, e.mod(lane, 16))
            return e.add(e.mul(mat2, 8), lo8), e.add(s0, e.mul(mat1, 8))
        s0 = e.mul(e.v("gt_wn"), cfg.warp_n)
        if stage.side.k_fastest:
            return e.mul(mat1, 8), e.add(e.add(s0, e.mul(mat2, 8)), lo8)
        return e.add(e.mul(mat1, 8), lo8), e.add(s0, e.mul(mat2, 8))

    def period(self, stage: Staging) -> int:
        """Elements along a row after which the swizzle repeats (16, 32 or 64)."""
        return self.swizzle_chunks(stage) * VECTOR

    def fragment_address(self, stage: Staging, k_off: k.Expr, s_off: k.Expr) -> k.Expr:
        """This lane's ldmatrix row for the fragment ``k_off`` along K and ``s_off`` along the
        tile from its first one, relative to the ring buffer: one of the per-thread offsets
        computed before the K loop (``gt_afo[key / 16]``) plus a constant (once the loops
        are unrolled). A step of 8 rows leaves the swizzle alone and a step of
        ``swizzle_chunks`` chunks along a row leaves the XORed bits alone, so both are
        constants; the rest of a step along the row (``key``) needs an offset of its own."""
        e = self.e
        _, width = self.layout(stage)
        row_off, col_off = (s_off, k_off) if stage.side.k_fastest else (k_off, s_off)
        key = e.mod(col_off, self.period(stage))
        constant = k.BinOp("-", e.add(e.mul(row_off, width), col_off), key, self.itype)
        offset = k.LoadLocal(f"gt_{stage.side.label}fo", (e.div(key, 16),), self.itype)
        return e.add(offset, constant)

    def fragment_offsets(self) -> list[k.Stmt]:
        """The per-thread ldmatrix offsets (before the K loop), one per 16 elements of the
        swizzle's period: where this lane's row of a fragment ``key`` further along the row
        (K for a K-major operand, the tile otherwise) starts (ones no fragment uses are
        dead code)."""
        e = self.e
        stmts: list[k.Stmt] = []
        for stage in self.stages:
            name = f"gt_{stage.side.label}fo"
            q = e.v("gt_fq")
            kk, s = self.lane_position(stage)
            if stage.side.k_fastest:
                kk = e.add(kk, e.mul(q, 16))
            else:
                s = e.add(s, e.mul(q, 16))
            keys = self.period(stage) // 16
            stmts += [k.LocalArray(name, self.itype, (keys,), "register"),
                      k.For(q.name, 0, keys, k.StoreLocal(
                          name, (q,), self.shared_index(stage, e.c(0), kk, s)), kind="unroll")]
        return stmts

    def fragment_loads(self, base: k.Expr, kk: k.Expr, half: k.Expr) -> list[k.Stmt]:
        """ldmatrix of this warp's A fragments (one x4 per m16) and B fragments (one x4 per
        two n8) for k16 step ``kk`` of the ring buffer at ``base``, into fragment set
        ``half`` (0 or 1: one set is loaded while the other feeds the products)."""
        e = self.e
        u32 = "uint32"
        stage_a, stage_b = self.stages
        i, j = e.v("gt_fi"), e.v("gt_fj")
        k_off = e.mul(kk, 16)
        regs_a = tuple(k.LoadLocal("gt_af", (half, i, e.c(r)), u32) for r in range(4))
        load_a = k.WarpOp("ldmatrix", regs=regs_a,
                          variant="" if stage_a.side.k_fastest else "trans",
                          shared=(self.SHARED, e.add(base, self.fragment_address(
                              stage_a, k_off, e.mul(i, 16)))))
        regs_b = tuple(k.LoadLocal("gt_bf", (half, e.add(e.mul(j, 2), r // 2), e.c(r % 2)), u32)
                       for r in range(4))
        load_b = k.WarpOp("ldmatrix", regs=regs_b,
                          variant="" if stage_b.side.k_fastest else "trans",
                          shared=(self.SHARED, e.add(base, self.fragment_address(
                              stage_b, k_off, e.mul(j, 16)))))
        return [k.For(i.name, 0, self.mi, load_a, kind="unroll"),
                k.For(j.name, 0, self.ni // 2, load_b, kind="unroll")]

    def products(self, half: k.Expr) -> k.Stmt:
        """The warp's m16n8k16 products with fragment set ``half``."""
        e = self.e
        mi, ni = e.v("gt_mi"), e.v("gt_ni")
        acc = tuple(k.LoadLocal("gt_acc", (mi, ni, e.c(q)), "float32") for q in range(4))
        a = tuple(k.LoadLocal("gt_af", (half, mi, e.c(r)), "uint32") for r in range(4))
        b = tuple(k.LoadLocal("gt_bf", (half, ni, e.c(r)), "uint32") for r in range(2))
        mma = k.WarpOp("mma", regs=acc, args=a + b, variant=self.operands)
        return k.For("gt_mi", 0, self.mi, k.For("gt_ni", 0, self.ni, mma, kind="unroll"),
                     kind="unroll")

    def step(self, first: k.Expr, steps: k.Expr) -> k.Stmt:
        """One TK step (``gt_kt``) of the K loop, its k16 steps an unroll loop. Fragments are loaded
        one k16 step ahead, into the other fragment set: the last k16 step of tile kt loads
        the first of tile kt + 1, so the copies of tile kt + 1 are waited for (and the
        barrier passed) before it, while the products of tile kt are still to run. A buffer
        is overwritten (tile kt + STAGES - 1's copies, at the start of step kt) only after
        the barrier that follows the last ldmatrix reading it (step kt - 1's)."""
        e, stages, size = self.e, self.cfg.stages, self.buffer_elements
        kt, read = e.v("gt_kt"), e.v("gt_rd")
        ahead = e.add(kt, stages - 1)
        after = e.add(read, size)
        stmts: list[k.Stmt] = [
            # Ring buffers of tile kt + 1 and of tile kt - 1 (= kt + STAGES - 1).
            k.Declare("gt_nx", self.itype, k.Select(e.lt(after, stages * size), after,
                                                    e.c(0), self.itype)),
            k.Declare("gt_wr", self.itype, k.Select(
                k.BinOp("==", read, e.c(0), "bool"), e.c((stages - 1) * size),
                k.BinOp("-", read, e.c(size), self.itype), self.itype)),
        ]
        k16_steps = self.cfg.tile_k // 16
        # The copies of tile kt + STAGES - 1, one group per operand, each after the products
        # of k16 step ``slot``; all of them (and the commit) before the last k16 step, whose
        # wait counts this step's group as committed.
        groups = [(0, self.stages)]
        if SPREAD_COPIES:
            groups = [(min(i, k16_steps - 2), (stage,)) for i, stage in enumerate(self.stages)]
        copies: dict[int, list[k.Stmt]] = {}
        for slot, group in groups:
            copies.setdefault(slot, []).append(k.If(
                k.BinOp("<", ahead, steps, "bool"),
                k.block(*self.issue(e.add(first, ahead), e.v("gt_wr"), group))))
        copies[max(copies)].append(k.WarpOp("cp_async_commit"))
        if not SPREAD_COPIES:
            stmts += copies.pop(0)
        two = FRAGMENT_SETS == 2

        def k16_step(kk: k.Expr, last: bool) -> list[k.Stmt]:
            half = e.mod(kk, 2) if two else e.c(0)
            if not last:
                loads = self.fragment_loads(read, e.add(kk, 1),
                                            e.mod(e.add(kk, 1), 2) if two else e.c(0))
            else:
                loads = [k.WarpOp("cp_async_wait", variant=str(stages - 2)), k.Barrier(),
                         k.If(k.BinOp("<", e.add(kt, 1), steps, "bool"),
                              k.block(*self.fragment_loads(e.v("gt_nx"), e.c(0), e.c(0))))]
            # One set: the next fragments overwrite this step's, so they load after its
            # products (the barrier still comes before the last ones, as with two sets).
            return loads + [self.products(half)] if two else [self.products(half)] + loads

        # The k16 steps with nothing after them but the next (all but the last, and those
        # followed by copies) run as one unrolled loop (fragment set kk % 2: a constant once
        # unrolled); the others are written out.
        kk = 0
        while kk < k16_steps:
            end = kk
            while end < k16_steps - 1 and end not in copies:
                end += 1
            if end - kk >= 2:
                stmts.append(k.For("gt_kk", kk, end, k.block(*k16_step(e.v("gt_kk"), False)),
                                   kind="unroll"))
                kk = end
                continue
            stmts += k16_step(e.c(kk), kk == k16_steps - 1)
            stmts += copies.pop(kk, [])
            kk += 1
        stmts.append(k.Assign("gt_rd", e.v("gt_nx")))
        return k.block(*stmts)

    # -- the kernel ----------------------------------------------------------------------------
    def build(self) -> k.Kernel:
        cfg, e = self.cfg, self.e
        stages = cfg.stages
        elements = stages * self.buffer_elements
        assert 2 * elements == cfg.shared_bytes
        body: list[k.Stmt] = [
            k.Declare("gt_lane", self.itype, e.mod(e.v("gt_tid"), 32)),
            k.Declare("gt_warp", self.itype, e.div(e.v("gt_tid"), 32)),
            k.Declare("gt_wm", self.itype, e.mod(e.v("gt_warp"), cfg.warps_m)),
            k.Declare("gt_wn", self.itype, e.div(e.v("gt_warp"), cfg.warps_m)),
        ]
        body += self.group_coordinates()
        for stage in self.stages:
            body += self.hoisted(stage)
        body += self.fragment_offsets()
        zero = k.StoreLocal("gt_acc", (e.v("gt_mi"), e.v("gt_ni"), e.v("gt_q")),
                            k.Const(0.0, "float32"))
        body += [
            k.LocalArray("gt_acc", "float32", (self.mi, self.ni, 4), "register"),
            k.LocalArray("gt_af", "uint32", (FRAGMENT_SETS, self.mi, 4), "register"),
            k.LocalArray("gt_bf", "uint32", (FRAGMENT_SETS, self.ni, 2), "register"),
            k.For("gt_mi", 0, self.mi, k.For("gt_ni", 0, self.ni, k.For(
                "gt_q", 0, 4, zero, kind="unroll"), kind="unroll"), kind="unroll"),
        ]
        # gt_kt counts this block's TK steps; its slice of K starts at step ``first``.
        first, slice_steps = self.k_slice(body)
        steps = e.c(slice_steps) if isinstance(slice_steps, int) else slice_steps
        commit = k.WarpOp("cp_async_commit")
        # Prologue: the first stages - 1 steps in flight (a group per step, empty or not, so
        # that "all but stages - 2 groups done" always means "the next step's copies
        # landed"), then the first step's first fragments (every slice has a step).
        # An unrolled loop: rolled ("serial"), NVRTC kept it a loop for the element-staged
        # 3-channel convolution, whose hoisted slot values then took 168 registers, not 72.
        s = e.v("gt_ps")
        body.append(k.For(s.name, 0, stages - 1, k.block(
            k.If(k.BinOp("<", s, steps, "bool"),
                 k.block(*self.issue(e.add(first, s), e.mul(s, self.buffer_elements)))),
            commit), kind="unroll"))
        body += [k.WarpOp("cp_async_wait", variant=str(stages - 2)), k.Barrier(),
                 k.Declare("gt_rd", self.itype, e.c(0))]
        body += self.fragment_loads(e.v("gt_rd"), e.c(0), e.c(0))
        body.append(k.For("gt_kt", 0, steps, self.step(first, steps)))
        body.append(k.WarpOp("cp_async_wait", variant="0"))
        body.append(self.epilogue())
        return self.kernel(self.ring_arrays(elements, 128), body)

    def kernel(self, shared: list[k.Stmt], body: list[k.Stmt]) -> k.Kernel:
        """The kernel of a block's ``body`` (one work-item's statements) over every block,
        with the dynamic shared memory ``shared`` declared at the top."""
        cfg, view = self.cfg, self.view
        local = k.For("gt_tid", 0, cfg.threads, k.block(*body), kind="local")
        kernel_body = k.block(*shared, k.For("gt_group", 0, self.groups, local, kind="group"))
        params = tuple(sorted(self.ctx.params.values(), key=lambda p: (p.output, p.name)))
        return k.Kernel(self.name, params, kernel_body,
                        k.Launch((self.groups * cfg.threads,), (cfg.threads,),
                                 shared_bytes=cfg.shared_bytes, min_blocks=cfg.min_blocks),
                        self.schedule(), flops=2 * view.m * view.n * view.k * view.batches,
                        uses=frozenset(self.ctx.uses),
                        scratch=(self.scratch,) if self.scratch else ())

    def epilogue(self) -> k.Stmt:
        """Each accumulator's cell: c0, c1 at (row lane / 4, columns 2 (lane % 4) + 0, 1) of
        its m16n8 product, c2, c3 eight rows further down."""
        e, cfg = self.e, self.cfg
        lane, mi, ni, q = e.v("gt_lane"), e.v("gt_mi"), e.v("gt_ni"), e.v("gt_q")
        m = e.add(e.add(e.v("gt_m0"), e.mul(e.v("gt_wm"), cfg.warp_m)), e.mul(mi, 16))
        m = e.add(e.add(m, e.div(lane, 4)), e.mul(e.div(q, 2), 8))
        n = e.add(e.add(e.v("gt_n0"), e.mul(e.v("gt_wn"), cfg.warp_n)), e.mul(ni, 8))
        n = e.add(e.add(n, e.mul(e.mod(lane, 4), 2)), e.mod(q, 2))
        return self.cells_epilogue(m, n, indexable=True)

    #: The dynamic shared array, over the staging ring, that a heavy epilogue reads its
    #: cells from (see :meth:`cells_epilogue`).
    CELLS = "gt_cells"
    #: Whether :meth:`cells_epilogue` staged the cells through the ring (set as it builds).
    cells_in_ring = False

    def accumulator_cells(self) -> list[tuple[k.Expr, k.Expr, k.Expr]]:
        """The index of every accumulator, (mi, ni, q), as constants."""
        c = self.e.c
        return [(c(mi), c(ni), c(q))
                for mi in range(self.mi) for ni in range(self.ni) for q in range(4)]

    def cell_copy(self) -> list[k.Stmt]:
        """The accumulators copied to a register array, ``gt_cell``, that a loop may index
        (the copy stays registers where the loop is unrolled, local memory where not)."""
        return [k.LocalArray("gt_cell", "float32", (self.mi, self.ni, 4), "register"),
                *(k.StoreLocal("gt_cell", c, k.LoadLocal("gt_acc", c, "float32"))
                  for c in self.accumulator_cells())]

    def cells_epilogue(self, m: k.Expr, n: k.Expr, indexable: bool) -> k.Stmt:
        """Every accumulator's cell finalised and stored; (``m``, ``n``): cell (gt_mi, gt_ni,
        gt_q)'s row and column. ``indexable``: whether unrolled loops may read the
        accumulators ``gt_acc`` as they are (an array), or need :meth:`cell_copy` first
        (scalar variables). Unrolled loops over the cells, unless the fused epilogue is heavy
        (:meth:`~gingham.compiler.tiling_gpu.TiledKernel.keeps_epilogue_loop`): then every
        thread writes its accumulators to the staging ring, idle once the products are done
        and every thread's copies landed (one barrier), at ``(cell, thread)`` (consecutive
        threads, consecutive words: no bank conflicts), and a loop over the column groups
        reads its own back (no barrier between). Local memory there instead cost a bf16
        ResNet-18 step 4-10% on an H100 (4.7 -> 4.9-5.2 ms); it stays the way out where the
        ring is smaller than the cells."""
        e, threads = self.e, self.cfg.threads
        mi, ni, q = e.v("gt_mi"), e.v("gt_ni"), e.v("gt_q")
        cells = self.accumulator_cells()

        def finished(array: str, index: tuple[k.Expr, ...]) -> k.Stmt:
            return self.cell_epilogue(m, n, k.LoadLocal(array, index, "float32"))

        unrolled = finished("gt_acc" if indexable else "gt_cell", (mi, ni, q))
        if not self.keeps_epilogue_loop(len(cells), unrolled):
            copy = [] if indexable else self.cell_copy()
            return k.block(*copy, k.For("gt_mi", 0, self.mi, k.For("gt_ni", 0, self.ni, k.For(
                "gt_q", 0, 4, unrolled, kind="unroll"), kind="unroll"), kind="unroll"))

        def rolled(cell: k.Stmt) -> k.Stmt:
            return k.For("gt_ni", 0, self.ni, k.For("gt_mi", 0, self.mi, k.For(
                "gt_q", 0, 4, cell, kind="unroll"), kind="unroll"))

        if 4 * threads * len(cells) > self.cfg.shared_bytes:
            # The copy the loop indexes: local memory (the accumulators stay registers).
            return k.block(*self.cell_copy(), rolled(finished("gt_cell", (mi, ni, q))))

        def slot(cell: tuple[k.Expr, k.Expr, k.Expr]) -> k.Expr:
            c_mi, c_ni, c_q = cell
            number = e.add(e.mul(e.add(e.mul(c_mi, self.ni), c_ni), 4), c_q)
            return e.add(e.mul(number, threads), e.v("gt_tid"))

        self.cells_in_ring = True
        staged = finished(self.CELLS, (slot((mi, ni, q)),))
        return k.block(k.Barrier(),
                       *(k.StoreLocal(self.CELLS, (slot(c),), k.LoadLocal("gt_acc", c, "float32"))
                         for c in cells),
                       rolled(staged))

    def ring_arrays(self, elements: int, align: int) -> list[k.Stmt]:
        """The dynamic shared arrays: the staging ring of ``elements`` 16-bit values and, for a
        staged epilogue (built before this is called), its cells over the same memory."""
        arrays: list[k.Stmt] = [k.LocalArray(self.SHARED, "uint16", (elements,), "dynamic",
                                             align=align)]
        if self.cells_in_ring:
            cells = self.cfg.threads * len(self.accumulator_cells())
            arrays.append(k.LocalArray(self.CELLS, "float32", (cells,), "dynamic", align=align))
        return arrays

    def schedule(self) -> str:
        v = self.view

        def side(s: Staging) -> str:
            order = "K" if s.side.k_fastest else "tile"
            copies = "16-byte async copies" if s.vector > 1 else "element loads"
            if s.vector > 1 and L1_FOR_OVERLAPPING_READS and overlapping_reads(s.side, v):
                copies += " via L1"
            return (f"{s.side.label.upper()}={s.side.access.tensor}[{','.join(s.side.group)}] "
                    f"({order}-major, {copies}, {len(s.side.guards)} guards)")

        batch, split = self.batch_and_split_text()
        rolled = ""
        if self.epilogue_rolled:
            through = "shared memory" if self.cells_in_ring else "local memory"
            rolled = f"; epilogue a loop over {self.ni} column groups, through {through}"
        return (f"gpu tensor-core contraction (mma.sync m16n8k16 {self.operands}, fp32 "
                f"accumulate): M={v.m} N={v.n} K={v.k} ({','.join(v.red_vars)}){batch}; "
                f"{self.cfg}; {self.groups} blocks{split}; {side(self.stages[0])}, "
                f"{side(self.stages[1])}{rolled}")
