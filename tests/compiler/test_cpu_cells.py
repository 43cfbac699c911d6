"""The C lowering of reductions whose cells are vector lanes, against NumPy on every device.

Two schedules (on the ``c`` dialect and a CPU's OpenCL driver; the other devices only run
the numbers):

* the CPU split reduction (:func:`gingham.compiler.reduction.split_reduction_cpu`): a
  reduction whose neighbouring cells are neighbouring addresses (channels-last statistics)
  is cut into slices over OpenMP threads, each updating a row of partials in an ``omp simd``
  loop over the cells, and combined in slice order;
* the loop nest (:func:`gingham.compiler.lower.lower_cell_nest`): a contraction with a short
  reduction (pooling, its gradient, relayouts) computes runs of neighbouring cells in
  vector lanes, with the guards that the run's variable does not enter tested once per run
  and the others (and ``A == B ? C`` conditions) as branch-free selects.

The sizes do not divide the slices, the runs or the vector width; the cases cover sums,
max with NaN, min, product, unreached cells with a default, int32 and float16, siblings.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from gingham import tile
from gingham.codegen.c_family import DIALECTS, render
from gingham.compiler import lower_program, rewrite_program
from gingham.compiler.tiling_cpu import runs_on
from gingham.devices import get_device
from gingham.runtime import executable

RNG = np.random.default_rng(5)
SPLIT = "split reduction (cpu)"
NEST = "loop nest over"


def schedules(fn, args, device: str) -> list[str] | None:
    """The schedules of ``fn`` on ``device`` when it runs the CPU's schedules (the C backend,
    a CPU's OpenCL driver), else None."""
    target = get_device(device)
    if not runs_on(target.info):
        return None
    return [launch.schedule for launch in executable(fn.bind(*args), target).launches]


def run(source: str, args: list[np.ndarray], device: str, expect: str | None):
    """``source`` on ``device`` (one output), after checking that a device that runs the CPU's
    schedules chose the schedule ``expect`` (or, None, neither of them). The elementwise
    ``rows of`` schedule is the C backend's alone."""
    fn = tile.function(source)
    found = schedules(fn, args, device)
    if found is not None:
        if expect is None:
            assert not any(SPLIT in s or NEST in s for s in found), found
        elif expect in (SPLIT, NEST) or get_device(device).info.dialect == "c":
            assert any(expect in s for s in found), found
    return fn(*args, device=device)


def assert_sum(got, terms: np.ndarray, axes: tuple[int, ...], eps: float) -> None:
    """``got`` is the sum of ``terms`` over ``axes`` to within float rounding in any order."""
    want = terms.astype(np.float64).sum(axis=axes)
    magnitude = np.abs(terms.astype(np.float64)).sum(axis=axes)
    assert got.shape == want.shape
    np.testing.assert_array_less(np.abs(np.asarray(got, np.float64) - want), 16 * eps * magnitude
                                 + 1e-30)


# -- the split reduction ------------------------------------------------------------------------


def test_channels_last_sum(device):
    # 7 * 13 * 11 = 1001 values per channel (no multiple of the slice count), 24 channels
    # (three vectors of 8: the last lanes of a 16-wide vector are a tail).
    x = RNG.standard_normal((7, 13, 11, 24)).astype(np.float32) + 2
    m = run("function (X[N, H, W, C]) -> (M) { M[c : C] = +(X[n, h, w, c]); }", [x], device,
            SPLIT)
    assert_sum(m, x, (0, 1, 2), np.finfo(np.float32).eps)


def test_two_dimensional_cells(device):
    # Cells [H, C]: the run is C, the outer cell variable an ordinary loop inside the slice.
    x = RNG.standard_normal((9, 5, 40, 21)).astype(np.float32)
    m = run("function (X[N, H, W, C]) -> (M) { M[h, c : H, C] = +(X[n, h, w, c]); }", [x],
            device, SPLIT)
    assert_sum(m, x, (0, 2), np.finfo(np.float32).eps)


