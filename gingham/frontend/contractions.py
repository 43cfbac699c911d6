"""Products of tensors as Tile contractions: ``matmul``, ``einsum`` and what is built on them.

A product is one Tile sum over the shared index, ``O[i, j] = +(A[i, k] * B[k, j])``: the batch
dims of ``matmul`` broadcast by reading a dim of size 1 at 0, and the labels of an ``einsum``
equation are Tile indices (two operands are one contraction, more are contracted left to
right). ``tensordot``, ``inner``, ``outer`` and ``kron`` compose these. Under
``gingham.autocast`` the products run in its low-precision dtype.

    gingham.einsum("bqhd,bkhd->bhqk", query, key)     # attention scores
    gingham.matmul(x, w)                               # x @ w
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from ..tile import builder
from ..tile import dtypes as dt
from .dims import ShapeError, _broadcast_shapes, _dim
from .tensor import Tensor


def batched_operand_index(shape: tuple[int, ...], batch: tuple[int, ...], indices: Sequence,
                          rows, cols) -> tuple:
    """The index of a ``[..., rows, cols]`` operand of a product over the broadcast ``batch``
    axes (named by ``indices``): missing leading axes are skipped, and an axis of size 1
    broadcast against a longer one is read at 0. One that meets only axes of size 1 keeps its
    index, which must appear on the right of the sum (an index used only in the output is an
    error: ``[1, 2, 3] @ [1, 3, 4]`` was one)."""
    lead = len(batch) - (len(shape) - 2)
    index = [0 if size == 1 != batch[lead + d] else indices[lead + d]
             for d, size in enumerate(shape[:-2])]
    return (*index, rows, cols)


def _operands(op: str, a, b) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as tensors: a NumPy array beside a tensor becomes a constant on its
    device (as ``x + array`` does); anything else is a ``TypeError`` naming it."""
    from .tensor import _as_tensor

    like = a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        raise TypeError(f"{op}: expects gingham Tensors, not {type(a).__name__} and "
                        f"{type(b).__name__}")
    operands = []
    for name, value in (("input", a), ("other", b)):
        if isinstance(value, np.ndarray):
            value = _as_tensor(value, like)
        elif not isinstance(value, Tensor):
            raise TypeError(f"{op}: {name} must be a gingham Tensor (or a NumPy array beside "
                            f"one), not {type(value).__name__}")
        operands.append(value)
    return operands[0], operands[1]


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for 1-D, 2-D and batched (leading dimensions equal) operands; under
    ``gingham.autocast`` in its low-precision dtype."""
    from .amp import cast_inputs_low

    a, b = _operands("matmul", a, b)
    a, b = cast_inputs_low(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError("matmul: operands must have at least one dimension")
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not match "
                         f"({a2.shape[-1]} != {b2.shape[-2]})")
    batch_a, batch_b = a2.shape[:-2], b2.shape[:-2]
    batch = _broadcast_shapes("matmul", [batch_a, batch_b])
    m, n = a2.shape[-2], b2.shape[-1]
    nb = len(batch)
    bi = builder.indices(" ".join(f"b{d}" for d in range(nb))) if nb else ()
    i, j, kk = builder.indices("i j k")

    dtype = dt.promote(a2.dtype, b2.dtype)

    def build(nodes):
        na, nb_ = nodes
        return builder.sum(na[batched_operand_index(a2.shape, batch, bi, i, kk)]
                           * nb_[batched_operand_index(b2.shape, batch, bi, kk, j)],
                           out=list(bi) + [i, j], shape=list(batch) + [m, n])

    # grad_fn's names: PyTorch's for products of matrices and of stacks of them
    op = {(2, 2): "mm", (3, 3): "bmm"}.get((a.ndim, b.ndim), "matmul")
    result = a2._derive(batch + (m, n), dtype, [a2, b2], build, op)
    if a.ndim == 1:
        result = result.reshape(batch + (n,))
    if b.ndim == 1:
        result = result.reshape(result.shape[:-1])
    return result


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """PyTorch's ``einsum``: the labels of ``equation`` are Tile indices, so two operands
    are one contraction (``"bij,bjk->bik"`` is ``O[b, i, k] = +(A[b, i, j] * B[b, j, k])``)
    and more are contracted left to right. ``...`` stands for broadcast (right-aligned)
    dims; without ``->`` the output is the ``...`` dims, then the labels used once, in
    alphabetical order; a label repeated in one operand takes its diagonal. Differentiable
    in every operand; under ``gingham.autocast`` in its low-precision dtype.

        gingham.einsum("bqhd,bkhd->bhqk", query, key)     # attention scores
    """
    from .amp import cast_inputs_low

    op = "einsum"
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])  # torch.einsum(equation, [a, b]) as well
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise TypeError(f"{op}: operands must be one or more gingham Tensors")
    operands = cast_inputs_low(*operands)
    dtype = functools.reduce(dt.promote, [t.dtype for t in operands])
    operands = [t._in_dtype(dtype) for t in operands]
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"{op}: {equation!r} names {len(terms)} operands, {len(operands)} "
                         "were given")
    ellipsis_rank = max(t.ndim - len(term.replace("...", "")) for term, t
                        in zip(terms, operands))
    labels = [_einsum_labels(op, term, t.shape, ellipsis_rank) for term, t
              in zip(terms, operands)]
    sizes: dict[str, int] = {}
    for term_labels, t in zip(labels, operands):
        for label, size in zip(term_labels, t.shape):
            known = sizes.setdefault(label, size)
            if known != size and 1 not in (known, size):
                raise ShapeError(f"{op}: label {label!r} of {equation!r} has sizes {known} and "
                                 f"{size} (shapes {[t.shape for t in operands]})")
            sizes[label] = max(known, size)
    used = [label for term_labels in labels for label in term_labels]
    if arrow:
        wanted = _einsum_labels(op, output, None, ellipsis_rank)
    else:
        wanted = [label for label in sorted(set(used)) if label.startswith(".")] + sorted(
            label for label in set(used) if used.count(label) == 1 and label.isalpha())
    unknown = [label for label in wanted if label not in sizes]
    if unknown or len(set(wanted)) != len(wanted):
        raise ShapeError(f"{op}: the output of {equation!r} must name each input label at "
                         "most once")
    result, result_labels = operands[0], labels[0]
    if len(operands) == 1:
        return _contract([(result, result_labels)], wanted, sizes)
    for k in range(1, len(operands)):
        later = {label for term_labels in labels[k + 1:] for label in term_labels}
        keep = ([label for label in dict.fromkeys(result_labels + labels[k])
                 if label in later or label in wanted]
                if k < len(operands) - 1 else wanted)
        result = _contract([(result, result_labels), (operands[k], labels[k])], keep, sizes)
        result_labels = keep
    return result


def _einsum_labels(op: str, term: str, shape: tuple[int, ...] | None,
                   ellipsis_rank: int) -> list[str]:
    """One label per dim of ``term``: its letter, or ``".d"`` for the ``d``-th of the
    equation's ``...`` dims (right-aligned: an operand with fewer takes the last ones)."""
    head, dots, tail = term.partition("...")
    if not all(c.isalpha() for c in head + tail) or "." in tail:
        raise ShapeError(f"{op}: {term!r} may hold letters and one '...' only")
    if shape is None:
        middle = ellipsis_rank if dots else 0
    else:
        middle = len(shape) - len(head) - len(tail)
        if middle < 0 or (middle and not dots):
            raise ShapeError(f"{op}: {term!r} does not fit an operand of shape {shape}")
    dims = [f".{d}" for d in range(ellipsis_rank - middle, ellipsis_rank)]
    return list(head) + dims + list(tail)


