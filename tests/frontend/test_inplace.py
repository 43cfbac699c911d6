"""In-place operations (gingham/frontend/inplace.py) against PyTorch: the methods ending in
``_``, the augmented operators, indexed and masked writes, ``.data``, the leaf rules, and
updates inside ``gingham.jit``; values and gradients on every device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.inplace import InPlaceError
from gingham.frontend.tensor import DTypeError, ShapeError
from gingham.errors import GinghamError

RNG = np.random.default_rng(7)


def pair(shape, device, requires_grad=False, dtype=np.float32):
    value = RNG.standard_normal(shape).astype(dtype)
    return (gingham.tensor(value, device=device, requires_grad=requires_grad),
            torch.tensor(value, requires_grad=requires_grad))


def close(ours, theirs, tol=1e-5):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


# Each: the same in-place program on a gingham tensor and a torch tensor.
PROGRAMS = {
    "arithmetic": lambda x, y: (x.add_(y, alpha=2).sub_(0.5).mul_(y).div_(3.0)),
    "operators": lambda x, y: _augmented(x, y),
    "div_modes": lambda x, y: x.mul_(4).div_(1.5, rounding_mode="floor").div_(
        -2, rounding_mode="trunc"),
    "math": lambda x, y: x.exp_().log_().tanh_().abs_().sqrt_().clamp_(0.1, 0.8),
    "masked": lambda x, y: x.masked_fill_(y > 0, -3.0).relu_().pow_(2),
    "fill": lambda x, y: x.zero_().add_(y).fill_(1.5).copy_(y[:1]),
    "clamp_sides": lambda x, y: x.clamp_(min=-0.2).clamp_(max=0.3).neg_(),
    "matrix": lambda x, y: x.cumsum_(1).addmm_(y[:, :2], y[:2, :], beta=0.5).fill_diagonal_(
        2.0, wrap=True),
    "indexed": lambda x, y: x.renorm_(2, 0, 1.0).put_(x.new_tensor([0, 5, -1]).long(),
                                                      y[0, :3]).index_reduce_(
        0, x.new_tensor([2, 0]).long(), y[:2], "amax"),
}


def _augmented(x, y):
    x += y
    x *= 2
    x -= y[0]
    x /= 4
    x **= 2
    return x


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_methods_and_operators_match_torch(device, name):
    x, tx = pair((3, 4), device)
    y, ty = pair((3, 4), device)
    original = tx.detach().numpy().copy()
    before = x * 1.0  # computed from the old value: an in-place op must not change it
    result = PROGRAMS[name](x, y)
    expected = PROGRAMS[name](tx, ty)
    assert result is x  # in place: the same object, as torch returns self
    close(x, expected)
    np.testing.assert_allclose(before.numpy(), original)  # realised after the update


# Torch's in-place methods gingham does not have, each group with the reason.
NOT_IN_PLACE = {
    "draws from torch's global RNG (gingham: uniform_ and normal_ via gingham.nn.init, "
    "bernoulli_ by the device's generator)": [
        "cauchy_", "exponential_", "geometric_", "log_normal_", "random_"],
    "shape changes: a gingham write keeps its tensor's shape": [
        "as_strided_", "resize_", "resize_as_", "set_", "squeeze_", "swapaxes_", "swapdims_",
        "t_", "transpose_", "unsqueeze_"],
    "named tensors (torch 2.11 and earlier)": ["rename_"],
    "host callbacks, storage, sparse and complex tensors": [
        "apply_", "map_", "map2_", "share_memory_", "resize_as_sparse_", "sparse_resize_",
        "sparse_resize_and_clear_", "conj_physical_"],
}


def test_every_torch_in_place_method_is_present_or_classified():
    sample = gingham.tensor(np.ones(2, np.float32), device="reference")
    skipped = {n for names in NOT_IN_PLACE.values() for n in names}
    names = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")]
    assert not [n for n in names if not hasattr(sample, n) and n not in skipped]
    assert not [n for n in skipped if hasattr(sample, n)]  # gained since: unlist it


def test_old_readers_keep_the_old_value(device):
    x, tx = pair((4,), device)
    doubled = x * 2
    x.add_(1)
    tripled = x * 3
    x.mul_(0)
    np.testing.assert_allclose(doubled.numpy(), tx.detach().numpy() * 2, rtol=1e-6)
    np.testing.assert_allclose(tripled.numpy(), (tx.detach().numpy() + 1) * 3, rtol=1e-6)
    np.testing.assert_array_equal(x.numpy(), np.zeros(4, np.float32))


SETITEM_KEYS = [
    (1, 2.0),
    ((slice(None), 0), "column"),
    ((slice(1, None, 2), slice(None, None, 3)), 0.5),
    ((Ellipsis, slice(1, 3)), "block"),
    ((0, None, slice(None, 2)), "row"),
]


@pytest.mark.parametrize("key, value", SETITEM_KEYS, ids=[str(k) for k, _ in SETITEM_KEYS])
def test_setitem_matches_torch(device, key, value):
    x, tx = pair((4, 5), device)
    region = tx[key].shape
    if isinstance(value, str):
        values = RNG.standard_normal(region[-1:] if value == "column" else region).astype(
            np.float32)
        ours, theirs = gingham.tensor(values, device=device), torch.tensor(values)
    else:
        ours = theirs = value
    x[key] = ours
    tx[key] = theirs
    close(x, tx)


def test_masked_setitem_and_integer_tensors(device):
    x, tx = pair((3, 4), device)
    x[x > 0.5] = 0.5
    tx[tx > 0.5] = 0.5
    rows = gingham.tensor(np.array([True, False, True]), device=device)
    x[rows] = -1.0
    tx[torch.tensor([True, False, True])] = -1.0
    close(x, tx)
    n = gingham.tensor(np.arange(6, dtype=np.int32), device=device)
    n[1:3] = 7
    n += 2
    assert n.numpy().tolist() == [2, 9, 9, 5, 6, 7]
    with pytest.raises(DTypeError):
        n.add_(0.5)  # PyTorch: result type Float can't be cast to Int
    with pytest.raises(ShapeError):
        x[0] = gingham.tensor(np.ones(3, np.float32), device=device)


def test_gradients_through_in_place_ops_match_torch(device):
    (x, tx), (w, tw), (v, tv) = (pair((4, 5), device, True), pair((5, 3), device, True),
                                 pair((4,), device, True))

    def program(x, w, v):
        h = x @ w            # each step is one whose gradient PyTorch can still take
        h.add_(1.0).mul_(2.0)
        h[:, 1] = v          # a written column takes v's gradient, not h's
        h[h > 2.0] = 2.0
        h.sub_(v.unsqueeze(1)).relu_()
        return (h * h).sum()

    program(x, w, v).backward()
    program(tx, tw, tv).backward()
    for ours, theirs in ((x, tx), (w, tw), (v, tv)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4,
                                   atol=1e-5)


def test_leaf_rules_data_and_aliases(device):
    w, tw = pair((3,), device, True)
    with pytest.raises(InPlaceError, match="leaf tensor that requires grad"):
        w.add_(1)
    with gingham.no_grad():
        w -= 0.5
    assert w.is_leaf and w.requires_grad
    w.data.mul_(2)             # through .data: no autograd, changes w
    w.detach().add_(1)         # detach() of a leaf shares its value too
    with torch.no_grad():
        tw -= 0.5
    tw.data.mul_(2)
    tw.detach().add_(1)
    close(w, tw)
    w.data = gingham.tensor(np.arange(3, dtype=np.float64), device=device)
    assert w.dtype == np.float32 and w.numpy().tolist() == [0, 1, 2]
    w.data.normal_(0.0, 0.01)
    assert np.abs(w.numpy()).max() < 0.1
    computed = (w * 2).detach()
    computed.zero_()           # a computed tensor's detach() is a copy
    assert np.abs(w.numpy()).max() > 0


def test_backward_after_modifying_a_used_leaf_is_refused(device):
    w, _ = pair((3,), device, True)
    loss = (w * w).sum()
    with gingham.no_grad():
        w.add_(1)
    with pytest.raises(GinghamError, match="modified by an in-place"):
        loss.backward()


def test_hand_written_sgd_eagerly_and_in_jit(device):
    """SGD with momentum written with in-place updates, as in PyTorch tutorials: eager and
    inside gingham.jit, three steps each, against torch."""
    x_np = RNG.standard_normal((8, 5)).astype(np.float32)
    w_np = RNG.standard_normal((5, 1)).astype(np.float32)

    def run(lib, make, steps, wrap=lambda f: f):
        x = make(x_np)
        w = make(w_np, True)
        buf = make(np.zeros_like(w_np))

        def step():
            loss = ((x @ w) ** 2).mean()
            w.grad = None
            loss.backward()
            with lib.no_grad():
                buf.mul_(0.9).add_(w.grad)
                w.sub_(0.1 * buf)
            return loss

        stepper = wrap(step)
        losses = [float(stepper().numpy() if lib is gingham else stepper().item())
                  for _ in range(steps)]
        return losses, w.detach().numpy(), buf.numpy()

    def torch_make(value, grad=False):
        return torch.tensor(value, requires_grad=grad)

    def gingham_make(value, grad=False):
        return gingham.tensor(value, device=device, requires_grad=grad)

    expected = run(torch, torch_make, 3)
    for wrap in (lambda f: f, gingham.jit):
        got = run(gingham, gingham_make, 3, wrap)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[2], expected[2], rtol=1e-5, atol=1e-6)


def test_jit_reads_after_an_update_and_refuses_arguments(device):
    counter = gingham.tensor(np.zeros(2, np.float32), device=device)

    @gingham.jit
    def step(x):
        seen = counter * 1.0
        counter.add_(x)
        return seen, counter * 10.0   # the second read sees the update

    x = gingham.tensor(np.array([1.0, 2.0], np.float32), device=device)
    for n in range(1, 4):
        seen, after = step(x)
        np.testing.assert_allclose(seen.numpy(), [n - 1, 2 * (n - 1)])
        np.testing.assert_allclose(after.numpy(), [10 * n, 20 * n])
    np.testing.assert_allclose(counter.numpy(), [3, 6])
    assert counter.is_leaf

    @gingham.jit
    def bad(x):
        x.add_(1)
        return x

    with pytest.raises(InPlaceError, match="argument of a function traced"):
        bad(x)


def test_an_update_of_a_leaf_keeps_the_old_readers_of_a_value_changed_in_place(device):
    """``z`` reads ``y``'s value before ``y.add_(1)`` (a snapshot of it, computed from ``w``);
    ``w``'s later update must point that snapshot at ``w``'s old value too (it read the new
    one, or refused, when the snapshot was not registered as ``w``'s reader)."""
    w = gingham.tensor(np.arange(3, dtype=np.float32), device=device)
    y = w * 2
    z = y * 1
    y.add_(1)
    w.add_(5)
    np.testing.assert_array_equal(z.numpy(), [0, 2, 4])
    np.testing.assert_array_equal(y.numpy(), [1, 3, 5])
    np.testing.assert_array_equal(w.numpy(), [5, 6, 7])
