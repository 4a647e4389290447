"""The words of a Spark SQL text, as far as ``zync query`` needs to read it.

:func:`tokens` cuts a statement into words, numbers, quoted identifiers, string literals
and single symbols, each with its place in the text, and leaves out whitespace and
comments (``-- to the end of the line`` and ``/* ... */``, nested as Spark nests them).
A string literal (``'...'``, ``"..."``, with backslash escapes, or raw ``r'...'``) is one
token, so nothing inside it is ever read as SQL. That is all :mod:`engine.lake.timetravel`
needs to find pool references without parsing the whole grammar.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    WORD = "word"  # an unquoted identifier or keyword
    QUOTED = "quoted"  # a `backticked` identifier
    STRING = "string"  # a string literal
    NUMBER = "number"
    SYMBOL = "symbol"  # any other character


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str  # as written
    start: int
    end: int  # one past the last character

    def is_word(self, *words: str) -> bool:
        """True for an unquoted word equal (ignoring case) to one of ``words``."""
        return self.kind is Kind.WORD and self.text.upper() in words

    @property
    def name(self) -> str:
        """An identifier's name: backticks removed (a doubled backtick is one)."""
        if self.kind is Kind.QUOTED:
            return self.text[1:-1].replace("``", "`")
        return self.text

    @property
    def value(self) -> str:
        """A string literal's value (escapes resolved as Spark resolves the common ones)."""
        raw = self.text.startswith(("r", "R"))
        body = self.text[2:-1] if raw else self.text[1:-1]
        if raw:
            return body
        out, i = [], 0
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body):
                out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
                i += 2
            else:
                out.append(body[i])
                i += 1
        return "".join(out)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


class SqlTextError(ValueError):
    """A string literal, quoted identifier or comment that is never closed."""


def tokens(sql: str) -> list[Token]:
    """The tokens of ``sql``, without whitespace and comments."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = _comment_end(sql, i)
        elif c in "'\"" or (c in "rR" and i + 1 < n and sql[i + 1] in "'\""):
            end = _string_end(sql, i + 1 if c in "rR" else i, raw=c in "rR")
            out.append(Token(Kind.STRING, sql[i:end], i, end))
            i = end
        elif c == "`":
            end = _quoted_end(sql, i)
            out.append(Token(Kind.QUOTED, sql[i:end], i, end))
            i = end
        elif c.isalpha() or c == "_":
            end = i + 1
            while end < n and (sql[end].isalnum() or sql[end] == "_"):
                end += 1
            out.append(Token(Kind.WORD, sql[i:end], i, end))
            i = end
        elif c.isdigit():
            end = i + 1
            while end < n and (sql[end].isalnum() or sql[end] in "._"):
                end += 1
            out.append(Token(Kind.NUMBER, sql[i:end], i, end))
            i = end
        else:
            out.append(Token(Kind.SYMBOL, c, i, i + 1))
            i += 1
    return out


def _comment_end(sql: str, start: int) -> int:
    depth, i = 0, start
    while i < len(sql):
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SqlTextError(f"a comment opened at character {start + 1} is never closed")


def _string_end(sql: str, quote_at: int, *, raw: bool) -> int:
    quote, i = sql[quote_at], quote_at + 1
    while i < len(sql):
        if sql[i] == "\\" and not raw:
            i += 2
        elif sql[i] == quote:
            return i + 1
        else:
            i += 1
    raise SqlTextError(f"a string opened at character {quote_at + 1} is never closed")


def _quoted_end(sql: str, start: int) -> int:
    i = start + 1
    while i < len(sql):
        if sql[i] == "`":
            if sql.startswith("``", i):
                i += 2
                continue
            return i + 1
        i += 1
    raise SqlTextError(f"a `quoted name` opened at character {start + 1} is never closed")


def quote_name(name: str) -> str:
    """``name`` as a backticked identifier."""
    return "`" + name.replace("`", "``") + "`"
