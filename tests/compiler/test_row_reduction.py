"""Reductions along rows on work-group devices (``reduction.row_reduction``): a work-group a
cell, its work-items side by side along the row, against the reference interpreter. On the
OpenCL and CUDA devices this run sees, a CPU's OpenCL driver (PoCL) described as a GPU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gingham import tile
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


@pytest.mark.parametrize("shape", [(64, 1000), (4, 3, 256)])
def test_softmax_layer_norm_and_cross_entropy_along_rows_match_torch(gpu_device, shape):
    """The ops these rows serve, forward and backward, against PyTorch."""
    device = gpu_device.id  # the same device object, described as a GPU
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
