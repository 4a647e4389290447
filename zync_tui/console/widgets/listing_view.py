"""A :class:`~zync_tui.console.listing.Listing` on screen: its header and rows drawn with
Textual's line API, and a cursor row.

Drawing costs the lines in view, never the rows: one strip per line, already laid out
(the listing lays a row out the first time it is drawn), so a table of 40,000 rows paints
as fast as one of 4. The cursor row is drawn brighter while the table is active (the one
the keys move), dimmer otherwise, and is kept in view. What is drawn, and when it
changes, is :class:`~zync_tui.console.widgets.tables.LiveTable`'s.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from zync_tui.console.listing import Listing


class ListingView(ScrollView, can_focus=False):
    """A listing with a header line and a cursor row (see the module's docstring)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "listing-view--header",
        "listing-view--cursor",
        "listing-view--cursor-idle",
    }
    DEFAULT_CSS = """
    ListingView {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .listing-view--header { text-style: bold; background: $panel; }
        & > .listing-view--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: bold;
        }
        & > .listing-view--cursor-idle {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
        }
        &:nocolor > .listing-view--cursor { text-style: reverse bold; }
        &:nocolor > .listing-view--cursor-idle { text-style: underline; }
    }
    """

    def __init__(self, listing: Listing, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        #: the listing drawn
        self.listing = listing
        self.cursor_row = 0
        self._active = True
        #: the styles of one paint (:meth:`render_lines`)
        self._styles: tuple[Style, Style, Style] | None = None

    def show_listing(self, listing: Listing, cursor_row: int) -> None:
        """Draw ``listing`` from now on, the cursor on ``cursor_row`` (kept within its
        rows, and in view)."""
        self.listing = listing
        rows = len(listing.rows)
        self.cursor_row = max(0, min(rows - 1, cursor_row))
        size = Size(listing.width + 2, rows + 1)
        if self.virtual_size != size:
            self.virtual_size = size
        self._keep_cursor_in_view()
        self.refresh()

    # -- drawing ------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether the keys move this table's cursor (its panel's other tables': not)."""
        return self._active

    @active.setter
    def active(self, active: bool) -> None:
        if active != self._active:
            self._active = active
            self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        base = self.rich_style  # the same for every line of one paint: looked up once
        cursor = "listing-view--cursor" if self._active else "listing-view--cursor-idle"
        self._styles = (
            base,
            base + self.get_component_rich_style("listing-view--header"),
            base + self.get_component_rich_style(cursor),
        )
        try:
            return super().render_lines(crop)
        finally:
            self._styles = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base, header, cursor = self._styles or (self.rich_style,) * 3
        if y == 0:
            return self._strip(self.listing.header, header, scroll_x, width)
        position = y - 1 + scroll_y
        if position >= len(self.listing.rows):
            return Strip.blank(width, base)
        style = cursor if position == self.cursor_row else base
        return self._strip(self.listing.line(position), style, scroll_x, width)

    @staticmethod
    def _strip(text: str, style: Style, scroll_x: int, width: int) -> Strip:
        return Strip([Segment(f" {text} ", style)]).crop_extend(scroll_x, scroll_x + width, style)

    # -- the cursor in view ---------------------------------------------------------------

    @property
    def _page(self) -> int:
        """Rows in view (under the header)."""
        return max(1, self.scrollable_content_region.height - 1)

    def _keep_cursor_in_view(self) -> None:
        top = round(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, force=True)
        elif self.cursor_row >= top + self._page:
            self.scroll_to(y=self.cursor_row - self._page + 1, animate=False, force=True)

    # -- reading it (the panels, tests and scripts) ----------------------------------------

    def highlighted_key(self) -> str | None:
        rows = self.listing.rows
        return rows[self.cursor_row].key if 0 <= self.cursor_row < len(rows) else None

    @property
    def row_count(self) -> int:
        """Rows shown (those the filter keeps)."""
        return len(self.listing.rows)

    def get_row_at(self, position: int) -> list[str]:
        return list(self.listing.rows[position].shown())
