"""``gingham bench keras``: the same Keras model trained by ``model.fit`` on gingham's Keras
backend and on Keras' PyTorch backend, on the same hardware: what a Keras user sees when they
switch backends (PlaidML's story, on Keras 3).

    $ gingham bench keras                                   # story, resnet9 on the default device
    $ gingham bench keras resnet9 --device cuda:0 --batch 512 --steps 20
    $ gingham bench keras story --all-devices --json keras.json
    $ gingham bench keras resnet9 --device cuda:0 --precision bf16   # keras mixed_bfloat16

The models are ``gingham bench model``'s networks written with Keras layers
(:func:`gingham.bench.keras_worker.build_model`, channels-last, Keras' default), and Keras' own
applications (``resnet50``, ``vgg16``, ``densenet121``, ``mobilenet_v2``: ``keras.applications``
untrained, on 32x32 images, batch 64), of the kind PlaidML's ``plaidbench`` timed. Each runner
is a process of its own (:mod:`gingham.bench.keras_worker`: Keras binds its backend at
import): the PyTorch one first, which saves the initial weights, then gingham's on each
device, which loads them, so all train the same weights on the same synthetic data; their
first losses must agree (:data:`LOSS_TOLERANCE`). Each trains two epochs of ``steps``
batches with ``model.fit``; the first holds the first step (trace + compile; PyTorch's own
set-up), the second is timed step by step (each step ends once a weight is back on the host).
Seconds per epoch are **extrapolated** to the model's epoch (``bench model``'s: 50,000 images
for the CIFAR-sized ones): the median timed step x steps per epoch; the first epoch is
estimated as the first measured epoch plus the rest at the timed rate. ratio = PyTorch's time
/ gingham's on the same hardware (> 1: gingham is faster).

    runs = bench_keras(["story"], ["cpu"], KerasSettings(steps=3, batch=8))
    print(format_runs(runs))
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Sequence, TextIO

from ..devices import get_device
from .model import MODELS, _say, hardware_of
from .ops import BenchError

#: The models ``bench keras`` knows: ``bench model``'s (same names) and Keras' applications
#: (:data:`gingham.bench.keras_worker.APPLICATIONS`, on CIFAR-sized images) -> (images per
#: epoch, default batch).
KERAS_MODELS = {name: (MODELS[name].images_per_epoch, MODELS[name].batch)
                for name in ("story", "resnet9", "resnet18", "digits")}
KERAS_MODELS.update({name: (50_000, 64)
                     for name in ("resnet50", "vgg16", "densenet121", "mobilenet_v2")})
DEFAULT_KERAS_MODELS = ("story", "resnet9")

#: The largest relative difference between a runner's first loss (the first step's, before
#: any update: the forward pass from the same weights) and the PyTorch backend's, per
#: precision. Later losses are shown, not checked: an update of a deep network at a small
#: batch can amplify float32 rounding (Keras' ResNet50 on 32x32 images, batch 8: one step's
#: updates differ by a median 2% between PyTorch's float32 and float64, and gingham's
#: float32 is as close to float64 as PyTorch's), and the tests check the training itself.
LOSS_TOLERANCE = {"fp32": 1e-3, "bf16": 3e-2, "fp16": 1e-2}

#: A runner's limit (seconds): a first ResNet-18 epoch on a 2-core CPU stays well under it.
WORKER_TIMEOUT = 1800


@dataclass(frozen=True)
class KerasSettings:
    """``steps``: batches per measured epoch; ``batch`` None: the model's (``bench model``'s);
    ``torch``: whether Keras' PyTorch backend runs beside; ``precision``: Keras' global dtype
    policy (``fp32``, or ``bf16`` / ``fp16`` mixed precision)."""

    steps: int = 5
    batch: int | None = None
    torch: bool = True
    precision: str = "fp32"


@dataclass
class KerasRun:
    """One backend on one device training one model."""

    model: str
    backend: str  # "gingham" or "torch"
    device: str  # gingham's device id, or the torch device
    hardware: str
    batch: int
    steps: int
    steps_per_epoch: int
    precision: str = "fp32"
    epoch_seconds: list[float] = field(default_factory=list)
    step_times: list[list[float]] = field(default_factory=list)  # per epoch, per step
    first_loss: float | None = None
    losses: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def step_seconds(self) -> float | None:
        """The median step of the timed (second) epoch."""
        if len(self.step_times) < 2 or not self.step_times[1]:
            return None
        return float(statistics.median(self.step_times[1]))

    @property
    def epoch(self) -> float | None:
        """Seconds per epoch, extrapolated from the timed epoch."""
        step = self.step_seconds
        return None if step is None else step * self.steps_per_epoch

    @property
    def first_epoch(self) -> float | None:
        """The first measured epoch plus the rest of a real one at the timed rate."""
        step = self.step_seconds
        if step is None:
            return None
        return self.epoch_seconds[0] + max(0, self.steps_per_epoch - self.steps) * step


def torch_device_for(device_id: str) -> tuple[str | None, str]:
    """The torch device that runs beside gingham's ``device_id`` (None: none can; with why),
    and the hardware both run on."""
    from .baselines import torch_env

    info = get_device(device_id).info
    env = torch_env(info)
    return env.device, (hardware_of(info) if env.device else env.reason)


def torch_visible_devices(torch_device: str, visible: str | None) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` for a Keras-on-PyTorch worker meant to run on ``torch_device``
    (None: leave it as it is). Keras' torch backend takes the first GPU it sees and has no
    device argument, so the worker is shown only the one it is meant to use: none for
    ``cpu``; for ``cuda:N``, the N-th of those this process sees (``visible``, the parent's
    own setting, numbers torch's devices when set).

    >>> torch_visible_devices("cuda:1", "4,6")
    '6'
    """
    if torch_device == "cpu":
        return ""
    kind, _, index = torch_device.partition(":")
    if kind != "cuda":
        return None
    number = int(index or 0)
    if not visible:
        return str(number)
    entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    if number >= len(entries):
        raise ValueError(f"{torch_device} is not among the GPUs CUDA_VISIBLE_DEVICES={visible!r} "
                         "shows")
    return entries[number]