def test_max_and_min_propagate_nan(device):
    x = RNG.standard_normal((999, 17)).astype(np.float32)
    x[500, 3] = np.nan
    x[0, 16] = np.nan  # the first value of a slice
    x[998, 9] = np.nan  # the last one
    for agg, oracle in ((">", np.max), ("<", np.min)):
        got = run(f"function (X[R, C]) -> (M) {{ M[c : C] = {agg}(X[r, c]); }}", [x], device,
                  SPLIT)
        np.testing.assert_array_equal(got, oracle(x, axis=0))


def test_product(device):
    x = (1 + 1e-3 * RNG.standard_normal((700, 19))).astype(np.float32)
    got = run("function (X[N, C]) -> (M) { M[c : C] = *(X[n, c]); }", [x], device, SPLIT)
    np.testing.assert_allclose(got, np.prod(x.astype(np.float64), axis=0), rtol=1e-5)


def test_unreached_cells_take_the_default(device):
    # Cells c >= 20 have no assignment (a guard on the cell's own variable, tested in the
    # lanes): they hold D; the others the max over X[c + 2n].
    x = RNG.standard_normal(2000).astype(np.float32)
    d = np.full(40, -7.0, np.float32)
    got = run("function (X[N], D[C]) -> (M) { M[c : C] = >(X[c + 2*n]), c < 20 default D; }",
              [x, d], device, SPLIT)
    want = d.copy()
    for c in range(20):
        want[c] = max(-7.0, x[c::2].max())
    np.testing.assert_array_equal(got, want)


def test_integer_sum_is_exact(device):
    x = RNG.integers(-10**6, 10**6, (513, 33)).astype(np.int32)
    got = run("function (X[N, C]) -> (M) { M[c : C] = +(X[n, c]); }", [x], device, SPLIT)
    np.testing.assert_array_equal(got, x.sum(axis=0, dtype=np.int64).astype(np.int32))


def test_float16_sum(device):
    x = RNG.standard_normal((600, 16)).astype(np.float16)
    got = run("function (X[N, C]) -> (M) { M[c : C] = +(X[n, c]); }", [x], device, SPLIT)
    assert got.dtype == np.float16
    want = x.astype(np.float64).sum(axis=0)
    # float32 accumulation, then one rounding to float16
    np.testing.assert_allclose(got.astype(np.float64), want,
                               atol=16 * 2**-24 * np.abs(x.astype(np.float64)).sum(axis=0).max(),
                               rtol=2**-10)


def test_strided_cells_keep_one_work_item_per_cell(device):
    # NCHW statistics read each cell's values contiguously: lanes over w, not the split.
    x = RNG.standard_normal((4, 8, 16, 16)).astype(np.float32)
    m = run("function (X[N, C, H, W]) -> (M) { M[c : C] = +(X[n, c, h, w]); }", [x], device,
            None)
    assert_sum(m, x, (0, 2, 3), np.finfo(np.float32).eps)


@pytest.mark.parametrize("shape, channels_last", [
    ((4, 9, 11, 20), True),    # 396 values per channel, 20 channels: the split on the CPU
    ((3, 17, 10, 12), False),  # NCHW: one work-item per channel, lanes over w
])
def test_batch_norm_forward_and_backward_match_torch(device, shape, channels_last):
    from test_reduction_chains import assert_float32_batch_norm_matches_torch

    assert_float32_batch_norm_matches_torch(device, shape, channels_last)


def test_siblings_and_prologue_in_the_split():
    """Channels-last batch norm's backward on the C device: its gradient sums are one split
    reduction of four results (the three of the chain and the sum split off by linearity,
    compiler/linearity.py), computing their operands in the loop (the values are checked
    against PyTorch by test_batch_norm_forward_and_backward_match_torch)."""
    from gingham.bench.ops import Traced
    from test_reduction_chains import batch_norm_arrays, batch_norm_nhwc

    try:
        cpu = get_device("cpu")
    except Exception as exc:  # noqa: BLE001 - no C compiler with OpenMP
        pytest.skip(f"no cpu device: {exc}")
    arrays = batch_norm_arrays((4, 9, 11, 20), channels_last=True)
    traced = Traced.of(batch_norm_nhwc, arrays, "cpu")
    inputs = traced.inputs(arrays)
    gradient, _ = traced.gradient(arrays, (0, 1, 2))
    cotangent = RNG.standard_normal((4, 9, 11, 20)).astype(np.float32)
    found = [launch.schedule for launch in
             executable(gradient.bind(*inputs, cotangent), cpu).launches]
    assert any(SPLIT in s and "4 reductions" in s and "operands computed in the loop" in s
               for s in found), found


