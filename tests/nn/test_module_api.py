"""gingham.nn.Module's API against torch.nn.Module's (CPU) as the oracle.

Every public name of ``torch.nn.Module`` is present on ``gingham.nn.Module`` (with torch's
parameter names and defaults) or classified in a table below with the reason, so a torch
release that adds one fails :func:`test_every_torch_module_name_is_present_or_classified`.

The behaviour tests run the same code on both libraries: one model class written over
``lib.nn`` (registered buffers, persistent or not, registered and frozen parameters, added
modules), the same hooks (replacing inputs and outputs, with keyword arguments, prepended,
global), the same bad calls. They compare state-dict keys, names, errors, hook logs, and on
every device the hooked model's outputs and gradients, eagerly and inside a ``gingham.jit``
step.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn.modules.module as torch_module

import gingham
import gingham.nn as nn
from gingham.frontend.jit import jit
from gingham.frontend.tensor import realize
from gingham.nn import hooks as gingham_hooks

TOLERANCE = dict(rtol=1e-5, atol=1e-5)

# -- the coverage table ----------------------------------------------------------------------------

#: Absent on purpose, by group: regular expressions (whole names) with the reason.
SKIPPED: dict[str, list[str]] = {
    "other accelerators' moves: gingham reaches its devices with to(device)": [
        "ipu", "xpu", "mtia"],
    "storage: gingham tensors have no storage to share between processes, no uninitialised "
    "(meta) tensors to materialise, no legacy tensor types (use to(dtype))": [
        "share_memory", "to_empty", "type"],
    "torch.compile of a module: gingham.jit compiles whole steps (functions)": ["compile"],
    "the deprecated non-full backward hook (PyTorch warns that its grad_input is wrong for "
    "most modules): register_full_backward_hook is the hook to port to": [
        "register_backward_hook"],
    "torch's class machinery: a TypeVar for annotations, the switch that makes torch's "
    "__init__ call super().__init__() (gingham modules need no __init__), a legacy "
    "serialisation flag": ["T_destination", "call_super_init", "dump_patches"],
}

#: Not implemented yet though expressible: the gaps, each with what it needs.
NOT_YET: dict[str, list[str]] = {}

#: Present with another signature, and why.
OTHER_SIGNATURE = {
    "to": "torch's *args, **kwargs spelled out: its documented device, dtype, non_blocking",
    "forward": "defined by each subclass",
}


def _classified(name: str) -> bool:
    patterns = [p for table in (SKIPPED, NOT_YET) for group in table.values() for p in group]
    return any(re.fullmatch(p, name) for p in patterns)


def _torch_names() -> list[str]:
    return sorted(n for n in dir(torch.nn.Module) if not n.startswith("_"))


def test_every_torch_module_name_is_present_or_classified():
    missing = [n for n in _torch_names() if not hasattr(nn.Module, n) and not _classified(n)]
    assert not missing, f"implement or classify in a table: {missing}"
    wrongly = [n for n in _torch_names() if hasattr(nn.Module, n) and _classified(n)]
    assert not wrongly, f"present but classified as absent: {wrongly}"


def test_present_methods_have_torchs_parameters():
    """Names, kinds and defaults of the parameters (annotations aside)."""
    def parameters(function) -> list[tuple]:
        return [(p.name, p.kind, p.default)
                for p in inspect.signature(function).parameters.values()]

    differ = [n for n in _torch_names() if hasattr(nn.Module, n) and n not in OTHER_SIGNATURE
              and callable(getattr(torch.nn.Module, n))
              and parameters(getattr(nn.Module, n)) != parameters(getattr(torch.nn.Module, n))]
    assert not differ, f"parameters unlike torch's: {differ}"


# -- one model class over either library -----------------------------------------------------------


def make_net(lib, device: str):
    """The same class body over ``torch.nn`` and ``gingham.nn``."""
    where = "cpu" if lib is torch else device

    def value(array, parameter=False, requires_grad=False):
        array = np.asarray(array, np.float32)
        if lib is torch:
            t = torch.tensor(array)
            return torch.nn.Parameter(t, requires_grad=requires_grad) if parameter else t
        return gingham.tensor(array, device=device, requires_grad=requires_grad)

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = lib.nn.Sequential(lib.nn.Linear(4, 3, device=where), lib.nn.Tanh())
            self.register_buffer("scale", value([1.5, -2.0, 0.5]))
            self.register_buffer("_mask", value([1.0, 0.0, 1.0]), persistent=False)
            self.register_buffer("unset", None)
            self.register_parameter("gain", value([0.5, 1.0, 2.0], True, True))
            self.register_parameter("_frozen", value(3.0, True))  # private name, no grad
            self.add_module("head", lib.nn.Linear(3, 2, device=where))
            self.register_module("spare", None)

        def forward(self, x, shift=0.0):
            hidden = self.body(x) * self.scale * self._mask * self.gain + shift
            return self.head(hidden) * self._frozen

    return Net()


def twins(device: str):
    """The torch net with random weights and the gingham net loaded from its state dict."""
    torch.manual_seed(0)
    theirs = make_net(torch, "cpu")
    ours = make_net(gingham, device)
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    return ours, theirs


def names(pairs) -> list[str]:
    return [name for name, _ in pairs]


def test_registration_names_and_state_dict_keys_match_torch():
    ours, theirs = twins("reference")
    for method in ("named_parameters", "named_buffers", "named_children", "named_modules"):
        assert names(getattr(ours, method)()) == names(getattr(theirs, method)()), method
    assert list(ours.state_dict()) == list(theirs.state_dict())  # no _mask, unset, spare
    assert "_mask" not in ours.state_dict() and "_frozen" in ours.state_dict()
    assert list(ours.state_dict(prefix="model.")) == list(theirs.state_dict(prefix="model."))
    for kwargs in ({"recurse": False}, {"prefix": "net"}, {"remove_duplicate": False}):
        assert names(ours.named_parameters(**kwargs)) == names(
            theirs.named_parameters(**kwargs)), kwargs
    destination = {"other": 1}
    assert ours.state_dict(destination=destination) is destination
    assert list(destination) == ["other", *theirs.state_dict()]
    with pytest.warns(FutureWarning):
        assert list(ours.state_dict(None, "p.")) == [f"p.{k}" for k in theirs.state_dict()]

    # Loading back into torch: gingham's state dict has torch's keys and values.
    back = make_net(torch, "cpu")
    back.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    for name, tensor in theirs.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[name].numpy(), tensor.numpy())


def test_lookups_and_requires_grad_match_torch():
    ours, theirs = twins("reference")
    for target in ("", "body", "body.0", "head"):
        assert type(ours.get_submodule(target)).__name__ == type(
            theirs.get_submodule(target)).__name__
    for target in ("gain", "_frozen", "body.0.weight", "head.bias"):
        np.testing.assert_array_equal(ours.get_parameter(target).numpy(),
                                      theirs.get_parameter(target).detach().numpy())
    np.testing.assert_array_equal(ours.get_buffer("_mask").numpy(), [1, 0, 1])
    for call in (lambda m: m.get_submodule("body.5"), lambda m: m.get_submodule("nothing"),
                 lambda m: m.get_parameter("scale"), lambda m: m.get_buffer("gain"),
                 lambda m: m.get_parameter("body.0.nothing")):
        with pytest.raises(AttributeError):
            call(theirs)
        with pytest.raises(AttributeError):
            call(ours)

    for flag in (False, True):  # frozen parameters stay parameters, so True finds them again
        ours.requires_grad_(flag)
        theirs.requires_grad_(flag)
        assert names(ours.named_parameters()) == names(theirs.named_parameters())
        assert [p.requires_grad for p in ours.parameters()] == [flag] * 6

    ours.set_submodule("body.1", nn.ReLU())
    theirs.set_submodule("body.1", torch.nn.ReLU())
    assert repr(ours.body) == repr(theirs.body)
    for lib, net in ((nn, ours), (torch.nn, theirs)):
        with pytest.raises(AttributeError):
            net.set_submodule("body.7", lib.ReLU(), strict=True)


@pytest.mark.parametrize("bad", [
    lambda lib, m: m.register_buffer("a.b", None),
    lambda lib, m: m.register_buffer("", None),
    lambda lib, m: m.register_buffer(3, None),
    lambda lib, m: m.register_buffer("weight", None),      # a parameter already
    lambda lib, m: m.register_buffer("forward", None),     # another attribute
    lambda lib, m: m.register_buffer("x", [1.0]),
    lambda lib, m: m.register_parameter("bias.x", None),
    lambda lib, m: m.register_parameter("in_features", None),
    lambda lib, m: m.register_parameter("x", np.ones(2)),
    lambda lib, m: m.add_module("a.b", None),
    lambda lib, m: m.add_module("", None),
    lambda lib, m: m.add_module("x", 3),
    lambda lib, m: m.add_module("weight", None),
    lambda lib, m: m.get_submodule("weight"),
])
def test_bad_registrations_raise_torchs_errors(bad):
    errors = []
    for lib, module in ((torch, torch.nn.Linear(2, 2)),
                        (gingham, nn.Linear(2, 2, device="reference"))):
        with pytest.raises(Exception) as caught:
            bad(lib, module)
        errors.append(type(caught.value))
    assert errors[1] is errors[0] or issubclass(errors[1], errors[0]), errors


def test_a_parameter_must_be_a_leaf():
    """torch's Parameter is a leaf by construction; gingham takes any tensor, so it checks."""
    layer = nn.Linear(2, 2, device="reference")
    computed = gingham.tensor(np.ones(2, np.float32), device="reference", requires_grad=True) * 2
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'x'"):
        layer.register_parameter("x", computed)


