"""The GPU tiled schedule for contractions, on every discovered OpenCL and CUDA device.

References are NumPy / PyTorch in float64. PoCL (OpenCL on the CPU) describes itself as a
CPU; the ``gpu`` fixture (``tests/compiler/conftest.py``) describes it as a GPU: it runs local
memory and barriers for real, which makes it a good place to test the GPU schedule without a
GPU. Every test asserts that the tiled schedule was the one chosen, so that a silent fallback
cannot pass as a test.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gingham import tile
from gingham.compiler import tiling_gpu
from gingham.runtime import executable

TILED = "gpu tiled contraction"


def _run(source: str, arrays, device, expect_tiled=(0,)):
    """Outputs of ``source`` on ``device``; asserts which launches have the tiled schedule."""
    fn = tile.function(source)
    exe = executable(fn.bind(*arrays), device)
    schedules = [launch.schedule for launch in exe.launches]
    for index in expect_tiled:
        assert schedules[index].startswith(TILED), schedules
    return exe(*arrays), schedules


def _close(got, expected, k_size, err=""):
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=2e-6 * k_size * scale,
                               err_msg=err)


MATMUL = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""


@pytest.mark.parametrize("m, k, n", [
    (64, 64, 64), (37, 51, 45), (3, 300, 5), (200, 100, 70), (129, 17, 257), (1, 4096, 3),
    (130, 9, 130),
])
def test_matmul_shapes(gpu, m, k, n):
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (c,), _ = _run(MATMUL, (a, b), gpu)
    _close(c, a.astype(np.float64) @ b, k)


#: Every sample configuration, and the largest without its register bound (on CUDA, the
#: bounded one may spill: both must compute the same cells).
CONFIGS = tiling_gpu.CANDIDATES + (dataclasses.replace(tiling_gpu.CANDIDATES[0], bounded=False),)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c}{'' if c.bounded else ' unbounded'}")
def test_every_candidate_config(gpu, monkeypatch, config, no_program_cache):
    if not tiling_gpu._fits(config, gpu.info, 4):
        pytest.skip(f"{config} does not fit {gpu.id}")
    monkeypatch.setattr(tiling_gpu, "choose_config", lambda view, info, itemsize=4: config)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((150, 70)).astype(np.float32)
    b = rng.standard_normal((70, 133)).astype(np.float32)
    (c,), schedules = _run(MATMUL, (a, b), gpu)
    assert str(config) in schedules[0]
    _close(c, a.astype(np.float64) @ b, 70)


def test_transposed_operands_and_float64(gpu):
    source = """
    function (A[K, M], B[N, K]) -> (C) {
        C[i, j : M, N] = +(A[k, i] * B[j, k]);
    }
    """
    rng = np.random.default_rng(2)
    a = rng.standard_normal((90, 70))
    b = rng.standard_normal((50, 90))
    (c,), schedules = _run(source, (a, b), gpu)
    assert "A=A[o0] (tile-major" in schedules[0] and "B=B[o1] (K-major" in schedules[0]
    np.testing.assert_allclose(c, a.T @ b.T, rtol=1e-10, atol=1e-10)


def test_batched_matmul(gpu):
    source = """
    function (A[Bt, M, K], B[Bt, K, N]) -> (C) {
        C[b, i, j : Bt, M, N] = +(A[b, i, k] * B[b, k, j]);
    }
    """
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 33, 40)).astype(np.float32)
    b = rng.standard_normal((5, 40, 66)).astype(np.float32)
    (c,), schedules = _run(source, (a, b), gpu)
    assert "batch 5" in schedules[0]
    _close(c, np.matmul(a.astype(np.float64), b), 40)


def test_fused_epilogue_and_half_inputs(gpu):
    source = """
    function (A[M, K], B[K, N], Bias[N]) -> (D) {
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
        D = relu(C + Bias);
    }
    """
    rng = np.random.default_rng(4)
    a = rng.standard_normal((70, 48)).astype(np.float16)
    b = rng.standard_normal((48, 36)).astype(np.float16)
    bias = rng.standard_normal(36).astype(np.float16)
    # Half inputs run on the tensor cores where the device has them (CUDA, sm_80 and later:
    # tests/compiler/test_tensor_cores.py), on the fp32-accumulating tiled schedule elsewhere.
    tensor_cores = gpu.info.dialect == "cuda" and gpu.info.compute_capability >= 80
    (d,), schedules = _run(source, (a, b, bias), gpu, expect_tiled=() if tensor_cores else (0,))
    if tensor_cores:
        assert schedules[0].startswith("gpu tensor-core contraction"), schedules
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    expected = np.maximum(c + bias, 0)
    assert d.dtype == np.float16
    np.testing.assert_allclose(d.astype(np.float64), expected, rtol=4e-3, atol=4e-3)


def _conv_source(stride: int, pad: int, dilation: int, h: int, kh: int) -> str:
    out = (h + 2 * pad - dilation * (kh - 1) - 1) // stride + 1
    return f"""
    function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {{
        O[n, y, x, co : N, {out}, {out}, CO] =
            +(I[n, {stride}*y + {dilation}*ky - {pad}, {stride}*x + {dilation}*kx - {pad}, ci]
              * F[ky, kx, ci, co]);
    }}
    """


def _torch_conv(i, f, stride, pad, dilation):
    out = F.conv2d(torch.from_numpy(i).double().permute(0, 3, 1, 2),
                   torch.from_numpy(f).double().permute(3, 2, 0, 1),
                   stride=stride, padding=pad, dilation=dilation)
    return out.permute(0, 2, 3, 1).numpy()


@pytest.mark.parametrize("stride, pad, dilation, h", [
    (1, 1, 1, 16), (2, 1, 1, 15), (1, 2, 2, 12), (2, 0, 1, 9),
])
def test_conv2d_forward(gpu, stride, pad, dilation, h):
    rng = np.random.default_rng(stride * 10 + pad)
    i = rng.standard_normal((2, h, h, 6)).astype(np.float32)
    f = rng.standard_normal((3, 3, 6, 20)).astype(np.float32)
    (o,), schedules = _run(_conv_source(stride, pad, dilation, h, 3), (i, f), gpu)
    assert ("2 guards" in schedules[0]) == (pad > 0)
    _close(o, _torch_conv(i, f, stride, pad, dilation), 54)


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_gradients(gpu, stride):
    """The data and filter gradients (``fn.vjp``), against PyTorch autograd; the stride-1
    data gradient runs over 3x3 kernel offsets, not over the image (narrow_reductions)."""
    rng = np.random.default_rng(40 + stride)
    h = 12
    source = _conv_source(stride, 1, 1, h, 3)
    fn = tile.function(source)
    i = rng.standard_normal((2, h, h, 5)).astype(np.float32)
    f = rng.standard_normal((3, 3, 5, 7)).astype(np.float32)
    out = (h + 2 - 3) // stride + 1
    d_o = rng.standard_normal((2, out, out, 7)).astype(np.float32)

    grad = tile.function(fn.gradient_source(i, f))
    exe = executable(grad.bind(i, f, d_o), gpu)
    schedules = [launch.schedule for launch in exe.launches]
    assert all(s.startswith(TILED) for s in schedules), schedules
    if stride == 1:
        assert any("K=63" in s for s in schedules), schedules  # 3 * 3 * 7, not 12 * 12 * 7

    d_i, d_f = fn.vjp((i, f), d_o, device=gpu.id)
    ti = torch.from_numpy(i).double().permute(0, 3, 1, 2).requires_grad_()
    tf = torch.from_numpy(f).double().permute(3, 2, 0, 1).requires_grad_()
    to = F.conv2d(ti, tf, stride=stride, padding=1)
    to.backward(torch.from_numpy(d_o).double().permute(0, 3, 1, 2))
    _close(d_i, ti.grad.permute(0, 2, 3, 1).numpy(), 63, "data gradient")
    _close(d_f, tf.grad.permute(2, 3, 1, 0).numpy(), 2 * out * out, "filter gradient")


def test_fallbacks_stay_correct(gpu):
    # Too little work, and a max-reduction: the default schedule, with the same results.
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    (c,), schedules = _run(MATMUL, (a, b), gpu, expect_tiled=())
    assert not schedules[0].startswith(TILED)
    _close(c, a.astype(np.float64) @ b, 4)
    source = """
    function (A[M, K], B[K, N]) -> (C) {
        C[i, j : M, N] = >(A[i, k] * B[k, j]);
    }
    """
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    (c,), schedules = _run(source, (a, b), gpu, expect_tiled=())
    assert not schedules[0].startswith(TILED)
    np.testing.assert_allclose(c, (a[:, :, None] * b[None]).max(axis=1), rtol=1e-6)


def _cuda_kernel(config, info):
    """The kernel of a 1024-cubed matmul under ``config``, lowered for ``info``."""
    from gingham.compiler.fusion import plan
    from gingham.compiler.lower import LoweringContext

    a = np.zeros((1024, 1024), np.float32)
    bound = tile.function(MATMUL).bind(a, a)
    kernel_plan = plan(bound)
    ctx = LoweringContext(bound, kernel_plan.aliases)
    (kernel,) = tiling_gpu.tiled_contraction(kernel_plan.kernels[0], ctx, "k0", info, config)
    return kernel


def test_cuda_holds_registers_to_the_residency_the_cost_model_counts_on():
    """NVRTC gives a 128x128 tile of 8x8 per work-item 130 registers: one work-group of 256
    a multiprocessor, where the cost model counts two (NVIDIA's OpenCL compiler gives the same
    source 127). On CUDA the kernel says so (``__launch_bounds__(256, 2)``); unbounded, or
    where threads or local memory limit the work-groups first, or in OpenCL C, it does not."""
    from gingham.tune.described import H200

    from gingham.codegen.c_family import DIALECTS, render

    big = tiling_gpu.TileConfig(128, 128, 8, 8, 8)
    assert tiling_gpu.resident_blocks(big, H200) == 2
    kernel = _cuda_kernel(big, H200)
    assert kernel.launch.min_blocks == 2
    assert "__launch_bounds__(256, 2)" in render(kernel, DIALECTS["cuda"])
    assert "registers for 2 work-groups a unit" in kernel.schedule
    for config, info in [(dataclasses.replace(big, bounded=False), H200),
                         (tiling_gpu.TileConfig(16, 16, 8, 2, 2), H200),
                         (big, dataclasses.replace(H200, dialect="opencl"))]:
        kernel = _cuda_kernel(config, info)
        assert kernel.launch.min_blocks == 0, (config, info.dialect)
        assert "__launch_bounds__" not in render(kernel, DIALECTS["cuda"])


def test_the_search_tries_the_unbounded_kernel_on_cuda_only():
    from gingham.tune.described import H200

    from gingham.compiler.fusion import plan
    from gingham.tune import space

    a = np.zeros((1024, 1024), np.float32)
    view = tiling_gpu.gemm_view(plan(tile.function(MATMUL).bind(a, a)).kernels[0].contraction)
    big = tiling_gpu.TileConfig(128, 128, 8, 8, 8)
    around = space.gpu_neighbours(big, view, H200, 4)
    assert dataclasses.replace(big, bounded=False) in around
    opencl = dataclasses.replace(H200, dialect="opencl", local_memory_bytes=49152)
    assert all(c.bounded for c in space.gpu_neighbours(big, view, opencl, 4))


def test_the_search_tries_the_k_steps_unrolled_two_at_a_time_on_gpus():
    """On a GPU the measured search tries the K steps of the best tile unrolled two at a time
    (and, around such a tile, whole again); a CPU's OpenCL driver is not offered it. The
    choice survives the tuning database's round trip."""
    from gingham.tune.described import H200

    from gingham.compiler.fusion import plan
    from gingham.tune import search, space

    a = np.zeros((1024, 1024), np.float32)
    view = tiling_gpu.gemm_view(plan(tile.function(MATMUL).bind(a, a)).kernels[0].contraction)
    big = tiling_gpu.TileConfig(128, 128, 8, 8, 8)
    halves = dataclasses.replace(big, unroll_k=tiling_gpu.UNROLL_K_NEIGHBOUR)
    assert halves in space.gpu_neighbours(big, view, H200, 4)
    assert big in space.gpu_neighbours(halves, view, H200, 4)
    assert "K steps unrolled 2 at a time" in str(halves) and "unrolled" not in str(big)
    cpu_driver = dataclasses.replace(H200, dialect="opencl", kind="cpu")
    assert not any(c.unroll_k for c in space.gpu_neighbours(big, view, cpu_driver, 4))
    family = search._GpuFamily.__new__(search._GpuFamily)  # from_dict needs no kernel
    assert family.from_dict(search._fields(halves)) == halves
    assert family.from_dict({k: v for k, v in search._fields(big).items()
                             if k != "unroll_k"}) == big  # an entry from before the choice


