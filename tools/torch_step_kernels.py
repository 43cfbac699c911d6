"""PyTorch's kernels of one training step of a benchmark model, from its profiler: what the
baseline of ``gingham bench model`` spends per kernel, beside gingham's own
``GINGHAM_DEBUG=2`` breakdown of the same step.

    python3 tools/torch_step_kernels.py resnet9 [--precision bf16] [--batch 512] [--top 40]
    python3 tools/torch_step_kernels.py story --device cpu --precision fp32 --batch 16

The step is ``gingham.bench.model.run_torch``'s (SGD with Nesterov momentum, weight decay,
cross-entropy; under ``--precision`` PyTorch's autocast with channels-last tensors). Three
warm-up steps, then one profiled step; each CUDA kernel's device time, grouped by kernel
name and sorted by total, and the sum of every kernel's time beside the step's wall time.
With ``--device cpu`` (fp32 only) the operators' self CPU time instead, over
``torch.get_num_threads()`` threads.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np
import torch

from gingham.bench.baselines import configure_cuda
from gingham.bench.model import torch_model

SHAPES = {"resnet9": (3, 32, 32), "resnet18": (3, 32, 32), "story": (3, 100, 100)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(SHAPES))
    parser.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="bf16")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    if args.device == "cpu":
        if args.precision != "fp32":
            parser.error("--device cpu profiles the fp32 step (the CPU baseline of the bench)")
        cpu_step(args)
        return
    configure_cuda(torch)  # the bench baseline's: TF32 off, cuDNN's fastest algorithms
    low = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    net, x, y, optimizer = _model_and_batch(args, "cuda", channels_last=low is not None)
    scaler = torch.amp.GradScaler("cuda", enabled=low == torch.float16)

    def step() -> None:
        with torch.autocast("cuda", dtype=low or torch.float32, enabled=low is not None):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / 10
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        step()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = collections.defaultdict(list)
    for event in profile.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name].append(event.device_time * 1e-3)  # microseconds -> ms
    rows = sorted(totals.items(), key=lambda item: -sum(item[1]))
    every = sum(sum(times) for times in totals.values())
    launches = sum(len(times) for times in totals.values())
    print(f"{'ms':>8} {'count':>5}  kernel")
    for name, times in rows[:args.top]:
        print(f"{sum(times):8.3f} {len(times):5d}  {name[:150]}")
    print(f"{args.model} {args.precision} batch {args.batch}: {launches} kernels, "
          f"{every:.3f} ms of kernels; a step takes {wall * 1e3:.3f} ms (10 steps' mean)")


def _model_and_batch(args: argparse.Namespace, device: str, channels_last: bool = False):
    """The bench's network, one synthetic batch and its optimiser, on ``device``."""
    torch.manual_seed(0)
    net = torch_model(torch, args.model).to(device)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((args.batch, *SHAPES[args.model]), np.float32))
    x, y = x.to(device), torch.tensor(rng.integers(0, 10, args.batch)).to(device)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    return net, x, y, optimizer


def cpu_step(args: argparse.Namespace) -> None:
    """The fp32 step on the CPU: each operator's self time in one profiled step."""
    net, x, y, optimizer = _model_and_batch(args, "cpu")

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(3):
        step()
    wall = (time.perf_counter() - start) / 3
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        step()
    rows = sorted(profile.key_averages(), key=lambda row: -row.self_cpu_time_total)
    every = sum(row.self_cpu_time_total for row in rows) * 1e-3
    print(f"{'ms':>8} {'count':>5}  operator (self CPU time)")
    for row in rows[:args.top]:
        print(f"{row.self_cpu_time_total * 1e-3:8.3f} {row.count:5d}  {row.key[:150]}")
    print(f"{args.model} fp32 batch {args.batch} on {torch.get_num_threads()} threads: "
          f"{every:.3f} ms of operators; a step takes {wall * 1e3:.3f} ms (3 steps' mean)")


if __name__ == "__main__":
    main()
