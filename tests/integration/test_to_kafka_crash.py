"""Exactly once across kill -9, in every envelope: staging holds outputs on two topics
(one with one partition, one with three), `zync to-kafka --continuous` is killed with
SIGKILL at random moments while more outputs are staged; then each topic holds every
output exactly once, in order (per key on the partitioned topic).

jdbc delivers 20,000 outputs through eight kills; the other envelopes (debezium,
differential, materialize) 5,000 through four, with deletes among the outputs, and are checked as their readers see them: the events applied in order
(debezium), the diffs summed up to the last closed time (differential, materialize)
give staging's latest image per key, and no position is delivered twice.
"""

from __future__ import annotations

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
    stage_many,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=100)]

ROOT = Path(__file__).resolve().parents[2]
#: records per transaction: catch-ups make transactions of more than 1,000 messages per
#: partition (only jdbc anchors carry headers), live commits smaller ones (all do)
BATCH = {"A": 1500, "B": 4500}


def with_deletes(offset: int) -> tuple[Any, Any]:
    """``invoice(offset)``, but every 11th output deletes its key (a tombstone)."""
    key, value = invoice(offset)
    return (key, None) if offset % 11 == 5 else (key, value)


@dataclass(frozen=True)
class Case:
    """One envelope's run: topic -> (total outputs, partitions, format, outputs staged
    before the first run); the rest is staged while the deliveries run (and get
    killed), in commits of ``step``."""

    plan: dict[str, tuple[int, int, str, int]]
    step: dict[str, int]
    kills: int
    interrupted: int  # kills after a delivery, at least, per topic
    record: Callable[[int], tuple[Any, Any]] = with_deletes


CASES = {
    "jdbc": Case(
        {"A": (8_000, 1, "avro", 2_400), "B": (12_000, 3, "json", 3_600)},
        {"A": 224, "B": 336},
        kills=8,
        interrupted=4,
        record=invoice,
    ),
    "debezium": Case(
        {"A": (2_000, 1, "avro", 600), "B": (3_000, 3, "json", 900)},
        {"A": 80, "B": 120},
        kills=4,
        interrupted=2,
    ),
    "differential": Case(
        {"A": (2_000, 1, "avro", 600), "B": (3_000, 3, "json", 900)},
        {"A": 80, "B": 120},
        kills=4,
        interrupted=2,
    ),
    "materialize": Case(
        {"A": (2_000, 1, "avro", 600), "B": (3_000, 3, "avro", 900)},
        {"A": 80, "B": 120},
        kills=4,
        interrupted=2,
    ),
}


