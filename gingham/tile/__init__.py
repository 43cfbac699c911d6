"""The Tile language: programs, the text parser, the Python form, the reference interpreter and
automatic differentiation.

    from gingham import tile
    matmul = tile.function('''
        function (A[M, K], B[K, N]) -> (C) {
            C[i, j : M, N] = +(A[i, k] * B[k, j]);
        }''')
    c = matmul(a, b)
"""

from .function import Function, function
from .ir import Program
from .parser import parse
from .shapes import BoundProgram, bind

__all__ = ["Function", "Program", "BoundProgram", "bind", "function", "parse"]

# The Python form.
from .builder import (  # noqa: E402
    Dim,
    Index,
    Tensor,
    abs,
    acos,
    asin,
    assign,
    atan,
    cast,
    ceil,
    cond,
    cos,
    cosh,
    dims,
    erf,
    erfc,
    exp,
    floor,
    gather,
    index,
    indices,
    input,
    log,
    logical_and,
    logical_not,
    logical_or,
    max,
    maximum,
    min,
    minimum,
    pow,
    prng,
    prod,
    program,
    relu,
    reshape,
    round,
    rsqrt,
    scatter,
    select,
    shape,
    sigmoid,
    sign,
    sin,
    sinh,
    sqrt,
    stop_gradient,
    sum,
    tan,
    tanh,
)
