"""The bounded in-memory caches: least recently used entries go, results stay right."""

from __future__ import annotations

import numpy as np
import pytest

from gingham import runtime, tile
from gingham.lru import LRU


def test_lru_keeps_the_most_recently_used():
    cache = LRU(2)
    cache["a"] = 1
    cache["b"] = 2
    assert cache.get("a") == 1  # "a" is now the most recent
    cache["c"] = 3
    assert "b" not in cache and "a" in cache and "c" in cache
    assert len(cache) == 2
    assert cache["c"] == 3
    with pytest.raises(KeyError):
        cache["b"]
    with pytest.raises(ValueError, match="capacity"):
        LRU(0)


def test_executables_are_bounded_and_evicted_ones_recompile(monkeypatch):
    monkeypatch.setattr(runtime, "_executables", LRU(3))
    fn = tile.function("function (A[N]) -> (B) { B = A * 2.0 + 1.0; }")
    for n in range(1, 7):  # six signatures through a cache of three
        a = np.arange(n, dtype=np.float32)
        (b,) = runtime.execute(fn.bind(a), [a], "cpu")
        np.testing.assert_array_equal(b, a * 2 + 1)
    assert len(runtime._executables) == 3
    a = np.arange(1, dtype=np.float32)  # the first signature was evicted: compiled again
    (b,) = runtime.execute(fn.bind(a), [a], "cpu")
    np.testing.assert_array_equal(b, a * 2 + 1)
