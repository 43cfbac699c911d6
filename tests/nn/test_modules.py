"""gingham.nn's layer API against torch.nn (CPU) as the oracle, on every device.

The layers are checked forward and backward with PyTorch's weights, copied by
``load_state_dict(torch_module.state_dict())`` (which checks the state-dict names too); the
module tree (names, order, buffers), state dicts and their errors, containers, dropout, and a
training run resumed from a checkpoint (model and optimiser) against the uninterrupted run.
Several layers share one program, as in test_functional.py, so the file compiles little.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn as tnn

import gingham
import gingham.nn as nn
from gingham.devices import list_devices
from gingham.frontend import optim
from gingham.frontend.jit import jit
from gingham.frontend.tensor import ShapeError, Tensor, realize, tensor
from gingham.nn import models, training
from module_oracle import assert_layers_match  # tests/nn/module_oracle.py

TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def randomize(module: tnn.Module, seed: int = 0) -> tnn.Module:
    """PyTorch's parameters and float buffers replaced by random values (batch norm's
    variances kept positive), so that a default initialisation of ones and zeros cannot hide a
    weight that was not loaded."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, value in module.state_dict(keep_vars=True).items():
            if value.dtype.is_floating_point:
                fresh = torch.randn(value.shape, generator=generator)
                value.copy_(fresh.abs() + 0.5 if name.endswith("running_var") else fresh)
    return module


# -- layers against PyTorch ------------------------------------------------------------------------

LAYERS = {  # name: (gingham layer, PyTorch layer, which input)
    "layer_norm": (lambda d: nn.LayerNorm(6, device=d), lambda: tnn.LayerNorm(6), "seq"),
    "layer_norm_2d": (lambda d: nn.LayerNorm((4, 6), eps=1e-3, elementwise_affine=False),
                      lambda: tnn.LayerNorm((4, 6), eps=1e-3, elementwise_affine=False), "seq"),
    "layer_norm_no_bias": (lambda d: nn.LayerNorm(6, bias=False, device=d),
                           lambda: tnn.LayerNorm(6, bias=False), "seq"),
    "gelu": (lambda d: nn.GELU(), lambda: tnn.GELU(), "image"),
    "gelu_tanh": (lambda d: nn.GELU("tanh"), lambda: tnn.GELU("tanh"), "image"),
    "silu": (lambda d: nn.SiLU(), lambda: tnn.SiLU(), "image"),
    "sigmoid": (lambda d: nn.Sigmoid(), lambda: tnn.Sigmoid(), "image"),
    "tanh": (lambda d: nn.Tanh(), lambda: tnn.Tanh(), "image"),
    "leaky_relu": (lambda d: nn.LeakyReLU(0.2), lambda: tnn.LeakyReLU(0.2), "image"),
    "elu": (lambda d: nn.ELU(0.5), lambda: tnn.ELU(0.5), "image"),
    "relu": (lambda d: nn.ReLU(), lambda: tnn.ReLU(), "image"),  # inplace: the input is shared
    "softmax": (lambda d: nn.Softmax(dim=1), lambda: tnn.Softmax(dim=1), "image"),
    "log_softmax": (lambda d: nn.LogSoftmax(dim=-1), lambda: tnn.LogSoftmax(dim=-1), "seq"),
    "identity": (lambda d: nn.Identity(54, unused=True), lambda: tnn.Identity(), "seq"),
    "avg_pool": (lambda d: nn.AvgPool2d(2), lambda: tnn.AvgPool2d(2), "image"),
    "avg_pool_padded": (lambda d: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
                        lambda: tnn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
                        "image"),
    "embedding": (lambda d: nn.Embedding(7, 5, device=d), lambda: tnn.Embedding(7, 5), "tokens"),
    "embedding_padding": (lambda d: nn.Embedding(7, 5, padding_idx=-5, device=d),
                          lambda: tnn.Embedding(7, 5, padding_idx=-5), "tokens"),
    "dropout_eval": (lambda d: nn.Dropout(0.5).eval(), lambda: tnn.Dropout(0.5).eval(), "seq"),
}

def torch_without_bias(layer: type, *args, **kwargs) -> tnn.Module:
    """``layer(*args, bias=False, **kwargs)`` for PyTorch's batch and group norms, which take
    ``bias`` from 2.12 on; on the GPU machine's 2.11 the module's bias is unregistered, which
    is what ``bias=False`` does."""
    try:
        return layer(*args, bias=False, **kwargs)
    except TypeError:
        module = layer(*args, **kwargs)
        module.register_parameter("bias", None)
        return module


