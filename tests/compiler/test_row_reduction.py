"""Reductions along rows on work-group devices (``reduction.row_reduction``): a work-group a
cell, its work-items side by side along the row; and row groups (``rows.py``), the passes of a
softmax, a layer norm or a cross-entropy over a row in one kernel. Against the reference
interpreter and PyTorch, on the OpenCL and CUDA devices this run sees (a CPU's OpenCL driver,
PoCL, described as a GPU), and on the ``cpu`` device, whose row groups are an OpenMP loop
over rows (``rows.lower_row_group_cpu``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gingham import tile
from gingham.bench.ops import GinghamRun, Traced
from gingham.compiler import rewrite_program
from gingham.compiler.fusion import plan
from gingham.compiler.rows import row_groups
from gingham.devices import get_device, list_devices
from gingham.frontend.tensor import tensor
from gingham.nn import functional as F
from gingham.runtime import executable

WORK_GROUP_DEVICES = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]
RNG = np.random.default_rng(11)


@pytest.fixture(params=WORK_GROUP_DEVICES)
def gpu_device(request, monkeypatch):
    device = get_device(request.param)
    if device.info.kind != "gpu":
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu"))
    return device


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


ROWS = floats(300, 1000)
NAN_ROWS = ROWS.copy()
NAN_ROWS[7, 500] = np.nan

# name: (source, inputs, whether a row reduction computes the first statement)
CASES = {
    "max-with-a-nan-row": ("function (X[N, C]) -> (M) { M[n : N] = >(X[n, c]); }",
                           [NAN_ROWS], True),
    "sum-and-epilogue": ("function (X[N, C]) -> (S) { T[n : N] = +(X[n, c]); S = T * 2 + 1; }",
                         [ROWS], True),
    "two-axes-of-an-image": (
        "function (X[N, C, H, W]) -> (M) { M[n, c : N, C] = +(X[n, c, h, w]); }",
        [floats(4, 30, 20, 24)], True),
    "matrix-vector": ("function (A[M, K], V[K]) -> (Y) { Y[m : M] = +(A[m, k] * V[k]); }",
                      [floats(513, 777), floats(777)], True),
    "argmax-of-each-row": ("""
        function (X[R, C]) -> (A) {
            M[r : R] = >(X[r, c]);
            I = index(X, 1);
            A[r : R] = >(X[r, c] == M[r] ? I[r, c]);
        }""", [floats(200, 700)], True),
    "guarded-min-with-a-default": (
        "function (X[N, C], D[N]) -> (M) { M[n : N] = <(X[n, c + 600]), c < 500 default D; }",
        [floats(64, 1000), floats(64)], True),
    # Cells along the fastest axis: a work-item a cell already reads side by side.
    "columns": ("function (X[N, C]) -> (S) { S[c : C] = +(X[n, c]); }", [floats(1000, 300)],
                False),
    "short-rows": ("function (X[N, C]) -> (S) { S[n : N] = +(X[n, c]); }", [floats(3000, 20)],
                   False),
}


@pytest.mark.parametrize("case", CASES)
def test_row_reductions_match_the_interpreter(gpu_device, case):
    source, args, by_rows = CASES[case]
    fn = tile.function(source)
    exe = executable(fn.bind(*args), gpu_device)
    expected = fn(*args, device="reference")
    got = exe(*args)[0]
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5 * float(np.nanmax(np.abs(
        expected)) or 1.0))
    rows = [launch.schedule for launch in exe.launches if launch.schedule.startswith("row ")]
    assert bool(rows) == by_rows, [launch.schedule for launch in exe.launches]


ROW_SHAPES = [(64, 1000), (4, 3, 256), (300, 1000), (2, 150, 384), (256, 1024), (256, 4096)]


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_layer_norm_and_cross_entropy_along_rows_match_torch(gpu_device, shape):
    """The ops these rows serve, forward and backward, against PyTorch. Rows of 300 and 256
    are row groups; 1000 and 384 columns end in a part of a work-group, 1024 and 4096 in
    whole ones (4 and 16 slots a work-item held in registers)."""
    _check_row_ops_against_torch(gpu_device.id, shape)  # the device, described as a GPU


@pytest.mark.parametrize("shape", ROW_SHAPES + [(300, 333)])
def test_row_ops_on_the_cpu_match_torch(shape):
    """The same on the ``cpu`` device: 300 rows and more are row groups there, one OpenMP
    iteration a row; rows of 333 are no whole number of vectors."""
    _check_row_ops_against_torch("cpu", shape)


def _check_row_ops_against_torch(device: str, shape: tuple[int, ...]) -> None:
    x = floats(*shape)
    weight, bias = floats(shape[-1]), floats(shape[-1])
    labels = RNG.integers(0, shape[-1], shape[:-1])
    xt = tensor(x, device=device, requires_grad=True)
    reference = torch.tensor(x, requires_grad=True)
    outputs = {
        "softmax": (F.softmax(xt, -1), torch.softmax(reference, -1)),
        "layer_norm": (F.layer_norm(xt, shape[-1:], tensor(weight, device=device),
                                    tensor(bias, device=device)),
                       torch.nn.functional.layer_norm(reference, shape[-1:],
                                                      torch.tensor(weight), torch.tensor(bias))),
    }
    if len(shape) == 2:
        outputs["cross_entropy"] = (
            F.cross_entropy(xt, tensor(labels, device=device)),
            torch.nn.functional.cross_entropy(reference, torch.tensor(labels)))
    weights = {name: floats(*tuple(want.shape)) for name, (_, want) in outputs.items()}
    for name, (got, want) in outputs.items():
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    sum((got * tensor(weights[name], device=device)).sum()
        for name, (got, _) in outputs.items()).backward()
    sum((want * torch.tensor(weights[name])).sum() for name, (_, want) in outputs.items()).backward()
    np.testing.assert_allclose(xt.grad.numpy(), reference.grad.numpy(), rtol=1e-4, atol=1e-4)


def _softmax(t):
    return F.softmax(t, -1)


def _layer_norm(t, g):
    return F.layer_norm(t, (g.shape[0],), g, g)


def _groups(fn, arrays, backward):
    traced = Traced.of(fn, arrays, "reference")
    function = traced.gradient(arrays, (0,))[0] if backward else traced.function
    inputs = traced.inputs(arrays)
    if backward:
        outputs = GinghamRun(traced.function, inputs, get_device("reference")).outputs()
        inputs = inputs + [np.ones_like(o) for o in outputs]
    bound = rewrite_program(function.bind(*inputs))
    kernel_plan = plan(bound)
    return [[kernel_plan.kernels[i].kind for i in group]
            for group in row_groups(kernel_plan, bound)], function, inputs


@pytest.mark.parametrize("name, backward, passes", [
    ("softmax", False, ["contraction", "contraction", "elementwise"]),
    # max, then sum(exp) storing exp and sum(dy * e) beside it, then dx
    ("softmax", True, ["contraction", "contraction", "contraction", "elementwise"]),
    ("layer_norm", False, ["contraction", "contraction", "elementwise"]),
    # mean, then rstd and the sums dX needs; dweight and dbias (columns) are left to run
    # after the group, which takes dX past them (rows.row_groups)
    ("layer_norm", True, ["contraction", "contraction", "elementwise"]),
])
def test_a_row_group_is_one_kernel_on_work_group_devices(gpu_device, name, backward, passes):
    x = floats(300, 1000)
    fn, arrays = (_softmax, [x]) if name == "softmax" else (_layer_norm, [x, floats(1000)])
    groups, function, inputs = _groups(fn, arrays, backward)
    assert groups == [passes]
    run = GinghamRun(function, inputs, gpu_device)
    fused = [launch for launch in run.exe.launches if launch.schedule.startswith("rows fused")]
    assert len(fused) == 1 and f"{len(passes)} passes a row" in fused[0].schedule
    # What more than one pass reads, each work-item holds in registers: 4 elements of a row
    # of 1000 (the last slot of the last 24 work-items is past the row's end).
    held = fused[0].schedule.split("held in registers (")[1].split(")")[0].split(", ")
    assert "4 of each row's elements a work-item held" in fused[0].schedule
    assert len(held) == {"softmax": 1 + backward, "layer_norm": 1 + backward}[name], held
    # Nothing of the rows' shape is written but the result: a softmax's exponentials are
    # computed again by the passes that read them (rows.passes_of).
    # Nor are the rows' values (maxima, sums) that only later passes read: they reach them
    # in registers. The kernel reads and writes the program's tensors only.
    assert set(fused[0].args) <= set(run.exe.input_names) | set(run.exe.output_names), \
        fused[0].args
    expected = GinghamRun(function, inputs, get_device("reference")).outputs()
    for got, want in zip(run.outputs(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, backward, passes, kept", [
    ("softmax", False, 3, True),  # the exponentials in a row array
    ("softmax", True, 4, True),
    ("layer_norm", False, 3, False),  # each pass centres the row itself: nothing shared
    ("layer_norm", True, 3, False),  # dX taken past dweight and dbias
])
def test_a_row_group_is_one_openmp_loop_on_the_cpu(name, backward, passes, kept):
    """On the ``cpu`` device a row group is one kernel, an OpenMP iteration a row; what only
    its passes read stays in a row array of the iteration and is no kernel argument."""
    x = floats(300, 1000)
    fn, arrays = (_softmax, [x]) if name == "softmax" else (_layer_norm, [x, floats(1000)])
    _, function, inputs = _groups(fn, arrays, backward)
    run = GinghamRun(function, inputs, get_device("cpu"))
    schedules = [launch.schedule for launch in run.exe.launches]
    fused = [launch for launch in run.exe.launches if launch.schedule.startswith("rows fused")]
    assert len(fused) == 1, schedules
    assert "an OpenMP iteration a row" in fused[0].schedule
    assert f"{passes} passes a row" in fused[0].schedule
    assert ("in row arrays" in fused[0].schedule) == kept
    bound = rewrite_program(function.bind(*inputs))
    intermediates = {n for n in bound.shapes if tuple(bound.shapes[n]) == x.shape} - \
        set(run.exe.input_names) - set(run.exe.output_names)
    assert not intermediates & set(fused[0].args), fused[0].args
    expected = GinghamRun(function, inputs, get_device("reference")).outputs()
    for got, want in zip(run.outputs(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cpu_rows_too_long_for_row_arrays_keep_them_in_memory(monkeypatch, no_program_cache):
    """Rows whose tensors would not fit ROW_ARRAY_BYTES (a language model's vocabulary) are
    still one loop over rows, with what the passes share in memory."""
    from gingham.compiler import rows

    monkeypatch.setattr(rows, "ROW_ARRAY_BYTES", 1000 * 4 - 1)  # not one row of 1000 floats
    x = floats(300, 1000)
    traced = Traced.of(_softmax, [x], "reference")
    run = GinghamRun(traced.function, traced.inputs([x]), get_device("cpu"))
    (fused,) = [launch.schedule for launch in run.exe.launches]
    assert fused.startswith("rows fused") and "row arrays" not in fused, fused
    np.testing.assert_allclose(run.outputs()[0], torch.softmax(torch.tensor(x), -1).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device_id", ["cpu", *WORK_GROUP_DEVICES])
def test_cross_entropy_picks_its_class_in_the_row_group(device_id, monkeypatch):
    """Cross-entropy's forward: the pick of each sample's logit (a conditional sum along the
    row, rows._pick_domain), the row max and the sum of exponentials are passes of one row
    group, the loss its last pass's epilogue; then only the mean over the samples. On every
    device the run sees (a GPU's OpenCL or CUDA, PoCL described as a GPU, the ``cpu``
    device); against PyTorch."""
    device = get_device(device_id)
    if device.info.dialect != "c" and device.info.kind != "gpu":
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu"))
    logits = floats(300, 1000)
    labels = RNG.integers(0, 1000, 300)
    labels[7] = -100  # an ignored sample
    traced = Traced.of(F.cross_entropy, [logits, labels], "reference")
    run = GinghamRun(traced.function, traced.inputs([logits, labels]), device)
    fused = [launch.schedule for launch in run.exe.launches
             if launch.schedule.startswith("rows fused")]
    assert len(fused) == 1 and "3 passes a row" in fused[0], fused
    assert len(run.exe.launches) == 3, [launch.schedule for launch in run.exe.launches]
    want = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(labels))
    np.testing.assert_allclose(run.outputs()[0], want.numpy(), rtol=1e-5)


def test_short_rows_or_few_rows_make_no_group():
    for shape in [(100, 1000), (4000, 100)]:  # rows < rows.MIN_ROWS; rows < ROW_MIN_EXTENT
        groups, _, _ = _groups(_softmax, [floats(*shape)], False)
        assert groups == [], shape


@pytest.mark.parametrize("columns, fused", [(1000, True), (8448, False)])
def test_rows_of_a_half_type_fuse_only_when_held_in_registers(gpu_device, columns, fused):
    """bfloat16 rows fuse where the kernel holds them in registers (rows.CACHE_REGISTERS:
    1000 columns are 4 slots a work-item), else keep their kernels (rows.MIN_ITEMSIZE: read
    in every pass they were slower fused on an H100); 8448 columns need 33 slots."""
    x = floats(256, columns)
    traced = Traced.of(_softmax, [x], "reference")
    inputs = [tensor(x, device=gpu_device.id).astype("bfloat16").numpy()]
    run = GinghamRun(traced.function, inputs, gpu_device)
    schedules = [launch.schedule for launch in run.exe.launches]
    if fused:
        assert [s.startswith("rows fused") for s in schedules] == [True], schedules
        assert "4 of each row's elements a work-item held in registers" in schedules[0]
    else:
        assert not any(s.startswith("rows fused") for s in schedules), schedules
    expected = GinghamRun(traced.function, inputs, get_device("reference")).outputs()
    np.testing.assert_allclose(np.asarray(run.outputs()[0], np.float32),
                               np.asarray(expected[0], np.float32), rtol=1e-2, atol=1e-3)


def test_cuda_rows_combine_by_warp_shuffles_and_opencl_rows_by_the_tree():
    """CUDA's row kernels combine a row's partials by warp shuffles (reduction._warp_tree),
    with two barriers a reduction; OpenCL has no shuffles and keeps the tree in local memory.
    Rendered only: the numbers come from the tests above on every GPU the run sees."""
    from gingham.codegen.c_family import DIALECTS, render
    from gingham.compiler import lower_program
    from gingham.tune.described import H200

    x = floats(512, 1024)
    traced = Traced.of(_softmax, [x], "reference")
    bound = rewrite_program(traced.function.bind(*traced.inputs([x])))
    for dialect in ("cuda", "opencl"):
        info = dataclasses.replace(H200, dialect=dialect)
        (kernel,) = lower_program(bound, info)
        source = render(kernel, DIALECTS[dialect])
        barriers = source.count("__syncthreads()" if dialect == "cuda" else "barrier(")
        if dialect == "cuda":
            # max and sum: 5 + 3 shuffles and 2 barriers each, and one between the passes
            assert source.count("__shfl_xor_sync") == 16 and barriers == 6, source
        else:
            assert "shfl" not in source and barriers == 2 * (1 + 8) + 2, source
