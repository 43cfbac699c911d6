"""The schedule spaces: every legal configuration of a tiled family, ranked by the cost model.

GPU tiled contractions (:class:`gingham.compiler.tiling_gpu.TileConfig`): work-group tile
``tile_m x tile_n`` stepping ``tile_k``, register tile ``reg_m x reg_n``, split-K, ``group_m``,
``pad``. Legal when the work-group fits (``max_work_group_size``), the double-buffered tiles fit
local memory, and both operands stage evenly over the work-items (``staging``).

Tensor-core contractions (:class:`gingham.compiler.tiling_tc.TcConfig`, bf16 / fp16 on CUDA):
block tile ``tile_m x tile_n`` of ``warps_m x warps_n`` warps (warp tiles of 32 to 64 a side),
K step, ring depth, split-K; neighbours vary the band height, the depth and a register cap.
Legal when it can be built (:func:`gingham.compiler.tiling_tc.buildable`: whole warp tiles,
shared memory, registers, even staging); ranked by the schedule's own relative cost.

CPU tiled contractions (:class:`gingham.compiler.tiling_cpu.CpuTiling`): register block
``mr x nr`` (nr whole vectors; accumulators plus one B row plus a broadcast within the vector
registers), K block ``kc``, tile ``mt x nt`` (whole register blocks; the packed buffers on the
stack of an OpenMP thread within :data:`CPU_STACK_BYTES`), and split-K (:data:`CPU_SPLITS`)
where there are fewer tiles than threads.

    >>> ranked = rank_gpu(view, info, 4, model)      # [(seconds, TileConfig)], best first
    >>> ranked = rank_tc(view, info)                 # [(relative cost, TcConfig)], best first
    >>> ranked = rank_cpu(CpuDims(1024, 1024, 1024, 1024, 1), model)
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

from ..compiler import tiling_tc
from ..compiler.tiling_cpu import AMX_BLOCK, AMX_DEPTH, CpuTiling
from ..compiler.tiling_tc import TcConfig
from ..compiler.tiling_gpu import UNROLL_K_NEIGHBOUR, TileConfig, _fits, choose_split, staging
from ..devices.base import DeviceInfo
from .cost import (CpuDims, TileColumns, cpu_block_depth, cpu_register_efficiency, cpu_time,
                   gpu_times)
from .device_model import DeviceModel

GPU_TILES = (16, 32, 64, 128)
#: Tiles for a side of fewer than 16 rows (columns), and the K step for a reduction of at most
#: 4 terms, where the usual ones would compute mostly padding: the thin products of Winograd's
#: transforms (``gingham.nn.winograd``: M 4 or 16 by millions, K 4 to 144) ran 16x128x8 tiles
#: at 1-5 TFLOP/s on the H200. Offered only there, so that no other product's ranking changes.
GPU_NARROW_TILES = (4, 8)
GPU_SHORT_TILE_K = 4
#: K steps the cost model ranks. The step is unrolled: 32 makes kernels that NVRTC and PoCL build
#: slowly, and 16, which the model ranks above 8 (half the barriers), measured slower on the H200
#: (GEMM 4096 fp32, 128x128 tiles of 8x8: K step 16 3.88 ms, 8 2.96 ms; the model does not see
#: the unrolled step's register pressure). The measured search still tries 16, as a neighbour.
GPU_TILE_K = (8,)
GPU_TILE_K_NEIGHBOURS = (8, 16)
GPU_REGS = (1, 2, 4, 8)
GPU_GROUP_M = (1, 4, 8, 16)
#: Work-items per work-group we consider (fewer cannot fill a warp/wavefront).
GPU_MIN_THREADS = 32

CPU_KC = (64, 128, 192, 256, 384)
CPU_MT_BLOCKS = (4, 8, 16, 24, 32, 48, 64)
CPU_NT_PANELS = (1, 2, 4, 8, 16, 32)
#: The packed A, B and accumulator tile live on an OpenMP thread's stack (8 MiB by default on
#: Linux for the main thread, 2-8 MiB for the others): stay well below it.
CPU_STACK_BYTES = 1 << 20
#: Register shapes kept for the search (the best by efficiency, then by size).
CPU_REGISTER_SHAPES = 4
#: K slices (split-K), considered only where the tiles alone leave a thread idle. Measured on
#: 2 Zen 3 cores: the first layer's weight gradient (M 27 x N 64 x K 32768, one tile) 4.7 ->
#: 2.4 ms with 2 slices; with 3 or 6 tiles (M 576 or 1152 x N 128, K 32768 or 8192) slices
#: gained nothing or lost up to 15% (partial sums written and read back).
CPU_SPLITS = (2, 4)
#: AMX (CpuTiling.engine "amx"): deeper K blocks beside CPU_KC, and tile sides in blocks of 32.
CPU_AMX_KC = (512, 768)
CPU_AMX_BLOCKS = (1, 2, 4, 8, 12, 16)


# -- GPU -------------------------------------------------------------------------------------------


def gpu_legal(config: TileConfig, view, info: DeviceInfo, itemsize: int) -> bool:
    """Whether the tiled GPU kernel can be built for ``config`` on this device."""
    return _legal(config, view.a, view.b, info, itemsize)


def _legal(config: TileConfig, a, b, info: DeviceInfo, itemsize: int) -> bool:
    """:func:`gpu_legal` given the two operands (what :func:`staging` reads of them)."""
    if config.tile_m % config.reg_m or config.tile_n % config.reg_n:
        return False
    if config.threads < 1 or not _fits(config, info, itemsize):
        return False
    return (staging(a, config.tile_m, config) is not None
            and staging(b, config.tile_n, config) is not None)


def gpu_space(view, info: DeviceInfo, itemsize: int) -> list[TileConfig]:
    """Legal base configurations (pad 4, group_m 8), each with K whole and split as
    :func:`choose_split` suggests or in half as many slices."""
    configs = []
    for config in _legal_bases(view.k <= GPU_SHORT_TILE_K, view.m < GPU_TILES[0],
                               view.n < GPU_TILES[0], view.a.k_fastest, view.b.k_fastest,
                               info, itemsize):
        configs.append(config)
        # K split as choose_split suggests, and in half as many slices: fewer partial sums to
        # add where the output has enough tiles to keep the units busy (GEMM 1024 on the
        # H200, 64x128 tiles: 4 slices 64 us, 8 slices 73 us).
        split = choose_split(config, view, info)
        for slices in sorted({split, split // 2}):
            if slices > 1:
                configs.append(dataclasses.replace(config, split=slices))
    return configs


@functools.lru_cache(maxsize=256)
def _legal_bases(short_k: bool, narrow_m: bool, narrow_n: bool, a_k_fastest: bool,
                 b_k_fastest: bool, info: DeviceInfo, itemsize: int) -> tuple[TileConfig, ...]:
    """The legal base configurations of every view alike in what legality reads (whether the
    short K step and the narrow tiles are offered, which operands stage K-major), in
    :func:`gpu_space`'s order. A step's products share a few such classes: each is
    enumerated once."""
    limit = max(info.max_work_group_size, 1)
    # A CPU's OpenCL driver runs this family as a fallback and builds big unrolled work-groups
    # very slowly (minutes, gigabytes for a training step): the K step stays 8 there.
    steps = (8,) if info.kind == "cpu" else GPU_TILE_K
    if short_k:
        steps = (GPU_SHORT_TILE_K, *steps)
    tiles_m = (GPU_NARROW_TILES if narrow_m else ()) + GPU_TILES
    tiles_n = (GPU_NARROW_TILES if narrow_n else ()) + GPU_TILES
    sides = (_StagedSide(a_k_fastest), _StagedSide(b_k_fastest))
    bases = []
    for tm, tn, tk, rm, rn in itertools.product(tiles_m, tiles_n, steps, GPU_REGS, GPU_REGS):
        if rm * rn > 64 or rm > tm or rn > tn:
            continue
        config = TileConfig(tm, tn, tk, rm, rn)
        threads = config.threads
        if threads > limit or threads < min(GPU_MIN_THREADS, limit):
            continue
        if _legal(config, *sides, info, itemsize):
            bases.append(config)
    return tuple(bases)


@dataclasses.dataclass(frozen=True)
class _StagedSide:
    """What :func:`staging` reads of an operand (a GemmView's Side): its unit-stride index."""

    k_fastest: bool


_gpu_ranked: dict[tuple, list] = {}


def rank_gpu(view, info: DeviceInfo, itemsize: int, model: DeviceModel
             ) -> list[tuple[float, TileConfig]]:
    """Every legal configuration with its estimated seconds, cheapest first (ties: larger
    tiles first, for a deterministic order). Memoised on what decides it: the sizes, which
    operand is K-major (staging), the device and its model."""
    key = (view.m, view.n, view.k, view.batches, view.a.k_fastest, view.b.k_fastest, info,
           itemsize, repr(model))
    if key not in _gpu_ranked:
        configs = gpu_space(view, info, itemsize)
        seconds = gpu_times(TileColumns(configs), view, model, itemsize).tolist()
        ranked = sorted(zip(seconds, configs), key=lambda pair: (
            pair[0], pair[1].tile_k, -pair[1].tile_m * pair[1].tile_n,
            -pair[1].reg_m * pair[1].reg_n, str(pair[1])))
        if len(_gpu_ranked) > 1024:
            _gpu_ranked.clear()
        _gpu_ranked[key] = ranked
    return list(_gpu_ranked[key])


def gpu_neighbours(config: TileConfig, view, info: DeviceInfo, itemsize: int
                   ) -> list[TileConfig]:
    """Variations the cost model cannot rank (band height, padding, on CUDA the register
    bound, on GPUs the unroll of the K steps) and split-K near ``config``: what the measured
    search tries around its best candidate."""
    out = [dataclasses.replace(config, group_m=g) for g in GPU_GROUP_M if g != config.group_m]
    out.append(dataclasses.replace(config, pad=0 if config.pad else 4))
    if info.dialect == "cuda":
        out.append(dataclasses.replace(config, bounded=not config.bounded))
    if info.kind != "cpu":
        out += [dataclasses.replace(config, tile_k=tk) for tk in GPU_TILE_K_NEIGHBOURS
                if tk != config.tile_k]
        unroll = 0 if config.unroll_k else UNROLL_K_NEIGHBOUR
        if unroll < config.tile_k:
            out.append(dataclasses.replace(config, unroll_k=unroll))
    k_tiles = -(-view.k // config.tile_k)
    for split in (config.split // 2, config.split * 2):
        if 1 <= split <= k_tiles and split != config.split:
            out.append(dataclasses.replace(config, split=split))
    return [c for c in out if gpu_legal(c, view, info, itemsize)]


# -- tensor cores ----------------------------------------------------------------------------------

TC_TILES = (64, 128, 256)
#: Warp tiles of 32 or 64 rows and columns: 64x64 is the most work per fragment that fits the
#: registers (252 of 255), smaller ones let more blocks share a multiprocessor.
TC_WARP_TILES = (32, 64)
TC_TILE_K = (32, 64)
TC_STAGES = (3, 4)
#: Warpgroup tiles (wgmma): 64 to 256 rows (one or two warpgroups of one or two 64-row slabs);
#: rings of 3 (two blocks of 128x128 a multiprocessor) to 5.
WG_TILES_M = (64, 128, 256)
WG_STAGES = (3, 4, 5)
#: What the measured search varies around its best: band heights, ring depths (the cost model
#: sees neither), a register cap for two blocks a multiprocessor.
TC_GROUP_M = (4, 8, 16)
TC_STAGE_NEIGHBOURS = (2, 3, 4, 5)
#: K steps tried around the best; 128 fits only a two-stage ring of the big tiles, which
#: measured as fast as 128x256x64 of 3 stages on the H200 (bf16 GEMM 8192: 2.40-2.41 ms).
TC_TILE_K_NEIGHBOURS = (32, 64, 128)


def tc_legal(config: TcConfig, view, info: DeviceInfo) -> bool:
    """Whether the tensor-core kernel of ``config`` can be built for ``view`` on this device."""
    return tiling_tc.buildable(config, view, info)


def tc_space(view, info: DeviceInfo) -> list[TcConfig]:
    """Legal tensor-core configurations (band 8, no register cap), each with K whole and split
    as :func:`tiling_tc.choose_split` suggests: a few dozen on an H200."""
    candidates = []
    for tm, tn, wm_tile, wn_tile, tk, stages in itertools.product(
            TC_TILES, TC_TILES, TC_WARP_TILES, TC_WARP_TILES, TC_TILE_K, TC_STAGES):
        if tm % wm_tile or tn % wn_tile:
            continue
        candidates.append(TcConfig(tm, tn, tm // wm_tile, tn // wn_tile, tile_k=tk,
                                   stages=stages))
    # Warpgroups (sm_90a): one or two along M, each one or two 64-row slabs, the whole tile N
    # in each product (TcConfig.valid keeps the consistent ones).
    for tm, groups, tn, stages in itertools.product(WG_TILES_M, (1, 2), TC_TILES, WG_STAGES):
        candidates.append(TcConfig(tm, tn, 4 * groups, 1, tile_k=64, stages=stages,
                                   instruction="wgmma"))
    configs = []
    for config in candidates:
        if not tc_legal(config, view, info):
            continue
        configs.append(config)
        split = tiling_tc.choose_split(config, view, info)
        if split > 1:
            configs.append(dataclasses.replace(config, split=split))
    return configs


def rank_tc(view, info: DeviceInfo) -> list[tuple[float, TcConfig]]:
    """Every legal tensor-core configuration with its relative cost
    (:func:`tiling_tc.config_cost`), cheapest first; ties: larger tiles, then shallower
    rings (less shared memory), for a deterministic order."""
    ranked = [(tiling_tc.config_cost(c, view, info), c) for c in tc_space(view, info)]
    ranked.sort(key=lambda pair: (pair[0], -pair[1].tile_m * pair[1].tile_n, pair[1].stages,
                                  str(pair[1])))
    return ranked


def tc_neighbours(config: TcConfig, view, info: DeviceInfo) -> list[TcConfig]:
    """Variations the cost model cannot rank near ``config``: band height, ring depth, the
    other K steps (two stages where a deeper ring does not fit), a register cap for one more
    block a multiprocessor, split-K halved or doubled."""
    out = [dataclasses.replace(config, group_m=g) for g in TC_GROUP_M if g != config.group_m]
    out += [dataclasses.replace(config, stages=s) for s in TC_STAGE_NEIGHBOURS
            if s != config.stages]
    for tk in TC_TILE_K_NEIGHBOURS:
        if tk != config.tile_k:
            other = dataclasses.replace(config, tile_k=tk)
            # A longer step that does not fit at this depth may fit with two stages.
            out.append(other if tc_legal(other, view, info)
                       else dataclasses.replace(other, stages=2))
    blocks = tiling_tc.residency(config, info) + 1
    cap = tiling_tc.REGISTERS_PER_UNIT // (config.threads * blocks)
    # Only where accumulators and fragments still fit: a tighter cap spills (128 registers
    # for 64x32 warp tiles measured slower on the H200); a warpgroup's other registers (its
    # descriptors and barriers) must fit too: 256x128 of two warpgroups capped at 128 registers
    # ran 10x slower than uncapped.
    needed = tiling_tc.registers(config) - (
        0 if config.instruction == "wgmma" else tiling_tc.OTHER_REGISTERS)
    if not config.min_blocks and cap >= needed:
        out.append(dataclasses.replace(config, min_blocks=blocks))
    k_tiles = -(-view.k // config.tile_k)
    for split in (config.split // 2, config.split * 2):
        if 1 <= split <= k_tiles and split != config.split:
            out.append(dataclasses.replace(config, split=split))
    return [c for c in out if tc_legal(c, view, info)]


# -- CPU -------------------------------------------------------------------------------------------


def _round_up(a: int, b: int) -> int:
    return -(-a // b) * b


def cpu_register_shapes(lanes: int, registers: int, a_run: int = 0) -> list[tuple[int, int]]:
    """Register blocks (mr, nr) that fit the vector registers, the most efficient first. With
    ``a_run`` (:class:`~gingham.tune.cost.CpuDims`), also per width the tallest block that
    divides A's runs, which packs without straddling them (14 x 32 straddles runs of 32
    channels; 8 x 32 and 16 x 16 do not)."""
    shapes = []
    for vectors in (1, 2, 3, 4):
        nr = vectors * lanes
        for mr in range(1, 17):
            if mr * vectors + vectors + 1 <= registers:
                shapes.append((cpu_register_efficiency(mr, nr, lanes, registers), mr * vectors,
                               mr, nr))
    shapes.sort(key=lambda s: (-s[0], -s[1], s[2]))
    chosen = [(mr, nr) for _, _, mr, nr in shapes[:CPU_REGISTER_SHAPES]]
    if a_run > 1:
        for vectors in (1, 2, 3, 4):
            fitting = [mr for _, _, mr, nr in shapes if nr == vectors * lanes
                       and mr <= a_run and a_run % mr == 0]
            if fitting and (max(fitting), vectors * lanes) not in chosen:
                chosen.append((max(fitting), vectors * lanes))
    return chosen


def cpu_legal(t: CpuTiling, dims: CpuDims) -> bool:
    """Whether the CPU kernel can be built for ``t``: whole blocks, buffers within the stack;
    AMX tiles only for a product that may run on them, in their 32 x 32 block."""
    if t.mr < 1 or t.nr < 1 or t.nr % t.simd or t.mt % t.mr or t.nt % t.nr or t.kc < 1:
        return False
    if t.split < 1 or t.engine not in ("fma", "amx"):
        return False
    kc = cpu_block_depth(t, dims)
    if t.engine == "amx":
        if not dims.amx or t.mr != AMX_BLOCK or t.nr != AMX_BLOCK or t.kc % AMX_DEPTH:
            return False
        # float32 accumulators, bfloat16 operands padded to whole tile rows of K: B twice
        # (staged, then turned into the tiles' pairs), A twice where it is packed as panels
        # and then turned into rows (a weight gradient)
        a_copies = 2 if dims.a_run else 1
        return (t.mt * t.nt * 4 + (a_copies * t.mt + 2 * t.nt) * _round_up(kc, AMX_DEPTH) * 2
                <= CPU_STACK_BYTES)
    return (t.mt * t.nt + (t.mt + t.nt) * kc) * 4 <= CPU_STACK_BYTES


def cpu_space(dims: CpuDims, model: DeviceModel) -> list[CpuTiling]:
    """Legal CPU tilings of ``dims``: register shapes x K blocks x tile sizes."""
    lanes = max(4, model.simd_width)
    configs = []
    kcs = sorted({min(kc, dims.k) for kc in CPU_KC})
    for mr, nr in cpu_register_shapes(lanes, model.vector_registers or 16, dims.a_run):
        mts = sorted({min(mr * b, _round_up(dims.m, mr)) for b in CPU_MT_BLOCKS})
        nts = sorted({min(nr * p, _round_up(dims.n, nr)) for p in CPU_NT_PANELS})
        for kc, mt, nt in itertools.product(kcs, mts, nts):
            configs += _with_splits(CpuTiling(mr, nr, kc, mt, nt, lanes), dims, model)
    if dims.amx:  # the AMX block, deeper K blocks too (each reloads the C tiles)
        block = AMX_BLOCK
        kcs = sorted({min(kc, _round_up(dims.k, AMX_DEPTH)) for kc in CPU_KC + CPU_AMX_KC})
        mts = {min(block * b, _round_up(dims.m, block)) for b in CPU_AMX_BLOCKS}
        # and M cut evenly over the threads (once or twice each): 576 rows on 2 threads are
        # 2 tiles of 288, not 384 + 192 (ResNet-9's 64 -> 128 weight gradient, M 576 x N 128
        # x K 524288: 108 ms against 121 for 384 x 128 and 133 for 384 x 64)
        workers = max(1, model.workers)
        for parts in (workers, 2 * workers):
            rows = -(-dims.m // parts)
            if rows <= block * max(CPU_AMX_BLOCKS):
                mts.add(_round_up(rows, block))
        mts = sorted(mts)
        nts = sorted({min(block * b, _round_up(dims.n, block)) for b in CPU_AMX_BLOCKS})
        for kc, mt, nt in itertools.product(kcs, mts, nts):
            configs += _with_splits(CpuTiling(block, block, kc, mt, nt, lanes, engine="amx"),
                                    dims, model)
    return configs


def _with_splits(t: CpuTiling, dims: CpuDims, model: DeviceModel) -> list[CpuTiling]:
    """[t] if legal, and its split-K variants where there are fewer tiles than threads (every
    slice at least two K blocks); [] if ``t`` is not legal."""
    if not cpu_legal(t, dims):
        return []
    tiles = dims.batch * -(-dims.m // t.mt) * -(-dims.n // t.nt)
    if tiles >= max(1, model.workers):
        return [t]
    return [t] + [dataclasses.replace(t, split=s) for s in CPU_SPLITS
                  if dims.k >= 2 * s * t.kc]


_cpu_ranked: dict[tuple, tuple] = {}


def rank_cpu(dims: CpuDims, model: DeviceModel) -> tuple[tuple[float, CpuTiling], ...]:
    """Every legal CPU tiling with its estimated seconds, cheapest first (memoised: a training
    step meets the same shapes many times)."""
    key = (dims, repr(model))
    if key not in _cpu_ranked:
        ranked = [(cpu_time(t, dims, model), t) for t in cpu_space(dims, model)]
        ranked.sort(key=lambda p: (p[0], -p[1].mt * p[1].nt, p[1].mr, p[1].nr, p[1].kc, p[1].mt))
        if len(_cpu_ranked) > 1024:
            _cpu_ranked.clear()
        _cpu_ranked[key] = tuple(ranked)
    return _cpu_ranked[key]


__all__ = ["gpu_space", "gpu_legal", "rank_gpu", "gpu_neighbours", "tc_space", "tc_legal",
           "rank_tc", "tc_neighbours", "cpu_space", "cpu_legal", "rank_cpu",
           "cpu_register_shapes"]
