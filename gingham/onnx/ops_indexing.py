"""ONNX's indexing ops on :mod:`gingham.frontend.indexing`: GatherElements, GatherND,
ScatterElements (and the older Scatter), ScatterND, TopK, Compress and TensorScatter (opset
24's update of a KV cache).

Negative indices count from the end, as ONNX says; an index still outside its axis gives 0
(gathers) or is dropped (scatters) rather than an error (the device is not read to check).

    @converter("GatherElements")
    def _gather_elements(node: Node):
        ...
"""

from __future__ import annotations

import math

import numpy as np

from ..frontend import indexing
from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from .ops import HOST_INPUTS, Node, _axis, _host, _is_host, converter

# TopK's k and Compress's condition decide the result's shape: known when the graph is traced.
HOST_INPUTS.update({"TopK": (1,), "Compress": (1,)})


def _wrapped(node: Node, indices, size) -> Tensor:
    """``indices`` on the device, a negative one counted from the end (``size`` a number or,
    per element, a host array broadcasting against them)."""
    if isinstance(indices, np.ndarray):
        return node.lift(np.where(indices < 0, indices + size, indices))
    return T.where(indices < 0, indices + size, indices)


@converter("GatherElements")
def _gather_elements(node: Node):
    data, indices = node.inputs
    axis = _axis(node.attr("axis", 0), data.ndim)
    if _is_host(data, indices):
        size = data.shape[axis]
        return _host(np.take_along_axis(data, np.where(indices < 0, indices + size, indices),
                                        axis))
    data = node.lift(data)
    return indexing.gather(data, axis, _wrapped(node, indices, data.shape[axis]))


def _flat_positions(node: Node, shape: tuple, indices, batch_dims: int = 0) -> Tensor:
    """Each row of ``indices`` (``[..., D]``: a position in the ``D`` axes of ``shape`` after
    ``batch_dims`` batch axes) as one row number of the table those axes flatten into,
    counting the batch; negative coordinates from the end, a row outside the shape -1."""
    depth = indices.shape[-1]
    inner = shape[batch_dims:batch_dims + depth]
    sizes = np.asarray(inner, np.int64)
    strides = np.cumprod((tuple(inner[1:]) + (1,))[::-1])[::-1].astype(np.int64)
    indices = node.lift(indices).astype(np.int64)
    limits = node.lift(sizes)
    coordinates = T.where(indices < 0, indices + limits, indices)
    outside = ((coordinates < 0) | (coordinates >= limits)).astype(np.int32).amax(-1)
    positions = (coordinates * node.lift(strides)).sum(dim=-1)
    if batch_dims:
        batch = shape[:batch_dims]
        offsets = np.arange(math.prod(batch), dtype=np.int64).reshape(
            batch + (1,) * (positions.ndim - batch_dims)) * math.prod(inner)
        positions = positions + node.lift(offsets)
    return T.where(outside > 0, -1, positions)


@converter("GatherND")
def _gather_nd(node: Node):
    data, indices = node.lift(node.inputs[0]), node.inputs[1]
    batch_dims = int(node.attr("batch_dims", 0))
    depth = indices.shape[-1]
    rows = _flat_positions(node, data.shape, indices, batch_dims)
    rest = data.shape[batch_dims + depth:]
    table = data.reshape((math.prod(data.shape[:batch_dims + depth]),) + rest)
    picked = indexing.index_select(table, 0, rows.reshape(-1))
    return picked.reshape(tuple(indices.shape[:-1]) + rest)


