"""Choosing how each kernel runs on a device, from the device's description.

The default schedule gives every output cell a work-item (a GPU thread, or an iteration of the
CPU's OpenMP loop). Contractions that are sums of products get tiled schedules from
:mod:`gingham.compiler.tiling_cpu` / :mod:`gingham.compiler.tiling_gpu` where the device and
shapes allow (the CPU one also on a CPU's OpenCL driver; on a GPU possibly split along K: a
partial-sum kernel and a reduction, so a plan can become two kernels; float16 / bfloat16
products on CUDA run on the tensor cores, see :mod:`gingham.compiler.tiling_tc`); elementwise
and special kernels get the bandwidth-bound schedules of
:func:`gingham.compiler.lower.lower_streaming`; few-cell, long reductions (batch-norm
statistics, losses) are split across work-groups by :mod:`gingham.compiler.reduction`, and
reductions along rows (softmax, losses, layer norm) give each cell a work-group that reads its
row side by side. On the CPU, reductions whose neighbouring cells are neighbouring addresses
(channels-last statistics) are
split into slices over OpenMP threads with the cells innermost
(:func:`gingham.compiler.reduction.split_reduction_cpu`), and contractions with short reductions
(and thin products, :func:`gingham.compiler.tiling_cpu.thin_product`) run as a loop nest
vectorised over their cells (:func:`gingham.compiler.lower.lower_cell_nest`).

The tiled families' configurations come from the tuning database when it holds this kernel on
this device (:func:`gingham.tune.search.tuned_config`; ``gingham tune`` fills it), else from the
cost model (:mod:`gingham.tune.cost`).
"""

from __future__ import annotations

from ..devices.base import DeviceInfo
from . import kernel_ir as k
from .fusion import KernelPlan
from .lower import (NEST_MAX_REDUCTION, LoweringContext, lower_cell_nest, lower_plan,
                    lower_streaming)
from .reduction import row_reduction, split_reduction, split_reduction_cpu
from .tiling_cpu import THIN_MAX_K, streams_thin_product, tiled_contraction_cpu
from .tiling_cpu import runs_on as runs_cpu_schedules
from .tiling_gpu import TileConfig, tiled_contraction
from .tiling_tc import TcConfig, tensor_core_contraction


def lower_with_schedule(plan: KernelPlan, ctx: LoweringContext, name: str,
                        info: DeviceInfo) -> list[k.Kernel]:
    """Lower ``plan`` with the best schedule this device supports: its kernels in launch order
    (one, or a split-K contraction's two)."""
    from ..tune.search import tuned_config

    if runs_cpu_schedules(info):  # the C backend, and a CPU's OpenCL driver
        kernels = tiled_contraction_cpu(plan, ctx, name, info,
                                        tuned_config(plan, ctx, name, info))
        if kernels is not None:
            return kernels
        # Channels-last statistics: slices of the reduction, the cells innermost in vectors.
        kernels = split_reduction_cpu(plan, ctx, name, info)
        if kernels is not None:
            return kernels
        # Short reductions (pooling, relayouts) and thin products (Winograd's transforms): a
        # loop nest vectorised over the cells. On PoCL too: ResNet-9's pooling and its
        # gradients (batch 128) take 35 ms of a step as nests, 105 ms as a work-item per cell.
        longest = THIN_MAX_K if streams_thin_product(plan, ctx, info) else NEST_MAX_REDUCTION
        kernel = lower_cell_nest(plan, ctx, name, max(2, info.simd_width), longest,
                                 info.max_work_group_size)
        if kernel is not None:
            return [kernel]
    # Every other work-group device gets the staged GPU schedule (and PoCL the products the CPU
    # GEMM declines): it is also 14x faster than one work-item per cell on PoCL (GEMM 512:
    # 18.6 ms against 257 ms, measured here).
    tuned = tuned_config(plan, ctx, name, info) if info.dialect in ("opencl", "cuda") else None
    if info.dialect == "cuda":  # float16 / bfloat16 products on the tensor cores
        kernels = tensor_core_contraction(
            plan, ctx, name, info, tuned if isinstance(tuned, TcConfig) else None)
        if kernels is not None:
            return kernels
    if info.dialect in ("opencl", "cuda"):
        kernels = tiled_contraction(plan, ctx, name, info,
                                    tuned if isinstance(tuned, TileConfig) else None)
        if kernels is not None:
            return kernels
        kernels = split_reduction(plan, ctx, name, info)
        if kernels is not None:
            return kernels
        # Many cells, each reducing a row: a work-group a cell reads the row side by side.
        kernels = row_reduction(plan, ctx, name, info)
        if kernels is not None:
            return kernels
    if info.dialect is not None:
        kernel = lower_streaming(plan, ctx, name, info.dialect)
        if kernel is not None:
            return [kernel]
    return [lower_plan(plan, ctx, name)]
