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

An index outside ``[0, size)`` raises :class:`IndexRangeError` (an ``IndexError``) where its
values are known on the host: an index made by ``gingham.tensor`` (a batch of labels, a list
of positions), whose least and greatest values were read as it was copied in
(``Tensor._known_range``), or the argument of a ``gingham.jit`` step, checked at every call
against the values passed. A computed index (an ``argmax``) is not checked, since that would
read the device and stall the step: it selects nothing, so ``gather`` and ``index_select``
give 0 there and ``scatter_add``, ``scatter`` and ``index_add`` drop the update. ``x[idx]``,
``take`` and ``take_along_dim`` count a negative index from the end, as PyTorch's; the other
functions do not (PyTorch refuses one).

Results whose shape depends on the values (``x[mask]``, ``masked_select``, ``nonzero``,
``argwhere``, ``where(condition)``, ``unique``, ``unique_consecutive``) read the mask or the
values from the device once, as PyTorch synchronises for them, and gather on the device: so
they run eagerly, not inside ``gingham.jit``.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

from ..errors import DeviceError
from ..tile import builder
from ..tile import dtypes as dt
from .tensor import (
    DTypeError,
    IndexRangeError,
    ShapeError,
    Tensor,
    ValuesIndices,
    _broadcast_shapes,
    _broadcast_to,
    _dim,
    arange,
    movedim,
    permute_dims,
    tensor,
    where,
    zeros,
)

# -- checks ----------------------------------------------------------------------------------------


def _check_index(op: str, index, name: str = "index") -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: {name} must be a gingham Tensor of integers, not "
                        f"{type(index).__name__}")
    if not dt.is_integer(index.dtype):
        raise DTypeError(f"{op}: {name} must hold integers, not {dt.dtype_name(index.dtype)}")
    return index


def _check_range(op: str, index: Tensor, size: int, place: str, *, name: str = "index",
                 negative: bool = False, ignore: int | None = None) -> None:
    """Refuse an ``index`` holding a value outside ``[0, size)`` (``[-size, size)`` where
    ``negative`` values count from the end), ``ignore`` (an ``ignore_index``) excepted, where
    its least and greatest values are known on the host (``Tensor._known_range``). An
    argument of a step being traced by ``gingham.jit`` is checked at every call instead,
    against the values it is called with; any other computed index goes unchecked rather
    than read from the device. ``place`` says what ``size`` measures, for the message.

        _check_range("gather", idx, 4, "dim 1 with size 4 (input shape (3, 4))")
    """
    def refuse_outside(known: tuple[int, int]) -> None:
        least = -size if negative else 0
        for value in known:
            if value != ignore and not least <= value < size:
                valid = f"{least} to {size - 1}" if size else "none: the size is 0"
                valid += f", or the ignored {ignore}" if ignore is not None else ""
                raise IndexRangeError(f"{op}: {name} {value} is out of bounds for {place} "
                                      f"(valid: {valid})")

    index = _value_source(index)
    known = index._known_range()
    if known is not None:
        refuse_outside(known)
    elif index._placeholder:
        from .jit import current_trace

        trace = current_trace()
        if trace is not None:
            trace.index_checks.append((index, refuse_outside))


# Ops whose result holds exactly the values of their one operand, rearranged or cast (a cast
# keeps integer labels' least and greatest): an index made through them is checked as its
# source (``y.view(-1)``, ``labels.long()``, Keras' labels cast to float and back).
_SAME_VALUES = frozenset({"view", "reshape", "squeeze", "unsqueeze", "flatten", "ravel",
                          "astype", "clone", "permute", "permute_dims"})


def _value_source(index: Tensor) -> Tensor:
    """The tensor whose values ``index`` holds, through :data:`_SAME_VALUES` ops, stopping
    at one whose range the host knows or an argument of a traced step."""
    while (index._known_range() is None and not index._placeholder
           and index._op in _SAME_VALUES and len(index._parents) == 1):
        index = index._parents[0]
    return index


def _along(axis: int, x: Tensor) -> str:
    """The ``place`` of :func:`_check_range` for an index along ``axis`` of ``x``."""
    return f"dim {axis} with size {x.shape[axis]} (input shape {x.shape})"


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
    _check_range(op, index, input.shape[axis], _along(axis, input))
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
    _check_range(op, indices, size, _along(axis, input), name="indices", negative=True)
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
    _check_range(op, index, input.shape[axis], _along(axis, input))
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
    _check_range(op, index, input.shape[axis], _along(axis, input))
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
    if input.ndim:
        _check_range(op, index, input.shape[axis], _along(axis, input))
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
    axis, spread = _index_spread("index_add", input, dim, index, source)
    if alpha != 1:
        source = source * alpha
    return scatter_add(input, axis, spread, source)


def _index_spread(op: str, input: Tensor, dim: int, index: Tensor,  # noqa: A002
                  source) -> tuple[int, Tensor]:
    """The axis of ``dim`` and the 1-d ``index`` broadcast to ``source``'s shape (the
    input's, with the index's length along ``dim``), so that an index_* op whose slices
    move whole is the scatter_* op of one element per index."""
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    if index.ndim > 1:
        raise ShapeError(f"{op}: index must be 1-d (or 0-d), not of shape {index.shape}")
    _check_range(op, index, input.shape[axis], _along(axis, input))
    index = index.reshape(-1)
    expected = input.shape[:axis] + (index.shape[0],) + input.shape[axis + 1:]
    if not isinstance(source, Tensor) or source.shape != expected:
        shape = source.shape if isinstance(source, Tensor) else type(source).__name__
        raise ShapeError(f"{op}: source must have shape {expected} (the input's, with the "
                         f"index's length along dim {dim}), not {shape}")
    spread = (1,) * axis + index.shape + (1,) * (input.ndim - axis - 1)
    return axis, _broadcast_to(index.reshape(spread), expected, op)


