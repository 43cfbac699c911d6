"""The one device contract: allocate, copy in/out, compile (cached on disk), launch, sync.

A backend is one small module that subclasses :class:`Device` and fills in the underscored
hooks (``_alloc``, ``_copy_in``, ``_copy_out``, ``_build``, ``_load``, ``_launch``,
``_synchronize``, ``_compiler_identity``) plus a ``discover()`` function. The public methods
here do the argument checks, the statistics and the disk cache, so every backend behaves
the same.

Example (any compiled device; the kernel is written in the device's dialect)::

    >>> import numpy as np
    >>> from gingham.devices import get_device
    >>> dev = get_device("opencl:0")
    >>> k = dev.compile('''__kernel void add(__global float* c, __global const float* a,
    ...     __global const float* b, int n) { int i = get_global_id(0);
    ...     if (i < n) c[i] = a[i] + b[i]; }''', "add")
    >>> a = np.arange(1000, dtype=np.float32)
    >>> A, B, C = (dev.alloc(a.nbytes) for _ in range(3))
    >>> dev.copy_in(A, a); dev.copy_in(B, a)
    >>> dev.launch(k, [C, A, B, np.int32(1000)], global_size=(1024,), local_size=(64,))
    >>> out = np.empty_like(a); dev.copy_out(C, out)
    >>> bool((out == 2 * a).all())
    True

Scalar arguments are passed as their NumPy type: np.int32 -> ``int``, np.int64 -> ``long
long``, np.float32 -> ``float``, np.float64 -> ``double`` (also the unsigned and 8/16-bit
integers). A bare Python ``int`` is passed as int64 (sizes and offsets never overflow: an
H200 holds more than 2**31 floats) and a bare ``float`` as float32 (the compute type);
pass NumPy scalars to be explicit.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import ctypes
import dataclasses
import os
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

import numpy as np

from gingham.cache import DiskCache, is_key
from gingham.config import debug_print, get_config
from gingham.errors import DeviceError, DeviceMemoryError, KernelCompileError

if TYPE_CHECKING:
    from gingham.devices.pieces import UnitBuilder

DEVICE_KINDS = ("cpu", "gpu", "accelerator", "reference")
DIALECTS = ("c", "opencl", "cuda")


@dataclass(frozen=True)
class DeviceInfo:
    """What a device is, as data for the tuner (PlaidML's "hardware as data").

    Sizes are in bytes; 0 means unknown. ``simd_width`` is the number of fp32 lanes that
    execute together: the warp (32 on NVIDIA), the wavefront (64 on AMD GCN), the sub-group,
    or the CPU's vector width (16 with AVX-512, 8 with AVX2).
    """

    id: str
    name: str
    vendor: str
    kind: str
    dialect: str | None
    compute_units: int
    global_memory_bytes: int
    local_memory_bytes: int
    max_work_group_size: int
    simd_width: int
    cache_line_bytes: int
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int
    driver_version: str
    compiler_version: str
    compute_capability: int = 0  # CUDA: 10 * major + minor (90 on an H100/H200); else 0
    # Units beyond the vector lanes that schedules may use: "amx-bf16", a CPU's AMX tiles
    # with bfloat16 products, usable by this process (gingham.devices.cpu.host_features).
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.kind in DEVICE_KINDS, self.kind
        assert self.dialect is None or self.dialect in DIALECTS, self.dialect

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON)."""
        return dataclasses.asdict(self)


@dataclass
class DeviceStats:
    """Counters of what a device did; tests use them to prove that nothing moved or compiled.

    ``compiles`` counts real compilations; ``cache_hits`` counts kernels found already built
    (in this process or on disk). Example::

        before = dev.stats.snapshot()
        step()
        assert (dev.stats - before).copies_in == 0
    """

    copies_in: int = 0
    bytes_in: int = 0
    copies_out: int = 0
    bytes_out: int = 0
    launches: int = 0
    compiles: int = 0
    cache_hits: int = 0

    def snapshot(self) -> DeviceStats:
        """A copy of the counters now."""
        return dataclasses.replace(self)

    def reset(self) -> None:
        """Set every counter to zero."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, 0)

    def __sub__(self, other: DeviceStats) -> DeviceStats:
        return DeviceStats(**{f.name: getattr(self, f.name) - getattr(other, f.name)
                              for f in dataclasses.fields(self)})


class Buffer:
    """A block of device memory of ``nbytes``, owned by its device.

    Freed by :meth:`free` or when garbage-collected (into the device's pool, where it has
    one). ``handle`` is the backend's object
    (a NumPy array on the host, a ``pyopencl.Buffer``, a CUDA device pointer); ``address``
    is the memory's address as an int where the backend has one (host pointer, CUDA device
    pointer; None for OpenCL), so that a launch passes it without a lookup.
    """

    __slots__ = ("device", "nbytes", "address", "_handle", "_release", "_pool")

    def __init__(self, device: Device, nbytes: int, handle: Any,
                 release: Callable[[Any], None] | None = None,
                 address: int | None = None, pool: BufferPool | None = None) -> None:
        self.device = device
        self.nbytes = nbytes
        self.address = address
        self._handle = handle
        self._release = release
        self._pool = pool  # where the memory goes when the buffer is collected

    def __del__(self) -> None:
        # __del__ rather than weakref.finalize: a replayed step makes a buffer per updated
        # tensor every step, and a finalizer costs 3 us to make and run against 0.7 us.
        # At interpreter exit the runtime frees whatever is left with its context.
        handle = self._handle
        if handle is None:
            return
        self._handle = None
        try:
            if self._pool is not None:
                self._pool.give(self.nbytes, self.address, self._release, handle)
            else:
                _release_quietly(self._release, handle)
        except Exception:  # noqa: BLE001 - at exit the pool or the runtime may be gone
            pass

    @property
    def handle(self) -> Any:
        if self._handle is None:
            raise DeviceError(f"this {self.nbytes}-byte buffer on {self.device.id} was freed")
        return self._handle

    @property
    def freed(self) -> bool:
        return self._handle is None

    def free(self) -> None:
        """Give the memory back to the runtime now (idempotent; never to a pool)."""
        handle, self._handle, self.address = self._handle, None, None
        if handle is not None:
            _release_quietly(self._release, handle)

    def _recycle_into(self, pool: BufferPool) -> None:
        """When collected, hand the memory to ``pool`` instead of back to the runtime."""
        self._pool = pool

    def __repr__(self) -> str:
        state = " freed" if self.freed else ""
        return f"<Buffer {self.nbytes} bytes on {self.device.id}{state}>"


def _release_quietly(release: Callable[[Any], None] | None, handle: Any) -> None:
    if release is None:
        return
    try:
        release(handle)
    except Exception:  # noqa: BLE001 - at exit the runtime may already be gone
        pass


class BufferPool:
    """Released device memory kept by exact size for the next ``alloc`` of that size.

    A replayed training step allocates its fresh outputs (the updated parameters) and drops
    the previous ones every step; recycling them saves a runtime allocation and free each
    (cuMemFree waits for the GPU; an OpenCL allocation is touched by a blocking copy). A
    caller that wants a particular block back (a replay that wants the addresses of two
    steps ago, so that its CUDA graph is reused) names its handle in ``prefer``; otherwise
    the oldest block of the size is handed out first.

    Reuse is safe without synchronising because every backend runs launches and copies on
    one in-order queue: whatever is issued with the recycled memory runs after the work
    that used it. At most ``limit_bytes`` are kept; ``drain`` gives everything back (an
    allocation that does not fit drains the pool and retries).
    """

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.kept_bytes = 0
        self._free: dict[int, collections.deque] = {}

    def take(self, nbytes: int, prefer: Any = None, only_preferred: bool = False
             ) -> tuple[Any, int | None, Callable] | None:
        """(handle, address, release) of a kept block of exactly ``nbytes``, or None; the
        block whose handle is ``prefer`` when the pool holds it (``only_preferred``: that
        block or None)."""
        kept = self._free.get(nbytes)
        if not kept:
            return None
        if prefer is not None:
            # By position, not by iterating: a finalizer run by the garbage collector may
            # append to this deque meanwhile (and handles may not compare with ==).
            for index in range(len(kept)):
                if kept[index][0] is prefer:
                    entry = kept[index]
                    del kept[index]
                    self.kept_bytes -= nbytes
                    return entry
        if only_preferred:
            return None
        self.kept_bytes -= nbytes
        return kept.popleft()

    def give(self, nbytes: int, address: int | None, release: Callable[[Any], None] | None,
             handle: Any) -> None:
        """Keep a released block (or release it when the pool is full)."""
        if self.kept_bytes + nbytes > self.limit_bytes:
            _release_quietly(release, handle)
            return
        self.kept_bytes += nbytes
        self._free.setdefault(nbytes, collections.deque()).append((handle, address, release))

    def drain(self) -> int:
        """Give every kept block back to the runtime; returns how many bytes that was."""
        drained = self.kept_bytes
        for kept in self._free.values():
            while kept:
                handle, _, release = kept.popleft()
                _release_quietly(release, handle)
        self._free.clear()
        self.kept_bytes = 0
        return drained


@dataclass(eq=False)
class Kernel:
    """A compiled entry point on one device; launch it with :meth:`Device.launch`."""

    device: Device
    entry: str
    key: str
    handle: Any
    keepalive: Any = None  # the loaded module/program/library the handle points into

    def __repr__(self) -> str:
        return f"<Kernel {self.entry} on {self.device.id} key={self.key[:12]}>"


@dataclass(frozen=True)
class SampleLaunch:
    """How the program that has a unit launches its kernel: work-items and work-group per axis
    (as :meth:`Device.launch` takes them) and the bytes of each buffer argument, in order.

    Some drivers finish a kernel's code only at its first launch: PoCL generates each
    work-group function for the launch's class (its work-group size, whether the grid is
    under 65535 wide, ...) then, one kernel after another in the launching process. A
    backend that builds in worker processes can run the kernel once there instead, on zeroed
    buffers of these sizes, so that the binary it hands over already holds that code
    (:class:`~gingham.devices.opencl.OpenCLDevice`); others ignore it."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    buffer_bytes: tuple[int, ...]


