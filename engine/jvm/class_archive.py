"""Class-data archives: the JVMs zync starts map their classes instead of loading them.

A JVM spends most of its start reading, parsing and verifying classes from jars: Spark's
driver loads ~15,000 before its first query, the embedded broker ~6,000. The JDK can dump
the classes a run loaded into an archive (class-data sharing, ``-XX:ArchiveClassesAtExit``)
that later JVMs map (``-XX:SharedArchiveFile``): measured here, a SparkSession and its
first queries took half the CPU (14 → 7.6 CPU-s, 13 → 7 s), the broker 4.0 → 2.3 CPU-s
until it answers. Nothing else changes: a JVM without an archive runs as before.

An archive holds only the classes of the JVM's own class path (Spark's jars inside
pyspark; the broker's ``-cp``), and is valid only for the Java build and that exact class
path, in its order, each jar at its size and modification time. Its file name is a digest
of all of those (:func:`archive_path`), so an archive made for another Java or for other
jars is never handed to a JVM; a new one is made beside it. Several checkouts or virtual
environments on one machine each keep theirs: a JVM given an archive marks it used, and
an archive unused for :data:`KEEP_UNUSED_DAYS` is removed when another is made.

``zync setup`` makes them (:func:`make`), in zync's JVM cache next to the artifacts
(``<cache>/class-archives``); the README's set-up commands run it. ``$ZYNC_CLASS_ARCHIVES``
set to ``off`` stops zync from passing or making any. Nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ZyncError
from engine.jvm.artifacts import cache_dir
from engine.jvm.java import resolve_java

#: ``off`` (or ``0``, ``false``, ``no``): no archive is passed to a JVM or made.
SWITCH_VAR = "ZYNC_CLASS_ARCHIVES"

_OFF = frozenset({"off", "0", "false", "no"})

#: An archive no JVM was given for this many days is removed when another is made.
KEEP_UNUSED_DAYS = 14


class ClassArchiveError(ZyncError):
    """An archive could not be made (one line; zync runs on without it)."""


@dataclass(frozen=True)
class ClassArchive:
    """The archive of a JVM kind: where it is, and whether this call made it."""

    kind: str
    path: Path
    new: bool

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def enabled() -> bool:
    """False when ``$ZYNC_CLASS_ARCHIVES`` turns archives off."""
    return os.environ.get(SWITCH_VAR, "").strip().lower() not in _OFF


def archive_dir() -> Path:
    """Where archives live: ``class-archives`` in zync's JVM cache."""
    return cache_dir() / "class-archives"


def _java_identity() -> list[str]:
    """What names the Java build: its home, its ``release`` file and its JVM library."""
    java = resolve_java()
    home = java.home.resolve()
    parts = [str(home)]
    with contextlib.suppress(OSError):
        parts.append((home / "release").read_text())
    for library in sorted(home.glob("lib/server/libjvm.*")):
        stat = library.stat()
        parts.append(f"{library.name} {stat.st_size} {stat.st_mtime_ns}")
    return parts


def _entry(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path} missing"
    if path.is_dir():
        return f"{path} dir {sorted(os.listdir(path))}"
    return f"{path} {stat.st_size} {stat.st_mtime_ns}"


def archive_path(kind: str, classpath: Sequence[Path]) -> Path:
    """The archive of the JVM ``kind`` for this Java and this class path (in order)."""
    digest = hashlib.sha256()
    for part in [kind, *_java_identity(), *(_entry(Path(p)) for p in classpath)]:
        digest.update(part.encode())
        digest.update(b"\0")
    return archive_dir() / f"{kind}-{digest.hexdigest()[:20]}.jsa"


def use_options(kind: str, classpath: Sequence[Path]) -> list[str]:
    """The JVM options that map the archive of ``kind`` for ``classpath``; none when
    archives are off or none was made for it."""
    if not enabled():
        return []
    path = archive_path(kind, classpath)
    if not path.is_file():
        return []
    with contextlib.suppress(OSError):  # marks it used; a read-only cache keeps it anyway
        os.utime(path)
    return [f"-XX:SharedArchiveFile={path}"]


def dump_options(target: Path) -> list[str]:
    """The JVM options that write the classes a run loaded into ``target`` at its exit
    (the JDK's notes about classes it leaves out are not printed)."""
    return [f"-XX:ArchiveClassesAtExit={target}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def spark_classpath() -> list[Path]:
    """The class path Spark's launcher gives the driver: pyspark's ``conf`` directory,
    then its jars in directory order (how the launcher expands ``jars/*``)."""
    import pyspark  # deferred: pyspark is heavy and only a session needs it

    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    conf = Path(os.environ.get("SPARK_CONF_DIR") or home / "conf")
    jars = home / "jars"
    names = [name for name in os.listdir(jars) if name.endswith(".jar")] if jars.is_dir() else []
    return [conf, *(jars / name for name in names)]


def make(kind: str, classpath: Sequence[Path], run: Callable[[list[str]], None]) -> ClassArchive:
    """Make the archive of ``kind`` for ``classpath`` unless it exists, and return it.

    ``run(options)`` starts the JVM with ``options`` on that class path, gives it some
    representative work and returns once the JVM has exited (the JDK writes the archive
    as the JVM exits). The archive appears under its final name only when complete;
    archives of ``kind`` unused for :data:`KEEP_UNUSED_DAYS` go. Raises
    :class:`ClassArchiveError`."""
    path = archive_path(kind, classpath)
    if path.is_file():
        return ClassArchive(kind, path, new=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        run(dump_options(partial))
        if not partial.is_file() or partial.stat().st_size == 0:
            raise ClassArchiveError(f"the {kind} JVM exited without writing its class archive")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    unused_since = time.time() - KEEP_UNUSED_DAYS * 86_400
    for old in path.parent.glob(f"{kind}-*.jsa"):
        with contextlib.suppress(OSError):
            if old != path and old.stat().st_mtime < unused_since:
                old.unlink()
    return ClassArchive(kind, path, new=True)
