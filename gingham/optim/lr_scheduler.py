"""``gingham.optim.lr_scheduler``, as ``torch.optim.lr_scheduler`` (the implementation lives in
:mod:`gingham.frontend.lr_scheduler`).

    from gingham.optim.lr_scheduler import OneCycleLR
    scheduler = OneCycleLR(optimizer, max_lr=0.1, total_steps=1000)
"""

from ..frontend.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiplicativeLR,
    MultiStepLR,
    OneCycleLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
    _LRScheduler,
)

__all__ = ["LRScheduler", "_LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR",
           "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR",
           "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR",
           "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau"]
