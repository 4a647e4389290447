"""kill -9 from-kafka at random moments while records arrive: nothing lost, nothing twice.

50,000 records are produced across 3 partitions of 2 topics (one Avro through the
registry, one JSON) while a `zync from-kafka` subprocess is killed with SIGKILL at random
moments at least 10 times and restarted. At the end the pool must hold every (topic,
partition, offset) exactly once with the produced payload (hashes compared), and seqnos
must be unique, contiguous and increasing in commit order (read from the Delta log).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from engine.kafka import clients
from engine.kafka.codecs import avro
from engine.kafka.registry_client import RegistrySchemas
from engine.settings.kafka import KafkaProfile
from engine.settings.registry import RegistryProfile
from tests.crash import kill_at_random_moments, sha
from tests.fixtures import debezium as dbz

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 50_000
PARTITIONS = 3
MIN_KILLS = 10


def test_kill_9_at_random_moments_loses_and_duplicates_nothing(broker, registry, tmp_path: Path) -> None:
    rnd = random.Random(int(os.environ.get("ZYNC_CRASH_SEED", "20240601")))
    kafka = KafkaProfile(bootstrap_servers=broker.address)
    suffix = uuid.uuid4().hex[:6]
    avro_topic, json_topic = f"crash-avro-{suffix}", f"crash-json-{suffix}"
    for topic in (avro_topic, json_topic):
        clients.ensure_topic(kafka, topic, partitions=PARTITIONS)
    schemas = RegistrySchemas(RegistryProfile(url=registry.url))
    value_id = schemas.register(f"{avro_topic}-value", dbz.AVRO_VALUE_SCHEMA)
    value_schema = avro.AvroSchema(dbz.AVRO_VALUE_SCHEMA)

    # what was produced, by (topic, partition, offset): the payload's hash
    expected: dict[tuple[str, int, int], str | None] = {}
    events = dbz.events(200)

    def produce() -> None:
        producer = clients.producer(kafka)
        next_offset = {(t, p): 0 for t in (avro_topic, json_topic) for p in range(PARTITIONS)}
        for i in range(TOTAL):
            topic = avro_topic if i % 2 == 0 else json_topic
            partition = (i // 2) % PARTITIONS
            if topic == avro_topic:
                value = avro.encode(value_id, value_schema.parsed, events[i % len(events)])
                text = value_schema.decode_json(value[5:])
            else:
                text = json.dumps({"i": i, "pad": "x" * (i % 50)}, separators=(",", ":"))
                value = text.encode()
            expected[(topic, partition, next_offset[(topic, partition)])] = sha(text)
            next_offset[(topic, partition)] += 1
            producer.produce(topic, key=str(i).encode(), value=value, partition=partition)
            if i % 1000 == 999:
                producer.flush(30)
                time.sleep(0.25)  # ~20 s of arrivals
        assert producer.flush(60) == 0

    lake = tmp_path / "lake"
    env = dict(
        os.environ,
        ZYNC_HOME=str(tmp_path / "home"),
        ZYNC_LAKE=str(lake),
        ZYNC_KAFKA_BOOTSTRAP_SERVERS=broker.address,
        ZYNC_REGISTRY_URL=registry.url,
    )
    cmd = [sys.executable, "-m", "zync_tui.commands.ingest", "from-kafka",
           "-t", avro_topic, "-t", json_topic, "-p", "raw", "--create-pool",
           "--max-records", "1500", "--interval", "200ms", "--quiet"]

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    def version() -> int:
        return DeltaTable(str(lake / "raw")).version() if DeltaTable.is_deltatable(str(lake / "raw")) else -1

    kills, busy_kills = kill_at_random_moments(
        cmd, cwd=ROOT, env=env, producer=producer, version=version, rnd=rnd,
        min_kills=MIN_KILLS, random_wait=(0.3, 4.0), after_commit_wait=1.0, limit=150,
    )
    producer.join()
    assert busy_kills >= MIN_KILLS // 2, f"only {busy_kills} of {kills} kills hit a working process"

    # the last run catches up and exits when idle
    final = subprocess.run([*cmd, "--exit-after", "3s"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr

    path = str(lake / "raw")
    table = DeltaTable(path)
    rows = table.to_pyarrow_table().to_pylist()
    got: dict[tuple[str, int, int], str | None] = {}
    for row in rows:
        k = row["kafka"]
        where = (k["topic"], k["partition"], k["offset"])
        assert where not in got, f"{where} is in the pool twice"
        assert row["deadletter"] is None
        got[where] = sha(row["value"])
    assert len(got) == TOTAL
    assert got.keys() == expected.keys()
    wrong = [w for w in expected if got[w] != expected[w]]
    assert not wrong, f"{len(wrong)} payloads differ, e.g. {wrong[:3]}"

    # seqnos: unique, contiguous, and increasing in commit order
    seqnos = sorted(row["seqno"] for row in rows)
    assert seqnos == list(range(TOTAL))
    last_max = -1
    commits = 0
    for entry in sorted((Path(path) / "_delta_log").glob("*.json")):
        adds = [json.loads(line)["add"] for line in entry.read_text().splitlines() if '"add"' in line]
        adds = [a for a in adds if a]
        if not adds:
            continue
        values = [s for a in adds for s in pq.read_table(Path(path) / a["path"], columns=["seqno"]).column(0).to_pylist()]
        if not values:
            continue
        assert min(values) > last_max, f"{entry.name}: seqnos go back ({min(values)} <= {last_max})"
        last_max = max(values)
        commits += 1
    # within each partition, seqno order is offset order
    by_seqno = sorted(rows, key=lambda r: r["seqno"])
    for topic in (avro_topic, json_topic):
        for p in range(PARTITIONS):
            offsets = [r["kafka"]["offset"] for r in by_seqno if r["kafka"]["topic"] == topic and r["kafka"]["partition"] == p]
            assert offsets == sorted(offsets)
            assert table.transaction_version(f"zync.in/{topic}/{p}") == offsets[-1]
    assert commits > kills  # the runs committed between the kills