CONV_NORM_POOL_LAYERS = {  # the N-d layers, norms, resampling and the other activations
    "conv1d": (lambda d: nn.Conv1d(4, 6, 3, stride=2, padding=1, device=d),
               lambda: tnn.Conv1d(4, 6, 3, stride=2, padding=1), "signal"),
    "conv1d_same_grouped": (lambda d: nn.Conv1d(4, 4, 3, padding="same", dilation=2, groups=2,
                                                bias=False, device=d),
                            lambda: tnn.Conv1d(4, 4, 3, padding="same", dilation=2, groups=2,
                                               bias=False), "signal"),
    "conv3d": (lambda d: nn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=1, device=d),
               lambda: tnn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=1), "volume"),
    "conv1d_reflect": (lambda d: nn.Conv1d(4, 3, 3, padding=2, padding_mode="reflect",
                                           device=d),
                       lambda: tnn.Conv1d(4, 3, 3, padding=2, padding_mode="reflect"), "signal"),
    "conv2d_circular_same": (lambda d: nn.Conv2d(3, 2, (2, 3), padding="same", dilation=2,
                                                 padding_mode="circular", device=d),
                             lambda: tnn.Conv2d(3, 2, (2, 3), padding="same", dilation=2,
                                                padding_mode="circular"), "image"),
    "conv3d_replicate": (lambda d: nn.Conv3d(2, 3, 3, stride=2, padding=(1, 2, 1),
                                             padding_mode="replicate", device=d),
                         lambda: tnn.Conv3d(2, 3, 3, stride=2, padding=(1, 2, 1),
                                            padding_mode="replicate"), "volume"),
    "conv_transpose1d": (lambda d: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                                      output_padding=1, device=d),
                         lambda: tnn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
                                                     output_padding=1), "signal"),
    "conv_transpose2d": (lambda d: nn.ConvTranspose2d(3, 6, 3, stride=2, padding=1,
                                                      output_padding=(1, 0), groups=3,
                                                      device=d),
                         lambda: tnn.ConvTranspose2d(3, 6, 3, stride=2, padding=1,
                                                     output_padding=(1, 0), groups=3), "image"),
    "conv_transpose2d_dilated": (lambda d: nn.ConvTranspose2d(3, 2, 2, dilation=2, bias=False,
                                                              device=d),
                                 lambda: tnn.ConvTranspose2d(3, 2, 2, dilation=2, bias=False),
                                 "image"),
    "conv_transpose3d": (lambda d: nn.ConvTranspose3d(2, 3, 2, stride=2, device=d),
                         lambda: tnn.ConvTranspose3d(2, 3, 2, stride=2), "volume"),
    "batch_norm1d": (lambda d: nn.BatchNorm1d(4, device=d), lambda: tnn.BatchNorm1d(4),
                     "features"),
    "batch_norm1d_seq": (lambda d: nn.BatchNorm1d(4, momentum=0.3, bias=False, device=d),
                         lambda: torch_without_bias(tnn.BatchNorm1d, 4, momentum=0.3), "signal"),
    "batch_norm1d_eval": (lambda d: nn.BatchNorm1d(4, eps=1e-3, device=d).eval(),
                          lambda: tnn.BatchNorm1d(4, eps=1e-3).eval(), "signal"),
    "batch_norm3d": (lambda d: nn.BatchNorm3d(2, device=d), lambda: tnn.BatchNorm3d(2),
                     "volume"),
    "batch_norm3d_untracked": (lambda d: nn.BatchNorm3d(2, affine=False,
                                                        track_running_stats=False).eval(),
                               lambda: tnn.BatchNorm3d(2, affine=False,
                                                       track_running_stats=False).eval(),
                               "volume"),
    "group_norm": (lambda d: nn.GroupNorm(2, 4, device=d), lambda: tnn.GroupNorm(2, 4),
                   "signal"),
    "group_norm_image": (lambda d: nn.GroupNorm(1, 3, eps=1e-3, bias=False, device=d),
                         lambda: torch_without_bias(tnn.GroupNorm, 1, 3, eps=1e-3), "image"),
    "group_norm_volume": (lambda d: nn.GroupNorm(2, 2, affine=False),
                          lambda: tnn.GroupNorm(2, 2, affine=False), "volume"),
    "max_pool1d": (lambda d: nn.MaxPool1d(3, stride=2, padding=1),
                   lambda: tnn.MaxPool1d(3, stride=2, padding=1), "signal"),
    "max_pool2d_dilated": (lambda d: nn.MaxPool2d(2, stride=1, dilation=2, ceil_mode=True),
                           lambda: tnn.MaxPool2d(2, stride=1, dilation=2, ceil_mode=True),
                           "image"),
    "max_pool3d": (lambda d: nn.MaxPool3d(2, stride=(1, 2, 2), ceil_mode=True),
                   lambda: tnn.MaxPool3d(2, stride=(1, 2, 2), ceil_mode=True), "volume"),
    "avg_pool1d": (lambda d: nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False),
                   lambda: tnn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False),
                   "signal"),
    "avg_pool3d": (lambda d: nn.AvgPool3d(2, stride=1, padding=1, divisor_override=3),
                   lambda: tnn.AvgPool3d(2, stride=1, padding=1, divisor_override=3),
                   "volume"),
    "avg_pool3d_ceil": (lambda d: nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True,
                                               count_include_pad=False),
                        lambda: tnn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True,
                                              count_include_pad=False), "volume"),
    "upsample_nearest": (lambda d: nn.Upsample(scale_factor=2), lambda: tnn.Upsample(
        scale_factor=2), "image"),
    "upsample_bilinear": (lambda d: nn.Upsample(size=(4, 7), mode="bilinear",
                                                align_corners=True),
                          lambda: tnn.Upsample(size=(4, 7), mode="bilinear",
                                               align_corners=True), "image"),
    "upsample_linear": (lambda d: nn.Upsample(scale_factor=1.5, mode="linear"),
                        lambda: tnn.Upsample(scale_factor=1.5, mode="linear"), "signal"),
    "upsample_trilinear": (lambda d: nn.Upsample(scale_factor=(1, 2, 1.5), mode="trilinear"),
                           lambda: tnn.Upsample(scale_factor=(1, 2, 1.5), mode="trilinear"),
                           "volume"),
    "conv2d_reflect_unbatched": (lambda d: nn.Conv2d(3, 2, 3, padding=(1, 2),
                                                     padding_mode="reflect", device=d),
                                 lambda: tnn.Conv2d(3, 2, 3, padding=(1, 2),
                                                    padding_mode="reflect"), "plane"),
    "max_pool2d_unbatched": (lambda d: nn.MaxPool2d(2), lambda: tnn.MaxPool2d(2), "plane"),
    "adaptive_max_pool2d": (lambda d: nn.AdaptiveMaxPool2d((4, 3)),
                            lambda: tnn.AdaptiveMaxPool2d((4, 3)), "image"),
    "adaptive_max_pool1d": (lambda d: nn.AdaptiveMaxPool1d(3), lambda: tnn.AdaptiveMaxPool1d(3),
                            "signal"),
    "adaptive_avg_pool1d": (lambda d: nn.AdaptiveAvgPool1d(4), lambda: tnn.AdaptiveAvgPool1d(4),
                            "signal"),
    "adaptive_avg_pool3d": (lambda d: nn.AdaptiveAvgPool3d((2, None, 4)),
                            lambda: tnn.AdaptiveAvgPool3d((2, None, 4)), "volume"),
    "adaptive_max_pool3d": (lambda d: nn.AdaptiveMaxPool3d(3), lambda: tnn.AdaptiveMaxPool3d(3),
                            "volume"),
    "relu6": (lambda d: nn.ReLU6(), lambda: tnn.ReLU6(), "image"),
    "hardtanh": (lambda d: nn.Hardtanh(-0.5, 0.7), lambda: tnn.Hardtanh(-0.5, 0.7), "image"),
    "softplus": (lambda d: nn.Softplus(), lambda: tnn.Softplus(), "signal"),
    "softplus_threshold": (lambda d: nn.Softplus(beta=2, threshold=1),
                           lambda: tnn.Softplus(beta=2, threshold=1), "image"),
    "mish": (lambda d: nn.Mish(), lambda: tnn.Mish(), "image"),
    "hardswish": (lambda d: nn.Hardswish(), lambda: tnn.Hardswish(), "image"),
    "prelu": (lambda d: nn.PReLU(device=d), lambda: tnn.PReLU(), "volume"),
    "prelu_channels": (lambda d: nn.PReLU(3, init=0.1, device=d), lambda: tnn.PReLU(3, 0.1),
                       "image"),
}


