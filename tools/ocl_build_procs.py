"""How an OpenCL driver builds many programs: in threads of one process, or in worker processes.

    python3 tools/ocl_build_procs.py --device opencl:0 [--model resnet9] [--jobs 16] \
        [--limit 16] [--phases threads:1,threads:16,procs:16,probe] \
        [--cache fresh,off] [--out DIR] [--split pieces|units] [--layout NCHW|NHWC]

The sources are the pieces gingham would build for one fp32 training step of ``--model`` on
the device (``compile_units``' split of the distinct kernels into 3 x ``--jobs`` pieces, each
assembled as gingham assembles it); ``--out`` keeps them, ``--sources DIR`` reads ``*.cl``
from a folder instead. Each phase runs in a fresh process (so that no phase finds another's
builds in the driver's cache), under each ``--cache`` setting:

* ``fresh``: ``CUDA_CACHE_PATH`` (``POCL_CACHE_DIR``) is a new empty folder: the driver's
  own binary cache starts cold;
* ``off``: ``CUDA_CACHE_DISABLE=1`` (``POCL_KERNEL_CACHE=0``): nothing is cached at all.

Phases:

* ``threads:T``: the first ``--limit`` pieces, built in this process on T threads;
* ``procs:P``: every piece, built by gingham's ``BuildPool`` (P worker processes, each with
  its own context, plus this process until the first is ready), then the binaries loaded
  here (``clCreateProgramWithBinary`` + build), the first half on one thread and the rest on
  P threads;
* ``each``: every source alone, one after another (``--split units``: every kernel): its
  build from source and the load of its binary, the slowest ``--top`` printed;
* ``probe``: ``builds_serialise``, the check behind ``GINGHAM_OPENCL_BUILD=auto``.

It prints what ``CL_PROGRAM_BINARIES`` holds (its first bytes) and the worker start-up
(spawn + import pyopencl + context). Finding on an H200 with NVIDIA's driver: see
``docs/opencl-builds.md``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("GINGHAM_TUNE_MEASURE", "0")
# This checkout's gingham, also in the phase processes (a script's sys.path[0] is tools/).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))


def step_sources(device_id: str, model: str, jobs: int, split: str = "pieces",
                 layout: str = "NCHW") -> list[tuple[str, str]]:
    """The piece sources gingham builds for one fp32 training step of ``model`` on the device,
    each with a file name; ``split="units"``: each distinct kernel assembled alone, named by
    its entry point."""
    from nvrtc_kernels import step_program  # tools/ is sys.path[0]

    from gingham.compiler import compile_program
    from gingham.devices import get_device
    from gingham.devices.base import split_evenly
    from gingham.devices.pieces import UnitBuilder

    device = get_device(device_id)
    captured = {"units": []}

    class Captured(Exception):
        pass

    class Capture:
        """Stands in for the device's unit builder: keeps the units, compiles nothing."""

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return False

        def add(self, unit):
            captured["units"].append(unit)

        def kernels(self):
            raise Captured

    def capture(assemble=None, jobs=None, eager=None):
        captured["assemble"] = assemble
        return Capture()

    device.unit_builder = capture
    bound = step_program(model, "fp32", layout, 512)
    try:
        compile_program(bound, device)
    except Captured:
        pass
    units = list({(u.entry, u.source): u for u in captured["units"]}.values())
    if split == "units":
        pieces = [[unit] for unit in units]
    else:
        pieces = split_evenly(units, UnitBuilder.PIECES_PER_JOB * jobs, weight=lambda u: u.cost)
    print(f"{len(units)} distinct kernels in {len(pieces)} pieces "
          f"({sum(len(u.source) for u in units)} chars)")
    return [(piece[0].entry if split == "units" else f"piece{index:03d}",
             captured["assemble"](piece)) for index, piece in enumerate(pieces)]


def _schedule_line(path: str) -> str:
    """The first schedule comment of an assembled source (what kind of kernel it is)."""
    with open(path) as handle:
        for line in handle:
            if line.startswith("// ") and not line.startswith("// generated"):
                return line[3:].strip()
    return "?"


def _cl_device(device_id: str):
    from gingham.devices import get_device

    return get_device(device_id).cl_device


def _build_here(cl, context, device, source: str) -> bytes:
    program = cl._cl._Program(context, source)  # noqa: SLF001 - no pyopencl disk cache
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program.build(b"", [device])
    return bytes(program.get_info(cl.program_info.BINARIES)[0])


def _load_here(cl, context, device, binary: bytes) -> None:
    program = cl._cl._Program(context, [device], [binary])  # noqa: SLF001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program.build(b"", [device])


