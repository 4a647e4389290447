"""Avro in the Confluent wire format: encode, split, validate, decode one or a batch.

Wire format: magic byte ``0``, the writer schema id as 4 big-endian bytes, then the
Avro binary body of the value ("schemaless": no container header).

Decoding produces the JSON-able values described in :mod:`engine.kafka.codecs.formats`
(bytes/fixed as base64 text, decimals as plain strings, other logical types as their
underlying number or string, NaN/infinity as null, unions untagged). Two decoders
produce exactly the same values:

* per record, with fastavro (:meth:`AvroSchema.decode`, :meth:`AvroSchema.decode_json`);
* per batch (:meth:`AvroSchema.decode_batch_to_json`), through polars
  (:mod:`engine.kafka.codecs.avro_batch`), falling back to fastavro record by record;
  whole wire-format messages of one schema straight into an Arrow array of JSON texts
  (:meth:`AvroSchema.decode_wire_batch`, from-kafka's common case).

Strictness shared by both decoders: a body must be consumed exactly. Per record, bytes
left over after the value are an error (``bad-avro``), and a body that ends early is
``truncated``. A batch that holds a bad body is decoded again record by record, which
reports exactly the bad bodies (with their index) and decodes the rest.

Making fastavro's values JSON-able per record lives in
:mod:`engine.kafka.codecs.avro_json`. Validation and coercion of JSON input (``zync
produce``) live in :mod:`engine.kafka.codecs.avro_coerce`; :func:`validate` and
:func:`coerce_json` are their entry points.
"""

from __future__ import annotations

import gc
import io
import json
import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import fastavro

from engine.kafka.codecs.avro_batch import BatchJson, PolarsBatchReader, Unsupported
from engine.kafka.codecs.avro_binary import PRIMITIVES
from engine.kafka.codecs.avro_coerce import AvroValidationError, Coercer
from engine.kafka.codecs.avro_json import build_converter, compact_json, strip_logical_types
from engine.kafka.codecs.errors import DecodeError

if TYPE_CHECKING:
    import pyarrow as pa

MAGIC = 0
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


# --------------------------------------------------------------------------------------
# Wire format


def encode(schema_id: int, parsed_schema: Any, record: Any) -> bytes:
    """Confluent wire-format bytes of ``record`` written with ``parsed_schema``.

    ``parsed_schema`` is a fastavro-parsed schema (or an :class:`AvroSchema`). The
    record must already hold Avro-ready values (see :func:`coerce_json` for JSON input);
    a record that does not fit raises :class:`AvroValidationError` listing every
    mismatch with its path.
    """
    schema = parsed_schema.parsed if isinstance(parsed_schema, AvroSchema) else parsed_schema
    if not 0 <= schema_id < 2**32:
        raise ValueError(f"schema id {schema_id} does not fit in 4 bytes")
    buf = io.BytesIO()
    buf.write(_HEADER.pack(MAGIC, schema_id))
    try:
        fastavro.schemaless_writer(buf, schema, record)
    except Exception as exc:  # fastavro raises ValueError, TypeError, AttributeError...
        errors = validate(schema, record) or [f"value: {exc}"]
        raise AvroValidationError(errors) from exc
    return buf.getvalue()


def split(data: bytes) -> tuple[int, bytes]:
    """``(schema_id, body)`` of a Confluent wire-format message.

    Raises :class:`DecodeError` ``bad-magic`` when the first byte is not 0 and
    ``truncated`` when the 5-byte header is incomplete.
    """
    if len(data) == 0:
        raise DecodeError("truncated", "empty message: no Confluent Avro header")
    if data[0] != MAGIC:
        hint = " (it looks like JSON)" if data[:1] in (b"{", b"[", b'"') else ""
        raise DecodeError(
            "bad-magic", f"first byte is 0x{data[0]:02x}, not the Avro magic byte 0x00{hint}"
        )
    if len(data) < HEADER_SIZE:
        raise DecodeError(
            "truncated", f"{len(data)} bytes: shorter than the 5-byte Confluent Avro header"
        )
    return int.from_bytes(data[1:HEADER_SIZE], "big"), bytes(data[HEADER_SIZE:])


def decode(parsed_schema: Any, body: bytes) -> Any:
    """The value in ``body`` as fastavro returns it (bytes, Decimal, datetime...).

    The body must be consumed exactly. Raises :class:`DecodeError` ``truncated`` or
    ``bad-avro``. :meth:`AvroSchema.decode` gives the JSON-able form instead.
    """
    schema = parsed_schema.parsed if isinstance(parsed_schema, AvroSchema) else parsed_schema
    return _read(schema, body)


