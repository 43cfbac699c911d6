"""ONNX's quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.

Integer arithmetic is exact, as ONNX defines it: operands minus their zero points in int32,
products summed in int32 (a ``T.matmul`` of int32 tensors; a convolution is ``F.unfold``'s
columns times the filter's rows). Requantizing rounds half to even (``Tensor.round``, C's
``rint``) and saturates to the output type's range. Scales and zero points are per tensor (one
element), per axis (1-D along ``axis``) or, for QuantizeLinear and DequantizeLinear, blocked
(``block_size`` elements along ``axis`` share one). The quantized types are int8, uint8,
int16 and uint16 (and int32 where ONNX allows it); the 2-, 4- and 8-bit float types have no
gingham dtype and are refused.

    y = gingham.onnx.load(model)(x)      # a model with QuantizeLinear -> QLinearConv -> ...
"""

from __future__ import annotations

import math

import numpy as np

from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import Node, Value, _spatial_attributes, converter

# The types a quantized value may have: each one's range is where results saturate.
_QUANTIZED = (np.int8, np.uint8, np.int16, np.uint16)


def _quantized_dtype(node: Node, dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in [np.dtype(d) for d in _QUANTIZED]:
        raise node.fail(f"quantized type {dtype} is not supported (int8, uint8, int16, uint16)")
    return dtype


def _along(node: Node, value: Value, axis: int, like: Value, block_size: int = 0) -> Value:
    """A scale or zero point shaped to broadcast against ``like``: one element as it is, a
    1-D value along ``axis``, a blocked one (``like``'s rank) repeated ``block_size`` times
    along ``axis`` and cut to ``like``'s size there."""
    rank = like.ndim
    if value.ndim == 0 or (math.prod(value.shape) == 1 and not block_size):
        return value.reshape(())
    if block_size:
        if value.ndim != rank:
            raise ValueError(f"ONNX {node.op_type} node {node.name!r}: a blocked scale must have "
                             f"the input's rank {rank}, got shape {value.shape}")
        size = like.shape[axis]
        cut = (slice(None),) * axis + (slice(0, size),)
        if isinstance(value, np.ndarray):
            return np.repeat(value, block_size, axis)[cut]
        return value.repeat_interleave(block_size, axis)[cut]
    if value.ndim != 1 or value.shape[0] != like.shape[axis]:
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: a per-axis scale or zero point "
                         f"must be 1-D of size {like.shape[axis]} (axis {axis} of shape "
                         f"{tuple(like.shape)}), got shape {tuple(value.shape)}")
    return value.reshape((-1,) + (1,) * (rank - 1 - axis))


def _device(node: Node, value: Value, dtype) -> Tensor | float | int:
    """``value`` in ``dtype`` as an operand of device arithmetic: a one-element host constant
    is a Python number (a literal of the program), anything else a device tensor."""
    if isinstance(value, np.ndarray):
        if value.size == 1 and value.ndim == 0:
            return value.reshape(()).astype(dtype).item()
        return node.lift(value.astype(dtype))
    return value if value.dtype == dtype else value.astype(dtype)


def _saturated(node: Node, y: Tensor, dtype: np.dtype) -> Tensor:
    """Float ``y`` rounded half to even and saturated to ``dtype``'s range, in ``dtype``."""
    info = np.iinfo(dtype)
    return y.round().clamp(float(info.min), float(info.max)).astype(dtype)


def _minus_zero_point(node: Node, x: Value, zero_point: Value, axis: int | None = None) -> Tensor:
    """``x - zero_point`` in int32 (``axis``: where a 1-D zero point lies in ``x``)."""
    x = node.lift(x).astype(np.int32)
    if zero_point is None:
        return x
    if axis is not None and zero_point.ndim == 1 and zero_point.shape[0] > 1:
        zero_point = _along(node, zero_point, axis, x)
    return x - _device(node, zero_point, np.int32)


