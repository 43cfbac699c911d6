"""bfloat16 sums of products on a CPU's AMX tiles (``CpuTiling.engine`` "amx",
gingham.compiler.tiling_cpu): results against NumPy / PyTorch in float64 on the ``cpu`` device
of a CPU that has them (Sapphire Rapids and later), and the rules that choose them. Where the
CPU has no AMX the numerical tests skip; the float32 FMA path they fall back to is
test_tiling_cpu.py's."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gingham.tile.function import function

devices = pytest.importorskip("gingham.devices")

BF16 = ml_dtypes.bfloat16
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
CONV = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {{
    O[n, y, x, co : N, {oh}, {ow}, CO] =
        +(I[n, {s}*y + ky - 1, {s}*x + kx - 1, ci] * F[ky, kx, ci, co]);
}}"""


@pytest.fixture(scope="module")
def cpu():
    try:
        device = devices.get_device("cpu")
    except Exception as exc:  # no C compiler with OpenMP
        pytest.skip(f"no cpu device: {exc}")
    if "amx-bf16" not in device.info.features:
        pytest.skip(f"{device.info.name}: no AMX tiles with bfloat16 usable here")
    return device


@pytest.fixture(autouse=True)
def tile_thin_products(monkeypatch):
    """Small products are left to the loop nest otherwise (tiling_cpu.thin_product)."""
    from gingham.compiler import tiling_cpu

    monkeypatch.setattr(tiling_cpu, "THIN_SIDE", 0)


def run(fn, arrays, cpu):
    from gingham.runtime import executable

    bound = fn.bind(*arrays)
    outs = executable(bound, cpu)(*arrays)
    return outs, [launch.schedule for launch in executable(bound, cpu).launches]


def bf16(rng, shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(BF16)


def assert_close_bf16(result, reference, k: int):
    """``result`` (bfloat16) against the float64 ``reference`` of the same bfloat16 inputs:
    the rounding of the output (half a bfloat16 step, 2^-9 relative) plus float32 sums."""
    got = np.asarray(result).astype(np.float64)
    scale = np.abs(reference).max()
    np.testing.assert_allclose(got, reference, rtol=2 ** -8, atol=1e-5 * np.sqrt(k) * scale)


@pytest.fixture
def tiles_always(monkeypatch):
    """The cost model's best AMX tiling for every product, even where it ranks the FMAs
    first (a product of a few rows, or on 16 cores one cut finer on the FMAs)."""
    from gingham.compiler import tiling_cpu
    from gingham.tune.device_model import model_for_info
    from gingham.tune.space import rank_cpu

    def best_on_tiles(info, dims):
        return next(t for _, t in rank_cpu(dims, model_for_info(info)) if t.engine == "amx")

    monkeypatch.setattr(tiling_cpu, "choose_tiling", best_on_tiles)
    monkeypatch.setenv("GINGHAM_PROGRAM_CACHE", "0")  # lowered here, not loaded


@pytest.mark.parametrize("m, k, n", [(33, 31, 65), (100, 45, 70), (64, 1000, 48),
                                     (300, 513, 130), (7, 50, 40)])
def test_matmul_on_tiles(cpu, tiles_always, m, k, n):
    """Ragged M, N and K (K below a tile's 32, odd, past one K block): the packed tails are
    zeros, the edges' cells never stored."""
    rng = np.random.default_rng(m + k + n)
    a, b = bf16(rng, (m, k)), bf16(rng, (k, n))
    (c,), scheds = run(function(MATMUL), (a, b), cpu)
    assert any("AMX tiles 32x32" in s for s in scheds), scheds
    assert c.dtype == BF16
    assert_close_bf16(c, a.astype(np.float64) @ b.astype(np.float64), k)


def force_tiling(monkeypatch, cpu, **tiling):
    """The AMX tiling ``tiling`` for every product, whatever the cost model would pick; the
    program lowered here, not loaded."""
    from gingham.compiler import tiling_cpu

    chosen = tiling_cpu.CpuTiling(32, 32, simd=max(4, cpu.info.simd_width), engine="amx",
                                  **tiling)
    monkeypatch.setattr(tiling_cpu, "choose_tiling", lambda info, dims: chosen)
    monkeypatch.setenv("GINGHAM_PROGRAM_CACHE", "0")
    return chosen


@pytest.mark.parametrize("tiling", [dict(kc=32, mt=32, nt=32), dict(kc=64, mt=64, nt=96),
                                    dict(kc=96, mt=128, nt=32, split=3)])
def test_every_block_shape(cpu, monkeypatch, tiling):
    """Tilings the cost model may not pick: one tile row of K per block, tiles of several
    register blocks, split-K (partial sums added by a second kernel)."""
    chosen = force_tiling(monkeypatch, cpu, **tiling)
    rng = np.random.default_rng(1)
    m = 150 + tiling["kc"]  # a program of its own for each tiling
    a, b = bf16(rng, (m, 400)), bf16(rng, (400, 90))
    (c,), scheds = run(function(MATMUL), (a, b), cpu)
    assert any(chosen.describe() in s for s in scheds), scheds
    assert_close_bf16(c, a.astype(np.float64) @ b.astype(np.float64), 400)


def conv_and_gradients(cpu, stride: int, n: int, h: int, w: int, ci: int, co: int
                       ) -> list[str]:
    """A convolution (padding guards packed as zeros) and both its gradients on ``cpu``
    against PyTorch in float64; the schedules of the gradients' kernels."""
    oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
    fn = function(CONV.format(oh=oh, ow=ow, s=stride))
    rng = np.random.default_rng(stride + ci)
    x, f = bf16(rng, (n, h, w, ci)), bf16(rng, (3, 3, ci, co))
    (o,), scheds = run(fn, (x, f), cpu)
    assert any("AMX tiles" in s for s in scheds), scheds
    tx = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2).requires_grad_(True)
    tw = torch.from_numpy(f.astype(np.float64)).permute(3, 2, 0, 1).requires_grad_(True)
    ref = F.conv2d(tx, tw, stride=stride, padding=1)
    assert_close_bf16(o, ref.detach().permute(0, 2, 3, 1).numpy(), 9 * ci)

    dy = bf16(rng, o.shape)
    gi, gf = fn.vjp((x, f), dy, device="cpu")
    ref.backward(torch.from_numpy(dy.astype(np.float64)).permute(0, 3, 1, 2))
    assert_close_bf16(gi, tx.grad.permute(0, 2, 3, 1).numpy(), 9 * co)
    assert_close_bf16(gf, tw.grad.permute(2, 3, 1, 0).numpy(), n * oh * ow)
    grad = fn._gradient(fn.bind(x, f))
    bound = grad.function.bind(*([[x, f][i] for i in grad.forward_inputs] + [dy]))
    from gingham.runtime import executable

    return [launch.schedule for launch in executable(bound, cpu).launches
            if launch.schedule.startswith("cpu-tiled")]


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_and_both_gradients_on_tiles(cpu, stride):
    """At 64 channels the cost model puts all three products on the tiles: the weight
    gradient, whose operands run along M and N, with A turned from panels into rows."""
    tiled = conv_and_gradients(cpu, stride, 2, 16, 12, 64, 64)
    assert len(tiled) == 2 and all("AMX tiles" in s for s in tiled), tiled
    assert any("panels turned into rows" in s for s in tiled), tiled


