"""The ONNX op converters: one small function per op type, registered in :data:`CONVERTERS`.

A converter takes a :class:`Node` (its inputs already converted) and returns its outputs. A value
is either a NumPy array, a constant known on the host (an initializer used as a shape, the
result of ``Shape``, of ``Constant``, or of any op whose inputs are all such constants), or a
:class:`gingham.Tensor`, a value computed on the device. Shape arithmetic that exporters emit
(``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``) therefore folds on the host while the
graph is traced, and every shape stays static. Converters map onto ``gingham.nn.functional``
and :class:`gingham.Tensor` operations; none builds Tile of its own.

    @converter("Relu")
    def _relu(node: Node):
        return F.relu(node.tensor(0))

Adding an op is adding one such function.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import UnsupportedOpError
from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .layout import ChannelsLast, as_nhwc, graph_layout

Value = Any  # np.ndarray (a host constant) or Tensor (a device value)

CONVERTERS: dict[str, Callable[["Node"], Any]] = {}


# The inputs that must be known on the host, per op type (shapes, axes, pads, ...): a graph
# input that feeds one of them is part of the traced signature by value.
HOST_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,),
    "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Clip": (1, 2), "Resize": (1, 2, 3), "Upsample": (1,), "ReduceSum": (1,),
    "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "Dropout": (1, 2),
}


#: The value-shaped ops (:mod:`gingham.onnx.ops_value_shaped`): each runs with NumPy on the
#: host between two compiled segments of the graph (see :class:`gingham.onnx.OnnxModel`).
HOST_OPS: dict[str, Callable[["Node"], list[np.ndarray]]] = {}


def converter(*op_types: str):
    """Register the decorated function as the converter of ``op_types``."""
    def register(fn):
        for op_type in op_types:
            CONVERTERS[op_type] = fn
        return fn
    return register


def host_op(*op_types: str):
    """Register the decorated function as the NumPy implementation of the value-shaped
    ``op_types``: it takes a :class:`Node` of host arrays and returns host arrays."""
    def register(fn):
        for op_type in op_types:
            HOST_OPS[op_type] = fn
        return fn
    return register


@dataclass
class Node:
    """One ONNX node while the graph is traced: its converted inputs (``None`` for an omitted
    optional input), attributes (plain Python values), opset of the default domain, how many
    outputs the graph asks for, the device its constants go to, and whether the image ops
    run channels-last (:mod:`gingham.onnx.layout`: their inputs may then be
    :class:`ChannelsLast` values, and they give such values). ``run_subgraph(graph, inputs)``
    converts a graph attribute (an ``If`` branch) inline: its nodes see the values of the
    node's scope, its inputs are bound to ``inputs``, and it returns the graph's outputs."""

    op_type: str
    name: str
    inputs: list
    attributes: dict
    opset: int
    n_outputs: int
    device: str
    channels_last: bool = False
    run_subgraph: Callable[[Any, Sequence], list] | None = None

    def attr(self, name: str, default=None):
        return self.attributes.get(name, default)

    def input(self, position: int) -> Value | None:
        return self.inputs[position] if position < len(self.inputs) else None

    def tensor(self, position: int) -> Tensor:
        """Input ``position`` as a device tensor (a host constant is copied to the device), in
        the graph's layout."""
        return self.lift(graph_layout(self.inputs[position]))

    def image(self, position: int):
        """Input ``position`` for an image op: a 4-d value that runs channels-last (returned
        as it is held: :class:`ChannelsLast`, or a device tensor in the graph's NCHW
        layout) where :attr:`channels_last` is on; otherwise None (use :meth:`tensor`)."""
        value = self.inputs[position]
        if not self.channels_last or value is None or len(value.shape) != 4:
            return None
        return value if isinstance(value, ChannelsLast) else self.lift(value)

    def lift(self, value: Value) -> Tensor:
        return value if isinstance(value, Tensor) else T.tensor(value, device=self.device)

    def constant(self, position: int, what: str) -> np.ndarray | None:
        """Input ``position`` as a host array; an error if it is computed on the device (shapes,
        axes, pads... must be known when the graph is traced)."""
        value = self.input(position)
        if value is None or isinstance(value, np.ndarray):
            return value
        raise UnsupportedOpError(
            f"ONNX {self.op_type} node {self.name!r}: its {what} (input {position}) is computed "
            "on the device; gingham needs it to be a constant or to follow from the input shapes")

    def ints(self, position: int, what: str) -> list[int] | None:
        value = self.constant(position, what)
        return None if value is None else [int(v) for v in value.reshape(-1)]

    def fail(self, message: str) -> UnsupportedOpError:
        """The error for an attribute or input value this converter does not support."""
        return UnsupportedOpError(f"ONNX {self.op_type} node {self.name!r}: {message}")


def _is_host(*values) -> bool:
    return all(v is None or isinstance(v, np.ndarray) for v in values)


