"""``keras.ops.math`` on gingham tensors: rsqrt, erf, logsumexp, logdet, the segment
reductions, the Fourier transforms and the short-time transform (the rest raises
NotImplementedError).

Keras passes a complex value as a ``(real, imag)`` pair of real tensors; :mod:`gingham.fft`
and :mod:`gingham.signal` take and return the same pairs, so these ops are thin adapters."""

from __future__ import annotations


import numpy as np

from ... import linalg
from ... import fft as gfft
from ... import signal as gsignal
from ...frontend import tensor as gt
from ...nn import functional as F
from ...frontend.jit import current_trace
from ...frontend.tensor import tensor, where
from ._unsupported import unsupported_module_getattr
from .core import (convert_to_numpy, convert_to_tensor, current_device, keras_dtype, scatter,
                   stop_gradient)
from .numpy import _float


def rsqrt(x): return _float(x).rsqrt()
def erf(x): return _float(x).erf()
def erfc(x): return _float(x).erfc()


def logsumexp(x, axis=None, keepdims=False):
    x = _float(convert_to_tensor(x))
    shift = stop_gradient(x.amax(axis, keepdim=True))
    total = (x - shift).exp().sum(dim=axis, keepdim=True).log() + shift
    return total if keepdims else total.squeeze(axis)


def logdet(x):
    """``log(det(x))`` of square matrices (NaN where the determinant is negative), from
    gingham.linalg's LU factorisation."""
    return linalg.logdet(_float(x))


