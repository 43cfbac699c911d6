"""The forms of gingham.onnx's math and reduction converters that ONNX's node cases (all at
recent opsets, on graph inputs) do not reach: Hardmax's 2-D coercion and the reductions' ``axes``
attribute before opsets 13 and 18, CumSum's axis given by the caller (a host input), and the
folding of nodes whose inputs are constants (on the host, with NumPy), against ONNX's
reference implementation (``onnx.reference.ReferenceEvaluator``; Hardmax's older form by
NumPy), on every device.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import gingham.onnx  # noqa: E402


def _opset_11_model() -> onnx.ModelProto:
    """One graph of the older forms (one compiled program per device)."""
    nodes = [
        # coerced to [2, 12]: one 1 in each row of 12, where opset 13 puts one per column
        helper.make_node("Hardmax", ["x"], ["hardmax"], axis=1),
        helper.make_node("ReduceL2", ["x"], ["l2"], axes=[0, 2], keepdims=0),
        helper.make_node("ReduceLogSumExp", ["x"], ["log_sum_exp"], axes=[-1]),
        helper.make_node("ReduceL1", ["x"], ["l1"]),
        helper.make_node("ReduceSumSquare", ["x"], ["sum_square"], axes=[1], keepdims=0),
        helper.make_node("Abs", ["x"], ["magnitude"]),
        helper.make_node("ReduceLogSum", ["magnitude"], ["log_sum"], axes=[1, 2]),
        helper.make_node("CumSum", ["x", "axis"], ["cumsum"], exclusive=1, reverse=1),
    ]
    outputs = {"hardmax": [2, 3, 4], "l2": [3], "log_sum_exp": [2, 3, 1], "l1": [1, 1, 1],
               "sum_square": [2, 4], "log_sum": [2, 1, 1], "cumsum": [2, 3, 4]}
    graph = helper.make_graph(
        nodes, "opset_11_math",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("axis", TensorProto.INT64, [])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
         for name, shape in outputs.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_opset_11_forms(device):
    model = _opset_11_model()
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    model_gingham = gingham.onnx.load(model, device=device)
    for axis in (1, -1):  # each value of the host input traces its own step
        feed = {"x": x, "axis": np.asarray(axis, np.int64)}
        expected = ReferenceEvaluator(model).run(None, feed)
        # (The reference evaluator's Hardmax takes opset 13's meaning at every opset: the
        # coerced form, from the opset 11 spec, by NumPy.)
        rows = x.reshape(2, 12)
        expected[0] = (np.arange(12) == rows.argmax(1)[:, None]).astype(x.dtype).reshape(x.shape)
        got = model_gingham.run(None, feed)
        for name, g, e in zip(model_gingham.output_names, got, expected):
            assert g.shape == e.shape and g.dtype == e.dtype, name
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"{name} {axis}")
    assert model_gingham.traces == 2


def _constant(name: str, value: np.ndarray):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(value))


@pytest.mark.filterwarnings("ignore:invalid value encountered in fmod:RuntimeWarning")
def test_constant_inputs_fold_on_the_host(device):
    """(The reference evaluator's fmod of inf warns.)"""
    floats = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, np.inf, -np.inf, np.nan], np.float32)
    ints = np.array([-7, -8, 5, 127], np.int8)
    nodes = [
        _constant("f", floats), _constant("i", ints), _constant("d", np.array([2], np.int8)),
        _constant("axes", np.array([0], np.int64)),
        helper.make_node("IsNaN", ["f"], ["isnan"]),
        helper.make_node("IsInf", ["f"], ["isneginf"], detect_positive=0),
        helper.make_node("Round", ["f"], ["round"]),
        helper.make_node("Asinh", ["f"], ["asinh"]),
        helper.make_node("Mod", ["i", "d"], ["mod"]),
        helper.make_node("Mod", ["f", "f"], ["fmod"], fmod=1),
        helper.make_node("BitShift", ["i", "d"], ["shifted"], direction="RIGHT"),
        helper.make_node("BitwiseXor", ["i", "d"], ["xor"]),
        helper.make_node("Cast", ["i"], ["i_float"], to=TensorProto.FLOAT),
        helper.make_node("ReduceLogSumExp", ["i_float", "axes"], ["log_sum_exp"], keepdims=0),
    ]
    outputs = {"isnan": (TensorProto.BOOL, [8]), "isneginf": (TensorProto.BOOL, [8]),
               "round": (TensorProto.FLOAT, [8]), "asinh": (TensorProto.FLOAT, [8]),
               "mod": (TensorProto.INT8, [4]), "fmod": (TensorProto.FLOAT, [8]),
               "shifted": (TensorProto.INT8, [4]), "xor": (TensorProto.INT8, [4]),
               "log_sum_exp": (TensorProto.FLOAT, [])}
    graph = helper.make_graph(nodes, "constants", [], [
        helper.make_tensor_value_info(name, elem, shape)
        for name, (elem, shape) in outputs.items()])
    # (opset 28: BitShift of signed integers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)])
    expected = ReferenceEvaluator(model).run(None, {})
    got = gingham.onnx.load(model, device=device).run(None, {})
    for name, g, e in zip(outputs, got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, name
        np.testing.assert_allclose(g, e, rtol=1e-6, err_msg=name)
