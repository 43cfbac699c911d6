"""End to end: a small convnet trained under gingham.jit on the shipped digits, on the CPU
backend, reaches 97% test accuracy; after the first step a step moves only the batch in and
the loss out, compiles nothing, and never retraces."""

from __future__ import annotations

import numpy as np
import pytest

import gingham
import gingham.nn.functional as F
from gingham import data
from gingham.devices import get_device, list_devices
from gingham.nn import modules, training
from gingham.nn.models import ResNet9, SmallConvNet

pytestmark = pytest.mark.skipif("cpu" not in [d.id for d in list_devices()],
                                reason="needs the cpu backend (a C compiler)")


def test_small_convnet_learns_digits():
    modules.manual_seed(0)
    model = SmallConvNet(device="cpu")
    optimizer = gingham.optim.Adam(model.parameters(), lr=0.01)

    @gingham.jit
    def train_step(images, labels):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    @gingham.jit
    def predict(images):
        return model(images)

    train_x, train_y = data.load_digits("train")
    test_x, test_y = data.load_digits("test")
    stats = get_device("cpu").stats
    first_loss = None
    for epoch in range(12):
        for images, labels in data.batches(train_x, train_y, 64, shuffle=True, seed=epoch):
            before = stats.snapshot()
            loss = train_step(images, labels).item()
            moved = stats.snapshot() - before
            if first_loss is None:
                first_loss = loss
            else:
                assert (moved.copies_in, moved.copies_out, moved.compiles) == (2, 1, 0)
    assert train_step.traces == 1
    assert loss < first_loss / 10
    accuracy = (predict(test_x).numpy().argmax(1) == test_y).mean()
    assert accuracy >= 0.97, accuracy


def test_resnet9_loss_decreases_on_synthetic_cifar(device):
    if device == "reference":
        pytest.skip("ResNet-9 is too large for the interpreter")
    modules.manual_seed(0)
    model = ResNet9(device=device)
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                  weight_decay=5e-4)
    images, labels = data.synthetic(8, (3, 32, 32), seed=1)

    train_step = training.train_step(model, optimizer)
    losses = [train_step(images, labels).item() for _ in range(6)]
    assert np.isfinite(losses).all()
    assert losses[-1] < losses[0]
