"""gingham: a portable deep-learning compiler.

Programs are written in Tile (``gingham.tile``); kernels are generated for the CPU (C), any
OpenCL device and CUDA.
"""

from . import tile
from .errors import (
    DeviceError,
    DeviceMemoryError,
    DeviceNotFoundError,
    GinghamError,
    KernelCompileError,
    TileAffineError,
    TileConflictError,
    TileError,
    TileIndexError,
    TileNameError,
    TileShapeError,
    TileSyntaxError,
    TileTypeError,
)

__version__ = "0.1.0"

__all__ = [
    "tile",
    "GinghamError",
    "TileError",
    "TileSyntaxError",
    "TileNameError",
    "TileIndexError",
    "TileAffineError",
    "TileShapeError",
    "TileTypeError",
    "TileConflictError",
    "DeviceError",
    "DeviceNotFoundError",
    "DeviceMemoryError",
    "KernelCompileError",
]
