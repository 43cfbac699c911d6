"""Tile text to tokens, each carrying its line and column for error messages."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import SourceLocation, TileSyntaxError

# Longest operators first so that "==" is not read as "=" "=".
_OPERATORS = [
    "->", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
    "+", "-", "*", "/", "%", "<", ">", "=", "!", "~", "&", "|", "^", "?", ":",
    "(", ")", "[", "]", "{", "}", ",", ";",
]
_TOKEN = re.compile(
    r"(?P<space>[ \t\r\n]+)"
    r"|(?P<comment>//[^\n]*|#[^\n]*|/\*.*?\*/)"
    r"|(?P<number>(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>" + "|".join(re.escape(op) for op in _OPERATORS) + ")",
    re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    kind: str  # "number", "name", "op", "end"
    text: str
    loc: SourceLocation


def tokenize(source: str) -> list[Token]:
    """Split Tile text into tokens; raise :class:`TileSyntaxError` at the first bad character."""
    lines = source.split("\n")
    line_starts = [0]
    for line in lines[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)

    def location(offset: int) -> SourceLocation:
        line_no = _line_of(line_starts, offset)
        return SourceLocation(line_no + 1, offset - line_starts[line_no] + 1, lines[line_no])

    tokens: list[Token] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            if source.startswith("/*", position):
                raise TileSyntaxError("unterminated comment '/*'", location(position))
            raise TileSyntaxError(
                f"unexpected character {source[position]!r}", location(position)
            )
        kind = match.lastgroup
        if kind not in ("space", "comment"):
            tokens.append(Token(kind, match.group(), location(position)))
        position = match.end()
    tokens.append(Token("end", "", location(len(source))))
    return tokens


def _line_of(line_starts: list[int], offset: int) -> int:
    low, high = 0, len(line_starts) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if line_starts[mid] <= offset:
            low = mid
        else:
            high = mid - 1
    return low
