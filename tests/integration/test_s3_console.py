"""`zync tui CONFIG --read-only --lake s3://...`: the console over an S3 lake (moto's
server) with Kafka unreachable shows the lake's side — the ETL's cursors and pending
record read from S3 — and no lake fault."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import TabbedContent

from engine.api import EtlRunner, load_config
from engine.lake.pools import Lake
from tests.integration.test_demo import rows, status, until
from tests.integration.test_etl_support import DEMO, append_events, demo_batch, make_pools
from zync_tui.console.app import make_app

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.anyio, pytest.mark.s3]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_read_only_console_on_an_s3_lake(spark, s3_url: str, tmp_path: Path) -> None:
    lake = Lake(s3_url)
    raw, _ = make_pools(lake)
    for batch in (1, 2):
        append_events(raw, demo_batch(batch))
    EtlRunner(load_config(DEMO / "etl.yaml"), lake, spark).run_pass()  # Dan's invoice waits

    app = make_app(
        DEMO / "etl.yaml",
        lake=s3_url,
        read_only=True,
        kafka={"bootstrap_servers": "127.0.0.1:1"},
        registry={"url": "http://127.0.0.1:1"},
        interval=0.5,
        in_process=True,  # the session's Spark, with the S3 settings
    )
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.ready and {"topics", "etl"} <= app.polled, 90, "first polls")
            text = status(app)
            assert "READ-ONLY" in text
            assert "lake MISSING" not in text
            await pilot.press("4")
            assert app.query_one(TabbedContent).active == "pending"
            await until(pilot, lambda: any("Invoices" in " ".join(r) for r in rows(app, "pending")), 60, "the pending record")
    finally:
        app.backend.close()
