"""NVRTC time, source size and registers of the CUDA kernels of a model's training step, for an
H200's description: no GPU needed, only NVRTC (``cuda-bindings`` and ``nvidia-cuda-nvrtc``
importable).

    PYTHONPATH=$PWD:/path/to/nvrtc/site python3 tools/nvrtc_kernels.py resnet9 \
        [--precision bf16] [--layout NHWC] [--batch 512] [--only tensor-core] [--out DIR]
        [--pieces 48] [--nvrtc "--gpu-architecture=sm_90a -minimal"]

It traces one step (``nn.training.train_step``, SGD with Nesterov momentum, ``autocast`` in
the precision), lowers its kernels as an H200 does (``gingham.tune.described.H200``: its
description and the device model measured on one, so the schedules are the H200's), renders
each distinct one as ``gingham`` does (``dedupe.unit_of``) and compiles those whose schedule
contains ``--only`` with NVRTC (``--gpu-architecture=sm_90a --ptxas-options=-v``), one at a
time: seconds, characters, registers and spilled bytes per kernel, slowest first. ``--out``
keeps the sources; ``--pieces N`` compiles them instead in N programs of about equal weight,
as a first run with N / 3 compile jobs groups them. What NVRTC spends is the optimiser and
ptxas on the unrolled code (add ``--time=FILE`` to ``--nvrtc`` to see the phases), not the
parsing.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

os.environ.setdefault("GINGHAM_TUNE_MEASURE", "0")

import gingham  # noqa: E402
from gingham.bench import model as bench_model  # noqa: E402
from gingham.compiler.dedupe import unit_of  # noqa: E402  (before codegen: they import each other)
from gingham.codegen.c_family import DIALECTS  # noqa: E402
from gingham.compiler import lower_program, rewrite_program  # noqa: E402
from gingham.devices.base import DeviceInfo  # noqa: E402
from gingham.tune.described import H200  # noqa: E402  (lowered as an H200 lowers)

PRECISIONS = bench_model.PRECISIONS  # --precision -> the step's autocast dtype


def step_program(model: str, precision: str, layout: str, batch: int):
    """The bound Tile program of one training step (traced, not run), before any of
    ``compile_program``'s rewrites (:func:`lower_step` applies them)."""
    spec = bench_model.MODELS[model]
    step = spec.gingham_step("cpu", layout, precision)
    x, y = bench_model.synthetic_batches(spec, batch, layout)[0]
    return bench_model.trace_step(step, gingham.tensor(x, device="cpu"),
                                  gingham.tensor(y, device="cpu"))


def lower_step(bound, info: DeviceInfo) -> tuple[list, object]:
    """The kernels ``gingham.compiler.compile_program`` lowers for ``bound`` on a device that
    ``info`` describes, named as it names them (``k91_T240``), and the program they compute
    (after its rewrites)."""
    bound = rewrite_program(bound)
    return lower_program(bound, info), bound


def distinct_units(kernels: list, only: str = "") -> list[tuple[object, str, object]]:
    """(source unit, schedule, rendering) of each distinct CUDA kernel among ``kernels`` whose
    schedule contains ``only``, rendered as ``gingham`` renders them (``dedupe.unit_of``; the
    rendering is for assembling several into one program)."""
    units = {}
    for kernel in kernels:
        if only in kernel.schedule:
            unit, part = unit_of(kernel, DIALECTS["cuda"])
            units.setdefault(unit.entry, (unit, kernel.schedule, part))
    return list(units.values())


def nvrtc_build(source: str, options: list[str]) -> tuple[float, str]:
    from cuda.bindings import nvrtc

    program = nvrtc.nvrtcCreateProgram(source.encode(), b"k.cu", 0, [], [])[1]
    start = time.perf_counter()
    (status,) = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
    seconds = time.perf_counter() - start
    size = nvrtc.nvrtcGetProgramLogSize(program)[1]
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(program, log)
    nvrtc.nvrtcDestroyProgram(program)
    if int(status) != 0:
        raise RuntimeError(log.decode(errors="replace")[:2000])
    return seconds, log.decode(errors="replace")


def compile_in_pieces(kernels: list, only: str, pieces: int, options: list[str]) -> int:
    """NVRTC seconds of the distinct kernels among ``kernels`` whose schedule contains
    ``only``, assembled into ``pieces`` programs of about equal estimated cost (what
    ``UnitBuilder`` does with every unit known at once: ``PIECES_PER_JOB`` per compile job),
    compiled one program at a time."""
    from gingham.codegen.c_family import assemble
    from gingham.devices.base import split_evenly

    units = distinct_units(kernels, only)
    groups = split_evenly(units, pieces, weight=lambda found: found[0].cost)
    seconds = [nvrtc_build(assemble([part for _, _, part in group], DIALECTS["cuda"]),
                           options)[0] for group in groups]
    print(f"{len(units)} kernels in {len(groups)} pieces: NVRTC {sum(seconds):.2f} s in all, "
          f"longest piece {max(seconds, default=0):.2f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?", default="resnet9")
    parser.add_argument("--precision", default="bf16", choices=sorted(PRECISIONS))
    parser.add_argument("--layout", default="NHWC", choices=["NHWC", "NCHW"])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--only", default="tensor-core",
                        help="compile the kernels whose schedule contains this ('' for all)")
    parser.add_argument("--out", help="a directory to write each compiled source to")
    parser.add_argument("--nvrtc", default="--gpu-architecture=sm_90a --ptxas-options=-v")
    parser.add_argument("--pieces", type=int, default=0,
                        help="instead, compile them in this many programs of about equal "
                             "weight, as a first run groups them (48: 16 compile jobs)")
    args = parser.parse_args()
    bound = step_program(args.model, args.precision, args.layout, args.batch)
    start = time.perf_counter()
    kernels, _ = lower_step(bound, H200)
    print(f"lowered {len(kernels)} kernels in {time.perf_counter() - start:.1f} s")
    if args.pieces:
        return compile_in_pieces(kernels, args.only, args.pieces, args.nvrtc.split())
    rows = []
    for unit, schedule, _ in distinct_units(kernels, args.only):
        seconds, log = nvrtc_build(unit.source, args.nvrtc.split())
        regs = ",".join(re.findall(r"Used (\d+) registers", log)) or "?"
        spill = ",".join(re.findall(r"(\d+) bytes spill stores", log)) or "?"
        rows.append((seconds, len(unit.source), regs, spill, schedule))
        print(f"{seconds:6.2f} s {len(unit.source):7d} chars {regs:>4s} regs, {spill} B spilled  "
              f"{schedule[:150]}", flush=True)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, f"{unit.entry}.cu"), "w") as handle:
                handle.write(f"// {schedule}\n{unit.source}")
    print(f"{len(rows)} kernels, NVRTC {sum(r[0] for r in rows):.1f} s in all, slowest first:")
    for seconds, chars, regs, spill, schedule in sorted(rows, reverse=True)[:10]:
        print(f"{seconds:6.2f} s {chars:7d} chars  {schedule[:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
