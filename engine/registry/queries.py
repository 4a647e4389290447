"""The registry's reads inside a transaction: a subject's versions, a schema by its id,
compatibility levels, and the live schemas that reference a subject's versions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from engine.registry.errors import (
    RegistryError,
    store_error,
    subject_not_found,
    version_not_found,
)
from engine.registry.schemas import Reference, SchemaRecord, SubjectVersion

DEFAULT_COMPATIBILITY = "BACKWARD"
GLOBAL = ""  # the config scope of the registry-wide compatibility level


def version_rows(conn: sqlite3.Connection, subject: str) -> list[tuple[int, int, bool]]:
    """A subject's ``(version, schema id, deleted)`` rows, by version."""
    rows = conn.execute(
        "SELECT version, schema_id, deleted FROM subject_versions WHERE subject = ? "
        "ORDER BY version",
        (subject,),
    ).fetchall()
    return [(v, i, bool(d)) for v, i, d in rows]


def schema_by_id(conn: sqlite3.Connection, schema_id: int) -> SchemaRecord | None:
    """The schema stored under this id, or None."""
    row = conn.execute(
        "SELECT id, schema_type, schema, refs FROM schemas WHERE id = ?", (schema_id,)
    ).fetchone()
    if row is None:
        return None
    refs = tuple(Reference(r["name"], r["subject"], r["version"]) for r in json.loads(row[3]))
    return SchemaRecord(id=row[0], schema_type=row[1], schema=row[2], references=refs)


def get_version(
    conn: sqlite3.Connection, subject: str, version: int | None, deleted: bool
) -> SubjectVersion:
    """A subject's version (None: the latest), soft-deleted ones too with ``deleted``;
    40401 / 40402 when missing."""
    rows = [r for r in version_rows(conn, subject) if deleted or not r[2]]
    if not rows:
        raise subject_not_found(subject)
    if version is None:
        chosen = rows[-1]
    else:
        matches = [r for r in rows if r[0] == version]
        if not matches:
            raise version_not_found(subject, version)
        chosen = matches[0]
    record = schema_by_id(conn, chosen[1])
    if record is None:  # foreign keys make this impossible; say so if it happens
        raise store_error(RuntimeError(f"schema {chosen[1]} of {subject} v{chosen[0]} is missing"))
    return SubjectVersion(subject=subject, version=chosen[0], deleted=chosen[2], record=record)


def versions_under(
    conn: sqlite3.Connection, prefix: str, deleted: bool, latest_only: bool
) -> list[SubjectVersion]:
    """Every version of the subjects whose names start with ``prefix`` (soft-deleted ones
    too with ``deleted``), or each subject's latest, by subject and version, in one
    query (Confluent's ``GET /schemas``)."""
    rows = conn.execute(
        "SELECT sv.subject, sv.version, sv.deleted, s.id, s.schema_type, s.schema, s.refs "
        "FROM subject_versions sv JOIN schemas s ON s.id = sv.schema_id "
        "WHERE substr(sv.subject, 1, ?) = ? AND (? OR sv.deleted = 0) "
        "ORDER BY sv.subject, sv.version",
        (len(prefix), prefix, deleted),
    ).fetchall()
    found: list[SubjectVersion] = []
    for subject, version, gone, schema_id, schema_type, schema, refs in rows:
        if latest_only and found and found[-1].subject == subject:
            found.pop()  # a later version of the same subject follows
        references = tuple(Reference(r["name"], r["subject"], r["version"]) for r in json.loads(refs))
        record = SchemaRecord(id=schema_id, schema_type=schema_type, schema=schema, references=references)
        found.append(SubjectVersion(subject=subject, version=version, deleted=bool(gone), record=record))
    return found


def level(conn: sqlite3.Connection, scope: str) -> str | None:
    """The compatibility level set for ``scope`` (a subject, or GLOBAL), or None."""
    row = conn.execute("SELECT compatibility FROM config WHERE scope = ?", (scope,)).fetchone()
    return row[0] if row else None


def effective_level(conn: sqlite3.Connection, subject: str) -> str:
    """The subject's level, else the global one, else the default."""
    return level(conn, subject) or level(conn, GLOBAL) or DEFAULT_COMPATIBILITY


def referencing_ids(conn: sqlite3.Connection, subject: str, versions: Sequence[int]) -> list[int]:
    """Ids of live schemas that reference one of these versions of ``subject``."""
    rows = conn.execute(
        "SELECT DISTINCT s.id, s.refs FROM schemas s JOIN subject_versions sv "
        "ON sv.schema_id = s.id AND sv.deleted = 0 WHERE s.refs != '[]' ORDER BY s.id"
    ).fetchall()
    wanted = set(versions)
    return [
        schema_id
        for schema_id, refs in rows
        if any(r["subject"] == subject and r["version"] in wanted for r in json.loads(refs))
    ]


def refuse_if_referenced(conn: sqlite3.Connection, subject: str, versions: Sequence[int]) -> None:
    """42206 when a live schema references one of these versions of ``subject``."""
    ids = referencing_ids(conn, subject, versions)
    if ids:
        raise RegistryError(
            422,
            42206,
            f"One or more references exist to subject '{subject}' versions "
            f"{', '.join(map(str, versions))} (from schema ids {', '.join(map(str, ids))})",
        )
