"""Neural-network building blocks on :class:`gingham.Tensor`.

* :mod:`gingham.nn.functional` — the op library, each op a few lines of Tile, with
  ``torch.nn.functional``'s names, argument order and defaults;
* layers (:class:`Linear`, :class:`Conv1d`/``2d``/``3d``, :class:`ConvTranspose2d`,
  :class:`BatchNorm2d`, :class:`GroupNorm`, :class:`LayerNorm`, pools, :class:`Upsample`,
  activations, ...), attention (:class:`MultiheadAttention`, the encoder and decoder layers
  and stacks, :class:`Transformer`), containers
  (:class:`Sequential`, :class:`ModuleList`, :class:`ModuleDict`) with PyTorch's
  ``named_parameters``/``state_dict``/``load_state_dict``, and reference models
  (:mod:`gingham.nn.models`);
* :func:`gingham.nn.training.train_step`, the compiled supervised step.

    import gingham.nn.functional as F
    y = F.relu(F.conv2d(x, w, b, stride=2, padding=1))
"""

from . import attention, functional, models, modules, training
from .attention import (MultiheadAttention, Transformer, TransformerDecoder,
                        TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .modules import (ELU, GELU, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, AvgPool3d,
                      BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv1d, Conv2d, Conv3d,
                      ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, Dropout, Embedding,
                      Flatten, GroupNorm, Hardswish, Hardtanh, Identity, IncompatibleKeys,
                      LayerNorm, LeakyReLU, Linear, LogSoftmax, MaxPool1d, MaxPool2d, MaxPool3d,
                      Mish, Module, ModuleDict, ModuleList, PReLU, ReLU, ReLU6, Sequential,
                      Sigmoid, SiLU, Softmax, Softplus, Tanh, Upsample)


def manual_seed(seed: int) -> None:
    """Seed both parameter initialisation and the default dropout generator."""
    modules.manual_seed(seed)
    functional.manual_seed(seed)


__all__ = ["attention", "functional", "models", "training", "manual_seed",
           "Module", "IncompatibleKeys", "Sequential", "ModuleList", "ModuleDict",
           "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm",
           "LayerNorm", "Embedding", "Dropout",
           "Identity", "ReLU", "ReLU6", "Hardtanh", "LeakyReLU", "PReLU", "ELU", "GELU", "SiLU",
           "Mish", "Hardswish", "Softplus", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
           "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool2d", "Upsample", "Flatten",
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