def run_worker(backend: str, model: str, device: str, batch: int, settings: KerasSettings,
               weights: str, log: TextIO | None = None) -> KerasRun:
    """Train ``model`` on ``backend`` in a worker process (see :mod:`keras_worker`)."""
    images_per_epoch, _ = KERAS_MODELS[model]
    run = KerasRun(model, backend, device, "", batch, settings.steps,
                   math.ceil(images_per_epoch / batch), settings.precision)
    env = dict(os.environ)
    if backend == "torch":
        visible = torch_visible_devices(device, os.environ.get("CUDA_VISIBLE_DEVICES"))
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
    env.pop("KERAS_BACKEND", None)
    with tempfile.TemporaryDirectory(prefix="gingham-keras-") as folder:
        out = os.path.join(folder, "run.json")
        command = [sys.executable, "-m", "gingham.bench.keras_worker", "--backend", backend,
                   "--device", device, "--model", model, "--batch", str(batch),
                   "--steps", str(settings.steps), "--precision", settings.precision,
                   "--weights", weights, "--out", out]
        _say(log, f"keras {model} {backend} {device}: {settings.steps} steps x 2 epochs")
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=WORKER_TIMEOUT)
        except subprocess.TimeoutExpired:
            run.error = f"the runner took more than {WORKER_TIMEOUT} s"
            return run
        if done.returncode != 0 or not os.path.exists(out):
            lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
            run.error = lines[-1] if lines else f"the runner exited with {done.returncode}"
            return run
        with open(out) as handle:
            record = json.load(handle)
    run.epoch_seconds, run.losses = record["epoch_seconds"], record["losses"]
    run.step_times, run.first_loss = record["step_seconds"], record["first_loss"]
    return run