@pytest.mark.parametrize("stride, tiling", [(1, dict(kc=32, mt=32, nt=32)),
                                            (2, dict(kc=64, mt=96, nt=64)),
                                            (1, dict(kc=96, mt=64, nt=32, split=3))])
def test_weight_gradient_every_block_shape(cpu, monkeypatch, stride, tiling):
    """The weight gradient's A turned into rows under tilings the cost model would not pick
    here: 24 channels (panels of 32 rows straddle the runs of channels, so they pack
    element by element), ragged M and K, one or several register blocks a tile, split-K."""
    force_tiling(monkeypatch, cpu, **tiling)
    tiled = conv_and_gradients(cpu, stride, 3, 10, 9, 24, 40)
    assert any("panels turned into rows" in s for s in tiled), tiled


@pytest.mark.parametrize("ci, co", [(48, 40), (3, 64)])
def test_filter_contiguous_along_k_on_tiles(cpu, ci, co):
    """A filter stored [co][ky][kx][ci], as gingham.nn keeps it: B runs along K, so it is
    packed column by column and turned into the tiles' pairs. 48 channels: depth pairs
    that straddle two filter taps; 40 outputs: a ragged panel; 3 channels: a first layer."""
    fn = function("""function (I[N, H, W, CI], F[CO, KH, KW, CI]) -> (O) {
        O[n, y, x, co : N, H, W, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * F[co, ky, kx, ci]);
    }""")
    rng = np.random.default_rng(ci)
    x, f = bf16(rng, (2, 12, 11, ci)), bf16(rng, (co, 3, 3, ci))
    (o,), scheds = run(fn, (x, f), cpu)
    assert any("turned into pairs" in s for s in scheds), scheds
    ref = F.conv2d(torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2),
                   torch.from_numpy(f.astype(np.float64)).permute(0, 3, 1, 2), padding=1)
    assert_close_bf16(o, ref.permute(0, 2, 3, 1).numpy(), 9 * ci)


