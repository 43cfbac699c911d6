"""GPU split reductions with several neighbouring cells a work-item (vector loads, stepped
coordinates) and the combine by several work-items a cell in a tree, on every work-group device
(PoCL runs the GPU schedules here; CUDA on a GPU machine), described as an H200 (132 compute
units) so that the statistics are cut into many slices. Oracles: NumPy in float64, PyTorch CPU.

Cases: channels-last statistics whose channel count is a multiple of the vector width (4), is
not (30: one cell a work-item), leaves the last work-group ragged (100, 36), with a reduction
that the slices do not divide evenly; several reductions in one kernel (sum, sum of squares,
max); bfloat16 and float32 operands; channels-first statistics; batch norm forward and
gradients against PyTorch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gingham import tile
from gingham.compiler import compile_program
from gingham.devices import get_device, list_devices
from gingham.tile import dtypes as dt

WORK_GROUP_DEVICES = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]
RNG = np.random.default_rng(7)


@pytest.fixture(params=WORK_GROUP_DEVICES)
def h200_like(request, monkeypatch):
    """A work-group device described as a GPU with an H200's 132 compute units (a CPU's
    OpenCL driver would otherwise run the CPU's split reduction)."""
    device = get_device(request.param)
    monkeypatch.setattr(device, "info", dataclasses.replace(device.info, compute_units=132,
                                                             kind="gpu"))
    return device


STATISTICS = """
function (X[N, H, W, C]) -> (Mean, Var, Top) {
    F = as_float(X, 32);
    S[c : C] = +(F[n, h, w, c]);
    Q[c : C] = +(F[n, h, w, c] * F[n, h, w, c]);
    Top[c : C] = >(F[n, h, w, c]);
    Mean = S / (N * H * W);
    Var = Q / (N * H * W) - Mean * Mean;
}"""


