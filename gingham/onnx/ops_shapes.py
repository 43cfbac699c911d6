"""ONNX converters of the shape, layout and normalisation ops (Tile, DepthToSpace,
SpaceToDepth, Trilu, EyeLike, Einsum, LRN, LpNormalization, MeanVarianceNormalization,
GroupNormalization, RMSNormalization, LpPool, GlobalLpPool, OneHot, ReverseSequence,
CenterCropPad), each onto the ``gingham.Tensor`` / ``gingham.nn.functional`` op of the
same meaning. Imported once by :mod:`gingham.onnx.ops`, which registers them.

    @converter("Trilu")
    def _trilu(node: Node): ...       # T.triu / T.tril with the host k
"""

from __future__ import annotations

import numpy as np

from ..frontend import indexing
from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import HOST_INPUTS, Node, _axis, _pad_spatial, _spatial_attributes, converter

# OneHot's depth, ReverseSequence's lengths and CenterCropPad's shape decide the result's
# shape or which elements move: known when the graph is traced.
HOST_INPUTS.update({"Tile": (1,), "Trilu": (1,), "OneHot": (1,), "ReverseSequence": (1,),
                    "CenterCropPad": (1,)})


@converter("Tile")
def _tile(node: Node):
    repeats = node.ints(1, "repeats")
    if isinstance(node.inputs[0], np.ndarray):
        return np.tile(node.inputs[0], repeats)
    return node.tensor(0).repeat(*repeats)


