"""``gingham bench onnx``: inference through the ONNX frontend beside onnxruntime and PyTorch.

    $ gingham bench onnx                                   # resnet9, resnet18, story
    $ gingham bench onnx resnet18 story --device cuda:0 --batch 64
    $ gingham bench onnx path/to/model.onnx --batch 8 --all-devices --json out.json

A model named as in ``gingham bench model`` (:data:`gingham.bench.model.MODELS`) is its PyTorch
twin (:func:`gingham.bench.model.torch_model`, seed 0, eval mode) exported to ONNX in memory
(``torch.onnx.export``, the TorchScript exporter, opset 17, a dynamic batch axis); a path is an
``.onnx`` file, whose symbolic batch dims take ``--batch`` (any other symbolic dim is an
error: the benchmark cannot guess a sequence length).

Per device, each runner does the same inference on the same inputs, already on the device:

* ``gingham``: :func:`gingham.onnx.load`, then the first call (trace + compile, or load from
  the disk cache, + run; column ``first``), then the median of timed replays.
* ``onnxruntime``: an ``InferenceSession`` with the provider for that hardware
  (``CPUExecutionProvider`` for ``cpu`` and OpenCL on a CPU, ``CUDAExecutionProvider`` for an
  NVIDIA GPU when this onnxruntime has it; none otherwise), inputs and outputs bound on the
  device (``IOBinding``) so that no host copy is timed.
* ``torch``: PyTorch eager under ``torch.no_grad()`` on the torch device the gingham device maps
  to (:func:`gingham.bench.baselines.torch_env`); named models only (a file has no twin).

Timing is :func:`gingham.bench.timing.measure`: one warm-up run, then trials of back-to-back
runs each ended by the device's synchronisation; ms/batch is the median per run. ratio =
baseline time / gingham time on the same hardware (> 1: gingham is faster).

Golden check: every runner's outputs are compared with the reference, onnxruntime on the host
CPU (PyTorch eager on the CPU when onnxruntime is not installed), as the largest relative error
on the norm of an output (:func:`gingham.bench.ops.relative_error`). gingham's outputs are
checked after its first call and again after its last timed run; a gingham run whose error is
not below :data:`TOLERANCE` is reported ``WRONG`` and not timed.

    cases = [named_case("digits", batch=8)]
    runs = bench_onnx(cases, ["cpu"], OnnxSettings(quick=True))
    print(format_runs(runs))
"""

from __future__ import annotations

import copy
import io
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from ..devices import get_device
from .baselines import TorchEnv, host, torch_env
from .model import MODELS, _describe, _say, hardware_of, torch_model
from .ops import TOLERANCE as OP_TOLERANCE
from .ops import BenchError, Golden, relative_error
from .timing import Timing, TrialSettings, measure

#: The largest relative error (on the norm of each output) of a correct fp32 run: the suite's
#: fp32 bound. Exported CIFAR nets agree with onnxruntime to about 1e-6; a wrong kernel is off
#: by far more.
TOLERANCE = OP_TOLERANCE["float32"]

#: The opset of the models exported from PyTorch (the TorchScript exporter's usual one).
OPSET = 17

#: Inference batch per model when ``--batch`` is not given: the training batch, at most 64
#: (ResNet-9's 512 costs a CPU seconds per forward with three runners to time).
MAX_DEFAULT_BATCH = 64

#: The onnxruntime provider of a CPU, and of an NVIDIA GPU.
CPU_PROVIDER, CUDA_PROVIDER = "CPUExecutionProvider", "CUDAExecutionProvider"


@dataclass(frozen=True)
class OnnxSettings(TrialSettings):
    """How ``gingham bench onnx`` runs. ``repeat``: trials per measurement (None: 5, 3 with
    ``quick``); ``torch`` / ``onnxruntime``: whether those baselines run."""

    quick: bool = False
    repeat: int | None = None
    torch: bool = True
    onnxruntime: bool = True


