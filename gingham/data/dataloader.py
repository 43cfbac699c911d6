"""``DataLoader``: batches of a dataset in sampler order, as ``torch.utils.data.DataLoader``.

    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True,
                        generator=0, drop_last=True)
    for x, y in loader:                     # HostArrays: NumPy arrays with PyTorch's to()
        x, y = x.to(device), y.to(device)   # gingham Tensors, one host-to-device copy each
        loss = step(x, y)                   # a gingham.jit step also takes x, y unmoved

Design choices (where PyTorch's choices do not carry over):

* **Batches are HostArrays** (:mod:`gingham.data.host`, made by :mod:`gingham.data.collate`):
  NumPy arrays on the host with the methods PyTorch code calls on a batch's CPU tensors, so
  ``x.to(device)``, ``x.to(device, non_blocking=True)``, ``x.cuda()``, ``x.float()``,
  ``x.size(0)`` work as written for PyTorch. ``to(device)`` gives a gingham Tensor in one
  host-to-device copy, and a ``gingham.jit`` step takes that tensor with no further copy, or
  takes the HostArray itself and uploads it in one copy (a gingham tensor on the ``cpu``
  device moved with ``.to(device)`` would cost three). Samples that are gingham tensors stay
  tensors.
* **Workers are threads** (``num_workers > 0``), not processes. Forked processes would
  inherit open OpenCL/CUDA contexts and the C backend's thread pool, which is unsafe; spawned
  ones would re-import gingham and need picklable datasets. Threads need neither, and the work
  of loading (NumPy slicing, decoding, file reads) releases the GIL. Batch ``i`` goes to worker
  ``i % num_workers`` (skipping exhausted workers of an IterableDataset), at most
  ``prefetch_factor`` batches per worker are in flight, and batches come out in sampler order.
  Each worker calls ``worker_init_fn(worker_id)`` first; :func:`get_worker_info` tells the
  worker its id and seed (``base_seed + id``, ``base_seed`` drawn from the loader's generator
  per epoch, as PyTorch's). Threads share Python's ``random`` and NumPy's global state, so
  seed a per-worker ``numpy.random.default_rng(get_worker_info().seed)`` rather than the global
  one; and keep device work out of workers (read NumPy, as TensorDataset does: a CUDA context is
  current in one thread only). An exception in a worker is re-raised in the main thread (its own type and traceback,
  with a note naming the worker and the sample index); leaving the loop early stops the
  workers.
* ``pin_memory`` and ``pin_memory_device`` are accepted and have no effect (uploads go from
  pageable NumPy memory; ``HostArray.pin_memory()`` returns the array itself).
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .random import GeneratorLike, draw_seed, host_rng, kept_rng
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class WorkerInfo:
    """What :func:`get_worker_info` tells a worker about itself."""

    id: int
    num_workers: int
    seed: int
    dataset: Dataset


_worker_local = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker, its :class:`WorkerInfo`; ``None`` in the main thread.

        def worker_init_fn(worker_id):
            info = get_worker_info()
            info.dataset.rng = np.random.default_rng(info.seed)
    """
    return getattr(_worker_local, "info", None)


