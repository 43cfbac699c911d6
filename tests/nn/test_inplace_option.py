"""``inplace=True`` of the activations and dropouts (``F.relu(x, inplace=True)``,
``nn.ReLU(inplace=True)``, ...) against PyTorch: the input is changed and returned, gradients
flow through the change, a leaf that requires grad is refused, a model of in-place activations
trains to torch's weights, eagerly and inside ``gingham.jit``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import gingham
import gingham.nn.functional as F
from gingham import nn
from gingham.frontend.inplace import InPlaceError

RNG = np.random.default_rng(11)
TOL = dict(rtol=1e-5, atol=1e-6)

# Each deterministic function with an ``inplace`` argument: the arguments between the input and
# ``inplace`` (rrelu in evaluation is a leaky ReLU of the mean slope).
ACTIVATIONS = {
    "relu": (), "relu6": (), "leaky_relu": (0.2,), "elu": (0.7,), "celu": (0.5,),
    "selu": (), "hardtanh": (-0.5, 0.5), "hardsigmoid": (), "hardswish": (), "silu": (),
    "mish": (), "threshold": (0.1, 2.0), "rrelu": (0.1, 0.3, False),
}
DROPOUTS = {  # name: the input's shape
    "dropout": (4, 6), "dropout1d": (2, 3, 4), "dropout2d": (2, 3, 2, 2),
    "dropout3d": (2, 3, 1, 2, 2), "alpha_dropout": (4, 6), "feature_alpha_dropout": (2, 3, 4),
}


def test_every_torch_function_and_module_with_inplace_is_covered():
    """The lists above are torch's: a function or module torch gains must be added here."""
    functions = {name for name in dir(torch.nn.functional) if not name.startswith("_")
                 and inspect.isfunction(getattr(torch.nn.functional, name))
                 and "inplace" in inspect.signature(getattr(torch.nn.functional, name)).parameters}
    assert functions == set(ACTIVATIONS) | set(DROPOUTS)
    for name in functions:
        assert "inplace" in inspect.signature(getattr(F, name)).parameters, name
    assert set(MODULES) == {name for name in dir(torch.nn) if inspect.isclass(
        getattr(torch.nn, name)) and "inplace" in inspect.signature(
        getattr(torch.nn, name).__init__).parameters}


def _computed(lib, value, device):
    """A leaf ``w`` that requires grad and ``h = w * 1.5``, a computed tensor."""
    w = (torch.tensor(value, requires_grad=True) if lib is torch
         else gingham.tensor(value, device=device, requires_grad=True))
    return w, w * 1.5


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_writes_a_computed_tensor_with_gradients(device, name):
    """``F.name(h, ..., inplace=True)`` returns ``h``, changed; a value read from ``h`` before
    keeps the old value; the gradient through the change is torch's."""
    value = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    weights = RNG.standard_normal((4, 6)).astype(np.float32)
    results = {}
    for lib in (gingham, torch):
        functional = F if lib is gingham else torch.nn.functional
        w, h = _computed(lib, value, device)
        before = h * 1.0
        out = getattr(functional, name)(h, *ACTIVATIONS[name], inplace=True)
        assert out is h
        grad_weights = (torch.tensor(weights) if lib is torch
                        else gingham.tensor(weights, device=device))
        (h * grad_weights).sum().backward()
        results[lib] = [h, before, w.grad]
    for ours, theirs, what in zip(results[gingham], results[torch], ("value", "before", "grad")):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), err_msg=what, **TOL)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS) + sorted(DROPOUTS))
