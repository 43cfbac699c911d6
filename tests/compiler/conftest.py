"""Fixtures of the compiler's tests."""

from __future__ import annotations

import dataclasses

import pytest

from gingham.devices import list_devices

#: Every discovered device with a GPU kernel dialect (OpenCL or CUDA), PoCL's included.
GPU_DIALECT_IDS = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]


@pytest.fixture(params=GPU_DIALECT_IDS)
def gpu(request, monkeypatch):
    """Each OpenCL / CUDA device, described as a GPU so that it gets the GPU schedules. PoCL
    (OpenCL on the CPU) describes itself as a CPU: so described, it runs the GPU schedules'
    local memory, barriers and private arrays for real, a GPU test without a GPU."""
    device = next(d for d in list_devices() if d.id == request.param)
    if device.info.kind != "gpu":
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu"))
    return device
