"""ONNX converters of the elementwise math ops, the activations and the reductions that
:mod:`gingham.onnx.ops` lacks: the inverse and hyperbolic trigonometric functions, Round, Mod,
IsNaN, IsInf, Det, Mish, Softsign, Celu, Shrink, ThresholdedRelu, Swish, Hardmax, CastLike,
BitShift, the Bitwise ops, ReduceL1 / L2 / LogSum / LogSumExp / SumSquare, CumSum, CumProd,
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Each maps onto the ``gingham.Tensor``
or ``gingham.nn.functional`` op of the same meaning; a node whose inputs are all host
constants is folded with NumPy. Imported once by :mod:`gingham.onnx.ops`, which registers them.

    @converter("Softsign")
    def _softsign(node: Node):
        x = node.tensor(0)
        return x / (x.abs() + 1.0)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import linalg
from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import (HOST_INPUTS, Node, _axis, _binary, _host, _reduction_converter,
                  _unary_converter, converter)

# The reductions' axes (an input from opset 18) and the cumulative ops' axis decide the
# result's shape: known when the graph is traced.
HOST_INPUTS.update({"ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSum": (1,),
                    "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,), "CumSum": (1,),
                    "CumProd": (1,)})


# -- elementwise math ------------------------------------------------------------------------------


# (NumPy function, Tensor method) per unary op of the input's dtype.
_UNARY = {
    "Acos": (np.arccos, "acos"), "Acosh": (np.arccosh, "acosh"),
    "Asin": (np.arcsin, "asin"), "Asinh": (np.arcsinh, "asinh"),
    "Atan": (np.arctan, "atan"), "Atanh": (np.arctanh, "atanh"),
    "Tan": (np.tan, "tan"), "Sinh": (np.sinh, "sinh"), "Cosh": (np.cosh, "cosh"),
    # Half to even on both sides: NumPy's rint and Tile's round (C's, OpenCL's, CUDA's rint).
    "Round": (np.rint, "round"),
    "BitwiseNot": (np.invert, "__invert__"),
}

for _name, (_fn, _method) in _UNARY.items():
    converter(_name)(_unary_converter(_fn, _method))


def _host_python_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":  # NumPy's integer remainder by zero warns; ONNX leaves it open
        return np.remainder(a, np.where(b == 0, 1, b))
    return np.remainder(a, b)


@converter("Mod")
def _mod(node: Node):
    """``fmod=0``: the remainder takes the divisor's sign (Python's, PyTorch's
    ``remainder``), for integers and floats; ``fmod=1``: the dividend's (C's ``fmod``)."""
    with np.errstate(invalid="ignore"):  # a folded inf % x or x % 0 is NaN, as ONNX says
        if node.attr("fmod", 0):
            return _binary(node, np.fmod, T.fmod)
        return _binary(node, _host_python_remainder, T.remainder)


@converter("IsNaN")
def _is_nan(node: Node):
    x = node.inputs[0]
    return _host(np.isnan(x)) if isinstance(x, np.ndarray) else x.isnan()


@converter("IsInf")
def _is_inf(node: Node):
    x = node.inputs[0]
    negative, positive = node.attr("detect_negative", 1), node.attr("detect_positive", 1)
    if isinstance(x, np.ndarray):
        return _host((np.isposinf(x) & bool(positive)) | (np.isneginf(x) & bool(negative)))
    if negative and positive:
        return x.isinf()
    if positive:
        return x == math.inf
    if negative:
        return x == -math.inf
    return x.isinf() & False  # neither: all False


def _bitwise_converter(host_fn, device_fn):
    def convert(node: Node):
        return _binary(node, host_fn, device_fn)
    return convert


for _name, _host_fn, _device_fn in (
        ("BitwiseAnd", np.bitwise_and, lambda a, b: a & b),
        ("BitwiseOr", np.bitwise_or, lambda a, b: a | b),
        ("BitwiseXor", np.bitwise_xor, lambda a, b: a ^ b)):
    converter(_name)(_bitwise_converter(_host_fn, _device_fn))


@converter("BitShift")
def _bit_shift(node: Node):
    """``x << s`` or ``x >> s`` (``direction``), in the input's integer type. As ONNX
    defines them where C leaves them open: a shift by ``s < 0`` or ``s >=`` the type's width
    gives 0 to the left and the sign's fill (0 or -1) to the right; a left shift wraps."""
    left = node.attr("direction") == "LEFT"
    x, shift = node.inputs
    width = 8 * x.dtype.itemsize
    signed = x.dtype.kind == "i"
    if isinstance(x, np.ndarray) and isinstance(shift, np.ndarray):
        outside = (shift < 0) | (shift >= width)
        if left:
            shifted = np.left_shift(x, np.where(outside, 0, shift).astype(x.dtype))
            return _host(np.where(outside, 0, shifted)).astype(x.dtype)
        # Shifting right by width - 1 fills with the sign, as a longer shift would.
        shifted = np.right_shift(x, np.where(outside, width - 1, shift).astype(x.dtype))
        return _host(shifted if signed else np.where(outside, 0, shifted)).astype(x.dtype)
    x, shift = node.lift(x), node.lift(shift)
    outside = (shift < 0) | (shift >= width)
    if left:
        safe = T.where(outside, 0, shift).astype(x.dtype)
        shifted = x._elementwise(lambda a, s: a << s, [safe], "left_shift")
        return T.where(outside, 0, shifted).astype(x.dtype)
    safe = T.where(outside, width - 1, shift).astype(x.dtype)
    shifted = x._elementwise(lambda a, s: a >> s, [safe], "right_shift")
    return shifted if signed else T.where(outside, 0, shifted).astype(x.dtype)


