"""``keras.ops.math`` on gingham tensors: rsqrt, erf, logsumexp, segment_sum (the rest
raises NotImplementedError)."""

from __future__ import annotations

import numpy as np

from ...frontend.jit import current_trace
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor, scatter, stop_gradient
from .numpy import _float


def rsqrt(x): return _float(x).rsqrt()
def erf(x): return _float(x).erf()
def erfc(x): return 1.0 - _float(x).erf()


def logsumexp(x, axis=None, keepdims=False):
    x = _float(convert_to_tensor(x))
    shift = stop_gradient(x.amax(axis, keepdim=True))
    total = (x - shift).exp().sum(dim=axis, keepdim=True).log() + shift
    return total if keepdims else total.squeeze(axis)


def segment_sum(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    """``data``'s rows summed per segment id (ids outside ``[0, num_segments)``, such as
    -1, are dropped): Tile's scatter, differentiable in ``data``. Without ``num_segments``
    the count is read from the ids, so only outside a compiled step."""
    data = convert_to_tensor(data)
    segment_ids = convert_to_tensor(segment_ids)
    if num_segments is None:
        if current_trace() is not None:
            raise NotImplementedError("math.segment_sum without num_segments inside a compiled "
                                      "step is not implemented by gingham's Keras backend (its "
                                      "shape would depend on the ids)")
        num_segments = int(np.max(convert_to_numpy(segment_ids))) + 1
    positions = segment_ids.reshape(segment_ids.shape + (1,))
    return scatter(positions, data, (int(num_segments),) + data.shape[segment_ids.ndim:])


__getattr__ = unsupported_module_getattr(__name__, "math")
