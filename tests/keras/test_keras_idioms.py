"""Keras user idioms (keras_idioms.py) run with gingham's backend against the same programs
on Keras' PyTorch backend in a subprocess, from the same initial weights: histories,
evaluate's values, predictions and the preprocessing's eager results must agree. Also the
eager-only tensor index (Keras' RandomCrop) against NumPy's crops, and its refusal inside a
compiled step."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402

import keras_idioms  # noqa: E402
import keras_oracle  # noqa: E402
from gingham.errors import GinghamError  # noqa: E402



@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """name -> (initial weights, the PyTorch backend's results), computed once per program."""
    return keras_oracle.torch_backend_oracle(tmp_path_factory, keras_idioms)


@pytest.mark.parametrize("name", keras_idioms.PROGRAMS)
def test_idioms_match_keras_torch_backend(name, device, oracle):
    weights, expected = oracle(name)
    with keras.device(device):
        got = keras_idioms.run(name, weights)
    assert sorted(got) == sorted(expected)
    for key in sorted(expected):
        assert got[key].shape == expected[key].shape, key
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}: {key}")


def test_random_crop_eager_and_refused_in_a_step(device):
    """RandomCrop slices with tensor bounds: eagerly each batch is one window of the images
    (NumPy's slice at some offset); inside a compiled step the offset would be frozen at
    its first draw, so the step refuses it."""
    x = np.arange(2 * 6 * 7 * 1, dtype=np.float32).reshape(2, 6, 7, 1)
    with keras.device(device):
        crop = keras.layers.RandomCrop(4, 5, seed=1)
        got = keras.ops.convert_to_numpy(crop(x, training=True))
        windows = [x[:, i:i + 4, j:j + 5] for i in range(3) for j in range(3)]
        assert got.shape == (2, 4, 5, 1)
        assert any(np.array_equal(got, w) for w in windows)
        model = keras.Sequential([keras.Input((6, 7, 1)), keras.layers.RandomCrop(4, 5),
                                  keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        with pytest.raises(GinghamError, match="frozen into the compiled program"):
            model.fit(x, np.zeros((2, 1), np.float32), verbose=0)


# The Kolmogorov-Smirnov statistic of 4000 true draws exceeds 0.031 with probability 0.001.
DRAWS = 4000
KS_LIMIT = 0.031


def test_random_draws_inside_a_compiled_step(device):
    """keras.random's normal, truncated_normal and randint inside a compiled step (what
    GaussianNoise or a VAE's sampling layer calls in ``fit``) are drawn on the device anew at
    every replay: their laws against SciPy's, and two replays of one trace differ."""
    from scipy import stats

    class Draws(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.seed = keras.random.SeedGenerator(11)

        def call(self, x):
            rows = keras.ops.shape(x)[0]
            return keras.ops.concatenate([
                keras.random.normal((rows, DRAWS), 1.0, 2.0, seed=self.seed),
                keras.random.truncated_normal((rows, DRAWS), -1.0, 0.5, seed=self.seed),
                keras.ops.cast(keras.random.randint((rows, DRAWS), 3, 9, seed=self.seed),
                               "float32")], axis=-1)

    with keras.device(device):
        model = keras.Sequential([keras.Input((1,)), Draws()])
        first = model.predict_on_batch(np.zeros((1, 1), np.float32))[0]
        second = model.predict_on_batch(np.zeros((1, 1), np.float32))[0]
        assert model.predict_function.traces == 1
    normal, truncated, integers = np.split(first, 3)
    assert stats.kstest(normal, stats.norm(1.0, 2.0).cdf).statistic < KS_LIMIT
    assert stats.kstest(truncated, stats.truncnorm(-2, 2, loc=-1.0, scale=0.5).cdf
                        ).statistic < KS_LIMIT
    assert set(np.unique(integers)) == set(range(3, 9))
    np.testing.assert_allclose(np.bincount(integers.astype(int), minlength=9)[3:] / DRAWS,
                               np.full(6, 1 / 6), atol=0.025)
    # the seed's state advanced: new draws (the integers repeat by chance)
    assert not np.any(first[:2 * DRAWS] == second[:2 * DRAWS])