# -- the loop nest ---------------------------------------------------------------------------------

MAX_POOL_NHWC = """
function (X[N, H, W, C]) -> (O) {
    O[n, y, x, c : N, (H + 1) / 2, (W + 1) / 2, C] = >(X[n, 2*y + i - 1, 2*x + j - 1, c]),
        i < 3, j < 3;
}"""


def windows(x: np.ndarray, size: int, stride: int, pad: int, fill) -> np.ndarray:
    """``[N, Y, X, C, size*size]``: the pooling windows of NHWC ``x``, padding as ``fill``."""
    n, h, w, c = x.shape
    padded = np.full((n, h + 2 * pad + size, w + 2 * pad + size, c), fill, x.dtype)
    padded[:, pad:pad + h, pad:pad + w] = x
    oh, ow = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    taps = [padded[:, i:i + stride * oh:stride, j:j + stride * ow:stride]
            for i in range(size) for j in range(size)]
    return np.stack(taps, axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_max_pool_with_padding(device, dtype):
    # 3x3 windows, stride 2, padding 1, odd sizes; NaN in one window (float types).
    x = (RNG.standard_normal((3, 7, 9, 10)) * 50).astype(dtype)
    if dtype != np.int32:
        x[1, 3, 4, 5] = np.nan
    got = run(MAX_POOL_NHWC, [x], device, NEST)
    fill = np.iinfo(dtype).min if dtype == np.int32 else -np.inf
    np.testing.assert_array_equal(got, windows(x, 3, 2, 1, fill).max(axis=-1))


def test_max_pool_gradient_routes_to_the_maxima(device):
    """The gradient as Tile writes it (``X == O ? D``, each tap whose value is the window's
    max gets D, NaN windows none), NCHW with odd sizes: the guards (padding, stride) mention
    the innermost output variable, so they are selects in the lanes."""
    source = """
    function (X[N, C, H, W], O[N, C, P, Q], D[N, C, P, Q]) -> (G) {
        G[n, c, 2*y + i - 1, 2*x + j - 1 : N, C, H, W] = +(X[n, c, 2*y + i - 1, 2*x + j - 1]
            == O[n, c, y, x] ? D[n, c, y, x]), i < 3, j < 3;
    }"""
    x = RNG.integers(0, 4, (2, 3, 7, 9)).astype(np.float32)  # ties: several taps take D
    x[0, 1, 2, 2] = np.nan
    nhwc = x.transpose(0, 2, 3, 1)
    o = windows(nhwc, 3, 2, 1, -np.inf).max(axis=-1).transpose(0, 3, 1, 2).copy()
    d = RNG.standard_normal(o.shape).astype(np.float32)
    got = run(source, [x, o, d], device, NEST)
    want = np.zeros(x.shape, np.float64)
    for y in range(o.shape[2]):
        for xx in range(o.shape[3]):
            for i in range(3):
                for j in range(3):
                    r, s = 2 * y + i - 1, 2 * xx + j - 1
                    if 0 <= r < x.shape[2] and 0 <= s < x.shape[3]:
                        hit = x[:, :, r, s] == o[:, :, y, xx]
                        want[:, :, r, s] += np.where(hit, d[:, :, y, xx], 0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size, pad, width, lanes", [
    (2, 0, 32, True), (3, 0, 27, True), (4, 0, 16, True), (2, 1, 30, True),
    (2, 0, 31, False),  # a row is no whole number of windows: one cell a lane
    (5, 0, 25, False),  # windows wider than MAX_LANE_RESIDUES
])
def test_pool_gradient_rows_take_window_positions_as_constants(device, size, pad, width,
                                                               lanes):
    """An NCHW max-pool gradient of non-overlapping windows is a cell statement whose window
    position along a row is ``(o + pad) mod size`` (normalize.pin). On ``cpu`` a lane of the
    row's loop computes ``size`` neighbouring cells, each with its position a constant, so
    the pooled values are read at the lane's index instead of gathered."""
    source = f"""
    function (X[N, C, H, W], O[N, C, P, Q], D[N, C, P, Q]) -> (G) {{
        G[n, c, {size}*y + i - {pad}, {size}*x + j - {pad} : N, C, H, W] =
            +(X[n, c, {size}*y + i - {pad}, {size}*x + j - {pad}] == O[n, c, y, x]
              ? D[n, c, y, x]), i < {size}, j < {size};
    }}"""
    height = 2 * size
    x = RNG.integers(0, 3, (2, 3, height, width)).astype(np.float32)  # ties: several taps
    padded = np.full((2, 3, height + 2 * pad + size, width + 2 * pad + size), -np.inf,
                     np.float32)
    padded[:, :, pad:pad + height, pad:pad + width] = x
    p, q = (height + 2 * pad - size) // size + 1, (width + 2 * pad - size) // size + 1
    o = np.stack([padded[:, :, i:i + size * p:size, j:j + size * q:size]
                  for i in range(size) for j in range(size)]).max(axis=0)
    d = RNG.standard_normal(o.shape).astype(np.float32)
    got = run(source, [x, o, d], device, "cells a lane" if lanes else "rows of")
    if lanes and get_device(device).info.dialect == "c":
        # In the lane's cells r = 0, 1, ... the column's window position is (r + pad) mod size.
        bound = rewrite_program(tile.function(source).bind(x, o, d))
        (kernel,) = lower_program(bound, get_device(device).info)
        # normalize prefixes the statement's variables (x -> ix_x).
        found = re.findall(r"int G_ix_x_n = ([^;]*);", render(kernel, DIALECTS["c"]))
        assert found == [str((r + pad) % size) for r in range(size)], found
    want = np.zeros(x.shape, np.float64)
    for y in range(p):
        for z in range(q):
            for i in range(size):
                for j in range(size):
                    r, s = size * y + i - pad, size * z + j - pad
                    if 0 <= r < height and 0 <= s < width:
                        hit = x[:, :, r, s] == o[:, :, y, z]
                        want[:, :, r, s] += np.where(hit, d[:, :, y, z], 0)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16])