def _host(value) -> np.ndarray:
    """A NumPy result as an array (NumPy returns scalars from 0-d operations)."""
    return np.asarray(value)


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# -- elementwise -----------------------------------------------------------------------------------


def _operand(node: Node, value: Value, other: Value):
    """``value`` ready to meet the device tensor ``other``: a one-element host constant of
    ``other``'s dtype becomes a Python number (a literal of the program, not a buffer)."""
    if isinstance(value, Tensor):
        return value
    # (Not float64: Tile rounds float literals to float32.)
    if (value.size == 1 and value.ndim <= getattr(other, "ndim", 0)
            and value.dtype == other.dtype and value.dtype.kind in "fi"
            and value.dtype != np.float64):
        return value.reshape(()).item()
    return node.lift(value)


def _binary(node: Node, host_fn, device_fn):
    a, b = node.inputs[0], node.inputs[1]
    if _is_host(a, b):
        return _host(host_fn(a, b)).astype(np.result_type(a, b), copy=False)
    if isinstance(a, Tensor):
        return device_fn(a, _operand(node, b, a))
    return device_fn(node.lift(a), b)


def _divide(a, b):
    if isinstance(a, Tensor) and a.dtype.kind in "iu":  # ONNX divides integers truncating
        return a._elementwise(lambda x, y: x / y, [b], "divide")
    return a / b


def _host_divide(a, b):
    if a.dtype.kind in "iu":
        return np.trunc(a / b).astype(a.dtype)
    return a / b


_BINARY = {
    "Add": (np.add, lambda a, b: a + b),
    "Sub": (np.subtract, lambda a, b: a - b),
    "Mul": (np.multiply, lambda a, b: a * b),
    "Div": (_host_divide, _divide),
    "Equal": (np.equal, lambda a, b: a == b),
    "Less": (np.less, lambda a, b: a < b),
    "LessOrEqual": (np.less_equal, lambda a, b: a <= b),
    "Greater": (np.greater, lambda a, b: a > b),
    "GreaterOrEqual": (np.greater_equal, lambda a, b: a >= b),
    "And": (np.logical_and, lambda a, b: a & b),
    "Or": (np.logical_or, lambda a, b: a | b),
    "Xor": (np.logical_xor, lambda a, b: a ^ b),
}


def _binary_converter(op_type: str):
    host_fn, device_fn = _BINARY[op_type]
    comparison = host_fn in (np.equal, np.less, np.less_equal, np.greater, np.greater_equal)

    def convert(node: Node):
        a, b = node.inputs[0], node.inputs[1]
        if comparison and _is_host(a, b):
            return _host(host_fn(a, b))
        return _binary(node, host_fn, device_fn)

    return convert


for _name in _BINARY:
    converter(_name)(_binary_converter(_name))


@converter("Pow")
def _pow(node: Node):
    base, exponent = node.inputs
    if _is_host(base, exponent):
        return _host(np.power(base, exponent)).astype(base.dtype)
    if isinstance(exponent, np.ndarray) and exponent.size == 1:
        exponent = exponent.reshape(()).item()
        # Squares and square roots are the exporters' common exponents: exact forms.
        if exponent == 2:
            return node.tensor(0).square()
        if exponent == 0.5:
            return node.tensor(0).sqrt()
        return node.tensor(0) ** float(exponent)
    return node.tensor(0) ** node.lift(exponent).astype(node.tensor(0).dtype)


# (NumPy function, Tensor method) per unary op.
_UNARY = {
    "Neg": (np.negative, "neg"),
    "Abs": (np.abs, "abs"),
    "Sqrt": (np.sqrt, "sqrt"),
    "Exp": (np.exp, "exp"),
    "Log": (np.log, "log"),
    "Reciprocal": (np.reciprocal, "reciprocal"),
    "Floor": (np.floor, "floor"),
    "Ceil": (np.ceil, "ceil"),
    "Sign": (np.sign, "sign"),
    "Sin": (np.sin, "sin"),
    "Cos": (np.cos, "cos"),
    "Tanh": (np.tanh, "tanh"),
    "Sigmoid": (None, "sigmoid"),
    "Relu": (None, "relu"),
    "Erf": (None, "erf"),
    "Not": (np.logical_not, "__invert__"),
    "Identity": (None, None),
}


def _unary_converter(host_fn, method: str | None):
    def convert(node: Node):
        x = node.inputs[0]
        if method is None:
            return x
        if host_fn is not None and isinstance(x, np.ndarray):
            return _host(host_fn(x)).astype(x.dtype)
        return getattr(node.lift(x), method)()
    return convert


for _name, (_fn, _method) in _UNARY.items():
    converter(_name)(_unary_converter(_fn, _method))


