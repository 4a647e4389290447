"""Timestamps from and to epoch counts: ``timestamp_millis``, ``timestamp_seconds``,
``timestamp_micros`` (a Debezium ``ts_ms`` made a timestamp), ``unix_millis``,
``unix_seconds``, ``unix_micros``, ``unix_date``, ``date_from_unix_date``.

Functions that read the clock (``current_timestamp``, ``now``) are not implemented: a
pass evaluated here and one evaluated in Spark would read different times.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.etl.rowwise.compiled import Compiled, Compiler, builds, children, strict
from engine.etl.rowwise.datatypes import (
    DATE,
    INTEGER,
    INTEGRAL_RANGE,
    LONG,
    TIMESTAMP,
    Atomic,
)
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported

_LOW, _HIGH = INTEGRAL_RANGE["long"]
_DAY_MICROS = 86_400_000_000


def _scaled(factor: int) -> Callable[[int], int]:
    def run(value: int) -> int:
        micros = value * factor
        if not _LOW <= micros <= _HIGH:
            raise Unsupported("a timestamp beyond the long range")
        return micros

    return run


_TO_TIMESTAMP = {
    "MillisToTimestamp": 1_000,
    "SecondsToTimestamp": 1_000_000,
    "MicrosToTimestamp": 1,
}


@builds(*_TO_TIMESTAMP)
def _to_timestamp(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if not (isinstance(child.type, Atomic) and child.type.integral):
        raise Unsupported(f"{node.name} of {child.type}")
    return strict(_scaled(_TO_TIMESTAMP[node.name]), child, TIMESTAMP)


_FROM_TIMESTAMP = {"UnixMillis": 1_000, "UnixSeconds": 1_000_000, "UnixMicros": 1}


@builds(*_FROM_TIMESTAMP)
def _from_timestamp(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if child.type != TIMESTAMP:
        raise Unsupported(f"{node.name} of {child.type}")
    divisor = _FROM_TIMESTAMP[node.name]
    return strict(lambda micros: micros // divisor, child, LONG)


@builds("UnixDate")
def _unix_date(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if child.type != DATE:
        raise Unsupported(f"unix_date of {child.type}")
    return Compiled(child.fn, INTEGER, child.constant)


@builds("DateFromUnixDate")
def _date_from_unix_date(node: Node, compiler: Compiler) -> Compiled:
    (child,) = children(node, compiler, 1)
    if child.type != INTEGER:
        raise Unsupported(f"date_from_unix_date of {child.type}")
    return Compiled(child.fn, DATE, child.constant)