def test_containers_add_modules_as_torchs():
    for lib in (torch.nn, nn):
        sequential = lib.Sequential(lib.ReLU())
        sequential.add_module("1", lib.Tanh())
        sequential.add_module("fc", lib.Identity())
        sequential.register_module("0", lib.Sigmoid())   # replaces
        dictionary = lib.ModuleDict()
        dictionary.add_module("act", lib.ReLU())
        plain = lib.Module()
        plain.add_module("inner", lib.Sequential(lib.ReLU()))
        plain.inner.add_module("1", lib.Tanh())
        found = [[(n, type(m).__name__) for n, m in c.named_modules()]
                 for c in (sequential, dictionary, plain)]
        if lib is torch.nn:
            expected = found
    assert found == expected


# -- hooks -----------------------------------------------------------------------------------------


def add_hooks(lib, net, log: list) -> list:
    """The same hooks on either library's net: replace the body's input and the head's
    output, add a keyword argument, log the calls (a global hook sees every module)."""
    register_global = (torch_module.register_module_forward_hook if lib is torch
                       else gingham_hooks.register_module_forward_hook)
    return [
        net.body.register_forward_pre_hook(lambda m, args: args[0] * 2),  # not a tuple
        net.register_forward_pre_hook(
            lambda m, args, kwargs: (args, {**kwargs, "shift": 0.25}), with_kwargs=True),
        net.head.register_forward_hook(lambda m, args, out: out + args[0].sum()),
        net.head.register_forward_hook(lambda m, args, out: log.append("prepended"),
                                       prepend=True),
        net.register_forward_hook(lambda m, args, kwargs, out: log.append(sorted(kwargs)),
                                  with_kwargs=True),
        register_global(lambda m, args, out: log.append(type(m).__name__)),
    ]


