"""``keras.random`` for gingham. Dropout draws its mask on the device from a Philox state
(:func:`gingham.nn.functional.dropout`), so a compiled training step draws a new mask every
replay (the seed generator's state is a variable the step advances); ``uniform`` does the same
inside a step, and ``categorical``, ``shuffle``, ``gamma``, ``beta`` and ``binomial`` always
draw on the device (:func:`gingham.nn.functional.random_uniform` and the samplers built on
it). ``normal``, ``truncated_normal`` and ``randint`` are drawn on the host with NumPy from
the seed eagerly (initialisers run once), and on the device inside a compiled step (the
GaussianNoise and GaussianDropout layers, a VAE's sampling layer), where a host draw would
be frozen at tracing.

    keras.random.gamma((1000,), alpha=2.5, seed=7)
"""

from __future__ import annotations

import numpy as np

from keras.src.backend.config import floatx
# SeedGenerator and make_default_seed: Keras reads them through backend.random.
from keras.src.random.seed_generator import SeedGenerator, draw_seed, make_default_seed

from ...frontend import indexing
from ...frontend import tensor as gt
from ...frontend.jit import current_trace
from ...nn import functional as F
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor, to_numpy_dtype
from .numpy import _float


def _generator(op: str, seed) -> np.random.Generator:
    if current_trace() is not None:
        raise NotImplementedError(f"random.{op} inside a compiled step is not implemented by "
                                  "gingham's Keras backend yet (only dropout is)")
    state = convert_to_numpy(draw_seed(seed)).astype(np.uint32)
    return np.random.default_rng([int(s) for s in state])


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Drawn on the host, or inside a compiled step on the device (Box-Muller on the
    seed's Philox draws, :func:`gingham.nn.functional.random_normal`)."""
    if current_trace() is None:
        values = _generator("normal", seed).normal(mean, stddev, size=shape)
        return convert_to_tensor(values, dtype or floatx())
    draws = F.random_normal(tuple(shape), _state(seed)) * stddev + mean
    return draws.astype(to_numpy_dtype(dtype or floatx()))


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Drawn on the host, or inside a compiled step on the device from the seed's Philox state
    as dropout's mask is (so the augmentation layers, RandomFlip and RandomTranslation,
    draw anew every step)."""
    if current_trace() is None:
        values = _generator("uniform", seed).uniform(minval, maxval, size=shape)
        return convert_to_tensor(values, dtype or floatx())
    state = convert_to_tensor(draw_seed(seed), "uint32")
    draws = F.random_uniform(tuple(shape), state) * (maxval - minval) + minval
    return draws.astype(to_numpy_dtype(dtype or floatx()))


# The standard normal's CDF at -2 and 2: truncated_normal keeps draws within two deviations.
_PHI_MINUS_2, _PHI_2 = 0.022750131948179195, 0.9772498680518208


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Normal draws within two standard deviations of ``mean``: redrawn on the host, or
    inside a compiled step on the device by the inverse CDF of a uniform draw between the
    CDF's values at -2 and 2 (one draw per element, no rejection)."""
    if current_trace() is not None:
        uniform_draws = F.random_uniform(tuple(shape), _state(seed))
        within = uniform_draws * (_PHI_2 - _PHI_MINUS_2) + _PHI_MINUS_2
        standard = (within * 2.0 - 1.0).erfinv() * float(np.sqrt(2.0))
        return (standard * stddev + mean).astype(to_numpy_dtype(dtype or floatx()))
    rng = _generator("truncated_normal", seed)
    count = int(np.prod(shape))
    drawn = np.empty(0)
    while drawn.size < count:  # redraw what falls outside two standard deviations
        more = rng.normal(size=max(2 * count, 16))
        drawn = np.concatenate([drawn, more[np.abs(more) <= 2.0]])
    return convert_to_tensor(mean + stddev * drawn[:count].reshape(shape), dtype or floatx())


def randint(shape, minval, maxval, dtype="int32", seed=None):
    """Integers in ``[minval, maxval)``: drawn on the host, or inside a compiled step on
    the device from uniform draws (``minval`` and ``maxval`` numbers there)."""
    if current_trace() is None:
        values = _generator("randint", seed).integers(minval, maxval, size=shape)
        return convert_to_tensor(values, dtype)
    low, high = int(minval), int(maxval)
    scaled = (F.random_uniform(tuple(shape), _state(seed)) * float(high - low)).floor()
    # float32 rounding can carry u * n up to n: keep the draw below maxval
    return (scaled.clamp(max=high - low - 1) + low).astype(to_numpy_dtype(dtype))


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


