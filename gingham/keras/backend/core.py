"""Keras' core backend contract on gingham tensors: variables, conversion, devices.

A Keras ``Variable`` holds a gingham leaf tensor (``requires_grad`` when trainable) on the
device current when it was created (:func:`current_device`). Its identity never changes:
``assign`` gives the leaf a new value (:meth:`gingham.Tensor.assign`), so a compiled step
that captured it reads the new value on its next replay.

Inside a compiled step (:func:`update_scope`, which the trainer opens), assignments are held
back: the variable reads as its newest value for the rest of the step (Adam reads the moment
it has just updated), and each variable is assigned once when the step ends, which is what
:func:`gingham.jit` records as the program's outputs.

    with keras.device("opencl:0"):
        v = keras.Variable(np.ones((2, 3), "float32"))
    v.assign(v * 2.0)
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
from typing import Callable

import numpy as np

from keras.src import tree
from keras.src.backend.common import KerasVariable
from keras.src.backend.common import standardize_dtype
from keras.src.backend.common.dtypes import result_type
from keras.src.backend.common.keras_tensor import KerasTensor
from keras.src.backend.common.stateless_scope import StatelessScope
from keras.src.backend.common.symbolic_scope import SymbolicScope, in_symbolic_scope

from ...autograd import Function
from ...devices import default_device_id, get_device
from ...frontend.jit import current_trace
from ...frontend.tensor import Tensor, assign_all, stack, tensor, where
from ...frontend.tensor import concat as gt_concat
from ...tile import builder
from ...tile import dtypes as dt
from ._unsupported import unsupported_module_getattr

SUPPORTS_SPARSE_TENSORS = False
SUPPORTS_RAGGED_TENSORS = False
SUPPORTS_COMPLEX_DTYPES = False
IS_THREAD_SAFE = True


# -- devices ---------------------------------------------------------------------------------------


class _DeviceState(threading.local):
    def __init__(self) -> None:
        self.stack: list[str] = []


_devices = _DeviceState()
_chosen_device: str | None = None  # set_device()
_default: tuple[str | None, str] | None = None  # (GINGHAM_DEVICE it was read with, id)


def set_device(device_id: str | None) -> None:
    """Make ``device_id`` the device of new Keras tensors and variables (None: gingham's
    default device again, ``GINGHAM_DEVICE`` or the config file).

        gingham.keras.set_device("opencl:0")
    """
    global _chosen_device
    _chosen_device = None if device_id is None else _canonical(device_id)


def current_device() -> str:
    """The device new tensors go to: the innermost ``keras.device(...)`` block, else
    :func:`set_device`'s, else gingham's default device."""
    global _default
    if _devices.stack:
        return _devices.stack[-1]
    if _chosen_device is not None:
        return _chosen_device
    # gingham's default reads the config file: read once per GINGHAM_DEVICE value, since
    # every conversion asks.
    environment = os.environ.get("GINGHAM_DEVICE")
    if _default is None or _default[0] != environment:
        _default = (environment, default_device_id())
    return _default[1]


def _canonical(device_name: str) -> str:
    """A gingham device id from a gingham id or Keras' ``"cpu:0"`` / ``"gpu:N"``."""
    name = str(device_name).lower()
    if name == "cpu:0":
        name = "cpu"
    elif name.startswith("gpu"):
        name = "cuda" + name[3:]
    return get_device(name).id


@contextlib.contextmanager
def device_scope(device_name):
    """``keras.device(name)``: tensors and variables made inside live on that device."""
    _devices.stack.append(_canonical(device_name))
    try:
        yield
    finally:
        _devices.stack.pop()


# -- dtypes and conversion --------------------------------------------------------------------------


def to_numpy_dtype(dtype) -> np.dtype:
    """The NumPy dtype (ml_dtypes' for bfloat16) of a Keras dtype name."""
    return dt.as_tile_dtype(standardize_dtype(dtype))


def keras_dtype(x) -> str:
    return standardize_dtype(x.dtype)


