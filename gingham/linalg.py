"""``gingham.linalg``: PyTorch's ``torch.linalg`` for gingham tensors, on every device.

Every function is written with gingham's tensor ops (slices, elementwise selects, products,
reductions), so it runs wherever a Tile program runs and its gradient comes from the Tile
autodiff of the whole graph, with no hand-written rule:

    a = gingham.tensor(np.random.rand(4, 4) + 4 * np.eye(4), device="cpu", requires_grad=True)
    x = gingham.linalg.solve(a, b)            # Gaussian elimination with partial pivoting
    gingham.linalg.slogdet(a).logabsdet.backward()

The factorisations are unrolled over their ``n`` pivot steps, each step a handful of ops on the
whole ``[..., n, n]`` batch, so a program grows linearly with ``n``: they are meant for the small
matrices of models (covariances, small systems, determinants of a few dozen rows) and refuse
``n`` above :data:`MAX_SIZE` rather than generate a giant program. Shapes are broadcast over
leading (batch) dims as in PyTorch.

Where PyTorch raises on a value (a singular matrix for ``inv`` or ``solve``, a matrix that is
not positive-definite for ``cholesky``) gingham cannot know without reading the device, which a
compiled step must not do: the result holds ``inf`` or ``NaN`` instead. ``det`` and ``slogdet``
of a singular matrix are 0 and ``(0, -inf)`` as in PyTorch (a zero pivot is skipped, as
LAPACK's ``getrf`` does).

``qr`` is unrolled over Householder reflections; ``eigh`` and ``svd`` over a fixed number of
Jacobi sweeps (:func:`jacobi_sweeps`, measured to converge for ``n <= MAX_SIZE`` in float32
and float64), each sweep ``n - 1`` rounds of ``n / 2`` simultaneous rotations. SVD is
one-sided Jacobi rather than ``eigh`` of ``A^T A``: measured with NumPy on 8 x 6 matrices, the
smallest singular value at condition 1e6 (float64) was off by 2e-5 relative through the Gram
matrix and by 2e-11 one-sided (float32 at condition 1e3: 9e-3 against 2e-5). Their gradients
come from autodiff through the rotations: accurate for well-separated eigen- and singular
values, ill-conditioned for close ones (as any eigenvector gradient is). ``pinv``, ``lstsq``,
``matrix_rank`` and ``matrix_norm``'s ``'nuc'``, 2 and -2 rest on them.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .frontend.indexing import sort, take_along_dim
from .frontend.tensor import (DTypeError, ShapeError, Tensor, cat, diagonal, eye, stack,
                              tensor, tril, triu, where, zeros, _dim)
from .frontend.tensor import cross as _cross
from .tile import builder
from .tile import dtypes as dt

# The largest n of an n x n factorisation. An LU step is ~20 ops, so n = 32 unrolls to ~650
# ops (plus its gradient). Measured on the C backend (2 shared cores): det, slogdet, solve,
# inv, lu_factor and cholesky of [2, 8, 8] float64 in one program compiled in ~8 s, their
# gradients in ~5 s; PoCL takes ~3x longer. Larger systems belong to a library on the host.
MAX_SIZE = 32


class SlogdetResult(NamedTuple):
    """What :func:`slogdet` returns, as ``torch.return_types.linalg_slogdet``."""

    sign: Tensor
    logabsdet: Tensor


class LUFactorResult(NamedTuple):
    """What :func:`lu_factor` returns, as ``torch.return_types.linalg_lu_factor``."""

    LU: Tensor
    pivots: Tensor


# -- checks and small helpers -------------------------------------------------------------------


def _matrix(op: str, A, name: str = "A", square: bool = True) -> Tensor:
    """``A`` checked to be a floating-point ``[..., m, n]`` tensor (square unless told),
    whose factorisation is small enough to unroll."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: {name} must be a gingham Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise ShapeError(f"{op}: {name} must have at least 2 dimensions, not shape {A.shape}")
    if not dt.is_float(A.dtype):
        raise DTypeError(f"{op}: {name} must be a floating-point tensor, not "
                         f"{dt.dtype_name(A.dtype)}")
    m, n = A.shape[-2:]
    if square and m != n:
        raise ShapeError(f"{op}: {name} must be batches of square matrices, but they are "
                         f"{m} by {n} matrices (shape {A.shape})")
    if min(m, n) > MAX_SIZE:
        raise ShapeError(f"{op}: {m} x {n} matrices are too large for gingham.linalg, which "
                         f"unrolls a factorisation over its pivot steps (at most "
                         f"gingham.linalg.MAX_SIZE = {MAX_SIZE}); factorise on the host")
    return A


def _keep_entries(v: Tensor, keep: Callable, fill: float = 0, name: str = "linalg") -> Tensor:
    """``v`` where ``keep(i)`` holds of the coordinate of its last dim, else ``fill``."""
    last = v.ndim - 1
    return v._elementwise(lambda a: builder.select(keep(builder.index(a, last)), a, fill), [],
                          name)


def _stop_gradient(x: Tensor) -> Tensor:
    """``x`` outside autodiff, as a graph op: ``Tensor.detach`` would compute ``x`` on the
    spot, which a function traced by gingham.jit must not do."""
    return x._elementwise(builder.stop_gradient, [], "stop_gradient")


def _eye_like(A: Tensor) -> Tensor:
    """The identity of ``A``'s shape, dtype and device (batched as ``A``), outside autodiff."""
    rows, cols = A.ndim - 2, A.ndim - 1
    kind = dt.dtype_name(A.dtype)
    return _stop_gradient(A._elementwise(lambda a: builder.cast(
        builder.select(builder.index(a, rows).eq(builder.index(a, cols)), 1, 0), kind),
        [], "eye"))


def _outer(u: Tensor, v: Tensor) -> Tensor:
    """``u[..., :, None] * v[..., None, :]``."""
    return u.unsqueeze(-1) * v.unsqueeze(-2)


