"""The import contracts in pyproject.toml cover modules nobody listed: a throwaway module
added to a temp copy of the packages is caught by `lint-imports` run on that copy.

* an engine module that imports a UI library (textual) breaks "the engine imports no
  user interface";
* a CLI module that imports an engine module other than engine.api — a new one, which no
  list in pyproject.toml names — breaks "the CLI ... use the engine only through
  engine.api".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "zync_tui", "demo")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The three packages and pyproject.toml, copied (no caches, no data files)."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            tmp_path / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "files", "invoices"),
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with ``root``'s configuration, importing ``root``'s packages."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}  # one contract a line
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )


def broken(output: str) -> list[str]:
    """The names of the contracts `lint-imports` reports broken (``NAME BROKEN``, maybe
    followed by a count of ignored imports)."""
    return [line.partition(" BROKEN")[0].strip() for line in output.splitlines() if " BROKEN" in line]


def test_an_engine_module_importing_a_ui_library_breaks_the_contract(copy: Path) -> None:
    (copy / "engine" / "throwaway_panel.py").write_text(
        '"""A throwaway module that should not be here."""\n\nimport textual\n\n__all__ = ["textual"]\n',
        encoding="utf-8",
    )
    result = lint_imports(copy)
    assert result.returncode != 0, result.stdout
    assert broken(result.stdout) == ["The engine imports no user interface and no demo"], result.stdout
    assert "engine.throwaway_panel -> textual" in result.stdout


def test_the_cli_importing_an_engine_module_other_than_the_api_breaks_the_contract(copy: Path) -> None:
    (copy / "engine" / "newcomer.py").write_text(
        '"""A new engine module, named in no list of pyproject.toml."""\n\nANSWER = 42\n',
        encoding="utf-8",
    )
    (copy / "zync_tui" / "throwaway.py").write_text(
        '"""A throwaway CLI module that reaches past engine.api."""\n\n'
        "from engine.newcomer import ANSWER\n\n__all__ = [\"ANSWER\"]\n",
        encoding="utf-8",
    )
    result = lint_imports(copy)
    assert result.returncode != 0, result.stdout
    assert broken(result.stdout) == [
        "The CLI, the console and the demo use the engine only through engine.api"
    ], result.stdout
    assert "zync_tui.throwaway -> engine.newcomer" in result.stdout
