"""PyTorch's namespace in gingham: every public ``torch.*`` function and ``torch.Tensor`` method
is either present in gingham or classified in one table below with the reason it is absent, so
a torch release that adds names fails :func:`test_every_torch_name_is_present_or_classified`
until someone classifies them. Names ending in ``_`` (in-place) are left to the in-place work.

The added functions and methods are checked against torch (CPU) on every device by one harness:
each case is ``run(lib, **inputs)`` called with ``lib`` = gingham and = torch, its outputs one
compiled program and their weighted sum's gradient another (see ``compare``).
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
import torch

import gingham
import gingham.nn.functional as F
from gingham.frontend.tensor import realize
from gingham.tile import dtypes as dt
from test_tensor_methods import _named  # noqa: E402  (tests/frontend: the tuple naming)

# -- the coverage table ------------------------------------------------------------------------------

#: Absent on purpose, by group: regular expressions (whole names) with the reason.
SKIPPED: dict[str, list[str]] = {
    "complex numbers: gingham has no complex dtypes": [
        "angle", "complex", "conj", "conj_physical", "imag", "real", "is_conj", "resolve_conj",
        "is_neg", "resolve_neg", "polar", "view_as_complex.*", "view_as_real.*", "cdouble",
        "cfloat", "chalf"],
    "sparse layouts": [
        "sparse_.*", ".*_indices_copy", "ccol_indices", "col_indices", "crow_indices",
        "row_indices", "indices", "values", "values_copy", "indices_copy", "coalesce",
        "is_coalesced", "dense_dim", "sparse_dim", "sparse_mask", "to_dense", "to_sparse.*",
        "smm", "dsmm", "hsmm", "hspmm", "spmm", "saddmm", "sspaddmm", "is_sparse",
        "is_sparse_csr", "layout"],
    "quantized tensors": [
        "quantize_.*", "q_.*", "dequantize", "int_repr", "fake_quantize.*",
        "fused_moving_avg_obs_fake_quant", "quantized_.*", "choose_qparams_optimized",
        "empty_quantized", "qscheme", "is_quantized"],
    "storage, strides and aliasing views: gingham's tensors have no strides or storage "
    "(stride() answers only where torch's tensor is contiguous)": [
        "as_strided.*", "(?!index_).*_copy", "storage", "storage_type", "untyped_storage",
        "data_ptr", "const_data_ptr", "is_set_to", "is_shared", "pin_memory", "resize",
        "resize_as", "empty_strided", "empty_permuted", "dim_order",
        "frombuffer", "from_file", "from_dlpack", "to_dlpack", "unsafe_.*", "slice_inverse",
        "nonzero_static", "new_empty_strided", "is_storage", "is_nested", "to_padded_tensor",
        "module_load", "hash_tensor"],
    "named tensors (torch 2.11 and earlier have the API)": [
        "name", "names", "rename", "refine_names", "align_as", "align_to", "align_tensors",
        "has_names"],
    "distributed, multiprocessing and threads (gingham has no inter-op thread pool)": [
        "is_distributed", "fork", "wait", "prepare_multiprocessing_environment",
        "get_num_interop_threads", "set_num_interop_threads", "init_num_threads"],
    "other backends' kernels and device hooks (gingham's devices are its own)": [
        "cudnn_.*", "miopen_.*", "mkldnn_.*", "fbgemm_.*", "is_vulkan_available", "ipu", "xpu",
        "mtia", "is_ipu", "is_maia", "is_meta", "is_mkldnn", "is_mps",
        "is_mtia", "is_vulkan", "is_xla", "is_xpu", "to_mkldnn", "record_stream",
        "get_device_module", "profiler_.*"],
    "torch's global configuration with no gingham effect: autocast switches outside a block "
    "(gingham.autocast is the block), printing (a tensor's repr shows no values), debug and "
    "anomaly modes, legacy tensor types": [
        "set_autocast_.*", "get_autocast_(cpu|gpu|ipu|xla)_dtype", "is_autocast_(?!enabled).*",
        "autocast_.*_nesting", "clear_autocast_cache", "set_anomaly_enabled",
        "set_default_tensor_type", "set_deterministic_debug_mode", "get_deterministic_debug_mode",
        "set_flush_denormal", "set_printoptions", "set_warn_always", "is_warn_always_enabled",
        "is_anomaly_.*", "compiled_with_cxx11_abi", "get_file_path", "classproperty",
        "typename", "thread_safe_generator", "read_vitals", "vitals_enabled", "set_vital"],
    "TorchScript, FX and torch.compile machinery": [
        "cond", "while_loop", "vmap", "import_ir_module.*", "parse_ir",
        "parse_schema", "parse_type_comment", "merge_type_from_type_comment", "unify_type_list",
        "sym_.*", "segment_reduce"],
    "autograd graph internals and hooks; legacy constructors": [
        "grad_dtype", "output_nr", "volatile", "reinforce", "as_subclass", "index"],
    "ATen-level spellings of nn ops (positional cudnn/train flags, int reductions): "
    "gingham.nn.functional has them with the public signature": [
        "affine_grid_generator", "batch_norm_.*", "native_.*", "constant_pad_nd", "conv_tbc",
        "convolution", "cosine_embedding_loss", "ctc_loss", "feature_dropout",
        "embedding_bag", "grid_sampler.*", "gru", "gru_cell", "lstm", "lstm_cell",
        "rnn_relu", "rnn_relu_cell", "rnn_tanh", "rnn_tanh_cell", "hinge_embedding_loss",
        "margin_ranking_loss", "max_pool1d_with_indices", "adaptive_max_pool1d",
        "poisson_nll_loss", "triplet_margin_loss", "norm_except_dim"],
}

#: Not implemented yet though expressible: the gaps of this namespace, each with what it needs.
NOT_YET: dict[str, list[str]] = {
    "linear algebra beyond gingham.linalg (general eig is complex-valued; randomised and "
    "iterative solvers; ormqr)": [
        "eig", "ormqr", "svd_lowrank", "pca_lowrank", "lobpcg"],
    "torch's stubs of functions removed in favour of torch.linalg (they only raise)": [
        "lstsq", "matrix_rank", "solve", "symeig"],
}



def _classified(name: str) -> bool:
    patterns = [p for table in (SKIPPED, NOT_YET) for group in table.values() for p in group]
    return any(re.fullmatch(p, name) for p in patterns)


def _public(name: str) -> bool:
    return not name.startswith("_") and not name.endswith("_") and name != "__setitem__"


def _torch_functions() -> list[str]:
    return sorted(n for n in dir(torch) if _public(n) and callable(getattr(torch, n))
                  and not inspect.isclass(getattr(torch, n))
                  and not inspect.ismodule(getattr(torch, n)))


def test_every_torch_name_is_present_or_classified():
    sample = gingham.tensor(np.ones((2, 2), np.float32), device="reference")
    missing = [f"torch.{n}" for n in _torch_functions() if not hasattr(gingham, n)
               and not _classified(n)]
    missing += [f"torch.Tensor.{n}" for n in dir(torch.Tensor) if _public(n)
                and n not in dir(sample) and not _classified(n)]
    assert not missing, f"implement or classify in a table: {missing}"


def test_skip_tables_name_only_what_is_absent():
    """A classified name that gingham has since gained is listed by mistake."""
    sample = gingham.tensor(np.ones((2, 2), np.float32), device="reference")
    present = {n for n in _torch_functions() if hasattr(gingham, n)}
    present |= {n for n in dir(torch.Tensor) if _public(n) and n in dir(sample)}
    wrongly = sorted(n for n in present if _classified(n))
    assert not wrongly, f"present but classified as absent: {wrongly}"


def test_nn_functional_aliases_are_the_same_functions():
    for name in ("conv1d", "conv2d", "max_pool2d", "cosine_similarity", "pixel_shuffle",
                 "selu", "threshold", "rms_norm", "bilinear"):
        assert getattr(gingham, name) is getattr(F, name), name
    # torch.manual_seed seeds layer initialisation too: gingham.nn's seeds both generators
    assert gingham.manual_seed is gingham.nn.manual_seed


# -- the harness -----------------------------------------------------------------------------------

TOLERANCE = dict(rtol=2e-5, atol=2e-5)


def _dtype_name(value) -> str:
    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    return dt.dtype_name(value.dtype)


def compare(device, arrays: dict, run, tol=TOLERANCE):
    """``run(gingham, **inputs)`` against ``run(torch, **inputs)`` (float inputs require
    gradients): shapes, dtypes and values of every output from one program, then the gradients
    of a random-weighted sum of the float outputs from another."""
    def leaf(lib, v):
        make = (lambda a: gingham.tensor(a, device=device)) if lib is gingham else torch.tensor
        t = make(v)
        return t.requires_grad_() if v.dtype.kind == "f" else t

    g_in = {k: leaf(gingham, v) for k, v in arrays.items()}
    t_in = {k: leaf(torch, v) for k, v in arrays.items()}
    g_out, t_out = _named(run(gingham, **g_in)), _named(run(torch, **t_in))
    assert g_out.keys() == t_out.keys()
    realize([v for v in g_out.values() if isinstance(v, gingham.Tensor)])
    for name, expected in t_out.items():
        value = g_out[name]
        if not isinstance(expected, torch.Tensor):  # a Python bool or number
            assert value == expected, name
            continue
        assert value.shape == tuple(expected.shape), name
        assert _dtype_name(value) == _dtype_name(expected), name
        np.testing.assert_allclose(value.numpy(), expected.detach().numpy(), err_msg=name,
                                   **tol)
    rng = np.random.default_rng(1)
    weights = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
               for k, v in t_out.items()
               if isinstance(v, torch.Tensor) and v.dtype.is_floating_point and v.requires_grad}
    if not weights:
        return
    g_loss = sum((g_out[k].float() * gingham.tensor(w, device=device)).sum()
                 for k, w in weights.items())
    t_loss = sum((t_out[k].float() * torch.tensor(w)).sum() for k, w in weights.items())
    g_loss.backward()
    t_loss.backward()
    realize([t.grad for t in g_in.values() if getattr(t, "grad", None) is not None])
    for name, leaf_ in t_in.items():
        if not leaf_.requires_grad:
            continue
        expected = np.zeros_like(arrays[name]) if leaf_.grad is None else leaf_.grad.numpy()
        got = g_in[name].grad
        got = np.zeros_like(arrays[name]) if got is None else got.numpy()
        np.testing.assert_allclose(got, expected, err_msg=f"d/d{name}", **tol)


def rand(*shape, seed=0, low=None):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return values if low is None else (np.abs(values) + low).astype(np.float32)


def distinct(*shape, seed=0):
    """Values with no ties (order statistics' positions are then unambiguous)."""
    count = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(count).reshape(shape) * 0.37 - 3.1
            ).astype(np.float32)