LAYOUT_LAYERS = {  # the modules of the layout and normalisation functions
    "rms_norm": (lambda d: nn.RMSNorm(6, device=d), lambda: tnn.RMSNorm(6), "seq"),
    "rms_norm_2d": (lambda d: nn.RMSNorm((4, 6), eps=1e-3, elementwise_affine=False),
                    lambda: tnn.RMSNorm((4, 6), eps=1e-3, elementwise_affine=False), "seq"),
    "local_response_norm": (lambda d: nn.LocalResponseNorm(3), lambda: tnn.LocalResponseNorm(3),
                            "image"),
    "local_response_norm_even": (lambda d: nn.LocalResponseNorm(4, 1e-2, 0.5, 2.0),
                                 lambda: tnn.LocalResponseNorm(4, 1e-2, 0.5, 2.0), "channels8"),
    "pixel_shuffle": (lambda d: nn.PixelShuffle(2), lambda: tnn.PixelShuffle(2), "channels8"),
    "pixel_unshuffle": (lambda d: nn.PixelUnshuffle(2), lambda: tnn.PixelUnshuffle(2),
                        "channels8"),
    "unfold": (lambda d: nn.Unfold((2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
               lambda: tnn.Unfold((2, 3), dilation=(2, 1), padding=1, stride=(1, 2)), "image"),
    "unfold_unbatched": (lambda d: nn.Unfold(2), lambda: tnn.Unfold(2), "plane"),
    "fold": (lambda d: nn.Fold((4, 5), 2), lambda: tnn.Fold((4, 5), 2), "columns"),
    "fold_strided": (lambda d: nn.Fold((5, 12), (2, 3), dilation=(2, 1), padding=1,
                                       stride=(2, 3)),
                     lambda: tnn.Fold((5, 12), (2, 3), dilation=(2, 1), padding=1,
                                      stride=(2, 3)), "columns"),
    "flatten": (lambda d: nn.Flatten(), lambda: tnn.Flatten(), "image"),
    "flatten_leading": (lambda d: nn.Flatten(0, -2), lambda: tnn.Flatten(0, -2), "image"),
    "unflatten": (lambda d: nn.Unflatten(-1, (2, 3)), lambda: tnn.Unflatten(-1, (2, 3)), "seq"),
    "unflatten_inferred": (lambda d: nn.Unflatten(1, [2, -1]),
                           lambda: tnn.Unflatten(1, [2, -1]), "seq"),
}



@pytest.mark.parametrize("layers", [LAYERS, CONV_NORM_POOL_LAYERS, LAYOUT_LAYERS],
                         ids=["basic", "nd", "layout"])
def test_layers_match_torch(device, layers):
    """Every layer's output, input gradient and parameter gradients, with PyTorch's (random)
    weights loaded by name into a ModuleDict of them all (one program forward, one
    backward); then the running statistics batch norms updated in training."""
    ours = nn.ModuleDict({name: make(device) for name, (make, _, _) in layers.items()})
    theirs = randomize(tnn.ModuleDict({name: make() for name, (_, make, _) in layers.items()}))
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    # Inputs scaled by 3 so that the clamps (ReLU6, Hardtanh, Hardswish) meet both bounds.
    inputs = {"seq": rand(3, 4, 6), "image": 3 * rand(2, 3, 6, 5, seed=1),
              "tokens": np.array([[0, 6, 2], [2, 3, 1], [2, 2, 4]], np.int64),
              "features": rand(5, 4, seed=3), "signal": rand(2, 4, 9, seed=4),
              "volume": rand(2, 2, 5, 4, 6, seed=5), "plane": rand(3, 6, 5, seed=6),
              "channels8": rand(2, 8, 4, 6, seed=7), "columns": rand(2, 12, 12, seed=8)}
    kinds = {kind for _, _, kind in layers.values()}
    inputs = {k: v for k, v in inputs.items() if k in kinds}
    g_in = {k: tensor(v, device=device, requires_grad=v.dtype.kind == "f")
            for k, v in inputs.items()}
    t_in = {k: torch.tensor(v, requires_grad=v.dtype.kind == "f") for k, v in inputs.items()}
    g_out = {name: ours[name](g_in[kind]) for name, (_, _, kind) in layers.items()}
    t_out = {name: theirs[name](t_in[kind]) for name, (_, _, kind) in layers.items()}
    assert_layers_match(ours, theirs, g_in, t_in, g_out, t_out, device, TOLERANCE)
    ours_state = ours.state_dict()
    for name, value in theirs.state_dict().items():
        if name.endswith(("running_mean", "running_var")):
            np.testing.assert_allclose(ours_state[name], value.numpy(), err_msg=name,
                                       **TOLERANCE)


def test_batch_norm_cumulative_average_and_counter(device):
    """``momentum=None`` (the running statistics average every batch so far, weighted by
    ``num_batches_tracked``) beside the exponential average, over eager and compiled
    training steps, from PyTorch's loaded state (counter included), against PyTorch's."""
    ours = nn.ModuleDict({"cumulative": nn.BatchNorm2d(3, momentum=None, device=device),
                          "exponential": nn.BatchNorm1d(3, momentum=0.3, device=device)})
    theirs = randomize(tnn.ModuleDict({"cumulative": tnn.BatchNorm2d(3, momentum=None),
                                       "exponential": tnn.BatchNorm1d(3, momentum=0.3)}))
    theirs["cumulative"].num_batches_tracked.fill_(4)
    ours.load_state_dict(theirs.state_dict())

    def step(module, images, signals):
        return module["cumulative"](images), module["exponential"](signals)

    compiled = jit(lambda images, signals: step(ours, images, signals))
    for index in range(4):
        images, signals = rand(2, 3, 4, 5, seed=index), rand(4, 3, 6, seed=10 + index)
        run = step if index < 2 else lambda m, *a: compiled(*a)
        got = run(ours, tensor(images, device=device), tensor(signals, device=device))
        expected = step(theirs, torch.tensor(images), torch.tensor(signals))
        for value, other in zip(got, expected):
            np.testing.assert_allclose(value.numpy(), other.detach().numpy(), **TOLERANCE)
        state = ours.state_dict()
        assert list(state) == list(theirs.state_dict())
        for name, value in theirs.state_dict().items():
            assert state[name].dtype == value.numpy().dtype, name
            np.testing.assert_allclose(state[name], value.numpy(), err_msg=f"{name} {index}",
                                       **TOLERANCE)
    assert ours.state_dict()["cumulative.num_batches_tracked"] == 8
    ours.eval()
    theirs.eval()
    images = rand(2, 3, 4, 5, seed=9)
    np.testing.assert_allclose(ours["cumulative"](tensor(images, device=device)).numpy(),
                               theirs["cumulative"](torch.tensor(images)).detach().numpy(),
                               **TOLERANCE)
    # (the whole repr against PyTorch's is test_repr_matches_torch's, on PyTorch 2.13: 2.11
    # prints no bias= for a batch norm)
    assert "momentum=None" in repr(ours["cumulative"]) and "momentum=None" in repr(
        theirs["cumulative"])


def test_loss_modules_match_torch(device):
    """Each loss module (and CosineSimilarity) against PyTorch's, made with the same
    settings and with its class weights loaded through the state dict (PyTorch's buffer
    names): values, then the gradient of their sum with respect to the inputs."""
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 4, (6,))
    labels[1] = 2  # ignored below
    inputs = {"logits": rand(6, 4), "labels": labels, "y": rand(6, 4, seed=1),
              "z": rand(6, 4, seed=2) * 2, "t": rng.random((6, 4)).astype(np.float32)}
    cases = {  # name: (module from gingham.nn or torch.nn, input name, target name)
        "l1": (lambda m: m.L1Loss(reduction="sum"), "y", "z"),
        "mse": (lambda m: m.MSELoss(), "y", "z"),
        "smooth_l1": (lambda m: m.SmoothL1Loss(beta=0.5), "y", "z"),
        "huber": (lambda m: m.HuberLoss(reduction="none", delta=2.0), "y", "z"),
        "kl_div": (lambda m: m.KLDivLoss(reduction="batchmean", log_target=True), "y", "z"),
        "bce": (lambda m: m.BCELoss(weight=m_tensor(m, np.full(4, 0.5))), "p", "t"),
        "bce_logits": (lambda m: m.BCEWithLogitsLoss(pos_weight=m_tensor(m, np.arange(1, 5))),
                       "y", "t"),
        "nll": (lambda m: m.NLLLoss(ignore_index=2), "log_probs", "labels"),
        "cross_entropy": (lambda m: m.CrossEntropyLoss(
            weight=m_tensor(m, np.arange(4) + 0.5), label_smoothing=0.1), "logits", "labels"),
        "cosine": (lambda m: m.CosineSimilarity(dim=0), "y", "z"),
    }
    ours = nn.ModuleDict({name: make(nn) for name, (make, _, _) in cases.items()}).to(device)
    theirs = tnn.ModuleDict({name: make(tnn) for name, (make, _, _) in cases.items()})
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    assert list(ours.state_dict()) == ["bce.weight", "bce_logits.pos_weight",
                                       "cross_entropy.weight"]
    g_in = {k: tensor(v, device=device, requires_grad=v.dtype.kind == "f")
            for k, v in inputs.items()}
    t_in = {k: torch.tensor(v, requires_grad=v.dtype.kind == "f") for k, v in inputs.items()}
    for values, functional in ((g_in, nn.functional), (t_in, torch.nn.functional)):
        values["p"] = functional.sigmoid(values["z"])
        values["log_probs"] = functional.log_softmax(values["logits"], 1)
    g_out = {name: ours[name](g_in[a], g_in[b]) for name, (_, a, b) in cases.items()}
    t_out = {name: theirs[name](t_in[a], t_in[b]) for name, (_, a, b) in cases.items()}
    realize(list(g_out.values()))
    for name, expected in t_out.items():
        np.testing.assert_allclose(g_out[name].numpy(), expected.detach().numpy(), err_msg=name,
                                   **TOLERANCE)
        assert repr(ours[name]) == repr(theirs[name]), name
    sum(value.sum() for value in g_out.values()).backward()
    sum(value.sum() for value in t_out.values()).backward()
    for name in ("logits", "y", "z"):
        np.testing.assert_allclose(g_in[name].grad.numpy(), t_in[name].grad.numpy(),
                                   err_msg=f"d/d {name}", **TOLERANCE)


def m_tensor(module, values: np.ndarray):
    """A float32 tensor of the framework that ``module`` (gingham.nn or torch.nn) belongs to."""
    values = np.asarray(values, np.float32)
    return torch.tensor(values) if module is tnn else tensor(values, device="reference")


def test_default_initialisation_follows_torch():
    """Shapes, dtypes and distributions of fresh layers (the values come from our generator)."""
    nn.manual_seed(0)
    embedding = nn.Embedding(1000, 64, device="reference").weight.numpy()
    assert embedding.dtype == np.float32 and embedding.shape == (1000, 64)
    assert abs(embedding.mean()) < 0.01 and abs(embedding.std() - 1.0) < 0.01  # N(0, 1)
    padded = nn.Embedding(10, 3, padding_idx=-1, device="reference").weight.numpy()
    assert (padded[9] == 0).all() and (padded[:9] != 0).all()  # PyTorch zeroes the padding row
    norm = nn.LayerNorm((2, 3), device="reference")
    np.testing.assert_array_equal(norm.weight.numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(norm.bias.numpy(), np.zeros((2, 3), np.float32))
    assert norm.weight.requires_grad and norm.bias.requires_grad
    assert nn.LayerNorm(3, elementwise_affine=False).state_dict() == OrderedDict()
    assert list(nn.LayerNorm(3, bias=False, device="reference").state_dict()) == ["weight"]


def test_embedding_from_pretrained_never_updates_the_padding_row(device):
    """from_pretrained as PyTorch's (a copy of the table, frozen by default, the padding row
    kept as given); with freeze=False the gradient matches PyTorch's (zero on the padding
    row) and SGD steps leave that row as it was while they change the others."""
    table, ids = rand(6, 4), np.array([[1, 5, 0], [5, 5, 2]])
    frozen = nn.Embedding.from_pretrained(tensor(table, device=device), padding_idx=-1)
    assert not frozen.weight.requires_grad and frozen.padding_idx == 5
    # a frozen parameter, as PyTorch's (it was a buffer)
    assert [n for n, _ in frozen.named_parameters()] == ["weight"] and not [*frozen.buffers()]
    ours = nn.Embedding.from_pretrained(tensor(table, device=device), freeze=False,
                                        padding_idx=-1)
    theirs = tnn.Embedding.from_pretrained(torch.tensor(table), freeze=False, padding_idx=-1)
    assert ours.weight.requires_grad and ours.padding_idx == theirs.padding_idx
    weights = rand(2, 3, 4, seed=1)
    (theirs(torch.tensor(ids)) * torch.tensor(weights)).sum().backward()
    optimizer = optim.SGD(ours.parameters(), lr=0.5)
    for step in range(2):
        optimizer.zero_grad()
        (ours(tensor(ids, device=device)) * tensor(weights, device=device)).sum().backward()
        if step == 0:
            np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(),
                                       **TOLERANCE)
        optimizer.step()
    trained = ours.weight.numpy()
    np.testing.assert_array_equal(trained[5], table[5])
    assert (trained[[0, 1, 2]] != table[[0, 1, 2]]).all()
    np.testing.assert_array_equal(trained[[3, 4]], table[[3, 4]])  # not looked up



@pytest.mark.parametrize("traced", [False, True])
def test_embedding_max_norm_renormalises_the_rows_it_looks_up(device, traced):
    """``max_norm`` as PyTorch's: each forward first scales, in place and outside autograd,
    the looked-up rows longer than ``max_norm`` (rows 1 and 2 here; row 4 is long but not
    looked up), eagerly and as an update of a ``gingham.jit`` step; two SGD steps give
    PyTorch's losses and table. ``F.embedding`` renormalises a plain table by the 1-norm."""
    table, ids, target = 2 * rand(5, 3), np.array([[1, 2], [2, 0]]), rand(2, 2, seed=1)
    ours = nn.Embedding(5, 3, max_norm=1.0, device=device)
    theirs = tnn.Embedding(5, 3, max_norm=1.0)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(table))
    ours.load_state_dict(theirs.state_dict())
    assert repr(ours) == repr(theirs) == "Embedding(5, 3, max_norm=1.0)"
    optimizer, torch_optimizer = optim.SGD([ours.weight], lr=0.5), torch.optim.SGD(
        [theirs.weight], lr=0.5)

    def step(x, y):
        loss = ((ours(x).sum(-1) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    run = jit(step) if traced else step
    for _ in range(2):
        loss = run(tensor(ids, device=device), tensor(target, device=device))
        torch_loss = ((theirs(torch.tensor(ids)).sum(-1) - torch.tensor(target)) ** 2).mean()
        torch_optimizer.zero_grad()
        torch_loss.backward()
        torch_optimizer.step()
        np.testing.assert_allclose(loss.item(), torch_loss.item(), **TOLERANCE)
    np.testing.assert_allclose(ours.weight.numpy(), theirs.weight.detach().numpy(), **TOLERANCE)
    np.testing.assert_array_equal(ours.weight.numpy()[[3, 4]], table[[3, 4]])
    plain, torch_plain = tensor(table, device=device), torch.tensor(table)
    rows = gingham.nn.functional.embedding(tensor(ids, device=device), plain, max_norm=0.5,
                                           norm_type=1.0)
    torch_rows = tnn.functional.embedding(torch.tensor(ids), torch_plain, max_norm=0.5,
                                          norm_type=1.0)
    np.testing.assert_allclose(rows.numpy(), torch_rows.numpy(), **TOLERANCE)
    np.testing.assert_allclose(plain.numpy(), torch_plain.numpy(), **TOLERANCE)

def test_constructor_errors():
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")
    with pytest.raises(ValueError, match="data_format"):
        nn.AvgPool2d(2, data_format="CHWN")
    with pytest.raises(TypeError, match="holds gingham.nn Modules, not function"):
        nn.Sequential(nn.ReLU(), lambda x: x)
    with pytest.raises(KeyError, match="no '.'"):
        nn.ModuleDict({"a.b": nn.ReLU()})
    with pytest.raises(ValueError, match="groups=3 must divide in_channels 4"):
        nn.Conv1d(4, 6, 3, groups=3)
    with pytest.raises(ValueError, match="padding='same' needs stride 1"):
        nn.Conv3d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding must be ints, not 'same'"):
        nn.ConvTranspose2d(1, 1, 3, padding="same")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for '
                                         'ConvTranspose2d'):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="num_channels 6 must be divisible by num_groups 4"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="max_val 1 must be greater than min_val 2"):
        nn.Hardtanh(2, 1)
    with pytest.raises(TypeError, match="start_dim must be an int.*data_format by keyword"):
        nn.Flatten("NHWC")
    with pytest.raises(TypeError, match="unflattened_size must be a tuple or list"):
        nn.Unflatten(1, 6)
    volume = tensor(rand(2, 3, 4, 4, 4), device="reference")
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected 2D or 3D input \(got 5D"):
        nn.BatchNorm1d(3)(volume)
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input \(got 5D"):
        nn.BatchNorm2d(3)(volume)
    with pytest.raises(ShapeError, match="3 channels .* divisible by num_groups 2"):
        nn.functional.group_norm(volume, 2)
    with pytest.raises(ValueError, match=r"output_size \(9,\) is not reachable .* 7 to 8"):
        nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1)(volume[:, :, 0, 0], output_size=[9])


@pytest.mark.parametrize("make", [lambda m: m.Conv1d(6, 8, 5, groups=2),
                                  lambda m: m.Conv3d(4, 6, (3, 2, 2)),
                                  lambda m: m.ConvTranspose2d(6, 9, 3, groups=3),
                                  lambda m: m.ConvTranspose3d(3, 9, 2)],
                         ids=["conv1d", "conv3d", "conv_transpose2d", "conv_transpose3d"])
def test_convolutions_initialise_as_torch(make):
    """Weights and biases uniform in PyTorch's bound (1/sqrt(fan_in), fan_in from the weight's
    axis 1 and kernel), with PyTorch's names and shapes."""
    nn.manual_seed(0)
    ours, theirs = make(nn), make(tnn)
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    weight = theirs.weight
    bound = 1.0 / np.sqrt(weight.shape[1] * np.prod(weight.shape[2:]))
    for name, value in state.items():
        assert value.shape == tuple(theirs.state_dict()[name].shape), name
        assert np.abs(value).max() <= bound and np.abs(value).max() > 0.5 * bound, name
    values = state["weight"].ravel()
    assert abs(values.std() - bound / np.sqrt(3)) < 0.15 * bound  # a uniform's deviation


def test_conv_transpose_output_size_picks_output_padding(device):
    """``forward(x, output_size)`` as PyTorch's: the output_padding that reaches the size."""
    x = rand(2, 3, 4, 5)
    ours = nn.ConvTranspose2d(3, 2, 3, stride=(2, 3), padding=1, device=device)
    theirs = tnn.ConvTranspose2d(3, 2, 3, stride=(2, 3), padding=1)
    ours.load_state_dict(randomize(theirs).state_dict())
    for data, size in ((x, [8, 15]), (x, (2, 2, 7, 14)), (x[0], [7, 15])):  # x[0]: unbatched
        expected = theirs(torch.tensor(data), output_size=size).detach().numpy()
        got = ours(tensor(data, device=device), output_size=size).numpy()
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **TOLERANCE)
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings: 7 for 7"):
        nn.Embedding(7, 2, padding_idx=7)
    with pytest.raises(ValueError, match="expected to be 2-dimensional"):
        nn.Embedding.from_pretrained(np.zeros((2, 3, 4), np.float32))


