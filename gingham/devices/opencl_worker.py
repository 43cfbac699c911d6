"""A compile worker process for one OpenCL device: builds program sources, returns binaries.

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

* on start, the worker sends ``("ready", {"pid", "seconds", "import", "find", "context",
  "device"})`` once its context exists (seconds in all, and spent importing pyopencl,
  finding the device, creating the context), or ``("failed", message)`` and exits;
* ``("build", source, options)`` is answered ``("built", binary, seconds)`` or
  ``("rejected", build_log, seconds)``;
* end of input: the worker exits (so it never outlives its parent).

On NVIDIA the binary is PTX, which the parent's ``clBuildProgram`` compiles to device code
again; the worker's own build left that device code in the driver's disk cache
(``CUDA_CACHE_PATH``, shared by the processes of a user), so the parent's load finds it
(measured: 0.2 ms a piece; 0.1-0.15 s each, mostly serialised, with ``CUDA_CACHE_DISABLE=1``).
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import sys
import time
import warnings
from typing import Any, BinaryIO

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


def build(cl, context, device, source: str, options: str) -> tuple[bool, bytes | str]:
    """(True, binary) or (False, build log) for one program source."""
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
    return True, bytes(program.get_info(cl.program_info.BINARIES)[0])


def serve(target: dict[str, Any], requests: BinaryIO, replies: BinaryIO,
          build_one=build) -> None:
    """Answer build requests until the input ends (``build_one`` is replaceable for tests)."""
    times = [time.perf_counter()]
    try:
        import pyopencl as cl

        times.append(time.perf_counter())
        device = find_device(target)
        times.append(time.perf_counter())
        context = cl.Context([device])
        times.append(time.perf_counter())
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
        send(replies, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    send(replies, ("ready", {"pid": os.getpid(), "seconds": times[-1] - times[0],
                             "import": times[1] - times[0], "find": times[2] - times[1],
                             "context": times[3] - times[2], "device": device.name.strip()}))
    while True:
        try:
            request = receive(requests)
        except EOFError:
            return
        _, source, options = request
        began = time.perf_counter()
        ok, payload = build_one(cl, context, device, source, options)
        send(replies, ("built" if ok else "rejected", payload, time.perf_counter() - began))


def main(argv: list[str] | None = None, build_one=build) -> None:
    """Serve the device named by the JSON in ``argv[0]`` on stdin / stdout."""
    argv = sys.argv[1:] if argv is None else argv
    target = json.loads(argv[0])
    # The protocol keeps the real stdout; anything printed later (a driver's messages) goes
    # to stderr, where it cannot corrupt a reply.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(target, sys.stdin.buffer, replies, build_one)


if __name__ == "__main__":
    # Run as a script: its directory (gingham/devices, holding cuda.py and opencl.py) must
    # not shadow installed packages.
    sys.path.pop(0)
    main()
