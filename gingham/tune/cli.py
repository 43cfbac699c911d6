"""``gingham tune``: measure the best schedules of a benchmark's kernels and store them.

    $ gingham tune ops --device cuda:0 --budget 5          # the kernels of `gingham bench ops`
    $ gingham tune ops --device cuda:0 --only gemm --dtype bf16 --gemm-sizes 4096,8192
    $ gingham tune model resnet9 --device cuda:0            # one training step's kernels
    $ gingham tune model story --device cpu --batch 4
    $ gingham tune model resnet9 --device cuda:0 --only algorithms  # each conv: Winograd?

Each tunable kernel without a database entry is searched (:mod:`gingham.tune.search`) within
``--budget`` seconds, and each float32 3x3 convolution layer of a model is timed built directly
and by Winograd (:mod:`gingham.tune.algorithms`); the winners are stored in the tuning
database, and the final programs compiled with them, so that their binaries are in the disk
cache: the benchmark run afterwards, in any process, compiles nothing and tunes nothing. A
table of untuned / tuned times closes the run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Callable

import numpy as np

from ..bench.cli import _dtypes, _sizes
from ..tile.dtypes import DTYPES
from .search import CANDIDATES, SearchResult, stats, tuning


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tune", help="tune the kernels of a benchmark on a device (stored for every later run)",
        description="Search the schedules of every tunable kernel of a benchmark by measuring "
                    "the cost model's best candidates on the device; store the fastest in the "
                    "tuning database and compile the final programs.")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    which = parser.add_subparsers(dest="target", metavar="TARGET")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--device", metavar="ID", help="device id; default: the default device")
        sub.add_argument("--budget", type=_positive_float, metavar="SECONDS",
                         help="seconds of search per kernel (default: config.tune_budget)")
        sub.add_argument("--candidates", type=int, default=CANDIDATES, metavar="N",
                         help=f"candidates of the first round per kernel (default {CANDIDATES})")
        sub.add_argument("--quiet", action="store_true", help="no progress bars")

    ops = which.add_parser("ops", help="the kernels of `gingham bench ops`")
    common(ops)
    ops.add_argument("--quick", action="store_true",
                     help="the sizes of `gingham bench ops --quick` (conv batch 32)")
    ops.add_argument("--only", metavar="NAME,...", default="gemm,conv",
                     help="gemm, conv (default both; the elementwise op has nothing to tune)")
    ops.add_argument("--dtype", metavar="DTYPE,...", type=_dtypes, default=("float32",),
                     help="element types, as `gingham bench ops --dtype`: fp32 (default), fp16, "
                          "bf16 (tensor cores on CUDA) or all")
    ops.add_argument("--gemm-sizes", metavar="N,...", type=_sizes,
                     help="GEMM sizes (M = N = K) instead of the benchmark's")
    ops.add_argument("--scale", type=_positive_float, default=1.0, help=argparse.SUPPRESS)
    ops.set_defaults(func=ops_command)

    model = which.add_parser("model", help="one jitted training step of a benchmark model")
    common(model)
    model.add_argument("name", choices=["resnet9", "resnet18", "story", "digits"])
    model.add_argument("--batch", type=int, help="batch size (default: the model's)")
    model.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32",
                       help="as `gingham bench model --precision` (default fp32)")
    model.add_argument("--layout", choices=["auto", "nchw", "nhwc"], default="auto",
                       help="as `gingham bench model --layout` (default auto)")
    model.add_argument("--only", metavar="PART,...", type=_model_parts,
                       default=("kernels", "algorithms"),
                       help="kernels (search their schedules), algorithms (time each 3x3 "
                            "convolution direct and by Winograd); default both")
    model.set_defaults(func=model_command)


def _model_parts(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in parts if p not in ("kernels", "algorithms")]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(f"{text!r}: expected kernels, algorithms or both")
    return parts


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not > 0")
    return value


# -- what gets tuned -------------------------------------------------------------------------------


def ops_programs(device, quick: bool = False, only=("gemm", "conv"), scale: float = 1.0,
                 dtypes: tuple[str, ...] = ("float32",), gemm_sizes=None
                 ) -> list[tuple[str, object, list]]:
    """(label, bound program, arrays) of the `gingham bench ops` programs, same shapes and
    dtypes as the benchmark builds them (so their kernels share keys and binaries).

        >>> ops_programs(get_device("cuda:0"), only=("gemm",), dtypes=("bfloat16",),
        ...              gemm_sizes=(8192,))[0][0]
        'gemm 8192 bfloat16'
    """
    from .. import tile
    from ..bench import ops

    sizes = ops.Sizes.for_device(device.info.kind, quick, scale, gemm_sizes)
    rng = np.random.default_rng(0)

    def normal(dtype, *shape):
        return rng.standard_normal(shape, dtype=np.float32).astype(DTYPES[dtype])

    programs = []
    for dtype in dtypes:
        if "gemm" in only:
            for n in sizes.gemm_sizes(dtype):
                a, b = normal(dtype, n, n), normal(dtype, n, n)
                programs.append((f"gemm {n} {dtype}", tile.function(ops.GEMM).bind(a, b),
                                 [a, b]))
        if "conv" in only:
            batch, size = sizes.layer_batch(dtype), ops.CONV_IMAGE
            ch, k = ops.CONV_CHANNELS, ops.CONV_KERNEL
            x, f = normal(dtype, batch, size, size, ch), normal(dtype, k, k, ch, ch)
            d = normal(dtype, batch, size, size, ch)
            fn = tile.function(ops.CONV)
            programs.append((f"conv3x3.forward N{batch} {dtype}", fn.bind(x, f), [x, f]))
            gradient = fn._gradient(fn.bind(x, f))
            programs.append((f"conv3x3.backward N{batch} {dtype}",
                             gradient.function.bind(x, f, d), [x, f, d]))
    return programs


def tune_ops(device, budget: float | None = None, quick: bool = False, only=("gemm", "conv"),
             scale: float = 1.0, candidates: int = CANDIDATES, progress: bool = True,
             dtypes: tuple[str, ...] = ("float32",), gemm_sizes=None) -> list[SearchResult]:
    """Tune and compile the bench ops programs on ``device``; the searches that ran."""
    from ..runtime import executable

    with tuning(budget, progress, candidates) as session:
        for label, bound, _ in ops_programs(device, quick, only, scale, dtypes, gemm_sizes):
            if progress:
                print(f"tune: {label}", file=sys.stderr, flush=True)
            executable(bound, device)
    return session.results


def model_step(name: str, device_id: str, batch: int | None = None, precision: str = "fp32",
               layout: str = "auto") -> tuple[Callable, tuple]:
    """The training step of `gingham bench model NAME` and its first batch (same model, seed,
    optimiser, precision, layout and data as the benchmark, so the same kernels)."""
    from ..bench.model import MODELS, ModelSettings, layout_of, synthetic_batches
    from ..devices import get_device

    spec = MODELS[name]
    batch = batch or spec.batch
    data_format = layout_of(ModelSettings(precision=precision, layout=layout),
                            get_device(device_id).info.kind)
    step = spec.gingham_step(device_id, data_format, precision)
    return step, synthetic_batches(spec, batch, data_format)[0]


def tune_step(step: Callable, args: tuple, budget: float | None = None,
              candidates: int = CANDIDATES, progress: bool = True,
              parts: tuple[str, ...] = ("kernels", "algorithms")) -> list[SearchResult]:
    """Trace, tune and compile one call of a jitted step (and run it once). ``parts``: what
    is tuned, ``kernels`` (schedules) and ``algorithms`` (each layer's way of being built)."""
    with tuning(budget, progress, candidates, kernels="kernels" in parts,
                algorithms="algorithms" in parts) as session:
        step(*args)
    return session.results


# -- the commands --------------------------------------------------------------------------------


def _device(args):
    from ..devices import default_device_id, get_device

    device = get_device(args.device or default_device_id())
    if device.info.dialect is None:
        from ..errors import GinghamError

        raise GinghamError(f"{device.id} compiles no kernels: there is nothing to tune")
    return device


def ops_command(args: argparse.Namespace) -> int:
    device = _device(args)
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    start = time.perf_counter()
    before = device.stats.snapshot()
    results = tune_ops(device, args.budget, args.quick, only, args.scale, args.candidates,
                       not args.quiet, args.dtype, args.gemm_sizes)
    _report(results, device, time.perf_counter() - start, device.stats - before)
    return 0


def model_command(args: argparse.Namespace) -> int:
    device = _device(args)
    start = time.perf_counter()
    before = device.stats.snapshot()
    step, batch = model_step(args.name, device.id, args.batch, args.precision, args.layout)
    results = tune_step(step, batch, args.budget, args.candidates, not args.quiet, args.only)
    _report(results, device, time.perf_counter() - start, device.stats - before)
    return 0


def _report(results: list[SearchResult], device, elapsed: float, moved) -> None:
    from .algorithms import FAMILY

    layers = sum(r.family == FAMILY for r in results)
    chose = f" and chose the algorithm of {layers} layer(s)" if layers else ""
    print(f"tuned {len(results) - layers} kernel(s){chose} on {device.id} ({device.info.name}) "
          f"in {elapsed:.1f} s; {moved.compiles} compile(s), {stats.hits} already in the "
          "tuning database")
    if not results:
        return
    rows = [["kernel", "family", "untuned ms", "tuned ms", "untuned/tuned", "tried", "dropped",
             "schedule"]]
    for r in results:
        rows.append([r.name, r.family, f"{r.default_seconds * 1e3:.3f}", f"{r.seconds * 1e3:.3f}",
                     f"{r.speedup:.2f}x", str(r.tried), str(len(r.rejected)),
                     r.config.describe() if r.family == "cpu-tiled" else str(r.config)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    geo = math.exp(sum(math.log(r.speedup) for r in results) / len(results))
    print(f"geometric mean untuned/tuned: {geo:.2f}x")
    for r in results:
        for reason in r.rejected:
            print(f"dropped in {r.name}: {reason}")


__all__ = ["register", "tune_ops", "tune_step", "model_step", "ops_programs"]