@converter("QuantizeLinear")
def _quantize_linear(node: Node):
    """``saturate(round(x / scale) + zero_point)``; the type is the zero point's, else the
    ``output_dtype`` attribute's, else uint8."""
    from onnx.helper import tensor_dtype_to_np_dtype

    x, scale, zero_point = node.inputs[0], node.inputs[1], node.input(2)
    if zero_point is not None:
        dtype = zero_point.dtype
    elif node.attr("output_dtype", 0):
        dtype = tensor_dtype_to_np_dtype(node.attr("output_dtype"))
    else:
        dtype = np.uint8
    dtype = _quantized_dtype(node, dtype)
    x = node.lift(x).astype(np.float32)
    axis, block = int(node.attr("axis", 1)) % max(x.ndim, 1), int(node.attr("block_size", 0))
    y = x / _device(node, _along(node, scale, axis, x, block), np.float32)
    y = y.round()
    if zero_point is not None:
        y = y + _device(node, _along(node, zero_point, axis, x, block), np.float32)
    return _saturated(node, y, dtype)


@converter("DequantizeLinear")
def _dequantize_linear(node: Node):
    """``(x - zero_point) * scale`` in the scale's type (the difference exact, in int32)."""
    x, scale, zero_point = node.inputs[0], node.inputs[1], node.input(2)
    if x.dtype != np.int32:
        _quantized_dtype(node, x.dtype)
    axis, block = int(node.attr("axis", 1)) % max(x.ndim, 1), int(node.attr("block_size", 0))
    difference = node.lift(x).astype(np.int32)
    if zero_point is not None:
        difference = difference - _device(node, _along(node, zero_point, axis, x, block),
                                          np.int32)
    dtype = scale.dtype
    scale = _device(node, _along(node, scale, axis, x, block), dtype)
    return difference.astype(dtype) * scale


@converter("DynamicQuantizeLinear")
def _dynamic_quantize_linear(node: Node):
    """uint8 ``y``, its scale and zero point from the range of ``x`` widened to hold 0:
    ``scale = (max - min) / 255`` (1 / 255 for a range of zero), ``zero_point =
    round(saturate(-min / scale))``."""
    x = node.tensor(0).astype(np.float32)
    low = T.minimum(x.amin(), 0.0)
    high = T.maximum(x.amax(), 0.0)
    width = high - low
    scale = T.where(width == 0.0, 1.0, width) * (1.0 / 255.0)
    zero_point = (-low / scale).clamp(0.0, 255.0).round()
    y = _saturated(node, (x / scale).round() + zero_point, np.dtype(np.uint8))
    return [y, scale.astype(node.inputs[0].dtype), zero_point.astype(np.uint8)]


@converter("MatMulInteger")
def _matmul_integer(node: Node):
    """``(A - a_zero_point) @ (B - b_zero_point)`` in int32; a 1-D ``a_zero_point`` is one
    per row of A, a 1-D ``b_zero_point`` one per column of B."""
    a = _minus_zero_point(node, node.inputs[0], node.input(2), axis=node.inputs[0].ndim - 2)
    b = _minus_zero_point(node, node.inputs[1], node.input(3))
    return T.matmul(a, b)


