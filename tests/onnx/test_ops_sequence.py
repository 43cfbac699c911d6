"""gingham.onnx's sequence and optional ops inside one graph (ONNX's node cases have the
sequence ops at the graph's edges only), against ONNX's reference implementation
(``onnx.reference.ReferenceEvaluator``), on every device: sequences built, edited, indexed and
joined while the graph is traced, with sequence and optional graph outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import gingham.onnx  # noqa: E402


def _sequence_model() -> onnx.ModelProto:
    def ints(name, values):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name, TensorProto.INT64, [len(values)] if len(values) > 1 else [], values))

    nodes = [
        ints("sizes", [2, 3]), ints("minus_one", [-1]), ints("zero", [0]),
        helper.make_node("SplitToSequence", ["x", "sizes"], ["pieces"], axis=1),  # [2,2,3] [2,3,3]
        helper.make_node("Neg", ["x"], ["negated"]),
        helper.make_node("SequenceConstruct", ["x", "negated"], ["pair"]),
        helper.make_node("SequenceInsert", ["pair", "x", "minus_one"], ["triple"]),
        helper.make_node("SequenceErase", ["triple", "zero"], ["erased"]),
        helper.make_node("ConcatFromSequence", ["erased"], ["stacked"], axis=1, new_axis=1),
        helper.make_node("SequenceAt", ["pieces", "minus_one"], ["last_piece"]),
        helper.make_node("SequenceLength", ["triple"], ["length"]),
        helper.make_node("SequenceEmpty", [], ["empty"]),
        helper.make_node("SequenceInsert", ["empty", "last_piece"], ["one"]),
        helper.make_node("SequenceInsert", ["one", "last_piece", "zero"], ["two"]),
        helper.make_node("ConcatFromSequence", ["two"], ["joined"], axis=-1),
        helper.make_node("Optional", ["x"], ["maybe_x"]),
        helper.make_node("OptionalHasElement", ["maybe_x"], ["has_x"]),
        helper.make_node("OptionalGetElement", ["maybe_x"], ["got_x"]),
    ]
    sequence = helper.make_tensor_sequence_value_info
    graph = helper.make_graph(
        nodes, "sequences", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 3])],
        [sequence("pieces", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("stacked", TensorProto.FLOAT, [2, 2, 5, 3]),
         helper.make_tensor_value_info("length", TensorProto.INT64, []),
         helper.make_tensor_value_info("joined", TensorProto.FLOAT, [2, 3, 6]),
         helper.make_tensor_value_info("has_x", TensorProto.BOOL, []),
         helper.make_tensor_value_info("got_x", TensorProto.FLOAT, [2, 5, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_sequences_inside_a_graph(device):
    model = _sequence_model()
    x = np.random.default_rng(19).standard_normal((2, 5, 3)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    got = gingham.onnx.load(model, device=device).run(None, {"x": x})
    # (The reference evaluator's OptionalGetElement returns [x], not x: x is the oracle.)
    expected[-1] = x
    pieces, expected_pieces = got[0], expected[0]
    assert isinstance(pieces, list) and len(pieces) == len(expected_pieces) == 2
    for name, g, e in zip(["pieces 0", "pieces 1"] + [o.name for o in model.graph.output[1:]],
                          pieces + got[1:], expected_pieces + expected[1:]):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, name
        np.testing.assert_array_equal(g, e, err_msg=name)
