"""gingham.linalg against torch.linalg (CPU, float64), forward values and gradients, on every
device.

Every op of the module runs on the same few inputs, so the forward values are one compiled
program and the gradients (``backward()`` of a random-weighted sum of every float output)
another: the factorisations unroll into many ops, and fewer, bigger programs keep the file
fast. Tolerance 1e-7: Tile rounds float literals to float32 even beside float64 tensors (see
tests/nn/test_functional.py); the values themselves agree to ~1e-13.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import gingham
from gingham import linalg
from gingham.frontend.tensor import DTypeError, ShapeError, realize, tensor

TOLERANCE = dict(rtol=1e-7, atol=1e-7)


class _TorchLinalg:
    """torch.linalg, with the two functions PyTorch keeps outside it."""

    cholesky_inverse = staticmethod(torch.cholesky_inverse)
    logdet = staticmethod(torch.logdet)

    def __getattr__(self, name):
        return getattr(torch.linalg, name)


def _inputs(n: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, n, n))
    return dict(
        G=rng.standard_normal((2, n, n)),                       # general: rows get swapped
        S=x @ x.transpose(0, 2, 1) + n * np.eye(n),             # symmetric positive-definite
        T=rng.standard_normal((2, n, n)) + n * np.eye(n),       # a triangle of it is read
        B=rng.standard_normal((2, n, 3)),
        Bt=rng.standard_normal((2, 3, n)),
        b=rng.standard_normal((2, n)),
        B2=rng.standard_normal((n, 3)),                         # batch dims broadcast
    )


def _run(lib, G, S, T, B, Bt, b, B2) -> dict:
    sign, logabsdet = lib.slogdet(G)
    lu, pivots = lib.lu_factor(G)
    lu_wide, pivots_wide = lib.lu_factor(G[:, :3, :])
    lu_tall, pivots_tall = lib.lu_factor(G[:, :, :3])
    chol = lib.cholesky(S)
    return {
        "det": lib.det(G), "sign": sign, "logabsdet": logabsdet, "logdet": lib.logdet(S),
        "inv": lib.inv(G), "solve": lib.solve(G, B), "solve_vector": lib.solve(G, b),
        "solve_broadcast": lib.solve(G, B2), "solve_right": lib.solve(G, Bt, left=False),
        "lu": lu, "pivots": pivots, "lu_wide": lu_wide, "pivots_wide": pivots_wide,
        "lu_tall": lu_tall, "pivots_tall": pivots_tall,
        "cholesky": chol, "cholesky_upper": lib.cholesky(S, upper=True),
        "cholesky_inverse": lib.cholesky_inverse(chol),
        "cholesky_inverse_upper": lib.cholesky_inverse(chol.mT, upper=True),
        "tri_lower": lib.solve_triangular(T, B, upper=False),
        "tri_upper": lib.solve_triangular(T, B2, upper=True),
        "tri_right": lib.solve_triangular(T, Bt, upper=True, left=False),
        "tri_unit": lib.solve_triangular(T, B, upper=False, unitriangular=True),
        "vnorm": lib.vector_norm(G), "vnorm_1": lib.vector_norm(G, 1, -1),
        "vnorm_inf": lib.vector_norm(G, math.inf, (1, 2), keepdim=True),
        "vnorm_-inf": lib.vector_norm(G, -math.inf, 1), "vnorm_0": lib.vector_norm(G, 0, 2),
        "vnorm_3.5": lib.vector_norm(G, 3.5, 0),
        "mnorm_fro": lib.matrix_norm(G), "mnorm_1": lib.matrix_norm(G, 1),
        "mnorm_-1": lib.matrix_norm(G, -1, keepdim=True),
        "mnorm_inf": lib.matrix_norm(G, math.inf, dim=(0, 2)),
        "mnorm_-inf": lib.matrix_norm(G, -math.inf),
        "norm": lib.norm(G), "norm_dim": lib.norm(G, dim=1, keepdim=True),
        "norm_matrix_inf": lib.norm(G[0], math.inf), "norm_vector_3": lib.norm(G[0, 0], 3),
        "norm_dims": lib.norm(G, -1, dim=(2, 1)),
    }


def test_linalg_against_torch(device):
    arrays = _inputs()
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    ours, theirs = _run(linalg, **g_in), _run(_TorchLinalg(), **t_in)
    assert ours.keys() == theirs.keys()
    realize(list(ours.values()))  # every forward output from one program
    for name, expected in theirs.items():
        value = ours[name]
        assert value.shape == tuple(expected.shape), name
        assert value.dtype == expected.detach().numpy().dtype, name
        np.testing.assert_allclose(value.numpy(), expected.detach().numpy(), err_msg=name,
                                   **TOLERANCE)

    rng = np.random.default_rng(1)
    weights = {k: rng.standard_normal(tuple(v.shape)) for k, v in theirs.items()
               if v.dtype.is_floating_point}
    sum(((ours[k] * tensor(w, device=device)).sum() for k, w in weights.items())).backward()
    sum(((theirs[k] * torch.tensor(w)).sum() for k, w in weights.items())).backward()
    realize([g_in[name].grad for name in arrays])  # one program
    for name in arrays:
        np.testing.assert_allclose(g_in[name].grad.numpy(), t_in[name].grad.numpy(),
                                   err_msg=f"d/d{name}", **TOLERANCE)


def test_singular_and_negative_determinants(device):
    """A singular matrix: det 0 and slogdet (0, -inf), as PyTorch (a zero pivot is skipped,
    not divided by); a negative determinant: logdet NaN. Float32, as models use."""
    matrices = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],   # rank 2
                         [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]],   # det -2
                         [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]],  # zero column
                        dtype=np.float32)
    a, t = tensor(matrices, device=device), torch.tensor(matrices)
    dominant = matrices[1] + 4 * np.eye(3, dtype=np.float32)
    ours = dict(det=linalg.det(a), slogdet=linalg.slogdet(a), logdet=linalg.logdet(a),
                lu=linalg.lu_factor(a),
                unpivoted=linalg.lu_factor(tensor(dominant, device=device), pivot=False))
    realize([ours["det"], ours["logdet"], *ours["slogdet"], *ours["lu"], *ours["unpivoted"]])
    expected_lu = torch.linalg.lu_factor_ex(t)  # lu_factor raises on a zero pivot
    np.testing.assert_array_equal(ours["det"].numpy(), torch.linalg.det(t).numpy())
    for got, want in zip(ours["slogdet"], torch.linalg.slogdet(t)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(ours["logdet"].numpy(), torch.logdet(t).numpy())
    np.testing.assert_allclose(ours["lu"].LU.numpy(), expected_lu.LU.numpy(), atol=1e-6)
    np.testing.assert_array_equal(ours["lu"].pivots.numpy(), expected_lu.pivots.numpy())
    # Without pivoting (PyTorch's CPU build has none to compare with): no swaps, L @ U = A.
    packed, pivots = (t.numpy() for t in ours["unpivoted"])
    np.testing.assert_array_equal(pivots, [1, 2, 3])
    product = (np.tril(packed, -1) + np.eye(3)) @ np.triu(packed)
    np.testing.assert_allclose(product, dominant, rtol=1e-6, atol=1e-6)


def test_errors():
    a = tensor(np.eye(3))
    with pytest.raises(ShapeError, match="square"):
        linalg.inv(tensor(np.ones((2, 3))))
    with pytest.raises(ShapeError, match="at least 2 dimensions"):
        linalg.det(tensor(np.ones(3)))
    with pytest.raises(DTypeError, match="floating-point"):
        linalg.det(tensor(np.eye(3, dtype=np.int32)))
    with pytest.raises(DTypeError, match="floating-point"):
        linalg.vector_norm(tensor(np.arange(3)))
    with pytest.raises(ShapeError, match="MAX_SIZE"):
        linalg.cholesky(tensor(np.eye(linalg.MAX_SIZE + 1)))
    with pytest.raises(ShapeError, match="must have 3 rows"):
        linalg.solve(a, tensor(np.ones((2, 2))))
    with pytest.raises(ShapeError, match="do not broadcast"):
        linalg.solve(tensor(np.ones((2, 3, 3))), tensor(np.ones((4, 3, 1))))
    with pytest.raises(DTypeError, match="same dtype"):
        linalg.solve(a, tensor(np.ones((3, 1), np.float32)))
    with pytest.raises(ValueError, match="order 3 is not supported"):
        linalg.matrix_norm(a, 3)
    with pytest.raises(ShapeError, match="must be 1-D or 2-D"):
        linalg.norm(tensor(np.ones((2, 2, 2))), ord=1)
    with pytest.raises(NotImplementedError, match="svdvals"):
        linalg.matrix_norm(a, "nuc")
    with pytest.raises(NotImplementedError, match="linalg.svd "):
        linalg.svd(a)
    assert gingham.linalg is linalg
