"""Batch decoding of Avro bodies through polars (Rust), ~1.1 M records/s.

The bodies of one writer schema are joined into one Avro object container block and
read by ``polars.read_avro``, then serialized to JSON text by polars (measured:
~1.1 M records/s, against ~150 k/s per record in Python). Every body is followed by a sentinel long that must read
back unchanged, so a body that is too long or too short in the middle of a batch cannot
silently shift its neighbours: the reader raises :class:`Unsupported` and
:meth:`engine.kafka.codecs.avro.AvroSchema.decode_batch_to_json` decodes the batch again
record by record.

Whole wire-format messages can be read the same way (:meth:`PolarsBatchReader.read_wire`):
the container's record then starts with a 5-byte ``fixed`` field that takes each
message's Confluent header, which must read back as the one the batch was written with;
no body is sliced out of its message. The JSON texts come out as one Arrow string array
(:meth:`PolarsBatchReader.read_arrow`), never as a million Python strings.

Known limits of polars 2.1, which make :class:`PolarsBatchReader` refuse a schema
(:class:`Unsupported`): maps, unions of more than one non-null type, a bare ``null``
type, recursive types, decimals of precision > 38, records with no fields at the top.
Enums are read as their index (the container schema says ``int``) and mapped to symbols
afterwards, because polars panics on enums nested anywhere but at the top level. One
leniency remains: a corrupt union *index* of a ``["null", T]`` union is read as ``T``
where fastavro rejects it.

polars is imported inside the functions that read: importing this module stays cheap.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import fastavro

from engine.kafka.codecs.avro_binary import PRIMITIVES, zigzag_long
from engine.kafka.codecs.errors import DecodeError

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa


class Unsupported(Exception):
    """The polars Avro reader cannot read this schema."""


_SENTINEL = 0x5A594E43_2A  # "ZYNC*": follows every body in a batch container
_SENTINEL_FIELD = "zync_batch_sentinel"
_HEADER_FIELD = "zync_batch_header"  # a wire-format message's magic byte and schema id
_WIRE_HEADER_SIZE = 5
_SYNC = b"zync-batch-sync!"
_MAX_DECIMAL_PRECISION = 38


def _container_header(schema_json: str) -> bytes:
    meta = {b"avro.schema": schema_json.encode("utf-8"), b"avro.codec": b"null"}
    head = bytearray(b"Obj\x01")
    head += zigzag_long(len(meta))
    for key, value in meta.items():
        head += zigzag_long(len(key)) + key + zigzag_long(len(value)) + value
    head += zigzag_long(0)
    head += _SYNC
    return bytes(head)


PlExprFn = Callable[["pl.Expr"], "pl.Expr"]


def _plan(schema: Any) -> tuple[Any, PlExprFn | None]:
    """(container schema piece, polars expression turning it into our JSON form)."""
    import polars as pl  # deferred: polars is slow to import

    if isinstance(schema, str):
        if schema == "null":
            raise Unsupported("a bare null type")
        if schema == "bytes":
            return "bytes", lambda e: e.bin.encode("base64")
        if schema in PRIMITIVES:
            return schema, None
        raise Unsupported(f"the recursive type {schema}")
    if isinstance(schema, list):
        non_null = [b for b in schema if b != "null"]
        if len(schema) != 2 or len(non_null) != 1:
            raise Unsupported("a union of several types")
        piece, conv = _plan(non_null[0])
        return [piece if b != "null" else "null" for b in schema], conv
    t = schema["type"]
    if isinstance(t, (dict, list)):
        return _plan(t)
    logical = schema.get("logicalType")
    if logical == "decimal" and t in ("bytes", "fixed"):
        precision = schema.get("precision")
        if not isinstance(precision, int) or not 0 < precision <= _MAX_DECIMAL_PRECISION:
            raise Unsupported(f"a decimal of precision {precision}")
        piece = {
            "type": t,
            "logicalType": "decimal",
            "precision": precision,
            "scale": int(schema.get("scale", 0)),
        }
        if t == "fixed":
            piece.update(name=schema["name"], size=schema["size"])
        return piece, None
    if t == "fixed":
        return {"type": "fixed", "name": schema["name"], "size": schema["size"]}, (
            lambda e: e.bin.encode("base64")
        )
    if t == "enum":
        symbols = list(schema["symbols"])
        indexes = list(range(len(symbols)))
        return "int", lambda e: e.replace_strict(indexes, symbols, return_dtype=pl.String)
    if t == "array":
        piece, conv = _plan(schema["items"])
        if conv is None:
            return {"type": "array", "items": piece}, None
        item_conv = conv
        return {"type": "array", "items": piece}, lambda e: e.list.eval(item_conv(pl.element()))
    if t == "map":
        raise Unsupported("a map")
    if t in ("record", "error"):
        fields, convs = _plan_fields(schema)
        container = {"type": "record", "name": schema["name"], "fields": fields}
        if not convs:
            return container, None
        return container, lambda e: e.struct.with_fields(
            [c(pl.field(n)).alias(n) for n, c in convs]
        )
    if t in PRIMITIVES:
        return _plan(t)
    raise Unsupported(f"the type {t!r}")


def _plan_fields(schema: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[str, PlExprFn]]]:
    fields = []
    convs = []
    for f in schema["fields"]:
        piece, conv = _plan(f["type"])
        fields.append({"name": f["name"], "type": piece})
        if conv is not None:
            convs.append((f["name"], conv))
    return fields, convs


@dataclass
class BatchJson:
    """A decoded batch: ``texts[i]`` is body i's JSON text, or None if it is in ``errors``.

    ``engine`` says which decoder produced it (``"polars"`` or ``"fastavro"``);
    ``fallback_reason`` says why polars was not used or failed.
    """

    texts: list[str | None]
    errors: list[tuple[int, DecodeError]] = field(default_factory=list)
    engine: str = "polars"
    fallback_reason: str | None = None


class PolarsBatchReader:
    """Reads many bodies of one schema as one Avro container block with polars."""

    def __init__(self, reader_schema: Any) -> None:
        expanded = fastavro.parse_schema(reader_schema, expand=True)
        top = expanded
        while isinstance(top, dict) and isinstance(top.get("type"), (dict, list)):
            top = top["type"]
        if isinstance(top, dict) and top.get("type") in ("record", "error"):
            if not top["fields"]:
                raise Unsupported("a record with no fields")
            fields, convs = _plan_fields(top)
            for name in (_SENTINEL_FIELD, _HEADER_FIELD):
                if any(f["name"] == name for f in fields):
                    raise Unsupported(f"a field named {name}")
            record = top["name"]
            self.columns = [f["name"] for f in fields]
            self.convs = dict(convs)
            self.wrapped = False
        else:
            piece, conv = _plan(top)
            fields = [{"name": "v", "type": piece}]
            record = "zync_batch"
            self.columns = ["v"]
            self.convs = {"v": conv} if conv is not None else {}
            self.wrapped = True
        sentinel = {"name": _SENTINEL_FIELD, "type": "long"}
        header = {
            "name": _HEADER_FIELD,
            "type": {"type": "fixed", "name": _HEADER_FIELD, "size": _WIRE_HEADER_SIZE},
        }
        self.header = _container_header(
            json.dumps({"type": "record", "name": record, "fields": [*fields, sentinel]})
        )
        self.wire_header = _container_header(
            json.dumps({"type": "record", "name": record, "fields": [header, *fields, sentinel]})
        )
        self.sentinel = zigzag_long(_SENTINEL)

    def read(self, bodies: Sequence[bytes]) -> list[str | None]:
        """Each body's JSON text (:meth:`read_arrow` as Python strings)."""
        texts: list[str | None] = self.read_arrow(bodies).to_pylist()
        return texts

    def read_arrow(self, bodies: Sequence[bytes]) -> pa.Array:
        """Bodies (after their 5-byte header) as JSON texts, an Arrow string array."""
        return self._texts(self._frame(self.header, bodies))

    def read_wire(self, messages: Sequence[bytes], header: bytes) -> pa.Array:
        """Whole wire-format messages, every one starting with ``header`` (magic byte and
        schema id), as JSON texts; :class:`Unsupported` when one does not."""
        import polars as pl  # deferred: polars is slow to import

        frame = self._frame(self.wire_header, messages)
        if not frame.select((pl.col(_HEADER_FIELD) == header).all()).item():
            raise Unsupported("a message of the batch has another header")
        return self._texts(frame)

    def _frame(self, container: bytes, bodies: Sequence[bytes]) -> pl.DataFrame:
        import polars as pl  # deferred: polars is slow to import

        n = len(bodies)
        size = sum(map(len, bodies)) + n * len(self.sentinel)
        # the container in one piece: its header, the block's count and size, then every
        # body and its sentinel (joined once: a batch's bodies are tens of megabytes)
        parts: list[bytes] = [self.sentinel] * (2 * n + 2)
        parts[0] = b"".join((container, zigzag_long(n), zigzag_long(size)))
        parts[1:-1:2] = bodies
        parts[-1] = _SYNC
        data = b"".join(parts)
        del parts
        frame = pl.read_avro(io.BytesIO(data))
        sentinel = frame.get_column(_SENTINEL_FIELD)
        if frame.height != n or sentinel.null_count() or not (sentinel == _SENTINEL).all():
            raise Unsupported("a body did not end where its value did")
        return frame

    def _texts(self, frame: pl.DataFrame) -> pa.Array:
        import polars as pl  # deferred: polars is slow to import
        import pyarrow as pa

        exprs = [
            (self.convs[name](pl.col(name)) if name in self.convs else pl.col(name)).alias(name)
            for name in self.columns
        ]
        encoded = frame.select(pl.struct(exprs).struct.json_encode().alias("j"))
        if self.wrapped:  # '{"v":<value>}' -> '<value>'
            encoded = encoded.select(pl.col("j").str.slice(5, pl.col("j").str.len_chars() - 6))
        texts = encoded.to_series().to_arrow()
        return texts if texts.type == pa.string() else texts.cast(pa.string())
