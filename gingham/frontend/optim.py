"""Optimisers whose updates are Tile programs: SGD (momentum, Nesterov, weight decay), Adam, AdamW.

An optimiser's ``step()`` builds the new value of every parameter and state tensor lazily and
assigns them all at once, so the update compiles together with the gradients that feed it — and,
under :func:`gingham.jit`, together with the whole training step. The learning rate and the step
count live in device tensors: changing ``optimizer.lr`` (a schedule) updates a 4-byte tensor and
never forces a retrace.

    opt = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    loss.backward(); opt.step(); opt.zero_grad()
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ..errors import GinghamError
from .tensor import Tensor, assign_all, tensor, where


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
        self._lr = tensor(np.float32(lr), device=self.device)
        self._step = tensor(np.float32(0), device=self.device)

    @property
    def lr(self) -> float:
        return self._lr_value

    @lr.setter
    def lr(self, value: float) -> None:
        """A new learning rate: written into the device tensor the compiled step reads."""
        self._lr_value = float(value)
        self._lr.assign(tensor(np.float32(value), device=self.device))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _state(self) -> list[Tensor]:
        return [tensor(np.zeros(p.shape, p.dtype), device=p.device) for p in self.params]

    def updates(self, step: Tensor) -> list[tuple[Tensor, Tensor]]:
        raise NotImplementedError

    def step_updates(self) -> list[tuple[Tensor, Tensor]]:
        """The ``(tensor, new value)`` pairs of one step, the step count's included, not yet
        assigned: :class:`gingham.amp.GradScaler` masks them to skip a step on the device."""
        step = self._step + 1.0
        return self.updates(step) + [(self._step, step)]

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        assign_all(self.step_updates())


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

    def updates(self, step: Tensor) -> list[tuple[Tensor, Tensor]]:
        pairs = []
        for n, p in enumerate(self.params):
            if p.grad is None:
                continue
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
            pairs.append((p, p - self._lr * g))
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

    def updates(self, step: Tensor) -> list[tuple[Tensor, Tensor]]:
        pairs = []
        # beta ** step, written with exp and log so the step count can stay a device tensor.
        correction1 = 1.0 - (step * math.log(self.beta1)).exp()
        correction2 = 1.0 - (step * math.log(self.beta2)).exp()
        for n, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            if self.weight_decay and not self.decoupled:
                g = g + p * self.weight_decay
            m = self._m[n] * self.beta1 + g * (1.0 - self.beta1)
            v = self._v[n] * self.beta2 + g * g * (1.0 - self.beta2)
            update = (m / correction1) / ((v / correction2).sqrt() + self.eps)
            base = p
            if self.weight_decay and self.decoupled:
                base = p - p * (self._lr * self.weight_decay)
            pairs += [(self._m[n], m), (self._v[n], v), (p, base - self._lr * update)]
        return pairs


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), torch.optim.AdamW's defaults."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
