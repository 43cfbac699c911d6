"""``gingham.fft``: discrete Fourier transforms in ``torch.fft``'s names and arguments.

gingham has no complex dtype, so a complex value is a :class:`Complex` pair ``(real, imag)``
of real tensors of one shape. Every transform takes a real tensor (imaginary part zero) or such
a pair, and returns a pair (``irfft``, ``irfft2``, ``irfftn``: a real tensor):

    x = gingham.tensor(np.random.rand(8, 400), requires_grad=True)
    spectrum = gingham.fft.rfft(x, n=512, dim=-1)          # Complex(real, imag), [8, 257]
    power = spectrum.real ** 2 + spectrum.imag ** 2
    back = gingham.fft.irfft(spectrum, n=512)                # [8, 512]
    re, im = gingham.fft.fft((x, x * 0.5), norm="ortho")     # a complex input, as a pair

``n=`` trims or zero-pads the input along ``dim`` to ``n`` points, ``norm=`` is ``"backward"``
(the inverse scales by ``1/n``, the default), ``"ortho"`` (both by ``1/sqrt(n)``) or
``"forward"`` (the forward by ``1/n``), as in PyTorch.

A transform of length ``n`` is a contraction with the DFT matrix ``W[k, j] = exp(-2 pi i k j
/ n)``, its cosine and sine tables made once per length on the host (exactly: ``k j mod n``
before the angle) and kept on the device as constants: the compiler tiles and vectorises it
as any matrix product, and autodiff gives its gradient. That is ``O(n^2)`` per transform, not
an FFT's ``O(n log n)``: it is meant for the lengths deep-learning models transform (audio
frames, feature axes, up to a few thousand points), where a dense product on a vector unit or
GPU is competitive; a transform of a million points is not what it is for.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence, Union

import numpy as np

from .frontend.tensor import DTypeError, ShapeError, Tensor, _dim, concat, roll, tensor
from .lru import LRU
from .nn.functional import _contract_axis


class Complex(NamedTuple):
    """A complex tensor as its real and imaginary parts (real tensors of one shape): what the
    transforms return, and what they take besides a real tensor.

        z = gingham.fft.fft(x)
        magnitude = (z.real ** 2 + z.imag ** 2).sqrt()
        re, im = z
    """

    real: Tensor
    imag: Tensor


ComplexLike = Union[Tensor, Complex, tuple]

_NORMS = ("backward", "ortho", "forward")

# (table key, dtype, device) -> the table as a device tensor, so that a model transforming the
# same length every step uploads its tables once.
_tables: LRU = LRU(32)


def _scale(op: str, norm: str | None, n: int, inverse: bool) -> float:
    """The factor of a transform of ``n`` points: ``norm`` says which direction divides."""
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be one of {_NORMS} or None, not {norm!r}")
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


@functools.lru_cache(maxsize=8)
def _host_table(rows: int, cols: int, n: int, part: str, inverse: bool, scale: float,
                hermitian: bool) -> np.ndarray:
    """Float64 ``[rows, cols]`` tables of ``W = scale * exp(+-2 pi i k j / n)`` (``+`` when
    ``inverse``): its real part (``part="cos"``) or imaginary part (``"sin"``), or, for a
    complex input held as ``[real; imag]`` (``[rows, 2 cols]``), what gives the real part of
    ``W z`` (``"re"``: ``[cos, -sin]``) or its imaginary part (``"im"``: ``[sin, cos]``).
    ``hermitian`` weighs column ``j`` by 2 where its conjugate ``n - j`` is not stored
    (irfft's half spectrum)."""
    k = np.arange(rows, dtype=np.int64)[:, None]
    j = np.arange(cols, dtype=np.int64)[None, :]
    # k * j mod n first: the angle stays in [0, 2 pi), exact for any length.
    angle = (2.0 * np.pi / n) * ((k * j) % n)
    cos, sin = np.cos(angle), (1.0 if inverse else -1.0) * np.sin(angle)
    if hermitian:
        paired = np.where((j > 0) & (2 * j != n), 2.0, 1.0)
        cos, sin = cos * paired, sin * paired
    tables = {"cos": cos, "sin": sin, "re": np.concatenate([cos, -sin], 1),
              "im": np.concatenate([sin, cos], 1)}
    return tables[part] * scale


def _table(like: Tensor, rows: int, cols: int, n: int, part: str, inverse: bool,
           scale: float, hermitian: bool = False) -> Tensor:
    """:func:`_host_table` as a constant tensor of ``like``'s dtype on its device."""
    key = (rows, cols, n, part, inverse, scale, hermitian, like.dtype.str, like.device)
    found = _tables.get(key)
    if found is None:
        host = _host_table(rows, cols, n, part, inverse, scale, hermitian)
        found = tensor(host.astype(like.dtype), device=like.device)
        _tables[key] = found
    return found


def _float(op: str, x: Tensor) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a gingham Tensor or a (real, imag) pair of them, got "
                        f"{type(x).__name__}")
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return x
    if x.dtype.kind in "biu":  # integers transform as float32, as torch.fft's
        return x.float()
    raise DTypeError(f"{op}: cannot transform a tensor of dtype {x.dtype}")


