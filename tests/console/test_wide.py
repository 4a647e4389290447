"""The console over a whole database through one pipeline (issue 41): 200 input topics,
200 rules, 200 outputs, 600 pending records, in an operator's 80×24 window — the Topics,
ETL and Pending panels scroll, filter (``/``, Esc) and sort (``s``, ``S``) by keyboard."""

from __future__ import annotations

import pytest
from textual.widgets._footer import FooterKey

from tests.console.conftest import fake_app, polled, until
from tests.console.fakes import WideBackend
from zync_tui.console.widgets.tables import LiveTable

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def summary(app, panel: str) -> str:
    return str(app.query_one(f"#{panel}-panel .filter-summary").render())


def footer(app) -> set[str]:
    return {key.description for key in app.screen.query(FooterKey)}


async def test_topics_scroll_filter_and_sort_at_200_tables() -> None:
    app = fake_app(WideBackend(200))
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        topics = app.query_one("#topics-table", LiveTable)
        await until(pilot, lambda: topics.row_count == 400, what="400 topic partitions")
        assert {"filter", "sort", "quit"} <= footer(app)

        await pilot.press("end")
        assert topics.highlighted_key() == "out:clean.t199:0"
        assert topics.scroll_y <= 399 < topics.scroll_y + topics._page  # the cursor in view
        await pilot.press("pageup")
        assert topics.cursor_row == 399 - topics._page
        await pilot.press("home", "j", "j")
        assert (topics.cursor_row, topics.scroll_y) == (2, 0)
        assert "dbserver1.inventory.t002" in str(app.query_one("#topics-detail").render())
        assert "row 3" in summary(app, "topics")

        await pilot.press("slash", *"t01")
        assert app.focused is not None  # the filter line takes the keys while typed
        assert "sort" not in footer(app)  # s is a letter now
        await until(pilot, lambda: topics.row_count == 20, what="t010 … t019, in and out")
        await pilot.press("enter")
        assert app.focused is None
        assert "/t01: 20 of 400 topic partitions (380 hidden)" in summary(app, "topics")
        polls = app.poll_count["topics"]
        await until(pilot, lambda: app.poll_count["topics"] > polls + 1, what="new polls")
        assert topics.row_count == 20  # the filter holds across polls
        await pilot.press("escape")
        await until(pilot, lambda: topics.row_count == 400, what="the filter cleared")

        await pilot.press(*"s" * 7)  # topic, p, dir, low, high, lake, lag
        await until(pilot, lambda: topics.listing.order.sort == 6, what="sorted by lag")
        lags = [int(topics.get_row_at(i)[6]) for i in range(topics.row_count)]
        assert lags == sorted(lags)
        await pilot.press("S")
        await until(pilot, lambda: topics.listing.order.descending, what="lag, descending")
        assert topics.get_row_at(0)[6] == "12"
        assert "sorted by lag ▼" in summary(app, "topics")

        await pilot.press("slash", *"dbs")  # an s typed is a letter of the filter, not a sort
        await until(pilot, lambda: topics.row_count == 200, what="the input topics")
        assert topics.listing.order.sort == 6


async def test_etl_and_pending_at_200_rules_and_600_records() -> None:
    app = fake_app(WideBackend(200))
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("3")
        etl = app.query_one("#etl-table", LiveTable)
        await until(pilot, lambda: etl.row_count == 200, what="200 rule inputs")
        await pilot.press(*"s" * 6, "S")  # pending, descending
        await until(pilot, lambda: etl.listing.order == etl.order, what="sorted by pending")
        pending = [int(etl.get_row_at(i)[5]) for i in range(etl.row_count)]
        assert pending == sorted(pending, reverse=True)
        await pilot.press("G")
        assert etl.cursor_row == 199

        await pilot.press("4")
        records = app.query_one("#pending-table", LiveTable)
        await until(pilot, lambda: records.row_count == 600, what="600 pending records")
        await pilot.press("pagedown", "pagedown")
        assert records.cursor_row == 2 * records._page
        await pilot.press("slash", *"t007", "enter")
        await until(pilot, lambda: records.row_count == 3, what="t007's records")
        assert all("t007" in records.get_row_at(i)[0] for i in range(3))
        await pilot.press("enter")  # the record under the cursor opens
        assert app.screen is not app.screen_stack[0]
        await pilot.press("escape", "escape")
        await until(pilot, lambda: records.row_count == 600, what="the filter cleared")
