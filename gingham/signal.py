"""``gingham.signal``: window functions, the short-time Fourier transform and its inverse.

The windows have ``torch.*_window``'s arguments and values (``periodic=True`` by default: the
window of ``N + 1`` points without its last, what a spectrogram wants); they are computed on
the host and uploaded. :func:`stft` and :func:`istft` have ``torch.stft``'s and
``torch.istft``'s arguments, with complex values as :class:`gingham.fft.Complex` pairs:

    window = gingham.signal.hann_window(400)
    spec = gingham.signal.stft(audio, n_fft=512, hop_length=160, win_length=400,
                               window=window)                # Complex, [B, 257, frames]
    power = spec.real ** 2 + spec.imag ** 2
    audio_again = gingham.signal.istft(spec, 512, 160, 400, window, length=audio.shape[-1])

A short-time transform is one contraction: frame ``f`` starts at ``hop * f``, so
``O[b, k, f] = +(X[b, hop * f + j] * M[k, j])`` with ``M`` the windowed DFT table
(:func:`frames_contraction`); the inverse transforms each frame and overlaps and adds them with
the output index ``hop * f + j`` (:func:`overlap_add`). Both are differentiable (in the signal
and the window) by autodiff. :func:`frame` cuts frames out (``Tensor.unfold``'s values) and
:func:`i0`, the Bessel function the Kaiser window is made of, is here as an elementwise op.
"""

from __future__ import annotations

import numpy as np

from .fft import Complex, ComplexLike, _parts, _scale, _table
from .frontend.tensor import DTypeError, ShapeError, Tensor, concat, stack, tensor
from .nn import functional as F
from .tile import builder

# -- windows ---------------------------------------------------------------------------------------


def _cosine_sum(*coefficients: float):
    """``sum_m (-1)^m a_m cos(2 pi m n / (N - 1))``: Hann, Hamming and Blackman."""
    def symmetric(length: int) -> np.ndarray:
        phase = 2.0 * np.pi * np.arange(length) / (length - 1)
        return sum((-1) ** m * a * np.cos(m * phase) for m, a in enumerate(coefficients))
    return symmetric


def _bartlett(length: int) -> np.ndarray:
    return 1.0 - np.abs(2.0 * np.arange(length) / (length - 1) - 1.0)


def _kaiser(beta: float):
    def symmetric(length: int) -> np.ndarray:
        ratio = 2.0 * np.arange(length) / (length - 1) - 1.0
        return np.i0(beta * np.sqrt(np.clip(1.0 - ratio ** 2, 0.0, None))) / np.i0(beta)
    return symmetric


# name -> (its parameters) -> the symmetric window of N >= 2 points, float64
_SHAPES = {
    "hann": lambda: _cosine_sum(0.5, 0.5),
    "hamming": lambda alpha=0.54, beta=0.46: _cosine_sum(alpha, beta),
    "blackman": lambda: _cosine_sum(0.42, 0.5, 0.08),
    "bartlett": lambda: _bartlett,
    "kaiser": lambda beta=12.0: _kaiser(beta),
}


def window_values(name: str, window_length: int, periodic: bool = True,
                  **params: float) -> np.ndarray:
    """The window ``name`` ("hann", "hamming", "blackman", "bartlett", "kaiser") of
    ``window_length`` points on the host, float64, as torch computes it: of ``N + 1`` points
    less the last when ``periodic``, one point is ``[1]``, zero points empty. ``params`` are
    the window's own (``alpha``, ``beta``).

        gingham.signal.window_values("hamming", 400, alpha=25 / 46, beta=21 / 46)
    """
    op = f"{name}_window"
    window_length = int(window_length)
    if window_length < 0:
        raise ValueError(f"{op} requires non-negative window_length, got "
                         f"window_length={window_length}")
    symmetric = _SHAPES[name](**params)
    if window_length <= 1:
        return np.ones(window_length)
    if periodic:
        return symmetric(window_length + 1)[:-1]
    return symmetric(window_length)


