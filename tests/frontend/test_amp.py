"""Mixed precision (gingham.autocast, gingham.amp.GradScaler) against PyTorch CPU's
``torch.autocast("cpu", dtype=torch.bfloat16)`` and ``torch.amp.GradScaler``, on every device.

Tolerances: bfloat16 keeps 8 significant bits (a relative rounding step of 2**-8 = 0.4%). Both
sides accumulate contractions in float32 and round each low-precision result once, but they
may sum in a different order and so round a value to neighbouring bfloat16 numbers; errors then
pass through a few ops. Values are compared with rtol 2e-2 and an absolute tolerance of 2% of
the largest expected magnitude (``close``); that still fails on any real mistake (a missing
cast, a float32 op computed in bfloat16 and vice versa shows as a wrong dtype first).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham import data
from gingham.devices import list_devices
from gingham.frontend.tensor import realize, tensor
from gingham.nn import modules, training
from gingham.nn.functional import DTypeError
from gingham.tile import dtypes as dt

BF16, F32 = dt.bfloat16, np.dtype(np.float32)
TORCH_DTYPES = {torch.bfloat16: BF16, torch.float16: np.dtype(np.float16),
                torch.float32: F32}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(ours, theirs, name: str, rtol=2e-2, share=2e-2) -> None:
    """Dtype as torch gives it, then values within bfloat16 tolerances (module docstring)."""
    assert ours.dtype == TORCH_DTYPES[theirs.dtype], (name, ours.dtype, theirs.dtype)
    expected = theirs.detach().float().numpy()
    atol = share * max(float(np.abs(expected).max()), 1e-3)
    np.testing.assert_allclose(ours.numpy().astype(np.float32), expected, rtol=rtol, atol=atol,
                               err_msg=name)


def leaves(arrays: dict, device: str):
    ours = {k: tensor(v, device=device, requires_grad=v.dtype.kind == "f")
            for k, v in arrays.items()}
    theirs = {k: torch.tensor(v, requires_grad=v.dtype.kind == "f") for k, v in arrays.items()}
    return ours, theirs


def backward_both(ours: dict, theirs: dict, seed=1):
    """``sum_k <r_k, out_k>`` for random r, computed outside autocast (as in PyTorch, the
    product of a bfloat16 output and a float32 weight is float32), then backward on both."""
    rng = np.random.default_rng(seed)
    weights = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
               for k, v in theirs.items()}
    g_loss = sum((ours[k] * tensor(w, device=ours[k].device)).sum() for k, w in weights.items())
    t_loss = sum((theirs[k] * torch.tensor(w)).sum() for k, w in weights.items())
    g_loss.backward()
    t_loss.backward()


def compare_grads(g_in: dict, t_in: dict) -> None:
    realize([g.grad for g in g_in.values() if g.requires_grad])
    for name, value in g_in.items():
        if value.requires_grad:
            close(value.grad, t_in[name].grad, f"d/d{name}")


# -- contractions under autocast -------------------------------------------------------------------


def test_linear_matmul_conv2d_forward_backward(device):
    arrays = dict(x=rand(6, 24), w=rand(10, 24, seed=1), b=rand(10, seed=2),
                  img=rand(2, 3, 7, 7, seed=3), k=rand(4, 3, 3, 3, seed=4), kb=rand(4, seed=5))
    g, t = leaves(arrays, device)

    with gingham.autocast():
        ours = dict(linear=F.linear(g["x"], g["w"], g["b"]), matmul=g["x"] @ g["w"].T,
                    conv=F.conv2d(g["img"], g["k"], g["kb"], stride=2, padding=1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = dict(linear=TF.linear(t["x"], t["w"], t["b"]), matmul=t["x"] @ t["w"].T,
                      conv=TF.conv2d(t["img"], t["k"], t["kb"], stride=2, padding=1))
    realize(list(ours.values()))
    for name in ours:
        close(ours[name], theirs[name], name)  # bfloat16 outputs
    backward_both(ours, theirs)
    compare_grads(g, t)  # float32 gradients of the float32 leaves
    assert all(v.dtype == F32 for v in arrays.values())


def _bf16(a):
    return torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16).double()


def _bias_cases():
    """(name, gingham op, float64 op on bf16-rounded inputs, arrays): a product and a bias."""
    linear = (lambda x, w, b: F.linear(x, w, b), TF.linear,
              dict(x=rand(48, 192), w=rand(40, 192, seed=1) * 0.1, b=rand(40, seed=2)))
    conv = (lambda x, w, b: F.conv2d(x, w, b, padding=1),
            lambda x, w, b: TF.conv2d(x, w, b, padding=1),
            dict(x=rand(2, 16, 6, 6), w=rand(24, 16, 3, 3, seed=1) * 0.1, b=rand(24, seed=2)))
    transposed = (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
                  lambda x, w, b: TF.conv_transpose2d(x, w, b, stride=2),
                  dict(x=rand(2, 16, 5, 5), w=rand(16, 24, 1, 1, seed=1), b=rand(24, seed=2)))
    return {"linear": linear, "conv2d": conv, "conv_transpose2d-stride2": transposed}


@pytest.mark.parametrize("case", sorted(_bias_cases()))
def test_bias_is_rounded_once_with_the_product(device, case):
    """Under autocast a layer's bias meets the product in the float32 accumulator and the
    bfloat16 result is rounded once, as PyTorch's addmm and convolutions round it. Adding the
    bias to the rounded product (what gingham did before) differs from that in about a third
    of the outputs here; the fp32 summation order may move a rare value by one step. The
    stride-2 1x1 transposed convolution reaches only a quarter of its outputs: the others
    are the bias alone."""
    op, reference, arrays = _bias_cases()[case]
    ours = {k: tensor(v, device=device) for k, v in arrays.items()}
    with gingham.autocast():
        got = op(ours["x"], ours["w"], ours["b"])
    assert got.dtype == BF16
    got = got.numpy().astype(np.float32)
    exact = reference(*(_bf16(arrays[k]) for k in ("x", "w", "b")))
    once = exact.float().to(torch.bfloat16).float().numpy()
    product = reference(_bf16(arrays["x"]), _bf16(arrays["w"]), None)
    twice = (product.float().to(torch.bfloat16).double() + _bf16(arrays["b"]).reshape(
        (-1,) + (1,) * (product.ndim - 2))).float().to(torch.bfloat16).float().numpy()
    assert np.mean(twice != once) > 0.05  # the data tells the two roundings apart
    assert np.mean(got != once) < 0.01, (case, np.mean(got != once), np.mean(got != twice))


def test_conv_transpose2d_under_autocast(device):
    arrays = dict(x=rand(2, 4, 5, 5), w=rand(4, 3, 3, 3, seed=1), b=rand(3, seed=2))
    g, t = leaves(arrays, device)
    with gingham.autocast():
        ours = dict(y=F.conv_transpose2d(g["x"], g["w"], g["b"], stride=2, padding=1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = dict(y=TF.conv_transpose2d(t["x"], t["w"], t["b"], stride=2, padding=1))
    close(ours["y"], theirs["y"], "conv_transpose2d")
    backward_both(ours, theirs)
    compare_grads(g, t)


def test_convnet_block(device):
    """conv - batch norm (training) - relu - max pool - flatten - linear - cross entropy:
    every intermediate's dtype as torch's autocast gives it, the loss, the running statistics
    and every parameter's gradient. (The conv has no bias: batch norm cancels it, so its
    gradient is zero plus rounding noise.)"""
    arrays = dict(img=rand(4, 3, 8, 8), k=rand(6, 3, 3, 3, seed=1) * 0.3,
                  gamma=1 + 0.1 * rand(6, seed=3),
                  beta=0.1 * rand(6, seed=4), w=rand(5, 96, seed=5) * 0.1,
                  b=rand(5, seed=6) * 0.1)
    labels = np.array([0, 3, 1, 4])
    g, t = leaves(arrays, device)
    g_stats = [tensor(np.zeros(6, np.float32), device=device),
               tensor(np.ones(6, np.float32), device=device)]
    t_stats = [torch.zeros(6), torch.ones(6)]

    with gingham.autocast("bfloat16"):
        conv = F.conv2d(g["img"], g["k"], padding=1)
        bn, mean, var = F.batch_norm(conv, *g_stats, g["gamma"], g["beta"], training=True)
        pooled = F.max_pool2d(F.relu(bn), 2)
        logits = F.linear(pooled.reshape(4, -1), g["w"], g["b"])
        loss = F.cross_entropy(logits, tensor(labels, device=device))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t_conv = TF.conv2d(t["img"], t["k"], padding=1)
        t_bn = TF.batch_norm(t_conv, *t_stats, t["gamma"], t["beta"], training=True)
        t_pooled = TF.max_pool2d(TF.relu(t_bn), 2)
        t_logits = TF.linear(t_pooled.flatten(1), t["w"], t["b"])
        t_loss = TF.cross_entropy(t_logits, torch.tensor(labels))
    realize([conv, bn, pooled, logits, loss, mean, var])
    for name, ours, theirs in (("conv", conv, t_conv), ("bn", bn, t_bn),
                               ("pooled", pooled, t_pooled), ("logits", logits, t_logits),
                               ("loss", loss, t_loss), ("running_mean", mean, t_stats[0]),
                               ("running_var", var, t_stats[1])):
        close(ours, theirs, name)
    loss.backward()
    t_loss.backward()
    compare_grads(g, t)


def test_functional_ops_on_bfloat16_data(device):
    """The ops a network applies to autocast's bfloat16 activations, outside autocast (their
    own dtype rules): values and gradients against torch on the same bfloat16 data."""
    x32 = rand(2, 4, 6, 6)
    g_x = tensor(x32, device=device, requires_grad=True)
    t_x = torch.tensor(x32, requires_grad=True)
    xb, t_xb = g_x.astype(BF16), t_x.to(torch.bfloat16)
    ln_w = tensor(np.ones(6, np.float32), device=device)
    ours = dict(relu=F.relu(xb), max_pool=F.max_pool2d(xb, 3, 2, 1),
                avg_pool=F.avg_pool2d(xb, 3, 2, 1, count_include_pad=False),
                add=xb + xb * 0.5, flat=xb.reshape(2, -1),
                softmax=F.softmax(xb, 1), layer_norm=F.layer_norm(xb, (6,), ln_w),
                gelu=F.gelu(xb), sigmoid=F.sigmoid(xb),
                eval_bn=F.batch_norm(xb, tensor(np.zeros(4, np.float32), device=device),
                                     tensor(np.ones(4, np.float32) * 2, device=device)),
                dropout_none=F.dropout(xb, 0.5, training=False))
    theirs = dict(relu=TF.relu(t_xb), max_pool=TF.max_pool2d(t_xb, 3, 2, 1),
                  avg_pool=TF.avg_pool2d(t_xb, 3, 2, 1, count_include_pad=False),
                  add=t_xb + t_xb * 0.5, flat=t_xb.flatten(1),
                  softmax=TF.softmax(t_xb, 1), layer_norm=TF.layer_norm(t_xb, (6,), torch.ones(6)),
                  gelu=TF.gelu(t_xb), sigmoid=torch.sigmoid(t_xb),
                  eval_bn=TF.batch_norm(t_xb, torch.zeros(4), torch.ones(4) * 2),
                  dropout_none=TF.dropout(t_xb, 0.5, training=False))
    realize(list(ours.values()))
    for name in ours:
        close(ours[name], theirs[name], name)
    backward_both(ours, theirs)
    close(g_x.grad, t_x.grad, "d/dx")


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_max_pool_gradient_of_bfloat16_ties(device, data_format):
    """Rounded to bfloat16 (a step of 2**-7 near 1), values within 0.4% of 1 tie in most
    windows: each window's cotangent reaches one tap, the one PyTorch's max pool picks (the
    first in the window), up to the rounding of a sum. Every tied tap receiving it, as
    gingham's max gradient once did, shifted the gradients through batch norm in a bfloat16
    ResNet block by 2-5%."""
    x32 = 1 + 0.004 * rand(2, 4, 8, 8)
    t_x = torch.tensor(x32, requires_grad=True)
    t_pooled = TF.max_pool2d(t_x.to(torch.bfloat16), 3, 2, 1)
    cotangent = torch.tensor(rand(*t_pooled.shape, seed=1)).to(torch.bfloat16)
    t_pooled.backward(cotangent)
    windows = TF.unfold(t_x.detach().to(torch.bfloat16).float(), 3, padding=1, stride=2)
    windows = windows.reshape(2, 4, 9, -1)
    ties = (windows == windows.max(2, keepdim=True).values).sum(2) > 1
    assert ties.float().mean() > 0.5  # the test is about ties

    nhwc = data_format == "NHWC"
    layout = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if nhwc else (lambda a: a)
    g_x = tensor(layout(x32), device=device, requires_grad=True)
    pooled = F.max_pool2d(g_x.astype(BF16), 3, 2, 1, data_format=data_format)
    weight = tensor(layout(cotangent.float().numpy()), device=device)  # exact in bfloat16
    (pooled.astype(F32) * weight).sum().backward()
    # A tap that wins two (overlapping) windows sums two cotangents: one bfloat16 rounding.
    step = 2.0 ** -7 * float(cotangent.abs().max())
    np.testing.assert_allclose(g_x.grad.numpy(), layout(t_x.grad.numpy()), rtol=2.0 ** -7,
                               atol=step)


def test_dropout_on_bfloat16_keeps_dtype_and_scales(device):
    x = tensor(np.ones((64, 64), np.float32), device=device).astype(BF16)
    y = F.dropout(x, 0.25, seed=3)
    assert y.dtype == BF16
    values = y.numpy().astype(np.float32)
    kept = values != 0
    assert 0.65 < kept.mean() < 0.85
    np.testing.assert_array_equal(values[kept], np.float32(1 / 0.75).astype(BF16))


def test_float32_ops_under_autocast(device):
    """softmax, log_softmax, layer norm, the losses, exp/log/pow/sum/mean cast half data up to
    float32 (PyTorch's CUDA autocast lists); elementwise ops mix by the promotion rules."""
    x32 = rand(3, 5)
    x = tensor(x32, device=device)
    with gingham.autocast():
        h = x @ tensor(np.eye(5, dtype=np.float32), device=device)  # bfloat16
        outs = dict(softmax=F.softmax(h, 1), log_softmax=F.log_softmax(h, 1),
                    layer_norm=F.layer_norm(h, 5), mse=F.mse_loss(h, x), exp=h.exp(),
                    pow=h ** 2, sum=h.sum(), mean=h.mean(0), relu=F.relu(h), add=h + x,
                    max=h.amax(1), same=h * 2.0)
    assert h.dtype == BF16
    expected = dict(softmax=F32, log_softmax=F32, layer_norm=F32, mse=F32, exp=F32, pow=F32,
                    sum=F32, mean=F32, relu=BF16, add=F32, max=BF16, same=BF16)
    assert {k: v.dtype for k, v in outs.items()} == expected
    hb = x32.astype(BF16).astype(np.float32)
    softmax = np.exp(hb - hb.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    np.testing.assert_allclose(outs["softmax"].numpy(), softmax, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs["sum"].numpy(), hb.sum(), rtol=1e-5, atol=1e-5)


def test_autocast_state_nesting_and_dtypes():
    w = tensor(rand(3, 3), device="reference")
    assert gingham.amp.autocast_dtype() is None
    with gingham.autocast("float16"):
        assert (w @ w).dtype == np.float16
        with gingham.autocast(enabled=False):
            assert (w @ w).dtype == F32
        with gingham.amp.autocast("bfloat16"):
            assert (w @ w).dtype == BF16
        assert (w @ w).dtype == np.float16
    assert (w @ w).dtype == F32
    # float64 and integers are never cast, as in PyTorch.
    with gingham.autocast():
        w64 = tensor(rand(3, 3).astype(np.float64), device="reference")
        assert (w64 @ w64).dtype == np.float64

    @gingham.autocast()
    def decorated():
        return (w @ w).dtype

    assert decorated() == BF16
    with pytest.raises(gingham.GinghamError, match="bfloat16' or 'float16"):
        gingham.autocast("float32")


def test_mixed_dtypes_give_clear_errors():
    x = tensor(rand(2, 4), device="reference").astype(BF16)
    w = tensor(rand(3, 4), device="reference")
    with pytest.raises(DTypeError, match="linear: weight is float32 but input is bfloat16.*"
                                         "autocast"):
        F.linear(x, w)
    img = tensor(rand(2, 3, 4, 4), device="reference").astype(np.float16)
    with pytest.raises(DTypeError, match="batch_norm: weight is bfloat16 but input is float16"):
        F.batch_norm(img, None, None, tensor(np.ones(3), device="reference").astype(BF16),
                     training=True)
    others = [d.id for d in list_devices() if d.id != "reference"]
    if others:  # mixed precision does not loosen the device check
        with pytest.raises(gingham.DeviceError, match="batch_norm: weight is on"):
            F.batch_norm(img, None, None, tensor(np.ones(3, np.float32), device=others[0]),
                         training=True)


# -- training: jit, master weights, loss scaling ---------------------------------------------------


def test_jitted_training_under_autocast(device):
    """A few jitted steps of a conv-bn-relu-pool-linear net on the digits under bfloat16
    autocast: the loss falls, parameters, gradients and optimiser state stay float32, and the
    autocast state is part of the trace signature."""
    if device == "reference":
        pytest.skip("training steps are slow in the interpreter; the ops are checked above")
    modules.manual_seed(0)
    nn = modules
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, device=device), nn.BatchNorm2d(
        8, device=device), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10, device=device))
    optimizer = gingham.optim.Adam(model.parameters(), lr=0.02)
    step = training.train_step(model, optimizer)
    images, labels = data.load_digits("train")
    images, labels = images[:64], labels[:64]
    with gingham.autocast("bfloat16"):
        losses = [step(images, labels).item() for _ in range(8)]
    assert step.traces == 1
    assert losses[-1] < 0.5 * losses[0], losses
    params = model.parameters()
    assert all(p.dtype == F32 for p in params)
    assert all(entry["exp_avg"].dtype == F32
               for entry in optimizer.state_dict()["state"].values())
    assert model.layers[1].running_mean.dtype == F32
    float32_loss = step(images, labels)  # outside autocast: another trace, in float32
    assert step.traces == 2 and float32_loss.dtype == F32
    assert np.isfinite(float32_loss.item())


