"""``gingham.Tensor``: lazy, device-resident arrays with NumPy-style operators and autograd.

Operations do not run when called: each builds a node of a Tile program (the Python form,
:mod:`gingham.tile.builder`). When a value is needed (``.numpy()``, ``.realize()``), the graph
from the already-computed tensors to the wanted ones becomes one Tile program, which is compiled
(fused, scheduled, cached) and run on the tensors' device. Gradients come from the Tile
autodiff of the whole graph, so every operation is differentiable without a hand-written rule.

    x = gingham.tensor(np.random.rand(64, 32), device="cpu", requires_grad=True)
    w = gingham.tensor(np.random.rand(32, 10), device="cpu", requires_grad=True)
    loss = ((x @ w).relu() ** 2).mean()
    loss.backward()            # one compiled gradient program
    w.grad.numpy()
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
from typing import Callable, Iterable, Sequence, Union

import numpy as np

from .. import tile
from ..errors import DeviceError, GinghamError
from ..lru import LRU
from ..tile import builder
from ..tile import dtypes as dt
from ..tile.shapes import ExprType, combine

Scalar = Union[int, float, bool]


class _GradMode(threading.local):
    """Each thread's stack of :func:`no_grad` blocks (thread-local, as PyTorch's grad mode is:
    a tuner thread building a layer's gradients must not see the training thread's blocks)."""

    def __init__(self) -> None:
        self.enabled = [True]


_grad_mode = _GradMode()

# Program -> tile.Function, so identical graphs compile once (the most recently used kept).
_functions: LRU = LRU(512)


class ShapeError(GinghamError, ValueError):
    """Operands whose shapes or dtypes do not fit an operation (the message names both)."""


def is_grad_enabled() -> bool:
    """False inside a :func:`no_grad` block: new tensors do not require gradients there."""
    return _grad_mode.enabled[-1]


@contextlib.contextmanager
def no_grad():
    """Inside this block new tensors do not require gradients."""
    _grad_mode.enabled.append(False)
    try:
        yield
    finally:
        _grad_mode.enabled.pop()


class Tensor:
    """A lazily computed array on a device. See the module docstring."""

    __array_priority__ = 100  # numpy scalars defer to Tensor's operators

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, device: str, *,
                 buffer=None, parents: Sequence["Tensor"] = (),
                 build: Callable[[list], builder.Tensor] | None = None,
                 requires_grad: bool = False) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.device = device
        self._buffer = buffer
        self._parents = tuple(parents)
        self._build = build
        self.requires_grad = requires_grad
        self.grad: Tensor | None = None
        # A leaf's value changes only through assign(), which bumps its version; a lazy tensor
        # remembers the versions it was computed from, so it can never read a newer value.
        self._version = 0
        self._parent_versions = tuple(p._version for p in self._parents)
        self._placeholder = False  # an argument of a function being traced by gingham.jit
        self._backward_roots: list[Tensor] = []

    # -- basic properties ------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_leaf(self) -> bool:
        return not self._parents

    def __repr__(self) -> str:
        state = "" if self._buffer is not None else ", lazy"
        return (f"Tensor(shape={self.shape}, dtype={dt.dtype_name(self.dtype)}, "
                f"device={self.device!r}{state})")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- realising ---------------------------------------------------------------------------------
    def realize(self) -> "Tensor":
        """Compute this tensor's value on its device (a no-op when it is already computed)."""
        if self._buffer is None:
            realize([self])
        return self

    def assign(self, value: "Tensor") -> None:
        """Make this leaf hold ``value`` (same shape and dtype): how optimisers update
        parameters. Inside ``gingham.jit`` the update becomes an output of the traced step."""
        assign_all([(self, value)])

    def numpy(self) -> np.ndarray:
        """The value as a NumPy array (copies from the device)."""
        from ..devices import get_device

        self.realize()
        result = np.empty(self.shape, dtype=self.dtype)
        if result.size:
            get_device(self.device).copy_out(self._buffer, result)
        return result

    def item(self):
        if self.size != 1:
            raise ShapeError(f"item() needs a tensor with one element, not shape {self.shape}")
        return self.numpy().reshape(()).item()

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __array__(self, dtype=None, copy=None):
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def to(self, *args, device=None, dtype=None, non_blocking: bool = False,
           copy: bool = False) -> "Tensor":
        """This tensor on another device and/or as another dtype, in PyTorch's forms:
        ``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other_tensor)`` and the
        keywords ``device=``/``dtype=``. A dtype is a NumPy dtype or a Tile type name
        (``"bfloat16"``); a device is an id (``"cpu"``, ``"cuda:0"``).

        As in PyTorch it returns a new tensor, or ``self`` when nothing changes (unless
        ``copy``). A dtype change on the same device is :meth:`astype` (lazy; gradients flow
        through it). A move to another device copies the value through the host into a new
        leaf, requiring gradients as this one does; inside ``gingham.jit``'s tracing that is
        an error. ``non_blocking`` is accepted and ignored (copies are synchronous). To move
        a tensor itself, keeping its identity, see :meth:`gingham.nn.Module.to`.

            half = x.to("float16")                  # x.astype("float16")
            y = x.to("cpu", np.float16)             # a float16 leaf on the cpu device
        """
        from ..devices import get_device

        target_device, target_dtype = placement(args, device, dtype)
        target_dtype = self.dtype if target_dtype is None else target_dtype
        if target_device is None or get_device(target_device) is get_device(self.device):
            if target_dtype == self.dtype and not copy:
                return self
            return self.astype(target_dtype)
        refuse_while_tracing(f"Tensor.to({target_device!r})")
        array = self.numpy().astype(target_dtype)
        return tensor(array, device=target_device, requires_grad=self.requires_grad)

    def detach(self) -> "Tensor":
        self.realize()
        return Tensor(self.shape, self.dtype, self.device, buffer=self._buffer)

    def __deepcopy__(self, memo: dict) -> "Tensor":
        """``copy.deepcopy``: a new leaf on the same device holding a copy of this tensor's
        value, requiring gradients as this one does (its gradient is not copied), so that
        ``copy.deepcopy(model)`` gives independent parameters, as in PyTorch. A lazy tensor
        is computed first (inside ``gingham.jit``'s tracing that is an error, as ``numpy()``).

            snapshot = copy.deepcopy(model)          # best-so-far weights, an EMA model
        """
        copied = tensor(self.numpy(), device=self.device, requires_grad=self.requires_grad)
        memo[id(self)] = copied
        return copied

    # -- building operations ------------------------------------------------------------------------
    def _derive(self, shape, dtype, parents, build) -> "Tensor":
        requires = _grad_mode.enabled[-1] and any(p.requires_grad for p in parents)
        device = parents[0].device
        for parent in parents[1:]:
            if parent.device != device:
                raise DeviceError(
                    f"operands are on different devices ({device} and {parent.device}); "
                    "move one with .to(device)"
                )
        return Tensor(shape, dtype, device, parents=parents, build=build, requires_grad=requires)

    def _scalar_or_tensor(self, other) -> "Tensor | Scalar":
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (bool, int, float, np.number)):
            return other.item() if isinstance(other, np.number) else other
        if isinstance(other, np.ndarray):
            return tensor(other, device=self.device)
        raise TypeError(f"unsupported operand type {type(other).__name__}")

    def _elementwise(self, op: Callable, others: Sequence, name: str,
                     result_dtype: np.dtype | None = None) -> "Tensor":
        operands = [self] + [self._scalar_or_tensor(o) for o in others]
        tensors = [o for o in operands if isinstance(o, Tensor)]
        shape = _broadcast_shapes(name, [t.shape for t in tensors])
        types = [ExprType(o.dtype) if isinstance(o, Tensor) else
                 ExprType(dt.FLOAT32 if isinstance(o, float) else dt.INT32, weak=True)
                 for o in operands]
        joined = types[0]
        for t in types[1:]:
            joined = combine(joined, t)
        dtype = result_dtype if result_dtype is not None else joined.dtype
        positions = [i for i, o in enumerate(operands) if isinstance(o, Tensor)]

        def build(nodes):
            values = list(operands)
            for position, node in zip(positions, nodes):
                values[position] = node
            return op(*values)

        return self._derive(shape, dtype, tensors, build)

    # arithmetic ---------------------------------------------------------------------------------
    def __add__(self, o): return self._elementwise(lambda a, b: a + b, [o], "add")
    def __radd__(self, o): return self._elementwise(lambda a, b: b + a, [o], "add")
    def __sub__(self, o): return self._elementwise(lambda a, b: a - b, [o], "subtract")
    def __rsub__(self, o): return self._elementwise(lambda a, b: b - a, [o], "subtract")
    def __mul__(self, o): return self._elementwise(lambda a, b: a * b, [o], "multiply")
    def __rmul__(self, o): return self._elementwise(lambda a, b: b * a, [o], "multiply")
    def __truediv__(self, o): return _true_divide(self, o)
    def __rtruediv__(self, o):
        # A number stays a constant of the program, as in the other reflected operators: made
        # a tensor of its own, it was a leaf that a function traced with placeholders could
        # not build (1.0 / x in a traced op).
        if isinstance(o, Tensor):
            return _true_divide(o, self)
        divisor = self if dt.is_float(self.dtype) else self.astype(np.float32)
        return divisor._elementwise(lambda a, b: b / a, [o], "divide")
    def __neg__(self): return self._elementwise(lambda a: -a, [], "negative")
    def __pow__(self, o):
        return _autocast_float32(self)._elementwise(lambda a, b: builder.pow(a, b), [o], "pow")
    def __lt__(self, o): return self._elementwise(lambda a, b: a < b, [o], "less", dt.BOOL)
    def __le__(self, o): return self._elementwise(lambda a, b: a <= b, [o], "less_equal", dt.BOOL)
    def __gt__(self, o): return self._elementwise(lambda a, b: a > b, [o], "greater", dt.BOOL)
    def __ge__(self, o): return self._elementwise(lambda a, b: a >= b, [o], "greater_equal", dt.BOOL)
    def __eq__(self, o): return self._elementwise(lambda a, b: _eq(a, b), [o], "equal", dt.BOOL)  # type: ignore[override]
    def __ne__(self, o): return self._elementwise(lambda a, b: _ne(a, b), [o], "not_equal", dt.BOOL)  # type: ignore[override]
    __hash__ = object.__hash__

    def __matmul__(self, other: "Tensor") -> "Tensor":
        return matmul(self, other)

    # math -----------------------------------------------------------------------------------------
    def exp(self): return _unary_float(_autocast_float32(self), builder.exp, "exp")
    def log(self): return _unary_float(_autocast_float32(self), builder.log, "log")
    def sqrt(self): return _unary_float(self, builder.sqrt, "sqrt")
    def tanh(self): return _unary_float(self, builder.tanh, "tanh")
    def sigmoid(self): return _unary_float(self, builder.sigmoid, "sigmoid")
    def relu(self): return self._elementwise(builder.relu, [], "relu")
    def abs(self): return self._elementwise(builder.abs, [], "abs")

    def astype(self, dtype) -> "Tensor":
        target = dt.as_tile_dtype(dtype)
        name = dt.dtype_name(target)
        return self._elementwise(lambda a: builder.cast(a, name), [], "astype", target)

    # reductions -----------------------------------------------------------------------------------
    def sum(self, axis=None, keepdims: bool = False):
        return _reduce(_autocast_float32(self), "+", axis, keepdims)
    def max(self, axis=None, keepdims: bool = False): return _reduce(self, ">", axis, keepdims)
    def min(self, axis=None, keepdims: bool = False): return _reduce(self, "<", axis, keepdims)

    def mean(self, axis=None, keepdims: bool = False):
        axes = _axes(axis, self.ndim)
        count = math.prod(self.shape[a] for a in axes) or 1
        x = _autocast_float32(self)
        total = _reduce(x if dt.is_float(x.dtype) else x.astype(np.float32), "+", axis, keepdims)
        return total / float(count)

    # shapes ----------------------------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        return reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list))
                       else shape)

    def transpose(self, *axes) -> "Tensor":
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return permute_dims(self, axes or tuple(reversed(range(self.ndim))))

    @property
    def T(self) -> "Tensor":
        return permute_dims(self, tuple(reversed(range(self.ndim))))

    def __getitem__(self, key) -> "Tensor":
        return _getitem(self, key)

    # autograd ------------------------------------------------------------------------------------------
    def backward(self, gradient: "Tensor | np.ndarray | None" = None) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires it."""
        if gradient is None:
            if self.size != 1:
                raise ShapeError(
                    f"backward() without a gradient needs a single-element tensor, not shape "
                    f"{self.shape}"
                )
            gradient = np.ones(self.shape, self.dtype)
        cotangent = gradient if isinstance(gradient, Tensor) else tensor(
            np.asarray(gradient, self.dtype), device=self.device)
        leaves = [t for t in _graph_leaves([self]) if t.requires_grad]
        if not leaves:
            raise GinghamError("backward(): no tensor in the graph requires a gradient")
        # Gradients are lazy tensors: the gradient program joins the graph, so an optimiser
        # step computes forward, backward and update as one compiled program.
        grads = _gradients(self, leaves, cotangent)
        for leaf, grad in zip(leaves, grads):
            leaf.grad = grad if leaf.grad is None else leaf.grad + grad
            leaf._backward_roots.append(self)


# -- creation ------------------------------------------------------------------------------------------


def tensor(data, dtype=None, device: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor holding a copy of ``data`` on ``device`` (default: the default device)."""
    from ..devices import default_device_id, get_device

    if isinstance(data, Tensor):
        data = data.numpy()
    array = np.asarray(data)
    if dtype is None and array.dtype == np.float64 and not isinstance(data, np.ndarray):
        dtype = np.float32  # Python floats become float32, as in PyTorch
    if dtype is not None:  # a Tile type; the name "bfloat16" too (numpy knows it from ml_dtypes)
        array = array.astype(dt.as_tile_dtype(dtype))
    array = np.require(array, requirements="C")
    array = array.astype(dt.as_tile_dtype(array.dtype), copy=False)
    device = device or default_device_id()
    target = get_device(device)
    buffer = target.alloc(max(array.nbytes, 1))
    if array.size:
        target.copy_in(buffer, np.require(array, requirements="C"))
    return Tensor(array.shape, array.dtype, device, buffer=buffer, requires_grad=requires_grad)


