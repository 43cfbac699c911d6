"""Whether other processes competed for the CPU while something was timed (Linux).

A benchmark checked for competing processes once, at its start; a test run started a minute
later halved a CPU ResNet-9 figure (0.61x instead of 1.34x) and nothing said so. This samples
the machine while the timed part runs::

    with Contention() as seen:
        times = [step() for _ in range(20)]
    if seen.busy:
        print(seen.note())   # "other processes were runnable in 9 of 12 samples ..."

A sample is the machine's runnable tasks (``/proc/loadavg``'s "running" field) less this
process's own runnable threads (``/proc/self/task/*/stat``), so that the benchmark's own
OpenMP, PyTorch and compile threads do not count. The two reads are not atomic, so one sample
can miscount by a thread; the verdict needs more than half of the samples.
"""

from __future__ import annotations

import os
import threading

#: Seconds between two samples.
INTERVAL = 0.1


def runnable_tasks(loadavg: str) -> int:
    """The "running" count of a ``/proc/loadavg`` line (``"0.52 0.58 0.59 3/201 4242"``: 3)."""
    return int(loadavg.split()[3].split("/")[0])


def own_runnable_threads() -> int:
    """This process's threads in state R (running or runnable)."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat", encoding="ascii") as handle:
                # "tid (name) S ...": the state follows the name, which may hold spaces.
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended
        count += state == "R"
    return count


def other_runnable() -> int | None:
    """Runnable tasks on the machine that are not this process's threads (None: unknown)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            total = runnable_tasks(handle.read())
        return max(0, total - own_runnable_threads())
    except (OSError, IndexError, ValueError):
        return None


class Contention:
    """Samples :func:`other_runnable` on a daemon thread while the ``with`` block runs."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Contention":
        self._sample()
        self._thread = threading.Thread(target=self._run, name="gingham-contention",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        others = other_runnable()
        if others is not None:
            self.samples.append(others)

    @property
    def busy_samples(self) -> int:
        return sum(1 for others in self.samples if others > 0)

    @property
    def busy(self) -> bool:
        """Other processes were runnable in more than half of the samples."""
        return bool(self.samples) and 2 * self.busy_samples > len(self.samples)

    def note(self) -> str:
        """What to tell the reader, or "" when the machine was quiet (or unknown)."""
        if not self.busy:
            return ""
        return (f"other processes were runnable in {self.busy_samples} of "
                f"{len(self.samples)} samples while this was timed: CPU timings are noisy")


__all__ = ["Contention", "other_runnable", "own_runnable_threads", "runnable_tasks"]
