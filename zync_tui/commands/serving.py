"""What every long-running command shares: its API (``--http``, ``--control-token-file``,
``--http-public-read``, ``--wedged-after``, ``--no-api``) and its lines (``--log-format``).

:func:`serving` starts a process's API (engine.api.serve) for the length of a block:
its Unix socket under the zync home always, TCP with ``--http``. :class:`Lines` prints
what the loops say: today's lines on a terminal (``text``), or one JSON object per line
(``json``: time, level, pipeline, loop, event, message and the event's fields), the
engine's log lines included.
"""

# No `from __future__ import annotations`: typer reads the annotations at import time.

import enum
import logging
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from zync_tui.durations import duration_option
from zync_tui.errors import UserError
from zync_tui.event_fold import FOLD_OUTPUTS, EventFold

if TYPE_CHECKING:
    from engine.api import ApiServer, ServedProcess, ServiceEvent


class LogFormat(enum.StrEnum):
    text = "text"
    json = "json"


HttpOption = Annotated[
    str | None,
    typer.Option(
        "--http",
        metavar="HOST:PORT",
        help="Also serve the API on TCP (e.g. 0.0.0.0:9464), beside the Unix socket under the "
        "zync home. Control needs the token; reads too, unless --http-public-read.",
        show_default=False,
    ),
]
TokenFileOption = Annotated[
    Path | None,
    typer.Option(
        "--control-token-file",
        metavar="FILE",
        help="The bearer token of the API over TCP (default: $ZYNC_CONTROL_TOKEN).",
        show_default=False,
    ),
]
PublicReadOption = Annotated[
    bool,
    typer.Option(
        "--http-public-read",
        help="Over TCP, serve /healthz, /readyz, /metrics and /v1/status without the token "
        "(control still needs it).",
    ),
]
WedgedAfterOption = Annotated[
    float,
    typer.Option(
        "--wedged-after",
        parser=duration_option,
        metavar="DURATION",
        help="/healthz fails when a loop made no progress this long without waiting on "
        "purpose (set it above your longest ETL pass).",
    ),
]
NoApiOption = Annotated[
    bool, typer.Option("--no-api", help="Serve no API (no socket, no port).")
]
LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--log-format",
        help="text: a line of words per event; json: one JSON object per line (time, level, "
        "pipeline, loop, event, message and the event's fields), for log collectors.",
    ),
]


@dataclass(frozen=True)
class ApiOptions:
    http: str | None = None
    token_file: Path | None = None
    public_read: bool = False
    wedged_after: float = 300.0
    enabled: bool = True


@contextmanager
def serving(process: "ServedProcess", options: ApiOptions, lines: "Lines") -> Iterator["ApiServer | None"]:
    """The process's API while the block runs (None with ``--no-api``)."""
    from engine.api import (
        Guard,
        ListenError,
        TokenError,
        api_socket_path,
        load_token,
        parse_address,
        serve,
        zync_home,
    )

    if not options.enabled:
        yield None
        return
    process.wedged_after = options.wedged_after
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            token = load_token(options.token_file)
        for warning in caught:
            lines.note(f"warning: {warning.message}", level="warning")
        tcp = parse_address(options.http) if options.http else None
        if tcp is not None and token is None and not options.public_read:
            raise UserError(
                "--http serves nothing without a token: set $ZYNC_CONTROL_TOKEN or "
                "--control-token-file (and --http-public-read to scrape without it)"
            )
        path = api_socket_path(zync_home(), process.pipeline, process.role)
        server = serve(process, socket_path=path, tcp=tcp, guard=Guard(token, public_read=options.public_read))
    except (ListenError, TokenError) as exc:
        raise UserError(str(exc)) from None
    lines.note(f"API on {server.where()}")
    try:
        yield server
    finally:
        server.stop()


class Lines:
    """Prints the loops' events and the process's notes, as text or JSON lines."""

    def __init__(
        self, fmt: LogFormat, pipeline: str | None = None, *, notes: str | None = "stdout"
    ) -> None:
        """``notes``: where text notes go (``stdout``, ``stderr``, None: nowhere)."""
        self.json = fmt is LogFormat.json
        self.pipeline = pipeline
        self.notes = notes
        self._lock = threading.Lock()
        self._handler: logging.Handler | None = None
        self._folds: dict[str, EventFold] = {}

    def fold(self, service: str, outputs: int) -> None:
        """Text lines of ``service`` with more than FOLD_OUTPUTS ``outputs``: its routine
        per-output events folded into one line every few seconds
        (:mod:`zync_tui.event_fold`); until :meth:`unfold`."""
        if self.json or outputs <= FOLD_OUTPUTS or service in self._folds:
            return
        from zync_tui.long_running import status_line

        self._folds[service] = EventFold(lambda text: status_line(f"{service:<10} {text}"))

    def folds(self, service: str) -> bool:
        """Whether ``service``'s routine lines are folded."""
        return service in self._folds

    def unfold(self) -> None:
        """Print what the folds hold, and stop folding."""
        folds, self._folds = self._folds, {}
        for fold in folds.values():
            fold.close()

    def event(self, event: "ServiceEvent") -> None:
        fold = self._folds.get(event.service)
        if fold is not None and fold.take(event.kind, dict(event.fields)):
            return
        if self.json:
            from engine.api import event_entry, json_line

            self._write(json_line(event_entry(event), self.pipeline))
        else:
            from zync_tui.long_running import status_line

            status_line(f"{event.service:<10} {event.message}", event.at)

    def note(self, message: str, *, level: str = "info", loop: str | None = None, **fields: object) -> None:
        """A line of the process itself (``loop`` None) or about one loop."""
        if self.json:
            from engine.api import JournalEntry, json_line

            entry = JournalEntry(0, time.time(), level, loop, "note", message, fields)
            self._write(json_line(entry, self.pipeline))
        elif self.notes == "stderr":
            from zync_tui.errors import err_console

            err_console.print(message, markup=False, highlight=False, style="dim")
        elif self.notes:
            from zync_tui.long_running import status_line

            status_line(message)

    def _write(self, line: str) -> None:
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    @contextmanager
    def engine_log(self) -> Iterator[None]:
        """With JSON lines, the engine's log records (INFO and up) as JSON lines too."""
        if not self.json:
            yield
            return
        lines = self

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                from engine.api import json_line, record_entry

                lines._write(json_line(record_entry(record), lines.pipeline))

        handler = Handler(level=logging.INFO)
        logger = logging.getLogger("engine")
        logger.addHandler(handler)
        before = logger.level
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(before)
