"""Gradients of the corpus programs: ``fn.vjp`` against central finite differences (float64) and
against PyTorch autograd, plus checks that gradient programs are real Tile text."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import test_corpus as C
from _util import BF16, as_tuple, assert_close, numeric_vjp, pick_coords, rand_distinct, randn, rng, tile_function

FD_RTOL, FD_ATOL = 1e-5, 1e-6
TORCH_RTOL, TORCH_ATOL = 1e-7, 1e-9


def _is_float(a) -> bool:
    return np.asarray(a).dtype.kind == "f"


def check_vjp(src, arrays, device, torch_fn=None, seed=0, fd_coords=10, none_ok_zero=()):
    """vjp of ``src`` at ``arrays`` vs finite differences of the forward and vs torch autograd.

    ``none_ok_zero``: indices of float inputs whose gradient may be reported as None or zeros.
    """
    r = rng(1000 + seed)
    fn = tile_function(src)
    outs = as_tuple(fn(*arrays, device=device))
    cts = tuple(r.standard_normal(np.asarray(o).shape) for o in outs)
    ct_arg = cts[0] if len(cts) == 1 else cts
    grads = fn.vjp(list(arrays), ct_arg, device=device)
    assert isinstance(grads, tuple), f"vjp must return a tuple, got {type(grads)}"
    assert len(grads) == len(arrays)

    torch_grads = None
    if torch_fn is not None:
        ts = [
            torch.tensor(a, requires_grad=True) if _is_float(a) else torch.tensor(a.astype(np.int64))
            for a in arrays
        ]
        touts = as_tuple(torch_fn(*ts))
        total = sum((to * torch.from_numpy(ct)).sum() for to, ct in zip(touts, cts))
        total.backward()
        torch_grads = [t.grad.numpy() if t.grad is not None else None for t in ts]

    for idx, a in enumerate(arrays):
        g = grads[idx]
        if not _is_float(a):
            assert g is None, f"gradient of integer/bool input {idx} must be None"
            continue
        if idx in none_ok_zero:
            assert g is None or not np.any(np.asarray(g)), f"input {idx} must get no gradient"
            continue
        assert g is not None, f"float input {idx} got no gradient"
        g = np.asarray(g)
        assert g.shape == a.shape, f"input {idx}: gradient shape {g.shape} != {a.shape}"
        assert g.dtype == a.dtype, f"input {idx}: gradient dtype {g.dtype} != {a.dtype}"
        coords = pick_coords(r, a.size, fd_coords)
        _, num = numeric_vjp(lambda xs: fn(*xs, device=device), arrays, cts, idx, coords)
        np.testing.assert_allclose(
            g.reshape(-1)[coords], num, rtol=FD_RTOL, atol=FD_ATOL, err_msg=f"input {idx}: vjp vs finite differences"
        )
        if torch_grads is not None:
            tg = torch_grads[idx]
            if tg is None:
                tg = np.zeros_like(a)
            np.testing.assert_allclose(g, tg, rtol=TORCH_RTOL, atol=TORCH_ATOL, err_msg=f"input {idx}: vjp vs torch")
    return grads


# ---------------------------------------------------------------------------------------------
# torch versions (autograd-capable) of the corpus programs, in the corpus's layouts
# ---------------------------------------------------------------------------------------------


def t_conv1d(i, w):
    return F.conv1d(i.permute(0, 2, 1), w.permute(2, 1, 0), stride=2, padding=2, dilation=2).permute(0, 2, 1)


def t_conv2d_grouped(i, k):
    out = F.conv2d(i.permute(0, 3, 1, 2), k.permute(3, 2, 0, 1), stride=(2, 1), padding=1, dilation=(1, 2), groups=2)
    return out.permute(0, 2, 3, 1)


def t_conv3d(i, k):
    return F.conv3d(i.permute(0, 4, 1, 2, 3), k.permute(4, 3, 0, 1, 2), padding=1).permute(0, 2, 3, 4, 1)


def t_conv_t2d(i, k):
    return F.conv_transpose2d(i.permute(0, 3, 1, 2), k, stride=2, padding=1).permute(0, 2, 3, 1)


def t_maxpool2d(x):
    # ceil_mode=True reproduces the partial last window for these sizes (8 -> 4, 6 -> 3).
    return F.max_pool2d(x.permute(0, 3, 1, 2), 3, stride=2, ceil_mode=True).permute(0, 2, 3, 1)


def t_avgpool2d(x):
    return F.avg_pool2d(x.permute(0, 3, 1, 2), 3, stride=2, padding=1, count_include_pad=False).permute(0, 2, 3, 1)


# ---------------------------------------------------------------------------------------------
# Contractions
# ---------------------------------------------------------------------------------------------


def test_grad_matmul(device):
    r = rng(1)
    check_vjp(C.MATMUL, [randn(r, 4, 5), randn(r, 5, 3)], device, lambda a, b: a @ b)


def test_grad_batched_matmul(device):
    r = rng(2)
    check_vjp(C.BATCHED_MATMUL, [randn(r, 2, 3, 4), randn(r, 2, 4, 2)], device, torch.matmul)


def test_grad_conv1d(device):
    r = rng(3)
    check_vjp(C.CONV1D, [randn(r, 2, 9, 3), randn(r, 3, 3, 4)], device, t_conv1d)


def test_grad_conv2d_grouped(device):
    r = rng(4)
    check_vjp(C.CONV2D_GROUPED, [randn(r, 1, 7, 6, 6), randn(r, 3, 3, 3, 4)], device, t_conv2d_grouped, fd_coords=8)


def test_grad_conv3d(device):
    r = rng(5)
    check_vjp(C.CONV3D, [randn(r, 1, 3, 3, 3, 2), randn(r, 3, 3, 3, 2, 2)], device, t_conv3d, fd_coords=6)


@pytest.mark.parametrize("src", [C.CONV_T2D_AFFINE, C.CONV_T2D_DIV], ids=["affine_output", "exact_division"])
def test_grad_conv_transpose2d(device, src):
    r = rng(6)
    check_vjp(src, [randn(r, 1, 4, 3, 3), randn(r, 3, 2, 3, 3)], device, t_conv_t2d, fd_coords=8)


def test_grad_maxpool2d_partial_windows(device):
    r = rng(7)
    x = rand_distinct(r, 1, 8, 6, 2)
    check_vjp(C.MAXPOOL2D, [x], device, t_maxpool2d, fd_coords=16)


def test_grad_maxpool1d_spec_example(device):
    r = rng(8)
    x = rand_distinct(r, 7)
    check_vjp(
        C.MAXPOOL1D, [x], device,
        lambda t: F.max_pool1d(t[None, None], 2, stride=2, ceil_mode=True)[0, 0],
    )


def test_grad_max_and_min_ties_route_to_the_first(device):
    # decisions: max and min route each cell's cotangent to the first position (in the window's
    # row-major order) equal to the result, as PyTorch's max(dim) and max pooling; every tied
    # position receiving it would count the cotangent once per tie.
    a = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0], [5.0, 5.0, 5.0], [0.0, 0.0, 4.0]])
    d = np.array([1.0, 2.0, 3.0, 4.0])
    for agg, torch_fn in ((">", torch.max), ("<", torch.min)):
        fn = tile_function(f"function (A[M, K]) -> (O) {{ O[i : M] = {agg}(A[i, k]); }}")
        t = torch.tensor(a, requires_grad=True)
        torch_fn(t, dim=1).values.backward(torch.tensor(d))
        np.testing.assert_array_equal(fn.vjp([a], d, device=device)[0], t.grad.numpy(), agg)


def test_grad_max_of_products_ties_route_to_the_first(device):
    # A max over a combination is differentiated through its materialised terms: the same rule.
    fn = tile_function("function (A[M, K], B[K]) -> (O) { O[i : M] = >(A[i, k] * B[k]); }")
    a, b = np.array([[1.0, 3.0, 1.5], [2.0, 0.0, 1.0]]), np.array([2.0, 1.0, 2.0])  # 3 == 3
    d = np.array([1.0, 2.0])
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (ta * tb).max(1).values.backward(torch.tensor(d))
    ga, gb = fn.vjp([a, b], d, device=device)
    np.testing.assert_array_equal(ga, ta.grad.numpy())
    np.testing.assert_array_equal(gb, tb.grad.numpy())


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_grad_maxpool_with_ties_matches_torch(device, layout):
    """Small integers tie in most 3x3 windows (overlapping, stride 2, padded), and a window of
    equal values too: each window's cotangent reaches exactly one tap, PyTorch's."""
    x = rng(9).integers(0, 3, (2, 3, 7, 9)).astype(np.float64)
    x[1, 2, :3, :3] = 1.0
    tx = torch.tensor(x, requires_grad=True)
    out = F.max_pool2d(tx, 3, stride=2, padding=1)
    d = rng(10).standard_normal(tuple(out.shape))
    out.backward(torch.tensor(d))
    if layout == "NCHW":
        src = """
        function (I[N, C, H, W]) -> (O) {
            O[n, c, y, x : N, C, (H - 1)/2 + 1, (W - 1)/2 + 1] =
                >(I[n, c, 2*y + i - 1, 2*x + j - 1]), i < 3, j < 3;
        }"""
        got = tile_function(src).vjp([x], d, device=device)[0]
    else:
        src = """
        function (I[N, H, W, C]) -> (O) {
            O[n, y, x, c : N, (H - 1)/2 + 1, (W - 1)/2 + 1, C] =
                >(I[n, 2*y + i - 1, 2*x + j - 1, c]), i < 3, j < 3;
        }"""
        got = tile_function(src).vjp([x.transpose(0, 2, 3, 1)], d.transpose(0, 2, 3, 1),
                                     device=device)[0].transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_grad_avgpool2d(device):
    r = rng(9)
    check_vjp(C.AVGPOOL2D, [randn(r, 1, 7, 5, 2)], device, t_avgpool2d, fd_coords=12)


def test_grad_softmax(device):
    r = rng(10)
    check_vjp(C.SOFTMAX, [randn(r, 3, 5)], device, lambda x: torch.softmax(x, dim=1))


def test_grad_log_softmax(device):
    r = rng(11)
    check_vjp(C.LOG_SOFTMAX, [randn(r, 3, 5)], device, lambda x: torch.log_softmax(x, dim=1))


def test_grad_cumsum(device):
    r = rng(12)
    check_vjp(C.CUMSUM, [randn(r, 7)], device, lambda x: torch.cumsum(x, 0))


def test_grad_cumsum_2d(device):
    r = rng(13)
    check_vjp(C.CUMSUM_2D, [randn(r, 2, 5)], device, lambda x: torch.cumsum(x, 1))


def test_grad_product_aggregation(device):
    r = rng(14)
    a = r.uniform(0.5, 1.5, size=(3, 4)) * np.where(r.random((3, 4)) < 0.5, -1, 1)
    check_vjp(C.PROD_AXIS, [a], device, lambda t: torch.prod(t, dim=1))


def test_grad_product_aggregation_at_zeros(device):
    """Rows with no zero, one zero (its gradient is the product of the others) and two zeros
    (all 0), as PyTorch's ``prod`` backward; ``dO * O / A`` gave NaN and inf there."""
    r = rng(16)
    a = r.uniform(0.5, 1.5, size=(4, 5)) * np.where(r.random((4, 5)) < 0.5, -1, 1)
    a[1, 2] = 0.0
    a[2, 0] = a[2, 3] = 0.0
    a[3, 4] = -0.0
    check_vjp(C.PROD_AXIS, [a], device, lambda t: torch.prod(t, dim=1))