def _scaler_run(device, xs, jitted: bool, move_at: int | None = None):
    """SGD with momentum on one weight vector through a GradScaler; returns, after each step,
    (scale, weights) for gingham and for torch.amp.GradScaler. With ``move_at``, the weight
    starts on another device and moves to ``device`` (Module.to) before that step: the
    optimiser's and the scaler's state follow it."""
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    start = device if move_at is None else ("reference" if device != "reference" else "cpu")
    holder = gingham.nn.Module()
    holder.w = w = tensor(w0, device=start, requires_grad=True)
    optimizer = gingham.optim.SGD([w], lr=0.1, momentum=0.9)
    scaler = gingham.amp.GradScaler(init_scale=8.0, growth_interval=2)

    def step(x):
        loss = (w * x).sum()
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    run = gingham.jit(step) if jitted else step
    tw = torch.tensor(w0, requires_grad=True)
    t_opt = torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    t_scaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    ours, theirs = [], []
    for n, x in enumerate(xs):
        if n == move_at:
            holder.to(device)
        run(tensor(x, device=w.device))
        ours.append((scaler.get_scale(), w.numpy().copy(), scaler.found_inf()))
        t_loss = (tw * torch.tensor(x)).sum()
        t_opt.zero_grad()
        t_scaler.scale(t_loss).backward()
        t_scaler.step(t_opt)
        t_scaler.update()
        theirs.append((t_scaler.get_scale(), tw.detach().numpy().copy()))
    return ours, theirs, run


