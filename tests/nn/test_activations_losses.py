"""torch.nn's further activations and losses in gingham.nn (functional and module forms) against
PyTorch (CPU), values and gradients, on every device.

As in test_functional.py, each test computes every op on shared inputs, so the forward is one
compiled program and the gradient of a random-weighted sum of all outputs another.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn as tnn
import torch.nn.functional as TF

import gingham.nn as nn
import gingham.nn.functional as F
from gingham.frontend.tensor import ShapeError, tensor
from test_functional import compare, rand


def activations(f, m, x, y):
    """Every activation of ``f`` (a functional module) and its layer from ``m`` (a torch.nn
    or gingham.nn)."""
    return {
        "hardsigmoid": f.hardsigmoid(x), "selu": f.selu(x), "celu": f.celu(x, 0.7),
        "softsign": f.softsign(x), "glu": f.glu(y, 1), "glu_last": f.glu(x),
        "logsigmoid": f.logsigmoid(x * 10.0), "softmin": f.softmin(x, -1),
        "softshrink": f.softshrink(x, 0.8), "hardshrink": f.hardshrink(x), "tanhshrink":
        f.tanhshrink(x), "threshold": f.threshold(x, 0.3, -2.0),
        "Hardsigmoid": m.Hardsigmoid()(y), "SELU": m.SELU()(y), "CELU": m.CELU()(y),
        "Softsign": m.Softsign()(y), "GLU": m.GLU()(x), "LogSigmoid": m.LogSigmoid()(y),
        "Softmin": m.Softmin(dim=1)(y), "Softshrink": m.Softshrink()(y),
        "Hardshrink": m.Hardshrink(1.0)(y), "Tanhshrink": m.Tanhshrink()(y),
        "Threshold": m.Threshold(-0.5, 0.25)(y),
    }


def test_activations_match_torch(device):
    # Scaled by 4 so that the clamps and shrinks see both of their sides.
    arrays = dict(x=4 * rand(3, 2, 6), y=4 * rand(2, 4, 5, seed=1))
    compare(device, arrays, lambda **a: activations(F, nn, **a),
            lambda **a: activations(TF, tnn, **a))


def test_activation_reprs_and_errors():
    for make in (lambda m: m.Hardsigmoid(), lambda m: m.SELU(inplace=True),
                 lambda m: m.CELU(0.5, inplace=True), lambda m: m.GLU(1), lambda m: m.Softmin(0),
                 lambda m: m.Softshrink(0.3), lambda m: m.Hardshrink(), lambda m: m.Tanhshrink(),
                 lambda m: m.Threshold(0.1, 20.0), lambda m: m.LogSigmoid(),
                 lambda m: m.Softsign()):
        assert repr(make(nn)) == repr(make(tnn))
    with pytest.raises(ShapeError, match="Halving dimension must be even, but dimension 1 is "
                                         "size 3"):
        F.glu(tensor(rand(2, 3)), 1)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        F.softmin(tensor(rand(2, 3)))


def losses(f, m, a, b, c, sign, signs, counts, var, scores, tags, labels, class_weight):
    """Every loss (and the pairwise distance) of ``f``, in each reduction, and the layers of
    ``m`` (torch.nn or gingham.nn)."""
    return {
        "pairwise": f.pairwise_distance(a, b), "pairwise_p1_keepdim": f.pairwise_distance(
            a, b, 1.0, keepdim=True), "pairwise_p3": f.pairwise_distance(a, b[0], 3.0),
        "margin_ranking": f.margin_ranking_loss(a[:, 0], b[:, 0], sign, margin=0.3),
        "margin_ranking_none": f.margin_ranking_loss(a, b, signs, reduction="none"),
        "triplet": f.triplet_margin_loss(a, b, c), "triplet_swap_p1": f.triplet_margin_loss(
            a, b, c, margin=2.0, p=1, swap=True, reduction="sum"),
        "triplet_unbatched": f.triplet_margin_loss(a[0], b[0], c[0], reduction="none"),
        "cosine_embedding": f.cosine_embedding_loss(a, b, sign, margin=0.2),
        "cosine_embedding_none": f.cosine_embedding_loss(a, c, sign, reduction="none"),
        "hinge_embedding": f.hinge_embedding_loss(a, signs, margin=0.5, reduction="sum"),
        "poisson": f.poisson_nll_loss(a, counts), "poisson_full": f.poisson_nll_loss(
            var, counts, log_input=False, full=True, reduction="none"),
        "gaussian": f.gaussian_nll_loss(a, b, var), "gaussian_rows_full": f.gaussian_nll_loss(
            a, b, var[:, 0], full=True, reduction="sum"),
        "gaussian_column": f.gaussian_nll_loss(a, b, var[:, :1], reduction="none"),
        "soft_margin": f.soft_margin_loss(a, signs),
        "soft_margin_sum": f.soft_margin_loss(b, signs, reduction="sum"),
        "multilabel": f.multilabel_soft_margin_loss(scores, tags),
        "multilabel_weight": f.multilabel_soft_margin_loss(scores, tags, class_weight,
                                                           reduction="none"),
        "multi_margin": f.multi_margin_loss(scores, labels),
        "multi_margin_p2": f.multi_margin_loss(scores, labels, p=2, margin=0.7,
                                               weight=class_weight, reduction="none"),
        "multi_margin_unbatched": f.multi_margin_loss(scores[0], labels[0], reduction="sum"),
        "PairwiseDistance": m.PairwiseDistance(p=1.5, keepdim=True)(a, c),
        "MarginRankingLoss": m.MarginRankingLoss(0.1, reduction="sum")(a, c, signs),
        "TripletMarginLoss": m.TripletMarginLoss(swap=True)(c, b, a),
        "CosineEmbeddingLoss": m.CosineEmbeddingLoss(0.1, reduction="sum")(b, c, sign),
        "HingeEmbeddingLoss": m.HingeEmbeddingLoss()(b, signs),
        "PoissonNLLLoss": m.PoissonNLLLoss(log_input=False)(var, counts),
        "GaussianNLLLoss": m.GaussianNLLLoss(full=True)(c, a, var),
        "SoftMarginLoss": m.SoftMarginLoss(reduction="none")(c, signs),
        "MultiLabelSoftMarginLoss": m.MultiLabelSoftMarginLoss(reduction="sum")(scores, tags),
        "MultiMarginLoss": m.MultiMarginLoss(margin=2.0)(scores, labels),
    }


def test_losses_match_torch(device):
    rng = np.random.default_rng(5)
    sign = np.where(rng.random(6) < 0.5, 1.0, -1.0).astype(np.float32)
    arrays = dict(a=rand(6, 4), b=rand(6, 4, seed=1), c=rand(6, 4, seed=2), sign=sign,
                  signs=np.where(rng.random((6, 4)) < 0.5, 1.0, -1.0).astype(np.float32),
                  counts=rng.integers(0, 5, (6, 4)).astype(np.float32),
                  var=(rng.random((6, 4)) + 0.1).astype(np.float32), scores=rand(5, 3, seed=3),
                  tags=(rng.random((5, 3)) < 0.5).astype(np.float32),
                  labels=rng.integers(0, 3, 5), class_weight=np.float32([0.5, 2.0, 1.5]))
    compare(device, arrays, lambda **t: losses(F, nn, **t), lambda **t: losses(TF, tnn, **t),
            constants=("sign", "signs", "counts", "tags", "class_weight"))


def test_loss_errors():
    a = tensor(rand(4, 3))
    with pytest.raises(ShapeError, match="var is of incorrect size"):
        F.gaussian_nll_loss(a, a, tensor(rand(4, 2)))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(a, tensor(np.zeros(4, np.int64)), p=3)
    with pytest.raises(ValueError, match="margin to be greater than 0"):
        nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(ShapeError, match="shapes do not broadcast"):
        F.margin_ranking_loss(a, a, tensor(rand(5)))
    with pytest.raises(ShapeError, match="target \\[N\\]"):
        F.cosine_embedding_loss(a, a, tensor(rand(3)))