def zeros(shape, dtype=np.float32, device: str | None = None) -> Tensor:
    return tensor(np.zeros(shape, dt.as_tile_dtype(dtype)), device=device)


def ones(shape, dtype=np.float32, device: str | None = None) -> Tensor:
    return tensor(np.ones(shape, dt.as_tile_dtype(dtype)), device=device)


def full(shape, value, dtype=np.float32, device: str | None = None) -> Tensor:
    return tensor(np.full(shape, value, dt.as_tile_dtype(dtype)), device=device)


def arange(start, stop=None, step=1, dtype=None, device: str | None = None) -> Tensor:
    dtype = dt.as_tile_dtype(dtype) if dtype is not None else None
    return tensor(np.arange(start, stop, step, dtype=dtype), device=device)


def _as_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    if array.dtype == np.float64 and not isinstance(value, np.ndarray):
        array = array.astype(like.dtype if dt.is_float(like.dtype) else np.float32)
    return tensor(array, device=like.device)


# -- elementwise helpers ------------------------------------------------------------------------------


def _eq(a, b):
    if isinstance(a, builder.Tensor):
        return a.eq(b)
    return b.eq(a)


def _ne(a, b):
    if isinstance(a, builder.Tensor):
        return a.ne(b)
    return b.ne(a)