def _spawn(
    name: str,
    topic: str,
    partitions: int,
    fmt: str,
    envelope: str,
    lake: Path,
    broker: str,
    registry: str,
    log: Path,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zync_tui.commands.deliver",
            "to-kafka",
            "-t",
            topic,
            "-p",
            "Staging",
            "--lake",
            str(lake),
            "--format",
            fmt,
            "--envelope",
            envelope,
            "--partitions",
            str(partitions),
            "--batch",
            str(BATCH[name]),
            "--continuous",
            "-b",
            broker,
            "-r",
            registry,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def _delivered_lines(log: Path) -> int:
    return log.read_text(errors="replace").count(": delivered pool offsets")


@pytest.mark.parametrize("envelope", ["jdbc", "differential"])
def test_kill_9_at_random_moments_loses_and_repeats_nothing(
    lake, broker, registry, tmp_path, envelope
) -> None:
    kill_9_at_random_moments(lake, broker, registry, tmp_path, envelope)


def kill_9_at_random_moments(
    lake: Any, broker: Any, registry: Any, tmp_path: Path, envelope: str
) -> None:
    """One envelope's crash run and its checks (debezium and materialize run from
    test_to_kafka_crash_cdc.py, so two test workers share the four)."""
    case = CASES[envelope]
    plan, record = case.plan, case.record
    kafka, reg = profiles(broker, registry)
    rng = random.Random(os.environ.get("ZYNC_CRASH_SEED", "6"))
    pool = staging_pool(lake)
    topics = {name: unique(f"Crash{name}") for name in plan}
    for name, (_, _, _, initial) in plan.items():
        stage_many(
            pool,
            topics[name],
            initial,
            per_commit=initial // 4,
            types=invoice_types(),
            record=record,
        )

    # the rest is staged while the deliveries run and get killed
    stager_done = threading.Event()
    stager_errors: list[BaseException] = []

    def stager() -> None:
        try:
            own = lake.open_pool("Staging")
            left = {name: total - initial for name, (total, _, _, initial) in plan.items()}
            while any(left.values()):
                for name in plan:
                    n = min(case.step[name], left[name])
                    if n:
                        stage_many(
                            own,
                            topics[name],
                            n,
                            per_commit=n,
                            types=invoice_types(),
                            record=record,
                        )
                        left[name] -= n
                time.sleep(0.4)
        except BaseException as exc:  # noqa: BLE001 - reported below
            stager_errors.append(exc)
        finally:
            stager_done.set()

    logs = {name: tmp_path / f"{name}.log" for name in plan}
    interrupted = dict.fromkeys(plan, 0)
    thread = threading.Thread(target=stager, daemon=True)
    thread.start()
    round_ = 0
    while round_ < case.kills or not stager_done.is_set():
        procs = {}
        for name, (_, partitions, fmt, _) in plan.items():
            before = _delivered_lines(logs[name]) if logs[name].exists() else 0
            procs[name] = (
                _spawn(
                    name,
                    topics[name],
                    partitions,
                    fmt,
                    envelope,
                    lake.root,
                    broker.address,
                    registry.url,
                    logs[name],
                ),
                before,
            )
        # half the rounds kill just after a transaction went through (the next one is
        # likely in flight), the others at a random moment of the run; once everything is
        # staged, every round is random (a caught-up delivery has nothing left to wait for)
        started = time.monotonic()
        pending = set(procs)
        wait_for_delivery = round_ % 2 == 0 and not stager_done.is_set()
        deadlines = {
            name: started + (30.0 if wait_for_delivery else rng.uniform(0.5, 5.0)) for name in procs
        }
        while pending:
            now = time.monotonic()
            for name in sorted(pending):
                proc, before = procs[name]
                after_delivery = wait_for_delivery and _delivered_lines(logs[name]) > before
                if now >= deadlines[name] or after_delivery or proc.poll() is not None:
                    if after_delivery:
                        time.sleep(rng.uniform(0.0, 0.05))
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(30)
                    assert proc.returncode == -signal.SIGKILL, logs[name].read_text()
                    if _delivered_lines(logs[name]) > before:
                        interrupted[name] += 1
                    pending.discard(name)
            time.sleep(0.01)
        round_ += 1
    thread.join()
    assert not stager_errors, stager_errors

    # a last run to the end, without interruption
    for name, (_, _, fmt, _) in plan.items():
        log = logs[name]
        final = subprocess.run(
            [
                sys.executable,
                "-m",
                "zync_tui.commands.deliver",
                "to-kafka",
                "-t",
                topics[name],
                "-p",
                "Staging",
                "--lake",
                str(lake.root),
                "--format",
                fmt,
                "--envelope",
                envelope,
                "-b",
                broker.address,
                "-r",
                registry.url,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert final.returncode == 0, final.stdout + final.stderr
        log.write_text(log.read_text(errors="replace") + final.stdout)

    assert all(n >= case.interrupted for n in interrupted.values()), interrupted
    for name, (total, partitions, fmt, _) in plan.items():
        got = read_topic(kafka, topics[name], registry=reg, fmt=fmt, timeout=120)
        if envelope != "jdbc":
            CHECKS[envelope](got, pool, topics[name], total, partitions, name)
            continue
        offsets = [r.pool_offset for r in got]
        assert len(offsets) == total, f"{name}: {len(offsets)} records for {total} outputs"
        assert sorted(offsets) == list(range(total)), f"{name}: lost or repeated outputs"
        if partitions == 1:
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


# ----------------------------------------------------------------------------- checks
# (got: every message of the topic, pool: staging, total outputs, partitions, topic label)


def _check_debezium(
    got: list[Received], pool: Any, topic: str, total: int, partitions: int, name: str
) -> None:
    """One event per output, a tombstone after each delete, in order per key, with the
    `before` image staging had; applied in order they give staging's latest images."""
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
    if partitions == 1:
        assert offsets == list(range(total)), f"{name}: out of order"
    assert sink(got) == latest_images(pool, topic)


def _check_differential(
    got: list[Received], pool: Any, topic: str, total: int, partitions: int, name: str
) -> None:
    check_invariants(got)  # positions once each and growing, counts, no late update
    assert rebuild_differential(got, partitions) == latest_images(pool, topic), name


def _check_materialize(
    got: list[Received], pool: Any, topic: str, total: int, partitions: int, name: str
) -> None:
    check_protocol(got)  # positions once each and growing, statements tile and count
    assert rebuild_materialize(got, partitions) == staged_table(pool, topic), name


CHECKS = {
    "debezium": _check_debezium,
    "differential": _check_differential,
    "materialize": _check_materialize,
}
