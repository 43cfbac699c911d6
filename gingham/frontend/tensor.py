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

This module defines the tensor and its core methods; the operations they call live in modules
beside it, one job each (listed where they are imported, at the end), and the names gingham
imports from here (``from gingham.frontend.tensor import where``) are re-exported.
"""

from __future__ import annotations

import itertools
import math
import weakref
from typing import Callable, NamedTuple, Sequence, Union

import numpy as np

from ..errors import AutogradError, DeviceError, GinghamError
from ..tile import builder
from ..tile import dtypes as dt
from ..torch_devices import as_device as _as_device
from . import promotion
from .defaults import default_float
from .grad_mode import _grad_mode, is_grad_enabled, no_grad
from .dims import (
    DimError, DTypeError, IndexRangeError, ShapeError, _axes, _broadcast_shapes, _dim,
    _dim_arguments, _memory_format, _none_if_empty, _sizes, _varargs, contiguous_format,
    preserve_format,
)
from .strides import (ROW_MAJOR, Layout, elementwise_layout, format_strides, is_contiguous_in,
                      normalised, relaid)

Scalar = Union[int, float, bool]


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


class Tensor:
    """A lazily computed array on a device. See the module docstring."""

    __array_priority__ = 100  # numpy scalars defer to Tensor's operators
    # An output of a custom gingham.autograd.Function: its node and position among the outputs
    # (class attributes: set only on such outputs, free for every other tensor).
    _grad_fn = None
    _output_nr = 0
    _hooks: Sequence = ()  # register_hook's functions (an instance list once one is added)
    # register_post_accumulate_grad_hook's functions (a leaf's list once one is added)
    _post_accumulate_hooks: Sequence = ()
    # The operation that computed this tensor, as its maker named it (None: see grad_fn);
    # whether its parents are steps of the same PyTorch operation (mean: a sum, divided), so
    # that grad_fn shows one node reading their parents; and grad_fn's view of it, made when
    # first asked for (gingham.frontend.autograd).
    _op: str | None = None
    _op_folds_parents = False
    _grad_fn_view = None
    # The memory PyTorch would give this tensor (gingham.frontend.strides): its strides, for
    # is_contiguous (row-major for every tensor until a memory format is asked for), and
    # whether it is a view of another's memory (a transpose, an expand, a slice, or computed
    # from one), whose strides gingham cannot tell, for stride(), contiguous() and reshape.
    _layout: Layout = ROW_MAJOR
    # An integer tensor made from host data (gingham.tensor): its version then and its least
    # and greatest values, read from the host array being copied in, so that the ops taking
    # indices (cross_entropy's targets, embedding, gather, ...) can refuse one out of range
    # without reading the device (see _known_range).
    _host_range: tuple[int, int, int] | None = None
    # A view (gingham.frontend.views): what it records of the tensor it was taken from (None
    # for a tensor that is not one), and, on a base, its views (weakly), which an in-place
    # write of it re-derives.
    _view_of = None
    _views: list | None = None

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, device: str, *,
                 buffer=None, parents: Sequence["Tensor"] = (),
                 build: Callable[[list], builder.Tensor] | None = None,
                 requires_grad: bool = False) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.device = _as_device(device)  # a str with torch.device's .type and .index
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

    def contiguous(self, memory_format=contiguous_format) -> "Tensor":
        """``self`` if it is contiguous in ``memory_format`` (``is_contiguous``), else a copy
        that is, as PyTorch's. The layout changes no value: gingham's compiler picks each
        kernel's own (see :mod:`gingham.frontend.strides`). Of a tensor that PyTorch holds as
        a view (see :meth:`stride`), always a copy, as PyTorch's, whose ``stride()`` is known.

            x = x.contiguous(memory_format=gingham.channels_last)
            x.is_contiguous(), x.is_contiguous(memory_format=gingham.channels_last)
            # (False, True) for x of shape (2, 3, 4, 5)
        """
        fmt = _memory_format("contiguous", memory_format, self.ndim)
        if not self._layout.view and is_contiguous_in(self.shape, self._layout.strides, fmt):
            return self
        copy = self.clone(memory_format=fmt)  # grad_fn CloneBackward0, as PyTorch's
        copy._layout = copy._layout.owned()
        return copy

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
            raise AutogradError(
                "requires_grad_(): only leaf tensors can change requires_grad (gradients are "
                "taken with respect to leaves); use .detach().requires_grad_() for a new leaf"
            )
        if requires_grad:
            _check_differentiable("requires_grad_()", self)
        self.requires_grad = bool(requires_grad)
        return self

    def __repr__(self) -> str:
        state = "" if self._buffer is not None else ", lazy"
        return (f"Tensor(shape={self.shape}, dtype={dt.dtype_name(self.dtype)}, "
                f"device='{self.device}'{state})")

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
        # PyTorch's words: `if mask:` or `while loss > tol:` of a tensor of many values
        if self.size != 1:
            raise ShapeError(f"Boolean value of a tensor of shape {self.shape} ({self.size} "
                             "values) is ambiguous; use .any() or .all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def _scalar(self, to: str):
        if self.size != 1:
            raise ShapeError(f"{to}(): only one element tensors can be converted to Python "
                             f"scalars, not shape {self.shape}")
        return self.item()

    def __index__(self) -> int:
        """A one-element integer tensor as a Python index, as PyTorch's (``x[:, i:i + 4]``
        with ``i`` a tensor, which Keras' RandomCrop writes). Refused inside gingham.jit:
        the index would be read once while tracing and frozen into the compiled program."""
        from .jit import current_trace

        if self.dtype.kind not in "iub" or self.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            f"index, not a {self.dtype} tensor of shape {self.shape}")
        if current_trace() is not None:
            raise GinghamError(
                "a tensor used as a Python index inside a function traced by gingham.jit "
                "(a slice bound, a range): its value would be frozen into the compiled "
                "program; index with a tensor of positions (gather) or a Python int instead")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def to(self, *args, device=None, dtype=None, non_blocking: bool = False,
           copy: bool = False, memory_format=None) -> "Tensor":
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
        accepted and ignored (copies are synchronous); a ``memory_format`` the tensor is not
        laid out in gives a copy in that layout, as PyTorch's (which changes no value: see
        :mod:`gingham.frontend.strides`). To move a tensor itself, keeping its identity,
        see :meth:`gingham.nn.Module.to`.

            half = x.to("float16")                  # x.astype("float16")
            y = x.to("cpu", np.float16)             # float16 on the cpu device
            h = first(x.to("cuda:0")).to("cpu")     # first's parameters get gradients too
        """
        from ..devices import get_device

        fmt = _memory_format("Tensor.to", memory_format, self.ndim)
        target_device, target_dtype = placement(args, device, dtype)
        target_dtype = self.dtype if target_dtype is None else target_dtype
        relayout, strides = relaid(self.shape, self._layout.strides, fmt)
        if target_device is None or get_device(target_device) is get_device(self.device):
            if target_dtype == self.dtype and not copy and not relayout:
                return self
            converted = (self.astype(target_dtype) if target_dtype != self.dtype
                         else self.clone())
            converted._layout = converted._layout.with_strides(strides)
            return converted
        refuse_while_tracing(f"Tensor.to('{target_device}')")
        source = self if target_dtype == self.dtype else self.astype(target_dtype)
        moved = tensor(source.numpy(), device=target_device, dtype=target_dtype)
        moved._layout = moved._layout.with_strides(strides)
        if source.requires_grad and is_grad_enabled():
            moved.requires_grad = True
            moved._moved_from = source
        return moved

    def _known_range(self) -> tuple[int, int] | None:
        """The least and greatest values of this integer tensor where the host knows them
        without reading the device: a tensor made by :func:`tensor` (or moved with ``to``) and
        not changed in place since. ``None`` for a computed tensor (an ``argmax``), whose
        values only the device holds.

            gingham.tensor([3, 0, 2])._known_range()    # (0, 3)
        """
        if self._host_range is None:
            return None
        version, least, greatest = self._host_range
        return (least, greatest) if version == self._version else None

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
            detached._alias_of = self._alias_of if self._alias_of is not None else self
        else:
            detached = self._derive(self.shape, self.dtype, [self],
                                    lambda nodes: builder.stop_gradient(nodes[0]))
            detached.requires_grad, detached._detached = False, True
        # The same memory in PyTorch: the same layout, and a view where this one is.
        detached._layout = self._layout
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
        copied._layout = self._layout  # laid out as this one (offset too), as PyTorch's copy
        memo[id(self)] = copied
        return copied

    # -- building operations ------------------------------------------------------------------------
    def _derive(self, shape, dtype, parents, build, op: str | None = None) -> "Tensor":
        """A tensor computed by ``build`` from ``parents``; ``op`` names the operation for
        :attr:`grad_fn` (without it, the function that made ``build`` names it)."""
        requires = _grad_mode.enabled and any(p.requires_grad for p in parents)
        device = parents[0].device
        for parent in parents[1:]:
            if parent.device != device:
                raise DeviceError(
                    f"{op + ': ' if op else ''}operands are on different devices ({device} "
                    f"and {parent.device}); move one with .to(device)"
                )
        derived = Tensor(shape, dtype, device, parents=parents, build=build,
                         requires_grad=requires)
        if op is not None:
            derived._op = op
        return derived

    def _scalar_or_tensor(self, other) -> "Tensor | Scalar":
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (bool, int, float, np.number)):
            return other.item() if isinstance(other, np.number) else other
        if isinstance(other, np.ndarray):
            return tensor(other, device=self.device)
        raise TypeError(f"unsupported operand type {type(other).__name__}")

    def _elementwise(self, op: Callable, others: Sequence, name: str,
                     result_dtype: np.dtype | None = None, *,
                     promote: bool | None = None) -> "Tensor":
        """The elementwise ``op(self, *others)`` of builder nodes (numbers stay literals).

        ``promote`` (the default without ``result_dtype``): the tensors are first cast to
        PyTorch's common dtype of the operands (:func:`promotion.result_type`), which is the
        result's unless ``result_dtype`` says otherwise (a comparison's bool). Without it the
        operands enter as they are, for ops whose operands differ by design (a bool mask
        beside values); Tile's rule then types the result (:func:`promotion.widened`,
        :func:`promotion.unpromoted_result_type`).

            x._elementwise(lambda a, b: a + b, [2.5], "add")   # int32 x: float32
        """
        operands = [self] + [self._scalar_or_tensor(o) for o in others]
        promote = result_dtype is None if promote is None else promote
        if promote:
            common = promotion.result_type(*operands)
            operands = [(o if o.dtype == common else o.astype(common)) if isinstance(o, Tensor)
                        else promotion.in_dtype(o, common) for o in operands]
        else:  # an integer tensor beside a Python float: the default float, if not float32
            operands = promotion.widened(operands)
        tensors = [o for o in operands if isinstance(o, Tensor)]
        shape = _broadcast_shapes(name, [t.shape for t in tensors])
        if promote:
            dtype = common if result_dtype is None else result_dtype
        else:
            dtype = (result_dtype if result_dtype is not None
                     else promotion.unpromoted_result_type(*operands))
        # Tile's arithmetic on bools gives int32 (NumPy's); PyTorch's stays bool (True + True
        # is True), so a bool result is cast back.
        restore = "bool" if promote and result_dtype is None and dt.is_bool(dtype) else None
        positions = [i for i, o in enumerate(operands) if isinstance(o, Tensor)]

        def build(nodes):
            values = list(operands)
            for position, node in zip(positions, nodes):
                values[position] = node
            result = op(*values)
            return builder.cast(result, restore) if restore else result

        result = self._derive(shape, dtype, tensors, build, name)
        result._layout = elementwise_layout(shape, [(t.shape, t._layout) for t in tensors],
                                            len(tensors) < len(operands))
        return result

    # arithmetic ---------------------------------------------------------------------------------
    def __add__(self, o): return self._elementwise(lambda a, b: a + b, [o], "add")
    def __radd__(self, o): return self._elementwise(lambda a, b: b + a, [o], "add")
    def __sub__(self, o):
        _no_bool("subtract", "Subtraction, the `-` operator,", self, o)
        return self._elementwise(lambda a, b: a - b, [o], "subtract")
    def __rsub__(self, o):
        _no_bool("subtract", "Subtraction, the `-` operator,", self, o)
        return self._elementwise(lambda a, b: b - a, [o], "subtract")
    def __mul__(self, o): return self._elementwise(lambda a, b: a * b, [o], "multiply")
    def __rmul__(self, o): return self._elementwise(lambda a, b: b * a, [o], "multiply")
    def __truediv__(self, o): return _true_divide(self, o)
    def __rtruediv__(self, o):
        # A number stays a constant of the program, as in the other reflected operators: made
        # a tensor of its own, it was a leaf that a function traced with placeholders could
        # not build (1.0 / x in a traced op).
        if isinstance(o, Tensor):
            return _true_divide(o, self)
        divisor, dividend = _float_operands(self, o)
        return divisor._elementwise(lambda a, b: b / a, [dividend], "divide")
    def __mod__(self, o): return _remainder(self, o)
    def __rmod__(self, o): return _remainder(_weak_scalar(o, self), self)
    def __floordiv__(self, o): return _floor_divide(self, o)
    def __rfloordiv__(self, o): return _floor_divide(_weak_scalar(o, self), self)
    def __neg__(self):
        _no_bool("negative", "Negation, the `-` operator,", self)
        return self._elementwise(lambda a: -a, [], "negative")
    def __pow__(self, o):
        base, exponent = _promoted(_autocast_float32(self), o)
        if dt.is_bool(base.dtype) and isinstance(exponent, bool):
            return base | (not exponent)  # PyTorch's x ** True is x, x ** False all True
        return base._elementwise(_pow_of(base.dtype), [exponent], "pow")

    def _compare(self, other, fn, name: str) -> "Tensor":
        """``fn(self, other)`` in the operands' common dtype (PyTorch's), a bool tensor."""
        return self._elementwise(fn, [other], name, dt.BOOL, promote=True)

    def __lt__(self, o): return self._compare(o, lambda a, b: a < b, "less")
    def __le__(self, o): return self._compare(o, lambda a, b: a <= b, "less_equal")
    def __gt__(self, o): return self._compare(o, lambda a, b: a > b, "greater")
    def __ge__(self, o): return self._compare(o, lambda a, b: a >= b, "greater_equal")
    def __eq__(self, o): return self._compare(o, _eq, "equal")  # type: ignore[override]
    def __ne__(self, o): return self._compare(o, _ne, "not_equal")  # type: ignore[override]
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
    # integer shifts, as PyTorch's << and >> (TorchMethods.bitwise_left_shift / _right_shift)
    def __lshift__(self, o): return self.bitwise_left_shift(o)
    def __rshift__(self, o): return self.bitwise_right_shift(o)
    def __rlshift__(self, o): return _weak_scalar(o, self).bitwise_left_shift(self)
    def __rrshift__(self, o): return _weak_scalar(o, self).bitwise_right_shift(self)

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
        exponent, base = _promoted(_autocast_float32(self), base)
        power = _pow_of(exponent.dtype)
        return exponent._elementwise(lambda a, b: power(b, a), [base], "pow")

    def square(self) -> "Tensor":
        """``self ** 2`` in this tensor's dtype (an integer stays an integer, a bool becomes
        int64, as PyTorch's)."""
        if not dt.is_float(self.dtype):  # Tile's pow computes in floating point
            x = self.astype(dt.INT64) if dt.is_bool(self.dtype) else self
            return x._elementwise(lambda a: a * a, [], "square")
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
        x = _floating(self, autocast=True)
        name = dt.dtype_name(x.dtype)
        return x._elementwise(lambda a: _log1p(a, name), [], "log1p")

    def expm1(self) -> "Tensor":
        """``exp(x) - 1``, accurate also where ``|x|`` is tiny (a series there)."""
        x = _floating(self, autocast=True)
        name = dt.dtype_name(x.dtype)
        return x._elementwise(lambda a: _expm1(a, name), [], "expm1")

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
        x = _floating(self)
        name = dt.dtype_name(x.dtype)
        return x._elementwise(lambda a: _asinh(a, name), [], "asinh")

    def acosh(self) -> "Tensor":
        """The inverse hyperbolic cosine (NaN below 1; the gradient at 1 is inf, as PyTorch's)."""
        x = _floating(self)
        name = dt.dtype_name(x.dtype)
        return x._elementwise(lambda a: _acosh(a, name), [], "acosh")

    def atanh(self) -> "Tensor":
        """``(log1p(x) - log1p(-x)) / 2``: +-inf at +-1 (gradient inf), NaN beyond."""
        x = _floating(self)
        name = dt.dtype_name(x.dtype)
        return x._elementwise(
            lambda a: (_log1p(a, name) - _log1p(-a, name)) * 0.5, [], "atanh")

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
        """``sqrt(self^2 + other^2)`` without overflow or underflow, as C's ``hypot``: the
        larger magnitude times ``sqrt(1 + (smaller / larger)^2)`` (the squares overflowed
        float32 from ``|x| > 1.8e19``: ``hypot(2.5, 1e30)`` was inf); inf where either is
        inf (NaN or not), NaN where either is NaN otherwise; the gradient ``x / hypot``.

            radius = x.hypot(y)
        """
        a, b = _float_operands(self, other)
        x, y = a.abs(), b.abs()
        first = x >= y
        larger, smaller = where(first, x, y), where(first, y, x)
        ratio = smaller / where(larger == 0, 1.0, larger)
        value = where(x.isinf() | y.isinf(), math.inf,
                      larger * (ratio * ratio + 1.0).sqrt()).detach()
        # The gradient, x / hypot, given by hand: the chain rule through the ratio divides
        # by the larger value squared, which overflows float32 (NaN gradients from 1e19).
        usable = value.isfinite() & (value != 0)
        scale = where(usable, value, 1.0)
        linear = (a * where(usable, a / scale, 0.0).detach()
                  + b * where(usable, b / scale, 0.0).detach())
        return where(usable, value + (linear - linear.detach()), value)

    def logaddexp(self, other) -> "Tensor":
        """``log(exp(self) + exp(other))`` without overflow (``max + log1p(exp(-|a - b|))``);
        equal arguments, infinities included, give ``a + log(2)`` and half the gradient each.

            torch_like = a.logaddexp(b)
        """
        a, b = _float_operands(self, other)
        name = dt.dtype_name(a.dtype)
        return a._elementwise(lambda p, q: _logaddexp(p, q, builder.exp, 1.0, name), [b],
                              "logaddexp")

    def logaddexp2(self, other) -> "Tensor":
        """``log2(2**self + 2**other)`` without overflow."""
        a, b = _float_operands(self, other)
        name = dt.dtype_name(a.dtype)
        return a._elementwise(
            lambda p, q: _logaddexp(p, q, lambda d: builder.pow(2.0, d), math.log(2.0), name),
            [b], "logaddexp2")

    def fmod(self, other) -> "Tensor":
        """The remainder of ``self / other`` with the dividend's sign (C's ``fmod``), where
        :meth:`remainder` (``%``) takes the divisor's. Integers: C's ``%`` (by zero, 0)."""
        a, b = _promoted(self, other)
        _not_for_bool("fmod", a)
        return a._elementwise(lambda p, q: p % q, [b], "fmod")

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
        for name, operand in (("end", end), ("weight", weight)):
            if isinstance(operand, Tensor) and operand.dtype != self.dtype:
                raise promotion.PromotionError(
                    f"lerp: expected dtype {dt.dtype_name(self.dtype)} for `{name}` but got "
                    f"dtype {dt.dtype_name(operand.dtype)} (PyTorch's lerp does not promote)")
        if not dt.is_float(self.dtype):
            raise promotion.PromotionError(f"lerp: needs floating-point tensors, not "
                                           f"{dt.dtype_name(self.dtype)}")

        def lerp(start, stop, w):
            diff = stop - start
            return builder.select(builder.abs(w) < 0.5, start + diff * w, stop - diff * (1.0 - w))

        return self._elementwise(lerp, [end, weight], "lerp")

    def addcmul(self, tensor1: "Tensor", tensor2: "Tensor", *, value=1) -> "Tensor":
        """``self + value * tensor1 * tensor2``, in the tensors' common dtype (as PyTorch's:
        a float ``value`` for integer tensors is truncated toward zero; bools are refused)."""
        common = promotion.result_type(self, tensor1, tensor2)
        _not_for_bool("addcmul", common)
        if isinstance(value, float) and not dt.is_float(common):
            value = int(value)
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

    def softmax(self, dim: int, dtype=None) -> "Tensor":
        """``gingham.nn.functional.softmax(self, dim, dtype=dtype)``."""
        from ..nn import functional

        return functional.softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim: int, dtype=None) -> "Tensor":
        """``gingham.nn.functional.log_softmax(self, dim, dtype=dtype)``."""
        from ..nn import functional

        return functional.log_softmax(self, dim, dtype=dtype)

    def astype(self, dtype) -> "Tensor":
        target = dt.as_tile_dtype(dtype)
        name = dt.dtype_name(target)
        return self._elementwise(lambda a: builder.cast(a, name), [], "astype", target)

    def type_as(self, other: "Tensor") -> "Tensor":
        """This tensor in ``other``'s dtype (itself when the dtypes are equal)."""
        return self._in_dtype(other.dtype)

    def clone(self, *, memory_format=preserve_format) -> "Tensor":
        """A new tensor with this value; gradients flow through it to ``self``, as PyTorch's.
        Its layout (:mod:`gingham.frontend.strides`) is this tensor's, or ``memory_format``'s
        when one is given."""
        fmt = _memory_format("clone", memory_format, self.ndim)
        name = dt.dtype_name(self.dtype)
        copied = self._elementwise(lambda a: builder.cast(a, name), [], "clone")
        copied._layout = copied._layout.with_strides(
            self._layout.strides if fmt is preserve_format
            else normalised(self.shape, format_strides(self.shape, fmt)))
        return copied

    # reductions -----------------------------------------------------------------------------------
    # Each takes PyTorch's ``dim``/``keepdim`` and NumPy's ``axis``/``keepdims`` (PyTorch accepts
    # those spellings too); ``dim`` is an int, a tuple of ints or None (every dim).
    def sum(self, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
        """The sum along ``dim`` (an int, a tuple or None: every dim); bools and integers
        sum in int64 unless ``dtype`` says otherwise, as PyTorch's (an int32 sum would wrap
        around silently).

            counts.sum(0)            # int64
        """
        dims, keep = _dim_arguments("sum", dim, keepdim, axis, keepdims)
        x = _accumulating(self, dtype)
        return _reduce(_autocast_float32(x), "+", dims, keep, "sum")

    def mean(self, dim=None, keepdim: bool = False, *, dtype=None, axis=None, keepdims=None):
        dims, keep = _dim_arguments("mean", dim, keepdim, axis, keepdims)
        x = _autocast_float32(self if dtype is None else self.astype(dtype))
        if not dt.is_float(x.dtype):
            raise promotion.PromotionError(
                f"mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype, not {dt.dtype_name(x.dtype)} (give dtype=, as to "
                "PyTorch's)")
        count = math.prod(x.shape[a] for a in _axes("mean", x.shape, dims)) or 1
        total = _reduce(x, "+", dims, keep, "mean")
        mean = total / float(count)
        mean._op, mean._op_folds_parents = "mean", True  # one node to grad_fn, as to PyTorch
        return mean

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
        return _reduce(_autocast_float32(_accumulating(self, dtype)), "*", dims, keep, "prod")

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
        return _without_nan(_accumulating(self, dtype)).sum(_none_if_empty(dim), keepdim)

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
        Tensor, ndarray or list (``x[idx]``, ``x[:, [0, 2]]``) or a boolean mask over one or
        more dims (``x[x > 0]``: its count is read from the device, so not inside
        ``gingham.jit``). See :mod:`gingham.frontend.indexing`.
        """
        return _getitem(self, key)

    # autograd ------------------------------------------------------------------------------------------
    def backward(self, gradient: "Tensor | np.ndarray | None" = None,
                 retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: "Tensor | Sequence[Tensor] | None" = None) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires it
        (only for ``inputs``, leaves or not, when given), as PyTorch's. ``gradient`` is
        needed unless this tensor has one element. Gradients are lazy tensors: the gradient
        program joins the graph, so an optimiser step computes forward, backward and update
        as one compiled program. gingham keeps lazy graphs, so a second ``backward()``
        through the same graph works (and accumulates) whatever ``retain_graph`` says; with
        ``create_graph`` the gradients are differentiable (a gradient penalty). See
        :func:`gingham.autograd.backward`.

            loss.backward()
            penalty.backward(inputs=[w])        # only w.grad changes
        """
        from .autograd import accumulate_gradients

        if isinstance(inputs, Tensor):
            inputs = [inputs]
        accumulate_gradients([self], [gradient], create_graph,
                             None if inputs is None else list(inputs), "backward()")

    @property
    def grad_fn(self):
        """The node of the operation that computed this tensor, as PyTorch's: None for a leaf
        and for a tensor that requires no gradient; otherwise a
        :class:`~gingham.frontend.autograd.GradFn` with ``name()`` and ``next_functions``,
        to test, print and walk (gingham computes gradients from the whole graph with Tile's
        autodiff; the node computes nothing itself).

            y = (x @ w).relu().sum()
            y.grad_fn                                    # <SumBackward0 object at 0x...>
            y.grad_fn.next_functions[0][0].name()        # 'ReluBackward0'
        """
        from .autograd import grad_fn_of

        return grad_fn_of(self)

    def register_hook(self, hook: Callable[["Tensor"], "Tensor | None"]) -> "RemovableHandle":
        """Call ``hook(grad)`` whenever a backward pass has this tensor's whole gradient; a
        tensor it returns replaces the gradient from there on (into ``.grad`` of a leaf, on
        through the graph otherwise), as PyTorch's. Returns a handle whose ``remove()``
        unregisters it. Hooks run while the (lazy) gradient is built, so inside gingham.jit
        they run once, at tracing, and what they compute is part of the step.

            w.register_hook(lambda grad: grad.clamp(-1.0, 1.0))   # clip w's gradient
        """
        if not self.requires_grad:
            raise AutogradError("register_hook(): cannot register a hook on a tensor that "
                                "doesn't require gradient")
        node = self._grad_fn
        if node is not None:  # an output of a custom Function: its node runs the hooks
            hooks = node.output_hooks.setdefault(self._output_nr, [])
        else:
            if not isinstance(self._hooks, list):
                self._hooks = []
            hooks = self._hooks
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_post_accumulate_grad_hook(
            self, hook: Callable[["Tensor"], None]) -> "RemovableHandle":
        """Call ``hook(self)`` after each ``backward()`` has added into this leaf's ``.grad``,
        as PyTorch's: the optimiser-in-backward recipe steps and clears each parameter there.
        Returns a handle whose ``remove()`` unregisters it. Like :meth:`register_hook`'s,
        the hook runs while the lazy gradients are built (inside ``gingham.jit``, once, at
        tracing, and what it computes is part of the step).

            def step(p): optimizers[p].step(); optimizers[p].zero_grad()
            for p in model.parameters():
                p.register_post_accumulate_grad_hook(step)
        """
        if not self.requires_grad:
            raise GinghamError("register_post_accumulate_grad_hook(): cannot register a hook "
                               "on a tensor that doesn't require gradient")
        if not self.is_leaf:
            raise GinghamError("register_post_accumulate_grad_hook(): post accumulate grad "
                               "hooks cannot be registered on non-leaf tensors (use "
                               "register_hook)")
        if not isinstance(self._post_accumulate_hooks, list):
            self._post_accumulate_hooks = []
        self._post_accumulate_hooks.append(hook)
        return RemovableHandle(self._post_accumulate_hooks, hook)

    def retain_grad(self) -> None:
        """Fill ``.grad`` of this computed tensor too on ``backward()`` (accumulating, as a
        leaf's), as PyTorch's; a no-op on a leaf.

            hidden = encoder(x); hidden.retain_grad(); loss.backward(); hidden.grad
        """
        if not self.requires_grad:
            raise AutogradError("retain_grad(): can't retain_grad on a tensor that has "
                                "requires_grad=False")
        if self.is_leaf or self.retains_grad:
            return
        reference = weakref.ref(self)

        def keep(grad: "Tensor") -> None:
            t = reference()
            if t is not None:
                t.grad = grad if t.grad is None else t.grad + grad

        keep._retains_grad = True
        self.register_hook(keep)

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this computed tensor."""
        node = self._grad_fn
        hooks = node.output_hooks.get(self._output_nr, ()) if node is not None else self._hooks
        return any(getattr(h, "_retains_grad", False) for h in hooks)

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

    def type(self, dtype=None) -> "Tensor | str":
        """This tensor in ``dtype`` (itself when it has it already), as PyTorch's
        ``x.type(torch.int32)``; without ``dtype``, PyTorch's name of the tensor type
        (``"torch.FloatTensor"``).

            x.type("int32")
        """
        if dtype is None:
            return f"torch.{_TENSOR_TYPE_NAMES[dt.dtype_name(self.dtype)]}Tensor"
        return self._in_dtype(dtype)

    def _in_dtype(self, dtype) -> "Tensor":
        """This tensor in ``dtype``, itself when it has that dtype already (as PyTorch's
        ``x.float()`` returns ``x`` for a float32 ``x``)."""
        target = dt.as_tile_dtype(dtype)
        return self if self.dtype == target else self.astype(target)


class RemovableHandle:
    """What :meth:`Tensor.register_hook` returns: ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()


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
    try:
        array = np.asarray(data)
    except ValueError as error:  # NumPy's "inhomogeneous shape": say where, as PyTorch does
        raise ValueError(f"tensor(): {_ragged(data) or error}") from None
    if dtype is None and array.dtype == np.float64 and not isinstance(data, np.ndarray):
        dtype = default_float()  # Python floats: float32 unless set_default_dtype changed it
    if dtype is not None:  # a Tile type; the name "bfloat16" too (numpy knows it from ml_dtypes)
        array = array.astype(dt.as_tile_dtype(dtype))
    array = np.require(array, requirements="C")
    array = array.astype(dt.as_tile_dtype(array.dtype), copy=False)
    device = device or default_device_id()
    target = get_device(device)
    buffer = target.alloc(max(array.nbytes, 1))
    if array.size:
        target.copy_in(buffer, np.require(array, requirements="C"))
    made = Tensor(array.shape, array.dtype, device, buffer=buffer)
    if requires_grad:
        _check_differentiable("tensor(requires_grad=True)", made)
        made.requires_grad = True
    if array.size and dt.is_integer(array.dtype):
        # one pass over data already on the host: what the index ops check (_known_range)
        made._host_range = (made._version, int(array.min()), int(array.max()))
    return made


def _check_differentiable(op: str, x: Tensor) -> None:
    """Only floating-point tensors take gradients, as in PyTorch (an integer parameter would
    otherwise be silently never trained): ``AutogradError`` naming the dtype."""
    if not dt.is_float(x.dtype):
        raise AutogradError(f"{op}: only floating-point tensors can require gradients, not "
                            f"{dt.dtype_name(x.dtype)} (shape {x.shape})")


def _ragged(data, path: str = "data") -> str | None:
    """Where nested lists ``data`` are ragged, as PyTorch says (``expected sequence of
    length 2 at dim 1 (got 1)``), naming the item; None where they are not."""
    if not isinstance(data, (list, tuple)):
        return None
    lengths = [len(item) if isinstance(item, (list, tuple)) else None for item in data]
    for position, length in enumerate(lengths):
        if length != lengths[0]:
            wanted = "a number" if lengths[0] is None else f"a sequence of length {lengths[0]}"
            got = "is a number" if length is None else f"has length {length}"
            return (f"ragged nested sequence: {path}[0] is {wanted} but {path}[{position}] "
                    f"{got}; every row must have the same length")
    return next(filter(None, (_ragged(item, f"{path}[{position}]")
                              for position, item in enumerate(data))), None)


def _creation(op: str, args: tuple, dtype, device) -> tuple[tuple[int, ...], np.dtype, str]:
    """The shape, dtype and device of ``zeros``/``ones``: PyTorch's ``zeros(2, 3)`` and
    ``zeros((2, 3))``, and gingham's positional ``zeros(shape, dtype, device)``."""
    position = 0
    if args and isinstance(args[0], (tuple, list)):
        shape, position = tuple(args[0]), 1
    else:
        while position < len(args) and isinstance(args[position], (int, np.integer)) and (
                not isinstance(args[position], bool)):
            position += 1
        shape = args[:position]
    rest = args[position:]
    if rest and isinstance(rest[0], (bool, float, np.floating)):  # a size, not a dtype
        raise TypeError(f"{op}(): sizes must be ints, not {type(rest[0]).__name__} "
                        f"(in {args!r})")
    if len(rest) > 2:
        raise TypeError(f"{op}(): too many positional arguments {args!r} (the sizes, then "
                        "dtype and device)")
    if rest:
        dtype = rest[0] if dtype is None else dtype
    if len(rest) == 2:
        device = rest[1] if device is None else device
    return _sizes(op, shape), dt.as_tile_dtype(
        default_float() if dtype is None else dtype), device


def _created(array: np.ndarray, device, requires_grad: bool) -> Tensor:
    return tensor(array, device=device, requires_grad=requires_grad)


def zeros(*size, dtype=None, device: str | None = None, requires_grad: bool = False) -> Tensor:
    """Zeros, as ``torch.zeros``: ``zeros(2, 3)``, ``zeros((2, 3), dtype=gingham.float16,
    device="cuda:0", requires_grad=True)``; gingham's ``zeros(shape, dtype, device)`` too."""
    shape, dtype, device = _creation("zeros", size, dtype, device)
    return _created(np.zeros(shape, dtype), device, requires_grad)


def ones(*size, dtype=None, device: str | None = None, requires_grad: bool = False) -> Tensor:
    """Ones, as ``torch.ones`` (the arguments as :func:`zeros`')."""
    shape, dtype, device = _creation("ones", size, dtype, device)
    return _created(np.ones(shape, dtype), device, requires_grad)


#: PyTorch's legacy names of the tensor types (``x.type()``).
_TENSOR_TYPE_NAMES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
    "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
    "bool": "Bool", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
}


