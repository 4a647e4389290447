"""The declared Go tools: where each lives in zync's cache, and installing it.

Each entry of ``tools.toml`` names a Go module's command, its version and the oldest Go
that builds it. :func:`install` runs ``go install MODULE@VERSION`` with ``GOBIN`` in the
tool's own directory of the cache (``<cache>/<name>-<version>/bin``), its modules and build
cache beside it (``<cache>/gopath``, ``<cache>/build``) and removed once it is built (a
tool like promtool downloads ~2 GB of modules and builds ~2 GB of objects; its binary is
~120 MB), with ``GOTOOLCHAIN=local``: a Go older than the module needs is a one-line
error, never a toolchain fetched behind the user's back. A tool is built once per
version: a new version in the list is a new directory, and :func:`path` finds the one
declared.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from engine.errors import ZyncError

SETUP_COMMAND = "zync setup"


class GoToolError(ZyncError):
    """A Go tool cannot be found, built or run; the message says what to do."""


@dataclass(frozen=True)
class GoTool:
    name: str
    user: str
    module: str
    version: str
    go: str

    @property
    def spec(self) -> str:
        return f"{self.module}@{self.version}"


def declared() -> dict[str, GoTool]:
    """The tools of ``tools.toml``, by name."""
    text = resources.files("engine.gotools").joinpath("tools.toml").read_text()
    return {
        name: GoTool(name, str(body.get("for", name)), body["module"], body["version"], str(body["go"]))
        for name, body in tomllib.loads(text)["tools"].items()
    }


def tool(name: str) -> GoTool:
    tools = declared()
    if name not in tools:
        raise GoToolError(f"no Go tool {name!r} (declared: {', '.join(tools)})")
    return tools[name]


def cache_dir() -> Path:
    if explicit := os.environ.get("ZYNC_TOOLS_CACHE"):
        return Path(explicit).expanduser() / "go"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zync" / "tools" / "go"


def path(name: str) -> Path:
    """Where the declared version of ``name`` lives (built or not)."""
    found = tool(name)
    return cache_dir() / f"{found.name}-{found.version}" / "bin" / found.name


def installed(name: str) -> Path | None:
    """The built tool, or None."""
    where = path(name)
    return where if where.is_file() and os.access(where, os.X_OK) else None


def require(name: str) -> Path:
    """The built tool; a one-line error saying how to build it otherwise."""
    found = installed(name)
    if found is None:
        raise GoToolError(f"{name} is not built yet: run `{SETUP_COMMAND}` (it builds {tool(name).spec})")
    return found


def _go() -> tuple[str, tuple[int, ...]]:
    """The ``go`` command and its version; a one-line error when there is none."""
    go = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(p, os.X_OK)), None
    )
    if go is None:
        raise GoToolError(
            "Go is needed to build zync's Go tools (promtool): install Go "
            "(https://go.dev/doc/install, or the distribution's golang package)"
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    return go, _version(out.stdout.strip())


def _version(text: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(p) for p in match.groups() if p is not None) if match else (0,)


def install(name: str, progress: Callable[[str], None] = lambda _line: None) -> tuple[Path, float]:
    """Build ``name`` (``go install``) unless it is there; its path and the seconds the
    build took (0 when it was there)."""
    found = installed(name)
    if found is not None:
        return found, 0.0
    spec = tool(name)
    go, have = _go()
    if have < _version(spec.go):
        raise GoToolError(
            f"{spec.name} {spec.version} needs Go {spec.go} or newer; {go} is "
            f"{'.'.join(map(str, have))}: install a newer Go"
        )
    target = path(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GOBIN": str(target.parent),
        "GOPATH": str(cache_dir() / "gopath"),
        "GOCACHE": str(cache_dir() / "build"),
        "GOFLAGS": "-modcacherw",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
    }
    progress(f"{spec.name}: building {spec.spec} with {go} (once; a few minutes)")
    started = time.monotonic()
    done = subprocess.run(
        [go, "install", spec.spec], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    # what the build needed goes (the binary stays): `go clean` empties the module cache
    subprocess.run([go, "clean", "-modcache"], env=env, capture_output=True, check=False)
    shutil.rmtree(cache_dir() / "build", ignore_errors=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise GoToolError(f"`go install {spec.spec}` failed: {last[0]}")
    return target, seconds
