"""``keras.ops``' control flow (slice, switch, while_loop, scan, map, associative_scan) and
the searching / counting / statistics ops of ``keras.ops.numpy`` on gingham's backend,
eagerly and inside a compiled program (:func:`gingham.jit`), against NumPy and PyTorch."""

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

import gingham  # noqa: E402
from gingham.frontend.tensor import realize, tensor  # noqa: E402

from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _torch_scan(x, w):
    carry, ys = torch.zeros(x.shape[1]), []
    for row in x.flip(0):  # reverse=True
        carry = torch.tanh(carry * w + row)
        ys.append(carry * 2)
    return carry, torch.stack(ys[::-1])


def _torch_prefix_product(x):
    out = [x[:, :1]]
    for k in range(1, x.shape[1]):
        out.append(out[-1] * x[:, k:k + 1])
    return torch.cat(out, 1)


# Differentiable control flow: forward values and gradients against PyTorch's loops.
CONTROL = {
    "slice": (lambda x: ops.slice(x, (1, 2), (2, 3)), lambda x: x[1:3, 2:5], [rand(4, 6)]),
    "scan": (lambda x, w: ops.scan(lambda c, r: (ops.tanh(c * w + r), ops.tanh(c * w + r) * 2),
                                   ops.zeros(x.shape[1]), x, reverse=True),
             _torch_scan, [rand(5, 3), rand(3, seed=1)]),
    "map": (lambda x: ops.map(lambda r: ops.sum(r * r), x), lambda x: (x * x).sum(1),
            [rand(4, 3)]),
    "associative_scan": (lambda x: ops.associative_scan(lambda a, b: a * b, x, axis=1),
                         _torch_prefix_product, [rand(2, 7)]),
    "associative_scan_reverse": (
        lambda x: ops.associative_scan(lambda a, b: {"s": a["s"] + b["s"]}, {"s": x},
                                       reverse=True)["s"],
        lambda x: x.flip(0).cumsum(0).flip(0), [rand(6, 2)]),
    "while_loop": (lambda x: ops.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * v + 0.1),
                                            (0, x))[1],
                   lambda x: ((x * x + 0.1) ** 2 + 0.1) ** 2 + 0.1, [rand(3) * 0.5]),
    "switch": (lambda x: ops.switch(7, [lambda v: v * 2, lambda v: ops.sin(v)], x),
               torch.sin, [rand(3)]),
}


def test_control_flow_matches_torch(device):
    check_against_torch(device, CONTROL)


def test_device_conditions_inside_a_compiled_program(device):
    """A condition computed on the device: ``while_loop`` with ``maximum_iterations`` keeps
    each iteration's update only where it held; without it, and ``unique``, a clear error."""
    x = tensor(np.array([0.3, 5.0, 1.2], np.float32), device=device)

    def doubling(v):  # doubles the whole vector while its sum is below 10, at most 4 times
        return ops.while_loop(lambda s: ops.sum(s) < 10.0, lambda s: (s * 2.0,), (v,),
                              maximum_iterations=4)[0]

    def picked(v):
        return ops.switch(ops.cast(ops.sum(v) > 1.0, "int32"), [lambda a: -a, lambda a: a * 3], v)

    with keras.device(device):
        got = gingham.jit(doubling)(x).numpy()
        np.testing.assert_allclose(got, [0.6, 10.0, 2.4], rtol=1e-6)
        np.testing.assert_allclose(ops.convert_to_numpy(doubling(x)), [0.6, 10.0, 2.4])
        with pytest.raises(NotImplementedError, match="maximum_iterations"):
            gingham.jit(lambda v: ops.while_loop(lambda s: ops.sum(s) < 10.0,
                                                 lambda s: s * 2.0, v))(x)
        with pytest.raises(NotImplementedError, match="unique"):
            gingham.jit(lambda v: ops.unique(v))(x)
        with pytest.raises(NotImplementedError, match="trainer"):  # cond's rule, as switch's
            gingham.jit(picked)(x)
        np.testing.assert_allclose(ops.convert_to_numpy(picked(x)), x.numpy() * 3)
    with pytest.raises(ValueError, match="does not fit"):
        ops.slice(np.ones((2, 3)), (1, 2), (2, 2))


def _nan_data():
    x = rand(4, 5, seed=3)
    x[0, 1] = x[2, [0, 3]] = np.nan
    return x


VALUES = rand(24, seed=2)
BINS = np.array([-1.0, -0.2, 0.0, 0.7, 1.5], np.float32)
INTS = np.array([12, -18, 0, 7, 1071, 9], np.int32)
OTHER = np.array([8, 12, 5, -3, 462, 9], np.int32)

