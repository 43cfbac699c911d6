"""The layout ops: tensors reshaped, permuted, broadcast, sliced, joined, flipped, rotated.

Each is an affine read of its input, one Tile ``=`` write: a reshape is ``builder.reshape``, a
permutation or a broadcast an index map, basic indexing (``x[1:, ::-1]``) a read at
``start + step * i``, a join a shifted write per piece, a triangle a constraint on the write.
So every one fuses into the kernels that read it and differentiates without a rule of its
own. The compositions (flips, rolls, diagonals, stacks) are written with the primitives.

    gingham.flip(x, (0, 1))             # x[::-1, ::-1]
    gingham.cat([a, b], dim=1)
    gingham.tril(scores)                # the lower triangle of the last two dims
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

import numpy as np

from ..tile import builder
from ..tile import dtypes as dt
from .contractions import einsum
from .dims import ShapeError, _axes, _broadcast_shapes, _dim
from .promotion import promote_types
from .strides import elementwise_layout
from .tensor import Tensor, tensor, zeros
from .views import put_affine, record


def _broadcast_to(x: Tensor, sizes: Sequence[int], op: str) -> Tensor:
    """``x`` read at index 0 along the dims of size 1 that grow (an ``=`` write of every cell
    of the result; its gradient sums over them)."""
    sizes = tuple(int(s) for s in sizes)
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ShapeError(f"{op}: {len(sizes)} sizes {sizes} for a tensor of shape {x.shape}; "
                         "give at least one per dim")
    shape = []
    for a, size in enumerate(sizes):
        old = x.shape[a - lead] if a >= lead else None
        if size == -1 and old is not None:
            size = old
        if size < 0 or (old is not None and old != 1 and old != size):
            raise ShapeError(f"{op}: cannot expand shape {x.shape} to {sizes} (dim {a}: only "
                             "a dim of size 1 grows, and -1 keeps an existing dim)")
        shape.append(size)
    shape = tuple(shape)
    if shape == x.shape:
        return x
    idx = builder.indices(" ".join(f"i{a}" for a in range(len(shape))))
    source = tuple(0 if x.shape[d] == 1 != shape[lead + d] else idx[lead + d]
                   for d in range(x.ndim))

    def build(nodes):
        return builder.assign(nodes[0][source] if source else nodes[0][()], out=list(idx),
                              shape=list(shape), where=[i < s for i, s in zip(idx, shape)])

    def derive(base: Tensor) -> Tensor:
        return _view(base._derive(shape, base.dtype, [base], build))

    # Writing the expanded view would write one element of x from several (PyTorch refuses
    # it); new leading dims of size 1 repeat nothing: the view is x reshaped.
    repeats = shape[:lead].count(1) != lead or any(
        x.shape[d] != shape[lead + d] for d in range(x.ndim))
    put = None if repeats else (lambda base, value: reshape(value, base.shape))
    result = record(derive(x), x, derive, put)
    if not repeats and x._layout.dense_rows:  # x with dims of size 1 in front: still dense
        result._layout = result._layout.as_view(dense=True)
    return result


def _view(result: Tensor) -> Tensor:
    """``result``, marked as what PyTorch holds as a view in its input's memory (a transpose,
    an expand, a slice, a diagonal), whose strides ``Tensor.stride()`` cannot tell
    (:class:`gingham.frontend.strides.Layout`)."""
    result._layout = result._layout.as_view()
    return result


def reshape(x: Tensor, shape, op: str = "reshape") -> Tensor:
    """``x``'s elements in row-major order in ``shape``, where one size may be -1 (inferred)."""
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise ShapeError(f"{op}: shape {shape} may hold one -1 and no other negative size")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or x.size % known:
            raise ShapeError(f"{op}: cannot reshape {x.shape} ({x.size} elements) to {shape}")
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if math.prod(shape) != x.size:
        raise ShapeError(f"{op}: cannot reshape {x.shape} ({x.size} elements) to {shape}")
    if shape == x.shape:
        return x

    def derive(base: Tensor) -> Tensor:
        return base._derive(shape, base.dtype, [base],
                            lambda nodes: builder.reshape(nodes[0], *shape), op)

    if op in _ALWAYS_VIEWS or (op in _VIEWS_IF_DENSE and x._layout.reshapes_as_view):
        result = record(derive(x), x, derive, lambda base, value: reshape(value, base.shape))
        if x._layout.view:  # in the same memory as x, at an offset or strides gingham lacks
            result._layout = result._layout.as_view(dense=x._layout.dense)
        return result
    return derive(x)