def schedules_of(exe) -> list[str]:
    return [launch.schedule for launch in exe.launches]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape, vectors", [
    ((8, 16, 16, 64), True),    # 64 channels: 16 work-items of 4 side by side
    ((5, 23, 19, 100), True),   # 100 = 25 vectors: the second work-group's last lanes idle
    ((3, 25, 29, 36), True),    # 36 = 9 vectors: 8 lanes, a second work-group of one
    ((5, 23, 19, 30), False),   # no whole vectors of channels: one cell a work-item
])
def test_channels_last_statistics_against_numpy(h200_like, dtype, shape, vectors):
    x = (RNG.standard_normal(shape) * 2 + 0.5).astype(dt.DTYPES[dtype])
    exe = compile_program(tile.function(STATISTICS).bind(x), h200_like)
    schedules = schedules_of(exe)
    partials = [s for s in schedules if s.startswith("split reduction: ")]
    combines = [s for s in schedules if s.startswith("split reduction, combine")]
    assert partials and combines, schedules
    if vectors:  # and so many slices that each cell's partials are combined in a tree
        assert all("on 4 cells each" in s and "vector loads of 4: " in s for s in partials), \
            partials
        assert all("in a tree" in s for s in combines), combines
    else:
        assert not any("4 cells" in s or "vector loads" in s for s in partials), partials
    mean, var, top = exe(x)
    x64 = np.asarray(x, np.float64).reshape(-1, shape[-1])
    np.testing.assert_allclose(mean, x64.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, x64.var(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(top, x64.max(0).astype(np.float32))


def test_the_slices_of_a_ragged_reduction(h200_like):
    """2185 assignments a channel: the last slice is shorter than the others."""
    x = RNG.standard_normal((5, 23, 19, 100)).astype(np.float32)
    exe = compile_program(tile.function(STATISTICS).bind(x), h200_like)
    partial = next(s for s in schedules_of(exe) if s.startswith("split reduction: "))
    slices = int(partial.split("split reduction: ")[1].split()[0])
    assert 2185 % slices, partial  # not whole slices of equal length
    mean, _, _ = exe(x)
    np.testing.assert_allclose(mean, x.astype(np.float64).reshape(-1, 100).mean(0), rtol=1e-5,
                               atol=1e-6)


def test_channels_first_statistics_against_numpy(h200_like):
    """NCHW: strided along the cells, so one cell a work-group (no vectors), many slices."""
    x = (RNG.standard_normal((16, 8, 16, 16)) + 0.5).astype(np.float32)
    source = """
    function (X[N, C, H, W]) -> (S, Q) {
        S[c : C] = +(X[n, c, h, w]);
        Q[c : C] = +(X[n, c, h, w] * X[n, c, h, w]);
    }"""
    exe = compile_program(tile.function(source).bind(x), h200_like)
    partials = [s for s in schedules_of(exe) if s.startswith("split reduction: ")]
    assert partials and not any("neighbouring" in s for s in partials), partials
    s, q = exe(x)
    x64 = x.astype(np.float64).transpose(1, 0, 2, 3).reshape(8, -1)
    np.testing.assert_allclose(s, x64.sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(q, (x64 * x64).sum(1), rtol=1e-5, atol=1e-4)


def test_tree_combine_with_unreached_cells(h200_like):
    """A maximum with reached flags (cells 2.. are never reached and take the default) and
    enough slices for the tree combine: the flags travel through both trees."""
    source = "function (X[N], D[C]) -> (M) { M[c : C] = >(X[c + 2*n]), c < 2 default D; }"
    x = RNG.standard_normal(200001).astype(np.float32)
    d = np.full(5, -7.0, np.float32)
    fn = tile.function(source)
    exe = compile_program(fn.bind(x, d), h200_like)
    combines = [s for s in schedules_of(exe) if s.startswith("split reduction, combine")]
    assert any("in a tree" in s for s in combines), combines
    (got,) = exe(x, d)
    expected = np.array([x[0::2].max(), x[1::2].max(), -7, -7, -7], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_results_are_deterministic(h200_like):
    """The same additions in the same order every run: bit-identical results."""
    x = (RNG.standard_normal((8, 16, 16, 64)) * 3).astype(np.float32)
    exe = compile_program(tile.function(STATISTICS).bind(x), h200_like)
    first = [np.array(a) for a in exe(x)]
    for _ in range(3):
        for a, b in zip(first, exe(x)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape", [(8, 16, 16, 64), (5, 23, 19, 36), (8, 16, 16, 30)])
def test_channels_last_batch_norm_forward_and_gradients(h200_like, compiled_schedules, shape):
    """Batch norm (training) forward and dx, dweight, dbias against PyTorch CPU, with the
    statistics and the gradient sums (four reductions in one kernel) as split reductions."""
    from test_reduction_chains import assert_float32_batch_norm_matches_torch

    schedules = compiled_schedules
    assert_float32_batch_norm_matches_torch(h200_like.id, shape, channels_last=True)
    partials = [s for s in schedules if s.startswith("split reduction: ")]
    assert any("4 reductions" in s for s in partials), schedules
    if shape[-1] % 4 == 0:
        assert all("on 4 cells each" in s for s in partials), partials


def test_an_operand_read_at_two_cells_is_not_a_vector(h200_like):
    """``X[n, c] * X[n + 1, c]``: X is read at the assignment's cell and the next row's, so it
    is loaded per cell (a vector at the first access would stand for both)."""
    source = "function (X[R, C]) -> (M) { M[c : C] = +(X[r, c] * X[r + 1, c]); }"
    x = RNG.standard_normal((3001, 64)).astype(np.float32)
    exe = compile_program(tile.function(source).bind(x), h200_like)
    partials = [s for s in schedules_of(exe) if s.startswith("split reduction: ")]
    assert partials and not any("vector loads" in s for s in partials), partials
    (got,) = exe(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got, (x64[:-1] * x64[1:]).sum(0), rtol=1e-4, atol=1e-4)


def test_stepped_coordinates_of_a_range_that_starts_below_zero(h200_like):
    """``X[n, h + 2, c]``: h runs over [-2, 4], so the stepped coordinates wrap at 4 back to
    -2 (16 rows a step: more than h's 7 values, a carry into n every step)."""
    source = "function (X[N, H, C]) -> (M) { M[c : C] = +(X[n, h + 2, c]); }"
    x = RNG.standard_normal((600, 7, 64)).astype(np.float32)
    exe = compile_program(tile.function(source).bind(x), h200_like)
    partials = [s for s in schedules_of(exe) if s.startswith("split reduction: ")]
    assert partials and "16 work-items on 4 cells" in partials[0], partials
    (got,) = exe(x)
    np.testing.assert_allclose(got, x.astype(np.float64).sum((0, 1)), rtol=1e-5, atol=1e-4)
