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

The methods PyTorch model code calls have PyTorch's names, arguments and results (``view``,
``permute``, ``transpose(dim0, dim1)``, ``unsqueeze``, ``flatten``, ``expand``, ``split``,
``chunk``, ``clamp``, ``var(dim, correction=1)``, ``max(dim)`` as ``(values, indices)``,
``argmax``, ``masked_fill``, ``softmax``, ``float()``, ...), so

    h = x.view(n, -1).clamp(min=0.0)
    scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, -math.inf).softmax(-1)
    predicted = logits.argmax(dim=1)

reads as in PyTorch. Where gingham's own code already used a NumPy spelling it keeps working:
``x.size`` is the element count (and, called, PyTorch's ``x.size()``/``x.size(dim)``), a full
permutation given to ``transpose`` permutes, and ``max``/``min`` with NumPy's ``axis=`` or
``keepdims=`` return the values alone. Dims out of range raise :class:`DimError`, an
``IndexError`` as in PyTorch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import math
import threading
import weakref
from typing import Callable, Iterable, NamedTuple, Sequence, Union

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


class DTypeError(ShapeError, TypeError):
    """An operand whose dtype does not fit an op (a float op given integers, mixed dtypes)."""


class DimError(ShapeError, IndexError):
    """A ``dim`` out of range for a tensor's rank: an ``IndexError``, as PyTorch raises, and a
    :class:`ShapeError` like gingham's other shape errors."""


class ValuesIndices(NamedTuple):
    """What ``Tensor.max(dim)`` and ``Tensor.min(dim)`` return, as PyTorch's
    ``torch.return_types.max``: ``values, indices = x.max(1)`` or ``x.max(1).indices``."""

    values: "Tensor"
    indices: "Tensor"


class MinMax(NamedTuple):
    """What ``aminmax`` returns, as PyTorch's ``torch.return_types.aminmax``."""

    min: "Tensor"
    max: "Tensor"


class _Numel(int):
    """``Tensor.size``: the element count (NumPy's ``x.size``, which gingham's code reads) that
    can also be called as PyTorch's ``x.size()`` (the shape) and ``x.size(dim)`` (one size)."""

    def __new__(cls, shape: tuple[int, ...]) -> "_Numel":
        numel = super().__new__(cls, math.prod(shape))
        numel._shape = shape
        return numel

    def __call__(self, dim: int | None = None):
        if dim is None:
            return self._shape
        return self._shape[_dim("size", self._shape, dim)]


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


def _delegated(module: str, function: str) -> Callable:
    """A method calling ``function`` of ``module`` (relative to this package) with the tensor
    first: for functions of modules that import this one (gingham.linalg, gingham.signal,
    gingham.frontend.indexing), imported when the method is first called."""

    def method(self, *args, **kwargs):
        return getattr(importlib.import_module(module, __package__), function)(
            self, *args, **kwargs)

    method.__name__ = method.__qualname__ = function
    method.__doc__ = f"``{module.lstrip('.')}.{function}(self, ...)``, PyTorch's method."
    return method


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
        # detach() of a computed tensor: computed from its parents, but autograd stops here
        self._detached = False
        self._backward_roots: list[Tensor] = []
        # A copy of a tensor on another device made by to(): an input of this device's
        # graphs, whose gradient backward() sends on to the original (see to()).
        self._moved_from: Tensor | None = None
        # In-place operations (gingham.frontend.inplace): the tensors computed from this one,
        # held weakly, so that an in-place update can point the lazy ones at the old value;
        # the tensor an old value was taken from (a snapshot's origin); and, for ``.data``
        # and ``detach()`` of a leaf, the leaf whose value this one shares.
        self._children: list[weakref.ref] | None = None
        self._snapshot_of: Tensor | None = None
        self._alias_of: Tensor | None = None
        for parent in self._parents:
            parent._adopt(self)

    def _adopt(self, child: "Tensor") -> None:
        """Remember (weakly) that ``child`` is computed from this tensor. A list of weak
        references, pruned of dead ones whenever its length reaches a power of two, costs
        a fraction of a microsecond per operation (a weak reference with a callback cost ten)."""
        children = self._children
        if children is None:
            self._children = [weakref.ref(child)]
            return
        children.append(weakref.ref(child))
        count = len(children)
        if count >= 64 and count & (count - 1) == 0:
            children[:] = [r for r in children if r() is not None]

    # -- basic properties ------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> _Numel:
        """The number of elements; called, PyTorch's ``size()`` (the shape) or ``size(dim)``.

            x.size == 6 and x.size() == (2, 3) and x.size(-1) == 3   # x of shape (2, 3)
        """
        return _Numel(self.shape)

    def dim(self) -> int:
        """The number of dimensions (PyTorch's name for ``ndim``)."""
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def contiguous(self) -> "Tensor":
        """``self``: gingham's tensors have no strides, so every tensor is contiguous."""
        return self

    @property
    def is_leaf(self) -> bool:
        """A tensor not computed from others: parameters, data, detached values. As in
        PyTorch, a copy on another device of a tensor that requires gradients is not one
        (its gradient flows on to the original)."""
        return not self._parents and self._moved_from is None

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Make this leaf require gradients (or not), in place; returns it, as PyTorch.

            w = gingham.zeros((3, 4)).requires_grad_()
        """
        if self._detached and not self.is_leaf:
            _become_leaf(self, "requires_grad_()")
        if not self.is_leaf:
            raise GinghamError(
                "requires_grad_(): only leaf tensors can change requires_grad (gradients are "
                "taken with respect to leaves); use .detach().requires_grad_() for a new leaf"
            )
        self.requires_grad = bool(requires_grad)
        return self

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

    def tolist(self):
        """The value as (nested) Python lists of numbers, copied from the device."""
        return self.numpy().tolist()

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
        through it). A move to another device computes this tensor and copies its value
        through the host; when it requires gradients, so does the copy, and ``backward()``
        through the copy carries its gradient back to this device and on through the graph
        that made this tensor, as PyTorch's ``to`` does (so a model split over two devices
        trains). Inside ``gingham.jit``'s tracing a move is an error. ``non_blocking`` is
        accepted and ignored (copies are synchronous). To move a tensor itself, keeping its
        identity, see :meth:`gingham.nn.Module.to`.

            half = x.to("float16")                  # x.astype("float16")
            y = x.to("cpu", np.float16)             # float16 on the cpu device
            h = first(x.to("cuda:0")).to("cpu")     # first's parameters get gradients too
        """
        from ..devices import get_device

        target_device, target_dtype = placement(args, device, dtype)
        target_dtype = self.dtype if target_dtype is None else target_dtype
        if target_device is None or get_device(target_device) is get_device(self.device):
            if target_dtype == self.dtype and not copy:
                return self
            return self.astype(target_dtype)
        refuse_while_tracing(f"Tensor.to({target_device!r})")
        source = self if target_dtype == self.dtype else self.astype(target_dtype)
        moved = tensor(source.numpy(), device=target_device, dtype=target_dtype)
        if source.requires_grad and is_grad_enabled():
            moved.requires_grad = True
            moved._moved_from = source
        return moved

    def detach(self) -> "Tensor":
        """This value without its autograd history: it requires no gradient, and no gradient
        flows through it. For a leaf (a parameter, data) it shares the leaf's value as
        PyTorch's does: an in-place operation on it (``p.detach().zero_()``) changes the leaf
        too. For a computed tensor it is the value computed in the same program as the rest
        (nothing is computed now, so ``running_loss += loss.detach()`` costs no extra forward
        pass and works inside ``gingham.jit``); an in-place operation on it changes only it,
        and ``requires_grad_()`` makes it a new leaf holding the value, as in PyTorch.

            target = critic(next_state).detach()   # no gradient into the critic from here
        """
        if self.is_leaf and not self._placeholder:
            detached = Tensor(self.shape, self.dtype, self.device, buffer=self._buffer)
            detached._alias_of = self._alias_of or self
            return detached
        detached = self._derive(self.shape, self.dtype, [self],
                                lambda nodes: builder.stop_gradient(nodes[0]))
        detached.requires_grad, detached._detached = False, True
        return detached

    @property
    def data(self) -> "Tensor":
        """The value without its autograd history, sharing it as PyTorch's ``.data``: for a
        leaf, in-place operations on it change the leaf (``p.data.mul_(0.5)``, the idiom of
        hand-written updates and initialisations); see :meth:`detach`. Assigning
        ``p.data = value`` gives the leaf a new value of the same shape (cast to its dtype),
        outside autograd."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        from .inplace import copy_into

        copy_into(self, value, "data")

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
    def __mod__(self, o): return _remainder(self, o)
    def __rmod__(self, o): return _remainder(_weak_scalar(o, self), self)
    def __floordiv__(self, o): return _floor_divide(self, o)
    def __rfloordiv__(self, o): return _floor_divide(_weak_scalar(o, self), self)
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

    # bool masks (logical) and integers (bitwise), as PyTorch's ~ & | ^
    def __invert__(self):
        _integral("~", self)
        if dt.is_bool(self.dtype):
            return self._elementwise(builder.logical_not, [], "logical_not")
        return self._elementwise(lambda a: ~a, [], "bitwise_not")

    def __and__(self, o): return _bitwise(self, o, "&", builder.logical_and)
    def __or__(self, o): return _bitwise(self, o, "|", builder.logical_or)
    def __xor__(self, o): return _bitwise(self, o, "^", _ne)
    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __matmul__(self, other: "Tensor") -> "Tensor":
        return matmul(self, other)

    # math -----------------------------------------------------------------------------------------
    def exp(self): return _unary_float(_autocast_float32(self), builder.exp, "exp")
    def log(self): return _unary_float(_autocast_float32(self), builder.log, "log")
    def sqrt(self): return _unary_float(self, builder.sqrt, "sqrt")
    def rsqrt(self): return _unary_float(self, builder.rsqrt, "rsqrt")
    def sin(self): return _unary_float(self, builder.sin, "sin")
    def cos(self): return _unary_float(self, builder.cos, "cos")
    def tanh(self): return _unary_float(self, builder.tanh, "tanh")
    def sigmoid(self): return _unary_float(self, builder.sigmoid, "sigmoid")
    def erf(self): return _unary_float(self, builder.erf, "erf")
    def tan(self): return _unary_float(_autocast_float32(self), builder.tan, "tan")
    def sinh(self): return _unary_float(_autocast_float32(self), builder.sinh, "sinh")
    def cosh(self): return _unary_float(_autocast_float32(self), builder.cosh, "cosh")
    def asin(self): return _unary_float(_autocast_float32(self), builder.asin, "asin")
    def acos(self): return _unary_float(_autocast_float32(self), builder.acos, "acos")
    def atan(self): return _unary_float(self, builder.atan, "atan")
    arcsin, arccos, arctan = asin, acos, atan
    def relu(self): return self._elementwise(builder.relu, [], "relu")
    def abs(self): return self._elementwise(builder.abs, [], "abs")
    def sign(self): return self._elementwise(builder.sign, [], "sign")
    def floor(self): return self._elementwise(builder.floor, [], "floor")
    def ceil(self): return self._elementwise(builder.ceil, [], "ceil")
    def neg(self): return -self
    def reciprocal(self): return 1.0 / self
    def pow(self, exponent): return self ** exponent
    __abs__ = absolute = abs
    negative = neg

    def __rpow__(self, base):
        return _autocast_float32(self)._elementwise(lambda a, b: builder.pow(b, a), [base], "pow")

    def square(self) -> "Tensor":
        """``self ** 2`` in this tensor's dtype (an integer stays an integer, as PyTorch's)."""
        if not dt.is_float(self.dtype):  # Tile's pow computes in floating point
            return self._elementwise(lambda a: a * a, [], "square")
        # pow, not a * a: gingham.tile.builder could not inline an elementwise node that its
        # only consumer reads twice (``d = A - 1.0; d * d`` failed in program()).
        return self._elementwise(lambda a: builder.pow(a, 2.0), [], "square")

    def round(self, decimals: int = 0) -> "Tensor":
        """Round half to even (``rint``), as PyTorch; with ``decimals``, of ``x * 10**decimals``
        divided back, as PyTorch computes it."""
        if decimals == 0:
            return self._elementwise(builder.round, [], "round")
        scale = 10.0 ** decimals
        return (self * scale)._elementwise(builder.round, [], "round") / scale

    # Functions composed from Tile's own (no new intrinsic): each is one elementwise node whose
    # gradient Tile's autodiff derives. Where a formula has branches, the branch not taken is
    # fed a harmless value (a "double where"), so its derivative is finite and the zero that
    # select gives it stays zero instead of becoming 0 * inf = NaN.
    def log1p(self) -> "Tensor":
        """``log(1 + x)``, accurate also where ``|x|`` is tiny (a series there).

            x.log1p()                # torch.log1p(x)
        """
        return _floating(self, autocast=True)._elementwise(_log1p, [], "log1p")

    def expm1(self) -> "Tensor":
        """``exp(x) - 1``, accurate also where ``|x|`` is tiny (a series there)."""
        return _floating(self, autocast=True)._elementwise(_expm1, [], "expm1")

    def exp2(self) -> "Tensor":
        """``2 ** x`` (exact at integers)."""
        return _floating(self, autocast=True)._elementwise(
            lambda a: builder.pow(2.0, a), [], "exp2")

    def log2(self) -> "Tensor":
        return _floating(self, autocast=True)._elementwise(
            lambda a: builder.log(a) * (1.0 / math.log(2.0)), [], "log2")

    def log10(self) -> "Tensor":
        return _floating(self, autocast=True)._elementwise(
            lambda a: builder.log(a) * (1.0 / math.log(10.0)), [], "log10")

    def asinh(self) -> "Tensor":
        """The inverse hyperbolic sine, odd by construction (computed on ``|x|``, so large
        negative ``x`` does not cancel), gradient ``1 / sqrt(x^2 + 1)`` as PyTorch's."""
        return _floating(self)._elementwise(_asinh, [], "asinh")

    def acosh(self) -> "Tensor":
        """The inverse hyperbolic cosine (NaN below 1; the gradient at 1 is inf, as PyTorch's)."""
        return _floating(self)._elementwise(_acosh, [], "acosh")

    def atanh(self) -> "Tensor":
        """``(log1p(x) - log1p(-x)) / 2``: +-inf at +-1 (gradient inf), NaN beyond."""
        return _floating(self)._elementwise(
            lambda a: (_log1p(a) - _log1p(-a)) * 0.5, [], "atanh")

    arcsinh, arccosh, arctanh = asinh, acosh, atanh

    def atan2(self, other) -> "Tensor":
        """The angle of the point ``(other, self)`` (``self`` is y), in ``[-pi, pi]`` with
        C's signs at zeros (``atan2(-0.0, -1.0) == -pi``), as ``torch.atan2(input, other)``.
        Gradients are PyTorch's except at ``(0, 0)``, where PyTorch's are NaN and these finite.

            angle = y.atan2(x)
        """
        y, x = _float_operands(self, other)
        if not isinstance(x, Tensor):  # a number: a constant node, which _atan2 compares
            name = dt.dtype_name(y.dtype)
            return y._elementwise(lambda p: _atan2(p, builder.cast(x, name)), [], "atan2")
        return y._elementwise(_atan2, [x], "atan2")

    arctan2 = atan2

    def hypot(self, other) -> "Tensor":
        """``sqrt(self^2 + other^2)`` (overflows to inf where a square does, ``|x| > 1.8e19``
        in float32)."""
        a, b = _float_operands(self, other)
        return a._elementwise(lambda p, q: builder.sqrt(p * p + q * q), [b], "hypot")

    def logaddexp(self, other) -> "Tensor":
        """``log(exp(self) + exp(other))`` without overflow (``max + log1p(exp(-|a - b|))``);
        equal arguments, infinities included, give ``a + log(2)`` and half the gradient each.

            torch_like = a.logaddexp(b)
        """
        a, b = _float_operands(self, other)
        return a._elementwise(lambda p, q: _logaddexp(p, q, builder.exp, 1.0), [b],
                              "logaddexp")

    def logaddexp2(self, other) -> "Tensor":
        """``log2(2**self + 2**other)`` without overflow."""
        a, b = _float_operands(self, other)
        return a._elementwise(
            lambda p, q: _logaddexp(p, q, lambda d: builder.pow(2.0, d), math.log(2.0)), [b],
            "logaddexp2")

    def fmod(self, other) -> "Tensor":
        """The remainder of ``self / other`` with the dividend's sign (C's ``fmod``), where
        :meth:`remainder` (``%``) takes the divisor's. Integers: C's ``%`` (by zero, 0)."""
        if _any_float(self, other):
            a, b = _float_operands(self, other)
            return a._elementwise(lambda p, q: p % q, [b], "fmod")
        return self._elementwise(lambda p, q: p % q, [other], "fmod")

    def remainder(self, other) -> "Tensor":
        """``self % other``, with the divisor's sign (Python's, PyTorch's)."""
        return _remainder(self, other)

    def gcd(self, other) -> "Tensor":
        """The non-negative greatest common divisor of integers (``gcd(0, 0) == 0``), as
        PyTorch's: Euclid's algorithm unrolled for the dtype's worst case (consecutive
        Fibonacci numbers: 47 steps for 32 bits), an elementwise chain that stops changing
        once the divisor is 0.

            gingham.tensor([12, -18]).gcd(gingham.tensor([8, 12]))  # [4, 6]
        """
        _integral("gcd", self, other)
        return self._elementwise(lambda a, b: _euclid(a, b, _gcd_steps(self, other)), [other],
                                 "gcd")

    def lcm(self, other) -> "Tensor":
        """The non-negative least common multiple of integers (0 where either is 0), as
        PyTorch's: ``|self / gcd * other|``."""
        _integral("lcm", self, other)

        def lcm(a, b):
            divisor = _euclid(a, b, _gcd_steps(self, other))
            return builder.abs(a / builder.select(divisor.eq(0), 1, divisor) * b)

        return self._elementwise(lcm, [other], "lcm")

    def nextafter(self, other) -> "Tensor":
        """The representable number next to ``self`` in the direction of ``other`` (``other``
        where they are equal), as PyTorch's, for floats. No bit casts: for a normal ``x`` the
        step ``|x| * 2^-(p+1) * (1 + 2^-p)`` (``p`` mantissa bits) lies strictly between half
        a spacing and one and a half spacings on either side of ``x``, so ``x +- step``
        rounds to the neighbour; below the smallest normal number the spacing is the
        smallest subnormal one.

            gingham.tensor([1.0]).nextafter(gingham.tensor([2.0]))  # [1.0000001]
        """
        a, b = _float_operands(self, other)
        if not isinstance(b, Tensor):
            b = _weak_scalar(b, a)
        info = _BFLOAT16_FINFO if dt.is_bfloat16(a.dtype) else np.finfo(a.dtype)
        factor = 2.0 ** -(info.nmant + 1) * (1.0 + 2.0 ** -info.nmant)
        smallest_normal, tiny = float(info.smallest_normal), float(info.smallest_subnormal)
        largest = float(info.max)

        def nextafter(x, y):
            magnitude = builder.abs(x)
            step = builder.select(magnitude < smallest_normal, tiny, magnitude * factor)
            moved = x + builder.select(y > x, step, -step)
            # from an infinity (inf * factor would make inf - inf) to the largest finite
            # number; a select of two constants would type them float32, so a sign times one
            sign = builder.cast(x > 0, dt.dtype_name(a.dtype)) * 2.0 - 1.0
            moved = builder.select(magnitude.eq(math.inf), sign * largest, moved)
            moved = builder.select(x.eq(y), y, moved)
            return builder.select(builder.logical_or(x.ne(x), y.ne(y)), x + y, moved)

        return a._elementwise(nextafter, [b], "nextafter")

    def copysign(self, other) -> "Tensor":
        """``|self|`` with ``other``'s sign (``-0.0`` counts as negative); a float result.
        The gradient is 0 where ``self`` is 0, as PyTorch's."""
        a, b = _float_operands(self, other)
        if not isinstance(b, Tensor):
            negative = math.copysign(1.0, b) < 0
            return a._elementwise(lambda p: -builder.abs(p) if negative else builder.abs(p), [],
                                  "copysign")
        return a._elementwise(
            lambda p, q: builder.select(_sign_bit(q), -builder.abs(p), builder.abs(p)), [b],
            "copysign")

    def trunc(self) -> "Tensor":
        """Rounded toward zero (integers unchanged); zero gradient, as PyTorch's."""
        if not dt.is_float(self.dtype):
            return self.clone()
        return self._elementwise(_trunc, [], "trunc")

    fix = trunc

    def frac(self) -> "Tensor":
        """``x - trunc(x)`` (the sign of ``x``); gradient 1."""
        return self._elementwise(lambda a: a - _trunc(a), [], "frac")

    def isnan(self) -> "Tensor":
        return self._elementwise(lambda a: a.ne(a), [], "isnan", dt.BOOL)

    def isinf(self) -> "Tensor":
        if not dt.is_float(self.dtype):
            return self._elementwise(lambda a: a.ne(a), [], "isinf", dt.BOOL)
        return self._elementwise(lambda a: builder.abs(a).eq(math.inf), [], "isinf", dt.BOOL)

    def isfinite(self) -> "Tensor":
        if not dt.is_float(self.dtype):
            return self._elementwise(lambda a: a.eq(a), [], "isfinite", dt.BOOL)
        return self._elementwise(lambda a: builder.abs(a) < math.inf, [], "isfinite", dt.BOOL)

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> "Tensor":
        """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and
        the dtype's largest and lowest finite values), as PyTorch's; the gradient is 0 at the
        replaced elements.

            x.nan_to_num(posinf=1e4, neginf=-1e4)
        """
        if not dt.is_float(self.dtype):
            return self.clone()
        largest = float(_finfo_max(self.dtype))
        high = largest if posinf is None else float(posinf)
        low = -largest if neginf is None else float(neginf)

        def replace(a):
            finite = builder.select(a > largest, high, builder.select(a < -largest, low, a))
            return builder.select(a.ne(a), float(nan), finite)

        return self._elementwise(replace, [], "nan_to_num")

    def lerp(self, end, weight) -> "Tensor":
        """``self + weight * (end - self)``, computed from the nearer end as PyTorch's
        (``end - (end - self) * (1 - weight)`` where ``weight >= 0.5``), so ``weight == 1``
        gives ``end`` exactly.

            ema = ema.lerp(value, 0.1)
        """
        def lerp(start, stop, w):
            diff = stop - start
            return builder.select(builder.abs(w) < 0.5, start + diff * w, stop - diff * (1.0 - w))

        return self._elementwise(lerp, [end, weight], "lerp")

    def addcmul(self, tensor1: "Tensor", tensor2: "Tensor", *, value=1) -> "Tensor":
        """``self + value * tensor1 * tensor2``."""
        return self._elementwise(lambda s, p, q: s + p * q * value, [tensor1, tensor2], "addcmul")

    def addcdiv(self, tensor1: "Tensor", tensor2: "Tensor", *, value=1) -> "Tensor":
        """``self + value * tensor1 / tensor2`` (floats only, as PyTorch's)."""
        for operand in (self, tensor1, tensor2):
            if isinstance(operand, Tensor) and not dt.is_float(operand.dtype):
                raise DTypeError("addcdiv: integer division is not supported (PyTorch's "
                                 "rule); use floating-point tensors")
        return self._elementwise(lambda s, p, q: s + p / q * value, [tensor1, tensor2], "addcdiv")

    def clamp(self, min=None, max=None) -> "Tensor":  # noqa: A002 (PyTorch's names)
        """Each element limited to ``[min, max]`` (numbers or broadcastable tensors; either may
        be None). Where ``min > max`` the result is ``max``, and the gradient reaches ``self``
        where ``min <= x <= max``, as PyTorch's.

            x.clamp(min=0.0)            # a ReLU
            x.clamp(-1.0, 1.0)
        """
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must not be None")
        result = self
        if min is not None:
            result = result._elementwise(lambda a, lo: builder.select(a < lo, lo, a), [min],
                                         "clamp")
        if max is not None:
            result = result._elementwise(lambda a, hi: builder.select(a > hi, hi, a), [max],
                                         "clamp")
        return result

    clip = clamp

    def masked_fill(self, mask: "Tensor", value) -> "Tensor":
        """``value`` where the bool ``mask`` (broadcast to this tensor's shape) is True, this
        tensor elsewhere; ``value`` a number or a 0-d tensor, the result in this dtype.

            scores.masked_fill(~causal_mask, -math.inf)
        """
        if not isinstance(mask, Tensor) or not dt.is_bool(mask.dtype):
            kind = dt.dtype_name(mask.dtype) if isinstance(mask, Tensor) else type(mask).__name__
            raise DTypeError(f"masked_fill: mask must be a bool tensor, not {kind}")
        if _broadcast_shapes("masked_fill", [self.shape, mask.shape]) != self.shape:
            raise ShapeError(f"masked_fill: mask of shape {mask.shape} does not broadcast to "
                             f"the tensor's shape {self.shape}")
        if isinstance(value, Tensor) and value.ndim != 0:
            raise ShapeError(f"masked_fill: value must be a number or a 0-d tensor, not a "
                             f"tensor of shape {value.shape}")
        name = dt.dtype_name(self.dtype)
        same = _where_dtype(value, self) == self.dtype

        def fill(a, m, v):
            chosen = builder.select(m, v, a)
            return chosen if same else builder.cast(chosen, name)

        return self._elementwise(fill, [mask, value], "masked_fill", self.dtype)

    def softmax(self, dim: int) -> "Tensor":
        """``gingham.nn.functional.softmax(self, dim)``."""
        from ..nn import functional

        return functional.softmax(self, dim)

    def log_softmax(self, dim: int) -> "Tensor":
        """``gingham.nn.functional.log_softmax(self, dim)``."""
        from ..nn import functional

        return functional.log_softmax(self, dim)

    def astype(self, dtype) -> "Tensor":
        target = dt.as_tile_dtype(dtype)
        name = dt.dtype_name(target)
        return self._elementwise(lambda a: builder.cast(a, name), [], "astype", target)

    def type_as(self, other: "Tensor") -> "Tensor":
        """This tensor in ``other``'s dtype (itself when the dtypes are equal)."""
        return self._in_dtype(other.dtype)

    def clone(self) -> "Tensor":
        """A new tensor with this value; gradients flow through it to ``self``, as PyTorch's."""
        name = dt.dtype_name(self.dtype)
        return self._elementwise(lambda a: builder.cast(a, name), [], "clone")

    # reductions -----------------------------------------------------------------------------------
    # Each takes PyTorch's ``dim``/``keepdim`` and NumPy's ``axis``/``keepdims`` (PyTorch accepts
    # those spellings too); ``dim`` is an int, a tuple of ints or None (every dim).
    def sum(self, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
        dims, keep = _dim_arguments("sum", dim, keepdim, axis, keepdims)
        x = self if dtype is None else self.astype(dtype)
        return _reduce(_autocast_float32(x), "+", dims, keep, "sum")

    def mean(self, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
        dims, keep = _dim_arguments("mean", dim, keepdim, axis, keepdims)
        x = _autocast_float32(self if dtype is None else self.astype(dtype))
        count = math.prod(x.shape[a] for a in _axes("mean", x.shape, dims)) or 1
        total = _reduce(x if dt.is_float(x.dtype) else x.astype(np.float32), "+", dims, keep,
                        "mean")
        return total / float(count)

    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype=None,
             axis=None, keepdims=None) -> "Tensor":
        """The product of the elements (along ``dim``, one dim as PyTorch's ``prod``). Its
        gradient is PyTorch's also where elements are 0: a row with one zero sends the
        product of its other elements to that zero and 0 to the rest.

            x.prod(dim=1)            # torch.prod(x, dim=1)
        """
        dims, keep = _dim_arguments("prod", dim, keepdim, axis, keepdims)
        if isinstance(dims, (tuple, list)):
            raise TypeError(f"prod: dim must be an int or None, not {dims!r} (PyTorch's prod "
                            "takes one dim)")
        x = self if dtype is None else self.astype(dtype)
        if dt.is_bool(x.dtype):
            x = x.astype(dt.INT32)  # an integer, as sum() gives for bools
        return _reduce(_autocast_float32(x), "*", dims, keep, "prod")

    def cumsum(self, dim: int, *, dtype=None) -> "Tensor":
        """Running sums along ``dim``, as PyTorch's ``cumsum`` (integers and bools give
        int64). One contraction whose taps before the start are dropped by the valid-index
        rule, ``O[i] = +(X[i - k]), k < N``: ``N^2`` work along the axis, for short ones.

            x.cumsum(1)              # torch.cumsum(x, 1)
        """
        return _cumulative(self, "+", dim, dtype, "cumsum")

    def cumprod(self, dim: int, *, dtype=None) -> "Tensor":
        """Running products along ``dim`` (PyTorch's ``cumprod``), ``O[i] = *(X[i - k])``;
        gradients as :meth:`prod`'s, also through zeros."""
        return _cumulative(self, "*", dim, dtype, "cumprod")

    def max(self, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
        """The largest element; with ``dim``, PyTorch's ``(values, indices)``
        (:class:`ValuesIndices`, the first maximal position); with a tensor, ``maximum``.

        The NumPy spellings ``axis=``/``keepdims=`` give the values alone, as this method did
        before it took PyTorch's ``dim`` (``x.max(-1, keepdims=True)`` is NumPy's call);
        :meth:`amax` is PyTorch's name for that.
        """
        return _max_or_min(self, ">", "max", dim, keepdim, axis, keepdims)

    def min(self, dim=None, keepdim: bool = False, *, axis=None, keepdims=None):
        """As :meth:`max`, the smallest element (``(values, indices)`` with ``dim``)."""
        return _max_or_min(self, "<", "min", dim, keepdim, axis, keepdims)

    def amax(self, dim=None, keepdim: bool = False) -> "Tensor":
        """The largest values along ``dim`` (an int, a tuple, or None: every dim). On ties the
        gradient goes to the first largest element, where PyTorch's splits it among them."""
        return _reduce(self, ">", _none_if_empty(dim), keepdim, "amax")

    def amin(self, dim=None, keepdim: bool = False) -> "Tensor":
        return _reduce(self, "<", _none_if_empty(dim), keepdim, "amin")

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> "Tensor":
        """The int64 position of the first largest element along ``dim``; without ``dim``, in
        the flattened tensor (0-d, or all ones with ``keepdim``), as PyTorch's."""
        return _arg_extreme(self, ">", "argmax", dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> "Tensor":
        return _arg_extreme(self, "<", "argmin", dim, keepdim)

    def var(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> "Tensor":
        """The variance along ``dim``: the sum of squared deviations over ``N - correction``
        (``correction=1`` by default, Bessel's; ``unbiased=False`` is ``correction=0``), as
        PyTorch's. ``N <= correction`` gives inf or NaN, as PyTorch's (without its warning).

            x.var(dim=0, correction=0, keepdim=True)
        """
        return _variance(self, "var", dim, unbiased, keepdim, correction)

    def std(self, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> "Tensor":
        """The square root of :meth:`var` (same arguments)."""
        return _variance(self, "std", dim, unbiased, keepdim, correction).sqrt()

    def logsumexp(self, dim, keepdim: bool = False) -> "Tensor":
        """``log(sum(exp(x)))`` along ``dim`` (an int or a tuple), shifted by the max (0 where
        the max is infinite, as PyTorch's) so nothing overflows; the gradient is the softmax.

            x.logsumexp(-1)          # torch.logsumexp(x, -1)
        """
        x = _floating(self, autocast=True)
        axes = _none_if_empty(dim)
        shift = _reduce(x, ">", axes, True, "logsumexp")._elementwise(
            lambda m: builder.stop_gradient(builder.select(builder.abs(m).eq(math.inf), 0.0, m)),
            [], "logsumexp")
        total = (x - shift).exp().sum(axes, keepdim=True).log() + shift
        return total if keepdim else total.squeeze(_axes("logsumexp", x.shape, axes))

    def count_nonzero(self, dim=None) -> "Tensor":
        """The int64 number of nonzero elements along ``dim`` (an int, a tuple or None)."""
        return (self != 0).astype(dt.INT64).sum(_none_if_empty(dim))

    def nansum(self, dim=None, keepdim: bool = False, *, dtype=None) -> "Tensor":
        """:meth:`sum` with NaNs counted as zero (their gradient is 0)."""
        x = self if dtype is None else self.astype(dtype)
        return _without_nan(x).sum(_none_if_empty(dim), keepdim)

    def nanmean(self, dim=None, keepdim: bool = False, *, dtype=None) -> "Tensor":
        """The mean of the elements that are not NaN (NaN where all are), as PyTorch's."""
        x = self if dtype is None else self.astype(dtype)
        if not dt.is_float(x.dtype):
            raise DTypeError(f"nanmean: needs a floating-point tensor, not "
                             f"{dt.dtype_name(x.dtype)} (give dtype=)")
        axes = _none_if_empty(dim)
        count = (~x.isnan()).astype(x.dtype).sum(axes, keepdim)
        return _without_nan(x).sum(axes, keepdim) / count

    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> "MinMax":
        """``(amin, amax)`` along ``dim`` (every dim when None), as PyTorch's ``aminmax``."""
        if dim is not None and not isinstance(dim, (int, np.integer)):
            raise TypeError(f"aminmax: dim must be an int or None, not {dim!r}")
        return MinMax(self.amin(dim, keepdim), self.amax(dim, keepdim))

    # shapes ----------------------------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        """This tensor's elements in ``shape`` (varargs or one sequence; one size may be -1)."""
        return reshape(self, _varargs(shape))

    def view(self, *shape) -> "Tensor":
        """:meth:`reshape`: gingham's tensors have no strides, so any view is possible."""
        return reshape(self, _varargs(shape), "view")

    def view_as(self, other: "Tensor") -> "Tensor":
        return reshape(self, other.shape, "view_as")

    def reshape_as(self, other: "Tensor") -> "Tensor":
        return reshape(self, other.shape, "reshape_as")

    def transpose(self, *dims, dim0: int | None = None, dim1: int | None = None) -> "Tensor":
        """PyTorch's ``transpose(dim0, dim1)``: those two dims swapped.

        NumPy's forms stay, as gingham's code uses them: no argument reverses the dims, and a
        full permutation (varargs or one sequence, as ``x.transpose(0, 2, 3, 1)``) permutes.
        """
        if dim0 is not None or dim1 is not None:
            dims = (dim0, dim1)
        if len(dims) == 2 and not isinstance(dims[0], (tuple, list)):
            first = _dim("transpose", self.shape, dims[0])
            second = _dim("transpose", self.shape, dims[1])
            order = list(range(self.ndim))
            order[first], order[second] = order[second], order[first]
            return permute_dims(self, order)
        return permute_dims(self, _varargs(dims) or tuple(reversed(range(self.ndim))))

    swapaxes = swapdims = transpose

    def permute(self, *dims) -> "Tensor":
        """The dims reordered: ``x.permute(0, 2, 3, 1)`` (NCHW to NHWC) or ``x.permute(dims)``."""
        return permute_dims(self, _varargs(dims), "permute")

    def t(self) -> "Tensor":
        """A matrix transposed; a 0-d or 1-d tensor as it is, as PyTorch's."""
        if self.ndim > 2:
            raise ShapeError(f"t: expects a tensor with at most 2 dims, not shape {self.shape}; "
                             "use transpose(dim0, dim1)")
        return self.transpose(0, 1) if self.ndim == 2 else self

    @property
    def T(self) -> "Tensor":
        return permute_dims(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> "Tensor":
        """The last two dims swapped (a batch of matrices transposed)."""
        if self.ndim < 2:
            raise ShapeError(f"mT: needs at least 2 dims, not shape {self.shape}")
        return self.transpose(-2, -1)

    def unsqueeze(self, dim: int) -> "Tensor":
        """A dim of size 1 inserted at ``dim`` (``-ndim - 1 <= dim <= ndim``)."""
        position = _dim("unsqueeze", self.shape, dim, self.ndim + 1)
        return reshape(self, self.shape[:position] + (1,) + self.shape[position:], "unsqueeze")

    def squeeze(self, dim=None) -> "Tensor":
        """Dims of size 1 removed: all of them, or those of ``dim`` (an int or a tuple) that
        have size 1 (a larger one named there stays, as in PyTorch)."""
        if dim is None:
            chosen = set(range(self.ndim))
        else:
            dims = dim if isinstance(dim, (tuple, list)) else (dim,)
            chosen = {_dim("squeeze", self.shape, d) for d in dims}
        shape = tuple(s for a, s in enumerate(self.shape) if not (a in chosen and s == 1))
        return reshape(self, shape, "squeeze")

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        """Dims ``start_dim`` to ``end_dim`` (inclusive) merged into one; a 0-d tensor becomes
        1-d, as PyTorch's. ``x.flatten(1)`` is the usual ``[N, C, H, W] -> [N, C*H*W]``."""
        if self.ndim == 0:
            return reshape(self, (1,), "flatten")
        start = _dim("flatten", self.shape, start_dim)
        end = _dim("flatten", self.shape, end_dim)
        if start > end:
            raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                             f"for shape {self.shape}")
        merged = math.prod(self.shape[start:end + 1])
        return reshape(self, self.shape[:start] + (merged,) + self.shape[end + 1:], "flatten")

    def unflatten(self, dim: int, sizes: Sequence[int]) -> "Tensor":
        """Dim ``dim`` split into ``sizes`` (one may be -1): the inverse of :meth:`flatten`."""
        position = _dim("unflatten", self.shape, dim)
        sizes = tuple(int(s) for s in sizes)
        if sizes.count(-1) == 1:
            known = math.prod(s for s in sizes if s != -1)
            sizes = tuple(self.shape[position] // known if known and s == -1 else s
                          for s in sizes)
        if math.prod(sizes) != self.shape[position]:
            raise ShapeError(f"unflatten: sizes {sizes} do not multiply to dim {dim}'s size "
                             f"{self.shape[position]} (shape {self.shape})")
        shape = self.shape[:position] + sizes + self.shape[position + 1:]
        return reshape(self, shape, "unflatten")

    def expand(self, *sizes) -> "Tensor":
        """This tensor broadcast to ``sizes`` (new dims in front; -1 keeps a dim; only dims of
        size 1 grow), without copying in PyTorch and fused into its readers here.

            bias.expand(batch, -1)      # [C] -> [batch, C]
        """
        return _broadcast_to(self, _varargs(sizes), "expand")

    def expand_as(self, other: "Tensor") -> "Tensor":
        return _broadcast_to(self, other.shape, "expand_as")

    def broadcast_to(self, size: Sequence[int]) -> "Tensor":
        return _broadcast_to(self, tuple(size), "broadcast_to")

    def repeat(self, *sizes) -> "Tensor":
        """This tensor tiled ``sizes[d]`` times along each dim (more sizes than dims add
        leading dims), as PyTorch's ``repeat`` (NumPy's ``tile``).

            x.repeat(2, 1)              # [a, b] -> [2a, b]: x stacked on itself
        """
        repeats = tuple(int(r) for r in _varargs(sizes))
        if len(repeats) < self.ndim:
            raise ShapeError(f"repeat: {len(repeats)} repeats {repeats} for a tensor of shape "
                             f"{self.shape}; give at least one per dim")
        if any(r < 0 for r in repeats):
            raise ShapeError(f"repeat: repeats {repeats} must not be negative")
        shape = (1,) * (len(repeats) - self.ndim) + self.shape
        # [s0, s1] -> [1, s0, 1, s1] -> [r0, s0, r1, s1] -> [r0*s0, r1*s1]
        interleaved = tuple(v for s in shape for v in (1, s))
        spread = tuple(v for r, s in zip(repeats, shape) for v in (r, s))
        tiled = _broadcast_to(reshape(self, interleaved, "repeat"), spread, "repeat")
        return reshape(tiled, tuple(r * s for r, s in zip(repeats, shape)), "repeat")

    # Layout ops as methods, as torch.Tensor has them (the module functions say what each does).
    def flip(self, *dims) -> "Tensor": return flip(self, _varargs(dims))
    def fliplr(self) -> "Tensor": return fliplr(self)
    def flipud(self) -> "Tensor": return flipud(self)
    def roll(self, shifts, dims=None) -> "Tensor": return roll(self, shifts, dims)

    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> "Tensor":
        return rot90(self, k, dims)

    def tile(self, *dims) -> "Tensor": return tile_dims(self, _varargs(dims))

    def repeat_interleave(self, repeats: int, dim: int | None = None, *,
                          output_size: int | None = None) -> "Tensor":
        return repeat_interleave(self, repeats, dim, output_size=output_size)

    def tril(self, diagonal: int = 0) -> "Tensor": return tril(self, diagonal)
    def triu(self, diagonal: int = 0) -> "Tensor": return triu(self, diagonal)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> "Tensor":
        return _diagonal(self, offset, dim1, dim2)

    def diag(self, diagonal: int = 0) -> "Tensor": return diag(self, diagonal)
    def trace(self) -> "Tensor": return trace(self)
    def movedim(self, source, destination) -> "Tensor": return movedim(self, source, destination)
    moveaxis = movedim
    def outer(self, vec2: "Tensor") -> "Tensor": return outer(self, vec2)
    def inner(self, other: "Tensor") -> "Tensor": return inner(self, other)
    def kron(self, other: "Tensor") -> "Tensor": return kron(self, other)
    def cross(self, other: "Tensor", dim: int | None = None) -> "Tensor": return cross(self, other, dim)

    def diff(self, n: int = 1, dim: int = -1, prepend: "Tensor | None" = None,
             append: "Tensor | None" = None) -> "Tensor":
        return diff(self, n, dim, prepend, append)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """Elements ``start`` to ``start + length`` of dim ``dim`` (``start`` may be negative)."""
        axis = _dim("narrow", self.shape, dim)
        size = self.shape[axis]
        begin = start + size if start < 0 else start
        if not 0 <= begin <= size or length < 0 or begin + length > size:
            raise ShapeError(f"narrow: start {start} and length {length} do not fit dim {dim} "
                             f"of size {size} (shape {self.shape})")
        return _getitem(self, (slice(None),) * axis + (slice(begin, begin + length),))

    def split(self, split_size_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        """Pieces along ``dim``: of ``split_size`` each (the last may be smaller), or of the
        sizes in a list, which must add up to the dim's size, as PyTorch's.

            q, k, v = qkv.split(d_model, dim=-1)
        """
        axis = _dim("split", self.shape, dim)
        size = self.shape[axis]
        if isinstance(split_size_or_sections, (int, np.integer)):
            step = int(split_size_or_sections)
            if step <= 0:
                raise ShapeError(f"split: split_size must be positive, not {step}")
            sections = [min(step, size - begin) for begin in range(0, size, step)] or [0]
        else:
            sections = [int(s) for s in split_size_or_sections]
            if sum(sections) != size or any(s < 0 for s in sections):
                raise ShapeError(f"split: sections {sections} do not add up to dim {dim}'s size "
                                 f"{size} (shape {self.shape})")
        starts = itertools.accumulate([0] + sections[:-1])
        return tuple(self.narrow(axis, begin, length) for begin, length in zip(starts, sections))

    def chunk(self, chunks: int, dim: int = 0) -> tuple["Tensor", ...]:
        """At most ``chunks`` pieces along ``dim``, each ``ceil(size / chunks)`` long but the
        last (so there may be fewer pieces), as PyTorch's."""
        if chunks <= 0:
            raise ShapeError(f"chunk: chunks must be positive, not {chunks}")
        size = self.shape[_dim("chunk", self.shape, dim)]
        return self.split(max(-(-size // chunks), 1), dim)

    def unbind(self, dim: int = 0) -> tuple["Tensor", ...]:
        """The slices along ``dim``, that dim removed: ``for row in x.unbind()``."""
        axis = _dim("unbind", self.shape, dim)
        return tuple(_getitem(self, (slice(None),) * axis + (i,))
                     for i in range(self.shape[axis]))

    def __getitem__(self, key) -> "Tensor":
        """Basic indexing (integers, slices, None, ``...``) and, on one dim, an integer
        Tensor, ndarray or list (``x[idx]``, ``x[:, [0, 2]]``); a boolean mask is refused
        (its result's shape would depend on the values). See :mod:`gingham.frontend.indexing`.
        """
        return _getitem(self, key)

    # indexing with integer tensors: gingham.frontend.indexing, PyTorch's names --------------------
    def gather(self, dim: int, index: "Tensor") -> "Tensor":
        """``gingham.gather(self, dim, index)``."""
        from . import indexing

        return indexing.gather(self, dim, index)

    def take_along_dim(self, indices: "Tensor", dim: int | None = None) -> "Tensor":
        """``gingham.take_along_dim(self, indices, dim)``."""
        from . import indexing

        return indexing.take_along_dim(self, indices, dim)

    def index_select(self, dim: int, index: "Tensor") -> "Tensor":
        """``gingham.index_select(self, dim, index)``."""
        from . import indexing

        return indexing.index_select(self, dim, index)

    def scatter(self, dim: int, index: "Tensor", src=None, *, value=None) -> "Tensor":
        """``gingham.scatter(self, dim, index, src)`` (a new tensor: gingham has no in-place
        ``scatter_``); the last of several writers to one cell wins."""
        from . import indexing

        return indexing.scatter(self, dim, index, src, value=value)

    def scatter_add(self, dim: int, index: "Tensor", src: "Tensor") -> "Tensor":
        """``gingham.scatter_add(self, dim, index, src)``."""
        from . import indexing

        return indexing.scatter_add(self, dim, index, src)

    def index_add(self, dim: int, index: "Tensor", source: "Tensor", *, alpha=1) -> "Tensor":
        """``gingham.index_add(self, dim, index, source, alpha=alpha)``."""
        from . import indexing

        return indexing.index_add(self, dim, index, source, alpha=alpha)

    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False):
        """``gingham.sort(self, dim, descending)``: ``(values, indices)``, stable."""
        from . import indexing

        return indexing.sort(self, dim, descending, stable=stable)

    def argsort(self, dim: int = -1, descending: bool = False, *,
                stable: bool = False) -> "Tensor":
        """``gingham.argsort(self, dim, descending)``."""
        from . import indexing

        return indexing.argsort(self, dim, descending, stable=stable)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
        """``gingham.topk(self, k, dim, largest)``: ``(values, indices)``."""
        from . import indexing

        return indexing.topk(self, k, dim, largest, sorted)

    # PyTorch's method spellings --------------------------------------------------------------------
    # Each is an operator, an existing method or a module function under torch.Tensor's name and
    # arguments; the functions they call say what they compute.
    def add(self, other, *, alpha=1) -> "Tensor":
        """``self + alpha * other``, as ``torch.add``."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other, *, alpha=1) -> "Tensor":
        """``self - alpha * other``, as ``torch.sub``."""
        return self - (other if alpha == 1 else other * alpha)

    def mul(self, other) -> "Tensor": return self * other
    def true_divide(self, other) -> "Tensor": return _true_divide(self, other)
    def floor_divide(self, other) -> "Tensor": return _floor_divide(self, other)

    def div(self, other, *, rounding_mode: str | None = None) -> "Tensor":
        """``self / other`` (``rounding_mode=None``: true division, integers give float32),
        rounded toward zero (``"trunc"``) or down (``"floor"``, as ``//``), as ``torch.div``.

            x.div(3, rounding_mode="floor")      # x // 3
        """
        if rounding_mode is None:
            return _true_divide(self, other)
        if rounding_mode == "floor":
            return _floor_divide(self, other)
        if rounding_mode != "trunc":
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', not "
                             f"{rounding_mode!r}")
        if _any_float(self, other):
            return _true_divide(self, other).trunc()
        return self._elementwise(lambda x, y: x / y, [other], "div")  # C's / truncates

    subtract, multiply, divide = sub, mul, div

    def eq(self, other) -> "Tensor": return self == other
    def ne(self, other) -> "Tensor": return self != other
    def lt(self, other) -> "Tensor": return self < other
    def le(self, other) -> "Tensor": return self <= other
    def gt(self, other) -> "Tensor": return self > other
    def ge(self, other) -> "Tensor": return self >= other
    not_equal, less, less_equal, greater, greater_equal = ne, lt, le, gt, ge

    def logical_not(self) -> "Tensor": return self == 0
    def logical_and(self, other) -> "Tensor": return (self != 0) & (_as_tensor(other, self) != 0)
    def logical_or(self, other) -> "Tensor": return (self != 0) | (_as_tensor(other, self) != 0)
    def logical_xor(self, other) -> "Tensor": return (self != 0) ^ (_as_tensor(other, self) != 0)
    def bitwise_not(self) -> "Tensor": return ~self
    def bitwise_and(self, other) -> "Tensor": return self & other
    def bitwise_or(self, other) -> "Tensor": return self | other
    def bitwise_xor(self, other) -> "Tensor": return self ^ other

    def bitwise_left_shift(self, other) -> "Tensor":
        """``self << other`` on integers (C's shift: counts beyond the width are undefined)."""
        _integral("bitwise_left_shift", self, other)
        return self._elementwise(lambda a, b: a << b, [other], "bitwise_left_shift")

    def bitwise_right_shift(self, other) -> "Tensor":
        """``self >> other`` on integers, arithmetic (sign-filling) for signed ones."""
        _integral("bitwise_right_shift", self, other)
        return self._elementwise(lambda a, b: a >> b, [other], "bitwise_right_shift")

    def all(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Whether every element along ``dim`` (an int, a tuple or None: all) is nonzero;
        a bool tensor."""
        return (self == 0).astype(dt.INT32).sum(_none_if_empty(dim), keepdim) == 0

    def any(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Whether some element along ``dim`` is nonzero; a bool tensor."""
        return (self != 0).astype(dt.INT32).sum(_none_if_empty(dim), keepdim) > 0

    def matmul(self, other: "Tensor") -> "Tensor": return matmul(self, other)
    def mm(self, mat2: "Tensor") -> "Tensor": return _checked_matmul("mm", self, mat2, 2, 2)
    def bmm(self, mat2: "Tensor") -> "Tensor": return _checked_matmul("bmm", self, mat2, 3, 3)
    def mv(self, vec: "Tensor") -> "Tensor": return _checked_matmul("mv", self, vec, 2, 1)
    def dot(self, tensor: "Tensor") -> "Tensor": return _checked_matmul("dot", self, tensor, 1, 1)
    vdot = dot  # the conjugate is the identity: gingham has no complex dtypes
    def ger(self, vec2: "Tensor") -> "Tensor": return outer(self, vec2)

    def addmm(self, mat1, mat2, *, beta=1, alpha=1) -> "Tensor":
        """``beta * self + alpha * (mat1 @ mat2)``, as ``torch.addmm``."""
        return _scaled_sum(self, mat1.mm(mat2), beta, alpha)

    def addmv(self, mat, vec, *, beta=1, alpha=1) -> "Tensor":
        return _scaled_sum(self, mat.mv(vec), beta, alpha)

    def addr(self, vec1, vec2, *, beta=1, alpha=1) -> "Tensor":
        return _scaled_sum(self, outer(vec1, vec2), beta, alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1) -> "Tensor":
        return _scaled_sum(self, batch1.bmm(batch2), beta, alpha)

    def addbmm(self, batch1, batch2, *, beta=1, alpha=1) -> "Tensor":
        """``beta * self + alpha * sum_b batch1[b] @ batch2[b]``."""
        return _scaled_sum(self, batch1.bmm(batch2).sum(0), beta, alpha)

    def maximum(self, other) -> "Tensor": return maximum(self, other)
    def minimum(self, other) -> "Tensor": return minimum(self, other)

    def fmax(self, other) -> "Tensor":
        """:meth:`maximum` where a NaN loses to a number (NaN only where both are)."""
        pick = lambda a, b: builder.select(b.ne(b), a, builder.select(a.ne(a), b,  # noqa: E731
                                           builder.maximum(a, b)))
        return self._elementwise(pick, [_as_tensor(other, self)], "fmax")

    def fmin(self, other) -> "Tensor":
        """:meth:`minimum` where a NaN loses to a number."""
        pick = lambda a, b: builder.select(b.ne(b), a, builder.select(a.ne(a), b,  # noqa: E731
                                           builder.minimum(a, b)))
        return self._elementwise(pick, [_as_tensor(other, self)], "fmin")

    def clamp_min(self, min) -> "Tensor": return self.clamp(min=min)  # noqa: A002
    def clamp_max(self, max) -> "Tensor": return self.clamp(max=max)  # noqa: A002
    def positive(self) -> "Tensor": return self
    sgn = sign

    def signbit(self) -> "Tensor":
        """Whether the sign bit is set (``-0.0`` included); a bool tensor."""
        if not dt.is_float(self.dtype):
            return self < 0
        return self._elementwise(_sign_bit, [], "signbit", dt.BOOL)

    def deg2rad(self) -> "Tensor": return _floating(self) * (math.pi / 180.0)
    def rad2deg(self) -> "Tensor": return _floating(self) * (180.0 / math.pi)

    def heaviside(self, values) -> "Tensor":
        """0 where ``self < 0``, ``values`` where it is 0, 1 where it is positive."""
        return where(self == 0, values, where(self > 0, 1, 0).astype(
            _where_dtype(self, values)))

    def xlogy(self, other) -> "Tensor":
        """``self * log(other)``, 0 where ``self`` is 0 (unless ``other`` is NaN)."""
        x, y = _float_operands(self, other)
        y = _as_tensor(y, x)

        def xlogy(a, b):
            zero = builder.logical_and(a.eq(0.0), b.eq(b))
            return builder.select(zero, 0.0, a * builder.log(builder.select(zero, 1.0, b)))

        return x._elementwise(xlogy, [y], "xlogy")

    def sinc(self) -> "Tensor":
        """``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there)."""
        def sinc(a):
            zero = a.eq(0.0)
            scaled = builder.select(zero, 1.0, a) * math.pi
            return builder.select(zero, 1.0, builder.sin(scaled) / scaled)

        return _floating(self)._elementwise(sinc, [], "sinc")

    def logit(self, eps: float | None = None) -> "Tensor":
        """``log(z / (1 - z))``, ``z`` the input clamped to ``[eps, 1 - eps]`` when ``eps``."""
        z = _floating(self)
        if eps is not None:
            z = z.clamp(eps, 1.0 - eps)
        return (z / (1.0 - z)).log()

    def erfc(self) -> "Tensor":
        """``1 - erf(x)`` (absolute, not relative, float32 accuracy in the far tail)."""
        return 1.0 - _floating(self).erf()

    def erfinv(self) -> "Tensor":
        """The inverse of erf on ``(-1, 1)``, +-inf at +-1, NaN beyond; see :func:`_erfinv`."""
        return _erfinv(_floating(self))

    def float_power(self, exponent) -> "Tensor":
        """``self ** exponent`` in float64, as ``torch.float_power``."""
        power = exponent.double() if isinstance(exponent, Tensor) else float(exponent)
        return self.double() ** power

    def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> "Tensor":
        """``|self - other| <= atol + rtol * |other|`` (equal infinities too), as PyTorch's."""
        other = _as_tensor(other, self)

        def close(a, b):
            near = builder.abs(a - b) <= builder.abs(b) * rtol + atol
            result = builder.logical_or(a.eq(b), near)
            if equal_nan:
                result = builder.logical_or(result, builder.logical_and(a.ne(a), b.ne(b)))
            return result

        return self._elementwise(close, [other], "isclose", dt.BOOL)

    def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """Whether :meth:`isclose` holds everywhere: a Python bool (reads the device)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

    def equal(self, other: "Tensor") -> bool:
        """Whether the shapes and every element are equal: a Python bool (reads the device)."""
        return self.shape == other.shape and bool((self == other).all().item())

    def isposinf(self) -> "Tensor": return self.isinf() & (self > 0)
    def isneginf(self) -> "Tensor": return self.isinf() & (self < 0)
    def isreal(self) -> "Tensor":
        """True everywhere: gingham has no complex dtypes."""
        return self._elementwise(lambda a: builder.logical_or(a.eq(a), a.ne(a)), [], "isreal",
                                 dt.BOOL)

    def ldexp(self, other) -> "Tensor":
        """``self * 2 ** other``, a float result."""
        return _floating(self) * (2.0 ** _as_tensor(other, self).astype(dt.FLOAT32))

    def ravel(self) -> "Tensor": return reshape(self, (self.numel(),), "ravel")
    def ndimension(self) -> int: return self.ndim
    def nelement(self) -> int: return self.numel()
    def element_size(self) -> int: return self.dtype.itemsize
    def is_floating_point(self) -> bool: return dt.is_float(self.dtype)
    def is_signed(self) -> bool: return not (dt.is_bool(self.dtype) or self.dtype.kind == "u")
    def is_complex(self) -> bool: return False
    def is_same_size(self, other: "Tensor") -> bool: return self.shape == other.shape
    def is_nonzero(self) -> bool: return bool(self.item())
    def is_contiguous(self, memory_format=None) -> bool: return True
    def is_inference(self) -> bool: return False

    @property
    def itemsize(self) -> int: return self.dtype.itemsize

    @property
    def nbytes(self) -> int: return self.numel() * self.dtype.itemsize

    def cpu(self) -> "Tensor":
        """This tensor on gingham's ``cpu`` device (generated C), as ``to("cpu")``."""
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        """This tensor on CUDA device ``device`` (an index or an id; default ``cuda:0``)."""
        target = device if isinstance(device, str) else f"cuda:{0 if device is None else device}"
        return self.to(target)

    def get_device(self) -> int:
        """The device's index (``cuda:1`` gives 1), -1 for a device without one, as PyTorch's
        for the CPU."""
        _, _, number = self.device.partition(":")
        return int(number) if number.isdigit() else -1

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False):
        """``gingham.tensor(data)`` with this tensor's dtype and device by default."""
        return tensor(data, dtype=self.dtype if dtype is None else dtype,
                      device=device or self.device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None,
                 requires_grad: bool = False) -> "Tensor":
        shape = (int(size),) if isinstance(size, (int, np.integer)) else tuple(size)
        return self.new_tensor(np.full(shape, fill_value), dtype=dtype, device=device,
                               requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False):
        return self.new_full(_varargs(size), 0, dtype=dtype, device=device,
                             requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False):
        return self.new_full(_varargs(size), 1, dtype=dtype, device=device,
                             requires_grad=requires_grad)

    new_empty = new_zeros  # gingham has no uninitialised memory to hand out

    def where(self, condition: "Tensor", other) -> "Tensor":
        """``gingham.where(condition, self, other)``."""
        return where(condition, self, other)

    def select(self, dim: int, index: int) -> "Tensor":
        """The slice at ``index`` of dim ``dim``, that dim removed (``x.select(1, 0)`` is
        ``x[:, 0]``)."""
        axis = _dim("select", self.shape, dim)
        return _getitem(self, (slice(None),) * axis + (index,))

    def adjoint(self) -> "Tensor": return self.mT  # real dtypes: the transpose

    @property
    def mH(self) -> "Tensor": return self.mT

    @property
    def H(self) -> "Tensor": return self.t()

    def split_with_sizes(self, split_sizes: Sequence[int], dim: int = 0):
        return self.split(list(split_sizes), dim)

    def tensor_split(self, indices_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        """Pieces along ``dim``: ``n`` sections (the first ``size % n`` one longer) or the
        pieces between the given indices, as ``torch.tensor_split``.

            x.tensor_split(3)            # 7 rows: 3, 2, 2
            x.tensor_split([1, 4], 1)    # columns :1, 1:4, 4:
        """
        axis = _dim("tensor_split", self.shape, dim)
        size = self.shape[axis]
        if isinstance(indices_or_sections, Tensor):
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, (int, np.integer)):
            sections = int(indices_or_sections)
            if sections <= 0:
                raise ValueError(f"tensor_split: sections must be positive, not {sections}")
            lengths = [size // sections + (i < size % sections) for i in range(sections)]
            bounds = list(itertools.accumulate([0] + lengths))
        else:
            cuts = [min(max(int(i) + size if int(i) < 0 else int(i), 0), size)
                    for i in indices_or_sections]
            bounds = [0] + cuts + [size]
        return tuple(self.narrow(axis, begin, max(end - begin, 0))
                     for begin, end in zip(bounds[:-1], bounds[1:]))

    def hsplit(self, sections) -> tuple["Tensor", ...]:
        """:meth:`tensor_split` along dim 1 (dim 0 of a 1-d tensor); a number of sections
        must divide the dim, as PyTorch's."""
        return _even_split(self, sections, 0 if self.ndim == 1 else 1, "hsplit", 1)

    def vsplit(self, sections) -> tuple["Tensor", ...]:
        return _even_split(self, sections, 0, "vsplit", 2)

    def dsplit(self, sections) -> tuple["Tensor", ...]:
        return _even_split(self, sections, 2, "dsplit", 3)

    def unfold(self, dimension: int, size: int, step: int) -> "Tensor":
        """The windows of ``size`` along ``dimension``, every ``step``: that dim becomes the
        window count and a last dim of ``size`` is added, as ``torch.Tensor.unfold``.

            frames = signal.unfold(-1, 400, 160)
        """
        axis = _dim("unfold", self.shape, dimension)
        length = self.shape[axis] if self.ndim else 1
        if size < 0 or size > length or step <= 0:
            raise ShapeError(f"unfold: size {size} and step {step} do not fit dim {dimension} "
                             f"of size {length} (shape {self.shape})")
        count = (length - size) // step + 1
        starts = np.arange(count)[:, None] * step + np.arange(size)[None, :]
        x = self if self.ndim else reshape(self, (1,), "unfold")
        picked = x.index_select(axis, tensor(starts.reshape(-1), device=self.device))
        windows = reshape(picked, x.shape[:axis] + (count, size) + x.shape[axis + 1:], "unfold")
        return movedim(windows, axis + 1, -1)

    def sum_to_size(self, *size) -> "Tensor":
        """Summed over the dims that broadcasting ``size`` to this shape would expand."""
        target = tuple(_varargs(size))
        lead = self.ndim - len(target)
        dims = tuple(range(lead)) + tuple(lead + a for a, s in enumerate(target)
                                          if s == 1 and self.shape[lead + a] != 1)
        return reshape(self.sum(dims, keepdim=True) if dims else self, target, "sum_to_size")

    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> "Tensor":
        """The vector ``p``-norm over ``dim`` (every dim when None): ``p`` a number, ``inf``,
        ``-inf``, 0 (the nonzero count) or ``"fro"`` (2), as ``torch.norm`` on vectors;
        matrix norms are ``gingham.linalg``'s.

            x.norm(dim=-1, keepdim=True)
        """
        from ..linalg import vector_norm

        p = 2 if p == "fro" else p
        if not isinstance(p, (int, float)) or isinstance(p, bool):
            raise ValueError(f"norm: p must be a number, inf or 'fro', not {p!r} (nuclear "
                             "and matrix norms are gingham.linalg's)")
        x = _floating(self if dtype is None else self.astype(dtype))
        return vector_norm(x, p, _none_if_empty(dim), keepdim)

    def dist(self, other, p: float = 2) -> "Tensor":
        """``(self - other).norm(p)``."""
        return (self - other).norm(p)

    def logcumsumexp(self, dim: int) -> "Tensor":
        """``log(cumsum(exp(x)))`` along ``dim``, shifted by the dim's max so nothing
        overflows."""
        x = _floating(self, autocast=True)
        shift = x.amax(dim, keepdim=True)._elementwise(
            lambda m: builder.stop_gradient(builder.select(builder.abs(m).eq(math.inf), 0.0, m)),
            [], "logcumsumexp")
        return (x - shift).exp().cumsum(dim).log() + shift

    def cummax(self, dim: int) -> "ValuesIndices":
        """``(values, indices)``: the running max along ``dim`` and the last position where
        it is reached, as ``torch.cummax``; gradients reach those positions."""
        return _running_extreme(self, ">", dim, "cummax")

    def cummin(self, dim: int) -> "ValuesIndices":
        return _running_extreme(self, "<", dim, "cummin")

    def msort(self) -> "Tensor": return self.sort(0).values

    # Methods whose functions live in modules built on this one (imported when called):
    # x.det() is gingham.linalg.det(x), x.stft(400) gingham.signal.stft(x, 400), ...
    det = _delegated("..linalg", "det")
    logdet = _delegated("..linalg", "logdet")
    slogdet = _delegated("..linalg", "slogdet")
    inverse = _delegated("..linalg", "inv")
    cholesky = _delegated("..linalg", "cholesky")
    cholesky_inverse = _delegated("..linalg", "cholesky_inverse")
    cholesky_solve = _delegated("..linalg", "cholesky_solve")
    triangular_solve = _delegated("..linalg", "triangular_solve")
    qr = _delegated("..linalg", "torch_qr")
    svd = _delegated("..linalg", "torch_svd")
    geqrf = _delegated("..linalg", "geqrf")
    orgqr = _delegated("..linalg", "orgqr")
    pinverse = _delegated("..linalg", "pinverse")
    matrix_power = _delegated("..linalg", "matrix_power")
    matrix_exp = _delegated("..linalg", "matrix_exp")
    lu = _delegated("..linalg", "torch_lu")
    lu_solve = _delegated("..linalg", "torch_lu_solve")
    stft = _delegated("..signal", "stft")
    istft = _delegated("..signal", "istft")
    bincount = _delegated(".indexing", "bincount")
    # the special functions (gingham/frontend/special.py)
    lgamma = _delegated(".special", "lgamma")
    digamma = _delegated(".special", "digamma")
    mvlgamma = _delegated(".special", "mvlgamma")
    igamma = _delegated(".special", "igamma")
    igammac = _delegated(".special", "igammac")
    i0 = _delegated(".special", "i0")

    def polygamma(self, n: int) -> "Tensor":
        """``torch.polygamma(n, self)``: the ``n``-th derivative of digamma."""
        from .special import polygamma

        return polygamma(n, self)
    histc = _delegated(".indexing", "histc")
    histogram = _delegated(".indexing", "histogram")
    index_reduce = _delegated(".indexing", "index_reduce")
    put = _delegated(".indexing", "put")
    frexp = _delegated(".numerics", "frexp")
    renorm = _delegated("..linalg", "renorm")
    nanquantile = _delegated(".indexing", "nanquantile")
    nanmedian = _delegated(".indexing", "nanmedian")
    bernoulli = _delegated(".sampling", "bernoulli")

    def corrcoef(self) -> "Tensor":
        """The correlation coefficients of the rows (variables), as ``torch.corrcoef``."""
        return corrcoef(self)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> "ValuesIndices":
        """``(values, indices)`` of the ``k``-th smallest element along ``dim`` (1-based)."""
        from . import indexing

        return indexing.kthvalue(self, k, dim, keepdim)

    def median(self, dim=None, keepdim: bool = False):
        """The lower median (the ``(n - 1) // 2``-th smallest); with ``dim``,
        ``(values, indices)``, as ``torch.median``."""
        from . import indexing

        return indexing.median(self, dim, keepdim)

    def mode(self, dim: int = -1, keepdim: bool = False) -> "ValuesIndices":
        """``(values, indices)``: the most frequent value along ``dim`` (the smallest of
        equally frequent ones) and its last position, as ``torch.mode``."""
        from . import indexing

        return indexing.mode(self, dim, keepdim)

    def quantile(self, q, dim=None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> "Tensor":
        """``gingham.quantile(self, q, dim, keepdim, interpolation=...)``."""
        from . import indexing

        return indexing.quantile(self, q, dim, keepdim, interpolation=interpolation)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> "Tensor":
        return diag_embed(self, offset, dim1, dim2)

    def diagflat(self, offset: int = 0) -> "Tensor": return diag(self.flatten(), offset)

    def cov(self, *, correction: int = 1, fweights=None, aweights=None) -> "Tensor":
        return cov(self, correction=correction, fweights=fweights, aweights=aweights)

    def hardshrink(self, lambd: float = 0.5) -> "Tensor":
        from ..nn import functional

        return functional.hardshrink(self, lambd)

    def prelu(self, weight: "Tensor") -> "Tensor":
        from ..nn import functional

        return functional.prelu(self, weight)

    def multinomial(self, num_samples: int, replacement: bool = False, *, generator=None):
        from ..nn import functional

        return functional.multinomial(self, num_samples, replacement, generator=generator)

    def take(self, index: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.take(self, index)

    def masked_select(self, mask: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.masked_select(self, mask)

    def masked_scatter(self, mask: "Tensor", source: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.masked_scatter(self, mask, source)

    def nonzero(self, *, as_tuple: bool = False):
        from . import indexing

        return indexing.nonzero(self, as_tuple=as_tuple)

    def argwhere(self) -> "Tensor": return self.nonzero()

    def index_fill(self, dim: int, index: "Tensor", value) -> "Tensor":
        from . import indexing

        return indexing.index_fill(self, dim, index, value)

    def index_copy(self, dim: int, index: "Tensor", source: "Tensor") -> "Tensor":
        from . import indexing

        return indexing.index_copy(self, dim, index, source)

    def index_put(self, indices, values, accumulate: bool = False) -> "Tensor":
        from . import indexing

        return indexing.index_put(self, indices, values, accumulate)

    def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str, *,
                       include_self: bool = True) -> "Tensor":
        from . import indexing

        return indexing.scatter_reduce(self, dim, index, src, reduce, include_self=include_self)

    def slice_scatter(self, src: "Tensor", dim: int = 0, start: int | None = None,
                      end: int | None = None, step: int = 1) -> "Tensor":
        from . import indexing

        return indexing.slice_scatter(self, src, dim, start, end, step)

    def select_scatter(self, src: "Tensor", dim: int, index: int) -> "Tensor":
        from . import indexing

        return indexing.select_scatter(self, src, dim, index)

    def diagonal_scatter(self, src: "Tensor", offset: int = 0, dim1: int = 0,
                         dim2: int = 1) -> "Tensor":
        from . import indexing

        return indexing.diagonal_scatter(self, src, offset, dim1, dim2)

    def unique(self, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
               return_counts: bool = False, dim: int | None = None):
        from . import indexing

        return indexing.unique(self, sorted, return_inverse, return_counts, dim)

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None):
        from . import indexing

        return indexing.unique_consecutive(self, return_inverse, return_counts, dim)

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
        leaves = [t for t in graph_inputs([self]) if t.requires_grad]
        for leaf in leaves:
            if leaf._snapshot_of is not None:
                raise GinghamError(
                    "backward(): a tensor this gradient needs was modified by an in-place "
                    "operation after it was used (as PyTorch, gingham refuses: the gradient "
                    "would go to its old value); do the in-place update after backward(), "
                    "or use the out-of-place operation")
        if not leaves:
            raise GinghamError("backward(): no tensor in the graph requires a gradient")
        # Gradients are lazy tensors: the gradient program joins the graph, so an optimiser
        # step computes forward, backward and update as one compiled program.
        grads = _gradients(self, leaves, cotangent)
        for leaf, grad in zip(leaves, grads):
            if leaf._moved_from is not None:
                # The gradient of a copy from another device continues there, as that
                # graph's own backward (each device's graph compiles for its device).
                source = leaf._moved_from
                source.backward(grad.to(source.device, source.dtype))
                continue
            leaf.grad = grad if leaf.grad is None else leaf.grad + grad
            leaf._backward_roots.append(self)


    # dtypes -------------------------------------------------------------------------------------------
    # Last in the class: a method named float, int or bool shadows the builtin in the class
    # body below it (the methods' bodies still see the builtins).
    def float(self) -> "Tensor": return self._in_dtype(dt.FLOAT32)
    def double(self) -> "Tensor": return self._in_dtype(np.dtype(np.float64))
    def half(self) -> "Tensor": return self._in_dtype(dt.FLOAT16)
    def bfloat16(self) -> "Tensor": return self._in_dtype("bfloat16")
    def int(self) -> "Tensor": return self._in_dtype(dt.INT32)
    def long(self) -> "Tensor": return self._in_dtype(dt.INT64)
    def bool(self) -> "Tensor": return self._in_dtype(dt.BOOL)
    def byte(self) -> "Tensor": return self._in_dtype(np.dtype(np.uint8))
    def char(self) -> "Tensor": return self._in_dtype(np.dtype(np.int8))
    def short(self) -> "Tensor": return self._in_dtype(np.dtype(np.int16))

    def _in_dtype(self, dtype) -> "Tensor":
        """This tensor in ``dtype``, itself when it has that dtype already (as PyTorch's
        ``x.float()`` returns ``x`` for a float32 ``x``)."""
        target = dt.as_tile_dtype(dtype)
        return self if self.dtype == target else self.astype(target)


# Python's rule for an operand of a type an operator does not know: return NotImplemented, so
# that the other operand's reflected operator runs (a Keras variable beside a gingham tensor,
# ``gradient + accumulator``, computes through the variable's ``__radd__``).
_OPERANDS = (Tensor, bool, int, float, np.number, np.ndarray)


def _deferring(operator: Callable) -> Callable:
    def deferring(self, other):
        if not isinstance(other, _OPERANDS):
            return NotImplemented
        return operator(self, other)

    deferring.__name__ = operator.__name__
    deferring.__doc__ = operator.__doc__
    return deferring


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "pow", "rpow",
              "mod", "rmod", "floordiv", "rfloordiv", "lt", "le", "gt", "ge", "eq", "ne", "and",
              "rand", "or", "ror", "xor", "rxor", "matmul"):
    setattr(Tensor, f"__{_name}__", _deferring(getattr(Tensor, f"__{_name}__")))
del _name


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


def _floating(x: Tensor, autocast: bool = False) -> Tensor:
    """``x`` in a floating-point dtype (an integer or bool tensor as float32, PyTorch's result
    for them); ``autocast``: half types as float32 under ``gingham.autocast``."""
    x = _autocast_float32(x) if autocast else x
    return x if dt.is_float(x.dtype) else x.astype(dt.FLOAT32)


def _any_float(a: Tensor, b) -> bool:
    return dt.is_float(a.dtype) or isinstance(b, float) or (
        isinstance(b, Tensor) and dt.is_float(b.dtype))


def _float_operands(a: Tensor, b) -> tuple[Tensor, "Tensor | float"]:
    """Both operands of a floating-point binary function: integer tensors as float32, an int
    as a float (a tensor ``b`` of another float dtype promotes as usual)."""
    if isinstance(b, Tensor):
        b = _floating(b)
    elif isinstance(b, (bool, int, float, np.number)):
        b = float(b)
    else:
        raise TypeError(f"unsupported operand type {type(b).__name__}")
    return _floating(a), b


def _series_argument(x, small):
    """``x`` where ``small`` holds, 0 elsewhere: what a series branch of a select reads, so that
    the branch not taken has a finite derivative (see the composed functions of Tensor)."""
    return builder.select(small, x, 0.0)


def _log1p(u):
    """``log(1 + u)`` of a builder node: where ``|u| < 0.25`` the series of ``2 atanh(s)``,
    ``s = u / (2 + u)``, whose next term is below float32's rounding (``s^8 / 9 < 2e-8``);
    ``log(1 + u)`` elsewhere, whose rounding of ``1 + u`` costs at most 3e-7 relative there."""
    small = builder.abs(u) < 0.25
    v = _series_argument(u, small)
    s = v / (v + 2.0)
    s2 = s * s
    series = s * 2.0 * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0))))
    direct = builder.log(builder.select(small, 1.0, u + 1.0))
    return builder.select(small, series, direct)


def _expm1(x):
    """``exp(x) - 1`` of a builder node: Taylor's series to ``x^7 / 7!`` where ``|x| < 0.25``
    (the next term is below 2e-9 relative), ``exp(x) - 1`` elsewhere."""
    small = builder.abs(x) < 0.25
    v = _series_argument(x, small)
    nested = 1.0 + v * (1.0 / 7.0)
    for k in (6.0, 5.0, 4.0, 3.0, 2.0):  # x (1 + x/2 (1 + x/3 (... (1 + x/7))))
        nested = 1.0 + v * (1.0 / k) * nested
    return builder.select(small, v * nested,
                          builder.exp(builder.select(small, 0.0, x)) - 1.0)


#: Beyond this ``|x|``, ``1 + x^2`` is ``x^2`` in float32 (``2^24``) and asinh/acosh are
#: ``log(2|x|)`` to within ``1 / (4 x^2)``; below it ``x^2`` cannot overflow.
_HUGE_ARGUMENT = 4096.0


def _asinh(x):
    """``asinh(x) = sign(x) log1p(t + t^2 / (1 + sqrt(1 + t^2)))``, ``t = |x|`` (no cancellation
    for small ``t``), ``log(t) + log(2)`` for huge ``t``. ``t`` is a select, not ``abs``, so the
    gradient at 0 is 1 (abs' would be 0)."""
    negative = x < 0
    t = builder.select(negative, -x, x)
    huge = t > _HUGE_ARGUMENT
    m = builder.select(huge, 0.0, t)
    moderate = _log1p(m + m * m / (1.0 + builder.sqrt(1.0 + m * m)))
    large = builder.log(builder.select(huge, t, 1.0)) + math.log(2.0)
    magnitude = builder.select(huge, large, moderate)
    return builder.select(negative, -magnitude, magnitude)


def _acosh(x):
    """``acosh(x) = log1p(u + sqrt(u) sqrt(u + 2))``, ``u = x - 1`` (accurate near 1), and
    ``log(x) + log(2)`` for huge ``x``; NaN below 1 from the square root. Two roots, not
    ``sqrt(u (u + 2))``: at ``x = 1`` the product rule would give ``inf * 0``, NaN, where the
    gradient is inf (PyTorch's)."""
    huge = x > _HUGE_ARGUMENT
    u = builder.select(huge, 0.0, x - 1.0)
    moderate = _log1p(u + builder.sqrt(u) * builder.sqrt(u + 2.0))
    large = builder.log(builder.select(huge, x, 1.0)) + math.log(2.0)
    return builder.select(huge, large, moderate)


def _sign_bit(x):
    """Whether ``x`` is negative, ``-0.0`` included (``1 / -0.0`` is ``-inf``)."""
    return builder.logical_or(x < 0, builder.logical_and(x.eq(0.0), 1.0 / x < 0))


def _atan2(y, x):
    """``atan2`` from ``atan`` of the ratio of the smaller magnitude to the larger (so it
    never divides by zero, and the derivative is finite on the axes): ``atan(y / x)`` plus
    ``+-pi`` where ``x`` is negative, or ``+-pi/2 - atan(x / y)`` where ``|y| > |x|``. Each
    branch divides by 1 where it is not taken (and at the origin, whose angle is then 0 or
    ``+-pi`` by the signs of the zeros, as C's)."""
    steep = builder.abs(y) > builder.abs(x)
    flat_divisor = builder.select(builder.logical_or(steep, x.eq(0.0)), 1.0, x)
    half_turn = builder.select(_sign_bit(y), -math.pi, math.pi)
    flat = builder.atan(y / flat_divisor) + builder.select(_sign_bit(x), half_turn, 0.0)
    quarter_turn = builder.select(y < 0, -math.pi / 2, math.pi / 2)
    steep_angle = quarter_turn - builder.atan(x / builder.select(steep, y, 1.0))
    return builder.select(steep, steep_angle, flat)


def _logaddexp(a, b, power, log_base: float):
    """``log_base(power(a) + power(b))`` as ``max + log1p(power(-|a - b|)) / log(base)``; equal
    arguments (+-inf too, where ``a - b`` is NaN) as ``(a + b) / 2 + log_base(2)``, which also
    splits the gradient evenly, as PyTorch's."""
    tie = a.eq(b)
    high = builder.maximum(a, b)
    gap = builder.select(tie, 0.0, -builder.abs(a - b))
    apart = high + _log1p(power(gap)) * (1.0 / log_base)
    return builder.select(tie, (a + b) * 0.5 + math.log(2.0) / log_base, apart)


def _trunc(a):
    return builder.select(a < 0, builder.ceil(a), builder.floor(a))


def _finfo_max(dtype) -> float:
    if dt.is_bfloat16(dtype):
        return 3.3895313892515355e38  # (2 - 2^-7) * 2^127
    return float(np.finfo(dtype).max)


def _without_nan(x: Tensor) -> Tensor:
    """``x`` with NaN as 0 (a float tensor; others unchanged)."""
    if not dt.is_float(x.dtype):
        return x
    return x._elementwise(lambda a: builder.select(a.ne(a), 0.0, a), [], "nan_as_zero")


def _true_divide(a: Tensor, b) -> Tensor:
    """``/`` divides as NumPy's true_divide: integers give float32 here (Tile's ``/`` on
    integers truncates, so they are converted first)."""
    if not dt.is_float(a.dtype):
        a = a.astype(np.float32)
    if isinstance(b, Tensor) and not dt.is_float(b.dtype):
        b = b.astype(np.float32)
    return a._elementwise(lambda x, y: x / y, [b], "divide")


def _weak_scalar(value, like: Tensor) -> Tensor:
    """A number on the left of a reflected operator as a 0-d tensor of the dtype it takes
    beside ``like`` (a weak scalar, as in PyTorch: ``7 // int32_tensor`` is int32)."""
    if isinstance(value, Tensor):
        return value
    floating = dt.is_float(like.dtype) or isinstance(value, float)
    dtype = like.dtype if dt.is_float(like.dtype) or not floating else dt.FLOAT32
    return tensor(np.asarray(value, dtype), device=like.device)


def _sign_differs(remainder, divisor):
    """Where a C remainder (the dividend's sign) is not Python's (the divisor's sign): it is
    nonzero and of the other sign than the divisor."""
    if not isinstance(divisor, builder.Tensor):  # a number: its sign is known now
        return remainder < 0 if divisor > 0 else remainder > 0
    return builder.logical_or(builder.logical_and(remainder < 0, divisor > 0),
                              builder.logical_and(remainder > 0, divisor < 0))


def _remainder(a: Tensor, b) -> Tensor:
    """``a % b`` with the divisor's sign, as PyTorch's (and Python's) ``%``: Tile's C
    remainder (``fmod`` on floats), plus the divisor where the signs differ, as PyTorch
    computes it. (Not ``a - floor(a / b) * b``, which is NaN for an infinite divisor, where
    PyTorch gives ``a`` or ``b``: ``-3 % inf == inf``.) The gradient for ``b`` is
    ``-floor(a / b)``, PyTorch's."""
    if dt.is_float(a.dtype) or isinstance(b, float) or (
            isinstance(b, Tensor) and dt.is_float(b.dtype)):
        # an integer operand as float32 (as _true_divide makes it), not NumPy's float64
        a = a if dt.is_float(a.dtype) else a.astype(dt.FLOAT32)
        b = b.astype(a.dtype) if isinstance(b, Tensor) and not dt.is_float(b.dtype) else b
        b = float(b) if not isinstance(b, Tensor) else b

    def remainder(x, y):
        r = x % y
        return builder.select(_sign_differs(r, y), r + y, r)

    return a._elementwise(remainder, [b], "remainder")


def _floor_divide(a: Tensor, b) -> Tensor:
    """``a // b`` rounded toward minus infinity, as PyTorch's ``//``; integers from Tile's
    truncating ``/``, one less where the remainder's sign differs from the divisor's."""
    if dt.is_float(a.dtype) or isinstance(b, float) or (
            isinstance(b, Tensor) and dt.is_float(b.dtype)):
        return _true_divide(a, b).floor()

    def floor_divide(x, y):
        return builder.select(_sign_differs(x % y, y), x / y - 1, x / y)

    return a._elementwise(floor_divide, [b], "floor_divide")


def _gcd_steps(*operands) -> int:
    """Euclid's worst case for the operands' integer width: consecutive Fibonacci numbers
    below ``2^bits``, about ``1.44 bits`` remainders."""
    bits = max(np.dtype(o.dtype).itemsize * 8 if isinstance(o, Tensor) else 32
               for o in operands)
    return int(bits * 1.45) + 1


def _euclid(a, b, steps: int):
    """``gcd(|a|, |b|)`` by ``steps`` remainders; once the divisor is 0 nothing changes."""
    a, b = builder.abs(a), builder.abs(b)
    for _ in range(steps):
        done = b.eq(0)
        a, b = builder.select(done, a, b), builder.select(done, b, a % builder.select(done, 1, b))
    return a


# bfloat16's constants (NumPy's finfo does not know ml_dtypes' type): 7 mantissa bits, the
# exponent range of float32.
_BFLOAT16_FINFO = type("Finfo", (), dict(nmant=7, smallest_normal=2.0 ** -126,
                                         smallest_subnormal=2.0 ** -133,
                                         max=3.3895313892515355e38))


def _integral(op: str, *operands) -> None:
    for operand in operands:
        if isinstance(operand, Tensor) and not (dt.is_bool(operand.dtype)
                                                or dt.is_integer(operand.dtype)):
            raise DTypeError(f"{op}: needs bool or integer tensors, not "
                             f"{dt.dtype_name(operand.dtype)}")
        if isinstance(operand, float):
            raise DTypeError(f"{op}: needs bool or integer operands, not the float {operand}")


def _bitwise(a: Tensor, b, op: str, logical) -> Tensor:
    """``a op b``: logical on two bool operands, bitwise on integers (a Python bool among
    integers is 0 or 1), as PyTorch's."""
    _integral(op, a, b)
    if dt.is_bool(a.dtype) and (isinstance(b, bool) or
                                isinstance(b, Tensor) and dt.is_bool(b.dtype)):
        return a._elementwise(logical, [b], op, dt.BOOL)
    bitwise = {"&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y}[op]
    return a._elementwise(bitwise, [b], op)


def maximum(a: Tensor, b) -> Tensor:
    return a._elementwise(builder.maximum, [b], "maximum")


def minimum(a: Tensor, b) -> Tensor:
    return a._elementwise(builder.minimum, [b], "minimum")


def _function_of(name: str) -> Callable:
    """PyTorch's function spelling ``torch.<name>(input, ...)`` of the Tensor method ``name``."""
    method = getattr(Tensor, name)

    @functools.wraps(method)
    def function(input: Tensor, *args, **kwargs):  # noqa: A002 (PyTorch's name)
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a gingham.Tensor, not "
                            f"{type(input).__name__}")
        return method(input, *args, **kwargs)

    return function


# gingham.atan2(y, x), gingham.logsumexp(x, dim), ...: the methods' function spellings.
tan, sinh, cosh, asin, acos, atan, arcsin, arccos, arctan = map(
    _function_of, "tan sinh cosh asin acos atan arcsin arccos arctan".split())
asinh, acosh, atanh, arcsinh, arccosh, arctanh = map(
    _function_of, "asinh acosh atanh arcsinh arccosh arctanh".split())
log1p, expm1, exp2, log2, log10 = map(_function_of, "log1p expm1 exp2 log2 log10".split())
atan2, arctan2, hypot, logaddexp, logaddexp2, fmod, remainder, copysign = map(
    _function_of, "atan2 arctan2 hypot logaddexp logaddexp2 fmod remainder copysign".split())
gcd, lcm, nextafter = map(_function_of, "gcd lcm nextafter".split())
trunc, fix, frac, isnan, isinf, isfinite, nan_to_num = map(
    _function_of, "trunc fix frac isnan isinf isfinite nan_to_num".split())
lerp, addcmul, addcdiv = map(_function_of, "lerp addcmul addcdiv".split())
logsumexp, count_nonzero, nansum, nanmean, aminmax = map(
    _function_of, "logsumexp count_nonzero nansum nanmean aminmax".split())

# The rest of torch.Tensor's methods as functions (torch.exp(x), torch.sum(x, 1),
# torch.max(x, dim=1), ...): gingham/__init__.py exports them. A table, not globals of this
# module, where sum, max, all, abs, round and pow would hide the builtins that it calls.
_METHOD_FUNCTION_NAMES = """
    abs exp log sqrt rsqrt sin cos tanh sigmoid erf erfc erfinv relu sign sgn signbit floor
    ceil round neg negative positive reciprocal square pow float_power
    add sub subtract mul multiply div divide true_divide floor_divide
    eq ne lt le gt ge not_equal less less_equal greater greater_equal
    logical_not logical_and logical_or logical_xor bitwise_not bitwise_and bitwise_or
    bitwise_xor bitwise_left_shift bitwise_right_shift
    sum mean prod cumsum cumprod max min amax amin argmax argmin var std all any
    logcumsumexp cummax cummin msort kthvalue median mode quantile norm dist
    mm bmm mv dot vdot ger addmm addmv addr baddbmm addbmm fmax fmin clamp clip clamp_min
    clamp_max deg2rad rad2deg heaviside xlogy sinc logit isclose allclose equal isposinf
    isneginf isreal is_floating_point is_complex is_nonzero is_same_size is_signed numel
    flatten unflatten squeeze unsqueeze transpose swapaxes swapdims permute t narrow select
    split chunk unbind tensor_split hsplit vsplit dsplit split_with_sizes ravel broadcast_to
    adjoint diagflat clone detach masked_fill softmax log_softmax
    take masked_select masked_scatter nonzero argwhere index_fill index_copy index_put
    scatter_reduce slice_scatter select_scatter diagonal_scatter unique unique_consecutive
    hardshrink prelu ldexp get_device is_inference
""".split()
METHOD_FUNCTIONS: dict[str, Callable] = {
    name: _function_of(name) for name in _METHOD_FUNCTION_NAMES}
METHOD_FUNCTIONS["absolute"] = METHOD_FUNCTIONS["abs"]


def _checked_matmul(op: str, a: Tensor, b: Tensor, rank_a: int, rank_b: int) -> Tensor:
    """``a @ b`` for ``mm``/``bmm``/``mv``/``dot``, which take exactly these ranks (no
    broadcasting) and one dtype, as PyTorch's."""
    for name, x, rank in (("input", a, rank_a), ("the second operand", b, rank_b)):
        if not isinstance(x, Tensor) or x.ndim != rank:
            shape = x.shape if isinstance(x, Tensor) else type(x).__name__
            raise ShapeError(f"{op}: {name} must be a {rank}-d tensor, not {shape}")
    if a.dtype != b.dtype:
        raise DTypeError(f"{op}: both operands must have one dtype, not "
                         f"{dt.dtype_name(a.dtype)} and {dt.dtype_name(b.dtype)}")
    if op == "bmm" and a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[0 if rank_b == 1 else -2]:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} cannot be multiplied")
    return matmul(a, b)


def _scaled_sum(x: Tensor, product: Tensor, beta, alpha) -> Tensor:
    """``beta * x + alpha * product``; ``beta == 0`` ignores ``x`` (NaN included), as
    PyTorch's ``addmm`` family."""
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return _broadcast_to(scaled, scaled.shape, "addmm")
    return (x if beta == 1 else x * beta) + scaled


def _even_split(x: Tensor, sections, dim: int, op: str, rank: int) -> tuple[Tensor, ...]:
    if x.ndim < rank:
        raise ShapeError(f"{op}: needs a tensor of at least {rank} dims, not shape {x.shape}")
    if isinstance(sections, (int, np.integer)) and x.shape[dim] % sections:
        raise ShapeError(f"{op}: dim {dim} of size {x.shape[dim]} does not split into "
                         f"{sections} equal sections")
    return x.tensor_split(sections, dim)


_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefficients, w):
    value = coefficients[0]
    for c in coefficients[1:]:
        value = value * w + c
    return value


def _erfinv(y: Tensor) -> Tensor:
    """The inverse of erf on (-1, 1), +-inf at +-1, NaN beyond: Giles' approximation refined by
    two Newton steps on Tile's erf (so the value is erf's inverse to float32's precision and
    the gradient, through the last step, is ``sqrt(pi) / 2 * exp(erfinv(x)^2)``)."""
    edge = y.abs() == 1.0
    inner = where(edge, 0.0, y)  # the steps divide by erf' (0 at +-inf): not at the edges
    w = -((1.0 - inner) * (1.0 + inner)).log()
    central = _horner(_ERFINV_CENTRAL, w - 2.5)
    tail = _horner(_ERFINV_TAIL, where(w < 5.0, 5.0, w).sqrt() - 3.0)
    guess = where(w < 5.0, central, tail) * inner
    for _ in range(2):
        slope = (-guess.square()).exp() * (2.0 / math.sqrt(math.pi))
        guess = guess - (guess.erf() - inner) / slope
    # +-inf as constants: y * inf would send 0 * inf = NaN into y's gradient
    return where(edge, where(y > 0, math.inf, -math.inf), guess)


def _running_extreme(x: Tensor, agg: str, dim: int, op: str) -> ValuesIndices:
    """cummax/cummin: the running extreme's last position ``j <= i`` along ``dim`` (one
    ``n x n`` comparison per fiber), and the values gathered from there, so gradients go
    where PyTorch's go."""
    from . import indexing

    axis = _dim(op, x.shape, dim)
    if x.ndim == 0:
        return ValuesIndices(x.clone(), zeros((), dt.INT64, x.device))
    running = _cumulative(x.detach() if x.requires_grad else x, agg, axis, x.dtype, op)
    n = x.shape[axis]
    j = reshape(arange(n, device=x.device), (1,) * axis + (1, n) + (1,) * (x.ndim - axis - 1))
    i = j.transpose(axis, axis + 1)
    hit = (x.unsqueeze(axis) == running.unsqueeze(axis + 1)) & (j <= i)
    indices = where(hit, j, -1).amax(axis + 1).astype(dt.INT64)
    return ValuesIndices(indexing.gather(x, axis, indices), indices)


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


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,  # noqa: A002
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows (observations in its
    columns; a 1-d tensor is one variable, giving a 0-d result), with frequency and
    observation weights, as ``torch.cov`` (and ``numpy.cov``).

        gingham.cov(samples.T)       # samples [N, D] -> [D, D]
    """
    if input.ndim > 2:
        raise ShapeError(f"cov: input must have at most 2 dims, not shape {input.shape}")
    x = _floating(input if input.ndim == 2 else reshape(input, (1, -1), "cov"))
    weights = None
    for given in (fweights, aweights):
        if given is not None:
            weights = given.astype(x.dtype) if weights is None else weights * given
    if weights is None:
        total = float(x.shape[1])
        average = x.mean(1, keepdim=True)
        norm = total - correction
        centered = x - average
        result = (centered @ centered.T) / float(norm)
    else:
        total = weights.sum()
        average = (x * weights).sum(1, keepdim=True) / total
        if aweights is None or correction == 0:
            norm = total - correction
        else:
            norm = total - correction * (weights * aweights).sum() / total
        centered = x - average
        result = ((centered * weights) @ centered.T) / norm.clamp(min=0.0)
    return result.squeeze() if input.ndim < 2 else result


def block_diag(*tensors: Tensor) -> Tensor:
    """The block-diagonal matrix of ``tensors`` (0-d, 1-d as a row, or 2-d), zeros elsewhere,
    in their promoted dtype, as ``torch.block_diag``."""
    if not tensors:
        raise ValueError("block_diag: needs at least one tensor")
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    for t in blocks:
        if t.ndim != 2:
            raise ShapeError(f"block_diag: inputs must have at most 2 dims, not {t.shape}")
    dtype = functools.reduce(lambda a, b: _where_dtype(a, b), blocks)
    width = sum(b.shape[1] for b in blocks)
    rows, before = [], 0
    for b in blocks:
        after = width - before - b.shape[1]
        parts = [zeros((b.shape[0], before), dtype, b.device), b.astype(dtype),
                 zeros((b.shape[0], after), dtype, b.device)]
        rows.append(cat([p for p in parts if p.shape[1]], 1))
        before += b.shape[1]
    return cat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """All tuples of one element from each 1-d tensor, ``[prod(len), len(tensors)]`` (a
    single tensor is returned as it is), as ``torch.cartesian_prod``."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:  # noqa: A002
    """The ``r``-element combinations of the 1-d ``input``'s elements, ``[count, r]``, in
    ``itertools.combinations`` order, as ``torch.combinations``."""
    if input.ndim != 1:
        raise ShapeError(f"combinations: input must be 1-d, not shape {input.shape}")
    choose = (itertools.combinations_with_replacement if with_replacement
              else itertools.combinations)
    picks = np.array(list(choose(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    if picks.shape[0] == 0:
        return zeros((0, r), input.dtype, input.device)
    return input[tensor(picks, device=input.device)]


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between the rows of ``x1`` ``[..., n, d]`` and of ``x2``
    ``[..., m, d]``: ``[..., n, m]``, batch dims broadcast, as ``torch.cdist``."""
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: inputs must be [..., n, d] and [..., m, d], not {x1.shape} "
                         f"and {x2.shape}")
    if p < 0:
        raise ValueError(f"cdist: p must be non-negative, not {p}")
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, -1)


def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` along ``dim``, as ``torch.var_mean``."""
    return (input.var(dim, unbiased, keepdim, correction=correction),
            input.mean(_none_if_empty(dim), keepdim))


def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,  # noqa: A002
             correction=None) -> tuple[Tensor, Tensor]:
    return (input.std(dim, unbiased, keepdim, correction=correction),
            input.mean(_none_if_empty(dim), keepdim))


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
              dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: spacing ``dx`` (1) or the sample points ``x``, as
    ``torch.trapezoid``."""
    axis = _dim("trapezoid", y.shape, dim)
    return _trapezoid_areas(y, x, dx, axis).sum(axis)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one element fewer)."""
    axis = _dim("cumulative_trapezoid", y.shape, dim)
    return _trapezoid_areas(y, x, dx, axis).cumsum(axis)


def _trapezoid_areas(y: Tensor, x: Tensor | None, dx: float | None, axis: int) -> Tensor:
    n = y.shape[axis]
    pairs = y.narrow(axis, 0, n - 1) + y.narrow(axis, 1, n - 1)
    if x is None:
        return pairs * ((1.0 if dx is None else dx) * 0.5)
    steps = x.diff(dim=-1 if x.ndim == 1 else axis)
    if x.ndim == 1:
        steps = reshape(steps, (n - 1,) + (1,) * (y.ndim - axis - 1), "trapezoid")
    return pairs * steps * 0.5


trapz = trapezoid


def chain_matmul(*matrices: Tensor) -> Tensor:
    return functools.reduce(matmul, matrices)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """The Vandermonde matrix of the 1-d ``x``: columns ``x ** (N-1) .. x ** 0`` (or
    increasing), as ``torch.vander``."""
    count = x.shape[0] if N is None else N
    powers = np.arange(count)[::1 if increasing else -1]
    columns = [x ** int(k) if k else ones_like(x) for k in powers]
    return stack(columns, 1) if columns else zeros((x.shape[0], 0), x.dtype, x.device)


def _triangle_indices(row: int, col: int, offset: int, lower: bool, dtype, device) -> Tensor:
    mask = (np.tri(row, col, offset, bool) if lower
            else ~np.tri(row, col, offset - 1, bool))
    return tensor(np.stack(np.nonzero(mask)), dtype=dtype or dt.INT64, device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The ``[2, count]`` coordinates of the lower triangle, as ``torch.tril_indices``."""
    return _triangle_indices(row, col, offset, True, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    return _triangle_indices(row, col, offset, False, dtype, device)


# -- creation in PyTorch's spelling ----------------------------------------------------------------


def _size(size: tuple) -> tuple[int, ...]:
    return tuple(int(s) for s in _varargs(size))


def _like(input: Tensor, value, dtype, device, requires_grad) -> Tensor:  # noqa: A002
    created = full(input.shape, value, input.dtype if dtype is None else dtype,
                   device or input.device)
    return created.requires_grad_(requires_grad) if requires_grad else created


def zeros_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,  # noqa: A002
               memory_format=None) -> Tensor:
    """Zeros of ``input``'s shape, dtype and device (unless given), as ``torch.zeros_like``."""
    return _like(input, 0, dtype, device, requires_grad)


def ones_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,  # noqa: A002
              memory_format=None) -> Tensor:
    return _like(input, 1, dtype, device, requires_grad)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None,  # noqa: A002
              requires_grad: bool = False, memory_format=None) -> Tensor:
    return _like(input, fill_value, dtype, device, requires_grad)


empty_like = zeros_like  # gingham hands out no uninitialised memory: zeros


def empty(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``size`` (gingham hands out no uninitialised memory), as ``torch.empty``."""
    created = zeros(_size(size), np.float32 if dtype is None else dtype, device)
    return created.requires_grad_(requires_grad) if requires_grad else created


def eye(n: int, m: int | None = None, *, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    """The ``n x m`` identity matrix (``m = n`` by default), as ``torch.eye``."""
    created = tensor(np.eye(n, n if m is None else m),
                     dtype=np.float32 if dtype is None else dtype, device=device)
    return created.requires_grad_(requires_grad) if requires_grad else created


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return tensor(s, dtype=np.float32 if dtype is None else dtype, device=device,
                  requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``data`` itself when it is a tensor of that dtype and device, else a new tensor."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor holding a copy of ``ndarray`` on the default device (PyTorch's shares the
    memory; a device tensor cannot)."""
    return tensor(ndarray)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def get_default_dtype() -> np.dtype:
    """float32: the dtype Python floats become."""
    return np.dtype(np.float32)


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    return _broadcast_shapes("broadcast_shapes", [tuple(s) if not isinstance(s, int) else (s,)
                                                  for s in shapes])


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape."""
    shape = _broadcast_shapes("broadcast_tensors", [t.shape for t in tensors])
    return tuple(_broadcast_to(t, shape, "broadcast_tensors") for t in tensors)


def result_type(tensor1, tensor2) -> np.dtype:
    """The dtype of an arithmetic result of the two operands (tensors or numbers; numbers are
    weak, as in PyTorch)."""
    return _where_dtype(tensor1, tensor2)


def promote_types(type1, type2) -> np.dtype:
    """PyTorch's rule: a float type beside an integer or bool one wins whatever its width."""
    first, second = dt.as_tile_dtype(type1), dt.as_tile_dtype(type2)
    if dt.is_float(first) != dt.is_float(second):
        return first if dt.is_float(first) else second
    return combine(ExprType(first), ExprType(second)).dtype


def can_cast(from_, to) -> bool:
    """PyTorch's rule: no cast to a lower kind (float to integer, integer to bool)."""
    source, target = (dt.as_tile_dtype(t) for t in (from_, to))
    rank = {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2}
    return rank[target.kind] >= rank[source.kind]


def _inclusive_range(start, end, step=1, *, dtype=None, device=None) -> Tensor:
    """``start`` to ``end`` inclusive (deprecated in PyTorch, float32 by default)."""
    values = np.arange(start, end + step / 2, step)
    return tensor(values, dtype=np.float32 if dtype is None else dtype, device=device)


METHOD_FUNCTIONS["range"] = _inclusive_range  # torch.range; a global would hide the builtin


def rsub(input: Tensor, other, *, alpha=1) -> Tensor:  # noqa: A002
    """``other - alpha * input``, as ``torch.rsub``."""
    return (input if alpha == 1 else input * alpha).__rsub__(other)


def fill(input: Tensor, value) -> Tensor:  # noqa: A002
    """A tensor like ``input`` holding ``value`` everywhere (``torch.fill``, out of place)."""
    return full_like(input, value.item() if isinstance(value, Tensor) else value)


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


# -- reductions -------------------------------------------------------------------------------------------


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


def _reduce(x: Tensor, agg: str, axis, keepdims: bool, op: str = "reduce") -> Tensor:
    axes = _axes(op, x.shape, axis)
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
    make = {"+": builder.sum, "*": builder.prod, ">": builder.max, "<": builder.min}[agg]

    def build(nodes):
        (node,) = nodes
        return make(node[tuple(idx)] if idx else node[()], out=out_index, shape=out_shape)

    return x._derive(tuple(out_shape), dtype, [x], build)


def _cumulative(x: Tensor, agg: str, dim: int, dtype, op: str) -> Tensor:
    """``O[..., i, ...] = agg(X[..., i - k, ...]), k < N`` along ``dim`` (see cumsum)."""
    dim = _dim(op, x.shape, dim)
    if dtype is not None:
        x = x.astype(dtype)
    elif not dt.is_float(x.dtype):
        x = x.astype(dt.INT64)  # PyTorch's integer running sums and products
    x = _autocast_float32(x)
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim)))
    (k,) = builder.indices("k")
    read = list(idx)
    read[dim] = idx[dim] - k
    make = {"+": builder.sum, "*": builder.prod, ">": builder.max, "<": builder.min}[agg]
    return x._derive(x.shape, x.dtype, [x], lambda nodes: make(
        nodes[0][tuple(read)], out=list(idx), shape=list(x.shape), where=[k < x.shape[dim]]))


def _arg_extreme(x: Tensor, agg: str, op: str, dim, keepdim: bool) -> Tensor:
    """The int64 position along ``dim`` of the first element equal to the max (``agg`` ``>``)
    or the min (``<``), or of the first NaN (PyTorch's argmax takes NaN for the largest and
    the smallest): the least position where ``x`` is the extreme or NaN, others counting as
    the dim's size."""
    if dim is None:
        flat = _arg_extreme(reshape(x, (x.numel(),), op), agg, op, 0, False)
        return reshape(flat, (1,) * x.ndim, op) if keepdim else flat
    axis = _dim(op, x.shape, dim)
    if x.ndim == 0:  # PyTorch's answer for a 0-d tensor: 0, 0-d whatever keepdim says
        return reshape(_arg_extreme(reshape(x, (1,), op), agg, op, 0, False), (), op)
    size = x.shape[axis]
    if size == 0:
        raise ShapeError(f"{op}: dim {dim} of shape {x.shape} is empty (no {op} exists)")
    extreme = _reduce(x, agg, axis, True, op)  # NaN where the row holds one

    def candidate(values, extremes):
        hit = builder.logical_or(values.eq(extremes), values.ne(values))
        return builder.select(hit, builder.index(values, axis), size)

    positions = x._elementwise(candidate, [extreme], op, dt.INT32)
    first = _reduce(positions, "<", axis, keepdim, op)
    return first.astype(dt.INT64)


def _max_or_min(x: Tensor, agg: str, op: str, dim, keepdim: bool, axis, keepdims):
    """``Tensor.max``/``Tensor.min``: see :meth:`Tensor.max`."""
    if isinstance(dim, Tensor):  # x.max(other): PyTorch's maximum
        return maximum(x, dim) if agg == ">" else minimum(x, dim)
    numpy_spelling = axis is not None or keepdims is not None
    dims, keep = _dim_arguments(op, dim, keepdim, axis, keepdims)
    if numpy_spelling or dims is None:
        return _reduce(x, agg, dims, keep, op)
    if not isinstance(dims, (int, np.integer)):
        raise TypeError(f"{op}: dim must be one int (for values and indices), not {dims!r}; "
                        f"amax/amin take several")
    values = _reduce(x, agg, dims, keep, op)
    return ValuesIndices(values, _arg_extreme(x, agg, op, dims, keep))


def _variance(x: Tensor, op: str, dim, unbiased: bool | None, keepdim: bool,
              correction: float | None) -> Tensor:
    """Tensor.var's value (std's square): see :meth:`Tensor.var`."""
    if isinstance(dim, bool):  # x.var(False): PyTorch's var(unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}: give unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if not dt.is_float(x.dtype):
        raise DTypeError(f"{op}: needs a floating-point tensor, not {dt.dtype_name(x.dtype)}")
    axes = _axes(op, x.shape, _none_if_empty(dim))
    count = math.prod(x.shape[a] for a in axes)
    data = x.astype(dt.FLOAT32) if dt.is_half(x.dtype) else x  # half types sum in float32
    centred = data - data.mean(axes, keepdim=True)
    squares = centred.square().sum(axes, keepdim)
    divisor = max(count - correction, 0)
    # PyTorch divides by max(N - correction, 0): 0 / 0 is NaN and a positive sum / 0 is inf.
    variance = squares * (1.0 / divisor if divisor else math.inf)
    return variance._in_dtype(x.dtype)


# -- shapes -------------------------------------------------------------------------------------------------


def _varargs(sizes: tuple) -> tuple:
    """``f(2, 3)`` or ``f((2, 3))`` (PyTorch's shape arguments take both)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


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

    return x._derive(shape, x.dtype, [x], build)


# -- contractions -------------------------------------------------------------------------------------------


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


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """PyTorch's ``einsum``: the labels of ``equation`` are Tile indices, so two operands
    are one contraction (``"bij,bjk->bik"`` is ``O[b, i, k] = +(A[b, i, j] * B[b, j, k])``)
    and more are contracted left to right. ``...`` stands for broadcast (right-aligned)
    dims; without ``->`` the output is the ``...`` dims, then the labels used once, in
    alphabetical order; a label repeated in one operand takes its diagonal. Differentiable
    in every operand; under ``gingham.autocast`` in its low-precision dtype.

        gingham.einsum("bqhd,bkhd->bhqk", query, key)     # attention scores
    """
    from .amp import cast_inputs_low

    op = "einsum"
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])  # torch.einsum(equation, [a, b]) as well
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise TypeError(f"{op}: operands must be one or more gingham Tensors")
    operands = cast_inputs_low(*operands)
    dtype = functools.reduce(dt.promote, [t.dtype for t in operands])
    operands = [t._in_dtype(dtype) for t in operands]
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"{op}: {equation!r} names {len(terms)} operands, {len(operands)} "
                         "were given")
    ellipsis_rank = max(t.ndim - len(term.replace("...", "")) for term, t
                        in zip(terms, operands))
    labels = [_einsum_labels(op, term, t.shape, ellipsis_rank) for term, t
              in zip(terms, operands)]
    sizes: dict[str, int] = {}
    for term_labels, t in zip(labels, operands):
        for label, size in zip(term_labels, t.shape):
            known = sizes.setdefault(label, size)
            if known != size and 1 not in (known, size):
                raise ShapeError(f"{op}: label {label!r} of {equation!r} has sizes {known} and "
                                 f"{size} (shapes {[t.shape for t in operands]})")
            sizes[label] = max(known, size)
    used = [label for term_labels in labels for label in term_labels]
    if arrow:
        wanted = _einsum_labels(op, output, None, ellipsis_rank)
    else:
        wanted = [label for label in sorted(set(used)) if label.startswith(".")] + sorted(
            label for label in set(used) if used.count(label) == 1 and label.isalpha())
    unknown = [label for label in wanted if label not in sizes]
    if unknown or len(set(wanted)) != len(wanted):
        raise ShapeError(f"{op}: the output of {equation!r} must name each input label at "
                         "most once")
    result, result_labels = operands[0], labels[0]
    if len(operands) == 1:
        return _contract([(result, result_labels)], wanted, sizes)
    for k in range(1, len(operands)):
        later = {label for term_labels in labels[k + 1:] for label in term_labels}
        keep = ([label for label in dict.fromkeys(result_labels + labels[k])
                 if label in later or label in wanted]
                if k < len(operands) - 1 else wanted)
        result = _contract([(result, result_labels), (operands[k], labels[k])], keep, sizes)
        result_labels = keep
    return result


def _einsum_labels(op: str, term: str, shape: tuple[int, ...] | None,
                   ellipsis_rank: int) -> list[str]:
    """One label per dim of ``term``: its letter, or ``".d"`` for the ``d``-th of the
    equation's ``...`` dims (right-aligned: an operand with fewer takes the last ones)."""
    head, dots, tail = term.partition("...")
    if not all(c.isalpha() for c in head + tail) or "." in tail:
        raise ShapeError(f"{op}: {term!r} may hold letters and one '...' only")
    if shape is None:
        middle = ellipsis_rank if dots else 0
    else:
        middle = len(shape) - len(head) - len(tail)
        if middle < 0 or (middle and not dots):
            raise ShapeError(f"{op}: {term!r} does not fit an operand of shape {shape}")
    dims = [f".{d}" for d in range(ellipsis_rank - middle, ellipsis_rank)]
    return list(head) + dims + list(tail)


def _contract(parts: list[tuple[Tensor, list[str]]], out: list[str],
              sizes: dict[str, int]) -> Tensor:
    """``O[out] = +(A[labels] * B[labels])`` (one or two operands); a dim of size 1 that
    broadcasts against a longer one is read at 0."""
    index = {label: builder.Index("e" + label.replace(".", "_")) for label in sizes}
    shape = tuple(sizes[label] for label in out)

    def access(node, t: Tensor, labels: list[str]):
        return node[tuple(0 if size == 1 != sizes[label] else index[label]
                          for label, size in zip(labels, t.shape))]

    def build(nodes):
        term = access(nodes[0], *parts[0])
        if len(parts) == 2:
            term = term * access(nodes[1], *parts[1])
        summed = {label for _, labels in parts for label in labels} - set(out)
        reduce = builder.sum if summed or len(parts) == 2 else builder.assign
        return reduce(term, out=[index[label] for label in out], shape=list(shape))

    first = parts[0][0]
    return first._derive(shape, first.dtype, [t for t, _ in parts], build)


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
    return x._derive(shape, x.dtype, [x], lambda nodes: builder.reshape(nodes[0], *shape))


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
    return x._derive(shape, x.dtype, [x], lambda nodes: builder.assign(
        nodes[0][tuple(idx)], out=[idx[a] for a in axes], shape=list(shape)))


def _getitem(x: Tensor, key) -> Tensor:
    """Basic indexing: integers, slices (any step), None and Ellipsis; an integer tensor on
    one dim goes to :func:`gingham.frontend.indexing.getitem_with_tensor`."""
    keys = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Tensor, np.ndarray, list)) for k in keys):
        from .indexing import getitem_with_tensor

        return getitem_with_tensor(x, keys)
    source_index, out_index, shape = _getitem_plan(x, key)

    def build(nodes):
        where = [v < s for v, s in zip(out_index, shape) if isinstance(v, builder.Index)]
        return builder.assign(nodes[0][tuple(source_index)] if source_index else nodes[0][()],
                              out=out_index, shape=list(shape), where=where)

    return x._derive(shape, x.dtype, [x], build)


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


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join along an existing axis (each piece is a shifted ``=`` write into one output), in
    the pieces' promoted dtype."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("concat: needs at least one tensor")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("concat: 0-d tensors cannot be joined along an axis; use stack")
    axis = _dim("concat", first.shape, axis)
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
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("stack: needs at least one tensor")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise ShapeError(f"stack: shapes {[t.shape for t in tensors]} differ")
    position = _dim("stack", tensors[0].shape, dim if axis is None else axis,
                    tensors[0].ndim + 1)
    return concat([t.unsqueeze(position) for t in tensors], position)


# -- layout: flips, rolls, diagonals, products of whole shapes ----------------------------------------
# Each is a composition of the builders above (an affine read with a negative step for a flip,
# an index constraint for a triangle, einsum for the products), so it fuses and differentiates
# like them.


def flip(x: Tensor, dims) -> Tensor:
    """``x`` reversed along each of ``dims`` (an int or a sequence), as ``torch.flip``: one
    read at ``size - 1 - i`` per flipped dim.

        gingham.flip(x, (0, 1))        # x[::-1, ::-1]
    """
    axes = _axes("flip", x.shape, dims)
    return _getitem(x, tuple(slice(None, None, -1) if a in axes else slice(None)
                             for a in range(x.ndim)))


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


def _diagonal(x: Tensor, offset: int, dim1: int, dim2: int) -> Tensor:
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

    return x._derive(shape, x.dtype, [x], build)


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """``torch.diag``: of a matrix, its ``diagonal``-th diagonal; of a vector, the square
    matrix with the vector on that diagonal and zeros elsewhere (one ``=`` write to
    ``[i + r, i + c]``)."""
    if x.ndim == 2:
        return _diagonal(x, diagonal, 0, 1)
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


def corrcoef(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """Pearson's correlation coefficients of the rows of ``input`` (each row a variable,
    each column an observation; a 1-d input is one variable), as ``torch.corrcoef``: the
    covariance over the outer product of the standard deviations, clipped to [-1, 1].
    Differentiable.

        gingham.corrcoef(gingham.tensor([[1.0, 2.0, 3.0], [3.0, 1.0, 2.0]]))  # [[1, -.5], ...]
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"corrcoef: input must be a gingham.Tensor, not {type(input).__name__}")
    if input.ndim > 2:
        raise ValueError(f"corrcoef: input must be 1-d or 2-d, not of shape {input.shape}")
    x = _floating(input, autocast=True)
    x = x.reshape(1, -1) if x.ndim < 2 else x
    centred = x - x.mean(1, keepdim=True)
    covariance = matmul(centred, centred.transpose(0, 1))
    deviation = einsum("ii->i", covariance).sqrt()
    ratio = covariance / deviation.unsqueeze(1) / deviation.unsqueeze(0)
    ratio = ratio.clamp(-1.0, 1.0)
    return ratio.reshape(()) if input.ndim < 2 else ratio


def outer(a: Tensor, b: Tensor) -> Tensor:
    """``a[i] * b[j]`` of two vectors, as ``torch.outer``."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"outer: operands must be vectors, not shapes {a.shape} and {b.shape}")
    return a.unsqueeze(1) * b


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """The sum over ``a``'s dims ``dims[0]`` and ``b``'s ``dims[1]`` (or ``a``'s last
    ``dims`` and ``b``'s first ``dims``, for an int), the rest of ``a`` then the rest of
    ``b`` kept, as ``torch.tensordot``: one :func:`einsum`.

        gingham.tensordot(x, w, dims=([1, 2], [0, 1]))
    """
    if isinstance(dims, (int, np.integer)):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims {dims} does not fit shapes {a.shape} and "
                             f"{b.shape}")
        left, right = list(range(a.ndim - dims, a.ndim)), list(range(int(dims)))
    else:
        left, right = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
    left = [_dim("tensordot", a.shape, d) for d in left]
    right = [_dim("tensordot", b.shape, d) for d in right]
    if len(left) != len(right) or any(a.shape[p] != b.shape[q] for p, q in zip(left, right)):
        raise ShapeError(f"tensordot: dims {left} of shape {a.shape} and {right} of shape "
                         f"{b.shape} do not pair up")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    a_labels = [next(letters) for _ in range(a.ndim)]
    b_labels = [next(letters) for _ in range(b.ndim)]
    for p, q in zip(left, right):
        b_labels[q] = a_labels[p]
    out = ([label for d, label in enumerate(a_labels) if d not in left]
           + [label for d, label in enumerate(b_labels) if d not in right])
    return einsum(f"{''.join(a_labels)},{''.join(b_labels)}->{''.join(out)}", a, b)


def inner(a: Tensor, b: Tensor) -> Tensor:
    """The sum over the last dims of ``a`` and ``b`` (a product when one is 0-d), the rest
    of ``a`` then the rest of ``b`` kept, as ``torch.inner``."""
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return tensordot(a, b, ([-1], [-1]))


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product, as ``torch.kron``: block ``(i, j)`` of the result is
    ``a[i, j] * b`` (a product of ``a`` and ``b`` with interleaved dims, merged)."""
    rank = max(a.ndim, b.ndim)
    a_shape = (1,) * (rank - a.ndim) + a.shape
    b_shape = (1,) * (rank - b.ndim) + b.shape
    spread_a = a.reshape(tuple(v for s in a_shape for v in (s, 1)))
    spread_b = b.reshape(tuple(v for s in b_shape for v in (1, s)))
    return (spread_a * spread_b).reshape(tuple(p * q for p, q in zip(a_shape, b_shape)))


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


def linspace(start: float, end: float, steps: int, *, dtype=None,
             device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, as
    ``torch.linspace`` (computed on the host: the values are constants of the program)."""
    dtype = dt.as_tile_dtype(dtype) if dtype is not None else dt.FLOAT32
    return tensor(_linspace_values("linspace", start, end, steps).astype(dtype),
                  device=device, requires_grad=requires_grad)


def _linspace_values(op: str, start: float, end: float, steps: int) -> np.ndarray:
    if steps < 0:
        raise ValueError(f"{op}: steps must be non-negative, not {steps}")
    # torch counts the second half back from ``end``, so both ends come out exact
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    positions = np.arange(steps)
    return np.where(positions < max(steps // 2, 1), start + step * positions,
                    end - step * (steps - 1 - positions))


def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype=None,
             device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``base ** linspace(start, end, steps)``, as ``torch.logspace``."""
    exponents = _linspace_values("logspace", start, end, steps)
    dtype = dt.as_tile_dtype(dtype) if dtype is not None else dt.FLOAT32
    return tensor((float(base) ** exponents).astype(dtype), device=device,
                  requires_grad=requires_grad)


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
    devices = {t.device for t in pending}
    if len(devices) > 1:
        # One program per device: an optimiser over a model split across devices assigns
        # the parameters of each.
        for device_id in sorted(devices):
            realize([t for t in pending if t.device == device_id])
        return
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


def is_graph_input(t: Tensor) -> bool:
    """Whether ``t`` enters a device's graph from outside it: a leaf, or a copy from another
    device (:meth:`Tensor.to`), which is no leaf for autograd but is this device's input."""
    return not t._parents


def graph_inputs(targets: Sequence[Tensor]) -> list[Tensor]:
    """The tensors the gradients of ``targets`` can reach (see :func:`is_autograd_input`):
    not those behind a :meth:`Tensor.detach`."""
    seen: dict[int, Tensor] = {}
    inputs: list[Tensor] = []
    stack = list(targets)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen[id(t)] = t
        if is_graph_input(t) or t._detached:
            inputs.append(t)
        if not t._detached:
            stack.extend(t._parents)
    return inputs


def is_autograd_input(t: Tensor) -> bool:
    """Whether gradients stop at ``t``: a leaf, or a computed value autograd treats as one
    (:meth:`Tensor.detach`'s, or a leaf updated earlier in a ``gingham.jit`` step)."""
    return not t._parents or t._detached


def _become_leaf(t: Tensor, op: str) -> None:
    """Make the lazy detached ``t`` a leaf holding its value (computed now)."""
    from .jit import current_trace

    if current_trace() is not None:
        raise GinghamError(
            f"{op}: a detached value computed inside gingham.jit cannot become a leaf there "
            "(its value exists only when the step runs); make the leaf outside the step")
    t.realize()
    t._parents, t._build, t._parent_versions, t._detached = (), None, (), False


def _gradients(output: Tensor, wrt: list[Tensor], cotangent: Tensor) -> list[Tensor]:
    """d(output)/d(wrt) · cotangent as lazy tensors, from the Tile autodiff of the graph."""
    inputs, fn, bound = _bound_graph([output], is_autograd_input)
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

    trace = current_trace()
    for target, value in pairs:
        if not (target.is_leaf or (trace is not None and trace.updates(target))):
            raise GinghamError("assign(): only leaf tensors (parameters, state) can be assigned")
        if value.shape != target.shape:
            raise ShapeError(f"assign(): value of shape {value.shape} for a tensor of shape "
                             f"{target.shape}")
        if value.device != target.device:
            raise DeviceError(f"assign(): value on {value.device} for a tensor on "
                              f"{target.device}; move one with .to(device)")
    pairs = [(t, v if v.dtype == t.dtype else v.astype(t.dtype)) for t, v in pairs]
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
    realize(pending + [root for t, _, _ in moves for root in t._backward_roots])
    for t, device, dtype in moves:
        if t.grad is not None:
            t.grad = tensor(t.grad.numpy().astype(dtype), device=device)
        moved = tensor(t.numpy().astype(dtype), device=device)
        t._buffer, t.device, t.dtype = moved._buffer, device, dtype
        t._version += 1
        t._backward_roots = []
    _moves += 1


__all__ = [
    "Tensor", "ShapeError", "DTypeError", "DimError", "ValuesIndices", "cat", "tensor", "zeros", "ones", "full", "arange", "matmul", "reshape",
    "permute_dims", "concat", "stack", "maximum", "minimum", "where", "realize", "no_grad",
    "is_grad_enabled", "assign_all", "move_all", "placement",
]

# Tensor's in-place methods and operators (x.add_(y), x += y, x[i] = v): gingham.frontend.inplace
from .inplace import install as _install_in_place  # noqa: E402  (it needs the names above)

_install_in_place()
