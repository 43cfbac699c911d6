"""Run a command with ``GINGHAM_DEBUG=1`` and print its output with each line's arrival time,
in seconds since the command started: a first step's timeline from gingham's debug lines
(context created, compile workers ready, device model, traced, planned, first piece,
pieces' spans, kernels compiled, steps)::

    python3 tools/timeline.py -- python3 -m gingham bench model resnet9 --device opencl:0 --no-torch

``GINGHAM_DEBUG`` already set is kept. The command's stdout and stderr are merged; the
exit status is the command's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
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
    for line in process.stdout:
        sys.stdout.write(f"{time.perf_counter() - start:8.3f}  {line}")
        sys.stdout.flush()
    return process.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
