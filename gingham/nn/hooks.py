"""Forward and backward hooks of :class:`gingham.nn.Module`, as PyTorch's: the handle that
removes one (``torch.utils.hooks.RemovableHandle``), the global hooks that every module runs
(``torch.nn.modules.module.register_module_forward_hook``,
``register_module_full_backward_hook``), and the call that runs a module's ``forward``
between its hooks.

    handle = model.fc.register_forward_hook(lambda module, args, output: output * 2)
    model(x)                                      # fc's output doubled
    handle.remove()
    model.fc.register_full_backward_hook(
        lambda module, grad_input, grad_output: print(grad_output[0].norm()))

Backward hooks work as PyTorch's: a call of a module with backward hooks passes its tensor
arguments and its outputs through an identity :class:`~gingham.autograd.Function`
(:class:`BackwardHookFunction`), whose backward sees the gradients with respect to the
outputs (the pre-hooks run there, and may replace them) and then with respect to the inputs
(the hooks run there, and may replace those). See :meth:`gingham.nn.Module.
register_full_backward_hook`.

Hooks are Python: under ``gingham.jit`` they run while a step is traced, so what they compute
(a changed input or output, a changed gradient) is part of the compiled step, and their side
effects (appending to a list) happen at tracing only, once per input signature. A backward
hook sees lazy gradients there; to read one at every step, return it from the step.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict
from typing import Any, Callable, Sequence

from ..autograd.function import Function, FunctionCtx
from ..frontend.grad_mode import is_grad_enabled
from ..frontend.tensor import Tensor

_next_id = itertools.count()

# The global hooks, run by every module's call before its own (as PyTorch's), by handle id.
_global_forward_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_forward_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict[int, bool] = OrderedDict()
_global_forward_hooks_always_called: OrderedDict[int, bool] = OrderedDict()
_global_backward_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_backward_hooks: OrderedDict[int, Callable] = OrderedDict()


class RemovableHandle:
    """What ``register_*_hook`` returns: :meth:`remove` takes the hook out (a second call
    does nothing); as a context manager, the hook is removed on exit. Holds its tables weakly,
    as PyTorch's, so a handle does not keep a deleted module's hooks alive.

        with model.register_forward_pre_hook(lambda m, args: (args[0] * 0,)):
            zeros = model(x)
    """

    def __init__(self, hooks_dict: OrderedDict, *, extra_dicts: tuple[OrderedDict, ...] = ()
                 ) -> None:
        self.id = next(_next_id)
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dicts)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            table = ref()
            if table is not None:
                table.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.remove()


def add_hook(hooks: OrderedDict, hook: Callable, *, prepend: bool = False,
             flags: tuple[tuple[OrderedDict, bool], ...] = ()) -> RemovableHandle:
    """Put ``hook`` in ``hooks`` (first with ``prepend``), marked in each flag table whose
    flag is set; the handle removes it from all of them."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, not {type(hook).__name__}")
    marked = tuple(table for table, on in flags if on)
    handle = RemovableHandle(hooks, extra_dicts=marked)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    for table in marked:
        table[handle.id] = True
    return handle


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """A forward pre-hook of every module, run before the module's own: ``hook(module,
    args)`` returns None or new positional arguments (a non-tuple is wrapped in one), as
    PyTorch's ``torch.nn.modules.module.register_module_forward_pre_hook``.

        handle = register_module_forward_pre_hook(lambda m, args: print(type(m).__name__))
    """
    return add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """A forward hook of every module, run before the module's own: ``hook(module, args,
    output)`` (``hook(module, args, kwargs, output)`` with ``with_kwargs``) returns None or a
    replacement output; ``always_call`` runs it even when ``forward`` raised. As PyTorch's
    ``torch.nn.modules.module.register_module_forward_hook``.

        shapes = []
        handle = register_module_forward_hook(lambda m, args, out: shapes.append(out.shape))
    """
    return add_hook(_global_forward_hooks, hook,
                    flags=((_global_forward_hooks_with_kwargs, with_kwargs),
                           (_global_forward_hooks_always_called, always_call)))


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """A backward pre-hook of every module, run before the module's own: ``hook(module,
    grad_output)`` returns None or new gradients with respect to the outputs, as PyTorch's
    ``torch.nn.modules.module.register_module_full_backward_pre_hook``.

        handle = register_module_full_backward_pre_hook(
            lambda m, grad_output: print(type(m).__name__))
    """
    return add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """A backward hook of every module, run before the module's own: ``hook(module,
    grad_input, grad_output)`` returns None or new gradients with respect to the inputs, as
    PyTorch's ``torch.nn.modules.module.register_module_full_backward_hook`` (see
    :meth:`gingham.nn.Module.register_full_backward_hook`).

        norms = {}
        handle = register_module_full_backward_hook(
            lambda m, grad_input, grad_output: norms.update({m: grad_output[0].norm()}))
    """
    return add_hook(_global_backward_hooks, hook)


