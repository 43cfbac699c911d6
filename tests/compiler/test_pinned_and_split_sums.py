"""Rewrites that remove whole passes: reductions pinned to one assignment per cell
(:func:`gingham.compiler.normalize.pin`, :mod:`gingham.compiler.cell`) and sums split by
linearity into sibling sums (:mod:`gingham.compiler.linearity`).

Each rewrite is checked where it must fire and where it must not, and the values against
NumPy loops or PyTorch CPU on every device the run discovers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham.nn.functional as F
from gingham import tile
from gingham.compiler.cell import CellStatement
from gingham.compiler.fusion import _as_kernel_statements, plan
from gingham.compiler.linearity import split_sums
from gingham.compiler.normalize import narrow, normalize, pin
from gingham.tile.bounds import bind_contraction
from gingham.tile.ir import Contraction, Elementwise

from test_reduction_chains import (batch_norm_arrays, batch_norm_nhwc, plan_of, run_torch,
                                    run_traced, torch_batch_norm_nhwc)

RNG = np.random.default_rng(29)

POOL_GRADIENT = """
function (X[N, H, W], O[N, P, Q], D[N, P, Q]) -> (DX) {
    DX[n, S*y + i - PAD, S*x + j - PAD : N, H, W] =
        +(X[n, S*y + i - PAD, S*x + j - PAD] == O[n, y, x] ? D[n, y, x]), i < K, j < K;
}"""


def pool_gradient(size: int, stride: int, pad: int):
    source = (POOL_GRADIENT.replace("PAD", str(pad)).replace("S*", f"{stride}*")
              .replace("< K", f"< {size}"))
    return tile.function(source)


def pinned_form(fn, *arrays):
    bound = fn.bind(*arrays)
    (statement,) = [s for s in bound.program.statements if isinstance(s, Contraction)]
    return pin(narrow(normalize(bind_contraction(statement, bound))))


def numpy_pool_gradient(x, o, d, size, stride, pad):
    """Every window position equal to its window's max receives the cotangent (ties too)."""
    dx = np.zeros_like(x, dtype=np.float64)
    n, h, w = x.shape
    for b in range(n):
        for y in range(o.shape[1]):
            for z in range(o.shape[2]):
                for i in range(size):
                    for j in range(size):
                        r, c = stride * y + i - pad, stride * z + j - pad
                        if 0 <= r < h and 0 <= c < w and x[b, r, c] == o[b, y, z]:
                            dx[b, r, c] += d[b, y, z]
    return dx


def pool_arrays(shape, size, stride, pad, ties=False):
    n, h, w = shape
    x = RNG.standard_normal(shape).astype(np.float32)
    if ties:
        x = np.round(x).astype(np.float32)  # many equal values in a window
    out_h, out_w = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    padded = np.full((n, h + 2 * pad, w + 2 * pad), -np.inf, np.float32)
    padded[:, pad:pad + h, pad:pad + w] = x
    o = np.stack([padded[:, stride * y:stride * y + size, stride * z:stride * z + size]
                  .reshape(n, -1).max(1) for y in range(out_h) for z in range(out_w)], 1)
    o = o.reshape(n, out_h, out_w).astype(np.float32)
    d = RNG.standard_normal(o.shape).astype(np.float32)
    return x, o, d


# -- where pinning fires ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape, size, stride, pad, pinned", [
    ((2, 8, 8), 2, 2, 0, True),     # stride == window: one window position per cell
    ((2, 7, 9), 2, 2, 0, True),     # odd sizes: the last row and column are in no window
    ((2, 8, 8), 2, 2, 1, True),     # padding
    ((2, 9, 7), 3, 3, 0, True),
    ((2, 9, 7), 3, 2, 1, False),    # overlapping windows: up to 2 positions per axis
    ((2, 8, 8), 2, 1, 0, False),
])
def test_pin_fires_only_for_non_overlapping_windows(shape, size, stride, pad, pinned):
    fn = pool_gradient(size, stride, pad)
    nc = pinned_form(fn, *pool_arrays(shape, size, stride, pad))
    assert (not nc.red_vars and len(nc.pinned) == 2) == pinned
    if not pinned:
        assert nc.red_vars  # the reduction stays


