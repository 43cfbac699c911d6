"""A tiled product whose fused epilogue is heavy keeps its loop over cells a loop.

Unrolled over a work-item's 64-128 cells, an epilogue that stores several tensors and loads
many cost NVRTC seconds (one bf16 ResNet-18 kernel 4.9 s); kept a loop, a few tenths. The
GPU schedules decide by :data:`gingham.compiler.tiling_gpu.EPILOGUE_UNROLLED_ACCESSES`. Here:
which kernels keep the loop, and that both forms compute the same thing: simulated
(``tests/compiler/simt.py``, the H200's description) and on every OpenCL and CUDA device
(PoCL described as a GPU runs the SIMT schedule with its private arrays for real).
"""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import gingham
from gingham import tile
from gingham.bench import model as bench_model
from gingham.compiler import kernel_ir as k
from gingham.compiler import lower_program, rewrite_program, tiling_gpu, tiling_tc
from gingham.compiler.tiling_tc import TcConfig
from gingham.devices import list_devices
from gingham.runtime import executable
from gingham.tune.described import H200
from simt import run_program  # tests/compiler/simt.py (the test directory is on sys.path)

ROLLED = "epilogue a loop over"

#: A product and an epilogue of five outputs that read it, per-column scales and three
#: full-size tensors: some 20 global accesses a cell (a batch-norm gradient fused into a
#: convolution's data gradient has 54).
HEAVY = """
function (A[M, K], B[K, N], S0[N], S1[N], S2[N], X0[M, N], X1[M, N], X2[M, N])
        -> (O0, O1, O2, O3, O4) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
    O0 = relu(C * S0 + S1 + X0);
    O1 = O0 * X1 + S2;
    O2 = C * X2 - S0;
    O3 = O1 * O2 + X0;
    O4 = max(O3, X1) * S1;
}
"""
PLAIN = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""
#: (M, K, N), ragged on purpose (the epilogue's bounds test matters). fp32, with the SIMT
#: schedule pinned to 128x128 tiles of 8x8 cells a work-item: two tiles each way. bf16: the
#: warpgroup schedule wants N in whole 16-byte copies (else mma.sync, which keeps its loops
#: unrolled).
SHAPES = {np.dtype(np.float32): (150, 72, 133), np.dtype(ml_dtypes.bfloat16): (150, 72, 136)}
PINNED = tiling_gpu.CANDIDATES[0]


@pytest.fixture(autouse=True)
def pinned_simt_tiles(monkeypatch):
    """The SIMT schedule's largest tiles (the cost model picks small ones for small shapes)."""
    assert (PINNED.tile_m, PINNED.tile_n, PINNED.reg_m, PINNED.reg_n) == (128, 128, 8, 8)
    monkeypatch.setattr(tiling_gpu, "choose_config", lambda view, info, itemsize=4: PINNED)


def _arrays(dtype, seed=0):
    rng = np.random.default_rng(seed)
    M, K, N = SHAPES[np.dtype(dtype)]

    def make(*shape):
        return (rng.standard_normal(shape) / 4).astype(dtype)

    return [make(M, K), make(K, N), make(N), make(N), make(N), make(M, N), make(M, N),
            make(M, N)]


def _reference(a, b, s0, s1, s2, x0, x1, x2):
    """The outputs in float64 from the inputs as they are (rounded to their type already)."""
    a, b, s0, s1, s2, x0, x1, x2 = (np.asarray(v, np.float64)
                                    for v in (a, b, s0, s1, s2, x0, x1, x2))
    c = a @ b
    o0 = np.maximum(c * s0 + s1 + x0, 0)
    o1 = o0 * x1 + s2
    o2 = c * x2 - s0
    o3 = o1 * o2 + x0
    return [o0, o1, o2, o3, np.maximum(o3, x1) * s1]


def _product_schedules(source, arrays, info=H200):
    kernels = lower_program(tile.function(source).bind(*arrays), info)
    return [kk.schedule for kk in kernels if "contraction" in kk.schedule
            and "split-K sum" not in kk.schedule]


def test_global_accesses_counts_each_load_and_store_once_not_per_iteration():
    i = k.Var("i", "int32")
    loaded = k.BinOp("+", k.Load("A", i, "float32"), k.LoadLocal("r", (i,), "float32"), "float32")
    guarded = k.If(k.BinOp("<", i, k.Const(4, "int32"), "bool"),
                   k.Store("D", i, k.Load("B", i, "float32")))
    body = k.For("i", 0, 8, k.block(k.Store("C", i, loaded), guarded), kind="unroll")
    # C, A, D and B; the register array r is not global memory; the loop's 8 trips not counted.
    assert k.global_accesses(body) == 4


BUDGETS = pytest.mark.parametrize("budget", [0, 10**9], ids=["loop kept", "unrolled"])


#: The three schedules of a tiled product: (id, operands' type, environment, schedule text).
SCHEDULES = [("simt", np.float32, {}, "gpu tiled contraction"),
             ("wgmma", ml_dtypes.bfloat16, {}, "wgmma m64n"),
             ("mma.sync", ml_dtypes.bfloat16, {"GINGHAM_WGMMA": "0"}, "mma.sync m16n8k16")]
EACH_SCHEDULE = pytest.mark.parametrize("dtype, environment, schedule",
                                        [case[1:] for case in SCHEDULES],
                                        ids=[case[0] for case in SCHEDULES])


