"""torch's process-wide settings in gingham (``gingham.settings``): each is checked by its
effect, against torch under the same setting where torch has the same effect. Every test
that changes a setting restores it (the fixtures below), for torch too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
import gingham.nn as nn
from gingham.devices import get_device
from gingham.errors import DeviceNotFoundError

TOLERANCE = dict(rtol=1e-6, atol=1e-6)


@pytest.fixture
def float64_default():
    """gingham's and torch's default dtype float64 for the test, float32 again after."""
    gingham.set_default_dtype(gingham.float64)
    torch.set_default_dtype(torch.float64)
    yield
    gingham.set_default_dtype(gingham.float32)
    torch.set_default_dtype(torch.float32)


def _same(mine: gingham.Tensor, theirs: torch.Tensor, name: str) -> None:
    assert str(mine.dtype) == str(theirs.dtype).removeprefix("torch."), name
    assert mine.shape == tuple(theirs.shape), name
    np.testing.assert_allclose(mine.numpy(), theirs.numpy(), err_msg=name, **TOLERANCE)


def test_default_dtype_reaches_factories_promotion_and_layers(device, float64_default):
    assert gingham.get_default_dtype() == np.float64
    pairs = {}
    for lib in (gingham, torch):
        on = {"device": device} if lib is gingham else {}
        counts = lib.arange(4, **on)                 # int64 whatever the default
        pairs[lib] = dict(
            tensor=lib.tensor([1.5, 2.25], **on), zeros=lib.zeros(2, 3, **on),
            ones=lib.ones(2, **on), full=lib.full((2,), 0.1, **on), eye=lib.eye(2, **on),
            linspace=lib.linspace(0, 1, 7, **on), arange=lib.arange(0.0, 1.0, 0.1, **on),
            scaled=counts * 0.1, shifted=0.1 + counts, divided=counts / 3,
            where=lib.where(counts > 1, counts, 0.1), exp=counts.exp(),
            float32_stays=lib.ones(2, dtype=lib.float32, **on) * 0.1,
            ints_stay=counts * 2, mean=lib.tensor([[1.0, 2.0]], **on).mean(0))
    for name, theirs in pairs[torch].items():
        _same(pairs[gingham][name], theirs, name)
    assert gingham.result_type(gingham.arange(2), 0.5) == np.float64
    assert gingham.rand(2, device=device).dtype == np.float64
    assert gingham.randn(2, device=device).dtype == np.float64
    layers = (nn.Linear(3, 2, device=device), nn.Conv2d(1, 1, 3, device=device),
              nn.BatchNorm1d(3, device=device), nn.LayerNorm(3, device=device),
              nn.LSTM(3, 2, device=device))
    assert {p.dtype for layer in layers for p in layer.parameters()} == {np.dtype(np.float64)}
    x = gingham.tensor(np.ones((1, 3)), device=device)
    assert layers[0](x).dtype == np.float64


def test_default_dtype_refuses_other_kinds_and_finfo_follows(float64_default):
    assert gingham.finfo().bits == torch.finfo().bits == 64
    with pytest.raises(TypeError, match="only floating-point types"):
        gingham.set_default_dtype(gingham.int32)
    assert gingham.get_default_dtype() == np.float64  # unchanged by the refused call


def test_a_jitted_step_traced_under_another_default_dtype_is_another_program(device):
    @gingham.jit
    def scaled(counts):
        return counts * 0.1 + gingham.ones(counts.shape[0], device=device)

    counts = gingham.arange(3, device=device)
    assert scaled(counts).dtype == np.float32
    gingham.set_default_dtype(gingham.float64)
    try:
        result = scaled(counts)
    finally:
        gingham.set_default_dtype(gingham.float32)
    assert result.dtype == np.float64
    np.testing.assert_allclose(result.numpy(), np.arange(3) * 0.1 + 1, rtol=1e-15)
    assert scaled(counts).dtype == np.float32


@pytest.fixture
def restored_default_device():
    yield
    gingham.set_default_device(None)


def test_default_device_places_new_tensors(restored_default_device):
    configured = gingham.get_default_device()
    for device in ("reference", "cpu"):
        gingham.set_default_device(device)
        assert gingham.get_default_device() == device
        assert gingham.get_default_device().type == device
        assert gingham.zeros(2).device == device
        assert gingham.tensor([1.0]).device == device
        assert nn.Linear(2, 2).weight.device == device
        assert (gingham.arange(3) * 2).tolist() == [0, 2, 4]
    with pytest.raises(DeviceNotFoundError, match="no device 'opencl:99'"):
        gingham.set_default_device("opencl:99")
    assert gingham.get_default_device() == "cpu"  # the refused call changed nothing
    gingham.set_default_device(None)
    assert gingham.get_default_device() == configured


# A kernel of the cpu device's own kind (C with OpenMP, compiled by it) that reports the
# threads its parallel region ran on: what the device's generated kernels get too.
THREADS_KERNEL = """
#include <omp.h>
void threads_used(int *out) {
    #pragma omp parallel
    {
        #pragma omp single
        out[0] = omp_get_num_threads();
    }
}
"""


@pytest.fixture
def cpu_threads():
    """The cpu device, its thread count restored (to OpenMP's, and the device's own
    setting, unset or not) after the test."""
    cpu = get_device("cpu")
    before, setting = cpu.get_num_threads(), cpu.num_threads
    yield cpu
    cpu.set_num_threads(before)
    cpu.num_threads = setting


def _threads_of_a_kernel(cpu) -> int:
    kernel = cpu.compile(THREADS_KERNEL, "threads_used")
    out = np.zeros(1, np.int32)
    buffer = cpu.alloc(out.nbytes)
    cpu.launch(kernel, [buffer], (), None)
    cpu.copy_out(buffer, out)
    return int(out[0])


def test_num_threads_sets_the_cpu_kernels_threads(cpu_threads):
    for count in (1, 2, 3):
        gingham.set_num_threads(count)
        assert gingham.get_num_threads() == count
        assert _threads_of_a_kernel(cpu_threads) == count
        # the device's generated kernels still compute the same numbers
        values = np.random.default_rng(count).standard_normal((64, 33)).astype(np.float32)
        total = gingham.tensor(values, device="cpu").sum(1)
        np.testing.assert_allclose(total.numpy(), values.sum(1), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="positive int, not 0"):
        gingham.set_num_threads(0)
    assert gingham.get_num_threads() == 3


@pytest.fixture
def restored_precision():
    yield
    gingham.set_float32_matmul_precision("highest")
    torch.set_float32_matmul_precision("highest")


def test_matmul_precision_is_recorded_and_float32_stays_ieee(device, restored_precision):
    assert gingham.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    for precision in ("medium", "high", "highest"):
        gingham.set_float32_matmul_precision(precision)
        torch.set_float32_matmul_precision(precision)
        assert gingham.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    gingham.set_float32_matmul_precision("medium")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 256)).astype(np.float32) for _ in range(2))
    product = (gingham.tensor(a, device=device) @ gingham.tensor(b.T, device=device)).numpy()
    # TF32 (10-bit mantissa) would be off by about 1e-3 relative; IEEE float32 by 1e-6
    np.testing.assert_allclose(product, a.astype(np.float64) @ b.T.astype(np.float64),
                               rtol=2e-5, atol=2e-4)
    with pytest.raises(ValueError, match="highest"):
        gingham.set_float32_matmul_precision("fast")


@pytest.fixture
def restored_determinism():
    yield
    gingham.use_deterministic_algorithms(False)


def test_deterministic_algorithms_flag_and_bitwise_repeats(device, restored_determinism):
    assert gingham.are_deterministic_algorithms_enabled() is False
    assert torch.are_deterministic_algorithms_enabled() is False
    gingham.use_deterministic_algorithms(True, warn_only=True)
    assert gingham.are_deterministic_algorithms_enabled()
    assert gingham.is_deterministic_algorithms_warn_only_enabled()
    values = np.random.default_rng(2).standard_normal((3, 4096)).astype(np.float32)
    index = np.random.default_rng(3).integers(0, 7, 4096)
    x = gingham.tensor(values, device=device)
    runs = [(x.sum(1).numpy(), gingham.zeros(3, 7, device=device).index_add(
        1, gingham.tensor(index, device=device), x).numpy()) for _ in range(2)]
    for first, second in zip(*runs):
        assert first.tobytes() == second.tobytes()
    with pytest.raises(TypeError, match="mode must be a bool"):
        gingham.use_deterministic_algorithms("yes")


@pytest.fixture
def reseeded():
    yield
    gingham.manual_seed(0)


def test_seed_and_initial_seed(device, reseeded):
    gingham.manual_seed(1234)
    torch.manual_seed(1234)
    assert gingham.initial_seed() == torch.initial_seed() == 1234
    fresh = gingham.seed()
    assert fresh >= 0 and gingham.initial_seed() == fresh
    drawn = gingham.rand(5, device=device).numpy()
    gingham.manual_seed(fresh)
    np.testing.assert_array_equal(gingham.rand(5, device=device).numpy(), drawn)
    assert gingham.seed() != fresh  # fresh entropy each call


def test_rng_state_round_trip_replays_draws_and_dropout(reseeded):
    gingham.manual_seed(7)
    state = gingham.get_rng_state()
    assert isinstance(state, gingham.Tensor) and state.dtype == np.uint32
    x = gingham.ones(256)
    first = (gingham.rand(4).numpy(), gingham.dropout(x, 0.5, True).numpy(),
             nn.Linear(3, 2).weight.numpy())
    gingham.set_rng_state(state)
    again = (gingham.rand(4).numpy(), gingham.dropout(x, 0.5, True).numpy(),
             nn.Linear(3, 2).weight.numpy())
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(gingham.rand(4).numpy(), first[0])
    with pytest.raises(ValueError, match="uint32 values get_rng_state"):
        gingham.set_rng_state(np.zeros(3, np.uint8))


def test_autocast_state_queries_match_torch():
    for kind in ("cpu", "cuda"):
        assert gingham.is_autocast_enabled(kind) == torch.is_autocast_enabled(kind) is False
        assert str(gingham.get_autocast_dtype(kind)) == str(
            torch.get_autocast_dtype(kind)).removeprefix("torch.")
    with gingham.autocast("cpu", dtype=gingham.float16), \
            torch.autocast("cpu", dtype=torch.float16):
        for kind in ("cpu", "cuda"):
            assert gingham.is_autocast_enabled(kind) == torch.is_autocast_enabled(kind), kind
            assert str(gingham.get_autocast_dtype(kind)) == str(
                torch.get_autocast_dtype(kind)).removeprefix("torch."), kind
        with gingham.autocast("cpu", enabled=False), torch.autocast("cpu", enabled=False):
            assert gingham.is_autocast_enabled("cpu") == torch.is_autocast_enabled("cpu")
    assert gingham.is_autocast_enabled() is False
    with pytest.raises(gingham.GinghamError, match="device_type must be one of"):
        gingham.get_autocast_dtype("tpu")
