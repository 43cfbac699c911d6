"""``gingham bench``: the benchmark suite's command line (``ops``, ``model``, ``onnx``, ``keras``,
``all``).

    $ gingham bench ops                          # the default device
    $ gingham bench ops --device cuda:0 --json ops.json
    $ gingham bench ops --device cpu --quick --only gemm,elementwise
    $ gingham bench ops --device cuda:0 --only 'gemm/bf16' --gemm-sizes 8192
    $ gingham bench model resnet9 --device cuda:0
    $ gingham bench model --all-devices --quick --json epoch.json --plot epoch.png
    $ gingham bench onnx resnet18 story --device cuda:0 --batch 64
    $ gingham bench onnx path/to/model.onnx --batch 8 --all-devices --json out.json
    $ gingham bench keras resnet9 --device cuda:0 --batch 512 --steps 20

Exit status: 0 when every op (model, runner) passed its golden check and ran, 1 when any was
wrong or failed (its row says which), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import numpy as np


from .keras import KERAS_MODELS
from .model import DEFAULT_MODELS, MODELS
from .ops import CONV_BATCH, DTYPES, GROUPS, BenchError, OpBench, Settings, known_pattern
from .report import format_table, machine_description, records, write_json, write_text

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
        "ops", help="GEMM, conv, pooling, batch norm, layer norm, softmax, cross-entropy, "
                    "attention, elementwise",
        description="Time GEMM (fp32 1024^2, also 4096^2 on GPUs; fp16/bf16 up to 8192^2 on "
                    "GPUs, 512^2 on CPUs), the 3x3 conv layer of a CIFAR ResNet (batch 128, "
                    "64->64 channels, 32x32, NHWC), 2x2 max and average pooling and training-"
                    "mode batch norm of its activations, layer norm, softmax, log_softmax, "
                    "cross-entropy and causal attention (16 heads of 1024 tokens on GPUs, 8 of "
                    "256 on CPUs; each forward, backward and forward+backward), and "
                    "relu(X * A + B) * C "
                    "over 2^24 floats, in fp32, fp16 and bf16 (fp32 only on CPUs unless "
                    "--dtype), each checked against PyTorch and timed beside it on the same "
                    "device, eager and through torch.compile (and NumPy for fp32 GEMM on a "
                    "CPU). ratio = baseline time / gingham time.")
    ops.add_argument("--device", metavar="ID",
                     help="device id (cpu, opencl:N, cuda:N); default: the default device")
    ops.add_argument("--json", metavar="PATH",
                     help="also write one JSON record per (op, baseline) to PATH")
    ops.add_argument("--repeat", metavar="N", type=_positive_int,
                     help="trials per measurement (median taken); default 5, 3 with --quick")
    ops.add_argument("--only", metavar="PATTERN,...", type=_patterns,
                     help="run only what these patterns select: a group "
                          f"({', '.join(GROUPS)}), part of a row id name/dtype "
                          "(conv3x3.backward/bf16) or a wildcard pattern (*/fp16); a group "
                          "runs whole (forward, backward, forward+backward, every size)")
    ops.add_argument("--dtype", metavar="DTYPE,...", type=_dtypes,
                     help="element types: fp32, fp16, bf16 or all (default: all on GPUs, fp32 "
                          "on CPUs, where PyTorch's half kernels are slow)")
    ops.add_argument("--torch-compile", choices=("auto", "on", "off"), default="auto",
                     help="time torch.compile beside PyTorch eager: auto (default) = where "
                          "PyTorch runs on a GPU (inductor's CPU compile takes seconds per "
                          "op)")
    ops.add_argument("--gemm-sizes", metavar="N,...", type=_sizes,
                     help="GEMM sizes (M = N = K) instead of the device class's")
    ops.add_argument("--quick", action="store_true",
                     help="shorter measurements and smaller batches")
    # Tests shrink every problem with this; numbers from a scaled run are not benchmarks.
    ops.add_argument("--scale", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    ops.set_defaults(func=ops_command)
    model = benches.add_parser(
        "model", help="seconds per epoch of a training step beside PyTorch",
        description="Train networks for a few steps with gingham.jit and with PyTorch (eager, "
                    "and torch.compile where it runs) on the same device, synthetic data of the "
                    "real shape, and report seconds per epoch extrapolated from the median "
                    "timed step, ms/step, the first step (trace + compile + run) and an "
                    "estimate of the first epoch. With --all-devices: every device gingham "
                    "sees, and PyTorch once per torch device.")
    model.add_argument("models", nargs="*", metavar="MODEL",
                       help=f"models to train: {', '.join(MODELS)}, or all (the default: "
                            f"{', '.join(DEFAULT_MODELS)})")
    _device_arguments(model, "and PyTorch on every torch device they map to")
    model.add_argument("--batch", type=_positive_int, help="batch size (default: the model's)")
    model.add_argument("--steps", type=_positive_int,
                       help="timed steps after the first and one warm-up (default 5, 2 with "
                            "--quick)")
    model.add_argument("--quick", action="store_true",
                       help="2 timed steps: an affordable first look")
    model.add_argument("--torch-compile", choices=("auto", "on", "off"), default="auto",
                       help="also train the model under torch.compile: auto (default) = on "
                            "GPUs only (on a CPU inductor compiles a training step for minutes)")
    model.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                       help="fp32, or mixed precision under gingham.autocast / torch.autocast "
                            "(channels-last) in bfloat16 or float16 (default fp32)")
    model.add_argument("--layout", choices=["auto", "nchw", "nhwc"], default="auto",
                       help="gingham's image layout: auto (default) = channels-last (nhwc) "
                            "where the PyTorch baseline is channels-last (mixed precision) and "
                            "on the cpu device, nchw otherwise")
    model.add_argument("--no-torch", action="store_true", help="skip the PyTorch baselines")
    model.add_argument("--json", metavar="PATH", help="also write one record per run to PATH")
    model.add_argument("--plot", metavar="PATH",
                       help="also draw seconds per epoch as a PNG bar chart (needs matplotlib: "
                            "pip install 'gingham[bench]')")
    model.set_defaults(func=model_command)
    onnx = benches.add_parser(
        "onnx", help="inference of ONNX models through gingham.onnx beside onnxruntime and "
                     "PyTorch",
        description="Run ONNX models through gingham.onnx on each device beside onnxruntime "
                    "(the provider for that hardware) and PyTorch eager (no_grad), the same "
                    "inputs already on the device: ms per batch (median of timed runs), the "
                    "first call (trace + compile + run) apart, and a golden check of every "
                    "runner's outputs against onnxruntime on the CPU. A MODEL is one of the "
                    "model benchmark's networks exported from PyTorch in memory, or a path to "
                    "an .onnx file (its symbolic batch dims take --batch). ratio = baseline "
                    "time / gingham time.")
    onnx.add_argument("models", nargs="*", metavar="MODEL",
                      help=f"{', '.join(MODELS)}, all (the default: "
                           f"{', '.join(DEFAULT_MODELS)}), or a path to an .onnx file")
    _device_arguments(onnx, "onnxruntime and PyTorch once per hardware")
    onnx.add_argument("--batch", type=_positive_int,
                      help="inputs per batch (default: a named model's training batch, at "
                           "most 64; 1 for a file's symbolic batch)")
    onnx.add_argument("--repeat", metavar="N", type=_positive_int,
                      help="trials per measurement (median taken); default 5, 3 with --quick")
    onnx.add_argument("--quick", action="store_true",
                      help="shorter measurements: an affordable first look")
    onnx.add_argument("--no-torch", action="store_true", help="skip the PyTorch baseline")
    onnx.add_argument("--no-onnxruntime", action="store_true",
                      help="skip onnxruntime (the golden check then uses PyTorch)")
    onnx.add_argument("--json", metavar="PATH", help="also write one record per run to PATH")
    onnx.set_defaults(func=onnx_command)
    keras = benches.add_parser(
        "keras", help="Keras model.fit on gingham's Keras backend beside Keras on PyTorch",
        description="Train the same Keras model (bench model's networks in Keras layers, "
                    "channels-last) with model.fit on gingham's Keras backend on each device "
                    "and on Keras' PyTorch backend on the same hardware, from the same initial "
                    "weights on the same synthetic data (each backend in a process of its "
                    "own), and report ms/step, seconds per epoch extrapolated to the "
                    "model's epoch (50,000 images for the CIFAR-sized ones), the first "
                    "epoch and the losses (the first losses must agree). ratio = PyTorch "
                    "backend's time / gingham's. Needs keras: pip install 'gingham[keras]'.")
    keras.add_argument("models", nargs="*", metavar="MODEL",
                       help="models to train: story, resnet9, resnet18, digits, and Keras' "
                            "applications resnet50, vgg16, densenet121, mobilenet_v2 (32x32 "
                            "images); all; default: story, resnet9")
    _device_arguments(keras, "and Keras on PyTorch once per torch device they map to")
    keras.add_argument("--batch", type=_positive_int, help="batch size (default: the model's)")
    keras.add_argument("--steps", type=_positive_int, default=5,
                       help="batches per measured epoch (default 5)")
    keras.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                       help="Keras' dtype policy: fp32, or mixed_bfloat16 / mixed_float16")
    keras.add_argument("--no-torch", action="store_true",
                       help="skip Keras on PyTorch (no ratio, no loss check)")
    keras.add_argument("--json", metavar="PATH", help="also write one record per run to PATH")
    keras.set_defaults(func=keras_command)
    everything = benches.add_parser(
        "all", help="the whole picture in one command: ops on every device, then the models",
        description="Run `bench ops` on every device gingham sees (or --devices), then `bench "
                    "model --all-devices`, `bench onnx --all-devices` (inference of the "
                    "same models through the ONNX frontend, when onnx is installed) and `bench "
                    "keras --all-devices` (the models in Keras, when keras is installed), "
                    "writing "
                    "each table (.txt), its JSON records and the seconds-per-epoch chart "
                    "(.png, when matplotlib is installed) into --out.")
    everything.add_argument("--out", metavar="DIR", default="bench-results",
                            help="directory for the tables, records and chart "
                                 "(default: bench-results)")
    everything.add_argument("--devices", metavar="ID,...",
                            help="devices for the op benchmarks (default: every compiled one)")
    everything.add_argument("--models", metavar="MODEL,...",
                            help=f"models to train and to run through the ONNX frontend "
                                 f"(default: {','.join(DEFAULT_MODELS)}); none: skip the "
                                 "model and ONNX benchmarks")
    everything.add_argument("--quick", action="store_true",
                            help="--quick for both: shorter measurements, smaller op batches, "
                                 "2 timed training steps")
    everything.add_argument("--batch", type=_positive_int,
                            help="training and inference batch for every model "
                                 "(default: each model's)")
    everything.add_argument("--torch-compile", choices=("auto", "on", "off"), default="auto",
                            help="torch.compile baselines (default auto: on GPUs)")
    everything.add_argument("--only", metavar="PATTERN,...", type=_patterns,
                            help="op benchmarks to run (as bench ops --only)")
    everything.add_argument("--scale", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    everything.set_defaults(func=all_command)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _device_arguments(parser: argparse.ArgumentParser, baselines: str) -> None:
    """``--device ID`` or ``--all-devices`` (``baselines``: what runs beside each device)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--device", metavar="ID", help="device id; default: the default device")
    where.add_argument("--all-devices", action="store_true",
                       help="every device gingham can see (cpu, opencl:N, cuda:N; not "
                            f"reference), {baselines}")


