"""Renaming tensors throughout statements (used by the Python form and the autodiff)."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from .ir import (
    Access,
    Binary,
    Call,
    Cast,
    Contraction,
    Elementwise,
    Expr,
    Ref,
    Select,
    Special,
    Statement,
    Unary,
)


def rename_statement(statement: Statement, names: Mapping[str, str]) -> Statement:
    """The statement with every tensor name in ``names`` replaced."""
    out = names.get(statement.out, statement.out)
    if isinstance(statement, Contraction):
        operands = tuple(_access(a, names) for a in statement.operands)
        default = names.get(statement.default, statement.default) if statement.default else None
        return replace(statement, out=out, operands=operands, default=default)
    if isinstance(statement, Elementwise):
        return replace(statement, out=out, expr=rename_expr(statement.expr, names))
    if isinstance(statement, Special):
        tensors = tuple(names.get(t, t) for t in statement.tensors)
        return replace(statement, out=out, tensors=tensors)
    raise AssertionError(statement)


def _access(access: Access, names: Mapping[str, str]) -> Access:
    return replace(access, tensor=names.get(access.tensor, access.tensor))


def rename_expr(expr: Expr, names: Mapping[str, str]) -> Expr:
    if isinstance(expr, Ref):
        return replace(expr, name=names.get(expr.name, expr.name))
    if isinstance(expr, Unary):
        return replace(expr, operand=rename_expr(expr.operand, names))
    if isinstance(expr, Cast):
        return replace(expr, operand=rename_expr(expr.operand, names))
    if isinstance(expr, Binary):
        return replace(expr, left=rename_expr(expr.left, names),
                       right=rename_expr(expr.right, names))
    if isinstance(expr, Select):
        return replace(expr, cond=rename_expr(expr.cond, names),
                       if_true=rename_expr(expr.if_true, names),
                       if_false=rename_expr(expr.if_false, names))
    if isinstance(expr, Call):
        return replace(expr, args=tuple(rename_expr(a, names) for a in expr.args))
    return expr


def substitute_expr(expr: Expr, name: str, replacement: Expr) -> Expr:
    """``expr`` with every ``Ref(name)`` replaced by ``replacement``."""
    if isinstance(expr, Ref):
        return replacement if expr.name == name else expr
    if isinstance(expr, (Unary, Cast)):
        return replace(expr, operand=substitute_expr(expr.operand, name, replacement))
    if isinstance(expr, Binary):
        return replace(expr, left=substitute_expr(expr.left, name, replacement),
                       right=substitute_expr(expr.right, name, replacement))
    if isinstance(expr, Select):
        return replace(expr, cond=substitute_expr(expr.cond, name, replacement),
                       if_true=substitute_expr(expr.if_true, name, replacement),
                       if_false=substitute_expr(expr.if_false, name, replacement))
    if isinstance(expr, Call):
        return replace(expr, args=tuple(substitute_expr(a, name, replacement) for a in expr.args))
    return expr