# The reshapes that PyTorch makes views of their input: always (a view of a tensor laid out
# with gaps is an error in PyTorch, a view here) or where the input is laid out densely,
# as far as gingham knows (Layout.reshapes_as_view; else PyTorch copies). gingham's own
# reshapes (of repeat, roll, ...) give new tensors, as PyTorch's do.
_ALWAYS_VIEWS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "unflatten"})
_VIEWS_IF_DENSE = frozenset({"reshape", "reshape_as", "flatten"})


def permute_dims(x: Tensor, axes: Sequence[int], op: str = "permute_dims") -> Tensor:
    """``x``'s dims in the order ``axes`` (a permutation of them; negative dims count from the
    end): ``permute_dims(x, (0, 2, 3, 1))`` turns NCHW into NHWC."""
    if len(axes) != x.ndim:
        raise ShapeError(f"{op}: {tuple(axes)} names {len(axes)} dims for a tensor of shape "
                         f"{x.shape} ({x.ndim} dims)")
    axes = tuple(_dim(op, x.shape, a) for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"{op}: {axes} is not a permutation of {x.ndim} dims (a dim repeats)")
    if axes == tuple(range(x.ndim)):
        return x
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim)))
    shape = tuple(x.shape[a] for a in axes)
    permuted = [idx[a] for a in axes]

    def derive(base: Tensor) -> Tensor:
        return _view(base._derive(shape, base.dtype, [base], lambda nodes: builder.assign(
            nodes[0][tuple(idx)], out=permuted, shape=list(shape)), op))

    result = record(derive(x), x, derive,
                    lambda base, value: put_affine(base, value, idx, permuted, shape))
    # Moving only dims of size 1 keeps the elements in order: PyTorch's view is dense
    # (a row vector's transpose is a contiguous column).
    moved = [a for a in axes if x.shape[a] > 1]
    if x._layout.dense_rows and moved == sorted(moved):
        result._layout = result._layout.as_view(dense=True)
    return result


def _getitem(x: Tensor, key, view: bool = True) -> Tensor:
    """Basic indexing: integers, slices (any step), None and Ellipsis; an integer tensor or a
    boolean mask on one dim goes to :func:`gingham.frontend.indexing.getitem_with_tensor`.
    The result is a view of ``x`` (:mod:`gingham.frontend.views`) unless ``view`` is false
    (a flip, which PyTorch copies)."""
    keys = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Tensor, np.ndarray, list, bool, np.bool_)) for k in keys):
        from .indexing import getitem_with_tensor

        return getitem_with_tensor(x, keys)
    source_index, out_index, shape = _getitem_plan(x, key)

    def build(nodes):
        where = [v < s for v, s in zip(out_index, shape) if isinstance(v, builder.Index)]
        return builder.assign(nodes[0][tuple(source_index)] if source_index else nodes[0][()],
                              out=out_index, shape=list(shape), where=where)

    def derive(base: Tensor) -> Tensor:
        return _view(base._derive(shape, base.dtype, [base], build))

    if not view:
        # A copy (a flip) laid out as x, as PyTorch's flip preserves its input's layout.
        copied = derive(x)
        copied._layout = elementwise_layout(copied.shape, [(x.shape, x._layout)])
        return copied
    result = record(derive(x), x, derive, lambda base, value: put_affine(
        base, value, source_index, out_index, shape))
    if x._layout.dense_rows and _keeps_rows(x.shape, key):
        result._layout = result._layout.as_view(dense=True)
    return result


