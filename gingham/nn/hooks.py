"""Forward hooks of :class:`gingham.nn.Module`, as PyTorch's: the handle that removes one
(``torch.utils.hooks.RemovableHandle``), the global hooks that every module runs
(``torch.nn.modules.module.register_module_forward_hook``), and the call that runs a module's
``forward`` between its hooks.

    handle = model.fc.register_forward_hook(lambda module, args, output: output * 2)
    model(x)                                      # fc's output doubled
    handle.remove()

Hooks are Python: under ``gingham.jit`` they run while a step is traced, so what they compute
(a changed input or output) is part of the compiled step, and their side effects (appending to
a list) happen at tracing only, once per input signature.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict
from typing import Any, Callable

_next_id = itertools.count()

# The global hooks, run by every module's call before its own (as PyTorch's), by handle id.
_global_forward_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_forward_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict[int, bool] = OrderedDict()
_global_forward_hooks_always_called: OrderedDict[int, bool] = OrderedDict()


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


_EMPTY: OrderedDict = OrderedDict()


def _table(module: Any, name: str) -> OrderedDict:
    """The module's hook table ``name`` (empty when it has none)."""
    return vars(module).get(name) or _EMPTY


def has_forward_hooks(module: Any) -> bool:
    """Whether a call of ``module`` has any hook to run (the fast path's test)."""
    state = vars(module)
    return bool(state.get("_forward_pre_hooks") or state.get("_forward_hooks")
                or _global_forward_pre_hooks or _global_forward_hooks)


def forward_hook_ids(module: Any) -> tuple[int, ...]:
    """The ids of the hooks a call of ``module`` runs, in order (what ``gingham.jit``
    watches: a step traced with other hooks must trace again)."""
    tables = (_global_forward_pre_hooks, _table(module, "_forward_pre_hooks"),
              _global_forward_hooks, _table(module, "_forward_hooks"))
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
        result = module.forward(*args, **kwargs)
        for hook_id, hook in hooks:
            called.add(hook_id)
            new = (hook(module, args, kwargs, result) if hook_id in with_kwargs
                   else hook(module, args, result))
            if new is not None:
                result = new
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