def convert_to_tensor(x, dtype=None, sparse=None, ragged=None) -> Tensor:
    """``x`` (a tensor, variable, array, number or nested list) as a gingham tensor of
    ``dtype`` (default: Keras' type inference, float32 for Python floats) on the current
    device; a tensor already of that dtype is returned as it is."""
    if sparse:
        raise ValueError("sparse=True is not supported by gingham's Keras backend")
    if ragged:
        raise ValueError("ragged=True is not supported by gingham's Keras backend")
    if dtype is not None:
        dtype = standardize_dtype(dtype)
    if isinstance(x, Variable):
        x = x.value
    if isinstance(x, Tensor):
        if dtype is None or keras_dtype(x) == dtype:
            return x
        return x.astype(to_numpy_dtype(dtype))
    if isinstance(x, (list, tuple)) and any(isinstance(item, (Tensor, Variable))
                                           for item in tree.flatten(x)):
        return stack([convert_to_tensor(item, dtype) for item in x])
    if dtype is None:
        dtype = result_type(*[getattr(item, "dtype", type(item)) for item in tree.flatten(x)])
    array = np.asarray(x)
    if array.dtype == object:  # None (NumPy would make it NaN), strings, ragged lists
        hint = (" (a missing value: y in fit(x) for a model compiled with a loss?)"
                if x is None else "")
        raise ValueError(f"convert_to_tensor: cannot make a tensor of {type(x).__name__}"
                         f"{hint}")
    return tensor(array.astype(to_numpy_dtype(dtype), copy=False), device=current_device())


def convert_to_numpy(x) -> np.ndarray:
    if isinstance(x, Variable):
        x = x.value
    if isinstance(x, Tensor):
        return x.numpy()
    return np.asarray(x)


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def shape(x) -> tuple:
    return tuple(x.shape)


def cast(x, dtype) -> Tensor:
    return convert_to_tensor(x, dtype=dtype)


def random_seed_dtype() -> str:
    return "uint32"  # a Philox state, what gingham's dropout takes


def stop_gradient(variable) -> Tensor:
    x = convert_to_tensor(variable)
    return x._elementwise(builder.stop_gradient, [], "stop_gradient")


def cond(pred, true_fn: Callable, false_fn: Callable):
    """``true_fn()`` if ``pred`` else ``false_fn()``. Inside a compiled step a tensor ``pred``
    is not known when the step is traced, so both branches are traced and their results and
    variable updates are selected by ``pred`` on the device (how Keras' loss scaling and
    gradient accumulation skip or apply an update)."""
    if not isinstance(pred, (Tensor, Variable)):
        return true_fn() if pred else false_fn()
    if current_trace() is None:
        if in_symbolic_scope():
            # compute_output_spec: ``pred`` may depend on placeholders, which have no
            # values; the result's spec is either branch's, selected as in a step.
            return tree.map_structure(
                lambda a, b: None if a is None else _select(pred, a, b), true_fn(),
                false_fn())
        return true_fn() if bool(convert_to_numpy(pred)) else false_fn()
    if not _updates.stack:
        raise NotImplementedError(
            "cond on a tensor inside gingham.jit is supported by gingham's Keras backend only "
            "in the trainer's compiled steps (which hold back variables' updates)")
    pred = convert_to_tensor(pred, "bool")
    pending = _updates.stack[-1]
    before = {key: variable._value for key, (variable, _) in pending.items()}
    true_result = true_fn()
    after_true = {key: variable._value for key, (variable, _) in pending.items()}
    for key, (variable, leaf) in pending.items():
        variable._value = before.get(key, leaf)  # the false branch starts from the same state
    false_result = false_fn()
    for key, (variable, leaf) in pending.items():
        chosen = after_true.get(key, before.get(key, leaf))
        if chosen is not variable._value:
            variable._value = _select(pred, chosen, variable._value)
    return tree.map_structure(lambda a, b: None if a is None else _select(pred, a, b),
                              true_result, false_result)


def _select(pred: Tensor, a, b) -> Tensor:
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    return where(pred, a, b.astype(a.dtype) if b.dtype != a.dtype else b)


def unstack(x, num=None, axis=0) -> list:
    x = convert_to_tensor(x)
    return list(x.unbind(axis))