def _chosen_devices(args: argparse.Namespace) -> list[str]:
    """The devices ``--device ID`` or ``--all-devices`` (every compiled one) chose."""
    from gingham.devices import default_device_id, list_devices

    if args.all_devices:
        return [d.id for d in list_devices() if d.info.dialect is not None]
    return [args.device or default_device_id()]


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


def _patterns(text: str) -> tuple[str, ...]:
    patterns = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in patterns if not known_pattern(p)]
    if unknown or not patterns:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or repr(text)} selects no benchmark; use a group "
            f"({', '.join(GROUPS)}), part of a row id such as conv3x3.backward/bf16, or a "
            "wildcard pattern such as '*/fp16'")
    return patterns


def _dtypes(text: str) -> tuple[str, ...]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return tuple(DTYPES.values())
    chosen = []
    for name in names:
        long = DTYPES.get(name, name)
        if long not in DTYPES.values():
            raise argparse.ArgumentTypeError(
                f"unknown dtype {name!r}; choose from {', '.join(DTYPES)} or all")
        chosen.append(long)
    if not chosen:
        raise argparse.ArgumentTypeError("no dtype given")
    return tuple(dict.fromkeys(chosen))


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(n) for n in text.split(",") if n.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected positive sizes such as 1024,8192, "
                                         f"not {text!r}")
    return sizes


