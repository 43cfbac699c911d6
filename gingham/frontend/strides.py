"""A tensor's layout as PyTorch would have it, tracked so that ``is_contiguous``, ``stride()``,
``contiguous()`` and ``reshape`` answer as there: one record per tensor, :class:`Layout`.

gingham's tensors have no strides: the compiler picks every kernel's layout. But PyTorch code
asks about layouts (``x.is_contiguous(memory_format=torch.channels_last)`` after
``x.to(memory_format=torch.channels_last)``, ``x.stride()``), so a tensor carries, in
``Tensor._layout``, what gingham knows of the memory PyTorch would have given it:

* ``strides``, in elements: ``None`` for row-major ones (every tensor, until a memory format
  is asked for), else a tuple;
* ``view``: PyTorch would hold the tensor as a view of another's memory (a transpose, expand,
  slice, diagonal, or a result computed from one), whose real strides depend on that memory,
  which gingham does not track: ``stride()`` refuses it and ``contiguous()`` copies it;
* ``dense``: such a view that PyTorch lays out densely in row-major order (``x[0]``,
  ``x[1:3]`` of a dense ``x``), so that a ``reshape`` of it is a view there too.

One record, because these answer one question, "what would PyTorch's memory for this tensor
look like", at three levels of knowledge: known strides, a view of unknown strides, a dense
view. ``strides`` of a view are still what gingham's rules give (as if the view were a new
tensor), which ``is_contiguous`` answers from. The layout changes no value and no kernel.
Where it comes from:

* ``contiguous``, ``to``, ``clone`` and ``Module.to`` with a ``memory_format``, and the
  ``*_like`` constructors (PyTorch's ``preserve_format``: :func:`made_like`), as PyTorch's;
* elementwise ops (:meth:`gingham.Tensor._elementwise`): the layout PyTorch's TensorIterator
  picks from the operands' strides, a view where an operand is one
  (:func:`elementwise_layout`);
* the image ops that keep their input's layout in PyTorch (convolutions, batch and group
  norm, pools, interpolation, padding, dropout): :func:`keeps_layout`; the ones gingham
  composes of elementwise ops but PyTorch makes row-major (softmax, layer and instance norm):
  :func:`row_major_result`;
* the views of :mod:`gingham.frontend.layout` (:meth:`Layout.as_view`);
* ``detach``, ``.data``, ``nn.Parameter`` and ``copy.deepcopy`` keep the whole layout (the
  same memory in PyTorch, or a copy of it with its strides and offset); ``gingham.jit``
  traces an argument with its own layout (part of the signature) and gives a replay's
  outputs the traced ones.

Anything else (reductions, matmuls, reshapes that copy) gives row-major strides, so
``x.t().is_contiguous()`` is True here (the transpose is a new tensor) where PyTorch says
False; ``x.t().stride()`` is refused rather than answered wrongly. The answers, all
PyTorch's, are pure functions of a shape and strides:

    strides = format_strides((2, 3, 4, 5), channels_last)       # (60, 1, 15, 3)
    is_contiguous_in((2, 3, 4, 5), strides, channels_last)      # True
    is_contiguous_in((2, 3, 4, 5), strides, contiguous_format)  # False
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Sequence

from .dims import (channels_last, channels_last_3d, contiguous_format, memory_format,
                   preserve_format)

Strides = tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Layout:
    """What gingham knows of the memory PyTorch would give a tensor (see the module
    docstring): ``strides`` (None: row-major), whether it is a ``view`` of another's memory,
    of strides gingham cannot tell, and whether that view is ``dense`` in row-major order.
    Frozen, so that tensors share records; every tensor starts with :data:`ROW_MAJOR`.

        x._layout = x._layout.with_strides(format_strides(x.shape, channels_last))
        x.t()._layout                 # Layout(strides=None, view=True, dense=False)
    """

    strides: Strides | None = None
    view: bool = False
    dense: bool = False

    def with_strides(self, strides: Strides | None) -> "Layout":
        """This layout with ``strides`` (a tensor re-laid out keeps being a view or not)."""
        return self if strides == self.strides else dataclasses.replace(self, strides=strides)

    def as_view(self, dense: bool = False) -> "Layout":
        """This layout, marked as a view of another tensor's memory (``dense``: laid out
        densely in row-major order there)."""
        return dataclasses.replace(self, view=True, dense=dense)

    def owned(self) -> "Layout":
        """The layout of a copy with these strides, in memory of its own: not a view."""
        return self if not self.view else Layout(self.strides)

    @property
    def reshapes_as_view(self) -> bool:
        """Whether PyTorch's ``reshape``/``flatten`` of the tensor is a view of it (rather
        than a copy): where it is laid out densely, as far as gingham knows."""
        return not self.view or self.dense

    @property
    def dense_rows(self) -> bool:
        """Whether the tensor is laid out densely in row-major order in PyTorch, so that
        basic indexing that keeps whole rows gives a dense view of it."""
        return self.dense or not (self.view or self.strides is not None)


#: The layout of every tensor until something says otherwise: row-major, its own memory.
ROW_MAJOR = Layout()


def row_major(shape: Sequence[int]) -> Strides:
    """PyTorch's contiguous strides: a dim of size 0 counts as 1 (``contiguous_strides``)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _innermost_first(fmt: memory_format) -> tuple[int, ...]:
    """The dims of a channels-last format from the innermost: C, then W, H (, D), then N."""
    return (1, *range(fmt.rank - 1, 1, -1), 0)


