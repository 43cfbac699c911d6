"""CUDA sources compiled by NVRTC in compile worker processes (``nvrtc_build=processes``).

The worker side needs only NVRTC (``pip install -e .[nvrtc]``), so the pool's builds are
checked on every machine: real worker processes, real NVRTC, the cubin compared with one
built in this process. Where the run sees a CUDA device, a fresh ``CUDADevice`` object
builds through its own pool and the kernels' results are checked against NumPy.
"""

from __future__ import annotations

import time

import pytest

from device_kernels import check_scale_kernels
from gingham.config import ConfigError, get_config
from gingham.devices import list_devices, opencl_build, opencl_worker
from gingham.devices.base import SourceUnit

nvrtc = pytest.importorskip("cuda.bindings.nvrtc",
                            reason="NVRTC is needed: pip install -e .[nvrtc]")
try:
    nvrtc.nvrtcVersion()
except Exception as exc:  # noqa: BLE001 - cuda-bindings without the NVRTC library
    pytest.skip(f"NVRTC is not loadable: {exc}", allow_module_level=True)

#: What an H200's CUDA device passes NVRTC (from NVRTC 12.4).
H200_FLAGS = "--gpu-architecture=sm_90a -minimal"


def scale_source(i: int, tag: int) -> str:
    return f"""extern "C" __global__ void scale{i}_{tag}(float* c, const float* a, int n) {{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) c[j] = a[j] * {i}.0f + {tag}.0f;
}}
"""


@pytest.fixture
def pool():
    """Two NVRTC workers, ready; stopped afterwards."""
    started = opencl_build.BuildPool({"compiler": "nvrtc", "cubin": True}, 2, name="nvrtc")
    started.start()
    assert started.wait_ready(timeout=120), "the NVRTC workers did not start"
    yield started
    started.close()


def test_workers_build_the_cubin_this_process_would(pool):
    source = scale_source(3, 5)
    ok, binary = pool.build(source, H200_FLAGS, local=lambda: pytest.fail("built here"))
    assert ok and binary.startswith(b"\x7fELF")
    assert pool.built_by_workers == 1 and pool.built_here == 0
    here_ok, here = opencl_worker.nvrtc_build(nvrtc, source, H200_FLAGS, cubin=True)
    assert here_ok and here == binary


def test_a_source_nvrtc_rejects_comes_back_with_its_log(pool):
    broken = 'extern "C" __global__ void broken(float* c) { c[0] = undeclared_name; }'
    ok, log = pool.build(broken, H200_FLAGS, local=lambda: pytest.fail("built here"))
    assert not ok and "undeclared_name" in log


def test_ptx_when_the_target_is_a_virtual_architecture():
    pool = opencl_build.BuildPool({"compiler": "nvrtc", "cubin": False}, 1, name="nvrtc")
    pool.start()
    try:
        assert pool.wait_ready(timeout=120)
        ok, ptx = pool.build(scale_source(1, 2), "--gpu-architecture=compute_90",
                             local=lambda: pytest.fail("built here"))
        assert ok and b".visible .entry scale1_2" in ptx
    finally:
        pool.close()


def test_the_setting_is_checked(monkeypatch):
    monkeypatch.setenv("GINGHAM_NVRTC_BUILD", "Processes")
    assert get_config().nvrtc_build == "processes"
    monkeypatch.setenv("GINGHAM_NVRTC_BUILD", "forks")
    with pytest.raises(ConfigError, match="GINGHAM_NVRTC_BUILD"):
        get_config()


CUDA_IDS = [d.id for d in list_devices() if d.info.dialect == "cuda"]


def cuda_device(device_id: str):
    from gingham.devices import cuda

    return cuda.CUDADevice(int(device_id.split(":")[1]))


@pytest.fixture
def processes(tmp_path, monkeypatch):
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "2")
    monkeypatch.setenv("GINGHAM_TUNE_MEASURE", "0")
    monkeypatch.setenv("GINGHAM_NVRTC_BUILD", "processes")


@pytest.mark.skipif(not CUDA_IDS, reason="no CUDA device in this run")
@pytest.mark.parametrize("device_id", CUDA_IDS)
def test_a_cuda_device_builds_through_its_workers(device_id, processes):
    device = cuda_device(device_id)
    try:
        device.alloc(4)  # the context, and with it the workers
        pool = device.build_pool
        assert pool is not None and pool.wait_ready(timeout=120)
        units = [SourceUnit(f"scale{i}_7", scale_source(i, 7)) for i in range(4)]
        kernels = device.compile_units(units)
        assert pool.built_by_workers == device.stats.compiles > 0 and pool.built_here == 0
        check_scale_kernels(device, kernels, 7)
    finally:
        if device.build_pool is not None:
            device.build_pool.close()


@pytest.mark.skipif(not CUDA_IDS, reason="no CUDA device in this run")
@pytest.mark.parametrize("device_id", CUDA_IDS)
def test_idle_workers_exit_and_the_next_compile_starts_them_again(device_id, processes,
                                                                  monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_IDLE", "0.5")
    device = cuda_device(device_id)
    try:
        device.alloc(4)
        first = device.build_pool
        assert first is not None and first.wait_ready(timeout=120)
        check_scale_kernels(device, device.compile_units(
            [SourceUnit("scale0_8", scale_source(0, 8))]), 8)
        deadline = time.monotonic() + 30
        # The release (on its own thread) drops the pool, then stops its workers.
        while not first.closed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert device.build_pool is None and first.closed
        for process in first.processes:
            process.wait(timeout=10)  # close() gives a worker 2 s before it kills it
        kernels = device.compile_units([SourceUnit(f"scale{i}_9", scale_source(i, 9))
                                        for i in range(2)])
        assert device.build_pool is not None and device.build_pool is not first
        check_scale_kernels(device, kernels, 9)
    finally:
        if device.build_pool is not None:
            device.build_pool.close()
