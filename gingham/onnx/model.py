"""Loading an ONNX model and running it: :func:`load` and :class:`OnnxModel`.

    model = gingham.onnx.load("resnet18.onnx", device="cpu")
    (logits,) = model(images)                          # gingham Tensors, on the device
    (logits,) = model.run(None, {"input": images})     # onnxruntime's spelling: NumPy arrays

Loading checks the model (``onnx.checker``), inlines its model-local functions, reads the
opset of the default domain, puts the initializers on the device and refuses a model with ops gingham does not convert, naming every
such op type at once. A call with a new input signature (shapes, dtypes) traces the graph through
:func:`gingham.jit`: the converters run once, on placeholder tensors, and later calls with that
signature replay the compiled program without running Python per op.

A graph with value-shaped ops (``NonZero``, ``Unique``, ``NonMaxSuppression``: their results'
shapes depend on values; :mod:`gingham.onnx.ops_value_shaped`) runs in segments, as
onnxruntime runs it: the nodes before such an op are one compiled program, the op's inputs are
read back to the host (a synchronisation and a copy: ``GINGHAM_DEBUG=1`` names each), the op
runs with NumPy, and the nodes after it are the next compiled program, traced once per
distinct shape of what the op produced and replayed for a repeat of it. A graph without such
ops is one compiled program, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..config import debug_print
from ..errors import OnnxError, UnsupportedOpError
from ..frontend import tensor as T
from ..frontend.jit import jit
from ..frontend.tensor import Tensor
from .layout import channels_last_on, converter_inputs, graph_layout, held
from .ops import CONVERTERS, HOST_INPUTS, HOST_OPS, UNSUPPORTED_REASONS, Node

# Initializers of at most this many elements of an integer type are kept on the host as well
# (they are shapes, axes, pads: the converters fold them); every other one lives on the device.
_HOST_INITIALIZER_SIZE = 64


def _onnx():
    try:
        import onnx
    except ImportError as error:  # the core does not need onnx; this frontend does
        raise ImportError("gingham.onnx needs the onnx package: pip install 'gingham[onnx]'") \
            from error
    return onnx


def load(model, device: str | None = None, layout: str = "auto") -> "OnnxModel":
    """An :class:`OnnxModel` from a path, bytes, or an ``onnx.ModelProto``, on ``device``
    (default: the default device). ``layout`` is where the image ops run: ``"auto"``
    channels-last on CPUs (faster there) and as the graph (NCHW) on GPUs, or ``"NHWC"`` /
    ``"NCHW"`` (:mod:`gingham.onnx.layout`); inputs and outputs are the graph's either way.

    A graph with value-shaped ops (``NonZero``, ``Unique``, ``NonMaxSuppression``: a
    detector's last steps) runs in compiled segments cut at each such op, and each costs a
    read-back of its inputs to the host and a synchronisation per call (``GINGHAM_DEBUG=1``
    names them); the segment after it compiles once per distinct shape of its results.

        model = gingham.onnx.load("mlp.onnx", device="opencl:0")
    """
    onnx = _onnx()
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    elif isinstance(model, (bytes, bytearray)):
        model = onnx.load_from_string(bytes(model))
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"gingham.onnx.load: expected a path, bytes or onnx.ModelProto, got "
                        f"{type(model).__name__}")
    return OnnxModel(model, device, layout)


def default_opset(model) -> int:
    """The opset version the model imports for the default ONNX domain."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise OnnxError("the model imports no opset of the default ONNX domain")


def graph_nodes(graph):
    """``(index, node)`` for every node of ``graph`` and, recursively, of the graphs in its
    nodes' attributes (``If`` branches, ``Loop`` bodies), each after the node holding it."""
    from onnx import AttributeProto

    for index, node in enumerate(graph.node):
        yield index, node
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                yield from graph_nodes(attribute.g)
            elif attribute.type == AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    yield from graph_nodes(subgraph)


def unsupported_ops(graph) -> dict[str, str]:
    """Each op type of ``graph`` (its subgraphs' included) that has no converter, with the
    name of one node using it."""
    missing: dict[str, str] = {}
    for index, node in graph_nodes(graph):
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        known = key in CONVERTERS or key in HOST_OPS
        if not known or node.domain not in ("", "ai.onnx"):
            missing.setdefault(key, node.name or f"#{index}")
    return missing


def _names_read(node) -> list[str]:
    """The value names ``node`` reads, its subgraphs' reads of enclosing scopes included (a
    superset: names a subgraph defines itself are listed too, and are never live outside)."""
    from onnx import AttributeProto

    names = list(node.input)
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.type == AttributeProto.GRAPH else \
            list(attribute.graphs) if attribute.type == AttributeProto.GRAPHS else []
        for subgraph in graphs:
            for _, inner in graph_nodes(subgraph):
                names.extend(inner.input)
            names.extend(output.name for output in subgraph.output)
    return names


@dataclass(frozen=True)
class _Segment:
    """Nodes ``[start, stop)`` of the top-level graph, compiled as one program; ``imports``
    the values they read that earlier segments, host ops or the caller give (in order of
    first use), ``exports`` the values they make that later nodes or the graph's outputs
    read. ``boundary`` is the value-shaped node at ``stop`` that follows them, if any."""

    start: int
    stop: int
    imports: tuple[str, ...]
    exports: tuple[str, ...]
    boundary: Any = None


def _segments(graph, outer: set[str]) -> list[_Segment] | None:
    """The top-level graph cut at each value-shaped node, or None if it has none (it is then
    traced whole). ``outer`` names the values known before the first node: the graph's inputs
    (not its initializers, which every segment captures)."""
    nodes = list(graph.node)
    cuts = [i for i, node in enumerate(nodes) if node.op_type in HOST_OPS]
    if not cuts:
        return None
    reads = [_names_read(node) for node in nodes]
    graph_outputs = [output.name for output in graph.output]
    segments, available, start = [], set(outer), 0
    for stop in cuts + [len(nodes)]:
        made = [name for node in nodes[start:stop] for name in node.output if name]
        later = {name for names in reads[stop:] for name in names} | set(graph_outputs)
        imports = dict.fromkeys(name for names in reads[start:stop] for name in names
                                if name in available)
        segments.append(_Segment(start, stop, tuple(imports),
                                 tuple(dict.fromkeys(n for n in made if n in later)),
                                 nodes[stop] if stop < len(nodes) else None))
        available.update(made)
        if stop < len(nodes):
            available.update(name for name in nodes[stop].output if name)
        start = stop + 1
    return segments


class OnnxModel:
    """An ONNX graph ready to run on one gingham device (see the module docstring).

    ``input_names`` and ``output_names`` are the graph's, in order; ``opset`` is the default
    domain's version; ``traces`` counts the input signatures compiled so far."""

    def __init__(self, model, device: str | None = None, layout: str = "auto") -> None:
        onnx = _onnx()
        from ..devices import get_device

        onnx.checker.check_model(model)
        if model.functions:
            # Model-local functions (the TorchScript exporter's export_modules_as_functions,
            # other tools' composite ops): each call is replaced by the function's nodes, so
            # the graph holds ONNX's own ops only.
            from onnx.inliner import inline_local_functions

            model = inline_local_functions(model)
        graph = model.graph
        missing = unsupported_ops(graph)
        if missing:
            listed = ", ".join(f"{op} (node {name!r})" for op, name in sorted(missing.items()))
            reasons = "".join(f"; {op}: {UNSUPPORTED_REASONS[op]}" for op in sorted(missing)
                              if op in UNSUPPORTED_REASONS)
            raise UnsupportedOpError(f"the ONNX model uses {len(missing)} op type(s) that "
                                     f"gingham does not support: {listed}{reasons}")
        self.opset = default_opset(model)
        self.device = get_device(device).id
        self.layout = layout
        self.channels_last = channels_last_on(layout, get_device(device).info.kind)
        self._graph = graph
        # Values that give shapes, axes or pads (a Reshape's shape fed by the caller, or made
        # by a value-shaped op): known on the host, they select the traced program by value,
        # as shapes do. An initializer among them stays on the host whatever its dtype (a
        # Resize's float scales).
        by_value = {proto.input[position] for _, proto in graph_nodes(graph)
                    for position in HOST_INPUTS.get(proto.op_type, ())
                    if position < len(proto.input)}
        self._constants = {initializer.name: _initializer(initializer, self.device,
                                                          initializer.name in by_value)
                           for initializer in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in self._constants]
        self.output_names = [o.name for o in graph.output]
        self._inputs = {i.name: i for i in graph.input if i.name in self.input_names}
        self._host_inputs = {name for name in by_value if name in self._inputs}
        self._steps: dict[tuple, Any] = {}
        # Value-shaped ops cut the graph into segments (None: it is traced whole); their
        # results enter the next segment as arguments (by shape) unless they are such values.
        self._segments = _segments(graph, set(self.input_names))
        self._passed_by_value = by_value
        self._host_made = {name for segment in self._segments or ()
                           if segment.boundary is not None for name in segment.boundary.output}
        self._segment_steps: dict[tuple, Any] = {}

    @property
    def traces(self) -> int:
        segments = sum(step.compiled.traces for step in self._segment_steps.values())
        return sum(step.traces for step in self._steps.values()) + segments

    def __repr__(self) -> str:
        return (f"OnnxModel(inputs={self.input_names}, outputs={self.output_names}, "
                f"opset={self.opset}, device={self.device!r}, layout={self.layout!r})")

    def __call__(self, *inputs) -> tuple[Tensor, ...]:
        """The graph's outputs (gingham Tensors, on the device) for ``inputs``, given in the
        order of :attr:`input_names` as NumPy arrays or Tensors."""
        if len(inputs) != len(self.input_names):
            raise TypeError(f"the ONNX model takes {len(self.input_names)} input(s) "
                            f"{self.input_names}, got {len(inputs)}")
        host, arguments = {}, []
        for name, value in zip(self.input_names, inputs):
            value = self._checked(name, value)
            if name in self._host_inputs:
                host[name] = value.numpy() if isinstance(value, Tensor) else np.array(value)
            else:
                arguments.append(value)
        if self._segments is not None:
            named = dict(zip([n for n in self.input_names if n not in host], arguments))
            return self._run_segments({**host, **named})
        key = tuple((name, value.dtype.str, value.shape, value.tobytes())
                    for name, value in host.items())
        # A sequence input's length and an empty optional select the traced step too
        # (gingham.jit sees their tensors only, flattened).
        key += tuple(len(value) if isinstance(value, list) else value is None
                     for value in arguments)
        step = self._steps.get(key)
        if step is None:
            step = self._steps[key] = self._traced_step(host)
        return tuple(step(*arguments))

    def _traced_step(self, host: dict[str, np.ndarray]):
        """The jit-compiled graph for these values of the host inputs."""
        def step(*inputs: Tensor) -> list[Tensor]:
            return self._trace(host, inputs)
        return jit(step, device=self.device)

    def _run_segments(self, values: dict[str, Any]) -> tuple[Tensor, ...]:
        """The graph's outputs, its segments run in turn (each compiled, per signature of
        what it imports) and, between two, the value-shaped op on the host."""
        values[""] = None  # an omitted optional input
        for index, segment in enumerate(self._segments):
            if segment.stop > segment.start:
                values.update(self._run_segment(index, segment, values))
            if segment.boundary is not None:
                values.update(self._run_host_op(segment.boundary, segment.stop, values))
        return tuple(self._on_device(graph_layout(values[name])) for name in self.output_names)

    def _on_device(self, value):
        """An output of a graph run in segments as a tensor on the device: a host op's result
        (or a host constant) is copied there; a sequence as a list of such."""
        if isinstance(value, list):
            return [self._on_device(v) for v in value]
        return T.tensor(value, device=self.device) if isinstance(value, np.ndarray) else value

    def _run_segment(self, index: int, segment: _Segment, values: dict[str, Any]) -> dict:
        """``segment``'s exports, by its compiled program for this signature: device values
        and host ops' results are its arguments (by shape), host constants select it by
        value, as the host inputs of a whole graph do."""
        passed, fixed = {}, {}
        for name in segment.imports:
            value = values[name]
            # (arrays a host op made or the caller gave, unless they give shapes)
            array_argument = isinstance(value, np.ndarray) and (
                name in self._host_made or name in self._inputs) \
                and name not in self._passed_by_value
            if isinstance(value, (Tensor, list)) or array_argument:
                passed[name] = value
            else:
                fixed[name] = value
        key = (index, tuple((name, _signature(value)) for name, value in passed.items()),
               tuple((name, _value_key(value)) for name, value in fixed.items()))
        step = self._segment_steps.get(key)
        if step is None:
            step = self._segment_steps[key] = self._segment_step(segment, list(passed), fixed)
        return step(*passed.values())

    def _segment_step(self, segment: _Segment, names: list[str], fixed: dict[str, Any]):
        """The compiled program of ``segment`` for one signature, as a function of the
        ``names`` values giving its exports by name. Exports that fold on the host (shapes)
        are kept from the trace: the signature fixes them."""
        on_host: dict[int, Any] = {}  # int keys: jit's check of captured state skips them

        def step(*inputs):
            values: dict[str, Any] = dict(self._constants)
            values.update(fixed)
            values.update(zip(names, inputs))
            values[""] = None
            self._convert_nodes(self._graph.node, segment.start, segment.stop, values)
            computed = []
            for position, name in enumerate(segment.exports):
                value = graph_layout(values[name])
                if isinstance(value, (Tensor, list)):
                    computed.append(self._device_output(value))
                else:
                    on_host[position] = value
            # (gingham.jit compiles a program of at least one output.)
            return computed or [self._device_output(np.zeros((), np.float32))]

        compiled = jit(step, device=self.device)

        def run(*inputs) -> dict[str, Any]:
            results = iter(compiled(*inputs))
            return {name: on_host[p] if p in on_host else next(results)
                    for p, name in enumerate(segment.exports)}

        run.compiled = compiled
        return run

    def _run_host_op(self, proto, index: int, values: dict[str, Any]) -> dict[str, Any]:
        """The outputs of the value-shaped node ``proto``, computed with NumPy from its inputs
        read back from the device."""
        from onnx.helper import get_attribute_value

        inputs = [_on_host(values[name] if name in values else self._constants[name])
                  for name in proto.input]
        name = proto.name or f"#{index}"
        shapes = ", ".join(str(v.shape) for v in inputs if v is not None)
        debug_print(1, f"onnx: {proto.op_type} node {name!r} reads {shapes} back to the host "
                       "(its result's shape depends on values) and runs there")
        attributes = {a.name: _plain(get_attribute_value(a)) for a in proto.attribute}
        node = Node(proto.op_type, name, inputs, attributes, self.opset, len(proto.output),
                    self.device)
        results = HOST_OPS[proto.op_type](node)
        return {output: result for output, result in zip(proto.output, results) if output}

    def run(self, output_names: Sequence[str] | None, input_feed: dict) -> list[np.ndarray]:
        """onnxruntime's ``InferenceSession.run``: the named outputs (all with ``None``) as
        NumPy arrays, for inputs given by name."""
        unknown = set(input_feed) - set(self.input_names)
        absent = [name for name in self.input_names if name not in input_feed]
        if unknown or absent:
            raise ValueError(f"the ONNX model's inputs are {self.input_names}; got "
                             f"{sorted(input_feed)}")
        outputs = dict(zip(self.output_names,
                           self(*(input_feed[name] for name in self.input_names))))
        names = self.output_names if output_names is None else list(output_names)
        for name in names:
            if name not in outputs:
                raise ValueError(f"{name!r} is not an output of the ONNX model "
                                 f"({self.output_names})")
        return [_as_numpy(outputs[name]) for name in names]

    def _checked(self, name: str, value):
        """``value`` as an argument of the traced step; a dtype or a fixed size that differs
        from the graph's declaration is an error (symbolic sizes take any value). A sequence
        input is a list of such arguments, an empty optional None."""
        declared = self._inputs[name].type
        if declared.HasField("optional_type"):
            if value is None:
                return None
            declared = declared.optional_type.elem_type
        if declared.HasField("sequence_type"):
            if not isinstance(value, (list, tuple)):
                raise TypeError(f"ONNX input {name!r} is a sequence: pass a list of arrays, got "
                                f"{type(value).__name__}")
            element = declared.sequence_type.elem_type.tensor_type
            return [self._checked_tensor(name, v, element, shape=False) for v in value]
        return self._checked_tensor(name, value, declared.tensor_type)

    def _checked_tensor(self, name: str, value, declared, shape: bool = True):
        """One tensor of input ``name`` checked against its declared ``TypeProto.Tensor``
        (and its shape, where ``shape``); on this model's device if a Tensor."""
        from onnx.helper import tensor_dtype_to_np_dtype

        if not isinstance(value, Tensor):
            value = np.asarray(value)
        dtype = np.dtype(tensor_dtype_to_np_dtype(declared.elem_type))
        if value.dtype != dtype:
            raise TypeError(f"ONNX input {name!r} must be {dtype}, got {value.dtype}")
        if shape and declared.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None
                    for d in declared.shape.dim]
            if len(dims) != len(value.shape) or any(
                    d is not None and d != s for d, s in zip(dims, value.shape)):
                shown = tuple(d if d is not None else "?" for d in dims)
                raise ValueError(f"ONNX input {name!r} must have shape {shown}, got "
                                 f"{tuple(value.shape)}")
        if isinstance(value, Tensor) and value.device != self.device:
            value = value.to(self.device)
        return value

    def _trace(self, host: dict[str, np.ndarray], inputs: Sequence[Tensor]) -> list[Tensor]:
        """The graph converted op by op on ``inputs`` (placeholders while gingham.jit traces)
        and the ``host`` inputs' values."""
        values: dict[str, Any] = dict(self._constants)
        values.update(host)
        values.update(zip([n for n in self.input_names if n not in host], inputs))
        values[""] = None  # an omitted optional input
        self._convert(self._graph, values)
        return [self._device_output(graph_layout(values[name])) for name in self.output_names]

    def _convert(self, graph, values: dict[str, Any]) -> None:
        """``graph``'s nodes converted in order, each result added to ``values`` (which holds
        the graph's inputs and every value of the scopes enclosing it)."""
        self._convert_nodes(graph.node, 0, len(graph.node), values)

    def _convert_nodes(self, nodes, start: int, stop: int, values: dict[str, Any]) -> None:
        """``nodes[start:stop]`` converted in order, as :meth:`_convert` converts a graph's."""
        from onnx.helper import get_attribute_value

        for index in range(start, stop):
            proto = nodes[index]
            attributes = {a.name: _plain(get_attribute_value(a)) for a in proto.attribute}
            inputs, on_held = converter_inputs(
                proto.op_type, [values[name] for name in proto.input], self.channels_last)
            # A subgraph's initializers are made once per node: a Loop runs its body once per
            # iteration (the attributes, and so the subgraphs, live until the next node).
            made: dict[int, dict[str, Any]] = {}
            node = Node(proto.op_type, proto.name or f"#{index}", inputs, attributes,
                        self.opset, len(proto.output), self.device, self.channels_last,
                        lambda subgraph, bound=(), made=made: self._subgraph(
                            subgraph, values, bound, made))
            if proto.op_type in HOST_OPS:
                results = self._folded_host_op(node)
            else:
                results = CONVERTERS[proto.op_type](node)
            if not isinstance(results, (list, tuple)):
                results = [results]
            for name, result in zip(proto.output, results):
                if name:
                    values[name] = held(result) if on_held else result

    @staticmethod
    def _folded_host_op(node: Node) -> list:
        """A value-shaped node met while tracing (in a subgraph: segments cut the top-level
        graph only): folded on the host if its inputs are known there, else refused."""
        if any(isinstance(v, Tensor) or isinstance(graph_layout(v), Tensor)
               for v in node.inputs if v is not None):
            raise UnsupportedOpError(
                f"ONNX {node.op_type} node {node.name!r}: its result's shape depends on values "
                "computed on the device, inside a subgraph (an If branch, a Loop or Scan "
                "body); gingham runs such ops between compiled segments of the top-level "
                "graph only")
        return HOST_OPS[node.op_type](node)

    def _subgraph(self, graph, scope: dict[str, Any], inputs: Sequence,
                  made: dict[int, dict[str, Any]]) -> list:
        """The outputs (in the graph's layout) of ``graph``, a node's graph attribute, its
        inputs bound to ``inputs`` and the values of ``scope`` visible to its nodes; ``made``
        keeps the graph's initializers, by graph, for the node's next run of it."""
        if id(graph) not in made:
            made[id(graph)] = {i.name: _initializer(i, self.device) for i in graph.initializer}
        values = dict(scope)
        values.update(made[id(graph)])
        values.update(zip([i.name for i in graph.input], inputs))
        self._convert(graph, values)
        return [graph_layout(values[output.name]) for output in graph.output]

    def _device_output(self, value) -> Tensor:
        """An output as a computed tensor: a host constant or an input passed straight through
        becomes a copy computed by the program (a traced step returns computed tensors); a
        sequence as a list of such, an empty optional as None."""
        if value is None or isinstance(value, list):
            return value if value is None else [self._device_output(v) for v in value]
        if isinstance(value, np.ndarray):
            value = T.tensor(value, device=self.device)
        return value.clone() if value.is_leaf else value