def format_strides(shape: Sequence[int], fmt: memory_format) -> Strides:
    """The strides of a new tensor of ``shape`` in ``fmt`` (PyTorch's ``empty(..., memory_
    format=fmt)``; channels-last strides multiply sizes of 0 as they are, as PyTorch's)."""
    if fmt.rank is None:
        return row_major(shape)
    strides, step = [0] * len(shape), 1
    for d in _innermost_first(fmt):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def is_contiguous_in(shape: Sequence[int], strides: Strides | None,
                     fmt: memory_format) -> bool:
    """PyTorch's ``is_contiguous(memory_format=fmt)``: the dims of size other than 1, from
    the innermost in ``fmt``'s order, have the strides of a dense tensor (an empty tensor is
    contiguous in the default format; a channels-last format needs its rank)."""
    if strides is None:
        strides = row_major(shape)
    if fmt.rank is None:
        if math.prod(shape) == 0:
            return True
        order: Sequence[int] = range(len(shape) - 1, -1, -1)
    elif len(shape) != fmt.rank:
        return False
    else:
        order = _innermost_first(fmt)
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def _strides_like(shape: Sequence[int], strides: Strides, fmt: memory_format) -> bool:
    """PyTorch's ``is_channels_last_strides_2d_s4`` (and ``_3d_s5``): strides that order the
    dims as ``fmt`` does, ambiguous cases (a channel stride of 0, ``N111``) not counted."""
    if len(shape) != fmt.rank or strides[1] == 0:
        return False
    least = 0
    for d in _innermost_first(fmt):
        if shape[d] == 0 or strides[d] < least or (d == 0 and least == strides[1]):
            return False
        least = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggested_format(shape: Sequence[int], strides: Strides | None) -> memory_format | None:
    """PyTorch's ``suggest_memory_format``: the channels-last format whose order the strides
    follow, else None (contiguous)."""
    if strides is None:
        return None
    for fmt in (channels_last, channels_last_3d):
        if _strides_like(shape, strides, fmt):
            return fmt
    return None


def normalised(shape: Sequence[int], strides: Strides | None) -> Strides | None:
    """``strides``, or None when they are the row-major ones (the default, kept as None so
    that the common case costs nothing)."""
    return None if strides is None or tuple(strides) == row_major(shape) else tuple(strides)


