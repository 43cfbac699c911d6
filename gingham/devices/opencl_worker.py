"""A compile worker process for one OpenCL device (or for NVRTC): builds sources, returns binaries.

Run as a script (never imported by a process that uses the device), so that it starts with
nothing but the standard library and pyopencl, and never as a fork of a process whose OpenCL
driver is already initialised::

    python3 gingham/devices/opencl_worker.py '{"platform": "NVIDIA CUDA", "device": "NVIDIA H200",
                                              "index": 0}'

Why processes: NVIDIA's OpenCL driver serialises ``clBuildProgram`` across the threads of one
process, so a training step's many kernels build one after another however many threads ask;
separate processes, each with its own context on the same device, build at once.

The protocol is pickled messages with an 8-byte length prefix on stdin (requests) and on the
original stdout (replies; whatever the driver prints goes to stderr instead):

* on start, the worker imports pyopencl, finds its device and sends ``("found", pid)``;
  then it waits for ``("context",)`` before it creates its context (the parent lets one
  worker at a time create one: see ``opencl_build.CONTEXTS_AT_ONCE``), and sends
  ``("ready", {"pid", "seconds", "import", "find", "waited", "context", "device",
  "context_span"})`` once the context exists (seconds in all, and spent importing
  pyopencl, finding the device, waiting for the go, creating the context; the span is the
  context's creation in ``time.time()`` seconds, comparable between processes), or
  ``("failed", message)`` and exits;
* ``("build", source, options)`` is answered ``("built", binary, seconds)`` or
  ``("rejected", build_log, seconds)``; ``("build", source, options, samples)`` (samples:
  ``(entry, global_size, local_size, buffer_bytes)`` tuples, see :func:`run_samples`) runs
  those kernels once on the built program before it takes the binary;
* ``("load", binary, options)`` builds a program from a binary that a build returned, as
  the parent will load it, and is answered ``("loaded", "", seconds)`` or ``("rejected",
  build_log, seconds)``: where the driver compiles a binary again (NVIDIA's binaries are
  PTX), the device code then waits in the driver's disk cache for the parent's load;
* ``("check", threads)`` runs :func:`builds_serialise` here (so that its builds hold up
  nothing of the parent's: on NVIDIA a build in the parent delayed its launches) and is
  answered ``("checked", (serialised, ratio), seconds)``, or ``("rejected", message,
  seconds)`` when a probe did not build;
* end of input: the worker exits (so it never outlives its parent).

The same script compiles CUDA sources with NVRTC for a CUDA device (``gingham.devices.cuda``)
when its target says ``{"compiler": "nvrtc", "cubin": true}``: the worker imports NVRTC
instead of pyopencl, needs no context (its ``ready`` follows the go at once) and answers
``("build", source, options)`` (options: NVRTC's, separated by spaces) with the cubin, or the
PTX when ``cubin`` is false. NVRTC compiles on threads of one process, but far from as fast
as in processes: on the H200's 16-core host the 112 programs of an fp32 ResNet-9 step took
2.07 s on 16 threads and 1.15 s on 16 processes (``tools/nvrtc_scale.py``; each 0.1 s
alone).

On NVIDIA the binary is PTX, which the parent's ``clBuildProgram`` compiles to device code
again; the worker's own build left that device code in the driver's disk cache
(``CUDA_CACHE_PATH``, shared by the processes of a user), so the parent's load finds it
(measured: 0.2 ms a piece; 0.1-0.15 s each, mostly serialised, with ``CUDA_CACHE_DISABLE=1``).
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import struct
import sys
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Callable, Sequence

_HEADER = struct.Struct("<Q")


def send(stream: BinaryIO, message: Any) -> None:
    """Write one length-prefixed pickled message and flush it."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    """Read one message; EOFError when the other side has closed the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the stream ended")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream ended inside a message")
    return pickle.loads(data)


def find_device(target: dict[str, Any]):
    """The pyopencl device that ``target`` names: the platform's name, the device's name and
    its index among that platform's devices (checked against each other, so that a different
    set of ICDs in this process is noticed instead of building for the wrong device)."""
    import pyopencl as cl

    for platform in cl.get_platforms():
        if platform.name.strip() != target["platform"]:
            continue
        devices = platform.get_devices()
        index = int(target["index"])
        if index < len(devices) and devices[index].name.strip() == target["device"]:
            return devices[index]
    raise LookupError(f"no OpenCL device {target['device']!r} at index {target['index']} of "
                      f"platform {target['platform']!r} in the worker process")


