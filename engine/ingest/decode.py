"""Decoding a batch's keys or values, per topic and part: the format (fixed, or sniffed
from the first records and kept for the run), the Avro fast path for a batch written with
one schema (one vectorised call), Kafka Connect JSON and JSON (a plain-text key kept as a
JSON string), each record as JSON text or a :class:`DecodeError`, and the batch's Spark
type (cached per Avro schema id or Connect schema)."""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from engine.kafka.codecs import connect_json
from engine.kafka.codecs import plain_json as json_format
from engine.kafka.codecs.avro import AvroSchema, as_avro_schema
from engine.kafka.codecs.decoder import RecordDecoder
from engine.kafka.codecs.detect import sniff_batch
from engine.kafka.codecs.errors import DecodeError
from engine.kafka.codecs.formats import Format, SchemaLookup
from engine.kafka.registry_client import RegistrySchemas, subject_for
from engine.kafka.typemap.to_spark import (
    avro_to_spark,
    connect_to_spark,
    fill_null_fields,
    has_null_fields,
    json_value_to_spark,
)
from engine.settings.registry import RegistryProfile, load_registry_profile
from engine.sparktypes import merge_spark_types

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

#: Records whose JSON values are sampled per topic batch to infer a JSON topic's type.
JSON_TYPE_SAMPLES = 256
#: Texts read again at a time to type the paths null in every sample (a Debezium
#: ``before`` in a batch of creates): until none is left, or the batch is read.
FILL_CHUNK = 4096
#: What orjson reads otherwise than json: integers beyond 64 bits (floats to it), NaN.
_OTHERWISE = r"\d{20}|-\d{19}|NaN|Infinity"

#: Per record of a batch: its JSON text, None (a tombstone) or why it cannot be decoded.
Texts = list[str | None | DecodeError]


@dataclass
class Decoded:
    """A batch's keys or values decoded: the JSON texts (an Arrow string array, NULL for
    tombstones and for the records in ``errors``) and, by index, why a record could not
    be decoded."""

    texts: pa.Array
    errors: dict[int, DecodeError] = field(default_factory=dict)

    @classmethod
    def of(cls, texts: Texts) -> Decoded:
        errors = {i: t for i, t in enumerate(texts) if isinstance(t, DecodeError)}
        good = [None if isinstance(t, DecodeError) else t for t in texts] if errors else texts
        return cls(pa.array(good, pa.string()), errors)


class RegistryLookup:
    """The Schema Registry lookup for Avro topics, made when the first Avro record shows
    up (``profile`` None: the zync home's registry profile) and kept for the loop's life."""

    def __init__(self, profile: RegistryProfile | None) -> None:
        self._profile = profile
        self._lookup: RegistrySchemas | None = None

    def __call__(self) -> SchemaLookup:
        if self._lookup is None:
            self._lookup = RegistrySchemas(self._profile or load_registry_profile())
        return self._lookup

    def prefetch(self, schema_ids: set[int]) -> None:
        """Look up these ids at once (:meth:`RegistrySchemas.prefetch`), when a registry
        is configured; anything that fails is left to the decoders, which report it."""
        try:
            lookup = self()
        except Exception:  # noqa: BLE001 - no registry: the decoders say so
            return
        if isinstance(lookup, RegistrySchemas):
            lookup.prefetch(schema_ids)

    def warm(self, decoders: Iterable[PartDecoder]) -> None:
        """Before the first batch, when a registry is configured: the latest schemas of
        the parts that may be Avro, looked up in the background
        (:meth:`RegistrySchemas.warm`)."""
        subjects = [subject_for(d.topic, d.part) for d in decoders if d.format in (None, Format.AVRO)]
        if not subjects:
            return
        try:
            lookup = self()
        except Exception:  # noqa: BLE001 - no registry: the decoders say so
            return
        if isinstance(lookup, RegistrySchemas):
            lookup.warm(subjects, then=_prepare_schemas)


