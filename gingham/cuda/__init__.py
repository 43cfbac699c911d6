"""``torch.cuda``'s everyday functions, for NVIDIA devices (``cuda:N``); for any vendor's GPU
see :mod:`gingham.accelerator`.

    if gingham.cuda.is_available():
        model.to("cuda"); print(gingham.cuda.get_device_name(0))
"""

from __future__ import annotations

from ..torch_devices import _ids, _synchronize
from ..torch_devices import cuda_id as _cuda_id


def is_available() -> bool:
    """Whether gingham sees a CUDA device (an NVIDIA driver and cuda-python)."""
    return bool(_ids("cuda"))


def device_count() -> int:
    return len(_ids("cuda"))


def current_device() -> int:
    """Always 0: gingham has no current-device state; name a device where you need another."""
    return 0


def get_device_name(device: int | str | None = None) -> str:
    from ..devices import get_device

    return get_device(_cuda_id(device)).info.name


def synchronize(device: int | str | None = None) -> None:
    """Wait for the work queued on the CUDA device (``cuda:0`` by default)."""
    _synchronize(_cuda_id(device))


def empty_cache() -> None:
    """Accepted for PyTorch's scripts: gingham's buffer pool keeps freed memory for reuse
    and gives it back when an allocation would fail."""


def manual_seed(seed: int) -> None:
    """Seed the default generators (as :func:`gingham.manual_seed`, every device's)."""
    from ..nn.functional import manual_seed as seed_all

    seed_all(seed)


manual_seed_all = manual_seed


from . import amp  # noqa: E402  (torch.cuda.amp's deprecated spellings)

__all__ = ["is_available", "device_count", "current_device", "get_device_name", "synchronize",
           "empty_cache", "manual_seed", "manual_seed_all", "amp"]