def _batch_shape(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of the batch dims (all but the last two) of matrices' shapes."""
    try:
        return tuple(np.broadcast_shapes(*(s[:-2] for s in shapes)))
    except ValueError:
        raise ShapeError(f"{op}: the batch dimensions of shapes {list(shapes)} do not "
                         "broadcast") from None


def _same_dtype(op: str, A: Tensor, B: Tensor) -> None:
    if A.dtype != B.dtype:
        raise DTypeError(f"{op}: A and B must have the same dtype, not "
                         f"{dt.dtype_name(A.dtype)} and {dt.dtype_name(B.dtype)}")


# -- norms ----------------------------------------------------------------------------------------


def _norm_dims(op: str, x: Tensor, dim) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(x.ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    positive = tuple(_dim(op, x.shape, d) for d in dims)
    if len(set(positive)) != len(positive):
        raise ShapeError(f"{op}: dim {dim} names a dimension twice")
    return positive


def _float_input(op: str, x, dtype) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a gingham Tensor, not {type(x).__name__}")
    if dtype is not None:
        x = x.astype(dtype)
    if not dt.is_float(x.dtype):
        raise DTypeError(f"{op}: expected a floating-point tensor as input, got "
                         f"{dt.dtype_name(x.dtype)} (give dtype= to convert it)")
    return x


def vector_norm(x: Tensor, ord: float = 2, dim=None, keepdim: bool = False, *,  # noqa: A002
                dtype=None) -> Tensor:
    """``torch.linalg.vector_norm``: ``sum(|x|**ord) ** (1 / ord)`` over ``dim`` (every dim
    when None, as if ``x`` were flattened); ``ord`` ``inf``/``-inf`` are the largest/smallest
    ``|x|``, 0 counts the non-zero entries.

        gingham.linalg.vector_norm(x, dim=-1)            # the Euclidean length of each row
    """
    op = "linalg.vector_norm"
    x = _float_input(op, x, dtype)
    if isinstance(ord, str) or isinstance(ord, bool):
        raise TypeError(f"{op}: ord must be a number, not {ord!r}")
    dims = _norm_dims(op, x, dim)
    if ord == math.inf:
        return x.abs().amax(dims, keepdim)
    if ord == -math.inf:
        return x.abs().amin(dims, keepdim)
    if ord == 0:
        return (x != 0).astype(x.dtype).sum(dims, keepdim)
    if ord == 1:
        return x.abs().sum(dims, keepdim)
    if ord == 2:
        return (x * x).sum(dims, keepdim).sqrt()
    return (x.abs() ** ord).sum(dims, keepdim) ** (1.0 / ord)


def matrix_norm(A: Tensor, ord="fro", dim: Sequence[int] = (-2, -1),  # noqa: A002
                keepdim: bool = False, *, dtype=None) -> Tensor:
    """``torch.linalg.matrix_norm`` over the two dims ``dim``: ``'fro'`` (Frobenius), 1 / -1
    (largest / smallest column sum of ``|A|``), ``inf`` / ``-inf`` (row sums), ``'nuc'`` (the
    sum of the singular values) and 2 / -2 (the largest / smallest one, by :func:`svdvals`).

        gingham.linalg.matrix_norm(a, ord=1)
    """
    op = "linalg.matrix_norm"
    A = _float_input(op, A, dtype)
    if A.ndim < 2:
        raise ShapeError(f"{op}: A must have at least 2 dimensions, not shape {A.shape}")
    dims = _norm_dims(op, A, dim)
    if len(dims) != 2:
        raise ShapeError(f"{op}: dim must be a 2-tuple, not {dim!r}")
    if ord == "fro":
        return vector_norm(A, 2, dims, keepdim)
    if ord in ("nuc", 2, -2):
        return _spectral_norm(A, ord, dims, keepdim)
    if ord in (1, -1):
        summed, extreme_dim = dims  # column sums, then the extreme over the columns
    elif ord in (math.inf, -math.inf):
        extreme_dim, summed = dims
    else:
        raise ValueError(f"{op}: order {ord!r} is not supported (use 'fro', 'nuc', 1, -1, 2, -2, "
                         "inf, -inf)")
    sums = A.abs().sum(summed, keepdim=True)
    result = sums.amax(extreme_dim, True) if ord > 0 else sums.amin(extreme_dim, True)
    if keepdim:
        return result
    return result.reshape(*(s for d, s in enumerate(result.shape) if d not in dims))


def _spectral_norm(A: Tensor, ord, dims: tuple[int, int], keepdim: bool) -> Tensor:
    """The nuclear norm (``'nuc'``: the sum of the singular values), the largest (2) or the
    smallest (-2) singular value, of the matrices in ``dims``."""
    S = svdvals(A.movedim(dims, (-2, -1)))
    result = S.sum(-1) if ord == "nuc" else S[..., 0] if ord == 2 else S[..., -1]
    for d in sorted(dims) if keepdim else ():
        result = result.unsqueeze(d)
    return result


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *,  # noqa: A002
         dtype=None) -> Tensor:
    """``torch.linalg.norm``: a vector norm when ``dim`` is an int (or ``ord`` and ``dim``
    are None: the 2-norm of the flattened tensor), a matrix norm when ``dim`` is a 2-tuple;
    with ``dim`` None and ``ord`` given, ``A`` must be 1-D (vector) or 2-D (matrix).

        gingham.linalg.norm(a)                 # Frobenius norm of a matrix
        gingham.linalg.norm(a, ord=math.inf)   # the largest row sum of |a|
    """
    op = "linalg.norm"
    if dim is not None:
        dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise ShapeError(f"{op}: dim must be an int or a tuple of 1 or 2 ints, not {dim!r}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ShapeError(f"{op}: if dim is not given but ord is, the input must be 1-D or 2-D, "
                     f"not {A.ndim}-D")


# -- triangular systems and Cholesky -------------------------------------------------------------


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """``torch.linalg.solve_triangular``: ``X`` with ``A @ X = B`` (``X @ A = B`` when not
    ``left``) for triangular ``A`` ``[..., n, n]`` (only its ``upper`` or lower triangle is
    read; its diagonal taken as ones when ``unitriangular``) and ``B`` ``[..., n, k]``
    (``[..., k, n]`` when not ``left``), batch dims broadcast. Substitution, one row of ``X``
    per step, at most :data:`MAX_SIZE` rows.

        x = gingham.linalg.solve_triangular(l, b, upper=False)
    """
    op = "linalg.solve_triangular"
    A = _matrix(op, A)
    B = _matrix(op, B, "B", square=False)
    _same_dtype(op, A, B)
    if not left:
        return solve_triangular(A.mT, B.mT, upper=not upper,
                                unitriangular=unitriangular).mT
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise ShapeError(f"{op}: A {A.shape} and B {B.shape} do not fit: B must have {n} "
                         "rows (A @ X = B)")
    batch = _batch_shape(op, A.shape, B.shape)
    B = B.expand(*batch, *B.shape[-2:])
    A = triu(A) if upper else tril(A)
    rest = B
    rows: list[Tensor | None] = [None] * n
    for k in (reversed(range(n)) if upper else range(n)):
        row = rest[..., k:k + 1, :]
        if not unitriangular:
            row = row / A[..., k:k + 1, k:k + 1]
        rows[k] = row
        # The solved row leaves the others; a triangular A touches only the unsolved ones.
        rest = rest - A[..., :, k:k + 1] * row
    return cat(rows, dim=-2)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """``torch.linalg.cholesky``: the lower-triangular ``L`` with ``A = L @ L.mT`` (or
    ``U = L.mT`` when ``upper``) of symmetric positive-definite ``A`` ``[..., n, n]``, of which
    only the lower triangle is read. One column per step (at most :data:`MAX_SIZE`). A matrix
    that is not positive-definite gives NaN (PyTorch raises; gingham cannot know without
    reading the device).

        l = gingham.linalg.cholesky(a)         # a = x @ x.mT + n * I
    """
    A = _matrix("linalg.cholesky", A)
    n = A.shape[-1]
    # Only the lower triangle is read, but PyTorch's gradient is symmetric (the derivative
    # along symmetric perturbations, split evenly between A[i, j] and A[j, i]): adding
    # (D - D) for D = triu(A, 1).mT - tril(A, -1) changes no finite value and gives that split
    # (an inf above the diagonal does become NaN, where PyTorch would ignore it).
    split = triu(A, 1).mT - tril(A, -1)
    work = tril(A) + 0.5 * (split - _stop_gradient(split))
    columns = []
    for k in range(n):
        # Rows above k hold leftovers of earlier updates (work's upper part is not kept).
        column = _keep_entries(work[..., :, k], lambda i, k=k: i >= k, name="cholesky")
        column = column / column[..., k:k + 1].sqrt()
        columns.append(column.unsqueeze(-1))
        if k + 1 < n:
            work = work - _outer(column, column)
    L = cat(columns, dim=-1)
    return L.mT if upper else L


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky_inverse``: ``(L @ L.mT)^-1`` from a Cholesky factor ``L`` (``(U.mT @
    U)^-1`` when ``upper``), by two triangular solves.

        a_inv = gingham.linalg.cholesky_inverse(gingham.linalg.cholesky(a))
    """
    L = _matrix("cholesky_inverse", L)
    factor_inverse = solve_triangular(L, _eye_like(L), upper=upper)
    if upper:
        return factor_inverse @ factor_inverse.mT
    return factor_inverse.mT @ factor_inverse


# -- LU: lu_factor, solve, inv, det -------------------------------------------------------------


def _lu(M: Tensor, steps: int, pivot: bool = True) -> tuple[Tensor, Tensor]:
    """Gaussian elimination of the first ``steps`` columns of ``M`` ``[..., m, n]`` with
    partial pivoting (the first row of largest ``|M[i, k]|``, ``i >= k``, as LAPACK's
    ``idamax``): ``(packed, pivots)`` as LAPACK's ``getrf`` — the multipliers below the
    diagonal, ``U`` on and above it (whole rows swapped, so columns past ``steps`` are carried
    along: ``[A | B]`` becomes ``[LU | L^-1 P B]``) — and the 0-based int64 pivot rows
    ``[..., steps]``. A zero pivot (a column already zero below the diagonal) is skipped, as
    ``getrf`` does, so a singular matrix gets exact zeros on ``U``'s diagonal, not NaN."""
    rows, cols = M.ndim - 2, M.ndim - 1
    kind = dt.dtype_name(M.dtype)
    chosen_rows = []
    for k in range(steps):
        column = M[..., :, k]
        if pivot:
            candidates = _keep_entries(column.abs(), lambda i, k=k: i >= k, -1, "lu_factor")
            chosen = candidates.argmax(-1, keepdim=True)  # [..., 1]
            last = column.ndim - 1
            # e_k - e_chosen: a one-hot choice on the device, so nothing is read back.
            move = column._elementwise(lambda a, p, k=k: builder.cast(
                builder.select(builder.index(a, last).eq(k), 1, 0)
                - builder.select(builder.index(a, last).eq(p), 1, 0), kind),
                [chosen], "lu_factor", M.dtype)
            chosen_row = M[..., k, :] - (move.unsqueeze(-1) * M).sum(-2)
            M = M + _outer(move, chosen_row - M[..., k, :])  # swap rows k and chosen
            chosen_rows.append(chosen)
        pivot_row = M[..., k, :]
        pivot_value = pivot_row[..., k:k + 1]
        safe_pivot = where(pivot_value == 0, 1, pivot_value)
        multipliers = _keep_entries(M[..., :, k], lambda i, k=k: i > k, name="lu_factor")
        multipliers = (multipliers / safe_pivot).unsqueeze(-1)
        eliminated = _keep_entries(pivot_row, lambda j, k=k: j > k, name="lu_factor")
        M = M._elementwise(lambda a, l, u, k=k: builder.select(
            builder.logical_and(builder.index(a, cols).eq(k), builder.index(a, rows) > k),
            l, a - l * u), [multipliers, eliminated.unsqueeze(-2)], "lu_factor")
    if pivot:
        pivots = cat(chosen_rows, dim=-1)
    else:
        positions = _stop_gradient(M[..., 0, :steps])
        last = positions.ndim - 1
        pivots = positions._elementwise(lambda a: builder.index(a, last), [], "lu_factor",
                                        dt.INT64)
    return M, pivots


def _permutation_sign(pivots: Tensor, dtype) -> Tensor:
    """``(-1) ** (number of pivots that swap)`` of 0-based pivots ``[..., k]``."""
    last = pivots.ndim - 1
    kind = dt.dtype_name(np.dtype(dtype))
    flips = pivots._elementwise(lambda p: builder.cast(builder.select(
        p.eq(builder.index(p, last)), 1, -1), kind), [], "permutation_sign", np.dtype(dtype))
    return flips.prod(-1)


def lu_factor(A: Tensor, *, pivot: bool = True) -> LUFactorResult:
    """``torch.linalg.lu_factor``: ``(LU, pivots)`` of ``A`` ``[..., m, n]``, LAPACK's packed
    form (unit-lower ``L`` below the diagonal, ``U`` on and above) and the 1-based int32 rows
    swapped in at each step. Partial pivoting picks the row by a one-hot selection on the
    device; ``pivot=False`` eliminates without swaps. ``min(m, n)`` steps, at most
    :data:`MAX_SIZE`.

        LU, pivots = gingham.linalg.lu_factor(a)
    """
    A = _matrix("linalg.lu_factor", A, square=False)
    packed, pivots = _lu(A, min(A.shape[-2:]), pivot)
    return LUFactorResult(packed, (pivots + 1).astype(dt.INT32))


def _solve_broadcast(op: str, A: Tensor, B: Tensor, left: bool) -> tuple[Tensor, bool]:
    """``B`` as ``[..., n, k]`` and whether it was a batch of vectors, by PyTorch's rule: a
    vector when 1-D or when its shape is ``A.shape[:-1]``."""
    if not isinstance(B, Tensor):
        raise TypeError(f"{op}: B must be a gingham Tensor, not {type(B).__name__}")
    _same_dtype(op, A, B)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if vector:
        B = B.unsqueeze(-1) if left else B.unsqueeze(-2)
    return _matrix(op, B, "B", square=False), vector


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """``torch.linalg.solve``: ``X`` with ``A @ X = B`` (``X @ A = B`` when not ``left``) for
    square ``A`` ``[..., n, n]``, ``B`` ``[..., n, k]`` or a batch of vectors ``[..., n]``,
    batch dims broadcast: Gaussian elimination of ``[A | B]`` with partial pivoting, then
    back substitution (at most :data:`MAX_SIZE` rows). A singular ``A`` gives inf or NaN
    (PyTorch raises; gingham cannot know without reading the device).

        x = gingham.linalg.solve(a, b)
    """
    op = "linalg.solve"
    A = _matrix(op, A)
    B, vector = _solve_broadcast(op, A, B, left)
    if not left:
        X = solve(A.mT, B.mT).mT
        return X.squeeze(-2) if vector else X
    n = A.shape[-1]
    if B.shape[-2] != n:
        raise ShapeError(f"{op}: A {A.shape} and B {B.shape} do not fit: B must have {n} "
                         "rows (A @ X = B)")
    batch = _batch_shape(op, A.shape, B.shape)
    augmented = cat([A.expand(*batch, n, n), B.expand(*batch, *B.shape[-2:])], dim=-1)
    eliminated, _ = _lu(augmented, n)
    X = solve_triangular(eliminated[..., :n], eliminated[..., n:], upper=True)
    return X.squeeze(-1) if vector else X


def inv(A: Tensor) -> Tensor:
    """``torch.linalg.inv``: the inverse of square ``A`` ``[..., n, n]`` (``solve(A, I)``).
    A singular ``A`` gives inf or NaN (PyTorch raises; gingham cannot know without reading
    the device).

        a_inv = gingham.linalg.inv(a)
    """
    A = _matrix("linalg.inv", A)
    return solve(A, _eye_like(A))


def slogdet(A: Tensor) -> SlogdetResult:
    """``torch.linalg.slogdet``: ``(sign, logabsdet)`` with ``det(A) = sign * exp(logabsdet)``
    from an LU factorisation; a singular ``A`` gives ``(0, -inf)``.

        sign, logabsdet = gingham.linalg.slogdet(a)
    """
    A = _matrix("linalg.slogdet", A)
    packed, pivots = _lu(A, A.shape[-1])
    u_diagonal = diagonal(packed, 0, -2, -1)
    sign = _permutation_sign(pivots, A.dtype) * u_diagonal.sign().prod(-1)
    return SlogdetResult(sign, u_diagonal.abs().log().sum(-1))


def det(A: Tensor) -> Tensor:
    """``torch.linalg.det``: the determinant of square ``A`` ``[..., n, n]`` (the product of
    ``U``'s diagonal of an LU factorisation, signed by its row swaps); 0 for a singular ``A``.

        gingham.linalg.det(a)
    """
    A = _matrix("linalg.det", A)
    packed, pivots = _lu(A, A.shape[-1])
    return _permutation_sign(pivots, A.dtype) * diagonal(packed, 0, -2, -1).prod(-1)


def logdet(A: Tensor) -> Tensor:
    """``torch.logdet``: ``log(det(A))``, NaN where the determinant is negative and ``-inf``
    where it is 0.

        gingham.linalg.logdet(a)
    """
    sign, logabsdet = slogdet(_matrix("logdet", A))
    return where(sign < 0, math.nan, logabsdet)


# -- QR: Householder reflections --------------------------------------------------------------


class QRResult(NamedTuple):
    """What :func:`qr` returns, as ``torch.return_types.linalg_qr``."""

    Q: Tensor
    R: Tensor


def _householder(A: Tensor) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
    """LAPACK's ``geqrf`` unrolled: ``A`` ``[..., m, n]`` reduced to upper-triangular ``R`` by
    ``min(m, n)`` reflections ``H_k = I - tau_k v_k v_k^T`` (``v_k[k] = 1``, zero above ``k``),
    returned as ``(R, [(v_k [..., m], tau_k [..., 1]), ...])``. The reflector of ``dlarfg``:
    ``R[k, k] = -sign(A[k, k]) * |column|``, and ``tau = 0`` (no reflection) where the column
    is already zero below the diagonal, so the signs are LAPACK's (and PyTorch's)."""
    m, n = A.shape[-2:]
    R = A
    reflectors = []
    for k in range(min(m, n)):
        column = R[..., :, k]
        alpha = column[..., k:k + 1]
        below = _keep_entries(column, lambda i, k=k: i > k, name="qr")
        below_norm2 = (below * below).sum(-1, keepdim=True)
        reflect = below_norm2 > 0
        # The safe argument keeps sqrt's gradient finite where nothing is reflected.
        norm = where(reflect, alpha * alpha + below_norm2, 1).sqrt()
        beta = where(alpha >= 0, -norm, norm)
        tau = where(reflect, (beta - alpha) / beta, 0)
        v = below / where(reflect, alpha - beta, 1) + _one_hot_like(column, k)
        R = R - _outer(v, tau * (v.unsqueeze(-1) * R).sum(-2))
        reflectors.append((v, tau))
    return triu(R), reflectors


def _one_hot_like(x: Tensor, k: int) -> Tensor:
    """``e_k`` along the last dim of ``x``, with ``x``'s shape and dtype, outside autodiff."""
    last = x.ndim - 1
    kind = dt.dtype_name(x.dtype)
    return x._elementwise(lambda a: builder.cast(
        builder.stop_gradient(builder.select(builder.index(a, last).eq(k), 1, 0)), kind), [],
        "one_hot")


def _householder_q(reflectors: list[tuple[Tensor, Tensor]], like: Tensor, m: int,
                   columns: int) -> Tensor:
    """The first ``columns`` columns of ``H_0 H_1 ... H_{k-1}`` (``m x m``), applied to the
    identity from the last reflection back (each step a rank-1 update)."""
    batch = like.shape[:-2]
    Q = eye(m, columns, dtype=like.dtype, device=like.device).expand(*batch, m, columns)
    for v, tau in reversed(reflectors):
        Q = Q - _outer(v * tau, (v.unsqueeze(-1) * Q).sum(-2))
    return Q


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """``torch.linalg.qr``: ``A = Q @ R`` for ``A`` ``[..., m, n]``, ``Q`` with orthonormal
    columns and ``R`` upper-triangular, by ``min(m, n)`` Householder reflections (LAPACK's
    signs: ``R``'s diagonal is not made positive, as in PyTorch). ``mode``: ``'reduced'``
    (``Q`` ``[..., m, k]``, ``R`` ``[..., k, n]``, ``k = min(m, n)``), ``'complete'`` (``Q``
    ``[..., m, m]``, ``R`` ``[..., m, n]``) or ``'r'`` (``R`` only; ``Q`` is empty).

        q, r = gingham.linalg.qr(a)
    """
    op = "linalg.qr"
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"{op}: mode must be 'reduced', 'complete' or 'r', not {mode!r}")
    A = _matrix(op, A, square=False)
    m, n = A.shape[-2:]
    R, reflectors = _householder(A)
    k = min(m, n)
    if mode == "r":
        return QRResult(zeros((0,), A.dtype, A.device), R[..., :k, :])
    if mode == "complete":
        return QRResult(_householder_q(reflectors, A, m, m), R)
    return QRResult(_householder_q(reflectors, A, m, k), R[..., :k, :])


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """``torch.linalg.householder_product`` (``torch.orgqr``): the first ``n`` columns of
    ``H_0 ... H_{k-1}`` for ``A`` ``[..., m, n]`` holding the reflectors below its diagonal
    (``v_i[i] = 1`` implied, as ``torch.geqrf`` packs them) and ``tau`` ``[..., k]``,
    ``k <= n <= m``.

        q = gingham.linalg.householder_product(reflectors, tau)
    """
    op = "linalg.householder_product"
    A = _matrix(op, A, square=False)
    m, n = A.shape[-2:]
    if not isinstance(tau, Tensor):
        raise TypeError(f"{op}: tau must be a gingham Tensor, not {type(tau).__name__}")
    _same_dtype(op, A, tau)
    k = tau.shape[-1] if tau.ndim else -1
    if n > m or not 0 <= k <= n or tau.shape[:-1] != A.shape[:-2]:
        raise ShapeError(f"{op}: A {A.shape} and tau {tau.shape} do not fit: A must be "
                         "[..., m, n] with m >= n and tau [..., k] with k <= n")
    reflectors = []
    for i in range(k):
        below = _keep_entries(A[..., :, i], lambda r, i=i: r > i, name="householder")
        reflectors.append((below + _one_hot_like(below, i), tau[..., i:i + 1]))
    return _householder_q(reflectors, A, m, n)


