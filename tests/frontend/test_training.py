"""Optimisers against torch.optim, and gingham.jit's contracts: one trace per signature, no
host copies but the batch in and the loss out, no stale captured state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.devices import get_device
from gingham.frontend import optim
from gingham.frontend.jit import jit

RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 5)).astype(np.float32)
Y = RNG.standard_normal((16, 3)).astype(np.float32)
W0 = RNG.standard_normal((5, 3)).astype(np.float32)

OPTIMIZERS = {
    "sgd": (lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "momentum-dampening-wd": (
        lambda p: optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    "nesterov": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
                 lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True)),
    "adam": (lambda p: optim.Adam(p, lr=0.01, weight_decay=0.01),
             lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01)),
    "adamw": (lambda p: optim.AdamW(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_matches_torch(device, name):
    make, make_torch = OPTIMIZERS[name]
    w = gingham.tensor(W0, device=device, requires_grad=True)
    opt = make([w])
    tw = torch.tensor(W0, requires_grad=True)
    topt = make_torch([tw])
    x, y = gingham.tensor(X, device=device), gingham.tensor(Y, device=device)
    for _ in range(4):
        loss = ((x @ w - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        tloss = ((torch.tensor(X) @ tw - torch.tensor(Y)) ** 2).mean()
        topt.zero_grad()
        tloss.backward()
        topt.step()
        # The loss read after the step is the value from before it, as in PyTorch.
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


def _training_step(w, opt):
    @jit
    def step(xb, yb):
        loss = ((xb @ w - yb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def test_jit_traces_once_and_moves_only_batch_and_loss(device):
    w = gingham.tensor(W0, device=device, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    step = _training_step(w, opt)
    tw = torch.tensor(W0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    stats = get_device(device).stats
    for i in range(4):
        before = stats.snapshot()
        loss = step(X, Y).item()
        moved = stats.snapshot() - before
        tloss = ((torch.tensor(X) @ tw - torch.tensor(Y)) ** 2).mean()
        topt.zero_grad()
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss, tloss.item(), rtol=1e-5)
        if i and device != "reference":  # the interpreter copies by design
            assert (moved.copies_in, moved.copies_out) == (2, 1)
            assert moved.compiles == 0
    assert step.traces == 1
    opt.lr = 0.01  # a schedule changes a device tensor, not the trace
    step(X, Y)
    assert step.traces == 1


def test_jit_retraces_when_captured_state_changes(device):
    w = gingham.tensor(W0, device=device, requires_grad=True)
    holder = type("Model", (), {})()
    holder.w, holder.scale = w, 1.0

    @jit
    def predict(xb):
        return (xb @ holder.w) * holder.scale

    first = predict(X).numpy()
    holder.scale = 2.0  # a captured Python number changed
    np.testing.assert_allclose(predict(X).numpy(), 2 * first, rtol=1e-6)
    holder.w = gingham.tensor(2 * W0, device=device)  # a captured tensor was replaced
    np.testing.assert_allclose(predict(X).numpy(), 4 * first, rtol=1e-6)
    assert predict.traces == 3
    predict(X[:8])  # a new signature traces too
    assert predict.traces == 4



@pytest.mark.parametrize("traced", [False, True])
def test_values_computed_before_a_step_keep_them(device, traced):
    """A model's output computed before ``optimizer.step()`` and read after it (an accuracy,
    a sample) and the gradient taken before it hold their values then, as in PyTorch, after
    an eager step and after a replayed ``gingham.jit`` step (they used to be refused)."""
    w = gingham.tensor(W0, device=device, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    step = _training_step(w, opt)
    tw = torch.tensor(W0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    x = gingham.tensor(X, device=device)
    for _ in range(3):
        output = x @ w
        if traced:
            step(X, Y)
        else:
            loss = ((output - gingham.tensor(Y, device=device)) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            grad = w.grad
            opt.step()
        torch_output = torch.tensor(X) @ tw
        topt.zero_grad()
        ((torch_output - torch.tensor(Y)) ** 2).mean().backward()
        topt.step()
        np.testing.assert_allclose(output.numpy(), torch_output.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        if not traced:
            np.testing.assert_allclose(grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_gradients_accumulate_across_compiled_steps(device):
    """Gradient accumulation with the backward pass and the update in two compiled steps, as
    PyTorch code does it: each micro-batch's ``backward()`` adds to ``.grad`` (kept on the
    device between steps), the update clips and applies the sum and zeroes it. Losses,
    gradients and weights follow PyTorch's; the micro-step has two programs (the first
    micro-batch sets the gradient, the second adds to it), the update one."""
    w = gingham.tensor(W0, device=device, requires_grad=True)
    opt = optim.AdamW([w], lr=0.05)
    tw = torch.tensor(W0, requires_grad=True)
    topt = torch.optim.AdamW([tw], lr=0.05)

    @jit
    def micro(xb, yb):
        loss = ((xb @ w - yb) ** 2).mean() / 2
        loss.backward()
        return loss

    @jit
    def update():
        gingham.nn.utils.clip_grad_norm_([w], max_norm=0.5)
        opt.step()
        opt.zero_grad()

    opt.zero_grad()
    for i in range(6):
        batch = slice(4 * (i % 4), 4 * (i % 4) + 4)
        loss = micro(X[batch], Y[batch])
        torch_loss = ((torch.tensor(X[batch]) @ tw - torch.tensor(Y[batch])) ** 2).mean() / 2
        torch_loss.backward()
        np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-5)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
        if i % 2:
            update()
            assert w.grad is None
            torch.nn.utils.clip_grad_norm_([tw], max_norm=0.5)
            topt.step()
            topt.zero_grad()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert (micro.traces, update.traces) == (2, 1)

def test_jit_uploads_numpy_arguments_to_the_device_asked_for(device):
    """``jit(fn, device=...)``: a function of NumPy arrays alone, capturing no tensor, runs
    on that device (by default it would run on the default device)."""
    doubled = jit(lambda xb: xb * 2.0, device=device)
    y = doubled(X)
    assert y.device == gingham.devices.get_device(device).id
    np.testing.assert_allclose(y.numpy(), 2 * X, rtol=1e-6)


def test_jit_sees_tensors_captured_by_default_arguments(device):
    """A step that reaches its parameters through a default argument (``model=model``) runs
    on their device, and replays see their current values, as with a closure."""
    w = gingham.tensor(W0, device=device)

    @jit
    def predict(xb, weights=w):
        return (xb @ weights).tanh()

    for scale in (1.0, 2.0):
        y = predict(X)
        assert y.device == gingham.devices.get_device(device).id
        np.testing.assert_allclose(y.numpy(), np.tanh(X @ (W0 * scale)), rtol=1e-5, atol=1e-6)
        w.copy_(gingham.tensor(W0 * 2.0, device=device))
    assert predict.traces == 1


def test_reading_a_value_while_tracing_is_an_error(device):
    @jit
    def bad(xb):
        return xb * 2 if (xb.sum() > 0).item() else xb

    with pytest.raises(gingham.GinghamError, match="cannot be read during tracing"):
        bad(X)


def test_grad_and_value_and_grad_match_torch(device):
    def loss(w, x):
        return ((x @ w).tanh() ** 2).sum()

    w, x = gingham.tensor(W0, device=device), gingham.tensor(X, device=device)
    value, (dw, dx) = gingham.value_and_grad(loss, argnums=(0, 1))(w, x)
    tw, tx = torch.tensor(W0, requires_grad=True), torch.tensor(X, requires_grad=True)
    tvalue = ((tx @ tw).tanh() ** 2).sum()
    tvalue.backward()
    np.testing.assert_allclose(value.item(), tvalue.item(), rtol=1e-5)
    np.testing.assert_allclose(dw.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dx.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gingham.grad(loss)(w, x).numpy(), tw.grad.numpy(), rtol=1e-4,
                               atol=1e-5)


def test_detach_inside_a_step_matches_torch(device):
    """``detach()`` of a computed tensor is part of the step's program (no read-back): a
    target held fixed, as a critic's or a teacher's, gets no gradient, in gingham.jit and
    eagerly, as in PyTorch; the logged loss is the detached value."""
    def loss_and_logged(lib, w, x, y):
        prediction = x @ w
        target = (y + 0.5 * prediction).detach()  # no gradient through this term
        loss = ((prediction - target) ** 2).mean()
        return loss, loss.detach() * 2.0

    tw = torch.tensor(W0, requires_grad=True)
    t_loss, t_logged = loss_and_logged(torch, tw, torch.tensor(X), torch.tensor(Y))
    t_loss.backward()
    for traced in (False, True):
        w = gingham.tensor(W0, device=device, requires_grad=True)

        def step(xb, yb):
            loss, logged = loss_and_logged(gingham, w, xb, yb)
            loss.backward()
            return logged, w.grad

        run = jit(step) if traced else (lambda xb, yb: step(
            gingham.tensor(xb, device=device), gingham.tensor(yb, device=device)))
        logged, grad = run(X, Y)
        np.testing.assert_allclose(logged.numpy(), t_logged.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_detached_value_becomes_a_leaf_with_requires_grad(device):
    """``x.detach().requires_grad_()``: a new leaf holding the value (the input-gradient
    idiom), whose gradient is its own; the tensor it came from gets none."""
    w = gingham.tensor(W0, device=device, requires_grad=True)
    hidden = (gingham.tensor(X, device=device) @ w).detach()
    assert not hidden.requires_grad
    hidden.requires_grad_()
    assert hidden.is_leaf
    (hidden.tanh().sum()).backward()
    expected = 1 - np.tanh(X @ W0) ** 2
    np.testing.assert_allclose(hidden.grad.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert w.grad is None


def test_two_draws_from_the_default_generator_in_one_step(device):
    """Each draw advances the generator's state, inside gingham.jit as eagerly: a step that
    draws twice (two dropouts, rand and randn) gets the eager step's numbers."""
    x = gingham.tensor(X, device=device)

    def step(xb):
        return xb + gingham.rand(xb.shape, device=device) * gingham.randn(xb.shape,
                                                                          device=device)

    gingham.manual_seed(7)
    eager = [step(x).numpy() for _ in range(2)]
    gingham.manual_seed(7)
    traced = jit(step)
    compiled = [traced(x).numpy() for _ in range(2)]
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)
    assert not np.allclose(eager[0], eager[1])