@converter("DepthToSpace")
def _depth_to_space(node: Node):
    """``CRD`` is PyTorch's pixel shuffle; ``DCR`` (the default) takes the block's position
    first in the depth, then the channel."""
    x, b = node.tensor(0), int(node.attr("blocksize"))
    if node.attr("mode", "DCR") == "CRD":
        return F.pixel_shuffle(x, b)
    n, c, h, w = x.shape
    blocks = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return blocks.reshape(n, c // (b * b), h * b, w * b)


@converter("SpaceToDepth")
def _space_to_depth(node: Node):
    """The inverse of DepthToSpace's ``DCR`` mode (block position first in the depth)."""
    x, b = node.tensor(0), int(node.attr("blocksize"))
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return blocks.reshape(n, c * b * b, h // b, w // b)


@converter("Trilu")
def _trilu(node: Node):
    k = node.ints(1, "k")
    diagonal = k[0] if k else 0
    if isinstance(node.inputs[0], np.ndarray):  # a causal mask made of constants and shapes
        triangle = np.triu if node.attr("upper", 1) else np.tril
        return triangle(node.inputs[0], diagonal)
    x = node.tensor(0)
    return T.triu(x, diagonal) if node.attr("upper", 1) else T.tril(x, diagonal)


@converter("EyeLike")
def _eye_like(node: Node):
    """A constant: ones on the ``k``-th diagonal of the input's 2-d shape."""
    from onnx.helper import tensor_dtype_to_np_dtype

    like = node.inputs[0]
    dtype = node.attr("dtype")
    dtype = np.dtype(tensor_dtype_to_np_dtype(dtype)) if dtype is not None else like.dtype
    rows, cols = like.shape
    return np.eye(rows, cols, int(node.attr("k", 0)), dtype=dtype)


@converter("Einsum")
def _einsum(node: Node):
    return T.einsum(node.attr("equation"), *[node.tensor(i) for i in range(len(node.inputs))])


@converter("LRN")
def _lrn(node: Node):
    """ONNX's window is centred as PyTorch's (``floor((size - 1) / 2)`` channels before,
    ``ceil`` after); PyTorch pads ``size // 2`` before, which differs for an even size."""
    size = int(node.attr("size"))
    if size % 2 == 0:
        raise node.fail(f"an even size ({size}) is not supported (its window is placed "
                        "differently from PyTorch's)")
    return F.local_response_norm(node.tensor(0), size, node.attr("alpha", 1e-4),
                                 node.attr("beta", 0.75), node.attr("bias", 1.0))


@converter("LpNormalization")
def _lp_normalization(node: Node):
    """``x / ||x||_p`` along ``axis`` (p 1 or 2), with no epsilon (ONNX adds none)."""
    x, p = node.tensor(0), int(node.attr("p", 2))
    axis = int(node.attr("axis", -1))
    if p == 1:
        norm = x.abs().sum(axis, keepdim=True)
    elif p == 2:
        norm = x.square().sum(axis, keepdim=True).sqrt()
    else:
        raise node.fail(f"p must be 1 or 2, not {p}")
    return x / norm


@converter("MeanVarianceNormalization")
def _mean_variance_normalization(node: Node):
    """``(x - mean) / sqrt(var)`` over ``axes`` (the batch and spatial axes by default;
    biased variance, ONNX's epsilon 1e-9)."""
    x = node.tensor(0)
    axes = tuple(int(a) for a in node.attr("axes", [0, 2, 3]))
    centred = x - x.mean(axes, keepdim=True)
    return centred / (centred.square().mean(axes, keepdim=True).sqrt() + 1e-9)


@converter("GroupNormalization")
def _group_normalization(node: Node):
    """F.group_norm; before opset 21 the scale and bias are per group, repeated over each
    group's channels."""
    x, scale, bias = node.tensor(0), node.tensor(1), node.tensor(2)
    groups = int(node.attr("num_groups"))
    channels = x.shape[1]
    if scale.shape[0] == groups != channels:
        scale = scale.repeat_interleave(channels // groups)
        bias = bias.repeat_interleave(channels // groups)
    return F.group_norm(x, groups, scale, bias, node.attr("epsilon", 1e-5))


@converter("RMSNormalization")
def _rms_normalization(node: Node):
    """``x / sqrt(mean(x^2) + epsilon) * scale`` over the axes from ``axis`` on (opset 23),
    F.rms_norm with the scale broadcast to those axes."""
    x = node.tensor(0)
    shape = x.shape[_axis(int(node.attr("axis", -1)), x.ndim):]
    scale = node.tensor(1).broadcast_to(shape)
    return F.rms_norm(x, shape, scale, node.attr("epsilon", 1e-5))


def _lp_power(x: Tensor, p: float) -> Tensor:
    """``|x|^p``, exact for the usual p = 1 and 2."""
    return x.abs() if p == 1 else x.square() if p == 2 else x.abs() ** p


def _lp_root(total: Tensor, p: float) -> Tensor:
    return total if p == 1 else total.sqrt() if p == 2 else total ** (1.0 / p)


_DEPTHWISE = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@converter("LpPool")
def _lp_pool(node: Node):
    """``(sum of |x|^p over each window)^(1/p)``: the window sums are a depthwise convolution
    with a kernel of ones (so strides, dilations and pads are the convolution's; a padded tap
    adds 0, as ONNX's)."""
    x = node.tensor(0)
    nd = x.ndim - 2
    if nd not in _DEPTHWISE:
        raise node.fail(f"{nd}-d pooling is not supported (1, 2 or 3 spatial axes)")
    if node.attr("ceil_mode", 0):
        raise node.fail("ceil_mode is not supported")
    kernel = [int(k) for k in node.attr("kernel_shape")]
    p = float(node.attr("p", 2))
    strides, dilations, begin, end = _spatial_attributes(node, x, kernel)
    powers = _lp_power(x, p)
    if begin != end:  # asymmetric: pad first (zeros add nothing to the sums)
        powers, begin = _pad_spatial(powers, begin, end), [0] * nd
    channels = x.shape[1]
    ones = node.lift(np.ones((channels, 1, *kernel), x.dtype))
    sums = _DEPTHWISE[nd](powers, ones, None, strides, begin, dilations, channels)
    return _lp_root(sums, p)


@converter("GlobalLpPool")
def _global_lp_pool(node: Node):
    """``(sum of |x|^p over the spatial axes)^(1/p)``, the axes kept as size 1."""
    x = node.tensor(0)
    p = float(node.attr("p", 2))
    return _lp_root(_lp_power(x, p).sum(tuple(range(2, x.ndim)), keepdim=True), p)


@converter("OneHot")
def _one_hot(node: Node):
    """``values[1]`` where an index (negative: counted from ``depth``) equals its position
    along the new ``axis``, ``values[0]`` elsewhere (an index outside ``[-depth, depth)``
    matches none), in the values' dtype."""
    depth = node.constant(1, "depth")
    depth = int(np.asarray(depth).reshape(-1)[0])
    indices = node.tensor(0)
    if indices.dtype.kind != "i":  # ONNX casts other index types to int64
        indices = indices.astype(np.int64)
    axis = _axis(int(node.attr("axis", -1)), indices.ndim + 1)
    wrapped = T.where(indices < 0, indices + depth, indices).unsqueeze(axis)
    positions = np.arange(depth, dtype=wrapped.dtype).reshape(
        (depth,) + (1,) * (indices.ndim - axis))
    values = node.tensor(2)
    return T.where(wrapped == node.lift(positions), values[1], values[0])


@converter("ReverseSequence")
def _reverse_sequence(node: Node):
    """Each batch entry's first ``sequence_lens[b]`` steps along ``time_axis`` reversed, the
    rest kept: one gather along the time axis with positions made on the host."""
    x = node.tensor(0)
    lengths = node.ints(1, "sequence_lens")
    batch_axis, time_axis = int(node.attr("batch_axis", 1)), int(node.attr("time_axis", 0))
    steps = np.arange(x.shape[time_axis])
    sources = np.stack([np.where(steps < n, n - 1 - steps, steps) for n in lengths])
    if time_axis < batch_axis:  # sources is [batch, time]: put its axes in x's order
        sources = sources.T
    shape = [1] * x.ndim
    shape[batch_axis], shape[time_axis] = x.shape[batch_axis], x.shape[time_axis]
    index = np.broadcast_to(sources.reshape(shape), x.shape).astype(np.int64)
    return indexing.gather(x, time_axis, node.lift(np.ascontiguousarray(index)))


@converter("CenterCropPad")
def _center_crop_pad(node: Node):
    """Each of ``axes`` (all by default) cropped or zero-padded to ``shape``, centred: a crop
    drops ``(size - target) // 2`` elements before, a pad adds ``(target - size) // 2``."""
    x = node.tensor(0)
    targets = node.ints(1, "shape")
    axes = [_axis(int(a), x.ndim) for a in node.attr("axes", range(x.ndim))]
    if len(axes) != len(targets):
        raise node.fail(f"shape has {len(targets)} entries for {len(axes)} axes")
    amounts = [0, 0] * x.ndim  # F.pad's (begin, end) pairs, last axis first
    for axis, target in zip(axes, targets):
        size = x.shape[axis]
        if target < size:
            x = x.narrow(axis, (size - target) // 2, target)
        elif target > size:
            before = (target - size) // 2
            position = 2 * (x.ndim - 1 - axis)
            amounts[position:position + 2] = [before, target - size - before]
    return F.pad(x, amounts) if any(amounts) else x
