"""gingham.distributions against torch.distributions (float64): log_prob, cdf, entropy, moments
and kl_divergence with their gradients in the parameters; samples by moments and KS
statistics with fixed seeds; rsample's gradients against torch's on the same draws; the
validate_args checks. Each test's outputs are one program forward and one backward.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as T
from scipy import stats

import gingham
from gingham import distributions as D
from gingham.frontend.tensor import realize

TOLERANCE = dict(rtol=1e-7, atol=1e-9)

PARAMETERS = {
    "loc": [0.3, -1.0, 2.0], "scale": [0.5, 2.0, 1.3], "low": [0.0, -1.0, 1.0],
    "high": [1.0, 3.0, 1.5], "rate": [0.5, 2.0, 4.0], "alpha": [0.4, 1.7, 6.0],
    "beta": [1.5, 0.7, 3.0], "probs": [0.2, 0.9, 0.5], "logits": [0.2, -3.0, 1.0],
    "cat": [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], "cat_logits": [[1.0, -2.0, 0.5], [0.0, 0.3, 3.0]],
    "mvn_loc": [0.3, -1.0], "cov": [[2.0, 0.3], [0.3, 1.0]],
    "tril": [[1.5, 0.0], [-0.4, 0.8]],
}

# name: (build(lib, params) -> distribution, value, methods compared)
CASES = {
    "Normal": (lambda L, p: L.Normal(p["loc"], p["scale"]), [0.1, 0.7, -2.0],
               ("log_prob", "cdf", "icdf", "entropy", "mean", "variance")),
    "Uniform": (lambda L, p: L.Uniform(p["low"], p["high"]), [0.1, 0.7, 1.2],
                ("log_prob", "cdf", "icdf", "entropy", "mean", "variance")),
    "Exponential": (lambda L, p: L.Exponential(p["rate"]), [0.1, 0.7, 3.0],
                    ("log_prob", "cdf", "icdf", "entropy", "mean", "variance")),
    "Laplace": (lambda L, p: L.Laplace(p["loc"], p["scale"]), [0.1, 0.7, -2.0],
                ("log_prob", "cdf", "icdf", "entropy", "mean", "variance")),
    "Gamma": (lambda L, p: L.Gamma(p["alpha"], p["beta"]), [0.1, 0.7, 3.0],
              ("log_prob", "cdf", "entropy", "mean", "variance")),
    "Beta": (lambda L, p: L.Beta(p["alpha"], p["beta"]), [0.1, 0.7, 0.95],
             ("log_prob", "entropy", "mean", "variance")),
    "Bernoulli": (lambda L, p: L.Bernoulli(probs=p["probs"]), [1.0, 0.0, 1.0],
                  ("log_prob", "entropy", "mean", "variance")),
    "BernoulliLogits": (lambda L, p: L.Bernoulli(logits=p["logits"]), [1.0, 0.0, 0.0],
                        ("log_prob", "entropy", "mean", "variance")),
    "Poisson": (lambda L, p: L.Poisson(p["rate"]), [3.0, 0.0, 7.0],
                ("log_prob", "mean", "variance")),
    "Binomial": (lambda L, p: L.Binomial(5, probs=p["probs"]), [3.0, 5.0, 0.0],
                 ("log_prob", "entropy", "mean", "variance")),
    "Categorical": (lambda L, p: L.Categorical(probs=p["cat"]), [2, 0], ("log_prob", "entropy")),
    "OneHotCategorical": (lambda L, p: L.OneHotCategorical(logits=p["cat_logits"]),
                          [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]],
                          ("log_prob", "entropy", "mean", "variance")),
    "Multinomial": (lambda L, p: L.Multinomial(4, probs=p["cat"]),
                    [[0.0, 1.0, 3.0], [2.0, 0.0, 2.0]], ("log_prob", "mean", "variance")),
    "Dirichlet": (lambda L, p: L.Dirichlet(p["cat"]), [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]],
                  ("log_prob", "entropy", "mean", "variance")),
    "MultivariateNormal": (lambda L, p: L.MultivariateNormal(p["mvn_loc"],
                                                             covariance_matrix=p["cov"]),
                           [[0.1, 0.2], [1.0, -1.0]], ("log_prob", "entropy", "mean", "variance")),
    "MultivariateNormalTril": (lambda L, p: L.MultivariateNormal(p["mvn_loc"],
                                                                 scale_tril=p["tril"]),
                               [[0.1, 0.2], [1.0, -1.0]], ("log_prob", "entropy", "variance")),
    "Independent": (lambda L, p: L.Independent(L.Normal(p["loc"], p["scale"]), 1),
                    [0.1, 0.7, -2.0], ("log_prob", "entropy", "mean")),
}

KL_PAIRS = {
    "Normal": (lambda L, p: L.Normal(p["loc"], p["scale"]), lambda L, p: L.Normal(p["beta"], p["rate"])),
    "Uniform": (lambda L, p: L.Uniform(p["low"], p["high"]), lambda L, p: L.Uniform(-2.0, p["rate"])),
    "Exponential": (lambda L, p: L.Exponential(p["rate"]), lambda L, p: L.Exponential(p["beta"])),
    "Laplace": (lambda L, p: L.Laplace(p["loc"], p["scale"]), lambda L, p: L.Laplace(p["beta"], p["rate"])),
    "Gamma": (lambda L, p: L.Gamma(p["alpha"], p["beta"]), lambda L, p: L.Gamma(p["rate"], p["scale"])),
    "Beta": (lambda L, p: L.Beta(p["alpha"], p["beta"]), lambda L, p: L.Beta(p["rate"], p["scale"])),
    "Bernoulli": (lambda L, p: L.Bernoulli(probs=p["probs"]), lambda L, p: L.Bernoulli(logits=p["logits"])),
    "Categorical": (lambda L, p: L.Categorical(probs=p["cat"]), lambda L, p: L.Categorical(logits=p["cat_logits"])),
    "OneHotCategorical": (lambda L, p: L.OneHotCategorical(probs=p["cat"]),
                          lambda L, p: L.OneHotCategorical(logits=p["cat_logits"])),
    "Dirichlet": (lambda L, p: L.Dirichlet(p["cat"]), lambda L, p: L.Dirichlet(p["cat"] * 3.0)),
    "Poisson": (lambda L, p: L.Poisson(p["rate"]), lambda L, p: L.Poisson(p["alpha"])),
    "Binomial": (lambda L, p: L.Binomial(5, probs=p["probs"]), lambda L, p: L.Binomial(5, logits=p["logits"])),
    "MultivariateNormal": (lambda L, p: L.MultivariateNormal(p["mvn_loc"], covariance_matrix=p["cov"]),
                           lambda L, p: L.MultivariateNormal(p["mvn_loc"] * 2.0, scale_tril=p["tril"])),
    "Independent": (lambda L, p: L.Independent(L.Normal(p["loc"], p["scale"]), 1),
                    lambda L, p: L.Independent(L.Normal(p["beta"], p["rate"]), 1)),
    "UniformNormal": (lambda L, p: L.Uniform(p["low"], p["high"]), lambda L, p: L.Normal(p["loc"], p["scale"])),
    "ExponentialGamma": (lambda L, p: L.Exponential(p["rate"]), lambda L, p: L.Gamma(p["alpha"], p["beta"])),
    "GammaExponential": (lambda L, p: L.Gamma(p["alpha"], p["beta"]), lambda L, p: L.Exponential(p["rate"])),
}


def _leaves(device):
    g = {k: gingham.tensor(np.array(v, np.float64), device=device).requires_grad_()
         for k, v in PARAMETERS.items()}
    t = {k: torch.tensor(np.array(v, np.float64), requires_grad=True)
         for k, v in PARAMETERS.items()}
    return g, t


def _check_gradients(g_params, t_params, g_outputs, t_outputs):
    """The gradient of the sum of every output (NaN-free) in each parameter, as torch's."""
    sum(o.sum() for o in g_outputs).backward()
    sum(o.sum() for o in t_outputs).backward()
    realize([p.grad for p in g_params.values() if p.grad is not None])
    for name, leaf in t_params.items():
        if leaf.grad is None:
            assert g_params[name].grad is None, name
            continue
        np.testing.assert_allclose(g_params[name].grad.numpy(), leaf.grad.numpy(),
                                   err_msg=f"d/d{name}", rtol=1e-6, atol=1e-8)


