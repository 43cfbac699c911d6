"""Runs a bound Tile program on a device: the one place that maps a device id to an executor.

``device=None`` means the configured default device; ``"reference"`` is the NumPy interpreter.
Compiled executables are kept per (program signature, device) for the life of the process;
their binaries are cached on disk by the device.
"""

from __future__ import annotations

import numpy as np

from .tile.interpreter import run as interpret
from .tile.shapes import BoundProgram

_executables: dict[tuple, object] = {}


def execute(bound: BoundProgram, arrays: list[np.ndarray], device: str | None) -> list[np.ndarray]:
    """Run ``bound`` on ``arrays`` and return its outputs in header order."""
    from .devices import default_device_id, get_device

    device_id = device if device is not None else default_device_id()
    if device_id == "reference":
        env = interpret(bound, arrays)
        return [np.array(env[name]) for name in bound.program.outputs]
    target = get_device(device_id)
    if target.info.dialect is None:
        env = interpret(bound, arrays)
        return [np.array(env[name]) for name in bound.program.outputs]
    return executable(bound, target)(*arrays)


def executable(bound: BoundProgram, target):
    """The compiled executable of ``bound`` on a device object (compiled on first use)."""
    from .compiler import compile_program

    key = (id(bound), target.id)
    exe = _executables.get(key)
    if exe is None or exe.bound is not bound:  # ids are reused once a binding is collected
        exe = compile_program(bound, target)
        _executables[key] = exe
    return exe
