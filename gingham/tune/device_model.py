"""The device model: what the cost model knows about a device, queried and measured.

Two halves. The driver's description (:class:`gingham.devices.DeviceInfo`: compute units,
work-group size, local memory, caches, SIMD width) plus what the drivers tell beyond it (warp or
sub-group size, preferred vector widths, resident threads and shared memory per compute unit,
vector registers of a CPU core). And three figures **measured once** by micro-benchmarks rendered
through the device's own dialect (so they run wherever gingham does): copy bandwidth, the fp32
multiply-add rate, and the launch overhead. fp16/bf16 are stored as 16-bit and computed in fp32
by gingham's code generator, so their arithmetic rate is the fp32 rate; their bandwidth in
elements is twice fp32's.

The model is cached on disk (``DiskCache("device-model")``) under the device key (device, driver,
compiler; see :func:`gingham.tune.keys.device_key`) and :data:`MODEL_VERSION`; measuring takes
about a second. ``GINGHAM_TUNE_MEASURE=0`` (``config.tune_measure``) skips the measurement and
estimates the three figures from the description.

A fresh process need not wait for it: :func:`measure_in_background` (an OpenCL or CUDA GPU
calls it when its context is created) loads the model, or compiles its micro-benchmarks, sets up
their buffers and times them on the device's own clock, on a thread while the first step is
traced and planned. Those timings hold beside a thread that runs Python: the device runs the
timed launches back to back whenever the host issues them (CUDA: one graph launch; OpenCL: the
launches wait for an event set once all are queued). The one figure timed by the host, how long
issuing a launch takes, waits until :func:`device_model` asks for the model (a few milliseconds,
with the interpreter to itself) or the process exits. The kernels are the ones a process that
measured in the foreground (or loaded the model from disk) chooses. That takes a device that
clocks its own launches (``Device.clocks_launches``).

    >>> from gingham.devices import get_device
    >>> model = device_model(get_device("cpu"))      # measured the first time, then cached
    >>> model.peak_flops["float32"] > 1e9, model.bandwidth > 1e8
    (True, True)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import sys
import threading
import time
import warnings
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..cache import DiskCache
from ..config import debug_print, get_config
from ..devices.base import Device, DeviceInfo
from .keys import device_key

#: Bump when the model's fields or the micro-benchmarks change: older entries are ignored.
#: 7: CUDA clocks its launches (events), as OpenCL does; its figures came from a host timer.
#: 8: a model measured in the background is timed once it is asked for
#: (``_Measurement.asked``): one timed beside a first step's lowering had its fp32 rate 11x low
#: on the H200.
#: 9: the device-clocked timings run at once, beside the tracing (CUDA times a graph launch of
#: the timed kernels, OpenCL gates them behind a user event); only the host's issue time waits.
#: 10: OpenCL on a CPU times its FMA chains as vectors (scalar chains ran 30x below the cores'
#: rate on PoCL).
MODEL_VERSION = 10
_NAMESPACE = "device-model"

#: Measurements (micro-benchmark runs) in this process; tests prove a cached model is reloaded.
measurements = 0


@dataclass(frozen=True)
class DeviceModel:
    """A device as the cost model sees it. Rates in per second, sizes in bytes.

    ``measured`` says whether ``bandwidth``, ``peak_flops`` and ``launch_overhead`` come from
    micro-benchmarks (else they are estimates from the description).
    """

    device: str
    name: str
    kind: str
    dialect: str | None
    compute_units: int
    workers: int  # OpenMP threads on the CPU; compute units elsewhere
    simd_width: int  # fp32 lanes executing together (warp, wavefront, sub-group, CPU vector)
    sub_group_size: int
    vector_width_float: int  # the driver's preferred fp32 vector width (1 where unknown)
    vector_registers: int  # CPU: architectural vector registers of a core; 0 elsewhere
    max_work_group_size: int
    local_memory_bytes: int  # per work-group
    local_memory_per_unit: int
    threads_per_unit: int  # resident work-items per compute unit
    cache_line_bytes: int
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int
    bandwidth: float  # bytes/s, copy (read + write counted)
    peak_flops: dict[str, float] = field(default_factory=dict)  # per storage dtype
    launch_overhead: float = 0.0  # seconds per kernel launch
    measured: bool = False
    measure_seconds: float = 0.0
    version: int = MODEL_VERSION

    def flops(self, dtype: str) -> float:
        """The arithmetic rate for ``dtype`` (floating types; fp32's rate for the others)."""
        return self.peak_flops.get(dtype) or self.peak_flops["float32"]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceModel:
        names = {f.name for f in dataclasses.fields(cls)}
        if set(data) != names:
            raise ValueError(f"fields differ: {sorted(set(data) ^ names)}")
        return cls(**data)


# -- what the drivers tell ------------------------------------------------------------------------


def _driver_properties(device: Device | None, info: DeviceInfo) -> dict[str, int]:
    """Properties beyond DeviceInfo, queried from the driver where it answers."""
    props = {"sub_group_size": info.simd_width, "vector_width_float": 1,
             "vector_registers": 0, "local_memory_per_unit": info.local_memory_bytes,
             "threads_per_unit": info.max_work_group_size, "clock_hz": 0,
             "memory_bandwidth": 0}
    if info.kind == "cpu":
        props["vector_width_float"] = max(1, info.simd_width)
        props["threads_per_unit"] = 1
    cl_device = getattr(device, "cl_device", None)
    if cl_device is not None:
        def query(name: str, default: int = 0) -> int:
            try:
                return int(getattr(cl_device, name) or default)
            except Exception:  # noqa: BLE001 - an extension query the driver does not answer
                return default
        props["vector_width_float"] = query("preferred_vector_width_float", 1) or 1
        props["clock_hz"] = query("max_clock_frequency") * 10**6
        if info.kind == "gpu":
            # NVIDIA: 2048 resident threads per SM since Maxwell; AMD: 40 waves of 64 per CU.
            vendor = info.vendor.lower()
            props["threads_per_unit"] = 2048 if "nvidia" in vendor else max(
                info.max_work_group_size, 1024 if "intel" in vendor else 2560)
    cu_device = getattr(device, "cu_device", None)
    if cu_device is not None:
        from ..devices import cuda

        def attribute(name: str) -> int:
            try:
                return int(cuda._attribute(cu_device, name))
            except Exception:  # noqa: BLE001
                return 0
        props["sub_group_size"] = attribute("WARP_SIZE") or 32
        props["threads_per_unit"] = attribute("MAX_THREADS_PER_MULTIPROCESSOR") or 2048
        props["local_memory_per_unit"] = (attribute("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR")
                                          or info.local_memory_bytes)
        props["clock_hz"] = attribute("CLOCK_RATE") * 1000
        memory_clock = attribute("MEMORY_CLOCK_RATE") * 1000  # kHz -> Hz
        bus = attribute("GLOBAL_MEMORY_BUS_WIDTH")
        props["memory_bandwidth"] = 2 * memory_clock * bus // 8  # double data rate
    if info.kind == "cpu":
        from ..devices.cpu import host_cpu

        flags = set(host_cpu()["flags"].split())
        props["vector_registers"] = 32 if ("avx512f" in flags or not flags & {"sse2", "avx"}) \
            else 16
    return props


def _workers(info: DeviceInfo) -> int:
    if info.dialect == "c":
        return get_config().num_threads or max(1, info.compute_units)
    return max(1, info.compute_units)


def estimate(info: DeviceInfo, device: Device | None = None) -> DeviceModel:
    """The model from the description alone (no measurement): conservative typical figures."""
    props = _driver_properties(device, info)
    units = max(1, info.compute_units)
    workers = _workers(info)
    if info.kind == "cpu":
        clock = props["clock_hz"] or 2.5e9
        lanes = max(4, info.simd_width)
        flops = workers * lanes * 2 * 2 * clock  # two FMA ports per core
        bandwidth = min(8e9 * workers, 100e9)
        overhead = 5e-6 if info.dialect == "c" else 3e-5
    else:
        clock = props["clock_hz"] or 1.5e9
        # 4 schedulers per unit, each issuing one warp-wide FMA per clock (NVIDIA, AMD alike).
        flops = units * 4 * max(info.simd_width, 16) * 2 * clock
        bandwidth = props["memory_bandwidth"] * 0.9 or 400e9
        overhead = 5e-6 if info.dialect == "cuda" else 1e-5
    return DeviceModel(
        device=info.id, name=info.name, kind=info.kind, dialect=info.dialect,
        compute_units=units, workers=workers, simd_width=max(1, info.simd_width),
        sub_group_size=props["sub_group_size"], vector_width_float=props["vector_width_float"],
        vector_registers=props["vector_registers"],
        max_work_group_size=max(1, info.max_work_group_size),
        local_memory_bytes=info.local_memory_bytes,
        local_memory_per_unit=props["local_memory_per_unit"],
        threads_per_unit=max(1, props["threads_per_unit"]),
        cache_line_bytes=info.cache_line_bytes or 64, l1_bytes=info.l1_bytes or 32 * 1024,
        l2_bytes=info.l2_bytes or (256 * 1024 if info.kind == "cpu" else 4 * 2**20),
        l3_bytes=info.l3_bytes, bandwidth=float(bandwidth),
        peak_flops={"float32": float(flops), "float16": float(flops),
                    "bfloat16": float(flops), "float64": float(flops) / 2},
        launch_overhead=overhead, measured=False)


# -- the micro-benchmarks -------------------------------------------------------------------------


def _copy_kernel(n: int, kind: str = "thread"):
    from ..compiler import kernel_ir as k

    g = k.Var("g", "int64")
    body = k.For("g", 0, n, k.Store("Y", g, k.Load("X", g, "float32")), kind=kind)
    return k.Kernel("gm_copy", (k.Param("X", "float32"), k.Param("Y", "float32", output=True)),
                    body, k.Launch((-(-n // 256) * 256,), (256,)))


_CHAINS = 8  # independent accumulators: covers the FMA latency on every device we know


def _fma_kernel(info: DeviceInfo, items: int, reps: int):
    """``items`` work-items, each ``_CHAINS`` (x lanes on a CPU) dependent FMA chains of
    ``reps`` steps; 2 * chains * lanes * reps flops each. The multiplier and addend are read
    from memory so that nothing folds."""
    from ..compiler import kernel_ir as k

    f32, it = "float32", "int64"
    a, b = k.Var("gm_a", f32), k.Var("gm_b", f32)
    head = [k.Declare("gm_a", f32, k.Load("X", k.Const(0, it), f32)),
            k.Declare("gm_b", f32, k.Load("X", k.Const(1, it), f32))]
    launch = k.Launch((-(-items // 256) * 256,), (min(256, items),))
    if info.dialect == "c":
        # A register block like the GEMM micro-kernel's: chains x lanes accumulators.
        lanes = max(4, info.simd_width)
        i, l = k.Var("gm_i", it), k.Var("gm_l", it)
        flat = k.BinOp("+", k.BinOp("*", i, k.Const(lanes, it), it), l, it)
        acc = k.LoadLocal("gm_acc", (flat,), f32)
        init = k.For("gm_i", 0, _CHAINS, k.For("gm_l", 0, lanes, k.StoreLocal(
            "gm_acc", (flat,), k.Cast(f32, k.BinOp("+", i, l, it))), kind="simd"),
            kind="unroll")
        step = k.For("gm_i", 0, _CHAINS, k.For("gm_l", 0, lanes, k.StoreLocal(
            "gm_acc", (flat,), k.BinOp("+", k.BinOp("*", acc, a, f32), b, f32)), kind="simd"),
            kind="unroll")
        total = k.For("gm_i", 0, _CHAINS, k.For("gm_l", 0, lanes, k.Assign(
            "gm_s", k.BinOp("+", k.Var("gm_s", f32), acc, f32)), kind="unroll"), kind="unroll")
        body = k.block(*head, k.LocalArray("gm_acc", f32, (_CHAINS * lanes,), "register", align=64,
                                    restrict=True),
                       init, k.For("gm_r", 0, reps, step), k.Declare("gm_s", f32,
                                                                      k.Const(0.0, f32)),
                       total, k.Store("Y", k.Var("gm_g", it), k.Var("gm_s", f32)))
        loop = k.For("gm_g", 0, items, body, kind="parallel" if items > 1 else "serial")
        flops_each = 2 * _CHAINS * lanes * reps
    elif info.kind == "cpu":
        # OpenCL on a CPU (PoCL, Intel's runtime) fills a core's vector lanes from several
        # work-items only where its vectoriser can, which a loop inside the kernel defeats:
        # scalar chains measured 16 GFLOP/s on PoCL on a 2-core Xeon whose cores do 470. As
        # the tiled GEMMs do (``tiling_cpu._Builder._vector_micro_kernels``), each work-item
        # holds its chains as vectors (``float16``),
        # and each is a work-group of its own, so that the work-groups spread over the cores.
        lanes = max(4, info.simd_width)
        vec = f"float32x{lanes}"
        i, zero = k.Var("gm_i", it), k.Const(0, it)
        acc = k.LoadLocal("gm_acc", (i,), vec)
        init = k.For("gm_i", 0, _CHAINS, k.StoreLocal(
            "gm_acc", (i,), k.Cast(vec, k.Cast(f32, i))), kind="unroll")
        step = k.For("gm_i", 0, _CHAINS, k.StoreLocal("gm_acc", (i,), k.BinOp(
            "+", k.BinOp("*", acc, k.Cast(vec, a), vec), k.Cast(vec, b), vec)), kind="unroll")
        total = k.For("gm_i", 1, _CHAINS, k.StoreLocal("gm_acc", (zero,), k.BinOp(
            "+", k.LoadLocal("gm_acc", (zero,), vec), acc, vec)), kind="unroll")
        g = k.Var("gm_g", it)
        body = k.block(*head, k.LocalArray("gm_acc", vec, (_CHAINS,), "register"), init,
                       k.For("gm_r", 0, reps, step), total,
                       k.CopyLocal("Y", (k.BinOp("*", g, k.Const(lanes, it), it),), "gm_acc",
                                   (zero,), lanes, f32))
        loop = k.For("gm_g", 0, items, body, kind="thread")
        launch = k.Launch((items,), (1,))
        flops_each = 2 * _CHAINS * lanes * reps
    else:
        g = k.Var("gm_g", it)
        accs = [k.Var(f"gm_c{j}", f32) for j in range(_CHAINS)]
        init = [k.Declare(v.name, f32, k.BinOp("+", k.Load("X", g, f32), k.Const(float(j), f32),
                                               f32)) for j, v in enumerate(accs)]
        step = k.block(*[k.Assign(v.name, k.BinOp("+", k.BinOp("*", v, a, f32), b, f32))
                         for v in accs])
        total: k.Expr = accs[0]
        for v in accs[1:]:
            total = k.BinOp("+", total, v, f32)
        body = k.block(*head, *init, k.For("gm_r", 0, reps, step), k.Store("Y", g, total))
        loop = k.For("gm_g", 0, items, body, kind="thread")
        flops_each = 2 * _CHAINS * reps
    kernel = k.Kernel("gm_fma", (k.Param("X", "float32"), k.Param("Y", "float32", output=True)),
                      loop, launch)
    return kernel, flops_each * items


def _best_time(run, sync, window: float = 0.3, inner: int = 1, most: int = 200) -> float:
    """The fastest timing of ``inner`` back-to-back runs, per run, over about ``window``
    seconds (at least 3 timings). The fastest, and over a window rather than a count: on a
    shared machine a short run is often preempted, and a model measured in a busy moment
    would be kept for good."""
    run()
    sync()
    best = float("inf")
    end = time.perf_counter() + window
    for attempt in range(most):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        sync()
        now = time.perf_counter()
        best = min(best, (now - start) / inner)
        if attempt >= 2 and now > end:
            break
    return best


def _device_times(device: Device, launches: list, args: list) -> tuple[float, float, float]:
    """(copy, FMA, tiny kernel) seconds by the clock of a device that clocks its launches:
    the fastest copy and FMA run, and the time per tiny kernel run back to back. The timed
    launches run back to back whenever this thread issues them (``clocked_launches``), so
    these figures hold while other threads run Python; each is the best of several tries
    (work that another thread queues meanwhile lands inside a try)."""
    (copy, copy_ir), (fma, fma_ir), (tiny, tiny_ir) = launches

    def clocked(handle, kernel, count):
        return device.clocked_launches(handle, args, kernel.launch.global_size,
                                       kernel.launch.local_size, count)

    # A CPU's OpenCL driver shares its cores with everything else on the host (in a fresh
    # process, the compile workers starting up): its runs are timed in batches over this
    # long, for a quiet moment (on PoCL, 2 cores, a single batch caught one core free in
    # about half of the fresh processes: 240 against 480 GFLOP/s). A GPU: one batch.
    window = 0.3 if device.info.kind == "cpu" else 0.0

    def fastest(handle, kernel) -> float:
        # The first run sets the batch: 20 runs on a GPU (a few ms), at least 3 where a run
        # is slow (a CPU device copying 1 GiB); it is not timed (the driver's lazy set-up).
        (start, end), = clocked(handle, kernel, 1)
        count = max(3, min(20, int(0.1 / max(end - start, 1e-9))))
        best, until = float("inf"), time.perf_counter() + window
        while True:
            best = min(best, min(end - start for start, end in clocked(handle, kernel, count)))
            if time.perf_counter() >= until:
                return best

    copy_time = fastest(copy, copy_ir)
    fma_time = fastest(fma, fma_ir)
    span = float("inf")
    for _ in range(3):
        runs = clocked(tiny, tiny_ir, 20)
        span = min(span, (runs[-1][1] - runs[0][0]) / 20)
    return copy_time, fma_time, span


def _issue_time(device: Device, tiny, tiny_ir, args: list) -> float:
    """Seconds to issue one launch from here: the host's timer around back-to-back launches
    of a tiny kernel, the best of 30 tries of 20 (a try that lost the interpreter to another
    thread, or met its copies in the driver, is not the fastest). Timed with the interpreter
    quiet: a thread waiting for it would count the wait."""
    inner = 20
    issue = float("inf")
    for _ in range(30):
        start = time.perf_counter()
        for _ in range(inner):
            device.launch(tiny, args, tiny_ir.launch.global_size, tiny_ir.launch.local_size)
        issue = min(issue, (time.perf_counter() - start) / inner)
        device.synchronize()
    return issue


def measure(device: Device, when_quiet: Callable[[], None] | None = None) -> DeviceModel:
    """Measure bandwidth, fp32 FMA rate and launch overhead on ``device`` (a few tenths of a
    second on a GPU, about a second on a CPU). ``when_quiet`` (a thread measuring beside
    other work) returns when the host's timings may start: the kernels are compiled, the
    buffers set up and the device's own timings taken before it is called."""
    global measurements
    from .. import compiler  # noqa: F401 - c_family imports it: load it first (import cycle)
    from ..codegen.c_family import DIALECTS, render_many

    info = device.info
    start = time.perf_counter()
    base = estimate(info, device)
    gpu = info.dialect != "c"
    # Copy: big enough to leave every cache (a GPU's L2 is tens of MB)
    # (a GPU copies 2 x 512 MiB in about 0.2 ms at 5 TB/s: long beside the launch).
    n = (1 << 27) if info.kind == "gpu" else (1 << 22)
    items = (base.compute_units * base.threads_per_unit) if gpu and info.kind == "gpu" \
        else base.workers * 8
    # The C backend is measured on one thread and scaled by the threads: on a machine shared
    # with other work, one thread runs undisturbed far more often than all of them at once.
    scale = 1 if gpu else base.workers
    fma, fma_flops = _fma_kernel(info, 1 if not gpu else items,
                                 reps=4096 if info.kind == "gpu" else 1 << 17)
    loop = "thread" if gpu else "serial"
    kernels = [_copy_kernel(n, loop), fma, _copy_kernel(1, loop)]
    kernels[2] = dataclasses.replace(kernels[2], name="gm_tiny")
    source = render_many(kernels, DIALECTS[info.dialect])
    copy, fma_handle, tiny = device.compile_many(source, [kk.name for kk in kernels])
    x = device.alloc(n * 4)
    y = device.alloc(max(n, items) * 4)
    # Only what the FMA reads is set (the copy's timing does not depend on the values):
    # filling and copying in all of a GPU's 512 MiB took longer than the timings.
    host = np.full(min(n, max(items, 2)), 0.5, np.float32)
    host[1] = 1e-4  # the FMA's addend; its multiplier is 0.5: the chains stay finite
    device.copy_in(x, host)
    waited = 0.0
    try:
        if device.clocks_launches:
            # Beside other threads' Python (a background measurement), prompt hand-overs.
            with _prompt_interpreter() if when_quiet is not None else contextlib.nullcontext():
                copy_time, fma_time, span = _device_times(
                    device, [(copy, kernels[0]), (fma_handle, fma), (tiny, kernels[2])],
                    [x, y])
            # The tiny kernel copies one float: the 1 GiB is not kept while waiting.
            x.free()
            y.free()
            x, y = device.alloc(4), device.alloc(4)
            waited = time.perf_counter()
            if when_quiet is not None:
                when_quiet()
            waited = time.perf_counter() - waited
            launch_time = max(_issue_time(device, tiny, kernels[2], [x, y]), span)
        else:
            def launcher(handle, kernel):
                return lambda: device.launch(handle, [x, y], kernel.launch.global_size,
                                             kernel.launch.local_size)

            copy_time = _best_time(launcher(copy, kernels[0]), device.synchronize)
            fma_time = _best_time(launcher(fma_handle, fma), device.synchronize, window=0.6)
            launch_time = _best_time(launcher(tiny, kernels[2]), device.synchronize,
                                     window=0.1, inner=20)
    finally:
        x.free()
        y.free()
    measurements += 1
    flops = scale * fma_flops / fma_time
    model = with_measurements(base, scale * 2 * n * 4 / copy_time, flops, launch_time,
                              measure_seconds=time.perf_counter() - start - waited)
    debug_print(1, f"{device.id}: device model measured in {model.measure_seconds:.2f} s: "
                   f"{model.bandwidth / 1e9:.1f} GB/s, {flops / 1e9:.1f} GFLOP/s fp32, "
                   f"launch {launch_time * 1e6:.1f} us")
    return model


def with_measurements(base: DeviceModel, bandwidth: float, fp32_flops: float,
                      launch_overhead: float, **fields: Any) -> DeviceModel:
    """``base`` (an :func:`estimate`) with the figures the micro-benchmarks measure: copy
    bandwidth (bytes/s), fp32 rate (every floating type's; float64 at the estimate's ratio to
    it) and launch overhead (s); ``fields`` set any other field of the model."""
    ratio = base.peak_flops["float64"] / base.peak_flops["float32"]
    return dataclasses.replace(
        base, bandwidth=bandwidth, launch_overhead=launch_overhead,
        peak_flops={"float32": fp32_flops, "float16": fp32_flops, "bfloat16": fp32_flops,
                    "float64": ratio * fp32_flops},
        measured=True, **fields)


# -- the cached model ------------------------------------------------------------------------------

_memo: dict[tuple, DeviceModel] = {}


def _cache_key(info: DeviceInfo, measured: bool) -> str:
    return DiskCache.key("device-model", MODEL_VERSION, device_key(info), measured)


def device_model(device: Device, measure_now: bool | None = None) -> DeviceModel:
    """The model of ``device``: from memory, from the disk cache, or measured once and stored
    (or the one :func:`measure_in_background` is measuring: waited for).

    ``measure_now`` None follows ``config.tune_measure``; False gives the estimate.
    """
    info = device.info
    if info.dialect is None:
        return estimate(info, device)
    wanted = get_config().tune_measure if measure_now is None else measure_now
    key = _cache_key(info, wanted)
    if key in _memo:
        return _memo[key]
    measurement = _background.get(key)
    if measurement is not None:
        return _background_result(device, key, measurement)
    if not wanted:
        model = estimate(info, device)
    else:
        # Measuring creates the context if nothing has yet, which would start measuring
        # the same model in the background too: marked, it does not.
        with _background_lock:
            _foreground.add(key)
        try:
            model = _load_or_measure(device, key)
        finally:
            with _background_lock:
                _foreground.discard(key)
    _memo[key] = model
    return model


def known_model(device: Device) -> DeviceModel | None:
    """The model :func:`device_model` would give now, if this process has it already (never
    measures nor waits): what a compilation that asked for it used."""
    if device.info.dialect is None:
        return None
    return _memo.get(_cache_key(device.info, get_config().tune_measure))


def _load_or_measure(device: Device, key: str,
                     when_quiet: Callable[[], None] | None = None) -> DeviceModel:
    cache = DiskCache(_NAMESPACE)
    model = _load(cache, key)
    if model is None:
        model = measure(device, when_quiet)
        cache.put(key, json.dumps(model.as_dict(), sort_keys=True).encode())
    return model


# -- measured in the background ------------------------------------------------------------------

@dataclass
class _Measurement:
    """A model being loaded or measured on ``thread``; ``future`` gets it (or the error).

    ``asked`` is set once the model is asked for (or at exit): the host's timing of a
    launch's issue starts then. Taken while this process's other threads run Python, it
    would count the waits for the interpreter: every driver call gives it up and gets it
    back up to a switch interval later (a launch timed at 97.6 us instead of 16.6 on the
    H200). A thread that asks for the model waits for it, which leaves the interpreter to
    the timing. (The device's own timings run at once: see :func:`_device_times`.)"""

    future: Future = field(default_factory=Future)
    asked: threading.Event = field(default_factory=threading.Event)
    #: set once the device's own timings are taken (the host's wait for ``asked``)
    device_timed: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread = field(init=False)

    def host_may_time(self) -> None:
        """``measure``'s ``when_quiet``: the device's timings are done; wait for the question."""
        self.device_timed.set()
        self.asked.wait()


#: cache key -> its measurement on a thread, until its model is taken into :data:`_memo`
_background: dict[str, _Measurement] = {}
#: cache keys of the models a caller of :func:`device_model` is loading or measuring itself
_foreground: set[str] = set()
_background_lock = threading.Lock()


def measure_in_background(device: Device) -> bool:
    """Load or measure ``device``'s model on a thread; :func:`device_model` waits for it.
    True if a thread started (False: measurement is off, the model is known, a thread is
    at it already (or :func:`device_model` is, in the foreground), or the device cannot
    clock its launches, so that timings taken beside other work would be off). Example::

        >>> measure_in_background(get_device("opencl:0"))   # at once, when the context exists
        True
        >>> device_model(get_device("opencl:0")).measured    # later: waits for it if need be
        True
    """
    info = device.info
    if info.dialect is None or not get_config().tune_measure or not device.clocks_launches:
        return False
    key = _cache_key(info, True)
    with _background_lock:
        if key in _memo or key in _background or key in _foreground:
            return False
        measurement = _background[key] = _Measurement()
        measurement.thread = threading.Thread(target=_measure_into,
                                              args=(device, key, measurement),
                                              daemon=True, name="gingham-device-model")
    measurement.thread.start()
    return True


def _measure_into(device: Device, key: str, measurement: _Measurement) -> None:
    try:
        measurement.future.set_result(_load_or_measure(device, key,
                                                        measurement.host_may_time))
    except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the model
        measurement.future.set_exception(exc)


#: The interpreter's switch interval while a measurement runs beside other threads.
_PROMPT_SWITCH_SECONDS = 1e-4
_prompt_users = 0
_prompt_saved = 0.0
_prompt_lock = threading.Lock()


@contextlib.contextmanager
def _prompt_interpreter() -> Iterator[None]:
    """Have the interpreter change threads every 0.1 ms (instead of every 5) while a
    background measurement takes its device timings (a few tenths of a second). Each driver
    call gives the interpreter up, and a thread tracing a step keeps it until the switch
    interval asks it to let go: the timings' few hundred calls would take seconds beside a
    first step, and the lowering would wait for them. (The timings themselves do not depend
    on it; the tracing thread gives up little: the measurement runs microseconds of Python
    per call.) The interval the process had comes back when the last measurement ends."""
    global _prompt_users, _prompt_saved
    with _prompt_lock:
        if _prompt_users == 0:
            _prompt_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_prompt_saved, _PROMPT_SWITCH_SECONDS))
        _prompt_users += 1
    try:
        yield
    finally:
        with _prompt_lock:
            _prompt_users -= 1
            if _prompt_users == 0:
                sys.setswitchinterval(_prompt_saved)


def _background_result(device: Device, key: str, measurement: _Measurement) -> DeviceModel:
    """The background thread's model, waited for; if it failed, the estimate for this
    process (not stored: the next process measures again) and a warning saying why."""
    started = time.perf_counter()
    measurement.asked.set()
    try:
        model = measurement.future.result()
    except Exception as exc:  # noqa: BLE001 - a measurement must not fail a compile
        warnings.warn(f"gingham: {device.id}: measuring the device model failed "
                      f"({type(exc).__name__}: {exc}); this process chooses its kernels from "
                      "estimates (GINGHAM_TUNE_MEASURE=0 skips the measurement)",
                      RuntimeWarning, stacklevel=3)
        model = estimate(device.info, device)
    waited = time.perf_counter() - started
    if waited > 1e-3:
        debug_print(1, f"{device.id}: waited {waited:.2f} s for the device model measured "
                       "in the background")
    with _background_lock:
        _memo.setdefault(key, model)
        _background.pop(key, None)
    return _memo[key]


@atexit.register
def _wait_for_measurements() -> None:
    """A measurement still running at exit is waited for (a few tenths of a second): a
    thread inside the driver while the process tears it down could crash the exit. A model
    nobody asked for is finished now, for the next processes."""
    _finish_measurements(timeout=30)


def _finish_measurements(timeout: float | None = None) -> None:
    """Let every background measurement take its host timing now (nobody may ever ask for
    its model) and wait for its thread. (A measurement whose model was taken has left
    :data:`_background`: its thread had nothing left to do but return.)"""
    with _background_lock:
        pending = list(_background.values())
    for measurement in pending:
        measurement.asked.set()
    for measurement in pending:
        measurement.thread.join(timeout=timeout)


def _load(cache: DiskCache, key: str) -> DeviceModel | None:
    blob = cache.get(key)
    if blob is None:
        return None
    try:
        model = DeviceModel.from_dict(json.loads(blob))
        if model.version != MODEL_VERSION or not model.peak_flops.get("float32", 0) > 0:
            raise ValueError("stale or empty")
        return model
    except (ValueError, TypeError) as exc:
        debug_print(1, f"device model entry {key[:12]} is unusable ({exc}); measuring again")
        cache.delete(key)
        return None


def model_for_info(info: DeviceInfo) -> DeviceModel:
    """The model for a description: the device's own (measured, cached) when ``info`` is that
    of a discovered device; else the one recorded for it (:mod:`gingham.tune.described`: an
    H200's, for lowering as an H200 would on a machine without one); else an estimate (a
    description made up by a test, say)."""
    from ..devices import get_device
    from .described import recorded_model

    try:
        device = get_device(info.id)
    except Exception:  # noqa: BLE001 - not a discovered device: estimate
        device = None
    if device is None or device.info != info:
        return recorded_model(info) or estimate(info, None)
    return device_model(device)


def clear_memo() -> None:
    """Forget the models loaded in this process (tests: force a reload from disk); a
    measurement still running in the background is finished first (its host timing starts
    now, if nobody asked for it yet)."""
    _finish_measurements()
    with _background_lock:
        _memo.clear()
        _background.clear()


__all__ = ["DeviceModel", "MODEL_VERSION", "device_model", "known_model", "estimate", "measure",
           "measure_in_background", "model_for_info", "with_measurements", "clear_memo"]
