"""Launch plans (Device.plan) and the buffer pool, on every discovered compiled device:
a replayed plan computes what the same launches through Device.launch compute, with new
buffers in its slots on every run, and its checks happen when it is made or run."""

from __future__ import annotations

import numpy as np
import pytest

from device_kernels import SCALE_OFFSET, VECTOR_ADD, download, launch_sizes, upload
from gingham.devices.base import LaunchSpec, Slot
from gingham.errors import DeviceError

N = 1000


def _chain_plan(dev, a_fixed):
    """out = ((x + a) + x) * 0.5 + 3 through two kernels and a fixed intermediate; slots:
    0 = x (input), 1 = out (output)."""
    add = dev.compile(VECTOR_ADD[dev.info.dialect], "vector_add")
    scale = dev.compile(SCALE_OFFSET[dev.info.dialect], "scale_offset")
    sizes = launch_sizes(dev, N)
    t1, t2 = dev.alloc(4 * N), dev.alloc(4 * N)
    specs = [
        LaunchSpec(add, [t1, Slot(0, 4 * N), a_fixed, np.int64(N)], *sizes),
        LaunchSpec(add, [t2, t1, Slot(0, 4 * N), np.int64(N)], *sizes),
        LaunchSpec(scale, [Slot(1, 4 * N), t2, np.int32(3), np.float32(0.5), np.int32(N)],
                   *sizes),
    ]
    return dev.plan(specs, 2), (t1, t2)


def test_plan_replays_with_new_buffers_every_run(compiled_device):
    dev = compiled_device
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N).astype(np.float32)
    plan, _ = _chain_plan(dev, upload(dev, a))
    before = dev.stats.snapshot()
    kept = []
    for run in range(5):  # a new input and a new output every run, all kept alive
        x = rng.standard_normal(N).astype(np.float32)
        out = dev.alloc(4 * N)
        plan.run([upload(dev, x), out])
        kept.append((x, out))
    # Runs 0..4 wrote their own outputs: none was overwritten by a later run.
    for x, out in kept:
        np.testing.assert_allclose(download(dev, out, x), ((x + a) + x) * 0.5 + 3, rtol=1e-6)
    assert (dev.stats - before).launches == 3 * 5


def test_plan_with_the_same_buffers_again_and_alternating(compiled_device):
    # The pattern of a replayed training step: two sets of buffers in turn, then a repeat
    # of the last set (a CUDA plan keeps one graph per set; every run must still be right).
    dev = compiled_device
    a = np.full(N, 2, np.float32)
    plan, _ = _chain_plan(dev, upload(dev, a))
    sets = [(dev.alloc(4 * N), dev.alloc(4 * N)) for _ in range(2)]
    for run, (x_buffer, out) in enumerate([sets[0], sets[1], sets[0], sets[1], sets[1]]):
        x = np.arange(N, dtype=np.float32) + run
        dev.copy_in(x_buffer, x)
        plan.run([x_buffer, out])
        np.testing.assert_allclose(download(dev, out, x), (2 * x + 2) * 0.5 + 3, rtol=1e-6)


def test_plan_checks_its_slots(compiled_device):
    dev = compiled_device
    plan, _ = _chain_plan(dev, dev.alloc(4 * N))
    good = dev.alloc(4 * N)
    with pytest.raises(ValueError, match="takes 2 buffers, got 1"):
        plan.run([good])
    with pytest.raises(ValueError, match="slot 1: the buffer has 8 bytes, the kernels use 4000"):
        plan.run([good, dev.alloc(8)])
    freed = dev.alloc(4 * N)
    freed.free()
    with pytest.raises(DeviceError, match="slot 0: the buffer was freed"):
        plan.run([freed, good])
    with pytest.raises(TypeError, match="slot 0: expected a Buffer, got ndarray"):
        plan.run([np.zeros(N, np.float32), good])


def test_plan_checks_when_it_is_made(compiled_device):
    dev = compiled_device
    add = dev.compile(VECTOR_ADD[dev.info.dialect], "vector_add")
    buffer = dev.alloc(4 * N)
    sizes = launch_sizes(dev, N)
    with pytest.raises(ValueError, match="slot 3 is out of range for 2 slots"):
        dev.plan([LaunchSpec(add, [Slot(3), buffer, buffer, np.int64(N)], *sizes)], 2)
    with pytest.raises(TypeError, match="argument 2: expected a Buffer"):
        dev.plan([LaunchSpec(add, [Slot(0), buffer, "x", np.int64(N)], *sizes)], 1)
    with pytest.raises(ValueError, match="at most 3 launch dimensions"):
        dev.plan([LaunchSpec(add, [Slot(0), buffer, buffer, np.int64(N)], (1, 1, 1, 1))], 1)


