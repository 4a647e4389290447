"""The record formats of Kafka keys and values, and how decoders find Avro schemas.

Three formats:

* ``AVRO``: the Confluent wire format (magic byte 0, 4-byte schema id, Avro body); the
  writer schema is fetched through a :data:`SchemaLookup` callable, so no registry code
  lives in the codecs.
* ``CONNECT_JSON``: Kafka Connect's JsonConverter with ``schemas.enable=true``
  (``{"schema": ..., "payload": ...}``).
* ``JSON``: plain UTF-8 JSON.

Every decoder returns *JSON-able* Python values (dict, list, str, int, float, bool,
None) with the same conventions in every format, so a value can be stored as JSON text
and read back by Spark ``from_json`` with the type :mod:`engine.kafka.typemap.to_spark`
maps its schema to:

* bytes (Avro ``bytes``/``fixed``, Connect ``bytes``) are base64 text (standard alphabet,
  padded), as JsonConverter writes them;
* decimals are plain-notation strings with exactly ``scale`` digits (``"12.30"``);
* other logical types (timestamps, dates, times, uuids) keep their underlying value
  (a number or a string), never a rendered date;
* NaN and infinities (not representable in JSON) become ``null``.

``None`` bytes (a Kafka tombstone) decode to ``None``. Failures raise
:class:`~engine.kafka.codecs.errors.DecodeError`, whose ``kind`` names what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any


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
