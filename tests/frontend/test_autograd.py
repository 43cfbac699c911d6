"""gingham.autograd against torch.autograd (CPU), values and gradients, on every device.

Each case runs the same code with ``lib`` = gingham and = torch (the custom Functions are
built by one factory for both libraries), so the oracle is torch's own autograd: second
derivatives (a gradient penalty), grad with respect to computed tensors, custom Functions whose
backward is not the true derivative (so a wrong wiring shows), eagerly and in gingham.jit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.tensor import realize

TOL = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def leaf(lib, value, device, requires_grad=True):
    if lib is torch:
        return torch.tensor(value, requires_grad=requires_grad)
    return gingham.tensor(value, device=device, requires_grad=requires_grad)


def check(ours, theirs):
    """Compare tensors (or tuples/None) from gingham with torch's, realised in one program."""
    ours, theirs = list(ours), list(theirs)
    realize([o for o in ours if o is not None])
    for n, (o, t) in enumerate(zip(ours, theirs)):
        if t is None:
            assert o is None, n
            continue
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), err_msg=str(n), **TOL)


def test_grad_modes():
    x = gingham.tensor(np.ones(2, np.float32), device="reference", requires_grad=True)
    with gingham.no_grad():
        assert not (x * 2).requires_grad
        with gingham.enable_grad():
            assert (x * 2).requires_grad
    with gingham.set_grad_enabled(False):
        assert not gingham.is_grad_enabled()
    assert gingham.is_grad_enabled()
    with gingham.inference_mode():
        assert gingham.is_inference_mode_enabled() and not (x * 2).requires_grad
    with gingham.inference_mode(False):
        assert (x * 2).requires_grad and not gingham.is_inference_mode_enabled()

    @gingham.no_grad
    def bare(t):
        return t * 2

    @gingham.set_grad_enabled(False)
    def called(t):
        return t * 2

    assert gingham.is_grad_enabled()  # decorating does not switch the mode
    assert not bare(x).requires_grad and not called(x).requires_grad
    gingham.set_grad_enabled(False)  # a plain call takes effect until set again
    try:
        assert not (x * 2).requires_grad
    finally:
        gingham.set_grad_enabled(True)
    assert (x * 2).requires_grad


def _second_order(lib, device):
    """A gradient penalty of a small MLP, second derivatives of tanh, grad with respect to a
    computed tensor, grad_outputs, allow_unused and a value computed under no_grad."""
    x = leaf(lib, rand(4, 3), device)
    w1, w2 = leaf(lib, rand(3, 5, seed=1), device), leaf(lib, rand(5, 1, seed=2), device)
    unused = leaf(lib, rand(2), device)
    h = (x @ w1).tanh()
    score = (h @ w2).sum()
    (g,) = lib.autograd.grad(score, x, create_graph=True)
    penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward(inputs=[w1, w2])  # x.grad stays None
    t = leaf(lib, rand(5, seed=3), device)
    (dt,) = lib.autograd.grad(t.tanh().sum(), t, create_graph=True)
    (d2t,) = lib.autograd.grad(dt, t, grad_outputs=lib.ones_like(dt))
    with lib.no_grad():
        m = t.mean()
    dm, dh, du = lib.autograd.grad([(t * m).sum(), score], [t, h, unused],
                                   allow_unused=True)
    (zero,) = lib.autograd.grad(score, unused, materialize_grads=True)
    assert x.grad is None and du is None
    r = leaf(lib, rand(4, seed=11), device)
    e = r.exp()
    e.retain_grad()
    handle = e.register_hook(lambda grad: grad * 10)
    handle.remove()
    r.register_hook(lambda grad: grad.clamp(-1.0, 1.0))  # a leaf's hook: before .grad
    (e * e).sum().backward()
    assert e.retains_grad
    return [g, penalty, w1.grad, w2.grad, dt, d2t, dm, dh, zero, r.grad, e.grad]


def test_grad_create_graph_and_inputs(device):
    check(_second_order(gingham, device), _second_order(torch, None))


