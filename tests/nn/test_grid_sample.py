"""F.grid_sample and F.affine_grid against torch.nn.functional (CPU): values and the gradients
in the input, the grid and theta, every mode, padding mode and ``align_corners``, on every
device. Each test samples with all padding modes and both ``align_corners`` in one program
(see tests/nn/test_functional.py's ``compare``), so every compiled program does several checks.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch.nn.functional as TF

import gingham.nn.functional as F
from gingham.frontend.tensor import ShapeError, tensor

from test_functional import compare, rand  # tests/nn (the test directory is on sys.path)

PADDINGS = ("zeros", "border", "reflection")


def _grid(*shape, reach=2.2, seed=0):
    """Positions mostly inside ``[-1, 1]``, some far enough out to reflect twice."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-reach, reach, shape).astype(np.float32)


def _every_padding(functional, mode):
    def sample(input, grid):
        return {f"{padding}-{corners}": functional.grid_sample(input, grid, mode, padding,
                                                                corners)
                for padding, corners in itertools.product(PADDINGS, (False, True))}
    return sample


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d(device, mode):
    arrays = dict(input=rand(2, 3, 5, 6), grid=_grid(2, 4, 3, 2))
    compare(device, arrays, _every_padding(F, mode), _every_padding(TF, mode))


def test_grid_sample_3d_and_affine_grids(device):
    """Trilinear and nearest 5-d sampling; affine grids (2-d and 3-d) differentiated in theta
    through the sampler."""
    arrays = dict(input=rand(2, 2, 3, 4, 5), grid=_grid(2, 2, 3, 4, 3, seed=1),
                  image=rand(2, 3, 5, 4), theta2=rand(2, 2, 3, seed=2) * 0.7,
                  theta3=rand(2, 3, 4, seed=3) * 0.7)

    def ours_or_theirs(functional):
        def run(input, grid, image, theta2, theta3):
            grid2 = functional.affine_grid(theta2, (2, 3, 4, 6), align_corners=False)
            grid3 = functional.affine_grid(theta3, (2, 2, 2, 3, 4), align_corners=True)
            return {
                "trilinear": functional.grid_sample(input, grid, "bilinear", "reflection",
                                                    False),
                "nearest": functional.grid_sample(input, grid, "nearest", "border", True),
                "grid2": grid2,
                "grid3": grid3,
                "warped2": functional.grid_sample(image, grid2, "bilinear", "zeros", False),
                "warped3": functional.grid_sample(input, grid3, "bilinear", "border", True),
            }
        return run

    compare(device, arrays, ours_or_theirs(F), ours_or_theirs(TF))


def test_grid_sample_and_affine_grid_errors():
    x = tensor(rand(1, 2, 3, 3))
    grid = tensor(_grid(1, 2, 2, 2))
    with pytest.raises(ValueError, match="mode"):
        F.grid_sample(x, grid, mode="linear")
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(x, grid, padding_mode="wrap")
    with pytest.raises(ShapeError, match="grid"):
        F.grid_sample(x, tensor(_grid(1, 2, 2, 3)))
    with pytest.raises(ShapeError, match="bicubic"):
        F.grid_sample(tensor(rand(1, 1, 2, 2, 2)), tensor(_grid(1, 1, 1, 1, 3)), "bicubic")
    theta = tensor(rand(1, 2, 3))
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(tensor(rand(1, 3, 4)), (1, 1, 4, 4))
    with pytest.raises(ValueError, match="positive"):
        F.affine_grid(theta, (1, 1, 0, 4))
    with pytest.raises(NotImplementedError, match="4D and 5D"):
        F.affine_grid(theta, (1, 1, 4))
    with pytest.raises(TypeError, match="floating"):
        F.affine_grid(tensor(np.zeros((1, 2, 3), np.int32)), (1, 1, 4, 4))
