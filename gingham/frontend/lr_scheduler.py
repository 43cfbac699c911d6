"""``gingham.optim.lr_scheduler``: ``torch.optim.lr_scheduler``'s schedulers, with its classes,
arguments and learning-rate sequences.

A scheduler sets ``group["lr"]`` (and, for CyclicLR and OneCycleLR, ``momentum`` or the first
of ``betas``) of its optimiser's parameter groups, host-side, once per ``step()``; the group
writes the new value through to the device tensor the update reads, so a step compiled with
:func:`gingham.jit` follows the schedule without tracing again.

    opt = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = gingham.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    for batch in batches:
        train_step(*batch)          # optimizer.step() inside
        scheduler.step()

The formulas are PyTorch's own, applied in the same (chainable) order, so the sequences agree
to the last bit with ``torch.optim.lr_scheduler`` given the same arguments.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from .optim import Optimizer


def _group_values(optimizer: Optimizer, key: str) -> list[float]:
    return [group[key] for group in optimizer.param_groups]


def _per_group(name: str, optimizer: Optimizer, value) -> list:
    """A value given once or once per parameter group, as a list per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name}, got "
                             f"{len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LRScheduler:
    """The base of the schedulers: ``step()`` advances ``last_epoch`` and sets each group's
    learning rate from :meth:`get_lr`; ``get_last_lr()`` returns what it set."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for index, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in "
                                   f"param_groups[{index}] when resuming an optimizer")
        self.base_lrs: list[float] = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rates of the current ``last_epoch`` (from the groups' current ones)."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` set, one per parameter group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance the schedule (call after ``optimizer.step()``); ``epoch`` (deprecated in
        PyTorch) jumps to that epoch, by the closed form where the scheduler has one."""
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = _group_values(self.optimizer, "lr")

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimiser (PyTorch's layout)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``, one function or one per group.

        LambdaLR(opt, lr_lambda=lambda epoch: 0.95 ** epoch)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list,
                 last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """As PyTorch: the functions are saved only when they are objects (their attributes),
        never lambdas or plain functions."""
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(f.__dict__)
                               for f in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas", [])
        self.__dict__.update(state)
        for function, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                function.__dict__.update(saved)


def _lambdas(optimizer: Optimizer, lr_lambda) -> list[Callable[[int], float]]:
    if not isinstance(lr_lambda, (list, tuple)):
        lambdas = [lr_lambda] * len(optimizer.param_groups)
    elif len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                         f"{len(lr_lambda)}")
    else:
        lambdas = list(lr_lambda)
    for function in lambdas:
        if not callable(function):
            raise TypeError(f"lr_lambda should be a function, but got "
                            f"{type(function).__name__}")
    return lambdas


class MultiplicativeLR(LambdaLR):
    """``lr *= lr_lambda(epoch)`` at every step after the first.

        MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.95)
    """

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * lmbda(self.last_epoch)
                for lmbda, group in zip(self.lr_lambdas, self.optimizer.param_groups,
                                        strict=True)]