_EMPTY: OrderedDict = OrderedDict()


def _table(module: Any, name: str) -> OrderedDict:
    """The module's hook table ``name`` (empty when it has none)."""
    return vars(module).get(name) or _EMPTY


def has_hooks(module: Any) -> bool:
    """Whether a call of ``module`` has any hook to run, forward or backward (the fast
    path's test)."""
    state = vars(module)
    return bool(state.get("_forward_pre_hooks") or state.get("_forward_hooks")
                or state.get("_backward_pre_hooks") or state.get("_backward_hooks")
                or _global_forward_pre_hooks or _global_forward_hooks
                or _global_backward_pre_hooks or _global_backward_hooks)


def hook_ids(module: Any) -> tuple[int, ...]:
    """The ids of the hooks a call of ``module`` runs, in order (what ``gingham.jit``
    watches: a step traced with other hooks must trace again)."""
    tables = (_global_forward_pre_hooks, _table(module, "_forward_pre_hooks"),
              _global_forward_hooks, _table(module, "_forward_hooks"),
              _global_backward_pre_hooks, _table(module, "_backward_pre_hooks"),
              _global_backward_hooks, _table(module, "_backward_hooks"))
    return tuple(hook_id for table in tables for hook_id in table)


def call_with_hooks(module: Any, args: tuple, kwargs: dict) -> Any:
    """``module.forward(*args, **kwargs)`` between the global and the module's forward
    pre-hooks and forward hooks, with PyTorch's order, return-value rules and ``always_call``
    semantics (``torch.nn.Module._call_impl``)."""
    pre_hooks = (*_global_forward_pre_hooks.items(), *_table(module, "_forward_pre_hooks").items())
    pre_with_kwargs = _table(module, "_forward_pre_hooks_with_kwargs")
    hooks = (*_global_forward_hooks.items(), *_table(module, "_forward_hooks").items())
    with_kwargs = {**_global_forward_hooks_with_kwargs,
                   **_table(module, "_forward_hooks_with_kwargs")}
    always_called = {**_global_forward_hooks_always_called,
                     **_table(module, "_forward_hooks_always_called")}
    backward_hooks = [*_global_backward_hooks.values(), *_table(module, "_backward_hooks").values()]
    backward_pre_hooks = [*_global_backward_pre_hooks.values(),
                          *_table(module, "_backward_pre_hooks").values()]
    called: set[int] = set()
    result = None
    try:
        for hook_id, hook in pre_hooks:
            if hook_id in pre_with_kwargs:
                new = hook(module, args, kwargs)
                if new is not None:
                    if not (isinstance(new, tuple) and len(new) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {new}.")
                    args, kwargs = new
            else:
                new = hook(module, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        backward = None
        if backward_hooks or backward_pre_hooks:
            backward = BackwardHook(module, backward_hooks, backward_pre_hooks)
            args = backward.setup_input_hook(args)
        result = module.forward(*args, **kwargs)
        for hook_id, hook in hooks:
            called.add(hook_id)
            new = (hook(module, args, kwargs, result) if hook_id in with_kwargs
                   else hook(module, args, result))
            if new is not None:
                result = new
        if backward is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn("For backward hooks to be called, module output should be a "
                              f"Tensor or a tuple of Tensors but received {type(result)}",
                              stacklevel=3)
            result = backward.setup_output_hook(result)
        return result
    except Exception:
        # PyTorch runs the always_call hooks that have not run yet, silencing their errors
        # (a warning each), then re-raises forward's.
        for hook_id, hook in hooks:
            if hook_id not in always_called or hook_id in called:
                continue
            try:
                new = (hook(module, args, kwargs, result) if hook_id in with_kwargs
                       else hook(module, args, result))
                if new is not None:
                    result = new
            except Exception as error:
                warnings.warn("module forward hook with ``always_call=True`` raised an "
                              f"exception that was silenced as another error was raised in "
                              f"forward: {error}", stacklevel=2)
        raise


# -- backward hooks --------------------------------------------------------------------------------


class BackwardHookFunction(Function):
    """The identity on a module's tensor arguments, or on its outputs, as a node of autograd
    whose backward hands the gradients to ``on_backward`` (its first argument), which returns
    them, maybe replaced. PyTorch's ``torch.nn.modules._functions.BackwardHookFunction``
    (so ``output.grad_fn.name()`` is ``"BackwardHookFunctionBackward"`` there too), with the
    hook passed in rather than registered on the node. ``zeros_for_missing``: a gradient that
    never arrives is zeros (PyTorch's hooks see zeros for a tensor argument that needs no
    gradient, and None for an output that no gradient reached)."""

    @staticmethod
    def forward(ctx: FunctionCtx, on_backward: Callable, zeros_for_missing: bool,
                *tensors: Tensor) -> tuple:
        ctx.on_backward = on_backward
        ctx.set_materialize_grads(zeros_for_missing)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Tensor | None) -> tuple:
        return (None, None, *ctx.on_backward(grads))


def _spread(positions: Sequence[int], values: Sequence, size: int) -> tuple:
    """``values`` at ``positions`` of a tuple of ``size`` entries, None elsewhere (the hooks
    see one entry per argument or output, None for those that are not tensors)."""
    spread: list = [None] * size
    for position, value in zip(positions, values):
        spread[position] = value
    return tuple(spread)


def _replacement(new: Any, expected: int, what: str) -> tuple:
    """A backward hook's return value as a tuple of ``expected`` gradients."""
    if isinstance(new, Tensor) and expected == 1:
        new = (new,)
    if not isinstance(new, (tuple, list)):
        raise TypeError(f"a backward {what} must return None or a tuple of gradients, not "
                        f"{type(new).__name__}")
    if len(new) != expected:
        kind = "grad_output" if what == "pre hook" else "grad_input"
        raise RuntimeError(f"Backward {what} returned an invalid number of {kind}, got "
                           f"{len(new)}, but expected {expected}")
    return tuple(new)


class BackwardHook:
    """The backward hooks of one call of a module (PyTorch's ``torch.utils.hooks.
    BackwardHook``): the call's tensor arguments and outputs go through a
    :class:`BackwardHookFunction` each; in the backward pass the outputs' node runs first,
    collecting ``grad_output`` and running the pre-hooks, then the arguments' node runs the
    hooks with ``grad_input``. When no argument requires a gradient, the hooks run at the
    outputs' node with ``grad_input`` all None (PyTorch warns there; so does gingham). In
    ``grad_input``, a tensor argument that needs no gradient has zeros, as in PyTorch."""

    def __init__(self, module: Any, hooks: Sequence[Callable],
                 pre_hooks: Sequence[Callable]) -> None:
        self.module = module
        self.hooks, self.pre_hooks = list(hooks), list(pre_hooks)
        self.grad_outputs: tuple | None = None
        self.n_inputs = self.n_outputs = -1
        self.input_positions: list[int] | None = None  # None: nothing to wrap there
        self.output_positions: list[int] | None = None

    def setup_input_hook(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        args, self.input_positions = self._wrap(args, self._at_inputs, True)
        return args

    def setup_output_hook(self, result: Any) -> Any:
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        self.n_outputs = len(outputs)
        outputs, self.output_positions = self._wrap(outputs, self._at_outputs, False)
        return outputs[0] if single else outputs

    @staticmethod
    def _wrap(values: tuple, on_backward: Callable, zeros_for_missing: bool
              ) -> tuple[tuple, list[int] | None]:
        """``values`` with its tensors passed through one :class:`BackwardHookFunction`, and
        their positions; unchanged (and None) when none requires a gradient."""
        positions = [n for n, value in enumerate(values) if isinstance(value, Tensor)]
        tensors = [values[n] for n in positions]
        if not (is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return values, None
        wrapped = list(values)
        passed = BackwardHookFunction.apply(on_backward, zeros_for_missing, *tensors)
        for position, t in zip(positions, passed):
            wrapped[position] = t
        rebuilt = tuple(wrapped) if type(values) is tuple else type(values)(*wrapped)
        return rebuilt, positions

    def _at_outputs(self, grads: tuple) -> list:
        """The outputs' backward: the pre-hooks on ``grad_output``; the hooks too when no
        argument requires a gradient."""
        assert self.output_positions is not None
        grad_outputs = _spread(self.output_positions, grads, self.n_outputs)
        for hook in self.pre_hooks:
            new = hook(self.module, grad_outputs)
            if new is not None:
                grad_outputs = _replacement(new, len(grad_outputs), "pre hook")
        self.grad_outputs = grad_outputs
        if self.input_positions is None:
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "gingham.nn.Module.register_full_backward_hook for more details.",
                          stacklevel=2)
            no_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                new = hook(self.module, no_inputs, grad_outputs)
                if new is not None and not (isinstance(new, tuple)
                                            and all(g is None for g in new)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return [grad_outputs[n] for n in self.output_positions]

    def _at_inputs(self, grads: tuple) -> list:
        """The arguments' backward: the hooks, with ``grad_input`` and ``grad_output``."""
        assert self.input_positions is not None
        if self.grad_outputs is None:
            # The gradient reached the arguments without passing through the outputs (a
            # gradient of a gradient, as PyTorch says): no hook runs.
            return list(grads)
        grad_inputs = _spread(self.input_positions, grads, self.n_inputs)
        for hook in self.hooks:
            new = hook(self.module, grad_inputs, self.grad_outputs)
            if new is not None:
                grad_inputs = _replacement(new, len(grad_inputs), "hook")
        self.grad_outputs = None
        return [grad_inputs[n] for n in self.input_positions]
