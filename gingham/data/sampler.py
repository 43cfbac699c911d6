"""Samplers with torch.utils.data's API: the order in which a DataLoader reads a dataset.

A sampler yields indices; :class:`BatchSampler` groups them into lists. Random ones draw from a
NumPy generator (see :mod:`gingham.data.random` for what ``generator`` may be):

    list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False))  # [[0, 1], [2, 3], [4]]
    list(RandomSampler(range(5), generator=0))                           # a permutation
"""

from __future__ import annotations

from typing import Generic, Iterable, Iterator, Sequence, Sized, TypeVar

import numpy as np

from .random import GeneratorLike, host_rng, kept_rng

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base of the samplers: subclasses define ``__iter__`` (and ``__len__`` when known)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class _Drawing:
    """The random source of a sampler: a kept NumPy generator, or a fresh seed per epoch."""

    def _init_generator(self, generator: GeneratorLike) -> None:
        self.generator = generator
        self._kept = kept_rng(generator)

    def _rng(self) -> np.random.Generator:
        return self._kept if self._kept is not None else host_rng(self.generator)


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(_Drawing, Sampler[int]):
    """Indices of ``data_source`` in random order: every index once per pass without
    ``replacement`` (a ``num_samples`` above ``len(data_source)`` takes several permutations),
    ``num_samples`` independent draws with it.

        order = list(RandomSampler(dataset, generator=1))
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: GeneratorLike = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self._init_generator(generator)
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) \
                or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        # The dataset's size may change after the sampler is made: read it late, as PyTorch.
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = self._rng()
        if self.replacement:
            yield from rng.integers(0, n, size=self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[:self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(_Drawing, Sampler[int]):
    """The given ``indices`` in random order, each once.

        val_sampler = SubsetRandomSampler(range(900, 1000), generator=0)
    """

    def __init__(self, indices: Sequence[int], generator: GeneratorLike = None) -> None:
        self.indices = indices
        self._init_generator(generator)

    def __iter__(self) -> Iterator[int]:
        for i in self._rng().permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(_Drawing, Sampler[int]):
    """``num_samples`` indices of ``range(len(weights))`` drawn with probabilities
    proportional to ``weights`` (which need not sum to 1), with or without ``replacement``.

        balanced = WeightedRandomSampler(1.0 / counts[labels], num_samples=len(labels))
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: GeneratorLike = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights_array = np.asarray(weights, dtype=np.float64)
        if weights_array.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_array.shape)}")
        if not np.isfinite(weights_array).all() or (weights_array < 0).any() \
                or weights_array.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > np.count_nonzero(weights_array):
            raise ValueError(f"cannot sample {num_samples} indices without replacement from "
                             f"{np.count_nonzero(weights_array)} non-zero weights")
        self.weights = weights_array
        self.num_samples = num_samples
        self.replacement = replacement
        self._init_generator(generator)

    def __iter__(self) -> Iterator[int]:
        p = self.weights / self.weights.sum()
        drawn = self._rng().choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Lists of ``batch_size`` consecutive indices of ``sampler``; the last is shorter, or
    dropped with ``drop_last``.

        list(BatchSampler(range(5), 2, drop_last=True))   # [[0, 1], [2, 3]]
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)


__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]
