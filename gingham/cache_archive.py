"""A warm cache carried to other machines: ``gingham cache export`` and ``gingham cache import``.

A fresh machine pays for its first run: every kernel of a training step is compiled (ResNet-9
in bf16 on an H100 host: a 1.9 s first step against 6 ms steps) and every measured search of
``gingham tune`` is run again. What one machine has built and tuned can travel instead, to the
machines of the same kind (a cluster's nodes, CI runners, a container image), as PyTorch's
cache artifacts do for ``torch.compile``::

    $ gingham tune model resnet9 --device cuda:0 --precision bf16   # on one machine
    $ gingham cache export resnet9-h100.tar.gz
    $ gingham cache import resnet9-h100.tar.gz                      # on each of the others

The archive (a gzipped tar) holds every entry of the disk cache (:mod:`gingham.cache`:
compiled kernels, compiled programs, device models, the tuning database; not the sources that
failed to compile) and a manifest. Every entry is keyed by all that made it: a kernel by its
source and the compiler's and the device's identity (the C backend's by the host CPU's name
and instruction-set flags too), a program by gingham's own sources, the device and the tuning
database's state. An entry made on another kind of machine is never found there: it takes disk
space and nothing else.

Importing trusts nothing in the archive: each member is read as bytes, its name must be
``<namespace>/<key>`` (no path from the archive reaches the file system), its checksum must
hold, and it is written through :meth:`DiskCache.put` (atomic). A member that fails is
skipped and counted. An entry the cache holds already is kept. The tuning database's
generation tokens (:class:`gingham.tune.db.TuningDB`, which key the compiled programs) are taken
from the archive only for devices that have none here, so that the archive's programs are found
on a fresh machine; where tuning entries arrive beside a device's own, that device's token is
renewed, and its programs are lowered again once, with the merged database.

    >>> summary = export_archive(Path("warm.tar.gz"))   # after a ResNet-9 step on cpu
    >>> summary.entries
    {'cpu': 143, 'device-model': 1, 'programs': 1}
    >>> import_archive(Path("warm.tar.gz")).added        # on another machine of the kind
    {'cpu': 143, 'device-model': 1, 'programs': 1}

(On the 2-core Xeon that gave these: a fresh ResNet-9 first step 13.4 s, 5.0 s over the
imported cache, a later step 3.3 s.)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gingham.cache import DiskCache, _unpack, is_hex, is_key
from gingham.config import get_config
from gingham.errors import GinghamError

#: The manifest's ``format`` and ``version``: what an importer checks first.
FORMAT = "gingham-cache"
VERSION = 1
MANIFEST = "manifest.json"
#: Cache directories that hold no entries to carry (sources kept for a bug report).
NOT_CARRIED = frozenset({"failed"})
_TUNING = "tuning"  # the tuning database's namespace (gingham.tune.db)


class CacheArchiveError(GinghamError, ValueError):
    """An archive that cannot be read as a gingham cache archive."""


@dataclass
class ExportSummary:
    """What :func:`export_archive` wrote: entries per namespace, the damaged ones left out."""

    path: Path
    entries: dict[str, int] = field(default_factory=dict)
    damaged: int = 0
    bytes: int = 0


@dataclass
class ImportSummary:
    """What :func:`import_archive` did, per namespace: ``added`` entries, ``present`` ones
    (kept as they were), ``rejected`` members (a bad name, not a file, a failed checksum);
    ``renewed``: tuning generation tokens replaced (their devices' programs are lowered
    again); ``manifest``: the archive's."""

    added: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    renewed: int = 0
    manifest: dict = field(default_factory=dict)


def _namespaces(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and p.name not in NOT_CARRIED and not p.name.startswith("."))


