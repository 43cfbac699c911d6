"""OpenCL programs built in compile worker processes (``gingham.devices.opencl_build``).

Every test runs on every OpenCL device the run sees (PoCL on a CPU-only machine), with real
worker processes and real kernels checked against NumPy; a fresh ``OpenCLDevice`` object per
test gets its own pool, and a fresh cache directory makes every kernel a real build.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from device_kernels import check_scale_kernels
from gingham.cache import DiskCache
from gingham.config import ConfigError, get_config
from gingham.devices import get_device, list_devices
from gingham.devices.base import SampleLaunch, SourceUnit
from gingham.errors import KernelCompileError

pytest.importorskip("pyopencl")

from gingham.devices import opencl, opencl_build, opencl_worker  # noqa: E402

OPENCL_IDS = [d.id for d in list_devices() if d.info.dialect == "opencl"]
pytestmark = pytest.mark.skipif(not OPENCL_IDS, reason="no OpenCL device in this run")

DYING_WORKER = Path(__file__).with_name("dying_opencl_worker.py")
N = 1000


@pytest.fixture(params=OPENCL_IDS)
def fresh_device(request, tmp_path, monkeypatch):
    """A new OpenCLDevice (its own context and build pool) on a device of this run, with an
    empty kernel cache and two compile jobs; its workers are stopped afterwards. The device
    model is not measured: on a GPU its micro-benchmarks would build programs of their own
    beside the ones a test counts."""
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "2")
    monkeypatch.setenv("GINGHAM_TUNE_MEASURE", "0")
    monkeypatch.setattr(opencl, "_verdicts", {})
    made = []

    def make():
        known = get_device(request.param)
        device = opencl.OpenCLDevice(known.cl_device, known.id)
        made.append(device)
        return device

    yield make
    for device in made:
        if device.build_pool is not None:
            device.build_pool.close()


def scale_units(count: int, tag: int) -> list[SourceUnit]:
    """``count`` kernels ``c = a * i + tag`` (distinct sources: each is its own build)."""
    return [SourceUnit(f"scale{i}_{tag}", f"""
__kernel void scale{i}_{tag}(__global float* c, __global const float* a, int n) {{
    int j = get_global_id(0);
    if (j < n) c[j] = a[j] * {i}.0f + {tag}.0f;
}}""") for i in range(count)]


def check_kernels(device, kernels, tag: int) -> None:
    """Run each kernel and compare with NumPy's ``a * i + tag``."""
    check_scale_kernels(device, kernels, tag, N)


def test_workers_build_kernels_that_compute_the_right_values(fresh_device, monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    device = fresh_device()
    assert device.build_mode() == "processes"
    pool = device.build_pool
    assert pool.wait_ready(timeout=120), "the compile workers did not start"
    kernels = device.compile_units(scale_units(4, 11))
    # Every piece went to a worker: once one serves, this process only loads binaries.
    assert pool.built_here == 0 and pool.built_by_workers == device.stats.compiles > 0
    check_kernels(device, kernels, 11)
    # The workers' binaries were cached on disk: another device object builds nothing.
    again = fresh_device()
    check_kernels(again, again.compile_units(scale_units(4, 11)), 11)
    assert again.stats.compiles == 0


def test_workers_create_their_contexts_one_at_a_time(fresh_device, monkeypatch):
    """A driver that creates contexts one at a time shares its time among those that ask:
    started together, no worker would be ready before all are. Each waits for its turn."""
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "3")
    device = fresh_device()
    assert device.build_mode() == "processes"
    pool = device.build_pool
    assert pool.wait_ready(timeout=120), "the compile workers did not start"
    spans = sorted(tuple(w.startup["context_span"]) for w in pool._workers)
    assert len(spans) == 3
    for (_, end), (begin, _) in zip(spans, spans[1:]):
        assert begin >= end, f"two workers created their contexts at once: {spans}"
    # A pool closed while workers wait for their turn stops them all without contexts.
    other = opencl_build.BuildPool(opencl_build.target_of(device.cl_device), 3)
    other.start()
    other.close()
    assert all(p.wait(timeout=30) is not None for p in other.processes)


