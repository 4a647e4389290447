"""The invoice demo driven by Pilot, with the real engine behind the console.

A private broker and registry (the demo's topic names and subjects are fixed, so it does
not share the session's), a lake in tmp_path, the session's SparkSession. The console is
built by the same factory `zync demo` uses, with the engine in the test's process (a
user's runs in a child process whose API the console reads: tests/console/test_hosted.py;
the read-only test below uses it); `n` publishes each batch and the loops carry
the records through from-kafka, ETL and to-kafka. Along the way every panel and key is
used against the real stack; at the end the broker is stopped and started again, and the
console shows the fault in words and picks the recovery up by itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, TabbedContent

from engine.local import broker as local_broker
from engine.local import processes
from tests.stack import start_broker, start_registry
from zync_tui.console.app import make_app
from zync_tui.console.screens.deadletters import DeadLettersScreen
from zync_tui.console.screens.help import HelpScreen
from zync_tui.console.screens.record import RecordScreen
from zync_tui.console.widgets.tables import LiveTable

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.anyio]

# (key ID, value) of the 8 outputs. Their order follows the seqnos of the inputs each
# needed (docs/design.md#ordering), and which of two topics from-kafka commits first within
# a batch is its own choice, so Alice and Bob may come either way round: the test checks
# the outputs as a whole, and that the topic holds them in Staging's order.
EXPECTED = [
    (101, {"ID": 101, "customer": "Bob", "item": "burrito", "invoice_status": "pending"}),
    (100, {"ID": 100, "customer": "Alice", "item": "taco", "invoice_status": "pending"}),
    (102, {"ID": 102, "customer": "Charlie", "item": "enchilada", "invoice_status": "pending"}),
    (103, {"ID": 103, "customer": "Dan", "item": "beans", "invoice_status": "pending"}),
    (100, {"ID": 100, "invoice_status": "closed"}),
    (103, {"ID": 103, "invoice_status": "collections"}),
    (102, {"ID": 102, "invoice_status": "paid"}),
    (101, {"ID": 101, "invoice_status": "paid"}),
]
OUTPUTS_AFTER = {1: 2, 2: 3, 3: 5, 4: 8}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def until(pilot: Any, predicate: Callable[[], Any], limit: float, what: str, *, thread: bool = False) -> Any:
    """Run the app until ``predicate`` is truthy (in a thread when it blocks)."""
    deadline = time.monotonic() + limit
    while True:
        value = await asyncio.to_thread(predicate) if thread else predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            app = pilot.app
            loops = "; ".join(f"{v.name} {v.state} {v.error or ''}" for v in app.backend.loops())
            log = "\n".join(" | ".join(r) for r in rows(app, "log")[:15])
            pytest.fail(f"timed out after {limit:g}s waiting for {what}\nloops: {loops}\nlog:\n{log}")
        await pilot.pause(0.2)


def _set(value: dict[str, Any]) -> dict[str, Any]:
    """The fields that have a value (the merged output type gives absent fields as null)."""
    return {k: v for k, v in value.items() if v is not None}


def rows(app: Any, panel: str) -> list[list[str]]:
    table = app.screen_stack[0].query_one(f"#{panel}-panel").query_one(LiveTable)
    table.flush()  # the rows it shows when it comes into view
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def table_rows(app: Any) -> list[list[str]]:
    """The rows of the tables under the Loops panel's loops."""
    table = app.screen_stack[0].query_one("#tables-table", LiveTable)
    table.flush()
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def status(app: Any) -> str:
    return str(app.screen_stack[0].query_one("#status").render())


def loop_state(app: Any, name: str) -> str | None:
    for loop in app.screen_stack[0].query_one("#loops-panel").loops:
        if loop.name == name:
            return loop.state
    return None


