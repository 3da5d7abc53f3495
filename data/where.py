"""A small, safe expression language over a suite's scenarios: which scenarios ``autorater suite tag --where`` tags.

Parsed by hand into a tree of closures; nothing is ever passed to ``eval``. The fields are those of a scenario that a
team slices by: ``category``, ``instruction``, ``scenario_id`` (strings) and ``tags`` (a list of strings).

=====================================  ===============================================================
expression                             true for a scenario when
=====================================  ===============================================================
``category == "go_to"``                the field equals the value (``!=``: differs)
``category in ["go_to", "pick_up"]``   the field is one of the values
``instruction contains "red"``         the value occurs in the field (case-insensitive)
``scenario_id startswith "s00"``       the field starts with the value
``tags has "version:v2"``              the value is one of the tags (``"version:v2" in tags`` too)
``A and B``, ``A or B``, ``not A``     as in Python (``not`` binds tightest, then ``and``, then ``or``)
``( ... )``                            grouping
=====================================  ===============================================================

Values are quoted (``"..."`` or ``'...'``, a backslash escapes the quote) or bare words of letters, digits and
``_ : . - /`` (``category == go_to``). A broken expression is a :class:`WhereError` that points at the place; so is
one longer than ``MAX_LENGTH`` characters or nested (parentheses, ``not``) deeper than ``MAX_DEPTH``.

Example:
    >>> match = parse_where('tags has "version:v2" and not category in [go_to, open]')
    >>> match({"category": "pick_up", "tags": ["version:v2"], "instruction": "pick up the key", "scenario_id": "s1"})
    True
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

FIELDS = ("category", "instruction", "scenario_id", "tags")
STRING_FIELDS = ("category", "instruction", "scenario_id")
OPERATORS = ("==", "!=", "in", "contains", "startswith", "has")
KEYWORDS = ("and", "or", "not", "in", "contains", "startswith", "has")
MAX_LENGTH = 2000
MAX_DEPTH = 32  # parentheses and ``not`` nested deeper than this are refused (a parser that recursed on them crashed)

Predicate = Callable[[Mapping[str, Any]], bool]

_TOKEN = re.compile(r"""\s*(?:(?P<op>==|!=|\(|\)|\[|\]|,)|(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|"""
                    r"""(?P<word>[A-Za-z0-9_:./-]+))""")


class WhereError(ValueError):
    """A ``--where`` expression that cannot be read: the message quotes it and points at the place."""

    def __init__(self, expression: str, position: int, message: str):
        self.expression, self.position = expression, position
        start = max(0, min(position - 40, len(expression) - 80))
        more = "..." if start + 80 < len(expression) else ""
        shown = ("..." if start else "") + expression[start:start + 80] + more
        caret = position - start + (3 if start else 0)
        quoted = expression if len(expression) <= 80 else shown
        super().__init__(f"--where {quoted!r}: {message} at column {position + 1}\n  {shown}\n  "
                         f"{' ' * caret}^ (fix: write e.g. category == \"go_to\" and tags has \"version:v2\"; "
                         f"fields {', '.join(FIELDS)}; operators {', '.join(OPERATORS)}; and, or, not, parentheses)")


def _tokens(expression: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) of each token: kind ``op``, ``str`` (unquoted text), ``word`` or ``end``."""
    out, pos = [], 0
    while pos < len(expression):
        if expression[pos:].strip() == "":
            break
        m = _TOKEN.match(expression, pos)
        if m is None or m.end() == pos:
            start = pos + len(expression[pos:]) - len(expression[pos:].lstrip())
            raise WhereError(expression, start, f"unexpected character {expression[start]!r}")
        kind = m.lastgroup
        text = m.group(kind)
        start = m.start(kind)
        if kind == "str":
            text = re.sub(r"\\(.)", r"\1", text[1:-1])
        out.append((kind, text, start))
        pos = m.end()
    out.append(("end", "", len(expression)))
    return out


class _Parser:
    """Recursive descent: ``or_ := and_ ("or" and_)*``, ``and_ := not_ ("and" not_)*``,
    ``not_ := "not" not_ | atom``."""

    def __init__(self, expression: str):
        self.expression = expression
        self.tokens = _tokens(expression)
        self.i = 0
        self.depth = 0

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"nested more than {MAX_DEPTH} deep (parentheses or not); write it flatter, e.g. A and B and C")

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, str, int]:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def fail(self, message: str, token: tuple[str, str, int] | None = None):
        token = token or self.peek()
        raise WhereError(self.expression, token[2], message)

    def is_word(self, word: str) -> bool:
        kind, text, _ = self.peek()
        return kind == "word" and text == word

    def expect_op(self, op: str) -> None:
        kind, text, _ = self.peek()
        if kind != "op" or text != op:
            self.fail(f"expected {op!r}, found {text or 'the end'!r}")
        self.take()

    def parse(self) -> Predicate:
        predicate = self.or_()
        if self.peek()[0] != "end":
            self.fail(f"unexpected {self.peek()[1]!r} (join conditions with and / or)")
        return predicate

    def joined(self, word: str, part, combine) -> Predicate:
        """``part (word part)*``, the parts' results combined with ``any`` or ``all``."""
        parts = [part()]
        while self.is_word(word):
            self.take()
            parts.append(part())
        return parts[0] if len(parts) == 1 else (lambda s, ps=tuple(parts): combine(p(s) for p in ps))

    def or_(self) -> Predicate:
        return self.joined("or", self.and_, any)

    def and_(self) -> Predicate:
        return self.joined("and", self.not_, all)

    def not_(self) -> Predicate:
        if self.is_word("not"):
            self.take()
            self.deeper()
            inner = self.not_()
            self.depth -= 1
            return lambda s: not inner(s)
        return self.atom()

    def atom(self) -> Predicate:
        kind, text, _ = self.peek()
        if kind == "op" and text == "(":
            self.deeper()
            self.take()
            inner = self.or_()
            self.expect_op(")")
            self.depth -= 1
            return inner
        after = self.tokens[self.i + 1][1] if kind != "end" else ""
        if kind == "word" and text not in FIELDS + KEYWORDS and after in ("==", "!=", "contains", "startswith", "has"):
            self.fail(f"unknown field {text!r} (the fields: {', '.join(FIELDS)})")
        if kind == "str" or (kind == "word" and text not in FIELDS and text not in KEYWORDS):
            value = self.value()  # "v2" in tags
            if not self.is_word("in"):
                self.fail("expected 'in tags' after a value")
            self.take()
            if not self.is_word("tags"):
                self.fail("only 'tags' holds several values: write \"x\" in tags")
            self.take()
            return lambda s: value in _tags(s)
        if kind != "word" or text not in FIELDS:
            self.fail(f"expected a field ({', '.join(FIELDS)}), found {text or 'the end'!r}")
        self.take()
        return self.comparison(text)

    def comparison(self, field: str) -> Predicate:
        kind, op, _ = token = self.take()
        if op not in OPERATORS or kind == "str":
            self.fail(f"expected an operator ({', '.join(OPERATORS)}) after {field}, found {op or 'the end'!r}", token)
        if field == "tags" and op != "has":
            self.fail("tags is a list: write tags has \"NAME\"", token)
        if field != "tags" and op == "has":
            self.fail(f"{field} is one string: use ==, in, contains or startswith", token)
        if op == "in":
            values = frozenset(self.values())
            return lambda s: _text(s, field) in values
        value = self.value()
        if op == "has":
            return lambda s: value in _tags(s)
        if op == "==":
            return lambda s: _text(s, field) == value
        if op == "!=":
            return lambda s: _text(s, field) != value
        if op == "contains":
            folded = value.casefold()
            return lambda s: folded in _text(s, field).casefold()
        return lambda s: _text(s, field).startswith(value)

    def value(self) -> str:
        kind, text, _ = token = self.take()
        if kind == "str" or (kind == "word" and text not in KEYWORDS):
            return text
        self.fail(f"expected a value (quoted, or a bare word), found {text or 'the end'!r}", token)

    def values(self) -> list[str]:
        self.expect_op("[") if self.peek()[1] == "[" else self.expect_op("(")
        closing = "]" if self.tokens[self.i - 1][1] == "[" else ")"
        out = [self.value()]
        while self.peek()[1] == ",":
            self.take()
            out.append(self.value())
        self.expect_op(closing)
        return out


def _text(scenario: Mapping[str, Any], field: str) -> str:
    value = scenario.get(field)
    return value if isinstance(value, str) else ""


def _tags(scenario: Mapping[str, Any]) -> list:
    tags = scenario.get("tags")
    return tags if isinstance(tags, list) else []


def parse_where(expression: str) -> Predicate:
    """A predicate over a scenario (a mapping with ``category``, ``instruction``, ``scenario_id``, ``tags``).

    Raises:
        WhereError: the expression is empty, too long or not of the language (the message points at the place).
    """
    if not isinstance(expression, str) or not expression.strip():
        raise WhereError(str(expression), 0, "the expression is empty")
    if len(expression) > MAX_LENGTH:
        raise WhereError(expression[:60] + "...", 0, f"the expression is longer than {MAX_LENGTH} characters")
    return _Parser(expression).parse()


def scenario_fields(scenario) -> dict:
    """What an expression sees of a ``Scenario`` record."""
    return {"category": scenario.category, "instruction": scenario.instruction, "scenario_id": scenario.scenario_id,
            "tags": list(scenario.tags)}


__all__ = ["FIELDS", "MAX_DEPTH", "OPERATORS", "Predicate", "WhereError", "parse_where", "scenario_fields"]
