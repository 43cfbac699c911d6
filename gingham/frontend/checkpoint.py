"""``gingham.save`` and ``gingham.load``: checkpoints of state dicts, read without running code.

    gingham.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                  "epoch": 3}, "run.ckpt")
    checkpoint = gingham.load("run.ckpt")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])

What can be saved: dicts (string or integer keys), lists and tuples of what can be saved, NumPy
arrays and scalars, gingham tensors (they load as NumPy arrays), and ``None``, ``bool``, ``int``,
``float`` and ``str``. Anything else — a module, an optimiser, a function — is a ``TypeError``
naming where it was: save its ``state_dict()``.

The file is a zip archive of ``.npy`` entries, one per array, beside an entry ``__index__.npy``
holding JSON that records the nesting, the plain values and which entry each array is (so
``numpy.load`` opens it too). Entries are read with ``allow_pickle=False``: unlike a pickle, a
checkpoint cannot run code when it is loaded. bfloat16 arrays are stored as their bits, with the
type named in the index.

Saving is atomic: the archive goes to a temporary file in the target's directory, is flushed to
the disk (``fsync``) and renamed over the target (``os.replace``), so an error or a crash
mid-save leaves the previous checkpoint whole and no partial file under the target's name.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import IO, Any, Callable

import numpy as np

from ..errors import CheckpointError
from ..tile import dtypes as dt
from .tensor import Tensor, realize, tensor

FORMAT = "gingham-checkpoint"
VERSION = 1
_INDEX = "__index__"
_PLAIN = (type(None), bool, int, float, str)


# -- saving ----------------------------------------------------------------------------------------


def save(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` (nested dicts, lists and tuples of arrays, tensors and plain values) to
    ``path`` atomically; see the module docstring for the format."""
    arrays: dict[str, np.ndarray] = {}
    _realize_tensors(obj)
    root = _encode(obj, arrays, "")
    index = json.dumps({"format": FORMAT, "version": VERSION, "root": root}).encode()
    _atomic_write(Path(os.fspath(path)), arrays, np.frombuffer(index, np.uint8))


def _realize_tensors(obj: Any) -> None:
    """Compute every lazy tensor in ``obj`` in one program rather than one each."""
    found: list[Tensor] = []

    def visit(value: Any) -> None:
        if isinstance(value, Tensor):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)

    visit(obj)
    realize(found)


def _encode(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    """The JSON node for ``value``: plain values as themselves, containers and arrays as JSON
    objects (``{"dict": [[key, node], ...]}``, ``{"list": [...]}``, ``{"tuple": [...]}``,
    ``{"array": entry, ...}``); arrays are added to ``arrays``."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        pairs = []
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"gingham.save: dict keys must be str or int, not "
                                f"{type(key).__name__} (key {key!r} at {where or 'the top level'})")
            pairs.append([key, _encode(item, arrays, f"{where}[{key!r}]")])
        return {"dict": pairs}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, arrays, f"{where}[{i}]") for i, item in enumerate(value)]
        return {"tuple" if isinstance(value, tuple) else "list": items}
    if isinstance(value, (Tensor, np.ndarray, np.generic)):
        return _encode_array(value, arrays, where)
    raise TypeError(f"gingham.save: cannot save a {type(value).__name__} at "
                    f"{where or 'the top level'}; save arrays, tensors, plain values and dicts, "
                    "lists and tuples of them (a module's or optimiser's state_dict())")


def _encode_array(value: Tensor | np.ndarray | np.generic, arrays: dict[str, np.ndarray],
                  where: str) -> dict:
    array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if array.dtype.hasobject:
        raise TypeError(f"gingham.save: the array at {where or 'the top level'} holds Python "
                        "objects, which a checkpoint does not store (it would need pickle)")
    name = f"a{len(arrays)}"
    node: dict[str, Any] = {"array": name}
    if array.dtype.kind == "V":  # bfloat16 and friends (ml_dtypes): their bits, and the name
        node["dtype"] = dt.dtype_name(array.dtype)
        array = array.view(f"u{array.dtype.itemsize}")
    if isinstance(value, np.generic):
        node["scalar"] = True
    arrays[name] = np.require(array, requirements="C")  # (ascontiguousarray makes 0-d 1-d)
    return node


def _atomic_write(target: Path, arrays: dict[str, np.ndarray], index: np.ndarray) -> None:
    """Write the archive beside ``target``, fsync it, then rename it over ``target``."""
    directory = target.parent
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            _write_archive(file, arrays, index)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, _file_mode(target))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)


def _write_archive(file: IO[bytes], arrays: dict[str, np.ndarray], index: np.ndarray) -> None:
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        _write_entry(archive, _INDEX, index)
        for name, array in arrays.items():
            _write_entry(archive, name, array)


def _write_entry(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    with archive.open(f"{name}.npy", "w", force_zip64=True) as entry:
        np.lib.format.write_array(entry, array, allow_pickle=False)


def _file_mode(target: Path) -> int:
    """The replaced file's permissions, or what a new file gets under the umask (mkstemp's
    temporary file is private to its owner)."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); platforms that cannot open a directory skip it."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- loading ---------------------------------------------------------------------------------------


