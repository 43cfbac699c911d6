"""Reference networks used by the examples, the tests and ``gingham bench model``.

* :class:`ResNet9` — the DAWNBench CIFAR-10 network of David Page's "How to train your ResNet":
  prep conv 64; layer1 conv 128 + pool + a residual of two convs; layer2 conv 256 + pool;
  layer3 conv 512 + pool + a residual; global max pool; linear 10 (scaled by 0.125). Each conv is
  3x3 conv, batch norm, relu.
* :class:`ResNet18` — the common CIFAR ResNet-18 (kuangliu/pytorch-cifar): a 3x3 stem conv 64,
  four stages of two :class:`BasicBlock` (64, 128, 256, 512 channels; stages 2-4 start with
  stride 2 and a 1x1 conv + batch norm shortcut), global average pooling, linear 10.
* :class:`StoryNet` — the network of PlaidML's launch story: four residual blocks on 100x100
  RGB images (trained there at batch 16).
* :class:`SmallConvNet` — a two-conv network for the 8x8 digits.

Every model takes ``data_format``: ``"NCHW"`` (the default) or ``"NHWC"``
(channels-last), the layout of the images it is given and of every activation inside; the
parameters are the same (PyTorch's shapes and order) in both, so a model's weights load into
the other layout and into its PyTorch twin unchanged.

    model = ResNet9(data_format="NHWC")
    logits = model(images)                          # images [N, 32, 32, 3]
"""

from __future__ import annotations

from ..frontend.tensor import Tensor
from . import functional as F
from .modules import BatchNorm2d, Conv2d, Flatten, Linear, Module, Sequential


def _spatial_axes(data_format: str) -> tuple[int, int]:
    """The H and W axes of 4-d data in ``data_format``."""
    return (1, 2) if data_format == "NHWC" else (2, 3)


