"""ONNX's patch and unpooling ops on ``gingham.nn.functional``: Col2Im (``F.fold``) and
MaxUnpool (``F.max_unpool1d/2d/3d``).

* Col2Im: 2-d images (``F.fold``'s), any ``strides``, ``dilations`` and ``pads`` (an
  asymmetric pad folds into the padded image, then crops it); ``image_shape`` and
  ``block_shape`` must be known when the graph is traced.
* MaxUnpool: 1-3 spatial axes, windows that do not overlap (``strides >= kernel_shape``) and
  equal pads at both ends of each axis (F.max_unpool's limits); an ``output_shape`` (known when
  the graph is traced) larger than the unpooled shape adds zeros at the ends. ONNX's indices
  count over the whole tensor (batch and channels too, as MaxPool's ``Indices`` output gives
  them), PyTorch's within one channel's plane.

    (image,) = gingham.onnx.load(model)(columns)      # Col2Im(columns, [5, 5], [2, 2])
"""

from __future__ import annotations

import math

from ..nn import functional as F
from .ops import HOST_INPUTS, Node, converter

# Col2Im's image and block shapes and MaxUnpool's output shape decide the result's shape.
HOST_INPUTS.update({"Col2Im": (1, 2), "MaxUnpool": (2,)})


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