def scatter(indices, values, shape) -> Tensor:
    """A zero tensor of ``shape`` with ``values`` added at ``indices`` (``[..., D]``, each
    row a position in the first ``D`` axes; repeated positions add up, positions outside
    the shape are dropped): Tile's scatter over the flattened leading axes,
    differentiable in ``values``."""
    indices = convert_to_tensor(indices)
    values = convert_to_tensor(values)
    shape = tuple(int(s) for s in shape)
    depth = indices.shape[-1]
    count = int(np.prod(indices.shape[:-1]))
    strides = np.cumprod((shape[1:depth] + (1,))[::-1])[::-1].astype(np.int64)
    indices = indices.astype(np.int64)
    positions = (indices * tensor(strides, device=indices.device)).sum(dim=-1).reshape(count)
    # a row with any coordinate outside the shape is dropped (as Tile's scatter drops a
    # position outside it), not wrapped onto another row by the flattening
    limits = tensor(np.asarray(shape[:depth], np.int64), device=indices.device)
    outside = ((indices < 0) | (indices >= limits)).astype(np.int32).amax(-1).reshape(count)
    positions = where(outside > 0, -1, positions)
    rows = (int(np.prod(shape[:depth])),) + shape[depth:]
    updates = values.reshape((count,) + shape[depth:])
    zeros = tensor(np.zeros(rows, values.dtype), device=values.device)
    scattered = values._derive(rows, values.dtype, [zeros, positions, updates],
                               lambda nodes: builder.scatter(*nodes))
    return scattered.reshape(shape)


def slice_update(inputs, start_indices, updates) -> Tensor:
    """``inputs`` with the block at ``start_indices`` replaced by ``updates``: one Tile
    assignment of ``updates`` at shifted indices whose default is ``inputs``. The starts
    must be known when the step is traced (numbers, or tensors outside a step)."""
    x = convert_to_tensor(inputs)
    updates = convert_to_tensor(updates, keras_dtype(x))
    if any(isinstance(s, (Tensor, Variable)) for s in tree.flatten(start_indices)):
        if current_trace() is not None:
            raise NotImplementedError("slice_update with tensor start indices inside a "
                                      "compiled step is not implemented by gingham's Keras "
                                      "backend yet (numbers only)")
    starts = [int(s) for s in np.asarray(convert_to_numpy(start_indices)).reshape(-1)]
    if len(starts) != x.ndim or updates.ndim != x.ndim or any(
            s < 0 or s + u > n for s, u, n in zip(starts, updates.shape, x.shape)):
        raise ValueError(f"slice_update: updates of shape {updates.shape} at {starts} do not "
                         f"fit inside inputs of shape {x.shape}")
    idx = builder.indices(" ".join(f"i{a}" for a in range(x.ndim)))
    return x._derive(x.shape, x.dtype, [x, updates], lambda nodes: builder.assign(
        nodes[1][tuple(idx)], out=[i + s for i, s in zip(idx, starts)], shape=list(x.shape),
        default=nodes[0]))


def fori_loop(lower, upper, body_fun, init_val):
    val = init_val
    for i in range(int(lower), int(upper)):
        val = body_fun(i, val)
    return val


# -- control flow ----------------------------------------------------------------------------------
# gingham.jit traces Python: a loop whose trip count is known while tracing unrolls into the
# step's program (its size grows with the count), and a condition computed on the device is
# either selected on the device (cond, switch, while_loop with maximum_iterations) or refused.


def _static_ints(values, op: str) -> list[int]:
    """``values`` (numbers, or tensors outside a compiled step) as Python ints."""
    if any(isinstance(v, (Tensor, Variable)) for v in tree.flatten(values)):
        if current_trace() is not None:
            raise NotImplementedError(f"{op} with tensor start indices inside a compiled step "
                                      "is not implemented by gingham's Keras backend (numbers "
                                      "only: the slice's place must be known when the step "
                                      "is traced)")
    return [int(v) for v in np.asarray(convert_to_numpy(values)).reshape(-1)]