@converter("CastLike")
def _cast_like(node: Node):
    x, dtype = node.inputs[0], node.inputs[1].dtype
    if isinstance(x, np.ndarray):
        return x.astype(dtype)
    return x if x.dtype == dtype else x.astype(dtype)


# -- activations -----------------------------------------------------------------------------------


@converter("Det")
def _det(node: Node):
    """The determinants of ``[..., n, n]`` matrices (gingham.linalg.det: LU with partial
    pivoting on the device); a host constant is folded with NumPy."""
    x = node.inputs[0]
    if isinstance(x, np.ndarray):
        return _host(np.linalg.det(x).astype(x.dtype))
    return linalg.det(x)


@converter("Mish")
def _mish(node: Node):
    return F.mish(node.tensor(0))


@converter("Softsign")
def _softsign(node: Node):
    return F.softsign(node.tensor(0))


@converter("Celu")
def _celu(node: Node):
    return F.celu(node.tensor(0), float(node.attr("alpha", 1.0)))


@converter("Shrink")
def _shrink(node: Node):
    """``x + bias`` below ``-lambd``, ``x - bias`` above ``lambd``, 0 between."""
    x = node.tensor(0)
    bias, lambd = float(node.attr("bias", 0.0)), float(node.attr("lambd", 0.5))
    y = T.where(x < -lambd, x + bias, T.where(x > lambd, x - bias, 0.0))
    return y if y.dtype == x.dtype else y.astype(x.dtype)


@converter("ThresholdedRelu")
def _thresholded_relu(node: Node):
    return F.threshold(node.tensor(0), float(node.attr("alpha", 1.0)), 0.0)


@converter("Swish")
def _swish(node: Node):
    """``x * sigmoid(alpha * x)`` (opset 24)."""
    x, alpha = node.tensor(0), float(node.attr("alpha", 1.0))
    return x * (x * alpha).sigmoid() if alpha != 1.0 else F.silu(x)


@converter("Hardmax")
def _hardmax(node: Node):
    """1 at the first largest element along ``axis``, 0 elsewhere. Before opset 13 the input
    is coerced to 2-D ``[prod(shape[:axis]), prod(shape[axis:])]``, as Softmax's."""
    x = node.tensor(0)
    if node.opset < 13:
        axis = _axis(node.attr("axis", 1), x.ndim)
        flat = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
        return _one_hot_of_max(node, flat, 1).reshape(x.shape)
    return _one_hot_of_max(node, x, _axis(node.attr("axis", -1), x.ndim))


def _one_hot_of_max(node: Node, x: Tensor, axis: int) -> Tensor:
    positions = np.arange(x.shape[axis], dtype=np.int64).reshape(
        (-1,) + (1,) * (x.ndim - 1 - axis))
    return (x.argmax(axis, keepdim=True) == node.lift(positions)).astype(x.dtype)


# -- reductions ------------------------------------------------------------------------------------


def _in_dtype(like: Tensor, y: Tensor) -> Tensor:
    """``y`` in ``like``'s dtype (integer sums give int64; ONNX keeps the input's type)."""
    return y if y.dtype == like.dtype else y.astype(like.dtype)


