"""Data sets for training and benchmarks, as NumPy arrays, and torch.utils.data's loading API.

* :func:`load_digits` — the UCI optical digits (1,797 8x8 grey images, 10 classes), shipped
  inside the package (45 KB), for accuracy tests that need real images and no download.
* :func:`load_cifar10` — CIFAR-10 from the standard ``cifar-10-python.tar.gz`` at a path the
  user gives (nothing is downloaded).
* :func:`synthetic` — random images and labels of any shape, for benchmarks.

    images, labels = gingham.data.load_digits(split="train")      # NCHW float32, int32
    for x, y in gingham.data.batches(images, labels, 64, shuffle=True, seed=0):
        ...

PyTorch's ``Dataset``, ``IterableDataset``, ``TensorDataset``, ``Subset``, ``ConcatDataset``,
``random_split``, ``DataLoader``, the samplers, ``default_collate`` and ``get_worker_info``
have the same names and arguments here (batches are :class:`HostArray`: NumPy arrays with
PyTorch's ``to(device)``, ``float()``, ``size(0)``...; see :mod:`gingham.data.dataloader` for
the design):

    loader = gingham.data.DataLoader(gingham.data.TensorDataset(images, labels),
                                     batch_size=64, shuffle=True, generator=0)
    for x, y in loader:
        x, y = x.to(device), y.to(device)     # gingham Tensors, one copy each
"""

from __future__ import annotations

import os
import pickle
import tarfile
from importlib import resources
from typing import Iterator

import numpy as np

from ..errors import GinghamError


class DataError(GinghamError, OSError):
    """A data set that is missing or not in the expected format; the message says what to do."""


def load_digits(split: str = "all", test_fraction: float = 0.2, seed: int = 0,
                layout: str = "NCHW") -> tuple[np.ndarray, np.ndarray]:
    """The UCI digits: float32 images scaled to [0, 1] and int32 labels.

    ``split`` is ``"train"``, ``"test"`` or ``"all"``; the split is a fixed shuffle by ``seed``.
    The data (from the UCI Machine Learning Repository, "Optical Recognition of Handwritten
    Digits", CC BY 4.0, as distributed by scikit-learn) ships with gingham.
    """
    with resources.files(__package__).joinpath("digits.npz").open("rb") as handle:
        data = np.load(handle)
        images = data["images"].astype(np.float32) / 16.0
        labels = data["labels"].astype(np.int32)
    images = images[:, None, :, :] if layout == "NCHW" else images[:, :, :, None]
    return _split(images, labels, split, test_fraction, seed)


def load_cifar10(path: str | os.PathLike, split: str = "train",
                 layout: str = "NCHW") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 from ``cifar-10-python.tar.gz`` (or its extracted folder): float32 images in
    [0, 1] (N, 3, 32, 32) and int32 labels. gingham does not download it."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DataError(
            f"CIFAR-10 not found at {path!r}. gingham does not download data: fetch "
            "cifar-10-python.tar.gz from the dataset's home page and pass its path."
        )
    names = ["test_batch"] if split == "test" else [f"data_batch_{i}" for i in range(1, 6)]
    parts = [_cifar_batch(path, name) for name in names]
    images = np.concatenate([p[0] for p in parts]).reshape(-1, 3, 32, 32)
    labels = np.concatenate([p[1] for p in parts]).astype(np.int32)
    images = images.astype(np.float32) / 255.0
    if layout == "NHWC":
        images = images.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def _cifar_batch(path: str, name: str):
    try:
        if os.path.isdir(path):
            with open(os.path.join(path, name), "rb") as handle:
                entry = pickle.load(handle, encoding="bytes")
        else:
            with tarfile.open(path, "r:gz") as archive:
                member = archive.extractfile(f"cifar-10-batches-py/{name}")
                if member is None:
                    raise KeyError(name)
                entry = pickle.load(member, encoding="bytes")
    except (KeyError, OSError, tarfile.TarError, pickle.UnpicklingError) as error:
        raise DataError(f"{path!r} is not the CIFAR-10 python archive ({name}: {error})") from None
    return np.asarray(entry[b"data"], np.uint8), np.asarray(entry[b"labels"])


def synthetic(count: int, shape: tuple[int, ...] = (3, 32, 32), classes: int = 10,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 images of ``shape`` and int32 labels, for timing (not for accuracy)."""
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((count,) + tuple(shape), dtype=np.float32)
    labels = rng.integers(0, classes, size=count).astype(np.int32)
    return images, labels


def batches(images: np.ndarray, labels: np.ndarray, batch_size: int, shuffle: bool = False,
            seed: int = 0, drop_last: bool = True) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Consecutive (or shuffled) batches; ``drop_last`` keeps every batch the same shape, so a
    jit-compiled step never retraces for a short last batch."""
    order = np.random.default_rng(seed).permutation(len(images)) if shuffle else \
        np.arange(len(images))
    stop = len(images) - (len(images) % batch_size if drop_last else 0)
    for start in range(0, stop, batch_size):
        index = order[start:start + batch_size]
        yield np.ascontiguousarray(images[index]), np.ascontiguousarray(labels[index])


def _split(images, labels, split: str, test_fraction: float, seed: int):
    if split == "all":
        return images, labels
    order = np.random.default_rng(seed).permutation(len(images))
    cut = int(round(len(images) * (1 - test_fraction)))
    if split == "train":
        chosen = order[:cut]
    elif split == "test":
        chosen = order[cut:]
    else:
        raise ValueError(f"split must be 'train', 'test' or 'all', not {split!r}")
    return np.ascontiguousarray(images[chosen]), labels[chosen]


from .collate import default_collate, default_convert  # noqa: E402
from .dataloader import DataLoader, WorkerInfo, get_worker_info  # noqa: E402
from .host import HostArray, as_host  # noqa: E402
from .dataset import (  # noqa: E402
    ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split)
from .sampler import (  # noqa: E402
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
    WeightedRandomSampler)

__all__ = ["DataError", "load_digits", "load_cifar10", "synthetic", "batches",
           "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "random_split", "DataLoader", "WorkerInfo", "get_worker_info",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "default_collate", "default_convert",
           "HostArray", "as_host"]
