"""``keras.ops``' elementwise math and NaN-aware reductions on gingham's backend, on every
device: forward values and gradients against PyTorch (CPU) in one compiled program, and
NumPy's semantics (dtypes, NaN rules, integer ops) against NumPy."""

from __future__ import annotations

import importlib
import importlib.util
import math

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402
import torch  # noqa: E402
from keras import ops  # noqa: E402

from gingham.frontend.tensor import realize  # noqa: E402
from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _flat(values):
    return list(values) if isinstance(values, (tuple, list)) else [values]


def _torch_nan(t, fill, reduce):
    return reduce(torch.where(t.isnan(), fill, t))


UNIT = np.tanh(rand(3, 4)) * 0.9
NANS = np.where(rand(3, 4, seed=7) > 0.7, np.nan, rand(3, 4, seed=8)).astype(np.float32)

# name: (keras op, PyTorch op, float inputs (differentiated))
DIFFERENTIABLE = {
    "inverse_trigonometric": (
        lambda u, x: (ops.arccos(u), ops.arcsin(u), ops.arctan(x), ops.arctanh(u),
                      ops.arcsinh(x), ops.arccosh(ops.abs(x) + 1.5)),
        lambda u, x: (u.acos(), u.asin(), x.atan(), u.atanh(), x.asinh(), (x.abs() + 1.5).acosh()),
        [UNIT, rand(3, 4, seed=1)]),
    "hyperbolic_exp": (lambda x: (ops.cosh(x), ops.sinh(x), ops.exp2(x), ops.log1p(ops.abs(x)),
                                  ops.expm1(x), ops.tan(x * 0.5), ops.cbrt(x + 3.0)),
                       lambda x: (x.cosh(), x.sinh(), x.exp2(), x.abs().log1p(), x.expm1(),
                                  (x * 0.5).tan(), torch.pow(x + 3.0, 1 / 3)),
                       [rand(3, 4)]),
    "binary": (lambda a, b: (ops.arctan2(a, b), ops.hypot(a, b), ops.logaddexp(a, b),
                             ops.logaddexp2(a, b), ops.fmod(a * 3.0, b), ops.fmax(a, b),
                             ops.fmin(a, b), ops.fabs(a), ops.sinc(a), ops.deg2rad(a),
                             ops.rad2deg(a)),
               lambda a, b: (torch.atan2(a, b), torch.hypot(a, b), torch.logaddexp(a, b),
                             torch.logaddexp2(a, b), torch.fmod(a * 3.0, b), torch.fmax(a, b),
                             torch.fmin(a, b), a.abs(), torch.sinc(a), torch.deg2rad(a),
                             torch.rad2deg(a)),
               [rand(3, 4), rand(3, 4, seed=1)]),
    "nan_reductions": (
        lambda x: (ops.nansum(x, axis=1), ops.nanmean(x, axis=0), ops.nanmax(x, axis=1),
                   ops.nanmin(x), ops.nan_to_num(x, nan=0.5), ops.nancumsum(x, axis=1),
                   ops.nanprod(x, axis=1), ops.nanvar(x, axis=1), ops.nanstd(x, axis=1)),
        lambda t: (t.nansum(1), t.nanmean(0), _torch_nan(t, -math.inf, lambda u: u.amax(1)),
                   _torch_nan(t, math.inf, lambda u: u.amin()), t.nan_to_num(0.5),
                   torch.where(t.isnan(), 0.0, t).cumsum(1),
                   torch.where(t.isnan(), 1.0, t).prod(1),
                   torch.stack([r[~r.isnan()].var(correction=0) for r in t]),
                   torch.stack([r[~r.isnan()].std(correction=0) for r in t])),
        [NANS]),
    "erfinv": (lambda u: ops.erfinv(u), torch.special.erfinv, [UNIT]),
    "cdist": (ops.cdist, lambda a, b: (a.unsqueeze(-2) - b.unsqueeze(-3)).square().sum(-1).sqrt(),
              [rand(2, 3, 4), rand(2, 5, 4, seed=1)]),
    "sparse_activations": (lambda x: (ops.sparse_plus(x), ops.sparse_sigmoid(x)),
                           lambda t: (torch.where(t <= -1, 0.0, torch.where(
                               t < 1, (t + 1) ** 2 / 4, t)), torch.where(
                               t <= -1, 0.0, torch.where(t >= 1, 1.0, (t + 1) / 2))),
                           [rand(3, 4) * 2.0]),
    "psnr": (lambda a, b: ops.psnr(a, b, 2.0),
             lambda a, b: 20 * math.log10(2.0) - 10 * torch.log10(((a - b) ** 2).mean()),
             [rand(3, 4), rand(3, 4, seed=1)]),
    "weighted": (lambda x, w: (ops.average(x, axis=1, weights=w), ops.average(x),
                               ops.ptp(x, axis=0)),
                 lambda x, w: ((x * w).sum(1) / w.sum(), x.mean(), x.amax(0) - x.amin(0)),
                 [rand(3, 4), np.abs(rand(4, seed=2)) + 0.1]),
}


def test_differentiable_ops_against_torch(device):
    """Every op of DIFFERENTIABLE, forward and gradient (of the outputs weighted by random
    cotangents) in one program, against PyTorch."""
    check_against_torch(device, DIFFERENTIABLE, TOLERANCE)


EDGES = np.array([0.0, -0.0, 2.5, -2.5, np.inf, -np.inf, np.nan, 1.0], np.float32)
INTS = np.array([12, -7, 5, 0, 255, -1], np.int32)
SHIFTS = np.array([1, 2, 0, 3, 4, 1], np.int32)

