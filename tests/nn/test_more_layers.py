"""Instance norms, padding layers, Bilinear, ChannelShuffle, the Upsampling aliases, channel
and alpha dropout and the parameter containers of gingham.nn against torch.nn (CPU), on every
device: values and gradients (input and parameters) with PyTorch's weights loaded by name,
all layers in one program forward and one backward.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn

import gingham.nn as nn
import gingham.nn.functional as F
from gingham.frontend import optim
from gingham.frontend.tensor import tensor
from module_oracle import assert_layers_match  # tests/nn/module_oracle.py

TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


LAYERS = {  # name: (layer from gingham.nn or torch.nn, input names)
    "instance1d": (lambda m: m.InstanceNorm1d(4, affine=True), ("signal",)),
    "instance2d_tracked": (lambda m: m.InstanceNorm2d(3, momentum=0.3, track_running_stats=True),
                           ("image",)),
    "instance2d_unbatched": (lambda m: m.InstanceNorm2d(3, affine=True, eps=1e-3), ("plane",)),
    "instance3d": (lambda m: m.InstanceNorm3d(2), ("volume",)),
    "zero_pad1d": (lambda m: m.ZeroPad1d((1, 2)), ("signal",)),
    "zero_pad2d": (lambda m: m.ZeroPad2d(1), ("image",)),
    "constant_pad1d": (lambda m: m.ConstantPad1d(2, 0.5), ("signal",)),
    "constant_pad2d": (lambda m: m.ConstantPad2d((1, 0, 2, 1), -1.0), ("image",)),
    "constant_pad3d": (lambda m: m.ConstantPad3d((1, 0, 0, 1, 2, 0), 3.0), ("volume",)),
    "reflection_pad1d": (lambda m: m.ReflectionPad1d((2, 1)), ("signal",)),
    "reflection_pad2d": (lambda m: m.ReflectionPad2d((1, 2, 2, 0)), ("image",)),
    "replication_pad1d": (lambda m: m.ReplicationPad1d(3), ("signal",)),
    "replication_pad2d": (lambda m: m.ReplicationPad2d((0, 2, 1, 3)), ("plane",)),
    "bilinear": (lambda m: m.Bilinear(4, 3, 5), ("features", "other")),
    "bilinear_no_bias": (lambda m: m.Bilinear(4, 4, 2, bias=False), ("features", "features")),
    "channel_shuffle": (lambda m: m.ChannelShuffle(2), ("signal",)),
    "upsampling_nearest": (lambda m: m.UpsamplingNearest2d(scale_factor=2), ("image",)),
    "upsampling_bilinear": (lambda m: m.UpsamplingBilinear2d(size=(5, 7)), ("image",)),
    "dropout2d_eval": (lambda m: m.Dropout2d(0.5).eval(), ("image",)),
    "alpha_dropout_eval": (lambda m: m.AlphaDropout(0.5).eval(), ("signal",)),
}


def test_layers_match_torch(device):
    torch.manual_seed(0)
    theirs = tnn.ModuleDict({name: make(tnn) for name, (make, _) in LAYERS.items()})
    with torch.no_grad():  # affine parameters away from their ones and zeros
        for name, value in theirs.named_parameters():
            if "instance" in name:
                value.copy_(torch.randn(value.shape))
    ours = nn.ModuleDict({name: make(nn) for name, (make, _) in LAYERS.items()}).to(device)
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    if torch.__version__.startswith("2.13"):  # gingham's reprs follow 2.13's (CI's) format
        for name in LAYERS:
            assert repr(ours[name]) == repr(theirs[name]), name
    arrays = {"signal": rand(2, 4, 6), "image": rand(2, 3, 4, 5, seed=1),
              "plane": rand(3, 4, 5, seed=2), "volume": rand(2, 2, 3, 4, 3, seed=3),
              "features": rand(6, 4, seed=4), "other": rand(6, 3, seed=5)}
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    g_out = {name: ours[name](*(g_in[k] for k in keys)) for name, (_, keys) in LAYERS.items()}
    t_out = {name: theirs[name](*(t_in[k] for k in keys)) for name, (_, keys) in LAYERS.items()}
    assert_layers_match(ours, theirs, g_in, t_in, g_out, t_out, device, TOLERANCE)
    state = ours.state_dict()  # the tracked instance norm's running statistics
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(state[name], value.numpy(), err_msg=name, **TOLERANCE)
    ours.eval()
    theirs.eval()
    np.testing.assert_allclose(ours["instance2d_tracked"](g_in["image"]).numpy(),
                               theirs["instance2d_tracked"](t_in["image"]).detach().numpy(),
                               **TOLERANCE)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_channel_dropout_zeroes_whole_channels(device, nd):
    """Each [n, c] map is all zeros or all scaled by 1 / (1 - p), about p of them zeros; the
    identity in evaluation. Alpha dropout keeps its values' mean and variance near 0 and 1."""
    layer = {1: nn.Dropout1d, 2: nn.Dropout2d, 3: nn.Dropout3d}[nd](0.3)
    x = rand(8, 50, *(3,) * nd) + 5.0  # no zeros of its own
    y = layer(tensor(x, device=device)).numpy().reshape(8, 50, -1)
    flat = x.reshape(8, 50, -1)
    dropped = (y == 0).all(-1)
    kept = np.isclose(y, flat / 0.7, rtol=1e-5).all(-1)
    assert (dropped | kept).all()
    assert 0.2 < dropped.mean() < 0.4
    np.testing.assert_array_equal(layer.eval()(tensor(x, device=device)).numpy(), x)
    if nd == 2:
        selu_like = rand(200, 100, seed=1)
        out = nn.AlphaDropout(0.2)(tensor(selu_like, device=device)).numpy()
        assert abs(out.mean()) < 0.05 and abs(out.std() - 1.0) < 0.05
        alpha, p = 1.7580993408473766, 0.2  # PyTorch's: dropped values are -alpha * a * (1-p)
        dropped_value = -alpha * (1 - p) / np.sqrt((alpha ** 2 * p + 1) * (1 - p))
        assert 0.15 < np.isclose(out, dropped_value, rtol=1e-5).mean() < 0.25


