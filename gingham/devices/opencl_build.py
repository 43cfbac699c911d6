"""OpenCL program builds in compile worker processes, and the check that says when they pay.

NVIDIA's OpenCL driver serialises ``clBuildProgram`` across the threads of one process: 12
of a ResNet-9 step's pieces took 3.8 s on one thread and 3.0 s on 16 (H200, cold driver
cache). Separate processes, each with its own context on the same device, build at once:
the step's 48 pieces took 1.2 s on 16 workers, 9.4 s on 16 threads (docs/opencl-builds.md).
:class:`BuildPool` keeps such processes (``opencl_worker.py``) for one device; a build takes
whichever builder is free first: a worker, or, until the first worker is ready, this process
itself (one build at a time), so no piece waits for the pool to come up::

    pool = BuildPool(target_of(cl_device), workers=16)
    pool.start()                                  # returns at once; workers start meanwhile
    ok, binary_or_log = pool.build(source, "", local=lambda: build_here(source))

A worker that dies, or a pool that cannot start, leaves this process building alone (with a
``debug_print`` saying why); a build is never lost.

Whether processes pay is measured, not looked up by vendor: :func:`builds_serialise` times
a few small builds one after another and the same number at once on threads. It runs while
no compile is in flight (:class:`Activity` says when), and its result is thrown away when a
compile starts meanwhile, so neither waits for the other nor falsifies the other's timing.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from gingham.config import debug_print
from gingham.devices import build_slots, opencl_worker

#: The worker script, run by path so that the worker imports nothing of gingham.
WORKER_SCRIPT = Path(opencl_worker.__file__)


def worker_command() -> list[str]:
    """The command line of a worker, before its device argument (tests replace this)."""
    return [sys.executable, str(WORKER_SCRIPT)]


#: What :meth:`BuildPool.build` runs when it builds in this process: the binary, or raises.
LocalBuild = Callable[[], bytes]


def target_of(cl_device) -> dict[str, Any]:
    """How a worker finds ``cl_device``: its platform's name, its name, and its index among the
    platform's devices. Example: ``{"platform": "Portable Computing Language",
    "device": "pthread-haswell-AMD EPYC", "index": 0}``."""
    platform = cl_device.platform
    index = next(i for i, d in enumerate(platform.get_devices()) if d == cl_device)
    return {"platform": platform.name.strip(), "device": cl_device.name.strip(),
            "index": index}


def _startup(worker: _Worker) -> str:
    """Where a worker's start-up went, for a debug line."""
    times = {k: v * 1e3 for k, v in worker.startup.items() if isinstance(v, float)}
    return (f" (its start-up {times['seconds']:.0f} ms: import {times['import']:.0f}, "
            f"device {times['find']:.0f}, its turn {times['waited']:.0f}, "
            f"context {times['context']:.0f})")


class WorkerDied(RuntimeError):
    """A worker process ended or broke the protocol."""