def _reduction(node: Node) -> str:
    reduction = node.attr("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if reduction not in ("none", "add"):
        raise node.fail(f"reduction {reduction!r} is not supported (none and add are)")
    return reduction


def _host_scatter(data: np.ndarray, coordinates: tuple, updates: np.ndarray,
                  add: bool) -> np.ndarray:
    """``data`` with ``updates`` written (or added) at ``coordinates`` (NumPy's index tuple)."""
    result = data.copy()
    if add:
        np.add.at(result, coordinates, updates)
    else:
        result[coordinates] = updates
    return result


@converter("ScatterElements", "Scatter")
def _scatter_elements(node: Node):
    if _is_host(*node.inputs):
        # Shape arithmetic: the TorchScript exporter writes one size of a Shape this way.
        data, indices, updates = node.inputs
        axis = _axis(node.attr("axis", 0), data.ndim)
        coordinates = list(np.indices(indices.shape, sparse=True))
        coordinates[axis] = np.where(indices < 0, indices + data.shape[axis], indices)
        return _host_scatter(data, tuple(coordinates), updates, _reduction(node) == "add")
    data, indices, updates = (node.lift(v) if i != 1 else v for i, v in enumerate(node.inputs))
    axis = _axis(node.attr("axis", 0), data.ndim)
    write = indexing.scatter_add if _reduction(node) == "add" else indexing.scatter
    return write(data, axis, _wrapped(node, indices, data.shape[axis]), updates)


@converter("ScatterND")
def _scatter_nd(node: Node):
    if _is_host(*node.inputs):  # shape arithmetic (an exported ``shape[i] = n``)
        data, indices, updates = node.inputs
        depth = indices.shape[-1]
        limits = np.asarray(data.shape[:depth])
        rows = np.where(indices < 0, indices + limits, indices).reshape(-1, depth)
        return _host_scatter(data, tuple(rows.T), updates.reshape(
            (len(rows),) + data.shape[depth:]), _reduction(node) == "add")
    data, indices, updates = node.lift(node.inputs[0]), node.inputs[1], node.tensor(2)
    depth = indices.shape[-1]
    count = math.prod(indices.shape[:-1])
    inner = math.prod(data.shape[depth:])
    rows = _flat_positions(node, data.shape, indices).reshape(count, 1).expand(count, inner)
    table = data.reshape(math.prod(data.shape[:depth]), inner)
    write = indexing.scatter_add if _reduction(node) == "add" else indexing.scatter
    return write(table, 0, rows, updates.reshape(count, inner)).reshape(data.shape)


@converter("TopK")
def _top_k(node: Node):
    x = node.tensor(0)
    (k,) = node.ints(1, "k")
    axis = _axis(node.attr("axis", -1), x.ndim)
    values, indices = indexing.topk(x, k, axis, largest=bool(node.attr("largest", 1)))
    return [values, indices]


@converter("Compress")
def _compress(node: Node):
    condition = node.constant(1, "condition")
    keep = np.nonzero(condition.reshape(-1))[0]
    data = node.inputs[0]
    axis = node.attr("axis")
    if _is_host(data):
        return _host(np.compress(condition.reshape(-1), data, axis=axis))
    data = node.lift(data)
    if axis is None:
        data, axis = data.reshape(-1), 0
    axis = _axis(axis, data.ndim)
    return indexing.index_select(data, axis, node.lift(keep[keep < data.shape[axis]]))


@converter("TensorScatter")
def _tensor_scatter(node: Node):
    """``past_cache`` with ``update`` written along ``axis`` from each batch row's
    ``write_indices`` (0 by default) on; ``mode="circular"`` wraps the positions around the
    cache's length, ``"linear"`` drops what would fall past its end."""
    cache, update = node.tensor(0), node.tensor(1)
    axis = _axis(node.attr("axis", -2), cache.ndim)
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular") or axis == 0:
        raise node.fail(f"mode {mode!r} / axis {axis}: ONNX has modes 'linear' and 'circular', "
                        "and axis 0 is the batch's")
    size, length = cache.shape[axis], update.shape[axis]
    if length > size or any(a != b for i, (a, b) in enumerate(zip(cache.shape, update.shape))
                            if i != axis):
        raise ValueError(f"ONNX TensorScatter node {node.name!r}: update {update.shape} must "
                         f"match past_cache {cache.shape} but along axis {axis}, no longer")
    written = node.input(2)
    if written is None:
        written = np.zeros(cache.shape[0], np.int64)
    batch_shape = (cache.shape[0],) + (1,) * (cache.ndim - 1)
    positions = np.arange(size, dtype=np.int64).reshape(
        (1,) * axis + (size,) + (1,) * (cache.ndim - axis - 1))
    # Each cache position's offset into the update: its position less its row's write index.
    if isinstance(written, np.ndarray):
        offsets = node.lift(positions - written.astype(np.int64).reshape(batch_shape))
    else:
        offsets = node.lift(positions) - written.astype(np.int64).reshape(batch_shape)
    if mode == "circular":
        offsets = offsets.remainder(size)
    picked = indexing.gather(update, axis, offsets.broadcast_to(cache.shape))
    return T.where((offsets >= 0) & (offsets < length), picked, cache)