@BUDGETS
@EACH_SCHEDULE
def test_the_budget_decides_whether_the_epilogue_keeps_its_loop(dtype, environment, schedule,
                                                                 budget, monkeypatch):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(tiling_gpu, "EPILOGUE_UNROLLED_ACCESSES", budget)
    (product,) = _product_schedules(HEAVY, _arrays(dtype))
    assert schedule in product and (ROLLED in product) == (budget == 0), product
    if budget == 0 and dtype != np.float32:  # the cells fit the tensor cores' staging ring
        assert product.endswith("through shared memory"), product


def _step_schedules(model: str, precision: str, layout: str, batch: int) -> list[str]:
    """The schedules of a benchmark model's training step as an H200 would lower it."""
    spec = bench_model.MODELS[model]
    step = spec.gingham_step("cpu", layout, precision)
    x, y = bench_model.synthetic_batches(spec, batch, layout)[0]
    bound = bench_model.trace_step(step, gingham.tensor(x, device="cpu"),
                                   gingham.tensor(y, device="cpu"))
    return [kk.schedule for kk in lower_program(rewrite_program(bound), H200)]


def test_resnet18s_batch_norm_gradient_products_keep_their_loop_resnet9s_none():
    """The budget's purpose, on the H200's description: ResNet-18's products that carry a
    batch-norm gradient in their epilogue (4.9 s of NVRTC for one, unrolled) keep the loop;
    none of ResNet-9's (the benchmark's kernels, 0.1-0.45 s each) does."""
    rolled = [s for s in _step_schedules("resnet18", "bf16", "NHWC", 128) if ROLLED in s]
    assert rolled and all("wgmma" in s for s in rolled), rolled
    for precision, layout in (("fp32", "NCHW"), ("bf16", "NHWC")):
        schedules = _step_schedules("resnet9", precision, layout, 512)
        assert not [s for s in schedules if ROLLED in s], precision


def _simulate(source, arrays):
    bound = tile.function(source).bind(*arrays)
    kernels = lower_program(bound, H200)
    return run_program(bound, kernels, arrays), [kernel.schedule for kernel in kernels]


def _check(outputs, arrays, rtol, atol):
    for index, (got, want) in enumerate(zip(outputs, _reference(*arrays))):
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol,
                                   err_msg=f"O{index}")


@BUDGETS
@EACH_SCHEDULE
def test_simulated_heavy_epilogue_both_ways(dtype, environment, schedule, budget, monkeypatch):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(tiling_gpu, "EPILOGUE_UNROLLED_ACCESSES", budget)
    arrays = _arrays(dtype, seed=1)
    outputs, schedules = _simulate(HEAVY, arrays)
    assert [s for s in schedules if schedule in s and (ROLLED in s) == (budget == 0)], schedules
    _check(outputs, arrays, *_TOLERANCE[np.dtype(dtype)])


def test_simulated_tensor_core_cells_through_local_memory_where_the_ring_is_smaller(
        monkeypatch):
    """Two stages of 128x128x32 (a neighbour the measured search may try): a 32 KiB ring
    against 64 KiB of cells, so the heavy epilogue's loop reads a local-memory copy."""
    config = TcConfig(128, 128, 2, 2, tile_k=32, stages=2)
    assert 4 * 128 * 128 > config.shared_bytes  # the tile's fp32 cells against the ring
    monkeypatch.setenv("GINGHAM_WGMMA", "0")
    monkeypatch.setattr(tiling_tc, "choose_config", lambda view, info: config)
    monkeypatch.setattr(tiling_gpu, "EPILOGUE_UNROLLED_ACCESSES", 0)
    arrays = _arrays(ml_dtypes.bfloat16, seed=4)
    outputs, schedules = _simulate(HEAVY, arrays)
    assert [s for s in schedules if str(config) in s
            and s.endswith("through local memory")], schedules
    _check(outputs, arrays, *_TOLERANCE[np.dtype(ml_dtypes.bfloat16)])


#: rtol, atol. In bf16 each output rounds to 8 bits of mantissa and the later ones read the
#: rounded earlier ones: a few units of the last place of values around 1.
_TOLERANCE = {np.dtype(np.float32): (1e-4, 1e-4), np.dtype(ml_dtypes.bfloat16): (3e-2, 3e-2)}




def test_heavy_epilogue_kept_a_loop_on_every_gpu_device(gpu, monkeypatch, no_program_cache):
    monkeypatch.setattr(tiling_gpu, "EPILOGUE_UNROLLED_ACCESSES", 0)
    arrays = _arrays(np.float32, seed=2)
    exe = executable(tile.function(HEAVY).bind(*arrays), gpu)
    schedules = [launch.schedule for launch in exe.launches]
    assert any(s.startswith("gpu tiled contraction") and ROLLED in s for s in schedules), \
        schedules
    _check(exe(*arrays), arrays, *_TOLERANCE[np.dtype(np.float32)])


@pytest.mark.parametrize("device", [d for d in list_devices() if d.info.dialect == "cuda"],
                         ids=lambda d: d.id)
@pytest.mark.parametrize("environment, schedule", [case[2:] for case in SCHEDULES[1:]],
                         ids=[case[0] for case in SCHEDULES[1:]])
def test_heavy_bf16_epilogue_kept_a_loop_on_cuda(device, environment, schedule, monkeypatch,
                                                 no_program_cache):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(tiling_gpu, "EPILOGUE_UNROLLED_ACCESSES", 0)
    arrays = _arrays(ml_dtypes.bfloat16, seed=3)
    exe = executable(tile.function(HEAVY).bind(*arrays), device)
    schedules = [launch.schedule for launch in exe.launches]
    if device.info.compute_capability == 90 or "mma.sync" in schedule:
        assert any(schedule in s and ROLLED in s for s in schedules), schedules
    _check(exe(*arrays), arrays, *_TOLERANCE[np.dtype(ml_dtypes.bfloat16)])
