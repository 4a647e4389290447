"""Expressions of an analysed plan compiled into Python functions (:func:`compile_expression`).

Each Catalyst expression class the evaluator implements has a builder in one of the
families, registered in :data:`engine.etl.rowwise.compiled.BUILDERS` when its module
is imported — which this module does; anything else is :class:`Unsupported`. A
``RuntimeReplaceable`` expression (``nvl``, ``nullif``, ``left``, ``try_add``...) is
evaluated as its replacement, which the JSON holds as its only child.

:data:`SUPPORTED` lists the classes, for the design document and the report.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.etl.rowwise import (  # noqa: F401 - each family registers its builders
    arithmetic,
    casts,
    conditionals,
    containers,
    logic,
    references,
    strings,
    times,
)
from engine.etl.rowwise.compiled import BUILDERS, Compiled, Session
from engine.etl.rowwise.compiled import Compiler as Compiler  # with every builder registered
from engine.etl.rowwise.plan_tree import Node

#: The Catalyst expression classes the evaluator implements.
SUPPORTED: frozenset[str] = frozenset(BUILDERS)


def compile_expression(
    node: Node, attributes: Mapping[int, str], session: Session | None = None
) -> Compiled:
    """``node`` compiled against input columns: ``attributes`` maps each input
    attribute's expression id to the name of the column holding its value."""
    return Compiler(session or Session(), attributes).compile(node)
