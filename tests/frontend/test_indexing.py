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


def computed(array, device):
    """An index computed on the device (its values unknown to the host), which the index ops
    do not check; one made by gingham.tensor raises IndexRangeError (test_user_errors.py)."""
    return gingham.tensor(array, device=device) * 1


def test_out_of_range_indices_select_nothing(device):
    """A computed index outside the dim gives 0 (gather, index_select) and drops the update
    (scatter_add, index_add): the documented rule, against NumPy with the bad places masked."""
    x = rand(2, 4)
    g = gingham.tensor(x, device=device)
    bad = np.array([[1, 4], [-1, 2]])
    gathered = gingham.gather(g, 1, computed(bad, device)).numpy()
    valid = (bad >= 0) & (bad < 4)
    expected = np.where(valid, np.take_along_axis(x, np.clip(bad, 0, 3), 1), 0)
    np.testing.assert_allclose(gathered, expected)
    added = gingham.scatter_add(g, 1, computed(bad, device), g).numpy()
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
    selected = gingham.index_select(g, 1, computed([3, 9], device)).numpy()
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


def _mask_maker(device):
    def mask(lib, values):
        array = np.asarray(values, bool)
        return gingham.tensor(array, device=device) if lib is gingham else torch.tensor(array)
    return mask


def test_value_shaped_results(device):
    """Results whose shape comes from the values (boolean masks as indices, masked_select,
    nonzero, argwhere, where(condition), unique, unique_consecutive), read from the device as
    PyTorch reads them: masks over the leading, middle and last dims, a mask computed on the
    device, empty and 0-d cases, and the gradients that reach ``x`` through the gather."""
    mask = _mask_maker(device)
    x = rand(3, 4, 2)
    x[2, 1] = x[0, 3]  # ties for unique along dims 0 and 1
    arrays = dict(x=x, s=rand(16, seed=1))

    def run(lib, x, s):
        positive = x > 0  # computed on the device, read back once by the ops that use it
        rows = mask(lib, [True, False, True])
        values = (x.detach() * 2).round()  # few distinct values; torch's unique has no grad
        holes = lib.where(values[0] > 0, values[0], float("nan"))  # each NaN is distinct
        return {
            "mask_all": x[positive], "mask_lead": x[mask(lib, [[1, 0, 0, 1]] * 3)],
            "mask_mid": x[:, mask(lib, [0, 1, 1, 0])], "mask_last": x[..., mask(lib, [0, 1])],
            "mask_then_int": x[rows, 1], "int_then_mask": x[1, :, mask(lib, [1, 1])],
            "mask_none": x[None, rows], "mask_list": x[[False, True, True]],
            "mask_ndarray": x[np.array([[0, 1, 1, 1]] * 3, bool)],
            "mask_empty": x[mask(lib, [0, 0, 0])], "mask_0d": x[mask(lib, True)],
            "mask_0d_false": x[mask(lib, False)], "python_bool": x[True],
            "mask_uint8": x[mask(lib, [[0, 1, 0, 1]] * 3).to(lib.uint8)],
            "select": lib.masked_select(x, positive),
            "select_bcast": x.masked_select(mask(lib, [[1], [0], [1], [1]])),
            "select_grow": lib.masked_select(x[0, :, 0], positive[..., 1]),
            "scatter_bcast": x.masked_scatter(mask(lib, [[1, 0], [0, 1], [1, 1], [0, 0]]), s),
            "nonzero": lib.nonzero(positive), "nonzero_float": x.relu().nonzero(),
            "nonzero_tuple": lib.nonzero(positive[0], as_tuple=True),
            "nonzero_none": (x[0] > 9).nonzero(), "nonzero_0d": lib.nonzero(x[0, 0, 0] * 0 + 1),
            "nonzero_0d_tuple": lib.nonzero(positive[0, 0, 0], as_tuple=True),
            "argwhere": lib.argwhere(x[1] < 0), "where_cond": lib.where(positive[:, :, 0]),
            "unique": lib.unique(values), "unique_all": lib.unique(
                values[0], sorted=False, return_inverse=True, return_counts=True),
            "unique_dim0": lib.unique(values[:, :2, 0], return_inverse=True, dim=0),
            "unique_dim1": lib.unique(values[:, :, 1], return_counts=True, dim=-1),
            "unique_0d": lib.unique(values[0, 0, 0], return_inverse=True, return_counts=True),
            "consecutive": lib.unique_consecutive(values, return_inverse=True,
                                                  return_counts=True),
            "consecutive_dim": values[:, :, 0].unique_consecutive(return_inverse=True, dim=1),
            "unique_nan": holes.unique(return_inverse=True, return_counts=True),
            "consecutive_nan": lib.unique_consecutive(holes, return_counts=True),
        }

    with pytest.warns(UserWarning, match="uint8 tensor reads it as a boolean mask"):
        compare(device, arrays, run, forward_only=(
            "unique", "unique_all.0", "unique_dim0.0", "unique_dim1.0", "unique_0d.0",
            "consecutive.0", "consecutive_dim.0", "unique_nan.0", "consecutive_nan.0"))


def test_value_shaped_results_are_refused_inside_jit(device):
    """Inside a traced step each of them names itself and a fixed-shape alternative."""
    x = gingham.tensor(rand(3, 4), device=device)
    cases = {
        r"x\[mask\]": lambda v: v[v > 0], "masked_select": lambda v: v.masked_select(v > 0),
        "nonzero": lambda v: gingham.nonzero(v), "argwhere": lambda v: v.argwhere(),
        r"where\(condition\)": lambda v: gingham.where(v > 0),
        "unique": lambda v: v.unique(), "unique_consecutive": gingham.unique_consecutive}
    for name, op in cases.items():
        with pytest.raises(NotImplementedError, match=f"^{name} .*inside gingham.jit.*"
                           "depends on the values.*(where|sort)"):
            gingham.jit(op)(x)


def test_value_shaped_errors(device):
    """Bad masks raise PyTorch's error types (a device mismatch: gingham's DeviceError)."""
    x = gingham.tensor(rand(2, 3), device=device)
    t = torch.tensor(rand(2, 3))
    for shape in [(3,), (2, 2), (1, 3), (2, 3, 1)]:
        with pytest.raises(IndexError):
            t[torch.ones(shape, dtype=torch.bool)]
        with pytest.raises(IndexError, match="mask|too many indices"):
            x[gingham.tensor(np.ones(shape, bool), device=device)]
    with pytest.raises(DTypeError, match="masked_select: mask must be a bool"):
        x.masked_select(x)
    with pytest.raises(ShapeError, match="masked_select"):
        x.masked_select(x[:, :2] > 0)
    with pytest.raises(ShapeError, match="0-sized dims"):  # torch: RuntimeError
        gingham.unique(x[:, :0], dim=0)
    with pytest.raises(TypeError, match="where: give both"):
        gingham.where(x > 0, x)
    other = "reference" if device != "reference" else "cpu"
    elsewhere = gingham.tensor(np.ones((2, 3), bool), device=other)
    for op in (lambda: x[elsewhere], lambda: x.masked_select(elsewhere)):
        with pytest.raises(gingham.DeviceError, match="the mask is on"):
            op()


def test_indexing_errors():
    x = gingham.tensor(rand(2, 3), device="reference")
    idx = gingham.tensor(np.array([[0, 1]]), device="reference")
    with pytest.raises(IndexError, match="mask"):
        x[np.array([True, False, True])]
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
