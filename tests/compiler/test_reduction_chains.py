"""Reduction chains (batch norm, softmax, cross-entropy, forward and gradient) in few kernels.

Fusion recomputes cheap elementwise tensors in their readers and puts plain reductions of one
domain in one kernel (:mod:`gingham.compiler.fusion`). Here: that the chains fuse (kernel
counts; no intermediate of the activation's shape is stored) and that the values stay those
of PyTorch CPU on every device the run discovers (odd sizes, half-precision inputs, and sizes
that take the split reduction on work-group devices).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham.nn.functional as F
from gingham.bench.ops import Traced
from gingham.compiler.fusion import plan
from gingham.compiler.hoist import hoist_broadcast
from gingham.compiler.linearity import split_sums
from gingham.devices import get_device, list_devices
from gingham.runtime import executable
from gingham.tile import dtypes as dt

RNG = np.random.default_rng(11)
WORK_GROUP_DEVICES = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]


def batch_norm(x, w, b):
    return F.batch_norm(x, None, None, w, b, training=True)[0]


def torch_batch_norm(x, w, b):
    return TF.batch_norm(x, None, None, w, b, training=True)


def batch_norm_nhwc(x, w, b):
    """Training batch norm of channels-last data, written with the frontend's ops as
    nn.functional writes the NCHW one (the statistics reduce the leading axes)."""
    mean = x.mean((0, 1, 2), keepdims=True)
    centred = x - mean
    var = (centred ** 2.0).mean((0, 1, 2), keepdims=True)
    return centred * (var + 1e-5).rsqrt() * w + b


def torch_batch_norm_nhwc(x, w, b):
    return torch_batch_norm(x.permute(0, 3, 1, 2), w, b).permute(0, 2, 3, 1)


def batch_norm_arrays(shape, dtype="float32", channels_last=False):
    channels = shape[-1] if channels_last else shape[1]
    x = (RNG.standard_normal(shape) * 2 + 0.5).astype(dt.DTYPES[dtype])
    w = (1 + 0.1 * RNG.standard_normal(channels)).astype(np.float32)
    b = (0.1 * RNG.standard_normal(channels)).astype(np.float32)
    return [x, w, b]


def labels_for(logits):
    shape = (logits.shape[0],) + logits.shape[2:]
    return RNG.integers(0, logits.shape[1], shape).astype(np.int64)


def run_traced(fn, arrays, wrt, device, cotangent):
    """``fn``'s output and its gradients (for inputs ``wrt``) with ``cotangent``, on ``device``."""
    traced = Traced.of(fn, arrays, device)
    inputs = traced.inputs(arrays)
    output = traced.function(*inputs, device=device)
    gradient, names = traced.gradient(arrays, wrt)
    results = gradient(*inputs, cotangent, device=device)
    results = results if isinstance(results, tuple) else (results,)
    by_name = dict(zip(gradient.program.outputs, results))
    return output, [by_name[name] for name in names]


def run_torch(fn, arrays, wrt, cotangent):
    """The same in PyTorch, in float32 (half inputs widened exactly)."""
    tensors = [torch.tensor(np.asarray(a, np.float32) if dt.is_float(a.dtype) else a,
                            requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*tensors)
    out.backward(torch.tensor(np.asarray(cotangent, np.float32)))
    return out.detach().numpy(), [tensors[i].grad.numpy() for i in wrt]


def assert_close(got, expected, dtype, what):
    got = np.asarray(got, np.float64)
    scale = max(1.0, float(np.abs(expected).max()))
    # float32: sums of up to ~10^4 terms; half types: one rounding of the output (8 or 11 bits).
    tol = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * scale, err_msg=what)


# -- the chains fuse -----------------------------------------------------------------------------


def plan_of(fn, arrays, wrt, backward):
    traced = Traced.of(fn, arrays, "reference")
    inputs = traced.inputs(arrays)
    bound = traced.function.bind(*inputs)
    if backward:
        gradient, _ = traced.gradient(arrays, wrt)
        out = bound.shapes[bound.program.outputs[0]]
        bound = gradient.bind(*inputs, np.ones(out, bound.dtypes[bound.program.outputs[0]]))
    bound = split_sums(hoist_broadcast(bound))
    return bound, plan(bound)


