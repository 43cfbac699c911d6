"""Recurrent ONNX models through gingham.onnx, on every device: PyTorch's LSTM, GRU and RNN
exported by ``torch.onnx.export`` (compared with the torch modules), and hand-built LSTM, GRU
and RNN nodes with the attributes exporters rarely emit (``sequence_lens``, ``clip``,
``input_forget``, other activations, ``layout`` 1), compared with a NumPy implementation of
ONNX's equations written here, one sequence at a time. Also control flow: ``If`` with a
condition known when the model is traced or computed on the device, against NumPy.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import gingham  # noqa: E402
import gingham.onnx  # noqa: E402


class Recurrent(torch.nn.Module):
    """A 2-layer bidirectional LSTM, a 2-layer bidirectional GRU on its outputs and a ReLU RNN
    on those, batch first: every output and final state is an output of the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = torch.nn.GRU(10, 3, num_layers=2, bidirectional=True, batch_first=True)
        self.rnn = torch.nn.RNN(6, 4, nonlinearity="relu", batch_first=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, g = self.gru(y)
        w, _ = self.rnn(z)
        return y, h, c, z, g, w


def test_exported_recurrent_layers_match_pytorch(device):
    torch.manual_seed(0)
    module = Recurrent().eval()
    names = ["y", "h", "c", "z", "g", "w"]
    batch_axes = {"x": {0: "batch"}, "y": {0: "batch"}, "h": {1: "batch"}, "c": {1: "batch"},
                  "z": {0: "batch"}, "g": {1: "batch"}, "w": {0: "batch"}}
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(2, 6, 4),), buffer, dynamo=False,
                          input_names=["x"], output_names=names, dynamic_axes=batch_axes,
                          opset_version=17)
    proto = onnx.load_from_string(buffer.getvalue())
    assert {n.op_type for n in proto.graph.node} >= {"LSTM", "GRU", "RNN"}
    model = gingham.onnx.load(proto, device=device)
    rng = np.random.default_rng(0)
    for batch in (2, 3):  # the exported batch and another: the initial states follow it
        x = rng.standard_normal((batch, 6, 4)).astype(np.float32)
        with torch.no_grad():
            expected = [t.numpy() for t in module(torch.tensor(x))]
        for name, got, want in zip(names, model.run(None, {"x": x}), expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


# -- hand-built nodes against NumPy ---------------------------------------------------------------

def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


_NUMPY_ACTIVATIONS = {
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
}


def _numpy_cell(kind, x, states, w, r, b, p, fns, clip, input_forget, linear_before_reset):
    """One step of ONNX's LSTM / GRU / RNN equations for one sequence (vectors)."""
    cut = (lambda v: v) if clip is None else (lambda v: np.clip(v, -clip, clip))
    n = r.shape[1]
    wb, rb = np.split(b, 2)
    if kind == "LSTM":
        h, c = states
        gates = w @ x + wb + r @ h + rb
        i, o, f, g = np.split(gates, 4)
        p_i, p_o, p_f = np.split(p, 3)
        i = fns[0](cut(i + p_i * c))
        f = 1 - i if input_forget else fns[0](cut(f + p_f * c))
        c = f * c + i * fns[1](cut(g))
        o = fns[0](cut(o + p_o * c))
        return o * fns[2](c), c
    if kind == "GRU":
        (h,) = states
        z = fns[0](cut(w[:n] @ x + wb[:n] + r[:n] @ h + rb[:n]))
        reset = fns[0](cut(w[n:2 * n] @ x + wb[n:2 * n] + r[n:2 * n] @ h + rb[n:2 * n]))
        if linear_before_reset:
            recurrent = reset * (r[2 * n:] @ h + rb[2 * n:])
        else:
            recurrent = r[2 * n:] @ (reset * h) + rb[2 * n:]
        candidate = fns[1](cut(w[2 * n:] @ x + wb[2 * n:] + recurrent))
        return ((1 - z) * candidate + z * h,)
    (h,) = states
    return (fns[0](cut(w @ x + wb + r @ h + rb)),)


def _numpy_recurrent(kind, attributes, x, w, r, b, lengths, initial, p):
    """ONNX's outputs (layout 0) for ``x`` [seq, batch, input]: each batch entry's sequence
    run over its own length, forwards and (the second direction, or ``reverse``) backwards."""
    steps, batch, _ = x.shape
    directions, hidden = w.shape[0], r.shape[-1]
    per = {"LSTM": 3, "GRU": 2, "RNN": 1}[kind]
    names = attributes["activations"]
    alphas, betas = list(attributes["activation_alpha"]), list(attributes["activation_beta"])
    defaults = {"HardSigmoid": (0.2, 0.5), "LeakyRelu": (0.01, None), "ScaledTanh": (1.0, 1.0)}
    fns = []
    for name in names:
        alpha, beta = defaults.get(name, (None, None))
        alpha = alphas.pop(0) if alpha is not None and alphas else alpha
        beta = betas.pop(0) if beta is not None and betas else beta
        fns.append(lambda v, f=_NUMPY_ACTIVATIONS[name], a=alpha, b=beta: f(v, a, b))
    y = np.zeros((steps, directions, batch, hidden), np.float32)
    finals = np.zeros((len(initial), directions, batch, hidden), np.float32)
    for d in range(directions):
        backwards = attributes.get("direction") == "reverse" or d == 1
        for k in range(batch):
            states = tuple(s[d, k] for s in initial)
            order = range(lengths[k])[::-1] if backwards else range(lengths[k])
            for t in order:
                states = _numpy_cell(kind, x[t, k], states, w[d], r[d], b[d], p[d],
                                     fns[d * per:(d + 1) * per], attributes.get("clip"),
                                     attributes.get("input_forget", 0),
                                     attributes.get("linear_before_reset", 0))
                y[t, d, k] = states[0]
            finals[:, d, k] = states
    return [y, *finals]


# Each node: every optional input, attributes exporters rarely write, and a batch of three
# sequences of lengths 4, 2 and 0 (a step past a sequence's end keeps the state, outputs 0).
_NODES = [
    ("LSTM", {"direction": "bidirectional", "layout": 1, "clip": 0.8, "input_forget": 1,
              "activations": ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "LeakyRelu",
                              "Tanh"],
              "activation_alpha": [0.3, 0.1], "activation_beta": [0.6]}),
    ("GRU", {"direction": "reverse", "activations": ["Sigmoid", "ScaledTanh"],
             "activation_alpha": [0.7], "activation_beta": [1.5], "clip": 2.0}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "layout": 1,
             "activations": ["HardSigmoid", "Tanh", "Sigmoid", "Relu"],
             "activation_alpha": [], "activation_beta": []}),
    ("RNN", {"direction": "bidirectional", "activations": ["Relu", "Tanh"],
             "activation_alpha": [], "activation_beta": []}),
]