# -- x[idx] ----------------------------------------------------------------------------------------


def _is_tensor_index(item) -> bool:
    """A Tensor, ndarray or list, or a Python bool (a 0-d mask, as in PyTorch: ``x[True]``
    adds a dim, where an ``int`` would select)."""
    return isinstance(item, (Tensor, np.ndarray, list, bool, np.bool_))


def getitem_with_tensor(x: Tensor, key: tuple) -> Tensor:
    """``x[key]`` where one entry of ``key`` is an integer Tensor, ndarray or list: the other
    entries index as usual, then :func:`index_select`'s row gather takes the slices that the
    index names along its dim; the index's dims replace that dim. An integer elsewhere in
    ``key`` removes its dim first, as PyTorch does (``x[0, :, idx]`` of ``[A, B, C]`` is
    ``[B, *idx.shape]``, where NumPy would put the index's dims in front). A boolean entry
    goes to :func:`_getitem_with_mask`."""
    from .tensor import _getitem

    positions = [p for p, item in enumerate(key) if _is_tensor_index(item)]
    if len(positions) > 1:
        raise IndexError("indexing with more than one integer tensor is not supported; index "
                         "one dim at a time (x[i][:, j]) or use gingham.gather")
    (position,) = positions
    index = key[position]
    kind = np.dtype(index.dtype if isinstance(index, Tensor) else np.asarray(index).dtype)
    if kind == np.uint8:
        warnings.warn("indexing with a uint8 tensor reads it as a boolean mask (PyTorch's "
                      "deprecated rule); use .bool() for a mask or .long() for positions",
                      UserWarning, stacklevel=4)
    if kind in (np.bool_, np.uint8):
        return _getitem_with_mask(x, key, position, index)
    basic = key[:position] + (slice(None),) + key[position + 1:]
    sliced = _getitem(x, basic)
    axis = _result_dim(basic, position, x.ndim)
    size = sliced.shape[axis]
    if isinstance(index, Tensor):
        index = _check_index("index", index)
        _check_range("__getitem__", index, size, f"dim {axis} with size {size} (shape "
                     f"{sliced.shape})", negative=True)
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


def _getitem_with_mask(x: Tensor, key: tuple, position: int, mask) -> Tensor:
    """``x[key]`` where ``key[position]`` is a boolean mask (a Tensor, ndarray, list or Python
    bool) over ``k`` consecutive dims: those dims become one, holding the slices where the
    mask is True in row-major order, as PyTorch's ``x[mask]`` (``x[mask]`` with
    ``mask.shape == x.shape[:k]`` is ``[count, *x.shape[k:]]``; a 0-d mask adds a dim of 1 or
    0). The positions come from one read of the mask (a byte per element) on the host; the
    slices are then gathered on the device, so the result is differentiable in ``x``.

        x[x > 0]                  # the positive elements, 1-d
        images[labels == 3]       # the rows of one class
    """
    from .tensor import _getitem

    if isinstance(mask, Tensor):
        _check_same_device("x[mask]", x, mask)
        value = _read_outside_trace("x[mask] (a boolean mask as an index)", mask,
                                    _KEEP_THE_SHAPE)
    else:
        value = np.asarray(mask)
    value = value.astype(bool, copy=False)  # a uint8 mask: nonzero is True
    k = value.ndim
    # a 0-d mask indexes a new dim of 1 (None), k > 0 dims are read whole, then joined
    basic = key[:position] + ((slice(None),) * k if k else (None,)) + key[position + 1:]
    sliced = _getitem(x, basic)
    axis = _result_dim(basic, position, x.ndim)
    span = max(k, 1)
    for d, (size, masked) in enumerate(zip(sliced.shape[axis:axis + k], value.shape)):
        if size != masked:  # a mask does not broadcast (PyTorch's rule)
            raise IndexError(f"the shape of the mask {list(value.shape)} does not match the "
                             f"shape of the indexed tensor {list(sliced.shape)} at dim "
                             f"{axis + d} ({masked} and {size})")
    joined = sliced.reshape(sliced.shape[:axis] + (math.prod(sliced.shape[axis:axis + span]),)
                            + sliced.shape[axis + span:])
    positions = tensor(np.flatnonzero(value).astype(np.int64), device=x.device)
    return _take_slices(joined, axis, positions)


def _result_dim(basic: tuple, position: int, ndim: int) -> int:
    """The dim of ``x[basic]`` that ``basic[position]`` (a slice or None) gives: one per entry
    before it that keeps or adds a dim."""
    expanded = _expand_ellipsis(basic, ndim)
    if Ellipsis in basic[:position]:
        position += len(expanded) - len(basic)
    return sum(1 for item in expanded[:position] if not isinstance(item, (int, np.integer)))


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


