"""Indexing with integer tensors (gather, scatter, index_select, index_add, take_along_dim,
x[idx]) and sorting (sort, argsort, topk) against torch on the CPU, forward and gradient.

Each test builds many ops into one program per device (``compare`` of test_tensor_methods:
the same ``run`` on gingham and torch tensors, then the gradient of a weighted sum of the
float outputs). Indices are host constants made on the test's device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham.frontend.tensor import DTypeError, ShapeError
from test_tensor_methods import compare, rand


def _maker(device):
    def index(lib, values):
        array = np.asarray(values, np.int64)
        return gingham.tensor(array, device=device) if lib is gingham else torch.tensor(array)
    return index


def test_gather_scatter_and_integer_indexing(device):
    """Every op's elements come from (or land in) known places, so the gradients check the
    routing; scatter_add and index_add repeat an index (the updates add up), scatter's indices
    are unique (PyTorch leaves repeated ones undefined)."""
    index = _maker(device)
    x = rand(3, 5)
    x[1, 3] = x[1, 0]  # a tie: gather and scatter must not care about values
    arrays = dict(x=x, y=rand(2, 3, 4, seed=1), s=rand(3, 4, seed=2))

    def run(lib, x, y, s):
        rows = index(lib, [[0, 4], [2, 2], [3, 1]])
        cols = index(lib, [[2, 0, 1, 1, 0], [1, 2, 0, 0, 2]])
        unique = index(lib, [[4, 0], [1, 3], [2, 0]])
        return {
            "gather_1": lib.gather(x, 1, rows), "gather_0": x.gather(0, cols[:, :4] % 3),
            "gather_3d": lib.gather(y, 1, index(lib, [[[2, 0, 1, 1]], [[0, 0, 2, 1]]])),
            "take_dim": lib.take_along_dim(x, index(lib, [[-1], [0], [2]]), dim=1),
            "take_broadcast": lib.take_along_dim(y, index(lib, [[[3], [1], [0]]]), dim=2),
            "take_flat": lib.take_along_dim(x, index(lib, [7, 0, 13])),
            "index_select_0": lib.index_select(x, 0, index(lib, [2, 0, 2])),
            "index_select_1": y.index_select(1, index(lib, [1, 1, 0, 2])),
            "scatter_add": lib.scatter_add(x, 1, rows, s[:, :2]),
            "scatter_add_0": x.scatter_add(0, cols, x[:2] * 2.0),
            "scatter": lib.scatter(x, 1, unique, s[:, :2] * 3.0),
            "scatter_value": x.scatter(1, unique, value=-1.5),
            "index_add": lib.index_add(x, 1, index(lib, [4, 0, 4]), s[:, :3]),
            "index_add_alpha": y.index_add(2, index(lib, [1, 1]), y[:, :, :2], alpha=0.5),
            "getitem_list": x[[2, 0, -1]], "getitem_tensor": x[:, rows],
            "getitem_ndarray": y[..., np.array([3, 0])], "getitem_mid": y[:, index(lib, [2, 0])],
            "getitem_int_sep": y[0, :, index(lib, [1, 3, 3])],  # torch: not NumPy's order
            "getitem_int_adj": y[:, 1, index(lib, [1, 0])],
            "getitem_neg_tensor": x[index(lib, [-1, 1])],
        }

    compare(device, arrays, run)


def test_out_of_range_indices_select_nothing(device):
    """An index outside the dim gives 0 (gather, index_select) and drops the update
    (scatter_add, index_add): the documented rule, against NumPy with the bad places masked."""
    x = rand(2, 4)
    g = gingham.tensor(x, device=device)
    bad = np.array([[1, 4], [-1, 2]])
    gathered = gingham.gather(g, 1, gingham.tensor(bad, device=device)).numpy()
    valid = (bad >= 0) & (bad < 4)
    expected = np.where(valid, np.take_along_axis(x, np.clip(bad, 0, 3), 1), 0)
    np.testing.assert_allclose(gathered, expected)
    added = gingham.scatter_add(g, 1, gingham.tensor(bad, device=device), g).numpy()
    manual = x.copy()
    for r, c in zip(*np.nonzero(valid)):
        manual[r, bad[r, c]] += x[r, c]
    np.testing.assert_allclose(added, manual, rtol=1e-6)
    # a src larger than index (its leading part is used): torch's forward, its backward fails
    src = rand(3, 5, seed=3)
    column = np.array([[1], [3]])
    larger = gingham.scatter_add(g, 1, gingham.tensor(column, device=device),
                                 gingham.tensor(src[:2], device=device)).numpy()
    torch_larger = torch.tensor(x).scatter_add(1, torch.tensor(column), torch.tensor(src[:2]))
    np.testing.assert_allclose(larger, torch_larger.numpy(), rtol=1e-6)
    selected = gingham.index_select(g, 1, gingham.tensor([3, 9], device=device)).numpy()
    np.testing.assert_allclose(selected, np.stack([x[:, 3], np.zeros(2, np.float32)], 1))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN rows
def test_sort_argsort_topk(device):
    """Ties order by position (torch's stable sort), NaN sorts as the largest; the gradient of
    the values goes back to where each came from."""
    x = rand(4, 6)
    x[0, 1] = x[0, 4] = x[0, 5]  # a three-way tie
    x[2, 3] = np.nan
    x[2, 0] = np.nan
    x[3] = np.round(x[3])  # more ties
    arrays = dict(x=x, y=rand(2, 5, 3, seed=1))

    def run(lib, x, y):
        def sort(t, **kw):
            if lib is torch:
                return torch.sort(t, stable=True, **kw)
            return t.sort(**kw)

        return {
            "sort": sort(x), "sort_desc": sort(x, dim=1, descending=True),
            "sort_0": sort(y, dim=0), "sort_mid": sort(y, dim=1, descending=True),
            "argsort": lib.argsort(y, dim=-1, stable=True) if lib is torch
            else lib.argsort(y, dim=-1),
            "sort_int": sort((y.detach() * 3.0).int(), dim=1),
            "topk": lib.topk(y, 2), "topk_small": y.topk(3, dim=1, largest=False),
            "topk_1d": lib.topk(y[0, :, 0], 5), "topk_whole": lib.topk(y.flatten(), 1),
            # torch's topk picks among tied elements its own way: values only, no gradient
            "topk_ties": lib.topk(x[3], 4).values,
        }

    compare(device, arrays, run, forward_only=("topk_ties",))


def test_indexing_errors():
    x = gingham.tensor(rand(2, 3), device="reference")
    idx = gingham.tensor(np.array([[0, 1]]), device="reference")
    with pytest.raises(IndexError, match="masked_fill"):
        x[x > 0]
    with pytest.raises(IndexError, match="masked_fill"):
        x[np.array([True, False])]
    with pytest.raises(IndexError, match="one dim at a time"):
        x[[0, 1], [1, 2]]
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 2]]
    with pytest.raises(DTypeError, match="must hold integers"):
        gingham.gather(x, 1, x)
    with pytest.raises(ShapeError, match="as many dims"):
        gingham.gather(x, 1, gingham.tensor(np.array([0]), device="reference"))
    with pytest.raises(ShapeError, match="larger than the input"):
        gingham.scatter_add(x[:1], 1, idx.expand(2, 2), x)
    with pytest.raises(ShapeError, match="at least as large"):
        gingham.scatter_add(x, 1, idx, x[:1, :1])
    with pytest.raises(ShapeError, match="1-d"):
        gingham.index_select(x, 0, idx)
    with pytest.raises(ShapeError, match="k=4 is out of range"):
        gingham.topk(x, 4)
    with pytest.raises(TypeError, match="src .* or value"):
        gingham.scatter(x, 1, idx)
