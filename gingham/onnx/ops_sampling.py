"""ONNX's patch, unpooling and sampling ops on ``gingham.nn.functional``: Col2Im
(``F.fold``), MaxUnpool (``F.max_unpool1d/2d/3d``), GridSample (``F.grid_sample``),
AffineGrid (``F.affine_grid``), RoiAlign (bilinear taps gathered as ``F.grid_sample``'s),
MaxRoiPool (masked maxima over each box's bins) and DeformConv (``F.grid_sample`` at the offset
taps, then the convolution's contraction).

* Col2Im: 2-d images (``F.fold``'s), any ``strides``, ``dilations`` and ``pads`` (an
  asymmetric pad folds into the padded image, then crops it); ``image_shape`` and
  ``block_shape`` must be known when the graph is traced.
* MaxUnpool: 1-3 spatial axes, windows that do not overlap (``strides >= kernel_shape``) and
  equal pads at both ends of each axis (F.max_unpool's limits); an ``output_shape`` (known when
  the graph is traced) larger than the unpooled shape adds zeros at the ends. ONNX's indices
  count over the whole tensor (batch and channels too, as MaxPool's ``Indices`` output gives
  them), PyTorch's within one channel's plane.
* GridSample: 4-d and 5-d inputs (cubic 4-d only), opset 16's mode spellings (``bilinear``,
  ``bicubic``) and opset 20's (``linear``, ``cubic``), every padding mode.
* AffineGrid: 2-d and 3-d; ``size`` must be known when the graph is traced.
* RoiAlign: both ``coordinate_transformation_mode``s and both modes (``max`` as ONNX
  defines it: the largest of the weighted taps of all sampling points); ``sampling_ratio``
  must be positive (0 makes the number of points depend on the boxes' values).
* MaxRoiPool: Fast R-CNN's pooling as onnxruntime computes it (box corners rounded to
  pixels, bins' bounds floored and ceiled, an empty bin 0). Each bin's maximum is taken over
  the whole image with the pixels outside it masked: ``R * C * H * W * (pooled_h +
  pooled_w)`` compares, for boxes whose bins are known on the device only.
* DeformConv: 2-d (the form ONNX's reference and onnxruntime run), with ``mask``, ``group``
  and ``offset_group``; each sample is bilinear with zeros outside the image.

    (image,) = gingham.onnx.load(model)(columns)      # Col2Im(columns, [5, 5], [2, 2])
"""

from __future__ import annotations

import math

import numpy as np

from ..frontend import indexing
from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import HOST_INPUTS, Node, converter

# Col2Im's image and block shapes, MaxUnpool's output shape and AffineGrid's size decide the
# result's shape.
HOST_INPUTS.update({"Col2Im": (1, 2), "MaxUnpool": (2,), "AffineGrid": (1,)})


@converter("Col2Im")
def _col2im(node: Node):
    """Columns ``[N, C * prod(block), L]`` summed into ``[N, C, *image_shape]``."""
    columns = node.tensor(0)
    image, block = node.ints(1, "image_shape"), node.ints(2, "block_shape")
    if len(image) != 2 or len(block) != 2:
        raise node.fail(f"{len(image)}-d images are not supported (2-d ones are, by F.fold)")
    strides = list(node.attr("strides", [1, 1]))
    dilations = list(node.attr("dilations", [1, 1]))
    pads = list(node.attr("pads", [0, 0, 0, 0]))
    begin, end = pads[:2], pads[2:]
    if begin == end:
        return F.fold(columns, tuple(image), tuple(block), tuple(dilations), tuple(begin),
                      tuple(strides))
    padded = tuple(size + b + e for size, b, e in zip(image, begin, end))
    full = F.fold(columns, padded, tuple(block), tuple(dilations), 0, tuple(strides))
    return full[:, :, begin[0]:begin[0] + image[0], begin[1]:begin[1] + image[1]]


_UNPOOLS = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}


