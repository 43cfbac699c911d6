"""gingham.onnx's value-shaped ops (NonZero, Unique, NonMaxSuppression), run on the host
between compiled segments of the graph, against onnxruntime, on every device: a
detection-style graph whose number of detections changes from call to call, and one graph of
NonZero and Unique's forms.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import gingham.onnx  # noqa: E402
import ort_oracle  # noqa: E402

_OPSET = 21


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "value_shaped", inputs, outputs, list(initializers))
    return ort_oracle.make_model(graph, _OPSET)


def _output(name: str, elem_type: int, rank: int):
    """A graph output of ``rank`` dims, each of a size the values decide."""
    return helper.make_tensor_value_info(name, elem_type, [f"{name}{i}" for i in range(rank)])


_BOXES = 12


def _detector(center_point_box: int) -> onnx.ModelProto:
    """Conv -> boxes [1, N, 4] and scores [1, 2, N] -> NonMaxSuppression -> Gather of the
    selected boxes and their scores (and the boxes' areas, computed after the cut)."""
    rng = np.random.default_rng(5)
    # Boxes scaled by 1.5, scores mixed a little with the other rows.
    weight = np.diag([1.5] * 4 + [1.0] * 2)
    weight[4:] += 0.02 * rng.standard_normal((2, 6))
    weight = weight.astype(np.float32)
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Conv", ["features", "w"], ["conv"], kernel_shape=[1]),
        helper.make_node("Slice", ["conv", "zero", "four", "one"], ["box_rows"]),
        helper.make_node("Transpose", ["box_rows"], ["boxes"], perm=[0, 2, 1]),
        helper.make_node("Slice", ["conv", "four", "six", "one"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["scores"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "floor"],
                         ["selected"], center_point_box=center_point_box, name="nms"),
        helper.make_node("Gather", ["selected", "two"], ["box_index"], axis=1),
        helper.make_node("Squeeze", ["boxes", "zero"], ["all_boxes"]),
        helper.make_node("Gather", ["all_boxes", "box_index"], ["picked"]),
        helper.make_node("Mul", ["picked", "picked"], ["squared"]),
        helper.make_node("ReduceSum", ["squared", "one"], ["norms"], keepdims=0),
        helper.make_node("GatherND", ["scores", "selected"], ["picked_scores"]),
    ]
    constants = [
        helper.make_tensor("w", f, [6, 6, 1], weight.reshape(-1)),
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("two", TensorProto.INT64, [], [2]),
        helper.make_tensor("four", TensorProto.INT64, [1], [4]),
        helper.make_tensor("six", TensorProto.INT64, [1], [6]),
        helper.make_tensor("limit", TensorProto.INT64, [1], [4]),
        helper.make_tensor("iou", f, [1], [0.3]),
        helper.make_tensor("floor", f, [1], [0.5]),
    ]
    return _model(nodes, [helper.make_tensor_value_info("features", f, [1, 6, _BOXES])],
                  [_output("picked", f, 2), _output("norms", f, 1),
                   _output("picked_scores", f, 1), _output("selected", TensorProto.INT64, 2)],
                  constants)


def _features(rng, hits: int, center_point_box: int) -> np.ndarray:
    """Disjoint boxes on a grid but for boxes 0 and 1, which overlap (IoU about 0.8); boxes
    0 to ``hits - 1`` of each class score above the threshold. So NonMaxSuppression keeps
    ``min(hits - 1, 4)`` boxes per class (``hits`` > 0)."""
    grid = np.stack([np.arange(_BOXES) // 4, np.arange(_BOXES) % 4], 1) * 3.0
    grid[1] = grid[0] + 0.2
    size = 2 + rng.uniform(-0.2, 0.2, (_BOXES, 2))
    if center_point_box:  # (x_center, y_center, width, height)
        boxes = np.concatenate([grid[:, ::-1] + size / 2, size], 1)
    else:  # (y1, x1, y2, x2), one box's corners swapped
        boxes = np.concatenate([grid, grid + size], 1)
        boxes[5] = boxes[5, [2, 3, 0, 1]]
    logits = np.full((2, _BOXES), -4.0)
    logits[:, :hits] = rng.uniform(0.5, 4, (2, hits))
    return np.concatenate([boxes.T, logits], 0)[None].astype(np.float32)


@pytest.mark.parametrize("center_point_box", [0, 1])
def test_detection_graph_against_onnxruntime(center_point_box, device):
    """Different numbers of detections trace the segment after NonMaxSuppression once per
    count; a repeat of a count replays it."""
    model = _detector(center_point_box)
    ours = gingham.onnx.load(model, device=device)
    rng = np.random.default_rng(11)
    counts, traces = [], []
    for hits in (6, 2, 6, 0, 2):  # (0: no detection, empty results)
        features = _features(rng, hits, center_point_box)
        want = ort_oracle.run_onnxruntime(model, {"features": features})
        got = ours.run(None, {"features": features})
        for name, g, w in zip(("picked", "norms", "picked_scores", "selected"), got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, name
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
        counts.append(len(want[3]))
        traces.append(ours.traces)
    assert counts == [8, 2, 8, 0, 2]
    # the segment before the cut once, the one after it once per distinct count
    assert traces == [1 + len(set(counts[:i + 1])) for i in range(len(counts))], counts


def _non_zero_unique() -> onnx.ModelProto:
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["where"]),
        helper.make_node("Unique", ["r"], ["flat", "first", "inverse", "counts"]),
        helper.make_node("Unique", ["x"], ["rows", "rows_first", "rows_inverse", "rows_counts"],
                         axis=0, sorted=0),
        helper.make_node("Unique", ["x"], ["in_order"], sorted=0),
        helper.make_node("Cast", ["where"], ["where_f"], to=f),
        helper.make_node("ReduceSum", ["where_f"], ["where_sum"], keepdims=1),
        helper.make_node("Mul", ["rows", "rows"], ["rows_squared"]),
    ]
    outputs = [("where", i64, 2), ("flat", f, 1), ("first", i64, 1), ("inverse", i64, 1),
               ("counts", i64, 1), ("rows_squared", f, 2), ("rows_first", i64, 1),
               ("rows_inverse", i64, 1), ("rows_counts", i64, 1), ("in_order", f, 1),
               ("where_sum", f, 2)]
    return _model(nodes, [helper.make_tensor_value_info("x", f, [5, 3])],
                  [_output(name, t, rank) for name, t, rank in outputs])


def test_non_zero_and_unique_against_onnxruntime(device):
    model = _non_zero_unique()
    ours = gingham.onnx.load(model, device=device)
    rng = np.random.default_rng(2)
    # Repeated values and a repeated row, so Unique has something to merge.
    x = rng.integers(-2, 3, (5, 3)).astype(np.float32)
    x[3] = x[1]
    want = ort_oracle.run_onnxruntime(model, {"x": x})
    got = ours.run(None, {"x": x})
    for name, g, w in zip([o.name for o in model.graph.output], got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=name)


def test_value_shaped_op_in_a_subgraph_is_refused(device):
    """A value-shaped op on device values inside an If branch has no segment to cut."""
    f = TensorProto.FLOAT
    branch = helper.make_graph([helper.make_node("NonZero", ["r"], ["n"])], "branch", [],
                               [_output("n", TensorProto.INT64, 2)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch,
                              name="choose")]
    model = _model(nodes, [helper.make_tensor_value_info("x", f, [3]),
                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                   [_output("y", TensorProto.INT64, 2)])
    ours = gingham.onnx.load(model, device=device)
    with pytest.raises(gingham.UnsupportedOpError, match="NonZero node .*inside a subgraph"):
        ours(np.ones(3, np.float32), np.array(True))
