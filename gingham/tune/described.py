"""Devices described without being present: what their backend reports and what their
device model measured, so that a machine without them lowers kernels as they would.

Tools and tests build the kernels an H200 would run on a machine with no GPU (NVRTC needs
none): :func:`gingham.compiler.lower_program` with :data:`H200` gives the schedules the CUDA
backend on an H200 chooses, because :func:`gingham.tune.device_model.model_for_info` answers
a recorded description with its recorded model (whatever ``GINGHAM_TUNE_MEASURE`` says: that
setting is about measuring this machine's devices, and a description has nothing to measure).
A description that is not recorded gets the driver-free estimate (``estimate``), whose
conservative figures (400 GB/s on a GPU) choose other schedules than a measured model does::

    >>> from gingham.compiler import lower_program, rewrite_program
    >>> kernels = lower_program(rewrite_program(bound), H200)   # as an H200 lowers them
    >>> recorded_model(H200).bandwidth                           # its measured copy rate
    2685000000000.0
"""

from __future__ import annotations

import dataclasses
import functools

from ..devices.base import DeviceInfo
from .device_model import DeviceModel, estimate, with_measurements

#: An NVIDIA H200 (141 GB HBM3e, 132 SMs) as gingham's CUDA backend describes it.
H200 = DeviceInfo(id="cuda:sim", name="NVIDIA H200 (description)", vendor="NVIDIA", kind="gpu",
                  dialect="cuda", compute_units=132, global_memory_bytes=140 << 30,
                  local_memory_bytes=232448, max_work_group_size=1024, simd_width=32,
                  cache_line_bytes=128, l1_bytes=0, l2_bytes=60 << 20, l3_bytes=0,
                  driver_version="-", compiler_version="-", compute_capability=90)


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What the driver answered beyond the description and what was measured on the device
    (:func:`gingham.tune.device_model.measure`): the rest of the model follows from them."""

    threads_per_unit: int  # CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR
    local_memory_per_unit: int  # ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    bandwidth: float  # bytes/s, a 2 x 512 MiB copy
    fp32_flops: float  # FMA chains over every thread
    launch_overhead: float  # seconds a launch adds to a replayed graph


#: Measured on the team's H200 (CUDA 13, 2026-12-03: ``GINGHAM_DEBUG=1`` printed "2685 GB/s,
#: 64.7 TFLOP/s fp32, launch 11.6-12.2 us" in every fresh process of that day's runs).
_RECORDED: dict[DeviceInfo, Recorded] = {
    H200: Recorded(threads_per_unit=2048, local_memory_per_unit=233472, bandwidth=2685e9,
                   fp32_flops=64.7e12, launch_overhead=12e-6),
}


@functools.lru_cache(maxsize=None)
def recorded_model(info: DeviceInfo) -> DeviceModel | None:
    """The device model of a recorded description (as :func:`~gingham.tune.device_model.
    measure` gives it on that device), or None for any other description."""
    recorded = _RECORDED.get(info)
    if recorded is None:
        return None
    return with_measurements(
        estimate(info, None), recorded.bandwidth, recorded.fp32_flops,
        recorded.launch_overhead, threads_per_unit=recorded.threads_per_unit,
        local_memory_per_unit=recorded.local_memory_per_unit)


__all__ = ["H200", "Recorded", "recorded_model"]
