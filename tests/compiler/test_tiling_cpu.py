"""The tiled CPU schedule for sums of products (gingham.compiler.tiling_cpu): results against
NumPy / PyTorch on the ``cpu`` device and on a CPU's OpenCL driver (PoCL), and checks that the
tiled schedule was the one chosen."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gingham.tile.function import function

devices = pytest.importorskip("gingham.devices")


def _cpu_kind_devices() -> list[str]:
    """The C backend and every OpenCL driver of a CPU (PoCL): both run this schedule."""
    from gingham.compiler.tiling_cpu import runs_on

    return [d.id for d in devices.list_devices() if runs_on(d.info)] or ["cpu"]


@pytest.fixture(scope="module", params=_cpu_kind_devices())
def cpu(request):
    try:
        return devices.get_device(request.param)
    except Exception as exc:  # no C compiler with OpenMP
        pytest.skip(f"no {request.param} device: {exc}")


@pytest.fixture(autouse=True)
def tile_thin_products(monkeypatch):
    """These tests exercise the tiled schedule's edges on small shapes, many of them thin
    products, which the schedule otherwise leaves to the loop nest
    (:func:`gingham.compiler.tiling_cpu.thin_product`, tested in test_cpu_cells.py)."""
    from gingham.compiler import tiling_cpu

    monkeypatch.setattr(tiling_cpu, "THIN_SIDE", 0)


def schedules(bound, cpu) -> list[str]:
    from gingham.runtime import executable

    return [launch.schedule for launch in executable(bound, cpu).launches]


def run(fn, arrays, cpu):
    from gingham.runtime import executable

    bound = fn.bind(*arrays)
    outs = executable(bound, cpu)(*arrays)
    return outs, schedules(bound, cpu)


def assert_tiled(scheds, count=None):
    tiled = [s for s in scheds if s.startswith("cpu-tiled")]
    assert tiled, scheds
    if count is not None:
        assert len(tiled) == count, scheds


MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"


@pytest.mark.parametrize("m, k, n", [(1, 64, 64), (7, 5, 130), (37, 19, 45), (100, 300, 17),
                                     (130, 513, 70), (6, 1000, 16), (64, 64, 1)])
def test_matmul_edges(cpu, m, k, n):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (c,), scheds = run(function(MATMUL), (a, b), cpu)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    if m * n * k >= 4096:
        assert_tiled(scheds, 1)


def test_the_register_block_is_vectors(cpu):
    """The register block's accumulators are vectors in both dialects (GCC's vector extension
    in C: a GEMM compiles in a fifth of the time it took as unrolled scalar lanes), and the
    product is right where the rows of A are read at constant offsets from one another."""
    from gingham.codegen.c_family import DIALECTS
    from gingham.compiler import lower_program, rewrite_program
    from gingham.compiler.dedupe import unit_of

    rng = np.random.default_rng(5)
    a = rng.standard_normal((96, 200)).astype(np.float32)
    b = rng.standard_normal((200, 64)).astype(np.float32)
    bound = function(MATMUL).bind(a, b)
    (kernel,) = lower_program(rewrite_program(bound), cpu.info)
    assert kernel.schedule.startswith("cpu-tiled"), kernel.schedule
    source = unit_of(kernel, DIALECTS[cpu.info.dialect])[0].source
    vector = "gh_f32x" if cpu.info.dialect == "c" else "float"
    widths = {int(w) for w in re.findall(rf"{vector}(4|8|16) tc_acc\[", source)}
    assert widths, source
    # no wider than the CPU's vectors (a 16-float vector on an AVX2 CPU spilled: 10x slower)
    assert max(widths) <= max(4, cpu.info.simd_width), (widths, cpu.info.simd_width)
    (c,), _ = run(function(MATMUL), (a, b), cpu)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("simd_width", [8, 16])
def test_the_register_block_vectors_are_the_cpus_width(simd_width):
    """An AVX2 CPU (8 floats a vector) gets accumulators of 8 floats and an AVX-512 CPU of 16,
    whatever the block's width: GCC split a 16-float vector on AVX2 into two registers and kept
    the block on the stack (GEMM 1024 at 15 GFLOP/s on a 2-core Zen 3, NumPy 168)."""
    import dataclasses

    from gingham.codegen.c_family import DIALECTS
    from gingham.compiler import lower_program, rewrite_program
    from gingham.compiler.dedupe import unit_of

    info = dataclasses.replace(devices.get_device("cpu").info, simd_width=simd_width,
                               features=())
    a = np.ones((192, 256), np.float32)
    b = np.ones((256, 256), np.float32)
    (kernel,) = lower_program(rewrite_program(function(MATMUL).bind(a, b)), info)
    assert kernel.schedule.startswith("cpu-tiled"), kernel.schedule
    source = unit_of(kernel, DIALECTS["c"])[0].source
    assert set(re.findall(r"gh_f32x(\d+) tc_acc\[", source)) == {str(simd_width)}, source


def test_random_shapes(cpu):
    rng = np.random.default_rng(7)
    fn = function(MATMUL)
    for _ in range(6):
        m, k, n = (int(v) for v in rng.integers(1, 200, size=3))
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        (c,), scheds = run(fn, (a, b), cpu)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4,
                                   atol=1e-4 * np.sqrt(k))


def test_transposed_operands_and_epilogue(cpu):
    """B read across its rows, A down its columns, and a fused bias + relu epilogue."""
    fn = function("""function (A[K, M], B[N, K], D[N]) -> (R) {
        C[i, j : M, N] = +(A[k, i] * B[j, k]);
        R = relu(C + D);
    }""")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((70, 50)).astype(np.float32)
    b = rng.standard_normal((33, 70)).astype(np.float32)
    d = rng.standard_normal(33).astype(np.float32)
    (r,), scheds = run(fn, (a, b, d), cpu)
    np.testing.assert_allclose(r, np.maximum(a.T.astype(np.float64) @ b.T + d, 0), rtol=1e-4,
                               atol=1e-4)
    assert_tiled(scheds, 1)


def test_batched_matmul(cpu):
    fn = function("""function (A[B, M, K], X[B, K, N]) -> (C) {
        C[b, i, j : B, M, N] = +(A[b, i, k] * X[b, k, j]);
    }""")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 23, 41)).astype(np.float32)
    x = rng.standard_normal((5, 41, 37)).astype(np.float32)
    (c,), scheds = run(fn, (a, x), cpu)
    np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), x), rtol=1e-4, atol=1e-4)
    assert_tiled(scheds, 1)
    assert "batch 5" in scheds[0]


def test_batch_rows_with_a_strided_along_k(cpu):
    """Every output variable that A reads is a batch index (no M variable) and A is not
    contiguous along K, so it packs as panels: the view once indexed M's last variable and
    crashed (the phase-split input gradient of gingham.nn.winograd has this form)."""
    source = "function (A[K, R], B[R, K, N]) -> (C) { C[r, n : R, N] = +(A[k, r] * B[r, k, n]); }"
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 6)).astype(np.float32)
    b = rng.standard_normal((6, 40, 70)).astype(np.float32)
    (c,), scheds = run(function(source), (a, b), cpu)
    np.testing.assert_allclose(c, np.einsum("kr,rkn->rn", a.astype(np.float64), b),
                               rtol=1e-4, atol=1e-4)
    assert_tiled(scheds, 1)


def test_integer_falls_back(cpu):
    """Integer contractions keep the default schedule."""
    fn = function(MATMUL)
    a = np.arange(12 * 30, dtype=np.int32).reshape(12, 30) % 7
    b = np.arange(30 * 20, dtype=np.int32).reshape(30, 20) % 5
    (c,), scheds = run(fn, (a, b), cpu)
    np.testing.assert_array_equal(c, a @ b)
    assert not any(s.startswith("cpu-tiled") for s in scheds)


CONV = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {{
    O[n, y, x, co : N, {oh}, {ow}, CO] =
        +(I[n, {s}*y + ky - {p}, {s}*x + kx - {p}, ci] * F[ky, kx, ci, co]);
}}"""