def _variadic(node: Node, host_fn, device_fn):
    values = [v for v in node.inputs if v is not None]
    result = values[0]
    for value in values[1:]:
        if _is_host(result, value):
            result = _host(host_fn(result, value))
        elif isinstance(result, Tensor):
            result = device_fn(result, _operand(node, value, result))
        else:
            result = device_fn(value, _operand(node, result, value))
    return result


@converter("Max")
def _max(node: Node):
    return _variadic(node, np.maximum, T.maximum)


@converter("Min")
def _min(node: Node):
    return _variadic(node, np.minimum, T.minimum)


@converter("Sum")
def _sum(node: Node):
    return _variadic(node, np.add, lambda a, b: a + b)


@converter("Mean")
def _mean(node: Node):
    total = _variadic(node, np.add, lambda a, b: a + b)
    count = len([v for v in node.inputs if v is not None])
    return total / np.asarray(count, total.dtype) if isinstance(total, np.ndarray) \
        else total * (1.0 / count)


@converter("Where")
def _where(node: Node):
    condition, a, b = node.inputs
    if _is_host(condition, a, b):
        return _host(np.where(condition, a, b))
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        # A condition computed on the device between two constants (an exported attention
        # mask: where(mask, -inf, 0)): the larger constant goes to the device, so the result
        # has the constants' dtype (T.where would take a host array as a weak integer).
        if a.size >= b.size:
            a = node.lift(a)
        else:
            b = node.lift(b)
    like = a if isinstance(a, Tensor) else b
    return T.where(node.lift(condition), _lift_like(node, a, like), _lift_like(node, b, like))


def _lift_like(node: Node, value: Value, like: Tensor):
    return value if isinstance(value, Tensor) else _operand(node, value, like)


@converter("Cast")
def _cast(node: Node):
    from onnx.helper import tensor_dtype_to_np_dtype

    dtype = np.dtype(tensor_dtype_to_np_dtype(node.attr("to")))
    x = node.inputs[0]
    if isinstance(x, np.ndarray):
        return x.astype(dtype)
    return x if x.dtype == dtype else x.astype(dtype)


# -- activations -----------------------------------------------------------------------------------


@converter("LeakyRelu")
def _leaky_relu(node: Node):
    return F.leaky_relu(node.tensor(0), node.attr("alpha", 0.01))


@converter("Elu")
def _elu(node: Node):
    return F.elu(node.tensor(0), node.attr("alpha", 1.0))


@converter("Selu")
def _selu(node: Node):
    alpha, gamma = node.attr("alpha", 1.67326319217681884765625), node.attr(
        "gamma", 1.05070102214813232421875)
    return F.elu(node.tensor(0), alpha) * gamma


@converter("Softplus")
def _softplus(node: Node):
    # ONNX's softplus has no threshold: log(1 + exp(x)); PyTorch's switches to x above 20,
    # where the two agree to float32 precision.
    return F.softplus(node.tensor(0))


def hard_sigmoid(x: Tensor, alpha: float = 0.2, beta: float = 0.5) -> Tensor:
    """ONNX's ``HardSigmoid``: ``max(0, min(1, alpha * x + beta))`` (PyTorch's
    ``hardsigmoid`` is the case ``alpha = 1/6``, ``beta = 0.5``). The node and the recurrent
    nodes' ``hardsigmoid`` activation share it."""
    return (x * alpha + beta).clamp(0.0, 1.0)


@converter("HardSigmoid")
def _hard_sigmoid(node: Node):
    return hard_sigmoid(node.tensor(0), node.attr("alpha", 0.2), node.attr("beta", 0.5))


@converter("HardSwish")
def _hard_swish(node: Node):
    return F.hardswish(node.tensor(0))


@converter("Gelu")
def _gelu(node: Node):
    return F.gelu(node.tensor(0), node.attr("approximate", "none"))


@converter("Clip")
def _clip(node: Node):
    if node.opset < 11:
        low, high = node.attr("min"), node.attr("max")
    else:
        low, high = (node.constant(i, name) for i, name in ((1, "min"), (2, "max")))
        low = None if low is None else low.item()
        high = None if high is None else high.item()
    x = node.inputs[0]
    if isinstance(x, np.ndarray):
        return _host(np.clip(x, low, high)).astype(x.dtype)
    if low is None and high is None:
        return x
    if low is not None and high is not None and low > high:  # ONNX: every value becomes max
        return T.minimum(T.maximum(x, low), high)
    return x.clamp(low, high)


@converter("PRelu")
def _prelu(node: Node):
    x = node.tensor(0)
    slope = _operand(node, node.inputs[1], x)
    return T.where(x > 0, x, x * slope)


@converter("Softmax", "LogSoftmax")
def _softmax(node: Node):
    x = node.tensor(0)
    fn = F.softmax if node.op_type == "Softmax" else F.log_softmax
    if node.opset >= 13:
        return fn(x, node.attr("axis", -1))
    # Before opset 13 the input is coerced to 2-D [prod(shape[:axis]), prod(shape[axis:])]
    # and normalised along the second axis.
    axis = _axis(node.attr("axis", 1), x.ndim)
    flat = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    return fn(flat, 1).reshape(x.shape)