@converter("MaxUnpool")
def _max_unpool(node: Node):
    """Each value of ``X`` at its index (from MaxPool) in a zero tensor of the pooled input's
    shape, or ``output_shape``."""
    x, indices = node.tensor(0), node.tensor(1)
    nd = x.ndim - 2
    if nd not in _UNPOOLS:
        raise node.fail(f"{nd}-d unpooling is not supported (1, 2 or 3 spatial axes)")
    kernel = list(node.attr("kernel_shape"))
    strides = list(node.attr("strides", [1] * nd))
    pads = list(node.attr("pads", [0] * (2 * nd)))
    if pads[:nd] != pads[nd:]:
        raise node.fail(f"pads {pads} differ at the two ends of an axis (F.max_unpool pads "
                        "both alike)")
    out = [(size - 1) * s + k - 2 * p
           for size, s, k, p in zip(x.shape[2:], strides, kernel, pads[:nd])]
    # (ONNX's flat index over the whole tensor, as PyTorch's within one channel's plane)
    within = indices % math.prod(out)
    y = _UNPOOLS[nd](x, within, tuple(kernel), tuple(strides), tuple(pads[:nd]))
    output_shape = node.ints(2, "output_shape")
    if output_shape is None or list(output_shape[2:]) == out:
        return y
    # A larger output_shape keeps each value at its coordinates (as onnxruntime and ONNX's
    # reference do): zeros after the end of each axis.
    extra = [want - have for want, have in zip(output_shape[2:], out)]
    if min(extra) < 0:
        raise node.fail(f"output_shape {output_shape} is smaller than the unpooled shape "
                        f"{list(x.shape[:2]) + out}")
    return F.pad(y, [p for e in reversed(extra) for p in (0, e)])


_GRID_MODES = {"linear": "bilinear", "bilinear": "bilinear", "cubic": "bicubic",
               "bicubic": "bicubic", "nearest": "nearest"}  # opset 20's names, opset 16's


@converter("GridSample")
def _grid_sample(node: Node):
    """``X`` read at the normalised positions of ``grid``, as ``F.grid_sample``."""
    x, grid = node.tensor(0), node.tensor(1)
    mode = node.attr("mode", "linear")
    if mode not in _GRID_MODES:
        raise node.fail(f"mode {mode!r} is not one of {sorted(_GRID_MODES)}")
    if x.ndim not in (4, 5):
        raise node.fail(f"{x.ndim - 2} spatial axes are not supported (2 or 3 are)")
    if _GRID_MODES[mode] == "bicubic" and x.ndim != 4:
        raise node.fail("cubic sampling of 3 spatial axes is not supported (of 2 it is)")
    return F.grid_sample(x, grid, _GRID_MODES[mode], node.attr("padding_mode", "zeros"),
                         bool(node.attr("align_corners", 0)))


@converter("AffineGrid")
def _affine_grid(node: Node):
    """The normalised sampling grid of the affine maps ``theta`` for an output of ``size``."""
    size = node.ints(1, "size")
    if len(size) not in (4, 5):
        raise node.fail(f"size {size} must have 4 or 5 entries (2-d or 3-d grids)")
    return F.affine_grid(node.tensor(0), size, bool(node.attr("align_corners", 0)))


def _roi_taps(position: Tensor, size: int) -> list[tuple[Tensor, Tensor]]:
    """The two bilinear taps of one axis at ``position`` as RoiAlign takes them (ONNX's and
    onnxruntime's rule): a point more than one pixel outside weighs nothing, one within
    clamps to the image (the last pixel counted twice)."""
    valid = ((position >= -1.0) & (position <= float(size))).astype(position.dtype)
    position = position.clamp(min=0.0)
    at_end = position >= size - 1
    lower = T.where(at_end, float(size - 1), position.floor())
    upper = T.where(at_end, float(size - 1), lower + 1.0)
    upper_weight = T.where(at_end, 0.0, position - lower)
    return [(lower, (1.0 - upper_weight) * valid), (upper, upper_weight * valid)]


def _roi_axis(start: Tensor, end: Tensor, pooled: int, ratio: int, half_pixel: bool,
              size: int) -> tuple[list, int]:
    """The taps of the ``pooled * ratio`` sampling points along one axis of each box
    (``start``, ``end`` ``[R]`` in pixels): a position array ``[R, pooled, ratio]``."""
    extent = end - start
    if not half_pixel:
        extent = extent.clamp(min=1.0)  # output_half_pixel: boxes at least one pixel wide
    bin_size = (extent / pooled).reshape(-1, 1, 1)
    steps = np.arange(pooled, dtype=np.float64).reshape(1, pooled, 1) + (
        np.arange(ratio, dtype=np.float64).reshape(1, 1, ratio) + 0.5) / ratio
    position = start.reshape(-1, 1, 1) + bin_size * T.tensor(
        steps.astype(start.dtype), device=start.device)
    return _roi_taps(position, size)


