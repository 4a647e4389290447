"""The shape of the code, checked on every module of engine, zync_tui and demo.

* The engine is a library: importing any of its modules loads no terminal library, no
  console, no demo, no Spark, and creates nothing.
* Modules stay small: no module over 600 lines, no class over 300 lines, and each one
  opens with a docstring saying what it owns.
* The engine has no import cycles at module level, and an import inside a function says
  why it is there (a comment on its line, or a comment line heading its group of
  imports: ``# deferred: pyspark``).
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "zync_tui", "demo")
FORBIDDEN = ("textual", "typer", "rich", "zync_tui", "demo", "pyspark")

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300


# ----------------------------------------------------------------------------- the walk


def walk(package: str) -> dict[str, Path]:
    """Every module of ``package``, name -> file, as :func:`pkgutil.walk_packages` with
    the package prefix finds them, without importing anything."""
    root = ROOT / package
    found = {package: root / "__init__.py"}

    def visit(path: Path, prefix: str) -> None:
        for info in pkgutil.iter_modules([str(path)], prefix):
            leaf = info.name.rsplit(".", 1)[-1]
            if info.ispkg:
                found[info.name] = path / leaf / "__init__.py"
                visit(path / leaf, f"{info.name}.")
            else:
                found[info.name] = path / f"{leaf}.py"

    visit(root, f"{package}.")
    return found


ENGINE = walk("engine")
MODULES = {name: path for package in PACKAGES for name, path in walk(package).items()}
#: Python files that are not modules of a package: scripts kept with their data.
SCRIPTS = {"demo/invoices/walk.py"}


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def source_files() -> list[Path]:
    """Every module the walk finds, and the scripts kept with their data."""
    return sorted({*MODULES.values(), *(ROOT / script for script in SCRIPTS)})


def test_the_walk_finds_every_file() -> None:
    files = {p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    assert files == set(source_files())
    assert len(ENGINE) > 100  # the walk goes into every subpackage


# ------------------------------------------------------------------ what importing does


def test_engine_never_imports_the_console_or_terminal_libraries(tmp_path: Path) -> None:
    modules = sorted(name for name in ENGINE if not name.endswith("__main__"))
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


def loaded_after(statement: str, modules: tuple[str, ...], cwd: Path) -> list[str]:
    """Which of ``modules`` (a top-level package stands for its submodules too) a fresh
    interpreter has loaded after running ``statement``."""
    code = (
        f"import sys\n{statement}\n"
        f"wanted = {modules!r}\n"
        "print(','.join(sorted(m for m in sys.modules if m in wanted or m.split('.')[0] in wanted)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_the_public_surface_imports_no_user_interface_and_no_demo(tmp_path: Path) -> None:
    """`import engine` and `import engine.api` (what the CLI, the console and the demo
    use), and every public name in use, load neither the demo, the console's libraries,
    nor the registry's web stack."""
    forbidden = ("demo", "zync_tui", "textual", "typer", "rich", "fastapi", "pyspark")
    every_name = "import engine.api\nfor name in engine.api.__all__: getattr(engine.api, name)"
    for statement in ("import engine", "import engine.api", every_name):
        assert loaded_after(statement, forbidden, tmp_path) == [], statement


def test_the_kafka_loops_import_no_etl_pass_and_no_spark_set_up(tmp_path: Path) -> None:
    """from-kafka and to-kafka without a shaper (the usual ones, started and restarted
    often) import neither the ETL pass nor the Spark set-up; reading an ETL
    configuration's outputs imports its model, not the pass."""
    heavy = ("engine.spark", "engine.etl.run", "engine.etl.inspect", "pyspark")
    for statement in (
        "from engine.ingest.loop import Ingest",
        "from engine.api import DeliveryOutput, deliver_outputs",
        "from engine.api import load_config, config_outputs",
    ):
        assert loaded_after(statement, heavy, tmp_path) == [], statement

# ------------------------------------------------------------------------------- sizes


def classes(tree: ast.Module, prefix: str) -> Iterator[tuple[str, int]]:
    """(qualified name, physical lines with decorators) of every class, nested ones too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield f"{prefix}.{node.name}", node.end_lineno - start + 1


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_no_module_is_over_600_lines() -> None:
    big = {
        rel(p): n
        for p in source_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert big == {}, f"split these by concept: {big}"


def test_no_class_is_over_300_lines() -> None:
    big = {}
    for path in source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, lines in classes(tree, module_name(path)):
            if lines > MAX_CLASS_LINES:
                big[name] = lines
    assert big == {}, f"split these into collaborating classes or functions: {big}"


def test_every_module_opens_with_a_docstring() -> None:
    missing = [
        rel(p) for p in source_files() if ast.get_docstring(ast.parse(p.read_text("utf-8"))) is None
    ]
    assert missing == [], "say what these modules own in a docstring"


# ---------------------------------------------------------------------- import structure


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_level_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports run when the module loads: not in functions, not under TYPE_CHECKING."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not is_type_checking(node.test):
                yield from module_level_imports(node.body)
            yield from module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from module_level_imports(block)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from module_level_imports(node.body)


def imported(name: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The engine modules an import statement of module ``name`` loads (the target and
    its packages, the importer's own packages left out: they are loaded already)."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name.split(".")
            if ENGINE.get(name, Path()).name != "__init__.py":
                package.pop()
            base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        targets = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in ENGINE else base
            for alias in node.names
        ]
    own = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            explicit = i == len(parts)
            if module in ENGINE and module != name and (explicit or module not in own):
                yield module


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in ENGINE.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {m for node in module_level_imports(tree.body) for m in imported(name, node)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_engine_has_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def local_import_runs(tree: ast.Module) -> Iterator[list[ast.Import | ast.ImportFrom]]:
    """Every run of consecutive import statements inside a function (blank lines between
    sections of one run, as isort writes them, do not end it)."""
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        blocks = [function.body]
        for node in ast.walk(function):
            if node is function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue  # nested functions are visited as functions of their own
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    blocks.append(block)
        for block in blocks:
            run: list[ast.Import | ast.ImportFrom] = []
            for statement in [*block, None]:
                if isinstance(statement, ast.Import | ast.ImportFrom):
                    run.append(statement)
                elif run:
                    yield run
                    run = []


def unexplained_imports(path: Path) -> list[int]:
    """Lines of function-local imports with no comment saying why: a run of imports is
    explained by a comment line heading it or a comment on one of its imports' lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    bad: set[int] = set()
    for run in local_import_runs(ast.parse("\n".join(lines))):
        first = run[0].lineno
        heading = first >= 2 and lines[first - 2].strip().startswith("#")
        commented = any(
            "#" in lines[i - 1]
            for node in run
            for i in range(node.lineno, (node.end_lineno or node.lineno) + 1)
        )
        if not (heading or commented):
            bad.update(node.lineno for node in run)
    return sorted(bad)


def test_every_function_local_import_in_the_engine_says_why() -> None:
    bad = {}
    for path in sorted(ENGINE.values()):
        lines = unexplained_imports(path)
        if lines:
            bad[rel(path)] = lines
    assert bad == {}, (
        "an import inside a function defers a heavy import: say which, "
        f"e.g. `# deferred: pyspark` (file: lines) {bad}"
    )
