"""``cuda:N`` devices: CUDA C compiled by NVRTC, run through the driver API (cuda-python).

Kernels are ``extern "C" __global__`` functions (``extern "C"`` keeps the name unmangled so
``entry`` finds it). ``launch`` passes one device pointer per Buffer (``T*``) and one C
scalar per NumPy scalar; ``global_size`` counts threads, like OpenCL's NDRange, and the grid
is ``ceil(global / local)`` blocks of ``local_size`` threads (None: 256 threads along x), so
kernels guard with ``if (i < n)``::

    extern "C" __global__ void add(float* c, const float* a, const float* b, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }

    >>> dev.launch(k, [C, A, B, np.int32(n)], global_size=(n,), local_size=(256,))

``shared_bytes`` is dynamic shared memory (``extern __shared__ float tile[];``); above 48 KiB
the kernel's limit is raised with cuFuncSetAttribute (Hopper allows up to 227 KiB a block).

NVRTC compiles to a cubin for the device's exact architecture (``sm_90`` on an H100/H200);
when this NVRTC does not know the architecture it emits PTX for the newest one it knows and
the driver JIT-compiles it. Binaries are cached on disk keyed with the NVRTC and driver
versions. Every cuda-python call returns a tuple whose first element is the error code.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import threading
import time
import weakref
from typing import Iterator

import numpy as np

try:
    from cuda.bindings import driver, nvrtc
except ImportError:  # cuda-python < 12.6 had the older layout
    from cuda import cuda as driver  # type: ignore[no-redef]
    from cuda import nvrtc  # type: ignore[no-redef]

from gingham.config import debug_print, get_config
from gingham.devices import opencl_build, opencl_worker
from gingham.devices.base import (SCALAR_CTYPES, Buffer, Device, DeviceInfo, Kernel, LaunchPlan,
                                  LaunchSpec, Slot, compile_jobs)
from gingham.errors import DeviceError, DeviceMemoryError, DeviceNotFoundError

# Without opting in, a block may use 48 KiB of shared memory on every NVIDIA GPU since Volta.
_DEFAULT_SHARED_LIMIT = 48 * 1024
_DEFAULT_BLOCK = 256
# L2 lines are 128 bytes (four 32-byte sectors) on every NVIDIA GPU since Kepler.
_CACHE_LINE = 128


def _code(status) -> int:
    return int(getattr(status, "value", status))


def _error_name(status) -> str:
    try:
        err, name = driver.cuGetErrorName(status)
        if _code(err) == 0 and name:
            return name.decode()
    except Exception:  # noqa: BLE001 - an nvrtcResult, or a broken driver
        pass
    return str(status)


class CUDAError(DeviceError):
    """A CUDA driver or NVRTC call failed; ``code`` is the numeric status."""

    def __init__(self, message: str, code: int) -> None:
        self.code = code
        super().__init__(message)


def _check(result: tuple, what: str):
    """Unpack a cuda-python result tuple: raise on a bad status, return the outputs."""
    status, *outputs = result
    if _code(status) != 0:
        raise CUDAError(f"{what} failed: {_error_name(status)}", _code(status))
    if not outputs:
        return None
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _attribute(device, name: str) -> int:
    attribute = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return int(_check(driver.cuDeviceGetAttribute(attribute, device), f"reading {name}"))


def _nvrtc_version() -> tuple[int, int]:
    major, minor = _check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def nvrtc_options_for(version: tuple[int, int]) -> tuple[str, ...]:
    """NVRTC's options beside the target. IEEE arithmetic: no ``--use_fast_math``. From 12.4,
    ``-minimal``: generated kernels use no texture, runtime-API or device-launch declarations,
    and leaving them out of NVRTC's built-in header takes a sixth off a ResNet-9 step's NVRTC
    time (19.0 -> 14.8 s over its 123 kernels one by one; 51 -> 21 ms of front end a program).

    Not ``--Ofast-compile`` (12.8 and later): ``mid`` halves the tiled products' NVRTC time
    but made an H100's fp32 ResNet-9 step 36x slower (29.9 -> 1062 ms; the conv layer 40x);
    ``max`` did not finish the step's first epoch within 40 s."""
    return ("-minimal",) if version >= (12, 4) else ()


