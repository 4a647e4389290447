"""The line under a panel's table: where the cursor is, what the filter keeps and hides,
how the rows are sorted — and, after ``/``, the filter being typed.

As in k9s or lazygit: ``/`` opens the filter, each key filters the rows as typed (every
word typed must appear in a row, any case; ↑ ↓ still move in the table), Enter keeps the
filter and goes back to the table, Esc clears it. The summary is words, not colours
(NO_COLOR).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Input, Static

from zync_tui.console.widgets.tables import LiveTable
from zync_tui.console.widgets.text import say


def summary(table: LiveTable) -> str:
    """How many rows, what the filter keeps and hides, where the cursor is, how the rows
    are sorted: ``/t01: 20 of 400 topic partitions (380 hidden) · row 5 · sorted by lag ▼``."""
    shown = table.listing
    count, order = len(shown.rows), shown.order
    if order.words:
        noun = _noun(shown.total, table.noun)
        text = f"/{order.filter}: {count:,} of {shown.total:,} {noun} ({shown.hidden:,} hidden)"
    else:
        text = f"{count:,} {_noun(count, table.noun)}"
    if count:
        text += f" · row {table.cursor_row + 1:,}"
    if order.sort is not None:
        arrow = "▼" if order.descending else "▲"
        text += f" · sorted by {table.columns[order.sort].label} {arrow}"
    if table.error:
        text += f" · ⚠ cannot show the rows: {table.error}"
    return text


class FilterInput(Input):
    """The filter as typed; the footer says what Enter and Esc do."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "keep filter"),
        Binding("escape", "clear", "clear filter"),
    ]

    def action_clear(self) -> None:
        line = self.parent
        if isinstance(line, FilterLine):
            line.cancel()


class FilterLine(Horizontal):
    """The summary of a table (:meth:`show`), or its filter being typed (:meth:`edit`)."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id, classes="filter-line")
        self.table: LiveTable | None = None
        self.editing = False

    def compose(self) -> ComposeResult:
        prompt = Static("/", classes="filter-prompt", markup=False)
        field = FilterInput(placeholder="words every row must hold", compact=True, select_on_focus=False)
        prompt.display = field.display = False  # hidden from the start: nothing to focus
        yield prompt
        yield field
        yield Static("", classes="filter-summary", markup=False)

    def _editing(self, editing: bool) -> None:
        self.editing = editing
        self.set_class(editing, "-editing")
        self.query_one(".filter-prompt").display = editing
        self.query_one(FilterInput).display = editing

    def show(self, table: LiveTable) -> None:
        """Say what ``table`` shows."""
        self.table = table
        say(self.query_one(".filter-summary", Static), summary(table), fixed=True)

    def edit(self, table: LiveTable) -> None:
        """Open the filter of ``table`` for typing."""
        self.show(table)
        field = self.query_one(FilterInput)
        field.value = table.order.filter
        self._editing(True)
        field.focus()
        field.cursor_position = len(field.value)

    def cancel(self) -> None:
        """Esc: no filter, back to the table."""
        if self.table is not None:
            self.table.set_filter("")
        self.done()

    def done(self) -> None:
        """Back to the table (which takes the keys without the focus)."""
        self._editing(False)
        self.screen.set_focus(None)
        if self.table is not None:
            self.show(self.table)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.editing and self.table is not None:
            self.table.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.done()


def _noun(count: int, noun: str) -> str:
    """``noun`` (a plural: "pending records") for ``count`` rows: "1 pending record"."""
    return noun[:-1] if count == 1 and noun.endswith("s") else noun
