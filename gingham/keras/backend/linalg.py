"""``keras.ops.linalg`` for gingham: ``qr`` only, computed on the host with NumPy outside a
compiled step (Keras' Orthogonal initializer, the default of recurrent kernels, runs it
once, eagerly); inside a step it would be frozen at tracing, so there it raises. The other
ops raise NotImplementedError."""

from __future__ import annotations

import numpy as np

from ...frontend.jit import current_trace
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor, keras_dtype


def qr(x, mode="reduced"):
    """``(q, r)`` of ``x`` (``[..., M, N]``), NumPy's factorisation, in ``x``'s dtype."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"`mode` argument value not supported. Expected one of {{'reduced', "
                         f"'complete'}}. Received: mode={mode}")
    if current_trace() is not None:
        raise NotImplementedError("linalg.qr inside a compiled step is not implemented by "
                                  "gingham's Keras backend yet (only eagerly, on the host)")
    x = convert_to_tensor(x)
    q, r = np.linalg.qr(convert_to_numpy(x).astype(np.float64), mode=mode)
    return convert_to_tensor(q, keras_dtype(x)), convert_to_tensor(r, keras_dtype(x))


__getattr__ = unsupported_module_getattr(__name__, "linalg")