def test_released_buffers_are_reused_and_freed_ones_are_not(compiled_device):
    dev = compiled_device
    if dev.pool is None:
        pytest.skip(f"{dev.id} does not pool its buffers")
    nbytes = 4 * 12345
    first = dev.alloc(nbytes)
    handle = first.handle
    del first  # collected: its memory goes to the pool ...
    second = dev.alloc(nbytes)  # ... and comes back for the next buffer of that size
    assert second.handle is handle
    x = np.arange(nbytes // 4, dtype=np.float32)
    dev.copy_in(second, x)
    np.testing.assert_array_equal(download(dev, second, x), x)
    kept = dev.pool.kept_bytes
    second.free()  # an explicit free gives the memory back to the runtime
    assert dev.pool.kept_bytes == kept
    assert dev.alloc(nbytes).handle is not handle


def test_pool_keeps_at_most_its_limit(compiled_device):
    dev = compiled_device
    if dev.pool is None:
        pytest.skip(f"{dev.id} does not pool its buffers")
    # Empty first: blocks that earlier tests on this worker left in the pool would serve
    # the allocations below, and returning them would then stay under any limit.
    dev.pool.drain()
    limit, dev.pool.limit_bytes = dev.pool.limit_bytes, 4096
    try:
        buffers = [dev.alloc(4096) for _ in range(3)]
        assert dev.pool.kept_bytes == 0
        del buffers
        assert dev.pool.kept_bytes == 4096  # one kept, two given back
    finally:
        dev.pool.limit_bytes = limit
        dev.pool.drain()
    assert dev.pool.kept_bytes == 0


def test_pool_hands_back_the_preferred_block(compiled_device):
    dev = compiled_device
    if dev.pool is None:
        pytest.skip(f"{dev.id} does not pool its buffers")
    dev.pool.drain()
    first, second, third = (dev.alloc(4 * 777) for _ in range(3))
    handles = [b.handle for b in (first, second, third)]
    del first, second, third  # all three in the pool, in this order
    preferred = dev.alloc(4 * 777, prefer=handles[2])
    assert preferred.handle is handles[2]
    other = dev.alloc(4 * 777, prefer=object())  # not in the pool: the oldest block
    assert other.handle is handles[0]


def test_cuda_graphs_setting(monkeypatch):
    from gingham.config import ConfigError, get_config

    monkeypatch.delenv("GINGHAM_CUDA_GRAPHS", raising=False)
    assert get_config().cuda_graphs is True
    monkeypatch.setenv("GINGHAM_CUDA_GRAPHS", "0")
    assert get_config().cuda_graphs is False
    monkeypatch.setenv("GINGHAM_CUDA_GRAPHS", "maybe")
    with pytest.raises(ConfigError, match="GINGHAM_CUDA_GRAPHS='maybe' is not a boolean"):
        get_config()


def test_timed_launches_run_in_order_and_time_each(compiled_device):
    # GINGHAM_DEBUG=2's timing path: the same three dependent launches as the plan, given
    # as specs with buffers, compute the same result, one positive time each.
    dev = compiled_device
    rng = np.random.default_rng(1)
    a, x = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    add = dev.compile(VECTOR_ADD[dev.info.dialect], "vector_add")
    scale = dev.compile(SCALE_OFFSET[dev.info.dialect], "scale_offset")
    sizes = launch_sizes(dev, N)
    a_buffer, x_buffer, t1, t2, out = (upload(dev, a), upload(dev, x), dev.alloc(4 * N),
                                       dev.alloc(4 * N), dev.alloc(4 * N))
    times = dev.timed_launches([
        LaunchSpec(add, [t1, x_buffer, a_buffer, np.int64(N)], *sizes),
        LaunchSpec(add, [t2, t1, x_buffer, np.int64(N)], *sizes),
        LaunchSpec(scale, [out, t2, np.int32(3), np.float32(0.5), np.int32(N)], *sizes)])
    np.testing.assert_allclose(download(dev, out, x), ((x + a) + x) * 0.5 + 3, rtol=1e-6)
    assert len(times) == 3 and all(0 < t < 1 for t in times), times


def test_debug_2_times_every_kernel_and_computes_the_same(compiled_device, monkeypatch,
                                                          capsys):
    import re

    from gingham import tile

    program = tile.function("""
    function (A[M, K], B[K, N]) -> (C) {
        T[i, j : M, N] = +(A[i, k] * B[k, j]);
        C = relu(T) * 2;
    }""")
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((33, 20)), rng.standard_normal((20, 17))
    monkeypatch.setenv("GINGHAM_DEBUG", "2")
    c = program(a, b, device=compiled_device.id)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0) * 2, rtol=1e-4, atol=1e-5)
    err = capsys.readouterr().err
    prefix = re.escape(f"gingham: {compiled_device.id}: ")
    kernels = re.findall(prefix + r"k\d+\S* ([\d.]+) ms", err)
    clock = "device" if compiled_device.times_on_device else "host"
    total = re.findall(prefix + r"(\d+) kernels, ([\d.]+) ms in all \(the " + clock, err)
    assert kernels and total, err
    assert int(total[-1][0]) == len(kernels)
    assert float(total[-1][1]) == pytest.approx(sum(map(float, kernels)), abs=1e-3 * len(kernels))