def _keeps_rows(shape: tuple[int, ...], key) -> bool:
    """Whether basic indexing ``[key]`` of a tensor laid out densely in row-major order gives
    one dense in PyTorch too (so that ``reshape`` of it is a view): integers on leading dims,
    then one slice of step 1, then whole dims (``x[2]``, ``x[1:3]``, ``x[0, 1:]``; not
    ``x[:, 1:3]``), any dim of size 1 aside.

        _keeps_rows((4, 5), (slice(1, 3),))   # True; (slice(None), 0) gives False
    """
    keys = [k for k in (key if isinstance(key, tuple) else (key,)) if k is not None]
    if any(k is Ellipsis for k in keys):
        position = keys.index(Ellipsis)
        keys[position:position + 1] = [slice(None)] * (len(shape) - len(keys) + 1)
    keys += [slice(None)] * (len(shape) - len(keys))
    ranges = [range(*k.indices(n)) if isinstance(k, slice) else None
              for k, n in zip(keys, shape)]
    if any(r is not None and len(r) == 0 for r in ranges):
        return True  # no element: dense
    sliced = False  # past the first slice: every later dim must be whole
    for kept, size in zip(ranges, shape):
        if size <= 1:
            continue
        if kept is None or len(kept) == 1:  # PyTorch's contiguity skips dims of size 1
            if sliced:
                return False
            continue
        if kept.step != 1 or sliced and len(kept) != size:
            return False
        sliced = True
    return True


def _getitem_plan(x: Tensor, key) -> tuple[list, list, tuple[int, ...]]:
    """What basic indexing ``x[key]`` reads: the index of ``x`` read (per dim of ``x``: a
    position, or ``start + step * i``), the result's index (a Tile index per slice, 0 per
    ``None``) and the result's shape. ``x[key] = v`` writes through the same plan."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        position = key.index(Ellipsis)
        fill = x.ndim - (len(key) - 1 - sum(k is None for k in key))
        key = key[:position] + (slice(None),) * fill + key[position + 1:]
    if sum(k is not None for k in key) > x.ndim:
        raise IndexError(f"too many indices for a tensor of {x.ndim} dimensions: {key!r}")
    key = key + (slice(None),) * (x.ndim - sum(k is not None for k in key))
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim + len(key))))
    source_index, out_index, out_shape = [], [], []
    axis = 0
    fresh = iter(idx)
    for item in key:
        if item is None:
            out_shape.append(1)
            out_index.append(0)
            continue
        size = x.shape[axis]
        if isinstance(item, (int, np.integer)):
            position = int(item) + (size if item < 0 else 0)
            if not 0 <= position < size:
                raise IndexError(f"index {item} is out of bounds for axis {axis} with size {size}")
            source_index.append(position)
        elif isinstance(item, slice):
            start, stop, step = item.indices(size)
            count = len(range(start, stop, step))
            var = next(fresh)
            source_index.append(start + step * var)
            out_index.append(var)
            out_shape.append(count)
        else:
            raise IndexError(f"unsupported index {item!r}; use integers, slices, None or ...")
        axis += 1
    return source_index, out_index, tuple(out_shape)


def _tensor_sequence(op: str, tensors) -> list[Tensor]:
    """The tensors of ``cat``/``stack``: a non-empty sequence of Tensors (``cat(a, b)``, a
    common slip for ``cat([a, b])``, is a ``TypeError`` naming it)."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}: expects a sequence (list or tuple) of tensors, not a Tensor "
                        f"of shape {tensors.shape}; write {op}([a, b], dim)")
    tensors = list(tensors)
    if not tensors:
        raise ShapeError(f"{op}: needs at least one tensor")
    for position, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: tensor {position} is a {type(t).__name__}, not a gingham "
                            "Tensor")
    return tensors


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join along an existing axis (each piece is a shifted ``=`` write into one output), in
    the pieces' promoted dtype."""
    tensors = _tensor_sequence("concat", tensors)
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("concat: 0-d tensors cannot be joined along an axis; use stack")
    axis = _dim("concat", first.shape, axis)
    for position, t in enumerate(tensors[1:], 1):
        if t.ndim != first.ndim:
            raise ShapeError(f"concat: tensors must have the same number of dims: tensor 0 "
                             f"has shape {first.shape}, tensor {position} {t.shape}")
        if any(t.shape[a] != first.shape[a] for a in range(first.ndim) if a != axis):
            raise ShapeError(f"concat: tensor {position} has shape {t.shape} but tensor 0 "
                             f"has {first.shape}; they may differ only along dim {axis}")
    total = sum(t.shape[axis] for t in tensors)
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
    dtype = functools.reduce(promote_types, [t.dtype for t in tensors])  # PyTorch's table
    tensors = [t._in_dtype(dtype) for t in tensors]  # the writes of one output share its type
    idx = builder.indices(" ".join(f"i{a}" for a in range(first.ndim)))
    offsets = list(itertools.accumulate([0] + [t.shape[axis] for t in tensors]))

    def build(nodes):
        result = None
        for node, offset in zip(nodes, offsets):
            out_index = list(idx)
            out_index[axis] = idx[axis] + offset
            result = builder.assign(node[tuple(idx)], out=out_index, shape=list(shape),
                                    default=result)
        return result

    return first._derive(shape, dtype, tensors, build)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """PyTorch's name for :func:`concat`: ``gingham.cat([a, b], dim=1)``."""
    return concat(tensors, dim)


