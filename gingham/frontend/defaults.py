"""The default floating-point dtype: what Python floats, float factories (``zeros``, ``rand``,
``eye``, ``linspace``, ...) and new layers' parameters become, as ``torch.get_default_dtype``.

One process-wide value (as PyTorch's), float32 unless :func:`set_default_float` changed it.
Read where a dtype is chosen, never cached, so a change applies to the next tensor made.

    set_default_float("float64")
    gingham.tensor(1.5).dtype          # float64
    gingham.arange(3) * 0.5            # float64: an integer tensor times a Python float
"""

from __future__ import annotations

import numpy as np

from ..tile import dtypes as dt

_default_float: np.dtype = dt.FLOAT32


def default_float() -> np.dtype:
    """The dtype Python floats and float factories give (float32 unless changed)."""
    return _default_float


def set_default_float(dtype) -> None:
    """Make ``dtype`` (a floating-point dtype or its name) the default float dtype.

        set_default_float(gingham.float64)

    ``TypeError`` for an integer or bool dtype, as ``torch.set_default_dtype``'s."""
    global _default_float
    resolved = dt.as_tile_dtype(dtype)
    if not dt.is_float(resolved):
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the "
                        f"default type, not {dt.dtype_name(resolved)}")
    _default_float = resolved
