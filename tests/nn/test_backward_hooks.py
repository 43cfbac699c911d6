"""Module backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``
and the global ones) against torch's (CPU) as the oracle.

The same model class and the same hook code run on both libraries: a Grad-CAM (activations
saved by a forward hook, their gradients by a backward hook), a clipped output gradient, a
halved input gradient, a global hook logging the order. The tests compare what the hooks see,
what their changes do to the parameters' gradients, and the rules (None entries, counts,
order, removal, errors, warnings), eagerly and inside a ``gingham.jit`` step, where the hooks
run once, at tracing, and what they return or save is part of the compiled step.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
import torch
import torch.nn.modules.module as torch_module

import gingham
import gingham.nn.modules as gingham_module
from gingham.frontend.jit import jit

TOLERANCE = dict(rtol=1e-4, atol=1e-5)
NO_INPUT_GRAD = "Full backward hook is firing when gradients are computed with respect to"


def as_array(value) -> np.ndarray:
    return value.detach().numpy() if isinstance(value, torch.Tensor) else value.numpy()


def assert_same(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for name, expected in theirs.items():
        np.testing.assert_allclose(as_array(ours[name]), as_array(expected), err_msg=name,
                                   **TOLERANCE)


def register_global(lib, hook, pre: bool = False):
    module = torch_module if lib is torch else gingham_module.module
    if pre:
        return module.register_module_full_backward_pre_hook(hook)
    return module.register_module_full_backward_hook(hook)


# -- a small CNN, its hooks, and a Grad-CAM ---------------------------------------------------------


def make_net(lib, device: str):
    """The same class body over ``torch.nn`` and ``gingham.nn``."""
    where = {} if lib is torch else {"device": device}

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(2, 3, 3, **where)
            self.act = lib.nn.ReLU()
            self.fc = lib.nn.Linear(3 * 4 * 4, 5, **where)
            self.head = lib.nn.Linear(5, 2, **where)

        def forward(self, x):
            return self.head(self.fc(self.act(self.conv(x)).flatten(1)).tanh())

    return Net()


def twins(device: str):
    theirs = make_net(torch, device)
    ours = make_net(gingham, device)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def add_hooks(lib, net, seen: dict) -> list:
    """The same hooks on either library's net; ``seen`` gets what they save."""
    def record(name):
        def hook(module, grad_input, grad_output):
            seen[name] = (grad_input, grad_output)
        return hook

    return [
        net.conv.register_forward_hook(lambda m, args, out: seen.update(activation=out)),
        # conv's input needs no gradient: this hook runs at its outputs, grad_input (None,)
        net.conv.register_full_backward_hook(record("conv")),
        net.head.register_full_backward_pre_hook(  # clip the gradient flowing into head
            lambda m, grad_output: (grad_output[0].clamp(-0.2, 0.2),)),
        net.head.register_full_backward_hook(record("head")),
        net.fc.register_full_backward_hook(  # halve what goes on into fc's input
            lambda m, grad_input, grad_output: (grad_input[0] * 0.5,)),
        net.act.register_full_backward_hook(record("act"), prepend=True),
        register_global(lib, lambda m, grad_input, grad_output: seen.setdefault(
            "order", []).append(type(m).__name__)),
    ]


def gradients(lib, net, x) -> dict:
    """The parameters' gradients of a loss, by name."""
    net.zero_grad()
    (net(x) ** 2).sum().backward()
    return {name: p.grad for name, p in net.named_parameters()}


def step(lib, net, x, seen: dict) -> dict:
    """:func:`gradients`, what the hooks saw and a Grad-CAM of conv's channels."""
    grads = gradients(lib, net, x)
    activation, (conv_in, (conv_out,)) = seen["activation"], seen["conv"]
    assert conv_in == (None,)
    cam = (conv_out.mean((2, 3), keepdim=True) * activation).sum(1).relu()
    head_in, head_out = seen["head"]
    act_in, act_out = seen["act"]
    return {"cam": cam, "head in": head_in[0], "head out": head_out[0], "act in": act_in[0],
            "act out": act_out[0], **grads}


