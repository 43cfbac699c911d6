"""The compiler's own contracts: fusion, memory planning, the disk cache across processes,
debug output, and errors. Numerical correctness on every device is the Tile corpus's job
(tests/tile), which runs on every discovered device."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import gingham
from gingham import tile
from gingham.devices import get_device, list_devices
from gingham.runtime import executable

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]

CHAIN = "function (X, A, B, C) -> (O) { O = relu(X * A + B) * C; }"
DENSE = """
function (X[M, K], W[K, N], Bias[N]) -> (Y) {
    Z[m, n : M, N] = +(X[m, k] * W[k, n]);
    Y = relu(Z + Bias);
}
"""


@pytest.fixture(params=COMPILED)
def compiled_device(request):
    return get_device(request.param)


def test_elementwise_chain_is_one_kernel(compiled_device):
    fn = tile.function(CHAIN)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    a, b, c = (np.float32(v) for v in (1.5, -0.25, 2.0))
    exe = executable(fn.bind(x, a, b, c), compiled_device)
    assert len(exe.launches) == 1
    got, = exe(x, a, b, c)
    np.testing.assert_allclose(got, np.maximum(x * a + b, 0) * c, rtol=1e-5, atol=1e-6)


def test_bias_and_relu_fuse_into_the_contraction(compiled_device):
    fn = tile.function(DENSE)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((7, 5)), rng.standard_normal((5, 3))
    bias = rng.standard_normal(3)
    exe = executable(fn.bind(x, w, bias), compiled_device)
    assert len(exe.launches) == 1, [launch.name for launch in exe.launches]
    # Z is consumed in registers: only Y is a parameter the kernel writes.
    assert exe.launches[0].args[-1] == "Y"
    got, = exe(x, w, bias)
    np.testing.assert_allclose(got, np.maximum(x @ w + bias, 0), rtol=1e-10)


def test_intermediates_share_memory(compiled_device):
    # Four chained contractions: at most two intermediates are live at once.
    fn = tile.function("""
    function (A[N, N]) -> (E) {
        B[i, j : N, N] = +(A[i, k] * A[k, j]);
        C[i, j : N, N] = +(B[i, k] * A[k, j]);
        D[i, j : N, N] = +(C[i, k] * A[k, j]);
        E[i, j : N, N] = +(D[i, k] * A[k, j]);
    }""")
    a = np.random.default_rng(2).standard_normal((16, 16)) / 4
    exe = executable(fn.bind(a), compiled_device)
    distinct = {id(buffer) for name, buffer in exe._buffers.items() if name in "BCD"}
    assert len(distinct) == 2
    got, = exe(a)
    np.testing.assert_allclose(got, a @ a @ a @ a @ a, rtol=1e-9, atol=1e-12)


def test_second_process_compiles_nothing(tmp_path, compiled_device):
    script = "\n".join([
        "import numpy as np",
        "from gingham import tile",
        "from gingham.devices import get_device",
        "from gingham.tune.device_model import device_model",
        f"fn = tile.function({DENSE!r})",
        "x, w, b = np.ones((4, 3)), np.ones((3, 2)), np.ones(2)",
        f"device = get_device({compiled_device.id!r})",
        # The device model's micro-benchmarks (measured by the first process, perhaps in the
        # background from the context's creation) compile kernels of their own.
        "device_model(device)",
        "before = device.stats.compiles",
        f"fn(x, w, b, device={compiled_device.id!r})",
        "print(device.stats.compiles - before)",
    ])
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(tmp_path / "cache"))
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       check=True).stdout.split()[-1]
        for _ in range(2)
    ]
    assert runs == ["1", "0"]


def test_debug_levels(compiled_device, monkeypatch, capfd):
    monkeypatch.setenv("GINGHAM_DEBUG", "4")
    fn = tile.function(DENSE)
    rng = np.random.default_rng(3)
    args = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    fn(*args, device=compiled_device.id)
    err = capfd.readouterr().err
    assert "1 kernel(s)" in err  # level 1: device and kernel count
    assert " ms" in err  # level 2: per-kernel time
    assert any(s in err for s in ("work-item", "tile", "loop nest"))  # level 3: the schedule
    assert "source for" in err and "Y[" in err  # level 4: the generated source


def test_provable_assign_conflict_is_reported_before_running(compiled_device):
    fn = tile.function("function (A[N, K]) -> (O) { O[i : N] = =(A[i, k]); }")
    with pytest.raises(gingham.TileConflictError, match="writes each cell from 2"):
        fn(np.ones((3, 2)), device=compiled_device.id)


def test_output_that_is_an_input_and_a_reshape(compiled_device):
    fn = tile.function("""
    function (X[N, M]) -> (X, R, S) {
        R = reshape(X, M, N);
        S = R * 2;
    }""")
    x = np.arange(6.0).reshape(2, 3)
    got_x, got_r, got_s = fn(x, device=compiled_device.id)
    np.testing.assert_array_equal(got_x, x)
    np.testing.assert_array_equal(got_r, x.reshape(3, 2))
    np.testing.assert_array_equal(got_s, 2 * x.reshape(3, 2))


MAXPOOL_GRAD = """
function (X[N, C, H, W], D[N, C, P, Q]) -> (DX) {
    O[n, c, y, x : N, C, P, Q] = >(X[n, c, 2*y + i, 2*x + j]), i < 2, j < 2;
    DX[n, c, 2*y + i, 2*x + j : N, C, H, W] = +(X[n, c, 2*y + i, 2*x + j] == O[n, c, y, x]
                                                 ? D[n, c, y, x]), i < 2, j < 2;
}
"""


def test_strided_window_gradient_loops_over_its_taps(compiled_device):
    # Normal form keeps y and x over every output row and column under a guard that lets one
    # through; narrowing loops over the 2 x 2 taps instead (4 assignments, not P * Q), and as
    # stride == window the guards pin the tap to o mod 2 (normalize.pin): no loop at all, an
    # elementwise kernel.
    rng = np.random.default_rng(2)
    x = rng.permutation(2 * 3 * 8 * 8).reshape(2, 3, 8, 8).astype(np.float32)  # no ties
    d = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    exe = executable(tile.function(MAXPOOL_GRAD).bind(x, d), compiled_device)
    gradient = [launch for launch in exe.launches if launch.name.endswith("_DX")]
    assert gradient and all("elementwise over" in launch.schedule for launch in gradient), \
        [launch.schedule for launch in exe.launches]
    got, = exe(x, d)
    windows = x.reshape(2, 3, 4, 2, 4, 2)
    hit = windows == windows.max(axis=(3, 5), keepdims=True)
    want = (hit * d[:, :, :, None, :, None]).reshape(2, 3, 8, 8)
    np.testing.assert_array_equal(got, want)


NORMALISE = """
function (X[N, C], S[C]) -> (Y, M) {
    M[0, c : 1, C] = +(X[n, c]);
    Y = X * rsqrt(M / 1024.0 + 0.5) + pow(S, 2.0) * X + M;
}
"""


def test_broadcast_subexpressions_are_hoisted_and_exact(compiled_device):
    # rsqrt(M / 1024 + 0.5) reads only the [1, C] statistic: computed once per column, in the
    # statistic's kernel (which writes it as Y_h0); pow(S, 2.0) in a kernel over S's cells.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    s = rng.standard_normal(8).astype(np.float32)
    bound = tile.function(NORMALISE).bind(x, s)
    from gingham.compiler.hoist import hoist_broadcast
    hoisted = hoist_broadcast(bound)
    assert len(hoisted.program.statements) > len(bound.program.statements)
    exe = executable(bound, compiled_device)
    statistic = next(launch for launch in exe.launches if "M" in launch.args)
    assert "Y_h0" in statistic.args, [(launch.name, launch.args) for launch in exe.launches]
    y, m = exe(x, s)
    want_m = x.sum(axis=0, dtype=np.float64)[None, :]
    np.testing.assert_allclose(m, want_m, rtol=1e-5, atol=1e-4)
    scale = (1 / np.sqrt(m / np.float32(1024) + np.float32(0.5))).astype(np.float32)
    want = x * scale + (s * s) * x + m
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_broadcast_copy_streams_and_fuses(compiled_device):
    # D[i, j] = +(S[i, 0]) copies with broadcasting: planned as elementwise, one kernel with
    # the statement that follows it.
    fn = tile.function("""
    function (S[R, 1], X[R, K]) -> (Y) {
        D[i, j : R, K] = +(S[i, 0]), j < K;
        Y = D * X;
    }""")
    rng = np.random.default_rng(4)
    s, x = rng.standard_normal((16, 1)), rng.standard_normal((16, 40))
    exe = executable(fn.bind(s, x), compiled_device)
    assert len(exe.launches) == 1, [launch.schedule for launch in exe.launches]
    y, = exe(s, x)
    np.testing.assert_array_equal(y, s * x)
