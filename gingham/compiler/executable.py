"""A compiled program: kernels in order, buffers planned, ready to replay on its device.

    exe = compile_program(bound, get_device("cpu"))
    outputs = exe(a, b)                  # copy in, run, copy out
    buffers = exe.run([buf_a, buf_b])    # device-resident: no copies at all
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import debug_print, get_config
from ..devices.base import Buffer, Device, Kernel, LaunchSpec, Slot
from ..tile.dtypes import DTYPES
from ..tile.shapes import BoundProgram
from . import kernel_ir as k


@dataclass
class Launch:
    kernel: Kernel
    name: str
    args: list[str]  # tensor (buffer) names in parameter order
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    shared_bytes: int = 0
    schedule: str = ""
    flops: int = 0


def scratch_bytes(kernels: Sequence[k.Kernel]) -> dict[str, int]:
    """The bytes of each scratch buffer (:class:`~.kernel_ir.Scratch`) of ``kernels``."""
    return {s.name: s.size * np.dtype(DTYPES[s.dtype]).itemsize
            for kernel in kernels for s in kernel.scratch}


def buffer_bytes(bound: BoundProgram, scratch: dict[str, int], name: str) -> int:
    """The bytes of the buffer an executable of ``bound`` gives ``name``: a scratch buffer
    (sizes from :func:`scratch_bytes`) or a tensor of ``bound``; at least 1."""
    if name in scratch:
        return max(1, scratch[name])
    return max(1, math.prod(bound.shapes[name]) * bound.dtypes[name].itemsize)


class Executable:
    """Kernels and a buffer plan for one bound program on one device.

    Intermediate buffers are allocated once and reused by every run; buffers whose lifetimes
    do not overlap share memory. Outputs live in buffers owned by the executable and are
    overwritten by the next run (copy them out or use ``__call__``). ``scratch`` names the
    launch arguments that are no tensor (a split-K contraction's partial sums), with their
    sizes in bytes: they are planned like intermediates.
    """

    def __init__(self, bound: BoundProgram, device: Device, launches: list[Launch],
                 aliases: dict[str, str], source: str,
                 scratch: dict[str, int] | None = None) -> None:
        self.bound = bound
        self.device = device
        self.launches = launches
        self.aliases = aliases
        self.source = source
        self.scratch = dict(scratch or {})
        assert not set(self.scratch) & set(bound.shapes), "a scratch buffer shadows a tensor"
        self.input_names = bound.program.input_names
        self.output_names = [self.root(n) for n in bound.program.outputs]
        self._buffers: dict[str, Buffer] = {}
        self.debug = get_config().debug
        self._plan_memory()
        self._plan_launches()

    def root(self, name: str) -> str:
        while name in self.aliases:
            name = self.aliases[name]
        return name

    def nbytes(self, name: str) -> int:
        return buffer_bytes(self.bound, self.scratch, name)

    def _plan_memory(self) -> None:
        """Give every intermediate and output a buffer; reuse freed intermediates."""
        inputs = set(self.input_names)
        last_use: dict[str, int] = {}
        for position, launch in enumerate(self.launches):
            for name in launch.args:
                last_use[name] = position
        outputs = set(self.output_names)
        free: list[Buffer] = []
        for position, launch in enumerate(self.launches):
            for name in launch.args:
                if name in inputs or name in self._buffers:
                    continue
                size = self.nbytes(name)
                reusable = None
                if name not in outputs:
                    fitting = [b for b in free if b.nbytes >= size]
                    if fitting:
                        reusable = min(fitting, key=lambda b: b.nbytes)
                        free.remove(reusable)
                self._buffers[name] = reusable or self.device.alloc(size)
            for name in launch.args:
                if (last_use.get(name) == position and name not in inputs and name not in outputs
                        and name in self._buffers):
                    free.append(self._buffers[name])
        for name in self.output_names:
            if name not in inputs and name not in self._buffers:
                self._buffers[name] = self.device.alloc(self.nbytes(name))

    def _plan_launches(self) -> None:
        """Pack every launch once (:meth:`Device.plan`): planned buffers are fixed; the
        inputs and the outputs are slots, filled in by each run."""
        inputs = set(self.input_names)
        # Slots: the inputs in order, then each output that is not an input, once.
        self._output_slot_names = list(dict.fromkeys(
            n for n in self.output_names if n not in inputs))
        slot_names = list(self.input_names) + self._output_slot_names
        slot_of = {name: index for index, name in enumerate(slot_names)}
        # An input listed twice is read through its first slot.
        for index, name in reversed(list(enumerate(self.input_names))):
            slot_of[name] = index
        self._output_slots = [slot_of[n] for n in self.output_names]
        # For each output slot, the position of its first name in output_names.
        self._output_positions = [self.output_names.index(n) for n in self._output_slot_names]
        self._own_outputs = [self._buffers[n] for n in self._output_slot_names]
        self._output_nbytes = [self.nbytes(n) for n in self._output_slot_names]
        specs = [
            LaunchSpec(launch.kernel,
                       [Slot(slot_of[n], self.nbytes(n)) if n in slot_of else self._buffers[n]
                        for n in launch.args],
                       launch.global_size, launch.local_size, launch.shared_bytes)
            for launch in self.launches
        ]
        self._plan = self.device.plan(specs, len(slot_names))

    def run(self, inputs: Sequence[Buffer], fresh_outputs: bool = False,
            prefer: Sequence[Any] | None = None) -> list[Buffer]:
        """Launch every kernel on device-resident inputs; return the output buffers.

        By default outputs live in the executable's own buffers, overwritten by the next run;
        ``fresh_outputs=True`` writes them into new buffers that the caller keeps, and
        ``prefer`` (one per output, or None) names the handles of released buffers to have
        back for them (see :meth:`Device.alloc`): a replayed training step asks for the
        buffers of two steps ago, so its addresses repeat and a CUDA graph is reused.
        """
        if len(inputs) != len(self.input_names):
            raise ValueError(f"expected {len(self.input_names)} input buffers, got {len(inputs)}")
        if self.debug >= 2:
            return self._run_timed(inputs, fresh_outputs)
        if fresh_outputs:
            if prefer is None:
                alloc = self.device.alloc
                outputs = [alloc(n) for n in self._output_nbytes]
            else:
                outputs = self.device.alloc_many(
                    self._output_nbytes, [prefer[i] for i in self._output_positions])
        else:
            outputs = self._own_outputs
        slots = [*inputs, *outputs]
        self._plan.run(slots)
        return [slots[i] for i in self._output_slots]

    def _run_timed(self, inputs: Sequence[Buffer], fresh_outputs: bool) -> list[Buffer]:
        """``run`` one launch at a time, each timed and printed (``GINGHAM_DEBUG=2``)."""
        buffers = self._bound_buffers(inputs, fresh_outputs)
        times = self.kernel_times(buffers)
        for launch, elapsed in zip(self.launches, times):
            rate = (f", {launch.flops / elapsed / 1e9:.1f} GFLOP/s"
                    if launch.flops and elapsed else "")
            debug_print(2, f"{self.device.id}: {launch.name} {elapsed * 1e3:.3f} ms{rate}")
        clock = ("the device's clock, launched back to back" if self.device.times_on_device
                 else "the host's clock, each launch synchronised")
        debug_print(2, f"{self.device.id}: {len(times)} kernels, {sum(times) * 1e3:.3f} ms "
                       f"in all ({clock})")
        return [buffers[name] for name in self.output_names]

    def _bound_buffers(self, inputs: Sequence[Buffer], fresh_outputs: bool = True
                       ) -> dict[str, Buffer]:
        """Every tensor's buffer for a run on ``inputs``: the planned ones, the inputs, and
        new output buffers (``fresh_outputs``) or the executable's own."""
        buffers = dict(self._buffers)
        buffers.update(zip(self.input_names, inputs))
        if fresh_outputs:
            for name in self.output_names:
                if name not in self.input_names:
                    buffers[name] = self.device.alloc(self.nbytes(name))
        return buffers

    def kernel_times(self, buffers: dict[str, Buffer] | Sequence[Buffer]) -> list[float]:
        """Run every launch once and return each one's seconds (:meth:`Device.timed_launches`:
        the device's clock where it has one). ``buffers``: every tensor's buffer, or the
        input buffers (outputs then go to new buffers)::

            >>> sum(exe.kernel_times([buf_a, buf_b]))    # the kernels' share of a run
        """
        if not isinstance(buffers, dict):
            buffers = self._bound_buffers(buffers)
        specs = [LaunchSpec(launch.kernel, [buffers[name] for name in launch.args],
                            launch.global_size, launch.local_size, launch.shared_bytes)
                 for launch in self.launches]
        return self.device.timed_launches(specs)

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """Copy the arrays in, run, and copy every output back."""
        device = self.device
        inputs = []
        for name, array in zip(self.input_names, arrays):
            value = np.ascontiguousarray(array, dtype=self.bound.dtypes[name])
            buffer = device.alloc(self.nbytes(name))
            if value.size:
                device.copy_in(buffer, value)
            inputs.append(buffer)
        outputs = self.run(inputs)
        results = []
        for name, buffer in zip(self.bound.program.outputs, outputs):
            result = np.empty(self.bound.shapes[name], dtype=self.bound.dtypes[name])
            if result.size:
                device.copy_out(buffer, result)
            results.append(result)
        device.synchronize()
        return results
