"""Measured search: compile and time the best candidates of a kernel, keep the fastest.

For one tunable kernel plan (a tiled contraction on the CPU or a GPU dialect, or a bf16 / fp16
contraction on CUDA's tensor cores) the search

1. ranks the legal configurations by the cost model (:mod:`gingham.tune.space`) and picks
   :data:`CANDIDATES` of them, at most two of each shape class (so that K near-duplicates do not
   crowd out the alternatives), the untuned choice first;
2. compiles them in one source (one compiler run), runs each once on the same random inputs
   and compares its outputs with the untuned schedule's: a candidate that disagrees (or fails
   to build or run) is dropped and reported, never kept;
3. times each (the best of several repeats: on a shared machine the others were preempted),
   then tries the neighbours of the fastest (band height, padding, split-K; CPU: K block and
   tile sizes) while the time budget lasts;
4. stores the fastest in the tuning database (:mod:`gingham.tune.db`) under the kernel's and
   device's keys, with the untuned time beside it.

Compilation consults the database (:func:`tuned_config`, called from
:mod:`gingham.compiler.schedule`): a hit gives the tuned schedule; a miss the cost model's
choice, or, with ``GINGHAM_TUNE=on`` or inside :func:`tuning`, a search first; with
``GINGHAM_TUNE=background`` the cost model's choice now and a search while the program trains
(:mod:`gingham.tune.background`).

    >>> with tuning(budget=5.0):                  # every tunable kernel compiled here is tuned
    ...     exe = compile_program(bound, device)
    >>> stats.searches                            # how many searches this process ran
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..compiler import compile_kernels, tiling_cpu, tiling_gpu, tiling_tc
from ..compiler.lower import LoweringContext
from ..config import debug_print, get_config
from ..devices import compile_progress
from ..devices.base import Device, DeviceInfo
from ..tile.dtypes import DTYPES
from . import space
from .db import TuningDB
from .device_model import device_model
from .keys import device_key, kernel_key

#: Candidates measured in the first round (the untuned choice among them).
CANDIDATES = 8
#: Relative error (Frobenius norm, per output) a candidate may differ from the untuned schedule.
TOLERANCE = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}
#: Seconds one timing aims for: enough runs that the timer's resolution does not matter.
MIN_TIMING = 0.005
REPEATS = 5


@dataclass
class TuneStats:
    """What tuning did in this process; tests prove a tuned program tunes nothing again."""

    searches: int = 0  # measured searches run
    timed: int = 0  # candidates compiled and timed
    rejected: int = 0  # candidates dropped: wrong results, or did not build or run
    hits: int = 0  # compilations that found their kernel in the database
    misses: int = 0  # tunable kernels compiled without a database entry

    def snapshot(self) -> TuneStats:
        return dataclasses.replace(self)


stats = TuneStats()
_local = threading.local()


@dataclass
class _Session:
    budget: float
    progress: bool
    candidates: int = CANDIDATES
    results: list = field(default_factory=list)
    kernels: bool = True  # search kernel schedules
    algorithms: bool = True  # time a layer's algorithms (gingham.tune.algorithms)


@contextlib.contextmanager
def tuning(budget: float | None = None, progress: bool = True,
           candidates: int = CANDIDATES, kernels: bool = True,
           algorithms: bool = True) -> Iterator[_Session]:
    """Within the block, compiling a tunable kernel without a database entry searches first,
    and a layer with a choice of algorithms and no entry is timed each way.

    ``budget``: seconds per kernel (default ``config.tune_budget``); ``candidates``: how many
    the first round measures; ``kernels`` / ``algorithms`` False: that part is not tuned (nor
    queued for the background tuner) inside the block. The session's ``results`` list gets
    one :class:`SearchResult` per search.
    """
    session = _Session(budget or get_config().tune_budget, progress, max(1, candidates),
                       kernels=kernels, algorithms=algorithms)
    previous = getattr(_local, "session", None)
    _local.session = session
    try:
        with compile_progress.hidden():  # the session's own bars show what it compiles
            yield session
    finally:
        _local.session = previous


def may_search() -> bool:
    """Whether compiling on this thread may search a schedule now or queue one for the
    background tuner (a :func:`tuning` session, or ``tune`` on or background): such a
    compilation must look each kernel up in the database rather than reuse a stored program."""
    session = getattr(_local, "session", None)
    if session is not None:
        return session.kernels
    return get_config().tune != "off"


def _active_session() -> _Session | None:
    session = getattr(_local, "session", None)
    if session is not None:
        return session
    if get_config().tune == "on":
        return _Session(get_config().tune_budget, progress=False)
    return None


# -- the two tunable families ------------------------------------------------------------------


class _Family:
    """What the search needs of a schedule family: its candidates, builder and config type.

    ``config_type`` is the family's configuration dataclass; a tuning-database entry holds its
    fields, and :meth:`from_dict` rebuilds it (a TypeError when the fields have changed).
    """

    name = ""
    config_type: type = type(None)

    def __init__(self, plan, ctx, info: DeviceInfo) -> None:
        self.plan, self.ctx, self.info = plan, ctx, info

    def ranked(self, model) -> list:  # [(seconds, config)], cheapest first
        raise NotImplementedError

    def default(self):
        raise NotImplementedError

    def build(self, config, name: str) -> list:
        raise NotImplementedError

    def legal(self, config) -> bool:
        raise NotImplementedError

    def neighbours(self, config) -> list:
        raise NotImplementedError

    def shape_class(self, config) -> tuple:
        raise NotImplementedError

    def from_dict(self, data: dict):
        return self.config_type(**data)

    def _fresh_context(self) -> LoweringContext:
        # Each candidate lowers in its own context: one build's names never leak into another.
        return self.ctx.fork()


class _GpuFamily(_Family):
    name = "gpu-tiled"
    config_type = tiling_gpu.TileConfig

    def __init__(self, plan, ctx, info, view, ctype) -> None:
        super().__init__(plan, ctx, info)
        self.view, self.ctype = view, ctype
        self.itemsize = 8 if ctype == "float64" else 4

    def ranked(self, model):
        return space.rank_gpu(self.view, self.info, self.itemsize, model)

    def default(self):
        return tiling_gpu.choose_config(self.view, self.info, self.itemsize)

    def build(self, config, name):
        return tiling_gpu.tiled_contraction(self.plan, self._fresh_context(), name, self.info,
                                            config)

    def legal(self, config):
        return space.gpu_legal(config, self.view, self.info, self.itemsize)

    def neighbours(self, config):
        return space.gpu_neighbours(config, self.view, self.info, self.itemsize)

    def shape_class(self, config):
        return (config.tile_m, config.tile_n, config.reg_m, config.reg_n)


class _TcFamily(_Family):
    """Tensor-core contractions (bf16 / fp16 on CUDA, :mod:`gingham.compiler.tiling_tc`)."""

    name = "gpu-tensor-core"
    config_type = tiling_tc.TcConfig

    def __init__(self, plan, ctx, info, view) -> None:
        super().__init__(plan, ctx, info)
        self.view = view

    def ranked(self, model):
        return space.rank_tc(self.view, self.info)  # the schedule's own relative cost

    def default(self):
        return tiling_tc.choose_config(self.view, self.info)

    def build(self, config, name):
        return tiling_tc.tensor_core_contraction(self.plan, self._fresh_context(), name,
                                                 self.info, config)

    def legal(self, config):
        return space.tc_legal(config, self.view, self.info)

    def neighbours(self, config):
        return space.tc_neighbours(config, self.view, self.info)

    def shape_class(self, config):
        return (config.tile_m, config.tile_n, config.warps_m, config.warps_n)


class _CpuFamily(_Family):
    name = "cpu-tiled"
    config_type = tiling_cpu.CpuTiling

    def __init__(self, plan, ctx, info, dims) -> None:
        super().__init__(plan, ctx, info)
        self.dims = dims

    def ranked(self, model):
        return list(space.rank_cpu(self.dims, model))

    def default(self):
        return tiling_cpu.choose_tiling(self.info, self.dims)

    def build(self, config, name):
        return tiling_cpu.tiled_contraction_cpu(self.plan, self._fresh_context(), name,
                                                self.info, config)

    def legal(self, config):
        return config.simd == max(4, self.info.simd_width) and space.cpu_legal(config, self.dims)

    def neighbours(self, config):
        out = []
        for kc in (config.kc // 2, config.kc * 2):
            if 16 <= kc <= 1024:
                out.append(dataclasses.replace(config, kc=kc))
        for mt in (config.mt - config.mr * max(1, config.mt // config.mr // 4),
                   config.mt * 2):
            if mt >= config.mr:
                out.append(dataclasses.replace(config, mt=mt))
        for nt in (config.nt // 2 // config.nr * config.nr, config.nt * 2):
            if nt >= config.nr:
                out.append(dataclasses.replace(config, nt=nt))
        for split in (config.split // 2, config.split * 2):
            if split >= 1:
                out.append(dataclasses.replace(config, split=split))
        return [c for c in out if self.legal(c)]

    def shape_class(self, config):
        return (config.mr, config.nr)


def family_of(plan, ctx, info: DeviceInfo) -> _Family | None:
    """The tunable family of this kernel plan on this device, or None (nothing to tune)."""
    if tiling_cpu.runs_on(info):
        found = tiling_cpu.gemm_dims(plan, ctx, info)
        if found is not None:
            return _CpuFamily(plan, ctx, info, found[1])
        if info.dialect == "c":
            return None
    if info.dialect == "cuda":  # float16 / bfloat16 products run on the tensor cores
        found = tiling_tc.tensor_core_view(plan, ctx, info)
        if found is not None:
            default = tiling_tc.choose_config(found[0], info)
            # None: no configuration builds, and the plan falls back to the tiled family.
            if default is not None:
                return _TcFamily(plan, ctx, info, found[0])
    if info.dialect in ("opencl", "cuda"):
        found = tiling_gpu.tiled_view(plan, ctx)
        return None if found is None else _GpuFamily(plan, ctx, info, *found)
    return None


# -- the lookup compilation makes ------------------------------------------------------------------


def tuned_config(plan, ctx, name: str, info: DeviceInfo):
    """The schedule configuration compilation should use for ``plan``: the database's, or
    (tuning on) a fresh search's, or None for the cost model's choice."""
    family = family_of(plan, ctx, info)
    if family is None:
        return None
    kkey, dkey = kernel_key(family.name, plan, ctx.bound), device_key(info)
    db = TuningDB()
    entry = db.get(kkey, dkey)
    if entry is not None and entry.get("family") == family.name:
        try:
            config = family.from_dict(entry["config"])
        except TypeError as exc:
            config, reason = None, f"fields changed ({exc})"
        else:
            reason = "illegal here"
        if config is not None and family.legal(config):
            stats.hits += 1
            debug_print(3, f"{name}: tuned schedule from the database")
            return config
        debug_print(1, f"tuning: ignoring the stored schedule of {name}: {reason}")
    stats.misses += 1
    session = _active_session()
    if session is not None and not session.kernels:
        return None
    if session is None:
        if get_config().tune == "background":
            device = _device_for(info)
            if device is not None:  # searched while the program runs; the cost model's for now
                from .background import refiner

                refiner().submit(family, device, name, (kkey, dkey))
        return None
    device = _device_for(info)
    if device is None:
        return None
    result = search_family(family, device, name, session.budget, session.progress,
                           session.candidates)
    session.results.append(result)
    db.put(kkey, dkey, result.entry())
    return result.config


def _device_for(info: DeviceInfo) -> Device | None:
    from ..devices import get_device

    try:
        device = get_device(info.id)
    except Exception:  # noqa: BLE001 - a made-up description: nothing to measure on
        return None
    return device if device.info == info else None


# -- measuring -----------------------------------------------------------------------------------


@dataclass
class SearchResult:
    """One search: the kernel (or convolution layer), what ran, and the winner. ``config``
    and ``default`` are a schedule family's configuration dataclasses, or a layer's algorithm
    by name (:mod:`gingham.tune.algorithms`)."""

    name: str
    family: str
    schedule: str
    config: Any
    seconds: float
    default: Any
    default_seconds: float
    tried: int
    rejected: list[str]
    elapsed: float

    @property
    def speedup(self) -> float:
        """Untuned time / tuned time (>= 1: the untuned choice is always a candidate)."""
        return self.default_seconds / self.seconds

    def entry(self) -> dict:
        """The tuning database's entry: the winner and the untuned choice as fields (a
        schedule's, or ``{"algorithm": name}`` for a layer), their times, what was tried."""
        return {"family": self.family, "config": _fields(self.config),
                "seconds": self.seconds, "default": _fields(self.default),
                "default_seconds": self.default_seconds, "tried": self.tried,
                "rejected": self.rejected, "schedule": self.schedule}