# -- eigh and svd: Jacobi rotations -----------------------------------------------------------


class EighResult(NamedTuple):
    """What :func:`eigh` returns, as ``torch.return_types.linalg_eigh``."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    """What :func:`svd` returns, as ``torch.return_types.linalg_svd``."""

    U: Tensor
    S: Tensor
    Vh: Tensor


def jacobi_sweeps(n: int, dtype) -> int:
    """The number of Jacobi sweeps :func:`eigh` and :func:`svd` unroll for ``n x n``.

    Measured with NumPy on the same rotations and ordering (random, graded and clustered
    spectra, 6 matrices per size): the off-diagonal mass falls below ``4 n eps`` of the norm
    after 1 sweep at n = 2, 3 at n = 4, 4-5 at n = 8, 6 at n = 16, 6-7 at n = 32 in float32,
    and 4, 6, 7, 9 sweeps at n = 4, 8, 16, 32 in float64 (quadratic convergence: once it
    starts, a sweep squares the off-diagonal). ``ceil(log2 n)`` plus 3 (float32 and narrower)
    or 4 (float64) covers each with a sweep to spare where it can.
    """
    extra = 4 if np.dtype(dtype).itemsize >= 8 else 3
    return max(1, math.ceil(math.log2(max(n, 2)))) + extra


def _tournament(n: int) -> list[list[tuple[int, int]]]:
    """The rounds of a round-robin tournament of ``n`` indices: each round pairs disjoint
    ``(p, q)``, so its rotations commute and apply as one matrix; ``n - 1`` rounds (``n``
    when ``n`` is odd, one index resting each round) meet every pair once."""
    size = n + n % 2
    players = list(range(size))
    rounds = []
    for _ in range(size - 1):
        pairs = [(players[i], players[size - 1 - i]) for i in range(size // 2)]
        rounds.append([(min(pair), max(pair)) for pair in pairs if max(pair) < n])
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def _round_constants(pairs: list[tuple[int, int]], n: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """A round's partner matrix (``P[i, j] = 1`` when ``i`` and ``j`` are paired) and sign
    (+1 at each pair's first index, -1 at its second, 0 where an index rests)."""
    partner, sign = np.zeros((n, n)), np.zeros(n)
    for p, q in pairs:
        partner[p, q] = partner[q, p] = 1
        sign[p], sign[q] = 1, -1
    return (tensor(partner, dtype=like.dtype, device=like.device),
            tensor(sign, dtype=like.dtype, device=like.device))


def _jacobi_rotation(G: Tensor, partner: Tensor, sign: Tensor) -> Tensor:
    """The rotation ``J`` ``[..., n, n]`` that zeroes ``G[p, q]`` of symmetric ``G`` in
    ``J^T G J`` for every pair of a round: ``t = tan(theta)`` by Golub and Van Loan's stable
    root, written without dividing by ``G[p, q]`` (``t = 0`` where it is 0 already)."""
    d = diagonal(G, 0, -2, -1)
    off = (G * partner).sum(-1)                                   # G[i, partner(i)]
    gap = sign * ((d.unsqueeze(-2) * partner).sum(-1) - d)        # G[q, q] - G[p, p]
    radius2 = gap * gap + 4 * off * off
    # The safe argument keeps sqrt's gradient finite where the pair is already diagonal.
    denominator = gap.abs() + where(radius2 > 0, radius2, 1).sqrt()
    t = 2 * where(gap >= 0, off, -off) / denominator
    c = 1 / (1 + t * t).sqrt()
    return c.unsqueeze(-1) * _eye_like(G) + (sign * t * c).unsqueeze(-1) * partner


def _symmetric_from(A: Tensor, lower: bool) -> Tensor:
    """The symmetric matrix that ``A``'s lower (or upper) triangle describes, with PyTorch's
    symmetric gradient: as in :func:`cholesky`, ``D - stop_gradient(D)`` (zero) splits the
    gradient of each off-diagonal pair evenly between ``A[i, j]`` and ``A[j, i]``."""
    if not lower:
        A = A.mT
    split = triu(A, 1).mT - tril(A, -1)
    triangle = tril(A) + 0.5 * (split - _stop_gradient(split))
    return triangle + tril(triangle, -1).mT


def _sorted_columns(values: Tensor, vectors: Tensor, descending: bool) -> tuple[Tensor, Tensor]:
    """``values`` ``[..., n]`` sorted and the columns of ``vectors`` ``[..., m, n]`` in the
    same order."""
    ordered, order = sort(values, -1, descending)
    index = order.unsqueeze(-2).expand(*vectors.shape)
    return ordered, take_along_dim(vectors, index, -1)


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:  # noqa: N803 (PyTorch's name)
    """``torch.linalg.eigh``: ``(eigenvalues, eigenvectors)`` of the symmetric matrix that
    the lower (``UPLO='L'``) or upper triangle of ``A`` ``[..., n, n]`` describes; ascending
    eigenvalues ``w`` and orthonormal columns ``V`` with ``A = V diag(w) V^T``. Cyclic Jacobi,
    :func:`jacobi_sweeps` sweeps of ``n - 1`` rounds of ``n / 2`` simultaneous rotations.
    Eigenvector signs are arbitrary (as in PyTorch, whose are LAPACK's); the gradient through
    the rotations is accurate for well-separated eigenvalues (eigenvectors of close ones are
    ill-conditioned, in PyTorch too).

        w, v = gingham.linalg.eigh(a @ a.mT)
    """
    op = "linalg.eigh"
    if UPLO not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', not {UPLO!r}")
    A = _matrix(op, A)
    n = A.shape[-1]
    work = _symmetric_from(A, UPLO == "L")
    V = _eye_like(work)
    rounds = [_round_constants(pairs, n, A) for pairs in _tournament(n)]
    for _ in range(jacobi_sweeps(n, A.dtype)):
        for partner, sign in rounds:
            J = _jacobi_rotation(work, partner, sign)
            work = J.mT @ work @ J
            V = V @ J
    return EighResult(*_sorted_columns(diagonal(work, 0, -2, -1), V, descending=False))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803 (PyTorch's name)
    """``torch.linalg.eigvalsh``: the ascending eigenvalues of :func:`eigh`.

        w = gingham.linalg.eigvalsh(a)
    """
    return eigh(A, UPLO).eigenvalues


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:
    """``torch.linalg.svd``: ``A = U diag(S) Vh`` for ``A`` ``[..., m, n]``, singular values
    ``S`` ``[..., k]`` descending (``k = min(m, n)``), ``U`` ``[..., m, m]`` and ``Vh``
    ``[..., n, n]`` (``[..., m, k]`` and ``[..., k, n]`` unless ``full_matrices``).
    One-sided Jacobi (Hestenes): rotations of column pairs of ``A`` (of ``A^T`` when wide)
    until they are orthogonal, :func:`jacobi_sweeps` sweeps; ``S`` are the column norms, which
    keeps small singular values accurate relative to ``S[0] * eps`` (the eigenvalues of
    ``A^T A`` would lose them to ``S[0]^2 * eps``). ``full_matrices`` completes ``U`` with a
    Householder QR. ``driver`` (cuSOLVER's choice in PyTorch) is accepted and ignored. Signs
    of singular vectors are arbitrary, as in PyTorch; a zero singular value gets a zero
    column of ``U`` in the reduced form. Gradients are accurate for distinct singular values.

        u, s, vh = gingham.linalg.svd(a, full_matrices=False)
    """
    op = "linalg.svd"
    A = _matrix(op, A, square=False)
    m, n = A.shape[-2:]
    wide = m < n
    work = A.mT if wide else A          # tall: [..., rows, k] with rows >= k
    rows, k = work.shape[-2:]
    V = eye(k, dtype=A.dtype, device=A.device).expand(*work.shape[:-2], k, k)
    rounds = [_round_constants(pairs, k, A) for pairs in _tournament(k)]
    for _ in range(jacobi_sweeps(k, A.dtype)):
        for partner, sign in rounds:
            J = _jacobi_rotation(work.mT @ work, partner, sign)
            work = work @ J
            V = V @ J
    squares = (work * work).sum(-2)
    nonzero = squares > 0
    S = where(nonzero, where(nonzero, squares, 1).sqrt(), 0)
    left = work / where(nonzero, S, 1).unsqueeze(-2)
    S, left = _sorted_columns(S, left, descending=True)
    _, V = _sorted_columns(squares, V, descending=True)
    if full_matrices and rows > k:
        complement = qr(left, "complete").Q[..., k:]
        left = cat([left, complement], dim=-1)
    if wide:
        return SVDResult(V, S, left.mT)
    return SVDResult(left, S, V.mT)


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """``torch.linalg.svdvals``: the descending singular values of :func:`svd`.

        s = gingham.linalg.svdvals(a)
    """
    return svd(_matrix("linalg.svdvals", A, square=False), False, driver=driver).S


# -- what rests on them: pinv, lstsq, matrix_rank ------------------------------------------------


def _cutoff(op: str, largest: Tensor, A: Tensor, atol, rtol) -> Tensor:
    """``max(atol, rtol * largest)`` with PyTorch's defaults: ``rtol = eps * max(m, n)`` when
    neither is given, 0 when only ``atol`` is."""
    if rtol is None:
        rtol = 0.0 if atol is not None else float(np.finfo(A.dtype).eps) * max(A.shape[-2:])
    cutoff = rtol * largest
    if atol is not None:
        cutoff = where(cutoff > atol, cutoff, atol)
    return cutoff


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """``torch.linalg.pinv``: the Moore-Penrose pseudo-inverse of ``A`` ``[..., m, n]`` from
    its SVD (its :func:`eigh` when ``hermitian``: only the lower triangle is read), singular
    values not above ``max(atol, rtol * S.max())`` treated as zero; ``rtol`` defaults to
    ``eps * max(m, n)`` unless ``atol`` is given.

        x = gingham.linalg.pinv(a) @ b          # the least-squares solution of minimal norm
    """
    op = "linalg.pinv"
    A = _matrix(op, A, square=hermitian)
    if hermitian:
        w, V = eigh(A)
        magnitude = w.abs()
        kept = magnitude > _cutoff(op, magnitude.amax(-1, keepdim=True), A, atol, rtol)
        inverse = where(kept, 1 / where(kept, w, 1), 0)
        return (V * inverse.unsqueeze(-2)) @ V.mT
    U, S, Vh = svd(A, full_matrices=False)
    kept = S > _cutoff(op, S[..., :1], A, atol, rtol)
    inverse = where(kept, 1 / where(kept, S, 1), 0)
    return (Vh.mT * inverse.unsqueeze(-2)) @ U.mT


def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """``torch.linalg.matrix_rank``: the int64 number of singular values (eigenvalue
    magnitudes when ``hermitian``) above ``max(atol, rtol * largest)``, ``rtol`` by default
    ``eps * max(m, n)`` unless ``atol`` is given.

        gingham.linalg.matrix_rank(a)
    """
    op = "linalg.matrix_rank"
    A = _matrix(op, A, square=hermitian)
    values = eigvalsh(A).abs() if hermitian else svdvals(A)
    largest = values.amax(-1, keepdim=True)
    return (values > _cutoff(op, largest, A, atol, rtol)).astype(dt.INT64).sum(-1)


class LstsqResult(NamedTuple):
    """What :func:`lstsq` returns, as ``torch.return_types.linalg_lstsq``."""

    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *,
          driver: str | None = None) -> LstsqResult:
    """``torch.linalg.lstsq``: the ``X`` minimising ``||A X - B||`` for ``A`` ``[..., m, n]``
    of full rank and ``B`` ``[..., m, k]`` (or ``[..., m]``), batch dims broadcast: by the QR
    of ``A`` when ``m >= n``, else the minimal-norm solution by the QR of ``A^T``. The other
    fields follow PyTorch's CPU ``driver`` (default ``'gelsy'``): ``residuals`` (the squared
    column norms of ``A X - B``) for ``m > n`` and drivers other than ``'gelsy'``, ``rank``
    (singular values above ``rcond * S.max()``) for all but ``'gels'``, ``singular_values``
    for ``'gelsd'`` and ``'gelss'``; empty where PyTorch's are. A rank-deficient ``A`` gives
    inf or NaN whatever the driver (use :func:`pinv` for those).

        x = gingham.linalg.lstsq(a, b).solution
    """
    op = "linalg.lstsq"
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"{op}: driver must be one of 'gels', 'gelsy', 'gelsd', 'gelss' (the "
                         f"CPU drivers), not {driver!r}")
    A = _matrix(op, A, square=False)
    if not isinstance(B, Tensor):
        raise TypeError(f"{op}: B must be a gingham Tensor, not {type(B).__name__}")
    _same_dtype(op, A, B)
    vector = B.ndim == A.ndim - 1
    B = _matrix(op, B.unsqueeze(-1) if vector else B, "B", square=False)
    m, n = A.shape[-2:]
    if B.shape[-2] != m:
        raise ShapeError(f"{op}: A {A.shape} and B {B.shape} do not fit: B must have {m} rows")
    batch = _batch_shape(op, A.shape, B.shape)
    A, B = A.expand(*batch, m, n), B.expand(*batch, *B.shape[-2:])
    if m >= n:
        Q, R = qr(A)
        X = solve_triangular(R, Q.mT @ B, upper=True)
    else:
        Q, R = qr(A.mT)
        X = Q @ solve_triangular(R.mT, B, upper=False)
    empty = zeros((0,), A.dtype, A.device)
    residuals = empty
    if m > n and driver != "gelsy":
        misfit = A @ X - B
        residuals = (misfit * misfit).sum(-2)
    rank = zeros((0,), dt.INT64, A.device)
    singular_values = empty
    if driver != "gels":
        S = svdvals(A)
        if rcond is None:
            rcond = float(np.finfo(A.dtype).eps) * max(m, n)
        rank = (S > rcond * S[..., :1]).astype(dt.INT64).sum(-1)
        if driver in ("gelsd", "gelss"):
            singular_values = S
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, singular_values)


