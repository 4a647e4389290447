"""The registry's operations, Confluent-compatible: register, test, delete; reads and levels.

:class:`RegistryStore` owns the database and the writes (register, delete) and the
compatibility test; it hands out the reads as :attr:`RegistryStore.lookups`
(:class:`engine.registry.lookups.SchemaLookups`) and the compatibility levels as
:attr:`RegistryStore.levels` (:class:`engine.registry.levels.CompatibilityLevels`).

Semantics:

- A schema's id is global (see :mod:`engine.registry.candidate`). Ids are never reused,
  and a schema row is kept even when every version using it is permanently deleted, so
  old records stay decodable.
- Registering a schema a subject already has (as a live version) returns its id and adds
  no version. Versions grow from 1 and are not reused after a soft delete.
- Deletes are soft first (the version disappears from reads unless ``deleted=true``);
  a permanent delete needs a soft delete first, as in Confluent. Deleting a subject also
  drops its compatibility level; a version another live schema references cannot be
  deleted (42206).

Each operation is one transaction of :class:`engine.registry.database.Database`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from engine.registry import queries
from engine.registry.candidate import incompatibilities, prepare
from engine.registry.database import Database
from engine.registry.errors import RegistryError, subject_not_found, version_not_found
from engine.registry.levels import CompatibilityLevels
from engine.registry.lookups import SchemaLookups
from engine.registry.schemas import Reference


class RegistryStore:
    """The registry operations over one SQLite database file."""

    def __init__(self, db_path: str | Path) -> None:
        self.db = Database(db_path)
        self.lookups = SchemaLookups(self.db)
        self.levels = CompatibilityLevels(self.db)

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
        with self.db.write() as conn:
            candidate = prepare(conn, schema, schema_type, references)
            row = conn.execute(
                "SELECT id FROM schemas WHERE fingerprint = ?", (candidate.fingerprint,)
            ).fetchone()
            schema_id: int | None = row[0] if row else None
            if schema_id is not None:
                live = conn.execute(
                    "SELECT 1 FROM subject_versions WHERE subject = ? AND schema_id = ? AND deleted = 0",
                    (subject, schema_id),
                ).fetchone()
                if live:
                    return schema_id
            level = queries.effective_level(conn, subject)
            problems = incompatibilities(conn, subject, candidate, level)
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
        with self.db.read() as conn:
            candidate = prepare(conn, schema, schema_type, references)
            level = queries.effective_level(conn, subject)
            if version == "all":
                return incompatibilities(conn, subject, candidate, level)
            rows = queries.version_rows(conn, subject)
            if not any(not d for _, _, d in rows):
                if version is None:
                    return []  # nothing registered yet: anything is compatible
                raise subject_not_found(subject)
            assert not isinstance(version, str)
            target = queries.get_version(conn, subject, version, deleted=False)
            base = level.removesuffix("_TRANSITIVE")
            return incompatibilities(conn, subject, candidate, base, only=[target])

    # -- delete -------------------------------------------------------------------

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft-delete a subject's live versions (or purge a soft-deleted subject)."""
        with self.db.write() as conn:
            rows = queries.version_rows(conn, subject)
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
                queries.refuse_if_referenced(conn, subject, versions)
                conn.execute("DELETE FROM subject_versions WHERE subject = ?", (subject,))
            else:
                if not live:
                    raise subject_not_found(subject)
                versions = live
                queries.refuse_if_referenced(conn, subject, versions)
                conn.execute(
                    "UPDATE subject_versions SET deleted = 1 WHERE subject = ? AND deleted = 0",
                    (subject,),
                )
            conn.execute("DELETE FROM config WHERE scope = ?", (subject,))
            return versions

    def delete_version(self, subject: str, version: int | None, permanent: bool = False) -> int:
        """Soft-delete one version (None: the latest), or purge a soft-deleted one."""
        with self.db.write() as conn:
            rows = queries.version_rows(conn, subject)
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
            queries.refuse_if_referenced(conn, subject, [version])
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