def _state(seed):
    """The Philox state of ``seed`` on the current device, as dropout's."""
    return convert_to_tensor(draw_seed(seed), "uint32")


def categorical(logits, num_samples, dtype="int32", seed=None):
    """``num_samples`` class indices per row of ``logits [batch, classes]``, drawn with
    replacement from its softmax (:func:`gingham.multinomial`).

        keras.random.categorical([[0.0, 1.0, 2.0]], 5, seed=3)           # [1, 5]
    """
    x = _float(convert_to_tensor(logits))
    if x.ndim != 2:
        raise ValueError("`logits` should be a 2-D tensor with shape [batch_size, num_classes]. "
                         f"Received: logits={x.shape}")
    probabilities = F.softmax(x.astype(np.float32), -1)
    drawn = F.multinomial(probabilities, int(num_samples), True, seed=_state(seed))
    return drawn.astype(to_numpy_dtype(dtype))


def shuffle(x, axis=0, seed=None):
    """``x`` with its slices along ``axis`` in a random order (an argsort of uniform draws,
    one per slice).

        keras.random.shuffle(keras.ops.arange(10), seed=1)
    """
    x = convert_to_tensor(x)
    axis = int(axis) % x.ndim
    order = F.random_uniform((x.shape[axis],), _state(seed)).argsort()
    return indexing.index_select(x, axis, order)


def _alpha(value, shape, dtype=None) -> gt.Tensor:
    """``value`` broadcast to ``shape``, in float64 where the draws are to be float64 (so
    that F.random_gamma draws in float64), float32 otherwise."""
    wide = dtype is not None and np.dtype(to_numpy_dtype(dtype)) == np.float64
    return convert_to_tensor(value, "float64" if wide else "float32").broadcast_to(tuple(shape))


def gamma(shape, alpha, dtype=None, seed=None):
    """Gamma(``alpha``, 1) draws of ``shape`` (:func:`gingham.nn.functional.random_gamma`,
    Marsaglia and Tsang's sampler with 8 rounds).

        keras.random.gamma((1000,), alpha=0.5, seed=7)
    """
    dtype = dtype or floatx()
    drawn = F.random_gamma(_alpha(alpha, shape, dtype), _state(seed))
    return drawn.astype(to_numpy_dtype(dtype))


def beta(shape, alpha, beta, dtype=None, seed=None):
    """Beta(``alpha``, ``beta``) draws of ``shape``: ``X / (X + Y)`` of two gamma draws.

        keras.random.beta((1000,), 2.0, 5.0, seed=7)
    """
    shape = tuple(shape)
    dtype = dtype or floatx()
    both = gt.stack([_alpha(alpha, shape, dtype), _alpha(beta, shape, dtype)])
    x, y = F.random_gamma(both, _state(seed)).unbind(0)
    return (x / (x + y)).astype(to_numpy_dtype(dtype))


def binomial(shape, counts, probabilities, dtype=None, seed=None):
    """Binomial(``counts``, ``probabilities``) draws of ``shape``: the number of ``counts``
    uniform draws below ``probabilities`` (``max(counts)`` draws per element, so for counts
    up to a few hundred). The largest count must be known when the draw is built:
    ``counts`` a number or an array, or a tensor outside a compiled step.

        keras.random.binomial((1000,), counts=10, probabilities=0.3, seed=7)
    """
    shape = tuple(shape)
    if isinstance(counts, gt.Tensor) and current_trace() is not None:
        raise NotImplementedError("random.binomial inside a compiled step needs counts known "
                                  "when it is traced (a number or an array), not a tensor")
    largest = int(np.max(convert_to_numpy(counts)))
    if largest < 0:
        raise ValueError(f"random.binomial: counts must be non-negative, got {largest}")
    draws = F.random_uniform((max(largest, 1),) + shape, _state(seed))
    trial = convert_to_tensor(np.arange(max(largest, 1), dtype=np.float32).reshape(
        (-1,) + (1,) * len(shape)))
    success = (draws < _alpha(probabilities, shape)) & (trial < _alpha(counts, shape))
    return success.astype(np.float32).sum(0).astype(to_numpy_dtype(dtype or floatx()))


__all__ = ["SeedGenerator", "make_default_seed", "normal", "uniform", "truncated_normal",
           "randint", "dropout", "categorical", "shuffle", "gamma", "beta", "binomial"]
__getattr__ = unsupported_module_getattr(__name__, "random")