def _histograms(lib, x, p, w, e):
    """histogram and histogramdd of ``x`` (values on edges included) and the points ``p``;
    their inputs detached: torch's histograms have no gradient."""
    x, p, w, e = x.detach(), p.detach(), w.detach(), e.detach()
    dd = lib.histogramdd(p, [3, 2], weight=w[:p.shape[0]])
    dd_range = lib.histogramdd(p.reshape(2, 6, 2), 2, range=[-1.0, 1.0, -2.0, 0.5],
                               density=True)
    dd_edges = lib.histogramdd(p, [e, e[1:]])
    return dict(
        hist=lib.histogram(x, 5), hist_range=x.histogram(4, range=(-1.0, 1.0), weight=w,
                                                          density=True),
        hist_edges=lib.histogram(x.reshape(4, 5), e), flat=lib.histogram(x * 0 + 1, 3),
        dd=dd.hist, dd_edges=dd.bin_edges, ddr=dd_range.hist, ddr_edges=dd_range.bin_edges,
        dde=dd_edges.hist, dde_edges=dd_edges.bin_edges)


# Each case: inputs and one function of (lib, **inputs) returning a dict of outputs; many ops
# share one case so that each compiles few programs.
CASES = {
    "arithmetic": (dict(x=rand(3, 4), y=rand(3, 4, seed=1, low=0.5), i=np.array(
        [[7, -7, 5, -5]], np.int32), j=np.array([[2, 2, -3, -3]], np.int32)),
        lambda lib, x, y, i, j: dict(
            add=lib.add(x, y, alpha=2), sub=x.sub(y, alpha=0.5), subtract=lib.subtract(x, 1.5),
            rsub=lib.rsub(x, y, alpha=2), mul=lib.mul(x, y), multiply=x.multiply(2),
            div=lib.div(x, y), divide=x.divide(y, rounding_mode="floor"),
            trunc=x.div(y, rounding_mode="trunc"), true=lib.true_divide(i, j),
            floor=lib.floor_divide(i, j), itrunc=i.div(j, rounding_mode="trunc"),
            ifloor=lib.div(i, j, rounding_mode="floor"), neg=lib.negative(x),
            pos=lib.positive(x), absolute=lib.absolute(x), fmax=lib.fmax(x, y),
            fmin=x.fmin(y), maximum=x.maximum(y), minimum=lib.minimum(x, y),
            clamp_min=x.clamp_min(-0.5), clamp_max=lib.clamp_max(x, 0.5),
            clip=lib.clip(x, -1.0, 1.0), square=lib.square(x), pow=lib.pow(y, 1.5),
            float_power=lib.float_power(y, 2), reciprocal=lib.reciprocal(y),
            sgn=lib.sgn(x), ldexp=lib.ldexp(x, j.float()))),
    "comparisons": (dict(x=rand(3, 4), y=rand(3, 4, seed=1), i=np.array([[6, 3, 0, 12]],
                                                                        np.int32)),
        lambda lib, x, y, i: dict(
            eq=lib.eq(x, y), ne=x.ne(y), lt=lib.lt(x, 0.0), le=x.le(y), gt=lib.gt(x, y),
            ge=x.ge(0.1), greater=lib.greater(x, y), greater_equal=x.greater_equal(y),
            less=lib.less(x, y), less_equal=x.less_equal(y), not_equal=lib.not_equal(x, y),
            land=lib.logical_and(x > 0, y), lor=x.logical_or(i), lxor=lib.logical_xor(x, y > 0),
            lnot=lib.logical_not(i), band=lib.bitwise_and(i, 5), bor=i.bitwise_or(9),
            bxor=lib.bitwise_xor(i, i * 3), bnot=lib.bitwise_not(i),
            shl=lib.bitwise_left_shift(i, 2), shr=i.bitwise_right_shift(1),
            all=lib.all(x > -5), all1=x.all(1), any=lib.any(x > 1, 0, keepdim=True),
            anyx=x.any(), signbit=lib.signbit(x), isclose=lib.isclose(x, x + 1e-6),
            isclose2=x.isclose(y, rtol=0.5, atol=0.5), posinf=lib.isposinf(x / 0.0),
            neginf=x.div(0.0).isneginf(), isreal=lib.isreal(x),
            heaviside=lib.heaviside(x.detach().clamp(min=0.0), y.detach()),  # no torch grad
            allclose=lib.allclose(x, x + 1e-7), equal=lib.equal(x, x), unequal=x.equal(y))),
    "unary": (dict(x=rand(3, 5), p=(rand(3, 5, low=0.0) % 0.9 + 0.05).astype(np.float32)),
        lambda lib, x, p: dict(
            exp=lib.exp(x), log=lib.log(p), sqrt=lib.sqrt(p), rsqrt=lib.rsqrt(p),
            sin=lib.sin(x), cos=lib.cos(x), tanh=lib.tanh(x), sigmoid=lib.sigmoid(x),
            erf=lib.erf(x), erfc=lib.erfc(x), erfinv=lib.erfinv(p * 2 - 1), relu=lib.relu(x),
            sign=lib.sign(x), floor=lib.floor(x * 3), ceil=lib.ceil(x * 3),
            round=lib.round(x * 3), deg2rad=lib.deg2rad(x), rad2deg=x.rad2deg(),
            xlogy=lib.xlogy(x, p), xlogy0=lib.xlogy(x.clamp(min=0.0), p),
            sinc=lib.sinc(x), logit=lib.logit(p), logit_eps=x.sigmoid().logit(eps=0.1),
            softmax=lib.softmax(x, 1), log_softmax=lib.log_softmax(x, 0),
            hardshrink=lib.hardshrink(x, 0.5))),
    "reductions": (dict(x=distinct(3, 5)),
        lambda lib, x: dict(
            sum=lib.sum(x, 1), sumall=lib.sum(x), mean=lib.mean(x, (0, 1), keepdim=True),
            prod=lib.prod(x, 0), cumsum=lib.cumsum(x, 1), cumprod=lib.cumprod(x, 0),
            max=lib.max(x, dim=1), maxall=lib.max(x), min=lib.min(x, 0, keepdim=True),
            amax=lib.amax(x, 1), amin=lib.amin(x, (0, 1)), argmax=lib.argmax(x, 1),
            argmin=lib.argmin(x), var=lib.var(x, 1), std=lib.std(x, 0, correction=0),
            var_mean=lib.var_mean(x, 1), std_mean=lib.std_mean(x, 0, keepdim=True),
            norm=lib.norm(x), norm1=x.norm(1, 1), norm3=lib.norm(x, 3, 0, keepdim=True),
            norminf=x.norm(math.inf, 1), dist=lib.dist(x, x * 0.5, 3),
            logcumsumexp=lib.logcumsumexp(x, 1), cummax=lib.cummax(x, 1),
            cummin=x.cummin(0), kthvalue=lib.kthvalue(x, 2, 1), median=lib.median(x),
            median1=x.median(1, keepdim=True), msort=lib.msort(x),
            quantile=lib.quantile(x, 0.3, 1), quantiles=x.quantile(
                torch.tensor([0.25, 0.5]) if lib is torch else gingham.tensor(
                    [0.25, 0.5], device=x.device), 0, keepdim=True),
            lower=lib.quantile(x, 0.4, 1, interpolation="lower"),
            midpoint=lib.quantile(x, 0.4, interpolation="midpoint"),
            nearest=x.quantile(0.4, 0, interpolation="nearest"),
            trapezoid=lib.trapezoid(x), ctrap=lib.cumulative_trapezoid(x, dx=0.5, dim=0))),
    "mode": (dict(v=np.array([[2, 1, 2, 1, 3], [0, 4, 4, 0, 4]], np.float32)),
        lambda lib, v: dict(mode=lib.mode(v), mode0=v.mode(0, keepdim=True))),
    "matrices": (dict(a=rand(3, 4), b=rand(4, 2, seed=1), v=rand(4, seed=2), w=rand(3, seed=3),
                      c=rand(2, 3, 4, seed=4), d=rand(2, 4, 2, seed=5), m=rand(3, 2, seed=6),
                      fw=np.array([1, 2, 1, 3], np.int64)),
        lambda lib, a, b, v, w, c, d, m, fw: dict(
            mm=lib.mm(a, b), matmul=a.matmul(b), bmm=lib.bmm(c, d), mv=lib.mv(a, v),
            dot=lib.dot(v, v * 2), vdot=v.vdot(v), ger=lib.ger(w, v), outer=w.outer(v),
            addmm=lib.addmm(m, a, b, beta=0.5, alpha=2), addmv=lib.addmv(w, a, v),
            addr=lib.addr(a, w, v, alpha=3), baddbmm=lib.baddbmm(m, c, d, beta=0),
            addbmm=lib.addbmm(m, c, d), chain=lib.chain_matmul(a, b, b.T),
            cdist=lib.cdist(a, a[:2] + 0.3, p=2.0),
            cdist1=lib.cdist(c, d.transpose(1, 2), p=1.0), cov=lib.cov(a),
            cov_w=lib.cov(a, correction=0, fweights=fw,
                          aweights=v.detach().abs() + 0.5),  # torch: no grad here
            block=lib.block_diag(a, w, v[:1]), diag_embed=lib.diag_embed(c, 1, 0, 2),
            diagflat=lib.diagflat(w, -1),
            vander=lib.vander(w.detach(), 4))),  # torch.vander's backward fails in torch
    "layout": (dict(x=rand(2, 6, 3), y=rand(6, seed=1)),
        lambda lib, x, y: dict(
            flatten=lib.flatten(x, 1), unflatten=lib.unflatten(y, 0, (2, 3)),
            squeeze=lib.squeeze(x[:1]), unsqueeze=lib.unsqueeze(y, 0),
            transpose=lib.transpose(x, 0, 2), swapaxes=lib.swapaxes(x, 1, 2),
            swapdims=x.swapdims(0, 1), permute=lib.permute(x, (2, 0, 1)), t=lib.t(x[0]),
            adjoint=lib.adjoint(x), mH=x.mH, H=x[0].H, narrow=lib.narrow(x, 1, 2, 3),
            select=lib.select(x, 1, -2), split=lib.split(x, 4, 1), chunk=lib.chunk(y, 4),
            unbind=lib.unbind(x, 2), tsplit=lib.tensor_split(x, 4, 1),
            tsplit_at=x.tensor_split([1, 4, 10], 1), hsplit=lib.hsplit(x, 2),
            vsplit=lib.vsplit(x, [1]), dsplit=x.dsplit(3), hsplit1=y.hsplit(3),
            sws=lib.split_with_sizes(y, [1, 5]), ravel=lib.ravel(x),
            broadcast=lib.broadcast_to(y, (2, 6)), btensors=lib.broadcast_tensors(x, y[:3]),
            unfold=x.unfold(1, 3, 2), sum_to_size=x.sum_to_size(6, 1),
            concatenate=lib.concatenate([y, y]), row_stack=lib.row_stack([y, y]),
            cartesian=lib.cartesian_prod(y[:3], y[3:5]), combinations=lib.combinations(y[:4]),
            comb3=lib.combinations(y[:4], 3, with_replacement=True),
            where=y.where(y > 0, 0.5))),
    "indexing": (dict(x=rand(4, 5), src=rand(4, 5, seed=1), s=rand(2, 5, seed=2),
                      d=rand(3, seed=3), idx=np.array([2, 0], np.int64),
                      group=np.array([[0, 2, 2, 1, 0], [1, 1, 3, 0, 3], [2, 2, 2, 0, 0],
                                      [3, 0, 1, 1, 0]], np.int64),
                      flat=np.array([[0, 19], [-1, 7]], np.int64)),
        lambda lib, x, src, s, d, idx, group, flat: dict(
            take=lib.take(x, flat), index_fill=lib.index_fill(x, 1, idx, -1.0),
            index_copy=lib.index_copy(x, 0, idx, s), icopy1=x.index_copy(1, idx, src[:, :2]),
            index_put=lib.index_put(x, (idx, idx + 1), d[:2]),
            iput_acc=x.index_put((idx,), s, accumulate=True),
            sr_sum=lib.scatter_reduce(x, 0, group, src, "sum"),
            sr_prod=x.scatter_reduce(0, group, src, "prod", include_self=False),
            sr_mean=lib.scatter_reduce(x, 0, group, src, "mean"),
            sr_amax=x.scatter_reduce(0, group, src, "amax", include_self=False),
            sr_amin=lib.scatter_reduce(x, 0, group, src, "amin"),
            slice_scatter=lib.slice_scatter(x, s, 0, 1, 4, 2),
            slice1=x.slice_scatter(src[:, 1:4], 1, 1, 4),
            select_scatter=lib.select_scatter(x, d.repeat(2)[:5], 0, -1),
            diag_scatter=lib.diagonal_scatter(x, d, 2), diag0=x.diagonal_scatter(
                src.diagonal(-1), -1),
            masked_scatter=lib.masked_scatter(x, x > 0, src),
            masked_select=lib.masked_select(x, src > 0), nonzero=lib.nonzero(x > 0),
            argwhere=lib.argwhere(x > 0.5), nz_tuple=lib.nonzero(x > 0, as_tuple=True),
            unique=lib.unique(group, return_inverse=True, return_counts=True),
            unique_dim=lib.unique(group[:, :2], dim=0),
            unique_consecutive=lib.unique_consecutive(group, return_counts=True))),
    "index_reduce_put": (dict(x=distinct(4, 5), src=distinct(3, 5, seed=1) + 0.01,
                              s1=distinct(4, 3, seed=2) + 0.02, idx=np.array([2, 0, 2], np.int64),
                              flat=np.array([[0, 18], [-1, 7]], np.int64),
                              v=rand(2, 2, seed=3), rep=np.array([3, 3, -20, 8], np.int64)),
        lambda lib, x, src, s1, idx, flat, v, rep: dict(
            prod=lib.index_reduce(x, 0, idx, src, "prod"),
            prod0=x.index_reduce(0, idx, src, "prod", include_self=False),
            mean=x.index_reduce(0, idx, src, "mean"),
            mean0=lib.index_reduce(x, 0, idx, src, "mean", include_self=False),
            amax=lib.index_reduce(x, 1, idx + 2, s1, "amax"),
            amin0=x.index_reduce(-1, idx, s1, "amin", include_self=False),
            put=lib.put(x, flat, v), put_acc=x.put(rep, v.reshape(-1), accumulate=True))),
    "frexp_renorm_gradient": (dict(x=rand(4, 5) * 9, c=np.array([0.0, 0.5, 1.5, 1.75, 3.0],
                                                                  np.float32),
                                   r=np.array([0.0, 0.5, 0.25, 2.0], np.float32)),
        lambda lib, x, c, r: dict(
            frexp=lib.frexp(x), frexp_m=x.double().frexp(), frexp_r=lib.frexp(r),
            renorm=lib.renorm(x, 2, 0, 6.0), renorm1=x.renorm(1, 1, 5.0),
            renorm_inf=lib.renorm(x.reshape(2, 2, 5), math.inf, -1, 4.0),
            grad=lib.gradient(x), grad2=lib.gradient(x, spacing=0.5, dim=1, edge_order=2),
            grad_list=lib.gradient(x, spacing=[2.0, 0.25], edge_order=2),
            coords=lib.gradient(x, spacing=[c], dim=-1),
            coords2=lib.gradient(x, spacing=(c, r), dim=(1, 0), edge_order=2),
            short=lib.gradient(x[:2], dim=0), ints=lib.gradient(x.detach().round().int(),
                                                                spacing=2))),
    "histograms": (dict(x=np.concatenate([rand(16, seed=4), [-1.0, 0.5, 1.0, 0.0]]).astype(
        np.float32), p=rand(12, 2, seed=5), w=rand(20, seed=6, low=0.1),
        e=np.array([-1.5, -0.5, 0.0, 0.3, 2.0], np.float32)), _histograms),
    "creation": (dict(x=rand(2, 3), i=np.array([1, 2], np.int32)),
        lambda lib, x, i: dict(
            zeros_like=lib.zeros_like(x), ones_like=lib.ones_like(i),
            full_like=lib.full_like(x, 2.5), full_like_int=lib.full_like(x, 3, dtype=lib.int64)
            if lib is torch else gingham.full_like(x, 3, dtype=np.int64),
            empty_like=lib.empty_like(x).zero_(), eye=lib.eye(3, 4, device=x.device) + 0 * x.sum(),
            # torch's empty tensors are uninitialised (NaN at times, which * 0 keeps): zero_()
            empty=lib.empty(2, 3, device=x.device).zero_(), fill=lib.fill(x, 1.5),
            new_zeros=x.new_zeros(2, 2), new_ones=x.new_ones((3,)), new_full=x.new_full(
                (2,), 7.0), new_tensor=i.new_tensor([4, 5]), new_empty=x.new_empty(1).zero_(),
            tril=lib.tril_indices(3, 4, 1), triu=lib.triu_indices(4, 3, -1),
            as_tensor=lib.as_tensor([1.5, 2.0], device=x.device),
            scalar=lib.scalar_tensor(2.0, device=x.device),
            range=lib.range(0, 2, 0.5, device=x.device),
            byte=i.byte(), char=i.char(), short=i.short())),
    # torch's ATen-order spellings of nn ops (weight before running stats, the embedding's
    # weight first, integer reductions) and the in-place functions, each on a fresh clone
    "aten_spellings": (dict(x=rand(4, 3, 5), w=rand(3, seed=1), b=rand(3, seed=2),
                            m=rand(3, seed=3), v=rand(3, seed=4, low=0.5), w5=rand(5, seed=5),
                            t=(rand(4, 3, 5, seed=6) > 0).astype(np.float32),
                            pw=rand(5, seed=7, low=0.5), table=rand(6, 4, seed=8),
                            idx=np.array([[0, 2, 5], [2, 2, 1]], np.int64)),
        lambda lib, x, w, b, m, v, w5, t, pw, table, idx: dict(
            bn_eval=lib.batch_norm(x, w, b, m.detach(), v.detach(), False, 0.1, 1e-5, True),
            bn_train=lib.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, True),
            inorm=lib.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, True),
            ln=lib.layer_norm(x, [5], w5, pw, 1e-4), gn=lib.group_norm(x, 3, w, b),
            emb=lib.embedding(table, idx), emb_pad=lib.embedding(table, idx, 2) * 3.0,
            bce=lib.binary_cross_entropy_with_logits(x, t, None, pw.detach()),
            bce_mean=lib.binary_cross_entropy_with_logits(x, t, None, pw.detach(), 1),
            bce_none=lib.binary_cross_entropy_with_logits(x, t, reduction=0),
            bce_sum=lib.binary_cross_entropy_with_logits(x, t, x.abs().detach(), None, 2),
            kl=lib.kl_div(x.log_softmax(-1), t.softmax(-1)),
            kl_mean=lib.kl_div(x.log_softmax(-1), t.softmax(-1), 1),
            kl_sum=lib.kl_div(x.log_softmax(-1), t.log_softmax(-1), 2, log_target=True),
            kl_none=lib.kl_div(x.log_softmax(-1), t.softmax(-1), 0),
            dropout_eval=lib.dropout(x, 0.5, False), alpha_eval=lib.alpha_dropout(x, 0.3, False),
            feature_alpha_eval=lib.feature_alpha_dropout(x, 0.3, False),
            rrelu_eval=lib.rrelu(x), rrelu_bounds=lib.rrelu(x, 0.2, 0.4),
            relu_=lib.relu_(x.clone()), sigmoid_=lib.sigmoid_(x.clone()),
            tanh_=lib.tanh_(x.clone()), exp_=lib.exp_(x.clone()),
            sqrt_=lib.sqrt_(x.abs() + 1.0), clamp_=lib.clamp_(x.clone(), min=-0.5, max=0.5),
            zero_=lib.zero_(x.clone()), fill_=lib.fill_(x.clone(), 2.5),
            neg_=lib.neg_(x.clone()), square_=lib.square_(x.clone()),
            selu_=lib.selu_(x.clone()), celu_=lib.celu_(x.clone(), 0.5),
            threshold_=lib.threshold_(x.clone(), 0.1, 20.0),
            dropout_eval_=lib.dropout_(x.clone(), 0.5, False))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(device, case):
    arrays, run = CASES[case]
    compare(device, arrays, run)


