"""The ``reference`` pseudo-device: NumPy, for the Tile reference interpreter.

It is always present. Its buffers are host memory (so a program's inputs and outputs move
through the same contract as on real devices), but it compiles nothing: the reference
interpreter (``gingham.tile``) runs programs by evaluating them with NumPy.

    >>> dev = get_device("reference")
    >>> buf = dev.alloc(16); dev.copy_in(buf, np.ones(4, np.float32))
    >>> dev.compile("...", "f")     # raises DeviceError: it runs programs by interpretation
"""

from __future__ import annotations

import numpy as np

from gingham.devices.base import Buffer, Device, DeviceInfo, Kernel, host_buffer
from gingham.devices.cpu import host_caches, host_memory_bytes
from gingham.errors import DeviceError

_NOT_COMPILED = ("the reference device runs Tile programs by interpretation with NumPy; "
                 "it cannot compile or launch kernels (use 'cpu', 'opencl:N' or 'cuda:N')")


class ReferenceDevice(Device):
    """Host buffers plus a clear refusal to compile; see the module docstring."""

    def __init__(self) -> None:
        caches = host_caches()
        super().__init__(DeviceInfo(
            id="reference", name="NumPy reference interpreter", vendor="NumPy",
            kind="reference", dialect=None, compute_units=1,
            global_memory_bytes=host_memory_bytes(), local_memory_bytes=0,
            max_work_group_size=1, simd_width=1, cache_line_bytes=caches["line"],
            l1_bytes=caches["l1"], l2_bytes=caches["l2"], l3_bytes=caches["l3"],
            driver_version=f"numpy {np.__version__}", compiler_version=""))

    def compile(self, source: str, entry: str) -> Kernel:
        raise DeviceError(_NOT_COMPILED)

    def _alloc(self, nbytes: int) -> Buffer:
        return host_buffer(self, nbytes)

    def _copy_in(self, buffer: Buffer, array: np.ndarray) -> None:
        buffer.handle[:array.nbytes] = array.reshape(-1).view(np.uint8)

    def _copy_out(self, buffer: Buffer, array: np.ndarray) -> None:
        array.reshape(-1).view(np.uint8)[:] = buffer.handle[:array.nbytes]

    def _compiler_identity(self) -> tuple:
        return ()

    def _build(self, source: str, entry: str) -> bytes:
        raise DeviceError(_NOT_COMPILED)

    def _load(self, binary: bytes, entry: str, key: str) -> Kernel:
        raise DeviceError(_NOT_COMPILED)

    def _launch(self, kernel, args, global_size, local_size, shared_bytes) -> None:
        raise DeviceError(_NOT_COMPILED)

    def _synchronize(self) -> None:
        pass


def discover() -> list[Device]:
    """[the reference device]: it needs nothing but NumPy."""
    return [ReferenceDevice()]