def conv_fn(h, w, stride, pad, kh=3):
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kh) // stride + 1
    return function(CONV.format(oh=oh, ow=ow, s=stride, p=pad)), oh, ow


def torch_conv(x, w, stride, pad):
    tx = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    tw = torch.from_numpy(w.astype(np.float64)).permute(3, 2, 0, 1)
    return tx, tw, lambda a, b: F.conv2d(a, b, stride=stride, padding=pad)


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("shape", [(2, 9, 11, 5, 19), (3, 8, 8, 16, 32)])
def test_conv_forward_and_gradients(cpu, stride, shape):
    n, h, w, ci, co = shape
    fn, oh, ow = conv_fn(h, w, stride, pad=1)
    rng = np.random.default_rng(stride * 100 + h)
    x = rng.standard_normal((n, h, w, ci)).astype(np.float32)
    f = rng.standard_normal((3, 3, ci, co)).astype(np.float32)
    (o,), scheds = run(fn, (x, f), cpu)
    assert_tiled(scheds, 1)
    tx, tw, conv = torch_conv(x, f, stride, 1)
    tx.requires_grad_(True)
    tw.requires_grad_(True)
    ref = conv(tx, tw)
    np.testing.assert_allclose(o, ref.detach().permute(0, 2, 3, 1).numpy(), rtol=1e-4,
                               atol=1e-4)

    dy = rng.standard_normal(o.shape).astype(np.float32)
    gi, gf = fn.vjp((x, f), dy, device="cpu")
    ref.backward(torch.from_numpy(dy.astype(np.float64)).permute(0, 3, 1, 2))
    np.testing.assert_allclose(gi, tx.grad.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gf, tw.grad.permute(2, 3, 1, 0).numpy(), rtol=1e-4, atol=1e-3)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [dy]
    assert_tiled(schedules(grad.function.bind(*inputs), cpu), 2)