def slice(inputs, start_indices, shape) -> Tensor:  # noqa: A001 (Keras' name)
    """The block of ``inputs`` of ``shape`` starting at ``start_indices`` (numbers, or
    tensors outside a compiled step), as ``keras.ops.slice``.

        keras.ops.slice(x, (1, 0), (2, 3))  # x[1:3, 0:3]
    """
    x = convert_to_tensor(inputs)
    starts = _static_ints(start_indices, "slice")
    sizes = [int(s) for s in shape]
    if len(starts) != len(sizes) or len(starts) != x.ndim:
        raise ValueError(f"slice: start_indices {starts} and shape {sizes} must each have "
                         f"one entry per axis of inputs of shape {x.shape}")
    if any(s < 0 or n < 0 or s + n > d for s, n, d in zip(starts, sizes, x.shape)):
        raise ValueError(f"slice: a block of shape {sizes} at {starts} does not fit inside "
                         f"inputs of shape {x.shape}")
    return x[tuple(builtins.slice(s, s + n) for s, n in zip(starts, sizes))]


def switch(index, branches, *operands):
    """``branches[index](*operands)``, ``index`` clipped to the branches, as
    ``keras.ops.switch``. A tensor ``index`` inside a compiled step is a chain of
    :func:`cond`: every branch is traced and the result selected on the device."""
    if not branches:
        raise ValueError("switch: `branches` must hold at least one callable")
    last = len(branches) - 1
    if not isinstance(index, (Tensor, Variable)) or current_trace() is None:
        chosen = int(np.asarray(convert_to_numpy(index)).reshape(()))
        return branches[builtins.min(builtins.max(chosen, 0), last)](*operands)
    index = convert_to_tensor(index, "int32")

    def from_branch(k: int):
        if k == last:
            return branches[k](*operands)
        return cond(index <= k, lambda: branches[k](*operands), lambda: from_branch(k + 1))

    return from_branch(0)


def while_loop(cond, body, loop_vars, maximum_iterations=None):
    """``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)``, at most
    ``maximum_iterations`` times, as ``keras.ops.while_loop``. Eagerly the condition is read
    each iteration. Inside a compiled step a condition computed on the device cannot steer
    the trace: with ``maximum_iterations`` the loop unrolls that many times and each
    iteration's update is kept only where the condition still held (selected on the
    device); without it, a clear error. Loop variables given as Python numbers stay numbers
    until the loop ends (a counter then keeps the trip count known while tracing).

        keras.ops.while_loop(lambda i: i < 10, lambda i: (i + 1,), (0,))  # (10,)
    """
    is_tuple = isinstance(loop_vars, (tuple, list))
    state = tuple(loop_vars) if is_tuple else (loop_vars,)
    limit = None if maximum_iterations is None else int(maximum_iterations)

    def step(values):
        result = body(*values)
        return tuple(result) if isinstance(result, (tuple, list)) else (result,)

    iteration = 0
    while limit is None or iteration < limit:
        going = cond(*state)
        if isinstance(going, (Tensor, Variable)) and current_trace() is not None:
            if limit is None:
                raise NotImplementedError(
                    "while_loop with a condition computed on the device inside a compiled "
                    "step is not supported by gingham's Keras backend without "
                    "`maximum_iterations` (the trace cannot read the condition; with it, the "
                    "loop unrolls that many times)")
            going = convert_to_tensor(going, "bool")
            updated = step(state)
            state = tree.map_structure(lambda new, old: _select(going, new, old),
                                       updated, state)
        elif isinstance(going, (Tensor, Variable)):
            if not bool(convert_to_numpy(going)):
                break
            state = step(state)
        elif not going:
            break
        else:
            state = step(state)
        iteration += 1
    state = tree.map_structure(convert_to_tensor, state)
    return state if is_tuple else state[0]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """``(carry, ys)`` of ``carry, y = f(carry, x)`` over the leading axis of ``xs`` (or
    ``length`` times with ``x`` None), as ``keras.ops.scan`` (JAX's ``lax.scan``): the
    ``ys`` stacked along a new leading axis, in the order of ``xs`` also when ``reverse``.
    The loop unrolls into the traced program (``unroll`` changes nothing).

        last, sums = keras.ops.scan(lambda c, x: (c + x, c + x), 0.0, keras.ops.ones(4))
    """
    if not callable(f):
        raise TypeError(f"`f` should be a callable. Received: f={f}")
    if not isinstance(unroll, bool) and (not isinstance(unroll, int) or unroll < 1):
        raise ValueError(f"`unroll` must be an positive integer or boolean. Received: "
                         f"unroll={unroll}")
    if xs is None and length is None:
        raise ValueError("Got no `xs` to scan over and `length` not provided.")
    xs_flat = [] if xs is None else [convert_to_tensor(x) for x in tree.flatten(xs)]
    steps = int(length) if length is not None else xs_flat[0].shape[0]
    if any(x.shape[0] != steps for x in xs_flat):
        raise ValueError(f"scan: every xs must have {steps} entries along its leading axis, "
                         f"got shapes {[x.shape for x in xs_flat]}")
    slices = [x.unbind(0) for x in xs_flat]
    carry = tree.map_structure(convert_to_tensor, init)
    ys = []
    for i in (range(steps - 1, -1, -1) if reverse else range(steps)):
        x = None if xs is None else (
            tree.pack_sequence_as(xs, [s[i] for s in slices]) if tree.is_nested(xs)
            else slices[0][i])
        carry, y = f(carry, x)
        if y is None:  # as Keras' other backends: zeros shaped like the carry
            y = tree.map_structure(lambda c: convert_to_tensor(c) * 0, carry)
        ys.append(tree.map_structure(convert_to_tensor, y))
    if reverse:
        ys.reverse()
    if not ys:
        raise ValueError("scan: there are no steps to scan over (length 0)")
    return carry, tree.map_structure(lambda *parts: stack(list(parts)), *ys)


