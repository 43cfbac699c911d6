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
