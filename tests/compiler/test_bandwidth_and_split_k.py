"""The bandwidth-bound schedules (elementwise and special kernels several cells per work-item,
16-byte vectors, hoisted scalar loads) and split-K for the GPU tiled schedule.

References are NumPy in float64. Sizes are odd on purpose (scalar tails after the last whole
vector). As in test_tiling_gpu, PoCL is described as a GPU so that it gets the GPU schedules;
every test asserts the schedule it means to test, so that a silent fallback cannot pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gingham import tile
from gingham.compiler import lower, tiling_gpu
from gingham.devices import get_device, list_devices
from gingham.runtime import executable
from gingham.tile import dtypes as dt

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]


@pytest.fixture(params=COMPILED)
def compiled(request, monkeypatch):
    device = get_device(request.param)
    if device.info.dialect != "c" and device.info.kind != "gpu":
        monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu"))
    return device




def _run(source: str, arrays, device):
    exe = executable(tile.function(source).bind(*arrays), device)
    return exe(*arrays), [launch.schedule for launch in exe.launches], exe


# -- elementwise and special kernels ------------------------------------------------------------

CHAIN = "function (X, A, B, C) -> (O) { O = relu(X * A + B) * C; }"


@pytest.mark.parametrize("count", [8, 9, 10, 11, 1000, 4099, 65537])
def test_chain_of_scalars_every_size(compiled, count):
    rng = np.random.default_rng(count)
    x = rng.standard_normal(count).astype(np.float32)
    a, b, c = (np.array(v, np.float32) for v in (1.5, -0.25, 2.0))
    (o,), schedules, _ = _run(CHAIN, (x, a, b, c), compiled)
    assert len(schedules) == 1
    if compiled.info.dialect == "c":
        assert "omp simd" in schedules[0] and "hoisted scalars: A, B, C" in schedules[0]
    else:
        assert "4 per work-item" in schedules[0], schedules
        assert "vector loads/stores: O, X" in schedules[0]
        assert "hoisted scalars: A, B, C" in schedules[0]
    expected = np.maximum(x.astype(np.float64) * 1.5 - 0.25, 0) * 2.0
    np.testing.assert_allclose(o, expected, rtol=1e-6, atol=1e-6)


def test_broadcasting_and_several_outputs(compiled):
    """Operands of other shapes (a row, a column, a one-element matrix) broadcast per cell;
    two outputs, one of them read again by the chain; a float64 operand and an int32 output."""
    source = """
    function (X[N, C], Y[N, C], Row[C], Col[N, 1], S[1, 1], D[N, C]) -> (P, Q, R) {
        P = X * Row + Col;
        Q = P * S - Y + D;
        R = as_int(Q, 32);
    }
    """
    rng = np.random.default_rng(7)
    n, c = 37, 13
    x, y = (rng.standard_normal((n, c)).astype(np.float32) for _ in range(2))
    row = rng.standard_normal(c).astype(np.float32)
    col = rng.standard_normal((n, 1)).astype(np.float32)
    s = np.array([[3.0]], np.float32)
    d = rng.standard_normal((n, c)) * 10
    (p, q, r), schedules, _ = _run(source, (x, y, row, col, s, d), compiled)
    assert len(schedules) == 1
    if compiled.info.dialect != "c":
        assert "4 per work-item" in schedules[0], schedules
    p_ref = x.astype(np.float64) * row + col
    q_ref = p_ref.astype(np.float32).astype(np.float64) * 3.0 - y + d
    np.testing.assert_allclose(p, p_ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(q, q_ref, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(r, np.trunc(q).astype(np.int32))


HALF = {"bfloat16": dt.bfloat16, "float16": np.dtype(np.float16)}


@pytest.mark.parametrize("half", HALF)
def test_half_tensors_move_as_vectors_bool_per_cell(compiled, half):
    """Half-type tensors move as vectors of their bits (a NaN, infinities and ties included);
    a bool output per cell. Exact: float32 arithmetic rounded once, as NumPy rounds it."""
    dtype = HALF[half]
    source = "function (X[N], Y[N]) -> (O, M) { O = X + Y; M = X > Y; }"
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(103) * 100).astype(dtype)
    y = rng.standard_normal(103).astype(dtype)
    x[:4] = (np.inf, -np.inf, np.nan, 1.0)
    y[3] = 2.0 ** -8  # 1 + 2^-8: a tie in bfloat16, exact in float16
    (o, m), schedules, _ = _run(source, (x, y), compiled)
    if compiled.info.dialect != "c":
        assert "vector loads/stores: O, X, Y" in schedules[0], schedules
    expected = (x.astype(np.float32) + y.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(o.astype(np.float32), expected.astype(np.float32))
    np.testing.assert_array_equal(m, x.astype(np.float32) > y.astype(np.float32))


@pytest.mark.parametrize("half", HALF)
def test_half_operands_read_in_one_arm_of_a_select(compiled, half):
    """A ReLU gradient and a cast read only where a condition holds: ``X > 0 ? D : 0`` with
    D a half tensor, and a float32 tensor rounded to the half type in the other arm. The
    lanes of D are widened before the select (the schedule's kernel must still give NumPy's
    values bit for bit, NaN and signed zeros included)."""
    dtype = HALF[half]
    cast = "as_float(F, 16)" if half == "float16" else "as_bfloat(F, 16)"
    source = f"function (X[N], D[N], F[N]) -> (G) {{ G = X > 0 ? D : {cast} * 2; }}"
    rng = np.random.default_rng(13)
    x = rng.standard_normal(101).astype(dtype)
    d = (rng.standard_normal(101) * 10).astype(dtype)
    f = rng.standard_normal(101).astype(np.float32)
    x[:3], d[:3], f[:3] = (1.0, 1.0, -1.0), (np.nan, -0.0, 1.0), (1.0, 1.0, -0.0)
    (g,), schedules, _ = _run(source, (x, d, f), compiled)
    if compiled.info.dialect != "c":
        assert "vector loads/stores: D, F, G, X" in schedules[0], schedules
    x32, d32 = x.astype(np.float32), d.astype(np.float32)
    expected = np.where(x32 > 0, d32, f.astype(dtype).astype(np.float32) * 2).astype(dtype)
    np.testing.assert_array_equal(g.astype(np.float32), expected.astype(np.float32))
    np.testing.assert_array_equal(np.signbit(g.astype(np.float32)),
                                  np.signbit(expected.astype(np.float32)))


@pytest.mark.parametrize("channels, vectorised", [(12, True), (6, False)])
def test_channels_last_per_channel_operands_as_vectors(compiled, channels, vectorised):
    """A channels-last batch norm's apply: bfloat16 X[N, H, W, C] with float32 per-channel
    operands. With C a multiple of 4 a work-item's cells are 4 neighbouring channels, so each
    per-channel operand is one vector; with C = 6 they are read per cell. A [N, 1, 1, 1]
    operand (broadcast along the channels) and a [1, H, 1, C] one are read per cell / as a
    vector. Odd N * H * W * C leaves a scalar tail."""
    source = """
    function (X[N, H, W, C], Mean[C], Scale[C], Bias[C], Gate[N, 1, 1, 1], Pos[1, H, 1, C])
        -> (O) {
        O = as_bfloat(relu((X - Mean) * Scale + Bias) * Gate + Pos, 16);
    }"""
    rng = np.random.default_rng(channels)
    n, h, w = 3, 5, 7
    x = rng.standard_normal((n, h, w, channels)).astype(dt.bfloat16)
    mean, scale, bias = (rng.standard_normal(channels).astype(np.float32) for _ in range(3))
    gate = rng.standard_normal((n, 1, 1, 1)).astype(np.float32)
    pos = rng.standard_normal((1, h, 1, channels)).astype(np.float32)
    (o,), schedules, _ = _run(source, (x, mean, scale, bias, gate, pos), compiled)
    if compiled.info.dialect != "c":
        listed = schedules[0].split("vector loads/stores: ")[1].split(";")[0].split(", ")
        rows = {"Bias", "Mean", "Pos", "Scale"}
        assert rows <= set(listed) if vectorised else not rows & set(listed), schedules
        assert "Gate" not in listed and {"O", "X"} <= set(listed), schedules
    x32 = x.astype(np.float64)
    expected = np.maximum((x32 - mean) * scale + bias, 0) * gate + pos
    np.testing.assert_allclose(o.astype(np.float64), expected, rtol=2.0 ** -7, atol=1e-5)


def test_special_kernels_several_cells_per_work_item(gpu):
    source = """
    function (Tbl[V, E], Ids[B]) -> (G, J) {
        G = gather(Tbl, Ids);
        J = index(G, 1);
    }
    """
    rng = np.random.default_rng(9)
    table = rng.standard_normal((11, 7)).astype(np.float32)
    ids = rng.integers(-1, 12, size=5).astype(np.int32)
    (g, j), schedules, _ = _run(source, (table, ids), gpu)
    assert any(s.startswith("gather over 35 cells, 4 per work-item") for s in schedules), schedules
    assert any(s.startswith("index over 35 cells, 4 per work-item") for s in schedules), schedules
    valid = (ids >= 0) & (ids < 11)
    expected = np.where(valid[:, None], table[np.clip(ids, 0, 10)], 0)
    np.testing.assert_array_equal(g, expected)
    np.testing.assert_array_equal(j, np.broadcast_to(np.arange(7, dtype=np.int32), (5, 7)))


@pytest.mark.parametrize("dialect", ["opencl", "cuda"])
def test_vector_access_renders_as_16_byte_loads(dialect):
    from gingham.codegen.c_family import DIALECTS, render
    from gingham.compiler.fusion import plan

    bound = tile.function(CHAIN).bind(np.zeros(4096, np.float32), *(np.float32(1),) * 3)

    kernel_plan = plan(bound)
    ctx = lower.LoweringContext(bound, kernel_plan.aliases)
    kernel = lower.lower_streaming(kernel_plan.kernels[0], ctx, "k0_O", dialect)
    source = render(kernel, DIALECTS[dialect])
    qualifier = "__global " if dialect == "opencl" else ""
    assert f"(({qualifier}const float4*)(&X[" in source, source
    assert f"(({qualifier}float4*)(&O[" in source, source
    assert "float s_A = A[0];" in source


# -- split-K ----------------------------------------------------------------------------------

MATMUL = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""


def _force_split(monkeypatch, split: int, config=tiling_gpu.TileConfig(16, 16, 8, 2, 2)):
    forced = dataclasses.replace(config, split=split)
    monkeypatch.setattr(tiling_gpu, "choose_config", lambda view, info, itemsize=4: forced)
    # Lowered by the patched compiler, not loaded from the program cache (see conftest.py).
    monkeypatch.setenv("GINGHAM_PROGRAM_CACHE", "0")


@pytest.mark.parametrize("m, k, n, split", [
    (20, 300, 9, 3), (16, 128, 16, 2), (5, 1000, 33, 7), (40, 64, 40, 100),
])
def test_split_k_matmul(gpu, monkeypatch, m, k, n, split):
    _force_split(monkeypatch, split)
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (c,), schedules, exe = _run(MATMUL, (a, b), gpu)
    k_tiles = -(-k // 8)
    expected_split = -(-k_tiles // -(-k_tiles // min(split, k_tiles)))
    assert len(schedules) == 2, schedules
    assert f"split-K {expected_split}" in schedules[0], schedules
    assert schedules[1].startswith("gpu tiled contraction, split-K sum"), schedules
    assert exe.launches[0].args[-1] == exe.launches[1].args[0] == "k0_C_partials"
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_split_k_conv_filter_gradient_with_epilogue(gpu, monkeypatch):
    """The CIFAR layer's filter gradient, small: padding guards on one operand, a fused
    epilogue and a second output of the same kernel, all after the partial sums."""
    _force_split(monkeypatch, 5, tiling_gpu.TileConfig(32, 32, 8, 4, 4))
    source = """
    function (I[N, H, W, CI], D_O[N, H, W, CO], S[CO]) -> (D_F, E) {
        D_F[ky, kx, ci, co : 3, 3, CI, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * D_O[n, y, x, co]);
        E = D_F * S + 1.0;
    }
    """
    rng = np.random.default_rng(11)
    i = rng.standard_normal((2, 9, 9, 6)).astype(np.float32)
    d_o = rng.standard_normal((2, 9, 9, 10)).astype(np.float32)
    s = rng.standard_normal(10).astype(np.float32)
    (d_f, e), schedules, _ = _run(source, (i, d_o, s), gpu)
    assert "split-K 5" in schedules[0] and "2 guards" in schedules[0], schedules
    padded = np.pad(i.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    expected = np.zeros((3, 3, 6, 10))
    for ky in range(3):
        for kx in range(3):
            window = padded[:, ky:ky + 9, kx:kx + 9, :]
            expected[ky, kx] = np.einsum("nyxc,nyxo->co", window, d_o)
    np.testing.assert_allclose(d_f, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(e, d_f.astype(np.float64) * s + 1.0, rtol=1e-5, atol=1e-5)


def test_split_k_batched_float64(gpu, monkeypatch):
    _force_split(monkeypatch, 4)
    source = """
    function (A[Bt, M, K], B[Bt, K, N]) -> (C) {
        C[b, i, j : Bt, M, N] = +(A[b, i, k] * B[b, k, j]);
    }
    """
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 17, 200))
    b = rng.standard_normal((3, 200, 5))
    (c,), schedules, _ = _run(source, (a, b), gpu)
    assert "split-K 4" in schedules[0] and "batch 3" in schedules[0], schedules
    np.testing.assert_allclose(c, np.matmul(a, b), rtol=1e-10, atol=1e-10)


def test_split_k_scratch_is_planned_and_reused(gpu, monkeypatch):
    """Two split contractions in a row: each partial buffer lives from its partial kernel to
    its sum; the second (smaller) reuses the memory the first freed."""
    _force_split(monkeypatch, 3)
    source = """
    function (A[M, K], B[K, N], D[N, L]) -> (E) {
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
        E[i, l : M, L] = +(C[i, j] * D[j, l]);
    }
    """
    rng = np.random.default_rng(13)
    a = rng.standard_normal((9, 400)).astype(np.float32)
    b = rng.standard_normal((400, 300)).astype(np.float32)
    d = rng.standard_normal((300, 200)).astype(np.float32) / 10
    (e,), schedules, exe = _run(source, (a, b, d), gpu)
    assert sum("split-K 3" in s for s in schedules) == 2, schedules
    assert [launch.name for launch in exe.launches] == ["k0_C_partial", "k0_C",
                                                        "k1_E_partial", "k1_E"]
    assert exe.scratch == {"k0_C_partials": 3 * 9 * 300 * 4, "k1_E_partials": 3 * 9 * 200 * 4}
    assert exe._buffers["k1_E_partials"] is exe._buffers["k0_C_partials"]
    c = a.astype(np.float64) @ b
    np.testing.assert_allclose(e, c @ d, rtol=1e-4, atol=1e-3)


def test_choose_config_splits_only_a_small_output_with_long_k():
    info = dataclasses.replace(get_device("cpu").info, kind="gpu", dialect="cuda",
                               compute_units=132, local_memory_bytes=227 * 1024,
                               max_work_group_size=1024)
    bound = tile.function(MATMUL).bind(np.zeros((576, 131072), np.float32),
                                       np.zeros((131072, 64), np.float32))
    from gingham.compiler.fusion import plan

    view = tiling_gpu.gemm_view(plan(bound).kernels[0].contraction)
    config = tiling_gpu.choose_config(view, info)
    groups = tiling_gpu.output_tiles(config, view) * config.split
    assert config.split > 1 and groups >= info.compute_units, config
    bound = tile.function(MATMUL).bind(np.zeros((4096, 4096), np.float32),
                                       np.zeros((4096, 4096), np.float32))
    view = tiling_gpu.gemm_view(plan(bound).kernels[0].contraction)
    assert tiling_gpu.choose_config(view, info).split == 1


def test_only_safe_select_arms_are_computed_before_the_select():
    """The lane body's select arms that round from registers are computed first; an arm with
    a global load (it may be a padding guard's out-of-bounds read) or an integer division (a
    guarded division by zero) stays behind its condition."""
    from gingham.compiler import kernel_ir as k

    f32, i32 = "float32", "int32"
    lane = k.LoadLocal("x_F", (k.Var("l", i32),), f32)
    rounded = k.Call("round_float16", (lane,), f32)
    cond = k.BinOp(">", k.Var("v", f32), k.Const(0.0, f32), "bool")
    loaded = k.Call("round_float16", (k.Load("X", k.Var("ge", i32), f32),), f32)
    divided = k.Call("round_float16", (k.Cast(f32, k.BinOp("/", k.Var("a", i32), k.Var(
        "b", i32), i32)),), f32)
    stmts = [k.Declare("v_A", f32, k.Select(cond, rounded, k.Const(0.0, f32), f32)),
             k.Declare("v_B", f32, k.Select(cond, loaded, k.Const(0.0, f32), f32)),
             k.Declare("v_C", f32, k.Select(cond, k.Const(0.0, f32), divided, f32))]
    out = lower._speculated_arms(stmts)
    assert out[0] == k.Declare("sel0", f32, rounded)
    assert out[1] == k.Declare("v_A", f32, k.Select(cond, k.Var("sel0", f32),
                                                     k.Const(0.0, f32), f32))
    assert out[2:] == stmts[1:]
