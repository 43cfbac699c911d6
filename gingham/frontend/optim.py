"""Optimisers whose updates are Tile programs: SGD (momentum, Nesterov, weight decay), Adam, AdamW.

An optimiser's ``step()`` builds the new value of every parameter and state tensor lazily and
assigns them all at once, so the update compiles together with the gradients that feed it — and,
under :func:`gingham.jit`, together with the whole training step. The learning rate and the step
count live in device tensors: changing ``optimizer.lr`` (a schedule) updates a 4-byte tensor and
never forces a retrace.

    opt = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    loss.backward(); opt.step(); opt.zero_grad()

``state_dict()`` and ``load_state_dict()`` use PyTorch's layout — ``{"state": {index: {"step",
"momentum_buffer" | "exp_avg", "exp_avg_sq"}}, "param_groups": [{hyper-parameters, "params":
[indices]}]}`` — with NumPy arrays, so training resumes exactly from a checkpoint
(:func:`gingham.save`), and a ``torch.optim`` SGD, Adam or AdamW state dict loads too.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import GinghamError, StateDictError
from .tensor import Tensor, assign_all, move_all, realize, tensor, where


class Optimizer:
    """Holds parameters and state tensors; subclasses define :meth:`updates`."""

    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params: list[Tensor] = list(params)
        if not self.params:
            raise GinghamError("the optimiser got no parameters")
        for p in self.params:
            if not p.is_leaf:
                raise GinghamError("optimisers update leaf tensors (parameters), not results")
        self.device = self.params[0].device
        self._lr_value = float(lr)
        # The learning rate and the step count, as one tensor each on every device that
        # holds parameters (a model split over devices): an update reads its parameter's.
        self._lrs: dict[str, Tensor] = {}
        self._steps: dict[str, Tensor] = {}
        for device in self._parameter_devices():
            self._lrs[device] = tensor(np.float32(lr), device=device)
            self._steps[device] = tensor(np.float32(0), device=device)

    def _parameter_devices(self) -> list[str]:
        """The devices holding parameters, the first parameter's first (``self.device``)."""
        return list(dict.fromkeys(p.device for p in self.params))

    @property
    def _step(self) -> Tensor:
        """The step count (the same on every device)."""
        return self._steps[self.device]

    @property
    def lr(self) -> float:
        return self._lr_value

    @lr.setter
    def lr(self, value: float) -> None:
        """A new learning rate: written into the device tensor the compiled step reads."""
        self._follow_parameters()
        self._lr_value = float(value)
        assign_all([(lr, tensor(np.float32(value), device=device))
                    for device, lr in self._lrs.items()])

    def _follow_parameters(self) -> None:
        """After ``model.to(...)`` moved the parameters (in place), move the learning rate,
        the step count and each state tensor to its parameter's device, the state as its
        parameter's dtype (as PyTorch's optimisers create their state lazily, on the
        parameters' device, and cast loaded state to the parameters' dtype), so an optimiser
        made before the move keeps working. It runs before anything reads the state, even
        inside ``gingham.jit``'s tracing: moving these leaves there is done once for good,
        which is what a move means here."""
        moves = []
        devices = self._parameter_devices()
        if devices != list(self._lrs):
            # Re-home the per-device tensors: move those of devices no parameter left (so
            # that a model moved whole keeps the tensors a compiled step captured), copy the
            # step count to devices that gained parameters.
            step = self._steps[self.device]
            lrs, steps = {}, {}
            vacated = [d for d in self._lrs if d not in devices]
            for device in devices:
                if device in self._lrs:
                    lrs[device], steps[device] = self._lrs[device], self._steps[device]
                elif vacated:
                    old = vacated.pop()
                    lrs[device], steps[device] = self._lrs[old], self._steps[old]
                    moves += [(lrs[device], device, np.float32),
                              (steps[device], device, np.float32)]
                else:
                    lrs[device] = tensor(np.float32(self._lr_value), device=device)
                    steps[device] = tensor(step.numpy(), device=device)
            self._lrs, self._steps, self.device = lrs, steps, devices[0]
        for states in self._state_tensors().values():
            moves += [(state, p.device, p.dtype) for state, p in zip(states, self.params)
                      if (state.device, state.dtype) != (p.device, p.dtype)]
        move_all(moves)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _state(self) -> list[Tensor]:
        return [tensor(np.zeros(p.shape, p.dtype), device=p.device) for p in self.params]

    def updates(self, steps: Mapping[str, Tensor]) -> list[tuple[Tensor, Tensor]]:
        """The ``(tensor, new value)`` pairs of one step, given the new step count on each
        parameter device (``steps[p.device]``; the learning rate is ``self._lrs[p.device]``)."""
        raise NotImplementedError

    def step_updates(self) -> list[tuple[Tensor, Tensor]]:
        """The ``(tensor, new value)`` pairs of one step, the step count's included, not yet
        assigned: :class:`gingham.amp.GradScaler` masks them to skip a step on the device."""
        self._follow_parameters()
        steps = {device: step + 1.0 for device, step in self._steps.items()}
        return self.updates(steps) + [(self._steps[d], steps[d]) for d in steps]

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        assign_all(self.step_updates())

    # -- checkpoints -------------------------------------------------------------------------------
    # PyTorch's names of the group settings that gingham has no use for (implementation
    # choices: accepted and ignored), and of features it lacks (accepted only when off).
    _ignored_settings = frozenset({"foreach", "capturable", "differentiable", "fused"})
    _absent_features = ("maximize", "amsgrad")

    def _hyperparameters(self) -> dict[str, Any]:
        """The settings saved in ``param_groups`` besides ``lr`` (PyTorch's names)."""
        raise NotImplementedError

    def _set_hyperparameters(self, settings: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _state_tensors(self) -> dict[str, list[Tensor]]:
        """Each per-parameter state tensor list under PyTorch's name for it."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Hyper-parameters, step count and state tensors (as NumPy arrays) in PyTorch's
        layout; :meth:`load_state_dict` of an optimiser of the same kind over parameters of
        the same shapes continues exactly where this one is.

            gingham.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        """
        self._follow_parameters()
        tensors = self._state_tensors()
        realize([self._step] + [t for ts in tensors.values() for t in ts])
        step = float(self._step.item())
        state = {i: {"step": step, **{name: ts[i].numpy() for name, ts in tensors.items()}}
                 for i in range(len(self.params))}
        group = {"lr": self.lr, **self._hyperparameters(),
                 "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take the hyper-parameters, step count and state tensors of ``state_dict`` (from
        :meth:`state_dict`, :func:`gingham.load` or a ``torch.optim`` optimiser of this kind),
        keeping this optimiser's parameters. Raises :class:`gingham.StateDictError`, changing
        nothing, when it does not fit: another number of parameters, state of another shape,
        another kind of optimiser, a PyTorch feature gingham lacks (``amsgrad``, ...)."""
        self._follow_parameters()
        group, per_parameter = self._checked_layout(state_dict)
        settings = self._checked_settings(group)
        previous = self._hyperparameters()
        self._set_hyperparameters(settings)  # decides which state tensors exist
        try:
            pairs = self._loaded_state(group["params"], per_parameter)
        except StateDictError:
            self._set_hyperparameters(previous)
            raise
        if "lr" in group:
            self.lr = float(group["lr"])
        assign_all(pairs)

    def _checked_layout(self, state_dict: Mapping[str, Any]) -> tuple[Mapping, Mapping]:
        name = type(self).__name__
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
            raise StateDictError(f"{name}.load_state_dict: expected an optimiser state dict "
                                 "with 'state' and 'param_groups'")
        groups = state_dict["param_groups"]
        if len(groups) != 1:
            raise StateDictError(f"{name}.load_state_dict: the state dict has {len(groups)} "
                                 "parameter groups; gingham's optimisers have one")
        group = groups[0]
        if len(group["params"]) != len(self.params):
            raise StateDictError(f"{name}.load_state_dict: the state dict's group has "
                                 f"{len(group['params'])} parameters, this optimiser "
                                 f"{len(self.params)}")
        per_parameter = state_dict["state"]
        listed = set(group["params"])
        strangers = [key for key in per_parameter if key not in listed]
        if strangers:
            raise StateDictError(f"{name}.load_state_dict: state for parameter(s) "
                                 f"{strangers} that the parameter group does not list")
        return group, per_parameter

    def _checked_settings(self, group: Mapping[str, Any]) -> dict[str, Any]:
        """The group's hyper-parameters that this optimiser knows (others keep their values)."""
        name = type(self).__name__
        for feature in self._absent_features:
            if group.get(feature):
                raise StateDictError(f"{name}.load_state_dict: {feature}=True is not supported "
                                     "by gingham's optimisers")
        known = self._hyperparameters()
        unknown = set(group) - set(known) - self._ignored_settings - {
            "lr", "params", *self._absent_features}
        if unknown:
            raise StateDictError(f"{name}.load_state_dict: unknown setting(s) "
                                 f"{sorted(unknown)} (a state dict of another optimiser?)")
        return {key: group.get(key, value) for key, value in known.items()}

    def _loaded_state(self, ids: Sequence, per_parameter: Mapping) -> list[tuple[Tensor, Tensor]]:
        """The assignments that install the state dict's state (zeros where it has none)."""
        tensors = self._state_tensors()
        pairs, steps, problems = [], set(), []
        for position, (key, p) in enumerate(zip(ids, self.params)):
            entry = dict(per_parameter.get(key, {}))
            if "step" in entry:
                steps.add(float(np.asarray(entry.pop("step"))))
            for state_name in sorted(set(entry) - set(tensors)):
                problems.append(f"parameter {key}: state '{state_name}' is not "
                                f"{type(self).__name__}'s ({', '.join(['step', *tensors])})")
            for state_name, targets in tensors.items():
                array, problem = _state_array(entry.get(state_name), p, f"parameter {key}: "
                                              f"{state_name}")
                problems += [problem] if problem else []
                if array is not None:
                    pairs.append((targets[position], tensor(array, device=p.device)))
        if len(steps) > 1:
            problems.append(f"the parameters have different step counts {sorted(steps)}; "
                            "gingham's optimisers keep one")
        if problems:
            raise StateDictError(f"{type(self).__name__}.load_state_dict:\n"
                                 + "\n".join(f"  {p}" for p in problems))
        # No step recorded (PyTorch's SGD) but state present: at least one step was taken.
        step = steps.pop() if steps else float(any(per_parameter.values()))
        return pairs + [(count, tensor(np.float32(step), device=device))
                        for device, count in self._steps.items()]


def _state_array(value: Any, parameter: Tensor, what: str) -> tuple[np.ndarray | None, str]:
    """A state tensor's new value in the parameter's dtype (zeros for none; PyTorch casts
    state to the parameter's dtype too), or why it does not fit."""
    if value is None:
        return np.zeros(parameter.shape, parameter.dtype), ""
    array = np.asarray(value).astype(parameter.dtype)
    if array.shape != parameter.shape:
        return None, f"{what} has shape {array.shape}, the parameter {parameter.shape}"
    return array, ""


class SGD(Optimizer):
    """Stochastic gradient descent with PyTorch's semantics for momentum, dampening, Nesterov
    and (coupled) weight decay."""

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        super().__init__(params, lr)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise GinghamError("Nesterov momentum needs momentum > 0 and no dampening")
        self.momentum, self.dampening = momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        self._buffers = self._state() if momentum else []

    def _hyperparameters(self) -> dict[str, Any]:
        return {"momentum": self.momentum, "dampening": self.dampening,
                "weight_decay": self.weight_decay, "nesterov": self.nesterov}

    def _set_hyperparameters(self, settings: Mapping[str, Any]) -> None:
        momentum, dampening = float(settings["momentum"]), float(settings["dampening"])
        if settings["nesterov"] and (momentum <= 0 or dampening != 0):
            raise StateDictError("SGD.load_state_dict: Nesterov momentum needs momentum > 0 and "
                                 f"no dampening, the state dict has {momentum} and {dampening}")
        self.momentum, self.dampening = momentum, dampening
        self.weight_decay, self.nesterov = (float(settings["weight_decay"]),
                                            bool(settings["nesterov"]))
        if self.momentum and not self._buffers:
            self._buffers = self._state()

    def _state_tensors(self) -> dict[str, list[Tensor]]:
        return {"momentum_buffer": self._buffers} if self.momentum else {}

    def updates(self, steps: Mapping[str, Tensor]) -> list[tuple[Tensor, Tensor]]:
        pairs = []
        for n, p in enumerate(self.params):
            if p.grad is None:
                continue
            step, lr = steps[p.device], self._lrs[p.device]
            g = p.grad
            if self.weight_decay:
                g = g + p * self.weight_decay
            if self.momentum:
                buf = self._buffers[n]
                # The first step starts the buffer at the gradient itself, as PyTorch does.
                blended = buf * self.momentum + g * (1.0 - self.dampening)
                new_buf = where(step == 1.0, g, blended)
                pairs.append((buf, new_buf))
                g = g + new_buf * self.momentum if self.nesterov else new_buf
            pairs.append((p, p - lr * g))
        return pairs


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction; ``weight_decay`` adds ``wd * p`` to the
    gradient (L2), as torch.optim.Adam does."""

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps, self.weight_decay = eps, weight_decay
        self._m = self._state()
        self._v = self._state()

    def _hyperparameters(self) -> dict[str, Any]:
        return {"betas": (self.beta1, self.beta2), "eps": self.eps,
                "weight_decay": self.weight_decay, "decoupled_weight_decay": self.decoupled}

    def _set_hyperparameters(self, settings: Mapping[str, Any]) -> None:
        if bool(settings["decoupled_weight_decay"]) != self.decoupled:
            other = "AdamW" if settings["decoupled_weight_decay"] else "Adam"
            raise StateDictError(f"{type(self).__name__}.load_state_dict: the state dict is "
                                 f"{other}'s (decoupled_weight_decay="
                                 f"{settings['decoupled_weight_decay']}); load it into "
                                 f"gingham.optim.{other}")
        self.beta1, self.beta2 = (float(b) for b in settings["betas"])
        self.eps, self.weight_decay = float(settings["eps"]), float(settings["weight_decay"])

    def _state_tensors(self) -> dict[str, list[Tensor]]:
        return {"exp_avg": self._m, "exp_avg_sq": self._v}

    def updates(self, steps: Mapping[str, Tensor]) -> list[tuple[Tensor, Tensor]]:
        pairs = []
        # beta ** step, written with exp and log so the step count can stay a device tensor.
        corrections = {device: (1.0 - (step * math.log(self.beta1)).exp(),
                                1.0 - (step * math.log(self.beta2)).exp())
                       for device, step in steps.items()}
        for n, p in enumerate(self.params):
            if p.grad is None:
                continue
            (correction1, correction2), lr = corrections[p.device], self._lrs[p.device]
            g = p.grad
            if self.weight_decay and not self.decoupled:
                g = g + p * self.weight_decay
            m = self._m[n] * self.beta1 + g * (1.0 - self.beta1)
            v = self._v[n] * self.beta2 + g * g * (1.0 - self.beta2)
            update = (m / correction1) / ((v / correction2).sqrt() + self.eps)
            base = p
            if self.weight_decay and self.decoupled:
                base = p - p * (lr * self.weight_decay)
            pairs += [(self._m[n], m), (self._v[n], v), (p, base - lr * update)]
        return pairs


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), torch.optim.AdamW's defaults."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
