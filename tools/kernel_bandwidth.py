"""Bytes, FLOPs and schedule of every kernel of a model's training step, as an H200 would get
them, and, given a ``GINGHAM_DEBUG=2`` log of that step, how far each is from the memory
bandwidth bound. No GPU needed.

    PYTHONPATH=$PWD python3 tools/kernel_bandwidth.py resnet9 --precision bf16 --layout NHWC \\
        --batch 512 [--log resnet9-bf16-kernels.log] [--bandwidth 4.0] [--top 30] \\
        [--skip tensor-core] [--out DIR]

Each kernel is lowered exactly as :func:`gingham.compiler.compile_program` lowers it for a CUDA
device of compute capability 9.0 (``tools/nvrtc_kernels.py``'s description of an H200), so the
names match the log's (``k91_T240``). Per kernel:

* bytes: every buffer it names read or written once (elements x dtype size; a split
  reduction's partials included): what it must move at least;
* the bound: bytes / bandwidth (``--bandwidth`` TB/s, default 4.0, an H200's HBM3e);
* from the log (the last time each kernel was printed): the measured time, the GB/s it
  reached, and the time lost against the bound. On CUDA and OpenCL the log's times are the
  device's clock with the kernels launched back to back (``Device.timed_launches``): what
  each adds to a replay, a few microseconds at least (the smallest times in the log say how
  much); elsewhere each time also holds a launch and a synchronisation.
* notes: what the schedule line and the parameters say about why (per-element half-type
  accesses, few work-groups, a long serial loop per work-item ...).

Ranked by the time lost. ``--out`` writes each kernel's CUDA source, its schedule on the first
line.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass

os.environ.setdefault("GINGHAM_TUNE_MEASURE", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from nvrtc_kernels import H200, lower_step, step_program  # noqa: E402

from gingham.codegen.c_family import DIALECTS  # noqa: E402
from gingham.compiler import kernel_ir as k  # noqa: E402
from gingham.compiler.dedupe import unit_of  # noqa: E402
from gingham.devices.base import DeviceInfo  # noqa: E402
from gingham.tile.dtypes import DTYPES  # noqa: E402
from gingham.tile.shapes import BoundProgram  # noqa: E402

#: A kernel line of a ``GINGHAM_DEBUG=2`` log: ``gingham: cuda:0: k91_T240 0.326 ms[, ...]``.
LOG_LINE = re.compile(r"gingham: \S+: (k\d+\S*) ([\d.]+) ms")


@dataclass
class Row:
    name: str
    bytes: int
    flops: int
    schedule: str
    notes: list[str]
    ms: float | None = None


def kernel_bytes(kernel: k.Kernel, bound: BoundProgram) -> int:
    """Bytes ``kernel`` must move: each buffer it names once, whole.

        >>> kernel_bytes(k11, bound)   # batch norm + ReLU: a 512x32x32x128 bf16 tensor in and
        268437504                      # out, four [128] float32 operands
    """
    scratch = {s.name: s.size * np.dtype(DTYPES[s.dtype]).itemsize for s in kernel.scratch}
    total = 0
    for param in kernel.params:
        if param.name in scratch:
            total += scratch[param.name]
        else:
            total += math.prod(bound.shapes[param.name]) * bound.dtypes[param.name].itemsize
    return total


def notes(kernel: k.Kernel, bound: BoundProgram, info: DeviceInfo) -> list[str]:
    """What the schedule and the parameters suggest about a kernel's distance from the bound."""
    found = []
    schedule = kernel.schedule
    halves = [p.name for p in kernel.params if p.dtype in ("bfloat16", "float16")
              and p.name in bound.shapes]
    if "vector loads/stores" in schedule:
        vectorised = schedule.split("vector loads/stores: ")[1].split(";")[0].split(", ")
        scalar = [name for name in halves if name not in vectorised]
        if scalar:
            found.append(f"half-type tensors accessed per element: {', '.join(scalar)}")
    groups = math.prod(kernel.launch.global_size) // max(1, math.prod(kernel.launch.local_size
                                                                      or (1,)))
    if groups < 2 * info.compute_units:
        found.append(f"{groups} work-groups on {info.compute_units} compute units")
    serial = re.search(r"serial reduction over (\d+)", schedule)
    if serial and int(serial.group(1)) >= 1024:
        found.append(f"serial loop of {serial.group(1)} per work-item")
    reducing = re.search(r"each reducing up to (\d+)", schedule)
    if reducing and int(reducing.group(1)) >= 1024:
        found.append(f"{reducing.group(1)} assignments per work-item, one element each")
    wide = [p.name for p in kernel.params if p.output and p.dtype == "float32"
            and p.name in bound.shapes and math.prod(bound.shapes[p.name]) >= 1 << 20]
    if wide and halves:
        found.append(f"big float32 outputs beside half-type operands: {', '.join(wide)}")
    return found


