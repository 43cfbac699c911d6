"""``gingham.optim.swa_utils``, as ``torch.optim.swa_utils``: weight averages of a model
(stochastic weight averaging, an exponential moving average), re-estimating a model's batch
norm statistics, and the SWA learning-rate schedule.

    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.999))
    for x, y in batches:
        step(x, y)                        # the optimiser's step
        ema.update_parameters(model)      # on the device: no value is read back
    swa_utils.update_bn(loader, ema)      # batch norm statistics of the averaged weights

The update keeps everything on the device: the count of averaged models is a device tensor
(``n_averaged``, as PyTorch's buffer) and the first update's copy is a ``where`` on it, so
``update_parameters`` reads nothing back and may run inside a ``gingham.jit`` step.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..frontend.lr_scheduler import LRScheduler, _group_values
from ..frontend.optim import Optimizer
from ..frontend.tensor import Tensor, assign_all, no_grad, tensor, where
from ..nn.modules import Module, _BatchNorm, _InstanceNorm

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]

AverageFn = Callable[[Tensor, Tensor, Tensor], Tensor]
MultiAverageFn = Callable[[Sequence[Tensor], Sequence[Tensor], Tensor], None]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")


def _ema_value(decay: float) -> AverageFn:
    def value(averaged: Tensor, current: Tensor, _) -> Tensor:
        if averaged.is_floating_point():
            return averaged.lerp(current, 1 - decay)
        return averaged * decay + current * (1 - decay)  # an integer buffer: truncated
    return value


def _swa_value() -> AverageFn:
    def value(averaged: Tensor, current: Tensor, num_averaged: Tensor | int) -> Tensor:
        if averaged.is_floating_point():
            return averaged.lerp(current, 1 / (num_averaged + 1))
        return averaged + (current - averaged) // (num_averaged + 1)
    return value


def _in_place(value_of: AverageFn) -> MultiAverageFn:
    """A ``multi_avg_fn`` writing ``value_of(averaged, current, n)`` into each averaged
    tensor. It carries ``value_of``: :class:`AveragedModel` computes every new value from it
    and assigns them all at once (one program eagerly, not one per tensor)."""
    def update(averaged_params: Sequence[Tensor], model_params: Sequence[Tensor],
               num_averaged: Tensor | int) -> None:
        with no_grad():
            for averaged, current in zip(averaged_params, model_params, strict=True):
                averaged.copy_(value_of(averaged, current, num_averaged))
    update.value_of = value_of
    return update


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAverageFn:
    """The in-place exponential moving average ``ema = decay * ema + (1 - decay) * model``
    over lists of tensors (``AveragedModel``'s ``multi_avg_fn``); integer tensors truncate
    (PyTorch's ``copy_``)."""
    _check_decay(decay)
    return _in_place(_ema_value(decay))


def get_swa_multi_avg_fn() -> MultiAverageFn:
    """The in-place equal-weight average ``avg += (model - avg) / (n + 1)`` over lists."""
    return _in_place(_swa_value())


def get_ema_avg_fn(decay: float = 0.999) -> AverageFn:
    """The exponential moving average of one tensor (``AveragedModel``'s ``avg_fn``)."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn() -> AverageFn:
    """The equal-weight running average of one tensor."""

    def swa_update(averaged_param: Tensor, current_param: Tensor,
                   num_averaged: Tensor | int) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (``.module``, on ``device`` when given) whose parameters are an
    average of ``model``'s over the calls of :meth:`update_parameters`: equal weights by
    default (SWA), or ``avg_fn(averaged, current, n_averaged)`` per tensor, or
    ``multi_avg_fn(averaged_list, current_list, n_averaged)`` in place. The first update
    copies ``model``'s values. With ``use_buffers`` the buffers (batch norm statistics) are
    averaged too; otherwise they are copied from ``model`` at each update. Calling it runs
    ``.module``. As PyTorch's:

        swa = AveragedModel(model)
        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.99), use_buffers=True)
        swa.update_parameters(model)
        logits = swa(images)
    """

    def __init__(self, model: Module, device: str | None = None,
                 avg_fn: AverageFn | None = None, multi_avg_fn: MultiAverageFn | None = None,
                 use_buffers: bool = False) -> None:
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module.to(device)
        tensors = [*self.module.parameters(), *self.module.buffers()]
        count_device = device or (tensors[0].device if tensors else None)
        self.register_buffer("n_averaged", tensor(np.array(0, np.int64), device=count_device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged_pairs(self, model: Module) -> list[tuple[Tensor, Tensor]]:
        """(this copy's tensor, ``model``'s, detached and on this copy's device) to average."""
        def averaged(owner: Module) -> list[Tensor]:
            if self.use_buffers:
                return [*owner.parameters(), *owner.buffers()]
            return list(owner.parameters())
        mine = averaged(self.module)
        theirs = averaged(model)
        return [(a, m.detach().to(a.device)) for a, m in zip(mine, theirs)]

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current parameters in (see the class docstring): one
        assignment of every averaged tensor, its buffers and the count, so eagerly one
        program, unless ``multi_avg_fn`` is the caller's own (then it runs in place first)."""
        pairs = self._averaged_pairs(model)
        first = self.n_averaged == 0
        average = self.multi_avg_fn or get_swa_multi_avg_fn()
        value_of = self.avg_fn or getattr(average, "value_of", None)
        with no_grad():
            if value_of is None:  # a multi_avg_fn of the caller's: in place, as PyTorch's
                floats = [(a, m) for a, m in pairs if a.is_floating_point()]
                others = [(a, m) for a, m in pairs if not a.is_floating_point()]
                for group in (floats, others):  # PyTorch groups them by dtype
                    if group:
                        average([a for a, _ in group], [m for _, m in group],
                                self.n_averaged)
                value_of = _keep
            # The first update is a copy: a where on the device count, so nothing is read back
            updates = [(a, where(first, m, value_of(a, m, self.n_averaged))) for a, m in pairs]
            if not self.use_buffers:
                updates += [(mine, theirs.detach().to(mine.device)) for mine, theirs
                            in zip(self.module.buffers(), model.buffers(), strict=True)]
            assign_all(updates + [(self.n_averaged, self.n_averaged + 1)])


def _keep(averaged: Tensor, current: Tensor, num_averaged) -> Tensor:
    return averaged


def update_bn(loader: Iterable[Any], model: Module, device: str | None = None) -> None:
    """Re-estimate ``model``'s batch norm running statistics as the plain average over one
    pass of ``loader`` (each batch a tensor or array, or a tuple or list whose first item is
    the input), in training mode; the momenta and the mode are restored. As PyTorch's:

        update_bn(train_loader, swa_model)
    """
    norms = [m for m in model.modules()
             if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm)]
    momenta = {}
    for norm in norms:
        norm.reset_running_stats()
        momenta[norm] = norm.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for norm in momenta:
        norm.momentum = None
    held = [*model.parameters(), *model.buffers()]
    target = device or (held[0].device if held else None)
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if not isinstance(batch, Tensor):  # gingham's DataLoader gives NumPy arrays
                batch = tensor(np.asarray(batch), device=target)
            elif device is not None:
                batch = batch.to(device)
            model(batch)
    for norm, momentum in momenta.items():
        norm.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate to ``swa_lr`` over ``anneal_epochs`` steps
    (``"cos"`` or ``"linear"``), then keeps it there; as PyTorch's:

        swa_scheduler = SWALR(optimizer, swa_lr=0.05, anneal_epochs=5)
    """

    def __init__(self, optimizer: Optimizer, swa_lr: float | Sequence[float],
                 anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1) -> None:
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: "
                             f"swa_lr has {len(swa_lrs)}, optimizer.param_groups has "
                             f"{len(groups)}")
        for value, group in zip(swa_lrs, groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self._anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return t if self._anneal_strategy == "linear" else (1 - math.cos(math.pi * t)) / 2

    def get_lr(self) -> list[float]:
        # PyTorch's: recover the rate before annealing from the group's current one
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        previous_alpha = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        starts = [group["swa_lr"] if previous_alpha == 1
                  else (lr - previous_alpha * group["swa_lr"]) / (1 - previous_alpha)
                  for lr, group in zip(_group_values(self.optimizer, "lr"), groups)]
        return [group["swa_lr"] * alpha + start * (1 - alpha)
                for group, start in zip(groups, starts)]
