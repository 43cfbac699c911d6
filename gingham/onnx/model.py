"""Loading an ONNX model and running it: :func:`load` and :class:`OnnxModel`.

    model = gingham.onnx.load("resnet18.onnx", device="cpu")
    (logits,) = model(images)                          # gingham Tensors, on the device
    (logits,) = model.run(None, {"input": images})     # onnxruntime's spelling: NumPy arrays

Loading checks the model (``onnx.checker``), reads the opset of the default domain, puts the
initializers on the device and refuses a model with ops gingham does not convert, naming every
such op type at once. A call with a new input signature (shapes, dtypes) traces the graph through
:func:`gingham.jit`: the converters run once, on placeholder tensors, and later calls with that
signature replay the compiled program without running Python per op.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from ..errors import OnnxError, UnsupportedOpError
from ..frontend import tensor as T
from ..frontend.jit import jit
from ..frontend.tensor import Tensor
from .layout import channels_last_on, converter_inputs, graph_layout, held
from .ops import CONVERTERS, HOST_INPUTS, UNSUPPORTED_REASONS, Node

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
        if key not in CONVERTERS or node.domain not in ("", "ai.onnx"):
            missing.setdefault(key, node.name or f"#{index}")
    return missing


class OnnxModel:
    """An ONNX graph ready to run on one gingham device (see the module docstring).

    ``input_names`` and ``output_names`` are the graph's, in order; ``opset`` is the default
    domain's version; ``traces`` counts the input signatures compiled so far."""

    def __init__(self, model, device: str | None = None, layout: str = "auto") -> None:
        onnx = _onnx()
        from ..devices import get_device

        onnx.checker.check_model(model)
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
        self._constants = {initializer.name: _initializer(initializer, self.device)
                           for initializer in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in self._constants]
        self.output_names = [o.name for o in graph.output]
        self._inputs = {i.name: i for i in graph.input if i.name in self.input_names}
        # Inputs that give shapes, axes or pads (a Reshape's shape fed by the caller): their
        # values are known on the host and select the traced step, as shapes do.
        self._host_inputs = {name for _, proto in graph_nodes(graph)
                             for position in HOST_INPUTS.get(proto.op_type, ())
                             if position < len(proto.input)
                             for name in [proto.input[position]] if name in self._inputs}
        self._steps: dict[tuple, Any] = {}

    @property
    def traces(self) -> int:
        return sum(step.traces for step in self._steps.values())

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
        from onnx.helper import get_attribute_value

        for index, proto in enumerate(graph.node):
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
            results = CONVERTERS[proto.op_type](node)
            if not isinstance(results, (list, tuple)):
                results = [results]
            for name, result in zip(proto.output, results):
                if name:
                    values[name] = held(result) if on_held else result

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


def _initializer(proto, device: str):
    """An initializer's value: small integer arrays (shapes, axes) and non-numeric ones stay
    on the host, every other one is put on the device."""
    from onnx import numpy_helper

    array = numpy_helper.to_array(proto)
    small_integer = array.dtype.kind in "iub" and array.size <= _HOST_INITIALIZER_SIZE
    if small_integer or array.dtype.kind not in "fiub":
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
