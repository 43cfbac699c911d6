"""How well the cost model ranks the schedules the measured search timed, and how it would
with other constants (GPU tiled kernels and CPU tilings).

On the device, ``collect`` tunes the kernels of models' training steps (as ``gingham tune model
NAME --only kernels`` does, fresh cache: every kernel searched) and writes, per tiled kernel,
its GEMM sizes and every candidate's configuration with its measured seconds::

    GINGHAM_CACHE_DIR=$(mktemp -d) python3 tools/cost_model_fit.py collect resnet9 story \\
        --device cuda:0 --candidates 16 --out fit.json
    GINGHAM_CACHE_DIR=$(mktemp -d) python3 tools/cost_model_fit.py collect resnet9:64 \\
        story:16 --device cpu --candidates 8 --out fit-cpu.json
    GINGHAM_CACHE_DIR=$(mktemp -d) python3 tools/cost_model_fit.py collect resnet9 \\
        --device cuda:0 --precision bf16 --out fit-tc.json

(bf16 / fp16 steps: the tensor-core kernels, priced by
:func:`gingham.compiler.tiling_tc.config_cost` under the recorded device description.)

Anywhere, ``evaluate`` prices every measured candidate with :func:`gingham.tune.cost.gpu_time`
(a CPU tiling: ``cpu_time``) under the recorded device model, lets the model pick among them,
and sums what its picks cost against the fastest measured one, each kernel as often as it
runs in its step (the "regret": the step time left on the table, within the measured set);
``--set NAME=VALUE`` overrides a constant of ``gingham.tune.cost`` (``tiling_tc.NAME``: of
``gingham.compiler.tiling_tc``) first, to see whether a change would pick better::

    python3 tools/cost_model_fit.py evaluate fit.json --set GPU_THREADS_TO_HIDE=512

The untuned schedule is always among the candidates, so a change's regret is comparable with
the current model's on the same measurements. Only the measured set is seen: a change that
would pick a schedule nobody timed is judged by its best guess among those timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time


def collect(args: argparse.Namespace) -> int:
    from gingham.compiler.tiling_cpu import CpuTiling
    from gingham.compiler.tiling_gpu import TileConfig
    from gingham.compiler.tiling_tc import TcConfig
    from gingham.devices import get_device
    from gingham.tune import search
    from gingham.tune.cli import model_step, tune_ops, tune_step
    from gingham.tune.device_model import device_model
    from gingham.tune.keys import kernel_key

    device = get_device(args.device)
    records: list[dict] = []
    current: dict = {}
    real_result = search.Search.result

    def result(self):  # every search's measurements, not only its winner
        out = real_result(self)
        record = {"model": current["model"], "kernel": self.name, "family": self.family.name,
                  "default": dataclasses.asdict(self.default),
                  "measured": [[dataclasses.asdict(c), s] for c, s in self.measured.items()]}
        if isinstance(self.default, TileConfig):
            view = self.family.view
            records.append(dict(record, m=view.m, n=view.n, k=view.k, batches=view.batches,
                                itemsize=self.family.itemsize))
        elif isinstance(self.default, TcConfig):
            view = self.family.view
            # What the untuned ranking chooses among (band 8, no register cap); the search's
            # neighbours beyond it count only as the best.
            ranked = {config for _, config in self.family.ranked(None)}
            record["measured"] = [[c, s, config in ranked] for (c, s), config
                                  in zip(record["measured"], self.measured)]
            records.append(dict(record, m=view.m, n=view.n, k=view.k, batches=view.batches))
        elif isinstance(self.default, CpuTiling):
            dims = self.family.dims
            records.append(dict(record, m=dims.m, n=dims.n, k=dims.k, batches=dims.batch,
                                dims=dataclasses.asdict(dims)))
        return out

    # How often each searched kernel runs in the step (repeated layers share one search).
    occurrences: dict = {}
    first_name: dict = {}
    real_tuned_config = search.tuned_config

    def tuned_config(plan, ctx, name, info):
        family = search.family_of(plan, ctx, info)
        if family is not None:
            key = kernel_key(family.name, plan, ctx.bound)
            occurrences[key] = occurrences.get(key, 0) + 1
            first_name.setdefault(key, name)
        return real_tuned_config(plan, ctx, name, info)

    search.Search.result = result
    search.tuned_config = tuned_config
    try:
        for spec in args.models:
            name, _, own_batch = spec.partition(":")  # resnet9:64: that model at batch 64
            current["model"] = name
            started = time.perf_counter()
            if name.startswith("gemm"):  # gemmSIZE: the bench ops GEMM of that size
                dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
                tune_ops(device, args.budget, only=("gemm",), candidates=args.candidates,
                         progress=False, dtypes=(dtype[args.precision],),
                         gemm_sizes=[int(name[len("gemm"):])])
            else:
                step, batch = model_step(name, device.id, int(own_batch or 0) or args.batch,
                                         precision=args.precision)
                tune_step(step, batch, args.budget, args.candidates, progress=False,
                          parts=("kernels",))
            print(f"{name}: {sum(r['model'] == name for r in records)} tiled kernels in "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
            counts = {first_name[key]: n for key, n in occurrences.items()}
            for record in records:
                if record["model"] == name:
                    record["count"] = counts.get(record["kernel"], 1)
            # After each model: a run cut short keeps what it measured.
            with open(args.out, "w") as handle:
                json.dump({"device": device.info.name, "info": device.info.as_dict(),
                           "model": device_model(device).as_dict(), "kernels": records}, handle)
            print(f"wrote {len(records)} kernels to {args.out}", file=sys.stderr, flush=True)
    finally:
        search.Search.result = real_result
        search.tuned_config = real_tuned_config
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from types import SimpleNamespace

    from gingham.compiler import tiling_tc
    from gingham.compiler.tiling_cpu import CpuTiling
    from gingham.compiler.tiling_gpu import TileConfig
    from gingham.devices.base import DeviceInfo
    from gingham.tune import cost, space
    from gingham.tune.device_model import DeviceModel

    for setting in args.set:
        name, value = setting.split("=", 1)
        module, name = (tiling_tc, name[len("tiling_tc."):]) if name.startswith("tiling_tc.") \
            else (cost, name)
        if not hasattr(module, name):
            raise SystemExit(f"{module.__name__} has no constant {name}")
        setattr(module, name, type(getattr(module, name))(float(value)))
    with open(args.file) as handle:
        data = json.load(handle)
    model = DeviceModel.from_dict(data["model"])
    info = DeviceInfo(**data["info"]) if "info" in data else None
    totals: dict[str, dict[str, float]] = {}
    untuned_now: dict[int, float] = {}  # tensor-core kernels: the untuned choice re-made
    rows = []
    for record in data["kernels"]:
        if "dims" in record:  # a CPU tiling: the model prices any of them
            dims = cost.CpuDims(**record["dims"])
            seconds = {CpuTiling(**c): s for c, s in record["measured"]}
            default = CpuTiling(**record["default"])
            rankable = list(seconds)
            estimate = {c: cost.cpu_time(c, dims, model) for c in rankable}
        elif record["family"] == "gpu-tensor-core":
            view = SimpleNamespace(m=record["m"], n=record["n"], k=record["k"],
                                   batches=record["batches"])
            seconds = {tiling_tc.TcConfig(**c): s for c, s, _ in record["measured"]}
            default = tiling_tc.TcConfig(**record["default"])
            # Ranked when collected and still legal (the code evaluated may refuse more).
            rankable = [c for c in (tiling_tc.TcConfig(**m) for m, _, ranked
                                    in record["measured"] if ranked)
                        if tiling_tc.fits(c, info)]
            estimate = {c: tiling_tc.config_cost(c, view, info) for c in rankable}
            now = _tc_untuned(view, info, seconds)
            if now is not None:  # the untuned choice of the code evaluated, where it was timed
                untuned_now[id(record)] = seconds[now]
        else:
            view = SimpleNamespace(m=record["m"], n=record["n"], k=record["k"],
                                   batches=record["batches"])
            seconds = {TileConfig(**c): s for c, s in record["measured"]}
            default = TileConfig(**record["default"])
            # The model picks among what it ranks (space.gpu_space: band 8, padding 4,
            # registers bounded, its K steps); the search's neighbours beyond that count
            # only as the best.
            rankable = [c for c in seconds if (c.group_m, c.pad, c.bounded) == (8, 4, True)
                        and c.tile_k in space.GPU_TILE_K + (space.GPU_SHORT_TILE_K,)]
            estimate = {c: cost.gpu_time(c, view, model, record["itemsize"])
                        for c in rankable}
        pick = min(rankable, key=lambda c: (estimate[c], str(c)))
        best = min(seconds.values())
        runs = record.get("count", 1)  # a repeated layer's kernel runs that often a step
        total = totals.setdefault(record["model"],
                                  {"default": 0.0, "now": 0.0, "pick": 0.0, "best": 0.0})
        total["default"] += runs * seconds.get(default, best)
        total["now"] += runs * untuned_now.get(id(record), seconds.get(default, best))
        total["pick"] += runs * seconds[pick]
        total["best"] += runs * best
        rows.append((runs * (seconds[pick] - best), record, pick, seconds[pick], best))
    print(" ".join(args.set) or "current constants")
    for name, total in totals.items():
        print(f"  {name}: the model's picks {total['pick'] * 1e3:.3f} ms a step, the untuned "
              f"schedules {total['default'] * 1e3:.3f} (re-chosen {total['now'] * 1e3:.3f}), "
              f"the fastest measured "
              f"{total['best'] * 1e3:.3f} (picks / fastest {total['pick'] / total['best']:.3f})")
    for lost, record, pick, got, best in sorted(rows, key=lambda r: -r[0])[:args.worst]:
        print(f"  {record['model']} {record['kernel']} (M {record['m']} N {record['n']} K "
              f"{record['k']} x{record['batches']}, {record.get('count', 1)} a step): "
              f"{got * 1e3:.3f} ms, fastest {best * 1e3:.3f}; picked {pick}")
    return 0


def _tc_untuned(view, info, seconds: dict):
    """What :func:`tiling_tc.choose_config` would choose now among the candidates that were
    timed (``fits`` standing for ``buildable``: the operands' layouts were not recorded)."""
    from gingham.compiler import tiling_tc

    for candidates in (tiling_tc.WGMMA_CANDIDATES, tiling_tc.CANDIDATES):
        options = []
        for config in candidates:
            if tiling_tc.fits(config, info):
                options.append(config)
                split = tiling_tc.choose_split(config, view, info)
                if split > 1:
                    options.append(dataclasses.replace(config, split=split))
        options = [c for c in options if c in seconds]
        if options:
            return min(options, key=lambda c: tiling_tc.config_cost(c, view, info))
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="tune models' kernels on a GPU and keep every timing")
    c.add_argument("models", nargs="+",
                   help="bench models (MODEL:BATCH: at that batch size), or gemmSIZE for a "
                        "bench ops GEMM")
    c.add_argument("--device", default="cuda:0")
    c.add_argument("--batch", type=int, help="batch size (default: the model's)")
    c.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"),
                   help="the step's precision (bf16 / fp16: tensor-core kernels on CUDA)")
    c.add_argument("--candidates", type=int, default=16)
    c.add_argument("--budget", type=float, default=4.0)
    c.add_argument("--out", default="cost_model_fit.json")
    c.set_defaults(func=collect)
    e = sub.add_parser("evaluate", help="the model's picks among the timed candidates")
    e.add_argument("file")
    e.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    e.add_argument("--worst", type=int, default=10, help="kernels listed, most time lost first")
    e.set_defaults(func=evaluate)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