def test_pin_drops_guards_every_cell_passes():
    """The window's position is ``o mod 2``: with an even size every cell is in a window, so
    the range guards go; with an odd size the last row's is kept (it is in no window)."""
    even = pinned_form(pool_gradient(2, 2, 0), *pool_arrays((1, 8, 8), 2, 2, 0))
    odd = pinned_form(pool_gradient(2, 2, 0), *pool_arrays((1, 7, 8), 2, 2, 0))
    assert not even.guards
    assert len(odd.guards) == 1


@pytest.mark.parametrize("shape, size, stride, pad", [
    ((2, 8, 8), 2, 2, 0), ((3, 7, 9), 2, 2, 0), ((2, 8, 6), 2, 2, 1), ((2, 9, 7), 3, 3, 0),
    ((2, 9, 7), 3, 2, 1),
])
@pytest.mark.parametrize("ties", [False, True])
def test_pool_gradient_values(device, shape, size, stride, pad, ties):
    fn = pool_gradient(size, stride, pad)
    x, o, d = pool_arrays(shape, size, stride, pad, ties)
    expected = numpy_pool_gradient(x, o, d, size, stride, pad)
    np.testing.assert_allclose(fn(x, o, d, device=device), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("agg, default", [("=", False), (">", False), ("<", True),
                                          ("+", True)])
def test_pinned_cells_without_a_solution_hold_the_identity_or_the_default(device, agg,
                                                                          default):
    """Stride 3 with a window of 2: cells ``3y + 2`` have no assignment (the valid-index
    rule: 0, or the default's value); the others exactly one."""
    source = f"""
    function (A[H], B[K], T[L]) -> (U) {{
        U[3*y + i : L] = {agg}(A[y] * B[i]), i < 2{' default T' if default else ''};
    }}"""
    fn = tile.function(source)
    a = RNG.standard_normal(5).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)
    t = RNG.standard_normal(14).astype(np.float32)
    nc = pinned_form(fn, a, b, t)
    assert not nc.red_vars and len(nc.pinned) == 1
    expected = t.astype(np.float64) if default else np.zeros(14)
    for y in range(5):
        for i in range(2):
            value = float(a[y]) * float(b[i])
            old = expected[3 * y + i]
            expected[3 * y + i] = {"=": value, ">": max(old, value) if default else value,
                                   "<": min(old, value), "+": old + value}[agg]
    np.testing.assert_allclose(fn(a, b, t, device=device), expected, rtol=1e-6, atol=1e-6)


def test_pinned_contraction_becomes_a_cell_statement():
    fn = pool_gradient(2, 2, 0)
    bound = fn.bind(*pool_arrays((2, 8, 8), 2, 2, 0))
    (statement, nc), = _as_kernel_statements(bound)
    assert isinstance(statement, CellStatement) and nc is None
    assert statement.own_cell_reads() == {"X"} and statement.gathered() == {"O", "D"}
    overlapping = pool_gradient(3, 2, 1).bind(*pool_arrays((2, 9, 7), 3, 2, 1))
    (statement, nc), = _as_kernel_statements(overlapping)
    assert isinstance(statement, Contraction)


# -- max pool backward through the frontend, against PyTorch ------------------------------------


