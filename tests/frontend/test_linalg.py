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
    # The exact answers (PyTorch 2.13's; 2.11's LU leaves 3.6e-7 for the first det)
    sign, log_magnitude = np.array([0.0, -1.0, 0.0]), np.array([-np.inf, np.log(2.0), -np.inf])
    np.testing.assert_allclose(ours["det"].numpy(), [0.0, -2.0, 0.0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ours["slogdet"][0].numpy(), sign)
    np.testing.assert_allclose(ours["slogdet"][1].numpy(), log_magnitude, rtol=1e-6)
    np.testing.assert_array_equal(ours["logdet"].numpy(), [-np.inf, np.nan, -np.inf])
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
    with pytest.raises(ValueError, match="mode must be"):
        linalg.qr(a, mode="full")
    with pytest.raises(ValueError, match="UPLO"):
        linalg.eigh(a, UPLO="X")
    with pytest.raises(ValueError, match="driver"):
        linalg.lstsq(a, a, driver="gelsx")
    with pytest.raises(ShapeError, match="must have 3 rows"):
        linalg.lstsq(a, tensor(np.ones((2, 1))))
    with pytest.raises(TypeError, match="integer"):
        linalg.matrix_power(a, 1.5)
    with pytest.raises(ValueError, match="at least 2 tensors"):
        linalg.multi_dot([a])
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        linalg.multi_dot([a, tensor(np.ones((2, 2)))])
    with pytest.raises(ShapeError, match="pivots"):
        linalg.lu_solve(a, tensor(np.ones(2, np.int32)), a)
    with pytest.raises(ShapeError, match="size 3"):
        linalg.cross(tensor(np.ones((3, 2))), tensor(np.ones((3, 2))))
    assert gingham.linalg is linalg


# -- QR, eigh, SVD and what rests on them --------------------------------------------------------


def _spectral_inputs() -> dict[str, np.ndarray]:
    """Matrices with well-separated spectra: eigenvector and singular-vector gradients are
    ill-conditioned for close eigen- or singular values (``1 / (w_i - w_j)``), in PyTorch too."""
    rng = np.random.default_rng(2)

    def orthogonal(n: int) -> np.ndarray:
        return np.linalg.qr(rng.standard_normal((2, n, n)))[0]

    q4, q3, q5 = orthogonal(4), orthogonal(3), orthogonal(5)
    noise = 0.01 * rng.standard_normal((2, 4, 4))
    return dict(
        H=q4 @ np.diag([-2.0, 0.5, 1.5, 4.0]) @ q4.transpose(0, 2, 1) + noise,  # one triangle
        W=q5[:, :, :3] @ np.diag([5.0, 2.0, 0.7]) @ q3.transpose(0, 2, 1),     # tall, 5 x 3
        G=rng.standard_normal((2, 4, 4)) + 2 * np.eye(4),
        B=rng.standard_normal((2, 5, 2)),
        V3=rng.standard_normal((2, 4, 3)),
    )


def _spectral_run(top, la, H, W, G, B, V3) -> dict:
    """Sign-free views of the factorisations (eigen- and singular vectors have arbitrary
    signs: their squares, reconstructions and projections are compared) and what rests on
    them; each SVD or eigh is a sizeable program, so each form is called once.
    ``top``/``la``: gingham and gingham.linalg, or torch and torch.linalg."""
    w, V = la.eigh(H)
    w_upper, V_upper = la.eigh(H, UPLO="U")
    U, S, Vh = la.svd(W, full_matrices=False)
    old_U, old_S, old_V = top.svd(W.mT, some=False)          # wide, full: V completed
    q, r = la.qr(W)
    q_wide, r_wide = la.qr(W.mT)
    q_full, r_full = la.qr(W, mode="complete")
    reflectors, tau = top.geqrf(W.detach())
    lstsq = la.lstsq(W, B, driver="gelsd")
    return {
        "eigvals": w, "eigvecs^2": V * V, "eigvals_upper": w_upper,
        "eigvecs_upper^2": V_upper * V_upper,
        "svd_S": S, "svd_U^2": U * U, "svd_Vh^2": Vh * Vh, "svd_projector": U @ U.mT,
        "old_svd_S": old_S, "old_svd_U^2": old_U * old_U, "old_svd_VtV": old_V.mT @ old_V,
        "old_svd_reconstructed": (old_U * old_S.unsqueeze(-2)) @ old_V[..., :3].mT,
        "qr_Q": q, "qr_R": r, "qr_wide_Q": q_wide, "qr_wide_R": r_wide,
        "qr_r": la.qr(G, mode="r").R, "qr_complete_Q": q_full, "qr_complete_R": r_full,
        "old_qr_R": top.qr(G, some=False).R, "geqrf_a": reflectors, "geqrf_tau": tau,
        "householder_product": la.householder_product(reflectors, tau),
        "orgqr": top.orgqr(reflectors, tau),
        "pinv": la.pinv(W), "pinv_hermitian": la.pinv(H + H.mT, hermitian=True),
        "pinverse": top.pinverse(G),
        "lstsq": la.lstsq(W, B, driver="gels").solution,
        "lstsq_min_norm": la.lstsq(W.mT, B[:, :3], driver="gels").solution,
        "lstsq_vector": la.lstsq(G, V3[..., 0], driver="gels").solution,
        "lstsq_gelsd": lstsq.solution, "lstsq_residuals": lstsq.residuals,
        "lstsq_rank": lstsq.rank, "lstsq_singular_values": lstsq.singular_values,
        "nuclear": la.matrix_norm(W, "nuc"), "spectral": la.matrix_norm(G, -2, dim=(0, 2)),
    }


def _lu_and_products_run(top, la, H, W, G, B, V3) -> dict:
    """The LU family in its other forms, the _ex variants, powers, exp and products."""
    LU, pivots = la.lu_factor(G)
    P, L, U = la.lu(G[:, :, :3])
    Pu, Lu, Uu = top.lu_unpack(LU, pivots)
    spd = G @ G.mT
    chol, chol_info = la.cholesky_ex(spd)
    inverse, inv_info = la.inv_ex(G)
    return {
        "matrix_power_3": la.matrix_power(G, 3), "matrix_power_-2": la.matrix_power(G, -2),
        "matrix_power_0": la.matrix_power(G, 0), "old_matrix_power": top.matrix_power(G, 1),
        "matrix_exp": top.matrix_exp(G),
        "lu_P": P, "lu_L": L, "lu_U": U, "lu_unpack_P": Pu, "lu_unpack_L": Lu,
        "lu_unpack_U": Uu, "lu_solve": la.lu_solve(LU, pivots, V3),
        "lu_solve_adjoint": la.lu_solve(LU, pivots, V3, adjoint=True),
        "lu_solve_right": la.lu_solve(LU, pivots, V3.mT, left=False),
        "old_lu_solve": top.lu_solve(V3, *top.lu(G)),
        "cholesky_ex": chol, "cholesky_info": chol_info, "inv_ex": inverse, "inv_info": inv_info,
        "cholesky_solve": top.cholesky_solve(V3, chol),
        "cholesky_solve_upper": top.cholesky_solve(V3, chol.mT, upper=True),
        "triangular_solve": top.triangular_solve(V3, G).solution,
        "triangular_solve_t": top.triangular_solve(V3, G, upper=False, transpose=True).solution,
        "multi_dot": la.multi_dot([G[0], V3[0], V3[1].mT, G[1, 0]]),
        "multi_dot_row": la.multi_dot([G[0, 0], V3[0]]),
        "vander": la.vander(G[0]), "vander_N": la.vander(G[0, 0], N=3),
        "cross": la.cross(V3[..., :3, :], G[:1, 1:, :3]),
        "cross_dim": la.cross(V3[:, :3], V3[:, 1:], dim=1),
        "vecdot": la.vecdot(G, V3[..., :1].mT),
    }


# PyTorch has no gradient for the complete QR of a tall matrix, for mode='r' or for a full
# SVD; lstsq's singular values come without one (the others skipped have none).
_NO_TORCH_GRADIENT = {"qr_complete_Q", "qr_complete_R", "qr_r", "old_svd_S", "old_svd_U^2",
                      "old_svd_VtV", "old_svd_reconstructed"}


@pytest.mark.filterwarnings("ignore:torch.*deprecated")  # the older spellings are compared
@pytest.mark.parametrize("run", [_spectral_run, _lu_and_products_run])
def test_against_torch_with_gradients(device, run):
    """Forward values and gradients against PyTorch (float64), one forward and one gradient
    program per ``run``. Gradients come from autodiff through the unrolled rotations and
    reflections: accurate here because the spectra are well separated."""
    arrays = _spectral_inputs()
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    ours, theirs = run(gingham, linalg, **g_in), run(torch, torch.linalg, **t_in)
    assert ours.keys() == theirs.keys()
    realize(list(ours.values()))
    for name, expected in theirs.items():
        value = ours[name]
        assert value.shape == tuple(expected.shape), name
        assert value.dtype == expected.detach().numpy().dtype, name
        np.testing.assert_allclose(value.numpy(), expected.detach().numpy(), err_msg=name,
                                   **TOLERANCE)

    rng = np.random.default_rng(3)
    weights = {k: rng.standard_normal(tuple(v.shape)) for k, v in theirs.items()
               if v.requires_grad and k not in _NO_TORCH_GRADIENT}
    sum(((ours[k] * tensor(w, device=device)).sum() for k, w in weights.items())).backward()
    sum(((theirs[k] * torch.tensor(w)).sum() for k, w in weights.items())).backward()
    names = [name for name in arrays if t_in[name].grad is not None]
    realize([g_in[name].grad for name in names])
    for name in names:
        np.testing.assert_allclose(g_in[name].grad.numpy(), t_in[name].grad.numpy(),
                                   err_msg=f"d/d{name}", **TOLERANCE)


def test_spectral_float32_and_failures(device):
    """Float32 at n = 8 (the sweeps of ``jacobi_sweeps`` converge: eigenvalues to float32
    accuracy, eigenvectors that rebuild the matrix), a rank-deficient matrix (its singular
    values, ``pinv``, ``matrix_rank``), the ``info`` of a failed Cholesky or a singular LU, and
    ``matrix_exp`` of a large norm (7 squarings), against PyTorch."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    arrays = dict(
        S=(x + x.T) / 2,
        R=(rng.standard_normal((2, 6, 3)) @ rng.standard_normal((2, 3, 5))).astype(np.float32),
        N=np.array([[[4, 2, 0], [2, 1, 0], [0, 0, 1]], [[1, 0, 0], [0, 2, 1], [0, 1, 3]]],
                   np.float32),                          # leading minor 2 singular; SPD
        Z=np.array([[[1, 2, 3], [2, 4, 6], [1, 0, 1]], [[0, 1, 0], [1, 0, 0], [0, 0, 0]]],
                   np.float32),                          # U[2, 2] = 0 (info 2); U[3, 3] = 0
        E=(30 * rng.standard_normal((3, 3))).astype(np.float32),
    )

    def run(la, S, R, N, Z, E):
        return dict(eigh=la.eigh(S), svdvals=la.svdvals(R), rank=la.matrix_rank(R),
                    pinv=la.pinv(R), cholesky_info=la.cholesky_ex(N).info,
                    inv_info=la.inv_ex(Z).info, matrix_exp=la.matrix_exp(E))

    ours = run(linalg, **{k: tensor(v, device=device) for k, v in arrays.items()})
    theirs = run(torch.linalg, **{k: torch.tensor(v) for k, v in arrays.items()})
    eigenvalues, eigenvectors = ours.pop("eigh")
    ours["eigh"] = eigenvalues
    theirs["eigh"] = theirs["eigh"].eigenvalues
    reconstructed = (eigenvectors * eigenvalues.unsqueeze(-2)) @ eigenvectors.mT
    realize([*ours.values(), reconstructed])
    for name, expected in theirs.items():
        assert ours[name].dtype == expected.numpy().dtype, name
        scale = max(1.0, float(np.abs(expected.numpy()).max()))  # exp's entries reach ~1e20
        np.testing.assert_allclose(ours[name].numpy(), expected.numpy(), rtol=2e-5,
                                   atol=2e-5 * scale, err_msg=name)
    np.testing.assert_allclose(reconstructed.numpy(), arrays["S"], atol=1e-5)
