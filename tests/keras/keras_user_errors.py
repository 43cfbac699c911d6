"""Mistakes Keras users really make, as small programs, and the script that runs them on
Keras' PyTorch backend, the oracle:

    KERAS_BACKEND=torch python tests/keras/keras_user_errors.py result.json

writes, per program, the exception it raised there: the builtin classes it is an instance
of (``["IndexError", "LookupError"]``) and its message. test_keras_user_errors.py runs the same
programs with gingham's backend. Only the Keras API is used, so the file runs under either
backend; every program raises on both.
"""

from __future__ import annotations

import builtins
import json
import sys

import numpy as np

X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
Y = np.random.default_rng(1).standard_normal((8, 2)).astype(np.float32)
LABELS_OUT_OF_RANGE = np.array([0, 1, 1, 0, 1, 0, 1, 5])  # 5: there are 2 classes


def _mlp(loss: str | None = "mse"):
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                              keras.layers.Dense(2)])
    if loss is not None:
        model.compile(optimizer="sgd", loss=loss)
    return model


def _conv(x):
    import keras

    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(2, 3)])
    return model.predict(x, verbose=0)


def _two_inputs():
    import keras

    a, b = keras.Input((3,)), keras.Input((3,))
    model = keras.Model([a, b], keras.layers.Add()([a, b]))
    return model.predict(np.ones((2, 3), np.float32), verbose=0)


def _keras():
    import keras

    return keras


def _ops():
    return _keras().ops


def _sequential(input_shape, layer):
    keras = _keras()
    return keras.Sequential([keras.Input(input_shape), layer])


PROGRAMS = {
    # fit / predict / compile
    "fit_lengths": lambda: _mlp().fit(X, Y[:6], verbose=0),
    "fit_wrong_features": lambda: _mlp().fit(np.ones((8, 5), np.float32), Y, verbose=0),
    "predict_wrong_features": lambda: _mlp().predict(np.ones((8, 5), np.float32), verbose=0),
    "fit_target_width": lambda: _mlp().fit(X, np.ones((8, 3), np.float32), verbose=0),
    "fit_before_compile": lambda: _mlp(None).fit(X, Y, verbose=0),
    "compile_unknown_optimizer": lambda: _mlp(None).compile(optimizer="sgdd", loss="mse"),
    "count_params_unbuilt": lambda: _keras().Sequential(
        [_keras().layers.Dense(3)]).count_params(),
    "set_weights_shape": lambda: _mlp().set_weights([np.ones((5, 3), np.float32)]
                                                    + _mlp().get_weights()[1:]),
    "set_weights_count": lambda: _mlp().set_weights(_mlp().get_weights()[:2]),
    # losses and labels
    "sparse_labels_one_hot": lambda: _mlp("sparse_categorical_crossentropy").fit(
        X, np.eye(2, dtype=np.float32)[[0, 1] * 4], verbose=0),
    "sparse_label_out_of_range_fit": lambda: _mlp("sparse_categorical_crossentropy").fit(
        X, LABELS_OUT_OF_RANGE, verbose=0),
    "sparse_label_out_of_range_evaluate": lambda: _mlp(
        "sparse_categorical_crossentropy").evaluate(X, LABELS_OUT_OF_RANGE, verbose=0),
    "sparse_float_label_out_of_range": lambda: _mlp("sparse_categorical_crossentropy").evaluate(
        X, LABELS_OUT_OF_RANGE.astype(np.float32), verbose=0),
    "sparse_label_out_of_range_train_on_batch": lambda: _mlp(
        "sparse_categorical_crossentropy").train_on_batch(X, LABELS_OUT_OF_RANGE),
    "fit_without_targets": lambda: _mlp().fit(X, verbose=0),
    "categorical_integer_labels": lambda: _mlp("categorical_crossentropy").fit(
        X, np.array([0, 1] * 4), verbose=0),
    # layers
    "conv_input_rank": lambda: _sequential((8, 8), _keras().layers.Conv2D(2, 3)),
    "conv_input_channels": lambda: _conv(np.ones((2, 8, 8, 4), np.float32)),
    "lstm_input_rank": lambda: _sequential((4,), _keras().layers.LSTM(3)),
    "dense_negative_units": lambda: _keras().layers.Dense(-1),
    "embedding_index": lambda: _keras().layers.Embedding(5, 2)(np.array([[1, 7]])),
    "add_layer_shapes": lambda: _keras().layers.Add()([_keras().Input((3,)),
                                                       _keras().Input((4,))]),
    "model_missing_input": _two_inputs,
    # keras.ops
    "ops_matmul": lambda: _ops().matmul(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)),
    "ops_add": lambda: _ops().add(np.ones((2, 3), np.float32), np.ones((4,), np.float32)),
    "ops_reshape": lambda: _ops().reshape(np.ones((2, 3), np.float32), (7,)),
    "ops_concatenate": lambda: _ops().concatenate([np.ones((2, 3), np.float32),
                                                   np.ones((2, 4), np.float32)], axis=0),
    "ops_softmax_axis": lambda: _ops().softmax(np.ones((2, 3), np.float32), axis=2),
    "ops_sum_axis": lambda: _ops().sum(np.ones((2, 3), np.float32), axis=3),
    "ops_take_index": lambda: _ops().take(_ops().ones((3, 2)),
                                          _ops().convert_to_tensor(np.array([0, 5])), axis=0),
    "ops_one_hot_class": lambda: _ops().one_hot(_ops().convert_to_tensor(np.array([0, 5])), 3),
}


def raised(name: str) -> tuple[list[str], str] | None:
    """The builtin classes (most specific first) and message of what program ``name``
    raised, or None where it raised nothing."""
    try:
        PROGRAMS[name]()
    except Exception as error:  # noqa: BLE001 (what it raised is the result)
        classes = [c.__name__ for c in type(error).__mro__
                   if getattr(builtins, c.__name__, None) is c
                   and c not in (Exception, BaseException, object)]
        return classes, str(error)
    return None


def main(argv: list[str]) -> None:
    import keras

    keras.utils.set_random_seed(0)
    with open(argv[0], "w") as out:
        json.dump({name: raised(name) for name in PROGRAMS}, out)


if __name__ == "__main__":
    main(sys.argv[1:])