def test_in_place_functions_write_into_their_argument_and_cover_the_methods():
    x = gingham.tensor(np.array([-1.0, 0.5, 2.0], np.float32), device="reference")
    assert gingham.relu_(x) is x and x.tolist() == [0.0, 0.5, 2.0]
    assert gingham.clamp_(x, max=1.0) is x and x.tolist() == [0.0, 0.5, 1.0]
    assert gingham.zero_(x) is x and x.tolist() == [0.0, 0.0, 0.0]
    # torch's in-place functions that are Tensor methods in gingham all have the spelling
    torch_names = {n for n in dir(torch) if n.endswith("_") and not n.startswith("_")}
    missing = sorted(n for n in torch_names if hasattr(x, n) and not hasattr(gingham, n))
    assert not missing, f"in-place methods without torch's function spelling: {missing}"


def test_dropout_in_torch_spelling_trains_in_place():
    x = gingham.tensor(np.ones((64, 64), np.float32), device="reference")
    y = gingham.dropout(x, 0.25, True).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)} and 0.15 < (y == 0).mean() < 0.35
    z = x.clone()
    assert gingham.dropout_(z, 0.25, True) is z
    assert set(np.unique(z.numpy())) <= {0.0, np.float32(1 / 0.75)} and (z.numpy() == 0).any()
    values = rand(3, 4)
    for name, args in (("selu_", ()), ("celu_", (0.5,)), ("threshold_", (0.1, 20.0)),
                       ("rrelu_", (0.2, 0.4)), ("alpha_dropout_", (0.5, False))):
        mine, theirs = gingham.tensor(values, device="reference"), torch.tensor(values)
        assert getattr(gingham, name)(mine, *args) is mine, name
        getattr(torch, name)(theirs, *args)
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), err_msg=name, **TOLERANCE)
    with pytest.raises(ValueError, match="reduction must be 0 .none., 1 .mean. or 2"):
        gingham.kl_div(x, x, "mean")