def stack(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """Join along a new dim ``dim`` (NumPy's ``axis=`` too): ``stack([a, b], 1)``."""
    tensors = _tensor_sequence("stack", tensors)
    for position, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack: expects tensors of one shape, but tensor 0 has shape "
                             f"{tensors[0].shape} and tensor {position} {t.shape}")
    position = _dim("stack", tensors[0].shape, dim if axis is None else axis,
                    tensors[0].ndim + 1)
    return concat([t.unsqueeze(position) for t in tensors], position)


def flip(x: Tensor, dims) -> Tensor:
    """``x`` reversed along each of ``dims`` (an int or a sequence), as ``torch.flip``: one
    read at ``size - 1 - i`` per flipped dim.

        gingham.flip(x, (0, 1))        # x[::-1, ::-1]
    """
    axes = _axes("flip", x.shape, dims)
    return _getitem(x, tuple(slice(None, None, -1) if a in axes else slice(None)
                             for a in range(x.ndim)), view=False)


def fliplr(x: Tensor) -> Tensor:
    """``x`` reversed along dim 1 (left to right); ``x`` must be at least 2-d."""
    if x.ndim < 2:
        raise ShapeError(f"fliplr: input must be at least 2-d, not shape {x.shape}")
    return flip(x, 1)


def flipud(x: Tensor) -> Tensor:
    """``x`` reversed along dim 0 (up to down); ``x`` must be at least 1-d."""
    if x.ndim < 1:
        raise ShapeError(f"flipud: input must be at least 1-d, not shape {x.shape}")
    return flip(x, 0)


def roll(x: Tensor, shifts, dims=None) -> Tensor:
    """``x``'s elements shifted by ``shifts`` along ``dims``, those pushed off one end coming
    back at the other, as ``torch.roll`` (without ``dims``: of the flattened tensor, reshaped
    back). Each shift is the concatenation of two slices.

        gingham.roll(x, 1, 0)          # the last row first
    """
    if dims is None:
        if not isinstance(shifts, (int, np.integer)) and len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, not {shifts}")
        step = int(shifts if isinstance(shifts, (int, np.integer)) else shifts[0])
        return roll(x.reshape(-1), step, 0).reshape(x.shape)
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    for step, dim in zip(shifts, dims):
        axis = _dim("roll", x.shape, dim)
        size = x.shape[axis]
        if size == 0 or int(step) % size == 0:
            continue
        cut = size - int(step) % size
        head, tail = x.narrow(axis, 0, cut), x.narrow(axis, cut, size - cut)
        x = concat([tail, head], axis)
    return x


