"""What compiling an expression makes (:class:`Compiled`: a Python function of the row
and the expression's Spark type), the session settings compiling depends on
(:class:`Session`), and the table of builders, one per Catalyst expression class, that
the expression families (:mod:`~engine.etl.rowwise.references`,
:mod:`~engine.etl.rowwise.logic`, :mod:`~engine.etl.rowwise.arithmetic`, ...) fill.

A compiled function takes the row (the input columns by name) and returns the
expression's value as :mod:`engine.etl.rowwise.datatypes` describes values, or raises
:class:`~engine.etl.rowwise.unsupported.Unsupported` where Spark would raise an error or
the value is one the evaluator cannot be sure of.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.etl.rowwise.datatypes import DataType
from engine.etl.rowwise.plan_tree import Node
from engine.etl.rowwise.unsupported import Unsupported

Row = Mapping[str, Any]
Function = Callable[[Row], Any]

#: Marks a :class:`Compiled` whose value does not depend on the row.
NOT_CONSTANT: Any = object()


@dataclass(frozen=True)
class Compiled:
    """A compiled expression: ``fn(row)`` gives its value; ``type`` is its Spark type;
    ``constant`` its value when it has no input (a literal), else :data:`NOT_CONSTANT`."""

    fn: Function
    type: DataType
    constant: Any = NOT_CONSTANT

    @property
    def is_constant(self) -> bool:
        return self.constant is not NOT_CONSTANT


@dataclass(frozen=True)
class Session:
    """The session settings a plan's meaning depends on beyond its JSON: the session
    time zone (``to_json`` writes timestamps in it) and whether decimal arithmetic may
    lose precision (``spark.sql.decimalOperations.allowPrecisionLoss``)."""

    time_zone: str = "UTC"
    decimal_precision_loss: bool = True


@dataclass
class Compiler:
    """Compiles an expression tree against the input's attributes: ``attributes`` maps
    an attribute's expression id to the name of the input column holding it."""

    session: Session
    attributes: Mapping[int, str]
    #: The expression classes met, for the report of what a rule uses.
    used: set[str] = field(default_factory=set)
    #: The common expressions (``With``) in scope, innermost last.
    common: list[Compiled] = field(default_factory=list)

    def compile(self, node: Node) -> Compiled:
        name = node.expression
        if name is None:
            raise Unsupported(f"the expression {node.cls}")
        self.used.add(name)
        if "replacement" in node.fields and len(node.children) == 1:
            # a RuntimeReplaceable (nvl, nullif, left, try_add...): Spark evaluates its
            # replacement, which is its only child
            return self.compile(node.children[0])
        build = BUILDERS.get(name)
        if build is None:
            raise Unsupported(f"the expression {name}")
        return build(node, self)


Builder = Callable[[Node, Compiler], Compiled]
BUILDERS: dict[str, Builder] = {}


def builds(*names: str) -> Callable[[Builder], Builder]:
    """Register a builder for the Catalyst expression classes ``names``."""

    def register(build: Builder) -> Builder:
        for name in names:
            assert name not in BUILDERS, name
            BUILDERS[name] = build
        return build

    return register


def constant(value: Any, data_type: DataType) -> Compiled:
    return Compiled(lambda row: value, data_type, value)


def strict(operation: Callable[[Any], Any], child: Compiled, data_type: DataType) -> Compiled:
    """A function of one argument that is NULL where its argument is (folded when the
    argument is constant)."""
    fn = child.fn

    def run(row: Row) -> Any:
        value = fn(row)
        return None if value is None else operation(value)

    if child.is_constant:
        value = None if child.constant is None else operation(child.constant)
        return constant(value, data_type)
    return Compiled(run, data_type)


def strict2(
    operation: Callable[[Any, Any], Any], left: Compiled, right: Compiled, data_type: DataType
) -> Compiled:
    """A function of two arguments that is NULL where either is. Both are evaluated
    (so a failure on either side refuses, whatever Spark would skip)."""
    lfn, rfn = left.fn, right.fn

    def run(row: Row) -> Any:
        a = lfn(row)
        b = rfn(row)
        if a is None or b is None:
            return None
        return operation(a, b)

    return Compiled(run, data_type)


def children(node: Node, compiler: Compiler, count: int | None = None) -> list[Compiled]:
    """The node's children compiled (exactly ``count`` of them when given)."""
    if count is not None and len(node.children) != count:
        raise Unsupported(f"{node.name} with {len(node.children)} arguments")
    return [compiler.compile(child) for child in node.children]


def same_types(node: Node, parts: list[Compiled]) -> DataType:
    """The one type of ``parts`` (the analyser has coerced them); Unsupported when they
    differ beyond nullability."""
    first = parts[0].type
    for part in parts[1:]:
        if not part.type.same_shape(first):
            raise Unsupported(f"{node.name} over {first} and {part.type}")
    return first
