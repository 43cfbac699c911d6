"""The forms of gingham.onnx's Attention and RotaryEmbedding that ONNX's node cases (every
input fed by the caller, so computed on the device) do not reach: masks, ``nonpad_kv_seqlen``
and ``position_ids`` known on the host (initializers), a mask shorter than the keys, against
ONNX's reference implementation (onnxruntime 1.32 refuses a mask shorter than the keys), on
every device.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import gingham.onnx  # noqa: E402

B, L, P, HQ, HKV, E = 2, 3, 2, 4, 2, 8  # batch, new and past positions, heads, head size


def _attention_model() -> onnx.ModelProto:
    """One graph (one compiled program per device): rotary embedding of 3-d queries, then
    grouped-query attention with a past cache, the causal frontier after it, softcap and a
    bool mask one key short; and 4-d attention with padded keys."""
    rng = np.random.default_rng(11)
    constants = {
        "cos": np.cos(rng.uniform(0, 3, (8, E // 2))).astype(np.float32),
        "sin": np.sin(rng.uniform(0, 3, (8, E // 2))).astype(np.float32),
        "positions": np.array([[2, 3, 4], [5, 6, 7]], np.int64),
        "mask": rng.uniform(size=(L, P + L - 1)) < 0.7,  # the last key padded as masked
        "lengths": np.array([2, 3], np.int64),
    }
    nodes = [
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "positions"], ["q_rotated"],
                         num_heads=HQ, interleaved=1),
        helper.make_node("Attention", ["q_rotated", "k", "v", "mask", "past_k", "past_v"],
                         ["y", "present_k", "present_v"], q_num_heads=HQ, kv_num_heads=HKV,
                         is_causal=1, softcap=2.0),
        helper.make_node("Attention", ["q4", "k4", "k4", "", "", "", "lengths"], ["y_padded"],
                         scale=0.3),
    ]
    inputs = {"q": [B, L, HQ * E], "k": [B, L, HKV * E], "v": [B, L, HKV * E],
              "past_k": [B, HKV, P, E], "past_v": [B, HKV, P, E], "q4": [B, HQ, L, E],
              "k4": [B, HQ, L, E]}
    outputs = {"y": [B, L, HQ * E], "present_k": [B, HKV, P + L, E],
               "present_v": [B, HKV, P + L, E], "y_padded": [B, HQ, L, E]}
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(value, name) for name, value in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


def test_attention_with_host_masks(device):
    model = _attention_model()
    rng = np.random.default_rng(13)
    feed = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in model.graph.input
            if i.name not in {c.name for c in model.graph.initializer}}
    expected = ReferenceEvaluator(model).run(None, feed)
    got = gingham.onnx.load(model, device=device).run(None, feed)
    for output, g, e in zip(model.graph.output, got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, output.name
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=output.name)
