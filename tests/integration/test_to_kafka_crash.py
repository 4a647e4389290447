"""Exactly once across kill -9, in every envelope: staging holds outputs on several
topics, one `zync to-kafka CONFIG --continuous` delivers all of them (each output in its
envelope) and is killed with SIGKILL at random moments while more outputs are staged;
then each topic holds every output exactly once, in order (per key on a partitioned
topic), as its readers see it.

A run makes at least ten kills: half the rounds kill right after a transaction went
through (between the Kafka commit, which holds the records, the committed position and
the claim, and whatever comes next: the next transaction being built or produced), the
others at a random moment (starting, reading back, producing, committing). Here: jdbc
(20,000 outputs on three partitions) and differential (20,000 on three), in JSON;
test_to_kafka_crash_cdc.py: debezium and materialize (20,000 on three partitions each)
and jdbc on one partition, in Avro, so that two test workers share the runs. Outputs
other than jdbc's delete keys now and then (tombstones), and are checked as their
readers see them: the events applied in order (debezium), the diffs summed up to the
last closed time (differential, materialize) give staging's latest image per key, and
no position is delivered twice.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.lake.pool_record import record_rows
from tests.integration.test_debezium import payload, sink
from tests.integration.test_differential import (
    _plain,
    check_invariants,
    latest_images,
)
from tests.integration.test_differential import (
    rebuild as rebuild_differential,
)
from tests.integration.test_materialize import check_protocol, staged_table
from tests.integration.test_materialize import rebuild as rebuild_materialize
from tests.integration.test_to_kafka import (
    Received,
    invoice,
    invoice_types,
    numbered,
    profiles,
    read_topic,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=100)]

ROOT = Path(__file__).resolve().parents[2]
#: records per transaction: a catch-up makes transactions of more than 1,000 messages per
#: partition (only jdbc anchors carry headers), a live commit smaller ones (all do)
BATCH = 4500
#: kills per run, at least; and kills right after a transaction of each output, at least
KILLS = 10
INTERRUPTED = 4


def with_deletes(offset: int) -> tuple[Any, Any]:
    """``invoice(offset)``, but every 11th output deletes its key (a tombstone)."""
    key, value = invoice(offset)
    return (key, None) if offset % 11 == 5 else (key, value)


@dataclass(frozen=True)
class Output:
    """One output of a run: its envelope, partitions and outputs in total, of which
    ``initial`` are staged before the first round and the rest ``step`` at a time while
    the rounds go on."""

    envelope: str
    partitions: int
    total: int
    initial: int
    step: int

    @property
    def record(self) -> Callable[[int], tuple[Any, Any]]:
        return invoice if self.envelope == "jdbc" else with_deletes


RUNS: dict[str, tuple[str, dict[str, Output]]] = {
    "jdbc+differential": (
        "json",
        {
            "jdbc": Output("jdbc", 3, 20_000, 6_000, 220),
            "differential": Output("differential", 3, 20_000, 6_000, 220),
        },
    ),
    "debezium+materialize": (
        "avro",
        {
            "debezium": Output("debezium", 3, 20_000, 6_000, 220),
            "materialize": Output("materialize", 3, 20_000, 6_000, 220),
            "jdbc1": Output("jdbc", 1, 6_000, 1_800, 66),
        },
    ),
}


def test_kill_9_at_random_moments_loses_and_repeats_nothing(lake, broker, registry, tmp_path) -> None:
    kill_9_at_random_moments(lake, broker, registry, tmp_path, "jdbc+differential")


class Stager:
    """Stages the outputs of several topics, one Delta commit for all of them per step
    (offsets counted here: no scan of the pool per commit)."""

    def __init__(self, pool: Any, topics: dict[str, str], outputs: dict[str, Output]) -> None:
        self.pool = pool
        self.topics = topics
        self.outputs = outputs
        self.staged = dict.fromkeys(outputs, 0)

    def stage(self, counts: dict[str, int]) -> None:
        kafka, keys, values = [], [], []
        for name, count in counts.items():
            output, first = self.outputs[name], self.staged[name]
            for offset in range(first, first + count):
                key, value = output.record(offset)
                kafka.append(
                    {"topic": self.topics[name], "partition": 0, "offset": offset, "timestamp": None}
                )
                keys.append(json.dumps(key, separators=(",", ":")))
                values.append(None if value is None else json.dumps(value, separators=(",", ":")))
            self.staged[name] += count
        rows = record_rows(kafka, keys, values)
        self.pool.refresh()
        self.pool.commit_rows(rows, expect_version=self.pool.version)

    def left(self) -> dict[str, int]:
        return {n: o.total - self.staged[n] for n, o in self.outputs.items()}


def _config(path: Path, topics: dict[str, str], outputs: dict[str, Output]) -> Path:
    """An ETL configuration whose outputs are the run's topics, each in its envelope
    (its rules are never run: to-kafka reads only the outputs)."""
    lines = ["name: crash", "inputs: [{topic: In, pool: Raw}]", "outputs:"]
    for name, output in outputs.items():
        lines.append(f"  - {{topic: {topics[name]}, pool: Staging, envelope: {output.envelope}}}")
    lines.append("transforms:")
    for name in outputs:
        lines.append(
            f"  - {{type: stateless, in: In, out: {topics[name]}, "
            "sql: 'SELECT in.key AS key, in.value AS value'}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _argv(config: Path, fmt: str, lake: Any, broker: Any, registry: Any) -> list[str]:
    return [
        sys.executable, "-m", "zync_tui.commands.deliver", "to-kafka", str(config),
        "--lake", str(lake.root), "--format", fmt, "--batch", str(BATCH),
        "-b", broker.address, "-r", registry.url,
    ]  # fmt: skip


def _delivered(log: Path, topics: dict[str, str]) -> dict[str, int]:
    """How many transactions of each output the log tells of."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return {name: text.count(f"{topic}: delivered pool offsets") for name, topic in topics.items()}


