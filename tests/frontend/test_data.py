"""The data loaders: shipped digits, CIFAR-10 archives, synthetic data, batching."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest

from gingham import data


def test_digits_split_is_disjoint_and_complete():
    train_x, train_y = data.load_digits("train")
    test_x, test_y = data.load_digits("test")
    all_x, _ = data.load_digits("all")
    assert train_x.shape[1:] == (1, 8, 8) and train_x.dtype == np.float32
    assert len(train_x) + len(test_x) == len(all_x) == 1797
    assert 0.0 <= train_x.min() and train_x.max() <= 1.0
    assert set(np.unique(train_y)) == set(range(10)) == set(np.unique(test_y))
    train_rows = {row.tobytes() for row in train_x}
    assert sum(row.tobytes() in train_rows for row in test_x) < 10  # a few duplicate images exist


def _fake_cifar(tmp_path, images_per_batch=4):
    path = tmp_path / "cifar-10-python.tar.gz"
    rng = np.random.default_rng(0)
    expected = {}
    with tarfile.open(path, "w:gz") as archive:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            pixels = rng.integers(0, 256, size=(images_per_batch, 3072), dtype=np.uint8)
            labels = list(rng.integers(0, 10, size=images_per_batch))
            expected[name] = (pixels, labels)
            payload = pickle.dumps({b"data": pixels, b"labels": labels})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return path, expected


def test_cifar10_reads_the_python_archive(tmp_path):
    path, expected = _fake_cifar(tmp_path)
    images, labels = data.load_cifar10(path, "train")
    assert images.shape == (20, 3, 32, 32) and labels.shape == (20,)
    first_pixels, first_labels = expected["data_batch_1"]
    np.testing.assert_allclose(images[:4].reshape(4, -1), first_pixels / 255.0, rtol=1e-6)
    assert list(labels[:4]) == first_labels
    test_images, _ = data.load_cifar10(path, "test", layout="NHWC")
    assert test_images.shape == (4, 32, 32, 3)


def test_cifar10_missing_file_says_nothing_is_downloaded(tmp_path):
    with pytest.raises(data.DataError, match="does not download"):
        data.load_cifar10(tmp_path / "nowhere.tar.gz")


def test_batches_keep_one_shape():
    images, labels = data.synthetic(10, (3, 4, 4))
    shapes = [x.shape for x, _ in data.batches(images, labels, 4, shuffle=True)]
    assert shapes == [(4, 3, 4, 4), (4, 3, 4, 4)]
