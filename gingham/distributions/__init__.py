"""``torch.distributions`` on gingham tensors: parameters broadcast to a ``batch_shape``,
``sample``/``rsample(sample_shape)`` drawn on the device from the default generator
(``gingham.manual_seed``), ``log_prob``, ``entropy``, ``cdf``/``icdf``, moments, and
``kl_divergence`` for the pairs PyTorch registers among these.

    from gingham import distributions as D
    q = D.Normal(mu, sigma)                    # mu, sigma: tensors that require gradients
    z = q.rsample((16,))                       # reparameterized: gradients reach mu, sigma
    loss = -D.Independent(q, 1).log_prob(z).mean() + D.kl_divergence(q, D.Normal(0.0, 1.0)).sum()

Checks of ``validate_args`` (on by default, as PyTorch's) read one bool from the device per
check; pass ``validate_args=False`` (or ``Distribution.set_default_validate_args(False)``)
inside compiled steps.
"""

from . import distribution as constraints
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, Multinomial, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate import Dirichlet, Independent, MultivariateNormal

__all__ = ["Distribution", "Normal", "Uniform", "Exponential", "Laplace", "Gamma", "Beta",
           "Bernoulli", "Categorical", "OneHotCategorical", "Binomial", "Multinomial",
           "Poisson", "Dirichlet", "MultivariateNormal", "Independent", "kl_divergence",
           "register_kl", "constraints"]