def _fields(choice: Any) -> dict:
    return dataclasses.asdict(choice) if dataclasses.is_dataclass(choice) \
        else {"algorithm": choice}


class _Progress:
    """One kernel's search on stderr: a live bar on a terminal (tqdm's when installed), else
    one line when it ends, so that a log or a CI transcript gets a line per kernel rather
    than every redraw of a bar::

        tune k7_T31: 8 candidates in 2.4 s, best 0.412 ms (1.31x the untuned 0.540 ms)
    """

    def __init__(self, name: str, total: int, enabled: bool) -> None:
        self.name, self.total, self.done, self.enabled = name, total, 0, enabled
        self.best = math.inf
        self.started = time.perf_counter()
        self.tty = enabled and sys.stderr.isatty()
        self.bar = None
        if self.tty:
            try:
                from tqdm import tqdm  # optional

                self.bar = tqdm(total=total, desc=f"tune {name}", leave=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def grow(self, extra: int) -> None:
        self.total += extra
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def step(self, seconds: float | None) -> None:
        self.done += 1
        if seconds is not None:
            self.best = min(self.best, seconds)
        if not self.tty:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(f"best {self.best * 1e3:.3f} ms")
            self.bar.update(1)
            return
        width = 20
        filled = round(width * self.done / max(self.total, 1))
        best = f"best {self.best * 1e3:.3f} ms" if math.isfinite(self.best) else ""
        print(f"\rtune {self.name} [{'#' * filled}{'.' * (width - filled)}] "
              f"{self.done}/{self.total} {best}", end="", file=sys.stderr, flush=True)

    def close(self, best: float | None = None, untuned: float | None = None) -> None:
        """End the bar; off a terminal, print the search's one line (``best`` and ``untuned``:
        the seconds of the fastest and of the untuned schedule, as the search kept them)."""
        if self.bar is not None:
            self.bar.close()
        elif self.tty:
            print(file=sys.stderr, flush=True)
        elif self.enabled:
            line = (f"tune {self.name}: {self.done} candidate(s) in "
                    f"{time.perf_counter() - self.started:.1f} s")
            if best is not None:
                line += f", best {best * 1e3:.3f} ms"
                if untuned is not None:
                    line += f" ({untuned / best:.2f}x the untuned {untuned * 1e3:.3f} ms)"
            print(line, file=sys.stderr, flush=True)


class _Harness:
    """Buffers for one kernel plan's candidates: random inputs, shared by every candidate."""

    def __init__(self, device: Device, bound, seed: int = 0) -> None:
        self.device, self.bound = device, bound
        self.rng = np.random.default_rng(seed)
        self.initial: dict[str, np.ndarray] = {}
        self.buffers: dict[str, Any] = {}

    def _array(self, name: str) -> np.ndarray:
        shape, dtype = self.bound.shapes[name], np.dtype(self.bound.dtypes[name])
        if dtype.kind == "f" or dtype.name in ("float16", "bfloat16"):
            # Drawn in float32: a batch's activations are tens of millions of elements, and
            # float64 draws take over twice as long (33.5M: 1.3 s against 0.5 s here).
            values = self.rng.standard_normal(shape, dtype=np.float32)
            return np.ascontiguousarray(values.astype(dtype, copy=False))
        # Integers may be indices: 0 is in bounds for every indexed axis.
        return np.zeros(shape, dtype)

    def buffer(self, name: str, nbytes: int | None = None):
        if name not in self.buffers:
            if nbytes is None:
                self.initial[name] = self._array(name)
                nbytes = self.initial[name].nbytes
            self.buffers[name] = self.device.alloc(max(1, nbytes))
        return self.buffers[name]

    def prepare(self, kernels: list) -> list[tuple]:
        """(kernel IR, argument buffers) per kernel; scratch buffers sized from the IR."""
        scratch = {s.name: s for kk in kernels for s in kk.scratch}
        out = []
        for kernel in kernels:
            args = []
            for p in kernel.params:
                if p.name in scratch:
                    s = scratch[p.name]
                    args.append(self.buffer(p.name, s.size * np.dtype(DTYPES[s.dtype]).itemsize))
                else:
                    args.append(self.buffer(p.name))
            out.append((kernel, args))
        return out

    def reset(self) -> None:
        for name, array in self.initial.items():
            if array.size:
                self.device.copy_in(self.buffers[name], array)

    def read(self, names: list[str]) -> list[np.ndarray]:
        results = []
        for name in names:
            out = np.empty(self.bound.shapes[name], self.bound.dtypes[name])
            if out.size:
                self.device.copy_out(self.buffers[name], out)
            results.append(out)
        self.device.synchronize()
        return results

    def free(self) -> None:
        for buffer in self.buffers.values():
            buffer.free()
        self.buffers.clear()


def _outputs(kernels: list) -> list[str]:
    scratch = {s.name for kk in kernels for s in kk.scratch}
    return sorted({p.name for kk in kernels for p in kk.params if p.output} - scratch)


#: Elements compared at a time in float64: the check of a large output (a batch's activations,
#: tens of millions of elements) stays in the cache and costs one pass, not several copies.
_CHUNK = 1 << 18


def _relative_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """The largest relative error (Frobenius norm of the difference over the norm of ``want``)
    of the outputs; infinite where the two disagree on which elements are NaN or infinite.

        >>> _relative_error([np.array([1.0, 2.0])], [np.array([1.0, 2.0 + 1e-6])]) < 1e-6
        True
    """
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return math.inf
        g, w = _floating(g).reshape(-1), _floating(w).reshape(-1)
        if not (np.isfinite(g).all() and np.isfinite(w).all()):  # rare: masks needed
            err = _relative_error_masked(g, w)
        else:
            # Accumulated in float64 chunk by chunk: exact enough for any tolerance, no
            # overflow of a float32 sum of squares, and no float64 copy of the whole output.
            diff2 = want2 = 0.0
            for start in range(0, w.size, _CHUNK):
                w64 = w[start:start + _CHUNK].astype(np.float64)
                d64 = g[start:start + _CHUNK].astype(np.float64) - w64
                diff2 += float(d64 @ d64)
                want2 += float(w64 @ w64)
            err = math.sqrt(diff2) / (math.sqrt(want2) or 1.0)
        worst = max(worst, err) if err == err else math.inf
    return worst


def _floating(a: np.ndarray) -> np.ndarray:
    """float32 for the half types (NumPy computes nothing in bfloat16), else float64 for
    anything that is not float32 already (integers: indices up to 2**53 stay exact)."""
    if a.dtype in (np.float32, np.float64):
        return a
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        return a.astype(np.float32)
    return a.astype(np.float64)


def _relative_error_masked(g: np.ndarray, w: np.ndarray) -> float:
    """:func:`_relative_error` of one output holding NaN or infinite elements: those must
    match exactly, the finite ones are compared."""
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    finite = np.isfinite(w64)
    if not np.array_equal(finite, np.isfinite(g64)):
        return math.inf
    if not np.array_equal(np.isnan(w64), np.isnan(g64)):
        return math.inf
    if not np.array_equal(w64[~finite], g64[~finite], equal_nan=True):  # +inf is not -inf
        return math.inf
    scale = float(np.linalg.norm(w64[finite])) or 1.0
    return float(np.linalg.norm(g64[finite] - w64[finite])) / scale


def _calibrate(device: Device, run: Callable[[], None]) -> int:
    """Runs per timing so that one timing lasts about MIN_TIMING seconds."""
    start = time.perf_counter()
    run()
    device.synchronize()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(1000, int(MIN_TIMING / once)))


