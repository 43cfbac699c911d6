"""Refining kernels while a model trains: ``GINGHAM_TUNE=background``.

With ``tune = "background"`` a program compiles at once with the cost model's schedules (as with
``off``: the first step is not delayed), and every tunable kernel the tuning database lacks is
queued here. Then, while a :func:`gingham.jit` function keeps being called:

1. a worker thread builds the queued kernel's candidates (:class:`~gingham.tune.search.Search`:
   compiling them is the expensive part, and touches no device memory);
2. between two steps, the thread that trains checks and times the built candidates (so a timing
   never overlaps a step, and a step waits for at most one kernel's timing) and stores the
   fastest in the tuning database. The worker builds the next kernel only once that is done, so
   compiling never overlaps timing either;
3. when every kernel a jitted program queued is settled and at least one got a schedule other
   than the cost model's, the worker compiles the program again (the database now answers for
   every kernel; unchanged kernels come from the disk cache), and the next step runs the new
   executable.

Convolution layers whose algorithm (direct or Winograd, :mod:`gingham.tune.algorithms`) the
database lacks are queued the same way while the step is traced: the worker compiles the
layer alone both ways, the training thread checks and times the two between two steps and
stores the faster. When a layer's winner is not the way the step was built with, the jitted
function traces the step again on its next call (:data:`RETRACE`): the algorithm is decided
while tracing, so only a new trace can change it. That call compiles the changed layers'
kernels at once, in the training thread: the one pause of background tuning. The old trace's
kernels not measured yet are withdrawn; the new trace queues again those it still has.

The next process finds the schedules and algorithms in the database: a program refined once
is never tuned again. ``gingham tune`` does the same ahead of time, with the search's
neighbour rounds too.

    GINGHAM_TUNE=background python train.py     # trains at once, gets faster as it goes

    >>> step = gingham.jit(train_step)           # in Python: the same through the config
    >>> for images, labels in batches: step(images, labels)
    >>> step.refinements                         # programs swapped for refined ones so far
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..config import debug_print, get_config
from ..devices.base import Device
from . import algorithms
from .db import TuningDB


#: What :meth:`ProgramRefinement.after_step` returns when a layer's measured algorithm differs
#: from the one the program was traced with: the jitted function must trace again.
RETRACE = "retrace"


@dataclass
class _Job:
    """One kernel (or one convolution layer) waiting for, or done with, its measurement."""

    key: tuple[str, str]  # (kernel or layer key, device key): the database's key
    family: Any  # the kernel's schedule family; None for a layer
    device: Device
    name: str
    search: Any = None  # the Search, once its candidates are built
    state: str = "queued"  # queued -> built -> done (or failed); or withdrawn
    changed: bool = False  # the winner differs from the untuned choice
    layer: Any = None  # a ConvLayer whose algorithm is to be chosen
    rule: str | None = None  # the algorithm the layer was built with, untuned


@dataclass
class _Collector:
    keys: list[tuple[str, str]] = field(default_factory=list)


class Refiner:
    """The process's background tuner: one worker thread, jobs keyed by database key.

    ``candidates``: schedules each kernel's search compiles and times (the search's first
    round; :data:`gingham.tune.search.CANDIDATES` by default).
    """

    def __init__(self, candidates: int | None = None) -> None:
        from .search import CANDIDATES

        self.candidates = max(1, candidates or CANDIDATES)
        self._lock = threading.Lock()
        self._jobs: dict[tuple[str, str], _Job] = {}
        self._queue: "queue.Queue[_Job | tuple]" = queue.Queue()
        self._built: list[_Job] = []  # built, waiting to be measured between two steps
        self._measured = threading.Event()  # the worker waits on it before the next build
        self._measured.set()
        self._thread: threading.Thread | None = None
        self._local = threading.local()

    # -- what compilation reports ----------------------------------------------------------------

    @contextlib.contextmanager
    def collecting(self) -> Iterator[_Collector]:
        """Within the block, the keys of the kernels queued (or found already queued) by a
        compilation on this thread are gathered: the jit watches them to know when its
        program is settled."""
        collector = _Collector()
        previous = getattr(self._local, "collector", None)
        self._local.collector = collector
        try:
            yield collector
        finally:
            self._local.collector = previous

    def submit(self, family, device: Device, name: str, key: tuple[str, str]) -> None:
        """Queue a kernel the database lacks (once per process: a kernel seen before, even one
        whose search failed, is not queued again)."""
        self._add(_Job(key, family, device, name))

    def submit_layer(self, layer, rule: str, device: Device, key: tuple[str, str]) -> None:
        """Queue a convolution layer whose algorithm the database lacks (``rule``: the way
        it is being built meanwhile); once per process, as :meth:`submit`."""
        self._add(_Job(key, None, device, layer.describe(), layer=layer, rule=rule))

    def _add(self, job: _Job) -> None:
        collector = getattr(self._local, "collector", None)
        if collector is not None:
            collector.keys.append(job.key)
        with self._lock:
            if job.key in self._jobs:
                return
            self._jobs[job.key] = job
        self._queue.put(job)
        self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="gingham-tune",
                                                daemon=True)
                self._thread.start()

    # -- the worker thread ------------------------------------------------------------------------

    def _work(self) -> None:
        from .search import Search

        while True:
            item = self._queue.get()
            if isinstance(item, tuple):  # (bound, device, future): compile a program again
                self._recompile(*item)
                continue
            job = item
            self._measured.wait()  # never compile while the training thread is timing
            if job.state == "withdrawn":  # its program was traced again without it
                continue
            try:
                if job.layer is not None:
                    algorithms.prepare(job.layer)  # both ways compiled: measured from cache
                else:
                    budget = get_config().tune_budget
                    job.search = Search(job.family, job.device, job.name, budget,
                                        progress=False, candidates=self.candidates)
                    job.search.build_first_round()
            except Exception as exc:  # noqa: BLE001 - a kernel that cannot be tuned keeps its
                job.state = "failed"  # untuned schedule; training goes on
                debug_print(1, f"background tuning of {job.name} failed: {exc}")
                continue
            with self._lock:
                if job.state == "withdrawn":  # withdrawn while it was being built
                    job.search = None
                    continue
                job.state = "built"
                self._built.append(job)
                self._measured.clear()

    def _recompile(self, bound, device: Device, future: concurrent.futures.Future) -> None:
        from ..compiler import compile_program

        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(compile_program(bound, device))
        except Exception as exc:  # noqa: BLE001 - reported to the thread that waits
            future.set_exception(exc)

    # -- the training thread ----------------------------------------------------------------------

    def between_steps(self, device: Device) -> _Job | None:
        """Measure one built kernel or layer of ``device`` (if any) and store its winner;
        the job."""
        with self._lock:
            job = next((j for j in self._built if j.device is device), None)
            if job is None:
                return None
            self._built.remove(job)
        try:
            if job.layer is not None:
                result = algorithms.measure(job.layer, job.rule, progress=False)
            else:
                job.search.measure()
                job.search.close()
                result = job.search.result()
        except Exception as exc:  # noqa: BLE001 - the untuned schedule (or rule) stays
            job.state = "failed"
            debug_print(1, f"background tuning of {job.name} failed: {exc}")
        else:
            TuningDB().put(*job.key, result.entry())
            job.changed = result.config != result.default
            job.state = "done"
            debug_print(1, f"background tuning: {job.name} {result.speedup:.2f}x "
                           f"({result.default_seconds * 1e3:.3f} -> {result.seconds * 1e3:.3f} ms"
                           f", {result.schedule})")
        finally:
            job.search = None  # its buffers are freed; the built kernels are not needed
            with self._lock:
                if not self._built:
                    self._measured.set()
        return job

    def settled(self, keys: list[tuple[str, str]], layers: bool | None = None) -> bool:
        """Every kernel and layer of ``keys`` measured (or given up on); ``layers`` True:
        every layer, False: every kernel."""
        with self._lock:
            return all(job.state in ("done", "failed")
                       for job in (self._jobs.get(k) for k in keys)
                       if job is not None and layers in (None, job.layer is not None))

    def changed(self, keys: list[tuple[str, str]], layers: bool = False) -> bool:
        """Some kernel of ``keys`` got a schedule other than the cost model's (``layers``:
        some layer an algorithm other than the one it was built with)."""
        with self._lock:
            return any(job.changed and (job.layer is not None) == layers
                       for job in (self._jobs.get(k) for k in keys) if job is not None)

    def withdraw(self, keys: list[tuple[str, str]]) -> None:
        """Drop the kernels of ``keys`` not measured yet: their program is traced again, and
        the new trace queues again those it still has (a layer's other algorithm leaves the
        old one's kernels unused: timing them would only delay the new trace's)."""
        with self._lock:
            for key in keys:
                job = self._jobs.get(key)
                if job is None or job.layer is not None or job.state not in ("queued", "built"):
                    continue
                job.state = "withdrawn"
                del self._jobs[key]
                if job in self._built:
                    self._built.remove(job)
                    job.search = None
            if not self._built:
                self._measured.set()

    def recompile(self, bound, device: Device) -> concurrent.futures.Future:
        """Compile ``bound`` again on the worker thread; the future gives the executable."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((bound, device, future))
        self._start()
        return future


