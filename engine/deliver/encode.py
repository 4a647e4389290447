"""Encoding keys and values: staged JSON texts to wire bytes, batch by batch.

Avro ships the bodies the ETL's executors wrote (:class:`StagedBodies`) when they were
written with the registered schema (docs/design.md#staged-avro); else it goes through
Arrow and polars (:class:`AvroPart`), with fastavro record by record as the fallback.
JSON and Connect JSON (``{schema, payload}``) are Arrow string
operations. :class:`PartCodec` is one topic's keys or values in one format.
"""

from __future__ import annotations

import gc
import io
import json
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from engine.deliver.avro_bodies import MARKER_FIELD, container_bodies, marker_field
from engine.deliver.errors import DeliveryError, TypeMismatch
from engine.deliver.json_convert import json_converter
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import (
    avro_fingerprint,
    avro_shape,
    spark_to_arrow,
    spark_to_avro,
    spark_to_connect,
)
from engine.kafka.typemap.to_spark import has_null_fields

if TYPE_CHECKING:
    import polars as pl
    from pyspark.sql.types import DataType

#: Records of a batch whose JSON is checked field by field against the recorded type
#: (all of a smaller batch, an even sample of a larger one).
STRICT_SAMPLE = 2_000


def text_buffer(texts: pa.Array) -> pa.Buffer:
    """The bytes of a string array without nulls: its values, one after the other."""
    width = pa.int64() if pa.types.is_large_string(texts.type) else pa.int32()
    offsets = pa.Array.from_buffers(
        width, len(texts) + 1, [None, texts.buffers()[1]], offset=texts.offset
    )
    first, last = offsets[0].as_py(), offsets[len(texts)].as_py()
    return texts.buffers()[2].slice(first, last - first)


