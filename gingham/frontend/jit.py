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
replaced by another object, or a captured number, string or bool changed, or a tensor the step
reads was moved to another device or dtype (``model.to(...)``), the function is traced
again (``traces`` counts them), so a replay never uses stale values. Values meant to change
every step without retracing (a learning rate) belong in tensors: optimisers keep theirs there,
and a container that writes some of its values through to device tensors (an optimiser's
parameter group) names what the step still depends on with a ``_jit_watched()`` method, which
the check reads instead of the container.

Gradients are state, as in PyTorch: a step that only calls ``loss.backward()`` leaves each
captured parameter's ``.grad`` set (on the device), and a later step reads the ``.grad`` the
parameter has then, so micro-batches can accumulate in one compiled step and be applied in
another. Parameters the step updates end it without gradients.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..config import debug_print
from ..errors import DeviceError, GinghamError
from ..tune import background as tune_background
from .amp import trace_key
from .defaults import default_float
from .strides import ROW_MAJOR, Layout
from .graph import keep_readers_on_old_value
from .views import refresh, sync_stale
from .tensor import Tensor, _bound_graph, is_graph_input, moves_count


class _Tracing(threading.local):
    """Each thread's stack of traces in progress: a trace records the assignments made on
    its own thread only (the background tuner's worker builds programs beside it)."""

    def __init__(self) -> None:
        self.stack: list[_Trace] = []


_traces = _Tracing()
_SCALARS = (bool, int, float, str, type(None))


def current_trace() -> "_Trace | None":
    return _traces.stack[-1] if _traces.stack else None


@dataclass
class _Trace:
    assignments: list[tuple[Tensor, Tensor]] = field(default_factory=list)

    # Per captured leaf (a parameter), the leaf and its ``.grad`` when the step began: the
    # step's gradients are state, as in PyTorch (see :class:`_GradState`).
    grads_before: dict[int, tuple[Tensor, Tensor | None]] = field(default_factory=dict)

    # In-place updates of leaves (gingham.frontend.inplace): per leaf, the leaf and the
    # snapshot of its value when the step began, which stands for the leaf in the program.
    in_place: dict[int, tuple[Tensor, Tensor]] = field(default_factory=dict)

    # Index checks on arguments (gingham.frontend.indexing._check_range): the placeholder
    # and what refuses its least and greatest values, run at every call on the values given.
    index_checks: list[tuple[Tensor, Callable[[tuple[int, int]], None]]] = field(
        default_factory=list)

    def record_assignments(self, pairs) -> None:
        """``assign()`` inside the trace: as an in-place update, each target takes its value
        for the rest of the trace, so a later read sees it, as eagerly (two draws from one
        generator in a step advance its state twice); the last value updates the leaf."""
        for target, value in pairs:
            self.update_in_place(target, value)
            if target._views:  # its views taken in the step follow it, as eagerly
                refresh(target)

    def updates(self, target: Tensor) -> bool:
        """Whether ``target`` is a leaf this trace has updated (it holds a computed value
        until the trace ends)."""
        return id(target) in self.in_place

    def update_in_place(self, target: Tensor, value: Tensor) -> None:
        """``target`` (a leaf, or one this trace updated) takes ``value`` for the rest of the
        trace: readers of its current value are pointed at a snapshot of it, and at the end
        of the trace the leaf is restored and its last value becomes an update of the step."""
        from .inplace import snapshot_value, take_value

        before = snapshot_value(target)
        _, original = self.in_place.setdefault(id(target), (target, before))
        take_value(target, value)
        # Still a leaf to autograd, with its new value (as PyTorch's parameter after an
        # optimiser step): a GAN's generator loss, computed after the discriminator's step,
        # takes gradients at the discriminator's new weights, not through its update.
        target._detached, target.requires_grad = True, original.requires_grad

    def finish_in_place(self) -> tuple[dict[int, Tensor], dict[int, Tensor]]:
        """Restore every leaf updated in place to the leaf it was, record its last value as
        an update of the step, and return (by the id of each step-start snapshot) the leaf
        it stands for, and (by the id of each leaf) its last value."""
        from .inplace import snapshot_value, take_value

        inputs, finals = {}, {}
        for target, before in self.in_place.values():
            final = snapshot_value(target)  # what was computed from the last value reads this
            final._snapshot_of = None
            take_value(target, before)
            self.assignments.append((target, final))
            inputs[id(before)] = target
            finals[id(target)] = final
        return inputs, finals


