"""A bounded, least-recently-used map for the process's in-memory caches.

Programs, bindings and executables are cached so that a model's ops compile once; a program
that sees ever new shapes (eager code over varying batch sizes, a long-running server) must not
grow them without end — an executable holds device buffers.

    >>> cache = LRU(2)
    >>> cache["a"] = 1; cache["b"] = 2; cache.get("a"); cache["c"] = 3
    >>> "b" in cache      # the least recently used went
    False
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A mapping that keeps its ``capacity`` most recently used entries."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU cache needs a capacity of at least 1, not {capacity}")
        self.capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        try:
            value = self._data[key]
        except KeyError:
            return default
        self._data.move_to_end(key)
        return value

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        self._data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()