@dataclass(frozen=True)
class BuiltPiece:
    """What a compile worker hands back for a piece (:meth:`Device._build_piece`): the
    binary, its disk-cache key, the loaded kernels of its entries, the wall seconds the build
    took and the CPU seconds of the thread that ran it. On compile threads the two differ by
    what the thread waited for a core or a lock; the build's work in a worker process is
    not counted on the waiting thread."""

    binary: bytes
    key: str
    kernels: list[Kernel]
    seconds: float
    thread_cpu_seconds: float


@dataclass(frozen=True)
class SourceUnit:
    """One kernel's complete source (helpers included) and its entry point's name.

    The unit of caching of :meth:`Device.compile_units`: its key is the source and the entry,
    so a kernel built once (alone or among others) is found again by any program that has it.
    """

    entry: str
    source: str
    #: A guess at its build time in characters of plain source (0: its length), for sharing
    #: the units out between parallel compilations (:func:`gingham.compiler.dedupe.unit_of`
    #: weighs a kernel's unrolled loops: the compiler's time follows the unrolled code).
    weight: float = field(default=0.0, compare=False)
    #: How the program launches it, where the compiler knows (see :class:`SampleLaunch`).
    sample: SampleLaunch | None = field(default=None, compare=False)

    @property
    def cost(self) -> float:
        return self.weight or float(len(self.source))