def _parts(op: str, x: ComplexLike) -> tuple[Tensor, Tensor | None]:
    """``(real, imag)`` of a real tensor (``imag`` None) or of a pair."""
    if isinstance(x, Tensor):
        return _float(op, x), None
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise TypeError(f"{op}: expected a gingham Tensor or a (real, imag) pair of them, got "
                        f"{type(x).__name__}")
    real, imag = _float(op, x[0]), _float(op, x[1])
    if real.shape != imag.shape:
        raise ShapeError(f"{op}: the real and imaginary parts have different shapes "
                         f"{real.shape} and {imag.shape}")
    if real.dtype != imag.dtype:
        raise DTypeError(f"{op}: the real and imaginary parts have different dtypes "
                         f"{real.dtype} and {imag.dtype}")
    return real, imag


def _points(op: str, n: int | None, default: int) -> int:
    n = default if n is None else int(n)
    if n < 1:
        raise ValueError(f"{op}: invalid number of data points ({n}) specified")
    return n


def _leading(x: Tensor, axis: int, length: int) -> Tensor:
    """The first ``length`` elements of ``x`` along ``axis`` (all when it has fewer: the
    missing ones are zeros, which a table simply has no column for)."""
    return x.narrow(axis, 0, length) if x.shape[axis] > length else x


def _apply(real: Tensor, imag: Tensor | None, axis: int, n: int, inverse: bool,
           scale: float, rows: int, hermitian: bool = False,
           real_only: bool = False) -> tuple[Tensor, Tensor | None]:
    """``W @ (real + i imag)`` along ``axis``, ``W`` the ``[rows, used]`` DFT table: one
    contraction per output part (over both input parts side by side for a complex input);
    ``real_only`` skips the imaginary part (irfft)."""
    used = real.shape[axis]
    if imag is None:
        source, parts = real, ("cos", "sin")
    else:
        source, parts = concat([real, imag], axis), ("re", "im")
    outputs = [_contract_axis(source, axis, _table(real, rows, used, n, part, inverse, scale,
                                                   hermitian))
               for part in parts[:1 if real_only else 2]]
    return outputs[0], (None if real_only else outputs[1])


def _c2c(op: str, x: ComplexLike, n: int | None, dim: int, norm: str | None,
         inverse: bool) -> Complex:
    real, imag = _parts(op, x)
    axis = _dim(op, real.shape, dim)
    n = _points(op, n, real.shape[axis])
    used = min(n, real.shape[axis])
    real = _leading(real, axis, used)
    imag = None if imag is None else _leading(imag, axis, used)
    scale = _scale(op, norm, n, inverse)
    return Complex(*_apply(real, imag, axis, n, inverse, scale, rows=n))


def fft(input: ComplexLike, n: int | None = None, dim: int = -1,
        norm: str | None = None) -> Complex:
    """The one-dimensional discrete Fourier transform along ``dim`` (``torch.fft.fft``).

        re, im = gingham.fft.fft(x, n=256, dim=1)
    """
    return _c2c("fft", input, n, dim, norm, inverse=False)


