"""Compiled programs on disk: a process that meets a program again lowers nothing.

Every kernel's binary is cached on disk by its source (:meth:`Device.compile_units`), but
finding those sources meant running the compiler again: the rewrites, fusion planning, lowering
each kernel with its schedule, naming it by content and rendering it — about half a second of
Python for a ResNet-9 training step, paid by every new process. This cache keeps what
:func:`gingham.compiler.compile_program` produced for a program on a device: the rewritten
program (the shape and dtype of every tensor the launches touch), each launch (which kernel,
its arguments, grid and schedule), the buffer aliases and scratch sizes, and the disk-cache key
of every kernel's binary. A process that finds the entry loads the binaries and plans memory::

    >>> key = programs.key_for(bound, device)      # None when the cache is not used now
    >>> exe = programs.load(key, device)            # None on a miss: compile, then
    >>> programs.store(key, device, exe, unit_keys) # the next process loads it

An entry is keyed by everything its content depends on: the program (its full IR and the
shapes and dtypes of its inputs), the device's description and toolchain, the configuration
that changes what is compiled, the Python, NumPy and gingham sources (any change to the
compiler makes every entry stale), and the tuning database's generation for the device (a
program lowered before ``gingham tune`` is lowered again, with the tuned schedules). The device
model the schedules were chosen from is stored with the entry and compared on loading.

Entries are written atomically and checksummed (:class:`gingham.cache.DiskCache`); an entry
that does not load, or whose kernels are no longer on disk, is a miss: the program is compiled
as if it were new. The cache is not used with ``GINGHAM_PROGRAM_CACHE=0``, while compiling may
tune (``GINGHAM_TUNE`` on or background, ``gingham tune``: each kernel must be looked up in the
database) or with ``GINGHAM_DEBUG=4`` (which prints the source the lowering renders).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import pickle
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..cache import DiskCache, cache_key
from ..config import debug_print, get_config
from ..devices.base import Device
from ..tile.dtypes import dtype_name
from ..tile.shapes import BoundProgram
from .executable import Executable, Launch

#: Bump when an entry's layout changes (the source hash covers what the compiler does).
VERSION = 2
_NAMESPACE = "programs"


@dataclass
class _Entry:
    """What one compiled program needs to be rebuilt without the compiler."""

    bound: BoundProgram  # the rewritten program the launches run
    aliases: dict[str, str]
    scratch: dict[str, int]
    kernels: list[tuple[str, str]]  # (unit key, entry) of each distinct kernel
    launches: list[Launch]  # each holding its kernel's index in ``kernels`` as its kernel
    source: bytes  # the compiled source, zlib-compressed (Executable.source)
    model: str | None  # the device model's fingerprint, if the schedules used one


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """A hash of gingham's own Python sources, the interpreter's and NumPy's versions."""
    digest = hashlib.sha256(f"{sys.version}|{np.__version__}|{VERSION}".encode())
    package = Path(__file__).resolve().parent.parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _usable(device: Device) -> bool:
    from ..tune.search import may_search

    config = get_config()
    return (config.program_cache and device.info.dialect is not None and config.debug < 4
            and not may_search())


def key_for(bound: BoundProgram, device: Device) -> str | None:
    """The program cache's key of ``bound`` on ``device``, or None when the cache is not
    used now. Taken before compiling: a tuning result stored meanwhile makes the entry stale
    (the next process compiles again), never the other way round."""
    from ..tune.db import TuningDB
    from ..tune.keys import device_key

    if not _usable(device):
        return None
    config = get_config()
    # Fields of the configuration that change what is compiled (the rest change where or
    # how fast it compiles, or what is printed).
    compiled = (config.cc, config.cflags, config.num_threads, config.wgmma, config.amx,
                config.tune_measure)
    inputs = tuple((bound.shapes[n], dtype_name(bound.dtypes[n]))
                   for n in bound.program.input_names)
    return cache_key("program", VERSION, _code_version(), repr(bound.program), inputs,
                     repr(sorted(device.info.as_dict().items())),
                     repr(device._compiler_identity()), repr(compiled),
                     TuningDB().generation(device_key(device.info)))


def _fingerprint(model) -> str | None:
    """A device model's fingerprint (None for no model)."""
    return None if model is None else cache_key(json.dumps(model.as_dict(), sort_keys=True))


def load(key: str | None, device: Device) -> Executable | None:
    """The executable stored under ``key`` (:func:`key_for`), or None (no key, a miss, a
    stale or damaged entry, or a kernel no longer on disk)."""
    if key is None:
        return None
    cache = DiskCache(_NAMESPACE)
    blob = cache.get(key)
    if blob is None:
        return None
    try:
        entry = pickle.loads(blob)
        if not isinstance(entry, _Entry):
            raise TypeError(f"not a program entry: {type(entry).__name__}")
    except Exception as exc:  # noqa: BLE001 - unusable: compile again, and replace it
        debug_print(1, f"program cache: discarding entry {key[:12]} ({exc})")
        cache.delete(key)
        return None
    if entry.model is not None:
        from ..tune.device_model import device_model

        # From this process or the disk cache (measured once per device and driver).
        if _fingerprint(device_model(device)) != entry.model:
            debug_print(1, f"program cache: {key[:12]} was lowered for another device model")
            return None
    kernels = device.load_units(entry.kernels)
    if kernels is None:
        debug_print(1, f"program cache: a kernel of {key[:12]} is no longer on disk")
        return None
    launches = [dataclasses.replace(launch, kernel=kernels[launch.kernel])
                for launch in entry.launches]
    debug_print(1, f"{device.id}: {len(launches)} kernel(s) ({len(kernels)} distinct) from "
                   "the program cache")
    for launch in launches:
        debug_print(3, f"{launch.name}: {launch.schedule}")
    return Executable(entry.bound, device, launches, entry.aliases,
                      zlib.decompress(entry.source).decode(), entry.scratch)


def store(key: str | None, device: Device, exe: Executable,
          unit_keys: Sequence[str]) -> None:
    """Keep ``exe`` under ``key`` for the processes that meet its program again (nothing
    without a key); ``unit_keys``: the disk-cache key of each launch's kernel, in order."""
    from ..tune.device_model import known_model

    if key is None:
        return
    index: dict[str, int] = {}
    kernels: list[tuple[str, str]] = []
    launches = []
    for launch, unit_key in zip(exe.launches, unit_keys, strict=True):
        if unit_key not in index:
            index[unit_key] = len(kernels)
            kernels.append((unit_key, launch.kernel.entry))
        launches.append(dataclasses.replace(launch, kernel=index[unit_key]))
    # The device model, if the lowering asked for it (it is then in this process's memo).
    entry = _Entry(exe.bound, dict(exe.aliases), dict(exe.scratch), kernels, launches,
                   zlib.compress(exe.source.encode()), _fingerprint(known_model(device)))
    try:
        blob = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - a program that does not pickle is not kept
        debug_print(1, f"program cache: cannot keep the program ({exc})")
        return
    DiskCache(_NAMESPACE).put(key, blob)


__all__ = ["key_for", "load", "store", "VERSION"]
