"""Every key of the console, in one table: the help screen lists it, and the app's key
bindings are made from it (so the two never disagree)."""

from __future__ import annotations

from typing import NamedTuple

from textual.binding import Binding, BindingType

PANELS = ("topics", "loops", "etl", "pending", "expired", "log")
PANEL_TITLES = {
    "topics": "1 Topics",
    "loops": "2 Loops",
    "etl": "3 ETL",
    "pending": "4 Pending",
    "expired": "5 Expired",
    "log": "6 Log",
}
#: Actions a read-only console does not have.
CONTROL_ACTIONS = {"toggle_loop", "start_all", "stop_all", "etl_pass"}


class Key(NamedTuple):
    """One key: where it works, the key as shown, what it does, the action it runs, the
    binding's keys and its footer label ("" when the footer does not show it)."""

    where: str
    key: str
    what: str
    action: str
    keys: str
    label: str


KEYS: list[Key] = [
    Key("everywhere", "1 … 6", "show Topics, Loops, ETL, Pending, Expired, Log", "", "", ""),
    Key("everywhere", "Tab", "move the focus (table, filter)", "", "", ""),
    Key("everywhere", "?", "this help", "help", "question_mark", "help"),
    Key("everywhere", "Ctrl+P", "command palette: find any action by name", "", "", ""),
    Key("everywhere", "r", "refresh now", "refresh", "r", ""),
    Key("everywhere", "q", "quit (the loops stop cleanly)", "quit", "q", "quit"),
    Key("loops", "f", "start/stop from-kafka", "toggle_loop('from-kafka')", "f", "from-kafka"),
    Key("loops", "e", "start/stop the ETL loop", "toggle_loop('etl')", "e", "etl"),
    Key("loops", "t", "start/stop to-kafka", "toggle_loop('to-kafka')", "t", "to-kafka"),
    Key("loops", "y", "start/stop the apply loop (tables)", "toggle_loop('apply')", "y", ""),
    Key("loops", "a", "start all loops", "start_all", "a", ""),
    Key("loops", "x", "stop all loops", "stop_all", "x", ""),
    Key("loops", "p", "run one ETL pass now and show its result", "etl_pass", "p", "pass"),
    Key("demo", "n", "publish the next demo batch", "next_batch", "n", "next batch"),
    Key("topics", "d", "browse dead letters", "dead_letters", "d", ""),
    Key("tables", "↑ ↓ PgUp PgDn", "move in a table", "", "", ""),
    Key("pending/expired", "/", "filter the table", "filter", "slash", ""),
    Key("pending/expired", "Esc", "clear the filter", "clear_filter", "escape", ""),
    Key("pending/expired", "s / S", "sort by the next column / reverse", "sort", "s", ""),
    Key("pending/expired", "Enter", "show the full record (pretty JSON)", "", "", ""),
]

BINDINGS: list[BindingType] = [
    *(Binding(str(i + 1), f"panel('{p}')", PANEL_TITLES[p][2:], show=False) for i, p in enumerate(PANELS)),
    *(
        Binding(k.keys, k.action, k.label or k.what, show=bool(k.label))
        for k in KEYS
        if k.keys and k.action not in ("sort", "clear_filter")
    ),
    Binding("S", "sort(True)", "Reverse sort", show=False),
    Binding("s", "sort", "Sort", show=False),
    Binding("escape", "clear_filter", "Clear filter", show=False),
]


def applies(key: Key, *, read_only: bool, demo: bool) -> bool:
    """Whether the help lists ``key`` for this console."""
    if read_only and key.action.split("(")[0] in CONTROL_ACTIONS:
        return False
    return not (key.where == "demo" and not demo)
