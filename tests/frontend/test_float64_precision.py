"""float64 precision audit: gingham's float64 results against torch's float64 results to a
float64 tolerance (relative 1e-12), far tighter than any float32 rounding (~6e-8), so a
constant, a literal or an intermediate silently rounded to float32 inside a float64 formula
fails here.

Each test builds every case of its table on one device, realizes them together (one compiled
program) and reports every mismatch at once. At the end, integer wrap-around (signed overflow,
``MIN / -1``), which C leaves undefined and PyTorch defines.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as GF
from gingham.frontend.tensor import realize

# relative error allowed: a few hundred float64 ulps (formulas of several steps), still five
# orders of magnitude below float32's rounding; ATOL covers values that cross zero
RTOL = 1e-12
ATOL = 1e-13

RNG = np.random.default_rng(64)
N = 29
INPUTS = {
    # no exact zero (several functions have a kink or a removable singularity there)
    "real": np.linspace(-3.1, 3.3, N) + 0.0123,
    "positive": np.geomspace(0.03, 9.0, N),
    "unit": np.linspace(-0.97, 0.96, N),
    "prob": np.linspace(0.013, 0.987, N),
    "above_one": np.geomspace(1.05, 20.0, N),
    "gamma": np.concatenate([np.linspace(-4.7, -0.2, 10), np.geomspace(0.01, 40.0, N - 10)]),
    "wide": np.concatenate([-np.geomspace(0.01, 60.0, 14), np.geomspace(0.01, 300.0, 15)]),
    "real2": RNG.uniform(-2.5, 2.5, N),
    "positive2": RNG.uniform(0.2, 3.0, N),
    "matrix": RNG.standard_normal((6, 7)),
    "matrix2": RNG.standard_normal((7, 5)),
    "logits": RNG.standard_normal((5, 7)) * 3.0,
    "probs": RNG.uniform(0.05, 0.95, (5, 7)),
    "image": RNG.standard_normal((2, 4, 6, 6)),
    "weight": RNG.standard_normal((3, 4, 3, 3)) * 0.3,
    "channels": RNG.uniform(0.5, 1.5, 4),
    "channels2": RNG.standard_normal(4),
    "rows7": RNG.uniform(0.5, 1.5, 7),
    "rows7b": RNG.standard_normal(7),
    "targets": np.array([0, 3, 6, 1, 2]),
}

Case = tuple[Callable, tuple[str, ...]]


def _first(result):
    """gingham's training batch_norm returns (y, running mean, running var), torch's y."""
    return result[0] if isinstance(result, tuple) else result


def _unary(name: str, domain: str) -> Case:
    return (lambda lib, F, x: getattr(lib, name)(x)), (domain,)


def _method(name: str, domain: str, *args, **kwargs) -> Case:
    return (lambda lib, F, x: getattr(x, name)(*args, **kwargs)), (domain,)


def _functional(name: str, domains: tuple[str, ...], *args, **kwargs) -> Case:
    return (lambda lib, F, *xs: getattr(F, name)(*xs, *args, **kwargs)), domains


UNARY = {
    **{name: _unary(name, "real") for name in
       "exp exp2 expm1 sin cos tan atan sinh cosh tanh asinh erf erfc sigmoid sinc "
       "deg2rad rad2deg frac trunc abs neg sign square".split()},
    **{name: _unary(name, "positive") for name in
       "log log2 log10 log1p sqrt rsqrt reciprocal lgamma".split()},
    **{name: _unary(name, "unit") for name in "asin acos atanh erfinv".split()},
    "acosh": _unary("acosh", "above_one"),
    "logit": _unary("logit", "prob"),
    "digamma": _unary("digamma", "gamma"),
    "lgamma_negative": _unary("lgamma", "gamma"),
    "i0": _unary("i0", "wide"),
    **{name: ((lambda lib, F, x, name=name: getattr(lib.special, name)(x)), ("wide",))
       for name in ("i0e", "i1", "i1e")},
    "expm1_small": (lambda lib, F, x: (x * 1e-6).expm1(), ("real",)),
    "log1p_small": (lambda lib, F, x: (x * 1e-6).log1p(), ("real",)),
    "pow_scalar": _method("pow", "positive", 1.7),
    "pow_half": _method("pow", "positive", 0.5),
    "mul_scalar": (lambda lib, F, x: x * 0.1 + 0.3, ("real",)),
    "div_scalar": (lambda lib, F, x: x / 3.0, ("real",)),
    "clamp": _method("clamp", "real", -0.1, 0.7),
}

BINARY = {
    name: ((lambda lib, F, x, y, name=name: getattr(lib, name)(x, y)), domains)
    for name, domains in {
        "atan2": ("real", "real2"), "pow": ("positive", "real2"), "hypot": ("real", "real2"),
        "fmod": ("real", "real2"), "remainder": ("real", "real2"),
        "logaddexp": ("real", "real2"), "logaddexp2": ("real", "real2"),
        "xlogy": ("real", "positive2"), "copysign": ("positive", "real2"),
        "div": ("real", "real2"), "maximum": ("real", "real2"), "true_divide": ("real", "real2"),
    }.items()
}
BINARY["lerp"] = (lambda lib, F, x, y: lib.lerp(x, y, 0.3), ("real", "real2"))
BINARY["addcdiv"] = (lambda lib, F, x, y: lib.addcdiv(x, x, y, value=0.7), ("real", "real2"))

REDUCTIONS = {
    "sum": _method("sum", "matrix", 1),
    "mean": _method("mean", "matrix", 0),
    "var": _method("var", "matrix", 1),
    "var_biased": _method("var", "matrix", 0, unbiased=False),
    "std": _method("std", "matrix", 1),
    "logsumexp": _method("logsumexp", "matrix", 1),
    "norm": _method("norm", "matrix"),
    "norm_dim": (lambda lib, F, x: x.norm(dim=1), ("matrix",)),
    "norm_p3": (lambda lib, F, x: x.norm(p=3, dim=0), ("matrix",)),
    "cumsum": _method("cumsum", "real", 0),
    "cumprod": (lambda lib, F, x: (x * 0.3 + 1.0).cumprod(0), ("real",)),
    "prod": (lambda lib, F, x: (x * 0.3 + 1.0).prod(), ("real",)),
    "mean_all": _method("mean", "real"),
    "softmax": _functional("softmax", ("logits",), dim=1),
    "log_softmax": _functional("log_softmax", ("logits",), dim=1),
    "softmin": _functional("softmin", ("logits",), dim=1),
    "layer_norm": (lambda lib, F, x, w, b: F.layer_norm(x, (7,), w, b), ("logits", "rows7",
                                                                        "rows7b")),
    "batch_norm": (lambda lib, F, x, w, b: _first(F.batch_norm(x, None, None, w, b,
                                                               training=True)),
                   ("image", "channels", "channels2")),
    "group_norm": (lambda lib, F, x, w, b: F.group_norm(x, 2, w, b),
                   ("image", "channels", "channels2")),
    "instance_norm": _functional("instance_norm", ("image",)),
    "normalize": _functional("normalize", ("logits",), dim=1),
    "cosine_similarity": _functional("cosine_similarity", ("logits", "probs"), dim=1),
    "matmul": (lambda lib, F, a, b: a @ b, ("matrix", "matrix2")),
    "linear": (lambda lib, F, a, b: F.linear(a, b.T), ("matrix", "matrix2")),
    "conv2d": _functional("conv2d", ("image", "weight"), padding=1),
    "interpolate_bilinear": _functional("interpolate", ("image",), scale_factor=2,
                                        mode="bilinear", align_corners=False),
    "interpolate_bicubic": _functional("interpolate", ("image",), size=(9, 9),
                                       mode="bicubic", align_corners=True),
    "avg_pool2d": _functional("avg_pool2d", ("image",), 3, 2, 1),
}

ACTIVATIONS = {
    **{name: _functional(name, ("real",)) for name in
       "silu mish elu selu celu softplus logsigmoid hardswish hardsigmoid softsign "
       "tanhshrink gelu".split()},
    "gelu_tanh": _functional("gelu", ("real",), approximate="tanh"),
    "leaky_relu": _functional("leaky_relu", ("real",), 0.01),
    "elu_alpha": _functional("elu", ("real",), 0.3),
    "softplus_beta": _functional("softplus", ("real",), beta=1.7, threshold=3.0),
}


LOSSES = {
    "cross_entropy": _functional("cross_entropy", ("logits", "targets")),
    "cross_entropy_smoothing": _functional("cross_entropy", ("logits", "targets"),
                                           label_smoothing=0.1),
    "cross_entropy_probs": (lambda lib, F, x, p: F.cross_entropy(x, p), ("logits", "probs")),
    "nll": (lambda lib, F, x, t: F.nll_loss(F.log_softmax(x, 1), t), ("logits", "targets")),
    "mse": _functional("mse_loss", ("logits", "probs")),
    "l1": _functional("l1_loss", ("logits", "probs")),
    "smooth_l1": _functional("smooth_l1_loss", ("logits", "probs"), beta=0.7),
    "huber": _functional("huber_loss", ("logits", "probs"), delta=0.6),
    "bce": (lambda lib, F, p, q: F.binary_cross_entropy(p, q), ("probs", "probs")),
    "bce_with_logits": _functional("binary_cross_entropy_with_logits", ("logits", "probs")),
    "kl_div": (lambda lib, F, x, p: F.kl_div(F.log_softmax(x, 1), p, reduction="batchmean"),
               ("logits", "probs")),
    "poisson_nll": _functional("poisson_nll_loss", ("logits", "probs")),
    "gaussian_nll": (lambda lib, F, x, p: F.gaussian_nll_loss(x, p, p + 0.1),
                     ("logits", "probs")),
    "soft_margin": _functional("soft_margin_loss", ("logits", "probs")),
}

TABLES = {"unary": UNARY, "binary": BINARY, "reductions": REDUCTIONS,
          "activations": ACTIVATIONS, "losses": LOSSES}

# a sample whose gradients (of a weighted sum, so no gradient is trivially all ones) are checked
# (digamma's is trigamma, which torch computes to only ~5e-10 in float64: checked below
# against SciPy instead)
GRADIENTS = ["exp", "log", "tan", "erf", "erfinv", "lgamma", "sigmoid", "logit", "i0", "i1e",
             "sinc", "atan2", "pow", "hypot", "logaddexp", "xlogy", "var", "std",
             "logsumexp", "norm", "cumprod", "softmax", "log_softmax", "layer_norm",
             "batch_norm", "group_norm", "conv2d", "interpolate_bilinear", "gelu",
             "gelu_tanh", "mish", "selu", "softplus", "cross_entropy", "bce_with_logits",
             "kl_div", "huber", "smooth_l1"]


def _all_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for table in TABLES.values():
        cases.update(table)
    return cases


def _mismatch(label: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """A description of where ``got`` leaves ``want`` by more than the float64 tolerance."""
    if got.shape != want.shape:
        return f"{label}: shape {got.shape}, torch's {want.shape}"
    error = np.abs(got - want)
    allowed = ATOL + RTOL * np.abs(want)
    bad = ~(error <= allowed) & ~(np.isnan(got) & np.isnan(want))
    if not bad.any():
        return None
    worst = np.unravel_index(np.argmax(np.where(bad, error / allowed, 0)), got.shape)
    return (f"{label}: {int(bad.sum())} of {got.size} values off, worst at {worst}: "
            f"{got[worst]!r} vs torch's {want[worst]!r} (relative "
            f"{error[worst] / max(abs(want[worst]), 1e-300):.2e})")


def _check(device: str, cases: dict[str, Case], gradients: list[str]) -> None:
    outputs, expected, leaves, torch_leaves = {}, {}, {}, {}
    for name, (function, domains) in cases.items():
        arrays = [INPUTS[d] for d in domains]
        # only float inputs (not class indices) are leaves of the gradient
        wants = [name in gradients and a.dtype == np.float64 for a in arrays]
        leaves[name] = [gingham.tensor(a, device=device, requires_grad=w)
                        for a, w in zip(arrays, wants)]
        torch_leaves[name] = [torch.tensor(a, requires_grad=w) for a, w in zip(arrays, wants)]
        outputs[name] = function(gingham, GF, *leaves[name])
        expected[name] = function(torch, TF, *torch_leaves[name])
    weights = {name: RNG.standard_normal(tuple(expected[name].shape)) for name in gradients}
    if gradients:
        total = sum((outputs[n] * gingham.tensor(weights[n], device=device)).sum()
                    for n in gradients)
        total.backward()
        sum((expected[n] * torch.tensor(weights[n])).sum() for n in gradients).backward()
    grads = [leaf.grad for n in gradients for leaf in leaves[n] if leaf.requires_grad]
    realize(list(outputs.values()) + grads)
    failures = []
    for name in cases:
        got = outputs[name]
        if got.dtype != np.float64:
            failures.append(f"{name}: dtype {got.dtype}")
            continue
        failures.append(_mismatch(name, got.numpy(), expected[name].detach().numpy()))
        if name in gradients:
            for i, (leaf, torch_leaf) in enumerate(zip(leaves[name], torch_leaves[name])):
                if leaf.requires_grad:
                        failures.append(_mismatch(f"d {name}/d x{i}", leaf.grad.numpy(),
                                              torch_leaf.grad.numpy()))
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("table", list(TABLES))
def test_float64_ops_match_torch(device, table):
    cases = TABLES[table]
    _check(device, cases, [name for name in GRADIENTS if name in cases])


def test_float64_digamma_gradient_matches_scipy_trigamma(device):
    """digamma's derivative against SciPy's trigamma (torch's float64 trigamma truncates its
    asymptotic series early: 4.8e-10 off SciPy at x = 1, where gingham's agrees)."""
    special = pytest.importorskip("scipy.special")
    values = INPUTS["gamma"]
    x = gingham.tensor(values, device=device, requires_grad=True)
    gingham.digamma(x).sum().backward()
    failure = _mismatch("d digamma", x.grad.numpy(), special.polygamma(1, values))
    assert failure is None, failure


# Tile's typing: a weakly typed float expression (literals only) takes float64 where it meets
# float64, as a lone literal does; NumPy in float64 is the oracle.
TILE_LITERALS = {
    "select": ("O = X * (X > 0.0 ? 0.1 : 0.2);", lambda x: x * np.where(x > 0, 0.1, 0.2)),
    "quotient": ("O = X * (1.0 / 3.0);", lambda x: x * (1.0 / 3.0)),
    "negation": ("O = X + -(X > 0.0 ? 0.1 : 0.7);", lambda x: x - np.where(x > 0, 0.1, 0.7)),
    "cast": ("O = as_float(X > 0.0 ? 0.1 : 0.3, 64) + X;",
             lambda x: np.where(x > 0, 0.1, 0.3) + x),
    "call": ("O = X * exp(X > 0.0 ? 0.1 : 0.3);", lambda x: x * np.exp(np.where(x > 0, 0.1,
                                                                                  0.3))),
    "comparison": ("O = X < (X > 0.0 ? 0.1 : -0.3);", lambda x: x < np.where(x > 0, 0.1, -0.3)),
}


@pytest.mark.parametrize("name", list(TILE_LITERALS))
def test_float64_tile_literal_expressions_keep_float64(device, name):
    from gingham import tile

    statement, oracle = TILE_LITERALS[name]
    x = np.array([-0.3, -0.1, 0.1, 0.3, 1e-9, 0.7, 2.5])
    got = np.asarray(tile.function(f"function (X) -> (O) {{ {statement} }}")(x, device=device))
    want = oracle(x)
    assert got.dtype == want.dtype
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:  # a float32 literal would be ~1e-8 off
        failure = _mismatch(name, got, want)
        assert failure is None, failure


# -- optimisers and schedulers ---------------------------------------------------------------------

OPTIMISERS = {
    "sgd": lambda m, ps: m.SGD(ps, lr=0.1, weight_decay=0.01),
    "sgd_momentum": lambda m, ps: m.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1),
    "sgd_nesterov": lambda m, ps: m.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    "adam": lambda m, ps: m.Adam(ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8),
    "adam_amsgrad": lambda m, ps: m.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
    "adamw": lambda m, ps: m.AdamW(ps, lr=0.01, weight_decay=0.1),
    "adamax": lambda m, ps: m.Adamax(ps, lr=0.01),
    "radam": lambda m, ps: m.RAdam(ps, lr=0.01),
    "rmsprop": lambda m, ps: m.RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.3),
    "rmsprop_centered": lambda m, ps: m.RMSprop(ps, lr=0.01, centered=True),
    "adagrad": lambda m, ps: m.Adagrad(ps, lr=0.1, lr_decay=0.01),
    "adadelta": lambda m, ps: m.Adadelta(ps, lr=0.7, rho=0.85),
}


