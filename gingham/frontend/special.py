"""Special functions of ``torch.special`` composed from Tile's elementwise math: the gamma
family (``lgamma``, ``digamma``, ``polygamma``, ``mvlgamma``, the regularized incomplete gamma
``igamma``/``igammac``), modified Bessel functions (``i0``, ``i0e``, ``i1``, ``i1e``),
``erfcx``, ``xlog1py`` and the normal distribution's ``ndtr``/``ndtri``/``log_ndtr``.

Each is a fixed expression (shifts, series and continued fractions of fixed length), so it
fuses into elementwise kernels on every device (igamma's series is a sum over a last axis of
terms, a reduction: a loop in the kernel rather than a copy of each term), and Tile's
autodiff differentiates it:
``lgamma``'s derivative is the same composition as ``digamma``, ``digamma``'s that of
``polygamma(1, x)``. Branches follow the "double where" of :mod:`gingham.frontend.tensor`: the
branch not taken reads a harmless argument, so its derivative is finite.

    x = gingham.tensor([-2.5, 0.5, 3.0])
    x.lgamma()                 # [-0.0562, 0.5724, 0.6931]
    gingham.polygamma(1, x)    # trigamma
    x.igamma(gingham.tensor([1.0, 1.0, 1.0]))
"""

from __future__ import annotations

import math

import numpy as np

from ..tile import builder
from ..tile import dtypes as dt
from .tensor import Tensor, _floating, where

