"""Broker and registry faults on the real processes (issue 13, part 5).

The module starts its own Apache Kafka broker and Schema Registry (these tests pause,
kill and restart them), each on a fixed port and data directory so it comes back where
it was: the broker on the same log dirs, the registry on the same SQLite database.

* The broker paused (SIGSTOP) for :data:`PAUSE` seconds during ``zync from-kafka`` and
  during ``zync to-kafka``, then resumed (SIGCONT).
* The broker killed (SIGKILL) and restarted mid-run under the three loops of a pipeline.
* The Schema Registry stopped for :data:`PAUSE` seconds during ``zync from-kafka``.

Each time the loops say what happened in words ("... unreachable since ..., waiting",
"... back after ..., resuming"), resume by themselves, and pools and topics end with
every record exactly once. How long each recovery took is printed (``pytest -s``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from engine.kafka import clients
from engine.kafka.codecs import avro
from engine.local import broker as local_broker
from engine.local import processes
from engine.local import registry as local_registry
from engine.settings.kafka import KafkaProfile
from tests.integration.test_to_kafka import (
    invoice_types,
    read_topic,
    stage_many,
    staged_count,
    staging_pool,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=120), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
#: How long the broker is paused and the registry stopped: the issue's 20 seconds.
PAUSE = 20.0
WAITING = "unreachable since"
BACK = "back after"
START_TIMEOUT = 120.0


# ----------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    """The module's broker and registry, restartable where they were."""

    root: Path
    broker: processes.Process
    registry: processes.Process
    paused: bool = False

    @property
    def bootstrap(self) -> str:
        return f"{processes.HOST}:{self.broker.port}"

    @property
    def registry_url(self) -> str:
        return self.registry.address

    @property
    def kafka(self) -> KafkaProfile:
        return KafkaProfile(bootstrap_servers=self.bootstrap)

    def pause_broker(self) -> None:
        os.kill(self.broker.pid, signal.SIGSTOP)
        self.paused = True

    def resume_broker(self) -> None:
        os.kill(self.broker.pid, signal.SIGCONT)
        self.paused = False

    def kill_broker(self) -> None:
        os.kill(self.broker.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while processes.process_running(self.broker):  # reaps our child
            assert time.monotonic() < deadline, "the broker survived SIGKILL"
            time.sleep(0.05)

    def start_broker(self) -> None:
        self.broker = local_broker.start_broker(
            self.root / "broker", self.broker.port, timeout=START_TIMEOUT
        )

    def stop_registry(self) -> None:
        processes.stop_process(self.registry, timeout=10)

    def start_registry(self) -> None:
        self.registry = local_registry.start_registry(
            self.root / "registry",
            self.registry.port,
            db=self.root / "registry" / "registry.db",
            timeout=START_TIMEOUT,
        )

    def heal(self) -> None:
        """Both running and answering (a test that failed midway may have left them
        paused or stopped)."""
        if self.paused:
            with contextlib.suppress(ProcessLookupError):
                self.resume_broker()
        if not processes.process_running(self.broker):
            self.start_broker()
        if not processes.process_running(self.registry):
            self.start_registry()

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.broker.pid, signal.SIGCONT)
        for proc in (self.broker, self.registry):
            with contextlib.suppress(Exception):
                processes.stop_process(proc, timeout=10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("faults")
    broker = local_broker.start_broker(
        root / "broker", processes.free_port(), timeout=START_TIMEOUT
    )
    try:
        registry = local_registry.start_registry(
            root / "registry", processes.free_port(), timeout=START_TIMEOUT
        )
    except BaseException:
        processes.stop_process(broker, timeout=10)
        raise
    running = Stack(root, broker, registry)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def healthy(stack: Stack) -> Stack:
    stack.heal()
    return stack


# ----------------------------------------------------------------------------- helpers


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``predicate`` until true; the time it became true (``time.monotonic()``)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic()


def report(fault: str, text: str) -> None:
    """What the user saw, and how long the recovery took (shown with ``pytest -s``)."""
    print(f"\n[{fault}] {text}", flush=True)


@dataclass
class Sent:
    """What a producer delivered: payload per (topic, partition, offset)."""

    records: dict[tuple[str, int, int], bytes] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
            return
        self.records[(message.topic(), message.partition(), message.offset())] = message.value()


def produce(
    kafka: KafkaProfile, topic: str, values: list[bytes], sent: Sent, *, flush: bool = True
) -> Any:
    producer = clients.producer(kafka)
    for i, value in enumerate(values):
        producer.produce(topic, key=str(i).encode(), value=value, on_delivery=sent)
        producer.poll(0)
    if flush:
        assert producer.flush(90) == 0
        assert not sent.errors, sent.errors
    return producer


def json_values(first: int, count: int) -> list[bytes]:
    return [
        json.dumps({"i": i, "pad": "x" * (i % 40)}, separators=(",", ":")).encode()
        for i in range(first, first + count)
    ]


def pool_rows(path: Path) -> list[dict[str, Any]]:
    if not DeltaTable.is_deltatable(str(path)):
        return []
    table = DeltaTable(str(path)).to_pyarrow_table(columns=["kafka", "value", "deadletter"])
    return table.to_pylist()


def assert_exactly_once(
    rows: list[dict[str, Any]], sent: Sent, decode: Callable[[bytes], Any]
) -> None:
    """Every produced record once in the raw pool, with its payload."""
    seen = Counter(
        (r["kafka"]["topic"], r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows
    )
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"{len(twice)} record(s) twice, e.g. {twice[:3]}"
    assert set(seen) == set(sent.records), (
        f"missing {len(set(sent.records) - set(seen))}, unexpected {len(set(seen) - set(sent.records))}"
    )
    for r in rows:
        key = (r["kafka"]["topic"], r["kafka"]["partition"], r["kafka"]["offset"])
        if r["deadletter"] is None:
            assert json.loads(r["value"]) == decode(sent.records[key]), key


class Run:
    """A zync command in a subprocess, its output in a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._file = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
            stdout=self._file,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text()

    def line(self, words: str) -> str | None:
        return next((ln for ln in self.text().splitlines() if words in ln), None)

    def running(self) -> bool:
        """True while the command runs; an exit fails the test with its output."""
        if self.proc.poll() is not None:
            raise AssertionError(f"exited ({self.proc.returncode}):\n{self.text()[-3000:]}")
        return True

    def wait_line(self, words: str, timeout: float) -> float:
        def seen() -> bool:
            if self.proc.poll() is not None and self.line(words) is None:
                raise AssertionError(f"exited ({self.proc.returncode}):\n{self.text()[-3000:]}")
            return self.line(words) is not None

        return wait_for(seen, timeout, f"{words!r} in the output")

    def close(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._file.close()
        return self.proc.returncode


@contextlib.contextmanager
def running(args: list[str], log: Path, env: dict[str, str]) -> Iterator[Run]:
    run = Run(args, log, env)
    try:
        yield run
    finally:
        run.close()


def pause_for_the_spec(since: float) -> None:
    """The issue's pause lasts PAUSE seconds from ``since`` (a duration of the spec, not
    a wait for a condition)."""
    threading.Event().wait(max(0.0, since + PAUSE - time.monotonic()))


def ordered(text: str, first: str, then: str) -> bool:
    return 0 <= text.find(first) < text.find(then)


# ----------------------------------------------------------------------------- tests


def test_broker_paused_during_from_kafka(healthy: Stack, tmp_path: Path) -> None:
    kafka = healthy.kafka
    topic = unique("paused-in")
    clients.ensure_topic(kafka, topic, partitions=2)
    sent = Sent()
    produce(kafka, topic, json_values(0, 2000), sent)
    lake = tmp_path / "lake"
    args = ["zync_tui.commands.ingest", "from-kafka", "-t", topic, "-p", "raw", "--create-pool",
            "--lake", str(lake), "-b", healthy.bootstrap, "--max-records", "500",
            "--interval", "200ms", "--exit-after", "8s", "--no-progress"]  # fmt: skip
    with running(args, tmp_path / "from-kafka.log", {}) as run:
        wait_for(lambda: len(pool_rows(lake / "raw")) >= 2000 or not run.running(), 120,
                 "the first records")

        paused_at = time.monotonic()
        healthy.pause_broker()
        during = produce(kafka, topic, json_values(2000, 1000), sent, flush=False)
        said = run.wait_line(WAITING, PAUSE)
        assert len(pool_rows(lake / "raw")) == 2000  # nothing could be consumed
        pause_for_the_spec(paused_at)
        healthy.resume_broker()
        resumed_at = time.monotonic()
        assert during.flush(90) == 0
        assert not sent.errors, sent.errors
        back = run.wait_line(BACK, 60)
        produce(kafka, topic, json_values(3000, 500), sent)
        caught_up = wait_for(lambda: len(pool_rows(lake / "raw")) >= 3500, 120, "every record")
        run.proc.wait(120)  # exits by itself: --exit-after counts from Kafka's return
        assert run.proc.returncode == 0, run.text()
        text = run.text()

    assert ordered(text, WAITING, BACK), text
    assert f"Kafka at {healthy.bootstrap} {WAITING}" in text, text
    assert "resuming" in text
    assert_exactly_once(pool_rows(lake / "raw"), sent, json.loads)
    report(
        "broker paused, from-kafka",
        f"{run.line(WAITING)!r} ({said - paused_at:.1f}s into the pause)",
    )
    report("broker paused, from-kafka", f"{run.line(BACK)!r}")
    report(
        "broker paused, from-kafka",
        f"recovery: said back {back - resumed_at:.1f}s after SIGCONT; every record in the "
        f"pool {caught_up - resumed_at:.1f}s after SIGCONT",
    )


def test_broker_paused_during_to_kafka(healthy: Stack, tmp_path: Path) -> None:
    from engine.lake.pools import Lake

    kafka = healthy.kafka
    topic = unique("paused-out")
    lake = Lake(tmp_path / "lake")
    pool = staging_pool(lake)
    stage_many(pool, topic, 2000, per_commit=500, types=invoice_types())
    args = ["zync_tui.commands.deliver", "to-kafka", "-t", topic, "-p", "Staging",
            "--continuous", "-f", "json", "--batch", "500", "--lake", str(lake.root),
            "-b", healthy.bootstrap]  # fmt: skip
    with running(args, tmp_path / "to-kafka.log", {}) as run:
        run.wait_line("caught up after pool offset 1999", 120)

        paused_at = time.monotonic()
        healthy.pause_broker()
        stage_many(pool, topic, 2000, per_commit=500, types=invoice_types())
        said = run.wait_line(WAITING, PAUSE)
        pause_for_the_spec(paused_at)
        healthy.resume_broker()
        resumed_at = time.monotonic()
        back = run.wait_line(BACK, 90)
        caught_up = run.wait_line("caught up after pool offset 3999", 120)
        code = run.close()
        text = run.text()
    assert code == 0, text
    assert ordered(text, WAITING, BACK), text
    assert f"{topic}: Kafka at {healthy.bootstrap} {WAITING}" in text, text

    got = read_topic(kafka, topic, fmt="json", timeout=60)
    assert staged_count(pool, topic) == 4000
    assert [r.pool_offset for r in got] == list(range(4000))  # once each, in offset order
    report(
        "broker paused, to-kafka", f"{run.line(WAITING)!r} ({said - paused_at:.1f}s into the pause)"
    )
    report("broker paused, to-kafka", f"{run.line(BACK)!r}")
    report(
        "broker paused, to-kafka",
        f"recovery: said back {back - resumed_at:.1f}s after SIGCONT; caught up "
        f"{caught_up - resumed_at:.1f}s after SIGCONT",
    )


def test_broker_killed_and_restarted_under_all_loops(
    healthy: Stack, tmp_path: Path, spark: Any
) -> None:
    from engine.lake.pools import Lake
    from engine.services.pipeline import Pipeline
    from engine.services.service import ServiceEvent

    kafka = healthy.kafka
    source, output = unique("killed-in"), unique("killed-out")
    clients.ensure_topic(kafka, source, partitions=2)
    config = tmp_path / "etl.yaml"
    config.write_text(
        "name: faults\n"
        f"inputs: [{{topic: {source}, pool: Raw}}]\n"
        f"outputs: [{{topic: {output}, pool: Staging}}]\n"
        "transforms:\n"
        f"  - {{type: stateless, in: {source}, out: {output}, "
        "sql: 'SELECT in.key AS key, in.value AS value'}\n"
    )
    lake = Lake(tmp_path / "lake")
    events: list[ServiceEvent] = []
    pipeline = Pipeline(
        config, lake, kafka=kafka, spark=spark, etl_interval=0.5, format="json",
        on_event=events.append,
    )  # fmt: skip

    def said(service: str, kind: str) -> ServiceEvent | None:
        return next((e for e in events if e.service == service and e.kind == kind), None)

    def delivered() -> int:
        return len(read_topic(kafka, output, fmt="json", timeout=30))

    sent = Sent()
    pipeline.start()
    try:
        produce(kafka, source, json_values(0, 200), sent)
        wait_for(lambda: delivered() >= 200, 240, "the first outputs")

        produce(kafka, source, json_values(200, 100), sent)
        wait_for(lambda: len(pool_rows(lake.root / "Raw")) >= 300, 120, "the next inputs")
        healthy.kill_broker()  # while the ETL and to-kafka still have work
        killed_at = time.monotonic()
        staged_then = staged_count(lake.open_pool("Staging"), output)
        wait_for(lambda: said("from-kafka", "unreachable") is not None, 60, "from-kafka to say so")
        healthy.start_broker()
        restarted_at, restarted_wall = time.monotonic(), time.time()
        produce(kafka, source, json_values(300, 100), sent)
        caught_up = wait_for(lambda: delivered() >= 400, 240, "every output")
        wait_for(lambda: said("from-kafka", "back") is not None, 60, "from-kafka to resume")
        failed = pipeline.failed()
    finally:
        pipeline.stop()
    assert not failed, failed
    lines = [e.line() for e in events]
    text = "\n".join(lines)
    if staged_then < 300:  # to-kafka had outputs to deliver while the broker was gone
        assert said("to-kafka", "unreachable") is not None, text
        assert said("to-kafka", "back") is not None, text

    # raw: every record once; staging: every output once, contiguous; the topic: each once, in order
    assert_exactly_once(pool_rows(lake.root / "Raw"), sent, json.loads)
    staging = [r for r in lake.open_pool("Staging").table.to_pyarrow_table().to_pylist()
               if r["marker"] is None]  # fmt: skip
    assert sorted(r["kafka"]["offset"] for r in staging) == list(range(400))
    by_offset = {r["kafka"]["offset"]: json.loads(r["value"]) for r in staging}
    got = read_topic(kafka, output, fmt="json", timeout=60)
    assert [r.anchor for r in got] == list(range(400)), text
    assert [r.value for r in got] == [by_offset[i] for i in range(400)]

    for service in ("from-kafka", "to-kafka"):
        for kind in ("unreachable", "back"):
            event = said(service, kind)
            if event is not None:
                report("broker killed", f"{service}: {event.message!r}")
    resumed = said("from-kafka", "back")
    assert resumed is not None
    report(
        "broker killed", "to-kafka's events:\n" + "\n".join(ln for ln in lines if "to-kafka" in ln)
    )
    report(
        "broker killed",
        f"the broker was down {restarted_at - killed_at:.1f}s (restart included); from-kafka "
        f"said back {resumed.at - restarted_wall:.1f}s after "
        f"the restart; every output delivered {caught_up - restarted_at:.1f}s after it "
        f"(staged at the kill: {staged_then} of 300)",
    )


AVRO_V1 = {
    "type": "record",
    "name": "Thing",
    "fields": [{"name": "i", "type": "long"}, {"name": "label", "type": "string"}],
}
AVRO_V2 = {
    **AVRO_V1,
    "fields": [*AVRO_V1["fields"], {"name": "extra", "type": ["null", "string"], "default": None}],
}


def test_registry_down_during_from_kafka(healthy: Stack, tmp_path: Path) -> None:
    from engine.kafka.registry_client import RegistrySchemas
    from engine.settings.registry import RegistryProfile

    kafka = healthy.kafka
    topic = unique("registry-in")
    clients.ensure_topic(kafka, topic, partitions=2)
    schemas = RegistrySchemas(RegistryProfile(url=healthy.registry_url))
    id1 = schemas.register(f"{topic}-value", AVRO_V1)
    v1, v2 = avro.AvroSchema(json.dumps(AVRO_V1)), avro.AvroSchema(json.dumps(AVRO_V2))
    records: dict[bytes, Any] = {}

    def values(schema_id: int, schema: Any, first: int, count: int) -> list[bytes]:
        out = []
        for i in range(first, first + count):
            record = {"i": i, "label": f"thing {i}"}
            if schema is v2:
                record["extra"] = f"extra {i}"
            data = avro.encode(schema_id, schema.parsed, record)
            records[data] = record
            out.append(data)
        return out

    sent = Sent()
    produce(kafka, topic, values(id1, v1, 0, 300), sent)
    unknown = avro.encode(999_999, v1.parsed, {"i": -1, "label": "nobody knows my schema"})
    produce(kafka, topic, [unknown], sent)  # a registry that answers: a dead letter
    lake = tmp_path / "lake"
    args = ["zync_tui.commands.ingest", "from-kafka", "-t", topic, "-p", "raw", "--create-pool",
            "--lake", str(lake), "-b", healthy.bootstrap, "-r", healthy.registry_url,
            # idle long enough that a loaded machine stops the registry before it exits
            "--interval", "200ms", "--exit-after", "15s", "--no-progress"]  # fmt: skip
    with running(args, tmp_path / "from-kafka.log", {}) as run:
        wait_for(lambda: len(pool_rows(lake / "raw")) >= 301 or not run.running(), 120,
                 "the first records")

        # a new version, after from-kafka looked up its topics' latest schemas at start:
        # known to the registry only
        id2 = schemas.register(f"{topic}-value", AVRO_V2)
        stopped_at = time.monotonic()
        healthy.stop_registry()
        produce(kafka, topic, values(id2, v2, 300, 300), sent)
        said = run.wait_line(WAITING, PAUSE)
        pause_for_the_spec(stopped_at)
        held = pool_rows(lake / "raw")
        healthy.start_registry()
        started_at = time.monotonic()
        back = run.wait_line(BACK, 60)
        caught_up = wait_for(lambda: len(pool_rows(lake / "raw")) >= 601, 120, "every record")
        run.proc.wait(120)
        assert run.proc.returncode == 0, run.text()
        text = run.text()

    assert len(held) == 301, "records went on while the registry was down"
    assert ordered(text, WAITING, BACK), text
    assert f"Schema Registry at {healthy.registry_url} {WAITING}" in text, text
    rows = pool_rows(lake / "raw")
    dead = [r for r in rows if r["deadletter"] is not None]
    assert len(dead) == 1, dead  # the unknown id only: none for the outage
    assert "unknown-schema-id" in dead[0]["deadletter"]["error"]
    assert dead[0]["deadletter"]["value_bytes"] == unknown
    assert_exactly_once(rows, sent, lambda data: records[data])
    report(
        "registry down, from-kafka",
        f"{run.line(WAITING)!r} ({said - stopped_at:.1f}s after the stop)",
    )
    report("registry down, from-kafka", f"{run.line(BACK)!r}")
    report(
        "registry down, from-kafka",
        f"recovery: said back {back - started_at:.1f}s after the registry answered again; "
        f"every record in the pool {caught_up - started_at:.1f}s after it",
    )