def _functions(lib):
    """Custom Functions written once for both libraries."""

    class StraightThroughSign(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sign()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * (x.abs() <= 1).float()

    class ScaledPair(lib.autograd.Function):
        """Two outputs, a non-tensor argument, ctx attributes, needs_input_grad and a
        non-differentiable output; its backward scales by 3 where the truth is 1."""

        @staticmethod
        def forward(ctx, a, b, scale):
            ctx.scale = scale
            ctx.save_for_backward(a, b)
            mask = a > 0
            ctx.mark_non_differentiable(mask)
            return a * b * scale, a + b, mask

        @staticmethod
        def backward(ctx, grad_product, grad_sum, grad_mask):
            a, b = ctx.saved_tensors
            grad_a = grad_product * b * ctx.scale + 3 * grad_sum
            grad_b = grad_product * a * ctx.scale + grad_sum if ctx.needs_input_grad[1] else None
            return grad_a, grad_b, None

    return StraightThroughSign, ScaledPair


def _custom(lib, x, w, v):
    """Custom nodes in sequence (sign into the pair) and in parallel (two signs meeting in
    the pair), beside ordinary operations on their outputs, and gradient hooks."""
    sign, pair = _functions(lib)
    s1 = sign.apply(x * w)
    s1.register_hook(lambda grad: grad * 0.5)  # on a custom output: before its backward
    hidden = x - w
    hidden.register_hook(lambda grad: grad + 1)  # on a computed tensor: on from there
    v.register_hook(lambda grad: grad * 3)  # on a leaf
    s2 = sign.apply(hidden)
    product, total, mask = pair.apply(s1 + w, s2 * v, 2.0)
    loss = (product * x).sum() + (total.tanh() * v).sum() + mask.float().sum()
    return loss, product, total


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "jit"])
def test_custom_function(device, traced):
    arrays = [rand(6, seed=4) * 2, rand(6, seed=5), rand(6, seed=6)]
    tx, tw, tv = (leaf(torch, a, None) for a in arrays)
    t_loss, t_product, t_total = _custom(torch, tx, tw, tv)
    t_grads = torch.autograd.grad(t_loss, [tx, tw, tv, t_product], retain_graph=True)
    x, w, v = (leaf(gingham, a, device) for a in arrays)

    def step(x):
        loss, product, total = _custom(gingham, x, w, v)
        return (loss, product, total) + gingham.autograd.grad(loss, [w, v, product])

    if traced:
        x = gingham.tensor(arrays[0], device=device)  # a step's argument: no gradient to it
        outputs = gingham.jit(step)(x)
        check(outputs, [t_loss, t_product, t_total, *t_grads[1:]])
        return
    outputs = step(x)
    check(outputs, [t_loss, t_product, t_total, *t_grads[1:]])
    outputs[0].backward()
    check([x.grad, w.grad, v.grad], t_grads[:3])


def test_functional(device):
    def f(a, b):
        return (b.exp() @ a).tanh() * a + b.sum(0)

    arrays = [rand(3, seed=7), rand(3, 3, seed=8)]
    v_out, v_a = rand(3, seed=9), rand(3, seed=10)

    def run(lib):
        fn = lib.autograd.functional
        a, b = (leaf(lib, value, device, requires_grad=False) for value in arrays)
        ja, jb = fn.jacobian(f, (a, b))
        out, (ga, gb) = fn.vjp(f, (a, b), leaf(lib, v_out, device, False))
        _, jv = fn.jvp(lambda a: f(a, b), a, leaf(lib, v_a, device, False))
        h = fn.hessian(lambda a: f(a, b).sin().sum(), a)
        return [ja, jb, out, ga, gb, jv, h]

    check(run(gingham), run(torch))


