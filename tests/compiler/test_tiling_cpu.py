"""The tiled CPU schedule for sums of products (gingham.compiler.tiling_cpu): results against
NumPy / PyTorch on the ``cpu`` device, and checks that the tiled schedule was the one chosen."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gingham.tile.function import function

devices = pytest.importorskip("gingham.devices")


@pytest.fixture(scope="module")
def cpu():
    try:
        return devices.get_device("cpu")
    except Exception as exc:  # no C compiler with OpenMP
        pytest.skip(f"no cpu device: {exc}")


def schedules(bound, cpu) -> list[str]:
    from gingham.runtime import executable

    return [launch.schedule for launch in executable(bound, cpu).launches]


def run(fn, arrays, cpu):
    from gingham.runtime import executable

    bound = fn.bind(*arrays)
    outs = executable(bound, cpu)(*arrays)
    return outs, schedules(bound, cpu)


def assert_tiled(scheds, count=None):
    tiled = [s for s in scheds if s.startswith("cpu-tiled")]
    assert tiled, scheds
    if count is not None:
        assert len(tiled) == count, scheds


MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"


@pytest.mark.parametrize("m, k, n", [(1, 64, 64), (7, 5, 130), (37, 19, 45), (100, 300, 17),
                                     (130, 513, 70), (6, 1000, 16), (64, 64, 1)])
def test_matmul_edges(cpu, m, k, n):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (c,), scheds = run(function(MATMUL), (a, b), cpu)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    if m * n * k >= 4096:
        assert_tiled(scheds, 1)


def test_random_shapes(cpu):
    rng = np.random.default_rng(7)
    fn = function(MATMUL)
    for _ in range(6):
        m, k, n = (int(v) for v in rng.integers(1, 200, size=3))
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        (c,), scheds = run(fn, (a, b), cpu)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(k))


def test_transposed_operands_and_epilogue(cpu):
    """B read across its rows, A down its columns, and a fused bias + relu epilogue."""
    fn = function("""function (A[K, M], B[N, K], D[N]) -> (R) {
        C[i, j : M, N] = +(A[k, i] * B[j, k]);
        R = relu(C + D);
    }""")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 50)).astype(np.float32)
    b = rng.standard_normal((33, 70)).astype(np.float32)
    d = rng.standard_normal(33).astype(np.float32)
    (r,), scheds = run(fn, (a, b, d), cpu)
    np.testing.assert_allclose(r, np.maximum(a.T.astype(np.float64) @ b.T + d, 0), rtol=1e-4,
                               atol=1e-4)
    assert_tiled(scheds, 1)


def test_batched_matmul(cpu):
    fn = function("""function (A[B, M, K], X[B, K, N]) -> (C) {
        C[b, i, j : B, M, N] = +(A[b, i, k] * X[b, k, j]);
    }""")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 23, 41)).astype(np.float32)
    x = rng.standard_normal((5, 41, 37)).astype(np.float32)
    (c,), scheds = run(fn, (a, x), cpu)
    np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), x), rtol=1e-4, atol=1e-4)
    assert_tiled(scheds, 1)
    assert "batch 5" in scheds[0]


def test_integer_falls_back(cpu):
    """Integer contractions keep the default schedule."""
    fn = function(MATMUL)
    a = np.arange(12 * 30, dtype=np.int32).reshape(12, 30) % 7
    b = np.arange(30 * 20, dtype=np.int32).reshape(30, 20) % 5
    (c,), scheds = run(fn, (a, b), cpu)
    np.testing.assert_array_equal(c, a @ b)
    assert not any(s.startswith("cpu-tiled") for s in scheds)


CONV = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {{
    O[n, y, x, co : N, {oh}, {ow}, CO] =
        +(I[n, {s}*y + ky - {p}, {s}*x + kx - {p}, ci] * F[ky, kx, ci, co]);
}}"""


def conv_fn(h, w, stride, pad, kh=3):
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kh) // stride + 1
    return function(CONV.format(oh=oh, ow=ow, s=stride, p=pad)), oh, ow


def torch_conv(x, w, stride, pad):
    tx = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    tw = torch.from_numpy(w.astype(np.float64)).permute(3, 2, 0, 1)
    return tx, tw, lambda a, b: F.conv2d(a, b, stride=stride, padding=pad)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("shape", [(2, 9, 11, 5, 19), (3, 8, 8, 16, 32)])
def test_conv_forward_and_gradients(cpu, stride, shape):
    n, h, w, ci, co = shape
    fn, oh, ow = conv_fn(h, w, stride, pad=1)
    rng = np.random.default_rng(stride * 100 + h)
    x = rng.standard_normal((n, h, w, ci)).astype(np.float32)
    f = rng.standard_normal((3, 3, ci, co)).astype(np.float32)
    (o,), scheds = run(fn, (x, f), cpu)
    assert_tiled(scheds, 1)
    tx, tw, conv = torch_conv(x, f, stride, 1)
    tx.requires_grad_(True)
    tw.requires_grad_(True)
    ref = conv(tx, tw)
    np.testing.assert_allclose(o, ref.detach().permute(0, 2, 3, 1).numpy(), rtol=1e-4,
                               atol=1e-4)

    dy = rng.standard_normal(o.shape).astype(np.float32)
    gi, gf = fn.vjp((x, f), dy, device="cpu")
    ref.backward(torch.from_numpy(dy.astype(np.float64)).permute(0, 3, 1, 2))
    np.testing.assert_allclose(gi, tx.grad.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gf, tw.grad.permute(2, 3, 1, 0).numpy(), rtol=1e-4, atol=1e-3)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [dy]
    assert_tiled(schedules(grad.function.bind(*inputs), cpu), 2)


def test_data_gradient_is_narrowed(cpu):
    """The stride-1 data gradient reduces over the 3x3 taps, not over every output row."""
    fn, _, _ = conv_fn(16, 16, 1, 1)
    x = np.zeros((2, 16, 16, 8), np.float32)
    f = np.zeros((3, 3, 8, 8), np.float32)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [np.zeros((2, 16, 16, 8), np.float32)]
    scheds = schedules(grad.function.bind(*inputs), cpu)
    assert any(" x K 72," in s for s in scheds), scheds


def test_padding_guard_with_inf_elsewhere(cpu):
    """Valid taps only: an inf inside the image reaches only the cells that read it."""
    fn, _, _ = conv_fn(8, 8, 1, 1)
    x = np.ones((1, 8, 8, 4), np.float32)
    f = np.ones((3, 3, 4, 16), np.float32)
    (o,), scheds = run(fn, (x, f), cpu)
    assert_tiled(scheds)
    assert o[0, 0, 0, 0] == 16.0 and o[0, 3, 3, 0] == 36.0
