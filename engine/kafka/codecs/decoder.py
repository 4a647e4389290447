"""One decoder interface over the three record formats: :class:`RecordDecoder`.

It decodes keys or values of one :class:`~engine.kafka.codecs.formats.Format` to the
JSON-able values (or compact JSON text) the formats module describes, one record or a
batch; Avro writer schemas are looked up by id once and kept, as ids are immutable in a
registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.kafka.codecs import avro, connect_json, plain_json
from engine.kafka.codecs.avro import AvroSchema, as_avro_schema
from engine.kafka.codecs.errors import DecodeError
from engine.kafka.codecs.formats import Format, SchemaLookup, SchemaNotFound, WriterSchema


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
        assert self._lookup is not None
        try:
            text = self._lookup(schema_id)
        except SchemaNotFound as exc:
            raise DecodeError(
                "unknown-schema-id", f"schema id {schema_id} is not in the registry"
            ) from exc
        try:
            schema = as_avro_schema(text)  # shared: the same text, the same schema
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
            schema_id, body = avro.split(data)
            return self.avro_schema(schema_id).decode(body)
        if self.format is Format.CONNECT_JSON:
            return connect_json.decode(data).payload
        return plain_json.decode(data)

    def decode_json(self, data: bytes | None) -> str | None:
        """The record as compact JSON text; ``None`` for a tombstone."""
        if data is None:
            return None
        if self.format is Format.AVRO:
            schema_id, body = avro.split(data)
            return self.avro_schema(schema_id).decode_json(body)
        if self.format is Format.CONNECT_JSON:
            return connect_json.decode_json(data)
        return plain_json.decode_json(data)

    def writer_schema(self, data: bytes | None) -> WriterSchema | None:
        """The schema ``data`` was written with (``None`` for a tombstone)."""
        if data is None:
            return None
        if self.format is Format.AVRO:
            schema_id, _ = avro.split(data)
            return WriterSchema(self.format, self.avro_schema(schema_id).schema, schema_id)
        if self.format is Format.CONNECT_JSON:
            return WriterSchema(self.format, connect_json.decode(data).schema)
        return WriterSchema(self.format, None)

    # -- batches ----------------------------------------------------------------------

    def decode_batch_json(self, datas: Sequence[bytes | None]) -> list[str | None | DecodeError]:
        """Each record as JSON text, ``None`` for tombstones, or its :class:`DecodeError`.

        Avro records are grouped by schema id and decoded in batches (see
        :meth:`engine.kafka.codecs.avro.AvroSchema.decode_batch_to_json`); one bad record never
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