@pytest.mark.parametrize("ci, co", [(10, 64), (16, 128), (24, 40)])
def test_packing_forms(cpu, ci, co):
    """The weight gradient packs A (either operand: both are contiguous along M, not K) as
    register-block panels. With the views the cost model takes at 10 and 16 channels A is the
    input with M = (ky, kx, ci), in blocks that divide the runs of channels (one guard test
    and a plain copy each; blocks across two taps, tested element by element, are checked in
    test_weight_gradient_blocks_fit_channel_runs). The data gradient reads B, gathered along
    N, along K. Checked against PyTorch."""
    fn, oh, ow = conv_fn(8, 8, 1, pad=1)
    rng = np.random.default_rng(ci + co)
    x = rng.standard_normal((4, 8, 8, ci)).astype(np.float32)
    f = rng.standard_normal((3, 3, ci, co)).astype(np.float32)
    dy = rng.standard_normal((4, oh, ow, co)).astype(np.float32)
    gi, gf = fn.vjp((x, f), dy, device="cpu")
    tx, tw, conv = torch_conv(x, f, 1, 1)
    tx.requires_grad_(True)
    tw.requires_grad_(True)
    conv(tx, tw).backward(torch.from_numpy(dy.astype(np.float64)).permute(0, 3, 1, 2))
    np.testing.assert_allclose(gi, tx.grad.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gf, tw.grad.permute(2, 3, 1, 0).numpy(), rtol=1e-4, atol=1e-3)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [dy]
    scheds = [s for s in schedules(grad.function.bind(*inputs), cpu) if s.startswith("cpu-")]
    assert len(scheds) == 2, scheds
    assert any("A packed as panels" in s for s in scheds), scheds
    assert any("B read along K" in s for s in scheds), scheds