class _Worker:
    """One worker process and its pipes; used by one thread at a time."""

    def __init__(self, command: list[str], slot: build_slots.Slot | None = None) -> None:
        #: The machine-wide slot it runs in (:mod:`~gingham.devices.build_slots`), released
        #: when it has exited.
        self.slot = slot
        # pyopencl imports NumPy, whose BLAS would start a thread per core in every worker
        # (16 workers: 256 threads at once); a worker needs none. A worker launches nothing,
        # so one hardware queue is all its context needs: with NVIDIA's driver
        # (CUDA_DEVICE_MAX_CONNECTIONS, default 8; other drivers ignore it) a context then
        # took 0.06-0.07 s to create instead of 0.22, and 16 workers one at a time were all
        # ready after 1.7 s instead of 3.9 (H200, tools/ocl_worker_startup.py).
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", CUDA_DEVICE_MAX_CONNECTIONS="1")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        close_fds=True, env=env)
        self.pid = self.process.pid
        self.startup: dict[str, Any] = {}  # the worker's "ready" report: seconds, import, ...

    def wait_found(self) -> None:
        """Wait until it has imported pyopencl and found its device."""
        reply = self._receive()
        if reply[0] != "found":
            raise WorkerDied(f"it could not start: {reply[1]}")

    def make_context(self) -> None:
        """Tell it to create its context, and wait until it has."""
        try:
            opencl_worker.send(self.process.stdin, ("context",))
        except OSError as exc:
            raise WorkerDied(f"its input closed ({exc})") from None
        reply = self._receive()
        if reply[0] != "ready":
            raise WorkerDied(f"it could not start: {reply[1]}")
        self.startup = reply[1]

    def request(self, source: str, options: str, samples: Sequence[tuple] = ()
                ) -> tuple[bool, bytes | str]:
        message = ("build", source, options) + ((list(samples),) if samples else ())
        try:
            opencl_worker.send(self.process.stdin, message)
        except OSError as exc:
            raise WorkerDied(f"its input closed ({exc})") from None
        kind, payload, _ = self._receive()
        if kind not in ("built", "rejected"):
            raise WorkerDied(f"it answered {kind!r}")
        return kind == "built", payload

    def check(self, threads: int) -> tuple[bool, float]:
        """:func:`builds_serialise` run in this worker; RuntimeError if a probe failed."""
        try:
            opencl_worker.send(self.process.stdin, ("check", threads))
        except OSError as exc:
            raise WorkerDied(f"its input closed ({exc})") from None
        kind, payload, _ = self._receive()
        if kind == "rejected":
            raise RuntimeError(payload)
        if kind != "checked":
            raise WorkerDied(f"it answered {kind!r}")
        serialised, ratio = payload
        return bool(serialised), float(ratio)

    def load(self, binary: bytes, options: str) -> bool:
        """Build a program from ``binary`` in this worker, as the parent will load it (see
        :meth:`BuildPool.load_binaries`); False if the driver refused it."""
        try:
            opencl_worker.send(self.process.stdin, ("load", binary, options))
        except OSError as exc:
            raise WorkerDied(f"its input closed ({exc})") from None
        kind, _, _ = self._receive()
        if kind not in ("loaded", "rejected"):
            raise WorkerDied(f"it answered {kind!r}")
        return kind == "loaded"

    def _receive(self):
        try:
            return opencl_worker.receive(self.process.stdout)
        except Exception as exc:  # noqa: BLE001 - EOF, a torn or unreadable message
            code = self.process.poll()
            raise WorkerDied(f"{exc} (exit status {code})") from None

    def close_input(self) -> None:
        """Close its pipes: a worker exits at the end of its input."""
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def reap(self, deadline: float) -> None:
        """Wait for it to exit until ``deadline`` (perf_counter), then kill it."""
        try:
            self.process.wait(max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.slot is not None:
            self.slot.release()

    def stop(self, timeout: float = 2.0) -> None:
        """Close its input, and kill it if it has not exited within ``timeout`` seconds."""
        self.close_input()
        self.reap(time.perf_counter() + timeout)


_LOCAL = "this process"  # the builder token that means: build here

#: Workers that create their contexts at the same time; the others have imported pyopencl
#: and found the device, and wait for their turn. NVIDIA's driver creates contexts one at a
#: time, sharing the time among those that ask, so 16 workers started at once all had their
#: contexts 1.6-3.0 s after the spawn, none sooner (H200, ``tools/ocl_worker_startup.py``,
#: two rounds: the first 1.58 and 2.64 s, the last 2.68 and 3.0). One at a time, each took
#: 0.17 s: the first was ready after 0.61 s, the median after 1.8 s, the last after 3.2 s,
#: so a first step's builds start two seconds sooner; two at a time: 0.9, 1.9 and 3.1 s.
#: With one hardware queue per worker context (``_Worker``): one at a time 0.68-0.71,
#: 1.25-1.32 and 1.72-1.78 s; all at once 1.01, 1.29 and 1.35 s.
CONTEXTS_AT_ONCE = 1
#: How long the release of idle workers waits for a pool's workers to start before it counts
#: the pool idle (16 NVIDIA OpenCL workers took up to 3.2 s, above; a loaded machine more).
STARTUP_WAIT = 60.0


class BuildPool:
    """Compile worker processes for one OpenCL device, started once and reused.

    ``workers`` processes are spawned (``subprocess``: a fresh interpreter, never a fork of
    this one) by :meth:`start`, which returns at once, fewer when other processes hold this
    machine's compile worker slots (:mod:`~gingham.devices.build_slots`; ``size`` is then
    the number started); they import pyopencl at once, create
    their contexts one at a time (:data:`CONTEXTS_AT_ONCE`), and each joins the pool when its
    context exists. Until the first has joined (and again if every worker is lost), builds
    also run in this process, one at a time (the driver would serialise more anyway); once
    workers are there this process only loads what they built, which a build here would
    hold up.
    ``name`` prefixes the debug lines (the device id).
    """

    def __init__(self, target: dict[str, Any], workers: int, name: str = "opencl") -> None:
        self.target = target
        self.size = workers
        self.name = name
        self._command = worker_command()
        self._idle: queue.Queue = queue.Queue()
        self._idle.put(_LOCAL)
        self._local_dropped = False  # the _LOCAL token is out of the queue for good
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._all: list[_Worker] = []  # every worker ever started, for ``processes``
        self._started = False
        self._closed = False
        self.ready = 0  # workers that have joined
        self.lost = 0  # workers that failed to start or died
        self._serving = 0  # joined and not lost
        self._settled = threading.Condition(self._lock)
        self._context_turn = threading.Semaphore(CONTEXTS_AT_ONCE)
        #: builds done by workers and in this process (for tests and debug lines)
        self.built_by_workers = 0
        self.built_here = 0
        self.checked_by_workers = 0  # build checks (check_builds) answered by a worker
        self.loaded_by_workers = 0  # binaries built ahead of this process's load

    def start(self) -> None:
        """Spawn the workers (once), as many as the machine has free compile worker slots
        for (:mod:`~gingham.devices.build_slots`), up to ``workers``; each joins the pool when
        it is ready. With no free slot the pool builds in this process."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        started = time.perf_counter()
        argv = json.dumps(self.target)
        slots = build_slots.acquire(self.size)
        if len(slots) < self.size:
            debug_print(1, f"{self.name}: {len(slots)} of {self.size} compile workers: the "
                        f"other slots of this machine's {build_slots.limit()} are held by "
                        "other processes")
            with self._lock:
                self.size = len(slots)
                self._settled.notify_all()
        for slot in slots:
            try:
                worker = _Worker(self._command + [argv], slot)
            except OSError as exc:
                slot.release()
                debug_print(1, f"{self.name}: cannot start a compile worker ({exc}); "
                            "building in this process")
                self.lost += 1
                continue
            self._workers.append(worker)
            self._all.append(worker)
            threading.Thread(target=self._join, args=(worker, started), daemon=True,
                             name="gingham-opencl-worker-start").start()
        _POOLS.add(self)

    def _join(self, worker: _Worker, started: float) -> None:
        try:
            worker.wait_found()
            with self._context_turn:
                if self._closed:
                    return  # its input is closed: it exits without a context
                worker.make_context()
        except WorkerDied as exc:
            self._lose(worker, f"compile worker {worker.pid} {exc}")
            return
        with self._lock:
            if self._closed:
                return  # stopped while it started: its input is closed, it exits
            self.ready += 1
            self._serving += 1
            first, last = self.ready == 1, self.ready + self.lost == self.size
            self._settled.notify_all()
        if first or last:
            debug_print(1, f"{self.name}: {'first' if first else 'last'} of {self.size} "
                        f"compile workers ready after "
                        f"{(time.perf_counter() - started) * 1e3:.0f} ms{_startup(worker)}")
        self._idle.put(worker)

    def _lose(self, worker: _Worker, why: str, serving: bool = False) -> None:
        debug_print(1, f"{self.name}: {why}; building its work in this process")
        with self._lock:
            self.lost += 1
            self._serving -= serving
            if self._serving == 0 and self._local_dropped:
                self._local_dropped = False  # no worker left: this process builds again
                self._idle.put(_LOCAL)
            self._settled.notify_all()
        worker.stop(timeout=0.5)

    @property
    def serving(self) -> int:
        """Workers that have joined and are not lost."""
        return self._serving

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every worker has joined or been lost, or the pool is closed; True when
        all joined (and it is not closed)."""
        with self._lock:
            self._settled.wait_for(
                lambda: self.ready + self.lost >= self.size or self._closed, timeout)
            return self.ready == self.size and not self._closed

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has stopped the workers."""
        return self._closed

    @property
    def processes(self) -> list[subprocess.Popen]:
        """The worker processes started (also those lost or stopped), for tests."""
        return [worker.process for worker in self._all]

    def _drop_local(self) -> bool:
        """Retire this process as a builder when a worker serves (True: retired)."""
        with self._lock:
            if self._serving > 0:
                self._local_dropped = True
            return self._local_dropped

    def _give_back(self, builder) -> None:
        if builder is _LOCAL and self._drop_local():
            return
        self._idle.put(builder)

    def build(self, source: str, options: str, local: LocalBuild,
              samples: Sequence[tuple] = ()) -> tuple[bool, bytes | str]:
        """(True, binary) or (False, the compiler's log), from the first free builder.

        ``local`` builds in this process (it returns the binary or raises, e.g.
        KernelCompileError); it also runs when the worker that took the build died.
        ``samples``: kernels a worker runs once before it takes the binary
        (:func:`~gingham.devices.opencl_worker.run_samples`; a local build runs none).
        """
        if self._closed:
            return True, self._count_here(local())
        builder = self._idle.get()
        while builder is _LOCAL and self._drop_local():
            builder = self._idle.get()  # a worker serves: this process only loads
        try:
            if builder is _LOCAL:
                return True, self._count_here(local())
            try:
                result = builder.request(source, options, samples)
            except WorkerDied as exc:
                self._lose(builder, f"compile worker {builder.pid} died during a build ({exc})",
                           serving=True)
                builder = None  # never handed out again
                return True, self._count_here(local())
            with self._lock:
                self.built_by_workers += 1
            return result
        finally:
            if builder is not None:
                self._give_back(builder)

    def check_builds(self, threads: int = 2) -> tuple[bool, float] | None:
        """:func:`builds_serialise` in one of the workers (taken like a build): whether the
        driver serialises builds within a process, and the measured ratio; None when no
        worker serves. In a worker, the check's builds hold up nothing in this process (on
        NVIDIA, builds in the parent delayed the launches of the steps it overlapped)."""
        if self._closed or self._serving == 0:
            return None
        builder = self._idle.get()
        while builder is _LOCAL:
            if not self._drop_local():  # no worker serves (any more): not here either
                self._idle.put(_LOCAL)
                return None
            builder = self._idle.get()
        try:
            result = builder.check(threads)
            with self._lock:
                self.checked_by_workers += 1
            return result
        except WorkerDied as exc:
            self._lose(builder, f"compile worker {builder.pid} died during the build check "
                       f"({exc})", serving=True)
            builder = None
            return None
        finally:
            if builder is not None:
                self._give_back(builder)

    def load_binaries(self, work: LoadQueue, options: str) -> None:
        """Start one thread per worker that builds binaries from the back of ``work`` in
        the workers, while this process loads from its front (see :class:`LoadQueue`), and
        return at once. Where the driver compiles a binary again when it is loaded and does
        so one program at a time in a process (NVIDIA's: PTX), a warm cache's pieces then
        compile on every worker at once, and this process finds them in the driver's disk
        cache. A thread takes a binary only once it has a worker, so nothing waits for the
        workers' start-up; they take nothing once this process has reached the back."""
        for _ in range(self.size):
            threading.Thread(target=self._load_from_back, args=(work, options), daemon=True,
                             name="gingham-opencl-load").start()

    def _load_from_back(self, work: LoadQueue, options: str) -> None:
        while not work.exhausted:
            builder = self._worker_when_one_serves(work)
            if builder is None:
                return
            index = None
            try:
                index = work.take_back()
                if index is None:
                    return
                if builder.load(work.binaries[index], options):
                    with self._lock:
                        self.loaded_by_workers += 1
            except WorkerDied as exc:
                self._lose(builder, f"compile worker {builder.pid} died loading a binary "
                           f"({exc})", serving=True)
                builder = None
            finally:
                if index is not None:
                    work.finish(index)
                if builder is not None:
                    self._give_back(builder)

    def _worker_when_one_serves(self, work: LoadQueue) -> _Worker | None:
        """An idle worker, waiting while the workers start; None once none will serve (all
        lost, or the pool closed) or ``work`` has nothing left to take."""
        while True:
            with self._lock:
                self._settled.wait_for(lambda: self._serving > 0 or self._closed or
                                       self.ready + self.lost >= self.size)
                if self._closed or self._serving == 0:
                    return None
            if work.exhausted:
                return None
            builder = self._idle.get()
            if builder is not _LOCAL:
                return builder
            if not self._drop_local():
                self._idle.put(_LOCAL)  # the worker that served was just lost

    def _count_here(self, binary: bytes) -> bytes:
        with self._lock:
            self.built_here += 1
        return binary

    def close(self, timeout: float = 2.0) -> None:
        """Stop every worker (idempotent): all are told at once, and those that have not
        exited within ``timeout`` seconds (one in the middle of a build) are killed. Later
        builds run in this process."""
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
            self._settled.notify_all()
        for worker in workers:
            worker.close_input()
        deadline = time.perf_counter() + timeout
        for worker in workers:
            worker.reap(deadline)
        _POOLS.discard(self)


class LoadQueue:
    """Binaries to load, taken from both ends: this process loads from the front, compile
    workers build from the back (:meth:`BuildPool.load_binaries`), and each binary a worker
    took is loaded here once the worker is done with it::

        work = LoadQueue(binaries)
        pool.load_binaries(work, options)
        while (index := work.take_front()) is not None:
            load(work.binaries[index])              # compiled here, one after another
        for index in work.taken_by_workers():
            work.wait(index)
            load(work.binaries[index])              # found in the driver's disk cache
    """

    def __init__(self, binaries: Sequence[bytes]) -> None:
        self.binaries = list(binaries)
        self._lock = threading.Lock()
        self._front, self._back = 0, len(self.binaries)
        self._finished = [threading.Event() for _ in self.binaries]

    @property
    def exhausted(self) -> bool:
        """Whether every binary has been taken."""
        return self._front >= self._back

    def take_front(self) -> int | None:
        with self._lock:
            if self._front >= self._back:
                return None
            self._front += 1
            return self._front - 1

    def take_back(self) -> int | None:
        with self._lock:
            if self._front >= self._back:
                return None
            self._back -= 1
            return self._back

    def taken_by_workers(self) -> range:
        """The indices taken from the back (call once the front is exhausted)."""
        return range(self._back, len(self.binaries))

    def finish(self, index: int) -> None:
        """A worker is done with ``index`` (built, refused, or its worker lost)."""
        self._finished[index].set()

    def wait(self, index: int) -> None:
        self._finished[index].wait()


_POOLS: weakref.WeakSet[BuildPool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    for pool in list(_POOLS):
        pool.close()


# ---- when is a device quiet? ------------------------------------------------------------

class Activity:
    """The compiles in flight on one device, for what must wait until there is none: the
    build check (a build beside it would falsify its timing) and the release of idle compile
    workers. ``generation`` counts the compiles started, so a waiter can tell whether one
    started while it worked. Example::

        activity = Activity()
        with activity.busy():                  # around each compile
            ...
        generation = activity.wait_quiet()     # elsewhere: no compile in flight now
        ...                                    # work that a compile must not overlap
        with activity.quiet_since(generation) as quiet:
            if quiet:                          # none started meanwhile, none can start now
                ...
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.active = 0  # compiles in flight
        self.generation = 0  # compiles started so far
        self._last_end = time.monotonic()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Count a compile in flight for the ``with`` block."""
        with self._changed:
            self.active += 1
            self.generation += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self.active -= 1
                self._last_end = time.monotonic()
                self._changed.notify_all()

    def wait_quiet(self, started: int = 0, timeout: float | None = None) -> int | None:
        """Wait until no compile is in flight and at least ``started`` have started; the
        generation then, or None after ``timeout`` seconds."""
        with self._changed:
            if not self._changed.wait_for(
                    lambda: self.active == 0 and self.generation >= started, timeout):
                return None
            return self.generation

    def wait_idle(self, seconds: float, since: float = 0.0) -> int:
        """Wait until no compile has been in flight for ``seconds``, counted from ``since``
        (a ``time.monotonic()``) at the earliest; the generation then."""
        with self._changed:
            while True:
                if self.active:
                    self._changed.wait()
                    continue
                left = max(self._last_end, since) + seconds - time.monotonic()
                if left <= 0:
                    return self.generation
                self._changed.wait(left)

    def disturbed_since(self, generation: int) -> bool:
        """Whether a compile started after ``generation`` or is in flight."""
        return self.active > 0 or self.generation != generation

    @contextmanager
    def quiet_since(self, generation: int) -> Iterator[bool]:
        """True when no compile started after ``generation`` and none is in flight; while
        the ``with`` block runs, no compile can start (keep it short)."""
        with self._changed:
            yield not self.disturbed_since(generation)


# ---- does this driver serialise builds? -------------------------------------------------

#: Defined in the worker module (standard library only), which runs it in a worker process.
builds_serialise = opencl_worker.builds_serialise
