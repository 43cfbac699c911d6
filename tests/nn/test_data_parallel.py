"""Data-parallel training (``train_step(..., devices=[...])``) against PyTorch training the same
model on the whole batch on one device: the losses and the weights after each step agree, and
every replica holds the first one's weights.

The run's device is paired with a second one (the reference interpreter, or `cpu` when the
run's device is the interpreter), so each device takes part; the batch of 9 rows is shared
unevenly (4 and 5), which the gradient's weighting must account for.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham import nn
from gingham.errors import DeviceError, GinghamError
from gingham.frontend import optim
from gingham.nn.training import train_step

RNG = np.random.default_rng(11)
X = RNG.standard_normal((9, 6)).astype(np.float32)
LABELS = RNG.integers(0, 3, 9)


def other_device(device: str) -> str:
    return "reference" if device != "reference" else "cpu"


def _models(device):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    ours = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("name", ["nesterov", "adamw"])
def test_data_parallel_steps_match_one_device_training(device, name):
    ours, theirs = _models(device)
    if name == "nesterov":
        opt = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        t_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    else:
        opt = optim.AdamW(ours.parameters(), lr=0.02)
        t_opt = torch.optim.AdamW(theirs.parameters(), lr=0.02)
    step = train_step(ours, opt, devices=[device, other_device(device)])
    for n in range(3):
        if n == 2:  # a schedule's change on the first replica reaches the other
            opt.lr = t_opt.param_groups[0]["lr"] = 0.05
        loss = step(X, LABELS)
        t_opt.zero_grad()
        t_loss = torch.nn.functional.cross_entropy(theirs(torch.tensor(X)),
                                                   torch.tensor(LABELS))
        t_loss.backward()
        t_opt.step()
        assert loss.device == device
        np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-5)
    expected = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    for replica in step.replicas:
        for key, value in replica.model.state_dict().items():
            np.testing.assert_allclose(value, expected[key], rtol=1e-4, atol=1e-5,
                                       err_msg=f"{replica.device}: {key}")
    assert [r.device for r in step.replicas] == [device, other_device(device)]
    assert step.replicas[0].model is ours and ours[0].weight.device == device
    # one trace of each program per replica: the steps replay them
    assert [(r.gradients.traces, r.update.traces) for r in step.replicas] == [(1, 1), (1, 1)]


def test_data_parallel_errors(device):
    ours, _ = _models(device)
    opt = optim.SGD(ours.parameters(), lr=0.1)
    other = other_device(device)
    with pytest.raises(DeviceError, match="distinct devices"):
        train_step(ours, opt, devices=[device, device])
    with pytest.raises(DeviceError, match=f"must be on {other}"):
        train_step(ours, opt, devices=[other, device])
    step = train_step(ours, opt, devices=[device, other])
    with pytest.raises(GinghamError, match="9 input rows but 8 target rows"):
        step(X, LABELS[:8])
    with pytest.raises(GinghamError, match="a batch of 1 rows cannot be shared over 2"):
        step(X[:1], LABELS[:1])