def test_grad_min_aggregation(device):
    r = rng(15)
    check_vjp(C.MIN_AXIS0, [rand_distinct(r, 4, 3)], device, lambda t: torch.amin(t, dim=0))


def test_grad_sum_default(device):
    r = rng(16)
    check_vjp(C.SUM_DEFAULT, [randn(r, 3, 4), randn(r, 3)], device, lambda a, b: b + a.sum(dim=1))


def test_grad_max_default(device):
    r = rng(17)
    vals = rand_distinct(r, 5 * 4 + 5)
    a, b = vals[:20].reshape(5, 4), vals[20:]
    check_vjp(C.MAX_DEFAULT, [a, b], device, lambda a, b: torch.maximum(b, a.amax(dim=1)))


def test_grad_assign_strided(device):
    r = rng(18)

    def tf(a):
        out = torch.zeros(2 * a.shape[0], dtype=a.dtype)
        return out.index_put((torch.arange(a.shape[0]) * 2,), a)

    check_vjp(C.ASSIGN_STRIDED, [randn(r, 4)], device, tf)


def test_grad_assign_default(device):
    r = rng(19)

    def tf(a, b):
        return b.index_put((torch.arange(a.shape[0]) * 2,), a)

    check_vjp(C.ASSIGN_STRIDED_DEFAULT, [randn(r, 3), randn(r, 7)], device, tf)


