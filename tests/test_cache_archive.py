"""Carrying a warm cache to another machine (gingham.cache_archive): a fresh process over an
imported cache compiles nothing and computes what NumPy computes; nothing unsafe or damaged in
an archive reaches the cache."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from gingham.cache import DiskCache
from gingham.cache_archive import (CacheArchiveError, cache_usage, export_archive,
                                   import_archive)
from gingham.devices import list_devices
from gingham.tune.db import TuningDB

COMPILED = [d.id for d in list_devices() if d.info.dialect is not None]
REPO = Path(__file__).resolve().parents[1]


def _python_path() -> str:
    """This checkout first, then what the caller's path holds (where the GPU machine's
    carried wheels are)."""
    return os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])

# A fresh process: runs a small network's step-like program on DEVICE, checks it against
# NumPy, and prints how many pieces it compiled and whether the program came from the cache.
RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    from gingham import tile
    from gingham.devices import get_device
    device = get_device(sys.argv[1])
    fn = tile.function('''
    function (X[N, K], W[K, M], B[M]) -> (Y) {
        H[n, m : N, M] = +(X[n, k] * W[k, m]);
        Y = max(H + B, 0.0) * 1.3125;
    }''')
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((33, 20), (20, 17), (17,)))
    y = fn(x, w, b, device=device.id)
    want = np.maximum(x @ w + b, 0) * np.float32(1.3125)
    print(json.dumps({"compiles": device.stats.compiles,
                      "close": bool(np.allclose(y, want, rtol=1e-5, atol=1e-5))}))
""")


