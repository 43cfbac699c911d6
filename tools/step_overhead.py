"""Where a replayed training step's time goes besides its kernels: the host's share of a
``gingham.jit`` step of a benchmark model, the replay of its executable alone, and the
kernels' own time on the device's clock.

    python3 tools/step_overhead.py resnet9 --device cuda:0 [--precision bf16] [--batch 512]
        [--layout nhwc] [--profile] [--kernels N]

After the first step and two warm-up steps (the same model, optimiser and batches as
``gingham bench model``), the median of ``--steps`` steps of each:

* ``step``: ``step(x, y)`` then a synchronisation (what ``gingham bench model`` times);
* ``host``: the same call's return alone (the host's work before the device is left alone:
  binding, output buffers, the launch or the graph launch);
* ``replay``: ``executable.run`` on the same buffers again, synchronised (the launches with
  no ``jit`` bookkeeping);
* ``kernels``: every kernel timed back to back on the device's clock
  (``Executable.kernel_times``, what ``GINGHAM_DEBUG=2`` sums; the best of three).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gingham  # noqa: E402
from gingham.bench import model as bench_model  # noqa: E402
from gingham.bench.timing import median_synced  # noqa: E402
from gingham.devices import get_device  # noqa: E402

PRECISIONS = bench_model.PRECISIONS  # --precision -> the step's autocast dtype


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(bench_model.MODELS))
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default="bf16")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--layout", choices=["auto", *bench_model.LAYOUTS], default="auto",
                        help="the model's data_format (auto: as gingham bench model picks it)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--profile", action="store_true",
                        help="also print a profile of the host's share of --steps steps")
    parser.add_argument("--kernels", type=int, default=0, metavar="N",
                        help="also print the kernels' time by kind of schedule and the N "
                             "slowest kernels with their schedules")
    args = parser.parse_args()
    spec = bench_model.MODELS[args.model]
    device = get_device(args.device)
    settings = bench_model.ModelSettings(precision=args.precision, layout=args.layout)
    layout = bench_model.layout_of(settings, device.info.kind)
    batch = args.batch or spec.batch
    step = spec.gingham_step(args.device, layout, args.precision)
    batches = [(gingham.tensor(x, device=args.device), gingham.tensor(y, device=args.device))
               for x, y in bench_model.synthetic_batches(spec, batch, layout)]
    counter = iter(range(1 << 30))

    def one_step():
        return step(*batches[next(counter) % 2])

    for _ in range(3):
        one_step().item()
    stepped = median_synced(one_step, device.synchronize, args.steps, warmup=0) * 1e3
    hosts = []
    for _ in range(args.steps):
        device.synchronize()
        start = time.perf_counter()
        one_step()
        hosts.append(time.perf_counter() - start)
    device.synchronize()
    host = statistics.median(hosts) * 1e3
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        for _ in range(args.steps):
            device.synchronize()
            profile.enable()
            one_step()
            profile.disable()
        device.synchronize()
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    (compiled,) = [value for value in _compiled_of(step)]
    exe = compiled.executable
    arguments = list(batches[0])
    buffers = []
    for slot, leaf, grad_of in compiled._bindings:  # noqa: SLF001 - a measuring tool
        value = leaf if slot < 0 else arguments[slot]
        # A leaf's gradient carried between steps: the one it holds now (as jit's replay).
        buffers.append((value if grad_of is None else grad_of.grad)._buffer)
    replay = median_synced(lambda: exe.run(buffers), device.synchronize, args.steps) * 1e3
    times = min((exe.kernel_times(buffers) for _ in range(3)), key=sum)
    kernels = sum(times) * 1e3
    if args.kernels:
        _print_kernels(exe.launches, times, args.kernels)
    print(f"{args.model} {args.precision} batch {batch} on {args.device}: "
          f"{len(exe.launches)} kernels, traced {step.traces} times")
    print(f"  step    {stepped:8.3f} ms  (call + synchronise, median of {args.steps})")
    print(f"  host    {host:8.3f} ms  (the call's return: jit bookkeeping and the launch)")
    print(f"  replay  {replay:8.3f} ms  (executable.run on the same buffers, synchronised)")
    print(f"  kernels {kernels:8.3f} ms  (each kernel back to back, "
          f"{'device' if device.times_on_device else 'host'} clock)")


def _print_kernels(launches, times: list[float], top: int) -> None:
    """The kernels' time by kind of schedule (its text up to the shapes) and the
    ``top`` slowest launches with their schedules."""
    kinds: dict[str, list[float]] = {}
    for launch, seconds in zip(launches, times):
        kind = re.split(r":|,| over | \(", launch.schedule)[0].strip() or "?"
        kinds.setdefault(kind, []).append(seconds)
    print("kernels by kind (count, ms):")
    for kind, spent in sorted(kinds.items(), key=lambda item: -sum(item[1])):
        print(f"  {len(spent):4d} {sum(spent) * 1e3:8.3f}  {kind}")
    print(f"the {top} slowest:")
    for launch, seconds in sorted(zip(launches, times), key=lambda item: -item[1])[:top]:
        rate = f" {launch.flops / seconds / 1e12:5.1f} TFLOP/s" if launch.flops else ""
        print(f"  {seconds * 1e3:7.3f} ms{rate}  {launch.name}: {launch.schedule[:160]}")


def _compiled_of(step):
    """The traced signatures' compiled programs of a ``gingham.jit`` function (a signature
    keeps a list of them: one per state of the ``.grad`` it carries between steps)."""
    for cell in step.__closure__ or ():
        value = cell.cell_contents
        if isinstance(value, dict):
            for programs in value.values():
                yield from programs


if __name__ == "__main__":
    main()
