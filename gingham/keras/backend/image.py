"""``keras.ops.image`` for gingham: ``resize`` (Resizing, bilinear UpSampling2D) on
:func:`gingham.nn.functional.interpolate`, as Keras' PyTorch backend resizes; the other
image ops raise NotImplementedError.

    keras.ops.image.resize(images, (64, 64))        # bilinear, half-pixel centres
"""

from __future__ import annotations

from keras.src.backend.config import standardize_data_format

from ...frontend import tensor as gt
from ...nn import functional as F
from ._unsupported import unsupported_module_getattr
from .core import convert_to_tensor
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
    the input's: other nearest resizes, antialiased downsampling and the aspect-ratio
    options raise NotImplementedError."""
    if len(size) != 2:
        raise ValueError("Argument `size` must be a tuple of two elements (height, width). "
                         f"Received: size={size}")
    if crop_to_aspect_ratio or pad_to_aspect_ratio:
        raise _unsupported_resize("with crop_to_aspect_ratio / pad_to_aspect_ratio")
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
    spatial, size = data.shape[2:], tuple(int(s) for s in size)
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


__getattr__ = unsupported_module_getattr(__name__, "image")