@pytest.mark.parametrize("jitted, move_at", [(False, None), (True, None), (True, 4)],
                         ids=["eager", "jit", "jit-moved"])
def test_grad_scaler_matches_torch(device, jitted, move_at):
    """Finite steps update; an inf and a NaN gradient skip the step (weights and momentum
    untouched) and halve the scale; two good steps in a row double it — as torch's scaler,
    also when the weight moves to the device mid-run."""
    finite = np.array([1.0, 2.0, -1.0], np.float32)
    xs = [finite, finite, finite, np.array([1.0, np.inf, 0.0], np.float32), finite * 0.5,
          np.array([np.nan, 1.0, 1.0], np.float32), finite, finite]
    ours, theirs, run = _scaler_run(device, xs, jitted, move_at)
    for n, ((scale, w, found), (t_scale, t_w)) in enumerate(zip(ours, theirs)):
        assert scale == t_scale, (n, scale, t_scale)
        np.testing.assert_allclose(w, t_w, rtol=1e-6, atol=1e-6, err_msg=f"step {n}")
        assert found == (not np.isfinite(xs[n]).all())
    assert [s for s, _, _ in ours] == [8.0, 16.0, 16.0, 8.0, 8.0, 4.0, 4.0, 8.0]
    if jitted:  # the skip is a device-side mask, not a Python branch; a move retraces
        assert run.traces == (1 if move_at is None else 2)


