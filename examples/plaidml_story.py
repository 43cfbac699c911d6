"""The network of PlaidML's launch story — four residual blocks on 100x100 RGB images at
batch 16 — trained on synthetic data on any device, with seconds per step.

    python examples/plaidml_story.py --device opencl:0 --steps 50
"""

from __future__ import annotations

import argparse
import time

import gingham
from gingham import data
from gingham.devices import default_device_id
from gingham.nn import modules, training
from gingham.nn.models import StoryNet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    device = args.device or default_device_id()

    modules.manual_seed(0)
    model = StoryNet(device=device)
    optimizer = gingham.optim.Adam(model.parameters(), lr=1e-3)
    images, labels = data.synthetic(args.batch * 8, (3, 100, 100))

    train_step = training.train_step(model, optimizer)

    start = time.perf_counter()
    step = 0
    while step < args.steps:
        for x, y in data.batches(images, labels, args.batch, shuffle=True, seed=step):
            loss = train_step(x, y)
            step += 1
            if step == 1:
                loss.item()
                first = time.perf_counter() - start
                start = time.perf_counter()
            if step >= args.steps:
                break
    final = loss.item()
    per_step = (time.perf_counter() - start) / max(1, args.steps - 1)
    print(f"{device}: first step {first:.1f} s (trace + compile), then {per_step * 1e3:.1f} ms "
          f"per step; final loss {final:.3f}")


if __name__ == "__main__":
    main()
