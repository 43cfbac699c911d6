"""A training loop written the way PyTorch code is written, run by gingham on any device:
an ``nn.Module`` subclass, a ``DataLoader``, parameter groups, a one-cycle schedule, gradient
clipping, an exponential moving average of the weights kept with in-place updates, and
``gingham.jit`` compiling the whole step (forward, backward, clipping, update, average) into one
program.

    python examples/pytorch_style.py [--device cpu|opencl:0|cuda:0] [--epochs 4]

The digits that ship with gingham are 8x8 images of 10 classes.
"""

from __future__ import annotations

import argparse
import copy
import time

import gingham
import gingham.nn as nn
import gingham.nn.functional as F
from gingham import data
from gingham.data import DataLoader, TensorDataset
from gingham.devices import default_device_id


class Net(nn.Module):
    def __init__(self, device: str) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, device=device), nn.BatchNorm2d(32, device=device),
            nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1, device=device),
            nn.BatchNorm2d(64, device=device), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(64 * 16, 10,
                                                                          device=device))

    def forward(self, x):
        return self.head(self.features(x))


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="device id (default: the best available)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    device = args.device or default_device_id()

    gingham.manual_seed(0)
    nn.manual_seed(0)
    model = Net(device)
    average = copy.deepcopy(model)  # the weights' exponential moving average
    train_x, train_y = data.load_digits("train")
    test_x, test_y = data.load_digits("test")
    # drop_last keeps one batch shape, so the compiled step is traced once. Batches are NumPy
    # arrays, which the jit-compiled step uploads (one copy each).
    train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=args.batch,
                              shuffle=True, generator=0, drop_last=True)
    steps_per_epoch = len(train_loader)

    # Two parameter groups: no weight decay on the head, a one-cycle learning rate for both.
    optimizer = gingham.optim.SGD(
        [{"params": model.features.parameters(), "weight_decay": 5e-4},
         {"params": model.head.parameters(), "weight_decay": 0.0}],
        lr=0.05, momentum=0.9, nesterov=True)
    schedule = gingham.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=0.2, total_steps=args.epochs * steps_per_epoch)

    @gingham.jit
    def train_step(images, labels):
        loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
        optimizer.step()
        with gingham.no_grad():  # in place, as in PyTorch: the average's own tensors change
            for kept, current in zip(average.parameters(), model.parameters()):
                kept.mul_(0.95).add_(current, alpha=0.05)
        return loss

    @gingham.jit
    def predict(images):
        return average(images)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)  # one copy each
            loss = train_step(images, labels)
            schedule.step()  # the new learning rate reaches the compiled step: no retrace
        print(f"epoch {epoch + 1}  loss {loss.item():.4f}  lr {schedule.get_last_lr()[0]:.4f}"
              f"  {time.perf_counter() - start:5.1f} s")
    for kept, current in zip(average.buffers(), model.buffers()):
        kept.copy_(current)  # batch-norm statistics: the model's own
    average.eval()
    accuracy = (predict(test_x).numpy().argmax(1) == test_y).mean()
    print(f"test accuracy of the averaged weights {accuracy:.2%} on {device} "
          f"({train_step.traces} trace of the training step)")
    return float(accuracy)


if __name__ == "__main__":
    main()
