"""A model split over two devices: gradients flow back through ``Tensor.to`` and optimisers
update parameters on both, as in PyTorch (checked against torch on the CPU).

Each test pairs the run's device with a second one (the reference interpreter, or the `cpu`
device when the run's device is the interpreter), so every device takes part in a split.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.errors import DeviceError
from gingham.frontend import optim

RNG = np.random.default_rng(7)
X = RNG.standard_normal((8, 6)).astype(np.float32)
Y = RNG.standard_normal((8, 3)).astype(np.float32)
W1 = RNG.standard_normal((6, 5)).astype(np.float32) * 0.5
W2 = RNG.standard_normal((5, 3)).astype(np.float32) * 0.5


def other_device(device: str) -> str:
    return "reference" if device != "reference" else "cpu"


def test_gradient_flows_back_through_moves_and_casts(device):
    """x -> (other device, float16) -> (back, float32): x gets PyTorch's gradient; the copy
    is no leaf and gets no .grad of its own; without requires_grad a move is a plain copy."""
    other = other_device(device)
    x = gingham.tensor(X, device=device, requires_grad=True)
    w = gingham.tensor(W1, device=other, requires_grad=True)
    moved = x.to(other, np.float16)
    h = (moved.float() @ w).tanh()
    loss = ((h.to(device) * 2.0) ** 2).mean()
    loss.backward()

    tx, tw = torch.tensor(X, requires_grad=True), torch.tensor(W1, requires_grad=True)
    tloss = (((tx.half().float() @ tw).tanh() * 2.0) ** 2).mean()
    tloss.backward()
    assert (w.grad.device, x.grad.device) == (other, device)
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-5)
    # float16's gradient rounds as PyTorch's does
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-3, atol=1e-4)
    assert moved.grad is None and not moved.is_leaf

    plain = gingham.tensor(X, device=device).to(other)
    assert plain.is_leaf and not plain.requires_grad
    with gingham.no_grad():
        assert not x.to(other).requires_grad


@pytest.mark.parametrize("name", ["momentum", "adamw"])
def test_a_model_split_over_two_devices_trains_as_torch(device, name):
    """Linear -> ReLU on one device, Linear on the other; three optimiser steps over the
    parameters of both, one learning-rate change between them."""
    other = other_device(device)
    first = gingham.tensor(W1, device=device, requires_grad=True)
    second = gingham.tensor(W2, device=other, requires_grad=True)
    t_first, t_second = (torch.tensor(W1, requires_grad=True),
                         torch.tensor(W2, requires_grad=True))
    if name == "momentum":
        opt = optim.SGD([first, second], lr=0.1, momentum=0.9)
        t_opt = torch.optim.SGD([t_first, t_second], lr=0.1, momentum=0.9)
    else:
        opt = optim.AdamW([first, second], lr=0.05)
        t_opt = torch.optim.AdamW([t_first, t_second], lr=0.05)
    x, y = gingham.tensor(X, device=device), gingham.tensor(Y, device=other)
    for step in range(3):
        if step == 2:
            opt.lr = t_opt.param_groups[0]["lr"] = 0.02
        loss = (((x @ first).relu().to(other) @ second - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        t_loss = ((torch.relu(torch.tensor(X) @ t_first) @ t_second - torch.tensor(Y)) ** 2).mean()
        t_opt.zero_grad()
        t_loss.backward()
        t_opt.step()
        np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-5)
    np.testing.assert_allclose(first.numpy(), t_first.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second.numpy(), t_second.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert (first.device, second.device) == (device, other)
    state = opt.state_dict()
    assert all(entry["step"] == 3.0 for entry in state["state"].values())


def test_a_traced_step_on_two_devices_is_refused(device):
    other = other_device(device)
    a = gingham.tensor(X, device=device)
    b = gingham.tensor(Y, device=other)

    @gingham.jit
    def both(scale):
        return a * scale, b * 2.0

    with pytest.raises(DeviceError, match=r"compiles a step for one device.*trace one "
                                          r"function per device"):
        both(gingham.tensor(np.float32(3.0), device=device))