@pytest.mark.parametrize("shape, size, stride, pad, channels_last", [
    ((2, 3, 8, 8), 2, 2, 0, False),
    ((2, 3, 8, 8), 2, 2, 0, True),
    ((2, 3, 7, 9), 2, 2, 0, True),   # odd sizes
    ((2, 3, 8, 6), 2, 2, 1, False),  # padding
    ((2, 3, 9, 12), 3, 3, 0, False),  # on cpu a lane takes 3 cells of a row
    ((2, 3, 9, 7), 3, 2, 1, True),   # overlapping: not pinned
])
def test_max_pool_backward_matches_torch(device, shape, size, stride, pad, channels_last):
    x = RNG.standard_normal(shape).astype(np.float32)  # no ties: PyTorch picks one of them

    def theirs(t):
        return TF.max_pool2d(t, size, stride, pad)

    def ours(t):
        if channels_last:
            return F.max_pool2d(t.transpose(0, 2, 3, 1), size, stride, pad,
                                data_format="NHWC").transpose(0, 3, 1, 2)
        return F.max_pool2d(t, size, stride, pad)

    out_shape = tuple(theirs(torch.tensor(x)).shape)
    cotangent = RNG.standard_normal(out_shape).astype(np.float32)
    out, (dx,) = run_traced(ours, [x], (0,), device, cotangent)
    expected, (expected_dx,) = run_torch(theirs, [x], (0,), cotangent)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dx, expected_dx, rtol=1e-6, atol=1e-6)


def bn_relu_pool(x, w, b):
    return F.max_pool2d(F.relu(batch_norm_nhwc(x, w, b)), 2, data_format="NHWC")


def torch_bn_relu_pool(x, w, b):
    y = TF.relu(torch_batch_norm_nhwc(x, w, b)).permute(0, 3, 1, 2)
    return TF.max_pool2d(y, 2).permute(0, 2, 3, 1)


def test_bn_relu_pool_backward_recomputes_the_pool_gradient():
    """A ResNet block's tail: the pool gradient (a cell statement) is computed in the loops of
    batch norm's gradient sums and of dx instead of stored; sum(dx') comes from the sums'
    kernel (split_sums): forward 4 kernels, backward 4: the window's taps numbered (a cast of
    their index, 4 cells, the index computed in its loop: fusion._coordinates), each window's
    first tap equal to its max (a pass over the pool's input, docs/tile-decisions.md), then
    the two."""
    shape = (4, 8, 8, 16)
    bound, kernel_plan = plan_of(bn_relu_pool, batch_norm_arrays(shape, channels_last=True),
                                 (0, 1, 2), True)
    assert len(kernel_plan.kernels) == 8
    stored_big = {n for k in kernel_plan.kernels for n in k.stores
                  if bound.shapes[n] == shape} - set(bound.program.outputs)
    assert len(stored_big) == 1  # the forward's relu output, which the pool gradient reads
    cells = [e for k in kernel_plan.kernels for e in k.prologue + k.elementwise
             if isinstance(e, CellStatement)]
    assert len(cells) == 2  # in the sums' loop and in dx's


@pytest.mark.parametrize("shape", [(4, 8, 8, 16), (3, 7, 9, 5)])
def test_bn_relu_pool_backward_matches_torch(device, shape):
    arrays = batch_norm_arrays(shape, channels_last=True)
    out_shape = (shape[0], shape[1] // 2, shape[2] // 2, shape[3])
    cotangent = RNG.standard_normal(out_shape).astype(np.float32)
    out, grads = run_traced(bn_relu_pool, arrays, (0, 1, 2), device, cotangent)
    expected, expected_grads = run_torch(torch_bn_relu_pool, arrays, (0, 1, 2), cotangent)
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-5)
    for name, got, want in zip(("dx", "dweight", "dbias"), grads, expected_grads):
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale, err_msg=name)


# -- sums split by linearity -----------------------------------------------------------------------


def split_program(source, *arrays):
    fn = tile.function(source)
    bound = fn.bind(*arrays)
    return fn, bound, split_sums(bound)


LINEAR = """
function (X[N, C], Y[N, C], A[C], B[C]) -> (SU, R) {
    SU[c : C] = +(X[n, c]);
    T = A * X + SU * (Y - A) - 3.0 * A;
    R[c : C] = +(T[n, c]);
}"""