def _time_interleaved(device: Device, runs: dict, deadline: float | None) -> dict:
    """Seconds per run of each entry of ``runs`` ({config: (run, repeats)}): REPEATS rounds,
    each timing every candidate once, the best of each kept. Interleaved, so that a busy
    moment of a shared machine slows every candidate alike rather than one of them."""
    best = {config: math.inf for config in runs}
    for round_ in range(REPEATS):
        for config, (run, count) in runs.items():
            start = time.perf_counter()
            for _ in range(count):
                run()
            device.synchronize()
            best[config] = min(best[config], (time.perf_counter() - start) / count)
        if round_ and deadline is not None and time.perf_counter() > deadline:
            break
    return best


def _pick(family: _Family, ranked: list, default, count: int) -> list:
    """The untuned choice, then the cheapest candidates, at most two per shape class."""
    chosen = [default]
    per_class: dict[tuple, int] = {family.shape_class(default): 1}
    for _, config in ranked:
        if len(chosen) >= count:
            break
        if config in chosen:
            continue
        shape = family.shape_class(config)
        if per_class.get(shape, 0) >= 2:
            continue
        per_class[shape] = per_class.get(shape, 0) + 1
        chosen.append(config)
    return chosen


def search_family(family: _Family, device: Device, name: str, budget: float,
                  progress: bool = True, candidates: int = CANDIDATES) -> SearchResult:
    """Measure the candidates of one kernel plan on ``device``; see the module docstring."""
    # Ahead of time, compiling the candidates counts against the budget too.
    search = Search(family, device, name, budget, progress, candidates, budget_from_start=True)
    try:
        search.build_first_round()
        search.measure()
        search.try_neighbours()
    finally:
        search.close()
    return search.result()