def test_leaf_rules_match_torch(name):
    """A leaf that requires grad: refused outside ``no_grad()`` (by torch too), changed in
    place and still a leaf under it; data (no grad) is changed. Dropout in evaluation writes
    nothing, so torch and gingham accept the leaf there."""
    device = "reference"
    shape = DROPOUTS.get(name, (4, 6))
    value = np.linspace(-2, 2, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    args = ACTIVATIONS.get(name, (0.5, True))  # p, training
    outcomes = {}
    for lib in (gingham, torch):
        functional = F if lib is gingham else torch.nn.functional
        function = getattr(functional, name)
        leaf = (torch.tensor(value, requires_grad=True) if lib is torch
                else gingham.tensor(value, device=device, requires_grad=True))
        with pytest.raises(RuntimeError, match="leaf"):
            function(leaf, *args, inplace=True)
        if name in DROPOUTS:
            assert function(leaf, 0.5, False, inplace=True) is leaf
            outcomes[lib] = leaf
            continue
        with lib.no_grad():
            assert function(leaf, *args, inplace=True) is leaf
        assert leaf.is_leaf and leaf.requires_grad
        data = torch.tensor(value) if lib is torch else gingham.tensor(value, device=device)
        assert function(data, *args, inplace=True) is data
        outcomes[lib] = (leaf, data)
    if name in DROPOUTS:
        np.testing.assert_array_equal(outcomes[gingham].numpy(), value)  # untouched
        return
    for ours, theirs in zip(outcomes[gingham], outcomes[torch]):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **TOL)
    with pytest.raises(InPlaceError, match=rf"{name}\(inplace=True\): a leaf tensor"):
        getattr(F, name)(gingham.tensor(value, requires_grad=True), *args, inplace=True)


@pytest.mark.parametrize("name", sorted(DROPOUTS))
def test_dropout_in_place_is_the_same_draw_written_into_the_input(device, name):
    """Training: the result is the input, holding what the out-of-place call draws from the
    same generator state (itself checked against torch's statistics elsewhere); ``inplace``
    may be passed by position too. Evaluation and ``p=0``: the input, unchanged."""
    shape = DROPOUTS[name]
    value = RNG.standard_normal(shape).astype(np.float32)
    function = getattr(F, name)
    gingham.manual_seed(3)
    expected = function(gingham.tensor(value, device=device), 0.4, True).numpy()
    gingham.manual_seed(3)
    h = gingham.tensor(value, device=device) * 1.0
    assert function(h, 0.4, True, True) is h
    np.testing.assert_allclose(h.numpy(), expected, **TOL)
    assert not np.allclose(expected, value)  # the draw did change something
    for p, training in ((0.4, False), (0.0, True)):
        kept = gingham.tensor(value, device=device)
        assert function(kept, p, training, inplace=True) is kept
        np.testing.assert_array_equal(kept.numpy(), value)


# Each torch.nn module with ``inplace``: its constructor's other arguments.
MODULES = {
    "ReLU": (), "ReLU6": (), "LeakyReLU": (0.2,), "ELU": (0.7,), "CELU": (0.5,), "SELU": (),
    "Hardtanh": (-0.5, 0.5), "Hardsigmoid": (), "Hardswish": (), "SiLU": (), "Mish": (),
    "Threshold": (0.1, 2.0), "RReLU": (0.1, 0.3), "Dropout": (0.3,), "Dropout1d": (0.3,),
    "Dropout2d": (0.3,), "Dropout3d": (0.3,), "AlphaDropout": (0.3,),
    "FeatureAlphaDropout": (0.3,),
}


MODULE_SHAPES = {"Dropout1d": (2, 3, 8), "Dropout2d": (2, 3, 4, 2)}  # others: 5-d


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_write_their_input_as_torchs_do(device, name):
    """``nn.Name(..., inplace=True)(h) is h`` in training exactly where torch's is (torch's
    AlphaDropout and FeatureAlphaDropout do not pass ``inplace`` on); in evaluation the
    result and ``h`` are torch's (the dropouts: the identity), and the repr is torch's."""
    value = np.linspace(-3, 3, 48, dtype=np.float32).reshape(MODULE_SHAPES.get(name,
                                                                               (2, 3, 2, 2, 2)))
    results = {}
    for lib in (gingham, torch):
        module = getattr(lib.nn if lib is torch else nn, name)(*MODULES[name], inplace=True)
        _, h = _computed(lib, value, device)
        training_same = module(h) is h
        module.eval()
        _, h = _computed(lib, value, device)
        out = module(h)
        results[lib] = (training_same, out is h, h.detach().numpy(), out.detach().numpy(),
                        repr(module))
    ours, theirs = results[gingham], results[torch]
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], **TOL)
    np.testing.assert_allclose(ours[3], theirs[3], **TOL)
    assert ours[4] == theirs[4]


