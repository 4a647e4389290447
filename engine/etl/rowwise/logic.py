"""Boolean logic as Spark evaluates it (three-valued: NULL is neither true nor false),
comparisons and ``IN``.

Values of one Spark type compare as their Python values do: numbers by value (``-0.0 =
0.0``; NaN never reaches here), strings by code point (Spark compares UTF-8 bytes, which
orders the same), binary by unsigned bytes, booleans false before true, dates and
timestamps by their count. Structs and arrays compare for equality field by field (two
NULL fields are equal, as in Spark's ordering); ordering them is not implemented.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from engine.etl.rowwise.compiled import (
    Compiled,
    Compiler,
    Row,
    builds,
    children,
    same_types,
    strict,
    strict2,
)
from engine.etl.rowwise.datatypes import (
    BOOLEAN,
    ArrayType,
    Atomic,
    DataType,
    DecimalType,
    MapType,
    StructType,
)
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported


def orderable(data_type: DataType) -> bool:
    return isinstance(data_type, DecimalType) or (
        isinstance(data_type, Atomic) and data_type.name != "void"
    )


def equatable(data_type: DataType) -> bool:
    if isinstance(data_type, StructType):
        return all(equatable(f.type) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return equatable(data_type.element)
    return not isinstance(data_type, MapType)


def _boolean_children(node: Node, compiler: Compiler, count: int) -> list[Compiled]:
    parts = children(node, compiler, count)
    for part in parts:
        if part.type not in (BOOLEAN, Atomic("void")):
            raise Unsupported(f"{node.name} over {part.type}")
    return parts


@builds("And")
def _and(node: Node, compiler: Compiler) -> Compiled:
    left, right = (part.fn for part in _boolean_children(node, compiler, 2))

    def run(row: Row) -> Any:
        a = left(row)
        b = right(row)  # evaluated even when a is false: a failure there refuses
        if a is False or b is False:
            return False
        if a is None or b is None:
            return None
        return True

    return Compiled(run, BOOLEAN)


@builds("Or")
def _or(node: Node, compiler: Compiler) -> Compiled:
    left, right = (part.fn for part in _boolean_children(node, compiler, 2))

    def run(row: Row) -> Any:
        a = left(row)
        b = right(row)
        if a is True or b is True:
            return True
        if a is None or b is None:
            return None
        return False

    return Compiled(run, BOOLEAN)


@builds("Not")
def _not(node: Node, compiler: Compiler) -> Compiled:
    (child,) = _boolean_children(node, compiler, 1)
    return strict(operator.not_, child, BOOLEAN)


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "EqualTo": operator.eq,
    "LessThan": operator.lt,
    "LessThanOrEqual": operator.le,
    "GreaterThan": operator.gt,
    "GreaterThanOrEqual": operator.ge,
}


@builds(*_COMPARISONS)
def _comparison(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler, 2)
    data_type = same_types(node, parts)
    ok = equatable(data_type) if node.name == "EqualTo" else orderable(data_type)
    if not ok:
        raise Unsupported(f"{node.name} over {data_type}")
    return strict2(_COMPARISONS[node.name], parts[0], parts[1], BOOLEAN)


@builds("EqualNullSafe")
def _equal_null_safe(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler, 2)
    data_type = same_types(node, parts)
    if not equatable(data_type):
        raise Unsupported(f"<=> over {data_type}")
    left, right = parts[0].fn, parts[1].fn

    def run(row: Row) -> Any:
        a = left(row)
        b = right(row)
        if a is None or b is None:
            return a is None and b is None
        return a == b

    return Compiled(run, BOOLEAN)


@builds("In")
def _in(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if len(parts) < 2:
        raise Unsupported("IN without a list")
    data_type = same_types(node, parts)
    if not equatable(data_type):
        raise Unsupported(f"IN over {data_type}")
    value = parts[0].fn
    if all(part.is_constant for part in parts[1:]):
        options = [part.constant for part in parts[1:]]
        has_null = any(option is None for option in options)
        present = [option for option in options if option is not None]

        def run_constant(row: Row) -> Any:
            v = value(row)
            if v is None:
                return None
            if v in present:
                return True
            return None if has_null else False

        return Compiled(run_constant, BOOLEAN)
    items = [part.fn for part in parts[1:]]

    def run(row: Row) -> Any:
        v = value(row)
        found = [item(row) for item in items]
        if v is None:
            return None
        if v in [f for f in found if f is not None]:
            return True
        return None if None in found else False

    return Compiled(run, BOOLEAN)