def test_float16_training_with_grad_scaler(device):
    """float16 autocast with a GradScaler through nn.training.train_step: the loss falls and
    the weights stay float32; a tiny initial scale grows."""
    if device == "reference":
        pytest.skip("training steps are slow in the interpreter; the scaler is checked above")
    modules.manual_seed(1)
    model = modules.Sequential(modules.Linear(64, 32, device=device), modules.ReLU(),
                               modules.Linear(32, 10, device=device))
    optimizer = gingham.optim.Adam(model.parameters(), lr=0.02)
    scaler = gingham.amp.GradScaler(init_scale=1.0, growth_interval=3)
    step = training.train_step(model, optimizer, scaler=scaler, autocast="float16")
    images, labels = data.load_digits("train")
    x, y = images[:128].reshape(128, -1), labels[:128]
    losses = [step(x, y).item() for _ in range(9)]
    assert step.traces == 1
    assert losses[-1] < 0.5 * losses[0], losses
    assert scaler.get_scale() == 8.0  # three growths, no overflow
    assert all(p.dtype == F32 for p in model.parameters())


def test_grad_mode_autocast_and_traces_belong_to_their_thread():
    # The background tuner builds a layer's program on its own thread while the training
    # thread traces a step inside no_grad / autocast blocks: neither may see the other's.
    import threading

    from gingham.frontend.amp import autocast_dtype
    from gingham.frontend.jit import current_trace
    from gingham.frontend.tensor import is_grad_enabled
    from gingham.tile import dtypes as dt

    seen = {}

    def other_thread():
        seen["grad"], seen["autocast"] = is_grad_enabled(), autocast_dtype()
        seen["trace"] = current_trace()
        w = tensor(np.ones((3, 3), np.float32), device="reference", requires_grad=True)
        with gingham.autocast(enabled=False):
            y = w @ w  # float32: this thread has no autocast block
        seen["y"] = (y.dtype, y.requires_grad)

    @gingham.jit
    def step(x):
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        seen["main trace"] = current_trace() is not None
        return x * 2.0

    with gingham.no_grad(), gingham.autocast("bfloat16"):
        step(np.ones(4, np.float32))
        assert not is_grad_enabled() and dt.dtype_name(autocast_dtype()) == "bfloat16"
    assert seen == {"grad": True, "autocast": None, "trace": None,
                    "y": (np.dtype(np.float32), True), "main trace": True}


