"""gingham.optim against torch.optim: parameter groups (settings changed between steps, compiled
or not), state dicts with several groups, the optimisers' update rules, and every scheduler of
gingham.optim.lr_scheduler against torch's over a few dozen steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.optim.lr_scheduler as torch_schedulers

import gingham
from gingham.frontend.jit import jit
from gingham.optim import lr_scheduler as schedulers

RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 5)).astype(np.float32)
Y = RNG.standard_normal((16, 3)).astype(np.float32)
W0 = RNG.standard_normal((5, 3)).astype(np.float32)
B0 = RNG.standard_normal(3).astype(np.float32)


def _step(opt, w, b, x, y) -> None:
    opt.zero_grad()
    (((x @ w + b).tanh() - y) ** 2).mean().backward()
    opt.step()


class _Pair:
    """The same small regression model in gingham (on ``device``) and in PyTorch, each with
    an optimiser made by ``make(module, params)`` over its two parameters."""

    def __init__(self, device: str, make) -> None:
        self.w = gingham.tensor(W0, device=device, requires_grad=True)
        self.b = gingham.tensor(B0, device=device, requires_grad=True)
        self.tw = torch.tensor(W0, requires_grad=True)
        self.tb = torch.tensor(B0, requires_grad=True)
        self.opt = make(gingham.optim, self.w, self.b)
        self.topt = make(torch.optim, self.tw, self.tb)
        self.x, self.y = gingham.tensor(X, device=device), gingham.tensor(Y, device=device)

    def eager_step(self) -> None:
        _step(self.opt, self.w, self.b, self.x, self.y)

    def torch_step(self) -> None:
        self.topt.zero_grad()
        (((torch.tensor(X) @ self.tw + self.tb).tanh() - torch.tensor(Y)) ** 2).mean().backward()
        self.topt.step()

    def compiled_step(self):
        opt, w, b, x, y = self.opt, self.w, self.b, self.x, self.y  # not torch's: see jit

        @jit
        def step():
            _step(opt, w, b, x, y)
            return ()
        return step

    def check(self, what: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
        np.testing.assert_allclose(self.w.numpy(), self.tw.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=what)
        np.testing.assert_allclose(self.b.numpy(), self.tb.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=what)


def test_param_groups_follow_setting_changes_compiled_and_eager(device):
    """Two groups with their own settings; lr, momentum and weight decay changed between steps
    through ``param_groups`` (and ``add_param_group`` later) reach the compiled step: it
    matches torch step by step, and retraces only when a setting changes the program."""
    def make(module, w, b):
        return module.SGD([{"params": [w]}, {"params": [b], "lr": 0.02, "nesterov": True}],
                          lr=0.1, momentum=0.9, weight_decay=0.01)

    pair = _Pair(device, make)
    step = pair.compiled_step()
    changes = {2: ("lr", [0.05, 0.2]), 3: ("momentum", [0.5, 0.8]),
               4: ("weight_decay", [0.1, 0.0])}
    for i in range(6):
        if i in changes:
            key, values = changes[i]
            for group, tgroup, value in zip(pair.opt.param_groups, pair.topt.param_groups,
                                            values):
                group[key] = tgroup[key] = value
        step()
        pair.torch_step()
        pair.check(f"step {i}")
    # weight_decay going to zero drops a term: the one retrace; lr and momentum changed none.
    assert step.traces == 2
    assert pair.opt.defaults["lr"] == 0.1 and pair.opt.param_groups[1]["nesterov"]
    pair.opt.lr = 0.03  # gingham's shorthand: every group
    assert [g["lr"] for g in pair.opt.param_groups] == [0.03, 0.03]
    with pytest.raises(ValueError, match="more than one parameter group"):
        pair.opt.add_param_group({"params": [pair.w]})
    with pytest.raises(ValueError, match="empty parameter list"):
        gingham.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid lr value: -1"):
        gingham.optim.Adam([pair.w], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        gingham.optim.SGD([pair.w], nesterov=True)


def test_add_param_group_and_state_dict_with_groups(device):
    """A group added after some steps starts fresh (its own step count); the two-group state
    dict loads into torch, and torch's back into gingham, and training continues equal."""
    v0 = RNG.standard_normal(3).astype(np.float32)
    w = gingham.tensor(W0, device=device, requires_grad=True)
    v = gingham.tensor(v0, device=device, requires_grad=True)
    tw, tv = torch.tensor(W0, requires_grad=True), torch.tensor(v0, requires_grad=True)
    opt = gingham.optim.Adam([w], lr=0.05, betas=(0.8, 0.9))
    topt = torch.optim.Adam([tw], lr=0.05, betas=(0.8, 0.9))
    x, tx = gingham.tensor(X, device=device), torch.tensor(X)

    def steps(count):
        for _ in range(count):
            opt.zero_grad()
            ((x @ w + v) ** 2).mean().backward()
            opt.step()
            topt.zero_grad()
            ((tx @ tw + tv) ** 2).mean().backward()
            topt.step()

    steps(2)
    opt.add_param_group({"params": v, "lr": 0.1, "amsgrad": True})
    topt.add_param_group({"params": tv, "lr": 0.1, "amsgrad": True})
    steps(2)
    state = opt.state_dict()
    assert [g["params"] for g in state["param_groups"]] == [[0], [1]]
    assert [state["state"][i]["step"] for i in (0, 1)] == [4.0, 2.0]
    torch_state = topt.state_dict()
    assert state["param_groups"] == torch_state["param_groups"]
    for index, entry in torch_state["state"].items():
        assert set(entry) == set(state["state"][index])
        for key, value in entry.items():
            np.testing.assert_allclose(state["state"][index][key], value, rtol=1e-5,
                                       atol=1e-7, err_msg=f"{index} {key}")
    # Each continues from the other's state dict.
    topt.load_state_dict({"state": {i: {k: torch.tensor(np.asarray(a)) for k, a in e.items()}
                                    for i, e in state["state"].items()},
                          "param_groups": state["param_groups"]})
    opt.load_state_dict(torch_state)
    steps(2)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v.numpy(), tv.detach().numpy(), rtol=1e-5, atol=1e-6)


