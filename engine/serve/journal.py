"""What a process said, kept for readers that come and go: the loops' events and the
engine's log lines, each numbered, read since a cursor (``GET /v1/events?after=N``,
``GET /v1/log?after=N``; the console polls them).

A :class:`Journal` keeps the last :data:`CAPACITY` entries; a reader whose cursor fell
behind gets ``dropped`` (how many it missed). The same entries are the lines of
``--log-format json`` (:func:`json_line`): one JSON object per line with ``time``,
``level``, ``pipeline``, ``loop``, ``event``, ``message`` and the event's fields.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.services.service import ServiceEvent

#: Entries a journal keeps.
CAPACITY = 2000

#: The level of an event of each kind (the rest are ``info``).
EVENT_LEVELS = {
    "failed": "error",
    "error": "error",
    "unreachable": "warning",
    "retrying": "warning",
    "waiting": "info",
}


@dataclass(frozen=True)
class Entry:
    """One event or log line: ``loop`` (None: the process), ``event`` (its kind, or
    ``log`` for a log line), ``source`` (the logger, for log lines)."""

    seq: int
    at: float
    level: str
    loop: str | None
    event: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None

    def to_json(self, pipeline: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "seq": self.seq,
            "at": self.at,
            "time": datetime.fromtimestamp(self.at, UTC).isoformat(timespec="milliseconds"),
            "level": self.level,
            "pipeline": pipeline,
            "loop": self.loop,
            "event": self.event,
            "message": self.message,
        }
        if self.source:
            data["logger"] = self.source
        for key, value in self.fields.items():
            data.setdefault(key, value)
        return data


def event_entry(event: ServiceEvent, seq: int = 0) -> Entry:
    return Entry(
        seq, event.at, EVENT_LEVELS.get(event.kind, "info"), event.service, event.kind,
        event.message, dict(event.fields),
    )  # fmt: skip


def record_entry(record: logging.LogRecord, seq: int = 0) -> Entry:
    """A log record as an entry (its first line: the console shows one line each)."""
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string must not break logging
        message = str(record.msg)
    loop = getattr(record, "loop", None)
    return Entry(
        seq, record.created, record.levelname.lower(), loop, "log",
        message.splitlines()[0] if message else "", {}, record.name,
    )  # fmt: skip


def json_line(entry: Entry, pipeline: str | None) -> str:
    """One line of ``--log-format json`` (a journal's numbering and the Unix time left
    out: ``time`` says when)."""
    data = entry.to_json(pipeline)
    del data["seq"], data["at"]
    return json.dumps(data, default=str, separators=(",", ":"))


class Journal:
    """Numbered entries, the last :data:`CAPACITY` of them (thread-safe)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._lock = threading.Lock()
        self._entries: deque[Entry] = deque(maxlen=capacity)
        self._seq = 0

    def add(self, entry: Entry) -> Entry:
        with self._lock:
            self._seq += 1
            numbered = Entry(
                self._seq, entry.at, entry.level, entry.loop, entry.event, entry.message,
                entry.fields, entry.source,
            )  # fmt: skip
            self._entries.append(numbered)
        return numbered

    def event(self, event: ServiceEvent) -> None:
        """A loop's event (a service listener)."""
        self.add(event_entry(event))

    def note(self, message: str, *, level: str = "info", loop: str | None = None) -> None:
        self.add(Entry(0, time.time(), level, loop, "note", message))

    def since(self, after: int, limit: int = 500) -> tuple[list[Entry], int, int]:
        """Entries after cursor ``after`` (at most ``limit``), the new cursor, and how many
        were dropped before the reader could see them."""
        with self._lock:
            items = list(self._entries)
            last = self._seq
        if after > last:  # a cursor of an earlier life of the process: from the start
            after = 0
        first = items[0].seq if items else last + 1
        fresh = [e for e in items if e.seq > after][:limit]
        return fresh, (fresh[-1].seq if fresh else last), max(0, first - after - 1)


class JournalHandler(logging.Handler):
    """Puts the engine's log records (``engine.*``, INFO and up) in a journal."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(level=logging.INFO)
        self.journal = journal

    def emit(self, record: logging.LogRecord) -> None:
        self.journal.add(record_entry(record))