def _header(bench: OpBench, settings: Settings, busy: int | None) -> list[str]:
    info = bench.device.info
    torch = bench.torch
    groups = {group for group, _ in bench.cases()}
    lines = [f"gingham bench ops on {info.id}: {info.name} ({info.vendor}, {info.kind}, "
             f"{info.compute_units} compute units)"]
    lines.append(f"dtypes: {', '.join(bench.dtypes)}")
    if torch.device is not None:
        lines.append(f"baseline: {torch.label}")
        if bench.compiled:
            lines.append("baseline: torch.compile (inductor, default mode, fullgraph, static "
                         "shapes); its compile time is column 'compile', not in its times")
        else:
            why = "--torch-compile off" if settings.torch_compile == "off" else \
                "off on a CPU by default (--torch-compile on to add it)"
            lines.append(f"baseline: torch.compile not run ({why})")
    else:
        lines.append(f"baseline: no PyTorch on this device ({torch.reason}); checked against "
                     "host references (NumPy, the reference interpreter)")
    if torch.device is not None and "conv" in groups:
        lines.append("baseline: conv in torch with NCHW tensors (torch) and channels-last "
                     "ones (-cl, the bytes of gingham's NHWC)")
    if bench.on_cpu and "gemm" in groups and "float32" in bench.dtypes:
        lines.append(f"baseline: numpy {np.__version__} np.matmul (fp32)")
    lines.append(f"timing: median of up to {settings.trials} trials, about "
                 f"{settings.budget:g} s per measurement after one warm-up run")
    if settings.quick:
        lines.append(f"--quick: shorter measurements, batch {bench.sizes.batch} "
                     f"(not {CONV_BATCH})")
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
        "torch_compile": bench.compiled,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average": _load_average(),
        "competing_processes": busy,  # at the start
        "environment": {name: os.environ.get(name) for name in _OPENBLAS_VARIABLES},
    }


