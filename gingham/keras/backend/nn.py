"""``keras.ops.nn`` on gingham tensors: activations, convolutions (1-, 2- and 3-d, grouped,
depthwise, separable, transposed), pooling, normalisation, attention and the
cross-entropies, each built on :mod:`gingham.nn.functional` (Keras' layouts are mapped to
gingham's: kernels ``[*K, C, O]`` become ``[O, C, *K]``, 2-d ``channels_last`` data is
``NHWC``; 1-d and 3-d channels-last data, which gingham's ops take channels-first only, is
permuted around them).

    y = keras.ops.conv(x, kernel, strides=2, padding="same")   # TF's "same" (extra pad last)
    y = keras.ops.depthwise_conv(x, depthwise_kernel)          # groups = channels
"""

from __future__ import annotations

import functools
import math as pymath

import numpy as np

from keras.src import backend as keras_backend
from keras.src.backend.common.backend_utils import (
    compute_conv_transpose_output_crops_for_torch,
    standardize_axis_for_numpy,
)
from keras.src.backend.config import epsilon, standardize_data_format
from keras.src.utils.argument_validation import standardize_tuple

from ...frontend import indexing
from ...frontend import tensor as gt
from ...frontend.tensor import Tensor
from ...nn import functional as F
from ._unsupported import unsupported_module_getattr
from .core import cast, convert_to_tensor, keras_dtype, stop_gradient
from .numpy import _cast, _float, clip, log, moveaxis, sum as reduce_sum


# -- activations -----------------------------------------------------------------------------------


def relu(x): return convert_to_tensor(x).relu()
def relu6(x): return convert_to_tensor(x).clamp(0.0, 6.0)
def sigmoid(x): return _float(x).sigmoid()
def tanh(x): return _float(x).tanh()
def silu(x): return F.silu(_float(x))
def softplus(x): return F.softplus(_float(x))
def elu(x, alpha=1.0): return F.elu(_float(x), alpha)
def leaky_relu(x, negative_slope=0.2): return F.leaky_relu(_float(x), negative_slope)
def log_sigmoid(x): return -F.softplus(-_float(x))
def softsign(x):
    x = _float(x)
    return x / (x.abs() + 1.0)


def hard_sigmoid(x): return ((_float(x) + 3.0) * (1.0 / 6.0)).clamp(0.0, 1.0)
def hard_silu(x): return F.hardswish(_float(x))
def hard_tanh(x): return F.hardtanh(_float(x))
def tanh_shrink(x): return _float(x) - _float(x).tanh()


def selu(x):
    """``scale * elu(x, alpha)`` with the self-normalising constants (PyTorch's)."""
    return 1.0507009873554805 * F.elu(_float(x), 1.6732632423543772)


def celu(x, alpha=1.0):
    x = _float(x)
    return x.relu() + gt.minimum(alpha * ((x * (1.0 / alpha)).exp() - 1.0), 0.0)


def glu(x, axis=-1):
    """The first half of ``axis`` gated by the sigmoid of the second."""
    x = _float(x)
    if x.shape[axis] % 2:
        raise ValueError(f"nn.glu: axis {axis} of shape {x.shape} must have an even size")
    value, gate = x.chunk(2, axis)
    return value * gate.sigmoid()


def soft_shrink(x, threshold=0.5):
    x = _float(x)
    return gt.where(x > threshold, x - threshold, gt.where(x < -threshold, x + threshold, 0.0))


def hard_shrink(x, threshold=0.5):
    x = _float(x)
    return gt.where(x.abs() > threshold, x, 0.0)


def threshold(x, threshold, default_value):
    x = _float(x)
    return gt.where(x > threshold, x, float(default_value))


def squareplus(x, b=4):
    x = _float(x)
    return (x + (x.square() + float(b)).sqrt()) * 0.5


def gelu(x, approximate=True):
    """Keras' default is the tanh approximation (PyTorch's ``approximate="tanh"``)."""
    return F.gelu(_float(x), "tanh" if approximate else "none")


def _shifted(x: Tensor, axes: tuple) -> Tensor:
    """``x`` minus its maximum over ``axes`` (no gradient through the shift: the softmax
    does not depend on it), so that ``exp`` cannot overflow."""
    return x - stop_gradient(x.amax(axes, True))