def ifft(input: ComplexLike, n: int | None = None, dim: int = -1,
         norm: str | None = None) -> Complex:
    """The inverse of :func:`fft` along ``dim`` (``torch.fft.ifft``): ``ifft(fft(x)) == x``.

        re, im = gingham.fft.ifft(gingham.fft.fft(x))
    """
    return _c2c("ifft", input, n, dim, norm, inverse=True)


def rfft(input: Tensor, n: int | None = None, dim: int = -1,
         norm: str | None = None) -> Complex:
    """The transform of a real signal, the ``n // 2 + 1`` non-negative frequencies (the others
    are their conjugates), ``torch.fft.rfft``.

        spectrum = gingham.fft.rfft(frames, n=512)     # [..., 257] real and imaginary parts
    """
    op = "rfft"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expects a real gingham Tensor, got {type(input).__name__}")
    real = _float(op, input)
    axis = _dim(op, real.shape, dim)
    n = _points(op, n, real.shape[axis])
    used = min(n, real.shape[axis])
    real = _leading(real, axis, used)
    scale = _scale(op, norm, n, False)
    return Complex(*_apply(real, None, axis, n, False, scale, rows=n // 2 + 1))


def irfft(input: ComplexLike, n: int | None = None, dim: int = -1,
          norm: str | None = None) -> Tensor:
    """The real signal of ``n`` points (default ``2 * (m - 1)`` for ``m`` frequencies along
    ``dim``) whose :func:`rfft` is ``input``: the inverse of :func:`rfft`, ``torch.fft.irfft``.
    As there, the imaginary parts of the zero (and, for even ``n``, the Nyquist) frequency
    are ignored.

        x = gingham.fft.irfft(gingham.fft.rfft(signal), n=signal.shape[-1])
    """
    op = "irfft"
    real, imag = _parts(op, input)
    axis = _dim(op, real.shape, dim)
    n = _points(op, n, 2 * (real.shape[axis] - 1))
    used = min(n // 2 + 1, real.shape[axis])
    real = _leading(real, axis, used)
    imag = None if imag is None else _leading(imag, axis, used)
    scale = _scale(op, norm, n, True)
    return _apply(real, imag, axis, n, True, scale, rows=n, hermitian=True,
                  real_only=True)[0]


# -- several dims ------------------------------------------------------------------------------


def _dims_and_sizes(op: str, shape: tuple[int, ...], s, dim,
                    default_dims: Sequence[int] | None) -> tuple[list[int], list[int | None]]:
    """torch.fft.fftn's rule: ``dim`` default the last ``len(s)`` dims (all without ``s``)."""
    if dim is None:
        if s is not None:
            dim = list(range(len(shape) - len(s), len(shape)))
        else:
            dim = list(range(len(shape))) if default_dims is None else list(default_dims)
    elif isinstance(dim, int):
        dim = [dim]
    axes = [_dim(op, shape, d) for d in dim]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: dims must be unique, got {tuple(dim)}")
    sizes = [None] * len(axes) if s is None else [int(v) if v != -1 else None for v in s]
    if len(sizes) != len(axes):
        raise ValueError(f"{op}: s {tuple(s)} and dim {tuple(dim)} must have the same length")
    return axes, sizes


def _c2c_dims(op: str, x: ComplexLike, s, dim, norm, inverse: bool,
              default_dims=None) -> Complex:
    real = x if isinstance(x, Tensor) else x[0]
    axes, sizes = _dims_and_sizes(op, real.shape, s, dim, default_dims)
    result = x
    for axis, size in zip(axes, sizes):
        result = _c2c(op, result, size, axis, norm, inverse)
    if isinstance(result, Complex):
        return result
    real, imag = _parts(op, result)  # no dim transformed: the input, as a complex value
    return Complex(real, real * 0.0 if imag is None else imag)


def fft2(input: ComplexLike, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Complex:
    """The two-dimensional transform over ``dim`` (``torch.fft.fft2``): :func:`fft` along each.

        re, im = gingham.fft.fft2(images)       # over the last two dims
    """
    return _c2c_dims("fft2", input, s, dim, norm, False)


def ifft2(input: ComplexLike, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Complex:
    """The inverse of :func:`fft2` (``torch.fft.ifft2``)."""
    return _c2c_dims("ifft2", input, s, dim, norm, True)


def fftn(input: ComplexLike, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
         norm: str | None = None) -> Complex:
    """The transform over ``dim`` (all dims by default; ``torch.fft.fftn``).

        re, im = gingham.fft.fftn(volume, dim=(1, 2, 3))
    """
    return _c2c_dims("fftn", input, s, dim, norm, False)


def ifftn(input: ComplexLike, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Complex:
    """The inverse of :func:`fftn` (``torch.fft.ifftn``)."""
    return _c2c_dims("ifftn", input, s, dim, norm, True)


def rfftn(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] | None = None,
          norm: str | None = None) -> Complex:
    """:func:`rfft` along the last of ``dim``, then :func:`fft` along the others
    (``torch.fft.rfftn``)."""
    op = "rfftn"
    axes, sizes = _dims_and_sizes(op, _float(op, input).shape, s, dim, None)
    result = rfft(input, sizes[-1], axes[-1], norm)
    for axis, size in zip(axes[:-1], sizes[:-1]):
        result = _c2c(op, result, size, axis, norm, False)
    return result


def irfftn(input: ComplexLike, s: Sequence[int] | None = None,
           dim: Sequence[int] | None = None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfftn`: :func:`ifft` along all of ``dim`` but the last, then
    :func:`irfft` along it (``torch.fft.irfftn``)."""
    op = "irfftn"
    real, _ = _parts(op, input)
    axes, sizes = _dims_and_sizes(op, real.shape, s, dim, None)
    result = input
    for axis, size in zip(axes[:-1], sizes[:-1]):
        result = _c2c(op, result, size, axis, norm, True)
    return irfft(result, sizes[-1], axes[-1], norm)


def rfft2(input: Tensor, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Complex:
    """:func:`rfftn` over two dims (``torch.fft.rfft2``)."""
    return rfftn(input, s, dim, norm)


def irfft2(input: ComplexLike, s: Sequence[int] | None = None, dim: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Tensor:
    """:func:`irfftn` over two dims (``torch.fft.irfft2``)."""
    return irfftn(input, s, dim, norm)


# -- frequencies and shifts ---------------------------------------------------------------------


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device: str | None = None) -> Tensor:
    """The frequency of each of :func:`fft`'s ``n`` outputs for samples ``d`` apart
    (``torch.fft.fftfreq``): ``[0, 1, ..., n//2 - 1 (or n//2 for odd n), -n//2, ..., -1] / (d n)``.
    """
    values = np.fft.fftfreq(int(n), d)
    return tensor(values.astype(dtype or np.float32), device=device)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device: str | None = None) -> Tensor:
    """The frequency of each of :func:`rfft`'s ``n // 2 + 1`` outputs (``torch.fft.rfftfreq``)."""
    values = np.fft.rfftfreq(int(n), d)
    return tensor(values.astype(dtype or np.float32), device=device)


def _shift(op: str, input: ComplexLike, dim, direction: int):
    if not isinstance(input, Tensor):
        return Complex(*(_shift(op, part, dim, direction) for part in _parts(op, input)))
    axes = range(input.ndim) if dim is None else [
        _dim(op, input.shape, d) for d in ([dim] if isinstance(dim, int) else dim)]
    axes = list(axes)
    # fftshift moves by n // 2, ifftshift back by the same amount (they differ for odd n)
    shifts = [direction * (input.shape[a] // 2) for a in axes]
    return roll(input, shifts, axes) if axes else input


def fftshift(input: ComplexLike, dim=None):
    """The zero frequency moved to the middle of ``dim`` (all dims by default;
    ``torch.fft.fftshift``): a roll by ``n // 2``. A pair shifts both parts."""
    return _shift("fftshift", input, dim, 1)


def ifftshift(input: ComplexLike, dim=None):
    """The inverse of :func:`fftshift` (``torch.fft.ifftshift``)."""
    return _shift("ifftshift", input, dim, -1)


__all__ = ["Complex", "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2",
           "irfft2", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