class ConvBN(Module):
    """3x3 conv (no bias), batch norm, relu."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1, device: str | None = None,
                 data_format: str = "NCHW") -> None:
        self.conv = Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False, device=device,
                           data_format=data_format)
        self.bn = BatchNorm2d(c_out, device=device, data_format=data_format)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))


class Residual(Module):
    def __init__(self, channels: int, device: str | None = None,
                 data_format: str = "NCHW") -> None:
        self.first = ConvBN(channels, channels, device=device, data_format=data_format)
        self.second = ConvBN(channels, channels, device=device, data_format=data_format)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.second(self.first(x))


class ResNet9(Module):
    """The DAWNBench ResNet-9 on 3x32x32 images. ``width`` scales every layer (64: the
    network of the benchmark; tests use a narrow one).

        model = ResNet9(data_format="NHWC")         # [N, 32, 32, 3] -> [N, 10]
    """

    def __init__(self, classes: int = 10, device: str | None = None,
                 data_format: str = "NCHW", width: int = 64) -> None:
        def conv_bn(c_in: int, c_out: int) -> ConvBN:
            return ConvBN(c_in, c_out, device=device, data_format=data_format)

        self.data_format = data_format
        self.prep = conv_bn(3, width)
        self.layer1 = conv_bn(width, 2 * width)
        self.res1 = Residual(2 * width, device=device, data_format=data_format)
        self.layer2 = conv_bn(2 * width, 4 * width)
        self.layer3 = conv_bn(4 * width, 8 * width)
        self.res3 = Residual(8 * width, device=device, data_format=data_format)
        self.linear = Linear(8 * width, classes, bias=False, device=device)

    def _pool(self, x: Tensor, size) -> Tensor:
        return F.max_pool2d(x, size, data_format=self.data_format)

    def forward(self, x: Tensor) -> Tensor:
        x = self.prep(x)
        x = self.res1(self._pool(self.layer1(x), 2))
        x = self._pool(self.layer2(x), 2)
        x = self.res3(self._pool(self.layer3(x), 2))
        height = x.shape[_spatial_axes(self.data_format)[0]]
        x = self._pool(x, height).reshape(x.shape[0], -1)  # global max pool
        return self.linear(x) * 0.125


class BasicBlock(Module):
    """conv-bn-relu-conv-bn plus the shortcut, then relu (ResNet's basic block).

    The shortcut is the input itself, or — when the block changes the channel count or has a
    ``stride`` — a 1x1 conv (no bias) with that stride and a batch norm, as in ResNet-18.

        block = BasicBlock(64, 128, stride=2)      # [N, 64, 32, 32] -> [N, 128, 16, 16]
    """

    def __init__(self, channels: int, out_channels: int | None = None, stride: int = 1,
                 device: str | None = None, data_format: str = "NCHW") -> None:
        out = channels if out_channels is None else out_channels
        layout = {"device": device, "data_format": data_format}
        self.conv1 = Conv2d(channels, out, 3, stride=stride, padding=1, bias=False, **layout)
        self.bn1 = BatchNorm2d(out, **layout)
        self.conv2 = Conv2d(out, out, 3, padding=1, bias=False, **layout)
        self.bn2 = BatchNorm2d(out, **layout)
        self.shortcut = None
        if stride != 1 or out != channels:
            self.shortcut = Sequential(Conv2d(channels, out, 1, stride=stride, bias=False,
                                              **layout), BatchNorm2d(out, **layout))

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        shortcut = x if self.shortcut is None else self.shortcut(x)
        return F.relu(shortcut + self.bn2(self.conv2(y)))


class ResNet18(Module):
    """The CIFAR ResNet-18: 3x3 stem, stages of two basic blocks at ``width`` x (1, 2, 4, 8)
    channels (the last three halving the resolution), global average pooling, linear.

    11,173,962 parameters at the default width 64 and 10 classes, as the common PyTorch CIFAR
    ResNet-18. ``width`` scales every stage (tests use a narrow one).

        model = ResNet18(device="cuda:0")
        logits = model(images)                      # [N, 3, 32, 32] -> [N, 10]
    """

    def __init__(self, classes: int = 10, width: int = 64, device: str | None = None,
                 data_format: str = "NCHW") -> None:
        layout = {"device": device, "data_format": data_format}
        self.data_format = data_format
        self.stem = ConvBN(3, width, **layout)
        stages = []
        channels = width
        for index, out in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if index == 0 else 2
            stages.append(Sequential(BasicBlock(channels, out, stride, **layout),
                                     BasicBlock(out, out, **layout)))
            channels = out
        self.stages = Sequential(*stages)
        self.linear = Linear(channels, classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stages(self.stem(x))
        return self.linear(x.mean(axis=_spatial_axes(self.data_format)))  # global avg pooling


class StoryNet(Module):
    """Four residual blocks on 100x100 RGB images: a stride-2 stem to 50x50x32, the blocks,
    global average pooling and a linear classifier."""

    def __init__(self, classes: int = 10, width: int = 32, device: str | None = None,
                 data_format: str = "NCHW") -> None:
        layout = {"device": device, "data_format": data_format}
        self.data_format = data_format
        self.stem = ConvBN(3, width, stride=2, **layout)
        self.blocks = Sequential(*(BasicBlock(width, **layout) for _ in range(4)))
        self.linear = Linear(width, classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.blocks(self.stem(x))
        return self.linear(x.mean(axis=_spatial_axes(self.data_format)))


class SmallConvNet(Module):
    """Two 3x3 convs with pooling, for 1x8x8 digits (flattened in NCHW order in either
    layout, so the linear layer's weights are PyTorch's)."""

    def __init__(self, classes: int = 10, device: str | None = None,
                 data_format: str = "NCHW") -> None:
        self.data_format = data_format
        self.conv1 = Conv2d(1, 16, 3, padding=1, device=device, data_format=data_format)
        self.conv2 = Conv2d(16, 32, 3, padding=1, device=device, data_format=data_format)
        self.flatten = Flatten(data_format=data_format)
        self.linear = Linear(32 * 2 * 2, classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, data_format=self.data_format)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, data_format=self.data_format)
        return self.linear(self.flatten(x))


__all__ = ["ResNet9", "ResNet18", "StoryNet", "SmallConvNet", "ConvBN", "Residual",
           "BasicBlock"]
