"""Exactly once across kill -9: staging holds 50,000 outputs on two topics (one with one
partition, one with three), `zync to-kafka --continuous` is killed with SIGKILL at random
moments, at least ten times per topic, while more outputs are staged; then each topic
holds every output exactly once, in order (per key on the partitioned topic)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.test_to_kafka import (
    invoice,
    invoice_types,
    numbered,
    profiles,
    read_topic,
    stage_many,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KILLS = 12
#: topic -> (total outputs, partitions, format, outputs staged before the first run)
PLAN = {"A": (20_000, 1, "avro", 6_000), "B": (30_000, 3, "json", 9_000)}
#: the rest is staged while the deliveries run (and get killed), in commits this big
STEP = {"A": 350, "B": 525}
#: records per transaction: catch-ups make transactions of more than 1,000 messages per
#: partition (only anchors carry headers), live commits smaller ones (all do)
BATCH = {"A": 1500, "B": 4500}


def _spawn(
    name: str,
    topic: str,
    partitions: int,
    fmt: str,
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


def test_kill_9_at_random_moments_loses_and_repeats_nothing(
    lake, broker, registry, tmp_path
) -> None:
    kafka, reg = profiles(broker, registry)
    rng = random.Random(os.environ.get("ZYNC_CRASH_SEED", "6"))
    pool = staging_pool(lake)
    topics = {name: unique(f"Crash{name}") for name in PLAN}
    for name, (_, _, _, initial) in PLAN.items():
        stage_many(pool, topics[name], initial, per_commit=initial // 4, types=invoice_types())

    # the rest is staged while the deliveries run and get killed
    stager_done = threading.Event()
    stager_errors: list[BaseException] = []

    def stager() -> None:
        try:
            own = lake.open_pool("Staging")
            left = {name: total - initial for name, (total, _, _, initial) in PLAN.items()}
            while any(left.values()):
                for name in PLAN:
                    n = min(STEP[name], left[name])
                    if n:
                        stage_many(own, topics[name], n, per_commit=n, types=invoice_types())
                        left[name] -= n
                time.sleep(0.4)
        except BaseException as exc:  # noqa: BLE001 - reported below
            stager_errors.append(exc)
        finally:
            stager_done.set()

    logs = {name: tmp_path / f"{name}.log" for name in PLAN}
    interrupted = dict.fromkeys(PLAN, 0)
    thread = threading.Thread(target=stager, daemon=True)
    thread.start()
    round_ = 0
    while round_ < KILLS or not stager_done.is_set():
        procs = {}
        for name, (_, partitions, fmt, _) in PLAN.items():
            before = _delivered_lines(logs[name]) if logs[name].exists() else 0
            procs[name] = (
                _spawn(
                    name,
                    topics[name],
                    partitions,
                    fmt,
                    lake.root,
                    broker.address,
                    registry.url,
                    logs[name],
                ),
                before,
            )
        # half the rounds kill just after a transaction went through (the next one is
        # likely in flight), the others at a random moment of the run
        started = time.monotonic()
        pending = set(procs)
        wait_for_delivery = round_ % 2 == 0
        deadlines = {
            name: started + (15.0 if wait_for_delivery else rng.uniform(0.5, 5.0)) for name in procs
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
    for name, (_, _, fmt, _) in PLAN.items():
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

    assert all(n >= 5 for n in interrupted.values()), interrupted
    for name, (total, partitions, fmt, _) in PLAN.items():
        got = read_topic(kafka, topics[name], registry=reg, fmt=fmt, timeout=120, quiet=2.0)
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