def test_log_prob_cdf_entropy_moments_match_torch(device):
    D.Distribution.set_default_validate_args(False)  # checks are tested on their own
    T.Distribution.set_default_validate_args(False)
    try:
        g_params, t_params = _leaves(device)
        g_out, t_out = {}, {}
        for name, (build, value, methods) in CASES.items():
            g_dist, t_dist = build(D, g_params), build(T, t_params)
            assert g_dist.batch_shape == tuple(t_dist.batch_shape), name
            assert g_dist.event_shape == tuple(t_dist.event_shape), name
            t_value = torch.tensor(value)
            t_value = t_value.double() if t_value.is_floating_point() else t_value
            g_value = gingham.tensor(t_value.numpy(), device=device)
            for method in methods:
                if method in ("log_prob", "cdf"):
                    g_out[name, method] = getattr(g_dist, method)(g_value)
                    t_out[name, method] = getattr(t_dist, method)(t_value)
                elif method == "icdf":
                    q = torch.tensor([0.1, 0.5, 0.8], dtype=torch.float64)
                    g_out[name, method] = g_dist.icdf(gingham.tensor(q.numpy(), device=device))
                    t_out[name, method] = t_dist.icdf(q)
                elif method == "entropy":
                    g_out[name, method], t_out[name, method] = g_dist.entropy(), t_dist.entropy()
                else:
                    g_out[name, method] = getattr(g_dist, method)
                    t_out[name, method] = getattr(t_dist, method)
        realize(list(g_out.values()))
        for key, expected in t_out.items():
            assert g_out[key].shape == tuple(expected.shape), key
            np.testing.assert_allclose(g_out[key].numpy(), expected.detach().numpy(),
                                       err_msg=str(key), **TOLERANCE)
        # torch has no derivative of igamma in its first argument (Gamma.cdf's concentration)
        differentiated = [key for key in t_out if key != ("Gamma", "cdf")]
        _check_gradients(g_params, t_params, [g_out[k] for k in differentiated],
                         [t_out[k] for k in differentiated])
    finally:
        D.Distribution.set_default_validate_args(True)
        T.Distribution.set_default_validate_args(True)


