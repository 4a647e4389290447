"""The six panels as tabs, and moving among them: which one shows, which table has the
focus, and the filter and sort keys of the table in view."""

from __future__ import annotations

from textual import on
from textual.widgets import TabbedContent

from zync_tui.console.widgets.records import RecordsPanel
from zync_tui.console.widgets.tables import LiveTable


class Panels(TabbedContent):
    """Topics, Loops, ETL, Pending, Expired and Log (the app composes the panes)."""

    def show(self, panel: str) -> None:
        """Bring ``panel`` to the front, its table built and focused."""
        self.active = panel
        self.focus_table(panel)

    def focus_table(self, panel: str) -> None:
        """Build the rows ``panel``'s table was given out of view, and focus it."""
        try:
            widget = self.query_one(f"#{panel}-panel")
            table = widget.query_one(LiveTable)
        except Exception:  # noqa: BLE001 - not mounted yet
            return
        if isinstance(widget, RecordsPanel):
            widget.flush()
        table.flush()
        table.focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane = event.pane.id if event.pane is not None else None
        if pane:
            self.focus_table(pane)

    def records_panel(self) -> RecordsPanel | None:
        """The Pending or Expired panel when it is in view."""
        if self.active in ("pending", "expired"):
            return self.query_one(f"#{self.active}-panel", RecordsPanel)
        return None

    def sort(self, reverse: bool = False) -> str:
        """Sort the table in view by its next column (``reverse``: flip the order); says how.
        Pending and Expired then give the table every match to sort, not the first ones."""
        widget = self.query_one(f"#{self.active}-panel")
        said = widget.query_one(LiveTable).cycle_sort(reverse)
        if isinstance(widget, RecordsPanel):
            widget.refill()
        return said