OPTIMIZERS = {  # one constructor for both modules, over the model's (w, b)
    "sgd-dampening-maximize": lambda m, w, b: m.SGD([w, b], lr=0.05, momentum=0.9,
                                                    dampening=0.3, maximize=True),
    "adam-amsgrad": lambda m, w, b: m.Adam([w, b], lr=0.05, amsgrad=True, weight_decay=0.1),
    "adamw-amsgrad": lambda m, w, b: m.AdamW([w, b], lr=0.05, amsgrad=True),
    "rmsprop-centered-momentum": lambda m, w, b: m.RMSprop([w, b], lr=0.01, momentum=0.8,
                                                          centered=True, weight_decay=0.1),
    "rmsprop": lambda m, w, b: m.RMSprop([w, b], lr=0.01, alpha=0.9),
    "adagrad": lambda m, w, b: m.Adagrad([w, b], lr=0.1, lr_decay=0.1,
                                         initial_accumulator_value=0.5, weight_decay=0.1),
    "adamax": lambda m, w, b: m.Adamax([w, b], lr=0.05, weight_decay=0.1),
    "radam": lambda m, w, b: m.RAdam([w, b], lr=0.05, betas=(0.9, 0.9)),
    "radam-decoupled": lambda m, w, b: m.RAdam([w, b], lr=0.05, weight_decay=0.1,
                                               decoupled_weight_decay=True),
    "adadelta": lambda m, w, b: m.Adadelta([w, b], rho=0.8, weight_decay=0.1),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizers_match_torch(device, name):
    """Each optimiser, eager, against torch's with the same arguments: the parameters after
    every step."""
    pair = _Pair(device, OPTIMIZERS[name])
    for i in range(8):
        pair.eager_step()
        pair.torch_step()
        pair.check(f"{name}, step {i}", rtol=1e-4, atol=1e-5)


SCHEDULERS = {  # one constructor for both modules
    "lambda": lambda s, o: s.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)]),
    "multiplicative": lambda s, o: s.MultiplicativeLR(o, lambda e: 0.95),
    "step": lambda s, o: s.StepLR(o, step_size=4, gamma=0.5),
    "multistep": lambda s, o: s.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
    "constant": lambda s, o: s.ConstantLR(o, factor=0.25, total_iters=6),
    "linear": lambda s, o: s.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=9),
    "exponential": lambda s, o: s.ExponentialLR(o, gamma=0.93),
    "polynomial": lambda s, o: s.PolynomialLR(o, total_iters=15, power=2.0),
    "cosine": lambda s, o: s.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "warm-restarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                eta_min=0.01),
    "cyclic": lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=3,
                                      step_size_down=5, mode="triangular2"),
    "cyclic-exp-range": lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                                mode="exp_range", gamma=0.97),
    "one-cycle": lambda s, o: s.OneCycleLR(o, max_lr=[0.3, 0.1], total_steps=31),
    "one-cycle-three-phase": lambda s, o: s.OneCycleLR(o, max_lr=0.3, total_steps=31,
                                                       three_phase=True,
                                                       anneal_strategy="linear"),
    "sequential": lambda s, o: s.SequentialLR(
        o, [s.LinearLR(o, 0.2, total_iters=4), s.ExponentialLR(o, 0.9), s.StepLR(o, 3)],
        milestones=[4, 12]),
    "chained": lambda s, o: s.ChainedScheduler([s.ConstantLR(o, 0.5, total_iters=5),
                                                s.ExponentialLR(o, 0.9)]),
}


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_scheduler_sequences_match_torch(kind):
    """Every scheduler over 30 steps of a two-group optimiser: the learning rates (and the
    momentum or betas that CyclicLR and OneCycleLR cycle) equal torch's exactly. Host-side
    only (the settings' device tensors live on the reference device)."""
    def optimizer(module, params):
        extra = {"momentum": 0.9} if kind == "SGD" else {}
        return getattr(module, kind)([{"params": params[:1]},
                                      {"params": params[1:], "lr": 0.05}], lr=0.1, **extra)

    for name, make in SCHEDULERS.items():
        params = [gingham.tensor(np.zeros(2, np.float32), device="reference",
                                 requires_grad=True) for _ in range(2)]
        theirs = optimizer(torch.optim, [torch.zeros(2, requires_grad=True) for _ in range(2)])
        ours = optimizer(gingham.optim, params)
        scheduler, torch_scheduler = make(schedulers, ours), make(torch_schedulers, theirs)
        momentum = "momentum" if kind == "SGD" else "betas"
        for epoch in range(30):
            assert scheduler.get_last_lr() == torch_scheduler.get_last_lr(), (name, epoch)
            assert ([g[momentum] for g in ours.param_groups]
                    == [g[momentum] for g in theirs.param_groups]), (name, epoch)
            theirs.step()
            torch_scheduler.step()
            scheduler.step()
        state, torch_state = scheduler.state_dict(), torch_scheduler.state_dict()
        assert state.get("last_epoch") == torch_state.get("last_epoch"), name