def _integer_conv(node: Node, x: Tensor, w: Tensor) -> Tensor:
    """The convolution of int32 ``x`` ``[N, C, ...]`` and ``w`` ``[O, C / group, k...]``
    (1-d or 2-d), exact in int32: ``F.unfold``'s columns of the zero-padded input times the
    filter's rows, one batched matmul per group."""
    nd = x.ndim - 2
    if nd == 1:
        x, w = x.unsqueeze(2), w.unsqueeze(2)
    elif nd != 2:
        raise node.fail(f"{nd}-d integer convolutions are not supported (1 or 2 spatial axes)")
    kernel = w.shape[2:]
    strides, dilations, begin, end = _spatial_attributes(node, x if nd == 2 else x.squeeze(2),
                                                         w.shape[2 + (2 - nd):])
    if nd == 1:
        strides, dilations, begin, end = [1] + strides, [1] + dilations, [0] + begin, [0] + end
    amounts = [begin[1], end[1], begin[0], end[0]]
    if any(amounts):  # (ONNX pads the shifted input with zeros; unfold pads symmetrically)
        x = F.pad(x, amounts, value=0)
    group = int(node.attr("group", 1))
    n, channels = x.shape[:2]
    out_channels = w.shape[0]
    columns = F.unfold(x, tuple(kernel), dilation=tuple(dilations), stride=tuple(strides))
    per_group = columns.reshape(n, group, columns.shape[1] // group, columns.shape[2])
    rows = w.reshape(group, out_channels // group, math.prod(w.shape[1:]))
    y = T.matmul(rows, per_group)  # [N, group, O / group, L]
    out_h = (x.shape[2] - dilations[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    out_w = (x.shape[3] - dilations[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    y = y.reshape(n, out_channels, out_h, out_w)
    return y.squeeze(2) if nd == 1 else y


@converter("ConvInteger")
def _conv_integer(node: Node):
    """The convolution of ``x - x_zero_point`` and ``w - w_zero_point`` (one per output
    channel where 1-D), in int32."""
    x = _minus_zero_point(node, node.inputs[0], node.input(2))
    w = _minus_zero_point(node, node.inputs[1], node.input(3), axis=0)
    return _integer_conv(node, x, w)


def _requantized(node: Node, accumulated: Tensor, scale: Value, y_scale: Value,
                 y_zero_point: Value, axis: int, dtype) -> Tensor:
    """int32 sums times ``scale / y_scale`` (in float32), plus ``y_zero_point``, rounded
    half to even and saturated to ``dtype``."""
    scale = _device(node, _along(node, scale, axis, accumulated), np.float32)
    y = accumulated.astype(np.float32) * (scale / _device(node, y_scale, np.float32))
    if y_zero_point is not None:
        y = y + _device(node, y_zero_point, np.float32)
    return _saturated(node, y, _quantized_dtype(node, dtype))


def _product(node: Node, a: Value, b: Value) -> Value:
    """The product of two scales in float32 (folded on the host where both are there)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.asarray(a.astype(np.float32) * b.astype(np.float32))
    return node.lift(a).astype(np.float32) * node.lift(b).astype(np.float32)


@converter("QLinearMatMul")
def _qlinear_matmul(node: Node):
    """``saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)``,
    the product exact in int32; a 1-D ``b_scale`` is one per column."""
    a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point = (
        node.input(i) for i in range(8))
    a_rows = _minus_zero_point(node, a, a_zero_point, axis=a.ndim - 2)
    b_columns = _minus_zero_point(node, b, b_zero_point, axis=b.ndim - 1)
    accumulated = T.matmul(a_rows, b_columns)
    last = accumulated.ndim - 1
    scale = _product(node, a_scale, b_scale)
    dtype = a.dtype if y_zero_point is None else y_zero_point.dtype
    return _requantized(node, accumulated, scale, y_scale, y_zero_point, last, dtype)


@converter("QLinearConv")
def _qlinear_conv(node: Node):
    """ConvInteger's sums plus the int32 bias ``B``, requantized to ``y_scale`` and
    ``y_zero_point`` (a 1-D ``w_scale`` is one per output channel)."""
    x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point = (
        node.input(i) for i in range(8))
    accumulated = _integer_conv(node, _minus_zero_point(node, x, x_zero_point),
                                _minus_zero_point(node, w, w_zero_point, axis=0))
    bias = node.input(8)
    if bias is not None:
        accumulated = accumulated + _along(node, node.lift(bias).astype(np.int32), 1,
                                           accumulated)
    dtype = x.dtype if y_zero_point is None else y_zero_point.dtype
    scale = _product(node, x_scale, w_scale)
    return _requantized(node, accumulated, scale, y_scale, y_zero_point, 1, dtype)
