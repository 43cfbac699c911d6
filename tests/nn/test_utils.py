"""gingham.nn.utils against torch.nn.utils (CPU), on every device: gradient clipping eagerly
and inside a compiled training step, parameters as one vector, pad_sequence, and the
weight_norm / spectral_norm parametrizations (values, gradients, buffers, state-dict names).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.utils as tutils

import gingham
import gingham.nn as nn
import gingham.nn.functional as F
from gingham.frontend import optim
from gingham.frontend.tensor import tensor
from module_oracle import assert_layers_match  # tests/nn/module_oracle.py

TOLERANCE = dict(rtol=1e-4, atol=1e-5)
SHAPES = [(3, 4), (4,), (2, 3, 2)]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def with_gradients(device, scale=1.0):
    """Parameters whose gradients are known random arrays: gingham's and torch's twins."""
    ours, theirs = [], []
    for index, shape in enumerate(SHAPES):
        value, grad = rand(*shape, seed=index), rand(*shape, seed=10 + index) * scale
        p = tensor(value, device=device, requires_grad=True)
        (p * tensor(grad, device=device)).sum().backward()
        t = torch.tensor(value, requires_grad=True)
        t.grad = torch.tensor(grad)
        ours.append(p)
        theirs.append(t)
    return ours, theirs


@pytest.mark.parametrize("norm_type, max_norm", [(2.0, 0.5), (math.inf, 0.2), (3.0, 100.0)])
def test_clip_grad_norm_and_value_eagerly(device, norm_type, max_norm):
    ours, theirs = with_gradients(device)
    norm = nn.utils.clip_grad_norm_(iter(ours), max_norm, norm_type)
    expected = tutils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert norm.shape == ()
    np.testing.assert_allclose(norm.numpy(), expected.numpy(), **TOLERANCE)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), **TOLERANCE)
    nn.utils.clip_grad_value_(ours, 0.1)
    tutils.clip_grad_value_(theirs, 0.1)
    nn.utils.clip_grad_value_(ours[0], 0.05)  # a single tensor, as torch accepts
    tutils.clip_grad_value_(theirs[0], 0.05)
    for p, t in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), **TOLERANCE)


@pytest.mark.parametrize("compiled", [True, False], ids=["jit", "eager"])
def test_clip_grad_norm_in_a_training_step(device, compiled):
    """Three SGD steps with clipping, by ``gingham.jit`` and eagerly, against torch: the
    returned norms (read after the optimiser's step) and the parameters after the steps (and
    the spectral norm's power-iteration buffers, updated at every replay); the compiled step
    is traced once (the scale never leaves the device)."""
    gingham.nn.manual_seed(0)
    ours = nn.Sequential(nn.Linear(5, 8), nn.Tanh(),
                         nn.utils.parametrizations.spectral_norm(nn.Linear(8, 3))).to(device)
    theirs = tnn.Sequential(tnn.Linear(5, 8), tnn.Tanh(),
                            tutils.parametrizations.spectral_norm(tnn.Linear(8, 3)))
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    opt = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = F.mse_loss(ours(x), y)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(ours.parameters(), 0.3)
        nn.utils.clip_grad_value_(ours[2].parameters(), 0.05)
        opt.step()
        return norm

    step = gingham.jit(step) if compiled else step
    for index in range(3):
        x, y = rand(6, 5, seed=20 + index), rand(6, 3, seed=30 + index) * 3
        norm = step(tensor(x, device=device), tensor(y, device=device))
        torch_opt.zero_grad()
        TF_loss = torch.nn.functional.mse_loss(theirs(torch.from_numpy(x)), torch.from_numpy(y))
        TF_loss.backward()
        expected = tutils.clip_grad_norm_(theirs.parameters(), 0.3)
        tutils.clip_grad_value_(theirs[2].parameters(), 0.05)
        torch_opt.step()
        np.testing.assert_allclose(norm.numpy(), expected.numpy(), **TOLERANCE)
        assert expected.item() > 0.3  # the clipping was exercised
    assert not compiled or step.traces == 1
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name], value.numpy(), err_msg=name,
                                   **TOLERANCE)


def test_vectors_and_pad_sequence(device):
    """parameters_to_vector (values and gradients), vector_to_parameters, and pad_sequence in
    every layout (values and gradients of the sequences)."""
    arrays = [rand(*shape, seed=index) for index, shape in enumerate(SHAPES)]
    ours = [tensor(a, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    sequences = [rand(length, 2, 3, seed=5 + length) for length in (3, 5, 1)]
    g_seq = [tensor(s, device=device, requires_grad=True) for s in sequences]
    t_seq = [torch.tensor(s, requires_grad=True) for s in sequences]
    layouts = [dict(), dict(batch_first=True, padding_value=-2.0),
               dict(padding_side="left", padding_value=1.5)]
    g_out = [nn.utils.parameters_to_vector(ours)]
    t_out = [tutils.parameters_to_vector(theirs)]
    g_out += [nn.utils.rnn.pad_sequence(g_seq, **kw) for kw in layouts]
    t_out += [tutils.rnn.pad_sequence(t_seq, **kw) for kw in layouts]
    weights = [rand(*t.shape, seed=40 + i) for i, t in enumerate(t_out)]
    sum((g * tensor(w, device=device)).sum() for g, w in zip(g_out, weights)).backward()
    sum((t * torch.from_numpy(w)).sum() for t, w in zip(t_out, weights)).backward()
    for g, t in zip(g_out, t_out):
        assert g.shape == tuple(t.shape)
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), **TOLERANCE)
    for g, t in zip(ours + g_seq, theirs + t_seq):
        np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), **TOLERANCE)
    vector = rand(sum(a.size for a in arrays) + 2, seed=50)  # longer than needed: torch's rule
    nn.utils.vector_to_parameters(tensor(vector, device=device), ours)
    tutils.vector_to_parameters(torch.from_numpy(vector), theirs)
    for g, t in zip(ours, theirs):
        assert g.requires_grad
        np.testing.assert_allclose(g.numpy(), t.detach().numpy(), **TOLERANCE)


PARAMETRIZED = {  # name: (make the layer from gingham.nn / torch.nn and its utils, input)
    "weight_norm_linear": (lambda m, u: u.weight_norm(m.Linear(4, 5)), "features"),
    "weight_norm_conv_whole": (lambda m, u: u.weight_norm(m.Conv2d(3, 4, 3), dim=None),
                               "image"),
    "weight_norm_conv_dim1": (lambda m, u: u.weight_norm(m.Conv1d(2, 3, 2), dim=1), "signal"),
    "spectral_linear": (lambda m, u: u.spectral_norm(m.Linear(4, 6)), "features"),
    "spectral_transposed": (lambda m, u: u.spectral_norm(m.ConvTranspose2d(3, 2, 2,
                                                                           stride=2),
                                                          n_power_iterations=2), "image"),
    "legacy_weight_norm": (lambda m, u: (nn.utils if m is nn else tutils).weight_norm(
        m.Linear(4, 3), dim=1), "features"),
}


@pytest.mark.filterwarnings("ignore:.*weight_norm` is deprecated")
def test_weight_and_spectral_norm_match_torch(device):
    torch.manual_seed(0)
    theirs = tnn.ModuleDict({k: make(tnn, tutils.parametrizations)
                             for k, (make, _) in PARAMETRIZED.items()})
    ours = nn.ModuleDict({k: make(nn, nn.utils.parametrizations)
                          for k, (make, _) in PARAMETRIZED.items()}).to(device)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    assert ([n for n, _ in ours.named_parameters()]
            == [n for n, _ in theirs.named_parameters()])
    arrays = {"features": rand(3, 4), "image": rand(2, 3, 5, 4, seed=1),
              "signal": rand(2, 2, 6, seed=2)}
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    g_out = {k: ours[k](g_in[key]) for k, (_, key) in PARAMETRIZED.items()}
    t_out = {k: theirs[k](t_in[key]) for k, (_, key) in PARAMETRIZED.items()}
    assert_layers_match(ours, theirs, g_in, t_in, g_out, t_out, device, dict(rtol=1e-4,
                                                                              atol=1e-4))
    state = ours.state_dict()  # the power iterations' buffers after a training forward
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(state[name], value.numpy(), err_msg=name, **TOLERANCE)
    ours.eval()
    theirs.eval()
    for name in ("spectral_linear", "spectral_transposed"):  # evaluation: no iteration
        x = arrays[PARAMETRIZED[name][1]]
        np.testing.assert_allclose(ours[name](tensor(x, device=device)).numpy(),
                                   theirs[name](torch.from_numpy(x)).detach().numpy(),
                                   **TOLERANCE)
    layer = nn.utils.remove_weight_norm(ours["legacy_weight_norm"])
    torch_layer = tutils.remove_weight_norm(theirs["legacy_weight_norm"])
    assert type(layer) is nn.Linear
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    np.testing.assert_allclose(layer.weight.numpy(), torch_layer.weight.detach().numpy(),
                               **TOLERANCE)
    layer = nn.utils.parametrize.remove_parametrizations(ours["weight_norm_linear"], "weight")
    torch_layer = tutils.parametrize.remove_parametrizations(theirs["weight_norm_linear"],
                                                             "weight")
    assert type(layer) is nn.Linear and layer.weight.requires_grad
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    np.testing.assert_allclose(layer.weight.numpy(), torch_layer.weight.detach().numpy(),
                               **TOLERANCE)


def test_bad_arguments_are_named():
    p = tensor(np.array([1.0, 2.0], np.float32), device="reference", requires_grad=True)
    (p * tensor(np.array([np.inf, 1.0], np.float32), device="reference")).sum().backward()
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="expected gingham.Tensor"):
        nn.utils.vector_to_parameters(np.zeros(2, np.float32), [p])
    with pytest.raises(ValueError, match="padding_side"):
        nn.utils.rnn.pad_sequence([p], padding_side="middle")
    with pytest.raises(ValueError, match="n_power_iterations"):
        nn.utils.parametrizations.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="no parameter or buffer with name 'kernel'"):
        nn.utils.parametrizations.spectral_norm(nn.Linear(2, 2), name="kernel")

    @gingham.jit
    def step(x):
        (p * x).sum().backward()
        return nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)

    with pytest.raises(RuntimeError, match="error_if_nonfinite=True reads the total norm"):
        step(tensor(np.ones(2, np.float32), device="reference"))


def test_recurrent_layers_honour_packed_sequences(device):
    """pack_padded_sequence (unsorted lengths), LSTM / GRU / RNN on the packed batch and
    pad_packed_sequence against torch: packed data and batch sizes, final states (each at its
    sequence's own length, in the original order) and the padded outputs, with gradients to
    the padded input and every weight."""
    torch.manual_seed(0)
    makers = {"lstm": lambda m: m.LSTM(3, 4, num_layers=2, bidirectional=True),
              "gru": lambda m: m.GRU(3, 2, batch_first=True),
              "rnn": lambda m: m.RNN(3, 2, nonlinearity="relu")}
    theirs = tnn.ModuleDict({k: make(tnn) for k, make in makers.items()})
    ours = nn.ModuleDict({k: make(nn) for k, make in makers.items()}).to(device)
    ours.load_state_dict(theirs.state_dict())
    lengths = [3, 5, 1, 4]
    array = rand(5, 4, 3, seed=60)  # [T, B, features], time-major
    g_x = tensor(array, device=device, requires_grad=True)
    t_x = torch.tensor(array, requires_grad=True)
    g_packed = nn.utils.rnn.pack_padded_sequence(g_x, lengths, enforce_sorted=False)
    t_packed = tutils.rnn.pack_padded_sequence(t_x, lengths, enforce_sorted=False)
    np.testing.assert_array_equal(g_packed.batch_sizes, t_packed.batch_sizes.numpy())
    np.testing.assert_array_equal(g_packed.sorted_indices, t_packed.sorted_indices.numpy())
    g_out, t_out = {}, {}
    for name, module in (("ours", ours), ("theirs", theirs)):
        rnn_utils = nn.utils.rnn if name == "ours" else tutils.rnn
        packed = g_packed if name == "ours" else t_packed
        out = g_out if name == "ours" else t_out
        output, (h, c) = module["lstm"](packed)
        padded, out_lengths = rnn_utils.pad_packed_sequence(output, batch_first=True,
                                                            total_length=6)
        out.update(lstm_data=output.data, lstm_h=h, lstm_c=c, lstm_padded=padded)
        output, h = module["gru"](packed)  # batch_first does not apply to packed input
        out.update(gru_padded=rnn_utils.pad_packed_sequence(output, padding_value=-1.0)[0],
                   gru_h=h)
        h0 = (tensor(rand(1, 4, 2, seed=61), device=device) if name == "ours"
              else torch.from_numpy(rand(1, 4, 2, seed=61)))
        output, h = module["rnn"](packed, h0)  # h0 in the original order, as in torch
        out.update(rnn_data=output.data, rnn_h=h)
        if name == "ours":
            np.testing.assert_array_equal(out_lengths.numpy(), lengths)
    assert_layers_match(ours, theirs, {"x": g_x}, {"x": t_x}, g_out, t_out, device,
                        dict(rtol=1e-4, atol=1e-5))
    sequences = [rand(n, 3, seed=62 + n) for n in (2, 4)]
    packed = nn.utils.rnn.pack_sequence([tensor(s, device=device) for s in sequences],
                                        enforce_sorted=False)
    expected = tutils.rnn.pack_sequence([torch.from_numpy(s) for s in sequences],
                                        enforce_sorted=False)
    np.testing.assert_allclose(packed.data.numpy(), expected.data.numpy())
    with pytest.raises(ValueError, match="must be sorted in decreasing order"):
        nn.utils.rnn.pack_padded_sequence(g_x, lengths)