def full(shape, value, dtype=None, device: str | None = None, *,
         requires_grad: bool = False) -> Tensor:
    """``value`` everywhere in ``shape``, as ``torch.full(size, fill_value)``: without
    ``dtype``, the value's (a bool gives bool, an int int64, a float the default float).

        gingham.full((2, 3), 7)          # int64, as torch.full
    """
    shape = _sizes("full", (shape,) if isinstance(shape, (int, np.integer)) else shape)
    if dtype is None:
        number = value.item() if isinstance(value, (np.number, np.bool_)) else value
        dtype = promotion.number_dtype(number)
    return _created(np.full(shape, value, dt.as_tile_dtype(dtype)), device, requires_grad)


def arange(start, stop=None, step=1, dtype=None, device: str | None = None, *,
           requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` below ``stop``, as ``torch.arange``: without ``dtype``,
    int64 for integers and the default float dtype (float32 unless changed) where any
    argument is a float.

        gingham.arange(0, 1, 0.25)       # float32 [0, 0.25, 0.5, 0.75]
    """
    if step == 0:
        raise ShapeError(f"arange: step must be nonzero (start {start}, end {stop})")
    if dtype is None:
        numbers = [v for v in (start, stop, step) if v is not None]
        if any(isinstance(v, (float, np.floating)) for v in numbers):
            dtype = default_float()
    dtype = dt.as_tile_dtype(dtype) if dtype is not None else None
    # the count and the values in float64, rounded once to the result's dtype
    values = np.arange(start, stop, step, dtype=None if dtype is None else np.float64)
    return _created(values if dtype is None else values.astype(dtype), device, requires_grad)


def _as_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    if array.dtype == np.float64 and not isinstance(value, np.ndarray):
        array = array.astype(like.dtype if dt.is_float(like.dtype) else default_float())
    return tensor(array, device=like.device)


# -- the modules built on Tensor ------------------------------------------------------------------
# Tensor's methods above call their functions, and they import Tensor from here, so they are
# imported once Tensor exists (as gingham.frontend.inplace is, last). One job each:
#   dims.py           dims and shapes as arguments, and their errors (imported above: no Tensor)
#   elementwise.py    elementwise math: the formulas on Tile nodes and PyTorch's dtype rules
#   contractions.py   matmul, einsum and the products built on them
#   layout.py         reshapes, permutations, broadcasts, basic indexing, joins, flips, diagonals
#   reductions.py     sums, extremes, running reductions, variance and the statistics on them
#   graph.py          realising the lazy graph, its gradients, assigning and moving leaves
#   torch_methods.py  the rest of torch.Tensor's methods, installed onto Tensor here
#   namespace.py      torch's functions: the methods' function spellings, creation helpers
# The rest of gingham imports their names from here, as when they were written here.
from .elementwise import (  # noqa: E402
    maximum, minimum, where, _acosh, _asinh, _atan2, _autocast_float32,
    _BFLOAT16_FINFO, _bitwise, _eq, _euclid, _expm1, _finfo_max, _float_operands, _floating,
    _floor_divide, _gcd_steps, _integral, _log1p, _logaddexp, _ne, _no_bool, _not_for_bool,
    _remainder, _sign_bit,
    _pow_of, _promoted, _true_divide, _trunc, _unary_float, _weak_scalar, _where_dtype,
    _without_nan,
)
from .contractions import (  # noqa: E402
    batched_operand_index, chain_matmul, einsum, inner, kron, matmul, outer, tensordot,
)
from .layout import (  # noqa: E402
    atleast_1d, atleast_2d, atleast_3d, block_diag, cat, column_stack, concat, cross, diag,
    diag_embed, diagonal, diff, dstack, flip, fliplr, flipud, hstack, meshgrid, moveaxis, movedim,
    permute_dims, repeat_interleave, reshape, roll, rot90, stack, tile_dims, trace, tril, triu,
    vstack, _broadcast_to, _diagonal, _getitem, _getitem_plan,
)
from .reductions import (  # noqa: E402
    corrcoef, cov, cumulative_trapezoid, std_mean, trapezoid, trapz, var_mean, _arg_extreme,
    _accumulating, _cumulative, _max_or_min, _reduce, _variance,
)
from .graph import (  # noqa: E402
    assign_all, graph_inputs, is_autograd_input, is_graph_input, move_all, moves_count,
    placement, realize, refuse_while_tracing, _become_leaf, _bound_graph, _gradients,
)
from .torch_methods import install as _install_torch_methods  # noqa: E402

_install_torch_methods()
# after the methods: the namespace makes functions of them (gingham.sum calls Tensor.sum)
from .namespace import (  # noqa: E402
    acos, acosh, addcdiv, addcmul, aminmax, arccos, arccosh, arcsin, arcsinh, arctan, arctan2,
    arctanh, as_tensor, asarray, asin, asinh, atan, atan2, atanh, broadcast_shapes,
    broadcast_tensors, can_cast, cartesian_prod, cdist, combinations, copysign, cosh,
    count_nonzero, empty, empty_like, exp2, expm1, eye, fill, fix, fmod, frac, from_numpy,
    full_like, gcd, get_default_dtype, hypot, is_tensor, isfinite, isinf, isnan, lcm, lerp,
    linspace, log10, log1p, log2, logaddexp, logaddexp2, logspace, logsumexp, METHOD_FUNCTIONS,
    nan_to_num, nanmean, nansum, nextafter, ones_like, promote_types, remainder, result_type, rsub,
    scalar_tensor, sinh, tan, tril_indices, triu_indices, trunc, vander, zeros_like,
)

__all__ = [
    "Tensor", "ShapeError", "DTypeError", "DimError", "IndexRangeError", "ValuesIndices", "cat",
    "tensor", "zeros", "ones", "full", "arange", "matmul", "reshape",
    "permute_dims", "concat", "stack", "maximum", "minimum", "where", "realize", "no_grad",
    "is_grad_enabled", "assign_all", "move_all", "placement",
]
# and the names of the modules above that only the rest of gingham imports from here
__all__ += [
    "acos", "acosh", "addcdiv", "addcmul", "aminmax", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctan2", "arctanh", "as_tensor", "asarray", "asin", "asinh", "atan", "atan2",
    "atanh", "atleast_1d", "atleast_2d", "atleast_3d", "batched_operand_index", "block_diag",
    "broadcast_shapes", "broadcast_tensors", "can_cast", "cartesian_prod", "cdist", "chain_matmul",
    "column_stack", "combinations", "copysign", "corrcoef", "cosh", "count_nonzero", "cov",
    "cumulative_trapezoid", "diag_embed", "diagonal", "dstack", "einsum", "empty", "empty_like",
    "exp2", "expm1", "eye", "fill", "fix", "fmod", "frac", "from_numpy", "full_like", "gcd",
    "get_default_dtype", "hstack", "hypot", "is_graph_input", "is_tensor", "isfinite", "isinf",
    "isnan", "lcm", "lerp", "linspace", "log10", "log1p", "log2", "logaddexp", "logaddexp2",
    "logspace", "logsumexp", "meshgrid", "METHOD_FUNCTIONS", "moveaxis", "moves_count",
    "nan_to_num", "nanmean", "nansum", "nextafter", "ones_like", "promote_types", "remainder",
    "result_type", "rsub", "scalar_tensor", "sinh", "std_mean", "tan", "tensordot", "trapezoid",
    "trapz", "tril_indices", "triu_indices", "trunc", "vander", "var_mean", "vstack", "zeros_like",
    "_bound_graph", "_getitem_plan", "graph_inputs", "is_autograd_input", "_gradients",
]

# Tensor's in-place methods and operators (x.add_(y), x += y, x[i] = v): gingham.frontend.inplace
from .inplace import install as _install_in_place  # noqa: E402  (it needs the names above)

_install_in_place()
