"""Optimisers whose updates are Tile programs, with ``torch.optim``'s classes, arguments, update
rules and ``param_groups``: SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, RAdam, Adadelta.

An optimiser's ``step()`` builds the new value of every parameter and state tensor lazily and
assigns them all at once, so the update compiles together with the gradients that feed it — and,
under :func:`gingham.jit`, together with the whole training step.

    opt = gingham.optim.SGD([{"params": model.base.parameters()},
                             {"params": model.head.parameters(), "lr": 1e-3}],
                            lr=1e-2, momentum=0.9)
    loss.backward(); opt.step(); opt.zero_grad()
    opt.param_groups[1]["lr"] = 1e-4          # takes effect at the next step, compiled or not

**Which settings a compiled step reads from the device.** Every number of a parameter group
(``lr``, ``momentum``, ``betas``, ``eps``, ``weight_decay``, ...) lives, besides the group's
dict, in a 0-d device tensor per group and device, written through when the dict entry is
set; the step count too. The tensors are float64 where the group holds a float64 parameter
(a float32 ``lr`` or ``eps`` would move float64 parameters by float32 amounts, ~1e-8 off
PyTorch's), else float32 (a 0-d tensor does not widen a float32 or half parameter's
update). A learning-rate schedule (or ``OneCycleLR`` cycling ``momentum`` or ``betas``)
therefore changes a few 4- or 8-byte tensors and never forces a retrace. The values that
change the *shape* of the program make :func:`gingham.jit` trace again: the flags (``nesterov``,
``amsgrad``, ``maximize``, ``centered``, ...), a setting going to or from zero where zero
removes a term (``momentum`` and ``weight_decay``: SGD keeps no momentum buffer without
momentum, as PyTorch does), and the parameters of a group. Numbers that depend only on the
settings (``1 - beta2``, ``log(beta1)``) are computed in float64 on the host when a setting
changes, as PyTorch computes them in Python; those that depend on the step count (bias
corrections) are computed on the device, since a compiled step runs no Python.

``state_dict()`` and ``load_state_dict()`` use PyTorch's layout — ``{"state": {index: {"step",
"momentum_buffer" | "exp_avg", ...}}, "param_groups": [{settings, "params": [indices]}]}`` — with
NumPy arrays, so training resumes exactly from a checkpoint (:func:`gingham.save`), and a
``torch.optim`` state dict of the same optimiser loads too. The parameters of one group share
one step count (PyTorch keeps one per parameter; they differ only when some parameters of a
group went without gradients, and such a state dict is refused on loading).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import StateDictError
from .tensor import Tensor, assign_all, maximum, move_all, realize, tensor, where


class ParamGroup(dict):
    """One entry of ``optimizer.param_groups``: PyTorch's dict of ``"params"`` and settings.

    Setting an entry (``group["lr"] = 0.01``) writes the numbers a step reads on the device
    through to the group's device tensors, so the next step uses it, compiled or not.
    """

    def __init__(self, settings: Mapping[str, Any], on_change: Callable[["ParamGroup"], None],
                 on_device: frozenset[str], structural: frozenset[str]) -> None:
        super().__init__(settings)
        self._on_change = on_change
        self._on_device = on_device  # kept in device tensors: gingham.jit does not watch them
        self._structural = structural  # settings whose being zero changes the program

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key != "params" and "_on_change" in self.__dict__:  # not while being deep-copied
            self._on_change(self)

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def _jit_watched(self) -> dict[str, Any]:
        """What a compiled step depends on (see :func:`gingham.jit`): everything but the
        numbers kept on the device, plus whether each structural number is zero."""
        watched = {key: value for key, value in self.items() if key not in self._on_device}
        watched.update({f"{key} != 0": bool(self[key]) for key in self._structural})
        return watched


class Optimizer:
    """PyTorch's ``Optimizer(params, defaults)``: holds ``param_groups`` and per-parameter
    state; a subclass defines the numbers it reads on the device (:meth:`_constants`), its
    state tensors (:meth:`_state_names`) and its update rule (:meth:`_update`)."""

    # The group settings whose being zero removes a term of the update (structural).
    _structural: tuple[str, ...] = ("weight_decay",)
    # PyTorch's implementation choices: accepted, saved, and of no effect here.
    _implementation = {"foreach": None, "differentiable": False}

    def __init__(self, params: Iterable[Tensor] | Iterable[dict], defaults: Mapping[str, Any]
                 ) -> None:
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a gingham.Tensor")
        self.defaults: dict[str, Any] = dict(defaults)
        self.param_groups: list[ParamGroup] = []
        self._slots: list[dict[str, dict[str, Tensor]]] = []  # per group: device -> tensors
        self._written: list[dict[str, float]] = []  # per group: the constants on the device
        self._states: list[list[dict[str, Tensor]]] = []  # per group, per parameter
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # -- the parameter groups ------------------------------------------------------------------
    @property
    def params(self) -> list[Tensor]:
        """Every parameter, group after group."""
        return [p for group in self.param_groups for p in group["params"]]

    @property
    def device(self) -> str:
        """The device of the first parameter."""
        return self.param_groups[0]["params"][0].device

    @property
    def lr(self) -> float:
        """The first group's learning rate; setting it sets every group's (gingham's shorthand
        for ``for g in opt.param_groups: g["lr"] = value``)."""
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            group["lr"] = float(value)

    def add_param_group(self, param_group: Mapping[str, Any]) -> None:
        """Add a group (``{"params": [...], setting: value, ...}``); settings it does not give
        take the optimiser's defaults.

            opt.add_param_group({"params": model.head.parameters(), "lr": 1e-3})
        """
        if not isinstance(param_group, Mapping):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize gingham Tensors, but one of the "
                                f"params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        held = {id(p) for p in self.params}
        if any(id(p) in held for p in params) or len({id(p) for p in params}) < len(params):
            raise ValueError("some parameters appear in more than one parameter group")
        settings = {**self.defaults, **param_group, "params": params}
        self._validate(settings)
        group = ParamGroup(settings, self._write_settings, frozenset(self._on_device()),
                           frozenset(self._structural))
        self.param_groups.append(group)
        self._slots.append({})
        self._written.append({})
        self._states.append([{} for _ in params])
        self._follow_parameters()
        self._write_settings(group)

    def _validate(self, settings: Mapping[str, Any]) -> None:
        """PyTorch's checks of the settings (ValueError naming the bad one)."""
        for key in ("lr", "eps", "momentum", "weight_decay", "alpha", "lr_decay", "rho",
                    "initial_accumulator_value", "momentum_decay", "dampening"):
            value = settings.get(key)
            if value is not None and not isinstance(value, (int, float, np.number, Tensor)):
                # lr="1e-3" from a config file: refused here, not when a step reads it
                raise TypeError(f"{type(self).__name__}: {key} must be a number (or a tensor), "
                                f"not {type(value).__name__} {value!r}")
            if isinstance(value, (int, float)) and value < 0:
                raise ValueError(f"Invalid {key} value: {value}")
        if "betas" in settings:
            for index, beta in enumerate(settings["betas"]):
                if not 0.0 <= beta < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {index}: {beta}")

    def _on_device(self) -> set[str]:
        """The group settings kept in device tensors: the numeric ones."""
        return {key for key, value in self.defaults.items()
                if key == "betas" or (isinstance(value, (int, float))
                                      and not isinstance(value, bool))}

    def _group_index(self, group: Mapping) -> int | None:
        for index, candidate in enumerate(getattr(self, "param_groups", ())):
            if candidate is group:
                return index
        return None

    def _write_settings(self, group: ParamGroup) -> None:
        """Write the group's device numbers that changed into its tensors on every device."""
        index = self._group_index(group)
        if index is None:  # a group being copied, not yet this optimiser's
            return
        constants = {name: float(value) for name, value in self._constants(group).items()}
        written = self._written[index]
        pairs = [(slots[name], tensor(value, dtype=slots[name].dtype, device=device))
                 for device, slots in self._slots[index].items()
                 for name, value in constants.items() if written.get(name) != value]
        written.update(constants)
        assign_all(pairs)

    # -- what a subclass defines ------------------------------------------------------------------
    def _constants(self, group: Mapping[str, Any]) -> dict[str, float]:
        """The numbers the update reads on the device, from the group's settings (computed in
        float64 here, as PyTorch computes them in Python)."""
        return {"lr": group["lr"], "weight_decay": group.get("weight_decay", 0.0)}

    def _state_names(self, group: Mapping[str, Any]) -> list[str]:
        """The per-parameter state tensors (PyTorch's names), given the group's settings."""
        return []

    def _initial_state(self, name: str, p: Tensor, group: Mapping[str, Any]) -> np.ndarray:
        return np.zeros(p.shape, p.dtype)

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Tensor], c: dict[str, Tensor],
                step: Tensor, group: Mapping[str, Any]) -> tuple[Tensor, dict[str, Tensor]]:
        """The parameter's new value and its state tensors' new values, given the gradient
        (negated under ``maximize``), the device numbers ``c``, and the new step count."""
        raise NotImplementedError

    # -- devices and state ------------------------------------------------------------------------
    def _follow_parameters(self) -> None:
        """Keep the group tensors (settings and step count) on the devices of the group's
        parameters and the state tensors on their parameter's device, as its dtype. After
        ``model.to(...)`` moved the parameters (in place), the tensors move too (as PyTorch's
        optimisers create their state lazily, on the parameters' device, and cast loaded state
        to the parameters' dtype), so an optimiser made before the move keeps working. It runs
        before anything reads the state, even inside ``gingham.jit``'s tracing: moving these
        leaves there is done once for good, which is what a move means here."""
        moves = []
        for index, group in enumerate(self.param_groups):
            moves += self._rehome(index, group)
            states = self._states[index]
            names = self._state_names(group)
            for p, state in zip(group["params"], states):
                for name in names:
                    if name not in state:
                        state[name] = tensor(self._initial_state(name, p, group),
                                             device=p.device)
                moves += [(t, p.device, p.dtype) for t in state.values()
                          if (t.device, t.dtype) != (p.device, p.dtype)]
        move_all(moves)
        for index, group in enumerate(self.param_groups):
            if not self._written[index]:
                self._write_settings(group)

    def _rehome(self, index: int, group: ParamGroup) -> list:
        """Move the group tensors of devices no parameter is left on (so that a model moved
        whole keeps the tensors a compiled step captured), make them for new devices."""
        devices = list(dict.fromkeys(p.device for p in group["params"]))
        dtype = _settings_dtype(group)
        slots = self._slots[index]
        if list(slots) == devices and all(s["step"].dtype == dtype for s in slots.values()):
            return []
        vacated = [d for d in slots if d not in devices]
        step = next(iter(slots.values()))["step"].numpy() if slots else 0.0
        if not self._written[index]:
            self._written[index] = {name: float(value)
                                    for name, value in self._constants(group).items()}
        constants = self._written[index]
        moves, rehomed = [], {}
        for device in devices:
            if device in slots or vacated:
                # the same tensors, moved or cast in place: a compiled step holds them
                rehomed[device] = slots[device] if device in slots else slots[vacated.pop()]
                moves += [(t, device, dtype) for t in rehomed[device].values()
                          if (t.device, t.dtype) != (device, dtype)]
            else:
                rehomed[device] = {"step": tensor(step, dtype=dtype, device=device),
                                   **{name: tensor(value, dtype=dtype, device=device)
                                      for name, value in constants.items()}}
        self._slots[index] = rehomed
        if any(moved_dtype != t.dtype for t, _, moved_dtype in moves):
            # cast settings hold the narrower type's rounding: write them again, exactly
            self._written[index] = {}
        return moves

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the gradients (PyTorch's default; ``set_to_none=False`` makes them zeros)."""
        for p in self.params:
            if p.grad is not None and not set_to_none:
                p.grad = p.grad * 0.0
            else:
                p.grad = None

    def step_updates(self) -> list[tuple[Tensor, Tensor]]:
        """The ``(tensor, new value)`` pairs of one step, the step counts' included, not yet
        assigned: :class:`gingham.amp.GradScaler` masks them to skip a step on the device."""
        self._follow_parameters()
        pairs = []
        for group, slots, states in zip(self.param_groups, self._slots, self._states):
            live = [(p, state) for p, state in zip(group["params"], states)
                    if p.grad is not None]
            if not live:
                continue
            steps = {device: tensors["step"] + 1.0 for device, tensors in slots.items()}
            for p, state in live:
                g = -p.grad if group.get("maximize") else p.grad
                new_p, new_state = self._update(p, g, state, slots[p.device],
                                                steps[p.device], group)
                pairs += [(state[name], value) for name, value in new_state.items()]
                pairs.append((p, new_p))
            pairs += [(slots[device]["step"], count) for device, count in steps.items()]
        return pairs

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Apply one update to every parameter that has a gradient; ``closure`` (PyTorch's:
        re-evaluates the loss, calling ``backward()``) runs first and its loss is returned."""
        loss = closure() if closure is not None else None
        assign_all(self.step_updates())
        return loss

    # -- checkpoints -------------------------------------------------------------------------------
    # PyTorch's settings that gingham has no use for (implementation choices): accepted,
    # ignored on loading.
    _ignored_settings = frozenset({"foreach", "capturable", "differentiable", "fused",
                                   "param_names"})
    # What learning-rate schedulers add to a group (gingham.optim.lr_scheduler): loaded as is.
    _scheduler_settings = frozenset({"initial_lr", "max_lr", "min_lr", "max_momentum",
                                     "base_momentum"})

    def state_dict(self) -> dict[str, Any]:
        """Settings, step counts and state tensors (as NumPy arrays) in PyTorch's layout;
        :meth:`load_state_dict` of an optimiser of the same kind over parameters of the same
        shapes continues exactly where this one is.

            gingham.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        """
        self._follow_parameters()
        steps = [next(iter(slots.values()))["step"] for slots in self._slots]
        realize(steps + [t for states in self._states for state in states
                         for t in state.values()])
        state, groups, position = {}, [], 0
        for group, count, states in zip(self.param_groups, steps, self._states):
            ids = list(range(position, position + len(group["params"])))
            position += len(ids)
            for index, entry in zip(ids, states):
                state[index] = {"step": float(count.item()),
                                **{name: t.numpy() for name, t in entry.items()}}
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Take the settings, step counts and state tensors of ``state_dict`` (from
        :meth:`state_dict`, :func:`gingham.load` or a ``torch.optim`` optimiser of this kind),
        keeping this optimiser's parameters. Raises :class:`gingham.StateDictError`, changing
        nothing, when it does not fit: other numbers of groups or parameters, state of another
        shape, another kind of optimiser."""
        name = type(self).__name__
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
            raise StateDictError(f"{name}.load_state_dict: expected an optimiser state dict "
                                 "with 'state' and 'param_groups'")
        saved_groups, per_parameter = state_dict["param_groups"], state_dict["state"]
        if len(saved_groups) != len(self.param_groups):
            raise StateDictError(f"{name}.load_state_dict: the state dict has "
                                 f"{len(saved_groups)} parameter groups, this optimiser "
                                 f"{len(self.param_groups)}")
        listed = {key for saved in saved_groups for key in saved["params"]}
        strangers = [key for key in per_parameter if key not in listed]
        if strangers:
            raise StateDictError(f"{name}.load_state_dict: state for parameter(s) "
                                 f"{strangers} that no parameter group lists")
        plans = [self._loaded_group(group, saved, per_parameter)
                 for group, saved in zip(self.param_groups, saved_groups)]
        pairs = []
        for index, (group, (settings, state, step)) in enumerate(zip(self.param_groups, plans)):
            dict.update(group, settings)  # written to the device below, with the state
            names = set(self._state_names(group))
            for entry in self._states[index]:  # the same tensors: a compiled step holds them
                for unused in set(entry) - names:
                    del entry[unused]
            self._follow_parameters()  # makes the state tensors the settings call for
            for entry, loaded in zip(self._states[index], state):
                pairs += [(entry[key], value) for key, value in loaded.items()]
            for device, slots in self._slots[index].items():
                pairs.append((slots["step"], tensor(step, dtype=slots["step"].dtype,
                                                    device=device)))
            self._written[index] = {}
        assign_all(pairs)
        for group in self.param_groups:
            self._write_settings(group)

    def _loaded_group(self, group: ParamGroup, saved: Mapping[str, Any],
                      per_parameter: Mapping) -> tuple[dict, list[dict[str, Tensor]], float]:
        """One group's new settings, state values and step count, or StateDictError."""
        name = type(self).__name__
        if len(saved["params"]) != len(group["params"]):
            raise StateDictError(f"{name}.load_state_dict: the state dict's group has "
                                 f"{len(saved['params'])} parameters, this optimiser "
                                 f"{len(group['params'])}")
        unknown = (set(saved) - set(self.defaults) - self._ignored_settings
                   - self._scheduler_settings - {"params"})
        if unknown:
            raise StateDictError(f"{name}.load_state_dict: unknown setting(s) "
                                 f"{sorted(unknown)} (a state dict of another optimiser?)")
        settings = {key: value for key, value in saved.items()
                    if key != "params" and key not in self._ignored_settings}
        merged = {**group, **settings}
        problems = self._settings_problems(merged)
        names = self._state_names(merged)
        loaded, steps = [], set()
        for key, p in zip(saved["params"], group["params"]):
            entry = dict(per_parameter.get(key, {}))
            if "step" in entry:
                steps.add(float(np.asarray(entry.pop("step"))))
            for state_name in sorted(set(entry) - set(names)):
                if entry[state_name] is not None:  # PyTorch saves momentum_buffer=None
                    problems.append(f"parameter {key}: state '{state_name}' is not "
                                    f"{name}'s ({', '.join(['step', *names])})")
            values = {}
            for state_name in names:
                array, problem = _state_array(entry.get(state_name), p,
                                              f"parameter {key}: {state_name}",
                                              self._initial_state(state_name, p, merged))
                problems += [problem] if problem else []
                if array is not None:
                    values[state_name] = tensor(array, device=p.device)
            loaded.append(values)
        if len(steps) > 1:
            problems.append(f"the parameters of a group have different step counts "
                            f"{sorted(steps)}; gingham's optimisers keep one per group")
        if problems:
            raise StateDictError(f"{name}.load_state_dict:\n"
                                 + "\n".join(f"  {p}" for p in problems))
        # No step recorded (PyTorch's SGD) but state present: at least one step was taken.
        step = steps.pop() if steps else float(any(per_parameter.get(key) for key in
                                                   saved["params"]))
        return settings, loaded, step

    def _settings_problems(self, settings: Mapping[str, Any]) -> list[str]:
        """Why these settings cannot be loaded into this optimiser (none by default)."""
        return []

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for index, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {index}")
            lines += [f"    {key}: {value}" for key, value in sorted(group.items())
                      if key != "params"]
        return "\n".join(lines + [")"])


def _state_array(value: Any, parameter: Tensor, what: str, initial: np.ndarray
                 ) -> tuple[np.ndarray | None, str]:
    """A state tensor's new value in the parameter's dtype (its initial value for none;
    PyTorch casts state to the parameter's dtype too), or why it does not fit."""
    if value is None:
        return initial, ""
    array = np.asarray(value).astype(parameter.dtype)
    if array.shape != parameter.shape:
        return None, f"{what} has shape {array.shape}, the parameter {parameter.shape}"
    return array, ""


def _settings_dtype(group: Mapping[str, Any]) -> np.dtype:
    """The dtype of a group's device settings and step count: float64 where the group holds
    a float64 parameter (PyTorch applies Python-float settings to it in float64), else
    float32.

        _settings_dtype({"params": [gingham.zeros(3, dtype="float64")]})  # dtype('float64')
    """
    wide = any(p.dtype == np.float64 for p in group["params"])
    return np.dtype(np.float64 if wide else np.float32)


def _decay(p: Tensor, g: Tensor, c: Mapping[str, Tensor], group: Mapping[str, Any]) -> Tensor:
    """The gradient with L2 weight decay added (``g + weight_decay * p``), PyTorch's coupled
    weight decay."""
    return g + p * c["weight_decay"] if group["weight_decay"] else g


def _one_minus_power(log_beta: Tensor, step: Tensor) -> Tensor:
    """``1 - beta ** step`` for a device step count, through expm1 so that it keeps float32's
    relative precision where ``beta ** step`` is close to 1 (the first steps)."""
    return -(step * log_beta).expm1()


class SGD(Optimizer):
    """``torch.optim.SGD``: momentum, dampening, Nesterov, (coupled) weight decay, maximize.

        opt = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    """

    _structural = ("momentum", "weight_decay")

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov,
                                  "maximize": maximize, "foreach": foreach,
                                  "differentiable": differentiable, "fused": fused})

    def _validate(self, settings):
        super()._validate(settings)
        if settings["nesterov"] and (settings["momentum"] <= 0 or settings["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _settings_problems(self, settings):
        if settings["nesterov"] and (settings["momentum"] <= 0 or settings["dampening"] != 0):
            return [f"Nesterov momentum needs momentum > 0 and no dampening, the state dict "
                    f"has {settings['momentum']} and {settings['dampening']}"]
        return []

    def _constants(self, group):
        return {"lr": group["lr"], "momentum": group["momentum"],
                "one_minus_dampening": 1.0 - group["dampening"],
                "weight_decay": group["weight_decay"]}

    def _state_names(self, group):
        return ["momentum_buffer"] if group["momentum"] else []

    def _update(self, p, g, state, c, step, group):
        g = _decay(p, g, c, group)
        if not group["momentum"]:
            return p - c["lr"] * g, {}
        buf = state["momentum_buffer"]
        # The first step starts the buffer at the gradient itself, as PyTorch does.
        new_buf = where(step == 1.0, g, buf * c["momentum"] + g * c["one_minus_dampening"])
        direction = g + new_buf * c["momentum"] if group["nesterov"] else new_buf
        return p - c["lr"] * direction, {"momentum_buffer": new_buf}


class Adam(Optimizer):
    """``torch.optim.Adam`` (Kingma & Ba) with bias correction, ``amsgrad`` and ``maximize``;
    ``weight_decay`` adds ``wd * p`` to the gradient (L2) unless ``decoupled_weight_decay``.

        opt = gingham.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.99), amsgrad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay, "amsgrad": amsgrad,
                                  "maximize": maximize, "foreach": foreach,
                                  "capturable": capturable, "differentiable": differentiable,
                                  "fused": fused,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    def _settings_problems(self, settings):
        if bool(settings["decoupled_weight_decay"]) == self.defaults["decoupled_weight_decay"]:
            return []
        other = "AdamW" if settings["decoupled_weight_decay"] else "Adam"
        return [f"the state dict is {other}'s (decoupled_weight_decay="
                f"{settings['decoupled_weight_decay']}); load it into gingham.optim.{other}"]

    def _constants(self, group):
        beta1, beta2 = (float(b) for b in group["betas"])
        return {"lr": group["lr"], "beta1": beta1, "beta2": beta2,
                "one_minus_beta1": 1.0 - beta1, "one_minus_beta2": 1.0 - beta2,
                "log_beta1": math.log(beta1) if beta1 else -math.inf,
                "log_beta2": math.log(beta2) if beta2 else -math.inf,
                "eps": group["eps"], "weight_decay": group["weight_decay"],
                "decay": 1.0 - group["lr"] * group["weight_decay"]}

    def _state_names(self, group):
        return ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])

    def _update(self, p, g, state, c, step, group):
        decoupled = group["decoupled_weight_decay"]
        if decoupled and group["weight_decay"]:
            p = p * c["decay"]
        elif group["weight_decay"]:
            g = g + p * c["weight_decay"]
        m = state["exp_avg"] * c["beta1"] + g * c["one_minus_beta1"]
        v = state["exp_avg_sq"] * c["beta2"] + g * g * c["one_minus_beta2"]
        new_state = {"exp_avg": m, "exp_avg_sq": v}
        if group["amsgrad"]:
            v = new_state["max_exp_avg_sq"] = maximum(state["max_exp_avg_sq"], v)
        correction1 = _one_minus_power(c["log_beta1"], step)
        correction2 = _one_minus_power(c["log_beta2"], step)
        denominator = v.sqrt() / correction2.sqrt() + c["eps"]
        return p - (c["lr"] / correction1) * (m / denominator), new_state


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay (Loshchilov & Hutter).

        opt = gingham.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    """

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def _settings_problems(self, settings):
        if settings["decoupled_weight_decay"]:
            return []
        return ["the state dict is Adam's (decoupled_weight_decay=False); load it into "
                "gingham.optim.Adam"]


class RMSprop(Optimizer):
    """``torch.optim.RMSprop`` (Hinton), ``centered`` and ``momentum`` included.

        opt = gingham.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9, centered=True)
    """

    _structural = ("momentum", "weight_decay")

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                                  "centered": centered, "weight_decay": weight_decay,
                                  "capturable": capturable, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable})

    def _constants(self, group):
        return {"lr": group["lr"], "alpha": group["alpha"],
                "one_minus_alpha": 1.0 - group["alpha"], "eps": group["eps"],
                "momentum": group["momentum"], "weight_decay": group["weight_decay"]}

    def _state_names(self, group):
        return (["square_avg"] + (["momentum_buffer"] if group["momentum"] else [])
                + (["grad_avg"] if group["centered"] else []))

    def _update(self, p, g, state, c, step, group):
        g = _decay(p, g, c, group)
        square_avg = state["square_avg"] * c["alpha"] + g * g * c["one_minus_alpha"]
        new_state = {"square_avg": square_avg}
        if group["centered"]:
            grad_avg = state["grad_avg"] + (g - state["grad_avg"]) * c["one_minus_alpha"]
            new_state["grad_avg"] = grad_avg
            average = (square_avg - grad_avg * grad_avg).sqrt() + c["eps"]
        else:
            average = square_avg.sqrt() + c["eps"]
        if not group["momentum"]:
            return p - c["lr"] * (g / average), new_state
        buf = new_state["momentum_buffer"] = state["momentum_buffer"] * c["momentum"] + g / average
        return p - c["lr"] * buf, new_state