def export_archive(path: Path, root: Path | None = None) -> ExportSummary:
    """Write every entry of the cache at ``root`` (default ``config.cache_dir``) to a gzipped
    tar at ``path``, written atomically (a temporary file renamed into place)."""
    root = Path(root or get_config().cache_dir)
    path = Path(path)
    summary = ExportSummary(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".gingham-export-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
            # One entry in memory at a time; the manifest, which counts them, comes last.
            for namespace in _namespaces(root):
                cache = DiskCache(namespace, root)
                for key in cache.keys():
                    try:
                        blob = cache.path(key).read_bytes()
                    except OSError:
                        continue  # removed meanwhile
                    if _unpack(blob) is None:
                        summary.damaged += 1  # rebuilt where it is needed, not carried
                        continue
                    _add(tar, f"{namespace}/{key}", blob)
                    summary.entries[namespace] = summary.entries.get(namespace, 0) + 1
            manifest = {"format": FORMAT, "version": VERSION,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "gingham": gingham_version(), "entries": summary.entries}
            _add(tar, MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    summary.bytes = path.stat().st_size
    return summary


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def gingham_version() -> str:
    """What an archive's manifest records of the gingham that wrote it (the hash the program
    cache keys with: an archive from another version brings kernels that are found, programs
    that are not)."""
    from gingham.compiler.programs import _code_version

    return _code_version()


def import_archive(path: Path, root: Path | None = None) -> ImportSummary:
    """Add the entries of the archive at ``path`` to the cache at ``root`` (default
    ``config.cache_dir``); see the module docstring for what is checked and kept."""
    from gingham.tune.db import TuningDB

    root = Path(root or get_config().cache_dir)
    path = Path(path)
    summary = ImportSummary()
    try:
        tar = tarfile.open(path, mode="r:*")
    except tarfile.TarError:
        raise CacheArchiveError(f"{path} is not a gingham cache archive (not a tar file, "
                                "gzipped or not)") from None
    except OSError as exc:
        raise CacheArchiveError(f"cannot read the cache archive {path}: {exc}") from None
    with tar:
        summary.manifest = _manifest(tar, path)
        db = TuningDB(root)
        # The generation tokens here before the import: renewed if tuning entries arrive.
        own_tokens = db.generation_token_keys()
        tuning_added = False
        for member in tar:
            if member.name == MANIFEST:
                continue
            namespace, _, key = member.name.partition("/")
            # A key is hex alone (no "/" nor ".."); a namespace letters, digits, "-" and "_".
            if (not member.isfile() or not is_key(key) or not namespace
                    or namespace in NOT_CARRIED
                    or not all(c.isalnum() or c in "-_" for c in namespace)):
                summary.rejected.append(member.name)
                continue
            reader = tar.extractfile(member)
            payload = _unpack(reader.read()) if reader is not None else None
            if payload is None:
                summary.rejected.append(member.name)
                continue
            cache = DiskCache(namespace, root)
            if cache.get(key) is not None:
                summary.present[namespace] = summary.present.get(namespace, 0) + 1
                continue
            cache.put(key, payload)
            summary.added[namespace] = summary.added.get(namespace, 0) + 1
            if namespace == _TUNING and not TuningDB.is_generation_token(payload):
                tuning_added = True
        if tuning_added and own_tokens:
            db.renew_generation_tokens(own_tokens)
            summary.renewed = len(own_tokens)
    return summary


def _manifest(tar: tarfile.TarFile, path: Path) -> dict:
    try:
        member = tar.getmember(MANIFEST)
        reader = tar.extractfile(member)
        manifest = json.loads(reader.read() if reader is not None else b"")
    except (KeyError, ValueError, tarfile.TarError) as exc:
        raise CacheArchiveError(f"{path} is not a gingham cache archive (no readable "
                                f"{MANIFEST}: {exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CacheArchiveError(f"{path} is not a gingham cache archive (its {MANIFEST} "
                                f"does not say format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise CacheArchiveError(f"{path} is a gingham cache archive of version "
                                f"{manifest.get('version')!r}; this gingham reads {VERSION}")
    return manifest


def cache_usage(root: Path | None = None) -> dict[str, tuple[int, int]]:
    """(entries, bytes) per namespace of the cache at ``root`` (default the configured one)."""
    root = Path(root or get_config().cache_dir)
    usage = {}
    for namespace in _namespaces(root):
        cache = DiskCache(namespace, root)
        keys = cache.keys()
        usage[namespace] = (len(keys), sum(_size(cache.path(key)) for key in keys))
    return usage


def clear_cache(root: Path | None = None) -> dict[str, tuple[int, int]]:
    """Remove every entry of the cache at ``root`` (default the configured one), and the
    sources kept of failed compiles; returns what there was, as :func:`cache_usage` counts it.
    Only files named as gingham names them go (``<namespace>/<key[:2]>/<key>``, a write's
    temporary file, ``failed/<hash>.<suffix>``), so a cache directory set by mistake to one
    that holds other files loses none of them. A process running meanwhile finds misses and
    builds again (no entry is ever half there)."""
    root = Path(root or get_config().cache_dir)
    usage = cache_usage(root)
    for namespace in _namespaces(root) + (["failed"] if (root / "failed").is_dir() else []):
        directory = root / namespace
        if namespace == "failed":
            doomed = [p for p in directory.iterdir() if p.is_file() and is_hex(p.stem)]
        else:
            cache = DiskCache(namespace, root)
            doomed = [cache.path(key) for key in cache.keys()]
            doomed += [p for p in directory.glob("??/.tmp-*") if is_hex(p.parent.name)]
        for path in doomed:
            path.unlink(missing_ok=True)
        for sub in sorted(directory.glob("??"), reverse=True) + [directory]:
            with contextlib.suppress(OSError):  # not empty: something else lives there
                sub.rmdir()
    return usage


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


__all__ = ["export_archive", "import_archive", "cache_usage", "clear_cache", "gingham_version",
           "ExportSummary", "ImportSummary", "CacheArchiveError"]