@pytest.mark.parametrize("case, kernels", [
    ("batch_norm.forward", 3),   # sum(x); sum((x - mean)^2); the normalisation
    # + sum(dy), sum(dy * xhat), sum(dy * ...), sum(x - mean) in one, with sum(dx') from
    # them in its epilogue (linearity.split_sums); dx
    ("batch_norm.backward", 4),
    ("batch_norm_nhwc.forward", 3),
    ("batch_norm_nhwc.backward", 4),
    ("softmax.forward", 3),     # max; sum(exp(x - max)), exp stored from its loop; divide
    # + sum(dy * e) and dx; the shift (the max rounded down) has no gradient
    # (nn.functional._softmax_shift)
    ("softmax.backward", 4),
    # max; sum(exp(x - max)); the per-sample log-sum-exp; the pick of x[n, t[n]] (the class
    # index computed in its loop, not stored) with the loss; the mean
    ("cross_entropy.forward", 5),
    # + the max, the sum with exp stored, its log, the mean's gradient, the per-sample
    # gradients, then dx = e / s * dl - (the pick's gradient) in one pass
    ("cross_entropy.backward", 6),
])
def test_chains_fuse_and_store_no_intermediate_of_the_big_shape(case, kernels):
    name, part = case.split(".")
    shape = {"batch_norm": (4, 16, 8, 8), "batch_norm_nhwc": (4, 8, 8, 16), "softmax": (8, 64),
             "cross_entropy": (8, 10)}[name]
    if name == "batch_norm":
        fn, arrays, wrt = batch_norm, batch_norm_arrays(shape), (0, 1, 2)
    elif name == "batch_norm_nhwc":
        fn, arrays, wrt = batch_norm_nhwc, batch_norm_arrays(shape, channels_last=True), (0, 1, 2)
    elif name == "softmax":
        fn, arrays, wrt = (lambda t: F.softmax(t, -1)), [RNG.standard_normal(shape)
                                                         .astype(np.float32)], (0,)
    else:
        logits = RNG.standard_normal(shape).astype(np.float32)
        fn, arrays, wrt = F.cross_entropy, [logits, labels_for(logits)], (0,)
    bound, kernel_plan = plan_of(fn, arrays, wrt, part == "backward")
    assert len(kernel_plan.kernels) == kernels
    stored_big = {n for k in kernel_plan.kernels for n in k.stores
                  if bound.shapes[n] == shape} - set(bound.program.outputs)
    # softmax and cross-entropy's gradient keep exp(x - max) in memory: recomputing exp
    # costs more than a pass on a CPU. Cross-entropy stores no log-probabilities, and its
    # class index is computed where it is read (fusion._coordinates).
    allowed = {"softmax": 1, "cross_entropy": 1 if part == "backward" else 0}.get(name, 0)
    assert len(stored_big) <= allowed, stored_big


def test_batch_norm_backward_reductions_share_one_pass():
    bound, kernel_plan = plan_of(batch_norm, batch_norm_arrays((4, 16, 8, 8)), (0, 1, 2), True)
    shared = [k for k in kernel_plan.kernels if k.siblings]
    # sum(dy * ...), sum(dy), sum(dy * xhat) and sum(x - mean), which with sum(dy) gives
    # sum(dx') (linearity.split_sums) in the same kernel's epilogue
    assert len(shared) == 1 and len(shared[0].siblings) == 3
    # Its operands are computed from dy and x in the loop, not read from stored products.
    assert {e.out for e in shared[0].prologue}
    def root(name):
        while name in kernel_plan.aliases:
            name = kernel_plan.aliases[name]
        return name

    big_reads = {root(n) for n in shared[0].reads() if bound.shapes[n] == (4, 16, 8, 8)}
    assert big_reads == {i.name for i in bound.program.inputs if i.name in big_reads}
    assert len(big_reads) == 2  # x and dy


# -- values against PyTorch ------------------------------------------------------------------------


@pytest.mark.parametrize("shape, dtype", [
    ((3, 5, 7, 9), "float32"),    # odd sizes
    ((8, 4, 16, 16), "float32"),  # 2048 values per channel: the split reduction on work groups
    ((3, 5, 7, 9), "bfloat16"),
    ((2, 3, 5, 5), "float16"),
])
def test_batch_norm_training_matches_torch(device, shape, dtype):
    arrays = batch_norm_arrays(shape, dtype)
    cotangent = RNG.standard_normal(shape).astype(dt.DTYPES[dtype])
    out, grads = run_traced(batch_norm, arrays, (0, 1, 2), device, cotangent)
    expected, expected_grads = run_torch(torch_batch_norm, arrays, (0, 1, 2), cotangent)
    assert out.dtype == arrays[0].dtype and grads[0].dtype == arrays[0].dtype
    assert_close(out, expected, dtype, "y")
    for name, got, want in zip(("dx", "dweight", "dbias"), grads, expected_grads):
        # dweight and dbias are float32 sums of the cotangent times float32 values
        assert_close(got, want, dtype if name == "dx" else "float32" if dtype == "float32"
                     else "float16", name)


