"""ONNX's training-mode nodes against onnxruntime, on every device: BatchNormalization with
``training_mode=1`` (``Y`` from the batch's statistics, the running statistics updated with
ONNX's ``momentum``) on 3-d and 4-d data in one model. Training-mode Dropout draws Philox
numbers, not onnxruntime's: it is checked by its distribution in tests/onnx/test_ops_random.py.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ort_oracle  # noqa: E402


def _batch_norm_model(opset: int = 15, outputs: int = 3) -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    constants = {f"{p}_{c}": v for c in (4, 3) for p, v in (
        ("scale", rng.uniform(0.5, 1.5, c)), ("bias", rng.standard_normal(c)),
        ("mean", rng.standard_normal(c)), ("var", rng.uniform(0.5, 2.0, c)))}
    nodes, results = [], []
    for name, shape, attributes in (("a", [5, 4, 6], {"momentum": 0.8, "epsilon": 1e-3}),
                                    ("b", [2, 3, 4, 5], {})):
        channels = shape[1]
        names = [f"y_{name}", f"running_mean_{name}", f"running_var_{name}"][:outputs]
        nodes.append(helper.make_node(
            "BatchNormalization", [f"x_{name}"] + [f"{p}_{channels}" for p in
                                                   ("scale", "bias", "mean", "var")],
            names, training_mode=1, **attributes))
        results += [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in
                    zip(names, [shape, [channels], [channels]])]
    graph = helper.make_graph(
        nodes, "batch_norm_training",
        [helper.make_tensor_value_info("x_a", TensorProto.FLOAT, [5, 4, 6]),
         helper.make_tensor_value_info("x_b", TensorProto.FLOAT, [2, 3, 4, 5])],
        results,
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in constants.items()])
    return ort_oracle.make_model(graph, opset)


def test_batch_norm_training_against_onnxruntime(device):
    model = _batch_norm_model()
    rng = np.random.default_rng(4)
    feed = {"x_a": rng.normal(1.0, 2.0, (5, 4, 6)).astype(np.float32),
            "x_b": rng.normal(-1.0, 0.5, (2, 3, 4, 5)).astype(np.float32)}
    names = [o.name for o in model.graph.output]
    got, want = ort_oracle.both(model, feed, device, names)
    ort_oracle.assert_close(got, want, names, rtol=1e-4, atol=1e-5, check_dtype=False)