def test_dropout_in_torch_spelling_in_evaluation_writes_nothing():
    """``torch.dropout_(x, p, False)`` returns ``x`` unwritten, so a leaf that requires grad
    passes outside ``no_grad()`` and keeps its version (gingham used to refuse it, writing
    ``x`` into itself); in training the leaf is refused, by both."""
    values = rand(2, 3, 4)
    for name in ("dropout_", "alpha_dropout_", "feature_alpha_dropout_"):
        for lib in (gingham, torch):
            leaf = lib.tensor(values, requires_grad=True)
            version = leaf._version
            assert getattr(lib, name)(leaf, 0.5, False) is leaf, (name, lib.__name__)
            assert leaf._version == version and leaf.is_leaf, (name, lib.__name__)
            np.testing.assert_array_equal(leaf.detach().numpy(), values)
            with pytest.raises(RuntimeError, match="leaf"):
                getattr(lib, name)(leaf, 0.5, True)


def test_batch_norm_in_torch_spelling_updates_running_statistics(device):
    x, w, b = rand(8, 3, 4), rand(3, seed=1), rand(3, seed=2)
    stats = {lib: (lib.tensor(rand(3, seed=3)), lib.tensor(rand(3, seed=4, low=0.5)))
             for lib in (torch, gingham)}
    stats[gingham] = tuple(t.to(device) for t in stats[gingham])
    for lib, as_tensor in ((torch, torch.tensor),
                           (gingham, lambda a: gingham.tensor(a, device=device))):
        mean, var = stats[lib]
        y = lib.batch_norm(as_tensor(x), as_tensor(w), as_tensor(b), mean, var, True, 0.3,
                           1e-5, True)
        lib.instance_norm(as_tensor(x), None, None, mean, var, True, 0.5, 1e-5, True)
        stats[lib] = stats[lib] + (y,)
    for got, expected in zip(stats[gingham], stats[torch]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), **TOLERANCE)