@converter("RoiAlign")
def _roi_align(node: Node):
    """``[R, C, output_height, output_width]``: each box's bins, each the mean (or ONNX's
    max) of ``sampling_ratio ** 2`` bilinear samples of its image ``batch_indices[r]``."""
    x, rois = node.tensor(0), node.tensor(1)
    batch = node.tensor(2)
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4:
        raise node.fail(f"X must be [N, C, H, W] and rois [R, 4], got {x.shape} and {rois.shape}")
    mode = node.attr("mode", "avg")
    transform = node.attr("coordinate_transformation_mode",
                          "half_pixel" if node.opset >= 16 else "output_half_pixel")
    if mode not in ("avg", "max") or transform not in ("half_pixel", "output_half_pixel"):
        raise node.fail(f"mode {mode!r} / coordinate_transformation_mode {transform!r} "
                        "unknown")
    ratio = int(node.attr("sampling_ratio", 0))
    if ratio <= 0:
        raise node.fail("sampling_ratio 0 (as many points as the box is pixels wide) makes the "
                        "shape depend on the boxes' values; give a positive sampling_ratio")
    pooled = (int(node.attr("output_height", 1)), int(node.attr("output_width", 1)))
    half_pixel = transform == "half_pixel"
    corners = rois.astype(x.dtype) * float(node.attr("spatial_scale", 1.0))
    if half_pixel:
        corners = corners - 0.5
    x1, y1, x2, y2 = corners.unbind(1)
    height, width = x.shape[2:]
    rows = _roi_axis(y1, y2, pooled[0], ratio, half_pixel, height)
    columns = _roi_axis(x1, x2, pooled[1], ratio, half_pixel, width)
    # positions [R, pooled_h, ratio, pooled_w, ratio]
    rows = [(p.reshape(*p.shape, 1, 1), w.reshape(*w.shape, 1, 1)) for p, w in rows]
    columns = [(p.reshape(p.shape[0], 1, 1, *p.shape[1:]),
                w.reshape(w.shape[0], 1, 1, *w.shape[1:])) for p, w in columns]
    first_rows = (batch.astype(np.int32) * (height * width)).reshape(-1, 1, 1, 1, 1)
    picked, weights = F._gather_taps(x, first_rows, [rows, columns])
    weighted = picked * weights  # [taps, R, pooled_h, ratio, pooled_w, ratio, C]
    if mode == "avg":
        pooled_values = weighted.sum(0).sum((2, 4)) / float(ratio * ratio)
    else:
        pooled_values = weighted.amax(0).amax((2, 4))
    return pooled_values.movedim(-1, 1)


def _rounded(x: Tensor) -> Tensor:
    """``x`` rounded half away from zero (C's ``round``, as onnxruntime rounds box corners)."""
    return x.sign() * (x.abs() + 0.5).floor()


def _roi_bins(start: Tensor, end: Tensor, pooled: int, size: int) -> tuple[Tensor, Tensor]:
    """Per box (``start``, ``end`` ``[R]``: rounded pixel corners) and bin of one axis,
    whether each pixel is in the bin (``[R, pooled, size]``) and whether the bin is empty
    (``[R, pooled, 1]``)."""
    extent = (end - start + 1.0).clamp(min=1.0)  # a box at least one pixel wide
    bin_size = (extent / float(pooled)).reshape(-1, 1, 1)
    steps = T.tensor(np.arange(pooled, dtype=np.float32).reshape(1, pooled, 1),
                     device=start.device)
    first = start.reshape(-1, 1, 1)
    low = ((steps * bin_size).floor() + first).clamp(0.0, float(size))
    high = (((steps + 1.0) * bin_size).ceil() + first).clamp(0.0, float(size))
    pixels = T.tensor(np.arange(size, dtype=np.float32).reshape(1, 1, size),
                      device=start.device)
    return (pixels >= low) & (pixels < high), high <= low


