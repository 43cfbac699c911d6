"""The Python form of Tile: build the same programs from index objects and affine arithmetic.

    from gingham import tile

    M, K, N = tile.dims("M K N")
    A, B = tile.input("A", [M, K]), tile.input("B", [K, N])
    i, j, k = tile.indices("i j k")
    C = tile.sum(A[i, k] * B[k, j], out=[i, j], shape=[M, N])
    matmul = tile.function(tile.program([A, B], {"C": C}))

    # a 2x2 max pool, stride 2, partial windows allowed
    X = tile.input("X", [N, H, W, C])
    P = tile.max(X[n, 2*y + ky, 2*x + kx, c], out=[n, y, x, c],
                 shape=[N, (H + 1) // 2, (W + 1) // 2, C], where=[ky < 2, kx < 2])

    # elementwise statements are ordinary arithmetic and tile functions
    Y = tile.relu(C * 2.0 + 1.0)

``tile.program`` produces exactly what the parser produces for the same text (the tests compare
the two), so everything downstream is shared.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from fractions import Fraction
from typing import Iterable, Mapping, Sequence, Union

from ..errors import TileAffineError, TileNameError, TileSyntaxError
from . import ir
from .ir import Access, Constraint, Contraction, Elementwise, Input, Poly, Program, Size, Special
from .rename import rename_statement, substitute_expr
from .validate import validate

_ids = itertools.count()

Number = Union[int, float, bool]


# -- index arithmetic ------------------------------------------------------------------------------


class SizeExpr:
    """An integer expression over dimensions (``N``, ``(H + 1) // 2``); usable as a size and,
    when affine, inside an index (``N - 1 - i``)."""

    def __init__(self, size: Size) -> None:
        self.size = size

    def _combine(self, other, op: str, swap: bool = False):
        if isinstance(other, IndexExpr):
            return _mixed(self, other, op, swap)
        other_size = _as_size(other)
        if other_size is None:
            return NotImplemented
        args = (other_size, self.size) if swap else (self.size, other_size)
        return SizeExpr(Size(op, args=args))

    def __add__(self, other):
        return self._combine(other, "+")

    def __radd__(self, other):
        return self._combine(other, "+", swap=True)

    def __sub__(self, other):
        return self._combine(other, "-")

    def __rsub__(self, other):
        return self._combine(other, "-", swap=True)

    def __mul__(self, other):
        return self._combine(other, "*")

    def __rmul__(self, other):
        return self._combine(other, "*", swap=True)

    def __floordiv__(self, other):
        return self._combine(other, "/")

    def __rfloordiv__(self, other):
        return self._combine(other, "/", swap=True)

    def __neg__(self):
        return SizeExpr(Size("neg", args=(self.size,)))

    def to_index(self) -> "IndexExpr":
        return IndexExpr(_size_to_poly(self.size))

    def __lt__(self, bound):
        return self.to_index() < bound

    def __repr__(self) -> str:
        return str(self.size)


class Dim(SizeExpr):
    """A dimension name bound by an input's shape (``tile.dims("M N")``)."""

    def __init__(self, name: str) -> None:
        if not name[:1].isupper():
            raise TileSyntaxError(f"dimension names start with an upper-case letter: '{name}'")
        super().__init__(Size.dim(name))
        self.name = name


def _mixed(size: SizeExpr, index: "IndexExpr", op: str, swap: bool) -> "IndexExpr":
    if op not in "+-*":
        raise TileAffineError(f"'{op}' between a size and an index is not affine")
    left, right = (index, size.to_index()) if swap else (size.to_index(), index)
    return {"+": IndexExpr.__add__, "-": IndexExpr.__sub__, "*": IndexExpr.__mul__}[op](left, right)


def _size_to_poly(size: Size) -> Poly:
    if size.op == "const":
        return Poly.constant(size.value)
    if size.op == "dim":
        return Poly.var(size.name)
    if size.op == "neg":
        return -_size_to_poly(size.args[0])
    left, right = (_size_to_poly(a) for a in size.args)
    if size.op == "+":
        return left + right
    if size.op == "-":
        return left - right
    if size.op == "*" and (left.is_constant() or right.is_constant()):
        return right.scale(left.const) if left.is_constant() else left.scale(right.const)
    raise TileAffineError(f"size '{size}' is not affine and cannot be used inside an index")


def _as_size(value) -> Size | None:
    if isinstance(value, SizeExpr):
        return value.size
    if isinstance(value, int) and not isinstance(value, bool):
        return Size.const(value)
    return None


class IndexExpr:
    """An affine index expression: ``2*x + kx - 1``. Comparing with ``<`` gives a constraint."""

    def __init__(self, poly: Poly) -> None:
        self.poly = poly

    @staticmethod
    def _poly(value) -> Poly | None:
        if isinstance(value, IndexExpr):
            return value.poly
        if isinstance(value, SizeExpr):
            return _size_to_poly(value.size)
        if isinstance(value, int) and not isinstance(value, bool):
            return Poly.constant(value)
        return None

    def __add__(self, other):
        poly = self._poly(other)
        return NotImplemented if poly is None else IndexExpr(self.poly + poly)

    __radd__ = __add__

    def __sub__(self, other):
        poly = self._poly(other)
        return NotImplemented if poly is None else IndexExpr(self.poly - poly)

    def __rsub__(self, other):
        poly = self._poly(other)
        return NotImplemented if poly is None else IndexExpr(poly - self.poly)

    def __neg__(self):
        return IndexExpr(-self.poly)

    def __mul__(self, other):
        poly = self._poly(other)
        if poly is None:
            return NotImplemented
        if poly.is_constant():
            return IndexExpr(self.poly.scale(poly.const))
        if self.poly.is_constant():
            return IndexExpr(poly.scale(self.poly.const))
        raise TileAffineError(
            f"index expression ({self.poly}) * ({poly}) is not affine; only integer constants "
            "may multiply an index"
        )

    __rmul__ = __mul__

    def __truediv__(self, other):
        if not isinstance(other, int) or isinstance(other, bool) or other == 0:
            raise TileAffineError(
                f"an index may only be divided by a non-zero integer constant, not {other!r}"
            )
        return IndexExpr(self.poly.scale(Fraction(1, other)))

    def __lt__(self, bound) -> "Where":
        size = _as_size(bound)
        if size is None:
            raise TileSyntaxError(f"a constraint's bound must be a size or an integer: {bound!r}")
        return Where(Constraint(self.poly, size))

    def __repr__(self) -> str:
        return str(self.poly)


class Index(IndexExpr):
    """An index variable (``tile.indices("i j k")``)."""

    def __init__(self, name: str) -> None:
        if not name[:1].islower():
            raise TileSyntaxError(f"index variables start with a lower-case letter: '{name}'")
        super().__init__(Poly.var(name))
        self.name = name


class Where:
    """A constraint ``poly < bound`` for ``where=[...]``."""

    def __init__(self, constraint: Constraint) -> None:
        self.constraint = constraint


def dims(names: str) -> tuple[Dim, ...]:
    """``M, N = tile.dims("M N")``"""
    return tuple(Dim(n) for n in names.split())


def indices(names: str) -> tuple[Index, ...]:
    """``i, j, k = tile.indices("i j k")``"""
    return tuple(Index(n) for n in names.split())


# -- tensors -----------------------------------------------------------------------------------------


class Tensor:
    """A tensor of a program under construction: an input, or the result of a statement.

    Arithmetic on tensors builds elementwise statements; ``T[i, j]`` makes an access for a
    contraction. Names are chosen when the program is built.
    """

    def __init__(self, statement=None, deps: Sequence["Tensor"] = (), name: str | None = None,
                 dims=None) -> None:
        self.id = f"_t{next(_ids)}"
        self.statement = replace(statement, out=self.id) if statement is not None else None
        self.deps = tuple(deps)
        self.name = name
        self.dims = dims

    def __getitem__(self, index) -> "AccessExpr":
        if not isinstance(index, tuple):
            index = (index,)
        polys = []
        for position, value in enumerate(index):
            poly = IndexExpr._poly(value)
            if poly is None:
                raise TileSyntaxError(f"index {position} of a tensor access is not an index "
                                      f"expression: {value!r}")
            polys.append(poly)
        return AccessExpr(self, Access(self.id, tuple(polys)))

    # elementwise arithmetic
    def _binary(self, op: str, other, swap: bool = False) -> "Tensor":
        return _elementwise(lambda a, b: ir.Binary(op, a, b), [other, self] if swap else [self, other])

    def __add__(self, o): return self._binary("+", o)
    def __radd__(self, o): return self._binary("+", o, True)
    def __sub__(self, o): return self._binary("-", o)
    def __rsub__(self, o): return self._binary("-", o, True)
    def __mul__(self, o): return self._binary("*", o)
    def __rmul__(self, o): return self._binary("*", o, True)
    def __truediv__(self, o): return self._binary("/", o)
    def __rtruediv__(self, o): return self._binary("/", o, True)
    def __mod__(self, o): return self._binary("%", o)
    def __lt__(self, o): return self._binary("<", o)
    def __le__(self, o): return self._binary("<=", o)
    def __gt__(self, o): return self._binary(">", o)
    def __ge__(self, o): return self._binary(">=", o)
    def __and__(self, o): return self._binary("&", o)
    def __or__(self, o): return self._binary("|", o)
    def __xor__(self, o): return self._binary("^", o)
    def __lshift__(self, o): return self._binary("<<", o)
    def __rshift__(self, o): return self._binary(">>", o)
    def __neg__(self): return _elementwise(lambda a: ir.Unary("-", a), [self])
    def __invert__(self): return _elementwise(lambda a: ir.Unary("~", a), [self])

    def eq(self, other) -> "Tensor":
        """Elementwise ``==`` (``==`` itself stays identity so tensors can live in sets)."""
        return self._binary("==", other)

    def ne(self, other) -> "Tensor":
        return self._binary("!=", other)

    def __bool__(self) -> bool:
        # ``if x > 0:`` on a tensor under construction would take its branch whatever the
        # values; the program's own choice is a select.
        raise TypeError("a Tile tensor has no truth value while the program is built: use "
                        "tile.select(cond, a, b) for a choice per element")

    def __ne__(self, other):  # type: ignore[override]
        # Python would answer ``not (a == b)``, an identity test: a bool where an elementwise
        # comparison was meant, silently (``select(w != 0, ...)`` always takes its first value).
        raise TypeError("a Tile tensor's != is not elementwise: use a.ne(b) (and a.eq(b) for "
                        "==, which stays identity so that tensors can live in sets)")

    __hash__ = object.__hash__


def input(name: str, dims: Sequence[Union[Dim, int]] | None = None) -> Tensor:  # noqa: A001
    """An input of the program: ``A = tile.input("A", [M, K])``; ``dims=None`` for an input
    used only elementwise."""
    if not name[:1].isupper():
        raise TileSyntaxError(f"tensor names start with an upper-case letter: '{name}'")
    header = None
    if dims is not None:
        header = tuple(d.name if isinstance(d, Dim) else int(d) for d in dims)
    return Tensor(name=name, dims=header)


def _operand(value) -> tuple[ir.Expr, list[Tensor]]:
    if isinstance(value, Tensor):
        return ir.Ref(value.id), [value]
    if isinstance(value, Dim):
        return ir.DimValue(value.name), []
    if isinstance(value, (bool, int, float)):
        return ir.Const(value), []
    raise TileSyntaxError(f"cannot use {value!r} in an elementwise statement")


def _elementwise(make, operands: list) -> Tensor:
    exprs, deps = [], []
    for operand in operands:
        expr, used = _operand(operand)
        exprs.append(expr)
        deps.extend(used)
    return Tensor(Elementwise("_", make(*exprs)), deps)


def _function(fn: str):
    arity = 2 if fn in ir.BINARY_FUNCTIONS else 1

    def apply(*args) -> Tensor:
        if len(args) != arity:
            raise TileSyntaxError(f"tile.{fn} takes {arity} argument(s), got {len(args)}")
        return _elementwise(lambda *a: ir.Call(fn, tuple(a)), list(args))

    apply.__name__ = fn
    apply.__doc__ = f"Elementwise ``{fn}`` (a Tile function)."
    return apply


def cast(x, dtype: str) -> Tensor:
    """``tile.cast(X, "float16")``: the Python form of ``as_float(X, 16)`` and friends."""
    from .dtypes import DTYPES

    if dtype not in DTYPES:
        raise TileSyntaxError(f"unknown type '{dtype}'; use one of {', '.join(DTYPES)}")
    return _elementwise(lambda a: ir.Cast(dtype, a), [x])


def select(cond, if_true, if_false) -> Tensor:
    """Elementwise ``cond ? if_true : if_false``."""
    return _elementwise(lambda c, t, f: ir.Select(c, t, f), [cond, if_true, if_false])


def logical_and(a, b) -> Tensor:
    return _elementwise(lambda x, y: ir.Binary("&&", x, y), [a, b])


def logical_or(a, b) -> Tensor:
    return _elementwise(lambda x, y: ir.Binary("||", x, y), [a, b])


def logical_not(a) -> Tensor:
    return _elementwise(lambda x: ir.Unary("!", x), [a])


# -- contractions --------------------------------------------------------------------------------------


class AccessExpr:
    """``T[i, j]`` inside a contraction; ``*``, ``+`` and ``==`` combine two accesses."""

    def __init__(self, tensor: Tensor, access: Access) -> None:
        self.tensors = [tensor]
        self.combo = "none"
        self.accesses = [access]

    def _combined(self, other: "AccessExpr", combo: str) -> "AccessExpr":
        if not isinstance(other, AccessExpr) or self.combo != "none" or other.combo != "none":
            raise TileSyntaxError("a contraction combines exactly two tensor accesses")
        result = AccessExpr(self.tensors[0], self.accesses[0])
        result.tensors = self.tensors + other.tensors
        result.accesses = self.accesses + other.accesses
        result.combo = combo
        return result

    def __mul__(self, other):
        return self._combined(other, "*")

    def __add__(self, other):
        return self._combined(other, "+")

    def __eq__(self, other):  # type: ignore[override]
        return self._combined(other, "==")

    __hash__ = None  # type: ignore[assignment]


def cond(comparison: AccessExpr, value: AccessExpr) -> AccessExpr:
    """The conditional form ``A[...] == B[...] ? C[...]``: ``tile.cond(A[r, c] == M[r], I[r, c])``."""
    if not isinstance(comparison, AccessExpr) or comparison.combo != "==":
        raise TileSyntaxError("tile.cond needs an access comparison A[...] == B[...] first")
    if not isinstance(value, AccessExpr) or value.combo != "none":
        raise TileSyntaxError("tile.cond needs a single access as its value")
    result = AccessExpr(comparison.tensors[0], comparison.accesses[0])
    result.tensors = comparison.tensors + value.tensors
    result.accesses = comparison.accesses + value.accesses
    result.combo = "?"
    return result


def _contraction(agg: str, expr: AccessExpr, out, shape, where, default) -> Tensor:
    if not isinstance(expr, AccessExpr):
        raise TileSyntaxError(
            "a contraction's body is a tensor access or two combined with *, + or ==, "
            f"not {type(expr).__name__}"
        )
    out = list(out or [])
    shape = list(shape or [])
    if len(out) != len(shape):
        raise TileSyntaxError(f"out has {len(out)} indices but shape has {len(shape)} sizes")
    index = tuple(IndexExpr._poly(o) for o in out)
    if any(p is None for p in index):
        raise TileSyntaxError("out= takes index expressions")
    sizes = []
    for size in shape:
        converted = _as_size(size)
        if converted is None:
            raise TileSyntaxError(f"shape= takes dimensions and integers, not {size!r}")
        sizes.append(converted)
    constraints = []
    for item in where or []:
        if not isinstance(item, Where):
            raise TileSyntaxError(f"where= takes constraints such as 'k < 3', not {item!r}")
        constraints.append(item.constraint)
    deps = list(expr.tensors)
    default_id = None
    if default is not None:
        deps.append(default)
        default_id = default.id
    statement = Contraction(
        "_", index, tuple(sizes), agg, expr.combo, tuple(expr.accesses), tuple(constraints),
        default_id,
    )
    return Tensor(statement, deps)


def _aggregation(agg: str, doc: str):
    def build(expr: AccessExpr, out=(), shape=(), where=(), default: Tensor | None = None) -> Tensor:
        return _contraction(agg, expr, out, shape, where, default)

    build.__doc__ = doc
    return build


sum = _aggregation("+", "``O[out : shape] = +(expr), where... [default T]``")  # noqa: A001
prod = _aggregation("*", "The product aggregation ``*``.")
max = _aggregation(">", "The max aggregation ``>``.")  # noqa: A001
min = _aggregation("<", "The min aggregation ``<``.")  # noqa: A001
assign = _aggregation("=", "The assign aggregation ``=`` (each cell written at most once).")


# -- special operations ----------------------------------------------------------------------------------


def reshape(x: Tensor, *sizes) -> Tensor:
    return Tensor(Special("_", "reshape", (x.id,), tuple(_as_size(s) for s in sizes)), [x])


def shape(x: Tensor) -> Tensor:
    return Tensor(Special("_", "shape", (x.id,)), [x])


def index(x: Tensor, axis: int) -> Tensor:
    return Tensor(Special("_", "index", (x.id,), axis=int(axis)), [x])


def gather(x: Tensor, indices_: Tensor) -> Tensor:
    return Tensor(Special("_", "gather", (x.id, indices_.id)), [x, indices_])


def scatter(x: Tensor, indices_: Tensor, updates: Tensor) -> Tensor:
    return Tensor(Special("_", "scatter", (x.id, indices_.id, updates.id)), [x, indices_, updates])


def prng(state: Tensor, *sizes) -> Tensor:
    return Tensor(Special("_", "prng", (state.id,), tuple(_as_size(s) for s in sizes)), [state])


# -- building a program -----------------------------------------------------------------------------------


def program(inputs: Sequence[Tensor], outputs: Union[Sequence[Tensor], Mapping[str, Tensor]]) -> Program:
    """Collect the statements the outputs need, name every tensor, and check the program.

    ``outputs`` is a list of tensors or a mapping from output names to tensors.
    """
    if isinstance(outputs, Mapping):
        named_outputs = list(outputs.items())
    else:
        named_outputs = [(None, t) for t in outputs]
    names: dict[str, str] = {}
    taken: set[str] = set()
    for tensor in inputs:
        if tensor.statement is not None or tensor.name is None:
            raise TileSyntaxError("program inputs must come from tile.input(...)")
        if tensor.name in taken:
            raise TileNameError(f"input '{tensor.name}' appears twice")
        names[tensor.id] = tensor.name
        taken.add(tensor.name)
    for name, tensor in named_outputs:
        if name is not None and tensor.id not in names:
            if name in taken or not name[:1].isupper():
                raise TileNameError(f"output name '{name}' is taken or not upper-case")
            names[tensor.id] = name
            taken.add(name)
    ordered = _inline_elementwise(_topological(t for _, t in named_outputs), names)
    input_ids = {t.id for t in inputs}
    counter = itertools.count(1)
    statements = []
    for tensor in ordered:
        if tensor.statement is None:
            if tensor.id not in input_ids:
                raise TileNameError(
                    f"tensor '{tensor.name}' is used but is not among the program's inputs"
                )
            continue
        if tensor.id not in names:
            name = f"T{next(counter)}"
            while name in taken:
                name = f"T{next(counter)}"
            names[tensor.id] = name
            taken.add(name)
        statements.append(tensor.statement)
    renamed = tuple(rename_statement(s, names) for s in statements)
    header = tuple(Input(t.name, t.dims) for t in inputs)
    result = Program(header, tuple(names[t.id] for _, t in named_outputs), renamed)
    validate(result)
    return result


def inline(program: Program, inputs: Sequence[Tensor]) -> list[Tensor]:
    """Embed a whole program in the graph under construction: its inputs are ``inputs``; the
    result is one tensor per program output. This is how a gradient program (itself Tile)
    joins the forward graph, so forward, backward and update compile as one program.

        grads = tile.inline(gradient_program, [X, W, D_Loss])
    """
    if len(inputs) != len(program.inputs):
        raise TileSyntaxError(
            f"the program takes {len(program.inputs)} inputs but {len(inputs)} were given")
    by_name: dict[str, Tensor] = {inp.name: t for inp, t in zip(program.inputs, inputs)}
    dims: dict[str, int] = {}
    for inp, tensor in zip(program.inputs, inputs):
        for dim, size in zip(inp.dims or (), tensor.dims or ()):
            if isinstance(dim, str) and isinstance(size, int):
                dims[dim] = size
    for statement in program.statements:
        names = {name: by_name[name].id for name in statement.inputs()}
        renamed = _bind_dims(rename_statement(statement, names), dims)
        by_name[statement.out] = Tensor(renamed, [by_name[n] for n in statement.inputs()])
    return [by_name[name] for name in program.outputs]


def _bind_dims(statement, dims: dict[str, int]):
    """Replace header dimension names by the sizes of the tensors given for them."""
    if not dims:
        return statement
    if isinstance(statement, Contraction):
        return replace(
            statement,
            index=tuple(p.substitute(dims) for p in statement.index),
            shape=tuple(_size_value(s, dims) for s in statement.shape),
            operands=tuple(replace(a, index=tuple(p.substitute(dims) for p in a.index))
                           for a in statement.operands),
            constraints=tuple(replace(k, poly=k.poly.substitute(dims),
                                      bound=_size_value(k.bound, dims))
                              for k in statement.constraints),
        )
    if isinstance(statement, Special) and statement.sizes:
        return replace(statement, sizes=tuple(_size_value(s, dims) for s in statement.sizes))
    if isinstance(statement, Elementwise):
        return replace(statement, expr=_bind_expr_dims(statement.expr, dims))
    return statement


def _size_value(size: Size, dims: dict[str, int]) -> Size:
    return Size.const(size.evaluate(dims)) if size.dims() <= dims.keys() else size


def _bind_expr_dims(expr, dims: dict[str, int]):
    if isinstance(expr, ir.DimValue) and expr.name in dims:
        return ir.Const(dims[expr.name])
    if isinstance(expr, (ir.Unary, ir.Cast)):
        return replace(expr, operand=_bind_expr_dims(expr.operand, dims))
    if isinstance(expr, ir.Binary):
        return replace(expr, left=_bind_expr_dims(expr.left, dims),
                       right=_bind_expr_dims(expr.right, dims))
    if isinstance(expr, ir.Select):
        return replace(expr, cond=_bind_expr_dims(expr.cond, dims),
                       if_true=_bind_expr_dims(expr.if_true, dims),
                       if_false=_bind_expr_dims(expr.if_false, dims))
    if isinstance(expr, ir.Call):
        return replace(expr, args=tuple(_bind_expr_dims(a, dims) for a in expr.args))
    return expr


def _inline_elementwise(ordered: list[Tensor], names: dict[str, str]) -> list[Tensor]:
    """Fold an unnamed elementwise result into its consumer when that is its only use, so
    ``relu(X * 2.0 + 1.0)`` is one statement, as it would be in text."""
    uses: dict[str, int] = {}
    for tensor in ordered:
        for dep in {d.id: d for d in tensor.deps}.values():
            uses[dep.id] = uses.get(dep.id, 0) + 1
    by_id = {t.id: t for t in ordered}
    kept: list[Tensor] = []
    inlined: set[str] = set()  # producers folded into their reader (a set: a step has ~10^3)
    for tensor in ordered:
        statement = tensor.statement
        if isinstance(statement, Elementwise):
            expr, deps = statement.expr, []
            for dep in {d.id: d for d in tensor.deps}.values():  # a value read twice inlines once
                producer = by_id[dep.id]
                if (isinstance(producer.statement, Elementwise) and uses[dep.id] == 1
                        and dep.id not in names):
                    expr = substitute_expr(expr, dep.id, producer.statement.expr)
                    deps.extend(producer.deps)
                    inlined.add(producer.id)
                else:
                    deps.append(dep)
            tensor.statement = replace(statement, expr=expr)
            tensor.deps = tuple(deps)
        kept.append(tensor)
    return [tensor for tensor in kept if tensor.id not in inlined]


def _topological(roots: Iterable[Tensor]) -> list[Tensor]:
    order: list[Tensor] = []
    seen: set[str] = set()
    stack = [(t, False) for t in roots]
    while stack:
        tensor, expanded = stack.pop()
        if expanded:
            order.append(tensor)
            continue
        if tensor.id in seen:
            continue
        seen.add(tensor.id)
        stack.append((tensor, True))
        for dep in reversed(tensor.deps):
            if dep.id not in seen:
                stack.append((dep, False))
    return order


# The elementwise functions of the spec, as tile.exp(X), tile.max(X, Y) is the aggregation, so
# the two-argument elementwise max and min are tile.maximum and tile.minimum.
exp, log, sqrt, rsqrt, abs, sign, floor, ceil, round = (  # noqa: A001
    _function(f) for f in "exp log sqrt rsqrt abs sign floor ceil round".split()
)
sin, cos, tan, tanh, sinh, cosh, asin, acos, atan, erf, erfc, sigmoid, relu = (
    _function(f) for f in "sin cos tan tanh sinh cosh asin acos atan erf erfc sigmoid relu".split()
)
pow = _function("pow")  # noqa: A001
stop_gradient = _function("stop_gradient")
stop_gradient.__doc__ = """``X`` itself, whose gradient is taken to be zero (JAX's
``stop_gradient``, PyTorch's ``detach`` inside a graph): ``O = stop_gradient(X) * X`` has
``dO/dX = X``. An embedding's padding row is kept out of its gradient this way."""
maximum = _function("max")
minimum = _function("min")