def map(f, xs):  # noqa: A001 (Keras' name)
    """``f`` applied to each entry along the leading axis of ``xs``, the results stacked, as
    ``keras.ops.map`` (one :func:`scan` with no carry)."""
    return scan(lambda _, x: ((), f(x)), (), xs)[1]


def associative_scan(f, elems, reverse=False, axis=0):
    """The running combination ``f(f(e0, e1), e2) ...`` along ``axis`` for an associative
    ``f``, as ``keras.ops.associative_scan``: Hillis and Steele's scan, which applies ``f``
    ``ceil(log2 n)`` times to whole tensors (the prefixes ``d`` apart combined, ``d`` doubling),
    so the traced program stays small for long axes.

        keras.ops.associative_scan(lambda a, b: a + b, x, axis=1)  # cumsum along axis 1
    """
    if not callable(f):
        raise TypeError(f"`f` should be a callable. Received: f={f}")
    flat = [convert_to_tensor(e) for e in tree.flatten(elems)]
    size = flat[0].shape[axis]
    if any(e.shape[axis] != size for e in flat):
        raise ValueError(f"associative_scan: every element must have the same size along "
                         f"axis {axis}, got shapes {[e.shape for e in flat]}")
    if reverse:
        flat = [e.flip(axis) for e in flat]
    distance = 1
    while distance < size:
        earlier = [e.narrow(axis, 0, size - distance) for e in flat]
        later = [e.narrow(axis, distance, size - distance) for e in flat]
        combined = tree.flatten(f(tree.pack_sequence_as(elems, earlier),
                                  tree.pack_sequence_as(elems, later)))
        flat = [gt_concat([e.narrow(axis, 0, distance), convert_to_tensor(c)], axis)
                for e, c in zip(flat, combined)]
        distance *= 2
    if reverse:
        flat = [e.flip(axis) for e in flat]
    return tree.pack_sequence_as(elems, flat)


