"""Repeated statements (a traced step's second copy of its forward pass) are computed once;
the values, and outputs that repeat another value, stay right (against NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

import gingham
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