def _node_model(rng, lengths):
    """One graph of the nodes of :data:`_NODES` (every input an initializer but ``x`` and
    ``sequence_lens``), and per node its attributes and input arrays."""
    steps, batch, features, hidden = 4, 3, 2, 3
    x = rng.standard_normal((steps, batch, features)).astype(np.float32)
    nodes, initializers, outputs, cases = [], [], [], []
    for index, (kind, attributes) in enumerate(_NODES):
        gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
        directions = 2 if attributes["direction"] == "bidirectional" else 1
        n_states = 2 if kind == "LSTM" else 1
        arrays = {
            "W": rng.standard_normal((directions, gates * hidden, features)),
            "R": rng.standard_normal((directions, gates * hidden, hidden)) * 0.5,
            "B": rng.standard_normal((directions, 2 * gates * hidden)) * 0.5,
            "H0": rng.standard_normal((n_states, directions, batch, hidden)),
            "P": rng.standard_normal((directions, 3 * hidden)),
        }
        arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
        layout = attributes.get("layout", 0)
        inputs = [f"x{index}" if layout else "x", f"W{index}", f"R{index}", f"B{index}",
                  "lens"] + [f"H0_{index}_{k}" for k in range(n_states)]
        if layout:
            nodes.append(helper.make_node("Transpose", ["x"], [f"x{index}"], perm=[1, 0, 2]))
        for name in ("W", "R", "B"):
            initializers.append(helper.make_tensor(
                f"{name}{index}", TensorProto.FLOAT, arrays[name].shape, arrays[name].ravel()))
        for k in range(n_states):
            state = arrays["H0"][k].transpose(1, 0, 2) if layout else arrays["H0"][k]
            initializers.append(helper.make_tensor(f"H0_{index}_{k}", TensorProto.FLOAT,
                                                   state.shape, state.ravel()))
        if kind == "LSTM":
            inputs.append(f"P{index}")
            initializers.append(helper.make_tensor(f"P{index}", TensorProto.FLOAT,
                                                   arrays["P"].shape, arrays["P"].ravel()))
        names = [f"{o}{index}" for o in ("Y", "Yh", "Yc")[:1 + n_states]]
        nodes.append(helper.make_node(kind, inputs, names, hidden_size=hidden,
                                      **{k: v for k, v in attributes.items() if v != []}))
        shapes = [(steps, directions, batch, hidden)] + [(directions, batch, hidden)] * n_states
        if layout:
            shapes = [(batch, steps, directions, hidden)] + [(batch, directions, hidden)] * n_states
        outputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                    for name, shape in zip(names, shapes)]
        cases.append((kind, attributes, arrays))
    graph = helper.make_graph(
        nodes, "recurrent",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
         helper.make_tensor_value_info("lens", TensorProto.INT32, [batch])],
        outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, x, cases


