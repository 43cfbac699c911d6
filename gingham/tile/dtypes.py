"""The element types of Tile and their promotion rules.

Tile's types are NumPy dtypes (``bfloat16`` comes from ``ml_dtypes``). Promotion follows NumPy's
rules for arrays; literals are *weak* and take the type of the tensor they meet
(``X * 0.5`` stays ``float16`` for a ``float16`` X), as docs/tile-decisions.md records.
"""

from __future__ import annotations

import functools
import sys
from typing import Iterator, Mapping

import numpy as np

# bfloat16 is ml_dtypes' type, imported when first asked for (``dtypes.bfloat16``, a
# ``"bfloat16"`` name): ml_dtypes 0.7 spends 0.55 s registering its types with NumPy, most of
# ``import gingham``, which a float32 program never needs.
_EAGER: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}
_NAMES = ("float16", "bfloat16", *(name for name in _EAGER if name != "float16"))


@functools.lru_cache(maxsize=None)
def _bfloat16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def __getattr__(name: str):
    """``dtypes.bfloat16``: ml_dtypes' bfloat16, imported on first use."""
    if name == "bfloat16":
        return _bfloat16()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _TileTypes(Mapping[str, np.dtype]):
    """Tile's type names and their dtypes; ``["bfloat16"]`` imports ml_dtypes."""

    def __getitem__(self, name: str) -> np.dtype:
        return _bfloat16() if name == "bfloat16" else _EAGER[name]

    def __contains__(self, name: object) -> bool:
        return name in _NAMES

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)


DTYPES: Mapping[str, np.dtype] = _TileTypes()

FLOAT16 = _EAGER["float16"]
FLOAT32 = _EAGER["float32"]
FLOAT64 = _EAGER["float64"]
INT32 = _EAGER["int32"]
INT64 = _EAGER["int64"]
BOOL = _EAGER["bool"]


def is_bfloat16(dtype) -> bool:
    """Whether ``dtype`` (a dtype, a scalar type or a name) is bfloat16, without importing
    ml_dtypes: only ml_dtypes makes bfloat16 values, so until something imported it, nothing
    but the name can be one. (Compared, not named: ``dtype.name`` is a Python property of
    3 us, asked tens of thousands of times while a step is lowered, and the class of a
    user dtype is named differently from one NumPy version to another.)"""
    if type(dtype) is str:
        return dtype == "bfloat16"
    if "ml_dtypes" not in sys.modules:
        return False
    try:
        return bool(dtype == _bfloat16())
    except TypeError:  # not a dtype-like
        return False


def is_half(dtype) -> bool:
    """float16 or bfloat16: the types that compute in float32 and round once per result."""
    return is_bfloat16(dtype) or dtype == FLOAT16


def dtype_name(dtype: np.dtype) -> str:
    """The Tile spelling of a dtype (``np.float32`` -> ``"float32"``)."""
    if is_bfloat16(dtype):
        return "bfloat16"
    dtype = np.dtype(dtype)
    for name, candidate in _EAGER.items():
        if candidate == dtype:
            return name
    raise KeyError(f"{dtype} is not a Tile type")


def as_tile_dtype(dtype) -> np.dtype:
    """Normalise a dtype-like to a Tile dtype, or raise ``TypeError`` naming the supported types."""
    if is_bfloat16(dtype):
        return _bfloat16()
    dtype = np.dtype(dtype)
    if any(dtype == candidate for candidate in _EAGER.values()):
        return dtype
    raise TypeError(f"dtype {dtype} is not supported by Tile; use one of {', '.join(DTYPES)}")


def is_float(dtype: np.dtype) -> bool:
    if isinstance(dtype, np.dtype):  # the common case, without issubdtype's 1.5 us
        return dtype.kind == "f" or is_bfloat16(dtype)
    return is_bfloat16(dtype) or np.issubdtype(dtype, np.floating)


def is_bool(dtype: np.dtype) -> bool:
    return dtype == BOOL


def is_integer(dtype: np.dtype) -> bool:
    """True for signed and unsigned integers (not bool)."""
    if isinstance(dtype, np.dtype):
        return dtype.kind in ("i", "u")
    return not is_bfloat16(dtype) and np.issubdtype(dtype, np.integer)


def is_signed(dtype: np.dtype) -> bool:
    return is_float(dtype) or (is_integer(dtype) and np.issubdtype(dtype, np.signedinteger))


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """NumPy's promotion for arrays, extended to bfloat16.

    bfloat16 with float16 gives float32 (neither holds the other); bfloat16 with any integer
    stays bfloat16, as float16 does in NumPy's table for small integers.
    """
    if a == b:
        return a
    if is_bfloat16(a) or is_bfloat16(b):
        other = b if is_bfloat16(a) else a
        if other == np.float16:
            return FLOAT32
        if is_float(other):
            return other if np.dtype(other).itemsize > 2 else FLOAT32
        return _bfloat16()
    return np.promote_types(a, b)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The type arithmetic runs in: half types compute in float32 and round once per result."""
    return FLOAT32 if is_half(dtype) else dtype


def lowest(dtype: np.dtype):
    """The identity of a max aggregation: the lowest value of the type."""
    if is_float(dtype):
        return -np.inf
    if is_bool(dtype):
        return False
    return np.iinfo(dtype).min


def highest(dtype: np.dtype):
    """The identity of a min aggregation: the highest value of the type."""
    if is_float(dtype):
        return np.inf
    if is_bool(dtype):
        return True
    return np.iinfo(dtype).max
