"""``keras.ops.linalg`` for gingham: gingham.linalg's factorisations (Cholesky, LU with
partial pivoting, triangular substitution), differentiable and inside compiled steps, on
every device; ``qr`` computed on the host with NumPy outside a compiled step (Keras'
Orthogonal initializer, the default of recurrent kernels, runs it once, eagerly; inside a step
it would be frozen at tracing, so there it raises). The ops needing singular values or
eigenvalues (svd, eig, eigh, lstsq, pinv, matrix_rank) raise NotImplementedError.

    ops.linalg.solve(a, b)   # a [..., n, n] with n <= gingham.linalg.MAX_SIZE
"""

from __future__ import annotations

import numpy as np
from keras.src.backend.common import dtypes

from ... import linalg as gl
from ...frontend.jit import current_trace
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor, keras_dtype
from .numpy import _float


def _float_pair(a, b):
    """``a`` and ``b`` as tensors of one float dtype (Keras' promotion of the two)."""
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    dtype = dtypes.result_type(keras_dtype(a), keras_dtype(b), float)
    return convert_to_tensor(a, dtype), convert_to_tensor(b, dtype)


def cholesky(x, upper=False):
    return gl.cholesky(_float(x), upper=upper)


def cholesky_inverse(x, upper=False):
    return gl.cholesky_inverse(_float(x), upper=upper)


def det(x):
    return gl.det(_float(x))


def inv(x):
    return gl.inv(_float(x))


def lu_factor(x):
    """``(lu, pivots)`` as SciPy's ``lu_factor`` (and Keras' other backends): 0-based int32
    pivots (PyTorch's and gingham.linalg's are 1-based)."""
    lu, pivots = gl.lu_factor(_float(x))
    return lu, pivots - 1


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 (Keras' name)
    return gl.norm(_float(x), ord, tuple(axis) if isinstance(axis, list) else axis, keepdims)


def solve(a, b):
    a, b = _float_pair(a, b)
    return gl.solve(a, b)


def solve_triangular(a, b, lower=False):
    a, b = _float_pair(a, b)
    if b.ndim == a.ndim - 1:  # a batch of vectors, as Keras' other backends read it
        return gl.solve_triangular(a, b.unsqueeze(-1), upper=not lower).squeeze(-1)
    return gl.solve_triangular(a, b, upper=not lower)


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
