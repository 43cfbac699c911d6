"""The layout ops (flips, rolls, triangles, diagonals, products of whole shapes, stacking,
pixel shuffles, patches) and the RMS / local-response norms against PyTorch's (CPU), forward
and gradient, with :func:`test_tensor_methods.compare`: each test's outputs are one compiled
program and their gradients another, on every device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
import gingham.nn.functional  # noqa: F401  (lib.nn.functional below)
from gingham.frontend.tensor import DimError, ShapeError

from test_tensor_methods import compare, rand


def test_flips_rolls_triangles_and_diagonals(device):
    """Every element of each result comes from one input element (or is zero), so the
    gradients check that each one lands where it came from."""
    arrays = dict(x=rand(3, 4, 5), m=rand(4, 4, seed=1), v=rand(3, seed=2))

    def run(lib, x, m, v):
        return {
            "flip": x.flip(0, 2), "flip_fn": lib.flip(x, (-1,)), "fliplr": lib.fliplr(x),
            "flipud": m.flipud(), "roll": x.roll(1, 0), "roll_neg": lib.roll(x, -2, -1),
            "roll_dims": x.roll((2, 7), (1, 2)), "roll_flat": x.roll(3),
            "rot90": lib.rot90(m), "rot90_2": x.rot90(2, (1, 2)), "rot90_3": x.rot90(-1, (2, 0)),
            "tile": x.tile((2,)), "tile_lead": m.tile(2, 1, 2),
            "repeat_interleave": x.repeat_interleave(2, dim=1),
            "repeat_interleave_flat": lib.repeat_interleave(v, 3),
            "tril": x.tril(), "tril_k": lib.tril(m, -1), "triu": lib.triu(x, 1),
            "triu_neg": m.triu(-2), "diagonal": x.diagonal(), "diagonal_off": x.diagonal(1, 2, 1),
            "diagonal_neg": lib.diagonal(x, -1, 0, 2), "diag": m.diag(1), "diag_vec": lib.diag(v),
            "diag_vec_neg": v.diag(-2), "trace": m.trace(), "movedim": lib.movedim(x, 0, -1),
            "movedim_many": x.movedim((0, 1), (2, 0)), "moveaxis": lib.moveaxis(x, -1, 1),
            "meshgrid": lib.meshgrid(v, m[0], indexing="ij"),
            "meshgrid_xy": lib.meshgrid(v, m[1], indexing="xy"),
        }

    compare(device, arrays, run)


@pytest.mark.filterwarnings("ignore:Using torch.cross without specifying the dim")
def test_products_stacks_and_differences(device):
    """outer, inner, kron, tensordot, cross and diff combine their inputs' elements; the
    stacks and linspace / logspace place them."""
    arrays = dict(a=rand(2, 3), b=rand(4, 3, seed=1), c=rand(3, 4, 5, seed=2),
                  u=rand(3, seed=3), w=rand(4, seed=4))

    def run(lib, a, b, c, u, w):
        on = {} if lib is torch else dict(device=u.device)  # creation on the test's device
        return {
            "outer": lib.outer(u, w), "outer_method": w.outer(u), "inner": lib.inner(a, b),
            "inner_vec": u.inner(u), "inner_scalar": lib.inner(u, u.sum()),
            "kron": lib.kron(a, b), "kron_ranks": lib.kron(u, a), "kron_method": a.kron(a),
            "tensordot": lib.tensordot(a, c, dims=1),
            "tensordot_pairs": lib.tensordot(c, b, dims=([1, 0], [0, 1])),
            "tensordot_0": lib.tensordot(u, w, dims=0),
            "cross": lib.cross(a, b[:2]), "cross_dim": lib.cross(b[:3, :2], a.t(), dim=0),
            "cross_broadcast": a.cross(u.unsqueeze(0)),
            "diff": lib.diff(c), "diff_2": c.diff(2, 0), "diff_pend": lib.diff(
                a, dim=1, prepend=b[:2, :1], append=a[:, :2]), "diff_bool": (u > 0).diff(),
            "hstack": lib.hstack([a, b[:2]]), "hstack_vec": lib.hstack([u, w]),
            "vstack": lib.vstack([u, a]), "dstack": lib.dstack([a, a * 2.0]),
            "dstack_vec": lib.dstack([u, u]), "column_stack": lib.column_stack(
                [c[:, 0, 0], a.t(), c[:, 1, 1]]),
            "linspace": lib.linspace(-1.0, 2.0, 7, **on) * u.sum(),
            "linspace_one": lib.linspace(3.0, 5.0, 1, **on),
            "logspace": lib.logspace(0.0, 2.0, 5, **on),
            "logspace_2": lib.logspace(1.0, -1.0, 4, base=2.0, **on),
        }

    compare(device, arrays, run, tol=dict(rtol=1e-5, atol=2e-5))


def test_layer_ops(device):
    """pixel_shuffle / unshuffle, unfold / fold (padded, strided, dilated: fold adds the
    overlaps), rms_norm and local_response_norm (3-d and 4-d) against torch.nn.functional."""
    arrays = dict(x=rand(2, 8, 3, 4), s=rand(2, 3, 5, 7, seed=1), r=rand(3, 4, 6, seed=2),
                  g=rand(6, seed=3) + 1.0, cols=rand(2, 12, 9, seed=4))

    def run(lib, x, s, r, g, cols):
        F = lib.nn.functional
        return {
            "pixel_shuffle": F.pixel_shuffle(x, 2), "pixel_unshuffle": F.pixel_unshuffle(
                F.pixel_shuffle(x, 2) * 2.0, 2), "pixel_unshuffle_3d": F.pixel_unshuffle(
                s[0, :, 1:5, 1:7], 2),
            "unfold": F.unfold(s, 3), "unfold_padded": F.unfold(s, (2, 3), dilation=(2, 1),
                                                                padding=1, stride=(1, 2)),
            "unfold_unbatched": F.unfold(s[0], 2, stride=2),
            "fold": F.fold(cols, (5, 5), 2, stride=2, padding=1),
            "fold_overlap": F.fold(cols[:, :, :6], (3, 4), (2, 2), dilation=1),
            "fold_unbatched": F.fold(cols[0, :, :4], (4, 4), 2, dilation=2),
            "rms_norm": F.rms_norm(r, (6,), g), "rms_norm_2": F.rms_norm(r, (4, 6), eps=1e-3),
            "lrn": F.local_response_norm(s, 3), "lrn_big": F.local_response_norm(
                x, 4, alpha=0.1, beta=0.6, k=2.0), "lrn_3d": F.local_response_norm(r, 2),
        }

    compare(device, arrays, run, tol=dict(rtol=1e-4, atol=1e-5))


def test_errors_name_the_op_and_the_shape():
    x = gingham.zeros((2, 3))
    with pytest.raises(ShapeError, match="fliplr: input must be at least 2-d"):
        gingham.fliplr(gingham.zeros((3,)))
    with pytest.raises(DimError, match="roll: dim 2 is out of range"):
        x.roll(1, 2)
    with pytest.raises(ShapeError, match="rot90: dims"):
        x.rot90(1, (0, 0))
    with pytest.raises(TypeError, match="repeat_interleave: repeats must be an int"):
        x.repeat_interleave(gingham.tensor(np.array([1, 2])))
    with pytest.raises(ShapeError, match="trace: input must be a matrix"):
        gingham.zeros((2, 2, 2)).trace()
    with pytest.raises(ShapeError, match="cross: dim 0 of shape"):
        gingham.cross(x, x, dim=0)
    with pytest.raises(ShapeError, match="tensordot: dims"):
        gingham.tensordot(x, x, dims=([0], [1]))
    with pytest.raises(ValueError, match="meshgrid: indexing must be"):
        gingham.meshgrid(x[0], indexing="yx")
    F = gingham.nn.functional
    with pytest.raises(ShapeError, match="pixel_shuffle: .* divisible by upscale_factor"):
        F.pixel_shuffle(gingham.zeros((1, 6, 2, 2)), 2)
    with pytest.raises(ShapeError, match="fold: input shape"):
        F.fold(gingham.zeros((1, 8, 5)), (4, 4), 2)
    with pytest.raises(ShapeError, match="rms_norm: normalized_shape"):
        F.rms_norm(x, (2,))
    # the same conditions raise in PyTorch
    with pytest.raises(RuntimeError):
        torch.trace(torch.zeros(2, 2, 2))
    with pytest.raises(RuntimeError):
        torch.nn.functional.pixel_shuffle(torch.zeros(1, 6, 2, 2), 2)