def test_grad_transpose(device):
    r = rng(20)
    check_vjp(C.TRANSPOSE, [randn(r, 3, 4)], device, lambda a: a.T)


def test_grad_broadcast_assign(device):
    r = rng(21)
    check_vjp(
        C.BROADCAST_ASSIGN, [randn(r, 3), randn(r, 4)], device, lambda a, b: a[:, None].expand(3, 4) + 0 * b.sum()
    )


def test_grad_sum_of_plus(device):
    r = rng(22)
    check_vjp(C.SUM_OF_PLUS, [randn(r, 3, 4), randn(r, 4)], device, lambda a, b: (a + b[None]).sum(1))


def test_grad_outer_plus(device):
    r = rng(23)
    check_vjp(C.OUTER_PLUS, [randn(r, 3), randn(r, 2)], device, lambda a, b: a[:, None] + b[None, :])


def test_grad_conditional_sum_int_inputs_none(device):
    r = rng(24)
    a = r.integers(0, 3, size=(3, 4)).astype(np.int32)
    b = r.integers(0, 3, size=4).astype(np.int32)
    c = randn(r, 3, 4)
    check_vjp(C.SUM_WHERE_EQ, [a, b, c], device, lambda a, b, c: torch.where(a == b[None], c, 0.0).sum(1))


