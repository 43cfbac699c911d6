"""``gingham.optim``: ``torch.optim``'s optimisers and, in :mod:`gingham.optim.lr_scheduler`,
its learning-rate schedulers; :mod:`gingham.optim.swa_utils`, its weight averaging.

    opt = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = gingham.optim.lr_scheduler.StepLR(opt, step_size=30)

The implementation lives in :mod:`gingham.frontend.optim` and
:mod:`gingham.frontend.lr_scheduler`.
"""

from ..frontend.optim import (SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, Optimizer,
                              ParamGroup, RAdam, RMSprop)
from . import lr_scheduler, swa_utils

__all__ = ["Optimizer", "ParamGroup", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad",
           "Adamax", "RAdam", "Adadelta", "lr_scheduler", "swa_utils"]
