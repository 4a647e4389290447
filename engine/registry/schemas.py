"""What the registry holds and how a request names it: schema types, versions (an id or
"latest"), references, the schema stored under a global id and a subject's version of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.registry.errors import RegistryError, invalid_schema

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
MAX_VERSION = 2**31 - 1


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        f'between [1, {MAX_VERSION}] and the string "latest"',
    )


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
