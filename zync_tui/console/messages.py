"""What the console's workers report, as past-tense messages with typed payloads.

Workers run the engine in threads and post one of these when they finish; the app's
handlers update the panels. Snapshot messages declare :meth:`can_replace`, so a newer
snapshot replaces one still queued (the console never falls behind its own polls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from textual.message import Message

from engine.api import DeadLetter, EtlReport, PassResult, TablesReport, TopicsReport
from zync_tui.console.views import LogEntry, LoopView

#: What a loop control did.
LoopAction: TypeAlias = Literal["start", "stop"]


class _Refreshed(Message):
    def can_replace(self, message: Message) -> bool:
        return type(message) is type(self)


@dataclass
class EngineStarted(Message):
    """The engine was set up (profiles, configuration, lake, loops); notes say how."""

    notes: list[str]


@dataclass
class EngineFailed(Message):
    """Setting the engine up failed; the console keeps showing what it can."""

    error: str


@dataclass
class TopicsRefreshed(_Refreshed):
    """A new snapshot of the topics: watermarks, the lake's offsets, lag, dead letters."""

    report: TopicsReport


@dataclass
class LoopsRefreshed(_Refreshed):
    """The loops' states, last commits and errors."""

    loops: list[LoopView]


@dataclass
class TablesRefreshed(_Refreshed):
    """The tables the apply loop keeps: versions, rows, staging versions applied."""

    report: TablesReport


@dataclass
class EtlRefreshed(_Refreshed):
    """A new snapshot of the ETL: cursors, counts, pending and expired records."""

    report: EtlReport


@dataclass
class LogDrained(Message):
    """Log lines gathered since the last poll (never replaced: each is shown once)."""

    entries: list[LogEntry]


@dataclass
class LoopChanged(Message):
    """A loop was started or stopped (``error``: why it could not be)."""

    loop: str
    action: LoopAction
    error: str | None = None


@dataclass
class EtlPassStarted(Message):
    """An ETL pass asked from the console began."""


@dataclass
class EtlPassFinished(Message):
    """One ETL pass ended; ``result`` is what it did, or ``error`` says why it failed."""

    result: PassResult | None = None
    error: str | None = None
    seconds: float = 0.0


@dataclass
class BatchPublished(Message):
    """The demo published its next batch (``error`` when it could not)."""

    text: str
    error: str | None = None


@dataclass
class DeadLettersLoaded(Message):
    """The dead letters of the lake's raw pools (``error`` when they could not be read)."""

    letters: list[DeadLetter]
    error: str | None = None


#: The messages a poll brings its snapshot in (zync_tui/console/snapshots.py shows them).
Snapshot: TypeAlias = TopicsRefreshed | LoopsRefreshed | TablesRefreshed | EtlRefreshed | LogDrained
