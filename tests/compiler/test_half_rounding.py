"""A half-precision tensor consumed inside the kernel that computes it holds its rounded value.

Half types compute in float32; a value fused into its consumer must still be rounded to its
own type, as the interpreter rounds it and as a consumer in another kernel (reading the
stored value) sees it. Found through mixed precision: a bfloat16 convolution fused with its
cast to float32 skipped the rounding, and a max pool's gradient (which compares recomputed
values with stored ones) then lost taps. The oracle is NumPy: the float32 results must be
exactly representable in the half type, and equal the half-rounded float64 result.
"""

from __future__ import annotations

import numpy as np
import pytest

from gingham import tile
from gingham.tile import dtypes as dt

HALF = {"bfloat16": dt.bfloat16, "float16": np.dtype(np.float16)}


@pytest.mark.parametrize("half", HALF)
def test_fused_half_results_are_rounded(device, half):
    dtype = HALF[half]
    source = f"""
    function (A[M, K], B[K, N], X[M, N], Y[M, N]) -> (C32, S32) {{
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
        C32 = as_float(C, 32) * 1.0;
        S = X + Y;
        S32 = as_float(S, 32) * 1.0;
    }}"""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s).astype(dtype) for s in ((9, 40), (40, 7)))
    x, y = (rng.standard_normal((9, 7)).astype(dtype) for _ in range(2))
    c32, s32 = tile.function(source)(a, b, x, y, device=device)
    for name, value in (("C32", c32), ("S32", s32)):
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, value.astype(dtype).astype(np.float32),
                                      err_msg=f"{name} is not rounded to {half}")
    products = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c32, products.astype(dtype).astype(np.float32),
                               rtol=2 * float(np.finfo(np.float16).eps if half == "float16"
                                              else 2.0 ** -7), atol=1e-3)
    exact_sum = (x.astype(np.float32) + y.astype(np.float32)).astype(dtype).astype(np.float32)
    np.testing.assert_array_equal(s32, exact_sum)


@pytest.mark.parametrize("half", HALF)
def test_half_operations_inside_one_expression_are_rounded(device, half):
    """Each half-typed operation of one elementwise expression is rounded, as the
    interpreter and PyTorch round it: ``float32(bfloat16(x) * 3)`` and ``float32(exp(h) *
    h + 1)`` were computed in float32 from end to end and returned unrounded values (650 of
    1000 differed from PyTorch's on ``cpu`` and PoCL)."""
    dtype = HALF[half]
    source = """
    function (X[N], H[N]) -> (P, Q) {
        P = as_float(as_float(X, 16) * 3.0, 32);
        Q = as_float(exp(H) * H + 1.0, 32);
    }"""
    if half == "bfloat16":
        source = source.replace("as_float(X, 16)", "as_bfloat(X, 16)")
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(1000) * 3).astype(np.float32)
    h = rng.standard_normal(1000).astype(dtype)
    p, q = tile.function(source)(x, h, device=device)

    def rounded(v):
        return np.asarray(v, np.float32).astype(dtype).astype(np.float32)

    np.testing.assert_array_equal(p, rounded(rounded(x) * np.float32(3)))
    e = rounded(np.exp(h.astype(np.float32)))
    np.testing.assert_array_equal(q, rounded(rounded(e * h.astype(np.float32)) + np.float32(1)))


def test_stored_rounded_bfloat16_is_not_rounded_again():
    """A bfloat16 store of a scalar declared as its rounded value takes the value's top 16
    bits (rounding it again cost two conversions a cell in every bf16 epilogue); a store of
    round_<type>(x) converts x once; a name that an inner scope declared rounded is not taken
    for rounded outside it."""
    from gingham.compiler import kernel_ir as k  # before codegen: they import each other
    from gingham.codegen.c_family import DIALECTS, render

    f32, g = "float32", k.Var("g", "int32")
    rounded = k.Call("round_bfloat16", (k.Load("X", g, f32),), f32)
    body = k.block(
        k.Declare("v", f32, k.Load("X", g, f32)),
        k.If(k.Const(True, "bool"), k.block(k.Declare("v", f32, rounded),
                                            k.Store("Y", g, k.Var("v", f32)))),
        k.Store("Z", g, k.Var("v", f32)),  # the outer v: not rounded
        k.Store("W", g, k.Call("round_float16", (k.Load("X", g, f32),), f32)),
        k.Store("V", g, rounded))  # another type's rounding: kept
    params = (k.Param("X", f32), k.Param("Y", "bfloat16", output=True),
              k.Param("Z", "bfloat16", output=True), k.Param("W", "float16", output=True), k.Param("V", "float16", output=True))
    kernel = k.Kernel("r", params, k.For("g", 0, 8, body, kind="thread"), k.Launch((8,), (8,)),
                      uses=frozenset({"round_bfloat16", "round_float16"}))
    for dialect in ("c", "opencl", "cuda"):
        source = render(kernel, DIALECTS[dialect])
        assert "Y[g] = gh_bf16_of_rounded(v);" in source, source
        assert "Z[g] = gh_float_to_bf16(v);" in source, source
        assert "W[g] = gh_float_to_half(X[g]);" in source, source
        assert "V[g] = gh_float_to_half(round_bfloat16(X[g]));" in source, source


