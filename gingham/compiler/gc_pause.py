"""Python's cyclic garbage collector held off while a program compiles.

Lowering a program makes some 10^5 short-lived objects (kernel IR nodes, index expressions,
rendered strings), nearly all of them freed by reference counting. Each 700 allocations the
collector still scans the young generation, and every tenth of those the older ones, which
by then hold the traced program, the plan and the lowered kernels: a fresh fp32 ResNet-9
step's lowering took 0.14-0.15 s of CPU with the collector and 0.10 s without it (2-core
EPYC, ``tools/first_step_phases.py``). On a first run the lowering is what hands the compile
workers their kernels, so the time comes off the first step. What cycles a compilation does
make are collected when it ends::

    with paused_collection():
        kernels = lower(plan)        # no collector passes in here
    # the collector is back on (unless it was off before: then it stays off)

Pauses nest and may overlap across threads (the background tuner compiles on its own): the
collector comes back when the last pause ends, and only if it was on when the first began.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_lock = threading.Lock()
_depth = 0  # pauses in progress, on every thread
_resume = False  # whether the collector was on when the outermost pause began


@contextlib.contextmanager
def paused_collection() -> Iterator[None]:
    """Hold off the cyclic garbage collector for the ``with`` block (see the module)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


__all__ = ["paused_collection"]
