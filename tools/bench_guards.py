"""What the padding guards cost a convolution's weight gradient on a GPU: the gradient of a
3x3 'same' convolution (NCHW; its input read through guards, zero outside) against the same
sum over an input padded beforehand (no guards), at ResNet-9's shapes, timed on the device's
clock (``Executable.kernel_times``, the best of five)::

    python3 tools/bench_guards.py [--device cuda:0]

On the H200 (2026-12-03, CUDA, fp32; the same schedules either way, split-K): guarded / padded
2.438 / 2.264 ms (N512 CO128 CI64 32x32), 2.327 / 2.213 (CO256 CI128 16x16), 2.271 / 2.165
(CO512 CI256 8x8): the guards cost 5-8%, 0.1-0.17 ms a kernel, about 0.6 ms of a 34.5 ms
fp32 ResNet-9 step over its five such gradients, before the cost of a pass that pads inputs.
"""

from __future__ import annotations

import argparse

import numpy as np

from gingham import tile
from gingham.devices import get_device
from gingham.runtime import executable

GUARDED = """
function (D[N, CO, H, W], X[N, CI, H, W]) -> (G) {
    G[co, ci, ky, kx : CO, CI, 3, 3] = +(D[n, co, y, x] * X[n, ci, y + ky - 1, x + kx - 1]);
}
"""
PADDED = """
function (D[N, CO, H, W], X[N, CI, HP, WP]) -> (G) {
    G[co, ci, ky, kx : CO, CI, 3, 3] = +(D[n, co, y, x] * X[n, ci, y + ky, x + kx]);
}
"""
#: ResNet-9's layers at batch 512: (N, CO, CI, H = W).
LAYERS = [(512, 128, 64, 32), (512, 256, 128, 16), (512, 512, 256, 8)]


def kernel_times(device, source: str, arrays: list[np.ndarray]) -> tuple[list[float], list]:
    """The best of five back-to-back timings of ``source``'s kernels on ``arrays``."""
    exe = executable(tile.function(source).bind(*arrays), device)
    buffers = []
    for array in arrays:
        buffer = device.alloc(array.nbytes)
        device.copy_in(buffer, array)
        buffers.append(buffer)
    return min((exe.kernel_times(buffers) for _ in range(5)), key=sum), exe.launches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    device = get_device(parser.parse_args().device)
    rng = np.random.default_rng(0)
    for n, co, ci, h in LAYERS:
        d = rng.standard_normal((n, co, h, h), dtype=np.float32)
        x = rng.standard_normal((n, ci, h, h), dtype=np.float32)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        for label, source, image in (("guarded", GUARDED, x), ("padded", PADDED, padded)):
            times, launches = kernel_times(device, source, [d, image])
            kernels = "; ".join(f"{t * 1e3:.3f} {launch.schedule[:90]}"
                                for t, launch in zip(times, launches))
            print(f"{label:8s} N{n} CO{co} CI{ci} H{h}: {sum(times) * 1e3:.3f} ms {kernels}",
                  flush=True)


if __name__ == "__main__":
    main()
