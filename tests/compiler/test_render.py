"""Rendering details of the C-family dialects (gingham/codegen/c_family.py)."""

from __future__ import annotations

import re

import pytest

from gingham.compiler import kernel_ir as k  # before codegen: the packages import each other
from gingham.codegen.c_family import DIALECTS, _without_outer_parentheses, render, render_kernel


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_conditions_have_no_doubled_parentheses(dialect):
    """``if ((a == b))`` made clang (PoCL, NVIDIA's OpenCL) print "equality comparison with
    extraneous parentheses" and "N warnings generated." for every program with a reduction."""
    body = k.For("i", 0, 64, k.If(
        k.BinOp("==", k.BinOp("%", k.Var("i", "int32"), k.Const(8, "int32"), "int32"),
                k.Const(0, "int32"), "bool"),
        k.Store("out", k.Var("i", "int32"), k.Const(1.0, "float32"))), kind="thread")
    kernel = k.Kernel("k", (k.Param("out", "float32", output=True),), body,
                      k.Launch((64,), None), "test")
    source = render(kernel, DIALECTS[dialect])
    assert "if ((i % 8) == 0) {" in source, source
    assert "if ((" not in source.replace("if ((i % 8)", "")


@pytest.mark.parametrize("text, expected", [
    ("(a == b)", "a == b"), ("(a) && (b)", "(a) && (b)"), ("x", "x"),
    ("((a < 0) ? 1 : 2)", "(a < 0) ? 1 : 2"), ("(a)", "a")])
def test_without_outer_parentheses(text, expected):
    assert _without_outer_parentheses(text) == expected


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_scalar_arrays_are_one_variable_per_element(dialect):
    """A ``scalars`` local array (the wgmma accumulators) is a set of variables named by
    their constant indices: ``acc[1][2]`` is ``acc_1_2``."""
    i32, f32 = "int32", "float32"
    body = k.block(
        k.LocalArray("acc", f32, (2, 3), "scalars"),
        *(k.StoreLocal("acc", (k.Const(a, i32), k.Const(b, i32)), k.Const(float(a + b), f32))
          for a in range(2) for b in range(3)),
        k.Store("out", k.Const(0, i32), k.LoadLocal("acc", (k.Const(1, i32), k.Const(2, i32)), f32)))
    kernel = k.Kernel("k", (k.Param("out", f32, output=True),), body, k.Launch((1,), None), "test")
    source = render(kernel, DIALECTS[dialect])
    assert "float acc_0_0, acc_0_1, acc_0_2,\n" in source and " acc_1_0, acc_1_1, acc_1_2;" in source
    assert "acc_1_2 = 3.0f;" in source and "out[0] = acc_1_2;" in source
    assert "acc[" not in source


def test_a_scalar_array_refuses_a_computed_index():
    i32, f32 = "int32", "float32"
    body = k.block(
        k.LocalArray("acc", f32, (4,), "scalars"),
        k.For("i", 0, 4, k.StoreLocal("acc", (k.Var("i", i32),), k.Const(0.0, f32)),
              kind="unroll"))
    kernel = k.Kernel("k", (k.Param("out", f32, output=True),), body, k.Launch((1,), None), "test")
    with pytest.raises(ValueError, match=r"acc is a set of scalar variables.*constant indices, "
                                         r"not \[i\]"):
        render(kernel, DIALECTS["cuda"])


def _unaligned_copy(width: int) -> k.Kernel:
    """A kernel copying ``width`` floats of ``src`` from element 3 into a register array."""
    i32, f32 = "int32", "float32"
    body = k.block(
        k.LocalArray("row", f32, (16,), "register"),
        k.CopyLocal("row", (k.Const(0, i32),), "src", (k.Const(3, i32),), width, f32,
                    aligned=False),
        k.Store("out", k.Const(0, i32), k.LoadLocal("row", (k.Const(0, i32),), f32)))
    params = (k.Param("out", f32, output=True), k.Param("src", f32))
    return k.Kernel("k", params, body, k.Launch((1,), None), "test")


def test_unaligned_copies_are_vload_and_memcpy():
    assert "vstore8(vload8(0, &src[3]), 0, &row[0]);" in render(_unaligned_copy(8),
                                                                  DIALECTS["opencl"])
    assert "memcpy(&row[0], &src[3], 8 * sizeof(float));" in render(_unaligned_copy(8),
                                                                     DIALECTS["c"])


@pytest.mark.parametrize("dialect, width", [("cuda", 8), ("opencl", 5)])
def test_an_unaligned_copy_without_a_vector_form_is_refused(dialect, width):
    with pytest.raises(ValueError, match=rf"unaligned copy of {width} elements \(src -> row\) "
                                         rf"has no vector form in the {dialect} dialect"):
        render(_unaligned_copy(width), DIALECTS[dialect])


