"""Neural-network building blocks on :class:`gingham.Tensor`.

* :mod:`gingham.nn.functional` — the op library, each op a few lines of Tile, with
  ``torch.nn.functional``'s names, argument order and defaults;
* layers (:class:`Linear`, :class:`Conv2d`, :class:`BatchNorm2d`, ...), attention
  (:class:`MultiheadAttention`, :class:`TransformerEncoderLayer`) and reference models
  (:mod:`gingham.nn.models`);
* :func:`gingham.nn.training.train_step`, the compiled supervised step.

    import gingham.nn.functional as F
    y = F.relu(F.conv2d(x, w, b, stride=2, padding=1))
"""

from . import attention, functional, models, modules, training
from .attention import MultiheadAttention, TransformerEncoderLayer
from .modules import (AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, Module,
                      ReLU, Sequential)


def manual_seed(seed: int) -> None:
    """Seed both parameter initialisation and the default dropout generator."""
    modules.manual_seed(seed)
    functional.manual_seed(seed)


__all__ = ["attention", "functional", "models", "training", "Module", "Linear", "Conv2d", "BatchNorm2d",
           "ReLU", "MaxPool2d", "AdaptiveAvgPool2d", "Flatten", "Sequential", "manual_seed",
           "MultiheadAttention", "TransformerEncoderLayer"]
