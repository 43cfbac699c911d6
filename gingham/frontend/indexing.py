"""Indexing with integer tensors, as PyTorch's: gather, scatter, index_select, index_add,
take_along_dim, sort, argsort and topk (``gingham.gather(x, 1, idx)`` or ``x.gather(1, idx)``).

Two mechanisms carry them all, each a few lines of Tile, so every one is differentiable by
Tile's own autodiff:

* **Whole rows** (``index_select``, ``x[idx]``): the indexed dim moved to the front and Tile's
  ``gather`` of rows, as :func:`gingham.nn.functional.embedding`.
* **One element per index** (``gather``, ``scatter_add``, ``scatter``, ``index_add``, and the
  sorts): a comparison contraction along the indexed dim. ``gather`` is

      O[.., i, ..] = +(Index[.., i, ..] == Pos[.., j, ..] ? X[.., j, ..])

  where ``Pos`` counts along the dim: each output cell reads the one ``j`` its index names.
  That is ``O(len(index) * size)`` compares per fiber (a fiber: the positions that differ
  only along the dim), the price of staying a contraction (Tile has no per-element gather
  along a middle axis); its gradient is the same contraction read the other way.

A sort is not a contraction but a rank is: ``rank[i] = #{j : x[j] < x[i] or (x[j] == x[i]
and j < i)}`` is one sum over ``j`` (``n^2`` compares per row: fine for class counts and
sequence lengths, not for sorting millions), and the value of rank ``r`` is the ``x[i]``
whose rank is ``r`` (the contraction above). Ties keep their order (a stable sort) and NaN
sorts as the largest value, as in PyTorch.

An index outside ``[0, size)`` is no error (it cannot be checked without reading the device):
it selects nothing, so ``gather`` and ``index_select`` give 0 there and ``scatter_add``,
``scatter`` and ``index_add`` drop the update. ``x[idx]`` and ``take_along_dim`` count a
negative index from the end, as PyTorch's; the other functions do not (PyTorch refuses one).
"""

from __future__ import annotations

import math

import numpy as np

from ..tile import builder
from ..tile import dtypes as dt
from .tensor import (
    DTypeError,
    ShapeError,
    Tensor,
    ValuesIndices,
    _broadcast_to,
    _dim,
    permute_dims,
    tensor,
    where,
)

# -- checks ----------------------------------------------------------------------------------------


def _check_index(op: str, index, name: str = "index") -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: {name} must be a gingham Tensor of integers, not "
                        f"{type(index).__name__}")
    if not dt.is_integer(index.dtype):
        raise DTypeError(f"{op}: {name} must hold integers, not {dt.dtype_name(index.dtype)}")
    return index


def _check_fits(op: str, x: Tensor, axis: int, index: Tensor, what: str = "index") -> None:
    """PyTorch's rule for gather and scatter: ``index`` has ``x``'s rank and is no larger
    than ``x`` along every dim but ``axis``."""
    if index.ndim != x.ndim:
        raise ShapeError(f"{op}: {what} of shape {index.shape} must have as many dims as the "
                         f"input of shape {x.shape}")
    for d, (i, s) in enumerate(zip(index.shape, x.shape)):
        if d != axis and i > s:
            raise ShapeError(f"{op}: {what} of shape {index.shape} is larger than the input of "
                             f"shape {x.shape} along dim {d} (only dim {axis} may differ)")


# -- the comparison contraction ------------------------------------------------------------------


def _fiber_indices(ndim: int):
    return builder.indices(" ".join(f"i{a}" for a in range(ndim)) + " j")