def _mlp(lib, device=None):
    kw = {} if lib is torch else {"device": device}
    return lib.nn.Sequential(
        lib.nn.Linear(5, 8, **kw), lib.nn.ReLU(inplace=True), lib.nn.Linear(8, 6, **kw),
        lib.nn.LeakyReLU(0.1, inplace=True), lib.nn.Linear(6, 4, **kw),
        lib.nn.Hardtanh(-0.5, 0.5, inplace=True), lib.nn.Linear(4, 3, **kw),
        lib.nn.SiLU(inplace=True))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_model_of_in_place_activations_trains_to_torchs_weights(device, compiled):
    """SGD with momentum on a model of in-place activations: the losses and the weights after
    three steps are torch's, eagerly and as a ``gingham.jit`` step."""
    x = RNG.standard_normal((7, 5)).astype(np.float32)
    y = RNG.standard_normal((7, 3)).astype(np.float32)
    ours, theirs = _mlp(gingham, device), _mlp(torch)
    theirs.load_state_dict({k: torch.from_numpy(np.array(v))
                            for k, v in ours.state_dict().items()})
    results = {}
    for lib, model in ((gingham, ours), (torch, theirs)):
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        functional = F if lib is gingham else torch.nn.functional

        def step(inputs, targets, model=model, opt=opt, functional=functional):
            opt.zero_grad()
            loss = functional.mse_loss(model(inputs), targets)
            loss.backward()
            opt.step()
            return loss

        if lib is gingham:
            step = gingham.jit(step) if compiled else step
            args = (gingham.tensor(x, device=device), gingham.tensor(y, device=device))
        else:
            args = (torch.tensor(x), torch.tensor(y))
        losses = [float(step(*args).item()) for _ in range(3)]
        results[lib] = (losses, [p.detach().numpy() for p in model.parameters()])
    np.testing.assert_allclose(results[gingham][0], results[torch][0], rtol=1e-5)
    for ours_p, theirs_p in zip(results[gingham][1], results[torch][1]):
        np.testing.assert_allclose(ours_p, theirs_p, rtol=1e-4, atol=1e-6)


def test_inside_jit_a_captured_tensor_is_updated_and_an_argument_refused(device):
    """In a compiled step, ``inplace=True`` on a tensor the step captures (under
    ``no_grad()``) updates it at every replay; on the step's argument it is refused with
    gingham.jit's error (the caller's tensor would not see the change)."""
    state = gingham.tensor(np.array([-2.0, 0.5, 3.0], np.float32), device=device)
    reference = torch.tensor([-2.0, 0.5, 3.0])

    @gingham.jit
    def step(x):
        with gingham.no_grad():
            F.hardtanh(state.add_(x), -1.0, 4.0, inplace=True)
        return state * 1.0

    x = gingham.tensor(np.array([1.5, -1.0, 0.75], np.float32), device=device)
    for _ in range(3):
        seen = step(x)
        torch.nn.functional.hardtanh(reference.add_(torch.tensor([1.5, -1.0, 0.75])), -1.0,
                                     4.0, inplace=True)
        np.testing.assert_allclose(seen.numpy(), reference.numpy(), **TOL)
    np.testing.assert_allclose(state.numpy(), reference.numpy(), **TOL)

    with pytest.raises(InPlaceError, match=r"relu\(inplace=True\): an argument of a function"):
        gingham.jit(lambda x: F.relu(x, inplace=True))(x)
