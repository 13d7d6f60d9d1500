# Operand expressions as llvm-mc reads them on an ELF target: numbers
# (decimal, 0x hex, 0b binary, a leading 0 for octal), half-precision
# literals (`1.0h`, `-2.0h`, `infh`: Graphcore's parser, ColossusAsmParser
# ParseFloat16; a minus right before one flips its sign bit), symbols
# (labels, `.set` names, `$names` that are no register, `1f`/`1b` local
# labels, `.` for here) and the operators of the GNU assembler with its
# precedence, which llvm-mc follows: `* / % << >>` bind tightest, then
# `| ^ & !`, then `+ -`, then the comparisons, then `&&`, then `||`.
# Arithmetic is on 64-bit two's complement integers, as llvm-mc's.
from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass


class ExpressionProblem(ValueError):
    """An expression that cannot be read or evaluated (one line)."""


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed expression: ``op`` is "num", "sym", "dot", a unary
    operator ("neg", "not", "lnot", "pos") or a binary one; ``args`` its
    operands (an int for "num", a name for "sym")."""

    op: str
    args: tuple[object, ...] = ()

    def symbols(self) -> set[str]:
        """The symbol names it refers to."""
        if self.op == "sym":
            return {str(self.args[0])}
        out: set[str] = set()
        for a in self.args:
            if isinstance(a, Expr):
                out |= a.symbols()
        return out

    @property
    def uses_here(self) -> bool:
        return self.op == "dot" or any(isinstance(a, Expr) and a.uses_here for a in self.args)


_TOKEN = re.compile(r"""\s*(?:
    (?P<real>(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?)(?P<suffix>[A-Za-z_]\w*)?)
  | (?P<local>\d+[fb])(?![\w.$])
  | (?P<int>0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)(?![\w.$])
  | (?P<name>[A-Za-z_.$][\w.$@]*)
  | (?P<op>\|\||&&|<<|>>|==|!=|<>|<=|>=|[-+*/%&|^~!<>()])
)""", re.VERBOSE)
_BINARY = {
    "||": 1, "&&": 2, "==": 3, "!=": 3, "<>": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
    "+": 4, "-": 4, "|": 5, "^": 5, "&": 5, "!": 5, "*": 6, "/": 6, "%": 6, "<<": 6, ">>": 6,
}
_UNARY = {"-": "neg", "~": "not", "!": "lnot", "+": "pos"}
MASK64 = (1 << 64) - 1


def half_bits(text: str, negative: bool = False) -> int:
    """The IEEE binary16 bits of a literal written before its `h` (``inf``
    for infinity), rounded to nearest even; ExpressionProblem if it does
    not fit a half."""
    value = math.inf if text == "inf" else float(text)
    try:
        bits = int.from_bytes(struct.pack("<e", -value if negative else value), "little")
    except (OverflowError, struct.error):
        raise ExpressionProblem(f"{text}h does not fit a half-precision float") from None
    return bits


def _lex(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    at = 0
    text = text.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        if not m or m.end() == at:
            raise ExpressionProblem(f"unexpected {text[at:].strip()!r} in {text.strip()!r}")
        at = m.end()
        kind = m.lastgroup if m.lastgroup != "suffix" else "real"
        if m.group("real") is not None:
            if m.group("suffix") != "h":
                raise ExpressionProblem(f"missing h suffix from float16 operand {m.group('real')}")
            tokens.append(("half", m.group("real")[:-1]))
        elif kind == "name" and m.group("name") == "infh":
            tokens.append(("half", "inf"))
        else:
            assert kind is not None
            tokens.append((kind, m.group(kind)))
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], text: str) -> None:
        self.tokens, self.at, self.text = tokens, 0, text

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise ExpressionProblem(f"{self.text.strip()!r} ends too soon")
        self.at += 1
        return token

    def binary(self, least: int) -> Expr:
        left = self.unary()
        while True:
            token = self.peek()
            if token is None or token[0] != "op" or _BINARY.get(token[1], 0) < least:
                return left
            self.at += 1
            right = self.binary(_BINARY[token[1]] + 1)
            left = Expr(token[1], (left, right))

    def unary(self) -> Expr:
        kind, text = self.take()
        if kind == "op" and text in _UNARY:
            following = self.peek()
            if text == "-" and following is not None and following[0] == "half":
                self.at += 1
                return Expr("num", (half_bits(following[1], negative=True),))
            return Expr(_UNARY[text], (self.unary(),))
        if kind == "op" and text == "(":
            inner = self.binary(1)
            if self.take() != ("op", ")"):
                raise ExpressionProblem(f"unbalanced parentheses in {self.text.strip()!r}")
            return inner
        if kind == "int":
            return Expr("num", (_integer(text),))
        if kind == "half":
            return Expr("num", (half_bits(text),))
        if kind == "local":
            return Expr("sym", (text,))
        if kind == "name":
            return Expr("dot") if text == "." else Expr("sym", (text,))
        raise ExpressionProblem(f"unexpected {text!r} in {self.text.strip()!r}")


def _integer(text: str) -> int:
    if len(text) > 1 and text[0] == "0" and text[1].isdigit():
        try:
            return int(text, 8)
        except ValueError:
            raise ExpressionProblem(f"{text} is not an octal number") from None
    return int(text, 0)


def parse(text: str) -> Expr:
    """An expression from its text; ExpressionProblem if it is none."""
    if not text.strip():
        raise ExpressionProblem("an empty expression")
    parser = _Parser(_lex(text), text)
    expr = parser.binary(1)
    if parser.peek() is not None:
        raise ExpressionProblem(f"unexpected {parser.peek()[1]!r} in {text.strip()!r}")  # type: ignore[index]
    return expr


def _signed(value: int) -> int:
    value &= MASK64
    return value - (1 << 64) if value >> 63 else value


def _divide(a: int, b: int, remainder: bool) -> int:
    if b == 0:
        raise ExpressionProblem("division by zero")
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncates toward zero, as C does
    return a - q * b if remainder else q


_OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: _divide(a, b, False), "%": lambda a, b: _divide(a, b, True),
    "<<": lambda a, b: a << (b & 63), ">>": lambda a, b: a >> (b & 63),
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "!": lambda a, b: a | ~b,
    "==": lambda a, b: -int(a == b), "!=": lambda a, b: -int(a != b), "<>": lambda a, b: -int(a != b),
    "<": lambda a, b: -int(a < b), "<=": lambda a, b: -int(a <= b),
    ">": lambda a, b: -int(a > b), ">=": lambda a, b: -int(a >= b),
    "&&": lambda a, b: int(bool(a) and bool(b)), "||": lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(expr: Expr, symbol: Callable[[str], int], here: int | None = None) -> int:
    """The value of ``expr``: ``symbol(name)`` gives a symbol's (KeyError
    when it has none), ``here`` the value of `.` (None: `.` has none)."""
    op, args = expr.op, expr.args
    if op == "num":
        return _signed(int(args[0]))  # type: ignore[call-overload]
    if op == "sym":
        return _signed(symbol(str(args[0])))
    if op == "dot":
        if here is None:
            raise KeyError(".")
        return here
    values = [evaluate(a, symbol, here) for a in args]  # type: ignore[arg-type]
    if op == "neg":
        return _signed(-values[0])
    if op == "not":
        return _signed(~values[0])
    if op == "lnot":
        return int(not values[0])
    if op == "pos":
        return values[0]
    return _signed(_OPERATIONS[op](values[0], values[1]))