_refiner: Refiner | None = None
_refiner_lock = threading.Lock()


def refiner() -> Refiner:
    """The process's :class:`Refiner` (made on first use)."""
    global _refiner
    with _refiner_lock:
        if _refiner is None:
            _refiner = Refiner()
        return _refiner


def enabled() -> bool:
    return get_config().tune == "background"


class ProgramRefinement:
    """What one jitted program waits for: its queued kernels and layers, then its
    recompilation (or a new trace).

    :meth:`after_step` is called after each replay; it returns the refined executable once,
    when there is one to swap in, or :data:`RETRACE` once, when a layer's measured algorithm
    differs from the one traced; else None.
    """

    def __init__(self, bound, device: Device, keys: list[tuple[str, str]]) -> None:
        self.bound, self.device, self.keys = bound, device, keys
        self.future: concurrent.futures.Future | None = None
        self.finished = not keys

    def after_step(self) -> Any:
        if self.finished:
            return None
        tuner = refiner()
        if self.future is None:
            tuner.between_steps(self.device)
            # Layers first (they were queued first): once they are settled, a changed one
            # retraces at once, since kernels tuned for the old trace may not be in the new.
            if tuner.settled(self.keys, layers=True) and tuner.changed(self.keys, layers=True):
                self.finished = True
                tuner.withdraw(self.keys)
                return RETRACE
            if not tuner.settled(self.keys):
                return None
            if not tuner.changed(self.keys):
                self.finished = True  # the cost model's choices won: nothing to swap
                return None
            self.future = tuner.recompile(self.bound, self.device)
            return None
        if not self.future.done():
            return None
        self.finished = True
        try:
            return self.future.result()
        except Exception as exc:  # noqa: BLE001 - keep training on the executable we have
            debug_print(1, f"background tuning: recompiling the program failed: {exc}")
            return None


__all__ = ["Refiner", "refiner", "enabled", "ProgramRefinement", "RETRACE"]
