"""Where the Python time of a training step's first call goes, phase by phase, without a GPU.

    PYTHONPATH=$PWD python3 tools/first_step_phases.py resnet9 [--precision bf16] [--layout NHWC] [--batch 512]
        [--device h200|cpu] [--profile FILE]

It builds the model (not part of the step), traces one step (``nn.training.train_step`` as
``tools/nvrtc_kernels.py`` does) and runs ``compile_program``'s passes by hand, for an H200's
description (``--device h200``: CUDA, compute capability 9.0) or this machine's ``cpu``
device: common-statement removal, broadcast hoisting, split sums, fusion planning, lowering
(schedules included), naming each kernel by content (``unit_of``: canonical rename and
rendering), the per-kernel disk-cache keys and assembling the compiled source. Nothing is
compiled. Times are this process's CPU seconds (``time.process_time``: other processes on a
shared machine do not inflate them) of one first run in a fresh process (run it a few times
and take the best; a second run in the same process would find caches warm). The passes after
tracing run with the garbage collector paused, as ``compile_program`` runs them
(:mod:`gingham.compiler.gc_pause`). ``--profile`` writes a cProfile of it.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import time

os.environ.setdefault("GINGHAM_TUNE_MEASURE", "0")  # the device description, no measurements
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nvrtc_kernels  # noqa: E402  (the H200's description and the step's tracing)

import gingham  # noqa: E402
from gingham.bench import model as bench_model  # noqa: E402
from gingham.cache import DiskCache  # noqa: E402
from gingham.compiler.cse import eliminate_common  # noqa: E402
from gingham.compiler.dedupe import unit_of  # noqa: E402  (before codegen: they import each other)
from gingham.codegen.c_family import DIALECTS, assemble  # noqa: E402
from gingham.compiler.fusion import plan  # noqa: E402
from gingham.compiler.gc_pause import paused_collection  # noqa: E402
from gingham.compiler.hoist import hoist_broadcast  # noqa: E402
from gingham.compiler.linearity import split_sums  # noqa: E402
from gingham.compiler.lower import LoweringContext  # noqa: E402
from gingham.compiler.schedule import lower_with_schedule  # noqa: E402

PHASES = ("model", "trace", "cse", "hoist", "split_sums", "plan", "lower", "unit_of", "keys", "assemble")


def one_run(args, info) -> tuple[dict[str, float], int, int]:
    """Seconds per phase, the number of kernels and of distinct ones."""
    seconds: dict[str, float] = {}

    def timed(name, fn, *fn_args):
        start = time.process_time()
        result = fn(*fn_args)
        seconds[name] = time.process_time() - start
        return result

    # As nvrtc_kernels.step_program, with building the model and its batch timed apart.
    start = time.process_time()
    spec = bench_model.MODELS[args.model]
    step = spec.gingham_step("cpu", args.layout, args.precision)
    x, y = bench_model.synthetic_batches(spec, args.batch, args.layout)[0]
    x, y = gingham.tensor(x, device="cpu"), gingham.tensor(y, device="cpu")
    seconds["model"] = time.process_time() - start
    bound = timed("trace", bench_model.trace_step, step, x, y)
    with paused_collection():  # as compile_program runs its passes
        bound = timed("cse", eliminate_common, bound)
        bound = timed("hoist", hoist_broadcast, bound)
        bound = timed("split_sums", split_sums, bound)
        kernel_plan = timed("plan", plan, bound)

        def lower():
            kernels = []
            for position, kernel in enumerate(kernel_plan.kernels):
                ctx = LoweringContext(bound, kernel_plan.aliases)
                name = f"k{position}_{sorted(kernel.stores)[0]}"
                kernels += lower_with_schedule(kernel, ctx, name, info)
            return kernels

        kernels = timed("lower", lower)
        dialect = DIALECTS[info.dialect]
        units = timed("unit_of", lambda: [unit_of(kernel, dialect) for kernel in kernels])
        distinct = {unit.entry: part for unit, part in units}
        timed("keys", lambda: [DiskCache.key("ns", "unit", u.source, u.entry, ("identity",))
                               for u, _ in units])
        timed("assemble", assemble, list(distinct.values()), dialect)
        return seconds, len(kernels), len(distinct)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="resnet9")
    parser.add_argument("--precision", default="bf16", choices=sorted(nvrtc_kernels.PRECISIONS))
    parser.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--device", default="h200", choices=["h200", "cpu"])
    parser.add_argument("--profile", help="write a cProfile of the last run here")
    args = parser.parse_args()
    if args.device == "h200":
        info = nvrtc_kernels.H200
    else:
        from gingham.devices import get_device

        info = get_device("cpu").info
    # A real run has discovered its device and has its model (measured beside the tracing)
    # before it lowers; looking up the description's model here would charge the lowering
    # with discovering every backend (importing pyopencl: 0.15 s on the 2-core EPYC).
    from gingham.tune.device_model import model_for_info

    model_for_info(info)
    profile = cProfile.Profile() if args.profile else None
    if profile:
        profile.enable()
    seconds, count, distinct = one_run(args, info)
    if profile:
        profile.disable()
        profile.dump_stats(args.profile)
    print(f"{args.model} {args.precision} {args.layout} batch {args.batch} on {info.name}: "
          f"{count} kernels ({distinct} distinct); CPU seconds:")
    print("  ".join(f"{name} {seconds[name]:.3f}" for name in PHASES) +
          f"  | total {sum(seconds.values()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
