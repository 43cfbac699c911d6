"""Compiling a program's kernels while the rest of it is still being lowered.

A program's first run used to lower every kernel and then compile the ones not cached; the
two phases cost their sum. A :class:`UnitBuilder` takes the kernels one at a time as they are
lowered and hands the heaviest waiting ones to a compile worker as soon as one is free, so
that the first run costs about the larger of the two (on from :data:`OVERLAP_MIN_JOBS`
compile workers, or as ``GINGHAM_COMPILE_OVERLAP`` says)::

    with device.unit_builder(assemble) as build:
        for kernel in kernels_as_lowered():
            build.add(unit_of(kernel, dialect)[0])   # may start a compilation at once
    kernels = build.kernels()                        # one Kernel per add(), in order

:meth:`gingham.devices.base.Device.compile_units` is the same with every unit known at once:
nothing starts early, and the pieces are the ones an all-at-once split gives.

Each unit is still cached on disk under its own key, which points to the piece it was built in
(the piece is stored first, then the pointers); a unit found in memory or on disk is not built.
A piece that does not compile raises :class:`~gingham.errors.KernelCompileError` from
:meth:`UnitBuilder.kernels`, after the other pieces have finished and been stored.
"""

from __future__ import annotations

import contextlib
import math
import time
from concurrent.futures import Executor, Future, wait
from typing import TYPE_CHECKING, Callable, Sequence

from gingham.cache import DiskCache
from gingham.config import debug_print, get_config
from gingham.devices import compile_progress

if TYPE_CHECKING:
    from gingham.devices.base import BuiltPiece, Device, Kernel, SourceUnit

Assemble = Callable[[Sequence["SourceUnit"]], str]

#: Compile workers from which the overlap is on unless configured: the lowering thread takes
#: a core from the compilers, which a machine with few cores cannot spare. Measured on the
#: H200's 16-core host (bf16 ResNet-9, fresh caches, three rounds each): first step 2.4 /
#: 2.4 / 2.5 s overlapped against 2.5 / 2.7 / 3.0 s not; on a shared 2-core machine the
#: overlap did not help.
OVERLAP_MIN_JOBS = 4


def overlap_on(jobs: int) -> bool:
    """Whether a program's kernels compile while the rest is lowered, with ``jobs`` workers:
    ``config.compile_overlap`` (``GINGHAM_COMPILE_OVERLAP``) if set, else from
    :data:`OVERLAP_MIN_JOBS` workers on."""
    setting = get_config().compile_overlap
    if jobs <= 1:
        return False
    return jobs >= OVERLAP_MIN_JOBS if setting is None else setting


