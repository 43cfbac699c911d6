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
"""

from __future__ import annotations

from ..frontend.tensor import Tensor
from . import functional as F
from .modules import BatchNorm2d, Conv2d, Linear, Module, Sequential


class ConvBN(Module):
    """3x3 conv (no bias), batch norm, relu."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1, device: str | None = None) -> None:
        self.conv = Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False, device=device)
        self.bn = BatchNorm2d(c_out, device=device)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))


class Residual(Module):
    def __init__(self, channels: int, device: str | None = None) -> None:
        self.first = ConvBN(channels, channels, device=device)
        self.second = ConvBN(channels, channels, device=device)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.second(self.first(x))


class ResNet9(Module):
    def __init__(self, classes: int = 10, device: str | None = None) -> None:
        self.prep = ConvBN(3, 64, device=device)
        self.layer1 = ConvBN(64, 128, device=device)
        self.res1 = Residual(128, device=device)
        self.layer2 = ConvBN(128, 256, device=device)
        self.layer3 = ConvBN(256, 512, device=device)
        self.res3 = Residual(512, device=device)
        self.linear = Linear(512, classes, bias=False, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.prep(x)
        x = self.res1(F.max_pool2d(self.layer1(x), 2))
        x = F.max_pool2d(self.layer2(x), 2)
        x = self.res3(F.max_pool2d(self.layer3(x), 2))
        x = F.max_pool2d(x, x.shape[2]).reshape(x.shape[0], -1)  # global max pool
        return self.linear(x) * 0.125


class BasicBlock(Module):
    """conv-bn-relu-conv-bn plus the shortcut, then relu (ResNet's basic block).

    The shortcut is the input itself, or — when the block changes the channel count or has a
    ``stride`` — a 1x1 conv (no bias) with that stride and a batch norm, as in ResNet-18.

        block = BasicBlock(64, 128, stride=2)      # [N, 64, 32, 32] -> [N, 128, 16, 16]
    """

    def __init__(self, channels: int, out_channels: int | None = None, stride: int = 1,
                 device: str | None = None) -> None:
        out = channels if out_channels is None else out_channels
        self.conv1 = Conv2d(channels, out, 3, stride=stride, padding=1, bias=False,
                            device=device)
        self.bn1 = BatchNorm2d(out, device=device)
        self.conv2 = Conv2d(out, out, 3, padding=1, bias=False, device=device)
        self.bn2 = BatchNorm2d(out, device=device)
        self.shortcut = None
        if stride != 1 or out != channels:
            self.shortcut = Sequential(Conv2d(channels, out, 1, stride=stride, bias=False,
                                              device=device), BatchNorm2d(out, device=device))

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

    def __init__(self, classes: int = 10, width: int = 64, device: str | None = None) -> None:
        self.stem = ConvBN(3, width, device=device)
        stages = []
        channels = width
        for index, out in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if index == 0 else 2
            stages.append(Sequential(BasicBlock(channels, out, stride, device=device),
                                     BasicBlock(out, out, device=device)))
            channels = out
        self.stages = Sequential(*stages)
        self.linear = Linear(channels, classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stages(self.stem(x))
        return self.linear(x.mean(axis=(2, 3)))  # global average pooling


class StoryNet(Module):
    """Four residual blocks on 100x100 RGB images: a stride-2 stem to 50x50x32, the blocks,
    global average pooling and a linear classifier."""

    def __init__(self, classes: int = 10, width: int = 32, device: str | None = None) -> None:
        self.stem = ConvBN(3, width, stride=2, device=device)
        self.blocks = Sequential(*(BasicBlock(width, device=device) for _ in range(4)))
        self.linear = Linear(width, classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.blocks(self.stem(x))
        return self.linear(x.mean(axis=(2, 3)))


class SmallConvNet(Module):
    """Two 3x3 convs with pooling, for 1x8x8 digits."""

    def __init__(self, classes: int = 10, device: str | None = None) -> None:
        self.conv1 = Conv2d(1, 16, 3, padding=1, device=device)
        self.conv2 = Conv2d(16, 32, 3, padding=1, device=device)
        self.linear = Linear(32 * 2 * 2, classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.linear(x.reshape(x.shape[0], -1))


__all__ = ["ResNet9", "ResNet18", "StoryNet", "SmallConvNet", "ConvBN", "Residual",
           "BasicBlock"]
