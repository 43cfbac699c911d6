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
