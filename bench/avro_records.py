"""The Debezium-like Avro records the Kafka benchmarks produce (bench/ingest.py, bench/peers.py).

An update event with ``before``, ``after``, ``source`` and ``transaction`` (~185-byte
values) and an Avro key, both in the Confluent wire format (magic byte 0, 4-byte schema
id, Avro body). :func:`encoded_records` encodes 5,000 distinct events once; :func:`produce`
cycles through them, which costs every decoder the same as N distinct records. Record i
goes to partition ``i % partitions`` and has key ID ``i % DISTINCT``.
"""

from __future__ import annotations

import io
import random
import time
from typing import Any

DISTINCT = 5000


def encoded_records(value_id: int, key_id: int) -> tuple[list[bytes], list[bytes]]:
    """(keys, values): the DISTINCT encoded records, key i with value i."""
    import fastavro  # deferred: only producers need it

    from tests.fixtures import debezium as dbz

    value_schema = fastavro.parse_schema(dbz.AVRO_VALUE_SCHEMA)
    key_schema = fastavro.parse_schema(dbz.AVRO_KEY_SCHEMA)
    rnd = random.Random(42)

    def encode(schema_id: int, schema: Any, record: Any) -> bytes:
        buf = io.BytesIO()
        buf.write(b"\x00" + schema_id.to_bytes(4, "big"))
        fastavro.schemaless_writer(buf, schema, record)
        return buf.getvalue()

    values = [
        encode(value_id, value_schema, dbz.event(i, "u", rnd, transaction=True))
        for i in range(DISTINCT)
    ]
    keys = [encode(key_id, key_schema, {"ID": i}) for i in range(DISTINCT)]
    return keys, values


def produce(
    profile: Any,
    topic: str,
    n: int,
    keys: list[bytes],
    values: list[bytes],
    *,
    partitions: int = 1,
) -> float:
    """Create ``topic`` with ``partitions`` partitions and produce ``n`` records to it
    (zync's idempotent producer, linger 50 ms, no compression); the seconds from the
    first produce call until every record is acknowledged."""
    from engine.kafka import clients

    deadline = time.monotonic() + 60
    while True:
        try:
            clients.ensure_topic(profile, topic, partitions=partitions)
            break
        except clients.TopicNotFound:
            # a new topic can be missing from the metadata for a moment (seen under load)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    producer = clients.producer(profile, extra={"linger.ms": 50, "compression.type": "none"})
    started = time.monotonic()
    for i in range(n):
        j = i % DISTINCT
        while True:
            try:
                producer.produce(topic, key=keys[j], value=values[j], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 50_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise SystemExit(f"{left} records not delivered to {topic}")
    return time.monotonic() - started


def mean_size(records: list[bytes]) -> float:
    return sum(len(r) for r in records) / len(records)