def _select_along(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``O[.., i, ..] = x[.., index[.., i, ..], ..]`` (index of ``x``'s rank, shape ``index``'s):
    the comparison contraction of the module docstring; 0 where the index names no position."""
    *idx, j = _fiber_indices(x.ndim)
    source = list(idx)
    source[axis] = j

    def build(nodes):
        values, positions = nodes
        wanted = builder.cast(positions, "int32")
        along = builder.index(values, axis)
        return builder.sum(builder.cond(wanted[tuple(idx)] == along[tuple(source)],
                                        values[tuple(source)]),
                           out=idx, shape=list(index.shape))

    return x._derive(index.shape, x.dtype, [x, index], build)


def _add_along(x: Tensor, axis: int, index: Tensor, src: Tensor) -> Tensor:
    """``x`` plus, at ``[.., index[.., i, ..], ..]``, ``src[.., i, ..]`` (``src`` at least as
    large as ``index``): ``O[.., v, ..] = +(Index[.., i, ..] == Pos[.., v, ..] ? Src[.., i, ..])``
    starting from ``x`` (its default), so repeated indices add up."""
    *idx, j = _fiber_indices(x.ndim)
    source = list(idx)
    source[axis] = j

    def build(nodes):
        base, positions, updates = nodes
        wanted = builder.cast(positions, "int32")
        along = builder.index(base, axis)
        return builder.sum(builder.cond(wanted[tuple(source)] == along[tuple(idx)],
                                        updates[tuple(source)]),
                           out=idx, shape=list(x.shape), default=base)

    return x._derive(x.shape, x.dtype, [x, index, src], build)


# -- gather and scatter ----------------------------------------------------------------------------


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``out[.., i, ..] = input[.., index[.., i, ..], ..]`` along ``dim``, as ``torch.gather``:
    ``index`` has ``input``'s rank, is no larger along the other dims, and gives the result's
    shape. An index outside ``[0, input.size(dim))`` gives 0. Differentiable in ``input``.

        picked = gingham.gather(logits, 1, target.unsqueeze(1))     # [N, 1]
    """
    op = "gather"
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    _check_fits(op, input, axis, index)
    return _select_along(input, axis, index)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    """``torch.take_along_dim``: :func:`gather` after broadcasting ``input`` and ``indices``
    against each other along every dim but ``dim`` (NumPy's ``take_along_axis``); without
    ``dim``, both flattened. A negative index counts from the end.

        best = gingham.take_along_dim(scores, scores.argmax(1, keepdim=True), dim=1)
    """
    op = "take_along_dim"
    _check_index(op, indices, "indices")
    if dim is None:
        input, indices, axis = input.reshape(-1), indices.reshape(-1), 0
    else:
        axis = _dim(op, input.shape, dim)
        if indices.ndim != input.ndim:
            raise ShapeError(f"{op}: indices of shape {indices.shape} must have as many dims "
                             f"as the input of shape {input.shape}")
        shapes = [list(input.shape), list(indices.shape)]
        for shape in shapes:
            shape[axis] = 1
        try:
            common = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
        except ValueError:
            raise ShapeError(f"{op}: input of shape {input.shape} and indices of shape "
                             f"{indices.shape} do not broadcast along the dims but {dim}") from None
        input = _broadcast_to(input, common[:axis] + [input.shape[axis]] + common[axis + 1:], op)
        indices = _broadcast_to(indices, common[:axis] + [indices.shape[axis]]
                                + common[axis + 1:], op)
    size = input.shape[axis]
    wrapped = where(indices < 0, indices + size, indices)
    return _select_along(input, axis, wrapped)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """``input`` with ``src[.., i, ..]`` added at ``[.., index[.., i, ..], ..]`` along ``dim``,
    as ``torch.scatter_add``: repeated indices add up; ``src`` is at least as large as
    ``index`` (its part of ``index``'s shape is used); an index outside the dim is dropped.
    Differentiable in ``input`` and ``src``.

        counts = gingham.scatter_add(zeros, 0, labels, ones)        # a histogram
    """
    op = "scatter_add"
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    _check_fits(op, input, axis, index)
    src = _check_src(op, input, index, src)
    return _add_along(input, axis, index, src)


def _check_src(op: str, input: Tensor, index: Tensor, src) -> Tensor:  # noqa: A002
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}: src must be a gingham Tensor, not {type(src).__name__} (use "
                        "the value= form of scatter for a number)")
    if src.dtype != input.dtype:
        raise DTypeError(f"{op}: src is {dt.dtype_name(src.dtype)} but the input is "
                         f"{dt.dtype_name(input.dtype)}; they must have one dtype")
    if src.ndim != index.ndim or any(s < i for s, i in zip(src.shape, index.shape)):
        raise ShapeError(f"{op}: src of shape {src.shape} must be at least as large as index "
                         f"of shape {index.shape} along every dim")
    return src