def test_narrow_integer_windows(device, dtype):
    """The nest accumulates 8- and 16-bit integers in int32 (lower.accumulator_rows): a min
    and a max of the operands stay in the type's range, and a sum wraps when it is stored as
    it would have step by step. A max of sums of two operands compares the wrapped sums, so
    it keeps the narrow type."""
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (3, 5, 6, 8), endpoint=True).astype(dtype)
    taps = x.reshape(3, 5, 3, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(3, 5, 3, 4, 4)
    pooled = "O[n, c, y, x : N, C, H / 2, W / 2] = {}(X[n, c, 2*y + i, 2*x + j]), i < 2, j < 2"
    for agg, want in (("<", taps.min(axis=-1)), (">", taps.max(axis=-1)),
                      ("+", taps.sum(axis=-1, dtype=dtype))):
        got = run(f"function (X[N, C, H, W]) -> (O) {{ {pooled.format(agg)}; }}", [x], device,
                  NEST)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    b = RNG.integers(info.min, info.max, (2, 2), endpoint=True).astype(dtype)
    got = run("function (X[N, C, H, W], B[I, J]) -> (O) { O[n, c, y, x : N, C, H / 2, W / 2]"
              " = >(X[n, c, 2*y + i, 2*x + j] + B[i, j]), i < 2, j < 2; }", [x, b], device,
              NEST)
    np.testing.assert_array_equal(got, (taps + b.reshape(4)).max(axis=-1))


def test_unreached_cells_in_the_nest_are_zero(device):
    # O[i] = max over X[2i + k - 4], k < 3: cells 0 and 1 have no valid tap (0); 5001 cells
    # of one variable are chunks of the parallel loop (the last one short).
    x = RNG.standard_normal(5001).astype(np.float32)
    got = run("function (X[N]) -> (O) { O[i : N] = >(X[2*i + k - 4]), k < 3; }", [x], device,
              NEST)
    padded = np.concatenate([np.full(4, -np.inf), x, np.full(10010, -np.inf)])
    want = np.stack([padded[k:k + 2 * 5001:2] for k in range(3)]).max(axis=0)
    want[np.isneginf(want)] = 0
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_relayout_copy(device):
    # A filter relayout [O, Y, X, I] -> [O, I, Y, X]: one assignment per cell. The innermost
    # output variable has 3 values: the lanes run along i, which T has at unit stride.
    t = RNG.standard_normal((5, 3, 3, 37)).astype(np.float32)
    got = run("function (T[O, Y, X, I]) -> (R) { R[o, i, y, x : O, I, Y, X] = +(T[o, y, x, i]); }",
              [t], device, "runs of 37 cells (o1)")
    np.testing.assert_array_equal(got, t.transpose(0, 3, 1, 2))


def test_average_pool_with_epilogue(device):
    # A sum over 2x2 windows with a fused epilogue (the division), odd sizes (the last row
    # and column of X are in no window).
    x = RNG.standard_normal((2, 9, 11, 12)).astype(np.float32)
    source = """
    function (X[N, H, W, C]) -> (A) {
        S[n, y, x, c : N, H / 2, W / 2, C] = +(X[n, 2*y + i, 2*x + j, c]), i < 2, j < 2;
        A = S / 4.0;
    }"""
    got = run(source, [x], device, NEST)
    want = windows(x, 2, 2, 0, 0.0).astype(np.float64).sum(axis=-1) / 4
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)