def test_max_pool_layers_return_indices(device):
    """``return_indices=True`` layers return PyTorch's (values, indices) pair, which
    MaxUnpool2d puts back."""
    x = rand(2, 3, 5, 6)
    for ours, theirs, data in ((nn.MaxPool2d(2, return_indices=True),
                                tnn.MaxPool2d(2, return_indices=True), x),
                               (nn.MaxPool1d(3, 3, 1, return_indices=True),
                                tnn.MaxPool1d(3, 3, 1, return_indices=True), x[0])):
        values, indices = ours(tensor(data, device=device))
        expected_values, expected_indices = theirs(torch.tensor(data))
        np.testing.assert_array_equal(values.numpy(), expected_values.numpy())
        np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
        assert indices.dtype == np.int64 and repr(ours) == repr(theirs)
    unpool, unpool_theirs = nn.MaxUnpool1d(3, 3, 1), tnn.MaxUnpool1d(3, 3, 1)
    restored = unpool(values, indices, output_size=x[0].shape)  # x[0]: [C, H, W] as [N, C, L]
    np.testing.assert_array_equal(restored.numpy(), unpool_theirs(
        expected_values, expected_indices, output_size=x[0].shape).numpy())
    assert repr(unpool) == repr(unpool_theirs)


def test_softmax_without_dim_warns_and_picks_torchs_axis():
    x = rand(2, 3, 4)
    with pytest.warns(UserWarning, match="give dim"):
        ours = nn.Softmax()(tensor(x, device="reference")).numpy()
    with pytest.warns(UserWarning):
        expected = tnn.Softmax()(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_dropout_zeroes_about_p_and_scales_the_rest(device):
    p, x = 0.3, np.full((200, 100), 2.0, np.float32)
    drop = nn.Dropout(p)
    model = nn.Sequential(nn.Identity(), drop)
    first = model(tensor(x, device=device)).numpy()
    second = model(tensor(x, device=device)).numpy()
    for sample in (first, second):
        kept = sample != 0
        assert abs(1.0 - kept.mean() - p) < 0.015  # 20,000 draws: 5 standard deviations
        np.testing.assert_allclose(sample[kept], 2.0 / (1.0 - p), rtol=1e-6)
    assert (first != second).any()  # each call draws a new mask
    model.eval()
    assert not drop.training
    np.testing.assert_array_equal(model(tensor(x, device=device)).numpy(), x)
    model.train()
    assert (model(tensor(x, device=device)).numpy() == 0).any()


# -- the module tree -------------------------------------------------------------------------------


def legacy_parameters(module: nn.Module) -> list[Tensor]:
    """``Module.parameters()`` as it was before named_parameters: own public tensors that
    require gradients, then each child's (attributes, and modules in list attributes)."""
    found = [v for k, v in vars(module).items()
             if isinstance(v, Tensor) and v.requires_grad and not k.startswith("_")]
    for value in vars(module).values():
        children = value if isinstance(value, (list, tuple)) else [value]
        for child in children:
            if isinstance(child, nn.Module):
                found.extend(legacy_parameters(child))
    return found


@pytest.mark.parametrize("make", [lambda: models.ResNet18(width=2, device="reference"),
                                  lambda: models.ResNet9(width=2, device="reference"),
                                  lambda: models.StoryNet(width=2, device="reference"),
                                  lambda: models.SmallConvNet(device="reference")],
                         ids=["resnet18", "resnet9", "story", "digits"])
def test_parameter_order_is_unchanged(make):
    """Optimisers and gingham.jit see parameters() in the order they always did."""
    model = make()
    legacy = legacy_parameters(model)
    assert len(legacy) > 0
    assert [id(p) for p in model.parameters()] == [id(p) for p in legacy]
    assert [id(p) for _, p in model.named_parameters()] == [id(p) for p in legacy]


def test_names_follow_torch_in_a_resnet18():
    model = models.ResNet18(width=2, device="reference")
    names = [name for name, _ in model.named_parameters()]
    assert names[:4] == ["stem.conv.weight", "stem.bn.weight", "stem.bn.bias",
                         "stages.0.0.conv1.weight"]
    assert "stages.1.0.shortcut.0.weight" in names and "stages.1.0.shortcut.1.bias" in names
    assert names[-2:] == ["linear.weight", "linear.bias"]
    buffers = [name for name, _ in model.named_buffers()]
    assert buffers[:3] == ["stem.bn.running_mean", "stem.bn.running_var",
                           "stem.bn.num_batches_tracked"]  # PyTorch's buffers
    assert all(b.endswith(("running_mean", "running_var", "num_batches_tracked"))
               for b in buffers)
    state = model.state_dict()
    assert list(state)[:4] == ["stem.conv.weight", "stem.bn.weight", "stem.bn.bias",
                               "stem.bn.running_mean"]
    assert set(state) == set(names) | set(buffers)
    modules_by_name = dict(model.named_modules())
    assert modules_by_name[""] is model
    assert isinstance(modules_by_name["stages.1.0.shortcut.1"], nn.BatchNorm2d)
    assert len(list(model.modules())) == len(modules_by_name)


class Tied(nn.Module):
    """A plain list attribute of modules, a private tensor, a frozen tensor and a module
    reached twice (its weight shared)."""

    def __init__(self) -> None:
        self.blocks = [nn.Linear(3, 3, device="reference"), nn.ReLU(),
                       nn.Linear(3, 2, device="reference")]
        self.head = self.blocks[2]
        self.scale = tensor(np.float32(2.0), device="reference")  # a buffer
        self._cache = tensor(np.zeros(3, np.float32), device="reference")  # private
        self.frozen = tensor(np.ones(2, np.float32), device="reference", requires_grad=True)
        self.frozen.requires_grad = False

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x * self.scale


def test_lists_shared_modules_private_and_frozen_tensors():
    model = Tied()
    assert [n for n, _ in model.named_parameters()] == [
        "blocks.0.weight", "blocks.0.bias", "blocks.2.weight", "blocks.2.bias"]
    assert [n for n, _ in model.named_buffers()] == ["scale", "frozen"]
    assert [n for n, _ in model.named_modules()] == ["", "blocks.0", "blocks.1", "blocks.2"]
    assert len(list(model.named_modules(remove_duplicate=False))) == 5
    assert list(model.state_dict()) == [  # shared tensors under every name, as PyTorch
        "scale", "frozen", "blocks.0.weight", "blocks.0.bias", "blocks.2.weight",
        "blocks.2.bias", "head.weight", "head.bias"]
    assert [n for n, _ in model.named_parameters(recurse=False)] == []
    assert [n for n, _ in model.blocks[0].named_parameters(prefix="first")] == [
        "first.weight", "first.bias"]


def test_containers():
    layers = nn.ModuleList([nn.Linear(2, 2, device="reference") for _ in range(2)])
    layers.append(nn.ReLU()).extend([nn.Tanh()])
    layers.insert(0, nn.Identity())
    assert len(layers) == 5 and isinstance(layers[0], nn.Identity)
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    assert [n for n, _ in layers.named_parameters()] == ["1.weight", "1.bias", "2.weight",
                                                         "2.bias"]
    del layers[0]
    assert [n for n, _ in layers.named_children()] == ["0", "1", "2", "3"]
    with pytest.raises(NotImplementedError):
        layers(tensor(np.zeros(2, np.float32), device="reference"))

    heads = nn.ModuleDict({"b": nn.Linear(2, 1, device="reference")})
    heads["a"] = nn.Linear(2, 3, device="reference")
    assert list(heads) == ["b", "a"] and "a" in heads and len(heads) == 2
    assert list(heads.state_dict()) == ["b.weight", "b.bias", "a.weight", "a.bias"]
    assert isinstance(heads.pop("b"), nn.Linear) and list(heads.keys()) == ["a"]

    named = nn.Sequential(OrderedDict([("conv", nn.Conv2d(1, 2, 3, device="reference")),
                                       ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["conv.weight", "conv.bias"]
    assert list(named[:1].state_dict()) == ["conv.weight", "conv.bias"]
    named.append(nn.Flatten())
    assert [n for n, _ in named.named_children()] == ["conv", "act", "2"]
    seq = nn.Sequential(nn.ReLU(), nn.Linear(2, 2, device="reference"))
    assert list(seq[1:].state_dict()) == ["1.weight", "1.bias"]  # slices keep the names


# Module reprs follow PyTorch 2.13's (the CI's torch); other versions print some layers'
# settings differently (the H100 machine's 2.11 did), so the comparison needs that version.
@pytest.mark.skipif(not torch.__version__.startswith("2.13"),
                    reason="gingham's reprs follow PyTorch 2.13's format")
def test_repr_matches_torch():
    def stack(m):  # the same layers from gingham.nn or torch.nn
        return m.Sequential(
            m.Conv2d(3, 4, 3, stride=2, padding=1, groups=1, bias=False), m.BatchNorm2d(4),
            m.ReLU(), m.MaxPool2d(2), m.AvgPool2d(3, 2, 1), m.AdaptiveAvgPool2d(1),
            m.Flatten(), m.Linear(4, 8), m.LayerNorm(8), m.GELU("tanh"), m.Dropout(0.1),
            m.ModuleList([m.Linear(8, 8), m.Linear(8, 8), m.SiLU()]), m.LeakyReLU(0.2),
            m.ModuleDict({"head": m.Linear(8, 2)}), m.Softmax(dim=-1), m.Identity())

    def nd_stack(m):
        return m.Sequential(
            m.Conv1d(2, 4, 3), m.Conv3d(2, 4, (1, 2, 3), stride=2, padding=1, groups=2,
                                        bias=False),
            m.Conv2d(2, 4, 3, padding="same", dilation=2),
            m.Conv2d(2, 4, 3, padding=1, groups=2, bias=False, padding_mode="circular"),
            m.ConvTranspose1d(2, 4, 3, stride=2, output_padding=1),
            m.ConvTranspose2d(2, 4, 3, dilation=2, groups=2), m.ConvTranspose3d(2, 4, 3),
            m.BatchNorm1d(3), m.BatchNorm2d(3, bias=False),
            m.BatchNorm3d(3, affine=False, track_running_stats=False), m.GroupNorm(2, 4),
            m.GroupNorm(2, 4, affine=False), m.MaxPool1d(3), m.MaxPool2d((2, 3)),
            m.MaxPool3d(3, 2, 1, ceil_mode=True), m.AvgPool1d(3), m.AvgPool3d(3, 2, 1),
            m.Upsample(scale_factor=2), m.Upsample(size=(3, 4), mode="bilinear",
                                                   align_corners=True),
            m.Upsample(scale_factor=(2, 1.5)), m.ReLU6(), m.ReLU6(True), m.Hardtanh(),
            m.Hardtanh(-2, 3, True), m.Softplus(), m.Softplus(2, 10), m.Mish(True),
            m.Hardswish(True), m.PReLU(), m.PReLU(3, 0.1), m.AdaptiveMaxPool2d((2, None)),
            m.AdaptiveAvgPool1d(3), m.AdaptiveMaxPool3d(2), m.AdaptiveAvgPool3d((1, 2, 3)),
            m.CosineSimilarity(), m.CrossEntropyLoss(), m.HuberLoss(), m.RMSNorm(6),
            m.RMSNorm((2, 3), eps=1e-3, elementwise_affine=False), m.LocalResponseNorm(3),
            m.PixelShuffle(2), m.PixelUnshuffle(3), m.Unfold((2, 3), dilation=2, padding=1,
                                                             stride=(1, 2)),
            m.Fold((4, 5), 2), m.Flatten(0, 2), m.Unflatten(-1, [2, -1]))

    ours, theirs = stack(nn), stack(tnn)
    assert repr(ours) == repr(theirs)
    assert repr(nd_stack(nn)) == repr(nd_stack(tnn))
    assert repr(nn.Embedding(10, 3, padding_idx=-1)) == repr(tnn.Embedding(10, 3, padding_idx=-1))
    assert repr(nn.Conv2d(2, 4, 3, padding="same", dilation=2, groups=2,
                          data_format="NHWC")) == (
        "Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1), padding=same, dilation=(2, 2), "
        "groups=2, data_format='NHWC')")


# -- state dicts -----------------------------------------------------------------------------------


def small_net(device: str, seed: int, size: int = 5) -> nn.Sequential:
    """Conv, batch norm, ReLU, flatten, linear on ``[N, 3, size, size]`` images."""
    nn.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, device=device),
                         nn.BatchNorm2d(4, device=device), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * size * size, 3, device=device))


def torch_small_net() -> tnn.Sequential:
    return randomize(tnn.Sequential(tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4),
                                    tnn.ReLU(), tnn.Flatten(), tnn.Linear(4 * 5 * 5, 3)))