def _loss(w, x):
    return ((x @ w).tanh() ** 2).mean() + (w * 0.3).sin().sum()


@pytest.mark.parametrize("name", list(OPTIMISERS))
def test_float64_optimiser_steps_match_torch(device, name):
    """Three steps on float64 parameters: lr, betas, eps and the bias corrections must act
    in float64 (a float32 scalar would move every parameter by ~1e-8 relative)."""
    w0, x0 = INPUTS["matrix2"], INPUTS["matrix"]
    w = gingham.tensor(w0, device=device, requires_grad=True)
    x = gingham.tensor(x0, device=device)
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = OPTIMISERS[name](gingham.optim, [w]), OPTIMISERS[name](torch.optim, [tw])
    for _ in range(3):
        opt.zero_grad()
        _loss(w, x).backward()
        opt.step()
        topt.zero_grad()
        _loss(tw, torch.tensor(x0)).backward()
        topt.step()
    assert w.dtype == np.float64
    failure = _mismatch(name, w.numpy(), tw.detach().numpy())
    assert failure is None, failure


SCHEDULERS = {
    "cosine": lambda s, o: s.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "warm_restarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    "exponential": lambda s, o: s.ExponentialLR(o, gamma=0.9),
    "polynomial": lambda s, o: s.PolynomialLR(o, total_iters=8, power=1.7),
    "one_cycle": lambda s, o: s.OneCycleLR(o, max_lr=0.3, total_steps=12),
    "linear": lambda s, o: s.LinearLR(o, start_factor=0.1, total_iters=5),
    "cyclic": lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="exp_range",
                                      gamma=0.9),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_float64_schedulers_match_torch(name):
    """The learning rates a scheduler sets are Python floats: exactly torch's arithmetic."""
    import torch.optim.lr_scheduler as torch_schedulers
    from gingham.optim import lr_scheduler as schedulers

    w = gingham.tensor(np.zeros(3), requires_grad=True)
    tw = torch.tensor(np.zeros(3), requires_grad=True)
    opt, topt = gingham.optim.SGD([w], lr=0.1, momentum=0.9), torch.optim.SGD([tw], lr=0.1,
                                                                            momentum=0.9)
    schedule = SCHEDULERS[name](schedulers, opt)
    torch_schedule = SCHEDULERS[name](torch_schedulers, topt)
    got, want = [], []
    for _ in range(12):
        got.append(schedule.get_last_lr()[0])
        want.append(torch_schedule.get_last_lr()[0])
        opt.step()
        topt.step()
        schedule.step()
        torch_schedule.step()
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