def test_properties_and_predicates(device):
    x = gingham.tensor(np.ones((2, 3), np.float32), device=device)
    t = torch.ones(2, 3)
    for name in ("ndimension", "nelement", "element_size", "is_floating_point", "is_signed",
                 "is_complex", "is_contiguous", "dim", "numel"):
        assert getattr(x, name)() == getattr(t, name)(), name
    assert (x.itemsize, x.nbytes) == (t.itemsize, t.nbytes)
    assert gingham.is_tensor(x) and not gingham.is_tensor(t.numpy())
    assert gingham.is_same_size(x, x) and not x.is_same_size(x[0])
    assert gingham.tensor([3], device=device).is_nonzero()
    assert gingham.get_default_dtype() == np.float32
    assert gingham.broadcast_shapes((2, 1), (3,)) == tuple(torch.broadcast_shapes((2, 1), (3,)))
    assert gingham.promote_types(np.int32, np.float16) == np.float16
    assert gingham.result_type(x.int(), 2.0) == np.float32
    assert gingham.can_cast(np.int32, np.float32) and not gingham.can_cast(np.float32, np.int32)
    assert x.get_device() == (int(device.split(":")[1]) if ":" in device else -1)
    assert x.data.shape == x.shape and not x.data.requires_grad
    assert gingham.from_numpy(np.arange(3)).tolist() == [0, 1, 2]


