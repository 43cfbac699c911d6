"""The element types of Tile and their promotion rules.

Tile's types are NumPy dtypes (``bfloat16`` comes from ``ml_dtypes``). Promotion follows NumPy's
rules for arrays; literals are *weak* and take the type of the tensor they meet
(``X * 0.5`` stays ``float16`` for a ``float16`` X), as docs/tile-decisions.md records.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

bfloat16 = np.dtype(ml_dtypes.bfloat16)

DTYPES: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": bfloat16,
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

FLOAT32 = DTYPES["float32"]
INT32 = DTYPES["int32"]
INT64 = DTYPES["int64"]
BOOL = DTYPES["bool"]


def dtype_name(dtype: np.dtype) -> str:
    """The Tile spelling of a dtype (``np.float32`` -> ``"float32"``)."""
    dtype = np.dtype(dtype)
    for name, candidate in DTYPES.items():
        if candidate == dtype:
            return name
    raise KeyError(f"{dtype} is not a Tile type")


def as_tile_dtype(dtype) -> np.dtype:
    """Normalise a dtype-like to a Tile dtype, or raise ``TypeError`` naming the supported types."""
    dtype = np.dtype(dtype)
    if any(dtype == candidate for candidate in DTYPES.values()):
        return dtype
    raise TypeError(f"dtype {dtype} is not supported by Tile; use one of {', '.join(DTYPES)}")


def is_float(dtype: np.dtype) -> bool:
    return dtype == bfloat16 or np.issubdtype(dtype, np.floating)


def is_bool(dtype: np.dtype) -> bool:
    return dtype == BOOL


def is_integer(dtype: np.dtype) -> bool:
    """True for signed and unsigned integers (not bool)."""
    return dtype != bfloat16 and np.issubdtype(dtype, np.integer)


def is_signed(dtype: np.dtype) -> bool:
    return is_float(dtype) or (is_integer(dtype) and np.issubdtype(dtype, np.signedinteger))


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """NumPy's promotion for arrays, extended to bfloat16.

    bfloat16 with float16 gives float32 (neither holds the other); bfloat16 with any integer
    stays bfloat16, as float16 does in NumPy's table for small integers.
    """
    if a == b:
        return a
    if a == bfloat16 or b == bfloat16:
        other = b if a == bfloat16 else a
        if other == np.float16:
            return FLOAT32
        if is_float(other):
            return other if np.dtype(other).itemsize > 2 else FLOAT32
        return bfloat16
    return np.promote_types(a, b)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The type arithmetic runs in: half types compute in float32 and round once per result."""
    return FLOAT32 if dtype in (np.dtype(np.float16), bfloat16) else dtype


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