@dataclass
class _GradState:
    """What a traced step does with the ``.grad`` of the leaves it captured and does not
    update, so that gradients carry from one step to the next as in PyTorch (gradient
    accumulation: ``loss.backward()`` in one compiled step, ``optimizer.step()`` in another):

    * ``read``: program input position -> the leaf whose gradient *at replay time* feeds it
      (the step adds to it, clips it, applies it);
    * ``written``: leaves whose gradient the step leaves set, each receiving the program's
      output at the same position of ``slots`` (one the step returns, or a trailing one);
    * ``cleared``: leaves whose gradient the step sets to None;
    * ``none``: per leaf of ``owners`` (all of the above), whether its gradient was None
      when traced; a step called with another pattern is another program (a first
      micro-batch's ``backward()`` sets the gradient, a later one adds to it).

    The leaves the step updates (parameters after ``optimizer.step()``) end it without
    gradients, as before: writing them out would cost a step a parameter-sized write each.
    """

    read: dict[int, Tensor] = field(default_factory=dict)
    written: list[Tensor] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    cleared: list[Tensor] = field(default_factory=list)
    owners: list[Tensor] = field(default_factory=list)
    none: tuple[bool, ...] = ()

    def as_traced(self) -> bool:
        """Whether every leaf's gradient is None exactly where it was when traced."""
        return tuple(owner.grad is None for owner in self.owners) == self.none


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
    refinement: Any = None  # GINGHAM_TUNE=background: the program's kernels being tuned
    grads: _GradState = field(default_factory=_GradState)
    # The outputs' layouts as traced (gingham.frontend.strides.Layout), for is_contiguous,
    # stride() and reshape, as the eager outputs'
    output_layouts: list[Layout] = field(default_factory=list)
    # Per index argument the step's ops check (a batch of labels): its position in the
    # flattened arguments and the check of its least and greatest values (_Trace).
    index_checks: list[tuple[int, Callable[[tuple[int, int]], None]]] = field(
        default_factory=list)

    def __post_init__(self) -> None:
        # The devices and dtypes the program was compiled for: Module.to moves tensors in
        # place, keeping the identities the snapshot checks, so a move must retrace too.
        self._placements = [(leaf.device, leaf.dtype) for leaf in self.leaves]
        self._moves = moves_count()
        # Everything a replay looks up, looked up once: per leaf, the argument it comes from
        # (-1: the captured tensor itself); per output, its shape and dtype.
        self._bindings = [(self.argument_slots.get(position, -1), leaf,
                           self.grads.read.get(position))
                          for position, leaf in enumerate(self.leaves)]
        bound = self.executable.bound
        names = bound.program.outputs[:self.n_outputs]
        self._output_types = [(bound.shapes[n], bound.dtypes[n]) for n in names]
        grad_names = [bound.program.outputs[slot] for slot in self.grads.slots]
        self._grad_types = [(bound.shapes[n], bound.dtypes[n]) for n in grad_names]
        self._laid_out = [(i, layout) for i, layout in enumerate(self.output_layouts)
                          if layout != ROW_MAJOR]  # almost always none: nothing per replay
        self._device = self.executable.device
        # The memory each output had one and two steps ago, and each uploaded argument last
        # step: a replay asks the buffer pool for the same memory again, so the addresses
        # repeat every two steps (parameters alternate between two buffers) and a CUDA
        # graph instantiated for them is reused. Only handles are kept: whoever still holds
        # an old buffer keeps it, and the pool then hands out other memory.
        self._recent: list[list] = [[None, None] for _ in bound.program.outputs]
        self._uploaded: dict[int, Any] = {}

    def placed_as_traced(self) -> bool:
        """Whether every input is still on the device and of the dtype it was traced with
        (looked at only after a move: one integer compared per call otherwise)."""
        moves = moves_count()
        if moves == self._moves:
            return True
        if any((leaf.device, leaf.dtype) != placed
               for leaf, placed in zip(self.leaves, self._placements)):
            return False
        self._moves = moves
        return True

    def check_indices(self, flat_args: list) -> None:
        """Refuse an index argument out of range for the ops reading it, from the values the
        host has: a NumPy batch's, or a tensor's known range (``Tensor._known_range``); one
        computed on the device goes unchecked. Nothing to do for most steps."""
        for slot, refuse_outside in self.index_checks:
            value = flat_args[slot]
            known = None
            if isinstance(value, Tensor):
                known = value._known_range()
            elif isinstance(value, np.ndarray) and value.size and value.dtype.kind in "iuf":
                least, greatest = value.min(), value.max()
                # float labels (Keras casts them to int in the step): a cast truncates, which
                # keeps the least and the greatest
                if np.isfinite(least) and np.isfinite(greatest):
                    known = (int(least), int(greatest))
            if known is not None:
                refuse_outside(known)

    def replay(self, flat_args: list) -> Any:
        buffers = []
        for slot, leaf, grad_of in self._bindings:
            value = leaf if slot < 0 else flat_args[slot]
            if grad_of is not None:  # a leaf's gradient: the one it has now
                value = grad_of.grad
            if not isinstance(value, Tensor):  # a NumPy argument: straight into a buffer
                buffers.append(self._upload(value, leaf, slot))
                continue
            if value._buffer is None:
                value.realize()
            buffers.append(value._buffer)
        recent = self._recent
        results = self.executable.run(buffers, fresh_outputs=True,
                                      prefer=[older for older, _ in recent])
        for pair, buffer in zip(recent, results):
            pair[0], pair[1] = pair[1], buffer._handle
        device_id = self._device.id
        outputs = [Tensor(shape, dtype, device_id, buffer=buffer)
                   for (shape, dtype), buffer in zip(self._output_types, results)]
        for position, layout in self._laid_out:
            outputs[position]._layout = layout
        updates = results[self.n_outputs:]
        for target, buffer in zip(self.assigned, updates):
            keep_readers_on_old_value(target)
            target._buffer = buffer
            target._version += 1
            target._backward_roots = []
            target.grad = None
            if target._views:  # views taken outside the step follow its update
                refresh(target)
        for owner, slot, (shape, dtype) in zip(self.grads.written, self.grads.slots,
                                               self._grad_types):
            # a gradient the step also returns is that same tensor, as in PyTorch
            owner.grad = (outputs[slot] if slot < self.n_outputs
                          else Tensor(shape, dtype, device_id, buffer=results[slot]))
        for owner in self.grads.cleared:
            owner.grad = None
        return _unflatten(self.output_structure, outputs)

    def _upload(self, value, leaf: Tensor, slot: int):
        """A buffer on the leaf's device holding ``value`` as the leaf's dtype."""
        array = np.ascontiguousarray(value, dtype=leaf.dtype)
        device = self._device if leaf.device == self._device.id else _get_device(leaf.device)
        buffer = device.alloc(max(array.nbytes, 1), self._uploaded.get(slot))
        self._uploaded[slot] = buffer._handle
        if array.size:
            device.copy_in(buffer, array)
        return buffer