def test_kl_divergence_matches_torch(device):
    g_params, t_params = _leaves(device)
    g_out, t_out = [], []
    for name, (build_p, build_q) in KL_PAIRS.items():
        g_out.append(D.kl_divergence(build_p(D, g_params), build_q(D, g_params)))
        t_out.append(T.kl_divergence(build_p(T, t_params), build_q(T, t_params)))
    realize(g_out)
    for name, got, expected in zip(KL_PAIRS, g_out, t_out):
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), err_msg=name,
                                   **TOLERANCE)
    finite = [(g, t) for g, t in zip(g_out, t_out) if torch.isfinite(t).all()]
    _check_gradients(g_params, t_params, [g for g, _ in finite], [t for _, t in finite])
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(1.0))


# every draw of the test is one program
SAMPLED = {
    "Normal": lambda t: D.Normal(t([0.5, -2.0]), t([1.0, 3.0])),
    "Uniform": lambda t: D.Uniform(t([0.0, -1.0]), t([1.0, 4.0])),
    "Exponential": lambda t: D.Exponential(t([0.5, 3.0])),
    "Laplace": lambda t: D.Laplace(t([0.5, -2.0]), t([1.0, 0.2])),
    "Gamma": lambda t: D.Gamma(t([0.3, 4.0]), t([1.0, 2.0])),
    "Beta": lambda t: D.Beta(t([0.5, 3.0]), t([2.0, 1.5])),
    "Bernoulli": lambda t: D.Bernoulli(probs=t([0.2, 0.7])),
    "Binomial": lambda t: D.Binomial(t([6.0, 40.0]), probs=t([0.2, 0.7])),  # BTRS at 40
    "Poisson": lambda t: D.Poisson(t([3.0, 40.0])),
    "Categorical": lambda t: D.Categorical(probs=t([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]])),
}
# torch's twins of the samplers written here, for the KS statistic against their cdf (Gamma's
# draws come from F.random_gamma, whose distribution is tested with it)
_TWINS = {
    "Normal": lambda t: T.Normal(t([0.5, -2.0]), t([1.0, 3.0])),
    "Uniform": lambda t: T.Uniform(t([0.0, -1.0]), t([1.0, 4.0])),
    "Exponential": lambda t: T.Exponential(t([0.5, 3.0])),
    "Laplace": lambda t: T.Laplace(t([0.5, -2.0]), t([1.0, 0.2])),
}
DRAWS = 4000


def test_samples_have_the_distributions_moments_and_cdf(device):
    gingham.manual_seed(0)
    dists = {name: build(lambda v: gingham.tensor(np.array(v, np.float32), device=device))
             for name, build in SAMPLED.items()}
    draws = {name: d.sample((DRAWS,)) for name, d in dists.items()}
    realize(list(draws.values()))
    for name, d in dists.items():
        x = draws[name].numpy().astype(np.float64)
        assert x.shape == (DRAWS,) + d.batch_shape, name
        if name == "Categorical":
            frequencies = np.stack([(x == k).mean(0) for k in range(3)], -1)
            np.testing.assert_allclose(frequencies, d.probs.numpy(), atol=0.04, err_msg=name)
            continue
        mean, variance = d.mean.numpy(), d.variance.numpy()
        # within 5 standard errors of the mean; the variance within 15 %
        assert (np.abs(x.mean(0) - mean) < 5 * np.sqrt(variance / DRAWS)).all(), name
        np.testing.assert_allclose(x.var(0), variance, rtol=0.15, err_msg=name)
        if name in _TWINS:
            twin = _TWINS[name](lambda v: torch.tensor(v, dtype=torch.float64))
            twin._validate_args = False
            for column in range(2):
                def cdf(v, column=column):
                    values = torch.tensor(v, dtype=torch.float64)[:, None]
                    return twin.cdf(values).numpy()[:, column]
                assert stats.kstest(x[:, column], cdf).pvalue > 1e-3, (name, column)


