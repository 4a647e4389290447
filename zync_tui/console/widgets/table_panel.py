"""A panel built around a table: ``/`` filters it and ``s`` sorts it, the line under it
(:class:`~zync_tui.console.widgets.filter_line.FilterLine`) says how, and the panel's
detail follows the row under the cursor.

A panel out of view keeps what a poll brought and shows it when it comes into view: its
tables ask for their listings then (zync_tui/console/widgets/tables.py), and its words
are written then (:meth:`TablePanel.present`) — nothing hidden is laid out or drawn."""

from __future__ import annotations

from textual.containers import Vertical

from zync_tui.console.widgets.filter_line import FilterLine
from zync_tui.console.widgets.tables import LiveTable


class TablePanel(Vertical):
    """Topics, Loops, ETL, Pending, Expired and Log are each one of these."""

    #: what a poll brought is not shown yet (the panel was out of view)
    _due = False

    def tables(self) -> list[LiveTable]:
        """The panel's tables in view."""
        return [t for t in self.query(LiveTable) if t.in_view()]

    def table(self) -> LiveTable:
        """The active table: the one the keys move, ``/`` filters and ``s`` sorts."""
        tables = self.tables() or list(self.query(LiveTable))
        return next((t for t in tables if t.active), tables[0])

    def next_table(self) -> None:
        """Make the panel's next table (in view) the active one (Tab)."""
        tables = self.tables()
        if len(tables) < 2:
            return
        current = self.table()
        following = tables[(tables.index(current) + 1) % len(tables)]
        for t in tables:
            t.active = t is following
        self._said()

    def filter_line(self) -> FilterLine:
        return self.query_one(FilterLine)

    def in_view(self) -> bool:
        return self.is_attached and all(node.display for node in self.ancestors_with_self if hasattr(node, "display"))

    def due(self) -> None:
        """A poll brought something to show: shown now if the panel is in view, else when
        it comes into view."""
        if self.in_view():
            self._due = False
            self.present()
        else:
            self._due = True

    def present(self) -> None:
        """Write the panel's words (notices, detail) from what the last poll brought."""

    def reveal(self) -> None:
        """The panel came into view: its tables ask for the listings they lack, its
        words are written."""
        for table in self.query(LiveTable):
            table.reveal()
        if self._due:
            self._due = False
            self.present()

    def changed(self, table: LiveTable) -> None:
        """``table`` shows new rows or its cursor moved: the detail follows (a panel with a
        detail line says what)."""

    def _said(self) -> None:
        self.filter_line().show(self.table())

    def on_live_table_swapped(self, event: LiveTable.Swapped) -> None:
        event.stop()
        self._said()
        self.changed(event.table)

    def on_live_table_highlighted(self, event: LiveTable.Highlighted) -> None:
        event.stop()
        self._said()
        self.changed(event.table)