def test_a_kernel_the_driver_rejects_raises_with_the_log_from_the_worker(fresh_device,
                                                                           monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    device = fresh_device()
    assert device.build_mode() == "processes" and device.build_pool.wait_ready(timeout=120)
    source = "__kernel void broken(__global float* c) { c[0] = undefined_name; }"
    with pytest.raises(KernelCompileError) as caught:
        device.compile_units([SourceUnit("broken", source)])
    assert device.build_pool.built_by_workers == 1 and device.build_pool.built_here == 0
    assert "undefined_name" in caught.value.log
    assert "--- compiler output ---" in str(caught.value)
    assert Path(caught.value.source_path).read_text() == source


def test_a_worker_that_dies_mid_build_falls_back_to_this_process(fresh_device, monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    monkeypatch.setattr(opencl_build, "worker_command",
                        lambda: [sys.executable, str(DYING_WORKER)])
    device = fresh_device()
    assert device.build_mode() == "processes"
    pool = device.build_pool
    assert pool.wait_ready(timeout=120), "the workers start; they die at their first build"
    kernels = device.compile_units(scale_units(3, 12))
    check_kernels(device, kernels, 12)
    assert pool.lost >= 1 and pool.built_by_workers == 0
    assert pool.built_here == device.stats.compiles


def test_a_pool_that_cannot_start_builds_in_this_process(tmp_path):
    target = {"platform": "no such platform", "device": "none", "index": 0}
    pool = opencl_build.BuildPool(target, 2)
    pool.start()
    try:
        assert not pool.wait_ready(timeout=120)
        assert pool.lost == 2
        assert pool.build("unused", "", local=lambda: b"built here") == (True, b"built here")
        assert pool.built_here == 1
    finally:
        pool.close()


def test_threads_setting_builds_in_this_process(fresh_device, monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "threads")
    device = fresh_device()
    assert device.build_mode() == "threads" and device.build_pool is None
    check_kernels(device, device.compile_units(scale_units(2, 13)), 13)


def test_one_compile_job_never_starts_workers(fresh_device, monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    monkeypatch.setenv("GINGHAM_COMPILE_JOBS", "1")
    device = fresh_device()
    assert device.build_mode() == "threads" and device.build_pool is None


def test_auto_on_a_cpu_device_decides_without_a_check(fresh_device, monkeypatch):
    """PoCL builds in workers (it builds one program at a time in a process, and only a
    worker can generate its work-group functions ahead of the first launches); another CPU
    driver's builds stay in this process. Neither is checked."""
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "auto")
    device = fresh_device()
    if device.info.kind != "cpu":
        pytest.skip(f"{device.id} is a {device.info.kind}, not a CPU device")
    expected = "processes" if device.generates_at_launch else "threads"
    assert device.build_mode() == expected
    assert device._check_thread is None
    assert (device.build_pool is not None) == (expected == "processes")
    check_kernels(device, device.compile_units(scale_units(2, 14)), 14)
    assert DiskCache("opencl").get(device._verdict_key()) is None  # nothing was checked


def test_sample_grids_are_the_smallest_of_the_same_launch_class():
    """PoCL keeps a work-group function per work-group size and per grid class: under
    POCL_SMALL_GRID work-items along every axis ("smallgrid") or not."""
    small = opencl_worker.POCL_SMALL_GRID
    cases = [((8192,), (64,)), ((262144,), (256,)), ((small,), (5,)), ((small - 1,), (1,)),
             ((128, 100000), (8, 32)), ((4096, 16, 3), (64, 4, 1)), ((70000, 70016), (16, 64))]
    for global_size, local_size in cases:
        grid = opencl_worker.sample_grid(global_size, local_size)
        assert all(g % l == 0 and l <= g <= r for g, l, r in zip(grid, local_size, global_size))
        assert (max(grid) >= small) == (max(global_size) >= small), (global_size, grid)
        # Smallest: one work-group, or one axis just past the limit.
        if max(global_size) < small:
            assert grid == local_size
        else:
            assert math.prod(grid) < math.prod(local_size) * (small + max(local_size))
    assert opencl_worker.sample_grid((262144,), (256,)) == (65536,)
    assert opencl_worker.sample_grid((1000,), None) == (1000,)  # the driver picks by the grid


def doubling_unit(tag: str, n: int, local: int) -> SourceUnit:
    """``c = 2 a + 1`` over ``n`` floats, launched as the compiler would describe it."""
    grid = -(-n // local) * local
    return SourceUnit(f"twice_{tag}", f"""
__kernel void twice_{tag}(__global float* c, __global const float* a) {{
    int j = get_global_id(0);
    if (j < {n}) c[j] = 2.0f * a[j] + 1.0f;
}}""", sample=SampleLaunch((grid,), (local,), (4 * n, 4 * n)))


@pytest.mark.parametrize("n", [1000, 100_000])  # a small grid, and one that is not
def test_workers_hand_over_the_code_a_driver_generates_at_first_launch(fresh_device,
                                                                       monkeypatch, n):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    device = fresh_device()
    assert device.build_mode() == "processes" and device.build_pool.wait_ready(timeout=120)
    # Sources never built before (PoCL's own cache outlives a run), each its own program.
    tag = f"{n}_{uuid.uuid4().hex[:12]}"
    unit, unlaunched = doubling_unit(tag, n, 64), doubling_unit(f"{tag}_plain", n, 64)
    if device.generates_at_launch:
        # PoCL's binary carries a directory per generated work-group function, named by
        # its launch class: the real launch's is there before anything ran it here, and
        # only because the worker ran the kernel once.
        sampled = device._build_sampled(unit.source, [unit.entry], [unit.sample])
        plain = device._build_sampled(unlaunched.source, [unlaunched.entry], [None])
        assert device.build_pool.built_by_workers == 2
        generated = re.findall(rf"/{unit.entry}/(64-1-1-goffs0[-a-z]*)/".encode(), sampled)
        small = n < opencl_worker.POCL_SMALL_GRID
        assert generated and all((b"smallgrid" in name) == small for name in generated)
        assert f"/{unlaunched.entry}/".encode() in plain
        assert not re.findall(rf"/{unlaunched.entry}/64-1-1".encode(), plain)
    # Built with its sample through the device's own path, the kernel computes right.
    (kernel,) = device.compile_units([unit])
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    A, C = device.alloc(a.nbytes), device.alloc(a.nbytes)
    device.copy_in(A, a)
    device.launch(kernel, [C, A], global_size=unit.sample.global_size,
                  local_size=unit.sample.local_size)
    out = np.empty_like(a)
    device.copy_out(C, out)
    np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)


def test_a_kernel_too_big_to_run_in_a_worker_is_built_as_it_is(fresh_device, monkeypatch):
    """Running a kernel once costs a worker its buffers: beyond a share of the device's
    memory the kernel builds without it (its first launch here generates its code)."""
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    device = fresh_device()
    if not device.generates_at_launch:
        pytest.skip(f"{device.id}'s driver generates no code at a first launch")
    # Ready workers: else this process builds, running none.
    assert device.build_mode() == "processes" and device.build_pool.wait_ready(timeout=120)
    tag = uuid.uuid4().hex[:12]
    # A share that leaves 10,000 bytes: the small kernel's 8,000 fit, the other's 4 MB (which
    # a worker could allocate) do not.
    monkeypatch.setattr(opencl, "SAMPLE_MEMORY_SHARE", device.info.global_memory_bytes // 10_000)
    small, big = doubling_unit(f"small_{tag}", 1000, 64), doubling_unit(f"big_{tag}", 1000, 64)
    big = dataclasses.replace(big, sample=dataclasses.replace(
        big.sample, buffer_bytes=(4 << 20, 4000)))
    binary = device._build_sampled(small.source + big.source, [small.entry, big.entry],
                                   [small.sample, big.sample])
    assert re.findall(rf"/{small.entry}/64-1-1".encode(), binary)
    assert not re.findall(rf"/{big.entry}/64-1-1".encode(), binary)


def as_gpu(device):
    """``device`` with the GPU rules for ``auto`` (on a CPU device such as PoCL: the same
    real device and builds, only the kind that picks the rule is changed)."""
    if device.info.kind == "cpu":
        device.info = dataclasses.replace(device.info, kind="gpu")
    return device


def test_auto_on_an_unchecked_gpu_starts_workers_at_once_and_checks_later(fresh_device,
                                                                         monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "auto")
    device = as_gpu(fresh_device())
    # No verdict yet: the workers start with the context, before any check has run (the
    # check waits for the first compile to end).
    assert device.build_mode() == "processes" and device.build_pool is not None
    assert device._check_thread.is_alive()
    assert DiskCache("opencl").get(device._verdict_key()) is None
    pool = device.build_pool
    check_kernels(device, device.compile_units(scale_units(3, 15)), 15)
    assert device.wait_for_build_check(timeout=300), "the check did not end"
    verdict = DiskCache("opencl").get(device._verdict_key())
    assert verdict in (b"threads", b"processes")
    # It ran in a compile worker: its builds held up nothing in this process.
    assert pool.checked_by_workers >= 1  # more when a compile voided a try
    assert device.build_mode() == verdict.decode()
    # A parallel driver builds in threads from now on: the workers were stopped.
    assert (device.build_pool is None) == (verdict == b"threads")
    check_kernels(device, device.compile_units(scale_units(2, 16)), 16)
    # A new process (no verdict in memory) reads it from disk instead of checking again.
    monkeypatch.setattr(opencl, "_verdicts", {})
    second = as_gpu(fresh_device())
    assert second.build_mode() == verdict.decode() and second._check_thread is None
    check_kernels(second, second.compile_units(scale_units(2, 17)), 17)


def test_idle_workers_exit_and_the_next_program_starts_them_again(fresh_device, monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    monkeypatch.setenv("GINGHAM_OPENCL_IDLE", "3")
    device = fresh_device()
    assert device.build_mode() == "processes"
    check_kernels(device, device.compile_units(scale_units(2, 18)), 18)
    # The pool that built the program (taken after it: the workers start before the context,
    # whose creation took over 3 s once with other tests' contexts being made at the same
    # time on the H200, so the first pool may already have been released and restarted).
    first = device.build_pool
    assert first is not None
    deadline = time.monotonic() + 60
    while not (first.closed and all(p.poll() is not None for p in first.processes)):
        assert time.monotonic() < deadline, "the idle workers did not exit"
        time.sleep(0.05)
    assert len(first.processes) == 2 and device.build_pool is None
    # The next program starts them again and builds correct kernels.
    compiled = device.stats.compiles
    kernels = device.compile_units(scale_units(3, 19))
    second = device.build_pool
    assert second is not None and second is not first
    assert second.built_by_workers + second.built_here == device.stats.compiles - compiled > 0
    check_kernels(device, kernels, 19)


def test_released_workers_free_their_processes_and_building_goes_on(fresh_device, monkeypatch):
    """What an allocation that runs out of device memory does first: the workers' contexts
    go (their processes exit), and the next program starts new workers that build correctly."""
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    device = fresh_device()
    assert device.build_mode() == "processes"
    check_kernels(device, device.compile_units(scale_units(2, 21)), 21)
    first = device.build_pool
    assert device.release_compile_workers()
    assert device.build_pool is None and first.closed
    assert all(p.poll() is not None for p in first.processes)
    assert not device.release_compile_workers()  # nothing left to release
    check_kernels(device, device.compile_units(scale_units(2, 22)), 22)
    assert device.build_pool is not None and device.build_pool is not first


def test_the_setting_is_checked(monkeypatch):
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "Processes")
    assert get_config().opencl_build == "processes"
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "forks")
    with pytest.raises(ConfigError, match="GINGHAM_OPENCL_BUILD"):
        get_config()


@pytest.mark.parametrize("serial", [True, False])
def test_the_check_tells_serialised_builds_from_parallel_ones(serial):
    # A stand-in compiler with a known answer: one that holds a process-wide lock while it
    # works (NVIDIA's driver), and one that does not.
    lock = threading.Lock() if serial else None

    def build(source: str) -> None:
        if lock is None:
            time.sleep(0.2)
        else:
            with lock:
                time.sleep(0.2)

    serialised, ratio = opencl_build.builds_serialise(build, threads=2)
    assert serialised == serial, ratio


def test_the_check_stops_when_told_and_times_nothing():
    built = []
    result = opencl_build.builds_serialise(built.append, threads=2,
                                           abandon=lambda: len(built) >= 2)
    assert result is None and len(built) == 2  # no build after it was told to stop


def test_activity_says_whether_a_compile_started_or_runs():
    activity = opencl_build.Activity()
    assert activity.wait_quiet(started=1, timeout=0.01) is None  # none has run yet
    with activity.busy():
        assert activity.wait_quiet(timeout=0.01) is None
    generation = activity.wait_quiet(started=1, timeout=0)
    assert generation == 1 and not activity.disturbed_since(generation)
    with activity.quiet_since(generation) as quiet:
        assert quiet
    with activity.busy():
        assert activity.disturbed_since(generation)
    with activity.quiet_since(generation) as quiet:
        assert not quiet  # one started (and ended) since
    assert activity.wait_idle(0.01) == 2


def test_workers_build_binaries_taken_from_the_back_of_a_load_queue(fresh_device, monkeypatch):
    """What a warm cache's load hands the workers where the driver compiles binaries again
    (NVIDIA): each binary is built in a worker and reported done, a refused one too, and
    no worker is lost over it."""
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    device = fresh_device()
    assert device.build_mode() == "processes"
    pool = device.build_pool
    assert pool.wait_ready(timeout=120), "the compile workers did not start"
    options = " ".join(device.build_options)
    binaries = []
    for unit in scale_units(3, 31):
        ok, binary = pool.build(unit.source, options, local=lambda: b"")
        assert ok
        binaries.append(binary)
    work = opencl_build.LoadQueue(binaries + [b"not a binary"])
    pool.load_binaries(work, options)
    for index in range(4):
        work.wait(index)
    assert work.exhausted and list(work.taken_by_workers()) == [0, 1, 2, 3]
    assert pool.loaded_by_workers == 3 and pool.serving == 2
    assert work.take_front() is None and work.take_back() is None


def test_a_load_queue_hands_each_binary_out_once_from_either_end():
    work = opencl_build.LoadQueue([b"a", b"b", b"c", b"d", b"e"])
    assert (work.take_front(), work.take_back(), work.take_back()) == (0, 4, 3)
    assert (work.take_front(), work.take_front(), work.take_front()) == (1, 2, None)
    assert work.take_back() is None and work.exhausted
    assert list(work.taken_by_workers()) == [3, 4]
    empty = opencl_build.LoadQueue([])
    assert empty.exhausted and empty.take_front() is None


def test_a_warm_cache_loads_with_the_workers_where_loading_compiles(fresh_device, monkeypatch):
    """A new process over a warm cache whose driver compiles each binary again as it loads
    (NVIDIA's PTX; here PoCL told so, its first load slowed as such a compile would be):
    the workers build pieces from the back meanwhile, every kernel is loaded, nothing is
    compiled from source, and the kernels compute the right values."""
    monkeypatch.setenv("GINGHAM_OPENCL_BUILD", "processes")
    first = fresh_device()
    assert first.build_mode() == "processes" and first.build_pool.wait_ready(timeout=120)
    check_kernels(first, first.compile_units(scale_units(6, 41)), 41)
    again = fresh_device()
    again.__dict__["recompiles_binaries"] = True
    assert again.build_mode() == "processes" and again.build_pool.wait_ready(timeout=120)
    real_load, loads = again._load_many, []

    def slow_first_load(binary, entries, key):
        loads.append(key)
        if len(loads) == 1:
            time.sleep(1.0)  # the workers take the other pieces from the back meanwhile
        return real_load(binary, entries, key)

    monkeypatch.setattr(again, "_load_many", slow_first_load)
    kernels = again.compile_units(scale_units(6, 41))
    assert again.stats.compiles == 0 and len(loads) == len(set(loads)) >= 2
    assert again.build_pool.loaded_by_workers >= 1
    check_kernels(again, kernels, 41)
