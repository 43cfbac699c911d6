"""``keras.ops.math`` on gingham tensors (the rest raises NotImplementedError)."""

from __future__ import annotations

from ._unsupported import unsupported_module_getattr
from .core import convert_to_tensor, stop_gradient
from .numpy import _float


def rsqrt(x): return _float(x).rsqrt()
def erf(x): return _float(x).erf()
def erfc(x): return 1.0 - _float(x).erf()


def logsumexp(x, axis=None, keepdims=False):
    x = _float(convert_to_tensor(x))
    shift = stop_gradient(x.amax(axis, keepdim=True))
    total = (x - shift).exp().sum(dim=axis, keepdim=True).log() + shift
    return total if keepdims else total.squeeze(axis)


__getattr__ = unsupported_module_getattr(__name__, "math")
