"""The registry's state, durable in SQLite: schemas with global ids, subject versions, config.

Every operation opens its own connection and runs in one SQLite transaction (writes take
the write lock up front with ``BEGIN IMMEDIATE``), so concurrent requests, threads and
even processes sharing the database see a consistent registry. The database runs in WAL
mode with ``synchronous=FULL``: a registered schema survives a crash of the process.

Semantics (Confluent-compatible):

- A schema's id is global: the same schema type, normalized text (see
  ``compat.normalized_json``) and references get the same id in every subject. Ids are
  never reused, and a schema row is kept even when every version using it is permanently
  deleted, so old records stay decodable.
- Registering a schema a subject already has (as a live version) returns its id and adds
  no version. Versions grow from 1 and are not reused after a soft delete.
- Deletes are soft first (the version disappears from reads unless ``deleted=true``);
  a permanent delete needs a soft delete first, as in Confluent. Deleting a subject also
  drops its compatibility level; a version another live schema references cannot be
  deleted (42206).
- AVRO schemas are parsed and checked for compatibility. JSON and PROTOBUF schemas are
  stored as opaque text (JSON must parse as JSON): no compatibility check between them,
  but changing a subject's schema type is incompatible unless the level is NONE.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.registry.compat import (
    LEVELS,
    AvroSchema,
    InvalidSchemaError,
    check_compatibility,
    normalize_level,
    normalized_json,
    parse_avro,
)

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
DEFAULT_COMPATIBILITY = "BACKWARD"
MAX_VERSION = 2**31 - 1
_GLOBAL = ""  # the config scope of the registry-wide compatibility level

_DDL = """
CREATE TABLE IF NOT EXISTS schemas (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    schema_type TEXT NOT NULL,
    schema TEXT NOT NULL,
    refs TEXT NOT NULL DEFAULT '[]',
    fingerprint TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS subject_versions (
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_id INTEGER NOT NULL REFERENCES schemas(id),
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, version)
);
CREATE INDEX IF NOT EXISTS subject_versions_by_schema ON subject_versions (schema_id);
CREATE TABLE IF NOT EXISTS config (
    scope TEXT PRIMARY KEY,
    compatibility TEXT NOT NULL
);
"""


class RegistryError(Exception):
    """A Confluent-style error: HTTP status, Schema Registry error code and message."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        f'between [1, {MAX_VERSION}] and the string "latest"',
    )


