"""Grad mode: whether new tensors record the operations that made them, as PyTorch's.

Each of :class:`no_grad`, :class:`enable_grad`, :class:`set_grad_enabled` and
:class:`inference_mode` is a context manager and a decorator (with or without parentheses for
the first two, as torch's); ``set_grad_enabled(mode)`` also takes effect as a plain call.

    with gingham.no_grad():
        prediction = model(x)               # requires no gradient
    @gingham.no_grad()
    def evaluate(model, x): ...
    gingham.set_grad_enabled(False)         # until set again
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable


class _GradMode(threading.local):
    """Each thread's grad mode (thread-local, as PyTorch's: a tuner thread building a layer's
    gradients must not see the training thread's ``no_grad`` block)."""

    def __init__(self) -> None:
        self.enabled = True
        self.inference = False


_grad_mode = _GradMode()


def is_grad_enabled() -> bool:
    """False inside a :class:`no_grad` block: new tensors do not require gradients there."""
    return _grad_mode.enabled


def is_inference_mode_enabled() -> bool:
    """True inside an :class:`inference_mode` block (which is ``no_grad`` here)."""
    return _grad_mode.inference


class _GradModeContext:
    """A context manager that sets grad mode to ``self.mode`` and restores the previous mode on
    exit; used as a decorator, it does so around each call of the function."""

    mode: bool = True
    inference: bool | None = None  # None: leave inference mode as it is

    def __enter__(self) -> None:
        self._previous = (_grad_mode.enabled, _grad_mode.inference)
        _grad_mode.enabled = self.mode
        if self.inference is not None:
            _grad_mode.inference = self.inference

    def __exit__(self, *exc_info: Any) -> None:
        _grad_mode.enabled, _grad_mode.inference = self._previous

    def clone(self) -> "_GradModeContext":
        return self.__class__()

    def __call__(self, fn: Callable) -> Callable:
        if inspect.isgeneratorfunction(fn):
            raise TypeError(f"{type(self).__name__}: decorating a generator function is not "
                            "supported; use the context manager inside it")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper


class _BareDecorator(type):
    """Lets ``@no_grad`` (no parentheses) decorate a function, as torch 2's does."""

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], bool):
            return super().__call__()(args[0])
        return super().__call__(*args, **kwargs)


class no_grad(_GradModeContext, metaclass=_BareDecorator):
    """Inside this block (or decorated function) new tensors do not require gradients.

        with gingham.no_grad():
            w -= lr * w.grad
    """

    mode = False


class enable_grad(_GradModeContext, metaclass=_BareDecorator):
    """Gradients recorded again inside a :class:`no_grad` block (or decorated function).

        with gingham.no_grad():
            with gingham.enable_grad():
                y = x * 2                    # requires grad
    """

    mode = True


class set_grad_enabled(_GradModeContext):
    """Grad mode on or off: at once as a plain call (``gingham.set_grad_enabled(False)``), for a
    block as a context manager (the previous mode comes back on exit), or around a function as
    a decorator.

        with gingham.set_grad_enabled(is_training):
            loss = model(x).sum()
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): mode must be a bool, not {type(mode).__name__}")
        self.mode = mode
        self._previous = (_grad_mode.enabled, _grad_mode.inference)
        _grad_mode.enabled = mode  # a plain call takes effect here, as torch's

    def __enter__(self) -> None:
        pass  # already set by __init__; __exit__ restores the mode from before it

    def clone(self) -> "set_grad_enabled":
        return set_grad_enabled(self.mode)

    def __call__(self, fn: Callable) -> Callable:
        # As a decorator the mode applies around each call only: undo the one __init__ set.
        _grad_mode.enabled, _grad_mode.inference = self._previous
        return super().__call__(fn)


class inference_mode(_GradModeContext, metaclass=_BareDecorator):
    """``no_grad`` (``mode=False``: grad mode on, as ``enable_grad``). gingham's tensors carry no
    per-operation autograd records, so inference mode has nothing more to save; tensors made in
    it are ordinary ones.

        with gingham.inference_mode():
            logits = model(batch)
    """

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode
        self.inference = bool(mode)

    def clone(self) -> "inference_mode":
        return inference_mode(self.inference)


__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]
