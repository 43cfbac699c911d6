"""``torch.cuda.amp``'s spellings (deprecated in PyTorch for ``torch.amp``'s, and still in many
training scripts): :class:`autocast` is ``gingham.autocast("cuda", ...)`` and
:class:`GradScaler` is ``gingham.amp.GradScaler("cuda", ...)``, with PyTorch's arguments and
its deprecation warning. Where gingham sees no CUDA device, both warn and disable
themselves, as PyTorch's do (``UserWarning``: "... CUDA is not available. Disabling.").

    from gingham.cuda.amp import GradScaler, autocast
    scaler = GradScaler()
    with autocast():                  # float16 for the ops on CUDA devices; others unchanged
        loss = criterion(model(images), labels)
    scaler.scale(loss).backward()
"""

from __future__ import annotations

import warnings

from ..frontend import amp as _amp

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):  # noqa: N801  (torch.cuda.amp.autocast's name)
    """``gingham.autocast("cuda", dtype=dtype, enabled=enabled)``: casts the ops on CUDA
    devices only, as PyTorch's (the ops of other devices run as they are)."""

    def __init__(self, enabled: bool = True, dtype="float16",
                 cache_enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``gingham.amp.GradScaler("cuda", ...)``: its scale lives on the device of the first
    loss it scales (see :class:`gingham.amp.GradScaler`)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