def scatter(input: Tensor, dim: int, index: Tensor, src=None, *,  # noqa: A002
            value=None) -> Tensor:
    """``input`` with ``src[.., i, ..]`` (or the number ``value``) written at
    ``[.., index[.., i, ..], ..]`` along ``dim``, as ``torch.scatter`` without ``reduce``.
    Where several entries of ``index`` name one cell the last of them in ``index``'s order
    along ``dim`` wins (PyTorch leaves that undefined); an index outside the dim is dropped.
    Differentiable in ``input`` (where nothing was written) and ``src`` (the winners).

        one_hot = gingham.scatter(zeros, 1, labels.unsqueeze(1), value=1.0)

    Two contractions along the dim: the last writer of each cell, ``W[.., v, ..] =
    >(Index[.., i, ..] == Pos[.., v, ..] ? Order[.., i, ..])`` (``Order`` counts from 1), then
    the value of that writer, ``+(Order[.., i, ..] == W[.., v, ..] ? Src[.., i, ..])``.
    """
    op = "scatter"
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    _check_fits(op, input, axis, index)
    if (src is None) == (value is None):
        raise TypeError(f"{op}: give src (a tensor) or value (a number), one of them")
    if src is None or not isinstance(src, Tensor):
        number = value if src is None else src
        src = _broadcast_to(tensor(np.asarray(number, input.dtype), device=input.device),
                            index.shape, op)
    src = _check_src(op, input, index, src)
    *idx, j = _fiber_indices(input.ndim)
    source = list(idx)
    source[axis] = j

    def writers(nodes):
        base, positions = nodes
        wanted = builder.cast(positions, "int32")
        order = builder.index(wanted, axis) + 1
        along = builder.index(base, axis)
        return builder.max(builder.cond(wanted[tuple(source)] == along[tuple(idx)],
                                        order[tuple(source)]),
                           out=idx, shape=list(input.shape))

    # 0 where no index names the cell (or none reaches it): writers count from 1
    last = input._derive(input.shape, dt.INT32, [input, index], writers)

    def written(nodes):
        updates, winners = nodes
        order = builder.index(updates, axis) + 1
        return builder.sum(builder.cond(order[tuple(source)] == winners[tuple(idx)],
                                        updates[tuple(source)]),
                           out=idx, shape=list(input.shape))

    values = src._derive(input.shape, src.dtype, [src, last], written)
    return where(last > 0, values, input)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002
    """The slices of ``input`` along ``dim`` at the positions of the 1-d ``index`` (any
    length, repeats allowed), as ``torch.index_select``; an index outside the dim gives a slice
    of zeros. Whole slices move: Tile's ``gather`` of rows (:mod:`gingham.frontend.indexing`).

        chosen = gingham.index_select(x, 1, gingham.tensor([0, 2]))
    """
    op = "index_select"
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    if index.ndim > 1:
        raise ShapeError(f"{op}: index must be 1-d (or 0-d), not of shape {index.shape}")
    return _take_slices(input, axis, index.reshape(-1))


def _take_slices(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``x``'s slices along ``axis`` at ``index`` (any shape, which replaces that dim)."""
    if x.ndim == 0:
        x = x.reshape(1)
    order = [axis] + [d for d in range(x.ndim) if d != axis]
    front = permute_dims(x, order, "index")
    rest = front.shape[1:]
    table = front.reshape(front.shape[0], math.prod(rest))
    rows = table._derive(index.shape + (table.shape[1],), x.dtype, [table, index],
                         lambda nodes: builder.gather(nodes[0], nodes[1]))
    picked = rows.reshape(index.shape + rest)
    # [*index, *before, *after] -> [*before, *index, *after]
    n = index.ndim
    back = list(range(n, n + axis)) + list(range(n)) + list(range(n + axis, picked.ndim))
    return permute_dims(picked, back, "index")


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,  # noqa: A002
              alpha=1) -> Tensor:
    """``input`` with ``alpha * source``'s slices along ``dim`` added at the positions of the
    1-d ``index`` (repeats add up; an index outside the dim is dropped), as
    ``torch.index_add``. Differentiable in ``input`` and ``source``.

        totals = gingham.index_add(totals, 0, rows, updates)
    """
    op = "index_add"
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    if index.ndim > 1:
        raise ShapeError(f"{op}: index must be 1-d (or 0-d), not of shape {index.shape}")
    index = index.reshape(-1)
    expected = input.shape[:axis] + (index.shape[0],) + input.shape[axis + 1:]
    if not isinstance(source, Tensor) or source.shape != expected:
        shape = source.shape if isinstance(source, Tensor) else type(source).__name__
        raise ShapeError(f"{op}: source must have shape {expected} (the input's, with the "
                         f"index's length along dim {dim}), not {shape}")
    if alpha != 1:
        source = source * alpha
    spread = (1,) * axis + index.shape + (1,) * (input.ndim - axis - 1)
    return scatter_add(input, axis, _broadcast_to(index.reshape(spread), expected, op), source)


