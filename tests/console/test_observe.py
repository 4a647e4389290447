"""engine.observe: the read-only snapshots the console polls (no Textual here).

Faults come back in words; with the session broker, a raw pool written through the pool
API gives watermarks, the lake's offset, lag in records, in Kafka time and in Debezium
source time, dead letters and a rate.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from engine.lake.pool_record import ROW_SCHEMA
from engine.lake.pools import RAW, Lake
from engine.observe.kafka_probe import source_ts_ms
from engine.observe.observer import Observer
from engine.settings.kafka import KafkaProfile
from engine.settings.registry import RegistryProfile

BASE_MS = 1_714_557_600_000


def test_missing_lake_and_unconfigured_kafka_are_words_not_errors(tmp_path: Path) -> None:
    observer = Observer(Lake(tmp_path / "nowhere"), kafka_error="no Kafka configured: run `zync dev up`")
    report = observer.topics()
    assert report.lake_error == f"lake path {tmp_path / 'nowhere'} is missing"
    assert report.kafka_error.startswith("no Kafka configured")
    assert report.topics == ()
    assert observer.etl().error == "no ETL configuration loaded"


def test_unreachable_kafka_and_registry_are_reported_within_the_timeout(tmp_path: Path) -> None:
    (tmp_path / "lake").mkdir()
    observer = Observer(
        Lake(tmp_path / "lake"),
        kafka=KafkaProfile("127.0.0.1:1"),
        registry=RegistryProfile("http://127.0.0.1:1"),
        probe_timeout=1.0,
    )
    started = time.monotonic()
    report = observer.topics()
    assert time.monotonic() - started < 8
    assert report.lake_error is None
    assert report.kafka_error.startswith("cannot reach Kafka at 127.0.0.1:1")
    assert report.registry_error.startswith("cannot reach Schema Registry at http://127.0.0.1:1")


def test_source_ts_ms_reads_debezium_envelopes() -> None:
    assert source_ts_ms({"source": {"ts_ms": 5}, "op": "c"}) == 5
    assert source_ts_ms({"schema": {}, "payload": {"source": {"ts_ms": 7}}}) == 7
    assert source_ts_ms({"after": {"ID": 1}}) is None
    assert source_ts_ms(None) is None


def _rows(topic: str, offsets: range, *, dead: set[int] = frozenset()) -> pa.Table:
    rows = []
    for offset in offsets:
        kafka = {"topic": topic, "partition": 0, "offset": offset, "timestamp": None}
        if offset in dead:
            rows.append({"kafka": kafka, "key": None, "value": None, "marker": None,
                         "deadletter": {"stage": "decode", "error": "bad-json: not JSON", "key_bytes": None,
                                        "value_bytes": b"{oops"}})
        else:
            value = {"op": "c", "source": {"ts_ms": BASE_MS + offset * 60_000}, "after": {"ID": offset}}
            rows.append({"kafka": kafka, "key": json.dumps({"ID": offset}), "value": json.dumps(value),
                         "deadletter": None, "marker": None})
    return pa.Table.from_pylist(rows, schema=ROW_SCHEMA)


@pytest.mark.integration
def test_topic_snapshot_against_the_broker_and_a_raw_pool(broker, tmp_path: Path) -> None:
    from engine.kafka.clients import ensure_topic, producer

    profile = KafkaProfile(broker.address)
    topic = f"observe-{uuid.uuid4().hex[:8]}"
    ensure_topic(profile, topic)
    kafka = producer(profile)
    for offset in range(6):  # Kafka timestamps = Debezium source times, one minute apart
        value = {"op": "c", "source": {"ts_ms": BASE_MS + offset * 60_000}, "after": {"ID": offset}}
        kafka.produce(topic, key=b"k", value=json.dumps(value).encode(), timestamp=BASE_MS + offset * 60_000)
    assert kafka.flush(30) == 0

    lake = Lake(tmp_path / "lake")
    pool = lake.create_pool("Raw", RAW)
    pool.append_records(_rows(topic, range(4), dead={1}), {(topic, 0): 3})
    now = [1000.0]
    observer = Observer(lake, kafka=profile, clock=lambda: now[0], probe_timeout=5.0)
    try:
        report = observer.topics()
        (row,) = [t for t in report.topics if t.topic == topic]
        assert report.errors == []
        assert (row.low, row.high, row.lake_offset, row.lag_records) == (0, 6, 3, 2)
        assert row.lag_seconds == 120.0  # newest (offset 5) minus last synced (offset 3)
        assert row.source_lag_seconds == 120.0
        assert row.dead_letters == 1
        assert row.rate is None  # one point so far

        pool.append_records(_rows(topic, range(4, 6)), {(topic, 0): 5})
        now[0] += 2.0
        (row,) = [t for t in observer.topics().topics if t.topic == topic]
        assert (row.lake_offset, row.lag_records, row.lag_seconds, row.source_lag_seconds) == (5, 0, 0.0, 0.0)
        assert row.rate == 1.0  # two records in two seconds
        assert row.history == (1.0,)

        (letter,) = observer.dead_letters("Raw")
        assert (letter.topic, letter.offset, letter.stage) == (topic, 1, "decode")
        assert letter.full_record()["value_bytes"] == "{oops"
    finally:
        observer.close()


def test_output_rows_name_their_envelope_and_the_staged_topic_they_carry(tmp_path: Path) -> None:
    """The demo's two outputs: NewInvoices (jdbc) and InvoiceChanges (debezium, carrying
    NewInvoices' staged records): both show NewInvoices' last staged offset."""
    from engine.api import load_config
    from engine.etl.cursors import out_app

    config = load_config(Path(__file__).resolve().parents[2] / "demo" / "invoices" / "etl.yaml")
    lake = Lake(tmp_path / "lake")
    lake.create_pool("Raw", RAW)
    staging = lake.create_pool("Staging", "staging")
    staging.commit_rows(
        ROW_SCHEMA.empty_table(),
        expect_version=staging.version,
        app_transactions={out_app(config.name, "NewInvoices"): 3},
    )
    observer = Observer(lake, etls=[config], kafka_error="not configured", probe_timeout=1.0)
    try:
        outputs = {t.topic: t for t in observer.topics().topics if t.direction == "out"}
    finally:
        observer.close()
    assert {(t.envelope, t.staged, t.lake_offset) for t in outputs.values()} == {
        ("jdbc", "NewInvoices", 2),
        ("debezium", "NewInvoices", 2),
    }
    assert outputs["InvoiceChanges"].envelope == "debezium"