def test_grad_scalar_output(device):
    src = """
    function (A[M, N]) -> (O) {
        O[] = +(A[i, j] * A[i, j]);
    }
    """
    r = rng(25)
    check_vjp(src, [randn(r, 2, 3)], device, lambda a: (a * a).sum())


def test_grad_conv2d_nchw_3x3(device):
    r = rng(26)
    check_vjp(
        C.CONV2D_NCHW_3x3, [randn(r, 1, 2, 5, 5), randn(r, 3, 2, 3, 3)], device,
        lambda i, k: F.conv2d(i, k, padding=1), fd_coords=8,
    )


# ---------------------------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------------------------

TORCH_UNARY = {
    "neg": ("-X", torch.neg, "randn"),
    "exp": ("exp(X)", torch.exp, "randn"),
    "log": ("log(X)", torch.log, "pos"),
    "sqrt": ("sqrt(X)", torch.sqrt, "pos"),
    "rsqrt": ("rsqrt(X)", torch.rsqrt, "pos"),
    "abs": ("abs(X)", torch.abs, "randn"),
    "sign": ("sign(X)", torch.sign, "randn"),
    "floor": ("floor(X)", torch.floor, "randn3"),
    "ceil": ("ceil(X)", torch.ceil, "randn3"),
    "round": ("round(X)", torch.round, "randn3"),
    "sin": ("sin(X)", torch.sin, "randn"),
    "cos": ("cos(X)", torch.cos, "randn"),
    "tan": ("tan(X)", torch.tan, "unit"),
    "tanh": ("tanh(X)", torch.tanh, "randn"),
    "sinh": ("sinh(X)", torch.sinh, "randn"),
    "cosh": ("cosh(X)", torch.cosh, "randn"),
    "asin": ("asin(X)", torch.asin, "unit"),
    "acos": ("acos(X)", torch.acos, "unit"),
    "atan": ("atan(X)", torch.atan, "randn"),
    "erf": ("erf(X)", torch.erf, "randn"),
    "erfc": ("erfc(X)", torch.erfc, "randn"),
    "sigmoid": ("sigmoid(X)", torch.sigmoid, "randn"),
    "relu": ("relu(X)", torch.relu, "randn"),
}


def _make(kind, r, *shape):
    if kind == "pos":
        return r.uniform(0.5, 2.0, size=shape)
    if kind == "unit":
        return r.uniform(-0.9, 0.9, size=shape)
    if kind == "randn3":
        return randn(r, *shape) * 3
    return randn(r, *shape)


@pytest.mark.parametrize("name", sorted(TORCH_UNARY))
def test_grad_unary(device, name):
    expr, tfn, kind = TORCH_UNARY[name]
    r = rng(30)
    x = _make(kind, r, 2, 3)
    check_vjp(f"function (X) -> (O) {{ O = {expr}; }}", [x], device, tfn)


