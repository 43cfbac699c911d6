"""The bandwidth-bound kernels of a bfloat16 channels-last training step, with the GPU schedules
an H200 gets: a ResNet-9 block (conv - batch norm - ReLU - max pool, then a linear layer and
cross entropy) under autocast, forward and every gradient, against PyTorch CPU's
``torch.autocast("cpu", dtype=torch.bfloat16)`` on the same data in NCHW.

The device is described with 132 compute units (PoCL as well: it runs the GPU schedules), so
the batch-norm statistics are cut into many slices (4 channels a work-item, read as vectors)
and combined in chains, and the elementwise
kernels read bfloat16 activations and per-channel operands as vectors (8 channels) or per cell
(6: no whole vectors in a row). Each run asserts the schedules it means to test. Tolerances as
in tests/frontend/test_amp.py: bfloat16 keeps 8 significant bits.

Two float64 oracles judge both sides: the block computed exactly (the truth), and the block with
exactly the roundings PyTorch's autocast applies (``autocast_oracle``: conv and linear inputs
and outputs, batch norm's output and every gradient of a bfloat16 tensor rounded to bfloat16;
batch norm, the loss and the float32 parameters' gradients exact). Measured on this block,
every gradient of gingham and of PyTorch lies within 0.3-0.7% (relative norm) of the
rounding oracle, and both lie 0.1-7% from the truth: batch norm's backward cancels, so the
bfloat16 rounding of its incoming gradient shows up magnified in d/dk and d/dimg, on both sides
alike. A max pool's ties are where a gradient rule shows: bfloat16 activations tie in about
0.2% of the 2x2 windows, and routing a tie's cotangent to every tied tap (gingham's rule until
it took PyTorch's, the first tap) moved the gradients through batch norm 2-5% off PyTorch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham.devices import get_device, list_devices
from gingham.frontend.tensor import realize, tensor

GPU_DIALECT_IDS = [d.id for d in list_devices() if d.info.dialect in ("opencl", "cuda")]


@pytest.fixture(params=GPU_DIALECT_IDS)
def h200_like(request, monkeypatch, compiled_schedules):
    """A work-group device described as a GPU with an H200's 132 compute units; the schedule
    line of every kernel compiled while the test runs is collected in ``schedules``."""
    device = get_device(request.param)
    monkeypatch.setattr(device, "info", dataclasses.replace(device.info, kind="gpu",
                                                            compute_units=132))
    return device.id, compiled_schedules


def close(ours: np.ndarray, expected: np.ndarray, name: str, rtol=2e-2, share=2e-2) -> None:
    """Within bfloat16 tolerances: rtol, and an absolute share of the largest magnitude."""
    atol = share * max(float(np.abs(expected).max()), 1e-3)
    np.testing.assert_allclose(ours, expected, rtol=rtol,
                               atol=atol, err_msg=name)


def block_data(channels: int) -> tuple[dict, np.ndarray]:
    """The block's parameters and a batch (PyTorch's layouts, float32), and its labels."""
    rng = np.random.default_rng(channels)
    arrays = dict(img=rng.standard_normal((16, 3, 16, 16)).astype(np.float32),
                  k=(rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32),
                  gamma=(1 + 0.1 * rng.standard_normal(channels)).astype(np.float32),
                  beta=(0.1 * rng.standard_normal(channels)).astype(np.float32),
                  w=(rng.standard_normal((5, channels * 64)) * 0.1).astype(np.float32),
                  b=(rng.standard_normal(5) * 0.1).astype(np.float32))
    return arrays, rng.integers(0, 5, 16)


class _Bfloat16(torch.autograd.Function):
    """A float64 value held as bfloat16: rounded, and so is the gradient that reaches it (the
    op that consumes a bfloat16 tensor gives its gradient in bfloat16)."""

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).double()

    @staticmethod
    def backward(ctx, grad):
        return grad.to(torch.bfloat16).double()


def autocast_oracle(channels: int, rounded: bool = True) -> dict:
    """The gradients of the block in float64, with the roundings of PyTorch's autocast contract
    (``rounded``: conv and linear compute on bfloat16 inputs and give bfloat16; batch norm
    takes that bfloat16, computes in float32 and gives its input's type; ReLU and the pool keep
    it; cross entropy computes in float32), or none at all (the truth)."""
    arrays, labels = block_data(channels)
    bf16 = _Bfloat16.apply if rounded else (lambda x: x)
    t = {name: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for name, v in arrays.items()}
    conv = bf16(TF.conv2d(bf16(t["img"]), bf16(t["k"]), padding=1))
    bn = bf16(TF.batch_norm(conv, None, None, t["gamma"], t["beta"], training=True))
    pooled = bf16(TF.max_pool2d(TF.relu(bn), 2))
    logits = bf16(TF.linear(pooled.permute(0, 2, 3, 1).flatten(1), bf16(t["w"]),
                            bf16(t["b"])))
    TF.cross_entropy(logits, torch.tensor(labels)).backward()
    return {f"d/d{name}": value.grad.numpy() for name, value in t.items()}


def run_block(device: str, channels: int) -> tuple[dict, dict]:
    """The block's forward values and gradients (NCHW / PyTorch's layouts, float32) on
    ``device`` and from PyTorch CPU autocast."""
    arrays, labels = block_data(channels)
    g = {name: tensor(np.ascontiguousarray(v.transpose(0, 2, 3, 1)) if name == "img" else v,
                      device=device, requires_grad=True) for name, v in arrays.items()}
    t = {name: torch.tensor(v, requires_grad=True) for name, v in arrays.items()}
    stats = [tensor(np.zeros(channels, np.float32), device=device),
             tensor(np.ones(channels, np.float32), device=device)]
    t_stats = [torch.zeros(channels), torch.ones(channels)]
    with gingham.autocast("bfloat16"):  # images NHWC; weights keep PyTorch's [O, C, KH, KW]
        conv = F.conv2d(g["img"], g["k"], padding=1, data_format="NHWC")
        bn, mean, var = F.batch_norm(conv, *stats, g["gamma"], g["beta"], training=True,
                                     data_format="NHWC")
        pooled = F.max_pool2d(F.relu(bn), 2, data_format="NHWC")
        flat = pooled.reshape(16, -1)  # flattened in NHWC order (PyTorch's side permutes)
        logits = F.linear(flat, g["w"], g["b"])
        loss = F.cross_entropy(logits, tensor(labels, device=device))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t_conv = TF.conv2d(t["img"], t["k"], padding=1)
        t_bn = TF.batch_norm(t_conv, *t_stats, t["gamma"], t["beta"], training=True)
        t_pooled = TF.max_pool2d(TF.relu(t_bn), 2)
        t_logits = TF.linear(t_pooled.permute(0, 2, 3, 1).flatten(1), t["w"], t["b"])
        t_loss = TF.cross_entropy(t_logits, torch.tensor(labels))
    realize([conv, bn, pooled, logits, loss, mean, var])
    loss.backward()
    t_loss.backward()
    realize([value.grad for value in g.values()])

    def array(value, nhwc: bool = False) -> np.ndarray:
        result = value.numpy().astype(np.float32)
        return result.transpose(0, 3, 1, 2) if nhwc else result

    ours = dict(conv=array(conv, True), bn=array(bn, True), pooled=array(pooled, True),
                logits=array(logits), loss=array(loss), running_mean=array(mean),
                running_var=array(var))
    theirs = dict(conv=t_conv, bn=t_bn, pooled=t_pooled, logits=t_logits, loss=t_loss,
                  running_mean=t_stats[0], running_var=t_stats[1])
    for name, value in g.items():
        ours[f"d/d{name}"] = array(value.grad, name == "img")
        theirs[f"d/d{name}"] = t[name].grad
    return ours, {name: value.detach().float().numpy() for name, value in theirs.items()}


GRADIENTS = ("d/dk", "d/dimg", "d/dgamma", "d/dbeta", "d/dw", "d/db")


def relative(ours: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(ours - expected) / np.linalg.norm(expected))


def check_block(ours: dict, pytorch: dict, channels: int) -> None:
    """Every forward value and gradient, element by element, against PyTorch; every gradient
    against the float64 autocast oracle, and no further from the float64 truth than PyTorch's
    is, up to one percent (relative norm: 2.5 bfloat16 rounding steps). The oracle is first
    checked against PyTorch (to float32 accumulation: 0.45% measured on d/dk, d/dimg)."""
    for name, value in ours.items():
        close(value, pytorch[name], f"{name} against PyTorch")
    rounded, truth = autocast_oracle(channels), autocast_oracle(channels, rounded=False)
    for name in GRADIENTS:
        assert relative(pytorch[name], rounded[name]) < 0.008, f"{name}: the oracle is off"
        close(ours[name], rounded[name], f"{name} against the float64 autocast oracle")
        error, theirs = relative(ours[name], truth[name]), relative(pytorch[name], truth[name])
        assert error <= theirs + 0.01, (f"{name}: {error:.4f} from the float64 truth, "
                                        f"PyTorch {theirs:.4f}")


@pytest.mark.parametrize("channels", [8, 6])
def test_block_forward_and_gradients(h200_like, channels):
    """The block with the H200's schedules against PyTorch, the float64 oracles
    (:func:`check_block`) and, element by element, the reference interpreter (the same program
    without schedules)."""
    device, schedules = h200_like
    ours, pytorch = run_block(device, channels)
    streaming = [s for s in schedules if s.startswith("elementwise over")]
    assert any("vector loads/stores: T" in s for s in streaming), streaming
    combines = [s for s in schedules if s.startswith("split reduction, combine")]
    assert combines and all("chains" in s or "in a tree" in s for s in combines), combines
    if channels % 4 == 0:  # the statistics' partials read 4 channels a work-item as vectors
        partials = [s for s in schedules if s.startswith("split reduction: ")]
        assert any("on 4 cells each" in s and "vector loads of 4" in s for s in partials), \
            partials
    reference, _ = run_block("reference", channels)
    for name, value in ours.items():
        close(value, reference[name], f"{name} against the interpreter")
    check_block(ours, pytorch, channels)


def test_block_on_every_device(device):
    """The block as the device describes itself (the reference interpreter and the C backend
    included) against PyTorch and the float64 oracles."""
    ours, pytorch = run_block(device, 8)
    check_block(ours, pytorch, 8)