def elementwise_strides(shape: Sequence[int],
                        operands: Sequence[tuple[Sequence[int], Strides | None]],
                        with_numbers: bool = False) -> Strides | None:
    """The strides of an elementwise op's result of ``shape`` from its tensor operands'
    ``(shape, strides)``, as PyTorch's TensorIterator lays it out: the dims are sorted by the
    operands' strides, the first operand that orders two dims deciding (a broadcast dim has
    no say; equal strides put the smaller dim inside), and the result is dense in that order.
    ``with_numbers``: a Python number is an operand too (``x * 2``), which in PyTorch is a
    0-d tensor and so rules out the fast set-up for operands of one shape.

        elementwise_strides((2, 3, 4, 5), [((2, 3, 4, 5), (60, 1, 15, 3)), ((3, 1, 1), None)])
        # (60, 1, 15, 3): x_channels_last + bias keeps channels-last
    """
    if all(strides is None for _, strides in operands):
        return None
    shape = tuple(shape)
    ndim = len(shape)
    if not with_numbers and all(tuple(own_shape) == shape for own_shape, _ in operands):
        # TensorIterator's fast set-up: operands all contiguous, or all channels-last, or all
        # of the same (dense: gingham tracks no views) strides
        for fmt in (contiguous_format, channels_last, channels_last_3d):
            if all(is_contiguous_in(shape, strides, fmt) for _, strides in operands):
                return normalised(shape, format_strides(shape, fmt))
        if len({strides for _, strides in operands}) == 1:
            return normalised(shape, operands[0][1])
    aligned = []  # each operand's strides over the result's dims, 0 where it broadcasts
    for own_shape, strides in operands:
        strides = row_major(own_shape) if strides is None else strides
        lead = ndim - len(own_shape)
        aligned.append([0 if d < lead or (own_shape[d - lead] == 1 and shape[d] != 1)
                        else strides[d - lead] for d in range(ndim)])

    def should_swap(dim0: int, dim1: int) -> int:
        for strides in aligned:
            stride0, stride1 = strides[dim0], strides[dim1]
            if stride0 == 0 or stride1 == 0:
                continue
            if stride0 != stride1:
                return 1 if stride0 > stride1 else -1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    # TensorIterator's insertion sort of the dims, innermost first (reorder_dimensions)
    permutation = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(permutation[dim0], permutation[dim1])
            if comparison > 0:
                permutation[dim0], permutation[dim1] = permutation[dim1], permutation[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    if permutation == list(range(ndim - 1, -1, -1)):
        return None
    strides, step = [0] * ndim, 1
    for d in permutation:  # dense in that order (compatible_stride: sizes as they are)
        strides[d] = step
        step *= shape[d]
    return normalised(shape, strides)


def elementwise_layout(shape: Sequence[int],
                       operands: Sequence[tuple[Sequence[int], Layout]],
                       with_numbers: bool = False) -> Layout:
    """The layout of an elementwise op's result of ``shape`` from its tensor operands'
    ``(shape, layout)``: :func:`elementwise_strides`, and a view where an operand is one
    (PyTorch's elementwise results keep a view input's layout, which gingham cannot tell),
    unless that view is dense in row-major order (a row, a leading slice: its result is
    contiguous, as ``randn``'s, which is computed from the rows of one uniform draw).

        elementwise_layout((3, 2), [((3, 2), x.t()._layout)])   # a view: stride() refuses
    """
    view = any(layout.view and not layout.dense for _, layout in operands)
    if not view and all(layout.strides is None for _, layout in operands):
        return ROW_MAJOR  # the common case, at the cost of one scan
    strides = elementwise_strides(shape, [(own_shape, layout.strides)
                                          for own_shape, layout in operands], with_numbers)
    return Layout(strides, view)


def relaid(shape: Sequence[int], strides: Strides | None,
           fmt: memory_format) -> tuple[bool, Strides | None]:
    """What PyTorch's ``to(memory_format=fmt)`` does to a tensor of ``shape`` and
    ``strides``: whether it copies (the layout it suggests is not ``fmt``) and the strides
    after it (the copy's are ``fmt``'s).

        relaid((2, 3, 4, 5), None, channels_last)     # (True, (60, 1, 15, 3))
    """
    if fmt is preserve_format or suggested_format(shape, strides) is (
            None if fmt.rank is None else fmt):
        return False, strides
    return True, normalised(shape, format_strides(shape, fmt))


def made_like(shape: Sequence[int], strides: Strides | None,
              fmt: memory_format) -> Strides | None:
    """The strides of a ``*_like`` constructor's result (``zeros_like``, ``randn_like``):
    its input's, under PyTorch's default ``preserve_format``, else ``fmt``'s."""
    return strides if fmt is preserve_format else normalised(shape, format_strides(shape, fmt))


def keeps_layout(function: Callable | None = None, *, weight: bool = False) -> Callable:
    """Give ``function``'s result (each tensor of it of its input's rank) its input's layout,
    as PyTorch's image ops keep a channels-last one; with ``weight``, a channels-last
    ``weight`` (the second argument) does too, as for PyTorch's convolutions.

        @keeps_layout
        def max_pool2d(input, kernel_size, ...): ...
    """
    if function is None:
        return functools.partial(keeps_layout, weight=weight)

    @functools.wraps(function)
    def apply(input, *args, **kwargs):
        result = function(input, *args, **kwargs)
        fmt = suggested_format(input.shape, input._layout.strides)
        if fmt is None and weight:
            kernel = kwargs["weight"] if "weight" in kwargs else args[0]
            kernel_strides = kernel._layout.strides
            # a weight that is contiguous too (a 1x1 kernel) leaves PyTorch's output so
            if not is_contiguous_in(kernel.shape, kernel_strides, contiguous_format):
                fmt = suggested_format(kernel.shape, kernel_strides)
        if fmt is not None:
            for value in result if isinstance(result, tuple) else (result,):
                if value is not input and getattr(value, "ndim", None) == input.ndim == fmt.rank:
                    value._layout = value._layout.with_strides(
                        normalised(value.shape, format_strides(value.shape, fmt)))
        return result

    return apply


def row_major_result(function: Callable) -> Callable:
    """Give ``function``'s result row-major strides, as PyTorch's op of that name has (a
    softmax, a layer norm of a channels-last tensor) where gingham composes it of
    elementwise ops, which would keep the input's layout."""
    @functools.wraps(function)
    def apply(*args, **kwargs):
        result = function(*args, **kwargs)
        for value in result if isinstance(result, tuple) else (result,):
            layout = getattr(value, "_layout", ROW_MAJOR)
            if layout.strides is not None and not any(
                    value is argument for argument in args):  # an input keeps its own
                value._layout = layout.with_strides(None)
        return result

    return apply