def test_hooks_change_inputs_and_outputs_as_torchs(device):
    """Values and gradients of the hooked net against torch's, eagerly and inside a
    gingham.jit step (tracing runs the hooks); removing the hooks restores the plain net,
    in the compiled step too (it is traced again)."""
    ours, theirs = twins(device)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    weights = np.random.default_rng(2).standard_normal((5, 2)).astype(np.float32)
    our_log, their_log = [], []
    with contextlib.ExitStack() as stack:
        for handle in add_hooks(gingham, ours, our_log) + add_hooks(torch, theirs, their_log):
            stack.enter_context(handle)  # removed on exit, even when an assertion fails
        g_x = gingham.tensor(x, device=device, requires_grad=True)
        t_x = torch.tensor(x, requires_grad=True)
        g_out, t_out = ours(g_x), theirs(t_x)
        (g_out * gingham.tensor(weights, device=device)).sum().backward()
        (t_out * torch.tensor(weights)).sum().backward()
        assert our_log == their_log
        assert their_log[-2:] == ["Net", ["shift"]]
        grads = {"x": g_x.grad, **{n: p.grad for n, p in ours.named_parameters()
                                   if p.requires_grad}}
        realize([g_out, *grads.values()])
        np.testing.assert_allclose(g_out.numpy(), t_out.detach().numpy(), **TOLERANCE)
        expected = {"x": t_x.grad, **{n: p.grad for n, p in theirs.named_parameters()
                                      if p.requires_grad}}
        assert grads.keys() == expected.keys()
        for name, grad in expected.items():
            np.testing.assert_allclose(grads[name].numpy(), grad.numpy(), err_msg=name,
                                       **TOLERANCE)

        step = jit(lambda inputs: ours(inputs))
        for batch in (x, -x):  # the second call replays the compiled step
            np.testing.assert_allclose(step(batch).numpy(),
                                       theirs(torch.tensor(batch)).detach().numpy(),
                                       **TOLERANCE)
    del our_log[:]
    plain = theirs(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(ours(gingham.tensor(x, device=device)).numpy(), plain,
                               **TOLERANCE)
    np.testing.assert_allclose(step(x).numpy(), plain, **TOLERANCE)
    assert our_log == [] and step.traces == 2


def test_hook_rules_match_torch():
    """always_call after an error, a pre-hook's bad return value, removal by the handle and
    twice, and the four state-dict hooks (one dropping an entry, one renaming an old name, one
    forgiving a missing key): the same logs and errors as torch's."""
    logs = {}
    for lib in (torch, gingham):
        log = logs[lib] = []
        layer = (torch.nn.Linear(2, 2) if lib is torch
                 else nn.Linear(2, 2, device="reference"))
        x = lib.ones((1, 3)) if lib is torch else gingham.ones((1, 3), device="reference")
        layer.register_forward_hook(lambda m, args, out: log.append("always"), always_call=True)
        layer.register_forward_hook(lambda m, args, out: log.append("only on success"))
        with pytest.raises(Exception):
            layer(x)  # a [1, 3] input for a [2, 2] weight
        handle = layer.register_forward_pre_hook(lambda m, args, kwargs: args, with_kwargs=True)
        with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
            layer(x[:, :2])
        handle.remove()
        handle.remove()  # a second removal does nothing
        layer(x[:, :2])

        net = lib.nn.Sequential(layer)
        net.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(prefix))
        layer.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(prefix))
        layer.register_state_dict_post_hook(
            lambda m, state, prefix, metadata: log.append(tuple(state.pop(prefix + "bias").shape)))
        state = dict(net.state_dict())  # without 0.bias: the post-hook took it
        state["0.w"] = state.pop("0.weight")  # an old checkpoint's name

        def rename(module, state, prefix, metadata, strict, missing, unexpected, errors):
            log.append((prefix, strict))
            state[prefix + "weight"] = state.pop(prefix + "w")

        def forgive(module, keys):
            log.append((list(keys.missing_keys), list(keys.unexpected_keys)))
            keys.missing_keys.clear()

        layer.register_load_state_dict_pre_hook(rename)
        net.register_load_state_dict_post_hook(forgive)
        assert net.load_state_dict(state) == ([], [])
        assert list(state) == ["0.w"]  # the caller's dict is left alone
    assert logs[gingham] == logs[torch]
    assert logs[torch] == ["always", "always", "always", "only on success", "", "0.", (2,),
                           ("0.", True), (["0.bias"], [])]