def _contract(parts: list[tuple[Tensor, list[str]]], out: list[str],
              sizes: dict[str, int]) -> Tensor:
    """``O[out] = +(A[labels] * B[labels])`` (one or two operands); a dim of size 1 that
    broadcasts against a longer one is read at 0."""
    index = {label: builder.Index("e" + label.replace(".", "_")) for label in sizes}
    shape = tuple(sizes[label] for label in out)

    def access(node, t: Tensor, labels: list[str]):
        return node[tuple(0 if size == 1 != sizes[label] else index[label]
                          for label, size in zip(labels, t.shape))]

    def build(nodes):
        term = access(nodes[0], *parts[0])
        if len(parts) == 2:
            term = term * access(nodes[1], *parts[1])
        summed = {label for _, labels in parts for label in labels} - set(out)
        reduce = builder.sum if summed or len(parts) == 2 else builder.assign
        return reduce(term, out=[index[label] for label in out], shape=list(shape))

    first = parts[0][0]
    return first._derive(shape, first.dtype, [t for t, _ in parts], build)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """``a[i] * b[j]`` of two vectors, as ``torch.outer``."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"outer: operands must be vectors, not shapes {a.shape} and {b.shape}")
    return a.unsqueeze(1) * b


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """The sum over ``a``'s dims ``dims[0]`` and ``b``'s ``dims[1]`` (or ``a``'s last
    ``dims`` and ``b``'s first ``dims``, for an int), the rest of ``a`` then the rest of
    ``b`` kept, as ``torch.tensordot``: one :func:`einsum`.

        gingham.tensordot(x, w, dims=([1, 2], [0, 1]))
    """
    if isinstance(dims, (int, np.integer)):
        if not 0 <= dims <= min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims {dims} does not fit shapes {a.shape} and "
                             f"{b.shape}")
        left, right = list(range(a.ndim - dims, a.ndim)), list(range(int(dims)))
    else:
        left, right = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
    left = [_dim("tensordot", a.shape, d) for d in left]
    right = [_dim("tensordot", b.shape, d) for d in right]
    if len(left) != len(right) or any(a.shape[p] != b.shape[q] for p, q in zip(left, right)):
        raise ShapeError(f"tensordot: dims {left} of shape {a.shape} and {right} of shape "
                         f"{b.shape} do not pair up")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    a_labels = [next(letters) for _ in range(a.ndim)]
    b_labels = [next(letters) for _ in range(b.ndim)]
    for p, q in zip(left, right):
        b_labels[q] = a_labels[p]
    out = ([label for d, label in enumerate(a_labels) if d not in left]
           + [label for d, label in enumerate(b_labels) if d not in right])
    return einsum(f"{''.join(a_labels)},{''.join(b_labels)}->{''.join(out)}", a, b)


def inner(a: Tensor, b: Tensor) -> Tensor:
    """The sum over the last dims of ``a`` and ``b`` (a product when one is 0-d), the rest
    of ``a`` then the rest of ``b`` kept, as ``torch.inner``."""
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return tensordot(a, b, ([-1], [-1]))


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product, as ``torch.kron``: block ``(i, j)`` of the result is
    ``a[i, j] * b`` (a product of ``a`` and ``b`` with interleaved dims, merged)."""
    rank = max(a.ndim, b.ndim)
    a_shape = (1,) * (rank - a.ndim) + a.shape
    b_shape = (1,) * (rank - b.ndim) + b.shape
    spread_a = a.reshape(tuple(v for s in a_shape for v in (s, 1)))
    spread_b = b.reshape(tuple(v for s in b_shape for v in (1, s)))
    return (spread_a * spread_b).reshape(tuple(p * q for p, q in zip(a_shape, b_shape)))


def chain_matmul(*matrices: Tensor) -> Tensor:
    return functools.reduce(matmul, matrices)
