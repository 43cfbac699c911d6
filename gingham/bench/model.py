"""``gingham bench model``: seconds per epoch of a whole training step, beside PyTorch.

    $ gingham bench model resnet9 --device cuda:0             # CIFAR-shaped, batch 512
    $ gingham bench model story --device opencl:0              # PlaidML's story net, batch 16
    $ gingham bench model resnet18 --device cpu --batch 32 --steps 3
    $ gingham bench model --all-devices --json epoch.json --plot epoch.png
    $ gingham bench model resnet9 --device cuda:0 --precision bf16 --layout nhwc

Each runner trains the same network (same initial weights, SGD with Nesterov momentum and
weight decay, fp32) on the same synthetic data of the real shape, already on the device, so
their first losses agree: gingham's
``gingham.jit``-compiled step (:func:`gingham.nn.training.train_step`), PyTorch eager, and
PyTorch with the model under ``torch.compile`` (where it runs; see ``torch_compile``).

Layouts (``--layout``): gingham trains in NCHW or channels-last (NHWC) models, given images in
that layout; ``auto`` trains channels-last where the PyTorch baseline does (mixed precision,
see :data:`PRECISIONS`), so both sides run their fast convolutions, and on the ``cpu`` device
always (measured there: a ResNet-9 step at batch 32 takes about a quarter of the NCHW time),
NCHW otherwise. The table and the records say which layout each run used.

What is measured, per runner: the first step (gingham: trace + compile + run; torch.compile:
compile + run; eager: cuDNN autotuning and allocations), one more untimed warm-up step, then
``steps`` timed steps, each synchronised. Seconds per epoch are **extrapolated**: the median
timed step x ceil(images per epoch / batch); the first epoch is estimated as the untimed steps
plus the rest of the epoch at the median rate. ratio = PyTorch time / gingham time on the same
hardware (> 1: gingham is faster).

    settings = ModelSettings(steps=3)
    runs = bench_models(["resnet9"], ["cpu"], settings)       # list[Run]
    print(format_runs(runs))
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from .. import data
from ..config import get_config
from ..devices import get_device
from .baselines import TorchEnv, torch_env
from .contention import Contention
from .ops import BenchError
from .timing import SETTLE_SECONDS

#: ``--precision`` -> the autocast dtype (None: float32 throughout). Mixed precision runs
#: gingham's step under :func:`gingham.autocast` (float32 master weights; fp16 with a
#: :class:`gingham.amp.GradScaler`) and PyTorch's under ``torch.autocast`` in the same dtype with
#: channels-last tensors (fp16 with ``torch.amp.GradScaler``): PyTorch's fast setting.
PRECISIONS = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}

#: ``--layout`` -> the models' ``data_format`` (``auto`` is resolved by :func:`layout_of`).
LAYOUTS = {"nchw": "NCHW", "nhwc": "NHWC"}


@dataclass(frozen=True)
class ModelSpec:
    """A benchmarked network: its data shape, epoch size and default batch."""

    name: str
    description: str
    input_shape: tuple[int, int, int]
    images_per_epoch: int
    batch: int
    classes: int = 10

    def gingham_model(self, device: str, data_format: str = "NCHW"):
        """The gingham network in ``data_format``, initialised from seed 0 (the same weights
        in either layout)."""
        from ..nn import models, modules

        modules.manual_seed(0)
        builders: dict[str, Callable[..., Any]] = {
            "resnet9": models.ResNet9, "resnet18": models.ResNet18, "story": models.StoryNet,
            "digits": models.SmallConvNet}
        return builders[self.name](classes=self.classes, device=device, data_format=data_format)

    def gingham_step(self, device: str, data_format: str = "NCHW", precision: str = "fp32"):
        """The jitted training step the benchmark times: :meth:`gingham_model`, SGD with
        Nesterov momentum and weight decay (PyTorch's side uses the same), ``autocast`` in
        ``precision`` (see :data:`PRECISIONS`; fp16 with a loss scaler). ``gingham tune
        model`` and the tools that study a step build the same one, so the same kernels."""
        import gingham
        from ..nn import training

        model = self.gingham_model(device, data_format)
        optimizer = gingham.optim.SGD(model.parameters(), lr=0.01, momentum=0.9,
                                      nesterov=True, weight_decay=5e-4)
        scaler = gingham.amp.GradScaler() if precision == "fp16" else None
        return training.train_step(model, optimizer, autocast=PRECISIONS[precision],
                                   scaler=scaler)

    def torch_model(self, torch):
        """The same network in PyTorch, holding the gingham network's initial weights (same
        layers, same parameter order), so both start from the same point."""
        net = torch_model(torch, self.name, self.classes)
        ours = self.gingham_model("reference")  # NumPy-backed: no device work
        with torch.no_grad():
            for mine, theirs in zip(ours.parameters(), net.parameters(), strict=True):
                theirs.copy_(torch.from_numpy(mine.numpy()).reshape(theirs.shape))
        return net


MODELS: dict[str, ModelSpec] = {
    spec.name: spec for spec in (
        ModelSpec("resnet9", "ResNet-9 (DAWNBench), CIFAR-10-shaped 3x32x32", (3, 32, 32),
                  50_000, 512),
        ModelSpec("resnet18", "ResNet-18 (CIFAR), 3x32x32", (3, 32, 32), 50_000, 128),
        ModelSpec("story", "PlaidML's story net, 3x100x100", (3, 100, 100), 50_000, 16),
        # Two convs on 8x8 digits: seconds to compile, for trying the suite (and its tests).
        ModelSpec("digits", "SmallConvNet, 1x8x8 digits", (1, 8, 8), 1_438, 64),
    )
}
#: What ``gingham bench model`` (and ``all``) trains when no model is named.
DEFAULT_MODELS = ("resnet9", "resnet18", "story")


@dataclass(frozen=True)
class ModelSettings:
    """How ``gingham bench model`` runs.

    ``batch`` None: each model's default. ``torch_compile``: ``auto`` runs it where PyTorch
    runs on a GPU (on a CPU inductor compiles a training step for minutes), ``on``, ``off``.
    ``precision`` is the step's arithmetic: ``fp32``, or ``bf16`` / ``fp16`` mixed precision
    (see :data:`PRECISIONS`). ``layout`` is gingham's: ``auto`` (channels-last where PyTorch's
    baseline is: mixed precision), ``nchw`` or ``nhwc``.
    """

    steps: int = 5
    warmup: int = 1  # untimed steps after the first
    batch: int | None = None
    torch: bool = True
    torch_compile: str = "auto"
    precision: str = "fp32"
    layout: str = "auto"

    @classmethod
    def quick(cls, **overrides) -> ModelSettings:
        """Fewer timed steps (2), one warm-up: enough for an order of magnitude."""
        return cls(**{"steps": 2, **overrides})

    def compiles(self, torch_device: str) -> bool:
        if self.torch_compile == "off":
            return False
        return self.torch_compile == "on" or torch_device != "cpu"


@dataclass
class Run:
    """One runner (a framework on a device) training one model."""

    model: str
    framework: str  # "gingham", "torch" (eager) or "torch.compile"
    device: str  # gingham device id, or torch device for PyTorch
    label: str
    batch: int
    steps_per_epoch: int
    precision: str = "fp32"
    layout: str = "NCHW"  # the layout of the images and activations
    hardware: str = ""  # what it runs on (the same for gingham cuda:0 and torch cuda:0)
    first_step_seconds: float | None = None
    warmup_seconds: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def step_seconds(self) -> float | None:
        """The median timed step."""
        return float(np.median(self.step_times)) if self.step_times else None

    @property
    def epoch_seconds(self) -> float | None:
        step = self.step_seconds
        return None if step is None else step * self.steps_per_epoch

    @property
    def first_epoch_seconds(self) -> float | None:
        """The untimed steps plus the rest of the first epoch at the median rate."""
        step = self.step_seconds
        if step is None or self.first_step_seconds is None:
            return None
        untimed = [self.first_step_seconds, *self.warmup_seconds]
        return sum(untimed) + max(0, self.steps_per_epoch - len(untimed)) * step

    @property
    def first_epoch_over_later(self) -> float | None:
        """What the first run costs: the first epoch's estimate over a later epoch's (1.0:
        nothing; the issue's first-run target is at most 1.5)."""
        first, later = self.first_epoch_seconds, self.epoch_seconds
        return None if first is None or not later else first / later

    @property
    def name(self) -> str:
        return f"{self.framework} {self.device}"

    def record(self, ratios: dict[str, float] | None = None) -> dict:
        return {
            "name": f"model.{self.model}", "model": self.model, "framework": self.framework,
            "device": self.device, "label": self.label, "hardware": self.hardware,
            "precision": self.precision, "layout": self.layout, "batch": self.batch,
            "shape": f"batch {self.batch}", "steps_per_epoch": self.steps_per_epoch,
            "timed_steps": len(self.step_times),
            "unit": f"seconds per epoch, extrapolated from the median of "
                    f"{len(self.step_times)} timed steps",
            "epoch_seconds": _finite(self.epoch_seconds),
            "step_seconds": _finite(self.step_seconds),
            "first_step_seconds": _finite(self.first_step_seconds),
            "first_epoch_seconds": _finite(self.first_epoch_seconds),
            "first_epoch_over_later": _finite(self.first_epoch_over_later),
            "warmup_seconds": self.warmup_seconds, "step_times": self.step_times,
            "losses": [v if math.isfinite(v) else str(v) for v in self.losses],
            "ratios": ratios or {}, "status": "error" if self.error else "ok",
            "error": self.error, "notes": self.notes,
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _autocast_dtype(settings: ModelSettings) -> str | None:
    """The low-precision dtype of ``settings.precision`` (fp32: None)."""
    if settings.precision not in PRECISIONS:
        raise BenchError(f"precision {settings.precision!r} is not supported; choose from "
                         f"{', '.join(PRECISIONS)}")
    return PRECISIONS[settings.precision]


def layout_of(settings: ModelSettings, kind: str | None = None) -> str:
    """gingham's ``data_format`` for ``settings.layout`` on a device of ``kind`` (``cpu`` or
    ``gpu``): ``auto`` is channels-last where PyTorch's baseline runs channels-last (mixed
    precision) and on CPUs (the C backend, a CPU's OpenCL driver), whose GEMM schedule then
    reads both operands of a convolution along the channels; NCHW otherwise (float32 on GPUs,
    where PyTorch's baseline is NCHW too).

        layout_of(ModelSettings(precision="bf16"))           # 'NHWC'
        layout_of(ModelSettings(), "cpu")                     # 'NHWC'
        layout_of(ModelSettings(), "gpu")                     # 'NCHW'
    """
    if settings.layout == "auto":
        channels_last = _autocast_dtype(settings) is not None or kind == "cpu"
        return "NHWC" if channels_last else "NCHW"
    if settings.layout not in LAYOUTS:
        raise BenchError(f"layout {settings.layout!r} is not supported; choose from auto, "
                         f"{', '.join(LAYOUTS)}")
    return LAYOUTS[settings.layout]


def synthetic_batches(spec: ModelSpec, batch: int,
             data_format: str = "NCHW") -> list[tuple[np.ndarray, np.ndarray]]:
    """Two batches of synthetic data, alternated: no step sees the same input twice running.
    The same images in either layout (NHWC: each batch transposed, contiguous)."""
    images, labels = data.synthetic(batch * 2, spec.input_shape, spec.classes, seed=0)
    if data_format == "NHWC":
        images = np.ascontiguousarray(images.transpose(0, 2, 3, 1))
    return [(images[:batch], labels[:batch]), (images[batch:], labels[batch:])]


class _Traced(Exception):
    """Raised in place of compiling: :func:`trace_step` wants the program only."""


def trace_step(step: Callable, *args):
    """The bound Tile program that the jitted ``step`` traces for ``args``, neither
    compiled nor run (tools and tests lower it for devices this machine may not have)::

        >>> bound = trace_step(MODELS["resnet9"].gingham_step("cpu"), images, labels)
    """
    from .. import runtime

    captured = {}

    def capture(bound, device):
        captured["bound"] = bound
        raise _Traced

    real = runtime.executable
    runtime.executable = capture
    try:
        step(*args)
    except _Traced:
        pass
    finally:
        runtime.executable = real
    if "bound" not in captured:
        raise RuntimeError("the step compiled nothing: it was traced before")
    return captured["bound"]


def _timed_steps(run: Run, step: Callable[[int], Any], sync: Callable[[], None],
                 loss_of: Callable[[Any], float], settings: ModelSettings,
                 log: TextIO | None) -> None:
    """The first step, ``warmup`` more, then ``steps`` timed ones (each synchronised)."""
    def one(index: int) -> float:
        start = time.perf_counter()
        loss = step(index)
        sync()
        seconds = time.perf_counter() - start
        run.losses.append(loss_of(loss))
        return seconds

    _say(log, f"{run.model} {run.name}: first step")
    time.sleep(SETTLE_SECONDS)  # the previous runner's idle threads stop spinning first
    run.first_step_seconds = one(0)
    for index in range(settings.warmup):
        run.warmup_seconds.append(one(1 + index))
    _say(log, f"{run.model} {run.name}: {settings.steps} timed steps "
              f"(first {run.first_step_seconds:.1f} s)")
    with Contention() as contention:
        for index in range(settings.steps):
            run.step_times.append(one(1 + settings.warmup + index))
    if contention.busy:
        run.notes.append(contention.note())
    if not all(math.isfinite(v) for v in run.losses):
        run.notes.append("a loss was not finite")


def _say(log: TextIO | None, text: str) -> None:
    if log is not None:
        print(f"bench: {text}", file=log, flush=True)


def run_gingham(spec: ModelSpec, device_id: str, settings: ModelSettings,
                log: TextIO | None = None) -> Run:
    """Train ``spec`` with gingham on ``device_id``: a compiled ``train_step`` replayed."""
    import gingham

    batch = settings.batch or spec.batch
    run = Run(spec.name, "gingham", device_id, "", batch,
              math.ceil(spec.images_per_epoch / batch), settings.precision)
    try:
        device = get_device(device_id)
        run.layout = layout_of(settings, device.info.kind)
        run.label = (f"gingham {gingham.__version__} {device_id} ({device.info.name}) "
                     f"{run.layout}")
        from ..nn import winograd

        run.hardware = hardware_of(device.info, with_torch=settings.torch)
        train_step = spec.gingham_step(device_id, run.layout, settings.precision)
        # On the device before timing, as PyTorch's batches are.
        batches = [(gingham.tensor(x, device=device_id), gingham.tensor(y, device=device_id))
                   for x, y in synthetic_batches(spec, batch, run.layout)]
        # How the step's convolutions were built, as its latest trace built them: the first
        # call traces it, and background tuning may trace it again with measured algorithms.
        convolutions: list = []

        def step(index: int):
            with winograd.recorded() as traced:
                loss = train_step(*batches[index % 2])
            if traced:
                convolutions[:] = traced
            return loss

        _timed_steps(run, step, device.synchronize, lambda loss: loss.item(), settings, log)
        conv_algorithm = get_config().conv_algorithm
        conv_note = winograd.summary(convolutions, conv_algorithm, device_id,
                                     run.layout == "NHWC")
        if conv_note is not None:
            run.notes.append(f"{conv_note}; GINGHAM_CONV_ALGORITHM chooses")
        if train_step.traces != 1:
            run.notes.append(f"the step was traced {train_step.traces} times")
    except Exception as exc:  # noqa: BLE001 - one runner failing must not stop the others
        run.error = _describe(exc)
        _say(log, f"{spec.name} {run.name}: ERROR {run.error}")
    return run


def run_torch(spec: ModelSpec, env: TorchEnv, compiled: bool, settings: ModelSettings,
              log: TextIO | None = None) -> Run:
    """Train ``spec`` with PyTorch on ``env.device``: eager, or the model under torch.compile
    (the optimiser step stays eager, as in the usual ``model = torch.compile(model)``)."""
    batch = settings.batch or spec.batch
    framework = "torch.compile" if compiled else "torch"
    assert env.device is not None
    run = Run(spec.name, framework, env.device,
              env.compile_label if compiled else f"{env.label} eager", batch,
              math.ceil(spec.images_per_epoch / batch), settings.precision)
    try:
        torch = env.torch
        run.hardware = torch_hardware(env)
        low = _autocast_dtype(settings)
        torch.manual_seed(0)
        net = spec.torch_model(torch).to(env.device)
        tensors = [(env.tensor(x), env.tensor(y.astype(np.int64)))
                   for x, y in synthetic_batches(spec, batch)]
        if low is not None:  # PyTorch's fast mixed-precision setting: channels-last
            run.layout = "NHWC"
            net = net.to(memory_format=torch.channels_last)
            tensors = [(x.contiguous(memory_format=torch.channels_last)
                        if x.dim() == 4 else x, y) for x, y in tensors]
            run.label += f" {settings.precision} autocast channels-last"
        if compiled:
            env.reset_compiled()
        forward = env.compile(net) if compiled else net
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True,
                                    weight_decay=5e-4)
        device_type = "cuda" if env.device.startswith("cuda") else "cpu"
        autocast = torch.autocast(device_type, dtype=getattr(torch, low or "float32"),
                                  enabled=low is not None)
        scaler = torch.amp.GradScaler(device_type, enabled=low == "float16")

        def step(index: int):
            x, y = tensors[index % 2]
            with autocast:
                loss = torch.nn.functional.cross_entropy(forward(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            return loss

        _timed_steps(run, step, env.sync, lambda loss: float(loss.item()), settings, log)
    except Exception as exc:  # noqa: BLE001 - e.g. torch.compile without a C++ compiler
        run.error = _describe(exc)
        _say(log, f"{spec.name} {run.name}: ERROR {run.error}")
    finally:
        if env.device.startswith("cuda"):  # hand torch's cached blocks back for the next runner
            env.torch.cuda.empty_cache()
    return run


def hardware_of(info, with_torch: bool = True) -> str:
    """What a gingham device runs on, in the terms :func:`torch_hardware` uses (the runs on
    the same hardware are the ones compared). Without ``with_torch`` there is nothing to
    compare with, and PyTorch is not imported for a label: importing it and its CUDA runtime
    took 2-3 s of a ``--no-torch`` run before its first step on the H200's host."""
    env = torch_env(info) if with_torch else None
    if env is not None and env.device is not None:
        return torch_hardware(env)
    return f"{info.kind} {info.name}"


def torch_hardware(env: TorchEnv) -> str:
    if env.device == "cpu":
        return "cpu"
    return f"{env.device} {env.torch.cuda.get_device_name(env.torch.device(env.device))}"


def bench_models(models: Sequence[str], device_ids: Sequence[str], settings: ModelSettings,
                 log: TextIO | None = None) -> list[Run]:
    """Every model on every gingham device, and PyTorch (eager, compiled) once per torch
    device those devices map to (``cpu`` for the CPU and PoCL, ``cuda:N`` for NVIDIA GPUs)."""
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise BenchError(f"unknown model {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    devices = [get_device(d) for d in device_ids]
    envs: dict[str, TorchEnv] = {}
    skipped: list[str] = []
    if settings.torch:
        for device in devices:
            env = torch_env(device.info)
            if env.device is not None:
                envs.setdefault(env.device, env)
            else:
                skipped.append(f"{device.id}: {env.reason}")
    runs: list[Run] = []
    for name in models:
        spec = MODELS[name]
        for device in devices:
            runs.append(run_gingham(spec, device.id, settings, log))
        for torch_device, env in envs.items():
            runs.append(run_torch(spec, env, False, settings, log))
            if settings.compiles(torch_device):
                runs.append(run_torch(spec, env, True, settings, log))
    for run in runs:
        run.notes.extend(f"no PyTorch for {s}" for s in skipped if run.framework == "gingham"
                         and s.startswith(run.device + ":"))
    return runs


def ratios(runs: Sequence[Run]) -> dict[int, dict[str, float]]:
    """For each gingham run (by index): PyTorch time / gingham time of every PyTorch run of
    the same model on the same hardware, keyed by the PyTorch run's name."""
    out: dict[int, dict[str, float]] = {}
    for index, run in enumerate(runs):
        if run.framework != "gingham" or run.step_seconds is None:
            continue
        out[index] = {
            other.name: other.step_seconds / run.step_seconds for other in runs
            if other.framework != "gingham" and other.model == run.model
            and other.hardware == run.hardware and other.step_seconds is not None}
    return out


def _seconds(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_runs(runs: Sequence[Run]) -> str:
    """The table of seconds per epoch (one line per model and runner), ratios, then notes."""
    header = ["model", "runner", "device", "layout", "batch", "steps/epoch", "ms/step",
              "s/epoch", "first step", "first epoch", "losses (first, last)"]
    rows = [header]
    notes: list[str] = []
    for run in runs:
        losses = "-" if not run.losses else f"{run.losses[0]:.3f}, {run.losses[-1]:.3f}"
        if run.error is not None:
            rows.append([run.model, run.framework, run.device, run.layout, str(run.batch),
                         str(run.steps_per_epoch), "ERROR", "-", "-", "-", "-"])
            notes.append(f"{run.model} {run.name}: {run.error}")
            continue
        step = run.step_seconds
        rows.append([run.model, run.framework, run.device, run.layout, str(run.batch),
                     str(run.steps_per_epoch), _seconds(None if step is None else step * 1e3),
                     _seconds(run.epoch_seconds), _seconds(run.first_step_seconds),
                     _seconds(run.first_epoch_seconds), losses])
        notes.extend(f"{run.model} {run.name}: {note}" for note in run.notes)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    right = {4, 5, 6, 7, 8, 9}
    lines = ["  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
    timed = sorted({len(r.step_times) for r in runs if r.step_times})
    lines += ["", f"s/epoch: extrapolated = median of {'/'.join(map(str, timed)) or '0'} timed "
              "steps x steps/epoch (ceil(images per epoch / batch); 50,000 images for the "
              "CIFAR-sized models); first step = trace + compile + run (seconds); first epoch "
              "(estimate, seconds) = the untimed first and warm-up steps + the rest at the "
              "median rate"]
    table = ratios(runs)
    if any(table.values()):
        lines += ["", "ratio = PyTorch time / gingham time, same model and hardware "
                      "(> 1: gingham is faster):"]
        for index, entries in table.items():
            run = runs[index]
            for name, value in entries.items():
                lines.append(f"  {run.model} {run.name} vs {name}: {value:.2f}")
    first_runs = [run for run in runs if run.first_epoch_over_later is not None]
    if first_runs:
        # The first run's cost for every runner: gingham's compile beside PyTorch's own
        # start-up (cuDNN's autotuning, torch.compile's compile) in the same process.
        lines += ["", "first epoch / a later epoch (what the first run costs; 1.00: nothing):"]
        lines += [f"  {run.model} {run.name}: {run.first_epoch_over_later:.2f} "
                  f"({run.first_epoch_seconds:.1f} vs {run.epoch_seconds:.1f} s)"
                  for run in first_runs]
    if notes:
        lines += [""] + [f"note: {n}" for n in dict.fromkeys(notes)]
    return "\n".join(lines)


def records(runs: Sequence[Run], context: dict) -> list[dict]:
    """One JSON record per run; gingham runs carry their ratios."""
    table = ratios(runs)
    return [{**context, **run.record(table.get(i))} for i, run in enumerate(runs)]


def plot(runs: Sequence[Run], path: str, title: str) -> None:
    """A PNG bar chart of seconds per epoch, one panel per model (matplotlib, the ``bench``
    extra), written atomically."""
    import os
    import tempfile
    from pathlib import Path

    try:
        import matplotlib
    except ImportError as exc:
        raise BenchError("--plot needs matplotlib: pip install 'gingham[bench]' "
                         f"(the bench extra) ({exc})") from None
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r.model for r in runs))
    fig, axes = plt.subplots(len(models), 1, squeeze=False,
                             figsize=(8, 1.2 + 0.45 * max(len([r for r in runs
                                                               if r.model == m])
                                                          for m in models) * len(models)))
    colours = {"gingham": "#2a7ab0", "torch": "#e07b39", "torch.compile": "#b5523b"}
    for axis, model in zip(axes[:, 0], models):
        chosen = [r for r in runs if r.model == model]
        names = [f"{r.framework} {r.device} {r.layout}" for r in chosen]
        values = [r.epoch_seconds or 0.0 for r in chosen]
        bars = axis.barh(names, values, color=[colours.get(r.framework, "grey") for r in chosen])
        for bar, run in zip(bars, chosen):
            text = "error" if run.error else f"{run.epoch_seconds:.1f} s"
            axis.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {text}",
                      va="center", fontsize=8)
        axis.invert_yaxis()
        axis.set_title(f"{MODELS[model].description}, batch {chosen[0].batch}", fontsize=10)
        axis.set_xlabel("seconds per epoch (extrapolated; lower is better)")
        axis.margins(x=0.15)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".png",
                                dir=target.parent or Path("."))
    os.close(fd)
    try:
        fig.savefig(temp, format="png", dpi=120)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    finally:
        plt.close(fig)


def torch_model(torch, name: str, classes: int = 10, width: int | None = None):
    """The PyTorch twin of a gingham model: same layers, same parameter order. ``width``
    (None: the model's own default) scales ResNet-9, ResNet-18 and the story net as their
    gingham ``width`` does."""
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
        def __init__(self, c_in, c_out=None, stride=1):
            super().__init__()
            c_out = c_out or c_in
            self.c1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(c_out)
            self.c2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(c_out)
            self.shortcut = None
            if stride != 1 or c_out != c_in:
                self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                              nn.BatchNorm2d(c_out))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            shortcut = x if self.shortcut is None else self.shortcut(x)
            return torch.relu(shortcut + self.b2(self.c2(y)))

    class Scale(nn.Module):
        def forward(self, x):
            return x * 0.125

    class Pooled(nn.Module):
        """Body, global average pooling, linear."""

        def __init__(self, stem, body, features):
            super().__init__()
            self.stem, self.body, self.linear = stem, body, nn.Linear(features, classes)

        def forward(self, x):
            return self.linear(self.body(self.stem(x)).mean(dim=(2, 3)))

    if name == "resnet9":
        w = width or 64
        return nn.Sequential(
            conv_bn(3, w), conv_bn(w, 2 * w), nn.MaxPool2d(2), Residual(2 * w),
            conv_bn(2 * w, 4 * w), nn.MaxPool2d(2), conv_bn(4 * w, 8 * w), nn.MaxPool2d(2),
            Residual(8 * w), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
            nn.Linear(8 * w, classes, bias=False), Scale())
    if name == "resnet18":
        width = width or 64
        stages, channels = [], width
        for index, out in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stages.append(nn.Sequential(Block(channels, out, 1 if index == 0 else 2),
                                        Block(out, out)))
            channels = out
        return Pooled(conv_bn(3, width), nn.Sequential(*stages), channels)
    if name == "story":
        w = width or 32
        return Pooled(conv_bn(3, w, 2), nn.Sequential(*(Block(w) for _ in range(4))), w)
    if name == "digits":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 2 * 2, classes))
    raise BenchError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


__all__ = ["MODELS", "LAYOUTS", "ModelSpec", "ModelSettings", "Run", "layout_of", "run_gingham",
           "run_torch", "bench_models", "ratios", "format_runs", "records", "plot", "torch_model"]