# -- LU in PyTorch's other forms, and the *_ex variants with info --------------------------------


class LUResult(NamedTuple):
    """What :func:`lu` and :func:`lu_unpack` return, as ``torch.return_types.linalg_lu``."""

    P: Tensor
    L: Tensor
    U: Tensor


class InfoResult(NamedTuple):
    """What :func:`cholesky_ex` and :func:`inv_ex` return: the result and an int32 ``info``
    per matrix (0: success)."""

    result: Tensor
    info: Tensor


def _swap_rows(M: Tensor, k: int, other: Tensor) -> Tensor:
    """``M`` ``[..., m, c]`` with rows ``k`` and ``other`` (int64 ``[..., 1]``, on the device)
    swapped: a one-hot choice, so nothing is read back."""
    column = M[..., :, 0]
    last = column.ndim - 1
    kind = dt.dtype_name(M.dtype)
    move = column._elementwise(lambda a, p: builder.cast(
        builder.select(builder.index(a, last).eq(k), 1, 0)
        - builder.select(builder.index(a, last).eq(p), 1, 0), kind),
        [other], "swap_rows", M.dtype)  # e_k - e_other: no gradient (made of indices)
    other_row = M[..., k, :] - (move.unsqueeze(-1) * M).sum(-2)
    return M + _outer(move, other_row - M[..., k, :])