def _get_device(device_id: str):
    from ..devices import get_device

    return get_device(device_id)


def compile(model: Callable | None = None, *, fullgraph: bool = False,  # noqa: A001
            dynamic: bool | None = None, backend: str | Callable = "gingham",
            mode: str | None = None, options: dict | None = None, disable: bool = False):
    """``torch.compile``'s spelling, for code that calls it. gingham compiles either way:

    * a module (``model = gingham.compile(model)``) is returned as it is: gingham's eager
      mode already records each forward pass lazily and compiles it as one fused program
      when a value is read, and gradients flow through it as usual;
    * a function becomes :func:`jit`'s: traced once per argument signature and replayed.
      Its outputs keep no autograd history, so a function whose gradients are wanted is the
      whole training step (forward, ``backward()``, ``optimizer.step()``), as with ``jit``.

        model = gingham.compile(model)                 # as before, compiled lazily
        train_step = gingham.compile(train_step)       # one program a step, replayed

    ``fullgraph``, ``dynamic``, ``backend``, ``mode`` and ``options`` are accepted and
    ignored (a traced step is always the whole graph, at its argument shapes); ``disable``
    returns ``model`` unchanged.
    """
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options, disable=disable)
    from ..nn.modules import Module

    if disable or isinstance(model, Module):
        return model
    return jit(model)


