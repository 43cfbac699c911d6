"""``torch.nn.utils.parametrizations``: :func:`weight_norm` and :func:`spectral_norm`, a
layer whose weight is recomputed from its parameters at every forward (see
:mod:`.parametrize`), with PyTorch's state-dict names so weights load both ways.

    layer = weight_norm(nn.Linear(20, 40))     # parametrizations.weight.original0 (g), 1 (v)
    conv = spectral_norm(nn.Conv2d(3, 16, 3))  # parametrizations.weight.original, .0._u, .0._v
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ...frontend.jit import current_trace
from ...frontend.tensor import Tensor, assign_all, no_grad, tensor
from ...tile import builder
from .. import functional as F
from .. import modules
from ..modules import Module, _ConvTransposeNd
from .parametrize import register_parametrization


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """``torch.norm_except_dim(v, 2, dim)``: the 2-norm over every axis but ``dim``, kept
    as size-1 axes; ``dim == -1`` is the norm of the whole tensor (0-d)."""
    if dim == -1:
        return v.norm()
    others = tuple(axis for axis in range(v.ndim) if axis != dim)
    return v.norm(dim=others, keepdim=True)


class _WeightNorm(Module):
    """``weight = g * v / ||v||``, the norm over every axis but ``dim``."""

    def __init__(self, dim: int | None = 0) -> None:
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (Salimans & Kingma), ``g`` and
    ``v`` the parameters ``parametrizations.<name>.original0`` and ``original1``, as
    ``torch.nn.utils.parametrizations.weight_norm``; ``dim=None`` takes the norm of the
    whole tensor. Returns ``module``.

        layer = weight_norm(nn.Linear(20, 40))
        layer.parametrizations.weight.original0.shape           # (40, 1)
    """
    return register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` the largest singular value of the weight as a matrix
    (``dim`` first, the rest flattened), estimated by power iteration on the buffers ``_u``
    and ``_v``: ``n_power_iterations`` more steps at every forward in training (the buffers
    updated), none in evaluation."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + weight.ndim
        self.eps, self.n_power_iterations = eps, n_power_iterations
        if weight.ndim > 1:
            with no_grad():
                matrix = self._reshape_weight_to_matrix(weight)
                rows, columns = matrix.shape
                rng = modules._default_rng  # parameter initialisation's generator
                start = [rng.standard_normal(n).astype(np.float32) for n in (rows, columns)]
                self._u, self._v = (F.normalize(tensor(x, device=weight.device), dim=0, eps=eps)
                                    for x in start)
                u, v = self._power_method(matrix, 15)
            # Leaves: training assigns the buffers new values at every forward.
            self._u = tensor(u.numpy(), device=weight.device)
            self._v = tensor(v.numpy(), device=weight.device)

    def _own_tensors(self) -> Iterator[tuple[str, Tensor]]:
        """PyTorch names the power iteration's buffers ``_u`` and ``_v``: list them as
        buffers (gingham otherwise keeps ``_`` attributes private) so state dicts match."""
        yield from super()._own_tensors()
        if "_u" in vars(self):
            yield "_u", self._u
            yield "_v", self._v

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            order = [self.dim] + [axis for axis in range(weight.ndim) if axis != self.dim]
            weight = weight.permute(*order)
        return weight.reshape(weight.shape[0], -1)

    def _power_method(self, matrix: Tensor, iterations: int) -> tuple[Tensor, Tensor]:
        u, v = self._u, self._v
        for _ in range(iterations):
            u = F.normalize(matrix @ v, dim=0, eps=self.eps)
            v = F.normalize(matrix.mT @ u, dim=0, eps=self.eps)
        return u, v

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = self._reshape_weight_to_matrix(weight)
        u, v = self._u, self._v
        if self.training:
            # The vectors are constants of the gradient, as PyTorch's no_grad power method
            # makes them; detach() would instead freeze a traced step's matrix at tracing.
            constant = F._map(matrix, builder.stop_gradient, "spectral_norm")
            with no_grad():
                u, v = self._power_method(constant, self.n_power_iterations)
            assign_all([(self._u, u), (self._v, v)])
            if current_trace() is None:
                # Eagerly the buffers now hold the new vectors: reading them keeps the
                # previous values (stale after the assignment) out of the gradient's graph.
                # A traced step assigns at its end, so there the new values stay lazy.
                u, v = self._u, self._v
        sigma = (u * (matrix @ v)).sum()
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value

    def extra_repr(self) -> str:
        return ""


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm (Miyato et al.), estimated by power
    iteration, as ``torch.nn.utils.parametrizations.spectral_norm``: ``dim`` (default 1 for
    transposed convolutions, else 0) is the output axis. The buffers
    ``parametrizations.<name>.0._u`` and ``._v`` are updated at every forward in training
    (inside ``gingham.jit`` too, as outputs of the step). Returns ``module``.

        critic = spectral_norm(nn.Linear(64, 1))
    """
    weight = vars(module).get(name)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{type(module).__name__}' has no parameter or buffer with "
                         f"name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    return register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps), unsafe=True)


__all__ = ["spectral_norm", "weight_norm"]