def assert_float32_batch_norm_matches_torch(device, shape, channels_last: bool) -> None:
    """Training batch norm forward and backward (dx, dweight, dbias) of float32 ``shape`` data
    on ``device`` against PyTorch CPU, NCHW or channels-last."""
    ours, theirs = ((batch_norm_nhwc, torch_batch_norm_nhwc) if channels_last
                    else (batch_norm, torch_batch_norm))
    arrays = batch_norm_arrays(shape, channels_last=channels_last)
    cotangent = RNG.standard_normal(shape).astype(np.float32)
    out, grads = run_traced(ours, arrays, (0, 1, 2), device, cotangent)
    expected, expected_grads = run_torch(theirs, arrays, (0, 1, 2), cotangent)
    assert_close(out, expected, "float32", "y")
    for name, got, want in zip(("dx", "dweight", "dbias"), grads, expected_grads):
        assert_close(got, want, "float32", name)


@pytest.mark.parametrize("shape", [(3, 7, 5, 6), (8, 16, 16, 4)])
def test_channels_last_batch_norm_matches_torch(device, shape):
    assert_float32_batch_norm_matches_torch(device, shape, channels_last=True)


@pytest.mark.parametrize("shape", [(5, 37), (2, 5, 3, 3)])
def test_softmax_and_cross_entropy_match_torch(device, shape):
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    cotangent = RNG.standard_normal(shape).astype(np.float32)
    for ours, theirs in ((lambda t: F.softmax(t, 1), lambda t: TF.softmax(t, 1)),
                         (lambda t: F.log_softmax(t, 1), lambda t: TF.log_softmax(t, 1))):
        out, (dx,) = run_traced(ours, [x], (0,), device, cotangent)
        expected, (expected_dx,) = run_torch(theirs, [x], (0,), cotangent)
        assert_close(out, expected, "float32", "softmax")
        assert_close(dx, expected_dx, "float32", "softmax dx")
    labels = labels_for(x)
    loss_cotangent = np.array(1.7, np.float32)
    out, (dx,) = run_traced(F.cross_entropy, [x, labels], (0,), device, loss_cotangent)
    expected, (expected_dx,) = run_torch(TF.cross_entropy, [x, labels], (0,), loss_cotangent)
    assert_close(out, expected, "float32", "cross_entropy")
    assert_close(dx, expected_dx, "float32", "cross_entropy dx")


@pytest.mark.parametrize("device_id", WORK_GROUP_DEVICES)
def test_split_reduction_computes_the_siblings(device_id):
    """On a work-group device batch norm's gradient sums are one split reduction with four
    results (each with its own partials and tree)."""
    arrays = batch_norm_arrays((8, 4, 16, 16))
    traced = Traced.of(batch_norm, arrays, device_id)
    inputs = traced.inputs(arrays)
    gradient, _ = traced.gradient(arrays, (0, 1, 2))
    cotangent = RNG.standard_normal((8, 4, 16, 16)).astype(np.float32)
    exe = executable(gradient.bind(*inputs, cotangent), get_device(device_id))
    schedules = [launch.schedule for launch in exe.launches]
    assert any("split reduction" in s and "4 reductions" in s for s in schedules), schedules


def test_hoisting_reuses_an_expression_it_hoisted_before(device):
    """Batch norm's gradient needs rsqrt(var + eps) in several statements: one hoisted
    tensor, so the reductions that read it need not wait for one another."""
    from gingham import tile

    fn = tile.function("""
    function (X[N, C], S[C]) -> (A, B) {
        A = X * rsqrt(S + 1.0);
        B = X * 2.0 - rsqrt(S + 1.0);
    }""")
    x = RNG.standard_normal((64, 5)).astype(np.float32)
    s = np.abs(RNG.standard_normal(5)).astype(np.float32)
    bound = fn.bind(x, s)
    hoisted = hoist_broadcast(bound)
    added = len(hoisted.program.statements) - len(bound.program.statements)
    assert added == 1
    a, b = fn(x, s, device=device)
    r = 1 / np.sqrt(s.astype(np.float64) + 1)
    np.testing.assert_allclose(a, x * r, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, x * 2 - r, rtol=1e-6, atol=1e-6)