def run_fresh(device_id: str, cache: Path) -> dict:
    env = dict(os.environ, GINGHAM_CACHE_DIR=str(cache), GINGHAM_DEBUG="1",
               PYTHONPATH=_python_path())
    proc = subprocess.run([sys.executable, "-c", RUN, device_id], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["from_program_cache"] = "from the program cache" in proc.stderr
    return result


@pytest.mark.parametrize("device_id", COMPILED)
def test_a_fresh_machine_with_the_archive_compiles_nothing(device_id, tmp_path):
    warm, fresh, archive = tmp_path / "warm", tmp_path / "fresh", tmp_path / "warm.tar.gz"
    first = run_fresh(device_id, warm)
    assert first["close"] and first["compiles"] > 0 and not first["from_program_cache"]

    exported = export_archive(archive, root=warm)
    assert exported.entries == {ns: n for ns, (n, _) in cache_usage(warm).items()}
    imported = import_archive(archive, root=fresh)
    assert imported.added == exported.entries and not imported.rejected

    again = run_fresh(device_id, fresh)
    assert again == {"compiles": 0, "close": True, "from_program_cache": True}


def test_import_keeps_what_is_there_and_is_idempotent(tmp_path):
    source, target = DiskCache("cpu", tmp_path / "a"), DiskCache("cpu", tmp_path / "b")
    shared, only_source = DiskCache.key("shared"), DiskCache.key("only in a")
    source.put(shared, b"from a")
    source.put(only_source, b"new")
    target.put(shared, b"from b")  # the same key: kept, never replaced
    export_archive(tmp_path / "a.tgz", root=tmp_path / "a")
    summary = import_archive(tmp_path / "a.tgz", root=tmp_path / "b")
    assert summary.added == {"cpu": 1} and summary.present == {"cpu": 1}
    assert target.get(shared) == b"from b" and target.get(only_source) == b"new"
    again = import_archive(tmp_path / "a.tgz", root=tmp_path / "b")
    assert again.added == {} and again.present == {"cpu": 2}


def _archive(path: Path, members: dict[str, bytes], manifest: dict | None = None) -> Path:
    manifest = {"format": "gingham-cache", "version": 1} if manifest is None else manifest
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {"manifest.json": json.dumps(manifest).encode(), **members}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _entry(payload: bytes) -> bytes:
    """An entry as the disk cache writes it (header with checksum, then the payload)."""
    cache = DiskCache("scratch", Path(os.environ["GINGHAM_CACHE_DIR"]) / "entry-maker")
    key = DiskCache.key(payload)
    cache.put(key, payload)
    return cache.path(key).read_bytes()


def test_unsafe_and_damaged_members_are_rejected(tmp_path):
    good, key = _entry(b"binary"), DiskCache.key("k")
    damaged = bytearray(good)
    damaged[-1] ^= 1
    archive = _archive(tmp_path / "x.tgz", {
        f"cpu/{key}": good,
        f"programs/{DiskCache.key('torn')}": bytes(damaged),  # its checksum fails
        f"../../escaped/{key}": good,  # a path out of the cache
        f"cpu/{key[:20]}": good,  # not a key
        f"failed/{key}": good,  # never carried
    })
    root = tmp_path / "cache"
    summary = import_archive(archive, root=root)
    assert summary.added == {"cpu": 1} and len(summary.rejected) == 4
    assert DiskCache("cpu", root).get(key) == b"binary"
    assert {p.name for p in root.iterdir()} == {"cpu"}  # nothing else was written
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("manifest,match", [
    (None, "no readable manifest.json"),
    ({"format": "zip", "version": 1}, "does not say format"),
    ({"format": "gingham-cache", "version": 99}, "version 99"),
])
def test_what_is_not_an_archive_of_this_version_is_refused(tmp_path, manifest, match):
    path = tmp_path / "a.tgz"
    if manifest is None:
        with tarfile.open(path, "w:gz") as tar:
            info = tarfile.TarInfo("readme")
            tar.addfile(info, io.BytesIO(b""))
    else:
        _archive(path, {}, manifest)
    with pytest.raises(CacheArchiveError, match=match):
        import_archive(path, root=tmp_path / "cache")


def test_not_a_tar_file_and_a_missing_file_name_the_path(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CacheArchiveError, match="notes.txt is not a gingham cache archive"):
        import_archive(tmp_path / "notes.txt", root=tmp_path / "cache")
    with pytest.raises(CacheArchiveError, match="cannot read the cache archive .*missing"):
        import_archive(tmp_path / "missing.tgz", root=tmp_path / "cache")


def test_tuning_tokens_are_adopted_where_absent_and_renewed_where_entries_join(tmp_path):
    """The generation tokens key the compiled programs: a fresh cache takes the archive's (its
    programs are found); a cache with its own tuning entries gets a new one for each of its
    devices when entries arrive (its programs are lowered again, with the merged database)."""
    exporter, fresh, tuned = (TuningDB(tmp_path / name) for name in ("a", "fresh", "tuned"))
    exporter.put("kernel-1", "device-A", {"config": {"tile": 64}})
    tuned.put("kernel-2", "device-B", {"config": {"tile": 32}})
    own_token = tuned.generation("device-B")
    export_archive(tmp_path / "a.tgz", root=tmp_path / "a")

    import_archive(tmp_path / "a.tgz", root=tmp_path / "fresh")
    assert fresh.get("kernel-1", "device-A") == {"config": {"tile": 64}}
    assert fresh.generation("device-A") == exporter.generation("device-A")

    summary = import_archive(tmp_path / "a.tgz", root=tmp_path / "tuned")
    assert tuned.get("kernel-1", "device-A") == {"config": {"tile": 64}}
    assert tuned.get("kernel-2", "device-B") == {"config": {"tile": 32}}
    assert summary.renewed == 1 and tuned.generation("device-B") not in ("", own_token)


def test_cli_export_import_info(tmp_path):
    warm = tmp_path / "warm"
    DiskCache("cpu", warm).put(DiskCache.key("x"), b"kernel")
    env = dict(os.environ, PYTHONPATH=_python_path())

    def gingham(cache: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gingham", "cache", *args], cwd=REPO,
                              env=dict(env, GINGHAM_CACHE_DIR=str(cache)),
                              capture_output=True, text=True, timeout=120)

    out = gingham(warm, "export", str(tmp_path / "w.tgz"))
    assert out.returncode == 0 and "exported 1 cpu to" in out.stdout
    out = gingham(tmp_path / "new", "import", str(tmp_path / "w.tgz"))
    assert out.returncode == 0 and "added 1 cpu; kept nothing" in out.stdout
    out = gingham(tmp_path / "new", "info")
    assert out.returncode == 0 and "cpu" in out.stdout and "1 entries" in out.stdout
    out = gingham(tmp_path / "new", "import", str(tmp_path / "absent.tgz"))
    assert out.returncode == 1 and "absent.tgz" in out.stderr
    (tmp_path / "new" / "notes").mkdir()  # not gingham's: clear leaves it alone
    (tmp_path / "new" / "notes" / "todo.txt").write_text("keep me")
    out = gingham(tmp_path / "new", "clear")
    assert out.returncode == 0 and "cleared" in out.stdout and "1 entries" in out.stdout
    assert not (tmp_path / "new" / "cpu").exists()
    assert (tmp_path / "new" / "notes" / "todo.txt").read_text() == "keep me"
