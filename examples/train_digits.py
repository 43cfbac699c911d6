"""Train a small convnet on the digits that ship with gingham, on any device.

    python examples/train_digits.py [--device cpu|opencl:0|cuda:0] [--epochs 12]
"""

from __future__ import annotations

import argparse
import time

import gingham
import gingham.nn.functional as F
from gingham import data
from gingham.devices import default_device_id
from gingham.nn import modules
from gingham.nn.models import SmallConvNet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="device id (default: the best available)")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    device = args.device or default_device_id()

    modules.manual_seed(0)
    model = SmallConvNet(device=device)
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
    start = time.perf_counter()
    for epoch in range(args.epochs):
        for images, labels in data.batches(train_x, train_y, args.batch, shuffle=True, seed=epoch):
            loss = train_step(images, labels)
        print(f"epoch {epoch + 1:2d}  loss {loss.item():.4f}  {time.perf_counter() - start:6.1f} s")
    accuracy = (predict(test_x).numpy().argmax(1) == test_y).mean()
    print(f"test accuracy {accuracy:.2%} on {device}")


if __name__ == "__main__":
    main()