def _softmax_axes(x: Tensor, axis) -> tuple | None:
    """The axes of a softmax over several (a tuple, or all with None), or None for one."""
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) % x.ndim for a in axis)
    if axis is None and x.ndim > 1:
        return tuple(range(x.ndim))
    return None


def softmax(x, axis=-1):
    """Over one axis (:func:`gingham.nn.functional.softmax`), several, or all (None)."""
    x = _float(x)
    axes = _softmax_axes(x, axis)
    if axes is None:
        return F.softmax(x, -1 if axis is None else axis)
    exponentials = _shifted(x, axes).exp()
    return exponentials / exponentials.sum(dim=axes, keepdim=True)


def log_softmax(x, axis=-1):
    x = _float(x)
    axes = _softmax_axes(x, axis)
    if axes is None:
        return F.log_softmax(x, -1 if axis is None else axis)
    shifted = _shifted(x, axes)
    return shifted - shifted.exp().sum(dim=axes, keepdim=True).log()


# -- convolution and pooling -----------------------------------------------------------------------


def _same_pads(spatial, kernel, strides, dilation) -> list[tuple[int, int]]:
    """TensorFlow's "same": ``ceil(size / stride)`` outputs, the odd pad at the end."""
    pads = []
    for size, k, s, d in zip(spatial, kernel, strides, dilation):
        extent = (k - 1) * d + 1
        out = -(-size // s)
        total = max(0, (out - 1) * s + extent - size)
        pads.append((total // 2, total - total // 2))
    return pads


def _spatial(x: Tensor, channels_last: bool) -> tuple:
    return x.shape[1:-1] if channels_last else x.shape[2:]


def _pad_spatial(x: Tensor, pads, channels_last: bool, value: float = 0.0) -> Tensor:
    """``x`` padded by ``(before, after)`` per spatial axis (F.pad's order: last axis first;
    a negative amount crops)."""
    flat = [0, 0] if channels_last else []
    for before, after in reversed(pads):
        flat += [before, after]
    return F.pad(x, flat, "constant", value)


def _spatial_rank(op: str, x: Tensor) -> int:
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"nn.{op}: inputs must be 3-d, 4-d or 5-d (1-, 2- or 3-d data with "
                         f"batch and channel axes), got shape {x.shape}")
    return nd


def _channels_first(x: Tensor) -> Tensor:
    """``[N, *spatial, C]`` as ``[N, C, *spatial]``: for gingham's 1-d / 3-d convolutions and
    pools and its transposed convolutions, which take channels-first data only."""
    return gt.permute_dims(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))


def _channels_last(x: Tensor) -> Tensor:
    return gt.permute_dims(x, (0, *range(2, x.ndim), 1))


def _in_layout(op, x: Tensor, channels_last: bool, nd: int, **kwargs) -> Tensor:
    """``op(x, ..., data_format=...)`` in Keras' layout, permuting channels-last data
    around a gingham op that takes channels-first data only."""
    if nd == 2:
        return op(x, data_format="NHWC" if channels_last else "NCHW", **kwargs)
    if channels_last:
        return _channels_last(op(_channels_first(x), **kwargs))
    return op(x, **kwargs)


_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """Keras' convolution (1-, 2- or 3-d): kernel ``[*K, C / groups, O]``; input channels a
    multiple of the kernel's are a grouped convolution (``groups = C / kernel C``)."""
    x = convert_to_tensor(inputs)
    kernel = convert_to_tensor(kernel)
    nd = _spatial_rank("conv", x)
    if kernel.ndim != nd + 2:
        raise ValueError(f"nn.conv: kernel must be {nd + 2}-d [*kernel_size, in_channels, "
                         f"out_channels] for {nd}-d data, got shape {kernel.shape}")
    channels_last = standardize_data_format(data_format) == "channels_last"
    strides = standardize_tuple(strides, nd, "strides")
    dilation = standardize_tuple(dilation_rate, nd, "dilation_rate")
    channels = x.shape[-1] if channels_last else x.shape[1]
    if channels % kernel.shape[-2]:
        raise ValueError(f"nn.conv: input channels ({channels}) must be divisible by the "
                         f"kernel's input channels ({kernel.shape[-2]})")
    groups = channels // kernel.shape[-2]
    weight = gt.permute_dims(kernel, (nd + 1, nd, *range(nd)))  # [*K, C, O] -> [O, C, *K]
    pads = 0
    if padding == "same":
        same = _same_pads(_spatial(x, channels_last), kernel.shape[:nd], strides, dilation)
        if all(before == after for before, after in same):
            pads = tuple(before for before, _ in same)
        else:
            x = _pad_spatial(x, same, channels_last)
    elif padding != "valid":
        raise ValueError(f"nn.conv: padding must be 'valid' or 'same', not {padding!r}")
    return _in_layout(lambda data, **kw: _CONV[nd](data, weight, None, strides, pads, dilation,
                                                   groups, **kw), x, channels_last, nd)


def depthwise_conv(inputs, kernel, strides=1, padding="valid", data_format=None,
                   dilation_rate=1):
    """Each input channel convolved with its own ``M`` filters: kernel ``[*K, C, M]``, output
    channel ``c * M + m`` (a grouped convolution with ``groups = C``)."""
    kernel = convert_to_tensor(kernel)
    nd = kernel.ndim - 2
    depthwise = gt.reshape(kernel, kernel.shape[:nd] + (1, kernel.shape[-2] * kernel.shape[-1]))
    return conv(inputs, depthwise, strides, padding, data_format, dilation_rate)


def separable_conv(inputs, depthwise_kernel, pointwise_kernel, strides=1, padding="valid",
                   data_format=None, dilation_rate=1):
    """A depthwise convolution followed by a 1x1 (pointwise) one."""
    depthwise = depthwise_conv(inputs, depthwise_kernel, strides, padding, data_format,
                               dilation_rate)
    return conv(depthwise, pointwise_kernel, 1, "valid", data_format, dilation_rate)


_CONV_TRANSPOSE = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def conv_transpose(inputs, kernel, strides=1, padding="valid", output_padding=None,
                   data_format=None, dilation_rate=1):
    """The transposed convolution, kernel ``[*K, O, C]``. Keras' "same" may crop unequally
    on the two sides, which PyTorch's symmetric ``padding`` cannot say: the full output
    (``padding=0``) is cropped (or zero-padded) afterwards by Keras' own crop amounts, as
    Keras' PyTorch backend does."""
    x = convert_to_tensor(inputs)
    kernel = convert_to_tensor(kernel)
    nd = _spatial_rank("conv_transpose", x)
    channels_last = standardize_data_format(data_format) == "channels_last"
    channels = x.shape[-1] if channels_last else x.shape[1]
    if kernel.ndim != nd + 2 or kernel.shape[-1] != channels:
        raise ValueError(f"nn.conv_transpose: kernel must be {nd + 2}-d [*kernel_size, "
                         f"out_channels, in_channels={channels}], got shape {kernel.shape}")
    strides = standardize_tuple(strides, nd, "strides")
    dilation = standardize_tuple(dilation_rate, nd, "dilation_rate")
    crops = compute_conv_transpose_output_crops_for_torch(
        x.shape, kernel.shape, strides, padding, output_padding, dilation)
    weight = gt.permute_dims(kernel, (nd + 1, nd, *range(nd)))  # [*K, O, C] -> [C, O, *K]
    data = _channels_first(x) if channels_last else x
    full = _CONV_TRANSPOSE[nd](data, weight, None, strides, 0, 0, 1, dilation)
    cropped = _pad_spatial(full, [(-left, -right) for left, right in crops], False)
    return _channels_last(cropped) if channels_last else cropped


def _pool_arguments(x: Tensor, pool_size, strides, data_format):
    nd = _spatial_rank("pool", x)
    pool_size = standardize_tuple(pool_size, nd, "pool_size")
    strides = pool_size if strides is None else standardize_tuple(strides, nd, "strides")
    channels_last = standardize_data_format(data_format) == "channels_last"
    return nd, pool_size, strides, channels_last


_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def max_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    x = convert_to_tensor(inputs)
    nd, pool_size, strides, channels_last = _pool_arguments(x, pool_size, strides, data_format)
    if padding == "same":
        same = _same_pads(_spatial(x, channels_last), pool_size, strides, (1,) * nd)
        x = _pad_spatial(x, same, channels_last, float("-inf"))
    return _in_layout(lambda data, **kw: _MAX_POOL[nd](data, pool_size, strides, **kw), x,
                      channels_last, nd)


def average_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """Keras' (TensorFlow's) average: with "same", each window is divided by the count of
    its taps inside the input, not by the pool's size."""
    x = convert_to_tensor(inputs)
    nd, pool_size, strides, channels_last = _pool_arguments(x, pool_size, strides, data_format)
    if padding != "same":
        return _in_layout(lambda data, **kw: _AVG_POOL[nd](data, pool_size, strides, **kw), x,
                          channels_last, nd)
    spatial = _spatial(x, channels_last)
    same = _same_pads(spatial, pool_size, strides, (1,) * nd)
    padded = _pad_spatial(x, same, channels_last)
    # a sum (the mean times the window's size): divided below by the taps inside the input
    window = float(np.prod(pool_size))
    total = _in_layout(lambda data, **kw: _AVG_POOL[nd](data, pool_size, strides, **kw),
                       padded, channels_last, nd) * window
    counts = [np.clip(np.arange(o) * s - before + k, 0, size) - np.clip(
        np.arange(o) * s - before, 0, size) for o, s, (before, _), k, size
        in zip(_spatial(total, channels_last), strides, same, pool_size, spatial)]
    count = functools.reduce(np.multiply.outer, counts).astype(np.float32)
    count = count[..., None] if channels_last else count
    return total / convert_to_tensor(count, keras_dtype(total))


# -- normalisation ---------------------------------------------------------------------------------


def moments(x, axes, keepdims=False, synchronized=False):
    if synchronized:
        raise NotImplementedError("moments(synchronized=True) is not implemented by gingham's "
                                  "Keras backend")
    x = convert_to_tensor(x)
    axes = standardize_axis_for_numpy(axes)
    original = keras_dtype(x)
    # float16's range is too small for statistics: computed in float32, as Keras does.
    if original == "float16":
        x = cast(x, "float32")
    mean = x.mean(dim=axes, keepdim=keepdims)
    variance = x.var(axes, keepdim=keepdims, correction=0)
    if original == "float16":
        limit = float(np.finfo(np.float16).max)
        mean = cast(clip(mean, -limit, limit), original)
        variance = cast(clip(variance, -limit, limit), original)
    return mean, variance


def batch_normalization(x, mean, variance, axis, offset=None, scale=None, epsilon=1e-3):
    x = convert_to_tensor(x)
    shape = [1] * x.ndim
    shape[axis] = convert_to_tensor(mean).shape[0]

    def broadcast(v):
        return convert_to_tensor(v).reshape(tuple(shape))

    inverse = (broadcast(variance) + epsilon).rsqrt()
    if scale is not None:
        inverse = inverse * broadcast(scale)
    shift = -broadcast(mean) * inverse
    if offset is not None:
        shift = shift + broadcast(offset)
    return x * inverse + shift


# -- attention -------------------------------------------------------------------------------------


def dot_product_attention(query, key, value, bias=None, mask=None, scale=None, is_causal=False,
                          flash_attention=None, attn_logits_soft_cap=None):
    """Keras' attention on ``[B, T, N, H]`` tensors (N heads; key and value may have fewer,
    dividing N): :func:`gingham.nn.functional.scaled_dot_product_attention` on the heads-first
    view. A boolean ``mask`` (True: attend) and ``is_causal`` combine; a query whose keys are
    all masked gets zero output (PyTorch's attention), not the mean of the values that
    Keras' large-negative masking gives. ``flash_attention`` is how, not what: ignored."""
    if attn_logits_soft_cap is not None:
        raise NotImplementedError("nn.dot_product_attention with attn_logits_soft_cap is not "
                                  "implemented by gingham's Keras backend yet")
    if bias is not None and mask is not None:
        raise ValueError("Only one of `bias` and `mask` can be provided. Received both.")
    tensors = [convert_to_tensor(x) for x in (query, key, value)]
    if any(x.ndim != 4 for x in tensors):
        raise ValueError("`dot_product_attention` only supports 4D inputs. Received: "
                         f"query.shape={tensors[0].shape}, key.shape={tensors[1].shape}, "
                         f"value.shape={tensors[2].shape}.")
    dtype = keras_backend.result_type(*[keras_dtype(x) for x in tensors])
    query, key, value = [gt.permute_dims(_cast(x, dtype), (0, 2, 1, 3)) for x in tensors]
    attn_mask = None
    if mask is not None:
        attn_mask = cast(mask, "bool")
        if is_causal:  # PyTorch takes a mask or is_causal: the causal one folded into it
            causal = np.tril(np.ones((query.shape[-2], key.shape[-2]), bool))
            attn_mask = attn_mask & convert_to_tensor(causal)
            is_causal = False
    elif bias is not None:
        attn_mask = convert_to_tensor(bias, dtype)
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask, is_causal=bool(is_causal), scale=scale,
        enable_gqa=query.shape[1] != key.shape[1])
    return gt.permute_dims(output, (0, 2, 1, 3))


