"""``torch.accelerator``'s device-agnostic API over the best GPU gingham has: CUDA's devices,
then OpenCL GPUs of any vendor (AMD, Intel, Apple, NVIDIA without CUDA).

    device = gingham.accelerator.current_accelerator() or gingham.device("cpu")
"""

from __future__ import annotations

from .torch_devices import _gpus, _synchronize, device


def is_available() -> bool:
    """Whether gingham sees a GPU (through CUDA or OpenCL)."""
    return bool(_gpus())


def current_accelerator(check_available: bool = False) -> device | None:
    """The first GPU (CUDA's, else OpenCL's), or None (``check_available`` has no effect:
    gingham lists only devices it can use)."""
    gpus = _gpus()
    return device(gpus[0]) if gpus else None


def device_count() -> int:
    return len(_gpus())


def current_device_index() -> int:
    """Always 0: gingham has no current-device state."""
    return 0


current_device_idx = current_device_index


def synchronize(device_index: int | str | None = None) -> None:
    """Wait for the work queued on the accelerator (the first GPU by default)."""
    gpus = _gpus()
    if not gpus:
        raise RuntimeError("gingham.accelerator: no GPU is available")
    which = device_index if isinstance(device_index, str) else gpus[device_index or 0]
    _synchronize(which)
