"""What a console table shows, prepared away from the screen's thread.

A poll brings a panel's rows as a :class:`Source` (made once, when first needed); the
operator's filter and sort are an :class:`Order`. :func:`prepare` turns both into a
:class:`Listing`: the rows that match, in order, the column widths measured, the header
written. It runs in the console's :class:`Preparer` thread, never on the event loop, so a
poll of 400 topics or a filter typed over 40,000 pending records never holds a key back;
the table only swaps the listing in and draws the lines in view
(zync_tui/console/widgets/tables.py). A row is laid out as the line the table draws when
it is first drawn: a screenful of a 400-row listing, not 400 lines (the preparer shares
the interpreter lock with the screen's thread; laying every row out took 40 % of its
time). Nothing here knows Textual.

Rows whose cells are a function (Pending and Expired: thousands of records, a screenful
seen) are also made only when drawn; their columns take the width the column declares.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeAlias

from rich.cells import cell_len, set_cell_size

#: A value a column sorts by (None sorts last, whichever the direction).
SortValue: TypeAlias = str | int | float | None
#: A row's cells, or the function that makes them (called only for a row drawn).
Cells: TypeAlias = tuple[str, ...] | Callable[[], tuple[str, ...]]
#: Columns between two cells.
GAP = 1


class Column(NamedTuple):
    """A column: its key, its header, its widest cell (None: as wide as its cells) and
    how its cells align (``>``: numbers, right)."""

    key: str
    label: str
    width: int | None = None
    align: Literal["<", ">"] = "<"


class Row(NamedTuple):
    """A row: its key (stays under the cursor across polls), its cells, the values it
    sorts by (one per column) and the text the filter searches (None: its cells)."""

    key: str
    cells: Cells
    sort: tuple[SortValue, ...]
    text: str | None = None

    def shown(self) -> tuple[str, ...]:
        return self.cells() if callable(self.cells) else self.cells

    def haystack(self) -> str:
        return (self.text if self.text is not None else " ".join(self.shown())).lower()


@dataclass(frozen=True)
class Order:
    """The operator's view of a table: a filter (every word must appear in a row, any
    case) and a sort column (None: the order the engine gives), ascending or not."""

    filter: str = ""
    sort: int | None = None
    descending: bool = False

    @property
    def words(self) -> list[str]:
        return self.filter.lower().split()


class Source:
    """The rows one poll brought, made by ``make`` the first time they are asked for
    (in the preparer's thread), then kept."""

    def __init__(self, make: Callable[[], Sequence[Row]]) -> None:
        self._make = make
        self._rows: Sequence[Row] | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, rows: Sequence[Row]) -> Source:
        source = cls(lambda: rows)
        source._rows = rows
        return source

    def rows(self) -> Sequence[Row]:
        with self._lock:
            if self._rows is None:
                self._rows = self._make()
                self._make = _made
            return self._rows


def _made() -> Sequence[Row]:
    return ()


EMPTY = Source.of(())


@dataclass
class Listing:
    """A table's rows as shown: matching its order's filter, in its order, laid out."""

    columns: Sequence[Column]
    source: Source
    order: Order
    rows: Sequence[Row]
    #: rows the source holds, shown or not
    total: int
    widths: tuple[int, ...]
    header: str
    #: each row's line as drawn (None: not drawn yet, laid out when it is)
    lines: list[str | None]
    #: each row key's position
    index: dict[str, int] = field(repr=False)

    @property
    def width(self) -> int:
        return cell_len(self.header)

    @property
    def hidden(self) -> int:
        return self.total - len(self.rows)

    def line(self, position: int) -> str:
        """Row ``position``'s line (laid out now if it was not)."""
        line = self.lines[position]
        if line is None:
            line = self.lines[position] = layout(self.rows[position].shown(), self.columns, self.widths)
        return line


def layout(cells: Sequence[str], columns: Sequence[Column], widths: Sequence[int]) -> str:
    """One line: each cell cut or padded to its column's width, ``GAP`` apart."""
    parts = []
    for cell, column, width in zip(cells, columns, widths, strict=False):
        if cell.isascii():  # a character a cell: cut and padded as a str
            cut = cell[:width]
            parts.append(cut.rjust(width) if column.align == ">" else cut.ljust(width))
        elif column.align == ">" and cell_len(cell) < width:
            parts.append(" " * (width - cell_len(cell)) + cell)
        else:
            parts.append(set_cell_size(cell, width))
    return (" " * GAP).join(parts)


def _widest(cells: list[str]) -> int:
    """The widest of ``cells``, in terminal cells."""
    if not cells:
        return 0
    return max(map(len if "".join(cells).isascii() else cell_len, cells))


