"""One 3x3 convolution layer's training step, each convolution algorithm in turn: the figures
behind ``gingham.nn.winograd.AUTO_MIN_CHANNELS`` (which layers ``conv_algorithm=auto`` builds
by Winograd).

    python3 tools/conv_layer.py --device cuda:0 512,32,64,128 16,100,32,32
        [--algorithms direct,winograd] [--layout nhwc] [--steps 5]

Each layer is ``BATCH,SIZE,IN,OUT``: a ``SIZE x SIZE`` image of ``IN`` channels, ``OUT``
filters, padding 1. The step is ``relu(conv2d(x, w))``, the mean of its square, the gradients
of ``x`` and ``w``, and an SGD update of ``w``, through ``gingham.jit``; the median of
``--steps`` steps after a first (compiling) one, synchronised, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import gingham  # noqa: E402
from gingham.devices import get_device  # noqa: E402
from gingham.frontend import optim  # noqa: E402
from gingham.frontend.jit import jit  # noqa: E402
from gingham.nn import functional as F  # noqa: E402


def layer_ms(device: str, batch: int, size: int, channels: int, filters: int, layout: str,
             steps: int) -> float:
    """The median step time of one layer, in ms, under the current ``conv_algorithm``."""
    rng = np.random.default_rng(0)
    shape = (batch, size, size, channels) if layout == "NHWC" else (batch, channels, size, size)
    x = gingham.tensor(rng.standard_normal(shape).astype(np.float32), device=device,
                       requires_grad=True)
    w = gingham.tensor((rng.standard_normal((filters, channels, 3, 3)) * 0.05)
                       .astype(np.float32), device=device, requires_grad=True)
    opt = optim.SGD([w], lr=0.01)

    @jit
    def step(x):
        y = F.relu(F.conv2d(x, w, padding=1, data_format=layout))
        loss = (y * y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, x.grad

    target = get_device(device)
    step(x)[0].item()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(x)[0].item()
        target.synchronize()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("layers", nargs="+", help="BATCH,SIZE,IN,OUT")
    parser.add_argument("--device", default=None)
    parser.add_argument("--algorithms", default="direct,winograd")
    parser.add_argument("--layout", choices=("nchw", "nhwc"), default="nhwc")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    device = args.device or gingham.devices.default_device_id()
    algorithms = args.algorithms.split(",")
    print(f"{device}, {args.layout.upper()}, fp32: ms per step, " + " / ".join(algorithms))
    for spec in args.layers:
        batch, size, channels, filters = (int(v) for v in spec.split(","))
        figures = []
        for algorithm in algorithms:
            os.environ["GINGHAM_CONV_ALGORITHM"] = algorithm  # read when the step is traced
            figures.append(layer_ms(device, batch, size, channels, filters,
                                    args.layout.upper(), args.steps))
        print(f"  {spec:>16}: " + " / ".join(f"{ms:8.2f}" for ms in figures), flush=True)


if __name__ == "__main__":
    main()
