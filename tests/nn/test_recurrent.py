"""gingham.nn's recurrent layers (RNN, LSTM, GRU and their cells) against torch.nn (CPU), on
every device: outputs, final states and the gradients of the input, the initial states and
every parameter, with PyTorch's weights loaded by name; then an LSTM classifier trained with
Adam in a compiled step against PyTorch's trajectory.

Every layer of the first test runs in one ModuleDict, so its forward is one program and its
backward another (a recurrent layer's unrolled steps make programs of a few hundred
statements; one of each keeps the file's compile time to seconds).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as tnn

import gingham.nn as nn
import gingham.nn.functional as F
from gingham.frontend import optim
from gingham.frontend.tensor import ShapeError, tensor
from gingham.nn import training
from module_oracle import assert_layers_match  # tests/nn/module_oracle.py

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# name: (layer of gingham.nn or torch.nn, input name, initial state names or None)
LAYERS = {
    "lstm_bidir_batch_first": (lambda m: m.LSTM(3, 4, num_layers=2, batch_first=True,
                                                bidirectional=True), "batch_major", ("h4", "c4")),
    "gru_bidir": (lambda m: m.GRU(3, 4, num_layers=2, bidirectional=True), "time_major",
                  ("h4",)),
    "lstm_no_bias": (lambda m: m.LSTM(3, 5, bias=False), "time_major", None),
    "rnn_tanh_unbatched": (lambda m: m.RNN(3, 4, num_layers=2, bidirectional=True),
                           "unbatched", ("h4_unbatched",)),
    "rnn_relu": (lambda m: m.RNN(3, 4, num_layers=2, nonlinearity="relu", batch_first=True),
                 "batch_major", None),
    "gru_unbatched": (lambda m: m.GRU(3, 4, batch_first=True), "unbatched", None),
    "lstm_cell": (lambda m: m.LSTMCell(3, 4), "step", ("h", "c")),
    "gru_cell": (lambda m: m.GRUCell(3, 4, bias=False), "step", ("h",)),
    "rnn_cell": (lambda m: m.RNNCell(3, 4, nonlinearity="relu"), "step", ("h",)),
    "rnn_cell_unbatched": (lambda m: m.RNNCell(3, 4), "step_unbatched", None),
}


def run_layers(layers, inputs: dict) -> dict:
    """Each layer's results by name (``name.output``, ``name.h_n``, ``name.c_n``)."""
    results = {}
    for name, (_, source, states) in LAYERS.items():
        hx = () if states is None else (
            (tuple(inputs[s] for s in states),) if len(states) == 2 else (inputs[states[0]],))
        result = layers[name](inputs[source], *hx)
        if "cell" in name:
            result = result if isinstance(result, tuple) else (result,)
            results.update({f"{name}.{k}": v for k, v in zip(("h", "c"), result)})
            continue
        output, final = result
        final = final if isinstance(final, tuple) else (final,)
        results[f"{name}.output"] = output
        results.update({f"{name}.{k}": v for k, v in zip(("h_n", "c_n"), final)})
    return results


def test_recurrent_layers_match_torch(device):
    torch.manual_seed(0)
    theirs = tnn.ModuleDict({name: make(tnn) for name, (make, _, _) in LAYERS.items()})
    ours = nn.ModuleDict({name: make(nn) for name, (make, _, _) in LAYERS.items()}).to(device)
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name in LAYERS:
        assert repr(ours[name]) == repr(theirs[name]), name
    arrays = {"batch_major": rand(2, 5, 3), "time_major": rand(5, 2, 3, seed=1),
              "unbatched": rand(4, 3, seed=2), "h4": rand(4, 2, 4, seed=3),
              "c4": rand(4, 2, 4, seed=4), "h4_unbatched": rand(4, 4, seed=5),
              "step": rand(2, 3, seed=6), "h": rand(2, 4, seed=7), "c": rand(2, 4, seed=8),
              "step_unbatched": rand(3, seed=9)}
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    g_out, t_out = run_layers(ours, g_in), run_layers(theirs, t_in)
    assert_layers_match(ours, theirs, g_in, t_in, g_out, t_out, device, TOLERANCE, seed=1)


class Classifier(nn.Module):
    """An LSTM over a sequence, a linear layer on its last layer's final state."""

    def __init__(self, device):
        self.lstm = nn.LSTM(3, 6, num_layers=2, batch_first=True, device=device)
        self.head = nn.Linear(6, 4, device=device)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x)
        return self.head(h_n[-1])


class TorchClassifier(tnn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = tnn.LSTM(3, 6, num_layers=2, batch_first=True)
        self.head = tnn.Linear(6, 4)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x)
        return self.head(h_n[-1])


