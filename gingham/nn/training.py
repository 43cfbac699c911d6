"""The standard supervised training step, compiled with :func:`gingham.jit`.

    step = gingham.nn.training.train_step(model, optimizer)     # cross-entropy by default
    for images, labels in gingham.data.batches(x, y, 512, shuffle=True):
        loss = step(images, labels)

It is exactly the loop a PyTorch user writes (forward, loss, zero_grad, backward, step),
traced once per batch shape and replayed as one compiled program.
"""

from __future__ import annotations

from typing import Callable

from ..frontend.jit import jit
from ..frontend.optim import Optimizer
from . import functional as F
from .modules import Module


def train_step(model: Module, optimizer: Optimizer,
               loss_fn: Callable = F.cross_entropy) -> Callable:
    """A jit-compiled ``step(inputs, targets) -> loss`` that also updates the model."""

    @jit
    def step(inputs, targets):
        loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


__all__ = ["train_step"]