# -- x[idx] ----------------------------------------------------------------------------------------


def _is_tensor_index(item) -> bool:
    return isinstance(item, (Tensor, np.ndarray, list))


def getitem_with_tensor(x: Tensor, key: tuple) -> Tensor:
    """``x[key]`` where one entry of ``key`` is an integer Tensor, ndarray or list: the other
    entries index as usual, then :func:`index_select`'s row gather takes the slices that the
    index names along its dim; the index's dims replace that dim. An integer elsewhere in
    ``key`` removes its dim first, as PyTorch does (``x[0, :, idx]`` of ``[A, B, C]`` is
    ``[B, *idx.shape]``, where NumPy would put the index's dims in front)."""
    from .tensor import _getitem

    positions = [p for p, item in enumerate(key) if _is_tensor_index(item)]
    if len(positions) > 1:
        raise IndexError("indexing with more than one integer tensor is not supported; index "
                         "one dim at a time (x[i][:, j]) or use gingham.gather")
    (position,) = positions
    index = key[position]
    boolean = (dt.is_bool(index.dtype) if isinstance(index, Tensor)
               else np.asarray(index).dtype == np.bool_)
    if boolean:
        raise IndexError("a boolean mask as an index gives a result whose shape depends on the "
                         "values, which a compiled program cannot have; use "
                         "gingham.where(mask, x, 0) or x.masked_fill(~mask, 0) to keep the shape")
    basic = key[:position] + (slice(None),) + key[position + 1:]
    sliced = _getitem(x, basic)
    # the sliced tensor's dim for the index: one per entry before it that keeps or adds a dim
    expanded = _expand_ellipsis(basic, x.ndim)
    index_position = position + len(expanded) - len(basic) if Ellipsis in basic[:position] \
        else position
    axis = sum(1 for item in expanded[:index_position] if not isinstance(item, (int, np.integer)))
    size = sliced.shape[axis]
    if isinstance(index, Tensor):
        index = _check_index("index", index)
        index = where(index < 0, index + size, index)
    else:
        array = np.asarray(index)
        if array.size and not np.issubdtype(array.dtype, np.integer):
            raise IndexError(f"tensors used as indices must be integer (or bool), not "
                             f"{array.dtype}")
        array = array.astype(np.int64)
        if np.any((array < -size) | (array >= size)):
            raise IndexError(f"index {array.tolist()} is out of bounds for dim {axis} with "
                             f"size {size}")
        index = tensor(array % max(size, 1), device=x.device)
    return _take_slices(sliced, axis, index)


def _expand_ellipsis(key: tuple, ndim: int) -> tuple:
    if Ellipsis not in key:
        return key
    position = key.index(Ellipsis)
    fill = ndim - (len(key) - 1 - sum(k is None for k in key))
    return key[:position] + (slice(None),) * fill + key[position + 1:]


# -- sorting ---------------------------------------------------------------------------------------


