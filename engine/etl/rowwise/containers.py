"""Arrays and maps: ``array(...)``, ``map(...)``, indexing (``a[i]``, ``element_at``,
``m[k]``), ``size``, ``array_contains``, ``map_keys``, ``map_values``.

An index out of bounds is NULL or an error as the expression's ``failOnError`` says (it
is in the plan's JSON); an error refuses the row. A key missing from a map gives NULL
(Spark 4 raises no error there). Maps are built only with keys of atomic types, none
NULL, none repeated (Spark raises for those).
"""

from __future__ import annotations

from typing import Any

from engine.etl.rowwise.compiled import (
    Compiled,
    Compiler,
    Row,
    builds,
    children,
    same_types,
    strict,
)
from engine.etl.rowwise.datatypes import (
    BOOLEAN,
    INTEGER,
    LONG,
    ArrayType,
    Atomic,
    DecimalType,
    MapType,
)
from engine.etl.rowwise.logic import equatable
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported


@builds("CreateArray")
def _array(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if not parts:
        raise Unsupported("an empty array()")
    element = same_types(node, parts)
    fns = [part.fn for part in parts]
    return Compiled(lambda row: [fn(row) for fn in fns], ArrayType(element))


@builds("CreateMap")
def _map(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if not parts or len(parts) % 2:
        raise Unsupported("map() without key-value pairs")
    keys, values = parts[0::2], parts[1::2]
    key_type, value_type = same_types(node, keys), same_types(node, values)
    if not isinstance(key_type, Atomic | DecimalType) or key_type == Atomic("void"):
        raise Unsupported(f"a map keyed by {key_type}")
    key_fns, value_fns = [k.fn for k in keys], [v.fn for v in values]

    def run(row: Row) -> Any:
        found_keys = [fn(row) for fn in key_fns]
        found_values = [fn(row) for fn in value_fns]
        entries = dict(zip(found_keys, found_values, strict=True))
        if None in entries or len(entries) != len(found_keys):
            raise Unsupported("a map with a NULL or repeated key")
        return entries

    return Compiled(run, MapType(key_type, value_type))


def _index(node: Node, part: Compiled) -> None:
    if part.type not in (INTEGER, LONG, Atomic("short"), Atomic("byte")):
        raise Unsupported(f"{node.name} with an index of type {part.type}")


@builds("GetArrayItem")
def _array_item(node: Node, compiler: Compiler) -> Compiled:
    array, index = children(node, compiler, 2)
    if not isinstance(array.type, ArrayType):
        raise Unsupported(f"GetArrayItem of {array.type}")
    _index(node, index)
    fail = bool(node.fields.get("failOnError", True))
    array_fn, index_fn = array.fn, index.fn

    def run(row: Row) -> Any:
        items, i = array_fn(row), index_fn(row)
        if items is None or i is None:
            return None
        if 0 <= i < len(items):
            return items[i]
        if fail:
            raise Unsupported("an array index out of bounds")
        return None

    return Compiled(run, array.type.element)


@builds("ElementAt")
def _element_at(node: Node, compiler: Compiler) -> Compiled:
    container, index = children(node, compiler, 2)
    fail = bool(node.fields.get("failOnError", True))
    if isinstance(container.type, MapType):
        return _map_lookup(container, index, container.type)
    if not isinstance(container.type, ArrayType):
        raise Unsupported(f"element_at of {container.type}")
    _index(node, index)
    container_fn, index_fn = container.fn, index.fn

    def run(row: Row) -> Any:
        items, i = container_fn(row), index_fn(row)
        if items is None or i is None:
            return None
        if i == 0:
            raise Unsupported("element_at with index 0")
        position = i - 1 if i > 0 else len(items) + i
        if 0 <= position < len(items):
            return items[position]
        if fail:
            raise Unsupported("an array index out of bounds")
        return None

    return Compiled(run, container.type.element)


def _map_lookup(container: Compiled, key: Compiled, map_type: MapType) -> Compiled:
    if not key.type.same_shape(map_type.key):
        raise Unsupported(f"a map keyed by {map_type.key} looked up by {key.type}")
    container_fn, key_fn = container.fn, key.fn

    def run(row: Row) -> Any:
        entries, k = container_fn(row), key_fn(row)
        if entries is None or k is None:
            return None
        return entries.get(k)

    return Compiled(run, map_type.value)


@builds("GetMapValue")
def _map_value(node: Node, compiler: Compiler) -> Compiled:
    container, key = children(node, compiler, 2)
    if not isinstance(container.type, MapType):
        raise Unsupported(f"GetMapValue of {container.type}")
    return _map_lookup(container, key, container.type)


@builds("Size")
def _size(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if not isinstance(child.type, ArrayType | MapType):
        raise Unsupported(f"size of {child.type}")
    fn = child.fn
    if node.fields.get("legacySizeOfNull"):
        return Compiled(lambda row: -1 if (value := fn(row)) is None else len(value), INTEGER)
    return strict(len, child, INTEGER)


@builds("ArrayContains")
def _array_contains(node: Node, compiler: Compiler) -> Compiled:
    array, value = children(node, compiler, 2)
    if not isinstance(array.type, ArrayType) or not array.type.element.same_shape(value.type):
        raise Unsupported(f"array_contains of {array.type} and {value.type}")
    if not equatable(value.type):
        raise Unsupported(f"array_contains over {value.type}")
    array_fn, value_fn = array.fn, value.fn

    def run(row: Row) -> Any:
        items, v = array_fn(row), value_fn(row)
        if items is None or v is None:
            return None
        if v in [item for item in items if item is not None]:
            return True
        return None if None in items else False

    return Compiled(run, BOOLEAN)


@builds("MapKeys", "MapValues")
def _map_keys(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if not isinstance(child.type, MapType):
        raise Unsupported(f"{node.name} of {child.type}")
    if node.name == "MapKeys":
        return strict(list, child, ArrayType(child.type.key, False))
    return strict(lambda entries: list(entries.values()), child, ArrayType(child.type.value))
