"""The top line: what the console is attached to, and whether each part answers."""

from __future__ import annotations

from textual.widgets import Static

from zync_tui.console.widgets.text import say


class StatusBar(Static):
    """``zync demo · invoices │ Kafka ok · registry ok · lake ok │ READ-ONLY``, in words."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__("zync · starting…", markup=False, id=id)
        self.title = "zync"
        self.parts: dict[str, str] = {}
        self.read_only = False
        self.note = ""

    def set_part(self, name: str, state: str) -> None:
        self.parts[name] = state
        self._show()

    def set_title(self, title: str, read_only: bool) -> None:
        self.title = title
        self.read_only = read_only
        self._show()

    def set_note(self, note: str) -> None:
        self.note = note
        self._show()

    def _show(self) -> None:
        bits = [self.title]
        if self.parts:
            bits.append(" · ".join(f"{name} {state}" for name, state in self.parts.items()))
        if self.note:
            bits.append(self.note)
        if self.read_only:
            bits.append("READ-ONLY")
        say(self, " │ ".join(bits), fixed=True)