def test_split_k_weight_gradient(cpu):
    """A first layer's weight gradient (3 input channels: M 27 x N 16, K = every pixel) is
    one tile: the cost model splits K so that both threads work, and a second kernel adds the
    partial sums. Checked against PyTorch; other splits (the last slice short, more slices
    than K blocks) against that schedule's result by the measured search's check."""
    import dataclasses

    from gingham.compiler.fusion import plan
    from gingham.compiler.lower import LoweringContext
    from gingham.tune import search

    fn, oh, ow = conv_fn(32, 32, 1, pad=1)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 32, 32, 3)).astype(np.float32)
    f = rng.standard_normal((3, 3, 3, 16)).astype(np.float32)
    dy = rng.standard_normal((8, oh, ow, 16)).astype(np.float32)
    _, gf = fn.vjp((x, f), dy, device="cpu")
    tx, tw, conv = torch_conv(x, f, 1, 1)
    tw.requires_grad_(True)
    conv(tx, tw).backward(torch.from_numpy(dy.astype(np.float64)).permute(0, 3, 1, 2))
    np.testing.assert_allclose(gf, tw.grad.permute(2, 3, 1, 0).numpy(), rtol=1e-4, atol=1e-3)
    grad = fn._gradient(fn.bind(x, f))
    bound = grad.function.bind(*([[x, f][i] for i in grad.forward_inputs] + [dy]))
    scheds = schedules(bound, cpu)
    if cpu.info.compute_units > 1:  # 2 slices on 2 cores, 4 on 16
        slices = [int(n) for s in scheds for n in re.findall(r"split-K (\d+)", s)]
        assert slices and slices[0] > 1, scheds
        assert any(s.startswith(f"cpu split-K sum: {slices[0]} ") for s in scheds), scheds

    (wplan,) = [p for p in plan(bound).kernels if p.kind == "contraction"
                and p.contraction.out_shape == (3, 3, 3, 16)]
    family = search.family_of(wplan, LoweringContext(bound, {}), cpu.info)
    base = dataclasses.replace(family.default(), kc=256)  # K 8192: 32 blocks
    trial = search.Search(family, cpu, "wsplit", budget=60.0, progress=False)
    trial.chosen = [trial.default] + [dataclasses.replace(base, split=s) for s in (1, 3, 5, 40)]
    trial.build_first_round()
    trial.measure()
    trial.close()
    assert not trial.rejected, trial.rejected
    assert len(trial.measured) == 5
    assert any("split-K 3" in s for s in trial.schedules.values())


def test_data_gradient_is_narrowed(cpu):
    """The stride-1 data gradient reduces over the 3x3 taps, not over every output row."""
    fn, _, _ = conv_fn(16, 16, 1, 1)
    x = np.zeros((2, 16, 16, 8), np.float32)
    f = np.zeros((3, 3, 8, 8), np.float32)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [np.zeros((2, 16, 16, 8), np.float32)]
    scheds = schedules(grad.function.bind(*inputs), cpu)
    assert any(" x K 72," in s for s in scheds), scheds


def test_padding_guard_with_inf_elsewhere(cpu):
    """Valid taps only: an inf inside the image reaches only the cells that read it."""
    fn, _, _ = conv_fn(8, 8, 1, 1)
    x = np.ones((1, 8, 8, 4), np.float32)
    f = np.ones((3, 3, 4, 16), np.float32)
    (o,), scheds = run(fn, (x, f), cpu)
    assert_tiled(scheds)
    assert o[0, 0, 0, 0] == 16.0 and o[0, 3, 3, 0] == 36.0


# -- the roles of the output variables: M and N of several variables, either operand as B ---------

NCHW = """function (I[N, CI, H, W], F[CO, CI, KH, KW]) -> (O) {{
    O[n, co, y, x : N, CO, {oh}, {ow}] =
        +(I[n, ci, {s}*y + ky - {p}, {s}*x + kx - {p}] * F[co, ci, ky, kx]);
}}"""


def gemm_sizes(schedule: str) -> dict[str, int]:
    """{"M": .., "N": .., "K": .., "batch": ..} of a cpu-tiled schedule line."""
    head = schedule.split(", register")[0].removeprefix("cpu-tiled GEMM: ")
    words = head.split(" x ")
    sizes = dict(w.split(" ") for w in words)
    return {key: int(value) for key, value in sizes.items()}


