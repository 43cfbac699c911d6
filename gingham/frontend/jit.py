"""``gingham.jit``: trace a step once per input signature, compile it whole, replay it.

    @gingham.jit
    def train_step(images, labels):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

The first call with a new signature (shapes, dtypes, devices of the tensor arguments, and the
:func:`gingham.autocast` state in force) runs the Python function on placeholder tensors.
Everything it computes — forward, the gradient program, the optimiser's updates — is one graph,
compiled into one Tile program: a fixed sequence of kernel launches on planned buffers. Later
calls only bind buffers and launch: no Python runs per operation, parameters never leave the
device, and the only copies are the arguments in (when given as NumPy arrays) and whatever the
caller reads out.

Python state the traced function captured is checked on every call: if a captured tensor was
replaced by another object, or a captured number, string or bool changed, the function is traced
again (``traces`` counts them), so a replay never uses stale values. Values meant to change
every step without retracing (a learning rate) belong in tensors: optimisers keep theirs there.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import GinghamError
from .amp import trace_key
from .tensor import Tensor, _bound_graph, tensor

_traces: list["_Trace"] = []
_SCALARS = (bool, int, float, str, type(None))


def current_trace() -> "_Trace | None":
    return _traces[-1] if _traces else None


@dataclass
class _Trace:
    assignments: list[tuple[Tensor, Tensor]] = field(default_factory=list)

    def record_assignments(self, pairs) -> None:
        assigned = {id(t) for t, _ in self.assignments}
        for target, value in pairs:
            if id(target) in assigned:
                raise GinghamError("a tensor is assigned twice in one traced step; "
                                   "gingham.jit supports one update per step")
            self.assignments.append((target, value))


@dataclass
class _Compiled:
    """One traced signature: the executable and how to bind and unbind its buffers."""

    executable: Any
    leaves: list[Tensor]  # program inputs, in order
    argument_slots: dict[int, int]  # leaf position -> position in the flattened arguments
    output_structure: Any
    n_outputs: int
    assigned: list[Tensor]  # leaves that receive the program's trailing outputs
    snapshot: list

    def replay(self, flat_args: list) -> Any:
        buffers = []
        for position, leaf in enumerate(self.leaves):
            slot = self.argument_slots.get(position)
            value = flat_args[slot] if slot is not None else leaf
            if not isinstance(value, Tensor):
                value = tensor(np.asarray(value, dtype=leaf.dtype), device=leaf.device)
            value.realize()
            buffers.append(value._buffer)
        results = self.executable.run(buffers, fresh_outputs=True)
        outputs = [
            Tensor(self.leaves_shape(i), self.output_dtype(i), self.executable.device.id,
                   buffer=results[i])
            for i in range(self.n_outputs)
        ]
        for target, buffer in zip(self.assigned, results[self.n_outputs:]):
            target._buffer = buffer
            target._version += 1
            target._backward_roots = []
            target.grad = None
        return _unflatten(self.output_structure, outputs)

    def leaves_shape(self, i: int):
        name = self.executable.bound.program.outputs[i]
        return self.executable.bound.shapes[name]

    def output_dtype(self, i: int):
        name = self.executable.bound.program.outputs[i]
        return self.executable.bound.dtypes[name]


def jit(fn: Callable | None = None):
    """Compile ``fn`` (a function of tensors) once per argument signature and replay it."""
    if fn is None:
        return jit

    cache: dict[tuple, _Compiled] = {}

    @functools.wraps(fn)
    def wrapper(*args):
        flat_args, _ = _flatten(args)
        key = _signature(flat_args)
        compiled = cache.get(key)
        if compiled is not None and compiled.snapshot != _snapshot(fn, args):
            compiled = None  # captured Python state changed: the trace would be stale
        if compiled is None:
            compiled = _trace(fn, args)
            cache[key] = compiled
            wrapper.traces += 1
        return compiled.replay(flat_args)

    wrapper.traces = 0
    return wrapper


def _trace(fn: Callable, args: tuple) -> _Compiled:
    from ..devices import get_device
    from ..runtime import executable

    flat_args, structure = _flatten(args)
    placeholders: list[Tensor | None] = []
    # NumPy arguments go to the device of the tensors the function works with.
    home = next((v.device for v in flat_args if isinstance(v, Tensor)), None)
    home = home or _captured_device(fn) or _default_device()
    for value in flat_args:
        if isinstance(value, (Tensor, np.ndarray)):
            like = value
            device = value.device if isinstance(value, Tensor) else home
            placeholder = Tensor(like.shape, like.dtype, device)
            placeholder._placeholder = True
            placeholders.append(placeholder)
        else:
            placeholders.append(None)
    traced_args = _unflatten(structure, [p if p is not None else v
                                         for p, v in zip(placeholders, flat_args)])
    trace = _Trace()
    _traces.append(trace)
    try:
        result = fn(*traced_args)
    finally:
        _traces.pop()
    flat_out, out_structure = _flatten(result)
    outputs = [o for o in flat_out]
    for o in outputs:
        if not isinstance(o, Tensor):
            raise GinghamError(f"a function traced by gingham.jit must return tensors, got "
                               f"{type(o).__name__}")
    targets = outputs + [value for _, value in trace.assignments]
    if not targets:
        raise GinghamError("the traced function computes nothing (no outputs, no updates)")
    leaves, _, bound = _bound_graph(targets, lambda t: t.is_leaf)
    device = get_device(targets[0].device)
    exe = executable(bound, device)
    slots = {}
    placeholder_position = {id(p): i for i, p in enumerate(placeholders) if p is not None}
    for position, leaf in enumerate(leaves):
        if id(leaf) in placeholder_position:
            slots[position] = placeholder_position[id(leaf)]
    # Lazy gradients made during tracing refer to placeholders: never let them escape.
    for target, _ in trace.assignments:
        target.grad = None
    for leaf in leaves:
        if not leaf._placeholder:
            leaf._backward_roots = []
    return _Compiled(exe, leaves, slots, out_structure, len(outputs),
                     [t for t, _ in trace.assignments], _snapshot(fn, args))


def _captured_device(fn: Callable) -> str | None:
    tensors: list[Tensor] = []
    _snapshot(fn, (), tensors)
    return tensors[0].device if tensors else None


def _default_device() -> str:
    from ..devices import default_device_id

    return default_device_id()


def _signature(flat_args: list) -> tuple:
    key: list = [("autocast", trace_key())]  # a step traced under autocast is another program
    for value in flat_args:
        if isinstance(value, Tensor):
            key.append(("tensor", value.shape, str(value.dtype), value.device))
        elif isinstance(value, np.ndarray):
            key.append(("array", value.shape, str(value.dtype)))
        else:
            key.append(("value", type(value).__name__, value if isinstance(value, _SCALARS)
                        else id(value)))
    return tuple(key)


def _flatten(value) -> tuple[list, Any]:
    if isinstance(value, (list, tuple)):
        flat, structure = [], []
        for item in value:
            items, sub = _flatten(item)
            flat.extend(items)
            structure.append((len(items), sub))
        return flat, (type(value), structure)
    if value is None:
        return [], None
    return [value], "leaf"


def _unflatten(structure, flat: list):
    if structure is None:
        return None
    if structure == "leaf":
        return flat[0]
    kind, parts = structure
    result, position = [], 0
    for count, sub in parts:
        result.append(_unflatten(sub, flat[position:position + count]))
        position += count
    return kind(result)


def _snapshot(fn: Callable, args: tuple, tensors: list | None = None) -> list:
    """Identities of the tensors and values of the plain Python values the function can see
    through its closure, the globals it names, and its arguments' attributes."""
    found: list = []
    seen: set[int] = set()

    def visit(path: str, value, depth: int) -> None:
        if isinstance(value, Tensor):
            found.append((path, "tensor", id(value)))
            if tensors is not None:
                tensors.append(value)
            return
        if isinstance(value, _SCALARS):
            found.append((path, "value", value))
            return
        if depth == 0 or id(value) in seen or isinstance(value, (np.ndarray, type)) \
                or inspect.isroutine(value) or inspect.ismodule(value):
            return
        seen.add(id(value))
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value[:256]):
                visit(f"{path}[{i}]", item, depth - 1)
        elif isinstance(value, dict):
            for k, item in list(value.items())[:256]:
                if isinstance(k, str) and not k.startswith("_"):
                    visit(f"{path}[{k!r}]", item, depth - 1)
        elif hasattr(value, "__dict__"):
            for k, item in vars(value).items():
                if not k.startswith("_"):
                    visit(f"{path}.{k}", item, depth - 1)

    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            visit(name, cell.cell_contents, 4)
        except ValueError:  # an empty cell
            pass
    for name in code.co_names:
        if name in fn.__globals__:
            visit(name, fn.__globals__[name], 4)
    return found


__all__ = ["jit", "current_trace"]