# -- linear algebra and convolutions ---------------------------------------------------------------


@converter("MatMul")
def _matmul(node: Node):
    a, b = node.inputs
    if _is_host(a, b):
        return _host(np.matmul(a, b))
    return T.matmul(node.lift(a), node.lift(b))


@converter("Gemm")
def _gemm(node: Node):
    a, b = node.tensor(0), node.tensor(1)
    if node.attr("transA", 0):
        a = a.transpose(1, 0)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    c = node.input(2)
    if node.attr("transB", 0) and alpha == 1.0 and (c is None or beta == 1.0) and (
            c is None or tuple(c.shape) in ((b.shape[0],), (1, b.shape[0]))):
        # The exporters' Linear layer: one contraction with the bias as its starting value.
        bias = None if c is None else node.lift(c).reshape(b.shape[0])
        return F.linear(a, b, bias)
    if node.attr("transB", 0):
        b = b.transpose(1, 0)
    y = T.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + _operand(node, c, y) * beta if beta != 1.0 else y + _operand(node, c, y)
    return y


def _spatial_attributes(node: Node, x: Tensor, kernel: Sequence[int]):
    """Strides, dilations and (begin, end) pads per spatial axis, ``auto_pad`` resolved."""
    nd = x.ndim - 2
    strides = list(node.attr("strides", [1] * nd))
    dilations = list(node.attr("dilations", [1] * nd))
    pads = list(node.attr("pads", [0] * (2 * nd)))
    auto_pad = node.attr("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for a, (size, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations)):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            pads[a], pads[a + nd] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
    elif auto_pad != "NOTSET":
        raise node.fail(f"auto_pad {auto_pad!r} is not an ONNX value")
    return strides, dilations, pads[:nd], pads[nd:]


def _pad_spatial(x: Tensor, begin: Sequence[int], end: Sequence[int], value: float = 0.0,
                 channels_last: bool = False) -> Tensor:
    """``x`` padded by ``begin``/``end`` on its spatial axes (F.pad's order: last axis first),
    which follow the channels, or precede them with ``channels_last`` (``[N, H, W, C]``)."""
    amounts = [p for b, e in reversed(list(zip(begin, end))) for p in (b, e)]
    return F.pad(x, [0, 0] + amounts if channels_last else amounts, value=value)


_CONVOLUTIONS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@converter("Conv")
def _conv(node: Node):
    image = node.image(0)
    if image is not None:
        return _conv_channels_last(node, image)
    x, weight = node.tensor(0), node.tensor(1)
    bias = None if node.input(2) is None else node.tensor(2)
    nd = x.ndim - 2
    if nd not in _CONVOLUTIONS:
        raise node.fail(f"{nd}-d convolutions are not supported (1, 2 or 3 spatial axes)")
    strides, dilations, begin, end = _spatial_attributes(node, x, weight.shape[2:])
    if begin != end:  # asymmetric: pad first (zeros, as the convolution would)
        x, begin = _pad_spatial(x, begin, end), [0] * nd
    return _CONVOLUTIONS[nd](x, weight, bias, strides, begin, dilations, node.attr("group", 1))


def _conv_channels_last(node: Node, image) -> ChannelsLast:
    """A 2-d convolution run channels-last (the weights stay OIHW, as the graph's)."""
    weight = node.tensor(1)
    bias = None if node.input(2) is None else node.tensor(2)
    strides, dilations, begin, end = _spatial_attributes(node, image, weight.shape[2:])
    x = as_nhwc(image)
    if begin != end:  # asymmetric: pad first (zeros, as the convolution would)
        x, begin = _pad_spatial(x, begin, end, channels_last=True), [0, 0]
    return ChannelsLast(F.conv2d(x, weight, bias, strides, begin, dilations,
                                 node.attr("group", 1), data_format="NHWC"))


@converter("ConvTranspose")
def _conv_transpose(node: Node):
    x, weight = node.tensor(0), node.tensor(1)
    bias = None if node.input(2) is None else node.tensor(2)
    nd = x.ndim - 2
    if nd not in _TRANSPOSED:
        raise node.fail(f"{nd}-d convolutions are not supported (1, 2 or 3 spatial axes)")
    kernel = weight.shape[2:]
    strides = list(node.attr("strides", [1] * nd))
    dilations = list(node.attr("dilations", [1] * nd))
    extra = list(node.attr("output_padding", [0] * nd))
    full = [(size - 1) * s + (k - 1) * d + 1 + e for size, s, k, d, e
            in zip(x.shape[2:], strides, kernel, dilations, extra)]
    auto_pad = node.attr("auto_pad", "NOTSET")
    output_shape = node.attr("output_shape")
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = list(output_shape)[-nd:] if output_shape is not None else [
            size * s for size, s in zip(x.shape[2:], strides)]
        total = [f - w for f, w in zip(full, wanted)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    else:
        pads = list(node.attr("pads", [0] * (2 * nd)))
        begin, end = pads[:nd], pads[nd:]
    # The full transposed convolution, then its output_padding (zeros at the end), then the
    # pads cropped (a negative pad, from an output_shape larger than the full size, extends
    # with zeros): any pads and output_padding, one way.
    y = _TRANSPOSED[nd](x, weight, None, strides, 0, 0, node.attr("group", 1), dilations)
    if any(extra):
        y = _pad_spatial(y, [0] * nd, extra)
    if any(begin) or any(end):
        y = _pad_spatial(y, [-b for b in begin], [-e for e in end])
    if bias is not None:
        y = y + bias.reshape((bias.shape[0],) + (1,) * nd)
    return y


# -- pooling and normalisation ---------------------------------------------------------------------


_MAX_POOLS = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOLS = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@converter("MaxPool", "AveragePool")
def _pool(node: Node):
    image = node.image(0)
    if image is not None and node.n_outputs == 1:
        pooled = _pool_channels_last(node, image)
        if pooled is not None:
            return pooled
    x = node.tensor(0)
    nd = x.ndim - 2
    if nd not in _MAX_POOLS:
        raise node.fail(f"{nd}-d pooling is not supported (1, 2 or 3 spatial axes)")
    if node.n_outputs > 1:
        raise node.fail("the Indices output is not supported")
    kernel = list(node.attr("kernel_shape"))
    strides, dilations, begin, end = _spatial_attributes(node, x, kernel)
    ceil_mode = bool(node.attr("ceil_mode", 0))
    symmetric = begin == end and all(2 * p <= k for p, k in zip(begin, kernel))
    if node.op_type == "MaxPool":
        if not symmetric:  # padded taps must never win: pad with the lowest value
            x, begin = _pad_spatial(x, begin, end, -math.inf), [0] * nd
        return _MAX_POOLS[nd](x, kernel, strides, begin, dilations, ceil_mode)
    if any(d != 1 for d in dilations):
        raise node.fail("dilated average pooling is not supported")
    include = bool(node.attr("count_include_pad", 0))
    if symmetric:
        return _AVG_POOLS[nd](x, kernel, strides, begin, ceil_mode, include)
    if ceil_mode:
        raise node.fail("asymmetric pads with ceil_mode are not supported")
    # Asymmetric pads: the sum over each window of the zero-padded input, divided by the
    # window's tap count (made on the host: the shapes are static).
    padded = _pad_spatial(x, begin, end)
    total = _AVG_POOLS[nd](padded, kernel, strides, 0, False, True) * float(math.prod(kernel))
    inside = np.ones(x.shape[2:], np.float64)
    if not include:
        inside = np.pad(inside, list(zip(begin, end)))
        counts = _window_sums(inside, kernel, strides)
    else:
        counts = np.full(total.shape[2:], float(math.prod(kernel)))
    return total / node.lift(counts.astype(x.dtype))


def _pool_channels_last(node: Node, image) -> ChannelsLast | None:
    """A 2-d max or average pool run channels-last; None for an average pool with asymmetric
    pads or dilations (the graph-layout path handles those)."""
    kernel = list(node.attr("kernel_shape"))
    strides, dilations, begin, end = _spatial_attributes(node, image, kernel)
    ceil_mode = bool(node.attr("ceil_mode", 0))
    symmetric = begin == end and all(2 * p <= k for p, k in zip(begin, kernel))
    x = as_nhwc(image)
    if node.op_type == "MaxPool":
        if not symmetric:  # padded taps must never win: pad with the lowest value
            x, begin = _pad_spatial(x, begin, end, -math.inf, channels_last=True), [0, 0]
        return ChannelsLast(F.max_pool2d(x, kernel, strides, begin, dilations, ceil_mode,
                                         data_format="NHWC"))
    if not symmetric or any(d != 1 for d in dilations):
        return None
    include = bool(node.attr("count_include_pad", 0))
    return ChannelsLast(F.avg_pool2d(x, kernel, strides, begin, ceil_mode, include,
                                     data_format="NHWC"))


def _window_sums(array: np.ndarray, kernel: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(array, kernel)
    picked = windows[tuple(slice(None, None, s) for s in strides)]
    return picked.sum(axis=tuple(range(-len(kernel), 0)))


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: Node):
    image = node.image(0)
    if image is not None:  # the spatial axes of [N, H, W, C]: kept as size 1
        x = as_nhwc(image)
        if node.op_type == "GlobalAveragePool":
            return ChannelsLast(x.mean((1, 2), keepdim=True))
        return ChannelsLast(x.amax((1, 2), keepdim=True))
    x = node.tensor(0)
    axes = tuple(range(2, x.ndim))
    if node.op_type == "GlobalAveragePool":
        return x.mean(axes, keepdim=True)
    return x.amax(axes, keepdim=True)


@converter("BatchNormalization")
def _batch_norm(node: Node):
    training = bool(node.attr("training_mode", 0))
    if node.n_outputs > 1 and (node.opset < 14 or not training):
        raise node.fail("the running statistics outputs are supported in training mode "
                        "(training_mode=1, opset 14 on), not those of earlier opsets")
    if training:
        return _batch_norm_training(node)
    scale, bias, mean, var = (node.tensor(i) for i in range(1, 5))
    image = node.image(0)
    if image is not None:
        return ChannelsLast(F.batch_norm(as_nhwc(image), mean, var, scale, bias, False,
                                         eps=node.attr("epsilon", 1e-5), data_format="NHWC"))
    return F.batch_norm(node.tensor(0), mean, var, scale, bias, False,
                        eps=node.attr("epsilon", 1e-5))


def _batch_norm_training(node: Node) -> list:
    """Training mode: ``Y`` normalised with the batch's statistics (biased variance), and
    the running statistics ONNX's way, ``running * momentum + batch * (1 - momentum)``
    (``momentum`` is PyTorch's ``1 - momentum``, and ONNX updates with the biased variance,
    where PyTorch uses the unbiased one: so not ``F.batch_norm(training=True)``'s)."""
    x = node.tensor(0)
    scale, bias, running_mean, running_var = (node.tensor(i) for i in range(1, 5))
    axes = tuple(a for a in range(x.ndim) if a != 1)
    channels = x.shape[1]
    mean = x.mean(axes, keepdims=True)
    var = (x - mean).square().mean(axes, keepdims=True).reshape(channels)
    mean = mean.reshape(channels)
    y = F.batch_norm(x, mean, var, scale, bias, False, eps=node.attr("epsilon", 1e-5))
    momentum = float(node.attr("momentum", 0.9))
    outputs = [y, running_mean * momentum + mean * (1 - momentum),
               running_var * momentum + var * (1 - momentum)]
    return outputs[:node.n_outputs]


@converter("InstanceNormalization")
def _instance_norm(node: Node):
    x = node.tensor(0)
    return F.group_norm(x, x.shape[1], node.tensor(1), node.tensor(2),
                        node.attr("epsilon", 1e-5))


@converter("LayerNormalization")
def _layer_norm(node: Node):
    x = node.tensor(0)
    axis = _axis(node.attr("axis", -1), x.ndim)
    shape = x.shape[axis:]
    scale = node.tensor(1).broadcast_to(shape)
    bias = None if node.input(2) is None else node.tensor(2).broadcast_to(shape)
    epsilon = node.attr("epsilon", 1e-5)
    y = F.layer_norm(x, shape, scale, bias, epsilon)
    if node.n_outputs == 1:
        return y
    # The statistics as extra outputs (exporters' training graphs ask for them).
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axes, keepdim=True)
    inverse_std = ((x - mean).square().mean(axes, keepdim=True) + epsilon).rsqrt()
    return [y, mean, inverse_std]


# -- shapes ----------------------------------------------------------------------------------------


@converter("Constant")
def _constant(node: Node):
    from onnx.numpy_helper import to_array

    for name, value in node.attributes.items():
        if name == "value":
            return to_array(value)
        if name in ("value_float", "value_int"):
            return np.asarray(value, np.float32 if name == "value_float" else np.int64)
        if name in ("value_floats", "value_ints"):
            return np.asarray(value, np.float32 if name == "value_floats" else np.int64)
    raise node.fail(f"constant attributes {sorted(node.attributes)} are not supported")


@converter("ConstantOfShape")
def _constant_of_shape(node: Node):
    from onnx.numpy_helper import to_array

    shape = node.ints(0, "shape")
    value = node.attr("value")
    fill = to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    return np.full(shape, fill[0], fill.dtype)


@converter("Shape")
def _shape(node: Node):
    shape = node.inputs[0].shape
    start, end = node.attr("start", 0), node.attr("end")
    return np.asarray(shape[start:end], np.int64)


@converter("Size")
def _size(node: Node):
    return np.asarray(math.prod(node.inputs[0].shape), np.int64)


@converter("Range")
def _range(node: Node):
    start, limit, delta = (node.constant(i, name) for i, name
                           in enumerate(("start", "limit", "delta")))
    return np.arange(start, limit, delta).astype(start.dtype)


@converter("Reshape")
def _reshape(node: Node):
    x = node.inputs[0]
    if node.opset < 5:
        shape = list(node.attr("shape"))
    else:
        shape = node.ints(1, "shape")
    if not node.attr("allowzero", 0):  # 0 copies the input's size at that position
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = math.prod(x.shape) // known if known else 0
    return x.reshape(tuple(shape))


@converter("Flatten")
def _flatten(node: Node):
    x = node.inputs[0]
    axis = _axis(node.attr("axis", 1), x.ndim)
    return x.reshape((math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@converter("Transpose")
def _transpose(node: Node):
    x = node.inputs[0]
    perm = tuple(node.attr("perm", range(x.ndim - 1, -1, -1)))
    if isinstance(x, np.ndarray):
        return x.transpose(perm)
    return T.permute_dims(x, perm)


def _axes_of(node: Node, position: int) -> list[int] | None:
    """Axes from the ``axes`` attribute or, in later opsets, from an input."""
    if "axes" in node.attributes:
        return list(node.attributes["axes"])
    return node.ints(position, "axes")


@converter("Squeeze")
def _squeeze(node: Node):
    x = node.inputs[0]
    axes = _axes_of(node, 1)
    if axes is None:
        axes = [a for a, s in enumerate(x.shape) if s == 1]
    axes = {_axis(a, x.ndim) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"ONNX Squeeze node {node.name!r}: axes {sorted(axes)} of shape "
                         f"{x.shape} are not all of size 1")
    return x.reshape(tuple(s for a, s in enumerate(x.shape) if a not in axes))


@converter("Unsqueeze")
def _unsqueeze(node: Node):
    x = node.inputs[0]
    axes = _axes_of(node, 1)
    rank = x.ndim + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return x.reshape(tuple(shape))


@converter("Concat")
def _concat(node: Node):
    values = [v for v in node.inputs if v is not None]
    axis = node.attr("axis")
    if _is_host(*values):
        return np.concatenate(values, axis)
    return T.concat([node.lift(v) for v in values if v.size or v.ndim > 1], axis)


@converter("Split")
def _split(node: Node):
    x = node.inputs[0]
    axis = _axis(node.attr("axis", 0), x.ndim)
    size = x.shape[axis]
    sections = node.attr("split") if node.opset < 13 else node.ints(1, "split")
    if sections is None:
        count = node.attr("num_outputs", node.n_outputs)
        step = -(-size // count)
        sections = [min(step, size - i * step) for i in range(count)]
    bounds = np.cumsum([0] + list(sections))
    lead = (slice(None),) * axis
    return [x[lead + (slice(int(b), int(e)),)] for b, e in zip(bounds[:-1], bounds[1:])]


@converter("Slice")
def _slice(node: Node):
    x = node.inputs[0]
    if node.opset < 10:
        starts, ends = node.attr("starts"), node.attr("ends")
        axes, steps = node.attr("axes"), None
    else:
        starts, ends = node.ints(1, "starts"), node.ints(2, "ends")
        axes, steps = node.ints(3, "axes"), node.ints(4, "steps")
    axes = list(range(len(starts))) if axes is None else [_axis(a, x.ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    key = [slice(None)] * x.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        # Python's slice clamps out-of-range starts and ends as ONNX does (INT_MAX: the end).
        key[axis] = slice(start, end, step)
    return x[tuple(key)]


@converter("Gather")
def _gather(node: Node):
    data, indices = node.inputs
    axis = _axis(node.attr("axis", 0), data.ndim)
    if _is_host(data, indices):
        return _host(np.take(data, indices, axis=axis))
    lead = (slice(None),) * axis
    if isinstance(indices, np.ndarray) and indices.ndim == 0:  # one index: a slice
        return node.lift(data)[lead + (int(indices),)]
    data = node.lift(data)
    size = data.shape[axis]
    if isinstance(indices, np.ndarray):
        indices = node.lift(np.where(indices < 0, indices + size, indices))
    else:
        indices = T.where(indices < 0, indices + size, indices)
    # The gathered axis in front, the others flattened: rows of a table picked by index.
    order = (axis,) + tuple(a for a in range(data.ndim) if a != axis)
    moved = T.permute_dims(data, order) if axis else data
    rest = moved.shape[1:]
    rows = F.embedding(indices, moved.reshape((size, math.prod(rest))))
    rows = rows.reshape(indices.shape + rest)
    if axis == 0:
        return rows
    k = indices.ndim
    back = tuple(range(k, k + axis)) + tuple(range(k)) + tuple(range(k + axis, rows.ndim))
    return T.permute_dims(rows, back)


@converter("Expand")
def _expand(node: Node):
    x = node.inputs[0]
    shape = tuple(np.broadcast_shapes(x.shape, tuple(node.ints(1, "shape"))))
    if isinstance(x, np.ndarray):
        return np.broadcast_to(x, shape).copy()
    return x.broadcast_to(shape)


@converter("Pad")
def _pad(node: Node):
    mode = node.attr("mode", "constant")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in _PAD_MODES:
        raise node.fail(f"mode {mode!r} is not an ONNX Pad mode ({', '.join(_PAD_MODES)})")
    x = node.tensor(0)
    if node.opset < 11:
        pads, value = list(node.attr("pads")), node.attr("value", 0.0)
        axes = None
    else:
        pads = node.ints(1, "pads")
        fill = node.constant(2, "constant_value")
        value = 0.0 if fill is None or fill.size == 0 else fill.reshape(-1)[0].item()
        axes = node.ints(3, "axes")
    axes = list(range(x.ndim)) if axes is None else [_axis(a, x.ndim) for a in axes]
    n = len(axes)
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(axes):
        begin[axis], end[axis] = pads[i], pads[i + n]
    if mode != "constant":
        # F.pad's other modes pad the last 1-3 axes of a tensor with one or two more, as
        # PyTorch's: the pads of an image model's spatial axes.
        padded = [a for a in range(x.ndim) if begin[a] or end[a]]
        trailing = x.ndim - padded[0] if padded else 0
        if trailing > 3 or x.ndim - trailing not in (1, 2):
            raise node.fail(f"mode {mode!r} pads axes {padded} of a {x.ndim}-d input; gingham "
                            "pads the last 1-3 axes of a 2-5-d input in that mode")
        begin, end = begin[x.ndim - trailing:], end[x.ndim - trailing:]
    amounts = [p for b, e in reversed(list(zip(begin, end))) for p in (b, e)]
    if mode != "constant":
        return F.pad(x, amounts, mode=_PAD_MODES[mode]) if amounts else x
    return F.pad(x, amounts, value=value)


# ONNX's Pad modes and F.pad's names for them.
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "wrap": "circular"}


# -- reductions ------------------------------------------------------------------------------------


_REDUCTIONS = {
    # ONNX keeps the input's type (PyTorch's sum of integers is int64)
    "ReduceSum": (np.sum, lambda x, axes, keep: x.sum(axes, keepdim=keep, dtype=x.dtype)),
    "ReduceMean": (np.mean, lambda x, axes, keep: x.mean(axes, keepdim=keep)),
    "ReduceMax": (np.max, lambda x, axes, keep: x.amax(axes, keepdim=keep)),
    "ReduceMin": (np.min, lambda x, axes, keep: x.amin(axes, keepdim=keep)),
    "ReduceProd": (np.prod, None),  # shape arithmetic on the host only
}


def _reduction_converter(host_fn, device_fn):
    def convert(node: Node):
        x = node.inputs[0]
        axes = _axes_of(node, 1)
        keep = bool(node.attr("keepdims", 1))
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        axes = tuple(sorted(_axis(a, x.ndim) for a in axes))
        if isinstance(x, np.ndarray):
            return _host(host_fn(x, axis=axes, keepdims=keep)).astype(x.dtype)
        if device_fn is None:
            raise node.fail("is supported for constants only")
        return device_fn(x, axes, keep)
    return convert


for _name, (_host_fn, _device_fn) in _REDUCTIONS.items():
    converter(_name)(_reduction_converter(_host_fn, _device_fn))


@converter("ArgMax", "ArgMin")
def _arg_extreme(node: Node):
    if node.attr("select_last_index", 0):
        raise node.fail("select_last_index=1 is not supported")
    x = node.tensor(0)
    axis, keep = node.attr("axis", 0), bool(node.attr("keepdims", 1))
    if node.op_type == "ArgMax":
        return x.argmax(axis, keep)
    return x.argmin(axis, keep)


_STRINGS = "gingham tensors hold numbers; string tensors have no gingham dtype"

#: Why gingham does not convert these op types (named with them when a model uses one).
UNSUPPORTED_REASONS: dict[str, str] = {
    "BitCast": "reinterpreting bits needs a bit cast in Tile, which has none (its casts "
               "convert values)",
    "StringNormalizer": _STRINGS, "StringConcat": _STRINGS, "StringSplit": _STRINGS,
    "RegexFullMatch": _STRINGS,
    "TfIdfVectorizer": "it counts n-grams of words (strings, or their integer ids) for text "
                       "pipelines before a model; not planned",
    "ImageDecoder": "it decodes compressed image bytes (JPEG, PNG, ...), work for the host "
                    "before the model, not for a device kernel",
}


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) gingham converts or runs on the host, sorted."""
    return sorted(set(CONVERTERS) | set(HOST_OPS))


__all__ = ["CONVERTERS", "HOST_INPUTS", "HOST_OPS", "UNSUPPORTED_REASONS", "Node", "converter",
           "host_op", "supported_ops"]

# The op families in modules of their own register their converters when imported (they
# import this module's registry, so they come last).
for _family in ("ops_indexing", "ops_shapes", "ops_math", "ops_rnn", "ops_signal", "ops_quant",
                "ops_attention", "ops_random", "ops_sampling", "ops_sequence",
                "ops_value_shaped", "ops_resize"):
    importlib.import_module(f"{__package__}.{_family}")
