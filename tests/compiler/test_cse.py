"""Repeated statements (a traced step's second copy of its forward pass) are computed once;
the values, and outputs that repeat another value, stay right (against NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

from gingham import runtime, tile
from gingham.compiler.cse import eliminate_common
from gingham.devices import get_device, list_devices
from gingham.runtime import executable

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]

# Z2 repeats Z1 under another name (and other index names would not matter to the values,
# but the key is the text: the autodiff's copies keep the forward's index names); Y2 reads
# it; O2 is an output that repeats O1.
REPEATED = """
function (X[M, K], W[K, N], B[N]) -> (O1, O2, Y) {
    Z1[m, n : M, N] = +(X[m, k] * W[k, n]);
    R1 = relu(Z1 + B);
    Z2[m, n : M, N] = +(X[m, k] * W[k, n]);
    R2 = relu(Z2 + B);
    O1 = R1 * 2.0;
    O2 = R2 * 2.0;
    Y = R2 - R1 + 1.0;
}
"""


@pytest.fixture(params=COMPILED)
def compiled_device(request):
    return get_device(request.param)


def _arrays():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((33, 20)).astype(np.float32),
            rng.standard_normal((20, 17)).astype(np.float32),
            rng.standard_normal(17).astype(np.float32))


def test_repeated_statements_are_dropped():
    bound = tile.function(REPEATED).bind(*_arrays())
    kept = eliminate_common(bound)
    names = [s.out for s in kept.program.statements]
    assert "Z2" not in names and "R2" not in names
    # O2 is an output: it stays, as a copy of O1.
    o2 = next(s for s in kept.program.statements if s.out == "O2")
    assert isinstance(o2.expr, tile.ir.Ref) and o2.expr.name == "O1"
    assert eliminate_common(kept) is kept  # nothing left to remove


def test_different_statements_are_kept():
    source = """
    function (X[N]) -> (A, B, C) {
        A = X * 2.0;
        B = X * 2;
        C = X * 3.0;
    }"""
    bound = tile.function(source).bind(np.arange(4, dtype=np.float32))
    # X * 2 (an integer literal) prints apart from X * 2.0: kept, although equal in float32.
    assert len(eliminate_common(bound).program.statements) == 3


def test_repeated_statements_compute_the_same_values(compiled_device):
    x, w, b = _arrays()
    fn = tile.function(REPEATED)
    exe = executable(fn.bind(x, w, b), compiled_device)
    o1, o2, y = exe(x, w, b)
    want = np.maximum(x.astype(np.float64) @ w + b, 0) * 2
    np.testing.assert_allclose(o1, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o2, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y, np.ones_like(y))  # R2 - R1 is exactly 0: one value


def test_a_rewritten_program_compiles_once(compiled_device, monkeypatch):
    """The compiler rewrites a binding (here: a repeated statement and a hoisted broadcast);
    the runtime still finds the executable of the binding it was given."""
    import gingham.compiler as compiler

    calls = []
    real = compiler.compile_program
    monkeypatch.setattr(compiler, "compile_program",
                        lambda bound, device: calls.append(1) or real(bound, device))
    x, w, b = _arrays()
    bound = tile.function(REPEATED).bind(x, w, b)
    runtime._executables.clear()
    first = executable(bound, compiled_device)
    assert executable(bound, compiled_device) is first
    assert len(calls) == 1


# The two copies of a training step's batch norm, as the tracer writes them: the loss's copy
# stores the mean (its running-statistics update reads it too), the gradient program's copy
# writes it inline. They compute the same values: D2, V2 and R's work are dropped.
BATCH_NORM_TWICE = """
function (X[N, C], G[C], B[C], RM[C]) -> (Y, R, RM2) {
    S[0, c : 1, C] = +(X[n, c]);
    D1 = X - S / 8.0;
    Q1 = pow(D1, 2.0);
    V1[0, c : 1, C] = +(Q1[n, c]);
    Y = D1 * rsqrt(V1 / 8.0 + 1e-05) * G + B;
    M = S / 8.0;
    D2 = X - M;
    Q2 = pow(D2, 2.0);
    V2[0, c : 1, C] = +(Q2[n, c]);
    W = V2 / 8.0;
    R = D2 * rsqrt(W + 1e-05) * G + B;
    RM2 = RM * 0.9 + M * 0.1;
}
"""


def _batch_norm_arrays():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((8, 5)).astype(np.float32) * 3 + 1,
            *(rng.standard_normal(5).astype(np.float32) for _ in range(3)))


def test_an_inlined_copy_is_the_same_value():
    kept = eliminate_common(tile.function(BATCH_NORM_TWICE).bind(*_batch_norm_arrays()))
    names = [s.out for s in kept.program.statements]
    assert not {"D2", "Q2", "V2", "W"} & set(names), names  # W: unread once R is a copy
    assert "M" in names  # the running mean reads it: not a repeat of anything stored
    r = next(s for s in kept.program.statements if s.out == "R")
    assert r.expr == tile.ir.Ref("Y")  # an output: a copy of the value computed first
    assert eliminate_common(kept) is kept


def test_an_inlined_copy_computes_the_same_values(compiled_device):
    x, g, b, rm = _batch_norm_arrays()
    y, r, rm2 = executable(tile.function(BATCH_NORM_TWICE).bind(x, g, b, rm),
                           compiled_device)(x, g, b, rm)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + 1e-5) * g + b
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(r, y)
    np.testing.assert_allclose(rm2[0], rm * 0.9 + x64.mean(0) * 0.1, rtol=1e-5, atol=1e-6)


def test_a_weakly_typed_tensor_is_not_inlined():
    # C is a literal stored as a float32 tensor: X * C multiplies in float32, X * 0.1 in
    # bfloat16 (the literal takes X's type). Read inline, C would make A look like B.
    source = """
    function (X[N]) -> (A, B) {
        C = 0.1;
        A = as_float(X * C, 32);
        B = as_float(X * 0.1, 32);
    }"""
    from gingham.tile.dtypes import bfloat16

    x = (np.arange(1, 9, dtype=np.float32) * 1.37).astype(bfloat16)
    bound = tile.function(source).bind(x)
    assert [s.out for s in eliminate_common(bound).program.statements] == ["C", "A", "B"]
    a, b = executable(bound, get_device("reference"))(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(a, x64 * np.float32(0.1), rtol=1e-6)  # float32 arithmetic
    np.testing.assert_array_equal(b, (x * np.array(0.1, bfloat16)).astype(np.float32))  # bfloat16
    assert not np.array_equal(a, b)
