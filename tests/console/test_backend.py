"""The console's engine side reads the services' and the ETL's own result types."""

from __future__ import annotations

import logging

from engine.api import Commit, PassResult, ServiceStatus
from zync_tui.console.views import LogBook, loop_view, pass_outcome


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


def test_spark_master_reaches_the_console_and_the_demo(monkeypatch, tmp_path) -> None:
    """`zync tui/demo --spark-master URL`: the console's Spark (and the headless demo's)
    is asked for that master, with the rest of ~/.zync/spark.json kept."""
    import json

    from typer.testing import CliRunner

    import demo.scenario
    import zync_tui.console.backend
    from zync_tui.commands import standalone_app
    from zync_tui.commands.console import register
    from zync_tui.console.app import make_app

    home = tmp_path / "home"
    home.mkdir()
    (home / "spark.json").write_text(json.dumps({"master": "local[1]", "conf": {"spark.x": "1"}}))
    monkeypatch.setenv("ZYNC_HOME", str(home))
    monkeypatch.delenv("ZYNC_SPARK_MASTER", raising=False)
    asked = []
    monkeypatch.setattr(zync_tui.console.backend, "get_spark", lambda settings=None: asked.append(settings))

    app = make_app(lake=tmp_path / "lake", spark_master="spark://10.0.0.9:7077", autostart=False, in_process=True)
    app.backend._spark()
    assert (asked[-1].master, asked[-1].conf) == ("spark://10.0.0.9:7077", {"spark.x": "1"})
    make_app(lake=tmp_path / "lake", autostart=False, in_process=True).backend._spark()
    assert asked[-1].master == "local[1]"

    seen = {}
    monkeypatch.setattr(
        demo.scenario, "run_demo", lambda demo, **kw: seen.update(kw) or (_ for _ in ()).throw(SystemExit(0))
    )
    cli = standalone_app(register)
    result = CliRunner().invoke(cli, ["demo", "--no-tui", "--spark-master", "spark://10.0.0.9:7077"])
    assert seen.get("spark_master") == "spark://10.0.0.9:7077", result.output
    assert "--spark-master" in CliRunner().invoke(cli, ["tui", "--help"]).output
