"""A deterministic backend for console tests: fixed clock, canned snapshots, no services.

It returns the engine's own types (engine.api: snapshots, an ETL pass's result), so the
console renders exactly what it would for a real pipeline, and it records every call, so
tests can assert on what a key did. ``pass_gate`` makes an ETL pass block until the test releases it (a
"30-second pass" without waiting 30 seconds). :class:`WideBackend` is a whole database
through one pipeline (tests/fixtures/wide.py's pass-through configuration: 200 input
topics, 200 rules, 200 outputs). ``moving``: every snapshot's numbers move on, as a
working engine's do (bench/console_latency.py); off, every snapshot shows the same.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from engine.api import (
    DeadLetter,
    EtlReport,
    EtlSnapshot,
    PassResult,
    RecordRow,
    TableSnapshot,
    TablesReport,
    TopicSnapshot,
    TopicsReport,
)
from tests.fixtures import wide
from zync_tui.console.views import LogEntry, LoopView

T0 = 1_763_780_400.0  # 2025-11-22 03:00:00 UTC


def full_record(topic: str, offset: int, key: dict, after: dict, op: str = "c") -> dict:
    return {
        "seqno": offset,
        "kafka": {"topic": topic, "partition": 0, "offset": offset, "timestamp": "2025-11-22T02:59:00Z"},
        "key": key,
        "value": {"before": None, "after": after, "op": op, "source": {"ts_ms": 1_763_780_340_000, "db": "inventory"}},
    }


DAN = RecordRow(
    etl="invoices",
    topic="Invoices",
    partition=0,
    offset=3,
    key='{"ID":103}',
    rule="new-invoice",
    age_seconds=42.0,
    status="pending",
    full_record=full_record("Invoices", 3, {"ID": 103}, {"ID": 103, "customer": "Dan", "item": "beans"}),
)
EVE = RecordRow(
    etl="invoices",
    topic="Invoices",
    partition=0,
    offset=4,
    key='{"ID":104}',
    rule="new-invoice",
    age_seconds=7300.0,
    status="expired",
    full_record=full_record("Invoices", 4, {"ID": 104}, {"ID": 104, "customer": "Eve", "item": "salsa"}),
)


class FakeBackend:
    title = "zync · invoices"

    def __init__(
        self, *, read_only: bool = False, demo: bool = False, kafka_down: bool = False, moving: bool = False
    ) -> None:
        self.read_only = read_only
        self.moving = moving
        self.read_only_reason: str | None = None
        self.demo: FakeBackend | None = self if demo else None  # publishes its batches
        self.kafka_down = kafka_down
        self.lake_missing = False
        self.calls: list[str] = []
        self.states = {"from-kafka": "running", "etl": "running", "to-kafka": "stopped"}
        self.failing: dict[str, str] = {}
        self.pass_gate: threading.Event | None = None
        self.pass_entered = threading.Event()
        self.batches = 4
        self.log: list[LogEntry] = [
            LogEntry(T0 + 1, "INFO", "from-kafka", "Raw v3: 8 records (Invoices 4, InvoiceStatus 4)"),
            LogEntry(T0 + 2, "INFO", "etl", "pass: consumed 8 · output 3 · expired 0 · pending 1"),
            LogEntry(T0 + 3, "WARNING", "to-kafka", "NewInvoices: topic created with 1 partition"),
        ]
        self.topics_calls = 0

    # snapshots
    def start(self) -> list[str]:
        self.calls.append("start")
        return ["lake /lake"]

    def topics(self) -> TopicsReport:
        self.topics_calls += 1
        if self.lake_missing:
            return TopicsReport(taken_at=T0, lake_error="lake path /lake is missing")
        kafka_error = "cannot reach Kafka at 127.0.0.1:PORT (PLAINTEXT) within 3s: Connection refused" if self.kafka_down else None
        hist = (0.0, 2.0, 4.0, 0.0, 1.0, 3.0, 0.0, 0.0)
        n = self.topics_calls if self.moving else 0
        rows = (
            TopicSnapshot("Invoices", 0, "Raw", "in", 0, 4 + n, 3 + n, 0, 0.0, 0.0, 0.4, hist, 0),
            TopicSnapshot("InvoiceStatus", 0, "Raw", "in", 0, 6, 3, 2, 12.0, 11.5, 0.6, hist[::-1], 1),
            # high 5: the delivered records' transaction markers count in Kafka's watermark
            TopicSnapshot("NewInvoices", 0, "Staging", "out", 0, 5, 2, 0, None, None, 0.3, hist, 0,
                          envelope="jdbc", staged="NewInvoices", delivered_offset=2),
            TopicSnapshot("InvoiceChanges", 0, "Staging", "out", 0, 5, 2, 1, None, None, 0.3, hist,
                          0, envelope="debezium", staged="NewInvoices", delivered_offset=1),
        )
        if self.kafka_down:
            rows = tuple(replace(r, low=None, high=None, lag_records=None, lag_seconds=None,
                                 source_lag_seconds=None, error=kafka_error) for r in rows)
        return TopicsReport(taken_at=T0, topics=rows, kafka_error=kafka_error)

    def etl(self) -> EtlReport:
        rows = (
            EtlSnapshot("invoices", "new-invoice", "Invoices", 0, 2, 3, 1, 0),
            EtlSnapshot("invoices", "new-invoice", "InvoiceStatus", 0, 2, 3, 0, 0),
            EtlSnapshot("invoices", "status-update", "InvoiceStatus", 0, 2, 0, 0, 0),
        )
        return EtlReport(taken_at=T0, rows=rows, pending=(DAN,), expired=(EVE,), staging_version=5)

    def tables(self) -> TablesReport:
        """No table unless a test gives some (``self.table_rows``)."""
        return TablesReport(taken_at=T0, tables=tuple(getattr(self, "table_rows", ())))

    def loops(self) -> list[LoopView]:
        out = []
        for name in ("from-kafka", "etl", "to-kafka"):
            state = self.states[name]
            error = self.failing.get(name)
            if error:
                state = "failed"
            out.append(LoopView(name, state, version=3 if name != "to-kafka" else None,
                                committed_at=T0 + 60 if name != "to-kafka" else None,
                                records=8 if name == "from-kafka" else (4 if name == "etl" else None),
                                rate=2.5 if state == "running" else None, error=error,
                                host="ops-1" if name != "to-kafka" else "ops-2", pid=4242))
        return out

    def dead_letters(self) -> list[DeadLetter]:
        return [DeadLetter("Raw", "InvoiceStatus", 0, 5, "decode", "bad-magic: first byte is 0x7b, not 0", None, b'{"oops": 1}', 9)]

    # control
    def start_loop(self, name: str) -> None:
        self.calls.append(f"start {name}")
        if self.read_only:
            raise PermissionError("read-only")
        self.states[name] = "running"

    def stop_loop(self, name: str) -> None:
        self.calls.append(f"stop {name}")
        if self.read_only:
            raise PermissionError("read-only")
        self.states[name] = "stopped"

    def run_etl_pass(self) -> PassResult:
        self.calls.append("pass")
        self.pass_entered.set()
        if self.pass_gate is not None and not self.pass_gate.wait(60):
            raise TimeoutError("the test never released the pass")
        return PassResult(
            etl="invoices", committed=True, read_version=5, staging_version=6,
            consumed={"Invoices": 2, "InvoiceStatus": 2}, outputs={"NewInvoices": 2},
            pending={"Invoices": 1},
        )

    def next_batch(self) -> str:
        self.calls.append("next")
        self.batches -= 1
        return f"published batch {4 - self.batches} of 4 (4 records)"

    def batches_total(self) -> int:
        return 4

    def batches_left(self) -> int:
        return self.batches

    def drain_log(self) -> list[LogEntry]:
        out, self.log = self.log, []
        return out

    def close(self) -> None:
        self.calls.append("close")


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


class WideBackend(FakeBackend):
    """A whole database through one pipeline: ``tables`` input topics (Debezium's names,
    tests/fixtures/wide.py) into pool Raw, a pass-through rule each (named by position,
    as the configuration's unnamed rules are), an output topic each (``clean.tNNN``) and
    a table each under the apply loop; ``pending`` records waiting, spread over the
    topics. Every number is a function of the table's index, so sorting has something
    to sort and pictures are the same on every run."""

    title = "zync · width"

    def __init__(self, tables: int = 200, *, pending: int = 600, **kwargs: bool) -> None:
        super().__init__(**kwargs)
        self.count = tables
        self.pending_records = pending
        #: the waiting records: the same at every poll, made once (an engine makes them in
        #: its own process: the console only receives them)
        self._pending = tuple(
            RecordRow(
                etl="width", topic=wide.topic(i % tables), partition=0,
                offset=1_000 + i, key=f'{{"id":{i}}}', rule=str(i % tables + 1),
                age_seconds=float((i * 61) % 7_200), status="pending",
                full_record=full_record(wide.topic(i % tables), 1_000 + i, {"id": i}, {"id": i}),
            )
            for i in range(pending)
        )

    def topics(self) -> TopicsReport:
        self.topics_calls += 1
        n = self.topics_calls if self.moving else 0
        rows = []
        for t in range(self.count):
            high = 20 + (t * 37) % 480 + n
            lag = (t * 7) % 13
            hist = tuple(float((t + k) % 5) for k in range(8))
            rows.append(TopicSnapshot(wide.topic(t), 0, "Raw", "in", 0, high, high - lag, lag,
                                      float(lag * 3), float(lag * 3 + 1), (t % 9) / 2, hist,
                                      1 if t % 50 == 7 else 0))
        for t in range(self.count):
            staged = 5 + (t * 37) % 480 + n
            behind = (t * 3) % 4
            rows.append(TopicSnapshot(f"clean.t{t:03d}", 0, "Staging", "out", 0, staged + 1 - behind,
                                      staged, behind, None, None, (t % 7) / 2, (), 0,
                                      envelope="jdbc", staged=f"clean.t{t:03d}",
                                      delivered_offset=staged - behind))
        return TopicsReport(taken_at=T0, topics=tuple(rows))

    def etl(self) -> EtlReport:
        n = self.topics_calls if self.moving else 0
        rows = tuple(
            EtlSnapshot("width", str(t + 1), wide.topic(t), 0, (t * 37) % 480 + n,
                        (t * 37) % 480 + 1 + n, self._pending_of(t), t % 3)
            for t in range(self.count)
        )
        return EtlReport(taken_at=T0, rows=rows, pending=self._pending, expired=(), staging_version=40 + n)

    def _pending_of(self, table: int) -> int:
        return sum(1 for i in range(table, self.pending_records, self.count))

    def tables(self) -> TablesReport:
        return TablesReport(
            taken_at=T0,
            tables=tuple(
                TableSnapshot(f"t{t:03d}", f"clean.t{t:03d}", "Staging", False, f"/lake/t{t:03d}",
                              version=t % 17, rows=(t * 37) % 480, applied=39, staged=40,
                              applied_at=T0 - t)
                for t in range(self.count)
            ),
        )