def test_lstm_classifier_trains_as_torch(device):
    """Five Adam steps of a compiled training step (gingham.nn.training.train_step): the
    losses and the final weights follow PyTorch's."""
    torch.manual_seed(1)
    theirs = TorchClassifier()
    ours = Classifier(device)
    ours.load_state_dict(theirs.state_dict())
    step = training.train_step(ours, optim.Adam(ours.parameters(), lr=0.05))
    torch_optimizer = torch.optim.Adam(theirs.parameters(), lr=0.05)
    rng = np.random.default_rng(3)
    for index in range(5):
        x = rng.standard_normal((8, 5, 3)).astype(np.float32)
        y = rng.integers(0, 4, 8)
        loss = step(x, y.astype(np.int32)).item()
        torch_loss = tnn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        torch_optimizer.zero_grad()
        torch_loss.backward()
        torch_optimizer.step()
        np.testing.assert_allclose(loss, torch_loss.item(), rtol=1e-4, err_msg=f"step {index}")
    assert step.traces == 1
    state = ours.state_dict()
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(state[name], value.numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=name)


def test_recurrent_errors():
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ShapeError, match="Expected input to be 2D or 3D, got 4D"):
        lstm(tensor(rand(1, 2, 3, 3)))
    with pytest.raises(ShapeError, match="input.size\\(-1\\) must be equal to input_size. "
                                         "Expected 3, got 5"):
        lstm(tensor(rand(4, 2, 5)))
    with pytest.raises(ShapeError, match="expected hidden size \\(2, 2, 4\\), got \\(1, 2, 4\\)"):
        lstm(tensor(rand(4, 2, 3)), (tensor(rand(1, 2, 4)), tensor(rand(1, 2, 4))))
    with pytest.raises(ShapeError, match="hx should also be 2-D"):
        lstm(tensor(rand(4, 3)), (tensor(rand(2, 1, 4)), tensor(rand(2, 1, 4))))
    with pytest.raises(TypeError, match="a pair"):
        lstm(tensor(rand(4, 2, 3)), tensor(rand(2, 2, 4)))
    with pytest.raises(ShapeError, match="w_hh must be \\[4 \\* hidden_size, hidden_size\\]"):
        F.lstm_cell(tensor(rand(2, 3)), (tensor(rand(2, 4)), tensor(rand(2, 4))),
                    tensor(rand(16, 3)), tensor(rand(12, 4)))
    with pytest.raises(ShapeError, match="hx must have shape \\(2, 4\\)"):
        F.gru_cell(tensor(rand(2, 3)), tensor(rand(3, 4)), tensor(rand(12, 3)),
                   tensor(rand(12, 4)))


def test_rnn_base_classes_are_torchs(device):
    """nn.RNNBase / nn.RNNCellBase: the layers' bases (isinstance checks in user code), built
    with torch's constructors; RNNBase(mode, ...) holds torch's parameters for that mode and
    computes as the layer of that mode (torch's RNNBase has no forward: checked against
    torch's GRU with the same weights)."""
    for layer in (nn.RNN(3, 4), nn.LSTM(3, 4), nn.GRU(3, 4)):
        assert isinstance(layer, nn.RNNBase) and not isinstance(layer, nn.RNNCellBase)
    for cell in (nn.RNNCell(3, 4), nn.LSTMCell(3, 4), nn.GRUCell(3, 4)):
        assert isinstance(cell, nn.RNNCellBase) and not isinstance(cell, nn.RNNBase)
    torch.manual_seed(0)
    theirs = tnn.RNNBase("GRU", 3, 4, num_layers=2, bidirectional=True)
    ours = nn.RNNBase("GRU", 3, 4, num_layers=2, bidirectional=True, device=device)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert repr(ours) == repr(theirs)
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    reference = tnn.GRU(3, 4, num_layers=2, bidirectional=True)
    reference.load_state_dict(theirs.state_dict())
    x = rand(5, 2, 3)
    output, h_n = ours(tensor(x, device=device))
    expected, expected_h = reference(torch.tensor(x))
    np.testing.assert_allclose(output.numpy(), expected.detach().numpy(), **TOLERANCE)
    np.testing.assert_allclose(h_n.numpy(), expected_h.detach().numpy(), **TOLERANCE)
    cell = nn.RNNCellBase(3, 4, True, 3)
    assert [(k, p.shape) for k, p in cell.named_parameters()] == [
        (k, tuple(p.shape)) for k, p in tnn.RNNCellBase(3, 4, True, 3).named_parameters()]
    with pytest.raises(ValueError, match="Unrecognized RNN mode: 'FOO'"):
        nn.RNNBase("FOO", 3, 4)
    with pytest.raises(ValueError, match="num_chunks must be 4"):
        nn.LSTMCell.__base__.__init__(nn.LSTMCell(3, 4), 3, 4, True, 3)
