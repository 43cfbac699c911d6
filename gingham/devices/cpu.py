"""The ``cpu`` device: C source compiled by the system C compiler, loaded with ctypes.

A kernel is a plain C function that holds its own OpenMP parallel loop; ``launch`` calls it
with one pointer per Buffer and one C scalar per scalar argument, in order (``global_size``
and ``local_size`` are ignored)::

    void add(float* restrict c, const float* restrict a, const float* restrict b, long long n)
    {
        #pragma omp parallel for
        for (long long i = 0; i < n; ++i) c[i] = a[i] + b[i];
    }

    >>> dev = get_device("cpu")
    >>> k = dev.compile(SOURCE, "add")
    >>> dev.launch(k, [C, A, B, np.int64(n)])   # synchronous: ctypes calls it directly

Buffers are 64-byte aligned host memory. The shared object is stored in the disk cache,
keyed with ``cc --version``, the flags and the CPU model (``-march=native`` makes the code
specific to it). ``config.cc`` and ``config.cflags`` choose the compiler
(``GINGHAM_CC``); ``config.num_threads`` (``GINGHAM_NUM_THREADS``) the OpenMP threads.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from gingham.cache import DiskCache
from gingham.config import get_config
from gingham.devices import cpu_vector_math
from gingham.devices.base import (SCALAR_CTYPES, Buffer, Device, DeviceInfo, Kernel, LaunchPlan,
                                  LaunchSpec, Slot, host_buffer)
from gingham.errors import DeviceError, DeviceNotFoundError

# A compile of this proves the compiler, its OpenMP support and the flags all work.
_PROBE_SOURCE = """
void gingham_probe(float* restrict x, long long n) {
    #pragma omp parallel for
    for (long long i = 0; i < n; ++i) x[i] += 1.0f;
}
"""

# A compile of this proves the compiler targets AMX with the flags (GCC 11 and later with
# -march=native on a CPU that has it).
_AMX_PROBE_SOURCE = """
#include <immintrin.h>
#if !defined(__AMX_TILE__) || !defined(__AMX_BF16__) || !defined(__AVX512BW__)
#error "no AMX (or no AVX-512 BW, which packs the tiles' rows)"
#endif
void gingham_amx_probe(void) { _tile_release(); }
"""

_INSTALL_HINT = "install a C compiler with OpenMP (e.g. `apt-get install gcc`) or set GINGHAM_CC"


# ---- the host CPU, described from /proc and /sys (shared with OpenCL CPU devices) ----------

def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else 0


@lru_cache(maxsize=1)
def host_caches() -> dict[str, int]:
    """L1 data, L2, L3 sizes and the cache line of cpu0, in bytes (0 when unknown).

    Read from /sys/devices/system/cpu/cpu0/cache (Linux); falls back to 64-byte lines, the
    line size of every current x86 core and most ARM cores.
    """
    caches = {"l1": 0, "l2": 0, "l3": 0, "line": 0}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
            line = int((index / "coherency_line_size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not 1 <= level <= 3:
            continue
        caches[f"l{level}"] = max(caches[f"l{level}"], size)
        caches["line"] = caches["line"] or line
    caches["line"] = caches["line"] or 64
    return caches


@lru_cache(maxsize=1)
def host_cpu() -> dict[str, str]:
    """The host CPU's model name, vendor and feature flags (from /proc/cpuinfo on Linux)."""
    fields = {"name": "", "vendor": "", "flags": ""}
    keys = {"model name": "name", "vendor_id": "vendor", "flags": "flags",
            "Features": "flags", "CPU implementer": "vendor"}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        name = keys.get(key.strip())
        if name and not fields[name]:
            fields[name] = value.strip()
    vendors = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "0x41": "ARM", "0x61": "Apple"}
    fields["vendor"] = vendors.get(fields["vendor"], fields["vendor"])
    fields["name"] = fields["name"] or platform.processor() or platform.machine()
    return fields


