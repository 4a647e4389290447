"""The console's main screen (the app's first screen, under any modal one): what it is
made of — the status bar, the six panels as tabs, the keys footer —, how it looks before
the engine is up, and where its widgets are while a modal screen is on top of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, overload

from textual.app import App, ComposeResult
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import TabPane

from zync_tui.console.keys import PANEL_TITLES
from zync_tui.console.views import Backend, LogEntry
from zync_tui.console.widgets.etl import EtlPanel
from zync_tui.console.widgets.footer import KeysFooter
from zync_tui.console.widgets.log import LogPanel
from zync_tui.console.widgets.loops import LoopsPanel
from zync_tui.console.widgets.panels import Panels
from zync_tui.console.widgets.records import RecordsPanel
from zync_tui.console.widgets.status import StatusBar
from zync_tui.console.widgets.topics import TopicsPanel

W = TypeVar("W", bound=Widget)


class ScreenWidgets(Protocol):
    """Finds a widget of the console's main screen by its type (or selector and type)."""

    @overload
    def __call__(self, selector: type[W]) -> W: ...
    @overload
    def __call__(self, selector: str, expect_type: type[W]) -> W: ...


class MainLayout:
    """The main screen's widgets: composed, set up, found."""

    def __init__(self, app: App[None], clock: Callable[[], float]) -> None:
        self.app = app
        self.clock = clock

    def compose(self) -> ComposeResult:
        """The main screen's widgets (yielded from the app's ``compose``)."""
        yield StatusBar(id="status")
        with Panels(id="panels", initial="topics"):
            with TabPane(PANEL_TITLES["topics"], id="topics"):
                yield TopicsPanel(id="topics-panel")
            with TabPane(PANEL_TITLES["loops"], id="loops"):
                yield LoopsPanel(id="loops-panel")
            with TabPane(PANEL_TITLES["etl"], id="etl"):
                yield EtlPanel(id="etl-panel")
            with TabPane(PANEL_TITLES["pending"], id="pending"):
                yield RecordsPanel("pending", id="pending-panel")
            with TabPane(PANEL_TITLES["expired"], id="expired"):
                yield RecordsPanel("expired", id="expired-panel")
            with TabPane(PANEL_TITLES["log"], id="log"):
                yield LogPanel(id="log-panel")
        yield KeysFooter(compact=True, show_command_palette=False)

    @overload
    def find(self, selector: type[W]) -> W: ...
    @overload
    def find(self, selector: str, expect_type: type[W]) -> W: ...

    def find(self, selector: str | type[W], expect_type: type[W] | None = None) -> Widget:
        """A widget of the main screen (also while a modal screen is on top)."""
        if not self.app.screen_stack:
            raise NoMatches(f"no screen: {selector}")
        base = self.app.screen_stack[0]
        if isinstance(selector, str) and expect_type is not None:
            return base.query_one(selector, expect_type)
        return base.query_one(selector)

    def mounted(self, backend: Backend) -> None:
        """How the screen looks while the engine starts."""
        status = self.find(StatusBar)
        status.set_title(backend.title, backend.read_only)
        status.set_note("starting the engine…")
        self.find(LoopsPanel).set_read_only(backend.read_only, getattr(backend, "read_only_reason", None))
        self.find(Panels).reveal("topics")

    def engine_started(self, backend: Backend, note: str) -> None:
        status = self.find(StatusBar)
        status.set_title(backend.title, backend.read_only)
        status.set_note(note)

    def engine_failed(self, error: str) -> None:
        self.find(StatusBar).set_note(f"engine failed to start: {error}")
        self.log_error("console", f"engine failed to start: {error}")

    def log_error(self, source: str, message: str) -> None:
        """An error of the console's own, as a line of the Log panel."""
        self.find(LogPanel).add([LogEntry(self.clock(), "ERROR", source, message)])