ScalarOrBuffer = Buffer | int | float | np.generic

#: The C type of each scalar argument type (for backends that call through ctypes).
SCALAR_CTYPES: dict[np.dtype, type] = {
    np.dtype(np.int8): ctypes.c_int8, np.dtype(np.int16): ctypes.c_int16,
    np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
    np.dtype(np.uint8): ctypes.c_uint8, np.dtype(np.uint16): ctypes.c_uint16,
    np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
}

# Python scalars: ints are sizes/offsets (64-bit), floats are data (fp32, the compute type).
_PYTHON_SCALARS = {int: np.int64, float: np.float32}
_SCALAR_DTYPES = frozenset(SCALAR_CTYPES)


def normalize_args(args: Sequence[ScalarOrBuffer],
                   device: Device | None = None) -> list[Buffer | np.generic]:
    """Buffers stay (checked: live, and on ``device``); scalars become NumPy scalars.

    Raises TypeError for an unsupported scalar, ValueError / DeviceError for a buffer on
    another device or already freed.
    """
    return [_normalize_arg(index, arg, device) for index, arg in enumerate(args)]


def _normalize_arg(index: int, arg: ScalarOrBuffer, device: Device | None) -> Buffer | np.generic:
    if isinstance(arg, Buffer):
        if device is not None and arg.device is not device:
            raise ValueError(f"argument {index} is a buffer on {arg.device.id}, "
                             f"not on {device.id}")
        if arg.freed:
            raise DeviceError(f"argument {index} is a buffer that was freed")
        return arg
    if isinstance(arg, (bool, np.bool_)):
        raise TypeError(f"argument {index}: pass a bool as np.int32 or np.int8 explicitly")
    if type(arg) in _PYTHON_SCALARS:
        return _PYTHON_SCALARS[type(arg)](arg)
    if isinstance(arg, np.generic) and arg.dtype in _SCALAR_DTYPES:
        return arg
    raise TypeError(f"argument {index}: expected a Buffer, int, float or a NumPy "
                    f"integer/float32/float64 scalar, got {type(arg).__name__}")


@dataclass(frozen=True)
class Slot:
    """A launch argument that is filled in at run time: ``LaunchPlan.run``'s ``index``-th
    buffer, of at least ``nbytes``."""

    index: int
    nbytes: int = 0


@dataclass
class LaunchSpec:
    """One launch of a plan: like :meth:`Device.launch`'s arguments, where ``args`` may hold
    :class:`Slot` s besides Buffers and scalars."""

    kernel: Kernel
    args: Sequence[ScalarOrBuffer | Slot]
    global_size: tuple[int, ...] = ()
    local_size: tuple[int, ...] | None = None
    shared_bytes: int = 0


def _no_work(global_size: tuple[int, ...]) -> bool:
    """Whether a launch of ``global_size`` work-items has none (a dimension of 0)."""
    return any(size == 0 for size in global_size)


class LaunchPlan:
    """A fixed sequence of launches, checked and packed once, replayed by :meth:`run`.

    Only the slots change between runs (an executable's inputs and fresh outputs); every
    other argument, size and limit was checked and converted when the plan was made, so a
    run costs what the backend needs to issue the launches and no more. This generic plan
    calls the backend's ``_launch`` for each; backends override :meth:`_run` with cheaper
    ways (prebuilt CUDA argument arrays or a CUDA graph, OpenCL arguments set once, ctypes
    arguments built once)::

        plan = dev.plan([LaunchSpec(k, [Slot(0, 4 * n), A, np.int64(n)], (n,))], 1)
        plan.run([C])         # the same as dev.launch(k, [C, A, np.int64(n)], (n,))
    """

    def __init__(self, device: Device, specs: list[LaunchSpec], n_slots: int) -> None:
        self.device = device
        self.specs = specs
        self.n_slots = n_slots
        self.slot_nbytes = [0] * n_slots
        for spec in specs:
            for arg in spec.args:
                if isinstance(arg, Slot):
                    self.slot_nbytes[arg.index] = max(self.slot_nbytes[arg.index], arg.nbytes)

    def run(self, buffers: Sequence[Buffer]) -> None:
        """Launch everything with ``buffers`` in the slots (checked: live, here, big enough)."""
        if len(buffers) != self.n_slots:
            raise ValueError(f"this launch plan takes {self.n_slots} buffers, "
                             f"got {len(buffers)}")
        device = self.device
        for index, (buffer, nbytes) in enumerate(zip(buffers, self.slot_nbytes)):
            if not isinstance(buffer, Buffer) or buffer.device is not device \
                    or buffer._handle is None or buffer.nbytes < nbytes:
                self._bad_buffer(index, buffer, nbytes)
        device.stats.launches += len(self.specs)
        self._run(buffers)

    def _bad_buffer(self, index: int, buffer: Any, nbytes: int) -> None:
        if not isinstance(buffer, Buffer):
            raise TypeError(f"slot {index}: expected a Buffer, got {type(buffer).__name__}")
        if buffer.device is not self.device:
            raise ValueError(f"slot {index}: the buffer is on {buffer.device.id}, "
                             f"not on {self.device.id}")
        if buffer.freed:
            raise DeviceError(f"slot {index}: the buffer was freed")
        raise ValueError(f"slot {index}: the buffer has {buffer.nbytes} bytes, the kernels "
                         f"use {nbytes}")

    def _run(self, buffers: Sequence[Buffer]) -> None:
        launch = self.device._launch
        for spec in self.specs:
            args = [buffers[a.index] if isinstance(a, Slot) else a for a in spec.args]
            launch(spec.kernel, args, spec.global_size, spec.local_size, spec.shared_bytes)