def host_simd_width(flags: str) -> int:
    """fp32 lanes of the widest vector unit: AVX-512 16, AVX/AVX2 8, SSE/NEON 4."""
    present = set(flags.split())
    if "avx512f" in present:
        return 16
    if "avx2" in present or "avx" in present:
        return 8
    return 4


def _granted_amx() -> bool:
    """Whether Linux lets this process use the AMX tile registers: it asks for them
    (``arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)``; once granted they stay granted to the
    process and the children it forks). Without the grant a tile instruction kills the
    process with SIGILL, so no schedule uses them unless this returned True."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        sys_arch_prctl, req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18
        return libc.syscall(sys_arch_prctl, req_xcomp_perm, xfeature_xtiledata) == 0
    except (OSError, AttributeError):
        return False


def host_features(flags: str, compiler_targets_amx: Callable[[], bool]) -> tuple[str, ...]:
    """The entries of ``DeviceInfo.features`` this CPU has: ``amx-bf16`` where it has AMX
    tiles with bfloat16 products (``amx_tile``, ``amx_bf16``: Sapphire Rapids and later), the
    compiler targets them (asked only then: it may compile a probe) and the OS lets this
    process use them."""
    present = set(flags.split())
    if {"amx_tile", "amx_bf16"} <= present and compiler_targets_amx() and _granted_amx():
        return ("amx-bf16",)
    return ()


def host_cores() -> int:
    """Cores this process may run on (the affinity mask respects taskset and containers)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def host_memory_bytes() -> int:
    """Physical memory, capped by a cgroup v2 limit when the process runs under one."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit)) if total else int(limit)
    except OSError:
        pass
    return total


# ---- the toolchain ------------------------------------------------------------------------

#: Added to GCC's flags. Its vectoriser gives up on a loop whose pointers need more than 10
#: run-time alias checks (the default of this parameter). A kernel's pointer parameters are
#: ``restrict``, but OpenMP outlines the parallel loop into a function that receives them in a
#: struct, where ``restrict`` is lost: a GEMM epilogue that reads five tensors and stores four
#: (the story net's fused batch-norm gradient) ran scalar, 11.8 ms against 4.5 ms vectorised
#: (2-core EPYC, the whole step's kernels 150 -> 126 ms).
#: ``iv-max-considered-uses``: GCC's induction-variable optimisation spent two thirds of the
#: 3.3 s it took to compile a GEMM with 14 x 32 register blocks (``-ftime-report``: "tree iv
#: optimization" 2.1 s) on the fully unrolled micro-kernel, whose addresses are constant
#: offsets that need no new induction variables. Above 50 uses a loop is left as it is: the
#: kernel compiled in 1.2 s; a fresh ResNet-9 first step on 2 cores 38.5 -> 30 s and
#: ResNet-18's 35.9 -> 30.2 s, their steps and GEMM 1024 / 2048 the same within the noise.
#: At 50 the story net's 14 x 32 GEMMs (M 40000 x N 32) still took 2.7-2.8 s each, 1.6 s of
#: it in the optimisation: from 20 uses, 1.1 s. Its step's 109 kernels 29.4 -> 16.9 s of gcc
#: one at a time, its fresh first step 13.6 -> 7.2 s, its steps the same (127 ms); GEMM 1024
#: and 2048 compile to the same assembly, ResNet-9 and ResNet-18 compile as long as before,
#: and their GEMMs took 0.97-1.03x their time (3946 -> 3937 ms a step in all) and 0.77-1.02x
#: (1835 -> 1806 ms) on the 2-core EPYC (``tools/step_overhead.py --kernels``, best of two).
GCC_FLAGS: tuple[str, ...] = ("--param=vect-max-version-for-alias-checks=64",
                              "--param=iv-max-considered-uses=20")
#: Added to GCC's flags on an AVX-512 CPU. The schedules are built for the host's widest
#: vectors (``simd_width`` 16: a register block of 6 x 64 is 24 zmm accumulators), but GCC's
#: tuning for Intel cores (``-march=native`` is rocketlake on a Sapphire Rapids VM) prefers
#: 256-bit vectors: the block became 48 ymm accumulators, spilled, and GEMM 1024 ran at
#: 63 GFLOP/s on 2 cores against NumPy's 144.
GCC_AVX512_FLAGS: tuple[str, ...] = ("-mprefer-vector-width=512",)


def _tuned_flags(version: str, cflags: tuple[str, ...], simd_width: int = 0
                 ) -> tuple[str, ...]:
    """``cflags`` with what the compiler that printed ``version`` needs added (GCC_FLAGS for
    GCC, and GCC_AVX512_FLAGS where the host's vectors are 16 floats wide; clang prints its own
    name and takes them as they are)."""
    if "Free Software Foundation" not in version or "clang" in version.lower():
        return cflags
    wanted = GCC_FLAGS + (GCC_AVX512_FLAGS if simd_width >= 16 else ())
    # A parameter the user's flags set already keeps their value.
    return cflags + tuple(flag for flag in wanted if not any(
        given.startswith(flag.rsplit("=", 1)[0]) for given in cflags))


def _probe_toolchain(cc: str, cflags: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    """(resolved compiler path, ``cc --version`` output, the flags to build with: ``cflags``
    and :func:`_tuned_flags`' additions); DeviceNotFoundError if unusable.

    The probe compile is cached on disk, so only the first process pays for it (~100 ms).
    """
    path = shutil.which(cc)
    if path is None:
        raise DeviceNotFoundError(f"the cpu device needs a C compiler, and {cc!r} was not "
                                  f"found; {_INSTALL_HINT}")
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise DeviceNotFoundError(f"the C compiler {path} does not run ({exc}); "
                                  f"{_INSTALL_HINT}") from None
    cflags = _tuned_flags(version, cflags, host_simd_width(host_cpu()["flags"]))
    cache = DiskCache("cpu")
    key = cache.key("probe", path, version, cflags, platform.machine())
    if cache.get(key) is None:
        error = _run_compiler(path, cflags, _PROBE_SOURCE)[1]
        if error is not None:
            raise DeviceNotFoundError(f"the C compiler {path} cannot build an OpenMP shared "
                                      f"library with flags {' '.join(cflags)}:\n{error}\n"
                                      f"{_INSTALL_HINT}")
        cache.put(key, b"ok")
    return path, version, cflags


def _compiler_targets_amx(path: str, version: str, cflags: tuple[str, ...]) -> bool:
    """Whether ``path`` with ``cflags`` compiles AMX intrinsics (asked once, cached on disk)."""
    cache = DiskCache("cpu")
    key = cache.key("amx-probe", _AMX_PROBE_SOURCE, path, version, cflags, host_cpu()["name"])
    answer = cache.get(key)
    if answer is None:
        answer = b"yes" if _run_compiler(path, cflags, _AMX_PROBE_SOURCE)[1] is None else b"no"
        cache.put(key, answer)
    return answer == b"yes"


#: The libraries every kernel links (:func:`_vector_math` adds libmvec where it applies).
_LIBM: tuple[str, ...] = ("-lm",)


def _run_compiler(cc: str, cflags: tuple[str, ...], source: str,
                  libraries: tuple[str, ...] = _LIBM) -> tuple[bytes, str | None]:
    """(shared object bytes, None) on success, (b"", compiler output) on failure.
    ``libraries`` come after the source, where a linker that drops unneeded libraries
    (``--as-needed``) still sees what the kernels call from them."""
    with tempfile.TemporaryDirectory(prefix="gingham-cc-") as tmp:
        src, out = Path(tmp) / "kernel.c", Path(tmp) / "kernel.so"
        src.write_text(source, encoding="utf-8")
        command = [cc, *cflags, "-o", str(out), str(src), *libraries]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0 or not out.exists():
            return b"", f"$ {' '.join(command)}\n{proc.stderr}{proc.stdout}"
        return out.read_bytes(), None


def _vector_math(cc: str, version: str, cflags: tuple[str, ...]
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(defines, libraries) that give the kernels vector variants of libm's functions
    (:mod:`gingham.devices.cpu_vector_math`), or none where ``config.vector_math`` is off or
    the toolchain has none."""
    if not get_config().vector_math:
        return (), _LIBM

    def compiles(extra: tuple[str, ...], source: str, libraries: tuple[str, ...]) -> bool:
        return _run_compiler(cc, cflags + extra, source, _LIBM + libraries)[1] is None

    functions = cpu_vector_math.available(compiles, (cc, version, cflags, platform.machine()))
    if not functions:
        return (), _LIBM
    return cpu_vector_math.defines(functions), _LIBM + cpu_vector_math.LIBRARIES


class CPUDevice(Device):
    """The host CPU, running C kernels compiled to a shared object (see the module doc)."""

    cache_namespace = "cpu"
    source_suffix = ".c"
    pools_buffers = True  # an aligned host allocation costs more than a replayed launch

    def __init__(self, cc_path: str, cc_version: str, cflags: tuple[str, ...],
                 num_threads: int | None, libraries: tuple[str, ...] = _LIBM) -> None:
        cpu, caches = host_cpu(), host_caches()
        info = DeviceInfo(
            id="cpu", name=cpu["name"], vendor=cpu["vendor"], kind="cpu", dialect="c",
            compute_units=host_cores(), global_memory_bytes=host_memory_bytes(),
            # No software-managed local memory on a CPU: tiles are sized for l1/l2 instead.
            local_memory_bytes=0, max_work_group_size=1,
            simd_width=host_simd_width(cpu["flags"]), cache_line_bytes=caches["line"],
            l1_bytes=caches["l1"], l2_bytes=caches["l2"], l3_bytes=caches["l3"],
            driver_version=platform.release(),
            compiler_version=cc_version.splitlines()[0] if cc_version else "",
            features=host_features(
                cpu["flags"], lambda: _compiler_targets_amx(cc_path, cc_version, cflags)))
        super().__init__(info)
        self.cc, self.cc_version, self.cflags = cc_path, cc_version, cflags
        self.libraries = libraries
        self.num_threads = num_threads
        self._openmp: ctypes.CDLL | None = None  # a loaded kernel library, for its OpenMP calls

    def set_num_threads(self, count: int) -> None:
        """Run this device's kernels on ``count`` OpenMP threads from now on (the launches of
        the calling thread, which is where kernels run: OpenMP keeps the count per thread),
        as ``torch.set_num_threads``; ``GINGHAM_NUM_THREADS`` sets it at start.

            gingham.get_device("cpu").set_num_threads(1)
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"set_num_threads: the number of threads must be a positive int, "
                             f"not {count!r}")
        self.num_threads = count
        if self._openmp is not None:  # else the next kernel library loaded applies it
            self._openmp.omp_set_num_threads(ctypes.c_int(count))

    def get_num_threads(self) -> int:
        """The OpenMP threads this device's next kernel runs on (the count set, else
        OpenMP's own default: ``OMP_NUM_THREADS`` or the cores this process may use)."""
        if self._openmp is not None:
            self._openmp.omp_get_max_threads.restype = ctypes.c_int
            return int(self._openmp.omp_get_max_threads())
        if self.num_threads is not None:
            return self.num_threads
        configured = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
        return int(configured) if configured.isdigit() else len(os.sched_getaffinity(0))

    def _alloc(self, nbytes: int) -> Buffer:
        from gingham.errors import DeviceMemoryError

        # Linux overcommits, so malloc may "succeed" for more than exists and the OOM killer
        # strikes later; refusing what exceeds physical memory gives a clear error instead.
        if self.info.global_memory_bytes and nbytes > self.info.global_memory_bytes:
            raise DeviceMemoryError(
                f"cpu: cannot allocate {nbytes / 2**30:.2f} GiB, more than the machine's "
                f"{self.info.global_memory_bytes / 2**30:.2f} GiB of memory")
        return host_buffer(self, nbytes)

    def _copy_in(self, buffer: Buffer, array: np.ndarray) -> None:
        buffer.handle[:array.nbytes] = array.reshape(-1).view(np.uint8)

    def _copy_out(self, buffer: Buffer, array: np.ndarray) -> None:
        array.reshape(-1).view(np.uint8)[:] = buffer.handle[:array.nbytes]

    def _compiler_identity(self) -> tuple:
        cpu = host_cpu()
        # -march=native: the binary uses exactly this CPU's instructions.
        return (self.cc, self.cc_version, self.cflags, self.libraries, platform.machine(),
                cpu["name"], cpu["flags"])

    def _build(self, source: str, entry: str) -> bytes:
        try:
            binary, error = _run_compiler(self.cc, self.cflags, source, self.libraries)
        except OSError as exc:
            raise DeviceError(f"cpu: cannot run the C compiler {self.cc}: {exc}; "
                              f"{_INSTALL_HINT}") from None
        if error is not None:
            raise self.compile_error(source, "the C compiler rejected the kernel", error)
        return binary

    def _load(self, binary: bytes, entry: str, key: str) -> Kernel:
        return self._load_many(binary, [entry], key)[0]

    def _load_many(self, binary: bytes, entries, key: str) -> list[Kernel]:
        # dlopen needs a file; once loaded, the mapping outlives the unlinked file. One
        # dlopen per shared object, however many kernels it holds.
        fd, path = tempfile.mkstemp(prefix=f"gingham-{key[:12]}-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(binary)
            library = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        finally:
            os.unlink(path)
        if hasattr(library, "omp_set_num_threads"):
            self._openmp = library
            if self.num_threads is not None:
                # Sets the calling thread's OpenMP default for every later parallel region.
                library.omp_set_num_threads(ctypes.c_int(self.num_threads))
        kernels = []
        for entry in entries:
            try:
                function = getattr(library, entry)
            except AttributeError:
                raise DeviceError(f"the shared object has no exported function {entry!r} "
                                  "(is it misspelled or declared static?)") from None
            function.restype = None
            kernels.append(Kernel(self, entry, key, function, keepalive=library))
        return kernels

    def _launch(self, kernel: Kernel, args: list, global_size: tuple[int, ...],
                local_size: tuple[int, ...] | None, shared_bytes: int) -> None:
        _check_shared(shared_bytes)
        c_args = [ctypes.c_void_p(arg.address) if isinstance(arg, Buffer)
                  else SCALAR_CTYPES[arg.dtype](arg) for arg in args]
        # ctypes releases the GIL for the call; it returns when the kernel is done.
        kernel.handle(*c_args)

    def _plan(self, specs: list[LaunchSpec], n_slots: int) -> LaunchPlan:
        return _CPUPlan(self, specs, n_slots)

    def _synchronize(self) -> None:
        pass  # launches are synchronous


def _check_shared(shared_bytes: int) -> None:
    if shared_bytes:
        raise ValueError("cpu kernels have no dynamic shared memory (shared_bytes=0)")


class _CPUPlan(LaunchPlan):
    """Each call's ctypes arguments built once. A slot is one ``c_void_p`` shared by every
    call that reads it, so a run sets each slot's address once and then only calls."""

    def __init__(self, device: CPUDevice, specs: list[LaunchSpec], n_slots: int) -> None:
        super().__init__(device, specs, n_slots)
        self._slots = [ctypes.c_void_p() for _ in range(n_slots)]
        self._calls = []
        for spec in specs:
            _check_shared(spec.shared_bytes)
            args = tuple(self._slots[a.index] if isinstance(a, Slot)
                         else ctypes.c_void_p(a.address) if isinstance(a, Buffer)
                         else SCALAR_CTYPES[a.dtype](a) for a in spec.args)
            self._calls.append((spec.kernel.handle, args))

    def _run(self, buffers) -> None:
        for slot, buffer in zip(self._slots, buffers):
            slot.value = buffer.address
        for function, args in self._calls:
            function(*args)


def discover() -> list[Device]:
    """[the cpu device] when a C compiler with OpenMP works, else DeviceNotFoundError."""
    config = get_config()
    cc_path, cc_version, cflags = _probe_toolchain(config.cc, config.cflags)
    defines, libraries = _vector_math(cc_path, cc_version, cflags)
    return [CPUDevice(cc_path, cc_version, cflags + defines, config.num_threads, libraries)]
