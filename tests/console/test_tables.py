"""LiveTable: a table out of view builds its rows only when it comes into view, and a
table with a limit shows that many rows, the first in its sort order."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widgets import TabbedContent, TabPane

from zync_tui.console.widgets.tables import LiveTable

pytestmark = pytest.mark.anyio
COLUMNS = [("name", "name"), ("n", "n")]


class TwoTabs(App[None]):
    def compose(self) -> ComposeResult:
        with TabbedContent(initial="front"):
            with TabPane("front", id="front"):
                yield LiveTable(COLUMNS, id="front-table")
            with TabPane("back", id="back"):
                yield LiveTable(COLUMNS, limit=3, id="back-table")


def _rows(count: int) -> list[tuple[str, tuple[str, str], tuple[str, int]]]:
    return [(f"k{i}", (f"row {i}", str(i)), (f"row {i}", i)) for i in range(count)]


def _shown(table: LiveTable) -> list[str]:
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_a_hidden_table_builds_its_rows_when_shown_and_keeps_to_its_limit() -> None:
    app = TwoTabs()
    async with app.run_test(size=(60, 12)) as pilot:
        front = app.query_one("#front-table", LiveTable)
        back = app.query_one("#back-table", LiveTable)
        front.set_rows(_rows(2))
        back.set_rows(_rows(10))
        assert front.row_count == 2  # in view: built at once
        assert back.row_count == 0  # out of view: given, not built
        assert back.total_rows == 10
        app.query_one(TabbedContent).active = "back"
        await pilot.pause()
        back.flush()
        assert _shown(back) == ["row 0", "row 1", "row 2"]  # the limit
        back.cycle_sort()  # by name
        back.cycle_sort(reverse=True)  # descending: the limit takes the first of that order
        assert _shown(back) == ["row 9", "row 8", "row 7"]
        back.flush()  # nothing new given: nothing rebuilt
        assert _shown(back) == ["row 9", "row 8", "row 7"]