def _pivot_rows(pivots: Tensor, k: int) -> Tensor:
    """The 0-based int64 row swapped with row ``k``, ``[..., 1]``, of LAPACK's 1-based pivots."""
    return (pivots[..., k:k + 1] - 1).astype(dt.INT64)


def _check_pivots(op: str, LU: Tensor, pivots) -> None:  # noqa: N803 (PyTorch's name)
    if not isinstance(pivots, Tensor) or not dt.is_integer(pivots.dtype):
        raise TypeError(f"{op}: pivots must be an integer gingham Tensor (lu_factor's), not "
                        f"{type(pivots).__name__}")
    if pivots.shape != (*LU.shape[:-2], min(LU.shape[-2:])):
        raise ShapeError(f"{op}: pivots of shape {pivots.shape} do not fit LU of shape "
                         f"{LU.shape} (they must be [..., min(m, n)])")


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,  # noqa: N803
              unpack_pivots: bool = True) -> LUResult:
    """``torch.lu_unpack``: ``(P, L, U)`` with ``A = P @ L @ U`` from :func:`lu_factor`'s
    packed ``LU`` ``[..., m, n]`` and 1-based ``pivots`` ``[..., k]``: ``P`` ``[..., m, m]``
    (the row swaps applied to the identity, last first), unit-lower ``L`` ``[..., m, k]``,
    upper ``U`` ``[..., k, n]``; empty tensors for what is not unpacked.

        P, L, U = gingham.lu_unpack(*gingham.linalg.lu_factor(a))
    """
    op = "lu_unpack"
    LU = _matrix(op, LU_data, "LU_data", square=False)
    _check_pivots(op, LU, LU_pivots)
    m, n = LU.shape[-2:]
    k = min(m, n)
    empty = zeros((0,), LU.dtype, LU.device)
    L = U = P = empty
    if unpack_data:
        unit = eye(m, k, dtype=LU.dtype, device=LU.device)
        L = tril(LU[..., :, :k], -1) + unit
        U = triu(LU[..., :k, :])
    if unpack_pivots:
        P = eye(m, dtype=LU.dtype, device=LU.device).expand(*LU.shape[:-2], m, m)
        for i in reversed(range(k)):
            P = _swap_rows(P, i, _pivot_rows(LU_pivots, i))
    return LUResult(P, L, U)


