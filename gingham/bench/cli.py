"""``gingham bench``: the benchmark suite's command line (``gingham bench ops`` so far).

    $ gingham bench ops                          # the default device
    $ gingham bench ops --device cuda:0 --json ops.json
    $ gingham bench ops --device cpu --quick --only gemm,elementwise

Exit status: 0 when every op passed its golden check and ran, 1 when any op was wrong or
failed (its row says which), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import numpy as np


from .ops import CONV_BATCH, GROUPS, OpBench, Settings
from .report import format_table, machine_description, records, write_json

# OpenBLAS reads these when NumPy loads it; set, they halve np.matmul on this project's CI
# machine, so the NumPy baseline is only fair without them.
_OPENBLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``gingham bench`` (with its ``ops`` subcommand) to the top-level parser."""
    parser = subparsers.add_parser(
        "bench", help="benchmark gingham against PyTorch / NumPy on one device",
        description="Benchmarks of gingham's kernels beside PyTorch (and NumPy) on the same "
                    "device, in the same run, each checked against the baseline's output "
                    "before it is timed.")
    parser.set_defaults(func=lambda args: _help(parser))
    benches = parser.add_subparsers(dest="bench", metavar="BENCH")
    ops = benches.add_parser(
        "ops", help="GEMM, a ResNet 3x3 conv layer (forward, backward), an elementwise chain",
        description="Time fp32 GEMM (1024^2; also 4096^2 on GPUs), the 3x3 conv layer of a "
                    "CIFAR ResNet (batch 128, 64->64 channels, 32x32, NHWC) forward and "
                    "backward, and relu(X * A + B) * C over 2^24 floats, each beside PyTorch "
                    "on the same device (and NumPy for GEMM on a CPU). ratio = baseline time / "
                    "gingham time.")
    ops.add_argument("--device", metavar="ID",
                     help="device id (cpu, opencl:N, cuda:N); default: the default device")
    ops.add_argument("--json", metavar="PATH",
                     help="also write one JSON record per (op, baseline) to PATH")
    ops.add_argument("--repeat", metavar="N", type=_positive_int,
                     help="trials per measurement (median taken); default 5, 3 with --quick")
    ops.add_argument("--only", metavar="NAME,...", type=_groups,
                     help=f"run only these benchmarks: {', '.join(GROUPS)}")
    ops.add_argument("--quick", action="store_true",
                     help="shorter measurements and a smaller conv batch")
    # Tests shrink every problem with this; numbers from a scaled run are not benchmarks.
    ops.add_argument("--scale", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    ops.set_defaults(func=ops_command)
    model = benches.add_parser(
        "model", help="seconds per epoch of a training step beside PyTorch eager",
        description="Train a network for a few steps with gingham.jit and with PyTorch eager on "
                    "the same device (synthetic data of the real shape, fp32) and report "
                    "seconds per epoch extrapolated from the median step, and the first step's "
                    "trace + compile overhead.")
    model.add_argument("name", choices=["resnet9", "story"])
    model.add_argument("--device", metavar="ID", help="device id; default: the default device")
    model.add_argument("--batch", type=_positive_int, help="batch size (default: the model's)")
    model.add_argument("--steps", type=_positive_int, default=5, help="timed steps (default 5)")
    model.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                       help="fp32, or mixed precision under gingham.autocast / torch.autocast "
                       "(channels-last) in bfloat16 or float16 (default fp32)")
    model.add_argument("--no-torch", action="store_true", help="skip the PyTorch baseline")
    model.add_argument("--json", metavar="PATH", help="also write the record to PATH")
    model.set_defaults(func=model_command)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return value


def _groups(text: str) -> tuple[str, ...]:
    names = tuple(name.strip().lower() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in GROUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {', '.join(unknown) or repr(text)}; choose from "
            f"{', '.join(GROUPS)}")
    return names


