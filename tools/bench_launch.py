#!/usr/bin/env python3
"""Launch overhead: host microseconds per kernel launch, and per replayed training step.

    python3 tools/bench_launch.py --device cpu
    python3 tools/bench_launch.py --device opencl:0 --kernels 200 --program-kernels 50
    python3 tools/bench_launch.py --device cuda:0 --json launch.json

Three measurements, each the best of ``--repeat`` trials of back-to-back runs followed by one
synchronisation (so what is measured is what the host spends issuing the work, as long as
the device keeps up; the kernels are tiny on purpose):

* ``device``: ``--kernels`` launches of one tiny elementwise kernel (256 floats) through the
  per-launch API ``Device.launch`` (what every run of a program paid before launch plans),
  and through a ``Device.plan`` of the same launches (one replay; on CUDA with and without
  graphs);
* ``program``: a Tile program of ``--program-kernels`` chained 8x8 matrix products (a
  contraction never fuses with another, so each is one kernel) run by its executable
  (``exe.run``): the executable's own overhead included;
* ``step``: a ``gingham.jit`` training step of a small MLP (forward, backward, SGD with
  momentum): milliseconds per replayed step, launches per step.

Only public APIs of ``gingham`` are used, so the same script measures an older checkout too
(``PYTHONPATH=/path/to/checkout python3 tools/bench_launch.py``); the parts that need launch
plans say so and are skipped there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.environ.get("GINGHAM_ROOT", os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

KERNELS = {
    "c": """
void tiny(float* restrict out, const float* restrict a, long long n) {
    for (long long i = 0; i < n; ++i) out[i] = a[i] * 0.5f + 1.0f;
}
""",
    "opencl": """
__kernel void tiny(__global float* out, __global const float* a, long n) {
    long i = get_global_id(0);
    if (i < n) out[i] = a[i] * 0.5f + 1.0f;
}
""",
    "cuda": """
extern "C" __global__ void tiny(float* out, const float* a, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * 0.5f + 1.0f;
}
""",
}
N = 256


def best_seconds(run, sync, repeat: int, number: int) -> float:
    """The best per-call time of ``repeat`` trials of ``number`` calls and one sync."""
    run()
    sync()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            run()
        sync()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def bench_device(device, kernels: int, repeat: int, number: int) -> dict:
    """Microseconds per launch: Device.launch one by one, and a replayed plan."""
    from gingham import config

    kernel = device.compile(KERNELS[device.info.dialect], "tiny")
    buffers = [device.alloc(4 * N) for _ in range(kernels + 1)]
    device.copy_in(buffers[0], np.ones(N, np.float32))
    sizes = ((), None) if device.info.dialect == "c" else ((N,), (64,))
    launches = [(kernel, [buffers[i + 1], buffers[i], np.int64(N)]) for i in range(kernels)]

    def one_by_one():
        for k, args in launches:
            device.launch(k, args, *sizes)

    result = {"kernels": kernels,
              "launch_us": best_seconds(one_by_one, device.synchronize, repeat, number)
              / kernels * 1e6}
    base = sys.modules.get("gingham.devices.base")
    if not hasattr(base, "LaunchSpec"):
        result["note"] = "no launch plans in this checkout"
        return result
    check = np.empty(N, np.float32)

    def planned(graphs: bool | None) -> float:
        os.environ["GINGHAM_CUDA_GRAPHS"] = "1" if graphs else "0"
        config.get_config()  # the plan reads the setting when it is made
        specs = [base.LaunchSpec(k, [base.Slot(0, 4 * N) if i == kernels - 1 else args[0],
                                     args[1], args[2]], *sizes)
                 for i, (k, args) in enumerate(launches)]
        plan = device.plan(specs, 1)
        out = device.alloc(4 * N)
        seconds = best_seconds(lambda: plan.run([out]), device.synchronize, repeat, number)
        device.copy_out(out, check)  # the chain's value: 2 - 2**-kernels, whatever the path
        expected = np.float32(1)
        for _ in range(kernels):
            expected = expected * np.float32(0.5) + np.float32(1)
        assert np.allclose(check, expected), (check[:4], expected)
        return seconds / kernels * 1e6

    result["plan_us"] = planned(False)
    if device.info.dialect == "cuda":
        result["plan_graph_us"] = planned(True)
    os.environ.pop("GINGHAM_CUDA_GRAPHS", None)
    return result


def chain_program(kernels: int) -> str:
    lines = ["function (X[N, N], W[N, N]) -> (Y) {"]
    previous = "X"
    for i in range(kernels):
        name = "Y" if i == kernels - 1 else f"T{i}"
        lines.append(f"    {name}[i, j : N, N] = +({previous}[i, k] * W[k, j]);")
        previous = name
    lines.append("}")
    return "\n".join(lines)


def bench_program(device, kernels: int, repeat: int, number: int) -> dict:
    """Microseconds per launch of an executable's run, and its first run (compile) time."""
    from gingham import runtime, tile

    x = np.eye(8, dtype=np.float32)
    w = (np.eye(8) * 1.0).astype(np.float32)
    fn = tile.function(chain_program(kernels))
    bound = fn.bind_shapes([x.shape, w.shape], [x.dtype, w.dtype])
    start = time.perf_counter()
    exe = runtime.executable(bound, device)
    compile_seconds = time.perf_counter() - start
    inputs = []
    for array in (x, w):
        buffer = device.alloc(array.nbytes)
        device.copy_in(buffer, array)
        inputs.append(buffer)
    launches = len(exe.launches)
    seconds = best_seconds(lambda: exe.run(inputs), device.synchronize, repeat, number)
    fresh = best_seconds(lambda: exe.run(inputs, fresh_outputs=True), device.synchronize,
                         repeat, number)
    (out,) = exe.run(inputs)
    y = np.empty((8, 8), np.float32)
    device.copy_out(out, y)
    assert np.allclose(y, x), "the chain of identity products changed its input"
    return {"kernels": kernels, "launches": launches, "compile_s": compile_seconds,
            "run_us_per_launch": seconds / launches * 1e6,
            "fresh_run_us_per_launch": fresh / launches * 1e6}


def bench_step(device, repeat: int, number: int, batch: int = 4, width: int = 16) -> dict:
    """Milliseconds per replayed jit training step of a 4-layer MLP."""
    import gingham
    from gingham import nn
    from gingham.nn import training

    nn.modules.manual_seed(0)
    model = nn.Sequential(*[layer for _ in range(3) for layer in
                            (nn.Linear(width, width, device=device.id), nn.ReLU())],
                          nn.Linear(width, 10, device=device.id))
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = training.train_step(model, optimizer)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int32)
    start = time.perf_counter()
    step(x, y).item()
    first = time.perf_counter() - start
    before = device.stats.snapshot()
    step(x, y)
    launches = (device.stats - before).launches
    seconds = best_seconds(lambda: step(x, y), device.synchronize, repeat, number)
    return {"launches": launches, "first_step_s": first, "step_ms": seconds * 1e3,
            "us_per_launch": seconds / max(launches, 1) * 1e6, "traces": step.traces}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--program-kernels", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--skip", default="", help="comma-separated: device,program,step")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    from gingham.devices import get_device

    device = get_device(args.device)
    skip = set(filter(None, args.skip.split(",")))
    results = {"device": device.id, "name": device.info.name}
    if "device" not in skip:
        results["device_launch"] = bench_device(device, args.kernels, args.repeat, args.number)
    if "program" not in skip:
        results["program"] = bench_program(device, args.program_kernels, args.repeat,
                                           args.number)
    if "step" not in skip:
        results["step"] = bench_step(device, args.repeat, args.number)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