def test_narrow_reductions_keeps_the_assignments():
    """The change of variables gives the same set of (cell, value) terms as the original."""
    from gingham.compiler.fusion import plan

    source = _conv_source(1, 1, 1, 6, 3)
    fn = tile.function(source)
    i = np.zeros((1, 6, 6, 2), np.float32)
    f = np.zeros((3, 3, 2, 3), np.float32)
    d_o = np.zeros((1, 6, 6, 3), np.float32)
    grad = tile.function(fn.gradient_source(i, f))
    kernels = plan(grad.bind(i, f, d_o)).kernels
    data = next(kp.contraction for kp in kernels if kp.contraction.out == "D_I")
    narrow = tiling_gpu.narrow_reductions(data)
    assert narrow.reduction_size < data.reduction_size
    assert _terms(narrow) == _terms(data)


def _terms(nc):
    """Every valid assignment as (output cell, operand indices), by brute force."""
    import itertools

    names = nc.out_vars + nc.red_vars
    ranges = [range(s) for s in nc.out_shape] + [range(lo, hi + 1)
                                                  for lo, hi in nc.red_ranges.values()]
    order = list(nc.out_vars) + list(nc.red_ranges)
    found = set()
    for point in itertools.product(*ranges):
        env = dict(zip(order, point))
        if not all(0 <= q.poly.evaluate(env) < q.upper for q in nc.guards):
            continue
        operands = tuple(tuple(int(p.evaluate(env)) for p in a.index) for a in nc.operands)
        if all(0 <= x < s for a, idx in zip(nc.operands, operands) for x, s in zip(idx, a.sizes)):
            found.add((tuple(env[o] for o in nc.out_vars), operands))
    assert names  # the point enumerates every variable
    return found
