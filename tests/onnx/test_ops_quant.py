"""The forms of gingham.onnx's quantization converters that ONNX's node cases (scales and zero
points fed as graph inputs, one group, square kernels) do not reach: scales and zero points as
initializers (host constants), per-channel weight zero points and scales, grouped and strided
integer convolutions with asymmetric pads, against onnxruntime, on every device.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ort_oracle  # noqa: E402



def _quantized_model() -> onnx.ModelProto:
    """One graph of the quantized ops (one compiled program per device)."""
    rng = np.random.default_rng(5)
    constants = {
        "x_scale": np.array(0.05, np.float32), "x_zp": np.array(3, np.uint8),
        "w": rng.integers(-20, 20, (4, 3, 3, 2)).astype(np.int8),
        "w_zp": np.array([1, -2, 0, 3], np.int8),
        "w_scale": np.array([0.02, 0.03, 0.01, 0.04], np.float32),
        "y_scale": np.array(0.3, np.float32), "y_zp": np.array(120, np.uint8),
        "bias": np.array([100, -200, 0, 50], np.int32),
        "b": rng.integers(0, 255, (5, 6)).astype(np.uint8),
        "b_zp": np.array(128, np.uint8), "b_scale": np.array(0.01, np.float32),
        "m_scale": np.array(0.7, np.float32), "m_zp": np.array(100, np.uint8),
        "axis_scale": np.array([0.1, 0.2, 0.05], np.float32),
        "axis_zp": np.array([-3, 0, 7], np.int8),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
        # a grouped, strided convolution (group 2: input channels 6 = 2 x 3) with asymmetric
        # pads and one weight zero point and scale per output channel
        helper.make_node("QLinearConv", ["xq", "x_scale", "x_zp", "w", "w_scale", "w_zp",
                                         "y_scale", "y_zp", "bias"], ["conv"],
                         group=2, strides=[2, 1], pads=[1, 0, 0, 1]),
        helper.make_node("ConvInteger", ["xq", "w", "x_zp"], ["conv_int"], group=2,
                         dilations=[1, 2]),
        helper.make_node("QuantizeLinear", ["m", "b_scale", "b_zp"], ["mq"]),
        helper.make_node("QLinearMatMul", ["mq", "b_scale", "b_zp", "b", "b_scale", "b_zp",
                                           "m_scale", "m_zp"], ["matmul"]),
        helper.make_node("MatMulInteger", ["mq", "b", "b_zp", "b_zp"], ["matmul_int"]),
        helper.make_node("QuantizeLinear", ["t", "axis_scale", "axis_zp"], ["tq"], axis=1),
        helper.make_node("DequantizeLinear", ["tq", "axis_scale", "axis_zp"], ["t_back"],
                         axis=1),
        helper.make_node("DynamicQuantizeLinear", ["t"], ["t_dyn", "t_scale", "t_zp"]),
    ]
    outputs = [("conv", TensorProto.UINT8, [2, 4, 2, 7]),
               ("conv_int", TensorProto.INT32, [2, 4, 3, 5]),
               ("matmul", TensorProto.UINT8, [4, 6]), ("matmul_int", TensorProto.INT32, [4, 6]),
               ("tq", TensorProto.INT8, [2, 3, 4]), ("t_back", TensorProto.FLOAT, [2, 3, 4]),
               ("t_dyn", TensorProto.UINT8, [2, 3, 4]), ("t_scale", TensorProto.FLOAT, []),
               ("t_zp", TensorProto.UINT8, [])]
    graph = helper.make_graph(
        nodes, "quantized",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 5, 7]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, [4, 5]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info(*output) for output in outputs],
        [numpy_helper.from_array(value, name) for name, value in constants.items()])
    return ort_oracle.make_model(graph, 21)


def test_quantized_ops_against_onnxruntime(device):
    model = _quantized_model()
    rng = np.random.default_rng(7)
    feed = {"x": rng.uniform(-1, 10, (2, 6, 5, 7)).astype(np.float32),
            "m": rng.uniform(-1, 1.5, (4, 5)).astype(np.float32),
            # values exactly between two steps of the scale: rounding half to even shows
            "t": (rng.integers(-40, 40, (2, 3, 4)) * 0.025).astype(np.float32)}
    got, expected = ort_oracle.both(model, feed, device)
    for name, g, e in zip([o.name for o in model.graph.output], got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, name
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7, err_msg=name)
        else:  # integer results exact (a requantized value may round across one step)
            assert np.abs(g.astype(np.int64) - e.astype(np.int64)).max() <= (
                0 if name in ("conv_int", "matmul_int", "tq", "t_dyn", "t_zp") else 1), name
