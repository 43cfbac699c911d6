"""``keras.ops.linalg`` for gingham: gingham.linalg's factorisations (Cholesky, LU with
partial pivoting, triangular substitution, Householder QR, Jacobi eigh and SVD) and what rests
on them (lstsq, pinv, matrix_rank), differentiable and inside compiled steps, on every device.
``qr`` of a matrix too large to unroll (``min(m, n) > gingham.linalg.MAX_SIZE``; Keras'
Orthogonal initializer asks for such ones, eagerly) is computed on the host with NumPy outside
a compiled step. ``eig`` of a general matrix is complex-valued, which gingham has no dtype for:
it raises NotImplementedError (``eigh`` serves symmetric matrices).

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
    """``(q, r)`` of ``x`` (``[..., M, N]``) in ``x``'s dtype: gingham.linalg.qr (LAPACK's
    signs, as NumPy's), or NumPy's on the host for a matrix too large to unroll, eagerly."""
    if mode not in ("reduced", "complete"):
        raise ValueError(f"`mode` argument value not supported. Expected one of {{'reduced', "
                         f"'complete'}}. Received: mode={mode}")
    x = convert_to_tensor(x)
    if min(x.shape[-2:]) <= gl.MAX_SIZE:
        return tuple(gl.qr(_float(x), mode))
    if current_trace() is not None:
        raise NotImplementedError(
            f"linalg.qr of {x.shape[-2]} x {x.shape[-1]} matrices inside a compiled step is not "
            f"implemented by gingham's Keras backend (gingham.linalg unrolls at most "
            f"min(M, N) = {gl.MAX_SIZE}; outside a step it runs on the host)")
    q, r = np.linalg.qr(convert_to_numpy(x).astype(np.float64), mode=mode)
    return convert_to_tensor(q, keras_dtype(x)), convert_to_tensor(r, keras_dtype(x))


def eigh(x):
    """``(eigenvalues ascending, eigenvectors)`` of symmetric ``x``, of its lower triangle."""
    return tuple(gl.eigh(_float(x)))


def eig(x):
    raise NotImplementedError(
        "linalg.eig is not implemented by gingham's Keras backend: a general matrix's "
        "eigenvalues are complex, which gingham has no dtype for (linalg.eigh serves "
        "symmetric matrices)")


def svd(x, full_matrices=True, compute_uv=True):
    x = _float(x)
    if not compute_uv:
        return gl.svdvals(x)
    return tuple(gl.svd(x, full_matrices=full_matrices))


def lstsq(a, b, rcond=None):
    """NumPy's ``lstsq(a, b, rcond)[0]``: QR for full-rank ``a``; with ``rcond``, NumPy's
    cutoff of small singular values, by the pseudo-inverse (as Keras' torch backend)."""
    a, b = _float_pair(a, b)
    if rcond is not None:
        vector = b.ndim == a.ndim - 1
        solution = gl.pinv(a, rtol=rcond) @ (b.unsqueeze(-1) if vector else b)
        return solution.squeeze(-1) if vector else solution
    return gl.lstsq(a, b).solution


def matrix_rank(x, tol=None):
    """NumPy's ``matrix_rank``: ``tol`` is an absolute cutoff; int32."""
    return gl.matrix_rank(_float(x), atol=tol).astype(np.int32)


def pinv(x, rcond=None):
    return gl.pinv(_float(x), rtol=rcond)


__getattr__ = unsupported_module_getattr(__name__, "linalg")
