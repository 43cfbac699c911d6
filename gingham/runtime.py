"""Runs a bound Tile program on a device: the one place that maps a device id to an executor.

``device=None`` means the configured default device; ``"reference"`` is the NumPy interpreter.
"""

from __future__ import annotations

import numpy as np

from .tile.interpreter import run as interpret
from .tile.shapes import BoundProgram


def execute(bound: BoundProgram, arrays: list[np.ndarray], device: str | None) -> list[np.ndarray]:
    """Run ``bound`` on ``arrays`` and return its outputs in header order."""
    if device in (None, "reference"):
        env = interpret(bound, arrays)
        return [np.array(env[name]) for name in bound.program.outputs]
    from .errors import DeviceNotFoundError

    raise DeviceNotFoundError(f"device '{device}' is not available; use device='reference'")
