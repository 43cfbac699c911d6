"""Running the graph of lazy tensors: realising values, gradients, assigning and moving leaves.

A lazy :class:`~gingham.frontend.tensor.Tensor` is a node whose ``_build`` makes its Tile node
from its parents'. :func:`realize` collects the graph between the computed tensors and the
wanted ones into one Tile program, compiles it (equal programs share one function) and runs it
on the device; :func:`_gradients` takes the Tile autodiff of such a program as lazy tensors, so
a backward pass joins the graph. :func:`assign_all` and :func:`move_all` give leaves (parameters,
optimiser state) new values or a new device and dtype, in place, computing what depends on
the old values first.

    realize([loss, accuracy])           # one compiled program for both
    assign_all([(w, w - lr * w.grad)])  # an optimiser step
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from .. import tile
from ..errors import DeviceError, GinghamError
from ..lru import LRU
from ..tile import builder
from ..tile import dtypes as dt
from .dims import ShapeError
from .tensor import Tensor, is_grad_enabled, tensor, zeros

# Program -> tile.Function, so identical graphs compile once (the most recently used kept).
_functions: LRU = LRU(512)


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
        if is_autograd_input(t):
            inputs.append(t)
        else:
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


def _gradients(output: Tensor, wrt: list[Tensor], cotangent: Tensor,
               stop: Callable[[Tensor], bool] = is_autograd_input,
               create_graph: bool = False) -> list[Tensor]:
    """d(output)/d(wrt) · cotangent as lazy tensors, from the Tile autodiff of the graph
    between ``output`` and the tensors where ``stop`` holds (``wrt`` among them). With
    ``create_graph`` the gradients require gradients themselves (when grad mode is on and what
    they are computed from does): the gradient program is a graph of Tile operations like any
    other, so Tile's autodiff differentiates it again."""
    inputs, fn, bound = _bound_graph([output], stop)
    position = {id(t): n for n, t in enumerate(inputs)}  # by identity: == is elementwise
    wanted = frozenset(f"L{position[id(t)]}" for t in wrt if id(t) in position)
    grad = fn.gradient_for(bound, wanted)
    gradient_bound = grad.function.bind_shapes(
        [t.shape for t in inputs] + [output.shape], [t.dtype for t in inputs] + [output.dtype])
    if cotangent.dtype != output.dtype:
        cotangent = cotangent.astype(output.dtype)
    parents = list(inputs) + [cotangent]
    differentiable = (create_graph and is_grad_enabled()
                      and any(p.requires_grad for p in parents))
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
                       build=output_of(name), requires_grad=differentiable)
        results.append(value if value.dtype == t.dtype else value.astype(t.dtype))
    return results


def keep_readers_on_old_value(target: Tensor) -> None:
    """Point the tensors computed from ``target``'s current value at a snapshot of it, before
    ``target`` takes a new buffer: a model's output computed before ``optimizer.step()`` and
    read after it (an accuracy, a sample) keeps the value it had, as in PyTorch, where it was
    computed at once. Costs nothing for a tensor nothing lazy reads."""
    if target._children:
        from .inplace import snapshot_value  # inplace builds on this module

        snapshot_value(target)


def assign_all(pairs: Sequence[tuple[Tensor, Tensor]]) -> None:
    """Give several leaves new values computed together (one program), then swap them in.

    The tensors that ``backward()`` was called on are computed in the same program, so a loss
    read after ``optimizer.step()`` still shows the value it had before the step; any other
    lazy tensor computed from a leaf's old value (the logits of that loss, a scaled loss's
    unscaled one) is pointed at a snapshot of it and keeps that value too, as in PyTorch
    (:func:`keep_readers_on_old_value`).
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
        keep_readers_on_old_value(target)
        target._buffer = value._buffer
        target._version += 1
        target._backward_roots = []
        if target._views:  # its views follow it (an optimiser's update of a parameter)
            from .views import refresh

            refresh(target)


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
