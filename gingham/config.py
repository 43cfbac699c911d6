"""gingham's one configuration object, and the one place that reads the environment.

Precedence, highest first: environment variables, the user config file, the defaults below.

========================  =============================================================
environment variable      field
========================  =============================================================
``GINGHAM_DEVICE``        ``device``: default device id (``cpu``, ``opencl:0``, ...)
``GINGHAM_CACHE_DIR``     ``cache_dir``: compiled kernels, tuned schedules, ...
``GINGHAM_DEBUG``         ``debug``: 0 (quiet) .. 4 (generated source)
``GINGHAM_CC``            ``cc``: the C compiler of the ``cpu`` device
``GINGHAM_NUM_THREADS``   ``num_threads``: OpenMP threads of ``cpu`` kernels
``GINGHAM_CUDA_GRAPHS``   ``cuda_graphs``: replay CUDA executables as CUDA graphs (1/0)
``GINGHAM_PROGRAM_CACHE`` ``program_cache``: keep what each program compiled to on disk, so
                          that a process meeting it again does not lower it (1, the
                          default, or 0)
``GINGHAM_COMPILE_JOBS``  ``compile_jobs``: native compilations run at once (default: cores)
``GINGHAM_COMPILE_WORKERS`` ``compile_workers``: compile worker processes on this machine,
                          over every gingham process (default: cores)
``GINGHAM_COMPILE_OVERLAP`` ``compile_overlap``: compile a program's kernels while the rest
                          are lowered (1) or after all are (0); default: from 4 compile jobs
``GINGHAM_OPENCL_BUILD``  ``opencl_build``: where OpenCL programs build: ``auto`` (worker
                          processes when the driver serialises builds in one process, as
                          measured once per driver; always for PoCL on a CPU, whose workers
                          also run each kernel once), ``threads`` or ``processes``
``GINGHAM_NVRTC_BUILD``   ``nvrtc_build``: where a CUDA device's pieces compile: ``threads``
                          (NVRTC in this process) or ``processes`` (NVRTC worker processes)
``GINGHAM_OPENCL_IDLE``   ``opencl_idle``: seconds without a build after which the OpenCL
                          (and NVRTC) compile worker processes exit (default 30; ``inf``:
                          never)
``GINGHAM_WGMMA``         ``wgmma``: Hopper's warpgroup tensor-core products (sm_90a) where
                          they apply (1, the default) or ``mma.sync`` everywhere (0)
``GINGHAM_AMX``           ``amx``: bfloat16 products on a CPU's AMX tiles where it has them
                          (1, the default) or on its vector FMAs (0)
``GINGHAM_VECTOR_MATH``   ``vector_math``: the ``cpu`` device's kernels call vector variants
                          of exp, log, tanh, ... where the C library has them (1, the
                          default: glibc's libmvec) or only libm's scalar functions (0)
``GINGHAM_CONV_ALGORITHM`` ``conv_algorithm``: how ``gingham.nn`` builds float32 3x3,
                          stride-1 convolutions: ``auto`` (the default: Winograd where it
                          measured faster), ``direct`` or ``winograd``
``GINGHAM_TUNE``          ``tune``: ``off`` (tuning database, else cost model), ``on``
                          (also search and store a schedule for every kernel it lacks) or
                          ``background`` (search them between the steps of a jitted function)
``GINGHAM_TUNE_BUDGET``   ``tune_budget``: seconds of measured search per kernel
``GINGHAM_TUNE_MEASURE``  ``tune_measure``: 1 measures the device model once (cached), 0 uses
                          estimates from the driver's description only
``GINGHAM_PROGRESS``      ``progress``: a long compile's progress line on stderr: ``auto``
                          (on a terminal), ``on`` (also a final line in logs) or ``off``
``GINGHAM_CONFIG_FILE``   where the user config file lives
========================  =============================================================

The user config file is JSON (``platformdirs.user_config_dir("gingham")/config.json``); it may
hold any of the fields ``device``, ``cache_dir``, ``debug``, ``cc``, ``cflags``, ``num_threads``,
``cuda_graphs``, ``program_cache``, ``compile_jobs``, ``compile_overlap``, ``opencl_build``,
``nvrtc_build``, ``opencl_idle``, ``wgmma``, ``amx``, ``vector_math``, ``conv_algorithm``,
``tune``, ``tune_budget``, ``tune_measure``, ``progress``.
``gingham devices --set-default ID`` writes ``{"device": ID}`` into it.

Example::

    >>> from gingham.config import get_config
    >>> cfg = get_config()
    >>> cfg.cache_dir / "cpu"          # where compiled CPU kernels live
    PosixPath('/home/me/.cache/gingham/cpu')

``get_config()`` is cheap (the environment is re-read each call, the file only when it
changes), so tests may ``monkeypatch.setenv`` and see the change at once.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from gingham.errors import GinghamError

# IEEE semantics on purpose: no -ffast-math, so the CPU gives the same numbers as the other
# devices and the reference interpreter (fast-math reassociates sums and drops NaN/Inf).
# -fno-trapping-math (clang's default) changes no value: it lets GCC compute a float operation
# that a branch or a select would skip, as a vector lane does, where by default GCC keeps it
# behind the branch in case it traps. gingham never reads the floating-point exception flags.
# Without it, no loop that converts float16 was vectorised: the story net's fp16 step on a
# 2-core Xeon took 596 ms, with it 248 ms (docs/measurements.md, stop 39).
# -fno-math-errno changes no value either: libm's functions still return the same numbers, but
# need not set errno, which gingham never reads. Without it GCC keeps every sqrtf behind a
# test and a call (for errno on a negative input), so no loop taking a square root (a batch
# norm's 1 / sqrt(var + eps)) was vectorised.
DEFAULT_CFLAGS: tuple[str, ...] = ("-O3", "-march=native", "-fno-trapping-math",
                                   "-fno-math-errno", "-fopenmp", "-fPIC", "-shared")

MAX_DEBUG = 4


class ConfigError(GinghamError, ValueError):
    """A configuration value (environment variable or config file entry) that is not valid."""


def _default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("gingham"))


@dataclass(frozen=True)
class Config:
    """Every setting of gingham, typed. Build it with :func:`get_config`.

    ``device``: the default device id, or None to pick the best available one.
    ``cache_dir``: root of every on-disk cache (compiled kernels, tuning results).
    ``debug``: 0..4; 1 device and kernel counts, 2 per-kernel time, 3 schedules, 4 source.
    ``cc`` / ``cflags``: the C compiler of the ``cpu`` device and its flags.
    ``num_threads``: OpenMP threads for ``cpu`` kernels (None: the OpenMP default).
    ``cuda_graphs``: replay a compiled program on a CUDA device as one CUDA graph launch
    instead of one launch per kernel.
    ``program_cache``: keep what each program compiled to on disk
    (:mod:`gingham.compiler.programs`), so that a process that meets the program again loads
    its kernels without lowering it; off, every process runs the compiler's passes.
    ``compile_jobs``: how many pieces of a program compile at once (C compiler processes,
    OpenCL builds, NVRTC calls); None: one per core this process may use. 1 compiles a
    program as one translation unit.
    ``compile_workers``: how many compile worker processes (OpenCL builds, NVRTC with
    ``nvrtc_build=processes``) run on this machine at once, counted over every gingham
    process by lock files (:mod:`gingham.devices.build_slots`); None: one per core. Each
    holds a device context on a GPU, so many gingham processes sharing one (``pytest -n
    15``) would otherwise exhaust its memory; a process that finds no free slot builds in
    itself.
    ``compile_overlap``: start compiling a program's first kernels while the rest are still
    being lowered (:class:`gingham.devices.pieces.UnitBuilder`); None (the default): where
    there are at least 4 compile jobs (:func:`gingham.devices.pieces.overlap_on`: on the
    H200's 16-core host it shortened ResNet-9's first step by about 0.3 s; a 2-core machine
    has no core to spare for it).
    ``opencl_build``: how the pieces of an OpenCL program build: ``threads`` (in this
    process), ``processes`` (in compile worker processes, one context each: NVIDIA's driver
    serialises builds inside a process) or ``auto`` (processes where a one-time check finds
    this device's builds serialised, :mod:`gingham.devices.opencl_build`; on a CPU device
    processes for PoCL, whose workers also run each kernel once so that the binary carries
    the code PoCL would generate at its first launch, threads for other drivers).
    ``nvrtc_build``: how the pieces of a CUDA program compile: ``threads`` (NVRTC in this
    process) or ``processes`` (NVRTC in compile worker processes,
    :mod:`gingham.devices.opencl_worker`: on 16 threads of one process NVRTC ran at about
    half the rate of 16 processes on the H200's host, yet ResNet-9's fresh first step was no
    shorter with them: it also waits for its lowering's last kernels and their compile).
    ``opencl_idle``: seconds without a build after which the compile worker
    processes exit, freeing their device contexts (on NVIDIA, GPU memory), and the NVRTC
    workers their memory; the next program to build starts them again. ``inf`` keeps them
    until the process exits.
    ``wgmma``: on a Hopper GPU (compute capability 9.0) run 16-bit float contractions with
    the warpgroup instructions (:mod:`gingham.compiler.tiling_wgmma`); off: ``mma.sync``.
    ``amx``: on a CPU with AMX tiles (``DeviceInfo.features`` holds ``amx-bf16``: Sapphire
    Rapids and later) run the ``cpu`` device's bfloat16 sums of products on them
    (:mod:`gingham.compiler.tiling_cpu`); off: float32 vector FMAs, as on other CPUs.
    ``vector_math``: let the ``cpu`` device's kernels call vector variants of libm's
    functions (exp, log, sin, tanh, pow, ...) where its C library links them (glibc's
    libmvec: :mod:`gingham.devices.cpu_vector_math`), so that GCC vectorises the loops that
    call them (a softmax's exponentials 7x faster on 2 AVX-512 cores). Their errors are a few
    units in the last place (up to 4 measured for logf), libm's one or two; off: libm's
    scalar functions only.
    ``conv_algorithm``: how :func:`gingham.nn.functional.conv2d` builds a float32 3x3,
    stride-1, padding-1, ungrouped convolution of at least 16 input channels: ``direct``, one
    contraction, ``winograd``, Winograd's F(2x2, 3x3) as four (:mod:`gingham.nn.winograd`:
    2.25x fewer multiply-adds in its products, more memory traffic in its transforms), or
    ``auto`` (the default), Winograd where it is faster: the layer's measured choice in the
    tuning database (``gingham tune``, :mod:`gingham.tune.algorithms`), else channels-last
    data with enough channels for the device's kind
    (:data:`gingham.nn.winograd.AUTO_MIN_CHANNELS`), direct otherwise. Read when a function
    is traced.
    ``config_file``: where the user config file is read from and written to.
    ``tune``: ``off`` compiles with the tuning database's schedule or the cost model's choice;
    ``on`` also runs a measured search for each tunable kernel the database lacks, before
    compiling it; ``background`` compiles at once and searches them between the steps of
    ``gingham.jit`` functions, which switch to the refined program when it is ready
    (:mod:`gingham.tune.background`).
    ``tune_budget``: seconds one kernel's measured search may take.
    ``tune_measure``: measure the device model by micro-benchmarks (once, cached on disk).
    ``progress``: what a compile the program waits on for more than two seconds shows on
    stderr (:mod:`gingham.devices.compile_progress`): ``auto``, a line kept up to date on a
    terminal; ``on``, also a final line per compile where stderr is not a terminal; ``off``.
    """

    device: str | None = None
    cache_dir: Path = field(default_factory=_default_cache_dir)
    debug: int = 0
    cc: str = "cc"
    cflags: tuple[str, ...] = DEFAULT_CFLAGS
    num_threads: int | None = None
    cuda_graphs: bool = True
    program_cache: bool = True
    compile_jobs: int | None = None
    compile_workers: int | None = None
    compile_overlap: bool | None = None
    opencl_build: str = "auto"
    nvrtc_build: str = "threads"
    opencl_idle: float = 30.0
    wgmma: bool = True
    amx: bool = True
    vector_math: bool = True
    conv_algorithm: str = "auto"
    config_file: Path = field(default_factory=lambda: default_config_file())
    tune: str = "off"
    tune_budget: float = 10.0
    tune_measure: bool = True
    progress: str = "auto"


# Fields the user config file may set (config_file itself is chosen by the environment only).
_FILE_FIELDS = ("device", "cache_dir", "debug", "cc", "cflags", "num_threads", "cuda_graphs",
                "program_cache", "compile_jobs", "compile_workers", "compile_overlap",
                "opencl_build", "nvrtc_build", "opencl_idle", "wgmma", "amx", "vector_math", "conv_algorithm", "tune",
                "tune_budget", "tune_measure", "progress")
TUNE_MODES = ("off", "on", "background")
OPENCL_BUILD_MODES = ("auto", "threads", "processes")
NVRTC_BUILD_MODES = ("threads", "processes")
CONV_ALGORITHMS = ("auto", "direct", "winograd")
PROGRESS_MODES = ("auto", "on", "off")


def default_config_file() -> Path:
    """Where the user config file lives: ``GINGHAM_CONFIG_FILE`` or the platform's config dir."""
    override = os.environ.get("GINGHAM_CONFIG_FILE")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir("gingham")) / "config.json"


