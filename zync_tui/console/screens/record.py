"""A record's full record as pretty JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


def pretty(data: Mapping[str, object]) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str, ensure_ascii=False)


class RecordScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    RecordScreen { align: center middle; }
    RecordScreen > VerticalScroll {
        width: 100%; height: 100%; border: round $primary; background: $surface; padding: 0 1;
    }
    RecordScreen #record-title { text-style: bold; }
    """
    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    def __init__(self, title: str, data: Mapping[str, object]) -> None:
        super().__init__()
        self.title_text = title
        self.data = data

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="record-scroll"):
            yield Static(self.title_text, markup=False, id="record-title")
            yield Static(Text(pretty(self.data)), id="record-json")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_scroll_down(self) -> None:
        self.query_one(VerticalScroll).scroll_down(animate=False)

    def action_scroll_up(self) -> None:
        self.query_one(VerticalScroll).scroll_up(animate=False)
