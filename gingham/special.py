"""``torch.special``'s names: the special functions of :mod:`gingham.frontend.special` and
the elementwise math of :class:`gingham.Tensor` under the names PyTorch gives them here.

    from gingham import special
    special.gammaln(x)            # gingham.lgamma(x)
    special.erfcx(x), special.i1e(x), special.xlog1py(x, y)
    special.gammainc(a, x)        # gingham.igamma(a, x)
"""

from __future__ import annotations

from .frontend.special import (
    digamma,
    entr,
    erfcx,
    i0,
    i0e,
    i1,
    i1e,
    igamma as gammainc,
    igammac as gammaincc,
    lgamma as gammaln,
    log_ndtr,
    mvlgamma as multigammaln,
    ndtr,
    ndtri,
    polygamma,
    xlog1py,
)
from .frontend.tensor import METHOD_FUNCTIONS as _METHODS
from .frontend.tensor import exp2, expm1, log1p, logsumexp

psi = digamma
erf, erfc, erfinv, logit, round, sinc, xlogy = (  # noqa: A001 (torch.special.round)
    _METHODS[name] for name in "erf erfc erfinv logit round sinc xlogy".split())
expit = _METHODS["sigmoid"]
softmax, log_softmax = _METHODS["softmax"], _METHODS["log_softmax"]

__all__ = ["digamma", "psi", "polygamma", "gammaln", "multigammaln", "gammainc", "gammaincc",
           "i0", "i0e", "i1", "i1e", "erfcx", "xlog1py", "xlogy", "ndtr", "ndtri", "log_ndtr",
           "entr", "erf", "erfc", "erfinv", "expit", "exp2", "expm1", "log1p", "logit",
           "logsumexp", "round", "sinc", "softmax", "log_softmax"]
