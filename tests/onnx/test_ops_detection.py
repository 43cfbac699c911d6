"""gingham.onnx's MaxRoiPool and DeformConv in the forms ONNX's node cases do not reach
(MaxRoiPool has none; DeformConv's have one image, no ``group``, no stride or dilation),
against onnxruntime, on every device: one graph of both.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import ort_oracle  # noqa: E402

_OPSET = 21  # (onnxruntime has MaxRoiPool of opset 1, not 22)


def _model() -> onnx.ModelProto:
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("MaxRoiPool", ["x", "rois"], ["pooled"], pooled_shape=[3, 2],
                         spatial_scale=0.5),
        # 2 groups of 4 input channels, 2 offset groups; stride 2, dilation 2, pads 1 and 2
        helper.make_node("DeformConv", ["images", "w", "offset", "b", "mask"], ["deformed"],
                         group=2, offset_group=2, strides=[2, 1], dilations=[2, 1],
                         pads=[1, 2, 1, 2], kernel_shape=[2, 3]),
    ]
    inputs = [("x", [2, 3, 10, 12]), ("rois", [6, 5]), ("images", [2, 8, 7, 6]),
              ("w", [6, 4, 2, 3]), ("offset", [2, 2 * 2 * 6, 4, 8]), ("b", [6]),
              ("mask", [2, 2 * 6, 4, 8])]
    graph = helper.make_graph(
        nodes, "detection", [helper.make_tensor_value_info(n, f, s) for n, s in inputs],
        [helper.make_tensor_value_info("pooled", f, [6, 3, 3, 2]),
         helper.make_tensor_value_info("deformed", f, [2, 6, 4, 8])])
    return ort_oracle.make_model(graph, _OPSET)


def test_max_roi_pool_and_deform_conv_against_onnxruntime(device):
    rng = np.random.default_rng(3)
    rois = np.array([[0, 0, 0, 23, 19],      # the whole image (scaled by 0.5)
                     [1, 3, 5, 9, 7],         # 1.5 and 3.5 round away from zero
                     [0, 10, 2, 11, 3],       # one pixel: most bins empty... or repeated
                     [1, -6, -4, 5, 30],      # partly outside
                     [1, 20, 14, 8, 6],       # corners swapped: a one-pixel box
                     [0, 7.2, 1.9, 17.8, 12.6]], np.float32)
    feed = {"x": rng.standard_normal((2, 3, 10, 12)).astype(np.float32), "rois": rois,
            "images": rng.standard_normal((2, 8, 7, 6)).astype(np.float32),
            "w": rng.standard_normal((6, 4, 2, 3)).astype(np.float32),
            # offsets of a few pixels: some taps fall outside the image
            "offset": (2 * rng.standard_normal((2, 24, 4, 8))).astype(np.float32),
            "b": rng.standard_normal(6).astype(np.float32),
            "mask": rng.uniform(0, 1, (2, 12, 4, 8)).astype(np.float32)}
    model = _model()
    got, want = ort_oracle.both(model, feed, device)
    ort_oracle.assert_close(got, want, ("pooled", "deformed"), rtol=1e-4, atol=1e-4)