def test_rsample_gradients_match_torch_on_the_same_draws(device):
    gingham.manual_seed(1)
    loc = gingham.tensor([0.5, -2.0], device=device).requires_grad_()
    scale = gingham.tensor([1.0, 3.0], device=device).requires_grad_()
    alpha = gingham.tensor([0.3, 4.0], device=device).requires_grad_()
    tril = gingham.tensor([[1.5, 0.0], [-0.4, 0.8]], device=device).requires_grad_()
    normal = D.Normal(loc, scale).rsample((5,))
    laplace = D.Laplace(loc, scale).rsample((5,))
    gamma = D.Gamma(alpha, scale).rsample((5,))
    mvn = D.MultivariateNormal(loc, scale_tril=tril).rsample((5,))
    draws = [normal, laplace, gamma, mvn]
    realize(draws)
    loss = sum((d.square() * d.sin()).sum() for d in draws)
    loss.backward()
    realize([loc.grad, scale.grad, alpha.grad, tril.grad])

    t_loc = torch.tensor([0.5, -2.0], requires_grad=True)
    t_scale = torch.tensor([1.0, 3.0], requires_grad=True)
    t_alpha = torch.tensor([0.3, 4.0], requires_grad=True)
    t_tril = torch.tensor([[1.5, 0.0], [-0.4, 0.8]], requires_grad=True)
    # torch's reparameterizations applied to gingham's noise
    eps = torch.tensor((normal.numpy() - loc.numpy()) / scale.numpy())
    t_normal = t_loc + eps * t_scale
    lap = torch.tensor((laplace.numpy() - loc.numpy()) / scale.numpy())
    t_laplace = t_loc + lap * t_scale
    standard = torch.tensor(gamma.numpy() * scale.numpy())
    # the implicit derivative dz/dalpha of a standard Gamma draw, as torch's _standard_gamma
    grad_alpha = torch._standard_gamma_grad(t_alpha.detach().expand(5, 2), standard)
    t_standard = standard + (t_alpha - t_alpha.detach()) * grad_alpha
    t_gamma = t_standard / t_scale
    white = torch.linalg.solve_triangular(torch.tensor(tril.numpy()), torch.tensor(
        mvn.numpy() - loc.numpy()).T, upper=False).T
    t_mvn = t_loc + (t_tril @ white.T).T
    t_draws = [t_normal, t_laplace, t_gamma, t_mvn]
    t_loss = sum((d.square() * d.sin()).sum() for d in t_draws)
    t_loss.backward()
    for got, expected in ((loc, t_loc), (scale, t_scale), (alpha, t_alpha), (tril, t_tril)):
        np.testing.assert_allclose(got.grad.numpy(), expected.grad.numpy(), rtol=2e-3,
                                   atol=1e-4)


def test_validate_args_and_shapes_as_torch():
    device = "reference"
    with pytest.raises(ValueError, match="scale"):
        D.Normal(gingham.tensor([0.0], device=device), gingham.tensor([-1.0], device=device))
    with pytest.raises(ValueError, match="either `probs` or `logits`"):
        D.Bernoulli()
    normal = D.Normal(gingham.zeros((3,), device=device), 1.0)
    with pytest.raises(ValueError, match="broadcastable"):
        normal.log_prob(gingham.zeros((2,), device=device))
    with pytest.raises(ValueError, match="support"):
        D.Exponential(gingham.ones((2,), device=device)).log_prob(
            gingham.tensor([-1.0, 1.0], device=device))
    with pytest.raises(ValueError, match="Exactly one"):
        D.MultivariateNormal(gingham.zeros((2,), device=device))
    assert D.Normal(0.0, 1.0, validate_args=False).log_prob(
        gingham.tensor([0.0])).shape == (1,)
    d = D.Dirichlet(gingham.ones((4, 3), device=device))
    assert (d.batch_shape, d.event_shape) == ((4,), (3,))
    assert d.sample((2,)).shape == (2, 4, 3)
