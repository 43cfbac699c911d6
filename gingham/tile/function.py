"""The public callable: a Tile program that runs on NumPy arrays and differentiates itself.

    >>> fn = function('''
    ... function (A[M, K], B[K, N]) -> (C) {
    ...     C[i, j : M, N] = +(A[i, k] * B[k, j]);
    ... }''')
    >>> c = fn(a, b)                          # on the default device
    >>> da, db = fn.vjp((a, b), dc)           # vector-Jacobian product
    >>> print(fn.gradient_source(a, b))       # the gradient, as Tile text
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from ..errors import TileError, TileShapeError
from ..lru import LRU
from . import dtypes as dt
from .autodiff import GradientProgram, gradient_program
from .ir import Program
from .parser import parse
from .shapes import BoundProgram, bind

ArrayLike = Union[np.ndarray, float, int]
#: Bindings (argument signatures) and gradient programs kept per function, most recent first.
MAX_BINDINGS = 64


class Function:
    """A checked Tile program. Call it on arrays; ``vjp`` gives gradients."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._bindings: LRU[tuple, BoundProgram] = LRU(MAX_BINDINGS)
        self._gradients: LRU[tuple, GradientProgram] = LRU(MAX_BINDINGS)

    @property
    def source(self) -> str:
        """The program as Tile text (the original text when it was parsed from text)."""
        return self.program.source or str(self.program)

    def __repr__(self) -> str:
        return f"tile.function({str(self.program)!r})"

    # -- binding ---------------------------------------------------------------------------------
    def bind(self, *arrays) -> BoundProgram:
        """Shapes and dtypes of every tensor for these arguments (cached per signature)."""
        return self.bind_shapes(*_signature(self.program, arrays))

    def bind_shapes(self, shapes: Sequence[Sequence[int]], dtypes: Sequence) -> BoundProgram:
        """Like :meth:`bind`, from shapes and dtypes alone (no arrays needed)."""
        dtypes = [dt.as_tile_dtype(d) for d in dtypes]
        key = (tuple(tuple(s) for s in shapes), tuple(dt.dtype_name(d) for d in dtypes))
        bound = self._bindings.get(key)
        if bound is None:
            bound = self._bindings[key] = bind(self.program, [tuple(s) for s in shapes], dtypes)
        return bound

    # -- running ---------------------------------------------------------------------------------
    def __call__(self, *arrays: ArrayLike, device: str | None = None):
        """Run on NumPy arrays; one output gives an array, several a tuple in header order."""
        bound = self.bind(*arrays)
        results = _execute(bound, _as_arrays(bound, arrays), device)
        return results[0] if len(results) == 1 else tuple(results)

    def vjp(self, arrays: Sequence[ArrayLike], cotangents, device: str | None = None) -> tuple:
        """The vector-Jacobian product: one gradient per input (None for integer inputs)."""
        arrays = tuple(arrays)
        bound = self.bind(*arrays)
        outputs = self.program.outputs
        if not isinstance(cotangents, (tuple, list)):
            cotangents = (cotangents,)
        if len(cotangents) != len(outputs):
            raise TileShapeError(
                f"vjp needs one cotangent per output ({', '.join(outputs)}): got "
                f"{len(cotangents)}"
            )
        grad = self._gradient(bound)
        cotangent_arrays = []
        for name, cotangent in zip(outputs, cotangents):
            expected = bound.shapes[name]
            value = np.asarray(cotangent)
            if value.shape != expected:
                raise TileShapeError(
                    f"the cotangent of output '{name}' has shape {value.shape} but '{name}' "
                    f"has shape {expected}"
                )
            cotangent_arrays.append(value.astype(bound.dtypes[name]))
        needed = [_as_arrays(bound, arrays)[i] for i in grad.forward_inputs]
        inputs = needed + [cotangent_arrays[i] for i in grad.cotangent_outputs]
        gradient_bound = grad.function.bind(*inputs)
        values = _execute(gradient_bound, inputs, device)
        by_name = dict(zip(grad.program.outputs, values))
        result = []
        for name in self.program.input_names:
            gradient_name = grad.gradient_names.get(name)
            if gradient_name is None:
                is_differentiable = dt.is_float(bound.dtypes[name])
                result.append(np.zeros(bound.shapes[name], bound.dtypes[name])
                              if is_differentiable else None)
            else:
                result.append(by_name[gradient_name])
        return tuple(result)

    def gradient_function(self, *arrays: ArrayLike) -> "Function":
        """The gradient program for these argument shapes and dtypes, as a callable Function.

        It takes the forward inputs followed by one cotangent per output and returns the
        gradients of the differentiable inputs that receive any (see ``gradient_names``).
        """
        return self._gradient(self.bind(*arrays)).function

    def gradient_source(self, *arrays: ArrayLike) -> str:
        """The gradient program for these argument shapes and dtypes, as Tile text."""
        return str(self._gradient(self.bind(*arrays)).program)

    def _gradient(self, bound: BoundProgram, wrt: frozenset[str] | None = None) -> GradientProgram:
        key = (bound.signature(), wrt)
        if key not in self._gradients:
            self._gradients[key] = gradient_program(bound, wrt)
        return self._gradients[key]

    def gradient_for(self, bound: BoundProgram, wrt: frozenset[str] | None = None
                     ) -> GradientProgram:
        """The gradient program of a binding, limited to the inputs named in ``wrt``."""
        return self._gradient(bound, wrt)


def function(source: Union[str, Program]) -> Function:
    """Parse and check a Tile program (text or a :class:`Program` from the Python form)."""
    program = parse(source) if isinstance(source, str) else source
    if not isinstance(program, Program):
        raise TypeError(f"tile.function takes Tile text or a Program, not {type(source).__name__}")
    return Function(program)


def _signature(program: Program, arrays) -> tuple[list[tuple[int, ...]], list[np.dtype]]:
    shapes, dtypes = [], []
    for position, array in enumerate(arrays):
        value = array if isinstance(array, np.ndarray) else np.asarray(array)
        try:
            dtypes.append(dt.as_tile_dtype(value.dtype))
        except TypeError as error:
            name = program.inputs[position].name if position < len(program.inputs) else "?"
            raise TileError(f"argument {position + 1} ('{name}'): {error}") from None
        shapes.append(tuple(value.shape))
    return shapes, dtypes


def _as_arrays(bound: BoundProgram, arrays) -> list[np.ndarray]:
    return [np.asarray(a, dtype=bound.dtypes[n]) for a, n in zip(arrays, bound.program.input_names)]


def _execute(bound: BoundProgram, arrays: list[np.ndarray], device: str | None) -> list[np.ndarray]:
    """Run a bound program on a device; the reference interpreter is the fallback."""
    from .. import runtime

    return runtime.execute(bound, arrays, device)
