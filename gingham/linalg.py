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

Singular values (``svd``, ``svdvals``, ``eigh``, ``pinv``, ``lstsq``, ``matrix_rank``, and
``matrix_norm``'s ``'nuc'``, 2 and -2) are not implemented: they raise NotImplementedError.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import numpy as np

from .frontend.tensor import (DTypeError, ShapeError, Tensor, cat, diagonal, tril, triu,
                              where, _dim)
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


def _eye_like(A: Tensor) -> Tensor:
    """The identity of ``A``'s shape, dtype and device (batched as ``A``), outside autodiff."""
    rows, cols = A.ndim - 2, A.ndim - 1
    kind = dt.dtype_name(A.dtype)
    return A._elementwise(lambda a: builder.cast(
        builder.select(builder.index(a, rows).eq(builder.index(a, cols)), 1, 0), kind),
        [], "eye").detach()


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
    (largest / smallest column sum of ``|A|``) and ``inf`` / ``-inf`` (row sums).

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
        raise NotImplementedError(f"{op}: ord={ord!r} needs singular values (linalg.svdvals), "
                                  "which gingham does not implement yet")
    if ord in (1, -1):
        summed, extreme_dim = dims  # column sums, then the extreme over the columns
    elif ord in (math.inf, -math.inf):
        extreme_dim, summed = dims
    else:
        raise ValueError(f"{op}: order {ord!r} is not supported (use 'fro', 1, -1, inf, -inf)")
    sums = A.abs().sum(summed, keepdim=True)
    result = sums.amax(extreme_dim, True) if ord > 0 else sums.amin(extreme_dim, True)
    if keepdim:
        return result
    return result.reshape(*(s for d, s in enumerate(result.shape) if d not in dims))


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
    work = tril(A) + 0.5 * (split - split.detach())
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
        positions = M[..., 0, :steps].detach()
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


def _not_implemented(name: str) -> Callable:
    def not_implemented(*args, **kwargs):
        raise NotImplementedError(f"gingham.linalg.{name} is not implemented yet (it needs "
                                  "singular values or eigenvalues)")

    not_implemented.__name__ = name
    return not_implemented


eigh = _not_implemented("eigh")
eigvalsh = _not_implemented("eigvalsh")
svd = _not_implemented("svd")
svdvals = _not_implemented("svdvals")
pinv = _not_implemented("pinv")
lstsq = _not_implemented("lstsq")
matrix_rank = _not_implemented("matrix_rank")

__all__ = [
    "MAX_SIZE", "vector_norm", "matrix_norm", "norm", "solve_triangular", "cholesky",
    "cholesky_inverse", "lu_factor", "solve", "inv", "det", "slogdet", "logdet",
    "SlogdetResult", "LUFactorResult",
]
