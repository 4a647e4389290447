"""LiveTable and its listings: what a filter keeps, how a sort orders (unknown values
last), rows laid out only when drawn (cells made only when drawn, too, when a function), and a table out of view that takes the rows a poll
brought only when it comes into view."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widgets import TabbedContent, TabPane

from tests.console.conftest import until
from zync_tui.console.listing import Column, Order, Row, Source, prepare
from zync_tui.console.widgets.tables import LiveTable

pytestmark = pytest.mark.anyio
COLUMNS = [Column("name", "name"), Column("n", "n", align=">")]


def _rows(count: int) -> list[Row]:
    return [Row(f"k{i}", (f"row {i}", str(i)), (f"row {i}", i)) for i in range(count)]


def _names(rows: list[Row] | tuple[Row, ...]) -> list[str]:
    return [r.shown()[0] for r in rows]


def test_the_filter_keeps_rows_holding_every_word_in_any_case() -> None:
    rows = [Row("a", ("Invoices", "0"), ("Invoices", 0)), Row("b", ("InvoiceStatus", "1"), ("InvoiceStatus", 1))]
    listing = prepare(COLUMNS, Source.of(rows), Order(filter="invoice STATUS"))
    assert _names(listing.rows) == ["InvoiceStatus"]
    assert (listing.total, listing.hidden) == (2, 1)
    assert _names(prepare(COLUMNS, Source.of(rows), Order(filter="nothing")).rows) == []


def test_a_sort_orders_by_its_values_and_puts_unknown_values_last() -> None:
    rows = [
        Row("a", ("a", "-"), ("a", None)),
        Row("b", ("b", "10"), ("b", 10)),
        Row("c", ("c", "9"), ("c", 9)),
    ]
    up = prepare(COLUMNS, Source.of(rows), Order(sort=1))
    down = prepare(COLUMNS, Source.of(rows), Order(sort=1, descending=True))
    assert _names(up.rows) == ["c", "b", "a"]  # 9 before 10: numbers, not text
    assert _names(down.rows) == ["b", "c", "a"]
    assert up.header.startswith("name n ▲")
    assert down.line(0).endswith("10")  # right-aligned under its header


def test_rows_given_as_functions_are_laid_out_only_when_drawn() -> None:
    made: list[int] = []

    def cells(i: int) -> tuple[str, str]:
        made.append(i)
        return (f"row {i}", str(i))

    rows = [Row(f"k{i}", lambda i=i: cells(i), (i, i), f"row {i}") for i in range(1_000)]
    listing = prepare([Column("name", "name", 8), Column("n", "n", 4, ">")], Source.of(rows), Order(sort=1, descending=True))
    assert made == []  # sorted and measured without a cell made
    assert listing.line(0) == "row 999   999"
    assert made == [999]


def test_a_listing_lays_out_only_the_rows_drawn_and_as_the_general_layout_would() -> None:
    """Preparing 400 topic rows laid every line out (40 % of the preparer's time, on the
    interpreter lock the screen's thread paints with); now a row is laid out when drawn.
    Plain-ASCII cells are cut and padded as str: the same line as Rich's cell measures."""
    from rich.cells import set_cell_size

    columns = [Column("name", "name", 6), Column("n", "n", align=">"), Column("trend", "trend")]
    rows = [
        Row("a", ("short", "7", "▁▂█"), ("short", 7)),
        Row("b", ("a-much-longer-name", "1234567", "▁"), ("a-much-longer-name", 1234567)),
        Row("c", ("wide 表", "", ""), ("wide 表", 0)),
    ]
    listing = prepare(columns, Source.of(rows), Order())
    assert listing.lines == [None, None, None]
    assert listing.widths == (6, 7, 5)
    assert listing.line(1) == "a-much 1234567 ▁    "
    assert listing.lines[1] is not None
    assert listing.lines[0] is None
    assert listing.lines[2] is None

    def general(cells: tuple[str, ...]) -> str:  # the path for cells wider than a char
        parts = []
        for cell, column, width in zip(cells, columns, listing.widths, strict=True):
            if column.align == ">" and len(cell) < width:
                parts.append(" " * (width - len(cell)) + cell)
            else:
                parts.append(set_cell_size(cell, width))
        return " ".join(parts)

    for position, row in enumerate(rows[:2]):
        assert listing.line(position) == general(row.shown())
    assert listing.line(2) == "wide  " + " " + " " * 7 + " " + " " * 5  # 表 takes two cells: cut


class TwoTabs(App[None]):
    def compose(self) -> ComposeResult:
        with TabbedContent(initial="front"):
            with TabPane("front", id="front"):
                yield LiveTable(COLUMNS, id="front-table")
            with TabPane("back", id="back"):
                yield LiveTable(COLUMNS, id="back-table")


async def test_a_hidden_table_takes_its_rows_when_it_comes_into_view() -> None:
    app = TwoTabs()
    async with app.run_test(size=(60, 12)) as pilot:
        front = app.query_one("#front-table", LiveTable)
        back = app.query_one("#back-table", LiveTable)
        back.give(Source.of(_rows(10)))
        front.give(Source.of(_rows(2)))
        await until(pilot, lambda: front.row_count == 2, what="the front table's rows")
        await pilot.pause()
        # out of view: not prepared (each poll's rows of a hidden table would be laid out
        # for nobody; the preparer serves in order, so the back table's would be here)
        assert back.feed.ready is None
        assert back.row_count == 0
        app.query_one(TabbedContent).active = "back"
        await pilot.pause()
        back.reveal()  # the newest rows, asked for once the switch is painted
        await until(pilot, lambda: back.row_count == 10, what="the back table's rows")
        back.cycle_sort(reverse=True)  # by name, descending
        await until(pilot, lambda: back.listing.order.descending, what="the sorted listing")
        assert back.get_row_at(0) == ["row 9", "9"]
        back.set_filter("row 1")
        await until(pilot, lambda: back.row_count == 1, what="the filtered listing")
        assert back.highlighted_key() == "k1"
