"""``keras.ops``' indexing and sorting ops on gingham's backend, on every device: forward and
gradient against PyTorch (all differentiable ops in one compiled program per device), the
integer results against NumPy."""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import keras  # noqa: E402
import torch  # noqa: E402
from keras import ops  # noqa: E402

from gingham.frontend.tensor import realize  # noqa: E402
from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)



SEGMENTS = np.array([2, 0, 2, 1, 0], np.int64)

# name: (keras op on gingham leaves and converted constants, torch's, float inputs, constants)
DIFFERENTIABLE = {
    "take_along_axis": (lambda x, i: ops.take_along_axis(x, i, axis=1),
                        lambda x, i: torch.take_along_dim(x, torch.where(i < 0, i + 5, i), 1),
                        [rand(3, 5)], [np.array([[4, -1], [0, 2], [1, 1]], np.int64)]),
    "take_along_flat": (lambda x, i: ops.take_along_axis(x, i, axis=None),
                        lambda x, i: torch.take_along_dim(x, i), [rand(3, 5)],
                        [np.array([14, 0, 7], np.int64)]),
    "sort": (lambda x: (ops.sort(x), ops.sort(x, axis=0), ops.sort(x, axis=None)),
             lambda x: (x.sort(-1).values, x.sort(0).values, x.flatten().sort().values),
             [rand(3, 5)], []),
    "top_k": (lambda x: ops.top_k(x, 3)[0], lambda x: torch.topk(x, 3).values, [rand(4, 6)],
              []),
    "median": (lambda x: (ops.median(x), ops.median(x, axis=1, keepdims=True)),
               lambda x: (x.flatten().sort().values[5:7].mean(),
                          x.sort(1).values[:, 1:2]), [rand(4, 3)], []),
    "quantile": (lambda x: ops.quantile(x, [0.25, 0.9], axis=0),
                 lambda x: torch.quantile(x, torch.tensor([0.25, 0.9]), dim=0), [rand(5, 3)],
                 []),
    "percentile_nearest": (lambda x: ops.percentile(x, 40.0, axis=-1, method="nearest"),
                           lambda x: torch.quantile(x, 0.4, dim=-1, interpolation="nearest"),
                           [rand(3, 7)], []),
    "scatter_update": (lambda x, u, i: ops.scatter_update(x, i, u),
                       lambda x, u, i: x.index_put((i[:, 0], i[:, 1]), u), [rand(3, 4),
                                                                             rand(3, seed=1)],
                       [np.array([[0, 1], [2, 3], [1, 0]], np.int64)]),
    "scatter_update_rows_add": (
        lambda x, u, i: ops.scatter_update(x, i, u, reduction="add"),
        lambda x, u, i: x.index_put((i[:, 0],), u, accumulate=True),
        [rand(3, 4), rand(3, 4, seed=1)], [np.array([[2], [0], [2]], np.int64)]),
    "segment_max_min": (lambda x, i: (ops.segment_max(x, i, num_segments=3),
                                      ops.segment_min(x, i, num_segments=3)),
                        lambda x, i: (torch.zeros(3, 2).index_reduce(0, i, x, "amax",
                                                                     include_self=False),
                                      torch.zeros(3, 2).index_reduce(0, i, x, "amin",
                                                                     include_self=False)),
                        [rand(5, 2)], [SEGMENTS]),
    "segment_prod": (lambda x, i: ops.segment_prod(x, i, num_segments=3),
                     lambda x, i: torch.ones(3, 2).index_reduce(0, i, x, "prod"),
                     [rand(5, 2)], [SEGMENTS]),
}


@pytest.mark.filterwarnings("ignore:index_reduce.. is in beta:UserWarning")  # the oracle
def test_indexing_ops_against_torch(device):
    """Every op of DIFFERENTIABLE, forward and gradient (of the outputs weighted by random
    cotangents), in one program, against PyTorch. Values are distinct (no ties), so the
    gradient of a sort or a segment max has one place to go."""
    check_against_torch(device, DIFFERENTIABLE, TOLERANCE)


def test_integer_results_against_numpy(device):
    """argsort (int32, stable), top_k's indices, argpartition's partition, in_top_k (ties with
    the k-th count as in) and quantile's methods, against NumPy."""
    x = rand(4, 6)
    x[1, 2] = x[1, 4]  # a tie: the stable order is the first one first
    predictions = np.array([[0.1, 0.5, 0.5, 0.2], [0.9, 0.0, 0.3, 0.4], [0.2, 0.2, 0.2, 0.2]],
                           np.float32)
    targets = np.array([2, 2, 3], np.int32)
    with keras.device(device):
        argsorted = ops.argsort(x, axis=1)
        top_values, top_indices = ops.top_k(x, 2)
        partition = ops.argpartition(x, 2, axis=-1)
        in_top = ops.in_top_k(targets, predictions, 2)
        quantiles = {m: ops.quantile(x, 0.3, axis=1, method=m)
                     for m in ("linear", "lower", "higher", "midpoint", "nearest")}
        realize([argsorted, top_values, top_indices, partition, in_top, *quantiles.values()])
    assert argsorted.dtype == np.int32 and top_indices.dtype == np.int32
    np.testing.assert_array_equal(argsorted.numpy(), np.argsort(x, 1, kind="stable"))
    np.testing.assert_array_equal(top_indices.numpy(), np.argsort(-x, 1, kind="stable")[:, :2])
    parted = np.take_along_axis(x, partition.numpy().astype(np.int64), -1)
    kth = np.sort(x, -1)[:, 2:3]
    assert (parted[:, :2] <= kth).all() and (parted[:, 2:3] == kth).all() and (
        parted[:, 3:] >= kth).all()
    np.testing.assert_array_equal(in_top.numpy(), [True, False, True])
    for method, value in quantiles.items():
        np.testing.assert_allclose(value.numpy(), np.quantile(x, 0.3, axis=1, method=method),
                                   rtol=1e-6, err_msg=method)


def test_indexing_ops_bad_arguments():
    x = ops.convert_to_tensor(rand(3, 4))
    with pytest.raises(ValueError, match="q must be in"):
        ops.quantile(x, 1.5)
    with pytest.raises(ValueError, match="method"):
        ops.quantile(x, 0.5, method="cubic")
    with pytest.raises(NotImplementedError, match="reduction='max'"):
        ops.scatter_update(x, np.array([[0, 1]]), np.array([1.0], np.float32), reduction="max")