@pytest.mark.parametrize("half", HALF)
def test_rounded_results_stored_exactly(device, half):
    """End to end, the stores changed above: float32 values (ties, infinities, the largest
    float, a NaN) cast to the half type equal NumPy's (ml_dtypes') round to nearest even."""
    dtype = HALF[half]
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((33, 17)) * 100).astype(np.float32)
    x[0, :7] = (np.inf, -np.inf, 3.0e38, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -0.0, np.nan)
    cast = "as_float(X, 16)" if half == "float16" else "as_bfloat(X, 16)"
    z = tile.function(f"function (X[M, N]) -> (Z) {{ Z = {cast}; }}")(x, device=device)
    assert z.dtype == dtype
    np.testing.assert_array_equal(z.astype(np.float32), x.astype(dtype).astype(np.float32))


def _every_rounding_case(dtype: np.dtype) -> np.ndarray:
    """float32 values that take every path of a cast to ``dtype``: each of its finite values,
    the midpoint between each pair of neighbours (a tie: round to even; exact in float32, a
    half type having at most 11 significant bits) and one float32 step either side of it,
    both zeros (the midpoint next to zero, half the smallest subnormal, ties to zero), values
    past the largest finite one (to infinity), infinities and NaNs."""
    every = np.arange(65536, dtype=np.uint16).view(dtype).astype(np.float32)
    finite = np.unique(every[np.isfinite(every)])
    midpoints = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    largest = float(finite[-1])
    with np.errstate(over="ignore"):  # bfloat16's largest * 2 is past float32's too: inf
        edges = np.array([0.0, -0.0, largest * (1 + 2.0**-9), largest * 2, 3.0e38, np.inf,
                          -np.inf, np.nan], np.float32)
    # NaNs whose payload is only in the low bits (dropped, they would leave an infinity).
    quiet_low, signalling = np.array([0x7FC00001, 0x7F800001], np.uint32).view(np.float32)
    return np.concatenate([finite, midpoints, np.nextafter(midpoints, np.float32(np.inf)),
                           np.nextafter(midpoints, np.float32(-np.inf)), edges, -edges,
                           [quiet_low, signalling, -signalling]])


def _assert_same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit (so -0 is not 0) wherever ``want`` is a number; a NaN where it is NaN."""
    nan = np.isnan(want.astype(np.float32))
    assert np.isnan(got.astype(np.float32)[nan]).all(), f"{what}: a NaN became a number"
    bits = f"u{got.dtype.itemsize}"
    mismatch = np.flatnonzero(got[~nan].view(bits) != want[~nan].view(bits))
    assert mismatch.size == 0, (f"{what}: {mismatch.size} values differ, e.g. "
                                f"{want[~nan][mismatch[:3]]} -> {got[~nan][mismatch[:3]]}")


@pytest.mark.parametrize("half", HALF)
def test_every_half_value_and_rounding_case_converts_exactly(device, half):
    """The conversions between float32 and each half type, against NumPy (ml_dtypes for
    bfloat16): every one of the 65536 half bit patterns widened to float32, and float32
    values at every rounding decision narrowed (round to nearest even, subnormals, overflow
    to infinity, signed zeros, NaN). The kernels' software conversions compute every case
    without a branch (so that the loops calling them vectorise); this is their oracle."""
    dtype = HALF[half]
    cast = "as_float(X, 16)" if half == "float16" else "as_bfloat(X, 16)"
    narrow = tile.function(f"function (X[N]) -> (Z) {{ Z = {cast}; }}")
    widen = tile.function("function (H[N]) -> (Z) { Z = as_float(H, 32); }")
    values = _every_rounding_case(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # past the largest finite; NaNs
        want = values.astype(dtype)
    _assert_same_bits(narrow(values, device=device), want, f"float32 -> {half}")
    halves = np.arange(65536, dtype=np.uint16).view(dtype)
    _assert_same_bits(widen(halves, device=device), halves.astype(np.float32), f"{half} -> float32")
