"""PyTorch's searching, counting and order-statistic ops on gingham tensors (searchsorted,
bucketize, bincount, isin, histc, unravel_index, nanquantile, nanmedian, corrcoef, gcd, lcm,
nextafter), all in one program per device, against PyTorch: values, and the gradients of
the differentiable ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.tensor import realize, tensor


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


SORTED = np.sort(rand(2, 5, seed=1), 1)
QUERY = rand(2, 4, seed=2)
NANS = rand(3, 6, seed=3)
NANS[0, 2] = NANS[2, [0, 5]] = np.nan
NANS[1] = np.nan
INTS = np.array([12, -18, 0, 0, 7, 1071, 2 ** 30], np.int32)
OTHER = np.array([8, 12, 0, 5, -3, 462, 3 * 2 ** 20], np.int32)
EDGES = np.array([1.0, -1.0, 0.0, -0.0, 2.0, 1e-40, 1.1754944e-38, np.inf, -np.inf, np.nan, 5.0],
                 np.float32)
TOWARD = np.array([2.0, 0.0, 1.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 5.0], np.float32)

# name: (function of the modules gingham / torch, with a tensor maker T)
CASES = {
    "searchsorted": lambda m, T: m.searchsorted(T(SORTED), T(QUERY), right=True),
    "searchsorted_1d": lambda m, T: m.searchsorted(T(SORTED[0]), T(QUERY)),
    "bucketize": lambda m, T: m.bucketize(T(QUERY), T(SORTED[1])),
    "bincount": lambda m, T: m.bincount(T(np.array([0, 4, 4, 1])), T(QUERY[0]), minlength=6),
    "isin": lambda m, T: m.isin(T(INTS), T(OTHER)),
    "histc": lambda m, T: m.histc(T(QUERY), 5),
    "histc_range": lambda m, T: m.histc(T(QUERY), 4, -1.0, 1.0),
    "unravel_index": lambda m, T: m.stack(m.unravel_index(T(np.array([5, 7, -1])), (3, 4))),
    "nanquantile": lambda m, T: m.nanquantile(T(NANS), T(np.array([0.1, 0.5, 1.0], np.float32)),
                                              1, True),
    "nanquantile_all": lambda m, T: m.nanquantile(T(NANS), 0.3, interpolation="midpoint"),
    "nanmedian": lambda m, T: m.nanmedian(T(NANS), 0).values,
    "nanmedian_all": lambda m, T: m.nanmedian(T(NANS)),
    "corrcoef": lambda m, T: m.corrcoef(T(QUERY)),
    "gcd": lambda m, T: m.gcd(T(INTS), T(OTHER)),
    "lcm": lambda m, T: m.lcm(T(INTS[:-1]), T(OTHER[:-1])),
    "nextafter": lambda m, T: m.nextafter(T(EDGES), T(TOWARD)),
    "nextafter_double": lambda m, T: m.nextafter(T(EDGES.astype(np.float64)),
                                                 T(TOWARD.astype(np.float64))),
}
DIFFERENTIABLE = ("nanquantile", "nanquantile_all", "nanmedian", "corrcoef")


def test_searching_and_counting_match_torch(device):
    leaves: dict[str, list] = {}

    def maker(name):
        def make(value):
            leaf = tensor(value, device=device,
                          requires_grad=name in DIFFERENTIABLE and value.dtype == np.float32)
            leaves.setdefault(name, []).append(leaf)
            return leaf
        return make

    got = {name: case(gingham, maker(name)) for name, case in CASES.items()}
    weights = {name: np.random.default_rng(5).standard_normal(got[name].shape).astype(np.float32)
               for name in DIFFERENTIABLE}
    loss = sum(gingham.where(got[n].isnan(), 0.0, got[n] * tensor(weights[n], device=device)).sum()
               for n in DIFFERENTIABLE)
    loss.backward()
    realize(list(got.values()) + [leaf.grad for n in DIFFERENTIABLE for leaf in leaves[n]
                                  if leaf.requires_grad])
    for name, case in CASES.items():
        torch_leaves = []

        def make(value, name=name):
            leaf = torch.tensor(value, requires_grad=name in DIFFERENTIABLE
                                and value.dtype == np.float32)
            torch_leaves.append(leaf)
            return leaf

        expected = case(torch, make)
        np.testing.assert_allclose(got[name].numpy(), expected.detach().numpy(), rtol=1e-5,
                                   atol=1e-6, equal_nan=True, err_msg=name)
        assert got[name].dtype == np.dtype(str(expected.dtype).replace("torch.", "")), name
        if name in DIFFERENTIABLE:
            w = torch.from_numpy(weights[name])
            torch.where(expected.isnan(), 0.0, expected * w).sum().backward()
            for leaf, torch_leaf in zip(leaves[name], torch_leaves):
                if torch_leaf.requires_grad:
                    np.testing.assert_allclose(leaf.grad.numpy(), torch_leaf.grad.numpy(),
                                               rtol=1e-4, atol=1e-5, err_msg=f"{name} grad")


def test_where_takes_numpy_operands_as_tensors_of_their_dtype(device):
    """NumPy arrays and scalars as ``where``'s values count with their dtype, as ``+`` takes
    them (they used to be typed as weak int32 and failed shape inference), and a NumPy
    condition goes to the device of the values; a list condition is a TypeError, as in torch."""
    rng = np.random.default_rng(3)
    cond = rng.random((4, 5)) > 0.5
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((1, 5)).astype(np.float32)
    got = gingham.where(tensor(cond, device=device), a, b)
    expected = torch.where(torch.tensor(cond), torch.tensor(a), torch.tensor(b))
    assert got.dtype == np.float64 and expected.dtype == torch.float64
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    values = tensor(a.astype(np.float32), device=device)
    got = gingham.where(cond, values, np.float32(0.5))
    assert got.device == values.device and got.dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), np.where(cond, a.astype(np.float32), 0.5))
    with pytest.raises(TypeError, match="condition must be a tensor"):
        gingham.where([True], values, 0.0)