def _autocast_float32(x: Tensor) -> Tensor:
    """Under ``gingham.autocast``, a half tensor cast up to float32: the ops PyTorch's autocast
    runs in float32 (exp, log, pow, sum, mean) call this first."""
    from .amp import cast_inputs_float32

    return cast_inputs_float32(x)[0]


def _unary_float(x: Tensor, fn, name: str) -> Tensor:
    dtype = x.dtype if dt.is_float(x.dtype) else dt.FLOAT32
    return x._elementwise(fn, [], name, dtype)


def _true_divide(a: Tensor, b) -> Tensor:
    """``/`` divides as NumPy's true_divide: integers give float32 here (Tile's ``/`` on
    integers truncates, so they are converted first)."""
    if not dt.is_float(a.dtype):
        a = a.astype(np.float32)
    if isinstance(b, Tensor) and not dt.is_float(b.dtype):
        b = b.astype(np.float32)
    return a._elementwise(lambda x, y: x / y, [b], "divide")


def maximum(a: Tensor, b) -> Tensor:
    return a._elementwise(builder.maximum, [b], "maximum")


def minimum(a: Tensor, b) -> Tensor:
    return a._elementwise(builder.minimum, [b], "minimum")


def where(cond: Tensor, a, b) -> Tensor:
    return cond._elementwise(lambda c, x, y: builder.select(c, x, y), [a, b], "where",
                             _where_dtype(a, b))


