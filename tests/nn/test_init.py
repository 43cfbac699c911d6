"""gingham.nn.init against torch.nn.init: PyTorch's own fan and gain functions give each
initialiser's bound or standard deviation, which our draws (and PyTorch's, of the same shape)
must show; the tensor keeps its identity; manual_seed and the rng state reproduce the draws.

The draws are host-side and only copied to the device, so every device runs this cheaply.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.init as tinit

import gingham
import gingham.nn as nn
from gingham.frontend import optim
from gingham.frontend.tensor import DTypeError, tensor

SHAPE = (96, 64, 3, 3)  # 55296 values: a sample's std is within about 1% of the true one


def fresh(device, shape=SHAPE, dtype=np.float32):
    return tensor(np.full(shape, np.nan, dtype), device=device, requires_grad=True)


# name: (ours, theirs, the expected (kind, scale): "uniform" bound or "normal" std, or the
# truncation's bounds)
GAIN_RELU = tinit.calculate_gain("relu")
FAN_IN, FAN_OUT = tinit._calculate_fan_in_and_fan_out(torch.empty(SHAPE))
CASES = {
    "uniform": (lambda t: nn.init.uniform_(t, -0.3, 0.3),
                lambda t: tinit.uniform_(t, -0.3, 0.3), ("uniform", 0.3)),
    "normal": (lambda t: nn.init.normal_(t, 0.0, 0.02), lambda t: tinit.normal_(t, 0.0, 0.02),
               ("normal", 0.02)),
    "xavier_uniform": (lambda t: nn.init.xavier_uniform_(t, gain=2.0),
                       lambda t: tinit.xavier_uniform_(t, gain=2.0),
                       ("uniform", 2.0 * math.sqrt(6.0 / (FAN_IN + FAN_OUT)))),
    "xavier_normal": (lambda t: nn.init.xavier_normal_(t, tinit.calculate_gain("tanh")),
                      lambda t: tinit.xavier_normal_(t, tinit.calculate_gain("tanh")),
                      ("normal", 5 / 3 * math.sqrt(2.0 / (FAN_IN + FAN_OUT)))),
    "kaiming_uniform_a": (lambda t: nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
                          lambda t: tinit.kaiming_uniform_(t, a=math.sqrt(5)),
                          ("uniform", math.sqrt(3.0) * tinit.calculate_gain(
                              "leaky_relu", math.sqrt(5)) / math.sqrt(FAN_IN))),
    "kaiming_normal_fan_out": (
        lambda t: nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
        lambda t: tinit.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
        ("normal", GAIN_RELU / math.sqrt(FAN_OUT))),
    "trunc_normal": (lambda t: nn.init.trunc_normal_(t, std=0.5, a=-0.4, b=0.6),
                     lambda t: tinit.trunc_normal_(t, std=0.5, a=-0.4, b=0.6),
                     ("within", (-0.4, 0.6))),
    "trunc_normal_narrow": (lambda t: nn.init.trunc_normal_(t, mean=1.0, std=2.0, a=0.0, b=0.5),
                            lambda t: tinit.trunc_normal_(t, mean=1.0, std=2.0, a=0.0, b=0.5),
                            ("within", (0.0, 0.5))),
}


@pytest.mark.parametrize("name", CASES)
def test_random_initialisers_follow_torchs_formulas(device, name):
    ours, theirs, (kind, scale) = CASES[name]
    nn.manual_seed(0)
    torch.manual_seed(0)
    target = fresh(device)
    assert ours(target) is target
    values = target.numpy().ravel()
    reference = theirs(torch.empty(SHAPE)).numpy().ravel()
    assert target.requires_grad and target.dtype == np.float32 and target.device == device
    assert np.isfinite(values).all() and len(np.unique(values)) > 0.9 * values.size
    # Our draws' quantiles, mean and spread against PyTorch's draws of the same distribution.
    levels = [0.001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999]
    np.testing.assert_allclose(np.quantile(values, levels), np.quantile(reference, levels),
                               atol=0.04 * reference.std())
    assert abs(values.mean() - reference.mean()) < 0.02 * reference.std()
    assert values.std() == pytest.approx(reference.std(), rel=0.03)
    if kind == "within":
        assert scale[0] <= values.min() and values.max() <= scale[1]
    else:  # the formula, with PyTorch's fans and gains
        std = scale / math.sqrt(3.0) if kind == "uniform" else scale
        assert values.std() == pytest.approx(std, rel=0.02)
        if kind == "uniform":
            assert np.abs(values).max() <= scale * (1 + 1e-6)
            assert np.abs(values).max() >= 0.99 * scale


def test_deterministic_initialisers_and_orthogonal(device):
    target = fresh(device, (3, 5))
    np.testing.assert_array_equal(nn.init.eye_(target).numpy(), torch.eye(3, 5).numpy())
    np.testing.assert_array_equal(nn.init.constant_(target, 0.25).numpy(), np.full((3, 5), 0.25))
    np.testing.assert_array_equal(nn.init.ones_(target).numpy(), np.ones((3, 5)))
    np.testing.assert_array_equal(nn.init.zeros_(target).numpy(), np.zeros((3, 5)))
    counts = tensor(np.zeros((2, 2), np.int64), device=device)
    assert nn.init.ones_(counts).numpy().tolist() == [[1, 1], [1, 1]]
    for shape in ((6, 2, 2), (3, 7)):  # columns orthonormal (rows >= columns), then rows
        weight = fresh(device, shape)
        matrix = nn.init.orthogonal_(weight, gain=1.5).numpy().reshape(shape[0], -1)
        gram = matrix.T @ matrix if shape[0] >= matrix.shape[1] else matrix @ matrix.T
        np.testing.assert_allclose(gram, 2.25 * np.eye(len(gram)), atol=1e-5)


def test_initialisers_keep_the_tensor_an_optimizer_holds(device):
    """In place, as PyTorch's: the layer and the optimiser still hold the same tensor, which
    trains from its new values."""
    layer = nn.Linear(3, 2, device=device)
    weight, bias = layer.weight, layer.bias
    opt = optim.SGD(layer.parameters(), lr=0.5)
    nn.init.eye_(weight)
    nn.init.constant_(bias, 1.0)
    assert layer.weight is weight and layer.bias is bias and weight.requires_grad
    x = tensor(np.array([[1.0, 2.0, 3.0]], np.float32), device=device)
    layer(x).sum().backward()
    opt.step()
    np.testing.assert_allclose(weight.numpy(), np.eye(2, 3) - 0.5 * np.array([[1, 2, 3]] * 2))
    np.testing.assert_allclose(bias.numpy(), [0.5, 0.5])


def test_draws_follow_manual_seed_and_the_rng_state():
    """The layers' generator: seeding reproduces an initialiser's draws and a layer's; a saved
    rng state continues the same stream; an explicit generator leaves it untouched."""
    def draw():
        return (nn.init.kaiming_normal_(fresh("reference", (4, 5))).numpy(),
                nn.Linear(5, 4, device="reference").weight.numpy())

    nn.manual_seed(7)
    first = draw()
    nn.manual_seed(7)
    np.testing.assert_array_equal(draw(), first)
    state = nn.get_rng_state("reference")
    following = draw()
    nn.set_rng_state(state, "reference")
    np.testing.assert_array_equal(draw(), following)
    nn.manual_seed(7)
    nn.init.normal_(fresh("reference", (4, 5)), generator=np.random.default_rng(1))
    np.testing.assert_array_equal(draw(), first)
    mine = nn.init.uniform_(fresh("reference", (3,)), generator=np.random.default_rng(1))
    np.testing.assert_array_equal(mine.numpy(),
                                  np.random.default_rng(1).uniform(0, 1, 3).astype(np.float32))


def test_gains_fans_and_errors_are_torchs():
    for nonlinearity, param in [("linear", None), ("conv_transpose2d", None), ("sigmoid", None),
                                ("tanh", None), ("relu", None), ("leaky_relu", None),
                                ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)]:
        assert nn.init.calculate_gain(nonlinearity, param) == pytest.approx(
            tinit.calculate_gain(nonlinearity, param))
    for shape in ((5, 3), (8, 4, 3), (6, 2, 3, 5)):
        assert nn.init._calculate_fan_in_and_fan_out(gingham.zeros(shape)) == (
            tinit._calculate_fan_in_and_fan_out(torch.empty(shape)))
    errors = [
        (lambda m, t: m.calculate_gain("softmax"), "Unsupported nonlinearity softmax"),
        (lambda m, t: m.calculate_gain("leaky_relu", True), "negative_slope True not a valid"),
        (lambda m, t: m.xavier_uniform_(t((4,))), "fewer than 2 dimensions"),
        (lambda m, t: m.kaiming_uniform_(t((4, 3)), mode="fan_avg"), "Mode fan_avg not supported"),
        (lambda m, t: m.eye_(t((2, 2, 2))), "Only tensors with 2 dimensions"),
        (lambda m, t: m.orthogonal_(t((4,))), "Only tensors with 2 or more dimensions"),
    ]
    for call, message in errors:
        for module, make in ((tinit, torch.empty), (nn.init, gingham.zeros)):
            with pytest.raises(ValueError, match=message):
                call(module, make)
    with pytest.raises(DTypeError, match="normal_: random values need a floating-point"):
        nn.init.normal_(gingham.zeros((2,), np.int32))
    with pytest.warns(UserWarning, match="zero-element tensors is a no-op"):
        nn.init.kaiming_uniform_(gingham.zeros((0, 3)))
