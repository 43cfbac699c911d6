"""The ``cpu`` device's vector math (gingham.devices.cpu_vector_math): kernels that call exp,
log, tanh, ... get the C library's vector variants where it links them (glibc's libmvec), so
that GCC vectorises their loops. Every function is checked against NumPy / PyTorch in float64,
special values included, on inputs long enough for the vector loop; the build must really
call the vector variants where the probe found them; ``GINGHAM_VECTOR_MATH=0`` keeps the
scalar ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gingham import tile
from gingham.codegen.c_family import DIALECTS, render_many
from gingham.compiler import lower_program, rewrite_program
from gingham.config import get_config
from gingham.devices import cpu as cpu_module
from gingham.devices import cpu_vector_math, get_device


@pytest.fixture(scope="module")
def cpu():
    try:
        return get_device("cpu")
    except Exception as exc:  # no C compiler with OpenMP
        pytest.skip(f"no cpu device: {exc}")


def _float64(name: str, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """The oracle: PyTorch in float64 (it has erf; NumPy's functions for the rest agree)."""
    t = torch.from_numpy(x.astype(np.float64))
    if name == "pow":
        return torch.pow(t, torch.from_numpy(y.astype(np.float64))).numpy()
    if name == "sigmoid":
        return torch.sigmoid(t).numpy()
    return getattr(torch, name)(t).numpy()


#: (function, inputs' range): away from a function's poles, inputs where its values are
#: normal floats; special values are added to each.
CASES = [("exp", (-80.0, 80.0)), ("log", (1e-30, 1e30)), ("sin", (-100.0, 100.0)),
         ("cos", (-100.0, 100.0)), ("tan", (-1.5, 1.5)), ("tanh", (-12.0, 12.0)),
         ("sinh", (-80.0, 80.0)), ("cosh", (-80.0, 80.0)), ("asin", (-1.0, 1.0)),
         ("acos", (-1.0, 1.0)), ("atan", (-1e4, 1e4)), ("erf", (-5.0, 5.0)),
         ("sigmoid", (-80.0, 80.0))]
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0]

#: Units in the last place allowed, beyond the result's own rounding: libmvec's functions
#: are within 4 (measured: logf 3.9, expf 2.6, tanhf 1.4); libm's within 2.
ULPS = 6