def lu(A: Tensor, *, pivot: bool = True) -> LUResult:
    """``torch.linalg.lu``: ``(P, L, U)`` with ``A = P @ L @ U`` for ``A`` ``[..., m, n]``,
    by :func:`lu_factor` and :func:`lu_unpack`.

        P, L, U = gingham.linalg.lu(a)
    """
    return lu_unpack(*lu_factor(_matrix("linalg.lu", A, square=False), pivot=pivot))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803
             adjoint: bool = False) -> Tensor:
    """``torch.linalg.lu_solve``: ``X`` with ``A X = B`` (``A^T X = B`` when ``adjoint``;
    ``X A = B`` when not ``left``) from :func:`lu_factor`'s ``(LU, pivots)`` of square ``A``:
    the row swaps, then two triangular solves; batch dims broadcast.

        LU, pivots = gingham.linalg.lu_factor(a)
        x = gingham.linalg.lu_solve(LU, pivots, b)
    """
    op = "linalg.lu_solve"
    LU = _matrix(op, LU, "LU")
    _check_pivots(op, LU, pivots)
    B = _matrix(op, B, "B", square=False)
    _same_dtype(op, LU, B)
    if not left:
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    n = LU.shape[-1]
    if B.shape[-2] != n:
        raise ShapeError(f"{op}: LU {LU.shape} and B {B.shape} do not fit: B must have {n} "
                         "rows")
    batch = _batch_shape(op, LU.shape, B.shape)
    LU, B = LU.expand(*batch, n, n), B.expand(*batch, *B.shape[-2:])
    pivots = pivots.expand(*batch, n)
    if not adjoint:  # A = P L U: X = U^-1 L^-1 P^T B, P^T applying the first swap first
        for i in range(n):
            B = _swap_rows(B, i, _pivot_rows(pivots, i))
        Y = solve_triangular(LU, B, upper=False, unitriangular=True)
        return solve_triangular(LU, Y, upper=True)
    Y = solve_triangular(LU.mT, B, upper=False)                    # U^T Y = B
    X = solve_triangular(LU.mT, Y, upper=True, unitriangular=True)  # L^T Z = Y
    for i in reversed(range(n)):
        X = _swap_rows(X, i, _pivot_rows(pivots, i))
    return X


