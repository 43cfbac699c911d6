"""Winograd F(2x2, 3x3) convolutions (``GINGHAM_CONV_ALGORITHM=winograd``) against PyTorch CPU's
conv2d, forward and gradients, on every device; which convolutions take that path, under
``winograd`` and under ``auto`` (the default); the setting's errors.

Tolerances are test_functional.py's float32 ones (rtol 1e-4 / atol 1e-4): the transforms
add and subtract a tile's values and halve the filter's, so the result differs from a direct
sum by rounding only (measured relative errors 1e-7 to 4e-7 at these sizes).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import gingham
import gingham.nn.functional as F
from gingham.config import ConfigError, get_config
from gingham.frontend import optim
from gingham.frontend.jit import jit
from gingham.nn import winograd

from test_functional import compare, rand  # tests/nn (the test directory is on sys.path)


@pytest.fixture
def winograd_calls(monkeypatch) -> list[tuple]:
    """Select the Winograd algorithm and record the shapes of each convolution built by it
    (the real function runs; the list shows which convolutions took the path)."""
    return recorded_calls(monkeypatch, "winograd")


def recorded_calls(monkeypatch, algorithm: str) -> list[tuple]:
    """Select ``algorithm`` and record each convolution built by Winograd."""
    monkeypatch.setenv("GINGHAM_CONV_ALGORITHM", algorithm)
    calls: list[tuple] = []
    build = winograd.conv2d_3x3

    def recording(x, weight, bias, channels_last):
        calls.append((x.shape, weight.shape, channels_last))
        return build(x, weight, bias, channels_last)

    monkeypatch.setattr(winograd, "conv2d_3x3", recording)
    return calls


def nhwc(t):
    """NCHW -> NHWC for a torch or gingham tensor."""
    return t.permute(0, 2, 3, 1) if isinstance(t, torch.Tensor) else t.transpose(0, 2, 3, 1)


def test_winograd_matches_pytorch(device, winograd_calls):
    """Odd and even image sizes (a last tile half outside the output), with and without
    bias, NCHW and NHWC; outputs and the gradients of data, weights and bias."""
    arrays = dict(x=rand(2, 16, 7, 5), w=rand(8, 16, 3, 3, seed=1), b=rand(8, seed=2),
                  e=rand(1, 24, 6, 8, seed=3), we=rand(16, 24, 3, 3, seed=4))

    def run(f, x, w, b, e, we):
        if f is TF:
            odd_nhwc = nhwc(TF.conv2d(x, w, b, padding=1))
        else:
            odd_nhwc = F.conv2d(nhwc(x), w, b, padding=1, data_format="NHWC")
        return {"odd": f.conv2d(x, w, b, padding=1),
                "even_no_bias": f.conv2d(e, we, None, padding=(1, 1)),
                "odd_nhwc": odd_nhwc}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))
    assert sorted(call[2] for call in winograd_calls) == [False, False, True]


def test_other_convolutions_stay_direct(device, winograd_calls):
    """A strided and a few-channel convolution are built directly even when Winograd is
    selected, and still agree with PyTorch."""
    arrays = dict(x=rand(2, 16, 6, 6), w=rand(4, 16, 3, 3, seed=1), s=rand(2, 3, 6, 6, seed=4),
                  ws=rand(4, 3, 3, 3, seed=5))

    def run(f, x, w, s, ws):
        return {"strided": f.conv2d(x, w, stride=2, padding=1),
                "stem": f.conv2d(s, ws, padding=1)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))
    assert winograd_calls == []


@pytest.mark.parametrize("case", ["stride", "dilation", "groups", "padding", "padding_uneven",
                                  "kernel", "channels", "dtype"])
def test_which_convolutions_apply(case):
    """Only float32, 3x3, stride-1, undilated, ungrouped, padding-1 convolutions of at least
    ``MIN_CHANNELS`` input channels."""
    x = gingham.tensor(rand(1, 16, 4, 4))
    w = gingham.tensor(rand(8, 16, 3, 3))
    args = dict(x=x, weight=w, stride=(1, 1), dilation=(1, 1), groups=1, left=(1, 1),
                right=(1, 1))
    assert winograd.applies(**args)
    change = {"stride": dict(stride=(1, 2)), "dilation": dict(dilation=(2, 2)),
              "groups": dict(groups=2, weight=gingham.tensor(rand(8, 8, 3, 3))),
              "padding": dict(left=(0, 0), right=(0, 0)), "padding_uneven": dict(right=(1, 2)),
              "kernel": dict(weight=gingham.tensor(rand(8, 16, 3, 5))),
              "channels": dict(x=gingham.tensor(rand(1, 8, 4, 4)),
                               weight=gingham.tensor(rand(8, 8, 3, 3))),
              "dtype": dict(x=gingham.tensor(rand(1, 16, 4, 4, dtype=np.float64)))}[case]
    assert not winograd.applies(**{**args, **change})


def test_half_precision_stays_direct(winograd_calls):
    """Under autocast the convolution computes in bfloat16 (the tensor cores' dtype on GPUs):
    the transforms would round in 16 bits, so it stays direct."""
    x = gingham.tensor(rand(2, 16, 4, 4))
    w = gingham.tensor(rand(8, 16, 3, 3, seed=1))
    with gingham.autocast("bfloat16"):
        y = F.conv2d(x, w, padding=1)
    expected = TF.conv2d(torch.tensor(rand(2, 16, 4, 4)), torch.tensor(rand(8, 16, 3, 3, seed=1)),
                         padding=1).numpy()
    np.testing.assert_allclose(y.astype(np.float32).numpy(), expected, rtol=5e-2, atol=5e-2)
    assert winograd_calls == []


def test_jitted_training_steps_match_pytorch(device, winograd_calls):
    """Three SGD steps of a two-convolution network through ``gingham.jit`` (the path a model
    takes), against the same steps in PyTorch: losses and final weights."""
    x0, y0 = rand(4, 16, 6, 6, seed=10), rand(4, 8, 6, 6, seed=11)
    w1, w2 = rand(16, 16, 3, 3, seed=12) * 0.2, rand(8, 16, 3, 3, seed=13) * 0.2
    params = [gingham.tensor(w, device=device, requires_grad=True) for w in (w1, w2)]
    torch_params = [torch.tensor(w, requires_grad=True) for w in (w1, w2)]
    opt = optim.SGD(params, lr=0.05, momentum=0.9)
    torch_opt = torch.optim.SGD(torch_params, lr=0.05, momentum=0.9)

    @jit
    def step(x, y):
        hidden = F.relu(F.conv2d(x, params[0], padding=1))
        loss = ((F.conv2d(hidden, params[1], padding=1) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    x, y = gingham.tensor(x0, device=device), gingham.tensor(y0, device=device)
    for _ in range(3):
        loss = step(x, y).item()
        hidden = TF.relu(TF.conv2d(torch.tensor(x0), torch_params[0], padding=1))
        torch_loss = ((TF.conv2d(hidden, torch_params[1], padding=1) - torch.tensor(y0)) ** 2
                      ).mean()
        torch_opt.zero_grad()
        torch_loss.backward()
        torch_opt.step()
        np.testing.assert_allclose(loss, torch_loss.item(), rtol=1e-4)
    for ours, theirs in zip(params, torch_params):
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert len(winograd_calls) == 2  # traced once: both convolutions, once each


def test_auto_builds_channels_last_layers_with_enough_channels(device, monkeypatch):
    """``auto`` (the default) builds by Winograd the channels-last convolutions with at least
    the device kind's threshold of input and output channels, and no others; the result is
    right either way."""
    monkeypatch.delenv("GINGHAM_CONV_ALGORITHM", raising=False)
    assert get_config().conv_algorithm == "auto"
    calls = recorded_calls(monkeypatch, "auto")
    least = winograd.auto_min_channels(device, np.float32, True)
    # NCHW's threshold is higher where there is one: the layer of ``least`` channels in NCHW
    # stays direct.
    assert (winograd.auto_min_channels(device, np.float32, False) or 10**6) > (least or 0)
    c = least or 64
    arrays = dict(x=rand(1, c, 5, 4), w=rand(c, c, 3, 3, seed=1) * 0.1,
                  wf=rand(c, c - 1, 3, 3, seed=2) * 0.1, xf=rand(1, c - 1, 5, 4, seed=3))

    def run(f, x, w, wf, xf):
        if f is TF:
            enough, fewer = (nhwc(TF.conv2d(x, w, padding=1)),
                             nhwc(TF.conv2d(xf, wf, padding=1)))
        else:
            enough = F.conv2d(nhwc(x), w, padding=1, data_format="NHWC")
            fewer = F.conv2d(nhwc(xf), wf, padding=1, data_format="NHWC")
        return {"enough": enough, "fewer": fewer, "nchw": f.conv2d(x, w, padding=1)}

    compare(device, arrays, lambda **a: run(F, **a), lambda **a: run(TF, **a))
    # Only the channels-last convolution with enough channels, on a kind with a threshold.
    assert calls == ([((1, 5, 4, c), (c, c, 3, 3), True)] if least else [])


def test_auto_builds_wide_nchw_layers_by_winograd_where_the_rule_says(device, monkeypatch):
    """On a GPU (a kind with an NCHW threshold) ``auto`` builds an NCHW layer by Winograd from
    that many channels on, and one channel fewer directly; both match PyTorch."""
    least = winograd.auto_min_channels(device, np.float32, False)
    if least is None:
        pytest.skip(f"{device}: NCHW convolutions stay direct on this kind of device")
    calls = recorded_calls(monkeypatch, "auto")
    arrays = dict(x=rand(1, least, 4, 3), w=rand(least, least, 3, 3, seed=1) * 0.05,
                  xf=rand(1, least - 1, 4, 3, seed=2), wf=rand(least, least - 1, 3, 3) * 0.05)
    compare(device, arrays,
            lambda x, w, xf, wf: {"enough": F.conv2d(x, w, padding=1),
                                  "fewer": F.conv2d(xf, wf, padding=1)},
            lambda x, w, xf, wf: {"enough": TF.conv2d(x, w, padding=1),
                                  "fewer": TF.conv2d(xf, wf, padding=1)})
    assert calls == [((1, least, 4, 3), (least, least, 3, 3), False)]


def test_auto_stays_direct_in_half_precision_and_nchw_by_rule():
    assert winograd.auto_min_channels("cpu", np.float16, True) is None
    assert winograd.auto_min_channels("cpu", np.float32, False) is None


def test_a_cpus_opencl_driver_follows_the_cpu_rule():
    """A CPU's OpenCL driver (PoCL) runs the CPU's schedules, Winograd's transforms included
    (the loop nest), so ``auto`` keys its threshold on the device kind, not the backend."""
    from gingham.devices import list_devices

    drivers = [d.id for d in list_devices() if d.info.kind == "cpu" and d.info.dialect == "opencl"]
    if not drivers:
        pytest.skip("no OpenCL driver of a CPU in this run")
    for device in drivers:
        assert winograd.auto_min_channels(device, np.float32, True) == \
            winograd.auto_min_channels("cpu", np.float32, True) == 128
        assert winograd.auto_min_channels(device, np.float32, False) is None


def test_the_algorithm_is_a_config_value(monkeypatch):
    monkeypatch.delenv("GINGHAM_CONV_ALGORITHM", raising=False)
    assert get_config().conv_algorithm == "auto"
    monkeypatch.setenv("GINGHAM_CONV_ALGORITHM", "Winograd")
    assert get_config().conv_algorithm == "winograd"
    monkeypatch.setenv("GINGHAM_CONV_ALGORITHM", "fft")
    with pytest.raises(ConfigError, match="GINGHAM_CONV_ALGORITHM='fft' is not one of auto, "
                                          "direct, winograd"):
        get_config()
