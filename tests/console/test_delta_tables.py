"""The tables under the Loops panel (issue 37): each table's version, rows, the staging
version it reflects against the newest and its lag; hidden while there are none."""

from __future__ import annotations

import pytest

from engine.api import TableSnapshot
from tests.console.conftest import fake_app, fresh, polled
from tests.console.fakes import T0, FakeBackend
from zync_tui.console.widgets.delta_tables import TablesSection
from zync_tui.console.widgets.tables import LiveTable

pytestmark = pytest.mark.anyio


def rows(app) -> list[list[str]]:
    table = app.query_one("#tables-table", LiveTable)
    table.flush()
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_the_tables_show_under_the_loops_with_their_lag() -> None:
    backend = FakeBackend()
    app = fake_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await polled(pilot)
        await pilot.press("2")
        assert not app.query_one(TablesSection).display  # no table: nothing shown
        backend.table_rows = [  # type: ignore[attr-defined]
            TableSnapshot("invoices", "NewInvoices", "Staging", False, "/lake/invoices",
                          version=7, rows=4, applied=12, staged=12, applied_at=T0),
            TableSnapshot("invoice_history", "NewInvoices", "Staging", True, "/lake/h",
                          version=3, rows=9, applied=9, staged=12, applied_at=T0 - 60),
            TableSnapshot("archive", "NewInvoices", "Staging", False, "s3://a/b",
                          error="not made yet: nothing applied"),
        ]
        await fresh(pilot, "loops")
        assert app.query_one(TablesSection).display
        assert rows(app) == [
            ["invoices", "current", "v7", "4", "12 / 12", "caught up", "03:00:00", "-"],
            ["invoice_history", "history", "v3", "9", "9 / 12", "3 versions", "02:59:00", "-"],
            ["archive", "current", "-", "-", "- / -", "-", "-", "not made yet: nothing applied"],
        ]