class PartDecoder:
    """Decodes the keys or the values of one topic, and knows their Spark type."""

    def __init__(self, topic: str, part: str, fmt: str, lookup: Callable[[], SchemaLookup]) -> None:
        self.topic = topic
        self.part = part
        self.fixed = None if fmt == "auto" else Format.parse(fmt)
        self.format: Format | None = self.fixed
        self._lookup = lookup
        self._decoder: RecordDecoder | None = None
        self._types: dict[int | bytes, DataType] = {}  # schema id / connect schema text

    def warm(self) -> None:
        """Before the first batch: the Schema Registry client (its import is heavy), when
        this part may be Avro. Best effort: decoding reports a registry it cannot reach."""
        if self.format in (None, Format.AVRO):
            with contextlib.suppress(Exception):
                self._lookup()

    def decoder(self, datas: Sequence[bytes | None]) -> RecordDecoder:
        if self.format is None:
            self.format = sniff_batch(datas)
            if self.format is None:  # tombstones only so far: any decoder reads them
                return RecordDecoder(Format.JSON)
        if self._decoder is None:
            lookup = self._lookup() if self.format is Format.AVRO else None
            self._decoder = RecordDecoder(self.format, lookup)
        return self._decoder

    def decode(self, datas: Sequence[bytes | None]) -> tuple[Decoded, DataType | None]:
        """The records' JSON texts and decode errors, and the batch's Spark type."""
        decoder = self.decoder(datas)
        fmt = decoder.format
        if fmt is Format.AVRO:
            texts = self._avro_one_schema(decoder, datas)
            if texts is not None:  # one header: the first record's
                return Decoded(texts), self._avro_type(decoder, {datas[0][:5]})  # type: ignore[index]
            headers = {d[:5] for d in datas if d is not None}
            decoded = Decoded.of(decoder.decode_batch_json(datas))
            return decoded, self._avro_type(decoder, headers)
        if fmt is Format.CONNECT_JSON:
            decoded = Decoded.of(decoder.decode_batch_json(datas))
            return decoded, self._connect_type(datas, decoded.errors)
        return self._json(datas)

    @staticmethod
    def _avro_one_schema(decoder: RecordDecoder, datas: Sequence[bytes | None]) -> pa.Array | None:
        """The common case, fast: every record written with one schema and no tombstone
        (one polars read of the whole messages, the texts as one Arrow array). None: not
        the case, or a bad record among them."""
        first = datas[0] if datas else None
        if first is None or len(first) < 5 or first[0] != 0:
            return None
        try:
            schema = decoder.avro_schema(int.from_bytes(first[1:5], "big"))
        except DecodeError:
            return None  # the general path makes the dead letters
        try:
            return schema.decode_wire_batch(datas, first[:5])  # type: ignore[arg-type]
        except TypeError:  # a tombstone in the batch
            return None

    def _avro_type(self, decoder: RecordDecoder, headers: set[bytes]) -> DataType | None:
        merged = None
        for raw in sorted(h[1:5] for h in headers if len(h) == 5 and h[0] == 0):
            schema_id = int.from_bytes(raw, "big")
            spark_type = self._types.get(schema_id)
            if spark_type is None:
                try:  # cached by the decoder; an unknown id made dead letters already
                    spark_type = _spark_type(decoder.avro_schema(schema_id))
                except DecodeError:
                    continue
                self._types[schema_id] = spark_type
            merged = spark_type if merged is None else merge_spark_types(merged, spark_type)
        return merged

    def _connect_type(
        self, datas: Sequence[bytes | None], errors: Mapping[int, DecodeError]
    ) -> DataType | None:
        merged = None
        seen: set[bytes] = set()
        for i, data in enumerate(datas):
            if data is None or i in errors:
                continue
            # JsonConverter writes the schema first: the bytes before "payload" name it
            cut = data.rfind(b'"payload"')
            head = bytes(data[:cut]) if cut > 0 else bytes(data)
            if head in seen:
                continue
            seen.add(head)
            spark_type = self._types.get(head)
            if spark_type is None:
                spark_type = connect_to_spark(connect_json.decode(data).schema)
                self._types[head] = spark_type
            merged = spark_type if merged is None else merge_spark_types(merged, spark_type)
        return merged

    def _json(self, datas: Sequence[bytes | None]) -> tuple[Decoded, DataType | None]:
        step = max(1, len(datas) // JSON_TYPE_SAMPLES)
        batch = json_format.decode_batch(datas, step, text_keys=self.part == "key")
        samples = batch.samples[:JSON_TYPE_SAMPLES]
        if not samples:
            return Decoded(batch.texts, batch.errors), None
        # a path null in every sample is typed by the batch's other values, else stays
        # NullType: a later batch's values type it (docs/design.md#pools-and-their-records)
        inferred = json_value_to_spark(samples, unknown="null")
        if step > 1 and has_null_fields(inferred):
            inferred = _fill_from_texts(inferred, batch.texts)
        return Decoded(batch.texts, batch.errors), inferred


def _fill_from_texts(inferred: DataType, texts: pa.Array) -> DataType:
    """``inferred`` with the paths null in every sample typed by the batch's other
    values. Only the texts that may hold a value there are parsed again: a text in which
    every key naming such a path is followed by ``null`` wherever it occurs holds none
    (a key's quotes cannot occur inside a JSON string, where they are escaped), and a
    batch of Debezium creates — ``before`` null in each — is passed over without parsing
    one. The others are read a chunk at a time until no path is left null: by orjson,
    except those it reads otherwise than :mod:`json` (an integer beyond 64 bits, which
    it makes a float; NaN, which it refuses)."""
    texts = texts.drop_null()
    names = _null_field_names(inferred)
    if names:
        # one pass of RE2 over the batch: a key naming a null path, not followed by null
        keys = "|".join(re.escape(json_format.dumps(name)) for name in sorted(names))
        valued = pc.match_substring_regex(texts, f"(?:{keys}):(?:[^n]|n[^u]|nu[^l])")
        texts = texts.filter(valued)
    for start in range(0, len(texts), FILL_CHUNK):
        chunk = texts.slice(start, FILL_CHUNK)
        odd = pc.match_substring_regex(chunk, _OTHERWISE).to_pylist()
        values = [
            json_format.decode(t.encode()) if o else _loads(t)
            for t, o in zip(chunk.to_pylist(), odd, strict=True)
        ]
        inferred = fill_null_fields(inferred, values)
        if not has_null_fields(inferred):
            break
    return inferred


def _null_field_names(data_type: DataType) -> set[str] | None:
    """The names of the struct fields whose type has a NullType (the field itself, or an
    array's elements); None when a NullType has no field name (the whole value)."""
    from pyspark.sql import types as T  # deferred: pyspark

    if isinstance(data_type, T.NullType):
        return None
    names: set[str] = set()
    if isinstance(data_type, T.ArrayType):
        return _null_field_names(data_type.elementType)
    if isinstance(data_type, T.StructType):
        for f in data_type.fields:
            if isinstance(f.dataType, T.NullType) or (
                isinstance(f.dataType, T.ArrayType) and has_null_fields(f.dataType)
                and _null_field_names(f.dataType.elementType) is None
            ):
                names.add(f.name)
            elif has_null_fields(f.dataType):
                inner = _null_field_names(f.dataType)
                if inner is None:
                    return None
                names |= inner
    return names


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # nesting deeper than orjson's limit
        return json_format.decode(text.encode())


#: Each writer schema's Spark type (its JSON text kept beside it by :func:`type_json`).
_SPARK_TYPES: weakref.WeakKeyDictionary[AvroSchema, DataType] = weakref.WeakKeyDictionary()
#: The JSON text of Spark types met lately, by identity (with the type, so an id is
#: never another object's): a batch's types are the cached ones of its schemas.
_TYPE_JSON: dict[int, tuple[DataType, str]] = {}
_TYPE_JSON_KEPT = 4096


def _spark_type(schema: AvroSchema) -> DataType:
    found = _SPARK_TYPES.get(schema)
    if found is None:
        found = _SPARK_TYPES.setdefault(schema, avro_to_spark(schema.schema))
    return found


def type_json(data_type: DataType) -> str:
    """``data_type.json()``, kept for the types a loop meets batch after batch (a 60-column
    type takes ~0.4 ms to write, hundreds of topics a batch)."""
    found = _TYPE_JSON.get(id(data_type))
    if found is not None and found[0] is data_type:
        return found[1]
    text = data_type.json()
    if len(_TYPE_JSON) >= _TYPE_JSON_KEPT:
        _TYPE_JSON.clear()
    _TYPE_JSON[id(data_type)] = (data_type, text)
    return text


def _prepare_schemas(texts: list[str]) -> None:
    """The writer schemas a loop is about to meet made ready before its first batch (in
    the registry's warm-up thread): parsed, with their batch readers, Spark types and
    those types' JSON. Best effort: a schema that fails is reported when it is met."""
    for text in texts:
        with contextlib.suppress(Exception):
            type_json(_spark_type(as_avro_schema(text)))