def rot90(x: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """``x`` rotated by ``k`` quarter turns in the plane of ``dims``, from the first dim's
    direction towards the second's, as ``torch.rot90`` (a flip and a transpose)."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise ShapeError(f"rot90: dims must name two dims, not {dims}")
    first, second = (_dim("rot90", x.shape, d) for d in dims)
    if x.ndim < 2 or first == second:
        raise ShapeError(f"rot90: dims {dims} must be two different dims of a tensor with at "
                         f"least 2 dims (shape {x.shape})")
    turns = int(k) % 4
    if turns == 1:
        return flip(x, second).transpose(first, second)
    if turns == 2:
        return flip(x, (first, second))
    if turns == 3:
        return flip(x, first).transpose(first, second)
    return x


def tile_dims(x: Tensor, dims: Sequence[int]) -> Tensor:
    """``torch.tile`` (``x.tile(dims)``; ``gingham.tile`` is the Tile language):
    :meth:`Tensor.repeat`, where fewer ``dims`` than the tensor's dims are padded with ones
    in front (``x.tile((2,))`` repeats the last dim)."""
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    return x.repeat(*((1,) * (x.ndim - len(dims)) + dims))


def repeat_interleave(x: Tensor, repeats: int, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each element repeated ``repeats`` times in place along ``dim`` (of the flattened
    tensor without one), as ``torch.repeat_interleave`` with an integer ``repeats``: a new
    axis after ``dim``, expanded and merged into it.

        gingham.repeat_interleave(kv, 4, dim=1)    # grouped-query attention's heads
    """
    if isinstance(repeats, Tensor) or not isinstance(repeats, (int, np.integer)):
        raise TypeError("repeat_interleave: repeats must be an int (a tensor of counts is "
                        "not supported: the result's shape would depend on its values)")
    if repeats < 0:
        raise ValueError(f"repeat_interleave: repeats must be non-negative, not {repeats}")
    if dim is None:
        x, dim = x.reshape(-1), 0
    axis = _dim("repeat_interleave", x.shape, dim)
    size = x.shape[axis] * int(repeats)
    if output_size is not None and output_size != size:
        raise ValueError(f"repeat_interleave: output_size {output_size} is not the result's "
                         f"size {size} along dim {dim}")
    spread = x.unsqueeze(axis + 1)
    spread = spread.expand(spread.shape[:axis + 1] + (int(repeats),) + spread.shape[axis + 2:])
    return spread.reshape(x.shape[:axis] + (size,) + x.shape[axis + 1:])


def _triangle(x: Tensor, diagonal: int, op: str, lower: bool) -> Tensor:
    """``x`` with the cells off one side of the ``diagonal``-th diagonal of its last two dims
    left unwritten (so zero): one ``=`` write under the constraint ``0 <= i - j + k`` (lower)
    or ``0 <= j - i - k`` (upper). A Tile constraint ``e < bound`` also asks ``0 <= e``, so
    the bound is one no cell reaches."""
    if x.ndim < 2:
        raise ShapeError(f"{op}: input must be at least 2-d, not shape {x.shape}")
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim)))
    row, col = idx[-2], idx[-1]
    k = int(diagonal)
    beyond = x.shape[-2] + x.shape[-1] + abs(k) + 1
    keep = (row - col + k < beyond) if lower else (col - row - k < beyond)

    def build(nodes):
        return builder.assign(nodes[0][tuple(idx)], out=list(idx), shape=list(x.shape),
                              where=[keep])

    return x._derive(x.shape, x.dtype, [x], build)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (cells with ``col - row <= diagonal``), the
    rest zero, as ``torch.tril``.

        scores + gingham.triu(gingham.full((n, n), -math.inf), 1)   # a causal mask
    """
    return _triangle(x, diagonal, "tril", lower=True)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (cells with ``col - row >= diagonal``), the
    rest zero, as ``torch.triu``."""
    return _triangle(x, diagonal, "triu", lower=False)


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The ``offset``-th diagonal of the planes of ``dim1`` and ``dim2`` (above the main one
    for a positive offset), as the last dim, the others kept in order, as
    ``torch.diagonal``: one read ``x[..., i + r, ..., i + c, ...]``."""
    return _diagonal(x, offset, dim1, dim2)


def _diagonal(x: Tensor, offset: int, dim1: int, dim2: int, view: bool = True) -> Tensor:
    """:func:`diagonal`, a view of ``x`` unless ``view`` is false (``diag``, which PyTorch
    copies)."""
    first = _dim("diagonal", x.shape, dim1)
    second = _dim("diagonal", x.shape, dim2)
    if first == second:
        raise ShapeError(f"diagonal: dim1 and dim2 name the same dim {first} (shape {x.shape})")
    row, col = (0, int(offset)) if offset >= 0 else (-int(offset), 0)
    length = max(0, min(x.shape[first] - row, x.shape[second] - col))
    rest = [a for a in range(x.ndim) if a not in (first, second)]
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim - 1)))
    source = [None] * x.ndim
    for a, i in zip(rest, idx):
        source[a] = i
    source[first], source[second] = idx[-1] + row, idx[-1] + col
    shape = tuple(x.shape[a] for a in rest) + (length,)

    def build(nodes):
        return builder.assign(nodes[0][tuple(source)], out=list(idx), shape=list(shape),
                              where=[i < s for i, s in zip(idx, shape)])

    def derive(base: Tensor) -> Tensor:
        return _view(base._derive(shape, base.dtype, [base], build))

    if not view:
        return derive(x)
    return record(derive(x), x, derive,
                  lambda base, value: put_affine(base, value, source, idx, shape))


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """``torch.diag``: of a matrix, its ``diagonal``-th diagonal; of a vector, the square
    matrix with the vector on that diagonal and zeros elsewhere (one ``=`` write to
    ``[i + r, i + c]``)."""
    if x.ndim == 2:
        return _diagonal(x, diagonal, 0, 1, view=False)
    if x.ndim != 1:
        raise ShapeError(f"diag: input must be 1-d or 2-d, not shape {x.shape}")
    n, shift = x.shape[0], abs(int(diagonal))
    row, col = (0, shift) if diagonal >= 0 else (shift, 0)
    (i,) = builder.indices("i")
    shape = (n + shift, n + shift)
    return x._derive(shape, x.dtype, [x], lambda nodes: builder.assign(
        nodes[0][i], out=[i + row, i + col], shape=list(shape)))


def trace(x: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal, as ``torch.trace``."""
    if x.ndim != 2:
        raise ShapeError(f"trace: input must be a matrix, not shape {x.shape}")
    return diagonal(x).sum()