def segment_sum(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    """``data``'s rows summed per segment id (ids outside ``[0, num_segments)``, such as
    -1, are dropped): Tile's scatter, differentiable in ``data``. Without ``num_segments``
    the count is read from the ids, so only outside a compiled step."""
    data = convert_to_tensor(data)
    segment_ids = convert_to_tensor(segment_ids)
    if num_segments is None:
        if current_trace() is not None:
            raise NotImplementedError("math.segment_sum without num_segments inside a compiled "
                                      "step is not implemented by gingham's Keras backend (its "
                                      "shape would depend on the ids)")
        num_segments = int(np.max(convert_to_numpy(segment_ids))) + 1
    positions = segment_ids.reshape(segment_ids.shape + (1,))
    return scatter(positions, data, (int(num_segments),) + data.shape[segment_ids.ndim:])


# --- indexing ops ---


def top_k(x, k, sorted=True):  # noqa: A002 (Keras' name)
    """``(values, indices)`` of the ``k`` largest along the last axis, int32 indices, in
    order whatever ``sorted`` says (of equal values the first comes first):
    :func:`gingham.topk`, ``n^2`` compares per row."""
    from ...frontend import indexing

    values, indices = indexing.topk(convert_to_tensor(x), int(k), -1)
    return values, indices.astype(np.int32)


def in_top_k(targets, predictions, k):
    """Whether each row's target class scores at least its ``k``-th largest prediction
    (ties with the ``k``-th count as in, as Keras' other backends)."""
    from ...frontend import indexing

    predictions = convert_to_tensor(predictions)
    targets = convert_to_tensor(targets).astype(np.int64).reshape(-1, 1)
    kth = indexing.topk(predictions, int(k), -1).values[:, -1:]
    chosen = indexing.take_along_dim(predictions, targets, -1)
    return (chosen >= kth).reshape(-1)


def _segment_reduce(data, segment_ids, num_segments, agg: str, op: str):
    """Each segment's rows reduced by ``agg``: the rows of ``data`` where the segment's id is
    not found read as the identity (``[segments, rows, ...]`` values), then one reduction over
    the rows. A segment with no row holds the identity: -inf for max, inf for min (the
    integer limits for integers), 1 for prod, as JAX's."""
    data = convert_to_tensor(data)
    segment_ids = convert_to_tensor(segment_ids)
    if segment_ids.ndim != 1:
        raise ValueError(f"math.{op}: segment_ids must be 1-d, not of shape {segment_ids.shape}")
    if num_segments is None:
        if current_trace() is not None:
            raise NotImplementedError(f"math.{op} without num_segments inside a compiled step "
                                      "is not implemented by gingham's Keras backend (its shape "
                                      "would depend on the ids)")
        num_segments = int(np.max(convert_to_numpy(segment_ids))) + 1
    count, rows = int(num_segments), data.shape[0]
    segments = tensor(np.arange(count, dtype=np.int64), device=data.device)
    member = segment_ids.astype(np.int64).reshape(1, rows) == segments.reshape(count, 1)
    member = member.reshape((count, rows) + (1,) * (data.ndim - 1))
    if agg == "*":
        identity = 1
    else:
        limits = np.finfo if np.issubdtype(data.dtype, np.floating) else np.iinfo
        lowest = -np.inf if limits is np.finfo else limits(data.dtype).min
        highest = np.inf if limits is np.finfo else limits(data.dtype).max
        identity = lowest if agg == ">" else highest
    spread = where(member, data.reshape((1,) + data.shape), identity)
    if agg == ">":
        return spread.amax(1)
    if agg == "<":
        return spread.amin(1)
    return spread.prod(1)


def segment_max(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_reduce(data, segment_ids, num_segments, ">", "segment_max")


def segment_min(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_reduce(data, segment_ids, num_segments, "<", "segment_min")


def segment_prod(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002
    return _segment_reduce(data, segment_ids, num_segments, "*", "segment_prod")


# --- elementwise math and reductions ops ---
def erfinv(x):
    """The inverse of erf on (-1, 1), +-inf at +-1, NaN beyond (:meth:`gingham.Tensor.erfinv`,
    Giles' approximation refined by two Newton steps)."""
    return _float(convert_to_tensor(x)).erfinv()


def cdist(x1, x2):
    """The Euclidean distances between the rows of ``x1`` and of ``x2`` (``[..., n, d]`` and
    ``[..., m, d]`` give ``[..., n, m]``, batch dims broadcast)."""
    a, b = convert_to_tensor(x1), convert_to_tensor(x2)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("`cdist` inputs must have rank >= 2")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError("Last dimension of inputs to `cdist` must match")
    difference = a.unsqueeze(-2) - b.unsqueeze(-3)
    return difference.square().sum(-1).sqrt()


# --- Fourier transforms ---


def _complex_pair(x, op: str) -> tuple:
    """Keras' complex input: a tuple of two float tensors of one shape (its errors)."""
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError("Input `x` should be a tuple of two tensors - real and imaginary. "
                         f"Received: x={x}")
    real, imag = convert_to_tensor(x[0]), convert_to_tensor(x[1])
    if real.shape != imag.shape:
        raise ValueError("Input `x` should be a tuple of two tensors - real and imaginary. "
                         "Both the real and imaginary parts should have the same shape. "
                         f"Received: x[0].shape = {real.shape}, x[1].shape = {imag.shape}")
    if "float" not in keras_dtype(real) or "float" not in keras_dtype(imag):
        raise ValueError(f"{op}: at least one tensor in input `x` is not of type float. "
                         f"Received: x={x}.")
    return real, imag


def fft(x): return tuple(gfft.fft(_complex_pair(x, "fft")))
def fft2(x): return tuple(gfft.fft2(_complex_pair(x, "fft2")))
def ifft2(x): return tuple(gfft.ifft2(_complex_pair(x, "ifft2")))
def rfft(x, fft_length=None): return tuple(gfft.rfft(_float(x), n=fft_length))
def irfft(x, fft_length=None): return gfft.irfft(_complex_pair(x, "irfft"), n=fft_length)


def extract_sequences(x, sequence_length, sequence_stride):
    """Frames of ``sequence_length`` samples every ``sequence_stride`` along the last axis,
    ``[..., frames, sequence_length]``: one strided assignment (:func:`gingham.signal.frame`)."""
    return gsignal.frame(convert_to_tensor(x), sequence_length, sequence_stride)


def _keras_window(window, sequence_length: int, dtype) -> "gt.Tensor | None":
    """Keras' ``window``: "hann" or "hamming" (periodic, as its torch backend makes them), an
    array of ``sequence_length`` values, or None."""
    if window is None:
        return None
    if isinstance(window, str):
        if window not in {"hann", "hamming"}:
            raise ValueError('If a string is passed to `window`, it must be one of "hann", '
                             f'"hamming". Received: window={window}')
        make = gsignal.hann_window if window == "hann" else gsignal.hamming_window
        return make(sequence_length, dtype=dtype, device=current_device())
    win = convert_to_tensor(window).astype(dtype)
    if win.ndim != 1 or win.shape[-1] != sequence_length:
        raise ValueError("The shape of `window` must be equal to [sequence_length]. "
                         f"Received: window shape={win.shape}")
    return win


def stft(x, sequence_length, sequence_stride, fft_length, window="hann", center=True):
    """``[..., frames, fft_length // 2 + 1]`` real and imaginary parts: torch.stft's
    transform (as Keras' torch backend calls it), frames last but one."""
    x = convert_to_tensor(x)
    if keras_dtype(x) not in {"float32", "float64"}:
        raise TypeError("Invalid input type. Expected `float32` or `float64`. "
                        f"Received: input type={keras_dtype(x)}")
    if fft_length < sequence_length:
        raise ValueError("`fft_length` must equal or larger than `sequence_length`. "
                         f"Received: sequence_length={sequence_length}, "
                         f"fft_length={fft_length}")
    win = _keras_window(window, sequence_length, x.dtype)
    if win is None:
        win = F._full_like_tensor(x, 1.0, (sequence_length,))
    lead = x.shape[:-1]
    spectrum = gsignal.stft(x.reshape(-1, x.shape[-1]), fft_length, sequence_stride,
                            sequence_length, win, center=center)
    bins, frames = spectrum.real.shape[1:]
    return tuple(part.reshape(lead + (bins, frames)).transpose(-2, -1) for part in spectrum)


def istft(x, sequence_length, sequence_stride, fft_length, length=None, window="hann",
          center=True):
    """The inverse of :func:`stft`, as Keras' torch backend computes it: torch.istft when the
    window fills the frame and ``center``; otherwise each frame's irfft times the window
    divided by its overlapped squares (TensorFlow's ``inverse_stft_window_fn``), overlapped
    and added."""
    real, imag = _complex_pair(x, "istft")
    win = _keras_window(window, sequence_length, real.dtype)
    lead, (frames, bins) = real.shape[:-2], real.shape[-2:]
    flat = [part.reshape((-1, frames, bins)).transpose(1, 2) for part in (real, imag)]
    if sequence_length == fft_length and center and win is not None:
        signal = gsignal.istft(tuple(flat), fft_length, sequence_stride, sequence_length, win,
                               center=True, length=length)
        return signal.reshape(lead + signal.shape[-1:])
    pieces = gfft.irfft((real, imag), fft_length)  # [..., frames, fft_length]
    if win is not None:
        left = (fft_length - sequence_length) // 2
        win = F.pad(win, (left, fft_length - sequence_length - left))
        overlaps = -(-fft_length // sequence_stride)
        squares = F.pad(win.square(), (0, overlaps * sequence_stride - fft_length))
        period = squares.reshape(overlaps, sequence_stride).sum(0, keepdim=True)
        denominator = period.repeat(overlaps, 1).reshape(-1).narrow(0, 0, fft_length)
        pieces = pieces * (win / denominator)
    signal = gsignal.overlap_add(pieces.reshape((-1, frames, fft_length)), sequence_stride)
    signal = signal.reshape(lead + signal.shape[-1:])
    start = fft_length // 2 if center else 0
    total = signal.shape[-1]
    if length is not None:
        end = start + int(length)
    else:
        end = total - fft_length // 2 if center else total
    return signal.narrow(-1, start, min(end, total) - start)


__getattr__ = unsupported_module_getattr(__name__, "math")
