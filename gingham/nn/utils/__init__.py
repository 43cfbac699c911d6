"""``torch.nn.utils`` on gingham tensors: gradient clipping, parameters as one vector,
:mod:`~gingham.nn.utils.rnn` (``pad_sequence``, packed sequences) and :mod:`~gingham.nn.utils.parametrizations`
(``weight_norm``, ``spectral_norm``), with the deprecated :func:`weight_norm` form.
PyTorch's deprecated hook-based ``nn.utils.spectral_norm`` is not provided: use
``parametrizations.spectral_norm``.

    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()

Gradients are lazy tensors, so "in place" here means that ``p.grad`` is replaced by the
clipped gradient: the optimiser's next ``step()`` reads the new one, and inside
``gingham.jit`` the clipping compiles into the step with the rest (the scale is computed on
the device; nothing is read back to the host).
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable, Union

from ...frontend.jit import current_trace
from ...frontend.tensor import (ShapeError, Tensor, cat, minimum, no_grad, realize,
                                refuse_while_tracing, stack, tensor)
from ..modules import Module
from . import parametrizations, parametrize, rnn
from .parametrizations import _WeightNorm

TensorOrTensors = Union[Tensor, Iterable[Tensor]]


def _as_list(parameters: TensorOrTensors) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def get_total_norm(tensors: TensorOrTensors, norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` taken as one vector (``'inf'`` for the largest
    magnitude), as ``torch.nn.utils.get_total_norm``: the norm of the tensors' norms, a
    0-d tensor on the first tensor's device (``tensor(0.0)`` when there are none).
    ``foreach`` is accepted for PyTorch's signature; every device fuses the norms anyway.

        norm = nn.utils.get_total_norm([p.grad for p in model.parameters()])
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    first_device = tensors[0].device
    with no_grad():
        norms = [t.norm(norm_type) for t in tensors]
        norms = [n if n.device == first_device else n.to(first_device) for n in norms]
        total = stack(norms).norm(norm_type)
    if error_if_nonfinite:
        if current_trace() is not None:
            # The check is a branch on the norm's value: a compiled step has no host read.
            raise RuntimeError("error_if_nonfinite=True reads the total norm on the host, "
                               "which a step traced by gingham.jit cannot do; leave it False "
                               "there (or check the returned norm after the step)")
        if not math.isfinite(float(total.numpy())):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is "
                "non-finite, so it cannot be clipped. To disable this error and scale the "
                "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale every ``p.grad`` by ``min(max_norm / (total_norm + 1e-6), 1)`` (replacing it),
    given the norm :func:`get_total_norm` computed; the scale stays on the device."""
    parameters = [p for p in _as_list(parameters) if p.grad is not None]
    if not parameters:
        return
    with no_grad():
        scale = minimum(float(max_norm) / (total_norm + 1e-6), 1.0)
        for p in parameters:
            device_scale = scale if scale.device == p.grad.device else scale.to(p.grad.device)
            p.grad = p.grad * device_scale.astype(p.grad.dtype)


def clip_grad_norm_(parameters: TensorOrTensors, max_norm: float,
                    norm_type: float | str = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients of ``parameters`` so that their total ``norm_type``-norm is at
    most ``max_norm``; returns the norm before clipping (a 0-d tensor), as
    ``torch.nn.utils.clip_grad_norm_``. ``error_if_nonfinite`` raises ``RuntimeError`` for
    a NaN or infinite norm (eagerly only: it needs the value on the host).

        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()                      # sees the clipped p.grad
    """
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    if current_trace() is None:
        # Eagerly the optimiser's step assigns the parameters next, which would leave the
        # lazy norm computed from stale values: compute it now, with the gradients it scaled
        # (one program, on the device) so the step reuses them.
        realize([total_norm] + [p.grad for p in parameters if p.grad is not None])
    return total_norm


def clip_grad_norm(parameters: TensorOrTensors, max_norm: float, norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated spelling of :func:`clip_grad_norm_` (PyTorch warns the same way)."""
    warnings.warn("`nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every ``p.grad`` into ``[-clip_value, clip_value]`` (replacing it), as
    ``torch.nn.utils.clip_grad_value_``.

        nn.utils.clip_grad_value_(model.parameters(), 0.5)
    """
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad = p.grad.clamp(-clip_value, clip_value)


def _same_device(parameters: list[Tensor]) -> None:
    if len({p.device for p in parameters}) > 1:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and joined into one vector (differentiable), as
    ``torch.nn.utils.parameters_to_vector``; ``TypeError`` if they are on several devices.

        flat = nn.utils.parameters_to_vector(model.parameters())     # [number of weights]
    """
    parameters = list(parameters)
    _same_device(parameters)
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give each parameter its slice of ``vec`` (reshaped to it), outside autograd, as
    ``torch.nn.utils.vector_to_parameters`` (the inverse of :func:`parameters_to_vector`).

        nn.utils.vector_to_parameters(flat * 0.5, model.parameters())
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected gingham.Tensor, but got: {type(vec).__name__}")
    parameters = list(parameters)
    _same_device(parameters)
    needed = sum(p.size for p in parameters)
    if vec.ndim != 1 or vec.shape[0] < needed:
        raise ShapeError(f"vector_to_parameters: vec must be a vector of at least {needed} "
                         f"values (the parameters' total size), got shape {vec.shape}")
    pointer = 0
    for p in parameters:
        p.data = vec[pointer:pointer + p.size].reshape(p.shape)
        pointer += p.size


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """The deprecated ``torch.nn.utils.weight_norm``: ``module.<name>`` recomputed at every
    access as ``g * v / ||v||`` from the parameters ``<name>_g`` and ``<name>_v`` of the
    module itself (PyTorch's names for this form; :func:`parametrizations.weight_norm` is
    the current one). Returns ``module``; :func:`remove_weight_norm` undoes it.

        layer = nn.utils.weight_norm(nn.Linear(20, 40))     # layer.weight_g, layer.weight_v
    """
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    refuse_while_tracing("weight_norm()")
    weight = vars(module).get(name)
    if not isinstance(weight, Tensor):
        raise ValueError(f"weight_norm: module {type(module).__name__} has no parameter "
                         f"{name!r}")
    norm = _WeightNorm(dim)
    with no_grad():
        g, v = norm.right_inverse(weight)
    delattr(module, name)
    setattr(module, f"{name}_g", tensor(g.numpy(), device=weight.device, requires_grad=True))
    setattr(module, f"{name}_v", tensor(v.numpy(), device=weight.device, requires_grad=True))
    cls = type(module)
    recomputed = property(lambda m: norm(getattr(m, f"{name}_g"), getattr(m, f"{name}_v")))
    # A subclass of the same name (the repr stays PyTorch's) whose weight is a property.
    module.__class__ = type(cls.__name__, (cls,), {name: recomputed, "_weight_norm": name})
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`weight_norm`: ``<name>`` becomes a parameter holding its current value."""
    if getattr(type(module), "_weight_norm", None) != name:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    refuse_while_tracing("remove_weight_norm()")
    with no_grad():
        value = getattr(module, name)
    module.__class__ = type(module).__bases__[0]
    delattr(module, f"{name}_g")
    delattr(module, f"{name}_v")
    setattr(module, name, tensor(value.numpy(), device=value.device, requires_grad=True))
    return module


__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "parametrizations",
           "parametrize", "remove_weight_norm", "rnn", "weight_norm"]
