"""ONNX's Resize (opsets 10-19) and Upsample: every mode, coordinate transformation, rounding
and option, one axis at a time.

Resizing is separable: along one axis each output value is a weighted sum of a few input values
along that axis, with weights that depend only on the shapes and attributes. So each resized
axis becomes a small ``[out, in]`` weight matrix built on the host with NumPy (a port of
ONNX's reference, ``onnx.reference.ops.op_resize``), and the device work is one contraction
per axis (``F._contract_axis``, the helper :func:`gingham.nn.functional.interpolate` uses):
exact, differentiable, and the same program on every device. Nearest mode picks one source per
output position, so it gathers (or, for whole-number upsampling, repeats) instead, which also
keeps integer data exact.

    (y,) = gingham.onnx.load(model)(x)   # Resize(x, scales=[1, 1, 2, 2], mode="cubic")

``tf_crop_and_resize`` samples inside the region ``roi`` and puts ``extrapolation_value``
where a sample falls outside the input; ``antialias`` (opset 18) widens the linear and cubic
filters by ``1 / scale`` when downsampling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import Node, _gather, converter


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class _Options:
    """A Resize node's attributes, with the defaults of its opset."""

    mode: str
    coordinates: str
    rounding: str  # nearest_mode, or "simple" (Upsample and opset 10: floor up, ceil down)
    cubic_a: float
    exclude_outside: bool
    extrapolation_value: float
    antialias: bool

    @staticmethod
    def of(node: Node) -> "_Options":
        mode = _text(node.attr("mode", "nearest"))
        if mode == "bilinear":  # Upsample-1's spelling
            mode = "linear"
        if mode not in ("nearest", "linear", "cubic"):
            raise node.fail(f"mode {mode!r} is not an ONNX value (nearest, linear, cubic)")
        if node.op_type == "Upsample" or node.opset < 11:
            # Before opset 11 the output was ``input * scale`` sampled at ``y / scale``
            # (onnxruntime: asymmetric coordinates, nearest index truncated, or ceiled when
            # downsampling).
            return _Options(mode, "asymmetric", "simple", -0.75, False, 0.0, False)
        antialias = bool(node.attr("antialias", 0))
        if antialias and mode == "nearest":
            raise node.fail("antialias applies to the linear and cubic modes, not nearest")
        return _Options(mode,
                        _text(node.attr("coordinate_transformation_mode", "half_pixel")),
                        _text(node.attr("nearest_mode", "round_prefer_floor")),
                        float(node.attr("cubic_coeff_a", -0.75)),
                        bool(node.attr("exclude_outside", 0)),
                        float(node.attr("extrapolation_value", 0.0)), antialias)


# -- one axis: source coordinates and weights ------------------------------------------------------


