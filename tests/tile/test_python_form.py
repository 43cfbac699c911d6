"""The Python form builds exactly the programs the parser builds, and runs them."""

from __future__ import annotations

import numpy as np
import pytest

import gingham
from gingham import tile


def test_matmul_equals_parsed_program():
    M, K, N = tile.dims("M K N")
    A, B = tile.input("A", [M, K]), tile.input("B", [K, N])
    i, j, k = tile.indices("i j k")
    C = tile.sum(A[i, k] * B[k, j], out=[i, j], shape=[M, N])
    built = tile.program([A, B], {"C": C})
    parsed = tile.parse("function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }")
    assert built == parsed


def test_pool_with_constraints_and_partial_windows(device):
    N, H, W, C = tile.dims("N H W C")
    X = tile.input("X", [N, H, W, C])
    n, y, x, c, ky, kx = tile.indices("n y x c ky kx")
    P = tile.max(X[n, 2 * y + ky, 2 * x + kx, c], out=[n, y, x, c],
                 shape=[N, (H + 1) // 2, (W + 1) // 2, C], where=[ky < 2, kx < 2])
    program = tile.program([X], {"P": P})
    parsed = tile.parse("""
    function (X[N, H, W, C]) -> (P) {
        P[n, y, x, c : N, (H + 1) / 2, (W + 1) / 2, C] = >(X[n, 2*y + ky, 2*x + kx, c]), ky < 2, kx < 2;
    }""")
    assert program == parsed
    data = np.random.default_rng(0).standard_normal((2, 5, 5, 3))
    padded = np.full((2, 6, 6, 3), -np.inf)
    padded[:, :5, :5] = data
    expected = padded.reshape(2, 3, 2, 3, 2, 3).max(axis=(2, 4))
    np.testing.assert_allclose(tile.function(program)(data, device=device), expected)


def test_elementwise_arithmetic_and_functions(device):
    X = tile.input("X")
    Y = tile.relu(X * 2.0 + 1.0) - tile.exp(X) / 4.0
    fn = tile.function(tile.program([X], {"Y": Y}))
    assert len(fn.program.statements) == 1  # single-use intermediates fold into one statement
    x = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(fn(x, device=device), np.maximum(2 * x + 1, 0) - np.exp(x) / 4,
                               rtol=1e-12)


def test_conditional_form_argmax(device):
    R, C = tile.dims("R C")
    X = tile.input("X", [R, C])
    r, c = tile.indices("r c")
    M = tile.max(X[r, c], out=[r], shape=[R])
    I = tile.index(X, 1)
    A = tile.max(tile.cond(X[r, c] == M[r], I[r, c]), out=[r], shape=[R])
    fn = tile.function(tile.program([X], {"A": A}))
    x = np.random.default_rng(1).standard_normal((4, 7))
    np.testing.assert_array_equal(fn(x, device=device), x.argmax(1))


def test_gradient_of_a_built_program():
    N, = tile.dims("N")
    X = tile.input("X", [N])
    i, = tile.indices("i")
    S = tile.sum(X[i] * X[i], out=[], shape=[])
    fn = tile.function(tile.program([X], {"S": S}))
    x = np.arange(4.0)
    (grad,) = fn.vjp((x,), np.array(1.0), device="reference")
    np.testing.assert_allclose(grad, 2 * x)


def test_non_affine_index_is_rejected():
    i, j = tile.indices("i j")
    with pytest.raises(gingham.TileAffineError, match="not affine"):
        i * j
    with pytest.raises(gingham.TileAffineError):
        i / 0


def test_unlisted_input_is_rejected():
    A, B = tile.input("A", [3]), tile.input("B", [3])
    i, = tile.indices("i")
    C = tile.sum(A[i] * B[i], out=[], shape=[])
    with pytest.raises(gingham.TileNameError, match="'B'"):
        tile.program([A], {"C": C})


def test_comparisons_are_elementwise_through_eq_and_ne(device):
    """``==`` stays identity (tensors live in sets), so the comparisons are methods; ``!=``
    refuses instead of answering an identity test (a bool where a tensor was meant), and so
    does a tensor asked for its truth value."""
    X, Y = tile.input("X"), tile.input("Y")
    with pytest.raises(TypeError, match=r"a\.ne\(b\)"):
        X != Y
    with pytest.raises(TypeError, match="no truth value"):
        if X > 0:  # a choice per element is a select, not Python's if
            pass
    picked = tile.select(X.ne(Y), X, 0.0) + tile.select(X.eq(Y), 10.0, 0.0)
    fn = tile.function(tile.program([X, Y], {"P": picked}))
    x, y = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 3.0])
    np.testing.assert_array_equal(fn(x, y, device=device), [10.0, 2.0, 10.0])