def test_sequential_state_dict_is_torchs(device):
    """A torch Sequential's state dict loads unchanged (the same names, num_batches_tracked
    included); the two then agree in training (batch statistics, running averages, the
    counter, gradients) and in evaluation; and ours loads back into torch strictly."""
    ours, theirs = small_net(device, 0), torch_small_net()
    expected_keys = list(theirs.state_dict())
    assert list(ours.state_dict()) == expected_keys
    ours.load_state_dict(theirs.state_dict())

    x = rand(2, 3, 5, 5, seed=3)
    g_out, t_out = ours(tensor(x, device=device)), theirs(torch.tensor(x))
    np.testing.assert_allclose(g_out.numpy(), t_out.detach().numpy(), **TOLERANCE)
    g_out.sum().backward()
    t_out.sum().backward()
    theirs_params = dict(theirs.named_parameters())
    realize([p.grad for p in ours.parameters()])  # one program
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(),
                                   err_msg=name, **TOLERANCE)
    for name, value in theirs.state_dict().items():  # the running averages after the step
        np.testing.assert_allclose(ours.state_dict()[name], value.numpy(), err_msg=name,
                                   **TOLERANCE)

    ours.eval()
    theirs.eval()
    np.testing.assert_allclose(ours(tensor(x, device=device)).numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), **TOLERANCE)
    back = torch_small_net()
    back.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    for name, value in ours.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[name].numpy(), value)


