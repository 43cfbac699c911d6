"""Keras user idioms beyond keras_oracle.py's models, and the script that runs them on Keras'
PyTorch backend, the oracle (as keras_oracle.py does):

    KERAS_BACKEND=torch python tests/keras/keras_idioms.py masked_hinge start.npz result.npz

Each program builds a model, takes its initial weights from ``start.npz`` (``w0``, ``w1``,
...), trains and evaluates it on fixed data (no shuffling) and returns its results as
arrays: the history, evaluate's values, predictions, and what the preprocessing layers and
ops it uses compute eagerly. Only the Keras API is used, so the file runs under either
backend; test_keras_idioms.py runs the same programs with gingham's.
"""

from __future__ import annotations

import sys

import numpy as np

PROGRAMS = ("masked_hinge", "image_preprocessing", "custom_gradient")


def build(name: str):
    """The compiled model of program ``name`` (Keras' default initial weights)."""
    import keras
    from keras import layers

    if name == "masked_hinge":
        # Masking's mask reaches the loss, which multiplies it into the temporal sample
        # weights in place (`sample_weight *= mask`); Hinge converts 0/1 labels with
        # ops.cond, which runs in the symbolic build too.
        model = keras.Sequential([
            keras.Input((5, 3)), layers.Masking(0.0),
            layers.LSTM(4, return_sequences=True),
            layers.TimeDistributed(layers.Dense(1, activation="tanh"))])
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss=keras.losses.Hinge(),
                      metrics=[keras.metrics.MeanSquaredError(name="mse")])
    elif name == "image_preprocessing":
        # Resizing with crop_to_aspect_ratio; R2Score counts with ops.size.
        model = keras.Sequential([
            keras.Input((6, 9, 2)), layers.Resizing(4, 4, crop_to_aspect_ratio=True),
            layers.Flatten(), layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse",
                      metrics=[keras.metrics.R2Score(name="r2")])
    elif name == "custom_gradient":
        # ops.custom_gradient inside the step: a scaled gradient reversal and log(1 + e^x)
        # with its hand-written gradient
        model = keras.Sequential([keras.Input((4,)), layers.Dense(3), _CustomGradients(),
                                  layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    else:
        raise ValueError(name)
    return model


def _CustomGradients():  # noqa: N802 (a layer, made when Keras is imported)
    """A layer computing ``log1pexp(reverse(x))`` with two ``ops.custom_gradient``
    functions: ``reverse`` passes ``-0.5`` times its upstream gradient back."""
    import keras
    from keras import ops

    @ops.custom_gradient
    def reverse(x):
        def grad(*args, upstream=None):
            return -0.5 * upstream
        return x * 1.0, grad

    @ops.custom_gradient
    def log1pexp(x):
        e = ops.exp(x)

        def grad(*args, upstream=None):
            return upstream * (1.0 - 1.0 / (1.0 + e))
        return ops.log(1.0 + e), grad

    class CustomGradients(keras.layers.Layer):
        def call(self, x):
            return log1pexp(reverse(x))

    return CustomGradients()


def data(name: str) -> tuple:
    """``(x, y, sample_weight)`` of program ``name``."""
    rng = np.random.default_rng(3)
    if name == "masked_hinge":
        x = rng.standard_normal((20, 5, 3)).astype(np.float32)
        x[:6, 3:] = 0.0  # masked time steps
        x[6:12, 1:] = 0.0
        y = np.repeat((x[:, :1, :1] > 0).astype(np.float32), 5, axis=1)
        weights = np.tile(np.linspace(0.5, 1.5, 5, dtype=np.float32), (20, 1))
        return x, y, weights
    if name == "image_preprocessing":
        x = rng.random((20, 6, 9, 2)).astype(np.float32)
        y = np.stack([x[:, 1:5, 3:6, 0].mean((1, 2)), x[:, :, :, 1].max((1, 2))], 1)
        return x, y.astype(np.float32), None
    if name == "custom_gradient":
        x = rng.standard_normal((16, 4)).astype(np.float32)
        return x, x[:, :1] * 2.0 - x[:, 1:2], None
    raise ValueError(name)


def eager(name: str) -> dict[str, np.ndarray]:
    """What program ``name``'s preprocessing computes outside the model."""
    import keras
    from keras import layers, ops

    result = {}
    if name == "image_preprocessing":
        x, _, _ = data(name)
        result["resize_pad"] = ops.convert_to_numpy(layers.Resizing(
            8, 5, pad_to_aspect_ratio=True, fill_value=0.25, data_format="channels_first")(
            np.transpose(x[:3], (0, 3, 1, 2))))
        result["resize_crop_uint8"] = ops.convert_to_numpy(keras.ops.image.resize(
            (x[0] * 250).astype("uint8"), (3, 2), crop_to_aspect_ratio=True))
        bins = layers.Discretization(bin_boundaries=[0.25, 0.5, 0.75])  # bins: a TrackedList
        result["discretized"] = ops.convert_to_numpy(bins(x[0, :, :, 0]))
        result["digitize_list"] = ops.convert_to_numpy(ops.digitize(x[0, 0, :, 1], [0.3, 0.6]))
        result["size_arithmetic"] = ops.convert_to_numpy(ops.size(x[:2]) + ops.ones(()))
        # Equalization takes from integer histograms; CutMix and RandomErasing from masks
        result["equalized"] = ops.convert_to_numpy(layers.Equalization(value_range=(0, 1))(
            x[:2]))
        result["take_bool"] = ops.convert_to_numpy(ops.take(x[0, :, :, 0] > 0.5, [4, 0, 4],
                                                            axis=1))
    return result


def run(name: str, weights: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Train and evaluate program ``name`` from ``weights``; its results as arrays."""
    model = build(name)
    model.set_weights(weights)
    x, y, sample_weight = data(name)
    history = model.fit(x, y, sample_weight=sample_weight, batch_size=8, epochs=2,
                        shuffle=False, verbose=0)
    result = {f"history/{k}": np.asarray(v, np.float64) for k, v in history.history.items()}
    result["evaluate"] = np.asarray(model.evaluate(x, y, sample_weight=sample_weight,
                                                   batch_size=6, verbose=0), np.float64)
    result["predict"] = np.asarray(model.predict(x, batch_size=7, verbose=0))
    result.update(eager(name))
    return result


def main(argv: list[str]) -> None:
    name, start, out = argv
    with np.load(start) as saved:
        weights = [saved[f"w{i}"] for i in range(len(saved.files))]
    np.savez(out, **run(name, weights))


if __name__ == "__main__":
    main(sys.argv[1:])