class HistogramResult(NamedTuple):
    """What :func:`histogram` returns, as ``torch.return_types.histogram``."""

    hist: Tensor
    bin_edges: Tensor


class HistogramddResult(NamedTuple):
    """What :func:`histogramdd` returns, as ``torch.return_types.histogramdd``: one tensor of
    edges per dimension of the points."""

    hist: Tensor
    bin_edges: tuple[Tensor, ...]


def _bin_edges(op: str, column: Tensor, bins, span, dim: int) -> Tensor:
    """The increasing edges of dimension ``dim``'s bins: ``bins`` itself when a tensor, else
    ``bins + 1`` equal steps over ``span`` (the column's least and greatest values when None,
    computed on the device); an empty span is widened by 0.5 either side, as torch does."""
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.shape[0] < 2:
            raise ShapeError(f"{op}: a bins tensor must be 1-d with at least two edges (one "
                             f"bin), not of shape {bins.shape} (dimension {dim})")
        if bins.dtype != column.dtype:
            raise DTypeError(f"{op}: bins tensor is {dt.dtype_name(bins.dtype)} but the input "
                             f"is {dt.dtype_name(column.dtype)}; they must have one dtype")
        return bins
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise TypeError(f"{op}: bins must be an int or a 1-d tensor of edges, not "
                        f"{type(bins).__name__}")
    if bins <= 0:
        raise ValueError(f"{op}: bins must be > 0, but got {bins} for dimension {dim}")
    if span is None:
        low, high = column.amin(), column.amax()
        same = low == high
        low, high = where(same, low - 0.5, low), where(same, high + 0.5, high)
    else:
        left, right = float(span[0]), float(span[1])
        if not (math.isfinite(left) and math.isfinite(right)):
            raise ValueError(f"{op}: dimension {dim}'s range [{left}, {right}] is not finite")
        if left > right:
            raise ValueError(f"{op}: min should not exceed max, but got min {left} max "
                             f"{right} for dimension {dim}")
        if left == right:
            left, right = left - 0.5, right + 0.5
        low, high = (tensor(np.asarray(v, column.dtype), device=column.device)
                     for v in (left, right))
    # torch's linspace: the second half counted back from the end, so both ends are exact
    positions = arange(bins + 1, device=column.device).astype(column.dtype)
    step = (high - low) / bins
    return where(positions < (bins + 1) // 2, low + step * positions,
                 high - step * (bins - positions))


def _bin_positions(column: Tensor, edges: Tensor) -> Tensor:
    """Each value's bin among ``edges`` (``edges[k] <= x < edges[k + 1]``, the last edge in
    the last bin, as torch), -1 outside them or NaN."""
    count = edges.shape[0] - 1
    first, last = edges[0], edges[-1]
    position = searchsorted(edges, column, right=True) - 1
    position = where(column == last, count - 1, position)
    return where((column >= first) & (column <= last), position, -1)


def _histogram(op: str, points: Tensor, bins: list, spans: list, weight: Tensor | None,
               density: bool) -> HistogramddResult:
    """The histogram of the rows of ``points`` ``[N, D]``: each row's bin per dimension, one
    flat bin number, then :func:`bincount`'s one-hot sum over all ``prod(bins)`` cells."""
    if not isinstance(points, Tensor) or not dt.is_float(points.dtype):
        raise TypeError(f"{op}: input must be a floating-point gingham Tensor")
    if weight is not None and weight.dtype != points.dtype:
        raise DTypeError(f"{op}: weight is {dt.dtype_name(weight.dtype)} but the input is "
                         f"{dt.dtype_name(points.dtype)}; they must have one dtype")
    edges = [_bin_edges(op, points[:, k], b, span, k)
             for k, (b, span) in enumerate(zip(bins, spans))]
    sizes = tuple(e.shape[0] - 1 for e in edges)
    flat, inside = None, None
    for k, (size, e) in enumerate(zip(sizes, edges)):
        position = _bin_positions(points[:, k], e)
        flat = position if flat is None else flat * size + position
        inside = position >= 0 if inside is None else inside & (position >= 0)
    cell = where(inside, flat, -1)
    hist = _one_hot_sum(cell, math.prod(sizes), weight, points.dtype).reshape(sizes)
    if density:
        volume = None
        for k, e in enumerate(edges):
            width = (e[1:] - e[:-1]).reshape((1,) * k + (-1,) + (1,) * (len(edges) - k - 1))
            volume = width if volume is None else volume * width
        hist = hist / (hist.sum() * volume)
    return HistogramddResult(hist, tuple(edges))