@pytest.fixture
def packed_once(monkeypatch):
    """Operands packed once, by kernels of their own before the product, wherever two tiles
    read each packed block (the schedule's own rule asks for more readers)."""
    from gingham.compiler import tiling_cpu

    monkeypatch.setattr(tiling_cpu, "PACKED_ONCE_MIN_READERS", 2)
    monkeypatch.setenv("GINGHAM_PROGRAM_CACHE", "0")  # lowered here, not loaded


@pytest.mark.parametrize("tiling", [dict(kc=32, mt=32, nt=32), dict(kc=64, mt=64, nt=96),
                                    dict(kc=96, mt=64, nt=32, split=3)])
def test_operands_packed_once(cpu, monkeypatch, packed_once, tiling):
    """A and B packed by two kernels before the product, whose tiles read the packed blocks
    in place: ragged M, N and K (the packed tails zeros), several register blocks a tile,
    split-K (the packed blocks of each slice's K blocks)."""
    chosen = force_tiling(monkeypatch, cpu, **tiling)
    rng = np.random.default_rng(2)
    m, k, n = 151 + tiling["kc"], 401, 130  # a program of its own for each tiling
    a, b = bf16(rng, (m, k)), bf16(rng, (k, n))
    (c,), scheds = run(function(MATMUL), (a, b), cpu)
    packers = [s for s in scheds if s.startswith("cpu packing for AMX")]
    assert len(packers) == 2 and any("A packed as rows" in s for s in packers), scheds
    assert any(chosen.describe() in s and "A and B packed once" in s for s in scheds), scheds
    assert_close_bf16(c, a.astype(np.float64) @ b.astype(np.float64), k)


def test_batched_operands_packed_once(cpu, monkeypatch, packed_once):
    """A batch of products: each batch's blocks packed apart, each tile reading its own."""
    force_tiling(monkeypatch, cpu, kc=64, mt=32, nt=32)
    rng = np.random.default_rng(3)
    a, b = bf16(rng, (3, 70, 90)), bf16(rng, (3, 90, 100))
    fn = function("""function (A[G, M, K], B[G, K, N]) -> (C) {
        C[g, i, j : G, M, N] = +(A[g, i, k] * B[g, k, j]);
    }""")
    (c,), scheds = run(fn, (a, b), cpu)
    assert any("A and B packed once" in s and "batch 3" in s for s in scheds), scheds
    assert_close_bf16(c, np.matmul(a.astype(np.float64), b.astype(np.float64)), 90)


def test_convolution_operands_packed_once(cpu, monkeypatch, packed_once):
    """A convolution and both its gradients with their operands packed once: A through the
    padding guards, the weight gradient's A as panels turned into rows, B's pairs."""
    force_tiling(monkeypatch, cpu, kc=64, mt=32, nt=32)
    tiled = conv_and_gradients(cpu, 1, 3, 10, 9, 24, 40)
    assert all("packed once" in s for s in tiled), tiled
    assert any("panels turned into rows" in s for s in tiled), tiled


def test_filter_along_k_packed_once(cpu, monkeypatch, packed_once):
    """B read along K (a filter stored [co][ky][kx][ci]) packed once, column by column."""
    force_tiling(monkeypatch, cpu, kc=64, mt=32, nt=32)
    fn = function("""function (I[N, H, W, CI], F[CO, KH, KW, CI]) -> (O) {
        O[n, y, x, co : N, H, W, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * F[co, ky, kx, ci]);
    }""")
    rng = np.random.default_rng(5)
    x, f = bf16(rng, (2, 12, 11, 48)), bf16(rng, (40, 3, 3, 48))
    (o,), scheds = run(fn, (x, f), cpu)
    assert any("B packed as pairs read along K" in s for s in scheds), scheds
    ref = F.conv2d(torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2),
                   torch.from_numpy(f.astype(np.float64)).permute(0, 3, 1, 2), padding=1)
    assert_close_bf16(o, ref.permute(0, 2, 3, 1).numpy(), 9 * 48)


def test_packed_once_only_for_enough_readers(cpu, monkeypatch):
    """By the schedule's own rule an operand is packed once where at least
    ``PACKED_ONCE_MIN_READERS`` tiles read each block: here A's blocks by 7 tiles of N, B's
    by 2 of M, so only A."""
    from gingham.compiler import tiling_cpu

    force_tiling(monkeypatch, cpu, kc=64, mt=32, nt=32)
    assert tiling_cpu.PACKED_ONCE_MIN_READERS > 2
    rng = np.random.default_rng(6)
    a, b = bf16(rng, (64, 96)), bf16(rng, (96, 200))
    (c,), scheds = run(function(MATMUL), (a, b), cpu)
    assert any(s.endswith(", A packed once before the tiles") for s in scheds), scheds
    assert_close_bf16(c, a.astype(np.float64) @ b.astype(np.float64), 96)