def test_state_dict_round_trip_keeps_tensors(device):
    source, target = small_net(device, 0), small_net(device, 1)
    optimizer = optim.SGD(target.parameters(), lr=0.1)
    held = target.state_dict(keep_vars=True)
    before = {name: (id(t), t.requires_grad) for name, t in held.items()}
    state = source.state_dict()
    assert not any(np.array_equal(v, target.state_dict()[k]) for k, v in state.items()
                   if k.endswith("weight") and k.startswith(("0", "4")))
    assert target.load_state_dict(state) == nn.IncompatibleKeys([], [])
    for name, t in target.state_dict(keep_vars=True).items():
        assert (id(t), t.requires_grad) == before[name], name
        assert t.device == device
        np.testing.assert_array_equal(t.numpy(), state[name])
    assert all(a is b for a, b in zip(optimizer.params, target.parameters()))
    state["0.weight"][...] = 0.0  # state_dict() hands out copies
    assert np.abs(source.state_dict()["0.weight"]).sum() > 0
    x = tensor(rand(2, 3, 5, 5), device=device)
    np.testing.assert_array_equal(target.eval()(x).numpy(), source.eval()(x).numpy())


def test_load_state_dict_errors_name_every_problem():
    model = small_net("reference", 0)
    original = model.state_dict()
    state = dict(original)
    del state["0.bias"]
    state["4.weight"] = np.zeros((3, 99), np.float32)
    state["1.running_mean"] = state["1.running_mean"].astype(np.float64)
    state["5.weight"] = np.zeros(3, np.float32)
    with pytest.raises(gingham.StateDictError) as caught:
        model.load_state_dict(state)
    message = str(caught.value)
    assert "missing key(s): 0.bias" in message
    assert "unexpected key(s): 5.weight" in message
    assert "4.weight: shape (3, 99) in the state dict, (3, 100) in the module" in message
    assert "1.running_mean: dtype float64 in the state dict, float32 in the module" in message
    assert caught.value.missing_keys == ("0.bias",)
    assert caught.value.unexpected_keys == ("5.weight",)
    for name, value in model.state_dict().items():  # nothing was loaded
        np.testing.assert_array_equal(value, original[name])

    del state["4.weight"], state["1.running_mean"]
    state["0.weight"] = original["0.weight"] + 1.0
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["0.bias", "1.running_mean", "4.weight"]
    assert result.unexpected_keys == ["5.weight"]
    np.testing.assert_array_equal(model.state_dict()["0.weight"], original["0.weight"] + 1.0)
    with pytest.raises(gingham.StateDictError, match="shape"):  # even when not strict
        model.load_state_dict({"0.bias": np.zeros(5, np.float32)}, strict=False)

    linear = nn.Linear(2, 2, device="reference")  # num_batches_tracked is a batch norm's only
    with pytest.raises(gingham.StateDictError, match="unexpected key.*num_batches_tracked"):
        linear.load_state_dict({**linear.state_dict(), "num_batches_tracked": np.int64(0)})
    norm = nn.BatchNorm1d(2, device="reference")  # a state dict from before the counter
    old = {k: v for k, v in norm.state_dict().items() if k != "num_batches_tracked"}
    assert norm.load_state_dict(old) == nn.IncompatibleKeys([], [])


def test_loaded_weights_reach_a_compiled_step(device):
    """Loading assigns to the tensors a traced step captured: no retrace, new values."""
    model = nn.Sequential(nn.Linear(4, 3, device=device), nn.Tanh())

    @jit
    def forward(x):
        return model(x)

    x = rand(5, 4)
    forward(x)
    other = tnn.Sequential(randomize(tnn.Linear(4, 3), seed=5), tnn.Tanh())
    model.load_state_dict(other.state_dict())
    np.testing.assert_allclose(forward(x).numpy(), other(torch.tensor(x)).detach().numpy(),
                               **TOLERANCE)
    assert forward.traces == 1