class _InfiniteConstantSampler(Sampler[None]):
    """The "sampler" of an IterableDataset: the dataset decides what comes next."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """Batches of ``dataset`` with torch.utils.data.DataLoader's arguments and their rules:

    * ``shuffle=True`` reads in a :class:`RandomSampler` order from ``generator`` (an int
      seed, a ``numpy.random.Generator`` or a :class:`gingham.nn.functional.Generator`; by
      default from the state ``gingham.manual_seed`` sets), a new order every epoch;
    * ``sampler`` or ``batch_sampler`` give the order instead (``batch_sampler`` excludes
      ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``; ``sampler`` excludes
      ``shuffle``); ``batch_size=None`` yields single samples through :func:`default_convert`;
    * ``collate_fn`` (default :func:`default_collate`) makes a batch of a list of samples;
    * ``drop_last`` drops a short last batch, so a jit-compiled step keeps one shape;
    * ``num_workers``, ``prefetch_factor``, ``worker_init_fn``, ``persistent_workers`` and
      ``timeout`` (seconds to wait for a worker's batch; 0: forever) run loading in worker
      threads (see the module's docstring); ``pin_memory`` and ``pin_memory_device`` have
      no effect.

        loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2)
        for epoch in range(3):
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
    """

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1,
                 shuffle: bool | None = None, sampler: Sampler | Iterable | None = None,
                 batch_sampler: Sampler[list] | Iterable[list] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 generator: GeneratorLike = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "") -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        # An int seed becomes one NumPy generator shared by the sampler and the workers' seeds,
        # so that successive epochs differ (as with a torch.Generator).
        kept = kept_rng(generator)
        generator = kept if kept is not None else generator
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if batch_sampler is not None else default_convert)
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self._pool: _WorkerPool | None = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Iterable:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator[Any]:
        base_seed = draw_seed(host_rng(self.generator))
        if self.num_workers == 0:
            return _single_thread(self, iter(self._index_sampler))
        if self.persistent_workers:
            if self._pool is None:
                self._pool = _WorkerPool(self, base_seed)
            return _MultiWorkerIterator(self, self._pool, owns_pool=False)
        return _MultiWorkerIterator(self, _WorkerPool(self, base_seed), owns_pool=True)

    def __del__(self) -> None:
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown()  # persistent workers end with their loader

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)  # TypeError when the stream has no length, as PyTorch
            if self.batch_size is None:
                return length
            if self.drop_last:
                return length // self.batch_size
            return -(-length // self.batch_size)
        return len(self._index_sampler)


@dataclass(frozen=True)
class _Reading:
    """What fetching a batch needs of a loader (workers keep this, not the loader, so that a
    dropped loader is collected and stops its persistent workers)."""

    dataset: Dataset
    collate_fn: Callable[[list], Any]
    auto_collation: bool
    batch_size: int | None
    drop_last: bool

    @classmethod
    def of(cls, loader: DataLoader) -> "_Reading":
        return cls(loader.dataset, loader.collate_fn, loader._auto_collation, loader.batch_size,
                   loader.drop_last)


class _Fetcher:
    """Turns what the sampler gives (a list of indices, an index, or nothing for a stream)
    into a collated batch; one per epoch and thread."""

    def __init__(self, reading: _Reading) -> None:
        self.dataset = reading.dataset
        self.collate_fn = reading.collate_fn
        self.auto_collation = reading.auto_collation
        self.batch_size = reading.batch_size
        self.drop_last = reading.drop_last
        self.stream = iter(self.dataset) if isinstance(self.dataset, IterableDataset) else None
        self.ended = False

    def fetch(self, index) -> Any:
        """The batch for ``index``; ``StopIteration`` when a stream has ended."""
        if self.stream is not None:
            return self.collate_fn(self._next_from_stream())
        if not self.auto_collation:
            return self.collate_fn(self._sample(index))
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return self.collate_fn(getitems(index))
        return self.collate_fn([self._sample(i) for i in index])

    def _sample(self, index) -> Any:
        try:
            return self.dataset[index]
        except Exception as error:
            error.add_note(f"(while reading sample {index!r} of the dataset)")
            raise

    def _next_from_stream(self) -> Any:
        if self.ended:
            raise StopIteration  # a stream is not asked again once it has ended
        if not self.auto_collation:
            sample = next(self.stream, StopIteration)
            if sample is StopIteration:
                self.ended = True
                raise StopIteration
            return sample
        samples = list(itertools.islice(self.stream, self.batch_size))
        if not samples or (self.drop_last and len(samples) < self.batch_size):
            self.ended = True
            raise StopIteration
        return samples


def _single_thread(loader: DataLoader, indices: Iterator) -> Iterator[Any]:
    fetcher = _Fetcher(_Reading.of(loader))
    for index in indices:
        try:
            yield fetcher.fetch(index)
        except StopIteration:
            return


@dataclass
class _Task:
    epoch: int
    number: int  # the batch's position in the epoch
    index: Any  # what the sampler gave: a list of indices, an index, or None for a stream


@dataclass
class _Result:
    epoch: int
    number: int
    worker: int
    value: Any = None
    error: BaseException | None = None
    exhausted: bool = False  # the worker's stream has ended: skip this batch and the worker


class _WorkerPool:
    """``num_workers`` daemon threads, each reading tasks from its own queue and putting
    results on one shared queue. A ``None`` task stops a thread."""

    def __init__(self, loader: DataLoader, base_seed: int) -> None:
        self.reading = _Reading.of(loader)
        self.num_workers = loader.num_workers
        self.worker_init_fn = loader.worker_init_fn
        self.epoch = 0  # the epoch whose tasks are worth doing; older ones are skipped
        self.tasks: list[queue.Queue] = [queue.Queue() for _ in range(loader.num_workers)]
        self.results: queue.Queue[_Result] = queue.Queue()
        self.threads = [threading.Thread(target=self._work, args=(worker, base_seed),
                                         name=f"gingham DataLoader worker {worker}",
                                         daemon=True)
                        for worker in range(loader.num_workers)]
        for thread in self.threads:
            thread.start()

    def _work(self, worker: int, base_seed: int) -> None:
        _worker_local.info = WorkerInfo(worker, self.num_workers, base_seed + worker,
                                        self.reading.dataset)
        init_error = None
        if self.worker_init_fn is not None:
            try:
                self.worker_init_fn(worker)
            except Exception as error:
                error.add_note(f"(in worker_init_fn of DataLoader worker {worker})")
                init_error = error
        fetcher, fetcher_epoch = None, -1
        while (task := self.tasks[worker].get()) is not None:
            if task.epoch != self.epoch:
                continue  # an abandoned epoch's prefetch
            result = _Result(task.epoch, task.number, worker)
            if init_error is not None:
                result.error = init_error
                self.results.put(result)
                continue
            try:
                if fetcher_epoch != task.epoch:
                    fetcher, fetcher_epoch = _Fetcher(self.reading), task.epoch
                result.value = fetcher.fetch(task.index)
            except StopIteration:
                result.exhausted = True
            except Exception as error:
                error.add_note(f"(in DataLoader worker {worker}, batch {task.number})")
                result.error = error
            self.results.put(result)

    def shutdown(self) -> None:
        self.epoch = -1
        for tasks in self.tasks:
            tasks.put(None)


class _MultiWorkerIterator:
    """One epoch over a worker pool: keeps ``prefetch_factor * num_workers`` batches in
    flight and hands them out in order."""

    _epochs = itertools.count(1)

    def __init__(self, loader: DataLoader, pool: _WorkerPool, owns_pool: bool) -> None:
        self.pool, self.owns_pool = pool, owns_pool
        self.timeout = loader.timeout or None
        self.indices = iter(loader._index_sampler)
        self.epoch = next(self._epochs)
        pool.epoch = self.epoch
        self.active = [True] * loader.num_workers
        self.next_worker = itertools.cycle(range(loader.num_workers))
        self.sent = self.received = 0
        self.worker_of: dict[int, int] = {}
        self.ready: dict[int, _Result] = {}
        self.finished = False
        for _ in range(loader.prefetch_factor * loader.num_workers):
            self._send()

    def _send(self) -> None:
        if not any(self.active):
            return
        index = next(self.indices, StopIteration)
        if index is StopIteration:
            return
        worker = next(self.next_worker)
        while not self.active[worker]:
            worker = next(self.next_worker)
        self.pool.tasks[worker].put(_Task(self.epoch, self.sent, index))
        self.worker_of[self.sent] = worker
        self.sent += 1

    def __iter__(self) -> "_MultiWorkerIterator":
        return self

    def __next__(self) -> Any:
        if self.pool.epoch != self.epoch and not self.finished:
            # Persistent workers serve one epoch at a time; they would skip this one's tasks.
            raise RuntimeError("DataLoader with persistent_workers: a newer iter(loader) has "
                               "replaced this iterator; iterate one epoch at a time")
        while True:
            if self.finished or self.received == self.sent:
                self._finish()
                raise StopIteration
            result = self.ready.pop(self.received, None)
            if result is None:
                self._collect()
                continue
            self.received += 1
            if result.exhausted:
                self.active[result.worker] = False
                self._send()
                continue
            if result.error is not None:
                # The epoch ends here: a caller that catches the error must not find workers
                # still running (nor wait for them).
                self._finish()
                raise result.error
            self._send()
            return result.value

    def _collect(self) -> None:
        try:
            result = self.pool.results.get(timeout=self.timeout)
        except queue.Empty:
            self._finish()
            raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds") from None
        if result.epoch == self.epoch:
            self.ready[result.number] = result

    def _finish(self) -> None:
        if not self.finished and self.owns_pool:
            self.pool.shutdown()
        self.finished = True

    def __del__(self) -> None:
        # Leaving the loop early drops the iterator: stop the workers (they finish the batch
        # at hand and exit; nothing waits on them).
        if hasattr(self, "finished"):
            self._finish()


__all__ = ["DataLoader", "WorkerInfo", "get_worker_info"]