def read_log(path: str) -> dict[str, float]:
    """Each kernel's last time in a ``GINGHAM_DEBUG=2`` log, in ms."""
    times = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = LOG_LINE.match(line.strip())
            if match:
                times[match.group(1)] = float(match.group(2))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="resnet9")
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--log", help="a GINGHAM_DEBUG=2 log of one step of this model")
    parser.add_argument("--bandwidth", type=float, default=4.0, help="TB/s (default 4.0)")
    parser.add_argument("--top", type=int, default=30, help="rows to print (0: all)")
    parser.add_argument("--only", default="", help="kernels whose schedule contains this")
    parser.add_argument("--skip", default="", help="leave out kernels whose schedule contains this")
    parser.add_argument("--out", help="a directory to write each kernel's CUDA source to")
    args = parser.parse_args()
    if args.bandwidth <= 0:
        parser.error(f"--bandwidth must be positive, not {args.bandwidth}")
    kernels, bound = lower_step(step_program(args.model, args.precision, args.layout,
                                             args.batch), H200)
    times = read_log(args.log) if args.log else {}
    missing = [kernel.name for kernel in kernels if times and kernel.name not in times]
    if missing:
        print(f"warning: {len(missing)} kernel(s) not in the log (another program or "
              f"schedule?): {', '.join(missing[:8])}", file=sys.stderr)
    rows = [Row(kernel.name, kernel_bytes(kernel, bound), kernel.flops, kernel.schedule,
                notes(kernel, bound, H200), times.get(kernel.name))
            for kernel in kernels if args.only in kernel.schedule
            and not (args.skip and args.skip in kernel.schedule)]
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for kernel in kernels:
            unit, _ = unit_of(kernel, DIALECTS["cuda"])
            with open(os.path.join(args.out, f"{kernel.name}.cu"), "w") as handle:
                handle.write(f"// {kernel.schedule}\n{unit.source}")
    rate = args.bandwidth * 1e12

    def bound_ms(row: Row) -> float:
        return row.bytes / rate * 1e3

    def lost(row: Row) -> float:
        return (row.ms - bound_ms(row)) if row.ms is not None else -bound_ms(row)

    rows.sort(key=lost, reverse=True)
    shown = rows[:args.top] if args.top else rows
    print(f"{'kernel':24s} {'MB':>8s} {'GFLOP':>8s} {'bound ms':>8s} {'ms':>7s} {'GB/s':>7s} "
          f"{'lost ms':>8s}  schedule / notes")
    for row in shown:
        measured = f"{row.ms:7.3f}" if row.ms is not None else "      -"
        speed = f"{row.bytes / (row.ms * 1e-3) / 1e9:7.0f}" if row.ms else "      -"
        print(f"{row.name:24s} {row.bytes / 1e6:8.1f} {row.flops / 1e9:8.2f} "
              f"{bound_ms(row):8.3f} {measured} {speed} {lost(row):8.3f}  {row.schedule[:110]}")
        for note in row.notes:
            print(f"{'':24s} - {note}")
    timed = [row for row in rows if row.ms is not None]
    if timed:
        floor = min(row.ms for row in timed)
        print(f"{len(timed)} kernels timed: {sum(r.ms for r in timed):.3f} ms measured, "
              f"{sum(bound_ms(r) for r in timed):.3f} ms at {args.bandwidth} TB/s (the "
              f"fastest kernel: {floor:.3f} ms)")
    else:
        print(f"{len(rows)} kernels: {sum(bound_ms(r) for r in rows):.3f} ms at "
              f"{args.bandwidth} TB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
