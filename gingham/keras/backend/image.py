"""``keras.ops.image`` for gingham: ``resize`` (Resizing, bilinear UpSampling2D) on
:func:`gingham.nn.functional.interpolate`, as Keras' PyTorch backend resizes; the colour-space
conversions, ``gaussian_blur`` and ``sobel_edges`` (depthwise convolutions);
``affine_transform`` (RandomTranslation, RandomRotation, RandomZoom: a gather of bilinear taps),
``perspective_transform`` (its homography from ``compute_homography_matrix``, an 8 x 8
``gingham.linalg.solve``), ``elastic_transform`` and ``map_coordinates`` on the same taps;
``scale_and_translate`` (a weight matrix per axis); the other image ops raise
NotImplementedError.

    keras.ops.image.resize(images, (64, 64))        # bilinear, half-pixel centres
"""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
from keras.src.backend.common import dtypes
from keras.src.backend.config import standardize_data_format

from ... import linalg
from ...frontend import indexing
from ...frontend import tensor as gt
from ...frontend.tensor import Tensor
from ...nn import functional as F
from . import random
from ._unsupported import unsupported_module_getattr
from .core import convert_to_numpy, convert_to_tensor
from .numpy import _cast, _float, keras_dtype


def _unsupported_resize(what: str):
    return NotImplementedError(f"image.resize {what} is not implemented by gingham's Keras "
                               "backend yet")


def resize(images, size, interpolation="bilinear", antialias=False, crop_to_aspect_ratio=False,
           pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, data_format=None):
    """Bilinear (PyTorch's ``align_corners=False``) or nearest resizing of ``[N, H, W, C]``
    (or ``[H, W, C]``; channels first with ``data_format``) images, computed in floating
    point (integer images are rounded back to their dtype). Nearest is Keras'
    ``nearest-exact``, which is gingham's ``nearest`` when each size is a whole multiple of
    the input's: other nearest resizes and antialiased downsampling raise
    NotImplementedError. ``crop_to_aspect_ratio`` first takes the centred window of the
    target's aspect ratio, ``pad_to_aspect_ratio`` pads with ``fill_value`` towards it."""
    if len(size) != 2:
        raise ValueError("Argument `size` must be a tuple of two elements (height, width). "
                         f"Received: size={size}")
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("Only one of `pad_to_aspect_ratio` & `crop_to_aspect_ratio` can be "
                         "`True`.")
    if fill_mode != "constant":
        raise ValueError("Invalid value for argument `fill_mode`. Only `'constant'` is "
                         f"supported. Received: fill_mode={fill_mode}")
    x = convert_to_tensor(images)
    if x.ndim not in (3, 4):
        raise ValueError("Invalid images rank: expected rank 3 (single image) or rank 4 "
                         f"(batch of images). Received input with shape: images.shape={x.shape}")
    single = x.ndim == 3
    batch = x.unsqueeze(0) if single else x
    channels_last = standardize_data_format(data_format) == "channels_last"
    data = gt.permute_dims(batch, (0, 3, 1, 2)) if channels_last else batch
    size = tuple(int(s) for s in size)
    if crop_to_aspect_ratio:
        data = _crop_to_aspect_ratio(data, size)
    elif pad_to_aspect_ratio:
        data = _pad_to_aspect_ratio(_float(data), size, fill_value)
    spatial = data.shape[2:]
    if interpolation == "nearest":
        if any(out % n for n, out in zip(spatial, size)):
            raise _unsupported_resize(f"'nearest' from {spatial} to {size} (not whole multiples)")
        mode = "nearest"
    elif interpolation == "bilinear":
        if antialias and any(out < n for n, out in zip(spatial, size)):
            raise _unsupported_resize("with antialias=True when downsampling")
        mode = "bilinear"
    else:
        raise _unsupported_resize(f"with interpolation={interpolation!r}")
    original = keras_dtype(x)
    resized = F.interpolate(_float(data), size, mode=mode,
                            align_corners=False if mode == "bilinear" else None)
    resized = gt.permute_dims(resized, (0, 2, 3, 1)) if channels_last else resized
    resized = resized.squeeze(0) if single else resized
    # integer images come back in their dtype, rounded (as Keras' PyTorch backend)
    return resized if "float" in original else _cast(resized.round(), original)


