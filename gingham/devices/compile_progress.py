"""What a long compile shows while the program waits for it.

A fresh process's first step compiles every kernel of its program: ResNet-9's training step,
135 kernels, in about a second on an H100's 16-core host, 4 s with the ``cpu`` device and 20 s
with PoCL on a 2-core Xeon. Silence for that long reads as a hang, so a compile that the
program waits on for more than :data:`SHOW_AFTER` seconds shows, on a terminal, one line that
it keeps up to date::

    gingham: compiling 136 kernels for opencl:0: 69/136 done, 12 s

and, when it ends, what it cost and that it is paid once::

    gingham: compiled 136 kernels for opencl:0 in 20.6 s (cached on disk: the next run loads them)

``config.progress`` (``GINGHAM_PROGRESS``) chooses: ``auto`` (the default) shows it on a
terminal only; ``on`` also writes the final line where stderr is not a terminal (a log, a
notebook), for every compile that built something; ``off`` shows nothing. Compiles on other
threads (the background tuner's) and inside a tuning session, which draws its own progress
bars, show nothing.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Iterator, TextIO

from gingham.config import get_config

#: Seconds a compile must have run before its line appears (on a terminal, in ``auto``).
SHOW_AFTER = 2.0
#: Seconds between two updates of the line (and between two looks at the compile workers).
INTERVAL = 0.25

_hidden = threading.local()


@contextlib.contextmanager
def hidden() -> Iterator[None]:
    """No compile progress from this thread inside the block (a tuning session's own bars
    show what it compiles)."""
    previous = getattr(_hidden, "depth", 0)
    _hidden.depth = previous + 1
    try:
        yield
    finally:
        _hidden.depth = previous


class CompileProgress:
    """The progress line of one compile of ``total`` kernels for ``device_id``.

    ``mode``: ``auto``, ``on`` or ``off`` (see the module docstring); ``stream``: where it
    writes (stderr); ``started``: the compile's start (``time.perf_counter()``), so that the
    time already spent lowering and compiling counts. Example::

        >>> progress = CompileProgress("cpu", 146, "auto", sys.stderr, time.perf_counter())
        >>> progress.update(37)     # redraws the line, once SHOW_AFTER seconds have passed
        >>> progress.finish(146)    # the final line, if the live one was shown (or mode "on")
    """

    def __init__(self, device_id: str, total: int, mode: str, stream: TextIO,
                 started: float, show_after: float = SHOW_AFTER) -> None:
        self.device_id, self.total, self.stream = device_id, total, stream
        self.started, self.show_after = started, show_after
        self.mode = mode
        self.live = mode in ("auto", "on") and _isatty(stream)
        self.shown = False  # whether the live line has been drawn
        self._width = 0

    def _kernels(self, count: int) -> str:
        return f"{count} kernel{'' if count == 1 else 's'}"

    def update(self, done: int) -> None:
        """Redraw the live line with ``done`` of the kernels built (once it is due)."""
        elapsed = time.perf_counter() - self.started
        if not self.live or elapsed < self.show_after:
            return
        self._draw(f"gingham: compiling {self._kernels(self.total)} for {self.device_id}: "
                   f"{done}/{self.total} done, {elapsed:.0f} s")
        self.shown = True

    def finish(self, done: int) -> None:
        """End the line with what was compiled and how long it took: after a live line, or
        for every compile that built something with ``on``. A live line with nothing built
        (the compile failed) is cleared."""
        if done == 0 or not (self.shown or self.mode == "on"):
            if self.shown:
                self._draw("")
                self.stream.write("\r")
                self.stream.flush()
            return
        elapsed = time.perf_counter() - self.started
        self._draw(f"gingham: compiled {self._kernels(done)} for {self.device_id} in "
                   f"{elapsed:.1f} s (cached on disk: the next run loads them)")
        self.stream.write("\n")
        self.stream.flush()

    def _draw(self, text: str) -> None:
        if not self.live:
            self.stream.write(text)
            return
        # Over the previous line: pad with spaces where the new text is shorter.
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def for_compile(device_id: str, total: int, started: float) -> CompileProgress | None:
    """The progress line of a compile of ``total`` kernels the calling thread waits for, or
    None where none is to be shown (``progress`` off, not the main thread, inside
    :func:`hidden`, nothing to build)."""
    mode = get_config().progress
    if (mode == "off" or total == 0 or getattr(_hidden, "depth", 0)
            or threading.current_thread() is not threading.main_thread()):
        return None
    return CompileProgress(device_id, total, mode, sys.stderr, started)


__all__ = ["CompileProgress", "for_compile", "hidden", "SHOW_AFTER", "INTERVAL"]