def _first_failure(failed: Tensor) -> Tensor:
    """LAPACK's ``info``: the 1-based position of the first True along the last dim, else 0,
    as int32."""
    position = failed.astype(dt.INT32).argmax(-1) + 1
    return where(failed.any(-1), position, 0).astype(dt.INT32)


def cholesky_ex(A: Tensor, *, upper: bool = False,
                check_errors: bool = False) -> InfoResult:
    """``torch.linalg.cholesky_ex``: ``(L, info)``, :func:`cholesky` and an int32 ``info``
    per matrix: 0, or the order of the first leading minor that is not positive-definite
    (``L`` then holds NaN, where PyTorch's holds a partial factor). ``check_errors=True``
    reads ``info`` back and raises ValueError on a failure (outside a compiled step only).

        L, info = gingham.linalg.cholesky_ex(a)
    """
    op = "linalg.cholesky_ex"
    A = _matrix(op, A)
    L = cholesky(A, upper=upper)
    # A pivot is positive exactly when its square root (L's diagonal) is a positive number.
    info = _first_failure(~(diagonal(L, 0, -2, -1) > 0))
    if check_errors:
        _raise_on_info(op, info, "the leading minor of order {} is not positive-definite")
    return InfoResult(L, info)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InfoResult:
    """``torch.linalg.inv_ex``: ``(inverse, info)``, :func:`inv` and an int32 ``info`` per
    matrix: 0, or the 1-based position of the first exact zero pivot of the LU factorisation
    (``A`` is singular; the inverse then holds inf or NaN). ``check_errors=True`` reads
    ``info`` back and raises ValueError on a failure (outside a compiled step only).

        a_inv, info = gingham.linalg.inv_ex(a)
    """
    op = "linalg.inv_ex"
    A = _matrix(op, A)
    packed, _ = _lu(A, A.shape[-1])
    info = _first_failure(diagonal(packed, 0, -2, -1) == 0)
    if check_errors:
        _raise_on_info(op, info, "the diagonal element {} of U is zero: A is singular")
    return InfoResult(inv(A), info)


def _raise_on_info(op: str, info: Tensor, message: str) -> None:
    """PyTorch's ``check_errors``: a ValueError naming the first failed matrix (this reads
    ``info`` from the device)."""
    values = info.numpy().reshape(-1)
    failed = np.flatnonzero(values)
    if failed.size:
        where_ = f" (batch element {failed[0]})" if info.ndim else ""
        raise ValueError(f"{op}{where_}: " + message.format(values[failed[0]]))


# -- products and powers -------------------------------------------------------------------------


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``torch.linalg.matrix_power``: ``A`` ``[..., m, m]`` to the integer power ``n`` by
    repeated squaring (``n = 0``: the identity; ``n < 0``: powers of :func:`inv`).

        gingham.linalg.matrix_power(a, 5)
    """
    op = "linalg.matrix_power"
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{op}: n must be an integer, not {n!r}")
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: A must be a gingham Tensor, not {type(A).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"{op}: A must be batches of square matrices, not shape {A.shape}")
    if n < 0:
        A, n = inv(A), -n
    result = None
    square = A
    while n:
        if n & 1:
            result = square if result is None else result @ square
        n >>= 1
        if n:
            square = square @ square
    return _eye_like(A) if result is None else result


# Taylor degree and the norm it is accurate to (remainder 1 / (q + 1)! <= eps for ||X||_1 <= 1).
_EXP_TAYLOR_DEGREE = {4: 10, 8: 18}
# Squarings unrolled (each applied only while the scaling asks for it): ||A||_1 up to 2**24.
_EXP_MAX_SQUARINGS = 24


def matrix_exp(A: Tensor) -> Tensor:
    """``torch.linalg.matrix_exp``: ``exp(A)`` of square ``A`` ``[..., n, n]`` by scaling and
    squaring: ``X = A / 2^s`` with ``s`` (per matrix, on the device) such that
    ``||X||_1 <= 1``, its Taylor series to degree 10 (float32) or 18 (float64), then ``s``
    squarings, of which :data:`_EXP_MAX_SQUARINGS` (24) are unrolled: past ``||A||_1 = 2^24``
    the result loses accuracy.

        rotation = gingham.linalg.matrix_exp(skew)    # skew = -skew.mT
    """
    op = "linalg.matrix_exp"
    A = _matrix(op, A)
    degree = _EXP_TAYLOR_DEGREE[8 if np.dtype(A.dtype).itemsize >= 8 else 4]
    norm1 = matrix_norm(_stop_gradient(A), 1, keepdim=True)
    squarings = _stop_gradient(norm1.log2().ceil().clamp(0, _EXP_MAX_SQUARINGS))
    X = A * (-squarings).exp2()
    identity = _eye_like(A)
    E = identity
    for k in range(degree, 0, -1):  # Horner: I + X/1 (I + X/2 (I + ...))
        E = identity + (X @ E) / k
    for i in range(_EXP_MAX_SQUARINGS):
        E = where(squarings > i, E @ E, E)
    return E


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.linalg.multi_dot``: the product of two or more matrices in the order of least
    arithmetic (dynamic programming on their static shapes); the first may be a 1-D row
    vector, the last a 1-D column vector.

        gingham.linalg.multi_dot([a, b, c])
    """
    op = "linalg.multi_dot"
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"{op}: expected at least 2 tensors, got {len(tensors)}")
    first_vector, last_vector = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if first_vector:
        tensors[0] = tensors[0].unsqueeze(0)
    if last_vector:
        tensors[-1] = tensors[-1].unsqueeze(-1)
    for i, t in enumerate(tensors):
        if t.ndim != 2:
            raise ShapeError(f"{op}: tensor {i} must be 2-D (the first and last may be 1-D), "
                             f"not of shape {t.shape}")
        if i and tensors[i - 1].shape[1] != t.shape[0]:
            raise ShapeError(f"{op}: tensors {i - 1} and {i} of shapes {tensors[i - 1].shape} "
                             f"and {t.shape} cannot be multiplied")
    dims = [tensors[0].shape[0]] + [t.shape[1] for t in tensors]
    count = len(tensors)
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1], s)
                for s in range(i, j))

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return tensors[i]
        return product(i, split[i][j]) @ product(split[i][j] + 1, j)

    result = product(0, count - 1)
    if first_vector:
        result = result.squeeze(0)
    return result.squeeze(-1) if last_vector else result


def vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803 (PyTorch's name)
    """``torch.linalg.vander``: ``[..., n, N]`` with columns ``x^0, x^1, ..., x^(N-1)``
    (increasing, unlike ``torch.vander``) of ``x`` ``[..., n]``, ``N`` defaulting to ``n``.

        gingham.linalg.vander(x, N=4)
    """
    op = "linalg.vander"
    if not isinstance(x, Tensor) or x.ndim < 1:
        raise ShapeError(f"{op}: x must be a tensor of at least 1 dimension")
    count = x.shape[-1] if N is None else N
    if count <= 1:
        raise ValueError(f"{op}: N must be greater than 1, not {count}")
    columns = [x * 0 + 1]
    for _ in range(count - 1):
        columns.append(columns[-1] * x)
    return stack(columns, -1)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:  # noqa: A002
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (default -1),
    broadcast.

        gingham.linalg.cross(a, b)
    """
    return _cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """``torch.linalg.vecdot``: ``sum(x * y, dim)``, broadcast.

        gingham.linalg.vecdot(a, b)          # row-wise dot products
    """
    return (x * y).sum(dim)


# -- PyTorch's older top-level spellings (torch.qr, torch.svd, torch.lu, ...) ------------------


def torch_qr(input: Tensor, some: bool = True) -> QRResult:  # noqa: A002
    """``torch.qr`` (``Tensor.qr``): :func:`qr`, reduced when ``some`` else complete."""
    return qr(input, "reduced" if some else "complete")


class TorchSVDResult(NamedTuple):
    """What ``torch.svd`` returns: ``V``, not ``Vh``."""

    U: Tensor
    S: Tensor
    V: Tensor


class GeqrfResult(NamedTuple):
    """What ``torch.geqrf`` returns."""

    a: Tensor
    tau: Tensor


def geqrf(input: Tensor) -> GeqrfResult:  # noqa: A002
    """``torch.geqrf`` (``Tensor.geqrf``): LAPACK's packed QR of ``input`` ``[..., m, n]``,
    ``R`` on and above the diagonal and the Householder vectors below it (their leading 1
    implied), and ``tau`` ``[..., min(m, n)]``; :func:`householder_product` rebuilds ``Q``.

        a, tau = gingham.geqrf(x)
    """
    A = _matrix("geqrf", input, "input", square=False)
    R, reflectors = _householder(A)
    if not reflectors:
        return GeqrfResult(R, zeros((*A.shape[:-2], 0), A.dtype, A.device))
    vectors = cat([v.unsqueeze(-1) for v, _ in reflectors], dim=-1)   # [..., m, k]
    k = vectors.shape[-1]
    below = tril(vectors, -1)
    if k < A.shape[-1]:
        below = cat([below, R[..., k:] * 0], dim=-1)
    return GeqrfResult(R + below, cat([tau for _, tau in reflectors], dim=-1))


orgqr = householder_product


def torch_svd(input: Tensor, some: bool = True,  # noqa: A002
              compute_uv: bool = True) -> TorchSVDResult:
    """``torch.svd`` (``Tensor.svd``): ``(U, S, V)`` with ``A = U diag(S) V^T``, reduced when
    ``some``; ``U`` and ``V`` zero-filled when not ``compute_uv``, as in PyTorch."""
    U, S, Vh = svd(input, full_matrices=not some)
    if not compute_uv:
        return TorchSVDResult(U * 0, S, Vh.mT * 0)
    return TorchSVDResult(U, S, Vh.mT)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:  # noqa: A002
    """``torch.pinverse`` (``Tensor.pinverse``): :func:`pinv` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


def torch_lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple[Tensor, ...]:
    """``torch.lu`` (``Tensor.lu``): :func:`lu_factor`'s ``(LU, pivots)``, and its ``infos``
    (:func:`inv_ex`'s zero-pivot positions) when ``get_infos``."""
    A = _matrix("lu", A, square=False)
    packed, pivots = _lu(A, min(A.shape[-2:]), pivot)
    result = (packed, (pivots + 1).astype(dt.INT32))
    if get_infos:
        return (*result, _first_failure(diagonal(packed, 0, -2, -1) == 0))
    return result


def torch_lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803
    """``torch.lu_solve`` (``Tensor.lu_solve``): :func:`lu_solve` with ``b`` first."""
    return lu_solve(LU_data, LU_pivots, b)


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803
    """``torch.cholesky_solve``: ``X`` with ``A X = B`` for ``A = L L^T`` (``U^T U`` when
    ``upper``) from its Cholesky factor: two triangular solves.

        x = gingham.cholesky_solve(b, gingham.linalg.cholesky(a))
    """
    L = _matrix("cholesky_solve", L, "L")
    if upper:
        return solve_triangular(L, solve_triangular(L.mT, B, upper=False), upper=True)
    return solve_triangular(L.mT, solve_triangular(L, B, upper=False), upper=True)


def nuclear_norm(input: Tensor, dim=(-2, -1), keepdim: bool = False) -> Tensor:  # noqa: A002
    """``torch.nuclear_norm``: :func:`matrix_norm` with ``ord='nuc'``."""
    if isinstance(dim, bool):  # torch.nuclear_norm(input, keepdim)
        dim, keepdim = (-2, -1), dim
    return matrix_norm(input, "nuc", dim, keepdim)


def frobenius_norm(input: Tensor, dim=(-2, -1), keepdim: bool = False) -> Tensor:  # noqa: A002
    """``torch.frobenius_norm``: the 2-norm over ``dim``."""
    return vector_norm(input, 2, dim, keepdim)


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:  # noqa: A002
    """``torch.renorm``: each slice of ``input`` along ``dim`` (its ``p``-norm taken over the
    other dims) whose norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``; the others
    unchanged. As PyTorch's, the scale is ``maxnorm / (norm + 1e-7)`` and the gradient
    includes the norm's dependence on the slice.

        rows = gingham.renorm(weight, 2, 0, 1.0)   # every row's Euclidean length <= 1
    """
    op = "renorm"
    x = _float_input(op, input, None)
    if x.ndim < 2:
        raise ShapeError(f"{op}: input needs at least 2 dims, not shape {x.shape}")
    axis = _dim(op, x.shape, dim)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p <= 0:
        raise ValueError(f"{op}: p must be a positive number, not {p!r}")
    if maxnorm < 0:
        raise ValueError(f"{op}: maxnorm must be >= 0, not {maxnorm}")
    others = tuple(d for d in range(x.ndim) if d != axis)
    norms = vector_norm(x, p, others, keepdim=True)
    return x * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


class TriangularSolveResult(NamedTuple):
    """What ``torch.triangular_solve`` returns."""

    solution: Tensor
    cloned_coefficient: Tensor


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> TriangularSolveResult:
    """``torch.triangular_solve``: ``X`` with ``A X = b`` (``A^T X = b`` when ``transpose``)
    for triangular ``A``, and a copy of ``A``; :func:`solve_triangular` with ``b`` first."""
    A = _matrix("triangular_solve", A)
    if transpose:
        X = solve_triangular(A.mT, b, upper=not upper, unitriangular=unitriangular)
    else:
        X = solve_triangular(A, b, upper=upper, unitriangular=unitriangular)
    return TriangularSolveResult(X, A * 1)


__all__ = [
    "MAX_SIZE", "vector_norm", "matrix_norm", "norm", "solve_triangular", "cholesky",
    "cholesky_inverse", "cholesky_ex", "lu_factor", "lu", "lu_unpack", "lu_solve", "solve",
    "inv", "inv_ex", "det", "slogdet", "logdet", "qr", "householder_product", "eigh",
    "eigvalsh", "svd", "svdvals", "pinv", "lstsq", "matrix_rank", "matrix_power",
    "matrix_exp", "multi_dot", "vander", "cross", "vecdot", "jacobi_sweeps",
    "SlogdetResult", "LUFactorResult", "QRResult", "EighResult", "SVDResult", "LstsqResult",
    "LUResult", "InfoResult",
]