def _crop_to_aspect_ratio(data: Tensor, size: tuple[int, int]) -> Tensor:
    """The centred window of ``[N, C, H, W]`` images with the aspect ratio of ``size``
    (Keras' rounding: sizes truncated, the start rounded down)."""
    height, width = data.shape[2:]
    target_height, target_width = size
    crop_height = max(min(height, int(width * target_height / target_width)), 1)
    crop_width = max(min(width, int(height * target_width / target_height)), 1)
    top, left = (height - crop_height) // 2, (width - crop_width) // 2
    return data[:, :, top:top + crop_height, left:left + crop_width]


def _pad_to_aspect_ratio(data: Tensor, size: tuple[int, int], fill_value: float) -> Tensor:
    """``[N, C, H, W]`` images padded with ``fill_value`` towards the aspect ratio of
    ``size``: the same amount on both sides (Keras' backends pad ``(P - H) // 2`` each
    side, so an odd difference leaves the ratio one pixel short)."""
    height, width = data.shape[2:]
    target_height, target_width = size
    top = (max(height, int(width * target_height / target_width)) - height) // 2
    left = (max(width, int(height * target_width / target_height)) - width) // 2
    if not top and not left:
        return data
    return F.pad(data, (left, left, top, top), value=float(fill_value))


# --- shapes II ops ---


def _check_images(images) -> Tensor:
    x = convert_to_tensor(images)
    if x.ndim not in (3, 4):
        raise ValueError("Invalid images rank: expected rank 3 (single image) or rank 4 "
                         f"(batch of images). Received input with shape: images.shape={x.shape}")
    return x


def _channel_axis(data_format) -> int:
    return -1 if standardize_data_format(data_format) == "channels_last" else -3


def _float_images(x: Tensor, op: str) -> None:
    if "float" not in keras_dtype(x):
        raise ValueError(f"image.{op}: Invalid images dtype: expected float dtype. "
                         f"Received: images.dtype={keras_dtype(x)}")


def rgb_to_grayscale(images, data_format=None):
    """ITU-R 601 luma, ``0.2989 R + 0.587 G + 0.114 B``, keeping a channel axis of size 1
    (a one-channel image is returned as it is); integer images are computed in float and
    cast back (truncated, as Keras' backends do).

        gray = keras.ops.image.rgb_to_grayscale(images)          # [N, H, W, 3] -> [N, H, W, 1]
    """
    x = _check_images(images)
    axis = _channel_axis(data_format)
    if x.shape[axis] not in (1, 3):
        raise ValueError("Invalid channel size: expected 3 (RGB) or 1 (Grayscale). "
                         f"Received input with shape: images.shape={x.shape}")
    if x.shape[axis] == 1:
        return x
    red, green, blue = _float(x).unbind(axis)
    gray = (red * 0.2989 + green * 0.587 + blue * 0.114).unsqueeze(axis)
    return _cast(gray, keras_dtype(x))


def rgb_to_hsv(images, data_format=None):
    """Hue, saturation and value in ``[0, 1]`` of float RGB images (dm_pix's formulas, as
    Keras' backends): hue 0 where the pixel is grey, saturation 0 where it is black.

        hsv = keras.ops.image.rgb_to_hsv(images)
    """
    x = _check_images(images)
    _float_images(x, "rgb_to_hsv")
    axis = _channel_axis(data_format)
    eps = float(np.finfo(np.float32 if keras_dtype(x) == "bfloat16" else
                         np.dtype(keras_dtype(x))).eps)
    x = gt.where(x.abs() < eps, 0.0, x)
    red, green, blue = x.unbind(axis)
    value = gt.maximum(gt.maximum(red, green), blue)
    spread = value - gt.minimum(gt.minimum(red, green), blue)
    # Feed the untaken side of each division a harmless 1 so its gradient stays finite.
    saturation = gt.where(value > 0, spread / gt.where(value > 0, value, 1.0), 0.0)
    norm = 1.0 / (gt.where(spread > 0, spread, 1.0) * 6.0)
    hue = gt.where(value == green, norm * (blue - red) + 2.0 / 6.0,
                   norm * (red - green) + 4.0 / 6.0)
    hue = gt.where(value == red, norm * (green - blue), hue)
    hue = gt.where(spread > 0, hue, 0.0) + (hue < 0.0).astype(hue.dtype)
    return gt.stack([hue, saturation, value], axis)