# name: (keras op, NumPy's answer); all computed in one program per device.
NUMPY_OPS = {
    "bincount": (lambda: ops.bincount(np.array([0, 3, 3, 1]), weights=VALUES[:4], minlength=6),
                 np.bincount([0, 3, 3, 1], VALUES[:4], 6)),
    "bincount_2d": (lambda: ops.bincount(np.array([[0, 2], [1, 1]])),
                    np.array([[1, 0, 1], [0, 2, 0]])),
    "digitize": (lambda: ops.digitize(VALUES, BINS), np.digitize(VALUES, BINS)),
    "searchsorted": (lambda: ops.searchsorted(BINS, VALUES[:6], side="right"),
                     np.searchsorted(BINS, VALUES[:6], "right")),
    "isin": (lambda: ops.isin(INTS, OTHER, invert=True), np.isin(INTS, OTHER, invert=True)),
    "gcd": (lambda: ops.gcd(INTS, OTHER), np.gcd(INTS, OTHER)),
    "lcm": (lambda: ops.lcm(INTS, OTHER), np.lcm(INTS, OTHER)),
    "nextafter": (lambda: ops.nextafter(VALUES[:5], np.array([0, 1, np.inf, -np.inf, 0],
                                                              np.float32)),
                  np.nextafter(VALUES[:5], np.array([0, 1, np.inf, -np.inf, 0], np.float32))),
    "select": (lambda: ops.select([VALUES < 0, VALUES > 1], [VALUES, VALUES * 2], 7.0),
               np.select([VALUES < 0, VALUES > 1], [VALUES, VALUES * 2], 7.0)),
    "corrcoef": (lambda: ops.corrcoef(VALUES.reshape(4, 6)), np.corrcoef(VALUES.reshape(4, 6))),
    "correlate_same": (lambda: ops.correlate(VALUES[:7], VALUES[7:11], "same"),
                       np.correlate(VALUES[:7], VALUES[7:11], "same")),
    "correlate_full": (lambda: ops.correlate(VALUES[:3], VALUES[7:12], "full"),
                       np.correlate(VALUES[:3], VALUES[7:12], "full")),
    "histogram": (lambda: ops.histogram(VALUES, 5)[0], np.histogram(VALUES, 5)[0]),
    "histogram_edges": (lambda: ops.histogram(VALUES, 4, (-1.0, 1.0))[1],
                        np.histogram(VALUES, 4, (-1.0, 1.0))[1]),
    "unravel_index": (lambda: ops.stack(ops.unravel_index(np.array([5, 7, 11]), (3, 4))),
                      np.stack(np.unravel_index([5, 7, 11], (3, 4)))),
    "nanmedian": (lambda: ops.nanmedian(_nan_data(), axis=1), np.nanmedian(_nan_data(), 1)),
    "nanpercentile": (lambda: ops.nanpercentile(_nan_data(), [10, 75], axis=(0, 1),
                                                keepdims=True),
                      np.nanpercentile(_nan_data(), [10, 75], (0, 1), keepdims=True)),
    "nanquantile": (lambda: ops.nanquantile(_nan_data(), 0.3, axis=0, method="nearest"),
                    np.nanquantile(_nan_data(), 0.3, 0, method="nearest")),
    "vectorize": (lambda: ops.vectorize(lambda a: ops.sum(a * a), signature="(n)->()")(
        VALUES.reshape(4, 6)), (VALUES.reshape(4, 6) ** 2).sum(1)),
    "array": (lambda: ops.array([[1, 2]], "float16"), np.array([[1, 2]], np.float16)),
}


def test_numpy_ops_match_numpy(device):
    with keras.device(device):
        results = {name: keras_op() for name, (keras_op, _) in NUMPY_OPS.items()}
        realize(list(results.values()))
    for name, (_, expected) in NUMPY_OPS.items():
        got = results[name].numpy()
        assert got.shape == np.shape(expected), name
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_host_side_numpy_ops():
    """``unique`` and ``view``: the result's shape or bytes come from the host."""
    values, counts = ops.unique(np.array([3, 1, 3, 2]), return_counts=True, size=5,
                                fill_value=-1)
    np.testing.assert_array_equal(ops.convert_to_numpy(values), [1, 2, 3, -1, -1])
    np.testing.assert_array_equal(ops.convert_to_numpy(counts), [1, 1, 2, 0, 0])
    floats = np.array([1.0, -2.5], np.float32)
    np.testing.assert_array_equal(ops.convert_to_numpy(ops.view(floats, "int32")),
                                  floats.view(np.int32))