@pytest.mark.parametrize("n, ci, h, co, stride", [(4, 16, 4, 32, 1), (3, 8, 9, 20, 2),
                                                  (2, 32, 2, 24, 1), (5, 6, 7, 10, 1)])
def test_nchw_conv_and_gradients(cpu, n, ci, h, co, stride):
    """NCHW convolutions at tiny spatial sizes: N and M are flattened over several variables
    (the weight gradient's N is (ci, kh, kw), not kw alone), checked against PyTorch."""
    oh = (h + 2 - 3) // stride + 1
    fn = function(NCHW.format(oh=oh, ow=oh, s=stride, p=1))
    rng = np.random.default_rng(n * 100 + h)
    x = rng.standard_normal((n, ci, h, h)).astype(np.float32)
    f = rng.standard_normal((co, ci, 3, 3)).astype(np.float32)
    (o,), scheds = run(fn, (x, f), cpu)
    assert_tiled(scheds, 1)
    tx = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    tw = torch.from_numpy(f.astype(np.float64)).requires_grad_(True)
    ref = F.conv2d(tx, tw, stride=stride, padding=1)
    np.testing.assert_allclose(o, ref.detach().numpy(), rtol=1e-4, atol=1e-4)

    dy = rng.standard_normal(o.shape).astype(np.float32)
    gi, gf = fn.vjp((x, f), dy, device="cpu")
    ref.backward(torch.from_numpy(dy.astype(np.float64)))
    np.testing.assert_allclose(gi, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gf, tw.grad.numpy(), rtol=1e-4, atol=1e-3)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [dy]
    grad_scheds = schedules(grad.function.bind(*inputs), cpu)
    assert_tiled(grad_scheds, 2)
    for s in scheds + grad_scheds:
        if s.startswith("cpu-tiled"):
            sizes = gemm_sizes(s)
            # Every output variable is in M or N: none is left as a batch of narrow
            # products (as N = kw, batch = (ci, kh) was).
            assert sizes.get("batch", 1) == 1, s


def test_weight_gradient_view():
    """The NCHW weight gradient D_F[o, i, kh, kw] = +(D_O[n, o, y, x] * I[n, i, y+kh-1, ...])
    is one GEMM M = o, N = (i, kh, kw), K = (n, y, x) with B = I (unit-stride along kw)."""
    from gingham.compiler import tiling_cpu
    from gingham.compiler.fusion import plan
    from gingham.tune.device_model import estimate

    fn = function(NCHW.format(oh=8, ow=8, s=1, p=1))
    x = np.zeros((32, 128, 8, 8), np.float32)
    f = np.zeros((256, 128, 3, 3), np.float32)
    grad = fn._gradient(fn.bind(x, f))
    inputs = [[x, f][i] for i in grad.forward_inputs] + [np.zeros((32, 256, 8, 8), np.float32)]
    contractions = [p.contraction for p in plan(grad.function.bind(*inputs)).kernels
                    if p.kind == "contraction"]
    (dw,) = [nc for nc in contractions if nc.out_shape == (256, 128, 3, 3)]
    model = estimate(devices.get_device("cpu").info, None)
    g = tiling_cpu.gemm_view(dw)
    assert g.b[0] == "I" and g.a[0] == "D_O"
    assert g.m_vars == ("o0",) and g.n_vars == ("o1", "o2", "o3") and not g.batch
    assert (g.dims.m, g.dims.n, g.dims.k, g.dims.batch) == (256, 1152, 2048, 1)
    # The cost model may take either operand as B: since B gathered along N is packed
    # reading along K, the two views measured alike (44 ms each on 2 Zen 3 cores).
    g = tiling_cpu.gemm_view(dw, model)
    if g.b[0] == "I":
        assert g.m_vars == ("o0",) and g.n_vars == ("o1", "o2", "o3") and not g.batch
        assert (g.dims.m, g.dims.n, g.dims.k, g.dims.batch) == (256, 1152, 2048, 1)
    else:
        assert g.b[0] == "D_O" and g.n_vars == ("o0",) and g.m_vars == ("o1", "o2", "o3")
        assert (g.dims.m, g.dims.n, g.dims.k, g.dims.batch) == (1152, 256, 2048, 1)