def hsv_to_rgb(images, data_format=None):
    """The inverse of :func:`rgb_to_hsv` (hue taken modulo 1), dm_pix's piecewise-linear
    formulas as Keras' backends.

        rgb = keras.ops.image.hsv_to_rgb(hsv)
    """
    x = _check_images(images)
    _float_images(x, "hsv_to_rgb")
    axis = _channel_axis(data_format)
    hue, saturation, value = x.unbind(axis)
    sector = (hue % 1.0) * 6.0
    red = ((sector - 3.0).abs() - 1.0).clamp(0.0, 1.0)
    green = (2.0 - (sector - 2.0).abs()).clamp(0.0, 1.0)
    blue = (2.0 - (sector - 4.0).abs()).clamp(0.0, 1.0)
    grey = 1.0 - saturation
    return gt.stack([value * (grey + saturation * c) for c in (red, green, blue)], axis)


def _depthwise(x: Tensor, kernels: Tensor, data_format) -> Tensor:
    """Each channel of ``[N, H, W, C]`` (or channels-first) images correlated with the ``M``
    ``[KH, KW]`` kernels of ``kernels [M, KH, KW]``, zero-padded to the input's size ("same":
    the odd pad after): ``[N, H, W, C * M]``, output channel ``c * M + m``."""
    channels_last = standardize_data_format(data_format) == "channels_last"
    channels = x.shape[-1] if channels_last else x.shape[1]
    m, kh, kw = kernels.shape
    weight = kernels.unsqueeze(0).broadcast_to((channels, m, kh, kw)).reshape(
        channels * m, 1, kh, kw)
    pads = [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in (kh, kw)]
    layout = "NHWC" if channels_last else "NCHW"
    if all(before == after for before, after in pads):
        return F.conv2d(x, weight, None, 1, [p for p, _ in pads], 1, channels,
                        data_format=layout)
    flat = [0, 0] if channels_last else []
    for before, after in reversed(pads):
        flat += [before, after]
    return F.conv2d(F.pad(x, flat), weight, None, 1, 0, 1, channels, data_format=layout)


def _gaussian_1d(size: int, sigma: Tensor) -> Tensor:
    offsets = gt.tensor(np.arange(size, dtype=np.float32) - (size - 1) / 2, device=sigma.device)
    weights = (-0.5 * (offsets / sigma).square()).exp()
    return weights / weights.sum()


def gaussian_blur(images, kernel_size=(3, 3), sigma=(1.0, 1.0), data_format=None):
    """Each channel correlated with a normalised Gaussian, zero-padded to the same size, as
    Keras' NumPy and JAX backends: ``kernel_size[0]`` and ``sigma[0]`` along the width,
    ``kernel_size[1]`` and ``sigma[1]`` along the height. ``sigma`` may be a tensor
    (RandomGaussianBlur draws it); the kernel sizes are known when the step is traced.

        blurred = keras.ops.image.gaussian_blur(images, (5, 5), (1.5, 1.5))
    """
    x = _check_images(images)
    sizes = [int(k) for k in np.asarray(convert_to_numpy(kernel_size)).reshape(-1)]
    sigmas = _float(convert_to_tensor(sigma)).reshape(-1)
    if len(sizes) != 2 or sigmas.shape != (2,):
        raise ValueError(f"image.gaussian_blur: kernel_size and sigma must have two entries "
                         f"each, got {tuple(sizes)} and shape {sigmas.shape}")
    original = keras_dtype(x)
    single = x.ndim == 3
    data = _float(x.unsqueeze(0) if single else x)
    along_width = _gaussian_1d(sizes[0], sigmas[0])
    along_height = _gaussian_1d(sizes[1], sigmas[1])
    kernel = (along_height.unsqueeze(1) * along_width.unsqueeze(0)).unsqueeze(0)
    blurred = _depthwise(data, kernel.astype(data.dtype), data_format)
    blurred = blurred.squeeze(0) if single else blurred
    return _cast(blurred, original)


_SOBEL = np.array([[[-1, -2, -1], [0, 0, 0], [1, 2, 1]],       # d/dy
                   [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]], np.float32)  # d/dx


