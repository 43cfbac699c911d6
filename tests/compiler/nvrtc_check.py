"""NVRTC without a GPU: build CUDA kernels for an H200 and read what ptxas says of each.

NVRTC needs no driver and no device (``pip install -e .[nvrtc]``: ``cuda-bindings`` and the
NVRTC library), so a machine without a GPU can still prove that the CUDA kernels gingham
generates compile, and check what ptxas reports per kernel: spills, and the warning that it
serialised a kernel's warpgroup products (C7515)::

    logs = build_for_h200(render_many(kernels, DIALECTS["cuda"]), "piece")
    logs["gk_3b67..."]   # ptxas's lines for that kernel
"""

from __future__ import annotations

import re

import pytest

#: What gingham's CUDA device passes beside its target on an H200 (NVRTC >= 12.4), with the
#: verbose ptxas log.
OPTIONS = ("--gpu-architecture=sm_90a", "-minimal", "-w", "--ptxas-options=-v")


def nvrtc():
    """cuda-bindings' NVRTC module, or skip the test (not installed, or no NVRTC library)."""
    module = pytest.importorskip("cuda.bindings.nvrtc",
                                 reason="NVRTC is needed: pip install -e .[nvrtc]")
    try:
        module.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - cuda-bindings without the NVRTC library
        pytest.skip(f"NVRTC is not loadable: {exc}")
    return module


def build_log(source: str, name: str) -> str:
    """ptxas's verbose log of ``source`` built for sm_90a; fails the test with NVRTC's log
    (the first 2000 characters) when NVRTC rejects the source."""
    lib = nvrtc()
    program = lib.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])[1]
    options = [option.encode() for option in OPTIONS]
    try:
        (status,) = lib.nvrtcCompileProgram(program, len(options), options)
        log = b" " * int(lib.nvrtcGetProgramLogSize(program)[1])
        lib.nvrtcGetProgramLog(program, log)
    finally:
        lib.nvrtcDestroyProgram(program)
    text = log.decode(errors="replace").rstrip("\x00 ")
    assert int(status) == 0, f"NVRTC rejected {name}:\n{text[:2000]}"
    return text


#: A ptxas line that names the kernel it is about: "Compiling entry function 'gk_1'",
#: "Function properties for gk_1", "(C7515) ... in the function 'gk_1' in line 90".
_NAMES = re.compile(r"(?:[Ff]unction '|Function properties for )(\w+)")


def build_for_h200(source: str, name: str) -> dict[str, str]:
    """:func:`build_log` split per kernel: {entry name: ptxas's lines about it}. A line that
    names no kernel (registers, spills, compile time) belongs to the one named last."""
    per_kernel: dict[str, list[str]] = {}
    current = None
    for line in build_log(source, name).splitlines():
        named = _NAMES.search(line)
        if named:
            current = named.group(1)
        if current is not None:
            per_kernel.setdefault(current, []).append(line)
    return {entry: "\n".join(lines) for entry, lines in per_kernel.items()}


def spilled_bytes(lines: str) -> int:
    """Bytes a kernel's spill stores write, from its ptxas lines."""
    return sum(int(n) for n in re.findall(r"(\d+) bytes spill stores", lines))
