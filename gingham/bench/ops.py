"""The op benchmarks: GEMM, a ResNet 3x3 conv layer (forward, backward), an elementwise chain.

    settings = Settings(device_id="cpu", quick=True)
    results = run_ops(settings)          # list[OpResult], golden-checked, then timed

Each op is checked before it is timed: gingham's output (copied back once) is compared with the
first baseline that computes the same thing on the same device (PyTorch), or with a NumPy host
reference where no such baseline exists. An op whose relative error (on the Frobenius norm, per
output) is not below ``GOLDEN_TOLERANCE`` is recorded as wrong and never timed; an op that fails
to compile or run is recorded with its error. Either way the other ops still run. The output
of the last timed run is checked again, so a kernel that is right only sometimes (a race) is
caught too.

Gingham is timed on device-resident buffers (no host copies in the timed loop): the compiled
executable replayed on its input buffers, with the device synchronised after each trial.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence, TextIO

import numpy as np

from gingham import tile
from gingham.errors import GinghamError
from gingham.runtime import executable

from . import baselines as bl
from .timing import Timing, measure

GEMM = """
function (A[M, K], B[K, N]) -> (C) {
    C[i, j : M, N] = +(A[i, k] * B[k, j]);
}
"""
CONV = """
function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
    O[n, y, x, co : N, H, W, CO] = +(I[n, y + ky - 1, x + kx - 1, ci] * F[ky, kx, ci, co]);
}
"""
# A, B and C are scalars (0-d tensors): the chain then moves exactly the bytes of a copy
# (X read once, O written once), so its time compares directly with the copy bound.
ELEMENTWISE = """
function (X, A, B, C) -> (O) {
    O = relu(X * A + B) * C;
}
"""
ELEMENTWISE_SCALARS = (1.5, -0.25, 2.0)

GROUPS = ("gemm", "conv", "elementwise")
GOLDEN_TOLERANCE = 1e-3  # fp32: relative error on the norm

CONV_BATCH = 128
CONV_BATCH_QUICK = 32
CONV_IMAGE = 32
CONV_CHANNELS = 64
CONV_KERNEL = 3
ELEMENTWISE_COUNT = 2**24


class BenchError(GinghamError):
    """A benchmark that cannot run as asked (a device without compiled kernels, a bad name)."""


@dataclass(frozen=True)
class Sizes:
    """The problem sizes of one run. ``scale`` shrinks them (tests; never for real numbers)."""

    gemm: tuple[int, ...]
    conv_batch: int
    elementwise: int

    @classmethod
    def for_device(cls, kind: str, quick: bool, scale: float = 1.0) -> Sizes:
        gemm = (1024, 4096) if kind == "gpu" else (1024,)
        batch = CONV_BATCH_QUICK if quick else CONV_BATCH
        return cls(gemm=tuple(max(8, round(n * scale)) for n in gemm),
                   conv_batch=max(1, round(batch * scale)),
                   elementwise=max(1024, round(ELEMENTWISE_COUNT * scale)))


@dataclass(frozen=True)
class Settings:
    """What ``gingham bench ops`` was asked to do."""

    device_id: str
    quick: bool = False
    repeat: int | None = None  # trials per measurement; None: 5, or 3 under quick
    only: tuple[str, ...] = GROUPS
    scale: float = 1.0

    @property
    def trials(self) -> int:
        return self.repeat if self.repeat is not None else (3 if self.quick else 5)

    @property
    def budget(self) -> float:
        """Seconds one measurement aims for (after its warm-up run)."""
        return 0.5 if self.quick else 2.0


@dataclass
class Golden:
    """The golden check of one op: gingham's outputs against a reference's."""

    reference: str
    rel_error: float
    tolerance: float = GOLDEN_TOLERANCE

    @property
    def ok(self) -> bool:
        return self.rel_error < self.tolerance  # False for NaN

    def as_dict(self) -> dict:
        rel = self.rel_error if math.isfinite(self.rel_error) else str(self.rel_error)
        return {"reference": self.reference, "rel_error": rel, "tolerance": self.tolerance,
                "ok": self.ok}


@dataclass
class BaselineResult:
    name: str
    label: str
    timing: Timing | None = None
    error: str | None = None


@dataclass
class OpResult:
    """One benchmarked op on one device: gingham's check and time, and each baseline's time."""

    name: str
    group: str
    shape: str
    dtype: str
    params: dict
    flops: int | None = None  # per run; None for a bandwidth-bound op
    nbytes: int | None = None  # bytes read + written once, for a bandwidth-bound op
    timing: Timing | None = None
    golden: Golden | None = None
    error: str | None = None
    baselines: list[BaselineResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``ok``, ``wrong`` (failed the golden check) or ``error`` (did not compile or run)."""
        if self.error is not None:
            return "error"
        if self.golden is not None and not self.golden.ok:
            return "wrong"
        return "ok" if self.timing is not None else "error"

    @property
    def seconds(self) -> float | None:
        """gingham's median time per run, only for a checked, timed op."""
        return self.timing.seconds if self.status == "ok" else None