# (path, mtime_ns, size) -> parsed file; a file read costs ~20 us, a stat ~1 us.
_file_memo: dict[tuple[str, int, int], dict[str, Any]] = {}


def read_config_file(path: Path | None = None) -> dict[str, Any]:
    """The user config file as a dict ({} when it does not exist).

    Raises ConfigError naming the file when it is not a JSON object.
    """
    path = path or default_config_file()
    try:
        st = path.stat()
    except OSError:
        return {}
    memo_key = (str(path), st.st_mtime_ns, st.st_size)
    if memo_key in _file_memo:
        return dict(_file_memo[memo_key])
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the gingham config file {path}: {exc}; "
                          "fix or delete it") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"the gingham config file {path} must hold a JSON object, "
                          f"not {type(data).__name__}")
    _file_memo.clear()
    _file_memo[memo_key] = data
    return dict(data)


def write_config_file(updates: dict[str, Any], path: Path | None = None) -> Path:
    """Merge ``updates`` into the user config file, atomically; returns the file's path.

    A value of None removes the key. Example: ``write_config_file({"device": "opencl:0"})``.
    """
    path = path or default_config_file()
    unknown = set(updates) - set(_FILE_FIELDS)
    assert not unknown, f"not config file fields: {sorted(unknown)}"
    data = read_config_file(path)
    for key, value in updates.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = str(value) if isinstance(value, Path) else value
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _parse_int(name: str, text: str, low: int, high: int | None) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"{name}={value} is out of range ({bound})")
    return value


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={value!r} is not a boolean (use 1 or 0)")


