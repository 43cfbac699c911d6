"""The tensor-core schedule for float16 / bfloat16 contractions (compiler/tiling_tc.py).

References are NumPy / PyTorch float32 on the 16-bit inputs (exactly representable), so the
only differences are the fp32 accumulation order and the rounding of the 16-bit result:
tolerances are an ulp or two of the output type.

Three ways in:
* on every compiled device of the run (cpu, OpenCL, CUDA): the same programs stay correct; on
  a CUDA device of compute capability >= 8.0 the kernels must be the tensor-core ones;
* without a GPU: the kernels built for an H200's description run in ``simt.Simulator``, an
  interpreter of kernel IR with the PTX semantics of ldmatrix / mma.sync / cp.async, which
  also checks bounds, alignment and that shared memory is read only once written;
* the choice itself: which contractions get the schedule, and which fall back.
"""

from __future__ import annotations

import dataclasses
import math
import types

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gingham import tile
from gingham.compiler import kernel_ir as k  # before codegen: the packages import each other
from gingham.codegen.c_family import DIALECTS, render
from gingham.compiler.dedupe import unit_of
from gingham.compiler.fusion import plan
from gingham.compiler.lower import LoweringContext
from gingham.compiler import lower_program, tiling_tc
from gingham.compiler.tiling_tc import TcConfig
from gingham.devices import list_devices
from gingham.devices.base import DeviceInfo
from gingham.runtime import executable
from gingham.tune import search
from gingham.tune.db import TuningDB
from gingham.tune.keys import device_key, kernel_key

from gingham.tune.described import H200
from nvrtc_check import build_log
from simt import run_program  # tests/compiler/simt.py (the test directory is on sys.path)

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
TC = "gpu tensor-core contraction"
COMPILED = [d for d in list_devices() if d.info.dialect is not None]
CUDA = [d for d in COMPILED if d.info.dialect == "cuda"]