def test_parameter_containers(device):
    """ParameterList and ParameterDict name their parameters as PyTorch's, load PyTorch's
    state dict, move with to() and train with an optimiser."""

    class Holder(nn.Module):
        def __init__(self):
            self.scales = nn.ParameterList([np.ones(3, np.float32), np.ones(3, np.float32)])
            self.shifts = nn.ParameterDict({"left": np.zeros(3, np.float32)})

    class TorchHolder(tnn.Module):
        def __init__(self):
            super().__init__()
            self.scales = tnn.ParameterList([torch.randn(3), torch.randn(3)])
            self.shifts = tnn.ParameterDict({"left": torch.randn(3)})

    ours, theirs = Holder().to(device), TorchHolder()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict(theirs.state_dict())
    assert all(p.device == ours.scales[0].device for p in ours.parameters())
    x = rand(3)
    optimizer = optim.SGD(ours.parameters(), lr=0.1)
    loss = (tensor(x, device=device) * ours.scales[0] * ours.scales[-1]
            + ours.shifts["left"]).square().sum()
    loss.backward()
    optimizer.step()
    torch_loss = (torch.tensor(x) * theirs.scales[0] * theirs.scales[-1]
                  + theirs.shifts["left"]).square().sum()
    torch_loss.backward()
    torch.optim.SGD(theirs.parameters(), lr=0.1).step()
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name], value.numpy(), err_msg=name,
                                   **TOLERANCE)
    assert len(ours.scales) == 2 and list(ours.shifts) == ["left"] and "left" in ours.shifts
    with pytest.raises(KeyError, match="clashes"):
        ours.shifts["keys"] = np.zeros(3, np.float32)
    with pytest.raises(IndexError):
        ours.scales[2]


def test_functional_forms_and_errors():
    x = tensor(rand(2, 6, 3))
    np.testing.assert_array_equal(F.channel_shuffle(x, 3).numpy(), torch.nn.functional
                                  .channel_shuffle(torch.tensor(x.numpy()), 3).numpy())
    with pytest.raises(ValueError, match="groups"):
        F.channel_shuffle(x, 0)
    with pytest.raises(ValueError, match="Expected 3D or 4D input"):
        F.dropout2d(x[0, 0])
    with pytest.raises(ValueError, match="expected 3D or 4D input"):
        nn.InstanceNorm2d(3)(x[0, 0])
    with pytest.raises(ValueError, match="padding must be an int or 4 values"):
        nn.ReflectionPad2d((1, 2))
