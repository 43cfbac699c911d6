"""Recurrent layers in PyTorch's shape: :class:`RNN`, :class:`LSTM`, :class:`GRU` and their
one-step cells :class:`RNNCell`, :class:`LSTMCell`, :class:`GRUCell`.

Constructor arguments, parameter names and shapes (``weight_ih_l0``, ``bias_hh_l1_reverse``,
...), initialisation (``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``), call signatures and
results follow ``torch.nn``, so a PyTorch state dict loads unchanged:

    lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True, bidirectional=True)
    lstm.load_state_dict(torch_lstm.state_dict())
    output, (h_n, c_n) = lstm(x)            # x [N, T, 16] -> output [N, T, 64]

A layer projects the whole sequence's input with one :func:`F.linear` per layer and direction,
then runs the gate math (:func:`F.lstm_cell`'s ``_lstm_step``, ...) in a Python loop over the
time steps, which are static: the loop traces into one program (and ``gingham.jit`` compiles
it with the rest of the step), differentiated by Tile's autodiff like any other graph. Long
sequences therefore make long programs; the time axis is unrolled, not a device loop.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..frontend.defaults import default_float
from ..frontend.tensor import DTypeError, ShapeError, Tensor, cat, stack, tensor, where, zeros
from ..tile import dtypes as dt
from . import functional as F
from . import modules
from .modules import Module
from .utils.rnn import PackedSequence, packed_steps, padded_steps

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _init_uniform(shape: tuple, bound: float, device: str | None, dtype) -> Tensor:
    """A parameter drawn from ``U(-bound, bound)`` by the layers' initialisation generator
    (:func:`gingham.nn.manual_seed`), as PyTorch initialises every recurrent weight."""
    values = modules._default_rng.uniform(-bound, bound, size=shape)
    values = values.astype(dt.as_tile_dtype(dtype or default_float()))
    return modules.Parameter(tensor(values, device=device))


def _check_input(layer: str, input: Tensor, ranks: tuple[int, int]) -> None:
    """PyTorch's checks of a recurrent layer's input: a Tensor, unbatched or batched (``ranks``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{layer}: input must be a gingham.Tensor, not {type(input).__name__}")
    if input.ndim not in ranks:
        raise ShapeError(f"{layer}: Expected input to be {ranks[0]}D or {ranks[1]}D, got "
                         f"{input.ndim}D tensor instead")


def _step(mode: str, projected: Tensor, state: tuple, w_hh: Tensor,
          b_hh: Tensor | None) -> tuple:
    """One time step of ``mode`` from the projected input; the state is ``(h,)`` or
    ``(h, c)``."""
    if mode == "LSTM":
        return F._lstm_step(projected, state[0], state[1], w_hh, b_hh)
    if mode == "GRU":
        return (F._gru_step(projected, state[0], w_hh, b_hh),)
    return (F._rnn_step(projected, state[0], w_hh, b_hh, "tanh" if mode == "RNN_TANH"
                        else "relu"),)


class RNNBase(Module):
    """What :class:`RNN`, :class:`LSTM` and :class:`GRU` share, as ``torch.nn.RNNBase`` (their
    base class here too, for ``isinstance`` checks): the stacked, optionally bidirectional,
    layers of ``mode`` (``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``) over a
    ``[T, N, input_size]`` (``[N, T, ...]`` with ``batch_first``, or unbatched
    ``[T, input_size]``) sequence.

        isinstance(nn.LSTM(10, 20), nn.RNNBase)          # True
        nn.RNNBase("GRU", 10, 20)                         # nn.GRU(10, 20)'s layers
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: str | None = None,
                 dtype=None) -> None:
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode!r} (one of {tuple(_GATES)})")
        self.mode = mode
        layer = type(self).__name__
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size),
                            ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{layer}: {name} should be of type int, got: "
                                f"{type(value).__name__}")
            if value <= 0 and name != "input_size":
                raise ValueError(f"{layer}: {name} must be greater than zero")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
                or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if proj_size:
            raise NotImplementedError(f"{layer}: proj_size (LSTM with projections) is not "
                                      "supported")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", UserWarning,
                          stacklevel=3)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        gates = _GATES[self.mode] * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        # Set in PyTorch's order (layer, direction, then ih/hh weights and biases), which is
        # the order of named_parameters and of the state dict.
        for name, shape in self._parameter_shapes(gates):
            setattr(self, name, _init_uniform(shape, bound, device, dtype) if shape else None)

    def _parameter_shapes(self, gates: int):
        directions = 2 if self.bidirectional else 1
        for layer in range(self.num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                inputs = self.input_size if layer == 0 else self.hidden_size * directions
                yield f"weight_ih{suffix}", (gates, inputs)
                yield f"weight_hh{suffix}", (gates, self.hidden_size)
                yield f"bias_ih{suffix}", (gates,) if self.bias else None
                yield f"bias_hh{suffix}", (gates,) if self.bias else None

    def _weights(self, layer: int, direction: int) -> tuple:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return tuple(getattr(self, f"{kind}{suffix}")
                     for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))

    def _initial_states(self, input: Tensor, hx, batched: bool) -> list[Tensor]:
        """The initial states as ``[layers * directions, N, H]`` tensors (zeros by
        default), checked against PyTorch's shapes."""
        layer = type(self).__name__
        states = list(hx) if isinstance(hx, (tuple, list)) else ([] if hx is None else [hx])
        count = 2 if self.mode == "LSTM" else 1
        if hx is not None and len(states) != count:
            raise TypeError(f"{layer}: hx must be " + ("a pair (h_0, c_0)" if count == 2
                                                       else "one tensor h_0"))
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, input.shape[1], self.hidden_size)
        if not states:
            return [zeros(shape, input.dtype, device=input.device) for _ in range(count)]
        checked = []
        for state in states:
            if not isinstance(state, Tensor):
                raise TypeError(f"{layer}: hx must hold gingham.Tensors, not "
                                f"{type(state).__name__}")
            if state.ndim != (3 if batched else 2):
                raise ShapeError(f"{layer}: for {'batched 3' if batched else 'unbatched 2'}-D "
                                 f"input, hx should also be {3 if batched else 2}-D but got "
                                 f"{state.ndim}-D tensor")
            state = state if batched else state.unsqueeze(1)
            if state.shape != shape:
                expected = shape if batched else (shape[0], shape[2])
                raise ShapeError(f"{layer}: expected hidden size {expected}, got "
                                 f"{state.shape if batched else (state.shape[0], state.shape[2])}")
            checked.append(state)
        return checked

    def forward(self, input: Tensor | PackedSequence, hx=None):
        """``(output, h_n)`` (``(output, (h_n, c_n))`` for an LSTM) as PyTorch's. A
        :class:`~gingham.nn.utils.rnn.PackedSequence` input gives a packed output, and each
        sequence's state stops at its own length: the steps past it leave the state alone
        (the reverse direction starts at the sequence's last step) and output zeros."""
        layer = type(self).__name__
        packed = input if isinstance(input, PackedSequence) else None
        if packed is not None:
            input = padded_steps(packed)  # time-major, in the packed (sorted) order
            if hx is not None and packed.sorted_indices is not None:
                order = tensor(packed.sorted_indices, device=input.device)
                hx = (tuple(h.index_select(1, order) for h in hx)
                      if isinstance(hx, (tuple, list)) else hx.index_select(1, order))
        _check_input(layer, input, (2, 3))
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{layer}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {input.shape[-1]}")
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:  # PyTorch's check, before an inner linear's
            raise DTypeError(f"{layer}: input dtype ({dt.dtype_name(input.dtype)}) does not "
                             f"match weight dtype ({dt.dtype_name(weight.dtype)}); convert "
                             f"the input (input.to({dt.dtype_name(weight.dtype)})) or the "
                             f"model (model.to({dt.dtype_name(input.dtype)}))")
        batched = input.ndim == 3
        x = input.unsqueeze(1) if not batched else (
            input.transpose(0, 1) if self.batch_first and packed is None else input)  # [T, N, I]
        states = self._initial_states(x, hx, batched)
        directions = 2 if self.bidirectional else 1
        steps = x.shape[0]
        running = None  # per step, [N, 1]: whether each sequence still has that step
        if packed is not None:
            lengths = packed.lengths()
            running = tensor((np.arange(steps)[:, None] < lengths[None, :])[..., None],
                             device=x.device)
        finals: list[list[Tensor]] = [[] for _ in states]
        for layer_index in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer_index, direction)
                projected = F.linear(x, w_ih, b_ih)  # every step's input at once
                index = layer_index * directions + direction
                state = tuple(s[index] for s in states)
                hidden = [None] * steps
                for t in (reversed(range(steps)) if direction else range(steps)):
                    new = _step(self.mode, projected[t], state, w_hh, b_hh)
                    if running is None:
                        state, hidden[t] = new, new[0]
                    else:
                        state = tuple(where(running[t], n, old) for n, old in zip(new, state))
                        hidden[t] = where(running[t], new[0], 0.0)
                outputs.append(stack(hidden, 0))
                for final, value in zip(finals, state):
                    final.append(value)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.training and self.dropout and layer_index < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        result = [stack(final, 0) for final in finals]
        if packed is not None:
            output = PackedSequence(packed_steps(x, packed.batch_sizes), packed.batch_sizes,
                                    packed.sorted_indices, packed.unsorted_indices)
            if packed.unsorted_indices is not None:
                order = tensor(packed.unsorted_indices, device=x.device)
                result = [r.index_select(1, order) for r in result]
            return output, (tuple(result) if self.mode == "LSTM" else result[0])
        output = x.transpose(0, 1) if self.batch_first and batched else x
        if not batched:
            output, result = output.squeeze(1), [r.squeeze(1) for r in result]
        return output, (tuple(result) if self.mode == "LSTM" else result[0])

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text


