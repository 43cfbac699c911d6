"""``gingham.autograd.Function``: an operation with a hand-written backward, as PyTorch's.

    class StraightThroughSign(gingham.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sign()

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * (x.abs() <= 1)

    y = StraightThroughSign.apply(x)

``forward`` runs on the arguments as given, without recording (under ``no_grad``, as
PyTorch's), so its result is the graph of what it computes (lazy, like every tensor). Each
tensor it returns is then a *stop point* of autograd (computed from that graph, but no gradient
flows through it, as with ``detach()``) that belongs to one :class:`~gingham.frontend.autograd.
Node`: the backward pass collects the cotangents of the outputs there, calls ``backward`` with
them and carries what it returns on into the arguments (see :mod:`gingham.frontend.autograd`).
Everything stays lazy, so inside ``gingham.jit`` the forward and the user's backward are traced
into the step's one program.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AutogradError
from ..frontend.autograd import Node
from ..frontend.grad_mode import is_grad_enabled, no_grad
from ..frontend.tensor import Tensor, zeros
from ..tile import builder
from ..tile import dtypes as dt


class FunctionCtx:
    """What ``forward`` leaves for ``backward``: tensors saved with :meth:`save_for_backward`
    (read back as :attr:`saved_tensors`), :attr:`needs_input_grad` (one bool per argument of
    ``forward``) and any attribute set on it (``ctx.scale = 2.0``)."""

    def __init__(self) -> None:
        self.needs_input_grad: tuple[bool, ...] = ()
        self.materialize_grads = True
        self._saved: tuple = ()
        self._non_differentiable: set[int] = set()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` (or None) for ``backward``; they are not copied: gingham's graph
        keeps every value it needs, so a later in-place change is refused where it matters
        (see :mod:`gingham.frontend.inplace`)."""
        for position, value in enumerate(tensors):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"save_for_backward can only save tensors or None, but argument "
                                f"{position} is of type {type(value).__name__}")
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        return self._saved

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """These outputs of ``forward`` require no gradient (indices, masks); their gradient
        given to ``backward`` is zeros (or None, see :meth:`set_materialize_grads`)."""
        self._non_differentiable.update(id(t) for t in outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` gets None (not zeros) for an output no gradient reached."""
        self.materialize_grads = bool(value)


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``, then
    call ``YourFunction.apply(*args)``; see the module docstring. ``backward`` gets one
    gradient per output of ``forward`` and returns one per argument (None for an argument that
    needs none, or is not a tensor). PyTorch 2's split form is accepted too: ``forward(*args)``
    without ``ctx`` and ``setup_context(ctx, inputs, output)``.

        class Square(gingham.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError("a gingham.autograd.Function must define forward()")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Tensor) -> Any:
        raise NotImplementedError("a gingham.autograd.Function must define backward()")

    setup_context = None  # PyTorch 2's split form: setup_context(ctx, inputs, output)

    def __init__(self, *args, **kwargs) -> None:
        raise RuntimeError(f"{type(self).__name__}: call {type(self).__name__}.apply(...), "
                           "do not instantiate a Function (its methods are static)")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        ctx = FunctionCtx()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx.needs_input_grad = needs
        with no_grad():
            if cls.setup_context is not None:
                result = cls.forward(*args)
                cls.setup_context(ctx, args, result)
            else:
                result = cls.forward(ctx, *args)
        if not (is_grad_enabled() and any(needs)):
            return result
        single = not isinstance(result, tuple)
        raw = (result,) if single else result
        node = Node(cls.__name__, args, needs, raw,
                    lambda cotangents: _run_backward(cls, ctx, args, node.output_forms,
                                                     cotangents))
        outputs = tuple(_stop_point(t, node, n, ctx) for n, t in enumerate(raw))
        return outputs[0] if single else outputs


def _stop_point(value: Any, node: Node, position: int, ctx: FunctionCtx) -> Any:
    """The output ``value`` of a Function as a stop point of autograd belonging to ``node``."""
    if not isinstance(value, Tensor) or id(value) in ctx._non_differentiable:
        return value
    if not dt.is_float(value.dtype):
        return value  # integer and boolean outputs have no gradient, as in PyTorch
    with no_grad():
        out = value._derive(value.shape, value.dtype, [value],
                            lambda nodes: builder.stop_gradient(nodes[0]))
    out._detached, out.requires_grad = True, True
    out._grad_fn, out._output_nr = node, position
    return out


def _run_backward(cls: type, ctx: FunctionCtx, args: tuple, forms: list,
                  cotangents: list) -> list:
    """The user's backward on ``cotangents`` (zeros where none arrived, unless the ctx says
    otherwise), its results checked against the arguments as PyTorch checks them."""
    name = f"{cls.__name__}Backward"
    grad_outputs = []
    for cotangent, form in zip(cotangents, forms):
        if cotangent is None and form is not None and ctx.materialize_grads:
            shape, dtype, device = form
            cotangent = zeros(shape, dtype, device)
        grad_outputs.append(cotangent)
    grads = cls.backward(ctx, *grad_outputs)
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) < len(args) or any(g is not None for g in grads[len(args):]):
        raise AutogradError(f"function {name} returned an incorrect number of gradients "
                            f"(expected {len(args)}, got {len(grads)})")
    return [_checked(name, position, arg, grad)
            for position, (arg, grad) in enumerate(zip(args, grads))]


def _checked(name: str, position: int, arg: Any, grad: Any) -> Tensor | None:
    """``grad`` for the argument ``arg``: summed to its shape where it broadcasts to it (as
    PyTorch does), in its dtype."""
    if grad is None:
        return None
    if not isinstance(arg, Tensor):
        raise AutogradError(f"function {name} returned a gradient different than None at "
                            f"position {position + 1}, but the corresponding forward input was "
                            "not a tensor")
    if not isinstance(grad, Tensor):
        raise TypeError(f"function {name} returned a {type(grad).__name__} as the gradient at "
                        f"position {position + 1}; a gradient is a tensor or None")
    if grad.shape != arg.shape:
        try:
            expandable = np.broadcast_shapes(arg.shape, grad.shape) == grad.shape
        except ValueError:
            expandable = False
        if not expandable:
            raise AutogradError(
                f"Function {name} returned an invalid gradient at index {position} - got "
                f"{list(grad.shape)} but expected shape compatible with {list(arg.shape)}")
        leading = grad.ndim - arg.ndim
        if leading:
            grad = grad.sum(dim=tuple(range(leading)))
        ones = tuple(d for d, (a, g) in enumerate(zip(arg.shape, grad.shape)) if a == 1 != g)
        if ones:
            grad = grad.sum(dim=ones, keepdim=True)
    return grad if grad.dtype == arg.dtype else grad.astype(arg.dtype)


__all__ = ["Function", "FunctionCtx"]
