"""The program representation shared by the parser, the Python form, the interpreter, the
autodiff and the compiler.

A Tile program is data: index expressions are affine polynomials (:class:`Poly`), sizes are small
expression trees over dimensions (:class:`Size`), and statements are frozen dataclasses. Nothing
downstream re-parses text. For example::

    function (A[M, K], B[K, N]) -> (C) {
        C[i, j : M, N] = +(A[i, k] * B[k, j]);
    }

is ``Program(inputs=(Input("A", ("M", "K")), Input("B", ("K", "N"))), outputs=("C",),
statements=(Contraction(out="C", index=(Poly(i), Poly(j)), shape=(Dim("M"), Dim("N")),
agg="+", combo="*", operands=(Access("A", (i, k)), Access("B", (k, j)))),))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Union

from ..errors import SourceLocation

# --------------------------------------------------------------------------------------------
# Affine index polynomials


@dataclass(frozen=True)
class Poly:
    """An affine polynomial ``sum(coeff * name) + const`` with rational coefficients.

    Names are index variables (lower case) or dimension names (upper case); dimensions are
    replaced by their values when a program is bound to argument shapes (:meth:`substitute`).
    Rational coefficients come from exact division (``x / 2``): an access whose index is not an
    integer is not valid, as in PlaidML.
    """

    terms: tuple[tuple[str, Fraction], ...] = ()
    const: Fraction = Fraction(0)

    @staticmethod
    def of(terms: Mapping[str, Fraction | int], const: Fraction | int = 0) -> "Poly":
        # Fraction(f) of a Fraction builds a new one: the compiler makes ~10^5 of these per
        # training step, so coefficients that already are Fractions are kept as they are.
        cleaned = tuple(sorted((n, c if type(c) is Fraction else Fraction(c))
                               for n, c in terms.items() if c != 0))
        return Poly(cleaned, const if type(const) is Fraction else Fraction(const))

    @staticmethod
    def var(name: str) -> "Poly":
        return Poly(((name, Fraction(1)),), Fraction(0))

    @staticmethod
    def constant(value: Fraction | int) -> "Poly":
        return Poly((), Fraction(value))

    @property
    def coeffs(self) -> dict[str, Fraction]:
        return dict(self.terms)

    def names(self) -> set[str]:
        return {n for n, _ in self.terms}

    def __add__(self, other: "Poly | int") -> "Poly":
        other = _as_poly(other)
        merged = self.coeffs
        for name, c in other.terms:
            merged[name] = merged.get(name, Fraction(0)) + c
        return Poly.of(merged, self.const + other.const)

    def __radd__(self, other: int) -> "Poly":
        return self + other

    def __neg__(self) -> "Poly":
        return self.scale(-1)

    def __sub__(self, other: "Poly | int") -> "Poly":
        return self + (-_as_poly(other))

    def __rsub__(self, other: int) -> "Poly":
        return _as_poly(other) - self

    def scale(self, factor: Fraction | int) -> "Poly":
        factor = Fraction(factor)
        return Poly.of({n: c * factor for n, c in self.terms}, self.const * factor)

    def is_constant(self) -> bool:
        return not self.terms

    def substitute(self, values: Mapping[str, int]) -> "Poly":
        """Replace the names found in ``values`` (dimensions) by their integer values."""
        kept: dict[str, Fraction] = {}
        const = self.const
        for name, c in self.terms:
            if name in values:
                const += c * values[name]
            else:
                kept[name] = c
        return Poly.of(kept, const)

    def evaluate(self, values: Mapping[str, int]) -> Fraction:
        return self.const + sum((c * values[n] for n, c in self.terms), Fraction(0))

    def __str__(self) -> str:
        parts: list[str] = []
        for name, c in self.terms:
            parts.append(_term_text(name, c, first=not parts))
        if self.const != 0 or not parts:
            if not parts:
                parts.append(_fraction_text(self.const))
            else:
                sign = "-" if self.const < 0 else "+"
                parts.append(f" {sign} {_fraction_text(abs(self.const))}")
        return "".join(parts)


def _as_poly(value: "Poly | int") -> Poly:
    return value if isinstance(value, Poly) else Poly.constant(value)


def _fraction_text(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator}"


def _term_text(name: str, c: Fraction, first: bool) -> str:
    magnitude = abs(c)
    if magnitude == 1:
        body = name
    elif magnitude.denominator == 1:
        body = f"{magnitude.numerator}*{name}"
    elif magnitude.numerator == 1:
        body = f"{name}/{magnitude.denominator}"
    else:
        body = f"{magnitude.numerator}*{name}/{magnitude.denominator}"
    if first:
        return f"-{body}" if c < 0 else body
    return f" - {body}" if c < 0 else f" + {body}"


# --------------------------------------------------------------------------------------------
# Sizes: integer expressions over dimensions (output sizes, constraint bounds, reshape sizes)


@dataclass(frozen=True)
class Size:
    """An integer expression over dimension names: ``N``, ``(N + 1) / 2``, ``3``.

    ``op`` is ``"const"`` (``value`` holds it), ``"dim"`` (``name``), or one of
    ``+ - * /`` with two ``args`` (``/`` rounds down), or ``"neg"`` with one.
    """

    op: str
    value: int = 0
    name: str = ""
    args: tuple["Size", ...] = ()

    @staticmethod
    def const(value: int) -> "Size":
        return Size("const", value=int(value))

    @staticmethod
    def dim(name: str) -> "Size":
        return Size("dim", name=name)

    def dims(self) -> set[str]:
        if self.op == "dim":
            return {self.name}
        found: set[str] = set()
        for arg in self.args:
            found |= arg.dims()
        return found

    def evaluate(self, dims: Mapping[str, int]) -> int:
        if self.op == "const":
            return self.value
        if self.op == "dim":
            return dims[self.name]
        if self.op == "neg":
            return -self.args[0].evaluate(dims)
        a, b = (arg.evaluate(dims) for arg in self.args)
        if self.op == "+":
            return a + b
        if self.op == "-":
            return a - b
        if self.op == "*":
            return a * b
        if self.op == "/":
            if b == 0:
                raise ZeroDivisionError("division by zero in a size expression")
            return a // b
        raise AssertionError(f"unknown size operator {self.op}")

    def __str__(self) -> str:
        return self._text(0)

    def _text(self, parent_precedence: int) -> str:
        if self.op == "const":
            return str(self.value)
        if self.op == "dim":
            return self.name
        if self.op == "neg":
            return f"-{self.args[0]._text(3)}"
        precedence = 1 if self.op in "+-" else 2
        left = self.args[0]._text(precedence)
        # The right operand of - and / needs parentheses at equal precedence.
        right = self.args[1]._text(precedence + 1)
        text = f"{left} {self.op} {right}"
        return f"({text})" if precedence < parent_precedence else text


# --------------------------------------------------------------------------------------------
# Statements

AGGREGATIONS = {"+": "sum", "*": "prod", ">": "max", "<": "min", "=": "assign"}
COMBINATIONS = ("none", "*", "+", "==", "?")  # "?" is the conditional form A == B ? C


@dataclass(frozen=True)
class Access:
    """A tensor read (or the output write) ``T[p0, p1, ...]`` with affine indices."""

    tensor: str
    index: tuple[Poly, ...]
    loc: SourceLocation | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.tensor}[{', '.join(str(p) for p in self.index)}]"


@dataclass(frozen=True)
class Constraint:
    """``poly < bound``, meaning ``0 <= poly < bound``."""

    poly: Poly
    bound: Size
    loc: SourceLocation | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.poly} < {self.bound}"


@dataclass(frozen=True)
class Contraction:
    """``out[index : shape] = agg(combination of operands), constraints [default T]``.

    ``combo`` is ``"none"`` (one operand), ``"*"``, ``"+"``, ``"=="`` (two operands) or ``"?"``
    (three operands: ``A == B ? C``).
    """

    out: str
    index: tuple[Poly, ...]
    shape: tuple[Size, ...]
    agg: str
    combo: str
    operands: tuple[Access, ...]
    constraints: tuple[Constraint, ...] = ()
    default: str | None = None
    loc: SourceLocation | None = field(default=None, compare=False)

    def index_vars(self) -> list[str]:
        """Index variables in a stable order: output first, then the right-hand side."""
        seen: list[str] = []
        polys = list(self.index)
        for operand in self.operands:
            polys.extend(operand.index)
        polys.extend(c.poly for c in self.constraints)
        for poly in polys:
            for name, _ in poly.terms:
                if name[0].islower() and name not in seen:
                    seen.append(name)
        return seen

    def inputs(self) -> list[str]:
        names = [a.tensor for a in self.operands]
        if self.default is not None:
            names.append(self.default)
        return names


# Elementwise expression trees -----------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """A tensor used as a value."""

    name: str
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Const:
    """A numeric literal (int, float or bool); weakly typed."""

    value: Union[int, float, bool]
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DimValue:
    """A dimension name used as a value (``Y = X / N``); a weakly typed integer."""

    name: str
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Unary:
    op: str  # "-", "!", "~"
    operand: "Expr"
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % < <= > >= == != && || & | ^ << >>
    left: "Expr"
    right: "Expr"
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Select:
    cond: "Expr"
    if_true: "Expr"
    if_false: "Expr"
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Call:
    """A math function (``exp``, ``max``, ...) applied elementwise."""

    fn: str
    args: tuple["Expr", ...]
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cast:
    """``as_float(X, 32)`` and friends: ``dtype`` is the Tile type name."""

    dtype: str
    operand: "Expr"
    loc: SourceLocation | None = field(default=None, compare=False)


Expr = Union[Ref, Const, DimValue, Unary, Binary, Select, Call, Cast]

UNARY_FUNCTIONS = (
    "exp log sqrt rsqrt abs sign floor ceil round sin cos tan tanh sinh cosh asin acos atan "
    "erf erfc sigmoid relu stop_gradient"
).split()
BINARY_FUNCTIONS = ("pow", "min", "max")
FUNCTIONS = tuple(UNARY_FUNCTIONS) + BINARY_FUNCTIONS
CASTS = {
    "as_float": {16: "float16", 32: "float32", 64: "float64"},
    "as_bfloat": {16: "bfloat16"},
    "as_int": {8: "int8", 16: "int16", 32: "int32", 64: "int64"},
    "as_uint": {8: "uint8", 16: "uint16", 32: "uint32", 64: "uint64"},
    "as_bool": {},
}


def expr_refs(expr: Expr) -> list[str]:
    """Tensor names an expression reads, in order of first appearance."""
    found: list[str] = []

    def visit(node: Expr) -> None:
        if isinstance(node, Ref):
            if node.name not in found:
                found.append(node.name)
        elif isinstance(node, Unary):
            visit(node.operand)
        elif isinstance(node, Cast):
            visit(node.operand)
        elif isinstance(node, Binary):
            visit(node.left)
            visit(node.right)
        elif isinstance(node, Select):
            visit(node.cond)
            visit(node.if_true)
            visit(node.if_false)
        elif isinstance(node, Call):
            for arg in node.args:
                visit(arg)

    visit(expr)
    return found


@dataclass(frozen=True)
class Elementwise:
    """``out = expr;`` evaluated per element, operands broadcast as NumPy broadcasts."""

    out: str
    expr: Expr
    loc: SourceLocation | None = field(default=None, compare=False)

    def inputs(self) -> list[str]:
        return expr_refs(self.expr)


SPECIAL_OPS = ("reshape", "shape", "index", "gather", "scatter", "prng")


@dataclass(frozen=True)
class Special:
    """A special operation: ``out = op(tensors..., sizes...)``.

    ``tensors`` are the tensor arguments; ``sizes`` the size arguments (reshape and prng) and
    ``axis`` the axis of ``index``.
    """

    out: str
    op: str
    tensors: tuple[str, ...]
    sizes: tuple[Size, ...] = ()
    axis: int = 0
    loc: SourceLocation | None = field(default=None, compare=False)

    def inputs(self) -> list[str]:
        return list(self.tensors)


Statement = Union[Contraction, Elementwise, Special]


@dataclass(frozen=True)
class Input:
    """A header entry: ``A[M, K]`` (dims are names or integer literals) or ``X`` (dims None)."""

    name: str
    dims: tuple[Union[str, int], ...] | None
    loc: SourceLocation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Program:
    """A whole Tile function: header inputs, output names, and SSA statements in order."""

    inputs: tuple[Input, ...]
    outputs: tuple[str, ...]
    statements: tuple[Statement, ...]
    source: str | None = field(default=None, compare=False)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def dim_names(self) -> list[str]:
        names: list[str] = []
        for inp in self.inputs:
            for d in inp.dims or ():
                if isinstance(d, str) and d not in names:
                    names.append(d)
        return names

    def defining(self, name: str) -> Statement | None:
        for statement in self.statements:
            if statement.out == name:
                return statement
        return None

    def __str__(self) -> str:
        from .printer import program_text

        return program_text(self)