def relative_error(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray]) -> float:
    """The largest ||out - ref|| / ||ref|| over the outputs (float64; inf on a shape mismatch)."""
    if len(outputs) != len(references):
        return math.inf
    worst = 0.0
    for out, ref in zip(outputs, references):
        if out.shape != ref.shape:
            return math.inf
        ref64 = ref.astype(np.float64)
        scale = float(np.linalg.norm(ref64)) or 1.0
        err = float(np.linalg.norm(out.astype(np.float64) - ref64)) / scale
        if not err <= worst:  # keeps NaN
            worst = err
    return worst


class GinghamRun:
    """A bound Tile program compiled for a device, with its inputs resident there.

    ``outputs`` names the outputs :meth:`outputs` returns, in that order (default: all, in
    header order).
    """

    def __init__(self, fn: tile.Function, arrays: Sequence[np.ndarray], device,
                 outputs: Sequence[str] | None = None) -> None:
        self.device = device
        self.bound = fn.bind(*arrays)
        self.output_names = list(outputs or self.bound.program.outputs)
        self._last: list | None = None
        self.exe = executable(self.bound, device)  # compiles (disk-cached) on first use
        self.inputs = []
        for array in arrays:
            value = np.require(array, requirements="C")
            buffer = device.alloc(max(1, value.nbytes))
            device.copy_in(buffer, value)
            self.inputs.append(buffer)
        device.synchronize()

    def run(self) -> None:
        self._last = self.exe.run(self.inputs)

    def outputs(self, rerun: bool = True) -> list[np.ndarray]:
        """Copy every output back (for the golden checks only), after one more run or of the
        last run."""
        if rerun or self._last is None:
            self.run()
        buffers = dict(zip(self.bound.program.outputs, self._last))
        results = []
        for name in self.output_names:
            result = np.empty(self.bound.shapes[name], dtype=self.bound.dtypes[name])
            self.device.copy_out(buffers[name], result)
            results.append(result)
        self.device.synchronize()
        return results


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class OpBench:
    """Runs the op benchmarks of :class:`Settings` on one device."""

    def __init__(self, settings: Settings, device, log: TextIO | None = None) -> None:
        if device.info.dialect is None:
            raise BenchError(f"device {device.id!r} compiles no kernels; gingham bench ops "
                             "times compiled kernels: use cpu, opencl:N or cuda:N")
        self.settings = settings
        self.device = device
        self.sizes = Sizes.for_device(device.info.kind, settings.quick, settings.scale)
        self.torch = bl.torch_env(device.info)
        self.on_cpu = device.info.kind == "cpu"
        self.log = log if log is not None else sys.stderr
        self.rng = np.random.default_rng(0)

    # -- the ops -------------------------------------------------------------------------------
    def run(self) -> list[OpResult]:
        results: list[OpResult] = []
        if "gemm" in self.settings.only:
            for n in self.sizes.gemm:
                results.append(self.gemm(n))
        if "conv" in self.settings.only:
            results.extend(self.conv(self.sizes.conv_batch))
        if "elementwise" in self.settings.only:
            results.append(self.elementwise(self.sizes.elementwise))
        return results

    def _normal(self, *shape: int) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32)

    def gemm(self, n: int) -> OpResult:
        a, b = self._normal(n, n), self._normal(n, n)
        result = OpResult("gemm", "gemm", f"{n}x{n}x{n}", "float32", {"M": n, "N": n, "K": n},
                          flops=2 * n**3)
        baselines = []
        if self.torch.device is not None:
            baselines.append(self._make(result, "torch", lambda: bl.torch_gemm(self.torch, a, b)))
        if self.on_cpu:
            baselines.append(self._make(result, "numpy", lambda: bl.numpy_gemm(a, b)))
        self._evaluate(result, lambda: GinghamRun(tile.function(GEMM), [a, b], self.device),
                       baselines, lambda: bl.reference_gemm(a, b))
        return result

    def conv(self, batch: int) -> list[OpResult]:
        size, channels, k = CONV_IMAGE, CONV_CHANNELS, CONV_KERNEL
        x = self._normal(batch, size, size, channels)
        f = self._normal(k, k, channels, channels) * np.float32(1 / math.sqrt(k * k * channels))
        d_out = self._normal(batch, size, size, channels)
        params = {"N": batch, "H": size, "W": size, "CI": channels, "CO": channels, "KH": k,
                  "KW": k, "padding": 1, "layout": "NHWC, F[KH, KW, CI, CO]"}
        shape = f"N{batch} {size}x{size} {channels}->{channels} {k}x{k}"
        forward_flops = 2 * batch * size * size * channels * channels * k * k
        forward = OpResult("conv3x3.forward", "conv", shape, "float32", params,
                           flops=forward_flops)
        backward = OpResult("conv3x3.backward", "conv", shape, "float32", params,
                            flops=2 * forward_flops)
        backward.notes.append("dI and dF together")
        if batch != CONV_BATCH:
            note = f"batch {batch}, not {CONV_BATCH}"
            note += " (--quick)" if self.settings.quick else ""
            forward.notes.append(note)
            backward.notes.append(note)

        pairs: list[tuple[bl.Baseline, bl.Baseline]] = []
        errors: list[BaselineResult] = []
        if self.torch.device is not None:
            for channels_last in (False, True):
                try:
                    pairs.append(bl.torch_conv(self.torch, x, f, d_out, channels_last))
                except Exception as exc:  # noqa: BLE001 - a broken baseline must not stop it
                    name = "torch-cl" if channels_last else "torch"
                    errors.append(BaselineResult(name, self.torch.label, error=_describe(exc)))

        fn = tile.function(CONV)

        def baselines_of(index: int, result: OpResult) -> list[bl.Baseline]:
            result.baselines.extend(BaselineResult(e.name, e.label, error=e.error)
                                    for e in errors)
            return [pair[index] for pair in pairs]

        self._evaluate(forward, lambda: GinghamRun(fn, [x, f], self.device),
                       baselines_of(0, forward), lambda: bl.reference_conv_forward(x, f))

        def backward_run() -> GinghamRun:
            gradient = fn._gradient(fn.bind(x, f))  # takes (I, F, dO), gives dI and dF
            names = [gradient.gradient_names[name] for name in ("I", "F")]
            return GinghamRun(gradient.function, [x, f, d_out], self.device, outputs=names)

        self._evaluate(backward, backward_run, baselines_of(1, backward),
                       lambda: bl.reference_conv_backward(x, f, d_out))
        return [forward, backward, combine("conv3x3.forward+backward", forward, backward)]

    def elementwise(self, count: int) -> OpResult:
        x = self._normal(count)
        a, b, c = ELEMENTWISE_SCALARS
        result = OpResult("elementwise", "elementwise", f"{count}", "float32",
                          {"elements": count, "expression": "O = relu(X * A + B) * C",
                           "A, B, C": f"scalars {a}, {b}, {c}"},
                          nbytes=2 * count * 4)
        result.notes.append("A, B, C scalars; bytes = X read + O written")
        baselines: list[bl.Baseline | None] = []
        if self.torch.device is not None:
            try:
                baselines.extend(bl.torch_elementwise(self.torch, x, a, b, c))
            except Exception as exc:  # noqa: BLE001
                result.baselines.append(BaselineResult("torch", self.torch.label,
                                                       error=_describe(exc)))
        scalars = [np.array(v, dtype=np.float32) for v in (a, b, c)]
        self._evaluate(result, lambda: GinghamRun(tile.function(ELEMENTWISE), [x, *scalars],
                                                  self.device),
                       baselines, lambda: bl.reference_elementwise(x, a, b, c))
        return result

    # -- checking and timing -------------------------------------------------------------------
    def _make(self, result: OpResult, name: str, factory: Callable[[], bl.Baseline]
              ) -> bl.Baseline | None:
        try:
            return factory()
        except Exception as exc:  # noqa: BLE001 - a broken baseline must not stop the run
            result.baselines.append(BaselineResult(name, "", error=_describe(exc)))
            return None

    def _progress(self, result: OpResult, what: str) -> None:
        print(f"bench: {result.name} {result.shape}: {what}", file=self.log, flush=True)

    def _measure(self, run: Callable[[], object], sync: Callable[[], object]) -> Timing:
        return measure(run, sync, repeat=self.settings.trials, budget=self.settings.budget)

    def _reference(self, result: OpResult, baselines: list[bl.Baseline],
                   host_reference: Callable[[], list[np.ndarray]]
                   ) -> tuple[str, list[np.ndarray]]:
        """The outputs to check gingham against: the first baseline that computes the op."""
        for baseline in baselines:
            if baseline.result is None:
                continue
            try:
                return baseline.name, baseline.result()
            except Exception as exc:  # noqa: BLE001
                result.notes.append(f"{baseline.name} failed: {_describe(exc)}")
        return "numpy (host)", host_reference()

    def _evaluate(self, result: OpResult, make_run: Callable[[], GinghamRun],
                  baselines: Sequence[bl.Baseline | None],
                  host_reference: Callable[[], list[np.ndarray]]) -> None:
        usable = [b for b in baselines if b is not None]
        self._progress(result, "reference")
        try:
            reference_name, reference = self._reference(result, usable, host_reference)
        except Exception as exc:  # noqa: BLE001 - without a reference nothing can be checked
            result.error = f"no reference to check against: {_describe(exc)}"
            self._progress(result, f"ERROR {result.error}")
            return
        try:
            self._progress(result, "gingham: compile and check")
            run = make_run()
            outputs = run.outputs()
            result.golden = Golden(reference_name, relative_error(outputs, reference))
            if result.golden.ok:
                self._progress(result, "gingham: time")
                result.timing = self._measure(run.run, self.device.synchronize)
                # Checked again on the last timed run: a racy kernel can pass once.
                after = Golden(reference_name, relative_error(run.outputs(rerun=False),
                                                              reference))
                if not after.ok:
                    result.notes.append(f"correct before timing, wrong after it (relative "
                                        f"error {after.rel_error:.2e})")
                    result.golden = after
            if not result.golden.ok:
                self._progress(result, f"gingham: WRONG (relative error "
                                       f"{result.golden.rel_error:.2e} against {reference_name})")
        except Exception as exc:  # noqa: BLE001 - one broken op must not stop the others
            result.error = _describe(exc)
            self._progress(result, f"gingham: ERROR {result.error}")
        run = None  # frees gingham's input buffers before the baselines run
        for baseline in usable:
            entry = BaselineResult(baseline.name, baseline.label)
            try:
                self._progress(result, f"{baseline.name}: time")
                entry.timing = self._measure(baseline.run, baseline.sync)
            except Exception as exc:  # noqa: BLE001
                entry.error = _describe(exc)
            result.baselines.append(entry)


