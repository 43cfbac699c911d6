"""ONNX converters of the shape, layout and normalisation ops (Tile, DepthToSpace,
SpaceToDepth, Trilu, EyeLike, Einsum, LRN, LpNormalization, MeanVarianceNormalization,
GroupNormalization), each onto the ``gingham.Tensor`` / ``gingham.nn.functional`` op of the
same meaning. Imported once by :mod:`gingham.onnx.ops`, which registers them.

    @converter("Trilu")
    def _trilu(node: Node): ...       # T.triu / T.tril with the host k
"""

from __future__ import annotations

import numpy as np

from ..frontend import tensor as T
from ..nn import functional as F
from .ops import HOST_INPUTS, Node, converter

HOST_INPUTS.update({"Tile": (1,), "Trilu": (1,)})


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