def jit(fn: Callable | None = None, *, device: str | None = None):
    """Compile ``fn`` (a function of tensors) once per argument signature and replay it.

    NumPy arguments are uploaded to ``device``; by default to the device of the first tensor
    argument, else of the tensors ``fn`` captures, else the default device.

        step = gingham.jit(run_graph, device="cuda:0")     # NumPy batches go to cuda:0
    """
    if fn is None:
        return functools.partial(jit, device=device)

    # Per signature, the programs traced for it, newest first: one, unless the gradients
    # the step reads are None at some calls and not at others (gradient accumulation).
    cache: dict[tuple, list[_Compiled]] = {}

    @functools.wraps(fn)
    def wrapper(*args):
        flat_args, structure = _flatten(args)
        key = (_signature(flat_args), structure)  # dicts' keys and nesting are the signature's
        traced = cache.setdefault(key, [])
        compiled = next((c for c in traced if c.grads.as_traced()), None)
        if compiled is not None and (compiled.snapshot != _snapshot(fn, args)
                                     or not compiled.placed_as_traced()):
            traced.remove(compiled)  # captured Python state changed, or tensors moved: stale
            compiled = None
        if compiled is None:
            compiled = _trace(fn, args, device)
            traced.insert(0, compiled)
            del traced[_VARIANTS:]
            wrapper.traces += 1
        compiled.check_indices(flat_args)
        result = compiled.replay(flat_args)
        if compiled.refinement is not None:  # background tuning: between two steps
            refined = compiled.refinement.after_step()
            if refined is tune_background.RETRACE:  # a layer's algorithm changed
                traced.remove(compiled)  # the next call traces again, building it so
                wrapper.refinements += 1
            elif refined is not None:
                compiled.executable = refined
                wrapper.refinements += 1
        return result

    wrapper.traces = 0
    wrapper.refinements = 0  # background tuning: executables swapped in, or traces dropped
    return wrapper