@pytest.mark.filterwarnings(f"ignore:{NO_INPUT_GRAD}")
def test_backward_hooks_see_and_change_gradients_as_torchs(device):
    """What the hooks see (grad_input, grad_output, a Grad-CAM) and the parameters'
    gradients after a clipped grad_output and a halved grad_input, against torch's, eagerly
    and inside a gingham.jit step (two calls: traced, then replayed); removing the hooks
    gives the plain gradients again, in the compiled step too (it is traced again)."""
    ours, theirs = twins(device)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    our_seen, their_seen = {}, {}
    with contextlib.ExitStack() as stack:
        for handle in add_hooks(gingham, ours, our_seen) + add_hooks(torch, theirs, their_seen):
            stack.enter_context(handle)
        expected = step(torch, theirs, torch.tensor(x), their_seen)
        assert_same(step(gingham, ours, gingham.tensor(x, device=device), our_seen), expected)
        # Net's input needs no gradient: its hooks run first, at its outputs
        assert our_seen["order"] == their_seen["order"] == ["Net", "Linear", "Linear", "ReLU",
                                                            "Conv2d"]

        compiled = jit(lambda batch: step(gingham, ours, batch, our_seen))
        for batch in (x, 2 * x):
            expected = step(torch, theirs, torch.tensor(batch), their_seen)
            assert_same(compiled(batch), expected)
        assert compiled.traces == 1
        compiled_gradients = jit(lambda batch: gradients(gingham, ours, batch))
        assert_same(compiled_gradients(x), gradients(torch, theirs, torch.tensor(x)))
    expected = gradients(torch, theirs, torch.tensor(x))
    assert_same(gradients(gingham, ours, gingham.tensor(x, device=device)), expected)
    assert_same(compiled_gradients(x), expected)
    assert compiled_gradients.traces == 2


# -- the rules ------------------------------------------------------------------------------------


def make_pair(lib, device: str):
    """Two layers; ``second`` takes a tensor needing no gradient and a number beside its
    input, and returns two outputs."""
    where = {} if lib is torch else {"device": device}

    class Second(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 3, **where)

        def forward(self, x, shift, scale):
            h = self.lin(x) * scale + shift
            return h, h.sum(1)

    class Pair(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = lib.nn.Linear(4, 3, **where)
            self.second = Second()

        def forward(self, x, shift):
            return self.second(self.first(x), shift, 2.0)[0]  # the sum goes unused

    return Pair()


def shapes(grads: tuple) -> list:
    return [None if g is None else tuple(g.shape) for g in grads]


def rules(lib, net, x, shift) -> tuple[list, dict]:
    """The same rules on either library: the log of the hooks' calls and the gradients."""
    log = []
    second = net.second
    handles = [
        register_global(lib, lambda m, gi, go: log.append(("global", type(m).__name__))),
        register_global(lib, lambda m, go: log.append(("global pre", type(m).__name__)),
                        pre=True),
        second.register_full_backward_hook(
            lambda m, gi, go: log.append(("hook", shapes(gi), shapes(go)))),
        second.register_full_backward_hook(lambda m, gi, go: log.append("prepended"),
                                           prepend=True),
        second.register_full_backward_pre_hook(lambda m, go: log.append(("pre", shapes(go)))),
        # zero the gradient into second's input: first's parameters get none, second's theirs
        second.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0, None, None)),
    ]
    removed = second.register_full_backward_hook(lambda m, gi, go: log.append("removed"))
    removed.remove()
    removed.remove()  # a second removal does nothing
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = net(x, shift)
            log.append(out.grad_fn.name())
            (out * out).sum().backward()
        log.append(sum(NO_INPUT_GRAD in str(w.message) for w in caught))  # Pair's, first's
    finally:
        for handle in handles:
            handle.remove()
    grads = {name: p.grad for name, p in net.named_parameters()}
    return log, grads


def test_backward_hook_rules_match_torch(device):
    """In grad_input None for a number and zeros for a tensor needing no gradient, in
    grad_output None for an output no gradient reached; the order (global hooks first, then
    prepended ones), removal, the node's name, the warning where no input needs a gradient,
    a zeroed grad_input; then the errors for bad return values."""
    theirs = make_pair(torch, device)
    ours = make_pair(gingham, device)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(4)
    x, shift = rng.standard_normal((2, 4)).astype(np.float32), np.float32([1.0, -1.0, 0.5])
    their_log, expected = rules(torch, theirs, torch.tensor(x), torch.tensor(shift))
    our_log, found = rules(gingham, ours, gingham.tensor(x, device=device),
                           gingham.tensor(shift, device=device))
    assert our_log == their_log
    # zeros for the shift (a tensor needing no gradient), None for the number and the sum
    assert ("hook", [(2, 3), (3,), None], [(2, 3), None]) in their_log
    assert not np.any(as_array(expected["first.weight"]))
    assert_same(found, expected)

    for lib, net, inputs in ((torch, theirs, (torch.tensor(x), torch.tensor(shift))),
                             (gingham, ours, (gingham.tensor(x, device=device),
                                              gingham.tensor(shift, device=device)))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with net.second.register_full_backward_hook(lambda m, gi, go: (gi[0],)):
                with pytest.raises(RuntimeError, match="Backward hook returned an invalid "
                                   "number of grad_input, got 1, but expected 3"):
                    net(*inputs).sum().backward()
            with net.second.register_full_backward_pre_hook(lambda m, go: (go[0],)):
                with pytest.raises(RuntimeError, match="Backward pre hook returned an invalid "
                                   "number of grad_output, got 1, but expected 2"):
                    net(*inputs).sum().backward()
            with net.register_full_backward_hook(lambda m, gi, go: (go[0], None)):
                with pytest.raises(RuntimeError, match="Modules where no input requires "
                                   "gradient should always return None"):
                    net(*inputs).sum().backward()