def histogramdd(input: Tensor, bins, *, range=None, weight: Tensor | None = None,  # noqa: A002
                density: bool = False) -> HistogramddResult:
    """The histogram of the points ``input[..., D]`` (its last dim the coordinates), as
    ``torch.histogramdd``: ``bins`` an int (each dimension), a list of ``D`` ints, or a list of
    ``D`` 1-d tensors of increasing edges; ``range`` ``[min_0, max_0, min_1, ...]`` for int
    bins (default each dimension's least and greatest value); ``weight`` (shaped as ``input``
    without its last dim) summed instead of ones; ``density`` divides by the total and the
    cell volumes. Points outside the edges are not counted; the last edge is inside.
    Differentiable in ``weight`` (torch's is not).

        hist, (x_edges, y_edges) = gingham.histogramdd(points, [4, 3])
    """
    op = "histogramdd"
    if not isinstance(input, Tensor) or input.ndim < 2:
        shape = input.shape if isinstance(input, Tensor) else type(input).__name__
        raise ShapeError(f"{op}: input must be a tensor of at least 2 dims (points along its "
                         f"last dim), not {shape}")
    count = input.shape[-1]
    per_dim = [bins] * count if isinstance(bins, (int, np.integer)) else list(bins)
    if len(per_dim) != count:
        raise ValueError(f"{op}: bins must give one entry per dimension of the points "
                         f"({count}), not {len(per_dim)}")
    if range is None:
        spans = [None] * count
    else:
        if any(isinstance(b, Tensor) for b in per_dim):
            raise TypeError(f"{op}: range applies to int bins, not to tensors of edges")
        if len(range) != 2 * count:
            raise ValueError(f"{op}: range must hold 2 numbers per dimension ({2 * count}), "
                             f"not {len(range)}")
        spans = list(zip(range[0::2], range[1::2]))
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.shape != input.shape[:-1]:
            shape = weight.shape if isinstance(weight, Tensor) else type(weight).__name__
            raise ShapeError(f"{op}: weight must have the input's shape without its last dim "
                             f"{input.shape[:-1]}, not {shape}")
        weight = weight.reshape(-1)
    return _histogram(op, input.reshape(-1, count), per_dim, spans, weight, density)


def histogram(input: Tensor, bins=100, *, range=None,  # noqa: A002 (PyTorch's names)
              weight: Tensor | None = None, density: bool = False) -> HistogramResult:
    """``(hist, bin_edges)``: the histogram of all of ``input``'s elements, as
    ``torch.histogram``: ``bins`` equal bins over ``range`` (default the least and greatest
    element, computed on the device) or a 1-d tensor of increasing edges; ``weight`` (shaped
    as ``input``) summed instead of ones; ``density`` divides by the total and the bin widths.
    Elements outside the edges are not counted; the last edge belongs to the last bin.

        hist, edges = gingham.histogram(x, 10, range=(0.0, 1.0))
    """
    op = "histogram"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a gingham Tensor, not {type(input).__name__}")
    if range is not None and isinstance(bins, Tensor):
        raise TypeError(f"{op}: range applies to an int bins, not to a tensor of edges")
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.shape != input.shape:
            shape = weight.shape if isinstance(weight, Tensor) else type(weight).__name__
            raise ShapeError(f"{op}: weight must have the input's shape {input.shape}, not "
                             f"{shape}")
        weight = weight.reshape(-1)
    hist, edges = _histogram(op, input.reshape(-1, 1), [bins], [range], weight, density)
    return HistogramResult(hist, edges[0])


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


# -- order statistics: kthvalue, median, mode, quantile (on sort) ------------------------------------


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:  # noqa: A002
    """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (``k`` from 1),
    as ``torch.kthvalue``; of equal elements the first position (PyTorch may name another).

        values, where = gingham.kthvalue(x, 2, dim=1)
    """
    x, axis = _sortable("kthvalue", input, dim)
    if not 1 <= k <= x.shape[axis]:
        raise ShapeError(f"kthvalue: k={k} is out of range for dim {dim} of size "
                         f"{x.shape[axis]} (shape {input.shape})")
    values, indices = _restore("kthvalue", input, sort(x, axis))
    if input.ndim == 0:
        return ValuesIndices(values, indices)
    values, indices = values.select(axis, k - 1), indices.select(axis, k - 1)
    if keepdim:
        values, indices = values.unsqueeze(axis), indices.unsqueeze(axis)
    return ValuesIndices(values, indices)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False):  # noqa: A002
    """The lower median along ``dim`` (the ``(n - 1) // 2``-th smallest, not the mean of the
    two middle ones), ``(values, indices)`` with ``dim``, the value alone without, as
    ``torch.median``. A NaN sorts as the largest value here (PyTorch returns NaN)."""
    if dim is None:
        flat = input.reshape(-1)
        return kthvalue(flat, (flat.shape[0] - 1) // 2 + 1, 0).values
    size = input.shape[_dim("median", input.shape, dim)] if input.ndim else 1
    return kthvalue(input, (size - 1) // 2 + 1, dim, keepdim)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:  # noqa: A002
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest of equally
    frequent ones) and its last position, as ``torch.mode``; each element's count is one
    ``n x n`` comparison per fiber. The gradient reaches the returned position."""
    x, axis = _sortable("mode", input, dim)
    counts = (x.unsqueeze(axis) == x.unsqueeze(axis + 1)).astype(dt.INT32).sum(axis)
    frequent = counts == counts.amax(axis, keepdim=True)
    smallest = where(frequent, x, x.amax(axis, keepdim=True)).amin(axis, keepdim=True)
    n = x.shape[axis]
    position = arange(n, device=x.device).reshape((1,) * axis + (n,) + (1,) * (x.ndim - axis - 1))
    indices = where(x == smallest, position, -1).amax(axis, keepdim=True)
    values = gather(x, axis, indices)._in_dtype(input.dtype)
    if input.ndim == 0:
        return ValuesIndices(values.reshape(()), indices.reshape(()))
    if not keepdim:
        values, indices = values.squeeze(axis), indices.squeeze(axis)
    return ValuesIndices(values, indices)


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


def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles along ``dim`` (of all elements when None), as ``torch.quantile``:
    ``q`` a number in ``[0, 1]`` or a 1-d sequence/tensor of them (its dim comes first in the
    result), between sorted neighbours by ``interpolation``. The positions depend on ``q``
    only, so a tensor ``q`` is read from the device once.

        gingham.quantile(x, [0.25, 0.5, 0.75], dim=1)
    """
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"quantile: interpolation must be one of {_INTERPOLATIONS}, not "
                         f"{interpolation!r}")
    if not dt.is_float(input.dtype):
        raise DTypeError(f"quantile: input must be a floating-point tensor, not "
                         f"{dt.dtype_name(input.dtype)}")
    qs = np.asarray(q.numpy() if isinstance(q, Tensor) else q, np.float64)
    if qs.ndim > 1 or np.any((qs < 0) | (qs > 1)):
        raise ValueError(f"quantile: q must be a number or a 1-d list in [0, 1], not {q!r}")
    x = input.reshape(-1) if dim is None else input
    axis = 0 if dim is None else _dim("quantile", x.shape, dim)
    ordered = sort(x, axis).values
    n = x.shape[axis]
    results = []
    for fraction in qs.reshape(-1):
        rank = fraction * (n - 1)
        low, high = int(np.floor(rank)), int(np.ceil(rank))
        below, above = ordered.select(axis, low), ordered.select(axis, high)
        if interpolation == "lower" or (interpolation == "nearest" and np.round(rank) == low):
            value = below
        elif interpolation in ("higher", "nearest"):
            value = above
        elif interpolation == "midpoint":
            value = (below + above) * 0.5
        else:
            value = below + (above - below) * float(rank - low)
        if keepdim:
            value = value.reshape((1,) * input.ndim) if dim is None else value.unsqueeze(axis)
        results.append(value)
    if qs.ndim == 0:
        return results[0]
    from .tensor import stack

    return stack(results, 0)


