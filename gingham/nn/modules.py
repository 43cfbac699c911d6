"""Layers with parameters, in PyTorch's shape: ``Module``, ``Linear``, ``Conv2d``,
``BatchNorm2d``, ``Sequential`` and friends, over :mod:`gingham.nn.functional`.

    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    logits = model(images)
    opt = gingham.optim.SGD(model.parameters(), lr=0.1)

The image layers take ``data_format="NHWC"`` for channels-last data (what PyTorch's
``memory_format=torch.channels_last`` and Keras use); their parameters keep PyTorch's shapes
(OIHW filters), so weights move between the layouts and to and from PyTorch unchanged.

Parameters are leaf tensors that require gradients; buffers (running statistics) are leaf
tensors updated by ``assign`` — inside ``gingham.jit`` those updates become outputs of the
compiled step. Initialisation follows PyTorch's defaults (Kaiming-uniform with a = sqrt(5)).
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from ..frontend.tensor import Tensor, tensor
from . import functional as F


class Module:
    """A callable holding parameters, buffers and sub-modules (found through attributes)."""

    training = True

    def forward(self, *args):
        raise NotImplementedError

    def __call__(self, *args):
        return self.forward(*args)

    def children(self) -> Iterator["Module"]:
        for value in vars(self).values():
            if isinstance(value, Module):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from (v for v in value if isinstance(v, Module))

    def parameters(self) -> list[Tensor]:
        found: list[Tensor] = []
        for name, value in vars(self).items():
            if isinstance(value, Tensor) and value.requires_grad and not name.startswith("_"):
                found.append(value)
        for child in self.children():
            found.extend(child.parameters())
        return found

    def train(self, mode: bool = True) -> "Module":
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def to(self, device: str) -> "Module":
        """Move every tensor attribute (parameters and buffers) to ``device``."""
        for name, value in list(vars(self).items()):
            if isinstance(value, Tensor):
                setattr(self, name, value.to(device))
        for child in self.children():
            child.to(device)
        return self


def _uniform(shape, bound: float, device: str | None, rng: np.random.Generator) -> Tensor:
    values = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return tensor(values, device=device, requires_grad=True)


_default_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed parameter initialisation (and nothing else)."""
    global _default_rng
    _default_rng = np.random.default_rng(seed)


class Linear(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: str | None = None) -> None:
        bound = 1.0 / math.sqrt(in_features)
        self.weight = _uniform((out_features, in_features), bound, device, _default_rng)
        self.bias = _uniform((out_features,), bound, device, _default_rng) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)


def _image_format(layer: str, data_format: str) -> str:
    """``data_format`` checked once, when the layer is made (``ValueError`` naming it)."""
    F._data_format(layer, data_format, 2)
    return data_format


class Conv2d(Module):
    """2-D convolution with an ``[out, in/groups, kh, kw]`` weight (PyTorch's OIHW), on NCHW
    data or, with ``data_format="NHWC"``, channels-last data:

        conv = Conv2d(3, 64, 3, padding=1, data_format="NHWC")   # [N, H, W, 3] -> [N, H, W, 64]
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, device: str | None = None,
                 data_format: str = "NCHW") -> None:
        self.data_format = _image_format("Conv2d", data_format)
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        fan_in = in_channels // groups * kh * kw
        bound = 1.0 / math.sqrt(fan_in)
        self.weight = _uniform((out_channels, in_channels // groups, kh, kw), bound, device,
                               _default_rng)
        self.bias = _uniform((out_channels,), bound, device, _default_rng) if bias else None
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, self.data_format)


class BatchNorm2d(Module):
    """Batch norm over (N, H, W) per channel; running statistics are updated in training.
    ``data_format="NHWC"``: the channels are the last axis.

        bn = BatchNorm2d(64, data_format="NHWC")                 # [N, H, W, 64] -> same
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 device: str | None = None, data_format: str = "NCHW") -> None:
        self.data_format = _image_format("BatchNorm2d", data_format)
        self.weight = tensor(np.ones(num_features, np.float32), device=device, requires_grad=True)
        self.bias = tensor(np.zeros(num_features, np.float32), device=device, requires_grad=True)
        self.running_mean = tensor(np.zeros(num_features, np.float32), device=device)
        self.running_var = tensor(np.ones(num_features, np.float32), device=device)
        self.eps, self.momentum = eps, momentum

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                False, self.momentum, self.eps, self.data_format)
        y, mean, var = F.batch_norm(x, self.running_mean, self.running_var, self.weight,
                                    self.bias, True, self.momentum, self.eps, self.data_format)
        from ..frontend.tensor import assign_all

        assign_all([(self.running_mean, mean), (self.running_var, var)])
        return y


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, data_format: str = "NCHW") -> None:
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.data_format = _image_format("MaxPool2d", data_format)

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding,
                            data_format=self.data_format)


class AdaptiveAvgPool2d(Module):
    """Average pooling to ``output_size`` (1: global average pooling), either layout."""

    def __init__(self, output_size, data_format: str = "NCHW") -> None:
        self.output_size = output_size
        self.data_format = _image_format("AdaptiveAvgPool2d", data_format)

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size, self.data_format)


class Flatten(Module):
    """``[N, ...] -> [N, features]``, the features in PyTorch's NCHW order in either layout.

    With ``data_format="NHWC"`` a 4-d input is read as ``[N, H, W, C]`` and flattened as its
    NCHW twin would be, so a following :class:`Linear` holds the same weights as PyTorch's
    (a transposing copy, unless H = W = 1, as after global pooling, where it is a reshape).
    """

    def __init__(self, data_format: str = "NCHW") -> None:
        self.data_format = _image_format("Flatten", data_format)

    def forward(self, x: Tensor) -> Tensor:
        if self.data_format == "NHWC" and x.ndim == 4 and x.shape[1] * x.shape[2] > 1:
            x = x.transpose(0, 3, 1, 2)
        return x.reshape(x.shape[0], -1)


class Sequential(Module):
    def __init__(self, *layers: Module) -> None:
        self.layers = list(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index: int) -> Module:
        return self.layers[index]


__all__ = ["Module", "Linear", "Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d",
           "AdaptiveAvgPool2d", "Flatten", "Sequential", "manual_seed"]
