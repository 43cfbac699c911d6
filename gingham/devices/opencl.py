"""``opencl:N`` devices: OpenCL C through pyopencl, over whatever ICDs are installed.

Every device of every platform that answers is listed, in platform order (PoCL, NVIDIA,
AMD, Intel, ...; no whitelist); a platform that throws is skipped with a debug message.

Kernels are OpenCL C ``__kernel`` functions; ``launch`` sets one argument per Buffer
(``__global T*``) and per NumPy scalar (``int``, ``long``, ``float``, ...) and enqueues an
NDRange of ``global_size`` work-items in work-groups of ``local_size`` (None: the driver
picks). OpenCL 1.2 requires ``global_size`` to be a multiple of ``local_size``: round it up
and guard with ``if (i < n)`` in the kernel::

    >>> dev.launch(k, [C, A, B, np.int32(n)], global_size=(round_up(n, 64),),
    ...            local_size=(64,))

Launches are asynchronous on one in-order queue; copies are blocking. Program binaries are
cached on disk (``CL_PROGRAM_BINARIES``) keyed with the platform and driver versions and the
device name, so a second process builds nothing.

Programs build in threads of this process, or in compile worker processes where the driver
serialises builds inside a process (NVIDIA's does; ``config.opencl_build``, see
:mod:`gingham.devices.opencl_build`); either way the binary is loaded here.
"""

from __future__ import annotations

import atexit
import threading
import time
import warnings
import weakref
from contextlib import contextmanager
from functools import cached_property
from typing import Iterator, Sequence

import numpy as np
import pyopencl as cl

from gingham.cache import DiskCache
from gingham.config import debug_print, get_config
from gingham.devices import opencl_build, opencl_worker
from gingham.devices.base import (Buffer, Device, DeviceInfo, Kernel, LaunchPlan, LaunchSpec,
                                  SampleLaunch, Slot, compile_jobs, normalize_args)
from gingham.devices.cpu import host_caches
from gingham.errors import DeviceError, DeviceMemoryError

# Status codes that mean "does not fit": in device memory, in host staging memory, or over
# CL_DEVICE_MAX_MEM_ALLOC_SIZE (often a quarter of global memory).
_OOM_CODES = {cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE, cl.status_code.OUT_OF_RESOURCES,
              cl.status_code.OUT_OF_HOST_MEMORY, cl.status_code.INVALID_BUFFER_SIZE}


_CPUID_VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}


def _query(device: cl.Device, name: str, default=None):
    try:
        return getattr(device, name)
    except (cl.Error, AttributeError):  # an extension query the device does not answer
        return default


def _kind(device: cl.Device) -> str:
    if device.type & cl.device_type.GPU:
        return "gpu"
    if device.type & cl.device_type.CPU:
        return "cpu"
    return "accelerator"


def _simd_width(device: cl.Device, kind: str) -> int:
    vendor = device.vendor.lower()
    if "nvidia" in vendor:
        return int(_query(device, "warp_size_nv", 32))  # a warp is 32 lanes on every NVIDIA GPU
    if kind == "gpu" and ("amd" in vendor or "advanced micro" in vendor):
        return int(_query(device, "wavefront_width_amd", 64))  # GCN/CDNA wave64
    if kind == "gpu" and "intel" in vendor:
        return 16  # Intel GPUs compile fp32 kernels to SIMD16 by default (SIMD8/32 possible)
    width = int(_query(device, "preferred_vector_width_float", 1) or 1)
    return max(1, min(width, 16))