# -- writes into a copy: index_fill, index_copy, index_put, scatter_reduce, *_scatter --------------


def _index_mask(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """A bool tensor, 1 along every dim but ``axis``, True at the positions ``index`` names."""
    n = x.shape[axis]
    hits = index_add(zeros((n,), dt.INT32, x.device), 0, index.reshape(-1),
                     tensor(np.ones(index.numel(), np.int32), device=x.device))
    return (hits > 0).reshape((1,) * axis + (n,) + (1,) * (x.ndim - axis - 1))


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:  # noqa: A002
    """``input`` with ``value`` in the slices along ``dim`` that ``index`` names, as
    ``torch.index_fill`` (out of place)."""
    axis = _dim("index_fill", input.shape, dim)
    _check_index("index_fill", index)
    _check_range("index_fill", index, input.shape[axis], _along(axis, input))
    return input.masked_fill(_index_mask(input, axis, index), value)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """``input`` with ``source``'s slices along ``dim`` written at the positions of the 1-d
    ``index``, as ``torch.index_copy`` (out of place; differentiable in both)."""
    axis = _dim("index_copy", input.shape, dim)
    _check_index("index_copy", index)
    placed = index_add(zeros(input.shape, source.dtype, input.device), axis, index, source)
    return where(_index_mask(input, axis, index), placed, input)._in_dtype(input.dtype)


def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """``input`` with ``values`` written (or added, ``accumulate``) at ``input[indices]``,
    ``indices`` a tuple of integer tensors for the leading dims (broadcast together), as
    ``torch.index_put`` (out of place)."""
    indices = tuple(indices)
    if not indices or len(indices) > input.ndim:
        raise ShapeError(f"index_put: needs 1 to {input.ndim} index tensors, not "
                         f"{len(indices)}")
    for axis, index in enumerate(indices):
        _check_index("index_put", index, "indices")
        _check_range("index_put", index, input.shape[axis], _along(axis, input),
                     name="indices", negative=True)
    lead, rest = input.shape[:len(indices)], input.shape[len(indices):]
    shape = _broadcast_shapes("index_put", [i.shape for i in indices])
    linear = None
    for index, size in zip(indices, lead):
        wrapped = where(index < 0, index + size, index).astype(dt.INT64)
        linear = wrapped if linear is None else linear * size + wrapped
    linear = _broadcast_to(linear, shape, "index_put").reshape(-1)
    if not isinstance(values, Tensor):
        values = tensor(np.asarray(values, input.dtype), device=input.device)
    values = _broadcast_to(values, shape + rest, "index_put").reshape((-1,) + rest)
    flat = input.reshape((int(np.prod(lead)),) + rest)
    if accumulate:
        result = index_add(flat, 0, linear, values.astype(input.dtype))
    else:
        result = index_copy(flat, 0, linear, values)
    return result.reshape(input.shape)


_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor,  # noqa: A002
                   reduce: str, *, include_self: bool = True) -> Tensor:
    """``input`` with ``src[.., i, ..]`` combined by ``reduce`` (``"sum"``, ``"prod"``,
    ``"mean"``, ``"amax"``, ``"amin"``) into ``[.., index[.., i, ..], ..]`` along ``dim``,
    with or without ``input``'s own value, as ``torch.scatter_reduce``; cells nobody writes
    keep ``input``'s. One ``len(index) x size`` comparison per fiber (as :func:`gather`);
    here ``index`` must match ``input`` in every dim but ``dim``.

        totals = gingham.scatter_reduce(zeros, 0, group, x, "amax", include_self=False)
    """
    op = "scatter_reduce"
    if reduce not in _SCATTER_REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {_SCATTER_REDUCTIONS}, not {reduce!r}")
    axis = _dim(op, input.shape, dim)
    _check_index(op, index)
    _check_range(op, index, input.shape[axis], _along(axis, input))
    others = [d for d in range(input.ndim) if d != axis]
    if index.ndim != input.ndim or any(index.shape[d] != input.shape[d] for d in others):
        raise ShapeError(f"{op}: index of shape {index.shape} must match input {input.shape} "
                         f"in every dim but {dim}")
    if any(src.shape[d] < index.shape[d] for d in range(index.ndim)):
        raise ShapeError(f"{op}: src of shape {src.shape} is smaller than index {index.shape}")
    src = src[tuple(slice(0, s) for s in index.shape)].astype(input.dtype)
    n = input.shape[axis]
    position = arange(n, device=input.device).reshape(
        (1,) * (axis + 1) + (n,) + (1,) * (input.ndim - axis - 1))
    hit = index.unsqueeze(axis + 1) == position   # [.., i, j, ..]
    values = src.unsqueeze(axis + 1)
    count = hit.astype(dt.INT32).sum(axis)
    if reduce in ("sum", "mean"):
        combined = where(hit, values, 0).sum(axis)._in_dtype(input.dtype)
        if include_self:
            combined = combined + input
        if reduce == "mean":
            combined = combined / (count + int(include_self)).clamp(min=1)
    elif reduce == "prod":
        combined = where(hit, values, 1).prod(axis)._in_dtype(input.dtype)
        combined = combined * input if include_self else combined
    else:
        neutral = _lowest(input.dtype) if reduce == "amax" else -_lowest(input.dtype)
        combined = getattr(where(hit, values, neutral), reduce)(axis)
        if include_self:
            combined = combined.maximum(input) if reduce == "amax" else combined.minimum(input)
    return where(count > 0, combined, input)._in_dtype(input.dtype)


