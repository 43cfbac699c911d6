"""The cost model: an estimated time for a kernel plan under a candidate schedule.

Both tiled GEMM families are costed the same way, from the :class:`DeviceModel`:

* **arithmetic**: the multiply-adds actually executed (edge tiles padded to whole tiles and
  register blocks) over the device's measured rate, derated by how well the register block
  feeds the arithmetic units (loads per multiply-add, dependent-chain latency, registers);
* **memory**: the bytes each level must deliver given the reuse of the tile sizes (register
  block, local-memory / L1 panel, L2 block) against the measured bandwidth: a roofline, time =
  max(arithmetic, memory);
* **parallelism**: work-groups (CPU tiles) in waves over the compute units (CPU threads), so
  that too few or lopsided tiles cost idle units; on GPUs, residency per unit (threads, local
  memory, registers) sets the latency hiding;
* **overheads**: split-K partial sums (written, read back, one more launch), packing on the
  CPU, one launch overhead per kernel.

The constants below are architectural rules of thumb (issue ports, latencies); everything
device-specific comes from the model. The model ranks candidates; the measured search
(:mod:`gingham.tune.search`) has the last word.

    >>> seconds = gpu_time(TileConfig(64, 64, 8, 4, 4), view, model)
    >>> seconds = cpu_time(CpuTiling(6, 16, 256, 96, 256, 8), dims, model)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .device_model import DeviceModel

#: 32-bit registers per compute unit of current GPUs (NVIDIA SM, AMD CU per SIMD pair).
GPU_REGISTERS_PER_UNIT = 65536
#: Work-groups resident on one unit at most (NVIDIA: 32 blocks per SM since Volta).
GPU_GROUPS_PER_UNIT = 16
#: Local-memory words delivered per multiply-add lane and clock: a GPU's shared memory moves
#: 128 bytes per clock per unit against 128 (NVIDIA) or 64 (AMD) FMA lanes; a CPU's OpenCL
#: "local memory" is L1, two vector loads per two vector FMAs.
GPU_LOCAL_WORDS_PER_FMA = 0.25
CPU_LOCAL_WORDS_PER_FMA = 1.0
#: Work-items resident on a unit from which the register-blocked kernels we build hide the
#: latency of shared memory, barriers and the FMA pipeline: 24 warps of 32 on NVIDIA (six per
#: scheduler), 12 wavefronts of 64 on AMD. Fitted on the H200 (`tools/cost_model_fit.py`: 40
#: kernels of ResNet-9 and the story net, 16 candidates each, every one timed): the model's
#: picks among the timed candidates cost 27.36 ms of ResNet-9's step at 8 warps, 26.52 at 24,
#: against 25.35 for the fastest timed; the story net's 1.11 -> 1.01 ms (12 warps: 1.29).
#: Then untuned steps, fresh caches, two rounds each, 8 -> 24 warps: ResNet-9 NCHW 30.7 /
#: 31.3 -> 30.0 / 30.0 ms, NHWC 26.9 / 27.0 -> 26.2 / 25.8, ResNet-18 15.1 / 15.5 -> 15.0 /
#: 15.0, story 2.0 / 2.0 -> 1.9 / 2.0, GEMM 4096 3.03 ms either way.
GPU_THREADS_TO_HIDE = 768
#: Cost of a barrier plus the staging bookkeeping of one K step, in multiply-adds per work-item.
GPU_STEP_OVERHEAD = 48
#: FMA latency (cycles) x FMA ports of a CPU core: independent accumulators needed.
CPU_FMA_CHAINS = 8
#: Instructions a core issues per cycle (conservative: 4 on current x86 and ARM cores), and the
#: loop's own per step of K (counter, compare, branch, pointer).
CPU_ISSUE_WIDTH = 4
CPU_LOOP_INSTRUCTIONS = 4
#: Cycles per packed element (load, guard test, store; vectorised where contiguous).
CPU_PACK_CYCLES = 0.3
#: Cycles per element of a panel packed element by element (an A block across two runs of M,
#: a B panel whose guards read N: each element's guards and address from the tables, then a
#: select). Measured on 2 Zen 4 cores, the story net's weight gradient (M 288 x N 32 x K 40000,
#: runs of 32): 18.6 ms with blocks of 14 rows (3 in 8 straddle), 16.1 with 12 (1 in 4), 11.7
#: with 8 (none): about 3 ns an element, against 0.3 cycles for a copied one; its other view
#: (M 32 x N 288, B the padded input) 24.0 ms with 8 x 32 blocks, 2 ns more a B element.
CPU_PACK_ELEMENT_CYCLES = 9.0
#: Cycles per packed element of a B panel gathered along a stride (a scalar load and store
#: each, against whole vector loads of a unit-stride panel): a rule of thumb. It decides which
#: operand is B when the two views are otherwise alike; measured on 2 shared Zen cores, the
#: NCHW gradients of a 128 -> 256 channel layer at 8x8, batch 32, took 120 ms with both B
#: operands unit-stride along N and 142-186 ms with one or both gathered along the channels.
CPU_GATHER_CYCLES = 1.0
#: Cycles per output cell stored along a stride: C's N is not the output's unit-stride axis,
#: so the tile's rows go out one scalar store a cell, a cache line apart, where a unit-stride
#: row goes out a vector at a time. It decides which operand is B when the two views are
#: otherwise alike, as in attention's scores ``S[l, s] = +(Q[l, e] * K[s, e])`` (both operands
#: unit-stride along K): with B = Q the 256 x 256 x 64 products (32 of them) took 6.0 ms on
#: one EPYC (Zen 4) core, 1.9 ms of it the strided stores; with B = K 4.1 ms (stop 49).
CPU_SCATTER_CYCLES = 1.6
#: Cycles per packed element that a tile re-reads (A once per tile along N, B once per tile
#: along M) after the data left L2: rows of the operand come back from L3 or memory a few
#: hundred bytes at a time. Measured on Zen 3 (one thread, the 128 -> 128 channel weight
#: gradient at 16x16, M 1152 x N 128 x K 8192, tiles 96..384 x 64..128): 2.5 cycles per B
#: element, 3.7 per A element re-read, against ~0.3 for a block packed from L2. Fitted again on
#: 2 Zen cores with ``tools/cost_model_fit.py collect story:16 resnet9 resnet18 --device cpu``
#: (every candidate timed): at 3 cycles the story net's weight gradients (M 288 x N 32 x K
#: 40000, B 5 MB) took six 48-row tiles that each re-read all of B, 18.0 ms against 9.7 for
#: one tile split 4 ways (the model's picks 1.41x the fastest timed over its step; 1.05x from
#: 5 cycles up; ResNet-9 1.02x and ResNet-18 1.03x either way). The story step, fresh caches,
#: alternating: 230 / 274 ms at 3, 185 / 239 ms at 6.
CPU_PACK_FAR_CYCLES = 6.0
#: The multiply-add rate of a CPU's AMX tiles on bfloat16 (a CpuTiling of engine "amx")
#: against its float32 vector FMAs. Measured on one Sapphire Rapids core (2-core Xeon VM):
#: 2.4 TFLOP/s for four 16 x 16 x 32 products from tiles loaded from L1 each step, against
#: 207 GFLOP/s of 24 independent 16-lane FMA chains (11.6x); taken lower here for the C
#: tiles' loads and stores per K block and the loads of A and B.
CPU_AMX_SPEEDUP = 8.0
#: Cycles a 32 x 32 AMX register block spends per K block beside its products: its four
#: float32 C tiles loaded and stored (4 KB each way) and the block loops around them. Fitted on
#: 2 Sapphire Rapids cores, ResNet-9's 256 -> 512 forward at 8x8 (M 32768 x N 512 x K 2304,
#: tiles 256 x 256): K blocks of 64 / 128 / 256 took 81.7 / 65.2 / 61.1 ms, about 7 us a
#: tile and block of core time, 350 cycles a register block (against mt * nt / lanes, 64,
#: for the FMAs' accumulators). Lower, the model took blocks of 64 for tiles of 384 x 512
#: (90 ms against 57-61 for 256 x 256 with 256 or 384).
CPU_AMX_BLOCK_CYCLES = 350.0
#: Cycles per element of A turned from panels into AMX tile rows in vector registers (a
#: weight gradient's A, contiguous along M: ``MatrixOp`` rows_from_panel), on top of its
#: packing. Measured on one Sapphire Rapids core: 0.054 ns an element, 32 x 32 at a time.
CPU_AMX_ROWS_CYCLES = 0.15


def _ceil(a, b):
    """``ceil(a / b)`` of integers, or element by element of integer arrays."""
    return -(-a // b)


# -- GPU tiled contractions ----------------------------------------------------------------------


class TileColumns:
    """Candidate GPU tile configurations as NumPy columns of the fields the cost model reads,
    so that :func:`gpu_times` prices a whole schedule space in one pass. One at a time, the
    ranking of an fp32 ResNet-9 step's products (3,788 candidates) took ~45 ms of its first
    step's lowering, on the path to the first compile of each product::

        >>> columns = TileColumns([TileConfig(128, 128, 8, 8, 8), TileConfig(64, 64, 8, 4, 4)])
        >>> gpu_times(columns, view, model)            # seconds, one per configuration
    """

    def __init__(self, configs) -> None:
        self._configs = list(configs)
        # The configurations' own fields and work-item counts, not formulas copied here.
        fields = np.array([(c.tile_m, c.tile_n, c.tile_k, c.reg_m, c.reg_n, c.group_m, c.split,
                            c.threads) for c in self._configs], dtype=np.int64).reshape(-1, 8)
        (self.tile_m, self.tile_n, self.tile_k, self.reg_m, self.reg_n, self.group_m,
         self.split, self.threads) = fields.T

    def __len__(self) -> int:
        return len(self._configs)

    def local_bytes(self, itemsize: int) -> np.ndarray:
        """Each configuration's :meth:`~gingham.compiler.tiling_gpu.TileConfig.local_bytes`."""
        return np.fromiter((c.local_bytes(itemsize) for c in self._configs), dtype=np.int64,
                           count=len(self._configs))