def compute_output_spec(fn, *args, **kwargs):
    """Shapes and dtypes of ``fn``'s outputs, from running it on tensors that are never
    computed (gingham's tensors are lazy, so this only builds a graph). Unknown dims are
    tried as 83 and 89, as Keras' numpy backend does."""
    with StatelessScope(), SymbolicScope():
        has_none = any(isinstance(x, KerasTensor) and None in x.shape
                       for x in tree.flatten((args, kwargs)))

        def run(fill: int):
            def placeholder(x):
                if not isinstance(x, KerasTensor):
                    return x
                dims = [fill if d is None else d for d in x.shape]
                value = Tensor(dims, to_numpy_dtype(x.dtype), current_device())
                value._placeholder = True  # reading it is an error, never a wrong value
                return value

            call_args, call_kwargs = tree.map_structure(placeholder, (args, kwargs))
            return fn(*call_args, **call_kwargs)

        outputs = run(83)
        if has_none:
            others = tree.flatten(run(89))
            flat = []
            for first, second in zip(tree.flatten(outputs), others):
                if isinstance(first, Tensor):
                    dims = [a if a == b else None for a, b in zip(first.shape, second.shape)]
                    flat.append(KerasTensor(dims, keras_dtype(first)))
                else:
                    flat.append(first)
            return tree.pack_sequence_as(outputs, flat)

        def spec(x):
            return KerasTensor(x.shape, keras_dtype(x)) if isinstance(x, Tensor) else x

        return tree.map_structure(spec, outputs)


def vectorized_map(function, elements):
    if not isinstance(elements, (list, tuple)):
        return stack([function(x) for x in convert_to_tensor(elements).unbind(0)])
    batch = elements[0].shape[0]
    return stack([function([x[index] for x in elements]) for index in range(batch)])


class custom_gradient:  # noqa: N801 (Keras' name)
    """``keras.ops.custom_gradient``: ``fun(*args)`` returns ``(output, grad)`` and the
    gradient of ``output`` with respect to ``args`` is ``grad(*args, upstream=upstream)`` (one
    per argument, a tuple for several), as in Keras' PyTorch backend: a
    :class:`gingham.autograd.Function`, so inside a compiled step the forward and ``grad``
    are traced into the step's program.

        @keras.ops.custom_gradient
        def reverse_gradient(x):
            def grad(*args, upstream=None):
                return -upstream
            return keras.ops.copy(x), grad
    """

    def __init__(self, fun: Callable) -> None:
        self.fun = fun

    def __call__(self, *args, **kwargs):
        args = tuple(convert_to_tensor(a) if isinstance(a, Variable) else a for a in args)
        return _CustomGradient.apply(self.fun, kwargs, *args)


class _CustomGradient(Function):
    @staticmethod
    def forward(ctx, fun, kwargs, *args):
        result = fun(*args, **kwargs)
        if not (isinstance(result, (tuple, list)) and len(result) == 2 and callable(result[1])):
            raise ValueError("custom_gradient: the decorated function must return a pair "
                             "(output, grad), grad a function of the arguments and `upstream`")
        output, ctx.grad_fn = result
        ctx.arguments = args
        return output

    @staticmethod
    def backward(ctx, *upstream):
        grads = ctx.grad_fn(*ctx.arguments,
                            upstream=upstream[0] if len(upstream) == 1 else upstream)
        grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
        return (None, None) + tuple(None if g is None else convert_to_tensor(g) for g in grads)


def remat(f):
    return f  # rematerialisation is an optimisation: without it the step is the same


# -- variables ---------------------------------------------------------------------------------------


class _Updates(threading.local):
    def __init__(self) -> None:
        self.stack: list[dict[int, tuple[Variable, Tensor]]] = []


_updates = _Updates()


@contextlib.contextmanager
def update_scope():
    """Hold back variables' assignments until the block ends, then assign each variable
    its last value once (see the module docstring); on an error, drop them."""
    pending: dict[int, tuple[Variable, Tensor]] = {}
    _updates.stack.append(pending)
    try:
        yield
    except BaseException:
        for variable, leaf in pending.values():
            variable._value = leaf
        raise
    finally:
        _updates.stack.pop()
    pairs = []
    for variable, leaf in pending.values():
        value = variable._value
        variable._value = leaf
        pairs.append((leaf, value.clone() if value.is_leaf else value))
    if pairs:
        assign_all(pairs)