def _window(name: str, window_length: int, periodic: bool, dtype, device, requires_grad: bool,
            **params: float) -> Tensor:
    """:func:`window_values` as a tensor of ``dtype`` (float32) on ``device``."""
    values = window_values(name, window_length, periodic, **params)
    dtype = np.float32 if dtype is None else dtype
    if np.dtype(dtype).kind != "f":
        raise DTypeError(f"{name}_window expects floating point dtypes, got {np.dtype(dtype)}")
    return tensor(values.astype(dtype), device=device, requires_grad=requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None,
                device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``0.5 - 0.5 cos(2 pi n / (N - 1))`` (``torch.hann_window``).

        window = gingham.signal.hann_window(400)          # periodic, for spectrograms
    """
    return _window("hann", window_length, periodic, dtype, device, requires_grad)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, device: str | None = None,
                   requires_grad: bool = False) -> Tensor:
    """``alpha - beta cos(2 pi n / (N - 1))`` (``torch.hamming_window``)."""
    return _window("hamming", window_length, periodic, dtype, device, requires_grad,
                   alpha=alpha, beta=beta)


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None,
                    device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``
    (``torch.blackman_window``)."""
    return _window("blackman", window_length, periodic, dtype, device, requires_grad)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None,
                    device: str | None = None, requires_grad: bool = False) -> Tensor:
    """The triangle ``1 - |2 n / (N - 1) - 1|`` (``torch.bartlett_window``)."""
    return _window("bartlett", window_length, periodic, dtype, device, requires_grad)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, device: str | None = None, requires_grad: bool = False) -> Tensor:
    """``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)`` (``torch.kaiser_window``)."""
    return _window("kaiser", window_length, periodic, dtype, device, requires_grad, beta=beta)


def i0(input: Tensor) -> Tensor:  # noqa: A002
    """The modified Bessel function of the first kind of order 0, elementwise
    (``torch.special.i0``; :func:`gingham.special.i0`), to float32's precision; differentiable.

        gingham.signal.i0(gingham.tensor([0.0, 1.0, 5.0]))   # [1.0, 1.2661, 27.2399]
    """
    from .frontend import special

    return special.i0(input)


# -- short-time Fourier transform ---------------------------------------------------------------


def _frame_geometry(op: str, n_fft: int, hop_length, win_length, window):
    n_fft = int(n_fft)
    hop_length = n_fft // 4 if hop_length is None else int(hop_length)
    win_length = n_fft if win_length is None else int(win_length)
    if n_fft < 1:
        raise ValueError(f"{op}: expected n_fft > 0, but got n_fft={n_fft}")
    if hop_length < 1:
        raise ValueError(f"{op}: expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise ValueError(f"{op}: expected 0 < win_length <= n_fft, but got "
                         f"win_length={win_length}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise ShapeError(f"{op}: expected a 1D window tensor of size equal to win_length="
                         f"{win_length}, but got window with size {tuple(window.shape)}")
    return n_fft, hop_length, win_length


def _padded_window(window: Tensor | None, win_length: int, n_fft: int) -> Tensor | None:
    """The window centred in ``n_fft`` points (torch's rule: ``(n_fft - win_length) // 2``
    zeros on the left); None for none (all ones) when it already fills them."""
    if window is None:
        return None
    left = (n_fft - win_length) // 2
    return F.pad(window, (left, n_fft - win_length - left)) if win_length < n_fft else window


def frames_contraction(x: Tensor, matrix: Tensor, hop: int, frames: int) -> Tensor:
    """``O[b, k, f] = +(X[b, hop * f + j] * M[k, j])``: every frame of ``x`` (``[B, L]``,
    frame ``f`` its samples ``hop * f`` to ``hop * f + J``) through the ``[K, J]`` matrix,
    ``[B, K, frames]``. With the identity it extracts the frames."""
    b_size, k_size = x.shape[0], matrix.shape[0]
    b, k, f, j = builder.indices("b k f j")
    shape = (b_size, k_size, frames)
    return x._derive(shape, x.dtype, [x, matrix], lambda nodes: builder.sum(
        nodes[0][b, hop * f + j] * nodes[1][k, j], out=[b, k, f], shape=list(shape)))