@dataclass
class OnnxCase:
    """One model to run: the ONNX graph, its inputs (by name, in the graph's order) and, for a
    named model, the PyTorch module it was exported from."""

    name: str
    source: str  # where the graph comes from, for the table and the records
    proto: Any  # onnx.ModelProto
    feeds: dict[str, np.ndarray]
    batch: int
    module: Any = None  # the PyTorch twin (eval mode, on the CPU), or None for a file
    notes: list[str] = field(default_factory=list)

    @property
    def input_shapes(self) -> dict[str, list[int]]:
        return {name: list(array.shape) for name, array in self.feeds.items()}


@dataclass
class InferenceRun:
    """One runner (gingham, onnxruntime or torch) on one device, one model."""

    model: str
    framework: str  # "gingham", "onnxruntime" or "torch"
    device: str  # gingham device id, onnxruntime provider or torch device
    label: str
    batch: int
    hardware: str = ""  # runs on the same hardware are the ones compared
    load_seconds: float | None = None  # gingham.onnx.load / InferenceSession(...)
    first_seconds: float | None = None  # the first call: gingham traces and compiles in it
    timing: Timing | None = None
    golden: Golden | None = None
    reference: bool = False  # its outputs are the golden reference
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.framework} {self.device}"

    @property
    def status(self) -> str:
        """``ok``; ``wrong`` (failed the golden check); ``error`` (did not run);
        ``unchecked`` (ran, with nothing to check it against)."""
        if self.error is not None:
            return "error"
        if self.golden is not None and not self.golden.ok:
            return "wrong"
        if self.timing is None:
            return "error"
        return "ok" if self.golden is not None or self.reference else "unchecked"

    @property
    def seconds(self) -> float | None:
        """The median seconds per batch, for a run that is neither wrong nor failed."""
        return self.timing.seconds if self.status in ("ok", "unchecked") else None

    def record(self, case: OnnxCase, ratios: dict[str, float] | None = None) -> dict:
        seconds = self.seconds
        return {
            "name": f"onnx.{self.model}", "model": self.model, "source": case.source,
            "framework": self.framework, "device": self.device, "label": self.label,
            "hardware": self.hardware, "batch": self.batch, "input_shapes": case.input_shapes,
            "unit": "milliseconds per batch, the median of the timed runs",
            "ms_per_batch": None if seconds is None else seconds * 1e3,
            "inputs_per_second": None if not seconds else self.batch / seconds,
            "load_seconds": self.load_seconds, "first_call_seconds": self.first_seconds,
            "timed_runs": self.timing.runs if self.timing else 0,
            "trials_ms": [t * 1e3 for t in self.timing.trials] if self.timing else [],
            "timing_note": self.timing.note if self.timing else "",
            "golden": self.golden.as_dict() if self.golden else None,
            "golden_reference": self.reference, "status": self.status, "error": self.error,
            "ratios": ratios or {}, "notes": self.notes,
        }


# ---- the models ------------------------------------------------------------------------------

def _onnx():
    try:
        import onnx
    except ImportError:
        raise BenchError("gingham bench onnx needs the onnx package: pip install "
                         "'gingham[onnx]'") from None
    return onnx


def onnxruntime_module():
    """onnxruntime, or None where it is not installed (no such rows then, and a note)."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


def default_batch(name: str) -> int:
    """A named model's inference batch when ``--batch`` is not given."""
    return min(MODELS[name].batch, MAX_DEFAULT_BATCH)


