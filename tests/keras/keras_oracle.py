"""The models of test_keras_training.py and the script that trains them on Keras' own
PyTorch backend, the oracle.

    KERAS_BACKEND=torch python tests/keras/keras_oracle.py mlp start.npz result.npz

loads ``start.npz`` (the initial weights, ``w0``, ``w1``, ...), trains the named model on the
data :func:`data` makes (no shuffling, same batches), and writes ``result.npz``: the history
(``history/<key>``, one value per epoch), the trained weights, and the model's predictions
on the first batch (``predict``). The test runs the same function with gingham's backend.
Only the Keras API is used here, so the file runs under either backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np

EPOCHS = {"transformer": 2}  # and 3 for the others
BATCH = 16
# Models big enough that one train_on_batch step tells (the history is then its loss).
ONE_STEP = ("mobilenet_v2",)


def data(name: str) -> tuple:
    """``(x, y, validation)`` of ``name``: small synthetic classification / regression data."""
    rng = np.random.default_rng(7)
    n = 48
    if name == "mlp":
        x = rng.standard_normal((n, 8)).astype(np.float32)
        y = (x[:, :3].sum(1) > 0).astype(np.int64) + (x[:, 3] > 1).astype(np.int64)
        return x, y, (x[:BATCH], y[:BATCH])
    if name == "mlp_softmax":
        x = rng.standard_normal((n, 6)).astype(np.float32)
        labels = np.argmax(x[:, :3], axis=1)
        return x, np.eye(3, dtype=np.float32)[labels], None
    if name == "cnn":
        x = rng.standard_normal((n, 8, 8, 2)).astype(np.float32)
        y = (x[:, :4, :, 0].mean((1, 2)) > 0).astype(np.int64) * 2
        return x, y, (x[:BATCH], y[:BATCH])
    if name == "functional":
        a = rng.standard_normal((n, 6)).astype(np.float32)
        b = rng.standard_normal((n, 4, 2)).astype(np.float32)
        c = rng.integers(0, 10, (n, 3)).astype(np.int32)
        prob = (a[:, 0] + b[:, 0, 0] > 0).astype(np.float32)[:, None]
        reg = np.stack([a[:, 1] * 0.5, c[:, 0] / 10.0], axis=1).astype(np.float32)
        return {"a": a, "b": b, "c": c}, {"prob": prob, "reg": reg}, None
    if name == "transformer":
        tokens = rng.integers(0, 20, (n, 8)).astype(np.int32)
        y = (tokens[:, 0] % 3).astype(np.int64)  # the first token decides: causal attention
        return tokens, y, (tokens[:BATCH], y[:BATCH])
    if name == "rnn":
        tokens = rng.integers(1, 12, (n, 6)).astype(np.int32)
        lengths = rng.integers(2, 7, n)
        tokens[np.arange(6) >= lengths[:, None]] = 0  # padding, masked by mask_zero
        y = (tokens[:, 0] > tokens[:, 1]).astype(np.int64) + (lengths > 4)
        return tokens, y, (tokens[:BATCH], y[:BATCH])
    if name == "scan":
        x = rng.standard_normal((n, 5, 4)).astype(np.float32)
        y = (x[:, -1, 0] + x[:, 0, 1] > 0).astype(np.int64)
        return x, y, (x[:BATCH], y[:BATCH])
    if name == "mobilenet_v2":
        x = rng.standard_normal((4, 32, 32, 3)).astype(np.float32)
        return x, np.array([0, 3, 7, 9], np.int64), None
    raise ValueError(name)


def _ScanRecurrence():  # noqa: N802 (a class, made when Keras is imported)
    """A layer running ``h = tanh(h * decay + x_t)`` over time with ``keras.ops.scan``,
    giving the last state and the mean of the states."""
    import keras
    from keras import ops

    class ScanRecurrence(keras.layers.Layer):
        def build(self, input_shape):
            self.decay = self.add_weight(shape=(input_shape[-1],), initializer="ones")

        def call(self, x):
            def step(h, x_t):
                h = ops.tanh(h * self.decay + x_t)
                return h, h
            start = ops.zeros((ops.shape(x)[0], ops.shape(x)[2]), x.dtype)
            last, states = ops.scan(step, start, ops.transpose(x, (1, 0, 2)))
            return ops.concatenate([last, ops.mean(states, axis=0)], axis=-1)

    return ScanRecurrence()


def build(name: str):
    """The compiled model ``name`` (Keras' default initial weights; the test replaces them)."""
    import keras
    from keras import layers

    if name == "mlp":
        model = keras.Sequential([
            keras.Input((8,)), layers.Dense(16, activation="gelu"), layers.LayerNormalization(),
            layers.Dense(3)])
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy",
                               # ops.in_top_k (top_k, take_along_axis) inside the steps
                               keras.metrics.SparseTopKCategoricalAccuracy(k=2)])
    elif name == "mlp_softmax":
        model = keras.Sequential([
            keras.Input((6,)), layers.Dense(12, activation="tanh"), layers.Dropout(0.0),
            layers.Dense(3, activation="softmax")])
        model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
                      loss=keras.losses.CategoricalCrossentropy(), metrics=["accuracy"])
    elif name == "cnn":
        model = keras.Sequential([
            keras.Input((8, 8, 2)),
            layers.Conv2D(4, 3, padding="same"),
            layers.BatchNormalization(),
            layers.Activation("relu"),
            layers.MaxPooling2D(2),
            layers.SeparableConv2D(4, 3, padding="same"),
            # stride 2 with an odd kernel: Keras' "same" crops the two sides unequally
            layers.Conv2DTranspose(4, 3, strides=2, padding="same"),
            layers.MaxPooling2D(2),
            layers.Permute((3, 1, 2)),  # to channels_first for the layers below
            layers.Conv2D(6, 3, strides=2, padding="same", data_format="channels_first"),
            layers.Activation("silu"),
            layers.AveragePooling2D(2, data_format="channels_first"),
            layers.Dropout(0.0),
            layers.GlobalAveragePooling2D(data_format="channels_first"),
            layers.Dense(3)])
        model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    elif name == "functional":
        a = keras.Input((6,), name="a")
        b = keras.Input((4, 2), name="b")
        c = keras.Input((3,), name="c", dtype="int32")
        embedded = layers.Flatten()(layers.Embedding(10, 4)(c))
        joined = layers.Concatenate()([a, layers.Flatten()(b), embedded])
        hidden = layers.Dense(8, activation="relu")(joined)
        hidden = layers.Add()([hidden, layers.Dense(8, activation="sigmoid")(a)])
        hidden = layers.Flatten()(layers.Reshape((2, 4))(hidden))
        prob = layers.Dense(1, activation="sigmoid", name="prob")(hidden)
        reg = layers.Dense(2, name="reg")(hidden)
        model = keras.Model({"a": a, "b": b, "c": c}, {"prob": prob, "reg": reg})
        model.compile(optimizer=keras.optimizers.AdamW(0.01, weight_decay=0.05),
                      loss={"prob": keras.losses.BinaryCrossentropy(),
                            "reg": keras.losses.MeanSquaredError()},
                      metrics={"prob": ["accuracy"], "reg": ["mae"]})
    elif name == "transformer":  # causal Conv1D, causal self-attention: einsum, masks
        tokens = keras.Input((8,), dtype="int32")
        embedded = layers.Conv1D(16, 3, padding="causal")(layers.Embedding(20, 16)(tokens))
        attended = layers.MultiHeadAttention(num_heads=2, key_dim=8)(
            embedded, embedded, use_causal_mask=True)
        hidden = layers.LayerNormalization()(layers.Add()([embedded, attended]))
        hidden = layers.Dense(16, activation="relu")(hidden)
        logits = layers.Dense(3)(layers.GlobalAveragePooling1D()(hidden))
        model = keras.Model(tokens, logits)
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    elif name == "rnn":  # Keras' recurrent loop, masked: LSTM into a bidirectional GRU
        model = keras.Sequential([
            keras.Input((6,), dtype="int32"), layers.Embedding(12, 8, mask_zero=True),
            layers.LSTM(8, return_sequences=True), layers.Bidirectional(layers.GRU(4)),
            layers.Dense(3)])
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    elif name == "scan":  # keras.ops.scan inside the steps (no built-in layer uses it)
        model = keras.Sequential([keras.Input((5, 4)), layers.Dense(4), _ScanRecurrence(),
                                  layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
    elif name == "mobilenet_v2":  # Keras' own application: depthwise convolutions, ReLU6
        model = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35,
                                               weights=None, classes=10)
        model.compile(optimizer=keras.optimizers.SGD(0.001),
                      loss=keras.losses.SparseCategoricalCrossentropy())
    else:
        raise ValueError(name)
    return model


def train(name: str, weights: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Train ``name`` from ``weights``; the history, weights and predictions as arrays."""
    model = build(name)
    model.set_weights(weights)
    x, y, validation = data(name)
    if name in ONE_STEP:
        loss = model.train_on_batch(x, y)
        result = {"history/loss": np.asarray([loss], np.float64)}
        result.update({f"w{i}": np.asarray(w) for i, w in enumerate(model.get_weights())})
        return result
    history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS.get(name, 3), shuffle=False,
                        verbose=0,
                        validation_data=validation)
    first = {k: v[:BATCH] for k, v in x.items()} if isinstance(x, dict) else x[:BATCH]
    predicted = model.predict(first, batch_size=BATCH, verbose=0)
    if isinstance(predicted, dict):
        predicted = np.concatenate([predicted[k] for k in sorted(predicted)], axis=1)
    result = {f"history/{k}": np.asarray(v, np.float64) for k, v in history.history.items()}
    result.update({f"w{i}": np.asarray(w) for i, w in enumerate(model.get_weights())})
    result["predict"] = np.asarray(predicted)
    return result


def main(argv: list[str]) -> None:
    name, start, out = argv
    with np.load(start) as saved:
        weights = [saved[f"w{i}"] for i in range(len(saved.files))]
    np.savez(out, **train(name, weights))


def torch_backend_oracle(tmp_path_factory, programs) -> Callable[[str], tuple]:
    """For a module-scoped fixture: name -> (initial weights, what ``programs``' script wrote
    when it ran that program on Keras' PyTorch backend in a subprocess), each computed once.

    ``programs`` is a module like this one (``build(name)``, and a ``main`` that takes the
    name, the initial weights' file and the result's file): ``keras_oracle`` or
    ``keras_idioms``. Called from gingham's side, with gingham's backend installed. The
    initial weights are fixed (seed 0): some of MobileNetV2's draws are so ill-conditioned (a
    batch norm over 4 values, ReLU6's kinks) that Keras' PyTorch backend in float32 differs
    from itself in float64 by 33% in a weight's update (seed 1); seed 0 agrees to 0.1%.
    """
    import keras

    results: dict[str, tuple] = {}

    def get(name: str):
        if name not in results:
            folder = tmp_path_factory.mktemp(name)
            keras.utils.set_random_seed(0)
            with keras.device("reference"):
                weights = programs.build(name).get_weights()
            np.savez(folder / "start.npz", **{f"w{i}": w for i, w in enumerate(weights)})
            environment = dict(os.environ, KERAS_BACKEND="torch", CUDA_VISIBLE_DEVICES="")
            subprocess.run([sys.executable, str(Path(programs.__file__)), name,
                            str(folder / "start.npz"), str(folder / "result.npz")],
                           check=True, env=environment, cwd=folder, timeout=300)
            with np.load(folder / "result.npz") as saved:
                results[name] = weights, dict(saved)
        return results[name]

    return get


if __name__ == "__main__":
    main(sys.argv[1:])