def _read(parsed: Any, body: bytes) -> Any:
    bio = io.BytesIO(body)
    try:
        value = fastavro.schemaless_reader(bio, parsed, None)
    except EOFError as exc:
        if "Expected -" in str(exc):
            raise DecodeError("bad-avro", "negative length in the body") from exc
        raise DecodeError(
            "truncated", f"the {len(body)}-byte body ends before its value does"
        ) from exc
    except IndexError as exc:
        raise DecodeError("bad-avro", "union branch or enum symbol index out of range") from exc
    except UnicodeDecodeError as exc:
        raise DecodeError("bad-avro", f"a string is not UTF-8 ({exc.reason})") from exc
    except Exception as exc:  # anything else fastavro raises on bad input
        raise DecodeError("bad-avro", f"{type(exc).__name__}: {exc}") from exc
    left = len(body) - bio.tell()
    if left:
        raise DecodeError(
            "bad-avro",
            f"{left} byte(s) left over after the value: the body does not match its schema",
        )
    return value


# --------------------------------------------------------------------------------------
# Validation and JSON-input coercion (for `zync produce`)


def validate(schema: Any, value: Any, *, root: str = "value") -> list[str]:
    """Every way ``value`` does not fit ``schema`` (empty when it fits).

    Each error starts with the field path, e.g. ``value.after.ID: expected long, got
    "abc"``. ``schema`` is an :class:`AvroSchema`, schema JSON text, or a schema
    (raw or fastavro-parsed). Values are judged as given (bytes must be ``bytes``);
    use :func:`coerce_json` for JSON input.
    """
    errors: list[str] = []
    avro_schema = as_avro_schema(schema)
    Coercer(avro_schema.named, bytes_encoding=None).coerce(
        avro_schema.parsed, value, root, errors
    )
    return errors


def coerce_json(
    schema: Any, value: Any, *, bytes_encoding: str = "base64", root: str = "value"
) -> Any:
    """A JSON value made ready for :func:`encode` with ``schema``.

    Integral floats become ints for ``int``/``long``; ints become floats for
    ``float``/``double``; strings become bytes for ``bytes``/``fixed`` (decoded as
    ``base64``, the form zync's decoders write, or ``"utf-8"`` text); numbers or
    strings become ``Decimal`` for decimals; ISO-8601 strings are accepted for
    timestamps, dates and times. Missing fields take their default. Raises
    :class:`AvroValidationError` listing every mismatch with its path.
    """
    if bytes_encoding not in ("base64", "utf-8"):
        raise ValueError("bytes_encoding must be 'base64' or 'utf-8'")
    avro_schema = as_avro_schema(schema)
    errors: list[str] = []
    out = Coercer(avro_schema.named, bytes_encoding).coerce(
        avro_schema.parsed, value, root, errors
    )
    if errors:
        raise AvroValidationError(errors)
    return out


# --------------------------------------------------------------------------------------
# A writer schema, with everything needed to encode and decode it


