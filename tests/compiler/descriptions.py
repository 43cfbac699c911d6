"""Device descriptions for tests that lower kernels for hardware this machine may not have
(the schedules depend on the description only; nothing is mocked: such kernels are
rendered and inspected, or run in ``simt.Simulator``)."""

from __future__ import annotations

from gingham.devices.base import DeviceInfo

#: An NVIDIA H200 as the CUDA backend describes it.
H200 = DeviceInfo(id="cuda:sim", name="NVIDIA H200 (description)", vendor="NVIDIA", kind="gpu",
                  dialect="cuda", compute_units=132, global_memory_bytes=140 << 30,
                  local_memory_bytes=232448, max_work_group_size=1024, simd_width=32,
                  cache_line_bytes=128, l1_bytes=0, l2_bytes=60 << 20, l3_bytes=0,
                  driver_version="-", compiler_version="-", compute_capability=90)
