"""Small bf16 contractions on the tensor cores against the SIMT tiled schedule, same device.

    PYTHONPATH=$PWD python3 tools/bench_tc_small.py [--repeats 50]

For each shape (M x K times K x N, bfloat16, float32 accumulation: ResNet-9's classifier and
its gradients, the first convolution's filter gradient as a GEMM, and sizes around where the
tensor cores start to pay), builds the product twice: the tensor-core kernel
(:mod:`gingham.compiler.tiling_tc`) and the float32 tiled SIMT kernel (:mod:`gingham.compiler.tiling_gpu`), each checked against NumPy,
and prints per variant: compile + first run (cold cache), the time per call (CUDA events, best
of three loops) and the schedules. Not a test: nothing is asserted.

On the H200 (2026-11-30, 30 repeats), tensor cores / SIMT in us: M512 K512 N10 6.5 / 24.7,
M10 K512 N512 5.2 / 23.9, M512 K10 N512 5.3 / 7.3, M64 K524288 N27 56.8 / 126.7, 128^3 8.4 /
8.6, 256^3 5.5 / 13.2, M128 K512 N512 7.8 / 23.9, 512^3 7.8 / 21.2, M256 K2304 N256 9.3 / 20.9,
1024^3 13.9 / 118.3; NVRTC + first run 170-450 ms / 23-430 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tensor_cores import GinghamRun, event_time, rel_error  # noqa: E402

from gingham import tile  # noqa: E402
from gingham.bench.ops import GEMM  # noqa: E402
from gingham.compiler import tiling_tc  # noqa: E402
from gingham.devices import list_devices  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
#: (M, K, N): the classifier's forward (batch 512 x 512 features -> 10), its two gradients,
#: the first convolution's filter gradient (64 x 27 outputs over K = 512 * 32 * 32), and
#: square and flat sizes from 2^21 to 2^30 multiply-adds.
SHAPES = ((512, 512, 10), (10, 512, 512), (512, 10, 512), (64, 524288, 27),
          (128, 128, 128), (256, 256, 256), (128, 512, 512), (512, 512, 512),
          (256, 2304, 256), (1024, 1024, 1024))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    cuda = [d for d in list_devices() if d.info.dialect == "cuda"]
    if not cuda:
        print("no CUDA device")
        return 1
    device = cuda[0]
    rng = np.random.default_rng(0)
    view = tiling_tc.tensor_core_view
    for m, kk, n in SHAPES:
        a = rng.standard_normal((m, kk), np.float32).astype(BF16)
        b = rng.standard_normal((kk, n), np.float32).astype(BF16)
        expected = a.astype(np.float32) @ b.astype(np.float32)
        for label in ("tensor cores", "simt"):
            # Each variant with a cold kernel cache of its own: "first" includes NVRTC.
            os.environ["GINGHAM_CACHE_DIR"] = tempfile.mkdtemp(prefix="tcsmall-")
            tiling_tc.tensor_core_view = view if label == "tensor cores" else \
                (lambda *_: None)
            start = time.perf_counter()
            run = GinghamRun(device, tile.function(GEMM), (a, b))
            (got,) = run.outputs()
            first = time.perf_counter() - start
            seconds = event_time(run, args.repeats)
            error = rel_error(got.astype(np.float32), expected)
            schedules = " | ".join(launch.schedule[:90] for launch in run.exe.launches)
            print(f"M={m} K={kk} N={n} {label:12s}: {seconds * 1e6:8.1f} us, first "
                  f"{first * 1e3:7.1f} ms, rel error {error:.1e}; {schedules}", flush=True)
        tiling_tc.tensor_core_view = view
    return 0


if __name__ == "__main__":
    sys.exit(main())
