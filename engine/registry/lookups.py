"""The registry's read operations: subjects, versions, schemas by id and schema lookups.

:class:`SchemaLookups` answers every GET and the "is this schema registered?" lookup of the
REST API, each in one read transaction of :class:`engine.registry.database.Database`.
Soft-deleted versions are shown only when asked for (``deleted`` / ``deleted_only``).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.registry import queries
from engine.registry.candidate import prepare
from engine.registry.database import Database
from engine.registry.errors import schema_not_found, subject_not_found
from engine.registry.schemas import Reference, SchemaRecord, SubjectVersion


class SchemaLookups:
    """Reads of subjects, versions and schemas over one registry database."""

    def __init__(self, db: Database) -> None:
        self.db = db

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
        with self.db.read() as conn:
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
        with self.db.read() as conn:
            rows = queries.version_rows(conn, subject)
        if not any(deleted or deleted_only or not d for _, _, d in rows):
            raise subject_not_found(subject)
        if deleted_only:
            return [v for v, _, d in rows if d]
        return [v for v, _, d in rows if deleted or not d]

    def get_version(
        self, subject: str, version: int | None, deleted: bool = False
    ) -> SubjectVersion:
        """A subject's version (None: the latest); 40401 / 40402 when missing."""
        with self.db.read() as conn:
            return queries.get_version(conn, subject, version, deleted)

    def versions_under(self, prefix: str, deleted: bool, latest_only: bool) -> list[SubjectVersion]:
        """The versions of the subjects under ``prefix`` (:func:`queries.versions_under`)."""
        with self.db.read() as conn:
            return queries.versions_under(conn, prefix, deleted, latest_only)

    def get_schema(self, schema_id: int) -> SchemaRecord:
        """The schema with this id; 40403 when there is none."""
        with self.db.read() as conn:
            record = queries.schema_by_id(conn, schema_id)
        if record is None:
            raise schema_not_found(f"Schema {schema_id} not found")
        return record

    def schema_versions(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """The (subject, version) pairs holding this schema id; 40403 when unknown."""
        with self.db.read() as conn:
            if queries.schema_by_id(conn, schema_id) is None:
                raise schema_not_found(f"Schema {schema_id} not found")
            rows = conn.execute(
                "SELECT subject, version, deleted FROM subject_versions WHERE schema_id = ? "
                "ORDER BY subject, version",
                (schema_id,),
            ).fetchall()
        return [(s, v) for s, v, d in rows if deleted or not d]

    def referenced_by(self, subject: str, version: int | None) -> list[int]:
        """Ids of live schemas that reference this subject version."""
        with self.db.read() as conn:
            target = queries.get_version(conn, subject, version, deleted=False)
            return queries.referencing_ids(conn, subject, [target.version])

    def lookup(
        self,
        subject: str,
        schema: str,
        schema_type: str = "AVRO",
        references: Sequence[Reference] = (),
        deleted: bool = False,
    ) -> SubjectVersion:
        """The subject version holding this schema (normalized comparison)."""
        with self.db.read() as conn:
            rows = queries.version_rows(conn, subject)
            if not any(deleted or not d for _, _, d in rows):
                raise subject_not_found(subject)
            candidate = prepare(conn, schema, schema_type, references)
            found = conn.execute(
                "SELECT sv.version, sv.deleted FROM subject_versions sv "
                "JOIN schemas s ON s.id = sv.schema_id "
                "WHERE sv.subject = ? AND s.fingerprint = ? ORDER BY sv.deleted, sv.version DESC",
                (subject, candidate.fingerprint),
            ).fetchall()
            for version, is_deleted in found:
                if deleted or not is_deleted:
                    return queries.get_version(conn, subject, version, deleted=True)
        raise schema_not_found("Schema not found")
