"""``keras.ops``' shape, layout and layer ops on gingham's backend (flip, roll, rot90, the
splits and stacks, trace, diff, outer, kron, tensordot, cross, vander, trapezoid,
depth_to_space, the adaptive pools, unfold / fold, ...), forward and gradient against
PyTorch (CPU), the creation ops against NumPy. All differentiable ops of a device share one
compiled program (forward and gradients together)."""

from __future__ import annotations

import importlib
import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("keras") is None:
    pytest.skip("keras is not installed (pip install 'gingham[keras]')", allow_module_level=True)

importlib.import_module("gingham.keras")  # before keras: it installs the backend
import torch  # noqa: E402
import torch.nn.functional as TF  # noqa: E402
from keras import ops  # noqa: E402

from ops_oracle import check_against_torch  # noqa: E402  (tests/keras/ops_oracle.py)

TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _torch_depth_to_space_nhwc(x, b):
    """TensorFlow's DepthToSpace of NHWC data: depth ordered (block row, block col, channel)."""
    n, h, w, c = x.shape
    return x.reshape(n, h, w, b, b, c // (b * b)).permute(0, 1, 3, 2, 4, 5).reshape(
        n, h * b, w * b, c // (b * b))


def _torch_trapezoid_x(y, x):
    return torch.trapezoid(y, x, dim=-1)


# name: (keras op, torch op, float inputs): each differentiable in every input
DIFFERENTIABLE = {
    "append": (lambda a, b: ops.append(a, b, axis=0), lambda a, b: torch.cat([a, b], 0),
               [rand(2, 3), rand(1, 3, seed=1)]),
    "append_flat": (ops.append, lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]),
                    [rand(2, 2), rand(3, seed=1)]),
    "array_split": (lambda x: ops.array_split(x, 3, axis=1),
                    lambda x: torch.tensor_split(x, 3, dim=1), [rand(2, 7)]),
    "hsplit": (lambda x: ops.hsplit(x, 2), lambda x: torch.hsplit(x, 2), [rand(3, 4)]),
    "vsplit": (lambda x: ops.vsplit(x, [1]), lambda x: torch.vsplit(x, [1]), [rand(3, 4)]),
    "dsplit": (lambda x: ops.dsplit(x, 2), lambda x: torch.dsplit(x, 2), [rand(2, 2, 4)]),
    "stacks": (lambda a, v: (ops.hstack([a, a]), ops.vstack([v, a]), ops.dstack([a, a])),
               lambda a, v: (torch.hstack([a, a]), torch.vstack([v, a]), torch.dstack([a, a])),
               [rand(2, 3), rand(3, seed=1)]),
    "flip": (lambda x: (ops.flip(x), ops.flip(x, axis=1), ops.fliplr(x), ops.flipud(x)),
             lambda x: (torch.flip(x, (0, 1, 2)), torch.flip(x, (1,)), torch.fliplr(x),
                        torch.flipud(x)), [rand(2, 3, 4)]),
    "roll": (lambda x: (ops.roll(x, 2), ops.roll(x, -1, axis=1), ops.roll(x, (1, 2), (0, 2))),
             lambda x: (torch.roll(x, 2), torch.roll(x, -1, 1), torch.roll(x, (1, 2), (0, 2))),
             [rand(2, 3, 4)]),
    "rot90": (lambda x: (ops.rot90(x), ops.rot90(x, k=3, axes=(1, 2))),
              lambda x: (torch.rot90(x), torch.rot90(x, 3, (1, 2))), [rand(2, 3, 4)]),
    "ravel": (ops.ravel, lambda x: x.reshape(-1), [rand(2, 3)]),
    "trace": (lambda x: (ops.trace(x), ops.trace(x, offset=1, axis1=1, axis2=2)),
              lambda x: (torch.diagonal(x, 0, 0, 1).sum(-1), torch.diagonal(x, 1, 1, 2).sum(-1)),
              [rand(3, 3, 4)]),
    "diagflat": (lambda x: ops.diagflat(x, k=-1), lambda x: torch.diagflat(x, -1),
                 [rand(2, 2)]),
    "diff": (lambda x: (ops.diff(x), ops.diff(x, n=2, axis=0)),
             lambda x: (torch.diff(x), torch.diff(x, 2, 0)), [rand(4, 5)]),
    "outer": (ops.outer, torch.outer, [rand(3), rand(4, seed=1)]),
    "inner": (ops.inner, torch.inner, [rand(2, 3), rand(4, 3, seed=1)]),
    "kron": (ops.kron, torch.kron, [rand(2, 3), rand(2, 2, seed=1)]),
    "tensordot": (lambda a, b: (ops.tensordot(a, b, axes=1),
                                ops.tensordot(a, b.transpose(), axes=[[0, 1], [0, 1]])),
                  lambda a, b: (torch.tensordot(a, b, 1),
                                torch.tensordot(a, b.t(), ([0, 1], [0, 1]))),
                  [rand(2, 3), rand(3, 2, seed=1)]),
    "vdot": (ops.vdot, lambda a, b: (a * b).sum(), [rand(2, 3), rand(2, 3, seed=1)]),
    "cross": (lambda a, b: (ops.cross(a, b), ops.cross(a.transpose(), b.transpose(), axis=0)),
              lambda a, b: (torch.linalg.cross(a, b), torch.linalg.cross(a.t(), b.t(), dim=0)),
              [rand(4, 3), rand(4, 3, seed=1)]),
    "vander": (lambda x: (ops.vander(x), ops.vander(x, 2, increasing=True)),
               lambda x: (x[:, None] ** torch.arange(3.0, -1.0, -1.0),
                          x[:, None] ** torch.arange(2.0)), [rand(4)]),
    "trapezoid": (lambda y, x: (ops.trapezoid(y), ops.trapezoid(y, dx=0.5, axis=0),
                                ops.trapezoid(y, x)),
                  lambda y, x: (torch.trapezoid(y), torch.trapezoid(y, dx=0.5, dim=0),
                                _torch_trapezoid_x(y, x)),
                  [rand(3, 5), np.cumsum(np.abs(rand(5, seed=1)))]),
    "depth_to_space": (lambda x: (ops.depth_to_space(x, 2),
                                  ops.depth_to_space(x, 2, data_format="channels_first")),
                       lambda x: (_torch_depth_to_space_nhwc(x, 2), TF.pixel_shuffle(x, 2)),
                       [rand(2, 4, 4, 8)]),
    "space_to_depth": (lambda x: ops.space_to_depth(x, 2, data_format="channels_first"),
                       lambda x: TF.pixel_unshuffle(x, 2), [rand(2, 3, 4, 6)]),
    "space_to_depth_nhwc": (lambda x: ops.depth_to_space(ops.space_to_depth(x, 2), 2) * x,
                            lambda x: x * x, [rand(2, 4, 6, 3)]),
    "adaptive_pools": (lambda x: (ops.adaptive_average_pool(x, (2, 3),
                                                            data_format="channels_first"),
                                  ops.adaptive_max_pool(x, 2, data_format="channels_first"),
                                  ops.adaptive_average_pool(ops.transpose(x, (0, 2, 3, 1)), 3,
                                                            data_format="channels_last")),
                       lambda x: (TF.adaptive_avg_pool2d(x, (2, 3)), TF.adaptive_max_pool2d(x, 2),
                                  TF.adaptive_avg_pool2d(x, 3).permute(0, 2, 3, 1)),
                       [rand(2, 3, 5, 7)]),
    "unfold_fold": (lambda x, c: (ops.unfold(x, 2, padding=1, stride=2),
                                  ops.fold(c, (4, 5), 2, stride=(1, 2))),
                    lambda x, c: (TF.unfold(x, 2, padding=1, stride=2),
                                  TF.fold(c, (4, 5), 2, stride=(1, 2))),
                    [rand(2, 3, 5, 5), rand(2, 8, 6, seed=1)]),
}


