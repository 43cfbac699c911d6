"""The forms of gingham.onnx's Col2Im and MaxUnpool that ONNX's node cases (one image of one
channel, equal pads) do not reach: batches of several channels, whose MaxPool indices count
over the whole tensor, and a Col2Im with unequal pads, against onnxruntime, on every device.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import gingham.onnx  # noqa: E402


# The IR version the models declare: the oldest that has opset 21 (the newest these tests use),
# not the installed onnx package's newest (onnxruntime 1.30 refuses IR 14, which onnx 1.23's
# make_model writes).
_ORT_IR_VERSION = helper.find_min_ir_version_for([helper.make_opsetid("", 21)])


def _pool_indices(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's MaxPool (2 x 2, stride 2) of ``x``: its values and flat indices."""
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)],
                              ir_version=_ORT_IR_VERSION)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return tuple(session.run(None, {"x": x}))


def _model() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MaxUnpool", ["pooled", "indices"], ["unpooled"], kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Col2Im", ["columns", "image_shape", "block_shape"], ["image"],
                         pads=[1, 0, 0, 2], strides=[1, 2]),
    ]
    constants = [helper.make_tensor("image_shape", TensorProto.INT64, [2], [4, 5]),
                 helper.make_tensor("block_shape", TensorProto.INT64, [2], [2, 3])]
    # padded image 5 x 7, blocks 2 x 3 at strides 1, 2: 4 x 3 positions
    graph = helper.make_graph(
        nodes, "sampling",
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [2, 3, 2, 3]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3, 2, 3]),
         helper.make_tensor_value_info("columns", TensorProto.FLOAT, [2, 3 * 6, 12])],
        [helper.make_tensor_value_info("unpooled", TensorProto.FLOAT, [2, 3, 4, 6]),
         helper.make_tensor_value_info("image", TensorProto.FLOAT, [2, 3, 4, 5])],
        constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              ir_version=_ORT_IR_VERSION)


def test_unpool_and_col2im_against_onnxruntime(device):
    rng = np.random.default_rng(17)
    pooled, indices = _pool_indices(rng.standard_normal((2, 3, 4, 6)).astype(np.float32))
    feed = {"pooled": pooled, "indices": indices,
            "columns": rng.standard_normal((2, 18, 12)).astype(np.float32)}
    model = _model()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feed)
    got = gingham.onnx.load(model, device=device).run(None, feed)
    for name, g, e in zip(("unpooled", "image"), got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, name
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=name)
    assert np.count_nonzero(got[0]) == pooled.size  # every value placed once
