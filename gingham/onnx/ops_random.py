"""ONNX's random ops: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial and
training-mode Dropout, drawn
on the device from Tile's Philox ``prng`` (``F.random_uniform`` and ``F.random_normal``, the
draws ``F.dropout`` and the Keras backend use).

A node with a ``seed`` draws from the Philox state ``[seed, 0]``: the same numbers on every
call and every device, as ONNX asks of a seeded node. A node without one draws from the
device's default generator (``F.manual_seed`` seeds it), which a compiled step advances on
every replay, so each call draws anew. The numbers are not NumPy's or onnxruntime's: only
their distribution is ONNX's.

    (noise,) = gingham.onnx.load(model)(x)     # RandomNormalLike(x, mean=0, scale=1)
"""

from __future__ import annotations


import numpy as np

from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import Node, converter


def _dtype(node: Node, default) -> np.dtype:
    from onnx.helper import tensor_dtype_to_np_dtype

    code = node.attr("dtype")
    return np.dtype(default if code is None else tensor_dtype_to_np_dtype(code))


def _state(node: Node) -> Tensor:
    """The Philox state a node draws from: its ``seed``, or the device's default generator."""
    seed = node.attr("seed")
    if seed is None:
        return F._default_generator(node.device).next_state()
    # (ONNX's seed is a float: its integer part keys the stream)
    return node.lift(np.array([int(seed) & 0xFFFFFFFF, 0], np.uint32))


def _uniform(node: Node, shape) -> Tensor:
    """float32 draws in ``[0, 1)`` of ``shape``."""
    return F.random_uniform(tuple(int(s) for s in shape), _state(node))


def _normal(node: Node, shape) -> Tensor:
    """Standard normal float32 draws of ``shape``."""
    return F.random_normal(tuple(int(s) for s in shape), _state(node))


def _like_shape(node: Node):
    if node.op_type.endswith("Like"):
        like = node.inputs[0]
        return tuple(like.shape), _dtype(node, like.dtype)
    return tuple(node.attr("shape")), _dtype(node, np.float32)


@converter("RandomUniform", "RandomUniformLike")
def _random_uniform(node: Node):
    """Uniform draws in ``[low, high)``."""
    shape, dtype = _like_shape(node)
    low, high = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
    y = _uniform(node, shape) * (high - low) + low
    return y if y.dtype == dtype else y.astype(dtype)


@converter("RandomNormal", "RandomNormalLike")
def _random_normal(node: Node):
    """Normal draws of mean ``mean`` and standard deviation ``scale``."""
    shape, dtype = _like_shape(node)
    y = _normal(node, shape) * float(node.attr("scale", 1.0)) + float(node.attr("mean", 0.0))
    return y if y.dtype == dtype else y.astype(dtype)


@converter("Bernoulli")
def _bernoulli(node: Node):
    """1 with probability ``input`` (per element), else 0, in ``dtype`` (default the
    input's)."""
    p = node.tensor(0)
    hit = _uniform(node, p.shape) < p.astype(np.float32)
    return hit.astype(_dtype(node, p.dtype))


@converter("Multinomial")
def _multinomial(node: Node):
    """``sample_size`` class indices per row of ``[batch, classes]`` unnormalised
    log-probabilities: the number of classes whose cumulative probability (``softmax``'s) a
    uniform draw reaches, by inverse transform."""
    scores = node.tensor(0).astype(np.float32)
    if scores.ndim != 2:
        raise ValueError(f"ONNX Multinomial node {node.name!r}: input must be [batch, classes], "
                         f"got shape {scores.shape}")
    batch, classes = scores.shape
    samples = int(node.attr("sample_size", 1))
    cumulative = F.softmax(scores, 1).cumsum(1).reshape(batch, 1, classes)
    draws = _uniform(node, (batch, samples)).reshape(batch, samples, 1)
    index = (cumulative <= draws).astype(np.int32).sum(-1)
    # (a draw above a rounded total of 1 - ulp would count every class)
    index = T.minimum(index, classes - 1)
    return index.astype(_dtype(node, np.int32))


@converter("Dropout")
def _dropout(node: Node):
    """Inference (opsets before 12, or ``training_mode`` false): the identity, the mask all
    true. Training: each element kept with probability ``1 - ratio`` (``uniform >= ratio``,
    :func:`gingham.nn.functional.dropout`'s draw) and scaled by ``1 / (1 - ratio)``."""
    x = node.inputs[0]
    training = node.opset >= 12 and node.input(2) is not None and bool(
        node.constant(2, "training_mode"))
    if not training:
        return [x, np.ones(x.shape, np.bool_)] if node.n_outputs > 1 else x
    ratio = node.constant(1, "ratio")
    ratio = 0.5 if ratio is None else float(ratio)
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ONNX Dropout node {node.name!r}: ratio must be in [0, 1], got {ratio}")
    x = node.tensor(0)
    keep = _uniform(node, x.shape) >= ratio
    scale = 1.0 / (1.0 - ratio) if ratio < 1.0 else 0.0
    y = T.where(keep, x * scale, node.lift(np.zeros((), x.dtype)))
    return [y, keep] if node.n_outputs > 1 else y