class Search:
    """One kernel's measured search, in phases that may run on different threads.

    :func:`search_family` runs them back to back. Background refinement
    (:mod:`gingham.tune.background`) builds the first round on a worker thread — compiling the
    candidates is the expensive part and touches no device memory — and measures on the thread
    that trains, between two steps, so that timings never overlap a step::

        search = Search(family, device, "k3", budget=2.0, progress=False)
        search.build_first_round()           # any thread: build and compile the candidates
        search.measure()                     # the device's thread: check and time them
        search.close(); result = search.result()
    """

    def __init__(self, family: _Family, device: Device, name: str, budget: float,
                 progress: bool = True, candidates: int = CANDIDATES, *,
                 budget_from_start: bool = False) -> None:
        """``budget`` seconds run from now when ``budget_from_start``, else from the first
        :meth:`measure` (background refinement compiles on a worker at its own pace)."""
        self.family, self.device, self.name = family, device, name
        self.budget, self.candidates = budget, candidates
        self.started = time.perf_counter()
        self.deadline: float | None = self.started + budget if budget_from_start else None
        self.default = family.default()
        self.chosen = _pick(family, family.ranked(device_model(device)), self.default,
                            candidates)
        self.bar = _Progress(name, len(self.chosen), progress)
        self.harness = _Harness(device, family.ctx.bound)
        self.measured: dict[Any, float] = {}
        self.schedules: dict[Any, str] = {}
        self.rejected: list[str] = []
        self.reference: list[np.ndarray] | None = None
        self.outputs: list[str] = []
        dtype = str(family.ctx.dtype(family.plan.contraction.out))
        self.tolerance = TOLERANCE.get(dtype, 1e-4)
        self.runners: dict[Any, tuple] = {}  # config -> (run, repeats): to time the best again
        self._built: list[tuple] = []  # [(config, kernels)] of the round waiting to be measured
        self._handles: dict[str, Any] = {}
        stats.searches += 1

    # -- building (no device memory touched) ------------------------------------------------

    def build_first_round(self) -> None:
        self._build(self.chosen)

    def _build(self, configs: list) -> None:
        built = []
        for index, config in enumerate(configs):
            kernels = self.family.build(
                config, f"{self.name}_t{len(self.measured) + len(self.rejected)}_{index}")
            if kernels is None:
                self.rejected.append(f"{config}: the builder refused it")
                stats.rejected += 1
                self.bar.step(None)
                continue
            built.append((config, kernels))
        self._handles = _compile(self.device, [kk for _, kernels in built for kk in kernels])
        self._built = built

    # -- measuring (on the device's thread) ---------------------------------------------------

    def measure(self) -> None:
        """Check and time the round built last (the first round is measured whole: its
        compile was the expensive part; a later round stops at the deadline)."""
        first = not self.measured
        if self.deadline is None:
            self.deadline = time.perf_counter() + self.budget
        ready: dict[Any, tuple] = {}
        for config, kernels in self._built:
            if not first and time.perf_counter() > self.deadline:
                self.bar.step(None)
                continue
            try:
                ready[config] = self._check(config, kernels)
            except Exception as exc:  # noqa: BLE001 - a broken candidate is dropped, not fatal
                if config is self.default:
                    raise
                self.rejected.append(f"{config}: {exc}")
                stats.rejected += 1
                debug_print(1, f"tune {self.name}: dropped {config}: {exc}")
                self.bar.step(None)
                continue
            self.schedules[config] = kernels[0].schedule
        self._built, self._handles = [], {}
        if not ready:
            return
        if self.measured:  # the best so far runs again beside the newcomers: a fair comparison
            best = min(self.measured, key=self.measured.get)
            if best in self.runners:
                ready[best] = self.runners[best]
        times = _time_interleaved(self.device, ready, None if first else self.deadline)
        for config, seconds in times.items():
            if config not in self.measured:
                stats.timed += 1
                self.bar.step(seconds)
            self.measured[config] = min(seconds, self.measured.get(config, math.inf))
            self.runners[config] = ready[config]

    def _check(self, config, kernels: list) -> tuple:
        """Run the candidate once against the reference; its (run, repeats) for timing."""
        device, harness = self.device, self.harness
        compiled = [self._handles.get(kk.name) for kk in kernels]
        if any(h is None for h in compiled):
            raise RuntimeError("it did not compile")
        prepared = harness.prepare(kernels)
        launches = [
            (lambda h=h, kk=kk, args=args: device.launch(
                h, args, kk.launch.global_size, kk.launch.local_size,
                shared_bytes=getattr(kk.launch, "shared_bytes", 0)))
            for h, (kk, args) in zip(compiled, prepared)]
        harness.reset()
        for launch in launches:
            launch()
        got = harness.read(_outputs(kernels))
        if self.reference is None:  # the untuned schedule runs first: it is the reference
            self.reference, self.outputs = got, _outputs(kernels)
        else:
            if _outputs(kernels) != self.outputs:
                raise RuntimeError(f"writes {_outputs(kernels)}, not {self.outputs}")
            error = _relative_error(got, self.reference)
            if not error <= self.tolerance:
                raise RuntimeError(f"wrong result (relative error {error:.2e} against "
                                   "the untuned schedule)")

        def run(launches=launches) -> None:
            for launch in launches:
                launch()

        return run, _calibrate(device, run)

    def try_neighbours(self) -> None:
        """While the budget lasts: build and measure the neighbours of the fastest."""
        if not self.measured or time.perf_counter() >= (self.deadline or math.inf):
            return
        best = min(self.measured, key=self.measured.get)
        extra = [c for c in self.family.neighbours(best) if c not in self.measured]
        extra = extra[:self.candidates]
        if extra:
            self.bar.grow(len(extra))
            self._build(extra)
            self.measure()

    def close(self) -> None:
        best = min(self.measured.values(), default=None)
        self.bar.close(best, self.measured.get(self.default))
        self.harness.free()

    def result(self) -> SearchResult:
        best = min(self.measured, key=self.measured.get)
        result = SearchResult(self.name, self.family.name, self.schedules[best], best,
                              self.measured[best], self.default, self.measured[self.default],
                              len(self.measured) + len(self.rejected), self.rejected,
                              time.perf_counter() - self.started)
        debug_print(1, f"tune {self.name}: {result.speedup:.2f}x over the untuned schedule "
                       f"({result.default_seconds * 1e3:.3f} -> {result.seconds * 1e3:.3f} ms), "
                       f"{result.tried} tried, {len(self.rejected)} dropped")
        return result


def _compile(device: Device, kernels: list) -> dict[str, Any]:
    """Compile every candidate kernel the way compilation does (in parallel pieces, each
    cached on disk by its own source); if that fails, one kernel at a time, so that one
    candidate the compiler rejects does not sink the others. {kernel name: handle or None}."""
    if not kernels:
        return {}
    try:
        launches, _ = compile_kernels(kernels, device)
        return {kk.name: launch.kernel for kk, launch in zip(kernels, launches)}
    except Exception as exc:  # noqa: BLE001
        debug_print(1, f"tuning: the batch build failed ({exc}); building one at a time")
    out: dict[str, Any] = {}
    for kk in kernels:
        try:
            out[kk.name] = compile_kernels([kk], device)[0][0].kernel
        except Exception:  # noqa: BLE001
            out[kk.name] = None
    return out


__all__ = ["tuning", "tuned_config", "may_search", "search_family", "family_of", "SearchResult",
           "TuneStats", "stats", "CANDIDATES", "Search"]
