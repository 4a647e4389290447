"""A rule's ``where`` over a typed pool record, or a denorm's ``join-on`` over a left
and a right record, evaluated row by row (:func:`compile_predicate`, :class:`RowPredicate`).

The plan is Spark's analysis of a one-column select of the condition over the input
(as :func:`engine.etl.check.check_rules` builds it): ``Project [cond AS b]`` over a
relation whose columns the caller supplies by name — ``seqno, kafka, key, value`` for
``where``, ``left`` and ``right`` for ``join-on``. The result is three-valued, as in
Spark: True, False or None (NULL), and only True matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.etl.rowwise.analysed import Analysed
from engine.etl.rowwise.compiled import Function
from engine.etl.rowwise.compiler import Compiler
from engine.etl.rowwise.datatypes import BOOLEAN, VOID
from engine.etl.rowwise.plan_tree import tree
from engine.etl.rowwise.relations import attributes
from engine.etl.rowwise.unsupported import UNFORESEEN, Unsupported, unforeseen


@dataclass(frozen=True)
class RowPredicate:
    """A compiled condition: :meth:`test` gives True, False or None for one input row."""

    fn: Function
    used: frozenset[str]

    def test(self, row: Mapping[str, Any]) -> bool | None:
        try:
            return self.fn(row)  # type: ignore[no-any-return]
        except UNFORESEEN as exc:
            raise unforeseen(exc) from exc

    def matches(self, row: Mapping[str, Any]) -> bool:
        """Whether the condition is true (NULL is not)."""
        return self.test(row) is True


def compile_predicate(analysed: Analysed) -> RowPredicate:
    """Compile the analysed ``SELECT <condition> FROM <input>``; Unsupported for a
    condition not implemented exactly."""
    try:
        return _compile_predicate(analysed)
    except UNFORESEEN as exc:
        raise unforeseen(exc) from exc


def _compile_predicate(analysed: Analysed) -> RowPredicate:
    root = tree(analysed.plan)
    if root.name != "Project" or len(root.children) != 1:
        raise Unsupported(f"a condition whose plan is a {root.name}")
    items = root.expression_list("projectList")
    if len(items) != 1:
        raise Unsupported("a condition plan of several columns")
    compiler = Compiler(analysed.session, attributes(root.children[0]))
    compiled = compiler.compile(items[0])
    if compiled.type not in (BOOLEAN, VOID):
        raise Unsupported(f"a condition of type {compiled.type}")
    return RowPredicate(compiled.fn, frozenset(compiler.used))
