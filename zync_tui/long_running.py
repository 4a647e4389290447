"""What the long-running commands (`zync to-kafka`, `zync apply`, `zync run`) share:
a status line per event, stopping on SIGINT/SIGTERM after the work in flight, the lake
staged outputs are read from, and the options naming an output's format and envelope."""

# No `from __future__ import annotations`: typer reads these annotations at import time.

import enum
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from zync_tui.shared_options import open_lake

if TYPE_CHECKING:
    from engine.api import Lake

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


class OutputFormat(enum.StrEnum):
    avro = "avro"
    connect_json = "connect-json"
    json = "json"


class EnvelopeChoice(enum.StrEnum):
    jdbc = "jdbc"
    debezium = "debezium"
    differential = "differential"
    materialize = "materialize"


ENVELOPE_HELP = (
    "jdbc: key and value as staged (null value = tombstone); debezium: Debezium change "
    "events {before, after, source, op, ts_ms}, a tombstone after each delete; "
    "differential: update {record, time, diff} and progress {time, count} messages, one "
    "time per staging commit; materialize: Materialize's CDCv2 Avro format (ENVELOPE "
    "MATERIALIZE), consolidated updates and progress statements. Default: each output's "
    "`envelope:` in the configuration, else jdbc."
)

TakeOverOption = Annotated[
    bool,
    typer.Option(
        "--take-over-topic",
        help="Deliver even to a topic last written by another staging pool (a recreated "
        "lake, another ETL), deleted and created again since this pool delivered to it, or "
        "whose committed position expired where its records cannot stand in: this pool's "
        "outputs go from its first one, after what the topic holds. Without it, such a "
        "topic stops to-kafka with one line saying which.",
    ),
]




def status_line(message: str, at: float | None = None) -> None:
    """Print one status line: the time, then the message."""
    stamp = time.strftime("%H:%M:%S", time.localtime(at if at is not None else time.time()))
    _out.print(f"[dim]{stamp}[/] {escape(message)}")


@contextmanager
def stop_on_signals(stop: threading.Event, what: str) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop`` (the loops finish what is in flight); a second
    Ctrl-C aborts at once (exit 130)."""
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        _err.print(f"{name}: stopping after {what} in flight (Ctrl-C again to abort)")

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def staged_lake(lake: str | None) -> "Lake":
    """The lake to deliver from; a local one must exist (nothing is staged otherwise)."""
    return open_lake(lake, must_exist="nothing is staged there (pass --lake, or set ZYNC_LAKE)")