TORCH_BINARY = {
    "add": ("X + Y", torch.add, "randn", "randn"),
    "sub": ("X - Y", torch.sub, "randn", "randn"),
    "mul": ("X * Y", torch.mul, "randn", "randn"),
    "div": ("X / Y", torch.div, "randn", "pos"),
    "pow": ("pow(X, Y)", torch.pow, "pos", "randn"),
    "min": ("min(X, Y)", torch.minimum, "randn", "randn"),
    "max": ("max(X, Y)", torch.maximum, "randn", "randn"),
    "where": ("X > Y ? X * Y : X - Y", lambda x, y: torch.where(x > y, x * y, x - y), "randn", "randn"),
    "literals": ("X * 2.5 - Y / 4.0 + 1.0", lambda x, y: x * 2.5 - y / 4.0 + 1.0, "randn", "randn"),
}


@pytest.mark.parametrize("name", sorted(TORCH_BINARY))
def test_grad_binary(device, name):
    expr, tfn, kx, ky = TORCH_BINARY[name]
    r = rng(31)
    x, y = _make(kx, r, 3, 2), _make(ky, r, 3, 2)
    check_vjp(f"function (X, Y) -> (O) {{ O = {expr}; }}", [x, y], device, tfn)


def test_grad_broadcasting_chain(device):
    r = rng(32)
    check_vjp(
        C.BROADCAST_CHAIN, [randn(r, 4, 1, 3), randn(r, 5, 3), randn(r, 3)], device,
        lambda x, y, z: x * y + z - 2.0,
    )


def test_grad_broadcast_scalar(device):
    r = rng(33)
    check_vjp("function (X, S) -> (O) { O = sin(X) * S; }", [randn(r, 2, 3), np.array(1.7)], device,
              lambda x, s: torch.sin(x) * s)


def test_grad_dim_as_value(device):
    r = rng(34)
    check_vjp(C.DIM_AS_VALUE, [randn(r, 5)], device, lambda x: x / 5)


def test_grad_int_input_is_none(device):
    r = rng(35)
    x = randn(r, 4)
    i = np.array([1, -2, 3, 0], np.int32)
    check_vjp("function (X, I) -> (O) { O = X * I; }", [x, i], device, lambda x, i: x * i)


def test_grad_cast_to_int_stops_gradient(device):
    x = np.array([1.3, -2.7, 0.4, 5.5])
    fn = tile_function("function (X) -> (O) { O = X * as_float(as_int(X, 32), 64); }")
    ct = np.array([1.0, 2.0, -1.0, 0.5])
    g = fn.vjp([x], ct, device=device)[0]
    np.testing.assert_allclose(g, ct * np.trunc(x), rtol=1e-12)


def test_grad_multiple_outputs(device):
    src = """
    function (A, B) -> (P, Q) {
        P = A * B;
        Q = sin(A);
    }
    """
    r = rng(36)
    check_vjp(src, [randn(r, 3), randn(r, 3)], device, lambda a, b: (a * b, torch.sin(a)))


def test_grad_chain_contraction_elementwise(device):
    src = """
    function (A[M, K], B[K, N]) -> (O) {
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
        O = tanh(C) * C;
    }
    """
    r = rng(37)
    check_vjp(src, [randn(r, 3, 4), randn(r, 4, 2)], device, lambda a, b: torch.tanh(a @ b) * (a @ b))


def test_grad_reshape(device):
    r = rng(38)
    check_vjp(C.RESHAPE, [randn(r, 2, 3, 2)], device, lambda x: x.reshape(2, 6))


# ---------------------------------------------------------------------------------------------
# gather / scatter
# ---------------------------------------------------------------------------------------------


def test_grad_gather(device):
    r = rng(40)
    x = randn(r, 5, 3)
    idx = np.array([[0, 4, 2, 2], [1, 3, 0, 4]], np.int32)
    check_vjp(C.GATHER, [x, idx], device, lambda x, i: x[i])


def test_grad_gather_1d_index_select(device):
    r = rng(41)
    x = randn(r, 6, 2)
    idx = np.array([5, 0, 5, 2], np.int64)
    check_vjp(C.GATHER, [x, idx], device, lambda x, i: torch.index_select(x, 0, i))


