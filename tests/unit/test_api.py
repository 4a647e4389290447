"""engine.api, the public surface: each name is imported from its module on first use,
the imports type checkers read say where, and a command loads only what it uses."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import engine.api
from engine.lazy_names import origin

ROOT = Path(__file__).resolve().parents[2]


def type_checking_imports() -> dict[str, tuple[str, str]]:
    """Each name engine.api imports under ``if TYPE_CHECKING:``: its module and its name
    there."""
    tree = ast.parse((ROOT / "engine" / "api.py").read_text(encoding="utf-8"))
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: (node.module or "", alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_imports_type_checkers_read_say_what_origins_says() -> None:
    assert {name: origin(where, name) for name, where in engine.api.ORIGINS.items()} == (
        type_checking_imports()
    )
    assert engine.api.__all__ == list(engine.api.ORIGINS)


def test_every_name_is_the_object_of_its_module() -> None:
    for name, where in engine.api.ORIGINS.items():
        module, attribute = origin(where, name)
        assert getattr(engine.api, name) is getattr(importlib.import_module(module), attribute), name
    assert set(engine.api.__all__) <= set(dir(engine.api))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        _ = engine.api.NoSuchThing  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        exec("from engine.api import NoSuchThing", {})


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return set(out.stdout.split())


def test_a_name_loads_its_module_and_not_the_others() -> None:
    """`from-kafka` pays for the from-kafka loop, not for the ETL (pydantic models) or
    to-kafka; importing engine.api alone loads no engine module but its lazy-name hooks."""
    bare = loaded_after("import engine.api")
    # the PEP 562 hooks' own module (standard library only) and nothing else of the engine
    assert {m for m in bare if m.startswith("engine.")} == {"engine.api", "engine.lazy_names"}
    ingest = loaded_after("from engine.api import FromKafkaService, IngestOptions")
    assert {"engine.services.ingest", "engine.ingest.options"} <= ingest
    assert not {"engine.etl.run", "engine.etl.config", "engine.deliver.loop", "pydantic"} & ingest