def build(cl, context, device, source: str, options: str,
          samples: Sequence[tuple] = ()) -> tuple[bool, bytes | str]:
    """(True, binary) or (False, build log) for one program source; with ``samples``, the
    binary is taken after :func:`run_samples`."""
    program = cl._cl._Program(context, source)  # noqa: SLF001 - no pyopencl disk cache
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program.build(options.encode(), [device])
    except cl.Error as exc:
        try:
            log = program.get_build_info(device, cl.program_build_info.LOG)
        except cl.Error:
            log = ""
        return False, log or str(exc)
    if samples:
        run_samples(cl, context, device, program, samples)
    return True, bytes(program.get_info(cl.program_info.BINARIES)[0])


def program_from_binary(cl, context, device, binary: bytes, options: str):
    """The program built from ``binary`` (what :func:`build` returned); raises ``cl.Error``.
    The parent's load of a cached binary and a worker's ``load`` request both build it here,
    with the same options: where the driver compiles a binary again (NVIDIA's PTX), the
    worker's compile is then the one the parent's load finds in the driver's disk cache."""
    program = cl.Program(context, [device], [binary])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program.build(options, [device])
    return program


def load(cl, context, device, binary: bytes, options: str) -> tuple[bool, str]:
    """(True, "") or (False, build log) for :func:`program_from_binary`."""
    try:
        program_from_binary(cl, context, device, binary, options)
    except cl.Error as exc:
        return False, str(exc)
    return True, ""


#: PoCL's CPU drivers keep one work-group function per launch class: the work-group size,
#: a global offset of zero, and whether the grid's widest axis is under this many work-items
#: ("smallgrid"; later PoCL versions also tell buffers that do not overlap and buffers under
#: 4 GiB). Each is generated at the class's first launch and kept in the program, whose
#: binary then carries it.
POCL_SMALL_GRID = 65535


