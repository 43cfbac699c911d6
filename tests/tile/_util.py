"""Helpers shared by the Tile test corpus.

Everything here is independent of gingham's implementation: reference computations are done
with NumPy / PyTorch / brute force, and these helpers only compare results and build inputs.
"""

from __future__ import annotations

import numpy as np
import ml_dtypes

BF16 = np.dtype(ml_dtypes.bfloat16)

# (rtol, atol) per result dtype, for results compared with a float64 reference.
_TOL = {
    np.dtype(np.float64): (1e-9, 1e-11),
    np.dtype(np.float32): (2e-5, 2e-6),
    np.dtype(np.float16): (2e-3, 2e-3),
    BF16: (1.6e-2, 1.6e-2),
}


def tol(dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing a result of ``dtype`` with a float64 reference."""
    dt = np.dtype(dtype)
    if dt in _TOL:
        return _TOL[dt]
    return (0.0, 0.0)  # integers and bool compare exactly


def tile_function(source: str):
    """``gingham.tile.function(source)``, imported lazily so that collection never fails."""
    from gingham import tile

    return tile.function(source)


def run(source: str, *arrays, device=None):
    return tile_function(source)(*arrays, device=device)


def assert_close(got, expected, dtype=None, rtol=None, atol=None, scale=1.0, err_msg=""):
    """Compare ``got`` with a reference, checking shape and (when given) dtype exactly.

    ``scale`` multiplies the default tolerances (for long accumulations in low precision).
    """
    got = np.asarray(got)
    expected = np.asarray(expected)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), f"dtype: got {got.dtype}, expected {np.dtype(dtype)}. {err_msg}"
    assert got.shape == expected.shape, f"shape: got {got.shape}, expected {expected.shape}. {err_msg}"
    d_rtol, d_atol = tol(got.dtype)
    rtol = d_rtol * scale if rtol is None else rtol
    atol = d_atol * scale if atol is None else atol
    if got.dtype.kind in "fc" or got.dtype == BF16:
        np.testing.assert_allclose(
            got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, err_msg=err_msg
        )
    else:
        np.testing.assert_array_equal(got, expected, err_msg=err_msg)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(r: np.random.Generator, *shape, dtype=np.float64):
    return r.standard_normal(shape).astype(dtype)


def rand_distinct(r: np.random.Generator, *shape, dtype=np.float64):
    """Random floats with no ties (a permutation of well-separated values, then jittered)."""
    n = int(np.prod(shape)) if shape else 1
    base = r.permutation(n).astype(np.float64) * 0.01 - n * 0.005
    base += r.uniform(0.0, 0.001, size=n)
    return base.reshape(shape).astype(dtype)


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


# ---------------------------------------------------------------------------------------------
# Finite differences
# ---------------------------------------------------------------------------------------------


def numeric_vjp(f, arrays, cotangents, which, coords=None, h=1e-6):
    """Central finite differences of ``sum_k <f(arrays)_k, cotangents_k>`` w.r.t. ``arrays[which]``.

    ``f`` maps a list of arrays to an array or tuple of arrays. ``coords`` is a list of flat
    positions to check (default: all). Returns (flat positions, derivative values).
    """
    cts = as_tuple(cotangents)
    base = [np.array(a, copy=True) for a in arrays]
    x = base[which]
    flat_n = x.size
    if coords is None:
        coords = list(range(flat_n))
    vals = []
    for c in coords:
        plus = [a.copy() for a in base]
        minus = [a.copy() for a in base]
        plus[which].reshape(-1)[c] += h
        minus[which].reshape(-1)[c] -= h
        fp = as_tuple(f(plus))
        fm = as_tuple(f(minus))
        s = 0.0
        for yp, ym, ct in zip(fp, fm, cts):
            s += float(np.sum((np.asarray(yp, np.float64) - np.asarray(ym, np.float64)) * ct))
        vals.append(s / (2 * h))
    return np.array(coords), np.array(vals)


def pick_coords(r: np.random.Generator, size: int, limit: int = 24):
    if size <= limit:
        return list(range(size))
    return sorted(r.choice(size, size=limit, replace=False).tolist())


# ---------------------------------------------------------------------------------------------
# Philox-2x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", 2011)
# written independently of gingham, checked against the Random123 known-answer vectors
# (test_corpus.py::test_philox_reference_known_answers). The Philox-2x32 round multiplier of the
# literature / Random123 is 0xD256D193 (0xD256D345 does NOT reproduce the published vectors).
# ---------------------------------------------------------------------------------------------

PHILOX_M = np.uint64(0xD256D193)
PHILOX_W = np.uint64(0x9E3779B9)
_MASK32 = np.uint64(0xFFFFFFFF)


def philox2x32_10(ctr0, ctr1, key):
    """Vectorised Philox-2x32 with 10 rounds. Arrays of uint32-valued numbers in, (x0, x1) out."""
    x0 = np.asarray(ctr0, dtype=np.uint64) & _MASK32
    x1 = np.asarray(ctr1, dtype=np.uint64) & _MASK32
    k = np.asarray(key, dtype=np.uint64) & _MASK32
    for r in range(10):
        if r:
            k = (k + PHILOX_W) & _MASK32
        prod = PHILOX_M * x0  # < 2^64: both factors < 2^32
        hi = prod >> np.uint64(32)
        lo = prod & _MASK32
        x0, x1 = (hi ^ k ^ x1) & _MASK32, lo
    return x0.astype(np.uint32), x1.astype(np.uint32)


def philox_uniform(key: int, shape) -> np.ndarray:
    """float32 uniform numbers in [0, 1): counter (row-major position, 0), key ``key``;
    value = (first output word >> 8) * 2^-24."""
    n = int(np.prod(shape)) if len(shape) else 1
    pos = np.arange(n, dtype=np.uint64)
    x0, _ = philox2x32_10(pos, np.zeros(n, np.uint64), np.full(n, key, np.uint64))
    vals = (x0 >> np.uint32(8)).astype(np.float64) * 2.0**-24
    return vals.astype(np.float32).reshape(shape)
