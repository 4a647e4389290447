"""Ingest across workers: `zync from-kafka --workers-group G` (issue 8, item 3).

Two from-kafka processes share a 4-partition topic through a Kafka consumer group.
While records are still being produced, one of them is killed with SIGKILL; the
survivor must take over its partitions — seeking to the positions the pool's Delta log
holds, not to Kafka's group offsets — and the pool must end up with every record
exactly once.

Who committed what is read from the pool's Delta log: every from-kafka commit carries
``zync.pid`` (``host:pid``) in its commit info and a ``zync.in/<topic>/<partition>``
txn action per partition it advanced.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4
BURSTS = 40
BURST = 500  # records per burst: 20,000 in all (more when a worker joins late, see below)
TIMEOUT = 240.0


def _needs_workers_group() -> None:
    from engine.ingest.options import IngestOptions

    if "workers_group" not in {f.name for f in dataclasses.fields(IngestOptions)}:
        pytest.skip("from-kafka has no workers group yet (IngestOptions.workers_group)")


def _commits(pool_dir: Path, topic: str) -> list[tuple[str, dict[int, int]]]:
    """Per Delta commit, in order: its writer (``zync.pid``) and the partitions whose
    position it set."""
    found = []
    prefix = f"zync.in/{topic}/"
    for commit in sorted((pool_dir / "_delta_log").glob("*.json")):
        writer, moved = "", {}
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "commitInfo" in action:
                writer = str(action["commitInfo"].get("zync.pid", ""))
            elif "txn" in action and action["txn"]["appId"].startswith(prefix):
                moved[int(action["txn"]["appId"][len(prefix) :])] = action["txn"]["version"]
        if moved:
            found.append((writer, moved))
    return found


def _by(commits: list[tuple[str, dict[int, int]]], pid: int) -> list[dict[int, int]]:
    return [moved for writer, moved in commits if writer.endswith(f":{pid}")]


def _wait(condition: Any, timeout: float, what: str, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for proc in procs:
            if proc.poll() not in (None, -signal.SIGKILL):
                out, _ = proc.communicate(timeout=5)
                pytest.fail(
                    f"a worker exited with {proc.returncode} while waiting for {what}: {out[-2000:]}"
                )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def test_two_workers_share_a_topic_and_the_survivor_takes_over(broker, tmp_path: Path) -> None:
    _needs_workers_group()
    from deltalake import DeltaTable

    from engine.kafka.clients import ensure_topic, producer
    from engine.lake.pools import Lake
    from engine.settings.kafka import load_kafka_profile

    profile = load_kafka_profile({"bootstrap_servers": broker.address})
    topic = f"wg-{uuid.uuid4().hex[:8]}"
    group = f"wg-{uuid.uuid4().hex[:8]}"
    ensure_topic(profile, topic, partitions=PARTITIONS)
    lake = Lake(tmp_path / "lake")
    lake.create_pool("Raw", "raw")
    pool_dir = lake.pool_path("Raw")

    delivered: list[tuple[int, int]] = []
    errors: list[str] = []
    both_committed = threading.Event()
    half_done = threading.Event()
    resume = threading.Event()
    bursts = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((msg.partition(), msg.offset()))

    def send(prod: Any, burst: int) -> None:
        for n in range(BURST):
            i = burst * BURST + n
            prod.produce(
                topic,
                key=str(i).encode(),
                value=json.dumps({"i": i}).encode(),
                partition=i % PARTITIONS,
                on_delivery=on_delivery,
            )
        prod.poll(0)

    def produce() -> None:
        prod = producer(profile)
        burst = 0
        # the first half, and on (slowly) until both workers have committed: a worker
        # that joins the group after the other one has read everything gets partitions
        # with nothing left to read, and would never commit
        deadline = time.monotonic() + TIMEOUT
        while burst < BURSTS // 2 or (not both_committed.is_set() and time.monotonic() < deadline):
            send(prod, burst)
            burst += 1
            time.sleep(0.05 if burst < BURSTS // 2 else 0.5)
        prod.flush(30)
        half_done.set()
        resume.wait(TIMEOUT)  # the kill happens while the rest is still to come
        for _ in range(BURSTS - BURSTS // 2):
            send(prod, burst)
            burst += 1
            time.sleep(0.05)
        prod.flush(30)
        bursts[0] = burst

    env = {
        **os.environ,
        "ZYNC_HOME": str(tmp_path / "home"),
        "ZYNC_KAFKA_BOOTSTRAP_SERVERS": broker.address,
    }
    argv = [
        sys.executable, "-m", "zync_tui.commands.ingest", "from-kafka",
        "--topic", topic, "--pool", "Raw", "--lake", str(lake.root),
        "--workers-group", group, "--max-records", "500", "--interval", "200ms",
        "--format", "json", "--quiet", "--no-progress",
    ]  # fmt: skip
    workers = [
        subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    try:
        # both workers hold partitions (the group has rebalanced) and have committed
        _wait(
            lambda: all(_by(_commits(pool_dir, topic), w.pid) for w in workers),
            TIMEOUT, "both workers to commit", workers,
        )  # fmt: skip
        both_committed.set()
        assert half_done.wait(TIMEOUT), "the producer is stuck"
        victim, survivor = workers
        commits = _commits(pool_dir, topic)
        victims = {p for moved in _by(commits, victim.pid) for p in moved}
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        held_at_kill = {
            p: DeltaTable(str(pool_dir)).transaction_version(f"zync.in/{topic}/{p}")
            for p in victims
        }
        resume.set()
        producing.join(TIMEOUT)
        assert not errors, errors
        total = bursts[0] * BURST
        assert total >= BURSTS * BURST
        assert len(delivered) == total
        last = {p: max(o for q, o in delivered if q == p) for p in range(PARTITIONS)}

        def caught_up() -> bool:
            table = DeltaTable(str(pool_dir))
            return all(
                table.transaction_version(f"zync.in/{topic}/{p}") == last[p]
                for p in range(PARTITIONS)
            )

        _wait(caught_up, TIMEOUT, "the survivor to ingest every record", [survivor])
        assert survivor.poll() is None, "the survivor stopped"

        # the survivor took the victim's partitions over, from where the pool held them
        after = _by(_commits(pool_dir, topic), survivor.pid)
        for p in victims:
            assert any(p in moved and moved[p] > (held_at_kill[p] or -1) for moved in after), (
                f"partition {p} of the killed worker was not taken over"
            )

        # every record exactly once
        rows = DeltaTable(str(pool_dir)).to_pyarrow_table(columns=["kafka", "value", "deadletter"])
        assert rows.column("deadletter").null_count == rows.num_rows
        kafka = rows.column("kafka").to_pylist()
        assert all(k["topic"] == topic for k in kafka)
        seen = Counter((k["partition"], k["offset"]) for k in kafka)
        assert [tp for tp, n in seen.items() if n > 1] == []
        assert set(seen) == set(delivered)
        values = sorted(json.loads(v)["i"] for v in rows.column("value").to_pylist())
        assert values == list(range(total))
    finally:
        resume.set()
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
                    worker.wait(10)
            with contextlib.suppress(Exception):
                worker.communicate(timeout=5)