_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor,  # noqa: A002
                 reduce: str, *, include_self: bool = True) -> Tensor:
    """``input`` with ``source``'s slices along ``dim`` combined by ``reduce`` (``"prod"``,
    ``"mean"``, ``"amax"``, ``"amin"``) into the slices that the 1-d ``index`` names, with or
    without ``input``'s own value, as ``torch.index_reduce``; slices nobody names keep
    ``input``'s. :func:`scatter_reduce` with the index spread over each slice, as
    :func:`index_add` is :func:`scatter_add`. Differentiable in ``input`` and ``source``;
    of tied extremes (``"amax"``/``"amin"``) one takes the gradient, as in gingham's ``amax``,
    where PyTorch splits it among them.

        peaks = gingham.index_reduce(floor, 0, rows, x, "amax", include_self=False)
    """
    op = "index_reduce"
    if reduce not in _INDEX_REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {_INDEX_REDUCTIONS}, not {reduce!r}")
    axis, spread = _index_spread(op, input, dim, index, source)
    if source.dtype != input.dtype:
        raise DTypeError(f"{op}: source is {dt.dtype_name(source.dtype)} but the input is "
                         f"{dt.dtype_name(input.dtype)}; they must have one dtype")
    return scatter_reduce(input, axis, spread, source, reduce, include_self=include_self)


def _lowest(dtype: np.dtype) -> float:
    return -math.inf if dt.is_float(dtype) else int(np.iinfo(dtype).min + 1)


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,  # noqa: A002
                  end: int | None = None, step: int = 1) -> Tensor:
    """``input`` with ``src`` written into ``input[.., start:end:step, ..]`` along ``dim``."""
    axis = _dim("slice_scatter", input.shape, dim)
    positions = np.arange(input.shape[axis])[slice(start, end, step)]
    return index_copy(input, axis, tensor(positions.astype(np.int64), device=input.device), src)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """``input`` with ``src`` written into ``input.select(dim, index)``."""
    axis = _dim("select_scatter", input.shape, dim)
    position = index + input.shape[axis] if index < 0 else index
    return index_copy(input, axis, tensor(np.array([position], np.int64), device=input.device),
                      src.unsqueeze(axis))


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,  # noqa: A002
                     dim2: int = 1) -> Tensor:
    """``input`` with ``src`` written into ``input.diagonal(offset, dim1, dim2)``: the two
    dims flattened to one, where the diagonal is every ``cols + 1``-th element."""
    first = _dim("diagonal_scatter", input.shape, dim1)
    second = _dim("diagonal_scatter", input.shape, dim2)
    moved = movedim(input, (first, second), (-2, -1))
    rows, cols = moved.shape[-2:]
    row = np.arange(max(-offset, 0), rows)
    row = row[row + offset < cols]
    positions = tensor((row * cols + row + offset).astype(np.int64), device=input.device)
    flat = moved.reshape(moved.shape[:-2] + (rows * cols,))
    written = index_copy(flat, flat.ndim - 1, positions, src)
    return movedim(written.reshape(moved.shape), (-2, -1), (first, second))


