"""Channels-last execution of an ONNX graph's image ops: the graph stays NCHW, its values need not.

ONNX image models are NCHW. gingham's CPU schedules run convolutions, pools and batch norm
faster channels-last (the GEMM of a convolution then reads both operands along the channels:
a ResNet-9's inference 377 -> 220 ms on the 2-core EPYC), as ``gingham bench model`` trains
them. So on such a device a 4-d value that a 2-d convolution makes is kept as
:class:`ChannelsLast`: its tensor holds ``[N, H, W, C]`` for the graph's ``[N, C, H, W]``.

* The image ops (:data:`IMAGE_OPS`: Conv, the 2-d pools, global pools, BatchNormalization)
  take and give channels-last values (their converters see :attr:`Node.channels_last`).
* Elementwise ops (:data:`ELEMENTWISE_OPS`) run on the held tensors: an operand that is not
  channels-last is broadcast as the graph says and permuted alike (a ``[C, 1, 1]`` bias becomes
  ``[1, 1, 1, C]``); the result is channels-last.
* Every other op gets the graph's NCHW value: one transpose, made once per value, where the
  graph leaves the image ops (the Flatten before a classifier).

    model = gingham.onnx.load("resnet18.onnx", device="cpu")              # layout="auto"
    model = gingham.onnx.load("resnet18.onnx", device="cpu", layout="NCHW")   # as the graph
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..frontend.tensor import Tensor

#: Ops whose converters take and give :class:`ChannelsLast` values (4-d inputs only).
IMAGE_OPS = frozenset({"Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
                       "GlobalMaxPool", "BatchNormalization"})

#: Ops that act element by element on broadcast operands: they run on the held tensors.
UNARY_OPS = frozenset({"Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus",
                       "HardSigmoid", "HardSwish", "Gelu", "Erf", "Clip", "Neg", "Abs", "Sqrt",
                       "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Sign", "Sin", "Cos",
                       "Identity", "Cast", "Not"})
BINARY_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean",
                        "PRelu", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                        "And", "Or", "Xor", "Where"})
ELEMENTWISE_OPS = UNARY_OPS | BINARY_OPS

LAYOUTS = ("auto", "NCHW", "NHWC")

_TO_NHWC = (0, 2, 3, 1)
_TO_NCHW = (0, 3, 1, 2)


class ChannelsLast:
    """A graph value ``[N, C, H, W]`` held as the tensor ``[N, H, W, C]``."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor
        self._nchw: Tensor | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        """The graph's (NCHW) shape: what ``Shape`` and the converters' checks see."""
        n, h, w, c = self.tensor.shape
        return (n, c, h, w)

    @property
    def dtype(self) -> np.dtype:
        return self.tensor.dtype

    @property
    def ndim(self) -> int:
        return 4

    def nchw(self) -> Tensor:
        """The value as the graph lays it out (one transpose, shared by every reader)."""
        if self._nchw is None:
            self._nchw = self.tensor.permute(*_TO_NCHW)
        return self._nchw


def channels_last_on(layout: str, device_kind: str) -> bool:
    """Whether a model loaded with ``layout`` runs its image ops channels-last on a device of
    ``device_kind``: ``auto`` does on CPUs (the C backend, a CPU's OpenCL driver), where it
    is faster, and not on GPUs, where gingham's float32 schedules are NCHW's."""
    if layout not in LAYOUTS:
        raise ValueError(f"gingham.onnx: layout must be one of {', '.join(LAYOUTS)}, not "
                         f"{layout!r}")
    return layout == "NHWC" or (layout == "auto" and device_kind == "cpu")


def as_nhwc(value: Any) -> Tensor:
    """A 4-d image value's tensor, channels-last (a transpose if it is held NCHW)."""
    return value.tensor if isinstance(value, ChannelsLast) else value.permute(*_TO_NHWC)


def graph_layout(value: Any) -> Any:
    """``value`` as the graph lays it out: a :class:`ChannelsLast` value transposed back."""
    return value.nchw() if isinstance(value, ChannelsLast) else value


def elementwise_operands(inputs: Sequence[Any]) -> list | None:
    """The operands of an elementwise op that has a channels-last operand, each as it lines
    up with the held ``[N, H, W, C]`` tensors (None, an omitted input, stays None): other
    operands broadcast to 4 dims as the graph does, then permuted alike. None when an
    operand has more than 4 dims (the op then runs on the graph's layout)."""
    operands = []
    for value in inputs:
        if value is None or isinstance(value, ChannelsLast):
            operands.append(None if value is None else value.tensor)
            continue
        shape = tuple(value.shape)
        if len(shape) > 4:
            return None
        if int(np.prod(shape)) == 1 and isinstance(value, np.ndarray):
            operands.append(value)  # a scalar constant broadcasts anywhere
            continue
        full = (1,) * (4 - len(shape)) + shape
        if isinstance(value, np.ndarray):
            operands.append(value.reshape(full).transpose(_TO_NHWC))
        else:
            operands.append(value.reshape(full).permute(*_TO_NHWC))
    return operands


def converter_inputs(op_type: str, inputs: Sequence[Any], channels_last: bool
                     ) -> tuple[list, bool]:
    """The inputs an ``op_type`` converter gets, and whether its results are held
    channels-last: an elementwise op with a channels-last operand runs on the held tensors
    (:func:`elementwise_operands`), an image op gets its inputs as they are held, every other
    op the graph's layout."""
    if channels_last and op_type in ELEMENTWISE_OPS and any(
            isinstance(v, ChannelsLast) for v in inputs):
        operands = elementwise_operands(inputs)
        if operands is not None:
            return operands, True
    if channels_last and op_type in IMAGE_OPS:
        return list(inputs), False
    return [graph_layout(v) for v in inputs], False


def held(result: Any) -> Any:
    """An elementwise op's result on held tensors, as a graph value: a 4-d tensor is one
    held channels-last."""
    return ChannelsLast(result) if isinstance(result, Tensor) and result.ndim == 4 else result


__all__ = ["ChannelsLast", "converter_inputs", "held", "IMAGE_OPS", "ELEMENTWISE_OPS", "LAYOUTS", "channels_last_on",
           "as_nhwc", "graph_layout", "elementwise_operands"]
