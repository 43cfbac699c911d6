"""ONNX's backend interface (``onnx.backend.base.Backend``) on gingham, so that ONNX's own backend
tests, and any tool written against that interface, run models through gingham:

    import gingham.onnx.backend as backend
    rep = backend.prepare(model, device="opencl:0")     # or ONNX's "CPU" / "CUDA"
    outputs = rep.run([x])                              # NumPy arrays, in the graph's order
    (y,) = backend.run_node(node, [x], device="cpu")    # one node, as a one-node model

``device`` is a gingham device id (``"cpu"``, ``"opencl:0"``, ``"cuda:0"``, ``"reference"``) or
ONNX's device names ``"CPU"`` and ``"CUDA"`` (gingham's ``cpu`` and ``cuda:0``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ..errors import DeviceNotFoundError
from .model import OnnxModel, _as_numpy
from .model import default_opset

_ONNX_DEVICES = {"CPU": "cpu", "CUDA": "cuda:0"}


def _device_id(device: str) -> str:
    return _ONNX_DEVICES.get(device, device)


class GinghamRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns its outputs as NumPy arrays."""

    def __init__(self, model: OnnxModel) -> None:
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            return tuple(self.model.run(None, inputs))
        if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        return tuple(_as_numpy(output) for output in self.model(*inputs))


class GinghamBackend(Backend):
    """``onnx.backend.base.Backend`` running models with :class:`gingham.onnx.OnnxModel`."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> GinghamRep:
        return GinghamRep(OnnxModel(model, _device_id(device)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """``node`` run as a one-node model whose inputs are ``inputs`` (in its order)."""
        super().run_node(node, inputs, device, outputs_info, **kwargs)
        from onnx import helper

        inputs = [np.asarray(v) for v in inputs]
        names = [name for name in node.input if name]
        graph_inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(
            value.dtype), value.shape) for name, value in zip(names, inputs)]
        graph_outputs = [helper.make_empty_tensor_value_info(name) for name in node.output]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, inputs, device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        from ..devices import get_device

        try:
            get_device(_device_id(device))
        except DeviceNotFoundError:
            return False
        return True


prepare = GinghamBackend.prepare
run_model = GinghamBackend.run_model
run_node = GinghamBackend.run_node
supports_device = GinghamBackend.supports_device

__all__ = ["GinghamBackend", "GinghamRep", "prepare", "run_model", "run_node",
           "supports_device", "default_opset"]