def ops_command(args: argparse.Namespace) -> int:
    from gingham.devices import default_device_id, get_device

    device_id = args.device or default_device_id()
    settings = Settings(device_id=device_id, quick=args.quick, repeat=args.repeat,
                        only=args.only or (), scale=args.scale, dtypes=args.dtype,
                        torch_compile=args.torch_compile, gemm=args.gemm_sizes)
    bench = OpBench(settings, get_device(device_id))
    busy = _competing_processes()
    print("\n".join(_header(bench, settings, busy)), flush=True)
    results = bench.run()
    print()
    print(format_table(results, bench.device.id))
    if args.json:
        write_json(args.json, records(results, _context(bench, settings, busy)))
        print(f"\nwrote {args.json}")
    failed = [f"{r.name} {r.dtype} {r.shape}" for r in results if r.status != "ok"]
    if failed:
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def model_command(args: argparse.Namespace) -> int:
    """``gingham bench model [MODEL ...] [--device ID | --all-devices]``."""
    from gingham import __version__

    from .model import ModelSettings, bench_models, format_runs, plot
    from .model import records as model_records

    names = list(DEFAULT_MODELS) if not args.models or args.models == ["all"] else args.models
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"gingham bench model: unknown model {', '.join(unknown)}; choose from "
              f"{', '.join(MODELS)} or all", file=sys.stderr)
        return 2
    if args.plot:
        _require_matplotlib()  # before minutes of training, not after
    devices = _chosen_devices(args)
    overrides = {"batch": args.batch, "torch": not args.no_torch,
                 "torch_compile": args.torch_compile, "precision": args.precision,
                 "layout": args.layout}
    if args.steps:
        overrides["steps"] = args.steps
    settings = ModelSettings.quick(**overrides) if args.quick else ModelSettings(**overrides)
    busy = _competing_processes()
    print(f"gingham bench model: {', '.join(names)} on {', '.join(devices)}; "
          f"{settings.steps} timed steps after the first and {settings.warmup} warm-up, "
          f"precision {settings.precision}, gingham layout {settings.layout}; PyTorch: "
          f"{'off' if not settings.torch else 'eager, torch.compile ' + settings.torch_compile}",
          flush=True)
    if busy:
        print(f"warning: {busy} other processes running at the start: CPU timings are noisy")
    runs = bench_models(names, devices, settings, log=sys.stderr)
    print()
    print(format_runs(runs))
    if args.json:
        context = {"machine": machine_description(), "gingham_version": __version__,
                   "numpy_version": np.__version__, "torch_version": _torch_version(),
                   "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
                       timespec="seconds"),
                   "load_average": _load_average(), "competing_processes": busy,
                   "quick": args.quick}
        write_json(args.json, model_records(runs, context))
        print(f"\nwrote {args.json}")
    if args.plot:
        plot(runs, args.plot, f"gingham bench model on {machine_description()}")
        print(f"wrote {args.plot}")
    return 1 if any(run.error for run in runs) else 0