class Device(abc.ABC):
    """One device behind the common contract; get one with ``gingham.devices.get_device``.

    Guarantees: copies are complete when ``copy_in``/``copy_out`` return; ``launch`` may be
    asynchronous but launches and copies on one device run in the order issued;
    ``compile`` of the same (source, entry) on the same device and toolchain compiles once,
    ever, across processes (the binary is in the disk cache).
    """

    #: disk cache namespace of this backend's binaries ("cpu", "opencl", "cuda")
    cache_namespace: str = ""
    #: suffix of the saved source when the compiler rejects it
    source_suffix: str = ".txt"

    #: recycle released buffers through a :class:`BufferPool` (allocation is costly here)
    pools_buffers: bool = False

    def __init__(self, info: DeviceInfo) -> None:
        self.info = info
        self.stats = DeviceStats()
        self._kernels: dict[str, Kernel] = {}
        # A quarter of the memory, at most 4 GiB: enough for a step's parameters and
        # optimiser state twice over, and drained whenever an allocation does not fit.
        self.pool = BufferPool(min(info.global_memory_bytes // 4, 4 << 30)) \
            if self.pools_buffers else None

    @property
    def id(self) -> str:
        return self.info.id

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}: {self.info.name}>"

    # ---- memory ---------------------------------------------------------------------

    def alloc(self, nbytes: int, prefer: Any = None) -> Buffer:
        """A new uninitialised buffer of ``nbytes``; DeviceMemoryError when it does not fit.

        On a pooling device, released memory of that size is reused; ``prefer`` is the
        ``handle`` of a released buffer to have back if the pool still holds it (a replay
        that gets the same addresses every time replays the same CUDA graph).
        """
        if not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"alloc needs a byte count >= 0, got {nbytes!r}")
        nbytes = int(nbytes)
        pool = self.pool
        if pool is None:
            return self._alloc(nbytes)
        kept = pool.take(nbytes, prefer)
        if kept is not None:
            return self._pooled(nbytes, kept)
        try:
            buffer = self._alloc(nbytes)
        except DeviceMemoryError:
            if not pool.drain():
                raise
            buffer = self._alloc(nbytes)
        buffer._recycle_into(pool)
        return buffer

    def alloc_many(self, sizes: Sequence[int], prefer: Sequence[Any]) -> list[Buffer]:
        """:meth:`alloc` of each size, with its preferred handle (or None), in two passes:
        first every buffer whose preferred block the pool holds, then the rest. In one pass
        a buffer whose block is still in use would take the oldest block of its size, which
        may be the one a later buffer of the list prefers, and the addresses of a replayed
        step would then never repeat (its CUDA graph updated every step)."""
        pool = self.pool
        if pool is None:
            return [self.alloc(n) for n in sizes]
        buffers: list[Buffer | None] = [None] * len(sizes)
        for index, (nbytes, handle) in enumerate(zip(sizes, prefer)):
            kept = pool.take(nbytes, handle, only_preferred=True) if handle is not None else None
            if kept is not None:
                buffers[index] = self._pooled(nbytes, kept)
        return [buffer if buffer is not None else self.alloc(nbytes)
                for buffer, nbytes in zip(buffers, sizes)]

    def _pooled(self, nbytes: int, kept: tuple) -> Buffer:
        """A buffer on a block the pool handed out (``BufferPool.take``'s triple)."""
        handle, address, release = kept
        return Buffer(self, nbytes, handle, release=release, address=address, pool=self.pool)

    def copy_in(self, buffer: Buffer, array: np.ndarray) -> None:
        """Copy a C-contiguous host array into the start of ``buffer`` (complete on return)."""
        self._check_transfer(buffer, array, "copy_in")
        self.stats.copies_in += 1
        self.stats.bytes_in += array.nbytes
        self._copy_in(buffer, array)

    def copy_out(self, buffer: Buffer, array: np.ndarray) -> None:
        """Copy the start of ``buffer`` into a C-contiguous, writeable host array."""
        self._check_transfer(buffer, array, "copy_out")
        if not array.flags.writeable:
            raise ValueError("copy_out needs a writeable array")
        self.stats.copies_out += 1
        self.stats.bytes_out += array.nbytes
        self._copy_out(buffer, array)

    def _check_transfer(self, buffer: Buffer, array: np.ndarray, what: str) -> None:
        if buffer.device is not self:
            raise ValueError(f"{what}: the buffer belongs to {buffer.device.id}, not {self.id}")
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
            raise ValueError(f"{what} needs a C-contiguous numpy array "
                             "(use np.ascontiguousarray)")
        if array.nbytes > buffer.nbytes:
            raise ValueError(f"{what}: the array has {array.nbytes} bytes but the buffer "
                             f"only {buffer.nbytes}")
        buffer.handle  # raises if freed

    # ---- kernels --------------------------------------------------------------------

    def compile(self, source: str, entry: str) -> Kernel:
        """Compile ``source`` in this device's dialect and return its function ``entry``.

        The binary is cached on disk under a key of (source, entry, compiler identity:
        flags, compiler and driver versions, device name). KernelCompileError carries the
        compiler's output and the path where the source was saved.
        """
        return self.compile_many(source, [entry])[0]

    def compile_many(self, source: str, entries: Sequence[str]) -> list[Kernel]:
        """Compile one source that defines several kernels with a single build.

        A program's kernels are rendered into one source so that a first run pays for one
        compiler invocation, not one per kernel; the binary is cached like ``compile``'s.
        """
        entries = list(entries)
        key = DiskCache.key(self.cache_namespace, source, "\0".join(entries),
                            self._compiler_identity())
        if all(f"{key}:{e}" in self._kernels for e in entries):
            self.stats.cache_hits += 1
            return [self._kernels[f"{key}:{e}"] for e in entries]
        cache = DiskCache(self.cache_namespace)
        binary = cache.get(key)
        kernels: list[Kernel] | None = None
        if binary is not None:
            try:
                kernels = self._load_many(binary, entries, key)
                self.stats.cache_hits += 1
            except Exception as exc:  # noqa: BLE001 - a stale binary: rebuild it
                debug_print(1, f"{self.id}: cached binary {key[:12]} did not load ({exc}); "
                            "rebuilding")
                cache.delete(key)
        if kernels is None:
            start = time.perf_counter()
            binary = self._build(source, entries[0] if entries else "")
            self.stats.compiles += 1
            debug_print(1, f"{self.id}: compiled {len(entries)} kernels in "
                        f"{(time.perf_counter() - start) * 1e3:.1f} ms")
            kernels = self._load_built(source, binary, entries, key)
            cache.put(key, binary)
        for entry, kernel in zip(entries, kernels):
            self._kernels[f"{key}:{entry}"] = kernel
        return kernels

    def compile_units(self, units: Sequence[SourceUnit],
                      assemble: Callable[[Sequence[SourceUnit]], str] | None = None,
                      jobs: int | None = None) -> list[Kernel]:
        """Compile many kernels, each cached on disk by its own source, in parallel pieces.

        What is cached (in this process, or on disk from any earlier program that had the same
        kernel) is loaded; the rest is split into translation units ("pieces") of about equal
        source length, a few per worker, that ``jobs`` workers compile at once (default
        ``config.compile_jobs``, else one per core; 1: a single piece): C compiler processes,
        or driver builds in threads (pyopencl and cuda-python release the GIL while the driver
        compiles; NVRTC is thread-safe). Each worker also loads what it built. ``assemble`` makes one translation unit of several
        units (default: their sources joined; pass the renderer's when the sources share
        helper definitions). Units with the same entry and source compile once.

        On disk, a piece's binary is stored once under its own key, and every kernel's key
        holds the piece's key: a kernel is found from its own source whatever it was built
        with. A damaged or missing entry is a miss, rebuilt.

        Example::

            >>> k1, k2 = dev.compile_units([SourceUnit("f", SRC_F), SourceUnit("g", SRC_G)])
        """
        with self.unit_builder(assemble, jobs, eager=False) as build:
            for unit in units:
                build.add(unit)
        return build.kernels()

    def unit_builder(self, assemble: Callable[[Sequence[SourceUnit]], str] | None = None,
                     jobs: int | None = None, eager: bool | None = None) -> UnitBuilder:
        """A :class:`~gingham.devices.pieces.UnitBuilder` that compiles units as they are
        added (``compile_units`` with the units arriving one at a time), so that compiling
        overlaps the lowering of the rest. Example::

            >>> with dev.unit_builder() as build:
            ...     build.add(SourceUnit("f", SRC_F)); build.add(SourceUnit("g", SRC_G))
            >>> k1, k2 = build.kernels()
        """
        from gingham.devices.pieces import UnitBuilder

        assemble = assemble or (lambda group: "\n".join(u.source for u in group))
        return UnitBuilder(self, assemble, jobs or compile_jobs(), eager)

    def unit_key(self, unit: SourceUnit, identity: tuple | None = None) -> str:
        """The disk-cache key of one kernel's unit on this device and toolchain: what
        :meth:`compile_units` finds a kernel by, whatever piece it was built in
        (``identity``: :meth:`_compiler_identity`, when the caller holds it already)."""
        return DiskCache.key(self.cache_namespace, "unit", unit.source, unit.entry,
                             identity if identity is not None else self._compiler_identity())

    def load_units(self, keys: Sequence[tuple[str, str]]) -> list[Kernel] | None:
        """The kernels of ``keys`` ((unit key, entry) pairs, as :meth:`unit_key` gives them),
        from memory or the disk cache, in order; None when any of them is not built (nothing
        is compiled here: the caller still has the sources to build from). Example::

            >>> kernels = dev.load_units([(dev.unit_key(unit), unit.entry)])
        """
        found: dict[str, Kernel] = {}
        on_disk: dict[str, tuple[SourceUnit, bytes]] = {}
        cache = DiskCache(self.cache_namespace)
        with self._compiling():
            for key, entry in keys:
                if key in found or key in on_disk:
                    continue
                kernel = self._kernels.get(key)
                if kernel is not None:
                    found[key] = kernel
                    continue
                pointer = cache.get(key)
                if pointer is None:
                    return None
                on_disk[key] = SourceUnit(entry, ""), pointer
            if on_disk:
                found.update(self._load_cached_units(cache, on_disk))
        if any(key not in found for key, _ in keys):
            return None
        self.stats.cache_hits += len(found) - len(on_disk)
        return [found[key] for key, _ in keys]

    def _load_cached_units(self, cache: DiskCache,
                           pending: dict[str, tuple[SourceUnit, bytes]]) -> dict[str, Kernel]:
        """The kernels of ``pending`` (unit key -> the unit and its disk-cache entry, the key
        of the piece it was built in) whose piece is on disk, each piece loaded once."""
        by_piece: dict[str, list[str]] = {}
        for key, (_, pointer) in pending.items():
            piece = pointer.decode("ascii", errors="replace")
            if not is_key(piece):
                cache.delete(key)  # not a piece key: damaged, rebuild the kernel
                continue
            by_piece.setdefault(piece, []).append(key)
        pieces: list[tuple[str, bytes, list[str]]] = []  # (piece key, binary, unit keys)
        for piece, unit_keys in by_piece.items():
            binary = cache.get(piece)
            if binary is not None:  # else it was damaged or removed: its kernels are rebuilt
                pieces.append((piece, binary, unit_keys))
        results = self._load_pieces([(binary, [pending[key][0].entry for key in unit_keys],
                                      piece) for piece, binary, unit_keys in pieces])
        loaded: dict[str, Kernel] = {}
        for (piece, _, unit_keys), kernels in zip(pieces, results):
            if isinstance(kernels, Exception):  # a stale binary: rebuild its kernels
                debug_print(1, f"{self.id}: cached binary {piece[:12]} did not load "
                            f"({kernels}); rebuilding")
                cache.delete(piece)
                continue
            for key, kernel in zip(unit_keys, kernels):
                loaded[key] = self._kernels[key] = kernel
            self.stats.cache_hits += 1
        return loaded

    def _load_pieces(self, pieces: Sequence[tuple[bytes, list[str], str]]
                     ) -> list[list[Kernel] | Exception]:
        """The kernels of each (binary, entries, key) that the disk cache held, in order, or
        the exception its load raised. One after another here; a device whose driver
        compiles binaries again when they load may spread that (OpenCL on NVIDIA)."""
        return [self._load_piece(binary, entries, key) for binary, entries, key in pieces]

    def _load_piece(self, binary: bytes, entries: list[str], key: str
                    ) -> list[Kernel] | Exception:
        """:meth:`_load_many`, or the exception it raised (a stale binary: the caller
        rebuilds its kernels)."""
        try:
            return self._load_many(binary, entries, key)
        except Exception as exc:  # noqa: BLE001 - reported by the caller, which rebuilds
            return exc

    def _build_piece(self, source: str, entries: Sequence[str],
                     samples: Sequence[SampleLaunch | None] = ()) -> BuiltPiece:
        """Compile one piece and load its kernels (on a compile worker): the binary, its
        disk-cache key, the kernels of ``entries`` and what the build took. ``samples``: the
        entries' launches where known (see :class:`SampleLaunch`)."""
        start, cpu = time.perf_counter(), time.thread_time()
        binary = self._build_sampled(source, entries, samples)
        piece_key = DiskCache.key(self.cache_namespace, "piece", source,
                                  self._compiler_identity())
        kernels = self._load_built(source, binary, entries, piece_key)
        return BuiltPiece(binary, piece_key, kernels, time.perf_counter() - start,
                          time.thread_time() - cpu)

    def _build_sampled(self, source: str, entries: Sequence[str],
                       samples: Sequence[SampleLaunch | None]) -> bytes:
        """The binary of a piece whose entries' launches may be known (``samples``, in the
        order of ``entries``); by default :meth:`_build`, which needs none of them."""
        return self._build(source, entries[0])

    def _load_built(self, source: str, binary: bytes, entries: Sequence[str],
                    key: str) -> list[Kernel]:
        """The kernels of a binary just built from ``source``; a load that fails is a
        KernelCompileError naming the source (a binary from the disk cache that fails to
        load is rebuilt instead)."""
        try:
            return self._load_many(binary, entries, key)
        except KernelCompileError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.compile_error(source, f"the compiled kernels did not load: {exc}",
                                     "") from None

    def _compiling(self) -> ContextManager[None]:
        """Held for a unit builder's whole life (its loads of cached kernels included): a
        backend that must know when compiles are in flight marks them here (default:
        nothing)."""
        return contextlib.nullcontext()

    def _compile_pool(self, workers: int) -> Executor:
        """Where pieces compile: threads (pyopencl and cuda-python release the GIL while the
        driver compiles; NVRTC is thread-safe; C compilers are processes)."""
        return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gingham-compile")

    def compile_error(self, source: str, message: str, log: str) -> KernelCompileError:
        """A KernelCompileError with the compiler's log and the saved source's path."""
        from gingham.cache import save_failed_source

        path = save_failed_source(source, self.source_suffix)
        text = f"{message} on {self.id} ({self.info.name}); source saved to {path}"
        if log.strip():
            text += f"\n--- compiler output ---\n{log.rstrip()}"
        return KernelCompileError(text, source_path=str(path), log=log)

    def launch(self, kernel: Kernel, args: Sequence[ScalarOrBuffer],
               global_size: tuple[int, ...] = (), local_size: tuple[int, ...] | None = None,
               *, shared_bytes: int = 0) -> None:
        """Run ``kernel`` with ``args`` (Buffers and scalars, in the kernel's order).

        ``global_size`` is the total number of work-items per dimension (OpenCL's NDRange,
        CUDA's grid x block), ``local_size`` the work-group / block shape or None for the
        runtime's choice. On the ``cpu`` device both are ignored: the C function holds its
        own OpenMP loop. ``shared_bytes`` is CUDA dynamic shared memory (0 elsewhere).
        """
        if kernel.device is not self:
            raise ValueError(f"the kernel was compiled for {kernel.device.id}, not {self.id}")
        normalized = normalize_args(args, self)
        global_size, local_size = _launch_sizes(global_size, local_size)
        if _no_work(global_size):
            return  # an empty output: CUDA refuses a grid of 0 blocks, OpenCL 1.2 an NDRange of 0
        self.stats.launches += 1
        self._launch(kernel, normalized, global_size, local_size, int(shared_bytes))

    def plan(self, specs: Sequence[LaunchSpec], n_slots: int) -> LaunchPlan:
        """Check and pack a sequence of launches once; replay it with ``plan.run(buffers)``.

        Everything :meth:`launch` checks is checked here, once; a run only checks the
        buffers in the ``n_slots`` slots (live, on this device, big enough).
        """
        checked = []
        for spec in specs:
            if spec.kernel.device is not self:
                raise ValueError(f"the kernel was compiled for {spec.kernel.device.id}, "
                                 f"not {self.id}")
            args: list = []
            for index, arg in enumerate(spec.args):
                if isinstance(arg, Slot):
                    if not 0 <= arg.index < n_slots:
                        raise ValueError(f"argument {index}: slot {arg.index} is out of range "
                                         f"for {n_slots} slots")
                    args.append(arg)
                else:
                    args.append(_normalize_arg(index, arg, self))
            global_size, local_size = _launch_sizes(spec.global_size, spec.local_size)
            if _no_work(global_size):
                continue  # an empty output: CUDA refuses a grid of 0 blocks
            checked.append(LaunchSpec(spec.kernel, args, global_size, local_size,
                                      int(spec.shared_bytes)))
        return self._plan(checked, n_slots)

    def _plan(self, specs: list[LaunchSpec], n_slots: int) -> LaunchPlan:
        """The backend's plan of checked specs (the generic one calls ``_launch``)."""
        return LaunchPlan(self, specs, n_slots)

    def synchronize(self) -> None:
        """Wait until every launch and copy issued so far has finished."""
        self._synchronize()

    def timed_launches(self, specs: Sequence[LaunchSpec]) -> list[float]:
        """Run ``specs`` (no slots) once, in order, and return each launch's seconds.

        A device that clocks its launches (``clocks_launches``) gives each launch's run by
        its own clock (OpenCL: profiling events); CUDA overrides this with events between
        the kernels of one graph, which gives what each kernel costs inside a replayed
        program. Elsewhere every launch is timed with the host's clock around the launch
        and a synchronisation, so each time also holds one launch's and one
        synchronisation's overhead (tens of microseconds on a GPU). ``GINGHAM_DEBUG=2``
        prints these times::

            >>> dev.timed_launches([LaunchSpec(k, [C, A, B, np.int32(n)], (n,), (256,))])
            [3.1e-05]
        """
        if self.clocks_launches:
            # The queue first: the clocked launches may run on a queue of their own. (Dynamic
            # shared memory is a CUDA launch parameter, and CUDA has its own version.)
            self._synchronize()
            runs = [self.clocked_launches(spec.kernel, spec.args, spec.global_size,
                                          spec.local_size, 1)[0] for spec in specs]
            return [end - start for start, end in runs]
        times = []
        for spec in specs:
            start = time.perf_counter()
            self.launch(spec.kernel, spec.args, spec.global_size, spec.local_size,
                        shared_bytes=spec.shared_bytes)
            self.synchronize()
            times.append(time.perf_counter() - start)
        return times

    #: whether :meth:`clocked_launches` answers (the device clocks its own launches)
    clocks_launches: bool = False

    @property
    def times_on_device(self) -> bool:
        """Whether :meth:`timed_launches` takes the device's clock (its times leave out the
        host's launch and synchronisation overheads): on a device that clocks its launches."""
        return self.clocks_launches

    def _measure_model_meanwhile(self) -> None:
        """Start loading or measuring the device model (``tune_measure``) on a thread once
        the context exists (backends call this), so that its disk read, compiles, buffers
        and device-clocked timings overlap what comes before the first lowering (tracing,
        fusion); the host's timing of a launch waits until the lowering asks for it
        (:func:`gingham.tune.device_model.measure_in_background`). On a GPU that clocks its
        launches only; a CPU device would share its cores with the tracing: it is measured
        when lowering first needs it."""
        if self.info.kind == "cpu" or not self.clocks_launches:
            return
        from gingham.tune import device_model

        device_model.measure_in_background(self)

    def clocked_launches(self, kernel: Kernel, args: Sequence[ScalarOrBuffer],
                         global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                         count: int) -> list[tuple[float, float]]:
        """Launch ``kernel`` ``count`` times back to back and return when each ran, as the
        device's own clock says: ``(start, end)`` in seconds, waiting until all are done.

        The launches run back to back however slowly this thread issues them (CUDA: one
        graph; OpenCL: queued behind an event set once all are queued), so unlike a host
        timer around a synchronisation these times hold while other threads of this
        process run Python (a thread that gave the interpreter up for a driver call may
        get it back only milliseconds later), which lets the device model be measured
        beside the tracing of a first step. Backends that cannot (``clocks_launches``
        False) raise NotImplementedError. Example::

            >>> runs = dev.clocked_launches(k, [y, x], (1 << 20,), (256,), count=10)
            >>> fastest = min(end - start for start, end in runs)
        """
        raise NotImplementedError(f"{self.id} does not clock its launches")

    # ---- backend hooks --------------------------------------------------------------

    @abc.abstractmethod
    def _alloc(self, nbytes: int) -> Buffer: ...

    @abc.abstractmethod
    def _copy_in(self, buffer: Buffer, array: np.ndarray) -> None: ...

    @abc.abstractmethod
    def _copy_out(self, buffer: Buffer, array: np.ndarray) -> None: ...

    @abc.abstractmethod
    def _compiler_identity(self) -> tuple:
        """Everything besides source and entry that determines the binary."""

    @abc.abstractmethod
    def _build(self, source: str, entry: str) -> bytes:
        """Compile to a binary; raise ``self.compile_error(...)`` when the source is rejected."""

    @abc.abstractmethod
    def _load(self, binary: bytes, entry: str, key: str) -> Kernel:
        """Load a binary and find ``entry`` in it (any exception: it did not load)."""

    def _load_many(self, binary: bytes, entries: Sequence[str], key: str) -> list[Kernel]:
        """Load a binary once and find every one of ``entries`` in it (backends override
        this when loading is expensive: a dlopen, a program build, a module load)."""
        return [self._load(binary, entry, key) for entry in entries]

    @abc.abstractmethod
    def _launch(self, kernel: Kernel, args: list[Buffer | np.generic],
                global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                shared_bytes: int) -> None: ...

    @abc.abstractmethod
    def _synchronize(self) -> None: ...


