"""Dead letters: records from-kafka could not decode or shape, browsed from the Topics panel."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from engine.api import DeadLetter
from zync_tui.console import format as fmt
from zync_tui.console.listing import Column, Row, Source
from zync_tui.console.messages import DeadLettersLoaded
from zync_tui.console.screens.record import RecordScreen
from zync_tui.console.views import Backend
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [
    Column("topic", "topic", 16),
    Column("p", "p", align=">"),
    Column("offset", "offset", align=">"),
    Column("stage", "stage"),
    Column("error", "error", 40),
]


def rows(letters: list[DeadLetter]) -> list[Row]:
    return [
        Row(
            f"{d.pool}:{d.topic}:{d.partition}:{d.offset}",
            (fmt.middle(d.topic, 16), str(d.partition), fmt.num(d.offset), d.stage or "-", fmt.short(d.error, 40)),
            (d.topic, d.partition, d.offset, d.stage, d.error),
        )
        for d in letters
    ]


class DeadLettersScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    DeadLettersScreen { align: center middle; }
    DeadLettersScreen > Vertical {
        width: 100%; height: 100%; border: round $primary; background: $surface;
    }
    DeadLettersScreen #dead-title { text-style: bold; padding: 0 1; }
    DeadLettersScreen #dead-notice { padding: 0 1; height: auto; }
    """
    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("s", "sort", "Sort"),
        Binding("r", "reload", "Reload"),
        # the table takes no focus (zync_tui/console/widgets/tables.py): its keys, here
        Binding("up,k", "cursor('move', -1)", "Up", show=False),
        Binding("down,j", "cursor('move', 1)", "Down", show=False),
        Binding("pageup", "cursor('page', -1)", "Page up", show=False),
        Binding("pagedown", "cursor('page', 1)", "Page down", show=False),
        Binding("home,g", "cursor('edge', 0)", "First", show=False),
        Binding("end,G", "cursor('edge', 1)", "Last", show=False),
        Binding("enter", "open", "Show", show=False),
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.letters: list[DeadLetter] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Dead letters (newest first) — Enter shows one, Esc closes", id="dead-title")
            yield Static("loading…", id="dead-notice", markup=False)
            yield LiveTable(COLUMNS, noun="dead letters", id="dead-table")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="dead-letters")
    def load(self) -> None:
        try:
            letters = self.backend.dead_letters()
        except Exception as exc:  # noqa: BLE001 - shown in words
            self.post_message(DeadLettersLoaded([], error=str(exc).splitlines()[0]))
            return
        self.post_message(DeadLettersLoaded(letters))

    def on_dead_letters_loaded(self, message: DeadLettersLoaded) -> None:
        self.letters = message.letters
        notice = self.query_one("#dead-notice", Static)
        if message.error:
            notice.update(f"⚠ cannot read dead letters: {message.error}")
        else:
            notice.update(f"{len(self.letters)} dead letters" if self.letters else "no dead letters: every record decoded")
        letters = self.letters
        self.query_one(LiveTable).give(Source(lambda: rows(letters)))

    def on_live_table_selected(self, event: LiveTable.Selected) -> None:
        event.stop()
        for d in self.letters:
            if f"{d.pool}:{d.topic}:{d.partition}:{d.offset}" == event.key:
                self.app.push_screen(RecordScreen(f"dead letter {d.topic}[{d.partition}]@{d.offset}", d.full_record()))
                return

    def action_sort(self) -> None:
        self.query_one(LiveTable).cycle_sort()

    def action_cursor(self, how: str, step: int) -> None:
        table = self.query_one(LiveTable)
        {"move": table.move, "page": table.page, "edge": table.edge}[how](step)

    def action_open(self) -> None:
        self.query_one(LiveTable).select()

    def action_reload(self) -> None:
        self.load()