def test_update_of_a_reshaped_reduction_joins_its_kernel(device):
    """An optimizer's update of a [C] weight from its [C, 1, 1] gradient sum, and a running
    statistic of it: the same cells up to axes of length 1, computed in the reduction's
    kernel (read through the reshape in registers, written at the same flat index)."""
    from gingham import tile

    fn = tile.function("""
    function (X[N, C, H, W], P[C], M[C]) -> (S, U, V) {
        S[c, 0, 0 : C, 1, 1] = +(X[n, c, h, w]);
        G = reshape(S, C);
        U = P - G * 0.1;
        V = M * 0.9 + G / 3.0;
    }""")
    x = RNG.standard_normal((3, 7, 5, 4)).astype(np.float32)
    p, m = RNG.standard_normal(7).astype(np.float32), RNG.standard_normal(7).astype(np.float32)
    bound = hoist_broadcast(fn.bind(x, p, m))
    kernels = plan(bound).kernels
    assert len(kernels) == 1 and {"U", "V"} <= kernels[0].stores
    s, u, v = fn(x, p, m, device=device)
    g = x.astype(np.float64).sum((0, 2, 3))
    np.testing.assert_allclose(s.reshape(7), g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(u, p - g * 0.1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(v, m * 0.9 + g / 3.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 6, 32, 32), (3, 5, 20, 20), (2, 3, 7, 9)])
def test_per_channel_operands_load_once_per_chunk_on_the_cpu(device, shape):
    """The C elementwise schedule takes chunks inside the runs over which broadcast operands
    keep one value (H * W cells for [1, C, 1, 1], C * H * W for [N, 1, 1, 1]) and loads them
    once per chunk; runs shorter than 256 cells keep the per-cell loads. Same values."""
    from gingham import tile
    from gingham.compiler.lower import MIN_RUN_CHUNK

    fn = tile.function("""
    function (X[N, C, H, W], M[1, C, 1, 1], S[N, 1, 1, 1], R[1, 1, 1, W]) -> (Y) {
        Y = (X - M) * S + R;
    }""")
    n, c, h, w = shape
    x = RNG.standard_normal(shape).astype(np.float32)
    m = RNG.standard_normal((1, c, 1, 1)).astype(np.float32)
    s = RNG.standard_normal((n, 1, 1, 1)).astype(np.float32)
    r = RNG.standard_normal((1, 1, 1, w)).astype(np.float32)
    np.testing.assert_allclose(fn(x, m, s, r, device=device), (x - m) * s + r,
                               rtol=1e-6, atol=1e-6)
    if device == "cpu":
        (launch,) = executable(fn.bind(x, m, s, r), get_device("cpu")).launches
        hoisted = launch.schedule.split("hoisted scalars: ")[1]
        if h * w >= MIN_RUN_CHUNK:
            assert f"chunks of {h * w}" in launch.schedule and "M" in hoisted and "S" in hoisted
            assert "R" not in hoisted  # varies along W: read per cell
        else:
            assert hoisted == "none"


@pytest.mark.parametrize("slice_first", [True, False])
def test_a_slice_is_no_sibling_of_a_reduction(device, slice_first):
    """``S[i, j : M, 1] = +(A[i, j])`` reads column 0 of A (its output axis of length 1
    indexes A's longer axis): a slice, not a reduction over A's domain, so it must not share
    ``R``'s loop over A's cells (it once did: R then summed one column, or S all of them; a
    concatenation's gradient beside an outer product's lost a term that way)."""
    from gingham import tile

    statements = ["S[i, j : M, 1] = +(A[i, j]);", "R[i : M] = +(B[i, k]);"]
    if not slice_first:
        statements.reverse()
    program = tile.function("function (A[M, N], B[M, N]) -> (S, R) {\n"
                            + "\n".join(statements) + "\n}")
    a = RNG.standard_normal((5, 3)).astype(np.float32)
    b = RNG.standard_normal((5, 3)).astype(np.float32)
    s, r = program(a, b, device=device)
    np.testing.assert_allclose(s, a[:, :1], rtol=1e-6)
    np.testing.assert_allclose(r, b.sum(1), rtol=1e-5, atol=1e-6)