def _trace(fn: Callable, args: tuple, device: str | None = None) -> _Compiled:
    flat_args, structure = _flatten(args)
    placeholders: list[Tensor | None] = []
    # NumPy arguments go to ``device``, else to the device of the tensors the function works
    # with.
    home = device or next((v.device for v in flat_args if isinstance(v, Tensor)), None)
    home = home or _captured_device(fn) or _default_device()
    for value in flat_args:
        if isinstance(value, (Tensor, np.ndarray)):
            like = value
            device = value.device if isinstance(value, Tensor) else home
            placeholder = Tensor(like.shape, like.dtype, device)
            placeholder._placeholder = True
            if isinstance(like, Tensor):  # its layout, as given
                placeholder._layout = like._layout
            placeholders.append(placeholder)
        else:
            placeholders.append(None)
    traced_args = _unflatten(structure, [p if p is not None else v
                                         for p, v in zip(placeholders, flat_args)])
    sync_stale()  # a view the step reads is re-derived outside it, as eagerly
    trace = _Trace()
    trace.grads_before = _captured_grads(fn, args)
    _traces.stack.append(trace)
    started = time.perf_counter()
    # GINGHAM_TUNE=background: what tracing (layers' algorithms) and compiling (kernels'
    # schedules) queue for the background tuner is what this program's refinement waits for.
    background = tune_background.enabled()
    queued = tune_background.refiner().collecting() if background else contextlib.nullcontext()
    with queued as collector:
        try:
            result = fn(*traced_args)
        except BaseException:
            trace.finish_in_place()  # no leaf keeps a failed trace's value
            raise
        finally:
            _traces.stack.pop()
        return _compile_trace(result, trace, placeholders, fn, args, started, collector)


def _compile_trace(result, trace: _Trace, placeholders: list, fn: Callable, args: tuple,
                   started: float, collector) -> _Compiled:
    """The executable of a finished trace and how to bind it (``collector``: what background
    tuning queued so far, or None)."""
    from ..devices import get_device
    from ..runtime import executable

    flat_out, out_structure = _flatten(result)
    stand_ins, finals = trace.finish_in_place()
    outputs = [finals.get(id(o), o) for o in flat_out]  # an updated leaf: its new value
    for o in outputs:
        if not isinstance(o, Tensor):
            raise GinghamError(f"a function traced by gingham.jit must return tensors, got "
                               f"{type(o).__name__}")
    grads = _grad_state(trace)
    targets = _distinct(outputs + [value for _, value in trace.assignments])
    position = {id(t): i for i, t in reversed(list(enumerate(targets)))}
    for owner in grads.written:
        if id(owner.grad) not in position:  # not already an output: one more
            position[id(owner.grad)] = len(targets)
            targets.append(owner.grad)
        grads.slots.append(position[id(owner.grad)])
    if not targets:
        raise GinghamError("the traced function computes nothing (no outputs, no updates)")
    devices = sorted({t.device for t in targets})
    if len(devices) > 1:
        raise DeviceError(
            f"gingham.jit compiles a step for one device, but this one computes on "
            f"{', '.join(devices)} (its outputs and updated tensors); trace one function per "
            "device")
    leaves, _, bound = _bound_graph(targets, is_graph_input)
    # A leaf updated in place entered the program as the snapshot of its value before the
    # update: the replay reads the leaf itself (its value at that time).
    leaves = [stand_ins.get(id(leaf), leaf) for leaf in leaves]
    grad_of = {id(before): owner for owner, before in trace.grads_before.values()
               if before is not None}
    grads.read = {position: grad_of[id(leaf)] for position, leaf in enumerate(leaves)
                  if id(leaf) in grad_of}
    read_owners = {id(owner): owner for owner in grads.read.values()}
    grads.owners = list({**read_owners, **{id(o): o for o in grads.written + grads.cleared}
                         }.values())
    grads.none = tuple(trace.grads_before[id(owner)][1] is None for owner in grads.owners)
    device = get_device(targets[0].device)
    debug_print(1, f"{device.id}: traced {getattr(fn, '__name__', 'a function')} in "
                   f"{(time.perf_counter() - started) * 1e3:.0f} ms "
                   f"({len(bound.program.statements)} statements)")
    refining = collector is not None and device.info.dialect is not None
    if refining:
        from ..tune.device_model import device_model

        # Measure the device model now, on this thread: the worker must not measure it
        # while steps run.
        device_model(device)
    exe = executable(bound, device)
    refinement = (tune_background.ProgramRefinement(bound, device, collector.keys)
                  if refining else None)
    slots = {}
    placeholder_position = {id(p): i for i, p in enumerate(placeholders) if p is not None}
    for position, leaf in enumerate(leaves):
        if id(leaf) in placeholder_position:
            slots[position] = placeholder_position[id(leaf)]
    # Lazy gradients made during tracing refer to placeholders: never let them escape. The
    # gradients the step writes are as it found them: the replay that follows applies it.
    for target, _ in trace.assignments:
        target.grad = None
    for owner in grads.owners:
        owner.grad = trace.grads_before[id(owner)][1]
    for leaf in leaves:
        if not leaf._placeholder:
            leaf._backward_roots = []
    index_checks = [(placeholder_position[id(p)], check) for p, check in trace.index_checks
                    if id(p) in placeholder_position]
    return _Compiled(exe, leaves, slots, out_structure, len(outputs),
                     [t for t, _ in trace.assignments], _snapshot(fn, args), refinement, grads,
                     [o._layout for o in outputs], index_checks)