# -- losses ----------------------------------------------------------------------------------------


def one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    if sparse:
        raise NotImplementedError("one_hot(sparse=True) is not supported by gingham's Keras "
                                  "backend")
    x = convert_to_tensor(x)
    if "int" not in keras_dtype(x):
        x = _cast(x, "int64")
    encoded = _cast(F.one_hot(x, int(num_classes)), dtype or keras_backend.floatx())
    if axis != -1 and axis != encoded.ndim - 1:
        encoded = moveaxis(encoded, -1, axis)
    return encoded


def _log_probabilities(output: Tensor, from_logits: bool, axis: int) -> Tensor:
    if from_logits:
        return log_softmax(output, axis)
    output = output / reduce_sum(output, axis, keepdims=True)
    return log(clip(output, epsilon(), 1.0 - epsilon()))


def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    target, output = convert_to_tensor(target), _float(output)
    if target.shape != output.shape:
        raise ValueError("Arguments `target` and `output` must have the same shape. Received: "
                         f"target.shape={target.shape}, output.shape={output.shape}")
    if output.ndim < 1:
        raise ValueError("Arguments `target` and `output` must be at least rank 1. Received: "
                         f"target.shape={target.shape}, output.shape={output.shape}")
    log_prob = _log_probabilities(output, from_logits, axis)
    return -(_cast(target, keras_dtype(log_prob)) * log_prob).sum(dim=axis)