def test_grad_gather_out_of_range(device):
    r = rng(42)
    x = randn(r, 4, 2)
    idx = np.array([-1, 3, 4, 3, 9], np.int32)
    grads = check_vjp(C.GATHER, [x, idx], device)
    fn = tile_function(C.GATHER)
    ct = rng(7).standard_normal((5, 2))
    g = fn.vjp([x, idx], ct, device=device)[0]
    expected = np.zeros_like(x)
    expected[3] = ct[1] + ct[3]
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=0)
    assert grads[1] is None


def test_grad_scatter(device):
    r = rng(43)
    x = randn(r, 5, 3)
    idx = np.array([1, 3, 1, 0, 1, 3], np.int64)
    u = randn(r, 6, 3)
    check_vjp(
        C.SCATTER, [x, idx, u], device,
        lambda x, i, u: torch.zeros_like(x).index_add(0, i, u) + 0 * x,
        none_ok_zero=(0,),
    )


def test_grad_scatter_out_of_range_updates_get_zero(device):
    x = np.zeros((3, 2))
    idx = np.array([0, 5, -1, 2], np.int32)
    u = rng(44).standard_normal((4, 2))
    fn = tile_function(C.SCATTER)
    ct = rng(45).standard_normal((3, 2))
    grads = fn.vjp([x, idx, u], ct, device=device)
    expected = np.stack([ct[0], np.zeros(2), np.zeros(2), ct[2]])
    np.testing.assert_allclose(grads[2], expected, rtol=1e-12, atol=0)
    assert grads[1] is None


# ---------------------------------------------------------------------------------------------
# Gradient programs are Tile programs
# ---------------------------------------------------------------------------------------------