class AvroSchema:
    """An Avro schema parsed once, with its encoders and decoders.

    ``schema`` is the schema as JSON data; ``parsed`` is fastavro's parsed form (for
    encoding, logical types honoured); ``named`` maps full names to named types.
    Raises ``ValueError`` when the schema is not valid Avro.
    """

    def __init__(self, schema: str | dict[str, Any] | list[Any]) -> None:
        if isinstance(schema, str):
            text = schema.strip()
            try:
                schema = json.loads(text)
            except ValueError:
                # a bare primitive name such as `string` is valid schema text too
                if text not in PRIMITIVES:
                    raise ValueError(f"schema is not JSON: {text[:60]!r}") from None
                schema = text
        self.schema: Any = schema
        self.named: dict[str, Any] = {}
        try:
            self.parsed: Any = fastavro.parse_schema(schema, named_schemas=self.named)
        except Exception as exc:  # fastavro's SchemaParseException, UnknownType, ...
            raise ValueError(f"not a valid Avro schema: {exc}") from exc
        self._record_reader: tuple[Any, Callable[[Any], Any] | None] | None = None
        self._batch: PolarsBatchReader | None = None
        self.batch_unsupported: str | None = None
        try:
            # polars reads logical types as their underlying type, as the reader below
            self._batch = PolarsBatchReader(schema)
        except Unsupported as exc:
            self.batch_unsupported = f"polars cannot read {exc}"

    @property
    def _reader(self) -> tuple[Any, Callable[[Any], Any] | None]:
        """The record-by-record reader (logical types read as their underlying type) and
        the converter of what it reads to our JSON form; made when first needed: a batch
        of one schema is read by polars (hundreds of topics' schemas meet no other)."""
        if self._record_reader is None:
            named: dict[str, Any] = {}
            reader = fastavro.parse_schema(strip_logical_types(self.schema), named_schemas=named)
            self._record_reader = (reader, build_converter(reader, named, frozenset()))
        return self._record_reader

    def __repr__(self) -> str:
        return f"AvroSchema({compact_json(self.schema)[:80]})"

    # encoding

    def encode(
        self, schema_id: int, value: Any, *, coerce: bool = True, bytes_encoding: str = "base64"
    ) -> bytes:
        """Wire-format bytes of ``value`` (a JSON value, coerced first unless told not to)."""
        if coerce:
            value = coerce_json(self, value, bytes_encoding=bytes_encoding)
        return encode(schema_id, self.parsed, value)

    # decoding

    def decode(self, body: bytes) -> Any:
        """The body's value, JSON-able (see :mod:`engine.kafka.codecs.formats`)."""
        reader, jsonify = self._reader
        value = _read(reader, body)
        return value if jsonify is None else jsonify(value)

    def decode_json(self, body: bytes) -> str:
        """The body's value as compact JSON text."""
        return compact_json(self.decode(body))

    def decode_batch_to_json(self, bodies: Sequence[bytes]) -> BatchJson:
        """Each body as compact JSON text, in the batch's order; bad bodies reported.

        Tries polars on the whole batch; when the schema is beyond polars, or the batch
        holds a bad body, decodes record by record with fastavro (the garbage collector
        paused meanwhile), which reports each bad body by its index.
        """
        if not bodies:
            return BatchJson([], [], "none")
        reason = self.batch_unsupported
        if self._batch is not None:
            try:
                return BatchJson(self._batch.read(bodies), [], "polars")
            except (KeyboardInterrupt, SystemExit, GeneratorExit):
                raise
            except BaseException as exc:  # noqa: B036, BLE001 - polars panics are BaseExceptions
                reason = f"polars failed on the batch: {type(exc).__name__}: {exc}"[:300]
        return self._decode_each(bodies, reason)

    def decode_wire_batch(self, messages: Sequence[bytes], header: bytes) -> pa.Array | None:
        """Whole wire-format messages, all written with this schema (the 5-byte
        ``header`` each starts with), as JSON texts in one Arrow string array, read by
        polars in one call. None when that cannot be: the schema is beyond polars, a
        message has another header, a body is bad — :meth:`decode_batch_to_json` then
        decodes them, and reports the bad ones."""
        if self._batch is None:
            return None
        try:
            return self._batch.read_wire(messages, header)
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException:  # noqa: B036, BLE001 - polars panics are BaseExceptions
            return None

    def _decode_each(self, bodies: Sequence[bytes], reason: str | None) -> BatchJson:
        texts: list[str | None] = []
        errors: list[tuple[int, DecodeError]] = []
        reader, jsonify = self._reader
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            for i, body in enumerate(bodies):
                try:
                    value = _read(reader, body)
                except DecodeError as exc:
                    texts.append(None)
                    errors.append((i, exc))
                    continue
                texts.append(compact_json(value if jsonify is None else jsonify(value)))
        finally:
            if paused:
                gc.enable()
        return BatchJson(texts, errors, "fastavro", reason)


@lru_cache(maxsize=1024)  # a whole database: hundreds of topics, a key and a value schema each
def _cached_schema(schema_json: str) -> AvroSchema:
    return AvroSchema(schema_json)


def as_avro_schema(schema: Any) -> AvroSchema:
    """An :class:`AvroSchema` for schema text, raw or fastavro-parsed JSON (cached by text)."""
    if isinstance(schema, AvroSchema):
        return schema
    if isinstance(schema, str):
        return _cached_schema(schema)
    if isinstance(schema, dict) and schema.get("__fastavro_parsed"):
        schema = {k: v for k, v in schema.items() if not k.startswith("__")}
    return _cached_schema(json.dumps(schema, sort_keys=True))


def decode_batch_to_json(schema_json: str, bodies: Sequence[bytes]) -> BatchJson:
    """Bodies (after the 5-byte header) written with ``schema_json``, as JSON texts."""
    return as_avro_schema(schema_json).decode_batch_to_json(bodies)
