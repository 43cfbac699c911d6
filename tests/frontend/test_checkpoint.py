"""gingham.save / gingham.load: what round-trips, what is refused, and that a save is atomic."""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest

import gingham
import gingham.nn
from gingham.frontend import checkpoint
from gingham.tile import dtypes as dt


def entries(path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        return sorted(archive.namelist())


def test_round_trip_keeps_nesting_types_and_values(tmp_path):
    bfloat16 = dt.as_tile_dtype("bfloat16")
    saved = {
        "weights": {"0.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
                    "0.bias": np.array([1.5, -2.0], np.float64)},
        "state": {0: {"step": 3.0, "exp_avg": np.zeros((2, 2), np.float32)}, 1: {}},
        "groups": [{"lr": 0.1, "betas": (0.9, 0.999), "nesterov": True, "name": None}],
        "bits": np.array([1.0, -0.5, 3.0], bfloat16),
        "mask": np.array([[True, False]]),
        "count": np.int64(7), "zero_d": np.array(2.5, np.float32), "big": 2 ** 70,
        "inf": float("inf"), "empty": np.zeros((0, 4), np.int32), "text": "epoch 3",
        "tensor": gingham.tensor(np.array([1, 2, 3], np.int32), device="reference"),
    }
    path = tmp_path / "run.ckpt"
    gingham.save(saved, path)
    loaded = gingham.load(path)
    assert list(loaded) == list(saved)
    assert list(loaded["state"]) == [0, 1]  # integer keys stay integers
    assert loaded["groups"][0] == saved["groups"][0]
    assert isinstance(loaded["groups"][0]["betas"], tuple) and isinstance(loaded["groups"], list)
    for key in ("bits", "mask", "zero_d", "empty"):
        assert loaded[key].dtype == saved[key].dtype and loaded[key].shape == saved[key].shape
        np.testing.assert_array_equal(loaded[key], saved[key])
    np.testing.assert_array_equal(loaded["weights"]["0.bias"], saved["weights"]["0.bias"])
    assert loaded["weights"]["0.bias"].dtype == np.float64
    assert type(loaded["count"]) is np.int64 and loaded["count"] == 7
    assert loaded["big"] == 2 ** 70 and loaded["inf"] == float("inf")
    np.testing.assert_array_equal(loaded["tensor"], np.array([1, 2, 3], np.int32))
    assert loaded["tensor"].dtype == np.int32


def test_the_file_is_a_plain_npz_with_a_json_index(tmp_path):
    path = tmp_path / "plain.npz"
    gingham.save({"w": np.ones(3, np.float32)}, path)
    assert entries(path) == ["__index__.npy", "a0.npy"]
    with np.load(path, allow_pickle=False) as archive:
        index = json.loads(archive["__index__"].tobytes())
        np.testing.assert_array_equal(archive["a0"], np.ones(3, np.float32))
    assert index == {"format": checkpoint.FORMAT, "version": checkpoint.VERSION,
                     "root": {"dict": [["w", {"array": "a0"}]]}}


@pytest.mark.parametrize("value, where", [
    ({"model": gingham.nn.Linear(2, 2, device="reference")}, r"Linear at \['model'\]"),
    ({"fn": [print]}, r"builtin_function_or_method at \['fn'\]\[0\]"),
    ({(1, 2): 3}, "dict keys must be str or int"),
    ({"objects": np.array([{}], dtype=object)}, "holds Python objects"),
])
def test_what_cannot_be_saved_is_refused(tmp_path, value, where):
    path = tmp_path / "bad.ckpt"
    with pytest.raises(TypeError, match=where):
        gingham.save(value, path)
    assert not path.exists()
    assert os.listdir(tmp_path) == []  # no temporary file left behind


def test_a_failed_save_leaves_the_old_checkpoint_whole(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    gingham.save({"epoch": 1, "w": np.zeros(4, np.float32)}, path)
    before = path.read_bytes()
    write_entry = checkpoint._write_entry
    written = []

    def failing(archive, name, array):  # the index and one array go in, then the disk is full
        if len(written) == 2:
            raise OSError(28, "No space left on device")
        written.append(name)
        write_entry(archive, name, array)

    monkeypatch.setattr(checkpoint, "_write_entry", failing)
    with pytest.raises(OSError, match="No space left"):
        gingham.save({"epoch": 2, "w": np.ones(4, np.float32), "v": np.ones(2)}, path)
    assert written == ["__index__", "a0"]
    assert path.read_bytes() == before
    assert gingham.load(path)["epoch"] == 1
    assert os.listdir(tmp_path) == ["run.ckpt"]


def test_a_save_replaces_atomically_and_keeps_permissions(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    replaced = []
    replace = os.replace

    def recording(source, target):
        replaced.append((os.path.dirname(source), os.path.basename(source)))
        assert gingham.load(source)["epoch"] == 2  # whole before it takes the name
        replace(source, target)

    gingham.save({"epoch": 1}, path)
    os.chmod(path, 0o640)
    monkeypatch.setattr(checkpoint.os, "replace", recording)
    gingham.save({"epoch": 2}, path)
    assert replaced[0][0] == str(tmp_path) and replaced[0][1].startswith(".run.ckpt.")
    assert gingham.load(path)["epoch"] == 2
    assert path.stat().st_mode & 0o777 == 0o640
    monkeypatch.undo()
    fresh = tmp_path / "fresh.ckpt"
    gingham.save({}, fresh)
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask


def write_archive(path, index, arrays=(), allow_pickle=False):
    with zipfile.ZipFile(path, "w") as archive:
        with archive.open("__index__.npy", "w") as entry:
            raw = np.frombuffer(json.dumps(index).encode(), np.uint8)
            np.lib.format.write_array(entry, raw)
        for name, array in arrays:
            with archive.open(f"{name}.npy", "w") as entry:
                np.lib.format.write_array(entry, array, allow_pickle=allow_pickle)


def test_unreadable_files_are_checkpoint_errors(tmp_path):
    not_zip = tmp_path / "weights.pt"
    not_zip.write_bytes(b"\x80\x04\x95 a pickle, perhaps")
    with pytest.raises(gingham.CheckpointError, match="not a zip archive"):
        gingham.load(not_zip)

    no_index = tmp_path / "other.npz"
    np.savez(no_index, w=np.ones(2))
    with pytest.raises(gingham.CheckpointError, match="no entry __index__.npy"):
        gingham.load(no_index)

    header = {"format": checkpoint.FORMAT, "version": checkpoint.VERSION}
    future = tmp_path / "future.ckpt"
    write_archive(future, {**header, "version": checkpoint.VERSION + 1, "root": None})
    with pytest.raises(gingham.CheckpointError, match="upgrade gingham"):
        gingham.load(future)

    pickled = tmp_path / "pickled.ckpt"  # an object array would unpickle: never loaded
    write_archive(pickled, {**header, "root": {"array": "a0"}},
                  [("a0", np.array([{"x": 1}], dtype=object))], allow_pickle=True)
    with pytest.raises(gingham.CheckpointError, match="needs pickle"):
        gingham.load(pickled)

    damaged = tmp_path / "damaged.ckpt"
    write_archive(damaged, {**header, "root": {"dict": 5}})
    with pytest.raises(gingham.CheckpointError, match="index is damaged"):
        gingham.load(damaged)
    with pytest.raises(FileNotFoundError):
        gingham.load(tmp_path / "missing.ckpt")