def run_phase(phase: str, device_id: str, sources: list[str], limit: int,
              names: list[str] | None = None) -> dict:
    """One phase in this process; returns its figures."""
    import pyopencl as cl

    from gingham.devices.opencl_build import BuildPool, builds_serialise, target_of

    device = _cl_device(device_id)
    start = time.perf_counter()
    context = cl.Context([device])
    result = {"phase": phase, "context_s": time.perf_counter() - start}
    kind, _, rest = phase.partition(":")
    if kind == "threads":
        threads = int(rest)
        chosen = sources[:limit]
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            binaries = list(pool.map(lambda s: _build_here(cl, context, device, s), chosen))
        result.update(pieces=len(chosen), build_s=time.perf_counter() - start)
        result["binary_head"] = binaries[0][:96].decode("latin-1")
        result["binary_bytes"] = sum(len(b) for b in binaries)
    elif kind == "procs":
        workers = int(rest)
        pool = BuildPool(target_of(device), workers)
        start = time.perf_counter()
        pool.start()
        with ThreadPoolExecutor(workers) as threads:
            replies = list(threads.map(
                lambda s: pool.build(s, "", lambda: _build_here(cl, context, device, s)),
                sources))
        built = time.perf_counter() - start
        assert all(ok for ok, _ in replies), [r for ok, r in replies if not ok][:1]
        binaries = [payload for _, payload in replies]
        result.update(pieces=len(sources), build_s=built, workers_ready=pool.ready,
                      built_by_workers=pool.built_by_workers, built_here=pool.built_here,
                      worker_startup=[{k: round(v, 2) for k, v in w.startup.items()
                                       if k in ("seconds", "import", "find", "context")}
                                      for w in pool._workers])
        half = len(binaries) // 2
        start = time.perf_counter()
        for binary in binaries[:half]:
            _load_here(cl, context, device, binary)
        result["load_1thread_s"] = time.perf_counter() - start
        result["load_1thread_n"] = half
        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as threads:
            list(threads.map(lambda b: _load_here(cl, context, device, b), binaries[half:]))
        result["load_threads_s"] = time.perf_counter() - start
        result["load_threads_n"] = len(binaries) - half
        result["binary_head"] = binaries[0][:96].decode("latin-1")
        pool.close()
    elif kind == "each":
        # Every source alone, one after another: its build from source (front end + PTX to
        # device code) and the load of its binary (PTX to device code again where the
        # driver's cache is off), to find the sources that hold a first step up.
        rows = []
        for name, source in zip(names, sources):
            start = time.perf_counter()
            binary = _build_here(cl, context, device, source)
            built = time.perf_counter() - start
            start = time.perf_counter()
            _load_here(cl, context, device, binary)
            rows.append([name, round(built, 3), round(time.perf_counter() - start, 3),
                         len(source), len(binary)])
        result["each"] = sorted(rows, key=lambda row: -row[1])
        result["build_s"] = sum(row[1] for row in rows)
        result["load_s"] = sum(row[2] for row in rows)
    elif kind == "probe":
        for threads in (2, 4, 8):
            start = time.perf_counter()
            serial, ratio = builds_serialise(
                lambda s: _build_here(cl, context, device, s), threads)
            result[f"probe{threads}"] = {"serialised": serial, "ratio": round(ratio, 3),
                                         "seconds": round(time.perf_counter() - start, 3)}
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="opencl:0")
    parser.add_argument("--model", default="resnet9")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--limit", type=int, default=16,
                        help="pieces the threads phases build (the procs phases build all)")
    parser.add_argument("--phases", default="threads:1,threads:16,procs:16,probe")
    parser.add_argument("--cache", default="fresh,off")
    parser.add_argument("--sources", help="a folder of *.cl sources to build instead")
    parser.add_argument("--split", default="pieces", choices=["pieces", "units"],
                        help="the sources: the step's pieces, or each distinct kernel alone")
    parser.add_argument("--layout", default="NCHW", choices=["NCHW", "NHWC"])
    parser.add_argument("--top", type=int, default=15, help="rows of the each phase printed")
    parser.add_argument("--out", help="a folder to write the sources to")
    parser.add_argument("--phase", help=argparse.SUPPRESS)  # internal: run one phase here
    args = parser.parse_args()

    if args.phase:
        paths = sorted(glob.glob(os.path.join(args.sources, "*.cl")))
        sources = [open(p).read() for p in paths]
        names = [os.path.basename(p)[:-3] for p in paths]
        print("RESULT " + json.dumps(run_phase(args.phase, args.device, sources, args.limit,
                                               names)))
        return 0

    folder = args.sources
    if folder is None:
        folder = args.out or tempfile.mkdtemp(prefix="ocl-sources-")
        os.makedirs(folder, exist_ok=True)
        start = time.perf_counter()
        for name, source in step_sources(args.device, args.model, args.jobs, args.split,
                                         args.layout):
            with open(os.path.join(folder, f"{name}.cl"), "w") as handle:
                handle.write(source)
        print(f"lowered in {time.perf_counter() - start:.1f} s; sources in {folder}")
    for cache in args.cache.split(","):
        for phase in args.phases.split(","):
            env = dict(os.environ)
            if cache == "fresh":
                env["CUDA_CACHE_PATH"] = tempfile.mkdtemp(prefix="cuda-cache-")
                env["POCL_CACHE_DIR"] = tempfile.mkdtemp(prefix="pocl-cache-")
                env.pop("CUDA_CACHE_DISABLE", None)
            else:
                env["CUDA_CACHE_DISABLE"] = "1"
                env["POCL_KERNEL_CACHE"] = "0"
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, __file__, "--phase", phase, "--sources", folder,
                 "--device", args.device, "--limit", str(args.limit)],
                env=env, capture_output=True, text=True)
            lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if out.returncode or not lines:
                print(f"[{cache}] {phase}: failed ({out.returncode})\n{out.stderr[-2000:]}")
                continue
            result = json.loads(lines[-1][len("RESULT "):])
            result["process_s"] = round(time.perf_counter() - start, 2)
            head = result.pop("binary_head", None)
            each = result.pop("each", None)
            print(f"[{cache}] " + json.dumps(
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items()}),
                flush=True)
            if head is not None and cache == args.cache.split(",")[0]:
                print(f"    binary starts: {head[:96]!r}")
            for name, built, loaded, chars, binary_bytes in (each or [])[:args.top]:
                schedule = _schedule_line(os.path.join(folder, name + ".cl"))
                print(f"    {name}: build {built:.3f} s, load {loaded:.3f} s, {chars} chars, "
                      f"{binary_bytes} B binary; {schedule[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
