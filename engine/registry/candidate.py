"""A schema being registered, looked up or tested: pinned references, normalized text and
fingerprint (what makes its global id), parsed Avro, and what it breaks in a subject.

A schema's id is global: the same schema type, normalized text (see
``compat.normalized_json``) and references get the same id in every subject. AVRO schemas
are parsed and checked for compatibility. JSON and PROTOBUF schemas are stored as opaque
text (JSON must parse as JSON): no compatibility check between them, but changing a
subject's schema type is incompatible unless the level is NONE.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from engine.registry.compat import (
    AvroSchema,
    InvalidSchemaError,
    check_compatibility,
    normalized_json,
    parse_avro,
)
from engine.registry.errors import RegistryError, invalid_schema, store_error
from engine.registry.queries import get_version, version_rows
from engine.registry.schemas import (
    Reference,
    SchemaRecord,
    SubjectVersion,
    normalize_schema_type,
)


@dataclass(frozen=True)
class Candidate:
    """A schema as a request gives it, ready to be stored or compared."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...]
    fingerprint: str
    avro: AvroSchema | None


def pin(conn: sqlite3.Connection, ref: Reference) -> Reference:
    """A reference with version -1 ("latest") pinned to the subject's latest version."""
    if ref.version != -1:
        return ref
    rows = [v for v, _, d in version_rows(conn, ref.subject) if not d]
    if not rows:
        raise invalid_schema(
            f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r}, which has no versions"
        )
    return Reference(ref.name, ref.subject, rows[-1])


def reference_texts(conn: sqlite3.Connection, references: Sequence[Reference]) -> list[str]:
    """The texts of every schema reachable through references, dependencies first."""
    out: list[str] = []
    seen: set[tuple[str, int]] = set()

    def visit(refs: Sequence[Reference]) -> None:
        for ref in refs:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            try:
                target = get_version(conn, ref.subject, ref.version, deleted=True)
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


def prepare(
    conn: sqlite3.Connection,
    schema: str,
    schema_type: str,
    references: Sequence[Reference],
) -> Candidate:
    """The schema a request gives, checked (42201 when invalid), normalized and
    fingerprinted, its references pinned and, for AVRO, parsed with them."""
    if not isinstance(schema, str) or not schema.strip():
        raise invalid_schema("Invalid schema: empty schema")
    schema_type = normalize_schema_type(schema_type)
    refs = tuple(pin(conn, r) for r in references)
    avro = None
    try:
        if schema_type == "AVRO":
            avro = parse_avro(schema, reference_texts(conn, refs))
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
    return Candidate(schema_type, schema, refs, fingerprint, avro)


def parsed(conn: sqlite3.Connection, record: SchemaRecord) -> AvroSchema:
    """A stored AVRO schema parsed again with its references (50001 if it no longer parses)."""
    try:
        return parse_avro(record.schema, reference_texts(conn, record.references))
    except (InvalidSchemaError, RegistryError) as exc:
        raise store_error(
            RuntimeError(f"stored schema {record.id} no longer parses: {exc}")
        ) from None


def incompatibilities(
    conn: sqlite3.Connection,
    subject: str,
    candidate: Candidate,
    level: str,
    only: Sequence[SubjectVersion] | None = None,
) -> list[str]:
    """Why ``candidate`` breaks ``level`` against the subject's versions (or ``only`` those),
    empty when compatible."""
    if level == "NONE":
        return []
    if only is None:
        live = [
            get_version(conn, subject, v, deleted=False)
            for v, _, d in version_rows(conn, subject)
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
    previous = [(t.version, parsed(conn, t.record)) for t in targets]
    # The targets are already chosen: compare with each of them.
    base = level.removesuffix("_TRANSITIVE")
    return check_compatibility(candidate.avro, previous, f"{base}_TRANSITIVE")
