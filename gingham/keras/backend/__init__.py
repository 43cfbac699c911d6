"""gingham's Keras 3 backend modules, served to Keras as ``keras.src.backend.numpy`` (see
:mod:`gingham.keras`, which installs them). The names below are the backend contract that
``keras.src.backend`` imports with ``from ... import *``."""

from keras.src.backend.common.name_scope import name_scope

from . import core, image, linalg, math, nn, numpy, random
from .core import (
    IS_THREAD_SAFE,
    SUPPORTS_COMPLEX_DTYPES,
    SUPPORTS_RAGGED_TENSORS,
    SUPPORTS_SPARSE_TENSORS,
    Variable,
    cast,
    compute_output_spec,
    cond,
    convert_to_numpy,
    convert_to_tensor,
    device_scope,
    is_tensor,
    random_seed_dtype,
    shape,
    vectorized_map,
)
from .rnn import bidirectional_gru, bidirectional_lstm, cudnn_ok, gru, lstm, rnn

__all__ = [
    "name_scope", "core", "image", "linalg", "math", "nn", "numpy", "random",
    "IS_THREAD_SAFE", "SUPPORTS_COMPLEX_DTYPES", "SUPPORTS_RAGGED_TENSORS",
    "SUPPORTS_SPARSE_TENSORS", "Variable", "cast", "compute_output_spec", "cond",
    "convert_to_numpy", "convert_to_tensor", "device_scope", "is_tensor", "random_seed_dtype",
    "shape", "vectorized_map", "bidirectional_gru", "bidirectional_lstm", "cudnn_ok", "gru",
    "lstm", "rnn",
]