def onnx_command(args: argparse.Namespace) -> int:
    """``gingham bench onnx [MODEL | PATH ...] [--device ID | --all-devices]``."""
    from gingham import __version__

    from .onnx import OnnxSettings, bench_onnx, file_case, format_runs, named_case
    from .onnx import onnxruntime_module
    from .onnx import records as onnx_records

    names = list(DEFAULT_MODELS) if not args.models or args.models == ["all"] else args.models
    try:  # a bad name, file or dim is a usage error, found before anything runs
        cases = [named_case(name, args.batch) if name in MODELS else file_case(name, args.batch)
                 for name in names]
        twice = sorted({c.name for c in cases if [d.name for d in cases].count(c.name) > 1})
        if twice:
            raise BenchError(f"two models named {', '.join(twice)}: give each model once, "
                             "and .onnx files of different names")
    except BenchError as exc:
        print(f"gingham bench onnx: {exc}", file=sys.stderr)
        return 2
    devices = _chosen_devices(args)
    settings = OnnxSettings(quick=args.quick, repeat=args.repeat, torch=not args.no_torch,
                            onnxruntime=not args.no_onnxruntime)
    ort = onnxruntime_module()
    busy = _competing_processes()
    baselines = []
    if settings.onnxruntime:
        baselines.append("no onnxruntime" if ort is None else f"onnxruntime {ort.__version__}")
    if settings.torch:
        version = _torch_version()
        baselines.append(f"torch {version} eager" if version else "no PyTorch")
    print(f"gingham bench onnx: {', '.join(f'{c.name} (batch {c.batch})' for c in cases)} on "
          f"{', '.join(devices)}; median of up to {settings.trials} trials, about "
          f"{settings.budget:g} s per measurement; baselines: "
          f"{', '.join(baselines) or 'none'}",
          flush=True)
    if busy:
        print(f"warning: {busy} other processes running at the start: CPU timings are noisy")
    runs, notes = bench_onnx(cases, devices, settings, log=sys.stderr)
    print()
    print(format_runs(runs, notes))
    if args.json:
        context = {"machine": machine_description(), "gingham_version": __version__,
                   "numpy_version": np.__version__, "torch_version": _torch_version(),
                   "onnxruntime_version": None if ort is None else ort.__version__,
                   "onnx_version": _onnx_version(),
                   "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
                       timespec="seconds"),
                   "load_average": _load_average(), "competing_processes": busy,
                   "quick": args.quick}
        write_json(args.json, onnx_records(runs, cases, context))
        print(f"\nwrote {args.json}")
    return 1 if any(run.status in ("wrong", "error") for run in runs) else 0


def keras_command(args: argparse.Namespace) -> int:
    """``gingham bench keras [MODEL ...] [--device ID | --all-devices]``."""
    import importlib.util

    from .keras import DEFAULT_KERAS_MODELS, KerasSettings, bench_keras
    from .keras import format_runs as keras_runs
    from .keras import records as keras_records

    if importlib.util.find_spec("keras") is None:
        print("gingham bench keras: Keras is not installed; pip install 'gingham[keras]'",
              file=sys.stderr)
        return 2
    names = list(DEFAULT_KERAS_MODELS) if not args.models else (
        list(KERAS_MODELS) if args.models == ["all"] else args.models)
    unknown = [name for name in names if name not in KERAS_MODELS]
    if unknown:
        print(f"gingham bench keras: unknown model(s) {', '.join(unknown)}; choose from "
              f"{', '.join(KERAS_MODELS)}", file=sys.stderr)
        return 2
    devices = _chosen_devices(args)
    settings = KerasSettings(steps=args.steps, batch=args.batch, torch=not args.no_torch,
                             precision=args.precision)
    print(f"gingham bench keras: {', '.join(names)} on {', '.join(devices)}; {settings.steps} "
          f"steps x 2 epochs per runner, precision {settings.precision}", flush=True)
    runs = bench_keras(names, devices, settings, log=sys.stderr)
    print()
    print(keras_runs(runs))
    if args.json:
        write_json(args.json, [{"machine": machine_description(), **record}
                               for record in keras_records(runs)])
        print(f"\nwrote {args.json}")
    return 1 if any(run.error is not None for run in runs) else 0


