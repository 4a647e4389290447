"""A DataTable that refreshes in place (cursor and scroll kept) and sorts by keyboard.

Building a table's rows is the console's heaviest work on its event loop (every cell is
measured), and the polls bring rows every second: a table out of view keeps the rows it
was given and builds them when it comes into view (:meth:`LiveTable.flush`), and a table
shows at most ``limit`` rows (after sorting), so a key never waits behind thousands of
rows nobody sees. A row's cells may be given as a function, called only for the rows
shown (a panel of 40,000 pending records formats 500 of them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from rich.text import Text
from textual.widgets import DataTable

#: A value a column sorts by (None sorts last).
SortValue: TypeAlias = str | int | float | None
#: A row's cells, or the function that makes them (called only if the row is shown).
Cells: TypeAlias = Sequence[str] | Callable[[], Sequence[str]]
#: One row: its key, its cells, and the values it sorts by (None: the cells).
Row: TypeAlias = tuple[str, Cells, Sequence[SortValue] | None]
_Given: TypeAlias = tuple[str, Cells, tuple[SortValue, ...] | None]


def _cells(cells: Cells) -> Sequence[str]:
    return cells() if callable(cells) else cells


def _plain(cell: str) -> Text:
    """Strings are shown as they are: ``[f]`` or ``Invoices[0]`` is not markup."""
    return Text(cell)


class LiveTable(DataTable[Text]):
    """Rows are replaced on every poll; the highlighted row stays where it was."""

    DEFAULT_CSS = """
    LiveTable { height: 1fr; }
    """

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        *,
        follow_top: bool = False,
        limit: int | None = None,
        id: str | None = None,  # noqa: A002 - Textual's name
    ) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, id=id)
        #: newest-first tables: a cursor on the first row stays on the (new) first row
        self.follow_top = follow_top
        #: the most rows shown (None: all), the first ones in the table's order
        self.limit = limit
        self._columns = list(columns)
        self.sort_column: int | None = None
        self.sort_reverse = False
        self._rows: list[_Given] = []
        #: rows given while out of view, not built yet
        self._stale = False

    def on_mount(self) -> None:
        for key, label in self._columns:
            self.add_column(label, key=key)

    def set_rows(self, rows: Iterable[Row]) -> None:
        """``rows``: (row key, cells, sort values or None to sort by the cells)."""
        self._rows = [
            (key, cells, tuple(sort) if sort is not None else None) for key, cells, sort in rows
        ]
        if self.in_view():
            self._render_rows()
        else:
            self._stale = True

    @property
    def total_rows(self) -> int:
        """Rows given, shown or not (:attr:`limit`)."""
        return len(self._rows)

    def flush(self) -> None:
        """Build the rows given while the table was out of view (it is in view now)."""
        if self._stale:
            self._render_rows()

    def in_view(self) -> bool:
        """False inside a hidden tab (its pane has ``display: none``)."""
        return all(node.display for node in self.ancestors_with_self if hasattr(node, "display"))

    def _render_rows(self) -> None:
        self._stale = False
        rows = list(self._rows)
        if self.sort_column is not None:
            index = self.sort_column

            def sort_key(row: _Given) -> tuple[int, float | str]:
                value = row[2][index] if row[2] is not None else _cells(row[1])[index]
                if value is None:
                    return (1, 0)
                return (0, value if isinstance(value, int | float) else str(value).lower())

            rows.sort(key=sort_key, reverse=self.sort_reverse)
        if self.limit is not None:
            rows = rows[: self.limit]
        shown = [(key, tuple(_plain(c) for c in _cells(cells))) for key, cells, _ in rows]
        current = None
        if self.row_count and 0 <= self.cursor_row < self.row_count:
            try:
                current = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
            except Exception:  # noqa: BLE001 - no cursor yet
                current = None
        keys = [key for key, _ in shown]
        existing = [row_key.value for row_key in self.rows]
        if keys == existing:
            for key, texts in shown:
                for (column_key, _), value in zip(self._columns, texts, strict=False):
                    if self.get_cell(key, column_key) != value:
                        self.update_cell(key, column_key, value, update_width=True)
            return
        scroll_y = self.scroll_y
        at_top = self.follow_top and self.cursor_row <= 0
        self.clear()
        for key, texts in shown:
            self.add_row(*texts, key=key)
        if at_top:
            self.move_cursor(row=0, animate=False, scroll=False)
            self.scroll_to(y=0, animate=False, immediate=True)
            return
        if current in keys:
            self.move_cursor(row=keys.index(current), animate=False, scroll=False)
        self.scroll_to(y=scroll_y, animate=False, immediate=True)

    def cycle_sort(self, reverse: bool = False) -> str:
        """Sort by the next column (``reverse``: flip the order instead)."""
        if reverse:
            if self.sort_column is None:
                self.sort_column = 0
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column = 0 if self.sort_column is None else (self.sort_column + 1) % len(self._columns)
            self.sort_reverse = False
        self._render_rows()
        label = self._columns[self.sort_column][1]
        return f"sorted by {label}" + (" (descending)" if self.sort_reverse else "")

    def highlighted_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # noqa: BLE001
            return None