def test_attention_scores_store_rows_along_the_output():
    """``S[b, l, s] = +(Q[b, l, e] * K[b, s, e])``: both operands are unit-stride along the
    reduction, so the two views cost the same but for the stores. With B = Q, N would be l
    and the tile's rows would go out a cell at a time 256 floats apart; the cost model takes
    B = K, whose N (s) is the output's unit-stride axis."""
    from gingham.compiler import tiling_cpu
    from gingham.compiler.fusion import plan
    from gingham.tune.device_model import estimate

    fn = function("function (Q[B, L, E], K[B, S, E]) -> (O) "
                  "{ O[b, l, s : B, L, S] = +(Q[b, l, e] * K[b, s, e]); }")
    q = k = np.zeros((32, 256, 64), np.float32)
    (nc,) = [p.contraction for p in plan(fn.bind(q, k)).kernels if p.kind == "contraction"]
    g = tiling_cpu.gemm_view(nc, estimate(devices.get_device("cpu").info, None))
    assert g.b[0] == "K" and g.unit_stride_output in g.n_vars and not g.dims.c_scatter
    (other,) = [view for view in tiling_cpu.gemm_views(nc) if view.b[0] == "Q"]
    assert other.dims.c_scatter and other.n_vars == ("o1",)


def test_panels_a_page_apart(cpu):
    """Attention's dV[b, s, d] = +(P[b, l, s] * dO[b, l, d]): A (P) is read across K, so it
    packs as panels; on the 2-core EPYC they are 8 rows x 128 deep, 4 KiB each, which the
    packing fills panel by panel (``_Builder.panels_alias``; the depth and rows follow the
    machine's caches). The values must be the product's all the same."""
    fn = function("function (P[B, L, S], G[B, L, D]) -> (V) "
                  "{ V[b, s, d : B, S, D] = +(P[b, l, s] * G[b, l, d]); }")
    rng = np.random.default_rng(7)
    p = rng.standard_normal((2, 256, 256)).astype(np.float32)
    g = rng.standard_normal((2, 256, 64)).astype(np.float32)
    (v,), scheds = run(fn, (p, g), cpu)
    want = np.einsum("bls,bld->bsd", p.astype(np.float64), g)
    np.testing.assert_allclose(v, want, rtol=1e-4, atol=1e-3)
    assert_tiled(scheds, 1)
    assert "A packed as panels" in scheds[0], scheds


@pytest.mark.parametrize("q", [3, 16, 21])
def test_interleaved_multi_variable_m_and_n(cpu, q):
    """M = (a, c) and N = (b, p) interleaved in the output; B's N part is not one strided run
    (X's last axis is q + 2 wide), so panels cross runs of p; the epilogue reads c and p."""
    fn = function(f"""function (A[MA, K, MC], X[K, NB, {q + 2}], D[MC, {q}]) -> (R) {{
        C[a, b, c, p : MA, NB, MC, {q}] = +(A[a, k, c] * X[k, b, p + 1]);
        R = C * 2 + D;
    }}""")
    rng = np.random.default_rng(q)
    a = rng.standard_normal((5, 37, 7)).astype(np.float32)
    x = rng.standard_normal((37, 3, q + 2)).astype(np.float32)
    d = rng.standard_normal((7, q)).astype(np.float32)
    (r,), scheds = run(fn, (a, x, d), cpu)
    ref = np.einsum("akc,kbp->abcp", a.astype(np.float64), x[:, :, 1:q + 1]) * 2 + d
    np.testing.assert_allclose(r, ref, rtol=1e-4, atol=1e-4)
    assert_tiled(scheds, 1)
    sizes = gemm_sizes(scheds[0])
    assert {sizes["M"], sizes["N"]} == {35, 3 * q}, scheds