def sobel_edges(images, data_format=None):
    """The vertical and horizontal Sobel responses of each channel, zero-padded (Keras'
    PyTorch and JAX backends; its NumPy backend reflects at the border): ``[N, H, W, C, 2]``
    with ``[dy, dx]`` last (``[N, C, H, W, 2]`` channels-first).

        edges = keras.ops.image.sobel_edges(images)              # [N, H, W, C] -> [.., C, 2]
    """
    x = _float(convert_to_tensor(images))
    if x.ndim != 4:
        raise ValueError(f"image.sobel_edges: images must be 4-d (a batch), got shape {x.shape}")
    kernels = gt.tensor(_SOBEL, device=x.device).astype(x.dtype)
    edges = _depthwise(x, kernels, data_format)
    if standardize_data_format(data_format) == "channels_last":
        return edges.reshape(*x.shape, 2)
    n, c, h, w = x.shape
    return gt.permute_dims(edges.reshape(n, c, 2, h, w), (0, 1, 3, 4, 2))


def _mirror(index: Tensor, size: int) -> Tensor:
    """A triangular wave of half-period ``size - 1`` (``0 1 2 1 0 1 ..``: NumPy's reflect)."""
    if size == 1:
        return index * 0.0
    s = size - 1
    return ((index + s) % (2 * s) - s).abs()


