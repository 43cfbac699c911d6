"""``gingham.autograd``: PyTorch's autograd API on gingham's lazy graphs.

    (dx,) = gingham.autograd.grad(loss, [x])                    # gradients, not .grad
    g = gingham.autograd.grad(critic(x).sum(), x, create_graph=True)[0]
    ((g.norm(2, dim=1) - 1) ** 2).mean().backward()             # a gradient penalty
    gingham.autograd.backward([loss_a, loss_b])                 # into .grad, as loss.backward()

    class Clip(gingham.autograd.Function): ...                  # a hand-written backward
    loss.grad_fn.next_functions                                 # the graph, as torch's

Gradients are lazy tensors taken from the Tile autodiff of the graph (see
:mod:`gingham.frontend.autograd`), so they join the graph: a training step is still one
compiled program, and ``create_graph=True`` makes them differentiable again. gingham keeps
lazy graphs, so backward through a graph a second time works (gradients accumulate again);
``retain_graph`` is accepted and has nothing to keep.
"""

from __future__ import annotations

from typing import Sequence, Union

from ..errors import AutogradError
from ..frontend.autograd import accumulate_gradients, backward_pass, check_cotangent
from ..frontend.grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from ..frontend.tensor import Tensor, zeros
from . import functional, graph
from .function import Function, FunctionCtx

Tensors = Union[Tensor, Sequence[Tensor]]


def _as_list(value, name: str) -> list:
    values = [value] if isinstance(value, Tensor) else list(value)
    for position, t in enumerate(values):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}[{position}] is a {type(t).__name__}, not a tensor")
    return values


def _as_cotangents(grad_outputs, count: int, name: str) -> list:
    if grad_outputs is None:
        return [None] * count
    values = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
    if len(values) != count:
        raise AutogradError(f"{name} has {len(values)} entries for {count} outputs; give one "
                            "per output (None for a one-element output)")
    return values


def grad(outputs: Tensors, inputs: Tensors, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool | None = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """The gradients of ``outputs`` (weighted by ``grad_outputs``, needed unless each output
    has one element) with respect to each of ``inputs`` (leaves or computed tensors), as a
    tuple; ``.grad`` is not touched. An input the outputs do not depend on is an error unless
    ``allow_unused`` (then its gradient is None, or zeros with ``materialize_grads``). With
    ``create_graph`` the gradients are differentiable themselves.

        x = gingham.tensor([1.0, 2.0], requires_grad=True)
        (g,) = gingham.autograd.grad((x ** 3).sum(), x, create_graph=True)   # 3 x**2
        (h,) = gingham.autograd.grad(g.sum(), x)                             # 6 x
    """
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported; loop over "
                                  "the grad_outputs (gradients are lazy, one program in all)")
    outputs, inputs = _as_list(outputs, "outputs"), _as_list(inputs, "inputs")
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    for position, t in enumerate(inputs):
        if not t.requires_grad:
            raise AutogradError(f"grad(): input {position} (One of the differentiated Tensors) "
                                "does not require grad")
    for position, t in enumerate(outputs):
        if not t.requires_grad:
            raise AutogradError(f"grad(): element {position} of tensors does not require grad "
                                "and does not have a grad_fn")
    cotangents = [check_cotangent(t, g, n, "grad()") for n, (t, g) in enumerate(
        zip(outputs, _as_cotangents(grad_outputs, len(outputs), "grad_outputs")))]
    results = backward_pass(outputs, cotangents, inputs, create_graph)
    gradients = []
    for position, t in enumerate(inputs):
        found = results.get(id(t))
        if found is None:
            if not allow_unused:
                raise AutogradError(
                    f"grad(): input {position} (One of the differentiated Tensors) appears to "
                    "not have been used in the graph. Set allow_unused=True if this is the "
                    "desired behavior.")
            gradients.append(zeros(t.shape, t.dtype, t.device) if materialize_grads else None)
            continue
        gradient = found[1]
        gradients.append(gradient if gradient.dtype == t.dtype else gradient.astype(t.dtype))
    return tuple(gradients)


def backward(tensors: Tensors, grad_tensors=None, retain_graph: bool | None = None,
             create_graph: bool = False, grad_variables=None,
             inputs: Tensors | None = None) -> None:
    """Add the gradients of ``tensors`` (weighted by ``grad_tensors``) into ``.grad`` of every
    leaf that requires one (of ``inputs`` only, when given): ``loss.backward()`` for several
    tensors at once, in one pass.

        gingham.autograd.backward([loss_a, loss_b])          # as (loss_a + loss_b).backward()
    """
    tensors = _as_list(tensors, "tensors")
    if grad_tensors is None:
        grad_tensors = grad_variables
    cotangents = _as_cotangents(grad_tensors, len(tensors), "grad_tensors")
    wanted = None if inputs is None else _as_list(inputs, "inputs")
    accumulate_gradients(tensors, cotangents, create_graph, wanted, "backward()")


__all__ = [
    "AutogradError", "Function", "FunctionCtx", "backward", "enable_grad", "functional", "grad",
    "graph", "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "no_grad",
    "set_grad_enabled",
]
