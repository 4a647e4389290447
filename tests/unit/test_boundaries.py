"""The engine is a library: no terminal imports, nothing done at import time."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import engine

FORBIDDEN = ("textual", "typer", "rich", "zync_tui", "pyspark")


def _engine_modules() -> list[str]:
    root = Path(engine.__file__).parent
    return ["engine"] + [
        f"engine.{m.name}" for m in pkgutil.walk_packages([str(root)]) if not m.name.endswith("__main__")
    ]


def test_engine_never_imports_the_console_or_terminal_libraries(tmp_path: Path) -> None:
    modules = _engine_modules()
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert out.stdout.strip() == "", f"engine imported: {out.stdout.strip()}"


def test_importing_the_engine_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = "import engine, engine.lake.pools, engine.spark"
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=tmp_path,
        env={"ZYNC_HOME": str(home), "HOME": str(tmp_path / "h"), "PATH": "/usr/bin:/bin"},
    )
    assert not home.exists()
    assert not (tmp_path / "h").exists()


def test_the_public_surface_imports_no_user_interface_and_no_demo(tmp_path: Path) -> None:
    """`import engine` and `import engine.api` (what the CLI, the console and the demo
    use) load neither the demo, the console's libraries, nor the registry's web stack."""
    forbidden = ("demo", "zync_tui", "textual", "typer", "rich", "fastapi", "pyspark")
    for statement in ("import engine", "import engine.api"):
        code = (
            f"import sys\n{statement}\n"
            f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r})))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
        )
        assert out.stdout.strip() == "", f"{statement} imported: {out.stdout.strip()}"