def strings(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One string array (a batch's values are copied together here, in the encoder)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if texts.type != pa.string():
        texts = texts.cast(pa.string())
    return texts


def null_paths(data_type: DataType) -> pa.Schema | None:
    """The paths of a struct type that are NullType, typed null, as an Arrow schema
    for Arrow's JSON reader (other fields left out); None when it has none."""
    from pyspark.sql import types as T  # deferred: pyspark

    def arrow(t: DataType) -> pa.DataType | None:
        if isinstance(t, T.NullType):
            return pa.null()
        if isinstance(t, T.StructType):
            fields = [pa.field(f.name, a) for f in t.fields if (a := arrow(f.dataType)) is not None]
            return pa.struct(fields) if fields else None
        if isinstance(t, T.ArrayType):
            element = arrow(t.elementType)
            return None if element is None else pa.list_(element)
        return None

    found = arrow(data_type)
    return pa.schema(list(found)) if isinstance(found, pa.StructType) else None


class StagedBodies(NamedTuple):
    """One part (keys or values) of the Avro bodies the ETL wrote beside the JSON texts:
    the fingerprint of the schema each was written with, and the bodies."""

    schemas: pa.ChunkedArray
    bodies: pa.ChunkedArray


def staged_bodies(avro: pa.ChunkedArray | None, part: str) -> StagedBodies | None:
    """The ``part`` (``key`` or ``value``) of an ``avro`` column, None without one."""
    if avro is None:
        return None
    return StagedBodies(
        pc.struct_field(avro, f"{part}_schema"), pc.struct_field(avro, part)
    )


class AvroPart:
    """Encodes JSON texts of one Spark type as Avro, batch by batch.

    Batches of struct values take a fast path in Rust: polars parses the batch
    (newline-delimited JSON, with the exact type) and writes it as an Avro container
    whose records start with a marker field (16 random bytes, then the wire header); the
    container's blocks are split on the marker, leaving wire header + body for each
    record (a record's encoding is the concatenation of its fields'). The writer schema
    polars used is compared with ours once, so the bytes are exactly what fastavro would
    write; Arrow's strict JSON reader
    checks that the texts hold no field the type lacks (every record of a batch of up to
    :data:`STRICT_SAMPLE` records, an even sample of a larger one). Any other type, or a
    batch the fast path refuses, is encoded by fastavro record by record.
    """

    def __init__(self, data_type: DataType, name: str) -> None:
        self.data_type = data_type
        self.name = name
        self.schema = spark_to_avro(data_type, name)
        self.fingerprint = avro_fingerprint(self.schema)
        self.parsed = fastavro.parse_schema(self.schema, named_schemas={})
        self._convert = json_converter(data_type, name)
        arrow = spark_to_arrow(data_type)
        self._arrow = pa.schema(list(arrow)) if isinstance(arrow, pa.StructType) else None
        self._fast: bool | None = None if self._arrow is not None else False
        self._polars: pl.Schema | None = None
        # a field only ever null when the type was recorded (NullType) is written as Avro
        # null: every text is checked to hold null there, else the value would be lost
        self._null_fields = null_paths(data_type) if has_null_fields(data_type) else None

    def encode(
        self, texts: pa.Array | Sequence[str | None], header: bytes = b""
    ) -> list[bytes | None]:
        """``header`` + the Avro body of each JSON text (None stays None)."""
        if not isinstance(texts, pa.Array | pa.ChunkedArray):
            texts = pa.array(texts, pa.string())
        texts = strings(texts)
        present = texts if texts.null_count == 0 else pc.drop_null(texts)
        if self._null_fields is not None:
            self._check_null_fields(present, self._null_fields)
        bodies = None
        if self._fast is not False and len(present) >= 64:
            bodies = self._fast_bodies(present, header)
        if bodies is None:
            raw = self._fastavro_bodies(present.to_pylist())
            bodies = [header + body for body in raw] if header else raw
        if texts.null_count == 0:
            return cast("list[bytes | None]", bodies)
        found = iter(bodies)
        return [next(found) if valid else None for valid in texts.is_valid().to_pylist()]

    def ships(self, staged: StagedBodies) -> bool:
        """Whether the ETL wrote every one of the ``staged`` bodies with this part's
        schema (the same fingerprint)."""
        schemas = staged.schemas
        if self._null_fields is not None:  # the texts are checked (encode), not trusted
            return False
        return not schemas.null_count and bool(
            pc.all(pc.equal(schemas, self.fingerprint)).as_py()
        )

    def shipped(
        self, staged: StagedBodies, header: bytes, texts: pa.Array | None = None
    ) -> list[bytes | None] | None:
        """``header`` + each staged body (NULL stays NULL: a tombstone), when the ETL
        wrote every one with this part's schema (same fingerprint); else None (the texts
        are encoded). The ETL writes a body NULL exactly where the text is NULL; with
        ``texts``, that is checked too."""
        bodies = staged.bodies
        if not self.ships(staged):
            return None
        if texts is not None and (
            len(texts) != len(bodies)
            or not pc.all(pc.equal(texts.is_valid(), bodies.is_valid())).as_py()
        ):
            return None
        if header:
            bodies = pc.binary_join_element_wise(pa.scalar(header, pa.binary()), bodies, b"")
        return cast("list[bytes | None]", bodies.to_pylist())

    def _fast_bodies(self, texts: pa.Array, header: bytes) -> list[bytes] | None:
        import polars as pl  # deferred: polars is slow to import

        self._check_fields(texts)
        lines = pc.binary_join_element_wise(texts, "", "\n")
        if self._polars is None:
            assert self._arrow is not None
            frame = pl.from_arrow(self._arrow.empty_table())
            assert isinstance(frame, pl.DataFrame)
            self._polars = frame.schema
        try:
            frame = pl.read_ndjson(io.BytesIO(text_buffer(lines)), schema=self._polars)
            if frame.height != len(texts):
                return None
            marker, pattern = marker_field(header)
            frame = frame.select(pl.lit(marker, dtype=pl.Binary).alias(MARKER_FIELD), pl.all())
            buf = io.BytesIO()
            frame.write_avro(buf, compression="uncompressed")
        except Exception:  # noqa: BLE001 - polars refuses: fastavro says which record is wrong
            return None
        container = buf.getvalue()
        if self._fast is None:
            schema = cast("dict[str, Any]", fastavro.reader(io.BytesIO(container)).writer_schema)
            writer = {**schema, "fields": schema["fields"][1:]}
            self._fast = avro_shape(writer) == avro_shape(self.schema)
            if not self._fast:
                return None
        return container_bodies(container, len(texts), pattern)

    def _check_null_fields(self, texts: pa.Array, schema: pa.Schema) -> None:
        """:class:`TypeMismatch` when any of the texts holds a value where the type has
        only ever seen null (``schema``: those paths, typed null)."""
        if not len(texts):
            return
        lines = pc.binary_join_element_wise(texts, "", "\n")
        options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        try:
            pj.read_json(pa.BufferReader(text_buffer(lines)), parse_options=options)
        except pa.ArrowInvalid as exc:
            if "changed from null to" not in str(exc):
                return  # not JSON the reader takes: the encoders say which record is wrong
            where = str(exc).split("Column(", 1)[-1].split(")", 1)[0]
            raise TypeMismatch(
                f"{self.name}: the staged JSON holds a value at {where} where the type "
                "recorded in the pool has only seen null, so it would be lost in Avro"
            ) from None

    def _check_fields(self, texts: pa.Array) -> None:
        """:class:`TypeMismatch` when the texts hold a field the type does not have."""
        if len(texts) > STRICT_SAMPLE:
            step = len(texts) / STRICT_SAMPLE
            texts = texts.take(pa.array([int(i * step) for i in range(STRICT_SAMPLE)], pa.int64()))
        lines = pc.binary_join_element_wise(texts, "", "\n")
        options = pj.ParseOptions(explicit_schema=self._arrow, unexpected_field_behavior="error")
        try:
            pj.read_json(pa.BufferReader(text_buffer(lines)), parse_options=options)
        except pa.ArrowInvalid as exc:
            if "unexpected field" in str(exc):
                raise TypeMismatch(
                    f"{self.name}: the staged JSON holds a field that the type recorded in "
                    "the pool does not have, so it would be lost in Avro; the ETL must "
                    "record its output types before committing outputs"
                ) from None
            # anything else: the encoders say which record is wrong

    def _fastavro_bodies(self, texts: Sequence[str]) -> list[bytes]:
        out = []
        convert, parsed = self._convert, self.parsed
        paused = gc.isenabled()
        gc.disable()
        try:
            for text in texts:
                value = json.loads(text)
                if convert is not None:
                    value = convert(value)
                buf = io.BytesIO()
                try:
                    fastavro.schemaless_writer(buf, parsed, value)
                except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds
                    raise DeliveryError(
                        f"{self.name}: cannot encode {text[:120]} with the Avro schema "
                        f"derived from the pool's recorded type: {exc}"
                    ) from None
                out.append(buf.getvalue())
        finally:
            if paused:
                gc.enable()
        return out


class PartCodec:
    """Encodes the keys or the values of one topic in one format (JSON text → bytes)."""

    def __init__(self, fmt: Format, data_type: DataType | None, name: str) -> None:
        self.format = fmt
        self.data_type = data_type
        self.name = name
        self.schema_id: int | None = None
        self.avro: AvroPart | None = None
        self._connect_prefix = ""
        if fmt is Format.AVRO and data_type is not None:
            self.avro = AvroPart(data_type, name)
        elif fmt is Format.CONNECT_JSON:
            schema = None if data_type is None else spark_to_connect(data_type, name=name)
            self._connect_prefix = (
                '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'
            )

    @property
    def avro_schema(self) -> Any:
        """The Avro schema (JSON) of the part, None when it is not Avro."""
        return None if self.avro is None else self.avro.schema

    def shipped(
        self, staged: StagedBodies | None, texts: pa.ChunkedArray | None = None
    ) -> list[bytes | None] | None:
        """Wire bytes of the ``staged`` bodies (Avro only), when they were written with
        this part's registered schema (:meth:`AvroPart.shipped`); else None."""
        if staged is None or self.avro is None or self.schema_id is None:
            return None
        header = struct.pack(">bI", 0, self.schema_id)
        return self.avro.shipped(staged, header, None if texts is None else strings(texts))

    def ships(self, staged: StagedBodies | None) -> bool:
        """Whether :meth:`shipped` would ship the ``staged`` bodies."""
        return (
            staged is not None
            and self.avro is not None
            and self.schema_id is not None
            and self.avro.ships(staged)
        )

    def encode(self, texts: pa.Array | Sequence[str | None]) -> list[bytes | None]:
        """Wire bytes of each JSON text (None stays None)."""
        if not isinstance(texts, pa.Array | pa.ChunkedArray):
            texts = pa.array(texts, pa.string())
        texts = strings(texts)
        if self.format is Format.JSON:
            return cast("list[bytes | None]", texts.cast(pa.binary()).to_pylist())
        if self.format is Format.CONNECT_JSON:
            wrapped = pc.binary_join_element_wise(self._connect_prefix, texts, "}", "")
            return cast("list[bytes | None]", wrapped.cast(pa.binary()).to_pylist())
        if texts.null_count == len(texts):
            return [None] * len(texts)
        if self.avro is None or self.schema_id is None:
            raise DeliveryError(
                f"{self.name}: no Avro schema: the staging pool records no type for these "
                "records (use --format json)"
            )
        return self.avro.encode(texts, struct.pack(">bI", 0, self.schema_id))

    def bodies(self, texts: pa.Array | Sequence[str | None]) -> list[bytes | None]:
        """Avro bodies (no header) of each JSON text (None stays None)."""
        assert self.avro is not None
        return self.avro.encode(texts)