def _parse_auto_bool(name: str, value: Any) -> bool | None:
    """A boolean, or None for ``auto`` (and JSON null): gingham decides."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    try:
        return _parse_bool(name, value)
    except ConfigError:
        raise ConfigError(f"{name}={value!r} is not 1, 0 or auto") from None


def _from_file(data: dict[str, Any], path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{key} in {path}"
        if key not in _FILE_FIELDS:
            warnings.warn(f"gingham: ignoring unknown key {key!r} in {path} "
                          f"(known: {', '.join(_FILE_FIELDS)})", stacklevel=3)
        elif key == "cache_dir":
            values[key] = Path(str(value)).expanduser()
        elif key == "debug":
            values[key] = _parse_int(where, value, 0, MAX_DEBUG)
        elif key in ("num_threads", "compile_jobs", "compile_workers"):
            values[key] = None if value is None else _parse_int(where, value, 1, None)
        elif key in ("cuda_graphs", "program_cache", "wgmma", "amx", "vector_math"):
            values[key] = _parse_bool(where, value)
        elif key == "compile_overlap":
            values[key] = _parse_auto_bool(where, value)
        elif key == "opencl_build":
            values[key] = _parse_choice(where, value, OPENCL_BUILD_MODES)
        elif key == "nvrtc_build":
            values[key] = _parse_choice(where, value, NVRTC_BUILD_MODES)
        elif key == "opencl_idle":
            values[key] = _parse_budget(where, value)
        elif key == "conv_algorithm":
            values[key] = _parse_choice(where, value, CONV_ALGORITHMS)
        elif key == "progress":
            values[key] = _parse_choice(where, value, PROGRESS_MODES)
        elif key in _TUNE_PARSERS:
            values[key] = _TUNE_PARSERS[key](where, value)
        elif key == "cflags":
            flags = value.split() if isinstance(value, str) else value
            values[key] = tuple(str(flag) for flag in flags)
        else:
            values[key] = None if value is None else str(value)
    return values


def _parse_choice(name: str, text: object, choices: tuple[str, ...]) -> str:
    value = str(text).strip().lower()
    if value not in choices:
        raise ConfigError(f"{name}={text!r} is not one of {', '.join(choices)}")
    return value


def _parse_tune(name: str, text: object) -> str:
    return _parse_choice(name, text, TUNE_MODES)


def _parse_budget(name: str, text: object) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not a number of seconds") from None
    if not value > 0:
        raise ConfigError(f"{name}={value} must be > 0 seconds")
    return value


_TUNE_PARSERS = {"tune": _parse_tune, "tune_budget": _parse_budget, "tune_measure": _parse_bool}
_TUNE_VARIABLES = {"GINGHAM_TUNE": "tune", "GINGHAM_TUNE_BUDGET": "tune_budget",
                   "GINGHAM_TUNE_MEASURE": "tune_measure"}


def _from_environment(env: os._Environ[str] | dict[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if env.get("GINGHAM_DEVICE"):
        values["device"] = env["GINGHAM_DEVICE"].strip()
    if env.get("GINGHAM_CACHE_DIR"):
        values["cache_dir"] = Path(env["GINGHAM_CACHE_DIR"]).expanduser()
    if env.get("GINGHAM_DEBUG"):
        values["debug"] = _parse_int("GINGHAM_DEBUG", env["GINGHAM_DEBUG"], 0, MAX_DEBUG)
    if env.get("GINGHAM_CC"):
        values["cc"] = env["GINGHAM_CC"].strip()
    if env.get("GINGHAM_NUM_THREADS"):
        values["num_threads"] = _parse_int("GINGHAM_NUM_THREADS",
                                           env["GINGHAM_NUM_THREADS"], 1, None)
    if env.get("GINGHAM_CUDA_GRAPHS"):
        values["cuda_graphs"] = _parse_bool("GINGHAM_CUDA_GRAPHS", env["GINGHAM_CUDA_GRAPHS"])
    if env.get("GINGHAM_PROGRAM_CACHE"):
        values["program_cache"] = _parse_bool("GINGHAM_PROGRAM_CACHE",
                                              env["GINGHAM_PROGRAM_CACHE"])
    if env.get("GINGHAM_WGMMA"):
        values["wgmma"] = _parse_bool("GINGHAM_WGMMA", env["GINGHAM_WGMMA"])
    if env.get("GINGHAM_AMX"):
        values["amx"] = _parse_bool("GINGHAM_AMX", env["GINGHAM_AMX"])
    if env.get("GINGHAM_VECTOR_MATH"):
        values["vector_math"] = _parse_bool("GINGHAM_VECTOR_MATH", env["GINGHAM_VECTOR_MATH"])
    if env.get("GINGHAM_CONV_ALGORITHM"):
        values["conv_algorithm"] = _parse_choice("GINGHAM_CONV_ALGORITHM",
                                                 env["GINGHAM_CONV_ALGORITHM"], CONV_ALGORITHMS)
    if env.get("GINGHAM_COMPILE_JOBS"):
        values["compile_jobs"] = _parse_int("GINGHAM_COMPILE_JOBS",
                                            env["GINGHAM_COMPILE_JOBS"], 1, None)
    if env.get("GINGHAM_COMPILE_WORKERS"):
        values["compile_workers"] = _parse_int("GINGHAM_COMPILE_WORKERS",
                                               env["GINGHAM_COMPILE_WORKERS"], 1, None)
    if env.get("GINGHAM_COMPILE_OVERLAP"):
        values["compile_overlap"] = _parse_auto_bool("GINGHAM_COMPILE_OVERLAP",
                                                     env["GINGHAM_COMPILE_OVERLAP"])
    if env.get("GINGHAM_OPENCL_BUILD"):
        values["opencl_build"] = _parse_choice("GINGHAM_OPENCL_BUILD",
                                               env["GINGHAM_OPENCL_BUILD"], OPENCL_BUILD_MODES)
    if env.get("GINGHAM_NVRTC_BUILD"):
        values["nvrtc_build"] = _parse_choice("GINGHAM_NVRTC_BUILD",
                                              env["GINGHAM_NVRTC_BUILD"], NVRTC_BUILD_MODES)
    if env.get("GINGHAM_OPENCL_IDLE"):
        values["opencl_idle"] = _parse_budget("GINGHAM_OPENCL_IDLE", env["GINGHAM_OPENCL_IDLE"])
    if env.get("GINGHAM_PROGRESS"):
        values["progress"] = _parse_choice("GINGHAM_PROGRESS", env["GINGHAM_PROGRESS"],
                                           PROGRESS_MODES)
    for variable, key in _TUNE_VARIABLES.items():
        if env.get(variable):
            values[key] = _TUNE_PARSERS[key](variable, env[variable])
    return values


def get_config() -> Config:
    """The current configuration: defaults, then the user config file, then the environment.

    Raises ConfigError (naming the variable or file) for a value that does not parse.
    """
    config_file = default_config_file()
    values = _from_file(read_config_file(config_file), config_file)
    values.update(_from_environment(os.environ))
    return Config(config_file=config_file, **values)


def debug_print(level: int, message: str) -> None:
    """Print ``message`` to stderr when ``GINGHAM_DEBUG`` (or the config's debug) >= level."""
    try:
        debug = get_config().debug
    except ConfigError:
        debug = 0
    if debug >= level:
        print(f"gingham: {message}", file=sys.stderr)


__all__ = [
    "Config", "ConfigError", "DEFAULT_CFLAGS", "get_config", "read_config_file",
    "write_config_file", "default_config_file", "debug_print",
]
