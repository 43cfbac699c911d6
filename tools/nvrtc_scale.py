"""Does NVRTC compile in parallel on threads as well as on processes? The CUDA backend builds
its compile pieces on threads (``Device.unit_builder``); this times the same kernels
compiled one at a time, on ``--jobs`` threads and on ``--jobs`` processes:

    CUDA_CACHE_DISABLE=1 PYTHONPATH=$PWD python3 tools/nvrtc_scale.py resnet9 \
        [--precision bf16] [--layout NHWC] [--jobs 16] [--only tensor-core]

The kernels are a training step's, rendered for an H200 as ``tools/nvrtc_kernels.py`` does
(one NVRTC program each, ``--gpu-architecture=sm_90a``). Each way compiles its own copy of
every source, made distinct by a device variable of its own: on the H200's host a second
compile of a source took about 30 ms instead of 0.5 s, with ``CUDA_CACHE_PATH`` unset and
only a ``#define`` changed, so some cache answers repeated sources and would hide the
difference being measured. Printed: wall seconds of each way and the sum of the per-kernel
seconds (threads that serialise show a sum far above one at a time).

On the H200's host (16 cores) processes won here, 1.85 s against 3.05 s for a bf16 ResNet-9
step's 141 kernels (stop 21), 1.15 s against 2.07 s for an fp32 step's 112 (stop 32), but not
in stop 21's real first step, where kernels shared NVRTC programs of about ten and every
core was busy either way: a pool of NVRTC worker processes compiled the same step in the
same time as threads (docs/measurements.md, "First epochs"). The pool is an option again,
``GINGHAM_NVRTC_BUILD=processes``; ``tools/gpu-figures.sh SECONDS g`` times it in the real step.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

OPTIONS = ["--gpu-architecture=sm_90a"]


def build(source: str) -> float:
    """Seconds NVRTC takes to compile ``source`` to a cubin; raises if it does not compile."""
    from nvrtc_kernels import nvrtc_build

    seconds, _ = nvrtc_build(source, OPTIONS)
    return seconds


def distinct(sources: list[str], label: str) -> list[str]:
    """``sources``, each with a device variable named for ``label``, this process and its
    position, so that no cache has seen them."""
    return [f"{source}\n__device__ int gh_scale_{label}_{os.getpid()}_{i} = {i};\n"
            for i, source in enumerate(sources)]


def timed(pool: Executor | None, sources: list[str]) -> tuple[float, float]:
    """(wall seconds, sum of per-kernel seconds) of compiling ``sources`` on ``pool`` (None:
    one at a time on this thread)."""
    start = time.perf_counter()
    seconds = [build(s) for s in sources] if pool is None else list(pool.map(build, sources))
    return time.perf_counter() - start, sum(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="resnet9")
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", default="", help="the kernels whose schedule contains this")
    args = parser.parse_args()

    import nvrtc_kernels
    from gingham.tune.described import H200

    bound = nvrtc_kernels.step_program(args.model, args.precision, args.layout, args.batch)
    kernels, _ = nvrtc_kernels.lower_step(bound, H200)
    sources = [unit.source for unit, _, _ in nvrtc_kernels.distinct_units(kernels, args.only)]
    build(distinct(sources[:1], "load")[0])  # NVRTC loaded before anything is timed
    print(f"{len(sources)} kernels of {args.model} {args.precision}, {args.jobs} jobs",
          flush=True)
    wall, total = timed(None, distinct(sources, "one"))
    print(f"  one at a time {wall:7.2f} s", flush=True)
    with ThreadPoolExecutor(args.jobs) as threads:
        list(threads.map(build, distinct(sources[: args.jobs], "warm_threads")))
        wall, total = timed(threads, distinct(sources, "threads"))
    print(f"  threads       {wall:7.2f} s  (kernels' own seconds summed: {total:.2f})",
          flush=True)
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(args.jobs, mp_context=context) as processes:
        list(processes.map(build, distinct(sources[: args.jobs], "warm_processes")))
        wall, total = timed(processes, distinct(sources, "processes"))
    print(f"  processes     {wall:7.2f} s  (kernels' own seconds summed: {total:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
