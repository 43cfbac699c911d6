"""Programs back to Tile text, so that any program — a gradient especially — can be read.

The text parses back to an equal program (a tested round trip)::

    function (A[M, K], B[K, N]) -> (C) {
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
    }
"""

from __future__ import annotations

from .ir import (
    Binary,
    Call,
    Cast,
    Const,
    Contraction,
    DimValue,
    Elementwise,
    Expr,
    Program,
    Ref,
    Select,
    Special,
    Statement,
    Unary,
)

# C precedence, higher binds tighter.
PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}
UNARY_PRECEDENCE = 11
TERNARY_PRECEDENCE = 0


def program_text(program: Program) -> str:
    header_inputs = []
    for inp in program.inputs:
        if inp.dims is None:
            header_inputs.append(inp.name)
        else:
            header_inputs.append(f"{inp.name}[{', '.join(str(d) for d in inp.dims)}]")
    lines = [f"function ({', '.join(header_inputs)}) -> ({', '.join(program.outputs)}) {{"]
    for statement in program.statements:
        lines.append("    " + statement_text(statement))
    lines.append("}")
    return "\n".join(lines) + "\n"


def statement_text(statement: Statement) -> str:
    if isinstance(statement, Contraction):
        return contraction_text(statement)
    if isinstance(statement, Elementwise):
        return f"{statement.out} = {expr_text(statement.expr)};"
    if isinstance(statement, Special):
        return special_text(statement)
    raise AssertionError(f"unknown statement {statement!r}")


def contraction_text(c: Contraction) -> str:
    index = ", ".join(str(p) for p in c.index)
    shape = ", ".join(str(s) for s in c.shape)
    head = f"{c.out}[{index} : {shape}]" if c.index else f"{c.out}[]"
    ops = [str(a) for a in c.operands]
    if c.combo == "none":
        body = ops[0]
    elif c.combo == "?":
        body = f"{ops[0]} == {ops[1]} ? {ops[2]}"
    else:
        body = f"{ops[0]} {c.combo} {ops[1]}"
    text = f"{head} = {c.agg}({body})"
    if c.constraints:
        text += ", " + ", ".join(str(k) for k in c.constraints)
    if c.default is not None:
        text += f" default {c.default}"
    return text + ";"


def special_text(s: Special) -> str:
    args = list(s.tensors)
    if s.op == "index":
        args.append(str(s.axis))
    args.extend(str(size) for size in s.sizes)
    return f"{s.out} = {s.op}({', '.join(args)});"


def expr_text(expr: Expr, parent: int = -1) -> str:
    if isinstance(expr, Ref):
        return expr.name
    if isinstance(expr, DimValue):
        return expr.name
    if isinstance(expr, Const):
        return _literal(expr.value)
    if isinstance(expr, Unary):
        return f"{expr.op}{expr_text(expr.operand, UNARY_PRECEDENCE)}"
    if isinstance(expr, Binary):
        precedence = PRECEDENCE[expr.op]
        left = expr_text(expr.left, precedence)
        right = expr_text(expr.right, precedence + 1)
        text = f"{left} {expr.op} {right}"
        return f"({text})" if precedence < parent else text
    if isinstance(expr, Select):
        text = (
            f"{expr_text(expr.cond, TERNARY_PRECEDENCE + 1)} ? "
            f"{expr_text(expr.if_true, TERNARY_PRECEDENCE + 1)} : "
            f"{expr_text(expr.if_false, TERNARY_PRECEDENCE)}"
        )
        return f"({text})" if parent > TERNARY_PRECEDENCE else text
    if isinstance(expr, Call):
        return f"{expr.fn}({', '.join(expr_text(a) for a in expr.args)})"
    if isinstance(expr, Cast):
        return _cast_text(expr)
    raise AssertionError(f"unknown expression {expr!r}")


def _literal(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        # Tile has no literal for these; they are written as arithmetic on literals.
        return {"inf": "(1.0 / 0.0)", "-inf": "(-1.0 / 0.0)", "nan": "(0.0 / 0.0)"}[text]
    return text


def _cast_text(expr: Cast) -> str:
    operand = expr_text(expr.operand)
    if expr.dtype == "bool":
        return f"as_bool({operand})"
    if expr.dtype == "bfloat16":
        return f"as_bfloat({operand}, 16)"
    kind = "float" if expr.dtype.startswith("float") else "uint" if expr.dtype.startswith("u") else "int"
    bits = int("".join(ch for ch in expr.dtype if ch.isdigit()))
    return f"as_{kind}({operand}, {bits})"
