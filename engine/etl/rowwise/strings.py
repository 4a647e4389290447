"""String functions as Spark computes them on UTF-8 strings (UTF8_BINARY collation):
lengths and positions count characters (code points), comparisons are binary.

``upper`` and ``lower`` are computed for ASCII text only: elsewhere the JVM's Unicode
tables (or ICU's, as Spark's settings choose) and Python's may differ, so other text is
refused at run time. ``LIKE`` is not implemented: the plan's JSON does not keep its
escape character.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.etl.rowwise.compiled import (
    Compiled,
    Compiler,
    Row,
    builds,
    children,
    strict,
    strict2,
)
from engine.etl.rowwise.datatypes import (
    BINARY,
    BOOLEAN,
    INTEGER,
    STRING,
    ArrayType,
    DataType,
)
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported

_INT_MAX = 2**31 - 1
_INT_MIN = -(2**31)


def _strings(node: Node, parts: list[Compiled], *types: DataType) -> None:
    allowed = types or (STRING,)
    for part in parts:
        if not any(part.type.same_shape(t) for t in allowed):
            raise Unsupported(f"{node.name} over {part.type}")


@builds("Concat")
def _concat(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if not parts:
        raise Unsupported("concat without arguments")
    data_type = parts[0].type
    if data_type not in (STRING, BINARY) and not isinstance(data_type, ArrayType):
        raise Unsupported(f"concat over {data_type}")
    for part in parts:
        if not part.type.same_shape(data_type):
            raise Unsupported(f"concat over {data_type} and {part.type}")
    fns = [part.fn for part in parts]
    empty: Any = "" if data_type == STRING else (b"" if data_type == BINARY else None)

    def run(row: Row) -> Any:
        values = [fn(row) for fn in fns]
        if None in values:
            return None
        if empty is None:
            return [item for value in values for item in value]
        return empty.join(values)

    return Compiled(run, data_type)


@builds("ConcatWs")
def _concat_ws(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if not parts:
        raise Unsupported("concat_ws without a separator")
    _strings(node, parts[:1])
    _strings(node, parts[1:], STRING, ArrayType(STRING))
    separator = parts[0].fn
    values = [(part.fn, isinstance(part.type, ArrayType)) for part in parts[1:]]

    def run(row: Row) -> Any:
        sep = separator(row)
        found: list[str] = []
        for value, is_array in values:
            item = value(row)
            if item is None:
                continue
            if is_array:
                found.extend(x for x in item if x is not None)
            else:
                found.append(item)
        return None if sep is None else sep.join(found)

    return Compiled(run, STRING)


def _ascii_only(operation: Callable[[str], str], what: str) -> Callable[[str], str]:
    def run(text: str) -> str:
        if not text.isascii():
            raise Unsupported(f"{what} of text that is not ASCII")
        return operation(text)

    return run


@builds("Upper")
def _upper(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    _strings(node, [child])
    return strict(_ascii_only(str.upper, "upper"), child, STRING)


@builds("Lower")
def _lower(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    _strings(node, [child])
    return strict(_ascii_only(str.lower, "lower"), child, STRING)


@builds("Length")
def _length(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    _strings(node, [child], STRING, BINARY)
    return strict(len, child, INTEGER)


def substring_sql(value: Any, pos: int, length: int) -> Any:
    """Spark's ``substringSQL``: 1-based ``pos`` (0 is 1, negative counts from the
    end), at most ``length`` characters (bytes of binary)."""
    size = len(value)
    start = pos - 1 if pos > 0 else (size + pos if pos < 0 else 0)
    end = max(min(start + length, _INT_MAX), _INT_MIN)
    start = max(start, 0)
    if start >= end:
        return value[:0]
    return value[start:end]


@builds("Substring")
def _substring(node: Node, compiler: Compiler) -> Compiled:
    text, pos, length = children(node, compiler, 3)
    _strings(node, [text], STRING, BINARY)
    _strings(node, [pos, length], INTEGER)
    text_fn, pos_fn, length_fn = text.fn, pos.fn, length.fn

    def run(row: Row) -> Any:
        value, p, n = text_fn(row), pos_fn(row), length_fn(row)
        if value is None or p is None or n is None:
            return None
        return substring_sql(value, p, n)

    return Compiled(run, text.type)


@builds("StringTrim", "StringTrimLeft", "StringTrimRight")
def _trim(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if len(parts) != 1:
        raise Unsupported(f"{node.name} with characters to trim")
    _strings(node, parts)
    strip = {"StringTrim": str.strip, "StringTrimLeft": str.lstrip, "StringTrimRight": str.rstrip}
    operation = strip[node.name]
    return strict(lambda text: operation(text, " "), parts[0], STRING)


_TESTS: dict[str, Callable[[str, str], bool]] = {
    "StartsWith": str.startswith,
    "EndsWith": str.endswith,
    "Contains": lambda text, part: part in text,
}


@builds(*_TESTS)
def _starts_with(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler, 2)
    _strings(node, parts)
    return strict2(_TESTS[node.name], parts[0], parts[1], BOOLEAN)


@builds("StringReplace")
def _replace(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler, 3)
    _strings(node, parts)
    source, search, replace = (part.fn for part in parts)

    def run(row: Row) -> Any:
        text, old, new = source(row), search(row), replace(row)
        if text is None or old is None or new is None:
            return None
        return text if old == "" else text.replace(old, new)

    return Compiled(run, STRING)


@builds("Left", "Right")
def _left(node: Node, compiler: Compiler) -> Compiled:
    text, length = children(node, compiler, 2)
    _strings(node, [text], STRING, BINARY)
    _strings(node, [length], INTEGER)
    text_fn, length_fn = text.fn, length.fn
    right = node.name == "Right"

    def run(row: Row) -> Any:
        value, n = text_fn(row), length_fn(row)
        if value is None or n is None:
            return None
        if right:
            return value[len(value) - n :] if 0 < n < len(value) else (value if n > 0 else value[:0])
        return substring_sql(value, 1, n)

    return Compiled(run, text.type)