def test_batch_with_multi_variable_n_and_guards(cpu):
    """Batch b read by both operands; N = (p, q) with a padding guard on each (a 2-D
    'same' correlation per batch entry, over K = (channel, taps))."""
    fn = function("""function (A[NB, M, CH], X[NB, CH, P, Q]) -> (C) {
        C[b, i, p, q : NB, M, P, Q] = +(A[b, i, ch] * X[b, ch, p + 1, q - 1]);
    }""")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 20, 9)).astype(np.float32)
    x = rng.standard_normal((3, 9, 6, 19)).astype(np.float32)
    (c,), scheds = run(fn, (a, x), cpu)
    shifted = np.zeros_like(x, dtype=np.float64)
    shifted[:, :, :-1, 1:] = x[:, :, 1:, :-1]  # X[.., p + 1, q - 1], 0 outside
    np.testing.assert_allclose(c, np.einsum("bic,bcpq->bipq", a.astype(np.float64), shifted),
                               rtol=1e-4, atol=1e-4)
    assert_tiled(scheds, 1)
    assert "batch 3" in scheds[0]


def test_strided_b_along_n(cpu):
    """B gathered along N with a stride (the transposed operand) and an N of two variables
    whose B addresses are one strided run (linear)."""
    fn = function("""function (A[M, K], X[NP, NQ, K]) -> (C) {
        C[i, p, q : M, NP, NQ] = +(A[i, k] * X[p, q, k]);
    }""")
    rng = np.random.default_rng(12)
    a = rng.standard_normal((33, 40)).astype(np.float32)
    x = rng.standard_normal((5, 7, 40)).astype(np.float32)
    (c,), scheds = run(fn, (a, x), cpu)
    np.testing.assert_allclose(c, np.einsum("ik,pqk->ipq", a.astype(np.float64), x),
                               rtol=1e-4, atol=1e-4)
    assert_tiled(scheds, 1)


WEIGHT_GRADIENT = """function (I[N, H, W, CI], D[N, H, W, CO]) -> (F) {
    F[ky, kx, ci, co : 3, 3, CI, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * D[n, y, x, co]);
}"""


def test_weight_gradient_blocks_fit_channel_runs(cpu):
    """A panel-packed A copies a register block whole only inside one run of M's innermost
    variable (32 channels here); a block across two taps packs element by element, ~30x the
    cost. The cost model counts that (``cpu_straddling``) and takes a block that divides the
    run (on 2 Zen 4 cores the story net's weight gradient went from 14 x 32 blocks, 18.6 ms, to
    8 x 32, 10-12 ms). A straddling block, still legal, is checked against the default by the
    measured search; the default against PyTorch."""
    import re

    from gingham.compiler.fusion import plan
    from gingham.compiler.lower import LoweringContext
    from gingham.tune import search
    from gingham.tune.cost import cpu_straddling

    assert cpu_straddling(14, 32) == 6 / 16 and cpu_straddling(12, 32) == 2 / 8
    assert cpu_straddling(8, 32) == cpu_straddling(16, 32) == cpu_straddling(6, 0) == 0
    assert cpu_straddling(4, 1) == 1.0  # runs of one row: every block packs element by element
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 12, 12, 32)).astype(np.float32)
    dy = rng.standard_normal((8, 12, 12, 32)).astype(np.float32)
    fn = function(WEIGHT_GRADIENT)
    bound = fn.bind(x, dy)
    from gingham.runtime import executable

    exe = executable(bound, cpu)
    (got,) = exe(x, dy)
    expected = torch.nn.grad.conv2d_weight(
        torch.from_numpy(x).permute(0, 3, 1, 2).double(), (32, 32, 3, 3),
        torch.from_numpy(dy).permute(0, 3, 1, 2).double(), padding=1)
    np.testing.assert_allclose(got, expected.permute(2, 3, 1, 0).numpy(), rtol=1e-4, atol=1e-3)
    (sched,) = [launch.schedule for launch in exe.launches if launch.schedule.startswith("cpu-")]
    assert "A packed as panels" in sched, sched
    mr = int(re.search(r"register block (\d+)x", sched).group(1))
    assert 32 % mr == 0, sched

    (wplan,) = [p for p in plan(bound).kernels if p.kind == "contraction"]
    family = search.family_of(wplan, LoweringContext(bound, {}), cpu.info)
    assert_search_accepts(family, cpu, rows_of(family.default(), 14))


