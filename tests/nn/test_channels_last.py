"""Channels-last (NHWC) data through gingham.nn: batch norm, the layers and whole models, against
PyTorch CPU on the same values in NCHW.

The oracle is PyTorch's NCHW (contiguous) path, not ``torch.channels_last``: PyTorch 2.13's CPU
channels-last kernel returns a wrong weight gradient for a 1x1 stride-2 convolution of a
[4, 4, 8, 8] input to 8 channels (ResNet-18's first strided shortcut at width 4; about 50%
relative error against its own NCHW result, which gingham matches to 4e-6).

Each comparison transposes PyTorch's NCHW results to NHWC; the parameters are the same OIHW
arrays in both frameworks, so gradients with respect to them compare directly. Tolerances are
those of tests/nn/test_functional.py (float32 rtol 1e-4 / atol 1e-4); the models compare
gradients relative to their largest entry, as tests/nn/test_resnet18.py does.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham import nn
from gingham.bench.model import torch_model
from gingham.compiler import lower_program
from gingham.devices import list_devices
from gingham.tune.described import H200
from gingham.frontend.tensor import ShapeError, _bound_graph
from gingham.nn import models, modules

from test_functional import compare, rand  # tests/nn (the test directory is on sys.path)


def nhwc(t):
    """NCHW -> NHWC for a torch tensor or a NumPy array of any rank >= 3 (channels to last)."""
    axes = (0, *range(2, t.ndim), 1)
    return t.permute(*axes) if isinstance(t, torch.Tensor) else np.ascontiguousarray(
        t.transpose(axes))


# -- batch norm ------------------------------------------------------------------------------------


def test_batch_norm_channels_last(device):
    """Training (batch statistics, running-statistics update) and evaluation in NHWC at ranks
    4, 3 and 2, with and without affine parameters, forward and gradients."""
    x = rand(4, 3, 5, 2)
    arrays = dict(x=nhwc(x), x3=nhwc(rand(3, 3, 5, seed=9)), x2=rand(7, 3, seed=8),
                  g=rand(3, seed=1), b=rand(3, seed=2), mean=rand(3, seed=3),
                  var=np.abs(rand(3, seed=4)) + 0.5)

    def ours(x, x3, x2, g, b, mean, var):
        y, new_mean, new_var = F.batch_norm(x, mean, var, g, b, training=True, momentum=0.3,
                                            data_format="NHWC")
        return {"train": y, "running_mean": new_mean, "running_var": new_var,
                "eval": F.batch_norm(x, mean, var, g, b, eps=1e-3, data_format="NHWC"),
                "plain": F.batch_norm(x, None, None, training=True, data_format="NHWC")[0],
                "rank3": F.batch_norm(x3, None, None, g, b, training=True,
                                      data_format="NHWC")[0],
                "rank2": F.batch_norm(x2, mean, var, g, b, data_format="NHWC")}

    def theirs(x, x3, x2, g, b, mean, var):
        running_mean, running_var = mean.detach().clone(), var.detach().clone()
        nchw = x.permute(0, 3, 1, 2)
        y = TF.batch_norm(nchw, running_mean, running_var, g, b, training=True, momentum=0.3)
        return {"train": nhwc(y), "running_mean": running_mean, "running_var": running_var,
                "eval": nhwc(TF.batch_norm(nchw, mean, var, g, b, eps=1e-3)),
                "plain": nhwc(TF.batch_norm(nchw, None, None, training=True)),
                "rank3": nhwc(TF.batch_norm(x3.permute(0, 2, 1), None, None, g, b,
                                            training=True)),
                "rank2": TF.batch_norm(x2, mean, var, g, b)}

    compare(device, arrays, ours, theirs, constants=("mean", "var"),
            forward_only=("running_mean", "running_var"))


def test_batch_norm_layout_errors():
    x = gingham.tensor(rand(2, 4, 4, 3), device="reference")
    weight = gingham.tensor(np.ones(4, np.float32), device="reference")
    with pytest.raises(ValueError, match="batch_norm: data_format must be 'NCHW'.*'NHWC'.*"
                                         "'NCWH'"):
        F.batch_norm(x, None, None, training=True, data_format="NCWH")
    # NHWC: the channels are the last axis (3), so a weight of 4 (axis 1) is wrong
    with pytest.raises(ShapeError, match=r"batch_norm: weight must have shape \(3,\) for NHWC "
                                         r"input of shape \(2, 4, 4, 3\), got \(4,\)"):
        F.batch_norm(x, None, None, weight, training=True, data_format="NHWC")
    with pytest.raises(ShapeError, match=r"batch_norm: input must be at least 2-d "
                                         r"\(N, \.\.\., C\)"):
        F.batch_norm(gingham.tensor(rand(5), device="reference"), None, None, training=True,
                     data_format="NHWC")


# -- convolutions (the filter read as OHWI) --------------------------------------------------------


def test_conv2d_channels_last_filters(device):
    """Groups, depthwise, 1x1 with stride, dilation and bias in NHWC: values and the
    gradients of data and OIHW weights (read through the transposed filter copy)."""
    arrays = dict(x=nhwc(rand(2, 4, 7, 6)), w=rand(6, 4, 3, 3, seed=1), b=rand(6, seed=2),
                  wg=rand(6, 2, 3, 2, seed=3), wd=rand(8, 1, 3, 3, seed=5),
                  w1=rand(5, 4, 1, 1, seed=6))

    def ours(x, w, b, wg, wd, w1):
        return {
            "plain": F.conv2d(x, w, b, padding=1, data_format="NHWC"),
            "grouped": F.conv2d(x, wg, None, stride=(2, 1), padding=(2, 1), dilation=(2, 1),
                                groups=2, data_format="NHWC"),
            "depthwise": F.conv2d(x, wd, padding="valid", groups=4, data_format="NHWC"),
            "pointwise": F.conv2d(x, w1, stride=2, data_format="NHWC"),
        }

    def theirs(x, w, b, wg, wd, w1):
        x = x.permute(0, 3, 1, 2)
        return {
            "plain": nhwc(TF.conv2d(x, w, b, padding=1)),
            "grouped": nhwc(TF.conv2d(x, wg, None, stride=(2, 1), padding=(2, 1),
                                      dilation=(2, 1), groups=2)),
            "depthwise": nhwc(TF.conv2d(x, wd, padding="valid", groups=4)),
            "pointwise": nhwc(TF.conv2d(x, w1, stride=2)),
        }

    compare(device, arrays, ours, theirs)


def _h200_schedules(targets) -> list[str]:
    """The schedules an H200 would get for the program computing ``targets`` (kernels built
    for its description, as tests/compiler/test_tensor_cores.py builds them; nothing runs)."""
    _, _, bound = _bound_graph(targets, lambda t: t.is_leaf)
    return [kernel.schedule for kernel in lower_program(bound, H200)]


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_channels_last_conv_stages_both_operands_with_16_byte_copies(data_format):
    """bf16 NHWC conv on an H200 (forward and weight gradient): the image and the filter copy
    are both contiguous along the input channel, so every tensor-core kernel stages both
    operands with 16-byte cp.async; the filter copy stays a kernel of its own (fusion does not
    fold the transpose back into the operand read). NCHW, for contrast, stages operands
    element by element."""
    rng = np.random.default_rng(0)
    shape = (32, 16, 16, 64) if data_format == "NHWC" else (32, 64, 16, 16)
    x = gingham.tensor(rng.standard_normal(shape).astype(np.float32), device="reference")
    w = gingham.tensor(rng.standard_normal((128, 64, 3, 3)).astype(np.float32),
                       device="reference", requires_grad=True)
    with gingham.autocast("bfloat16"):
        y = F.conv2d(x, w, padding=1, data_format=data_format)
    y.astype(np.float32).sum().backward()
    schedules = _h200_schedules([y, w.grad])
    products = [s for s in schedules if s.startswith("gpu tensor-core contraction")]
    assert len(products) == 2, schedules  # the forward product and the weight gradient
    forward = next(s for s in products if "K=576" in s)
    if data_format == "NHWC":
        assert "K=576 (ix_k0,ix_k1,ix_ci)" in forward, forward  # the input channel runs fastest
        assert forward.count("K-major, 16-byte async copies") == 2, forward
        assert not any("element loads" in s for s in products), products
        # the OHWI copy of the 128x64x3x3 filter (bf16 cast in its epilogue), and the
        # gradient's way back to OIHW
        assert sum(s.startswith("one work-item per output cell (73728)")
                   for s in schedules) == 2, schedules
    else:
        assert all("element loads" in s for s in products), products


# -- layers ----------------------------------------------------------------------------------------


def test_layers_channels_last_match_pytorch(device):
    """Conv2d (reflect padding), BatchNorm2d (training), ReLU, MaxPool2d, AdaptiveAvgPool2d
    and Flatten (in PyTorch's feature order) in NHWC against torch.nn on NCHW with the same
    weights."""
    modules.manual_seed(3)
    ours = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect", device=device,
                                   data_format="NHWC"),
                         nn.BatchNorm2d(8, device=device, data_format="NHWC"), nn.ReLU(),
                         nn.MaxPool2d(2, data_format="NHWC"),
                         nn.AdaptiveAvgPool2d((2, 3), data_format="NHWC"),
                         nn.Flatten(data_format="NHWC"), nn.Linear(8 * 2 * 3, 5, device=device))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect"),
                                 torch.nn.BatchNorm2d(8),
                                 torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.AdaptiveAvgPool2d((2, 3)), torch.nn.Flatten(),
                                 torch.nn.Linear(8 * 2 * 3, 5))
    with torch.no_grad():
        for mine, other in zip(ours.parameters(), theirs.parameters(), strict=True):
            other.copy_(torch.from_numpy(mine.numpy()))
    images = rand(2, 3, 8, 12, seed=4)

    @gingham.jit
    def forward_backward(x):
        out = ours(x)
        (out * out).sum().backward()
        return out, [p.grad for p in ours.parameters()]

    out, grads = forward_backward(gingham.tensor(nhwc(images), device=device))
    expected = theirs(torch.from_numpy(images))
    (expected * expected).sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-4, atol=1e-4)
    for grad, other in zip(grads, theirs.parameters(), strict=True):
        np.testing.assert_allclose(grad.numpy(), other.grad.numpy(), rtol=1e-4, atol=1e-4)
    unbatched = ours[0](gingham.tensor(nhwc(images)[1], device=device))  # [H, W, C]
    np.testing.assert_allclose(unbatched.numpy(), nhwc(theirs[0](torch.from_numpy(
        images[1:])).detach().numpy())[0], rtol=1e-4, atol=1e-4)
    bn_ours, bn_theirs = ours[1], theirs[1]
    np.testing.assert_allclose(bn_ours.running_mean.numpy(), bn_theirs.running_mean.numpy(),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn_ours.running_var.numpy(), bn_theirs.running_var.numpy(),
                               rtol=1e-4, atol=1e-5)


def test_layers_name_a_bad_data_format():
    for make in (lambda: nn.Conv2d(3, 4, 3, data_format="NWHC"),
                 lambda: nn.BatchNorm2d(4, data_format="NWHC"),
                 lambda: nn.MaxPool2d(2, data_format="NWHC"),
                 lambda: nn.Flatten(data_format="NWHC"),
                 lambda: models.ResNet9(data_format="NWHC", device="reference")):
        with pytest.raises(ValueError, match=r"data_format must be 'NCHW' or 'NHWC', not "
                                             r"'NWHC'"):
            make()


# -- models ----------------------------------------------------------------------------------------


def _device_params() -> list:
    """The reference interpreter, then every compiled device marked ``slow`` (a model's
    forward and backward compile a few hundred kernels), as in test_resnet18.py."""
    ids = ["reference"] + [d.id for d in list_devices() if d.info.dialect is not None]
    only = os.environ.get("GINGHAM_TEST_DEVICES")
    if only:
        ids = [i for i in ids if i in {d.strip() for d in only.split(",")}]
    return [i if i == "reference" else pytest.param(i, marks=pytest.mark.slow) for i in ids]


#: (model name in gingham.bench.model, gingham class, narrow width, image size)
TWINS = [("resnet9", models.ResNet9, 4, 16), ("story", models.StoryNet, 4, 12),
         ("resnet18", models.ResNet18, 4, 8)]  # ResNet-18: strided 1x1 shortcut convs


@pytest.mark.parametrize("name, cls, width, size", TWINS, ids=[t[0] for t in TWINS])
@pytest.mark.parametrize("device", _device_params())
def test_channels_last_model_matches_pytorch(device, name, cls, width, size):
    """A narrow twin in NHWC: logits, loss and every parameter's gradient against the same
    PyTorch model (same weights) on the same images in NCHW, in training mode (see the module
    docstring for why not PyTorch's channels-last)."""
    modules.manual_seed(0)
    ours = cls(width=width, device=device, data_format="NHWC")
    theirs = torch_model(torch, name, 10, width=width)
    with torch.no_grad():
        for mine, other in zip(ours.parameters(), theirs.parameters(), strict=True):
            assert tuple(mine.shape) == tuple(other.shape)
            other.copy_(torch.from_numpy(mine.numpy()))
    rng = np.random.default_rng(1)
    images = rng.standard_normal((4, 3, size, size), dtype=np.float32)
    labels = np.array([0, 3, 7, 9], dtype=np.int64)

    @gingham.jit
    def forward_backward(x, y):
        logits = ours(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        return logits, loss, [p.grad for p in ours.parameters()]

    logits, loss, grads = forward_backward(gingham.tensor(nhwc(images), device=device),
                                           gingham.tensor(labels, device=device))
    expected_logits = theirs(torch.from_numpy(images))
    expected_loss = TF.cross_entropy(expected_logits, torch.from_numpy(labels))
    expected_loss.backward()

    np.testing.assert_allclose(logits.numpy(), expected_logits.detach().numpy(),
                               rtol=1e-4, atol=1e-4)
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-5)
    for grad, other in zip(grads, theirs.parameters(), strict=True):
        expected = other.grad.numpy()
        scale = np.abs(expected).max() + 1e-12
        np.testing.assert_allclose(grad.numpy() / scale, expected / scale, atol=2e-4)


def test_layouts_share_parameters():
    """The same seed gives the same parameters, in the same order and shapes, in both layouts
    and in PyTorch's twin (what makes state dicts portable)."""
    for name, cls, width, _ in TWINS:
        shapes = []
        for data_format in ("NCHW", "NHWC"):
            modules.manual_seed(0)
            model = cls(width=width, device="reference", data_format=data_format)
            shapes.append([(p.shape, p.numpy().tobytes()) for p in model.parameters()])
        assert shapes[0] == shapes[1], name
        theirs = torch_model(torch, name, 10, width=width)
        assert [s for s, _ in shapes[0]] == [tuple(p.shape) for p in theirs.parameters()]


def test_model_rejects_images_in_the_other_layout():
    model = models.ResNet9(width=4, device="reference", data_format="NHWC")
    images = gingham.tensor(rand(2, 3, 16, 16), device="reference")  # NCHW given to NHWC
    with pytest.raises(ShapeError, match="conv2d: weight has 3 input channels per group but "
                                         "input has 16 channels"):
        model(images)