def frame(x: Tensor, frame_length: int, hop: int) -> Tensor:
    """The frames of ``x``'s last dim, ``frame_length`` samples every ``hop``:
    ``O[..., f, j] = =(X[..., hop * f + j])``, ``[..., frames, frame_length]`` (PyTorch's
    ``x.unfold(-1, frame_length, hop)``; the samples after the last whole frame are left out).

        gingham.signal.frame(audio, 400, 160)          # [B, L] -> [B, frames, 400]
    """
    frame_length, hop = int(frame_length), int(hop)
    if frame_length < 1 or hop < 1:
        raise ValueError(f"frame: frame_length ({frame_length}) and hop ({hop}) must be "
                         "positive")
    if x.ndim == 0 or x.shape[-1] < frame_length:
        raise ShapeError(f"frame: frames of {frame_length} samples do not fit shape {x.shape}")
    lead = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1])
    count = 1 + (x.shape[-1] - frame_length) // hop
    b, f, j = builder.indices("b f j")
    shape = (flat.shape[0], count, frame_length)
    frames = flat._derive(shape, flat.dtype, [flat], lambda nodes: builder.assign(
        nodes[0][b, hop * f + j], out=[b, f, j], shape=list(shape)))
    return frames.reshape(lead + (count, frame_length))


def overlap_add(frames: Tensor, hop: int) -> Tensor:
    """``O[b, hop * f + j] = +(F[b, f, j])``: ``[B, frames, J]`` frames placed ``hop`` apart
    and summed where they overlap, ``[B, J + hop * (frames - 1)]``.

        gingham.signal.overlap_add(frames, 160)
    """
    b_size, count, j_size = frames.shape
    b, f, j = builder.indices("b f j")
    shape = (b_size, j_size + hop * (count - 1))
    return frames._derive(shape, frames.dtype, [frames], lambda nodes: builder.sum(
        nodes[0][b, f, j], out=[b, hop * f + j], shape=list(shape)))


def _as_batch(op: str, x: Tensor, rank: int) -> tuple[Tensor, bool]:
    """``x`` with a leading batch dim (added when ``x`` has ``rank - 1`` dims)."""
    if x.ndim not in (rank - 1, rank):
        raise ShapeError(f"{op}: expected a {rank - 1}D or {rank}D input, got shape {x.shape}")
    return (x.unsqueeze(0), True) if x.ndim == rank - 1 else (x, False)