_VARIANTS = 4  # programs kept per signature (a step whose captured state keeps changing
#               would otherwise keep one per call)


def _captured_grads(fn: Callable, args: tuple) -> dict[int, tuple[Tensor, Tensor | None]]:
    """Each tensor ``fn`` captures (parameters, through modules and optimisers) with its
    gradient, computed now: the step reads it as an input bound to the leaf's ``.grad``."""
    from .graph import realize

    tensors: list[Tensor] = []
    _snapshot(fn, args, tensors)
    found = {id(t): (t, t.grad) for t in tensors}
    realize([grad for _, grad in found.values() if grad is not None])
    return found


def _grad_state(trace: _Trace) -> _GradState:
    """The captured leaves, among those a finished trace does not update, whose gradient it
    leaves set to a new value (``written``) or to None (``cleared``)."""
    updated = {id(target) for target, _ in trace.assignments}
    state = _GradState()
    for owner, before in trace.grads_before.values():
        after = owner.grad
        if id(owner) in updated or after is before:
            continue
        (state.cleared if after is None else state.written).append(owner)
    return state


def _distinct(targets: list[Tensor]) -> list[Tensor]:
    """``targets`` with each repeat of a tensor replaced by a copy: a program names each
    output once, and a step may return one tensor twice, or return a tensor it also updates
    in place (``noise = empty(n).bernoulli_(p); return noise``)."""
    seen: set[int] = set()
    distinct = []
    for target in targets:
        distinct.append(target.clone() if id(target) in seen else target)
        seen.add(id(target))
    return distinct


def _captured_device(fn: Callable) -> str | None:
    tensors: list[Tensor] = []
    _snapshot(fn, (), tensors)
    return tensors[0].device if tensors else None


def _default_device() -> str:
    from ..devices import default_device_id

    return default_device_id()


def _signature(flat_args: list) -> tuple:
    key: list = [("autocast", trace_key()),  # a step traced under autocast is another program
                 # as one traced under another default dtype (its Python floats, factories)
                 ("default dtype", str(default_float()))]
    for value in flat_args:
        if isinstance(value, Tensor):  # its layout too: the step may ask is_contiguous
            key.append(("tensor", value.shape, str(value.dtype), value.device, value._layout))
        elif isinstance(value, np.ndarray):
            key.append(("array", value.shape, str(value.dtype)))
        else:
            key.append(("value", type(value).__name__, value if isinstance(value, _SCALARS)
                        else id(value)))
    return tuple(key)


def _flatten(value) -> tuple[list, Any]:
    """The leaves of nested lists, tuples (named ones too) and dicts, and the structure that
    :func:`_unflatten` rebuilds them with; None is a structure without leaves."""
    if isinstance(value, dict):
        flat, structure = _flatten(list(value.values()))
        return flat, (dict, tuple(value), structure)
    if isinstance(value, (list, tuple)):
        flat, structure = [], []
        for item in value:
            items, sub = _flatten(item)
            flat.extend(items)
            structure.append((len(items), sub))
        return flat, (type(value), tuple(structure))
    if value is None:
        return [], None
    return [value], "leaf"


