"""A rule's SELECT evaluated row by row (:func:`compile_select`, :class:`RowSelect`).

The plan is Spark's analysis of the statement :func:`engine.etl.sql.wrap_select` makes:
``SELECT <order columns>, <the rule's list> FROM <view> [WHERE ...]`` over the rule's
one-row view (columns ``in``, or ``left`` and ``right``, and the order columns). Its
``Project`` and ``Filter`` nodes are evaluated, down to the view (a ``SubqueryAlias``),
whose columns the caller supplies by name; any other plan node (``explode``'s
``Generate``, ``DISTINCT``'s ``Aggregate``, ``ORDER BY``, ``LIMIT``, a window, a join
or a subquery) is :class:`Unsupported`. Output columns are checked against the types
Spark gave them: a difference refuses the rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from engine.etl.rowwise.analysed import Analysed
from engine.etl.rowwise.compiled import Function, Session
from engine.etl.rowwise.compiler import Compiler
from engine.etl.rowwise.datatypes import BOOLEAN, VOID, DataType, StructType, parse_type
from engine.etl.rowwise.json_write import json_text, writer
from engine.etl.rowwise.plan_tree import Node, tree
from engine.etl.rowwise.references import expr_id
from engine.etl.rowwise.relations import attributes
from engine.etl.rowwise.unsupported import UNFORESEEN, Unsupported, unforeseen

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Column:
    """An output column: its name and Spark type."""

    name: str
    type: DataType


@dataclass(frozen=True)
class _Project:
    #: (key in the row the next stage reads, function) per column.
    items: tuple[tuple[str, Function], ...]


@dataclass(frozen=True)
class _Filter:
    condition: Function


_Stage = _Project | _Filter


@dataclass(frozen=True)
class RowSelect:
    """A compiled rule SELECT. :meth:`run` gives its output rows for one input row (the
    view's columns by name): none when its ``WHERE`` is not true, else one."""

    columns: tuple[Column, ...]
    stages: tuple[_Stage, ...]
    #: The Catalyst expression classes the rule uses.
    used: frozenset[str]
    session: Session

    def run(self, row: Row) -> list[dict[str, Any]]:
        current: Row = row
        try:
            for stage in self.stages:
                if isinstance(stage, _Filter):
                    if stage.condition(current) is not True:
                        return []
                else:
                    current = {key: fn(current) for key, fn in stage.items}
        except UNFORESEEN as exc:
            raise unforeseen(exc) from exc
        return [dict(current)]

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def json_texts(self, row: Row, names: tuple[str, ...] = ("key", "value")) -> list[dict[str, str | None]]:
        """:meth:`run`, with the columns ``names`` written as the JSON text a pass stores
        (:func:`engine.etl.rowwise.json_write.json_text`)."""
        types = [(name, self.column(name).type) for name in names]
        zone = self.session.time_zone
        outputs = self.run(row)
        try:
            return [
                {name: json_text(out[name], data_type, zone) for name, data_type in types}
                for out in outputs
            ]
        except UNFORESEEN as exc:
            raise unforeseen(exc) from exc


def compile_select(analysed: Analysed, hidden: Collection[str] = ()) -> RowSelect:
    """Compile a rule's analysed SELECT; ``hidden``: output columns left out (the order
    columns a pass computes itself). Unsupported for a plan not implemented exactly."""
    try:
        return _compile_select(analysed, hidden)
    except UNFORESEEN as exc:
        raise unforeseen(exc) from exc


def _compile_select(analysed: Analysed, hidden: Collection[str]) -> RowSelect:
    root = tree(analysed.plan)
    chain: list[Node] = []
    node = root
    while node.name in ("Project", "Filter") and node.cls.startswith(
        "org.apache.spark.sql.catalyst.plans.logical."
    ):
        chain.append(node)
        node = node.children[0]
    if not chain or chain[0].name != "Project":
        raise Unsupported(f"a SELECT whose plan is a {root.name}")
    if node.name != "SubqueryAlias":
        raise Unsupported(f"the plan node {node.name}")
    compiler = Compiler(analysed.session, attributes(node))
    stages: list[_Stage] = []
    last: list[tuple[str, str, DataType, Function]] = []
    for index, stage in enumerate(reversed(chain)):
        top = index == len(chain) - 1
        if stage.name == "Filter":
            condition = compiler.compile(stage.expression_field("condition"))
            if condition.type not in (BOOLEAN, VOID):
                raise Unsupported(f"a WHERE of type {condition.type}")
            stages.append(_Filter(condition.fn))
            continue
        last = []
        for item in stage.expression_list("projectList"):
            name = str(item.fields.get("name"))
            if top and name in hidden:
                continue
            compiled = compiler.compile(item)
            key = name if top else f"#{expr_id(item)}"
            last.append((key, name, compiled.type, compiled.fn))
        stages.append(_Project(tuple((key, fn) for key, _, _, fn in last)))
        produced = {expr_id(i): f"#{expr_id(i)}" for i in stage.expression_list("projectList")}
        compiler = Compiler(analysed.session, produced, compiler.used)
    columns = tuple(Column(name, data_type) for _, name, data_type, _ in last)
    _check_columns(columns, analysed.schema, hidden)
    for column in columns:  # a column the pass writes must be writable
        if column.name in ("key", "value") and column.type != VOID:
            writer(column.type, analysed.session.time_zone)
    return RowSelect(columns, tuple(stages), frozenset(compiler.used), analysed.session)


def _check_columns(columns: tuple[Column, ...], schema_json: str, hidden: Collection[str]) -> None:
    schema = parse_type(schema_json)
    assert isinstance(schema, StructType)
    spark = [(f.name, f.type) for f in schema.fields if f.name not in hidden]
    if len({c.name for c in columns}) != len(columns):
        raise Unsupported("a SELECT with two columns of one name")
    if [c.name for c in columns] != [name for name, _ in spark]:
        raise Unsupported("a SELECT whose columns are not the schema's")
    for column, (_, spark_type) in zip(columns, spark, strict=True):
        if not column.type.same_shape(spark_type):
            raise Unsupported(
                f"column {column.name}: evaluated as {column.type}, Spark says {spark_type}"
            )