def named_case(name: str, batch: int | None = None) -> OnnxCase:
    """A model of :data:`MODELS` exported from its PyTorch twin, with synthetic images.

        case = named_case("resnet18", batch=64)     # case.proto: an onnx.ModelProto
    """
    onnx = _onnx()
    if name not in MODELS:
        raise BenchError(f"unknown model {name!r}; choose from {', '.join(MODELS)} or give a "
                         "path to an .onnx file")
    try:
        import torch
    except ImportError:
        raise BenchError(f"model {name!r} is exported from PyTorch, which is not installed: "
                         "pip install 'gingham[bench]', or give an .onnx file") from None
    spec = MODELS[name]
    batch = batch or default_batch(name)
    torch.manual_seed(0)
    module = torch_model(torch, name, spec.classes).eval()
    example = torch.zeros((2, *spec.input_shape))
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the exporter's deprecation and tracer warnings
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), buffer, dynamo=False, input_names=["input"],
                          output_names=["logits"], opset_version=OPSET,
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    images = np.random.default_rng(0).standard_normal((batch, *spec.input_shape),
                                                      dtype=np.float32)
    return OnnxCase(name, f"{spec.description}, exported from PyTorch (opset {OPSET})",
                    onnx.load_from_string(buffer.getvalue()), {"input": images}, batch, module)


def file_case(path: str, batch: int | None = None) -> OnnxCase:
    """An ``.onnx`` file with random inputs of its declared types. Each input's first dim, and
    any dim sharing its symbolic name, is the batch: ``batch`` where it is symbolic (default 1);
    a fixed one stays (``batch`` must then agree). Any other symbolic dim is an error."""
    onnx = _onnx()
    from onnx.helper import tensor_dtype_to_np_dtype

    if not os.path.isfile(path):
        raise BenchError(f"unknown model {path!r}: choose from {', '.join(MODELS)} or give "
                         "the path of an .onnx file (no such file)")
    try:
        proto = onnx.load(path)
    except Exception as exc:  # noqa: BLE001 - onnx raises several types for a bad file
        raise BenchError(f"{path}: not an ONNX model ({_describe(exc)})") from None
    graph = proto.graph
    initializers = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    batch_names = {dims[0].dim_param for i in inputs
                   for dims in [i.type.tensor_type.shape.dim] if dims and dims[0].dim_param}
    rng = np.random.default_rng(0)
    feeds, chosen, notes = {}, set(), []
    for value in inputs:
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            raise BenchError(f"{path}: input {value.name!r} is a {kind}, not a tensor; "
                             "gingham bench onnx feeds tensors only")
        shape = []
        for position, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                size = dim.dim_value
                if position == 0 and batch is not None and size != batch:
                    raise BenchError(f"{path}: input {value.name!r} has a fixed batch of "
                                     f"{size}; --batch {batch} cannot change it")
            elif position == 0 or dim.dim_param in batch_names:
                size = batch or 1
            else:
                what = f"{dim.dim_param!r}" if dim.dim_param else "unnamed"
                raise BenchError(
                    f"{path}: input {value.name!r} has a symbolic dim {position} ({what}) that "
                    "gingham bench onnx cannot choose: only the batch (each input's first "
                    "dim) takes --batch; fix that dim in the model (e.g. onnx's "
                    "update_inputs_outputs_dims) and run it again")
            if position == 0:
                chosen.add(size)
            shape.append(size)
        dtype = np.dtype(tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
        feeds[value.name] = _random(rng, tuple(shape), dtype)
        if dtype.kind in "iu":
            notes.append(f"integer input {value.name!r}: random values in [0, 10)")
    if len(chosen) > 1:
        notes.append(f"the inputs' first dims differ ({sorted(chosen)}); batch = the first's")
    name = os.path.splitext(os.path.basename(path))[0]
    first = next(iter(feeds.values()), np.zeros(()))
    size = first.shape[0] if first.ndim else 1
    return OnnxCase(name, path, proto, feeds, int(size), None, notes)


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 10, shape).astype(dtype)
    raise BenchError(f"inputs of dtype {dtype} are not supported by gingham bench onnx")


# ---- the runners -----------------------------------------------------------------------------

