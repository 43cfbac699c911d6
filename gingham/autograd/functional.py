"""``gingham.autograd.functional``: Jacobians, Hessians and vector products of functions of
tensors, as PyTorch's, built on :func:`gingham.autograd.grad`.

    J = gingham.autograd.functional.jacobian(f, x)            # shape f(x).shape + x.shape
    out, jv = gingham.autograd.functional.jvp(f, x, v)        # J @ v, by two vector-Jacobians

``inputs`` is a tensor or a tuple of tensors; results have the matching form (a tensor for a
tensor, tuples for tuples), as in PyTorch. The function sees fresh copies of the inputs that
require gradients (detached from any graph), so nothing flows into the caller's tensors.
"""

from __future__ import annotations

from typing import Callable

from ..frontend.tensor import Tensor, stack, zeros


def _inputs(inputs) -> tuple[bool, tuple[Tensor, ...]]:
    single = isinstance(inputs, Tensor)
    values = (inputs,) if single else tuple(inputs)
    for position, t in enumerate(values):
        if not isinstance(t, Tensor):
            raise TypeError(f"inputs[{position}] is a {type(t).__name__}, not a tensor")
    fresh = []
    for t in values:
        leaf = t.detach()
        leaf.requires_grad = True  # a stop point requiring gradients: a leaf to autograd
        fresh.append(leaf)
    return single, tuple(fresh)


def _outputs(value) -> tuple[bool, tuple[Tensor, ...]]:
    single = isinstance(value, Tensor)
    return single, (value,) if single else tuple(value)


def _grads(outputs, inputs, grad_outputs, create_graph: bool) -> tuple:
    from . import grad

    used = [o for o in outputs if o.requires_grad]
    if not used:
        return tuple(zeros(t.shape, t.dtype, t.device) for t in inputs)
    weights = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    return grad(used, inputs, weights, create_graph=create_graph, allow_unused=True,
                materialize_grads=True)


def _ones_for(outputs, v, what: str) -> list:
    if v is not None:
        _, vs = _outputs(v)
        return list(vs)
    for o in outputs:
        if o.size != 1:
            raise ValueError(f"{what}: the function's output has shape {o.shape}; v is needed "
                             "unless it has a single element")
    return [None] * len(outputs)


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``.

        out, grad_x = vjp(lambda x: (x ** 2).sum(), x)        # 2 x
    """
    single_in, xs = _inputs(inputs)
    single_out, outs = _outputs(func(*xs))
    grads = _grads(outs, xs, _ones_for(outs, v, "vjp"), create_graph)
    value = outs[0] if single_out else outs
    return value, grads[0] if single_in else grads


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(*inputs), J v)``: the Jacobian-vector product at ``inputs``, by the double-vjp
    trick (the vjp ``u -> J^T u`` is linear in ``u``; its own vjp with ``v`` is ``J v``).

        out, jv = jvp(lambda x: x.sin(), x, v)                # cos(x) * v
    """
    single_in, xs = _inputs(inputs)
    single_out, outs = _outputs(func(*xs))
    if v is None:
        if any(x.size != 1 for x in xs):
            raise ValueError("jvp: v is needed unless every input has a single element")
        vs = [None] * len(xs)
    else:
        _, vs = _outputs(v)
    dummies = []
    for o in outs:
        dummy = zeros(o.shape, o.dtype, o.device)
        dummy.requires_grad = True
        dummies.append(dummy)
    transposed = _grads(outs, xs, dummies, create_graph=True)
    from . import grad

    pairs = [(g, w) for g, w in zip(transposed, vs) if g.requires_grad]
    if pairs:
        products = grad([g for g, _ in pairs], dummies, [w for _, w in pairs],
                        create_graph=create_graph, allow_unused=True, materialize_grads=True)
    else:
        products = tuple(zeros(o.shape, o.dtype, o.device) for o in outs)
    value = outs[0] if single_out else outs
    return value, products[0] if single_out else products


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for a tensor in and out, a tensor of shape
    ``output.shape + input.shape``; tuples of them (outputs outside, inputs inside) otherwise.
    One vector-Jacobian product per output element (lazy: all in one program).

        J = jacobian(lambda x: x.exp(), x)                    # diag(exp(x))
    """
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f'jacobian: strategy must be "forward-mode" or "reverse-mode", not '
                         f"{strategy!r}")
    single_in, xs = _inputs(inputs)
    single_out, outs = _outputs(func(*xs))
    rows_per_output = []
    for o in outs:
        per_input: list[list[Tensor]] = [[] for _ in xs]
        flat = o.reshape(-1)
        for n in range(o.size):
            if o.requires_grad:
                grads = _grads([flat[n]], xs, [None], create_graph)
            else:
                grads = tuple(zeros(x.shape, x.dtype, x.device) for x in xs)
            for rows, g in zip(per_input, grads):
                rows.append(g)
        blocks = tuple(
            (stack(rows) if rows else zeros((0,) + x.shape, x.dtype, x.device)).reshape(
                o.shape + x.shape)
            for rows, x in zip(per_input, xs))
        rows_per_output.append(blocks[0] if single_in else blocks)
    return rows_per_output[0] if single_out else tuple(rows_per_output)


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``: the Jacobian of its gradient (shape
    ``input.shape * 2`` for one input; a tuple of tuples for several).

        H = hessian(lambda x: (x ** 3).sum(), x)              # diag(6 x)
    """
    single_in, xs = _inputs(inputs)

    def gradient(*args):
        out = func(*args)
        if not isinstance(out, Tensor) or out.size != 1:
            raise ValueError("hessian: the function must return a single-element tensor")
        grads = _grads([out], args, [None], create_graph=True)
        return grads[0] if single_in else grads

    return jacobian(gradient, xs[0] if single_in else xs, create_graph=create_graph)


__all__ = ["hessian", "jacobian", "jvp", "vjp"]