def test_recurrent_node_attributes_against_numpy(device):
    rng = np.random.default_rng(4)
    lengths = np.asarray([4, 2, 0], np.int32)
    proto, x, cases = _node_model(rng, lengths)
    got = gingham.onnx.load(proto, device=device).run(None, {"x": x, "lens": lengths})
    position = 0
    for index, (kind, attributes, arrays) in enumerate(cases):
        p = arrays["P"] if kind == "LSTM" else np.zeros_like(arrays["P"])
        expected = _numpy_recurrent(kind, attributes, x, arrays["W"], arrays["R"], arrays["B"],
                                    lengths, list(arrays["H0"]), p)
        if attributes.get("layout", 0):
            expected = [expected[0].transpose(2, 0, 1, 3)] + [
                s.transpose(1, 0, 2) for s in expected[1:]]
        for k, want in enumerate(expected):
            np.testing.assert_allclose(got[position + k], want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"node {index} ({kind}) output {k}")
        position += len(expected)


# -- If ----------------------------------------------------------------------------------------


def _if_model(condition_nodes=()):
    """``y = If(flag)``: the then branch ``relu(x) * w + 1`` (``w`` an outer initializer, the
    1 the branch's own), the else branch an If nested in it on whether x has 3 columns
    (from its shape): ``tanh(-x)``, else ``x``. ``condition_nodes`` compute the flag from x
    instead of taking it as an input."""
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["m"]),
         helper.make_node("Add", ["m", "one"], ["t"])],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])], [one])
    three = helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Tanh", ["n"], ["e"])
    nested = helper.make_node(
        "If", ["three"], ["e2"],
        then_branch=helper.make_graph(list(three), "three", [], [
            helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])]),
        else_branch=helper.make_graph([helper.make_node("Identity", ["x"], ["i"])], "other",
                                      [], [helper.make_tensor_value_info("i", TensorProto.FLOAT,
                                                                         [2, 3])]))
    else_branch = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "last"], ["columns"], axis=0),
         helper.make_node("Equal", ["columns", "three_columns"], ["three"]), nested],
        "else", [], [helper.make_tensor_value_info("e2", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("last", TensorProto.INT64, [], [1]),
         helper.make_tensor("three_columns", TensorProto.INT64, [], [3])])
    nodes = [helper.make_node("If", ["flag"], ["y"], name="choice", then_branch=then_branch,
                              else_branch=else_branch)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    if condition_nodes:
        nodes = list(condition_nodes) + nodes
    else:
        inputs.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    graph = helper.make_graph(
        nodes, "if", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w


def test_if_converts_the_branch_its_condition_picks(device):
    proto, w = _if_model()
    model = gingham.onnx.load(proto, device=device)
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    for flag, expected in ((True, np.maximum(x, 0) * w + 1), (False, np.tanh(-x))):
        (y,) = model.run(None, {"x": x, "flag": np.asarray(flag)})
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6, err_msg=str(flag))
    assert model.traces == 2  # the condition, a graph input, is part of the signature
    computed, _ = _if_model([helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
                             helper.make_node("Constant", [], ["zero"], value_float=0.0),
                             helper.make_node("Greater", ["total", "zero"], ["flag"])])
    model = gingham.onnx.load(computed, device=device)
    for x in (np.abs(x), -np.abs(x)):  # the then branch, then the else branch
        (y,) = model.run(None, {"x": x})
        expected = np.maximum(x, 0) * w + 1 if x.sum() > 0 else np.tanh(-x)
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    assert model.traces == 1  # a condition computed on the device: both branches, selected


def test_if_on_a_device_condition_needs_branches_alike(device):
    """Both branches run when the condition is computed on the device: outputs of different
    shapes are refused, naming them."""
    def branch(name: str, size: int) -> onnx.GraphProto:
        value = helper.make_tensor("value", TensorProto.FLOAT, [size], [1.0] * size)
        return helper.make_graph([helper.make_node("Constant", [], [name], value=value)], name,
                                 [], [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                                    [size])])

    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], name="pick",
                              then_branch=branch("two", 2), else_branch=branch("three", 3))]
    graph = helper.make_graph(
        nodes, "cond", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(gingham.UnsupportedOpError,
                       match=r"If node 'pick'.*branches give \(2,\) float32 and \(3,\) float32"):
        gingham.onnx.load(proto, device=device)(np.ones(2, np.float32))


# -- Scan and Loop -----------------------------------------------------------------------------


def _scan_body():
    """``state = 0.5 * state + x_t``; outputs the state and ``tanh(state)`` per step."""
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    return helper.make_graph(
        [helper.make_node("Mul", ["state", "half"], ["decayed"]),
         helper.make_node("Add", ["decayed", "x_t"], ["new_state"]),
         helper.make_node("Tanh", ["new_state"], ["squashed"])],
        "body", [helper.make_tensor_value_info("state", TensorProto.FLOAT, [2]),
                 helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("new_state", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("squashed", TensorProto.FLOAT, [2])], [half])


def test_scan_axes_and_directions_against_numpy(device):
    """x ``[2, 4]`` scanned along axis 1 backwards; the outputs stacked on axis 1, reversed."""
    scan = helper.make_node("Scan", ["s0", "x"], ["s", "y"], num_scan_inputs=1, body=_scan_body(),
                            scan_input_axes=[-1], scan_input_directions=[1],
                            scan_output_axes=[1], scan_output_directions=[1])
    graph = helper.make_graph(
        [scan], "scan", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
                         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    rng = np.random.default_rng(6)
    s0, x = (rng.standard_normal(shape).astype(np.float32) for shape in ((2,), (2, 4)))
    state, squashed = s0, []
    for t in (3, 2, 1, 0):
        state = 0.5 * state + x[:, t]
        squashed.append(np.tanh(state))
    s, y = gingham.onnx.load(proto, device=device).run(None, {"s0": s0, "x": x})
    np.testing.assert_allclose(s, state, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y, np.stack(squashed[::-1], 1), rtol=1e-5, atol=1e-6)


def test_loop_with_a_condition_computed_on_the_device_is_refused(device):
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["y_in"], ["total"], keepdims=0),
         helper.make_node("Constant", [], ["zero"], value_float=0.0),
         helper.make_node("Greater", ["total", "zero"], ["cond_out"]),
         helper.make_node("Neg", ["y_in"], ["y_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "go", "y"], ["y_final"], name="until", body=body)], "loop",
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y_final", TensorProto.FLOAT, [2])])
    model = gingham.onnx.load(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 16)]), device=device)
    y = np.asarray([1.0, -3.0], np.float32)
    (unchanged,) = model.run(None, {"go": np.asarray(False), "y": y})  # no iteration runs
    np.testing.assert_array_equal(unchanged, y)
    with pytest.raises(gingham.UnsupportedOpError,
                       match="Loop node 'until': its condition \\(the body's first output\\) "
                             "is computed on the device"):
        model.run(None, {"go": np.asarray(True), "y": y})