def _first(call: Callable[[], Any], sync: Callable[[], object]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = call()
    sync()
    return result, time.perf_counter() - start


def _no_sync() -> None:
    return None


def _check(outputs: Sequence[np.ndarray], reference: tuple[str, list[np.ndarray]] | None
           ) -> Golden | None:
    if reference is None:
        return None
    name, expected = reference
    return Golden(name, relative_error([np.asarray(o) for o in outputs], expected), TOLERANCE)


def run_gingham(case: OnnxCase, device_id: str, reference, settings: OnnxSettings,
                log: TextIO | None = None) -> InferenceRun:
    """Load ``case`` with :func:`gingham.onnx.load` on ``device_id``, check its first call's
    outputs against ``reference`` (``(name, arrays)`` or None), then time replays."""
    import gingham
    import gingham.onnx

    run = InferenceRun(case.name, "gingham", device_id, "", case.batch)
    try:
        device = get_device(device_id)
        run.label = f"gingham {gingham.__version__} {device_id} ({device.info.name})"
        run.hardware = _hardware(device.info, settings)
        start = time.perf_counter()
        model = gingham.onnx.load(case.proto, device_id)
        run.load_seconds = time.perf_counter() - start
        # On the device before the first call, as the baselines' inputs are.
        inputs = [gingham.tensor(array, device=device_id) for array in case.feeds.values()]
        device.synchronize()
        _say(log, f"{case.name} {run.name}: first call (trace + compile + run)")
        outputs, run.first_seconds = _first(lambda: model(*inputs), device.synchronize)
        run.golden = _check([o.numpy() for o in outputs], reference)
        if run.golden is not None and not run.golden.ok:
            _say(log, f"{case.name} {run.name}: WRONG (relative error "
                      f"{run.golden.rel_error:.2e}); not timed")
            return run
        _say(log, f"{case.name} {run.name}: timing (first call {run.first_seconds:.1f} s)")
        state: dict[str, Any] = {}

        def replay() -> None:
            state["out"] = model(*inputs)

        run.timing = measure(replay, device.synchronize, repeat=settings.trials,
                             budget=settings.budget)
        # The last timed run checked too: a kernel right only sometimes (a race) is caught.
        last = _check([o.numpy() for o in state["out"]], reference)
        if last is not None and not last.rel_error <= run.golden.rel_error:  # the worse
            run.golden = last
        if model.traces != 1:
            run.notes.append(f"the graph was traced {model.traces} times")
        if device.info.dialect is None:
            run.notes.append("the reference interpreter: a check of the frontend, not a "
                             "benchmark")
    except Exception as exc:  # noqa: BLE001 - one runner failing must not stop the others
        run.error = _describe(exc)
        _say(log, f"{case.name} {run.name}: ERROR {run.error}")
    return run


@dataclass(frozen=True)
class OrtTarget:
    """An onnxruntime provider on one piece of hardware (``device_id``: the CUDA ordinal)."""

    provider: str
    device_type: str  # OrtValue's device: "cpu" or "cuda"
    device_id: int = 0

    @property
    def name(self) -> str:
        return self.provider if self.device_type == "cpu" else \
            f"{self.provider}:{self.device_id}"


def ort_target(info, ort) -> tuple[OrtTarget | None, str]:
    """The onnxruntime provider for a gingham device (``info``: its DeviceInfo), or None and
    why: the CPU provider for a CPU (the C backend, OpenCL on a CPU), CUDA for an NVIDIA GPU
    when this onnxruntime has it."""
    if info.kind == "cpu":
        return OrtTarget(CPU_PROVIDER, "cpu"), ""
    if info.kind != "gpu":
        return None, f"no onnxruntime provider for a {info.kind} device"
    available = ort.get_available_providers()
    is_nvidia = info.dialect == "cuda" or "nvidia" in info.vendor.lower()
    if not is_nvidia or CUDA_PROVIDER not in available:
        return None, (f"onnxruntime {ort.__version__} has no provider for {info.vendor} "
                      f"{info.name!r} (available: {', '.join(available)}; "
                      "pip install onnxruntime-gpu for CUDA)")
    index = 0
    env = torch_env(info)  # the CUDA ordinal PyTorch gives the device, which ORT shares
    if env.device is not None and env.device.startswith("cuda:"):
        index = int(env.device.split(":")[1])
    elif info.dialect == "cuda":
        index = int(info.id.split(":")[1])
    return OrtTarget(CUDA_PROVIDER, "cuda", index), ""


def _session(case: OnnxCase, target: OrtTarget, ort):
    options = [{"device_id": target.device_id}] if target.device_type == "cuda" else None
    session = ort.InferenceSession(case.proto.SerializeToString(),
                                   providers=[target.provider], provider_options=options)
    # onnxruntime falls back to the CPU silently when a provider fails to start.
    if session.get_providers()[0] != target.provider:
        raise BenchError(f"onnxruntime started {session.get_providers()} instead of "
                         f"{target.provider}")
    return session


def run_onnxruntime(case: OnnxCase, target: OrtTarget, hardware: str, reference,
                    settings: OnnxSettings, ort, log: TextIO | None = None) -> InferenceRun:
    """Time ``case`` in onnxruntime with ``target``'s provider, inputs and outputs bound on its
    device (``IOBinding``: no host copies timed)."""
    run = InferenceRun(case.name, "onnxruntime", target.name,
                       f"onnxruntime {ort.__version__} {target.name}", case.batch, hardware)
    try:
        start = time.perf_counter()
        session = _session(case, target, ort)
        run.load_seconds = time.perf_counter() - start
        binding = session.io_binding()
        for name, array in case.feeds.items():
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(
                array, target.device_type, target.device_id))
        for output in session.get_outputs():
            binding.bind_output(output.name, target.device_type, target.device_id)

        def infer() -> None:
            # Synchronous: Run waits for the provider's stream before it returns.
            session.run_with_iobinding(binding)

        _say(log, f"{case.name} {run.name}: first run")
        _, run.first_seconds = _first(infer, _no_sync)
        run.golden = _check(binding.copy_outputs_to_cpu(), reference)
        run.timing = measure(infer, _no_sync, repeat=settings.trials, budget=settings.budget)
    except Exception as exc:  # noqa: BLE001
        run.error = _describe(exc)
        _say(log, f"{case.name} {run.name}: ERROR {run.error}")
    return run