def test_vector_registers_are_gcc_vectors_in_c_and_vector_types_in_opencl():
    """The CPU GEMM's register block as vectors (``tiling_cpu._vector_micro_kernels``): in C
    GCC's vector extension, declared once with its broadcast; in OpenCL C its own vectors."""
    i32, f32, vec = "int32", "float32", "float32x16"
    zero = k.Const(0, i32)
    body = k.block(
        k.LocalArray("acc", vec, (2,), "register"),
        k.CopyLocal("acc", (zero,), "src", (zero,), 16, f32),
        k.StoreLocal("acc", (zero,), k.BinOp(
            "*", k.Cast(vec, k.Load("src", k.Const(16, i32), f32)),
            k.LoadLocal("acc", (zero,), vec), vec)),
        k.CopyLocal("out", (zero,), "acc", (zero,), 16, f32))
    params = (k.Param("out", f32, output=True), k.Param("src", f32))
    kernel = k.Kernel("k", params, body, k.Launch((1,), None), "test")
    c = render(kernel, DIALECTS["c"])
    assert c.count("typedef float gh_f32x16 __attribute__((vector_size(64)));") == 1, c
    assert "gh_f32x16 acc[2];" in c
    assert "acc[0] = (gh_splat_f32x16(src[16]) * acc[0]);" in c
    opencl = render(kernel, DIALECTS["opencl"])
    assert "float16 acc[2];" in opencl and "((float16)(src[16]))" in opencl, opencl


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_an_unroll_loop_can_ask_for_a_partial_unroll(dialect):
    """``For(kind="unroll", unroll=2)`` asks the native compiler for two iterations at a time
    (a GPU tiled product's K steps, a choice of the measured search), and its unrolled size,
    which weighs the kernel's compile, counts two copies of the body, not all eight."""
    body = k.Store("out", k.Var("i", "int32"), k.Const(1.0, "float32"))
    loop = k.For("i", 0, 8, body, kind="unroll", unroll=2)
    kernel = k.Kernel("k", (k.Param("out", "float32", output=True),), loop,
                      k.Launch((1,), None), "test")
    pragma = "#pragma GCC unroll 2" if dialect == "c" else "#pragma unroll 2"
    lines = [line.strip() for line in render(kernel, DIALECTS[dialect]).splitlines()]
    assert lines[lines.index(pragma) + 1] == "for (int i = 0; i < 8; i++) {", lines
    assert k.statements(loop, unrolled=True) == 1 + 2
    assert k.statements(k.For("i", 0, 8, body, kind="unroll"), unrolled=True) == 1 + 8


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_rename_reaches_every_identifier_and_nothing_else(dialect):
    """``render_kernel(..., rename)`` (how ``dedupe.unit_of`` names kernels by content) passes
    the IR's identifier texts through the rename as it writes them: names of the kernel, its
    parameters, registers, arrays (scalar arrays' elements too) and loop variables, comments,
    the schedule and the variables of C's OpenMP reduction clause; never a type, a helper, a
    reduction's operator or a keyword."""
    i32, f32 = "int32", "float32"
    zero, i = k.Const(0, i32), k.Var("ix", i32)
    body = k.block(
        k.Comment("sums of src"),
        k.LocalArray("row", f32, (4,), "register", align=16),
        k.LocalArray("acc", f32, (2,), "scalars"),
        k.Declare("total", f32, k.Const(0.0, f32)),
        k.CopyLocal("row", (zero,), "src", (zero,), 4, f32),
        k.For("ix", 0, 4, k.Assign("total", k.BinOp(
            "+", k.Var("total", f32), k.Call("max", (k.LoadLocal("row", (i,), f32),
                                                    k.Load("src", i, f32)), f32), f32)),
            kind="simd", reduction="+:total"),
        k.StoreLocal("acc", (k.Const(1, i32),), k.Var("total", f32)),
        k.Store("out", zero, k.LoadLocal("acc", (k.Const(1, i32),), f32)))
    params = (k.Param("out", f32, output=True), k.Param("src", f32))
    kernel = k.Kernel("sums", params, body, k.Launch((1,), None), "sums of src into out")
    seen: set[str] = set()

    def rename(text: str) -> str:
        seen.add(text)
        return text.upper()

    part = render_kernel(kernel, DIALECTS[dialect], rename)
    identifiers = {"sums", "out", "src", "row", "acc", "total", "ix", "sums of src",
                   "sums of src into out"}
    assert seen == identifiers
    if dialect == "c":  # the clause's variables are renamed, its operator is not
        assert "reduction(+:TOTAL)" in part.code
    for name in ("sums", "out", "src", "row", "acc", "total", "ix"):
        assert not re.search(rf"\b{name}\b", part.code), (name, part.code)
    assert "ACC_1 = TOTAL;" in part.code and "OUT[0] = ACC_1;" in part.code
    assert "gh_max_float32(" in part.code  # helpers keep their names
