"""Run a command with ``GINGHAM_DEBUG=1`` and print its output with each line's arrival time,
in seconds since the command started: a first step's timeline from gingham's debug lines
(context created, compile workers ready, device model, traced, planned, first piece,
pieces' spans, kernels compiled, steps)::

    python3 tools/timeline.py -- python3 -m gingham bench model resnet9 --device opencl:0 --no-torch

``GINGHAM_DEBUG`` already set is kept. The command's stdout and stderr are merged; the
exit status is the command's. After it, each compile's pieces are summed up (see
:func:`pieces_summary`): how busy the workers were over the compile phase, and when.
A saved log can be summed up again without running anything::

    python3 tools/timeline.py --summary run.log
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

#: The debug line of a compile's pieces (``gingham.devices.pieces``): "START-END/KERNELS" in
#: ms from the first piece's hand-out, one per piece.
_PIECES = re.compile(r"pieces \(submitted-built ms/kernels\): (.*)")
_SPAN = re.compile(r"(\d+)-(\d+)/(\d+)")
_WORKERS = re.compile(r"on (\d+) worker\(s\)")


def pieces_summary(line: str, workers: int, bin_ms: int = 100) -> str:
    """What a pieces line says about a compile phase: its end, the last hand-out, the
    pieces' spans summed (hand-out to built, so a wait for a free worker counts) against
    the workers' capacity over the phase, and how many pieces were in flight every
    ``bin_ms`` (more than ``workers``: queued)::

        >>> print(pieces_summary("... pieces (submitted-built ms/kernels): 0-300/1 10-250/4", 16))
        2 pieces (1 of one kernel), end 300 ms, last hand-out 10 ms; spans 0.54 s = 11% of 16 workers x 300 ms
        in flight per 100 ms: 0:1 100:2 200:2
    """
    match = _PIECES.search(line)
    if match is None:
        return ""
    spans = [tuple(map(int, m.groups())) for m in _SPAN.finditer(match.group(1))]
    if not spans:
        return ""
    end = max(built for _, built, _ in spans)
    summed = sum(built - start for start, built, _ in spans)
    singles = sum(1 for *_, kernels in spans if kernels == 1)
    capacity = workers * max(end, 1)
    flight = " ".join(f"{t}:{sum(1 for start, built, _ in spans if start <= t < built)}"
                      for t in range(0, end, bin_ms))
    return (f"{len(spans)} pieces ({singles} of one kernel), end {end} ms, last hand-out "
            f"{max(start for start, _, _ in spans)} ms; spans {summed / 1e3:.2f} s = "
            f"{100 * summed / capacity:.0f}% of {workers} workers x {end} ms\n"
            f"in flight per {bin_ms} ms: {flight}")


def summarise(lines: list[str]) -> list[str]:
    """A summary of every pieces line among ``lines`` (the worker count from the "compiled
    ... on N worker(s)" line that comes with it)."""
    out, workers = [], 1
    for line in lines:
        found = _WORKERS.search(line)
        if found:
            workers = int(found.group(1))
        summary = pieces_summary(line, workers)
        if summary:
            out.append(summary)
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--summary"] and len(argv) == 2:
        with open(argv[1], errors="replace") as log:
            print("\n".join(summarise(log.readlines())))
        return 0
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("GINGHAM_DEBUG", "1")
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, text=True, bufsize=1)
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        sys.stdout.write(f"{time.perf_counter() - start:8.3f}  {line}")
        sys.stdout.flush()
    code = process.wait()
    for summary in summarise(lines):
        print(f"timeline: {summary}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
