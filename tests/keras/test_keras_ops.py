"""``keras.ops`` on gingham's backend, on every device: forward values and gradients against
PyTorch (CPU), NumPy's semantics (dtypes, keepdims, index rules) against NumPy, dtypes and
variables, and a clear NotImplementedError for what is not implemented. All differentiable
ops of a device share one compiled program (forward and gradients together)."""

from __future__ import annotations

import importlib
import importlib.util
import math

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402
from keras import ops  # noqa: E402

import gingham  # noqa: E402
from gingham.frontend.tensor import Tensor, realize  # noqa: E402
from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)
from gingham.keras.backend.core import leaf_of  # noqa: E402

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0, positive=False):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(values) + 0.5 if positive else values


def _torch_same_pad(x, kernel, stride, channels_last, value=0.0):
    """TensorFlow's "same" padding of a torch NCHW/NHWC tensor (the odd pad at the end)."""
    spatial = x.shape[1:3] if channels_last else x.shape[2:]
    pads = []
    for size, k, s in zip(spatial, kernel, stride):
        total = max(0, (-(-size // s) - 1) * s + k - size)
        pads.append((total // 2, total - total // 2))
    flat = [p for pair in reversed(pads) for p in pair]
    return TF.pad(x, ([0, 0] if channels_last else []) + flat, value=value)


def _torch_conv(x, kernel, stride, padding, channels_last):
    xt = x.permute(0, 3, 1, 2) if channels_last else x
    xt = _torch_same_pad(xt, kernel.shape[:2], (stride, stride), False) if padding == "same" \
        else xt
    y = TF.conv2d(xt, kernel.permute(3, 2, 0, 1), stride=stride)
    return y.permute(0, 2, 3, 1) if channels_last else y


def _numpy_avg_pool_same(x, k, s):
    """TensorFlow's average pool with "same" padding (channels last, 1-, 2- or 3-d): each
    window's mean over the taps inside the input."""
    spatial = x.shape[1:-1]
    outs = [-(-n // s) for n in spatial]
    pads = [max(0, (o - 1) * s + k - n) // 2 for o, n in zip(outs, spatial)]
    out = np.zeros((x.shape[0], *outs, x.shape[-1]), np.float32)
    for index in np.ndindex(*outs):
        window = tuple(slice(max(0, i * s - p), min(n, i * s - p + k))
                       for i, p, n in zip(index, pads, spatial))
        out[(slice(None), *index)] = x[(slice(None), *window)].mean(
            tuple(range(1, len(spatial) + 1)))
    return out


def _torch_keras_conv(x, kernel, stride=1, padding="valid", channels_last=True, dilation=1):
    """Keras' convolution in PyTorch: 1-, 2- or 3-d, kernel ``[*K, C / groups, O]`` (groups
    from the channel counts), TensorFlow's "same"."""
    nd = x.ndim - 2
    xt = torch.movedim(x, -1, 1) if channels_last else x
    if padding == "same":
        pads = []
        for size, k in zip(xt.shape[2:], kernel.shape[:nd]):
            extent = (k - 1) * dilation + 1
            total = max(0, (-(-size // stride) - 1) * stride + extent - size)
            pads.append((total // 2, total - total // 2))
        xt = TF.pad(xt, [p for pair in reversed(pads) for p in pair])
    weight = kernel.permute(nd + 1, nd, *range(nd))
    y = getattr(TF, f"conv{nd}d")(xt, weight, stride=stride, dilation=dilation,
                                  groups=xt.shape[1] // weight.shape[1])
    return torch.movedim(y, 1, -1) if channels_last else y


def _torch_depthwise(x, kernel, stride, padding):
    """Keras' depthwise kernel ``[*K, C, M]`` is a grouped one ``[*K, 1, C * M]``."""
    grouped = kernel.reshape(*kernel.shape[:-2], 1, kernel.shape[-2] * kernel.shape[-1])
    return _torch_keras_conv(x, grouped, stride, padding)


def _torch_conv_transpose(x, kernel, stride, padding, channels_last=True):
    """Keras' transposed convolution (kernel ``[*K, O, C]``, no output_padding) as what it
    is: the gradient of the convolution from the output's shape to ``x``'s, by PyTorch's
    autograd (create_graph, so that its own gradients follow)."""
    nd = x.ndim - 2
    spatial = x.shape[1:-1] if channels_last else x.shape[2:]
    sizes = [n * stride if padding == "same" else (n - 1) * stride + max(k, stride)
             for n, k in zip(spatial, kernel.shape[:nd])]
    channels = kernel.shape[-2]
    shape = ((x.shape[0], *sizes, channels) if channels_last
             else (x.shape[0], channels, *sizes))
    y = torch.zeros(shape, requires_grad=True)
    convolved = _torch_keras_conv(y, kernel, stride, padding, channels_last)
    assert convolved.shape == x.shape
    (transposed,) = torch.autograd.grad(convolved, y, x, create_graph=True)
    return transposed


def _gelu_tanh(t):
    return TF.gelu(t, approximate="tanh")


LABELS = np.array([0, 2, 1, 2], np.int64)
ONE_HOT = np.eye(3, dtype=np.float32)[LABELS]
TARGETS = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]],
                   np.float32)
INDICES = np.array([[3, -1], [0, 2]], np.int32)
# [batch, 1, queries, keys]: True where a query may attend (every query keeps key 0)
ATTEND = (rand(2, 1, 4, 5, seed=5) > -0.5) | (np.arange(5) == 0)

# name: (keras op, PyTorch op, float inputs (differentiated), other inputs)
DIFFERENTIABLE = {
    "relu": (ops.relu, torch.relu, [rand(3, 4)], []),
    "gelu": (ops.gelu, _gelu_tanh, [rand(3, 4)], []),
    "gelu_exact": (lambda x: ops.gelu(x, approximate=False), TF.gelu, [rand(3, 4)], []),
    "sigmoid": (ops.sigmoid, torch.sigmoid, [rand(3, 4)], []),
    "tanh": (ops.tanh, torch.tanh, [rand(3, 4)], []),
    "silu": (ops.silu, TF.silu, [rand(3, 4)], []),
    "softplus": (ops.softplus, TF.softplus, [rand(3, 4)], []),
    "elu": (ops.elu, TF.elu, [rand(3, 4)], []),
    "leaky_relu": (ops.leaky_relu, lambda t: TF.leaky_relu(t, 0.2), [rand(3, 4)], []),
    "hard_activations": (lambda x: (ops.hard_sigmoid(x), ops.hard_silu(x), ops.hard_tanh(x),
                                    ops.hard_shrink(x), ops.soft_shrink(x)),
                         lambda t: (TF.hardsigmoid(t), TF.hardswish(t), TF.hardtanh(t),
                                    TF.hardshrink(t), TF.softshrink(t)), [rand(3, 4) * 3], []),
    "smooth_activations": (lambda x: (ops.selu(x), ops.celu(x, 0.5), ops.glu(x),
                                      ops.tanh_shrink(x), ops.squareplus(x),
                                      ops.threshold(x, 0.1, -2.0)),
                           lambda t: (TF.selu(t), TF.celu(t, 0.5), TF.glu(t), TF.tanhshrink(t),
                                      (t + torch.sqrt(t * t + 4)) / 2, TF.threshold(t, 0.1, -2.0)),
                           [rand(3, 4)], []),
    "repeat": (lambda x: (ops.repeat(x, 2, axis=1), ops.repeat(x, [1, 0, 3])),
               lambda t: (t.repeat_interleave(2, 1),
                          t.flatten()[:3].repeat_interleave(torch.tensor([1, 0, 3]))),
               [rand(1, 3)], []),
    "softmax": (ops.softmax, lambda t: torch.softmax(t, -1), [rand(3, 4)], []),
    "softmax_axis0": (lambda x: ops.softmax(x, axis=0), lambda t: torch.softmax(t, 0),
                      [rand(3, 4)], []),
    "log_softmax": (ops.log_softmax, lambda t: torch.log_softmax(t, -1), [rand(3, 4)], []),
    "exp": (ops.exp, torch.exp, [rand(3, 4)], []),
    "log": (ops.log, torch.log, [rand(3, 4, positive=True)], []),
    "sqrt": (ops.sqrt, torch.sqrt, [rand(3, 4, positive=True)], []),
    "rsqrt": (ops.rsqrt, torch.rsqrt, [rand(3, 4, positive=True)], []),
    "square": (ops.square, torch.square, [rand(3, 4)], []),
    "abs": (ops.abs, torch.abs, [rand(3, 4)], []),
    "power": (lambda x: ops.power(x, 3.0), lambda t: t ** 3, [rand(3, 4)], []),
    "logsumexp": (lambda x: ops.logsumexp(x, axis=1), lambda t: torch.logsumexp(t, 1),
                  [rand(3, 4)], []),
    "add_broadcast": (ops.add, torch.add, [rand(3, 4), rand(4, seed=1)], []),
    "subtract_scalar": (lambda x: ops.subtract(1.5, x), lambda t: 1.5 - t, [rand(3, 4)], []),
    "multiply": (ops.multiply, torch.mul, [rand(3, 4), rand(3, 1, seed=1)], []),
    "divide": (ops.divide, torch.div, [rand(3, 4), rand(3, 4, seed=1, positive=True)], []),
    "maximum": (ops.maximum, torch.maximum, [rand(3, 4), rand(3, 4, seed=1)], []),
    "minimum_scalar": (lambda x: ops.minimum(x, 0.25), lambda t: torch.clamp(t, max=0.25),
                       [rand(3, 4)], []),
    "clip": (lambda x: ops.clip(x, -0.5, 0.5), lambda t: t.clamp(-0.5, 0.5), [rand(3, 4)], []),
    "matmul": (ops.matmul, torch.matmul, [rand(2, 3, 4), rand(4, 5, seed=1)], []),
    "sum_keepdims": (lambda x: ops.sum(x, axis=(0, 2), keepdims=True),
                     lambda t: t.sum((0, 2), keepdim=True), [rand(2, 3, 4)], []),
    "mean": (lambda x: ops.mean(x, axis=-1), lambda t: t.mean(-1), [rand(2, 3, 4)], []),
    "max": (lambda x: ops.max(x, axis=1), lambda t: t.amax(1), [rand(3, 4)], []),
    "var": (lambda x: ops.var(x, axis=0), lambda t: t.var(0, correction=0), [rand(5, 3)], []),
    "transpose": (lambda x: ops.transpose(x, (2, 0, 1)), lambda t: t.permute(2, 0, 1),
                  [rand(2, 3, 4)], []),
    "reshape_expand": (lambda x: ops.expand_dims(ops.reshape(x, (4, -1)), 1),
                       lambda t: t.reshape(4, -1).unsqueeze(1), [rand(2, 3, 4)], []),
    "concatenate": (lambda a, b: ops.concatenate([a, b], axis=1),
                    lambda a, b: torch.cat([a, b], 1), [rand(2, 3), rand(2, 2, seed=1)], []),
    "stack": (lambda a, b: ops.stack([a, b], axis=1), lambda a, b: torch.stack([a, b], 1),
              [rand(2, 3), rand(2, 3, seed=1)], []),
    "where": (lambda a, b, c: ops.where(c, a, b), lambda a, b, c: torch.where(c, a, b),
              [rand(3, 4), rand(3, 4, seed=1)], [rand(3, 4, seed=2) > 0]),
    "take": (lambda x, i: ops.take(x, i, axis=0),
             lambda t, i: t[torch.where(i < 0, i + 5, i).long()], [rand(5, 3)], [INDICES]),
    "take_axis1": (lambda x, i: ops.take(x, i, axis=1),
                   lambda t, i: t[:, torch.where(i < 0, i + 5, i).long()], [rand(2, 5, 3)],
                   [INDICES]),
    "conv_same_s2_nhwc": (lambda x, k: ops.conv(x, k, 2, "same"),
                          lambda x, k: _torch_conv(x, k, 2, "same", True),
                          [rand(2, 7, 6, 3), rand(3, 3, 3, 4, seed=1)], []),
    "conv_valid_nchw": (lambda x, k: ops.conv(x, k, 1, "valid", "channels_first"),
                        lambda x, k: _torch_conv(x, k, 1, "valid", False),
                        [rand(2, 3, 6, 5), rand(3, 2, 3, 4, seed=1)], []),
    "conv1d_grouped_same": (lambda x, k: ops.conv(x, k, 2, "same"),
                            lambda x, k: _torch_keras_conv(x, k, 2, "same"),
                            [rand(2, 9, 4), rand(3, 2, 6, seed=1)], []),
    "conv_dilated_same": (lambda x, k: ops.conv(x, k, 1, "same", dilation_rate=2),
                          lambda x, k: _torch_keras_conv(x, k, 1, "same", dilation=2),
                          [rand(2, 7, 6, 3), rand(2, 3, 3, 4, seed=1)], []),
    "conv3d_ncdhw": (lambda x, k: ops.conv(x, k, 1, "valid", "channels_first"),
                     lambda x, k: _torch_keras_conv(x, k, 1, "valid", False),
                     [rand(1, 2, 4, 5, 3), rand(2, 3, 2, 2, 3, seed=1)], []),
    "depthwise_conv_same_s2": (lambda x, k: ops.depthwise_conv(x, k, 2, "same"),
                               lambda x, k: _torch_depthwise(x, k, 2, "same"),
                               [rand(2, 7, 6, 3), rand(3, 3, 3, 2, seed=1)], []),
    "separable_conv": (lambda x, d, p: ops.separable_conv(x, d, p, 1, "same"),
                       lambda x, d, p: _torch_keras_conv(_torch_depthwise(x, d, 1, "same"), p),
                       [rand(2, 6, 5, 3), rand(3, 3, 3, 2, seed=1), rand(1, 1, 6, 4, seed=2)],
                       []),
    "conv_transpose_same_s2": (lambda x, k: ops.conv_transpose(x, k, 2, "same"),
                               lambda x, k: _torch_conv_transpose(x, k, 2, "same"),
                               [rand(2, 4, 3, 3), rand(3, 3, 5, 3, seed=1)], []),
    "conv_transpose_1d_valid_ncw": (
        lambda x, k: ops.conv_transpose(x, k, 3, "valid", data_format="channels_first"),
        lambda x, k: _torch_conv_transpose(x, k, 3, "valid", False),
        [rand(2, 3, 5), rand(2, 4, 3, seed=1)], []),
    "einsum": (lambda a, b: ops.einsum("abc,cde->abde", a, b),
               lambda a, b: torch.einsum("abc,cde->abde", a, b),
               [rand(2, 3, 4), rand(4, 2, 3, seed=1)], []),
    "dot_product_attention": (
        lambda q, k, v, m: ops.dot_product_attention(q, k, v, mask=m, is_causal=True),
        lambda q, k, v, m: TF.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            attn_mask=m & torch.ones(4, 5, dtype=torch.bool).tril(),
            enable_gqa=True).transpose(1, 2),
        [rand(2, 4, 2, 3), rand(2, 5, 1, 3, seed=1), rand(2, 5, 1, 3, seed=2)],
        [ATTEND]),
    "softmax_axes": (lambda x: ops.softmax(x, axis=(1, 2)),
                     lambda t: t.flatten(1).softmax(-1).reshape(t.shape), [rand(2, 3, 4)], []),
    "log_softmax_all": (lambda x: ops.log_softmax(x, axis=None),
                        lambda t: t.flatten().log_softmax(0).reshape(t.shape), [rand(3, 4)], []),
    "cumsum_cumprod": (lambda x: (ops.cumsum(x, axis=1), ops.cumprod(x)),
                       lambda t: (t.cumsum(1), t.flatten().cumprod(0)), [rand(3, 4)], []),
    "dot_3d": (ops.dot, lambda a, b: torch.tensordot(a, b, dims=([2], [1])),
               [rand(2, 3, 4), rand(5, 4, 2, seed=1)], []),
    "scatter": (lambda v, i: ops.scatter(i, v, (3, 4, 2)),
                lambda v, i: torch.zeros(3, 4, 2).index_put((i[:3, 0], i[:3, 1]), v[:3],
                                                            accumulate=True),  # [1, -1] dropped
                [rand(4, 2)], [np.array([[0, 1], [2, 3], [0, 1], [1, -1]], np.int64)]),
    "segment_sum": (lambda x, i: ops.segment_sum(x, i, num_segments=3),
                    lambda x, i: torch.zeros(3, 2).index_add(0, i[i >= 0], x[i >= 0]),
                    [rand(5, 2)], [np.array([2, 0, -1, 2, 1], np.int64)]),
    "slice_update": (lambda x, u: ops.slice_update(x, (1, 0), u),
                     lambda x, u: torch.cat([x[:1], torch.cat([u, x[1:3, 3:]], 1), x[3:]]),
                     [rand(4, 5), rand(2, 3, seed=1)], []),
    "resize": (lambda x: (ops.image.resize(x, (7, 9)),
                          ops.image.resize(x, (10, 8), interpolation="nearest")),
               lambda t: tuple(TF.interpolate(t.permute(0, 3, 1, 2), size, mode=mode,
                                              **extra).permute(0, 2, 3, 1)
                               for size, mode, extra in [((7, 9), "bilinear",
                                                          {"align_corners": False}),
                                                         ((10, 8), "nearest-exact", {})]),
               [rand(2, 5, 4, 3)], []),
    "max_pool1d_same": (lambda x: ops.max_pool(x, 3, 2, "same"),
                        lambda t: TF.max_pool1d(TF.pad(t.transpose(1, 2), (1, 1),
                                                       value=-math.inf), 3, 2).transpose(1, 2),
                        [rand(2, 7, 3)], []),
    "average_pool3d_ncdhw": (lambda x: ops.average_pool(x, 2, None, "valid", "channels_first"),
                             lambda t: TF.avg_pool3d(t, 2), [rand(1, 2, 4, 4, 5)], []),
    "max_pool_same": (lambda x: ops.max_pool(x, 3, 2, "same"),
                      lambda t: TF.max_pool2d(_torch_same_pad(
                          t.permute(0, 3, 1, 2), (3, 3), (2, 2), False, -math.inf), 3, 2)
                      .permute(0, 2, 3, 1), [rand(2, 7, 6, 3)], []),
    "average_pool_valid": (lambda x: ops.average_pool(x, 2, 2, "valid", "channels_first"),
                           lambda t: TF.avg_pool2d(t, 2, 2), [rand(2, 3, 6, 4)], []),
    "batch_normalization": (
        lambda x, m, v, o, s: ops.batch_normalization(x, m, v, axis=1, offset=o, scale=s,
                                                      epsilon=1e-3),
        lambda x, m, v, o, s: ((x - m[:, None]) / torch.sqrt(v[:, None] + 1e-3) * s[:, None]
                               + o[:, None]),
        [rand(4, 3, 2), rand(3, seed=1), rand(3, seed=2, positive=True), rand(3, seed=3),
         rand(3, seed=4)], []),
    "moments": (lambda x: ops.moments(x, axes=[0, 2]),
                lambda t: (t.mean((0, 2)), t.var((0, 2), correction=0)), [rand(4, 3, 5)], []),
    "layer_normalization": (
        lambda x, g, b: ops.layer_normalization(x, g, b, axis=-1, epsilon=1e-3),
        lambda x, g, b: TF.layer_norm(x, (4,), g, b, 1e-3), [rand(3, 4), rand(4, seed=1),
                                                             rand(4, seed=2)], []),
    "sparse_cce_logits": (
        lambda x, y: ops.sparse_categorical_crossentropy(y, x, from_logits=True),
        lambda x, y: TF.cross_entropy(x, y, reduction="none"), [rand(4, 3)], [LABELS]),
    "sparse_cce_probs": (
        lambda x, y: ops.sparse_categorical_crossentropy(y, ops.softmax(x)),
        lambda x, y: TF.nll_loss(torch.log(torch.softmax(x, -1).clamp(1e-7, 1 - 1e-7)), y,
                                 reduction="none"), [rand(4, 3)], [LABELS]),
    "cce_logits": (lambda x, y: ops.categorical_crossentropy(y, x, from_logits=True),
                   lambda x, y: -(y * torch.log_softmax(x, -1)).sum(-1), [rand(4, 3)],
                   [ONE_HOT]),
    "bce_probs": (lambda x, y: ops.binary_crossentropy(y, ops.sigmoid(x)),
                  lambda x, y: TF.binary_cross_entropy(torch.sigmoid(x).clamp(1e-7, 1 - 1e-7),
                                                       y, reduction="none"), [rand(4, 3)],
                  [TARGETS]),
    "bce_logits": (lambda x, y: ops.binary_crossentropy(y, x, from_logits=True),
                   lambda x, y: TF.binary_cross_entropy_with_logits(x, y, reduction="none"),
                   [rand(4, 3)], [TARGETS]),
}


def _flat(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def test_differentiable_ops_against_torch(device):
    """Every op of DIFFERENTIABLE, forward and gradient (of the outputs weighted by random
    cotangents) in one program, against PyTorch."""
    check_against_torch(device, DIFFERENTIABLE, TOLERANCE)



def _spd(n: int, seed: int) -> np.ndarray:
    """A well-conditioned symmetric positive-definite float32 matrix ``x @ x.T + n * I``."""
    x = rand(n, n, seed=seed)
    return (x @ x.T + n * np.eye(n)).astype(np.float32)


def _well_conditioned(*shape, seed: int) -> np.ndarray:
    return (rand(*shape, seed=seed) + shape[-1] * np.eye(shape[-1])).astype(np.float32)


# keras.ops.linalg (and numpy.slogdet, math.logdet) on gingham.linalg, against torch.linalg.
LINALG = {
    "cholesky": (lambda s: (ops.linalg.cholesky(s), ops.linalg.cholesky(s, upper=True)),
                 lambda s: (torch.linalg.cholesky(s), torch.linalg.cholesky(s, upper=True)),
                 [_spd(4, 1)]),
    "cholesky_inverse": (lambda s: ops.linalg.cholesky_inverse(ops.linalg.cholesky(s)),
                         lambda s: torch.cholesky_inverse(torch.linalg.cholesky(s)),
                         [_spd(3, 2)]),
    "det_inv": (lambda a: (ops.linalg.det(a), ops.linalg.inv(a)),
                lambda a: (torch.linalg.det(a), torch.linalg.inv(a)), [rand(2, 4, 4, seed=3)]),
    "lu_factor": (ops.linalg.lu_factor,
                  lambda a: (torch.linalg.lu_factor(a).LU, torch.linalg.lu_factor(a).pivots - 1),
                  [rand(2, 4, 4, seed=4)]),
    "solve": (lambda a, b, v: (ops.linalg.solve(a, b), ops.linalg.solve(a, v)),
              lambda a, b, v: (torch.linalg.solve(a, b), torch.linalg.solve(a, v)),
              [rand(2, 3, 3, seed=5), rand(2, 3, 2, seed=6), rand(2, 3, seed=7)]),
    "solve_triangular": (
        lambda a, b, v: (ops.linalg.solve_triangular(a, b, lower=True),
                         ops.linalg.solve_triangular(a, v)),
        lambda a, b, v: (torch.linalg.solve_triangular(a, b, upper=False),
                         torch.linalg.solve_triangular(a, v.unsqueeze(-1), upper=True)[..., 0]),
        [_well_conditioned(2, 3, 3, seed=8), rand(2, 3, 2, seed=9), rand(2, 3, seed=10)]),
    "norm": (lambda x: (ops.linalg.norm(x), ops.linalg.norm(x, ord=1, axis=-1),
                        ops.linalg.norm(x, ord="fro", axis=(1, 2), keepdims=True),
                        ops.linalg.norm(x[0], ord=np.inf)),
             lambda x: (torch.linalg.norm(x), torch.linalg.norm(x, ord=1, dim=-1),
                        torch.linalg.norm(x, ord="fro", dim=(1, 2), keepdim=True),
                        torch.linalg.norm(x[0], ord=math.inf)),
             [rand(2, 3, 4, seed=11)]),
    "slogdet_logdet": (lambda a, s: (*ops.slogdet(a), ops.logdet(s)),
                       lambda a, s: (*torch.linalg.slogdet(a), torch.logdet(s)),
                       [rand(2, 3, 3, seed=12), _spd(3, 13)]),
    # LAPACK's QR signs on both sides; eigen- and singular vectors only up to sign (squared).
    "qr": (ops.linalg.qr, torch.linalg.qr, [rand(2, 4, 3, seed=14)]),
    "eigh": (lambda s: (ops.linalg.eigh(s)[0], ops.linalg.eigh(s)[1] ** 2),
             lambda s: (torch.linalg.eigh(s)[0], torch.linalg.eigh(s)[1] ** 2), [_spd(3, 15)]),
    "svd": (lambda a: (ops.linalg.svd(a, compute_uv=False),
                       *(f ** 2 for f in ops.linalg.svd(a, full_matrices=False))),
            lambda a: (torch.linalg.svdvals(a),
                       *(f ** 2 for f in torch.linalg.svd(a, full_matrices=False))),
            [rand(4, 3, seed=16)]),
    "lstsq_pinv": (lambda a, b: (ops.linalg.lstsq(a, b), ops.linalg.lstsq(a, b, rcond=1e-3),
                                 ops.linalg.pinv(a)),
                   lambda a, b: (torch.linalg.lstsq(a, b).solution,
                                 torch.linalg.pinv(a, rtol=1e-3) @ b, torch.linalg.pinv(a)),
                   [rand(5, 3, seed=17), rand(5, 2, seed=18)]),
}


# The iterative factorisations (Jacobi sweeps, Householder steps), forward and backward, are
# most of the program's 2,800 kernels. On PoCL, which builds a kernel several times slower
# than gcc, they took 4 to 9 minutes of a CI run's 45; the same gingham.linalg kernels run on
# every device in tests/frontend/test_linalg.py, so on opencl this test checks Keras'
# conventions with the other ops only.
_ITERATIVE = ("qr", "eigh", "svd", "lstsq_pinv")


def test_linalg_ops_against_torch(device):
    """keras.ops.linalg's factorisations, solves and norms, forward and gradient, in one
    program: gingham.linalg under Keras' argument conventions (SciPy's 0-based pivots,
    ``lower=``, a batch of vectors for ``b``)."""
    table = LINALG
    if device.startswith("opencl"):
        table = {name: case for name, case in LINALG.items() if name not in _ITERATIVE}
    check_against_torch(device, table, dict(rtol=2e-4, atol=2e-4))


# name: (keras op on the converted inputs, NumPy's result, inputs)
NUMPY = {
    "argmax_int32": (lambda x: ops.argmax(x, axis=1), lambda x: np.argmax(x, 1).astype(np.int32),
                     [rand(3, 4)]),
    "argmin_flat": (ops.argmin, lambda x: np.int32(np.argmin(x)), [rand(3, 4)]),
    "sum_bool_int32": (lambda x: ops.sum(x > 0, axis=0), lambda x: (x > 0).sum(0, dtype=np.int32),
                       [rand(3, 4)]),
    "mean_int_float32": (ops.mean, lambda x: np.float32(x.mean()), [np.arange(6, dtype=np.int32)]),
    "max_keepdims": (lambda x: ops.max(x, axis=0, keepdims=True),
                     lambda x: x.max(0, keepdims=True), [rand(3, 4)]),
    "equal": (lambda a, b: ops.equal(a, b), np.equal,
              [np.array([1, 2, 3], np.int32), np.array([1, 0, 3], np.int32)]),
    "less_scalar_left": (lambda a: ops.less(0.0, a), lambda a: 0.0 < a, [rand(5)]),
    "logical_and": (lambda a, b: ops.logical_and(a > 0, b > 0), lambda a, b: (a > 0) & (b > 0),
                    [rand(5), rand(5, seed=1)]),
    "one_hot": (lambda i: ops.one_hot(i, 4), lambda i: np.eye(4, dtype=np.float32)[i],
                [np.array([0, 3, 1], np.int32)]),
    "one_hot_axis0": (lambda i: ops.one_hot(i, 4, axis=0),
                      lambda i: np.eye(4, dtype=np.float32)[i].T, [np.array([0, 3, 1], np.int32)]),
    "take_flat": (lambda x: ops.take(x, np.array([5, -2], np.int32)),
                  lambda x: np.take(x, [5, -2]), [rand(2, 3)]),
    "split_sections": (lambda x: ops.split(x, [1, 3], axis=1),
                       lambda x: np.split(x, [1, 3], axis=1), [rand(2, 5)]),
    "tile": (lambda x: ops.tile(x, (2, 1)), lambda x: np.tile(x, (2, 1)), [rand(2, 3)]),
    "pad": (lambda x: ops.pad(x, ((1, 0), (2, 1)), constant_values=1.5),
            lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=1.5), [rand(2, 3)]),
    "squeeze": (lambda x: ops.squeeze(x, 1), lambda x: np.squeeze(x, 1), [rand(2, 1, 3)]),
    "moveaxis": (lambda x: ops.moveaxis(x, 0, -1), lambda x: np.moveaxis(x, 0, -1),
                 [rand(2, 3, 4)]),
    "divide_no_nan": (ops.divide_no_nan, lambda a, b: np.where(b == 0, 0, a / np.where(
        b == 0, 1, b)).astype(np.float32), [rand(4), np.array([1, 0, 2, 0], np.float32)]),
    "mod_floor_divide": (lambda a, b: (ops.mod(a, b), ops.floor_divide(a, 3), a % 2.5),
                         lambda a, b: (np.mod(a, b), a // 3, (a % 2.5).astype(np.float32)),
                         [np.array([7, -7, 7, -7, 0], np.int32),
                          np.array([3, 3, -3, -3, 2], np.int32)]),
    "arange": (lambda: ops.arange(1, 7, 2), lambda: np.arange(1, 7, 2, dtype=np.int32), []),
    "full_like": (lambda x: ops.full_like(x, 2.5), lambda x: np.full_like(x, 2.5), [rand(2, 2)]),
    "isinf_isnan": (lambda x: ops.logical_or(ops.isinf(x), ops.isnan(x)),
                    lambda x: np.isinf(x) | np.isnan(x),
                    [np.array([1.0, np.inf, np.nan, -np.inf], np.float32)]),
    "average_pool_same": (lambda x: ops.average_pool(x, 3, 2, "same"),
                          lambda x: _numpy_avg_pool_same(x, 3, 2), [rand(2, 7, 6, 3)]),
    "diag_diagonal": (lambda x, v: (ops.diag(x, 1), ops.diag(v, -1),
                                     ops.diagonal(ops.reshape(x, (2, 3, 2)), 0, 0, 2)),
                      lambda x, v: (np.diag(x, 1), np.diag(v, -1),
                                    np.diagonal(x.reshape(2, 3, 2), 0, 0, 2)),
                      [rand(3, 4), rand(3, seed=1)]),
    "qr_factors": (lambda x: (lambda q, r: (ops.matmul(q, r), ops.matmul(ops.transpose(q), q),
                                            ops.tril(r, -1)))(*ops.qr(x)),
                   lambda x: (x, np.eye(3, dtype=np.float32), np.zeros((3, 3), np.float32)),
                   [rand(4, 3)]),
    "where_nonzero": (lambda x: ops.where(x > 0),
                      lambda x: tuple(i.astype(np.int32) for i in np.nonzero(x > 0)),
                      [rand(3, 4)]),
    "average_pool1d_same": (lambda x: ops.average_pool(x, 3, 2, "same"),
                            lambda x: _numpy_avg_pool_same(x, 3, 2), [rand(2, 8, 3)]),
}


def test_numpy_semantics(device):
    """Results, dtypes and shapes as NumPy (Keras' numpy semantics: argmax gives int32, a
    bool sum int32, an integer mean float32)."""
    with keras.device(device):
        got = {name: _flat(op(*[ops.convert_to_tensor(v) for v in inputs]))
               for name, (op, _, inputs) in NUMPY.items()}
        realize([t for outputs in got.values() for t in outputs])
    for name, (_, numpy_op, inputs) in NUMPY.items():
        expected = _flat(numpy_op(*inputs))
        assert len(got[name]) == len(expected), name
        for g, e in zip(got[name], expected):
            e = np.asarray(e)
            assert g.device == device, name
            assert g.shape == e.shape and g.numpy().dtype == e.dtype, (name, g, e.dtype)
            np.testing.assert_allclose(g.numpy(), e, **TOLERANCE, err_msg=name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_dtypes(dtype, device):
    """Variables and ops in float16 / bfloat16 keep the dtype (Python numbers are weak), and
    compute as NumPy does in that dtype (to its precision)."""
    x = rand(3, 4)
    with keras.device(device):
        variable = keras.Variable(x, dtype=dtype)
        assert variable.dtype == dtype and keras.backend.standardize_dtype(
            variable.value.dtype) == dtype
        y = ops.relu(variable * 2.0 + 1.0)
        total = ops.sum(y, axis=1)
        assert keras.backend.standardize_dtype(y.dtype) == dtype
        variable.assign(y)
        promoted = ops.add(variable, np.ones((3, 4), np.float32))
        assert keras.backend.standardize_dtype(promoted.dtype) == "float32"
    low = x.astype(_numpy_dtype(dtype)).astype(np.float32)
    expected = np.maximum(low * 2.0 + 1.0, 0.0)
    tolerance = 1e-2 if dtype == "bfloat16" else 2e-3
    np.testing.assert_allclose(ops.convert_to_numpy(variable).astype(np.float32), expected,
                               rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(ops.convert_to_numpy(total).astype(np.float32),
                               expected.sum(1), rtol=4 * tolerance, atol=4 * tolerance)


def _numpy_dtype(name):
    import ml_dtypes

    return np.float16 if name == "float16" else ml_dtypes.bfloat16


def test_variables_and_conversion(device, monkeypatch):
    """Variables live on the current device (GINGHAM_DEVICE by default, or keras.device's) as
    leaves; assign keeps their identity; convert_to_tensor infers Keras' dtypes; gingham
    tensors pass through."""
    monkeypatch.setenv("GINGHAM_DEVICE", device)
    assert leaf_of(keras.Variable(np.ones(2, np.float32))).device == device
    monkeypatch.delenv("GINGHAM_DEVICE")
    with keras.device(device):
        variable = keras.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
        leaf = leaf_of(variable)
        assert isinstance(leaf, Tensor) and leaf.device == device and leaf.requires_grad
        before = variable.value  # a snapshot: still computable after the assignment
        doubled = before * 2.0
        variable.assign_add(np.ones((2, 3), np.float32))
        assert leaf_of(variable) is leaf
        np.testing.assert_array_equal(doubled.numpy(),
                                      2 * np.arange(6, dtype=np.float32).reshape(2, 3))
        frozen = keras.Variable(np.zeros(2, np.float32), trainable=False)
        assert not leaf_of(frozen).requires_grad
        assert keras.backend.standardize_dtype(ops.convert_to_tensor(1.5).dtype) == "float32"
        assert keras.backend.standardize_dtype(ops.convert_to_tensor([1, 2]).dtype) == "int32"
        assert ops.convert_to_tensor(before) is before
        assert ops.is_tensor(leaf) and not ops.is_tensor(np.zeros(2))
    np.testing.assert_array_equal(variable.numpy(), np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(ops.convert_to_numpy(variable * 2.0),
                                  2 * np.arange(1, 7, dtype=np.float32).reshape(2, 3))


def _pair(z):
    return z.real, z.imag


def _hann(n):
    return torch.hann_window(n)


# Keras' complex values are (real, imag) pairs: PyTorch's side makes complex tensors of the
# same two leaves, so both differentiate one real loss with respect to the same inputs.
FOURIER = {
    "fft": (lambda a, b: ops.fft((a, b)), lambda a, b: _pair(torch.fft.fft(torch.complex(a, b))),
            [rand(3, 8), rand(3, 8, seed=1)]),
    "fft2": (lambda a, b: ops.fft2((a, b)),
             lambda a, b: _pair(torch.fft.fft2(torch.complex(a, b))),
             [rand(2, 5, 6, seed=2), rand(2, 5, 6, seed=3)]),
    "ifft2": (lambda a, b: ops.ifft2((a, b)),
              lambda a, b: _pair(torch.fft.ifft2(torch.complex(a, b))),
              [rand(4, 3, seed=4), rand(4, 3, seed=5)]),
    "rfft": (lambda a: ops.rfft(a, 10), lambda a: _pair(torch.fft.rfft(a, 10)),
             [rand(2, 3, 7, seed=6)]),
    "irfft": (lambda a, b: ops.irfft((a, b), 9),
              lambda a, b: torch.fft.irfft(torch.complex(a, b), 9),
              [rand(3, 6, seed=7), rand(3, 6, seed=8)]),
    "stft": (lambda a: ops.stft(a, 12, 5, 16, "hann"),
             lambda a: _pair(torch.stft(a, 16, 5, 12, _hann(12),
                                        return_complex=True).transpose(-2, -1)),
             [rand(2, 40, seed=9)]),
    "istft": (lambda a, b: ops.istft((a, b), 16, 4, 16),
              lambda a, b: torch.istft(torch.complex(a, b).transpose(-2, -1), 16, 4, 16,
                                       _hann(16)),
              [rand(2, 11, 9, seed=10), rand(2, 11, 9, seed=11)]),
    "extract_sequences": (lambda a: ops.extract_sequences(a, 7, 3), lambda a: a.unfold(-1, 7, 3),
                          [rand(2, 3, 20, seed=12)]),
}


def test_fourier_ops_against_torch(device):
    """keras.ops' Fourier transforms and stft / istft / extract_sequences: values and
    gradients against torch.fft and torch.stft (what Keras' torch backend calls)."""
    check_against_torch(device, FOURIER, dict(rtol=1e-4, atol=1e-4))


def test_signal_ops_against_keras_numpy_backend(device):
    """Keras' istft off torch.istft's path (a window shorter than the frame, no centring, no
    window), the windows and i0, against Keras' own NumPy backend (SciPy's istft, NumPy's
    windows and i0)."""
    reference = importlib.import_module("keras.src.backend.numpy.math")
    spectrum = ops.stft(rand(2, 50, seed=13), 12, 4, 16)
    spec = tuple(part.numpy() for part in spectrum)
    with keras.device(device):
        for length, window, center in [(None, "hann", False), (45, "hamming", True),
                                       (None, None, True)]:
            got = ops.istft(spec, 12, 4, 16, length=length, window=window, center=center)
            want = reference.istft(spec, 12, 4, 16, length=length, window=window, center=center)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4,
                                       err_msg=f"istft {length} {window} {center}")
        for name, make in [("bartlett", np.bartlett), ("blackman", np.blackman),
                           ("hamming", np.hamming), ("hanning", np.hanning)]:
            got = getattr(ops, name)(9)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got.numpy(), make(9), atol=1e-6, err_msg=name)
        np.testing.assert_allclose(ops.kaiser(8, 4.0).numpy(), np.kaiser(8, 4.0), atol=1e-6)
        values = np.linspace(-9, 9, 13).astype(np.float32)
        got = ops.i0(values)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.numpy(), np.i0(values), rtol=1e-5)


def test_unimplemented_ops_raise():
    """An op the backend lacks raises NotImplementedError naming it, never a wrong result."""
    x = ops.convert_to_tensor(rand(3, 3))
    for call, name in [(lambda: ops.linalg.eig(x), "linalg.eig"),
                       (lambda: ops.linalg.jvp(ops.sin, (x,), (x,)), "linalg.jvp")]:
        with pytest.raises(NotImplementedError, match=f"{name}.*gingham's Keras backend"):
            call()


def test_linalg_rank_and_qr_in_a_compiled_step(device):
    """matrix_rank (NumPy's absolute ``tol``, int32) of a rank-2 matrix, and qr inside a
    gingham.jit step (a device factorisation, not frozen at tracing) against NumPy's."""
    low_rank = rand(4, 2, seed=19) @ rand(2, 5, seed=20)
    with keras.device(device):
        ranks = (ops.linalg.matrix_rank(low_rank), ops.linalg.matrix_rank(low_rank, tol=100.0))
        step = gingham.jit(lambda a: ops.linalg.qr(a))
        for seed in (21, 22):  # the second call replays the compiled step on new values
            x = rand(4, 3, seed=seed)
            q, r = step(gingham.tensor(x, device=device))
            expected_q, expected_r = np.linalg.qr(x)
            np.testing.assert_allclose(q.numpy(), expected_q, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(r.numpy(), expected_r, rtol=1e-5, atol=1e-5)
    assert [(r.numpy().dtype, int(r.numpy())) for r in ranks] == [(np.int32, 2), (np.int32, 0)]


def test_dropout_noise_shape(device):
    """A noise_shape draws one mask of that shape and broadcasts it: whole rows kept (scaled
    by 1 / (1 - rate)) or dropped, both seen."""
    with keras.device(device):
        dropped = keras.random.dropout(ops.ones((64, 3, 5)), 0.5, noise_shape=(None, 1, 5),
                                       seed=3).numpy()
    np.testing.assert_array_equal(dropped, np.broadcast_to(dropped[:, :1], dropped.shape))
    assert set(np.unique(dropped)) == {0.0, 2.0}


def test_bad_arguments_raise():
    """Keras' argument errors: ValueError naming what is wrong."""
    x = ops.convert_to_tensor(rand(1, 5, 5, 3))
    with pytest.raises(ValueError, match="divisible"):
        ops.conv(x, np.ones((3, 3, 2, 4), np.float32))
    with pytest.raises(ValueError, match="4D inputs"):
        ops.dot_product_attention(x[0], x[0], x[0])
    with pytest.raises(ValueError, match="do not fit"):
        ops.slice_update(x, (0, 4, 0, 0), np.ones((1, 2, 5, 3), np.float32))
    with pytest.raises(ValueError, match="noise_shape"):
        keras.random.dropout(x, 0.5, noise_shape=(1, 5))
