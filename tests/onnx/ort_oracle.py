"""onnxruntime as the ONNX tests' oracle: models declared at an IR version it reads, its
outputs, and gingham's outputs compared with them.

    model = ort_oracle.make_model(graph, 21)
    got, want = ort_oracle.both(model, feed, device)
    ort_oracle.assert_close(got, want, [o.name for o in model.graph.output], rtol=1e-5)
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

import gingham.onnx


def make_model(graph: onnx.GraphProto, opset: int) -> onnx.ModelProto:
    """``graph`` in the default domain's ``opset``, declaring the oldest IR version that has
    it, not the installed onnx package's newest (onnxruntime 1.30 refuses the IR 14 that onnx
    1.23's make_model writes)."""
    imports = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=imports,
                             ir_version=helper.find_min_ir_version_for(imports))


def run_onnxruntime(model: onnx.ModelProto, feed: dict, names=None) -> list[np.ndarray]:
    """onnxruntime's CPU provider's outputs (``names``, or all) for ``feed``."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(names, feed)


def both(model: onnx.ModelProto, feed: dict, device: str, names=None):
    """(gingham's outputs on ``device``, onnxruntime's) for ``feed``."""
    want = run_onnxruntime(model, feed, names)
    got = gingham.onnx.load(model, device=device).run(names, feed)
    return got, want


def assert_close(got, want, names, *, rtol: float, atol: float = 0.0,
                 check_dtype: bool = True) -> None:
    """Each output of ``got`` as ``want``'s: its shape, its dtype and its values."""
    for name, g, w in zip(names, got, want):
        g = np.asarray(g)
        assert g.shape == w.shape, name
        assert not check_dtype or g.dtype == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
