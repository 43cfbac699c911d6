"""The op benchmarks: GEMM, the CIFAR ResNet 3x3 conv layer, pooling, batch norm, softmax,
cross-entropy (each forward, backward, forward+backward) and an elementwise chain, in fp32,
fp16 and bf16.

    settings = Settings(device_id="cpu", quick=True, only=("gemm", "pool"))
    results = run_ops(settings)          # list[OpResult], golden-checked, then timed

The layer ops beyond GEMM and conv are ``gingham.nn.functional`` ops traced into one Tile
program (:class:`Traced`), with the gradient program Tile's autodiff derives from it, beside
the same ``torch.nn.functional`` op, eager and through ``torch.compile``.

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

import fnmatch
import functools
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TextIO

import numpy as np

from gingham import tile
from gingham.tile import dtypes as dt
from gingham.errors import GinghamError
from gingham.runtime import executable

from . import baselines as bl
from .timing import Timing, TrialSettings, measure

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

GROUPS = ("gemm", "conv", "pool", "batchnorm", "layernorm", "softmax", "attention",
          "elementwise")

#: The rows each group produces, by name (what ``--only`` patterns match, with the dtype).
ROWS: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm",),
    "conv": ("conv3x3.forward", "conv3x3.backward", "conv3x3.forward+backward"),
    "pool": tuple(f"{op}.{part}" for op in ("maxpool2x2", "avgpool2x2")
                  for part in ("forward", "backward", "forward+backward")),
    "batchnorm": ("batchnorm.forward", "batchnorm.backward", "batchnorm.forward+backward"),
    "layernorm": ("layer_norm.forward", "layer_norm.backward", "layer_norm.forward+backward"),
    "softmax": tuple(f"{op}.{part}" for op in ("softmax", "log_softmax", "cross_entropy")
                     for part in ("forward", "backward", "forward+backward")),
    "attention": ("attention.forward", "attention.backward", "attention.forward+backward"),
    "elementwise": ("elementwise",),
}

#: Short names (``--dtype``, row ids) of the element types the suite runs.
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
SHORT = {long: short for short, long in DTYPES.items()}

#: Golden tolerance per dtype: relative error on the norm. Half types round every output once
#: (2^-11 for fp16, 2^-8 for bf16) and PyTorch may round intermediates differently (bf16 batch
#: norm, softmax), so their bounds are wider; a wrong kernel is off by far more.
TOLERANCE = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 4e-2}
GOLDEN_TOLERANCE = TOLERANCE["float32"]

CONV_BATCH = 128
CONV_BATCH_QUICK = 32
CONV_IMAGE = 32
CONV_CHANNELS = 64
CONV_KERNEL = 3
ELEMENTWISE_COUNT = 2**24
SOFTMAX_COLUMNS = 1024
CLASSES = 1000
ATTENTION_HEAD_DIM = 64


class BenchError(GinghamError):
    """A benchmark that cannot run as asked (a device without compiled kernels, a bad name)."""


@dataclass(frozen=True)
class Sizes:
    """The problem sizes of one run, per device class (``gpu`` or a CPU) and dtype.

    ``scale`` shrinks them (tests; never for real numbers). Half-type sizes are smaller on a
    CPU because PyTorch's CPU half kernels are slow (a 1024^3 fp16 GEMM takes seconds) and
    the whole default run must stay within minutes there.
    """

    gemm: tuple[int, ...]  # fp32 GEMM sizes (M = N = K)
    gemm_half: tuple[int, ...]  # fp16 / bf16 GEMM sizes
    batch: int  # the CIFAR layer (conv, pooling, batch norm): images per batch
    batch_half: int
    rows: int  # softmax, log_softmax and cross-entropy rows
    attention: tuple[int, int, int]  # batch, heads, tokens (heads of ATTENTION_HEAD_DIM)
    elementwise: int

    @classmethod
    def for_device(cls, kind: str, quick: bool, scale: float = 1.0,
                   gemm: Sequence[int] | None = None) -> Sizes:
        gpu = kind == "gpu"
        batch = CONV_BATCH_QUICK if quick else CONV_BATCH
        batch_half = batch if gpu else CONV_BATCH_QUICK // (4 if quick else 1)
        rows = (2048 if quick else 8192) if gpu else (512 if quick else 2048)
        fp32 = tuple(gemm) if gemm else ((1024, 4096) if gpu else (1024,))
        half = tuple(gemm) if gemm else ((1024, 4096, 8192) if gpu else (512,))
        # A GPT block's self-attention: 16 heads of 1024 tokens on a GPU, 8 of 256 on a CPU.
        attention = ((4, 16, 512) if quick else (8, 16, 1024)) if gpu else (
            (2, 8, 128) if quick else (4, 8, 256))

        def shrink(n: int, least: int = 1) -> int:
            return max(least, round(n * scale))

        return cls(gemm=tuple(shrink(n, 8) for n in fp32),
                   gemm_half=tuple(shrink(n, 8) for n in half),
                   batch=shrink(batch), batch_half=shrink(batch_half),
                   rows=shrink(rows, 2),
                   attention=(shrink(attention[0]), attention[1], shrink(attention[2], 2)),
                   elementwise=shrink(ELEMENTWISE_COUNT, 1024))

    def gemm_sizes(self, dtype: str) -> tuple[int, ...]:
        return self.gemm if dtype == "float32" else self.gemm_half

    def layer_batch(self, dtype: str) -> int:
        return self.batch if dtype == "float32" else self.batch_half


def default_dtypes(kind: str) -> tuple[str, ...]:
    """fp32, fp16 and bf16 on GPUs; fp32 alone on CPUs (``--dtype`` adds the half types)."""
    return tuple(DTYPES.values()) if kind == "gpu" else ("float32",)


@dataclass(frozen=True)
class Settings(TrialSettings):
    """What ``gingham bench ops`` was asked to do.

    ``only`` holds ``--only`` patterns (empty: everything; see :func:`selected`); ``dtypes``
    None means the device's defaults (:func:`default_dtypes`); ``torch_compile`` is ``on``,
    ``off`` or ``auto`` (on where PyTorch runs on a GPU: on a CPU, inductor's C++ compile takes
    seconds per op and the default run must stay within minutes).
    """

    device_id: str
    quick: bool = False
    repeat: int | None = None  # trials per measurement; None: 5, or 3 under quick
    only: tuple[str, ...] = ()
    scale: float = 1.0
    dtypes: tuple[str, ...] | None = None
    torch_compile: str = "auto"
    gemm: tuple[int, ...] | None = None  # GEMM sizes instead of the device class's


def row_ids(group: str, dtype: str) -> list[str]:
    """``name/dtype`` of every row a group gives in a dtype: ``conv3x3.backward/bf16``."""
    return [f"{name}/{SHORT[dtype]}" for name in ROWS[group]]


def _normal_pattern(pattern: str) -> str:
    pattern = pattern.strip().lower()
    for long in sorted(SHORT, key=len, reverse=True):  # bfloat16 before float16
        pattern = pattern.replace(long, SHORT[long])
    return pattern


def matches(pattern: str, group: str, dtype: str) -> bool:
    """Whether an ``--only`` pattern selects ``group`` in ``dtype``.

    A pattern with ``*``, ``?`` or ``[`` is matched (fnmatch) against the group's name and
    its row ids; any other pattern selects the group when it is the group's name or a part of
    a row id. ``gemm``, ``conv``, ``bf16``, ``pool/fp16``, ``*.backward/fp32`` all work.

        >>> matches("pool", "pool", "float32"), matches("*/bf16", "gemm", "float32")
        (True, False)
    """
    pattern = _normal_pattern(pattern)
    ids = row_ids(group, dtype)
    if any(char in pattern for char in "*?["):
        return fnmatch.fnmatchcase(group, pattern) or any(
            fnmatch.fnmatchcase(i, pattern) for i in ids)
    return pattern == group or any(pattern in i for i in ids)


def known_pattern(pattern: str) -> bool:
    """Whether a pattern selects anything in any group and dtype (for a usage error)."""
    return any(matches(pattern, group, dtype) for group in GROUPS for dtype in DTYPES.values()
               if group != "elementwise" or dtype == "float32")


def selected(settings: Settings, group: str, dtype: str) -> bool:
    return not settings.only or any(matches(p, group, dtype) for p in settings.only)


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
    compile_seconds: float | None = None  # torch.compile's compile + first run; not timed


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
    first_seconds: float | None = None  # gingham: compile (or disk-cache load) + first run

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

    @property
    def tolerance(self) -> float:
        return TOLERANCE.get(self.dtype, GOLDEN_TOLERANCE)


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


@dataclass
class Traced:
    """A function of gingham tensors (an ``nn.functional`` op) as one Tile program.

    ``order[i]`` is the position, among the arrays it was traced for, of the program's
    ``i``-th input (tracing orders inputs as it meets them). ``inputs`` puts arrays in that
    order; ``gradient`` is the backward program (forward inputs, then one cotangent per output;
    one gradient per input in ``wrt``, in ``wrt``'s order) with its output names.

        traced = Traced.of(lambda x: F.max_pool2d(x, 2), [x], "cpu")
        GinghamRun(traced.function, traced.inputs([x]), device)
    """

    function: tile.Function
    order: list[int]

    @classmethod
    def of(cls, fn: Callable, arrays: Sequence[np.ndarray], device_id: str) -> Traced:
        from gingham.frontend.tensor import Tensor, _bound_graph

        placeholders = []
        for array in arrays:
            placeholder = Tensor(array.shape, array.dtype, device_id)
            placeholder._placeholder = True
            placeholders.append(placeholder)
        out = fn(*placeholders)
        outputs = list(out) if isinstance(out, (list, tuple)) else [out]
        inputs, function, _ = _bound_graph(outputs, lambda t: t._placeholder)
        order = [next(i for i, p in enumerate(placeholders) if p is leaf) for leaf in inputs]
        return cls(function, order)

    def inputs(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [arrays[i] for i in self.order]

    def gradient(self, arrays: Sequence[np.ndarray], wrt: Sequence[int]
                 ) -> tuple[tile.Function, list[str]]:
        bound = self.function.bind(*self.inputs(arrays))
        names = [bound.program.inputs[self.order.index(i)].name for i in wrt]
        gradient = self.function._gradient(bound, frozenset(names))
        return gradient.function, [gradient.gradient_names[name] for name in names]


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _as(array: np.ndarray, dtype: str) -> np.ndarray:
    return array.astype(dt.DTYPES[dtype])


def _program_bytes(fn: tile.Function, arrays: Sequence[np.ndarray]) -> int:
    """Bytes of every input and output of a program, each moved once (a bandwidth floor)."""
    bound = fn.bind(*arrays)
    names = [i.name for i in bound.program.inputs] + list(bound.program.outputs)
    return sum(math.prod(bound.shapes[n]) * np.dtype(bound.dtypes[n]).itemsize for n in names)


@dataclass
class Layer:
    """A layer op for :meth:`OpBench.layer`: gingham and PyTorch forms and their inputs.

    ``gingham`` and ``torch`` take the same inputs (gingham tensors, torch tensors) and give
    one output; ``grad_inputs`` are the positions of the inputs differentiated.
    """

    name: str
    shape: str
    params: dict
    gingham: Callable
    torch: Callable
    arrays: list[np.ndarray]
    grad_inputs: tuple[int, ...]
    notes: tuple[str, ...] = ()


class OpBench:
    """Runs the op benchmarks of :class:`Settings` on one device."""

    def __init__(self, settings: Settings, device, log: TextIO | None = None) -> None:
        if device.info.dialect is None:
            raise BenchError(f"device {device.id!r} compiles no kernels; gingham bench ops "
                             "times compiled kernels: use cpu, opencl:N or cuda:N")
        unknown = [d for d in settings.dtypes or () if d not in SHORT]
        if unknown:
            raise BenchError(f"unknown dtype {', '.join(unknown)}; choose from "
                             f"{', '.join(DTYPES.values())}")
        self.settings = settings
        self.device = device
        self.sizes = Sizes.for_device(device.info.kind, settings.quick, settings.scale,
                                      settings.gemm)
        self.dtypes = settings.dtypes or default_dtypes(device.info.kind)
        self.torch = bl.torch_env(device.info)
        self.on_cpu = device.info.kind == "cpu"
        self.log = log if log is not None else sys.stderr
        self.rng = np.random.default_rng(0)

    @property
    def compiled(self) -> bool:
        """Whether torch.compile baselines run (``auto``: where PyTorch runs on a GPU)."""
        if self.torch.device is None or self.settings.torch_compile == "off":
            return False
        return self.settings.torch_compile == "on" or self.torch.device != "cpu"

    def cases(self) -> list[tuple[str, str]]:
        """The (group, dtype) pairs selected, in the order they run."""
        chosen = []
        for group in GROUPS:
            dtypes = ("float32",) if group == "elementwise" else self.dtypes
            for dtype in dtypes:
                if dtype in self.dtypes and selected(self.settings, group, dtype):
                    chosen.append((group, dtype))
        return chosen

    # -- the ops -------------------------------------------------------------------------------
    def run(self) -> list[OpResult]:
        cases = self.cases()
        if not cases:
            raise BenchError(
                f"--only {','.join(self.settings.only)} selects nothing in the dtypes "
                f"{', '.join(SHORT[d] for d in self.dtypes)} on {self.device.id} (on a CPU "
                "only fp32 runs unless --dtype says otherwise)")
        results: list[OpResult] = []
        for group, dtype in cases:
            if self.compiled:
                self.torch.reset_compiled()
            if group == "gemm":
                results.extend(self.gemm(n, dtype) for n in self.sizes.gemm_sizes(dtype))
            elif group == "conv":
                results.extend(self.conv(self.sizes.layer_batch(dtype), dtype))
            elif group == "pool":
                results.extend(self.pool(self.sizes.layer_batch(dtype), dtype))
            elif group == "batchnorm":
                results.extend(self.batchnorm(self.sizes.layer_batch(dtype), dtype))
            elif group == "layernorm":
                results.extend(self.layernorm(self.sizes.rows, dtype))
            elif group == "softmax":
                results.extend(self.softmax(self.sizes.rows, dtype))
            elif group == "attention":
                results.extend(self.attention(*self.sizes.attention, dtype))
            else:
                results.append(self.elementwise(self.sizes.elementwise))
        return results

    def _normal(self, *shape: int) -> np.ndarray:
        return self.rng.standard_normal(shape, dtype=np.float32)

    def _distinct_windows(self, n: int, c: int, h: int, w: int) -> np.ndarray:
        """Values exact in every float type, distinct within each 2x2 window.

        A max pool's gradient goes to the window's maximum; where two values tie (likely once
        rounded to fp16 or bf16) PyTorch picks one and Tile's max gradient another, so a tie
        would fail the golden check of a correct kernel. Multiples of 1/64 below 4 are exact
        in bf16's 8 significant bits.
        """
        base = self.rng.integers(0, 60, (n, c, h // 2, 1, w // 2, 1)) * 4
        rank = self.rng.permuted(np.broadcast_to(np.arange(4).reshape(2, 2), (n, c, h // 2,
                                                                              w // 2, 2, 2)),
                                 axis=-1)  # shuffles within rows of a window only
        window = np.moveaxis(rank, (-2, -1), (3, 5))  # -> n, c, h/2, 2, w/2, 2
        values = (base + window - 120).astype(np.float32) / 64
        return values.reshape(n, c, h, w)

    def _batch_note(self, batch: int, dtype: str) -> list[str]:
        if batch == CONV_BATCH:
            return []
        why = []
        if self.settings.quick:
            why.append("--quick")
        if dtype != "float32" and self.on_cpu:
            why.append("half types on a CPU")
        if self.settings.scale != 1.0:
            why.append("--scale")
        return [f"batch {batch}, not {CONV_BATCH}" + (f" ({', '.join(why)})" if why else "")]

    def gemm(self, n: int, dtype: str = "float32") -> OpResult:
        a, b = _as(self._normal(n, n), dtype), _as(self._normal(n, n), dtype)
        result = OpResult("gemm", "gemm", f"{n}x{n}x{n}", dtype, {"M": n, "N": n, "K": n},
                          flops=2 * n**3)
        if dtype != "float32":
            result.notes.append("gingham accumulates in fp32")
        baselines = []
        if self.torch.device is not None:
            baselines.append(self._make(result, "torch", lambda: bl.torch_gemm(self.torch, a, b)))
            if self.compiled:
                baselines.append(self._make(result, "torch.compile",
                                            lambda: bl.torch_gemm(self.torch, a, b, True)))
        if self.on_cpu and dtype == "float32":
            baselines.append(self._make(result, "numpy", lambda: bl.numpy_gemm(a, b)))
        self._evaluate(result, lambda: GinghamRun(tile.function(GEMM), [a, b], self.device),
                       baselines, lambda: [_as(r, dtype) for r in bl.reference_gemm(
                           a.astype(np.float32), b.astype(np.float32))])
        return result

    def conv(self, batch: int, dtype: str = "float32") -> list[OpResult]:
        size, channels, k = CONV_IMAGE, CONV_CHANNELS, CONV_KERNEL
        x = _as(self._normal(batch, size, size, channels), dtype)
        fan_in = np.float32(1 / math.sqrt(k * k * channels))
        f = _as(self._normal(k, k, channels, channels) * fan_in, dtype)
        d_out = _as(self._normal(batch, size, size, channels), dtype)
        params = {"N": batch, "H": size, "W": size, "CI": channels, "CO": channels, "KH": k,
                  "KW": k, "padding": 1, "layout": "NHWC, F[KH, KW, CI, CO]"}
        shape = f"N{batch} {size}x{size} {channels}->{channels} {k}x{k}"
        forward_flops = 2 * batch * size * size * channels * channels * k * k
        forward = OpResult("conv3x3.forward", "conv", shape, dtype, params, flops=forward_flops)
        backward = OpResult("conv3x3.backward", "conv", shape, dtype, params,
                            flops=2 * forward_flops)
        backward.notes.append("dI and dF together")
        for result in (forward, backward):
            result.notes.extend(self._batch_note(batch, dtype))

        factories = []
        if self.torch.device is not None:
            for compiled in (False, True) if self.compiled else (False,):
                for channels_last in (False, True):
                    name = ("torch.compile" if compiled else "torch") + \
                        ("-cl" if channels_last else "")
                    factories.append((name, functools.partial(
                        bl.torch_conv, self.torch, x, f, d_out, channels_last, compiled)))
        pairs, errors = self._pairs(factories)
        fn = tile.function(CONV)
        x32, f32, d32 = (v.astype(np.float32) for v in (x, f, d_out))

        self._evaluate(forward, lambda: GinghamRun(fn, [x, f], self.device),
                       self._pair_part(pairs, errors, 0, forward),
                       lambda: [_as(r, dtype) for r in bl.reference_conv_forward(x32, f32)])

        def backward_run() -> GinghamRun:
            gradient = fn._gradient(fn.bind(x, f))  # takes (I, F, dO), gives dI and dF
            names = [gradient.gradient_names[name] for name in ("I", "F")]
            return GinghamRun(gradient.function, [x, f, d_out], self.device, outputs=names)

        self._evaluate(backward, backward_run, self._pair_part(pairs, errors, 1, backward),
                       lambda: [_as(r, dtype) for r in
                                bl.reference_conv_backward(x32, f32, d32)])
        return [forward, backward, combine("conv3x3.forward+backward", forward, backward)]

    def pool(self, batch: int, dtype: str = "float32") -> list[OpResult]:
        """2x2 max and average pooling, stride 2, of the CIFAR conv layer's activations."""
        from gingham.nn import functional as F

        x = _as(self._distinct_windows(batch, CONV_CHANNELS, CONV_IMAGE, CONV_IMAGE), dtype)
        shape = f"N{batch} {CONV_CHANNELS}x{CONV_IMAGE}x{CONV_IMAGE} 2x2/2"
        params = {"N": batch, "C": CONV_CHANNELS, "H": CONV_IMAGE, "W": CONV_IMAGE,
                  "kernel": 2, "stride": 2, "layout": "NCHW"}
        notes = tuple(self._batch_note(batch, dtype))
        tf = self.torch.torch.nn.functional if self.torch.torch is not None else None
        results = []
        for name, ours, theirs in (
                ("maxpool2x2", lambda t: F.max_pool2d(t, 2), lambda t: tf.max_pool2d(t, 2)),
                ("avgpool2x2", lambda t: F.avg_pool2d(t, 2), lambda t: tf.avg_pool2d(t, 2))):
            results.extend(self.layer(Layer(name, shape, params, ours, theirs, [x], (0,),
                                            notes), dtype))
        return results

    def batchnorm(self, batch: int, dtype: str = "float32") -> list[OpResult]:
        """Batch norm in training mode (batch statistics, affine) on the conv layer's output."""
        from gingham.nn import functional as F

        c = CONV_CHANNELS
        x = _as(self._normal(batch, c, CONV_IMAGE, CONV_IMAGE), dtype)
        weight = _as(1 + 0.1 * self._normal(c), dtype)
        bias = _as(0.1 * self._normal(c), dtype)
        tf = self.torch.torch.nn.functional if self.torch.torch is not None else None

        def ours(t, w, b):
            return F.batch_norm(t, None, None, w, b, True)[0]

        def theirs(t, w, b):
            return tf.batch_norm(t, None, None, w, b, True)

        shape = f"N{batch} {c}x{CONV_IMAGE}x{CONV_IMAGE}"
        params = {"N": batch, "C": c, "H": CONV_IMAGE, "W": CONV_IMAGE, "training": True,
                  "layout": "NCHW"}
        notes = ("training mode: batch statistics; backward gives dX, dweight, dbias",
                 *self._batch_note(batch, dtype))
        return self.layer(Layer("batchnorm", shape, params, ours, theirs, [x, weight, bias],
                                (0, 1, 2), notes), dtype)

    def layernorm(self, rows: int, dtype: str = "float32") -> list[OpResult]:
        """Layer norm over the last axis of [rows, 1024] with a weight and a bias, as in a
        transformer block; backward gives dX, dweight and dbias."""
        from gingham.nn import functional as F

        torch = self.torch.torch
        x = _as(self._normal(rows, SOFTMAX_COLUMNS), dtype)
        weight = _as(self._normal(SOFTMAX_COLUMNS), dtype)
        bias = _as(self._normal(SOFTMAX_COLUMNS), dtype)
        tf = torch.nn.functional if torch is not None else None
        columns = (SOFTMAX_COLUMNS,)
        params = {"rows": rows, "columns": SOFTMAX_COLUMNS, "eps": 1e-5}
        return self.layer(Layer(
            "layer_norm", f"{rows}x{SOFTMAX_COLUMNS}", params,
            lambda t, w, b: F.layer_norm(t, columns, w, b),
            lambda t, w, b: tf.layer_norm(t, columns, w, b), [x, weight, bias], (0, 1, 2),
            ("backward gives dX, dweight, dbias",)), dtype)

    def softmax(self, rows: int, dtype: str = "float32") -> list[OpResult]:
        """softmax and log_softmax over [rows, 1024], and cross-entropy of [rows, 1000] logits
        against integer labels (mean over rows)."""
        from gingham.nn import functional as F

        torch = self.torch.torch
        x = _as(self._normal(rows, SOFTMAX_COLUMNS), dtype)
        logits = _as(self._normal(rows, CLASSES), dtype)
        labels = self.rng.integers(0, CLASSES, rows).astype(np.int64)
        tf = torch.nn.functional if torch is not None else None
        shape = f"{rows}x{SOFTMAX_COLUMNS}"
        params = {"rows": rows, "columns": SOFTMAX_COLUMNS, "dim": -1}
        results = self.layer(Layer("softmax", shape, params, lambda t: F.softmax(t, -1),
                                   lambda t: tf.softmax(t, -1), [x], (0,)), dtype)
        results += self.layer(Layer("log_softmax", shape, params,
                                    lambda t: F.log_softmax(t, -1),
                                    lambda t: tf.log_softmax(t, -1), [x], (0,)), dtype)
        results += self.layer(Layer(
            "cross_entropy", f"{rows}x{CLASSES}", {"rows": rows, "classes": CLASSES,
                                                  "reduction": "mean"},
            F.cross_entropy, tf.cross_entropy if tf else None, [logits, labels], (0,),
            ("integer labels; backward gives dlogits",)), dtype)
        return results

    def attention(self, batch: int, heads: int, tokens: int,
                  dtype: str = "float32") -> list[OpResult]:
        """Causal scaled dot-product attention of ``[batch, heads, tokens, 64]`` queries, keys
        and values, as in a GPT block; backward gives dQ, dK and dV. PyTorch runs its fused
        attention kernel where it has one for the device and dtype (flash or memory-efficient
        attention on a GPU); gingham runs the three Tile ops of
        :func:`gingham.nn.functional.scaled_dot_product_attention`."""
        from gingham.nn import functional as F

        torch = self.torch.torch
        shape = (batch, heads, tokens, ATTENTION_HEAD_DIM)
        q, k, v = (_as(self._normal(*shape), dtype) for _ in range(3))
        tf = torch.nn.functional if torch is not None else None
        params = {"batch": batch, "heads": heads, "tokens": tokens,
                  "head_dim": ATTENTION_HEAD_DIM, "is_causal": True}
        return self.layer(Layer(
            "attention", "x".join(str(n) for n in shape), params,
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            lambda q, k, v: tf.scaled_dot_product_attention(q, k, v, is_causal=True),
            [q, k, v], (0, 1, 2),
            ("causal; backward gives dQ, dK, dV; PyTorch's fused kernel where it has one",)),
            dtype)

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
            if self.compiled:
                baselines.append(self._make(result, "torch.compile", lambda: bl.torch_op(
                    self.torch, "torch.compile", self.torch.compile_label,
                    lambda t: self.torch.torch.relu(t * a + b) * c, [self.torch.tensor(x)], (),
                    compiled=True)[0]))
        scalars = [np.array(v, dtype=np.float32) for v in (a, b, c)]
        self._evaluate(result, lambda: GinghamRun(tile.function(ELEMENTWISE), [x, *scalars],
                                                  self.device),
                       baselines, lambda: bl.reference_elementwise(x, a, b, c))
        return result

    def layer(self, layer: Layer, dtype: str) -> list[OpResult]:
        """Forward, backward and forward+backward of a layer op traced from nn.functional.

        gingham runs the traced Tile program and its gradient program; PyTorch runs the same
        op eager (and compiled). Without PyTorch, both are checked against the same programs
        run by the reference interpreter.
        """
        arrays = layer.arrays
        group = next(g for g, names in ROWS.items() if f"{layer.name}.forward" in names)
        forward = OpResult(f"{layer.name}.forward", group, layer.shape, dtype, layer.params)
        backward = OpResult(f"{layer.name}.backward", group, layer.shape, dtype, layer.params)
        for result in (forward, backward):
            result.notes.extend(layer.notes)
        try:
            traced = Traced.of(layer.gingham, arrays, self.device.id)
            bound = traced.function.bind(*traced.inputs(arrays))
            out_shape = tuple(bound.shapes[bound.program.outputs[0]])
            cotangent = _as(self._normal(*out_shape).reshape(out_shape), dtype)
        except Exception as exc:  # noqa: BLE001 - an op gingham cannot trace is a failed row
            forward.error = backward.error = f"tracing failed: {_describe(exc)}"
            return [forward, backward, combine(f"{layer.name}.forward+backward", forward,
                                               backward)]

        factories = []
        if self.torch.device is not None and layer.torch is not None:
            env = self.torch
            for compiled in (False, True) if self.compiled else (False,):
                name = "torch.compile" if compiled else "torch"
                label = env.compile_label if compiled else env.label

                def factory(compiled=compiled, name=name, label=label):
                    return bl.torch_op(env, name, label, layer.torch,
                                       [env.tensor(a) for a in arrays], layer.grad_inputs,
                                       env.tensor(cotangent), compiled=compiled,
                                       forward_out=lambda out: [bl.host(out).reshape(
                                           out_shape)])
                factories.append((name, factory))
        pairs, errors = self._pairs(factories)

        forward_inputs = traced.inputs(arrays)
        forward.nbytes = _program_bytes(traced.function, forward_inputs)
        self._evaluate(forward, lambda: GinghamRun(traced.function, forward_inputs, self.device),
                       self._pair_part(pairs, errors, 0, forward),
                       lambda: _listed(traced.function(*forward_inputs, device="reference")))

        def backward_run() -> GinghamRun:
            fn, names = traced.gradient(arrays, layer.grad_inputs)
            return GinghamRun(fn, [*forward_inputs, cotangent], self.device, outputs=names)

        def backward_reference() -> list[np.ndarray]:
            fn, names = traced.gradient(arrays, layer.grad_inputs)
            outputs = dict(zip(fn.program.outputs,
                               _listed(fn(*forward_inputs, cotangent, device="reference"))))
            return [outputs[n] for n in names]

        try:
            fn, _ = traced.gradient(arrays, layer.grad_inputs)
            backward.nbytes = _program_bytes(fn, [*forward_inputs, cotangent])
        except Exception:  # noqa: BLE001 - the evaluation below reports the failure
            pass
        self._evaluate(backward, backward_run, self._pair_part(pairs, errors, 1, backward),
                       backward_reference)
        return [forward, backward, combine(f"{layer.name}.forward+backward", forward, backward)]

    # -- checking and timing -------------------------------------------------------------------
    def _make(self, result: OpResult, name: str, factory: Callable[[], bl.Baseline]
              ) -> bl.Baseline | None:
        try:
            return factory()
        except Exception as exc:  # noqa: BLE001 - a broken baseline must not stop the run
            label = self.torch.compile_label if "compile" in name else ""
            result.baselines.append(BaselineResult(name, label, error=_describe(exc)))
            return None

    def _pairs(self, factories: Sequence[tuple[str, Callable[[], tuple]]]
               ) -> tuple[list[tuple], list[BaselineResult]]:
        """Make (forward, backward) baseline pairs; a factory that fails becomes an error."""
        pairs, errors = [], []
        for name, factory in factories:
            try:
                pairs.append(factory())
            except Exception as exc:  # noqa: BLE001 - a broken baseline must not stop it
                label = self.torch.compile_label if "compile" in name else self.torch.label
                errors.append(BaselineResult(name, label, error=_describe(exc)))
        return pairs, errors

    @staticmethod
    def _pair_part(pairs: list[tuple], errors: list[BaselineResult], index: int,
                   result: OpResult) -> list[bl.Baseline]:
        result.baselines.extend(BaselineResult(e.name, e.label, error=e.error) for e in errors)
        return [pair[index] for pair in pairs if pair[index] is not None]

    def _progress(self, result: OpResult, what: str) -> None:
        print(f"bench: {result.name} {result.dtype} {result.shape}: {what}", file=self.log,
              flush=True)

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
        return "host reference", host_reference()

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
        tolerance = result.tolerance
        try:
            self._progress(result, "gingham: compile and check")
            start = time.perf_counter()
            run = make_run()
            outputs = run.outputs()
            result.first_seconds = time.perf_counter() - start
            result.golden = Golden(reference_name, relative_error(outputs, reference), tolerance)
            if result.golden.ok:
                self._progress(result, "gingham: time")
                result.timing = self._measure(run.run, self.device.synchronize)
                # Checked again on the last timed run: a racy kernel can pass once.
                after = Golden(reference_name, relative_error(run.outputs(rerun=False),
                                                              reference), tolerance)
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
            entry = BaselineResult(baseline.name, baseline.label,
                                   compile_seconds=baseline.compile_seconds)
            try:
                self._progress(result, f"{baseline.name}: time")
                entry.timing = self._measure(baseline.run, baseline.sync)
            except Exception as exc:  # noqa: BLE001
                entry.error = _describe(exc)
            result.baselines.append(entry)


def _listed(value) -> list[np.ndarray]:
    return list(value) if isinstance(value, tuple) else [value]


def combine(name: str, first: OpResult, second: OpResult) -> OpResult:
    """The sum of two ops run one after the other (forward+backward): times and FLOPs add."""
    flops = (first.flops or 0) + (second.flops or 0)
    nbytes = (first.nbytes or 0) + (second.nbytes or 0)
    result = OpResult(name, first.group, first.shape, first.dtype, dict(first.params),
                      flops=flops or None, nbytes=None if flops else nbytes or None)
    result.notes = [n for n in first.notes if n in second.notes]
    result.notes.append("the sum of the two measured times")
    result.error = first.error or second.error
    if first.first_seconds is not None and second.first_seconds is not None:
        result.first_seconds = first.first_seconds + second.first_seconds
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
        if base.compile_seconds is not None and other.compile_seconds is not None:
            entry.compile_seconds = base.compile_seconds + other.compile_seconds
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
