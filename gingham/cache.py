"""A content-addressed disk cache for expensive products (compiled kernels, tuning results).

Every entry lives at ``config.cache_dir/<namespace>/<key[:2]>/<key>`` and starts with a header
holding a magic tag, the payload's length and its SHA-256. A reader checks all three: a
truncated or damaged entry (a crash mid-write on a filesystem without ordered writes, a disk
error, a user's stray edit) is deleted and reported as a miss, never trusted.

Writes go to a temporary file in the same directory and are published with ``os.replace``,
which is atomic on POSIX and Windows: concurrent processes see the old entry or the new one,
never half of one. Two processes that build the same key both write the same bytes; the last
rename wins, and nothing is lost.

Example::

    >>> from gingham.cache import DiskCache
    >>> cache = DiskCache("cpu")
    >>> key = cache.key("void f(void) {}", "f", ("-O3",))
    >>> cache.get(key) is None          # a miss the first time
    True
    >>> cache.put(key, b"\\x7fELF...")
    >>> cache.get(key)
    b'\\x7fELF...'
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path

from gingham.config import debug_print, get_config

# magic (8 bytes) | payload length (8 bytes, little-endian) | sha256 of payload (32 bytes)
_MAGIC = b"GINGHAM1"
_HEADER = struct.Struct("<8sQ32s")


def _as_bytes(part: object) -> bytes:
    if isinstance(part, bytes):
        return part
    if isinstance(part, str):
        return part.encode("utf-8")
    if isinstance(part, (tuple, list)):
        return b"(" + b",".join(_length_prefixed(_as_bytes(p)) for p in part) + b")"
    return repr(part).encode("utf-8")


def _length_prefixed(data: bytes) -> bytes:
    # The length prefix keeps ("ab", "c") and ("a", "bc") from hashing alike.
    return struct.pack("<Q", len(data)) + data


def cache_key(*parts: object) -> str:
    """SHA-256 (hex) of the parts: str, bytes, numbers, and tuples/lists of those."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(_length_prefixed(_as_bytes(part)))
    return digest.hexdigest()


class DiskCache:
    """Content-addressed entries under ``cache_dir/namespace``; see the module docstring.

    ``root`` defaults to ``get_config().cache_dir``, read when the cache is created.
    """

    def __init__(self, namespace: str, root: Path | None = None) -> None:
        assert namespace and "/" not in namespace and namespace not in (".", "..")
        self.namespace = namespace
        self.directory = Path(root or get_config().cache_dir) / namespace

    @staticmethod
    def key(*parts: object) -> str:
        """The key of an entry: SHA-256 (hex) of everything that determines its content."""
        return cache_key(*parts)

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives (it may not exist)."""
        assert len(key) >= 3 and all(c in "0123456789abcdef" for c in key), key
        return self.directory / key[:2] / key

    def get(self, key: str) -> bytes | None:
        """The payload stored under ``key``, or None on a miss or a damaged entry."""
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            debug_print(1, f"cache: cannot read {path}: {exc}; treating it as a miss")
            return None
        payload = _unpack(blob)
        if payload is None:
            debug_print(1, f"cache: discarding damaged entry {path}")
            path.unlink(missing_ok=True)
        return payload

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (the entry appears whole or not at all)."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = _HEADER.pack(_MAGIC, len(data), hashlib.sha256(data).digest())
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=f"-{os.getpid()}")
        try:
            # No fsync: after a power loss a torn entry fails its checksum and is rebuilt,
            # which costs one compile; fsync on every entry would cost milliseconds each time.
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def delete(self, key: str) -> None:
        """Remove the entry for ``key`` if it exists."""
        self.path(key).unlink(missing_ok=True)

    def keys(self) -> list[str]:
        """The key of every entry on disk, sorted (a write in progress is not an entry)."""
        if not self.directory.is_dir():
            return []
        return sorted(path.name for path in self.directory.glob("??/*")
                      if is_key(path.name) and path.parent.name == path.name[:2])


def is_key(text: str) -> bool:
    """Whether ``text`` is an entry's key: a SHA-256 in lowercase hex."""
    return len(text) == 64 and is_hex(text)


def is_hex(text: str) -> bool:
    """Whether ``text`` is lowercase hex digits (and not empty): the names the cache gives."""
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _unpack(blob: bytes) -> bytes | None:
    if len(blob) < _HEADER.size:
        return None
    magic, length, checksum = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if magic != _MAGIC or length != len(payload):
        return None
    if hashlib.sha256(payload).digest() != checksum:
        return None
    return payload


def save_failed_source(source: str, suffix: str) -> Path:
    """Save kernel source that a compiler rejected to ``cache_dir/failed/<hash><suffix>``.

    Returns the path, for the error message. Example: ``save_failed_source(src, ".cl")``.
    """
    directory = get_config().cache_dir / "failed"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{cache_key(source)[:16]}{suffix}"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(source)
    os.replace(tmp, path)
    return path
