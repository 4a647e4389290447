"""Names a module exports without importing them until first used (PEP 562).

A module lists where each of its names comes from once, as ``from X import Y`` under
``if TYPE_CHECKING:``: type checkers read those imports, and :func:`lazy_names` reads them
too (from the module's source, at the first use of a name), so the module itself loads
nothing. :mod:`engine.api` is such a module.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Collection, MutableMapping
from functools import cache
from pathlib import Path
from typing import Any


def type_checking_imports(source: Path) -> dict[str, tuple[str, str]]:
    """Each name imported under ``if TYPE_CHECKING:`` in ``source``: its module and its
    name there."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: (node.module or "", alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def lazy_names(
    module: str, source: str, public: Collection[str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[], dict[str, tuple[str, str]]], Callable[[str], Any], Callable[[], list[str]]]:
    """For module ``module`` (its file ``source``, its ``public`` names, its
    ``namespace``): ``origins()`` (each public name's module and name there),
    ``__getattr__`` (imports a public name on first use and keeps it in the namespace)
    and ``__dir__``."""

    @cache
    def origins() -> dict[str, tuple[str, str]]:
        return type_checking_imports(Path(source))

    def getattr_(name: str) -> Any:
        where = origins().get(name) if name in public else None
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[0]), where[1])
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *public})

    return origins, getattr_, dir_