class RNN(RNNBase):
    """An Elman RNN, ``h_t = tanh(x_t @ W_ih.T + b_ih + h_{t-1} @ W_hh.T + b_hh)`` (or
    ``relu`` with ``nonlinearity="relu"``), stacked ``num_layers`` deep. Returns
    ``(output, h_n)``: every step's last-layer state and every layer's final state.

        rnn = nn.RNN(10, 20, num_layers=2)
        output, h_n = rnn(x, h_0)           # x [T, N, 10], h_0 [2, N, 20]
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: str | None = None,
                 dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class LSTM(RNNBase):
    """A long short-term memory layer stack (:func:`F.lstm_cell`'s gates). Returns
    ``(output, (h_n, c_n))``; ``hx`` is ``(h_0, c_0)``, each ``[layers * directions, N, H]``.
    ``proj_size`` raises ``NotImplementedError``.

        lstm = nn.LSTM(10, 20, batch_first=True)
        output, (h_n, c_n) = lstm(x)        # x [N, T, 10] -> output [N, T, 20]
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: str | None = None, dtype=None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """A gated recurrent unit layer stack (:func:`F.gru_cell`'s gates). Returns
    ``(output, h_n)``.

        gru = nn.GRU(10, 20, num_layers=2, bidirectional=True)
        output, h_n = gru(x)                # x [T, N, 10] -> output [T, N, 40], h_n [4, N, 20]
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: str | None = None, dtype=None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class RNNCellBase(Module):
    """One step of a recurrent layer, ``weight_ih [num_chunks * H, I]``, ``weight_hh
    [num_chunks * H, H]`` and the two biases, on ``[N, I]`` or unbatched ``[I]`` input, as
    ``torch.nn.RNNCellBase`` (the base class of :class:`RNNCell`, :class:`LSTMCell` and
    :class:`GRUCell` here too; ``num_chunks`` is their gate count: 1, 4, 3).

        isinstance(nn.GRUCell(10, 20), nn.RNNCellBase)   # True
    """

    mode = ""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: str | None = None, dtype=None) -> None:
        if self.mode and num_chunks != _GATES[self.mode]:
            raise ValueError(f"{type(self).__name__}: num_chunks must be {_GATES[self.mode]} "
                             f"(its gates), not {num_chunks}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = num_chunks * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = _init_uniform((gates, input_size), bound, device, dtype)
        self.weight_hh = _init_uniform((gates, hidden_size), bound, device, dtype)
        self.bias_ih = _init_uniform((gates,), bound, device, dtype) if bias else None
        self.bias_hh = _init_uniform((gates,), bound, device, dtype) if bias else None

    def _state(self, input: Tensor, hx) -> tuple[tuple, bool]:
        layer = type(self).__name__
        _check_input(layer, input, (1, 2))
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        count = 2 if self.mode == "LSTM" else 1
        if hx is None:
            shape = (x.shape[0], self.hidden_size)
            return (x, tuple(zeros(shape, x.dtype, device=x.device) for _ in range(count))), \
                batched
        states = tuple(hx) if count == 2 else (hx,)
        if count == 2 and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"{layer}: hx must be a pair (h_0, c_0)")
        for state in states:
            if not isinstance(state, Tensor) or state.ndim != input.ndim:
                raise ShapeError(f"{layer}: Expected hidden to be {input.ndim}D for "
                                 f"{input.ndim}D input")
        return (x, tuple(s if batched else s.unsqueeze(0) for s in states)), batched

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(RNNCellBase):
    """One Elman RNN step (:func:`F.rnn_tanh_cell` / :func:`F.rnn_relu_cell`):

        cell = nn.RNNCell(10, 20)
        h = cell(x_t, h)                    # [N, 10], [N, 20] -> [N, 20]
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: str | None = None, dtype=None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        (x, (h,)), batched = self._state(input, hx)
        cell = F.rnn_tanh_cell if self.nonlinearity == "tanh" else F.rnn_relu_cell
        h = cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (:func:`F.lstm_cell`); returns ``(h', c')``:

        cell = nn.LSTMCell(10, 20)
        h, c = cell(x_t, (h, c))
    """

    mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: str | None = None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx=None) -> tuple[Tensor, Tensor]:
        (x, state), batched = self._state(input, hx)
        h, c = F.lstm_cell(x, state, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (:func:`F.gru_cell`):

        cell = nn.GRUCell(10, 20)
        h = cell(x_t, h)
    """

    mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: str | None = None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        (x, (h,)), batched = self._state(input, hx)
        h = F.gru_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return h if batched else h.squeeze(0)


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