def test_errors_name_what_is_wrong():
    x = gingham.tensor(np.ones((2, 3), np.float32), device="reference")
    with pytest.raises(ValueError, match="rounding_mode"):
        x.div(2, rounding_mode="round")
    with pytest.raises(ValueError, match="reduce"):
        x.scatter_reduce(0, x.long(), x, "max")
    with pytest.raises(gingham.GinghamError, match="mm: input must be a 2-d"):
        gingham.mm(x[0], x)
    with pytest.raises(gingham.GinghamError, match="does not split into 2 equal"):
        x.hsplit(2)
    with pytest.raises(ValueError, match="interpolation"):
        x.quantile(0.5, interpolation="cubic")


def test_errors_of_index_reduce_put_histogram_frexp_renorm_gradient():
    x = gingham.tensor(np.ones((2, 3), np.float32), device="reference")
    index = gingham.tensor(np.array([0, 1], np.int64), device="reference")
    with pytest.raises(ValueError, match="reduce must be one of"):
        x.index_reduce(0, index, x, "sum")
    with pytest.raises(gingham.GinghamError, match="source must have shape"):
        x.index_reduce(1, index, x, "prod")
    with pytest.raises(gingham.GinghamError, match="index must be 1-d"):
        x.index_reduce(0, index.reshape(2, 1), x, "amax")
    with pytest.raises(gingham.GinghamError, match="as many elements"):
        x.put(index, x)
    with pytest.raises(TypeError, match="one dtype"):
        x.put(index, x.reshape(-1)[:2].double())
    with pytest.raises(ValueError, match="bins must be > 0"):
        x.histogram(0)
    with pytest.raises(ValueError, match="at least two edges"):
        x.histogram(gingham.tensor(np.zeros(1, np.float32), device="reference"))
    with pytest.raises(ValueError, match="min should not exceed max"):
        x.histogram(3, range=(1.0, 0.0))
    with pytest.raises(ValueError, match="not finite"):
        gingham.histogram(x, 3, range=(0.0, math.inf))
    with pytest.raises(ValueError, match="at least 2 dims"):
        gingham.histogramdd(x[0], 3)
    with pytest.raises(ValueError, match="one entry per dimension"):
        gingham.histogramdd(x, [2, 2])
    with pytest.raises(TypeError, match="floating-point"):
        gingham.histogram(index, 3)
    with pytest.raises(TypeError, match="floating-point"):
        gingham.frexp(index)
    with pytest.raises(ValueError, match="at least 2 dims"):
        gingham.renorm(x[0], 2, 0, 1.0)
    with pytest.raises(ValueError, match="p must be a positive"):
        x.renorm(0, 0, 1.0)
    with pytest.raises(ValueError, match="maxnorm"):
        x.renorm(2, 0, -1.0)
    with pytest.raises(ValueError, match="edge_order"):
        gingham.gradient(x, edge_order=3)
    with pytest.raises(ValueError, match="at least edge_order"):
        gingham.gradient(x, edge_order=2)
    with pytest.raises(ValueError, match="one entry per dim"):
        gingham.gradient(x, spacing=[1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="not a mix"):
        gingham.gradient(x, spacing=[1.0, index.float()])
    with pytest.raises(ValueError, match="more than once"):
        gingham.gradient(x, dim=[0, -2])


def test_finfo_and_iinfo_match_torch():
    """``finfo`` and ``iinfo`` give torch's fields as Python numbers (so that
    ``(1.0 - mask) * gingham.finfo(x.dtype).min`` builds Hugging Face's additive attention
    mask from either side), and torch's TypeErrors for the other kinds of dtype."""
    for name in ("float16", "bfloat16", "float32", "float64", None):
        ours = gingham.finfo(getattr(gingham, name)) if name else gingham.finfo()
        theirs = torch.finfo(getattr(torch, name)) if name else torch.finfo()
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)
            assert type(getattr(ours, field)) is type(getattr(theirs, field)), (name, field)
        assert ours.dtype == str(theirs.dtype)
    for name in ("int8", "uint8", "int16", "int32", "int64"):
        ours, theirs = gingham.iinfo(getattr(gingham, name)), torch.iinfo(getattr(torch, name))
        assert (ours.bits, ours.max, ours.min, ours.dtype) == (theirs.bits, theirs.max,
                                                               theirs.min, theirs.dtype)
    for call, message in ((lambda lib: lib.finfo(lib.int32), "requires a floating point"),
                          (lambda lib: lib.iinfo(lib.float32), "requires an integer"),
                          (lambda lib: lib.iinfo(lib.bool), "bool is not supported")):
        for lib in (torch, gingham):
            with pytest.raises(TypeError, match=message):
                call(lib)