GEMM = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
BATCHED_T = """function (A[Bt, K, M], B[Bt, N, K]) -> (C) {
    C[b, i, j : Bt, M, N] = +(A[b, k, i] * B[b, j, k]);
}"""
GEMM_BIAS_RELU = """function (A[M, K], B[K, N], Bias[N]) -> (C) {
    T[i, j : M, N] = +(A[i, k] * B[k, j]);
    C = relu(T + Bias);
}"""
GEMM_DEFAULT_BIAS = """function (A[M, K], B[K, N], Bias[N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]) default Bias;
}"""
CONV = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
    O[n, y, x, co : N, H, W, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * F[ky, kx, ci, co]);
}"""
CONV_S2_BIAS_RELU = """function (I[N, H, W, CI], F[KH, KW, CI, CO], Bias[CO]) -> (O) {
    T[n, y, x, co : N, 4, 4, CO] = +(I[n, 2 * y + ky - 1, 2 * x + kx - 1, ci] * F[ky, kx, ci, co]);
    O = relu(T + Bias);
}"""


def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _f32(a):
    return np.asarray(a).astype(np.float32)


def _close(got, expected, dtype, k_size=1, err=""):
    """Within an ulp or two of the 16-bit output (relative to the result's scale too)."""
    eps = 2.0**-8 if dtype == BF16 else 2.0**-11
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(_f32(got), expected, rtol=2 * eps,
                               atol=2 * eps * scale + 1e-6 * k_size * scale, err_msg=err)


def _conv_ref(i, f, stride=1):
    ti = torch.from_numpy(_f32(i)).permute(0, 3, 1, 2)
    tf = torch.from_numpy(_f32(f)).permute(3, 2, 0, 1)
    return F.conv2d(ti, tf, stride=stride, padding=1).permute(0, 2, 3, 1).numpy()


def _conv_grads(i, f, d_o):
    ti = torch.from_numpy(_f32(i)).permute(0, 3, 1, 2).requires_grad_()
    tf = torch.from_numpy(_f32(f)).permute(3, 2, 0, 1).requires_grad_()
    F.conv2d(ti, tf, padding=1).backward(torch.from_numpy(_f32(d_o)).permute(0, 3, 1, 2))
    return ti.grad.permute(0, 2, 3, 1).numpy(), tf.grad.permute(2, 3, 1, 0).numpy()


# The cases: (name, program, arrays, references, contractions expected on the tensor cores).
def _cases():
    rng = np.random.default_rng(5)
    cases = []
    for m, kk, n, dtype in ((200, 72, 136, BF16), (130, 40, 70, BF16), (64, 64, 64, F16),
                            (257, 96, 129, F16)):
        a, b = _rand(rng, (m, kk), dtype), _rand(rng, (kk, n), dtype)
        cases.append((f"gemm-{m}x{kk}x{n}-{dtype}", tile.function(GEMM), (a, b),
                      [_f32(a) @ _f32(b)], kk))
    a, b = _rand(rng, (3, 48, 80), BF16), _rand(rng, (3, 72, 48), BF16)
    cases.append(("batched-transposed", tile.function(BATCHED_T), (a, b),
                  [np.einsum("bki,bjk->bij", _f32(a), _f32(b))], 48))
    a, b, bias = _rand(rng, (150, 64), BF16), _rand(rng, (64, 96), BF16), _rand(rng, 96, BF16)
    t = (_f32(a) @ _f32(b)).astype(BF16)
    cases.append(("gemm-bias-relu", tile.function(GEMM_BIAS_RELU), (a, b, bias),
                  [np.maximum(_f32(t) + _f32(bias), 0)], 64))
    a, b, bias = _rand(rng, (150, 64), BF16), _rand(rng, (64, 96), BF16), _rand(rng, 96, BF16)
    cases.append(("gemm-default-bias", tile.function(GEMM_DEFAULT_BIAS), (a, b, bias),
                  [_f32(a) @ _f32(b) + _f32(bias)], 64))  # the bias in the sum: one rounding
    i, f, bias = _rand(rng, (2, 8, 8, 16), BF16), _rand(rng, (3, 3, 16, 24), BF16), \
        _rand(rng, 24, BF16)
    t = _conv_ref(i, f, stride=2).astype(BF16)
    cases.append(("conv-stride2-pad-bias-relu", tile.function(CONV_S2_BIAS_RELU), (i, f, bias),
                  [np.maximum(_f32(t) + _f32(bias), 0)], 144))
    i, f = _rand(rng, (2, 8, 8, 3), BF16), _rand(rng, (3, 3, 3, 16), BF16)
    cases.append(("conv-3-channels", tile.function(CONV), (i, f), [_conv_ref(i, f)], 27))
    for dtype, shape in ((F16, (2, 8, 8, 16)), (BF16, (4, 16, 16, 16))):
        i, f = _rand(rng, shape, dtype), _rand(rng, (3, 3, 16, 32), dtype)
        d_o = _rand(rng, shape[:3] + (32,), dtype)
        gradient = tile.function(CONV).gradient_function(i, f)  # D_I, D_F from Tile autodiff
        cases.append((f"conv-gradients-{dtype}-{shape[0]}", gradient, (i, f, d_o),
                      list(_conv_grads(i, f, d_o)), math.prod(shape[:3])))
    return cases


CASES = _cases()
CASE_IDS = [c[0] for c in CASES]


def _expects_tensor_cores(info: DeviceInfo) -> bool:
    return info.dialect == "cuda" and info.compute_capability >= 80


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("device", COMPILED, ids=[d.id for d in COMPILED])
def test_on_every_device(device, case):
    """Correct on every compiled device; the tensor-core kernels on CUDA (sm_80+)."""
    name, fn, arrays, references, k_size = case
    exe = executable(fn.bind(*arrays), device)
    schedules = [launch.schedule for launch in exe.launches]
    products = [s for s in schedules if "contraction" in s and "split-K sum" not in s]
    if _expects_tensor_cores(device.info):
        assert products and all(s.startswith(TC) for s in products), schedules
    else:
        assert not any(s.startswith(TC) for s in schedules), schedules
    outputs = exe(*arrays)
    for got, expected in zip(outputs, references):
        _close(got, expected, got.dtype, k_size, f"{name} on {device.id}")


@pytest.mark.parametrize("device", CUDA or [pytest.param(None, marks=pytest.mark.skip(
    reason="no CUDA device in this run"))], ids=[d.id for d in CUDA] or ["no-cuda"])
def test_cuda_device_gets_tensor_cores_for_both_types(device):
    if device.info.compute_capability < 80:
        pytest.skip(f"{device.id} has compute capability {device.info.compute_capability}; "
                    "mma.sync with bfloat16 needs 8.0")
    rng = np.random.default_rng(9)
    for dtype in (BF16, F16):
        a, b = _rand(rng, (512, 256), dtype), _rand(rng, (256, 384), dtype)
        exe = executable(tile.function(GEMM).bind(a, b), device)
        assert exe.launches[0].schedule.startswith(TC), exe.launches[0].schedule
        (c,) = exe(a, b)
        _close(c, _f32(a) @ _f32(b), dtype, 256)


#: Every candidate, and other depths and shapes the benchmark and the tuner try: 8 warps of
#: 64x64 in either orientation, one- and two-warp blocks, a 2-stage ring, other bands.
CONFIGS = tiling_tc.CANDIDATES + (TcConfig(128, 128, 2, 2, stages=4),
                                  TcConfig(128, 128, 2, 2, stages=5), TcConfig(128, 256, 2, 4),
                                  TcConfig(128, 128, 2, 2, tile_k=64),
                                  TcConfig(128, 64, 4, 2, stages=3),
                                  TcConfig(128, 64, 2, 2, min_blocks=4),
                                  TcConfig(256, 128, 4, 2, tile_k=64),
                                  TcConfig(64, 64, 1, 1), TcConfig(128, 64, 2, 1, tile_k=64),
                                  TcConfig(128, 128, 2, 2, stages=2, group_m=4)) + \
    tiling_tc.WGMMA_CANDIDATES + (TcConfig(128, 128, 8, 1, tile_k=64, stages=3,
                                           instruction="wgmma"),
                                  TcConfig(64, 256, 4, 1, tile_k=64, stages=5,
                                           instruction="wgmma"),
                                  TcConfig(128, 128, 4, 1, tile_k=64, stages=3,
                                           instruction="wgmma"))


def _config_case(seed):
    """A ragged GEMM with a transposed A and a padded conv, for one configuration."""
    rng = np.random.default_rng(seed)
    a, b = _rand(rng, (96, 200), BF16), _rand(rng, (96, 264), BF16)  # K: 3 steps of 32
    i, f = _rand(rng, (2, 10, 10, 32), F16), _rand(rng, (3, 3, 32, 64), F16)
    return [("function (A[K, M], B[K, N]) -> (C) { C[i, j : M, N] = +(A[k, i] * B[k, j]); }",
             (a, b), _f32(a).T @ _f32(b), 96), (CONV, (i, f), _conv_ref(i, f), 288)]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("device", CUDA or [pytest.param(None, marks=pytest.mark.skip(
    reason="no CUDA device in this run"))], ids=[d.id for d in CUDA] or ["no-cuda"])
def test_every_config_on_cuda(device, config, monkeypatch, no_program_cache):
    if device.info.compute_capability < 80 or not tiling_tc.fits(config, device.info):
        pytest.skip(f"{config} is not for {device.id}")
    monkeypatch.setattr(tiling_tc, "choose_config", lambda view, info: config)
    for source, arrays, expected, k_size in _config_case(4):
        exe = executable(tile.function(source).bind(*arrays), device)
        assert exe.launches[0].schedule.startswith(TC) and str(config) in \
            exe.launches[0].schedule, exe.launches[0].schedule
        (got,) = exe(*arrays)
        _close(got, expected, got.dtype, k_size, str(config))


# -- the kernels, simulated (no GPU needed) --------------------------------------------------------


def _kernels(bound, info=H200):
    return lower_program(bound, info)


def _simulate(fn, arrays):
    bound = fn.bind(*arrays)
    kernels = _kernels(bound)
    return run_program(bound, kernels, arrays), [kernel.schedule for kernel in kernels]


def _simulate_or_run(device, source: str, arrays):
    """(outputs, schedules): simulated when ``device`` is None, else compiled and run on it."""
    if device is None:
        return _simulate(tile.function(source), arrays)
    exe = executable(tile.function(source).bind(*arrays), device)
    return exe(*arrays), [launch.schedule for launch in exe.launches]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_simulated_tensor_core_kernels(case):
    name, fn, arrays, references, k_size = case
    outputs, schedules = _simulate(fn, arrays)
    products = [s for s in schedules if "split-K sum" not in s and "contraction" in s]
    assert products and all(s.startswith(TC) for s in products), schedules
    for got, expected in zip(outputs, references):
        _close(got, expected, got.dtype, k_size, name)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_every_config_simulated(config, monkeypatch):
    monkeypatch.setattr(tiling_tc, "choose_config", lambda view, info: config)
    for source, arrays, expected, k_size in _config_case(4):
        (got,), schedules = _simulate(tile.function(source), arrays)
        assert str(config) in schedules[0], schedules
        _close(got, expected, got.dtype, k_size, str(config))


@pytest.mark.parametrize("device", [None] + CUDA, ids=["simulated"] + [d.id for d in CUDA])
def test_one_fragment_set(device, monkeypatch, no_program_cache):
    """Fragments loaded after the products that use the previous ones (one register set)."""
    if device is not None and device.info.compute_capability < 80:
        pytest.skip(f"{device.id} has no tensor-core schedule")
    monkeypatch.setattr(tiling_tc, "FRAGMENT_SETS", 1)
    for source, arrays, expected, k_size in _config_case(6):
        (got,), schedules = _simulate_or_run(device, source, arrays)
        assert schedules[0].startswith(TC), schedules
        _close(got, expected, got.dtype, k_size, "one fragment set")


@pytest.mark.parametrize("spread", [True, False])
@pytest.mark.parametrize("device", [None] + CUDA, ids=["simulated"] + [d.id for d in CUDA])
def test_copies_issued_between_products(device, spread, monkeypatch, no_program_cache):
    """Each operand's copies of a TK step issued after a different k16 step's products
    (SPREAD_COPIES), or both before them: same results, K steps of 32, 64 and 128."""
    if device is not None and device.info.compute_capability < 80:
        pytest.skip(f"{device.id} has no tensor-core schedule")
    monkeypatch.setattr(tiling_tc, "SPREAD_COPIES", spread)
    for config in (TcConfig(128, 64, 2, 2), TcConfig(128, 256, 2, 4, tile_k=64),
                   TcConfig(128, 128, 2, 2, tile_k=128, stages=2)):
        monkeypatch.setattr(tiling_tc, "choose_config", lambda view, info, c=config: c)
        for source, arrays, expected, k_size in _config_case(7)[:1]:
            (got,), schedules = _simulate_or_run(device, source, arrays)
            assert str(config) in schedules[0], schedules
            _close(got, expected, got.dtype, k_size, f"{config}, spread {spread}")


def test_staging_modes_and_split_in_schedules():
    """The cases above cover both operand orders, element staging and split-K."""
    text = " | ".join(s for case in CASES for s in
                      (kernel.schedule for kernel in _kernels(case[1].bind(*case[2]))))
    for phrase in ("K-major, 16-byte async copies", "tile-major, 16-byte async copies",
                   "async copies via L1", "element loads", "split-K", "batch 3", "2 guards"):
        assert phrase in text, phrase


def _big_tensor_core_kernels() -> list[k.Kernel]:
    """The tensor-core kernels of a bf16 GEMM 8192 and of a ResNet conv layer's forward and
    gradients, for an H200."""
    z = np.zeros((8192, 8192), BF16)
    x, w = np.zeros((64, 16, 16, 128), BF16), np.zeros((3, 3, 128, 256), BF16)
    d_o = np.zeros((64, 16, 16, 256), BF16)
    programs = [tile.function(GEMM).bind(z, z), tile.function(CONV).bind(x, w),
                tile.function(CONV).gradient_function(x, w).bind(x, w, d_o)]
    return [kernel for bound in programs for kernel in _kernels(bound)
            if kernel.schedule.startswith(TC)]


def test_kernel_source_is_loops_not_unrolled_text(monkeypatch):
    """The copies, hoisted slot values, fragment loads, k16 steps and epilogue are ``#pragma
    unroll`` loops (NVRTC unrolls them): each ldmatrix / cp.async / mma statement appears a
    fixed number of times whatever the tile, and the source stays small (a 128x256x64 GEMM
    kernel was 40 KB written out, the NHWC conv gradients of ResNet-9 50-70 KB; now ~19 KB,
    of which ~5 KB are the dialect's helper functions)."""
    monkeypatch.setenv("GINGHAM_WGMMA", "0")  # the mma.sync kernels
    kernels = _big_tensor_core_kernels()
    assert len(kernels) == 4 and any("128x256x64 tile" in kk.schedule for kk in kernels)
    for kernel in kernels:
        source = render(kernel, DIALECTS["cuda"])
        assert len(source) < 24_000, (len(source), kernel.schedule)
        # prologue, the k16 steps' loop, the next TK step's first fragments: A and B each
        assert source.count('asm volatile("ldmatrix') == 6, kernel.schedule
        assert source.count('asm("mma.sync') == 2, kernel.schedule  # loop's and last step's
        # the prologue's (one unrolled loop per operand) and the K loop's
        copies = source.count("cp.async.cg.shared") + source.count("cp.async.ca.shared")
        assert copies == 4, kernel.schedule
        assert source.count("#pragma unroll") >= 10
        # what it costs NVRTC follows the unrolled code: weighed as such for the compile pieces
        assert unit_of(kernel, DIALECTS["cuda"])[0].cost > 8 * len(source)


def test_warpgroup_kernel_source():
    """On an H200 the same kernels are warpgroup ones: no fragments; each wgmma statement
    (which names all its accumulators) once per 64-row slab, inside the unrolled loop of k16
    steps; the descriptors from 1024-byte aligned shared memory; the accumulators scalar
    variables (an array named in every wgmma statement costs NVVM the square of them), copied
    to an array for the epilogue's loops; the source still small."""
    kernels = _big_tensor_core_kernels()
    assert len(kernels) == 4 and all("wgmma m64n" in kk.schedule for kk in kernels)
    for kernel in kernels:
        source = render(kernel, DIALECTS["cuda"])
        slabs = 2 if "of 128x" in kernel.schedule else 1
        # 24 KB before the accumulators were scalars; now each has a zeroing and a copy line
        assert len(source) < 40_000, (len(source), kernel.schedule)
        products = [line for line in source.splitlines() if "wgmma.mma_async" in line]
        assert products and all('"+f"(gt_acc_0_0_0)' in line and "gt_acc[" not in line
                                for line in products)
        assert "float gt_acc[" not in source and "gt_cell[0][0][0] = gt_acc_0_0_0;" in source
        assert "ldmatrix" not in source and "mma.sync" not in source
        assert source.count("wgmma.mma_async.sync.aligned") == slabs, kernel.schedule
        assert source.count("wgmma.commit_group") == 1 and source.count("wgmma.wait_group") == 2
        assert "extern __shared__ __align__(1024)" in source
        assert source.count("fence.proxy.async.shared::cta") == 1


def test_warpgroup_products_are_pipelined():
    """ptxas keeps the warpgroup products asynchronous in every kernel, split-K included: the
    filter gradient's K loop has a run-time trip count, and without ``wgmma_hold`` NVVM moved
    the accumulators' zeroing into it, so ptxas serialised every wgmma (warning C7515)."""
    kernels = _big_tensor_core_kernels()
    assert any("split-K" in kk.schedule for kk in kernels)
    for kernel in kernels:
        unit, _ = unit_of(kernel, DIALECTS["cuda"])
        log = build_log(unit.source, unit.entry)
        assert "C7515" not in log and "serialized" not in log, (kernel.schedule, log[-1500:])
        assert "0 bytes spill stores" in log, (kernel.schedule, log[-1500:])


# -- the choice ------------------------------------------------------------------------------


def _schedules(source, arrays, info=H200):
    return [kernel.schedule for kernel in _kernels(tile.function(source).bind(*arrays), info)]


def test_falls_back_when_not_for_tensor_cores():
    rng = np.random.default_rng(3)
    a16, b16 = _rand(rng, (128, 64), BF16), _rand(rng, (64, 128), BF16)
    assert _schedules(GEMM, (a16, b16))[0].startswith(TC)
    # mixed operand types, float32, an old GPU, OpenCL: the float32 tiled schedule
    mixed = _schedules(GEMM, (a16, _rand(rng, (64, 128), F16)))
    fp32 = _schedules(GEMM, (_f32(a16), _f32(b16)))
    turing = _schedules(GEMM, (a16, b16), H200.__class__(**{**H200.as_dict(),
                                                            "compute_capability": 75}))
    opencl = _schedules(GEMM, (a16, b16), H200.__class__(**{**H200.as_dict(),
                                                            "dialect": "opencl"}))
    for schedules in (mixed, fp32, turing, opencl):
        assert schedules[0].startswith("gpu tiled contraction"), schedules


def test_other_dialects_refuse_warp_ops():
    kernel = k.Kernel("w", (), k.WarpOp("cp_async_commit"), k.Launch((32,), (32,)))
    assert "cp.async.commit_group" in render(kernel, DIALECTS["cuda"])
    for dialect in ("c", "opencl"):
        with pytest.raises(ValueError, match="only in the CUDA dialect"):
            render(kernel, DIALECTS[dialect])


# -- the tuner's tensor-core family ----------------------------------------------------------------


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty cache (kernels, tuning database) for this test."""
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GINGHAM_CONFIG_FILE", str(tmp_path / "config.json"))
    monkeypatch.delenv("GINGHAM_TUNE", raising=False)


def _family(source, arrays, info=H200):
    bound = tile.function(source).bind(*arrays)
    kernel_plan = plan(bound)
    ctx = LoweringContext(bound, kernel_plan.aliases)
    return bound, kernel_plan.kernels[0], search.family_of(kernel_plan.kernels[0], ctx, info)


def test_registers_and_residency_decide_what_fits():
    """Warp tiles of 64x64 take ~252 registers (NVRTC: 242-255 on the H200): 4 warps fit a
    multiprocessor twice, 8 once; 512 threads of 32x64 warp tiles do not fit (they failed to
    launch there), nor a ring beyond the shared memory."""
    assert tiling_tc.registers(TcConfig(128, 128, 2, 2)) == 252
    assert tiling_tc.residency(TcConfig(128, 128, 2, 2), H200) == 2
    assert tiling_tc.residency(TcConfig(128, 256, 2, 4, tile_k=64), H200) == 1
    assert tiling_tc.residency(TcConfig(128, 128, 2, 2, tile_k=64, stages=4), H200) == 1
    assert not tiling_tc.fits(TcConfig(128, 256, 4, 4), H200)
    assert not tiling_tc.fits(TcConfig(256, 256, 4, 4, tile_k=64), H200)
    assert tiling_tc.fits(TcConfig(128, 256, 2, 4, tile_k=64), H200)
    assert not tiling_tc.fits(TcConfig(128, 256, 2, 4, tile_k=64, stages=4),
                              dataclasses.replace(H200, local_memory_bytes=100 * 1024))


def test_tilings_that_would_spill_are_not_built():
    """A warpgroup of 128x256 needs 256 accumulators a thread, more than a thread has: such
    tilings spilled and ran 10-13x slower than 128x256 of two warpgroups on the H200, so the
    tuner's space leaves them out, and it caps the registers of a warpgroup block only where
    its other registers (descriptors, barriers) fit too."""
    one_group = TcConfig(128, 256, 4, 1, tile_k=64, stages=4, instruction="wgmma")
    two_groups = TcConfig(128, 256, 8, 1, tile_k=64, stages=4, instruction="wgmma")
    assert tiling_tc.registers(one_group) > tiling_tc.MAX_THREAD_REGISTERS
    assert not tiling_tc.fits(one_group, H200)
    assert tiling_tc.fits(two_groups, H200)
    x, w = np.zeros((512, 16, 16, 128), BF16), np.zeros((3, 3, 128, 256), BF16)
    family = _family(CONV, (x, w))[2]
    configs = [config for _, config in family.ranked(None)]
    assert two_groups in configs
    assert all(tiling_tc.registers(c) <= tiling_tc.MAX_THREAD_REGISTERS for c in configs)
    tall = TcConfig(256, 128, 8, 1, tile_k=64, stages=4, instruction="wgmma")
    assert not any(c.min_blocks for c in family.neighbours(tall))


def test_the_cost_counts_only_the_warps_there_are_blocks_for():
    """A weight gradient of one output tile and a long K (ResNet-9's first layer: 64 x 27,
    K 524288) split into 261 slices is 261 blocks over 132 multiprocessors: blocks of one
    warp leave two warps a multiprocessor and ran 6x slower than blocks of four (0.52 against
    0.09 ms on the H200); the cost says so."""
    view = types.SimpleNamespace(m=64, n=27, k=524288, batches=1)
    one_warp = TcConfig(64, 64, 1, 1, split=261)
    four_warps = TcConfig(64, 64, 2, 2, split=261)
    assert tiling_tc.config_cost(one_warp, view, H200) > \
        tiling_tc.config_cost(four_warps, view, H200)


def test_big_gemms_default_to_what_measured_best():
    """bf16 GEMM 4096 and 8192: 128x256x64 tiles (fastest of the H200 sweeps, with mma.sync
    and with wgmma); the CIFAR conv layer (N = 64) keeps 128x64 tiles. mma.sync on sm_80-89
    (and on the H200 with GINGHAM_WGMMA=0), warpgroups on the H200; none past sm_90."""
    ampere = dataclasses.replace(H200, compute_capability=80)
    blackwell = dataclasses.replace(H200, compute_capability=100)
    for n in (4096, 8192):
        a = np.zeros((n, n), BF16)
        for info in (ampere, blackwell):
            assert _family(GEMM, (a, a), info)[2].default() == TcConfig(128, 256, 2, 4, tile_k=64)
        assert _family(GEMM, (a, a))[2].default() == TcConfig(
            128, 256, 8, 1, tile_k=64, stages=4, instruction="wgmma")
    x, w = np.zeros((128, 32, 32, 64), BF16), np.zeros((3, 3, 64, 64), BF16)
    assert "128x64x32 tile, 2x2 warps" in _schedules(CONV, (x, w), ampere)[0]
    assert "128x64x64 tile, 2 warpgroup(s)" in _schedules(CONV, (x, w))[0]


def test_warpgroups_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("GINGHAM_WGMMA", "0")
    a = np.zeros((4096, 4096), BF16)
    assert _family(GEMM, (a, a))[2].default() == TcConfig(128, 256, 2, 4, tile_k=64)


def test_element_staged_operands_keep_mma():
    """A 3-channel convolution (its operands staged element by element) measured faster
    with mma.sync than with warpgroups on the H200."""
    x, w = np.zeros((512, 32, 32, 3), BF16), np.zeros((3, 3, 3, 64), BF16)
    (schedule,) = _schedules(CONV, (x, w))
    assert "mma.sync" in schedule and "element loads" in schedule, schedule


def test_tuner_space_of_tensor_core_kernels():
    """bf16 / fp16 products on CUDA are the tensor-core family: a bounded space, every
    configuration and neighbour buildable, the untuned choice in it, ranked by cost."""
    big = np.zeros((8192, 8192), BF16)
    x, w = np.zeros((128, 32, 32, 64), F16), np.zeros((3, 3, 64, 64), F16)
    for source, arrays in ((GEMM, (big, big)), (CONV, (x, w))):
        _, _, family = _family(source, arrays)
        assert family.name == "gpu-tensor-core"
        ranked = family.ranked(None)
        configs = [config for _, config in ranked]
        assert 0 < len(configs) <= 400 and len(set(configs)) == len(configs)
        assert family.default() in configs
        assert all(tiling_tc.buildable(c, family.view, H200) for c in configs)
        assert [cost for cost, _ in ranked] == sorted(cost for cost, _ in ranked)
        neighbours = family.neighbours(configs[0])
        assert neighbours and configs[0] not in neighbours
        assert all(family.legal(c) for c in neighbours)
    small = np.zeros((256, 256), BF16)
    assert _family(GEMM, (_f32(small), _f32(small)))[2].name == "gpu-tiled"
    turing = dataclasses.replace(H200, compute_capability=75)
    assert _family(GEMM, (small, small), turing)[2].name == "gpu-tiled"


def test_a_stored_tensor_core_config_is_compiled_and_correct(own_cache):
    """Compilation takes the tuning database's configuration (checked here in the simulator);
    an illegal one is ignored for the untuned choice."""
    rng = np.random.default_rng(8)
    a, b = _rand(rng, (200, 72), BF16), _rand(rng, (72, 136), BF16)
    bound, kernel, family = _family(GEMM, (a, b))
    default = family.default()
    other = next(c for _, c in family.ranked(None)
                 if c != default and c.split == 1 and c.threads != default.threads)
    key, dkey = kernel_key(family.name, kernel, bound), device_key(H200)
    for stored, expected in ((other, other), (TcConfig(128, 256, 4, 4), default)):
        TuningDB().put(key, dkey, {"family": family.name, "config": dataclasses.asdict(stored)})
        (got,), schedules = _simulate(tile.function(GEMM), (a, b))
        assert schedules[0].startswith(TC) and str(expected) in schedules[0], schedules
        _close(got, _f32(a) @ _f32(b), BF16, 72, str(expected))


@pytest.mark.parametrize("device", CUDA or [pytest.param(None, marks=pytest.mark.skip(
    reason="no CUDA device in this run"))], ids=[d.id for d in CUDA] or ["no-cuda"])
def test_tuner_searches_tensor_core_configs_on_cuda(device, own_cache):
    """A measured search of a bf16 GEMM: candidates golden-checked against the untuned
    schedule, the winner stored and compiled, its result right against NumPy."""
    if device.info.compute_capability < 80:
        pytest.skip(f"{device.id} has no tensor-core schedule")
    rng = np.random.default_rng(9)
    a, b = _rand(rng, (512, 384), BF16), _rand(rng, (384, 640), BF16)
    bound = tile.function(GEMM).bind(a, b)
    with search.tuning(budget=5.0, progress=False, candidates=3) as session:
        exe = executable(bound, device)
    (result,) = session.results
    assert result.family == "gpu-tensor-core" and result.tried >= 3, result
    assert result.seconds <= result.default_seconds and not result.rejected, result
    assert str(result.config) in exe.launches[0].schedule
    (got,) = exe(a, b)
    _close(got, _f32(a) @ _f32(b), BF16, 384, str(result.config))
    kernel = plan(bound).kernels[0]
    entry = TuningDB().get(kernel_key(result.family, kernel, bound), device_key(device.info))
    assert entry["config"] == dataclasses.asdict(result.config)
