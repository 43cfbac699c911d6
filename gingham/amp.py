"""``gingham.amp``: mixed-precision training, as ``torch.amp``.

    scaler = gingham.amp.GradScaler()                 # float16 only; bfloat16 needs none
    with gingham.amp.autocast("float16"):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()

The implementation and the op lists live in :mod:`gingham.frontend.amp`.
"""

from .frontend.amp import (
    FLOAT32_OPS,
    LOW_PRECISION_OPS,
    GradScaler,
    autocast,
    autocast_dtype,
    is_autocast_enabled,
)

__all__ = ["autocast", "autocast_dtype", "is_autocast_enabled", "GradScaler",
           "LOW_PRECISION_OPS", "FLOAT32_OPS"]