def combine(name: str, first: OpResult, second: OpResult) -> OpResult:
    """The sum of two ops run one after the other (forward+backward): times and FLOPs add."""
    result = OpResult(name, first.group, first.shape, first.dtype, dict(first.params),
                      flops=(first.flops or 0) + (second.flops or 0))
    result.notes = [n for n in first.notes if n in second.notes]
    result.notes.append("the sum of the two measured times")
    result.error = first.error or second.error
    if first.golden is not None and second.golden is not None:
        worst = max((first.golden, second.golden), key=lambda g: (not g.ok, g.rel_error))
        result.golden = Golden(worst.reference, worst.rel_error, worst.tolerance)
    if first.timing is not None and second.timing is not None:
        result.timing = _sum(first.timing, second.timing)
    elif result.error is None and result.golden is not None and result.golden.ok:
        result.error = "a part was not timed"
    by_name = {b.name: b for b in second.baselines}
    for base in first.baselines:
        other = by_name.get(base.name)
        if other is None:
            continue
        entry = BaselineResult(base.name, base.label, error=base.error or other.error)
        if base.timing is not None and other.timing is not None:
            entry.timing = _sum(base.timing, other.timing)
        result.baselines.append(entry)
    return result


def _sum(a: Timing, b: Timing) -> Timing:
    note = "; ".join(n for n in (a.note, b.note) if n)
    return Timing(a.seconds + b.seconds, a.runs + b.runs, [], note)


def run_ops(settings: Settings, log: TextIO | None = None) -> tuple[OpBench, list[OpResult]]:
    """Run the benchmarks of ``settings``; returns the bench (device, sizes) and its results."""
    from gingham.devices import get_device

    bench = OpBench(settings, get_device(settings.device_id), log)
    return bench, bench.run()
