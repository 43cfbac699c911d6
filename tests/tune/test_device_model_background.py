"""The device model measured in the background (``device_model.measure_in_background``) while
a first step is traced, and the device clock its micro-benchmarks use
(``Device.clocked_launches``). Real OpenCL devices (PoCL on a CPU-only machine) and CUDA
devices, real kernels checked against NumPy, a fresh cache directory per test."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from gingham import tile
from gingham.cache import DiskCache
from gingham.compiler import compile_program
from gingham.devices import get_device, list_devices
from gingham.errors import DeviceError
from gingham.tune import device_model as dm

#: The devices that clock their own launches (OpenCL: profiling events; CUDA: events).
OPENCL_IDS = [d.id for d in list_devices() if d.info.dialect == "opencl"]
CLOCKED_IDS = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]
#: Those whose clock a busy host does not slow (a CPU device runs its kernels on those cores).
GPU_CLOCKED_IDS = [d.id for d in list_devices()
                   if d.info.dialect in ("opencl", "cuda") and d.info.kind == "gpu"]
only = os.environ.get("GINGHAM_TEST_DEVICES")
if only:
    wanted = {d.strip() for d in only.split(",")}
    OPENCL_IDS = [i for i in OPENCL_IDS if i in wanted]
    CLOCKED_IDS = [i for i in CLOCKED_IDS if i in wanted]
    GPU_CLOCKED_IDS = [i for i in GPU_CLOCKED_IDS if i in wanted]
pytestmark = pytest.mark.skipif(not CLOCKED_IDS, reason="no OpenCL or CUDA device in this run")

MATMUL = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""


@pytest.fixture(autouse=True)
def _own_cache(fresh_process, monkeypatch):
    """An empty cache (kernels, device models) and no model in memory, before and after;
    the device model measured (as by default)."""
    monkeypatch.delenv("GINGHAM_TUNE_MEASURE", raising=False)


def _model_key(device) -> str:
    return dm._cache_key(device.info, True)


def _stored_model(device) -> dict | None:
    blob = DiskCache("device-model").get(_model_key(device))
    return None if blob is None else json.loads(blob)


def _matmul_sources(device, a, b) -> tuple[str, np.ndarray]:
    """The compiled source of a tiled matmul on ``device`` and its result."""
    bound = tile.function(MATMUL).bind(a, b)
    exe = compile_program(bound, device)
    (c,) = exe(a, b)
    return exe.source, c


@pytest.mark.parametrize("device_id", CLOCKED_IDS)
def test_a_model_not_measured_yet_gives_the_kernels_of_the_stored_one(device_id):
    device = get_device(device_id)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 80)).astype(np.float32)
    b = rng.standard_normal((80, 112)).astype(np.float32)
    before = dm.measurements
    assert dm.measure_in_background(device)
    assert not dm.measure_in_background(device)  # one thread per model
    # Compiled at once: the lowering waits for the model still being measured.
    assert not dm._background[_model_key(device)].future.done()
    source, c = _matmul_sources(device, a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert dm.measurements == before + 1
    model = dm.device_model(device)
    assert model.measured and _stored_model(device) == model.as_dict()
    # A later process loads the stored model and lowers the same kernels.
    dm.clear_memo()
    again, c2 = _matmul_sources(device, a, b)
    assert dm.measurements == before + 1 and dm.device_model(device) == model
    assert again == source
    np.testing.assert_array_equal(c2, c)


@pytest.mark.parametrize("device_id", CLOCKED_IDS)
def test_a_failed_background_measurement_falls_back_to_estimates(device_id, monkeypatch):
    device = get_device(device_id)

    def fails(_device, _when_quiet=None):
        # A fault injected into the measurement; the device and its compiles are real.
        raise DeviceError("the micro-benchmark could not allocate its buffers")

    monkeypatch.setattr(dm, "measure", fails)
    assert dm.measure_in_background(device)
    with pytest.warns(RuntimeWarning, match="measuring the device model failed.*"
                                            "could not allocate.*from estimates"):
        model = dm.device_model(device)
    assert model == dm.estimate(device.info, device) and not model.measured
    assert dm.device_model(device) is model  # this process keeps choosing from it
    # Compiling still works, from the estimates.
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((33, 17)).astype(np.float32),
            rng.standard_normal((17, 9)).astype(np.float32))
    _, c = _matmul_sources(device, a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # Nothing was stored: the next process measures.
    assert _stored_model(device) is None
    monkeypatch.undo()
    dm.clear_memo()
    assert dm.device_model(device).measured and _stored_model(device) is not None


@pytest.mark.parametrize("device_id", OPENCL_IDS)
def test_an_opencl_gpu_starts_measuring_with_its_context_and_a_cpu_device_does_not(device_id):
    from gingham.devices import opencl

    known = get_device(device_id)
    device = opencl.OpenCLDevice(known.cl_device, known.id)
    try:
        if device.info.kind == "cpu":
            device.queue  # noqa: B018 - creates the context
            assert _model_key(device) not in dm._background  # measured when lowering needs it
            # The same real device with the GPU rule (only the kind that picks it changes).
            device = opencl.OpenCLDevice(known.cl_device, known.id)
            device.info = dataclasses.replace(device.info, kind="gpu")
        device.queue  # noqa: B018
        key = _model_key(device)
        assert key in dm._background or key in dm._memo
        model = dm.device_model(device)
        assert model.measured and _stored_model(device) == model.as_dict()
    finally:
        if device.build_pool is not None:
            device.build_pool.close()


@pytest.mark.parametrize("device_id", OPENCL_IDS)
def test_a_model_measured_in_the_foreground_is_measured_once(device_id):
    """A GPU whose context does not exist yet, asked for its model: the measurement creates
    the context, which must not start measuring the same model again on a thread."""
    from gingham.devices import opencl

    known = get_device(device_id)
    device = opencl.OpenCLDevice(known.cl_device, known.id)
    device.info = dataclasses.replace(device.info, kind="gpu")  # the GPU rule, a real device
    try:
        before = dm.measurements
        model = dm.device_model(device)  # its compiles create the context
        assert model.measured and dm.measurements == before + 1
        assert _model_key(device) not in dm._background
        dm.clear_memo()  # would finish a measurement started meanwhile
        assert dm.measurements == before + 1
        assert dm.device_model(device) == model  # from disk
    finally:
        if device.build_pool is not None:
            device.build_pool.close()


@pytest.mark.parametrize("device_id", OPENCL_IDS)
def test_a_measurement_nobody_asked_for_is_timed_when_the_memo_is_cleared(device_id):
    """Its timings wait for the question (or the exit); clearing the memo must not wait
    forever for a question that will not come (it hung the CUDA test suite once)."""
    from gingham.devices import opencl

    known = get_device(device_id)
    device = opencl.OpenCLDevice(known.cl_device, known.id)
    device.info = dataclasses.replace(device.info, kind="gpu")  # the GPU rule, a real device
    try:
        assert dm.measure_in_background(device)
        clearing = threading.Thread(target=dm.clear_memo, daemon=True)
        clearing.start()
        clearing.join(timeout=120)
        assert not clearing.is_alive()
        stored = _stored_model(device)
        assert stored is not None and stored["measured"] is True
    finally:
        if device.build_pool is not None:
            device.build_pool.close()


CUDA_IDS = [i for i in CLOCKED_IDS if i.startswith("cuda:")]


@pytest.mark.skipif(not CUDA_IDS, reason="no CUDA device in this run")
@pytest.mark.parametrize("device_id", CUDA_IDS or ["cuda:0"])
def test_a_cuda_device_starts_measuring_with_its_context(device_id):
    from gingham.devices import cuda

    device = cuda.CUDADevice(int(device_id.split(":")[1]))
    buffer = device.alloc(1024)  # the first use retains the context
    key = _model_key(device)
    assert key in dm._background or key in dm._memo
    model = dm.device_model(device)
    assert model.measured and _stored_model(device) == model.as_dict()
    buffer.free()


@pytest.mark.parametrize("device_id", CLOCKED_IDS)
def test_a_measurement_running_at_exit_finishes_before_the_process_ends(tmp_path, device_id):
    """The exit waits for the measurement thread (a thread inside the driver while the
    process tears it down could crash the exit): its model is stored, the exit is clean,
    also for the compile workers it stops while they are still starting."""
    cache = tmp_path / "exit-cache"
    code = textwrap.dedent(f"""
        from gingham.devices import get_device
        from gingham.tune import device_model as dm
        device = get_device({device_id!r})
        assert dm.measure_in_background(device)
        print("model key:", dm._cache_key(device.info, True))
    """)
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(cache), GINGHAM_TUNE_MEASURE="1",
               GINGHAM_OPENCL_BUILD="processes", GINGHAM_COMPILE_JOBS="2")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # A driver may print to stdout too (NVIDIA: "1 warning generated."), even after this.
    key = next(line.split()[-1] for line in done.stdout.splitlines()
               if line.startswith("model key:"))
    os.environ["GINGHAM_CACHE_DIR"], saved = str(cache), os.environ["GINGHAM_CACHE_DIR"]
    try:
        stored = DiskCache("device-model").get(key)
    finally:
        os.environ["GINGHAM_CACHE_DIR"] = saved
    assert stored is not None and json.loads(stored)["measured"] is True


ADD_ONE = {
    "opencl": """
