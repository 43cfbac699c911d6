"""Split reductions (few cells, long reductions) on work-group devices, against the reference
interpreter: every aggregation, guards, defaults, the conditional form, unreached cells."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gingham import tile
from gingham.compiler import compile_program
from gingham.devices import get_device, list_devices
from gingham.runtime import executable

WORK_GROUP_DEVICES = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]

RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((16, 8, 16, 16)).astype(np.float32)
CASES = {
    "sum": ("function (X[N, C, H, W]) -> (M) { M[c : C] = +(X[n, c, h, w]); }", [X4]),
    "max": ("function (X[N, C, H, W]) -> (M) { M[c : C] = >(X[n, c, h, w]); }", [X4]),
    "min-constrained": ("function (X[N, C]) -> (M) { M[c : C] = <(X[n, c]), n < 3000; }",
                        [RNG.standard_normal((5000, 3)).astype(np.float32)]),
    "product": ("function (X[N, C]) -> (M) { M[c : C] = *(X[n, c]); }",
                [(1 + RNG.standard_normal((4096, 2)) * 1e-3).astype(np.float32)]),
    "strided-scalar-with-epilogue": (
        "function (X[N]) -> (S, T) { S[] = +(X[2*i]); T = S * 2 + 1; }",
        [RNG.standard_normal(20001).astype(np.float32)]),
    "argmax-conditional": ("""
        function (X[R, C]) -> (A) {
            M[r : R] = >(X[r, c]);
            I = index(X, 1);
            A[r : R] = >(X[r, c] == M[r] ? I[r, c]);
        }""", [RNG.standard_normal((3, 9000)).astype(np.float32)]),
    # Channels-last statistics: neighbouring cells are neighbouring addresses, so a work-group
    # reduces 32 of them side by side (100 cells: the last block has spare lanes).
    "channels-last-sum": ("function (X[N, H, W, C]) -> (M) { M[c : C] = +(X[n, h, w, c]); }",
                          [RNG.standard_normal((8, 16, 16, 100)).astype(np.float32)]),
    "channels-last-max-2d": ("function (X[R, C]) -> (M) { M[c : C] = >(X[r, c]); }",
                             [RNG.standard_normal((3000, 64)).astype(np.float32)]),
    "unreached-max-and-default": (
        "function (X[N], D[C]) -> (M) { M[c : C] = >(X[c + 2*n]), c < 2 default D; }",
        [RNG.standard_normal(9000).astype(np.float32), np.full(5, -7.0, np.float32)]),
}


@pytest.fixture(params=WORK_GROUP_DEVICES)
def work_group_device(request, monkeypatch):
    """A device running the work-group schedule: a CPU's OpenCL driver (PoCL), which runs the
    CPU's own schedules, is described as a GPU so that it runs this one."""
    device = get_device(request.param)
    if device.info.kind != "gpu":
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu"))
    return device


@pytest.mark.parametrize("case", CASES)
def test_split_reduction_matches_the_interpreter(work_group_device, case):
    source, args = CASES[case]
    fn = tile.function(source)
    exe = executable(fn.bind(*args), work_group_device)
    assert any("split reduction" in launch.schedule for launch in exe.launches)
    got = exe(*args)
    expected = fn(*args, device="reference")
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("case", ["channels-last-sum", "channels-last-max-2d"])
def test_neighbouring_cells_share_a_work_group(work_group_device, case):
    source, args = CASES[case]
    exe = executable(tile.function(source).bind(*args), work_group_device)
    assert any("neighbouring cells a work-group" in launch.schedule
               for launch in exe.launches)
    # A reduction read with a stride along its cells keeps one cell per work-group.
    source, args = CASES["sum"]
    exe = executable(tile.function(source).bind(*args), work_group_device)
    assert not any("neighbouring cells" in launch.schedule for launch in exe.launches)


@pytest.mark.parametrize("case", ["sum", "max", "product", "channels-last-sum",
                                  "channels-last-max-2d", "strided-scalar-with-epilogue"])
def test_many_slices_combine_in_chains_or_a_tree(work_group_device, monkeypatch, case):
    """Described as an H200 (132 compute units), the reductions are cut into many slices; the
    combine aggregates each cell's partials in interleaved chains (a number of slices that is
    no multiple of the chains leaves a tail), or with 16 partials or more by several
    work-items a cell in a tree, and equals the interpreter."""
    monkeypatch.setattr(work_group_device, "info",
                        dataclasses.replace(work_group_device.info, compute_units=132))
    source, args = CASES[case]
    fn = tile.function(source)
    exe = compile_program(fn.bind(*args), work_group_device)  # not the runtime's cache
    combine = [launch.schedule for launch in exe.launches
               if launch.schedule.startswith("split reduction, combine")]
    assert combine and all(" chains" in s or "in a tree" in s for s in combine), combine
    got = exe(*args)
    expected = fn(*args, device="reference")
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-4)


def test_batch_norm_statistics_in_a_tree_against_numpy(work_group_device, monkeypatch):
    """Sibling sums (a channels-last batch norm's sum and sum of squares, one kernel pair)
    with many slices, each cell's combined by several work-items in a tree: against NumPy in
    float64."""
    monkeypatch.setattr(work_group_device, "info",
                        dataclasses.replace(work_group_device.info, compute_units=132))
    source = """
    function (X[N, H, W, C]) -> (Mean, Var) {
        S[c : C] = +(X[n, h, w, c]);
        Q[c : C] = +(X[n, h, w, c] * X[n, h, w, c]);
        Mean = S / (N * H * W);
        Var = Q / (N * H * W) - Mean * Mean;
    }"""
    x = (RNG.standard_normal((16, 16, 16, 64)) + 0.5).astype(np.float32)
    exe = compile_program(tile.function(source).bind(x), work_group_device)
    schedules = [launch.schedule for launch in exe.launches]
    assert any("in a tree" in s for s in schedules), schedules
    mean, var = exe(x)
    x64 = x.astype(np.float64).reshape(-1, 64)
    np.testing.assert_allclose(mean, x64.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, x64.var(0), rtol=1e-4, atol=1e-5)