def test_inf_and_nan_reach_their_cells_only(cpu):
    """An inf in A makes its row inf (or NaN where a product meets a zero of B... here none);
    a NaN in B its column NaN; the padded rows, columns and depths around them are zeros that
    no stored cell reads."""
    a = np.ones((40, 37), BF16)
    b = np.ones((37, 50), BF16)
    a[3, 36] = np.inf
    b[0, 49] = np.nan
    (c,), _ = run(function(MATMUL), (a, b), cpu)
    c = c.astype(np.float64)
    assert np.isinf(c[3, :49]).all() and np.isnan(c[:, 49]).all()
    rest = np.delete(np.delete(c, 3, axis=0), 49, axis=1)
    assert (rest == 37).all()


def test_amx_off_runs_on_the_fmas(cpu, monkeypatch):
    """``GINGHAM_AMX=0`` keeps bfloat16 products on the float32 FMAs, with the same result up
    to the order of the sums."""
    rng = np.random.default_rng(7)
    a, b = bf16(rng, (96, 200)), bf16(rng, (200, 64))
    (on,), _ = run(function(MATMUL), (a, b), cpu)
    monkeypatch.setenv("GINGHAM_AMX", "0")
    (off,), scheds = run(function(MATMUL), (a, b), cpu)
    assert not any("AMX" in s for s in scheds), scheds
    assert any("register block" in s for s in scheds), scheds
    assert_close_bf16(on, off.astype(np.float64), 200)


# -- the rules, on any CPU -------------------------------------------------------------------------

def test_amx_needs_the_flags_the_compiler_and_the_grant(monkeypatch):
    from gingham.devices import cpu as cpu_device

    monkeypatch.setattr(cpu_device, "_granted_amx", lambda: True)
    flags = "avx512f amx_tile amx_bf16"
    assert cpu_device.host_features(flags, lambda: True) == ("amx-bf16",)
    assert cpu_device.host_features(flags, lambda: False) == ()
    assert cpu_device.host_features("avx512f amx_tile", lambda: True) == ()
    monkeypatch.setattr(cpu_device, "_granted_amx", lambda: False)
    assert cpu_device.host_features(flags, lambda: True) == ()


def test_amx_tilings_only_where_the_product_may_use_them():
    """The search space holds AMX tilings for a product marked ``amx`` (and the cost model
    ranks one first there), none otherwise; an AMX tiling is illegal for an unmarked one (a
    tuning-database entry from another machine)."""
    from gingham.compiler.tiling_cpu import CpuTiling
    from gingham.tune.cost import CpuDims
    from gingham.tune.device_model import estimate
    from gingham.tune.space import cpu_legal, cpu_space, rank_cpu

    model = estimate(_a_cpu_info())
    plain = CpuDims(1024, 1024, 1024, 1024, 1)
    marked = dataclasses.replace(plain, amx=True)
    assert not any(t.engine == "amx" for t in cpu_space(plain, model))
    amx = [t for t in cpu_space(marked, model) if t.engine == "amx"]
    assert amx and all(t.mr == t.nr == 32 and t.kc % 32 == 0 for t in amx)
    assert rank_cpu(marked, model)[0][1].engine == "amx"
    assert not cpu_legal(CpuTiling(32, 32, 256, 128, 128, 16, engine="amx"), plain)
    assert not cpu_legal(CpuTiling(16, 32, 256, 128, 128, 16, engine="amx"), marked)
    # A weight gradient's A (packed along M, a_run) needs a second buffer of A on the stack.
    big = CpuTiling(32, 32, 512, 256, 256, 16, engine="amx")
    assert cpu_legal(big, marked)
    assert not cpu_legal(big, dataclasses.replace(marked, a_run=64))
    assert rank_cpu(dataclasses.replace(marked, a_run=64), model)[0][1].engine == "amx"
    # M cut evenly over the threads: 576 rows on 2 threads, tiles of 288 (not 384 + 192)
    wgrad = CpuDims(576, 128, 1 << 19, 32, 1, a_run=64, amx=True)
    even = -(-(-(-576 // model.workers)) // 32) * 32
    assert any(t.mt == even for t in cpu_space(wgrad, model) if t.engine == "amx")


def _a_cpu_info():
    from gingham.devices.base import DeviceInfo

    return DeviceInfo(id="cpu", name="a Sapphire Rapids", vendor="Intel", kind="cpu",
                      dialect="c", compute_units=2, global_memory_bytes=1 << 34,
                      local_memory_bytes=0, max_work_group_size=1, simd_width=16,
                      cache_line_bytes=64, l1_bytes=48 << 10, l2_bytes=2 << 20,
                      l3_bytes=100 << 20, driver_version="", compiler_version="",
                      features=("amx-bf16",))
