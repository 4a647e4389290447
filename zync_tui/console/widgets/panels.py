"""The six panels as tabs, and moving among them: which one shows, and the keys of the
table in view (the active table of the panel in view: tables take no focus)."""

from __future__ import annotations

from textual import on
from textual.widgets import TabbedContent, Tabs

from zync_tui.console.widgets.table_panel import TablePanel
from zync_tui.console.widgets.tables import LiveTable


class Panels(TabbedContent):
    """Topics, Loops, ETL, Pending, Expired and Log (the app composes the panes)."""

    def on_mount(self) -> None:
        # the keys go to the panel in view (the app routes them); tabs switch by 1 … 6
        self.query_one(Tabs).can_focus = False

    def show(self, panel: str) -> None:
        """Bring ``panel`` to the front, what it shows up to date in the same frame."""
        self.active = panel
        self.reveal(panel)

    def reveal(self, panel: str) -> None:
        """``panel`` came into view: its tables swap in the listings prepared meanwhile
        (away from the screen's thread), its words are written."""
        try:
            widget = self.query_one(f"#{panel}-panel", TablePanel)
        except Exception:  # noqa: BLE001 - not mounted yet
            return
        widget.reveal()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = event.pane.id if event.pane is not None else None
        if pane:
            self.reveal(pane)

    def current(self) -> TablePanel:
        """The panel in view."""
        return self.query_one(f"#{self.active}-panel", TablePanel)

    def table(self) -> LiveTable:
        """The table the keys move: the active one of the panel in view."""
        return self.current().table()

    def cursor(self, how: str, step: int) -> None:
        """Move the cursor of the table in view (``how``: move, page, edge, sideways)."""
        table = self.table()
        moves = {"move": table.move, "page": table.page, "edge": table.edge, "sideways": table.sideways}
        moves[how](step)

    def filter(self) -> None:
        """``/``: type the filter of the table in view."""
        panel = self.current()
        panel.filter_line().edit(panel.table())

    def clear_filter(self) -> None:
        table = self.table()
        if table.order.filter:
            table.set_filter("")

    def next_table(self, *, typing: bool) -> None:
        """Tab: back to the table from its filter, or to the panel's next table."""
        panel = self.current()
        if typing:
            panel.filter_line().done()
        else:
            panel.next_table()