def movedim(x: Tensor, source, destination) -> Tensor:
    """``x`` with the dims ``source`` moved to the positions ``destination`` (ints or
    sequences of the same length), the others keeping their order, as ``torch.movedim``.

        gingham.movedim(x, 1, -1)      # NCHW -> NHWC
    """
    sources = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    destinations = ((destination,) if isinstance(destination, (int, np.integer))
                    else tuple(destination))
    if len(sources) != len(destinations):
        raise ShapeError(f"movedim: source {sources} and destination {destinations} must have "
                         "the same length")
    sources = tuple(_dim("movedim", x.shape, s) for s in sources)
    destinations = tuple(_dim("movedim", x.shape, d) for d in destinations)
    if len(set(sources)) != len(sources) or len(set(destinations)) != len(destinations):
        raise ShapeError(f"movedim: source {sources} and destination {destinations} must not "
                         "repeat a dim")
    order = [a for a in range(x.ndim) if a not in sources]
    for d, s in sorted(zip(destinations, sources)):
        order.insert(d, s)
    return permute_dims(x, order, "movedim")


moveaxis = movedim


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2,  # noqa: A002
               dim2: int = -1) -> Tensor:
    """Matrices whose ``offset`` diagonal holds the last dim of ``input``, in dims ``dim1``
    and ``dim2`` of the result (one dim more than ``input``), as ``torch.diag_embed``: one
    contraction with two constant one-hot matrices.

        gingham.diag_embed(x)        # [B, n] -> [B, n, n]
    """
    n = input.shape[-1] if input.ndim else 1
    m = n + abs(offset)
    rows, cols = np.zeros((n, m), np.float32), np.zeros((n, m), np.float32)
    rows[np.arange(n), np.arange(n) + max(-offset, 0)] = 1
    cols[np.arange(n), np.arange(n) + max(offset, 0)] = 1
    x = input if input.ndim else reshape(input, (1,), "diag_embed")
    picks = [tensor(a, dtype=x.dtype, device=x.device) for a in (rows, cols)]
    embedded = einsum("...k,ki,kj->...ij", x, *picks)
    rank = x.ndim + 1
    first, second = (_dim("diag_embed", (1,) * rank, d) for d in (dim1, dim2))
    if first == second:
        raise ShapeError(f"diag_embed: dim1 and dim2 name the same dim ({dim1}, {dim2})")
    return movedim(embedded, (rank - 2, rank - 1), (first, second))


def block_diag(*tensors: Tensor) -> Tensor:
    """The block-diagonal matrix of ``tensors`` (0-d, 1-d as a row, or 2-d), zeros elsewhere,
    in their promoted dtype, as ``torch.block_diag``."""
    if not tensors:
        raise ValueError("block_diag: needs at least one tensor")
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    for t in blocks:
        if t.ndim != 2:
            raise ShapeError(f"block_diag: inputs must have at most 2 dims, not {t.shape}")
    dtype = functools.reduce(promote_types, [b.dtype for b in blocks])
    width = sum(b.shape[1] for b in blocks)
    rows, before = [], 0
    for b in blocks:
        after = width - before - b.shape[1]
        parts = [zeros((b.shape[0], before), dtype, b.device), b.astype(dtype),
                 zeros((b.shape[0], after), dtype, b.device)]
        rows.append(cat([p for p in parts if p.shape[1]], 1))
        before += b.shape[1]
    return cat(rows, 0)