def invalid_compatibility(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level {level!r}. Valid values are {', '.join(LEVELS)}",
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def store_error(exc: BaseException) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {exc}")


def parse_version(text: str | int) -> int | None:
    """A version path segment: an int in [1, 2^31-1], or None for "latest" (or -1)."""
    if isinstance(text, str) and text.strip().lower() == "latest":
        return None
    try:
        version = int(text)
    except (TypeError, ValueError):
        raise invalid_version(text) from None
    if version == -1:
        return None
    if not 1 <= version <= MAX_VERSION:
        raise invalid_version(text)
    return version


@dataclass(frozen=True)
class Reference:
    """A named type defined by another subject's version (Confluent schema references)."""

    name: str
    subject: str
    version: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


def parse_references(raw: object) -> tuple[Reference, ...]:
    """References from a request body; 42201 when their shape is wrong."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise invalid_schema("Invalid schema: references must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise invalid_schema("Invalid schema: each reference must be an object")
        name, subject, version = item.get("name"), item.get("subject"), item.get("version")
        if not isinstance(name, str) or not name or not isinstance(subject, str) or not subject:
            raise invalid_schema("Invalid schema: a reference needs a name and a subject")
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not (version == -1 or 1 <= version <= MAX_VERSION)
        ):
            raise invalid_schema(
                f"Invalid schema: reference {name!r} has invalid version {version!r}"
            )
        out.append(Reference(name, subject, version))
    return tuple(out)


def normalize_schema_type(schema_type: object) -> str:
    """AVRO, JSON or PROTOBUF (None means AVRO); 42201 for anything else."""
    if schema_type is None:
        return "AVRO"
    if isinstance(schema_type, str) and schema_type.strip().upper() in SCHEMA_TYPES:
        return schema_type.strip().upper()
    raise invalid_schema(
        f"Invalid schema: unsupported schemaType {schema_type!r}; supported: {', '.join(SCHEMA_TYPES)}"
    )


@dataclass(frozen=True)
class SchemaRecord:
    """A schema as stored under its global id."""

    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject and the schema it holds."""

    subject: str
    version: int
    deleted: bool
    record: SchemaRecord


@dataclass(frozen=True)
class _Candidate:
    schema_type: str
    schema: str
    references: tuple[Reference, ...]
    fingerprint: str
    avro: AvroSchema | None


class RegistryStore:
    """The registry operations over one SQLite database file."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        # Writers in this process queue here (fast hand-over) rather than in SQLite's busy
        # handler, which sleeps in growing steps; other processes still wait on SQLite's lock.
        self._write_lock = threading.Lock()
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_DDL)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise store_error(exc) from exc

    # -- transactions -------------------------------------------------------------

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise store_error(exc) from exc
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise store_error(exc) from exc
        finally:
            conn.close()

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._transaction("BEGIN")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock, self._transaction("BEGIN IMMEDIATE") as conn:
            yield conn

    # -- reads --------------------------------------------------------------------

    def subjects(
        self, prefix: str = "", deleted: bool = False, deleted_only: bool = False
    ) -> list[str]:
        """Subject names, sorted. Soft-deleted subjects only with ``deleted``/``deleted_only``."""
        if deleted_only:
            having = "HAVING SUM(deleted = 0) = 0"
        elif deleted:
            having = ""
        else:
            having = "HAVING SUM(deleted = 0) > 0"
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT subject FROM subject_versions WHERE substr(subject, 1, ?) = ? "
                f"GROUP BY subject {having} ORDER BY subject",
                (len(prefix), prefix),
            ).fetchall()
        return [row[0] for row in rows]

    def versions(
        self, subject: str, deleted: bool = False, deleted_only: bool = False
    ) -> list[int]:
        """A subject's version numbers, ascending; 40401 when it has none to show."""
        with self._read() as conn:
            rows = self._version_rows(conn, subject)
        if not any(deleted or deleted_only or not d for _, _, d in rows):
            raise subject_not_found(subject)
        if deleted_only:
            return [v for v, _, d in rows if d]
        return [v for v, _, d in rows if deleted or not d]

    def get_version(
        self, subject: str, version: int | None, deleted: bool = False
    ) -> SubjectVersion:
        """A subject's version (None: the latest); 40401 / 40402 when missing."""
        with self._read() as conn:
            return self._get_version(conn, subject, version, deleted)

    def get_schema(self, schema_id: int) -> SchemaRecord:
        """The schema with this id; 40403 when there is none."""
        with self._read() as conn:
            record = self._schema(conn, schema_id)
        if record is None:
            raise schema_not_found(f"Schema {schema_id} not found")
        return record

    def schema_versions(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """The (subject, version) pairs holding this schema id; 40403 when unknown."""
        with self._read() as conn:
            if self._schema(conn, schema_id) is None:
                raise schema_not_found(f"Schema {schema_id} not found")
            rows = conn.execute(
                "SELECT subject, version, deleted FROM subject_versions WHERE schema_id = ? "
                "ORDER BY subject, version",
                (schema_id,),
            ).fetchall()
        return [(s, v) for s, v, d in rows if deleted or not d]

    def referenced_by(self, subject: str, version: int | None) -> list[int]:
        """Ids of live schemas that reference this subject version."""
        with self._read() as conn:
            target = self._get_version(conn, subject, version, deleted=False)
            return self._referencing_ids(conn, subject, [target.version])

    def lookup(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: Sequence[Reference] = (),
        deleted: bool = False,
    ) -> SubjectVersion:
        """The subject version holding this schema (normalized comparison)."""
        with self._read() as conn:
            rows = self._version_rows(conn, subject)
            if not any(deleted or not d for _, _, d in rows):
                raise subject_not_found(subject)
            candidate = self._candidate(conn, schema, schema_type, references)
            found = conn.execute(
                "SELECT sv.version, sv.deleted FROM subject_versions sv "
                "JOIN schemas s ON s.id = sv.schema_id "
                "WHERE sv.subject = ? AND s.fingerprint = ? ORDER BY sv.deleted, sv.version DESC",
                (subject, candidate.fingerprint),
            ).fetchall()
            for version, is_deleted in found:
                if deleted or not is_deleted:
                    return self._get_version(conn, subject, version, deleted=True)
        raise schema_not_found("Schema not found")

    # -- register -----------------------------------------------------------------

    def register(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: Sequence[Reference] = (),
    ) -> int:
        """Register a schema under a subject and return its global id.

        Returns the existing id, adding no version, when the subject already holds the
        schema; raises 42201 for an invalid schema and 409 when it breaks the subject's
        compatibility level.
        """
        with self._write() as conn:
            candidate = self._candidate(conn, schema, schema_type, references)
            row = conn.execute(
                "SELECT id FROM schemas WHERE fingerprint = ?", (candidate.fingerprint,)
            ).fetchone()
            schema_id = row[0] if row else None
            if schema_id is not None:
                live = conn.execute(
                    "SELECT 1 FROM subject_versions WHERE subject = ? AND schema_id = ? AND deleted = 0",
                    (subject, schema_id),
                ).fetchone()
                if live:
                    return schema_id
            level = self._effective_level(conn, subject)
            problems = self._incompatibilities(conn, subject, candidate, level)
            if problems:
                raise RegistryError(
                    409,
                    409,
                    f"Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}" (compatibility {level}): ' + "; ".join(problems),
                )
            if schema_id is None:
                schema_id = conn.execute(
                    "INSERT INTO schemas (schema_type, schema, refs, fingerprint) VALUES (?, ?, ?, ?)",
                    (
                        candidate.schema_type,
                        candidate.schema,
                        json.dumps([r.to_dict() for r in candidate.references]),
                        candidate.fingerprint,
                    ),
                ).lastrowid
            (last,) = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM subject_versions WHERE subject = ?",
                (subject,),
            ).fetchone()
            conn.execute(
                "INSERT INTO subject_versions (subject, version, schema_id) VALUES (?, ?, ?)",
                (subject, last + 1, schema_id),
            )
            assert schema_id is not None
            return schema_id

    def test_compatibility(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: Sequence[Reference] = (),
        version: int | None | str = "all",
    ) -> list[str]:
        """Why the schema would break compatibility (empty when compatible).

        ``version`` None means the latest version, "all" means every version the subject's
        level compares with, an int that one version (with the level's direction).
        """
        with self._read() as conn:
            candidate = self._candidate(conn, schema, schema_type, references)
            level = self._effective_level(conn, subject)
            if version == "all":
                return self._incompatibilities(conn, subject, candidate, level)
            rows = self._version_rows(conn, subject)
            if not any(not d for _, _, d in rows):
                if version is None:
                    return []  # nothing registered yet: anything is compatible
                raise subject_not_found(subject)
            assert not isinstance(version, str)
            target = self._get_version(conn, subject, version, deleted=False)
            base = level.removesuffix("_TRANSITIVE")
            return self._incompatibilities(conn, subject, candidate, base, only=[target])

    # -- delete -------------------------------------------------------------------

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft-delete a subject's live versions (or purge a soft-deleted subject)."""
        with self._write() as conn:
            rows = self._version_rows(conn, subject)
            live = [v for v, _, d in rows if not d]
            if permanent:
                if not rows:
                    raise subject_not_found(subject)
                if live:
                    raise RegistryError(
                        404,
                        40405,
                        f"Subject '{subject}' was not deleted first before being permanently deleted",
                    )
                versions = [v for v, _, _ in rows]
                self._refuse_if_referenced(conn, subject, versions)
                conn.execute("DELETE FROM subject_versions WHERE subject = ?", (subject,))
            else:
                if not live:
                    raise subject_not_found(subject)
                versions = live
                self._refuse_if_referenced(conn, subject, versions)
                conn.execute(
                    "UPDATE subject_versions SET deleted = 1 WHERE subject = ? AND deleted = 0",
                    (subject,),
                )
            conn.execute("DELETE FROM config WHERE scope = ?", (subject,))
            return versions

    def delete_version(self, subject: str, version: int | None, permanent: bool = False) -> int:
        """Soft-delete one version (None: the latest), or purge a soft-deleted one."""
        with self._write() as conn:
            rows = self._version_rows(conn, subject)
            if not rows or (not permanent and all(d for _, _, d in rows)):
                raise subject_not_found(subject)
            if version is None:
                live = [v for v, _, d in rows if not d]
                if not live:
                    raise version_not_found(subject, "latest")
                version = live[-1]
            state = {v: d for v, _, d in rows}
            if version not in state or (not permanent and state[version]):
                raise version_not_found(subject, version)
            if permanent and not state[version]:
                raise RegistryError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {version} was not deleted first before being "
                    "permanently deleted",
                )
            self._refuse_if_referenced(conn, subject, [version])
            if permanent:
                conn.execute(
                    "DELETE FROM subject_versions WHERE subject = ? AND version = ?",
                    (subject, version),
                )
            else:
                conn.execute(
                    "UPDATE subject_versions SET deleted = 1 WHERE subject = ? AND version = ?",
                    (subject, version),
                )
            return version

    # -- config -------------------------------------------------------------------

    def compatibility(self, subject: str | None = None) -> str | None:
        """The level set for a subject (None when it has none), or the global level."""
        with self._read() as conn:
            if subject is None:
                return self._level(conn, _GLOBAL) or DEFAULT_COMPATIBILITY
            return self._level(conn, subject)

    def effective_compatibility(self, subject: str) -> str:
        """The subject's level, else the global one."""
        with self._read() as conn:
            return self._effective_level(conn, subject)

    def set_compatibility(self, level: object, subject: str | None = None) -> str:
        """Set the global (or a subject's) level; 42203 when it is not a level."""
        try:
            normalized = normalize_level(level)
        except ValueError:
            raise invalid_compatibility(level) from None
        with self._write() as conn:
            conn.execute(
                "INSERT INTO config (scope, compatibility) VALUES (?, ?) "
                "ON CONFLICT (scope) DO UPDATE SET compatibility = excluded.compatibility",
                (_GLOBAL if subject is None else subject, normalized),
            )
        return normalized

    def delete_compatibility(self, subject: str | None = None) -> str:
        """Remove a subject's level (or reset the global one); returns the removed level."""
        with self._write() as conn:
            scope = _GLOBAL if subject is None else subject
            previous = self._level(conn, scope)
            if previous is None:
                if subject is not None:
                    raise subject_config_not_found(subject)
                previous = DEFAULT_COMPATIBILITY
            conn.execute("DELETE FROM config WHERE scope = ?", (scope,))
            return previous

    # -- helpers (inside a transaction) --------------------------------------------

    @staticmethod
    def _version_rows(conn: sqlite3.Connection, subject: str) -> list[tuple[int, int, bool]]:
        rows = conn.execute(
            "SELECT version, schema_id, deleted FROM subject_versions WHERE subject = ? "
            "ORDER BY version",
            (subject,),
        ).fetchall()
        return [(v, i, bool(d)) for v, i, d in rows]

    @staticmethod
    def _schema(conn: sqlite3.Connection, schema_id: int) -> SchemaRecord | None:
        row = conn.execute(
            "SELECT id, schema_type, schema, refs FROM schemas WHERE id = ?", (schema_id,)
        ).fetchone()
        if row is None:
            return None
        refs = tuple(Reference(r["name"], r["subject"], r["version"]) for r in json.loads(row[3]))
        return SchemaRecord(id=row[0], schema_type=row[1], schema=row[2], references=refs)

    def _get_version(
        self, conn: sqlite3.Connection, subject: str, version: int | None, deleted: bool
    ) -> SubjectVersion:
        rows = [r for r in self._version_rows(conn, subject) if deleted or not r[2]]
        if not rows:
            raise subject_not_found(subject)
        if version is None:
            chosen = rows[-1]
        else:
            matches = [r for r in rows if r[0] == version]
            if not matches:
                raise version_not_found(subject, version)
            chosen = matches[0]
        record = self._schema(conn, chosen[1])
        if record is None:  # foreign keys make this impossible; say so if it happens
            raise store_error(
                RuntimeError(f"schema {chosen[1]} of {subject} v{chosen[0]} is missing")
            )
        return SubjectVersion(subject=subject, version=chosen[0], deleted=chosen[2], record=record)

    def _level(self, conn: sqlite3.Connection, scope: str) -> str | None:
        row = conn.execute("SELECT compatibility FROM config WHERE scope = ?", (scope,)).fetchone()
        return row[0] if row else None

    def _effective_level(self, conn: sqlite3.Connection, subject: str) -> str:
        return self._level(conn, subject) or self._level(conn, _GLOBAL) or DEFAULT_COMPATIBILITY

    def _pin(self, conn: sqlite3.Connection, ref: Reference) -> Reference:
        """A reference with version -1 ("latest") pinned to the subject's latest version."""
        if ref.version != -1:
            return ref
        rows = [v for v, _, d in self._version_rows(conn, ref.subject) if not d]
        if not rows:
            raise invalid_schema(
                f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r}, which has no versions"
            )
        return Reference(ref.name, ref.subject, rows[-1])

    def _reference_texts(
        self, conn: sqlite3.Connection, references: Sequence[Reference]
    ) -> list[str]:
        """The texts of every schema reachable through references, dependencies first."""
        out: list[str] = []
        seen: set[tuple[str, int]] = set()

        def visit(refs: Sequence[Reference]) -> None:
            for ref in refs:
                if (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                try:
                    target = self._get_version(conn, ref.subject, ref.version, deleted=True)
                except RegistryError:
                    raise invalid_schema(
                        f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r} "
                        f"version {ref.version}, which does not exist"
                    ) from None
                if target.record.schema_type != "AVRO":
                    raise invalid_schema(
                        f"Invalid schema: reference {ref.name!r} is a "
                        f"{target.record.schema_type} schema, not AVRO"
                    )
                visit(target.record.references)
                out.append(target.record.schema)

        visit(references)
        return out

    def _candidate(
        self,
        conn: sqlite3.Connection,
        schema: str,
        schema_type: str,
        references: Sequence[Reference],
    ) -> _Candidate:
        if not isinstance(schema, str) or not schema.strip():
            raise invalid_schema("Invalid schema: empty schema")
        schema_type = normalize_schema_type(schema_type)
        refs = tuple(self._pin(conn, r) for r in references)
        avro = None
        try:
            if schema_type == "AVRO":
                avro = parse_avro(schema, self._reference_texts(conn, refs))
                normalized = normalized_json(schema)
            elif schema_type == "JSON":
                normalized = normalized_json(schema)
            else:
                normalized = schema.strip()
        except InvalidSchemaError as exc:
            raise invalid_schema(str(exc)) from None
        key = json.dumps(
            [schema_type, normalized, [r.to_dict() for r in refs]],
            separators=(",", ":"),
            ensure_ascii=False,
        )
        fingerprint = hashlib.sha256(key.encode()).hexdigest()
        return _Candidate(schema_type, schema, refs, fingerprint, avro)

    def _parsed(self, conn: sqlite3.Connection, record: SchemaRecord) -> AvroSchema:
        try:
            return parse_avro(record.schema, self._reference_texts(conn, record.references))
        except (InvalidSchemaError, RegistryError) as exc:
            raise store_error(
                RuntimeError(f"stored schema {record.id} no longer parses: {exc}")
            ) from None

    def _incompatibilities(
        self,
        conn: sqlite3.Connection,
        subject: str,
        candidate: _Candidate,
        level: str,
        only: Sequence[SubjectVersion] | None = None,
    ) -> list[str]:
        if level == "NONE":
            return []
        if only is None:
            live = [
                self._get_version(conn, subject, v, deleted=False)
                for v, _, d in self._version_rows(conn, subject)
                if not d
            ]
            targets = live if level.endswith("_TRANSITIVE") else live[-1:]
        else:
            targets = list(only)
        if not targets:
            return []
        changed = [t for t in targets if t.record.schema_type != candidate.schema_type]
        if changed:
            return [
                f"version {t.version} is a {t.record.schema_type} schema and the new schema is "
                f"{candidate.schema_type}"
                for t in changed
            ]
        if candidate.avro is None:
            return []  # JSON / PROTOBUF are stored as opaque text: no compatibility check
        previous = [(t.version, self._parsed(conn, t.record)) for t in targets]
        # The targets are already chosen: compare with each of them.
        base = level.removesuffix("_TRANSITIVE")
        return check_compatibility(candidate.avro, previous, f"{base}_TRANSITIVE")

    def _referencing_ids(
        self, conn: sqlite3.Connection, subject: str, versions: Sequence[int]
    ) -> list[int]:
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

    def _refuse_if_referenced(
        self, conn: sqlite3.Connection, subject: str, versions: Sequence[int]
    ) -> None:
        ids = self._referencing_ids(conn, subject, versions)
        if ids:
            raise RegistryError(
                422,
                42206,
                f"One or more references exist to subject '{subject}' versions "
                f"{', '.join(map(str, versions))} (from schema ids {', '.join(map(str, ids))})",
            )
