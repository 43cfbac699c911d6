"""Train the DAWNBench ResNet-9 on CIFAR-10 (or synthetic CIFAR-shaped data) on any device.

    python examples/cifar_resnet9.py --data ~/cifar-10-python.tar.gz --device cuda:0
    python examples/cifar_resnet9.py --synthetic --steps 20 --device cpu

gingham downloads nothing: pass the path of the standard ``cifar-10-python.tar.gz``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import gingham
from gingham import data
from gingham.devices import default_device_id
from gingham.nn import modules, training
from gingham.nn.models import ResNet9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path of cifar-10-python.tar.gz")
    parser.add_argument("--synthetic", action="store_true", help="random CIFAR-shaped data")
    parser.add_argument("--device", default=None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps")
    parser.add_argument("--batch", type=int, default=512)
    args = parser.parse_args()
    device = args.device or default_device_id()

    if args.synthetic or not args.data:
        images, labels = data.synthetic(args.batch * 4, (3, 32, 32))
    else:
        images, labels = data.load_cifar10(args.data, "train")
        mean = images.mean(axis=(0, 2, 3), keepdims=True)
        std = images.std(axis=(0, 2, 3), keepdims=True)
        images = ((images - mean) / std).astype(np.float32)

    modules.manual_seed(0)
    model = ResNet9(device=device)
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                  weight_decay=5e-4 * args.batch)

    train_step = training.train_step(model, optimizer)

    steps_per_epoch = len(images) // args.batch
    total = args.epochs * steps_per_epoch
    step = 0
    start = time.perf_counter()
    for epoch in range(args.epochs):
        for x, y in data.batches(images, labels, args.batch, shuffle=True, seed=epoch):
            # One-cycle learning rate: a device tensor, so the compiled step never retraces.
            optimizer.lr = 0.4 * min(step / (0.2 * total), (total - step) / (0.8 * total)) / args.batch
            loss = train_step(x, y)
            step += 1
            if args.steps and step >= args.steps:
                break
        print(f"epoch {epoch + 1}  loss {loss.item():.4f}  {time.perf_counter() - start:.1f} s")
        if args.steps and step >= args.steps:
            break


if __name__ == "__main__":
    main()