def load(path: str | os.PathLike, map_location: str | None = None, *,
         weights_only: bool = True, mmap: bool | None = None) -> Any:
    """What :func:`save` wrote to ``path``: dicts, lists, tuples, NumPy arrays (tensors come
    back as arrays, which ``load_state_dict`` and ``gingham.tensor`` take) and plain values;
    with ``map_location`` (a device id or :class:`gingham.device`), tensors on that device, as
    ``torch.load(path, map_location="cuda:0")``. Raises :class:`gingham.CheckpointError` for a
    file that is not a readable checkpoint. Nothing is ever unpickled, so ``weights_only`` is
    always true in effect; ``mmap`` is accepted and ignored.

        state = gingham.load("model.ckpt", map_location="cpu")
    """
    if map_location is not None and not isinstance(map_location, str):
        raise TypeError(f"load: map_location must be a device id or gingham.device, not "
                        f"{type(map_location).__name__} (gingham has no storage remapping)")
    loaded = _load(path)
    return loaded if map_location is None else _to_tensors(loaded, str(map_location))


def _to_tensors(value: Any, device: str) -> Any:
    """``value`` with each array a tensor on ``device``."""
    if isinstance(value, np.ndarray):
        return tensor(value, device=device)
    if isinstance(value, dict):
        return type(value)((k, _to_tensors(v, device)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        items = [_to_tensors(v, device) for v in value]
        return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
    return value


def _load(path: str | os.PathLike) -> Any:
    where = os.fspath(path)
    try:
        archive = zipfile.ZipFile(where)
    except zipfile.BadZipFile as exc:
        raise CheckpointError(f"{where} is not a gingham checkpoint (not a zip archive)",
                              where) from exc
    with archive:
        index = _read_index(archive, where)
        try:
            return _decode(index["root"], lambda name: _read_entry(archive, name, where), where)
        except (TypeError, ValueError, KeyError) as exc:  # an index of the wrong shape
            raise CheckpointError(f"{where}: the checkpoint's index is damaged ({exc!r})",
                                  where) from exc


def _read_index(archive: zipfile.ZipFile, where: str) -> dict:
    raw = _read_entry(archive, _INDEX, where)
    try:
        index = json.loads(raw.tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{where}: the checkpoint's index is damaged ({exc})",
                              where) from exc
    if not isinstance(index, dict) or index.get("format") != FORMAT or "root" not in index:
        raise CheckpointError(f"{where} is not a gingham checkpoint (no {FORMAT} index)", where)
    if not isinstance(index.get("version"), int) or index["version"] > VERSION:
        raise CheckpointError(f"{where} has checkpoint format version {index.get('version')!r}; "
                              f"this gingham reads versions up to {VERSION} (upgrade gingham)",
                              where)
    return index


def _read_entry(archive: zipfile.ZipFile, name: str, where: str) -> np.ndarray:
    try:
        with archive.open(f"{name}.npy") as entry:
            return np.lib.format.read_array(entry, allow_pickle=False)
    except KeyError as exc:
        raise CheckpointError(f"{where} has no entry {name}.npy (not a gingham checkpoint, or "
                              "damaged)", where) from exc
    except ValueError as exc:  # an object array: loading it would unpickle
        raise CheckpointError(f"{where}: entry {name}.npy needs pickle to load, which a "
                              f"checkpoint never does ({exc})", where) from exc
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise CheckpointError(f"{where}: entry {name}.npy is damaged ({exc})", where) from exc


def _decode(node: Any, read: Callable[[str], np.ndarray], where: str) -> Any:
    if not isinstance(node, dict):
        return node
    if "dict" in node:
        return {key: _decode(item, read, where) for key, item in node["dict"]}
    if "list" in node:
        return [_decode(item, read, where) for item in node["list"]]
    if "tuple" in node:
        return tuple(_decode(item, read, where) for item in node["tuple"])
    if "array" in node:
        array = read(str(node["array"]))
        if "dtype" in node:
            array = array.view(dt.as_tile_dtype(node["dtype"]))
        return array[()] if node.get("scalar") else array
    raise CheckpointError(f"{where}: the index has a node this gingham does not know "
                          f"({sorted(node)})", where)


__all__ = ["save", "load", "FORMAT", "VERSION"]