def _write_indices(text: str) -> list[str]:
    """The output index lists of the contractions in ``text`` (before the ':' of each)."""
    found = []
    for stmt in text.split(";"):
        m = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\s*\[([^\]]*)\]\s*=\s*[-+*<>=]\s*\(", stmt)
        if m:
            found.append(m.group(2).split(":")[0])
    return found


GRAD_SOURCE_CASES = {
    "matmul": (C.MATMUL, lambda r: [randn(r, 3, 4), randn(r, 4, 2)]),
    "maxpool2d": (C.MAXPOOL2D, lambda r: [rand_distinct(r, 1, 8, 6, 2)]),
    "softmax": (C.SOFTMAX, lambda r: [randn(r, 2, 5)]),
    "conv2d_grouped": (C.CONV2D_GROUPED, lambda r: [randn(r, 1, 7, 6, 6), randn(r, 3, 3, 3, 4)]),
    "conv_t2d_div": (C.CONV_T2D_DIV, lambda r: [randn(r, 1, 4, 3, 3), randn(r, 3, 2, 3, 3)]),
    "cumsum": (C.CUMSUM, lambda r: [randn(r, 6)]),
    "gather": (C.GATHER, lambda r: [randn(r, 4, 2), np.array([0, 3, 3], np.int32)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_SOURCE_CASES))
def test_gradient_source_round_trips(name):
    src, make = GRAD_SOURCE_CASES[name]
    fn = tile_function(src)
    text = fn.gradient_source(*make(rng(50)))
    assert isinstance(text, str) and "function" in text
    tile_function(text)  # must parse and check


def test_maxpool_gradient_has_affine_write_index():
    fn = tile_function(C.MAXPOOL2D)
    text = fn.gradient_source(rand_distinct(rng(51), 1, 8, 6, 2))
    writes = _write_indices(text)
    assert writes, f"no contraction in the gradient program:\n{text}"
    affine = [w for w in writes if re.search(r"\d\s*\*\s*[a-z]|[a-z_0-9]\s*[-+]\s*[a-z0-9]", w)]
    assert affine, f"no affine output index (like 2*y + ky) in the max-pool gradient:\n{text}"
    assert any(re.search(r"2\s*\*", w) for w in writes), f"expected a '2*' in a write index:\n{text}"


def test_maxpool1d_gradient_source_mentions_equality_routing():
    fn = tile_function(C.MAXPOOL1D)
    text = fn.gradient_source(rand_distinct(rng(52), 7))
    assert "==" in text and "?" in text, text


def test_grad_small_cnn(device):
    r = rng(60)
    i, k, w = randn(r, 1, 2, 4, 4), randn(r, 3, 2, 3, 3), randn(r, 12, 2)
    check_vjp(C.SMALL_CNN, [i, k, w], device, C.torch_small_cnn, fd_coords=8)


def test_grad_self_outer_product(device):
    src = """
    function (A[N]) -> (O) {
        O[i, j : N, N] = +(A[i] * A[j]);
    }
    """
    r = rng(61)
    check_vjp(src, [randn(r, 4)], device, lambda a: a[:, None] * a[None, :])


def test_grad_through_prng_stops_at_state(device):
    src = "function (X, S) -> (O, U) { U = prng(S, 5); O = X * U; }"
    x = randn(rng(62), 5)
    s = np.array([3, 0], np.uint32)
    fn = tile_function(src)
    o, u = fn(x, s, device=device)
    ct_o = rng(63).standard_normal(5)
    grads = fn.vjp([x, s], (ct_o, np.zeros(5, np.float32)), device=device)
    assert grads[1] is None
    np.testing.assert_allclose(grads[0], ct_o * u.astype(np.float64), rtol=1e-6)


def test_grad_two_stage_affine(device):
    r = rng(64)
    x = randn(r, 7)

    def tf(t):
        p = F.pad(t, (1, 1))
        return torch.stack([p[2 * i : 2 * i + 3].sum() for i in range(4)])

    check_vjp(C.TWO_STAGE, [x], device, tf)


MIXED_MATMUL_BIAS = """
function (X[M, K], W[K, N], B[N]) -> (Z) {
    Y[m, n : M, N] = +(X[m, k] * W[k, n]);
    S = Y + B;
    Z = S * S;
}
"""


def test_gradient_has_its_tensors_type(device):
    """A bfloat16 tensor in a float32 expression gets a bfloat16 gradient, as in PyTorch: the
    intermediate ``Y`` too, so the matmul's gradients are bfloat16 contractions (tensor cores
    on a GPU) rather than float32 ones promoted by a float32 cotangent."""
    r = rng(65)
    x, w = randn(r, 6, 8).astype(BF16), randn(r, 8, 5).astype(BF16)
    b = randn(r, 5).astype(np.float32)
    cotangent = randn(r, 6, 5).astype(np.float32)
    fn = tile_function(MIXED_MATMUL_BIAS)
    grads = fn.vjp([x, w, b], cotangent, device=device)
    assert [g.dtype for g in grads] == [BF16, BF16, np.float32]

    gradient = fn.gradient_function(x, w, b)
    bound = gradient.bind(x, w, b, cotangent)
    contractions = [s for s in bound.program.statements
                    if type(s).__name__ == "Contraction" and len(s.operands) == 2]
    assert len(contractions) == 3  # Y, D_X and D_W
    assert all(bound.dtypes[s.out] == BF16 for s in contractions), gradient.source

    # PyTorch rounds at the same places: Y and its gradient to bfloat16.
    tx, tw = (torch.tensor(a.astype(np.float32)).bfloat16().requires_grad_() for a in (x, w))
    tb = torch.tensor(b, requires_grad=True)
    s = tx @ tw + tb
    (s * s).backward(torch.tensor(cotangent))
    for got, want in zip(grads, (tx.grad, tw.grad, tb.grad)):
        assert_close(got, want.float().numpy(), scale=2)


def test_grad_stop_gradient_is_detach(device):
    """``stop_gradient(X)`` is X forward and blocks its gradient, as torch's ``detach()``:
    in elementwise statements that feed a contraction; an input reached only through it
    gets none."""
    src = """
    function (A[M, N], B[N]) -> (O) {
        T = stop_gradient(A) * A + stop_gradient(B);
        U = T * stop_gradient(T);
        O[i : M] = +(U[i, j]);
    }
    """
    r = rng(26)
    a, b = randn(r, 3, 4), randn(r, 4)
    fn = tile_function(src)

    def torch_fn(ta, tb):
        t = ta.detach() * ta + tb.detach()
        return (t * t.detach()).sum(1)

    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    expected = torch_fn(ta, tb)
    np.testing.assert_allclose(np.asarray(fn(a, b, device=device)), expected.detach().numpy(),
                               rtol=1e-12)
    cotangent = randn(r, 3)
    expected.backward(torch.tensor(cotangent))
    grad_a, grad_b = fn.vjp([a, b], cotangent, device=device)
    np.testing.assert_allclose(grad_a, ta.grad.numpy(), rtol=1e-12)
    assert grad_b is None or not np.any(grad_b)
