"""How gingham.keras installs itself (the backend's name, KERAS_BACKEND, the refusal when keras
came first), the compiled steps (one trace per batch shape), dropout inside a compiled step,
and saving: model.save / keras.models.load_model and get_weights / set_weights."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402

import keras_oracle  # noqa: E402


def _python(code: str, **environment) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(environment)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_backend_is_named_gingham():
    assert keras.config.backend() == "gingham"
    assert "KERAS_BACKEND" not in os.environ or os.environ["KERAS_BACKEND"] == "gingham"
    assert type(keras.ops.convert_to_tensor(1.0)).__module__ == "gingham.frontend.tensor"


def test_keras_backend_variable_names_gingham():
    done = _python("import gingham.keras, keras, os; "
                   "print(keras.config.backend(), os.environ['KERAS_BACKEND'])",
                   KERAS_BACKEND="gingham")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["gingham", "gingham"]


@pytest.mark.parametrize("code, environment, message", [
    ("import keras; import gingham.keras", {"KERAS_BACKEND": "torch"},
     "keras was imported with its 'torch' backend before gingham.keras"),
    ("import gingham.keras", {"KERAS_BACKEND": "jax"}, "KERAS_BACKEND='jax'"),
])
def test_refuses_another_backend(code, environment, message):
    done = _python(code, **environment)
    assert done.returncode != 0
    assert "GinghamError" in done.stderr and message in done.stderr, done.stderr


def _labels(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64)


def test_steps_trace_once_per_batch_shape(device):
    """fit's steps replay one compiled program per batch shape: 48 samples in batches of 16
    trace once, 40 (a last batch of 8) twice, however many epochs; evaluate and predict
    likewise."""
    x, y = _labels(48)
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(("batch", batch)),
        on_epoch_end=lambda epoch, logs: seen.append(("epoch", epoch, sorted(logs))))
    with keras.device(device):
        model = keras_oracle.build("mlp")
        history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[record])
        assert model.train_function.traces == 1
    epoch_keys = ["loss", "sparse_categorical_accuracy",
                  "sparse_top_k_categorical_accuracy"]  # the mlp's metrics (keras_oracle)
    assert seen == [("batch", 0), ("batch", 1), ("batch", 2), ("epoch", 0, epoch_keys),
        ("batch", 0), ("batch", 1), ("batch", 2), ("epoch", 1, epoch_keys)]
    assert history.epoch == [0, 1] and all(isinstance(v, float) for v in history.history["loss"])
    with keras.device(device):
        model.fit(x[:40], y[:40], batch_size=16, epochs=3, verbose=0)
        assert model.train_function.traces == 2
        model.evaluate(x, y, batch_size=16, verbose=0)
        model.predict(x, batch_size=16, verbose=0)
        assert model.test_function.traces == 1 and model.predict_function.traces == 1


def test_dropout_in_a_compiled_step(device):
    """Dropout draws a new mask at every replay of the compiled training step (each row's
    output is the kept inputs times 1 / (1 - rate)), and none at inference."""
    with keras.device(device):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dropout(0.5, seed=3),
                                  keras.layers.Dense(1, use_bias=False,
                                                     kernel_initializer="ones")])
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
        x, y = np.ones((64, 4), np.float32), np.zeros((64, 1), np.float32)
        losses = [model.train_on_batch(x, y) for _ in range(3)]
        predicted = model.predict_on_batch(x)
        outputs = model(x, training=True)
    assert model.train_function.traces == 1
    assert len(set(losses)) == 3, losses  # a new mask every step
    # Each row keeps k of 4 ones, scaled by 2: its output is 2k, k binomial(4, 1/2), so the
    # mean squared output is 4 * E[k^2] = 20 on average.
    assert all(8.0 < loss < 32.0 for loss in losses), losses
    np.testing.assert_array_equal(predicted, np.full((64, 1), 4.0, np.float32))
    values = keras.ops.convert_to_numpy(outputs)
    assert set(np.unique(values)) <= {0.0, 2.0, 4.0, 6.0, 8.0}


def test_save_and_load_model(tmp_path, device):
    """A trained model saved as .keras loads with the same weights, optimiser state (a
    further step gives the same result) and predictions; set_weights copies weights."""
    x, y = _labels(32, seed=1)
    with keras.device(device):
        model = keras_oracle.build("mlp")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
        path = tmp_path / "model.keras"
        model.save(path)
        loaded = keras.models.load_model(path)
        for saved, restored in zip(model.get_weights(), loaded.get_weights()):
            np.testing.assert_array_equal(saved, restored)
        np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0),
                                   rtol=1e-6, atol=1e-6)
        assert loaded.optimizer.iterations.numpy() == model.optimizer.iterations.numpy() == 2
        evaluated = model.evaluate(x[:16], y[:16], verbose=0)
        np.testing.assert_allclose(loaded.test_on_batch(x[:16], y[:16]), evaluated, rtol=1e-6)
        first = model.train_on_batch(x[:16], y[:16])
        second = loaded.train_on_batch(x[:16], y[:16])
        np.testing.assert_allclose(second, first, rtol=1e-6)
        # train_on_batch reports the loss before its update, the same as test_on_batch's
        np.testing.assert_allclose(first[0], evaluated[0], rtol=1e-5)
        for a, b in zip(model.get_weights(), loaded.get_weights()):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        fresh = keras_oracle.build("mlp")
        fresh.set_weights(model.get_weights())
        np.testing.assert_allclose(fresh.predict_on_batch(x), model.predict_on_batch(x),
                                   rtol=1e-6, atol=1e-6)


def test_cond_in_a_compiled_step(device):
    """ops.cond on a tensor inside a compiled step runs both branches and selects on the
    device: with gradient_accumulation_steps=2 (Keras' cond between accumulating and
    updating), the first batch leaves the weights and the second applies the mean gradient,
    which for equal halves of a mean loss is one step on both halves together."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 2)).astype(np.float32)

    def make(**options):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.SGD(0.1, **options), loss="mse")
        return model

    with keras.device(device):
        accumulating, single = make(gradient_accumulation_steps=2), make()
        start = accumulating.get_weights()
        single.set_weights(start)
        accumulating.train_on_batch(x[:8], y[:8])
        for before, now in zip(start, accumulating.get_weights()):
            np.testing.assert_array_equal(now, before)
        accumulating.train_on_batch(x[8:], y[8:])
        single.train_on_batch(x, y)
    assert accumulating.train_function.traces == 1
    for a, b, before in zip(accumulating.get_weights(), single.get_weights(), start):
        assert np.abs(b - before).max() > 1e-3
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
