"""The content-addressed disk cache: round trips, damaged entries, concurrent writers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gingham.cache import DiskCache, cache_key
from gingham.config import get_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path):
    return DiskCache("test", root=tmp_path)


def test_round_trip_and_miss(cache):
    key = cache.key("source", "entry", ("-O3",))
    assert cache.get(key) is None
    cache.put(key, b"binary \x00\xff")
    assert cache.get(key) == b"binary \x00\xff"
    cache.put(key, b"")
    assert cache.get(key) == b""


def test_keys_are_content_addresses():
    assert cache_key("a", "b") == cache_key("a", "b")
    assert cache_key("ab", "c") != cache_key("a", "bc")
    assert cache_key(("x", 1)) != cache_key("x", 1)
    assert cache_key(b"a") == cache_key("a")
    assert len(cache_key("a")) == 64


def test_default_root_is_the_configured_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GINGHAM_CACHE_DIR", str(tmp_path / "elsewhere"))
    cache = DiskCache("ns")
    assert cache.directory == tmp_path / "elsewhere" / "ns"
    assert get_config().cache_dir == tmp_path / "elsewhere"


@pytest.mark.parametrize("damage", ["truncate", "garble", "header", "empty", "extend"])
def test_damaged_entry_is_discarded_and_rebuilt(cache, damage):
    key = cache.key("kernel")
    payload = os.urandom(4096)
    cache.put(key, payload)
    path = cache.path(key)
    blob = bytearray(path.read_bytes())
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "garble":
        blob[-100] ^= 0x40
    elif damage == "header":
        blob[0] ^= 0x01
    elif damage == "empty":
        blob = bytearray()
    else:
        blob += b"extra"
    path.write_bytes(bytes(blob))

    assert cache.get(key) is None, "a damaged entry must never be trusted"
    assert not path.exists(), "a damaged entry must be deleted"
    cache.put(key, payload)  # rebuilt
    assert cache.get(key) == payload


def test_no_temporary_files_left(cache):
    for i in range(5):
        cache.put(cache.key(i), b"x" * i)
    leftovers = [p for p in cache.directory.rglob("*") if p.name.startswith(".tmp")]
    assert leftovers == []


_WRITER = """
import sys
from gingham.cache import DiskCache
root, key, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
cache = DiskCache("test", root=root)
for i in range(rounds):
    index = i % 3
    cache.put(key, bytes([index]) * (256 * 1024 + index))
"""


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path):
    # Several processes rewrite one key with different whole payloads while this process
    # reads: every read must be a miss or one of the whole payloads.
    key = cache_key("contended")
    payloads = [bytes([i]) * (256 * 1024 + i) for i in range(3)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")]))
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), key, "60"],
                                env=env) for _ in range(3)]
    cache = DiskCache("test", root=tmp_path)
    seen = 0
    while any(w.poll() is None for w in writers):
        value = cache.get(key)
        assert value is None or value in payloads
        seen += value is not None
    assert [w.wait() for w in writers] == [0, 0, 0]
    assert cache.get(key) in payloads
    assert seen > 0