def _as_numpy(value):
    """An output as NumPy: an array, a list of arrays (a sequence) or None (an empty
    optional)."""
    if value is None or isinstance(value, list):
        return value if value is None else [v.numpy() for v in value]
    return value.numpy()


def _on_host(value):
    """A value as a NumPy array (None stays None): a device tensor is read back."""
    return value.numpy() if isinstance(value, Tensor) else value


def _signature(value) -> tuple:
    """What selects a segment's program of an argument: shape and dtype (per element of a
    sequence)."""
    if isinstance(value, list):
        return ("sequence",) + tuple(_signature(v) for v in value)
    return (tuple(value.shape), str(value.dtype))


def _value_key(value):
    """What selects a segment's program of a host constant: its value."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _initializer(proto, device: str, host: bool = False):
    """An initializer's value: small integer arrays (shapes, axes), non-numeric ones and
    those ``host`` asks for (inputs that must be known on the host) stay on the host, every
    other one is put on the device."""
    from onnx import numpy_helper

    array = numpy_helper.to_array(proto)
    small_integer = array.dtype.kind in "iub" and array.size <= _HOST_INITIALIZER_SIZE
    if host or small_integer or array.dtype.kind not in "fiub":
        return array
    return T.tensor(array, device=device)


def _plain(value):
    """An attribute value with ONNX's bytes strings decoded and repeated fields as lists."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


__all__ = ["load", "OnnxModel", "default_opset", "graph_nodes",
           "unsupported_ops"]