def run_torch(case: OnnxCase, env: TorchEnv, hardware: str, reference, settings: OnnxSettings,
              log: TextIO | None = None) -> InferenceRun:
    """Time the PyTorch twin of ``case`` in eager mode under ``torch.no_grad()``."""
    assert env.device is not None and case.module is not None
    run = InferenceRun(case.name, "torch", env.device, f"{env.label} eager, no_grad",
                       case.batch, hardware)
    try:
        torch = env.torch
        net = copy.deepcopy(case.module).to(env.device).eval()  # the case's module stays
        inputs = [env.tensor(array) for array in case.feeds.values()]
        state: dict[str, Any] = {}

        def infer() -> None:
            with torch.no_grad():
                state["out"] = net(*inputs)

        _say(log, f"{case.name} {run.name}: first call")
        _, run.first_seconds = _first(infer, env.sync)
        run.golden = _check([host(state["out"])], reference)
        run.timing = measure(infer, env.sync, repeat=settings.trials, budget=settings.budget)
    except Exception as exc:  # noqa: BLE001
        run.error = _describe(exc)
        _say(log, f"{case.name} {run.name}: ERROR {run.error}")
    finally:
        if env.device.startswith("cuda"):
            env.torch.cuda.empty_cache()
    return run


def golden_reference(case: OnnxCase, settings: OnnxSettings, ort
                     ) -> tuple[tuple[str, list[np.ndarray]] | None, str]:
    """The outputs every runner is checked against, with their name: onnxruntime's on the host
    CPU, else PyTorch eager's on the CPU (a named model), else None; and a note on the choice.
    """
    failed = ""
    if ort is not None and settings.onnxruntime:
        try:
            session = _session(case, OrtTarget(CPU_PROVIDER, "cpu"), ort)
            name = f"onnxruntime {ort.__version__} {CPU_PROVIDER}"
            return (name, [np.asarray(o) for o in session.run(None, case.feeds)]), ""
        except Exception as exc:  # noqa: BLE001 - e.g. an op onnxruntime does not implement
            failed = f"onnxruntime could not run the model ({_describe(exc)}); "
    if case.module is not None and settings.torch:
        import torch  # the module was exported from it

        with torch.no_grad():
            out = case.module(*(torch.from_numpy(a) for a in case.feeds.values()))
        return (f"torch {torch.__version__} cpu", [host(out)]), failed.rstrip("; ")
    ort_why = "off" if not settings.onnxruntime else "failed" if failed else "not installed"
    torch_why = "off" if not settings.torch else "no twin of an .onnx file"
    return None, (f"{failed}nothing to check gingham's outputs against (onnxruntime: {ort_why}; "
                  f"PyTorch: {torch_why}): UNCHECKED")


