"""Philox-2x32-10, the counter-based generator behind ``prng`` (Salmon et al., SC 2011).

Counter-based means the i-th number is a pure function of (key, i): every device computes the
same numbers in any order, and a compiled program stays deterministic. The kernels generated
for each backend implement exactly this function; this NumPy version is their reference.
"""

from __future__ import annotations

import numpy as np

PHILOX_M = 0xD256D193  # the multiplier of Philox-2x32
PHILOX_W = 0x9E3779B9  # the key increment (golden ratio)
ROUNDS = 10
_MASK = 0xFFFFFFFF


def philox2x32(counter0: np.ndarray, counter1: np.ndarray, key: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten Philox rounds on uint32 counters (given as uint64 arrays holding 32-bit values)."""
    c0 = counter0.astype(np.uint64) & _MASK
    c1 = counter1.astype(np.uint64) & _MASK
    k = np.uint64(key & _MASK)
    for round_number in range(ROUNDS):
        if round_number:
            k = np.uint64((int(k) + PHILOX_W) & _MASK)
        product = c0 * np.uint64(PHILOX_M)
        high = product >> np.uint64(32)
        low = product & np.uint64(_MASK)
        c0, c1 = (high ^ k ^ c1) & np.uint64(_MASK), low
    return c0, c1


def philox_uniform(key: int, counter_high: int, count: int) -> np.ndarray:
    """``count`` float32 numbers in [0, 1): element p is ``(philox(p, counter_high)[0] >> 8) / 2^24``."""
    positions = np.arange(count, dtype=np.uint64) & np.uint64(_MASK)
    high = np.full(count, counter_high & _MASK, dtype=np.uint64)
    word, _ = philox2x32(positions, high, key)
    return ((word >> np.uint64(8)).astype(np.float64) * 2.0**-24).astype(np.float32)
