"""kill -9 `zync from-kafka` at random moments while records arrive, on an ``s3://`` lake
(moto's server): nothing lost, nothing twice, positions and seqnos as on a local lake.

The local version (test_from_kafka_crash.py) with fewer records: 12,000 JSON records
across 3 partitions, at least 6 kills, half of them once the run has committed.
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

import pytest
from deltalake import DeltaTable

from engine.kafka import clients
from engine.settings.kafka import KafkaProfile
from tests.crash import kill_at_random_moments, sha

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.s3]

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 12_000
PARTITIONS = 3
MIN_KILLS = 6


def test_kill_9_on_an_s3_lake_loses_and_duplicates_nothing(broker, registry, moto, s3_url: str, tmp_path: Path) -> None:
    rnd = random.Random(int(os.environ.get("ZYNC_CRASH_SEED", "20261124")))
    kafka = KafkaProfile(bootstrap_servers=broker.address)
    topic = f"s3-crash-{uuid.uuid4().hex[:6]}"
    clients.ensure_topic(kafka, topic, partitions=PARTITIONS)
    expected: dict[tuple[str, int, int], str | None] = {}

    def produce() -> None:
        producer = clients.producer(kafka)
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        for i in range(TOTAL):
            partition = i % PARTITIONS
            text = json.dumps({"i": i, "pad": "x" * (i % 50)}, separators=(",", ":"))
            expected[(topic, partition, next_offset[partition])] = sha(text)
            next_offset[partition] += 1
            producer.produce(topic, key=str(i).encode(), value=text.encode(), partition=partition)
            if i % 500 == 499:
                producer.flush(30)
                time.sleep(0.25)  # ~6 s of arrivals
        assert producer.flush(60) == 0

    pool_url = f"{s3_url}/raw"
    options = moto.env()
    env = dict(
        os.environ,
        **options,
        ZYNC_HOME=str(tmp_path / "home"),
        ZYNC_LAKE=s3_url,
        ZYNC_KAFKA_BOOTSTRAP_SERVERS=broker.address,
        ZYNC_REGISTRY_URL=registry.url,
    )
    cmd = [sys.executable, "-m", "zync_tui.commands.ingest", "from-kafka", "-t", topic,
           "-p", "raw", "--create-pool", "--max-records", "500", "--interval", "200ms", "--quiet"]

    def version() -> int:
        try:
            return DeltaTable(pool_url, storage_options=options).version()
        except Exception:  # noqa: BLE001 - no table yet
            return -1

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    kills, busy_kills = kill_at_random_moments(
        cmd, cwd=ROOT, env=env, producer=producer, version=version, rnd=rnd,
        min_kills=MIN_KILLS, random_wait=(0.3, 3.0), after_commit_wait=0.8, limit=240,
    )
    producer.join()
    assert busy_kills >= MIN_KILLS // 2, f"only {busy_kills} of {kills} kills hit a working process"

    final = subprocess.run([*cmd, "--exit-after", "3s"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stderr

    table = DeltaTable(pool_url, storage_options=options)
    rows = table.to_pyarrow_table().to_pylist()
    got: dict[tuple[str, int, int], str | None] = {}
    for row in rows:
        k = row["kafka"]
        where = (k["topic"], k["partition"], k["offset"])
        assert where not in got, f"{where} is in the pool twice"
        got[where] = sha(row["value"])
    assert got.keys() == expected.keys()
    assert all(got[w] == expected[w] for w in expected)
    assert sorted(row["seqno"] for row in rows) == list(range(TOTAL))
    by_seqno = sorted(rows, key=lambda r: r["seqno"])
    for p in range(PARTITIONS):
        offsets = [r["kafka"]["offset"] for r in by_seqno if r["kafka"]["partition"] == p]
        assert offsets == sorted(offsets)
        assert table.transaction_version(f"zync.in/{topic}/{p}") == offsets[-1]
    assert table.version() > kills // 2  # the runs committed between the kills
