"""The Tile corpus: programs checked against independent NumPy / PyTorch computations.

Every expected value here is computed without gingham (NumPy, PyTorch on CPU in float64, or a
hand-written loop), following docs/tile-language.md and docs/tile-decisions.md.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from _util import (
    BF16,
    assert_close,
    philox2x32_10,
    philox_uniform,
    rand_distinct,
    randn,
    rng,
    run,
    tile_function,
)

T = torch.from_numpy


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


# =============================================================================================
# Sources (module-level so that test_gradients.py can reuse them)
# =============================================================================================

MATMUL = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""

BATCHED_MATMUL = """
function (A[Bt, M, K], B[Bt, K, N]) -> (C) {
    C[b, i, j : Bt, M, N] = +(A[b, i, k] * B[b, k, j]);
}
"""

# NWC, stride 2, dilation 2, padding 2 (the offset -2 is the padding).
CONV1D = """
function (I[N, X, CI], W[KX, CI, CO]) -> (O) {
    O[n, x, co : N, (X + 2*2 - 2*(KX - 1) - 1)/2 + 1, CO] = +(I[n, 2*x + 2*k - 2, ci] * W[k, ci, co]);
}
"""

# NHWC, groups = 2 (input channels 3*g + ci, output channels 2*g + co), stride (2, 1),
# dilation (1, 2), padding 1.
CONV2D_GROUPED = """
function (I[N, H, X, CI], K[KH, KW, CG, CO]) -> (O) {
    O[n, y, x, 2*g + co : N, (H + 2 - KH)/2 + 1, X + 2 - 2*(KW - 1), CO] =
        +(I[n, 2*y + ky - 1, x + 2*kx - 1, 3*g + ci] * K[ky, kx, ci, 2*g + co]), co < 2;
}
"""

# NDHWC, 3x3x3, padding 1.
CONV3D = """
function (I[N, D, H, X, CI], K[KD, KH, KW, CI, CO]) -> (O) {
    O[n, z, y, x, co : N, D, H, X, CO] =
        +(I[n, z + kz - 1, y + ky - 1, x + kx - 1, ci] * K[kz, ky, kx, ci, co]);
}
"""

# Transposed convolution, stride 2, padding 1, kernel 3 (torch weight layout [CI, CO, KH, KW]),
# written with an affine output index.
CONV_T2D_AFFINE = """
function (I[N, H, X, CI], K[CI, CO, KH, KW]) -> (O) {
    O[n, 2*y + ky - 1, 2*x + kx - 1, co : N, 2*H - 1, 2*X - 1, CO] = +(I[n, y, x, ci] * K[ci, co, ky, kx]);
}
"""

# The same, written with exact division in the input index.
CONV_T2D_DIV = """
function (I[N, H, X, CI], K[CI, CO, KH, KW]) -> (O) {
    O[n, oy, ox, co : N, 2*H - 1, 2*X - 1, CO] =
        +(I[n, (oy + 1 - ky)/2, (ox + 1 - kx)/2, ci] * K[ci, co, ky, kx]);
}
"""

# Max pool 3x3, stride 2, no padding; the last window of each axis may be partial.
MAXPOOL2D = """
function (I[N, H, X, C]) -> (O) {
    O[n, y, x, c : N, (H + 1)/2, (X + 1)/2, C] = >(I[n, 2*y + ky, 2*x + kx, c]), ky < 3, kx < 3;
}
"""

MAXPOOL1D = """
function (I[N]) -> (O) {
    O[i : (N + 1)/2] = >(I[2*i + j]), j < 2;
}
"""

# Average pool 3x3, stride 2, padding 1, counting only the valid taps.
AVGPOOL2D = """
function (I[N, H, X, C]) -> (O) {
    S[n, y, x, c : N, (H + 1)/2, (X + 1)/2, C] = +(I[n, 2*y + ky - 1, 2*x + kx - 1, c]), ky < 3, kx < 3;
    One = I * 0.0 + 1.0;
    Cnt[n, y, x, c : N, (H + 1)/2, (X + 1)/2, C] = +(One[n, 2*y + ky - 1, 2*x + kx - 1, c]), ky < 3, kx < 3;
    O = S / Cnt;
}
"""

SOFTMAX = """
function (X[R, C]) -> (Y) {
    M[r, 0 : R, 1] = >(X[r, c]);
    E = exp(X - M);
    S[r, 0 : R, 1] = +(E[r, c]);
    Y = E / S;
}
"""

LOG_SOFTMAX = """
function (X[R, C]) -> (Y) {
    M[r, 0 : R, 1] = >(X[r, c]);
    Z = X - M;
    E = exp(Z);
    S[r, 0 : R, 1] = +(E[r, c]);
    Y = Z - log(S);
}
"""

CUMSUM = """
function (I[N]) -> (O) {
    O[i : N] = +(I[k]), i - k < N;
}
"""

CUMSUM_2D = """
function (I[R, N]) -> (O) {
    O[r, i : R, N] = +(I[r, k]), i - k < N;
}
"""

ARGMAX = """
function (X[R, C]) -> (A) {
    M[r : R] = >(X[r, c]);
    I = index(X, 1);
    A[r : R] = >(X[r, c] == M[r] ? I[r, c]);
}
"""

SUM_DEFAULT = """
function (A[N, K], B[N]) -> (O) {
    O[i : N] = +(A[i, k]) default B;
}
"""

MAX_DEFAULT = """
function (A[N, K], B[N]) -> (O) {
    O[i : N] = >(A[i, k]) default B;
}
"""

ASSIGN_STRIDED_DEFAULT = """
function (A[M], B[N]) -> (O) {
    O[2*i : N] = =(A[i]) default B;
}
"""

ASSIGN_STRIDED = """
function (A[N]) -> (O) {
    O[2*i : 2*N] = =(A[i]);
}
"""

MAX_STRIDED = """
function (A[N, K]) -> (O) {
    O[2*i : 2*N] = >(A[i, k]);
}
"""

MIN_STRIDED_ODD = """
function (A[N, K]) -> (O) {
    O[2*i + 1 : 2*N + 1] = <(A[i, k]);
}
"""

TRANSPOSE = """
function (A[M, N]) -> (O) {
    O[j, i : N, M] = =(A[i, j]);
}
"""

BROADCAST_ASSIGN = """
function (A[M], B[N]) -> (O) {
    O[i, j : M, N] = =(A[i]), j < N;
}
"""

BROADCAST_ASSIGN_LIT = """
function (A[M]) -> (O) {
    O[i, j : M, 5] = =(A[i]), j < 5;
}
"""

PROD_AXIS = """
function (A[M, K]) -> (O) {
    O[i : M] = *(A[i, k]);
}
"""

MIN_AXIS0 = """
function (A[M, N]) -> (O) {
    O[j : N] = <(A[i, j]);
}
"""

SUM_OF_PLUS = """
function (A[M, K], B[K]) -> (O) {
    O[i : M] = +(A[i, k] + B[k]);
}
"""

OUTER_PLUS = """
function (A[M], B[N]) -> (O) {
    O[i, j : M, N] = =(A[i] + B[j]);
}
"""

EQ_TABLE = """
function (A[M], B[N]) -> (O) {
    O[i, j : M, N] = =(A[i] == B[j]);
}
"""

ANY_EQ = """
function (A[M, K], B[K]) -> (O) {
    O[i : M] = >(A[i, k] == B[k]);
}
"""

SUM_WHERE_EQ = """
function (A[M, K], B[K], C[M, K]) -> (O) {
    O[i : M] = +(A[i, k] == B[k] ? C[i, k]);
}
"""

BROADCAST_CHAIN = """
function (X, Y, Z) -> (O) {
    O = X * Y + Z - 2.0;
}
"""

CONV2D_NCHW_3x3 = """
function (I[N, CI, H, X], K[CO, CI, KH, KW]) -> (O) {
    O[n, co, y, x : N, CO, H, X] = +(I[n, ci, y + ky - 1, x + kx - 1] * K[co, ci, ky, kx]);
}
"""

GATHER = """
function (X, I) -> (O) {
    O = gather(X, I);
}
"""

SCATTER = """
function (X, I, U) -> (O) {
    O = scatter(X, I, U);
}
"""

RESHAPE = """
function (X[M, N, K]) -> (O) {
    O = reshape(X, M, N * K);
}
"""

DIM_AS_VALUE = """
function (X[N]) -> (Y) {
    Y = X / N;
}
"""


# =============================================================================================
# Reference helpers
# =============================================================================================


def ref_conv1d(i, w):
    out = F.conv1d(T(i).permute(0, 2, 1), T(w).permute(2, 1, 0), stride=2, padding=2, dilation=2)
    return _np(out.permute(0, 2, 1))


def ref_conv2d_grouped(i, k):
    out = F.conv2d(
        T(i).permute(0, 3, 1, 2), T(k).permute(3, 2, 0, 1), stride=(2, 1), padding=1, dilation=(1, 2), groups=2
    )
    return _np(out.permute(0, 2, 3, 1))


def ref_conv3d(i, k):
    out = F.conv3d(T(i).permute(0, 4, 1, 2, 3), T(k).permute(4, 3, 0, 1, 2), padding=1)
    return _np(out.permute(0, 2, 3, 4, 1))


def ref_conv_t2d(i, k):
    out = F.conv_transpose2d(T(i).permute(0, 3, 1, 2), T(k), stride=2, padding=1)
    return _np(out.permute(0, 2, 3, 1))


def ref_maxpool2d(x, k=3, s=2):
    n, h, w, c = x.shape
    oh, ow = (h + 1) // 2, (w + 1) // 2
    out = np.empty((n, oh, ow, c), x.dtype)
    for y in range(oh):
        for xx in range(ow):
            win = x[:, s * y : min(s * y + k, h), s * xx : min(s * xx + k, w), :]
            out[:, y, xx, :] = win.max(axis=(1, 2))
    return out


def ref_avgpool2d_valid(x, k=3, s=2, p=1):
    n, h, w, c = x.shape
    oh, ow = (h + 1) // 2, (w + 1) // 2
    out = np.empty((n, oh, ow, c), np.float64)
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = s * y - p, s * xx - p
            ys = range(max(y0, 0), min(y0 + k, h))
            xs = range(max(x0, 0), min(x0 + k, w))
            vals = [x[:, a, b, :] for a in ys for b in xs]
            out[:, y, xx, :] = np.mean(vals, axis=0)
    return out


# =============================================================================================
# Contractions
# =============================================================================================


def test_matmul(device):
    r = rng(1)
    a, b = randn(r, 5, 7), randn(r, 7, 3)
    assert_close(run(MATMUL, a, b, device=device), a @ b, dtype=np.float64)


def test_matmul_float32(device):
    r = rng(2)
    a, b = randn(r, 6, 9, dtype=np.float32), randn(r, 9, 4, dtype=np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(run(MATMUL, a, b, device=device), expected, dtype=np.float32)


def test_matmul_vector_shapes(device):
    # 1xK times Kx1: sizes of 1 are ordinary sizes.
    r = rng(3)
    a, b = randn(r, 1, 4), randn(r, 4, 1)
    assert_close(run(MATMUL, a, b, device=device), a @ b, dtype=np.float64)


def test_batched_matmul(device):
    r = rng(4)
    a, b = randn(r, 3, 4, 5), randn(r, 3, 5, 2)
    assert_close(run(BATCHED_MATMUL, a, b, device=device), np.matmul(a, b), dtype=np.float64)


def test_conv1d_stride_dilation_padding(device):
    r = rng(5)
    i, w = randn(r, 2, 9, 3), randn(r, 3, 3, 4)
    got = run(CONV1D, i, w, device=device)
    assert_close(got, ref_conv1d(i, w), dtype=np.float64)
    assert got.shape == (2, 5, 4)


def test_conv1d_same_padding_negative_offset(device):
    src = """
    function (I[N, X, C], W[KX, C, CO]) -> (O) {
        O[n, x, co : N, X, CO] = +(I[n, x + kx - 1, c] * W[kx, c, co]);
    }
    """
    r = rng(6)
    i, w = randn(r, 2, 8, 3), randn(r, 3, 3, 2)
    expected = _np(F.conv1d(T(i).permute(0, 2, 1), T(w).permute(2, 1, 0), padding=1).permute(0, 2, 1))
    assert_close(run(src, i, w, device=device), expected, dtype=np.float64)


def test_conv2d_grouped_strided_dilated(device):
    r = rng(7)
    i, k = randn(r, 2, 7, 6, 6), randn(r, 3, 3, 3, 4)
    got = run(CONV2D_GROUPED, i, k, device=device)
    assert_close(got, ref_conv2d_grouped(i, k), dtype=np.float64)


def test_conv2d_grouped_by_group_axes(device):
    # Groups as separate axes: channels [G, C/G].
    src = """
    function (I[N, H, X, G, CG], K[KH, KW, G, CG, CO]) -> (O) {
        O[n, y, x, g, co : N, H, X, G, CO] = +(I[n, y + ky - 1, x + kx - 1, g, ci] * K[ky, kx, g, ci, co]);
    }
    """
    r = rng(8)
    i, k = randn(r, 1, 5, 4, 3, 2), randn(r, 3, 3, 3, 2, 2)
    # torch: input channels g*CG + ci, output channels g*CO + co; weight [G*CO, CG, KH, KW]
    ti = T(i).reshape(1, 5, 4, 6).permute(0, 3, 1, 2)
    tk = T(k).permute(2, 4, 3, 0, 1).reshape(6, 2, 3, 3)
    expected = _np(F.conv2d(ti, tk, padding=1, groups=3).permute(0, 2, 3, 1)).reshape(1, 5, 4, 3, 2)
    assert_close(run(src, i, k, device=device), expected, dtype=np.float64)


def test_conv3d(device):
    r = rng(9)
    i, k = randn(r, 1, 4, 4, 3, 2), randn(r, 3, 3, 3, 2, 3)
    assert_close(run(CONV3D, i, k, device=device), ref_conv3d(i, k), dtype=np.float64)


@pytest.mark.parametrize("src", [CONV_T2D_AFFINE, CONV_T2D_DIV], ids=["affine_output", "exact_division"])
def test_conv_transpose2d(device, src):
    r = rng(10)
    i, k = randn(r, 2, 4, 3, 3), randn(r, 3, 2, 3, 3)
    got = run(src, i, k, device=device)
    assert got.shape == (2, 7, 5, 2)
    assert_close(got, ref_conv_t2d(i, k), dtype=np.float64)


def test_conv2d_3x3_batch_2x8x16x16(device):
    r = rng(11)
    i, k = randn(r, 2, 8, 16, 16, dtype=np.float32), randn(r, 8, 8, 3, 3, dtype=np.float32)
    got = run(CONV2D_NCHW_3x3, i, k, device=device)
    expected = _np(F.conv2d(T(i).double(), T(k).double(), padding=1))
    assert_close(got, expected, dtype=np.float32, scale=10)


def test_maxpool2d_partial_windows(device):
    r = rng(12)
    x = randn(r, 2, 8, 6, 3) - 3.0  # negative: a partial window must not see 0
    got = run(MAXPOOL2D, x, device=device)
    assert got.shape == (2, 4, 3, 3)
    assert_close(got, ref_maxpool2d(x), dtype=np.float64)


def test_maxpool1d_spec_example(device):
    x = np.array([-5.0, -3.0, -7.0, -1.0, -2.0, -9.0, -4.0])
    got = run(MAXPOOL1D, x, device=device)
    assert_close(got, np.array([-3.0, -1.0, -2.0, -4.0]), dtype=np.float64)


def test_avgpool2d_partial_windows_count_valid(device):
    r = rng(13)
    x = randn(r, 2, 7, 5, 2)
    got = run(AVGPOOL2D, x, device=device)
    expected = ref_avgpool2d_valid(x)
    assert_close(got, expected, dtype=np.float64)
    torch_ref = _np(
        F.avg_pool2d(T(x).permute(0, 3, 1, 2), 3, stride=2, padding=1, count_include_pad=False).permute(0, 2, 3, 1)
    )
    assert_close(got, torch_ref, dtype=np.float64)


def test_softmax(device):
    r = rng(14)
    x = randn(r, 4, 6) * 3
    assert_close(run(SOFTMAX, x, device=device), _np(torch.softmax(T(x), dim=1)), dtype=np.float64)


def test_softmax_large_values_stable(device):
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -999.0]])
    assert_close(run(SOFTMAX, x, device=device), _np(torch.softmax(T(x), dim=1)), dtype=np.float64)


def test_log_softmax(device):
    r = rng(15)
    x = randn(r, 3, 7) * 3
    assert_close(run(LOG_SOFTMAX, x, device=device), _np(torch.log_softmax(T(x), dim=1)), dtype=np.float64)


def test_cumsum(device):
    r = rng(16)
    x = randn(r, 9)
    assert_close(run(CUMSUM, x, device=device), np.cumsum(x), dtype=np.float64)


def test_cumsum_2d(device):
    r = rng(17)
    x = randn(r, 3, 6)
    assert_close(run(CUMSUM_2D, x, device=device), np.cumsum(x, axis=1), dtype=np.float64)


def test_cumsum_int32(device):
    x = np.array([3, -1, 4, 1, -5, 9], np.int32)
    assert_close(run(CUMSUM, x, device=device), np.cumsum(x).astype(np.int32), dtype=np.int32)


def test_argmax_conditional_form(device):
    r = rng(18)
    x = rand_distinct(r, 5, 7)
    got = run(ARGMAX, x, device=device)
    assert_close(got, np.argmax(x, axis=1).astype(np.int32), dtype=np.int32)


def test_argmax_ties_take_largest_index(device):
    # A[r] = max over c of (X[r,c] == M[r] ? c): with ties, the largest tied index.
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, 1.0, 5.0, 4.0]])
    got = run(ARGMAX, x, device=device)
    assert_close(got, np.array([2, 3, 2], np.int32), dtype=np.int32)


# ---------------------------------------------------------------------------------------------
# default, unreached cells, = aggregation
# ---------------------------------------------------------------------------------------------


def test_sum_default(device):
    r = rng(19)
    a, b = randn(r, 4, 5), randn(r, 4)
    assert_close(run(SUM_DEFAULT, a, b, device=device), b + a.sum(axis=1), dtype=np.float64)


def test_max_default(device):
    r = rng(20)
    a, b = randn(r, 6, 3), randn(r, 6) * 2
    assert_close(run(MAX_DEFAULT, a, b, device=device), np.maximum(b, a.max(axis=1)), dtype=np.float64)


def test_assign_default_unreached_cells_keep_default(device):
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0])
    expected = b.copy()
    expected[[0, 2, 4]] = a
    assert_close(run(ASSIGN_STRIDED_DEFAULT, a, b, device=device), expected, dtype=np.float64)


def test_assign_default_output_smaller_than_reach(device):
    # Only cells 0 and 2 exist in a size-4 output: A[2] would write cell 4 (out of bounds, skipped).
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([9.0, 8.0, 7.0, 6.0])
    assert_close(run(ASSIGN_STRIDED_DEFAULT, a, b, device=device), np.array([1.0, 8.0, 2.0, 6.0]), dtype=np.float64)


def test_strided_write_leaves_odd_cells_zero(device):
    a = np.array([4.0, -5.0, 6.0])
    assert_close(
        run(ASSIGN_STRIDED, a, device=device), np.array([4.0, 0, -5.0, 0, 6.0, 0]), dtype=np.float64
    )


def test_unreached_max_cells_are_zero_not_minus_inf(device):
    r = rng(21)
    a = -np.abs(randn(r, 3, 4)) - 1.0
    got = run(MAX_STRIDED, a, device=device)
    expected = np.zeros(6)
    expected[0::2] = a.max(axis=1)
    assert_close(got, expected, dtype=np.float64)
    assert np.all(np.isfinite(got))


def test_unreached_min_cells_are_zero_not_plus_inf(device):
    r = rng(22)
    a = np.abs(randn(r, 3, 4)) + 1.0
    got = run(MIN_STRIDED_ODD, a, device=device)
    expected = np.zeros(7)
    expected[1::2] = a.min(axis=1)
    assert_close(got, expected, dtype=np.float64)


def test_unreached_max_cells_int(device):
    src = """
    function (A[N]) -> (O) {
        O[i : N + 2] = >(A[i]);
    }
    """
    a = np.array([-3, -7, -2], np.int32)
    assert_close(run(src, a, device=device), np.array([-3, -7, -2, 0, 0], np.int32), dtype=np.int32)


def test_transpose_by_assign(device):
    r = rng(23)
    a = randn(r, 3, 5)
    assert_close(run(TRANSPOSE, a, device=device), a.T, dtype=np.float64)


def test_broadcast_by_assign_and_constraint(device):
    r = rng(24)
    a, b = randn(r, 4), randn(r, 3)
    assert_close(run(BROADCAST_ASSIGN, a, b, device=device), np.repeat(a[:, None], 3, axis=1), dtype=np.float64)


def test_broadcast_by_assign_literal_size(device):
    a = np.array([1.5, -2.0], np.float32)
    assert_close(run(BROADCAST_ASSIGN_LIT, a, device=device), np.repeat(a[:, None], 5, axis=1), dtype=np.float32)


def test_reverse_by_assign(device):
    src = """
    function (A[N]) -> (O) {
        O[N - 1 - i : N] = =(A[i]);
    }
    """
    a = np.arange(6, dtype=np.float64) * 1.5
    assert_close(run(src, a, device=device), a[::-1], dtype=np.float64)


def test_diagonal_read(device):
    src = """
    function (A[N, N]) -> (O) {
        O[i : N] = =(A[i, i]);
    }
    """
    r = rng(25)
    a = randn(r, 4, 4)
    assert_close(run(src, a, device=device), np.diag(a), dtype=np.float64)


def test_product_aggregation(device):
    r = rng(26)
    a = r.uniform(0.5, 1.5, size=(4, 6))
    assert_close(run(PROD_AXIS, a, device=device), np.prod(a, axis=1), dtype=np.float64)


def test_product_aggregation_int(device):
    a = np.array([[1, 2, 3], [-2, 2, -2], [5, 0, 7]], np.int64)
    assert_close(run(PROD_AXIS, a, device=device), np.array([6, 8, 0], np.int64), dtype=np.int64)


def test_min_aggregation(device):
    r = rng(27)
    a = randn(r, 5, 4)
    assert_close(run(MIN_AXIS0, a, device=device), a.min(axis=0), dtype=np.float64)


def test_max_aggregation_nan_propagates(device):
    src = """
    function (A[M, K]) -> (O) {
        O[i : M] = >(A[i, k]);
    }
    """
    a = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0], [np.nan, -1.0, -2.0]])
    got = run(src, a, device=device)
    assert np.isnan(got[0]) and np.isnan(got[2]) and got[1] == 3.0


def test_sum_of_plus_expression(device):
    r = rng(28)
    a, b = randn(r, 3, 5), randn(r, 5)
    assert_close(run(SUM_OF_PLUS, a, b, device=device), (a + b[None, :]).sum(axis=1), dtype=np.float64)


def test_outer_plus(device):
    r = rng(29)
    a, b = randn(r, 3), randn(r, 4)
    assert_close(run(OUTER_PLUS, a, b, device=device), a[:, None] + b[None, :], dtype=np.float64)


def test_equality_table_is_bool(device):
    a = np.array([1, 2, 3, 2], np.int32)
    b = np.array([2, 5, 1], np.int32)
    assert_close(run(EQ_TABLE, a, b, device=device), a[:, None] == b[None, :], dtype=np.bool_)


def test_any_equal_by_max(device):
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 0]], np.int32)
    b = np.array([9, 5, 0], np.int32)
    assert_close(run(ANY_EQ, a, b, device=device), np.array([False, True, True]), dtype=np.bool_)


def test_sum_where_equal(device):
    r = rng(30)
    a = r.integers(0, 3, size=(4, 5)).astype(np.int32)
    b = r.integers(0, 3, size=5).astype(np.int32)
    c = randn(r, 4, 5)
    expected = np.where(a == b[None, :], c, 0.0).sum(axis=1)
    assert_close(run(SUM_WHERE_EQ, a, b, c, device=device), expected, dtype=np.float64)


def test_scalar_output(device):
    src = """
    function (A[M, N]) -> (O) {
        O[] = +(A[i, j]);
    }
    """
    r = rng(31)
    a = randn(r, 3, 4)
    got = run(src, a, device=device)
    assert np.asarray(got).shape == ()
    assert_close(got, np.array(a.sum()), dtype=np.float64)


def test_trace_header_equality(device):
    src = """
    function (A[N, N]) -> (O) {
        O[] = +(A[i, i]);
    }
    """
    r = rng(32)
    a = randn(r, 5, 5)
    assert_close(run(src, a, device=device), np.array(np.trace(a)), dtype=np.float64)


def test_integer_literal_header_dims(device):
    src = """
    function (A[3, N]) -> (O) {
        O[j : N] = +(A[i, j]);
    }
    """
    r = rng(33)
    a = randn(r, 3, 5)
    assert_close(run(src, a, device=device), a.sum(axis=0), dtype=np.float64)


def test_output_size_expression_rounds_down(device):
    src = """
    function (A[N]) -> (O) {
        O[i : (N + 1) / 2] = +(A[2*i]);
    }
    """
    a = np.arange(7, dtype=np.float64)
    got = run(src, a, device=device)
    assert_close(got, a[0::2], dtype=np.float64)


def test_constraint_two_variables(device):
    # O[i] = sum over j, k with 0 <= j + k < 3 of A[i, j] * B[k]
    src = """
    function (A[M, J], B[K]) -> (O) {
        O[i : M] = +(A[i, j] * B[k]), j + k < 3;
    }
    """
    r = rng(34)
    a, b = randn(r, 2, 4), randn(r, 4)
    expected = np.zeros(2)
    for i, j, k in itertools.product(range(2), range(4), range(4)):
        if 0 <= j + k < 3:
            expected[i] += a[i, j] * b[k]
    assert_close(run(src, a, b, device=device), expected, dtype=np.float64)


def test_multiple_statements_and_outputs(device):
    src = """
    function (A[M, K], B[K, N]) -> (C, D) {
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
        D = relu(C) * 2.0;
    }
    """
    r = rng(35)
    a, b = randn(r, 3, 4), randn(r, 4, 2)
    got = run(src, a, b, device=device)
    assert isinstance(got, tuple) and len(got) == 2
    assert_close(got[0], a @ b, dtype=np.float64)
    assert_close(got[1], np.maximum(a @ b, 0) * 2, dtype=np.float64)


def test_input_may_be_output(device):
    src = """
    function (A, B) -> (B, C) {
        C = A + B;
    }
    """
    a, b = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    got = run(src, a, b, device=device)
    assert_close(got[0], b, dtype=np.float64)
    assert_close(got[1], a + b, dtype=np.float64)


def test_comments(device):
    src = """
    // line comment
    function (A[N]) -> (O) {  # hash comment
        /* block
           comment */ O[i : N] = =(A[i]); // trailing
    }
    """
    a = np.array([1.0, 2.0, 3.0])
    assert_close(run(src, a, device=device), a, dtype=np.float64)


def test_function_reusable_with_other_shapes(device):
    fn = tile_function(MATMUL)
    r = rng(36)
    for m, k, n in [(2, 3, 4), (5, 1, 2)]:
        a, b = randn(r, m, k), randn(r, k, n)
        assert_close(fn(a, b, device=device), a @ b, dtype=np.float64)


# =============================================================================================
# Elementwise
# =============================================================================================


def test_broadcasting_chain(device):
    r = rng(40)
    x, y, z = randn(r, 4, 1, 3), randn(r, 5, 3), randn(r, 3)
    got = run(BROADCAST_CHAIN, x, y, z, device=device)
    assert_close(got, x * y + z - 2.0, dtype=np.float64)
    assert got.shape == (4, 5, 3)


def test_broadcast_scalar_tensor(device):
    src = "function (X, S) -> (O) { O = X * S; }"
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    s = np.array(2.5)
    assert_close(run(src, x, s, device=device), x * 2.5, dtype=np.float64)


def _pos(r, *shape):
    return r.uniform(0.5, 2.0, size=shape)


def _unit(r, *shape):
    return r.uniform(-0.9, 0.9, size=shape)


def _erf(x):
    return _np(torch.erf(T(np.asarray(x, np.float64))))


def _erfc(x):
    return _np(torch.erfc(T(np.asarray(x, np.float64))))


# (name, source expression in X (and Y), input makers, numpy reference)
FLOAT_UNARY = [
    ("neg", "-X", randn, lambda x: -x),
    ("exp", "exp(X)", randn, np.exp),
    ("log", "log(X)", _pos, np.log),
    ("sqrt", "sqrt(X)", _pos, np.sqrt),
    ("rsqrt", "rsqrt(X)", _pos, lambda x: 1 / np.sqrt(x)),
    ("abs", "abs(X)", randn, np.abs),
    ("sign", "sign(X)", randn, np.sign),
    ("floor", "floor(X)", lambda r, *s: randn(r, *s) * 3, np.floor),
    ("ceil", "ceil(X)", lambda r, *s: randn(r, *s) * 3, np.ceil),
    ("round", "round(X)", lambda r, *s: randn(r, *s) * 3, np.round),
    ("sin", "sin(X)", randn, np.sin),
    ("cos", "cos(X)", randn, np.cos),
    ("tan", "tan(X)", _unit, np.tan),
    ("tanh", "tanh(X)", randn, np.tanh),
    ("sinh", "sinh(X)", randn, np.sinh),
    ("cosh", "cosh(X)", randn, np.cosh),
    ("asin", "asin(X)", _unit, np.arcsin),
    ("acos", "acos(X)", _unit, np.arccos),
    ("atan", "atan(X)", randn, np.arctan),
    ("erf", "erf(X)", randn, _erf),
    ("erfc", "erfc(X)", randn, _erfc),
    ("sigmoid", "sigmoid(X)", randn, lambda x: 1 / (1 + np.exp(-x))),
    ("relu", "relu(X)", randn, lambda x: np.maximum(x, 0)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name,expr,make,ref", FLOAT_UNARY, ids=[u[0] for u in FLOAT_UNARY])
def test_float_unary(device, name, expr, make, ref, dtype):
    r = rng(41)
    x = make(r, 3, 4).astype(dtype)
    src = f"function (X) -> (O) {{ O = {expr}; }}"
    got = run(src, x, device=device)
    assert_close(got, ref(x.astype(np.float64)), dtype=dtype, scale=4)


FLOAT_BINARY = [
    ("add", "X + Y", randn, randn, np.add),
    ("sub", "X - Y", randn, randn, np.subtract),
    ("mul", "X * Y", randn, randn, np.multiply),
    ("div", "X / Y", randn, _pos, np.divide),
    ("fmod", "X % Y", lambda r, *s: randn(r, *s) * 5, _pos, np.fmod),
    ("pow", "pow(X, Y)", _pos, randn, np.power),
    ("min", "min(X, Y)", randn, randn, np.minimum),
    ("max", "max(X, Y)", randn, randn, np.maximum),
]


@pytest.mark.parametrize("name,expr,mx,my,ref", FLOAT_BINARY, ids=[b[0] for b in FLOAT_BINARY])
def test_float_binary(device, name, expr, mx, my, ref):
    r = rng(42)
    x, y = mx(r, 3, 4), my(r, 3, 4)
    src = f"function (X, Y) -> (O) {{ O = {expr}; }}"
    assert_close(run(src, x, y, device=device), ref(x, y), dtype=np.float64)


def test_fmod_sign_of_dividend(device):
    x = np.array([7.5, -7.5, 7.5, -7.5])
    y = np.array([2.0, 2.0, -2.0, -2.0])
    src = "function (X, Y) -> (O) { O = X % Y; }"
    assert_close(run(src, x, y, device=device), np.array([1.5, -1.5, 1.5, -1.5]), dtype=np.float64)


COMPARISONS = [("lt", "<", np.less), ("gt", ">", np.greater), ("le", "<=", np.less_equal),
               ("ge", ">=", np.greater_equal), ("eq", "==", np.equal), ("ne", "!=", np.not_equal)]


@pytest.mark.parametrize("name,op,ref", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparisons_give_bool(device, name, op, ref):
    x = np.array([1.0, 2.0, 3.0, -1.0, 0.5])
    y = np.array([2.0, 2.0, 1.0, -1.0, 0.25])
    src = f"function (X, Y) -> (O) {{ O = X {op} Y; }}"
    assert_close(run(src, x, y, device=device), ref(x, y), dtype=np.bool_)


def test_comparison_int_vs_float_broadcast(device):
    x = np.array([[1], [2], [3]], np.int32)
    y = np.array([1.5, 2.0], np.float32)
    src = "function (X, Y) -> (O) { O = X >= Y; }"
    assert_close(run(src, x, y, device=device), x >= y, dtype=np.bool_)


def test_logical_operators(device):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    src = "function (A, B) -> (O, P, Q) { O = A && B; P = A || B; Q = !A; }"
    o, p, q = run(src, a, b, device=device)
    assert_close(o, a & b, dtype=np.bool_)
    assert_close(p, a | b, dtype=np.bool_)
    assert_close(q, ~a, dtype=np.bool_)


def test_logical_of_comparisons(device):
    x = np.array([-2.0, -0.5, 0.5, 2.0])
    src = "function (X) -> (O) { O = X > -1.0 && !(X > 1.0) || X == 2.0; }"
    assert_close(run(src, x, device=device), np.array([False, True, True, True]), dtype=np.bool_)


def test_ternary(device):
    r = rng(43)
    x, y = randn(r, 2, 5), randn(r, 2, 5)
    src = "function (X, Y) -> (O) { O = X > Y ? X : Y * 2.0; }"
    assert_close(run(src, x, y, device=device), np.where(x > y, x, y * 2), dtype=np.float64)


def test_ternary_broadcasts(device):
    c = np.array([[True], [False]])
    x = np.array([1.0, 2.0, 3.0])
    y = np.array(-1.0)
    src = "function (C, X, Y) -> (O) { O = C ? X : Y; }"
    assert_close(run(src, c, x, y, device=device), np.where(c, x, y), dtype=np.float64)


def _c_div(a, b):
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    q = np.zeros_like(a)
    nz = b != 0
    q[nz] = np.abs(a[nz]) // np.abs(b[nz]) * np.sign(a[nz]) * np.sign(b[nz])
    return q


def _c_mod(a, b):
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    m = a64 - b64 * _c_div(a, b)
    m[b64 == 0] = 0
    return m


def test_int_division_truncates_and_div_by_zero_is_zero(device):
    x = np.array([7, -7, 7, -7, 0, 5, -5, 9, 1], np.int32)
    y = np.array([2, 2, -2, -2, 3, 0, 0, 3, 5], np.int32)
    src = "function (X, Y) -> (Q, R) { Q = X / Y; R = X % Y; }"
    q, rem = run(src, x, y, device=device)
    assert_close(q, np.array([3, -3, -3, 3, 0, 0, 0, 3, 0], np.int32), dtype=np.int32)
    assert_close(rem, np.array([1, -1, 1, -1, 0, 0, 0, 0, 1], np.int32), dtype=np.int32)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.uint8, np.uint32])
def test_int_division_random(device, dtype):
    r = rng(44)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    x = r.integers(lo, hi + 1, size=40).astype(dtype)
    y = r.integers(lo // 10, hi // 10 + 1, size=40).astype(dtype)
    y[:3] = 0
    src = "function (X, Y) -> (Q, R) { Q = X / Y; R = X % Y; }"
    q, rem = run(src, x, y, device=device)
    assert_close(q, _c_div(x, y).astype(dtype), dtype=dtype)
    assert_close(rem, _c_mod(x, y).astype(dtype), dtype=dtype)


def test_int8_overflow_wraps(device):
    x = np.array([100, -100, 127, 50], np.int8)
    y = np.array([100, -100, 1, 3], np.int8)
    src = "function (X, Y) -> (S, P) { S = X + Y; P = X * Y; }"
    s, p = run(src, x, y, device=device)
    exp_s = (x.astype(np.int64) + y.astype(np.int64)).astype(np.int8)
    exp_p = (x.astype(np.int64) * y.astype(np.int64)).astype(np.int8)
    assert_close(s, exp_s, dtype=np.int8)
    assert_close(p, exp_p, dtype=np.int8)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64])
def test_bit_operations(device, dtype):
    r = rng(45)
    hi = min(np.iinfo(dtype).max, 1000)
    x = r.integers(0, hi, size=12).astype(dtype)
    y = r.integers(0, hi, size=12).astype(dtype)
    s = r.integers(0, 7, size=12).astype(dtype)
    src = """
    function (X, Y, S) -> (A, O, E, N, L, R) {
        A = X & Y;
        O = X | Y;
        E = X ^ Y;
        N = ~X;
        L = X << S;
        R = X >> S;
    }
    """
    a, o, e, n, left, right = run(src, x, y, s, device=device)
    assert_close(a, x & y, dtype=dtype)
    assert_close(o, x | y, dtype=dtype)
    assert_close(e, x ^ y, dtype=dtype)
    assert_close(n, ~x, dtype=dtype)
    assert_close(left, np.left_shift(x, s), dtype=dtype)
    assert_close(right, np.right_shift(x, s), dtype=dtype)


def test_bit_operations_on_bool(device):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    src = "function (A, B) -> (X, Y, Z, W) { X = A & B; Y = A | B; Z = A ^ B; W = ~A; }"
    x, y, z, w = run(src, a, b, device=device)
    assert_close(x, a & b, dtype=np.bool_)
    assert_close(y, a | b, dtype=np.bool_)
    assert_close(z, a ^ b, dtype=np.bool_)
    assert_close(w, ~a, dtype=np.bool_)


def test_int_unary_minus_and_abs(device):
    x = np.array([-3, 0, 4, -128], np.int8)
    src = "function (X) -> (N, A, S, R) { N = -X; A = abs(X); S = sign(X); R = relu(X); }"
    n, a, s, rl = run(src, x, device=device)
    assert_close(n, (-x.astype(np.int64)).astype(np.int8), dtype=np.int8)
    assert_close(a, np.abs(x.astype(np.int64)).astype(np.int8), dtype=np.int8)
    assert_close(s, np.sign(x), dtype=np.int8)
    assert_close(rl, np.maximum(x, 0), dtype=np.int8)


def test_int_min_max_floor_keep_type(device):
    x = np.array([3, -1, 7], np.int16)
    y = np.array([2, 5, 7], np.int16)
    src = "function (X, Y) -> (A, B, C, D, E) { A = min(X, Y); B = max(X, Y); C = floor(X); D = ceil(X); E = round(X); }"
    a, b, c, d, e = run(src, x, y, device=device)
    assert_close(a, np.minimum(x, y), dtype=np.int16)
    assert_close(b, np.maximum(x, y), dtype=np.int16)
    for v in (c, d, e):
        assert_close(v, x, dtype=np.int16)


def test_round_half_to_even(device):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 3.5])
    src = "function (X) -> (O) { O = round(X); }"
    assert_close(run(src, x, device=device), np.array([0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 4.0]), dtype=np.float64)


@pytest.mark.parametrize("fn_name,ref", [("exp", np.exp), ("sqrt", np.sqrt), ("sin", np.sin), ("log", np.log)])
def test_math_on_int_is_float32(device, fn_name, ref):
    x = np.array([1, 2, 3, 4], np.int32)
    src = f"function (X) -> (O) {{ O = {fn_name}(X); }}"
    assert_close(run(src, x, device=device), ref(x.astype(np.float64)), dtype=np.float32)


# docs/tile-decisions.md: arrays promote as numpy.promote_types does.
PROMOTIONS = [
    (np.int32, np.float16, np.float64),
    (np.int64, np.float32, np.float64),
    (np.int8, np.float16, np.float16),
    (np.int8, np.uint8, np.int16),
    (np.float32, np.float64, np.float64),
    (np.uint8, np.uint16, np.uint16),
    (np.int8, np.int32, np.int32),
    (np.bool_, np.int8, np.int8),
]


@pytest.mark.parametrize("ta,tb,tr", PROMOTIONS, ids=[f"{np.dtype(a)}+{np.dtype(b)}" for a, b, _ in PROMOTIONS])
def test_array_promotion(device, ta, tb, tr):
    x = np.array([1, 2, 3]).astype(ta)
    y = np.array([3, 1, 1]).astype(tb)
    src = "function (X, Y) -> (O) { O = X + Y; }"
    expected = x.astype(np.float64) + y.astype(np.float64)
    assert_close(run(src, x, y, device=device), expected.astype(tr), dtype=tr)


def test_float_literal_keeps_float16(device):
    x = np.array([1.0, 2.0, 3.0], np.float16)
    src = "function (X) -> (O) { O = X * 0.5 + 1; }"
    assert_close(run(src, x, device=device), x.astype(np.float64) * 0.5 + 1, dtype=np.float16)


def test_float_literal_meeting_int_gives_float32(device):
    x = np.array([1, 2, 3], np.int64)
    src = "function (X) -> (O) { O = X * 0.5; }"
    assert_close(run(src, x, device=device), x * 0.5, dtype=np.float32)


def test_int_literal_keeps_int8_and_wraps(device):
    x = np.array([1, 127, -128], np.int8)
    src = "function (X) -> (O) { O = X + 1; }"
    assert_close(run(src, x, device=device), np.array([2, -128, -127], np.int8), dtype=np.int8)


def test_literal_only_expressions(device):
    src = "function (X) -> (I, F) { I = 2 + 3 * 4; F = 1.5 * 2.0; }"
    i, f = run(src, np.zeros(2), device=device)
    assert_close(i, np.array(14, np.int32), dtype=np.int32)
    assert_close(f, np.array(3.0, np.float32), dtype=np.float32)


def test_int_comparison_with_literal_and_not(device):
    x = np.array([0, 1, 2, 3], np.uint8)
    src = "function (X) -> (O) { O = !(X < 2); }"
    assert_close(run(src, x, device=device), x >= 2, dtype=np.bool_)


def test_casts(device):
    x = np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 100.9])
    src = """
    function (X) -> (F16, F32, I32, I8, B, BF) {
        F16 = as_float(X, 16);
        F32 = as_float(X, 32);
        I32 = as_int(X, 32);
        I8 = as_int(X, 8);
        B = as_bool(X);
        BF = as_bfloat(X, 16);
    }
    """
    f16, f32, i32, i8, b, bf = run(src, x, device=device)
    assert f16.dtype == np.float16 and np.array_equal(f16, x.astype(np.float16))
    assert f32.dtype == np.float32 and np.array_equal(f32, x.astype(np.float32))
    assert_close(i32, np.array([-2, 0, 0, 0, 2, 100], np.int32), dtype=np.int32)
    assert_close(i8, np.array([-2, 0, 0, 0, 2, 100], np.int8), dtype=np.int8)
    assert_close(b, x != 0, dtype=np.bool_)
    assert_close(bf, x, dtype=BF16)


def test_casts_from_int_and_bool(device):
    x = np.array([0, 1, 200, 255], np.uint8)
    b = np.array([True, False, True, False])
    src = """
    function (X, B) -> (F, U16, I64, XB, BI) {
        F = as_float(X, 64);
        U16 = as_uint(X, 16);
        I64 = as_int(X, 64);
        XB = as_bool(X);
        BI = as_int(B, 32);
    }
    """
    f, u16, i64, xb, bi = run(src, x, b, device=device)
    assert_close(f, x.astype(np.float64), dtype=np.float64)
    assert_close(u16, x.astype(np.uint16), dtype=np.uint16)
    assert_close(i64, x.astype(np.int64), dtype=np.int64)
    assert_close(xb, x != 0, dtype=np.bool_)
    assert_close(bi, b.astype(np.int32), dtype=np.int32)


def test_as_uint_8(device):
    x = np.array([0.0, 1.9, 200.5, 255.0], np.float32)
    src = "function (X) -> (O) { O = as_uint(X, 8); }"
    assert_close(run(src, x, device=device), np.array([0, 1, 200, 255], np.uint8), dtype=np.uint8)


def test_dimension_name_as_value_float(device):
    x = np.array([2.0, 4.0, 5.0, 8.0])
    assert_close(run(DIM_AS_VALUE, x, device=device), x / 4, dtype=np.float64)


def test_dimension_name_as_value_int_truncates(device):
    x = np.array([7, -7, 3], np.int32)
    assert_close(run(DIM_AS_VALUE, x, device=device), np.array([2, -2, 1], np.int32), dtype=np.int32)


def test_dimension_name_in_expression(device):
    src = """
    function (X[M, N]) -> (Y) {
        S[i : M] = +(X[i, j]);
        Y = S / N + M;
    }
    """
    r = rng(46)
    x = randn(r, 3, 5)
    assert_close(run(src, x, device=device), x.sum(axis=1) / 5 + 3, dtype=np.float64)


# =============================================================================================
# Special operations
# =============================================================================================


def test_reshape(device):
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    got = run(RESHAPE, x, device=device)
    assert_close(got, x.reshape(2, 12), dtype=np.float64)


def test_reshape_literal_sizes(device):
    src = "function (X) -> (O) { O = reshape(X, 4, 3, 2); }"
    x = np.arange(24, dtype=np.int32).reshape(6, 4)
    assert_close(run(src, x, device=device), x.reshape(4, 3, 2), dtype=np.int32)


def test_shape(device):
    src = "function (X) -> (O) { O = shape(X); }"
    x = np.zeros((2, 3, 4), np.float32)
    assert_close(run(src, x, device=device), np.array([2, 3, 4], np.int64), dtype=np.int64)


def test_index(device):
    src = "function (X) -> (A, B, C) { A = index(X, 0); B = index(X, 1); C = index(X, 2); }"
    x = np.zeros((2, 3, 4), np.float64)
    a, b, c = run(src, x, device=device)
    ii, jj, kk = np.indices((2, 3, 4))
    assert_close(a, ii.astype(np.int32), dtype=np.int32)
    assert_close(b, jj.astype(np.int32), dtype=np.int32)
    assert_close(c, kk.astype(np.int32), dtype=np.int32)


def test_index_in_arithmetic(device):
    src = "function (X) -> (O) { O = X * index(X, 0); }"
    x = np.ones((3, 2), np.float32)
    # float32 * int32 promotes to float64, as NumPy promotes arrays.
    assert_close(run(src, x, device=device), np.array([[0, 0], [1, 1], [2, 2]], np.float64), dtype=np.float64)


def _ref_gather(x, idx):
    out = np.zeros(idx.shape + x.shape[1:], x.dtype)
    for pos in np.ndindex(*idx.shape):
        k = idx[pos]
        if 0 <= k < x.shape[0]:
            out[pos] = x[k]
    return out


def test_gather(device):
    r = rng(50)
    x = randn(r, 5, 3)
    idx = np.array([[0, 4, 2, 2], [1, 3, 0, 4]], np.int32)
    got = run(GATHER, x, idx, device=device)
    assert_close(got, x[idx], dtype=np.float64)
    assert got.shape == (2, 4, 3)


def test_gather_out_of_range_reads_zero(device):
    r = rng(51)
    x = randn(r, 5, 2)
    idx = np.array([-1, 0, 5, 4, 7, -3], np.int64)
    assert_close(run(GATHER, x, idx, device=device), _ref_gather(x, idx), dtype=np.float64)


def test_gather_1d(device):
    x = np.array([10, 20, 30], np.int32)
    idx = np.array([2, 2, 0, 3], np.int32)
    assert_close(run(GATHER, x, idx, device=device), np.array([30, 30, 10, 0], np.int32), dtype=np.int32)


def _ref_scatter(x, idx, u):
    out = np.zeros(x.shape, np.float64)
    for pos in np.ndindex(*idx.shape):
        k = idx[pos]
        if 0 <= k < x.shape[0]:
            out[k] += u[pos]
    return out.astype(u.dtype)


def test_scatter_duplicates_sum(device):
    r = rng(52)
    x = randn(r, 5, 3)
    idx = np.array([1, 3, 1, 0, 1, 3], np.int32)
    u = randn(r, 6, 3)
    got = run(SCATTER, x, idx, u, device=device)
    assert_close(got, _ref_scatter(x, idx, u), dtype=np.float64)


def test_scatter_out_of_range_dropped_and_type_of_updates(device):
    r = rng(53)
    x = randn(r, 4, 2)  # float64: only the shape is used
    idx = np.array([[0, -1], [4, 2], [2, 9]], np.int64)
    u = randn(r, 3, 2, 2, dtype=np.float32)
    got = run(SCATTER, x, idx, u, device=device)
    assert_close(got, _ref_scatter(x, idx, u), dtype=np.float32)
    assert got.shape == (4, 2)


def test_scatter_plus_x(device):
    src = "function (X, I, U) -> (O) { O = X + scatter(X, I, U); }"
    x = np.array([1.0, 2.0, 3.0])
    idx = np.array([2, 2, 0], np.int32)
    u = np.array([0.5, 0.25, 4.0])
    assert_close(run(src, x, idx, u, device=device), np.array([5.0, 2.0, 3.75]), dtype=np.float64)


def test_philox_reference_known_answers():
    # Random123 known-answer vectors for philox2x32_10 (ctr0 ctr1 key -> out0 out1):
    # this checks the test's own Philox, independently of gingham.
    kat = [
        (0x00000000, 0x00000000, 0x00000000, 0xFF1DAE59, 0x6CD10DF2),
        (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0x2C3F628B, 0xAB4FD7AD),
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0xDD7CE038, 0xF62A4C12),
    ]
    for c0, c1, k, e0, e1 in kat:
        x0, x1 = philox2x32_10(c0, c1, k)
        assert (int(x0), int(x1)) == (e0, e1)


PRNG = """
function (S) -> (O) {
    O = prng(S, 100, 1000);
}
"""


def test_prng_range_and_statistics(device):
    s = np.array([12345, 678], np.uint32)
    got = run(PRNG, s, device=device)
    assert got.dtype == np.float32 and got.shape == (100, 1000)
    assert got.min() >= 0.0 and got.max() < 1.0
    assert abs(float(got.mean()) - 0.5) < 0.005
    assert abs(float(got.var()) - 1.0 / 12.0) < 0.003
    hist, _ = np.histogram(got, bins=10, range=(0.0, 1.0))
    assert np.all(np.abs(hist - 10000) < 500)


def test_prng_deterministic_and_state_dependent(device):
    src = "function (S) -> (O) { O = prng(S, 64); }"
    fn = tile_function(src)
    s = np.array([7, 3], np.uint32)
    a = fn(s, device=device)
    b = fn(s.copy(), device=device)
    c = fn(s + np.uint32(1), device=device)
    d = fn(np.array([7, 4], np.uint32), device=device)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, d)
    assert len(np.unique(a)) > 60


@pytest.mark.parametrize("seed", [0, 1, 0xDEADBEEF])
def test_prng_matches_philox_2x32_10(device, seed):
    src = "function (S) -> (O) { O = prng(S, 3, 5, 7); }"
    s = np.array([seed, 0], np.uint32)
    got = run(src, s, device=device)
    assert_close(got, philox_uniform(seed, (3, 5, 7)), dtype=np.float32, rtol=0, atol=0)


def test_prng_single_element_state_second_key_is_zero(device):
    src = "function (S) -> (O) { O = prng(S, 20); }"
    fn = tile_function(src)
    a = fn(np.array([99], np.uint32), device=device)
    b = fn(np.array([99, 0], np.uint32), device=device)
    assert np.array_equal(a, b)
    assert_close(a, philox_uniform(99, (20,)), dtype=np.float32, rtol=0, atol=0)


def test_prng_advance_state_in_program(device):
    src = "function (S) -> (A, B) { A = prng(S, 16); T = S + 1; B = prng(T, 16); }"
    s = np.array([5], np.uint32)  # one element: the second key word is 0
    a, b = run(src, s, device=device)
    assert_close(a, philox_uniform(5, (16,)), dtype=np.float32, rtol=0, atol=0)
    assert_close(b, philox_uniform(6, (16,)), dtype=np.float32, rtol=0, atol=0)


# =============================================================================================
# dtypes
# =============================================================================================

ROWSUM = """
function (A[M, K]) -> (O) {
    O[i : M] = +(A[i, k]);
}
"""


def test_float16_matmul(device):
    r = rng(60)
    a = randn(r, 8, 16, dtype=np.float16)
    b = randn(r, 16, 8, dtype=np.float16)
    got = run(MATMUL, a, b, device=device)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(got, expected, dtype=np.float16, rtol=2e-3, atol=4e-3)


def test_float16_long_sum_accumulates_in_float32(device):
    # 1000 values in [0, 1): a float16 running sum would drift by many units; accumulation in
    # float32 rounded once gives the float16 nearest the true sum (within one ulp).
    r = rng(61)
    a = r.uniform(0, 1, size=(3, 1000)).astype(np.float16)
    got = run(ROWSUM, a, device=device)
    exact = a.astype(np.float64).sum(axis=1)
    assert got.dtype == np.float16
    ulp = np.spacing(exact.astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp), (got, exact)


def test_bfloat16_long_sum_accumulates_in_float32(device):
    r = rng(62)
    a = r.uniform(0, 1, size=(2, 300)).astype(BF16)
    got = run(ROWSUM, a, device=device)
    exact = a.astype(np.float64).sum(axis=1)
    assert got.dtype == BF16
    assert np.all(np.abs(got.astype(np.float64) - exact) <= 1.0), (got, exact)  # bf16 ulp at 128..256 is 1


def test_bfloat16_elementwise(device):
    r = rng(63)
    x = randn(r, 4, 4).astype(BF16)
    y = randn(r, 4, 4).astype(BF16)
    src = "function (X, Y) -> (O) { O = X * Y + 0.5; }"
    expected = x.astype(np.float64) * y.astype(np.float64) + 0.5
    assert_close(run(src, x, y, device=device), expected, dtype=BF16)


def test_float16_softmax(device):
    r = rng(64)
    x = randn(r, 3, 8).astype(np.float16)
    expected = _np(torch.softmax(T(x.astype(np.float64)), dim=1))
    assert_close(run(SOFTMAX, x, device=device), expected, dtype=np.float16, rtol=5e-3, atol=2e-3)


def test_float64_conv_precision(device):
    r = rng(65)
    i, w = randn(r, 2, 9, 3), randn(r, 3, 3, 4)
    got = run(CONV1D, i, w, device=device)
    assert_close(got, ref_conv1d(i, w), dtype=np.float64, rtol=1e-12, atol=1e-12)


def test_int8_matmul_wraps(device):
    r = rng(66)
    a = r.integers(-100, 100, size=(4, 6)).astype(np.int8)
    b = r.integers(-100, 100, size=(6, 3)).astype(np.int8)
    expected = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int8)
    assert_close(run(MATMUL, a, b, device=device), expected, dtype=np.int8)


def test_uint8_sum_wraps(device):
    r = rng(67)
    a = r.integers(0, 256, size=(3, 10)).astype(np.uint8)
    expected = (a.astype(np.int64).sum(axis=1) % 256).astype(np.uint8)
    assert_close(run(ROWSUM, a, device=device), expected, dtype=np.uint8)


def test_uint8_max_and_min(device):
    src = """
    function (A[M, K]) -> (Mx, Mn) {
        Mx[i : M] = >(A[i, k]);
        Mn[i : M] = <(A[i, k]);
    }
    """
    r = rng(68)
    a = r.integers(0, 256, size=(4, 5)).astype(np.uint8)
    mx, mn = run(src, a, device=device)
    assert_close(mx, a.max(axis=1), dtype=np.uint8)
    assert_close(mn, a.min(axis=1), dtype=np.uint8)


def test_bool_any_all_by_max_min(device):
    src = """
    function (A[M, K]) -> (Any, All) {
        Any[i : M] = >(A[i, k]);
        All[i : M] = <(A[i, k]);
    }
    """
    a = np.array([[True, False, False], [True, True, True], [False, False, False]])
    any_, all_ = run(src, a, device=device)
    assert_close(any_, a.any(axis=1), dtype=np.bool_)
    assert_close(all_, a.all(axis=1), dtype=np.bool_)


def test_int32_int64_matmul(device):
    r = rng(69)
    a = r.integers(-50, 50, size=(3, 4)).astype(np.int32)
    b = r.integers(-50, 50, size=(4, 2)).astype(np.int64)
    assert_close(run(MATMUL, a, b, device=device), a.astype(np.int64) @ b, dtype=np.int64)


def test_mixed_float_matmul_promotes(device):
    r = rng(70)
    a = randn(r, 3, 4, dtype=np.float32)
    b = randn(r, 4, 2)
    assert_close(run(MATMUL, a, b, device=device), a.astype(np.float64) @ b, dtype=np.float64)


# =============================================================================================
# More semantics
# =============================================================================================


def test_unsigned_and_signed_wraparound(device):
    src = "function (X, Y, A, B) -> (D, P) { D = X - Y; P = A * B; }"
    x = np.array([3, 250, 0], np.uint8)
    y = np.array([5, 10, 1], np.uint8)
    a = np.array([2**20, -(2**30), 7], np.int32)
    b = np.array([2**12, 4, 3], np.int32)
    d, p = run(src, x, y, a, b, device=device)
    assert_close(d, (x.astype(np.int64) - y.astype(np.int64)).astype(np.uint8), dtype=np.uint8)
    assert_close(p, (a.astype(np.int64) * b.astype(np.int64)).astype(np.int32), dtype=np.int32)


def test_float_division_by_zero_is_ieee(device):
    x = np.array([1.0, -1.0, 0.0])
    y = np.zeros(3)
    with np.errstate(divide="ignore", invalid="ignore"):
        got = run("function (X, Y) -> (O) { O = X / Y; }", x, y, device=device)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


def test_scientific_literals(device):
    x = np.array([1.0, 2.0])
    src = "function (X) -> (O) { O = X * 1e-3 + 2.5e2; }"
    assert_close(run(src, x, device=device), x * 1e-3 + 2.5e2, dtype=np.float64)


def test_default_broadcasts(device):
    src = """
    function (A[M, N, K], B[N]) -> (O) {
        O[i, j : M, N] = +(A[i, j, k]) default B;
    }
    """
    r = rng(80)
    a, b = randn(r, 2, 3, 4), randn(r, 3)
    assert_close(run(src, a, b, device=device), a.sum(axis=2) + b[None, :], dtype=np.float64)


def test_contraction_promotes_int_and_float16(device):
    # decisions: the result type is the promoted operand type; int8 with float16 -> float16.
    a = np.array([[1, 2], [3, 4]], np.int8)
    b = np.array([[0.5, 1.0], [1.5, -2.0]], np.float16)
    got = run(MATMUL, a, b, device=device)
    assert_close(got, a.astype(np.float64) @ b.astype(np.float64), dtype=np.float16)


def test_contraction_int8_times_float32(device):
    a = np.array([[1, -2], [3, 4]], np.int8)
    b = np.array([[0.5, 1.0], [1.5, -2.0]], np.float32)
    assert_close(run(MATMUL, a, b, device=device), a.astype(np.float64) @ b, dtype=np.float32)


# A contraction reading another contraction's output with a strided, offset index.
TWO_STAGE = """
function (I[N]) -> (O) {
    P[i : N + 2] = =(I[i - 1]);
    O[i : (N + 1)/2] = +(P[2*i + k]), k < 3;
}
"""


def test_two_stage_affine_reads_of_intermediate(device):
    src = TWO_STAGE
    x = np.arange(1.0, 8.0)  # N = 7
    p = np.concatenate([[0.0], x, [0.0]])
    expected = np.array([p[2 * i : 2 * i + 3].sum() for i in range(4)])
    assert_close(run(src, x, device=device), expected, dtype=np.float64)


SMALL_CNN = """
function (I[N, CI, H, X], K[CO, CI, KH, KW], W[F, J]) -> (O) {
    C[n, co, y, x : N, CO, H, X] = +(I[n, ci, y + ky - 1, x + kx - 1] * K[co, ci, ky, kx]);
    R = relu(C);
    P[n, co, y, x : N, CO, H / 2, X / 2] = >(R[n, co, 2*y + a, 2*x + b]), a < 2, b < 2;
    Flat = reshape(P, N, CO * (H / 2) * (X / 2));
    O[n, j : N, J] = +(Flat[n, f] * W[f, j]);
}
"""


def torch_small_cnn(i, k, w):
    c = torch.relu(F.conv2d(i, k, padding=1))
    p = F.max_pool2d(c, 2)
    return p.reshape(p.shape[0], -1) @ w


def test_small_cnn(device):
    r = rng(81)
    i, k, w = randn(r, 2, 3, 6, 6), randn(r, 4, 3, 3, 3), randn(r, 36, 5)
    expected = _np(torch_small_cnn(T(i), T(k), T(w)))
    assert_close(run(SMALL_CNN, i, k, w, device=device), expected, dtype=np.float64)
