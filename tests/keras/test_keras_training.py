"""Keras models trained with gingham's backend against the same script on Keras' PyTorch
backend (tests/keras/keras_oracle.py in a subprocess, one per model): same initial weights,
same batches, no shuffling; the per-epoch history (training and validation losses and
metrics), the trained weights and the predictions must agree."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402

import keras_oracle  # noqa: E402

MODELS = ["mlp", "mlp_softmax", "cnn", "functional", "transformer", "rnn", "scan",
          "mobilenet_v2"]
# float32 throughout; the convolutions' and batch norm's sums reorder, and three epochs of
# momentum amplify that a little.
TOLERANCE = {"mlp": 1e-4, "mlp_softmax": 1e-4, "cnn": 5e-4, "functional": 1e-4,
             "transformer": 1e-4, "rnn": 1e-4, "scan": 1e-4, "mobilenet_v2": 1e-4}
# One step of a deep network: the weights barely move, so each weight's update (trained
# minus initial) is compared, to a fraction of that tensor's largest update plus a floor
# at float32's precision of the step's largest update: updates that are zero in exact
# arithmetic are cancellation noise there (the beta of a batch norm whose output another
# batch norm centres, the moving mean of a batch norm after one), measured at 1e-7 of it.
UPDATE_TOLERANCE = 1e-2
UPDATE_FLOOR = 1e-6


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """name -> (initial weights, the PyTorch backend's results), computed once per program."""
    return keras_oracle.torch_backend_oracle(tmp_path_factory, keras_oracle)


@pytest.mark.parametrize("name", MODELS)
def test_training_matches_keras_torch_backend(name, device, oracle):
    weights, expected = oracle(name)
    with keras.device(device):
        got = keras_oracle.train(name, weights)
    assert sorted(got) == sorted(expected)
    tolerance = TOLERANCE[name]
    largest = max(np.abs(expected[f"w{i}"] - w).max() for i, w in enumerate(weights))
    for key in sorted(expected):
        if name in keras_oracle.ONE_STEP and key.startswith("w"):
            start = weights[int(key[1:])]
            update = expected[key] - start
            np.testing.assert_allclose(got[key] - start, update, rtol=0,
                                       atol=UPDATE_TOLERANCE * np.abs(update).max()
                                       + UPDATE_FLOOR * largest,
                                       err_msg=f"{name}: update of {key}")
            continue
        np.testing.assert_allclose(got[key], expected[key], rtol=tolerance, atol=tolerance,
                                   err_msg=f"{name}: {key}")