class UnitBuilder:
    """Kernels compiled in pieces as their units arrive; see the module docstring.

    ``jobs`` workers compile at once. With ``eager`` (by default :func:`overlap_on`) a worker that is free
    while units still come takes the heaviest waiting units, up to one share of those seen so
    far (a share: what a piece of an all-at-once split weighs, a few per worker); one worker
    is left to the thread that makes the units (its lowering is the other half of the
    overlap). :meth:`kernels` shares out what still waits as an all-at-once split would
    (fewer pieces for what eager pieces left; ``jobs`` = 1: a single piece), heaviest first.
    Without ``eager`` everything waits for that.
    """

    #: Pieces per worker when the rest is shared out at the end: the units' costs are only a
    #: guess at compile time, so a worker that finishes early takes the next piece instead of
    #: idling behind a slow one.
    PIECES_PER_JOB = 3

    def __init__(self, device: Device, assemble: Assemble, jobs: int,
                 eager: bool | None = None) -> None:
        self.device = device
        self.assemble = assemble
        self.jobs = max(1, jobs)
        self.eager = overlap_on(self.jobs) if eager is None else eager
        self._identity = device._compiler_identity()
        self._cache = DiskCache(device.cache_namespace)
        self._keys: list[str] = []  # one per add(), in order
        self._found: dict[str, Kernel] = {}
        # Units whose pointer (the key of their piece) is on disk, with it: loaded at the end.
        self._on_disk: dict[str, tuple[SourceUnit, bytes]] = {}
        self._pending: list[tuple[str, SourceUnit]] = []  # misses not yet in a piece
        self._seen_cost = 0.0  # of every miss so far: sizes the eager pieces
        self._queued: set[str] = set()
        self._pieces: list[tuple[list[tuple[str, SourceUnit]], str, Future]] = []
        self._pool: Executor | None = None
        self._start = 0.0
        self._created = time.perf_counter()
        # Each piece's (submitted, finished) perf_counter times, for the debug timeline.
        self._spans: list[list[float]] = []
        self._done = False
        # The device's mark of a compile in flight, from now until close().
        self._compiling = contextlib.ExitStack()
        self._compiling.enter_context(device._compiling())

    @property
    def started(self) -> int:
        """How many pieces have been handed to the compile workers so far."""
        return len(self._pieces)

    # ---- feeding ------------------------------------------------------------------------

    def add(self, unit: SourceUnit) -> None:
        """Register one kernel's unit; a miss may start compiling at once (``eager``)."""
        key = self.device.unit_key(unit, self._identity)
        self._keys.append(key)
        kernel = self.device._kernels.get(key)
        if kernel is not None:
            self._found[key] = kernel
            self.device.stats.cache_hits += 1
            return
        if key in self._queued:
            return  # the same kernel again (a repeated layer): built once
        self._queued.add(key)
        pointer = self._cache.get(key)
        if pointer is not None:
            self._on_disk[key] = unit, pointer
            return
        self._pending.append((key, unit))
        self._seen_cost += unit.cost
        if self.eager:
            self._dispatch(max(1, self.jobs - 1))

    def _dispatch(self, workers: int) -> None:
        """While fewer than ``workers`` compile, start a piece of the heaviest waiting units
        (an idle worker gains nothing by waiting for more), up to one share of the units
        seen: a worker freed late does not take everything that came meanwhile."""
        busy = sum(1 for _, _, future in self._pieces if not future.done())
        share = self._seen_cost / (self.PIECES_PER_JOB * self.jobs)
        while busy < workers and self._pending:
            taken, cost = set(), 0.0
            for index in sorted(range(len(self._pending)),
                                key=lambda i: -self._pending[i][1].cost):
                unit_cost = self._pending[index][1].cost
                if taken and cost + unit_cost > share:
                    continue
                taken.add(index)
                cost += unit_cost
            self._submit([item for i, item in enumerate(self._pending) if i in taken])
            self._pending = [item for i, item in enumerate(self._pending) if i not in taken]
            busy += 1

    def _build_here(self, piece: list[tuple[str, SourceUnit]]) -> None:
        """Build ``piece`` on this thread (as a finished future, like a worker's)."""
        self._start = time.perf_counter()
        source = self.assemble([unit for _, unit in piece])
        future: Future = Future()
        span = [self._start, 0.0]
        try:
            future.set_result(self.device._build_piece(source, [u.entry for _, u in piece],
                                                       [u.sample for _, u in piece]))
        except Exception as exc:  # noqa: BLE001 - raised by _store_all like a worker's
            future.set_exception(exc)
        span[1] = time.perf_counter()
        self._spans.append(span)
        self._pieces.append((piece, source, future))

    def _submit(self, piece: list[tuple[str, SourceUnit]]) -> None:
        if self._pool is None:
            self._start = time.perf_counter()
            self._pool = self.device._compile_pool(self.jobs)
        source = self.assemble([unit for _, unit in piece])
        if not self._pieces:
            debug_print(1, f"{self.device.id}: the first piece ({len(piece)} kernel(s)) starts "
                        f"{(time.perf_counter() - self._created) * 1e3:.0f} ms after the "
                        "lowering began")
        span = [time.perf_counter(), 0.0]
        self._spans.append(span)
        future = self._pool.submit(self.device._build_piece, source,
                                   [unit.entry for _, unit in piece],
                                   [unit.sample for _, unit in piece])
        future.add_done_callback(lambda _: span.__setitem__(1, time.perf_counter()))
        self._pieces.append((piece, source, future))

    # ---- collecting ---------------------------------------------------------------------

    @property
    def keys(self) -> list[str]:
        """The disk-cache key of every added unit (:meth:`Device.unit_key`), in the order
        added."""
        return list(self._keys)

    def kernels(self) -> list[Kernel]:
        """Every added unit's kernel, in the order added (waits for the compilations)."""
        if not self._done:
            self._finish()
        return [self._found[key] for key in self._keys]

    def _finish(self) -> None:
        self._done = True
        try:
            self._submit_the_rest()
            self._store_all()
        finally:
            self.close()

    def _submit_the_rest(self) -> None:
        """Load what is on disk; share out what still waits and start it."""
        from gingham.devices.base import split_evenly

        if self._on_disk:
            self._found.update(self.device._load_cached_units(self._cache, self._on_disk))
            for key, (unit, _) in self._on_disk.items():
                if key not in self._found:  # the piece was damaged or did not load
                    self._pending.append((key, unit))
        if not self._pending:
            return
        # What waits is shared out as an all-at-once split of every miss would (jobs = 1: one
        # piece): a few pieces per worker, fewer for the part that eager pieces left (each
        # piece costs a compiler start: ~50 ms of NVRTC, ~0.1 s of a C compiler process).
        parts = 1 if self.jobs == 1 else self.PIECES_PER_JOB * self.jobs
        if self._pieces and parts > 1:
            left = sum(unit.cost for _, unit in self._pending)
            parts = math.ceil(parts * left / max(self._seen_cost, 1e-9))
            # But one piece a worker at least: the costs weigh unrolled products far above
            # the small kernels lowered after them (a fp32 ResNet-9 step on the H200 left
            # 101 elementwise and reduction kernels to 7 pieces of 13-14, 0.45-0.7 s each
            # behind the products: the last 0.3 s of its compile).
            parts = max(parts, min(self.jobs, len(self._pending)))
        rest = split_evenly(self._pending, parts, weight=lambda item: item[1].cost)
        self._pending = []
        if self._pool is None and len(rest) == 1:
            self._build_here(rest.pop())  # a single piece: no worker thread needed
        for piece in sorted(rest, key=lambda p: -sum(unit.cost for _, unit in p)):
            self._submit(piece)  # the heaviest first

    def _wait(self) -> None:
        """Wait for every piece, showing the compile's progress where it is long enough to
        (:mod:`gingham.devices.compile_progress`); counted from the start of the lowering."""
        sizes = {future: len(piece) for piece, _, future in self._pieces}
        progress = compile_progress.for_compile(self.device.id, sum(sizes.values()),
                                                self._created)
        if progress is None:
            return  # _store_all waits on each piece in turn
        pending = set(sizes)
        try:
            while pending:
                progress.update(sum(sizes.values()) - sum(sizes[f] for f in pending))
                _, pending = wait(pending, timeout=compile_progress.INTERVAL)
        except BaseException:
            progress.finish(0)  # interrupted: clear the line
            raise
        progress.finish(sum(size for future, size in sizes.items()
                            if not future.cancelled() and future.exception() is None))

    def _store_all(self) -> None:
        """Wait for every piece; store and register the good ones; raise the first error."""
        self._wait()
        results: list[tuple[list, str, BuiltPiece]] = []
        error = None
        for piece, source, future in self._pieces:
            try:
                results.append((piece, source, future.result()))
            except BaseException as exc:  # noqa: BLE001 - raised below, after the rest
                error = error or exc
        device = self.device
        for piece, _, built in results:
            device.stats.compiles += 1
            # The piece first, then the pointers to it: a pointer never names a missing piece
            # (unless it is damaged later, which reads as a miss).
            self._cache.put(built.key, built.binary)
            for (key, _), kernel in zip(piece, built.kernels):
                self._cache.put(key, built.key.encode("ascii"))
                self._found[key] = device._kernels[key] = kernel
        self._report(results)
        if error is not None:
            raise error

    def _report(self, results: list[tuple[list, str, BuiltPiece]]) -> None:
        if not results:
            return
        units = sum(len(piece) for piece, *_ in results)
        workers = min(self.jobs, len(self._pieces))
        builds = [built for *_, built in results]
        wall = sum(built.seconds for built in builds)
        cpu = sum(built.thread_cpu_seconds for built in builds)
        debug_print(1, f"{self.device.id}: compiled {units} kernel(s) in {len(self._pieces)} "
                    f"piece(s) on {workers} worker(s) in "
                    f"{(time.perf_counter() - self._start) * 1e3:.1f} ms (longest piece "
                    f"{max(built.seconds for built in builds) * 1e3:.1f} ms; builds "
                    f"{wall:.2f} s, on their threads' CPU {cpu:.2f} s)")
        # The timeline of the pieces, in ms from the first piece's start: when each was
        # handed to a worker and when it was built (what waited for a builder shows here).
        spans = " ".join(f"{(start - self._start) * 1e3:.0f}-{(end - self._start) * 1e3:.0f}"
                         f"/{len(piece)}" for (start, end), (piece, *_) in
                         sorted(zip(self._spans, self._pieces), key=lambda item: item[0][0]))
        debug_print(1, f"{self.device.id}: pieces (submitted-built ms/kernels): {spans}")
        for piece, source, built in sorted(results, key=lambda r: -r[-1].seconds)[:5]:
            # Level 2: the slowest pieces, to find a kernel that a driver compiles slowly.
            debug_print(2, f"{self.device.id}: piece of {len(piece)} kernel(s), "
                        f"{len(source)} chars: {built.seconds * 1e3:.1f} ms "
                        f"({', '.join(unit.entry for _, unit in piece[:4])}"
                        f"{', ...' if len(piece) > 4 else ''})")

    def close(self) -> None:
        """Stop: pieces not started are dropped, running ones are waited for."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._compiling.close()

    def __enter__(self) -> UnitBuilder:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            self.close()  # lowering failed: compile nothing more
        elif not self._done:
            self._finish()