def test_split_sums_fires_for_factors_constant_along_the_reduction(device):
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in ((37, 6), (37, 6), (6,), (6,))]
    fn, bound, split = split_program(LINEAR, *arrays)
    assert split is not bound
    r_statement = [s for s in split.program.statements if s.out == "R"][0]
    assert isinstance(r_statement, Elementwise)  # a combination of sums, no reduction
    new_sums = [s for s in split.program.statements
                if isinstance(s, Contraction) and s.out.startswith("R_s")]
    assert len(new_sums) == 1  # sum(X) is SU; sum(Y - A) is new
    kernels = plan(split).kernels
    assert len(kernels) == 1  # SU, the new sum and R in one pass
    x, y, a, b = (v.astype(np.float64) for v in arrays)
    su, r = fn(*arrays, device=device)
    np.testing.assert_allclose(su, x.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r, (a * x + x.sum(0) * (y - a) - 3.0 * a).sum(0), rtol=1e-5,
                               atol=1e-4)


@pytest.mark.parametrize("summand", [
    "(X - SU) * (Y - SU)",  # no factor constant along the reduction (no expansion)
    "X * SU * Z",           # Z varies along n
    "exp(X) * SU",          # the term needs exp: not recomputed cheaply in the pass
    "X * A + Y",            # nothing from the earlier pass: it is a sibling as it is
])
def test_split_sums_does_not_fire_without_constant_factors(summand):
    source = f"""
    function (X[N, C], Y[N, C], Z[N, 1], A[C]) -> (SU, R) {{
        SU[c : C] = +(Y[n, c]);
        T = {summand};
        R[c : C] = +(T[n, c]);
    }}"""
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in ((9, 4), (9, 4), (9, 1), (4,))]
    _, bound, split = split_program(source, *arrays)
    assert split is bound


def test_split_sums_needs_an_earlier_pass_over_the_domain():
    source = """
    function (X[N, C], A[C]) -> (R) {
        T = A * X;
        R[c : C] = +(T[n, c]);
    }"""
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in ((9, 4), (4,))]
    _, bound, split = split_program(source, *arrays)
    assert split is bound  # nothing to join: it stays one sum


def test_split_sums_keeps_narrow_types():
    """A float16 summand rounds per statement: reassociating it would move roundings."""
    source = """
    function (X[N, C], A[C]) -> (SU, R) {
        SU[c : C] = +(X[n, c]);
        T = SU * X;
        R[c : C] = +(T[n, c]);
    }"""
    arrays = [RNG.standard_normal((9, 4)).astype(np.float16),
              RNG.standard_normal(4).astype(np.float16)]
    _, bound, split = split_program(source, *arrays)
    assert split is bound


@pytest.mark.parametrize("shape, dtype", [((3, 7, 5, 6), "float32"), ((2, 6, 4, 5), "float16")])
def test_channels_last_batch_norm_backward_after_split(device, shape, dtype):
    """Batch norm's sum(dx') from sibling sums (split_sums), NHWC, against PyTorch."""
    arrays = batch_norm_arrays(shape, dtype, channels_last=True)
    cotangent = RNG.standard_normal(shape).astype(arrays[0].dtype)
    out, grads = run_traced(batch_norm_nhwc, arrays, (0, 1, 2), device, cotangent)
    expected, expected_grads = run_torch(torch_batch_norm_nhwc, arrays, (0, 1, 2), cotangent)
    tol = 2e-5 if dtype == "float32" else 2e-3
    for name, got, want in zip(("dx", "dweight", "dbias"), grads, expected_grads):
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol,
                                   atol=tol * scale, err_msg=name)


def test_batch_norm_backward_split_sum_is_an_epilogue():
    bound, kernel_plan = plan_of(batch_norm_nhwc, batch_norm_arrays((4, 8, 8, 16),
                                                                    channels_last=True),
                                 (0, 1, 2), True)
    shared = [k for k in kernel_plan.kernels if k.siblings]
    assert len(shared) == 1
    epilogue = {e.out for e in shared[0].elementwise}
    split = [s for s in bound.program.statements if isinstance(s, Contraction)
             and "_s" in s.out]
    assert split and any(s.out in {x.out for x in shared[0].siblings} for s in split)
    assert epilogue  # the combination of the sums is computed after the loop