def _flat(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def test_differentiable_ops_against_torch(device):
    """Every op of DIFFERENTIABLE, forward and gradient (of the outputs weighted by random
    cotangents) in one program, against PyTorch."""
    check_against_torch(device, DIFFERENTIABLE, TOLERANCE)


# name: (keras op, NumPy's result): creation and integer ops, against NumPy
NUMPY = {
    "tri": (lambda: ops.tri(3, 4, k=1), lambda: np.tri(3, 4, 1, dtype=np.float32)),
    "linspace": (lambda: ops.linspace(0.0, 1.0, 5, endpoint=False),
                 lambda: np.linspace(0, 1, 5, endpoint=False, dtype=np.float32)),
    "logspace": (lambda: ops.logspace(0.0, 2.0, 4, base=2.0),
                 lambda: np.logspace(0, 2, 4, base=2.0, dtype=np.float32)),
    "geomspace": (lambda: ops.geomspace(1.0, 8.0, 4), lambda: np.float32([1, 2, 4, 8])),
    "meshgrid": (lambda: ops.meshgrid(np.arange(3, dtype=np.int32), np.arange(2.0)),
                 lambda: np.meshgrid(np.arange(3, dtype=np.int32), np.arange(2.0, dtype=np.float32))),
    "multi_hot": (lambda: ops.multi_hot(np.array([[0, 2], [1, 1]], np.int32), 4),
                  lambda: np.float32([[1, 0, 1, 0], [0, 1, 0, 0]])),
    "trace_int": (lambda: ops.trace(np.arange(9, dtype=np.int8).reshape(3, 3)),
                  lambda: np.int32(12)),
    "empty_like": (lambda: ops.shape(ops.empty_like(np.zeros((2, 3), np.int32))),
                   lambda: (2, 3)),
    "diff_bool": (lambda: ops.diff(np.array([True, True, False])),
                  lambda: np.diff(np.array([True, True, False]))),
}


@pytest.mark.parametrize("name", NUMPY)
def test_creation_and_integer_ops_against_numpy(name):
    keras_op, numpy_op = NUMPY[name]
    got, want = keras_op(), numpy_op()
    for g, w in zip(_flat(got), _flat(want)):
        g = np.asarray(g if isinstance(g, (int, tuple)) else ops.convert_to_numpy(g))
        assert g.dtype == np.asarray(w).dtype or isinstance(w, tuple), name
        np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=name)


def test_bad_arguments_raise():
    x = ops.convert_to_tensor(rand(2, 3))
    with pytest.raises(ValueError, match="rot90"):
        ops.rot90(ops.convert_to_tensor(rand(3)))
    with pytest.raises(ValueError, match="depth_to_space"):
        ops.depth_to_space(x, 2)
    with pytest.raises(ValueError, match="vsplit"):
        ops.vsplit(ops.convert_to_tensor(rand(4)), 2)