def test_float64_factories_and_sampling_transforms_match_torch(device):
    """linspace/arange/logspace values, and the float64 transforms of random bits."""
    got = [gingham.linspace(-1.3, 2.9, 37, dtype=np.float64, device=device),
           gingham.arange(0.1, 3.7, 0.3, dtype=np.float64, device=device),
           gingham.logspace(-2.0, 1.3, 11, dtype=np.float64, device=device)]
    want = [torch.linspace(-1.3, 2.9, 37, dtype=torch.float64),
            torch.arange(0.1, 3.7, 0.3, dtype=torch.float64),
            torch.logspace(-2.0, 1.3, 11, dtype=torch.float64)]
    realize(got)
    failures = [_mismatch(f"factory {i}", g.numpy(), w.numpy())
                for i, (g, w) in enumerate(zip(got, want))]
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


def test_float64_after_double_with_a_scheduler_matches_torch(device):
    """An optimiser made over float32 parameters, then ``model.double()`` and a scheduler
    changing lr: the settings follow to float64 (written again exactly, not cast from their
    float32 roundings), as torch's Python floats are."""
    w0, x0 = INPUTS["matrix2"], INPUTS["matrix"]
    model, torch_model = gingham.nn.Linear(7, 5), torch.nn.Linear(7, 5)
    for m, lib in ((model, gingham), (torch_model, torch)):
        m.load_state_dict({"weight": lib.tensor(w0.T.astype(np.float32)),
                           "bias": lib.tensor(np.zeros(5, np.float32))})
    model.to(device)
    opt = gingham.optim.Adam(model.parameters(), lr=0.01, eps=1e-7)
    topt = torch.optim.Adam(torch_model.parameters(), lr=0.01, eps=1e-7)
    schedule = gingham.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
    torch_schedule = torch.optim.lr_scheduler.ExponentialLR(topt, gamma=0.7)
    model.double()
    torch_model.double()
    x = gingham.tensor(x0, device=device)
    for _ in range(3):
        for m, o, s, xs in ((model, opt, schedule, x), (torch_model, topt, torch_schedule,
                                                      torch.tensor(x0))):
            o.zero_grad()
            (m(xs).tanh() ** 2).mean().backward()
            o.step()
            s.step()
    assert model.weight.dtype == np.float64
    failure = _mismatch("weight", model.weight.numpy(), torch_model.weight.detach().numpy())
    assert failure is None, failure


