"""The SQL text of ETL rules: literals, identifiers, and a rule's SELECT made to run per match.

A rule's ``sql`` is a SELECT without FROM; :func:`wrap_select` adds the ordering columns
to its select list and ``FROM`` the rule's view (columns ``left``/``right``, ``in`` or
``bundle``), so a ``WHERE`` or ``explode`` in it works per match. Pure text: no Spark here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def quote(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ident(name: str) -> str:
    """A Spark SQL identifier in backquotes."""
    return "`" + name.replace("`", "``") + "`"


class SqlShapeError(ValueError):
    """A rule's sql is not a SELECT the engine can evaluate per match."""


@dataclass(frozen=True)
class _Word:
    text: str  # lower case
    start: int
    end: int
    depth: int
    after_dot: bool


_CLAUSES = frozenset(
    {
        "from", "where", "group", "having", "order", "limit", "offset", "window",
        "qualify", "cluster", "distribute", "sort", "union", "intersect", "except",
        "minus",
    }
)


def _words(sql: str) -> list[_Word]:
    """The bare words of ``sql`` with their parenthesis depth, skipping literals,
    quoted identifiers and comments."""
    words: list[_Word] = []
    i, n, depth = 0, len(sql), 0
    last = ""  # the previous significant character
    while i < n:
        c = sql[i]
        if c in " \t\r\n":
            i += 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    if c == "`" and j + 1 < n and sql[j + 1] == "`":
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
            last = c
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c.isalpha() or c == "_":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            words.append(_Word(sql[i:j].lower(), i, j, depth, last == "."))
            last = "w"
            i = j
            continue
        last = c
        i += 1
    return words


def wrap_select(
    sql: str, view: str, extras: Sequence[str], *, from_names: Sequence[str] = ()
) -> str:
    """``SELECT <list> [WHERE ...]`` → ``SELECT <extras>, <list> FROM <view> [WHERE ...]``.

    ``FROM <name>`` for a name in ``from_names`` is accepted and replaced by the view.
    Raises :class:`SqlShapeError` for anything else that is not a SELECT without FROM.
    """
    text = sql.strip().rstrip(";").rstrip()
    words = _words(text)
    if not words or words[0].text != "select" or words[0].depth != 0:
        raise SqlShapeError("must be a SELECT (without FROM)")
    head_end = words[0].end
    rest_words = words[1:]
    if rest_words and rest_words[0].text in ("distinct", "all") and rest_words[0].depth == 0:
        head_end = rest_words[0].end
        rest_words = rest_words[1:]
    clause = next(
        (w for w in rest_words if w.depth == 0 and not w.after_dot and w.text in _CLAUSES),
        None,
    )
    select_list = text[head_end : clause.start if clause else len(text)].strip()
    tail = text[clause.start :] if clause else ""
    if clause is not None and clause.text == "from":
        after = [w for w in rest_words if w.start > clause.start and w.depth == 0]
        name = after[0] if after else None
        following = after[1] if len(after) > 1 else None
        allowed = {n.lower() for n in from_names}
        gap_end = following.start if following else len(text)
        if (
            name is None
            or name.text not in allowed
            or text[name.end : gap_end].strip()
            or (following is not None and following.text not in _CLAUSES)
        ):
            hint = f" (or FROM {from_names[0]})" if from_names else ""
            raise SqlShapeError(
                f"must be a SELECT without FROM{hint}: it is evaluated once per match"
            )
        tail = text[gap_end:] if following else ""
    if not select_list:
        raise SqlShapeError("the SELECT has no columns")
    prefix = ", ".join(extras)
    head = text[:head_end]
    return f"{head} {prefix}, {select_list} FROM {ident(view)} {tail}".rstrip()