def test_zero_grad(device):
    model = nn.Sequential(nn.Linear(3, 2, device=device), nn.ReLU())
    model(tensor(rand(4, 3), device=device)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(np.array_equal(p.grad.numpy(), np.zeros(p.shape)) for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


# -- moving a model --------------------------------------------------------------------------------


def test_to_keeps_the_tensors_an_earlier_optimizer_trains(device):
    """PyTorch's usual flow, optimiser first, then ``model.to(device)``, then training: the
    parameters and buffers stay the same objects; a pending gradient, the optimiser's
    momentum and a step compiled before the move follow them. The oracle is the same run
    made on ``device`` throughout (the steps before the move ran elsewhere: close, not equal)."""
    source = "reference" if device != "reference" else "cpu"
    data = batches(4, 2)

    def run(start: str):
        model = small_net(start, 0, RESUME_SIZE)
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        step = training.train_step(model, optimizer)
        held = model.parameters() + model.buffers()
        losses = [step(*data[0]).item()]
        images, labels = (tensor(v, device=start) for v in data[1])
        nn.functional.cross_entropy(model(images), labels).backward()  # pending at the move
        assert model.to(device) is model
        assert all(a is b for a, b in zip(held, model.parameters() + model.buffers()))
        assert all(t.device == device for t in held)
        assert all(p.grad.device == device for p in model.parameters())
        optimizer.step()
        losses += [step(*batch).item() for batch in data[2:]]
        return model, optimizer, step, losses

    moved, moved_optimizer, moved_step, moved_losses = run(source)
    direct, optimizer, step, losses = run(device)
    assert (moved_step.traces, step.traces) == (2, 1)  # a move retraces; none does not
    np.testing.assert_allclose(moved_losses, losses, **TOLERANCE)
    expected = direct.state_dict()
    for key, value in moved.state_dict().items():
        np.testing.assert_allclose(value, expected[key], err_msg=key, **TOLERANCE)
    expected_state = optimizer.state_dict()["state"]
    for index, entry in moved_optimizer.state_dict()["state"].items():
        np.testing.assert_allclose(entry["momentum_buffer"],
                                   expected_state[index]["momentum_buffer"], **TOLERANCE)


class WithCounter(nn.Module):
    """A layer, batch norm's float buffers and an integer buffer (as PyTorch's
    num_batches_tracked), which casts to a floating dtype leave alone."""

    def __init__(self, device: str | None = None) -> None:
        self.linear = nn.Linear(3, 2, device=device)
        self.norm = nn.BatchNorm2d(2, device=device)
        self.count = tensor(np.arange(3, dtype=np.int32), device=device)


class TorchWithCounter(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear, self.norm = tnn.Linear(3, 2), tnn.BatchNorm2d(2)
        self.register_buffer("count", torch.arange(3, dtype=torch.int32))


def test_to_casts_floating_tensors_in_pytorchs_forms(device):
    """Each form of ``to`` and the dtype shorthands give the state dict (values and dtypes)
    that the same calls give in PyTorch; the tensors stay the same objects and the moved
    model computes as PyTorch's in float16."""
    ours, theirs = WithCounter(device), randomize(TorchWithCounter())
    ours.load_state_dict(theirs.state_dict())
    held = list(ours.state_dict(keep_vars=True).values())
    steps = [  # ours, PyTorch's
        (lambda m: m.half(), lambda m: m.half()),
        (lambda m: m.to("cpu", "bfloat16"), lambda m: m.to(torch.bfloat16)),
        (lambda m: m.to(device=device), lambda m: m),
        (lambda m: m.double(), lambda m: m.double()),
        (lambda m: m.to(np.float16), lambda m: m.to(torch.float16)),
        (lambda m: m.float(), lambda m: m.float()),
        (lambda m: m.bfloat16().cpu(), lambda m: m.bfloat16()),
        (lambda m: m.to(tensor(np.zeros(1, np.float16), device=device)),
         lambda m: m.to(torch.float16)),
    ]
    for index, (move, move_theirs) in enumerate(steps):
        assert move(ours) is ours
        move_theirs(theirs)
        expected = theirs.state_dict()
        for (key, value), tensor_ in zip(ours.state_dict().items(), held):
            want = expected[key]
            assert str(value.dtype) == str(want.dtype).removeprefix("torch."), (index, key)
            assert tensor_.dtype == value.dtype and tensor_.device in ("cpu", device)
            np.testing.assert_array_equal(value.astype(np.float64), want.double().numpy(),
                                          err_msg=f"step {index}: {key}")
    assert [t.device for t in held] == [device] * len(held)
    x = rand(4, 3)
    np.testing.assert_allclose(
        ours.linear(tensor(x, device=device, dtype=np.float16)).numpy().astype(np.float32),
        theirs.linear(torch.tensor(x).half()).detach().float().numpy(), rtol=2e-3, atol=2e-3)


def test_to_errors():
    model = WithCounter("reference")
    with pytest.raises(TypeError, match="only accepts floating point dtypes.*int32"):
        model.to(np.int32)
    with pytest.raises(TypeError, match=r"to\(device, dtype\)"):
        model.to("float16", "reference")
    with pytest.raises(gingham.DeviceNotFoundError, match="no device 'nowhere'"):
        model.to("nowhere")
    cuda = [d.id for d in list_devices() if d.id.startswith("cuda:")]
    if cuda:
        assert model.cuda().linear.weight.device == "cuda:0"
    else:
        with pytest.raises(gingham.DeviceNotFoundError, match="no device 'cuda:0'"):
            model.cuda()
    assert all(t.device == ("cuda:0" if cuda else "reference")
               for t in model.state_dict(keep_vars=True).values())  # nothing half-moved

    model = nn.Linear(2, 2, device="reference")

    @jit
    def moving(x):
        model.to("reference", "float16")
        return model(x)

    with pytest.raises(gingham.GinghamError, match="inside a function traced by gingham.jit"):
        moving(rand(3, 2))
    assert model.weight.dtype == np.float32


# -- checkpoints of a training run -----------------------------------------------------------------

OPTIMIZERS = {
    "sgd-nesterov-wd": lambda p, lr: optim.SGD(p, lr=lr, momentum=0.9, nesterov=True,
                                               weight_decay=1e-3),
    "adam-wd": lambda p, lr: optim.Adam(p, lr=lr, weight_decay=1e-2),
    "adamw": lambda p, lr: optim.AdamW(p, lr=lr),
}


# 5x5 images: the size at which the cpu device's batch-norm gradient was wrong before its
# selects of loaded values were rendered as gh_select (a GCC 12 masked-load miscompile).
RESUME_SIZE = 5


def batches(count: int, offset: int):
    rng = np.random.default_rng(100 + offset)
    return [(rng.standard_normal((4, 3, RESUME_SIZE, RESUME_SIZE)).astype(np.float32),
             rng.integers(0, 3, size=4).astype(np.int32)) for _ in range(count)]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_training_resumes_exactly_from_a_checkpoint(device, name, tmp_path):
    """N steps, a checkpoint of model and optimiser, M more steps; a fresh model and optimiser
    (other weights, another learning rate) loaded from the file take the same M steps."""
    make = OPTIMIZERS[name]
    model = small_net(device, 0, RESUME_SIZE)
    optimizer = make(model.parameters(), 0.05)
    step = training.train_step(model, optimizer)
    for images, labels in batches(3, 0):
        step(images, labels)
    path = tmp_path / "run.ckpt"
    gingham.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                  "steps": 3}, path)
    continued = [step(images, labels).item() for images, labels in batches(3, 1)]

    resumed = small_net(device, 1, RESUME_SIZE)
    resumed_optimizer = make(resumed.parameters(), 0.5)
    checkpoint = gingham.load(path)
    assert checkpoint["steps"] == 3
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    assert resumed_optimizer.lr == 0.05
    resumed_step = training.train_step(resumed, resumed_optimizer)
    again = [resumed_step(images, labels).item() for images, labels in batches(3, 1)]
    assert again == continued
    finished = model.state_dict()
    for key, value in resumed.state_dict().items():
        np.testing.assert_array_equal(value, finished[key], err_msg=key)
    original_state = optimizer.state_dict()
    for index, entry in resumed_optimizer.state_dict()["state"].items():
        for key, value in entry.items():
            np.testing.assert_array_equal(value, original_state["state"][index][key])


def dropout_net(device: str, seed: int) -> nn.Sequential:
    nn.manual_seed(seed)  # reseeds the default generators too
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, device=device), nn.ReLU(), nn.Flatten(),
                         nn.Dropout(0.5), nn.Linear(4 * RESUME_SIZE * RESUME_SIZE, 3,
                                                    device=device))


def test_training_with_dropout_resumes_exactly_with_the_rng_state(device, tmp_path):
    """As above with dropout in the compiled step: the checkpoint's rng state
    (gingham.nn.get_rng_state) makes the resumed run draw the uninterrupted run's masks, so
    losses and weights are equal; resumed without it, the run differs."""
    model = dropout_net(device, 0)
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = training.train_step(model, optimizer)
    for images, labels in batches(3, 0):
        step(images, labels)
    path = tmp_path / "run.ckpt"
    gingham.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                  "rng": nn.get_rng_state(device)}, path)
    continued = [step(images, labels).item() for images, labels in batches(3, 1)]

    def resume(seed: int, restore_rng: bool):
        resumed = dropout_net(device, seed)
        resumed_optimizer = optim.SGD(resumed.parameters(), lr=0.1, momentum=0.9)
        checkpoint = gingham.load(path)
        resumed.load_state_dict(checkpoint["model"])
        resumed_optimizer.load_state_dict(checkpoint["optimizer"])
        if restore_rng:
            nn.set_rng_state(checkpoint["rng"], device)
        resumed_step = training.train_step(resumed, resumed_optimizer)
        losses = [resumed_step(images, labels).item() for images, labels in batches(3, 1)]
        return resumed, losses

    resumed, again = resume(1, True)
    assert again == continued
    finished = model.state_dict()
    for key, value in resumed.state_dict().items():
        np.testing.assert_array_equal(value, finished[key], err_msg=key)
    assert resume(2, False)[1] != continued


