"""``keras.random`` for gingham. Dropout draws its mask on the device from a Philox state
(:func:`gingham.nn.functional.dropout`), so a compiled training step draws a new mask every
replay (the seed generator's state is a variable the step advances); ``uniform`` does the same
inside a step. The other draws are made on the host with NumPy from the seed (initialisers run
once, eagerly); inside a compiled step they would be frozen at tracing, so there they raise
NotImplementedError."""

from __future__ import annotations

import numpy as np

from keras.src.backend.config import floatx
# SeedGenerator and make_default_seed: Keras reads them through backend.random.
from keras.src.random.seed_generator import SeedGenerator, draw_seed, make_default_seed

from ...frontend import tensor as gt
from ...frontend.jit import current_trace
from ...nn import functional as F
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor, to_numpy_dtype


def _generator(op: str, seed) -> np.random.Generator:
    if current_trace() is not None:
        raise NotImplementedError(f"random.{op} inside a compiled step is not implemented by "
                                  "gingham's Keras backend yet (only dropout is)")
    state = convert_to_numpy(draw_seed(seed)).astype(np.uint32)
    return np.random.default_rng([int(s) for s in state])


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    values = _generator("normal", seed).normal(mean, stddev, size=shape)
    return convert_to_tensor(values, dtype or floatx())


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Drawn on the host, or inside a compiled step on the device from the seed's Philox state
    as dropout's mask is (so the augmentation layers, RandomFlip and RandomTranslation,
    draw anew every step)."""
    if current_trace() is None:
        values = _generator("uniform", seed).uniform(minval, maxval, size=shape)
        return convert_to_tensor(values, dtype or floatx())
    state = convert_to_tensor(draw_seed(seed), "uint32")
    draws = F._uniform(tuple(shape), state) * (maxval - minval) + minval
    return draws.astype(to_numpy_dtype(dtype or floatx()))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    rng = _generator("truncated_normal", seed)
    count = int(np.prod(shape))
    drawn = np.empty(0)
    while drawn.size < count:  # redraw what falls outside two standard deviations
        more = rng.normal(size=max(2 * count, 16))
        drawn = np.concatenate([drawn, more[np.abs(more) <= 2.0]])
    return convert_to_tensor(mean + stddev * drawn[:count].reshape(shape), dtype or floatx())


def randint(shape, minval, maxval, dtype="int32", seed=None):
    values = _generator("randint", seed).integers(minval, maxval, size=shape)
    return convert_to_tensor(values, dtype)


def dropout(inputs, rate, noise_shape=None, seed=None):
    """Dropout drawn on the device. A ``noise_shape`` (None entries: the input's size) draws
    one mask of that shape, broadcast over the input (EfficientNet's drop-connect drops
    whole samples with ``(None, 1, 1, 1)``)."""
    x = convert_to_tensor(inputs)
    state = convert_to_tensor(draw_seed(seed), "uint32")
    if noise_shape is None:
        return F.dropout(x, float(rate), True, seed=state)
    if len(noise_shape) != x.ndim:
        raise ValueError(f"random.dropout: noise_shape {tuple(noise_shape)} must have one "
                         f"entry per axis of the input (shape {x.shape})")
    shape = tuple(size if wanted is None else int(wanted)
                  for wanted, size in zip(noise_shape, x.shape))
    if shape == x.shape:
        return F.dropout(x, float(rate), True, seed=state)
    mask = F.dropout(gt.ones(shape, x.dtype, x.device), float(rate), True, seed=state)
    return x * mask


__all__ = ["SeedGenerator", "make_default_seed", "normal", "uniform", "truncated_normal",
           "randint", "dropout"]
__getattr__ = unsupported_module_getattr(__name__, "random")
