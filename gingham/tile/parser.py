"""Tile text to a :class:`~gingham.tile.ir.Program` (recursive descent, one token of lookahead).

    >>> program = parse('''
    ... function (A[M, K], B[K, N]) -> (C) {
    ...     C[i, j : M, N] = +(A[i, k] * B[k, j]);
    ... }''')
    >>> program.outputs
    ('C',)

Every error names the line and column and shows the offending text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Union

from ..errors import (
    SourceLocation,
    TileAffineError,
    TileIndexError,
    TileNameError,
    TileSyntaxError,
)
from .ir import (
    AGGREGATIONS,
    BINARY_FUNCTIONS,
    CASTS,
    SPECIAL_OPS,
    UNARY_FUNCTIONS,
    Access,
    Binary,
    Call,
    Cast,
    Const,
    Constraint,
    Contraction,
    DimValue,
    Elementwise,
    Expr,
    Input,
    Poly,
    Program,
    Ref,
    Select,
    Size,
    Special,
    Statement,
    Unary,
)
from .lexer import Token, tokenize
from .validate import validate

# Binary operators of elementwise expressions by C precedence, loosest first.
_BINARY_LEVELS = [
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="),
    ("<<", ">>"), ("+", "-"), ("*", "/", "%"),
]


def parse(source: str) -> Program:
    """Parse and validate Tile text; raise a :class:`~gingham.TileError` subclass if it is wrong."""
    program = _Parser(source).program()
    validate(program)
    return program


# Index arithmetic is parsed to a small tree first, then read as a Poly (indices) or a Size.
@dataclass(frozen=True)
class _Arith:
    op: str  # "num", "name", "neg", "+", "-", "*", "/"
    loc: SourceLocation
    value: int = 0
    name: str = ""
    args: tuple["_Arith", ...] = ()


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.position = 0
        self.dims: set[str] = set()
        self.hoisted: list[Special] = []  # special operations met inside expressions

    # -- token helpers -------------------------------------------------------------------------
    @property
    def token(self) -> Token:
        return self.tokens[self.position]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.position + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.token
        self.position += 1
        return token

    def at(self, *texts: str) -> bool:
        return self.token.kind in ("op", "name") and self.token.text in texts

    def accept(self, text: str) -> Token | None:
        if self.at(text):
            return self.advance()
        return None

    def expect(self, text: str, context: str = "") -> Token:
        if self.at(text):
            return self.advance()
        where = f" {context}" if context else ""
        raise self.error(f"expected '{text}'{where} but found {self.describe(self.token)}")

    def expect_name(self, what: str) -> Token:
        if self.token.kind == "name":
            return self.advance()
        raise self.error(f"expected {what} but found {self.describe(self.token)}")

    @staticmethod
    def describe(token: Token) -> str:
        return "the end of the program" if token.kind == "end" else f"'{token.text}'"

    def error(self, message: str, token: Token | None = None) -> TileSyntaxError:
        return TileSyntaxError(message, (token or self.token).loc)

    # -- program -------------------------------------------------------------------------------
    def program(self) -> Program:
        self.expect("function", "at the start of a program")
        self.expect("(", "after 'function'")
        inputs: list[Input] = []
        if not self.at(")"):
            inputs.append(self.header_input())
            while self.accept(","):
                inputs.append(self.header_input())
        self.expect(")", "to close the input list")
        self.expect("->", "between the inputs and the outputs")
        self.expect("(", "before the output names")
        outputs: list[str] = []
        if not self.at(")"):
            outputs.append(self.expect_name("an output tensor name").text)
            while self.accept(","):
                outputs.append(self.expect_name("an output tensor name").text)
        self.expect(")", "to close the output list")
        self.expect("{", "to open the function body")
        statements: list[Statement] = []
        while not self.at("}"):
            if self.token.kind == "end":
                raise self.error("expected '}' to close the function body")
            statement = self.statement()
            statements.extend(self.hoisted)
            self.hoisted.clear()
            statements.append(statement)
        self.expect("}")
        if self.token.kind != "end":
            raise self.error(f"unexpected {self.describe(self.token)} after the function body")
        return Program(tuple(inputs), tuple(outputs), tuple(statements), self.source)

    def header_input(self) -> Input:
        name = self.expect_name("an input tensor name")
        if not self.accept("["):
            return Input(name.text, None, name.loc)
        dims: list[Union[str, int]] = []
        if not self.at("]"):
            dims.append(self.header_dim())
            while self.accept(","):
                dims.append(self.header_dim())
        self.expect("]", f"to close the dimensions of '{name.text}'")
        return Input(name.text, tuple(dims), name.loc)

    def header_dim(self) -> Union[str, int]:
        token = self.advance()
        if token.kind == "number" and token.text.isdigit():
            return int(token.text)
        if token.kind == "name":
            if not token.text[0].isupper():
                raise self.error(
                    f"dimension names start with an upper-case letter; '{token.text}' does not",
                    token,
                )
            self.dims.add(token.text)
            return token.text
        raise self.error(f"expected a dimension name or size but found {self.describe(token)}", token)

    # -- statements ----------------------------------------------------------------------------
    def statement(self) -> Statement:
        name = self.expect_name("a statement (an output tensor name)")
        if not name.text[0].isupper():
            raise self.error(
                f"a statement must assign a tensor (upper-case name); '{name.text}' is an index "
                "variable or function",
                name,
            )
        if self.at("["):
            statement: Statement = self.contraction(name)
        else:
            self.expect("=", f"after '{name.text}'")
            statement = self.elementwise_or_special(name)
        self.expect(";", "at the end of the statement")
        return statement

    def contraction(self, name: Token) -> Contraction:
        self.expect("[")
        index: list[Poly] = []
        shape: list[Size] = []
        if not self.at("]"):
            index.append(self.poly())
            while self.accept(","):
                index.append(self.poly())
            self.expect(":", f"and the output sizes of '{name.text}' (as in {name.text}[i : N])")
            shape.append(self.size())
            while self.accept(","):
                shape.append(self.size())
            if len(shape) != len(index):
                raise TileSyntaxError(
                    f"'{name.text}' has {len(index)} output indices but {len(shape)} sizes",
                    name.loc,
                )
        self.expect("]", f"to close the output index of '{name.text}'")
        self.expect("=", f"after '{name.text}[...]'")
        agg_token = self.token
        if not (agg_token.kind == "op" and agg_token.text in AGGREGATIONS):
            raise self.error(
                "expected an aggregation (+, *, >, <, =) before '(' in a contraction, found "
                f"{self.describe(agg_token)}; an elementwise statement has no index brackets"
            )
        self.advance()
        self.expect("(", f"after the aggregation '{agg_token.text}'")
        combo, operands = self.combination()
        self.expect(")", "to close the aggregation")
        constraints: list[Constraint] = []
        while self.accept(","):
            constraints.append(self.constraint())
        default = None
        if self.accept("default"):
            default = self.expect_name("a tensor name after 'default'").text
        return Contraction(
            name.text, tuple(index), tuple(shape), agg_token.text, combo, tuple(operands),
            tuple(constraints), default, name.loc,
        )

    def combination(self) -> tuple[str, list[Access]]:
        first = self.access()
        if self.at("*", "+"):
            combo = self.advance().text
            return combo, [first, self.access()]
        if self.accept("=="):
            second = self.access()
            if self.accept("?"):
                return "?", [first, second, self.access()]
            return "==", [first, second]
        if not self.at(")"):
            raise self.error(
                "a contraction combines at most two accesses with *, + or ==, or uses the form "
                f"A[...] == B[...] ? C[...]; found {self.describe(self.token)}"
            )
        return "none", [first]

    def access(self) -> Access:
        name = self.expect_name("a tensor access such as A[i, k]")
        if not name.text[0].isupper():
            raise self.error(f"'{name.text}' is not a tensor (tensors start upper-case)", name)
        self.expect("[", f"after '{name.text}': a contraction reads tensors by index")
        index: list[Poly] = []
        if not self.at("]"):
            index.append(self.poly())
            while self.accept(","):
                index.append(self.poly())
        self.expect("]", f"to close the index of '{name.text}'")
        return Access(name.text, tuple(index), name.loc)

    def constraint(self) -> Constraint:
        start = self.token
        poly = self.poly()
        self.expect("<", "in a constraint (constraints read 'poly < bound')")
        return Constraint(poly, self.size(), start.loc)

    def elementwise_or_special(self, name: Token) -> Statement:
        expr = self.expr()
        # A special operation that is the whole right-hand side was hoisted last while its
        # arguments were parsed: it becomes this statement itself rather than a temporary.
        if isinstance(expr, Ref) and self.hoisted and self.hoisted[-1].out == expr.name:
            return replace(self.hoisted.pop(), out=name.text, loc=name.loc)
        return Elementwise(name.text, expr, name.loc)

    # -- elementwise expressions ---------------------------------------------------------------
    def expr(self) -> Expr:
        cond = self.binary(0)
        if self.at("?"):
            question = self.advance()
            if_true = self.expr()
            self.expect(":", "in a conditional 'C ? T : F'")
            if_false = self.expr()
            return Select(cond, if_true, if_false, question.loc)
        return cond

    def binary(self, level: int) -> Expr:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.token.kind == "op" and self.token.text in _BINARY_LEVELS[level]:
            op = self.advance()
            right = self.binary(level + 1)
            left = Binary(op.text, left, right, op.loc)
        return left

    def unary(self) -> Expr:
        if self.at("-", "!", "~", "+"):
            op = self.advance()
            operand = self.unary()
            if op.text == "+":
                return operand
            if op.text == "-" and isinstance(operand, Const) and not isinstance(operand.value, bool):
                return Const(-operand.value, op.loc)
            return Unary(op.text, operand, op.loc)
        return self.primary()

    def primary(self) -> Expr:
        token = self.token
        if token.kind == "number":
            self.advance()
            return Const(_number(token.text), token.loc)
        if self.accept("("):
            inner = self.expr()
            self.expect(")", "to close '('")
            return inner
        if token.kind == "name":
            self.advance()
            if self.at("("):
                return self.call(token)
            if self.at("["):
                raise self.error(
                    f"'{token.text}[' indexes a tensor in an elementwise statement; index "
                    "expressions belong in contractions (O[i : N] = +(...))"
                )
            if token.text in self.dims:
                return DimValue(token.text, token.loc)
            if not token.text[0].isupper():
                raise TileIndexError(
                    f"index variable '{token.text}' in an elementwise statement; elementwise "
                    "statements use whole tensors",
                    token.loc,
                )
            return Ref(token.text, token.loc)
        raise self.error(f"expected an expression but found {self.describe(token)}")

    def call(self, name: Token) -> Expr:
        self.expect("(")
        args: list[Expr] = []
        if not self.at(")"):
            args.append(self.expr())
            while self.accept(","):
                args.append(self.expr())
        self.expect(")", f"to close '{name.text}('")
        fn = name.text
        if fn in CASTS:
            return self.cast(name, args)
        if fn in SPECIAL_OPS:
            return self.hoist_special(name, args)
        if fn in UNARY_FUNCTIONS:
            arity = 1
        elif fn in BINARY_FUNCTIONS:
            arity = 2
        else:
            raise TileNameError(f"unknown function '{fn}'", name.loc)
        if len(args) != arity:
            raise TileSyntaxError(
                f"{fn}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}",
                name.loc,
            )
        return Call(fn, tuple(args), name.loc)

    def hoist_special(self, name: Token, args: list[Expr]) -> Ref:
        """A special operation inside an expression (``X + scatter(X, I, U)``) becomes its own
        statement just before the current one, named after its place in the text."""
        arity = {"reshape": 1, "shape": 1, "index": 1, "gather": 2, "scatter": 3, "prng": 1}
        count = arity[name.text]
        if len(args) < count or (name.text in ("shape", "gather", "scatter")
                                 and len(args) != count):
            raise TileSyntaxError(f"wrong number of arguments to {name.text}()", name.loc)
        tensors = []
        for arg in args[:count]:
            if not isinstance(arg, Ref):
                raise TileSyntaxError(
                    f"argument of {name.text}() must be a tensor name; compute expressions into "
                    "a tensor first",
                    name.loc,
                )
            tensors.append(arg.name)
        out = f"{name.text.capitalize()}_{name.loc.line}_{name.loc.column}"
        rest = args[count:]
        if name.text == "index":
            if len(rest) != 1 or not isinstance(rest[0], Const) or isinstance(rest[0].value, float):
                raise TileSyntaxError("index(X, axis) needs an integer axis", name.loc)
            special = Special(out, "index", tuple(tensors), axis=int(rest[0].value), loc=name.loc)
        else:
            sizes = tuple(self.expr_to_size(a, name) for a in rest)
            special = Special(out, name.text, tuple(tensors), sizes, loc=name.loc)
        self.hoisted.append(special)
        return Ref(out, name.loc)

    def expr_to_size(self, expr: Expr, name: Token) -> Size:
        if isinstance(expr, Const) and isinstance(expr.value, int):
            return Size.const(expr.value)
        if isinstance(expr, DimValue):
            return Size.dim(expr.name)
        if isinstance(expr, Unary) and expr.op == "-":
            return Size("neg", args=(self.expr_to_size(expr.operand, name),))
        if isinstance(expr, Binary) and expr.op in "+-*/":
            return Size(expr.op, args=(self.expr_to_size(expr.left, name),
                                       self.expr_to_size(expr.right, name)))
        raise TileSyntaxError(
            f"sizes of {name.text}() are built from dimensions and integers", name.loc
        )

    def cast(self, name: Token, args: list[Expr]) -> Cast:
        fn = name.text
        if fn == "as_bool":
            if len(args) != 1:
                raise TileSyntaxError("as_bool(X) takes one argument", name.loc)
            return Cast("bool", args[0], name.loc)
        widths = CASTS[fn]
        if len(args) != 2 or not isinstance(args[1], Const) or args[1].value not in widths:
            choices = ", ".join(str(w) for w in widths)
            raise TileSyntaxError(f"{fn}(X, bits) needs bits in {{{choices}}}", name.loc)
        return Cast(widths[args[1].value], args[0], name.loc)

    # -- index arithmetic ----------------------------------------------------------------------
    def poly(self) -> Poly:
        return self.arith_to_poly(self.arith())

    def size(self) -> Size:
        return self.arith_to_size(self.arith())

    def arith(self) -> _Arith:
        left = self.arith_term()
        while self.at("+", "-"):
            op = self.advance()
            left = _Arith(op.text, op.loc, args=(left, self.arith_term()))
        return left

    def arith_term(self) -> _Arith:
        left = self.arith_factor()
        while self.at("*", "/"):
            op = self.advance()
            left = _Arith(op.text, op.loc, args=(left, self.arith_factor()))
        return left

    def arith_factor(self) -> _Arith:
        token = self.token
        if self.accept("-"):
            return _Arith("neg", token.loc, args=(self.arith_factor(),))
        if self.accept("+"):
            return self.arith_factor()
        if self.accept("("):
            inner = self.arith()
            self.expect(")", "to close '('")
            return inner
        if token.kind == "number":
            self.advance()
            if not token.text.isdigit():
                raise self.error(f"index arithmetic uses integers; '{token.text}' is not", token)
            return _Arith("num", token.loc, value=int(token.text))
        if token.kind == "name":
            self.advance()
            return _Arith("name", token.loc, name=token.text)
        raise self.error(f"expected an index expression but found {self.describe(token)}")

    def arith_to_poly(self, node: _Arith) -> Poly:
        if node.op == "num":
            return Poly.constant(node.value)
        if node.op == "name":
            if node.name[0].isupper() and node.name not in self.dims:
                raise TileNameError(
                    f"'{node.name}' in an index is neither an index variable (lower case) nor "
                    "a dimension of the header",
                    node.loc,
                )
            return Poly.var(node.name)
        if node.op == "neg":
            return -self.arith_to_poly(node.args[0])
        left, right = (self.arith_to_poly(a) for a in node.args)
        if node.op == "+":
            return left + right
        if node.op == "-":
            return left - right
        if node.op == "*":
            if left.is_constant():
                return right.scale(left.const)
            if right.is_constant():
                return left.scale(right.const)
            raise TileAffineError(
                f"index expression '{self.snippet(node)}' is not affine: it multiplies "
                f"'{left}' by '{right}'; only integer constants may multiply an index or dimension",
                node.loc,
            )
        if node.op == "/":
            if not right.is_constant() or right.const.denominator != 1 or right.const == 0:
                raise TileAffineError(
                    f"index expression '{self.snippet(node)}' divides by '{right}'; an index may "
                    "only be divided by a non-zero integer constant",
                    node.loc,
                )
            return left.scale(Fraction(1) / right.const)
        raise AssertionError(node.op)

    def arith_to_size(self, node: _Arith) -> Size:
        if node.op == "num":
            return Size.const(node.value)
        if node.op == "name":
            if node.name not in self.dims:
                if node.name[0].isupper():
                    raise TileNameError(
                        f"unknown dimension '{node.name}': sizes are built from the header's "
                        "dimensions and integers",
                        node.loc,
                    )
                raise TileIndexError(
                    f"index variable '{node.name}' in a size; sizes are built from the "
                    "header's dimensions and integers",
                    node.loc,
                )
            return Size.dim(node.name)
        if node.op == "neg":
            return Size("neg", args=(self.arith_to_size(node.args[0]),))
        return Size(node.op, args=tuple(self.arith_to_size(a) for a in node.args))

    def snippet(self, node: _Arith) -> str:
        return _arith_text(node)


def _arith_text(node: _Arith) -> str:
    if node.op == "num":
        return str(node.value)
    if node.op == "name":
        return node.name
    if node.op == "neg":
        return f"-{_arith_text(node.args[0])}"
    return f"{_arith_text(node.args[0])} {node.op} {_arith_text(node.args[1])}"


def _number(text: str) -> Union[int, float]:
    if any(ch in text for ch in ".eE"):
        return float(text)
    return int(text)