def gpu_registers(config) -> int:
    """32-bit registers one work-item needs, roughly: accumulators, fragments, staging, indices."""
    return int(_registers(TileColumns([config]))[0])


def _registers(c: TileColumns) -> np.ndarray:
    staging = (c.tile_m + c.tile_n) * c.tile_k // np.maximum(c.threads, 1)
    return c.reg_m * c.reg_n + c.reg_m + c.reg_n + staging + 24


def gpu_residency_limits(config, model: DeviceModel, itemsize: int) -> tuple[int, int, int]:
    """Work-groups of ``config`` that fit one compute unit by its threads, by its local memory
    and by its registers (each at most :data:`GPU_GROUPS_PER_UNIT`)."""
    limits = _residency_limits(TileColumns([config]), model, itemsize)
    return tuple(int(column[0]) for column in limits)  # type: ignore[return-value]


def _residency_limits(c: TileColumns, model: DeviceModel, itemsize: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    by_threads = model.threads_per_unit // np.maximum(c.threads, 1)
    local = c.local_bytes(itemsize)  # never 0: a tile has rows and a K step
    by_local = (model.local_memory_per_unit or model.local_memory_bytes) // local
    by_regs = GPU_REGISTERS_PER_UNIT // (_registers(c) * c.threads) if model.kind == "gpu" \
        else np.full(len(c), GPU_GROUPS_PER_UNIT)
    return (np.minimum(by_threads, GPU_GROUPS_PER_UNIT),
            np.minimum(by_local, GPU_GROUPS_PER_UNIT), np.minimum(by_regs, GPU_GROUPS_PER_UNIT))


def gpu_residency(config, model: DeviceModel, itemsize: int) -> int:
    """Work-groups of ``config`` resident on one compute unit at once (0: none fits)."""
    return max(0, min(gpu_residency_limits(config, model, itemsize)))


def gpu_time(config, view, model: DeviceModel, itemsize: int = 4) -> float:
    """Estimated seconds of the tiled contraction ``view`` (a GemmView) under ``config``."""
    return float(gpu_times(TileColumns([config]), view, model, itemsize)[0])


def gpu_times(c: TileColumns, view, model: DeviceModel, itemsize: int = 4) -> np.ndarray:
    """Estimated seconds of the tiled contraction ``view`` (a GemmView) under each
    configuration of ``c`` (float64, the same arithmetic as Python floats, in the same order:
    the ranking's ties break the same way)."""
    units = max(model.compute_units, 1)
    tiles_m, tiles_n = _ceil(view.m, c.tile_m), _ceil(view.n, c.tile_n)
    k_tiles = _ceil(view.k, c.tile_k)
    split = np.maximum(1, np.minimum(c.split, k_tiles))
    steps = _ceil(k_tiles, split)
    groups = tiles_m * tiles_n * view.batches * split
    dtype = "float64" if itemsize == 8 else "float32"
    fma_rate_unit = model.flops(dtype) / 2 / units

    # Arithmetic of one work-group: its padded tile, plus what feeds it. Local memory delivers
    # about one word per lane and multiply-add: a work-item reads reg_m + reg_n words per K
    # step for reg_m * reg_n multiply-adds, and the group stores its (TM + TN) x TK slices.
    fmas = c.tile_m * c.tile_n * steps * c.tile_k
    local_words = (c.reg_m + c.reg_n) / (c.reg_m * c.reg_n)
    local_words = local_words + (c.tile_m + c.tile_n) / (c.tile_m * c.tile_n)
    local_words = local_words * (itemsize / 4)
    rate = CPU_LOCAL_WORDS_PER_FMA if model.kind == "cpu" else GPU_LOCAL_WORDS_PER_FMA
    per_fma = np.maximum(1.0, local_words / rate)
    overhead = GPU_STEP_OVERHEAD * c.threads * steps
    per_fma = np.where(_registers(c) > 255, per_fma * 3, per_fma)  # spills to local memory
    if model.kind == "cpu":
        # A CPU's OpenCL driver maps work-items to vector lanes: each accumulator of a
        # work-item becomes a vector register, and a block beyond the register file spills.
        spills = c.reg_m * c.reg_n + c.reg_m + c.reg_n > (model.vector_registers or 16)
        per_fma = np.where(spills, per_fma * 1.5, per_fma)
    # Work-groups resident on a unit; where none fits, priced as one.
    resident = np.maximum(np.minimum.reduce(_residency_limits(c, model, itemsize)), 1)
    per_unit = _ceil(groups, units)  # groups one unit runs, one after another or together
    together = np.minimum(resident, per_unit)
    # A CPU's OpenCL driver runs a work-group as vector loops on one core: nothing to hide.
    hide = 1.0 if model.kind == "cpu" else np.minimum(1.0, together * c.threads /
                                                       GPU_THREADS_TO_HIDE)
    compute = per_unit * (fmas * per_fma + overhead) / (fma_rate_unit * hide)

    # Memory: the work-groups running together share their slices in L2; a band of group_m
    # tile rows reads each B slice once. Bytes from memory per wave, times the waves.
    wave = np.minimum(groups, units * resident)
    band = np.maximum(1, np.minimum(np.minimum(c.group_m, tiles_m), wave))
    k_slice = steps * c.tile_k
    per_wave = (band * c.tile_m + _ceil(wave, band) * c.tile_n) * k_slice * itemsize
    waves = _ceil(groups, wave)
    unique = (view.m * view.k + view.k * view.n) * view.batches * itemsize
    streamed = groups * (c.tile_m + c.tile_n) * k_slice * itemsize
    loads = np.minimum(streamed, np.maximum(unique, per_wave * waves))
    cells = view.m * view.n * view.batches
    # Split K: the partials are written beside the arithmetic, then read by a kernel of their
    # own, which overlaps nothing. Counted inside the overlap before, it let GEMM 1024 on the
    # H200 take 8 slices of 128x128 (82.8 us) over 4 of them (66.5 us).
    sliced = split > 1
    stores = np.where(sliced, split * cells * 4, cells * itemsize)
    summing = np.where(sliced, (split * cells * 4 + cells * itemsize) / model.bandwidth
                       + model.launch_overhead, 0.0)
    memory = (loads + stores) / model.bandwidth
    return (np.maximum(compute, memory) + 0.1 * np.minimum(compute, memory)
            + model.launch_overhead + summing)


# -- CPU tiled contractions -----------------------------------------------------------------------


@dataclass(frozen=True)
class CpuDims:
    """The GEMM a CPU tiling is chosen for: ``m x n x k`` (``k_inner`` the innermost reduction
    variable's extent, whole rows of which fill a K block), ``batch`` products; ``b_gather``:
    B is not unit-stride along N, so its panels pack element by element; ``a_run``: A packs as
    register-block-wide panels that copy whole only inside runs of this many rows of M (M's
    innermost variable; 1 where no block copies whole), 0 where A packs as rows;
    ``b_careful``: B's guards read N variables (an input's padding, with N = (ky, kx, ci)), so
    its panels pack element by element; ``amx``: the operands are bfloat16 and the device's
    AMX tiles may run it (``CpuTiling.engine`` "amx"); ``c_scatter``: N is not the output's
    unit-stride axis, so the tile's cells are stored one by one along a stride."""

    m: int
    n: int
    k: int
    k_inner: int
    batch: int
    b_gather: bool = False
    a_run: int = 0
    b_careful: bool = False
    amx: bool = False  # bfloat16 operands on a CPU whose AMX tiles may run the product
    c_scatter: bool = False  # N is not the output's unit-stride axis (CPU_SCATTER_CYCLES)
    # The share of A's m x k (B's k x n) elements that are distinct in memory: below 1 for a
    # convolution's input viewed as a GEMM (each pixel in up to 9 rows of the 3x3 product).
    a_distinct: float = 1.0
    b_distinct: float = 1.0


def cpu_block_depth(tiling, dims: CpuDims) -> int:
    """The packed depth of a K block as the kernel builds it (whole inner rows, or chunks)."""
    if dims.k_inner <= tiling.kc:
        return max(1, tiling.kc // dims.k_inner) * dims.k_inner
    return _ceil(dims.k_inner, _ceil(dims.k_inner, tiling.kc))


@functools.lru_cache(maxsize=1024)  # as cpu_straddling: 23,000 calls, a few dozen shapes
def cpu_register_efficiency(mr: int, nr: int, lanes: int, registers: int) -> float:
    """Fraction of the FMA ports a mr x nr register block keeps busy: loads (nr / lanes vectors
    of B, mr broadcasts of A) share two load ports, every instruction (and the loop's own)
    shares CPU_ISSUE_WIDTH issue slots, dependent chains need CPU_FMA_CHAINS accumulators, and a
    block that does not fit the vector registers spills."""
    vectors = mr * (nr // lanes)
    loads = nr // lanes + mr
    cycles = max(vectors / 2, loads / 2, CPU_FMA_CHAINS / 2,
                 (vectors + loads + CPU_LOOP_INSTRUCTIONS) / CPU_ISSUE_WIDTH)
    efficiency = (vectors / 2) / cycles
    if vectors + nr // lanes + 1 > registers:
        efficiency *= 0.35
    if (nr * 4) % 64:
        # Rows of a packed B panel that are not whole 64-byte lines: half the vector loads
        # straddle two lines (measured: 4x24 blocks run at 0.8x the speed of 6x16 on Zen).
        efficiency *= 0.85
    return efficiency


# Memoised: ranking a step's CPU tilings asks some 20,000 times (a few distinct pairs), and
# the sum runs over up to ``run`` blocks (1.7 million terms for a bf16 ResNet-9 step).
@functools.lru_cache(maxsize=1024)
def cpu_straddling(mr: int, run: int) -> float:
    """Fraction of the ``mr``-row register blocks of A (starting at multiples of ``mr``) that
    cross the end of a ``run``-row run, and so pack element by element (``a_run``). The
    blocks' offsets in a run repeat every ``run / gcd(run, mr)`` blocks.

    The story net's 32 -> 32 weight gradient (``M = (ky, kx, ci)``, runs of 32 channels):
    6 of every 16 blocks of 14 rows straddle, none of 8 or 16."""
    if run <= 0 or mr <= 1:
        return 0.0
    period = run // math.gcd(run, mr)
    return sum((b * mr) % run + mr > run for b in range(period)) / period


def _missed(distance: float, cache: float) -> float:
    """Fraction of a re-read that misses ``cache`` when ``distance`` bytes were touched since
    the data's last use (0 while they fit, then approaching 1)."""
    return 0.0 if distance <= cache else 1.0 - cache / distance


def cpu_operand_bytes(tiling) -> int:
    """Bytes of an operand element as a tiling reads and packs it: bfloat16 on AMX tiles,
    float32 (the packed type) on the FMAs."""
    return 2 if tiling.engine == "amx" else 4


def cpu_reread_cycles(tiling, dims: CpuDims, l2_bytes: int) -> float:
    """Extra cycles (all threads together) of re-packing operands that left L2.

    Each of a tile row's ``ceil(N / nt)`` tiles packs the same ``mt x K`` slab of A, and each
    of a tile column's ``ceil(M / mt)`` tiles the same ``K x nt`` slab of B. Tiles run N
    fastest: A comes back after one tile (its slabs of A and B), B after a whole row of tiles
    (all of B). Whatever no longer fits L2 is read again from further out."""
    n_mt, n_nt = _ceil(dims.m, tiling.mt), _ceil(dims.n, tiling.nt)
    k_slice = _ceil(dims.k, max(1, tiling.split))  # a tile's share of K
    size = cpu_operand_bytes(tiling)
    tile = (tiling.mt + tiling.nt) * k_slice * size
    row = (tiling.mt + dims.n) * k_slice * size
    a = (n_nt - 1) * dims.m * dims.k * _missed(tile, l2_bytes)
    b = (n_mt - 1) * dims.n * dims.k * _missed(row, l2_bytes)
    if tiling.engine == "amx":
        # Re-read from further out are the operands' distinct lines, not the GEMM view's
        # repeats of them. Kept to AMX: the float32 constants were fitted without it.
        a, b = a * dims.a_distinct, b * dims.b_distinct
    # per element from further out: a cache line brings twice the bfloat16 elements
    return dims.batch * (a + b) * (CPU_PACK_FAR_CYCLES - CPU_PACK_CYCLES) * size / 4


def _fit(size: float, budget: float) -> float:
    """1 while a block fits its cache budget, then falling slowly with the overflow."""
    return 1.0 if size <= budget else (budget / size) ** 0.3


def cpu_time(tiling, dims: CpuDims, model: DeviceModel) -> float:
    """Estimated seconds of the packed CPU GEMM of ``dims`` under ``tiling`` (a CpuTiling)."""
    lanes = max(4, model.simd_width)
    registers = model.vector_registers or 16
    workers = max(1, model.workers)
    peak = model.flops("float32") / workers  # flops/s of one thread
    m_pad = (dims.m // tiling.mt) * tiling.mt + _ceil(dims.m % tiling.mt, tiling.mr) * tiling.mr
    n_pad = (dims.n // tiling.nt) * tiling.nt + _ceil(dims.n % tiling.nt, tiling.nr) * tiling.nr
    amx = tiling.engine == "amx"
    if amx:
        efficiency = CPU_AMX_SPEEDUP
    else:
        efficiency = cpu_register_efficiency(tiling.mr, tiling.nr, lanes, registers)
    kc = cpu_block_depth(tiling, dims)
    packed = cpu_operand_bytes(tiling)
    # Split-K: slices of whole K blocks (as the kernel cuts them), each slice's tiles a unit
    # of work; a tile accumulates over its slice only.
    slice_blocks = _ceil(_ceil(dims.k, kc), max(1, tiling.split))
    split = _ceil(_ceil(dims.k, kc), slice_blocks)
    tiles = dims.batch * _ceil(dims.m, tiling.mt) * _ceil(dims.n, tiling.nt) * split
    blocks = slice_blocks
    # Caches: a kc x nr panel of B is reused by every register block of the tile (half of L1);
    # the packed A block is re-read for every panel (a quarter of L2: associativity and the
    # other data take the rest). Beyond its share a block costs smoothly more, as more of it
    # comes from the next level. The B block and the accumulator tile are touched once per
    # K block and need not stay in L2: asking them to (as this model did) took 144x256 tiles
    # for GEMM 2048, measured 1.1-1.2x slower than 288x512 or 384x256 (one Zen 3 thread, two
    # sweeps on a busy machine).
    efficiency *= (_fit(kc * tiling.nr * packed, model.l1_bytes / 2)
                   * _fit(tiling.mt * kc * packed, model.l2_bytes / 4))
    flops = 2.0 * dims.batch * m_pad * n_pad * dims.k
    # Per tile and K block: pack (mt + nt) x kc elements, reload and store the accumulators
    # (two vector accesses per cycle).
    cycle = 4 * lanes / peak  # two FMA ports of ``lanes`` multiply-adds each per cycle
    b_cycles = CPU_GATHER_CYCLES if dims.b_gather else CPU_PACK_CYCLES
    if dims.b_careful:
        b_cycles = CPU_PACK_ELEMENT_CYCLES
    straddling = cpu_straddling(tiling.mr, dims.a_run)
    a_cycles = CPU_PACK_CYCLES * (1 - straddling) + CPU_PACK_ELEMENT_CYCLES * straddling
    if amx and dims.a_run:
        a_cycles += CPU_AMX_ROWS_CYCLES
    pack = tiles * dims.k * (tiling.mt * a_cycles + tiling.nt * b_cycles) * cycle
    pack += cpu_reread_cycles(tiling, dims, model.l2_bytes) * cycle
    if amx:
        register_blocks = (tiling.mt // tiling.mr) * (tiling.nt // tiling.nr)
        accumulators = tiles * blocks * register_blocks * CPU_AMX_BLOCK_CYCLES * cycle
    else:
        accumulators = tiles * blocks * tiling.mt * tiling.nt / lanes * cycle
    # The busiest thread's share, plus half a tile of expected tail: tiles are handed out
    # dynamically, and a thread that is preempted (a shared machine) finishes late.
    # A ragged edge makes tiles unequal: the busiest thread runs at least a whole tile (576
    # rows in tiles of 384 keep one thread busy twice as long as the other: the story net's
    # 64-channel weight gradient took 40-52 ms so, 35.5 in tiles of 288, 2 Zen 4 cores).
    tile_share = tiling.mt * tiling.nt / (m_pad * n_pad * dims.batch * split)
    per_thread = (max(_ceil(tiles, workers), tile_share * tiles) + 0.5) / tiles
    cells = dims.batch * dims.m * dims.n
    stores = cells * CPU_SCATTER_CYCLES * cycle if dims.c_scatter else 0.0
    compute = (flops / (peak * efficiency) + pack + accumulators + stores) * per_thread
    memory = (dims.batch * (dims.m * dims.k + dims.k * dims.n) * packed + 2 * cells * 4) \
        / model.bandwidth
    launches = 1
    if split > 1:  # partial sums written, then read back by a second kernel
        memory += 2 * split * cells * 4 / model.bandwidth
        launches = 2
    return (max(compute, memory) + 0.1 * min(compute, memory)
            + launches * model.launch_overhead)


__all__ = ["CpuDims", "TileColumns", "cpu_time", "cpu_block_depth", "cpu_operand_bytes",
           "cpu_reread_cycles", "cpu_straddling", "cpu_register_efficiency", "gpu_time",
           "gpu_times", "gpu_residency", "gpu_registers"]