def _onnx_version() -> str | None:
    try:
        import onnx
    except ImportError:
        return None
    return str(onnx.__version__)


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BenchError("--plot needs matplotlib, which is not installed: pip install "
                         "'gingham[bench]' (the bench extra)") from None


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def all_command(args: argparse.Namespace) -> int:
    """``gingham bench all``: ``bench ops`` per device, then ``bench model --all-devices``;
    each part's printed table is also saved (``ops-cuda_0.txt``) beside its JSON records."""
    import contextlib
    import importlib.util
    import io
    from pathlib import Path

    from gingham.cli import build_parser
    from gingham.devices import list_devices

    out = Path(args.out)
    if args.devices:
        devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    else:
        devices = [d.id for d in list_devices() if d.info.dialect is not None]
    models = DEFAULT_MODELS if args.models is None else tuple(
        m.strip() for m in args.models.split(",") if m.strip() and m.strip() != "none")
    common = ["--torch-compile", args.torch_compile] + (["--quick"] if args.quick else [])
    ops_args = ["--scale", str(args.scale)] + (["--only", ",".join(args.only)] if args.only
                                               else [])
    parts = [(f"ops-{device.replace(':', '_')}",
              ["bench", "ops", "--device", device, *common, *ops_args]) for device in devices]
    if models:
        model_args = ["bench", "model", *models, "--all-devices", *common]
        model_args += ["--batch", str(args.batch)] if args.batch else []
        try:
            import matplotlib  # noqa: F401
            model_args += ["--plot", str(out / "models.png")]
        except ImportError:
            print("note: matplotlib is not installed (pip install 'gingham[bench]'): no chart")
        parts.append(("models", model_args))
        # Inference through the ONNX frontend: about 30 s for the three default models on a
        # 2-core CPU (the `cpu` device), 1-2 minutes per OpenCL device (its compile): cheap
        # beside the training runs above, so it is part of the whole picture.
        if importlib.util.find_spec("onnx") is not None:
            onnx_args = ["bench", "onnx", *models, "--all-devices"]
            onnx_args += (["--quick"] if args.quick else []) + \
                (["--batch", str(args.batch)] if args.batch else [])
            parts.append(("onnx", onnx_args))
        else:
            print("note: onnx is not installed (pip install 'gingham[onnx]'): no ONNX "
                  "inference benchmark")
        # The same models in Keras, on gingham's Keras backend beside Keras on PyTorch.
        keras_models = [m for m in models if m in KERAS_MODELS]
        if keras_models and importlib.util.find_spec("keras") is not None:
            keras_args = ["bench", "keras", *keras_models, "--all-devices",
                          "--steps", "2" if args.quick else "5"]
            keras_args += ["--batch", str(args.batch)] if args.batch else []
            parts.append(("keras", keras_args))
        elif keras_models:
            print("note: keras is not installed (pip install 'gingham[keras]'): no Keras "
                  "benchmark")
    parser = build_parser()
    status = 0
    for name, argv in parts:
        print(f"\n==== gingham {' '.join(argv)}", flush=True)
        part = parser.parse_args([*argv, "--json", str(out / f"{name}.json")])
        text = io.StringIO()
        with contextlib.redirect_stdout(_Tee(sys.stdout, text)):
            try:
                code = part.func(part)
            except Exception as exc:  # noqa: BLE001 - one part failing must not stop the rest
                print(f"gingham bench {argv[1]} failed: {type(exc).__name__}: {exc}")
                code = 1
        write_text(out / f"{name}.txt", text.getvalue())
        status = max(status, code)
    print(f"\nwrote {out}/: " + ", ".join(f"{name}.txt/.json" for name, _ in parts))
    return status


class _Tee:
    """A stream writing to several streams (the terminal and the saved table)."""

    def __init__(self, *streams) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


__all__ = ["register", "ops_command", "model_command", "onnx_command", "keras_command",
           "all_command"]
