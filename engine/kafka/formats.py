"""Record formats of Kafka keys and values, and one decoder interface over them.

Three formats (DESIGN.md, decision 3):

* ``AVRO``: the Confluent wire format (magic byte 0, 4-byte schema id, Avro body); the
  writer schema is fetched through a lookup callable, so no registry code lives here.
* ``CONNECT_JSON``: Kafka Connect's JsonConverter with ``schemas.enable=true``
  (``{"schema": ..., "payload": ...}``).
* ``JSON``: plain UTF-8 JSON.

Every decoder returns *JSON-able* Python values (dict, list, str, int, float, bool,
None) with the same conventions in every format, so a value can be stored as JSON text
and read back by Spark ``from_json`` with the type :mod:`engine.kafka.types` maps its
schema to:

* bytes (Avro ``bytes``/``fixed``, Connect ``bytes``) are base64 text (standard alphabet,
  padded), as JsonConverter writes them;
* decimals are plain-notation strings with exactly ``scale`` digits (``"12.30"``);
* other logical types (timestamps, dates, times, uuids) keep their underlying value
  (a number or a string), never a rendered date;
* NaN and infinities (not representable in JSON) become ``null``.

``None`` bytes (a Kafka tombstone) decode to ``None``. Failures raise
:class:`DecodeError`, whose ``kind`` names what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from engine.errors import ZyncError

if TYPE_CHECKING:
    from engine.kafka.avro import AvroSchema

#: Every ``DecodeError.kind``, with what it means.
DECODE_ERROR_KINDS: dict[str, str] = {
    "bad-magic": "an Avro message does not start with the Confluent magic byte 0",
    "truncated": "the bytes end before the value does",
    "bad-avro": "the Avro body does not match its writer schema",
    "unknown-schema-id": "the schema id is not known to the schema registry",
    "bad-schema": "the writer schema itself is not valid",
    "bad-json": "the bytes are not UTF-8 JSON",
    "bad-connect-envelope": "not a Kafka Connect {schema, payload} envelope, or the "
    "payload does not match its schema",
}


class DecodeError(ZyncError):
    """A key or value that cannot be decoded.

    ``kind`` is one of :data:`DECODE_ERROR_KINDS`; ``message`` says what was found, in
    one line.
    """

    def __init__(self, kind: str, message: str) -> None:
        if kind not in DECODE_ERROR_KINDS:
            raise ValueError(f"unknown decode error kind {kind!r}")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.message))


class SchemaNotFound(LookupError):
    """Raised by a schema lookup callable when the registry has no schema with that id."""


#: ``(schema_id) -> writer schema JSON text``; raises :class:`SchemaNotFound`.
SchemaLookup = Callable[[int], str]


class Format(Enum):
    """How a topic's keys or values are encoded."""

    AVRO = "avro"
    CONNECT_JSON = "connect-json"
    JSON = "json"

    @classmethod
    def parse(cls, text: str) -> Format:
        """``"avro"``, ``"connect-json"`` (or ``connect_json``) or ``"json"``."""
        wanted = text.strip().lower().replace("_", "-")
        for fmt in cls:
            if fmt.value == wanted:
                return fmt
        choices = ", ".join(f.value for f in cls)
        raise ValueError(f"unknown format {text!r}: use one of {choices}")


@dataclass(frozen=True)
class WriterSchema:
    """The schema a record was written with, as far as its format carries one.

    ``schema`` is the Avro schema (parsed JSON) for ``AVRO``, the Connect schema dict for
    ``CONNECT_JSON`` (``None`` when the envelope's schema is null), ``None`` for ``JSON``.
    """

    format: Format
    schema: Any
    schema_id: int | None = None


