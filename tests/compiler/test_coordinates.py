"""``index(X, axis)`` computed where it is read (``fusion.Plan.coordinates``): no kernel and no
buffer for it, its readers compute each cell's coordinate instead. Every reader kind against
NumPy, on every compiled device, and on the OpenCL devices also as a GPU lowers it (a CPU's
driver described as a GPU, as tests/compiler/test_split_reduction.py does)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gingham import tile
from gingham.devices import get_device, list_devices
from gingham.runtime import executable

RNG = np.random.default_rng(7)

TARGETS = [(d.id, "own") for d in list_devices() if d.info.dialect is not None]
TARGETS += [(d.id, "gpu") for d in list_devices()
            if d.info.dialect in ("opencl", "cuda") and d.info.kind != "gpu"]


@pytest.fixture(params=TARGETS, ids=lambda t: f"{t[0]}-{t[1]}")
def device(request, monkeypatch):
    device_id, lowering = request.param
    device = get_device(device_id)
    if lowering == "gpu":
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu"))
    return device


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def columns(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """NumPy's ``index(X, axis)``: each cell's coordinate along ``axis``, as int32."""
    return np.indices(shape, dtype=np.int32)[axis]


X = floats(64, 300)
LABELS = RNG.integers(0, 300, 64).astype(np.int32)
LABELS[:3] = (-100, 300, -1)  # outside [0, C): nothing is picked

CASES = {
    # cross-entropy's pick: the class index equals the label
    "picked-by-a-sum": (
        "function (X[N, C], T[N]) -> (O) { I = index(X, 1); O[n : N] = +(I[n, c] == T[n] ? X[n, c]); }",
        [X, LABELS],
        lambda x, t: np.where(columns(x.shape, 1) == t[:, None], x, 0).sum(1)),
    "broadcast-in-an-elementwise-chain": (
        "function (X[N, C], B[C]) -> (O) { I = index(X, 0); O = I * B + X; }",
        [X, floats(300)],
        lambda x, b: columns(x.shape, 0) * b + x),
    "a-middle-axis-read-permuted-by-a-max": (
        "function (X[N, C, H]) -> (O) { I = index(X, 1); O[h, n : H, N] = >(I[n, c, h] + X[n, c, h]); }",
        [floats(5, 40, 33)],
        lambda x: (columns(x.shape, 1) + x).max(1).T),
    "through-a-reshape": (
        "function (X[N, C], Y[M]) -> (O) { I = index(X, 1); R = reshape(I, M); O = R + Y; }",
        [floats(6, 7), floats(42)],
        lambda x, y: columns(x.shape, 1).reshape(-1) + y),
    "the-indices-of-a-gather": (
        "function (X[N, C], W[C]) -> (O) { I = index(X, 1); O = gather(W, I); }",
        [floats(9, 11), floats(11)],
        lambda x, w: w[columns(x.shape, 1)]),
    # large enough for the tiled products, which stage operands from buffers: this one stays a
    # plain contraction
    "an-operand-of-a-product": (
        "function (X[M, K], B[K, P]) -> (O) { I = index(X, 1); O[m, p : M, P] = +(I[m, k] * B[k, p]); }",
        [floats(128, 96), floats(96, 80)],
        lambda x, b: columns(x.shape, 1).astype(np.float64) @ b),
}


@pytest.mark.parametrize("case", CASES)
def test_a_reader_computes_the_index_and_none_is_stored(device, case):
    source, args, expected = CASES[case]
    exe = executable(tile.function(source).bind(*args), device)
    got, = exe(*args)
    np.testing.assert_allclose(got, expected(*args), rtol=1e-5, atol=1e-4)
    assert not any("I" in launch.args for launch in exe.launches), \
        [(launch.name, launch.args) for launch in exe.launches]


def test_a_returned_index_is_stored_with_its_values(device):
    """The program's own output, directly or reshaped, is a buffer: a kernel writes it."""
    source = ("function (X[N, C], Y[M]) -> (I, R, O) "
              "{ I = index(X, 1); R = reshape(I, M); O = R + Y; }")
    x, y = floats(6, 7), floats(42)
    exe = executable(tile.function(source).bind(x, y), device)
    index, flat, out = exe(x, y)
    np.testing.assert_array_equal(index, columns(x.shape, 1))
    np.testing.assert_array_equal(flat, columns(x.shape, 1).reshape(-1))
    np.testing.assert_allclose(out, columns(x.shape, 1).reshape(-1) + y, rtol=1e-6)
    assert any("I" in launch.args for launch in exe.launches)