def _host_log_sum_exp(x, axis, keepdims):
    peak = np.max(x, axis=axis, keepdims=True) if x.size else np.zeros((), x.dtype)
    peak = np.where(np.isfinite(peak), peak, 0)
    total = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return total if keepdims else np.squeeze(total, axis)


_REDUCTIONS = {
    "ReduceL1": (lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims),
                 lambda x, axes, keep: _in_dtype(x, x.abs().sum(axes, keepdim=keep))),
    "ReduceL2": (lambda x, axis, keepdims: np.sqrt(np.sum(np.square(x), axis=axis,
                                                          keepdims=keepdims)),
                 lambda x, axes, keep: _in_dtype(x, x.square().sum(axes, keepdim=keep).sqrt())),
    "ReduceSumSquare": (
        lambda x, axis, keepdims: np.sum(np.square(x), axis=axis, keepdims=keepdims),
        lambda x, axes, keep: _in_dtype(x, x.square().sum(axes, keepdim=keep))),
    "ReduceLogSum": (lambda x, axis, keepdims: np.log(np.sum(x, axis=axis, keepdims=keepdims)),
                     lambda x, axes, keep: _in_dtype(x, x.sum(axes, keepdim=keep).log())),
    "ReduceLogSumExp": (_host_log_sum_exp,
                        lambda x, axes, keep: _in_dtype(x, x.logsumexp(axes, keep))),
}


def _reduction_or_empty(op_type: str):
    """The reduction's converter; a reduction over no elements (an axis of size 0) is the
    constant NumPy gives for it (0, or -inf for the logarithms)."""
    host_fn, device_fn = _REDUCTIONS[op_type]
    convert = _reduction_converter(host_fn, device_fn)

    def convert_or_fold(node: Node):
        x = node.inputs[0]
        if isinstance(x, Tensor) and 0 in x.shape:
            empty = dataclasses.replace(node, inputs=[np.zeros(x.shape, x.dtype)]
                                        + node.inputs[1:])
            with np.errstate(divide="ignore"):  # log(0) is -inf, as ONNX says
                return convert(empty)
        return convert(node)

    return convert_or_fold


for _name in _REDUCTIONS:
    converter(_name)(_reduction_or_empty(_name))


@converter("CumSum", "CumProd")
def _cumulative(node: Node):
    """Running sums (products) along the host ``axis``; ``exclusive`` leaves each element
    out of its own (the first is 0, or 1), ``reverse`` runs from the end."""
    x = node.tensor(0)
    (axis,) = node.ints(1, "axis")
    axis = _axis(axis, x.ndim)
    product = node.op_type == "CumProd"
    if node.attr("reverse", 0):
        x = x.flip(axis)
    if node.attr("exclusive", 0):
        first = tuple(1 if a == axis else s for a, s in enumerate(x.shape))
        lead = (slice(None),) * axis
        identity = node.lift(np.full(first, 1 if product else 0, x.dtype))
        x = T.concat([identity, x[lead + (slice(0, x.shape[axis] - 1),)]], axis)
    y = _in_dtype(x, x.cumprod(axis) if product else x.cumsum(axis))
    return y.flip(axis) if node.attr("reverse", 0) else y


# -- losses ----------------------------------------------------------------------------------------


def _loss_arguments(node: Node) -> dict:
    reduction = node.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise node.fail(f"reduction {reduction!r} is not an ONNX value (none, sum, mean)")
    weight = None if node.input(2) is None else node.tensor(2)
    # Without ignore_index no label is ignored: PyTorch's default -100 is no class index.
    return dict(weight=weight, reduction=reduction,
                ignore_index=int(node.attr("ignore_index", -100)))


@converter("NegativeLogLikelihoodLoss")
def _negative_log_likelihood_loss(node: Node):
    """PyTorch's ``nll_loss`` of the log-probabilities ``[N, C, d...]``."""
    return F.nll_loss(node.tensor(0), node.tensor(1), **_loss_arguments(node))


@converter("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy_loss(node: Node):
    """PyTorch's ``cross_entropy`` of the scores ``[N, C, d...]``; the optional second
    output is their ``log_softmax`` along the classes."""
    scores, labels = node.tensor(0), node.tensor(1)
    arguments = _loss_arguments(node)
    if node.n_outputs == 1:
        return F.cross_entropy(scores, labels, **arguments)
    log_prob = F.log_softmax(scores, 1)
    return [F.nll_loss(log_prob, labels, **arguments), log_prob]