def _ranks(x: Tensor, axis: int, descending: bool) -> Tensor:
    """Each element's int32 position in ``x`` sorted along ``axis`` (stable, NaN largest):
    ``rank[i] = +(ahead[i, j])`` over ``j``, from the ``[.., n, n, ..]`` table of pairs
    (``i`` at ``axis``, ``j`` after it)."""
    n = x.shape[axis]
    as_i = x.shape[:axis + 1] + (1,) + x.shape[axis + 1:]
    as_j = x.shape[:axis] + (1,) + x.shape[axis:]
    *idx, j = _fiber_indices(x.ndim)
    pair = list(idx)
    pair.insert(axis + 1, j)
    floating = dt.is_float(x.dtype)

    def build(nodes):
        xi = builder.reshape(nodes[0], *as_i)
        xj = builder.reshape(nodes[0], *as_j)
        first, second = (xj, xi) if not descending else (xi, xj)
        ahead = first < second  # xj strictly before xi in the order
        tie = xj.eq(xi)
        if floating:
            nan_i, nan_j = xi.ne(xi), xj.ne(xj)
            nan_second = nan_i if not descending else nan_j
            nan_first = nan_j if not descending else nan_i
            ahead = builder.logical_or(ahead, builder.logical_and(nan_second,
                                                                  builder.logical_not(nan_first)))
            tie = builder.logical_or(tie, builder.logical_and(nan_i, nan_j))
        earlier = builder.index(ahead, axis + 1) < builder.index(ahead, axis)
        before = builder.logical_or(ahead, builder.logical_and(tie, earlier))
        counts = builder.cast(before, "int32")
        return builder.sum(counts[tuple(pair)], out=idx, shape=list(x.shape), where=[j < n])

    return x._derive(x.shape, dt.INT32, [x], build)


def _by_rank(x: Tensor, ranks: Tensor, axis: int, k: int) -> ValuesIndices:
    """The elements of ranks ``0 .. k-1`` along ``axis`` in rank order, and their int64
    positions: ``O[.., r, ..] = +(Rank[.., i, ..] == R[.., r, ..] ? X[.., i, ..])``."""
    *idx, i = _fiber_indices(x.ndim)
    source = list(idx)
    source[axis] = i
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]

    def pick(of_values: bool):
        def build(nodes):
            rank = nodes[1] if of_values else nodes[0]
            position = builder.index(rank, axis)
            chosen = nodes[0] if of_values else position
            return builder.sum(builder.cond(rank[tuple(source)] == position[tuple(idx)],
                                            chosen[tuple(source)]),
                               out=idx, shape=list(shape))
        return build

    values = x._derive(shape, x.dtype, [x, ranks], pick(True))
    positions = ranks._derive(shape, dt.INT32, [ranks], pick(False))
    return ValuesIndices(values, positions.astype(dt.INT64))


def _sortable(op: str, x: Tensor, dim: int) -> tuple[Tensor, int]:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a gingham Tensor, not {type(x).__name__}")
    if dt.is_bool(x.dtype):
        x = x.astype(dt.INT32)  # True after False; converted back by the callers
    if x.ndim == 0:
        return x.reshape(1), 0
    return x, _dim(op, x.shape, dim)


