"""gingham.fft and gingham.signal against torch.fft, torch.stft / istft, torch's windows and
torch.special.i0 (CPU), forward values and gradients, on every device.

Complex values are (real, imag) pairs on gingham's side; on PyTorch's they are complex tensors
made from the same two real leaves (``torch.complex(re, im)``), so both sides differentiate
the same real loss with respect to the same real inputs. Each test puts several transforms in
one forward program and one gradient program per device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gingham
from gingham import fft as gfft
from gingham import signal as gsignal
from gingham.frontend.tensor import ShapeError, realize, tensor

TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def _flat(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


def _torch_flat(result) -> list:
    if isinstance(result, tuple):
        return [part for r in result for part in _torch_flat(r)]
    return [result.real, result.imag] if result.is_complex() else [result]


def compare(device: str, arrays: dict, cases: dict) -> None:
    """Every ``name: (ours(**gingham leaves), theirs(**torch leaves))`` of ``cases``: the
    outputs (a complex torch output against a (real, imag) pair), then the gradients of one
    random-weighted sum of all of them with respect to every input; one program each."""
    g_in = {k: tensor(v, device=device, requires_grad=True) for k, v in arrays.items()}
    t_in = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
    g_out = {name: _flat(ours(**g_in)) for name, (ours, _) in cases.items()}
    t_out = {name: _torch_flat(theirs(**t_in)) for name, (_, theirs) in cases.items()}
    realize([o for outs in g_out.values() for o in outs])
    rng = np.random.default_rng(3)
    g_loss, t_loss = 0, 0
    for name in cases:
        assert len(g_out[name]) == len(t_out[name]), name
        for i, (got, want) in enumerate(zip(g_out[name], t_out[name])):
            assert got.shape == tuple(want.shape), f"{name}[{i}]: {got.shape} {want.shape}"
            np.testing.assert_allclose(got.numpy(), want.detach().numpy(),
                                       err_msg=f"{name}[{i}]", **TOLERANCE)
            weight = rng.standard_normal(got.shape).astype(np.float32)
            g_loss = g_loss + (got * tensor(weight, device=device)).sum()
            t_loss = t_loss + (want * torch.tensor(weight)).sum()
    g_loss.backward()
    t_loss.backward()
    realize([g_in[k].grad for k in arrays])
    for k in arrays:
        np.testing.assert_allclose(g_in[k].grad.numpy(), t_in[k].grad.numpy(),
                                   err_msg=f"d/d{k}", **TOLERANCE)


def test_transforms_against_torch(device):
    arrays = {"re": rand(6, 10), "im": rand(6, 10, seed=1), "x": rand(4, 6, 5, seed=2)}

    def z(re, im):
        return torch.complex(re, im)

    cases = {
        "fft_pad_dim0_ortho": (lambda re, im, x: gfft.fft((re, im), n=8, dim=0, norm="ortho"),
                               lambda re, im, x: torch.fft.fft(z(re, im), n=8, dim=0,
                                                               norm="ortho")),
        "fft_real": (lambda re, im, x: gfft.fft(x, dim=1),
                     lambda re, im, x: torch.fft.fft(x, dim=1)),
        "ifft_trim_forward": (lambda re, im, x: gfft.ifft((re, im), n=7, norm="forward"),
                              lambda re, im, x: torch.fft.ifft(z(re, im), n=7, norm="forward")),
        "rfft_pad": (lambda re, im, x: gfft.rfft(x, n=9, dim=-1),
                     lambda re, im, x: torch.fft.rfft(x, n=9, dim=-1)),
        "rfft_even_dim1": (lambda re, im, x: gfft.rfft(x, dim=1),
                           lambda re, im, x: torch.fft.rfft(x, dim=1)),
        "irfft_default_n": (lambda re, im, x: gfft.irfft((re, im)),
                            lambda re, im, x: torch.fft.irfft(z(re, im))),
        "irfft_odd_ortho": (lambda re, im, x: gfft.irfft((re, im), n=11, dim=0, norm="ortho"),
                            lambda re, im, x: torch.fft.irfft(z(re, im), n=11, dim=0,
                                                              norm="ortho")),
        "irfft_real_input": (lambda re, im, x: gfft.irfft(x, n=6),
                             lambda re, im, x: torch.fft.irfft(x, n=6)),
        "fft2": (lambda re, im, x: gfft.fft2((re, im)),
                 lambda re, im, x: torch.fft.fft2(z(re, im))),
        "ifftn_s": (lambda re, im, x: gfft.ifftn(x, s=(5, 4), dim=(0, 2)),
                    lambda re, im, x: torch.fft.ifftn(x, s=(5, 4), dim=(0, 2))),
        "rfft2_irfft2": (lambda re, im, x: gfft.irfft2(gfft.rfft2(x), s=(6, 5)),
                         lambda re, im, x: torch.fft.irfft2(torch.fft.rfft2(x), s=(6, 5))),
        "fftshift": (lambda re, im, x: gfft.ifftshift(gfft.fftshift((re, im), dim=1)[0], dim=0),
                     lambda re, im, x: torch.fft.ifftshift(torch.fft.fftshift(re, dim=1), dim=0)),
    }
    compare(device, arrays, cases)


@pytest.mark.parametrize("name", ["hann", "hamming", "blackman", "bartlett", "kaiser"])
def test_windows(device, name):
    ours, theirs = getattr(gsignal, f"{name}_window"), getattr(torch, f"{name}_window")
    for length in (0, 1, 2, 7, 16):
        for periodic in (True, False):
            got = ours(length, periodic, device=device)
            want = theirs(length, periodic)
            assert got.shape == tuple(want.shape) and got.dtype == np.float32
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6,
                                       err_msg=f"{name}({length}, {periodic})")
    if name == "hamming":
        np.testing.assert_allclose(ours(9, True, 0.5, 0.4, device=device).numpy(),
                                   theirs(9, True, 0.5, 0.4).numpy(), atol=1e-6)
    if name == "kaiser":
        np.testing.assert_allclose(ours(9, False, 5.0, device=device).numpy(),
                                   theirs(9, False, 5.0).numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="window_length"):
        ours(-1)


@pytest.mark.filterwarnings("ignore:A window was not provided")  # torch's note on rectangles
def test_stft_istft_against_torch(device):
    arrays = {"signal": rand(2, 60), "window": rand(12, seed=4).__abs__() + 0.5}
    hann = torch.hann_window(16).numpy()

    def spectrum(signal, window, lib, **kw):
        return lib.stft(signal, 16, 5, 12, window, **kw)

    def round_trip(lib, signal, window, **kw):
        win = tensor(hann, device=device) if lib is gsignal else torch.tensor(hann)
        if lib is gsignal:
            spec = gsignal.stft(signal, 16, 4, window=win)
        else:
            spec = torch.stft(signal, 16, 4, window=win, return_complex=True)
        return lib.istft(spec, 16, 4, window=win, **kw)

    cases = {
        "stft_window_padded": (lambda signal, window: spectrum(signal, window, gsignal),
                               lambda signal, window: spectrum(signal, window, torch,
                                                               return_complex=True)),
        "stft_one_normalized_twosided": (
            lambda signal, window: gsignal.stft(signal[1], 8, 3, center=True,
                                                pad_mode="constant", normalized=True,
                                                onesided=False),
            lambda signal, window: torch.stft(signal[1], 8, 3, center=True, pad_mode="constant",
                                              normalized=True, onesided=False,
                                              return_complex=True)),
        "stft_uncentred_real_form": (
            lambda signal, window: gsignal.stft(signal, 10, 7, center=False,
                                                return_complex=False),
            lambda signal, window: torch.view_as_real(torch.stft(
                signal, 10, 7, center=False, return_complex=True))),
        "istft_windowed": (
            lambda signal, window: gsignal.istft(spectrum(signal, window, gsignal), 16, 5, 12,
                                                 window),
            lambda signal, window: torch.istft(spectrum(signal, window, torch,
                                                        return_complex=True), 16, 5, 12,
                                               window)),
        "istft_length": (lambda signal, window: round_trip(gsignal, signal, window, length=63),
                         lambda signal, window: round_trip(torch, signal, window, length=63)),
        "istft_twosided_uncentred": (
            lambda signal, window: gsignal.istft(gsignal.stft(
                signal, 8, 3, center=False, onesided=False), 8, 3, center=False),
            lambda signal, window: torch.istft(torch.stft(
                signal, 8, 3, center=False, onesided=False, return_complex=True), 8, 3,
                center=False)),
    }
    compare(device, arrays, cases)


def test_i0_against_torch(device):
    values = np.concatenate([np.linspace(-12, 12, 37), [0.0, 3.74, 3.76]]).astype(np.float32)
    x = tensor(values, device=device, requires_grad=True)
    expected = torch.tensor(values, requires_grad=True)
    got = gsignal.i0(x)
    got.sum().backward()
    torch.special.i0(expected).sum().backward()
    np.testing.assert_allclose(got.numpy(), torch.special.i0(expected).detach().numpy(),
                               rtol=1e-6 * 5)
    # the derivative of the polynomial fit against I1: looser than the fit itself
    np.testing.assert_allclose(x.grad.numpy(), expected.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_bad_arguments(device):
    x = tensor(rand(3, 8), device=device)
    with pytest.raises(ValueError, match="norm"):
        gfft.fft(x, norm="both")
    with pytest.raises(ValueError, match="number of data points"):
        gfft.rfft(x, n=0)
    with pytest.raises(ShapeError, match="different shapes"):
        gfft.ifft((x, x[:2]))
    with pytest.raises(TypeError, match="pair"):
        gfft.fft((x, x, x))
    with pytest.raises(IndexError):
        gfft.fft(x, dim=2)
    with pytest.raises(ValueError, match="unique"):
        gfft.fftn(x, dim=(1, -1))
    with pytest.raises(ShapeError, match="win_length"):
        gsignal.stft(x, 8, 2, window=gsignal.hann_window(6, device=device))
    with pytest.raises(ValueError, match="n_fft"):
        gsignal.stft(x, 20, 2, center=False)
    with pytest.raises(ValueError, match="return_complex"):
        gsignal.istft(gsignal.stft(x, 4, 2), 4, 2, return_complex=True)
    assert gingham.fft is gfft and gingham.signal is gsignal
