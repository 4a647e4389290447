"""Class archives (engine.jvm.class_archive): named after the Java and the exact class
path, handed to a JVM only when made for both, made atomically, kept while used, and
none at all with ``$ZYNC_CLASS_ARCHIVES=off``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine.jvm import class_archive
from engine.jvm.class_archive import ClassArchiveError, archive_path, make, use_options


@pytest.fixture
def jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.setenv("ZYNC_JVM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.SWITCH_VAR, raising=False)
    made = []
    for name in ("a.jar", "b.jar"):
        jar = tmp_path / name
        jar.write_bytes(b"jar " + name.encode())
        made.append(jar)
    return made


def _writes(payload: bytes = b"classes"):
    calls: list[list[str]] = []

    def run(options: list[str]) -> None:
        calls.append(options)
        (target,) = [o.split("=", 1)[1] for o in options if o.startswith("-XX:ArchiveClassesAtExit=")]
        Path(target).write_bytes(payload)

    return run, calls


def test_the_name_follows_the_jars_their_order_and_the_kind(jars: list[Path]) -> None:
    first = archive_path("spark", jars)
    assert first == archive_path("spark", list(jars))
    assert first.parent == Path(os.environ["ZYNC_JVM_CACHE"]) / "class-archives"
    assert archive_path("spark", jars[::-1]) != first
    assert archive_path("kafka", jars) != first
    stat = jars[0].stat()
    os.utime(jars[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert archive_path("spark", jars) != first  # a jar replaced: the archive no longer fits
    jars[1].write_bytes(b"a longer jar")
    assert archive_path("spark", jars) != first


def test_made_once_then_handed_to_the_jvm(jars: list[Path]) -> None:
    assert use_options("spark", jars) == []
    run, calls = _writes()
    archive = make("spark", jars, run)
    assert archive.new
    assert archive.path == archive_path("spark", jars)
    assert archive.path.read_bytes() == b"classes"
    assert [o for o in calls[0] if o.startswith("-XX:")] == [
        o for o in calls[0] if o.startswith("-XX:ArchiveClassesAtExit=")
    ]
    assert use_options("spark", jars) == [f"-XX:SharedArchiveFile={archive.path}"]
    again = make("spark", jars, run)
    assert not again.new
    assert len(calls) == 1
    assert [p.name for p in archive.path.parent.iterdir()] == [archive.path.name]  # no partial


def test_archives_for_other_jars_stay_until_unused_for_long(jars: list[Path]) -> None:
    run, _ = _writes()
    old = make("spark", jars, run).path
    kafka = make("kafka", jars, run).path
    jars[0].write_bytes(b"a new version of the jar")
    assert use_options("spark", jars) == []  # never the old one
    new = make("spark", jars, run).path
    assert new != old
    assert old.is_file()  # another checkout may still use it
    assert kafka.is_file()
    long_ago = time.time() - (class_archive.KEEP_UNUSED_DAYS + 1) * 86_400
    os.utime(old, (long_ago, long_ago))
    os.utime(kafka, (long_ago, long_ago))
    jars[1].write_bytes(b"yet another jar")
    newest = make("spark", jars, run).path
    assert not old.exists()  # unused for long: removed
    assert new.is_file()
    assert newest.is_file()
    assert kafka.is_file()  # another kind: left alone


def test_a_jvm_given_an_archive_marks_it_used(jars: list[Path]) -> None:
    run, _ = _writes()
    path = make("spark", jars, run).path
    long_ago = time.time() - 30 * 86_400
    os.utime(path, (long_ago, long_ago))
    assert use_options("spark", jars) == [f"-XX:SharedArchiveFile={path}"]
    assert path.stat().st_mtime > time.time() - 60


def test_a_jvm_that_writes_nothing_is_an_error_and_leaves_nothing(jars: list[Path]) -> None:
    with pytest.raises(ClassArchiveError, match="exited without writing its class archive"):
        make("spark", jars, lambda options: None)
    run, _ = _writes(b"")
    with pytest.raises(ClassArchiveError):
        make("spark", jars, run)
    assert list(archive_path("spark", jars).parent.iterdir()) == []


def test_off_means_none_is_passed(jars: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = _writes()
    path = make("spark", jars, run).path
    monkeypatch.setenv(class_archive.SWITCH_VAR, "off")
    assert not class_archive.enabled()
    assert use_options("spark", jars) == []
    assert path.is_file()
