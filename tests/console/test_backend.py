"""The console's engine side reads the services' and the ETL's own result types."""

from __future__ import annotations

import logging

from engine.etl.run import PassResult
from engine.services import Commit, ServiceStatus
from zync_tui.console.backend import LogBook, loop_view, pass_outcome


def test_loop_view_from_a_service_status() -> None:
    status = ServiceStatus(
        "from-kafka", "running", last_commit=Commit(12, 1_700_000_000.0, 40, "Raw"), rate=3.5,
        last_error="KafkaUnavailable: broker down\nmore detail",
    )
    view = loop_view("from-kafka", status)
    assert (view.state, view.version, view.committed_at, view.records, view.rate) == (
        "running", 12, 1_700_000_000.0, 40, 3.5,
    )
    assert view.error == "KafkaUnavailable: broker down"
    assert loop_view("etl", ServiceStatus("etl", "stopped")).version is None


def test_pass_outcome_from_a_pass_result() -> None:
    done = PassResult(etl="invoices", committed=True, read_version=2, staging_version=3,
                      consumed={"Invoices": 2, "InvoiceStatus": 2}, outputs={"NewInvoices": 2},
                      pending={"Invoices": 1})
    outcome = pass_outcome(done)
    assert outcome.summary() == "consumed 4 · output 2 · expired 0 · pending 1 → staging v3"
    idle = PassResult(etl="invoices", staging_version=3)
    assert pass_outcome(idle).summary() == "nothing new to ETL"


def test_log_book_keeps_engine_records_and_service_events() -> None:
    book = LogBook(clock=lambda: 5.0)
    logger = logging.getLogger("engine.test-console")
    logger.addHandler(book)
    try:
        logger.warning("lag %d records", 3)
    finally:
        logger.removeHandler(book)
    book.add("INFO", "etl", "pass: nothing new", at=7.0)
    entries = book.drain()
    assert [(e.at, e.severity, e.source, e.message) for e in entries] == [
        (5.0, "WARNING", "test-console", "lag 3 records"),
        (7.0, "INFO", "etl", "pass: nothing new"),
    ]
    assert book.drain() == []
