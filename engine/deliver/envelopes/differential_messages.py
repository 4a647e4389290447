"""The messages of the ``differential`` envelope (:mod:`~engine.deliver.envelopes.
differential`): updates ``{record, time, diff}`` and progress ``{time, count}``, encoded
for each format, and their Avro and Kafka Connect schemas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.deliver.errors import DeliveryError
from engine.kafka.codecs.avro_binary import zigzag_long
from engine.kafka.codecs.formats import Format
from engine.kafka.typemap.from_spark import avro_name

if TYPE_CHECKING:
    from engine.deliver.encode import PartCodec

#: One message to make: (partition, offset, step, time, key text, image text or None,
#: diff or count).
Update = tuple[int, int, int, int, "str | None", "str | None", int]


def update_values(
    topic: str,
    format: Format,  # noqa: A002 - the output's format
    codecs: tuple[PartCodec, PartCodec],
    prefix: bytes,
    updates: Sequence[Update],
) -> list[bytes]:
    """The messages of ``updates`` (none of them a progress) in ``format``; ``prefix``:
    the Avro wire header or the Connect schema (:func:`message_prefix`)."""
    key_codec, value_codec = codecs
    if not updates:
        return []
    if format is Format.AVRO:
        if value_codec.avro is None:
            raise DeliveryError(
                f"{topic}: the staging pool records no value type for the topic "
                "(use --format json)"
            )
        keys = [u[4] for u in updates]
        key_bodies: list[bytes | None]
        if key_codec.avro is not None:
            key_bodies = key_codec.bodies(keys)
        elif any(k is not None for k in keys):
            raise DeliveryError(
                f"{topic}: the staging pool records no key type for the topic "
                "(use --format json)"
            )
        else:
            key_bodies = [None] * len(keys)
        value_bodies = value_codec.bodies([u[5] for u in updates])
        head = prefix
        return [
            head
            + b"\x02"
            + (b"\x00" if k is None else b"\x02" + k)
            + (v or b"")
            + zigzag_long(u[3])
            + zigzag_long(u[6])
            + b"\x00"
            for u, k, v in zip(updates, key_bodies, value_bodies, strict=True)
        ]
    connect = format is Format.CONNECT_JSON
    prefix, suffix = (prefix, b"}") if connect else (b"", b"")
    return [
        prefix
        + (
            f'{{"update":{{"record":{{"key":{"null" if u[4] is None else u[4]},"value":{u[5]}}},'
            f'"time":{u[3]},"diff":{u[6]}}},"progress":null}}'
        ).encode()
        + suffix
        for u in updates
    ]


def progress_value(
    format: Format,  # noqa: A002 - the output's format
    prefix: bytes,
    moment: int,
    count: int,
) -> bytes:
    """The progress message closing time ``moment`` with ``count`` updates."""
    if format is Format.AVRO:
        return prefix + b"\x00\x02" + zigzag_long(moment) + zigzag_long(count)
    text = f'{{"update":null,"progress":{{"time":{moment},"count":{count}}}}}'.encode()
    if format is Format.CONNECT_JSON:
        return prefix + text + b"}"
    return text


def differential_schema(topic: str, key: Any, value: Any) -> dict[str, Any]:
    """The Avro schema of differential messages for Avro key and value schemas."""
    base = avro_name(topic)
    key_schema = key if key is not None else "string"
    value_schema = value if value is not None else "string"
    return {
        "type": "record",
        "name": f"{base}_message",
        "namespace": "zync.differential",
        "fields": [
            {
                "name": "update",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": f"{base}_update",
                        "fields": [
                            {
                                "name": "record",
                                "type": {
                                    "type": "record",
                                    "name": f"{base}_record",
                                    "fields": [
                                        {
                                            "name": "key",
                                            "type": ["null", key_schema],
                                            "default": None,
                                        },
                                        {"name": "value", "type": value_schema},
                                    ],
                                },
                            },
                            {"name": "time", "type": "long"},
                            {"name": "diff", "type": "long"},
                        ],
                    },
                ],
                "default": None,
            },
            {
                "name": "progress",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": f"{base}_progress",
                        "fields": [
                            {"name": "time", "type": "long"},
                            {"name": "count", "type": "long"},
                        ],
                    },
                ],
                "default": None,
            },
        ],
    }


def differential_connect_schema(key: Any, value: Any) -> dict[str, Any]:
    """The Kafka Connect schema of differential messages."""
    key_schema = {**(key or {"type": "string"}), "optional": True}
    value_schema = {**(value or {"type": "string"}), "optional": False}
    return {
        "type": "struct",
        "name": "zync.differential.Message",
        "optional": False,
        "fields": [
            {
                "field": "update",
                "type": "struct",
                "optional": True,
                "fields": [
                    {
                        "field": "record",
                        "type": "struct",
                        "optional": False,
                        "fields": [
                            {**key_schema, "field": "key"},
                            {**value_schema, "field": "value"},
                        ],
                    },
                    {"field": "time", "type": "int64", "optional": False},
                    {"field": "diff", "type": "int64", "optional": False},
                ],
            },
            {
                "field": "progress",
                "type": "struct",
                "optional": True,
                "fields": [
                    {"field": "time", "type": "int64", "optional": False},
                    {"field": "count", "type": "int64", "optional": False},
                ],
            },
        ],
    }