def test_reduce_lr_on_plateau_and_scheduler_errors():
    w = gingham.tensor(np.zeros(2, np.float32), device="reference", requires_grad=True)
    ours = gingham.optim.SGD([w], lr=1.0)
    theirs = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=1.0)
    made = [module.ReduceLROnPlateau(o, patience=2, cooldown=1, factor=0.5, min_lr=0.05,
                                     threshold_mode=mode)
            for module, o, mode in [(schedulers, ours, "rel"), (torch_schedulers, theirs, "rel")]]
    for metric in [5, 4, 4, 4, 4, 3, 3.9999, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]:
        for scheduler in made:
            scheduler.step(metric)
        assert made[0].get_last_lr() == made[1].get_last_lr()
    assert made[0].get_last_lr() == [0.0625]
    with pytest.raises(TypeError, match="is not an Optimizer"):
        schedulers.StepLR(theirs, step_size=2)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        schedulers.ReduceLROnPlateau(ours, factor=2.0)
    with pytest.raises(ValueError, match="total_steps OR"):
        schedulers.OneCycleLR(ours, max_lr=0.1)
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        schedulers.ChainedScheduler([made[0]])


def test_compiled_step_follows_a_schedule(device):
    """A step compiled once follows OneCycleLR (learning rate and Adam's beta1 every step):
    the parameters after each step match torch's with the same schedule, with one trace."""
    def make(module, w, b):
        return module.Adam([{"params": [w]}, {"params": [b], "lr": 0.01}], lr=0.1)

    pair = _Pair(device, make)
    scheduler = schedulers.OneCycleLR(pair.opt, max_lr=[0.2, 0.05], total_steps=8)
    torch_scheduler = torch_schedulers.OneCycleLR(pair.topt, max_lr=[0.2, 0.05], total_steps=8)
    step = pair.compiled_step()
    for i in range(8):
        step()
        scheduler.step() if i < 7 else None
        pair.torch_step()
        torch_scheduler.step() if i < 7 else None
        pair.check(f"step {i}", rtol=1e-4, atol=1e-5)
    assert step.traces == 1