def test_autocast_takes_torch_signature_and_device_type(device):
    """``autocast(device_type, dtype=)`` as PyTorch's: a block for another device type
    leaves this device's ops in float32; one for this type (or none) casts them; PyTorch's
    default dtype per type (float16 on CUDA, else bfloat16); gingham's dtype-first spelling
    still works; dtype names as torch's (``gingham.bfloat16``)."""
    kind = device.split(":")[0]
    other = "cuda" if kind != "cuda" else "cpu"
    a = tensor(np.ones((2, 3), np.float32), device=device)
    b = tensor(np.ones((3, 2), np.float32), device=device)
    with gingham.autocast(kind, dtype=gingham.bfloat16):
        assert dt.is_bfloat16((a @ b).dtype)
    with gingham.autocast(other, dtype=gingham.float16):
        assert (a @ b).dtype == np.float32
    with gingham.autocast(gingham.float16):
        assert (a @ b).dtype == np.float16
    assert gingham.autocast("cuda").dtype == np.float16
    assert dt.is_bfloat16(gingham.autocast("cpu").dtype)
    with pytest.raises(gingham.GinghamError, match="neither a device type"):
        gingham.autocast("tpu")
    assert gingham.float is gingham.float32 and gingham.long == np.int64
    assert a.to(gingham.half).dtype == np.float16