async def test_demo_by_pilot_ends_with_8_outputs_in_staging_and_on_the_topic(spark, tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "broker")
    registry = start_registry(tmp_path / "registry")
    app = make_app(
        demo=True,
        lake=tmp_path / "lake",
        kafka={"bootstrap_servers": broker.address},
        registry={"url": registry.url},
        start_stack=False,
        interval=0.5,
        in_process=True,  # the session's Spark; the child process: tests/console/test_hosted.py
    )
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.ready, 120, "the engine to start")
            driver = app.backend.driver
            await until(pilot, lambda: loop_state(app, "etl") == "running", 120, "the ETL loop to run")
            for batch in (1, 2, 3, 4):
                await pilot.press("n")
                await until(pilot, lambda b=batch: driver.published == b and "demo" not in app.busy, 60, f"batch {batch}")
                await until(
                    pilot,
                    lambda b=batch: len(driver.staging_outputs()) >= OUTPUTS_AFTER[b],
                    180,
                    f"{OUTPUTS_AFTER[batch]} outputs in Staging after batch {batch}",
                    thread=True,
                )
                if batch == 2:  # Dan waits for his status row
                    await pilot.press("4")
                    await until(
                        pilot,
                        lambda: [r[:4] for r in rows(app, "pending")] == [["Invoices", "0", "3", '{"ID":103}']],
                        60,
                        "Dan alone pending",
                    )
                    await pilot.press("enter")
                    assert isinstance(app.screen, RecordScreen)
                    shown = str(app.screen.query_one("#record-json").render())
                    assert '"customer": "Dan"' in shown
                    await pilot.press("escape")
                    await pilot.press("slash", *"Invoices")
                    assert isinstance(app.focused, Input)
                    assert len(rows(app, "pending")) == 1
                    await pilot.press("escape", "s", "S")
                    await pilot.press("3")
                    etl = rows(app, "etl")
                    assert etl[0][:3] == ["new-invoice", "Invoices", "0"]
                    await until(pilot, lambda: rows(app, "etl")[0][5] == "1", 30, "ETL panel: 1 pending")

            await until(pilot, lambda: len(driver.topic_outputs()) >= 8, 180, "8 records on NewInvoices", thread=True)
            staging = await asyncio.to_thread(driver.staging_outputs)
            topic = await asyncio.to_thread(driver.topic_outputs)
            staged = [(r["key"]["ID"], _set(r["value"])) for r in staging]
            assert sorted(staged, key=repr) == sorted(EXPECTED, key=repr)
            assert [r["offset"] for r in staging] == list(range(8))
            assert [(r["key"]["ID"], _set(r["value"])) for r in topic] == staged
            later = [v for _, v in staged[4:]]  # the status updates come after every new invoice
            assert all("customer" not in v for v in later)

            # every panel shows the end of the story
            await pilot.press("1")
            await until(
                pilot,
                lambda: any(r[0] == "NewInvoices" and r[5] == "7" for r in rows(app, "topics")),
                30,
                "Topics: NewInvoices staged up to offset 7",
            )
            topics = {(r[0], r[2]): r for r in rows(app, "topics")}
            assert topics[("Invoices", "in")][4:7] == ["4", "3", "0"]  # high, lake, lag
            assert topics[("InvoiceStatus", "in")][4:7] == ["8", "7", "0"]
            await pilot.press("d")
            assert isinstance(app.screen, DeadLettersScreen)
            await until(pilot, lambda: "no dead letters" in str(app.screen.query_one("#dead-notice").render()), 30, "dead letters")
            await pilot.press("escape", "4")
            await until(pilot, lambda: rows(app, "pending") == [], 30, "nothing pending")
            await pilot.press("5")
            assert rows(app, "expired") == []
            await pilot.press("6")
            log = [r[3] for r in rows(app, "log")]
            assert any("published batch 4 of 4" in line for line in log)
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            # under the loops, the invoices table the apply loop keeps: 4 rows, caught up
            await pilot.press("escape", "2")
            await until(
                pilot,
                lambda: [[r[0], r[1], r[3], r[5]] for r in table_rows(app)]
                == [["invoices", "current", "4", "caught up"]],
                60,
                "Loops: the invoices table with its 4 rows, caught up",
            )
            assert table_rows(app)[0][2].startswith("v")  # its Delta version
            await pilot.press("p")
            await until(pilot, lambda: app.last_pass is not None, 120, "the ETL pass started with p")
            assert "nothing new to ETL" in app.last_pass
            for key, name in (("f", "from-kafka"), ("e", "etl"), ("t", "to-kafka"), ("y", "apply")):
                await pilot.press(key)
                await until(pilot, lambda n=name: loop_state(app, n) == "stopped", 150, f"{name} stopped")
                await pilot.press(key)
                await until(pilot, lambda n=name: loop_state(app, n) == "running", 150, f"{name} running")
            await pilot.press("r")

            # the broker goes away and comes back on the same port
            port = broker.port
            broker.stop()
            await pilot.press("1")
            await until(pilot, lambda: "Kafka DOWN" in status(app), 60, "Kafka DOWN")
            notice = str(app.screen_stack[0].query_one("#topics-notice").render())
            assert "cannot reach Kafka" in notice
            assert any(r[5] == "3" for r in rows(app, "topics"))  # the lake's side still shows
            assert rows(app, "etl")  # the other panels keep working
            restarted = local_broker.start_broker(tmp_path / "broker2", port=port)
            try:
                await until(pilot, lambda: "Kafka ok" in status(app), 60, "Kafka ok again")
                assert app.is_running
            finally:
                app.backend.close()
                processes.stop_process(restarted, timeout=10)
    finally:
        app.backend.close()
        broker.stop()
        registry.stop()


async def test_read_only_console_on_a_lake_shows_it_and_refuses_control(spark, tmp_path: Path) -> None:
    """`zync tui CONFIG --read-only` over a lake with no Kafka reachable: the lake's side,
    the ETL panel and the fault in words; no loop is built to start."""
    from demo.scenario import DEMO_DIR

    app = make_app(
        DEMO_DIR / "etl.yaml",
        lake=tmp_path / "missing-lake",
        read_only=True,
        kafka={"bootstrap_servers": "127.0.0.1:1"},
        registry={"url": "http://127.0.0.1:1"},
        interval=0.5,
    )
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.ready and {"topics", "etl", "loops"} <= app.polled, 60, "first polls")
            text = status(app)
            assert "READ-ONLY" in text
            assert "lake MISSING" in text
            assert "registry DOWN" in text
            await pilot.press("3")
            assert app.query_one(TabbedContent).active == "etl"
            assert "missing" in str(app.screen_stack[0].query_one("#etl-notice").render())
            await pilot.press("2", "p", "f")
            await pilot.pause(0.5)
            assert app.last_pass is None
            assert [loop_state(app, n) for n in ("from-kafka", "etl", "to-kafka")] == ["not run"] * 3
    finally:
        app.backend.close()