def bench_keras(models: Sequence[str], devices: Sequence[str], settings: KerasSettings,
                log: TextIO | None = None) -> list[KerasRun]:
    """Every model on every device with gingham's Keras backend, and with Keras' PyTorch
    backend once per torch device the devices map to (first: it saves the initial weights)."""
    unknown = [m for m in models if m not in KERAS_MODELS]
    if unknown:
        raise BenchError(f"unknown Keras model(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(KERAS_MODELS)}")
    runs: list[KerasRun] = []
    for model in models:
        batch = settings.batch or KERAS_MODELS[model][1]
        with tempfile.TemporaryDirectory(prefix="gingham-keras-weights-") as folder:
            weights = os.path.join(folder, "initial.npz")
            torch_runs: dict[str, KerasRun] = {}
            for device in devices:
                torch_device, hardware = torch_device_for(device) if settings.torch else (
                    None, "")
                if torch_device is not None and torch_device not in torch_runs:
                    run = run_worker("torch", model, torch_device, batch, settings, weights, log)
                    run.hardware = hardware
                    torch_runs[torch_device] = run
                    runs.append(run)
                run = run_worker("gingham", model, device, batch, settings, weights, log)
                run.hardware = hardware or f"{get_device(device).info.name}"
                runs.append(run)
    _check_losses(runs)
    return runs


def _check_losses(runs: list[KerasRun]) -> None:
    """A gingham run whose first loss differs from the PyTorch backend's on the same model by
    more than :data:`LOSS_TOLERANCE` is an error (its time would mean nothing)."""
    reference = {run.model: run for run in runs
                 if run.backend == "torch" and run.first_loss is not None and run.error is None}
    for run in runs:
        baseline = reference.get(run.model)
        if run.backend != "gingham" or baseline is None or run.error is not None:
            continue
        tolerance = LOSS_TOLERANCE[run.precision]
        if not abs(run.first_loss - baseline.first_loss) <= tolerance * abs(baseline.first_loss):
            run.error = (f"WRONG: first loss {run.first_loss:.5f} differs from the PyTorch "
                         f"backend's {baseline.first_loss:.5f} (tolerance {tolerance:g})")


def _losses(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.4f}" for v in values)


def ratio(run: KerasRun, runs: Sequence[KerasRun]) -> float | None:
    """PyTorch's seconds per epoch over this gingham run's, on the same hardware and model."""
    if run.backend != "gingham" or run.epoch is None:
        return None
    for other in runs:
        if (other.backend == "torch" and other.model == run.model
                and other.hardware == run.hardware and other.epoch):
            return other.epoch / run.epoch
    return None


def format_runs(runs: Sequence[KerasRun]) -> str:
    from .report import format_seconds, text_table

    header = ["model", "backend", "device", "batch", "ms/step", "epoch", "first epoch",
              "losses", "ratio"]
    rows = []
    for run in runs:
        if run.error is not None:
            rows.append([run.model, run.backend, run.device, str(run.batch), "-", "-", "-",
                         run.error[:90], "-"])
            continue
        value = ratio(run, runs)
        rows.append([run.model, run.backend, run.device, str(run.batch),
                     f"{run.step_seconds * 1e3:.1f}", format_seconds(run.epoch),
                     format_seconds(run.first_epoch), _losses(run.losses),
                     "" if value is None else f"{value:.2f}x"])
    notes = ["Keras model.fit, two epochs of the given steps: the first holds the first step "
             "(trace + compile), the second is timed; ms/step = its median step; epoch = "
             "ms/step x the model's epoch (50,000 images, digits' 1,438), extrapolated; "
             "ratio = the PyTorch backend's epoch / gingham's on the same hardware"]
    return "\n\n".join([text_table([header, *rows], right={3, 4, 5, 6, 8}), *notes])


def records(runs: Sequence[KerasRun]) -> list[dict]:
    """One JSON record per run."""
    out = []
    for run in runs:
        record = asdict(run)
        record.update(step_seconds=run.step_seconds, epoch=run.epoch,
                      first_epoch=run.first_epoch, ratio=ratio(run, runs))
        out.append(record)
    return out


__all__ = ["KERAS_MODELS", "KerasSettings", "KerasRun", "bench_keras", "format_runs",
           "records", "ratio"]