def test_gan_step_with_two_optimizers_matches_torch(device):
    """A GAN step as PyTorch users write it: the discriminator's update, then the generator's
    loss through the updated discriminator (``fake.detach()`` for the first), in gingham.jit
    and eagerly, against torch's losses and weights after each of two steps."""
    rng = np.random.default_rng(3)
    g0, d0 = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 1)).astype(
        np.float32)
    real, noise = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal(
        (8, 4)).astype(np.float32)

    def gan(lib, g, d, og, od, x, z):
        fake = (z @ g).tanh()
        od.zero_grad()
        d_loss = ((x @ d).sigmoid().log().mean() * -1.0
                  - (1.0 - (fake.detach() @ d).sigmoid()).log().mean())
        d_loss.backward()
        od.step()
        og.zero_grad()
        g_loss = -(fake @ d).sigmoid().log().mean()  # through the updated discriminator
        g_loss.backward()
        og.step()
        return d_loss.detach(), g_loss.detach()

    tg, td = torch.tensor(g0, requires_grad=True), torch.tensor(d0, requires_grad=True)
    tog, tod = torch.optim.SGD([tg], lr=0.5), torch.optim.SGD([td], lr=0.5)
    expected = [[t.item() for t in gan(torch, tg, td, tog, tod, torch.tensor(real),
                                       torch.tensor(noise))] for _ in range(2)]
    for traced in (False, True):
        g = gingham.tensor(g0, device=device, requires_grad=True)
        d = gingham.tensor(d0, device=device, requires_grad=True)
        og, od = optim.SGD([g], lr=0.5), optim.SGD([d], lr=0.5)

        def step(x, z):
            return gan(gingham, g, d, og, od, x, z)

        run = jit(step) if traced else (lambda x, z: step(
            gingham.tensor(x, device=device), gingham.tensor(z, device=device)))
        losses = [[t.item() for t in run(real, noise)] for _ in range(2)]
        np.testing.assert_allclose(losses, expected, rtol=1e-5, err_msg=f"traced={traced}")
        np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(d.numpy(), td.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_jit_takes_and_returns_dicts_and_named_tuples(device):
    """Batches as dicts and metrics as dicts or named tuples, as training loops pass them;
    another set of keys is another signature."""
    from collections import namedtuple

    Metrics = namedtuple("Metrics", "total largest")

    @jit
    def summarize(batch):
        scaled = batch["x"] * batch["scale"]
        return {"sum": scaled.sum(), "stats": Metrics(scaled.sum(), scaled.max())}

    x = gingham.tensor(X, device=device)
    out = summarize({"x": x, "scale": gingham.tensor(np.float32(2.0), device=device)})
    assert set(out) == {"sum", "stats"} and isinstance(out["stats"], Metrics)
    np.testing.assert_allclose(out["stats"].largest.numpy(), 2 * X.max(), rtol=1e-6)
    np.testing.assert_allclose(out["sum"].numpy(), 2 * X.sum(), rtol=1e-4)
    renamed = jit(lambda batch: batch["y"] * 3.0)({"y": x})
    np.testing.assert_allclose(renamed.numpy(), 3 * X, rtol=1e-6)


def test_compile_is_jit_for_functions_and_keeps_modules(device):
    """``gingham.compile`` (torch.compile's name): a module comes back as it is (eager mode
    compiles lazily, and gradients flow through it); a function is jit's, whose outputs keep
    no graph: backward() on one says to call it inside the function."""
    model = gingham.nn.Linear(5, 3, device=device)
    assert gingham.compile(model) is model
    assert gingham.compile(disable=True)(model) is model
    w = gingham.tensor(W0, device=device, requires_grad=True)

    @gingham.compile(mode="max-autotune")
    def loss(x):
        return (x @ w).square().mean()

    value = loss(X)
    np.testing.assert_allclose(value.numpy(), ((X @ W0) ** 2).mean(), rtol=1e-5)
    with pytest.raises(gingham.GinghamError, match="call backward"):
        value.backward()