class RecordDecoder:
    """Decodes keys or values of one format to JSON-able values or JSON text.

    ``lookup`` resolves Avro schema ids (required for ``AVRO``); resolved schemas are
    kept for the decoder's life, as schema ids are immutable in a registry.
    """

    def __init__(self, fmt: Format, lookup: SchemaLookup | None = None) -> None:
        if fmt is Format.AVRO and lookup is None:
            raise ValueError("the Avro format needs a schema lookup")
        self.format = fmt
        self._lookup = lookup
        self._avro: dict[int, AvroSchema] = {}

    # -- Avro schemas -----------------------------------------------------------------

    def avro_schema(self, schema_id: int) -> AvroSchema:
        """The (cached) writer schema with this id; DecodeError if unknown or invalid."""
        cached = self._avro.get(schema_id)
        if cached is not None:
            return cached
        from engine.kafka.avro import AvroSchema

        assert self._lookup is not None
        try:
            text = self._lookup(schema_id)
        except SchemaNotFound as exc:
            raise DecodeError(
                "unknown-schema-id", f"schema id {schema_id} is not in the registry"
            ) from exc
        try:
            schema = AvroSchema(text)
        except ValueError as exc:
            raise DecodeError("bad-schema", f"schema id {schema_id}: {exc}") from exc
        self._avro[schema_id] = schema
        return schema

    # -- one record -------------------------------------------------------------------

    def decode(self, data: bytes | None) -> Any:
        """The record as a JSON-able value; ``None`` for a tombstone."""
        if data is None:
            return None
        if self.format is Format.AVRO:
            from engine.kafka import avro

            schema_id, body = avro.split(data)
            return self.avro_schema(schema_id).decode(body)
        if self.format is Format.CONNECT_JSON:
            from engine.kafka import connect_json

            return connect_json.decode(data).payload
        from engine.kafka import json_format

        return json_format.decode(data)

    def decode_json(self, data: bytes | None) -> str | None:
        """The record as compact JSON text; ``None`` for a tombstone."""
        if data is None:
            return None
        if self.format is Format.AVRO:
            from engine.kafka import avro

            schema_id, body = avro.split(data)
            return self.avro_schema(schema_id).decode_json(body)
        if self.format is Format.CONNECT_JSON:
            from engine.kafka import connect_json

            return connect_json.decode_json(data)
        from engine.kafka import json_format

        return json_format.decode_json(data)

    def writer_schema(self, data: bytes | None) -> WriterSchema | None:
        """The schema ``data`` was written with (``None`` for a tombstone)."""
        if data is None:
            return None
        if self.format is Format.AVRO:
            from engine.kafka import avro

            schema_id, _ = avro.split(data)
            return WriterSchema(self.format, self.avro_schema(schema_id).schema, schema_id)
        if self.format is Format.CONNECT_JSON:
            from engine.kafka import connect_json

            return WriterSchema(self.format, connect_json.decode(data).schema)
        return WriterSchema(self.format, None)

    # -- batches ----------------------------------------------------------------------

    def decode_batch_json(self, datas: Sequence[bytes | None]) -> list[str | None | DecodeError]:
        """Each record as JSON text, ``None`` for tombstones, or its :class:`DecodeError`.

        Avro records are grouped by schema id and decoded in batches (see
        :meth:`engine.kafka.avro.AvroSchema.decode_batch_to_json`); one bad record never
        stops the others.
        """
        out: list[str | None | DecodeError] = [None] * len(datas)
        if self.format is not Format.AVRO:
            for i, data in enumerate(datas):
                try:
                    out[i] = self.decode_json(data)
                except DecodeError as exc:
                    out[i] = exc
            return out

        from engine.kafka import avro

        groups: dict[int, tuple[list[int], list[bytes]]] = {}
        for i, data in enumerate(datas):
            if data is None:
                continue
            try:
                schema_id, body = avro.split(data)
            except DecodeError as exc:
                out[i] = exc
                continue
            indexes, bodies = groups.setdefault(schema_id, ([], []))
            indexes.append(i)
            bodies.append(body)
        for schema_id, (indexes, bodies) in groups.items():
            try:
                schema = self.avro_schema(schema_id)
            except DecodeError as exc:
                for i in indexes:
                    out[i] = exc
                continue
            batch = schema.decode_batch_to_json(bodies)
            for i, text in zip(indexes, batch.texts, strict=True):
                out[i] = text
            for j, error in batch.errors:
                out[indexes[j]] = error
        return out