_LOG_PI = math.log(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

# Recurrence shifts move the argument to >= _ASYMPTOTIC, where Stirling's series (lgamma), the
# asymptotic series of digamma and of Hurwitz' zeta are below float64's rounding: the first
# term left out of lgamma's is 691 / (360360 w^11) < 2e-13 at w = 8.
_ASYMPTOTIC = 8.0

#: Bernoulli numbers B_2 .. B_16 (the asymptotic series of Hurwitz' zeta).
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _tensor(op: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a gingham.Tensor, not {type(x).__name__}")
    return _floating(x)


def _reflected(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(reflect, z, r)``: where ``x < 0.5`` the functions are computed at ``z = 1 - x`` and
    reflected with ``sin``/``cot`` of ``pi * r``, ``r = x - round(x)`` in ``[-0.5, 0.5]``
    (exact, so large negative arguments keep their fraction); ``r`` is 0.25 elsewhere."""
    reflect = x < 0.5
    z = where(reflect, 1.0 - x, x)
    r = where(reflect, x - x.round(), 0.25)
    return reflect, z, r


def _shifted(z: Tensor, terms: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(shift, zs, w)``: where ``z < _ASYMPTOTIC`` the recurrence adds ``terms`` steps,
    ``zs = z`` there (1 elsewhere, harmless) and ``w = z + terms``; ``w = z`` elsewhere."""
    shift = z < _ASYMPTOTIC
    zs = where(shift, z, 1.0)
    w = where(shift, z + float(terms), z)
    return shift, zs, w


def _log_gamma_above_half(z: Tensor) -> Tensor:
    """``log Gamma(z)`` for ``z >= 0.5`` (no reflection): Stirling's series after the
    recurrence's shift to 8 or more."""
    shift, zs, w = _shifted(z, 8)
    # log Gamma(z) = log Gamma(z + 8) - sum_k log(z + k): a sum of logs rather than the log of
    # the product, whose derivative (the product rule over 8 factors, each factor's
    # expression repeated in every term) made lgamma's backward kernel 15 KB of CUDA source
    logs = zs.log()
    for k in range(1, 8):
        logs = logs + (zs + float(k)).log()
    u = 1.0 / w.square()
    series = (1.0 / w) * (1 / 12 + u * (-1 / 360 + u * (1 / 1260 + u * (-1 / 1680
                                                                      + u * (1 / 1188)))))
    stirling = (w - 0.5) * w.log() - w + _HALF_LOG_2PI + series
    return stirling - where(shift, logs, 0.0)


def _digamma_above_half(z: Tensor) -> Tensor:
    """``psi(z)`` for ``z >= 0.5`` (no reflection): the asymptotic series after the
    recurrence's shift to 8 or more."""
    shift, zs, w = _shifted(z, 8)
    reciprocals = 1.0 / zs
    for k in range(1, 8):
        reciprocals = reciprocals + 1.0 / (zs + float(k))
    u = 1.0 / w.square()
    series = u * (1 / 12 - u * (1 / 120 - u * (1 / 252 - u * (1 / 240 - u * (1 / 132)))))
    return w.log() - 0.5 / w - series - where(shift, reciprocals, 0.0)


def lgamma(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``log|Gamma(x)|`` elementwise (``torch.lgamma``, ``torch.special.gammaln``): Stirling's
    series after shifting the argument to 8 or more, the reflection formula below 0.5; +inf at
    the poles (0, -1, -2, ...) and at +-inf. Differentiable (the derivative is digamma).

        gingham.lgamma(gingham.tensor([-2.5, 0.5, 3.0]))   # [-0.0562, 0.5724, 0.6931]
    """
    x = _tensor("lgamma", input)
    reflect, z, r = _reflected(x)
    main = _log_gamma_above_half(z)
    sine = (r * math.pi).sin().abs()  # 0 at the poles: log gives +inf there
    value = where(reflect, _LOG_PI - sine.log() - main, main)
    return where(x.isinf(), math.inf, value)


def digamma(input: Tensor) -> Tensor:  # noqa: A002
    """``d/dx log Gamma(x)`` elementwise (``torch.digamma``, ``torch.special.psi``): the
    asymptotic series after shifting to 8 or more, ``psi(1 - x) - pi cot(pi x)`` below 0.5;
    as PyTorch, -inf at +0, +inf at -0 and NaN at the negative integers.

        gingham.digamma(gingham.tensor([1.0, 0.5]))   # [-0.5772, -1.9635]
    """
    x = _tensor("digamma", input)
    reflect, z, r = _reflected(x)
    main = _digamma_above_half(z)
    pole = reflect & (r == 0.0)
    cotangent = math.pi / (where(pole, 0.25, r) * math.pi).tan()
    value = where(reflect, main - cotangent, main)
    at_pole = where(x == 0.0, where(x.signbit(), math.inf, -math.inf), math.nan)
    return where(pole, at_pole, value)


def _cot_derivative(n: int) -> np.ndarray:
    """Coefficients (lowest first) of ``P_n`` with ``pi * d^n/dx^n cot(pi x) = P_n(cot(pi x))``:
    ``d/dx c = -pi (1 + c^2)``, so ``P_{k+1} = -pi (1 + c^2) P_k'``, ``P_0 = pi c``."""
    poly = np.polynomial.Polynomial([0.0, math.pi])
    for _ in range(n):
        poly = -math.pi * np.polynomial.Polynomial([1.0, 0.0, 1.0]) * poly.deriv()
    return poly.coef


def _hurwitz_zeta(s: int, z: Tensor, terms: int) -> Tensor:
    """``zeta(s, z) = sum_k (z + k)^-s`` for an integer ``s >= 2`` and ``z >= 0.5``: ``terms``
    steps of the sum, then the Euler-Maclaurin series at ``w = z + terms`` (or ``z`` itself
    where it is already ``>= terms``)."""
    shift = z < float(terms)
    zs = where(shift, z, 1.0)
    head = zs ** float(-s)
    for k in range(1, terms):
        head = head + (zs + float(k)) ** float(-s)
    w = where(shift, z + float(terms), z)
    inverse = 1.0 / w
    tail = w ** float(1 - s) / float(s - 1) + 0.5 * w ** float(-s)
    rising, power = float(s), w ** float(-s - 1)  # s (s+1) ... (s+2j-2), w^(-s-2j+1)
    for j, bernoulli in enumerate(_BERNOULLI, start=1):
        tail = tail + (bernoulli / math.factorial(2 * j) * rising) * power
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        power = power * inverse.square()
    return where(shift, head, 0.0) + tail


def polygamma(n: int, input: Tensor) -> Tensor:  # noqa: A002
    """The ``n``-th derivative of digamma elementwise (``torch.polygamma(n, input)``):
    ``(-1)^(n+1) n! zeta(n + 1, x)`` for ``n >= 1`` (``n == 0`` is :func:`digamma`), with the
    reflection ``psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x)`` below 0.5.

        gingham.polygamma(1, gingham.tensor([1.0]))   # [pi^2 / 6]
    """
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative integer, got {n!r}")
    if n == 0:
        return digamma(input)
    x = _tensor("polygamma", input)
    reflect, z, r = _reflected(x)
    # A longer shift for a larger n keeps the series' ratio s / (2 pi w) small.
    zeta = _hurwitz_zeta(n + 1, z, 8 + 2 * n)
    main = zeta * float((-1) ** (n + 1) * math.factorial(n))
    cot = 1.0 / (r * math.pi).tan()  # inf at the poles: the value is inf or NaN there, too
    derivative = 0.0
    for coefficient in reversed(_cot_derivative(n)):  # Horner, highest power first
        derivative = derivative * cot + float(coefficient)
    reflected = float((-1) ** n) * main - derivative
    return where(reflect, reflected, main)


def mvlgamma(input: Tensor, p: int) -> Tensor:  # noqa: A002
    """The multivariate log-gamma function of dimension ``p`` elementwise
    (``torch.mvlgamma``, ``torch.special.multigammaln``):
    ``p (p - 1) / 4 log(pi) + sum_{i<p} lgamma(x - i / 2)``. PyTorch raises where an element is
    ``<= (p - 1) / 2``; gingham's values stay on the device, so such elements are NaN instead.

        gingham.mvlgamma(gingham.tensor([2.5]), p=3)
    """
    if not isinstance(p, (int, np.integer)) or p < 1:
        raise ValueError(f"mvlgamma: p has to be greater than or equal to 1, got {p!r}")
    x = _tensor("mvlgamma", input)
    total = p * (p - 1) / 4 * _LOG_PI
    for i in range(p):
        total = lgamma(x - i / 2) + total
    return where(x > (p - 1) / 2, total, math.nan)


# The regularized incomplete gamma function, in float64 whatever the input's dtype (exponents
# such as a log x - x - lgamma(a) reach 1e3 at a = x = 100: float32 would keep 1e-4 of them).
# Below max(a + 1 + 3 sqrt(a), 4) it is P's series, summed as a reduction over k of terms in
# closed form (a loop in one kernel, not _IGAMMA_TERMS copies of a step: unrolled 64 steps
# each, the series and the continued fraction made sm_90 kernels with 1.5-1.9 KB stack frames
# and 13 KB of spill stores, tools/kernel_size.py, which an H100 refused to launch with
# CUDA_ERROR_OUT_OF_MEMORY). Above, Q's continued fraction, which converges there within
# _IGAMMA_LEVELS levels. Steps needed for a relative error of 1e-12 against
# scipy.special.gammainc/gammaincc (numpy, the same formulas, x dense on both sides of the
# split): at a = 60, 98 terms and 14 levels; at a = 300, 194 and 19; at a = 1000, 338 terms.
# The terms grow as (3 + 8.6) sqrt(a) (the peak at k = x - a, 8.6 standard deviations after
# it): a loop's trip count, which costs time, not kernel size.
_IGAMMA_TERMS = 384
_IGAMMA_LEVELS = 24


def _stopped(x: Tensor) -> Tensor:
    return x._elementwise(builder.stop_gradient, [], "stop_gradient")


def _with_slopes(value: Tensor, *pairs: tuple[Tensor, Tensor]) -> Tensor:
    """``value`` (whose own graph takes no gradient) with the first derivative ``slope`` with
    respect to each ``(argument, slope)``: for the functions whose series or continued
    fraction is long, where Tile's autodiff would differentiate every step (its expression
    for the gradient of a fraction of many levels grows past what the compiler handles
    quickly). Infinite slopes (at an edge of the domain) become 0, so that the forward value,
    to which each term adds ``0 * slope``, stays finite."""
    result = _stopped(value)
    for argument, slope in pairs:
        finite = _stopped(where(slope.isfinite(), slope, 0.0))
        moved = where(argument.isfinite(), argument, 0.0)  # inf - inf would be NaN
        result = result + (moved - _stopped(moved)) * finite
    return result


def _igamma_parts(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    """``(lower, upper)``: P and Q of the regularized incomplete gamma function, with their
    derivatives: ``x^(a-1) e^-x / Gamma(a)`` in ``x``; in ``a``, the series' and the
    continued fraction's own (PyTorch has none; :class:`gingham.distributions.Gamma`'s
    ``rsample`` needs it)."""
    a, x = _floating(a), _floating(x)
    a, x = (a + x * 0.0), (x + a * 0.0)  # one shape and dtype
    lower, upper, by_a = _igamma_values(_stopped(a), _stopped(x))
    wide_a, wide_x = _stopped(a).double(), _stopped(x).double()
    density = ((wide_a - 1.0) * wide_x.log() - wide_x - lgamma(wide_a)).exp().astype(a.dtype)
    return (_with_slopes(lower, (x, density), (a, by_a)),
            _with_slopes(upper, (x, -density), (a, -by_a)))


def igamma_derivative_in_a(a: Tensor, x: Tensor) -> Tensor:
    """``dP(a, x) / da`` (no gradient of its own)."""
    return _igamma_values(a, x)[2]


def _coordinate(cells: Tensor, axis: int) -> Tensor:
    """Each cell's coordinate along ``axis`` of ``cells``, in its dtype: each kernel computes
    it from the cell's flat index (no buffer)."""
    name = dt.dtype_name(cells.dtype)
    return cells._elementwise(lambda v: builder.cast(builder.index(v, axis % cells.ndim), name),
                              [], "index")


def _igamma_series(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    """P and dP/da for ``x > 0``: ``sum_k exp((a + k) log x - x - lgamma(a + k + 1))`` and the
    same terms times ``log x - psi(a + k + 1)``, as one sum over the last axis of
    ``[..., 2, _IGAMMA_TERMS]`` cells (row 0 the terms, row 1 their derivatives): one
    reduction computes both, its operand in its loop. Two sums of ``[..., _IGAMMA_TERMS]``
    would share the terms, and the compiler would store them for the second (8 bytes times
    384 per element)."""
    cells = a.unsqueeze(-1).unsqueeze(-1).expand(*a.shape, 2, _IGAMMA_TERMS)
    shifted = cells + _coordinate(cells, -1) + 1.0  # >= 1: no reflection
    log_x = x.log().unsqueeze(-1).unsqueeze(-1)
    term = ((shifted - 1.0) * log_x - x.unsqueeze(-1).unsqueeze(-1)
            - _log_gamma_above_half(shifted)).exp()
    factor = where(_coordinate(cells, -2) == 0.0, 1.0, log_x - _digamma_above_half(shifted))
    sums = (term * factor).sum(-1)
    return sums[..., 0], sums[..., 1]


def _igamma_fraction(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    """Q and dQ/da where ``x >= max(a + 1 + 3 sqrt(a), 4)``: ``Q = x^a e^-x / Gamma(a) / f``
    with the continued fraction ``f = x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (...))``
    (Numerical Recipes 6.2), evaluated from its last level up, and its derivative in ``a``
    level by level."""
    levels = _IGAMMA_LEVELS
    fraction = x + float(2 * levels + 1) - a
    slope = -1.0  # d/da of the last level
    for i in range(levels, 0, -1):
        numerator = float(i) * (float(i) - a)
        inverse = 1.0 / fraction
        # d/da of (x + 2i - 1 - a - numerator / fraction), numerator' = -i
        slope = -1.0 + float(i) * inverse + numerator * slope * inverse.square()
        fraction = x + float(2 * i - 1) - a - numerator * inverse
    upper = (a * x.log() - x - lgamma(a)).exp() / fraction
    return upper, upper * (x.log() - digamma(a) - slope / fraction)


def _igamma_values(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """P, Q and dP/da without derivatives of their own (see :func:`_igamma_parts`)."""
    wide_a, wide_x = a.double(), x.double()
    use_series = wide_x < (wide_a + 1.0 + 3.0 * wide_a.sqrt()).maximum(4.0)
    # what each branch reads where it is not taken: a harmless argument in its own region
    series, series_by_a = _igamma_series(wide_a, where(use_series & (wide_x > 0.0), wide_x, 1.0))
    continued, continued_by_a = _igamma_fraction(wide_a, where(use_series, 4.0, wide_x))
    lower = where(use_series, series, 1.0 - continued)
    upper = where(use_series, 1.0 - series, continued)
    by_a = where(use_series, series_by_a, -continued_by_a)
    invalid = (wide_a < 0.0) | (wide_x < 0.0)
    lower = where(wide_x == 0.0, 0.0, lower)
    upper = where(wide_x == 0.0, 1.0, upper)
    by_a = where((wide_x == 0.0) | wide_x.isinf() | (wide_a == 0.0), 0.0, by_a)
    done = wide_x.isinf() | (wide_a == 0.0)
    lower = where(invalid, math.nan, where(done, 1.0, lower))
    upper = where(invalid, math.nan, where(done, 0.0, upper))
    by_a = where(invalid, math.nan, by_a)
    return lower.astype(a.dtype), upper.astype(a.dtype), by_a.astype(a.dtype)


def _igamma_operands(op: str, input, other) -> tuple[Tensor, Tensor]:
    a = _tensor(op, input)
    x = other if isinstance(other, Tensor) else a.new_full((), float(other))
    return a, _floating(x)


def igamma(input: Tensor, other) -> Tensor:  # noqa: A002
    """The regularized lower incomplete gamma function ``P(a, x)`` elementwise, ``a`` =
    ``input`` and ``x`` = ``other`` (``torch.igamma``, ``torch.special.gammainc``); NaN where
    either is negative. Computed in float64: relative error about 1e-12 for ``a`` up to
    1000 (1e-4 and more at ``a = 1e4``). Where ``x < 4``, ``Q`` is ``1 - P``: its error
    there is about 1e-14 absolute, a large relative one where ``a`` is far below 1 and ``Q``
    tiny (7.6e-10 at ``a = 0.001, x = 2.7``).

        gingham.igamma(gingham.tensor([1.0]), gingham.tensor([2.0]))   # [1 - exp(-2)]
    """
    return _igamma_parts(*_igamma_operands("igamma", input, other))[0]


def igammac(input: Tensor, other) -> Tensor:  # noqa: A002
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``
    (``torch.igammac``, ``torch.special.gammaincc``), computed directly (no cancellation in
    the tail); see :func:`igamma`."""
    return _igamma_parts(*_igamma_operands("igammac", input, other))[1]


# Abramowitz and Stegun 9.8.1-9.8.4: I0 and I1 as polynomials in (x / 3.75)^2 below 3.75 and
# exp(|x|) / sqrt(|x|) times polynomials in 3.75 / |x| above, relative error < 2.2e-7:
# float32's precision without a series loop (float32 and half types; float64 below).
_I0_SMALL = (0.0045813, 0.0360768, 0.2659732, 1.2067492, 3.0899424, 3.5156229, 1.0)
_I0_LARGE = (0.00392377, -0.01647633, 0.02635537, -0.02057706, 0.00916281, -0.00157565,
             0.00225319, 0.01328592, 0.39894228)
_I1_SMALL = (0.00032411, 0.00301532, 0.02658733, 0.15084934, 0.51498869, 0.87890594, 0.5)
_I1_LARGE = (-0.00420059, 0.01787654, -0.02895312, 0.02282967, -0.01031555, 0.00163801,
             -0.00362018, -0.03988024, 0.39894228)
_BESSEL_SPLIT = 3.75


def _horner(coefficients, t):
    value = coefficients[0]
    for c in coefficients[1:]:
        value = value * t + c
    return value


# float64 needs more than float32's 2.2e-7: I0 and I1 from their power series below 20 and
# Hankel's asymptotic expansion above, both with coefficients derived below (no fitted
# tables). Measured against scipy.special.i0e/i1e in float64: 32 series terms reach 2e-15 on
# (0, 20], 19 asymptotic terms 5e-16 on [20, 700]; two more of each for margin.
_BESSEL64_SPLIT = 20.0
_BESSEL64_SERIES_TERMS = 34
_BESSEL64_ASYMPTOTIC_TERMS = 21


def _asymptotic_bessel_coefficients(order: int, terms: int) -> list[float]:
    """``c_k`` of ``I_order(x) ~ exp(x) / sqrt(2 pi x) sum_k c_k x^-k`` (Hankel's expansion):
    ``c_k = c_(k-1) ((2k - 1)^2 - 4 order^2) / (8k)``, ``c_0 = 1``."""
    coefficients = [1.0]
    for k in range(1, terms + 1):
        coefficients.append(coefficients[-1] * ((2 * k - 1) ** 2 - 4 * order * order)
                            / (8 * k))
    return coefficients


def _bessel_float64(x: Tensor, size: Tensor, order: int, scaled: bool) -> Tensor:
    """I0 or I1 of a float64 ``x`` (``size = |x|``) to float64's precision.

        _bessel_float64(x, x.abs(), 0, scaled=False)   # i0(x)
    """
    near = where(size < _BESSEL64_SPLIT, x, 0.0)
    quarter_square = near.square() * 0.25
    # sum_k (x^2 / 4)^k / (k! (k + order)!), nested: 1 + q / (1 (1 + order)) (1 + ...)
    nested = quarter_square * (1.0 / (_BESSEL64_SERIES_TERMS
                                      * (_BESSEL64_SERIES_TERMS + order))) + 1.0
    for k in range(_BESSEL64_SERIES_TERMS - 1, 0, -1):
        nested = quarter_square * (1.0 / (k * (k + order))) * nested + 1.0
    small = nested * (near * 0.5) if order == 1 else nested
    if scaled:
        small = small * (-near.abs()).exp()
    far = where(size < _BESSEL64_SPLIT, _BESSEL64_SPLIT, size)
    coefficients = _asymptotic_bessel_coefficients(order, _BESSEL64_ASYMPTOTIC_TERMS)
    large = _horner(coefficients[::-1], 1.0 / far) / (far * (2.0 * math.pi)).sqrt()
    if not scaled:
        large = large * far.exp()
    if order == 1:
        large = where(x < 0.0, -large, large)
    return where(size < _BESSEL64_SPLIT, small, large)


def _bessel(op: str, input: Tensor, order: int, scaled: bool) -> Tensor:
    """I0 or I1 of ``input``, times ``exp(-|x|)`` when ``scaled``."""
    x = _tensor(op, input)
    size = x.abs()
    if x.dtype == np.float64:
        return _bessel_float64(x, size, order, scaled)
    small_table, large_table = (_I0_SMALL, _I0_LARGE) if order == 0 else (_I1_SMALL, _I1_LARGE)
    # each branch reads an argument inside its own range, so neither divides by 0 nor
    # overflows where it is not taken
    near = where(size < _BESSEL_SPLIT, x, 0.0)
    small = _horner(small_table, (near / _BESSEL_SPLIT).square())
    if order == 1:
        small = small * near
    if scaled:
        small = small * (-near.abs()).exp()
    far = where(size < _BESSEL_SPLIT, _BESSEL_SPLIT, size)
    large = _horner(large_table, _BESSEL_SPLIT / far) / far.sqrt()
    if not scaled:
        large = large * far.exp()
    if order == 1:
        large = where(x < 0.0, -large, large)
    return where(size < _BESSEL_SPLIT, small, large)


def i0(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind of order 0 (``torch.i0``).

        gingham.i0(gingham.tensor([0.0, 1.0, 5.0]))   # [1.0, 1.2661, 27.2399]
    """
    return _bessel("i0", input, 0, scaled=False)


def i0e(input: Tensor) -> Tensor:  # noqa: A002
    """``exp(-|x|) i0(x)`` (``torch.special.i0e``), finite for every finite ``x``."""
    return _bessel("i0e", input, 0, scaled=True)


def i1(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind of order 1 (``torch.special.i1``)."""
    return _bessel("i1", input, 1, scaled=False)


def i1e(input: Tensor) -> Tensor:  # noqa: A002
    """``exp(-|x|) i1(x)`` (``torch.special.i1e``)."""
    return _bessel("i1e", input, 1, scaled=True)


# erfcx's continued fraction erfc(x) = exp(-x^2) / sqrt(pi) / (x + 1/2 / (x + 1 / (x + ...))),
# evaluated from the 64th level up: relative error below 1e-9 at x >= 1 (measured against
# scipy.special.erfcx), where exp(x^2) erfc(x) would overflow times underflow (x > 9 in
# float32); below 1, exp(x^2) erfc(x) is a few units in the last place.
_ERFCX_LEVELS = 64
_ERFCX_SPLIT = 1.0


def erfcx(input: Tensor) -> Tensor:  # noqa: A002
    """The scaled complementary error function ``exp(x^2) erfc(x)`` (``torch.special.erfcx``),
    accurate where ``erfc`` itself underflows.

        gingham.special.erfcx(gingham.tensor([0.0, 10.0]))   # [1.0, 0.05614]
    """
    x = _tensor("erfcx", input)
    far = x >= _ERFCX_SPLIT
    near = where(far, 0.0, x)
    direct = near.square().exp() * near.erfc()
    y = where(far, _stopped(x), _ERFCX_SPLIT)
    fraction = y
    for k in range(_ERFCX_LEVELS, 0, -1):
        fraction = y + (k / 2) / fraction
    value = where(far, (1.0 / math.sqrt(math.pi)) / fraction, direct)
    value = where(x == math.inf, 0.0, where(x == -math.inf, math.inf, value))
    # erfcx' = 2 x erfcx - 2 / sqrt(pi): given, not derived through the 64 levels
    slope = 2.0 * x * _stopped(value) - 2.0 / math.sqrt(math.pi)
    return _with_slopes(value, (x, slope))


def xlog1py(input, other) -> Tensor:  # noqa: A002
    """``input * log1p(other)``, 0 where ``input`` is 0 unless ``other`` is NaN
    (``torch.special.xlog1py``).

        gingham.special.xlog1py(gingham.tensor([0.0, 2.0]), gingham.tensor([-1.0, 1.0]))
    """
    if not isinstance(input, Tensor):
        if not isinstance(other, Tensor):
            raise TypeError("xlog1py: one of input and other must be a gingham.Tensor")
        input = other.new_full((), float(input))
    x = _floating(input)
    y = _floating(other) if isinstance(other, Tensor) else float(other)
    zero = (x == 0.0) & (y == y) if isinstance(y, Tensor) else (x == 0.0)
    safe = where(zero, 0.0, y) if isinstance(y, Tensor) else y
    return where(zero, 0.0, x * (_as_like(safe, x)).log1p())


def _as_like(value, like: Tensor) -> Tensor:
    return value if isinstance(value, Tensor) else like.new_full((), float(value))


def ndtr(input: Tensor) -> Tensor:  # noqa: A002
    """The standard normal distribution function ``erfc(-x / sqrt 2) / 2``
    (``torch.special.ndtr``): relative accuracy in the lower tail, down to subnormals
    (``ndtr(-38)`` is ``2.9e-316`` in float64), as ``(1 + erf(x / sqrt 2)) / 2`` has not.

        gingham.special.ndtr(gingham.tensor([0.0, -10.0]))   # [0.5, 7.62e-24]
    """
    x = _tensor("ndtr", input)
    return 0.5 * (x * (-1.0 / math.sqrt(2.0))).erfc()


def log_ndtr(input: Tensor) -> Tensor:  # noqa: A002
    """``log(ndtr(x))`` (``torch.special.log_ndtr``), finite far into the lower tail."""
    x = _tensor("log_ndtr", input)
    lower = x < -_ERFCX_SPLIT
    t = where(lower, -x, 0.0) * (1.0 / math.sqrt(2.0))
    tail = (0.5 * erfcx(t)).log() - t.square()
    # log1p of the other tail: ndtr(x) rounds to 1 long before its log is 0
    upper = where(lower, 0.0, x)
    return where(lower, tail, (-ndtr(-upper)).log1p())


def ndtri(input: Tensor) -> Tensor:  # noqa: A002
    """The standard normal quantile function, ``sqrt 2 erfinv(2p - 1)``
    (``torch.special.ndtri``)."""
    p = _tensor("ndtri", input)
    return (2.0 * p - 1.0).erfinv() * math.sqrt(2.0)


def entr(input: Tensor) -> Tensor:  # noqa: A002
    """``-x log x`` elementwise, 0 at 0 and -inf below (``torch.special.entr``)."""
    x = _tensor("entr", input)
    positive = x > 0.0
    safe = where(positive, x, 1.0)
    value = where(positive, -safe * safe.log(), where(x == 0.0, 0.0, -math.inf))
    return where(x != x, x, value)


__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "igamma", "igammac", "i0", "i0e",
           "i1", "i1e", "erfcx", "xlog1py", "ndtr", "log_ndtr", "ndtri", "entr"]
