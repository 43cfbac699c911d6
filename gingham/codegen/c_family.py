"""One renderer for the C family: C (CPU, OpenMP), OpenCL C and CUDA C.

A kernel's source is a pure function of (kernel IR, dialect): the schedule is already in the
IR. The dialects differ only in a table of spellings (:class:`Dialect`): type names, qualifiers,
how a work-item finds its index, local memory, barriers and math function names. Half types are
stored as 16-bit integers and converted by small helpers, so the same source works on devices
without native fp16 arithmetic (NVIDIA's OpenCL, for one).

    render(kernel, DIALECTS["opencl"])  ->  "__kernel void k0(__global const float* restrict A, ..."
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..compiler import kernel_ir as k


@dataclass(frozen=True)
class Dialect:
    name: str
    types: dict[str, str]
    kernel_prefix: str
    global_pointer: str  # qualifier before pointer element types
    helper_prefix: str
    thread_index: str  # format with {axis}
    group_index: str
    local_index: str
    shared_qualifier: str
    barrier: str
    overloaded_math: bool  # OpenCL: exp works on float and double; C/CUDA use expf
    restrict: str = "restrict"
    global_barrier: str = ""  # a barrier that orders global memory too (Barrier.global_memory)


_C_TYPES = {
    "float32": "float", "float64": "double", "int8": "signed char", "int16": "short",
    "int32": "int", "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "uint64": "unsigned long long", "bool": "unsigned char",
    "float16": "unsigned short", "bfloat16": "unsigned short",
}
_VECTOR_TYPES = ("float32x4", "float32x8", "float32x16")
#: The C dialect's vectors of float32: GCC's vector extension (clang has it too), declared in
#: the prelude with a broadcast helper each (:func:`_c_splat`; OpenCL's ``(float16)(x)``).
_C_VECTOR_TYPES = {dtype: dtype.replace("float32", "gh_f32") for dtype in _VECTOR_TYPES}
_CL_TYPES = {
    "float32": "float", "float64": "double", "int8": "char", "int16": "short", "int32": "int",
    "int64": "long", "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
    "bool": "uchar", "float16": "ushort", "bfloat16": "ushort",
    # Vectors of float32 (only the CPU GEMM's register block in OpenCL uses them).
    "float32x4": "float4", "float32x8": "float8", "float32x16": "float16",
}

DIALECTS = {
    "c": Dialect(
        "c", {**_C_TYPES, **_C_VECTOR_TYPES}, kernel_prefix="void", global_pointer="",
        helper_prefix="static inline",
        thread_index="", group_index="", local_index="", shared_qualifier="", barrier="",
        overloaded_math=False,
    ),
    "opencl": Dialect(
        "opencl", _CL_TYPES, kernel_prefix="__kernel void", global_pointer="__global",
        helper_prefix="inline", thread_index="get_global_id({axis})",
        group_index="get_group_id({axis})", local_index="get_local_id({axis})",
        shared_qualifier="__local", barrier="barrier(CLK_LOCAL_MEM_FENCE);",
        global_barrier="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
        overloaded_math=True,
    ),
    "cuda": Dialect(
        "cuda", _C_TYPES, kernel_prefix='extern "C" __global__ void', global_pointer="",
        helper_prefix="__device__ __forceinline__",
        thread_index="((long long)blockIdx.{xyz} * blockDim.{xyz} + threadIdx.{xyz})",
        group_index="blockIdx.{xyz}", local_index="threadIdx.{xyz}",
        shared_qualifier="__shared__", barrier="__syncthreads();",
        global_barrier="__syncthreads();",  # it orders global memory too within a block
        overloaded_math=False, restrict="__restrict__",
    ),
}

_XYZ = "xyz"
# C work-item loops are cut into about this many dynamic chunks (see ``For`` of kind thread).
THREAD_CHUNKS = 64
_HALF_TYPES = ("float16", "bfloat16")
#: Scalar names of the GPU dialects' vector types where they differ from the scalar type's.
_VECTOR_SCALARS = {"uint16": "ushort", "uint32": "uint", "uint8": "uchar"}


def _c_splat(dtype: str) -> str:
    """The C dialect's helper that broadcasts a float to a vector type (``float32x16``:
    ``gh_splat_f32x16``), declared in the prelude beside the type."""
    return "gh_splat_" + _C_VECTOR_TYPES[dtype].removeprefix("gh_")


def _without_outer_parentheses(text: str) -> str:
    """``text`` without one pair of parentheses around all of it: ``if ((a == b))`` makes
    clang (PoCL, NVIDIA's OpenCL) warn of an equality comparison with extraneous parentheses.

        >>> _without_outer_parentheses("(a == b)"), _without_outer_parentheses("(a) && (b)")
        ('a == b', '(a) && (b)')
    """
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for position, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and position < len(text) - 1:
            return text  # the first parenthesis closes before the end: not one group
    return text[1:-1]


def render(kernel: k.Kernel, dialect: Dialect) -> str:
    """The complete source of one kernel (helpers included)."""
    return render_many([kernel], dialect)


def render_many(kernels: list[k.Kernel], dialect: Dialect) -> str:
    """One source file holding several kernels, so a program compiles once."""
    return assemble([render_kernel(kernel, dialect) for kernel in kernels], dialect)


@dataclass(frozen=True)
class RenderedKernel:
    """One kernel's code without the prelude, and what its prelude needs (the element types
    it uses and its helpers): :func:`assemble` puts several in one source file without
    rendering them again::

        >>> parts = [render_kernel(kernel, DIALECTS["cuda"]) for kernel in kernels]
        >>> assemble(parts, DIALECTS["cuda"]) == render_many(kernels, DIALECTS["cuda"])
        True
    """

    code: str
    used_types: frozenset[str]
    helpers: frozenset[str]


def render_kernel(kernel: k.Kernel, dialect: Dialect,
                  rename: Callable[[str], str] | None = None) -> RenderedKernel:
    """``kernel``'s code and what its prelude needs.

    ``rename`` maps each text of the IR that holds identifiers (the kernel's, its
    parameters', registers', arrays' and loop variables' names, comments, the schedule and an
    OpenMP reduction clause) to the text written in its place; types, operators and helpers
    are never passed to it. ``dedupe.unit_of`` names kernels by content this way, without
    copying the IR::

        >>> part = render_kernel(kernel, DIALECTS["c"], rename=lambda t: t.replace("T12", "gp0"))
        >>> "T12" in part.code
        False
    """
    renderer = _Renderer(dialect, rename)
    code = renderer.kernel(kernel)
    return RenderedKernel(code, frozenset(renderer.used_types), frozenset(renderer.helpers))


def assemble(parts: list[RenderedKernel], dialect: Dialect) -> str:
    """One source file: the prelude all ``parts`` need (each helper once), then their code."""
    renderer = _Renderer(dialect)
    for part in parts:
        renderer.used_types |= part.used_types
        renderer.helpers |= part.helpers
    return renderer.prelude() + "\n" + "\n".join(part.code for part in parts)


#: The C prelude of a kernel that uses AMX tiles (``kernel_ir.MatrixOp``): every tile 16 rows
#: of 64 bytes. Linux lets a process use the tile registers only once it asks
#: (``ARCH_REQ_XCOMP_PERM`` for ``XTILEDATA``); the cpu device asks before it lowers anything
#: for them, and asking again is harmless, so a library loaded by another process asks too.
_AMX_LINES = [
    "#if !defined(__AMX_TILE__) || !defined(__AMX_BF16__) || !defined(__AVX512BW__)",
    '#error "an AMX schedule needs a compiler targeting AMX (-march=native on a CPU with '
    'amx-bf16)"',
    "#endif",
    "#include <immintrin.h>",
    "#include <sys/syscall.h>",
    "#include <unistd.h>",
    "static inline void gh_amx_begin(void) {",
    "  static int granted;",
    "  if (!__atomic_load_n(&granted, __ATOMIC_RELAXED)) {",
    "    syscall(SYS_arch_prctl, 0x1023, 18);",
    "    __atomic_store_n(&granted, 1, __ATOMIC_RELAXED);",
    "  }",
    "  static const struct {",
    "    unsigned char palette, start_row, reserved[14];",
    "    unsigned short bytes_per_row[16];",
    "    unsigned char rows[16];",
    "  } __attribute__((aligned(64))) config = {",
    "    1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};",
    "  _tile_loadconfig(&config);",
    "}",
    # A 16 x 16 transpose of 32-bit cells in registers: row i of the result, cells r[0..15][i],
    # stored at dst + i * stride (16-bit elements). Both MatrixOps below end in it.
    "static inline void gh_amx_store_transposed(const __m512i r[16], unsigned short* dst,",
    "                                           long stride) {",
    "  __m512i t[16], u[16];",
    "  for (int j = 0; j < 8; j++) {",
    "    t[2 * j] = _mm512_unpacklo_epi32(r[2 * j], r[2 * j + 1]);",
    "    t[2 * j + 1] = _mm512_unpackhi_epi32(r[2 * j], r[2 * j + 1]);",
    "  }",
    "  for (int j = 0; j < 4; j++) {",
    "    u[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);",
    "    u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);",
    "    u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);",
    "    u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);",
    "  }",
    "  /* u[4j + c], 128-bit lane L: cell 4L + c of rows 4j .. 4j + 3 */",
    "  for (int c = 0; c < 4; c++) {",
    "    __m512i a0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);",
    "    __m512i a1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);",
    "    __m512i b0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);",
    "    __m512i b1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);",
    "    _mm512_storeu_si512(dst + c * stride, _mm512_shuffle_i32x4(a0, a1, 0x88));",
    "    _mm512_storeu_si512(dst + (4 + c) * stride, _mm512_shuffle_i32x4(b0, b1, 0x88));",
    "    _mm512_storeu_si512(dst + (8 + c) * stride, _mm512_shuffle_i32x4(a0, a1, 0xdd));",
    "    _mm512_storeu_si512(dst + (12 + c) * stride, _mm512_shuffle_i32x4(b0, b1, 0xdd));",
    "  }",
    "}",
    # Two rows of 32 16-bit elements (a depth 2p and 2p + 1, contiguous) interleaved into
    # pairs, the 32-bit cells a tile row holds K in: elements 0-15's pairs in *low, 16-31's
    # in *high. Both MatrixOps below start from it.
    "static inline void gh_amx_interleave_pair(const unsigned short* rows, __m512i* low,",
    "                                          __m512i* high) {",
    "  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10,",
    "      41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);",
    "  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));",
    "  __m512i even = _mm512_loadu_si512(rows), odd = _mm512_loadu_si512(rows + 32);",
    "  *low = _mm512_permutex2var_epi16(even, lo, odd);",
    "  *high = _mm512_permutex2var_epi16(even, hi, odd);",
    "}",
    # MatrixOp rows_from_panel: dst[i][d] = src[d][i] over 32 x 32 16-bit elements. Depth
    # pairs interleaved first, then the 16 x 16 transpose of those cells for rows 0-15 and
    # again for 16-31. About 0.05 ns an element on one Sapphire Rapids core, against 0.7 for
    # the element-by-element loop.
    "static inline void gh_amx_rows_from_panel(unsigned short* dst, long stride,",
    "                                          const unsigned short* src) {",
    "  __m512i pairs[2][16];  /* [rows 0-15 | 16-31][depth pair]: (src[2p][i], src[2p+1][i]) */",
    "  for (int p = 0; p < 16; p++)",
    "    gh_amx_interleave_pair(src + 64 * p, &pairs[0][p], &pairs[1][p]);",
    "  gh_amx_store_transposed(pairs[0], dst, stride);",
    "  gh_amx_store_transposed(pairs[1], dst + 16 * stride, stride);",
    "}",
    # MatrixOp pairs_from_rows: 32 depths of 32 columns (rows of 64 bytes, contiguous) into
    # 16 rows of K pairs, a B tile's layout: depth rows interleaved two by two.
    "static inline void gh_amx_pairs_from_rows(unsigned short* dst, long stride,",
    "                                          const unsigned short* src) {",
    "  for (int p = 0; p < 16; p++) {",
    "    __m512i low, high;",
    "    gh_amx_interleave_pair(src + 64 * p, &low, &high);",
    "    _mm512_storeu_si512(dst + p * stride, low);",
    "    _mm512_storeu_si512(dst + p * stride + 32, high);",
    "  }",
    "}",
    # MatrixOp pairs_from_columns: 16 columns of 32 depths (each column's depths contiguous,
    # columns src_stride apart) into 16 rows of K pairs, a B tile's rows: the columns' 32-bit
    # cells transposed. A B contiguous along K (a convolution's filter stored [co][ky][kx][ci])
    # packed so; element by element it took 45% of a forward convolution's time.
    "static inline void gh_amx_pairs_from_columns(unsigned short* dst, long stride,",
    "                                             const unsigned short* src, long src_stride) {",
    "  __m512i columns[16];",
    "  for (int i = 0; i < 16; i++) columns[i] = _mm512_loadu_si512(src + i * src_stride);",
    "  gh_amx_store_transposed(columns, dst, stride);",
    "}",
]

#: The MatrixOps that rearrange packed operands in registers, and the helper of _AMX_LINES
#: each calls: (destination, its row stride, source[, the source's column stride]).
_AMX_REARRANGE = {"rows_from_panel": "gh_amx_rows_from_panel",
                  "pairs_from_rows": "gh_amx_pairs_from_rows",
                  "pairs_from_columns": "gh_amx_pairs_from_columns"}


def _unchanged(text: str) -> str:
    return text


#: libm functions (double names; ``f`` suffixed for float) that the C dialect may declare with
#: vector variants, and their arity: those of glibc's libmvec (2.22: exp, log, sin, cos, pow;
#: 2.35 the rest). Which exist is the ``cpu`` device's to find out
#: (:mod:`gingham.devices.cpu_vector_math`).
C_VECTOR_MATH: dict[str, int] = {
    "exp": 1, "log": 1, "sin": 1, "cos": 1, "tan": 1, "sinh": 1, "cosh": 1, "tanh": 1,
    "asin": 1, "acos": 1, "atan": 1, "erf": 1, "erfc": 1, "pow": 2,
}


def vector_math_signature(function: str) -> tuple[str, int]:
    """(C type, arity) of libm's ``function``: a :data:`C_VECTOR_MATH` name (double) or its
    ``f``-suffixed float variant. ``vector_math_signature("powf") == ("float", 2)``."""
    # expf is exp's float variant; erf is a double function itself
    base, t = (function, "double") if function in C_VECTOR_MATH else (function[:-1], "float")
    return t, C_VECTOR_MATH[base]


def vector_math_declaration(function: str) -> list[str]:
    """The C lines that declare libm's ``function`` with vector variants::

        #pragma omp declare simd notinbranch
        float powf(float, float);
    """
    t, arity = vector_math_signature(function)
    return ["#pragma omp declare simd notinbranch", f"{t} {function}({', '.join([t] * arity)});"]


#: C: ``gh_expf``, the C dialect's float32 ``exp``. Where the toolchain has a vector expf
#: (``GH_SIMD_expf``: glibc's libmvec), its 16 lanes leave the vector code for scalar calls
#: whenever one lane's argument is outside about (-87.3, 87.9), where the result is not a normal
#: float: a vector holding one masked score (``exp(-inf)``) costs 2.8-4.3 ns an element
#: instead of 0.3 (the causal softmax of an attention, half its scores ``-inf``, on one AMD
#: EPYC core: 7.5-10.2 -> 3.3-4.0 ms; docs/measurements.md, stop 49). So those lanes are
#: given an argument inside the range and their results made from it, bit by bit (selects
#: written as ``?:`` let GCC split the loop into two calls of the vector expf):
#:
#: * ``x < -104``: ``exp(x)`` rounds to +0 (it does below -103.97): ``exp(0)``, then 0;
#: * ``-104 <= x < -87`` (a subnormal result): ``exp(x / 2)`` squared, ``x / 2`` made exactly by
#:   decrementing the exponent; the square rounds once to the subnormal (within a unit of
#:   its last place of glibc's scalar ``expf``);
#: * ``x >= 88.72283935546875`` (the first float whose ``exp`` overflows): ``exp(0)``, then +inf.
#:
#: NaN and ``87.9 < x < 88.7228`` take the vector routine's own (slow, exact) path.
_C_EXPF_LINES: list[str] = [
    "#ifdef GH_SIMD_expf",
    "static inline float gh_expf(float x) {",
    "    unsigned int low = x < -87.0f;",
    "    unsigned int zero = -(unsigned int)(x < -104.0f);",
    "    unsigned int inf = -(unsigned int)(x >= 88.72283935546875f);",
    "    float e = expf(gh_float((gh_bits(x) - (low << 23)) & ~(zero | inf)));",
    "    float factor = gh_float((gh_bits(e) & -low) | (0x3f800000u & (low - 1u)));",
    "    return gh_float((gh_bits(e * factor) & ~(zero | inf)) | (0x7f800000u & inf));",
    "}",
    "#else",
    "static inline float gh_expf(float x) { return expf(x); }",
    "#endif",
]


class _Renderer:
    def __init__(self, dialect: Dialect, rename: Callable[[str], str] | None = None) -> None:
        self.d = dialect
        # Applied to every identifier as it is written; lookups (storage, scopes) keep the
        # IR's own names.
        self.ident: Callable[[str], str] = rename or _unchanged
        self.used_types: set[str] = set()
        self.helpers: set[str] = set()

    # -- prelude ----------------------------------------------------------------------------------
    def cvt_lines(self, kind: str, arch: int) -> list[str]:
        """CUDA: the float32 -> 16-bit conversion as one ``cvt.rn`` instruction (round to
        nearest even, as the software fallback that follows) on GPUs that have it (compute
        capability ``arch`` / 10 or later); nothing for the other dialects."""
        if self.d.name != "cuda":
            return []
        return [f"#if __CUDA_ARCH__ >= {arch}" if arch else "#ifdef __CUDA_ARCH__",
                f'  unsigned short h; asm("cvt.rn.{kind}.f32 %0, %1;" : "=h"(h) : "f"(x)); '
                "return h;",
                "#else"]

    def widen_lines(self) -> list[str]:
        """CUDA: half -> float32 as one exact ``cvt.f32.f16`` instruction; nothing for the
        other dialects. Written out instead (the bit arithmetic that follows, with branches for
        subnormals, inf and NaN), an fp16 ResNet-9 step's tensor-core epilogues, unrolled over
        128 cells, took NVRTC three times as long as their bf16 twins (1.2 s against 0.4 s)."""
        if self.d.name != "cuda":
            return []
        return ["#ifdef __CUDA_ARCH__",
                '  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;',
                "#else"]

    def cvt_end(self) -> list[str]:
        return ["#endif"] if self.d.name == "cuda" else []

    def prelude(self) -> str:
        d = self.d
        lines = [f"// generated by gingham for the {d.name} dialect"]
        if d.name == "c":
            lines += ["#include <math.h>", "#include <stdint.h>", "#include <string.h>"]
        if d.name == "opencl" and "float64" in self.used_types:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if d.name == "cuda":
            lines.append("#define INFINITY __int_as_float(0x7f800000)")
            lines.append("#define NAN __int_as_float(0x7fffffff)")
        p = d.helper_prefix
        f32 = d.types["float32"]
        u32 = d.types["uint32"]
        u16 = d.types["uint16"]
        bits_of = {"c": "gh_bits", "opencl": "as_uint", "cuda": "__float_as_uint"}[d.name]
        float_of = {"c": "gh_float", "opencl": "as_float", "cuda": "__uint_as_float"}[d.name]
        if d.name == "c":
            lines += [
                f"{p} {u32} gh_bits(float x) {{ {u32} u; memcpy(&u, &x, 4); return u; }}",
                f"{p} float gh_float({u32} u) {{ float x; memcpy(&x, &u, 4); return x; }}",
            ]
            for dtype in sorted(t for t in self.used_types if t in _VECTOR_TYPES):
                vector, lanes = d.types[dtype], int(dtype.split("x")[1])
                # The broadcast as an initialiser: ``x + (vector){}`` is a scalar add first
                # (0 + -0 is +0), which kept the FMA from taking x as an embedded broadcast.
                lines += [f"typedef float {vector} __attribute__((vector_size({4 * lanes})));",
                          f"{p} {vector} {_c_splat(dtype)}(float x) "
                          f"{{ return ({vector}){{{', '.join(['x'] * lanes)}}}; }}"]
        needs_half = any(t in self.used_types for t in _HALF_TYPES) or any(
            h.startswith("round_") for h in self.helpers)
        if needs_half:
            lines += [
                # The software conversions (the C and OpenCL dialects, and CUDA before sm_80)
                # compute every case and pick one, without a branch: written with early returns
                # they kept GCC and PoCL from vectorising the loops that call them (the story
                # net's fp16 step on PoCL took 2.8x as long, on `cpu` 1.4x; docs/measurements.md).
                # bfloat16: the top half of a float32, rounded to nearest even; NaN stays NaN.
                f"{p} {f32} gh_bf16_to_float({u16} h) {{ return {float_of}((({u32})h) << 16); }}",
                f"{p} {u16} gh_float_to_bf16({f32} x) {{",
                *self.cvt_lines("bf16", 800),
                f"  {u32} u = {bits_of}(x);",
                f"  {u32} rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;",
                f"  {u32} quiet_nan = (u >> 16) | 0x40u;",
                f"  return ({u16})((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);",
                *self.cvt_end(),
                "}",
                # IEEE half <-> float with round to nearest even, subnormals, inf and NaN.
                f"{p} {f32} gh_half_to_float({u16} h) {{",
                *self.widen_lines(),
                f"  {u32} sign = (({u32})(h & 0x8000u)) << 16;",
                f"  {u32} exponent = (h >> 10) & 0x1fu;",
                f"  {u32} mantissa = h & 0x3ffu;",
                f"  {u32} normal = sign | ((exponent + 112u) << 23) | (mantissa << 13);",
                f"  {u32} special = sign | 0x7f800000u | (mantissa << 13);",  # inf, NaN
                # A subnormal (or zero) is its mantissa in units of 2^-24, exact in float32.
                f"  {u32} subnormal = sign | {bits_of}(({f32})mantissa * 5.9604644775390625e-8f);",
                # Blended with a mask, not selected (here and below): GCC moved the float
                # operation into a branch of the select and then, as an operation that may
                # trap, would not vectorise the loop.
                f"  {u32} is_subnormal = 0u - ({u32})(exponent == 0u);",
                f"  {u32} other = exponent == 0x1fu ? special : normal;",
                f"  return {float_of}((subnormal & is_subnormal) | (other & ~is_subnormal));",
                *self.cvt_end(),
                "}",
                f"{p} {u16} gh_float_to_half({f32} x) {{",
                *self.cvt_lines("f16", 0),
                f"  {u32} u = {bits_of}(x);",
                f"  {u32} sign = (u >> 16) & 0x8000u;",
                f"  {u32} magnitude = u & 0x7fffffffu;",
                # Normal: rebias the exponent (127 -> 15) and round the 13 bits dropped to
                # nearest even; a carry out of the mantissa rounds up to the next binade or inf.
                f"  {u32} normal = (magnitude - 0x38000000u + 0xfffu + ((magnitude >> 13) & 1u))"
                " >> 13;",
                # Below 2^-14 (subnormal or zero): adding 0.5 leaves the value's multiple of
                # 2^-24 in the low mantissa bits, rounded to nearest even by the addition itself.
                f"  {u32} subnormal = {bits_of}({float_of}(magnitude) + 0.5f) - 0x3f000000u;",
                f"  {u32} overflow = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;",  # NaN, inf
                f"  {u32} is_subnormal = 0u - ({u32})(magnitude < 0x38800000u);",
                f"  {u32} other = magnitude >= 0x47800000u ? overflow : normal;",
                f"  return ({u16})(sign | (subnormal & is_subnormal) | (other & ~is_subnormal));",
                *self.cvt_end(),
                "}",
                f"{p} {f32} round_float16({f32} x) {{ return gh_half_to_float(gh_float_to_half(x)); }}",
                f"{p} {f32} round_bfloat16({f32} x) {{ return gh_bf16_to_float(gh_float_to_bf16(x)); }}",
                # A float that round_bfloat16 gave (its low 16 bits zero) as its bfloat16.
                f"{p} {u16} gh_bf16_of_rounded({f32} x) {{ return ({u16})({bits_of}(x) >> 16); }}",
            ]
        if "wgmma" in self.helpers:
            # A shared-memory matrix descriptor of sm_90a (128-byte swizzle): the start address,
            # the leading and stride byte offsets (each in 16-byte units) and the swizzle mode.
            u64 = d.types["uint64"]
            lines += [
                f"{p} {u64} gh_wgmma_desc(const void* p, {u32} lbo, {u32} sbo) {{",
                f"  {u32} a = ({u32})__cvta_generic_to_shared(p);",
                f"  return ({u64})((a & 0x3FFFFu) >> 4) | (({u64})(lbo >> 4) << 16)",
                f"       | (({u64})(sbo >> 4) << 32) | (({u64})1 << 62);",
                "}",
            ]
        if "amx" in self.helpers:
            lines += _AMX_LINES
        if "philox" in self.helpers:
            lines += [
                f"{p} {f32} philox_uniform({u32} key, {u32} high, {u32} position) {{",
                f"  {u32} c0 = position, c1 = high;",
                "  for (int r = 0; r < 10; r++) {",
                "    if (r) key += 0x9E3779B9u;",
                f"    {d.types['uint64']} product = ({d.types['uint64']})c0 * 0xD256D193u;",
                f"    {u32} hi = ({u32})(product >> 32), lo = ({u32})product;",
                "    c0 = hi ^ key ^ c1; c1 = lo;",
                "  }",
                f"  return ({f32})(c0 >> 8) * 5.9604644775390625e-8f;",
                "}",
            ]
        for dtype in sorted(t for t in self.used_types
                            if t not in _HALF_TYPES and t not in _VECTOR_TYPES):
            lines += self._minmax_helpers(dtype)
        if d.name == "c":
            lines += self._select_helpers()
            lines += self._declared_reductions() + self._vector_math_lines()
            if "gh_expf" in self.helpers:
                lines += _C_EXPF_LINES
        return "\n".join(lines) + "\n"

    def _minmax_helpers(self, dtype: str) -> list[str]:
        t = self.d.types[dtype]
        p = self.d.helper_prefix
        is_float = dtype.startswith("float")
        if is_float and self.d.name == "c":
            # A NaN on either side propagates. ``(a > b || a != a) ? a : b`` is the same
            # function, but where gcc leaves lanes scalar (the tail of a short lane loop) it
            # branches on the ``||``, which random data mispredicts: an NCHW 2x2 max pool
            # took 4.0 ms against 1.2 ms in this form (2 cores; the same loop summing, 0.9).
            # A row's max in an ``omp simd`` reduction takes 3-5% longer in this form
            # (2048 x 1024: 216-226 against 230-236 us, a C harness).
            lines = [f"{p} {t} gh_{fn}_{dtype}({t} a, {t} b) {{ {t} m = (a {op} b) ? a : b; "
                     f"return a != a ? a : m; }}" for fn, op in (("max", ">"), ("min", "<"))]
        else:
            nan = " || a != a" if is_float else ""  # a NaN on either side propagates
            lines = [
                f"{p} {t} gh_max_{dtype}({t} a, {t} b) {{ return (a > b{nan}) ? a : b; }}",
                f"{p} {t} gh_min_{dtype}({t} a, {t} b) {{ return (a < b{nan}) ? a : b; }}",
            ]
        if dtype == "bool":
            return lines
        if is_float:
            lines.append(
                f"{p} {t} gh_sign_{dtype}({t} x) {{ return x > 0 ? ({t})1 : x < 0 ? ({t})-1 : x; }}"
            )
        elif dtype.startswith("u"):
            lines.append(f"{p} {t} gh_sign_{dtype}({t} x) {{ return x > 0 ? 1 : 0; }}")
        else:
            lines.append(f"{p} {t} gh_sign_{dtype}({t} x) {{ return (x > 0) - (x < 0); }}")
        if dtype.startswith("u"):
            zero_safe = f"{p} {t} gh_idiv_{dtype}({t} a, {t} b) {{ return b == 0 ? 0 : a / b; }}"
            lines.append(zero_safe)
            lines.append(f"{p} {t} gh_imod_{dtype}({t} a, {t} b) {{ return b == 0 ? 0 : a % b; }}")
        elif not is_float:
            # MIN / -1 overflows: C leaves it undefined and x86's idiv traps (SIGFPE killed the
            # process); PyTorch wraps it to MIN, negated through the unsigned type.
            u = self.d.types["u" + dtype]
            lines.append(f"{p} {t} gh_idiv_{dtype}({t} a, {t} b) {{ return b == 0 ? 0 : "
                         f"b == -1 ? ({t})(({u})0 - ({u})a) : a / b; }}")
            lines.append(f"{p} {t} gh_imod_{dtype}({t} a, {t} b) {{ "
                         "return (b == 0 || b == -1) ? 0 : a % b; }")
        return lines

    def _select_helpers(self) -> list[str]:
        """C: ``gh_select_<type>(c, a, b)``, a select whose operands are evaluated before it
        (see :meth:`select`), for each type a kernel selects loaded values of."""
        lines = []
        for helper in sorted(h for h in self.helpers if h.startswith("select:")):
            dtype = helper.split(":")[1]
            t = self.d.types[dtype]
            lines.append(f"{self.d.helper_prefix} {t} gh_select_{dtype}(int c, {t} a, {t} b) "
                         "{ return c ? a : b; }")
        return lines

    def _declared_reductions(self) -> list[str]:
        """C: an OpenMP reduction for each ``gh_max_<type>`` / ``gh_min_<type>`` that a lane
        reduction uses (:meth:`reduction_clauses`): lanes combined by the same NaN-propagating
        helpers as the serial loop, from the aggregation's identity. OpenMP's own ``max``
        would drop a NaN that one lane met (``NaN > x`` is false)."""
        lines = []
        for helper in sorted(h for h in self.helpers if h.startswith("omp_reduction:")):
            _, fn, dtype = helper.split(":")  # "omp_reduction:max:float32"
            name = f"gh_{fn}_{dtype}"
            if dtype.startswith("float"):
                identity = "-INFINITY" if fn == "max" else "INFINITY"
            else:
                info = np.iinfo(np.dtype(dtype))
                identity = self.literal(info.min if fn == "max" else info.max, dtype)
            lines.append(f"#pragma omp declare reduction({name} : {self.d.types[dtype]} : "
                         f"omp_out = {name}(omp_out, omp_in)) initializer(omp_priv = {identity})")
        return lines

    def reduction_clauses(self, reduction: str | None) -> str:
        """`` reduction(op:vars)`` for each clause of a ``simd`` loop's ``reduction``
        (``kernel_ir.For``); a clause of a prelude helper declares its reduction there."""
        if not reduction:
            return ""
        text = ""
        for clause in reduction.split():
            op, names = clause.split(":", 1)
            if op.startswith("gh_"):  # gh_max_float32: the helper of that name, declared
                _, fn, dtype = op.split("_", 2)
                self.helpers.add(f"omp_reduction:{fn}:{dtype}")
                self.used_types.add(dtype)
            text += f" reduction({op}:{self.ident(names)})"
        return text

    # -- kernels ----------------------------------------------------------------------------------
    def kernel(self, kernel: k.Kernel) -> str:
        d = self.d
        self.helpers |= set(kernel.uses)
        params = []
        for param in kernel.params:
            self.used_types.add(param.dtype)
            const = "" if param.output else "const "
            qualifier = f"{d.global_pointer} " if d.global_pointer else ""
            name = self.ident(param.name)
            params.append(f"{qualifier}{const}{d.types[param.dtype]}* {d.restrict} {name}")
        self.storage = {p.name: p.dtype for p in kernel.params}
        self.outputs = {p.name for p in kernel.params if p.output}
        self.local_scopes: dict[str, str] = {}  # LocalArray name -> scope, for CopyLocal
        # Scalars in scope that hold a value already rounded to bfloat16 (declared as
        # round_bfloat16(...)): storing one takes its top 16 bits instead of rounding it again.
        self.rounded: set[str] = set()
        bounds = ""
        launch = kernel.launch
        if d.name == "cuda" and launch.min_blocks and launch.local_size:
            # Registers capped so that min_blocks blocks of this size fit a multiprocessor.
            bounds = f"__launch_bounds__({math.prod(launch.local_size)}, {launch.min_blocks}) "
        header = f"{d.kernel_prefix} {bounds}{self.ident(kernel.name)}({', '.join(params)})"
        comment = f"// {self.ident(kernel.schedule)}\n" if kernel.schedule else ""
        body = self.stmt(kernel.body, 1)
        return f"{comment}{header} {{\n{body}}}\n"

    def stmt(self, s: k.Stmt, depth: int) -> str:
        pad = "    " * depth
        d = self.d
        if isinstance(s, k.Block):
            if s.scoped:
                inner = self.scope(k.Block(s.stmts), depth + 1)
                return f"{pad}{{\n{inner}{pad}}}\n"
            return "".join(self.stmt(x, depth) for x in s.stmts)
        if isinstance(s, k.Comment):
            return f"{pad}// {self.ident(s.text)}\n"
        if isinstance(s, k.Declare):
            self.used_types.add(s.dtype)
            init = f" = {self.expr(s.init)}" if s.init is not None else ""
            self._note_rounded(s.name, s.init)
            return f"{pad}{self.ctype(s.dtype)} {self.ident(s.name)}{init};\n"
        if isinstance(s, k.Assign):
            self._note_rounded(s.name, s.value)
            return f"{pad}{self.ident(s.name)} = {self.expr(s.value)};\n"
        if isinstance(s, k.Store):
            storage = self.storage[s.buffer]
            if storage in _HALF_TYPES:
                value = self.half_bits(storage, s.value)
            elif storage == "bool":
                value = f"({self.expr(s.value)}) != 0"
            else:
                value = self.expr(s.value)
            return f"{pad}{self.ident(s.buffer)}[{self.expr(s.index)}] = {value};\n"
        if isinstance(s, k.StoreLocal):
            return f"{pad}{self.local_element(s.array, s.index)} = {self.expr(s.value)};\n"
        if isinstance(s, k.LocalArray):
            self.used_types.add(s.dtype)
            self.local_scopes[s.name] = s.scope
            dims = "".join(f"[{n}]" for n in s.shape)
            qualifier = f"{d.shared_qualifier} " if s.scope == "shared" else ""
            align = f" __attribute__((aligned({s.align})))" if s.align else ""
            t = self.ctype(s.dtype)
            name = self.ident(s.name)
            if s.scope == "scalars":  # a line of names per last index's run
                rows = [", ".join(self.local_element(s.name, tuple(k.Const(i, "int32")
                                                                   for i in (*head, last)))
                                  for last in range(s.shape[-1]))
                        for head in itertools.product(*map(range, s.shape[:-1]))]
                return f"{pad}{t} " + f",\n{pad}    ".join(rows) + ";\n"
            if s.view is not None:
                if d.name != "c" or len(s.shape) != 1:
                    raise ValueError(f"a view onto a buffer ({s.name}) exists only as a 1-D "
                                     f"array in the C dialect, not in {d.name}")
                buffer, offset = s.view
                const = "" if buffer in self.outputs else "const "
                return (f"{pad}{const}{t}* {d.restrict} {name} = {self.ident(buffer)} + "
                        f"{self.expr(offset)};\n")
            if s.scope == "dynamic":
                if d.name != "cuda":
                    raise ValueError(f"dynamic shared memory ({s.name}) exists only in the CUDA "
                                     f"dialect, not in {d.name}")
                return f"{pad}extern __shared__ __align__({s.align or 16}) {t} {name}[];\n"
            if s.restrict and d.name in ("c", "opencl") and len(s.shape) == 1:
                return (f"{pad}{t} {name}_mem{dims}{align};\n"
                        f"{pad}{t}* {d.restrict} {name} = {name}_mem;\n")
            return f"{pad}{qualifier}{t} {name}{dims}{align};\n"
        if isinstance(s, k.CopyLocal):
            return pad + self.copy_local(s) + "\n"
        if isinstance(s, k.WarpOp):
            return pad + self.warp_op(s) + "\n"
        if isinstance(s, k.MatrixOp):
            return pad + self.matrix_op(s) + "\n"
        if isinstance(s, k.Barrier):
            return f"{pad}{d.global_barrier if s.global_memory else d.barrier}\n"
        if isinstance(s, k.If):
            condition = _without_outer_parentheses(self.expr(s.cond))
            text = f"{pad}if ({condition}) {{\n{self.scope(s.then, depth + 1)}{pad}}}"
            if s.otherwise is not None:
                text += f" else {{\n{self.scope(s.otherwise, depth + 1)}{pad}}}"
            return text + "\n"
        if isinstance(s, k.For):
            return self.loop(s, depth)
        raise AssertionError(s)

    def scope(self, s: k.Stmt, depth: int) -> str:
        """``s`` as the body of a C block: what it declares goes out of scope after it."""
        outer = set(self.rounded)
        try:
            return self.stmt(s, depth)
        finally:
            self.rounded = outer

    def _note_rounded(self, name: str, value: k.Expr | None) -> None:
        if isinstance(value, k.Call) and value.fn == "round_bfloat16":
            self.rounded.add(name)
        else:
            self.rounded.discard(name)

    def local_element(self, array: str, index: tuple[k.Expr, ...]) -> str:
        """Element ``index`` of a local array: ``a[i][j]``, or for a ``scalars`` array the
        variable ``a_2_5`` (see ``kernel_ir.LocalArray``)."""
        if self.local_scopes.get(array) != "scalars":
            return self.ident(array) + "".join(f"[{self.expr(i)}]" for i in index)
        if not all(isinstance(i, k.Const) for i in index):
            raise ValueError(f"{array} is a set of scalar variables: its elements are named by "
                             f"constant indices, not [{', '.join(self.expr(i) for i in index)}]")
        return self.ident(array) + "".join(f"_{int(i.value)}" for i in index)

    def copy_local(self, s: k.CopyLocal) -> str:
        dst = f"&{self.ident(s.dst)}" + "".join(f"[{self.expr(i)}]" for i in s.dst_index)
        src = f"&{self.ident(s.src)}" + "".join(f"[{self.expr(i)}]" for i in s.src_index)
        scalar = self.ctype(s.dtype)
        if self.d.name == "c":
            return f"memcpy({dst}, {src}, {s.width} * sizeof({scalar}));"
        if not s.aligned:
            if self.d.name != "opencl" or s.width not in k.UNALIGNED_COPY_WIDTHS:
                raise ValueError(f"an unaligned copy of {s.width} elements ({s.src} -> {s.dst}) "
                                 f"has no vector form in the {self.d.name} dialect")
            return f"vstore{s.width}(vload{s.width}(0, {src}), 0, {dst});"
        # CUDA names its vector types by the short names (ushort4, not unsigned short4).
        vector = f"{_VECTOR_SCALARS.get(s.dtype, scalar)}{s.width}"

        def pointer(name: str) -> str:
            if name in self.storage:  # a global buffer parameter
                # A half-type buffer moves as vectors of its bits (uint16).
                assert self.storage[name] == s.dtype or (
                    self.storage[name] in _HALF_TYPES and s.dtype == "uint16"), (name, s.dtype)
                qualifier = f"{self.d.global_pointer} " if self.d.global_pointer else ""
                const = "const " if name == s.src else ""
                return f"{qualifier}{const}{vector}*"
            shared = self.local_scopes.get(name) == "shared" and self.d.name == "opencl"
            return f"{self.d.shared_qualifier} {vector}*" if shared else f"{vector}*"

        return f"*(({pointer(s.dst)})({dst})) = *(({pointer(s.src)})({src}));"

    def matrix_op(self, s: k.MatrixOp) -> str:
        """An AMX tile instruction (the C dialect only; see ``kernel_ir.MatrixOp``)."""
        if self.d.name != "c":
            raise ValueError(f"the AMX {s.op} instruction (MatrixOp) exists only in the C "
                             f"dialect, not in {self.d.name}")
        self.helpers.add("amx")
        if s.op == "begin":
            return "gh_amx_begin();"
        if s.op == "end":
            return "_tile_release();"
        if s.op == "dot_bf16":
            c, a, b = s.tiles
            return f"_tile_dpbf16ps({c}, {a}, {b});"
        if s.op in ("load", "store"):
            assert s.index is not None and s.stride > 0, s
            address = f"&{self.ident(s.array)}[{self.expr(s.index)}]"
            name = "_tile_loadd" if s.op == "load" else "_tile_stored"
            return f"{name}({s.tiles[0]}, {address}, {s.stride});"
        if s.op in _AMX_REARRANGE:
            assert s.index is not None and s.source_index is not None and s.stride > 0, s
            assert (s.source_stride > 0) == (s.op == "pairs_from_columns"), s
            args = [f"&{self.ident(s.array)}[{self.expr(s.index)}]", str(s.stride),
                    f"&{self.ident(s.source)}[{self.expr(s.source_index)}]"]
            if s.source_stride:
                args.append(str(s.source_stride))
            return f"{_AMX_REARRANGE[s.op]}({', '.join(args)});"
        raise ValueError(f"unknown AMX instruction {s.op!r}")

    def warp_op(self, s: k.WarpOp) -> str:
        """Inline PTX for a warp-level instruction (CUDA only; see ``kernel_ir.WarpOp``)."""
        if self.d.name != "cuda":
            raise ValueError(f"the {s.op} instruction (WarpOp) exists only in the CUDA dialect, "
                             f"not in {self.d.name}: tensor-core schedules are for CUDA devices")

        def shared_address() -> str:
            assert s.shared is not None
            array, index = s.shared
            return (f'"r"((unsigned)__cvta_generic_to_shared(&{self.ident(array)}'
                    f'[{self.expr(index)}]))')

        regs = [self.expr(r) for r in s.regs]
        if s.op == "ldmatrix":
            n = len(regs)
            assert n in (1, 2, 4), n
            trans = ".trans" if s.variant == "trans" else ""
            slots = ", ".join(f"%{i}" for i in range(n))
            outs = ", ".join(f'"=r"({r})' for r in regs)
            return (f'asm volatile("ldmatrix.sync.aligned.m8n8.x{n}{trans}.shared.b16 '
                    f'{{{slots}}}, [%{n}];" : {outs} : {shared_address()});')
        if s.op == "mma":
            kind = {"bfloat16": "bf16", "float16": "f16"}[s.variant]
            assert len(regs) == 4 and len(s.args) == 6
            accs = ", ".join(f'"+f"({r})' for r in regs)
            ins = ", ".join(f'"r"({self.expr(a)})' for a in s.args)
            # Not volatile: a product of registers, which the compiler may interleave with the
            # next fragments' loads (ldmatrix and the copies stay volatile: they touch memory).
            return (f'asm("mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 '
                    '{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" '
                    f': {accs} : {ins});')
        if s.op == "cp_async":
            assert s.src is not None and len(s.args) == 1
            buffer, index = s.src
            cache = "ca" if s.variant == "ca" else "cg"
            return (f'asm volatile("cp.async.{cache}.shared.global [%0], [%1], 16, %2;" :: '
                    f'{shared_address()}, "l"(&{self.ident(buffer)}[{self.expr(index)}]), '
                    f'"r"({self.expr(s.args[0])} ? 16 : 0));')
        if s.op == "wgmma":
            return self.wgmma(s, regs)
        if s.op == "wgmma_fence":
            return 'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");'
        if s.op == "wgmma_commit":
            return 'asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");'
        if s.op == "wgmma_hold":
            outs = ", ".join(f'"+f"({r})' for r in regs)
            return f'asm volatile("" : {outs} :: "memory");'
        if s.op == "wgmma_wait":
            # The accumulators pass through the wait, so that no read of them moves above it.
            outs = ", ".join(f'"+f"({r})' for r in regs)
            return (f'asm volatile("wgmma.wait_group.sync.aligned {int(s.variant)};" : {outs} '
                    ':: "memory");')
        if s.op == "fence_async_shared":
            return 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");'
        if s.op == "cp_async_commit":
            return 'asm volatile("cp.async.commit_group;" ::: "memory");'
        if s.op == "cp_async_wait":
            return f'asm volatile("cp.async.wait_group {int(s.variant)};" ::: "memory");'
        raise AssertionError(s.op)

    def wgmma(self, s: k.WarpOp, regs: list[str]) -> str:
        """One ``wgmma.mma_async`` m64nNk16 product (see ``kernel_ir.WarpOp``): the shared-memory
        descriptors of A and B are built from their element addresses by ``gh_wgmma_desc``."""
        assert s.shared is not None and len(s.args) == 2
        n, trans_a, trans_b, lbo_a, sbo_a, lbo_b, sbo_b = s.layout
        assert len(regs) == n // 2, (len(regs), n)
        kind = {"bfloat16": "bf16", "float16": "f16"}[s.variant]
        self.helpers.add("wgmma")
        array = self.ident(s.shared[0])
        count = len(regs)
        slots = ", ".join(f"%{i}" for i in range(count))
        accs = ", ".join(f'"+f"({r})' for r in regs)
        desc_a = f"gh_wgmma_desc(&{array}[{self.expr(s.args[0])}], {lbo_a}, {sbo_a})"
        desc_b = f"gh_wgmma_desc(&{array}[{self.expr(s.args[1])}], {lbo_b}, {sbo_b})"
        # scale-d is a predicate (true: D += A B); PTX has no predicate immediates.
        return (f'asm volatile("{{ .reg .pred p; setp.ne.b32 p, %{count + 2}, 0; '
                f'wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} '
                f'{{{slots}}}, %{count}, %{count + 1}, p, 1, 1, {trans_a}, {trans_b}; }}" '
                f': {accs} : "l"({desc_a}), "l"({desc_b}), "n"(1));')

    def loop(self, s: k.For, depth: int) -> str:
        pad = "    " * depth
        d = self.d
        itype = self.ctype("int64") if _bound_above(s.stop, 2**31 - 1) else self.ctype("int32")
        var = self.ident(s.var)
        start, stop = self._operand(s.start), self._operand(s.stop)
        body = self.scope(s.body, depth + 1)
        if s.kind in ("thread", "group", "local", "parallel") and d.name != "c":
            source = {"thread": d.thread_index, "parallel": d.thread_index,
                      "group": d.group_index,
                      "local": d.local_index}[s.kind]
            index = source.format(axis=s.axis, xyz=_XYZ[s.axis])
            guard_needed = s.kind in ("thread", "parallel")
            text = f"{pad}{itype} {var} = ({itype})({index}) + {start};\n" if start != "0" else \
                f"{pad}{itype} {var} = ({itype}){index};\n"
            if guard_needed:
                return text + f"{pad}if ({var} < {stop}) {{\n{body}{pad}}}\n"
            return text + f"{pad}{{\n{body}{pad}}}\n"
        pragma = ""
        if s.kind == "thread" and d.name == "c":
            # Dynamic chunks of about 1/64 of the loop: a core that another process shares
            # takes fewer of them instead of holding every kernel up (static halves took one
            # or two scheduler time slices per kernel on a busy 2-core machine: 7.4 ms for a
            # batch-norm statistic that one thread computes in 1.1 ms).
            stop = s.stop.value if isinstance(s.stop, k.Const) else s.stop
            chunk = max(1, -(-stop // THREAD_CHUNKS)) if isinstance(stop, int) else 1
            pragma = f"{pad}#pragma omp parallel for schedule(dynamic, {chunk})\n"
        elif s.kind == "parallel" and d.name == "c":
            # Coarse iterations (a tile each): dynamic, so a core that other work slows down
            # takes fewer of them instead of holding the whole loop up.
            pragma = f"{pad}#pragma omp parallel for schedule(dynamic)\n"
        elif s.kind == "simd" and d.name == "c":
            collapse = f" collapse({s.collapse})" if s.collapse > 1 else ""
            pragma = f"{pad}#pragma omp simd{self.reduction_clauses(s.reduction)}{collapse}\n"
        elif s.kind == "unroll":
            # ``s.unroll`` iterations at a time where set, else the whole loop (GCC: up to 16).
            count = f" {s.unroll}" if s.unroll else ""
            pragma = (f"{pad}#pragma GCC unroll {s.unroll or 16}\n" if d.name == "c"
                      else f"{pad}#pragma unroll{count}\n")
            if d.name == "opencl" and not isinstance(s.stop, (int, k.Const)):
                # A trip count known only at run time (the CPU GEMM's K block, its register
                # block as vectors): "unroll" asks clang for a full unroll it cannot do. PoCL,
                # GEMM 1024: 2 copies 13.1 ms a run, 4 copies 12.4 ms, 8 copies 21.6 ms.
                pragma = f"{pad}#pragma unroll 4\n"
        step = f"{var}++" if s.step == 1 else f"{var} += {s.step}"
        return (f"{pragma}{pad}for ({itype} {var} = {start}; {var} < {stop}; {step}) {{\n"
                f"{body}{pad}}}\n")

    def _operand(self, value) -> str:
        return str(value) if isinstance(value, int) else self.expr(value)

    def ctype(self, dtype: str) -> str:
        if dtype in _HALF_TYPES:
            return self.d.types["float32"]
        return self.d.types[dtype]

    # -- expressions ---------------------------------------------------------------------------------
    def expr(self, e: k.Expr) -> str:
        if isinstance(e, k.Var):
            return self.ident(e.name)
        if isinstance(e, k.Const):
            return self.literal(e.value, e.dtype)
        if isinstance(e, k.Load):
            storage = self.storage[e.buffer]
            text = f"{self.ident(e.buffer)}[{self.expr(e.index)}]"
            if storage in _HALF_TYPES and e.dtype == "uint16":
                return text  # the element's bits
            if storage == "float16":
                return f"gh_half_to_float({text})"
            if storage == "bfloat16":
                return f"gh_bf16_to_float({text})"
            return text
        if isinstance(e, k.LoadLocal):
            return self.local_element(e.array, e.index)
        if isinstance(e, k.Cast):
            self.used_types.add(e.dtype)
            inner = e.a
            if e.dtype == "bool":
                return f"({self.expr(inner)} != 0)"
            if self.d.name == "c" and e.dtype in _VECTOR_TYPES:  # a scalar to every lane
                return f"{_c_splat(e.dtype)}({self.expr(inner)})"
            return f"(({self.ctype(e.dtype)})({self.expr(inner)}))"
        if isinstance(e, k.UnOp):
            return f"({e.op}{self.expr(e.a)})"
        if isinstance(e, k.BinOp):
            return self.binop(e)
        if isinstance(e, k.Select):
            return self.select(e)
        if isinstance(e, k.Call):
            return self.call(e)
        raise AssertionError(e)

    def select(self, e: k.Select) -> str:
        cond, if_true, if_false = self.expr(e.cond), self.expr(e.if_true), self.expr(e.if_false)
        if (self.d.name == "c" and e.dtype not in _VECTOR_TYPES
                and k.global_accesses((e.if_true, e.if_false))):
            # A load in a branch of ``c ? X[i] : 0`` is a conditional load in C: GCC 12's
            # loop vectoriser makes it a masked load after if-conversion, and got a batch
            # norm's ReLU gradient wrong that way (1e27 where the sum was 1e-3; -O3
            # -march=native, correct at -O2 or with -fno-tree-loop-if-convert). The
            # arguments of a function are evaluated before it is called: the load is
            # unconditional and the select a blend. Every index gingham renders is in bounds
            # (guards clamp the index itself), so an unconditional load is always safe.
            dtype = "float32" if e.dtype in _HALF_TYPES else e.dtype
            self.helpers.add(f"select:{dtype}")
            return f"gh_select_{dtype}({cond}, {if_true}, {if_false})"
        return f"({cond} ? {if_true} : {if_false})"

    def binop(self, e: k.BinOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        dtype = e.dtype if e.dtype not in _HALF_TYPES else "float32"
        if e.op in ("idiv", "imod"):
            self.used_types.add(dtype)
            return f"gh_{e.op}_{dtype}({a}, {b})"
        if e.op == "fmod":
            return f"{self._math('fmod', dtype)}({a}, {b})"
        return f"({a} {e.op} {b})"

    def call(self, e: k.Call) -> str:
        args = [self.expr(a) for a in e.args]
        dtype = e.dtype if e.dtype not in _HALF_TYPES else "float32"
        fn = e.fn
        self.used_types.add(dtype)
        is_float = dtype.startswith("float")
        t = self.ctype(dtype)
        if fn in ("max", "min"):
            return f"gh_{fn}_{dtype}({args[0]}, {args[1]})"
        if fn == "sign":
            return f"gh_sign_{dtype}({args[0]})"
        if fn == "relu":
            return f"({args[0]} < ({t})0 ? ({t})0 : {args[0]})"
        if fn == "abs":
            if is_float:
                return f"{self._math('fabs', dtype)}({args[0]})"
            if dtype.startswith("u") or dtype == "bool":
                return args[0]
            return f"({args[0]} < 0 ? -{args[0]} : {args[0]})"
        if fn in ("floor", "ceil", "round") and not is_float:
            return args[0]
        if fn == "round":
            return f"{self._math('rint', dtype)}({args[0]})"
        if fn == "sigmoid":
            one = self.literal(1.0, dtype)
            return f"({one} / ({one} + {self._math('exp', dtype)}(-({args[0]}))))"
        if fn == "rsqrt":
            if self.d.name == "opencl":
                return f"rsqrt({args[0]})"
            if self.d.name == "cuda":
                return f"{'rsqrtf' if dtype == 'float32' else 'rsqrt'}({args[0]})"
            one = self.literal(1.0, dtype)
            return f"({one} / {self._math('sqrt', dtype)}({args[0]}))"
        if fn == "warp_shuffle_xor":  # the value of the lane whose index differs by a bit
            if self.d.name != "cuda":
                raise ValueError(f"warp shuffles exist only in the CUDA dialect, not in "
                                 f"{self.d.name}: a kernel lowered for CUDA rendered for "
                                 "another device")
            return f"__shfl_xor_sync(0xffffffffu, {args[0]}, {args[1]})"
        if fn == "philox_uniform":
            return f"philox_uniform({', '.join(args)})"
        if fn.startswith("round_"):
            return f"{fn}({args[0]})"
        if fn in ("from_bits_bfloat16", "from_bits_float16"):  # a half type's bits -> float
            return f"gh_{'bf16' if fn.endswith('bfloat16') else 'half'}_to_float({args[0]})"
        if fn in ("bits_bfloat16", "bits_float16"):  # float -> a half type's bits, rounded once
            return self.half_bits(fn[len("bits_"):], e.args[0])
        name = {"asin": "asin", "acos": "acos", "atan": "atan"}.get(fn, fn)
        return f"{self._math(name, dtype)}({', '.join(args)})"

    def half_bits(self, storage: str, value: k.Expr) -> str:
        """The bits of ``value`` rounded to ``storage`` (a half type), as a Store of it does:
        a value rounded already (``round_bfloat16(x)``) is converted from ``x``, once."""
        if isinstance(value, k.Call) and value.fn == f"round_{storage}":
            value = value.args[0]
        elif storage == "bfloat16" and isinstance(value, k.Var) and value.name in self.rounded:
            return f"gh_bf16_of_rounded({self.expr(value)})"  # exact: its top 16 bits
        convert = "gh_float_to_half" if storage == "float16" else "gh_float_to_bf16"
        return f"{convert}({self.expr(value)})"

    def _math(self, name: str, dtype: str) -> str:
        function = name if self.d.overloaded_math or dtype != "float32" else name + "f"
        if self.d.name == "c" and name in C_VECTOR_MATH:
            self.helpers.add(f"libm:{function}")
        if self.d.name == "c" and function == "expf":
            self.helpers.add("gh_expf")
            return "gh_expf"
        return function

    def _vector_math_lines(self) -> list[str]:
        """C: each libm function the kernels call that has vector variants, declared as
        such (``omp declare simd``) where the ``cpu`` device defines ``GH_SIMD_<function>``:
        its toolchain links them (glibc's libmvec, :mod:`gingham.devices.cpu_vector_math`).
        GCC then vectorises a loop that calls it, as it cannot a call to the scalar one."""
        lines = []
        for helper in sorted(h for h in self.helpers if h.startswith("libm:")):
            function = helper.split(":", 1)[1]
            lines += [f"#ifdef GH_SIMD_{function}", *vector_math_declaration(function), "#endif"]
        return lines

    def literal(self, value, dtype: str) -> str:
        if dtype in _HALF_TYPES:
            dtype = "float32"
        if dtype == "bool":
            return "1" if value else "0"
        if dtype.startswith("float"):
            value = float(value)
            if math.isinf(value):
                text = "INFINITY" if value > 0 else "(-INFINITY)"
                return text if dtype == "float32" else f"((double){text})"
            if math.isnan(value):
                return "NAN"
            text = repr(value)
            if "e" not in text and "." not in text:
                text += ".0"
            return text + ("f" if dtype == "float32" else "")
        value = int(value)
        if dtype == "int64":
            if value == -(2**63):
                return f"(({self.d.types['int64']})(-9223372036854775807LL - 1))"
            return f"(({self.d.types['int64']}){value}LL)"
        if dtype == "uint64":
            return f"(({self.d.types['uint64']}){value}ULL)"
        if dtype == "uint32":
            return f"{value}u"
        if dtype == "int32" and value == -(2**31):
            return "(-2147483647 - 1)"
        return str(value) if value >= 0 else f"({value})"


def _bound_above(value, limit: int) -> bool:
    return isinstance(value, int) and value > limit