@converter("MaxRoiPool")
def _max_roi_pool(node: Node):
    """``[R, C, pooled_h, pooled_w]``: the maximum of each bin of each box (``rois`` rows
    ``(batch, x1, y1, x2, y2)``, scaled by ``spatial_scale``); 0 for an empty bin."""
    x, rois = node.tensor(0), node.tensor(1).astype(np.float32)
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
        raise node.fail(f"X must be [N, C, H, W] and rois [R, 5], got {x.shape} and "
                        f"{rois.shape}")
    pooled_h, pooled_w = (int(v) for v in node.attr("pooled_shape"))
    height, width = x.shape[2:]
    batch, corners = rois[:, 0], _rounded(rois[:, 1:] * float(node.attr("spatial_scale", 1.0)))
    x1, y1, x2, y2 = corners.unbind(1)
    in_rows, empty_rows = _roi_bins(y1, y2, pooled_h, height)
    in_columns, empty_columns = _roi_bins(x1, x2, pooled_w, width)
    images = x.astype(np.float32)
    if x.shape[0] > 1:  # each box's image (one image: every box reads it)
        images = indexing.index_select(images, 0, batch.astype(np.int64))
    else:
        images = images.broadcast_to((rois.shape[0],) + x.shape[1:])
    lowest = float("-inf")
    # [R, C, H, pooled_w, W] -> max over W, then [R, C, pooled_h, H, pooled_w] -> max over H
    across = T.where(in_columns.reshape(-1, 1, 1, pooled_w, width),
                     images.reshape(*images.shape[:3], 1, width), lowest).amax(-1)
    down = T.where(in_rows.reshape(-1, 1, pooled_h, height, 1),
                   across.reshape(across.shape[0], across.shape[1], 1, height, pooled_w),
                   lowest).amax(3)
    empty = empty_rows.reshape(-1, 1, pooled_h, 1) | empty_columns.reshape(-1, 1, 1, pooled_w)
    return T.where(empty, 0.0, down).astype(x.dtype)


@converter("DeformConv")
def _deform_conv(node: Node):
    """A 2-d convolution whose every tap reads ``X`` at its position plus ``offset``
    (bilinearly, zero outside), weighted by ``mask`` (default 1): ``[N, C_out, oH, oW]``."""
    x, weight, offset = node.tensor(0), node.tensor(1), node.tensor(2)
    if x.ndim != 4:
        raise node.fail(f"{x.ndim - 2}-d deformable convolutions are not supported (2-d are)")
    n, channels, height, width = x.shape
    out_channels, group_channels, kh, kw = weight.shape
    group, offset_group = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    oh, ow = offset.shape[2:]
    if channels != group_channels * group or channels % offset_group or \
            offset.shape[1] != offset_group * kh * kw * 2:
        raise ValueError(f"ONNX DeformConv node {node.name!r}: X {x.shape}, W {weight.shape} "
                         f"and offset {offset.shape} do not fit group {group} and "
                         f"offset_group {offset_group}")
    sh, sw = node.attr("strides", [1, 1])
    dh, dw = node.attr("dilations", [1, 1])
    top, left = node.attr("pads", [0, 0, 0, 0])[:2]
    # Each tap's pixel position: [1, 1, kh, kw, oh, ow] after broadcasting the two.
    rows = (np.arange(oh) * sh - top).reshape(1, 1, 1, 1, oh, 1) + \
        (np.arange(kh) * dh).reshape(1, 1, kh, 1, 1, 1)
    columns = (np.arange(ow) * sw - left).reshape(1, 1, 1, 1, 1, ow) + \
        (np.arange(kw) * dw).reshape(1, 1, 1, kw, 1, 1)
    shifts = offset.reshape(n, offset_group, kh, kw, 2, oh, ow)
    rows = shifts[:, :, :, :, 0] + node.lift(rows.astype(np.float32))
    columns = shifts[:, :, :, :, 1] + node.lift(columns.astype(np.float32))
    # grid_sample's normalised (x, y) of a pixel position, without align_corners.
    grid = T.stack([(columns * 2.0 + 1.0) * (1.0 / width) - 1.0,
                    (rows * 2.0 + 1.0) * (1.0 / height) - 1.0], -1)
    grid = grid.reshape(n * offset_group, kh * kw * oh, ow, 2)
    per_group = channels // offset_group
    images = x.reshape(n * offset_group, per_group, height, width)
    sampled = F.grid_sample(images, grid, "bilinear", "zeros", align_corners=False)
    sampled = sampled.reshape(n, offset_group, per_group, kh * kw, oh, ow)
    mask = node.input(4)
    if mask is not None:
        sampled = sampled * node.tensor(4).reshape(n, offset_group, 1, kh * kw, oh, ow)
    columns = sampled.reshape(n, group, group_channels * kh * kw, oh * ow)
    kernels = weight.reshape(group, out_channels // group, group_channels * kh * kw)
    y = T.matmul(kernels, columns).reshape(n, out_channels, oh, ow)
    bias = node.input(3)
    return y if bias is None else y + node.tensor(3).reshape(1, out_channels, 1, 1)
