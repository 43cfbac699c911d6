"""gingham's special functions (gingham.special, the gamma family, Bessel's I0/I1) against
torch.special evaluated in float64 on the same (rounded) inputs: forward values over wide
ranges (negative non-integers, large arguments, far tails) and gradients, on every device.

All functions of one dtype are one compiled program forward and one backward.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham import special
from gingham.compiler.dedupe import unit_of  # before codegen: they import each other
from gingham.codegen.c_family import DIALECTS
from gingham.compiler import lower_program, rewrite_program
from gingham.frontend.tensor import _bound_graph, realize
from gingham.tune.described import H200

# the negative half avoids the poles by a margin (the values there are +-inf or NaN)
_NEGATIVE = np.linspace(-30.25, -0.05, 97)
_POSITIVE = np.concatenate([np.geomspace(1e-3, 2.0, 40), np.linspace(2.1, 60.0, 40),
                            [1e3, 3e4]])
_GAMMA_DOMAIN = np.concatenate([_NEGATIVE, _POSITIVE])
_BESSEL_DOMAIN = np.concatenate([-np.geomspace(1e-3, 80.0, 40), np.geomspace(1e-3, 80.0, 40)])
_ERFCX_DOMAIN = np.concatenate([np.linspace(-9.0, 0.99, 30), np.geomspace(1.0, 1e4, 40)])
_NDTR_DOMAIN = np.linspace(-30.0, 8.0, 77)

# name: (gingham function, torch function, domain, whether the gradient is compared)
UNARY = {
    "gammaln": (special.gammaln, torch.special.gammaln, _GAMMA_DOMAIN, True),
    "digamma": (gingham.digamma, torch.digamma, _GAMMA_DOMAIN, True),
    "trigamma": (lambda x: x.polygamma(1), lambda x: x.polygamma(1), _GAMMA_DOMAIN, True),
    "polygamma3": (lambda x: gingham.polygamma(3, x), lambda x: torch.polygamma(3, x),
                   _GAMMA_DOMAIN, False),
    "mvlgamma": (lambda x: x.mvlgamma(3), lambda x: x.mvlgamma(3), _POSITIVE[40:], True),
    "i0": (lambda x: x.i0(), lambda x: x.i0(), _BESSEL_DOMAIN, True),
    "i0e": (special.i0e, torch.special.i0e, _BESSEL_DOMAIN, True),
    "i1": (special.i1, torch.special.i1, _BESSEL_DOMAIN, True),
    "i1e": (special.i1e, torch.special.i1e, _BESSEL_DOMAIN, True),
    "erfcx": (special.erfcx, torch.special.erfcx, _ERFCX_DOMAIN, True),
    "ndtr": (special.ndtr, torch.special.ndtr, _NDTR_DOMAIN, True),
    "log_ndtr": (special.log_ndtr, torch.special.log_ndtr, _NDTR_DOMAIN, True),
    "ndtri": (special.ndtri, torch.special.ndtri, np.linspace(0.01, 0.99, 33), True),
    "entr": (special.entr, torch.special.entr, np.linspace(0.0, 5.0, 21), False),
}

TOLERANCE = {np.float32: dict(rtol=3e-5, atol=1e-5), np.float64: dict(rtol=1e-7, atol=1e-9)}


def _oracle(function, values: np.ndarray, grad: bool):
    """torch's value (and gradient of the sum) in float64 at ``values``."""
    leaf = torch.tensor(values.astype(np.float64), requires_grad=grad)
    out = function(leaf)
    gradient = torch.autograd.grad(out.sum(), leaf)[0].numpy() if grad else None
    return out.detach().numpy(), gradient


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_special_functions_match_torch(device, dtype):
    leaves = {name: gingham.tensor(domain.astype(dtype), device=device).requires_grad_()
              for name, (_, _, domain, _) in UNARY.items()}
    outputs = {name: UNARY[name][0](leaf) for name, leaf in leaves.items()}
    realize(list(outputs.values()))
    differentiated = [name for name, entry in UNARY.items() if entry[3]]
    sum(outputs[name].sum() for name in differentiated).backward()
    realize([leaves[name].grad for name in differentiated])
    for name, (_, torch_function, domain, grad) in UNARY.items():
        rounded = domain.astype(dtype)
        expected, expected_grad = _oracle(torch_function, rounded, grad)
        tolerance = TOLERANCE[dtype]
        assert outputs[name].dtype == np.dtype(dtype), name
        np.testing.assert_allclose(outputs[name].numpy(), expected, err_msg=name, **tolerance)
        if grad:
            np.testing.assert_allclose(leaves[name].grad.numpy(), expected_grad,
                                       err_msg=f"d {name}", **tolerance)


