"""Expressions that name, hold and take apart values: input attributes, literals,
aliases, struct fields and ``named_struct``."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from typing import Any

from engine.etl.rowwise.compiled import Compiled, Compiler, Row, builds, children, constant
from engine.etl.rowwise.datatypes import (
    INTEGRAL_RANGE,
    Atomic,
    DataType,
    DecimalType,
    Field,
    StructType,
    parse_type,
)
from engine.etl.rowwise.java_numbers import is_float32_midpoint, to_float32
from engine.etl.rowwise.json_read import fit_decimal
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_EPOCH = dt.date(1970, 1, 1)


def expr_id(node: Node) -> int:
    """The expression id of an attribute or alias."""
    ident = node.fields.get("exprId")
    if not isinstance(ident, dict) or "id" not in ident:
        raise Unsupported(f"{node.name} without an expression id")
    return int(ident["id"])


@builds("AttributeReference")
def _attribute(node: Node, compiler: Compiler) -> Compiled:
    name = compiler.attributes.get(expr_id(node))
    if name is None:
        raise Unsupported(f"the attribute {node.fields.get('name')!r} of another relation")
    data_type = parse_type(node.fields["dataType"])

    def read(row: Row) -> Any:
        return row[name]

    return Compiled(read, data_type)


@builds("Alias", "KnownNotNull", "KnownNullable", "KnownFloatingPointNormalized")
def _alias(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    return child


@builds("Literal")
def _literal(node: Node, compiler: Compiler) -> Compiled:
    data_type = parse_type(node.fields["dataType"])
    text = node.fields.get("value")
    return constant(None if text is None else literal_value(str(text), data_type), data_type)


def literal_value(text: str, data_type: DataType) -> Any:
    """The value of a literal from the text Spark's plan JSON writes for it."""
    if isinstance(data_type, DecimalType):
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        return fit_decimal(decimal.Decimal(text), quantum, data_type.precision)
    name = data_type.name if isinstance(data_type, Atomic) else ""
    if name in INTEGRAL_RANGE:
        return int(text)
    if name == "boolean":
        return text == "true"
    if name == "string":
        return text
    if name == "double":
        value = float(text)
        if not math.isfinite(value):
            raise Unsupported(f"the double literal {text}")
        return value
    if name == "float":
        value = float(text)
        if not math.isfinite(value) or is_float32_midpoint(value):
            raise Unsupported(f"the float literal {text}")
        return to_float32(value)
    if name == "date":
        # java.sql.Date's text: the JVM's zone and calendar; years from 1900 are plain
        match = _DATE.match(text)
        if match is None or int(match.group(1)) < 1900:
            raise Unsupported(f"the date literal {text}")
        day = dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        return (day - _EPOCH).days
    if name == "void":
        return None
    # timestamps are written in the JVM's default zone, binary as an object's name
    raise Unsupported(f"a literal of type {data_type}")


@builds("GetStructField")
def _struct_field(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if not isinstance(child.type, StructType):
        raise Unsupported(f"GetStructField of {child.type}")
    ordinal = int(node.fields["ordinal"])
    field_type = child.type.fields[ordinal].type
    fn = child.fn

    def get(row: Row) -> Any:
        value = fn(row)
        return None if value is None else value[ordinal]

    if child.is_constant:
        value = None if child.constant is None else child.constant[ordinal]
        return constant(value, field_type)
    return Compiled(get, field_type)


@builds("CreateNamedStruct")
def _named_struct(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if len(parts) % 2:
        raise Unsupported("named_struct with an odd number of arguments")
    names, values = parts[0::2], parts[1::2]
    fields = []
    for name, value in zip(names, values, strict=True):
        if not name.is_constant or not isinstance(name.constant, str):
            raise Unsupported("named_struct with a field name that is not a string literal")
        fields.append(Field(name.constant, value.type))
    fns = [value.fn for value in values]
    data_type = StructType(tuple(fields))
    if len(fns) == 1:
        (only,) = fns
        return Compiled(lambda row: (only(row),), data_type)
    return Compiled(lambda row: tuple([fn(row) for fn in fns]), data_type)


def _contains(node: Node, name: str) -> bool:
    return any(child.expression == name or _contains(child, name) for child in node.children)


@builds("With")
def _with(node: Node, compiler: Compiler) -> Compiled:
    """Spark's common subexpression (``BETWEEN``, ``nullif``): a definition, evaluated
    again at each reference (it is deterministic). The JSON leaves the references' ids
    out, so only one definition, and no ``With`` inside, can be told apart."""
    if len(node.children) != 2 or _contains(node.children[0], "With"):
        raise Unsupported("a With of several common expressions")
    body, definition = node.children
    if definition.expression != "CommonExpressionDef" or len(definition.children) != 1:
        raise Unsupported("a With without its definition")
    compiler.used.add("CommonExpressionDef")
    compiler.common.append(compiler.compile(definition.children[0]))
    try:
        return compiler.compile(body)
    finally:
        compiler.common.pop()


@builds("CommonExpressionRef")
def _common_reference(node: Node, compiler: Compiler) -> Compiled:
    if not compiler.common:
        raise Unsupported("a common expression reference outside its With")
    return compiler.common[-1]


@builds("TypedNullLiteral")
def _typed_null(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    return constant(None, child.type)


@builds("TryEval")
def _try_eval(node: Node, compiler: Compiler) -> Compiled:
    """``try_add`` and its kind: Spark gives NULL where the child fails; here a failure
    refuses the row anyway, so where the child succeeds the value is the child's."""
    (child,) = children(node, compiler, 1)
    return child