def test_signed_integer_overflow_wraps_as_in_torch(device):
    """int32 and int64 arithmetic wraps around as PyTorch's does (computed in the unsigned
    type: with signed overflow undefined, GCC and PoCL folded ``(X + big) > X`` to true)."""
    from gingham import tile

    for dtype, big in ((np.int32, 2**31 - 1), (np.int64, 2**63 - 1)):
        x = np.array([1, 5, -3, big, -big - 1, 0], dtype)
        function = tile.function(f"function (X) -> (O, N, P) {{ O = (X + {big}) > X; "
                                 f"N = -X; P = X * 3 - 7; }}")
        got = [np.asarray(v) for v in function(x, device=device)]
        t = torch.tensor(x)
        for have, want in zip(got, [(t + big) > t, -t, t * 3 - 7]):
            np.testing.assert_array_equal(have, want.numpy(), err_msg=str(dtype))


def _wrapped(value: int, bits: int) -> int:
    return (value + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


def test_integer_min_divided_by_minus_one_wraps(device):
    """``MIN / -1`` is MIN and ``MIN % -1`` is 0, by two's-complement wrap-around (C leaves
    them undefined; x86's idiv traps, which killed the process with SIGFPE). Python's exact
    integers are the oracle (torch's own CPU kernel traps here too)."""
    from gingham import tile

    divide = tile.function("function (X, Y) -> (Q, R) { Q = X / Y; R = X % Y; }")
    for dtype, bits in ((np.int32, 32), (np.int64, 64)):
        x = np.array([-2 ** (bits - 1), 7, -7, -2 ** (bits - 1), 5], dtype)
        y = np.array([-1, -1, 2, 3, 0], dtype)
        quotient, remainder = (np.asarray(v) for v in divide(x, y, device=device))
        exact = [0 if b == 0 else (abs(int(a)) // abs(int(b))) * (1 if (a < 0) == (b < 0)
                                                                   else -1)
                 for a, b in zip(x, y)]
        want_q = [_wrapped(q, bits) for q in exact]
        want_r = [0 if b == 0 else int(a) - q * int(b) for a, b, q in zip(x, y, exact)]
        assert quotient.tolist() == want_q and remainder.tolist() == want_r, (dtype, quotient,
                                                                              remainder)


def test_float64_random_draws_have_float64_resolution(device):
    """float64 ``rand``/``randn``/``normal`` and a float64 distribution's samples are drawn
    in float64 (48 random bits), not float32 draws cast (24 bits: every value would be a
    float32), and keep their laws (Kolmogorov-Smirnov against SciPy, fixed seed)."""
    stats = pytest.importorskip("scipy.stats")
    gingham.manual_seed(5)
    n = 20000
    uniform = gingham.rand(n, dtype=gingham.float64, device=device)
    draws = {
        "rand": (uniform, stats.uniform.cdf),
        "randn": (gingham.randn(n, dtype=gingham.float64, device=device), stats.norm.cdf),
        "normal": (gingham.normal(1.5, 0.3, (n,), dtype=gingham.float64, device=device),
                   lambda v: stats.norm.cdf(v, 1.5, 0.3)),
        "Normal": (gingham.distributions.Normal(
            gingham.zeros(n, dtype=gingham.float64, device=device), 1.0).sample(),
            stats.norm.cdf),
    }
    realize([tensor for tensor, _ in draws.values()])
    for name, (tensor, cdf) in draws.items():
        values = tensor.numpy()
        assert values.dtype == np.float64, name
        in_float32 = np.mean(values.astype(np.float32).astype(np.float64) == values)
        assert in_float32 < 0.01, f"{name}: {in_float32:.0%} of the draws are float32 values"
        assert stats.kstest(values, cdf).pvalue > 1e-3, name
    scaled = uniform.numpy() * 2.0 ** 48
    assert np.array_equal(scaled, np.floor(scaled))  # on the 2^-48 grid: 48 bits
