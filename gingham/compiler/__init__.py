"""From a bound Tile program to kernels on a device.

    exe = compile_program(bound, device)   # plan kernels, lower, render, compile (cached)
    c, = exe(a, b)

Passes, in order: fusion planning (:mod:`.fusion`, with contraction normal form from
:mod:`.normalize`), lowering to the loop-nest kernel IR with a schedule chosen from the device
description (:mod:`.lower`, :mod:`.schedule`), naming each kernel by its content so equal
kernels are shared (:mod:`.dedupe`), rendering in the device's dialect
(:mod:`gingham.codegen.c_family`), compilation through the device (in parallel pieces, each
kernel's binary cached on disk), and memory planning (:mod:`.executable`).
"""

from __future__ import annotations

import numpy as np

from ..codegen.c_family import DIALECTS, render_many
from ..config import debug_print
from ..devices.base import Device
from ..tile.dtypes import DTYPES
from ..tile.shapes import BoundProgram
from .dedupe import unit_of
from .executable import Executable, Launch
from .fusion import plan
from .lower import LoweringContext
from .schedule import lower_with_schedule


def compile_program(bound: BoundProgram, device: Device) -> Executable:
    """Compile every kernel of ``bound`` for ``device`` into a replayable executable."""
    dialect_name = device.info.dialect
    if dialect_name not in DIALECTS:
        raise ValueError(f"device {device.id} has no kernel dialect; it cannot run compiled code")
    kernel_plan = plan(bound)
    kernels = []
    for position, kernel in enumerate(kernel_plan.kernels):
        ctx = LoweringContext(bound, kernel_plan.aliases)
        name = f"k{position}_{sorted(kernel.stores)[0]}"
        kernels.extend(lower_with_schedule(kernel, ctx, name, device.info))
    dialect = DIALECTS[dialect_name]
    units, renamed = [], {}
    for kernel in kernels:
        unit, ir = unit_of(kernel, dialect)
        units.append(unit)
        renamed[unit.entry] = ir
    debug_print(1, f"{device.id}: {len(kernels)} kernel(s) ({len(renamed)} distinct) for a "
                   f"program with {len(bound.program.statements)} statement(s)")
    for kernel, unit in zip(kernels, units):
        debug_print(3, f"{kernel.name} ({unit.entry}): {kernel.schedule}")
    distinct = {unit.entry: unit for unit in units}
    source = "\n".join(unit.source for unit in distinct.values())
    debug_print(4, f"source for {device.id}:\n{source}")

    def assemble(group) -> str:
        # One prelude for the whole piece: the units' helpers are defined once.
        return render_many([renamed[unit.entry] for unit in group], dialect)

    compiled = device.compile_units(units, assemble) if kernels else []
    launches = [
        Launch(handle, kernel.name, [p.name for p in kernel.params], kernel.launch.global_size,
               kernel.launch.local_size, getattr(kernel.launch, "shared_bytes", 0),
               kernel.schedule, kernel.flops)
        for kernel, handle in zip(kernels, compiled)
    ]
    scratch = {s.name: s.size * np.dtype(DTYPES[s.dtype]).itemsize
               for kernel in kernels for s in kernel.scratch}
    return Executable(bound, device, launches, kernel_plan.aliases, source, scratch)


__all__ = ["Executable", "compile_program"]