def take(input: Tensor, index: Tensor) -> Tensor:  # noqa: A002
    """``input``'s elements at the flat positions ``index`` (negative from the end), shaped as
    ``index``, as ``torch.take``."""
    _check_index("take", index)
    flat = input.reshape(-1)
    _check_range("take", index, flat.shape[0], f"an input of {flat.shape[0]} elements "
                 f"(shape {input.shape})", negative=True)
    wrapped = where(index < 0, index + flat.shape[0], index).reshape(-1)
    return index_select(flat, 0, wrapped).reshape(index.shape)


def put(input: Tensor, index: Tensor, source: Tensor,  # noqa: A002
        accumulate: bool = False) -> Tensor:
    """``input`` with ``source``'s elements written (or added, ``accumulate``) at the flat
    positions ``index`` (negative from the end), as ``torch.put`` (out of place): the inverse
    of :func:`take`, :func:`index_put` on the flattened input. Where an index repeats without
    ``accumulate``, one of the writes wins. Differentiable in ``input`` and ``source``.

        gingham.put(x, gingham.tensor([0, -1]), gingham.tensor([9.0, 8.0]))  # first, last
    """
    op = "put"
    _check_index(op, index)
    if not isinstance(source, Tensor):
        raise TypeError(f"{op}: source must be a gingham Tensor, not {type(source).__name__}")
    if source.numel() != index.numel():
        raise ShapeError(f"{op}: source and index must have as many elements, not "
                         f"{source.numel()} and {index.numel()}")
    if source.dtype != input.dtype:
        raise DTypeError(f"{op}: source is {dt.dtype_name(source.dtype)} but the input is "
                         f"{dt.dtype_name(input.dtype)}; they must have one dtype")
    flat = index_put(input.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(input.shape)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """``input`` with ``source``'s elements, in order, at the True positions of ``mask``
    (broadcast to ``input``), as ``torch.masked_scatter``: the k-th True reads ``source``'s
    k-th element, k from a running count of the mask (computed on the device)."""
    if not dt.is_bool(mask.dtype):
        raise DTypeError(f"masked_scatter: mask must be a bool tensor, not "
                         f"{dt.dtype_name(mask.dtype)}")
    mask = _broadcast_to(mask, input.shape, "masked_scatter")
    order = mask.reshape(-1).astype(dt.INT64).cumsum(0) - 1
    picked = take(source, where(order < 0, 0, order)).reshape(input.shape)
    return where(mask, picked, input)._in_dtype(input.dtype)


# -- results whose shape depends on the values: computed outside compiled steps ---------------------
#
# PyTorch computes these with a device-to-host synchronisation; so does gingham, in eager mode:
# the mask (or the values) is read once, the positions are found with NumPy, and the selection
# is gathered back on the device (so ``x[mask]`` stays differentiable in ``x``). A traced step
# has fixed shapes, so there each of them is an error that names a fixed-shape alternative.

_KEEP_THE_SHAPE = ("use gingham.where(mask, x, 0) or x.masked_fill(~mask, 0) to keep the "
                   "shape")
_POSITIONS_ADVICE = ("use gingham.where(condition, x, 0) to keep the shape, or "
                     "count_nonzero for the count")
_UNIQUE_ADVICE = "use gingham.sort (equal values become neighbours) to keep the shape"


def _read_outside_trace(op: str, x: Tensor, advice: str) -> np.ndarray:
    """``x``'s value on the host (one copy from the device), refused inside
    :func:`gingham.jit` because ``op``'s result would take its shape from it."""
    from .jit import current_trace

    if current_trace() is not None:
        raise NotImplementedError(
            f"{op} inside gingham.jit: its result's shape depends on the values, which a "
            f"compiled program cannot have; {advice}, or call it outside the traced function")
    return x.numpy()


def _check_same_device(op: str, x: Tensor, mask: Tensor) -> None:
    if mask.device != x.device:
        raise DeviceError(f"{op}: the mask is on {mask.device} but the tensor is on "
                          f"{x.device}; move one with .to(device)")


def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    """The 1-d tensor of ``input``'s elements where ``mask`` (broadcast together) is True, in
    row-major order, as ``torch.masked_select``. The count depends on the values, so the mask
    is read from the device (an error inside ``gingham.jit``); the selection is gathered on
    the device and differentiable in ``input``.

        gingham.masked_select(x, x > 0)      # x[x > 0] for an x of the mask's shape
    """
    op = "masked_select"
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}: mask must be a gingham Tensor, not {type(mask).__name__}")
    if not dt.is_bool(mask.dtype):
        raise DTypeError(f"{op}: mask must be a bool tensor, not {dt.dtype_name(mask.dtype)}")
    _check_same_device(op, input, mask)
    shape = _broadcast_shapes(op, [input.shape, mask.shape])
    value = _read_outside_trace(op, mask, _KEEP_THE_SHAPE)
    positions = np.flatnonzero(np.broadcast_to(value, shape)).astype(np.int64)
    flat = _broadcast_to(input, shape, op).reshape(-1)
    return index_select(flat, 0, tensor(positions, device=input.device))


def _nonzero(op: str, input: Tensor, as_tuple: bool):  # noqa: A002
    # a non-bool input is compared on the device, so one byte per element is read back
    mask = input if dt.is_bool(input.dtype) else input != 0
    value = _read_outside_trace(op, mask, _POSITIONS_ADVICE)
    count = int(np.count_nonzero(value))
    coordinates = np.argwhere(value).astype(np.int64).reshape(count, input.ndim)
    if not as_tuple:
        return tensor(coordinates, device=input.device)
    if input.ndim == 0:  # PyTorch treats a 0-d input as 1-d here
        return (tensor(np.zeros(count, np.int64), device=input.device),)
    return tuple(tensor(np.ascontiguousarray(c), device=input.device) for c in coordinates.T)