def kill_9_at_random_moments(
    lake: Any, broker: Any, registry: Any, tmp_path: Path, run: str
) -> None:
    """One run of :data:`RUNS` and its checks."""
    from engine.kafka.clients import ensure_topic

    fmt, outputs = RUNS[run]
    kafka, reg = profiles(broker, registry)
    rng = random.Random(os.environ.get("ZYNC_CRASH_SEED", "6"))
    pool = staging_pool(lake)
    topics = {name: unique(f"Crash-{name}") for name in outputs}
    for name, output in outputs.items():
        ensure_topic(kafka, topics[name], partitions=output.partitions)
        pool.record_types({topics[name]: invoice_types()})
    stager = Stager(pool, topics, outputs)
    stager.stage({name: o.initial for name, o in outputs.items()})
    config = _config(tmp_path / "crash.yaml", topics, outputs)
    argv = _argv(config, fmt, lake, broker, registry)

    # the rest is staged while the deliveries run and get killed
    stager_done = threading.Event()
    stager_errors: list[BaseException] = []

    def stage_the_rest() -> None:
        try:
            own = Stager(lake.open_pool("Staging"), topics, outputs)
            own.staged = dict(stager.staged)
            while any(own.left().values()):
                own.stage({n: min(outputs[n].step, left) for n, left in own.left().items()})
                time.sleep(0.3)
        except BaseException as exc:  # noqa: BLE001 - reported below
            stager_errors.append(exc)
        finally:
            stager_done.set()

    log = tmp_path / "to-kafka.log"
    interrupted = dict.fromkeys(outputs, 0)
    thread = threading.Thread(target=stage_the_rest, daemon=True)
    thread.start()
    kills = 0
    started = time.monotonic()
    names = sorted(outputs)
    while (
        kills < KILLS
        or not stager_done.is_set()
        or min(interrupted.values()) < INTERRUPTED
    ):
        before = _delivered(log, topics)
        proc = subprocess.Popen(
            [*argv, "--continuous"],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        # half the rounds kill just after a transaction of one output went through (the
        # outputs in turn; the next transaction is likely in flight), the others at a
        # random moment of the run; once everything is staged, every round is random
        # (a caught-up delivery waits for nothing)
        after_commit = kills % 2 == 0 and not stager_done.is_set()
        target = names[(kills // 2) % len(names)]
        deadline = time.monotonic() + (30.0 if after_commit else rng.uniform(0.5, 5.0))
        while time.monotonic() < deadline and proc.poll() is None:
            if after_commit and _delivered(log, topics)[target] > before[target]:
                time.sleep(rng.uniform(0.0, 0.05))
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, log.read_text(errors="replace")[-3000:]
        kills += 1
        now = _delivered(log, topics)
        for name in outputs:
            interrupted[name] += now[name] > before[name]
        assert time.monotonic() - started < 300, "the kill rounds take too long"
    thread.join()
    assert not stager_errors, stager_errors
    print(f"{run}: {kills} kills, after a transaction of each output {interrupted}")

    # a last run to the end, without interruption
    final = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stdout + final.stderr
    assert kills >= KILLS
    assert all(n >= INTERRUPTED for n in interrupted.values()), interrupted
    for name, output in outputs.items():
        got = read_topic(kafka, topics[name], registry=reg, fmt=fmt, timeout=120)
        CHECKS[output.envelope](got, pool, topics[name], output, name)


# ----------------------------------------------------------------------------- checks
# (got: every message of the topic, pool: staging, the output, its name)


def _check_jdbc(got: list[Received], pool: Any, topic: str, output: Output, name: str) -> None:
    total = output.total
    offsets = [r.pool_offset for r in got]
    assert len(offsets) == total, f"{name}: {len(offsets)} records for {total} outputs"
    assert sorted(offsets) == list(range(total)), f"{name}: lost or repeated outputs"
    if output.partitions == 1:
        assert offsets == list(range(total)), f"{name}: out of order"
        assert numbered(got) == offsets, f"{name}: anchors disagree with the records"
    by_key: dict[int, list[int]] = {}
    partition_of: dict[int, int] = {}
    for r in got:
        assert (r.key, r.value) == invoice(r.pool_offset)
        key = r.key["ID"]
        assert partition_of.setdefault(key, r.partition) == r.partition
        by_key.setdefault(key, []).append(r.pool_offset)
    for key, seen in by_key.items():
        assert seen == sorted(seen), f"{name}: key {key} out of order"


def _check_debezium(
    got: list[Received], pool: Any, topic: str, output: Output, name: str
) -> None:
    """One event per output, a tombstone after each delete, in order per key, with the
    `before` image staging had; applied in order they give staging's latest images."""
    total = output.total
    images: dict[int, Any] = {}
    expected = []
    for offset in range(total):
        key, value = with_deletes(offset)
        before = images.get(key["ID"])
        op = "d" if value is None else ("u" if before is not None else "c")
        expected.append((op, before, value))
        if value is None:
            images.pop(key["ID"], None)
        else:
            images[key["ID"]] = value
    events = [payload(r) for r in got if payload(r) is not None]
    offsets = [e["source"]["offset"] for e in events]
    assert sorted(offsets) == list(range(total)), f"{name}: lost or repeated events"
    made = [(e["op"], _plain(e["before"]), _plain(e["after"])) for e in events]
    assert made == [expected[o] for o in offsets], f"{name}: wrong events"
    tombstones = sum(1 for r in got if payload(r) is None)
    assert tombstones == sum(1 for op, _, _ in expected if op == "d"), f"{name}: tombstones"
    by_key: dict[int, list[int]] = {}
    for r in got:
        event = payload(r)
        if event is not None:
            by_key.setdefault(r.key["ID"], []).append(event["source"]["offset"])
    for key, seen in by_key.items():
        assert seen == sorted(seen), f"{name}: key {key} out of order"
    if output.partitions == 1:
        assert offsets == list(range(total)), f"{name}: out of order"
    assert sink(got) == latest_images(pool, topic)


def _check_differential(
    got: list[Received], pool: Any, topic: str, output: Output, name: str
) -> None:
    check_invariants(got)  # positions once each and growing, counts, no late update
    assert rebuild_differential(got, output.partitions) == latest_images(pool, topic), name


def _check_materialize(
    got: list[Received], pool: Any, topic: str, output: Output, name: str
) -> None:
    check_protocol(got)  # positions once each and growing, statements tile and count
    assert rebuild_materialize(got, output.partitions) == staged_table(pool, topic), name


CHECKS = {
    "jdbc": _check_jdbc,
    "debezium": _check_debezium,
    "differential": _check_differential,
    "materialize": _check_materialize,
}