class StepLR(LRScheduler):
    """``lr *= gamma`` every ``step_size`` epochs.

        StepLR(opt, step_size=30, gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``lr *= gamma`` at each of ``milestones`` (a repeated milestone applies it again).

        MultiStepLR(opt, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """``lr * factor`` for the first ``total_iters`` epochs, then ``lr``.

        ConstantLR(opt, factor=0.5, total_iters=4)
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters)
                           * (1 - self.factor)) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor of ``lr`` goes linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs.

        LinearLR(opt, start_factor=0.1, total_iters=10)     # a warm-up
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 "
                             "and less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        change = self.end_factor - self.start_factor
        factor = 1.0 + change / (self.total_iters * self.start_factor
                                 + (self.last_epoch - 1) * change)
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``lr *= gamma`` every epoch.

        ExponentialLR(opt, gamma=0.9)
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``lr = initial_lr * (1 - epoch / total_iters) ** power`` until ``total_iters``.

        PolynomialLR(opt, total_iters=10, power=2.0)
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_max`` epochs (and back up
    over the next ``T_max``, as PyTorch's recursive form does).

        CosineAnnealingLR(opt, T_max=100, eta_min=1e-5)
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (base_lr - self.eta_min)
                    * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min)
                    * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups, strict=True)]
        ratio = ((1 + math.cos(math.pi * self.last_epoch / self.T_max))
                 / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max)))
        return [ratio * (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` epochs, ``T_i`` starting at ``T_0`` and
    multiplied by ``T_mult`` at each restart (SGDR).

        CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0, self.T_i, self.T_mult = T_0, T_0, T_mult
        self.eta_min, self.T_cur = eta_min, last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or (a fraction allowed) jump to ``epoch``."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = _group_values(self.optimizer, "lr")


def _momentum_key(optimizer: Optimizer) -> str:
    """Which setting CyclicLR and OneCycleLR cycle: ``momentum``, or the first of ``betas``."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    return "betas" if "betas" in optimizer.defaults else "momentum"


def _set_momentum(group, key: str, value: float) -> None:
    group[key] = (value, *group["betas"][1:]) if key == "betas" else value


class CyclicLR(LRScheduler):
    """The learning rate cycles between ``base_lr`` and ``max_lr`` (Smith's cyclical learning
    rates), the momentum the other way; stepped after every batch.

        CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=10, mode="triangular2")
    """

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float],
                 max_lr: float | list[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float = 0.8, max_momentum: float = 0.9,
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma, self.scale_mode = mode, gamma, scale_mode
        self._scale_fn_custom = scale_fn
        if scale_fn is None:  # the modes fix the scale mode, as PyTorch's do
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._momentum_key = _momentum_key(optimizer)
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(self.max_momentums, self.base_momentums,
                                              optimizer.param_groups, strict=True):
                    _set_momentum(group, self._momentum_key, top)
                    group["max_momentum"], group["base_momentum"] = top, bottom
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * scale
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for bottom, top, group in zip(self.base_momentums, self.max_momentums,
                                          self.optimizer.param_groups, strict=True):
                momentum = top - (top - bottom) * scale_factor * scale
                _set_momentum(group, self._momentum_key, momentum)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.pop("_scale_fn_custom", None)  # a function: not saved, as in PyTorch
        return state


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the learning rate rises from ``max_lr / div_factor`` to ``max_lr``
    over ``pct_start`` of ``total_steps``, then anneals to ``initial_lr / final_div_factor``
    (three phases with ``three_phase``); the momentum moves the other way. Stepped after
    every batch.

        OneCycleLR(opt, max_lr=0.1, total_steps=1000)
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        up_end = float(pct_start * self.total_steps) - 1
        # (end step, start lr, end lr, start momentum, end momentum): PyTorch's phases.
        if three_phase:
            self._schedule_phases = [
                (up_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                 "base_momentum", "max_momentum"),
                (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._schedule_phases = [
                (up_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._momentum_key = _momentum_key(optimizer)
            tops = _per_group("max_momentum", optimizer, max_momentum)
            bottoms = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for top, bottom, group in zip(tops, bottoms, optimizer.param_groups,
                                              strict=True):
                    _set_momentum(group, self._momentum_key, top)
                    group["max_momentum"], group["base_momentum"] = top, bottom
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for index, phase in enumerate(self._schedule_phases):
                end_step, start_lr, end_lr, start_momentum, end_momentum = phase
                if step_num <= end_step or index == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[start_lr], group[end_lr], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[start_momentum], group[end_momentum],
                                                pct)
                    break
                start_step = end_step
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, self._momentum_key, momentum)
        return lrs


class SequentialLR(LRScheduler):
    """Runs ``schedulers`` one after another, switching at ``milestones`` (each later one
    starts from the initial learning rate).

        SequentialLR(opt, [LinearLR(opt, 0.1, total_iters=5), ExponentialLR(opt, 0.9)],
                     milestones=[5])
    """

    def __init__(self, optimizer: Optimizer, schedulers: list[LRScheduler],
                 milestones: list[int], last_epoch: int = -1) -> None:
        _check_schedulers(type(self).__name__, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to "
                             f"be one more than the number of milestone points, but got number "
                             f"of schedulers {len(schedulers)} and the number of milestones to "
                             f"be equal to {len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch, self.optimizer = last_epoch + 1, optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:  # undo the initial steps the schedulers took
            _undo_epoch(scheduler)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, entry in zip(self._schedulers, saved):
            scheduler.load_state_dict(entry)


def _undo_epoch(scheduler) -> None:
    if hasattr(scheduler, "_schedulers"):
        for inner in scheduler._schedulers:
            _undo_epoch(inner)
    elif hasattr(scheduler, "last_epoch"):
        scheduler.last_epoch -= 1


def _check_schedulers(name: str, optimizer: Optimizer, schedulers: Sequence) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{name} expects at least one scheduler, but got no scheduler.")
    for index, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{name} at index {index} should have `optimizer` as its "
                            "attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{name} does not support `ReduceLROnPlateau` scheduler as it "
                             "requires additional kwargs to be specified when calling `step`, "
                             f"but got one at index {index} in the given schedulers sequence.")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{name} expects all schedulers to belong to the same optimizer, "
                             f"but got scheduler {type(scheduler).__name__} at index {index} "
                             "with another optimizer.")


class ChainedScheduler(SequentialLR):
    """Steps every scheduler of ``schedulers`` at each step (their effects multiply).

        ChainedScheduler([ConstantLR(opt, 0.5, total_iters=3), ExponentialLR(opt, 0.9)])
    """

    def __init__(self, schedulers: Sequence[LRScheduler],  # noqa: super-init-not-called
                 optimizer: Optimizer | None = None) -> None:
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers(type(self).__name__, optimizer, schedulers)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = _group_values(optimizer, "lr")

    def step(self) -> None:  # type: ignore[override]
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_values(self.optimizer, "lr")


class ReduceLROnPlateau(LRScheduler):
    """``lr *= factor`` when ``step(metric)`` saw no improvement for ``patience`` epochs.

        scheduler = ReduceLROnPlateau(opt, mode="min", patience=3)
        scheduler.step(validation_loss)
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,  # noqa
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: list[float] | float = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.factor, self.optimizer = factor, optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                                 f"{len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * len(optimizer.param_groups)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.last_epoch = 0
        self._last_lr = _group_values(optimizer, "lr")
        self._reset()

    def _reset(self) -> None:
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.threshold_mode == "rel":
            scale = 1.0 - self.threshold if self.mode == "min" else self.threshold + 1.0
            return a < best * scale if self.mode == "min" else a > best * scale
        return a < best - self.threshold if self.mode == "min" else a > best + self.threshold

    def step(self, metrics: float, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record ``metrics`` (a number or a one-element tensor, read on the host)."""
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch = epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"The number of param groups in the `optimizer` "
                                   f"({len(groups)}) differs from when `ReduceLROnPlateau` was "
                                   f"initialized ({len(self.min_lrs)}); set `min_lrs` to match")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr


_LRScheduler = LRScheduler  # PyTorch's older name

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "SequentialLR",
           "ChainedScheduler", "ReduceLROnPlateau"]
