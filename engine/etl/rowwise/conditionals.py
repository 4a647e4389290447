"""Conditional expressions and NULL tests: ``IF``, ``CASE WHEN``, ``coalesce`` (and what
the analyser rewrites into them: ``nvl``, ``ifnull``, ``nullif``, ``nvl2``), ``IS [NOT]
NULL``, ``greatest`` and ``least``.

Every branch is evaluated, the chosen one returned: Spark evaluates only the branch it
takes, so where another branch would fail (a division by zero in a branch not taken)
the row is refused rather than risk a difference.
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
)
from engine.etl.rowwise.datatypes import BOOLEAN, VOID
from engine.etl.rowwise.logic import orderable
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported


@builds("IsNull")
def _is_null(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    fn = child.fn
    return Compiled(lambda row: fn(row) is None, BOOLEAN)


@builds("IsNotNull")
def _is_not_null(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    fn = child.fn
    return Compiled(lambda row: fn(row) is not None, BOOLEAN)


def _predicate(part: Compiled, node: Node) -> Compiled:
    if part.type not in (BOOLEAN, VOID):
        raise Unsupported(f"{node.name} with a condition of type {part.type}")
    return part


@builds("If")
def _if(node: Node, compiler: Compiler) -> Compiled:
    condition, when_true, when_false = children(node, compiler, 3)
    data_type = same_types(node, [when_true, when_false])
    test, yes, no = _predicate(condition, node).fn, when_true.fn, when_false.fn

    def run(row: Row) -> Any:
        chosen = test(row)
        a = yes(row)
        b = no(row)
        return a if chosen is True else b

    return Compiled(run, data_type)


@builds("CaseWhen")
def _case_when(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    pairs = len(parts) // 2
    if pairs == 0:
        raise Unsupported("CASE without WHEN")
    conditions = [_predicate(part, node).fn for part in parts[0 : 2 * pairs : 2]]
    values = parts[1 : 2 * pairs : 2]
    otherwise = parts[2 * pairs] if len(parts) % 2 else None
    data_type = same_types(node, values + ([otherwise] if otherwise else []))
    value_fns = [value.fn for value in values]
    else_fn = otherwise.fn if otherwise is not None else None

    def run(row: Row) -> Any:
        tests = [condition(row) for condition in conditions]
        results = [value(row) for value in value_fns]
        fallback = else_fn(row) if else_fn is not None else None
        for test, result in zip(tests, results, strict=True):
            if test is True:
                return result
        return fallback

    return Compiled(run, data_type)


@builds("Coalesce")
def _coalesce(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    if not parts:
        raise Unsupported("coalesce without arguments")
    data_type = same_types(node, parts)
    fns = [part.fn for part in parts]

    def run(row: Row) -> Any:
        found = None
        for fn in fns:
            value = fn(row)
            if found is None:
                found = value
        return found

    return Compiled(run, data_type)


@builds("Greatest", "Least")
def _greatest(node: Node, compiler: Compiler) -> Compiled:
    parts = children(node, compiler)
    data_type = same_types(node, parts)
    if not orderable(data_type):
        raise Unsupported(f"{node.name} over {data_type}")
    pick = max if node.name == "Greatest" else min
    fns = [part.fn for part in parts]

    def run(row: Row) -> Any:
        values = [value for value in (fn(row) for fn in fns) if value is not None]
        return pick(values) if values else None

    return Compiled(run, data_type)