def _hardware(info, settings: OnnxSettings) -> str:
    """What a device runs on: ``cpu`` for every CPU device (the C backend and OpenCL on a CPU
    share one onnxruntime and one PyTorch baseline), PyTorch's name for a GPU."""
    if info.kind == "cpu":
        return "cpu"
    return hardware_of(info, with_torch=settings.torch)


def bench_onnx(cases: Sequence[OnnxCase], device_ids: Sequence[str], settings: OnnxSettings,
               log: TextIO | None = None) -> tuple[list[InferenceRun], list[str]]:
    """Every case on every gingham device, and onnxruntime and PyTorch once per piece of
    hardware those devices run on. Returns the runs and notes about the whole run."""
    names = [case.name for case in cases]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # runs are matched to their baselines and records by the model's name
        raise BenchError(f"two models named {', '.join(twice)}: give each model once, and "
                         ".onnx files of different names")
    ort = onnxruntime_module() if settings.onnxruntime else None
    notes: list[str] = []
    if settings.onnxruntime and ort is None:
        notes.append("onnxruntime is not installed (pip install 'gingham[bench]'): no "
                     "onnxruntime rows")
    devices = [get_device(d) for d in device_ids]
    ort_targets: dict[str, OrtTarget] = {}
    envs: dict[str, TorchEnv] = {}
    for device in devices:
        hardware = _hardware(device.info, settings)
        if ort is not None:
            target, why = ort_target(device.info, ort)
            if target is not None:
                ort_targets.setdefault(hardware, target)
            else:
                notes.append(f"no onnxruntime row for {device.id}: {why}")
        if settings.torch:
            env = torch_env(device.info)
            if env.device is not None:
                envs.setdefault(hardware, env)
            else:
                notes.append(f"no PyTorch row for {device.id}: {env.reason}")
    runs: list[InferenceRun] = []
    for case in cases:
        reference, why = golden_reference(case, settings, ort)
        if why:
            notes.append(f"{case.name}: {why}")
        for device in devices:
            runs.append(run_gingham(case, device.id, reference, settings, log))
        for hardware, target in ort_targets.items():
            runs.append(run_onnxruntime(case, target, hardware, reference, settings, ort, log))
            if reference is not None and target.device_type == "cpu":
                runs[-1].reference = reference[0].startswith("onnxruntime")
        if case.module is None and envs:
            notes.append(f"{case.name}: an .onnx file has no PyTorch twin: no torch rows")
        for hardware, env in envs.items() if case.module is not None else ():
            runs.append(run_torch(case, env, hardware, reference, settings, log))
            if reference is not None and env.device == "cpu":
                runs[-1].reference = reference[0].startswith("torch")
    return runs, list(dict.fromkeys(notes))


# ---- reporting -------------------------------------------------------------------------------

def ratios(runs: Sequence[InferenceRun]) -> dict[int, dict[str, float]]:
    """For each gingham run (by index): baseline time / gingham time of every baseline run of
    the same model on the same hardware, keyed by the baseline's name."""
    out: dict[int, dict[str, float]] = {}
    for index, run in enumerate(runs):
        if run.framework != "gingham" or not run.seconds:
            continue
        out[index] = {other.name: other.seconds / run.seconds for other in runs
                      if other.framework != "gingham" and other.model == run.model
                      and other.hardware == run.hardware and other.seconds is not None}
    return out