def leaf_of(variable: "Variable") -> Tensor:
    """The leaf tensor a variable holds (inside :func:`update_scope`, also after it was
    assigned there): the tensor gradients are taken for."""
    for pending in reversed(_updates.stack):
        if id(variable) in pending:
            return pending[id(variable)][1]
    return variable._value


class Variable(KerasVariable):
    """A Keras variable holding a gingham leaf tensor (see the module docstring)."""

    def _initialize(self, value) -> None:
        value = convert_to_tensor(value, dtype=self._dtype).realize()
        self._value = Tensor(value.shape, value.dtype, value.device, buffer=value._buffer,
                             requires_grad=self._trainable)

    def _direct_assign(self, value) -> None:
        value = convert_to_tensor(value, dtype=self._dtype)
        if _updates.stack:
            pending = _updates.stack[-1]
            if id(self) not in pending:
                pending[id(self)] = (self, self._value)
            self._value = value
            return
        if value.device != self._value.device:
            value = value.to(self._value.device)
        self._value.assign(value.clone() if value.is_leaf and current_trace() else value)

    def _convert_to_tensor(self, value, dtype=None) -> Tensor:
        return convert_to_tensor(value, dtype=dtype)

    @property
    def value(self) -> Tensor:
        """The variable's value. Outside a compiled step it is a snapshot (a tensor holding
        the current value, no leaf): Keras' eager code computes from a variable and then
        assigns it (``SeedGenerator.next``), and a lazy tensor computed from the leaf itself
        could not be computed after the leaf changed. Inside a step (the trainer) it is the
        leaf, whose gradients ``loss.backward()`` fills."""
        value = KerasVariable.value.fget(self)
        if (value is self._value and isinstance(value, Tensor) and value._buffer is not None
                and not _updates.stack and current_trace() is None):
            return Tensor(value.shape, value.dtype, value.device, buffer=value._buffer)
        return value

    @property
    def trainable(self) -> bool:
        return self._trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._trainable = bool(value)
        if isinstance(self._value, Tensor) and self._value.is_leaf:
            self._value.requires_grad = self._trainable

    def __array__(self, dtype=None, copy=None):
        value = convert_to_numpy(self._value)
        return value if dtype is None else value.astype(dtype, copy=False)


# --- indexing ops ---


def scatter_update(inputs, indices, updates, reduction=None):
    """``inputs`` with the entries (or slices) at ``indices`` (``[N, D]``, each row a position
    in the first ``D`` axes) replaced by ``updates`` (``[N, ...]``), or with them added
    (``reduction="add"``). Of repeated positions the last row wins; a position outside
    ``inputs`` is dropped. :func:`gingham.scatter` over the flattened leading axes,
    differentiable in ``inputs`` and ``updates``."""
    from ...frontend import indexing

    if reduction not in (None, "add"):
        raise NotImplementedError(f"core.scatter_update with reduction={reduction!r} is not "
                                  "implemented by gingham's Keras backend yet (None and 'add')")
    inputs = convert_to_tensor(inputs)
    indices = convert_to_tensor(indices).astype(np.int64)
    updates = convert_to_tensor(updates, keras_dtype(inputs))
    depth = indices.shape[-1]
    count = int(np.prod(indices.shape[:-1]))
    shape = inputs.shape
    strides = np.cumprod((shape[1:depth] + (1,))[::-1])[::-1].astype(np.int64)
    positions = (indices * tensor(strides, device=indices.device)).sum(dim=-1).reshape(count)
    limits = tensor(np.asarray(shape[:depth], np.int64), device=indices.device)
    outside = ((indices < 0) | (indices >= limits)).astype(np.int32).amax(-1).reshape(count)
    positions = where(outside > 0, -1, positions)
    inner = int(np.prod(shape[depth:]))
    table = inputs.reshape(int(np.prod(shape[:depth])), inner)
    rows = updates.reshape(count, inner)
    index = positions.reshape(count, 1).expand(count, inner)
    write = indexing.scatter_add if reduction == "add" else indexing.scatter
    return write(table, 0, index, rows).reshape(shape)


__getattr__ = unsupported_module_getattr(__name__, "core")
