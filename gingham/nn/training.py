"""The standard supervised training step, compiled with :func:`gingham.jit`.

    step = gingham.nn.training.train_step(model, optimizer)     # cross-entropy by default
    for images, labels in gingham.data.batches(x, y, 512, shuffle=True):
        loss = step(images, labels)

It is exactly the loop a PyTorch user writes (forward, loss, zero_grad, backward, step),
traced once per batch shape and replayed as one compiled program. Mixed precision is two
arguments: ``autocast="bfloat16"`` runs the forward under :func:`gingham.autocast`; with
``"float16"`` pass a :class:`gingham.amp.GradScaler` as ``scaler`` too. ``devices=`` shares
each batch out over several devices (:mod:`gingham.nn.parallel`):

    step = gingham.nn.training.train_step(model, optimizer, devices=["cuda:0", "cuda:1"])
"""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

from ..frontend.amp import GradScaler
from ..frontend.amp import autocast as autocast_block
from ..frontend.jit import jit
from ..frontend.optim import Optimizer
from ..errors import GinghamError
from . import functional as F
from .modules import Module
from .parallel import DataParallelStep


def train_step(model: Module, optimizer: Optimizer, loss_fn: Callable = F.cross_entropy,
               autocast: str | None = None, scaler: GradScaler | None = None,
               devices: Sequence[str] | None = None) -> Callable:
    """A jit-compiled ``step(inputs, targets) -> loss`` that also updates the model.

    ``autocast`` (``"bfloat16"`` or ``"float16"``) computes the model and the loss under
    :func:`gingham.autocast` (parameters, gradients and the update stay float32); ``scaler``
    scales the loss and skips steps whose gradients overflow (float16). ``devices`` (two or
    more; the model on the first) trains data-parallel:
    :class:`gingham.nn.parallel.DataParallelStep`."""
    if devices is not None and len(devices) > 1:
        if scaler is not None:
            raise GinghamError("train_step: a GradScaler is not supported with devices= "
                               "(data-parallel float16 training); use autocast='bfloat16'")
        return DataParallelStep(model, optimizer, devices, loss_fn, autocast)
    precision = autocast_block(autocast) if autocast else contextlib.nullcontext()

    @jit
    def step(inputs, targets):
        with precision:
            loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad()
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss

    return step


__all__ = ["train_step"]
