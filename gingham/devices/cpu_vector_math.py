"""Which libm functions the ``cpu`` device's toolchain links vector variants of.

GCC vectorises a loop that calls ``expf`` only if it knows a vector variant of it: a
declaration under ``#pragma omp declare simd`` (glibc's ``math.h`` makes them only under
``-ffast-math``, which gingham does not use). glibc's libmvec has them for the functions of
:data:`gingham.codegen.c_family.C_VECTOR_MATH` (from 2.22 exp, log, sin, cos, pow; from 2.35 the
rest), with errors of a few units in the last place where libm's scalar functions have one or
two. The C prelude declares each function a kernel calls as such under ``#ifdef
GH_SIMD_<function>``; this module finds out, once per toolchain (cached on disk), which of
them link, and gives the defines and the library::

    >>> functions = available(compiles, ("/usr/bin/gcc", version, cflags))  # ("cos", "cosf", ...)
    >>> defines(functions)
    ('-DGH_SIMD_cos', '-DGH_SIMD_cosf', '-DGH_SIMD_exp', ...)

A softmax's sum of exponentials (512 rows of 1024, 2 AVX-512 cores): 0.70 ms with scalar
``expf``, 0.10 ms with libmvec's 16-lane one. ``config.vector_math`` (``GINGHAM_VECTOR_MATH=0``)
keeps the scalar functions.
"""

from __future__ import annotations

from typing import Callable

from gingham.cache import DiskCache
from gingham.codegen.c_family import (C_VECTOR_MATH, vector_math_declaration,
                                     vector_math_signature)

#: The library holding the vector variants, linked after the kernel's objects.
LIBRARIES: tuple[str, ...] = ("-lmvec",)


def candidates() -> list[str]:
    """Every function name a kernel may call with a vector variant: double and float."""
    return sorted([name for name in C_VECTOR_MATH] + [name + "f" for name in C_VECTOR_MATH])


def probe_source(functions: list[str]) -> str:
    """C that declares ``functions`` with vector variants and calls each in a vectorised
    loop: it links only where every variant it calls exists."""
    lines = ["#include <math.h>"]
    body = []
    for index, function in enumerate(functions):
        t, arity = vector_math_signature(function)
        lines += vector_math_declaration(function)
        args = ", ".join(["x[i]"] * arity)
        body += [f"void gh_probe_{index}(const {t}* restrict x, {t}* restrict y, int n) {{",
                 "    #pragma omp simd", f"    for (int i = 0; i < n; i++) y[i] = {function}({args});",
                 "}"]
    return "\n".join(lines + body) + "\n"


Compile = Callable[[tuple[str, ...], str, tuple[str, ...]], bool]


def available(compiles: Compile, identity: tuple) -> tuple[str, ...]:
    """The functions whose vector variants link: ``compiles(cflags_extra, source, libraries)``
    builds a shared object and says whether it linked with every symbol resolved. All are
    tried at once, then (where that fails: an older glibc) one by one; the answer is cached
    on disk under ``identity`` (the compiler, its flags and the machine)."""
    cache = DiskCache("cpu")
    key = cache.key("vector-math-probe", probe_source(candidates()), *identity)
    cached = cache.get(key)
    if cached is not None:
        return tuple(name for name in cached.decode().split(",") if name)
    every = candidates()
    if not compiles((), probe_source([]), LIBRARIES):
        found = []  # no such library (not glibc, or glibc before 2.22)
    elif compiles(("-Wl,-z,defs",), probe_source(every), LIBRARIES):
        found = every
    else:
        found = [name for name in every
                 if compiles(("-Wl,-z,defs",), probe_source([name]), LIBRARIES)]
    cache.put(key, ",".join(found).encode())
    return tuple(found)


def defines(functions: tuple[str, ...]) -> tuple[str, ...]:
    """The compiler flags that let the C prelude declare ``functions``' vector variants."""
    return tuple(f"-DGH_SIMD_{name}" for name in functions)
