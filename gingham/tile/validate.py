"""Checks a program before anything runs: names, SSA, index variables.

The same checks run for text and for the Python form; shape and type checks need the argument
shapes and happen when a program is bound (:mod:`gingham.tile.shapes`).
"""

from __future__ import annotations

from ..errors import TileIndexError, TileNameError, TileShapeError
from .ir import Contraction, Program, Statement


def validate(program: Program) -> None:
    """Raise the first :class:`~gingham.TileError` the program has, naming tensor and place."""
    dims = set(program.dim_names())
    defined: dict[str, object] = {}
    for inp in program.inputs:
        if inp.name in defined:
            raise TileNameError(f"input '{inp.name}' appears twice in the header", inp.loc)
        if inp.name in dims:
            raise TileNameError(f"'{inp.name}' is both a tensor and a dimension", inp.loc)
        defined[inp.name] = inp
    for statement in program.statements:
        _check_statement(statement, defined, dims)
        if statement.out in dims:
            raise TileNameError(
                f"'{statement.out}' is a dimension of the header and cannot be assigned",
                statement.loc, statement.out,
            )
        if statement.out in defined:
            raise TileNameError(
                f"tensor '{statement.out}' is assigned twice; tensors are assigned once",
                statement.loc, statement.out,
            )
        defined[statement.out] = statement
    seen_outputs: set[str] = set()
    for name in program.outputs:
        if name not in defined:
            raise TileNameError(f"output '{name}' is never defined by a statement or input")
        if name in seen_outputs:
            raise TileNameError(f"output '{name}' is listed twice")
        seen_outputs.add(name)


def _check_statement(statement: Statement, defined: dict, dims: set[str]) -> None:
    where = f"in the statement defining '{statement.out}'"
    for name in statement.inputs():
        if name == statement.out:
            raise TileNameError(
                f"'{name}' is used {where} before it is defined", statement.loc, statement.out
            )
        if name not in defined:
            what = "a dimension, not a tensor" if name in dims else "unknown tensor"
            raise TileNameError(f"{what} '{name}' {where}", statement.loc, statement.out)
    if isinstance(statement, Contraction):
        _check_contraction(statement)


def _check_contraction(c: Contraction) -> None:
    if len(c.index) != len(c.shape):
        raise TileShapeError(
            f"'{c.out}' has {len(c.index)} indices but {len(c.shape)} sizes", c.loc, c.out
        )
    right_side: set[str] = set()
    for access in c.operands:
        for poly in access.index:
            right_side |= {n for n in poly.names() if n[0].islower()}
    for constraint in c.constraints:
        right_side |= {n for n in constraint.poly.names() if n[0].islower()}
    for poly in c.index:
        for name in sorted(poly.names()):
            if name[0].islower() and name not in right_side:
                raise TileIndexError(
                    f"index variable '{name}' appears only in the output of '{c.out}'; use it "
                    f"in an input access or bound it with a constraint ({name} < N)",
                    c.loc, c.out,
                )
