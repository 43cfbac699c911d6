"""Runs a bound Tile program on a device: the one place that maps a device id to an executor.

``device=None`` means the configured default device; ``"reference"`` is the NumPy interpreter.
Compiled executables are kept per (program signature, device), the most recently used
:data:`MAX_EXECUTABLES` of them; their binaries are cached on disk by the device.
"""

from __future__ import annotations

import numpy as np

from .tile.interpreter import run as interpret
from .tile.shapes import BoundProgram

from .lru import LRU

#: Executables kept in memory (each holds its device buffers); the least recently used go first.
MAX_EXECUTABLES = 256
_executables: LRU[tuple, object] = LRU(MAX_EXECUTABLES)


def execute(bound: BoundProgram, arrays: list[np.ndarray], device: str | None) -> list[np.ndarray]:
    """Run ``bound`` on ``arrays`` and return its outputs in header order."""
    from .devices import default_device_id, get_device

    device_id = device if device is not None else default_device_id()
    return executable(bound, get_device(device_id))(*arrays)


def executable(bound: BoundProgram, target):
    """The executable of ``bound`` on a device object (compiled on first use); on the
    reference device it interprets, behind the same ``run(buffers)`` interface."""
    from .compiler import compile_program

    key = (id(bound), target.id)
    entry = _executables.get(key)
    # The binding is kept beside its executable (whose own ``bound`` is the compiler's rewrite
    # of it): its id cannot be reused while the entry lives, and the check is exact.
    if entry is not None and entry[0] is bound:
        return entry[1]
    if target.info.dialect is None:
        exe = InterpretedExecutable(bound, target)
    else:
        exe = compile_program(bound, target)
    _executables[key] = (bound, exe)
    return exe


class InterpretedExecutable:
    """The reference interpreter with an executable's interface (buffers in, buffers out)."""

    def __init__(self, bound: BoundProgram, device) -> None:
        self.bound = bound
        self.device = device
        self.launches: list = []

    def run(self, inputs, fresh_outputs: bool = True, prefer=None):
        program = self.bound.program
        arrays = []
        for name, buffer in zip(program.input_names, inputs):
            array = np.empty(self.bound.shapes[name], self.bound.dtypes[name])
            if array.size:
                self.device.copy_out(buffer, array)
            arrays.append(array)
        env = interpret(self.bound, arrays)
        outputs = []
        for name in program.outputs:
            value = np.require(env[name], requirements="C")
            buffer = self.device.alloc(max(value.nbytes, 1))
            if value.size:
                self.device.copy_in(buffer, value)
            outputs.append(buffer)
        return outputs

    def __call__(self, *arrays):
        env = interpret(self.bound, list(arrays))
        return [np.array(env[name]) for name in self.bound.program.outputs]
