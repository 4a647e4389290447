"""The JVM artifacts zync runs with: the declared sets, their resolution and their class paths.

``artifacts.toml`` (next to this module) is the one declared list of Maven coordinates,
grouped in sets by what uses them: ``spark`` (loaded into every SparkSession: delta-spark
and Spark's Kafka source) and ``kafka`` (the embedded broker). :func:`fetch` resolves a
set with its transitive dependencies into zync's cache — with Maven when ``mvn`` is
installed, else with the Ivy that ships inside pyspark (the resolver behind Spark's own
``spark.jars.packages``) — so both reach Maven Central the same way and, once fetched,
zync needs no network. :func:`classpath` gives the jars of a fetched set, or raises
:class:`MissingArtifacts`, one line naming the command that fetches them (``zync setup``).

The cache is ``$ZYNC_JVM_CACHE``, else ``$XDG_CACHE_HOME/zync/jvm``, else
``~/.cache/zync/jvm``; each set lives in a directory named after a digest of its
coordinates, so changing a version fetches the new set beside the old one.
Nothing happens at import time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape

from engine.errors import ZyncError
from engine.jvm.java import resolve_java

SETUP_COMMAND = "zync setup"
_MANIFEST = "resolved.json"
_MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_FETCH_TIMEOUT = 1800.0


class MissingArtifacts(ZyncError):
    """A set of JVM artifacts is not in the cache (or cannot be fetched); one line."""


@dataclass(frozen=True, order=True)
class Coordinate:
    """A Maven coordinate ``group:artifact:version``."""

    group: str
    artifact: str
    version: str

    @classmethod
    def parse(cls, text: str) -> Coordinate:
        parts = text.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"not a Maven coordinate group:artifact:version: {text!r}")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


@dataclass(frozen=True)
class ArtifactSet:
    """One declared set: its name, who uses it, what it is for, its top-level coordinates."""

    name: str
    user: str
    purpose: str
    artifacts: tuple[Coordinate, ...]
    optional: bool = False  # fetched only on demand (``zync setup --with NAME``)

    @property
    def digest(self) -> str:
        text = "\n".join(str(c) for c in self.artifacts)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class ResolvedJar:
    coordinate: Coordinate
    path: Path


@dataclass(frozen=True)
class Resolved:
    """A fetched set: every jar of its transitive closure, and how it was resolved."""

    artifact_set: ArtifactSet
    jars: tuple[ResolvedJar, ...]
    resolver: str

    def paths(self) -> list[Path]:
        return [jar.path for jar in self.jars]


def declared_sets() -> dict[str, ArtifactSet]:
    """The sets declared in ``artifacts.toml``, by name."""
    text = resources.files("engine.jvm").joinpath("artifacts.toml").read_text()
    data = tomllib.loads(text)
    return {
        name: ArtifactSet(
            name=name,
            user=str(body.get("for", name)),
            purpose=str(body.get("purpose", "")),
            artifacts=tuple(Coordinate.parse(c) for c in body["artifacts"]),
            optional=bool(body.get("optional", False)),
        )
        for name, body in data["sets"].items()
    }


def artifact_set(name: str) -> ArtifactSet:
    sets = declared_sets()
    if name not in sets:
        raise MissingArtifacts(f"no JVM artifact set {name!r} (declared: {', '.join(sets)})")
    return sets[name]


def cache_dir() -> Path:
    """Where fetched sets live (see the module's docstring)."""
    if explicit := os.environ.get("ZYNC_JVM_CACHE"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zync" / "jvm"


def _set_dir(aset: ArtifactSet) -> Path:
    return cache_dir() / f"{aset.name}-{aset.digest}"


def resolved(name: str) -> Resolved | None:
    """The fetched set ``name``, or None when it is not in the cache (or incomplete)."""
    aset = artifact_set(name)
    directory = _set_dir(aset)
    try:
        manifest = json.loads((directory / _MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    jars = tuple(
        ResolvedJar(Coordinate.parse(item["coordinate"]), directory / item["path"])
        for item in manifest["jars"]
    )
    if not all(jar.path.is_file() for jar in jars):
        return None
    return Resolved(aset, jars, str(manifest.get("resolver", "?")))


def classpath(name: str) -> list[Path]:
    """The jars of the fetched set ``name``; raises :class:`MissingArtifacts` when absent."""
    found = resolved(name)
    if found is None:
        aset = artifact_set(name)
        command = f"{SETUP_COMMAND} --with {name}" if aset.optional else SETUP_COMMAND
        raise MissingArtifacts(
            f"the JVM artifacts for {aset.user} are not in {cache_dir()}: run "
            f"`{command}` to fetch them (it needs Maven Central once), or set "
            "$ZYNC_JVM_CACHE to where they are"
        )
    return found.paths()


def fetch(
    name: str,
    *,
    resolver: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Resolved:
    """Resolve the set ``name`` into the cache (nothing to do when it is there already).

    ``resolver`` is ``"maven"`` or ``"ivy"``; by default Maven when ``mvn`` is on PATH,
    else Ivy. Raises :class:`MissingArtifacts` (one line, with the resolver's reason)
    when the set cannot be resolved.
    """
    if (found := resolved(name)) is not None:
        return found
    aset = artifact_set(name)
    how = resolver or ("maven" if shutil.which("mvn") else "ivy")
    if progress:
        progress(f"fetching the {aset.name} JVM artifacts with {how}: {aset.purpose}")
    target = _set_dir(aset)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{aset.name}-", dir=target.parent))
    try:
        jars_dir = staging / "jars"
        if how == "maven":
            _maven(aset, jars_dir)
        elif how == "ivy":
            _ivy(aset, jars_dir)
        else:
            raise MissingArtifacts(f"unknown resolver {how!r}: expected maven or ivy")
        jars = _scan(jars_dir, staging)
        manifest = {
            "set": aset.name,
            "resolver": how,
            "declared": [str(c) for c in aset.artifacts],
            "jars": [{"coordinate": str(c), "path": p} for c, p in jars],
        }
        (staging / _MANIFEST).write_text(json.dumps(manifest, indent=1))
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found = resolved(name)
    if found is None:  # pragma: no cover - the rename above made it
        raise MissingArtifacts(f"the {name} JVM artifacts vanished from {target}")
    return found


# A jar in Maven's repository layout: group/as/dirs/artifact/version/artifact-version[-cls].jar
def _scan(jars_dir: Path, base: Path) -> list[tuple[Coordinate, str]]:
    found = []
    for jar in sorted(jars_dir.rglob("*.jar")):
        parts = jar.relative_to(jars_dir).parts
        if len(parts) < 4:
            raise MissingArtifacts(f"unexpected jar outside a repository layout: {jar.name}")
        group, artifact, version = ".".join(parts[:-3]), parts[-3], parts[-2]
        found.append((Coordinate(group, artifact, version), str(jar.relative_to(base))))
    if not found:
        raise MissingArtifacts(f"resolving gave no jars in {jars_dir}")
    return found


def _pom(aset: ArtifactSet) -> str:
    deps = "\n".join(
        f"    <dependency><groupId>{escape(c.group)}</groupId>"
        f"<artifactId>{escape(c.artifact)}</artifactId>"
        f"<version>{escape(c.version)}</version></dependency>"
        for c in aset.artifacts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>zync.jvm</groupId><artifactId>{aset.name}</artifactId>"
        "<version>0</version><packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n</project>\n"
    )


def _maven(aset: ArtifactSet, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="zync-mvn-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(aset))
        argv = [
            "mvn", "-B", "-q", "-f", str(pom),
            f"{_MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={out}", "-DincludeScope=runtime",
            "-Dmdep.useRepositoryLayout=true", "-Dmdep.copyPom=false",
        ]  # fmt: skip
        _run(argv, "Maven", aset)


def _ivy_xml(aset: ArtifactSet) -> str:
    deps = "\n".join(
        f'    <dependency org="{escape(c.group)}" name="{escape(c.artifact)}" '
        f'rev="{escape(c.version)}" conf="default->runtime(*),master(*)"/>'
        for c in aset.artifacts
    )
    return (
        '<ivy-module version="2.0">\n'
        f'  <info organisation="zync.jvm" module="{aset.name}"/>\n'
        f"  <dependencies>\n{deps}\n  </dependencies>\n</ivy-module>\n"
    )


def ivy_jar() -> Path:
    """The Ivy jar pyspark ships (Spark resolves ``spark.jars.packages`` with it)."""
    import pyspark  # deferred: only the Ivy path needs pyspark's location

    jars = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("ivy-*.jar"))
    if not jars:
        raise MissingArtifacts("no Ivy jar in pyspark's jars: install Maven (`mvn`) instead")
    return jars[-1]


def _ivy(aset: ArtifactSet, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="zync-ivy-") as work:
        ivy_file = Path(work) / "ivy.xml"
        ivy_file.write_text(_ivy_xml(aset))
        pattern = str(out) + "/[orgPath]/[artifact]/[revision]/[artifact]-[revision](-[classifier]).[ext]"
        argv = [
            str(resolve_java().binary), "-jar", str(ivy_jar()),
            "-ivy", str(ivy_file), "-confs", "default",
            "-cache", str(cache_dir() / "ivy-cache"), "-retrieve", pattern,
            "-m2compatible",
        ]  # fmt: skip
        _run(argv, "Ivy", aset)


def _run(argv: list[str], tool: str, aset: ArtifactSet) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_FETCH_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingArtifacts(f"{tool} could not fetch the {aset.name} artifacts: {exc}") from None
    if done.returncode != 0:
        raise MissingArtifacts(
            f"{tool} could not fetch the {aset.name} artifacts: {_reason(done.stdout + done.stderr)}"
        )


def _reason(output: str) -> str:
    """The first meaningful error line of Maven's or Ivy's output."""
    for line in output.splitlines():
        text = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if text.startswith("[ERROR]") and len(text) > len("[ERROR] "):
            return text.removeprefix("[ERROR]").strip()
        if "unresolved dependency" in text.lower() or "not found" in text.lower():
            return text
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