_INDEX_FIXERS = {  # an integer-valued float coordinate brought into [0, size)
    "constant": lambda index, size: index.clamp(0, size - 1),
    "nearest": lambda index, size: index.clamp(0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": lambda index, size: ((_mirror(index * 2 + 1, 2 * size + 1) - 1) / 2).floor(),
}


def _taps(coordinate: Tensor, interpolation: str) -> list[tuple[Tensor, Tensor | float]]:
    """The (integer-valued position, weight) pairs interpolating at ``coordinate``."""
    if interpolation == "nearest":
        return [(coordinate.round(), 1.0)]
    lower = coordinate.floor()
    upper_weight = coordinate - lower
    return [(lower, 1.0 - upper_weight), (lower + 1.0, upper_weight)]


def _pixel_grid(h: int, w: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """The column and row of every pixel, ``[1, 1, w]`` and ``[1, h, 1]``, in ``like``'s
    dtype and device."""
    xs = gt.tensor(np.arange(w).reshape(1, 1, w).astype(like.dtype), device=like.device)
    ys = gt.tensor(np.arange(h).reshape(1, h, 1).astype(like.dtype), device=like.device)
    return xs, ys


def _resample(data: Tensor, source_y: Tensor, source_x: Tensor, interpolation: str,
              fill_mode: str, fill_value) -> Tensor:
    """Float images ``[N, H, W, C]`` read at pixel positions ``source_y``, ``source_x``
    (``[N, H', W']``) as Keras' backends' map_coordinates reads each channel, giving
    ``[N, H', W', C]``: each tap is Tile's gather of rows from the ``[N * H * W, C]`` pixel
    table, so the result is differentiable in the images and the positions."""
    n, h, w, c = data.shape
    table = data.reshape(n * h * w, c)
    first_row = gt.tensor((np.arange(n) * (h * w)).reshape(n, 1, 1).astype(data.dtype),
                          device=data.device)
    fix = _INDEX_FIXERS[fill_mode]
    result = None
    for row, row_weight in _taps(source_y, interpolation):
        for col, col_weight in _taps(source_x, interpolation):
            position = first_row + fix(row, h) * w + fix(col, w)
            pixels = indexing.index_select(table, 0, position.astype(np.int32).reshape(-1))
            pixels = pixels.reshape(*source_y.shape, c)
            if fill_mode == "constant":
                inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
                pixels = gt.where(inside.unsqueeze(-1), pixels, float(fill_value))
            weight = row_weight * col_weight
            term = pixels * (weight.unsqueeze(-1) if isinstance(weight, Tensor) else weight)
            result = term if result is None else result + term
    return result


def _check_warp_modes(interpolation: str, fill_mode: str | None = None) -> None:
    """Keras' errors for a warp's ``interpolation`` (nearest or bilinear) and ``fill_mode``."""
    if interpolation not in ("nearest", "bilinear"):
        raise ValueError("Invalid value for argument `interpolation`. Expected of one "
                         f"{{'nearest', 'bilinear'}}. Received: interpolation={interpolation}")
    if fill_mode is not None and fill_mode not in _INDEX_FIXERS:
        raise ValueError("Invalid value for argument `fill_mode`. Expected of one "
                         f"{set(_INDEX_FIXERS)}. Received: fill_mode={fill_mode}")


def _float_nhwc(images: Tensor, data_format) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    """``images`` (one image or a batch, channels first or last) as a float ``[N, H, W, C]``
    batch, and the function giving a result of that layout back in the images' layout."""
    single = images.ndim == 3
    data = _float(images.unsqueeze(0) if single else images)
    channels_last = standardize_data_format(data_format) == "channels_last"
    if not channels_last:
        data = gt.permute_dims(data, (0, 2, 3, 1))

    def restore(result: Tensor) -> Tensor:
        if not channels_last:
            result = gt.permute_dims(result, (0, 3, 1, 2))
        return result.squeeze(0) if single else result

    return data, restore


def affine_transform(images, transform, interpolation="bilinear", fill_mode="constant",
                     fill_value=0, data_format=None):
    """Images resampled through projective ``transform``s ``[a0, a1, a2, b0, b1, b2, c0, c1]``
    (one, or one per image): output pixel ``(x, y)`` reads the input at
    ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``, ``k = c0 x + c1 y + 1``, as Keras
    documents (its layers' transforms have ``c0 = c1 = 0``). ``"bilinear"`` mixes the four
    neighbouring pixels, ``"nearest"`` takes the closest (half to even); positions outside
    the image follow ``fill_mode`` (``"constant"`` reads ``fill_value``; ``"nearest"``,
    ``"wrap"``, ``"mirror"``, ``"reflect"``), as Keras' PyTorch backend. Each tap is Tile's
    gather of rows from the ``[N * H * W, C]`` pixel table, so the result is differentiable
    in the images and the transform.

        shifted = keras.ops.image.affine_transform(images, [1, 0, -3, 0, 1, 2, 0, 0])
    """
    _check_warp_modes(interpolation, fill_mode)
    x = _check_images(images)
    t = _float(convert_to_tensor(transform))
    if t.ndim not in (1, 2) or t.shape[-1] != 8:
        raise ValueError("Invalid transform: expected shape (8,) or (batch, 8). Received input "
                         f"with shape: transform.shape={t.shape}")
    original = keras_dtype(x)
    data, restore = _float_nhwc(x, data_format)
    n, h, w, c = data.shape
    t = t.reshape(-1, 8).astype(data.dtype)
    if t.shape[0] not in (1, n):
        raise ValueError(f"image.affine_transform: {t.shape[0]} transforms for {n} images")
    a0, a1, a2, b0, b1, b2, c0, c1 = (t[:, i].reshape(-1, 1, 1) for i in range(8))
    xs, ys = _pixel_grid(h, w, data)
    k = c0 * xs + c1 * ys + 1.0
    source_x = (a0 * xs + a1 * ys + a2) / k
    source_y = (b0 * xs + b1 * ys + b2) / k
    result = _resample(data, source_y.broadcast_to((n, h, w)), source_x.broadcast_to((n, h, w)),
                       interpolation, fill_mode, fill_value)
    result = restore(result)
    # integer images come back in their dtype, rounded (as Keras' PyTorch backend)
    return result if "float" in original else _cast(result.round(), original)


def map_coordinates(inputs, coordinates, order, fill_mode="constant", fill_value=0.0):
    """``inputs`` (any rank) read at ``coordinates`` (one array per axis of ``inputs``, all of
    the output's shape), as ``scipy.ndimage.map_coordinates`` and Keras' backends: ``order``
    0 takes the nearest element (half to even), 1 mixes the ``2 ** rank`` neighbours
    linearly; a neighbour outside follows ``fill_mode`` (``"constant"`` reads
    ``fill_value``; ``"nearest"``, ``"wrap"``, ``"mirror"``, ``"reflect"``, as
    :func:`affine_transform`). Each neighbour is one gather from the flattened input, so the
    result is differentiable in ``inputs`` and (order 1) in ``coordinates``.

        keras.ops.image.map_coordinates(image, [rows, columns], order=1, fill_mode="wrap")
    """
    x = convert_to_tensor(inputs)
    coords = [_float(convert_to_tensor(c)) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError("First dim of `coordinates` must be the same as the rank of `inputs`. "
                         f"Received inputs with shape: {x.shape} and coordinate leading dim "
                         f"of {len(coords)}")
    if coords[0].ndim < 1:
        raise ValueError("Invalid coordinates rank: expected at least rank 2. Received input "
                         f"with shape: {(len(coords),) + coords[0].shape}")
    if fill_mode not in _INDEX_FIXERS:
        raise ValueError("Invalid value for argument `fill_mode`. Expected one of "
                         f"{set(_INDEX_FIXERS)}. Received: fill_mode={fill_mode}")
    if order not in (0, 1):
        raise NotImplementedError("map_coordinates currently requires order<=1")
    original = keras_dtype(x)
    data = _float(x)
    shape = coords[0].shape
    coords = [c.astype(data.dtype).broadcast_to(shape) for c in coords]
    table = data.reshape(-1)
    strides = [int(np.prod(x.shape[axis + 1:])) for axis in range(x.ndim)]
    fix = _INDEX_FIXERS[fill_mode]
    per_axis = [_taps(c, "nearest" if order == 0 else "bilinear") for c in coords]
    result = None
    for taps in itertools.product(*per_axis):
        position, inside, weight = 0.0, None, 1.0
        for (index, tap_weight), size, stride in zip(taps, x.shape, strides):
            position = position + fix(index, size) * float(stride)
            if fill_mode == "constant":
                here = (index >= 0) & (index < size)
                inside = here if inside is None else inside & here
            weight = tap_weight * weight
        values = indexing.index_select(table, 0, position.astype(np.int32).reshape(-1))
        values = values.reshape(shape)
        if inside is not None:
            values = gt.where(inside, values, float(fill_value))
        term = values * weight
        result = term if result is None else result + term
    # integer inputs come back in their dtype, rounded (as Keras' PyTorch backend)
    return result if "float" in original else _cast(result.round(), original)


def compute_homography_matrix(start_points, end_points):
    """The projective transforms ``[N, 8]`` (:func:`affine_transform`'s layout) that take
    each of the four ``end_points`` ``[N, 4, 2]`` (``(x, y)``) to its ``start_points``, as
    Keras' backends: the 8 x 8 linear system of the four correspondences, solved by
    :func:`gingham.linalg.solve` (differentiable in both point sets).

        h = keras.ops.image.compute_homography_matrix(corners, moved_corners)
    """
    start = _float(convert_to_tensor(start_points))
    end = _float(convert_to_tensor(end_points))
    dtype = dtypes.result_type(keras_dtype(start), keras_dtype(end), float)
    start, end = _cast(start, dtype), _cast(end, dtype)
    if start.shape[-2:] != (4, 2) or end.shape != start.shape:
        raise ValueError("compute_homography_matrix: start_points and end_points must both be "
                         f"[N, 4, 2], got {start.shape} and {end.shape}")
    # float32 at least: the elimination of half-precision rows loses the transform
    compute = dtypes.result_type(dtype, "float32")
    start, end = _cast(start, compute), _cast(end, compute)
    sx, sy = start[..., 0], start[..., 1]    # [N, 4]
    ex, ey = end[..., 0], end[..., 1]
    one, zero = ex * 0.0 + 1.0, ex * 0.0
    # per point: the x row [ex, ey, 1, 0, 0, 0, -sx ex, -sx ey], then the y row
    x_rows = gt.stack([ex, ey, one, zero, zero, zero, -sx * ex, -sx * ey], -1)
    y_rows = gt.stack([zero, zero, zero, ex, ey, one, -sy * ex, -sy * ey], -1)
    matrix = gt.stack([x_rows, y_rows], 2).reshape(-1, 8, 8)     # [N, 4, 2, 8] -> rows
    target = gt.stack([sx, sy], 2).reshape(-1, 8, 1)
    return _cast(linalg.solve(matrix, target).reshape(-1, 8), dtype)


def perspective_transform(images, start_points, end_points, interpolation="bilinear",
                          fill_value=0, data_format=None):
    """Images warped so that each ``start_points`` quadrilateral (``[4, 2]`` or ``[N, 4, 2]``,
    ``(x, y)`` corners) lands on its ``end_points``, as Keras' PyTorch backend: the
    homography of :func:`compute_homography_matrix` applied by :func:`affine_transform`
    with ``fill_mode="constant"``. Differentiable in the images and the points.

        tilted = keras.ops.image.perspective_transform(images, corners, moved_corners)
    """
    _check_warp_modes(interpolation)
    x = _check_images(images)
    start = convert_to_tensor(start_points)
    end = convert_to_tensor(end_points)
    for name, points in (("start_points", start), ("end_points", end)):
        if points.shape[-2:] != (4, 2) or points.ndim not in (2, 3):
            raise ValueError(f"Invalid {name} shape: expected (4,2) for a single image or "
                             f"(N,4,2) for a batch. Received shape: {points.shape}")
    if start.shape != end.shape:
        raise ValueError("start_points and end_points must have the same shape. Received "
                         f"start_points.shape={start.shape}, end_points.shape={end.shape}")
    dtype = keras_dtype(x) if "float" in keras_dtype(x) else dtypes.result_type(
        keras_dtype(x), float)
    transforms = compute_homography_matrix(_cast(start.reshape(-1, 4, 2), dtype),
                                           _cast(end.reshape(-1, 4, 2), dtype))
    return affine_transform(x, transforms, interpolation, "constant", fill_value, data_format)


def _elastic_warp(images: Tensor, dx: Tensor, dy: Tensor, alpha, sigma: float,
                  interpolation: str, fill_mode: str, fill_value, data_format) -> Tensor:
    """:func:`elastic_transform` with its noise ``dx``, ``dy`` ``[N, H, W]`` given."""
    original = keras_dtype(images)
    data, restore = _float_nhwc(images, data_format)
    n, h, w, _ = data.shape
    size = int(6 * sigma) | 1   # Keras' kernel: odd, six sigmas wide
    blurred = [gaussian_blur((field * sigma).unsqueeze(-1).astype(data.dtype), (size, size),
                             (sigma, sigma)).squeeze(-1) for field in (dx, dy)]
    xs, ys = _pixel_grid(h, w, data)
    alpha = _float(convert_to_tensor(alpha)).astype(data.dtype)
    result = _resample(data, (ys + alpha * blurred[1]).broadcast_to((n, h, w)),
                       (xs + alpha * blurred[0]).broadcast_to((n, h, w)),
                       interpolation, fill_mode, fill_value)
    return _cast(restore(result), original)


def elastic_transform(images, alpha=20.0, sigma=5.0, interpolation="bilinear",
                      fill_mode="reflect", fill_value=0.0, seed=None, data_format=None):
    """Images displaced by a smooth random field, as Keras' PyTorch backend: two standard
    normal fields ``[N, H, W]`` (drawn from ``seed``) times ``sigma``, each Gaussian-blurred
    (a kernel ``int(6 * sigma) | 1`` wide), scaled by ``alpha`` and added to every pixel's
    position; the images are then read there as :func:`affine_transform` reads them
    (``fill_mode``, ``fill_value``). ``sigma`` must be known when the step is traced (it
    sets the kernel's size). Integer images come back in their dtype (truncated).

        warped = keras.ops.image.elastic_transform(images, alpha=30.0, sigma=4.0, seed=1)
    """
    _check_warp_modes(interpolation, fill_mode)
    x = _check_images(images)
    sigma = float(np.asarray(convert_to_numpy(sigma)))
    if standardize_data_format(data_format) == "channels_last":
        field = (1, *x.shape[-3:-1]) if x.ndim == 3 else x.shape[:3]
    else:
        field = (1, *x.shape[-2:]) if x.ndim == 3 else (x.shape[0], *x.shape[2:])
    dtype = keras_dtype(x) if "float" in keras_dtype(x) else "float32"
    dx, dy = random.normal((2, *field), dtype=dtype, seed=seed).unbind(0)
    return _elastic_warp(x, dx, dy, alpha, sigma, interpolation, fill_mode, fill_value,
                         data_format)


_SCALE_KERNELS = {
    "linear": lambda x: (1.0 - x).clamp(min=0.0),
    "cubic": lambda x: gt.where(x >= 2.0, 0.0, gt.where(x >= 1.0,
                                                        ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0,
                                                        ((1.5 * x - 2.5) * x) * x + 1.0)),
    "lanczos3": lambda x: _lanczos(3, x),
    "lanczos5": lambda x: _lanczos(5, x),
}
_SCALE_METHODS = {"linear": "linear", "bilinear": "linear", "trilinear": "linear",
                  "triangle": "linear", "cubic": "cubic", "bicubic": "cubic",
                  "tricubic": "cubic", "lanczos3": "lanczos3", "lanczos5": "lanczos5"}


def _lanczos(radius: int, x: Tensor) -> Tensor:
    # near 0 the quotient is 0/0: feed it a harmless 1 (its gradient stays finite)
    far = x > 1e-3
    safe = gt.where(far, x, 1.0)
    y = radius * (np.pi * safe).sin() * (np.pi * safe / radius).sin() / (np.pi ** 2 * safe * safe)
    return gt.where(x > radius, 0.0, gt.where(far, y, 1.0))


def _scale_weights(input_size: int, output_size: int, scale: Tensor, translation: Tensor,
                   kernel, antialias: bool) -> Tensor:
    """The ``[output, input]`` resampling matrix of one axis (JAX's
    ``compute_weight_mat``): the kernel at each input pixel's distance from each output
    pixel's source point, widened by ``1 / scale`` when antialiasing a shrink, each column
    normalised; output pixels whose source point lies outside get none."""
    inverse = 1.0 / scale
    width = gt.maximum(inverse, 1.0) if antialias else 1.0
    outputs = gt.tensor(np.arange(output_size).reshape(-1, 1).astype(scale.dtype),
                        device=scale.device)
    inputs = gt.tensor(np.arange(input_size).reshape(1, -1).astype(scale.dtype),
                       device=scale.device)
    source = (outputs + 0.5) * inverse - translation * inverse - 0.5    # [output, 1]
    weights = kernel((source - inputs).abs() / width)
    total = weights.sum(1, keepdims=True)
    tiny = 1000.0 * float(np.finfo(np.float32).eps)
    weights = gt.where(total.abs() > tiny, weights / gt.where(total != 0, total, 1.0), 0.0)
    inside = (source >= -0.5) & (source <= input_size - 0.5)
    return gt.where(inside, weights, 0.0)


def scale_and_translate(images, output_shape, scale, translation, spatial_dims, method,
                        antialias=True):
    """``jax.image.scale_and_translate``, as Keras' backends: each axis of ``spatial_dims``
    resampled to ``output_shape``'s size, output pixel ``o`` reading the input around
    ``(o + 0.5 - translation) / scale - 0.5`` through ``method``'s kernel (``"linear"``,
    ``"cubic"`` (Keys, a = -0.5), ``"lanczos3"``, ``"lanczos5"``, or their aliases), widened
    when ``antialias`` shrinks. Each axis is one contraction with its ``[out, in]`` weight
    matrix, computed on the device from ``scale`` and ``translation`` (so differentiable in
    them as in the images). Integer images are rounded and clipped to their range.

        zoomed = keras.ops.image.scale_and_translate(x, (1, 8, 8, 3), [2.0, 2.0], [0.0, 0.0],
                                                     (1, 2), "linear")
    """
    if method not in _SCALE_METHODS:
        raise ValueError("Invalid value for argument `method`. Expected of one "
                         f"{set(_SCALE_METHODS)}. Received: method={method}")
    x = convert_to_tensor(images)
    scale = _float(convert_to_tensor(scale))
    translation = _float(convert_to_tensor(translation))
    dtype = dtypes.result_type(keras_dtype(scale), keras_dtype(translation))
    scale, translation = _cast(scale, dtype), _cast(translation, dtype)
    kernel = _SCALE_KERNELS[_SCALE_METHODS[method]]
    integer = "int" in keras_dtype(x)
    result = _cast(x, "float32") if integer else x
    for i, axis in enumerate(spatial_dims):
        axis = axis % x.ndim
        weights = _scale_weights(x.shape[axis], int(output_shape[axis]), scale[i],
                                 translation[i], kernel, antialias)
        result = F._contract_axis(result, axis, weights.astype(result.dtype))
    if integer:
        result = gt.minimum(gt.maximum(result.round(), x.min().astype(result.dtype)),
                            x.max().astype(result.dtype))
        result = _cast(result, keras_dtype(x))
    return result


__getattr__ = unsupported_module_getattr(__name__, "image")
