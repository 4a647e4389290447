"""The JSON of Spark's analysed plan (``queryExecution().analyzed().toJSON()``) as trees.

Spark writes a tree as a list of its nodes in pre-order, each with its class and
``num-children``; a node's fields that hold children (``child``, ``left``,
``children``...) give their positions among the node's children, and fields holding
expressions of a plan node (``projectList``, ``condition``) hold such lists in turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.etl.rowwise.unsupported import Unsupported

EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."


@dataclass(frozen=True, eq=False)
class Node:
    """One node: its full class name, its own fields and its children."""

    cls: str
    fields: Mapping[str, Any]
    children: tuple[Node, ...]

    @property
    def name(self) -> str:
        """The class's simple name."""
        return self.cls.rsplit(".", 1)[-1]

    @property
    def expression(self) -> str | None:
        """The simple name of a Catalyst expression class (None for any other class)."""
        return self.cls[len(EXPRESSIONS) :] if self.cls.startswith(EXPRESSIONS) else None

    def expression_list(self, field: str) -> list[Node]:
        """A field holding a list of expressions (``projectList``)."""
        return [tree(item) for item in self.fields.get(field) or []]

    def expression_field(self, field: str) -> Node:
        """A field holding one expression (``condition``)."""
        value = self.fields.get(field)
        if not value:
            raise Unsupported(f"{self.name} without {field}")
        return tree(value)


def tree(nodes: Sequence[Mapping[str, Any]] | str) -> Node:
    """The tree of a pre-order node list (or its JSON text)."""
    listed: Sequence[Mapping[str, Any]] = json.loads(nodes) if isinstance(nodes, str) else nodes
    items: Iterator[Mapping[str, Any]] = iter(listed)
    root = _take(items)
    if next(items, None) is not None:
        raise Unsupported("a plan JSON with nodes after its root")
    return root


def _take(items: Iterator[Mapping[str, Any]]) -> Node:
    try:
        raw = next(items)
    except StopIteration:
        raise Unsupported("a plan JSON that ends inside a node") from None
    count = int(raw.get("num-children", 0))
    fields = {k: v for k, v in raw.items() if k not in ("class", "num-children")}
    children = tuple(_take(items) for _ in range(count))
    return Node(str(raw.get("class", "")), fields, children)


def describe(node: Node) -> str:
    """A short name for messages: ``Add``, ``Project``."""
    return node.name
