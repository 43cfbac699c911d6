"""The tuning database: the measured best schedule per (kernel key, device key), on disk.

Entries live in the disk cache (``DiskCache("tuning")``: atomic writes, checksummed reads) as
JSON under ``key(kernel key, device key, DB_VERSION)``, so that concurrent processes never see
half an entry and a damaged one reads as a miss. An entry holds the schedule family, the chosen
configuration's fields, and what the search measured (the tuned and the untuned time, how many
candidates ran, which were dropped as wrong)::

    {"family": "cpu-tiled", "config": {"mr": 6, "nr": 16, ...}, "seconds": 0.0061,
     "default_seconds": 0.0068, "default": {...}, "tried": 8, "rejected": []}

    >>> db = TuningDB()
    >>> db.put(kernel, device, entry); db.get(kernel, device)["config"]

Each device also has a *generation*: a token replaced whenever one of its entries is stored or
deleted. The program cache (:mod:`gingham.compiler.programs`) keys a compiled program with it,
so that a program lowered before ``gingham tune`` is lowered again, with the tuned schedules.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from ..cache import DiskCache, is_hex
from ..config import debug_print

#: Bump when the schedule families' configurations change meaning: old entries are ignored.
#: 2: a GPU tiled configuration on CUDA caps its registers unless ``bounded`` is false (an
#: entry of version 1 was measured without the cap).
DB_VERSION = 2
_NAMESPACE = "tuning"


class TuningDB:
    """Persistent tuning results; see the module docstring."""

    def __init__(self, root: Path | None = None) -> None:
        # root: a cache directory other than the configured one (importing an archive).
        self.cache = DiskCache(_NAMESPACE, root)

    @staticmethod
    def key(kernel_key: str, device_key: str) -> str:
        return DiskCache.key("tuning", DB_VERSION, kernel_key, device_key)

    def get(self, kernel_key: str, device_key: str) -> dict[str, Any] | None:
        """The stored entry, or None (a miss, or an entry that does not parse: deleted)."""
        key = self.key(kernel_key, device_key)
        blob = self.cache.get(key)
        if blob is None:
            return None
        try:
            entry = json.loads(blob)
            if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
                raise ValueError("not an entry")
            return entry
        except ValueError as exc:
            debug_print(1, f"tuning: discarding unusable entry {key[:12]} ({exc})")
            self.cache.delete(key)
            return None

    def put(self, kernel_key: str, device_key: str, entry: dict[str, Any]) -> None:
        self.cache.put(self.key(kernel_key, device_key),
                       json.dumps(entry, sort_keys=True).encode())
        self._new_generation(device_key)

    def delete(self, kernel_key: str, device_key: str) -> None:
        self.cache.delete(self.key(kernel_key, device_key))
        self._new_generation(device_key)

    def generation(self, device_key: str) -> str:
        """A token that changes whenever an entry of this device is stored or deleted ("" if
        none ever was)."""
        token = self.cache.get(self._generation_key(device_key))
        return token.decode("ascii", errors="replace") if token is not None else ""

    def _new_generation(self, device_key: str) -> None:
        # After the entry: a reader that sees the new token also sees the new entry.
        self.cache.put(self._generation_key(device_key), uuid.uuid4().hex.encode("ascii"))

    @staticmethod
    def is_generation_token(payload: bytes) -> bool:
        """Whether a payload of this database's namespace is a device's generation token
        (``uuid4().hex``) rather than an entry (a JSON object): what importing a cache archive
        (:mod:`gingham.cache_archive`) tells apart."""
        return len(payload) == 32 and is_hex(payload.decode("latin-1"))  # every byte decodes

    def generation_token_keys(self) -> list[str]:
        """The disk-cache keys of the generation tokens stored now (one per device that has
        had an entry)."""
        return [key for key in self.cache.keys()
                if self.is_generation_token(self.cache.get(key) or b"")]

    def renew_generation_tokens(self, keys: list[str]) -> None:
        """Give the devices of these token keys new tokens: programs lowered before (keyed
        with the old ones) are lowered again, with what the database holds now."""
        for key in keys:
            self.cache.put(key, uuid.uuid4().hex.encode("ascii"))

    @staticmethod
    def _generation_key(device_key: str) -> str:
        return DiskCache.key("tuning-generation", DB_VERSION, device_key)


__all__ = ["TuningDB", "DB_VERSION"]
