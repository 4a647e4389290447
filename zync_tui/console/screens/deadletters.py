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
from zync_tui.console.backend import Backend
from zync_tui.console.messages import DeadLettersLoaded
from zync_tui.console.screens.record import RecordScreen
from zync_tui.console.widgets.tables import LiveTable

COLUMNS = [("topic", "topic"), ("p", "p"), ("offset", "offset"), ("stage", "stage"), ("error", "error")]


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
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.letters: list[DeadLetter] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Dead letters (newest first) — Enter shows one, Esc closes", id="dead-title")
            yield Static("loading…", id="dead-notice", markup=False)
            yield LiveTable(COLUMNS, id="dead-table")

    def on_mount(self) -> None:
        self.query_one(LiveTable).focus()
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
        rows = []
        for d in self.letters:
            key = f"{d.pool}:{d.topic}:{d.partition}:{d.offset}"
            rows.append((key, (fmt.short(d.topic, 16), str(d.partition), fmt.num(d.offset),
                               d.stage or "-", fmt.short(d.error, 40)), None))
        self.query_one(LiveTable).set_rows(rows)

    def on_data_table_row_selected(self, event: LiveTable.RowSelected) -> None:
        event.stop()
        for d in self.letters:
            if f"{d.pool}:{d.topic}:{d.partition}:{d.offset}" == event.row_key.value:
                self.app.push_screen(RecordScreen(f"dead letter {d.topic}[{d.partition}]@{d.offset}", d.full_record()))
                return

    def action_sort(self) -> None:
        self.notify(self.query_one(LiveTable).cycle_sort())

    def action_reload(self) -> None:
        self.load()