def _where_dtype(a, b) -> np.dtype:
    types = [ExprType(x.dtype) if isinstance(x, Tensor) else
             ExprType(dt.FLOAT32 if isinstance(x, float) else dt.INT32, weak=True) for x in (a, b)]
    return combine(types[0], types[1]).dtype


def _broadcast_shapes(name: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(
            f"{name}: shapes {', '.join(str(s) for s in shapes)} do not broadcast together"
        ) from None


# -- contractions -------------------------------------------------------------------------------------------


def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    normalized = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ShapeError(f"axis {a} is out of range for a {ndim}-d tensor")
        normalized.append(a % ndim if ndim else 0)
    return tuple(sorted(set(normalized)))


def _reduce(x: Tensor, agg: str, axis, keepdims: bool) -> Tensor:
    axes = _axes(axis, x.ndim)
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim))) if x.ndim else ()
    out_index, out_shape = [], []
    for a in range(x.ndim):
        if a in axes:
            if keepdims:
                out_index.append(0)
                out_shape.append(1)
        else:
            out_index.append(idx[a])
            out_shape.append(x.shape[a])
    dtype = x.dtype
    if agg == "+" and dt.is_bool(dtype):
        dtype = dt.INT32
    make = {"+": builder.sum, ">": builder.max, "<": builder.min}[agg]

    def build(nodes):
        (node,) = nodes
        return make(node[tuple(idx)] if idx else node[()], out=out_index, shape=out_shape)

    return x._derive(tuple(out_shape), dtype, [x], build)