def test_index_int_and_generator_in_torch_spelling(device):
    """nanoGPT's batch sampler, ``torch.stack([data[i:i + block] for i in ix])``: a
    one-element integer tensor is a Python index (``__index__``, ``__int__``), as torch's,
    and anything else is torch's TypeError. ``gingham.Generator`` is the device generator
    in torch's spelling (its positional argument a device): reseeded, it draws the same."""
    data, offsets = np.arange(20) * 3, np.array([4, 0, 11])
    ours = gingham.tensor(data, device=device)
    batch = gingham.stack([ours[i:i + 5] for i in gingham.tensor(offsets, device=device)])
    expected = torch.stack([torch.tensor(data)[i:i + 5] for i in torch.tensor(offsets)])
    np.testing.assert_array_equal(batch.numpy(), expected.numpy())
    one = gingham.tensor(np.array([7]), device=device)
    assert (int(one), list(range(one)), int(gingham.tensor(2.9, device=device))) == (
        7, list(range(7)), 2)
    for bad in (gingham.tensor(3.0, device=device), gingham.tensor([1, 2], device=device)):
        with pytest.raises(TypeError, match="only integer tensors of a single element"):
            [0][bad]
    assert gingham.Generator is F.Generator
    probs = gingham.tensor(np.full((2, 6), 1 / 6, np.float32), device=device)
    draws = [gingham.multinomial(probs, 3, generator=gingham.Generator(device).manual_seed(5))
             for _ in range(2)]
    np.testing.assert_array_equal(draws[0].numpy(), draws[1].numpy())
    assert gingham.Generator(device).device == draws[0].device