def _nvrtc_target(arch: int) -> tuple[str, bool]:
    """(--gpu-architecture value, True for a cubin / False for PTX) for compute capability."""
    try:
        supported = [int(a) for a in _check(nvrtc.nvrtcGetSupportedArchs(), "archs")]
    except Exception:  # noqa: BLE001 - an old NVRTC without the query: try the cubin
        return f"sm_{arch}", True
    # Hopper's warpgroup products (wgmma) exist only in the architecture-specific target
    # sm_90a, a superset of sm_90 (its cubin runs on compute capability 9.0 only, as every
    # cubin compiled here for its own device does).
    specific = "a" if arch == 90 else ""
    if arch in supported:
        return f"sm_{arch}{specific}", True
    older = [a for a in supported if a <= arch]
    if not older:
        raise DeviceError(f"this NVRTC supports sm_{min(supported)}..sm_{max(supported)} and "
                          f"cannot compile for sm_{arch}; install an older cuda-python/NVRTC")
    return f"compute_{max(older)}", False


class CUDADevice(Device):
    """One NVIDIA GPU; its primary context is retained on first use."""

    cache_namespace = "cuda"
    source_suffix = ".cu"
    pools_buffers = True  # cuMemFree waits for the GPU: recycle released memory instead

    def __init__(self, ordinal: int) -> None:
        self.cu_device = _check(driver.cuDeviceGet(ordinal), "cuDeviceGet")
        name = _check(driver.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName")
        name = name.split(b"\0", 1)[0].decode(errors="replace").strip()
        self.arch = 10 * _attribute(self.cu_device, "COMPUTE_CAPABILITY_MAJOR") + \
            _attribute(self.cu_device, "COMPUTE_CAPABILITY_MINOR")
        version = int(_check(driver.cuDriverGetVersion(), "cuDriverGetVersion"))
        nvrtc_major, nvrtc_minor = _nvrtc_version()
        self.nvrtc_options = nvrtc_options_for((nvrtc_major, nvrtc_minor))
        self.target, self.cubin = _nvrtc_target(self.arch)
        super().__init__(DeviceInfo(
            id=f"cuda:{ordinal}", name=name, vendor="NVIDIA", kind="gpu", dialect="cuda",
            compute_units=_attribute(self.cu_device, "MULTIPROCESSOR_COUNT"),
            global_memory_bytes=int(_check(driver.cuDeviceTotalMem(self.cu_device),
                                           "cuDeviceTotalMem")),
            # What one block may use after opting in (launch opts in as needed).
            local_memory_bytes=_attribute(self.cu_device, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            max_work_group_size=_attribute(self.cu_device, "MAX_THREADS_PER_BLOCK"),
            simd_width=_attribute(self.cu_device, "WARP_SIZE"),
            cache_line_bytes=_CACHE_LINE,
            l1_bytes=0,  # L1 is carved out of the shared-memory array; not queryable
            l2_bytes=_attribute(self.cu_device, "L2_CACHE_SIZE"), l3_bytes=0,
            driver_version=f"CUDA driver {version // 1000}.{version % 1000 // 10}",
            compiler_version=f"NVRTC {nvrtc_major}.{nvrtc_minor} -> {self.target}",
            compute_capability=self.arch))
        self._context = None
        self._shared_limits: dict[str, int] = {}  # key:entry -> dynamic shared bytes allowed
        self._pool: opencl_build.BuildPool | None = None  # NVRTC worker processes, if any
        self._pool_lock = threading.Lock()
        self._activity = opencl_build.Activity()  # compiles in flight, for the idle release

    # ---- context ----------------------------------------------------------------------

    def _activate(self) -> None:
        # The current context is per host thread: set it on every entry point (~1 us).
        if self._context is None:
            self._context = _check(driver.cuDevicePrimaryCtxRetain(self.cu_device),
                                   "cuDevicePrimaryCtxRetain")
            _check(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
            # The device model's set-up (its micro-benchmarks' compiles and buffers) then
            # runs beside the first step's tracing and fusion, not at the start of its lowering.
            self._measure_model_meanwhile()
            # Where NVRTC runs in worker processes, they start now, while the first step is
            # traced and planned (until one is ready, builds run here).
            self._running_pool()
            return
        _check(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")

    # ---- memory -----------------------------------------------------------------------

    def _alloc(self, nbytes: int) -> Buffer:
        self._activate()
        try:
            pointer = _check(driver.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc")
        except CUDAError as exc:
            if exc.code != _code(driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY):
                raise
            free, total = _check(driver.cuMemGetInfo(), "cuMemGetInfo")
            raise DeviceMemoryError(
                f"{self.id} ({self.info.name}): out of memory allocating "
                f"{nbytes / 2**20:.1f} MiB ({int(free) / 2**20:.1f} MiB free of "
                f"{int(total) / 2**20:.1f} MiB); free buffers or use a smaller batch") from None
        return Buffer(self, nbytes, pointer, release=self._free, address=int(pointer))

    def _free(self, pointer) -> None:
        self._activate()
        _check(driver.cuMemFree(pointer), "cuMemFree")

    def _copy_in(self, buffer: Buffer, array: np.ndarray) -> None:
        self._activate()
        if array.nbytes:
            _check(driver.cuMemcpyHtoD(buffer.handle, array.ctypes.data, array.nbytes),
                   "cuMemcpyHtoD (or an earlier kernel)")

    def _copy_out(self, buffer: Buffer, array: np.ndarray) -> None:
        self._activate()
        if array.nbytes:
            _check(driver.cuMemcpyDtoH(array.ctypes.data, buffer.handle, array.nbytes),
                   "cuMemcpyDtoH (or an earlier kernel)")

    # ---- kernels ----------------------------------------------------------------------

    def _compiler_identity(self) -> tuple:
        return (self.info.name, self.arch, self.target, self.info.driver_version,
                self.info.compiler_version, self.nvrtc_options)

    def _running_pool(self) -> opencl_build.BuildPool | None:
        """The NVRTC worker processes, started (again, after an idle release) if need be;
        None where pieces compile on threads here."""
        jobs = compile_jobs()
        config = get_config()
        if config.nvrtc_build != "processes" or jobs < 2:
            return None
        with self._pool_lock:
            if self._pool is None:
                self._pool = opencl_build.BuildPool({"compiler": "nvrtc", "cubin": self.cubin},
                                                    jobs, name=self.id)
                self._pool.start()
                if config.opencl_idle != float("inf"):
                    threading.Thread(target=self._release_when_idle,
                                     args=(self._pool, config.opencl_idle), daemon=True,
                                     name="gingham-nvrtc-workers-idle").start()
            return self._pool

    def _release_when_idle(self, pool: opencl_build.BuildPool, seconds: float) -> None:
        """Stop ``pool``'s workers once no compile has run for ``seconds`` (``opencl_idle``):
        each holds about 110 MB once NVRTC is loaded, and a training loop stops compiling
        after its first steps. The next compile starts them again. Idle counts from when the
        workers are up: under load (a test suite on every core) they took more than a short
        idle time to start, and the pool was stopped before it could serve."""
        pool.wait_ready(timeout=opencl_build.STARTUP_WAIT)
        started = time.monotonic()
        while self._pool is pool:
            generation = self._activity.wait_idle(seconds, since=started)
            with self._activity.quiet_since(generation) as quiet:
                if not quiet or self._pool is not pool:
                    continue
                self._pool = None
            debug_print(1, f"{self.id}: no compile for {seconds:g} s: stopping the NVRTC "
                        f"workers ({pool.serving} serving of {pool.size})")
            pool.close()
            return

    @property
    def build_pool(self) -> opencl_build.BuildPool | None:
        """The NVRTC worker processes, when they run (``nvrtc_build=processes``)."""
        return self._pool

    @contextlib.contextmanager
    def _compiling(self) -> Iterator[None]:
        # A unit builder's whole life is one compile in flight (the idle release waits for
        # none); with worker processes, its end reports where its pieces were built.
        pool = self._pool
        before = (pool.built_by_workers, pool.built_here) if pool else (0, 0)
        with self._activity.busy():
            yield
        if pool is not None:
            debug_print(1, f"{self.id}: {pool.built_by_workers - before[0]} piece(s) built "
                        f"by NVRTC worker processes ({pool.serving} serving of {pool.size}), "
                        f"{pool.built_here - before[1]} in this process")

    def _nvrtc_flags(self) -> list[str]:
        return [f"--gpu-architecture={self.target}", *self.nvrtc_options]

    def _build(self, source: str, entry: str) -> bytes:
        pool = self._running_pool()
        if pool is None:
            return self._build_here(source, entry)
        ok, payload = pool.build(source, " ".join(self._nvrtc_flags()),
                                 local=lambda: self._build_here(source, entry))
        if not ok:
            raise self.compile_error(source, "NVRTC rejected the kernel", str(payload))
        return payload

    def _build_here(self, source: str, entry: str) -> bytes:
        """NVRTC in this process (on the calling thread)."""
        try:
            ok, payload = opencl_worker.nvrtc_build(nvrtc, source, " ".join(self._nvrtc_flags()),
                                                    self.cubin, name=f"{entry}.cu")
        except opencl_worker.NVRTCCallFailed as exc:
            raise CUDAError(f"{exc.call} failed: {_error_name(exc.status)}",
                            _code(exc.status)) from None
        if not ok:
            raise self.compile_error(source, "NVRTC rejected the kernel", str(payload))
        return payload

    def _load(self, binary: bytes, entry: str, key: str) -> Kernel:
        return self._load_many(binary, [entry], key)[0]

    def _load_many(self, binary: bytes, entries, key: str) -> list[Kernel]:
        self._activate()
        # cuModuleLoadData takes a cubin or NUL-terminated PTX (which it JIT-compiles); one
        # module per binary, however many kernels it holds.
        module = _check(driver.cuModuleLoadData(binary), "cuModuleLoadData")
        kernels = []
        for entry in entries:
            try:
                function = _check(driver.cuModuleGetFunction(module, entry.encode()),
                                  "cuModuleGetFunction")
            except CUDAError:
                if not kernels:
                    driver.cuModuleUnload(module)
                raise DeviceError(f'no kernel named {entry!r}; declare it extern "C" '
                                  "__global__ so that its name is not mangled") from None
            kernels.append(Kernel(self, entry, key, function, keepalive=module))
        return kernels

    def unit_builder(self, assemble=None, jobs=None, eager=None):
        self._activate()  # retain the context here, before pieces load in several threads
        return super().unit_builder(assemble, jobs, eager)

    def _launch(self, kernel: Kernel, args: list, global_size: tuple[int, ...],
                local_size: tuple[int, ...] | None, shared_bytes: int) -> None:
        grid, block = _grid_and_block(global_size, local_size)
        self._activate()
        self._allow_shared(kernel, shared_bytes)
        values = [ctypes.c_uint64(arg.address) if isinstance(arg, Buffer)
                  else SCALAR_CTYPES[arg.dtype](arg) for arg in args]
        # cuLaunchKernel wants void**: one pointer to each argument's value.
        pointers = (ctypes.c_void_p * max(len(values), 1))(
            *[ctypes.addressof(value) for value in values])
        _check(driver.cuLaunchKernel(kernel.handle, *grid, *block, shared_bytes, 0,
                                     ctypes.addressof(pointers), 0),
               f"launching {kernel.entry} with grid {grid} and block {block}")

    def _allow_shared(self, kernel: Kernel, shared_bytes: int) -> None:
        """Opt the kernel in to ``shared_bytes`` of dynamic shared memory (above 48 KiB)."""
        limit_key = f"{kernel.key}:{kernel.entry}"  # the kernels of one program share a key
        if shared_bytes > self._shared_limits.get(limit_key, _DEFAULT_SHARED_LIMIT):
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(driver.cuFuncSetAttribute(kernel.handle, attribute, shared_bytes),
                   f"raising {kernel.entry}'s dynamic shared memory to {shared_bytes} bytes "
                   f"(this GPU allows {self.info.local_memory_bytes})")
            self._shared_limits[limit_key] = shared_bytes

    clocks_launches = True  # events, as timed_launches takes them

    def timed_launches(self, specs) -> list[float]:
        # One CUDA graph of the launches, with an event recorded before the first kernel and
        # after each: the device runs them back to back however long this thread takes to
        # build the graph (one that shares the interpreter with a busy thread waits
        # milliseconds per driver call), and each time is what the kernel adds to a replay,
        # as gingham replays a program: its run and the step from the node before.
        if not specs:
            return []
        self._activate()
        return CUDAPlan(self, list(specs), 0, graphs=False).timed_run()

    def clocked_launches(self, kernel, args, global_size, local_size, count):
        # timed_launches' events between back-to-back launches, on the one stream every
        # launch uses: buffers the pool recycles stay in order. The times count from the
        # first event.
        spec = LaunchSpec(kernel, list(args), tuple(global_size),
                          None if local_size is None else tuple(local_size))
        ends = list(itertools.accumulate(self.timed_launches([spec] * count)))
        return list(zip([0.0] + ends[:-1], ends))

    def _plan(self, specs: list[LaunchSpec], n_slots: int) -> LaunchPlan:
        return CUDAPlan(self, specs, n_slots, graphs=get_config().cuda_graphs)

    def _synchronize(self) -> None:
        if self._context is not None:
            self._activate()
            _check(driver.cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)")


def _grid_and_block(global_size: tuple[int, ...], local_size: tuple[int, ...] | None
                    ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid in blocks, block in threads), both 3-D, for a launch of ``global_size`` threads."""
    if not global_size:
        raise ValueError("a CUDA launch needs a global_size (threads), e.g. (n,)")
    if local_size is None:
        local_size = (min(_DEFAULT_BLOCK, global_size[0]),) + (1,) * (len(global_size) - 1)
    block = tuple(local_size) + (1,) * (3 - len(local_size))
    grid = tuple(math.ceil(g / b) for g, b in zip(global_size, block)) + \
        (1,) * (3 - len(global_size))
    return grid, block  # type: ignore[return-value]


class CUDAPlan(LaunchPlan):
    """Launches packed for ``cuLaunchKernel`` once, replayed one by one or as a CUDA graph.

    Every launch's argument array (``void**``) is built when the plan is made. A slot is one
    8-byte value that every launch reading it points to, so a run writes each slot's device
    address once and issues the launches with no per-launch Python work beyond the call.

    With ``graphs`` the launches become one CUDA graph (a chain of kernel nodes) and a run
    is one ``cuGraphLaunch``. The first run launches one by one: most programs that run
    once (an eager ``realize``) never pay for building a graph; the graph is built on the
    second run. An instantiated graph bakes in the
    slot addresses, so up to ``MAX_GRAPHS`` instantiations are kept by those addresses: a
    training step alternates between two sets of parameter buffers (the pool hands them
    back in turn), and each set finds its own graph. A run with addresses not seen before
    takes the least recently used instantiation and updates only the kernel nodes that
    read a changed slot (``cuGraphExecKernelNodeSetParams``), which is cheaper than
    instantiating again. ``instantiations``, ``updated_nodes`` and ``graph_launches``
    count what happened.
    """

    MAX_GRAPHS = 4

    def __init__(self, device: CUDADevice, specs: list[LaunchSpec], n_slots: int,
                 graphs: bool = True) -> None:
        super().__init__(device, specs, n_slots)
        device._activate()
        self.graphs = graphs and bool(specs)
        self._slots = [ctypes.c_uint64() for _ in range(n_slots)]
        self._readers: list[list[int]] = [[] for _ in range(n_slots)]  # launches per slot
        self._keep: list = []  # the values and pointer arrays the launches point into
        self._launches: list[tuple] = []
        for position, spec in enumerate(specs):
            grid, block = _grid_and_block(spec.global_size, spec.local_size)
            device._allow_shared(spec.kernel, spec.shared_bytes)
            values = []
            for arg in spec.args:
                if isinstance(arg, Slot):
                    values.append(self._slots[arg.index])
                    self._readers[arg.index].append(position)
                elif isinstance(arg, Buffer):
                    values.append(ctypes.c_uint64(arg.address))
                else:
                    values.append(SCALAR_CTYPES[arg.dtype](arg))
            pointers = (ctypes.c_void_p * max(len(values), 1))(
                *[ctypes.addressof(value) for value in values])
            self._keep.append((values, pointers))
            self._launches.append((spec.kernel.handle, *grid, *block, spec.shared_bytes,
                                   ctypes.addressof(pointers)))
        self._readers = [sorted(set(r)) for r in self._readers]
        self._graph: list = []  # [graph, its nodes, their params, the addresses it holds]
        self._execs: dict[tuple, object] = {}  # slot addresses -> instantiated graph
        self.instantiations = self.updated_nodes = self.graph_launches = 0
        self._runs = 0  # runs launched one by one: the first (see the class doc)
        self._finalizer = weakref.finalize(self, _destroy_graphs, device, self._graph,
                                           self._execs)

    def _run(self, buffers) -> None:
        for slot, buffer in zip(self._slots, buffers):
            slot.value = buffer.address
        self.device._activate()
        if self.graphs and self._runs:
            self._run_graph(tuple([buffer.address for buffer in buffers]))
            return
        self._runs += 1
        launch = driver.cuLaunchKernel
        for function, gx, gy, gz, bx, by, bz, shared, params in self._launches:
            (status,) = launch(function, gx, gy, gz, bx, by, bz, shared, 0, params, 0)
            if status:
                _check((status,), f"launching a kernel with grid {(gx, gy, gz)} and "
                                  f"block {(bx, by, bz)}")

    def _run_graph(self, key: tuple) -> None:
        execs = self._execs
        graph_exec = execs.pop(key, None)  # re-inserted below: the dict is in LRU order
        if graph_exec is None:
            graph_exec = self._instantiation_for(key)
        execs[key] = graph_exec
        (status,) = driver.cuGraphLaunch(graph_exec, 0)
        if status:
            _check((status,), f"launching a CUDA graph of {len(self._launches)} kernels")
        self.graph_launches += 1

    def _instantiation_for(self, key: tuple):
        """An instantiated graph holding the addresses ``key`` (the slots hold them now)."""
        if not self._graph:
            self._build_graph(key)
        graph, nodes, params, built_with = self._graph
        if len(self._execs) < self.MAX_GRAPHS:
            graph_exec = _check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            self.instantiations += 1
            held = built_with
        else:
            held = next(iter(self._execs))
            graph_exec = self._execs.pop(held)
        changed = sorted({position for index, (old, new) in enumerate(zip(held, key))
                          if old != new for position in self._readers[index]})
        for position in changed:
            _check(driver.cuGraphExecKernelNodeSetParams(graph_exec, nodes[position],
                                                         params[position]),
                   "cuGraphExecKernelNodeSetParams")
        self.updated_nodes += len(changed)
        debug_print(1, f"{self.device.id}: CUDA graph of {len(nodes)} kernels for new "
                       f"addresses ({len(changed)} nodes updated, {self.instantiations} "
                       "instantiated)")
        return graph_exec

    def _build_graph(self, key: tuple) -> None:
        """The launches as a chain of kernel nodes (each runs after the one before)."""
        graph = _check(driver.cuGraphCreate(0), "cuGraphCreate")
        nodes, params = [], []
        for launch in self._launches:
            node_params = _kernel_node_params(launch)
            after = nodes[-1:]
            nodes.append(_check(driver.cuGraphAddKernelNode(graph, after, len(after),
                                                            node_params),
                                "cuGraphAddKernelNode"))
            params.append(node_params)
        self._graph[:] = [graph, nodes, params, key]

    def timed_run(self) -> list[float]:
        """Run the launches once, as one graph with an event node before the first kernel
        and after each, and return each kernel's seconds between its two events (slots are
        not filled: a plan of buffers and scalars). Built, run and destroyed here."""
        device = self.device
        device._activate()
        events = [_check(driver.cuEventCreate(0), "cuEventCreate")
                  for _ in range(len(self._launches) + 1)]
        graph = _check(driver.cuGraphCreate(0), "cuGraphCreate")
        graph_exec = None
        try:
            last = _check(driver.cuGraphAddEventRecordNode(graph, [], 0, events[0]),
                          "cuGraphAddEventRecordNode")
            for launch, event in zip(self._launches, events[1:]):
                kernel = _check(driver.cuGraphAddKernelNode(graph, [last], 1,
                                                            _kernel_node_params(launch)),
                                "cuGraphAddKernelNode")
                last = _check(driver.cuGraphAddEventRecordNode(graph, [kernel], 1, event),
                              "cuGraphAddEventRecordNode")
            graph_exec = _check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            (status,) = driver.cuGraphLaunch(graph_exec, 0)
            if status:
                _check((status,), f"launching a timed graph of {len(self._launches)} kernels")
            device.stats.launches += len(self._launches)
            device._synchronize()
            return [_check(driver.cuEventElapsedTime(start, end), "cuEventElapsedTime") * 1e-3
                    for start, end in zip(events, events[1:])]
        finally:
            if graph_exec is not None:
                driver.cuGraphExecDestroy(graph_exec)
            driver.cuGraphDestroy(graph)
            for event in events:
                driver.cuEventDestroy(event)


def _kernel_node_params(launch: tuple):
    """A graph kernel node's parameters for one of CUDAPlan's packed launches."""
    function, gx, gy, gz, bx, by, bz, shared, pointers = launch
    node_params = driver.CUDA_KERNEL_NODE_PARAMS()
    node_params.func = function
    node_params.gridDimX, node_params.gridDimY, node_params.gridDimZ = gx, gy, gz
    node_params.blockDimX, node_params.blockDimY, node_params.blockDimZ = bx, by, bz
    node_params.sharedMemBytes = shared
    node_params.kernelParams = pointers  # the values are copied into the node
    return node_params


def _destroy_graphs(device: CUDADevice, graph: list, execs: dict) -> None:
    try:
        device._activate()
        for graph_exec in execs.values():
            driver.cuGraphExecDestroy(graph_exec)
        if graph:
            driver.cuGraphDestroy(graph[0])
    except Exception:  # noqa: BLE001 - at exit the driver may already be gone
        pass


def discover() -> list[Device]:
    """``cuda:0``.. for each GPU when an NVIDIA driver and NVRTC are present."""
    try:
        status = driver.cuInit(0)[0]
    except Exception as exc:  # noqa: BLE001 - cuda-python raises when libcuda.so is absent
        raise DeviceNotFoundError(f"no NVIDIA driver ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0]})") from None
    if _code(status) == _code(driver.CUresult.CUDA_ERROR_NO_DEVICE):
        raise DeviceNotFoundError("the NVIDIA driver sees no GPU")
    if _code(status) != 0:
        raise DeviceNotFoundError(f"cuInit failed: {_error_name(status)}")
    try:
        _nvrtc_version()
    except Exception as exc:  # noqa: BLE001
        raise DeviceNotFoundError(
            f"NVRTC (the CUDA runtime compiler) is missing ({str(exc).splitlines()[0]}); "
            "install it with `pip install nvidia-cuda-nvrtc` (or `cuda-python[all]`)") from None
    count = int(_check(driver.cuDeviceGetCount(), "cuDeviceGetCount"))
    return [CUDADevice(ordinal) for ordinal in range(count)]
