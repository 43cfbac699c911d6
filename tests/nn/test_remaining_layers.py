"""The remaining torch.nn layers and functions of gingham.nn against torch (CPU), on every
device: LP pools, RReLU, Softmax2d, circular padding, feature alpha dropout, EmbeddingBag,
TripletMarginWithDistanceLoss, MultiLabelMarginLoss, the lazy modules,
AdaptiveLogSoftmaxWithLoss, F.pdist, the
max-pool-with-indices names and the upsample aliases, values and gradients in one program;
then the random ones (RReLU in training, gumbel_softmax, feature alpha dropout) by their laws.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import gingham
import gingham.nn as nn
import gingham.nn.functional as F
from gingham.frontend.tensor import realize, tensor
from module_oracle import assert_layers_match  # tests/nn/module_oracle.py

TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


LAYERS = {  # name: (layer from gingham.nn or torch.nn, input names)
    "lp_pool1d": (lambda m: m.LPPool1d(2, 3, stride=2), ("signal",)),
    "lp_pool1d_sum": (lambda m: m.LPPool1d(1, 2, ceil_mode=True), ("signal",)),
    "lp_pool2d_max": (lambda m: m.LPPool2d(float("inf"), (2, 3)), ("image",)),
    "lp_pool3d": (lambda m: m.LPPool3d(2, 2, stride=1), ("volume",)),
    "rrelu_eval": (lambda m: m.RReLU(0.1, 0.3).eval(), ("image",)),
    "softmax2d": (lambda m: m.Softmax2d(), ("image",)),
    "softmax2d_unbatched": (lambda m: m.Softmax2d(), ("plane",)),
    "circular1d": (lambda m: m.CircularPad1d((2, 1)), ("signal",)),
    "circular2d": (lambda m: m.CircularPad2d(1), ("image",)),
    "circular3d": (lambda m: m.CircularPad3d((1, 0, 0, 2, 1, 1)), ("volume",)),
    "feature_alpha_eval": (lambda m: m.FeatureAlphaDropout(0.3).eval(), ("image",)),
    "bag_sum": (lambda m: m.EmbeddingBag(7, 3, mode="sum"),
                ("tokens", "offsets", "sample_weights")),
    "bag_mean_2d": (lambda m: m.EmbeddingBag(7, 3, padding_idx=2), ("token_rows",)),
    "bag_max_last": (lambda m: m.EmbeddingBag(7, 3, mode="max", include_last_offset=True),
                     ("tokens", "closed_offsets")),
    "triplet_distance": (lambda m: m.TripletMarginWithDistanceLoss(),
                         ("features", "other", "third")),
    "triplet_distance_swap": (lambda m: m.TripletMarginWithDistanceLoss(
        distance_function=m.PairwiseDistance(p=1), margin=0.5, swap=True, reduction="none"),
        ("features", "other", "third")),
    "multilabel_margin": (lambda m: m.MultiLabelMarginLoss(), ("features", "labels")),
    "multilabel_margin_none": (lambda m: m.MultiLabelMarginLoss(reduction="none"),
                               ("features", "labels")),
    "lazy_linear": (lambda m: m.LazyLinear(3), ("features",)),
    "lazy_conv1d": (lambda m: m.LazyConv1d(2, 3, padding=1), ("signal",)),
    "lazy_conv2d": (lambda m: m.LazyConv2d(4, 2, stride=2, bias=False), ("image",)),
    "lazy_conv3d": (lambda m: m.LazyConv3d(2, 2), ("volume",)),
    "lazy_conv_transpose1d": (lambda m: m.LazyConvTranspose1d(3, 2, stride=2), ("signal",)),
    "lazy_conv_transpose2d": (lambda m: m.LazyConvTranspose2d(2, 3, padding=1), ("plane",)),
    "lazy_conv_transpose3d": (lambda m: m.LazyConvTranspose3d(1, 2), ("volume",)),
    "lazy_batch_norm1d": (lambda m: m.LazyBatchNorm1d(), ("features",)),
    "lazy_batch_norm2d": (lambda m: m.LazyBatchNorm2d(momentum=0.2), ("image",)),
    "lazy_batch_norm3d": (lambda m: m.LazyBatchNorm3d(affine=False), ("volume",)),
    "lazy_instance_norm1d": (lambda m: m.LazyInstanceNorm1d(affine=True), ("signal",)),
    "lazy_instance_norm2d": (lambda m: m.LazyInstanceNorm2d(), ("image",)),
    "lazy_instance_norm3d": (lambda m: m.LazyInstanceNorm3d(track_running_stats=True),
                             ("volume",)),
}

# An infinite norm is a max pool in the PyTorch these tests are written against (2.13);
# PyTorch 2.11 gave 1.0 for every window (the sum of x ** inf to the power 0), so with an
# older oracle that layer is left out.
_OLD_LP_POOL = float(torch.nn.functional.lp_pool1d(torch.full((1, 1, 2), 0.5), float("inf"),
                                                   2).item()) != 0.5
if _OLD_LP_POOL:
    del LAYERS["lp_pool2d_max"]

ARRAYS = {"signal": rand(2, 4, 7), "image": rand(2, 3, 4, 5, seed=1),
          "plane": rand(3, 4, 5, seed=2), "volume": rand(2, 2, 3, 4, 3, seed=3),
          "features": rand(4, 5, seed=4), "other": rand(4, 5, seed=5),
          "third": rand(4, 5, seed=6), "sample_weights": rand(9, seed=7),
          "tokens": np.array([1, 4, 4, 0, 6, 2, 3, 5, 1], np.int64),
          "offsets": np.array([0, 3, 3, 7], np.int64),  # bag 1 is empty
          "closed_offsets": np.array([0, 2, 2, 6, 9], np.int64),  # the last closes bag 3
          "token_rows": np.array([[1, 2, 5], [2, 2, 2], [0, 6, 6]], np.int64),
          "classes": np.array([0, 4, 8, 2], np.int64),  # the head and both tail clusters
          "labels": np.array([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1],
                              [4, 4, -1, 0, 0]], np.int64)}


def test_layers_match_torch(device):
    torch.manual_seed(0)
    theirs = tnn.ModuleDict({name: make(tnn) for name, (make, _) in LAYERS.items()})
    ours = nn.ModuleDict({name: make(nn) for name, (make, _) in LAYERS.items()}).to(device)
    theirs["asm"] = tnn.AdaptiveLogSoftmaxWithLoss(5, 9, [3, 6], div_value=2.0, head_bias=True)
    ours["asm"] = nn.AdaptiveLogSoftmaxWithLoss(5, 9, [3, 6], div_value=2.0, head_bias=True,
                                                device=device)
    g_in = {k: tensor(v, device=device, requires_grad=v.dtype == np.float32)
            for k, v in ARRAYS.items()}
    t_in = {k: torch.tensor(v, requires_grad=v.dtype == np.float32) for k, v in ARRAYS.items()}
    for name, (_, keys) in LAYERS.items():
        if name.startswith("lazy"):  # the first call makes the parameters
            assert ours[name].has_uninitialized_params()
            ours[name](*(g_in[k].detach() for k in keys))
            theirs[name](*(t_in[k].detach() for k in keys))
            assert type(ours[name]).__name__ == type(theirs[name]).__name__, name
    with torch.no_grad():  # parameters away from their initial ones and zeros
        for value in theirs.parameters():
            value.copy_(torch.randn(value.shape))
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    for name in [*LAYERS, "asm"]:
        if not name.startswith("lazy"):
            assert repr(ours[name]) == repr(theirs[name]), name
    g_out = {name: ours[name](*(g_in[k] for k in keys)) for name, (_, keys) in LAYERS.items()}
    t_out = {name: theirs[name](*(t_in[k] for k in keys)) for name, (_, keys) in LAYERS.items()}
    points, t_points = g_in["features"], t_in["features"]
    g_out.update(pdist=F.pdist(points), pdist_inf=F.pdist(points, float("inf")),
                 pdist_1=F.pdist(points, 1.0))
    t_out.update(pdist=TF.pdist(t_points), pdist_inf=TF.pdist(t_points, float("inf")),
                 pdist_1=TF.pdist(t_points, 1.0))
    for out, asm, x, target in ((g_out, ours["asm"], g_in["features"], g_in["classes"]),
                                (t_out, theirs["asm"], t_in["features"], t_in["classes"])):
        result = asm(x, target)
        unbatched = asm(x[1], target[1])
        out.update(asm_output=result.output, asm_loss=result.loss, asm_log_prob=asm.log_prob(x),
                   asm_unbatched=unbatched.output, asm_unbatched_loss=unbatched.loss)
    np.testing.assert_array_equal(ours["asm"].predict(g_in["features"]).numpy(),
                                  theirs["asm"].predict(t_in["features"]).numpy())
    values, indices = F.max_pool2d_with_indices(g_in["image"], 2)
    t_values, t_indices = TF.max_pool2d_with_indices(t_in["image"], 2)
    g_out["unpooled"] = F.max_unpool2d(values, indices, 2, output_size=(4, 5))
    t_out["unpooled"] = TF.max_unpool2d(t_values, t_indices, 2, output_size=(4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the aliases are deprecated, in both
        g_out.update(up=F.upsample(g_in["image"], scale_factor=2, mode="bilinear"),
                     up_nearest=F.upsample_nearest(g_in["image"], size=(5, 7)),
                     up_bilinear=F.upsample_bilinear(g_in["image"], scale_factor=2))
        t_out.update(up=TF.upsample(t_in["image"], scale_factor=2, mode="bilinear"),
                     up_nearest=TF.upsample_nearest(t_in["image"], size=(5, 7)),
                     up_bilinear=TF.upsample_bilinear(t_in["image"], scale_factor=2))
    assert_layers_match(ours, theirs, g_in, t_in, g_out, t_out, device, TOLERANCE)
    np.testing.assert_array_equal(indices.numpy(), t_indices.numpy())
    state = ours.state_dict()  # the lazy norms' running statistics after two calls
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(state[name], value.numpy(), err_msg=name, **TOLERANCE)


def test_random_layers_follow_their_laws(device):
    """RReLU in training (each negative value's slope in [lower, upper], spread over it, and
    the gradient that slope), gumbel_softmax (rows of probabilities; hard rows one-hot at the
    soft sample's argmax with the soft sample's gradient; argmax frequencies the softmax of
    the logits) and feature alpha dropout (each channel kept or dropped whole)."""
    x = tensor(rand(64, 50, seed=8), device=device, requires_grad=True)
    lower, upper = 0.1, 0.4
    rrelu = nn.RReLU(lower, upper)
    y = rrelu(x)
    (y * 2.0).sum().backward()
    values, out, grad = x.numpy(), y.numpy(), x.grad.numpy()
    negative = values < 0
    np.testing.assert_allclose(out[~negative], values[~negative])
    slopes = out[negative] / values[negative]
    assert lower - 1e-6 <= slopes.min() and slopes.max() <= upper + 1e-6
    assert abs(slopes.mean() - (lower + upper) / 2) < 0.01 and slopes.std() > 0.05
    np.testing.assert_allclose(grad[negative] / 2.0, slopes, rtol=1e-5)
    np.testing.assert_allclose(grad[~negative], 2.0)

    draws = 4000
    logits_array = np.log(np.array([0.1, 0.2, 0.3, 0.4], np.float32))
    logits = tensor(np.tile(logits_array, (draws, 1)), device=device, requires_grad=True)
    weights = tensor(rand(draws, 4, seed=9), device=device)
    F.manual_seed(5)
    soft = F.gumbel_softmax(logits, tau=0.5)
    (soft * weights).sum().backward()
    soft_grad = logits.grad.numpy()
    logits.grad = None
    F.manual_seed(5)  # the same noise again
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    (hard * weights).sum().backward()
    realize([soft, hard])
    soft_values, hard_values = soft.numpy(), hard.numpy()
    np.testing.assert_allclose(soft_values.sum(1), 1.0, rtol=1e-5)
    # y_soft + (y_hard - y_soft), as PyTorch's: one-hot up to rounding.
    np.testing.assert_allclose(hard_values, np.eye(4)[soft_values.argmax(1)], atol=1e-6)
    np.testing.assert_allclose(logits.grad.numpy(), soft_grad, rtol=1e-4, atol=1e-6)
    frequencies = np.bincount(soft_values.argmax(1), minlength=4) / draws
    np.testing.assert_allclose(frequencies, [0.1, 0.2, 0.3, 0.4], atol=0.03)

    image = rand(8, 6, 3, 4, seed=10)
    dropped = F.feature_alpha_dropout(tensor(image, device=device), 0.5, training=True).numpy()
    a = 1.0 / np.sqrt((1.7580993408473766 ** 2 * 0.5 + 1.0) * 0.5)
    b = 1.7580993408473766 * a * 0.5
    kept = np.isclose(dropped, image * a + b, atol=1e-5).all(axis=(2, 3))
    gone = np.isclose(dropped, b - 1.7580993408473766 * a, atol=1e-5).all(axis=(2, 3))
    assert (kept ^ gone).all() and 0.3 < kept.mean() < 0.7


def test_bad_arguments_are_named():
    x = tensor(rand(3, 4), device="reference")
    tokens = tensor(np.array([[1, 2]], np.int64), device="reference")
    table = tensor(rand(5, 2), device="reference")
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(tokens, table, tensor(np.array([0], np.int64), device="reference"))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(tokens, table, per_sample_weights=tensor(rand(1, 2)), mode="max")
    with pytest.raises(ValueError, match="mode must be 'sum', 'mean' or 'max'"):
        nn.EmbeddingBag(5, 2, mode="median")
    with pytest.raises(ValueError, match="Softmax2d: expected input of 3 or 4 dimensions"):
        nn.Softmax2d()(x)
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=0.0)
    with pytest.raises(ValueError, match="lower <= upper"):
        F.rrelu(x, 0.5, 0.1, training=True)
    with pytest.raises(gingham.GinghamError, match="only supports 2D tensors"):
        F.pdist(tensor(rand(2, 3, 4)))