def cross(a: Tensor, b: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcast), as ``torch.cross``; without
    ``dim``, the first dim of size 3 (``torch.linalg.cross`` uses -1). Component ``i`` is
    ``a[i+1] b[i+2] - a[i+2] b[i+1]``: two rolls of each operand."""
    shape = _broadcast_shapes("cross", [a.shape, b.shape])
    a, b = a.broadcast_to(shape), b.broadcast_to(shape)
    if dim is None:
        if 3 not in shape:
            raise ShapeError(f"cross: no dim of size 3 in shape {shape}")
        dim = shape.index(3)
    axis = _dim("cross", shape, dim)
    if shape[axis] != 3:
        raise ShapeError(f"cross: dim {dim} of shape {shape} must have size 3")
    return roll(a, -1, axis) * roll(b, -2, axis) - roll(a, -2, axis) * roll(b, -1, axis)


def diff(x: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference ``x[i + 1] - x[i]`` along ``dim``, after joining
    ``prepend`` and ``append`` to ``x`` there, as ``torch.diff`` (on bool tensors, ``!=``)."""
    axis = _dim("diff", x.shape, dim)
    pieces = [p for p in (prepend, x, append) if p is not None]
    x = concat(pieces, axis) if len(pieces) > 1 else x
    for _ in range(int(n)):
        size = x.shape[axis]
        later, earlier = x.narrow(axis, 1, max(size - 1, 0)), x.narrow(axis, 0, max(size - 1, 0))
        x = later != earlier if x.dtype == dt.BOOL else later - earlier
    return x


def meshgrid(*tensors: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-d (or 0-d) tensors, as ``torch.meshgrid``: with ``"ij"`` the
    ``k``-th tensor runs along dim ``k``; ``"xy"`` swaps the first two dims (NumPy's default).

        ys, xs = gingham.meshgrid(gingham.arange(h), gingham.arange(w), indexing="ij")
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', not {indexing!r}")
    if any(t.ndim > 1 for t in tensors):
        raise ShapeError(f"meshgrid: expects 0-d or 1-d tensors, not shapes "
                         f"{[t.shape for t in tensors]}")
    vectors = [t.reshape(-1) for t in tensors]
    order = list(range(len(vectors)))
    if indexing == "xy" and len(vectors) >= 2:
        order[0], order[1] = 1, 0
    shape = [0] * len(vectors)
    for axis, k in enumerate(order):
        shape[axis] = vectors[k].shape[0]
    grids = []
    for k, v in enumerate(vectors):
        axis = order.index(k)
        ones = [1] * len(vectors)
        ones[axis] = v.shape[0]
        grids.append(v.reshape(tuple(ones)).expand(tuple(shape)))
    return tuple(grids)


def atleast_1d(x: Tensor) -> Tensor:
    return x.reshape(1) if x.ndim == 0 else x


def atleast_2d(x: Tensor) -> Tensor:
    return x.reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


def atleast_3d(x: Tensor) -> Tensor:
    """``torch.atleast_3d``: ``[n] -> [1, n, 1]``, ``[m, n] -> [m, n, 1]`` (NumPy's rule)."""
    if x.ndim == 0:
        return x.reshape(1, 1, 1)
    if x.ndim == 1:
        return x.reshape(1, x.shape[0], 1)
    return x.unsqueeze(-1) if x.ndim == 2 else x


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Joined along dim 1 (dim 0 for vectors), as ``torch.hstack``."""
    pieces = [atleast_1d(t) for t in tensors]
    return concat(pieces, 0 if pieces and pieces[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Joined along dim 0, vectors as rows, as ``torch.vstack``."""
    return concat([atleast_2d(t) for t in tensors], 0)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Joined along dim 2 after :func:`atleast_3d`, as ``torch.dstack``."""
    return concat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Vectors (and 0-d tensors) as columns, joined with the matrices along dim 1, as
    ``torch.column_stack``."""
    return concat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1)