def _check_cell(run: InferenceRun) -> str:
    if run.reference:
        return "reference"
    if run.golden is None:
        return "UNCHECKED" if run.error is None else "-"
    return f"{'ok' if run.golden.ok else 'WRONG'} {run.golden.rel_error:.0e}"


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ratio(entries: dict[str, float], framework: str) -> str:
    values = [v for name, v in entries.items() if name.split()[0] == framework]
    if not values:
        return "-"
    return f"{values[0]:.2f}" if values[0] >= 0.1 else f"{values[0]:.2g}"


def format_runs(runs: Sequence[InferenceRun], notes: Sequence[str] = ()) -> str:
    """The table (one line per model and runner), what the columns mean, then the notes; a
    wrong or failed run is named in the notes as well as in its row."""
    header = ["model", "runner", "device", "batch", "check", "ms/batch", "inputs/s", "load s",
              "first s", "ort/gingham", "torch/gingham"]
    rows = [header]
    table = ratios(runs)
    lines_after: list[str] = []
    for index, run in enumerate(runs):
        seconds = run.seconds
        if run.error is not None:
            time_cell = "ERROR"
            lines_after.append(f"{run.model} {run.name} failed: {run.error}")
        elif run.status == "wrong":
            time_cell = "WRONG"
            assert run.golden is not None
            lines_after.append(
                f"{run.model} {run.name}: outputs are WRONG: relative error "
                f"{run.golden.rel_error:.2e} against {run.golden.reference} (tolerance "
                f"{run.golden.tolerance:g})" + ("; not timed" if run.timing is None else ""))
        else:
            time_cell = _number(None if seconds is None else seconds * 1e3, 2) + \
                ("*" if run.timing is not None and run.timing.note else "")
        entries = table.get(index, {})
        rows.append([run.model, run.framework, run.device, str(run.batch), _check_cell(run),
                     time_cell, _number(run.batch / seconds if seconds else None, 0),
                     _number(run.load_seconds, 2), _number(run.first_seconds, 2),
                     _ratio(entries, "onnxruntime") if run.framework == "gingham" else "",
                     _ratio(entries, "torch") if run.framework == "gingham" else ""])
        lines_after.extend(f"{run.model} {run.name}: {note}" for note in run.notes)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    right = {3, 5, 6, 7, 8, 9, 10}
    references = ", ".join(dict.fromkeys(
        run.golden.reference for run in runs if run.golden is not None)) or "none"
    lines = ["  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
    lines += ["", "ms/batch = median of the timed runs (inputs on the device, synchronised); "
                  "load = gingham.onnx.load / InferenceSession(...); first = the first call "
                  "(gingham: trace + compile, or load from the disk cache, + run); ratio = baseline time / gingham time on "
                  "the same hardware (> 1: gingham is faster); check = relative error against "
                  f"the reference ({references}), tolerance {TOLERANCE:g}"]
    starred = [run.timing.note for run in runs if run.timing is not None and run.timing.note]
    lines += [f"* {text}" for text in dict.fromkeys(starred)]
    everything = [*lines_after, *notes]
    if everything:
        lines += [""] + [f"note: {n}" for n in dict.fromkeys(everything)]
    return "\n".join(lines)


def records(runs: Sequence[InferenceRun], cases: Sequence[OnnxCase], context: dict
            ) -> list[dict]:
    """One JSON record per run; gingham runs carry their ratios."""
    table = ratios(runs)
    by_name = {case.name: case for case in cases}
    return [{**context, **run.record(by_name[run.model], table.get(i))}
            for i, run in enumerate(runs)]


__all__ = ["OnnxSettings", "OnnxCase", "InferenceRun", "OrtTarget", "named_case", "file_case",
           "default_batch", "golden_reference", "ort_target", "run_gingham", "run_onnxruntime",
           "run_torch", "bench_onnx", "ratios", "format_runs", "records", "TOLERANCE"]