class Adagrad(Optimizer):
    """``torch.optim.Adagrad`` (Duchi et al.), with ``lr_decay`` and
    ``initial_accumulator_value``.

        opt = gingham.optim.Adagrad(model.parameters(), lr=1e-2, lr_decay=1e-4)
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "eps": eps,
                                  "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value,
                                  "foreach": foreach, "maximize": maximize,
                                  "differentiable": differentiable, "fused": fused})

    def _constants(self, group):
        return {"lr": group["lr"], "lr_decay": group["lr_decay"], "eps": group["eps"],
                "weight_decay": group["weight_decay"]}

    def _state_names(self, group):
        return ["sum"]

    def _initial_state(self, name, p, group):
        return np.full(p.shape, group["initial_accumulator_value"], p.dtype)

    def _update(self, p, g, state, c, step, group):
        g = _decay(p, g, c, group)
        total = state["sum"] + g * g
        decayed_lr = c["lr"] / ((step - 1.0) * c["lr_decay"] + 1.0)
        return p - decayed_lr * (g / (total.sqrt() + c["eps"])), {"sum": total}


class Adamax(Optimizer):
    """``torch.optim.Adamax``: Adam with the infinity norm (Kingma & Ba).

        opt = gingham.optim.Adamax(model.parameters(), lr=2e-3)
    """

    def __init__(self, params, lr: float = 2e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable,
                                  "capturable": capturable})

    _constants = Adam._constants

    def _state_names(self, group):
        return ["exp_avg", "exp_inf"]

    def _update(self, p, g, state, c, step, group):
        g = _decay(p, g, c, group)
        m = state["exp_avg"] + (g - state["exp_avg"]) * c["one_minus_beta1"]
        norm = maximum(state["exp_inf"] * c["beta2"], g.abs() + c["eps"])
        step_size = c["lr"] / _one_minus_power(c["log_beta1"], step)
        return p - step_size * (m / norm), {"exp_avg": m, "exp_inf": norm}


class RAdam(Optimizer):
    """``torch.optim.RAdam``: Adam with the variance rectification of Liu et al. (plain
    momentum SGD while the variance estimate is unreliable), optionally decoupled decay.

        opt = gingham.optim.RAdam(model.parameters(), lr=1e-3)
    """

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay, "foreach": foreach,
                                  "maximize": maximize, "capturable": capturable,
                                  "decoupled_weight_decay": decoupled_weight_decay,
                                  "differentiable": differentiable})

    def _constants(self, group):
        constants = Adam._constants(self, group)
        constants["rho_inf"] = 2.0 / (1.0 - constants["beta2"]) - 1.0
        return constants

    def _state_names(self, group):
        return ["exp_avg", "exp_avg_sq"]

    def _update(self, p, g, state, c, step, group):
        if group["weight_decay"] and group["decoupled_weight_decay"]:
            p = p * c["decay"]
        elif group["weight_decay"]:
            g = g + p * c["weight_decay"]
        m = state["exp_avg"] + (g - state["exp_avg"]) * c["one_minus_beta1"]
        v = state["exp_avg_sq"] * c["beta2"] + g * g * c["one_minus_beta2"]
        correction2 = _one_minus_power(c["log_beta2"], step)
        corrected = m / _one_minus_power(c["log_beta1"], step)
        rho_inf = c["rho_inf"]
        rho = rho_inf - 2.0 * step * (step * c["log_beta2"]).exp() / correction2
        rectified = rho > 5.0
        # Where not rectified the ratio is unused; 1 keeps its square root finite.
        ratio = where(rectified, (rho - 4.0) * (rho - 2.0) * rho_inf
                      / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho), 1.0)
        adaptive = correction2.sqrt() / (v.sqrt() + c["eps"])
        scale = where(rectified, adaptive * ratio.sqrt(), 1.0)
        return p - corrected * c["lr"] * scale, {"exp_avg": m, "exp_avg_sq": v}


class Adadelta(Optimizer):
    """``torch.optim.Adadelta`` (Zeiler).

        opt = gingham.optim.Adadelta(model.parameters(), lr=1.0, rho=0.9)
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps,
                                  "weight_decay": weight_decay, "maximize": maximize,
                                  "capturable": capturable, "foreach": foreach,
                                  "differentiable": differentiable})

    def _constants(self, group):
        return {"lr": group["lr"], "rho": group["rho"], "one_minus_rho": 1.0 - group["rho"],
                "eps": group["eps"], "weight_decay": group["weight_decay"]}

    def _state_names(self, group):
        return ["square_avg", "acc_delta"]

    def _update(self, p, g, state, c, step, group):
        g = _decay(p, g, c, group)
        square_avg = state["square_avg"] * c["rho"] + g * g * c["one_minus_rho"]
        delta = (state["acc_delta"] + c["eps"]).sqrt() / (square_avg + c["eps"]).sqrt() * g
        acc_delta = state["acc_delta"] * c["rho"] + delta * delta * c["one_minus_rho"]
        return p - c["lr"] * delta, {"square_avg": square_avg, "acc_delta": acc_delta}


__all__ = ["Optimizer", "ParamGroup", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax",
           "RAdam", "Adadelta", "lr_scheduler"]

from . import lr_scheduler  # noqa: E402  (it builds on Optimizer: gingham.optim.lr_scheduler)
