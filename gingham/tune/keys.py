"""Stable keys: which device, and which kernel, a tuning result belongs to.

A key must be the same in every process that meets the same kernel on the same device, and
differ when anything that decides the best schedule differs. So a kernel key is built from
the contraction's structure only: shapes, dtypes, the access pattern (the index polynomials
over canonical variable names), guards and the aggregation; never tensor names (temporaries
are numbered in trace order), object ids or dict order. The fused epilogue is left out: it
runs once per cell and does not change which tiling is fastest, and leaving it out lets the
same convolution in two programs share one tuning result.

    >>> kernel_key("gpu-tiled", plan, bound)     # 64 hex digits
    >>> device_key(get_device("cpu").info)
"""

from __future__ import annotations

from ..cache import cache_key
from ..config import get_config
from ..devices.base import DeviceInfo


def device_key(info: DeviceInfo) -> str:
    """The device, driver and compiler (and, on the CPU, the compiler flags and threads)."""
    parts: tuple = (info.kind, info.dialect, info.name, info.vendor, info.compute_units,
                    info.driver_version, info.compiler_version, info.local_memory_bytes,
                    info.max_work_group_size, info.simd_width)
    if info.dialect == "c":
        config = get_config()
        parts += (config.cc, config.cflags, config.num_threads)
    return cache_key("device", *parts)


def _poly_text(poly, names: dict[str, str]) -> str:
    terms = sorted((names.get(n, n), c) for n, c in poly.terms if c)
    return "+".join(f"{c}*{n}" for n, c in terms) + f"+{poly.const}"


def contraction_signature(nc, dtypes: dict[str, str], out_dtype: str) -> tuple:
    """The structure of a normal-form contraction with canonical names (tests compare these).

    Output variables are already canonical (``o0``, ``o1``, ...); reduction variables become
    ``r0``, ``r1``, ... in their order; tensors are replaced by their position and dtype.
    """
    names = {v: f"r{i}" for i, v in enumerate(nc.red_vars)}
    operands = tuple((i, dtypes[a.tensor], tuple(a.sizes),
                      tuple(_poly_text(p, names) for p in a.index))
                     for i, a in enumerate(nc.operands))
    ranges = tuple((names[v], tuple(nc.red_ranges[v])) for v in nc.red_vars)
    guards = tuple(sorted((_poly_text(g.poly, names), g.upper) for g in nc.guards))
    return (nc.agg, nc.combo, tuple(nc.out_shape), out_dtype, operands, ranges, guards,
            nc.default is not None, nc.always_reached)


def kernel_key(family: str, plan, bound) -> str:
    """The key of a tunable kernel plan of ``bound`` for schedule ``family``."""
    nc = plan.contraction
    dtypes = {a.tensor: str(bound.dtypes[a.tensor]) for a in nc.operands}
    return cache_key("kernel", family, contraction_signature(nc, dtypes,
                                                             str(bound.dtypes[nc.out])))


__all__ = ["device_key", "kernel_key", "contraction_signature"]
