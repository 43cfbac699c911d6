"""ONNX's value-shaped ops: NonZero, Unique and NonMaxSuppression, run on the host with NumPy.

Their results' shapes depend on their inputs' values, and a traced program's shapes are
static. So, as onnxruntime does, :class:`gingham.onnx.OnnxModel` splits the graph at such a
node (a segment boundary): the graph before it runs as one compiled segment, the node's
inputs are read back, the function registered here computes its outputs with NumPy, exactly
as ONNX defines them, and the rest of the graph runs as the next compiled segment, traced per
distinct shape of those outputs. Each boundary costs a read-back and a synchronisation.

    @host_op("NonZero")
    def _non_zero(node: Node) -> list[np.ndarray]:
        return [np.array(np.nonzero(node.inputs[0]), np.int64)]

A function gets a :class:`Node` whose inputs are NumPy arrays (None for an omitted optional
input) and returns the node's outputs as NumPy arrays.
"""

from __future__ import annotations

import numpy as np

from .ops import HOST_OPS, Node, host_op


@host_op("NonZero")
def _non_zero(node: Node) -> list[np.ndarray]:
    """``[rank, count]``: the coordinates of the nonzero elements, in row-major order."""
    x = node.inputs[0]
    if x.ndim == 0:  # (NumPy deprecates nonzero of a 0-d array; ONNX's is 1-d's of one)
        x = x.reshape(1)
    return [np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1)]


@host_op("Unique")
def _unique(node: Node) -> list[np.ndarray]:
    """The distinct elements (``axis`` unset: of the flattened input) or slices along ``axis``,
    sorted ascending or, with ``sorted=0``, in order of first occurrence; with the index of
    each one's first occurrence, each input element's (slice's) index in them, and counts."""
    x = node.inputs[0]
    axis = node.attr("axis")
    if axis is not None and not -x.ndim <= axis < x.ndim:
        raise ValueError(f"ONNX Unique node {node.name!r}: axis {axis} is outside the "
                         f"{x.ndim}-d input")
    flat = x.reshape(-1) if axis is None else x
    y, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not node.attr("sorted", 1):
        order = np.argsort(first, kind="stable")  # by first occurrence
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
        y = np.take(flat, first, axis=0 if axis is None else axis)
    return [y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64)]


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """``[..., 4]`` boxes as ``(y_min, x_min, y_max, x_max)``: ONNX's corner form gives two
    corners in either order, its center form ``(x_center, y_center, width, height)``."""
    if center_point_box:
        x, y, half_w, half_h = (boxes[..., 0], boxes[..., 1], boxes[..., 2] / np.float32(2),
                                boxes[..., 3] / np.float32(2))
        return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], -1)
    y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], -1)


def _overlaps(box: np.ndarray, others: np.ndarray, threshold: np.float32) -> np.ndarray:
    """Whether each of ``others`` overlaps ``box`` (corners) by an IoU above ``threshold``;
    an empty box or intersection overlaps nothing (onnxruntime's rule, in float32)."""
    height = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    width = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    intersection = np.where((height > 0) & (width > 0), height * width, np.float32(0))
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - intersection
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = intersection / union
    return (intersection > 0) & (area > 0) & (areas > 0) & (union > 0) & (iou > threshold)


@host_op("NonMaxSuppression")
def _non_max_suppression(node: Node) -> list[np.ndarray]:
    """``[selected, 3]`` rows ``(batch, class, box)``: per batch and class, greedily the box of
    the highest score above ``score_threshold`` that overlaps no box already kept by an IoU
    above ``iou_threshold``, at most ``max_output_boxes_per_class`` of them (0 or omitted:
    none), in order of batch, class, then decreasing score."""
    boxes, scores = node.inputs[0], node.inputs[1]
    limit, iou, floor = (node.input(i) for i in (2, 3, 4))
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or (
            scores.shape[0], scores.shape[2]) != boxes.shape[:2]:
        raise ValueError(f"ONNX NonMaxSuppression node {node.name!r}: boxes must be "
                         f"[batch, boxes, 4] and scores [batch, classes, boxes], got "
                         f"{boxes.shape} and {scores.shape}")
    limit = 0 if limit is None or limit.size == 0 else int(limit.reshape(-1)[0])
    iou = np.float32(0 if iou is None or iou.size == 0 else iou.reshape(-1)[0])
    floor = None if floor is None or floor.size == 0 else np.float32(floor.reshape(-1)[0])
    corners = _corners(boxes.astype(np.float32), node.attr("center_point_box", 0))
    selected = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            row = scores[b, c].astype(np.float32)
            candidates = np.flatnonzero(row > floor) if floor is not None else \
                np.arange(row.size)
            # Highest score first; equal scores by box index.
            candidates = candidates[np.argsort(-row[candidates], kind="stable")]
            kept: list[int] = []
            for index in candidates:
                if len(kept) >= limit:
                    break
                if not kept or not _overlaps(corners[b, index], corners[b, kept], iou).any():
                    kept.append(int(index))
            selected.extend((b, c, index) for index in kept)
    return [np.array(selected, np.int64).reshape(-1, 3)]


__all__ = ["HOST_OPS"]