__kernel void add_one(__global float* y, __global const float* x, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = y[i] + x[i] + 1.0f;
}""",
    "cuda": """
extern "C" __global__ void add_one(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] + x[i] + 1.0f;
}"""}


@pytest.mark.parametrize("device_id", CLOCKED_IDS)
def test_clocked_launches_run_the_kernel_and_clock_each_launch(device_id):
    device = get_device(device_id)
    kernel = device.compile(ADD_ONE[device.info.dialect], "add_one")
    n = 5000
    x = np.arange(n, dtype=np.float32)
    X, Y = device.alloc(x.nbytes), device.alloc(x.nbytes)
    device.copy_in(X, x)
    device.copy_in(Y, np.zeros(n, np.float32))
    runs = device.clocked_launches(kernel, [Y, X, np.int32(n)], (5120,), (64,), count=4)
    assert len(runs) == 4
    assert all(end > start for start, end in runs)
    # One in-order queue: each launch starts after the previous one ended.
    assert all(later[0] >= earlier[1] for earlier, later in zip(runs, runs[1:]))
    out = np.empty(n, np.float32)
    device.copy_out(Y, out)
    np.testing.assert_array_equal(out, 4 * (x + 1))  # every launch ran, in turn
    if device.info.dialect == "opencl":
        with pytest.raises(ValueError, match="multiple of local_size"):
            device.clocked_launches(kernel, [Y, X, np.int32(n)], (5000,), (64,), count=1)


class _BusyInterpreter:
    """A thread that runs Python without pause (as a first step's tracing and lowering do)
    for the block's first ``seconds`` (or until the block ends): another thread that gives
    the interpreter up, as every driver call does, gets it back only after the switch
    interval."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self):
        self._stop = threading.Event()
        end = time.perf_counter() + self.seconds

        def spin():
            while not self._stop.is_set() and time.perf_counter() < end:
                pass

        self._thread = threading.Thread(target=spin, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.mark.skipif(not GPU_CLOCKED_IDS, reason="no OpenCL or CUDA GPU in this run")
@pytest.mark.parametrize("device_id", GPU_CLOCKED_IDS or ["gpu"])
def test_a_model_measured_beside_a_first_step_is_the_quiet_one(device_id):
    """The background thread compiles the micro-benchmarks and takes the device's own
    timings while the first step is traced (here: a thread that runs Python throughout),
    and times the host's issue of a launch once the lowering asks for the model: the
    figures, kept for good, are the ones measured alone."""
    device = get_device(device_id)
    quiet = dm.measure(device)
    # Its compiles created the context, which started measuring the model on a thread
    # (``Device._measure_model_meanwhile``): finish that one and forget it, on disk too.
    dm.clear_memo()
    DiskCache("device-model").delete(_model_key(device))
    interval = sys.getswitchinterval()
    assert dm.measure_in_background(device)
    key = _model_key(device)
    measurement = dm._background[key]
    with _BusyInterpreter(seconds=120):
        # The device's timings finish beside the busy interpreter ...
        assert measurement.device_timed.wait(timeout=60)
        time.sleep(0.05)
        # ... and the host's wait for the question.
        assert not measurement.future.done()
    busy = dm.device_model(device)
    assert sys.getswitchinterval() == interval  # the prompt hand-overs ended with the timings
    assert busy.measured and _stored_model(device) == busy.as_dict()
    assert busy.peak_flops["float32"] > 0.8 * quiet.peak_flops["float32"], (busy, quiet)
    assert busy.bandwidth > 0.8 * quiet.bandwidth, (busy, quiet)
    assert busy.launch_overhead < 1.5 * quiet.launch_overhead + 2e-6, (busy, quiet)


@pytest.mark.parametrize("device_id", CLOCKED_IDS)
def test_clocked_launches_run_back_to_back_however_slowly_they_are_issued(device_id):
    """A thread that issues launches slowly (here: it shares the interpreter with one that
    runs Python without pause, at the default 5 ms switch interval) still gets them run
    back to back: the span of 20 tiny launches is the device's, not 20 of the host's waits."""
    device = get_device(device_id)
    kernel = device.compile(ADD_ONE[device.info.dialect], "add_one")
    n = 256
    X, Y = device.alloc(4 * n), device.alloc(4 * n)
    device.copy_in(X, np.ones(n, np.float32))
    device.copy_in(Y, np.zeros(n, np.float32))

    def span() -> float:
        runs = device.clocked_launches(kernel, [Y, X, np.int32(n)], (n,), (64,), count=20)
        return runs[-1][1] - runs[0][0]

    quiet = min(span() for _ in range(3))
    slow = []
    worker = threading.Thread(target=lambda: slow.extend(span() for _ in range(3)))
    with _BusyInterpreter(seconds=120):
        worker.start()
        worker.join(timeout=120)
    assert len(slow) == 3
    # 20 issues at up to 5 ms each would span tens of milliseconds; back to back, a tiny
    # kernel takes microseconds (10 ms: room for a loaded machine's device clock).
    assert min(slow) < max(4 * quiet, 10e-3), (slow, quiet)
    out = np.empty(n, np.float32)
    device.copy_out(Y, out)
    np.testing.assert_array_equal(out, np.full(n, 2.0 * 6 * 20, np.float32))  # all ran