def rows_of(tiling, mr: int):
    """``tiling`` with register blocks of ``mr`` rows (its tile a multiple of them)."""
    import dataclasses

    return dataclasses.replace(tiling, mr=mr, mt=mr * max(1, tiling.mt // mr))


def assert_search_accepts(family, cpu, tiling) -> None:
    """The measured search builds ``tiling`` beside the family's default and finds the same
    result (its check against the default's output)."""
    from gingham.tune import search

    trial = search.Search(family, cpu, "trial", budget=60.0, progress=False)
    trial.chosen = [trial.default, tiling]
    trial.build_first_round()
    trial.measure()
    trial.close()
    assert not trial.rejected, trial.rejected
    assert any(f"register block {tiling.mr}x" in s for s in trial.schedules.values()), \
        trial.schedules


def test_ragged_tiles_keep_threads_even():
    """Tiles of unequal size keep the thread with the big one busy longest: 576 rows on two
    threads in tiles of 384 and 192 take the time of 384, in tiles of 288 the time of 288."""
    import dataclasses

    from gingham.compiler.tiling_cpu import CpuTiling
    from gingham.tune import device_model as dm
    from gingham.tune.cost import CpuDims, cpu_time

    model = dataclasses.replace(dm.estimate(devices.get_device("cpu").info, None), workers=2)
    dims = CpuDims(576, 64, 40000, 2500, 1, a_run=64)
    even, ragged = CpuTiling(8, 32, 192, 288, 64, 16), CpuTiling(8, 32, 192, 384, 64, 16)
    assert cpu_time(even, dims, model) < cpu_time(ragged, dims, model)


def test_panel_runs_copy_as_vectors_from_any_element(cpu):
    """In OpenCL a register block copied whole into A's panels is a few vectors that may start
    at any element (``vload8`` + ``vload4`` + ``vload2`` for 14 rows; runs of 28 channels put
    every other block's start off an 8-float boundary). The weight gradient with 14-row
    blocks against PyTorch on every CPU-schedule device, and its OpenCL source."""

    from gingham.codegen.c_family import DIALECTS
    from gingham.compiler.dedupe import unit_of
    from gingham.compiler.fusion import plan
    from gingham.compiler.lower import LoweringContext
    from gingham.compiler.tiling_cpu import tiled_contraction_cpu
    from gingham.runtime import executable
    from gingham.tune import search

    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 9, 9, 28)).astype(np.float32)
    dy = rng.standard_normal((4, 9, 9, 20)).astype(np.float32)
    bound = function(WEIGHT_GRADIENT).bind(x, dy)
    (wplan,) = [p for p in plan(bound).kernels if p.kind == "contraction"]
    ctx = LoweringContext(bound, {})
    family = search.family_of(wplan, ctx, cpu.info)
    tiling = rows_of(family.default(), 14)
    kernels = tiled_contraction_cpu(wplan, LoweringContext(bound, {}), "k0", cpu.info, tiling)
    assert kernels is not None and "A packed as panels" in kernels[0].schedule, kernels
    if cpu.info.dialect == "opencl":
        source = unit_of(kernels[0], DIALECTS["opencl"])[0].source
        assert all(f"vload{w}(0, " in source for w in (8, 4, 2)), source

    assert_search_accepts(family, cpu, tiling)
    (got,) = executable(bound, cpu)(x, dy)
    expected = torch.nn.grad.conv2d_weight(
        torch.from_numpy(x).permute(0, 3, 1, 2).double(), (20, 28, 3, 3),
        torch.from_numpy(dy).permute(0, 3, 1, 2).double(), padding=1)
    np.testing.assert_allclose(got, expected.permute(2, 3, 1, 0).numpy(), rtol=1e-4, atol=1e-3)