def sort(input: Tensor, dim: int = -1, descending: bool = False, *,  # noqa: A002
         stable: bool = False) -> ValuesIndices:
    """``(values, indices)``: ``input`` sorted along ``dim``, as ``torch.sort``. Always stable
    (equal elements keep their order, so ``stable`` changes nothing); NaN sorts as the largest
    value. The gradient of ``values`` goes back to the elements it came from.

    Ranks compared pairwise: ``n^2`` compares per row of ``n`` elements (see the module
    docstring), for rows of up to a few thousand.

        values, order = gingham.sort(scores, dim=1, descending=True)
    """
    x, axis = _sortable("sort", input, dim)
    result = _by_rank(x, _ranks(x, axis, descending), axis, x.shape[axis])
    return _restore("sort", input, result)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, *,  # noqa: A002
            stable: bool = False) -> Tensor:
    """The int64 positions that sort ``input`` along ``dim``: ``sort(...).indices``."""
    return sort(input, dim, descending, stable=stable).indices


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True,  # noqa: A002
         sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) elements along
    ``dim``, as ``torch.topk``: the elements whose rank is below ``k``, in rank order (so
    sorted whatever ``sorted`` says; of equal elements the first comes first). ``n^2``
    compares per row, as :func:`sort`.

        scores, classes = gingham.topk(logits, 5)
    """
    op = "topk"
    x, axis = _sortable(op, input, dim)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{op}: k must be an int, not {type(k).__name__}")
    if not 0 <= k <= x.shape[axis]:
        raise ShapeError(f"{op}: k={k} is out of range for dim {dim} of size "
                         f"{x.shape[axis]} (shape {input.shape})")
    result = _by_rank(x, _ranks(x, axis, largest), axis, int(k))
    return _restore(op, input, result)


def _restore(op: str, input: Tensor, result: ValuesIndices) -> ValuesIndices:  # noqa: A002
    values, indices = result
    if input.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return ValuesIndices(values._in_dtype(input.dtype), indices)


# -- searching, counting and order statistics --------------------------------------------------------
# Each is a comparison table reduced along one axis (``n * m`` compares: for bins, class counts
# and boundaries, not for millions of each) or a gather at positions computed on the device, so
# their shapes are fixed when traced; only bincount's length can depend on the values.


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None,
                 sorter: Tensor | None = None) -> Tensor:
    """Where each element of ``input`` would go in ``sorted_sequence`` (sorted along its last
    dim) to keep it sorted, as ``torch.searchsorted``: the number of elements below it (with
    ``right`` or ``side="right"``: not above it). A 1-d sequence serves every element; an
    n-d one pairs its leading dims with ``input``'s.

        gingham.searchsorted(gingham.tensor([1, 3, 5]), gingham.tensor([0, 3, 6]))  # [0, 1, 3]
    """
    op = "searchsorted"
    if not isinstance(sorted_sequence, Tensor):
        raise TypeError(f"{op}: sorted_sequence must be a gingham Tensor, not "
                        f"{type(sorted_sequence).__name__}")
    if side not in (None, "left", "right"):
        raise ValueError(f"{op}: side must be 'left' or 'right', not {side!r}")
    if right and side == "left":
        raise ValueError(f"{op}: side='left' contradicts right=True")
    right = right or side == "right"
    if sorter is not None:
        sorted_sequence = take_along_dim(sorted_sequence, _check_index(op, sorter, "sorter"), -1)
    values = input if isinstance(input, Tensor) else tensor(
        np.asarray(input, sorted_sequence.dtype), device=sorted_sequence.device)
    if sorted_sequence.ndim > 1 and sorted_sequence.shape[:-1] != values.shape[:-1]:
        raise ShapeError(f"{op}: the leading dims of sorted_sequence {sorted_sequence.shape} "
                         f"and input {values.shape} must be the same")
    if sorted_sequence.ndim > 1:
        table = sorted_sequence.unsqueeze(-2), values.unsqueeze(-1)
    else:
        table = sorted_sequence, values.unsqueeze(-1)
    below = (table[0] <= table[1]) if right else (table[0] < table[1])
    return below.astype(dt.INT32 if out_int32 else dt.INT64).sum(-1)


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Tensor:
    """The bucket of each element of ``input`` among the increasing 1-d ``boundaries``, as
    ``torch.bucketize``: ``boundaries[i - 1] < x <= boundaries[i]`` (with ``right``:
    ``boundaries[i - 1] <= x < boundaries[i]``)."""
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        raise ValueError("bucketize: boundaries must be a 1-d gingham Tensor")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _one_hot_sum(index: Tensor, length: int, weights: Tensor | None, dtype) -> Tensor:
    """``out[..., k] = sum of weights[..., i] where index[..., i] == k`` over the last dim
    (an index outside ``[0, length)`` counts nowhere)."""
    bins = tensor(np.arange(length, dtype=np.dtype(index.dtype)), device=index.device)
    hits = (index.unsqueeze(-1) == bins).astype(dtype)
    if weights is not None:
        hits = hits * weights.astype(dtype).unsqueeze(-1)
    return hits.sum(-2)


def bincount(input: Tensor, weights: Tensor | None = None,  # noqa: A002
             minlength: int = 0) -> Tensor:
    """How often each value ``0 .. max(input)`` occurs in the 1-d non-negative integer
    ``input`` (summing ``weights`` instead of ones), at least ``minlength`` of them, as
    ``torch.bincount`` (int64 counts, or the weights' dtype). The length depends on the
    values: it is read from the device, so not inside :func:`gingham.jit`.

        gingham.bincount(gingham.tensor([0, 2, 2]))  # [1, 0, 2]
    """
    op = "bincount"
    _check_index(op, input, "input")
    if input.ndim != 1:
        raise ValueError(f"{op}: input must be 1-d, not of shape {input.shape}")
    if weights is not None and weights.shape != input.shape:
        raise ValueError(f"{op}: weights of shape {weights.shape} must match input's "
                         f"{input.shape}")
    if minlength < 0:
        raise ValueError(f"{op}: minlength must be non-negative, not {minlength}")
    from .jit import current_trace

    if current_trace() is not None:
        raise NotImplementedError(f"{op} inside gingham.jit: its length depends on the values, "
                                  "which a traced program cannot read")
    values = input.numpy()
    if values.size and values.min() < 0:
        raise ValueError(f"{op}: input must be non-negative, found {values.min()}")
    length = max(int(values.max()) + 1 if values.size else 0, int(minlength))
    dtype = dt.INT64 if weights is None else weights.dtype
    return _one_hot_sum(input, length, weights, dtype)


def isin(elements, test_elements, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each of ``elements`` equals one of ``test_elements`` (a bool tensor shaped
    like ``elements``), as ``torch.isin``; ``invert`` negates it."""
    like = elements if isinstance(elements, Tensor) else test_elements
    if not isinstance(like, Tensor):
        raise TypeError("isin: elements or test_elements must be a gingham Tensor")
    elements, test_elements = (e if isinstance(e, Tensor) else tensor(
        np.asarray(e, like.dtype), device=like.device) for e in (elements, test_elements))
    found = (elements.unsqueeze(-1) == test_elements.reshape(-1)).astype(dt.INT32).amax(-1) > 0
    return ~found if invert else found


def histc(input: Tensor, bins: int = 100, min: float = 0,  # noqa: A002 (PyTorch's names)
          max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``input`` in ``bins`` equal bins over ``[min, max]`` (the data's least
    and greatest elements when ``min == max``), as ``torch.histc``: elements outside are not
    counted, ``max`` falls in the last bin; counts in ``input``'s float dtype."""
    op = "histc"
    if not isinstance(input, Tensor) or not dt.is_float(input.dtype):
        raise TypeError(f"{op}: input must be a floating-point gingham Tensor")
    if bins <= 0:
        raise ValueError(f"{op}: bins must be positive, not {bins}")
    if min > max:
        raise ValueError(f"{op}: max must be larger than min, got min={min}, max={max}")
    x = input.reshape(-1)
    if min == max:
        low, high = x.amin(), x.amax()
        same = low == high  # a constant input: torch widens its range by one either side
        low, high = where(same, low - 1, low), where(same, high + 1, high)
    else:
        low, high = float(min), float(max)
    position = ((x - low) * bins / (high - low)).floor()
    position = where(x == high, bins - 1, position)
    inside = (x >= low) & (x <= high)
    index = where(inside, position, -1.0).astype(dt.INT64)
    return _one_hot_sum(index, bins, None, input.dtype)


def unravel_index(indices: Tensor, shape) -> tuple[Tensor, ...]:
    """The coordinates in a tensor of ``shape`` of each flat index of ``indices`` (one int64
    tensor per dim; a negative index counts from the end), as ``torch.unravel_index``.

        rows, cols = gingham.unravel_index(gingham.tensor([5, 7]), (3, 4))  # [1, 1], [1, 3]
    """
    op = "unravel_index"
    _check_index(op, indices, "indices")
    sizes = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in sizes):
        raise ValueError(f"{op}: shape {sizes} must not hold negative sizes")
    total = math.prod(sizes)
    flat = indices.astype(dt.INT64)
    flat = where(flat < 0, flat + total, flat)
    strides = np.cumprod((sizes[1:] + (1,))[::-1])[::-1]
    return tuple((flat // int(stride)) % size for stride, size in zip(strides, sizes))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _nan_sorted(op: str, x: Tensor, dim) -> tuple[ValuesIndices, Tensor, int]:
    """``x`` sorted along ``dim`` (moved last; None: flattened), NaN last; the number of
    non-NaN elements per row ``[..., 1]``; the dim."""
    if not isinstance(x, Tensor) or not dt.is_float(x.dtype):
        raise TypeError(f"{op}: input must be a floating-point gingham Tensor")
    if dim is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = _dim(op, x.shape, dim)
    moved = x.movedim(axis, -1) if x.ndim else x.reshape(1)
    values, order = sort(moved, -1)
    count = (~moved.isnan()).astype(dt.INT64).sum(-1, keepdim=True)
    # The NaNs (sorted last, never picked where a row has a number) as 0: a row of NaNs
    # then interpolates zeros, whose result is replaced by NaN, and its gradient stays 0
    # (the cotangent 0 times a NaN difference would be NaN).
    values = where(values.isnan(), 0.0, values)
    return ValuesIndices(values, order), count, axis


def _pick(ordered: Tensor, position: Tensor) -> Tensor:
    return take_along_dim(ordered, position.clamp(0, ordered.shape[-1] - 1).astype(dt.INT64), -1)


def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear") -> Tensor:
    """The ``q``-quantiles (``q`` in [0, 1]: a number, or a 1-d tensor whose values may be
    computed on the device) of the non-NaN elements along ``dim`` (None: all), as
    ``torch.nanquantile``: the sorted values at ``q * (count - 1)``, interpolated; NaN where
    every element is NaN. A 1-d ``q`` adds a leading dim. Differentiable in ``input``.

        gingham.nanquantile(x, 0.5, dim=1)   # the median of each row, NaNs skipped
    """
    op = "nanquantile"
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, "
                         f"not {interpolation!r}")
    (ordered, _), count, axis = _nan_sorted(op, input, dim)
    if isinstance(q, Tensor):
        fractions = q.astype(input.dtype)
    else:
        q_array = np.asarray(q, np.float64)
        if np.any((q_array < 0) | (q_array > 1)):
            raise ValueError(f"{op}: q must be in [0, 1], not {q}")
        fractions = tensor(q_array.astype(input.dtype), device=input.device)
    if fractions.ndim > 1:
        raise ValueError(f"{op}: q must be a number or 1-d, not of shape {fractions.shape}")
    position = fractions.reshape(-1) * (count.astype(input.dtype) - 1)  # [..., Q]
    low, high = position.floor(), position.ceil()
    low_value, high_value = _pick(ordered, low), _pick(ordered, high)
    if interpolation == "linear":
        value = low_value + (high_value - low_value) * (position - low)
    elif interpolation == "midpoint":
        value = low_value + (high_value - low_value) * 0.5
    else:
        rounded = {"lower": low, "higher": high, "nearest": position.round()}[interpolation]
        value = _pick(ordered, rounded)
    value = where(count == 0, math.nan, value).movedim(-1, 0)  # [Q, ...]
    if keepdim:
        kept = [1] * input.ndim if dim is None else list(input.shape)
        if dim is not None and input.ndim:
            kept[axis] = 1
        value = value.reshape((value.shape[0],) + tuple(kept))
    return value[0] if fractions.ndim == 0 else value


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):  # noqa: A002
    """The lower median of the non-NaN elements (of ``2k`` of them, the ``k``-th smallest;
    NaN where all are NaN), as ``torch.nanmedian``: a 0-d tensor without ``dim``, else
    ``(values, indices)`` along ``dim``, the indices where the values are in ``input`` (of
    a row of NaNs, one of them: which one is not specified)."""
    op = "nanmedian"
    (ordered, order), count, axis = _nan_sorted(op, input, dim)
    middle = where(count > 0, (count - 1) // 2, 0)
    values = where(count == 0, math.nan, _pick(ordered, middle))
    if dim is None:
        return values.reshape(())
    indices = _pick(order, middle)
    if not keepdim:
        return ValuesIndices(values.squeeze(-1), indices.squeeze(-1))
    return ValuesIndices(values.movedim(-1, axis), indices.movedim(-1, axis))


__all__ = ["gather", "take_along_dim", "scatter_add", "scatter", "index_select", "index_add",
           "sort", "argsort", "topk", "getitem_with_tensor", "searchsorted", "bucketize",
           "bincount", "isin", "histc", "unravel_index", "nanquantile", "nanmedian"]
