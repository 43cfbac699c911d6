"""Wall-clock timing of something that runs asynchronously on a device.

    timing = measure(lambda: exe.run(buffers), device.synchronize, repeat=5, budget=2.0)
    timing.seconds        # median time of one run over the trials

For latency rather than throughput, :func:`median_synced` synchronises after every run
(a training step as a loop that reads its loss each time sees it).

After a pause that lets other libraries' threads go idle (``SETTLE_SECONDS``), one
warm-up run sizes the measurement: a trial is ``number`` back-to-back runs followed by one
synchronisation (so launch overhead overlaps device work, as in a real step), the per-run time of
a trial is its time over ``number``, and the result is the median over the trials. The whole
measurement stays near ``budget`` seconds; a big op gets fewer trials, and an op whose warm-up run
takes more than ``slow`` seconds is timed exactly once (and says so).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from .contention import Contention

#: A run slower than this is timed once: more repeats would cost minutes and add no insight.
SLOW_RUN_SECONDS = 5.0

#: Seconds a measurement waits before its warm-up run. The work just before it (NumPy's
#: reference through OpenBLAS, a PyTorch baseline) leaves worker threads of those libraries
#: spinning for a while after their last call, in this process, so :class:`Contention` does
#: not see them; on a machine with few cores they take cores from the timed threads. On 2
#: cores, a bfloat16 log_softmax timed after a NumPy matmul: 13 of 300 runs stalled past 2 ms
#: (mean 607 us, median 277); after 0.2 s of waiting, 1 (mean 304 us). In `gingham bench ops
#: --device cpu --dtype bf16` PyTorch's softmax took 392-424 us one way and 185-194 us with
#: OpenBLAS on one thread.
SETTLE_SECONDS = 0.25

# Enough trials for a median when a run is short; a run of a second or more gets what fits.
_MIN_TRIALS_SHORT = 3
_SHORT_RUN_SECONDS = 1.0
_MAX_RUNS_PER_TRIAL = 10_000


@dataclass
class Timing:
    """The median per-run time of a measurement and what it is made of."""

    seconds: float
    runs: int  # timed runs, warm-up excluded
    trials: list[float] = field(default_factory=list)  # the per-run time of each trial
    note: str = ""

    def as_dict(self) -> dict:
        return {"seconds": self.seconds, "runs": self.runs, "trials": self.trials,
                "note": self.note}


class TrialSettings:
    """What a benchmark's settings give :func:`measure`, from their ``quick`` and ``repeat``
    fields (``bench ops``'s and ``bench onnx``'s settings dataclasses inherit it)."""

    quick: bool
    repeat: int | None

    @property
    def trials(self) -> int:
        """Timed trials per measurement: ``repeat`` when given, else 5 (3 with ``--quick``)."""
        return self.repeat if self.repeat is not None else (3 if self.quick else 5)

    @property
    def budget(self) -> float:
        """Seconds one measurement aims for after its warm-up run (shorter with ``--quick``)."""
        return 0.5 if self.quick else 2.0


def _once(run: Callable[[], object], sync: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    sync()
    return time.perf_counter() - start


def measure(run: Callable[[], object], sync: Callable[[], object], *, repeat: int = 5,
            budget: float = 2.0, slow: float = SLOW_RUN_SECONDS) -> Timing:
    """Time ``run`` (asynchronous; ``sync`` waits for it): the median per-run seconds.

    Guarantees at least one warm-up run before any timed run and at least one timed run;
    ``repeat`` bounds the number of trials.
    """
    assert repeat >= 1 and budget > 0
    sync()
    time.sleep(SETTLE_SECONDS)
    first = _once(run, sync)
    if first > slow:
        seconds = _once(run, sync)
        return Timing(seconds, 1, [seconds], f"timed once (one run takes > {slow:g} s)")
    first = max(first, 1e-7)
    number = max(1, min(_MAX_RUNS_PER_TRIAL, int(budget / (repeat * first))))
    if number > 1:
        trials = repeat
    else:
        fitting = int(budget / first)
        floor = _MIN_TRIALS_SHORT if first < _SHORT_RUN_SECONDS else 1
        trials = min(repeat, max(floor, fitting))
    per_run = []
    with Contention() as contention:
        for _ in range(trials):
            start = time.perf_counter()
            for _ in range(number):
                run()
            sync()
            per_run.append((time.perf_counter() - start) / number)
    notes = ["" if trials > 1 else "one timed run (a big op under the time budget)",
             contention.note()]
    return Timing(statistics.median(per_run), trials * number, per_run,
                  "; ".join(note for note in notes if note))


def median_synced(run: Callable[[], object], sync: Callable[[], object], count: int, *,
                  warmup: int = 1) -> float:
    """Median seconds of ``count`` runs, each timed from its call until ``sync`` returns
    (after ``warmup`` untimed runs): the latency of one run, launch and synchronisation
    included, where :func:`measure` overlaps them. Example::

        >>> median_synced(lambda: exe.run(buffers), device.synchronize, 20)
        0.00591
    """
    assert count >= 1 and warmup >= 0
    sync()
    time.sleep(SETTLE_SECONDS)  # as in measure: other libraries' threads go idle first
    for _ in range(warmup):
        run()
    sync()
    return statistics.median(_once(run, sync) for _ in range(count))
