"""ONNX converters of the signal ops: DFT (opset 17's axis attribute and opset 20's axis
input), STFT, HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix. ONNX holds a
complex value as a last dim of 2 (real, imaginary; a real one has a last dim of 1); the
transforms map onto :mod:`gingham.fft` and :mod:`gingham.signal`, whose pairs are those two
halves. The windows and the mel filters depend on sizes only, so they are host constants.
Imported once by :mod:`gingham.onnx.ops`, which registers them.

    @converter("HannWindow")
    def _hann_window(node: Node):
        return _window(node, "hann")
"""

from __future__ import annotations

import numpy as np

from .. import fft as gfft
from .. import signal as gsignal
from ..fft import _table
from ..frontend import tensor as T
from ..frontend.tensor import Tensor
from .ops import HOST_INPUTS, Node, _axis, converter

# DFT's length (and opset 20's axis), STFT's step and frame length, the windows' sizes and
# MelWeightMatrix's five scalars decide shapes: known when the graph is traced.
HOST_INPUTS.update({"DFT": (1, 2), "STFT": (1, 3), "HannWindow": (0,), "HammingWindow": (0,),
                    "BlackmanWindow": (0,), "MelWeightMatrix": (0, 1, 2, 3, 4)})


def _output_dtype(node: Node) -> np.dtype:
    from onnx.helper import tensor_dtype_to_np_dtype

    return np.dtype(tensor_dtype_to_np_dtype(node.attr("output_datatype", 1)))


def _scalar(node: Node, position: int, what: str):
    value = node.constant(position, what)
    return None if value is None else value.reshape(-1)[0].item()


def _split_complex(node: Node, x: Tensor) -> tuple[Tensor, Tensor | None]:
    """ONNX's ``[..., 1]`` (real) or ``[..., 2]`` (complex) as ``(real, imag or None)``."""
    if x.shape[-1] not in (1, 2):
        raise node.fail(f"the last dim of its input must be 1 (real) or 2 (complex), not "
                        f"{x.shape[-1]} (shape {x.shape})")
    real = x[..., 0]
    return real, (x[..., 1] if x.shape[-1] == 2 else None)


@converter("DFT")
def _dft(node: Node):
    x = node.tensor(0)
    length = _scalar(node, 1, "dft_length")
    if node.opset >= 20:
        axis = _scalar(node, 2, "axis")
        axis = -2 if axis is None else int(axis)
    else:
        axis = int(node.attr("axis", 1))
    axis = _axis(axis, x.ndim)
    if not 0 <= axis < x.ndim - 1:
        raise node.fail(f"axis {axis} must name a dim of the signal, not its last (complex) "
                        f"dim, for an input of shape {x.shape}")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    real, imag = _split_complex(node, x)
    pair = real if imag is None else (real, imag)
    n = None if length is None else int(length)
    if inverse and onesided:  # irfft: a real signal, its last dim 1
        return gfft.irfft(pair, n, axis).unsqueeze(-1)
    if inverse:
        result = gfft.ifft(pair, n, axis)
    elif onesided and imag is None:
        result = gfft.rfft(real, n, axis)
    else:
        result = gfft.fft(pair, n, axis)
        if onesided:
            kept = result.real.shape[axis] // 2 + 1
            result = gfft.Complex(*(part.narrow(axis, 0, kept) for part in result))
    return T.stack(list(result), -1)


@converter("STFT")
def _stft(node: Node):
    """Frames ``frame_step`` apart of ``window``'s length, windowed, each transformed over
    ``frame_length`` points (ONNX does not centre or pad): ``[batch, frames, bins, 2]``."""
    x = node.tensor(0)
    step = int(_scalar(node, 1, "frame_step"))
    window = node.input(2)
    frame_length = _scalar(node, 3, "frame_length")
    real, imag = _split_complex(node, x)
    if imag is not None:
        raise node.fail("a complex signal is not supported (real signals only)")
    if frame_length is None:
        frame_length = real.shape[-1] if window is None else window.shape[0]
    frame_length = int(frame_length)
    size = frame_length if window is None else window.shape[0]
    onesided = bool(node.attr("onesided", 1))
    rows = frame_length // 2 + 1 if onesided else frame_length
    frames = 1 + (real.shape[-1] - frame_length) // step
    parts = []
    for part in ("cos", "sin"):
        matrix = _table(real, rows, size, frame_length, part, False, 1.0)
        if window is not None:
            matrix = matrix * node.lift(window).astype(real.dtype).reshape(1, size)
        spectrum = gsignal.frames_contraction(real, matrix, step, frames)  # [batch, bins, f]
        parts.append(spectrum.transpose(1, 2))
    return T.stack(parts, -1)


def _window(node: Node, name: str, **params: float) -> np.ndarray:
    size = int(_scalar(node, 0, "size"))
    periodic = bool(node.attr("periodic", 1))
    return gsignal.window_values(name, size, periodic, **params).astype(_output_dtype(node))


@converter("HannWindow")
def _hann_window(node: Node):
    return _window(node, "hann")


@converter("HammingWindow")
def _hamming_window(node: Node):
    # ONNX's Hamming coefficients are 25/46 and 21/46 (PyTorch's default 0.54 and 0.46 round
    # them)
    return _window(node, "hamming", alpha=25.0 / 46.0, beta=21.0 / 46.0)


@converter("BlackmanWindow")
def _blackman_window(node: Node):
    return _window(node, "blackman")


@converter("MelWeightMatrix")
def _mel_weight_matrix(node: Node):
    bins, dft_length, rate, low, high = (_scalar(node, k, what) for k, what in enumerate(
        ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")))
    return mel_weight_matrix(int(bins), int(dft_length), rate, low,
                             high).astype(_output_dtype(node))


def mel_weight_matrix(num_mel_bins: int, dft_length: int, sample_rate: float,
                      lower_edge_hertz: float, upper_edge_hertz: float) -> np.ndarray:
    """``[dft_length // 2 + 1, num_mel_bins]`` triangular filters whose corners are evenly
    spaced on the mel scale (``2595 log10(1 + f / 700)``) between the edges, each corner
    rounded down to a DFT bin, as ONNX's ``MelWeightMatrix`` defines them."""
    low = 2595.0 * np.log10(1.0 + lower_edge_hertz / 700.0)
    high = 2595.0 * np.log10(1.0 + upper_edge_hertz / 700.0)
    mels = low + np.arange(num_mel_bins + 2) * (high - low) / (num_mel_bins + 2)
    hertz = 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    corners = ((dft_length + 1) * hertz // sample_rate).astype(np.int64)
    weights = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for m in range(num_mel_bins):
        left, centre, right = corners[m:m + 3]
        if centre == left:
            weights[centre, m] = 1.0
        else:
            rising = np.arange(left, centre + 1)
            weights[rising, m] = (rising - left) / (centre - left)
        if right > centre:
            falling = np.arange(centre, right)
            weights[falling, m] = (right - falling) / (right - centre)
    return weights
