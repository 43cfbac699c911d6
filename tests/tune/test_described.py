"""Described devices (gingham.tune.described): a recorded description lowers with the model
measured on that device, any other description with the estimate; on an H200 itself, the
recorded figures must still be the device's own and choose the schedules it chooses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gingham.compiler.fusion import plan
from gingham.compiler.lower import LoweringContext
from gingham.compiler.tiling_gpu import tiled_view
from gingham.devices import list_devices
from gingham import tile
from gingham.tune import described
from gingham.tune.device_model import device_model, estimate, model_for_info
from gingham.tune.space import rank_gpu


def test_a_recorded_description_gets_its_measured_model():
    model = model_for_info(described.H200)
    assert model.measured
    assert model.bandwidth == pytest.approx(2685e9)
    assert model.flops("float32") == pytest.approx(64.7e12)
    assert model.threads_per_unit == 2048
    # The estimate of the same description is far off: 400 GB/s without a driver to ask.
    assert estimate(described.H200).bandwidth < model.bandwidth / 5


def test_any_other_description_gets_the_estimate():
    other = dataclasses.replace(described.H200, compute_units=66)
    model = model_for_info(other)
    assert not model.measured
    assert model == estimate(other)
    assert described.recorded_model(other) is None


CONV = """
function (I[N, CI, H, W], F[CO, CI, KH, KW]) -> (O) {
    O[n, co, y, x : N, CO, H, W] = +(I[n, ci, y + ky - 1, x + kx - 1] * F[co, ci, ky, kx]);
}
"""

#: ResNet-9's convolutions at batch 512 (N, CI, CO, H): its first, a middle and its last.
LAYERS = [(512, 3, 64, 32), (512, 128, 128, 16), (512, 512, 512, 4)]


def _views():
    conv = tile.function(CONV)
    for n, ci, co, h in LAYERS:
        bound = conv.bind(np.zeros((n, ci, h, h), np.float32),
                          np.zeros((co, ci, 3, 3), np.float32))
        kernel_plan = plan(bound)
        (kernel,) = [k for k in kernel_plan.kernels if k.kind == "contraction"]
        view, _ = tiled_view(kernel, LoweringContext(bound, kernel_plan.aliases))
        yield view


H200S = [d for d in list_devices() if d.info.dialect == "cuda" and "H200" in d.info.name]


@pytest.mark.skipif(not H200S, reason="no H200 in this run")
def test_the_recorded_h200_is_still_the_h200():
    """The figures recorded for the description are within a tenth of what this H200
    measures (bandwidth, fp32 rate), its driver's answers are the same, and the tiled
    schedules ranked first for ResNet-9's convolutions are the same with either model."""
    device = H200S[0]
    measured, recorded = device_model(device), model_for_info(described.H200)
    assert measured.measured
    for field in ("compute_units", "threads_per_unit", "local_memory_per_unit",
                  "sub_group_size", "max_work_group_size", "local_memory_bytes"):
        assert getattr(recorded, field) == getattr(measured, field), field
    assert recorded.bandwidth == pytest.approx(measured.bandwidth, rel=0.1)
    assert recorded.flops("float32") == pytest.approx(measured.flops("float32"), rel=0.1)
    for view in _views():
        ours = rank_gpu(view, device.info, 4, measured)[0][1]
        theirs = rank_gpu(view, described.H200, 4, recorded)[0][1]
        assert ours == theirs, (view.m, view.n, view.k)
    assert np.isfinite(recorded.launch_overhead)
