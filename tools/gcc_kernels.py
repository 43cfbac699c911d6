"""GCC time of each distinct C kernel of a model's training step on this machine's ``cpu``
device, one kernel at a time: what a fresh first step's compile is made of.

    PYTHONPATH=$PWD python3 tools/gcc_kernels.py resnet9 [--batch 512] [--layout NHWC]
        [--flags "--param=..."] [--only GEMM] [--out DIR]

It traces one step as ``tools/nvrtc_kernels.py`` does, lowers it for the ``cpu`` device
(its own schedules), renders each distinct kernel as ``gingham`` does (``dedupe.unit_of``) and
compiles those whose schedule contains ``--only`` with the device's compiler and flags
(``--flags`` appended), one at a time: seconds and characters per kernel, slowest first, then
the seconds by kind of schedule. ``--out`` keeps the sources (the schedule on the first
line), e.g. to compare two flag sets' assembly with ``-S``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("GINGHAM_TUNE_MEASURE", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nvrtc_kernels  # noqa: E402  (the step's tracing)

from gingham.codegen.c_family import DIALECTS  # noqa: E402
from gingham.compiler import lower_program, rewrite_program  # noqa: E402
from gingham.compiler.dedupe import unit_of  # noqa: E402
from gingham.devices import get_device  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="resnet9")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
    parser.add_argument("--flags", default="", help="appended to the device's flags")
    parser.add_argument("--only", default="", help="the kernels whose schedule contains this")
    parser.add_argument("--out", help="a directory to write each compiled source to")
    args = parser.parse_args()
    device = get_device("cpu")
    batch = args.batch or nvrtc_kernels.bench_model.MODELS[args.model].batch
    bound = nvrtc_kernels.step_program(args.model, "fp32", args.layout, batch)
    units = {}
    for kernel in lower_program(rewrite_program(bound), device.info):
        if args.only in kernel.schedule:
            unit, _ = unit_of(kernel, DIALECTS["c"])
            units.setdefault(unit.entry, (unit, kernel.schedule))
    flags = [*device.cflags, *args.flags.split()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for entry, (unit, schedule) in units.items():
            source = os.path.join(args.out or tmp, f"{entry}.c")
            os.makedirs(os.path.dirname(source), exist_ok=True)
            with open(source, "w") as handle:
                handle.write(f"// {schedule}\n{unit.source}")
            start = time.perf_counter()
            subprocess.run([device.cc, *flags, "-o", os.path.join(tmp, f"{entry}.so"), source,
                            *device.libraries], check=True)
            rows.append((time.perf_counter() - start, len(unit.source), schedule))
    rows.sort(reverse=True)
    print(f"{len(rows)} kernels of {args.model} (batch {batch}), {device.cc} "
          f"{' '.join(flags)}: {sum(r[0] for r in rows):.1f} s one at a time; slowest:")
    for seconds, chars, schedule in rows[:12]:
        print(f"{seconds:6.2f} s {chars:7d} chars  {schedule[:110]}")
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for seconds, _, schedule in rows:
        kinds[re.split(r":|,| over | \(", schedule)[0].strip()].append(seconds)
    print("by kind of schedule (count, seconds):")
    for kind, spent in sorted(kinds.items(), key=lambda item: -sum(item[1])):
        print(f"  {len(spent):4d} {sum(spent):6.1f}  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
