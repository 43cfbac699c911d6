"""``gingham bench model``: seconds per epoch of a whole training step, beside PyTorch eager.

    $ gingham bench model resnet9 --device cuda:0            # CIFAR-shaped, batch 512
    $ gingham bench model story --device opencl:0             # PlaidML's story net, batch 16
    $ gingham bench model resnet9 --device cuda:0 --precision bf16   # mixed precision

Each side trains the same network (same initial weights, SGD with Nesterov momentum) on
synthetic data of the real shape. ``--precision fp32`` (the default) trains in float32;
``bf16`` / ``fp16`` run gingham's step under :func:`gingham.autocast` (float32 master
weights; fp16 with a :class:`gingham.amp.GradScaler`) and PyTorch's under ``torch.autocast`` in
the same dtype with channels-last memory format (fp16 with ``torch.amp.GradScaler``). gingham
runs its ``gingham.jit``-compiled step; the first call's time (trace, compile, first run) is
reported separately as the first-epoch overhead.
Seconds per epoch are extrapolated from the median step time over ``--steps`` timed steps
(stated as such): epoch = ceil(images / batch) steps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import data
from ..devices import get_device
from .baselines import torch_env

#: --precision -> the autocast dtype (None: float32 throughout).
PRECISIONS = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}

MODELS = {
    # name: (input shape, images per epoch, default batch)
    "resnet9": ((3, 32, 32), 50_000, 512),
    "story": ((3, 100, 100), 50_000, 16),
}


@dataclass
class ModelResult:
    name: str
    device: str
    batch: int
    steps_per_epoch: int
    precision: str = "fp32"
    first_step_seconds: float = math.nan
    gingham_step_seconds: float = math.nan
    torch_step_seconds: float | None = None
    baseline: str = "none"
    losses: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def gingham_epoch(self) -> float:
        return self.gingham_step_seconds * self.steps_per_epoch

    @property
    def torch_epoch(self) -> float | None:
        if self.torch_step_seconds is None:
            return None
        return self.torch_step_seconds * self.steps_per_epoch

    @property
    def ratio(self) -> float | None:
        if self.torch_step_seconds is None:
            return None
        return self.torch_step_seconds / self.gingham_step_seconds

    def record(self) -> dict:
        return {
            "name": f"model.{self.name}", "device": self.device,
            "dtype": PRECISIONS[self.precision] or "float32",
            "shape": f"batch {self.batch}", "gingham_seconds": self.gingham_epoch,
            "baseline": self.baseline, "baseline_seconds": self.torch_epoch,
            "ratio": self.ratio, "unit": "seconds per epoch (extrapolated from steps)",
            "first_step_seconds": self.first_step_seconds,
            "gingham_step_seconds": self.gingham_step_seconds,
            "torch_step_seconds": self.torch_step_seconds, "losses": self.losses,
            "notes": self.notes,
        }


def _gingham_model(name: str, device: str):
    from ..nn import modules, models

    modules.manual_seed(0)
    return models.ResNet9(device=device) if name == "resnet9" else models.StoryNet(device=device)


def run_model(name: str, device_id: str, batch: int | None = None, steps: int = 5,
              with_torch: bool = True, precision: str = "fp32") -> ModelResult:
    import gingham
    from ..nn import training

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    shape, images_per_epoch, default_batch = MODELS[name]
    batch = batch or default_batch
    result = ModelResult(name, device_id, batch, math.ceil(images_per_epoch / batch), precision)
    device = get_device(device_id)
    images, labels = data.synthetic(batch * 2, shape, seed=0)
    model = _gingham_model(name, device_id)
    optimizer = gingham.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                                  weight_decay=5e-4)

    scaler = gingham.amp.GradScaler() if precision == "fp16" else None
    train_step = training.train_step(model, optimizer, autocast=PRECISIONS[precision],
                                     scaler=scaler)

    batches = [(images[:batch], labels[:batch]), (images[batch:], labels[batch:])]
    start = time.perf_counter()
    result.losses.append(train_step(*batches[0]).item())
    result.first_step_seconds = time.perf_counter() - start
    times = []
    for step in range(steps):
        start = time.perf_counter()
        loss = train_step(*batches[(step + 1) % 2])
        device.synchronize()
        times.append(time.perf_counter() - start)
        result.losses.append(loss.item())
    result.gingham_step_seconds = float(np.median(times))
    if with_torch:
        _torch_side(name, device, batches, steps, result)
    return result


def _torch_side(name, device, batches, steps, result: ModelResult) -> None:
    env = torch_env(device.info)
    if env.device is None:
        result.notes.append(f"no PyTorch baseline: {env.reason}")
        return
    torch = env.torch
    torch.manual_seed(0)
    net = _torch_model(torch, name).to(env.device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    tensors = [(env.tensor(x), env.tensor(y.astype(np.int64))) for x, y in batches]
    low = PRECISIONS[result.precision]
    if low is not None:  # PyTorch's fast mixed-precision setting: autocast, channels-last
        net = net.to(memory_format=torch.channels_last)
        tensors = [(x.contiguous(memory_format=torch.channels_last), y) for x, y in tensors]
    device_type = "cuda" if env.device.startswith("cuda") else "cpu"
    autocast = torch.autocast(device_type, dtype=getattr(torch, low or "float32"),
                              enabled=low is not None)
    scaler = torch.amp.GradScaler(device_type, enabled=low == "float16")

    def step(x, y):
        with autocast:
            loss = torch.nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    step(*tensors[0])
    env.sync()
    times = []
    for i in range(steps):
        start = time.perf_counter()
        step(*tensors[(i + 1) % 2])
        env.sync()
        times.append(time.perf_counter() - start)
    result.torch_step_seconds = float(np.median(times))
    result.baseline = f"{env.label} eager" + (
        f" {result.precision} autocast channels-last" if low is not None else "")


def _torch_model(torch, name: str):
    nn = torch.nn

    def conv_bn(c_in, c_out, stride=1):
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
                             nn.BatchNorm2d(c_out), nn.ReLU())

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.body = nn.Sequential(conv_bn(c, c), conv_bn(c, c))

        def forward(self, x):
            return x + self.body(x)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(x + self.b2(self.c2(y)))

    class Scale(nn.Module):
        def forward(self, x):
            return x * 0.125

    if name == "resnet9":
        return nn.Sequential(
            conv_bn(3, 64), conv_bn(64, 128), nn.MaxPool2d(2), Residual(128),
            conv_bn(128, 256), nn.MaxPool2d(2), conv_bn(256, 512), nn.MaxPool2d(2),
            Residual(512), nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(512, 10, bias=False),
            Scale())

    class Story(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(3, 32, 2)
            self.blocks = nn.Sequential(*(Block(32) for _ in range(4)))
            self.linear = nn.Linear(32, 10)

        def forward(self, x):
            return self.linear(self.blocks(self.stem(x)).mean(dim=(2, 3)))

    return Story()


def format_result(r: ModelResult) -> str:
    lines = [
        f"{r.name} on {r.device}, batch {r.batch}, {r.precision}, {r.steps_per_epoch} steps "
        "per epoch "
        "(seconds per epoch extrapolated from the median step)",
        f"  gingham: {r.gingham_step_seconds * 1e3:9.1f} ms/step  {r.gingham_epoch:8.1f} s/epoch"
        f"   first step (trace + compile + run): {r.first_step_seconds:.1f} s",
    ]
    if r.torch_step_seconds is not None:
        lines.append(f"  {r.baseline}: {r.torch_step_seconds * 1e3:9.1f} ms/step  "
                     f"{r.torch_epoch:8.1f} s/epoch   ratio {r.ratio:.2f}")
    lines.append(f"  first-epoch overhead: {r.first_step_seconds - r.gingham_step_seconds:.1f} s"
                 f" ({(r.first_step_seconds - r.gingham_step_seconds) / max(r.gingham_epoch, 1e-9):.1%}"
                 " of an epoch)")
    lines.append(f"  losses: {', '.join(f'{v:.3f}' for v in r.losses)}")
    lines += [f"  note: {note}" for note in r.notes]
    return "\n".join(lines)


__all__ = ["MODELS", "PRECISIONS", "ModelResult", "run_model", "format_result"]
