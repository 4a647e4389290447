"""Help (``?``): every key of the console, in one list."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 76; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; padding: 0 1; background: $surface;
    }
    """
    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("j,down", "scroll_down", "Down", show=False),
        Binding("k,up", "scroll_up", "Up", show=False),
    ]

    def __init__(self, keys: Sequence[tuple[str, str, str]], notes: str = "") -> None:
        super().__init__()
        self.keys = keys
        self.notes = notes

    def compose(self) -> ComposeResult:
        lines = ["zync console — keys (Esc closes; Ctrl+P finds any action by name)", ""]
        section = None
        for where, key, what in self.keys:
            if where != section:
                if section is not None:
                    lines.append("")
                lines.append(f"{where}:")
                section = where
            lines.append(f"  {key:<11} {what}")
        if self.notes:
            lines += ["", self.notes]
        with VerticalScroll():
            yield Static("\n".join(lines), markup=False, id="help-text")

    def action_scroll_down(self) -> None:
        self.query_one(VerticalScroll).scroll_down(animate=False)

    def action_scroll_up(self) -> None:
        self.query_one(VerticalScroll).scroll_up(animate=False)