def batched_operand_index(shape: tuple[int, ...], batch: tuple[int, ...], indices: Sequence,
                          rows, cols) -> tuple:
    """The index of a ``[..., rows, cols]`` operand of a product over the broadcast ``batch``
    axes (named by ``indices``): missing leading axes are skipped, and an axis of size 1
    broadcast against a longer one is read at 0. One that meets only axes of size 1 keeps its
    index, which must appear on the right of the sum (an index used only in the output is an
    error: ``[1, 2, 3] @ [1, 3, 4]`` was one)."""
    lead = len(batch) - (len(shape) - 2)
    index = [0 if size == 1 != batch[lead + d] else indices[lead + d]
             for d, size in enumerate(shape[:-2])]
    return (*index, rows, cols)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for 1-D, 2-D and batched (leading dimensions equal) operands; under
    ``gingham.autocast`` in its low-precision dtype."""
    from .amp import cast_inputs_low

    a, b = cast_inputs_low(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: operands must have at least one dimension")
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not match "
                         f"({a2.shape[-1]} != {b2.shape[-2]})")
    batch_a, batch_b = a2.shape[:-2], b2.shape[:-2]
    batch = _broadcast_shapes("matmul", [batch_a, batch_b])
    m, n = a2.shape[-2], b2.shape[-1]
    nb = len(batch)
    bi = builder.indices(" ".join(f"b{d}" for d in range(nb))) if nb else ()
    i, j, kk = builder.indices("i j k")

    dtype = dt.promote(a2.dtype, b2.dtype)

    def build(nodes):
        na, nb_ = nodes
        return builder.sum(na[batched_operand_index(a2.shape, batch, bi, i, kk)]
                           * nb_[batched_operand_index(b2.shape, batch, bi, kk, j)],
                           out=list(bi) + [i, j], shape=list(batch) + [m, n])

    result = a2._derive(batch + (m, n), dtype, [a2, b2], build)
    if a.ndim == 1:
        result = result.reshape(batch + (n,))
    if b.ndim == 1:
        result = result.reshape(result.shape[:-1])
    return result


def reshape(x: Tensor, shape) -> Tensor:
    shape = tuple(int(s) for s in shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    if math.prod(shape) != x.size:
        raise ShapeError(f"reshape: cannot reshape {x.shape} ({x.size} elements) to {shape}")
    if shape == x.shape:
        return x
    return x._derive(shape, x.dtype, [x], lambda nodes: builder.reshape(nodes[0], *shape))


def permute_dims(x: Tensor, axes: Sequence[int]) -> Tensor:
    axes = tuple(a % x.ndim for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"permute_dims: {axes} is not a permutation of {x.ndim} axes")
    if axes == tuple(range(x.ndim)):
        return x
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim)))
    shape = tuple(x.shape[a] for a in axes)
    return x._derive(shape, x.dtype, [x], lambda nodes: builder.assign(
        nodes[0][tuple(idx)], out=[idx[a] for a in axes], shape=list(shape)))


def _getitem(x: Tensor, key) -> Tensor:
    """Basic indexing: integers, slices (any step), None and Ellipsis."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        position = key.index(Ellipsis)
        fill = x.ndim - (len(key) - 1 - sum(k is None for k in key))
        key = key[:position] + (slice(None),) * fill + key[position + 1:]
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
    shape = tuple(out_shape)

    def build(nodes):
        where = [v < s for v, s in zip(out_index, out_shape) if isinstance(v, builder.Index)]
        return builder.assign(nodes[0][tuple(source_index)] if source_index else nodes[0][()],
                              out=out_index, shape=list(shape), where=where)

    return x._derive(shape, x.dtype, [x], build)


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join along an existing axis (each piece is a shifted ``=`` write into one output)."""
    tensors = list(tensors)
    first = tensors[0]
    axis = axis % first.ndim
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(
            t.shape[a] != first.shape[a] for a in range(first.ndim) if a != axis
        ):
            raise ShapeError(f"concat: shapes {[t.shape for t in tensors]} differ off axis {axis}")
    total = sum(t.shape[axis] for t in tensors)
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
    dtype = first.dtype
    for t in tensors[1:]:
        dtype = dt.promote(dtype, t.dtype)
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


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    axis = axis % (tensors[0].ndim + 1)
    expanded = [t.reshape(t.shape[:axis] + (1,) + t.shape[axis:]) for t in tensors]
    return concat(expanded, axis)


# -- realising a graph ------------------------------------------------------------------------------------


def _collect(targets: Iterable[Tensor], stop: Callable[[Tensor], bool]):
    """Build the Tile program computing ``targets`` from the tensors where ``stop`` is true."""
    inputs: list[Tensor] = []
    placeholders: list[builder.Tensor] = []
    memo: dict[int, builder.Tensor] = {}

    def node(t: Tensor) -> builder.Tensor:
        key = id(t)
        if key in memo:
            return memo[key]
        if stop(t):
            placeholder = builder.input(f"L{len(inputs)}", list(t.shape))
            inputs.append(t)
            placeholders.append(placeholder)
            memo[key] = placeholder
            return placeholder
        # Iterative parents first, so deep graphs don't hit the recursion limit.
        stack = [t]
        while stack:
            current = stack[-1]
            pending = [p for p in current._parents if id(p) not in memo and not stop(p)]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if id(current) in memo:
                continue
            for parent, version in zip(current._parents, current._parent_versions):
                if parent._version != version:
                    raise GinghamError(
                        "a tensor was computed from a value that has since been assigned "
                        "(an optimiser step?); realise it before the assignment"
                    )
            memo[id(current)] = current._build([node(p) for p in current._parents])
        return memo[key]

    outputs = [node(t) for t in targets]
    return inputs, placeholders, outputs


def _function_for(program) -> tile.Function:
    fn = _functions.get(program)
    if fn is None:
        fn = _functions[program] = tile.function(program)
    return fn


def _bound_graph(targets: Sequence[Tensor], stop: Callable[[Tensor], bool]):
    """The Tile program computing ``targets`` (outputs O0, O1, ...) from the tensors where
    ``stop`` holds, its function (shared by equal programs) and its binding to their shapes."""
    inputs, placeholders, outputs = _collect(targets, stop)
    program = builder.program(placeholders, {f"O{i}": out for i, out in enumerate(outputs)})
    fn = _function_for(program)
    return inputs, fn, fn.bind_shapes([t.shape for t in inputs], [t.dtype for t in inputs])


def realize(targets: Sequence[Tensor]) -> None:
    """Compute several tensors with one compiled program."""
    from ..devices import get_device
    from ..runtime import executable

    pending = list({id(t): t for t in targets if t._buffer is None}.values())
    if not pending:
        return
    inputs, _, bound = _bound_graph(pending, lambda t: t._buffer is not None or t._placeholder)
    if any(t._placeholder for t in inputs):
        raise GinghamError(
            "a value that depends on the arguments of a function traced by gingham.jit cannot "
            "be read during tracing (no .numpy(), .item() or Python branching on tensors)"
        )
    for t, name in zip(pending, bound.program.outputs):
        if bound.shapes[name] != t.shape or bound.dtypes[name] != t.dtype:
            raise AssertionError(f"shape inference disagrees: {t} vs {bound.shapes[name]}")
    device = get_device(pending[0].device)
    exe = executable(bound, device)
    buffers = exe.run([t._buffer for t in inputs], fresh_outputs=True)
    for t, buffer in zip(pending, buffers):
        t._buffer = buffer


def _graph_leaves(targets: Sequence[Tensor]) -> list[Tensor]:
    seen: dict[int, Tensor] = {}
    leaves: list[Tensor] = []
    stack = list(targets)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen[id(t)] = t
        if t.is_leaf:
            leaves.append(t)
        stack.extend(t._parents)
    return leaves


def _gradients(output: Tensor, wrt: list[Tensor], cotangent: Tensor) -> list[Tensor]:
    """d(output)/d(wrt) · cotangent as lazy tensors, from the Tile autodiff of the graph."""
    inputs, fn, bound = _bound_graph([output], lambda t: t.is_leaf)
    position = {id(t): n for n, t in enumerate(inputs)}  # by identity: == is elementwise
    wanted = frozenset(f"L{position[id(t)]}" for t in wrt if id(t) in position)
    grad = fn.gradient_for(bound, wanted)
    gradient_bound = grad.function.bind_shapes(
        [t.shape for t in inputs] + [output.shape], [t.dtype for t in inputs] + [output.dtype])
    if cotangent.dtype != output.dtype:
        cotangent = cotangent.astype(output.dtype)
    parents = list(inputs) + [cotangent]
    inlined: dict = {}

    def output_of(name: str):
        def build(nodes):
            key = tuple(nodes)  # the nodes themselves (kept alive), not their ids
            if inlined.get("key") != key:
                inlined["key"] = key
                inlined["outputs"] = dict(zip(grad.program.outputs,
                                              builder.inline(grad.program, nodes)))
            return inlined["outputs"][name]
        return build

    results = []
    for t in wrt:
        name = grad.gradient_names.get(f"L{position[id(t)]}") if id(t) in position else None
        if name is None:
            results.append(zeros(t.shape, t.dtype, t.device))
            continue
        value = Tensor(t.shape, gradient_bound.dtypes[name], t.device, parents=parents,
                       build=output_of(name))
        results.append(value if value.dtype == t.dtype else value.astype(t.dtype))
    return results


def assign_all(pairs: Sequence[tuple[Tensor, Tensor]]) -> None:
    """Give several leaves new values computed together (one program), then swap them in.

    The tensors that ``backward()`` was called on are computed in the same program, so a loss
    read after ``optimizer.step()`` still shows the value it had before the step.
    """
    from .jit import current_trace

    for target, value in pairs:
        if not target.is_leaf:
            raise GinghamError("assign(): only leaf tensors (parameters, state) can be assigned")
        if value.shape != target.shape:
            raise ShapeError(f"assign(): value of shape {value.shape} for a tensor of shape "
                             f"{target.shape}")
        if value.device != target.device:
            raise DeviceError(f"assign(): value on {value.device} for a tensor on "
                              f"{target.device}; move one with .to(device)")
    pairs = [(t, v if v.dtype == t.dtype else v.astype(t.dtype)) for t, v in pairs]
    trace = current_trace()
    if trace is not None:
        trace.record_assignments(pairs)
        return
    roots = [r for target, _ in pairs for r in target._backward_roots]
    realize([v for _, v in pairs] + roots)
    for target, value in pairs:
        target._buffer = value._buffer
        target._version += 1
        target._backward_roots = []


# -- moving tensors between devices and dtypes ---------------------------------------------------

# Bumped by every move_all: a compiled step (gingham.jit) compares its inputs' devices and
# dtypes with those it was traced for only when this changed, not on every replay.
_moves = 0


def moves_count() -> int:
    """How many times :func:`move_all` has moved tensors in this process."""
    return _moves


def _is_dtype(value) -> bool:
    """Whether a positional argument of ``to()`` names a dtype rather than a device."""
    if isinstance(value, str):
        return value in dt.DTYPES
    return isinstance(value, (np.dtype, type))


def placement(args: Sequence, device=None, dtype=None) -> tuple[str | None, np.dtype | None]:
    """The ``(device id, dtype)`` asked for by PyTorch's forms of ``to()``: ``(device)``,
    ``(dtype)``, ``(device, dtype)``, ``(tensor)`` (its device and dtype), with ``device=``
    and ``dtype=`` keywords; None for what is not asked. The device is checked to exist
    (:class:`gingham.DeviceNotFoundError` naming the available ones) and given by its
    canonical id (``"cuda"`` is ``"cuda:0"``).

        placement(("cpu", "bfloat16"))          # ('cpu', dtype(bfloat16))
    """
    from ..devices import Device, get_device

    if len(args) > 2:
        raise TypeError(f"to() takes at most 2 positional arguments ({len(args)} given)")
    for position, value in enumerate(args):
        if isinstance(value, Tensor):
            if len(args) > 1 or device is not None or dtype is not None:
                raise TypeError("to(tensor) takes its device and dtype from the tensor alone")
            device, dtype = value.device, value.dtype
        elif _is_dtype(value) and not (position == 0 and len(args) == 2):
            if dtype is not None:
                raise TypeError("to(): dtype given twice")
            dtype = value
        elif position == 0 and isinstance(value, (str, Device)):
            if device is not None:
                raise TypeError("to(): device given twice")
            device = value
        else:
            raise TypeError(f"to(): expected a device, a dtype or a tensor, not {value!r}; "
                            "the forms are to(device), to(dtype), to(device, dtype), "
                            "to(tensor)")
    if isinstance(device, Device):
        device = device.id
    if device is not None:
        device = get_device(str(device)).id
    return device, None if dtype is None else dt.as_tile_dtype(dtype)


def refuse_while_tracing(what: str) -> None:
    """Moving a tensor is a host operation done once: inside a traced step it would happen
    at tracing only, never at replay, so it is an error there (as ``numpy()`` is)."""
    from .jit import current_trace

    if current_trace() is not None:
        raise GinghamError(
            f"{what} cannot run inside a function traced by gingham.jit (a move happens once, "
            "when tracing, not when the compiled step replays); move the model and its "
            "tensors before calling the traced function"
        )


def move_all(moves: Sequence[tuple[Tensor, str, np.dtype]]) -> None:
    """Give each leaf ``(tensor, device id, dtype)`` its value on that device as that dtype,
    in place: the same Tensor object, so optimisers and compiled steps holding it keep it
    (what ``Module.to`` needs). Its pending gradient moves with it (to the same device and
    dtype), and the tensors ``backward()`` was called on are computed first, so a loss read
    after the move still shows its value. Lazy tensors computed from the old value cannot be
    computed any more (the move counts as an assignment). Values go through the host.

        move_all([(weight, "cpu", np.dtype("float16"))])
    """
    from ..devices import get_device

    global _moves

    wanted = [(t, device, dt.as_tile_dtype(dtype)) for t, device, dtype in moves]
    moves = [(t, device, dtype) for t, device, dtype in wanted if (t.device, t.dtype) != (
        device, dtype)]
    if not moves:
        return
    for device in {device for _, device, _ in moves}:
        get_device(device)  # a missing device is an error before anything moved
    for t, _, _ in moves:
        if not t.is_leaf:
            raise GinghamError("move_all(): only leaf tensors (parameters, state) move in place")
    pending = [t for t, _, _ in moves] + [t.grad for t, _, _ in moves if t.grad is not None]
    pending += [root for t, _, _ in moves for root in t._backward_roots]
    by_device: dict[str, list[Tensor]] = {}
    for t in pending:
        by_device.setdefault(t.device, []).append(t)
    for group in by_device.values():  # one program per device
        realize(group)
    for t, device, dtype in moves:
        if t.grad is not None:
            t.grad = tensor(t.grad.numpy().astype(dtype), device=device)
        moved = tensor(t.numpy().astype(dtype), device=device)
        t._buffer, t.device, t.dtype = moved._buffer, device, dtype
        t._version += 1
        t._backward_roots = []
    _moves += 1


__all__ = [
    "Tensor", "ShapeError", "tensor", "zeros", "ones", "full", "arange", "matmul", "reshape",
    "permute_dims", "concat", "stack", "maximum", "minimum", "where", "realize", "no_grad",
    "is_grad_enabled", "assign_all", "move_all", "placement",
]