def test_rng_state_round_trips_through_a_checkpoint(tmp_path):
    """Generator.get_state/set_state, and gingham.nn.get_rng_state/set_rng_state through
    gingham.save: the draws after a restore (dropout masks, initial weights) repeat those
    made after the state was taken."""
    x = tensor(np.ones((4, 8), np.float32), device="reference")
    g = nn.functional.Generator(seed=7, device="reference")
    nn.functional.dropout(x, 0.5, generator=g)
    saved = g.get_state()
    assert saved.dtype == np.uint32 and saved.tolist() == [7, 1]
    second = nn.functional.dropout(x, 0.5, generator=g).numpy()
    assert g.set_state(saved) is g
    np.testing.assert_array_equal(nn.functional.dropout(x, 0.5, generator=g).numpy(), second)
    with pytest.raises(ValueError, match="2 uint32 values"):
        g.set_state(np.zeros(3, np.uint32))

    nn.manual_seed(3)
    nn.functional.dropout(x, 0.5)
    gingham.save({"rng": nn.get_rng_state("reference")}, tmp_path / "rng.ckpt")
    mask = nn.functional.dropout(x, 0.5).numpy()
    weight = nn.Linear(3, 2, device="reference").weight.numpy()
    assert not np.array_equal(nn.functional.dropout(x, 0.5).numpy(), mask)
    nn.set_rng_state(gingham.load(tmp_path / "rng.ckpt")["rng"], "reference")
    np.testing.assert_array_equal(nn.functional.dropout(x, 0.5).numpy(), mask)
    np.testing.assert_array_equal(nn.Linear(3, 2, device="reference").weight.numpy(), weight)
    with pytest.raises(ValueError, match="12 uint32 values"):
        nn.set_rng_state(np.zeros(2, np.uint32), "reference")
    nn.manual_seed(0)


TORCH_OPTIMIZERS = {  # gingham's, PyTorch's
    "sgd-momentum": (lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1)),
    "adam": (lambda p: optim.Adam(p, lr=0.5, betas=(0.8, 0.9), weight_decay=0.1),
             lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.9), weight_decay=0.1)),
    "adamw": (lambda p: optim.AdamW(p), lambda p: torch.optim.AdamW(p, lr=0.02)),
}


@pytest.mark.parametrize("name", TORCH_OPTIMIZERS)
def test_optimizer_continues_from_torch_state(device, name):
    """PyTorch trains two steps; its model and optimiser state dicts load into gingham; both
    take two more steps and agree."""
    make, make_torch = TORCH_OPTIMIZERS[name]
    theirs = randomize(tnn.Sequential(tnn.Linear(5, 4), tnn.Tanh(), tnn.Linear(4, 3)))
    torch_optimizer = make_torch(theirs.parameters())
    x, y = rand(8, 5, seed=1), rand(8, 3, seed=2)

    def torch_step():
        torch_optimizer.zero_grad()
        ((theirs(torch.tensor(x)) - torch.tensor(y)) ** 2).mean().backward()
        torch_optimizer.step()

    for _ in range(2):
        torch_step()
    ours = nn.Sequential(nn.Linear(5, 4, device=device), nn.Tanh(),
                         nn.Linear(4, 3, device=device))
    ours.load_state_dict(theirs.state_dict())
    optimizer = make(ours.parameters())
    optimizer.load_state_dict(torch_optimizer.state_dict())
    assert optimizer.lr == torch_optimizer.param_groups[0]["lr"]
    for _ in range(2):
        torch_step()
        optimizer.zero_grad()
        ((ours(tensor(x, device=device)) - tensor(y, device=device)) ** 2).mean().backward()
        optimizer.step()
    theirs_state = theirs.state_dict()
    for key, value in ours.state_dict().items():
        np.testing.assert_allclose(value, theirs_state[key].numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=key)


def test_optimizer_state_dict_errors():
    weight = tensor(rand(3, 2), device="reference", requires_grad=True)
    adam = optim.Adam([weight], lr=0.1)
    state = adam.state_dict()
    assert state["param_groups"][0]["params"] == [0]
    assert set(state["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    sgd = optim.SGD([weight], lr=0.1, momentum=0.9)
    with pytest.raises(gingham.StateDictError, match="unknown setting"):
        sgd.load_state_dict(state)  # Adam's state into SGD
    with pytest.raises(gingham.StateDictError, match="load it into gingham.optim.Adam$"):
        optim.AdamW([weight]).load_state_dict(state)
    with pytest.raises(gingham.StateDictError, match="has 2 parameter groups, this optimiser 1"):
        adam.load_state_dict({**state, "param_groups": state["param_groups"] * 2})
    two = optim.Adam([weight, tensor(rand(2), device="reference", requires_grad=True)])
    with pytest.raises(gingham.StateDictError, match="has 1 parameters, this optimiser 2"):
        two.load_state_dict(state)
    bad = {"state": {0: {"step": 1.0, "exp_avg": np.zeros((2, 3), np.float32)}},
           "param_groups": [{**state["param_groups"][0], "lr": 7.0}]}
    with pytest.raises(gingham.StateDictError, match=r"exp_avg has shape \(2, 3\)"):
        adam.load_state_dict(bad)
    assert adam.lr == 0.1  # nothing changed
    with pytest.raises(gingham.StateDictError, match="not SGD's"):
        sgd.load_state_dict({"state": {0: {"exp_avg": np.zeros((3, 2), np.float32)}},
                             "param_groups": [sgd.state_dict()["param_groups"][0]]})


class _TorchNet(tnn.Module):
    """Batch norm in a Sequential, as an attribute, in a list attribute's ModuleList, and
    instance norm (which conversion leaves alone)."""

    def __init__(self, lib):
        super().__init__()
        self.body = lib.Sequential(lib.Conv1d(3, 4, 3), lib.BatchNorm1d(4), lib.ReLU())
        self.norm = lib.BatchNorm3d(2)
        self.blocks = lib.ModuleList([lib.BatchNorm2d(2, momentum=0.3), lib.InstanceNorm1d(4)])


class _GinghamNet(nn.Module):
    def __init__(self, device):
        self.body = nn.Sequential(nn.Conv1d(3, 4, 3, device=device),
                                  nn.BatchNorm1d(4, device=device), nn.ReLU())
        self.norm = nn.BatchNorm3d(2, device=device)
        self.blocks = nn.ModuleList([nn.BatchNorm2d(2, momentum=0.3, device=device),
                                     nn.InstanceNorm1d(4)])


def test_sync_batch_norm_is_batch_norm_of_any_rank_in_one_process(device):
    theirs = randomize(_TorchNet(tnn))
    ours = _GinghamNet(device)
    ours.load_state_dict(theirs.state_dict())
    parameters = list(ours.parameters())
    ours_converted = nn.SyncBatchNorm.convert_sync_batchnorm(ours)
    theirs_converted = tnn.SyncBatchNorm.convert_sync_batchnorm(theirs)
    kinds = [type(m).__name__ for m in list(ours_converted.modules())[1:]]
    assert kinds == [type(m).__name__ for m in list(theirs_converted.modules())[1:]]
    assert kinds.count("SyncBatchNorm") == 3 and "InstanceNorm1d" in kinds
    # the same parameter tensors: an optimiser made before conversion still updates them
    assert [id(p) for p in ours_converted.parameters()] == [id(p) for p in parameters]
    assert list(ours_converted.state_dict()) == list(theirs_converted.state_dict())
    arrays = {"signal": rand(4, 3, 7), "volume": rand(3, 2, 2, 3, 2, seed=1),
              "image": rand(3, 2, 4, 3, seed=2), "flat": rand(5, 4, seed=3)}
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    flat_theirs, flat_ours = tnn.SyncBatchNorm(4), nn.SyncBatchNorm(4, device=device)

    def run(net, flat, inputs):
        return {"body": net.body(inputs["signal"]), "norm": net.norm(inputs["volume"]),
                "block": net.blocks[0](inputs["image"]), "flat": flat(inputs["flat"])}

    g_out, t_out = run(ours_converted, flat_ours, g_in), run(theirs_converted, flat_theirs, t_in)
    assert_layers_match(ours_converted, theirs_converted, g_in, t_in, g_out, t_out, device,
                        TOLERANCE)
    for name, buffer in theirs_converted.state_dict().items():  # running stats updated alike
        np.testing.assert_allclose(np.asarray(ours_converted.state_dict()[name]), buffer.numpy(),
                                   err_msg=name, **TOLERANCE)
    ours_converted.eval()
    theirs_converted.eval()
    np.testing.assert_allclose(ours_converted.norm(g_in["volume"]).numpy(),
                               theirs_converted.norm(t_in["volume"]).detach().numpy(),
                               **TOLERANCE)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        flat_ours(tensor(rand(4), device=device))
    with pytest.raises(ValueError, match="no process group"):
        nn.SyncBatchNorm(4, process_group="world")
    lone = nn.BatchNorm2d(3, device=device).eval()
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(lone)
    assert type(converted) is nn.SyncBatchNorm and not converted.training
    assert converted.running_mean is lone.running_mean