def test_poles_and_infinities_match_torch(device):
    values = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan], np.float32)
    x = gingham.tensor(values, device=device)
    t = torch.tensor(values)
    got = [x.lgamma(), x.digamma(), special.erfcx(x), special.i0e(x)]
    realize(got)
    for value, expected in zip(got, [t.lgamma(), t.digamma(), torch.special.erfcx(t),
                                     torch.special.i0e(t)]):
        np.testing.assert_allclose(value.numpy(), expected.numpy(), rtol=1e-6)  # inf, NaN exact


# large a beside x near a (where the series and the continued fraction need the most steps),
# far below and far above it, and x = 0
_LARGE_A = np.array([150.0, 150.0, 500.0, 500.0, 1000.0, 1000.0, 1000.0, 1000.0, 3.0, 0.5])
_LARGE_X = np.array([140.0, 190.0, 480.0, 530.0, 700.0, 969.0, 1040.0, 2500.0, 0.0, 800.0])


def _igamma_difference_in_a(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d igamma / da by a central difference of torch.igamma in float64 (PyTorch itself has
    no derivative in a): truncation ~ step^2, rounding ~ 1e-16 / step."""
    step = 1e-5 * a
    above = torch.igamma(torch.tensor(a + step), torch.tensor(x)).numpy()
    below = torch.igamma(torch.tensor(a - step), torch.tensor(x)).numpy()
    return (above - below) / (2.0 * step)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_incomplete_gamma_and_xlog1py_match_torch(device, dtype):
    grid_a, grid_x = np.meshgrid(np.geomspace(0.05, 60.0, 13), np.geomspace(0.01, 90.0, 15))
    a = np.concatenate([grid_a.ravel(), _LARGE_A]).astype(dtype)
    x = np.concatenate([grid_x.ravel(), _LARGE_X]).astype(dtype)
    y = np.linspace(-0.9, 20.0, a.size).astype(dtype)
    # PyTorch's xlog1py has the derivative log1p(y) in x at x = 0 though its value is 0 there,
    # gingham's 0 (a difference of xlog1py, not of igamma): y = 0 makes both 0 at that point
    y[x == 0.0] = 0.0
    g_x = gingham.tensor(x, device=device).requires_grad_()
    g_y = gingham.tensor(y, device=device).requires_grad_()
    g_a = gingham.tensor(a, device=device).requires_grad_()
    lower, upper = gingham.igamma(g_a, g_x), g_a.igammac(g_x)
    logs = special.xlog1py(g_x, g_y)
    realize([lower, upper, logs])
    (lower + upper * 2.0 + logs).sum().backward()
    realize([g_x.grad, g_y.grad, g_a.grad])

    t_a = torch.tensor(a.astype(np.float64))
    t_x = torch.tensor(x.astype(np.float64), requires_grad=True)
    t_y = torch.tensor(y.astype(np.float64), requires_grad=True)
    t_lower, t_upper = torch.igamma(t_a, t_x), torch.igammac(t_a, t_x)
    t_logs = torch.special.xlog1py(t_x, t_y)
    (t_lower + t_upper * 2.0 + t_logs).sum().backward()
    tolerance = TOLERANCE[dtype]
    for got, expected in ((lower, t_lower), (upper, t_upper), (logs, t_logs),
                          (g_x.grad, t_x.grad), (g_y.grad, t_y.grad)):
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), **tolerance)
    # d/da (P + 2 Q) = -dP/da; the difference quotient's rounding is ~1e-11 absolute
    by_a = -_igamma_difference_in_a(a.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(g_a.grad.numpy(), by_a, rtol=max(tolerance["rtol"], 1e-6),
                               atol=max(tolerance["atol"], 1e-9))


def test_incomplete_gamma_cuda_kernels_stay_small():
    """igamma's CUDA kernels for an H200, forward and backward, rendered without compiling:
    each below 48,000 characters. Unrolled in Python, its series and continued fraction made
    kernels of 53,000 and 96,000 with 1.5-1.9 KB stack frames, which an H100 could not launch
    (CUDA_ERROR_OUT_OF_MEMORY); tools/kernel_size.py compiles them with NVRTC."""
    a, x = (gingham.tensor(np.linspace(0.5, 9.0, 16, dtype=np.float32),
                           device="reference").requires_grad_() for _ in range(2))
    outputs = [gingham.igamma(a, x), gingham.igammac(a, x)]
    forward = _bound_graph(outputs, lambda t: not t._parents)[2]
    sum(out.sum() for out in outputs).backward()
    done = {id(out) for out in outputs}
    backward = _bound_graph([a.grad, x.grad], lambda t: not t._parents or id(t) in done)[2]
    for bound in (forward, backward):
        for kernel in lower_program(rewrite_program(bound), H200):
            source = unit_of(kernel, DIALECTS["cuda"])[0].source
            assert len(source) < 48_000, (len(source), kernel.schedule)


def test_special_namespace_and_errors():
    x = gingham.tensor(np.array([0.5, 2.0], np.float32), device="reference")
    assert special.psi is special.digamma and gingham.lgamma is special.gammaln
    assert special.gammainc is gingham.igamma and special.multigammaln is gingham.mvlgamma
    np.testing.assert_allclose(special.expit(x).numpy(), torch.special.expit(
        torch.tensor(x.numpy())).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="non-negative"):
        gingham.polygamma(-1, x)
    with pytest.raises(ValueError, match="p has to be"):
        gingham.mvlgamma(x, 0)
    with pytest.raises(TypeError, match="gingham.Tensor"):
        gingham.lgamma([1.0, 2.0])
    zeros = gingham.xlogy(gingham.zeros((1,), device="reference"), x[:1])
    assert zeros.numpy().tolist() == [0.0]


# erfc over [-30, 30]: its float32 values are subnormal from x = 9.2 and 0 from 10.05, its
# float64 values subnormal from 26.55 and 0 from 27.3; the gradient underflows sooner.
_ERFC_DOMAIN = np.concatenate([np.linspace(-30.0, 30.0, 241), [3.3, 5.7, 9.9, 10.0, 20.0]])
_SUBNORMAL = {np.float32: float(np.finfo(np.float32).smallest_subnormal),
              np.float64: float(np.finfo(np.float64).smallest_subnormal)}


def _ndtr_oracle(x: torch.Tensor) -> torch.Tensor:
    """``erfc(-x / sqrt 2) / 2``: torch.special.ndtr itself is ``(1 + erf(x / sqrt 2)) / 2``,
    0 below about -8.3 (float64) where the answer is 1e-17 and less."""
    return 0.5 * torch.special.erfc(x * (-1.0 / np.sqrt(2.0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erfc_is_relatively_accurate_in_the_tail(device, dtype):
    """``erfc`` (Tensor method, ``gingham.erfc``, ``gingham.special.erfc``) and ``ndtr`` to a
    relative tolerance where ``1 - erf(x)`` is 0 (erfc(10) = 2.09e-45 in float32, erfc(20) =
    5.4e-176 in float64), the gradient (-2/sqrt(pi) exp(-x^2)) against torch autograd; only
    a subnormal result may be off by a few of its units."""
    rounded = _ERFC_DOMAIN.astype(dtype)
    x = gingham.tensor(rounded, device=device).requires_grad_()
    values = [x.erfc(), gingham.erfc(x), special.erfc(x), special.ndtr(x)]
    realize(values)
    values[0].sum().backward()
    expected, expected_grad = _oracle(torch.special.erfc, rounded, True)
    expected_ndtr, _ = _oracle(_ndtr_oracle, rounded, False)
    assert expected[rounded == 20.0][0] > 0 or dtype == np.float32  # the tail is in the test
    eps = float(np.finfo(dtype).eps)
    atol = 4 * _SUBNORMAL[dtype]
    # ndtr rounds x / sqrt 2 first: erfc's relative change is 2 t^2 times t's (t^2 < 100 where
    # a float32 erfc is normal, < 730 in float64)
    ndtr_rtol = 2 * (100 if dtype == np.float32 else 730) * eps
    for name, value, oracle, rtol in zip(
            ["erfc", "gingham.erfc", "special.erfc", "ndtr"], values,
            [expected, expected, expected, expected_ndtr], [25 * eps] * 3 + [ndtr_rtol]):
        assert value.dtype == np.dtype(dtype), name
        np.testing.assert_allclose(value.numpy(), oracle, rtol=rtol, atol=atol, err_msg=name)
    # the gradient's exp(-x^2) carries x^2's rounding, multiplied by x^2 (as ndtr's)
    np.testing.assert_allclose(x.grad.numpy(), expected_grad, rtol=ndtr_rtol, atol=atol)