def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    target, output = convert_to_tensor(target), _float(output)
    labels = target  # before squeezing: a step's argument itself, which jit checks per call
    if target.ndim == output.ndim and target.shape[-1] == 1:
        target = target.squeeze(-1)
    if output.ndim < 1:
        raise ValueError("Argument `output` must be at least rank 1. Received: "
                         f"output.shape={output.shape}")
    if target.shape != output.shape[:-1]:
        raise ValueError("Arguments `target` and `output` must have the same shape up until "
                         f"the last dimension: target.shape={target.shape}, "
                         f"output.shape={output.shape}")
    classes = output.shape[axis]
    # labels outside [0, classes) would pick no class (a one-hot row of zeros, a loss of 0):
    # refused, as Keras' PyTorch backend does, where the host knows them (a batch of fit)
    indexing._check_range("sparse_categorical_crossentropy", labels, classes,
                          f"{classes} classes (output shape {output.shape})", name="target")
    log_prob = _log_probabilities(output, from_logits, axis)
    chosen = one_hot(target, output.shape[axis], axis=axis, dtype=keras_dtype(log_prob))
    return -(chosen * log_prob).sum(dim=axis)


def binary_crossentropy(target, output, from_logits=False):
    target, output = convert_to_tensor(target), _float(output)
    if target.shape != output.shape:
        raise ValueError("Arguments `target` and `output` must have the same shape. Received: "
                         f"target.shape={target.shape}, output.shape={output.shape}")
    target = _cast(target, keras_dtype(output))
    if from_logits:
        # log(sigmoid(z)) = -softplus(-z), log(1 - sigmoid(z)) = -softplus(z): no clipping,
        # as PyTorch's binary_cross_entropy_with_logits.
        return target * F.softplus(-output) + (1.0 - target) * F.softplus(output)
    output = clip(output, epsilon(), 1.0 - epsilon())
    return -(target * output.log() + (1.0 - target) * (1.0 - output).log())