def sample_grid(global_size: Sequence[int], local_size: Sequence[int] | None
                ) -> tuple[int, ...]:
    """The smallest grid of the same launch class as ``global_size`` in work-groups of
    ``local_size``: one work-group, or where the real grid is not small, the narrowest grid
    that is not, along its widest axis (all of it without a work-group size, which the driver
    would choose by the grid). Sampling a step's kernels then costs a fraction of the step.

        >>> sample_grid((8192,), (64,)), sample_grid((262144,), (256,))
        ((64,), (65536,))
    """
    if local_size is None:
        return tuple(global_size)
    grid = list(local_size)
    widest = max(range(len(global_size)), key=lambda axis: global_size[axis])
    if global_size[widest] >= POCL_SMALL_GRID:
        step = local_size[widest]
        grid[widest] = min(global_size[widest], -(-POCL_SMALL_GRID // step) * step)
    return tuple(grid)


def run_samples(cl, context, device, program, samples: Sequence[tuple]) -> None:
    """Launch each ``(entry, global_size, local_size, buffer_bytes)`` kernel of ``program``
    once on zeroed buffers of those sizes, on a :func:`sample_grid`: the driver generates
    the code it would otherwise generate at the parent's first launch of the kernel (PoCL: 15
    of a fresh story-net step's 38.7 s, one kernel after another). Generated kernels are safe
    on any data (gathers test their indices, loops have fixed bounds). Nothing here is
    needed for a correct binary, so a launch the driver refuses is skipped."""
    import numpy as np

    queue = cl.CommandQueue(context, device)
    zero = np.zeros(1, np.uint8)
    for entry, global_size, local_size, buffer_bytes in samples:
        buffers = []
        try:
            kernel = cl.Kernel(program, entry)
            for nbytes in (max(1, int(n)) for n in buffer_bytes):
                buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, nbytes)
                buffers.append(buffer)
                cl.enqueue_fill_buffer(queue, buffer, zero, 0, nbytes)
            kernel.set_args(*buffers)
            cl.enqueue_nd_range_kernel(queue, kernel, sample_grid(global_size, local_size),
                                       None if local_size is None else tuple(local_size))
        except cl.Error:
            pass  # refused (out of resources, say): the binary is right without it
        finally:
            try:
                queue.finish()  # nothing may still use the buffers
            except cl.Error:
                pass
            for buffer in buffers:
                buffer.release()


# ---- does this driver serialise builds? -------------------------------------------------

_PROBE_SOURCE = """
__kernel void probe_{tag}(__global float* out, __global const float* in, int n) {{
    int i = get_global_id(0);
    if (i >= n) return;
    float acc = {tag}.0f;
    #pragma unroll
    for (int k = 0; k < 64; ++k) {{
        acc = acc * in[(i + k) % n] + (float)k;
        acc = acc > 1.0f ? acc * 0.5f : acc + in[(i * 3 + k) % n];
    }}
    out[i] = acc;
}}
"""

_probe_counter = itertools.count()


def builds_serialise(build: Callable[[str], Any], threads: int = 2,
                     abandon: Callable[[], bool] = lambda: False) -> tuple[bool, float] | None:
    """(whether concurrent builds in this process run one at a time, the measured ratio), or
    None when ``abandon()`` said so before a build or at the end (something else built
    meanwhile: the timing is worthless, and a build of the check's no longer holds it up).

    One build first (the compiler's one-time start-up: on NVIDIA about a second, which every
    concurrent build would wait for alike, hiding the lock), then ``threads`` distinct small
    programs one after another, then ``threads`` others at once on as many threads. The
    ratio is the second time over the first: about 1/threads when the driver builds in
    parallel, about 1 when it serialises; serialised means above the midpoint. Every source
    carries a fresh number, so no driver cache (NVIDIA's keys on the source) answers instead
    of the compiler. Measured on an H200 with NVIDIA's driver: 1.11 with 2 threads (0.86
    with 4, 1.10 with 8), in 1.7 s. Example::

        serialised, ratio = builds_serialise(lambda src: build_program(ctx, src))
    """
    threads = max(2, threads)
    base = (os.getpid() % 10000) * 1000 + next(_probe_counter) * (2 * threads + 1)
    sources = [_PROBE_SOURCE.format(tag=base + i) for i in range(2 * threads + 1)]
    one_by_one = 0.0
    for source in sources[:threads + 1]:
        if abandon():
            return None
        start = time.perf_counter()
        build(source)
        if source is not sources[0]:  # the first carries the compiler's start-up
            one_by_one += time.perf_counter() - start
    if abandon():
        return None
    with ThreadPoolExecutor(threads, thread_name_prefix="gingham-build-check") as pool:
        start = time.perf_counter()
        list(pool.map(build, sources[threads + 1:]))
        at_once = time.perf_counter() - start
    if abandon():
        return None
    ratio = at_once / max(one_by_one, 1e-9)
    return ratio > (1 + 1 / threads) / 2, ratio


def nvrtc_module():
    """cuda-python's NVRTC bindings (``cuda.bindings`` from cuda-python 12.6, ``cuda`` before)."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        from cuda import nvrtc  # type: ignore[no-redef]
    return nvrtc


class NVRTCCallFailed(RuntimeError):
    """An NVRTC call other than the compile itself failed (``status``: its nvrtcResult)."""

    def __init__(self, call: str, status) -> None:
        self.call, self.status = call, status
        super().__init__(f"{call} failed: {status}")


def nvrtc_build(nvrtc, source: str, options: str, cubin: bool,
                name: str = "gingham.cu") -> tuple[bool, bytes | str]:
    """(True, cubin or PTX) or (False, NVRTC's log) for one CUDA source, compiled with
    ``options`` (NVRTC's, separated by spaces); ``name`` is the file name the log cites.
    The one NVRTC compile of the package: a worker's and the CUDA device's own. Raises
    :class:`NVRTCCallFailed` when another NVRTC call fails."""
    status, program = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if int(status) != 0:
        raise NVRTCCallFailed("nvrtcCreateProgram", status)
    try:
        flags = [option.encode() for option in options.split()]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(flags), flags)
        if int(status) != 0:
            return False, _nvrtc_log(nvrtc, program) or str(status)
        what = "CUBIN" if cubin else "PTX"
        status, size = getattr(nvrtc, f"nvrtcGet{what}Size")(program)
        if int(status) != 0:
            raise NVRTCCallFailed(f"nvrtcGet{what}Size", status)
        binary = b" " * int(size)  # NVRTC fills this buffer in place
        (status,) = getattr(nvrtc, f"nvrtcGet{what}")(program, binary)
        if int(status) != 0:
            raise NVRTCCallFailed(f"nvrtcGet{what}", status)
        return True, binary
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _nvrtc_log(nvrtc, program) -> str:
    """The program's compile log, or "" when NVRTC cannot give it."""
    status, size = nvrtc.nvrtcGetProgramLogSize(program)
    if int(status) != 0:
        return ""
    log = b" " * int(size)
    (status,) = nvrtc.nvrtcGetProgramLog(program, log)
    return log.rstrip(b"\0 ").decode(errors="replace") if int(status) == 0 else ""


def _wait_for_go(requests: BinaryIO, replies: BinaryIO) -> bool:
    """Wait for the parent's ``("context",)``; False when the input ended first (the pool
    closed before this worker's turn) or another message came (reported as ``failed``)."""
    try:
        go = receive(requests)
    except EOFError:
        return False
    if go != ("context",):
        send(replies, ("failed", f"expected the go for the context, got {go!r}"))
        return False
    return True


def _answer(requests: BinaryIO, replies: BinaryIO,
            handle: Callable[[tuple], tuple[str, Any]]) -> None:
    """Answer each request with ``handle``'s (kind, payload) and the seconds it took, until
    the input ends."""
    while True:
        try:
            request = receive(requests)
        except EOFError:
            return
        began = time.perf_counter()
        try:
            kind, payload = handle(request)
        except Exception:  # noqa: BLE001 - a bug here: the parent reports it, not a dead worker
            kind, payload = "rejected", f"the compile worker failed:\n{traceback.format_exc()}"
        send(replies, (kind, payload, time.perf_counter() - began))


def serve_nvrtc(target: dict[str, Any], requests: BinaryIO, replies: BinaryIO) -> None:
    """:func:`serve` for NVRTC: the same protocol, no device and no context."""
    started = time.perf_counter()
    try:
        nvrtc = nvrtc_module()
        nvrtc.nvrtcVersion()  # loads the library now, not at the first build
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
        send(replies, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    loaded = time.perf_counter()
    send(replies, ("found", os.getpid()))
    if not _wait_for_go(requests, replies):
        return
    now = time.perf_counter()
    send(replies, ("ready", {"pid": os.getpid(), "seconds": now - started,
                             "import": loaded - started, "find": 0.0, "waited": now - loaded,
                             "context": 0.0, "context_span": (time.time(), time.time()),
                             "device": "NVRTC"}))
    cubin = bool(target.get("cubin", True))

    def handle(request: tuple) -> tuple[str, Any]:
        if request[0] != "build":
            return "rejected", f"an NVRTC worker does not {request[0]!r}"
        try:
            ok, payload = nvrtc_build(nvrtc, request[1], request[2], cubin)
        except NVRTCCallFailed as exc:
            return "rejected", str(exc)
        return ("built" if ok else "rejected"), payload

    _answer(requests, replies, handle)


def serve(target: dict[str, Any], requests: BinaryIO, replies: BinaryIO,
          build_one=build) -> None:
    """Answer build requests until the input ends (``build_one`` is replaceable for tests)."""
    if target.get("compiler") == "nvrtc":
        serve_nvrtc(target, requests, replies)
        return
    times = [time.perf_counter()]
    try:
        import pyopencl as cl

        times.append(time.perf_counter())
        device = find_device(target)
        times.append(time.perf_counter())
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
        send(replies, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    send(replies, ("found", os.getpid()))
    if not _wait_for_go(requests, replies):
        return
    times.append(time.perf_counter())
    began = time.time()
    try:
        context = cl.Context([device])
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
        send(replies, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    times.append(time.perf_counter())
    send(replies, ("ready", {"pid": os.getpid(), "seconds": times[-1] - times[0],
                             "import": times[1] - times[0], "find": times[2] - times[1],
                             "waited": times[3] - times[2], "context": times[4] - times[3],
                             "context_span": (began, time.time()),
                             "device": device.name.strip()}))

    def probe(source: str) -> None:
        ok, log = build_one(cl, context, device, source, "")
        if not ok:
            raise RuntimeError(f"a probe did not build: {log}")

    def handle(request: tuple) -> tuple[str, Any]:
        if request[0] == "load":
            ok, log = load(cl, context, device, request[1], request[2])
            return ("loaded" if ok else "rejected"), log
        if request[0] == "check":
            try:
                return "checked", builds_serialise(probe, threads=int(request[1]))
            except Exception as exc:  # noqa: BLE001 - reported to the parent
                return "rejected", f"{type(exc).__name__}: {exc}"
        _, source, options, *samples = request
        ok, payload = build_one(cl, context, device, source, options, *samples)
        return ("built" if ok else "rejected"), payload

    _answer(requests, replies, handle)


def main(argv: list[str] | None = None, build_one=build) -> None:
    """Serve the device named by the JSON in ``argv[0]`` on stdin / stdout."""
    argv = sys.argv[1:] if argv is None else argv
    target = json.loads(argv[0])
    # The protocol keeps the real stdout; anything printed later (a driver's messages) goes
    # to stderr, where it cannot corrupt a reply.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        serve(target, sys.stdin.buffer, replies, build_one)
    except BrokenPipeError:
        # The parent stopped listening (it exited, or closed the pool while this worker was
        # still starting): nobody wants the answer. Exit at once and quietly; flushing the
        # closed pipe at exit would raise again.
        os._exit(0)


if __name__ == "__main__":
    # Run as a script: its directory (gingham/devices, holding cuda.py and opencl.py) must
    # not shadow installed packages.
    sys.path.pop(0)
    main()