def _source_coordinates(node: Node, options: _Options, size: int, out: int, scale: float,
                        roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray | None]:
    """The input coordinate each output position of one axis samples, and (for
    ``tf_crop_and_resize``) which of them fall outside the input."""
    y = np.arange(out, dtype=np.float64)
    width = scale * size  # the unrounded output size the coordinate modes refer to
    mode = options.coordinates
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        # The centre of the input maps to the centre of the output when ``out`` is rounded.
        offset = size / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5, None
    if mode == "pytorch_half_pixel":
        return ((y + 0.5) / scale - 0.5 if width != 1 else np.full(out, -0.5)), None
    if mode == "tf_half_pixel_for_nn":  # opset 11 only
        return (y + 0.5) / scale, None
    if mode == "align_corners":
        return (y * (size - 1) / (width - 1) if width != 1 else np.zeros(out)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "tf_crop_and_resize":
        start, end = roi
        if width != 1:
            x = y * (end - start) * (size - 1) / (width - 1)
        else:
            x = np.full(out, (end - start) * (size - 1) / 2)
        x = x + start * (size - 1)
        return x, (x < 0) | (x > size - 1)
    raise node.fail(f"coordinate_transformation_mode {mode!r} is not an ONNX value")


def _coefficients(node: Node, options: _Options, ratios: np.ndarray,
                  scale: float) -> np.ndarray:
    """``[out, n]``: the weights of the ``n`` input positions around each source coordinate,
    ``ratios`` (in ``(0, 1]``) being its distance from the position before it."""
    a = options.cubic_a
    if options.mode == "nearest":
        rounding = options.rounding
        if rounding == "simple":
            rounding = "floor" if scale >= 1 else "ceil"
        pick_second = {"round_prefer_floor": ratios > 0.5, "round_prefer_ceil": ratios >= 0.5,
                       "floor": np.zeros_like(ratios, bool),
                       "ceil": np.ones_like(ratios, bool)}.get(rounding)
        if pick_second is None:
            raise node.fail(f"nearest_mode {rounding!r} is not an ONNX value")
        pick_second = pick_second | (ratios == 1)  # on an input position: that position
        return np.stack([~pick_second, pick_second], 1).astype(np.float64)
    if options.antialias:
        # The filter stretched by 1 / scale when downsampling, over every tap it reaches,
        # normalised to sum 1.
        scale = min(scale, 1.0)
        reach = 1 if options.mode == "linear" else 2
        first = int(np.floor(-reach / scale) + 1)
        taps = np.arange(first, 2 - first)
        distance = np.abs((taps[None, :] - ratios[:, None]) * scale)
        if options.mode == "linear":
            weights = np.clip(1 - distance, 0, 1)
        else:
            weights = F._cubic(distance, a)
        return weights / weights.sum(1, keepdims=True)
    if options.mode == "linear":
        return np.stack([1 - ratios, ratios], 1)
    distance = np.stack([1 + ratios, ratios, 1 - ratios, 2 - ratios], 1)
    return F._cubic(distance, a)


def _axis_weights(node: Node, options: _Options, size: int, out: int, scale: float,
                 roi: tuple[float, float] = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray | None]:
    """Resize along one axis as an ``[out, size]`` float64 matrix (row ``o``: the weights of
    the input positions output ``o`` sums), and the outputs to replace by
    ``extrapolation_value`` (None unless ``tf_crop_and_resize``). Positions past either edge
    are read at the edge, as ONNX's reference pads (``edge``) before sampling."""
    x, outside = _source_coordinates(node, options, size, out, scale, roi)
    before = np.floor(x)
    ratios = np.where(x == before, 1.0, x - before)
    coefficients = _coefficients(node, options, ratios, scale)
    n = coefficients.shape[1]
    # The n positions nearest x, ties to the smaller (ONNX's _get_neighbor_idxes).
    pad = math.ceil(n / 2)
    padded = x + pad
    whole = np.floor(padded).astype(np.int64)
    fraction = padded - whole
    if n % 2 == 0:
        offset = np.where(fraction == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(fraction <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    taps = (whole + offset)[:, None] + np.arange(n)[None, :] - pad
    if options.exclude_outside:
        coefficients = np.where((taps < 0) | (taps >= size), 0.0, coefficients)
        total = coefficients.sum(1, keepdims=True)
        coefficients = coefficients / np.where(total == 0, 1.0, total)
    matrix = np.zeros((out, size))
    rows = np.broadcast_to(np.arange(out)[:, None], taps.shape)
    np.add.at(matrix, (rows, np.clip(taps, 0, size - 1)), coefficients)
    return matrix, outside


# -- the node --------------------------------------------------------------------------------------


def _targets(node: Node, shape: tuple[int, ...]):
    """Per axis of the input: the output size, the scale and the ``roi`` interval, after
    ``axes`` and ``keep_aspect_ratio_policy``."""
    rank = len(shape)
    if node.op_type == "Upsample":
        scales = node.attr("scales") if node.opset < 9 else node.constant(1, "scales")
        sizes, roi = None, None
    elif node.opset < 11:
        scales, sizes, roi = node.constant(1, "scales"), None, None
    else:
        roi = node.constant(1, "roi")
        scales = node.constant(2, "scales")
        sizes = node.ints(3, "sizes")
    scales = None if scales is None or np.size(scales) == 0 else [
        float(s) for s in np.asarray(scales, np.float32).reshape(-1)]
    sizes = sizes or None
    roi = None if roi is None or np.size(roi) == 0 else [float(v) for v in roi.reshape(-1)]
    if (scales is None) == (sizes is None):
        raise node.fail("exactly one of scales and sizes must be given")
    axes = node.attr("axes")
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    given = scales if sizes is None else sizes
    if len(given) != len(axes) or (roi is not None and len(roi) != 2 * len(axes)):
        raise node.fail(f"scales/sizes need {len(axes)} values and roi {2 * len(axes)} (one "
                        f"per resized axis of input shape {shape}), got {given} and {roi}")
    intervals = [(0.0, 1.0)] * rank
    factors, outs = [1.0] * rank, list(shape)
    for i, axis in enumerate(axes):
        if roi is not None:
            intervals[axis] = (roi[i], roi[len(axes) + i])
        if sizes is None:
            factors[axis] = scales[i]
            outs[axis] = int(scales[i] * shape[axis])
        else:
            factors[axis], outs[axis] = sizes[i] / shape[axis], sizes[i]
    policy = _text(node.attr("keep_aspect_ratio_policy", "stretch"))
    if sizes is not None and policy != "stretch":
        if policy not in ("not_larger", "not_smaller"):
            raise node.fail(f"keep_aspect_ratio_policy {policy!r} is not an ONNX value")
        pick = min if policy == "not_larger" else max
        scale = pick(factors[a] for a in axes)
        for axis in axes:
            factors[axis], outs[axis] = scale, int(scale * shape[axis] + 0.5)
    return outs, factors, intervals


def _repeat(x: Tensor, axis: int, step: int) -> Tensor:
    """Each element along ``axis`` repeated ``step`` times: whole-number nearest upsampling
    as a broadcast, no gather."""
    shape = x.shape
    spread = x.reshape(shape[:axis + 1] + (1,) + shape[axis + 1:])
    wide = spread.broadcast_to(shape[:axis + 1] + (step,) + shape[axis + 1:])
    return wide.reshape(shape[:axis] + (shape[axis] * step,) + shape[axis + 1:])


@converter("Resize", "Upsample")
def _resize(node: Node):
    options = _Options.of(node)
    x = node.tensor(0)
    outs, scales, intervals = _targets(node, x.shape)
    integer = np.dtype(x.dtype).kind in "iub"
    interpolating = options.mode != "nearest"
    result = x.astype(np.float32) if interpolating and integer else x
    inside = []  # per axis, where tf_crop_and_resize samples inside the input
    for axis, (size, out, scale, roi) in enumerate(zip(x.shape, outs, scales, intervals)):
        if out == size and scale == 1.0 and roi == (0.0, 1.0):
            continue
        matrix, outside = _axis_weights(node, options, size, out, scale, roi)
        if outside is not None and outside.any():
            inside.append(np.expand_dims(~outside, tuple(
                a for a in range(x.ndim) if a != axis)))
        if interpolating:
            weights = node.lift(matrix.astype(result.dtype))
            result = F._contract_axis(result, axis, weights)
            continue
        sources = matrix.argmax(1)
        step = out // size if out % size == 0 else 0
        if step and np.array_equal(sources, np.arange(out) // step):
            result = _repeat(result, axis, step)
        else:
            result = _gather(Node("Gather", node.name, [result, sources], {"axis": axis},
                                  node.opset, 1, node.device))
    if inside:
        keep = np.logical_and.reduce(np.broadcast_arrays(*inside))
        fill = node.lift(np.array(options.extrapolation_value, result.dtype))
        result = T.where(node.lift(keep), result, fill)
    if interpolating and integer:
        # ONNX's saturating cast: rounded (half to even), clipped to the type's range.
        info = np.iinfo(x.dtype)
        result = T.minimum(T.maximum(result.round(), float(info.min)), float(info.max))
        result = result.astype(x.dtype)
    return result
