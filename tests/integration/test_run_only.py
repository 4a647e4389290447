"""`zync run CONFIG --only from-kafka|etl|to-kafka` (issue 8, item 4).

The three loops of the invoice scenario run as five separate processes, as they would
on separate hosts: one from-kafka, two ETL and two to-kafka for the same configuration.
A second ETL or to-kafka loop must be refused (one of the two exits with a one-line
error: the newcomer, or the older one fenced by it) or harmless (both keep running):
either way the staging pool and the output topic end with every output exactly once, in
offset order. The from-kafka and to-kafka loops (no shaper) must not
start Spark at all, so they can run on hosts without it.

Topic names get a unique suffix: the broker is shared by the whole test session.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo" / "invoices"
TIMEOUT = 420.0
OUTPUTS = 8  # the invoice scenario: 4 denormalized invoices + 4 status updates
INPUTS = 12


def _config(tmp_path: Path, suffix: str) -> tuple[Path, dict[str, str]]:
    names = {
        name: f"{name}_{suffix}"
        for name in ("Invoices", "InvoiceStatus", "NewInvoices", "InvoiceChanges")
    }
    text = (DEMO / "etl.yaml").read_text()
    for name, renamed in names.items():
        text = re.sub(rf"\b{name}\b", renamed, text)
    path = tmp_path / "etl.yaml"
    path.write_text(text)
    return path, names


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _runs_java(pid: int) -> bool:
    for child in _descendants(pid):
        with contextlib.suppress(OSError):
            if b"java" in (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")[0]:
                return True
    return False


def _topic_messages(profile: Any, topic: str) -> list[Any]:
    """Every message of partition 0 of ``topic`` (read_committed), from the start."""
    from confluent_kafka import KafkaException, TopicPartition

    from engine.kafka.clients import consumer

    client = consumer(profile)
    try:
        try:
            low, high = client.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        except KafkaException:  # not created yet
            return []
        client.assign([TopicPartition(topic, 0, low)])
        messages: list[Any] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = client.poll(0.5)
            if msg is None:
                if messages and messages[-1].offset() >= high - 1:
                    break
                if high == low:
                    break
                continue
            if msg.error() is None:
                messages.append(msg)
        return messages
    finally:
        client.close()


def _high(profile: Any, topic: str) -> int:
    from confluent_kafka import TopicPartition

    from engine.kafka.clients import consumer

    client = consumer(profile)
    try:
        return client.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        client.close()


def _cursors(lake_root: Path) -> dict[str, int]:
    """The ETL's cursors in staging's Delta log: ``topic/partition`` → offset."""
    from tests.cluster import app_transactions

    if not (lake_root / "Staging" / "_delta_log").is_dir():
        return {}
    return {
        app.split("/cursor/", 1)[1]: version
        for app, version in app_transactions(lake_root / "Staging").items()
        if "/cursor/" in app
    }


def _staging(lake_root: Path) -> tuple[list[dict], list[dict]]:
    from deltalake import DeltaTable

    path = lake_root / "Staging"
    if not (path / "_delta_log").is_dir():
        return [], []
    rows = (
        DeltaTable(str(path))
        .to_pyarrow_table(columns=["kafka", "key", "value", "marker"])
        .to_pylist()
    )
    outputs = [r for r in rows if r["marker"] is None]
    markers = [r["marker"] for r in rows if r["marker"] is not None]
    return outputs, markers


def test_loops_on_their_own_and_a_second_etl_or_to_kafka_is_harmless(
    broker, tmp_path: Path
) -> None:
    from engine.kafka.clients import ensure_topic, producer
    from engine.settings.kafka import load_kafka_profile

    suffix = uuid.uuid4().hex[:8]
    config, names = _config(tmp_path, suffix)
    profile = load_kafka_profile({"bootstrap_servers": broker.address})
    for topic in ("Invoices", "InvoiceStatus"):
        ensure_topic(profile, names[topic], partitions=1)
    lake = tmp_path / "lake"
    lake.mkdir()  # the loops create the configuration's pools in it
    env = {
        **os.environ,
        "ZYNC_HOME": str(tmp_path / "home"),
        "ZYNC_KAFKA_BOOTSTRAP_SERVERS": broker.address,
    }

    def start(only: str, *extra: str) -> subprocess.Popen:
        argv = [
            sys.executable, "-m", "zync_tui.commands.run", "run", str(config),
            "--only", only, "--lake", str(lake), "--format", "json", *extra,
        ]  # fmt: skip
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip

    bogus = subprocess.run(
        [sys.executable, "-m", "zync_tui.commands.run", "run", str(config), "--only", "everything"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bogus.returncode == 2, bogus.stderr  # a usage error naming the choices

    procs: dict[str, subprocess.Popen] = {}
    try:
        procs["from-kafka"] = start("from-kafka")
        procs["etl-1"] = start("etl", "--spark-master", "local[1]")
        procs["etl-2"] = start("etl", "--spark-master", "local[1]")
        procs["to-kafka-1"] = start("to-kafka")
        procs["to-kafka-2"] = start("to-kafka")

        prod = producer(profile)
        for n in range(1, 5):
            for line in (DEMO / f"batch{n}.jsonl").read_text().splitlines():
                event = json.loads(line)
                prod.produce(
                    names[event["topic"]],
                    key=json.dumps(event["key"]).encode(),
                    value=None if event["value"] is None else json.dumps(event["value"]).encode(),
                )
            prod.flush(30)
        assert len(prod) == 0

        out_topic = names["NewInvoices"]
        deadline = time.monotonic() + TIMEOUT
        while True:
            outputs, markers = _staging(lake)
            if (
                len(outputs) >= OUTPUTS
                and len(markers) >= INPUTS
                and len(_topic_messages(profile, out_topic)) >= OUTPUTS
            ):
                break
            for name, proc in procs.items():
                if proc.poll() not in (None, 0, 1):
                    pytest.fail(
                        f"{name} exited with {proc.returncode}: {proc.communicate()[0][-2000:]}"
                    )
            if time.monotonic() > deadline:
                pytest.fail(f"timed out: {len(outputs)} outputs, {len(markers)} markers in staging")
            time.sleep(0.5)
        # every position at its end — the ETL's cursors (in staging's Delta log) past the
        # last input offset, the topic's last message at the last staged offset — so no
        # loop has anything left to do and a duplicate could only come from a position
        # behind, which the assertions below would see
        ends = {
            f"{names[t]}/0": _high(profile, names[t]) - 1 for t in ("Invoices", "InvoiceStatus")
        }
        deadline = time.monotonic() + TIMEOUT
        while _cursors(lake) != ends:
            assert time.monotonic() < deadline, f"cursors {_cursors(lake)}, inputs end at {ends}"
            time.sleep(0.2)
        tail = _topic_messages(profile, out_topic)[-1]
        assert int(dict(tail.headers() or [])["zync.offset"]) == OUTPUTS - 1

        # a second ETL / to-kafka loop: refused in one line (either of the two may be the
        # one that gives way, e.g. a fenced transactional producer), or still running
        for pair in (("etl-1", "etl-2"), ("to-kafka-1", "to-kafka-2")):
            running = [name for name in pair if procs[name].poll() is None]
            assert running, f"both {pair} stopped"
            for name in set(pair) - set(running):
                out = procs[name].communicate(timeout=10)[0].strip().splitlines()
                assert procs[name].returncode != 0
                assert out, f"{name} was refused without a word"
                assert "error" in out[-1].lower(), out
        # loops placed apart: from-kafka and to-kafka run without Spark
        to_kafka = next(n for n in ("to-kafka-1", "to-kafka-2") if procs[n].poll() is None)
        for name in ("from-kafka", to_kafka):
            assert procs[name].poll() is None, f"{name} stopped"
            assert not _runs_java(procs[name].pid), f"{name} started a JVM"

        # staging: every output once, contiguous offsets; every input record marked once
        outputs, markers = _staging(lake)
        assert sorted(r["kafka"]["offset"] for r in outputs) == list(range(OUTPUTS))
        assert {r["kafka"]["topic"] for r in outputs} == {out_topic}
        done = Counter((m["etl"], m["topic"], m["partition"], m["offset"]) for m in markers)
        assert len(done) == INPUTS
        assert max(done.values()) == 1
        # the topic: every staging output once, in pool-offset order
        messages = _topic_messages(profile, out_topic)
        assert len(messages) == OUTPUTS
        by_offset = {r["kafka"]["offset"]: r for r in outputs}
        for position, msg in enumerate(messages):
            headers = dict(msg.headers() or [])
            assert int(headers["zync.offset"]) == position
            assert json.loads(msg.value()) == json.loads(by_offset[position]["value"])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            with contextlib.suppress(Exception):
                proc.communicate(timeout=5)
