"""Function transformations: ``grad`` and ``value_and_grad`` (JAX style, composable with jit).

    def loss(w, x, y):
        return ((x @ w - y) ** 2).mean()

    dw = gingham.grad(loss)(w, x, y)                       # gradient w.r.t. the first argument
    value, (dw, dx) = gingham.value_and_grad(loss, argnums=(0, 1))(w, x, y)
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence, Union

from ..errors import AutogradError
from .autograd import backward_pass
from .tensor import Tensor, tensor, zeros


def value_and_grad(fn: Callable, argnums: Union[int, Sequence[int]] = 0) -> Callable:
    """A function returning ``(fn(*args), gradients)``; ``fn`` must return one element."""
    single = isinstance(argnums, int)
    positions = (argnums,) if single else tuple(argnums)

    @functools.wraps(fn)
    def wrapper(*args):
        args = list(args)
        wrt = []
        for position in positions:
            value = args[position]
            if not isinstance(value, Tensor):
                value = tensor(value)
            # A fresh leaf, so gradients flow to this argument and nowhere else.
            leaf = Tensor(value.shape, value.dtype, value.device,
                          buffer=value.realize()._buffer, requires_grad=True)
            args[position] = leaf
            wrt.append(leaf)
        out = fn(*args)
        if not isinstance(out, Tensor) or out.size != 1:
            raise AutogradError(f"grad: the function must return a single-element tensor, "
                                f"not {type(out).__name__}"
                                + (f" of shape {out.shape}" if isinstance(out, Tensor) else ""))
        ones = tensor([1.0], dtype=out.dtype, device=out.device).reshape(out.shape)
        # The pass of autograd.grad, so custom autograd Functions in fn work here too.
        found = backward_pass([out], [ones], wrt)
        grads = [found[id(t)][1] if id(t) in found else zeros(t.shape, t.dtype, t.device)
                 for t in wrt]
        return out, grads[0] if single else tuple(grads)

    return wrapper


def grad(fn: Callable, argnums: Union[int, Sequence[int]] = 0) -> Callable:
    """The gradient of a scalar-valued function of tensors with respect to ``argnums``."""
    with_value = value_and_grad(fn, argnums)

    @functools.wraps(fn)
    def wrapper(*args):
        return with_value(*args)[1]

    return wrapper


__all__ = ["grad", "value_and_grad"]
