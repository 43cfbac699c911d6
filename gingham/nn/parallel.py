"""Data-parallel training over several devices: each device runs a compiled step on its share
of the batch, their gradients are averaged, and every replica applies the same update.

    step = gingham.nn.training.train_step(model, optimizer, devices=["cuda:0", "cuda:1"])
    for images, labels in gingham.data.batches(x, y, 512, shuffle=True):
        loss = step(images, labels)          # half the batch on each GPU

The model and optimiser given are the first device's replica (they must be on it); the other
devices get copies made once (``copy.deepcopy`` of both, moved there), so ``model`` keeps
holding the trained weights. Each replica has two programs compiled with :func:`gingham.jit`:
its gradient (forward, loss, backward on its rows) and its update (the optimiser's step given
the averaged gradient). The gradients are averaged on the host, weighted by each share's rows,
so the update is the one the whole batch gives on one device (for a loss that is a mean over
rows, as cross-entropy's; batch norm's statistics are each share's, as in PyTorch's
DistributedDataParallel, and each replica keeps its own running statistics).

The devices may differ (a GPU and the CPU, CUDA and OpenCL): each replica's programs are
compiled for its own device. Every replica's gradient program is launched before any result
is read, so devices whose launches return at once (GPUs) compute at the same time; the
averaging waits for all of them. It goes through the host (NumPy), not a device-to-device
all-reduce.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Callable, Sequence

import numpy as np

from ..errors import DeviceError, GinghamError
from ..frontend.amp import autocast as autocast_block
from ..frontend.jit import jit
from ..frontend.optim import Optimizer
from ..frontend.tensor import Tensor, tensor
from .modules import Module


class _Replica:
    """One device's model and optimiser and its two compiled programs."""

    def __init__(self, model: Module, optimizer: Optimizer, loss_fn: Callable,
                 precision: Callable[[], contextlib.AbstractContextManager]) -> None:
        self.model, self.optimizer = model, optimizer
        self.device = optimizer.device
        params = optimizer.params

        @jit
        def gradients(inputs, targets):
            with precision():
                loss = loss_fn(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            grads = [p.grad for p in params]
            optimizer.zero_grad()  # the lazy gradients must not outlive the trace
            return loss, grads

        @jit
        def update(grads):
            for p, g in zip(params, grads):
                p.grad = g
            optimizer.step()
            optimizer.zero_grad()
            return ()

        self.gradients, self.update = gradients, update


class DataParallelStep:
    """``step(inputs, targets) -> loss``: one training step with the batch shared out over
    ``devices`` (see the module docstring). Made by
    :func:`gingham.nn.training.train_step` with ``devices=``."""

    def __init__(self, model: Module, optimizer: Optimizer, devices: Sequence[str],
                 loss_fn: Callable, autocast: str | None = None) -> None:
        from ..devices import get_device

        ids = [get_device(d).id for d in devices]
        if len(set(ids)) != len(ids) or not ids:
            raise DeviceError(f"data-parallel training needs distinct devices, got {list(devices)}")
        held = {p.device for p in optimizer.params}
        if held != {ids[0]}:
            raise DeviceError(f"data-parallel training: the model and optimiser given are the "
                              f"first device's replica, so their parameters must be on "
                              f"{ids[0]}, not {sorted(held)}")
        self.devices = ids

        def precision():
            return autocast_block(autocast) if autocast else contextlib.nullcontext()

        self.replicas = [_Replica(model, optimizer, loss_fn, precision)]
        for device in ids[1:]:
            # One deepcopy of both: the optimiser's copy updates the model copy's parameters.
            twin_model, twin_optimizer = copy.deepcopy((model, optimizer))
            twin_model.to(device)
            twin_optimizer._follow_parameters()
            self.replicas.append(_Replica(twin_model, twin_optimizer, loss_fn, precision))

    def __call__(self, inputs, targets) -> Tensor:
        inputs, targets = _host(inputs, "inputs"), _host(targets, "targets")
        rows = inputs.shape[0]
        if targets.shape[0] != rows:
            raise GinghamError(f"data-parallel step: {rows} input rows but "
                               f"{targets.shape[0]} target rows")
        if rows < len(self.replicas):
            raise GinghamError(f"data-parallel step: a batch of {rows} rows cannot be shared "
                               f"over {len(self.replicas)} devices")
        bounds = np.linspace(0, rows, len(self.replicas) + 1).round().astype(int)
        master = self.replicas[0].optimizer
        results = []
        for replica, start, stop in zip(self.replicas, bounds[:-1], bounds[1:]):
            if replica.optimizer.lr != master.lr:  # a schedule changed the first replica's
                replica.optimizer.lr = master.lr
            results.append(replica.gradients(
                tensor(inputs[start:stop], device=replica.device),
                tensor(targets[start:stop], device=replica.device)))
        weights = np.diff(bounds) / rows
        # Reading the results waits for each device; they all started before the first read.
        loss = sum(w * float(l.item()) for w, (l, _) in zip(weights, results))
        averaged = []
        for position in range(len(master.params)):
            grads = [g[position] for _, g in results]
            if any(g is None for g in grads):
                averaged.append(None)
                continue
            total = sum(w * g.numpy().astype(np.float64) for w, g in zip(weights, grads))
            averaged.append(total.astype(grads[0].dtype))
        for replica in self.replicas:
            replica.update([None if g is None else tensor(g, device=replica.device)
                            for g in averaged])
        return tensor(np.float32(loss), device=self.devices[0])


def _host(value, name: str) -> np.ndarray:
    """A batch as a NumPy array (a tensor is copied from its device)."""
    array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if array.ndim == 0:
        raise GinghamError(f"data-parallel step: {name} need a batch axis, got a scalar")
    return array


__all__ = ["DataParallelStep"]