def nonzero(input: Tensor, *, as_tuple: bool = False):  # noqa: A002
    """The int64 coordinates of the nonzero elements in row-major order, ``[count, ndim]``
    (``as_tuple``: one 1-d tensor per dim), as ``torch.nonzero``. The count depends on the
    values, so they are read from the device (an error inside ``gingham.jit``).

        rows, cols = gingham.nonzero(adjacency, as_tuple=True)
    """
    return _nonzero("nonzero", input, as_tuple)


def argwhere(input: Tensor) -> Tensor:  # noqa: A002
    """``nonzero(input)``: the ``[count, ndim]`` int64 coordinates of the nonzero elements, as
    ``torch.argwhere``."""
    return _nonzero("argwhere", input, False)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None):
    """The sorted distinct values (or slices along ``dim``), with the int64 inverse (each
    element's position in the result, shaped as ``input``, or ``[input.shape[dim]]``) and
    counts when asked, as ``torch.unique``: NaN equals nothing, so each NaN is kept (with
    ``dim``, PyTorch's order of slices holding NaN is its sort's accident; here NaN sorts
    last). The values are read from the device (an error inside ``gingham.jit``); no
    gradient, as PyTorch's. ``sorted=False`` sorts as well (as PyTorch's CPU kernel does).

        values, counts = gingham.unique(labels, return_counts=True)
    """
    axis = 0 if dim is None else _dim("unique", input.shape, dim)
    value = _read_outside_trace("unique", input, _UNIQUE_ADVICE)
    moved, rows = _rows_along(value, axis, dim is None)
    # lexicographic, the first column most significant (lexsort's last key); NaN last
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(rows.shape[0])
    starts, counts = _runs(rows[order])
    inverse = np.empty(rows.shape[0], np.int64)
    inverse[order] = np.cumsum(starts) - 1
    kept = np.moveaxis(moved[order][starts], 0, axis)
    inverse = inverse.reshape(value.shape) if dim is None else inverse
    return _host_results(input, kept, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False,  # noqa: A002
                       return_counts: bool = False, dim: int | None = None):
    """Each run of equal consecutive values (or slices along ``dim``) once, with the int64
    inverse and run lengths when asked, as ``torch.unique_consecutive`` (read from the device;
    an error inside ``gingham.jit``).

        gingham.unique_consecutive(gingham.tensor([1, 1, 2, 1]))  # [1, 2, 1]
    """
    axis = 0 if dim is None else _dim("unique_consecutive", input.shape, dim)
    value = _read_outside_trace("unique_consecutive", input, _UNIQUE_ADVICE)
    moved, rows = _rows_along(value, axis, dim is None)
    starts, counts = _runs(rows)
    inverse = np.cumsum(starts) - 1
    kept = np.moveaxis(moved[starts], 0, axis)
    inverse = inverse.reshape(value.shape) if dim is None else inverse
    return _host_results(input, kept, inverse, counts, return_inverse, return_counts)


def _rows_along(value: np.ndarray, axis: int, flat: bool) -> tuple[np.ndarray, np.ndarray]:
    """``value`` with ``axis`` first (every element, if ``flat``), and as a 2-d table with
    one row per position along it: what unique and unique_consecutive compare."""
    if not flat and any(size == 0 for d, size in enumerate(value.shape) if d != axis):
        raise ShapeError(f"unique: the input of shape {value.shape} has 0-sized dims other "
                         f"than dim {axis}, so its slices along that dim cannot be compared "
                         "(as PyTorch)")
    moved = np.moveaxis(value.reshape(-1) if flat else value, axis, 0)
    return moved, moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))


def _runs(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row starts a run of equal rows (NaN != NaN, so NaNs never merge, as in
    PyTorch), and each run's length."""
    starts = np.ones(rows.shape[0], bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    return starts, np.diff(np.append(np.flatnonzero(starts), rows.shape[0]))


def _host_results(input: Tensor, values, inverse, counts, return_inverse: bool,  # noqa: A002
                  return_counts: bool):
    result = [tensor(values.astype(input.dtype), device=input.device)]
    if return_inverse:
        result.append(tensor(inverse.astype(np.int64), device=input.device))
    if return_counts:
        result.append(tensor(counts.astype(np.int64), device=input.device))
    return result[0] if len(result) == 1 else tuple(result)


__all__ = ["gather", "take_along_dim", "scatter_add", "scatter", "index_select", "index_add",
           "sort", "argsort", "topk", "getitem_with_tensor", "searchsorted", "bucketize",
           "bincount", "isin", "histc", "unravel_index", "nanquantile", "nanmedian", "kthvalue",
           "median", "mode", "quantile", "index_fill", "index_copy", "index_put",
           "scatter_reduce", "slice_scatter", "select_scatter", "diagonal_scatter", "take",
           "masked_scatter", "masked_select", "nonzero", "argwhere", "unique", "unique_consecutive",
           "index_reduce", "put", "histogram", "histogramdd", "HistogramResult",
           "HistogramddResult"]
