"""Datasets with torch.utils.data's API: what a :class:`~gingham.data.DataLoader` reads from.

A map-style :class:`Dataset` answers ``dataset[i]`` and ``len(dataset)``; an
:class:`IterableDataset` is a stream (``iter(dataset)``). :class:`TensorDataset` pairs arrays
along their first dimension, :class:`Subset` and :class:`ConcatDataset` select and join,
:func:`random_split` splits at random:

    train, val = random_split(TensorDataset(images, labels), [0.8, 0.2], generator=0)
    images0, label0 = train[0]                     # NumPy rows
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Generic, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from ..frontend.tensor import Tensor
from .random import GeneratorLike, host_rng

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map from indices to samples: subclasses define ``__getitem__`` (and usually
    ``__len__``, which samplers need). ``a + b`` is ``ConcatDataset([a, b])``.

        class Squares(Dataset):
            def __len__(self): return 10
            def __getitem__(self, i): return np.float32(i * i)
    """

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: "Dataset[T_co]") -> "ConcatDataset[T_co]":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A stream of samples: subclasses define ``__iter__``. With ``num_workers > 0`` every
    worker iterates its own ``iter(dataset)``, so a dataset that should not repeat its samples
    shards them by :func:`~gingham.data.get_worker_info`, as in PyTorch:

        class Range(IterableDataset):
            def __iter__(self):
                info = get_worker_info()
                start, step = (0, 1) if info is None else (info.id, info.num_workers)
                return iter(range(start, 100, step))
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset[T_co]) -> "ChainDataset":
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples ``(t[i] for t in tensors)`` of NumPy arrays or gingham tensors that share their
    first dimension (``ValueError`` otherwise).

    Samples are NumPy rows: a gingham tensor is read back to the host here, once (one copy),
    because taking one row of a device tensor per sample would cost a kernel launch and a copy
    per sample, and because loader worker threads must not touch a device (a CUDA context is
    current in one thread only). Batches then reach the device in one copy each (see
    :mod:`gingham.data.dataloader`). ``tensors`` keeps what was given.

        dataset = TensorDataset(images, labels)     # (N, ...) arrays
        x0, y0 = dataset[0]
    """

    def __init__(self, *tensors) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for position, value in enumerate(tensors):
            if not isinstance(value, (Tensor, np.ndarray)):
                raise TypeError(f"TensorDataset: argument {position} is a "
                                f"{type(value).__name__}; expected a NumPy array or a "
                                "gingham Tensor")
            if value.ndim == 0:
                raise ValueError(f"TensorDataset: argument {position} is 0-d; samples are "
                                 "taken along the first dimension")
        lengths = [value.shape[0] for value in tensors]
        if len(set(lengths)) > 1:
            raise ValueError(f"Size mismatch between tensors: first dimensions {lengths}")
        self.tensors = tuple(tensors)
        self._arrays = tuple(value.numpy() if isinstance(value, Tensor) else value
                             for value in tensors)

    def __getitem__(self, index) -> tuple:
        return tuple(array[index] for array in self._arrays)

    def __getitems__(self, indices: list[int]) -> list[tuple]:
        # PyTorch's batched read: one gather per array instead of one lookup per sample
        # (digits, 64 per batch: 70 us down to 20 us).
        columns = [array[indices] for array in self._arrays]
        return list(zip(*columns))

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order.

        evens = Subset(dataset, range(0, len(dataset), 2))
    """

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        # A dataset that fetches a batch at once (PyTorch's __getitems__ protocol) keeps doing so.
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[idx] for idx in indices])
        return [self.dataset[self.indices[idx]] for idx in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """The samples of several map-style datasets, one after another.

        both = ConcatDataset([train, extra])       # len(both) == len(train) + len(extra)
    """

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence: Iterable[Dataset]) -> list[int]:
        return list(itertools.accumulate(len(dataset) for dataset in sequence))

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for dataset in self.datasets:
            if isinstance(dataset, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset "
                                "(ChainDataset joins streams)")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """Several iterable datasets, one after another (what ``a + b`` of streams gives)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)


def random_split(dataset: Dataset[T_co], lengths: Sequence[int | float],
                 generator: GeneratorLike = None) -> list[Subset[T_co]]:
    """Split ``dataset`` into non-overlapping random subsets of ``lengths`` (counts summing to
    ``len(dataset)``, or fractions summing to 1, whose rounding remainder goes one item each to
    the first splits, as PyTorch's). ``generator`` is an int seed, a ``numpy.random.Generator``
    or a :class:`gingham.nn.functional.Generator`; by default a seed is drawn from the state
    ``gingham.manual_seed`` sets, so a seeded run splits the same way every time.

        train, test = random_split(dataset, [0.8, 0.2], generator=42)
    """
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        counts = []
        for i, fraction in enumerate(lengths):
            if fraction < 0 or fraction > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(len(dataset) * fraction)))
        for i in range(len(dataset) - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. "
                              "This might result in an empty dataset.", stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = host_rng(generator).permutation(sum(lengths)).tolist()
    offsets = itertools.accumulate(lengths)
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(offsets, lengths)]


__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "random_split"]