def describe(device: cl.Device, device_id: str) -> DeviceInfo:
    """The DeviceInfo of one OpenCL device, from its queries (and /sys for CPU devices)."""
    kind = _kind(device)
    cache_bytes = int(_query(device, "global_mem_cache_size", 0) or 0)
    l1 = l2 = l3 = 0
    if kind == "cpu":
        # The OpenCL "global memory cache" of a CPU device is its last level; the host's
        # /sys description gives every level of the same silicon.
        caches = host_caches()
        l1, l2, l3 = caches["l1"], caches["l2"], caches["l3"] or cache_bytes
    else:
        l2 = cache_bytes  # on GPUs the global memory cache is the L2
    platform = device.platform
    vendor = device.vendor.strip()
    vendor = _CPUID_VENDORS.get(vendor, vendor)  # CPU devices report the CPUID vendor string
    return DeviceInfo(
        id=device_id, name=device.name.strip(), vendor=vendor, kind=kind,
        dialect="opencl", compute_units=int(device.max_compute_units),
        global_memory_bytes=int(device.global_mem_size),
        local_memory_bytes=int(device.local_mem_size),
        max_work_group_size=int(device.max_work_group_size),
        simd_width=_simd_width(device, kind),
        cache_line_bytes=int(_query(device, "global_mem_cacheline_size", 0) or 0),
        l1_bytes=l1, l2_bytes=l2, l3_bytes=l3,
        driver_version=f"{platform.name.strip()} {platform.version.strip()}; "
                       f"driver {device.driver_version.strip()}",
        compiler_version=str(_query(device, "opencl_c_version", device.version)).strip())


def ieee_build_options(device: cl.Device) -> tuple[str, ...]:
    """The build options that make a device's float32 arithmetic IEEE's, as the C and CUDA
    backends': no ``-cl-fast-relaxed-math`` or ``-cl-mad-enable``, and correctly rounded
    division and square root where the device offers them. OpenCL's default allows 2.5 ulp
    for ``/`` (NVIDIA's driver uses it): ``x / scale`` one ulp below a half then rounds the
    other way (ONNX's DynamicQuantizeLinear gave 25 for 26 on an H100)."""
    correct = cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT
    if int(_query(device, "single_fp_config", 0) or 0) & correct:
        return ("-cl-fp32-correctly-rounded-divide-sqrt",)
    return ()


#: A compile worker runs a kernel once (``OpenCLDevice._build_sampled``) only if its buffers
#: take at most this fraction of the device's memory: ResNet-9's largest at batch 512 is
#: 770 MB, about a thirtieth of a 24 GiB host's.
SAMPLE_MEMORY_SHARE = 8