def _assert_within_ulps(got: np.ndarray, want: np.ndarray, dtype) -> None:
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    spacing = np.spacing(np.abs(want[finite]).astype(dtype)).astype(np.float64)
    # a result below the smallest normal is compared in absolute terms
    spacing = np.maximum(spacing, float(np.finfo(dtype).tiny) * float(np.finfo(dtype).eps))
    error = np.abs(got[finite].astype(np.float64) - want[finite]) / spacing
    assert error.max() <= ULPS, (float(error.max()), int(np.argmax(error)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, bounds", CASES, ids=[c[0] for c in CASES])
def test_functions_against_float64(cpu, name, bounds, dtype):
    rng = np.random.default_rng(len(name))
    x = rng.uniform(*bounds, 4093).astype(dtype)  # a ragged tail after the vector loop
    x[:len(SPECIAL)] = SPECIAL
    fn = tile.function(f"function (X[N]) -> (Y) {{ Y = {name}(X); }}")
    got = fn(x, device="cpu")
    assert got.dtype == dtype
    # The oracle on the float32 inputs as given, its result rounded once to ``dtype``.
    want = _float64(name, x).astype(dtype).astype(np.float64)
    _assert_within_ulps(got, want, dtype)


#: float32 ``exp``'s arguments where ``gh_expf`` steers libmvec's lanes (results that round
#: to 0, subnormal results, overflow) and their edges, each beside ordinary arguments.
EXP_EDGES = [-np.inf, -1e30, -200.0, -104.0, -103.97208, -103.9, -100.0, -90.0, -87.4,
             -87.33, -87.0, -86.9, 87.5, 88.0, 88.72283, 88.72283935546875, 88.8, 100.0,
             np.inf, np.nan]


def test_float32_exp_outside_the_vector_routines_range(cpu):
    """exp(-inf) (a masked attention score), subnormal results and overflow: the vector
    code gives each lane an argument inside libmvec's fast range and rebuilds the result
    from it; the values must be those of exp, subnormals within a few of their units."""
    rng = np.random.default_rng(5)
    edges = np.array(EXP_EDGES, np.float32)
    x = rng.uniform(-120.0, 95.0, 4093).astype(np.float32)
    # every edge value in a vector of ordinary ones, and at the ragged tail
    x[:2 * len(edges):2] = edges
    x[-len(edges):] = edges
    fn = tile.function("function (X[N]) -> (Y) { Y = exp(X); }")
    got = fn(x, device="cpu")
    with np.errstate(over="ignore"):  # exp(100) is inf in float32, as it should be
        want = _float64("exp", x).astype(np.float32).astype(np.float64)
    _assert_within_ulps(got, want, np.float32)
    if "-DGH_SIMD_expf" in cpu.cflags:
        source = _source_of("function (X[N]) -> (Y) { Y = exp(X); }", x)
        assert "gh_expf(" in source


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_against_float64(cpu, dtype):
    rng = np.random.default_rng(11)
    x = rng.uniform(1e-3, 50.0, 2053).astype(dtype)
    y = rng.uniform(-8.0, 8.0, 2053).astype(dtype)
    x[:4], y[:4] = [0.0, 2.0, np.inf, 1.0], [2.0, 0.5, -1.0, np.nan]
    fn = tile.function("function (X[N], Y[N]) -> (Z) { Z = pow(X, Y); }")
    got = fn(x, y, device="cpu")
    _assert_within_ulps(got, _float64("pow", x, y).astype(dtype).astype(np.float64), dtype)


def _source_of(program: str, *arrays: np.ndarray) -> str:
    info = get_device("cpu").info
    bound = tile.function(program).bind(*arrays)
    return render_many(lower_program(rewrite_program(bound), info), DIALECTS["c"])


def test_kernels_call_the_vector_variants(cpu):
    """The prelude declares what the kernel calls; where the probe found libmvec's expf, the
    device defines it and the shared object calls a vector variant (``_ZGV...expf``)."""
    source = _source_of("function (X[N]) -> (Y) { Y = exp(X) + tanh(X); }",
                        np.zeros(1024, np.float32))
    assert "#ifdef GH_SIMD_expf" in source and "#ifdef GH_SIMD_tanhf" in source
    assert "#ifdef GH_SIMD_logf" not in source  # only what the kernels call
    if "-DGH_SIMD_expf" not in cpu.cflags:
        pytest.skip(f"{cpu.info.name}: the C library has no vector expf (not glibc >= 2.22?)")
    assert "-lmvec" in cpu.libraries
    binary, error = cpu_module._run_compiler(cpu.cc, cpu.cflags, source, cpu.libraries)
    assert error is None, error
    assert b"v_expf" in binary and b"_ZGV" in binary


def test_probe_finds_what_links(cpu):
    """Every function the probe reports links with its vector variants on its own; the
    float exponential is among them wherever glibc's libmvec is."""
    if "-DGH_SIMD_expf" not in cpu.cflags:
        pytest.skip(f"{cpu.info.name}: no vector math here")
    found = [flag[len("-DGH_SIMD_"):] for flag in cpu.cflags if flag.startswith("-DGH_SIMD_")]
    assert set(found) <= set(cpu_vector_math.candidates())
    base = tuple(flag for flag in cpu.cflags if not flag.startswith("-DGH_SIMD_"))
    for name in ("expf", found[-1]):
        _, error = cpu_module._run_compiler(
            cpu.cc, base + ("-Wl,-z,defs",), cpu_vector_math.probe_source([name]),
            cpu.libraries)
        assert error is None, error


def test_vector_math_off_keeps_libm(cpu, monkeypatch):
    monkeypatch.setenv("GINGHAM_VECTOR_MATH", "0")
    assert get_config().vector_math is False
    defines, libraries = cpu_module._vector_math(cpu.cc, cpu.cc_version, cpu.cflags)
    assert defines == () and libraries == ("-lm",)
    monkeypatch.setenv("GINGHAM_VECTOR_MATH", "yes please")
    with pytest.raises(Exception, match="GINGHAM_VECTOR_MATH"):
        get_config()


def test_softmax_is_vectorised_end_to_end(cpu):
    """A softmax's exponentials and sums through the whole stack, rows of a ragged length."""
    from gingham.frontend.tensor import tensor
    from gingham.nn import functional as F

    x = np.random.default_rng(3).standard_normal((37, 1001)).astype(np.float32) * 8
    got = F.log_softmax(tensor(x, device="cpu"), -1).numpy()
    want = torch.log_softmax(torch.from_numpy(x.astype(np.float64)), -1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=4e-6 * math.log(1001))
