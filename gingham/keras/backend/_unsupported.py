"""What the backend does not implement yet: a clear ``NotImplementedError``, never a wrong
answer. Each backend module ends with ``__getattr__ = unsupported_module_getattr(...)``, so a
Keras op that reaches a missing function gets one that raises, naming the op."""

from __future__ import annotations

from typing import Callable


def unsupported(name: str) -> Callable:
    """A function that raises ``NotImplementedError`` naming ``name`` when called."""

    def not_implemented(*args, **kwargs):
        raise NotImplementedError(f"{name} is not implemented by gingham's Keras backend yet")

    not_implemented.__name__ = name.rsplit(".", 1)[-1]
    return not_implemented


def unsupported_module_getattr(module: str, short: str) -> Callable[[str], Callable]:
    """A module ``__getattr__`` answering every public name it lacks with :func:`unsupported`
    (``short`` prefixes the op's name in the message: ``nn.ctc_loss``)."""

    def __getattr__(name: str):
        if name.startswith("_"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return unsupported(f"{short}.{name}")

    return __getattr__
