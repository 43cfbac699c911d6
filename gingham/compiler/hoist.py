"""Hoisting broadcast sub-expressions out of elementwise statements.

An elementwise statement runs once per cell of its shape, and so does every sub-expression in
it, even one that reads only broadcast tensors. Batch norm's normalisation

    O = T2 * rsqrt(T4 / 32768.0 + 1e-05) * W + B        # T2: [N, C, H, W], T4: [1, C, 1, 1]

took a division, a square root and a reciprocal per element (2 million of them) for 64
distinct values. Here each maximal sub-expression whose tensors broadcast to far fewer cells
than the statement becomes a statement of its own at that smaller shape:

    T4_h0 = rsqrt(T4 / 32768.0 + 1e-05);                 # [1, C, 1, 1]
    O = T2 * T4_h0 * W + B;

Fusion then computes ``T4_h0`` in the epilogue of the kernel that produces ``T4`` (the same
shape), so no kernel is added there. An expression hoisted before is not hoisted again: the
statement reads the earlier one (batch norm's gradient needs ``rsqrt(T4 / 32768.0 + 1e-05)``
in three statements; one name lets fusion put their reductions in one kernel).

The values are the same: the sub-expression is evaluated with the same operands and types, and
only where its type is its own compute type (a float16 sub-expression is computed in float32 in
registers; stored, it would be rounded), so nothing is rounded that was not rounded before.

    hoist_broadcast(bound) -> BoundProgram with the extra statements, shapes and dtypes
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..tile import dtypes as dt
from ..tile import ir as tir
from ..tile.shapes import BoundProgram, expr_type

# Hoist only where the statement has at least this many cells per cell of the sub-expression:
# a hoisted expression may need a small kernel of its own, which must pay for itself.
MIN_RATIO = 16


def hoist_broadcast(bound: BoundProgram) -> BoundProgram:
    """``bound`` with broadcast sub-expressions of elementwise statements made statements."""
    shapes = dict(bound.shapes)
    dtypes = dict(bound.dtypes)
    statements: list = []
    changed = False
    hoisted_before: dict[tuple, str] = {}  # _signature(expr) -> the statement computing it
    for statement in bound.program.statements:
        if not isinstance(statement, tir.Elementwise):
            statements.append(statement)
            continue
        cells = math.prod(shapes[statement.out])
        hoisted: list[tir.Elementwise] = []
        reused: list[str] = []

        def visit(expr: tir.Expr) -> tir.Expr:
            if _hoistable(expr, shapes, dtypes, cells):
                signature = _signature(expr)
                if signature in hoisted_before:
                    reused.append(hoisted_before[signature])
                    return tir.Ref(hoisted_before[signature], getattr(expr, "loc", None))
                name = _fresh(f"{statement.out}_h", shapes)
                hoisted_before[signature] = name
                shapes[name] = _broadcast_shape(expr, shapes)
                dtypes[name] = expr_type(expr, dtypes).dtype
                hoisted.append(tir.Elementwise(name, expr, statement.loc))
                return tir.Ref(name, getattr(expr, "loc", None))
            return _map_children(expr, visit)

        expr = visit(statement.expr)
        if hoisted or reused:
            changed = True
            statements.extend(hoisted)
            statements.append(dataclasses.replace(statement, expr=expr))
        else:
            statements.append(statement)
    if not changed:
        return bound
    program = dataclasses.replace(bound.program, statements=tuple(statements))
    return BoundProgram(program, bound.dims, shapes, dtypes)


def _hoistable(expr: tir.Expr, shapes: dict, dtypes: dict, cells: int) -> bool:
    if isinstance(expr, (tir.Ref, tir.Const, tir.DimValue)):
        return False  # nothing to compute
    refs = tir.expr_refs(expr)
    if not refs:
        return False  # a constant expression: no shape of its own
    if math.prod(_broadcast_shape(expr, shapes)) * MIN_RATIO > cells:
        return False
    t = expr_type(expr, dtypes)
    if t.weak:  # (c ? 0.1 : 0.2) takes the type it meets: stored, it would be float32
        return False
    dtype = np.dtype(t.dtype)
    return dt.compute_dtype(dtype) == dtype


def _broadcast_shape(expr: tir.Expr, shapes: dict) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(shapes[name] for name in tir.expr_refs(expr))))


def _signature(expr: tir.Expr) -> tuple:
    """What identifies an expression's value: its structure and its literals with their types
    (``1`` and ``1.0`` compare equal but type differently)."""
    if isinstance(expr, tir.Const):
        return ("const", type(expr.value).__name__, expr.value)
    if isinstance(expr, (tir.Ref, tir.DimValue)):
        return (type(expr).__name__, expr.name)
    parts: list = [type(expr).__name__]
    for name in ("op", "fn", "dtype"):
        if hasattr(expr, name):
            parts.append(getattr(expr, name))
    children: list = []
    _map_children(expr, lambda child: children.append(child) or child)
    return tuple(parts) + tuple(_signature(child) for child in children)


def _fresh(prefix: str, shapes: dict) -> str:
    index = 0
    while f"{prefix}{index}" in shapes:
        index += 1
    return f"{prefix}{index}"


def _map_children(expr: tir.Expr, fn) -> tir.Expr:
    if isinstance(expr, tir.Unary):
        return dataclasses.replace(expr, operand=fn(expr.operand))
    if isinstance(expr, tir.Binary):
        return dataclasses.replace(expr, left=fn(expr.left), right=fn(expr.right))
    if isinstance(expr, tir.Select):
        return dataclasses.replace(expr, cond=fn(expr.cond), if_true=fn(expr.if_true),
                                   if_false=fn(expr.if_false))
    if isinstance(expr, tir.Call):
        return dataclasses.replace(expr, args=tuple(fn(a) for a in expr.args))
    if isinstance(expr, tir.Cast):
        return dataclasses.replace(expr, operand=fn(expr.operand))
    return expr
