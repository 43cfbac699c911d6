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

    eliminate_common(bound) -> BoundProgram without the repeated statements
"""

from __future__ import annotations

import dataclasses

from ..tile import ir as tir
from ..tile.dtypes import dtype_name
from ..tile.printer import statement_text
from ..tile.rename import rename_statement
from ..tile.shapes import BoundProgram

_PLACEHOLDER = "\0out"  # no tensor is named this: the key of a statement without its name


def eliminate_common(bound: BoundProgram) -> BoundProgram:
    """``bound`` with each statement that repeats an earlier one removed (see above)."""
    program = bound.program
    outputs = set(program.outputs)
    first_of: dict[tuple, str] = {}  # statement key -> the tensor that computes it first
    replaced: dict[str, str] = {}  # a dropped statement's tensor -> the one its readers read
    statements: list[tir.Statement] = []
    copies = 0  # outputs that repeat an earlier value, made copies of it
    for statement in program.statements:
        if replaced:
            statement = rename_statement(statement, replaced)
        out = statement.out
        key = (statement_text(rename_statement(statement, {out: _PLACEHOLDER})),
               bound.shapes[out], dtype_name(bound.dtypes[out]))
        earlier = first_of.get(key)
        if earlier is None:
            first_of[key] = out
            statements.append(statement)
        elif out in outputs:  # the caller asks for it by name: a copy of the earlier value
            statements.append(tir.Elementwise(out, tir.Ref(earlier), statement.loc))
            copies += 1
        else:
            replaced[out] = earlier
    if not replaced and not copies:  # every statement kept as it was
        return bound
    kept = {s.out for s in statements} | set(program.input_names)
    program = dataclasses.replace(program, statements=tuple(statements))
    shapes = {name: shape for name, shape in bound.shapes.items() if name in kept}
    dtypes = {name: dtype for name, dtype in bound.dtypes.items() if name in kept}
    return BoundProgram(program, bound.dims, shapes, dtypes)


__all__ = ["eliminate_common"]