def _launch_sizes(global_size: Sequence[int], local_size: Sequence[int] | None
                  ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The sizes as tuples of ints, checked: at most 3 dimensions, local like global."""
    global_size = tuple(int(g) for g in global_size)
    local_size = None if local_size is None else tuple(int(s) for s in local_size)
    if local_size is not None and len(local_size) != len(global_size):
        raise ValueError(f"local_size {local_size} and global_size {global_size} "
                         "must have the same number of dimensions")
    if len(global_size) > 3:
        raise ValueError(f"at most 3 launch dimensions, got {global_size}")
    return global_size, local_size


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def compile_jobs() -> int:
    """Pieces of a program that compile at once: ``config.compile_jobs``, else one per core
    this process may use."""
    return get_config().compile_jobs or _cores()


def split_evenly(items: Sequence, parts: int, weight: Callable[[Any], float]) -> list[list]:
    """At most ``parts`` non-empty groups of about equal total weight, each in input order.

    Greedy: the heaviest remaining item goes to the lightest group. Deterministic: ties go to
    the earlier item and the earlier group. Example::

        >>> split_evenly([5, 1, 1, 3], 2, weight=lambda x: x)
        [[5], [1, 1, 3]]
    """
    parts = max(1, min(parts, len(items)))
    groups: list[list[int]] = [[] for _ in range(parts)]
    totals = [0.0] * parts
    for index in sorted(range(len(items)), key=lambda i: (-weight(items[i]), i)):
        lightest = min(range(parts), key=lambda g: (totals[g], g))
        groups[lightest].append(index)
        totals[lightest] += weight(items[index])
    return [[items[i] for i in sorted(group)] for group in groups if group]


def host_buffer(device: Device, nbytes: int, alignment: int = 64) -> Buffer:
    """A Buffer of host memory whose handle is a uint8 array aligned to ``alignment`` bytes.

    64 bytes is a cache line on x86 and most ARM cores, and an AVX-512 register, so aligned
    vector loads never split a line.
    """
    from gingham.errors import DeviceMemoryError

    try:
        raw = np.empty(max(nbytes, 1) + alignment, dtype=np.uint8)
    except MemoryError:
        raise DeviceMemoryError(
            f"{device.id}: out of host memory allocating {nbytes} bytes "
            f"({nbytes / 2**30:.2f} GiB); free buffers or use a smaller batch") from None
    offset = (-raw.ctypes.data) % alignment
    return Buffer(device, nbytes, raw[offset:offset + nbytes],
                  address=raw.ctypes.data + offset)
