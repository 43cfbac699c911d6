"""ONNX's recurrent ops (LSTM, GRU, RNN) and control flow (If) on gingham's Tensor ops.

A traced signature's shapes are static, the sequence length among them, so a recurrent node is
a Python loop over its time steps: the input projection of every step is one ``F.linear``, and
each step adds the recurrent ``F.linear`` of the previous state and its gates' elementwise
math. The loop unrolls into the traced program, as gingham.keras' ``rnn`` does.

* ``direction`` ``forward``, ``reverse`` or ``bidirectional``; ``layout`` 0 (``[seq, batch,
  ...]``) or 1 (``[batch, seq, ...]``); the optional inputs ``B``, ``initial_h``, ``initial_c``
  and ``P`` (peepholes), and ``sequence_lens``, which must be known when the graph is traced
  (a constant or a graph input, passed by value): a step past a sequence's length keeps its
  state and outputs zeros, so a reverse direction starts at each sequence's own last step.
* ``activations`` (with ``activation_alpha`` / ``activation_beta``): Sigmoid, Tanh, Relu,
  HardSigmoid, LeakyRelu, ThresholdedRelu, ScaledTanh, Affine, Elu, Softsign, Softplus;
  ``clip`` bounds each gate's input before its activation; LSTM's ``input_forget`` couples
  the forget gate to the input gate (``f = 1 - i``), as onnxruntime does.
* ``If`` converts the branch its condition picks, inline, when the condition is known while the
  graph is traced (a constant, a graph input passed by value, or a value of the input shapes);
  on a condition computed on the device (an exported ``torch.cond``) it converts both branches
  and selects their outputs (which must then have the same shapes and dtypes).
  ``Loop`` unrolls its body when the trip count and the conditions are known so, ``Scan`` over
  the (static) length of its scanned axis.

    x = np.random.rand(5, 2, 3).astype(np.float32)           # [seq, batch, input]
    (y, y_h, y_c) = gingham.onnx.load("lstm.onnx")(x, ...)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from ..nn import functional as F
from .ops import HOST_INPUTS, Node, converter, hard_sigmoid

# sequence_lens decides which steps run; If's condition which branch exists.
HOST_INPUTS.update({"LSTM": (4,), "GRU": (4,), "RNN": (4,), "If": (0,), "Loop": (0, 1)})

# A Loop without a trip count stops when its body says so: past this many iterations, gingham
# takes it for a loop that never ends (its graph would be unrolled this many times).
MAX_UNROLLED_ITERATIONS = 10_000

Activation = Callable[[Tensor], Tensor]

# Per activation (lower case, as onnxruntime matches them): the function of (x, alpha, beta)
# and the defaults of alpha and beta (None: the activation takes no such argument).
_ACTIVATIONS = {
    "sigmoid": (lambda x, a, b: x.sigmoid(), None, None),
    "tanh": (lambda x, a, b: x.tanh(), None, None),
    "relu": (lambda x, a, b: x.relu(), None, None),
    "hardsigmoid": (hard_sigmoid, 0.2, 0.5),
    "leakyrelu": (lambda x, a, b: F.leaky_relu(x, a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: F.threshold(x, a, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: (x * b).tanh() * a, 1.0, 1.0),
    "affine": (lambda x, a, b: x * a + b, 1.0, 0.0),
    "elu": (lambda x, a, b: F.elu(x, a), 1.0, None),
    "softsign": (lambda x, a, b: F.softsign(x), None, None),
    "softplus": (lambda x, a, b: F.softplus(x), None, None),
}

_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _activations(node: Node, defaults: Sequence[str], directions: int) -> list[Activation]:
    """The node's activation functions, ``len(defaults)`` per direction in order; each that
    takes an alpha (a beta) consumes the next of ``activation_alpha`` (``_beta``), or its
    default when that list has run out."""
    names = node.attr("activations") or list(defaults) * directions
    if len(names) != len(defaults) * directions:
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: {len(names)} activations "
                         f"given, {len(defaults) * directions} expected ({len(defaults)} per "
                         "direction)")
    alphas = list(node.attr("activation_alpha") or [])
    betas = list(node.attr("activation_beta") or [])
    functions = []
    for name in names:
        if name.lower() not in _ACTIVATIONS:
            raise node.fail(f"activation {name!r} is not supported ({', '.join(_ACTIVATIONS)})")
        fn, alpha, beta = _ACTIVATIONS[name.lower()]
        if alpha is not None and alphas:
            alpha = alphas.pop(0)
        if beta is not None and betas:
            beta = betas.pop(0)
        functions.append(lambda x, fn=fn, alpha=alpha, beta=beta: fn(x, alpha, beta))
    return functions


@dataclass
class Direction:
    """What one direction's step needs besides the projected input: the recurrent weights
    ``r`` (``[gates * hidden, hidden]``) and bias ``rb`` (``[gates * hidden]`` or None), the
    peepholes ``p`` (LSTM's ``[3 * hidden]`` or None), its activations and the gates' clip."""

    r: Tensor
    rb: Tensor | None
    p: Tensor | None
    activations: list[Activation]
    clip: float | None

    def clipped(self, x: Tensor) -> Tensor:
        return x if self.clip is None else x.clamp(-self.clip, self.clip)


# A step: (the input's projection x W^T + Wb for this step, the states (h first), the
# direction) -> the new states.
Step = Callable[[Tensor, tuple, Direction], tuple]


def _recurrent(node: Node, gates: int, defaults: Sequence[str], n_states: int,
               step: Step) -> list:
    """The outputs ``Y``, ``Y_h`` (and ``Y_c`` when ``n_states`` is 2) of an ONNX recurrent
    node whose cell has ``gates`` gates and takes ``defaults`` activations per direction."""
    layout = node.attr("layout", 0)
    x = node.tensor(0)
    if layout:
        x = x.transpose(0, 1)  # [batch, seq, input] -> [seq, batch, input]
    steps, batch, _ = x.shape
    w, r = node.tensor(1), node.tensor(2)
    direction = node.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: direction {direction!r} is "
                         f"not one of {', '.join(_DIRECTIONS)}")
    directions = _DIRECTIONS[direction]
    hidden = r.shape[-1]
    if node.attr("hidden_size", hidden) != hidden:
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: hidden_size "
                         f"{node.attr('hidden_size')} but R has shape {r.shape}")
    if not steps:
        raise node.fail("its input has no time steps")
    if w.shape[0] != directions or w.shape[1] != gates * hidden:
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: W has shape {w.shape}; "
                         f"direction {direction!r} and hidden size {hidden} need "
                         f"({directions}, {gates * hidden}, input_size)")
    bias = None if node.input(3) is None else node.tensor(3)
    peepholes = None if n_states < 2 or node.input(7) is None else node.tensor(7)
    masks = _step_masks(node, steps, batch)
    activations = _activations(node, defaults, directions)
    per = len(defaults)
    initial = [_initial_state(node, 5 + k, layout, (directions, batch, hidden), x.dtype)
               for k in range(n_states)]
    sequences, finals = [], []
    for d in range(directions):
        wb, rb = (None, None) if bias is None else bias[d].chunk(2)
        cell = Direction(r[d], rb, None if peepholes is None else peepholes[d],
                         activations[d * per:(d + 1) * per], node.attr("clip"))
        projected = F.linear(x, w[d], wb).unbind(0)
        states = tuple(state[d] for state in initial)
        outputs: list = [None] * steps
        reverse = direction == "reverse" or d == 1
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            new = step(projected[t], states, cell)
            if masks[t] is None:
                states, outputs[t] = new, new[0]
            else:  # past a sequence's end: the state stays, the output is zero
                states = tuple(T.where(masks[t], n, s) for n, s in zip(new, states))
                outputs[t] = T.where(masks[t], new[0], 0.0)
        sequences.append(T.stack(outputs, 0))
        finals.append(states)
    y = T.stack(sequences, 1)  # [seq, directions, batch, hidden]
    last = [T.stack([f[k] for f in finals], 0) for k in range(n_states)]
    if layout:
        y = y.permute(2, 0, 1, 3)
        last = [state.transpose(0, 1) for state in last]
    return [y, *last][:max(node.n_outputs, 1)]


def _step_masks(node: Node, steps: int, batch: int) -> list[Tensor | None]:
    """Per step, ``[batch, 1]`` booleans that are true where the step is inside the sequence;
    None where it is inside every sequence (no ``sequence_lens``, or all long enough)."""
    lengths = node.ints(4, "sequence_lens")
    if lengths is None:
        return [None] * steps
    if len(lengths) != batch or any(n < 0 or n > steps for n in lengths):
        raise ValueError(f"ONNX {node.op_type} node {node.name!r}: sequence_lens {lengths} must "
                         f"give {batch} lengths between 0 and the {steps} steps")
    inside = np.arange(steps)[:, None] < np.asarray(lengths)[None, :]
    return [None if inside[t].all() else node.lift(inside[t].reshape(batch, 1))
            for t in range(steps)]


def _initial_state(node: Node, position: int, layout: int, shape: tuple, dtype) -> Tensor:
    """``initial_h`` / ``initial_c`` as ``[directions, batch, hidden]``; zeros if omitted."""
    if node.input(position) is None:
        return T.zeros(shape, dtype, device=node.device)
    state = node.tensor(position)
    return state.transpose(0, 1) if layout else state


def _lstm_step(xw: Tensor, states: tuple, d: Direction, input_forget: bool) -> tuple:
    h, c = states
    i, o, f, g = (xw + F.linear(h, d.r, d.rb)).chunk(4, -1)
    gate, candidate, output = d.activations
    if d.p is not None:  # peepholes look at the cell state: i and f the last, o the new one
        p_i, p_o, p_f = d.p.chunk(3)
        i, f = i + p_i * c, f + p_f * c
    i = gate(d.clipped(i))
    f = 1.0 - i if input_forget else gate(d.clipped(f))
    c = f * c + i * candidate(d.clipped(g))
    if d.p is not None:
        o = o + p_o * c
    return gate(d.clipped(o)) * output(c), c


def _gru_step(xw: Tensor, states: tuple, d: Direction, linear_before_reset: bool) -> tuple:
    (h,) = states
    gate, candidate = d.activations
    hidden = h.shape[-1]
    x_z, x_r, x_h = xw.chunk(3, -1)
    r_zr, r_h = d.r[:2 * hidden], d.r[2 * hidden:]
    rb_zr, rb_h = (None, None) if d.rb is None else (d.rb[:2 * hidden], d.rb[2 * hidden:])
    h_z, h_r = F.linear(h, r_zr, rb_zr).chunk(2, -1)
    z = gate(d.clipped(x_z + h_z))
    r = gate(d.clipped(x_r + h_r))
    if linear_before_reset:
        recurrent = r * F.linear(h, r_h, rb_h)
    else:
        recurrent = F.linear(r * h, r_h, rb_h)
    h_new = candidate(d.clipped(x_h + recurrent))
    return ((1.0 - z) * h_new + z * h,)


def _rnn_step(xw: Tensor, states: tuple, d: Direction) -> tuple:
    (h,) = states
    (activation,) = d.activations
    return (activation(d.clipped(xw + F.linear(h, d.r, d.rb))),)


@converter("LSTM")
def _lstm(node: Node):
    input_forget = bool(node.attr("input_forget", 0))
    return _recurrent(node, 4, ("Sigmoid", "Tanh", "Tanh"), 2,
                      lambda xw, states, d: _lstm_step(xw, states, d, input_forget))


@converter("GRU")
def _gru(node: Node):
    linear_before_reset = bool(node.attr("linear_before_reset", 0))
    return _recurrent(node, 3, ("Sigmoid", "Tanh"), 1,
                      lambda xw, states, d: _gru_step(xw, states, d, linear_before_reset))


@converter("RNN")
def _rnn(node: Node):
    return _recurrent(node, 1, ("Tanh",), 1, _rnn_step)


# -- control flow ----------------------------------------------------------------------------------


@converter("If")
def _if(node: Node):
    condition = node.input(0)
    if math.prod(condition.shape) != 1:
        raise ValueError(f"ONNX If node {node.name!r}: the condition must hold one value, not "
                         f"shape {tuple(condition.shape)}")
    if not isinstance(condition, np.ndarray):
        return _if_on_device(node, condition)
    branch = node.attr("then_branch" if condition.reshape(-1)[0] else "else_branch")
    return node.run_subgraph(branch, ())


def _if_on_device(node: Node, condition: Tensor) -> list[Tensor]:
    """An If whose condition is computed on the device (``torch.cond`` exported, on a value
    of the data): both branches run and the condition selects each output, as
    ``torch.where`` would, so the program stays one fixed sequence of kernels. The branches
    must give outputs of the same shapes and dtypes (tensors, not sequences)."""
    then = node.run_subgraph(node.attr("then_branch"), ())
    other = node.run_subgraph(node.attr("else_branch"), ())
    for a, b in zip(then, other):
        if not all(hasattr(v, "shape") for v in (a, b)) or tuple(a.shape) != tuple(b.shape) \
                or a.dtype != b.dtype:
            described = [f"{tuple(v.shape)} {v.dtype}" if hasattr(v, "shape") else
                         type(v).__name__ for v in (a, b)]
            raise node.fail(
                f"its condition is computed on the device, and its branches give "
                f"{described[0]} and {described[1]}; gingham then runs both branches and "
                "selects, which needs outputs of the same shapes and dtypes")
    flag = condition.reshape(())
    return [T.where(flag, node.lift(a), node.lift(b)) for a, b in zip(then, other)]


def _stacked(node: Node, values: Sequence, axis: int):
    """Per-iteration values stacked along a new ``axis``: on the host if they all are."""
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack(values, axis)
    return T.stack([node.lift(v) for v in values], axis)


def _known(node: Node, value, what: str) -> bool:
    if isinstance(value, np.ndarray):
        return bool(value.reshape(-1)[0])
    raise node.fail(f"its {what} is computed on the device; gingham unrolls a Loop only when "
                    "its trip count and conditions are known when the model is traced")


@converter("Loop")
def _loop(node: Node):
    trip_count, condition = node.input(0), node.input(1)
    if trip_count is not None and not isinstance(trip_count, np.ndarray):
        raise node.fail("its trip count is computed on the device; gingham unrolls a Loop only "
                        "when its trip count and conditions are known when the model is traced")
    limit = None if trip_count is None else int(trip_count.reshape(-1)[0])
    running = True if condition is None else _known(node, condition, "condition")
    if limit is None and condition is None:
        raise node.fail("it has neither a trip count nor a condition: it would never end")
    states = list(node.inputs[2:])
    scanned: list[list] = []
    iteration = 0
    while running and (limit is None or iteration < limit):
        if iteration == MAX_UNROLLED_ITERATIONS:
            raise node.fail(f"it ran {iteration} iterations without its condition turning "
                            "false; gingham unrolls loops, and stops there")
        outputs = node.run_subgraph(node.attr("body"), [
            np.asarray(iteration, np.int64), np.asarray(running), *states])
        states = outputs[1:1 + len(states)]
        scanned.append(outputs[1 + len(states):])
        if condition is not None:  # without a condition input the body's is ignored
            running = _known(node, outputs[0], "condition (the body's first output)")
        iteration += 1
    n_scanned = len(node.attr("body").output) - 1 - len(states)
    if n_scanned and not scanned:
        raise node.fail("it ran no iteration, so its scan outputs' shapes are unknown")
    return states + [_stacked(node, [step[k] for step in scanned], 0) for k in range(n_scanned)]


def _scan(node: Node, states: list, sequences: list, attributes: dict) -> list:
    """One ``Scan`` (opset 9's form) of the body over ``sequences``: the final states, then
    the scan outputs."""
    count = len(sequences)
    in_axes = [a % v.ndim for a, v in zip(attributes.get("scan_input_axes", [0] * count),
                                          sequences)]
    in_directions = attributes.get("scan_input_directions", [0] * count)
    lengths = {v.shape[a] for v, a in zip(sequences, in_axes)}
    if len(lengths) != 1:
        raise ValueError(f"ONNX Scan node {node.name!r}: the scanned axes have different "
                         f"lengths {sorted(lengths)}")
    (steps,) = lengths
    body = node.attr("body")
    scanned: list[list] = []
    for t in range(steps):
        slices = [v[(slice(None),) * a + ((steps - 1 - t) if reverse else t,)]
                  for v, a, reverse in zip(sequences, in_axes, in_directions)]
        outputs = node.run_subgraph(body, [*states, *slices])
        states = outputs[:len(states)]
        scanned.append(outputs[len(states):])
    n_scanned = len(body.output) - len(states)
    if n_scanned and not steps:
        raise node.fail("its scanned axis is empty, so its scan outputs' shapes are unknown")
    out_axes = attributes.get("scan_output_axes", [0] * n_scanned)
    out_directions = attributes.get("scan_output_directions", [0] * n_scanned)
    results = []
    for k in range(n_scanned):
        values = [step[k] for step in scanned]
        if out_directions[k]:  # each value prepended: the last iteration's first
            values = values[::-1]
        results.append(_stacked(node, values, out_axes[k] % (values[0].ndim + 1)))
    return states + results


@converter("Scan")
def _scan_node(node: Node):
    count = node.attr("num_scan_inputs")
    if node.opset >= 9:
        inputs = list(node.inputs)
        return _scan(node, inputs[:len(inputs) - count], inputs[len(inputs) - count:],
                     node.attributes)
    # Opset 8: a batch axis first on every input, the sequence axis after it, and an
    # optional sequence_lens input first; each batch entry is scanned on its own.
    lengths, inputs = node.input(0), list(node.inputs[1:])
    states, sequences = inputs[:len(inputs) - count], inputs[len(inputs) - count:]
    if lengths is not None and (not isinstance(lengths, np.ndarray) or np.any(
            lengths != sequences[0].shape[1])):
        raise node.fail("sequence_lens shorter than the sequences are not supported")
    attributes = {"scan_input_directions": node.attr("directions", [0] * count)}
    batches = [_scan(node, [s[b] for s in states], [v[b] for v in sequences], attributes)
               for b in range(sequences[0].shape[0])]
    return [_stacked(node, [batch[k] for batch in batches], 0)
            for k in range(len(batches[0]))]