def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None):
    """The short-time Fourier transform of ``[L]`` or ``[B, L]`` real signals
    (``torch.stft``'s arguments): frames of ``n_fft`` samples ``hop_length`` (``n_fft // 4``)
    apart, each times ``window`` (``win_length`` points, zero-padded to ``n_fft`` in the
    middle; none is all ones), transformed. ``center`` pads ``n_fft // 2`` samples on both
    sides first (``pad_mode`` as :func:`gingham.nn.functional.pad`'s), ``normalized`` scales
    by ``1 / sqrt(n_fft)``, ``onesided`` (default True) keeps the ``n_fft // 2 + 1``
    non-negative frequencies.

    Returns a :class:`gingham.fft.Complex` pair of ``[B, freqs, frames]`` (``[freqs, frames]``
    for one signal); ``return_complex=False`` returns them stacked on a last dim of 2 instead,
    PyTorch's older real form.

        spec = gingham.signal.stft(audio, 512, 128, window=gingham.signal.hann_window(512))
    """
    op = "stft"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expects a real gingham Tensor, got {type(input).__name__}")
    n_fft, hop, win_length = _frame_geometry(op, n_fft, hop_length, win_length, window)
    x, unbatched = _as_batch(op, input, 2)
    if x.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating point signal, got {x.dtype}")
    if center:
        x = F.pad(x, (n_fft // 2, n_fft // 2), mode=pad_mode)
    length = x.shape[1]
    if not n_fft <= length:
        raise ValueError(f"{op}: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    frames = 1 + (length - n_fft) // hop
    onesided = True if onesided is None else onesided
    rows = n_fft // 2 + 1 if onesided else n_fft
    scale = _scale(op, "ortho" if normalized else "backward", n_fft, False)
    padded = _padded_window(window, win_length, n_fft)
    parts = []
    for part in ("cos", "sin"):
        matrix = _table(x, rows, n_fft, n_fft, part, False, scale)
        if padded is not None:
            matrix = matrix * padded.astype(x.dtype).reshape(1, n_fft)
        parts.append(frames_contraction(x, matrix, hop, frames))
    if unbatched:
        parts = [p.squeeze(0) for p in parts]
    if return_complex is False:
        return stack(parts, -1)
    return Complex(*parts)


def istft(input: ComplexLike, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """The signal whose :func:`stft` (same arguments) is ``input`` (``torch.istft``): each
    frame's inverse transform times the window, overlapped and added, divided by the
    overlapped squared window; ``center`` trims the padding again, ``length`` trims or
    zero-pads the result. ``input`` is a pair of ``[B, freqs, frames]`` (or
    ``[freqs, frames]``); ``onesided`` defaults to ``freqs != n_fft``. As in PyTorch the window
    must overlap-add to nonzero everywhere (the NOLA condition); where it does not, the
    result is not a number instead of PyTorch's error.

        audio = gingham.signal.istft(spec, 512, 128, window=window, length=16000)
    """
    op = "istft"
    if return_complex:
        raise ValueError(f"{op}: return_complex=True is not supported: gingham has no complex "
                         "dtype, and a real signal is what the inverse of a real one gives")
    real, imag = _parts(op, input)
    n_fft, hop, win_length = _frame_geometry(op, n_fft, hop_length, win_length, window)
    real, unbatched = _as_batch(op, real, 3)
    imag = (imag.unsqueeze(0) if unbatched else imag) if imag is not None else None
    freqs, count = real.shape[1], real.shape[2]
    onesided = freqs != n_fft if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if freqs != expected:
        raise ShapeError(f"{op}: expected the frequency dim to be {expected} for n_fft={n_fft} "
                         f"and onesided={onesided}, got {freqs}")
    scale = _scale(op, "ortho" if normalized else "backward", n_fft, True)
    padded = _padded_window(window, win_length, n_fft)
    both = real if imag is None else concat([real, imag], 1)
    matrix = _table(real, n_fft, freqs, n_fft, "cos" if imag is None else "re", True, scale,
                    hermitian=onesided)
    if padded is not None:
        matrix = matrix * padded.astype(real.dtype).reshape(n_fft, 1)
    # frames[b, f, j] = sum_k Z[b, k, f] M[j, k], then overlapped: a [B, f, j] product first
    frames = _frames_product(both, matrix)
    signal = overlap_add(frames, hop)
    squares = (padded.astype(real.dtype).square() if padded is not None
               else F._full_like_tensor(real, 1.0, (n_fft,)))
    envelope = overlap_add(squares.reshape(1, 1, n_fft).expand(1, count, n_fft), hop)
    start = n_fft // 2 if center else 0
    total = signal.shape[1]
    end = total - n_fft // 2 if center else total
    if length is not None:
        end = start + int(length)
    kept = min(end, total) - start
    signal = signal.narrow(1, start, kept) / envelope.narrow(1, start, kept)
    if end > total:
        signal = F.pad(signal, (0, end - total))
    return signal.squeeze(0) if unbatched else signal


def _frames_product(spectrum: Tensor, matrix: Tensor) -> Tensor:
    """``O[b, f, j] = +(Z[b, k, f] * M[j, k])``: each frame's inverse transform."""
    b_size, _, count = spectrum.shape
    j_size = matrix.shape[0]
    b, k, f, j = builder.indices("b k f j")
    shape = (b_size, count, j_size)
    return spectrum._derive(shape, spectrum.dtype, [spectrum, matrix], lambda nodes: builder.sum(
        nodes[0][b, k, f] * nodes[1][j, k], out=[b, f, j], shape=list(shape)))


__all__ = ["window_values", "hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window", "i0", "stft", "istft", "overlap_add", "frames_contraction",
           "frame"]
