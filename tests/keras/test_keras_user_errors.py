"""Keras user mistakes (keras_user_errors.py) on gingham's backend against the same programs
on Keras' PyTorch backend in a subprocess: each raises there, and must raise here an
exception the same ``except`` clause catches (an instance of the PyTorch backend's most
specific builtin class) with a message naming the facts a user needs."""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402

import keras_user_errors  # noqa: E402

# Regular expressions gingham's message must match, per program (Keras' own checks word
# most of them; the rest are gingham's ops).
FACTS = {
    "fit_lengths": (r"'x' sizes: 8", r"'y' sizes: 6"),
    "fit_wrong_features": (r"expected axis -1 of input shape to have value 4", r"\(8, 5\)"),
    "predict_wrong_features": (r"expected axis -1 of input shape to have value 4", r"\(8, 5\)"),
    "fit_target_width": (r"\(8, 3\)", r"\(8, 2\)"),
    "fit_before_compile": (r"compile\(\)",),
    "compile_unknown_optimizer": (r"sgdd",),
    "count_params_unbuilt": (r"isn't built",),
    "set_weights_shape": (r"\(4, 3\)", r"\(5, 3\)"),
    "set_weights_count": (r"length 2", r"expecting 4"),
    "sparse_labels_one_hot": (r"target\.shape=\(8, 2\)", r"output\.shape=\(8, 2\)"),
    "sparse_label_out_of_range_fit": (r"sparse_categorical_crossentropy", r"target 5",
                                      r"2 classes"),
    "sparse_label_out_of_range_evaluate": (r"sparse_categorical_crossentropy", r"target 5",
                                           r"2 classes"),
    "sparse_float_label_out_of_range": (r"sparse_categorical_crossentropy", r"target 5",
                                        r"2 classes"),
    "sparse_label_out_of_range_train_on_batch": (r"sparse_categorical_crossentropy",
                                                 r"target 5"),
    "fit_without_targets": (r"NoneType", r"fit\(x\)"),
    "categorical_integer_labels": (r"target\.shape=\(8,\)", r"output\.shape=\(8, 2\)"),
    "conv_input_rank": (r"min_ndim=4", r"\(None, 8, 8\)"),
    "conv_input_channels": (r"value 3", r"\(2, 8, 8, 4\)"),
    "lstm_input_rank": (r"ndim=3", r"\(None, 4\)"),
    "dense_negative_units": (r"units=-1",),
    "embedding_index": (r"take", r"index 7", r"size 5"),
    "add_layer_shapes": (r"\(3,\)", r"\(4,\)"),
    "model_missing_input": (r"expects 2",),
    "ops_matmul": (r"matmul", r"\(2, 3\)", r"\(4, 5\)"),
    "ops_add": (r"add", r"\(2, 3\)", r"\(4,\)"),
    "ops_reshape": (r"reshape", r"6 elements", r"\(7,\)"),
    "ops_concatenate": (r"concat", r"\(2, 4\)", r"\(2, 3\)"),
    "ops_softmax_axis": (r"softmax", r"dim 2", r"\(2, 3\)"),
    "ops_sum_axis": (r"sum", r"dim 3", r"\(2, 3\)"),
    "ops_take_index": (r"take", r"index 5", r"size 3"),
    "ops_one_hot_class": (r"one_hot", r"class 5", r"num_classes 3"),
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> dict:
    """What each program raised on Keras' PyTorch backend (keras_user_errors.main)."""
    result = tmp_path_factory.mktemp("user_errors") / "raised.json"
    environment = dict(os.environ, KERAS_BACKEND="torch", CUDA_VISIBLE_DEVICES="")
    subprocess.run([sys.executable, str(Path(keras_user_errors.__file__)), str(result)],
                   check=True, env=environment, cwd=result.parent, timeout=300)
    return json.loads(result.read_text())


def test_every_program_has_facts():
    assert sorted(FACTS) == sorted(keras_user_errors.PROGRAMS)


@pytest.mark.parametrize("name", sorted(keras_user_errors.PROGRAMS))
def test_keras_user_error_as_torch_backend(name, device, oracle):
    assert oracle[name] is not None, f"{name} raised nothing on Keras' PyTorch backend"
    classes, message = oracle[name]
    expected = getattr(builtins, classes[0])
    keras.utils.set_random_seed(0)
    with keras.device(device):
        with pytest.raises(Exception) as ours:
            keras_user_errors.PROGRAMS[name]()
    assert isinstance(ours.value, expected), (
        f"gingham raised {type(ours.value).__name__}: {ours.value}; the PyTorch backend "
        f"raised {classes[0]}: {message}")
    for fact in FACTS[name]:
        assert re.search(fact, str(ours.value)), f"{fact!r} not in {str(ours.value)!r}"
