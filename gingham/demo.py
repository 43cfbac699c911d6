"""``gingham demo``: the tour a new user runs first.

It lists the devices, then on the chosen one (the best available by default) compiles a few Tile
programs — a matrix product, a padded 3x3 convolution, a softmax, and the convolution's gradient
from the autodiff — checks each against NumPy, and reports the first-call time (generate,
compile, run) beside the steady-state time of the compiled kernels.
"""

from __future__ import annotations

import time

import numpy as np

from . import tile
from .bench.ops import CONV, GEMM
from .devices import default_device_id, get_device, list_devices


SOFTMAX = """
function (X[N, C]) -> (Y) {
    M[n, 0 : N, 1] = >(X[n, c]);
    E = exp(X - M);
    S[n, 0 : N, 1] = +(E[n, c]);
    Y = E / S;
}"""

POOL = """
function (I[N]) -> (O) {
    O[i : (N + 1) / 2] = >(I[2*i + j]), j < 2;
}"""


def _numpy_conv(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, w, f.shape[3]), dtype=np.float64)
    for ky in range(3):
        for kx in range(3):
            out += padded[:, ky:ky + h, kx:kx + w, :] @ f[ky, kx]
    return out


def _numpy_conv_gradients(x: np.ndarray, f: np.ndarray, d_out: np.ndarray):
    """The two gradients of the padded 3x3 convolution, tap by tap in float64."""
    n, h, w, _ = x.shape
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    d_padded = np.zeros_like(padded)
    d_f = np.zeros(f.shape, dtype=np.float64)
    d_out = d_out.astype(np.float64)
    for ky in range(3):
        for kx in range(3):
            window = padded[:, ky:ky + h, kx:kx + w, :]
            d_f[ky, kx] = np.einsum("nyxc,nyxo->co", window, d_out)
            d_padded[:, ky:ky + h, kx:kx + w, :] += d_out @ f[ky, kx].T.astype(np.float64)
    return d_padded[:, 1:-1, 1:-1, :], d_f


def _timed(fn, *args, device: str, repeat: int = 5):
    start = time.perf_counter()
    result = fn(*args, device=device)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args, device=device)
        times.append(time.perf_counter() - start)
    return result, first, float(np.median(times))


def _relative_error(got, expected) -> float:
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-30))


def run(device: str | None = None) -> int:
    device = device or default_device_id()
    print("devices:", ", ".join(d.id + ("*" if d.id == device else "") for d in list_devices()))
    info = get_device(device).info
    print(f"running on {device}: {info.name} ({info.vendor})\n")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal((512, 512), dtype=np.float32)
    x = rng.standard_normal((8, 32, 32, 32), dtype=np.float32)
    f = rng.standard_normal((3, 3, 32, 32), dtype=np.float32) / 10
    logits = rng.standard_normal((256, 1000), dtype=np.float32)

    conv = tile.function(CONV)
    cases = [
        ("matmul 512x512x512", tile.function(GEMM), (a, b),
         lambda: a.astype(np.float64) @ b, 2 * 512**3),
        ("conv 3x3 8x32x32x32->32", conv, (x, f), lambda: _numpy_conv(x, f),
         2 * 8 * 32 * 32 * 32 * 32 * 9),
        ("softmax 256x1000", tile.function(SOFTMAX), (logits,),
         lambda: np.exp(logits - logits.max(1, keepdims=True))
         / np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True), 0),
    ]
    print(f"{'program':28} {'first call':>11} {'steady':>10} {'GFLOP/s':>8} {'rel. error':>11}")
    worst = 0.0
    for name, fn, args, reference, flops in cases:
        result, first, steady = _timed(fn, *args, device=device)
        error = _relative_error(result, reference())
        worst = max(worst, error)
        rate = f"{flops / steady / 1e9:8.1f}" if flops else f"{'-':>8}"
        print(f"{name:28} {first * 1e3:9.1f}ms {steady * 1e3:8.2f}ms {rate} {error:11.1e}")

    cotangent = rng.standard_normal((8, 32, 32, 32), dtype=np.float32)
    start = time.perf_counter()
    dx, df = conv.vjp((x, f), cotangent, device=device)
    elapsed = time.perf_counter() - start
    expected_dx, expected_df = _numpy_conv_gradients(x, f, cotangent)
    error = max(_relative_error(dx, expected_dx), _relative_error(df, expected_df))
    worst = max(worst, error)
    print(f"{'conv gradient (autodiff)':28} {elapsed * 1e3:9.1f}ms {'':>10} {'':>8} {error:11.1e}"
          "  (vs NumPy in float64)")

    print("\nThe autodiff writes Tile too; the gradient of a 2-wide max pool:\n")
    print(tile.function(POOL).gradient_source(np.zeros(7, np.float32)))
    ok = worst < 1e-3
    print("all results match" if ok else f"MISMATCH: worst relative error {worst:.2e}")
    return 0 if ok else 1


def register(subparsers) -> None:
    parser = subparsers.add_parser("demo", help="compile and check a few Tile programs on a device")
    parser.add_argument("--device", help="device id (default: the best available)")
    parser.set_defaults(func=lambda args: run(args.device))