def test_load_state_dict_assign_and_extra_state_as_torchs():
    """``assign=True`` makes new tensors of the state dict's dtype (keeping requires_grad);
    a module with get/set_extra_state keeps a Python value under ``_extra_state``."""
    class Counter:
        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

    found = {}
    for lib in (torch, gingham):
        layer = type("Counted", (Counter, lib.nn.Linear), {})(
            2, 3, device="cpu" if lib is torch else "reference")
        layer.count = 7
        keys = list(layer.state_dict())
        arrays = {"weight": np.arange(6.0).reshape(3, 2), "bias": np.ones(3)}  # float64
        state = {k: torch.from_numpy(v) if lib is torch else v for k, v in arrays.items()}
        old_weight = layer.weight
        layer.load_state_dict({**state, "_extra_state": {"count": 9}}, assign=True)
        weight = layer.weight.detach() if lib is torch else layer.weight
        np.testing.assert_array_equal(weight.numpy(), arrays["weight"])
        found[lib] = (keys, layer.count, layer.weight is old_weight,
                      str(layer.weight.dtype).removeprefix("torch."), layer.weight.requires_grad)
    assert found[gingham] == found[torch]
    assert found[torch] == (["weight", "bias", "_extra_state"], 9, False, "float64", True)


def test_no_hooks_keeps_the_call_to_forward():
    """Without hooks a call is forward's (gingham.jit traces modules many times); a lazy
    module's first call runs its hooks once."""
    layer = nn.Linear(2, 2, device="reference")
    assert not gingham_hooks.has_hooks(layer) and "_forward_hooks" not in vars(layer)
    log = []
    lazy = nn.LazyLinear(3, device="reference")
    lazy.register_forward_hook(lambda m, args, out: log.append(type(m).__name__))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lazy(gingham.ones((1, 4), device="reference"))
    assert log == ["Linear"]


def test_parameter_as_torchs(device):
    """``nn.Parameter`` in a module written as for PyTorch: the same names in
    ``named_parameters`` and ``state_dict`` (a frozen one is still a parameter), its
    gradient, its class through ``copy.deepcopy`` and an optimiser step."""
    import copy

    def build(lib):
        where = "cpu" if lib is torch else device

        class Scale(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.gain = lib.nn.Parameter(lib.ones(3, device=where))
                self.frozen = lib.nn.Parameter(lib.zeros(3, device=where), requires_grad=False)

            def forward(self, x):
                return (x * self.gain + self.frozen).square().sum()

        return Scale()

    ours, theirs = build(gingham), build(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.array([1.0, -2.0, 0.5], np.float32)
    ours(gingham.tensor(x, device=device)).backward()
    theirs(torch.tensor(x)).backward()
    np.testing.assert_allclose(ours.gain.grad.numpy(), theirs.gain.grad.numpy(), rtol=1e-6)
    assert isinstance(copy.deepcopy(ours).gain, nn.Parameter) and ours.gain.is_leaf
    gingham.optim.SGD(ours.parameters(), lr=0.1).step()
    torch.optim.SGD(theirs.parameters(), lr=0.1).step()
    np.testing.assert_allclose(ours.gain.numpy(), theirs.gain.detach().numpy(), rtol=1e-6)