# name: (keras op on the converted inputs, NumPy's result, inputs)
NUMPY = {
    "predicates": (lambda x: (ops.signbit(x), ops.isneginf(x), ops.isposinf(x), ops.isreal(x),
                              ops.isclose(x, x), ops.isclose(x, x, equal_nan=True),
                              ops.isclose(x, x + 1e-6)),
                   lambda x: (np.signbit(x), np.isneginf(x), np.isposinf(x), np.isreal(x),
                              np.isclose(x, x), np.isclose(x, x, equal_nan=True),
                              np.isclose(x, x + np.float32(1e-6))), [EDGES]),
    "real_parts": (lambda x: (ops.real(x), ops.imag(x), ops.conj(x), ops.angle(x)),
                   lambda x: (np.real(x), np.imag(x), np.conj(x), np.angle(x).astype(np.float32)),
                   [EDGES]),
    "edges": (lambda x: (ops.nan_to_num(x), ops.trunc(x), ops.heaviside(x, 0.5),
                         ops.arctan2(x, -1.0), ops.fmax(x, 1.0), ops.fmin(x, x[::-1])),
              lambda x: (np.nan_to_num(x), np.trunc(x), np.heaviside(x, np.float32(0.5)),
                         np.arctan2(x, np.float32(-1.0)), np.fmax(x, np.float32(1.0)),
                         np.fmin(x, x[::-1])), [EDGES]),
    "all_nan_rows": (lambda x: (ops.nanmax(x, axis=1), ops.nanargmax(x, axis=1),
                                ops.nanargmin(x, axis=1), ops.nansum(x, axis=1)),
                     lambda x: (np.array([np.nan, 3.0], np.float32), np.array([-1, 1], np.int32),
                                np.array([-1, 0], np.int32), np.nansum(x, axis=1)),
                     [np.array([[np.nan, np.nan, np.nan], [1.0, 3.0, np.nan]], np.float32)]),
    "integers": (lambda a, b: (ops.bitwise_and(a, b), ops.bitwise_or(a, b),
                               ops.bitwise_xor(a, 6), ops.bitwise_not(a), ops.bitwise_invert(b),
                               ops.left_shift(a, b), ops.right_shift(a, b),
                               ops.bitwise_left_shift(a, 2), ops.fmod(a, 4),
                               ops.count_nonzero(a), ops.count_nonzero(a, axis=0),
                               ops.trunc(a), ops.ldexp(np.float32(1.5), b)),
                 lambda a, b: (a & b, a | b, a ^ 6, ~a, ~b, a << b, a >> b, a << 2,
                               np.fmod(a, 4), np.int32(np.count_nonzero(a)),
                               np.int32(np.count_nonzero(a, axis=0)), a,
                               np.ldexp(np.float32(1.5), b)), [INTS, SHIFTS]),
    "allclose": (lambda a: (ops.allclose(a, a * 1.000001), ops.allclose(a, a + 1.0)),
                 lambda a: (np.True_, np.False_), [rand(5)]),
}


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_numpy_semantics(device):
    """Results, dtypes and shapes as NumPy's."""
    with keras.device(device):
        got = {name: _flat(op(*[ops.convert_to_tensor(v) for v in inputs]))
               for name, (op, _, inputs) in NUMPY.items()}
        realize([t for outputs in got.values() for t in outputs])
    for name, (_, numpy_op, inputs) in NUMPY.items():
        expected = _flat(numpy_op(*inputs))
        assert len(got[name]) == len(expected), name
        for i, (g, e) in enumerate(zip(got[name], expected)):
            e = np.asarray(e)
            assert g.shape == e.shape and g.numpy().dtype == e.dtype, (name, i, g, e.dtype)
            np.testing.assert_allclose(g.numpy(), e, **TOLERANCE, err_msg=f"{name} {i}")


def test_erfinv_to_float32_precision(device):
    """erfinv against torch.special.erfinv in float64 across (-1, 1), near the ends too, to
    1e-5 relative; +-inf at +-1, NaN beyond."""
    y = np.concatenate([np.linspace(-0.999, 0.999, 41), [1e-6, -0.99999, 0.999999, 1.0, -1.0,
                                                         1.5]]).astype(np.float32)
    with keras.device(device):
        got = ops.erfinv(ops.convert_to_tensor(y)).numpy()
    expected = torch.special.erfinv(torch.tensor(y, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=0)


def test_erfc_keeps_relative_precision_in_the_tail(device):
    """``keras.ops.erfc`` against torch.special.erfc in float64 over [-12, 12]: relative
    error of float32 where ``1 - erf(x)`` is 0 (x > 4), a few subnormal units below 1e-38."""
    x = np.linspace(-12.0, 12.0, 97).astype(np.float32)
    with keras.device(device):
        got = ops.erfc(ops.convert_to_tensor(x)).numpy()
    expected = torch.special.erfc(torch.tensor(x, dtype=torch.float64)).numpy()
    subnormal = float(np.finfo(np.float32).smallest_subnormal)
    assert got.dtype == np.float32 and expected[x == 9.0][0] > 0
    np.testing.assert_allclose(got, expected, rtol=3e-6, atol=4 * subnormal)


def test_bad_arguments_raise():
    with pytest.raises(TypeError, match="ldexp exponent must be an integer"):
        ops.ldexp(rand(3), rand(3))
    with pytest.raises(TypeError, match="bitwise_and: needs integer or bool operands"):
        ops.bitwise_and(rand(3), rand(3))
    with pytest.raises(ValueError, match="rank >= 2"):
        ops.cdist(rand(3), rand(3, 3))
    with pytest.raises(ValueError, match="must match for PSNR"):
        ops.psnr(rand(3, 2), rand(2, 3), 1.0)
