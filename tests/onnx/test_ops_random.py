"""gingham.onnx's random ops, checked by their distributions (their numbers are Philox's, not
NumPy's): moments of many draws from fixed seeds, Bernoulli's rate per probability,
Multinomial's class frequencies against the softmax of its scores, training-mode Dropout's
kept fraction and scaling against its mask; a seeded node draws the
same numbers on every call, one without a seed new ones. On every device.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import gingham.onnx  # noqa: E402

N = 40_000  # draws per moment: the standard error of a mean is 1/200 of a deviation


def _random_model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("RandomUniform", [], ["uniform"], shape=[N], low=-1.0, high=3.0,
                         seed=1.0),
        helper.make_node("RandomNormal", [], ["normal"], shape=[2, N // 2], mean=2.0, scale=3.0,
                         seed=2.0),
        helper.make_node("RandomUniformLike", ["like"], ["uniform_like"]),  # default generator
        helper.make_node("RandomNormalLike", ["like"], ["normal_like"], seed=3.0,
                         dtype=TensorProto.DOUBLE),
        helper.make_node("Bernoulli", ["p"], ["bernoulli"], seed=4.0),
        helper.make_node("Multinomial", ["scores"], ["multinomial"], sample_size=N // 4,
                         seed=5.0),
        helper.make_node("Dropout", ["like", "ratio", "training"], ["dropped", "kept"],
                         seed=6),
    ]
    graph = helper.make_graph(
        nodes, "random",
        [helper.make_tensor_value_info("like", TensorProto.FLOAT, [N]),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, [4, N // 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("uniform", TensorProto.FLOAT, [N]),
         helper.make_tensor_value_info("normal", TensorProto.FLOAT, [2, N // 2]),
         helper.make_tensor_value_info("uniform_like", TensorProto.FLOAT, [N]),
         helper.make_tensor_value_info("normal_like", TensorProto.DOUBLE, [N]),
         helper.make_tensor_value_info("bernoulli", TensorProto.FLOAT, [4, N // 4]),
         helper.make_tensor_value_info("multinomial", TensorProto.INT32, [2, N // 4]),
         helper.make_tensor_value_info("dropped", TensorProto.FLOAT, [N]),
         helper.make_tensor_value_info("kept", TensorProto.BOOL, [N])],
        [numpy_helper.from_array(np.array(0.3, np.float32), "ratio"),
         numpy_helper.from_array(np.array(True), "training")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


def test_random_ops_by_distribution(device):
    model = gingham.onnx.load(_random_model(), device=device)
    rates = np.array([0.0, 0.1, 0.5, 0.9], np.float32)
    scores = np.array([[0.0, 1.0, 2.0], [3.0, -1.0, 3.0]], np.float32)
    like = np.linspace(1.0, 2.0, N, dtype=np.float32)  # Dropout's input; only its shape else
    feed = {"like": like,
            "p": np.repeat(rates[:, None], N // 4, 1), "scores": scores}
    first = model.run(None, feed)
    uniform, normal, uniform_like, normal_like, bernoulli, multinomial, dropped, kept = first
    assert uniform.min() >= -1.0 and uniform.max() < 3.0
    np.testing.assert_allclose([uniform.mean(), uniform.var()], [1.0, 16 / 12], atol=0.04)
    np.testing.assert_allclose([uniform_like.mean(), uniform_like.var()], [0.5, 1 / 12],
                               atol=0.01)
    assert normal_like.dtype == np.float64
    for draws, mean, deviation in ((normal, 2.0, 3.0), (normal_like, 0.0, 1.0)):
        z = (draws.reshape(-1) - mean) / deviation
        # mean, variance, skew, kurtosis of a standard normal; and its median
        np.testing.assert_allclose([z.mean(), z.var(), (z ** 3).mean(), (z ** 4).mean()],
                                   [0.0, 1.0, 0.0, 3.0], atol=0.08)
        assert abs(np.median(z)) < 0.03
    assert set(np.unique(bernoulli)) <= {0.0, 1.0}
    np.testing.assert_allclose(bernoulli.mean(1), rates, atol=0.02)
    assert multinomial.min() >= 0 and multinomial.max() <= 2
    expected = np.exp(scores) / np.exp(scores).sum(1, keepdims=True)
    frequencies = np.stack([np.bincount(row, minlength=3) / row.size for row in multinomial])
    np.testing.assert_allclose(frequencies, expected, atol=0.02)
    assert kept.dtype == np.bool_ and abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(dropped, np.where(kept, like / 0.7, 0.0), rtol=1e-6)
    # Seeded nodes repeat themselves; the default generator moves on.
    second = model.run(None, feed)
    for name, a, b in zip(model.output_names, first, second):
        assert np.array_equal(a, b) == (name != "uniform_like"), name
