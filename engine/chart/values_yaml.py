"""values.yaml as a person reads it: every value in the schema's order, its description
as a comment above it, and the values a section may also take commented out."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import yaml

WIDTH = 92


def render(schema: Mapping[str, Any], values: Mapping[str, Any], header: str) -> str:
    """The commented YAML of ``values`` (whose keys follow ``schema``)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for key in _keys(schema, values):
        lines.append("")
        _entry(lines, key, schema.get("properties", {}).get(key, {}), values, 0)
    return "\n".join(lines) + "\n"


def _keys(schema: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    known = list(schema.get("properties", {}))
    return [k for k in known if k in values] + [k for k in values if k not in known]


def _comment(lines: list[str], text: str | None, indent: int) -> None:
    if not text:
        return
    pad = " " * indent
    for line in textwrap.wrap(" ".join(text.split()), WIDTH - indent - 2):
        lines.append(f"{pad}# {line}")


def _entry(lines: list[str], key: str, node: Mapping[str, Any], values: Mapping[str, Any], indent: int) -> None:
    pad = " " * indent
    value = values[key]
    _comment(lines, node.get("description"), indent)
    children = node.get("properties")
    if children and isinstance(value, Mapping) and value:
        lines.append(f"{pad}{key}:")
        own = "default" in node  # a section with defaults of its own (a role): their order
        for child in list(value) if own else _keys(node, value):
            _entry(lines, child, children.get(child, {}), value, indent + 2)
        for child, child_node in children.items():
            if child not in value:
                about = " ".join(str(child_node.get("description", "")).split())
                lines.append(f"{pad}  # {child}: {about}".rstrip())
        return
    lines.append(f"{pad}{key}:{_scalar_or_block(value, indent)}")


def _scalar_or_block(value: Any, indent: int) -> str:
    if isinstance(value, Mapping | list) and value and not _flat(value):
        block = str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=WIDTH))
        return "\n" + textwrap.indent(block.rstrip("\n"), " " * (indent + 2))
    text = str(yaml.safe_dump(value, sort_keys=False, default_flow_style=True, width=10_000)).strip()
    return " " + text.removesuffix("\n...").removesuffix("...").strip()


def _flat(value: Any) -> bool:
    """A small mapping or list of scalars, written on one line."""
    items = value.values() if isinstance(value, Mapping) else value
    return len(value) <= 4 and all(not isinstance(v, Mapping | list) for v in items)
