"""Produce JSON records to a Kafka topic: what ``zync produce`` does, as a library.

The steps, in order; nothing reaches Kafka or the registry until every record passed:

1. **Read** JSON input and 2. **shape** it into records: :mod:`engine.kafka.produce_input`
   (:func:`~engine.kafka.produce_input.load_records`).
3. **Schemas** (:func:`prepare`), for Avro: the schema given (``.avsc``), else the latest
   one registered under ``<topic>-value`` / ``<topic>-key`` when every record fits it
   (so producing more of the same data adds no schema version), else one inferred from
   the records (:func:`engine.kafka.typemap.infer.infer_avro_schema`: record names come from the
   topic, ``namespace`` when given). For Kafka Connect JSON the same without a registry
   (a given schema is a Connect schema in JSON).
4. **Validate and encode every record** against its schema. Failures name the input line
   and the field path (``orders.json line 3: value.after.ID: expected long, got "x"``),
   all problems are collected, and the batch stops there: :class:`ProduceError`.
5. **Register** the schemas (Avro: ``<topic>-key`` / ``<topic>-value``), **create the
   topic** when missing (``partitions``), **send** with an idempotent producer (keys are
   partitioned with murmur2, as Java clients do), **flush**, and return a
   :class:`ProduceReport` with counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ZyncError
from engine.kafka.codecs import connect_json, plain_json
from engine.kafka.codecs.avro import AvroSchema, coerce_json
from engine.kafka.codecs.avro_coerce import AvroValidationError
from engine.kafka.codecs.formats import Format, SchemaNotFound
from engine.kafka.produce_input import InputRecord
from engine.kafka.registry_client import RegistrySchemas, subject_for
from engine.kafka.typemap.infer import InferenceError, infer_avro_schema, infer_connect_schema
from engine.settings.kafka import KafkaProfile

#: Problems listed by a :class:`ProduceError` message (all are in ``.problems``).
_SHOWN_PROBLEMS = 3


class ProduceError(ZyncError):
    """Records do not fit their schema (or a schema cannot be made); nothing was sent.

    ``problems`` lists every problem found, each naming the input line and field path.
    """

    def __init__(self, problems: list[str], *, what: str = "record") -> None:
        self.problems = problems
        shown = "; ".join(problems[:_SHOWN_PROBLEMS])
        more = len(problems) - _SHOWN_PROBLEMS
        extra = f"; and {more} more {what} problem{'s' if more > 1 else ''}" if more > 0 else ""
        super().__init__(f"{shown}{extra}; nothing was sent")


class DeliveryError(ZyncError):
    """Kafka did not acknowledge every record."""


# --------------------------------------------------------------------------------------
# Schemas, validation, encoding


@dataclass(frozen=True)
class ProduceOptions:
    """What to produce and how (``zync produce``'s options)."""

    topic: str
    format: Format = Format.AVRO
    key_schema: Any = None  # Avro schema (text or data) / Connect schema; None: infer
    value_schema: Any = None
    namespace: str | None = None
    bytes_fields: tuple[str, ...] = ()
    partitions: int = 1
    timeout: float = 10.0


@dataclass
class PartSchema:
    """The schema chosen for the keys or the values, and where it came from."""

    part: str  # "key" | "value"
    schema: Any  # Avro schema data, or a Connect schema dict
    origin: str  # "given", "registered", "inferred"
    subject: str | None = None
    schema_id: int | None = None
    version: int | None = None


@dataclass
class Prepared:
    """Validated records, ready to register and send (``key``/``value`` are bytes later)."""

    options: ProduceOptions
    records: list[InputRecord]
    key: PartSchema | None = None
    value: PartSchema | None = None
    coerced: list[tuple[Any, Any]] = field(default_factory=list)


def record_name(topic: str, part: str) -> str:
    """The Avro record name inferred schemas get: the topic (``_key`` appended for keys)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", topic) or "record"
    if name[0].isdigit():
        name = f"_{name}"
    return f"{name}_key" if part == "key" else name


def _avro_fits(schema: Any, records: list[InputRecord], part: str) -> bool:
    schema = AvroSchema(schema)
    for record in records:
        value = getattr(record, part)
        if value is None:
            continue
        try:
            coerce_json(schema, value, root=part)
        except AvroValidationError:
            return False
    return True


def _choose_avro(
    part: str,
    given: Any,
    records: list[InputRecord],
    options: ProduceOptions,
    registry: RegistrySchemas | None,
) -> PartSchema | None:
    values = [getattr(r, part) for r in records if getattr(r, part) is not None]
    if given is not None:
        try:
            schema = AvroSchema(given).schema  # text (JSON or a bare name) or data
        except ValueError as exc:
            raise ProduceError([f"--{part}-schema: {exc}"], what="schema") from None
        return PartSchema(part, schema, "given")
    if not values:
        return None
    subject = subject_for(options.topic, part)
    if registry is not None:
        try:
            latest = registry.latest(subject)
        except SchemaNotFound:
            latest = None
        if latest is not None and latest.schema.schema_type in (None, "AVRO"):
            schema = json.loads(latest.schema.schema_str)
            if _avro_fits(schema, records, part):
                return PartSchema(
                    part, schema, "registered", subject, latest.schema_id, latest.version
                )
    try:
        schema = infer_avro_schema(
            values,
            name=record_name(options.topic, part),
            namespace=options.namespace,
            bytes_fields=_part_paths(options.bytes_fields, part),
        )
    except InferenceError as exc:
        raise ProduceError([f"cannot infer an Avro schema for the {part}s: {exc}"],
                           what="schema") from None
    return PartSchema(part, schema, "inferred")


def _part_paths(paths: Iterable[str], part: str) -> list[str]:
    """``--bytes-fields`` paths for keys (``key.x``) or values (``x`` or ``value.x``)."""
    out = []
    for path in paths:
        head, _, rest = path.partition(".")
        if head == part and rest:
            out.append(rest)
        elif part == "value" and head != "key":
            out.append(path)
    return out


def _choose_connect(
    part: str, given: Any, records: list[InputRecord], options: ProduceOptions
) -> PartSchema | None:
    values = [getattr(r, part) for r in records if getattr(r, part) is not None]
    if given is not None:
        try:
            schema = json.loads(given) if isinstance(given, str) else given
            connect_json.check_schema(schema)
        except (ValueError, connect_json.ConnectSchemaError) as exc:
            raise ProduceError([f"--{part}-schema: {exc}"], what="schema") from None
        return PartSchema(part, schema, "given")
    if not values:
        return None
    try:
        schema = infer_connect_schema(
            values, bytes_fields=_part_paths(options.bytes_fields, part), root=part
        )
    except InferenceError as exc:
        raise ProduceError(
            [f"cannot infer a Kafka Connect schema for the {part}s: {exc}"], what="schema"
        ) from None
    return PartSchema(part, schema, "inferred")


def prepare(
    records: list[InputRecord],
    options: ProduceOptions,
    registry: RegistrySchemas | None = None,
) -> Prepared:
    """Choose schemas and check every record against them; nothing is sent or registered.

    Raises :class:`ProduceError` listing every record that does not fit (input line and
    field path each).
    """
    prepared = Prepared(options, records)
    fmt = options.format
    if fmt is Format.JSON:
        if options.key_schema is not None or options.value_schema is not None:
            raise ProduceError(["schemas apply to the avro and connect-json formats, not json"],
                               what="schema")
        prepared.coerced = [(r.key, r.value) for r in records]
        return prepared
    if fmt is Format.AVRO:
        prepared.key = _choose_avro("key", options.key_schema, records, options, registry)
        prepared.value = _choose_avro("value", options.value_schema, records, options, registry)
    else:
        prepared.key = _choose_connect("key", options.key_schema, records, options)
        prepared.value = _choose_connect("value", options.value_schema, records, options)

    parsed = {
        part: AvroSchema(chosen.schema)
        for part, chosen in (("key", prepared.key), ("value", prepared.value))
        if chosen is not None and fmt is Format.AVRO
    }
    problems: list[str] = []
    for record in records:
        out: list[Any] = []
        for part, chosen in (("key", prepared.key), ("value", prepared.value)):
            value = getattr(record, part)
            if value is None or chosen is None:
                out.append(value)
                continue
            try:
                if fmt is Format.AVRO:
                    out.append(coerce_json(parsed[part], value, root=part))
                else:
                    out.append(connect_json.encode(chosen.schema, value, root=part))
            except AvroValidationError as exc:
                problems.extend(f"{record.where}: {error}" for error in exc.errors)
                out.append(None)
            except ValueError as exc:
                problems.append(f"{record.where}: {exc}")
                out.append(None)
        prepared.coerced.append((out[0], out[1]))
    if problems:
        raise ProduceError(problems)
    return prepared


def register(prepared: Prepared, registry: RegistrySchemas) -> None:
    """Register the Avro schemas under ``<topic>-key`` / ``<topic>-value`` (ids set)."""
    for chosen in (prepared.key, prepared.value):
        if chosen is None or chosen.schema_id is not None:
            continue
        chosen.subject = subject_for(prepared.options.topic, chosen.part)
        chosen.schema_id = registry.register(chosen.subject, json.dumps(chosen.schema))
        try:
            registered = registry.latest(chosen.subject)
            if registered.schema_id == chosen.schema_id:
                chosen.version = registered.version
        except SchemaNotFound:
            pass


def encode(prepared: Prepared) -> list[tuple[bytes | None, bytes | None]]:
    """The ``(key, value)`` bytes of every record (Avro needs :func:`register` first)."""
    fmt = prepared.options.format
    out: list[tuple[bytes | None, bytes | None]] = []
    encoders: list[tuple[AvroSchema, int] | None] = []
    for chosen in (prepared.key, prepared.value):
        if fmt is Format.AVRO and chosen is not None:
            if chosen.schema_id is None:
                raise ValueError("register the schemas before encoding")
            encoders.append((AvroSchema(chosen.schema), chosen.schema_id))
        else:
            encoders.append(None)
    for pair in prepared.coerced:
        encoded: list[bytes | None] = []
        for value, encoder in zip(pair, encoders, strict=True):
            if value is None:
                encoded.append(None)
            elif isinstance(value, bytes):  # connect-json: already encoded
                encoded.append(value)
            elif encoder is not None:
                schema, schema_id = encoder
                encoded.append(schema.encode(schema_id, value, coerce=False))
            else:
                encoded.append(plain_json.encode(value))
        out.append((encoded[0], encoded[1]))
    return out


# --------------------------------------------------------------------------------------
# Sending


@dataclass
class ProduceReport:
    """What was sent."""

    topic: str
    format: Format
    records: int
    per_partition: dict[int, int]
    partitions: int
    topic_created: bool
    key: PartSchema | None = None
    value: PartSchema | None = None
    notes: list[str] = field(default_factory=list)


def send(
    profile: KafkaProfile,
    topic: str,
    messages: Sequence[tuple[bytes | None, bytes | None]],
    *,
    timeout: float = 10.0,
) -> dict[int, int]:
    """Send ``(key, value)`` messages in order with an idempotent producer and flush.

    Returns the count per partition. Raises :class:`DeliveryError` when a record is not
    acknowledged (within the producer's message timeout, or ``timeout`` after the last
    one was queued).
    """
    from engine.kafka.clients import producer  # deferred: librdkafka

    counts: dict[int, int] = {}
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error.str())
        else:
            counts[message.partition()] = counts.get(message.partition(), 0) + 1

    kafka = producer(profile, extra={"partitioner": "murmur2_random"})
    for key, value in messages:
        while True:
            try:
                kafka.produce(topic, value=value, key=key, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                kafka.poll(0.1)
        kafka.poll(0)
    left = kafka.flush(max(timeout, 1.0) + 60.0)
    if errors:
        raise DeliveryError(
            f"{len(errors)} of {len(messages)} records to {topic} were not delivered: {errors[0]}"
        )
    if left:
        raise DeliveryError(
            f"{left} of {len(messages)} records to {topic} were not acknowledged by Kafka in time"
        )
    return counts


def produce(
    profile: KafkaProfile,
    records: list[InputRecord],
    options: ProduceOptions,
    registry: RegistrySchemas | None = None,
) -> ProduceReport:
    """Validate every record, register schemas, create the topic when missing, send.

    Avro needs ``registry``. Raises :class:`ProduceError` (nothing sent) for records or
    schemas that do not fit, :class:`~engine.kafka.clients.KafkaUnavailable`,
    :class:`~engine.kafka.registry_client.RegistryUnavailable`,
    :class:`~engine.kafka.registry_client.SchemaRejected` or :class:`DeliveryError`.
    """
    from engine.kafka.clients import check_reachable, ensure_topic  # deferred: librdkafka

    if options.format is Format.AVRO and registry is None:
        raise ProduceError(["the avro format needs a Schema Registry"], what="schema")
    if not records:  # no schema to infer, no topic to create
        return ProduceReport(options.topic, options.format, 0, {}, 0, False)
    prepared = prepare(records, options, registry)
    check_reachable(profile, options.timeout)  # fail before registering anything
    if registry is not None and options.format is Format.AVRO:
        register(prepared, registry)
    messages = encode(prepared)
    partitions, created = ensure_topic(
        profile, options.topic, partitions=options.partitions, timeout=options.timeout
    )
    notes = []
    if not created and options.partitions != 1 and len(partitions) != options.partitions:
        notes.append(
            f"topic {options.topic} already has {len(partitions)} partition(s); "
            "--partitions applies only when zync creates the topic"
        )
    counts = send(profile, options.topic, messages, timeout=options.timeout) if messages else {}
    return ProduceReport(
        topic=options.topic,
        format=options.format,
        records=len(messages),
        per_partition=dict(sorted(counts.items())),
        partitions=len(partitions),
        topic_created=created,
        key=prepared.key,
        value=prepared.value,
        notes=notes,
    )


def describe(report: ProduceReport) -> list[str]:
    """Lines a person reads after producing (no secrets)."""
    if not report.records:
        return [f"nothing to produce: the input holds no records ({report.topic} unchanged)"]
    spread = ", ".join(f"{p}: {n}" for p, n in report.per_partition.items()) or "none"
    lines = [
        f"produced {report.records} record{'s' if report.records != 1 else ''} to "
        f"{report.topic} as {report.format.value} (per partition {spread})"
    ]
    if report.topic_created:
        lines.append(f"created topic {report.topic} with {report.partitions} partition(s)")
    for chosen in (report.key, report.value):
        if chosen is None:
            continue
        if chosen.schema_id is not None:
            version = f" version {chosen.version}" if chosen.version is not None else ""
            lines.append(
                f"{chosen.part} schema: {chosen.origin}, subject {chosen.subject}{version}, "
                f"id {chosen.schema_id}"
            )
        else:
            lines.append(f"{chosen.part} schema: {chosen.origin}")
    lines.extend(report.notes)
    return lines