def _header(bench: OpBench, settings: Settings, busy: int | None) -> list[str]:
    info = bench.device.info
    torch = bench.torch
    lines = [f"gingham bench ops on {info.id}: {info.name} ({info.vendor}, {info.kind}, "
             f"{info.compute_units} compute units)"]
    if torch.device is not None:
        lines.append(f"baseline: {torch.label}")
    else:
        lines.append(f"baseline: no PyTorch on this device ({torch.reason}); checked against "
                     "NumPy on the host")
    if torch.device is not None and "conv" in settings.only:
        lines.append("baseline: conv in torch with NCHW tensors (torch) and channels-last "
                     "ones (torch-cl, the bytes of gingham's NHWC)")
    if bench.on_cpu and "gemm" in settings.only:
        lines.append(f"baseline: numpy {np.__version__} np.matmul")
    lines.append(f"timing: median of up to {settings.trials} trials, about "
                 f"{settings.budget:g} s per measurement after one warm-up run")
    if settings.quick:
        smaller = (f", conv batch {bench.sizes.conv_batch} (not {CONV_BATCH})"
                   if "conv" in settings.only else "")
        lines.append(f"--quick: shorter measurements{smaller}")
    if settings.scale != 1.0:
        lines.append(f"--scale {settings.scale:g}: every problem shrunk; not benchmark numbers")
    if info.kind == "cpu" and busy:
        lines.append(f"warning: {busy} other process{'es' if busy > 1 else ''} running on "
                     f"{os.cpu_count()} CPUs at the start: they compete with the timed runs, "
                     "so CPU timings are noisy")
    set_variables = [f"{name}={os.environ[name]}" for name in _OPENBLAS_VARIABLES
                     if name in os.environ]
    if "OPENBLAS_CORETYPE" in os.environ:
        unset = " ".join(f"-u {name}" for name in _OPENBLAS_VARIABLES)
        lines.append(f"warning: {' '.join(set_variables)} set: this slows NumPy's OpenBLAS "
                     f"matmul; for a fair NumPy baseline run `env {unset} gingham bench ops "
                     "...`")
    return lines


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on every platform
        return None


def _competing_processes(samples: int = 5) -> int | None:
    """Runnable tasks other than this one, the least of a few samples (None: unknown).

    Read from /proc/loadavg's "running/total" field rather than the load average, which still
    counts a benchmark that finished a minute ago.
    """
    counts = []
    try:
        for _ in range(samples):
            with open("/proc/loadavg", encoding="ascii") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]))
            time.sleep(0.05)
    except (OSError, IndexError, ValueError):
        return None
    return max(0, min(counts) - 1)


def _context(bench: OpBench, settings: Settings, busy: int | None) -> dict:
    info = bench.device.info
    from gingham import __version__

    return {
        "device": info.id,
        "device_name": info.name,
        "device_kind": info.kind,
        "torch_version": bench.torch.version,
        "torch_device": bench.torch.device,
        "numpy_version": np.__version__,
        "gingham_version": __version__,
        "machine": machine_description(),
        "quick": settings.quick,
        "scale": settings.scale,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average": _load_average(),
        "competing_processes": busy,  # at the start
        "environment": {name: os.environ.get(name) for name in _OPENBLAS_VARIABLES},
    }


def ops_command(args: argparse.Namespace) -> int:
    from gingham.devices import default_device_id, get_device

    device_id = args.device or default_device_id()
    settings = Settings(device_id=device_id, quick=args.quick, repeat=args.repeat,
                        only=args.only or GROUPS, scale=args.scale)
    bench = OpBench(settings, get_device(device_id))
    busy = _competing_processes()
    print("\n".join(_header(bench, settings, busy)), flush=True)
    results = bench.run()
    print()
    print(format_table(results, bench.device.id))
    if args.json:
        write_json(args.json, records(results, _context(bench, settings, busy)))
        print(f"\nwrote {args.json}")
    failed = [f"{r.name} {r.shape}" for r in results if r.status != "ok"]
    if failed:
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


__all__ = ["register", "ops_command"]


def model_command(args: argparse.Namespace) -> int:
    """``gingham bench model NAME``."""
    from ..devices import default_device_id
    from .model import format_result, run_model

    device = args.device or default_device_id()
    result = run_model(args.name, device, args.batch, args.steps, not args.no_torch,
                       precision=args.precision)
    print(format_result(result))
    if args.json:
        write_json(args.json, [result.record()])
    return 0