class OpenCLDevice(Device):
    """One OpenCL device; its context and queue are created on first use."""

    pools_buffers = True  # an allocation is touched by a blocking copy: reuse instead
    cache_namespace = "opencl"
    source_suffix = ".cl"

    def __init__(self, device: cl.Device, device_id: str) -> None:
        super().__init__(describe(device, device_id))
        self.cl_device = device
        self.build_options = ieee_build_options(device)
        self.max_alloc_bytes = int(device.max_mem_alloc_size)
        self.allocated_bytes = 0
        self._context: cl.Context | None = None
        self._queue: cl.CommandQueue | None = None
        self._mode: str | None = None  # "threads" / "processes", set with the context
        self._pool: opencl_build.BuildPool | None = None  # None: not running
        self._check_thread: threading.Thread | None = None  # opencl_build=auto's check
        self._program_built = threading.Event()  # a program's compile has ended
        self._profiling: cl.CommandQueue | None = None  # for clocked_launches
        self._pool_lock = threading.Lock()
        self._activity = opencl_build.Activity()

    @property
    def queue(self) -> cl.CommandQueue:
        if self._queue is None:
            # A process that uses the device compiles soon (a model's parameters are copied
            # in before its first step is traced): the compile workers, or the check that
            # decides on them, start now and overlap the tracing and lowering. They start
            # before this process's own context: a head start of its creation (0.25-0.5 s
            # on the H200). Whether that makes them ready sooner is open: contexts created
            # at once wait for each other (docs/opencl-builds.md, "The first step").
            self._prepare_builds()
            start = time.perf_counter()
            self._context = cl.Context([self.cl_device])
            self._queue = cl.CommandQueue(self._context)
            debug_print(1, f"{self.id}: context created in "
                        f"{(time.perf_counter() - start) * 1e3:.0f} ms")
            self._measure_model_meanwhile()
        return self._queue

    @property
    def context(self) -> cl.Context:
        self.queue  # noqa: B018 - creates both
        assert self._context is not None
        return self._context

    def _out_of_memory(self, nbytes: int, why: str) -> DeviceMemoryError:
        return DeviceMemoryError(
            f"{self.id} ({self.info.name}): cannot allocate {nbytes / 2**20:.1f} MiB: {why} "
            f"(this process holds {self.allocated_bytes / 2**20:.1f} MiB of "
            f"{self.info.global_memory_bytes / 2**20:.1f} MiB); free buffers or use a "
            "smaller batch")

    def _alloc(self, nbytes: int) -> Buffer:
        if nbytes > self.max_alloc_bytes:
            raise self._out_of_memory(nbytes, f"over the largest single allocation, "
                                              f"{self.max_alloc_bytes / 2**20:.1f} MiB")
        # Drivers may oversubscribe (PoCL mallocs lazily); a budget gives a clear error
        # instead of an OOM-killed process or a slow paging GPU.
        if self.allocated_bytes + nbytes > self.info.global_memory_bytes:
            raise self._out_of_memory(nbytes, "over the device's global memory")
        try:
            handle = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(nbytes, 1))
            # OpenCL allocates on first use; touching one byte makes a failure show up here
            # rather than at some later kernel launch.
            cl.enqueue_copy(self.queue, handle, np.zeros(1, np.uint8), is_blocking=True)
        except cl.Error as exc:
            if exc.code not in _OOM_CODES:
                raise
            if self.release_compile_workers():
                return self._alloc(nbytes)  # once: no workers are left to release
            raise self._out_of_memory(nbytes, str(exc)) from None
        self.allocated_bytes += nbytes
        return Buffer(self, nbytes, handle, release=self._releaser(nbytes))

    def _releaser(self, nbytes: int):
        def release(handle: cl.Buffer) -> None:
            self.allocated_bytes -= nbytes
            handle.release()
        return release

    def _copy_in(self, buffer: Buffer, array: np.ndarray) -> None:
        if array.nbytes:
            cl.enqueue_copy(self.queue, buffer.handle, array, is_blocking=True)

    def _copy_out(self, buffer: Buffer, array: np.ndarray) -> None:
        if array.nbytes:
            cl.enqueue_copy(self.queue, array, buffer.handle, is_blocking=True)

    def _compiler_identity(self) -> tuple:
        return (self.info.name, self.info.vendor, self.info.driver_version,
                self.info.compiler_version, self.build_options)

    # ---- where programs build ------------------------------------------------------

    def _prepare_builds(self) -> None:
        """Decide where programs build, when the context is created: start the compile
        workers for ``processes``; with ``auto`` on a GPU whose driver was never checked,
        start them too and check later, when no compile is in flight."""
        mode = self._configured_build_mode()
        if mode == "auto":
            # Processes are the safe guess: where the driver serialises builds they are the
            # only way to build a step's pieces at once, and where it does not they cost
            # only their start-up, which overlaps tracing and lowering. The first step
            # never waits for the check; the verdict serves the next processes.
            mode = "processes"
            self._check_thread = threading.Thread(target=self._check_when_quiet, daemon=True,
                                                  name="gingham-opencl-build-check")
            self._check_thread.start()
        self._mode = mode
        if mode == "processes":
            self._running_pool()

    def _configured_build_mode(self) -> str:
        """``threads``, ``processes``, or ``auto`` when only the check can tell."""
        config = get_config()
        if compile_jobs() == 1:
            return "threads"  # nothing builds at once
        if config.opencl_build != "auto":
            return config.opencl_build
        if self.info.kind == "cpu":
            # PoCL builds one program at a time in a process and generates each kernel's
            # work-group function at its first launch, which only a worker can take off the
            # first step (_build_sampled). The story net's fresh first step on 2 EPYC cores
            # (two compile jobs): threads 41.6 s (23.1 s of builds, then 17 s of first
            # launches), processes 30.0 s (11.7 s of builds), processes running each kernel
            # once 23.1 s (21.5 s of builds, first launches 0.5 s). Other CPU drivers'
            # builds run on the very cores a worker would need: they stay here.
            return "processes" if self.generates_at_launch else "threads"
        verdict = _verdicts.get(self._compiler_identity())
        if verdict is None:
            record = DiskCache(self.cache_namespace).get(self._verdict_key())
            if record in (b"processes", b"threads"):
                verdict = _verdicts[self._compiler_identity()] = record.decode()
        return verdict or "auto"

    def _verdict_key(self) -> str:
        return DiskCache.key(self.cache_namespace, "build-verdict", self._compiler_identity())

    def _check_when_quiet(self) -> None:
        """Time a few builds at once in one process (a compile worker, see
        :meth:`_check_builds`), once the first program's compile is done and none is in
        flight, with the workers started (their start-up takes the CPU); a compile that
        starts meanwhile voids the timing, and the check runs again at the next quiet
        moment. Records the verdict for later processes; a parallel driver gets threads in
        this process too, from the next program on."""
        # Not before a program's compile has ended: a single compile (the device model's
        # micro-benchmarks, measured while the first step is traced) is not the first step's.
        self._program_built.wait()
        for _ in range(_CHECK_ATTEMPTS):
            self._activity.wait_quiet(started=1)
            pool = self._pool
            if pool is not None:
                pool.wait_ready(timeout=60)
            generation = self._activity.wait_quiet(started=1)
            start = time.perf_counter()
            try:
                result = self._check_builds(pool, generation)
            except Exception as exc:  # noqa: BLE001 - a check that fails must not fail a step
                debug_print(1, f"{self.id}: the build concurrency check failed ({exc}); "
                            "building in processes")
                return
            if result is None:
                if _stopping.is_set():
                    return
                debug_print(1, f"{self.id}: a compile started during the build concurrency "
                            "check; checking again when none is in flight")
                continue
            serialised, ratio = result
            verdict = "processes" if serialised else "threads"
            with self._activity.quiet_since(generation) as quiet:
                if not quiet:
                    continue
                _verdicts[self._compiler_identity()] = verdict
                DiskCache(self.cache_namespace).put(self._verdict_key(), verdict.encode())
                released = None if serialised else self._release_pool(to_mode="threads")
            debug_print(1, f"{self.id}: builds at once took {ratio:.2f}x as long as one by one "
                        f"({'serialised' if serialised else 'parallel'}; checked in "
                        f"{(time.perf_counter() - start) * 1e3:.0f} ms): building in {verdict} "
                        "from now on")
            if released is not None:
                released.close()
            return
        debug_print(1, f"{self.id}: no quiet moment for the build concurrency check in "
                    f"{_CHECK_ATTEMPTS} tries; building in processes")

    def _check_builds(self, pool: opencl_build.BuildPool | None,
                      generation: int) -> tuple[bool, float] | None:
        """``builds_serialise`` in a compile worker (its builds hold up nothing here: on
        NVIDIA, the check's builds in this process made the steps they overlapped 0.2 s
        slower), or here when no worker serves; None when a compile started meanwhile."""
        if pool is not None:
            result = pool.check_builds()
            if result is not None:
                return None if self._activity.disturbed_since(generation) else result
        _BUILDING_CHECKS.add(threading.current_thread())
        try:
            return opencl_build.builds_serialise(
                self._build_here, abandon=lambda: (_stopping.is_set() or
                                                   self._activity.disturbed_since(generation)))
        finally:
            _BUILDING_CHECKS.discard(threading.current_thread())

    def _running_pool(self) -> opencl_build.BuildPool:
        """The compile workers, started (again, after an idle release) if need be; until the
        first is ready a build runs in this process, so none waits for their start-up."""
        with self._pool_lock:
            if self._pool is None:
                jobs = compile_jobs()
                self._pool = opencl_build.BuildPool(opencl_build.target_of(self.cl_device),
                                                    jobs, name=self.id)
                self._pool.start()
                idle = get_config().opencl_idle
                if idle != float("inf"):
                    threading.Thread(target=self._release_when_idle, args=(self._pool, idle),
                                     daemon=True, name="gingham-opencl-workers-idle").start()
            return self._pool

    def _release_pool(self, to_mode: str = "processes") -> opencl_build.BuildPool | None:
        """Detach the workers (the caller closes them, outside any lock); the mode the next
        program builds in. Call only where no compile is in flight or can start."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
            self._mode = to_mode
        return pool

    def release_compile_workers(self) -> bool:
        """Stop the compile workers now, when no compile is in flight; True if there were any.

        Each worker holds a context on the device (524 MiB of an H200's memory), so an
        allocation that fails first gives their memory back and tries once more, instead of
        failing a step while idle workers wait for their timeout (``opencl_idle``). The next
        program to build starts them again.
        """
        pool = self._pool
        if pool is None:
            return False
        # False also when a compile started meanwhile: it needs its workers.
        return self._stop_workers(pool, self._activity.wait_quiet(),
                                  "out of device memory, to free their contexts")

    def _release_when_idle(self, pool: opencl_build.BuildPool, seconds: float) -> None:
        """Stop ``pool``'s workers once no compile has run for ``seconds``: each holds a
        device context (on NVIDIA, GPU memory), and a training loop stops compiling after
        its first steps. The next program to build starts them again. Idle counts from when
        the workers are up (see :meth:`CUDADevice._release_when_idle`)."""
        pool.wait_ready(timeout=opencl_build.STARTUP_WAIT)
        started = time.monotonic()
        # Ends too when the pool is released otherwise (the check found builds parallel).
        while self._pool is pool:
            generation = self._activity.wait_idle(seconds, since=started)
            if self._stop_workers(pool, generation, f"no build for {seconds:g} s"):
                return

    def _stop_workers(self, pool: opencl_build.BuildPool, generation: int, why: str) -> bool:
        """Stop ``pool``'s workers if it is still this device's and no compile has started
        since ``generation`` (none can start while it is released); True if stopped."""
        with self._activity.quiet_since(generation) as quiet:
            if not quiet or self._pool is not pool:
                return False
            self._release_pool()
        debug_print(1, f"{self.id}: {why}: stopping the compile workers ({pool.serving} "
                    f"serving of {pool.size})")
        pool.close()
        return True

    def build_mode(self) -> str:
        """Where this device's programs build: ``threads`` or ``processes``, decided when
        its context is created (``auto`` on a GPU not yet checked: processes, checked
        later). Example::

            >>> get_device("opencl:0").build_mode()   # NVIDIA's driver, 16 cores
            'processes'
        """
        self.queue  # noqa: B018 - the decision is made with the context
        assert self._mode is not None
        return self._mode

    @property
    def build_pool(self) -> opencl_build.BuildPool | None:
        """The compile worker processes, when they are running."""
        return self._pool

    def wait_for_build_check(self, timeout: float | None = None) -> bool:
        """Wait for ``auto``'s check, when this device runs one; True when none is running."""
        if self._check_thread is not None:
            self._check_thread.join(timeout)
            return not self._check_thread.is_alive()
        return True

    def _build(self, source: str, entry: str) -> bytes:
        return self._build_running(source, ())

    def _build_sampled(self, source: str, entries: Sequence[str],
                       samples: Sequence[SampleLaunch | None]) -> bytes:
        # Where the driver generates code at a kernel's first launch (PoCL), a worker runs
        # the piece's kernels once before it hands the binary over: that code then comes
        # with the binary instead of one kernel after another at the first step's launches.
        # A kernel whose buffers would take more than a share of the memory (each worker
        # allocates them, beside this process's own) is left to its first launch here.
        budget = self.info.global_memory_bytes // SAMPLE_MEMORY_SHARE
        runs = [(entry, sample.global_size, sample.local_size, sample.buffer_bytes)
                for entry, sample in zip(entries, samples)
                if sample is not None and self.generates_at_launch
                and sum(sample.buffer_bytes) <= budget]
        return self._build_running(source, runs)

    def _build_running(self, source: str, samples: Sequence[tuple]) -> bytes:
        """The binary of ``source`` from where programs build (this process, or the first
        free worker, which first runs ``samples``: see :func:`opencl_worker.run_samples`)."""
        if self.build_mode() == "threads":
            return self._build_here(source)
        ok, payload = self._running_pool().build(source, " ".join(self.build_options),
                                                 local=lambda: self._build_here(source),
                                                 samples=samples)
        if not ok:
            raise self.compile_error(source, "the OpenCL compiler rejected the kernel",
                                     str(payload))
        return payload

    @cached_property
    def generates_at_launch(self) -> bool:
        """Whether the driver generates a kernel's code at its first launch, per launch class
        (PoCL's CPU drivers: each work-group function for its work-group size and grid;
        see :func:`~gingham.devices.opencl_worker.run_samples`)."""
        return self.info.kind == "cpu" and \
            self.cl_device.platform.name.strip() == "Portable Computing Language"

    @cached_property
    def recompiles_binaries(self) -> bool:
        """Whether the driver compiles a program's binary again when it is loaded: NVIDIA's
        binaries are PTX, compiled one program at a time in a process unless the driver's
        disk cache already holds the device code (docs/opencl-builds.md)."""
        return self.cl_device.platform.name.strip() == "NVIDIA CUDA"

    def _load_pieces(self, pieces):
        # A warm gingham cache on a machine whose driver cache is cold (one imported with
        # `gingham cache import`): loading ResNet-9's 48 pieces here would compile their PTX
        # one after another, 0.1-0.15 s each on the H200. The compile workers take pieces
        # from the back meanwhile, so that this process finds those in the driver's cache.
        pool = self._pool
        if len(pieces) < 2 or pool is None or pool.closed or not self.recompiles_binaries:
            return super()._load_pieces(pieces)
        work = opencl_build.LoadQueue([binary for binary, _, _ in pieces])
        pool.load_binaries(work, " ".join(self.build_options))
        results = [None] * len(pieces)
        while (index := work.take_front()) is not None:
            results[index] = self._load_piece(*pieces[index])
        ahead = work.taken_by_workers()
        for index in ahead:
            work.wait(index)
            results[index] = self._load_piece(*pieces[index])
        debug_print(1, f"{self.id}: loaded {len(pieces)} cached piece(s), {len(ahead)} of "
                    "them built ahead by the compile workers")
        return results

    def _build_here(self, source: str) -> bytes:
        # pyopencl's low-level _Program skips pyopencl's own binary cache (in the home
        # directory): gingham caches the binary itself, under cache_dir.
        options = " ".join(self.build_options).encode()
        program = cl._cl._Program(self.context, source)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program.build(options, [self.cl_device])
        except cl.Error as exc:
            try:
                log = program.get_build_info(self.cl_device, cl.program_build_info.LOG)
            except cl.Error:
                log = ""
            raise self.compile_error(source, "the OpenCL compiler rejected the kernel",
                                     log or str(exc)) from None
        binaries = program.get_info(cl.program_info.BINARIES)
        assert len(binaries) == 1 and binaries[0], "expected one binary for one device"
        return bytes(binaries[0])

    def _load(self, binary: bytes, entry: str, key: str) -> Kernel:
        return self._load_many(binary, [entry], key)[0]

    def _load_many(self, binary: bytes, entries, key: str) -> list[Kernel]:
        # One program object per binary, however many kernels it holds.
        program = opencl_worker.program_from_binary(cl, self.context, self.cl_device, binary,
                                                    " ".join(self.build_options))
        kernels = []
        for entry in entries:
            try:
                kernel = cl.Kernel(program, entry)
            except cl.Error as exc:
                raise DeviceError(f"no __kernel named {entry!r} in the program ({exc})") from None
            kernels.append(Kernel(self, entry, key, kernel, keepalive=program))
        return kernels

    # Every build and load runs inside ``_activity.busy()``: the build check and the idle
    # release of the workers wait until none is in flight.

    def compile_many(self, source, entries):
        self.context  # noqa: B018 - create it first, outside the activity
        with self._activity.busy():
            return super().compile_many(source, entries)

    def unit_builder(self, assemble=None, jobs=None, eager=None):
        self.context  # noqa: B018 - create it here, before builds run in several threads
        return super().unit_builder(assemble, jobs, eager)

    @contextmanager
    def _compiling(self) -> Iterator[None]:
        # A unit builder's whole life (compile_units and compile_program use one) is one
        # compile in flight; the pieces the worker processes built are reported at its end.
        pool = self._pool
        before = (pool.built_by_workers, pool.built_here) if pool else (0, 0)
        with self._activity.busy():
            yield
        self._program_built.set()
        pool = self._pool
        if pool is not None:
            debug_print(1, f"{self.id}: {pool.built_by_workers - before[0]} piece(s) built "
                        f"by compile worker processes ({pool.serving} serving "
                        f"of {pool.size}), {pool.built_here - before[1]} in this process")

    def _launch(self, kernel: Kernel, args: list, global_size: tuple[int, ...],
                local_size: tuple[int, ...] | None, shared_bytes: int) -> None:
        _check_sizes(global_size, local_size, shared_bytes)
        handle: cl.Kernel = kernel.handle
        for index, arg in enumerate(args):
            handle.set_arg(index, arg.handle if isinstance(arg, Buffer) else arg)
        cl.enqueue_nd_range_kernel(self.queue, handle, global_size, local_size)

    def _plan(self, specs: list[LaunchSpec], n_slots: int) -> LaunchPlan:
        return _OpenCLPlan(self, specs, n_slots)

    def _synchronize(self) -> None:
        if self._queue is not None:
            self._queue.finish()

    clocks_launches = True  # profiling events

    def clocked_launches(self, kernel, args, global_size, local_size, count):
        # A queue of its own, with profiling (which the step's queue does without), on the
        # same context: the buffers are shared. Its own cl.Kernel: arguments are state of
        # the kernel object, and the step's thread may launch the same kernel meanwhile.
        _check_sizes(global_size, local_size, 0)
        context = self.context  # outside the lock: creating it takes the lock
        with self._pool_lock:
            if self._profiling is None:
                self._profiling = cl.CommandQueue(
                    context, properties=cl.command_queue_properties.PROFILING_ENABLE)
            queue = self._profiling
        handle = cl.Kernel(kernel.keepalive, kernel.entry)
        for index, arg in enumerate(normalize_args(args, self)):
            handle.set_arg(index, arg.handle if isinstance(arg, Buffer) else arg)
        self.stats.launches += count
        # The first launch waits for a user event set once all are queued: the launches run
        # back to back however long this thread takes to queue them (one that shares the
        # interpreter with a busy thread waits milliseconds per call), so the span from the
        # first start to the last end is the device's alone.
        gate = cl.UserEvent(context)
        events = []
        try:
            for index in range(count):
                events.append(cl.enqueue_nd_range_kernel(
                    queue, handle, tuple(global_size),
                    None if local_size is None else tuple(local_size),
                    wait_for=None if index else [gate]))
        finally:
            gate.set_status(cl.command_execution_status.COMPLETE)
        queue.finish()
        return [(event.profile.start * 1e-9, event.profile.end * 1e-9) for event in events]


def _check_sizes(global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                 shared_bytes: int) -> None:
    if shared_bytes:
        raise ValueError("OpenCL kernels declare __local arrays with a static size; "
                         "shared_bytes must be 0")
    if not global_size:
        raise ValueError("an OpenCL launch needs a global_size, e.g. (n,)")
    if local_size is not None:
        for g, l in zip(global_size, local_size):
            if l <= 0 or g % l:
                raise ValueError(f"global_size {global_size} must be a multiple of "
                                 f"local_size {local_size} in OpenCL: round it up and "
                                 "guard the kernel with `if (i < n)`")


class _OpenCLPlan(LaunchPlan):
    """Kernel arguments set once; a run re-sets only the slots whose buffer changed, then
    enqueues. Each launch gets its own ``cl.Kernel`` (arguments are state of the kernel
    object, and a compiled kernel is shared by every executable that uses it)."""

    def __init__(self, device: OpenCLDevice, specs: list[LaunchSpec], n_slots: int) -> None:
        super().__init__(device, specs, n_slots)
        self._uses: list[list[tuple[cl.Kernel, int]]] = [[] for _ in range(n_slots)]
        self._current: list = [None] * n_slots  # the cl.Buffer each slot is set to
        self._enqueues = []
        for spec in specs:
            _check_sizes(spec.global_size, spec.local_size, spec.shared_bytes)
            kernel = cl.Kernel(spec.kernel.keepalive, spec.kernel.entry)
            for index, arg in enumerate(spec.args):
                if isinstance(arg, Slot):
                    self._uses[arg.index].append((kernel, index))
                else:
                    kernel.set_arg(index, arg.handle if isinstance(arg, Buffer) else arg)
            self._enqueues.append((kernel, spec.global_size, spec.local_size))

    def _run(self, buffers) -> None:
        current = self._current
        for index, buffer in enumerate(buffers):
            handle = buffer._handle
            if handle is not current[index]:
                for kernel, position in self._uses[index]:
                    kernel.set_arg(position, handle)
                current[index] = handle
        queue, enqueue = self.device.queue, cl.enqueue_nd_range_kernel
        for kernel, global_size, local_size in self._enqueues:
            enqueue(queue, kernel, global_size, local_size)


#: compiler identity -> "threads" / "processes": the check's verdict, once per process
_verdicts: dict[tuple, str] = {}

#: how often the check starts again after a compile voided its timing, before giving up
#: (a later process checks again: the verdict is recorded only when one succeeds)
_CHECK_ATTEMPTS = 5

#: build checks that are building now, and the flag that stops them at exit: a check
#: thread inside the driver while the process exits could crash the exit (a check that
#: only waits for a quiet moment is a daemon thread, left waiting)
_BUILDING_CHECKS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_stopping = threading.Event()


@atexit.register
def _stop_checks() -> None:
    _stopping.set()  # a check stops before its next build
    for thread in list(_BUILDING_CHECKS):
        thread.join(timeout=10)  # at most the probe build in flight (NVIDIA: ~0.25 s)


def discover() -> list[Device]:
    """Every device of every OpenCL platform that answers, as ``opencl:0``, ``opencl:1``..."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # PLATFORM_NOT_FOUND_KHR: no ICD installed
        raise DeviceError(f"no OpenCL platform found ({exc}); install an OpenCL driver "
                          "(e.g. pocl-opencl-icd, or your GPU vendor's)") from None
    devices: list[Device] = []
    for platform in platforms:
        try:
            found = platform.get_devices()
        except cl.Error as exc:
            debug_print(1, f"opencl: skipping platform {platform.name!r}: {exc}")
            continue
        for cl_device in found:
            device_id = f"opencl:{len(devices)}"
            try:
                devices.append(OpenCLDevice(cl_device, device_id))
            except cl.Error as exc:
                debug_print(1, f"opencl: skipping device {cl_device.name!r}: {exc}")
    return devices
