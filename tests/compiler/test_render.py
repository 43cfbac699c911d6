"""Rendering details of the C-family dialects (gingham/codegen/c_family.py)."""

from __future__ import annotations

import pytest

from gingham.compiler import kernel_ir as k  # before codegen: the packages import each other
from gingham.codegen.c_family import DIALECTS, _without_outer_parentheses, render


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