def _unflatten(structure, flat: list):
    if structure is None:
        return None
    if structure == "leaf":
        return flat[0]
    if structure[0] is dict:
        _, keys, values = structure
        return dict(zip(keys, _unflatten(values, flat)))
    kind, parts = structure
    result, position = [], 0
    for count, sub in parts:
        result.append(_unflatten(sub, flat[position:position + count]))
        position += count
    if kind is not tuple and issubclass(kind, tuple):  # a named tuple
        return kind(*result)
    return kind(result)


def _snapshot(fn: Callable, args: tuple, tensors: list | None = None) -> list:
    """Identities of the tensors and values of the plain Python values the function can see
    through its default arguments, its closure, the globals it names, and its arguments'
    attributes.

    Taken on every call, so it is kept cheap: the entries are flat tuples in depth-first
    order, ``(depth, key)`` for a container and ``(depth, key, value)`` for a leaf (a
    tensor's value is ``(_TENSOR, id)``); the depths fix the tree's shape, so two snapshots
    are equal exactly when the same paths lead to the same values.
    """
    found: list = []
    append = found.append
    seen: set[int] = set()

    def visit(key, value, depth: int) -> None:
        # Leaves are handled inline (a call per leaf would double the cost); only a
        # container that is looked into costs a recursive call.
        kind = type(value)
        if kind is Tensor or isinstance(value, Tensor):
            append((depth, key, (_TENSOR, id(value))))
            if tensors is not None:
                tensors.append(value)
        elif kind in _EXACT_SCALARS or isinstance(value, _SCALARS):
            append((depth, key, value))
        elif depth and id(value) not in seen and not _opaque(kind, value):
            seen.add(id(value))
            append((depth, key))
            watched = getattr(kind, "_jit_watched", None)
            if watched is not None:
                # It keeps some values in device tensors (an optimiser's parameter group):
                # it says which of its Python values a compiled step depends on.
                value, kind = watched(value), dict
            if kind is list or kind is tuple or isinstance(value, (list, tuple)):
                items = enumerate(value[:256])
            elif isinstance(value, dict):
                items = [(k, v) for k, v in list(value.items())[:256]
                         if k.__class__ is str and not k.startswith("_")]
            else:
                attributes = getattr(value, "__dict__", None)
                if attributes is None:
                    return
                items = [(k, v) for k, v in attributes.items() if not k.startswith("_")]
            depth -= 1
            for k, item in items:
                if item.__class__ is Tensor:
                    append((depth, k, (_TENSOR, id(item))))
                    if tensors is not None:
                        tensors.append(item)
                elif item.__class__ in _EXACT_SCALARS:
                    append((depth, k, item))
                else:
                    visit(k, item, depth)

    code = fn.__code__
    # Default arguments are captured as closures are: `def step(x, y, model=model)`.
    for index, value in enumerate(fn.__defaults__ or ()):
        visit(f"default {index}", value, 4)
    for name, value in (fn.__kwdefaults__ or {}).items():
        visit(name, value, 4)
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            visit(name, cell.cell_contents, 4)
        except ValueError:  # an empty cell
            pass
    for name in code.co_names:
        if name in fn.__globals__:
            visit(name, fn.__globals__[name], 4)
    return found


_TENSOR = object()  # marks a tensor's identity in a snapshot (never equal to a plain value)
_EXACT_SCALARS = frozenset(_SCALARS)
_opaque_types: dict[type, bool] = {}


def _opaque(kind: type, value) -> bool:
    """Whether a snapshot does not look inside values of this type (arrays, classes,
    functions, modules): decided once per type, since inspect's tests are slow."""
    opaque = _opaque_types.get(kind)
    if opaque is None:
        opaque = _opaque_types[kind] = bool(
            issubclass(kind, (np.ndarray, type)) or inspect.isroutine(value)
            or inspect.ismodule(value))
    return opaque


__all__ = ["jit", "current_trace"]
