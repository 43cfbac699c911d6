"""A compile worker that starts like gingham's and dies when asked to build (no reply).

Run by tests/devices/test_opencl_build.py in place of ``gingham/devices/opencl_worker.py``:
a real worker process that ends in the middle of a request, as one killed by the OOM killer
or a crashing driver would.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

sys.path.pop(0)  # run as a script: this folder must not shadow packages
_WORKER = Path(__file__).resolve().parents[2] / "gingham" / "devices" / "opencl_worker.py"
_spec = importlib.util.spec_from_file_location("opencl_worker", _WORKER)
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)


def die(*args, **kwargs):
    os._exit(3)


if __name__ == "__main__":
    worker.main(build_one=die)
