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
    Key("everywhere", "?", "this help", "help", "question_mark", "help"),
    Key("everywhere", "Ctrl+P", "command palette: find any action by name", "", "", ""),
    Key("everywhere", "r", "refresh now", "refresh", "r", ""),
    Key("everywhere", "q", "quit (the loops stop cleanly)", "quit", "q", "quit"),
    Key("tables", "/", "filter the panel's table: rows holding every word typed", "filter", "slash", "filter"),
    Key("tables", "Enter Esc", "(typing a filter) keep it / clear it", "", "", ""),
    Key("tables", "Esc", "clear the filter", "clear_filter", "escape", ""),
    Key("tables", "s", "sort by the next column (after the last: the engine's order)", "sort", "s", "sort"),
    Key("tables", "S", "reverse the sort", "sort(True)", "S", ""),
    Key("tables", "↑ k", "up a row", "cursor('move', -1)", "up,k", ""),
    Key("tables", "↓ j", "down a row", "cursor('move', 1)", "down,j", ""),
    Key("tables", "PgUp", "up a page", "cursor('page', -1)", "pageup", ""),
    Key("tables", "PgDn", "down a page", "cursor('page', 1)", "pagedown", ""),
    Key("tables", "Home g", "the first row", "cursor('edge', 0)", "home,g", ""),
    Key("tables", "End G", "the last row", "cursor('edge', 1)", "end,G", ""),
    Key("tables", "← →", "scroll a wide table sideways", "cursor('sideways', -1)", "left", ""),
    Key("tables", "→", "", "cursor('sideways', 1)", "right", ""),
    Key("tables", "Enter", "the full record (Pending, Expired), the whole line (Log)", "select_row", "enter", ""),
    Key("tables", "Tab", "the Loops panel: its loops, or its tables; the filter: back to the table", "next_table", "tab", ""),
    Key("loops", "f", "start/stop from-kafka", "toggle_loop('from-kafka')", "f", "from-kafka"),
    Key("loops", "e", "start/stop the ETL loop", "toggle_loop('etl')", "e", "etl"),
    Key("loops", "t", "start/stop to-kafka", "toggle_loop('to-kafka')", "t", "to-kafka"),
    Key("loops", "y", "start/stop the apply loop (tables)", "toggle_loop('apply')", "y", ""),
    Key("loops", "a", "start all loops", "start_all", "a", ""),
    Key("loops", "x", "stop all loops", "stop_all", "x", ""),
    Key("loops", "p", "run one ETL pass now and show its result", "etl_pass", "p", "pass"),
    Key("demo", "n", "publish the next demo batch", "next_batch", "n", "next batch"),
    Key("topics", "d", "browse dead letters", "dead_letters", "d", ""),
]

#: The footer's order: quitting last.
_FOOTER = sorted((k for k in KEYS if k.keys), key=lambda k: k.action == "quit")

BINDINGS: list[BindingType] = [
    *(Binding(str(i + 1), f"panel('{p}')", PANEL_TITLES[p][2:], show=False) for i, p in enumerate(PANELS)),
    *(
        Binding(k.keys, k.action, k.label or k.what or k.action, show=bool(k.label), priority=k.keys == "tab")
        for k in _FOOTER
    ),
]

#: Actions the footer shows whose keys type into the filter while it has the focus (the
#: footer then does not offer them).
TYPED = {k.action.split("(")[0] for k in KEYS if k.label}
#: Actions on the main screen's tables (none while a screen is on top of it).
ROUTED = {"cursor", "select_row", "next_table"}


def applies(key: Key, *, read_only: bool, demo: bool) -> bool:
    """Whether the help lists ``key`` for this console."""
    if not key.what or (read_only and key.action.split("(")[0] in CONTROL_ACTIONS):
        return False
    return not (key.where == "demo" and not demo)


def help_keys(*, read_only: bool, demo: bool) -> list[tuple[str, str, str]]:
    """(where, key, what it does) of every key this console has."""
    return [(k.where, k.key, k.what) for k in KEYS if applies(k, read_only=read_only, demo=demo)]
