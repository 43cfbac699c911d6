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

import ort_oracle  # noqa: E402



def _pool_indices(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's MaxPool (2 x 2, stride 2) of ``x``: its values and flat indices."""
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    return tuple(ort_oracle.run_onnxruntime(ort_oracle.make_model(graph, 12), {"x": x}))


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
    return ort_oracle.make_model(graph, 18)


def test_unpool_and_col2im_against_onnxruntime(device):
    rng = np.random.default_rng(17)
    pooled, indices = _pool_indices(rng.standard_normal((2, 3, 4, 6)).astype(np.float32))
    feed = {"pooled": pooled, "indices": indices,
            "columns": rng.standard_normal((2, 18, 12)).astype(np.float32)}
    model = _model()
    got, expected = ort_oracle.both(model, feed, device)
    ort_oracle.assert_close(got, expected, ("unpooled", "image"), rtol=1e-5, atol=1e-6)
    assert np.count_nonzero(got[0]) == pooled.size  # every value placed once