def test_errors(device):
    x = gingham.tensor(rand(3), device=device, requires_grad=True)
    y = x * 2
    with pytest.raises(gingham.AutogradError, match="only for scalar outputs"):
        gingham.autograd.grad(y, x)
    with pytest.raises(gingham.AutogradError, match="does not require grad"):
        gingham.autograd.grad(y.sum(), gingham.tensor(rand(3), device=device))
    with pytest.raises(gingham.AutogradError, match="allow_unused=True"):
        gingham.autograd.grad(y.sum(), [x, gingham.tensor(rand(3), device=device,
                                                            requires_grad=True)])
    with pytest.raises(gingham.AutogradError, match="Mismatch in shape"):
        y.backward(gingham.tensor(rand(2), device=device))

    class TooFew(gingham.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad

    class WrongShape(gingham.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            return grad[:2]

    with pytest.raises(gingham.AutogradError, match="incorrect number of gradients"):
        TooFew.apply(x, x).sum().backward()
    with pytest.raises(gingham.AutogradError, match="invalid gradient at index 0"):
        WrongShape.apply(x).sum().backward()
    # gingham keeps lazy graphs: a second backward through one graph accumulates again.
    x.grad = None
    loss = (x * x).sum()
    loss.backward()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.numpy(), rtol=1e-6)


# -- grad_fn ---------------------------------------------------------------------------------------


def _two_outputs(lib):
    """A custom Function with two outputs (so next_functions' indices show)."""
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            return y * 2, y * 3

        @staticmethod
        def backward(ctx, first, second):
            return first * 2 + second * 3

    return Two


def _graph(lib, x, w, b, c):
    h = ((x @ w).exp() * c - b).relu()  # c needs no gradient: a (None, 0) edge
    first, second = _two_outputs(lib).apply(h.permute(1, 0))
    return (first ** 2).mean() + h.reshape(-1).sum() / w.sum() + second.sum()


def walk(fn) -> tuple[list, list]:
    """Every node reachable from ``fn``, once each (by identity, as torchviz does), breadth
    first: each with its name and its edges' names and indices; and the leaves found."""
    order, seen, queue = [fn], {id(fn)}, [fn]
    while queue:
        for child, _ in queue.pop(0).next_functions:
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                order.append(child)
                queue.append(child)
    nodes = [(type(n).__name__, n.name(),
              [(None if child is None else child.name(), index)
               for child, index in n.next_functions]) for n in order]
    return nodes, [n.variable for n in order if hasattr(n, "variable")]


def test_grad_fn_walks_as_torchs(device):
    """The graph a walk from ``loss.grad_fn`` finds (names, edges with their output indices,
    one AccumulateGrad per leaf holding it) against torch's; None for leaves, for values that
    need no gradient and for detached ones; a node per in-place rebinding; and the graph's
    values and gradients, which walking it leaves as they are."""
    arrays = [rand(3, 4, seed=11), rand(4, 5, seed=12), rand(5, seed=13), rand(5, seed=14)]
    results = {}
    for lib in (torch, gingham):
        x, w, b = (leaf(lib, a, device) for a in arrays[:3])
        c = leaf(lib, arrays[3], device, requires_grad=False)
        loss = _graph(lib, x, w, b, c)
        assert loss.grad_fn is loss.grad_fn
        assert isinstance(loss.grad_fn, lib.autograd.graph.Node)
        nodes, leaves = walk(loss.grad_fn)
        assert [id(t) for t in leaves] == [id(w), id(b), id(x)]
        with lib.no_grad():
            quiet = x * 2
        h = b * c
        h.relu_()
        assert [t.grad_fn for t in (x, c, c * 2, quiet, h.detach())] == [None] * 5
        results[lib] = (nodes, walk(h.grad_fn)[0], lib.autograd.grad(loss, [x, w, b]), loss)
    (their_nodes, their_h, their_grads, their_loss), (nodes, h, grads, loss) = (
        results[torch], results[gingham])
    assert nodes == their_nodes
    assert ("MulBackward0", "MulBackward0", [("ExpBackward0", 0), (None, 0)]) in nodes
    assert ("SumBackward0", "SumBackward0", [("TwoBackward", 1)]) in nodes
    assert h == their_h  # ReluBackward0, then the MulBackward0 of the value it replaced
    check([loss, *grads], [their_loss, *their_grads])