# --- elementwise math and reductions ops ---
def sparse_sigmoid(x):
    """0 up to -1, 1 from 1, ``(x + 1) / 2`` between."""
    x = _float(x)
    return gt.where(x <= -1.0, 0.0, gt.where(x >= 1.0, 1.0, (x + 1.0) * 0.5))


def sparse_plus(x):
    """0 up to -1, ``x`` from 1, ``(x + 1)^2 / 4`` between."""
    x = _float(x)
    return gt.where(x <= -1.0, 0.0, gt.where(x < 1.0, (x + 1.0).square() * 0.25, x))


def psnr(x1, x2, max_val):
    """The peak signal-to-noise ratio in dB, ``20 log10(max_val) - 10 log10(mse)``."""
    if tuple(x1.shape) != tuple(x2.shape):
        raise ValueError(f"Input shapes {x1.shape} and {x2.shape} must match for PSNR "
                         "calculation. ")
    a, b = _float(x1), _float(x2)
    mse = (a - b).square().mean()
    return 20.0 * pymath.log10(float(max_val)) - 10.0 * mse.log10()


# --- shapes, layout and normalisation ops ---


def _channels_last_format(data_format) -> bool:
    return standardize_data_format(data_format) == "channels_last"


def depth_to_space(x, block_size, data_format="channels_last"):
    """Depth into ``block_size x block_size`` blocks of pixels: channels-first is PyTorch's
    pixel shuffle; channels-last takes the block's position first in the depth, then the
    channel (TensorFlow's order), as Keras' other backends."""
    x = convert_to_tensor(x)
    b = int(block_size)
    if x.ndim != 4 or x.shape[3 if _channels_last_format(data_format) else 1] % (b * b):
        raise ValueError(f"nn.depth_to_space: input must be 4-d with channels divisible by "
                         f"block_size**2 = {b * b}, got shape {x.shape}")
    if not _channels_last_format(data_format):
        return F.pixel_shuffle(x, b)
    n, h, w, c = x.shape
    blocks = x.reshape(n, h, w, b, b, c // (b * b)).permute(0, 1, 3, 2, 4, 5)
    return blocks.reshape(n, h * b, w * b, c // (b * b))


def space_to_depth(x, block_size, data_format="channels_last"):
    """The inverse of :func:`depth_to_space`."""
    x = convert_to_tensor(x)
    b = int(block_size)
    spatial = x.shape[1:3] if _channels_last_format(data_format) else x.shape[2:]
    if x.ndim != 4 or spatial[0] % b or spatial[1] % b:
        raise ValueError(f"nn.space_to_depth: input must be 4-d with height and width "
                         f"divisible by block_size {b}, got shape {x.shape}")
    if not _channels_last_format(data_format):
        return F.pixel_unshuffle(x, b)
    n, h, w, c = x.shape
    blocks = x.reshape(n, h // b, b, w // b, b, c).permute(0, 1, 3, 2, 4, 5)
    return blocks.reshape(n, h // b, w // b, b * b * c)


_ADAPTIVE_AVG = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}
_ADAPTIVE_MAX = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}


def _adaptive_pool(pools, inputs, output_size, data_format):
    x = convert_to_tensor(inputs)
    nd = _spatial_rank("adaptive_pool", x)
    size = standardize_tuple(output_size, nd, "output_size")
    pool = pools[nd]
    channels_first = _channels_first(x) if _channels_last_format(data_format) else x
    pooled = pool(channels_first, size[0] if nd == 1 else size)
    return _channels_last(pooled) if _channels_last_format(data_format) else pooled


def adaptive_average_pool(inputs, output_size, data_format=None):
    """PyTorch's adaptive average pool (window ``i`` spans ``floor(i * L / out)`` to
    ``ceil((i + 1) * L / out)``) in Keras' layout."""
    return _adaptive_pool(_ADAPTIVE_AVG, inputs, output_size, data_format)


def adaptive_max_pool(inputs, output_size, data_format=None):
    return _adaptive_pool(_ADAPTIVE_MAX, inputs, output_size, data_format)


def multi_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    """1 at each class index listed in a row of ``x`` (the max of the rows' one-hots)."""
    x = convert_to_tensor(x)
    encoded = one_hot(_cast(x, "int32"), num_classes, axis=axis, dtype=dtype, sparse=sparse)
    return encoded.amax(1 if x.ndim > 1 else 0)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002 (Keras' name)
    return F.unfold(convert_to_tensor(input), kernel_size, dilation, padding, stride)


def fold(x, output_size, kernel_size, dilation=1, padding=0, stride=1):
    return F.fold(convert_to_tensor(x), output_size, kernel_size, dilation, padding, stride)


def sparsemax(x, axis=-1):
    """The Euclidean projection of ``x`` onto the probability simplex along ``axis``
    (Martins & Astudillo, 2016): ``max(x - tau, 0)``, where ``tau = (sum of the k largest - 1)
    / k`` and ``k`` counts the sorted values ``z_j`` with ``1 + j z_j > z_1 + .. + z_j``. The
    outputs sum to 1, many are exactly 0; the gradient flows through the sort and ``tau``.

        keras.ops.sparsemax([1.0, 0.5, 0.2])            # [0.75, 0.25, 0.0]
    """
    x = _float(x)
    axis = axis % x.ndim
    ordered = x.sort(axis, descending=True).values
    cumulative = ordered.cumsum(axis)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    ranks = convert_to_tensor(np.arange(1, x.shape[axis] + 1).reshape(shape), keras_dtype(x))
    support = ordered * ranks > cumulative - 1.0
    k = support.astype(np.int32).sum(axis, keepdim=True)
    tau = (cumulative.take_along_dim(k - 1, axis) - 1.0) / _cast(k, keras_dtype(x))
    return (x - tau).clamp(0.0, None)


# -- connectionist temporal classification ---------------------------------------------------------


def ctc_loss(target, output, target_length, output_length, mask_index=0):
    """The CTC loss of each sequence (:func:`gingham.nn.functional.ctc_loss`, reduction
    "none") of logits ``output [batch, time, classes]`` against padded integer ``target
    [batch, length]``, ``mask_index`` the blank, as Keras' PyTorch backend.

        loss = keras.ops.ctc_loss(labels, logits, label_lengths, logit_lengths)   # [batch]
    """
    output = _float(output)
    if output.ndim != 3:
        raise ValueError(f"nn.ctc_loss: output must be [batch, time, classes], got shape "
                         f"{output.shape}")
    log_probs = F.log_softmax(gt.permute_dims(output, (1, 0, 2)), -1)
    lengths = [_cast(convert_to_tensor(v), "int64") for v in (output_length, target_length)]
    return F.ctc_loss(log_probs, convert_to_tensor(target), *lengths, blank=int(mask_index),
                      reduction="none")


def ctc_decode(inputs, sequence_lengths, strategy="greedy", beam_width=100, top_paths=1,
               merge_repeated=True, mask_index=0):
    """Greedy CTC decoding, as Keras' backends: the best class of each step (steps past a
    sequence's length, repeats when ``merge_repeated``, and blanks dropped), the labels moved
    to the front and -1 after them: ``([1, batch, time] int32, [batch, 1])``, the scores the
    negated sum of each step's best input. ``strategy="beam_search"`` is not implemented.

        decoded, scores = keras.ops.ctc_decode(probabilities, lengths)
    """
    if strategy == "beam_search":
        raise NotImplementedError("nn.ctc_decode(strategy='beam_search') is not implemented "
                                  "by gingham's Keras backend yet; use strategy='greedy'")
    if strategy != "greedy":
        raise ValueError(f"Invalid strategy {strategy}. Supported values are 'greedy' and "
                         "'beam_search'.")
    x = _float(inputs)
    if x.ndim != 3:
        raise ValueError(f"nn.ctc_decode: inputs must be [batch, time, classes], got shape "
                         f"{x.shape}")
    batch, steps, classes = x.shape
    blank = classes - 1 if mask_index is None else int(mask_index)
    lengths = _cast(convert_to_tensor(sequence_lengths), "int32").reshape(batch, 1)
    step = convert_to_tensor(np.arange(steps, dtype=np.int32).reshape(1, steps))
    ended = step >= lengths
    labels = gt.where(ended, blank, x.argmax(-1).astype(np.int32))
    scores = gt.where(ended, 0.0, x.amax(-1))
    if merge_repeated:
        repeated = gt.concat([ended[:, :1] & False, labels[:, 1:] == labels[:, :-1]], 1)
        labels = gt.where(repeated, blank, labels)
    dropped = labels == blank
    labels = gt.where(dropped, -1, labels)
    # a stable sort of the kept steps' positions (dropped ones count as the last) packs them
    order = gt.where(dropped, steps, step.broadcast_to((batch, steps))).argsort(-1)
    labels = labels.take_along_dim(order, -1)
    return labels.unsqueeze(0), -scores.sum(1, keepdim=True)


__getattr__ = unsupported_module_getattr(__name__, "nn")