def test_nest_work_groups_stay_within_the_device(device):
    # 500,000 runs of 2 cells: a work-group per 64th of the runs (7,812 work-items) is more
    # than PoCL launches (4,096; INVALID_WORK_GROUP_SIZE, as a float64 Gamma draw of 20,000
    # samples hit), so the groups are cut to the device's largest.
    x = RNG.standard_normal((25, 20000, 3)).astype(np.float32)
    source = "function (X[A, B, C]) -> (O) { O[a, b, c : A, B, 2] = +(X[a, b, c + r]), r < 2; }"
    target = get_device(device)
    if runs_on(target.info) and target.info.dialect != "c":
        for launch in executable(tile.function(source).bind(x), target).launches:
            assert math.prod(launch.local_size) <= target.info.max_work_group_size, launch
    got = run(source, [x], device, NEST)
    np.testing.assert_allclose(got, x[..., :2] + x[..., 1:], rtol=1e-6, atol=1e-6)

# -- elementwise rows ------------------------------------------------------------------------------


@pytest.mark.parametrize("source, shapes, want", [
    # per-channel scale and shift of channels-last data (130 channels: a row is no multiple
    # of the vector)
    ("function (X[N, H, W, C], S[C], B[C]) -> (Y) { Y = X * S + B; }",
     [(4, 5, 6, 130), (130,), (130,)], lambda x, s, b: x * s + b),
    # 3 channels: a row spans W * C = 18 cells (the channel decoded within the row)
    ("function (X[N, H, W, C], S[C]) -> (Y) { Y = X * S; }", [(4, 5, 6, 3), (3,)],
     lambda x, s: x * s),
    # an operand over the two trailing axes
    ("function (X[N, H, W, C], S[1, 1, W, C]) -> (Y) { Y = max(X - S, 0.0); }",
     [(3, 5, 6, 7), (1, 1, 6, 7)], lambda x, s: np.maximum(x - s, 0)),
])
def test_channels_last_broadcast_rows(device, source, shapes, want):
    args = [RNG.standard_normal(shape).astype(np.float32) for shape in shapes]
    got = run(source, args, device, "rows of")
    expected = want(*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("height, width", [(6, 8), (7, 9)])
def test_gathering_cell_statement_runs_in_rows(device, height, width):
    # A max-pool gradient (a cell statement gathering from the pooled cells) fused with a
    # per-channel scale over channels-last data: rows of the channel axis, each row's
    # coordinates decoded once. Odd sizes leave the last row and column unreached (0).
    source = """
    function (X[N, H, W, C], O[N, P, Q, C], D[N, P, Q, C], S[C]) -> (G) {
        T[n, 2*p + i, 2*q + j, c : N, H, W, C] =
            +(X[n, 2*p + i, 2*q + j, c] == O[n, p, q, c] ? D[n, p, q, c]), i < 2, j < 2;
        G = T * S;
    }
    """
    x = RNG.standard_normal((3, height, width, 20)).astype(np.float32)
    p, q = height // 2, width // 2
    o = x[:, :2 * p, :2 * q].reshape(3, p, 2, q, 2, 20).max(axis=(2, 4))
    d = RNG.standard_normal((3, p, q, 20)).astype(np.float32)
    s = RNG.standard_normal(20).astype(np.float32)
    got = run(source, [x, o, d, s], device, "rows of 20")
    want = np.zeros_like(x)
    up = np.repeat(np.repeat(o, 2, 1), 2, 2)
    spread = np.repeat(np.repeat(d, 2, 1), 2, 2)
    want[:, :2 * p, :2 * q] = np.where(x[:, :2 * p, :2 * q] == up, spread, 0) * s
    np.testing.assert_array_equal(got, want)


def test_assignment_to_every_other_cell(device):
    # ``=`` into the odd cells of each row: the even ones are unreached (0); the guards (the
    # cell is odd, its source in range) mention the lanes' variable, so they are selects.
    a = RNG.standard_normal((3, 21)).astype(np.float32)
    got = run("function (A[R, N]) -> (O) { O[r, 2*i + 1 : R, 2*N + 1] = =(A[r, i]); }", [a],
              device, NEST)
    want = np.zeros((3, 43), np.float32)
    want[:, 1::2] = a
    np.testing.assert_array_equal(got, want)


# -- thin products -----------------------------------------------------------------------------


def test_thin_product_with_padding_runs_as_the_nest(device):
    # Winograd's input transform: 16 outputs per 4x4 tile of a padded channels-last image
    # (N = 16, K = 16, guards for the padding and the odd last tile), a table of constants.
    x = RNG.standard_normal((2, 7, 9, 20)).astype(np.float32)
    table = RNG.standard_normal((4, 4, 4, 4)).astype(np.float32)
    source = """
    function (X[N, H, W, C], T[A, B, I, J]) -> (V) {
        V[a, b, n, ty, tx, c : A, B, N, (H + 1) / 2, (W + 1) / 2, C] =
            +(T[a, b, i, j] * X[n, 2*ty + i - 1, 2*tx + j - 1, c]);
    }"""
    got = run(source, [x, table], device, NEST)
    padded = np.zeros((2, 7 + 3, 9 + 3, 20))
    padded[:, 1:8, 1:10] = x
    tiles = np.stack([np.stack([padded[:, i:i + 8:2, j:j + 10:2] for j in range(4)], -1)
                      for i in range(4)], -2)  # [n, ty, tx, c, i, j]
    want = np.einsum("abij,nyxcij->abnyxc", table.astype(np.float64), tiles)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_thin_product_with_a_long_reduction_runs_as_the_nest(device):
    # 4 rows of 300 cells, 36 x 4 = 144 terms each (past the nest's limit for other
    # contractions; the innermost reduction too short to sum in vector lanes).
    b = RNG.standard_normal((4, 36, 4)).astype(np.float32)
    a = RNG.standard_normal((36, 4, 300)).astype(np.float32)
    source = """
    function (B[N, K, L], A[K, L, M]) -> (C) {
        C[n, m : N, M] = +(B[n, k, l] * A[k, l, m]);
    }"""
    got = run(source, [b, a], device, NEST)
    want = np.einsum("nkl,klm->nm", b.astype(np.float64), a)
    # float32 rounding of 144 terms that cancel: bounded by their magnitudes, not the sum.
    magnitude = np.einsum("nkl,klm->nm", np.abs(b.astype(np.float64)), np.abs(a))
    np.testing.assert_array_less(np.abs(got - want), 16 * np.finfo(np.float32).eps * magnitude)


def test_wide_products_stay_tiled(device):
    # 17 columns and 161 terms are past the thin limits: the packed GEMM.
    for n, k in ((17, 16), (4, 161)):
        a = RNG.standard_normal((200, k)).astype(np.float32)
        b = RNG.standard_normal((k, n)).astype(np.float32)
        fn = tile.function(
            "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }")
        found = schedules(fn, [a, b], device)
        if found is not None:
            assert any("cpu-tiled GEMM" in s for s in found), found
        np.testing.assert_allclose(fn(a, b, device=device), a.astype(np.float64) @ b,
                                   rtol=1e-5, atol=1e-5)
