"""The console's tables: hundreds of rows (a whole database's topics), kept current every
second, filtered and sorted by keyboard, at the cost of the lines in view.

A :class:`LiveTable` is given each poll's rows as a :class:`~zync_tui.console.listing.Source`
and its operator's filter and sort as an :class:`~zync_tui.console.listing.Order`; the
console's preparer thread makes the :class:`~zync_tui.console.listing.Listing` (rows
matched, sorted, laid out, measured) as soon as either changes while the table is in view,
and the table swaps it in when it arrives (several within a frame: the newest). A table
out of view only keeps the newest poll's rows: at 200 topics, laying out every hidden
panel's rows each second took the preparer a share of the interpreter lock that keys
waited on. When it comes into view (:meth:`LiveTable.reveal`) its panel is drawn at once
with what it showed before, and the newest rows are prepared after that frame is painted
and swapped in a moment later; a listing that arrived after the table was hidden is
swapped in with its panel. A panel key does no table work, and nothing out of view is
laid out or drawn. Drawing is Textual's line API, one line per row in view
(:class:`~zync_tui.console.widgets.listing_view.ListingView`), so a key costs the same
with 4 rows or 40,000. The row under the cursor stays under it across polls (by its key).

A table never takes the focus: moving among panels would then restyle two tables (and
their scroll bars) and paint the screen once more at every key. The console routes its
keys to the table a panel has active instead (zync_tui/console/keys.py: ↑ ↓ or k j, PgUp
PgDn, Home End or g G, ← →, Enter), and the active table draws its cursor brighter.
A click moves the cursor; a click on a header sorts by that column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from textual import events, on
from textual.message import Message

from zync_tui.console.listing import Column, Feed, Listing, Order, Source
from zync_tui.console.widgets.listing_view import ListingView

#: Columns a ← or → scrolls.
SIDEWAYS = 8


class LiveTable(ListingView, can_focus=False):
    """A table of rows replaced on every poll (see the module's docstring); how it is
    drawn is :class:`~zync_tui.console.widgets.listing_view.ListingView`'s."""

    class Highlighted(Message):
        """The cursor is on another row (``key``: None when the table is empty)."""

        def __init__(self, table: LiveTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

    class Selected(Message):
        """Enter (or a second click) on the row ``key``."""

        def __init__(self, table: LiveTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

    class Swapped(Message):
        """The table shows another listing (new rows, or another filter or sort)."""

        def __init__(self, table: LiveTable) -> None:
            super().__init__()
            self.table = table

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LiveTable.Swapped) and message.table is self.table

    class _Prepared(Message):
        """A listing from the preparer's thread (or why it could not be made)."""

        def __init__(self, result: Listing | Exception) -> None:
            super().__init__()
            self.result = result

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LiveTable._Prepared)

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        noun: str = "rows",
        follow_top: bool = False,
        id: str | None = None,  # noqa: A002 - Textual's name
    ) -> None:
        self.columns = list(columns)
        self.feed = Feed(self.columns, lambda result: self.post_message(self._Prepared(result)))
        super().__init__(self.feed.shown, id=id)
        #: what the rows are, for the line under the table ("topic partitions")
        self.noun = noun
        #: newest-first tables: a cursor on the first row stays on the (new) first row
        self.follow_top = follow_top
        #: why the last listing could not be made (None: it was)
        self.error: str | None = None

    # -- what is shown ----------------------------------------------------------------

    @property
    def order(self) -> Order:
        return self.feed.order

    def give(self, source: Source) -> None:
        """A poll's rows: prepared at once when the table is in view; a hidden table's when
        it comes into view (:meth:`reveal`), the newest poll's only."""
        self.feed.source = source
        if self.in_view():
            self.feed.want()

    def reorder(self, order: Order) -> None:
        """Another filter or sort."""
        if order != self.feed.order:
            self.feed.order = order
            self.feed.want()

    def reveal(self) -> None:
        """The table came into view: the listing prepared meanwhile is swapped in now, and
        the newest poll's rows are asked for once the screen has been painted (the switch
        is drawn at once with what was shown, the new rows a moment later)."""
        ready = self.feed.ready
        if ready is not None and self.feed.wanted(ready):
            self._swap(ready)
        self.call_after_refresh(self.feed.want)

    def flush(self) -> None:
        """Bring the listing up to date here and now, in view or not (tests and scripts:
        the console itself never prepares on its event loop)."""
        if self.feed.stale():
            self._swap(self.feed.now())

    def in_view(self) -> bool:
        """False inside a hidden tab or section (an ancestor with ``display: none``)."""
        return self.is_attached and all(node.display for node in self.ancestors_with_self if hasattr(node, "display"))

    @on(_Prepared)
    def _prepared(self, message: _Prepared) -> None:
        message.stop()
        result = message.result
        if isinstance(result, Exception):
            self.feed.failed()
            self.error = f"{type(result).__name__}: {result}"
            self.post_message(self.Swapped(self))
            return
        self.error = None
        if not self.feed.wanted(result):
            return  # a newer listing is on its way
        if self.in_view():
            self._swap(result)
        else:
            self.feed.ready = result

    def _swap(self, listing: Listing) -> None:
        before = self.highlighted_key()
        self.feed.show(listing)
        position = listing.index.get(before) if before is not None else None
        if self.follow_top and self.cursor_row == 0:
            position = 0
        self.show_listing(listing, self.cursor_row if position is None else position)
        self.post_message(self.Swapped(self))
        if self.highlighted_key() != before:
            self.post_message(self.Highlighted(self, self.highlighted_key()))

    # -- the cursor ---------------------------------------------------------------------

    def move_to(self, row: int) -> None:
        """Put the cursor on row ``row`` (kept within the rows), in view."""
        row = max(0, min(len(self.listing.rows) - 1, row))
        if row != self.cursor_row:
            self.cursor_row = row
            self.refresh()
            self.post_message(self.Highlighted(self, self.highlighted_key()))
        self._keep_cursor_in_view()

    def move(self, rows: int) -> None:
        self.move_to(self.cursor_row + rows)

    def page(self, pages: int) -> None:
        self.move_to(self.cursor_row + pages * self._page)

    def edge(self, end: int) -> None:
        self.move_to(len(self.listing.rows) - 1 if end else 0)

    def sideways(self, step: int) -> None:
        self.scroll_to(x=max(0, self.scroll_x + step * SIDEWAYS), animate=False, force=True)

    def select(self) -> None:
        key = self.highlighted_key()
        if key is not None:
            self.post_message(self.Selected(self, key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            self._sort_by_header(offset.x + round(self.scroll_x) - 1)
            return
        row = offset.y - 1 + round(self.scroll_y)
        if row < len(self.listing.rows):
            again = row == self.cursor_row
            self.move_to(row)
            if again:
                self.select()

    def _sort_by_header(self, x: int) -> None:
        left = 0
        for index, width in enumerate(self.listing.widths):
            if left <= x < left + width + 1:
                descending = self.order.sort == index and not self.order.descending
                self.reorder(replace(self.order, sort=index, descending=descending))
                return
            left += width + 1

    # -- filter and sort -----------------------------------------------------------------

    def set_filter(self, text: str) -> None:
        self.reorder(replace(self.order, filter=text.strip()))

    def cycle_sort(self, reverse: bool = False) -> None:
        """Sort by the next column, then none (the engine's order) again; ``reverse``:
        flip the direction instead."""
        sort, descending = self.order.sort, self.order.descending
        if reverse:
            sort, descending = (0 if sort is None else sort), not descending
        else:
            sort = 0 if sort is None else (None if sort + 1 >= len(self.columns) else sort + 1)
            descending = False
        self.reorder(replace(self.order, sort=sort, descending=descending))
