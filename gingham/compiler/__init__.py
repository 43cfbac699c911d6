"""From a bound Tile program to kernels on a device.

    exe = compile_program(bound, device)   # plan kernels, lower, render, compile (cached)
    c, = exe(a, b)

Passes, in order: removing repeated statements (:mod:`.cse`), hoisting broadcast
sub-expressions (:mod:`.hoist`), splitting sums (:mod:`.linearity`) and strided outputs into
their phases (:mod:`.phases`), fusion planning (:mod:`.fusion`, with contraction normal form from
:mod:`.normalize`), lowering to the loop-nest kernel IR with a schedule chosen from the device
description (:mod:`.lower`, :mod:`.schedule`), naming each kernel by its content so equal
kernels are shared (:mod:`.dedupe`), rendering in the device's dialect
(:mod:`gingham.codegen.c_family`), compilation through the device (in parallel pieces, each
kernel's binary cached on disk), and memory planning (:mod:`.executable`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterable, Iterator

from ..codegen.c_family import DIALECTS, RenderedKernel, assemble, render_many
from ..config import debug_print, get_config
from ..devices.base import Device, DeviceInfo, SampleLaunch, SourceUnit, compile_jobs
from ..devices.pieces import overlap_on
from ..tile.shapes import BoundProgram
from . import kernel_ir as k
from . import programs
from .cse import eliminate_common
from .dedupe import unit_of
from .executable import Executable, Launch, buffer_bytes, scratch_bytes
from .fusion import Plan, plan
from .gc_pause import paused_collection
from .hoist import hoist_broadcast
from .linearity import split_sums
from .phases import split_output_phases
from .lower import LoweringContext
from .rows import lower_row_group, lower_row_group_cpu, passes_of, row_groups
from .schedule import lower_with_schedule


def rewrite_program(bound: BoundProgram) -> BoundProgram:
    """``bound`` after the program-level passes that come before fusion planning, in order
    (tools and tests that plan kernels themselves apply the same ones)::

        >>> plan(rewrite_program(bound))    # the kernels compile_program lowers
    """
    bound = eliminate_common(bound)  # a traced step's second copy of its forward pass
    bound = hoist_broadcast(bound)  # per-channel sub-expressions computed per channel
    bound = split_sums(bound)  # sums of per-channel factors * terms: from sibling sums
    return split_output_phases(bound)  # stride-s input gradients: dense per output phase


def lower_program(bound: BoundProgram, info: DeviceInfo) -> list[k.Kernel]:
    """The kernels :func:`compile_program` lowers for ``bound`` (after
    :func:`rewrite_program`, which is the caller's to apply) on a device that ``info``
    describes, in program order: planned and lowered with their schedules, neither named by
    content nor compiled. For tools and tests that look at what a device would run, a
    device this machine need not have::

        >>> kernels = lower_program(rewrite_program(bound), H200_DESCRIPTION)
        >>> [kernel.schedule for kernel in kernels]     # what an H200 would get
    """
    kernel_plan = plan(bound)
    return [kernel for _, kernel in _lowered(kernel_plan, bound, info, heavy_first=False)]


def compile_program(bound: BoundProgram, device: Device) -> Executable:
    """Compile every kernel of ``bound`` for ``device`` into a replayable executable."""
    dialect_name = device.info.dialect
    if dialect_name not in DIALECTS:
        raise ValueError(f"device {device.id} has no kernel dialect; it cannot run compiled code")
    key = programs.key_for(bound, device)
    cached = programs.load(key, device)
    if cached is not None:  # this program was compiled for this device before
        return cached
    with paused_collection():  # its lowering allocates much and frees it by refcount
        return _compile_new(bound, device, key)


def _compile_new(bound: BoundProgram, device: Device, key: str | None) -> Executable:
    """:func:`compile_program` for a program that no cache holds (``key``: its cache key)."""
    start = time.perf_counter()
    bound = rewrite_program(bound)
    kernel_plan = plan(bound)
    debug_print(1, f"{device.id}: {len(kernel_plan.kernels)} kernel(s) planned in "
                   f"{(time.perf_counter() - start) * 1e3:.0f} ms; lowering")
    # Overlapped with compiling, the heaviest kernels are lowered first (see _lowered).
    heavy_first = overlap_on(compile_jobs())
    launches, source, kernels, unit_keys = _compile_stream(
        _lowered(kernel_plan, bound, device.info, heavy_first), device, bound)
    debug_print(1, f"{device.id}: {len(kernels)} kernel(s) "
                   f"({len({launch.kernel.entry for launch in launches})} distinct) for a "
                   f"program with {len(bound.program.statements)} statement(s)")
    scratch = scratch_bytes(kernels)
    exe = Executable(bound, device, launches, kernel_plan.aliases, source, scratch)
    stored = time.perf_counter()
    programs.store(key, device, exe, unit_keys)
    if key is not None:
        debug_print(1, f"{device.id}: program kept in the program cache in "
                       f"{(time.perf_counter() - stored) * 1e3:.0f} ms")
    return exe


def compile_kernels(kernels: list[k.Kernel], device: Device) -> tuple[list[Launch], str]:
    """One launch per kernel (in order) and the source compiled for them.

    Kernels equal up to the names of their tensors share one compiled entry point; each
    launch keeps its own kernel's launch shape and arguments. Example::

        >>> launches, source = compile_kernels([k0, k1], get_device("cpu"))
        >>> launches[0].kernel is launches[1].kernel   # k1 is k0 on other tensors
        True
    """
    launches, source, _, _ = _compile_stream(enumerate(kernels), device)
    return launches, source


def _lowered(kernel_plan: Plan, bound: BoundProgram, info: DeviceInfo,
             heavy_first: bool = True) -> Iterator[tuple[tuple[int, int], k.Kernel]]:
    """Each planned kernel lowered, keyed by its place in the program; with ``heavy_first``
    the products first (matrix multiplications and convolutions, whose tiled kernels take a
    compiler longest), then the other contractions, then the rest, so that the heavy ones
    compile while the rest is lowered (else in program order)."""
    def weight_class(plan_kernel) -> int:
        if not heavy_first:
            return 0
        if plan_kernel.kind != "contraction":
            return 2
        return 0 if len(plan_kernel.contraction.operands) > 1 else 1

    def context() -> LoweringContext:
        return LoweringContext(bound, kernel_plan.aliases, kernel_plan.coordinates)

    def name(position: int) -> str:
        return f"k{position}_{sorted(kernel_plan.kernels[position].stores)[0]}"

    # A row group's kernels become one (rows.py), lowered at its first kernel's turn; where
    # they do not fit one on a GPU, each stays its own.
    groups = {group[0]: group for group in row_groups(kernel_plan, bound)}
    fused: set[int] = set()
    order = sorted(range(len(kernel_plan.kernels)),
                   key=lambda i: (weight_class(kernel_plan.kernels[i]), i))
    for position in order:
        if position in fused:
            continue
        if position in groups:
            group = groups[position]
            if info.dialect == "c":
                lowered = lower_row_group_cpu(kernel_plan, group, [context() for _ in group],
                                              [name(i) for i in group], bound)
            else:
                lowered = lower_row_group(passes_of(kernel_plan, group, bound),
                                          [context() for _ in group], [name(i) for i in group],
                                          bound, info)
            if lowered is not None:
                fused.update(group)
                yield (position, 0), lowered
                continue
        kernel = kernel_plan.kernels[position]
        for part, lowered in enumerate(lower_with_schedule(kernel, context(), name(position),
                                                           info)):
            yield (position, part), lowered


def _sample_launch(kernel: k.Kernel, bound: BoundProgram) -> SampleLaunch | None:
    """How ``bound``'s executable will launch ``kernel``: its launch shape and the bytes of
    the buffer behind each parameter (a tensor of ``bound`` or a scratch buffer), or None
    for a parameter that is neither."""
    scratch = scratch_bytes([kernel])
    names = [param.name for param in kernel.params]
    if not all(name in scratch or name in bound.shapes for name in names):
        return None
    local = kernel.launch.local_size
    return SampleLaunch(tuple(kernel.launch.global_size),
                        None if local is None else tuple(local),
                        tuple(buffer_bytes(bound, scratch, name) for name in names))


def _compile_stream(kernels: Iterable[tuple[Any, k.Kernel]], device: Device,
                    bound: BoundProgram | None = None
                    ) -> tuple[list[Launch], str, list[k.Kernel], list[str]]:
    """Compile ``(place, kernel)`` pairs as they come (see :func:`compile_kernels`): each
    kernel is named by content and handed to the device's compile workers at once, so that
    compiling overlaps producing the rest. Launches, kernels and the disk-cache keys of their
    units come back in place order. With ``bound`` (the program they come from) each unit
    carries its kernel's launch (:class:`~gingham.devices.base.SampleLaunch`)."""
    dialect = DIALECTS[device.info.dialect]
    rendered: dict[str, RenderedKernel] = {}
    placed: list[tuple[Any, k.Kernel, SourceUnit]] = []

    def assemble_piece(group) -> str:
        # One prelude for the whole piece (the units' helpers are defined once), and each
        # unit's code as naming it rendered it.
        return assemble([rendered[unit.entry] for unit in group], dialect)

    with device.unit_builder(assemble_piece) as build:
        for place, kernel in kernels:
            unit, part = unit_of(kernel, dialect)
            if bound is not None:
                unit = dataclasses.replace(unit, sample=_sample_launch(kernel, bound))
            rendered[unit.entry] = part
            placed.append((place, kernel, unit))
            build.add(unit)
    compiled, built_keys = build.kernels(), build.keys
    order = sorted(range(len(placed)), key=lambda i: placed[i][0])
    kernels_in_order = [placed[i][1] for i in order]
    units = [placed[i][2] for i in order]
    for kernel, unit in zip(kernels_in_order, units):
        debug_print(3, f"{kernel.name} ({unit.entry}): {kernel.schedule}")
    if get_config().debug >= 4:
        # The kernels under their own names (what was compiled names parameters by position).
        debug_print(4, f"source for {device.id}:\n{render_many(kernels_in_order, dialect)}")
    launches = [
        Launch(compiled[i], kernel.name, [p.name for p in kernel.params],
               kernel.launch.global_size, kernel.launch.local_size,
               getattr(kernel.launch, "shared_bytes", 0), kernel.schedule, kernel.flops)
        for i, kernel in zip(order, kernels_in_order)
    ]
    source = "\n".join({unit.entry: unit.source for unit in units}.values())
    return launches, source, kernels_in_order, [built_keys[i] for i in order]


__all__ = ["Executable", "compile_kernels", "compile_program", "lower_program",
           "rewrite_program"]
