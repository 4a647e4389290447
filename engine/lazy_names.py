"""Names a module exports without importing them until first used (PEP 562).

Such a module writes down, in one dict, each public name and the module it comes from
(``"Ingest": "engine.ingest.loop"``, or ``"dump_starter_config":
"engine.etl.starter:dump"`` for a name given another there); :func:`lazy_names` makes the
``__getattr__`` that imports a name the first time it is used, so importing the module
itself loads nothing. Type checkers cannot follow a dict: the module also imports every
name under ``if TYPE_CHECKING:``, which costs nothing at run time, and a test checks the
two agree. :mod:`engine.api` is such a module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def origin(where: str, name: str) -> tuple[str, str]:
    """``(module, name there)`` of a public ``name`` written ``module`` or
    ``module:name``."""
    module, _, there = where.partition(":")
    return module, there or name


def lazy_names(
    module: str, origins: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """For module ``module`` (its public names and where each comes from, ``origins``;
    its ``namespace``): ``__getattr__`` (imports a public name on first use and keeps it
    in the namespace) and ``__dir__``."""

    def getattr_(name: str) -> Any:
        where = origins.get(name)
        if where is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        source, there = origin(where, name)
        value = getattr(importlib.import_module(source), there)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *origins})

    return getattr_, dir_
