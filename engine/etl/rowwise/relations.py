"""The input of a compiled plan: the relation whose rows the caller supplies, and the
attributes (expression id → column name) it outputs.

The evaluator computes nothing below that relation: the caller hands it the relation's
rows (a rule's view of one match, a typed pool record, a left and a right record). Its
output attributes are read from the plan: the ``output`` of a leaf relation, the
select list of a ``Project``, both sides of a ``Join``, the child's through an alias,
a view or a filter.
"""

from __future__ import annotations

from engine.etl.rowwise.plan_tree import Node, tree
from engine.etl.rowwise.references import expr_id
from engine.etl.rowwise.unsupported import Unsupported

#: Nodes whose output is their (first) child's.
_PASS_THROUGH = frozenset(
    {"SubqueryAlias", "View", "Filter", "Sort", "Limit", "GlobalLimit", "LocalLimit",
     "Distinct", "Deduplicate", "Repartition", "RepartitionByExpression", "ResolvedHint",
     "Union", "WithCTE"}
)  # fmt: skip


def output(node: Node) -> list[tuple[int, str]]:
    """``(expression id, name)`` of each attribute ``node`` outputs, in order."""
    if node.name == "Project":
        found = []
        for item in node.expression_list("projectList"):
            if item.expression not in ("Alias", "AttributeReference"):
                raise Unsupported(f"a select list item {item.name} without a name")
            found.append((expr_id(item), str(item.fields["name"])))
        return found
    if node.name == "Join":
        return [pair for child in node.children for pair in output(child)]
    if node.name in _PASS_THROUGH and node.children:
        return output(node.children[-1] if node.name == "WithCTE" else node.children[0])
    if "output" in node.fields:
        found = []
        for item in node.fields["output"] or []:
            attribute = tree(item)
            found.append((expr_id(attribute), str(attribute.fields["name"])))
        return found
    raise Unsupported(f"the input relation {node.name}")


def attributes(node: Node) -> dict[int, str]:
    """The input attributes of a relation: expression id → column name. Unsupported
    when two columns share a name (the caller's row could not tell them apart)."""
    pairs = output(node)
    names = [name for _, name in pairs]
    if len(set(names)) != len(names):
        raise Unsupported("an input relation with two columns of one name")
    return dict(pairs)