# -- a CUDA scaler and autocast where there is no CUDA device: PyTorch warns and disables ------

SAME_CUDA = gingham.cuda.is_available() == torch.cuda.is_available()


def _warnings_of(make):
    """``make()``'s result and the (category, message) of each warning it gave."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = make()
    return made, [(w.category, str(w.message)) for w in caught]


def _kinds(caught):
    """Each warning's category and whether it says the device type is missing and disabled
    (the wording differs: torch names torch_xla, gingham its own device list)."""
    import re

    return [(category, bool(re.search(r"CUDA is not available.*Disabling", message)))
            for category, message in caught]


def _cuda_amp_run(lib, device, make_scaler, make_autocast, device_type="cuda"):
    """Two SGD steps of a linear layer through ``make_scaler()`` and ``make_autocast()``, the
    same code for gingham and torch: what each call gave."""
    gingham.manual_seed(0)
    weight = np.array([[0.5, -1.0, 2.0]], np.float32)
    if lib is gingham:
        w = tensor(weight, device=device, requires_grad=True)
        x = tensor(rand(4, 3), device=device)
    else:  # torch's tensors on the device type gingham's are on, where torch has it
        on = "cuda" if device.startswith("cuda") and torch.cuda.is_available() else "cpu"
        w = torch.tensor(weight, device=on, requires_grad=True)
        x = torch.tensor(rand(4, 3), device=on)
    optimizer = lib.optim.SGD([w], lr=0.1)
    scaler, scaler_warnings = _warnings_of(make_scaler)
    region, autocast_warnings = _warnings_of(make_autocast)
    seen = {"scaler warnings": _kinds(scaler_warnings),
            "autocast warnings": _kinds(autocast_warnings),
            "enabled": scaler.is_enabled(), "scale": scaler.get_scale(),
            "state_dict": scaler.state_dict() if not scaler.is_enabled() else "enabled"}
    for _ in range(2):
        with region:
            seen["autocast on"] = (gingham.amp.is_autocast_enabled() if lib is gingham
                                   else torch.is_autocast_enabled(device_type))
            product = x @ w.t()
            loss = product.float().square().mean()
        optimizer.zero_grad()
        scaled = scaler.scale(loss)
        seen["scale() returns its input"] = scaled is loss
        scaled.backward()
        seen["step"] = scaler.step(optimizer)
        seen["update"] = scaler.update()
    seen["scale after"] = scaler.get_scale()
    seen["matmul dtype"] = str(product.dtype).replace("torch.", "")
    return seen, (w.detach().numpy() if lib is gingham else w.detach().cpu().numpy())


@pytest.mark.skipif(not SAME_CUDA, reason="gingham and torch see CUDA differently here")
@pytest.mark.parametrize("spelling", ["torch.amp", "torch.cuda.amp"])
def test_cuda_scaler_and_autocast_follow_torch_on_cuda_availability(device, spelling):
    """``GradScaler("cuda")`` and ``autocast("cuda")`` (and torch.cuda.amp's spellings): where
    there is no CUDA device, torch warns (``UserWarning``) and disables both: ``scale``
    returns its input, the scale is 1.0, ``step`` just steps, ``update`` does nothing,
    ``state_dict`` is empty, and autocast is off inside the block. gingham, running the same
    code, gives the same warnings, calls and weights (with CUDA: the same as well)."""
    results = {}
    for lib in (gingham, torch):
        if spelling == "torch.amp":
            make_scaler = lambda lib=lib: lib.amp.GradScaler("cuda", init_scale=8.0)  # noqa: E731
            make_autocast = lambda lib=lib: lib.autocast("cuda")  # noqa: E731
        else:
            make_scaler = lambda lib=lib: lib.cuda.amp.GradScaler(init_scale=8.0)  # noqa: E731
            make_autocast = lambda lib=lib: lib.cuda.amp.autocast()  # noqa: E731
        results[lib] = _cuda_amp_run(lib, device, make_scaler, make_autocast)
    assert results[gingham][0] == results[torch][0]
    # with CUDA, both autocasts multiply in float16 (accumulating in float32, each its own way)
    tolerance = 1e-2 if results[torch][0]["autocast on"] else 1e-6
    np.testing.assert_allclose(results[gingham][1], results[torch][1], rtol=tolerance,
                               atol=tolerance / 10)
    if not torch.cuda.is_available():
        assert results[torch][0]["scaler warnings"][-1] == (UserWarning, True)  # not vacuous


def test_cpu_scaler_and_autocast_keep_working():
    """``GradScaler("cpu")`` and ``autocast("cpu")`` stay enabled, without a warning, as
    torch's: the loss is scaled (by 8, then grown), autocast casts the CPU matmul."""
    results = {}
    for lib in (gingham, torch):
        make_scaler = lambda lib=lib: lib.amp.GradScaler("cpu", init_scale=8.0,  # noqa: E731
                                                         growth_interval=1)
        make_autocast = lambda lib=lib: lib.autocast("cpu")  # noqa: E731
        results[lib] = _cuda_amp_run(lib, "cpu", make_scaler, make_autocast, "cpu")
    ours, theirs = results[gingham][0], results[torch][0]
    assert ours == theirs
    assert ours["enabled"] and ours["scale after"] == 32.0 and ours["autocast on"]
    np.testing.assert_allclose(results[gingham][1], results[torch][1], rtol=1e-2)


def test_disabled_scaler_state_dict_as_torch():
    """A disabled scaler's ``state_dict`` is empty and its ``load_state_dict`` a no-op; an
    enabled one refuses an empty state dict (torch's RuntimeError, gingham's
    StateDictError)."""
    for lib in (gingham, torch):
        disabled = lib.amp.GradScaler("cpu", enabled=False)
        assert disabled.state_dict() == {} and disabled.get_scale() == 1.0
        disabled.load_state_dict({"scale": 4.0})
        assert disabled.get_scale() == 1.0
        with pytest.raises((RuntimeError, gingham.errors.StateDictError), match="empty"):
            lib.amp.GradScaler("cpu").load_state_dict({})
