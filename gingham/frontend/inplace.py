"""In-place operations with PyTorch's meaning: ``x.add_(y)``, ``x += y``, ``x[1:, 0] = 0``,
``x[mask] = v``, ``p.data.mul_(0.5)``, ``with no_grad(): p -= lr * p.grad``.

gingham's tensors are lazy nodes of a graph, so an in-place operation is a *rebinding*: the
tensor object takes the new value's place in the graph, and everything already computed from
its old value keeps the old value. Three cases:

* **A computed tensor** (``h = conv(x); h.relu_()``): the object becomes the node of the new
  value, computed from a snapshot of the old one, so gradients flow through both, as in
  PyTorch.
* **A leaf** (a parameter, a buffer, data) whose new value needs no gradient: it is assigned
  (:func:`gingham.frontend.tensor.assign_all`), so it stays a leaf with the same identity,
  as an optimiser's update does. Inside ``gingham.jit`` the update becomes an output of the
  traced step, applied at every replay, and later reads in the same step see the new value.
  A leaf that requires gradients can only be updated under ``gingham.no_grad()`` (PyTorch's
  rule: the gradient would otherwise have nowhere to go).
* **Tensors computed before the update** (``y = 2 * x; x.add_(1)``): their graphs are pointed
  at a snapshot of the old value (every tensor remembers, weakly, the tensors computed from
  it), so ``y`` is still ``2 * old x``. Calling ``backward()`` through such a graph when the
  snapshot is a leaf that requires gradients is refused, as PyTorch refuses it.

    w = gingham.tensor(np.ones(3), requires_grad=True)
    with gingham.no_grad():
        w -= 0.1 * w.grad          # w keeps its identity: the model sees the new value
    h = x @ w
    h[h < 0] = 0                   # a masked write; h is still differentiable
    h.clamp_(max=6)

The write keeps the tensor's dtype, so a float result cannot be written into an integer
tensor (an error, as in PyTorch), and its shape: the new value must broadcast to it. An
indexed write ``x[key] = v`` casts ``v`` to ``x``'s dtype, as PyTorch's does.

A write into a view (``x[0].add_(1)``, ``x.t()[1].zero_()``) writes through to the tensor
it was taken from, and a write of a tensor re-derives its live views: see
:mod:`gingham.frontend.views`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import numpy as np

from ..errors import DeviceError, GinghamError
from ..tile import dtypes as dt
from .promotion import check_writable
from .tensor import (DTypeError, ShapeError, Tensor, _broadcast_to, _getitem_plan, _true_divide,
                     assign_all, is_grad_enabled, no_grad, where)
from .views import in_current_trace, put_affine, refresh


class InPlaceError(GinghamError, RuntimeError):
    """An in-place operation PyTorch refuses too (a leaf that requires gradients, outside
    ``no_grad()``), or one gingham cannot carry out where it was asked (an argument of a
    function being traced by ``gingham.jit``)."""


# -- the write ------------------------------------------------------------------------------------


def write(target: Tensor, value, op: str) -> Tensor:
    """Give ``target`` the value ``value`` in place (see the module docstring) and return
    ``target``. ``value`` is broadcast to ``target``'s shape and cast to its dtype; ``op``
    names the operation in errors."""
    from .jit import current_trace

    value = _conformed(target, value, op)
    if target._placeholder:
        raise InPlaceError(
            f"{op}: an argument of a function traced by gingham.jit cannot be changed in place "
            "(the caller's tensor would not see it); return the new value instead")
    if target._view_of is not None:
        return _write_through_view(target, value, op)
    if target._alias_of is not None:
        return _write_through_alias(target, value, op)
    trace = current_trace()
    # A leaf updated earlier in a traced step holds a computed value, and is still a leaf
    leaf = target.is_leaf or (trace is not None and trace.updates(target))
    if leaf and target.requires_grad and is_grad_enabled():
        raise InPlaceError(
            f"{op}: a leaf tensor that requires grad is being used in an in-place operation; "
            "do it under gingham.no_grad() (an update), or on a copy (.clone())")
    if leaf and not value.requires_grad:
        _assign_leaf(target, value)
    else:
        _rebind(target, value, op)
    refresh(target)
    return target


def in_place_form(compute: Callable[..., Tensor], name: str | None = None, *,
                  flag: str | None = None,
                  check: Callable[[str, Tensor], None] | None = None) -> Callable[..., Tensor]:
    """The in-place form of the function ``compute(input, *args, **kwargs)``: its result
    written into ``input`` (:func:`write`), which is returned, as PyTorch's in-place
    functions do. The one wrapper behind torch's top-level ``dropout_``, ``selu_``, ...,
    ``F``'s ``relu_``, ``elu_``, ... and ``F``'s ``inplace=True``.

    * ``name``: the in-place function's name (``"relu_"``), which its errors name.
    * ``flag``: instead, the name of ``compute``'s own argument that asks for the write
      (``F.relu``'s ``inplace``): the function keeps ``compute``'s name, writes only when the
      argument is true, and its errors name ``relu(inplace=True)``.
    * ``check``: called as ``check(op, input)`` before ``compute``, so that a bad input is
      reported under the in-place name (``relu_``) rather than ``compute``'s.

    A result that *is* ``input`` (dropout in evaluation, or with ``p=0``) writes nothing, as
    PyTorch writes nothing there: a leaf that requires grad passes, as it does there.

        relu_ = in_place_form(relu, "relu_")                  # F.relu_(h)
        relu = in_place_form(relu, flag="inplace")            # F.relu(h, inplace=True)
    """
    assert (name is None) != (flag is None), "an in-place name or a flag argument, not both"
    if flag is None:
        op = name
    else:
        op = f"{compute.__name__}({flag}=True)"
        # the flag's index among the arguments after ``input``: found once, not per call
        position = list(inspect.signature(compute).parameters).index(flag) - 1

    @functools.wraps(compute)
    def in_place(input: Tensor, *args, **kwargs) -> Tensor:  # noqa: A002 (PyTorch's name)
        if check is not None:
            check(op, input)
        value = compute(input, *args, **kwargs)
        if flag is not None and not (args[position] if len(args) > position
                                     else kwargs.get(flag, False)):
            return value
        return value if value is input else write(input, value, op)

    if name is not None:
        in_place.__name__ = in_place.__qualname__ = name
        in_place.__doc__ = (f"``{compute.__name__}`` written into ``input``, which is "
                            f"returned, as PyTorch's ``{name}``:\n\n"
                            f"        {name}(features)\n    ")
    return in_place


def _write_through_view(view: Tensor, value: Tensor, op: str) -> Tensor:
    """An in-place operation on a view: ``value`` put into the view's base, as an in-place
    write of the base (which re-derives the view from the base's new value)."""
    taken = view._view_of
    if not in_current_trace(taken):
        raise InPlaceError(
            f"{op}: a view taken outside the function gingham.jit traces (or in another "
            "trace) cannot be changed in place inside it; take the view inside the function")
    if taken.put is None:
        raise InPlaceError(
            f"{op}: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location (it is an expand()ed view); clone() it "
            "before the in-place operation")
    base = taken.base
    if base.is_leaf and base.requires_grad and is_grad_enabled():
        raise InPlaceError(
            f"{op}: a view of a leaf tensor that requires grad is being used in an in-place "
            "operation; do it under gingham.no_grad() (an update), or on a copy (.clone())")
    write(base, taken.put(base, value), op)
    return view


def _conformed(target: Tensor, value, op: str) -> Tensor:
    """``value`` as a tensor of ``target``'s shape, dtype and device."""
    if not isinstance(value, Tensor):
        if isinstance(value, (bool, int, float, np.number)):
            if isinstance(value, float) and not dt.is_float(target.dtype) and value != int(
                    value):
                raise DTypeError(f"{op}: the float value {value} cannot be written into a "
                                 f"{dt.dtype_name(target.dtype)} tensor")
            value = _constant(target, value)
        else:
            value = _from_array(target, value)
    return _fitted(target, value, target.shape, op)


def _fitted(target: Tensor, value: Tensor, shape: tuple[int, ...], op: str,
            drop_leading_ones: bool = False, any_dtype: bool = False) -> Tensor:
    """The tensor ``value`` broadcast to ``shape`` (the target's, or an indexed region's) in
    ``target``'s dtype, checked to be on its device and, unless ``any_dtype`` (an indexed
    write, which casts as ``copy_``), not a float for an integer tensor.
    ``drop_leading_ones``: leading dims of size 1 beyond ``shape``'s rank go first, as
    PyTorch's indexed writes allow (``x[0] = v[None]``)."""
    if value.device != target.device:
        raise DeviceError(f"{op}: a value on {value.device} cannot be written into a tensor on "
                          f"{target.device}; move it with .to('{target.device}')")
    if not any_dtype:
        check_writable(op, value.dtype, target.dtype)
    if value.shape != shape:
        fitted = value
        while drop_leading_ones and fitted.ndim > len(shape) and fitted.shape[0] == 1:
            fitted = fitted.reshape(fitted.shape[1:])
        try:
            value = _broadcast_to(fitted, shape, op)
        except ShapeError as error:
            raise ShapeError(f"{op}: a value of shape {value.shape} does not broadcast to the "
                             f"shape {shape} it is written into") from error
    return value if value.dtype == target.dtype else value.astype(target.dtype)


def _constant(target: Tensor, value) -> Tensor:
    """``value`` in ``target``'s shape, dtype and device (a constant of the graph)."""
    from .tensor import full

    return full(target.shape, value, target.dtype, device=target.device)


def _from_array(target: Tensor, value) -> Tensor:
    from .tensor import tensor

    return tensor(np.asarray(value), device=target.device)


def snapshot_value(target: Tensor) -> Tensor:
    """A new tensor object holding ``target``'s current value (its buffer or its node), to
    which every lazy tensor computed from ``target`` is pointed, so they keep that value."""
    old = Tensor.__new__(Tensor)
    old.__dict__.update(target.__dict__)
    old._children = None
    old._snapshot_of = target
    old._views = old._view_of = None  # an old value: no view follows it, none is written
    for parent in old._parents:  # a computed value's snapshot reads its parents: an update
        parent._adopt(old)       # of one of them must point it at their old value too
    children = target._children or []
    target._children = None
    for reference in children:
        child = reference()
        if child is None:
            continue
        child._parents = tuple(old if parent is target else parent
                               for parent in child._parents)
        old._adopt(child)
    return old


def _rebind(target: Tensor, value: Tensor, op: str) -> None:
    """Make ``target`` the node of ``value`` (computed from a snapshot of its old value)."""
    from .jit import current_trace

    if target.is_leaf and current_trace() is not None:
        raise InPlaceError(
            f"{op}: inside gingham.jit, a leaf tensor can be updated in place only with a value "
            "that needs no gradient (do it under gingham.no_grad())")
    snapshot_value(target)  # value, computed from target, now reads the snapshot
    take_value(target, value)


def take_value(target: Tensor, source: Tensor) -> None:
    """Make the tensor object ``target`` hold ``source``'s value (its graph node or buffer),
    one version newer, as a child of its new parents."""
    for name in ("_buffer", "_parents", "_build", "requires_grad", "_parent_versions",
                 "_moved_from", "_detached", "_grad_fn", "_output_nr", "_op",
                 "_op_folds_parents"):
        setattr(target, name, getattr(source, name))
    target._version += 1
    for parent in target._parents:
        parent._adopt(target)


def _assign_leaf(target: Tensor, value: Tensor) -> None:
    """A leaf's new value, outside autograd: assigned now, or, inside ``gingham.jit``, an
    update of the traced step whose value later reads in the step see."""
    from .jit import current_trace

    trace = current_trace()
    if trace is None:
        assign_all([(target, value)])  # which keeps what was computed from the old value
        return
    trace.update_in_place(target, value)


def _write_through_alias(alias: Tensor, value: Tensor, op: str) -> Tensor:
    """An in-place operation on ``p.data`` or ``p.detach()``: the leaf ``p`` gets the value
    too (outside autograd), and the alias keeps sharing it."""
    from .jit import current_trace

    base = alias._alias_of
    if base._buffer is not alias._buffer or current_trace() is not None:
        if current_trace() is not None:
            raise InPlaceError(
                f"{op}: in-place operations on .data or detach() are not supported inside "
                "gingham.jit; update the tensor itself under gingham.no_grad()")
        # the leaf has moved on since the alias was taken: the alias is a copy by now
        alias._alias_of = None
        return write(alias, value, op)
    with no_grad():
        write(base, value, op)
    base.realize()
    snapshot_value(alias)
    alias._buffer = base._buffer
    alias._version += 1
    refresh(alias)
    return alias


def copy_into(target: Tensor, value, op: str) -> Tensor:
    """``target.copy_(value)``, and ``target.data = value``: the value (broadcast, cast)
    written outside autograd."""
    with no_grad():
        detached = value.detach() if isinstance(value, Tensor) and value.requires_grad else value
        return write(target, detached, op)


# -- indexed writes --------------------------------------------------------------------------------


def setitem(target: Tensor, key, value) -> None:
    """``target[key] = value``: basic indexing (integers, slices with any step, ``None``,
    ``...``) writes ``value`` (broadcast to the indexed region) into that region; a boolean
    mask of the target's shape (or of its leading dims) writes ``value`` where it is true.
    ``value`` is a number or a tensor that broadcasts to the region (a masked write needs a
    number or a tensor that broadcasts to the whole target: the masked count is not known
    without reading the device)."""
    op = "__setitem__"
    mask = _boolean_mask(target, key)
    if mask is not None:
        write(target, _masked(target, mask, value, op), op)
        return
    if isinstance(key, tuple) and any(isinstance(k, (Tensor, np.ndarray, list)) for k in key) or (
            isinstance(key, (Tensor, np.ndarray, list))):
        raise IndexError(
            f"{op}: assignment through an integer tensor index is not supported yet; use "
            "index_copy / scatter (out of place) or a boolean mask")
    sources, out_index, region = _getitem_plan(target, key)
    value = _conformed_region(target, value, region, op)
    write(target, put_affine(target, value, sources, out_index, region), op)


def _conformed_region(target: Tensor, value, region: tuple[int, ...], op: str) -> Tensor:
    """``value`` (a number, an array or a tensor) as a tensor of the indexed ``region``'s
    shape in ``target``'s dtype: cast from any dtype (a float into an integer tensor
    truncates), as PyTorch's indexed writes, which are ``copy_``, do."""
    if not isinstance(value, Tensor):
        from .tensor import full, tensor

        value = (full(region, _number_for(target, value, op), target.dtype,
                      device=target.device)
                 if isinstance(value, (bool, int, float, np.number))
                 else tensor(np.asarray(value), device=target.device))
    return _fitted(target, value, region, op, drop_leading_ones=True, any_dtype=True)


def _number_for(target: Tensor, value, op: str):
    """The Python number ``value`` as PyTorch writes it into ``target``'s dtype: a float into
    an integer tensor truncated towards zero, into a bool tensor nonzero; a float an integer
    cannot hold (nan, inf) is an error rather than PyTorch's unspecified value."""
    if isinstance(value, np.number):
        value = value.item()
    if dt.is_bool(target.dtype):
        return bool(value)
    if isinstance(value, float) and not dt.is_float(target.dtype):
        if not np.isfinite(value):
            raise DTypeError(f"{op}: {value} cannot be written into a "
                             f"{dt.dtype_name(target.dtype)} tensor")
        return int(value)
    return value


def _boolean_mask(target: Tensor, key) -> Tensor | None:
    """``key`` as a boolean mask tensor of ``target``'s leading dims, or None if it is not
    one."""
    if isinstance(key, np.ndarray) and key.dtype == np.bool_:
        from .tensor import tensor

        key = tensor(key, device=target.device)
    if not isinstance(key, Tensor) or key.dtype != dt.BOOL:
        return None
    if key.shape != target.shape[:key.ndim]:
        raise IndexError(f"__setitem__: the mask of shape {key.shape} does not match the "
                         f"indexed tensor's shape {target.shape}")
    return key.reshape(key.shape + (1,) * (target.ndim - key.ndim))


def _masked(target: Tensor, mask: Tensor, value, op: str) -> Tensor:
    """``target`` with ``value`` where ``mask`` is true. A number or a one-element tensor is
    cast to ``target``'s dtype, as PyTorch's masked writes do; a tensor of more elements must
    be writable without a lossy cast (PyTorch asks for equal dtypes)."""
    if isinstance(value, Tensor) and value.numel() == 1:
        value = value.reshape(())
        if value.device == target.device and value.dtype != target.dtype:
            value = value.astype(target.dtype)
    if isinstance(value, Tensor):
        value = _conformed(target, value, op)
    elif isinstance(value, (bool, int, float, np.number)):
        value = _number_for(target, value, op)
    return where(mask, value, target)


# -- the in-place twins of out-of-place methods ------------------------------------------------------


def _twin(name: str) -> Callable:
    """``x.name_(...)``: ``x.name(...)`` written into ``x``."""
    compute = getattr(Tensor, name)

    def in_place(self: Tensor, *args, **kwargs) -> Tensor:
        return write(self, compute(self, *args, **kwargs), f"{name}_")

    in_place.__name__ = in_place.__qualname__ = f"{name}_"
    in_place.__doc__ = f"``x.{name}(...)`` written into ``x`` (PyTorch's ``{name}_``)."
    return in_place


def _operator(name: str, compute: Callable[[Tensor, object], Tensor]) -> Callable:
    def in_place(self: Tensor, other) -> Tensor:
        if not isinstance(other, (Tensor, bool, int, float, np.number, np.ndarray)):
            return NotImplemented
        return write(self, compute(self, other), name)

    in_place.__name__ = in_place.__qualname__ = name
    return in_place


def add_(self: Tensor, other, *, alpha=1) -> Tensor:
    """``self += alpha * other``, PyTorch's ``add_``."""
    return write(self, self + (other if alpha == 1 else other * alpha), "add_")


def sub_(self: Tensor, other, *, alpha=1) -> Tensor:
    """``self -= alpha * other``, PyTorch's ``sub_``."""
    return write(self, self - (other if alpha == 1 else other * alpha), "sub_")


def mul_(self: Tensor, other) -> Tensor:
    return write(self, self * other, "mul_")


def div_(self: Tensor, other, *, rounding_mode: str | None = None) -> Tensor:
    """``self /= other``; ``rounding_mode`` ``"trunc"`` or ``"floor"`` as PyTorch's."""
    if rounding_mode is None:
        quotient = _true_divide(self, other)
    elif rounding_mode == "floor":
        quotient = self // other
    elif rounding_mode == "trunc":
        quotient = _true_divide(self, other).trunc()
    else:
        raise ValueError(f"div_: rounding_mode must be None, 'trunc' or 'floor', not "
                         f"{rounding_mode!r}")
    return write(self, quotient, "div_")


def pow_(self: Tensor, exponent) -> Tensor:
    return write(self, self ** exponent, "pow_")


def zero_(self: Tensor) -> Tensor:
    """Fill with zeros (``p.grad.zero_()``)."""
    return write(self, 0, "zero_")


def fill_(self: Tensor, value) -> Tensor:
    """Fill with ``value`` (a number or a one-element tensor)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(f"fill_: only a one-element tensor fills a tensor, not shape "
                             f"{value.shape}")
        value = value.reshape(())
    return write(self, value, "fill_")


def copy_(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    """Write ``src`` (broadcast to this shape, cast to this dtype, moved from another device)
    into this tensor, outside autograd as for a leaf, through autograd for a computed
    tensor (as PyTorch's ``copy_``)."""
    if isinstance(src, Tensor) and src.device != self.device:
        src = src.to(self.device)
    if isinstance(src, Tensor) and src.dtype != self.dtype:
        # unlike the other in-place ops, PyTorch's copy_ casts any dtype to any other (a
        # float into an integer tensor truncates): an EMA of a model's int64 counters
        src = src.astype(self.dtype)
    return write(self, src, "copy_")


def detach_(self: Tensor) -> Tensor:
    """Make this tensor a leaf holding its value, with no autograd history (tensors already
    computed from it keep theirs)."""
    from .jit import current_trace

    if current_trace() is not None:
        raise InPlaceError("detach_: not supported inside gingham.jit; use detach()")
    if self._view_of is not None:
        raise InPlaceError("detach_: can't detach views in-place (it shares its base's value); "
                           "use detach()")
    self.realize()
    snapshot_value(self)
    self._parents, self._build, self._parent_versions = (), None, ()
    self._moved_from, self.requires_grad = None, False
    self._version += 1
    return self


def fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Write ``fill_value`` on the main diagonal (``i == j == ...``) of a tensor of at least
    2 dims, all of one size beyond 2 dims, as PyTorch's; ``wrap`` (restart the diagonal
    every ``cols + 1`` rows of a tall matrix) as well."""
    from .tensor import arange

    if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
        raise ShapeError(f"fill_diagonal_: needs at least 2 dims, all of equal length beyond "
                         f"2, not shape {self.shape}")
    positions = [arange(n, device=self.device).reshape(
        (1,) * a + (n,) + (1,) * (self.ndim - a - 1)) for a, n in enumerate(self.shape)]
    rows = positions[0]
    if wrap and self.ndim == 2 and self.shape[0] > self.shape[1]:
        rows = rows % (self.shape[1] + 1)  # row cols is the gap PyTorch leaves between blocks
    on = rows == positions[1]
    for other in positions[2:]:
        on = on & (positions[1] == other)
    return write(self, where(on, fill_value, self), "fill_diagonal_")


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Draw from U(a, b) (``gingham.nn.init.uniform_``)."""
    from ..nn import init

    return _init(self, "uniform_", lambda t: init.uniform_(t, a, b, generator=generator))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Draw from N(mean, std^2) (``gingham.nn.init.normal_``)."""
    from ..nn import init

    return _init(self, "normal_", lambda t: init.normal_(t, mean, std, generator=generator))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Each element 1 with probability ``p`` (a float, or a tensor broadcast to this shape),
    else 0, drawn by the device's generator (so inside a compiled step too), as PyTorch's;
    stochastic depth's mask:

        noise = gingham.empty(n, 1, 1, 1).bernoulli_(0.8).div_(0.8)
    """
    from .sampling import bernoulli
    from .tensor import zeros

    if isinstance(p, Tensor) and not dt.is_float(p.dtype):
        raise DTypeError(f"bernoulli_: p must be floating-point, not {dt.dtype_name(p.dtype)}")
    probability = zeros(self.shape, dt.FLOAT32, self.device) + p  # broadcast, checked
    drawn = bernoulli(probability, generator=generator)
    return write(self, drawn.astype(self.dtype), "bernoulli_")  # any dtype, as PyTorch's


def _init(self: Tensor, op: str, draw: Callable[[Tensor], Tensor]) -> Tensor:
    """An initialiser's draw into ``self``: a leaf (or a leaf's alias) takes it directly, a
    computed tensor through :func:`write`."""
    target = self._alias_of if self._alias_of is not None else self
    if target.is_leaf and target._buffer is self._buffer:
        draw(target)
        if target is not self:
            self._buffer, self._version = target._buffer, self._version + 1
        return self
    from .tensor import zeros

    drawn = zeros(self.shape, self.dtype, self.device)
    draw(drawn)
    return write(self, drawn, op)


# The in-place twins of these methods: the method's result written into the tensor.
TWINS = (
    "abs", "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "atan2", "arctan2",
    "sigmoid", "relu", "floor", "ceil", "round", "trunc", "fix", "frac", "sign", "reciprocal",
    "square", "clamp", "clip", "clamp_min", "clamp_max", "masked_fill", "lerp", "addcmul",
    "addcdiv", "hypot", "fmod", "remainder", "copysign", "nan_to_num", "logit", "erf", "erfc",
    "erfinv", "xlogy", "tril", "triu", "t", "transpose", "squeeze", "unsqueeze", "index_add",
    "index_fill", "index_copy", "scatter", "scatter_add", "scatter_reduce", "masked_scatter",
    "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_not", "bitwise_and",
    "bitwise_or", "bitwise_xor", "gcd", "lcm", "nextafter", "deg2rad", "rad2deg",
    "float_power", "sinc", "heaviside", "digamma", "lgamma", "eq", "ne", "lt", "le", "gt", "ge",
    "greater", "less", "greater_equal", "less_equal", "not_equal", "hardtanh", "leaky_relu",
    "elu", "selu", "celu", "silu", "mish", "gelu", "softplus", "hardsigmoid", "hardswish",
    "absolute", "negative", "sgn", "addbmm", "addmm", "addmv", "addr", "baddbmm",
    "bitwise_left_shift", "bitwise_right_shift", "cumprod", "cumsum", "floor_divide",
    "index_put", "ldexp", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma",
    "igammac", "index_reduce", "put", "renorm",
)

# Shape-changing methods whose in-place twins PyTorch has (``t_``, ``squeeze_``, ...): a write
# keeps its tensor's shape, so gingham leaves them out rather than give them another meaning.
_SHAPE_CHANGING = frozenset({"t", "transpose", "squeeze", "unsqueeze"})

_OPERATORS = {
    "__iadd__": lambda a, b: a + b, "__isub__": lambda a, b: a - b,
    "__imul__": lambda a, b: a * b, "__itruediv__": _true_divide,
    "__ifloordiv__": lambda a, b: a // b, "__imod__": lambda a, b: a % b,
    "__ipow__": lambda a, b: a ** b, "__iand__": lambda a, b: a & b,
    "__ior__": lambda a, b: a | b, "__ixor__": lambda a, b: a ^ b,
    "__ilshift__": lambda a, b: a << b, "__irshift__": lambda a, b: a >> b,
}


def install() -> None:
    """Give :class:`Tensor` its in-place methods and operators."""
    for name in TWINS:
        if name not in _SHAPE_CHANGING and hasattr(Tensor, name) and not hasattr(
                Tensor, f"{name}_"):
            setattr(Tensor, f"{name}_", _twin(name))
    for function in (add_, sub_, mul_, div_, pow_, zero_, fill_, copy_, uniform_, normal_,
                     bernoulli_, detach_, fill_diagonal_):
        setattr(Tensor, function.__name__, function)
    Tensor.divide_ = Tensor.true_divide_ = div_
    Tensor.multiply_ = mul_
    Tensor.subtract_ = sub_
    for name, compute in _OPERATORS.items():
        setattr(Tensor, name, _operator(name, compute))
    Tensor.__setitem__ = setitem