def _sort_key(index: int) -> Callable[[Row], tuple[int, float | str]]:
    def key(row: Row) -> tuple[int, float | str]:
        value = row.sort[index] if index < len(row.sort) else None
        if value is None:
            return (1, 0)
        return (0, value if isinstance(value, int | float) else str(value).lower())

    return key


def prepare(columns: Sequence[Column], source: Source, order: Order) -> Listing:
    """``source``'s rows as ``order`` shows them (see the module's docstring)."""
    given = source.rows()
    words = order.words
    rows = [r for r in given if all(w in r.haystack() for w in words)] if words else list(given)
    if order.sort is not None and 0 <= order.sort < len(columns):
        key = _sort_key(order.sort)
        known = [r for r in rows if key(r)[0] == 0]
        unknown = [r for r in rows if key(r)[0] == 1]
        known.sort(key=key, reverse=order.descending)
        rows = known + unknown  # None last either way
    labels = [
        c.label + ((" ▼" if order.descending else " ▲") if i == order.sort else "")
        for i, c in enumerate(columns)
    ]
    concrete = [r.cells for r in rows if isinstance(r.cells, tuple)]
    lazy = len(concrete) < len(rows)
    widths = []
    for i, (column, label) in enumerate(zip(columns, labels, strict=True)):
        widest = _widest([cells[i] for cells in concrete if i < len(cells)])
        if column.width is not None:
            widest = column.width if lazy else min(widest, column.width)
        widths.append(max(widest, cell_len(label)))
    header = layout(labels, [c._replace(align="<") for c in columns], widths)
    lines: list[str | None] = [None] * len(rows)  # laid out when drawn (Listing.line)
    return Listing(
        columns=columns, source=source, order=order, rows=rows, total=len(given),
        widths=tuple(widths), header=header, lines=lines,
        index={r.key: i for i, r in enumerate(rows)},
    )  # fmt: skip


class Feed:
    """What one table shows and what it wants shown: the listing shown, the source and
    order wanted, and a listing that arrived while the table was out of view. Used from
    the table's (the event loop's) thread; the listings are made in :data:`PREPARER`'s."""

    def __init__(self, columns: Sequence[Column], deliver: Callable[[Listing | Exception], object]) -> None:
        self.columns = list(columns)
        self.source: Source = EMPTY
        self.order = Order()
        self.shown = prepare(self.columns, EMPTY, self.order)
        #: a listing prepared while the table was out of view, to swap in when it shows
        self.ready: Listing | None = None
        self._deliver = deliver
        self._asked: tuple[Source, Order] | None = None

    def wanted(self, listing: Listing) -> bool:
        """Whether ``listing`` is of the source and order wanted now."""
        return listing.source is self.source and listing.order == self.order

    def stale(self) -> bool:
        return not self.wanted(self.shown)

    def want(self) -> None:
        """Ask the preparer for the listing wanted, unless it is shown or asked for."""
        if not self.stale() or self._asked == (self.source, self.order):
            return
        source, order, columns = self.source, self.order, self.columns
        self._asked = (source, order)
        PREPARER.submit(self, lambda: prepare(columns, source, order), self._deliver)

    def failed(self) -> None:
        """The preparer could not make the listing asked for: it may be asked again."""
        self._asked = None

    def show(self, listing: Listing) -> None:
        self.shown = listing
        self.ready = None
        self._asked = None

    def now(self) -> Listing:
        """The listing wanted, prepared here and now (tests and scripts)."""
        return self.shown if not self.stale() else prepare(self.columns, self.source, self.order)


class Preparer:
    """One thread that prepares listings, the newest request per table first served and
    older ones dropped: typing a filter over a large table prepares what the last key
    asked for, not every key's."""

    def __init__(self) -> None:
        self._wanted: dict[int, tuple[Callable[[], Listing], Callable[[Listing | Exception], object]]] = {}
        self._order: list[int] = []
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(
        self, target: object, job: Callable[[], Listing], deliver: Callable[[Listing | Exception], object]
    ) -> None:
        """Prepare ``job()`` and hand it, or what it raised, to ``deliver`` (from the
        preparer's thread); a request for the same ``target`` still waiting is replaced."""
        with self._ready:
            key = id(target)
            if key not in self._wanted:
                self._order.append(key)
            self._wanted[key] = (job, deliver)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="zync-console-listings", daemon=True)
                self._thread.start()
            self._ready.notify()

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._order:
                    self._ready.wait()
                key = self._order.pop(0)
                job, deliver = self._wanted.pop(key)
            result: Listing | Exception
            try:
                result = job()
            except Exception as exc:  # noqa: BLE001 - the table says it
                result = exc
            try:
                deliver(result)
            except Exception:  # noqa: BLE001 - the table's app has closed: nobody to tell
                continue


#: The console's preparer (one thread for every table of every screen).
PREPARER = Preparer()
