"""Compile worker slots shared by every gingham process on a machine.

A :class:`~gingham.devices.opencl_build.BuildPool` starts compile worker processes, one per
core by default, and on a GPU each holds a device context (524 MiB of an H200's memory for
NVIDIA's OpenCL). One process alone is well served by that; fifteen (a test run with
``pytest -n 15``, several experiments sharing a GPU, one process per GPU of a multi-GPU
host) would start fifteen pools: 240 workers on a 16-core host, whose contexts exhausted an
H100's memory (``CUDA_ERROR_OUT_OF_MEMORY`` creating the processes' own contexts), while
compiling no faster than 16, since the cores are what they share.

So a worker may start only while it holds a *slot*: one of ``config.compile_workers``
(default: the cores this process may use) lock files in a directory of the machine's temporary folder,
locked with ``flock`` for the worker's life. A process takes the free slots it needs, up to
its pool's size, and builds in its own process when there are none (its builds still run;
they wait for no one). The operating system drops a lock when its process ends, however it
ends, so a killed process never keeps its slots. ::

    slots = acquire(16)          # the free ones, up to 16 (maybe none)
    ...                          # start len(slots) workers, one slot each
    slots[0].release()           # when that worker stops

On a system without ``fcntl`` (Windows) every slot asked for is granted: the limit is then
per process only.
"""

from __future__ import annotations

import getpass
import os
import tempfile
import threading
from pathlib import Path

from gingham.config import debug_print, get_config

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def _usable_cores() -> int:
    """The cores this process may run on: a container's or a job's share of the host, not
    the host's count (on the 16-core GPU lease ``os.cpu_count()`` said 32, and 15 test
    processes' workers then filled an H100's memory with their contexts)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def limit() -> int:
    """Compile workers this machine runs at once, over every gingham process:
    ``config.compile_workers`` (``GINGHAM_COMPILE_WORKERS``), else one per core this process
    may use."""
    return get_config().compile_workers or _usable_cores()


def slot_dir() -> Path:
    """Where the slots' lock files live: the machine's temporary folder, per user (the cache
    directory may be on a network file system, where ``flock`` is not shared between
    machines, and it is not per machine anyway)."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (a container without a passwd entry)
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"gingham-{user}" / "compile-worker-slots"


class Slot:
    """One held slot: the open, locked file. :meth:`release` (idempotent) unlocks it."""

    def __init__(self, index: int, fd: int | None) -> None:
        self.index = index
        self._fd = fd
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the file drops its flock

    def __repr__(self) -> str:
        return f"Slot({self.index}{'' if self.held else ', released'})"


def acquire(wanted: int) -> list[Slot]:
    """Up to ``wanted`` free slots, locked for the caller (possibly none). Never waits: a
    slot held by another process is skipped."""
    if wanted <= 0:
        return []
    if fcntl is None:  # pragma: no cover - Windows: a per-process limit only
        return [Slot(i, None) for i in range(wanted)]
    directory = slot_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # A folder we cannot write (a read-only /tmp): no machine-wide limit, but the
        # workers still start; losing them would cost every build.
        debug_print(1, f"compile worker slots: cannot use {directory} ({exc}); not limited")
        return [Slot(i, None) for i in range(wanted)]
    slots: list[Slot] = []
    for index in range(limit()):
        if len(slots) == wanted:
            break
        fd = _try_lock(directory / f"{index}.lock")
        if fd is not None:
            slots.append(Slot(index, fd))
    return slots


def _try_lock(path: Path) -> int | None:
    """The file's descriptor, locked exclusively, or None when another process holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
