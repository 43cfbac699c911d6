"""Common-subexpression elimination over whole statements.

A traced training step computes its forward pass twice: once for the loss it returns, and once
inside the gradient program the autodiff derived from the same forward graph (the backward
needs the forward's values: relu masks, batch-norm statistics). Both copies are the same
statements on the same inputs under other names:

    T1[n, co, y0, y1 : ...] = +(X[n, ci, y0 + k0 - 1, y1 + k1 - 1] * W[co, ci, k0, k1]);
    ...
    T235[n, co, y0, y1 : ...] = +(X[n, ci, y0 + k0 - 1, y1 + k1 - 1] * W[co, ci, k0, k1]);

A statement whose text — with its inputs renamed to the first statement computing each value —
equals an earlier one's, at the same shape and dtype, is dropped and its readers read the
earlier one. Every Tile operation is a pure function of its inputs (``prng`` too: the state is
an input), so the values are the same. A program output keeps its name: it becomes a copy,
which fusion aliases or folds.

The two copies need not split their elementwise work into the same statements: the loss's
batch norm stores its mean (the running-statistics update reads it too) where the gradient
program's copy writes it inline:

    T284 = T6 / 524288.0;           T285 = T5 - T284;      (the loss's copy)
    T7 = T5 - T6 / 524288.0;                               (the gradient program's)

So an elementwise statement is compared by the value it computes: its expression with every
strongly typed elementwise tensor it reads replaced by that tensor's own expression (value
numbers, so shared subexpressions are numbered once). Inlining such a tensor changes
nothing: its shape is the broadcast of its operands' (NumPy broadcasting composes) and its
dtype is its expression's. A weakly typed one (``T = 2.0``, a literal's type until stored) is
read by name: inlined, it would take its reader's type.

    eliminate_common(bound) -> BoundProgram without the repeated statements
"""

from __future__ import annotations

import dataclasses

from ..tile import ir as tir
from ..tile.dtypes import dtype_name
from ..tile.printer import statement_text
from ..tile.rename import rename_statement
from ..tile.shapes import BoundProgram, expr_type

_PLACEHOLDER = "\0out"  # no tensor is named this: the key of a statement without its name


def eliminate_common(bound: BoundProgram) -> BoundProgram:
    """``bound`` with each statement that repeats an earlier one removed (see above)."""
    program = bound.program
    outputs = set(program.outputs)
    first_of: dict[tuple, str] = {}  # statement key -> the tensor that computes it first
    replaced: dict[str, str] = {}  # a dropped statement's tensor -> the one its readers read
    statements: list[tir.Statement] = []
    values = _ValueNumbers(bound)
    copies = 0  # outputs that repeat an earlier value, made copies of it
    for statement in program.statements:
        if replaced:
            statement = rename_statement(statement, replaced)
        out = statement.out
        if isinstance(statement, tir.Elementwise):
            what: object = values.of_statement(statement)
        else:
            what = statement_text(rename_statement(statement, {out: _PLACEHOLDER}))
        key = (what, bound.shapes[out], dtype_name(bound.dtypes[out]))
        earlier = first_of.get(key)
        if earlier is None:
            first_of[key] = out
            statements.append(statement)
        elif out in outputs:  # the caller asks for it by name: a copy of the earlier value
            copy = tir.Elementwise(out, tir.Ref(earlier), statement.loc)
            copies += statement != copy  # already that copy: a second pass changes nothing
            statements.append(copy)
        else:
            replaced[out] = earlier
    if not replaced and not copies:  # every statement kept as it was
        return bound
    statements = _read_ones(statements, program.outputs)
    kept = {s.out for s in statements} | set(program.input_names)
    program = dataclasses.replace(program, statements=tuple(statements))
    shapes = {name: shape for name, shape in bound.shapes.items() if name in kept}
    dtypes = {name: dtype for name, dtype in bound.dtypes.items() if name in kept}
    return BoundProgram(program, bound.dims, shapes, dtypes)


def _read_ones(statements: list[tir.Statement], outputs) -> list[tir.Statement]:
    """The statements an output depends on. A value the other copy stored and this one
    wrote inline (the loss's variance above) is left unread once its reader is dropped."""
    needed = set(outputs)
    kept = []
    for statement in reversed(statements):
        if statement.out in needed:
            kept.append(statement)
            needed.update(statement.inputs())
    return kept[::-1]


class _ValueNumbers:
    """Numbers for elementwise values: equal numbers, equal expressions once every strongly
    typed elementwise tensor read is replaced by its own expression (see the module doc)."""

    def __init__(self, bound: BoundProgram) -> None:
        self.bound = bound
        self.numbers: dict[tuple, int] = {}
        self.of_tensor: dict[str, int] = {}  # strongly typed elementwise tensor -> its value

    def of_statement(self, statement: tir.Elementwise) -> int:
        value = self.of_expr(statement.expr)
        if not expr_type(statement.expr, self.bound.dtypes, statement.out).weak:
            self.of_tensor[statement.out] = value
        return value

    def of_expr(self, node: tir.Expr) -> int:
        if isinstance(node, tir.Ref):
            if node.name in self.of_tensor:
                return self.of_tensor[node.name]
            key: tuple = ("tensor", node.name)
        elif isinstance(node, tir.Const):  # 2 and 2.0 are equal in Python, not in Tile
            key = ("const", type(node.value).__name__, repr(node.value))
        elif isinstance(node, tir.DimValue):
            key = ("dim", node.name)
        elif isinstance(node, tir.Unary):
            key = ("unary", node.op, self.of_expr(node.operand))
        elif isinstance(node, tir.Binary):
            key = ("binary", node.op, self.of_expr(node.left), self.of_expr(node.right))
        elif isinstance(node, tir.Select):
            key = ("select", self.of_expr(node.cond), self.of_expr(node.if_true),
                   self.of_expr(node.if_false))
        elif isinstance(node, tir.Call):
            key = ("call", node.fn, *(self.of_expr(arg) for arg in node.args))
        elif isinstance(node, tir.Cast):
            key = ("cast", node.dtype, self.of_expr(node.operand))
        else:
            raise AssertionError(f"unknown expression {node!r}")
        return self.numbers.setdefault(key, len(self.numbers))


__all__ = ["eliminate_common"]
