"""Dims and shapes as arguments of tensor operations: checked, normalised, broadcast.

PyTorch's conventions for them, shared by every operation of :mod:`gingham.frontend.tensor`
and the modules built on it: negative dims count from the end (and a 0-d tensor takes dims 0
and -1), ``dim`` may be an int, a sequence or None (every dim), shapes come as varargs or one
sequence. Bad arguments raise the errors defined here, which name the operation and the
shapes; nothing here needs a Tensor.

    _dim("sum", (2, 3), -1)             # 1
    _axes("amax", (2, 3, 4), (0, -1))   # (0, 2)
    _broadcast_shapes("add", [(2, 1), (3,)])   # (2, 3)
"""

from __future__ import annotations

import numpy as np

from ..errors import GinghamError


class ShapeError(GinghamError, ValueError, RuntimeError):
    """Operands whose shapes or dtypes do not fit an operation (the message names both).

    A ``ValueError``, as NumPy and Keras raise for these, and a ``RuntimeError``, as PyTorch
    does (``mat1 and mat2 shapes cannot be multiplied``), so code written for either catches
    it: ``except RuntimeError`` around a PyTorch training step keeps working on gingham."""


class DTypeError(ShapeError, TypeError):
    """An operand whose dtype does not fit an op (a float op given integers, mixed dtypes)."""


class DimError(ShapeError, IndexError):
    """A ``dim`` out of range for a tensor's rank: an ``IndexError``, as PyTorch raises, and a
    :class:`ShapeError` like gingham's other shape errors."""


class IndexRangeError(ShapeError, IndexError):
    """An index value outside the size it indexes: a class target of ``cross_entropy``, an
    ``embedding`` id, a ``gather`` index. An ``IndexError``, as PyTorch raises for most of
    these (a ``RuntimeError`` for the rest, which a :class:`ShapeError` is too). Found where
    the values are known on the host (``Tensor._known_range``), never by reading the device."""


def _dim(op: str, shape: tuple[int, ...], dim, rank: int | None = None) -> int:
    """``dim`` of a tensor of ``shape`` counted from 0 (negative dims count from the end); a
    0-d tensor takes dims 0 and -1, as PyTorch's. ``rank`` is the number of dims to choose
    among when it is not ``len(shape)`` (``unsqueeze``: one more)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, not {type(dim).__name__}")
    span = max(len(shape) if rank is None else rank, 1)
    if not -span <= dim < span:
        raise DimError(f"{op}: dim {dim} is out of range for a tensor of shape {shape} "
                       f"(expected {-span} to {span - 1})")
    return int(dim) % span


def _axes(op: str, shape: tuple[int, ...], axis) -> tuple[int, ...]:
    """The sorted dims an ``axis``/``dim`` argument names: an int, a sequence, or None (all)."""
    if axis is None:
        return tuple(range(len(shape)))
    dims = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = {_dim(op, shape, d) for d in dims}
    if len(normalized) != len(dims):
        raise ShapeError(f"{op}: dim {tuple(dims)} names a dim twice (shape {shape})")
    return tuple(sorted(normalized)) if shape else ()


def _dim_arguments(op: str, dim, keepdim: bool, axis, keepdims) -> tuple:
    """PyTorch's ``dim``/``keepdim`` or their NumPy aliases ``axis``/``keepdims``."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{op}: got both dim and axis")
        dim = axis
    return dim, bool(keepdim if keepdims is None else keepdims)


def _none_if_empty(dim):
    """PyTorch's ``amax(dim=())``: an empty dim list means every dim."""
    return None if isinstance(dim, (tuple, list)) and not dim else dim


def _varargs(sizes: tuple) -> tuple:
    """``f(2, 3)`` or ``f((2, 3))`` (PyTorch's shape arguments take both)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


def _sizes(op: str, sizes) -> tuple[int, ...]:
    """A shape given to a creation op (``zeros``, ``randn``, ``full``, ``eye``): ints
    (``TypeError``, as PyTorch's, naming the op) that are not negative (:class:`ShapeError`,
    PyTorch's ``Trying to create tensor with negative dimension``).

        _sizes("zeros", (2, 3))     # (2, 3)
    """
    sizes = tuple(sizes)
    for s in sizes:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}(): sizes must be ints, not {type(s).__name__} (in {sizes})")
    if any(s < 0 for s in sizes):
        raise ShapeError(f"{op}(): sizes must be non-negative, not {sizes}")
    return tuple(int(s) for s in sizes)


def _broadcast_shapes(name: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(
            f"{name}: shapes {', '.join(str(s) for s in shapes)} do not broadcast together"
        ) from None


class memory_format:  # noqa: N801  (torch.memory_format's name)
    """A PyTorch memory format: ``gingham.channels_last``, ``gingham.contiguous_format``, ...

    gingham's tensors have no strides: the compiler chooses each kernel's layout itself
    (channels-last on CPUs, see ``data_format``), so a format changes no value and no
    shape. Functions take one (``x.to(memory_format=gingham.channels_last)``,
    ``model.to(memory_format=...)``, ``x.contiguous(memory_format=...)``) so PyTorch code
    runs as written, and check it as PyTorch does: a 4-d tensor for ``channels_last``, a 5-d
    one for ``channels_last_3d``. A tensor remembers the strides PyTorch would have given it,
    so that ``is_contiguous(memory_format=...)`` answers as PyTorch's
    (:mod:`gingham.frontend.strides`).
    """

    def __init__(self, name: str, rank: int | None) -> None:
        self.name, self.rank = name, rank

    def __repr__(self) -> str:
        return f"gingham.{self.name}"

    def __reduce__(self) -> str:  # pickled (a checkpoint's argument) as the module's constant
        return self.name


contiguous_format = memory_format("contiguous_format", None)
preserve_format = memory_format("preserve_format", None)
channels_last = memory_format("channels_last", 4)
channels_last_3d = memory_format("channels_last_3d", 5)


def _as_memory_format(op: str, fmt) -> memory_format:
    """``fmt`` checked to be a memory format (PyTorch's TypeError); ``None`` is
    ``preserve_format``."""
    if fmt is None:
        return preserve_format
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}: memory_format must be a gingham.memory_format (such as "
                        f"gingham.channels_last), not {type(fmt).__name__}")
    return fmt


def _memory_format(op: str, fmt, ndim: int) -> memory_format:
    """``fmt`` checked to be a memory format a tensor of ``ndim`` dims can take (PyTorch's
    TypeError and rank check); ``None`` is ``preserve_format``."""
    fmt = _as_memory_format(op, fmt)
    if fmt.rank is not None and fmt.rank != ndim:
        raise ShapeError(f"{op}: required rank {fmt.rank} tensor to use {fmt.name} format, "
                         f"not a {ndim}-d one")
    return fmt
